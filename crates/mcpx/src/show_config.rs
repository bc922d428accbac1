//! `mcpx config`: the servers the caller's configuration resolves to, as written (never
//! expanded), with the `mcpx` block's defaults filled in.
//!
//! It resolves in the CLI, from the same files and with the same resolver
//! (`mcpx_daemon::config::ConfigCache`) the daemon uses, and reads trust from the running
//! daemon's state directory. Since nothing is expanded, the daemon's environment would
//! change only where the user file is (`HOME`, `XDG_CONFIG_HOME`), and the answer needs
//! no daemon (it works, like `import`, with none running). Environment values, header
//! values and secrets are never shown: `env` and `headers` list their names only, and an
//! `oauth` block's `clientSecret` and `privateKey` the `${...}` they come from.

use std::collections::HashMap;
use std::path::Path;

use mcpx_api::{ApiError, ErrorKind};
use mcpx_daemon::config::{
    ConfigCache, ConfigEnv, OAUTH_KEYS, OAuthSpec, Profile, ResolveRequest, ServerEntry, TRUST_FILE, Tools,
    TransportSpec,
};
use mcpx_daemon::policy;
use serde_json::{Value, json};

use crate::output::tilde;

/// Prints the resolved servers of the request (`cwd`, the explicit `config` file) as
/// `--json` or text, and the profiles (`--json`: `"profiles": {NAME: {"source",
/// "servers": {SERVER: "*" | [PATTERN]}}}`), with trust read from `state`'s trust
/// records. With `profile`, only that profile and the servers it holds. Returns exit 0,
/// or 2 when an entry or a file has an error (a configuration error, as everywhere).
///
/// Errors: a configuration that cannot be resolved, such as a missing `--config` file,
/// or an unknown `profile` (exit 2, listing the profiles there are).
pub fn run(
    state: &Path,
    env: &HashMap<String, String>,
    caller: &mcpx_api::Caller,
    json: bool,
) -> Result<i32, ApiError> {
    let config_env = ConfigEnv::from_vars(env);
    let cache = ConfigCache::new(config_env.clone()).with_trust_file(state.join(TRUST_FILE));
    let mut resolved = cache
        .resolve(&ResolveRequest { cwd: caller.cwd.clone(), explicit: caller.config.clone() })
        .map_err(|e| ApiError::new(ErrorKind::Usage, e.to_string()))?;
    if let Some(name) = &caller.profile {
        resolved = resolved.with_profile(name).map_err(|e| ApiError::new(ErrorKind::Config, e))?;
        resolved.servers.retain(|_, e| policy::in_profile(e));
        resolved.profiles.retain(|n, _| n == name);
    }
    let profiles: serde_json::Map<String, Value> =
        resolved.profiles.iter().map(|(name, p)| (name.clone(), profile_json(p))).collect();
    let servers: Vec<Value> = resolved.servers.values().map(entry_json).collect();
    let errors: Vec<Value> = resolved
        .errors
        .iter()
        .map(|(name, e)| json!({ "server": name, "error": e.0.to_string() }))
        .chain(resolved.file_errors.iter().map(|e| json!({ "error": e.0.to_string() })))
        .chain(resolved.file_warnings.iter().map(|w| json!({ "warning": w.message })))
        .collect();
    let code = if resolved.errors.is_empty() && resolved.file_errors.is_empty() { 0 } else { 2 };
    if json {
        let body = json!({ "files": resolved.files, "servers": servers, "profiles": profiles, "errors": errors });
        println!("{}", serde_json::to_string_pretty(&body).unwrap_or_default());
        return Ok(code);
    }
    let home = config_env.home.as_deref();
    if resolved.files.is_empty() {
        println!(
            "no config file found; add servers to {}",
            config_env.user_file().map_or_else(|| "~/.config/mcpx/config.json".to_owned(), |f| tilde(&f, home))
        );
    }
    let texts: Vec<String> = resolved.servers.values().map(|entry| entry_text(entry, home)).collect();
    print!("{}", texts.join("\n"));
    for (name, profile) in &resolved.profiles {
        println!(
            "\nprofile {name} ({}): serve it with `mcpx serve --profile {name}` or at /mcp/p/{name}",
            tilde(&profile.source, home)
        );
        for (server, tools) in &profile.servers {
            let tools = match tools {
                Tools::All => "every tool".to_owned(),
                Tools::Matching(patterns) => patterns.join(", "),
            };
            let missing = if resolved.servers.contains_key(server) { "" } else { " (not configured here)" };
            println!("  {server}: {tools}{missing}");
        }
    }
    for problem in errors {
        let text = problem.get("error").or_else(|| problem.get("warning")).and_then(Value::as_str).unwrap_or_default();
        println!("{}: {text}", if problem.get("error").is_some() { "error" } else { "warning" });
    }
    Ok(code)
}

