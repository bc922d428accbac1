//! One server entry, a JSON object in mcpx's own shape, into a [`ServerEntry`]: its
//! transport, its `mcpx` block with defaults, and errors naming the file, server and key.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value};

use super::clients::Client;
use super::entry::{ServerEntry, ServerOptions};
use super::error::ConfigError;
use super::expand;
use super::oauth::{self, OAuthSpec};
use super::spec::{MCPX_KEYS, NetworkSpec, Preset, RemoteKind, SandboxSpec, Scope, Sharing, TransportSpec};
use super::units::{duration_from_json, json_kind, size_from_json};

/// Names the file and server for errors about one entry.
struct Ctx<'a> {
    file: &'a Path,
    server: &'a str,
}

impl Ctx<'_> {
    fn invalid(&self, key: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError::InvalidValue {
            file: self.file.to_owned(),
            server: self.server.to_owned(),
            key: key.into(),
            message: message.into(),
        }
    }

    /// A string value, or `None` when absent or `null`.
    fn string<'v>(&self, key: &str, value: Option<&'v Value>) -> Result<Option<&'v str>, ConfigError> {
        match value {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(self.invalid(key, format!("expected a string, found {}", json_kind(other)))),
        }
    }

    /// A string that may contain `${VAR}` references; checks the template syntax.
    fn template(&self, key: &str, value: &str) -> Result<String, ConfigError> {
        expand::check(value).map_err(|m| self.invalid(key, m))?;
        Ok(value.to_owned())
    }

    fn string_array(&self, key: &str, value: Option<&Value>) -> Result<Option<Vec<String>>, ConfigError> {
        match value {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(items)) => {
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| match item {
                        Value::String(s) => Ok(s.clone()),
                        other => Err(self
                            .invalid(format!("{key}[{i}]"), format!("expected a string, found {}", json_kind(other)))),
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .map(Some)
            }
            Some(other) => Err(self.invalid(key, format!("expected an array of strings, found {}", json_kind(other)))),
        }
    }

    /// An object of string values, each checked as a template (`key.NAME` in errors).
    fn template_map(&self, key: &str, value: Option<&Value>) -> Result<BTreeMap<String, String>, ConfigError> {
        match value {
            None | Some(Value::Null) => Ok(BTreeMap::new()),
            Some(Value::Object(map)) => map
                .iter()
                .map(|(name, v)| {
                    let item_key = format!("{key}.{name}");
                    match v {
                        Value::String(s) => Ok((name.clone(), self.template(&item_key, s)?)),
                        other => Err(self.invalid(item_key, format!("expected a string, found {}", json_kind(other)))),
                    }
                })
                .collect(),
            Some(other) => Err(self.invalid(key, format!("expected an object of strings, found {}", json_kind(other)))),
        }
    }
}

