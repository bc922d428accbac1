//! `mcpx add` and `mcpx remove`: a server entry written into mcpx's own config (the user
//! config, `--config`, or with `--project` the working directory's `.mcpx.json`), by hand
//! (`mcpx add NAME -- COMMAND ARGS...`, `mcpx add NAME URL`) or from an MCP registry by
//! its name ([`crate::registry`]). The file keeps its comments (the syntax tree `import`
//! edits), a name in use is refused, secrets go to the secret store, and an entry `add`
//! writes into a project file is trusted at once: the user wrote it. The entry is then
//! shown as `mcpx trust` shows one, and the new server's tools are listed.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use mcpx_api::client::Client;
use mcpx_api::{ApiError, Caller, ErrorKind};
use mcpx_daemon::config::{ConfigEnv, ProjectEntry, TRUST_FILE, TrustRecord, change_records, entry_hash, trust_key};
use serde_json::{Map, Value, json};

use crate::import::edit::{CopyError, Edited, add_servers, remove_entries};
use crate::import::write_file;
use crate::output::{say, say_json};

/// `mcpx add`'s arguments.
#[derive(clap::Args, Debug)]
pub struct AddArgs {
    /// The server's name (for a stdio or remote server), or a registry server's name
    /// (`io.github.user/server`, `@VERSION` optional) to add it from the registry.
    pub name: String,
    /// A remote server's URL (`http://` or `https://`).
    pub url: Option<String>,
    /// The command that runs a stdio server, and its arguments, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
    /// An environment variable of the server's process (repeatable).
    #[arg(short = 'e', long = "env", value_name = "K=V")]
    pub env: Vec<String>,
    /// A header of a remote server's requests, as `claude mcp add -H` takes it (repeatable).
    #[arg(short = 'H', long = "header", value_name = "K: V")]
    pub header: Vec<String>,
    /// A remote server's transport: `http` (streamable HTTP, the default) or `sse`.
    #[arg(long, value_parser = ["http", "sse"])]
    pub transport: Option<String>,
    /// An environment variable whose value is asked for and kept in the secret store as
    /// `<name>.<K>`; the entry says `${secret:<name>.<K>}` (repeatable).
    #[arg(long = "secret-env", value_name = "K")]
    pub secret_env: Vec<String>,
    /// Write the working directory's `.mcpx.json` (trusted at once) instead of the user config.
    #[arg(long)]
    pub project: bool,
    /// Do not list the new server's tools.
    #[arg(long = "no-list")]
    pub no_list: bool,
    /// From the registry: the local name (else the part after the last `/`).
    #[arg(long = "name", id = "local_name", value_name = "NAME")]
    pub local_name: Option<String>,
    /// From the registry: a value for an input the package asks for (repeatable).
    #[arg(long, value_name = "K=V")]
    pub input: Vec<String>,
    /// From the registry: the package type to prefer (npm, pypi, nuget, oci, mcpb, remote; repeatable, in order).
    #[arg(long, value_name = "TYPE")]
    pub package: Vec<String>,
    /// Print the entry without writing anything.
    #[arg(long = "dry-run")]
    pub dry_run: bool,
    /// From the registry: use only what is cached.
    #[arg(long)]
    pub offline: bool,
}

/// `mcpx remove`'s arguments.
#[derive(clap::Args, Debug)]
pub struct RemoveArgs {
    /// The server's name.
    pub name: String,
    /// Remove it from the working directory's `.mcpx.json` instead of the user config.
    #[arg(long)]
    pub project: bool,
}

/// Where `add` and `remove` write, and what they need around it.
pub(crate) struct Place {
    /// mcpx's file: `--config`, `.mcpx.json` with `--project`, else the user config.
    pub file: PathBuf,
    /// Whether it is a project file (its new entries are trusted at once).
    pub project: bool,
    /// mcpx's state directory (the secret store, trust records).
    pub state: PathBuf,
    /// This process's turn to edit config files, held while it lives.
    _turn: nix::fcntl::Flock<std::fs::File>,
}

