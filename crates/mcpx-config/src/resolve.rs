//! Finding the config files for a request, and caching parsed files.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::clients::{Client, ConfigEnv, FileKind};
use super::entry::{EntryError, FileWarning, ResolvedConfig, ServerEntry};
use super::error::ConfigError;
use super::parse::{self, Layer, ParsedFile};
use super::spec::Pinning;
use super::trust::{TRUST_ALL_KEY, TrustStore};

/// Name of the project config file shared with Claude Code, Cursor and others.
pub const PROJECT_FILE: &str = ".mcp.json";
/// Name of the mcpx-only project config file; beats [`PROJECT_FILE`] in the same directory.
pub const MCPX_PROJECT_FILE: &str = ".mcpx.json";
/// The project files looked for in each directory, in order of precedence: mcpx's own, the
/// shared `.mcp.json`, then Cursor's and VS Code's.
pub const PROJECT_FILES: [&str; 4] = [MCPX_PROJECT_FILE, PROJECT_FILE, ".cursor/mcp.json", ".vscode/mcp.json"];

/// What one request resolves against.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ResolveRequest {
    /// The caller's working directory (absolute); `None` for callers without one.
    pub cwd: Option<PathBuf>,
    /// The explicit config file (`--config` or `MCPX_CONFIG`); when set it is the only file.
    /// A relative path is taken relative to `cwd`.
    pub explicit: Option<PathBuf>,
}

impl ResolveRequest {
    /// The files this request reads before any import, nearest (highest precedence) first.
    ///
    /// Explicit: just that file. Else, for `cwd` and each ancestor up to `/`, its
    /// [`PROJECT_FILES`] (skipping user-level files, such as `~/.cursor/mcp.json` seen from
    /// the home directory); then [`ConfigEnv::user_file`]. The files the user file (or the
    /// explicit one) names in `imports` come after these, in [`ConfigCache::resolve`].
    pub fn search_paths(&self, env: &ConfigEnv) -> Vec<(PathBuf, Role)> {
        if let Some(explicit) = &self.explicit {
            let path = match &self.cwd {
                Some(cwd) if explicit.is_relative() => cwd.join(explicit),
                _ => explicit.clone(),
            };
            return vec![(path, Role::Explicit)];
        }
        let mut paths = Vec::new();
        if let Some(cwd) = &self.cwd {
            let user_level = env.user_level_files();
            for dir in cwd.ancestors() {
                for name in PROJECT_FILES {
                    let path = dir.join(name);
                    if !user_level.contains(&path) {
                        paths.push((path, Role::Project));
                    }
                }
            }
        }
        if let Some(user) = env.user_file() {
            paths.push((user, Role::User));
        }
        paths
    }
}

/// How a request reached a file, which decides what of it counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Named with `--config` / `MCPX_CONFIG`: must exist; its `imports` are honoured.
    Explicit,
    /// Found upward from the caller's directory: its `imports` are ignored, with a warning.
    Project,
    /// The mcpx user config: its `imports` are honoured.
    User,
    /// A client's user-level file, named in `imports`.
    Import(Client),
}

impl Role {
    fn honours_imports(self) -> bool {
        matches!(self, Role::Explicit | Role::User)
    }
}

/// What a file looked like when we parsed it; a different stamp means re-read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileStamp {
    mtime_sec: i64,
    mtime_nsec: i64,
    size: u64,
    ino: u64,
    dev: u64,
}

impl FileStamp {
    fn of(meta: &std::fs::Metadata) -> Self {
        Self {
            mtime_sec: meta.mtime(),
            mtime_nsec: meta.mtime_nsec(),
            size: meta.size(),
            ino: meta.ino(),
            dev: meta.dev(),
        }
    }
}

/// The stamp of the file at `path` now; `None` when nothing can be found there.
fn stamp_of(path: &Path) -> Option<FileStamp> {
    std::fs::metadata(path).ok().map(|meta| FileStamp::of(&meta))
}

/// What one resolution read ([`ConfigCache::resolve_recorded`]): every path it looked at,
/// with the stamp found there before reading it (`None`: nothing there), and the trust
/// records' file's when it judged a project file's entries. While every stamp is
/// unchanged ([`ConfigCache::unchanged`]), resolving the same request again would give
/// the same configuration.
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    files: Vec<(PathBuf, Option<FileStamp>)>,
    trust: Option<(PathBuf, Option<FileStamp>)>,
}