/// Parses the entry `map` of server `server` in `file` (of `client`'s format, already
/// rewritten into mcpx's shape). Errors: [`ConfigError::InvalidValue`],
/// [`ConfigError::UnknownKey`], [`ConfigError::MissingCommandOrUrl`] or
/// [`ConfigError::BothCommandAndUrl`], naming the file, the server and the key.
pub(super) fn parse_entry(
    file: &Path,
    client: Option<Client>,
    server: &str,
    map: &Map<String, Value>,
) -> Result<ServerEntry, ConfigError> {
    let ctx = Ctx { file, server };
    let command = ctx.string("command", map.get("command"))?;
    let url = ctx.string("url", map.get("url"))?;
    let transport = match (command, url) {
        (Some(command), None) => {
            if command.trim().is_empty() {
                return Err(ctx.invalid("command", "must not be empty"));
            }
            let command = ctx.template("command", command)?;
            let args = ctx
                .string_array("args", map.get("args"))?
                .unwrap_or_default()
                .into_iter()
                .enumerate()
                .map(|(i, a)| ctx.template(&format!("args[{i}]"), &a))
                .collect::<Result<Vec<_>, _>>()?;
            let env = ctx.template_map("env", map.get("env"))?;
            let cwd = match ctx.string("cwd", map.get("cwd"))? {
                Some(cwd) => Some(ctx.template("cwd", cwd)?),
                None => None,
            };
            TransportSpec::Stdio { command, args, env, cwd }
        }
        (None, Some(url)) => {
            if url.trim().is_empty() {
                return Err(ctx.invalid("url", "must not be empty"));
            }
            let url = ctx.template("url", url)?;
            let headers = ctx.template_map("headers", map.get("headers"))?;
            let kind = remote_kind(&ctx, map)?;
            TransportSpec::Remote { url, headers, kind }
        }
        (None, None) => {
            return Err(ConfigError::MissingCommandOrUrl { file: file.to_owned(), server: server.to_owned() });
        }
        (Some(_), Some(_)) => {
            return Err(ConfigError::BothCommandAndUrl { file: file.to_owned(), server: server.to_owned() });
        }
    };
    let options = parse_options(&ctx, map.get("mcpx"))?;
    if options.sandbox.is_some() && url.is_some() {
        return Err(ctx.invalid(
            "mcpx.sandbox",
            "a sandbox confines a process mcpx starts, and a `url` entry has none; remove it",
        ));
    }
    let pinning_written = options.pinning;
    let oauth = parse_oauth_block(&ctx, client, url.is_some(), map.get("oauth"))?;
    Ok(ServerEntry {
        name: server.to_owned(),
        source: file.to_owned(),
        client,
        transport,
        options,
        oauth,
        inputs: BTreeMap::new(),
        // Set by `layer`, which has the entry as written.
        trust_hash: String::new(),
        // The resolver marks a project file's entries, knowing how it reached the file.
        trusted: true,
        // The resolver applies the user config's default and a project file's floor.
        pinning: pinning_written.unwrap_or_default(),
        profile: None,
    })
}

/// `transport` ("http" | "sse") decides; else VS Code's / Claude Code's `type` when it names a
/// remote flavour; else streamable HTTP. Unknown `type` values are ignored (other programs own
/// that key), unknown `transport` values are errors.
fn remote_kind(ctx: &Ctx<'_>, map: &Map<String, Value>) -> Result<RemoteKind, ConfigError> {
    if let Some(t) = ctx.string("transport", map.get("transport"))? {
        return match t {
            "http" | "streamable-http" | "streamableHttp" => Ok(RemoteKind::Http),
            "sse" => Ok(RemoteKind::Sse),
            other => Err(ctx.invalid("transport", format!("unknown transport `{other}` (use \"http\" or \"sse\")"))),
        };
    }
    Ok(match map.get("type").and_then(Value::as_str) {
        Some("sse") => RemoteKind::Sse,
        _ => RemoteKind::Http,
    })
}

/// The `oauth` block of a remote entry (`remote`). In mcpx's own files (`client` is
/// `None`) an unknown key, or the block on a `command` entry, is an error; another
/// client's file may carry keys of its own there, and they are ignored.
fn parse_oauth_block(
    ctx: &Ctx<'_>,
    client: Option<Client>,
    remote: bool,
    value: Option<&Value>,
) -> Result<Option<OAuthSpec>, ConfigError> {
    let Some(value) = value.filter(|v| !v.is_null()) else { return Ok(None) };
    let strict = client.is_none();
    if !remote {
        return if strict {
            Err(ctx.invalid("oauth", "only a `url` entry (a remote server) takes an `oauth` block"))
        } else {
            Ok(None)
        };
    }
    let template = |key: &str, text: &str| {
        expand::check(text).map(|()| text.to_owned()).map_err(|message| (key.to_owned(), message))
    };
    oauth::parse_oauth(value, strict, &template).map(Some).map_err(|(key, message)| ctx.invalid(key, message))
}

