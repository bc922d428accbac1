//! What the CLI prints: short aligned tables with a hint at the next command, or
//! JSON with `--json` (field names are part of the interface contract).
//!
//! Everything goes out through [`say`], [`warn`] and [`say_json`], which escape
//! control characters (`sanitize`): most of what is printed comes from servers.

use std::path::Path;

use mcpx_api::{ApiError, ErrorBody, ErrorKind, InstanceStatus, SearchHit, ServerRow, Source, Status};
use mcpx_daemon::config::{Client, ConfigEnv};
use serde::Deserialize;
use serde_json::value::RawValue;

use mcpx_platform::sanitize;

mod content;
mod offers;
mod print;

pub use content::{Out, Render};
pub use offers::{prompt, prompts, read, resources};
use print::one_line;
pub use print::{say, say_json, table, table_text, warn};

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

/// The first sentence of a description or a server's instructions, as one plain line:
/// a heading ends it, as does a blank line or `.`, `!` or `?` followed by a space;
/// Markdown marks are removed (`#` headings, list and quote markers, `**`, `__`,
/// backticks, and links and images `[text](url)` kept as their text).
pub fn first_sentence(text: &str) -> String {
    let mut words: Vec<String> = Vec::new();
    for line in text.trim_start().lines() {
        let line = line.trim();
        if line.is_empty() {
            break;
        }
        let heading = line.trim_start_matches('#');
        if heading.len() < line.len() && (heading.is_empty() || heading.starts_with(' ')) {
            if words.is_empty() {
                return plain(heading.trim());
            }
            break;
        }
        let line = line.trim_start_matches(['>', ' ']);
        let line = line.strip_prefix("- ").or_else(|| line.strip_prefix("* ")).unwrap_or(line);
        words.push(plain(line));
    }
    let joined = words.join(" ");
    let end = joined
        .char_indices()
        .find(|&(i, c)| matches!(c, '.' | '!' | '?') && joined[i + 1..].starts_with(' '))
        .map_or(joined.len(), |(i, _)| i + 1);
    joined[..end].to_owned()
}

/// `line` without Markdown's inline marks: links and images as their text, no `**`,
/// `__` or backticks.
fn plain(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(open) = rest.find('[') {
        let (before, after) = rest.split_at(open);
        let link = after[1..].split_once("](").and_then(|(text, tail)| Some((text, tail.split_once(')')?.1)));
        match link {
            Some((text, tail)) => {
                out.push_str(before.strip_suffix('!').unwrap_or(before));
                out.push_str(text);
                rest = tail;
            }
            None => {
                out.push_str(&rest[..open + 1]);
                rest = &rest[open + 1..];
            }
        }
    }
    out.push_str(rest);
    out.replace("**", "").replace("__", "").replace('`', "")
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
                    None if r.held > 0 => format!("{} held: run `mcpx pins review {}`", r.held, r.name),
                    None => one_line(r.description.as_deref().map(first_sentence).as_deref(), 60),
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

/// `mcpx call`: each content block in order ([`Render::block`]: text as text, a
/// resource link as its name and URI, binary content saved with `--out` or described);
/// with no text block, the structured content as JSON first. `isError` results exit 1.
///
/// Errors: a malformed result (`protocol`), or content that cannot be saved (`usage`).
pub fn call_result(json: bool, body: &[u8], render: &mut Render) -> Result<i32, ApiError> {
    #[derive(Deserialize)]
    struct CallToolResult {
        #[serde(default)]
        content: Vec<serde_json::Value>,
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
        if let Some(s) = result.structured.as_ref().filter(|_| !result.content.iter().any(|b| b["type"] == "text")) {
            let v: serde_json::Value = serde_json::from_str(s.get()).unwrap_or_default();
            say_json(&serde_json::to_string_pretty(&v).unwrap_or_default());
        }
        for block in &result.content {
            render.block(block)?.iter().for_each(|line| say(line));
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
    if let Some(url) = &d.ui_url {
        say(&format!("ui      {url} (open it with `mcpx ui`)"));
    }
    for w in &d.warnings {
        say(&format!("WARNING {w}"));
    }
    for e in &d.config_errors {
        say(&format!("ERROR   {}", e.message));
    }
    for (server, n) in &d.held {
        say(&format!(
            "HELD    {server}: {n} held: run `mcpx pins review {server}` (for the user to decide, not an agent)"
        ));
    }
    if d.flagged_definitions > 0 {
        say(&format!(
            "FLAGGED {} tool or prompt definitions look like tool poisoning; `mcpx pins ls` shows what",
            d.flagged_definitions
        ));
    }
    if let Some(error) = &d.activity_error {
        say(&format!("ACTIVITY {} entries lost; {}", d.activity_lost, mcpx_platform::sanitize::line(error)));
    }
    if let Some(url) = &d.otel_url {
        say(&format!("OTEL     spans to {url}: {} exported, {} dropped", d.spans_exported, d.spans_dropped));
    }
    if let Some(error) = &d.otel_error {
        say(&format!("OTEL     {}", mcpx_platform::sanitize::line(error)));
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
                i.calls_served.to_string(),
                i.in_flight.to_string(),
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
    let mut header = vec!["SERVER", "KEY", "PID", "STATE", "SERVED", "IN FLIGHT", "IDLE", "DROPPED", "LAST ERROR"];
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_description_is_its_first_plain_sentence() {
        let everything = "# Everything Server – Server Instructions\n\nAudience: these are for an LLM.";
        assert_eq!(first_sentence(everything), "Everything Server – Server Instructions");
        assert_eq!(first_sentence("Reads **files** from `disk`. Also writes."), "Reads files from disk.");
        assert_eq!(
            first_sentence("See [the docs](https://x.dev/a.b) and\n![logo](l.png) here\n\nMore."),
            "See the docs and logo here"
        );
        assert_eq!(first_sentence("- a list item? yes"), "a list item?");
        assert_eq!(first_sentence("Version 1.2 is out"), "Version 1.2 is out");
    }
}