struct CachedFile {
    stamp: FileStamp,
    parsed: Arc<ParsedFile>,
}

#[derive(Default)]
struct Inner {
    files: HashMap<PathBuf, CachedFile>,
    known: BTreeSet<PathBuf>,
    /// The known files some caller named with `--config` / `MCPX_CONFIG`, each with its
    /// entries (name and trust hash) as they were when last named: re-read alone, those
    /// entries are trusted and no others.
    explicit: ExplicitFiles,
    /// How many times a request changed [`explicit`](Self::explicit), so the daemon
    /// records the files again only then.
    explicit_changes: u64,
    /// The trust records as last read, with the stamp of their file.
    trust: Option<(FileStamp, Arc<TrustStore>)>,
}

/// Resolves requests to configurations, re-reading a file only when its
/// (mtime, size, inode, device) changes. Safe to share between threads (`&self` methods, an
/// internal mutex that is never held during file I/O).
///
/// Parse errors are not cached: a broken file is re-read on every request until it is fixed,
/// and meanwhile offers the servers of its last good read, if any.
pub struct ConfigCache {
    env: ConfigEnv,
    /// The trust records' file (`<state>/trust.json`), read again when its stamp
    /// changes; `None`: no entry of a project file is trusted.
    trust_file: Option<PathBuf>,
    inner: Mutex<Inner>,
    reads: AtomicU64,
}

impl std::fmt::Debug for ConfigCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigCache").field("env", &self.env).field("reads", &self.reads()).finish_non_exhaustive()
    }
}

impl ConfigCache {
    /// An empty cache resolving the user file from `env`.
    pub fn new(env: ConfigEnv) -> Self {
        Self { env, trust_file: None, inner: Mutex::new(Inner::default()), reads: AtomicU64::new(0) }
    }

    /// This cache, reading the trust records of project files' entries from `file`
    /// (`<state>/trust.json`, see [`TrustStore`]) whenever its stamp changes, so a
    /// `mcpx trust` applies to the next request.
    pub fn with_trust_file(self, file: PathBuf) -> Self {
        Self { trust_file: Some(file), ..self }
    }

    /// The environment this cache was created with.
    pub fn env(&self) -> &ConfigEnv {
        &self.env
    }

    /// Resolves `req`: reads (or reuses) every existing file from
    /// [`ResolveRequest::search_paths`], then the clients' files the user config (or the
    /// explicit file) names in `imports`, in that order, and merges their servers by name,
    /// earlier files winning. In Claude Code's `~/.claude.json`, the servers of the project
    /// that is the nearest ancestor of the caller's directory beat its top-level ones.
    ///
    /// Missing files are skipped, except an explicit one. An entry that does not parse fails
    /// alone: it lands in [`ResolvedConfig::errors`], hiding farther entries of its name like a
    /// good one. A file that does not parse lands in [`ResolvedConfig::file_errors`] and
    /// contributes its last good read, if any; so does one that cannot be read (no last read
    /// then), or that is not a regular file. `imports` in a project file, or a bad one, lands
    /// in [`ResolvedConfig::file_warnings`]. Errors: [`ConfigError::Io`] for an explicit file
    /// that is missing or cannot be read.
    pub fn resolve(&self, req: &ResolveRequest) -> Result<ResolvedConfig, ConfigError> {
        self.resolve_recorded(req).map(|(resolved, _)| resolved)
    }

