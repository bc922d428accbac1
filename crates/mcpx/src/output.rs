//! What the CLI prints: short aligned tables with a hint at the next command, or
//! JSON with `--json` (field names are part of the interface contract).
//!
//! Everything goes out through [`say`], [`warn`] and [`say_json`], which escape
//! control characters (`sanitize`): most of what is printed comes from servers.

use std::path::Path;

use mcpx_daemon::api::{ApiError, ErrorBody, ErrorKind, InstanceStatus, SearchHit, ServerRow, Source, Status};
use mcpx_daemon::config::{Client, ConfigEnv};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::sanitize;

/// Prints an error (one line on stderr, or `{"error":{...}}` on stdout with
/// `--json`) and returns its exit status.
pub fn error(json: bool, e: &ApiError) -> i32 {
    if json {
        say_json(&serde_json::to_string(&ErrorBody { error: e.clone() }).unwrap_or_default());
    } else {
        warn(&format!("mcpx: {}", e.message));
    }
    e.exit_code()
}

/// Prints one line (or several) of human output on stdout, control characters
/// escaped.
pub fn say(text: &str) {
    println!("{}", sanitize::text(text));
}

/// [`say`] on stderr.
pub fn warn(text: &str) {
    eprintln!("{}", sanitize::text(text));
}

/// Prints JSON text on stdout, with the same value but no raw control character.
pub fn say_json(text: &str) {
    println!("{}", sanitize::json(text));
}

/// Prints rows as aligned columns, each cell escaped first so that the columns
/// align on what the terminal shows.
pub fn table(header: &[&str], rows: &[Vec<String>]) {
    say(table_text(header, rows).trim_end());
}

/// [`table`]'s text, each line ending with a newline.
pub fn table_text(header: &[&str], rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> =
        rows.iter().map(|row| row.iter().map(|cell| sanitize::text(cell).into_owned()).collect()).collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let mut text = String::new();
    let mut line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<w$}  ", w = widths[i]));
            }
        }
        text.push_str(out.trim_end());
        text.push('\n');
    };
    line(header.to_vec());
    for row in &rows {
        line(row.iter().map(String::as_str).collect());
    }
    text
}

fn one_line(text: Option<&str>, max: usize) -> String {
    let first = text.unwrap_or_default().lines().next().unwrap_or_default().trim();
    if first.chars().count() > max {
        format!("{}…", first.chars().take(max - 1).collect::<String>())
    } else {
        first.to_owned()
    }
}

/// `mcpx ls`: a row per server; with `long`, a SOURCE column (the client of an imported
/// file, else the file, `~` for HOME). `hint` replaces the usual advice when no server is
/// configured (what `mcpx import` would find). File-level warnings (rows of state
/// `warning`) and each server's warnings go to stderr, so the table on stdout stays the same.
pub fn ls(json: bool, rows: &[ServerRow], long: bool, hint: Option<&str>) {
    if json {
        say_json(&serde_json::to_string_pretty(rows).unwrap_or_default());
        return;
    }
    let (notes, servers): (Vec<&ServerRow>, Vec<&ServerRow>) = rows.iter().partition(|r| is_file_warning(r));
    if servers.is_empty() {
        say(hint.unwrap_or(
            "no servers configured; add them under \"mcpServers\" in .mcp.json or ~/.config/mcpx/config.json, \
             or bring in another client's with `mcpx import`",
        ));
    } else {
        let env = ConfigEnv::from_vars(&std::env::vars().collect());
        let cells: Vec<Vec<String>> = servers
            .iter()
            .map(|r| {
                let about = match &r.error {
                    Some(e) => one_line(Some(e), 100),
                    None => one_line(r.description.as_deref(), 60),
                };
                let mut row = vec![
                    r.name.clone(),
                    r.tools.map_or("-".into(), |n| n.to_string()),
                    r.state.clone(),
                    r.live.to_string(),
                    format!("{}/{}", r.sharing, r.scope),
                    about,
                ];
                if long {
                    row.insert(5, source(r, &env));
                }
                row
            })
            .collect();
        let mut header = vec!["NAME", "TOOLS", "STATE", "LIVE", "POOL", "DESCRIPTION"];
        if long {
            header.insert(5, "SOURCE");
        }
        table(&header, &cells);
        println!("\nnext: `mcpx tools <server>` lists a server's tools; `mcpx search <words>` finds one");
        untrusted_note(&servers);
    }
    for warning in notes.iter().chain(&servers).flat_map(|r| &r.warnings) {
        warn(&format!("warning: {warning}"));
    }
}

/// After the `ls` table: the project files whose servers are `untrusted`, and that the
/// user (not an agent) reviews them and runs `mcpx trust`.
fn untrusted_note(rows: &[&ServerRow]) {
    let mut files: Vec<&Path> =
        rows.iter().filter(|r| r.state == "untrusted").map(|r| r.source.file.as_path()).collect();
    files.sort();
    files.dedup();
    for file in files {
        println!(
            "untrusted: the servers of {} run nothing until the user reviews the file and runs `mcpx trust` in {} (for the user to decide, not an agent)",
            file.display(),
            mcpx_daemon::config::project_dir(file).display()
        );
    }
}