fn parse_options(ctx: &Ctx<'_>, value: Option<&Value>) -> Result<ServerOptions, ConfigError> {
    let mut options = ServerOptions::default();
    let block = match value {
        None | Some(Value::Null) => return Ok(options),
        Some(Value::Object(block)) => block,
        Some(other) => {
            return Err(ctx.invalid("mcpx", format!("expected an object, found {}", json_kind(other))));
        }
    };
    let mut min_set = false;
    for (key, v) in block {
        if !MCPX_KEYS.contains(&key.as_str()) {
            return Err(ConfigError::UnknownKey {
                file: ctx.file.to_owned(),
                server: ctx.server.to_owned(),
                key: key.clone(),
            });
        }
        if v.is_null() {
            continue; // null = default
        }
        let k = format!("mcpx.{key}");
        let bad = |m: String| ctx.invalid(k.clone(), m);
        match key.as_str() {
            "sharing" => {
                options.sharing = enum_value(v).and_then(|s| s.parse()).map_err(bad)?;
            }
            "scope" => {
                options.scope = enum_value(v).and_then(|s| s.parse()).map_err(bad)?;
            }
            "max" => {
                options.max = count(v).map_err(bad)?;
                if options.max == 0 {
                    return Err(ctx.invalid(k, "must be at least 1"));
                }
            }
            "min" => {
                options.min = count(v).map_err(bad)?;
                min_set = true;
            }
            "idleTimeout" => options.idle_timeout = timeout(v).map_err(bad)?,
            "callTimeout" => options.call_timeout = timeout(v).map_err(bad)?,
            "startTimeout" => options.start_timeout = timeout(v).map_err(bad)?,
            "orphanTimeout" => options.orphan_timeout = timeout(v).map_err(bad)?,
            "supervised" => options.supervised = boolean(v).map_err(bad)?,
            "disabled" => options.disabled = boolean(v).map_err(bad)?,
            "bufferBytes" => options.buffer_bytes = size(v).map_err(bad)?,
            "maxMessageBytes" => options.max_message_bytes = size(v).map_err(bad)?,
            "description" => {
                options.description = Some(
                    v.as_str().ok_or_else(|| bad(format!("expected a string, found {}", json_kind(v))))?.to_owned(),
                );
            }
            "includeTools" => options.include_tools = ctx.string_array(&k, Some(v))?,
            "excludeTools" => options.exclude_tools = ctx.string_array(&k, Some(v))?.unwrap_or_default(),
            "maxResultBytes" => options.max_result_bytes = Some(result_size(v).map_err(bad)?),
            "maxResultBytesPerTool" => {
                let Value::Object(tools) = v else {
                    return Err(bad(format!("expected an object of tool names and sizes, found {}", json_kind(v))));
                };
                for (tool, size) in tools {
                    let size = result_size(size).map_err(|e| bad(format!("`{tool}`: {e}")))?;
                    options.max_result_bytes_per_tool.insert(tool.clone(), size);
                }
            }
            "pinning" => options.pinning = Some(enum_value(v).and_then(|s| s.parse()).map_err(bad)?),
            "sandbox" => options.sandbox = Some(parse_sandbox(ctx, v)?),
            // MCPX_KEYS and this match list the same keys.
            _ => {}
        }
    }
    if options.min > options.max {
        let key = if min_set { "mcpx.min" } else { "mcpx.max" };
        return Err(ctx.invalid(
            key,
            format!("`min` ({}) must not exceed `max` ({}); lower `min` or raise `max`", options.min, options.max),
        ));
    }
    Ok(options)
}

fn enum_value(v: &Value) -> Result<&str, String> {
    v.as_str().ok_or_else(|| format!("expected a string, found {}", json_kind(v)))
}

fn count(v: &Value) -> Result<u32, String> {
    v.as_u64().and_then(|n| u32::try_from(n).ok()).ok_or_else(|| match v {
        Value::Number(n) => {
            format!("expected a whole number from 0 to {}, found {n}", u32::MAX)
        }
        other => format!("expected a whole number, found {}", json_kind(other)),
    })
}

fn boolean(v: &Value) -> Result<bool, String> {
    v.as_bool().ok_or_else(|| format!("expected true or false, found {}", json_kind(v)))
}

/// A timeout: `0` means none.
fn timeout(v: &Value) -> Result<Option<std::time::Duration>, String> {
    let d = duration_from_json(v)?;
    Ok((!d.is_zero()).then_some(d))
}

fn size(v: &Value) -> Result<u64, String> {
    match size_from_json(v)? {
        0 => Err("must be greater than zero".to_owned()),
        n => Ok(n),
    }
}

/// The keys of a `sandbox` object.
const SANDBOX_KEYS: [&str; 4] = ["preset", "read", "write", "network"];