    /// [`resolve`](Self::resolve), with what it read: `None` when a file could not be
    /// read or parsed, which is read again on every request until it is fixed (so no
    /// resolution of it is reused).
    ///
    /// Errors: as [`resolve`](Self::resolve).
    pub fn resolve_recorded(&self, req: &ResolveRequest) -> Result<(ResolvedConfig, Option<Inputs>), ConfigError> {
        let mut inputs = Inputs::default();
        let mut resolved = ResolvedConfig::default();
        let mut queue = req.search_paths(&self.env);
        let mut roles: HashMap<PathBuf, Role> = HashMap::new();
        let mut trust_all = false;
        // The top-level `pinning` of the user config (or an explicit file), and of each
        // project file.
        let mut user_pinning: Option<Pinning> = None;
        let mut file_pinning: HashMap<PathBuf, Pinning> = HashMap::new();
        let mut i = 0;
        while let Some((path, role)) = queue.get(i).cloned() {
            i += 1;
            // Stamped before reading: a change in between makes the next check differ.
            inputs.files.push((path.clone(), stamp_of(&path)));
            let loaded = match self.load(&path, role == Role::Explicit) {
                Ok(Some(loaded)) => loaded,
                Ok(None) => continue,
                // A file found on the way (a project file above, an import) that cannot be
                // read fails only itself, like one that does not parse: it may not be the
                // caller's to fix.
                Err(error) if role != Role::Explicit => {
                    resolved.file_errors.push(EntryError(Arc::new(error)));
                    continue;
                }
                Err(error) => return Err(error),
            };
            resolved.file_errors.extend(loaded.syntax);
            roles.insert(path.clone(), role);
            if let Some(parsed) = loaded.parsed {
                if parsed.trust_all && role == Role::Project {
                    resolved.file_warnings.push(FileWarning {
                        file: path.clone(),
                        message: format!(
                            "{}: `{TRUST_ALL_KEY}` is honoured only in the mcpx user config, and is ignored in a project file",
                            path.display()
                        ),
                    });
                }
                trust_all |= parsed.trust_all && matches!(role, Role::User | Role::Explicit);
                if let Some(note) = &parsed.pinning_note {
                    resolved.file_warnings.push(FileWarning { file: path.clone(), message: note.clone() });
                }
                match (&parsed.profiles, role) {
                    // The nearest user-level file that has them: an explicit file, else the user config.
                    (Some((profiles, notes)), Role::User | Role::Explicit) => {
                        let warn = |message: &String| FileWarning { file: path.clone(), message: message.clone() };
                        resolved.file_warnings.extend(notes.iter().map(warn));
                        if resolved.profiles.is_empty() {
                            resolved.profiles = profiles.clone();
                        }
                    }
                    (Some(_), Role::Project) => resolved.file_warnings.push(FileWarning {
                        file: path.clone(),
                        message: format!(
                            "{}: `profiles` is read only in the mcpx user config, and is ignored in a project file",
                            path.display()
                        ),
                    }),
                    _ => {}
                }
                match (parsed.pinning, role) {
                    (Some(mode), Role::User | Role::Explicit) => user_pinning = user_pinning.or(Some(mode)),
                    (Some(mode), _) => {
                        file_pinning.insert(path.clone(), mode);
                    }
                    (None, _) => {}
                }
                if let Some(cwd) = &req.cwd {
                    let projects = parsed.projects.iter().map(|(dir, layer)| (dir.clone(), layer));
                    if let Some((_, project)) = parse::nearest_project(cwd, projects) {
                        merge(&mut resolved, &path, project);
                    }
                }
                merge(&mut resolved, &path, &parsed.main);
                match &parsed.imports {
                    Some(imports) if role.honours_imports() => {
                        let warn = |message: &String| FileWarning { file: path.clone(), message: message.clone() };
                        resolved.file_warnings.extend(parsed.notes.iter().map(warn));
                        for client in imports {
                            let Some(file) = client.user_file(&self.env) else { continue };
                            if !queue.iter().any(|(p, _)| *p == file) {
                                queue.push((file, Role::Import(*client)));
                            }
                        }
                    }
                    Some(_) if role == Role::Project => {
                        let user =
                            self.env.user_file().map_or("the mcpx user config".to_owned(), |u| u.display().to_string());
                        resolved.file_warnings.push(FileWarning {
                            file: path.clone(),
                            message: format!(
                                "{}: `imports` is read only in the mcpx user config, and is ignored in a project file (move it to {user})",
                                path.display()
                            ),
                        });
                    }
                    _ => {}
                }
            }
            resolved.files.push(path);
        }
        let floor = user_pinning.unwrap_or_default();
        for entry in resolved.servers.values_mut() {
            let project = roles.get(&entry.source) == Some(&Role::Project);
            let warning = apply_pinning(entry, floor, file_pinning.get(&entry.source).copied(), project);
            resolved.warnings.entry(entry.name.clone()).or_default().extend(warning);
        }
        resolved.warnings.retain(|_, w| !w.is_empty());
        for (file, mode) in &file_pinning {
            if roles.get(file) == Some(&Role::Project) && *mode < floor {
                resolved
                    .file_warnings
                    .push(FileWarning { file: file.clone(), message: looser(file, "", *mode, floor) });
            }
        }
        if roles.values().any(|r| *r == Role::Project) {
            inputs.trust = self.trust_file.as_ref().map(|file| (file.clone(), stamp_of(file)));
            let store = self.trust_store();
            for entry in resolved.servers.values_mut() {
                if roles.get(&entry.source) == Some(&Role::Project) {
                    entry.trusted = trust_all || trusts(&store, entry);
                }
            }
        }
        let mut inner = self.lock();
        inner.known.extend(resolved.files.iter().cloned());
        if let Some((path, Role::Explicit)) = req.search_paths(&self.env).into_iter().next() {
            if resolved.files.contains(&path) {
                let named = resolved.servers.values().filter(|e| e.source == path);
                let named = named.map(|e| (e.name.clone(), e.trust_hash.clone())).collect();
                if inner.explicit.get(&path) != Some(&named) {
                    inner.explicit.insert(path, named);
                    inner.explicit_changes += 1;
                }
            }
        }
        let reusable = resolved.file_errors.is_empty();
        Ok((resolved, reusable.then_some(inputs)))
    }

