//! The control API client: HTTP/1.1 over the daemon's unix socket, and starting a
//! daemon when none answers. Used by the CLI (and by `mcpx serve`).
//!
//! Every connection is checked before a byte is sent on it: the socket file must be
//! the user's, and so must the process that accepted the connection (its uid from
//! `SO_PEERCRED` or `getpeereid`). Another local user could otherwise pose as the
//! daemon and receive the caller's arguments.

use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
pub use hyper::Method;
/// What [`Client::request`] answers, its body streamed.
pub type Answer = hyper::Response<hyper::body::Incoming>;
/// A connection [`Client::upgrade`] switched to another protocol: bytes both ways.
pub type Upgraded = TokioIo<hyper::upgrade::Upgraded>;
use hyper::Request;
use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;

use crate::paths::Dirs;
use crate::{ApiError, ErrorBody, ErrorKind};
use mcpx_platform::process::{Detach, SpawnSpec};

/// How long a CLI waits for a daemon it started to listen.
pub const START_DEADLINE: Duration = Duration::from_secs(15);

/// The variable naming the descriptor of the start pipe a CLI hands the daemon it
/// starts: the daemon writes why it failed to start there, or closes it without a
/// word once it listens (or when another daemon won the start race).
pub const START_FD: &str = "MCPX_START_FD";

/// A connection target: the daemon's socket, and optionally how to start a daemon
/// when none is listening.
#[derive(Debug, Clone)]
pub struct Client {
    socket: PathBuf,
    /// With it, a request that provably never reached a daemon starts one and is
    /// sent again (once).
    starter: Option<(Dirs, PathBuf)>,
}

/// A request that failed before an answer came back.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Nothing listens on the socket (missing, or connection refused): the request
    /// provably never reached a daemon, so it is safe to retry.
    #[error("no daemon is listening on {0}")]
    NotRunning(PathBuf),
    /// The connection broke after the request may have reached the daemon.
    #[error("the daemon connection failed: {0}")]
    Broken(String),
    /// The socket file, or the process serving it, is not the user's: nothing was
    /// sent, and nothing must be retried or started in its place. The message says
    /// whose it is and what to do.
    #[error("{0}")]
    Foreign(String),
}

impl ClientError {
    /// The API error (kind `daemon`, exit 3) for a request that failed this way;
    /// `broken` words a broken connection.
    fn into_api(self, broken: impl FnOnce(String) -> String) -> ApiError {
        match self {
            ClientError::Foreign(message) => ApiError::new(ErrorKind::Daemon, message),
            ClientError::NotRunning(_) => ApiError::new(ErrorKind::Daemon, self.to_string()),
            ClientError::Broken(e) => ApiError::new(ErrorKind::Daemon, broken(e)),
        }
    }
}

impl Client {
    /// A client for the daemon listening on `socket`.
    pub fn new(socket: PathBuf) -> Client {
        Client { socket, starter: None }
    }

    /// A client that starts a daemon (as [`connect_or_start`] does) on its first
    /// request that finds none listening, and sends that request again. Nothing is
    /// checked before the first request: a command that finds the daemon running
    /// (the usual case) makes one round trip, not two.
    pub fn starting(dirs: &Dirs, exe: &Path) -> Client {
        Client { socket: dirs.socket(), starter: Some((dirs.clone(), exe.to_owned())) }
    }

    /// Sends one request and returns the HTTP status and body.
    pub async fn send(&self, method: Method, path: &str, body: Option<Vec<u8>>) -> Result<(u16, Bytes), ClientError> {
        let response = self.request(method, path, &[], body.unwrap_or_default()).await?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await.map_err(|e| ClientError::Broken(e.to_string()))?.to_bytes();
        Ok((status, body))
    }

