//! Parsing one config file into server entries.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value};

use super::clients::{Client, FileKind, Layout};
use super::entry::{EntryError, ServerEntry};
use super::error::ConfigError;
use super::parse_entry::parse_entry;
use super::spec::Pinning;
use super::units::json_kind;
use super::{dialect, jsonc};

/// The parts of a JSON(C) file we read; every other top-level key is ignored. `imports` is
/// read as a plain value and `projects` leniently, since in files of other programs they may
/// mean something else.
#[derive(Deserialize)]
#[serde(expecting = "an object with an `mcpServers` (or `servers`) key")]
struct TopLevel {
    #[serde(rename = "mcpServers", default)]
    mcp_servers: Option<Entries>,
    #[serde(default)]
    servers: Option<Entries>,
    #[serde(default)]
    imports: Option<Value>,
    #[serde(default)]
    projects: Option<Projects>,
    #[serde(default)]
    inputs: Option<Value>,
    #[serde(rename = "trustProjectFiles", default)]
    trust_project_files: Option<Value>,
    #[serde(default)]
    pinning: Option<Value>,
    /// Gemini CLI's `mcp` settings: `allowed` and `excluded` server names.
    #[serde(default)]
    mcp: Option<Value>,
    /// Zed's servers.
    #[serde(default)]
    context_servers: Option<Entries>,
    /// mcpx's profiles (`crate::profile`).
    #[serde(default)]
    profiles: Option<Value>,
}

/// Claude Code's `projects`: for each directory, the entries of its `mcpServers` (none when
/// it has none, or they are not an object). Every other key is skipped without being built,
/// and a value of another shape is no project: `~/.claude.json` keeps each project's history
/// here, often megabytes of it, and the file is rewritten often.
#[derive(Default)]
struct Projects(Vec<(PathBuf, RawEntries)>);

/// One project of [`Projects`]: the entries of its `mcpServers`.
#[derive(Default)]
struct Project(RawEntries);

/// Accepts any JSON value; a map goes to `on_map`, anything else gives `T::default()`.
struct MapOrIgnore<T, F>(F, std::marker::PhantomData<T>);

impl<'de, T: Default, F: FnOnce(&mut dyn ErasedMap<'de>) -> Result<T, String>> serde::de::Visitor<'de>
    for MapOrIgnore<T, F>
{
    type Value = T;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any value")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<T, A::Error> {
        (self.0)(&mut map).map_err(serde::de::Error::custom)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<T, A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(T::default())
    }
    fn visit_bool<E>(self, _: bool) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_i64<E>(self, _: i64) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_u64<E>(self, _: u64) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_f64<E>(self, _: f64) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_str<E>(self, _: &str) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_unit<E>(self) -> Result<T, E> {
        Ok(T::default())
    }
}

/// The part of `serde::de::MapAccess` the lenient visitors use, as an object-safe trait.
trait ErasedMap<'de> {
    /// The next key, or `None` at the end.
    fn key(&mut self) -> Result<Option<String>, String>;
    /// The value of the last key, as a project.
    fn project(&mut self) -> Result<Project, String>;
    /// The value of the last key, as JSON.
    fn value(&mut self) -> Result<Value, String>;
    /// Skips the value of the last key.
    fn skip(&mut self) -> Result<(), String>;
}

impl<'de, A: serde::de::MapAccess<'de>> ErasedMap<'de> for A {
    fn key(&mut self) -> Result<Option<String>, String> {
        self.next_key().map_err(|e| e.to_string())
    }
    fn project(&mut self) -> Result<Project, String> {
        self.next_value().map_err(|e| e.to_string())
    }
    fn value(&mut self) -> Result<Value, String> {
        self.next_value().map_err(|e| e.to_string())
    }
    fn skip(&mut self) -> Result<(), String> {
        self.next_value::<serde::de::IgnoredAny>().map(|_| ()).map_err(|e| e.to_string())
    }
}

