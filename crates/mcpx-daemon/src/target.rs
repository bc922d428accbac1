//! From a configured server to what the pool needs to serve one caller, in one pass:
//! the entry's `${VAR}`s and `${secret:NAME}`s expanded, its command found on the child's `PATH`, its
//! fingerprint computed and its launch description built (a [`Target`]), and the
//! caller's pool key from the server's `scope` ([`crate::scope`]).
//!
//! Every call resolves its server, and a `PATH` walk costs a `stat` per directory, so
//! a command lookup is reused for [`RESOLVE_TTL`]; so is a whole target, while its
//! entry is unchanged and its expansion read no secret.

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::api::Caller;
use crate::config::{
    CommandNotFound, ExeIdentity, ExpandedOAuth, ExpandedSandbox, ExpandedTransport, Secrets, ServerEntry, StoreIn,
    TransportSpec,
};
use crate::config::{exe_identity, resolve_command};
use crate::pool::Target;
use crate::scope::{self, PoolKey};
use crate::sync::lock;
use crate::transport::{Launch, RemoteEndpoint, StdioSpec};
use mcpx_platform::fs::Dir;
use mcpx_proto::attach::Identity;

/// How long a command lookup is reused: a program installed or replaced on `PATH` is
/// seen within this time.
pub const RESOLVE_TTL: Duration = Duration::from_secs(2);

/// Why an entry cannot be made a [`Target`]: its own type, which the control API
/// turns into an `ApiError` (`config`, `usage`) and the MCP endpoint into a
/// JSON-RPC error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The policy refused it (a project file's entry not trusted).
    Policy(crate::policy::Refusal),
    /// Its configuration cannot be expanded or read (an unset variable or secret, an
    /// unreadable secret store, a malformed URL or header): the message names it.
    Config(String),
    /// What was asked does not apply to it (a login to a server without a `url`).
    Usage(String),
}

impl From<crate::policy::Refusal> for Refusal {
    fn from(refusal: crate::policy::Refusal) -> Refusal {
        Refusal::Policy(refusal)
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Policy(r) => write!(f, "{r}"),
            Refusal::Config(m) | Refusal::Usage(m) => f.write_str(m),
        }
    }
}

/// Turns configured entries into [`Target`]s and callers into pool keys, for one
/// daemon (its captured environment).
#[derive(Debug)]
pub struct Targets {
    /// The environment captured at start: the only source of `${VAR}` values, and the
    /// base of every child's environment.
    env: HashMap<String, String>,
    /// The state directory, where the secret store is read afresh at each expansion
    /// (the CLI writes it while the daemon runs).
    state: Dir,
    /// What is remembered between requests. One lock, held only for a lookup or an
    /// insert, never across an await.
    memo: Mutex<Memo>,
    /// The key of the schema cache's authorization contexts (`<state>/context-key`,
    /// 32 random bytes, 0600), read or made at first use; `None` when neither can be.
    context_key: std::sync::OnceLock<Option<Vec<u8>>>,
    /// How many logins and logouts the daemon has made: a target built under another
    /// count is not reused.
    logins: std::sync::atomic::AtomicU64,
}

/// The file of the authorization contexts' HMAC key, in the state directory.
pub const CONTEXT_KEY_FILE: &str = "context-key";

/// A command lookup: (command, `PATH`, working directory).
type ProgramQuery = (String, Option<String>, Option<PathBuf>);

/// Remembered across requests.
#[derive(Debug, Default)]
struct Memo {
    /// Recent command lookups: when, the program found, and its identity.
    programs: HashMap<ProgramQuery, (Instant, PathBuf, Option<ExeIdentity>)>,
    /// (server, fix) pairs already logged for degraded scopes: each is said once.
    degraded: HashSet<(String, &'static str)>,
    /// Recent targets by server name: the entry each was built from, the target, and
    /// when its command was looked up (or it was built, for a remote server). Only
    /// targets whose expansion read no secret: the store may change at any time.
    targets: HashMap<String, (ServerEntry, Arc<Target>, Instant, u64)>,
    /// Authorization contexts by server name: the entry, the secret store's stamp they
    /// were computed under, and the context ([`Targets::context`]).
    contexts: HashMap<String, (ServerEntry, String, Option<String>)>,
}

/// The secret store, noting whether an expansion looked anything up in it.
struct Noting<'a> {
    store: StoreIn<'a>,
    asked: Cell<bool>,
}

