//! Other clients' server entries, rewritten into mcpx's own shape before they are parsed.
//!
//! Each client names the same things its own way. [`normalize`] maps one entry of a file of
//! a given [`FileKind`] onto mcpx's keys (`command`/`args`/`env`/`cwd`, or `url`/`headers`/
//! `transport`, and an `mcpx` block), leaving every key it does not know in place:
//!
//! | client | its keys | mcpx's |
//! |---|---|---|
//! | Gemini CLI | `httpUrl` | `url` with `transport` `http` |
//! | Gemini CLI | `timeout` (ms), `includeTools`, `excludeTools` | `mcpx.callTimeout`, `mcpx.includeTools`, `mcpx.excludeTools` |
//! | Gemini CLI | top-level `mcp.allowed` / `mcp.excluded` | `mcpx.disabled` for the servers they leave out |
//! | Windsurf | `serverUrl`, `disabledTools` | `url`, `mcpx.excludeTools` |
//! | Codex | `http_headers`, `env_http_headers`, `bearer_token_env_var` | `headers` (`${VAR}` for the variables) |
//! | Codex | `enabled`, `enabled_tools`, `disabled_tools`, `startup_timeout_sec`/`_ms`, `tool_timeout_sec` | `mcpx.disabled`, `mcpx.includeTools`, `mcpx.excludeTools`, `mcpx.startTimeout`, `mcpx.callTimeout` |
//! | any other client | `disabled` | `mcpx.disabled` |
//!
//! A key the entry's own `mcpx` block sets wins over a mapped one.
//!
//! Variables: VS Code's predefined `${workspaceFolder}`, `${workspaceFolderBasename}`,
//! `${userHome}`, `${pathSeparator}` and `${/}` work in every file (the first two only in a
//! project file, whose folder they name). Gemini CLI's `$VAR` and `${VAR}` mean `${VAR:-}`
//! (an unset variable is empty there). Codex and Claude Desktop expand nothing, so a `${`
//! in their values is literal.

use serde_json::{Map, Value};

use super::clients::{Client, FileKind};

/// Rewrites one server entry of a file of `kind` into mcpx's shape (see the module docs).
pub(super) fn normalize(kind: &FileKind, mut entry: Map<String, Value>) -> Map<String, Value> {
    let literal = matches!(kind.client, Some(Client::Codex | Client::ClaudeDesktop));
    if literal {
        for_each_template(&mut entry, |s| *s = s.replace("${", "$${"));
    }
    let mut options = Map::new();
    match kind.client {
        Some(Client::Gemini) => {
            // `url` alone is streamable HTTP falling back to SSE, as Gemini CLI does it (its
            // docs call it the SSE endpoint); with `type` that type, as `gemini mcp add`
            // writes it.
            if let Some(url) = entry.remove("httpUrl") {
                entry.insert("url".into(), url);
                entry.entry("transport").or_insert_with(|| "http".into());
            }
            if let Some(ms) = entry.get("timeout").and_then(millis) {
                options.insert("callTimeout".into(), ms);
            }
            for key in ["includeTools", "excludeTools"] {
                if let Some(v) = entry.get(key) {
                    options.insert(key.into(), v.clone());
                }
            }
        }
        Some(Client::Windsurf) => {
            if let Some(url) = entry.remove("serverUrl") {
                entry.entry("url").or_insert(url);
            }
            if let Some(v) = entry.get("disabledTools") {
                options.insert("excludeTools".into(), v.clone());
            }
        }
        Some(Client::Codex) => codex(&mut entry, &mut options),
        _ => {}
    }
    if kind.client.is_some() {
        if let Some(v @ Value::Bool(_)) = entry.get("disabled") {
            options.entry("disabled").or_insert_with(|| v.clone());
        }
    }
    if !literal {
        for_each_template(&mut entry, |s| rewrite(kind, s));
    }
    if !options.is_empty() {
        match entry.get_mut("mcpx") {
            Some(Value::Object(block)) => {
                for (k, v) in options {
                    block.entry(k).or_insert(v);
                }
            }
            // A wrong `mcpx` block keeps its own error.
            Some(_) => {}
            None => {
                entry.insert("mcpx".into(), Value::Object(options));
            }
        }
    }
    entry
}

/// Gemini CLI's top-level `mcp.allowed` and `mcp.excluded` (server names): an entry left
/// out by them is marked `disabled`, as that client would not run it.
pub(super) fn gemini_allowed(mcp: &Value, entries: &mut [(String, Value)]) {
    let names =
        |key: &str| -> Option<Vec<&str>> { Some(mcp.get(key)?.as_array()?.iter().filter_map(Value::as_str).collect()) };
    let (allowed, excluded) = (names("allowed"), names("excluded").unwrap_or_default());
    for (name, entry) in entries.iter_mut() {
        let out = excluded.contains(&name.as_str()) || allowed.as_ref().is_some_and(|a| !a.contains(&name.as_str()));
        if let (true, Value::Object(map)) = (out, entry) {
            map.insert("disabled".into(), Value::Bool(true));
        }
    }
}