    /// Whether every file `inputs` recorded still has the stamp it had (one `stat` each,
    /// no read): then resolving its request again would give the same configuration.
    pub fn unchanged(&self, inputs: &Inputs) -> bool {
        let same = |(path, stamp): &(PathBuf, Option<FileStamp>)| stamp_of(path) == *stamp;
        inputs.files.iter().all(same) && inputs.trust.iter().all(same)
    }

    /// The known files some caller named explicitly, with their entries as named (see
    /// [`add_explicit_files`](Self::add_explicit_files)).
    pub fn explicit_files(&self) -> ExplicitFiles {
        self.lock().explicit.clone()
    }

    /// How many times a request has changed [`explicit_files`](Self::explicit_files):
    /// compared before and after a request, it says whether to record them again.
    pub fn explicit_changes(&self) -> u64 {
        self.lock().explicit_changes
    }

    /// Records files as named explicitly by some caller, e.g. the record persisted by a
    /// previous daemon. Re-read alone ([`file_contents`](Self::file_contents)), an entry
    /// of such a file is trusted when it is as it was named (same name and trust hash): a
    /// file rewritten since is not trusted for what it holds now. Every other known file
    /// that is not user-level ([`ConfigEnv::is_user_level`]) is a project file, whose
    /// entries need the user's trust.
    pub fn add_explicit_files(&self, files: ExplicitFiles) {
        self.lock().explicit.extend(files);
    }

    /// The trust records, read again when their file's stamp changed. A file that
    /// cannot be read or parsed trusts nothing (logged).
    fn trust_store(&self) -> Arc<TrustStore> {
        let Some(file) = &self.trust_file else { return Arc::default() };
        let Ok(meta) = std::fs::metadata(file) else {
            self.lock().trust = None;
            return Arc::default();
        };
        let stamp = FileStamp::of(&meta);
        if let Some((cached, store)) = &self.lock().trust {
            if *cached == stamp {
                return Arc::clone(store);
            }
        }
        let store = match std::fs::read(file).map_err(|e| e.to_string()).and_then(|b| TrustStore::parse(&b, file)) {
            Ok(store) => Arc::new(store),
            Err(e) => {
                tracing::warn!("trusting no project file: {e}");
                Arc::default()
            }
        };
        self.lock().trust = Some((stamp, Arc::clone(&store)));
        store
    }

    /// Whether the user config sets `"trustProjectFiles": true`.
    fn user_trusts_all(&self) -> bool {
        let user = self.env.user_file();
        let loaded = user.and_then(|user| self.load(&user, false).ok().flatten());
        loaded.and_then(|l| l.parsed).is_some_and(|p| p.trust_all)
    }

    /// Every file that has contributed to a successful resolution (plus any added with
    /// [`add_known_files`](Self::add_known_files)), sorted.
    pub fn known_files(&self) -> Vec<PathBuf> {
        self.lock().known.iter().cloned().collect()
    }

    /// Adds files to [`known_files`](Self::known_files), e.g. the set persisted by a previous
    /// daemon.
    pub fn add_known_files(&self, files: impl IntoIterator<Item = PathBuf>) {
        self.lock().known.extend(files);
    }