impl Secrets for Noting<'_> {
    fn secret(&self, name: &str) -> Result<Option<mcpx_platform::secrets::SecretValue>, String> {
        self.asked.set(true);
        self.store.secret(name)
    }
}

impl Targets {
    /// Targets resolved against the daemon's captured environment `env` and the
    /// secret store recorded in the state directory `state`.
    pub fn new(env: HashMap<String, String>, state: Dir) -> Targets {
        Targets {
            env,
            state,
            memo: Mutex::new(Memo::default()),
            context_key: std::sync::OnceLock::new(),
            logins: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The authorization context of `entry`'s private listings (docs/api.md, "The
    /// schema cache"): its target's ([`Target::context`]). `None` when the entry cannot
    /// be expanded (untrusted, an unset secret): then no private listing is served.
    ///
    /// `ls` asks this of every server with a private listing, and an expansion reads the
    /// secret store: the answer is remembered for as long as the entry and the store
    /// are unchanged ([`mcpx_platform::secrets::change_stamp`]; never for a keychain).
    pub fn context(&self, entry: &ServerEntry) -> Option<String> {
        let stamp = mcpx_platform::secrets::change_stamp(&self.state);
        if let Some(stamp) = &stamp {
            if let Some((built_from, seen, context)) = lock(&self.memo).contexts.get(&entry.name) {
                if built_from == entry && seen == stamp {
                    return context.clone();
                }
            }
        }
        let context = self.target(entry).ok()?.context.clone();
        if let Some(stamp) = stamp {
            lock(&self.memo).contexts.insert(entry.name.clone(), (entry.clone(), stamp, context.clone()));
        }
        context
    }

    /// An HMAC-SHA256 (RFC 2104) of `parts` under the user's context key, hex; `None`
    /// without a key.
    fn context_of(&self, parts: &serde_json::Value) -> Option<String> {
        use hmac::Mac;
        let key = self.context_key.get_or_init(|| self.load_context_key()).as_ref()?;
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).ok()?;
        mac.update(parts.to_string().as_bytes());
        Some(mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect())
    }

    /// `<state>/context-key`, made (random, 0600) when missing.
    fn load_context_key(&self) -> Option<Vec<u8>> {
        match self.state.read_private(CONTEXT_KEY_FILE) {
            Ok(key) if key.len() == 32 => return Some(key),
            Ok(_) => tracing::warn!("{CONTEXT_KEY_FILE} is not 32 bytes; making a new one"),
            Err(mcpx_platform::fs::OpenError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(error = %e, "cannot read {CONTEXT_KEY_FILE}; private listings are kept in memory only");
                return None;
            }
        }
        let mut key = vec![0u8; 32];
        mcpx_platform::random_bytes(&mut key).ok()?;
        match mcpx_platform::fs::write_atomic(&self.state, CONTEXT_KEY_FILE, &key, 0o600) {
            Ok(()) => Some(key),
            Err(e) => {
                tracing::warn!(error = %e, "cannot write {CONTEXT_KEY_FILE}; private listings are kept in memory only");
                None
            }
        }
    }

    /// The secret store `${secret:NAME}` and `${input:ID}` read from.
    pub fn secrets(&self) -> StoreIn<'_> {
        StoreIn(&self.state)
    }

    /// The daemon's captured environment.
    pub fn env(&self) -> &HashMap<String, String> {
        &self.env
    }

    /// The target of `entry` and the pool key it has for `caller`: what
    /// [`crate::daemon::Daemon::lease_as`] takes. See [`Targets::target`] and
    /// [`Targets::pool_key`].
    ///
    /// Errors: those of [`Targets::target`].
    pub fn for_caller(&self, entry: &ServerEntry, caller: &Caller) -> Result<(Arc<Target>, PoolKey), Refusal> {
        let target = self.target(entry)?;
        Ok((target, self.pool_key(entry, caller)))
    }

