//! `mcpx registry search|show` and `mcpx add <registry name>`: MCP registries, read
//! through their `v0.1` API (the official registry's OpenAPI description,
//! `GET /v0.1/servers` and `GET /v0.1/servers/{serverName}/versions/{version}`), whose
//! answers carry `server.json` documents ([`package`] makes one an entry).
//!
//! The registries are the user config's `"registries"` (URLs, in order), else the
//! official one. Answers are cached under the cache directory (`registry/`) and reused
//! for [`FRESH`]; `--offline` reads the cache alone, and a registry that cannot be
//! reached falls back to a cached answer of any age, saying how old it is.

pub mod package;

use package::{Found, marked};

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use mcpx_api::client::Client;
use mcpx_api::{ApiError, Caller, ErrorKind};
use mcpx_daemon::config::ConfigEnv;
use serde_json::{Value, json};

use crate::add::AddArgs;
use crate::output::{say, say_json, table, warn};

/// The official MCP registry.
pub const OFFICIAL: &str = "https://registry.modelcontextprotocol.io";

/// How long a cached answer is used without asking the registry again.
pub const FRESH: Duration = Duration::from_secs(3600);

/// The key of the registry's own metadata in an answer's `_meta`.
const OFFICIAL_META: &str = "io.modelcontextprotocol.registry/official";

/// `mcpx registry`'s subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum RegistryAction {
    /// Find servers in the registries by words of their name or description.
    Search {
        /// The words.
        #[arg(required = true)]
        words: Vec<String>,
        /// Use only cached answers.
        #[arg(long)]
        offline: bool,
    },
    /// Show one server's `server.json`: its packages, remotes and inputs.
    Show {
        /// The server's name, `io.github.user/server`, with `@VERSION` optional.
        name: String,
        /// Use only cached answers.
        #[arg(long)]
        offline: bool,
    },
}

/// The registries and the cache, for one command.
pub(crate) struct Registries {
    /// Base URLs, in order.
    urls: Vec<String>,
    /// `<cache dir>/registry`.
    cache: PathBuf,
    /// Read the cache alone.
    offline: bool,
}

impl Registries {
    /// The registries of the caller's configuration (`registries` in the explicit file,
    /// else in the user config), else the official one.
    ///
    /// Errors: the cache directory cannot be found (`daemon`).
    pub(crate) fn new(vars: &HashMap<String, String>, caller: &Caller, offline: bool) -> Result<Registries, ApiError> {
        let file = caller.config.clone().or_else(|| ConfigEnv::from_vars(vars).user_file());
        let listed = file
            .and_then(|f| std::fs::read_to_string(f).ok())
            .and_then(|t| {
                jsonc_parser::cst::CstRootNode::parse(&t, &jsonc_parser::ParseOptions::default()).ok()?.to_serde_value()
            })
            .and_then(|v| v.get("registries").and_then(Value::as_array).cloned())
            .map(|items| items.iter().filter_map(|u| u.as_str().map(|u| u.trim_end_matches('/').to_owned())).collect())
            .filter(|urls: &Vec<String>| !urls.is_empty());
        // Opened as every mcpx process opens them: a cache directory made here is private,
        // so the next mcpx command does not refuse it as open to others.
        let dirs = mcpx_api::paths::Dirs::from_env(vars)
            .and_then(|d| d.open())
            .map_err(|e| ApiError::new(ErrorKind::Daemon, e.to_string()))?;
        Ok(Registries {
            urls: listed.unwrap_or_else(|| vec![OFFICIAL.to_owned()]),
            cache: dirs.paths.cache.join("registry"),
            offline,
        })
    }