    /// Everything one file holds, read alone (no imports, every Claude Code project's
    /// servers included): for what some configuration still holds, and `status`. The
    /// entries of a project file (see [`add_explicit_files`](Self::add_explicit_files))
    /// are marked trusted or not, as a request would mark them. `Ok(None)`
    /// when it does not exist. Errors: [`ConfigError::Io`] when it cannot be read.
    pub fn file_contents(&self, path: &Path) -> Result<Option<FileContents>, ConfigError> {
        let Some(loaded) = self.load(path, false)? else {
            return Ok(None);
        };
        let mut contents = FileContents { syntax: loaded.syntax, ..FileContents::default() };
        for layer in loaded.parsed.iter().flat_map(|p| p.layers()) {
            contents.servers.extend(layer.servers.values().cloned());
            contents.errors.extend(layer.errors.iter().map(|(n, e)| (n.clone(), e.clone())));
        }
        let named = self.lock().explicit.get(path).cloned();
        if let Some(named) = named {
            for entry in &mut contents.servers {
                entry.trusted = named.contains(&(entry.name.clone(), entry.trust_hash.clone()));
            }
        } else if !self.env.is_user_level(path) && !self.user_trusts_all() {
            let store = self.trust_store();
            for entry in &mut contents.servers {
                entry.trusted = trusts(&store, entry);
            }
        }
        Ok(Some(contents))
    }

    /// The schema cache keys ([`ServerEntry::fingerprint`](super::ServerEntry::fingerprint) as written) of every trusted server in
    /// every known file: what some configuration still holds, and may run. `None` while a known file
    /// cannot be read or parsed (it may be mid-edit), or none is known yet, so nothing is
    /// judged removed then.
    pub fn configured(&self) -> Option<std::collections::HashSet<String>> {
        let known = self.known_files();
        if known.is_empty() {
            return None;
        }
        let mut keys = std::collections::HashSet::new();
        for path in known {
            match self.file_contents(&path) {
                Ok(Some(FileContents { servers, syntax: None, .. })) => {
                    keys.extend(servers.iter().filter(|e| e.trusted).map(|e| e.cache_key()))
                }
                Ok(None) => {}
                Ok(Some(_)) | Err(_) => return None,
            }
        }
        Some(keys)
    }

    /// How many times a file has been read and parsed since creation (diagnostics, tests).
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // The data stays consistent even if a holder panicked: every update is one insert.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The servers of one file, from cache when its stamp is unchanged. `Ok(None)` when the file
    /// does not exist and is not `required`. A file that does not parse gives its syntax error
    /// and the last good read, if any.
    fn load(&self, path: &Path, required: bool) -> Result<Option<Loaded>, ConfigError> {
        let io_err = |error: io::Error| ConfigError::Io { file: path.to_owned(), error };
        let meta = match std::fs::metadata(path) {
            Ok(meta) => meta,
            Err(e) if !required && is_absent(&e) => {
                self.lock().files.remove(path);
                return Ok(None);
            }
            Err(e) => return Err(io_err(e)),
        };
        if !meta.is_file() {
            // A directory, a FIFO or a device: opening a FIFO would block the daemon until
            // a writer came.
            let what = if meta.is_dir() { "a directory" } else { "not a regular file" };
            let error = io::Error::new(io::ErrorKind::InvalidInput, format!("it is {what}"));
            return Err(io_err(error));
        }
        let stamp = FileStamp::of(&meta);
        if let Some(cached) = self.lock().files.get(path) {
            if cached.stamp == stamp {
                return Ok(Some(Loaded { parsed: Some(Arc::clone(&cached.parsed)), syntax: None }));
            }
        }
        // Stat before reading: if the file changes in between, the next stat differs from the
        // recorded stamp and we read again.
        let text = std::fs::read_to_string(path).map_err(io_err)?;
        self.reads.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(file = %path.display(), "reading mcpx config file");
        let parsed = match parse::parse_file(path, &FileKind::of(path, &self.env), &text) {
            Ok(parsed) => Arc::new(parsed),
            Err(error) => {
                // The cached read (of an older stamp) stays, so the next good read replaces it.
                let last = self.lock().files.get(path).map(|c| Arc::clone(&c.parsed));
                return Ok(Some(Loaded { parsed: last, syntax: Some(EntryError(Arc::new(error))) }));
            }
        };
        self.lock().files.insert(path.to_owned(), CachedFile { stamp, parsed: Arc::clone(&parsed) });
        Ok(Some(Loaded { parsed: Some(parsed), syntax: None }))
    }
}

