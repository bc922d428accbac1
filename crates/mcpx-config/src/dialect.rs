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

mod others;
mod template;

use serde_json::{Map, Value};

use super::clients::{Client, FileKind};
pub use others::is_server;
use template::{bare_vars, for_each_template, millis};

/// Rewrites one server entry of a file of `kind` into mcpx's shape (see the module docs).
pub(super) fn normalize(kind: &FileKind, mut entry: Map<String, Value>) -> Map<String, Value> {
    let mut options = Map::new();
    if let Some(client) = kind.client {
        others::normalize(client, &mut entry, &mut options);
    }
    let literal =
        matches!(kind.client, Some(Client::Codex | Client::ClaudeDesktop)) || kind.client.is_some_and(others::literal);
    if literal {
        for_each_template(&mut entry, |s| *s = s.replace("${", "$${"));
    }
    if let Some(client) = kind.client {
        others::variables(client, &mut entry);
    }
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
///
/// Recognised in every client's shape: `command` (or Goose's `cmd`) with `args`,
/// OpenCode's `command` array, and Zed's older `command: {path, args}`.
pub fn runs_mcpx_serve(entry: &Map<String, Value>) -> bool {
    let strings = |v: Option<&Value>| -> Vec<String> {
        let items = v.and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        items.iter().filter_map(|a| a.as_str().map(str::to_owned)).collect()
    };
    let (program, args) = match entry.get("command").or_else(|| entry.get("cmd")) {
        Some(Value::String(command)) => (command.clone(), strings(entry.get("args"))),
        Some(Value::Array(parts)) => {
            let mut parts = strings(Some(&Value::Array(parts.clone())));
            if parts.is_empty() {
                return false;
            }
            let program = parts.remove(0);
            (program, parts)
        }
        Some(Value::Object(command)) => match command.get("path") {
            Some(Value::String(path)) => (path.clone(), strings(command.get("args"))),
            _ => return false,
        },
        _ => return false,
    };
    program.rsplit('/').next() == Some("mcpx") && args.iter().any(|a| a == "serve")
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

/// Rewrites one template: VS Code's predefined variables, and Gemini CLI's `$VAR`.
fn rewrite(kind: &FileKind, s: &mut String) {
    if matches!(kind.client, Some(Client::Gemini | Client::Crush | Client::CopilotCli)) {
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
        assert!(runs(json!({"type": "local", "command": ["/bin/mcpx", "serve"]})), "OpenCode's array");
        assert!(!runs(json!({"command": ["mcpx"]})));
        assert!(runs(json!({"cmd": "mcpx", "args": ["serve"], "type": "stdio"})), "Goose's cmd");
        assert!(runs(json!({"command": {"path": "mcpx", "args": ["serve"]}})), "Zed's older shape");
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

    /// The entry as the newer clients' files hold it, rewritten.
    fn of(client: Client, v: Value) -> Value {
        norm(&kind(Some(client), None), v)
    }

    #[test]
    fn opencode_command_array_environment_and_its_variables() {
        let out = of(
            Client::Opencode,
            json!({"type": "local", "command": ["npx", "-y", "s"], "environment": {"T": "{env:TOK}-${lit}"},
                   "enabled": false, "oauth": false}),
        );
        assert_eq!(
            out,
            json!({"command": "npx", "args": ["-y", "s"], "env": {"T": "${TOK:-}-$${lit}"}, "enabled": false,
                   "mcpx": {"disabled": true}})
        );
        let remote = of(Client::Opencode, json!({"type": "remote", "url": "https://h/{env:P}", "headers": {}}));
        assert_eq!(remote, json!({"url": "https://h/${P:-}", "headers": {}}));
    }

    #[test]
    fn goose_extensions() {
        let out = of(
            Client::Goose,
            json!({"type": "stdio", "name": "g", "cmd": "x", "args": [], "envs": {"A": "${lit}"},
                   "env_keys": ["K", "A"], "enabled": false, "timeout": 300, "available_tools": ["t"]}),
        );
        assert_eq!(
            out,
            json!({"name": "g", "command": "x", "args": [], "env": {"A": "$${lit}", "K": "${K}"},
                   "env_keys": ["K", "A"], "enabled": false, "timeout": 300, "available_tools": ["t"],
                   "mcpx": {"disabled": true, "callTimeout": 300, "includeTools": ["t"]}})
        );
        let remote = of(
            Client::Goose,
            json!({"type": "streamable_http", "uri": "https://h/mcp", "headers": {"A": "Bearer ${TOK}", "B": "$X"}}),
        );
        assert_eq!(
            remote,
            json!({"url": "https://h/mcp", "transport": "http", "headers": {"A": "Bearer ${TOK:-}", "B": "${X:-}"}})
        );
        let builtin = json!({"type": "builtin", "name": "developer"});
        assert!(!others::is_server(Client::Goose, builtin.as_object().unwrap()));
        assert!(others::is_server(Client::Cursor, builtin.as_object().unwrap()));
    }

    #[test]
    fn continue_secrets_and_request_headers() {
        let out = of(
            Client::Continue,
            json!({"name": "c", "type": "sse", "url": "https://h",
                   "requestOptions": {"headers": {"A": "Bearer ${{ secrets.TOK }}", "B": "${{ inputs.x-y }}"}}}),
        );
        assert_eq!(out["headers"], json!({"A": "Bearer ${TOK}", "B": "$${{ inputs.x-y }}"}));
        assert_eq!(out["type"], "sse", "the transport stays");
        let stdio = of(Client::Continue, json!({"name": "c", "type": "stdio", "command": "x"}));
        assert_eq!(stdio, json!({"command": "x"}));
    }

    #[test]
    fn the_tool_lists_timeouts_and_flags_of_the_rest() {
        let opts = |client, v| of(client, v)["mcpx"].clone();
        assert_eq!(opts(Client::Zed, json!({"enabled": false})), json!({"disabled": true}));
        assert_eq!(opts(Client::Crush, json!({"disabled_tools": ["t"]})), json!({"excludeTools": ["t"]}));
        assert_eq!(
            opts(Client::RooCode, json!({"timeout": 60, "disabledTools": ["t"], "disabled": true})),
            json!({"callTimeout": 60, "excludeTools": ["t"], "disabled": true})
        );
        assert_eq!(opts(Client::Kiro, json!({"disabledTools": ["t"]})), json!({"excludeTools": ["t"]}));
        assert_eq!(opts(Client::AmazonQ, json!({"timeout": 120000})), json!({"callTimeout": "120000ms"}));
        assert_eq!(opts(Client::CopilotCli, json!({"tools": ["a"]})), json!({"includeTools": ["a"]}));
        assert_eq!(of(Client::CopilotCli, json!({"type": "local", "tools": ["*"]})), json!({"tools": ["*"]}));
        assert_eq!(of(Client::Crush, json!({"env": {"A": "$TOK"}}))["env"], json!({"A": "${TOK:-}"}));
        assert_eq!(of(Client::LmStudio, json!({"env": {"A": "${TOK}"}}))["env"], json!({"A": "$${TOK}"}));
        assert_eq!(of(Client::Cline, json!({"url": "https://h"}))["transport"], "sse", "Cline's default");
        assert_eq!(of(Client::CopilotCli, json!({"env": {"A": "$TOK"}}))["env"], json!({"A": "${TOK:-}"}));
    }
}
