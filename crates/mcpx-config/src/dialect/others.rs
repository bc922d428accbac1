//! The keys of the clients added after the first seven, mapped onto mcpx's (see each
//! client's section of `tests/fixtures/clients/README.md`, which cites its documentation):
//!
//! | client | its keys | mcpx's |
//! |---|---|---|
//! | OpenCode | `command` array, `environment`, `enabled`, `{env:NAME}` | `command` + `args`, `env`, `mcpx.disabled`, `${NAME:-}` |
//! | Goose | `cmd`, `envs`, `env_keys`, `uri` and `headers` (`$NAME`), `type` `streamable_http`/`sse`, `enabled`, `timeout` (s), `available_tools` | `command`, `env` (`${NAME}` for each key), `url`, `transport`, `mcpx.disabled`, `mcpx.callTimeout`, `mcpx.includeTools` |
//! | Continue | `requestOptions.headers`, `${{ secrets.NAME }}` | `headers`, `${NAME}` |
//! | Zed | `enabled` | `mcpx.disabled` |
//! | Crush | `enabled_tools`, `disabled_tools`, `$NAME` | `mcpx.includeTools`, `mcpx.excludeTools`, `${NAME:-}` |
//! | Cline, Roo Code | `timeout` (s), `disabledTools` | `mcpx.callTimeout`, `mcpx.excludeTools` |
//! | Cline | `url` without `type` | `transport` `sse` |
//! | Copilot CLI | `$NAME` | `${NAME:-}` |
//! | Kiro | `disabledTools` | `mcpx.excludeTools` |
//! | Amazon Q, Copilot CLI | `timeout` (ms) | `mcpx.callTimeout` |
//! | Copilot CLI | `tools` (`["*"]`: all) | `mcpx.includeTools` |
//!
//! Zed, LM Studio, OpenCode (but for `{env:NAME}`), Continue (but for its secrets) and
//! Goose's `envs` expand no `${`, so one there is literal. Goose's `env_keys` name
//! variables it reads from its keyring or the environment; mcpx reads only the
//! environment.

use serde_json::{Map, Value};

use super::template::{bare_vars, for_each_template, millis as ms};
use crate::clients::Client;

/// Whether `client` expands nothing in its values (a `${` is literal text there).
pub(super) fn literal(client: Client) -> bool {
    matches!(client, Client::Zed | Client::LmStudio | Client::Goose | Client::Opencode | Client::Continue)
}

/// Whether an entry of `client`'s file is an MCP server: Goose also lists its built-in
/// extensions (`builtin`, `platform`, `frontend`, `inline_python`), which are not.
pub fn is_server(client: Client, entry: &Map<String, Value>) -> bool {
    match (client, entry.get("type").and_then(Value::as_str)) {
        (Client::Goose, Some(kind)) => matches!(kind, "stdio" | "sse" | "streamable_http"),
        _ => true,
    }
}

/// The variables of `client`'s own syntax in `entry` as mcpx's. Runs after a literal
/// client's `${` was escaped (and after [`normalize`]), so the variables it writes stay
/// variables.
pub(super) fn variables(client: Client, entry: &mut Map<String, Value>) {
    match client {
        Client::Opencode => for_each_string(entry, opencode_vars),
        Client::Continue => for_each_string(entry, continue_secrets),
        // Goose's `uri` and `headers` take `$NAME` and `${NAME}` (of `env_keys`); `envs`
        // is literal.
        Client::Goose => {
            // A remote entry's keys are only for its `uri` and `headers`.
            let keys = entry.get("env_keys").filter(|_| entry.contains_key("command")).cloned();
            if let Some(Value::Array(keys)) = keys {
                let env = entry.entry("env").or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(env) = env {
                    for key in keys.iter().filter_map(Value::as_str) {
                        env.entry(key).or_insert_with(|| format!("${{{key}}}").into());
                    }
                }
            }
            let expand = |s: &mut String| *s = bare_vars(&s.replace("$${", "${"));
            if let Some(Value::String(url)) = entry.get_mut("url") {
                expand(url);
            }
            if let Some(Value::Object(headers)) = entry.get_mut("headers") {
                headers
                    .values_mut()
                    .filter_map(|v| if let Value::String(s) = v { Some(s) } else { None })
                    .for_each(expand);
            }
        }
        _ => {}
    }
}