impl<'de> Deserialize<'de> for Projects {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let read = |map: &mut dyn ErasedMap<'de>| {
            let mut projects = Vec::new();
            while let Some(dir) = map.key()? {
                projects.push((PathBuf::from(dir), map.project()?.0));
            }
            Ok(Projects(projects))
        };
        deserializer.deserialize_any(MapOrIgnore(read, std::marker::PhantomData))
    }
}

impl<'de> Deserialize<'de> for Project {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let read = |map: &mut dyn ErasedMap<'de>| {
            let mut entries = Vec::new();
            while let Some(key) = map.key()? {
                if key == "mcpServers" {
                    // Small: read whole, then as entries when it is an object of them.
                    entries = Entries::deserialize(map.value()?).map(|e| e.0).unwrap_or_default();
                } else {
                    map.skip()?;
                }
            }
            Ok(Project(entries))
        };
        deserializer.deserialize_any(MapOrIgnore(read, std::marker::PhantomData))
    }
}

/// The part of Codex's `config.toml` we read: `[mcp_servers.NAME]` tables.
#[derive(Deserialize)]
struct CodexTop {
    #[serde(default)]
    mcp_servers: Option<BTreeMap<String, toml::Value>>,
}

/// The entries of one server key in file order, duplicates kept (a map would silently keep
/// the last).
struct Entries(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Entries;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of server entries")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Entries, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(Entries(entries))
            }
        }
        deserializer.deserialize_map(Visit)
    }
}

/// The servers of one file, or of one part of it: good entries and bad ones, by name (no
/// name is in both).
#[derive(Debug, Default)]
pub(super) struct Layer {
    /// The entries that parsed.
    pub(super) servers: BTreeMap<String, ServerEntry>,
    /// The entries that did not, each with its error.
    pub(super) errors: BTreeMap<String, EntryError>,
    /// Warnings about entries, by name: a name defined twice under one key.
    pub(super) warnings: BTreeMap<String, Vec<String>>,
}

/// One parsed file.
#[derive(Debug, Default)]
pub(super) struct ParsedFile {
    /// Its servers (for Claude Code's `~/.claude.json`, the top-level ones).
    pub(super) main: Layer,
    /// Claude Code's per-project ("local") servers: `projects.<dir>.mcpServers`, by directory.
    pub(super) projects: Vec<(PathBuf, Layer)>,
    /// The clients named in a top-level `imports` key; `Some` whenever the key is present.
    pub(super) imports: Option<Vec<Client>>,
    /// Problems with the file's other keys, one line each naming the file (a bad `imports`).
    pub(super) notes: Vec<String>,
    /// A top-level `"trustProjectFiles": true` (honoured in the user config and an
    /// explicit file only).
    pub(super) trust_all: bool,
    /// The top-level `pinning` (docs/configuration.md, "Pinning"): the default mode of
    /// the user config, the floor of a project file's servers.
    pub(super) pinning: Option<Pinning>,
    /// Why a top-level `pinning` is ignored (not one of the four modes).
    pub(super) pinning_note: Option<String>,
    /// The top-level `profiles`, `Some` whenever the key is present (honoured in the user
    /// config and an explicit file only), and a note per profile left out.
    pub(super) profiles: Option<(BTreeMap<String, crate::profile::Profile>, Vec<String>)>,
}

impl ParsedFile {
    /// Every layer: the main one, then each project's.
    pub(super) fn layers(&self) -> impl Iterator<Item = &Layer> {
        std::iter::once(&self.main).chain(self.projects.iter().map(|(_, l)| l))
    }
}

/// A server's name and its entry as a JSON object.
pub type NamedEntry = (String, Map<String, Value>);

/// The raw entries of one key, in file order (an entry that is not an object fails alone).
type RawEntries = Vec<(String, Value)>;