    /// `GET url`: its body, from the cache while fresh (or `--offline`), else from the
    /// registry, else from the cache at any age (with its age). `Ok(None)`: 404.
    ///
    /// Errors: neither the registry nor the cache has it (`daemon`, saying what to do).
    async fn get(&self, url: &str) -> Result<Option<(Value, Option<Duration>)>, ApiError> {
        let key = mcpx_daemon::config::canonical_sha256(&Value::String(url.to_owned()));
        let path = self.cache.join(format!("{}.json", &key[..32]));
        let cached = std::fs::read_to_string(&path).ok().and_then(|t| serde_json::from_str::<Value>(&t).ok());
        let age = |c: &Value| {
            let at = c["fetchedAt"].as_u64().unwrap_or(0);
            Duration::from_secs(now().saturating_sub(at))
        };
        if let Some(c) = &cached {
            if self.offline || age(c) < FRESH {
                return Ok(if c["status"] == 404 { None } else { Some((c["body"].clone(), None)) });
            }
        }
        if self.offline {
            return Err(ApiError::new(
                ErrorKind::Daemon,
                format!("{url} is not cached, and --offline reads only the cache: run it once without --offline"),
            ));
        }
        match fetch(url).await {
            Ok((status, body)) => {
                let record = json!({ "fetchedAt": now(), "status": status, "body": body });
                if std::fs::create_dir_all(&self.cache).is_ok() {
                    let dir = mcpx_platform::fs::Dir::open_unchecked(&self.cache);
                    if let Ok(dir) = dir {
                        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
                        let _ = mcpx_platform::fs::write_atomic(&dir, name, record.to_string().as_bytes(), 0o600);
                    }
                }
                Ok(if status == 404 { None } else { Some((body, None)) })
            }
            Err(why) => match cached {
                Some(c) if c["status"] != 404 => {
                    let age = age(&c);
                    warn(&format!("mcpx: warning: {why}; using its answer cached {} ago", ago(age)));
                    Ok(Some((c["body"].clone(), Some(age))))
                }
                _ => Err(ApiError::new(
                    ErrorKind::Daemon,
                    format!(
                        "{why}, and no answer of it is cached: check the network, or the `registries` in your config"
                    ),
                )),
            },
        }
    }

    /// The servers whose name or description has `words`, from every registry in order
    /// (a name found in an earlier one hides it in later ones).
    pub(crate) async fn search(&self, words: &str) -> Result<Vec<Found>, ApiError> {
        let mut found: Vec<Found> = Vec::new();
        for base in &self.urls {
            let mut url = url::Url::parse(&format!("{base}/v0.1/servers"))
                .map_err(|e| ApiError::new(ErrorKind::Config, format!("registry {base}: {e}")))?;
            url.query_pairs_mut()
                .append_pair("search", words)
                .append_pair("version", "latest")
                .append_pair("limit", "30");
            let Some((body, stale)) = self.get(url.as_str()).await? else { continue };
            for item in body["servers"].as_array().into_iter().flatten() {
                let one = found_of(item, base, stale);
                if !found.iter().any(|f| f.server["name"] == one.server["name"]) {
                    found.push(one);
                }
            }
        }
        Ok(found)
    }

    /// The server `name` at `version` (`latest` when `None`), from the first registry
    /// that has it. Errors: none has it (`usage`, with the closest names).
    pub(crate) async fn show(&self, name: &str, version: Option<&str>) -> Result<Found, ApiError> {
        for base in &self.urls {
            let mut url =
                url::Url::parse(base).map_err(|e| ApiError::new(ErrorKind::Config, format!("registry {base}: {e}")))?;
            url.path_segments_mut()
                .map_err(|_| ApiError::new(ErrorKind::Config, format!("registry {base} is not an http(s) URL")))?
                .pop_if_empty()
                .extend(["v0.1", "servers", name, "versions", version.unwrap_or("latest")]);
            // A deleted server is answered too, to be marked as such rather than unknown.
            url.query_pairs_mut().append_pair("include_deleted", "true");
            if let Some((body, stale)) = self.get(url.as_str()).await? {
                return Ok(found_of(&body, base, stale));
            }
        }
        let last = name.rsplit('/').next().unwrap_or(name);
        // The registry searches by substring: the names of the same namespace, and those
        // sharing the start of the last part, are the ones a typo is near.
        let namespace = name.split('/').next().unwrap_or(name);
        let stem: String = last.chars().take(4).collect();
        let mut names: Vec<String> = Vec::new();
        for words in [namespace, stem.as_str()] {
            for f in self.search(words).await.unwrap_or_default() {
                if let Some(n) = f.server["name"].as_str().filter(|n| !names.iter().any(|m| m == n)) {
                    names.push(n.to_owned());
                }
            }
        }
        let close: Vec<String> =
            mcpx_api::suggest::closest(name, names.iter().map(String::as_str)).into_iter().map(str::to_owned).collect();
        let at = version.map(|v| format!(" version {v}")).unwrap_or_default();
        let hint = match close.as_slice() {
            [] => format!("`mcpx registry search {last}` finds servers by words"),
            names => format!("closest: {}", names.join(", ")),
        };
        Err(ApiError::new(ErrorKind::Usage, format!("no server `{name}`{at} in {}; {hint}", self.urls.join(", "))))
    }
}

