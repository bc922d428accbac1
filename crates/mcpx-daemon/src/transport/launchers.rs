//! The daemon's launchers: one per way of owning a server, behind one [`Launcher`]
//! that hands each launch description to the one for its kind.

use std::path::PathBuf;
use std::sync::Arc;

use super::http::RemoteLauncher;
use super::launch::{BoxFuture, Launch, Launcher};
use super::link::{Link, TransportError};
use super::stdio::DirectLauncher;
use super::supervised::SupervisedLauncher;
use crate::paths::Dirs;

/// The ways to start an instance: under a supervisor (the default), as the daemon's
/// own child (`supervised: false`), or over HTTP (a `url` entry). As a [`Launcher`]
/// it picks the one for each launch, so nothing above the transports branches on
/// the kind.
#[derive(Clone)]
pub struct Launchers {
    /// Stdio servers with `supervised: false`: the daemon's own children.
    pub direct: Arc<dyn Launcher>,
    /// Stdio servers under `mcpx supervise`.
    pub supervised: Arc<dyn Launcher>,
    /// Remote servers over HTTP.
    pub remote: Arc<dyn Launcher>,
}

impl std::fmt::Debug for Launchers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launchers").finish_non_exhaustive()
    }
}

impl Launchers {
    /// The daemon's launchers: supervisors run `exe supervise` and keep their files
    /// in `dirs.sup_dir()`, logging to `dirs.supervisor_log()`; remote sessions are
    /// kept in `dirs.remote_sessions()`.
    ///
    /// Errors: the HTTP client cannot be built (its TLS backend cannot load the
    /// system's root certificates).
    pub fn new(exe: PathBuf, dirs: &Dirs) -> Result<Launchers, TransportError> {
        Ok(Launchers {
            direct: Arc::new(DirectLauncher),
            supervised: Arc::new(SupervisedLauncher { exe, sup_dir: dirs.sup_dir(), log: dirs.supervisor_log() }),
            remote: Arc::new(RemoteLauncher::new(dirs.remote_sessions())?),
        })
    }

    /// One launcher for every kind (a test's channel-backed launcher, say).
    pub fn all(launcher: Arc<dyn Launcher>) -> Launchers {
        Launchers { direct: launcher.clone(), supervised: launcher.clone(), remote: launcher }
    }

    fn pick(&self, launch: &Launch) -> &Arc<dyn Launcher> {
        match launch {
            Launch::Stdio(spec) if spec.supervised => &self.supervised,
            Launch::Stdio(_) => &self.direct,
            Launch::Remote(_) => &self.remote,
        }
    }
}

impl Launcher for Launchers {
    fn launch(&self, launch: Launch) -> BoxFuture<'static, Result<Link, TransportError>> {
        self.pick(&launch).launch(launch)
    }
}