/// Files named with `--config` / `MCPX_CONFIG`, each with the `(name, trust hash)` of its
/// entries as they were when last named: `{"/p/.mcp.json": [["db", "9f…"]]}` in
/// `<state>/config-explicit.json`.
pub type ExplicitFiles = BTreeMap<PathBuf, BTreeSet<(String, String)>>;

/// Everything one file holds, read alone ([`ConfigCache::file_contents`]).
#[derive(Clone, Debug, Default)]
pub struct FileContents {
    /// Its entries that parse (for Claude Code's file, of every project too; a name may
    /// repeat).
    pub servers: Vec<ServerEntry>,
    /// Its entries that do not, by name.
    pub errors: Vec<(String, EntryError)>,
    /// Why the file does not parse now; its entries are then those of the last good read.
    pub syntax: Option<EntryError>,
}

/// Merges one layer of the file at `path` below what `resolved` holds: a name already
/// taken keeps its entry, with a warning when the farther one differs.
fn merge(resolved: &mut ResolvedConfig, path: &Path, layer: &Layer) {
    let taken = |r: &ResolvedConfig, name: &str| r.servers.contains_key(name) || r.errors.contains_key(name);
    for (name, entry) in &layer.servers {
        match resolved.servers.get(name) {
            // Within one file (Claude Code's local servers over its user ones) hiding is
            // that client's own rule, not a mistake.
            Some(near)
                if near.source != path && (&near.transport, &near.options) != (&entry.transport, &entry.options) =>
            {
                let warning = format!(
                    "{}: server `{name}` hides a different definition in {} (rename one if both are wanted)",
                    near.source.display(),
                    path.display()
                );
                resolved.warnings.entry(name.clone()).or_default().push(warning);
            }
            _ if !taken(resolved, name) => {
                resolved.servers.insert(name.clone(), entry.clone());
                if let Some(warnings) = layer.warnings.get(name) {
                    resolved.warnings.entry(name.clone()).or_default().extend(warnings.iter().cloned());
                }
            }
            _ => {}
        }
    }
    for (name, error) in &layer.errors {
        if !taken(resolved, name) {
            resolved.errors.insert(name.clone(), error.clone());
        }
    }
}

/// One existing file as a request sees it.
struct Loaded {
    /// Its entries: the current read, or the last good one when it does not parse now.
    parsed: Option<Arc<ParsedFile>>,
    /// Why it does not parse now.
    syntax: Option<EntryError>,
}

/// Whether `store` trusts `entry` as written, in its file's [`trust_key`](super::trust::trust_key).
fn trusts(store: &TrustStore, entry: &ServerEntry) -> bool {
    super::trust::trust_key(&entry.source).is_ok_and(|file| store.trusts(&file, &entry.name, &entry.trust_hash))
}

/// Errors that mean "there is no such file" while walking directories.
fn is_absent(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::NotADirectory)
}

/// Sets the pinning mode in effect for `entry` (`docs/configuration.md`, "Pinning"):
/// its block's, else its file's top-level one (`file`), else the user config's
/// (`floor`, `hold` when unset). An entry of a project file (`project`) is never looser
/// than `floor`, nor than its file's: a looser setting is ignored, and the warning
/// that says so is returned.
fn apply_pinning(entry: &mut ServerEntry, floor: Pinning, file: Option<Pinning>, project: bool) -> Option<String> {
    let written = entry.options.pinning.or(file);
    if !project {
        entry.pinning = written.unwrap_or(floor);
        return None;
    }
    let least = floor.max(file.unwrap_or(floor));
    entry.pinning = written.unwrap_or(least).max(least);
    let block = entry.options.pinning.filter(|mode| *mode < least)?;
    Some(looser(&entry.source, &format!(" of server `{}`", entry.name), block, least))
}

/// The warning for a project file's `pinning` looser than what is in effect.
fn looser(file: &Path, whose: &str, mode: Pinning, least: Pinning) -> String {
    format!(
        "{}: `pinning: \"{mode}\"`{whose} is ignored: a project file may only make pinning stricter than \"{least}\" (set it in the mcpx user config instead)",
        file.display()
    )
}