/// One profile for `--json`: its file, and each server's `"*"` or patterns.
fn profile_json(profile: &Profile) -> Value {
    let servers: serde_json::Map<String, Value> = profile
        .servers
        .iter()
        .map(|(server, tools)| {
            let tools = match tools {
                Tools::All => json!("*"),
                Tools::Matching(patterns) => json!(patterns),
            };
            (server.clone(), tools)
        })
        .collect();
    json!({ "source": profile.source, "servers": servers })
}

/// One server for `--json`: where it comes from, how it is reached as written (names only
/// for `env` and `headers`), whether it is trusted, and its `mcpx` block.
fn entry_json(entry: &ServerEntry) -> Value {
    let mut value = json!({
        "name": entry.name,
        "source": entry.source,
        "client": entry.client.map(|c| c.name()),
        "trusted": policy::server_trusted(entry),
        "mcpx": entry.options.written(),
    });
    let reach = match &entry.transport {
        TransportSpec::Stdio { command, args, env, cwd } => json!({
            "transport": "stdio", "command": command, "args": args,
            "env": env.keys().collect::<Vec<_>>(), "cwd": cwd,
        }),
        TransportSpec::Remote { url, headers, kind } => json!({
            "transport": kind.as_str(), "url": url, "headers": headers.keys().collect::<Vec<_>>(),
        }),
    };
    if let (Some(value), Value::Object(reach)) = (value.as_object_mut(), reach) {
        value.extend(reach);
    }
    if let Some(oauth) = &entry.oauth {
        value["oauth"] = oauth_json(oauth);
    }
    value
}

/// An `oauth` block in the file's spelling, with its `grant` filled in; `clientSecret`
/// and `privateKey` as their [`references`] only.
fn oauth_json(oauth: &OAuthSpec) -> Value {
    let mut block = serde_json::Map::new();
    let mut put = |key: &str, value: Option<Value>| {
        if let Some(value) = value {
            block.insert(key.to_owned(), value);
        }
    };
    put("clientId", oauth.client_id.clone().map(Value::from));
    put("clientSecret", oauth.client_secret.as_deref().map(|s| references(s).into()));
    put("privateKey", oauth.private_key.as_deref().map(|s| references(s).into()));
    put("tokenEndpointAuthMethod", oauth.token_endpoint_auth_method.map(|m| m.as_str().into()));
    put("scopes", oauth.scopes.clone().map(Value::from));
    put("redirectPort", oauth.redirect_port.map(Value::from));
    put("grant", Some(oauth.grant.as_str().into()));
    put("clientMetadataUrl", oauth.client_metadata_url.clone().map(Value::from));
    Value::Object(block)
}

/// The `${...}` references of a secret's template, space-separated (`${secret:NAME}`,
/// `${VAR}`); a value written in the file itself shows as `(written in the file)`.
fn references(template: &str) -> String {
    let mut found = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find("${") {
        let Some(len) = rest[start..].find('}') else { break };
        found.push(&rest[start..start + len + 1]);
        rest = &rest[start + len + 1..];
    }
    if found.is_empty() { "(written in the file)".to_owned() } else { found.join(" ") }
}