    /// Sends a JSON request and returns the JSON body of a success, or the API error.
    /// A request that provably never reached a daemon (nothing listening) starts one
    /// and is sent again, when the client was made by [`connect_or_start`]; a broken
    /// connection, which may have reached one, becomes a `daemon` error (exit 3).
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&impl serde::Serialize>,
    ) -> Result<Bytes, ApiError> {
        let body = body
            .map(|b| serde_json::to_vec(b))
            .transpose()
            .map_err(|e| ApiError::new(ErrorKind::Usage, e.to_string()))?;
        let mut sent = self.send(method.clone(), path, body.clone()).await;
        if let (Err(ClientError::NotRunning(_)), Some((dirs, exe))) = (&sent, &self.starter) {
            connect_or_start(dirs, exe).await?;
            sent = self.send(method, path, body).await;
        }
        let (status, bytes) = sent.map_err(|e| {
            e.into_api(|e| {
                format!(
                    "the daemon connection failed: {e}; the daemon may have died during the request (see `mcpx logs`)"
                )
            })
        })?;
        if (200..300).contains(&status) {
            return Ok(bytes);
        }
        match serde_json::from_slice::<ErrorBody>(&bytes) {
            Ok(e) => Err(e.error),
            Err(_) => Err(ApiError::new(
                ErrorKind::Daemon,
                format!("the daemon answered HTTP {status}: {}", String::from_utf8_lossy(&bytes).trim()),
            )),
        }
    }

    /// `POST`s `body` to `path` ([`Client::call`]) and reads the answer as an `A`.
    ///
    /// Errors: those of [`Client::call`]; an answer that is not an `A` (`daemon`).
    pub async fn post<A: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        body: &impl serde::Serialize,
    ) -> Result<A, ApiError> {
        let bytes = self.call(Method::POST, path, Some(body)).await?;
        serde_json::from_slice(&bytes).map_err(|e| {
            ApiError::new(ErrorKind::Daemon, format!("the daemon answered {path} with unexpected JSON: {e}"))
        })
    }

    /// Sends a JSON request whose answer is a stream of JSON lines, handing each line
    /// to `on_line` as it arrives. Retries like [`Client::call`] when nothing listens.
    ///
    /// Errors: the daemon answered an error status (its API error), or the connection
    /// broke (a `daemon` error, exit 3).
    pub async fn call_lines(
        &self,
        path: &str,
        body: &impl serde::Serialize,
        mut on_line: impl FnMut(&[u8]),
    ) -> Result<(), ApiError> {
        let body = serde_json::to_vec(body).map_err(|e| ApiError::new(ErrorKind::Usage, e.to_string()))?;
        let broken = |e: String| {
            format!("the daemon connection failed: {e}; the daemon may have died during the call (see `mcpx logs`)")
        };
        let mut response = match self.open(path, body.clone()).await {
            Err(ClientError::NotRunning(_)) if self.starter.is_some() => {
                if let Some((dirs, exe)) = &self.starter {
                    connect_or_start(dirs, exe).await?;
                }
                self.open(path, body).await
            }
            other => other,
        }
        .map_err(|e| e.into_api(broken))?;
        let status = response.status().as_u16();
        let mut pending = Vec::new();
        while let Some(frame) = response.body_mut().frame().await {
            let frame = frame.map_err(|e| ApiError::new(ErrorKind::Daemon, broken(e.to_string())))?;
            let Ok(data) = frame.into_data() else { continue };
            pending.extend_from_slice(&data);
            while let Some(i) = pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = pending.drain(..=i).collect();
                if (200..300).contains(&status) {
                    on_line(&line[..line.len() - 1]);
                } else {
                    pending.splice(0..0, line);
                    break;
                }
            }
        }
        if !(200..300).contains(&status) {
            return Err(match serde_json::from_slice::<ErrorBody>(&pending) {
                Ok(e) => e.error,
                Err(_) => ApiError::new(
                    ErrorKind::Daemon,
                    format!("the daemon answered HTTP {status}: {}", String::from_utf8_lossy(&pending).trim()),
                ),
            });
        }
        if !pending.is_empty() {
            on_line(&pending);
        }
        Ok(())
    }

    async fn open(&self, path: &str, body: Vec<u8>) -> Result<hyper::Response<hyper::body::Incoming>, ClientError> {
        self.request(Method::POST, path, &[], body).await
    }

    /// Sends one request with extra headers and returns the response as it starts
    /// (the body still streaming), for callers that speak another protocol over the
    /// socket (`mcpx serve` speaks MCP to `/mcp`).
    ///
    /// Errors: [`ClientError::NotRunning`] when nothing listens (safe to retry),
    /// [`ClientError::Foreign`] when the socket or its server is not the user's
    /// (nothing was sent), [`ClientError::Broken`] otherwise.
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> Result<hyper::Response<hyper::body::Incoming>, ClientError> {
        let stream = self.connect().await?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| ClientError::Broken(e.to_string()))?;
        tokio::spawn(conn);
        let mut builder = Request::builder()
            .method(method)
            .uri(format!("http://localhost{path}"))
            .header("host", "localhost")
            .header("content-type", "application/json");
        for (k, v) in headers {
            builder = builder.header(*k, *v);
        }
        let request = builder.body(Full::new(Bytes::from(body))).map_err(|e| ClientError::Broken(e.to_string()))?;
        sender.send_request(request).await.map_err(|e| ClientError::Broken(e.to_string()))
    }

    /// Opens a connection upgraded to `protocol` (HTTP/1.1 `Upgrade`, RFC 9110 section
    /// 7.8) with a `GET` of `path` carrying `headers`, after the same checks as
    /// [`Client::request`]: the raw stream on `101 Switching Protocols`, `None` when
    /// the daemon answers anything else (one from before the upgrade existed says 404).
    ///
    /// Errors: as [`Client::request`].
    pub async fn upgrade(
        &self,
        path: &str,
        protocol: &str,
        headers: &[(&str, &str)],
    ) -> Result<Option<Upgraded>, ClientError> {
        let stream = self.connect().await?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| ClientError::Broken(e.to_string()))?;
        tokio::spawn(conn.with_upgrades());
        let mut builder = Request::builder()
            .method(Method::GET)
            .uri(format!("http://localhost{path}"))
            .header("host", "localhost")
            .header("connection", "upgrade")
            .header("upgrade", protocol);
        for (k, v) in headers {
            builder = builder.header(*k, *v);
        }
        let request = builder.body(Full::new(Bytes::new())).map_err(|e| ClientError::Broken(e.to_string()))?;
        let response = sender.send_request(request).await.map_err(|e| ClientError::Broken(e.to_string()))?;
        if response.status() != hyper::StatusCode::SWITCHING_PROTOCOLS {
            return Ok(None);
        }
        let upgraded = hyper::upgrade::on(response).await.map_err(|e| ClientError::Broken(e.to_string()))?;
        Ok(Some(TokioIo::new(upgraded)))
    }

    /// Connects to the socket, and makes sure it is the user's daemon before anything
    /// is sent: the socket file is owned by this process's effective uid (checked
    /// first, cheaply, so a stranger's socket is not even connected to), and so is the
    /// process that accepted the connection (`SO_PEERCRED` on Linux, `getpeereid` on
    /// macOS), which a file chowned or renamed into place cannot fake.
    ///
    /// Errors: as [`Client::request`].
    async fn connect(&self) -> Result<UnixStream, ClientError> {
        let me = nix::unistd::geteuid().as_raw();
        match std::fs::metadata(&self.socket) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ClientError::NotRunning(self.socket.clone()));
            }
            Ok(meta) if meta.uid() != me => return Err(self.foreign("is owned by", meta.uid(), me)),
            // Other failures (a directory that cannot be searched) are connect's to report.
            _ => {}
        }
        let stream = UnixStream::connect(&self.socket).await.map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
                ClientError::NotRunning(self.socket.clone())
            }
            _ => ClientError::Broken(format!("connecting to {}: {e}", self.socket.display())),
        })?;
        let peer = mcpx_platform::peer_uid(stream.as_fd()).map_err(|e| {
            ClientError::Broken(format!("cannot tell which user serves {}: {e}", self.socket.display()))
        })?;
        if peer != me {
            return Err(self.foreign("is served by a process of", peer, me));
        }
        Ok(stream)
    }

    /// The refusal of a socket that `whose` (`is owned by`, `is served by a process
    /// of`) uid `uid` rather than `me`.
    fn foreign(&self, whose: &str, uid: u32, me: u32) -> ClientError {
        let dir = self.socket.parent().unwrap_or(&self.socket);
        ClientError::Foreign(format!(
            "{} {whose} uid {uid}, not you (uid {me}): another user may be posing as your mcpx daemon, and \
             nothing was sent to it; remove it (`rm {}`) and find out who can write to {}",
            self.socket.display(),
            self.socket.display(),
            dir.display()
        ))
    }

    /// Makes sure a daemon answers, starting one when this client may (it was made by
    /// [`connect_or_start`]).
    ///
    /// Errors: as [`connect_or_start`].
    pub async fn ensure_daemon(&self) -> Result<(), ApiError> {
        match &self.starter {
            Some((dirs, exe)) => connect_or_start(dirs, exe).await.map(|_| ()),
            None if self.is_up().await? => Ok(()),
            None => {
                Err(ApiError::new(ErrorKind::Daemon, format!("no daemon is listening on {}", self.socket.display())))
            }
        }
    }

    /// Whether a daemon answers `GET /v1/health`.
    ///
    /// Errors: the socket or its server is not the user's (`daemon`, exit 3): that is
    /// never taken for "no daemon", which would start one beside it.
    pub async fn is_up(&self) -> Result<bool, ApiError> {
        match self.send(Method::GET, "/v1/health", None).await {
            Ok((status, _)) => Ok(status == 200),
            Err(ClientError::Foreign(message)) => Err(ApiError::new(ErrorKind::Daemon, message)),
            Err(_) => Ok(false),
        }
    }
}