/// A file's server entries as written, before they are rewritten and parsed.
struct RawFile {
    /// The server keys of the file and their entries, lowest precedence first.
    main: Vec<(&'static str, RawEntries)>,
    /// Claude Code's `projects.<dir>.mcpServers`, by directory.
    projects: Vec<(PathBuf, RawEntries)>,
    /// The top-level `imports` value, if any.
    imports: Option<Value>,
    /// VS Code's `inputs`: each input's id and description.
    inputs: BTreeMap<String, String>,
    /// A top-level `"trustProjectFiles": true`.
    trust_all: bool,
    /// The top-level `pinning` value, if any.
    pinning: Option<Value>,
    /// The top-level `profiles` value, if any.
    profiles: Option<Value>,
}

/// Reads the server entries of a file of `kind` as written. JSON(C): `servers` (VS Code) and
/// `mcpServers`, and for Claude Code `projects.<dir>.mcpServers`. Codex: TOML,
/// `[mcp_servers.NAME]`. A file with none of these keys has no servers. Errors:
/// [`ConfigError::Syntax`] when the file is not JSON(C) (TOML for Codex) of the right shape.
fn read_raw(file: &Path, kind: &FileKind, text: &str) -> Result<RawFile, ConfigError> {
    let syntax = |offset: usize, message: String| {
        let (line, column) = line_column(text, offset);
        ConfigError::Syntax { file: file.to_owned(), line, column, message }
    };
    let layout = kind.client.map(Client::layout);
    if let Some(Layout::Toml(key)) = layout {
        let top: CodexTop =
            toml::from_str(text).map_err(|e| syntax(e.span().map_or(0, |s| s.start), e.message().to_owned()))?;
        let entries = top
            .mcp_servers
            .unwrap_or_default()
            .into_iter()
            .map(|(name, value)| (name, serde_json::to_value(value).unwrap_or(Value::Null)));
        return Ok(RawFile::only(vec![(key, entries.collect())]));
    }
    if let Some(Layout::YamlMap(key) | Layout::YamlList(key)) = layout {
        // An empty file is an empty document, as the clients take it.
        let top: Value = if text.trim().is_empty() {
            Value::Null
        } else {
            yaml_value(text).map_err(|e| {
                let (line, column) = line_column(text, e.location().map_or(0, |l| l.index()));
                ConfigError::Syntax { file: file.to_owned(), line, column, message: yaml_message(&e) }
            })?
        };
        let entries = match top.get(key) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Object(map)) if matches!(layout, Some(Layout::YamlMap(_))) => map.clone().into_iter().collect(),
            Some(Value::Array(items)) if matches!(layout, Some(Layout::YamlList(_))) => named_items(items),
            Some(other) => {
                let shape = if matches!(layout, Some(Layout::YamlMap(_))) { "a mapping" } else { "a list" };
                let message = format!("`{key}` must be {shape} of servers, found {}", json_kind(other));
                return Err(ConfigError::Syntax { file: file.to_owned(), line: 1, column: 1, message });
            }
        };
        let client = kind.client.unwrap_or(Client::Goose);
        let servers = entries.into_iter().filter(|(_, e)| e.as_object().is_none_or(|m| dialect::is_server(client, m)));
        return Ok(RawFile::only(vec![(key, servers.collect())]));
    }
    let mut json = jsonc::to_json(text).map_err(|e| syntax(e.offset, e.message.to_owned()))?;
    // A blank file (or one of comments only) has no servers yet, as the clients take it.
    if json.trim().is_empty() {
        json = "{}".to_owned();
    }
    let top: TopLevel = serde_json::from_str(&json).map_err(|e| ConfigError::Syntax {
        file: file.to_owned(),
        line: e.line(),
        column: e.column(),
        message: serde_message(&e),
    })?;
    let mut main = match layout {
        Some(Layout::Json("context_servers")) => vec![("context_servers", top.context_servers)],
        Some(Layout::Json("mcp")) => {
            let entries = match top.mcp.clone() {
                Some(Value::Object(map)) => Some(Entries(map.into_iter().collect())),
                None | Some(Value::Null) => None,
                Some(other) => {
                    let message = format!("`mcp` must be an object of servers, found {}", json_kind(&other));
                    return Err(ConfigError::Syntax { file: file.to_owned(), line: 1, column: 1, message });
                }
            };
            vec![("mcp", entries)]
        }
        _ => vec![("servers", top.servers), ("mcpServers", top.mcp_servers)],
    }
    .into_iter()
    .map(|(key, e)| (key, e.map(|e| e.0).unwrap_or_default()))
    .collect::<Vec<_>>();
    if let (Some(Client::Gemini), Some(mcp)) = (kind.client, &top.mcp) {
        for (_, entries) in &mut main {
            dialect::gemini_allowed(mcp, entries);
        }
    }
    let projects = match kind.client {
        // A project without servers still counts: it is the caller's project, and hides
        // the servers of the projects above it.
        Some(Client::ClaudeCode) => top.projects.unwrap_or_default().0,
        _ => Vec::new(),
    };
    let inputs = match kind.client {
        Some(Client::Vscode) => input_descriptions(top.inputs.as_ref()),
        _ => BTreeMap::new(),
    };
    Ok(RawFile {
        main,
        projects,
        imports: top.imports,
        inputs,
        trust_all: top.trust_project_files.as_ref().and_then(Value::as_bool) == Some(true),
        pinning: top.pinning,
        profiles: top.profiles,
    })
}

