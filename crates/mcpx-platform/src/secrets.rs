//! The secret store: named values (`${secret:NAME}` in a config, a VS Code
//! `${input:ID}`, later OAuth tokens) kept out of config files and out of the daemon's
//! environment.
//!
//! Three backends, one per variant of [`SecretStore`]: the OS keychain where one
//! answers (the macOS Keychain, `KeychainStore`; the Secret Service of a Linux
//! desktop, `SecretServiceStore`), else a 0600 file in the state directory
//! ([`FileStore`]).
//!
//! The store in use is recorded once in the state directory (file [`STORE_RECORD`],
//! one word) and every mcpx process uses that one: a store never changes silently, so
//! a secret set in one is never looked for in another, and a recorded keychain that
//! does not answer is an error, never a fallback to the file. The first writer
//! chooses ([`SecretStore::choose`]): the keychain when it answers, else the file, or
//! what `MCPX_SECRET_STORE` asks for ([`Wanted`]).
//!
//! Values never appear in an error or in `Debug` output ([`SecretValue`]). The
//! keychain backends block on the OS (the Secret Service's client runs a thread of its
//! own while connected); the supervisor never calls them.

mod error;
mod file;
#[cfg(target_os = "macos")]
mod keychain;
#[cfg(target_os = "linux")]
mod secret_service;

pub use error::{MAX_NAME, SecretError, SecretValue, check_name};
pub use file::{FileStore, SECRETS_FILE, SECRETS_LOCK};
#[cfg(target_os = "macos")]
pub use keychain::{KeychainStore, NAMES_FILE};
#[cfg(target_os = "linux")]
pub use secret_service::SecretServiceStore;

use crate::fs::{Dir, write_atomic};

/// The file in the state directory that records which store is in use: one word
/// (`file`, `secret-service` or `keychain`) and a newline, mode 0600.
pub const STORE_RECORD: &str = "secret-store";

/// The environment variable that picks the store at the first `mcpx secret set`:
/// `file` or `keychain`. Read by the CLI; see [`Wanted::parse`].
pub const STORE_VARIABLE: &str = "MCPX_SECRET_STORE";

/// A stamp of the store recorded in `state` that changes whenever a value in it may
/// have: the file store's `secrets.json` (inode, size, modification time) and the
/// record. `None` when the store is a keychain, whose values change without a file of
/// mcpx's changing: then nothing derived from its values may be remembered.
pub fn change_stamp(state: &Dir) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let stat = |name: &str| match std::fs::symlink_metadata(state.path().join(name)) {
        Ok(m) => format!("{}:{}:{}.{}", m.ino(), m.len(), m.mtime(), m.mtime_nsec()),
        Err(_) => "-".to_owned(),
    };
    let record = file::read_private(state, STORE_RECORD).ok()?;
    match record.as_deref().map(|r| String::from_utf8_lossy(r).trim().to_owned()) {
        None => Some(format!("{} {}", stat(file::SECRETS_FILE), stat(STORE_RECORD))),
        Some(kind) if kind == "file" => Some(format!("{} {}", stat(file::SECRETS_FILE), stat(STORE_RECORD))),
        Some(_) => None,
    }
}

/// How the names of the logins `mcpx auth login` keeps begin: their own namespace in
/// the store. `mcpx secret set` and `rm` refuse such names, and a configuration's
/// `${secret:}` and `${input:}` never expand one (docs/security.md, "Remote servers").
pub const LOGIN_PREFIX: &str = "oauth-";

/// Where secrets are kept: the store recorded in the state directory.
#[derive(Debug, Clone)]
pub enum SecretStore {
    /// The 0600 JSON file in the state directory.
    File(FileStore),
    /// The Secret Service on the user's session bus (Linux).
    #[cfg(target_os = "linux")]
    SecretService(SecretServiceStore),
    /// The user's default keychain (macOS).
    #[cfg(target_os = "macos")]
    Keychain(KeychainStore),
}

/// The store the first writer asks for, from [`STORE_VARIABLE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wanted {
    /// The keychain when one answers, else the file (the variable is unset or empty).
    Any,
    /// The file, even where a keychain answers.
    File,
    /// The OS keychain, or an error when none answers.
    Keychain,
}

impl Wanted {
    /// Parses the variable's value: unset or empty is [`Wanted::Any`], `file`,
    /// `keychain` (or the recorded word of this OS's keychain, `secret-service` on
    /// Linux).
    ///
    /// Errors: [`SecretError::Unavailable`] for any other word.
    pub fn parse(value: Option<&str>) -> Result<Wanted, SecretError> {
        match value.unwrap_or("") {
            "" => Ok(Wanted::Any),
            "file" => Ok(Wanted::File),
            word if word == "keychain" || word == KEYCHAIN_KIND => Ok(Wanted::Keychain),
            other => Err(SecretError::Unavailable {
                wanted: other.chars().take(40).collect(),
                why: "not a secret store: use `file` or `keychain`".to_owned(),
            }),
        }
    }
}