    /// What a login to the remote `entry` needs: its URL and its `oauth` block, expanded
    /// as a start would expand them.
    ///
    /// Errors: as [`Targets::target`]: an untrusted entry, an unset variable or secret,
    /// a malformed URL (`config`).
    pub fn login_parts(&self, entry: &ServerEntry) -> Result<(url::Url, Option<ExpandedOAuth>), Refusal> {
        let url = self.remote_url(entry)?;
        let config = |e: crate::config::ConfigError| Refusal::Config(e.to_string());
        Ok((url, entry.expand_oauth(&self.env, &self.secrets()).map_err(config)?))
    }

    /// The URL of the remote `entry`, expanded as a start would expand it (its `oauth`
    /// block is not).
    ///
    /// Errors: as [`Targets::login_parts`].
    pub fn remote_url(&self, entry: &ServerEntry) -> Result<url::Url, Refusal> {
        crate::policy::check_trusted(entry)?;
        let config = |e: crate::config::ConfigError| Refusal::Config(e.to_string());
        let ExpandedTransport::Remote(remote) = entry.expand(&self.env, &self.secrets()).map_err(config)? else {
            return Err(Refusal::Usage(format!("server `{}` has no `url`", entry.name)));
        };
        let url = url::Url::parse(&remote.url).map_err(|e| {
            Refusal::Config(format!("server `{}`: the `url` is not a URL ({e}); fix it in the entry", entry.name))
        })?;
        Ok(url)
    }

    /// Resolves how to start `entry`: `${VAR}`s and secrets expanded, the command found on the
    /// child's `PATH` (the daemon's, unless the entry's `env` sets one), the
    /// environment assembled, and the fingerprint computed (with the executable's
    /// identity; a remote server's is its cache key).
    ///
    /// Errors: an entry of a project file that is not trusted
    /// ([`crate::policy::check_trusted`]); an unset variable or secret, an unreadable secret store, or a remote server's malformed URL or header, is a
    /// configuration error (`config`, exit 2); a command that is not found is kept in
    /// the target, so the start fails as a server error (exit 4) and the server shows
    /// `error`.
    ///
    /// The same entry gets the same target again (shared) for [`RESOLVE_TTL`] after its
    /// command was looked up, unless its expansion read a secret or a login or logout
    /// came meanwhile ([`Targets::logins_changed`]: a remote target's context names the
    /// login that covers it).
    pub fn target(&self, entry: &ServerEntry) -> Result<Arc<Target>, Refusal> {
        let logins = self.logins.load(std::sync::atomic::Ordering::Acquire);
        if let Some((built_from, target, at, seen)) = lock(&self.memo).targets.get(&entry.name) {
            if built_from == entry && at.elapsed() < RESOLVE_TTL && *seen == logins {
                return Ok(target.clone());
            }
        }
        let secrets = Noting { store: self.secrets(), asked: Cell::new(false) };
        let (target, at) = self.build(entry, &secrets)?;
        let target = Arc::new(target);
        if !secrets.asked.get() {
            lock(&self.memo).targets.insert(entry.name.clone(), (entry.clone(), target.clone(), at, logins));
        }
        Ok(target)
    }

    /// Says that a login or a logout changed the logins kept (the daemon runs both):
    /// targets built before are built again, so their contexts name the new login.
    pub fn logins_changed(&self) {
        self.logins.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }

