//! Everything a server offers, through the endpoint: `completion/complete`, resource
//! subscriptions counted per instance and URI, log levels per client, and resource
//! URIs that read back through the aggregate; through `/mcp` (and `/mcp/<server>`)
//! and through `mcpx serve` (and `serve --server`).

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{Serve, Spawned, World, fake_server, wait_until};
use crate::serve::{initialize, rpc};

/// A world whose one server, `fake`, records every message it reads in `record`,
/// with its daemon running.
fn world() -> World {
    let w = World::new(json!({}));
    w.set_servers(json!({ "fake": { "command": fake_server(),
        "env": { "FAKE_RECORD": w.path("record").display().to_string() } } }));
    w.run(&["ls"]).ok();
    w
}

/// The `params` of every message of `method` the server read, in order.
fn upstream(w: &World, method: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(w.path("record")).unwrap_or_default();
    let messages = text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok());
    messages.filter(|m| m["method"] == method).map(|m| m["params"].clone()).collect()
}

/// A session's GET stream, written to a file by curl (killed on drop).
struct Stream {
    _curl: Spawned,
    file: std::path::PathBuf,
}

impl Stream {
    fn open(w: &World, path: &str, session: &str, name: &str) -> Stream {
        let file = w.path(name);
        #[allow(clippy::disallowed_methods)] // Reason: curl holds the GET stream open.
        let curl = std::process::Command::new("curl")
            .args(["-s", "-N", "--unix-socket"])
            .arg(w.path("run/daemon.sock"))
            .args(["-H", "accept: text/event-stream", "-H", &format!("mcp-session-id: {session}"), "-o"])
            .arg(&file)
            .arg(format!("http://localhost{path}"))
            .spawn()
            .unwrap();
        let stream = Stream { _curl: Spawned(curl), file };
        wait_until("the GET stream is open", Duration::from_secs(10), || stream.text().contains("stream open"));
        stream
    }

    fn text(&self) -> String {
        std::fs::read_to_string(&self.file).unwrap_or_default()
    }

    /// The messages of `method` that arrived.
    fn heard(&self, method: &str) -> Vec<Value> {
        let events = self.text();
        let messages =
            events.lines().filter_map(|l| l.strip_prefix("data: ")).filter_map(|d| serde_json::from_str(d).ok());
        messages.filter(|m: &Value| m["method"] == method).collect()
    }
}

fn call(name: &str, arguments: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": { "name": name, "arguments": arguments } })
}

fn request(method: &str, params: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": 7, "method": method, "params": params })
}

/// Completion goes to the owner of the prompt or template; a read answers with the
/// URI asked for; resource links and embedded resources read back through `/mcp`;
/// `/mcp/fake` passes URIs through unchanged.
#[test]
fn completion_and_uris_round_trip_through_mcp() {
    let w = world();
    let (a, _) = initialize(&w, "/mcp", "2025-11-25");
    let complete = |s: &str, path: &str, reference: Value| {
        let params = json!({ "ref": reference, "argument": { "name": "arg1", "value": "pa" } });
        rpc(&w, path, s, request("completion/complete", params))
    };
    let by_prompt = complete(&a, "/mcp", json!({ "type": "ref/prompt", "name": "fake__test_prompt_with_arguments" }));
    assert_eq!(by_prompt["result"]["completion"]["values"], json!(["paris", "park", "party"]), "{by_prompt}");
    let bare = complete(&a, "/mcp", json!({ "type": "ref/prompt", "name": "test_prompt_with_arguments" }));
    assert_eq!(bare["result"], by_prompt["result"], "one server has the name: it is found");
    let params = json!({ "ref": { "type": "ref/resource", "uri": "mcpx://fake/test://template/{id}/data" },
        "argument": { "name": "id", "value": "1" } });
    let by_template = rpc(&w, "/mcp", &a, request("completion/complete", params));
    assert_eq!(by_template["result"]["completion"]["values"], json!(["1", "123"]), "{by_template}");

    let read = rpc(&w, "/mcp", &a, request("resources/read", json!({ "uri": "mcpx://fake/test://static-text" })));
    assert_eq!(read["result"]["contents"][0]["uri"], "mcpx://fake/test://static-text", "{read}");
    let embedded = rpc(&w, "/mcp", &a, call("fake__test_embedded_resource", json!({})));
    assert_eq!(embedded["result"]["content"][0]["resource"]["uri"], "mcpx://fake/test://embedded-resource");
    let prompt = rpc(
        &w,
        "/mcp",
        &a,
        request(
            "prompts/get",
            json!({ "name": "fake__test_prompt_with_embedded_resource",
            "arguments": { "resourceUri": "test://static-text" } }),
        ),
    );
    let link = prompt["result"]["messages"][0]["content"]["resource"]["uri"].as_str().unwrap().to_owned();
    assert_eq!(link, "mcpx://fake/test://static-text", "{prompt}");
    let read_back = rpc(&w, "/mcp", &a, request("resources/read", json!({ "uri": link })));
    assert_eq!(read_back["result"]["contents"][0]["text"], "This is the content of the static text resource.");

    let (p, _) = initialize(&w, "/mcp/fake", "2025-11-25");
    let direct = rpc(&w, "/mcp/fake", &p, call("test_embedded_resource", json!({})));
    assert_eq!(direct["result"]["content"][0]["resource"]["uri"], "test://embedded-resource");
    let direct = complete(&p, "/mcp/fake", json!({ "type": "ref/prompt", "name": "test_prompt_with_arguments" }));
    assert_eq!(direct["result"], by_prompt["result"]);
}

