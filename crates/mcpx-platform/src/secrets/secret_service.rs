//! The Secret Service store (Linux desktops: GNOME Keyring, KWallet, KeePassXC): each
//! secret is one item of the keyring's default collection, reached over the user's
//! session bus with the pure-Rust `secret-service` client (zbus, no C library).
//!
//! An item's attributes are `application` = `mcpx`, `mcpx-state` = the state
//! directory's path and `mcpx-name` = the secret's name, so two state directories
//! (two profiles, or tests) keep apart, and listing is a search on the first two: the
//! Secret Service enumerates, so no index of names is kept. Values cross the bus
//! encrypted (the Diffie-Hellman session of the specification, "Transfer of Secrets").
//!
//! The session bus is `DBUS_SESSION_BUS_ADDRESS`, else `unix:path=/run/user/<uid>/bus`
//! (where systemd's user manager puts it), so a daemon started with a stripped
//! environment still finds it. Nothing here prompts: a locked collection is an error
//! that says to unlock it, since a daemon has no one to ask.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use secret_service::EncryptionType;
use secret_service::blocking::SecretService;

use super::error::{SecretError, SecretValue};

/// How long one call on the bus may take before the store is said not to answer.
const CALL_TIMEOUT: Duration = Duration::from_secs(20);

/// What to do when the Secret Service does not answer.
const START_HINT: &str = "start your keyring (log in to a desktop session, or run `gnome-keyring-daemon --start --components=secrets` in it) and set DBUS_SESSION_BUS_ADDRESS where mcpx runs";

/// What to do when the collection is locked.
const UNLOCK_HINT: &str =
    "unlock your keyring (log in to the desktop, or `gnome-keyring-daemon --unlock` with your password on stdin)";

/// The items' attribute holding the application, `mcpx`.
const APPLICATION: &str = "application";
/// The items' attribute holding the state directory's path.
const STATE: &str = "mcpx-state";
/// The items' attribute holding the secret's name.
const NAME: &str = "mcpx-name";

/// The Secret Service on a session bus, for one state directory.
#[derive(Debug, Clone)]
pub struct SecretServiceStore {
    /// The session bus's D-Bus address, as found when the store was opened.
    address: String,
    /// The state directory's path, the items' `mcpx-state` attribute.
    state: String,
}

impl SecretServiceStore {
    /// The store on the session bus found in this process's environment, for the
    /// state directory at `state`. Connects to nothing.
    pub(super) fn new(state: PathBuf) -> SecretServiceStore {
        SecretServiceStore { address: session_bus_address(), state: state.display().to_string() }
    }

    /// The session bus's address.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Whether a Secret Service answers on the bus: it opens a session.
    ///
    /// Errors: [`SecretError::Keychain`] with why not.
    pub(super) fn probe(&self) -> Result<(), SecretError> {
        self.connect().map(drop)
    }

    /// The value of `name`, `None` when it is not set.
    pub(super) fn get(&self, name: &str) -> Result<Option<SecretValue>, SecretError> {
        let service = self.connect()?;
        let found = service.search_items(self.attributes(Some(name))).map_err(|e| self.failed(e))?;
        let Some(item) = found.unlocked.first() else {
            return if found.locked.is_empty() { Ok(None) } else { Err(self.locked()) };
        };
        let bytes = item.get_secret().map_err(|e| self.failed(e))?;
        let value = String::from_utf8(bytes).map_err(|_| SecretError::Keychain {
            place: self.place(),
            detail: format!("the item of `{name}` is not UTF-8 text"),
            hint: "set the secret again with `mcpx secret set`",
        })?;
        Ok(Some(SecretValue::new(value)))
    }