    /// A fresh [`target`](Self::target) of `entry`, expanded with `secrets`, and when its
    /// command was looked up (now, for a remote server).
    fn build(&self, entry: &ServerEntry, secrets: &dyn Secrets) -> Result<(Target, Instant), Refusal> {
        // Nothing of an untrusted project file's entry is expanded, whoever asks.
        crate::policy::check_trusted(entry)?;
        let cache_key = entry.cache_key();
        let expanded = entry.expand(&self.env, secrets).map_err(|e| Refusal::Config(e.to_string()))?;
        let context = match &expanded {
            ExpandedTransport::Stdio(s) => {
                self.context_of(&serde_json::json!(["stdio", cache_key, s.command, s.args, s.env, s.cwd]))
            }
            ExpandedTransport::Remote(r) => {
                // The login that covers the URL is part of who asks (none: anonymous).
                let identity = url::Url::parse(&r.url)
                    .ok()
                    .and_then(|u| crate::auth::tokens::covering(&self.state, &u).ok())
                    .and_then(|logins| logins.first().map(crate::auth::tokens::Kept::identity));
                self.context_of(&serde_json::json!(["remote", cache_key, r.url, r.headers, identity]))
            }
        };
        let options = &entry.options;
        let identity = |fingerprint: String| Identity {
            server: entry.name.clone(),
            fingerprint,
            cache_key: cache_key.clone(),
            // The pool sets the key of the instance it starts.
            key: PoolKey::Global.to_string(),
            sharing: options.sharing.as_str().into(),
        };
        let max_message_bytes = usize::try_from(options.max_message_bytes).unwrap_or(usize::MAX);
        let (stdio, written) = match (expanded, &entry.transport) {
            (ExpandedTransport::Stdio(stdio), TransportSpec::Stdio { command, .. }) => (stdio, command.clone()),
            (ExpandedTransport::Remote(remote), TransportSpec::Remote { url: written_url, .. }) => {
                let spec = RemoteEndpoint {
                    identity: identity(cache_key.clone()),
                    url: remote.url.clone(),
                    written_url: written_url.clone(),
                    headers: remote.headers.clone(),
                    kind: remote.kind,
                    max_message_bytes,
                    oauth: entry.expand_oauth(&self.env, secrets).map_err(|e| Refusal::Config(e.to_string()))?,
                };
                // A malformed URL or header is the configuration's mistake (exit 2).
                spec.check().map_err(|e| {
                    Refusal::Config(format!("{}: server `{}`: {e}", entry.source.display(), entry.name))
                })?;
                let launch = Ok(Launch::Remote(spec));
                let target =
                    Target { entry: entry.clone(), fingerprint: cache_key.clone(), cache_key, launch, context };
                return Ok((target, Instant::now()));
            }
            _ => unreachable!("an entry expands to its own kind of transport"),
        };
        let cwd = stdio.cwd.clone().or_else(|| self.env.get("HOME").map(PathBuf::from));
        // The child's environment: the daemon's, plus the entry's `env`. The command
        // resolves through that environment's PATH (design: Configuration).
        let mut env: BTreeMap<OsString, OsString> =
            self.env.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))).collect();
        env.extend(stdio.env.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))));
        let path_var = env.get(OsStr::new("PATH")).and_then(|p| p.to_str()).map(str::to_owned);
        // Messages name the command as written: an expanded value may be a secret.
        let mut at = Instant::now();
        let (fingerprint, launch) = match self.program(&stdio.command, path_var.as_deref(), cwd.as_deref()) {
            Ok((program, exe, looked_up)) => {
                at = looked_up;
                let sandbox = self.checked_sandbox(entry, secrets)?.map(|s| crate::sandbox::policy(&s, &program, &env));
                let fingerprint = entry.fingerprint(exe.as_ref());
                let spec = StdioSpec {
                    identity: identity(fingerprint.clone()),
                    supervised: options.supervised,
                    buffer_bytes: options.buffer_bytes,
                    orphan_timeout: options.orphan_timeout,
                    start_timeout: options.start_timeout,
                    command: written,
                    program,
                    args: stdio.args.iter().map(OsString::from).collect(),
                    env,
                    cwd,
                    max_message_bytes,
                    sandbox,
                };
                (fingerprint, Ok(Launch::Stdio(spec)))
            }
            Err(e) if written == stdio.command => (cache_key.clone(), Err(e.to_string())),
            Err(_) => (
                cache_key.clone(),
                Err(format!("command `{written}` (after ${{VAR}} expansion) is not an executable file or not on PATH")),
            ),
        };
        Ok((Target { entry: entry.clone(), cache_key, fingerprint, launch, context }, at))
    }

    /// The pool key of `entry` for `caller`; a scope that cannot be resolved runs the
    /// call under a fresh `call` key and says once per server and fix in the log what
    /// would fix it.
    pub fn pool_key(&self, entry: &ServerEntry, caller: &Caller) -> PoolKey {
        match scope::resolve(entry.options.scope, caller) {
            scope::Resolved::Key(key) => key,
            scope::Resolved::Degraded { key, fix } => {
                if lock(&self.memo).degraded.insert((entry.name.clone(), fix)) {
                    tracing::warn!(
                        server = %entry.name,
                        scope = entry.options.scope.as_str(),
                        "the scope cannot be resolved for this caller: each call gets its own instance; to fix it, {fix}"
                    );
                }
                key
            }
        }
    }

    /// `entry`'s `sandbox` expanded, when this machine can apply it; `None` without one.
    ///
    /// Errors ([`Refusal::Config`], naming the file and the server; the server never
    /// runs unconfined): the kernel cannot enforce a sandbox (saying why), a path of its
    /// `read` or `write` does not exist, or one cannot be expanded.
    pub fn checked_sandbox(
        &self,
        entry: &ServerEntry,
        secrets: &dyn Secrets,
    ) -> Result<Option<ExpandedSandbox>, Refusal> {
        let Some(sandbox) = entry.expand_sandbox(&self.env, secrets).map_err(|e| Refusal::Config(e.to_string()))?
        else {
            return Ok(None);
        };
        let refused = |why: String| {
            Refusal::Config(format!("{}: server `{}`: {why}; it does not run", entry.source.display(), entry.name))
        };
        if let mcpx_platform::confine::Support::Unavailable(why) = mcpx_platform::confine::support() {
            return Err(refused(format!(
                "its sandbox cannot be enforced on this machine ({why}) and a server never runs unconfined \
                 (remove `sandbox` from its mcpx block to run it with all of the user's rights)"
            )));
        }
        match crate::sandbox::missing(&sandbox) {
            Some(why) => Err(refused(why)),
            None => Ok(Some(sandbox)),
        }
    }

    /// Finds the program for `command` (like execvp) and its identity, reusing a
    /// lookup younger than [`RESOLVE_TTL`]; with when it was looked up.
    fn program(
        &self,
        command: &str,
        path_var: Option<&str>,
        cwd: Option<&Path>,
    ) -> Result<(PathBuf, Option<ExeIdentity>, Instant), CommandNotFound> {
        let query = (command.to_owned(), path_var.map(str::to_owned), cwd.map(Path::to_path_buf));
        if let Some((at, program, identity)) = lock(&self.memo).programs.get(&query) {
            if at.elapsed() < RESOLVE_TTL {
                return Ok((program.clone(), identity.clone(), *at));
            }
        }
        let program = resolve_command(command, path_var, cwd)?;
        let identity = exe_identity(&program).ok();
        let at = Instant::now();
        lock(&self.memo).programs.insert(query, (at, program.clone(), identity.clone()));
        Ok((program, identity, at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stdio(name: &str, command: &str) -> ServerEntry {
        let transport =
            TransportSpec::Stdio { command: command.into(), args: vec![], env: Default::default(), cwd: None };
        crate::testing::entry(name, transport)
    }

    /// The same entry gets the same target again; an edited entry, or one whose
    /// expansion reads the secret store (which may change at any time), a fresh one.
    #[test]
    fn a_target_is_reused_only_for_the_same_entry_without_secrets() {
        let state = tempfile::tempdir().unwrap();
        let dir = Dir::open_private(&state.path().join("state"), true).unwrap();
        let env: HashMap<String, String> = [("PATH".to_owned(), "/usr/bin:/bin".to_owned())].into();
        let targets = Targets::new(env, dir);
        let sh = stdio("a", "sh");
        let first = targets.target(&sh).unwrap();
        assert!(Arc::ptr_eq(&first, &targets.target(&sh).unwrap()));
        let edited = stdio("a", "true");
        let other = targets.target(&edited).unwrap();
        assert!(!Arc::ptr_eq(&first, &other));
        assert_ne!(first.fingerprint, other.fingerprint);

        let mut secret = stdio("s", "sh");
        let TransportSpec::Stdio { env, .. } = &mut secret.transport else { unreachable!() };
        env.insert("TOKEN".into(), "${secret:token}".into());
        let unset = targets.target(&secret).unwrap_err();
        assert!(matches!(&unset, Refusal::Config(m) if m.contains("token")), "{unset}");
        assert!(!lock(&targets.memo).targets.contains_key("s"), "an expansion that read a secret is not kept");
    }
}