/// Two aggregate sessions and a passed-through one share the instance: the server is
/// subscribed once and unsubscribed after the last, and each subscriber hears updates
/// with the URI it used; a session that ends leaves its subscriptions. The
/// instance's log level is its most verbose client's, and each client hears only its
/// own level and above.
#[test]
fn subscriptions_and_log_levels_are_counted_per_instance_through_mcp() {
    let w = world();
    let (a, _) = initialize(&w, "/mcp", "2025-11-25");
    let (b, _) = initialize(&w, "/mcp", "2025-11-25");
    let (p, _) = initialize(&w, "/mcp/fake", "2025-11-25");
    let (sa, sb, sp) = (
        Stream::open(&w, "/mcp", &a, "a.sse"),
        Stream::open(&w, "/mcp", &b, "b.sse"),
        Stream::open(&w, "/mcp/fake", &p, "p.sse"),
    );
    let aggregate = json!({ "uri": "mcpx://fake/test://watched-resource" });
    let own = json!({ "uri": "test://watched-resource" });
    for (path, session, params) in [("/mcp", &a, &aggregate), ("/mcp", &b, &aggregate), ("/mcp/fake", &p, &own)] {
        let answer = rpc(&w, path, session, request("resources/subscribe", params.clone()));
        assert_eq!(answer["result"], json!({}), "{answer}");
    }
    assert_eq!(
        upstream(&w, "resources/subscribe"),
        std::slice::from_ref(&own),
        "the first subscriber subscribes, once"
    );
    let update = || {
        let params = json!({ "method": "notifications/resources/updated", "params": own });
        rpc(&w, "/mcp/fake", &p, call("notify", params));
    };
    update();
    wait_until("each subscriber hears the update", Duration::from_secs(10), || {
        [&sa, &sb, &sp].iter().all(|s| s.heard("notifications/resources/updated").len() == 1)
    });
    assert_eq!(sa.heard("notifications/resources/updated")[0]["params"], aggregate);
    assert_eq!(sp.heard("notifications/resources/updated")[0]["params"], own);
    rpc(&w, "/mcp", &a, request("resources/unsubscribe", aggregate.clone()));
    assert!(upstream(&w, "resources/unsubscribe").is_empty(), "b and p are still subscribed");
    update();
    wait_until("b and p hear the second update", Duration::from_secs(10), || {
        [&sb, &sp].iter().all(|s| s.heard("notifications/resources/updated").len() == 2)
    });
    assert_eq!(sa.heard("notifications/resources/updated").len(), 1, "a unsubscribed");
    rpc(&w, "/mcp", &b, request("resources/unsubscribe", aggregate.clone()));
    rpc(&w, "/mcp/fake", &p, request("resources/unsubscribe", own.clone()));
    assert_eq!(upstream(&w, "resources/unsubscribe"), std::slice::from_ref(&own), "after the last subscriber");

    for (session, level) in [(&a, "error"), (&b, "debug"), (&a, "warning")] {
        let answer = rpc(&w, "/mcp", session, request("logging/setLevel", json!({ "level": level })));
        assert_eq!(answer["result"], json!({}), "{answer}");
    }
    let levels: Vec<Value> = upstream(&w, "logging/setLevel").into_iter().map(|p| p["level"].clone()).collect();
    assert_eq!(levels, ["error", "debug"], "the most verbose level of the clients, when it changes");
    let refused = rpc(&w, "/mcp", &a, request("logging/setLevel", json!({ "level": "loud" })));
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    for (level, data) in [("info", "for b"), ("error", "for both")] {
        let params = json!({ "method": "notifications/message", "params": { "level": level, "data": data } });
        rpc(&w, "/mcp/fake", &p, call("notify", params));
    }
    wait_until("b hears both log messages", Duration::from_secs(10), || sb.heard("notifications/message").len() == 2);
    wait_until("a hears the error", Duration::from_secs(10), || !sa.heard("notifications/message").is_empty());
    let heard_by_a = sa.heard("notifications/message");
    assert_eq!(heard_by_a.len(), 1, "a asked for warning and above: {heard_by_a:?}");
    assert_eq!(heard_by_a[0]["params"]["data"], "for both");

    // A session that ends leaves its subscriptions: the server is unsubscribed.
    rpc(&w, "/mcp", &a, request("resources/subscribe", aggregate.clone()));
    let (status, _, _) = crate::serve::http(&w, "DELETE", "/mcp", &[("mcp-session-id", &a)], "");
    assert_eq!(status, 204);
    wait_until("the server is unsubscribed after the session ends", Duration::from_secs(10), || {
        upstream(&w, "resources/unsubscribe").len() == 2
    });
}

