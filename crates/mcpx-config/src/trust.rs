//! Trust for project files (`docs/configuration.md`, "Trust"): the hash of an entry as
//! written, and the records `mcpx trust` keeps in `<state>/trust.json`. What
//! `mcpx trust` shows of a directory's project files is in `review.rs`.
//!
//! A project file is one found upward from the caller's directory
//! ([`Role::Project`](super::Role::Project)).
//! Its entries run only once the user has trusted each of them as written: a record
//! holds the file's canonical path, the server's name and [`entry_hash`] of the entry,
//! so a changed entry, or a new one, needs trust again.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The trust records' file in the state directory (0600, written with
/// `mcpx_platform::fs::write_atomic` by `mcpx trust` and `mcpx untrust`).
pub const TRUST_FILE: &str = "trust.json";

/// The lock file in the state directory that makes concurrent `mcpx trust` and
/// `mcpx untrust` runs take turns, so neither loses the other's records.
pub const TRUST_LOCK: &str = "trust.lock";

/// The user setting that trusts every project file (honoured in the user config and an
/// explicit file only).
pub const TRUST_ALL_KEY: &str = "trustProjectFiles";

/// The SHA-256 (64 hex digits) of one server entry as written: its raw JSON value,
/// before any other client's shape is rewritten into mcpx's, serialized with object
/// keys sorted at every level and no spaces. Two entries that differ only in key
/// order or comments hash the same; any other change gives another hash.
pub fn entry_hash(raw: &Value) -> String {
    canonical_sha256(raw)
}

/// The SHA-256 (64 hex digits) of `value` serialized as canonical JSON: object keys
/// sorted (by their UTF-8 bytes) at every level, no spaces, strings and numbers as
/// serde_json writes them. What a trust record holds of an entry, and a pin of a tool's
/// definition.
pub fn canonical_sha256(value: &Value) -> String {
    let mut text = String::new();
    canonical(value, &mut text);
    Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// Appends `value` to `out` as JSON with sorted keys (whatever map order serde_json
/// was built with).
fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                canonical(&map[key.as_str()], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// One trusted entry: a project file's canonical path, a server name in it, and the
/// [`entry_hash`] of that entry when the user trusted it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TrustRecord {
    /// The project file, canonical (symbolic links resolved).
    pub file: PathBuf,
    /// The server's name in it.
    pub server: String,
    /// The entry's [`entry_hash`] as trusted.
    pub hash: String,
}

/// The trust records (`<state>/trust.json`: `{"version": 1, "entries": [...]}`), at
/// most one per (file, server).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrustStore {
    /// The format's version, 1.
    #[serde(default = "version_one")]
    pub version: u32,
    /// The records, sorted.
    #[serde(default)]
    pub entries: BTreeSet<TrustRecord>,
}

fn version_one() -> u32 {
    1
}

impl TrustStore {
    /// Reads the records from the bytes of [`TRUST_FILE`].
    ///
    /// Errors: the bytes are not such a file; the message names `file` and says to
    /// remove it and trust again.
    pub fn parse(bytes: &[u8], file: &Path) -> Result<TrustStore, String> {
        serde_json::from_slice(bytes).map_err(|e| {
            format!(
                "{} is not a trust file mcpx can read ({e}); remove it and run `mcpx trust` again in each project",
                file.display()
            )
        })
    }

    /// The bytes of [`TRUST_FILE`] holding these records.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec_pretty(self).unwrap_or_default();
        bytes.push(b'\n');
        bytes
    }

    /// Whether the entry `server` of the project file `file` (canonical), whose
    /// [`entry_hash`] is `hash`, is trusted.
    pub fn trusts(&self, file: &Path, server: &str, hash: &str) -> bool {
        self.entries.iter().any(|r| r.file == file && r.server == server && r.hash == hash)
    }

    /// Records `record`, replacing the record of the same file and server.
    pub fn add(&mut self, record: TrustRecord) {
        self.entries.retain(|r| !(r.file == record.file && r.server == record.server));
        self.entries.insert(record);
    }

    /// Removes every record of `file` (canonical); returns how many there were.
    pub fn remove_file(&mut self, file: &Path) -> usize {
        let before = self.entries.len();
        self.entries.retain(|r| r.file != file);
        before - self.entries.len()
    }
}