impl Place {
    /// Errors unless the file has no server named `name` (`usage`, saying what to do).
    pub(crate) fn check_free(&self, name: &str) -> Result<(), ApiError> {
        let Ok(text) = std::fs::read_to_string(&self.file) else { return Ok(()) };
        let value = jsonc_parser::cst::CstRootNode::parse(&text, &jsonc_parser::ParseOptions::default())
            .ok()
            .and_then(|root| root.to_serde_value());
        let taken =
            ["mcpServers", "servers"].iter().any(|key| value.as_ref().and_then(|v| v.get(key)?.get(name)).is_some());
        match taken {
            true => Err(ApiError::new(
                ErrorKind::Usage,
                format!(
                    "{} already has a server named `{name}`: choose another name, or `mcpx remove {name}` first",
                    self.file.display()
                ),
            )),
            false => Ok(()),
        }
    }

    /// Errors: HOME is not set and no file is named (`usage`); mcpx's directories
    /// cannot be used (`daemon`).
    pub(crate) fn new(vars: &HashMap<String, String>, caller: &Caller, project: bool) -> Result<Place, ApiError> {
        let env = ConfigEnv::from_vars(vars);
        let file = match (&caller.config, project, &caller.cwd) {
            (Some(file), _, _) => file.clone(),
            (None, true, Some(cwd)) => cwd.join(mcpx_daemon::config::MCPX_PROJECT_FILE),
            _ => env.user_file().ok_or_else(|| {
                ApiError::new(
                    ErrorKind::Usage,
                    "HOME is not set, so the user config cannot be found: use --config FILE",
                )
            })?,
        };
        if let Some(owner) = mcpx_daemon::config::Client::of_file(&file, &env) {
            return Err(ApiError::new(
                ErrorKind::Usage,
                format!(
                    "{} is {}'s file, not an mcpx config: name a .json file of mcpx's",
                    file.display(),
                    owner.label()
                ),
            ));
        }
        let (dirs, turn) = crate::import::take_turn(vars)?;
        let project = project && caller.config.is_none();
        Ok(Place { file, project, state: dirs.paths.state, _turn: turn })
    }
}

/// A `K=V` option's parts. Errors: no `=`, or an empty name (`usage`).
pub(crate) fn pair(option: &str, text: &str) -> Result<(String, String), ApiError> {
    match text.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(ApiError::new(ErrorKind::Usage, format!("{option} {text}: write it as NAME=VALUE"))),
    }
}

/// `mcpx add`: a stdio or remote server by hand, or a registry server by name; exit 0.
///
/// Errors: what to add is unclear, a bad option, or a name in use (`usage`); the file
/// cannot be edited safely (`config`, with the lines to paste).
pub async fn run(
    vars: &HashMap<String, String>,
    client: Option<Client>,
    caller: Caller,
    args: AddArgs,
    json: bool,
) -> Result<i32, ApiError> {
    check(&args)?;
    let remote = args.url.as_deref().filter(|u| {
        let lower = u.to_ascii_lowercase();
        lower.starts_with("http://") || lower.starts_with("https://")
    });
    let entry = match (&args.command[..], remote, args.url.as_deref()) {
        ([], None, Some(other)) => {
            return Err(ApiError::new(
                ErrorKind::Usage,
                format!(
                    "{other} is not a URL: a remote server's is http:// or https://; a stdio server's command goes after `--`"
                ),
            ));
        }
        ([], None, None) => {
            return Err(ApiError::new(
                ErrorKind::Usage,
                "say what to add: `mcpx add NAME -- COMMAND [ARGS...]`, `mcpx add NAME URL`, or a registry name (`mcpx add io.github.user/server`)",
            ));
        }
        ([_, ..], Some(_), _) => {
            return Err(ApiError::new(ErrorKind::Usage, "give a URL or a command after `--`, not both"));
        }
        ([command, rest @ ..], None, _) => {
            if !args.header.is_empty() || args.transport.is_some() {
                return Err(ApiError::new(
                    ErrorKind::Usage,
                    "--header and --transport are for a remote server: a stdio one takes --env",
                ));
            }
            let mut entry = json!({ "command": command, "args": rest });
            let env = env_of(&args)?;
            if !env.is_empty() {
                entry["env"] = Value::Object(env);
            }
            entry
        }
        ([], Some(url), _) => {
            let mut entry = json!({ "url": url });
            if let Some(t) = &args.transport {
                entry["transport"] = json!(t);
            }
            let parsed = url::Url::parse(url).ok().filter(|u| u.host_str().is_some_and(|h| !h.is_empty()));
            if parsed.is_none() {
                return Err(ApiError::new(
                    ErrorKind::Usage,
                    format!("{url} is not a URL with a host: write it as https://host/path"),
                ));
            }
            let mut headers = Map::new();
            for header in &args.header {
                let (k, v) = header_of(header)?;
                if headers.keys().any(|h: &String| h.eq_ignore_ascii_case(&k)) {
                    return Err(ApiError::new(ErrorKind::Usage, format!("--header {k} is given twice: give it once")));
                }
                headers.insert(k, Value::String(v));
            }
            if !headers.is_empty() {
                entry["headers"] = Value::Object(headers);
            }
            if !args.env.is_empty() || !args.secret_env.is_empty() {
                let flag = if args.env.is_empty() { "--secret-env" } else { "--env" };
                return Err(ApiError::new(
                    ErrorKind::Usage,
                    format!("{flag} is for a stdio server: a remote one takes --header"),
                ));
            }
            entry
        }
    };
    let Value::Object(mut entry) = entry else { unreachable!("built as an object") };
    let mut secrets = BTreeMap::new();
    for key in &args.secret_env {
        let name = format!("{}.{key}", args.name);
        mcpx_platform::secrets::check_name(&name)
            .map_err(|e| ApiError::new(ErrorKind::Usage, format!("--secret-env {key}: {e}")))?;
        let env = entry.entry("env").or_insert_with(|| Value::Object(Map::new()));
        env[key.as_str()] = Value::String(format!("${{secret:{name}}}"));
        secrets.insert(name, None);
    }
    if args.dry_run {
        show_dry(&args.name, &entry, &secrets, json);
        return Ok(0);
    }
    let place = Place::new(vars, &caller, args.project)?;
    place.check_free(&args.name)?;
    store_and_write(&place, &args.name, &entry, &secrets, json)?;
    list_tools(client, caller, &args.name, args.no_list, json).await
}

