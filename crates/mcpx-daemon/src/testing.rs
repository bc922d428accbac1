//! The in-process daemon fixture of the unit tests: a [`Daemon`] over temporary
//! directories whose launchers hand out [`Link`]s backed by channels, answered by a
//! small MCP server task ([`ChannelServer`]). No socket is opened and no process is
//! started.
//!
//! The launchers are built in one place, [`launchers`], so a change of the
//! `Launcher` interface is adapted there.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcpx_proto::{Message, MessageKind};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use crate::api::{
    AuthRequest, CallRequest, Caller, CallerRequest, ListRequest, PromptRequest, ReadRequest, RefreshRequest,
    RestartRequest, SearchRequest, StopRequest, TypesRequest, UpgradeRequest,
};
use crate::daemon::Daemon;
use crate::paths::Dirs;
use crate::sync::lock;
use crate::transport::{
    BoxFuture, ExitInfo, Inbound, Launch, Launcher, Launchers, Link, LinkInfo, Outbound, SupervisorInfo, TransportError,
};

/// How long a test waits for something the fixture's server reports.
const WAIT: Duration = Duration::from_secs(10);

/// A daemon in the test's process, with its temporary directories and the server
/// every configured entry reaches.
pub(crate) struct Fixture {
    /// The daemon.
    pub daemon: Arc<Daemon>,
    /// The configuration file the fixture's requests name.
    pub config: PathBuf,
    /// Every instance's server: what it was asked, how often it was started.
    pub server: Arc<ChannelServer>,
    /// The temporary directory holding the state, cache, runtime and configuration.
    dir: tempfile::TempDir,
}

impl Fixture {
    /// A daemon whose configuration has one server per `(name, mcpx block)`, each
    /// started by the fixture's launchers (the command is an empty executable file
    /// that is never run). Must be called inside a tokio runtime.
    pub fn new(servers: &[(&str, Value)]) -> Fixture {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let dirs = Dirs {
            state: dir.path().join("state"),
            cache: dir.path().join("cache"),
            runtime: dir.path().join("runtime"),
        };
        let dirs = dirs.open().expect("the fixture's directories");
        let command = dir.path().join("server");
        std::fs::write(&command, "").expect("the fixture's command");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&command, std::fs::Permissions::from_mode(0o755)).expect("an executable command");
        let entries: serde_json::Map<String, Value> = servers
            .iter()
            // The name as an argument gives every entry its own fingerprint.
            .map(|(name, mcpx)| ((*name).to_owned(), json!({ "command": command, "args": [name], "mcpx": mcpx })))
            .collect();
        let config = dir.path().join("mcp.json");
        std::fs::write(&config, json!({ "mcpServers": entries }).to_string()).expect("the fixture's configuration");
        let env = HashMap::from([
            ("HOME".to_owned(), dir.path().display().to_string()),
            ("PATH".to_owned(), "/usr/bin:/bin".to_owned()),
        ]);
        let server = Arc::new(ChannelServer::default());
        let daemon = Daemon::new(dirs.clone(), env, launchers(&server));
        Fixture { daemon, config, server, dir }
    }

    /// A request body of any route, from a caller in the fixture's directory, naming
    /// its configuration.
    pub fn request<T: Body>(&self) -> T {
        T::default().from(self.caller())
    }

    /// The caller of [`Fixture::request`].
    pub fn caller(&self) -> Caller {
        Caller { cwd: Some(self.dir.path().to_owned()), config: Some(self.config.clone()), ..Caller::default() }
    }

    /// A request to call `target` (`<server>.<tool>`) with `arguments`.
    pub fn call(&self, target: &str, arguments: Value) -> CallRequest {
        CallRequest {
            target: Some(target.to_owned()),
            arguments: serde_json::value::to_raw_value(&arguments).ok(),
            ..self.request()
        }
    }
}

/// A route's request body, with its caller set ([`Fixture::request`]).
pub trait Body: Default {
    /// The body from `caller` (a body without a caller ignores it).
    fn from(self, caller: Caller) -> Self;
}

/// [`Body`] for the bodies with a `caller`.
macro_rules! with_caller {
    ($($t:ty),*) => {$(
        impl Body for $t {
            fn from(mut self, caller: Caller) -> Self {
                self.caller = caller;
                self
            }
        }
    )*};
}
with_caller!(
    CallerRequest,
    SearchRequest,
    ListRequest,
    TypesRequest,
    CallRequest,
    ReadRequest,
    PromptRequest,
    RestartRequest,
    RefreshRequest,
    AuthRequest
);