/// The path trust is recorded under for a project file reached at `file`: its project
/// directory ([`project_dir`]) with links resolved, joined with the rest of the path as
/// reached. A project reached through a linked directory is the same project; a project
/// file (or `.vscode`/`.cursor` directory) that is itself a link into another project is
/// not that project's, since its relative `cwd` and `${workspaceFolder}` name this
/// Changes the trust records of the state directory `state` (at `state_path`):
/// `<state>/trust.json`, read and written (0600, atomically) under an exclusive lock on
/// `<state>/trust.lock`, so two changes at once (`mcpx trust` and the dashboard) both
/// keep their records. `change` gets the records read (none when the file does not
/// exist) and says what it found, and whether to write them back.
///
/// Errors: a line saying what failed and what to check: the lock, reading or parsing
/// the file, writing it; or `change`'s own.
pub fn change_records<T>(
    state: &mcpx_platform::fs::Dir,
    state_path: &Path,
    change: impl FnOnce(&mut TrustStore) -> Result<(T, bool), String>,
) -> Result<T, String> {
    use mcpx_platform::fs::FileUse;
    use nix::fcntl::{Flock, FlockArg};
    let lock = state.open_file(TRUST_LOCK, FileUse::Lock).map_err(|e| format!("cannot open the trust lock: {e}"))?;
    let _turn =
        Flock::lock(lock, FlockArg::LockExclusive).map_err(|(_, e)| format!("cannot take the trust lock: {e}"))?;
    let file = state_path.join(TRUST_FILE);
    let mut store = match state.read(TRUST_FILE) {
        Ok(bytes) => TrustStore::parse(&bytes, &file)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => TrustStore::default(),
        Err(e) => return Err(format!("cannot read {}: {e}; check its owner and mode (0600)", file.display())),
    };
    let (found, write) = change(&mut store)?;
    if write {
        mcpx_platform::fs::write_atomic(state, TRUST_FILE, &store.to_bytes(), 0o600)
            .map_err(|e| format!("cannot write the trust records: {e}; check the state directory"))?;
    }
    Ok(found)
}

/// directory. Errors: the project directory cannot be resolved.
pub fn trust_key(file: &Path) -> std::io::Result<PathBuf> {
    let dir = project_dir(file);
    let rest = file.strip_prefix(dir).unwrap_or(file);
    Ok(std::fs::canonicalize(dir)?.join(rest))
}

/// The project directory of the project file `file`: the directory holding it, or for
/// `.cursor/mcp.json` and `.vscode/mcp.json` the one holding `.cursor` or `.vscode`.
pub fn project_dir(file: &Path) -> &Path {
    let parent = file.parent().unwrap_or(Path::new("/"));
    match parent.file_name().and_then(|n| n.to_str()) {
        Some(".cursor" | ".vscode") => parent.parent().unwrap_or(parent),
        _ => parent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_ignores_key_order_and_sees_every_change() {
        let a: Value = serde_json::from_str(r#"{"command":"x","args":["1"],"env":{"B":"2","A":"1"}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"env":{"A":"1","B":"2"},"args":["1"],"command":"x"}"#).unwrap();
        let c: Value = serde_json::from_str(r#"{"env":{"A":"1","B":"2"},"args":["2"],"command":"x"}"#).unwrap();
        assert_eq!(entry_hash(&a), entry_hash(&b));
        assert_ne!(entry_hash(&a), entry_hash(&c));
        assert_eq!(entry_hash(&a).len(), 64);
    }

    #[test]
    fn a_record_is_per_file_server_and_hash() {
        let mut store = TrustStore::default();
        let record = |server: &str, hash: &str| TrustRecord {
            file: "/p/.mcp.json".into(),
            server: server.into(),
            hash: hash.into(),
        };
        store.add(record("a", "1"));
        store.add(record("a", "2"));
        store.add(record("b", "1"));
        assert!(store.trusts(Path::new("/p/.mcp.json"), "a", "2"));
        assert!(!store.trusts(Path::new("/p/.mcp.json"), "a", "1"), "a newer record replaces the older");
        let back = TrustStore::parse(&store.to_bytes(), Path::new("/s/trust.json")).unwrap();
        assert_eq!(back, store);
        assert_eq!(store.remove_file(Path::new("/p/.mcp.json")), 2);
        assert!(store.entries.is_empty());
        assert_eq!(project_dir(Path::new("/p/.vscode/mcp.json")), Path::new("/p"));
        assert_eq!(project_dir(Path::new("/p/.mcp.json")), Path::new("/p"));
    }
}
