//! Pool keys (design: "Pools"): which instance of a server a caller gets, from the
//! server's `scope` and what the caller told the daemon about itself.
//!
//! | scope | key | from |
//! |---|---|---|
//! | `global` | `global` | — |
//! | `repo` | `repo:<git common dir>` | the caller's working directory, reading `.git` |
//! | `worktree` | `worktree:<git top level>` | the same |
//! | `cwd` | `cwd:<path>` | the caller's working directory |
//! | `session` | `session:<id>` | `--session` / `MCPX_SESSION_ID` |
//! | `parent-session` | `session:<id>` | `MCPX_PARENT_SESSION_ID`, else the session id |
//! | `pid` | `pid:<n>` | the CLI's parent process |
//! | `call` | `call:<n>` | a fresh key per call |
//!
//! Git scopes read `.git` files directly; git is never run.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::api::Caller;
use crate::config::Scope;

/// The pool key of an instance: beside the server's fingerprint, which instance a
/// caller gets. It knows the kind of scope it came from and its owner (a directory,
/// a session, a process, a call).
///
/// Its text (`global`, `repo:<dir>`, `session:<id>`, `pid:<n>`, `call:<n>`, see the
/// module's table) is what `status` shows, what supervisor records and kept remote
/// sessions store, and what `mcpx restart --key` names; [`PoolKey::parse`] reads it
/// back, and `parse(&key.to_string()) == key` for every key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PoolKey {
    /// `global`: one instance for every caller of the user.
    Global,
    /// `repo:<dir>`: the repository whose common git directory is `dir` (as displayed).
    Repo(String),
    /// `worktree:<dir>`: the git worktree whose top level is `dir` (as displayed).
    Worktree(String),
    /// `cwd:<dir>`: the caller's working directory `dir` (as displayed).
    Cwd(String),
    /// `session:<id>`: a caller's session, or its parent session.
    Session(String),
    /// `pid:<n>`: the caller process `n`; its instance ends when that process exits.
    Pid(u32),
    /// `call:<n>`: the `n`th call of this daemon with a `call` scope (or a scope that
    /// could not be resolved); its instance serves that one call.
    Call(u64),
    /// Text this build does not make (a record of another version, or a key typed by
    /// hand), kept as it is.
    Other(String),
}

impl PoolKey {
    /// Reads a key's text; text of no known form is [`PoolKey::Other`].
    pub fn parse(text: &str) -> PoolKey {
        // Numbers only in the form this build writes them, so the text round-trips.
        let number = |n: &str| n.parse::<u64>().ok().filter(|v| v.to_string() == n);
        let parsed = match text.split_once(':') {
            None if text == "global" => Some(PoolKey::Global),
            None => None,
            Some(("repo", dir)) => Some(PoolKey::Repo(dir.to_owned())),
            Some(("worktree", dir)) => Some(PoolKey::Worktree(dir.to_owned())),
            Some(("cwd", dir)) => Some(PoolKey::Cwd(dir.to_owned())),
            Some(("session", id)) => Some(PoolKey::Session(id.to_owned())),
            Some(("pid", n)) => number(n).and_then(|n| u32::try_from(n).ok()).map(PoolKey::Pid),
            Some(("call", n)) => number(n).map(PoolKey::Call),
            Some(_) => None,
        };
        parsed.unwrap_or_else(|| PoolKey::Other(text.to_owned()))
    }

    /// Whether the key serves one call only: its instance stops after the call, and
    /// its slot is forgotten.
    pub fn is_call(&self) -> bool {
        matches!(self, PoolKey::Call(_))
    }

    /// Whether it is the `global` key, the one `min` keeps warm.
    pub fn is_global(&self) -> bool {
        matches!(self, PoolKey::Global)
    }

    /// The process whose exit ends the key's instance (a `pid` key).
    pub fn owner_pid(&self) -> Option<u32> {
        match self {
            PoolKey::Pid(pid) => Some(*pid),
            _ => None,
        }
    }
}

impl fmt::Display for PoolKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolKey::Global => f.write_str("global"),
            PoolKey::Repo(dir) => write!(f, "repo:{dir}"),
            PoolKey::Worktree(dir) => write!(f, "worktree:{dir}"),
            PoolKey::Cwd(dir) => write!(f, "cwd:{dir}"),
            PoolKey::Session(id) => write!(f, "session:{id}"),
            PoolKey::Pid(pid) => write!(f, "pid:{pid}"),
            PoolKey::Call(n) => write!(f, "call:{n}"),
            PoolKey::Other(text) => f.write_str(text),
        }
    }
}

