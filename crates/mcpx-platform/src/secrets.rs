//! The secret store: named values (`${secret:NAME}` in a config, a VS Code
//! `${input:ID}`, later OAuth tokens) kept out of config files and out of the daemon's
//! environment.
//!
//! The store in use is recorded once in the state directory (file [`STORE_RECORD`],
//! one word) and every mcpx process uses that one: a store never changes silently, so
//! a secret set in one is never looked for in another. Only the file backend exists
//! today ([`FileStore`]: `<state>/secrets.json`, mode 0600); the OS keychains (the
//! macOS Keychain, the Secret Service on Linux desktops) are meant to join
//! [`SecretStore`] as further variants, chosen when nothing is recorded yet.
//!
//! Values never appear in an error or in `Debug` output ([`SecretValue`]).

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use nix::fcntl::{Flock, FlockArg};

use crate::fs::{Dir, FileUse, OpenError, Refused, write_atomic};

/// The file in the state directory that records which store is in use: one word
/// (`file`) and a newline, mode 0600.
pub const STORE_RECORD: &str = "secret-store";

/// The file backend's file in the state directory, mode 0600.
pub const SECRETS_FILE: &str = "secrets.json";

/// The lock file in the state directory that a change holds (`flock`) from reading
/// the secrets to writing them, so two changes at once both land. Never written.
pub const SECRETS_LOCK: &str = "secrets.lock";

/// The longest secret name accepted, in bytes.
pub const MAX_NAME: usize = 128;

/// A secret's value. Its `Debug` output is `SecretValue(<redacted>)`, so a value
/// inside a logged or printed structure stays hidden; read it with
/// [`SecretValue::expose`].
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue(String);

impl SecretValue {
    /// Wraps a value.
    pub fn new(value: String) -> SecretValue {
        SecretValue(value)
    }

    /// The value itself, for where it is used (a child's environment, a header).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretValue(<redacted>)")
    }
}

/// A secret store operation failed. Messages name the secret and the file, never a
/// value, and say what to do.
#[derive(Debug)]
pub enum SecretError {
    /// The name is not letters, digits, `_`, `-` and `.` (1 to [`MAX_NAME`] bytes).
    BadName(String),
    /// [`STORE_RECORD`] names a store this mcpx does not have.
    UnknownStore {
        /// The record file.
        record: PathBuf,
        /// The word it holds (at most 40 characters of it).
        store: String,
    },
    /// The secrets file is a link, another user's, or open to others.
    Refused {
        /// The file.
        file: PathBuf,
        /// What is wrong.
        refused: Refused,
    },
    /// The secrets file is not the JSON mcpx writes.
    Malformed {
        /// The file.
        file: PathBuf,
        /// The parser's message (a position, never the text).
        detail: String,
    },
    /// Reading or writing a file failed.
    Io {
        /// The file.
        file: PathBuf,
        /// The error.
        source: io::Error,
    },
}

impl fmt::Display for SecretError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretError::BadName(name) => write!(
                f,
                "`{}` is not a valid secret name: use 1 to {MAX_NAME} letters, digits, `_`, `-` and `.`",
                name.escape_debug()
            ),
            SecretError::UnknownStore { record, store } => write!(
                f,
                "{} names the secret store `{}`, which this mcpx does not have: use the mcpx that recorded it, or remove the file to start a new file store",
                record.display(),
                store.escape_debug()
            ),
            SecretError::Refused { file, refused: refused @ Refused::Open { .. } } => {
                write!(f, "{} {refused}: fix it with `chmod 600 {}` and try again", file.display(), file.display())
            }
            SecretError::Refused { file, refused } => write!(
                f,
                "{} {refused}: mcpx keeps secrets only in a regular file of yours; remove it and set the secrets again",
                file.display()
            ),
            SecretError::Malformed { file, detail } => write!(
                f,
                "{} is not a secrets file mcpx can read ({detail}): fix it, or remove it and set the secrets again",
                file.display()
            ),
            SecretError::Io { file, source } => write!(f, "{}: {source}", file.display()),
        }
    }
}

impl std::error::Error for SecretError {}

/// Checks a secret name: 1 to [`MAX_NAME`] ASCII letters, digits, `_`, `-` and `.`
/// (so a VS Code input id such as `api-key` is one).
///
/// Errors: [`SecretError::BadName`].
pub fn check_name(name: &str) -> Result<(), SecretError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok { Ok(()) } else { Err(SecretError::BadName(name.chars().take(MAX_NAME).collect())) }
}

/// Where secrets are kept: the store recorded in the state directory. An enum, so a
/// keychain backend (macOS Keychain, Secret Service) is one more variant.
#[derive(Debug, Clone)]
pub enum SecretStore {
    /// The 0600 JSON file in the state directory.
    File(FileStore),
}

