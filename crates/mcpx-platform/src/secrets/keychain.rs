//! The macOS Keychain store: each secret is a generic password of the user's default
//! keychain, service `mcpx:<state directory>` (so two state directories keep apart),
//! account the secret's name.
//!
//! Listing: the Keychain's search API returns items only after it asks the user for
//! each one's attributes in some setups, so the names (never the values) are kept in
//! an index file beside the store record, [`NAMES_FILE`], mode 0600, changed under
//! the secrets lock.

use std::collections::BTreeSet;

use security_framework::passwords::{delete_generic_password, get_generic_password, set_generic_password};
use serde::{Deserialize, Serialize};

use super::error::{SecretError, SecretValue};
use super::file::{lock, read_private};
use crate::fs::{Dir, write_atomic};

/// The index of the names kept in the Keychain, in the state directory, mode 0600:
/// `{"version": 1, "names": ["NAME", ...]}`.
pub const NAMES_FILE: &str = "secret-names.json";

/// `errSecItemNotFound`: no such item.
const NOT_FOUND: i32 = -25300;

/// What to do when the Keychain refuses.
const HINT: &str =
    "unlock your login keychain (Keychain Access, or `security unlock-keychain`) and allow mcpx to use it";

/// The macOS Keychain, for one state directory.
#[derive(Debug, Clone)]
pub struct KeychainStore {
    /// The state directory, open and checked: it holds the index of names.
    dir: Dir,
    /// The items' service: `mcpx:<state directory>`.
    service: String,
}

/// The index's contents.
#[derive(Debug, Default, Serialize, Deserialize)]
struct NamesFile {
    /// The format's version: 1.
    version: u32,
    /// The names set.
    names: BTreeSet<String>,
}

impl KeychainStore {
    /// The Keychain store of the state directory `dir`. Touches nothing.
    pub(super) fn new(dir: &Dir) -> KeychainStore {
        KeychainStore { dir: dir.clone(), service: format!("mcpx:{}", dir.path().display()) }
    }

    /// The items' service name.
    pub fn service(&self) -> &str {
        &self.service
    }

    /// The Keychain is on every Mac: nothing to probe.
    pub(super) fn probe(&self) -> Result<(), SecretError> {
        Ok(())
    }

    /// The value of `name`, `None` when it is not set.
    pub(super) fn get(&self, name: &str) -> Result<Option<SecretValue>, SecretError> {
        match get_generic_password(&self.service, name) {
            Ok(bytes) => {
                String::from_utf8(bytes).map(|v| Some(SecretValue::new(v))).map_err(|_| SecretError::Keychain {
                    place: self.place(),
                    detail: format!("the item of `{name}` is not UTF-8 text"),
                    hint: "set the secret again with `mcpx secret set`",
                })
            }
            Err(e) if e.code() == NOT_FOUND => Ok(None),
            Err(e) => Err(self.failed(&e)),
        }
    }

    /// Sets `name` to `value`, and adds the name to the index.
    pub(super) fn set(&self, name: &str, value: &SecretValue) -> Result<(), SecretError> {
        let _lock = lock(&self.dir)?;
        set_generic_password(&self.service, name, value.expose().as_bytes()).map_err(|e| self.failed(&e))?;
        let mut index = self.load()?;
        if index.names.insert(name.to_owned()) { self.save(&index) } else { Ok(()) }
    }

    /// Removes `name` and its index entry; returns whether it was set.
    pub(super) fn remove(&self, name: &str) -> Result<bool, SecretError> {
        let _lock = lock(&self.dir)?;
        let was = match delete_generic_password(&self.service, name) {
            Ok(()) => true,
            Err(e) if e.code() == NOT_FOUND => false,
            Err(e) => return Err(self.failed(&e)),
        };
        let mut index = self.load()?;
        if index.names.remove(name) {
            self.save(&index)?;
        }
        Ok(was)
    }

    /// The names in the index, sorted.
    pub(super) fn list(&self) -> Result<Vec<String>, SecretError> {
        Ok(self.load()?.names.into_iter().collect())
    }

    /// The index; empty when it does not exist.
    fn load(&self) -> Result<NamesFile, SecretError> {
        let Some(bytes) = read_private(&self.dir, NAMES_FILE)? else { return Ok(NamesFile::default()) };
        serde_json::from_slice(&bytes).map_err(|e| SecretError::Malformed {
            file: self.dir.join(NAMES_FILE),
            detail: format!("{:?} at line {}", e.classify(), e.line()),
        })
    }

    /// Replaces the index.
    fn save(&self, index: &NamesFile) -> Result<(), SecretError> {
        let file = self.dir.join(NAMES_FILE);
        let index = NamesFile { version: 1, names: index.names.clone() };
        let bytes =
            serde_json::to_vec_pretty(&index).map_err(|e| SecretError::Io { file: file.clone(), source: e.into() })?;
        write_atomic(&self.dir, NAMES_FILE, &bytes, 0o600).map_err(|source| SecretError::Io { file, source })
    }

    /// Where the store is, for messages.
    fn place(&self) -> String {
        format!("the macOS Keychain (service {})", self.service)
    }

    /// A Keychain call failed: its status message, which never quotes a value.
    fn failed(&self, e: &security_framework::base::Error) -> SecretError {
        SecretError::Keychain { place: self.place(), detail: e.to_string(), hint: HINT }
    }
}