    /// Sets `name` to `value`, replacing its item, in the default collection.
    pub(super) fn set(&self, name: &str, value: &SecretValue) -> Result<(), SecretError> {
        let service = self.connect()?;
        let collection = service.get_default_collection().map_err(|e| self.failed(e))?;
        if collection.is_locked().map_err(|e| self.failed(e))? {
            return Err(self.locked());
        }
        let label = format!("mcpx secret {name}");
        collection
            .create_item(&label, self.attributes(Some(name)), value.expose().as_bytes(), true, "text/plain")
            .map_err(|e| self.failed(e))?;
        Ok(())
    }

    /// Removes `name`'s items; returns whether there was one.
    pub(super) fn remove(&self, name: &str) -> Result<bool, SecretError> {
        let service = self.connect()?;
        let found = service.search_items(self.attributes(Some(name))).map_err(|e| self.failed(e))?;
        if !found.locked.is_empty() {
            return Err(self.locked());
        }
        for item in &found.unlocked {
            item.delete().map_err(|e| self.failed(e))?;
        }
        Ok(!found.unlocked.is_empty())
    }

    /// The names set, sorted.
    pub(super) fn list(&self) -> Result<Vec<String>, SecretError> {
        let service = self.connect()?;
        let found = service.search_items(self.attributes(None)).map_err(|e| self.failed(e))?;
        if !found.locked.is_empty() {
            return Err(self.locked());
        }
        let mut names = Vec::new();
        for item in &found.unlocked {
            let attributes = item.get_attributes().map_err(|e| self.failed(e))?;
            names.extend(attributes.get(NAME).cloned());
        }
        names.sort();
        names.dedup();
        Ok(names)
    }

    /// Connects to the bus and opens an encrypted session with the Secret Service.
    fn connect(&self) -> Result<SecretService<'static>, SecretError> {
        let connection = zbus::blocking::connection::Builder::address(self.address.as_str())
            .and_then(|b| b.method_timeout(CALL_TIMEOUT).build())
            .map_err(|e| self.failed(secret_service::Error::Zbus(e)))?;
        SecretService::connect_with_existing(EncryptionType::Dh, connection).map_err(|e| self.failed(e))
    }

    /// The attributes of `name`'s item, or of every item of this state directory.
    fn attributes<'a>(&'a self, name: Option<&'a str>) -> HashMap<&'a str, &'a str> {
        let mut attributes = HashMap::from([(APPLICATION, "mcpx"), (STATE, self.state.as_str())]);
        if let Some(name) = name {
            attributes.insert(NAME, name);
        }
        attributes
    }

    /// Where the store was looked for, for messages.
    fn place(&self) -> String {
        format!("the Secret Service on the session bus {}", self.address)
    }

    /// A call failed: the client's message, which quotes the service or the bus,
    /// never a request.
    fn failed(&self, e: secret_service::Error) -> SecretError {
        let detail = match e {
            secret_service::Error::Locked => return self.locked(),
            e => e.to_string(),
        };
        SecretError::Keychain { place: self.place(), detail, hint: START_HINT }
    }

    /// The collection is locked.
    fn locked(&self) -> SecretError {
        SecretError::Locked {
            place: format!("the Secret Service's keyring (session bus {})", self.address),
            hint: UNLOCK_HINT,
        }
    }
}

/// The session bus's address: `DBUS_SESSION_BUS_ADDRESS`, else
/// `unix:path=/run/user/<uid>/bus`.
fn session_bus_address() -> String {
    match std::env::var("DBUS_SESSION_BUS_ADDRESS") {
        Ok(address) if !address.is_empty() => address,
        _ => format!("unix:path={}/{}/bus", run_user_root().display(), nix::unistd::getuid()),
    }
}

/// `/run/user`, or with the `test-hooks` feature `MCPX_TEST_RUN_USER` when set (the
/// daemon's runtime rule reads the same variable).
fn run_user_root() -> PathBuf {
    #[cfg(feature = "test-hooks")]
    if let Some(root) = std::env::var_os("MCPX_TEST_RUN_USER").filter(|v| !v.is_empty()) {
        return PathBuf::from(root);
    }
    PathBuf::from("/run/user")
}