/// The recorded word of this OS's keychain.
#[cfg(target_os = "linux")]
const KEYCHAIN_KIND: &str = "secret-service";
/// The recorded word of this OS's keychain.
#[cfg(target_os = "macos")]
const KEYCHAIN_KIND: &str = "keychain";

impl SecretStore {
    /// The store recorded in `state` ([`STORE_RECORD`]), or the file store when none is
    /// recorded yet: nothing was set then, so reading it finds nothing. Reads one small
    /// file; writes nothing and connects to nothing.
    ///
    /// Errors: the record names a store this mcpx does not have, or cannot be read.
    pub fn open(state: &Dir) -> Result<SecretStore, SecretError> {
        Ok(SecretStore::recorded(state)?.unwrap_or_else(|| SecretStore::File(FileStore::new(state))))
    }

    /// The store to write to: the recorded one, or, when none is recorded yet, the
    /// one `wanted` picks, which is then recorded. [`Wanted::Any`] takes the OS
    /// keychain when it answers (the Secret Service on the session bus; the Keychain
    /// on macOS), else the file. Holds [`SECRETS_LOCK`] while it chooses, so two
    /// first writers record one store.
    ///
    /// Errors: `wanted` is not [`Wanted::Any`] and differs from the recorded store
    /// ([`SecretError::Mismatch`]); [`Wanted::Keychain`] where none answers
    /// ([`SecretError::Unavailable`]); the record cannot be read or written.
    pub fn choose(state: &Dir, wanted: Wanted) -> Result<SecretStore, SecretError> {
        let _lock = file::lock(state)?;
        if let Some(store) = SecretStore::recorded(state)? {
            let matches = match wanted {
                Wanted::Any => true,
                Wanted::File => store.kind() == "file",
                Wanted::Keychain => store.kind() == KEYCHAIN_KIND,
            };
            if !matches {
                let wanted = if wanted == Wanted::File { "file" } else { "keychain" };
                return Err(SecretError::Mismatch {
                    record: state.join(STORE_RECORD),
                    recorded: store.kind(),
                    wanted: wanted.to_owned(),
                });
            }
            return Ok(store);
        }
        let store = match wanted {
            Wanted::File => SecretStore::File(FileStore::new(state)),
            Wanted::Keychain => {
                let keychain = SecretStore::keychain(state);
                keychain.probe().map_err(|e| SecretError::Unavailable {
                    wanted: "keychain".to_owned(),
                    why: format!("{e}; or unset MCPX_SECRET_STORE to use the file store"),
                })?;
                keychain
            }
            Wanted::Any => {
                let keychain = SecretStore::keychain(state);
                match keychain.probe() {
                    Ok(()) => keychain,
                    Err(_) => SecretStore::File(FileStore::new(state)),
                }
            }
        };
        store.record(state)?;
        Ok(store)
    }