/// Whether an `ls` row is a file-level warning (a file's path as `name`, state
/// `warning`), not a server.
pub fn is_file_warning(row: &ServerRow) -> bool {
    row.state == "warning"
}

/// Where a server comes from, for `ls --long`: the client, for a server of a client's
/// user-level file (an import); else the file, with `~` for HOME.
fn source(row: &ServerRow, env: &ConfigEnv) -> String {
    let Source { file, client } = &row.source;
    let client = client.as_deref().and_then(|c| c.parse::<Client>().ok());
    match client {
        Some(client) if client.user_file(env).as_deref() == Some(file.as_path()) => client.name().to_owned(),
        _ => tilde(file, env.home.as_deref()),
    }
}

/// `path` with `home` written `~`.
pub fn tilde(path: &Path, home: Option<&Path>) -> String {
    match home.filter(|h| *h != Path::new("/")).and_then(|h| path.strip_prefix(h).ok()) {
        Some(rest) => format!("~/{}", rest.display()),
        None => path.display().to_string(),
    }
}

/// `mcpx tools <server> [<tool>]`.
pub fn tools(json: bool, server: &str, one: bool, body: &[u8]) -> Result<(), ApiError> {
    if json || one {
        let value: serde_json::Value =
            serde_json::from_slice(body).map_err(|e| ApiError::new(ErrorKind::Daemon, e.to_string()))?;
        if json && !one {
            // Exactly as the server sent them.
            say_json(&String::from_utf8_lossy(body));
        } else {
            say_json(&serde_json::to_string_pretty(&value).unwrap_or_default());
        }
        return Ok(());
    }
    #[derive(Deserialize)]
    struct Tool {
        name: String,
        #[serde(default)]
        description: Option<String>,
    }
    let list: Vec<Tool> = serde_json::from_slice(body).map_err(|e| ApiError::new(ErrorKind::Daemon, e.to_string()))?;
    let cells: Vec<Vec<String>> =
        list.iter().map(|t| vec![t.name.clone(), one_line(t.description.as_deref(), 80)]).collect();
    table(&["TOOL", "DESCRIPTION"], &cells);
    say(&format!(
        "\nnext: `mcpx tools {server} <tool>` shows a tool's schema; `mcpx call {server}.<tool> '{{...}}'` calls it"
    ));
    Ok(())
}

/// `mcpx search`.
pub fn search(json: bool, hits: &[SearchHit]) {
    if json {
        say_json(&serde_json::to_string_pretty(hits).unwrap_or_default());
        return;
    }
    if hits.is_empty() {
        println!("no tool matches; `mcpx ls` shows servers never listed (state unread): `mcpx refresh` reads them");
        return;
    }
    let cells: Vec<Vec<String>> =
        hits.iter().map(|h| vec![format!("{}.{}", h.server, h.tool), one_line(h.description.as_deref(), 80)]).collect();
    table(&["TOOL", "DESCRIPTION"], &cells);
    println!("\nnext: `mcpx tools <server> <tool>` shows a tool's schema");
}

/// `mcpx call`: text blocks as text; with none, the structured content as JSON;
/// other blocks one line each. `isError` results exit 1.
pub fn call_result(json: bool, body: &[u8]) -> Result<i32, ApiError> {
    #[derive(Deserialize)]
    struct Block {
        #[serde(rename = "type")]
        kind: String,
        #[serde(default)]
        text: Option<String>,
        #[serde(default)]
        data: Option<String>,
        #[serde(rename = "mimeType", default)]
        mime_type: Option<String>,
        #[serde(default)]
        resource: Option<serde_json::Value>,
        #[serde(default)]
        uri: Option<String>,
    }
    #[derive(Deserialize)]
    struct CallToolResult {
        #[serde(default)]
        content: Vec<Block>,
        #[serde(rename = "structuredContent", default)]
        structured: Option<Box<RawValue>>,
        #[serde(rename = "isError", default)]
        is_error: bool,
    }
    let result: CallToolResult = serde_json::from_slice(body)
        .map_err(|e| ApiError::new(ErrorKind::Protocol, format!("the server's tools/call result is malformed: {e}")))?;
    if json {
        say_json(&String::from_utf8_lossy(body));
    } else {
        let texts: Vec<&str> =
            result.content.iter().filter_map(|b| b.text.as_deref().filter(|_| b.kind == "text")).collect();
        if !texts.is_empty() {
            for t in &texts {
                say(t);
            }
        } else if let Some(s) = &result.structured {
            let v: serde_json::Value = serde_json::from_str(s.get()).unwrap_or_default();
            say_json(&serde_json::to_string_pretty(&v).unwrap_or_default());
        }
        for b in result.content.iter().filter(|b| b.kind != "text") {
            let size = b.data.as_ref().map(|d| format!(", {} bytes base64", d.len())).unwrap_or_default();
            let what = b
                .mime_type
                .clone()
                .or_else(|| b.uri.clone())
                .or_else(|| b.resource.as_ref().and_then(|r| r.get("uri")).and_then(|u| u.as_str()).map(str::to_owned))
                .unwrap_or_default();
            say(&format!("[{} {what}{size}]", b.kind));
        }
    }
    if result.is_error {
        warn("mcpx: the tool reported an error (isError)");
        return Ok(1);
    }
    Ok(0)
}

