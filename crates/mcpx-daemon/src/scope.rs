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

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::api::Caller;
use crate::config::Scope;

/// A resolved key, or the reason the scope could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    /// The pool key.
    Key(String),
    /// The scope needs something the caller did not give; the call runs under a
    /// fresh `call:<n>` key instead (over-isolating only costs a start).
    Degraded {
        /// The `call:<n>` key used instead.
        key: String,
        /// What would fix it, e.g. "set MCPX_SESSION_ID".
        fix: &'static str,
    },
}

impl Resolved {
    /// The key to use either way.
    pub fn key(&self) -> &str {
        match self {
            Resolved::Key(k) | Resolved::Degraded { key: k, .. } => k,
        }
    }
}

/// Numbers `call:<n>` keys.
static CALLS: AtomicU64 = AtomicU64::new(1);

/// A fresh `call:<n>` key.
pub fn call_key() -> String {
    format!("call:{}", CALLS.fetch_add(1, Ordering::Relaxed))
}

/// Resolves `scope` for `caller`.
pub fn resolve(scope: Scope, caller: &Caller) -> Resolved {
    let degraded = |fix| Resolved::Degraded { key: call_key(), fix };
    match scope {
        Scope::Global => Resolved::Key("global".into()),
        Scope::Call => Resolved::Key(call_key()),
        Scope::Cwd => match &caller.cwd {
            Some(cwd) => Resolved::Key(format!("cwd:{}", cwd.display())),
            None => degraded("call from a working directory"),
        },
        Scope::Repo | Scope::Worktree => {
            let Some(cwd) = &caller.cwd else { return degraded("call from a working directory") };
            match git_dirs(cwd) {
                Some(dirs) if scope == Scope::Repo => Resolved::Key(format!("repo:{}", dirs.common_dir.display())),
                Some(dirs) => Resolved::Key(format!("worktree:{}", dirs.top_level.display())),
                None => degraded("call from inside a git repository"),
            }
        }
        Scope::Session => match caller.session.as_deref().filter(|s| !s.is_empty()) {
            Some(id) => Resolved::Key(format!("session:{id}")),
            None => degraded("set MCPX_SESSION_ID (or pass --session)"),
        },
        Scope::ParentSession => {
            let id = caller.parent_session.as_deref().filter(|s| !s.is_empty());
            match id.or(caller.session.as_deref().filter(|s| !s.is_empty())) {
                Some(id) => Resolved::Key(format!("session:{id}")),
                None => degraded("set MCPX_PARENT_SESSION_ID or MCPX_SESSION_ID"),
            }
        }
        Scope::Pid => match caller.ppid {
            Some(pid) if pid > 1 => Resolved::Key(format!("pid:{pid}")),
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
        assert_eq!(resolve(Scope::Repo, &c), Resolved::Key(format!("repo:{}", main.common_dir.display())));
        assert_eq!(resolve(Scope::Worktree, &c), Resolved::Key(format!("worktree:{}", canonical(&wt).display())));
        assert!(matches!(resolve(Scope::Worktree, &caller(Some(tmp.path()))), Resolved::Degraded { .. }));
    }

    #[test]
    fn sessions_pids_and_degrading() {
        let mut c = caller(None);
        assert_eq!(resolve(Scope::Global, &c).key(), "global");
        assert!(
            matches!(resolve(Scope::Session, &c), Resolved::Degraded { fix, .. } if fix.contains("MCPX_SESSION_ID"))
        );
        c.session = Some("a".into());
        assert_eq!(resolve(Scope::Session, &c).key(), "session:a");
        assert_eq!(resolve(Scope::ParentSession, &c).key(), "session:a");
        c.parent_session = Some("p".into());
        assert_eq!(resolve(Scope::ParentSession, &c).key(), "session:p");
        c.ppid = Some(4242);
        assert_eq!(resolve(Scope::Pid, &c).key(), "pid:4242");
        let one = resolve(Scope::Call, &c);
        assert!(one.key().starts_with("call:"));
        assert_ne!(one, resolve(Scope::Call, &c));
    }
}