    /// The store's kind, as recorded: `file`, `secret-service` or `keychain`.
    pub fn kind(&self) -> &'static str {
        match self {
            SecretStore::File(_) => "file",
            #[cfg(target_os = "linux")]
            SecretStore::SecretService(_) => "secret-service",
            #[cfg(target_os = "macos")]
            SecretStore::Keychain(_) => "keychain",
        }
    }

    /// Where the secrets are kept, for `mcpx secret ls`: `file <path>`,
    /// `secret-service <bus address>` or `keychain <service>`.
    pub fn location(&self) -> String {
        match self {
            SecretStore::File(f) => format!("file {}", f.path().display()),
            #[cfg(target_os = "linux")]
            SecretStore::SecretService(s) => format!("secret-service {}", s.address()),
            #[cfg(target_os = "macos")]
            SecretStore::Keychain(k) => format!("keychain {}", k.service()),
        }
    }

    /// The value of secret `name`, `None` when it is not set.
    ///
    /// Errors: a bad name, or the store cannot be read (a keychain that does not
    /// answer or is locked).
    pub fn get(&self, name: &str) -> Result<Option<SecretValue>, SecretError> {
        check_name(name)?;
        match self {
            SecretStore::File(f) => f.get(name),
            #[cfg(target_os = "linux")]
            SecretStore::SecretService(s) => s.get(name),
            #[cfg(target_os = "macos")]
            SecretStore::Keychain(k) => k.get(name),
        }
    }

    /// Sets secret `name` to `value` (replacing one set before). The file store
    /// records itself first when nothing is recorded; a writer that may start a store
    /// opens it with [`SecretStore::choose`].
    ///
    /// Errors: a bad name, or the store cannot be read or written.
    pub fn set(&self, name: &str, value: &SecretValue) -> Result<(), SecretError> {
        check_name(name)?;
        match self {
            SecretStore::File(f) => {
                self.record(f.dir())?;
                f.set(name, value)
            }
            #[cfg(target_os = "linux")]
            SecretStore::SecretService(s) => s.set(name, value),
            #[cfg(target_os = "macos")]
            SecretStore::Keychain(k) => k.set(name, value),
        }
    }

    /// Removes secret `name`; returns whether it was set.
    ///
    /// Errors: a bad name, or the store cannot be read or written.
    pub fn remove(&self, name: &str) -> Result<bool, SecretError> {
        check_name(name)?;
        match self {
            SecretStore::File(f) => f.remove(name),
            #[cfg(target_os = "linux")]
            SecretStore::SecretService(s) => s.remove(name),
            #[cfg(target_os = "macos")]
            SecretStore::Keychain(k) => k.remove(name),
        }
    }

    /// The names of the secrets set, sorted.
    ///
    /// Errors: the store cannot be read.
    pub fn list(&self) -> Result<Vec<String>, SecretError> {
        match self {
            SecretStore::File(f) => f.list(),
            #[cfg(target_os = "linux")]
            SecretStore::SecretService(s) => s.list(),
            #[cfg(target_os = "macos")]
            SecretStore::Keychain(k) => k.list(),
        }
    }

    /// The store [`STORE_RECORD`] names, `None` when there is no record.
    fn recorded(state: &Dir) -> Result<Option<SecretStore>, SecretError> {
        let Some(bytes) = file::read_private(state, STORE_RECORD)? else { return Ok(None) };
        match String::from_utf8_lossy(&bytes).trim() {
            "file" => Ok(Some(SecretStore::File(FileStore::new(state)))),
            KEYCHAIN_KIND => Ok(Some(SecretStore::keychain(state))),
            other => Err(SecretError::UnknownStore {
                record: state.join(STORE_RECORD),
                store: other.chars().take(40).collect(),
            }),
        }
    }

    /// This OS's keychain store for `state`, not yet probed.
    fn keychain(state: &Dir) -> SecretStore {
        #[cfg(target_os = "linux")]
        return SecretStore::SecretService(SecretServiceStore::new(state.path().to_path_buf()));
        #[cfg(target_os = "macos")]
        return SecretStore::Keychain(KeychainStore::new(state));
    }

    /// Whether the store answers: the file always does.
    fn probe(&self) -> Result<(), SecretError> {
        match self {
            SecretStore::File(_) => Ok(()),
            #[cfg(target_os = "linux")]
            SecretStore::SecretService(s) => s.probe(),
            #[cfg(target_os = "macos")]
            SecretStore::Keychain(k) => k.probe(),
        }
    }

    /// Writes [`STORE_RECORD`] in `state` when it is missing.
    fn record(&self, state: &Dir) -> Result<(), SecretError> {
        if state.contains(STORE_RECORD) {
            return Ok(());
        }
        let line = format!("{}\n", self.kind());
        write_atomic(state, STORE_RECORD, line.as_bytes(), 0o600)
            .map_err(|source| SecretError::Io { file: state.join(STORE_RECORD), source })
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
        write_atomic(&dir, STORE_RECORD, b"vault\n", 0o600).unwrap();
        let err = SecretStore::open(&dir).unwrap_err().to_string();
        assert!(err.contains("`vault`") && err.contains(STORE_RECORD), "{err}");
        assert_eq!(format!("{:?}", value("hunter2")), "SecretValue(<redacted>)");
    }

    #[test]
    fn the_first_writer_records_the_store_and_a_later_one_asking_for_another_is_refused() {
        let (_tmp, dir, _) = store();
        let chosen = SecretStore::choose(&dir, Wanted::File).unwrap();
        assert_eq!(chosen.kind(), "file");
        assert_eq!(dir.read(STORE_RECORD).unwrap(), b"file\n");
        assert_eq!(SecretStore::choose(&dir, Wanted::Any).unwrap().kind(), "file");
        let err = SecretStore::choose(&dir, Wanted::Keychain).unwrap_err().to_string();
        assert!(err.contains("MCPX_SECRET_STORE asks for the `keychain`") && err.contains("records `file`"), "{err}");
        assert_eq!(Wanted::parse(None).unwrap(), Wanted::Any);
        assert_eq!(Wanted::parse(Some("")).unwrap(), Wanted::Any);
        assert_eq!(Wanted::parse(Some("keychain")).unwrap(), Wanted::Keychain);
        assert_eq!(Wanted::parse(Some(KEYCHAIN_KIND)).unwrap(), Wanted::Keychain);
        let err = Wanted::parse(Some("vault")).unwrap_err().to_string();
        assert!(err.contains("MCPX_SECRET_STORE=vault") && err.contains("use `file` or `keychain`"), "{err}");
    }
}