/// `--dry-run`: the entry `name` and the secrets it would store, printed; nothing written.
pub(crate) fn show_dry(name: &str, entry: &Map<String, Value>, secrets: &BTreeMap<String, Option<String>>, json: bool) {
    if json {
        say_json(&json!({ "name": name, "entry": entry, "secrets": secrets.keys().collect::<Vec<_>>() }).to_string());
        return;
    }
    let shown = json!({ name: entry });
    say(&format!(
        "--dry-run: nothing written; the entry would be:\n{}",
        serde_json::to_string_pretty(&shown).unwrap_or_default()
    ));
    for secret in secrets.keys() {
        say(&format!("  and the secret `{secret}` would be stored"));
    }
}

/// Stores `secrets` (name → value; `None`: asked for, or read as a line of stdin), then
/// writes `entry` as `name` ([`write_entry`]). The caller has checked the name is free
/// ([`Place::check_free`]), so a refused name leaves no secret overwritten.
///
/// Errors: those of [`crate::secret::store`] and [`write_entry`].
pub(crate) fn store_and_write(
    place: &Place,
    name: &str,
    entry: &Map<String, Value>,
    secrets: &BTreeMap<String, Option<String>>,
    json: bool,
) -> Result<(), ApiError> {
    for (secret, value) in secrets {
        let location = crate::secret::store(&place.state, secret, value.as_deref())?;
        if !json {
            say(&format!("secret `{secret}` set ({location})"));
        }
    }
    write_entry(place, name, entry, json)
}

/// Refuses what `add` by hand cannot use: a bad server name, the registry's options, and
/// a variable given both with `--env` and `--secret-env`. Errors: `usage`, saying which.
fn check(args: &AddArgs) -> Result<(), ApiError> {
    let usage = |m: String| Err(ApiError::new(ErrorKind::Usage, m));
    let registry = is_registry_name(&args.name) && args.url.is_none() && args.command.is_empty();
    if !registry && !valid_name(&args.name) {
        return usage(format!(
            "`{}` cannot name a server: use letters, digits, `-`, `_` and `.` (no `/`, no spaces)",
            args.name
        ));
    }
    if !registry {
        let given = [
            ("--name", args.local_name.is_some()),
            ("--input", !args.input.is_empty()),
            ("--package", !args.package.is_empty()),
            ("--offline", args.offline),
        ];
        if let Some((flag, _)) = given.iter().find(|(_, set)| *set) {
            return usage(format!("{flag} is for a server added from a registry by its name, not by hand"));
        }
    }
    for key in &args.secret_env {
        if args.env.iter().any(|kv| kv.split('=').next() == Some(key.as_str())) {
            return usage(format!("{key} is given with both --env and --secret-env: give it once"));
        }
    }
    Ok(())
}