impl SecretStore {
    /// The store recorded in `state` ([`STORE_RECORD`]), or the file store when none is
    /// recorded yet (it is recorded at the first [`SecretStore::set`]). Reads one small
    /// file; writes nothing.
    ///
    /// Errors: the record names a store this mcpx does not have, or cannot be read.
    pub fn open(state: &Dir) -> Result<SecretStore, SecretError> {
        let record = state.join(STORE_RECORD);
        match state.read_private(STORE_RECORD) {
            Ok(bytes) => match String::from_utf8_lossy(&bytes).trim() {
                "file" => Ok(SecretStore::File(FileStore { dir: state.clone() })),
                other => Err(SecretError::UnknownStore { record, store: other.chars().take(40).collect() }),
            },
            Err(OpenError::Io(e)) if e.kind() == io::ErrorKind::NotFound => {
                Ok(SecretStore::File(FileStore { dir: state.clone() }))
            }
            Err(OpenError::Refused(refused)) => Err(SecretError::Refused { file: record, refused }),
            Err(OpenError::Io(source)) => Err(SecretError::Io { file: record, source }),
        }
    }

    /// The store's kind, as recorded: `file`.
    pub fn kind(&self) -> &'static str {
        match self {
            SecretStore::File(_) => "file",
        }
    }

    /// Where the secrets are kept, for `mcpx secret ls`: `file <path>`.
    pub fn location(&self) -> String {
        match self {
            SecretStore::File(f) => format!("file {}", f.path().display()),
        }
    }

    /// The value of secret `name`, `None` when it is not set.
    ///
    /// Errors: a bad name, or the store cannot be read.
    pub fn get(&self, name: &str) -> Result<Option<SecretValue>, SecretError> {
        check_name(name)?;
        match self {
            SecretStore::File(f) => Ok(f.load()?.secrets.remove(name).map(SecretValue)),
        }
    }

    /// Sets secret `name` to `value` (replacing one set before), recording the store in
    /// use first when nothing is recorded.
    ///
    /// Errors: a bad name, or the store cannot be read or written.
    pub fn set(&self, name: &str, value: &SecretValue) -> Result<(), SecretError> {
        check_name(name)?;
        self.record()?;
        match self {
            SecretStore::File(f) => {
                let _lock = f.lock()?;
                let mut file = f.load()?;
                file.secrets.insert(name.to_owned(), value.0.clone());
                f.save(&file)
            }
        }
    }

    /// Removes secret `name`; returns whether it was set.
    ///
    /// Errors: a bad name, or the store cannot be read or written.
    pub fn remove(&self, name: &str) -> Result<bool, SecretError> {
        check_name(name)?;
        match self {
            SecretStore::File(f) => {
                let _lock = f.lock()?;
                let mut file = f.load()?;
                let was = file.secrets.remove(name).is_some();
                if was {
                    f.save(&file)?;
                }
                Ok(was)
            }
        }
    }

    /// The names of the secrets set, sorted.
    ///
    /// Errors: the store cannot be read.
    pub fn list(&self) -> Result<Vec<String>, SecretError> {
        match self {
            SecretStore::File(f) => Ok(f.load()?.secrets.into_keys().collect()),
        }
    }

    /// Writes [`STORE_RECORD`] when it is missing.
    fn record(&self) -> Result<(), SecretError> {
        let SecretStore::File(f) = self;
        if f.dir.contains(STORE_RECORD) {
            return Ok(());
        }
        let line = format!("{}\n", self.kind());
        write_atomic(&f.dir, STORE_RECORD, line.as_bytes(), 0o600)
            .map_err(|source| SecretError::Io { file: f.dir.join(STORE_RECORD), source })
    }
}

/// The file backend: every secret in one JSON file, [`SECRETS_FILE`] in the state
/// directory, `{"version": 1, "secrets": {"NAME": "value"}}`, mode 0600, written
/// whole with [`write_atomic`] and read back only when it is a regular file of the
/// user's that no one else can read.
#[derive(Debug, Clone)]
pub struct FileStore {
    /// The state directory, open and checked.
    dir: Dir,
}

/// The file's contents.
#[derive(Debug, Default, Serialize, Deserialize)]
struct SecretsFile {
    /// The format's version: 1.
    version: u32,
    /// Name → value.
    secrets: BTreeMap<String, String>,
}

impl FileStore {
    /// The file's path.
    pub fn path(&self) -> PathBuf {
        self.dir.join(SECRETS_FILE)
    }

    /// Holds [`SECRETS_LOCK`] until the result is dropped.
    fn lock(&self) -> Result<Flock<std::fs::File>, SecretError> {
        let file = self.dir.join(SECRETS_LOCK);
        let lock = self.dir.open_file(SECRETS_LOCK, FileUse::Lock).map_err(|e| match e {
            OpenError::Refused(refused) => SecretError::Refused { file: file.clone(), refused },
            OpenError::Io(source) => SecretError::Io { file: file.clone(), source },
        })?;
        Flock::lock(lock, FlockArg::LockExclusive).map_err(|(_, e)| SecretError::Io { file, source: e.into() })
    }