impl RawFile {
    /// A file that has only servers (no `imports`, projects, inputs or settings).
    fn only(main: Vec<(&'static str, RawEntries)>) -> RawFile {
        let (imports, inputs, pinning, profiles) = (None, BTreeMap::new(), None, None);
        RawFile { main, projects: Vec::new(), imports, inputs, trust_all: false, pinning, profiles }
    }
}

/// Continue's list of servers: each item named by its `name` (an item without one is
/// named by its place, `#N`, and fails alone as an entry without `command` or `url`).
fn named_items(items: &[Value]) -> RawEntries {
    let name =
        |i: usize, item: &Value| item.get("name").and_then(Value::as_str).map_or(format!("#{}", i + 1), str::to_owned);
    items.iter().enumerate().map(|(i, item)| (name(i, item), item.clone())).collect()
}

/// A YAML text as a JSON value, with its merge keys (`<<: *anchor`) applied as YAML 1.1
/// says, as Goose and Continue read them.
///
/// Errors: it does not parse as YAML, or a merge key's value is not a mapping (or a list
/// of them).
pub fn yaml_value(text: &str) -> Result<Value, serde_norway::Error> {
    let mut value: serde_norway::Value = serde_norway::from_str(text)?;
    value.apply_merge()?;
    serde_json::to_value(value).map_err(serde::de::Error::custom)
}

/// serde_norway's message without its " at line L column C" suffix.
fn yaml_message(e: &serde_norway::Error) -> String {
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(at) if e.location().is_some() => text[..at].to_owned(),
        _ => text,
    }
}

/// VS Code's `inputs` (`[{"id", "description", ...}]`): id → description, at most 200
/// characters of each, for the message of an unset `${input:ID}`. Anything else there
/// is ignored: VS Code's prompts are not mcpx's to show.
fn input_descriptions(inputs: Option<&Value>) -> BTreeMap<String, String> {
    let items = inputs.and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    items
        .iter()
        .filter_map(|input| {
            let id = input.get("id")?.as_str()?;
            let description = input.get("description")?.as_str()?;
            Some((id.to_owned(), description.chars().take(200).collect()))
        })
        .collect()
}