/// Whether an entry runs `mcpx serve` itself: how a client is connected to mcpx, so its
/// file (imported, or a shared `.mcp.json`) holds one. mcpx leaves such an entry out rather
/// than hold itself, which would start a `serve` per listing, each listing again.
pub fn runs_mcpx_serve(entry: &Map<String, Value>) -> bool {
    let Some(Value::String(command)) = entry.get("command") else {
        return false;
    };
    let program = command.rsplit('/').next().unwrap_or(command);
    let serve = |args: &Vec<Value>| args.iter().any(|a| a.as_str() == Some("serve"));
    program == "mcpx" && matches!(entry.get("args"), Some(Value::Array(args)) if serve(args))
}

/// Codex's keys (its `config.toml`, `[mcp_servers.NAME]`). Its values are literal (escaped
/// by the caller), so the `http_headers`' `${` is escaped before the header variables are
/// added as `${VAR}`.
fn codex(entry: &mut Map<String, Value>, options: &mut Map<String, Value>) {
    let mut headers = match entry.remove("http_headers") {
        Some(Value::Object(h)) => h,
        _ => Map::new(),
    };
    for (k, v) in headers.iter_mut() {
        if let Value::String(s) = v {
            *s = s.replace("${", "$${");
        } else {
            tracing::debug!(header = %k, "codex header value is not a string");
        }
    }
    if let Some(Value::Object(vars)) = entry.remove("env_http_headers") {
        for (name, var) in vars {
            if let Value::String(var) = var {
                // Codex leaves the header out when the variable is unset; here it is empty.
                headers.insert(name, format!("${{{var}:-}}").into());
            }
        }
    }
    if let Some(Value::String(var)) = entry.remove("bearer_token_env_var") {
        headers.insert("Authorization".into(), format!("Bearer ${{{var}}}").into());
    }
    if !headers.is_empty() {
        entry.insert("headers".into(), Value::Object(headers));
    }
    if let Some(Value::Bool(enabled)) = entry.get("enabled") {
        options.insert("disabled".into(), (!enabled).into());
    }
    for (theirs, ours) in [("enabled_tools", "includeTools"), ("disabled_tools", "excludeTools")] {
        if let Some(v) = entry.get(theirs) {
            options.insert(ours.into(), v.clone());
        }
    }
    if let Some(v @ Value::Number(_)) = entry.get("startup_timeout_sec") {
        options.insert("startTimeout".into(), v.clone());
    } else if let Some(ms) = entry.get("startup_timeout_ms").and_then(millis) {
        options.insert("startTimeout".into(), ms);
    }
    if let Some(v @ Value::Number(_)) = entry.get("tool_timeout_sec") {
        options.insert("callTimeout".into(), v.clone());
    }
}

/// A number of milliseconds as an mcpx duration (`"1500ms"`); `None` when not a number.
fn millis(v: &Value) -> Option<Value> {
    let ms = v.as_f64()?;
    Some(Value::String(format!("{}ms", ms.round() as u64)))
}

/// Calls `f` on every string mcpx expands: `command`, each of `args`, `env` and `headers`
/// values, `cwd` and `url`.
fn for_each_template(entry: &mut Map<String, Value>, mut f: impl FnMut(&mut String)) {
    for key in ["command", "cwd", "url"] {
        if let Some(Value::String(s)) = entry.get_mut(key) {
            f(s);
        }
    }
    if let Some(Value::Array(args)) = entry.get_mut("args") {
        args.iter_mut().filter_map(|a| if let Value::String(s) = a { Some(s) } else { None }).for_each(&mut f);
    }
    for key in ["env", "headers"] {
        if let Some(Value::Object(map)) = entry.get_mut(key) {
            map.values_mut().filter_map(|v| if let Value::String(s) = v { Some(s) } else { None }).for_each(&mut f);
        }
    }
}

/// Rewrites one template: VS Code's predefined variables, and Gemini CLI's `$VAR`.
fn rewrite(kind: &FileKind, s: &mut String) {
    if kind.client == Some(Client::Gemini) {
        *s = bare_vars(s);
    }
    if !s.contains("${") {
        return;
    }
    let mut out = s.replace("${userHome}", "${HOME}").replace("${pathSeparator}", "/").replace("${/}", "/");
    if let Some(dir) = &kind.workspace {
        // The folder is literal text in a template, so its own `${` is escaped.
        let folder = dir.display().to_string().replace("${", "$${");
        let base = dir.file_name().map(|b| b.to_string_lossy().replace("${", "$${")).unwrap_or_default();
        out = out.replace("${workspaceFolderBasename}", &base).replace("${workspaceFolder}", &folder);
    }
    *s = out;
}

