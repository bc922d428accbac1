//! The daemon's launchers: one per way of owning a server, behind one [`Launcher`]
//! that hands each launch description to the one for its kind.

use std::path::PathBuf;
use std::sync::Arc;

use super::http::RemoteLauncher;
use super::launch::{BoxFuture, Launch, Launcher};
use super::link::{Link, TransportError};
use super::stdio::DirectLauncher;
use super::supervised::SupervisedLauncher;
use crate::paths::{OpenDirs, REMOTE};

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
    /// in `<runtime>/sup/`, logging to `dirs.supervisor_log()`; remote sessions are
    /// kept in `<state>/remote/` (made now, mode 0700, when missing).
    ///
    /// Errors: the HTTP client cannot be built (its TLS backend cannot load the
    /// system's root certificates), or `<state>/remote/` cannot be made or is refused.
    pub fn new(exe: PathBuf, dirs: &OpenDirs) -> Result<Launchers, TransportError> {
        let sessions = dirs
            .state
            .subdir(REMOTE, true)
            .map_err(|e| TransportError::Setup(format!("{}: {e}", dirs.paths.remote_sessions().display())))?;
        Ok(Launchers {
            direct: Arc::new(DirectLauncher),
            supervised: Arc::new(SupervisedLauncher {
                exe,
                runtime: dirs.runtime.clone(),
                log: dirs.paths.supervisor_log(),
            }),
            remote: Arc::new(RemoteLauncher::new(sessions, dirs.state.clone())?),
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use mcpx_proto::attach::Identity;

    use super::*;
    use crate::config::RemoteKind;
    use crate::transport::launch::{RemoteEndpoint, StdioSpec};

    /// A launcher that starts nothing and says who it is.
    struct Named(&'static str);

    impl Launcher for Named {
        fn launch(&self, launch: Launch) -> BoxFuture<'static, Result<Link, TransportError>> {
            let error = TransportError::Start { command: launch.written().to_owned(), message: self.0.to_owned() };
            Box::pin(async move { Err(error) })
        }
    }

    fn identity() -> Identity {
        Identity {
            server: "s".into(),
            fingerprint: "f".into(),
            cache_key: "f".into(),
            key: "global".into(),
            sharing: "shared".into(),
        }
    }

    fn stdio(supervised: bool) -> Launch {
        Launch::Stdio(StdioSpec {
            identity: identity(),
            supervised,
            buffer_bytes: 0,
            orphan_timeout: None,
            start_timeout: None,
            command: "srv".into(),
            program: "/bin/srv".into(),
            args: Vec::new(),
            env: BTreeMap::new(),
            cwd: None,
            max_message_bytes: 1 << 20,
            sandbox: None,
        })
    }

    async fn who(launchers: &Launchers, launch: Launch) -> String {
        match launchers.launch(launch).await {
            Err(TransportError::Start { message, .. }) => message,
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn each_launch_goes_to_the_launcher_of_its_kind() {
        let launchers = Launchers {
            direct: Arc::new(Named("direct")),
            supervised: Arc::new(Named("supervised")),
            remote: Arc::new(Named("remote")),
        };
        assert_eq!(who(&launchers, stdio(true)).await, "supervised");
        assert_eq!(who(&launchers, stdio(false)).await, "direct");
        let remote = Launch::Remote(RemoteEndpoint {
            identity: identity(),
            url: "https://h/mcp".into(),
            written_url: "https://h/mcp".into(),
            headers: BTreeMap::new(),
            kind: RemoteKind::Http,
            max_message_bytes: 1 << 20,
            oauth: None,
        });
        assert_eq!(who(&launchers, remote.clone()).await, "remote");
        assert_eq!(who(&Launchers::all(Arc::new(Named("one"))), remote).await, "one");
    }
}