/// A resolved key, or the reason the scope could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    /// The pool key.
    Key(PoolKey),
    /// The scope needs something the caller did not give; the call runs under a
    /// fresh `call:<n>` key instead (over-isolating only costs a start).
    Degraded {
        /// The `call:<n>` key used instead.
        key: PoolKey,
        /// What would fix it, e.g. "set MCPX_SESSION_ID".
        fix: &'static str,
    },
}

impl Resolved {
    /// The key to use either way.
    pub fn key(&self) -> &PoolKey {
        match self {
            Resolved::Key(k) | Resolved::Degraded { key: k, .. } => k,
        }
    }
}

/// What gives a client of MCP 2026-07-28 over HTTP (which has no session: Basic,
/// "Statelessness") an instance that lasts across its requests.
const SESSIONLESS_FIX: &str = "connect the client through `mcpx serve` (stdio), which names a session, or use a 2025-11-25 session (`initialize`), or give the server `\"mcpx\": { \"scope\": \"global\" }`: a 2026-07-28 request over HTTP has no session";

/// Numbers `call:<n>` keys.
static CALLS: AtomicU64 = AtomicU64::new(1);

/// A fresh `call:<n>` key.
pub fn call_key() -> PoolKey {
    PoolKey::Call(CALLS.fetch_add(1, Ordering::Relaxed))
}

/// Resolves `scope` for `caller`.
pub fn resolve(scope: Scope, caller: &Caller) -> Resolved {
    let degraded = |fix| Resolved::Degraded { key: call_key(), fix };
    match scope {
        Scope::Global => Resolved::Key(PoolKey::Global),
        Scope::Call => Resolved::Key(call_key()),
        Scope::Cwd => match &caller.cwd {
            Some(cwd) => Resolved::Key(PoolKey::Cwd(cwd.display().to_string())),
            None => degraded("call from a working directory"),
        },
        Scope::Repo | Scope::Worktree => {
            let Some(cwd) = &caller.cwd else { return degraded("call from a working directory") };
            match git_dirs(cwd) {
                Some(dirs) if scope == Scope::Repo => {
                    Resolved::Key(PoolKey::Repo(dirs.common_dir.display().to_string()))
                }
                Some(dirs) => Resolved::Key(PoolKey::Worktree(dirs.top_level.display().to_string())),
                None => degraded("call from inside a git repository"),
            }
        }
        Scope::Session => match caller.session.as_deref().filter(|s| !s.is_empty()) {
            Some(id) => Resolved::Key(PoolKey::Session(id.to_owned())),
            None if caller.sessionless => degraded(SESSIONLESS_FIX),
            None => degraded("set MCPX_SESSION_ID (or pass --session)"),
        },
        Scope::ParentSession => {
            let id = caller.parent_session.as_deref().filter(|s| !s.is_empty());
            match id.or(caller.session.as_deref().filter(|s| !s.is_empty())) {
                Some(id) => Resolved::Key(PoolKey::Session(id.to_owned())),
                None if caller.sessionless => degraded(SESSIONLESS_FIX),
                None => degraded("set MCPX_PARENT_SESSION_ID or MCPX_SESSION_ID"),
            }
        }
        Scope::Pid => match caller.ppid {
            Some(pid) if pid > 1 => Resolved::Key(PoolKey::Pid(pid)),
            _ => degraded("call from a process whose parent is not init"),
        },
    }
}

/// Where a working directory's git repository lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitDirs {
    /// The worktree's top level: the directory holding `.git`.
    pub top_level: PathBuf,
    /// The repository's common git directory, shared by all its worktrees.
    pub common_dir: PathBuf,
}