impl Body for StopRequest {
    fn from(self, _: Caller) -> Self {
        self
    }
}

impl Body for UpgradeRequest {
    fn from(self, _: Caller) -> Self {
        self
    }
}

/// The launchers of the fixture: every kind starts a [`ChannelServer`] instance (a
/// supervised one reports a supervisor, so it can be restarted in place; the
/// fixture configures no remote server).
fn launchers(server: &Arc<ChannelServer>) -> Launchers {
    Launchers {
        direct: Arc::new(ChannelLauncher { server: server.clone(), supervised: false }),
        supervised: Arc::new(ChannelLauncher { server: server.clone(), supervised: true }),
        remote: Arc::new(ChannelLauncher { server: server.clone(), supervised: false }),
    }
}

/// Starts a [`ChannelServer`] instance per launch.
struct ChannelLauncher {
    server: Arc<ChannelServer>,
    supervised: bool,
}

impl Launcher for ChannelLauncher {
    fn launch(&self, launch: Launch) -> BoxFuture<'static, Result<Link, TransportError>> {
        let server = self.server.clone();
        let supervised = self.supervised;
        Box::pin(async move {
            let pid = server.next_pid.fetch_add(1, Ordering::Relaxed) + 1000;
            server.record(format!("launch {} {}", launch.identity().server, launch.identity().key));
            let supervisor =
                supervised.then(|| SupervisorInfo { id: format!("sup-{pid}"), pid, protocol: "1.0".into() });
            let info = Arc::new(LinkInfo::new(Some(pid), supervisor));
            let (out_tx, out_rx) = mpsc::channel(64);
            let (in_tx, in_rx) = mpsc::channel(64);
            tokio::spawn(server.serve(out_rx, in_tx, info.clone()));
            Ok(Link { tx: out_tx, rx: in_rx, info, epoch: 1, resumed: None, era: None })
        })
    }
}

/// A small MCP server answering over a link's channels, and the record of what it
/// was sent (`launch <server> <key>`, each method, `response <id>`), which tests wait
/// on. Its tools:
/// - `echo {message}`: the message as text;
/// - `progress`: a `notifications/progress` for the request's token, then `done`;
/// - `fail`: a JSON-RPC error (-32000, `it failed`);
/// - `slow`: never answers;
/// - `ask`: asks the caller `sampling/createMessage`, then answers with the text of
///   the caller's answer;
/// - `exit`: the server exits with code 3.
#[derive(Debug, Default)]
pub(crate) struct ChannelServer {
    /// Everything it was sent, in order.
    log: Mutex<Vec<String>>,
    /// Bumped on every record, so tests wait without polling.
    changed: watch::Sender<usize>,
    /// Pids handed out (plus 1000).
    next_pid: AtomicU32,
}

impl ChannelServer {
    /// Everything recorded so far.
    pub fn log(&self) -> Vec<String> {
        lock(&self.log).clone()
    }

    /// How many entries of the record start with `prefix`.
    pub fn count(&self, prefix: &str) -> usize {
        self.log().iter().filter(|l| l.starts_with(prefix)).count()
    }

    /// Waits until an entry of the record starts with `prefix`.
    ///
    /// Panics after [`WAIT`].
    pub async fn wait_for(&self, prefix: &str) {
        let mut changed = self.changed.subscribe();
        let seen = tokio::time::timeout(WAIT, async {
            loop {
                if self.count(prefix) > 0 {
                    return;
                }
                if changed.changed().await.is_err() {
                    return;
                }
            }
        });
        seen.await.unwrap_or_else(|_| panic!("no `{prefix}` within {WAIT:?}; the server saw {:?}", self.log()));
    }

    fn record(&self, entry: String) {
        lock(&self.log).push(entry);
        self.changed.send_modify(|n| *n += 1);
    }