/// One item of an answer (`{"server": ..., "_meta": ...}`) as a [`Found`].
fn found_of(item: &Value, registry: &str, stale: Option<Duration>) -> Found {
    let status = item["_meta"][OFFICIAL_META]["status"].as_str().unwrap_or("active").to_owned();
    Found { server: item["server"].clone(), status, registry: registry.to_owned(), stale }
}

/// `GET url` over HTTP(S), 30 s at most: the status and the JSON body. Errors: the
/// registry cannot be reached, or answers something else than JSON (a sentence).
async fn fetch(url: &str) -> Result<(u16, Value), String> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .user_agent(concat!("mcpx/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| format!("cannot make an HTTP client: {e}"))?;
    let answer =
        client.get(url).send().await.map_err(|e| format!("the registry at {url} cannot be reached: {}", cause(&e)))?;
    let status = answer.status().as_u16();
    if status == 404 {
        return Ok((404, Value::Null));
    }
    let body = answer.bytes().await.map_err(|e| format!("the registry at {url} broke off its answer ({e})"))?;
    if !(200..300).contains(&status) {
        return Err(format!("the registry at {url} answered HTTP {status}"));
    }
    serde_json::from_slice(&body)
        .map(|v| (status, v))
        .map_err(|e| format!("the registry at {url} answered no JSON ({e})"))
}

/// The innermost causes of `e`, joined: reqwest's own text names the URL again and hides
/// why (a DNS failure, a refused connection).
fn cause(e: &dyn std::error::Error) -> String {
    let mut causes = Vec::new();
    let mut next = e.source();
    while let Some(inner) = next {
        causes.push(inner.to_string());
        next = inner.source();
    }
    if causes.is_empty() { e.to_string() } else { causes.join(": ") }
}

/// A duration as people say an age: `40 s`, `12 min`, `3 h`, `2 days`.
fn ago(d: Duration) -> String {
    match d.as_secs() {
        s if s < 120 => format!("{s} s"),
        s if s < 7200 => format!("{} min", s / 60),
        s if s < 172_800 => format!("{} h", s / 3600),
        s => format!("{} days", s / 86_400),
    }
}

fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// `mcpx registry search|show`; exit 0.
///
/// Errors: as [`Registries::search`] and [`Registries::show`].
pub async fn run(
    vars: &HashMap<String, String>,
    caller: &Caller,
    action: RegistryAction,
    json: bool,
) -> Result<i32, ApiError> {
    match action {
        RegistryAction::Search { words, offline } => {
            let registries = Registries::new(vars, caller, offline)?;
            let found = registries.search(&words.join(" ")).await?;
            if json {
                let items: Vec<Value> = found
                    .iter()
                    .map(|f| json!({ "server": f.server, "status": f.status, "registry": f.registry }))
                    .collect();
                say_json(&Value::Array(items).to_string());
                return Ok(0);
            }
            if found.is_empty() {
                say(&format!("no server found for `{}`", words.join(" ")));
                return Ok(0);
            }
            let rows: Vec<Vec<String>> = found
                .iter()
                .map(|f| {
                    let s = &f.server;
                    let text = |k: &str| mcpx_platform::sanitize::line(s[k].as_str().unwrap_or_default()).into_owned();
                    vec![text("name") + &marked(&f.status), text("version"), text("description")]
                })
                .collect();
            table(&["NAME", "VERSION", "DESCRIPTION"], &rows);
            say("\nnext: `mcpx registry show NAME` shows one; `mcpx add NAME` adds it");
            Ok(0)
        }
        RegistryAction::Show { name, offline } => {
            let registries = Registries::new(vars, caller, offline)?;
            let (name, version) = split_version(&name);
            let found = registries.show(name, version).await?;
            if json {
                say_json(
                    &json!({ "server": found.server, "status": found.status, "registry": found.registry }).to_string(),
                );
                return Ok(0);
            }
            say(&package::describe(&found));
            Ok(0)
        }
    }
}

/// `name@version` split; `@` only after the last `/`.
pub(crate) fn split_version(text: &str) -> (&str, Option<&str>) {
    let slash = text.rfind('/').unwrap_or(0);
    match text[slash..].find('@') {
        Some(at) => (&text[..slash + at], Some(&text[slash + at + 1..]).filter(|v| !v.is_empty())),
        None => (text, None),
    }
}

/// `mcpx add`: from the registry when the name is a registry server's
/// ([`crate::add::is_registry_name`]) with no URL and no command, else by hand ([`crate::add::run`]).
///
/// Errors: theirs.
pub async fn add_command(
    vars: &HashMap<String, String>,
    client: Option<Client>,
    caller: Caller,
    args: AddArgs,
    json: bool,
) -> Result<i32, ApiError> {
    match args.url.is_none() && args.command.is_empty() && crate::add::is_registry_name(&args.name) {
        true => add(vars, client, caller, args, json).await,
        false => crate::add::run(vars, client, caller, args, json).await,
    }
}

/// `mcpx add <registry name>[@VERSION]`: the server's chosen package (or remote) as an
/// entry, its inputs asked for or given with `--input`, written as `mcpx add` writes
/// one (or printed, with `--dry-run`); exit 0.
///
/// Errors: an unknown or deleted server (`usage`); no package this machine can run
/// (`usage`, saying what to install); a checksum that does not match (`config`, nothing
/// written or run); the registry cannot be reached and nothing is cached (`daemon`).
async fn add(
    vars: &HashMap<String, String>,
    client: Option<Client>,
    caller: Caller,
    args: AddArgs,
    json: bool,
) -> Result<i32, ApiError> {
    let registries = Registries::new(vars, &caller, args.offline)?;
    let (name, version) = split_version(&args.name);
    let found = registries.show(name, version).await?;
    match found.status.as_str() {
        "deleted" => {
            return Err(ApiError::new(
                ErrorKind::Usage,
                format!(
                    "`{name}` is deleted from {}: it cannot be added (`mcpx registry search` finds others)",
                    found.registry
                ),
            ));
        }
        "deprecated" => warn(&format!("mcpx: warning: `{name}` is deprecated in {}; adding it anyway", found.registry)),
        _ => {}
    }
    let local = args.local_name.clone().unwrap_or_else(|| name.rsplit('/').next().unwrap_or(name).to_owned());
    if !crate::add::valid_name(&local) {
        return Err(ApiError::new(
            ErrorKind::Usage,
            format!("`{local}` cannot name a server: give another with --name"),
        ));
    }
    let mut inputs = HashMap::new();
    for kv in &args.input {
        let (k, v) = crate::add::pair("--input", kv)?;
        inputs.insert(k, v);
    }
    let place = if args.dry_run { None } else { Some(crate::add::Place::new(vars, &caller, args.project)?) };
    let state = match &place {
        Some(p) => p.state.clone(),
        None => {
            mcpx_api::paths::Dirs::from_env(vars).map_err(|e| ApiError::new(ErrorKind::Daemon, e.to_string()))?.state
        }
    };
    if let Some(place) = &place {
        place.check_free(&local)?;
    }
    let made = package::entry(&found, &local, &args.package, &inputs, &state, args.dry_run).await?;
    if !json {
        say(&made.why);
    }
    let Some(place) = place else {
        crate::add::show_dry(&local, &made.entry, &made.secrets, json);
        return Ok(0);
    };
    crate::add::store_and_write(&place, &local, &made.entry, &made.secrets, json)?;
    drop(place);
    crate::add::list_tools(client, caller, &local, args.no_list, json).await
}
