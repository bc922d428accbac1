//! The one way to an instance (a lease whose end releases what its scope says): a
//! `call`-scoped instance ends once its request is answered on every path, the CLI's
//! `call`, `read`, `prompt` and `refresh`, `exec` and `serve --code` (those over
//! `/mcp`, `/mcp/<server>` and `serve` are in `serve.rs`); and `status` counts the
//! calls each instance served and has in flight, whichever path they came by.

use std::time::Duration;

use serde_json::json;

use crate::harness::{Serve, World, e2e_dir, wait_until};
use crate::serve::{initialize, rpc};

/// The instances of `server` still running (neither `exited` nor `lost`).
fn live(w: &World, server: &str) -> usize {
    w.status()["instances"].as_array().map_or(0, |i| {
        i.iter().filter(|x| x["server"] == server && x["state"] != "exited" && x["state"] != "lost").count()
    })
}

/// A world whose fake server has `"scope": "call"`, with Deno from e2e/ for code mode.
fn call_scoped() -> World {
    let mut w = World::new(json!({}));
    w.set_servers(json!({ "fake": { "command": w.fake_server(), "mcpx": { "scope": "call" } } }));
    w.env.push(("MCPX_DENO".to_owned(), e2e_dir().join("node_modules/.bin/deno").display().to_string()));
    w
}

/// Each CLI request that reaches a `call`-scoped server (a call, a read, a prompt, a
/// refresh that starts it), a script's three calls under `exec`, and a script sent to
/// `serve --code`'s `mcpx_exec`: none leaves an instance running once it is answered.
#[test]
fn call_scoped_instances_end_on_the_cli_exec_and_serve_code() {
    let w = call_scoped();
    let gone = |what: &str| {
        wait_until(&format!("{what}: no call-scoped instance left"), Duration::from_secs(10), || live(&w, "fake") == 0)
    };
    assert_eq!(w.run(&["tools", "fake"]).code, 0);
    gone("tools");
    for args in [
        &["call", "fake.echo", "message=hi"][..],
        &["read", "fake", "test://static-binary", "--json"],
        &["prompt", "fake.greet", "--json"],
        &["refresh", "fake"],
    ] {
        let run = w.run(args);
        assert_eq!(run.code, 0, "{run:?}");
        gone(&args.join(" "));
    }
    let script = "let said = ''; for (const m of ['a', 'b', 'c']) { const r = await fake.echo({ message: m }); said += (r.content[0] as { text: string }).text } return said";
    let run = w.run(&["exec", "--no-check", script]);
    assert_eq!(run.stdout, "abc\n", "{run:?}");
    gone("exec");
    let mut serve = Serve::start_args(&w, &["--code"], json!({}));
    let ran = serve.request("tools/call", json!({ "name": "mcpx_exec", "arguments": { "code": script } }));
    assert_eq!(ran["result"]["content"][0]["text"], "abc", "{ran}");
    gone("serve --code");
}

/// One shared instance, called by the CLI, `/mcp`, `/mcp/<server>` and `serve`, twice
/// each: `status` counts 8 calls served and none in flight, then one in flight during
/// a slow call (its caller named among the holders), and the table says which count
/// is which.
#[test]
fn status_counts_calls_served_and_in_flight_on_every_path() {
    let w = World::new(json!({}));
    w.set_servers(json!({ "fake": { "command": w.fake_server() } }));
    let instance = || w.instance("fake").unwrap_or_default();
    for n in 0..2 {
        assert_eq!(w.run(&["call", "fake.echo", &format!("message=cli{n}")]).code, 0);
    }
    for (path, tool) in [("/mcp", "fake__echo"), ("/mcp/fake", "echo")] {
        let (session, _) = initialize(&w, path, "2025-11-25");
        for n in 0..2 {
            let call = json!({ "jsonrpc": "2.0", "id": n + 2, "method": "tools/call",
                "params": { "name": tool, "arguments": { "message": format!("{path}{n}") } } });
            assert_eq!(rpc(&w, path, &session, call)["result"]["content"][0]["text"], format!("{path}{n}"));
        }
    }
    let mut serve = Serve::start(&w, json!({}));
    for n in 0..2 {
        let answer =
            serve.request("tools/call", json!({ "name": "fake__echo", "arguments": { "message": format!("s{n}") } }));
        assert_eq!(answer["result"]["content"][0]["text"], format!("s{n}"), "{answer}");
    }
    let row = instance();
    assert_eq!((&row["calls_served"], &row["in_flight"], &row["calls"]), (&json!(8), &json!(0), &json!(0)), "{row}");

    serve.send(json!({ "jsonrpc": "2.0", "id": "slow", "method": "tools/call",
        "params": { "name": "fake__slow", "arguments": { "ms": 3000 } } }));
    wait_until("the slow call is in flight", Duration::from_secs(10), || instance()["in_flight"] == 1);
    let row = instance();
    assert_eq!((&row["calls_served"], &row["calls"]), (&json!(8), &json!(1)), "{row}");
    let table = w.run(&["status"]).ok();
    let header = table.lines().find(|l| l.starts_with("SERVER")).unwrap_or_default().to_owned();
    assert!(header.contains("SERVED") && header.contains("IN FLIGHT") && !header.contains("CALLS"), "{table}");
    let fake = table.lines().find(|l| l.starts_with("fake ")).unwrap_or_default();
    let cells: Vec<&str> = fake.split_whitespace().collect();
    assert_eq!(cells.get(4..6), Some(&["8", "1"][..]), "SERVED 8, IN FLIGHT 1:\n{table}");
    assert_eq!(serve.recv()["id"], "slow");
    wait_until("the slow call is counted", Duration::from_secs(10), || instance()["calls_served"] == 9);
}
