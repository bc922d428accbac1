//! `/mcp` on TCP treats its clients as strangers: the headers that choose a
//! configuration, a directory or a pool session have no effect there, idle
//! connections cannot take the daemon's descriptors, and the descriptor limit the
//! daemon raises for itself is not what its servers get (`docs/security.md`).

use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{Run, World, fake_server, free_port, mcpx_bin, wait_until};

/// One exchange with `/mcp` on TCP at `addr`, with the bearer `token` and `headers`,
/// on a connection of its own: (status, lowercased head, body).
pub(crate) fn post(addr: &str, token: &str, headers: &[(&str, &str)], body: &Value) -> (u16, String, String) {
    post_to(addr, "/mcp", token, headers, body)
}

/// [`post`] to `path` (`/mcp/<server>`).
pub(crate) fn post_to(
    addr: &str,
    path: &str,
    token: &str,
    headers: &[(&str, &str)],
    body: &Value,
) -> (u16, String, String) {
    let body = body.to_string();
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {token}\r\ncontent-type: application/json\r\n\
         accept: application/json\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(90))).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, head.to_lowercase(), body.to_owned())
}

/// An MCP session on TCP opened with `headers` on its `initialize`: its id.
fn initialize(addr: &str, token: &str, headers: &[(&str, &str)]) -> String {
    let init = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": { "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } });
    let (status, head, body) = post(addr, token, headers, &init);
    assert_eq!(status, 200, "{head}\n{body}");
    head.lines().find_map(|l| l.strip_prefix("mcp-session-id: ")).unwrap().trim().to_owned()
}

/// A request in session `session` (the caller headers sent again, as a client would):
/// its response.
fn rpc(addr: &str, token: &str, session: &str, headers: &[(&str, &str)], method: &str, params: Value) -> Value {
    let mut all = vec![("mcp-session-id", session)];
    all.extend_from_slice(headers);
    let (status, head, body) =
        post(addr, token, &all, &json!({ "jsonrpc": "2.0", "id": 2, "method": method, "params": params }));
    assert_eq!(status, 200, "{head}\n{body}");
    serde_json::from_str(&body).unwrap()
}

/// A world whose daemon reads the user config (no `MCPX_CONFIG`), serving `/mcp` on
/// TCP: the world, the address and the token.
fn tcp_world(servers: Value) -> (World, String, String) {
    let mut w = World::new(json!({}));
    w.unset.push("MCPX_CONFIG".into());
    w.env.push(("XDG_CONFIG_HOME".into(), w.path("xdg").display().to_string()));
    std::fs::create_dir_all(w.path("xdg/mcpx")).unwrap();
    std::fs::write(w.path("xdg/mcpx/config.json"), json!({ "mcpServers": servers }).to_string()).unwrap();
    let addr = format!("127.0.0.1:{}", free_port());
    w.run_with(&["ls"], |c| {
        c.env("MCPX_HTTP_ADDR", &addr);
    })
    .ok();
    let token = std::fs::read_to_string(w.path("state/token")).unwrap().trim().to_owned();
    (w, addr, token)
}