/// `mcpx.sandbox`: `{"preset", "read"?, "write"?, "network"?}`.
///
/// Errors: [`ConfigError::InvalidValue`] naming `mcpx.sandbox` or its key: not an
/// object, an unknown key, no or an unknown `preset`, paths that are not strings, a
/// `network` that is not a boolean or `{"connect": [ports], "bind": [ports]}`.
fn parse_sandbox(ctx: &Ctx<'_>, v: &Value) -> Result<SandboxSpec, ConfigError> {
    let Some(map) = v.as_object() else {
        return Err(ctx.invalid(
            "mcpx.sandbox",
            format!(
                "expected an object like {{\"preset\": \"node\", \"read\": [\"~/notes\"]}}, found {}",
                json_kind(v)
            ),
        ));
    };
    if let Some(key) = map.keys().find(|k| !SANDBOX_KEYS.contains(&k.as_str())) {
        return Err(ctx
            .invalid(format!("mcpx.sandbox.{key}"), format!("unknown key (known keys: {})", SANDBOX_KEYS.join(", "))));
    }
    let preset = match map.get("preset") {
        Some(p) => enum_value(p).and_then(|s| s.parse()).map_err(|m| ctx.invalid("mcpx.sandbox.preset", m))?,
        None => return Err(ctx.invalid("mcpx.sandbox.preset", "missing: say \"node\", \"python\" or \"binary\"")),
    };
    let read = ctx.string_array("mcpx.sandbox.read", map.get("read"))?.unwrap_or_default();
    let write = ctx.string_array("mcpx.sandbox.write", map.get("write"))?.unwrap_or_default();
    let ports = |key: &str, v: Option<&Value>| -> Result<Vec<u16>, ConfigError> {
        let Some(v) = v else { return Ok(Vec::new()) };
        let bad = || ctx.invalid(format!("mcpx.sandbox.network.{key}"), "expected an array of TCP ports (1 to 65535)");
        let items = v.as_array().ok_or_else(bad)?;
        items
            .iter()
            .map(|p| p.as_u64().and_then(|p| u16::try_from(p).ok()).filter(|p| *p > 0).ok_or_else(bad))
            .collect()
    };
    let network = match map.get("network") {
        None | Some(Value::Bool(false)) | Some(Value::Null) => NetworkSpec::Off,
        Some(Value::Bool(true)) => NetworkSpec::On,
        Some(Value::Object(o)) => {
            if let Some(key) = o.keys().find(|k| !["connect", "bind"].contains(&k.as_str())) {
                return Err(
                    ctx.invalid(format!("mcpx.sandbox.network.{key}"), "unknown key (known keys: connect, bind)")
                );
            }
            NetworkSpec::Ports { connect: ports("connect", o.get("connect"))?, bind: ports("bind", o.get("bind"))? }
        }
        Some(other) => {
            return Err(ctx.invalid(
                "mcpx.sandbox.network",
                format!("expected false, true or {{\"connect\": [443], \"bind\": []}}, found {}", json_kind(other)),
            ));
        }
    };
    Ok(SandboxSpec { preset, read, write, network })
}

impl std::str::FromStr for Preset {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Preset::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| format!("unknown preset `{s}` (use \"node\", \"python\" or \"binary\")"))
    }
}

impl std::str::FromStr for Sharing {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Sharing::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| format!("unknown sharing `{s}` (use \"shared\" or \"exclusive\")"))
    }
}

impl std::str::FromStr for Scope {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Scope::ALL.into_iter().find(|v| v.as_str() == s).ok_or_else(|| {
            let names: Vec<&str> = Scope::ALL.iter().map(|v| v.as_str()).collect();
            format!("unknown scope `{s}` (use one of: {})", names.join(", "))
        })
    }
}

/// A `maxResultBytes` size: as every size (`"20kB"`, `"64KiB"`, a number of bytes), and at
/// least 1 KiB, so the note about what was left out fits. Errors: what is wrong with it.
fn result_size(v: &Value) -> Result<u64, String> {
    let size = size(v)?;
    if size < 1024 {
        return Err(format!("{size} bytes is too small: use at least 1KiB (a result is cut to fit, with a note)"));
    }
    Ok(size)
}
