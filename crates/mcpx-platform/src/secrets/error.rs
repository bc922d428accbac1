//! What every secret store shares: a value that hides itself ([`SecretValue`]), the
//! errors ([`SecretError`]) and the rule for names ([`check_name`]).

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::fs::Refused;

/// The longest secret name accepted, in bytes.
pub const MAX_NAME: usize = 128;

/// Where the docs say how to choose or move a store, for error messages.
const MOVE_DOCS: &str = "docs/configuration.md, \"Secrets\"";

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

/// A secret store operation failed. Messages name the secret, the file or the
/// keychain, never a value, and say what to do.
#[derive(Debug)]
pub enum SecretError {
    /// The name is not letters, digits, `_`, `-` and `.` (1 to [`MAX_NAME`] bytes).
    BadName(String),
    /// The store record names a store this mcpx does not have.
    UnknownStore {
        /// The record file.
        record: PathBuf,
        /// The word it holds (at most 40 characters of it).
        store: String,
    },
    /// `MCPX_SECRET_STORE` asks for a store other than the one recorded.
    Mismatch {
        /// The record file.
        record: PathBuf,
        /// The recorded store's kind.
        recorded: &'static str,
        /// What `MCPX_SECRET_STORE` asks for.
        wanted: String,
    },
    /// `MCPX_SECRET_STORE` holds a word that names no store, or asks for the
    /// keychain where none answers.
    Unavailable {
        /// What `MCPX_SECRET_STORE` asks for (at most 40 characters of it).
        wanted: String,
        /// Why it cannot be had.
        why: String,
    },
    /// The OS keychain did not answer, or refused the operation.
    Keychain {
        /// Which keychain, and where it was looked for.
        place: String,
        /// The keychain's or the bus's own message: never a value (values travel
        /// only in requests, and the keychains' messages do not quote requests).
        detail: String,
        /// What to do about it.
        hint: &'static str,
    },
    /// The keychain holds the secrets in a locked collection.
    Locked {
        /// Which keychain.
        place: String,
        /// How to unlock it.
        hint: &'static str,
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
                "{} names the secret store `{}`, which this mcpx does not have: use the mcpx that recorded it, or remove the file to choose a store again",
                record.display(),
                store.escape_debug()
            ),
            SecretError::Mismatch { record, recorded, wanted } => write!(
                f,
                "MCPX_SECRET_STORE asks for the `{}` secret store, and {} records `{recorded}`, the store your secrets are in: unset MCPX_SECRET_STORE, or move the secrets as {MOVE_DOCS} says",
                wanted.escape_debug(),
                record.display()
            ),
            SecretError::Unavailable { wanted, why } => {
                write!(f, "MCPX_SECRET_STORE={}: {why}", wanted.escape_debug())
            }
            SecretError::Keychain { place, detail, hint } => {
                write!(f, "{place} did not answer ({detail}): {hint}, or move to the file store as {MOVE_DOCS} says")
            }
            SecretError::Locked { place, hint } => write!(f, "{place} is locked: {hint}, and try again"),
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