    /// Answers one instance's link until the daemon terminates or drops it.
    async fn serve(
        self: Arc<Self>,
        mut out: mpsc::Receiver<Outbound>,
        inbound: mpsc::Sender<Inbound>,
        info: Arc<LinkInfo>,
    ) {
        // The `ask` calls waiting for their caller's answer: server request id → call id.
        let mut asked: HashMap<String, String> = HashMap::new();
        while let Some(item) = out.recv().await {
            let m = match item {
                Outbound::Message(m) | Outbound::Headed(m, _) => m,
                Outbound::Terminate => {
                    self.record("terminate".into());
                    let _ = inbound.send(Inbound::Exited(ExitInfo { code: Some(0), signal: None })).await;
                    return;
                }
                Outbound::Restart => {
                    let pid = self.next_pid.fetch_add(1, Ordering::Relaxed) + 1000;
                    info.set_pid(pid);
                    self.record("restart".into());
                    let _ = inbound.send(Inbound::Restarted(pid)).await;
                    continue;
                }
                Outbound::StoreSession(_) | Outbound::StoreEra(_) => continue,
            };
            let id = m.id().unwrap_or("null").to_owned();
            if m.kind() == MessageKind::Response {
                self.record(format!("response {id}"));
                if let Some(call) = asked.remove(&id) {
                    let v: Value = serde_json::from_str(m.as_str()).unwrap_or_default();
                    let text = v["result"]["content"]["text"].as_str().unwrap_or("no answer").to_owned();
                    let _ = inbound.send(Inbound::Message(tool_result(&call, &text))).await;
                }
                continue;
            }
            let method = m.method().unwrap_or_default().to_owned();
            let params: Value =
                serde_json::from_str::<Value>(m.as_str()).map(|v| v["params"].clone()).unwrap_or_default();
            let tool = params["name"].as_str().unwrap_or_default().to_owned();
            self.record(if method == "tools/call" { format!("tools/call {tool}") } else { method.clone() });
            if m.kind() == MessageKind::Notification {
                continue;
            }
            let answers = match (method.as_str(), tool.as_str()) {
                ("initialize", _) => vec![Message::response(
                    &id,
                    &json!({
                        "protocolVersion": mcpx_proto::mcp::LATEST_VERSION,
                        "capabilities": { "tools": { "listChanged": true } },
                        "serverInfo": { "name": "channel-server", "version": "1" },
                        "instructions": "A server on channels.\nSecond line.",
                    })
                    .to_string(),
                )],
                ("tools/list", _) => vec![Message::response(&id, &json!({ "tools": tools() }).to_string())],
                ("tools/call", "echo") => {
                    vec![tool_result(&id, params["arguments"]["message"].as_str().unwrap_or_default())]
                }
                ("tools/call", "progress") => {
                    let token = params["_meta"]["progressToken"].clone();
                    let progress = json!({ "progressToken": token, "progress": 1, "total": 2, "message": "half" });
                    vec![
                        Message::notification("notifications/progress", Some(&progress.to_string())),
                        tool_result(&id, "done"),
                    ]
                }
                ("tools/call", "fail") => vec![Message::error_response(&id, -32000, "it failed")],
                ("tools/call", "slow") => Vec::new(),
                ("tools/call", "ask") => {
                    let ask = format!("\"ask-{}\"", asked.len() + 1);
                    asked.insert(ask.clone(), id.clone());
                    vec![Message::request(&ask, "sampling/createMessage", Some(r#"{"messages":[],"maxTokens":1}"#))]
                }
                ("tools/call", "exit") => {
                    let _ = inbound.send(Inbound::Exited(ExitInfo { code: Some(3), signal: None })).await;
                    return;
                }
                ("ping", _) => vec![Message::response(&id, "{}")],
                _ => vec![Message::error_response(&id, -32601, "method not found")],
            };
            for answer in answers {
                if inbound.send(Inbound::Message(answer)).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// The tools the [`ChannelServer`] lists.
fn tools() -> Value {
    let tool = |name: &str, description: &str| json!({ "name": name, "description": description, "inputSchema": { "type": "object" } });
    json!([
        tool("echo", "Echoes the message back"),
        tool("progress", "Reports progress, then finishes"),
        tool("fail", "Answers with a JSON-RPC error"),
        tool("slow", "Never answers"),
        tool("ask", "Asks the caller to sample"),
        tool("exit", "Exits the server"),
    ])
}

/// A `CallToolResult` with one text block, its keys in the order written here.
fn tool_result(id: &str, text: &str) -> Message {
    let text = Value::String(text.to_owned());
    Message::response(id, &format!(r#"{{"content":[{{"type":"text","text":{text}}}]}}"#))
}

/// An entry named `name` of `/c.json` with default options, trusted: for tests that
/// need one without a file.
pub fn entry(name: &str, transport: crate::config::TransportSpec) -> crate::config::ServerEntry {
    crate::config::ServerEntry {
        name: name.into(),
        source: "/c.json".into(),
        client: None,
        transport,
        options: crate::config::ServerOptions::default(),
        oauth: None,
        inputs: Default::default(),
        trust_hash: String::new(),
        trusted: true,
        pinning: crate::config::Pinning::default(),
        profile: None,
    }
}