/// Parses the text of the config file at `file`, a file of `kind`, into its servers.
///
/// `servers` (VS Code) and `mcpServers` are merged, `mcpServers` winning on a name clash.
/// Each entry is rewritten into mcpx's shape by [`dialect::normalize`]. Errors:
/// [`ConfigError::Syntax`] as for [`read_raw`]; a bad entry is not an error of the file but
/// lands in [`Layer::errors`].
pub(super) fn parse_file(file: &Path, kind: &FileKind, text: &str) -> Result<ParsedFile, ConfigError> {
    let raw = read_raw(file, kind, text)?;
    let mut parsed =
        ParsedFile { main: layer(file, kind, raw.main), trust_all: raw.trust_all, ..ParsedFile::default() };
    if !raw.inputs.is_empty() {
        for entry in parsed.main.servers.values_mut() {
            entry.inputs = raw.inputs.clone();
        }
    }
    parsed.projects =
        raw.projects.into_iter().map(|(dir, e)| (dir, layer(file, kind, vec![("mcpServers", e)]))).collect();
    if let Some(imports) = raw.imports {
        let (clients, notes) = parse_imports(file, &imports);
        parsed.imports = Some(clients);
        parsed.notes = notes;
    }
    if let Some(value) = &raw.profiles {
        parsed.profiles = Some(crate::profile::parse_profiles(file, value));
    }
    if let Some(value) = &raw.pinning {
        match value.as_str().map(str::parse::<Pinning>) {
            Some(Ok(mode)) => parsed.pinning = Some(mode),
            _ => {
                parsed.pinning_note = Some(format!(
                    "{}: `pinning` must be \"off\", \"warn\", \"hold\" or \"strict\", found {value}; it is ignored",
                    file.display()
                ))
            }
        }
    }
    Ok(parsed)
}

/// The servers `client`'s file at `path` gives a caller in `cwd`, each rewritten into
/// mcpx's own entry shape (`command`/`args`/`env`/`cwd` or `url`/`headers`/`transport`, and
/// an `mcpx` block for the client's options such as `disabled`), in name order: what
/// `mcpx import` counts and `mcpx import --copy` writes. For Claude Code, the servers of the
/// project that is the nearest ancestor of `cwd` beat the top-level ones.
///
/// An entry that runs `mcpx serve` (how that client reaches mcpx) is left out, as in every
/// file mcpx reads. Errors: [`ConfigError::Io`] when the file cannot be read,
/// [`ConfigError::Syntax`] when it does not parse. Entries are not checked: a wrong one is
/// returned as written.
pub fn read_client_file(client: Client, path: &Path, cwd: Option<&Path>) -> Result<Vec<NamedEntry>, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Io { file: path.to_owned(), error })?;
    let kind = FileKind { client: Some(client), workspace: None };
    let raw = read_raw(path, &kind, &text)?;
    let mut servers = BTreeMap::new();
    for (_, entries) in raw.main {
        servers.extend(entries);
    }
    let nearest = cwd.and_then(|cwd| nearest_project(cwd, raw.projects));
    servers.extend(nearest.into_iter().flat_map(|(_, entries)| entries));
    let objects = servers.into_iter().filter_map(|(name, v)| match v {
        Value::Object(map) if !dialect::runs_mcpx_serve(&map) => Some((name, map)),
        _ => None,
    });
    Ok(objects.map(|(name, map)| (name, dialect::normalize(&kind, map))).collect())
}

/// The names of the top-level entries of `client`'s file at `path` that run `mcpx serve`
/// (how the client reaches mcpx everywhere), in name order: the ones `mcpx connect` adds
/// and `mcpx disconnect` takes out. Claude Code's per-project entries are not among them:
/// they reach mcpx in one project only. Errors: as [`read_client_file`]'s.
pub fn mcpx_entries(client: Client, path: &Path) -> Result<Vec<String>, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Io { file: path.to_owned(), error })?;
    let kind = FileKind { client: Some(client), workspace: None };
    let raw = read_raw(path, &kind, &text)?;
    let entries = raw.main.into_iter().flat_map(|(_, e)| e);
    let mut names: Vec<String> = entries
        .filter_map(|(name, v)| match v {
            Value::Object(map) if dialect::runs_mcpx_serve(&map) => Some(name),
            _ => None,
        })
        .collect();
    names.sort();
    names.dedup();
    Ok(names)
}