/// Maps the keys of `client` in `entry` onto mcpx's; options go to `options` (the `mcpx`
/// block). Runs first, so what it renames is escaped and expanded as mcpx's keys are.
pub(super) fn normalize(client: Client, entry: &mut Map<String, Value>, options: &mut Map<String, Value>) {
    match client {
        Client::Opencode => {
            if let Some(Value::Array(parts)) = entry.get("command").cloned() {
                let mut parts = parts.into_iter();
                if let Some(program) = parts.next() {
                    entry.insert("command".into(), program);
                    entry.insert("args".into(), Value::Array(parts.collect()));
                }
            }
            rename(entry, "environment", "env");
            enabled(entry, options);
            // `"oauth": false` turns OpenCode's own OAuth off; mcpx decides that itself.
            if entry.get("oauth").is_some_and(|o| !o.is_object()) {
                entry.remove("oauth");
            }
            drop_type(entry, &["local", "remote"]);
        }
        Client::Goose => {
            rename(entry, "cmd", "command");
            rename(entry, "envs", "env");
            rename(entry, "uri", "url");
            match entry.get("type").and_then(Value::as_str) {
                Some("streamable_http") => {
                    entry.insert("transport".into(), "http".into());
                }
                Some("sse") => {
                    entry.insert("transport".into(), "sse".into());
                }
                _ => {}
            }
            entry.remove("type");
            enabled(entry, options);
            seconds(entry, "timeout", "callTimeout", options);
            if let Some(Value::Array(tools)) = entry.get("available_tools") {
                if !tools.is_empty() {
                    options.insert("includeTools".into(), Value::Array(tools.clone()));
                }
            }
        }
        Client::Continue => {
            entry.remove("name");
            if let Some(Value::Object(headers)) = entry.get("requestOptions").and_then(|r| r.get("headers")).cloned() {
                entry.entry("headers").or_insert(Value::Object(headers));
            }
            drop_type(entry, &["stdio"]);
        }
        Client::Zed => enabled(entry, options),
        Client::Crush => {
            copy(entry, "enabled_tools", "includeTools", options);
            copy(entry, "disabled_tools", "excludeTools", options);
        }
        Client::Cline | Client::RooCode => {
            // Cline takes a `url` without a `type` as SSE.
            if client == Client::Cline && entry.contains_key("url") && !entry.contains_key("type") {
                entry.insert("transport".into(), "sse".into());
            }
            seconds(entry, "timeout", "callTimeout", options);
            copy(entry, "disabledTools", "excludeTools", options);
        }
        Client::Kiro => copy(entry, "disabledTools", "excludeTools", options),
        Client::AmazonQ => millis(entry, options),
        Client::CopilotCli => {
            millis(entry, options);
            if let Some(Value::Array(tools)) = entry.get("tools") {
                if !tools.iter().any(|t| t == "*") {
                    options.insert("includeTools".into(), Value::Array(tools.clone()));
                }
            }
            drop_type(entry, &["local", "stdio"]);
        }
        _ => {}
    }
}

/// Moves `from` to `to` unless `to` is set.
fn rename(entry: &mut Map<String, Value>, from: &str, to: &str) {
    if let Some(v) = entry.remove(from) {
        entry.entry(to).or_insert(v);
    }
}

/// `enabled: false` as `mcpx.disabled`.
fn enabled(entry: &Map<String, Value>, options: &mut Map<String, Value>) {
    if let Some(Value::Bool(on)) = entry.get("enabled") {
        options.insert("disabled".into(), (!on).into());
    }
}

/// Copies `theirs` into the `mcpx` block as `ours`.
fn copy(entry: &Map<String, Value>, theirs: &str, ours: &str, options: &mut Map<String, Value>) {
    if let Some(v) = entry.get(theirs) {
        options.insert(ours.into(), v.clone());
    }
}

/// A number of seconds as an mcpx duration in the `mcpx` block.
fn seconds(entry: &Map<String, Value>, theirs: &str, ours: &str, options: &mut Map<String, Value>) {
    if let Some(v @ Value::Number(_)) = entry.get(theirs) {
        options.insert(ours.into(), v.clone());
    }
}

/// `timeout` in milliseconds as `mcpx.callTimeout`.
fn millis(entry: &Map<String, Value>, options: &mut Map<String, Value>) {
    if let Some(ms) = entry.get("timeout").and_then(ms) {
        options.insert("callTimeout".into(), ms);
    }
}

/// Removes a `type` that names the stdio flavour in the client's words (mcpx's `type`
/// names only remote ones).
fn drop_type(entry: &mut Map<String, Value>, stdio: &[&str]) {
    if entry.get("type").and_then(Value::as_str).is_some_and(|t| stdio.contains(&t)) {
        entry.remove("type");
    }
}

/// Calls `f` on each string of `command`, `args`, `env`, `headers` and `url`.
fn for_each_string(entry: &mut Map<String, Value>, f: fn(&str) -> String) {
    for_each_template(entry, |s| *s = f(s));
}

/// OpenCode's `{env:NAME}` as `${NAME:-}` (unset is empty there).
fn opencode_vars(s: &str) -> String {
    replace_between(s, "{env:", "}", |name| format!("${{{name}:-}}"))
}

/// Continue's `${{ secrets.NAME }}` as `${NAME}`: the variable of that name (Continue
/// reads its secrets from `.env` files and its hub, which mcpx does not).
fn continue_secrets(s: &str) -> String {
    // The `${` of the secret was escaped as literal text with the rest of the value.
    replace_between(s, "$${{", "}}", |inner| match inner.trim().strip_prefix("secrets.") {
        Some(name) => format!("${{{}}}", name.trim()),
        None => format!("$${{{{{inner}}}}}"),
    })
}

/// `s` with each `open`…`close` replaced by `f` of what is between them, when that is a
/// name (letters, digits, `_`, `.`, spaces); anything else stays.
fn replace_between(s: &str, open: &str, close: &str, f: impl Fn(&str) -> String) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find(open) {
        out.push_str(&rest[..start]);
        let after = &rest[start + open.len()..];
        let end = after.find(close).filter(|&e| {
            let inner = &after[..e];
            !inner.trim().is_empty() && inner.chars().all(|c| c.is_ascii_alphanumeric() || "_. ".contains(c))
        });
        match end {
            Some(end) => {
                out.push_str(&f(&after[..end]));
                rest = &after[end + close.len()..];
            }
            None => {
                out.push_str(open);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}