/// A server restarted in place (`mcpx restart`) is subscribed again to what its
/// clients still hold and set to their level, and its updates reach them.
#[test]
fn a_server_restarted_in_place_is_subscribed_and_set_again() {
    let w = world();
    let (a, _) = initialize(&w, "/mcp", "2025-11-25");
    let sa = Stream::open(&w, "/mcp", &a, "a.sse");
    let aggregate = json!({ "uri": "mcpx://fake/test://watched-resource" });
    let own = json!({ "uri": "test://watched-resource" });
    rpc(&w, "/mcp", &a, request("resources/subscribe", aggregate.clone()));
    rpc(&w, "/mcp", &a, request("logging/setLevel", json!({ "level": "debug" })));
    let pid = w.instance("fake").unwrap()["pid"].clone();
    w.run(&["restart", "fake"]).ok();
    assert_ne!(w.instance("fake").unwrap()["pid"], pid, "a new process");
    assert_eq!(upstream(&w, "resources/subscribe"), [own.clone(), own.clone()], "subscribed again");
    let levels: Vec<Value> = upstream(&w, "logging/setLevel").into_iter().map(|p| p["level"].clone()).collect();
    assert_eq!(levels, ["debug", "debug"], "set again");
    let (p, _) = initialize(&w, "/mcp/fake", "2025-11-25");
    let params = json!({ "method": "notifications/resources/updated", "params": own });
    rpc(&w, "/mcp/fake", &p, call("notify", params));
    wait_until("the update of the new process reaches a", Duration::from_secs(10), || {
        sa.heard("notifications/resources/updated").len() == 1
    });
    assert_eq!(sa.heard("notifications/resources/updated")[0]["params"], aggregate);
}