/// Of Claude Code's projects, the one whose directory is the nearest ancestor of `cwd` (or
/// `cwd` itself), with servers or not, as Claude Code picks its project's entry.
pub(super) fn nearest_project<T>(cwd: &Path, projects: impl IntoIterator<Item = (PathBuf, T)>) -> Option<(PathBuf, T)> {
    projects.into_iter().filter(|(dir, _)| cwd.starts_with(dir)).max_by_key(|(dir, _)| dir.as_os_str().len())
}

/// A top-level `imports` value: the clients it names, and a note for each thing wrong.
fn parse_imports(file: &Path, value: &Value) -> (Vec<Client>, Vec<String>) {
    let list = match value {
        Value::Array(items) => items,
        Value::Null => return (Vec::new(), Vec::new()),
        other => {
            let note = format!(
                "{}: `imports` must be an array of client names like [\"cursor\"], found {}; it is ignored",
                file.display(),
                json_kind(other)
            );
            return (Vec::new(), vec![note]);
        }
    };
    let mut clients = Vec::new();
    let mut notes = Vec::new();
    for (i, item) in list.iter().enumerate() {
        match item.as_str().map(str::parse::<Client>) {
            Some(Ok(client)) if !clients.contains(&client) => clients.push(client),
            Some(Ok(_)) => {}
            Some(Err(message)) => notes.push(format!("{}: `imports[{i}]`: {message}; it is ignored", file.display())),
            None => notes.push(format!(
                "{}: `imports[{i}]`: expected a client name like \"cursor\", found {}; it is ignored",
                file.display(),
                json_kind(item)
            )),
        }
    }
    (clients, notes)
}

/// Parses the raw entries of one layer, read from `sources` (each a key and its entries, in
/// order of precedence, lowest first).
fn layer(file: &Path, kind: &FileKind, sources: Vec<(&str, RawEntries)>) -> Layer {
    let mut layer = Layer::default();
    let mut raw = BTreeMap::new();
    for (key, entries) in sources {
        let mut seen = std::collections::BTreeSet::new();
        for (name, map) in entries {
            if !seen.insert(name.clone()) {
                layer.warnings.entry(name.clone()).or_default().push(format!(
                    "{}: server `{name}` is defined twice under `{key}`; the last definition is used (remove the other)",
                    file.display()
                ));
            }
            raw.insert(name, map);
        }
    }
    for (name, value) in raw {
        let map = match value {
            Value::Object(map) => map,
            // `null` means absent, as for every value.
            Value::Null => continue,
            other => {
                let message = format!("expected an object with `command` or `url`, found {}", json_kind(&other));
                let error = ConfigError::InvalidValue {
                    file: file.to_owned(),
                    server: name.clone(),
                    key: name.clone(),
                    message,
                };
                layer.errors.insert(name, EntryError(std::sync::Arc::new(error)));
                continue;
            }
        };
        if dialect::runs_mcpx_serve(&map) {
            tracing::debug!(file = %file.display(), server = %name, "left out: the entry runs `mcpx serve` itself");
            continue;
        }
        let trust_hash = super::trust::entry_hash(&Value::Object(map.clone()));
        match parse_entry(file, kind.client, &name, &dialect::normalize(kind, map)) {
            Ok(entry) => {
                layer.servers.insert(name, ServerEntry { trust_hash, ..entry });
            }
            Err(e) => {
                layer.errors.insert(name, EntryError(std::sync::Arc::new(e)));
            }
        }
    }
    layer
}

/// 1-based line and column (in bytes, like serde_json) of a byte offset.
pub(super) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text.as_bytes()[..offset.min(text.len())];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let line_start = before.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    (line, before.len() - line_start + 1)
}

/// serde_json's message without its " at line L column C" suffix (we report those separately).
fn serde_message(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    text.strip_suffix(&suffix).unwrap_or(&text).to_owned()
}