    /// The file's contents; empty when it does not exist.
    fn load(&self) -> Result<SecretsFile, SecretError> {
        let bytes = match self.dir.read_private(SECRETS_FILE) {
            Ok(bytes) => bytes,
            Err(OpenError::Io(e)) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(SecretsFile { version: 1, secrets: BTreeMap::new() });
            }
            Err(OpenError::Refused(refused)) => return Err(SecretError::Refused { file: self.path(), refused }),
            Err(OpenError::Io(source)) => return Err(SecretError::Io { file: self.path(), source }),
        };
        // serde_json's messages give a line and column, never the text.
        serde_json::from_slice(&bytes).map_err(|e| SecretError::Malformed {
            file: self.path(),
            detail: format!("{:?} at line {}", e.classify(), e.line()),
        })
    }

    /// Replaces the file with `file`.
    fn save(&self, file: &SecretsFile) -> Result<(), SecretError> {
        let file = SecretsFile { version: 1, secrets: file.secrets.clone() };
        let bytes =
            serde_json::to_vec_pretty(&file).map_err(|e| SecretError::Io { file: self.path(), source: e.into() })?;
        write_atomic(&self.dir, SECRETS_FILE, &bytes, 0o600)
            .map_err(|source| SecretError::Io { file: self.path(), source })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn store() -> (tempfile::TempDir, Dir, SecretStore) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Dir::open_private(&tmp.path().join("state"), true).unwrap();
        let store = SecretStore::open(&dir).unwrap();
        (tmp, dir, store)
    }

    fn value(s: &str) -> SecretValue {
        SecretValue::new(s.to_owned())
    }

    #[test]
    fn set_get_list_remove() {
        let (_tmp, dir, store) = store();
        assert_eq!(store.list().unwrap(), Vec::<String>::new());
        assert_eq!(store.get("api-key").unwrap(), None);
        assert!(!dir.contains(STORE_RECORD), "opening records nothing");
        store.set("api-key", &value("s3cr3t")).unwrap();
        store.set("B.2", &value("two")).unwrap();
        store.set("api-key", &value("new")).unwrap();
        assert_eq!(store.get("api-key").unwrap(), Some(value("new")));
        assert_eq!(store.list().unwrap(), vec!["B.2".to_owned(), "api-key".to_owned()]);
        assert!(store.remove("B.2").unwrap());
        assert!(!store.remove("B.2").unwrap());
        assert_eq!(store.list().unwrap(), vec!["api-key".to_owned()]);
        // Another process opening the directory sees the same store and values.
        let again = SecretStore::open(&dir).unwrap();
        assert_eq!(again.get("api-key").unwrap(), Some(value("new")));
        assert_eq!(again.location(), format!("file {}", dir.join(SECRETS_FILE).display()));
    }

    #[test]
    fn files_are_private_and_the_store_is_recorded() {
        let (_tmp, dir, store) = store();
        store.set("K", &value("v")).unwrap();
        for name in [SECRETS_FILE, STORE_RECORD] {
            assert_eq!(std::fs::metadata(dir.join(name)).unwrap().mode() & 0o777, 0o600, "{name}");
        }
        assert_eq!(dir.read(STORE_RECORD).unwrap(), b"file\n");
        let text = String::from_utf8(dir.read(SECRETS_FILE).unwrap()).unwrap();
        let parsed: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(parsed, serde_json::json!({"version": 1, "secrets": {"K": "v"}}));
    }

    #[test]
    fn names_are_checked() {
        let (_tmp, _dir, store) = store();
        for bad in ["", "a b", "a/b", "x=y", "é", &"n".repeat(MAX_NAME + 1)] {
            let err = store.set(bad, &value("v")).unwrap_err().to_string();
            assert!(err.contains("not a valid secret name") && err.contains("letters, digits"), "{bad}: {err}");
        }
        for good in ["A", "a_b-c.d", "0x", &"n".repeat(MAX_NAME)] {
            check_name(good).unwrap();
        }
    }

    #[test]
    fn an_open_a_malformed_or_an_unknown_store_is_refused_without_its_values() {
        let (_tmp, dir, store) = store();
        store.set("K", &value("hunter2")).unwrap();
        std::fs::set_permissions(dir.join(SECRETS_FILE), std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = store.get("K").unwrap_err().to_string();
        assert!(err.contains("mode 0644") && err.contains("chmod 600"), "{err}");
        write_atomic(&dir, SECRETS_FILE, br#"{"version": 1, "secrets": {"K": "hunter2""#, 0o600).unwrap();
        let err = store.list().unwrap_err().to_string();
        assert!(err.contains("not a secrets file") && !err.contains("hunter2"), "{err}");
        write_atomic(&dir, STORE_RECORD, b"keychain\n", 0o600).unwrap();
        let err = SecretStore::open(&dir).unwrap_err().to_string();
        assert!(err.contains("`keychain`") && err.contains(STORE_RECORD), "{err}");
        assert_eq!(format!("{:?}", value("hunter2")), "SecretValue(<redacted>)");
    }
}