/// Whether `text` names a registry server: a reverse-DNS namespace, a `/`, a name
/// (`io.github.user/server`), and `@VERSION` optional.
pub fn is_registry_name(text: &str) -> bool {
    let name = text.split('@').next().unwrap_or(text);
    match name.split_once('/') {
        Some((namespace, rest)) => {
            namespace.contains('.')
                && !rest.is_empty()
                && !text.contains("://")
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-/".contains(&b))
        }
        None => false,
    }
}

/// Whether `name` can name a server: not empty, and letters, digits, `-`, `_` and `.`
/// only (a `/` would make the aggregate's resource URIs ambiguous).
pub(crate) fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 128 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

/// A `--header "Name: value"`. Errors: no `:`, a name that is no HTTP token, or a value
/// holding a line break or another control character (`usage`).
fn header_of(text: &str) -> Result<(String, String), ApiError> {
    let bad = |why: &str| {
        Err(ApiError::new(ErrorKind::Usage, format!("--header {text:?}: {why}; write it as \"Name: value\"")))
    };
    let Some((k, v)) = text.split_once(':') else { return bad("it has no `:`") };
    let (k, v) = (k.trim(), v.trim());
    // RFC 9110, section 5.1 (field names are tokens) and 5.5 (values: no CR, LF or NUL).
    let token = !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if !token {
        return bad("the name is not an HTTP header name (letters, digits and !#$%&'*+-.^_`|~ only)");
    }
    if v.chars().any(|c| c.is_control() && c != '\t') {
        return bad("the value holds a line break or another control character");
    }
    Ok((k.to_owned(), v.to_owned()))
}

/// The entry's `env` from `--env`. Errors: a bad `K=V` (`usage`).
fn env_of(args: &AddArgs) -> Result<Map<String, Value>, ApiError> {
    let mut env = Map::new();
    for kv in &args.env {
        let (k, v) = pair("--env", kv)?;
        env.insert(k, Value::String(v));
    }
    Ok(env)
}

/// Adds `entry` as `name` to `place`'s file (keeping its comments), trusts it when the
/// file is a project's, and shows it as `mcpx trust` would.
///
/// Errors: the name is in use (`usage`); the file cannot be edited safely (`config`).
pub(crate) fn write_entry(place: &Place, name: &str, entry: &Map<String, Value>, json: bool) -> Result<(), ApiError> {
    let file = &place.file;
    let text = match std::fs::read_to_string(file) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(ApiError::new(ErrorKind::Config, format!("cannot read {}: {e}", file.display()))),
    };
    let new = match add_servers(text.as_deref(), &[(name.to_owned(), entry.clone())], false) {
        Ok(Edited { text: Some(new), .. }) => new,
        Ok(Edited { text: None, .. }) => return Ok(()),
        Err(CopyError::Clash(_)) => {
            return Err(ApiError::new(
                ErrorKind::Usage,
                format!(
                    "{} already has a server named `{name}`: choose another name, or `mcpx remove {name}` first",
                    file.display()
                ),
            ));
        }
        Err(CopyError::Refused(r)) => {
            return Err(ApiError::new(
                ErrorKind::Config,
                format!(
                    "cannot edit {} safely: {}; it is unchanged: add this to its top-level object yourself:\n{}",
                    file.display(),
                    r.reason,
                    r.paste
                ),
            ));
        }
    };
    write_file(file, &new)
        .map_err(|(what, e)| ApiError::new(ErrorKind::Config, format!("cannot {what} {}: {e}", file.display())))?;
    let hash = entry_hash(&Value::Object(entry.clone()));
    if place.project {
        let state = mcpx_platform::fs::Dir::open_private(&place.state, true)
            .map_err(|e| ApiError::new(ErrorKind::Daemon, format!("{}: {e}", place.state.display())))?;
        let key = trust_key(file).map_err(|e| ApiError::new(ErrorKind::Config, format!("{}: {e}", file.display())))?;
        let record = TrustRecord { file: key, server: name.to_owned(), hash: hash.clone() };
        change_records(&state, &place.state, |store| {
            store.add(record);
            Ok(((), true))
        })
        .map_err(|e| ApiError::new(ErrorKind::Config, format!("{e} ({})", place.state.join(TRUST_FILE).display())))?;
    }
    let shown = described(file, name, entry, hash);
    if json {
        // A user config's entries are the user's own; a project file's are trusted above.
        say_json(&json!({ "added": name, "file": file, "entry": entry, "trusted": true }).to_string());
        return Ok(());
    }
    let (head, lines) = shown.described();
    say(&format!("added to {}{}:", file.display(), if place.project { " (trusted: you wrote it)" } else { "" }));
    say(&format!("  {head}"));
    for line in lines {
        say(&format!("    {line}"));
    }
    Ok(())
}