/// Gemini CLI's `$NAME` and `${NAME}` as `${NAME:-}` (unset is empty there); `${NAME:-x}`
/// and a `$` not followed by a name stay.
fn bare_vars(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    let mut rest = s;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        let braced = after.strip_prefix('{');
        let body = braced.unwrap_or(after);
        let len = body.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(body.len());
        let name = &body[..len];
        let is_name = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
        let closed = braced.is_none() || body[len..].starts_with('}');
        if is_name && closed {
            out.push_str("${");
            out.push_str(name);
            out.push_str(":-}");
            rest = &body[len + usize::from(braced.is_some())..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kind(client: Option<Client>, workspace: Option<&str>) -> FileKind {
        FileKind { client, workspace: workspace.map(Into::into) }
    }

    fn norm(k: &FileKind, v: Value) -> Value {
        let Value::Object(map) = v else { panic!("not an object") };
        Value::Object(normalize(k, map))
    }

    #[test]
    fn gemini_http_url_timeout_and_variables() {
        let g = kind(Some(Client::Gemini), None);
        let out = norm(&g, json!({"httpUrl": "https://h/mcp", "headers": {"A": "$TOKEN x"}, "timeout": 30000}));
        assert_eq!(
            out,
            json!({"url": "https://h/mcp", "transport": "http", "headers": {"A": "${TOKEN:-} x"}, "timeout": 30000,
                   "mcpx": {"callTimeout": "30000ms"}})
        );
        let out = norm(&g, json!({"url": "https://h/sse", "env": {"P": "${A}-$B-$1-$-${C:-d}-${D"}}));
        assert_eq!(out, json!({"url": "https://h/sse", "env": {"P": "${A:-}-${B:-}-$1-$-${C:-d}-${D"}}));
    }

    #[test]
    fn codex_headers_tokens_and_options() {
        let c = kind(Some(Client::Codex), None);
        let out = norm(
            &c,
            json!({"url": "https://h/mcp", "bearer_token_env_var": "TOK", "http_headers": {"X": "${lit}"},
                   "env_http_headers": {"Y": "YV"}, "enabled": false, "tool_timeout_sec": 1.5,
                   "enabled_tools": ["a"], "mcpx": {"disabled": true, "callTimeout": "9s"}}),
        );
        assert_eq!(
            out,
            json!({"url": "https://h/mcp", "headers": {"X": "$${lit}", "Y": "${YV:-}", "Authorization": "Bearer ${TOK}"},
                   "enabled": false, "tool_timeout_sec": 1.5, "enabled_tools": ["a"],
                   "mcpx": {"disabled": true, "callTimeout": "9s", "includeTools": ["a"]}})
        );
    }

    #[test]
    fn an_entry_that_runs_mcpx_serve_is_recognised() {
        let runs = |v: Value| runs_mcpx_serve(v.as_object().unwrap());
        assert!(runs(json!({"command": "mcpx", "args": ["serve"]})));
        assert!(runs(
            json!({"type": "stdio", "command": "/home/me/.cargo/bin/mcpx", "args": ["--config", "c", "serve"]})
        ));
        assert!(!runs(json!({"command": "mcpx", "args": ["call", "x.y"]})));
        assert!(!runs(json!({"command": "mcpx-other", "args": ["serve"]})));
        assert!(!runs(json!({"url": "https://mcpx/serve"})));
    }

    #[test]
    fn gemini_allowed_and_excluded_lists_disable_what_they_leave_out() {
        let mut entries: Vec<(String, Value)> =
            ["a", "b", "c"].iter().map(|n| ((*n).to_owned(), json!({"command": n}))).collect();
        gemini_allowed(&json!({"allowed": ["a", "b"], "excluded": ["b"]}), &mut entries);
        let disabled: Vec<bool> = entries.iter().map(|(_, e)| e.get("disabled").is_some()).collect();
        assert_eq!(disabled, [false, true, true]);
    }

    #[test]
    fn windsurf_server_url_and_disabled() {
        let w = kind(Some(Client::Windsurf), None);
        let out = norm(&w, json!({"serverUrl": "https://h/mcp", "disabled": true, "disabledTools": ["t"]}));
        assert_eq!(
            out,
            json!({"url": "https://h/mcp", "disabled": true, "disabledTools": ["t"],
                   "mcpx": {"disabled": true, "excludeTools": ["t"]}})
        );
    }

    #[test]
    fn vscode_predefined_variables() {
        let v = kind(Some(Client::Vscode), Some("/p/my${x}"));
        let out = norm(
            &v,
            json!({"command": "${workspaceFolder}${/}run", "args": ["${workspaceFolderBasename}", "${userHome}"]}),
        );
        assert_eq!(out, json!({"command": "/p/my$${x}/run", "args": ["my$${x}", "${HOME}"]}));
        // In a user-level file `${workspaceFolder}` stays, for the template check to reject.
        let user = kind(Some(Client::Vscode), None);
        assert_eq!(norm(&user, json!({"cwd": "${workspaceFolder}"})), json!({"cwd": "${workspaceFolder}"}));
        // Claude Desktop expands nothing.
        let desktop = kind(Some(Client::ClaudeDesktop), None);
        assert_eq!(norm(&desktop, json!({"args": ["${HOME}"]})), json!({"args": ["$${HOME}"]}));
        // mcpx's own files do not read `disabled` at the top of an entry.
        assert_eq!(norm(&kind(None, None), json!({"disabled": true})), json!({"disabled": true}));
    }
}