/// The same through `mcpx serve` and `mcpx serve --server fake`: completion, URIs,
/// updates and log messages arrive on stdout (serve holds the GET stream).
#[test]
fn completion_subscriptions_levels_and_uris_through_serve() {
    let w = world();
    let mut aggregate = Serve::start(&w, json!({}));
    let mut direct = Serve::start_args(&w, &["--server", "fake"], json!({}));
    let params = json!({ "ref": { "type": "ref/prompt", "name": "fake__test_prompt_with_arguments" },
        "argument": { "name": "arg1", "value": "pa" } });
    let completed = aggregate.request("completion/complete", params);
    assert_eq!(completed["result"]["completion"]["values"], json!(["paris", "park", "party"]), "{completed}");
    let embedded = aggregate.request("tools/call", json!({ "name": "fake__test_embedded_resource", "arguments": {} }));
    assert_eq!(embedded["result"]["content"][0]["resource"]["uri"], "mcpx://fake/test://embedded-resource");
    let direct_embedded = direct.request("tools/call", json!({ "name": "test_embedded_resource", "arguments": {} }));
    assert_eq!(direct_embedded["result"]["content"][0]["resource"]["uri"], "test://embedded-resource");
    let read = aggregate.request("resources/read", json!({ "uri": "mcpx://fake/test://static-text" }));
    assert_eq!(read["result"]["contents"][0]["uri"], "mcpx://fake/test://static-text", "{read}");
    let direct_read = direct.request("resources/read", json!({ "uri": "test://static-text" }));
    assert_eq!(direct_read["result"]["contents"][0]["uri"], "test://static-text");

    let (mcpx_uri, own) = ("mcpx://fake/test://watched-resource", "test://watched-resource");
    assert_eq!(aggregate.request("resources/subscribe", json!({ "uri": mcpx_uri }))["result"], json!({}));
    assert_eq!(direct.request("resources/subscribe", json!({ "uri": own }))["result"], json!({}));
    assert_eq!(aggregate.request("logging/setLevel", json!({ "level": "error" }))["result"], json!({}));
    let notify =
        |method: &str, params: Value| json!({ "name": "notify", "arguments": { "method": method, "params": params } });
    let mut seen = Vec::new();
    direct.request_seeing("tools/call", notify("notifications/resources/updated", json!({ "uri": own })), &mut seen);
    direct.request_seeing(
        "tools/call",
        notify("notifications/message", json!({ "level": "info", "data": "i" })),
        &mut seen,
    );
    direct.request_seeing(
        "tools/call",
        notify("notifications/message", json!({ "level": "error", "data": "e" })),
        &mut seen,
    );
    let heard = |serve: &Serve, until: &dyn Fn(&[Value]) -> bool| {
        let mut got = Vec::new();
        while !until(&got) {
            got.push(serve.recv());
        }
        got
    };
    let by_aggregate = heard(&aggregate, &|got| got.iter().any(|m| m["params"]["data"] == "e"));
    let updates: Vec<&Value> =
        by_aggregate.iter().filter(|m| m["method"] == "notifications/resources/updated").collect();
    assert_eq!(updates.len(), 1, "{by_aggregate:?}");
    assert_eq!(updates[0]["params"]["uri"], mcpx_uri);
    assert!(!by_aggregate.iter().any(|m| m["params"]["data"] == "i"), "below its level: {by_aggregate:?}");
    let update_seen = |got: &[Value]| got.iter().any(|m| m["method"] == "notifications/resources/updated");
    let by_direct = if update_seen(&seen) { seen } else { heard(&direct, &update_seen) };
    let update = by_direct.iter().find(|m| m["method"] == "notifications/resources/updated").unwrap();
    assert_eq!(update["params"]["uri"], own);
}

/// In the aggregate, `logging/setLevel` is not failed by a configured server that
/// cannot start (here a command that does not exist): the servers that run get the
/// level and the answer is `{}`. A level that does not exist is still refused
/// (-32602), before any server is started. Through `/mcp/<server>` of the broken
/// server, its start error is the answer.
#[test]
fn set_level_in_the_aggregate_skips_a_server_that_cannot_start() {
    let w = World::new(json!({}));
    w.set_servers(json!({
        "fake": { "command": fake_server(), "env": { "FAKE_RECORD": w.path("record").display().to_string() } },
        "broken": { "command": "mcpx-no-such-command" },
    }));
    w.run(&["ls"]).ok();
    let (session, _) = initialize(&w, "/mcp", "2025-06-18");
    let refused = rpc(&w, "/mcp", &session, request("logging/setLevel", json!({ "level": "loud" })));
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let answer = rpc(&w, "/mcp", &session, request("logging/setLevel", json!({ "level": "debug" })));
    assert_eq!(answer["result"], json!({}), "{answer}");
    let levels: Vec<Value> = upstream(&w, "logging/setLevel").into_iter().map(|p| p["level"].clone()).collect();
    assert_eq!(levels, ["debug"]);
    let (own, _) = initialize(&w, "/mcp/broken", "2025-06-18");
    let failed = rpc(&w, "/mcp/broken", &own, request("logging/setLevel", json!({ "level": "debug" })));
    assert!(failed["error"]["message"].as_str().unwrap().contains("mcpx-no-such-command"), "{failed}");
}