/// `entry` as `mcpx trust` shows one.
fn described(file: &Path, name: &str, entry: &Map<String, Value>, hash: String) -> ProjectEntry {
    let strings = |key: &str| -> BTreeMap<String, String> {
        let map = entry.get(key).and_then(Value::as_object).cloned().unwrap_or_default();
        map.into_iter().map(|(k, v)| (k, v.as_str().unwrap_or_default().to_owned())).collect()
    };
    let args = entry.get("args").and_then(Value::as_array).cloned().unwrap_or_default();
    ProjectEntry {
        file: file.to_owned(),
        server: name.to_owned(),
        hash,
        command: entry.get("command").and_then(Value::as_str).map(str::to_owned),
        args: args.iter().filter_map(|a| a.as_str().map(str::to_owned)).collect(),
        env: strings("env"),
        url: entry.get("url").and_then(Value::as_str).map(str::to_owned),
        headers: strings("headers"),
        ..ProjectEntry::default()
    }
}

/// Lists the new server's tools, as `mcpx tools NAME` does, unless `skip`.
pub(crate) async fn list_tools(
    client: Option<Client>,
    caller: Caller,
    name: &str,
    skip: bool,
    json: bool,
) -> Result<i32, ApiError> {
    let Some(client) = client.filter(|_| !skip && !json) else { return Ok(0) };
    say("");
    match crate::offers::tools(&client, caller, name.to_owned(), None, false).await {
        Ok(code) => Ok(code),
        Err(e) => {
            crate::output::warn(&format!(
                "mcpx: the server was added, but listing its tools failed: {}; `mcpx tools {name}` tries again",
                e.message
            ));
            Ok(0)
        }
    }
}

/// `mcpx remove NAME`: takes the entry out of the file `add` would write, keeping the
/// rest of it as it was; exit 0.
///
/// Errors: no such entry there (`usage`); the file cannot be edited safely (`config`).
pub fn remove(vars: &HashMap<String, String>, caller: Caller, args: RemoveArgs, json: bool) -> Result<i32, ApiError> {
    let place = Place::new(vars, &caller, args.project)?;
    let file = &place.file;
    let missing = || {
        let hint = if args.project { "" } else { "; add --project for the working directory's .mcpx.json" };
        ApiError::new(
            ErrorKind::Usage,
            format!(
                "{} has no server named `{}` (`mcpx ls -l` shows where each is defined{hint})",
                file.display(),
                args.name
            ),
        )
    };
    let text = std::fs::read_to_string(file).map_err(|_| missing())?;
    let edited = remove_entries(&text, "mcpServers", |name, _| name == args.name).map_err(|r| {
        ApiError::new(
            ErrorKind::Config,
            format!("cannot edit {} safely: {}; it is unchanged", file.display(), r.reason),
        )
    })?;
    let Some(new) = edited.text else { return Err(missing()) };
    write_file(file, &new)
        .map_err(|(what, e)| ApiError::new(ErrorKind::Config, format!("cannot {what} {}: {e}", file.display())))?;
    if json {
        say_json(&json!({ "removed": args.name, "file": file }).to_string());
    } else {
        say(&format!("removed `{}` from {}", args.name, file.display()));
    }
    Ok(0)
}