/// Finds the running daemon, or starts one detached (its own session, stdio to
/// `/dev/null`, logging to the state directory) and waits until it answers.
/// `exe` is the mcpx binary; the daemon inherits this process's environment.
///
/// Racing callers may each start one; the daemon lock lets exactly one of them run
/// and the others exit, and every caller ends up talking to the winner.
///
/// A daemon that fails to start says why through the start pipe ([`START_FD`]), and
/// this returns at once with its words; one that loses the start race says nothing,
/// and this waits for the winner.
///
/// Errors (`daemon`, exit 3): the directories are unusable, the binary cannot be
/// started, the daemon failed to start (its own error, and where its log is), or no
/// daemon answers within [`START_DEADLINE`].
pub async fn connect_or_start(dirs: &Dirs, exe: &Path) -> Result<Client, ApiError> {
    let client = Client::starting(dirs, exe);
    if client.is_up().await? {
        return Ok(client);
    }
    dirs.prepare().map_err(|e| ApiError::new(ErrorKind::Daemon, e.to_string()))?;
    let mut env: std::collections::BTreeMap<std::ffi::OsString, std::ffi::OsString> = std::env::vars_os().collect();
    // The daemon runs in `/`: hand it the directories as this process resolved them.
    for (var, dir) in
        [("MCPX_STATE_DIR", &dirs.state), ("MCPX_CACHE_DIR", &dirs.cache), ("MCPX_RUNTIME_DIR", &dirs.runtime)]
    {
        if env.contains_key(std::ffi::OsStr::new(var)) {
            env.insert(var.into(), dir.into());
        }
    }
    let cannot = |e: std::io::Error| {
        ApiError::new(ErrorKind::Daemon, format!("cannot start the daemon ({}): {e}", exe.display()))
    };
    // The start pipe: only the daemon's end survives its exec, and this process's
    // copy closes right after the spawn, so the reader sees the end of it once the
    // daemon listens or exits.
    let (reader, writer) = mcpx_platform::process::inheritable_pipe().map_err(cannot)?;
    env.insert(START_FD.into(), writer.as_fd().as_raw_fd().to_string().into());
    // Only the start pipe goes to the daemon: descriptors this CLI inherited (a
    // shell's pipe) would otherwise stay open in it, and in every supervisor, for good.
    if let Err(e) = mcpx_platform::process::close_inherited_on_exec(&[writer.as_fd().as_raw_fd()]) {
        tracing::debug!("cannot mark inherited descriptors close-on-exec: {e}");
    }
    let spawned = spawn(&SpawnSpec {
        program: exe.to_owned(),
        args: vec!["daemon".into()],
        env,
        cwd: Some(PathBuf::from("/")),
        piped: false,
        detach: Detach::Session,
        confine: None,
    });
    drop(writer);
    let mut child = spawned.map_err(cannot)?;
    let failure = start_failure(reader);
    let deadline = Instant::now() + START_DEADLINE;
    let mut delay = Duration::from_millis(2);
    loop {
        if client.is_up().await? {
            // Reap the launcher-side handle in the background; the daemon lives on.
            tokio::spawn(async move { child.wait().await });
            return Ok(client);
        }
        if let Ok(reason) = failure.try_recv()
            && !reason.is_empty()
        {
            return Err(ApiError::new(
                ErrorKind::Daemon,
                format!("the daemon could not start: {reason} (see {})", dirs.log_file().display()),
            ));
        }
        if let Ok(Some(status)) = child.try_wait() {
            // It exited: either another daemon won the lock (keep waiting for it) or it failed.
            if !status.success() && !dirs.socket().exists() && !dirs.lock().exists() {
                return Err(ApiError::new(
                    ErrorKind::Daemon,
                    format!("the daemon exited at start ({status}); see {}", dirs.log_file().display()),
                ));
            }
        }
        if Instant::now() > deadline {
            return Err(ApiError::new(
                ErrorKind::Daemon,
                format!(
                    "the daemon did not answer on {} within {}s; see {}",
                    dirs.socket().display(),
                    START_DEADLINE.as_secs(),
                    dirs.log_file().display()
                ),
            ));
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_millis(50));
    }
}

/// Reads the start pipe to its end on a thread of its own (a daemon that keeps it
/// open must not hold up this process's exit) and sends what the daemon wrote there:
/// empty when it started, or lost the start race to another daemon.
fn start_failure(reader: std::os::fd::OwnedFd) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    let mut reader = std::fs::File::from(reader);
    std::thread::spawn(move || {
        let mut reason = String::new();
        let _ = std::io::Read::read_to_string(&mut reader, &mut reason);
        let _ = tx.send(reason.trim().to_owned());
    });
    rx
}

/// Starts the daemon as `spec` says, as a tokio child (not killed on drop), through
/// the platform's one spawn function.
fn spawn(spec: &SpawnSpec) -> std::io::Result<tokio::process::Child> {
    let mut cmd = tokio::process::Command::from(mcpx_platform::process::command(spec));
    cmd.kill_on_drop(false);
    cmd.spawn()
}