/// One server as text: a heading line, then one aligned line per fact.
fn entry_text(entry: &ServerEntry, home: Option<&Path>) -> String {
    let mut lines: Vec<(&str, String)> = Vec::new();
    let source = tilde(&entry.source, home);
    lines.push((
        "source",
        match entry.client {
            Some(client) => format!("{source} ({})", client.label()),
            None => source,
        },
    ));
    match &entry.transport {
        TransportSpec::Stdio { command, args, env, cwd } => {
            lines.push((
                "command",
                std::iter::once(command).chain(args).map(|a| quote(a)).collect::<Vec<_>>().join(" "),
            ));
            if !env.is_empty() {
                lines.push(("env", env.keys().cloned().collect::<Vec<_>>().join(" ")));
            }
            if let Some(cwd) = cwd {
                lines.push(("cwd", cwd.clone()));
            }
        }
        TransportSpec::Remote { url, headers, kind } => {
            lines.push(("url", format!("{url} ({})", kind.as_str())));
            if !headers.is_empty() {
                lines.push(("headers", headers.keys().cloned().collect::<Vec<_>>().join(" ")));
            }
            if let Some(Value::Object(block)) = entry.oauth.as_ref().map(oauth_json) {
                let facts: Vec<String> = OAUTH_KEYS
                    .iter()
                    .filter_map(|key| block.get(*key).map(|value| (key, value)))
                    .map(|(key, value)| match value {
                        Value::Array(items) => {
                            format!("{key} {}", items.iter().map(plain).collect::<Vec<_>>().join(" "))
                        }
                        value => format!("{key} {}", plain(value)),
                    })
                    .collect();
                lines.push(("oauth", facts.join(", ")));
            }
        }
    }
    let trusted = if policy::server_trusted(entry) { "yes" } else { "no: run `mcpx trust` in its project" };
    lines.push(("trusted", trusted.to_owned()));
    // The `mcpx` block, defaults filled in, in the spelling of the daemon's config module.
    let o = entry.options.written();
    let at = |key: &str| plain(&o[key]);
    lines.push(("sharing", format!("{}, scope {}, max {}, min {}", at("sharing"), at("scope"), at("max"), at("min"))));
    let timeouts = ["idleTimeout", "callTimeout", "startTimeout", "orphanTimeout"].map(at);
    let [idle, call, start, orphan] = &timeouts;
    lines.push(("timeouts", format!("idle {idle}, call {call}, start {start}, orphan {orphan}")));
    let process = ["supervised", "bufferBytes", "maxMessageBytes"].map(at);
    let [supervised, buffer, message] = &process;
    lines.push(("process", format!("supervised {supervised}, bufferBytes {buffer}, maxMessageBytes {message}")));
    for (label, key) in [("include", "includeTools"), ("exclude", "excludeTools")] {
        if let Some(tools) = o[key].as_array().filter(|t| !t.is_empty()) {
            lines.push((label, tools.iter().map(plain).collect::<Vec<_>>().join(" ")));
        }
    }
    lines.push(("pinning", entry.pinning.as_str().to_owned()));
    let sandbox = match &entry.options.sandbox {
        Some(sandbox) => {
            let paths = |paths: &[String]| if paths.is_empty() { "-".to_owned() } else { paths.join(" ") };
            let network = match &sandbox.network {
                mcpx_daemon::config::NetworkSpec::Off => "off".to_owned(),
                mcpx_daemon::config::NetworkSpec::On => "on".to_owned(),
                mcpx_daemon::config::NetworkSpec::Ports { connect, bind } => {
                    format!("connect {connect:?}, bind {bind:?}")
                }
            };
            let (read, write) = (paths(&sandbox.read), paths(&sandbox.write));
            format!("preset {}, read {read}, write {write}, network {network}", sandbox.preset.as_str())
        }
        None => "none: it runs with all of the user's rights".to_owned(),
    };
    lines.push(("sandbox", sandbox));
    if let Some(description) = o["description"].as_str() {
        lines.push(("about", description.to_owned()));
    }
    let mut text = format!("{}{}\n", entry.name, if o["disabled"] == true { " (disabled)" } else { "" });
    for (key, value) in lines {
        text.push_str(&format!("  {key:<9} {value}\n"));
    }
    text
}

/// `arg` as a shell would need it: single-quoted when it holds anything but plain characters.
fn quote(arg: &str) -> String {
    let plain = !arg.is_empty() && arg.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:@=+,%".contains(c));
    if plain { arg.to_owned() } else { format!("'{}'", arg.replace('\'', r"'\''")) }
}

/// A JSON scalar as text: a string without its quotes.
fn plain(value: &Value) -> String {
    value.as_str().map_or_else(|| value.to_string(), str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_shows_as_the_references_it_comes_from() {
        assert_eq!(references("${secret:tracker}"), "${secret:tracker}");
        assert_eq!(references("pre-${A}-mid-${secret:b}-post"), "${A} ${secret:b}");
        assert_eq!(references("a-literal-secret"), "(written in the file)");
        assert_eq!(references("${unclosed"), "(written in the file)");
    }
}