/// A TCP client names a config file, or a directory holding a `.mcp.json`, with
/// `X-Mcpx-Config` or `X-Mcpx-Cwd`: it still sees the daemon's own configuration, and
/// nothing of those files runs.
#[test]
fn tcp_x_mcpx_config_and_cwd_have_no_effect() {
    let (w, addr, token) = tcp_world(json!({ "own": { "command": fake_server() } }));
    std::fs::create_dir_all(w.path("planted")).unwrap();
    let planted = json!({ "mcpServers": { "planted": { "command": fake_server() } } }).to_string();
    std::fs::write(w.path("planted/.mcp.json"), planted).unwrap();
    let evil = json!({ "mcpServers": { "evil": { "command": fake_server() } } }).to_string();
    std::fs::write(w.path("evil.json"), evil).unwrap();
    let (evil, planted) = (w.path("evil.json").display().to_string(), w.path("planted").display().to_string());
    for header in [("x-mcpx-config", evil.as_str()), ("x-mcpx-cwd", planted.as_str())] {
        let session = initialize(&addr, &token, &[header]);
        let tools = rpc(&addr, &token, &session, &[header], "tools/list", json!({}));
        let names: Vec<&str> =
            tools["result"]["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
        assert!(
            names.iter().all(|n| n.starts_with("own__")) && names.contains(&"own__echo"),
            "TCP {}: {} chose what the client sees: {names:?}",
            header.0,
            header.1
        );
    }
    let started: Vec<Value> = w.status()["instances"].as_array().unwrap().clone();
    assert!(started.iter().all(|i| i["server"] == "own"), "a server of a named file ran: {started:#?}");
}

/// A TCP client sends `X-Mcpx-Session: <another caller's session>`: its `session`
/// scoped instance is still keyed by its own MCP session.
#[test]
fn tcp_x_mcpx_session_has_no_effect() {
    let (w, addr, token) = tcp_world(json!({ "sess": { "command": fake_server(), "mcpx": { "scope": "session" } } }));
    let header = ("x-mcpx-session", "victim");
    let session = initialize(&addr, &token, &[header]);
    rpc(&addr, &token, &session, &[header], "tools/list", json!({}));
    let answer = rpc(
        &addr,
        &token,
        &session,
        &[header],
        "tools/call",
        json!({ "name": "sess__echo", "arguments": { "message": "hi" } }),
    );
    assert_eq!(answer["result"]["content"][0]["text"], "hi", "{answer}");
    let keys: Vec<String> = w.status()["instances"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["server"] == "sess")
        .map(|i| i["key"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(keys, [format!("session:{session}")], "TCP x-mcpx-session picked the pool key");
}

/// A request without the token gets 401, and the connection is closed at once: its
/// announced body is not waited for, and the connection is not kept alive.
#[test]
fn tcp_401_closes_without_reading_the_body() {
    let (_w, addr, _token) = tcp_world(json!({}));
    let mut stream = std::net::TcpStream::connect(&addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: 1000000\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).unwrap();
    let started = Instant::now();
    let mut answer = Vec::new();
    let read = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    assert!(read.is_ok() && started.elapsed() < Duration::from_secs(10), "the connection stayed open: {read:?}");
    assert!(answer.to_lowercase().contains("connection: close"), "{answer}");
}

/// A TCP connection that sends no request is closed once the header deadline (10 s)
/// has passed, so idle connections cannot be held.
#[test]
fn tcp_idle_connections_are_closed_after_the_header_deadline() {
    let (_w, addr, _token) = tcp_world(json!({}));
    let mut stream = std::net::TcpStream::connect(&addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let started = Instant::now();
    let mut rest = Vec::new();
    let read = stream.read_to_end(&mut rest);
    assert!(read.is_ok(), "an idle connection stayed open for {:?}: {read:?}", started.elapsed());
    assert!(started.elapsed() >= Duration::from_secs(9), "closed after {:?} only", started.elapsed());
}

/// TCP session ids are random, and the sessions are capped: past 1024, the least
/// recently used idle one ends, and its client gets 404.
#[test]
fn tcp_sessions_are_random_and_capped() {
    let (_w, addr, token) = tcp_world(json!({}));
    let first = initialize(&addr, &token, &[]);
    assert!(first.len() == 32 && first.chars().all(|c| c.is_ascii_hexdigit()), "session id {first}");
    let mut ids = std::collections::HashSet::from([first.clone()]);
    for _ in 0..1024 {
        assert!(ids.insert(initialize(&addr, &token, &[])), "a session id came twice");
    }
    let ping = json!({ "jsonrpc": "2.0", "id": 2, "method": "ping" });
    let (status, _, body) = post(&addr, &token, &[("mcp-session-id", &first)], &ping);
    assert_eq!(status, 404, "1025 sessions were open at once: {body}");
}

/// `mcpx ls` run as a child, killed when it has not answered within `within`.
fn ls_within(w: &World, within: Duration) -> Result<Run, String> {
    let mut child = w
        .command()
        .args(["ls", "--json"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + within;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("mcpx ls did not answer within {}s", within.as_secs()));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    Ok(Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// The soft and hard `Max open files` of process `pid`.
fn nofile(pid: u32) -> (String, String) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits.lines().find(|l| l.starts_with("Max open files")).unwrap().to_owned();
    let mut fields = line.split_whitespace().skip(3);
    (fields.next().unwrap().to_owned(), fields.next().unwrap().to_owned())
}

/// Whether the accept queue of the listener at 127.0.0.1:`port` is full: `ss` shows
/// a listener's waiting connections (`Recv-Q`) and its backlog (`Send-Q`).
fn accept_queue_full(port: u16) -> bool {
    #[allow(clippy::disallowed_methods)] // Reason: ss (iproute2) reads the listen backlog.
    let out = std::process::Command::new("ss")
        .args(["-Hlnt", &format!("sport = :{port}")])
        .output()
        .expect("ss (iproute2) is needed for this test");
    let text = String::from_utf8_lossy(&out.stdout);
    let fields: Vec<u64> = text.split_whitespace().filter_map(|f| f.parse().ok()).collect();
    matches!(fields[..], [waiting, backlog, ..] if backlog > 0 && waiting >= backlog)
}

/// With the daemon's descriptor limit at 1024 (soft and hard) and another process
/// holding 2,000 idle TCP connections to `/mcp`, `mcpx ls` over the unix socket still
/// answers.
#[test]
fn idle_tcp_connections_leave_the_control_socket_answering() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    let addr = format!("127.0.0.1:{}", free_port());
    let mut start = w.launcher().program("prlimit");
    start.args(["--nofile=1024:1024", "--"]).arg(mcpx_bin()).arg("ls").env("MCPX_HTTP_ADDR", &addr);
    Run::of(start, "prlimit mcpx ls").ok();
    let daemon = u32::try_from(w.daemon_pid().unwrap()).unwrap();
    assert_eq!(nofile(daemon), ("1024".to_owned(), "1024".to_owned()));

    // The other process: this test, with room for 2,000 descriptors.
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    setrlimit(Resource::RLIMIT_NOFILE, hard, hard).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let connected = Arc::new(AtomicUsize::new(0));
    for _ in 0..2000 {
        let (addr, connected) = (addr.clone(), connected.clone());
        runtime.spawn(async move {
            if let Ok(stream) = tokio::net::TcpStream::connect(&addr).await {
                connected.fetch_add(1, Ordering::SeqCst);
                std::future::pending::<()>().await;
                drop(stream);
            }
        });
    }
    // More than the daemon could hold: it accepts what it takes, and the kernel
    // queues the rest for an accept that does not come. Once the queue is full (or
    // holds all the rest) and the daemon's descriptors have not grown for 25 polls, it
    // takes no more.
    let port = addr.rsplit_once(':').unwrap().1.parse::<u16>().unwrap();
    let fds = || std::fs::read_dir(format!("/proc/{daemon}/fd")).map(Iterator::count).unwrap_or(0);
    let (mut most, mut same) = (0, 0);
    wait_until("the daemon takes no more TCP connections", Duration::from_secs(60), || {
        let now = fds();
        let queued = connected.load(Ordering::SeqCst) == 2000 || accept_queue_full(port);
        same = if now <= most && queued { same + 1 } else { 0 };
        most = most.max(now);
        same >= 25
    });
    let ls = ls_within(&w, Duration::from_secs(20)).unwrap_or_else(|e| {
        let (held, fds) = (connected.load(Ordering::SeqCst), fds());
        panic!("{e} while {held} TCP connections were held (the daemon has {fds} descriptors open)")
    });
    assert_eq!(ls.code, 0, "{}", ls.stderr);
    assert_eq!(ls.json()[0]["name"], "fake");
    drop(runtime);
}

/// The daemon raises its soft descriptor limit to the hard one, and its servers (and
/// their supervisors) start with the soft limit it was given, after an upgrade too.
#[test]
fn the_daemon_raises_its_descriptor_limit_and_servers_get_the_original() {
    let w = World::new(json!({
        "sup": { "command": fake_server() },
        "direct": { "command": fake_server(), "env": { "WHICH": "direct" }, "mcpx": { "supervised": false } },
        "later": { "command": fake_server(), "env": { "WHICH": "later" } },
    }));
    let mut start = w.launcher().program("prlimit");
    start.args(["--nofile=512:4096", "--"]).arg(mcpx_bin()).args(["call", "sup.echo", r#"{"message":"a"}"#]);
    Run::of(start, "prlimit mcpx call").ok();
    w.call("direct.echo", r#"{"message":"b"}"#).ok();
    let daemon = u32::try_from(w.daemon_pid().unwrap()).unwrap();
    assert_eq!(nofile(daemon), ("4096".to_owned(), "4096".to_owned()), "the daemon's own limit");
    let original = ("512".to_owned(), "4096".to_owned());
    let check = |server: &str| {
        let instance = w.instance(server).unwrap_or_else(|| panic!("no {server} in {:#}", w.status()));
        let pid = u32::try_from(instance["pid"].as_u64().unwrap()).unwrap();
        assert_eq!(nofile(pid), original, "{server}'s server process");
        if let Some(sup) = instance["supervisor_pid"].as_u64() {
            assert_eq!(nofile(u32::try_from(sup).unwrap()), original, "{server}'s supervisor");
        }
    };
    check("sup");
    check("direct");
    // An upgrade re-executes the daemon: the new image raises the limit again, and the
    // servers it starts still get the original.
    w.run(&["upgrade"]).ok();
    w.call("later.echo", r#"{"message":"c"}"#).ok();
    assert_eq!(nofile(daemon), ("4096".to_owned(), "4096".to_owned()), "the upgraded daemon's own limit");
    check("later");
}