/// `mcpx status`.
pub fn status(json: bool, status: &Status, body: &[u8]) {
    if json {
        say_json(&String::from_utf8_lossy(body));
        return;
    }
    let d = &status.daemon;
    say(&format!("daemon  pid {}  build {}  up {}s  socket {}", d.pid, d.build, d.uptime_s, d.socket.display()));
    say(&format!("log     {}", d.log_file.display()));
    if let Some(url) = &d.http_url {
        say(&format!("http    {url}"));
    }
    for w in &d.warnings {
        say(&format!("WARNING {w}"));
    }
    for e in &d.config_errors {
        say(&format!("ERROR   {}", e.message));
    }
    if status.instances.is_empty() {
        println!("\nno instances running; `mcpx call <server>.<tool>` starts one");
        return;
    }
    println!();
    let told_apart = told_apart(&status.instances);
    let cells: Vec<Vec<String>> = status
        .instances
        .iter()
        .map(|i| {
            let mut row = vec![
                i.server.clone(),
                i.key.clone(),
                i.pid.map_or("-".into(), |p| p.to_string()),
                i.state.clone(),
                i.calls.to_string(),
                i.idle_s.map_or("-".into(), |s| format!("{s}s")),
                i.dropped_bytes.to_string(),
                one_line(i.last_error.as_deref(), 80),
            ];
            if told_apart {
                row.insert(2, origin(i));
            }
            row
        })
        .collect();
    let mut header = vec!["SERVER", "KEY", "PID", "STATE", "CALLS", "IDLE", "DROPPED", "LAST ERROR"];
    if told_apart {
        header.insert(2, "FROM");
    }
    table(&header, &cells);
    for i in status.instances.iter().filter(|i| !i.stderr_tail.trim().is_empty() && i.state != "running") {
        say(&format!("\n{} stderr (tail):", i.server));
        for line in i.stderr_tail.trim_end().lines().rev().take(10).collect::<Vec<_>>().into_iter().rev() {
            say(&format!("  {line}"));
        }
    }
}

/// Whether two rows of one server differ in where they come from (config file, URL
/// or command), so the table needs a `FROM` column to tell them apart.
fn told_apart(instances: &[InstanceStatus]) -> bool {
    instances
        .iter()
        .enumerate()
        .any(|(n, a)| instances[n + 1..].iter().any(|b| a.server == b.server && origin(a) != origin(b)))
}

/// An instance's config file and URL or command, as written: `FILE: COMMAND`.
fn origin(i: &InstanceStatus) -> String {
    let what = i.url.as_deref().or(i.command.as_deref()).unwrap_or("-");
    match &i.source {
        Some(source) => format!("{}: {what}", source.display()),
        None => what.to_owned(),
    }
}

/// A short acknowledgement.
pub fn done(json: bool, body: &[u8], human: &str) {
    if json {
        say_json(&String::from_utf8_lossy(body));
    } else {
        say(human);
    }
}

/// `mcpx refresh`: one line per server; exit 4 if any failed.
pub fn refresh(json: bool, body: &[u8]) -> Result<i32, ApiError> {
    let map: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(body).map_err(|e| ApiError::new(ErrorKind::Daemon, e.to_string()))?;
    let failed = map.values().any(|v| v.get("ok") != Some(&serde_json::Value::Bool(true)));
    if json {
        say_json(&String::from_utf8_lossy(body));
    } else {
        for (name, v) in &map {
            match v.get("error").and_then(|e| e.as_str()) {
                Some(e) => say(&format!("{name}: error: {e}")),
                None => say(&format!("{name}: refreshed")),
            }
        }
    }
    Ok(if failed { 4 } else { 0 })
}

/// A notification that arrived during `mcpx call`, on stderr: with `--json` the
/// message as one JSON line; else progress as `progress 2/3: message` and server
/// log messages as `log <level>: <data>`, on a terminal only.
pub fn notification(json: bool, message: &str) {
    use std::io::IsTerminal;
    if json {
        eprintln!("{}", sanitize::json(message));
        return;
    }
    if !std::io::stderr().is_terminal() {
        return;
    }
    let v: serde_json::Value = serde_json::from_str(message).unwrap_or_default();
    let p = &v["params"];
    match v["method"].as_str() {
        Some("notifications/progress") => {
            let total = p["total"].as_f64().map(|t| format!("/{t}")).unwrap_or_default();
            let text = p["message"].as_str().map(|m| format!(": {m}")).unwrap_or_default();
            warn(&format!("progress {}{total}{text}", p["progress"]));
        }
        Some("notifications/message") => {
            let data = p["data"].as_str().map(str::to_owned).unwrap_or_else(|| p["data"].to_string());
            warn(&format!("log {}: {data}", p["level"].as_str().unwrap_or("info")));
        }
        _ => {}
    }
}
