//! The file store: every secret in one 0600 JSON file in the state directory, and
//! the lock that every change of a store's files holds.

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;

use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};

use super::error::{SecretError, SecretValue};
use crate::fs::{Dir, FileUse, OpenError, write_atomic};

/// The file backend's file in the state directory, mode 0600.
pub const SECRETS_FILE: &str = "secrets.json";

/// The lock file in the state directory that a change holds (`flock`) from reading
/// the secrets to writing them, so two changes at once both land; choosing the store
/// holds it too. Never written.
pub const SECRETS_LOCK: &str = "secrets.lock";

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
    /// The file store of the state directory `dir`.
    pub(super) fn new(dir: &Dir) -> FileStore {
        FileStore { dir: dir.clone() }
    }

    /// The state directory.
    pub(super) fn dir(&self) -> &Dir {
        &self.dir
    }

    /// The file's path.
    pub fn path(&self) -> PathBuf {
        self.dir.join(SECRETS_FILE)
    }

    /// The value of `name`, `None` when it is not set.
    pub(super) fn get(&self, name: &str) -> Result<Option<SecretValue>, SecretError> {
        Ok(self.load()?.secrets.remove(name).map(SecretValue::new))
    }

    /// Sets `name` to `value`.
    pub(super) fn set(&self, name: &str, value: &SecretValue) -> Result<(), SecretError> {
        let _lock = lock(&self.dir)?;
        let mut file = self.load()?;
        file.secrets.insert(name.to_owned(), value.expose().to_owned());
        self.save(&file)
    }

    /// Removes `name`; returns whether it was set.
    pub(super) fn remove(&self, name: &str) -> Result<bool, SecretError> {
        let _lock = lock(&self.dir)?;
        let mut file = self.load()?;
        let was = file.secrets.remove(name).is_some();
        if was {
            self.save(&file)?;
        }
        Ok(was)
    }

    /// The names set, sorted.
    pub(super) fn list(&self) -> Result<Vec<String>, SecretError> {
        Ok(self.load()?.secrets.into_keys().collect())
    }

    /// The file's contents; empty when it does not exist.
    fn load(&self) -> Result<SecretsFile, SecretError> {
        let Some(bytes) = read_private(&self.dir, SECRETS_FILE)? else {
            return Ok(SecretsFile { version: 1, secrets: BTreeMap::new() });
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

/// Holds [`SECRETS_LOCK`] of the state directory `dir` until the result is dropped.
///
/// Errors: the lock file cannot be opened or locked.
pub(super) fn lock(dir: &Dir) -> Result<Flock<std::fs::File>, SecretError> {
    let file = dir.join(SECRETS_LOCK);
    let lock = dir.open_file(SECRETS_LOCK, FileUse::Lock).map_err(|e| match e {
        OpenError::Refused(refused) => SecretError::Refused { file: file.clone(), refused },
        OpenError::Io(source) => SecretError::Io { file: file.clone(), source },
    })?;
    Flock::lock(lock, FlockArg::LockExclusive).map_err(|(_, e)| SecretError::Io { file, source: e.into() })
}

/// The bytes of file `name` of `dir`, `None` when it does not exist, read only when
/// it is a regular file of the user's that no one else can read.
///
/// Errors: [`SecretError::Refused`] or [`SecretError::Io`], naming the file.
pub(super) fn read_private(dir: &Dir, name: &str) -> Result<Option<Vec<u8>>, SecretError> {
    match dir.read_private(name) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(OpenError::Io(e)) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(OpenError::Refused(refused)) => Err(SecretError::Refused { file: dir.join(name), refused }),
        Err(OpenError::Io(source)) => Err(SecretError::Io { file: dir.join(name), source }),
    }
}