/// Finds the git top level and common dir for `cwd` by reading `.git` (a directory,
/// or a file `gitdir: <path>` in a linked worktree, whose git dir names the common
/// dir in its `commondir` file), as git-worktree(1) lays them out.
pub fn git_dirs(cwd: &Path) -> Option<GitDirs> {
    let mut dir = Some(cwd);
    while let Some(d) = dir {
        let dot_git = d.join(".git");
        if let Ok(meta) = std::fs::metadata(&dot_git) {
            let top_level = canonical(d);
            if meta.is_dir() {
                return Some(GitDirs { common_dir: canonical(&dot_git), top_level });
            }
            let text = std::fs::read_to_string(&dot_git).ok()?;
            let git_dir = text.lines().find_map(|l| l.strip_prefix("gitdir:")).map(str::trim)?;
            let git_dir = if Path::new(git_dir).is_absolute() { PathBuf::from(git_dir) } else { d.join(git_dir) };
            let common_dir = match std::fs::read_to_string(git_dir.join("commondir")) {
                Ok(c) => {
                    let c = c.trim();
                    if Path::new(c).is_absolute() { PathBuf::from(c) } else { git_dir.join(c) }
                }
                Err(_) => git_dir.clone(),
            };
            return Some(GitDirs { top_level, common_dir: canonical(&common_dir) });
        }
        dir = d.parent();
    }
    None
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(cwd: Option<&Path>) -> Caller {
        Caller { cwd: cwd.map(Path::to_path_buf), ..Caller::default() }
    }

    #[test]
    fn git_dirs_of_a_repository_and_a_linked_worktree() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        std::fs::create_dir_all(repo.join(".git/worktrees/wt")).unwrap();
        std::fs::create_dir_all(repo.join("src/deep")).unwrap();
        let wt = tmp.path().join("wt");
        std::fs::create_dir_all(wt.join("sub")).unwrap();
        std::fs::write(wt.join(".git"), format!("gitdir: {}\n", repo.join(".git/worktrees/wt").display())).unwrap();
        std::fs::write(repo.join(".git/worktrees/wt/commondir"), "../..\n").unwrap();

        let main = git_dirs(&repo.join("src/deep")).unwrap();
        assert_eq!(main.top_level, canonical(&repo));
        assert_eq!(main.common_dir, canonical(&repo.join(".git")));
        let linked = git_dirs(&wt.join("sub")).unwrap();
        assert_eq!(linked.top_level, canonical(&wt));
        assert_eq!(linked.common_dir, main.common_dir, "worktrees of one repository share the common dir");

        let c = caller(Some(&wt.join("sub")));
        assert_eq!(resolve(Scope::Repo, &c).key().to_string(), format!("repo:{}", main.common_dir.display()));
        assert_eq!(resolve(Scope::Worktree, &c).key().to_string(), format!("worktree:{}", canonical(&wt).display()));
        assert!(matches!(resolve(Scope::Worktree, &caller(Some(tmp.path()))), Resolved::Degraded { .. }));
    }

    #[test]
    fn sessions_pids_and_degrading() {
        let mut c = caller(None);
        assert_eq!(resolve(Scope::Global, &c).key().to_string(), "global");
        assert!(
            matches!(resolve(Scope::Session, &c), Resolved::Degraded { fix, .. } if fix.contains("MCPX_SESSION_ID"))
        );
        c.sessionless = true;
        for scope in [Scope::Session, Scope::ParentSession] {
            let resolved = resolve(scope, &c);
            assert!(matches!(&resolved, Resolved::Degraded { fix, .. } if fix.contains("mcpx serve")), "{resolved:?}");
            assert!(resolved.key().is_call());
        }
        c.session = Some("a".into());
        assert_eq!(resolve(Scope::Session, &c).key().to_string(), "session:a");
        assert_eq!(resolve(Scope::ParentSession, &c).key().to_string(), "session:a");
        c.parent_session = Some("p".into());
        assert_eq!(resolve(Scope::ParentSession, &c).key().to_string(), "session:p");
        c.ppid = Some(4242);
        assert_eq!(resolve(Scope::Pid, &c).key().to_string(), "pid:4242");
        assert_eq!(resolve(Scope::Pid, &c).key().owner_pid(), Some(4242));
        let one = resolve(Scope::Call, &c);
        assert!(one.key().is_call() && one.key().to_string().starts_with("call:"));
        assert_ne!(one, resolve(Scope::Call, &c));
    }

    #[test]
    fn key_text_round_trips_and_unknown_text_is_kept() {
        let keys = [
            PoolKey::Global,
            PoolKey::Repo("/src/a/.git".into()),
            PoolKey::Worktree("/src/a".into()),
            PoolKey::Cwd("/tmp/with:colon".into()),
            PoolKey::Session("s-1".into()),
            PoolKey::Pid(4242),
            PoolKey::Call(7),
        ];
        for key in keys {
            assert_eq!(PoolKey::parse(&key.to_string()), key, "{key}");
        }
        for text in ["", "globalx", "pid:x", "pid:007", "pid:99999999999", "call:-1", "team:a"] {
            let key = PoolKey::parse(text);
            assert_eq!(key, PoolKey::Other(text.to_owned()));
            assert_eq!(key.to_string(), text);
        }
        assert!(PoolKey::parse("call:3").is_call());
        assert!(PoolKey::parse("global").is_global());
        assert_eq!(PoolKey::parse("pid:12").owner_pid(), Some(12));
        assert_eq!(PoolKey::parse("session:12").owner_pid(), None);
    }
}
