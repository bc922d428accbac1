//! The control API's handlers on an in-process daemon ([`crate::testing::Fixture`]):
//! no socket, no child process.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::*;
use crate::testing::Fixture;

/// A fixture with one default server, `fake`.
fn fake() -> Fixture {
    Fixture::new(&[("fake", json!({}))])
}

fn value(raw: &RawValue) -> Value {
    serde_json::from_str(raw.get()).unwrap()
}

fn row<'a>(rows: &'a [ServerRow], name: &str) -> &'a ServerRow {
    rows.iter().find(|r| r.name == name).unwrap()
}

#[tokio::test]
async fn ls_answers_from_the_schema_cache_and_never_starts_a_server() {
    let fx = Fixture::new(&[("fake", json!({})), ("off", json!({ "disabled": true }))]);
    let rows = ls(&fx.daemon, &fx.request()).await.unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!((row(&rows, "fake").state.as_str(), row(&rows, "fake").tools), ("unread", None));
    assert_eq!(row(&rows, "off").state, "disabled");
    assert_eq!(fx.server.count("launch"), 0, "ls started a server");

    call(&fx.daemon, &fx.call("fake.echo", json!({ "message": "hi" })), None, None, None).await.unwrap();
    let rows = ls(&fx.daemon, &fx.request()).await.unwrap();
    let fake = row(&rows, "fake");
    assert_eq!((fake.state.as_str(), fake.tools, fake.live), ("running", Some(6), 1));
    let paragraph = Some("A server on channels.\nSecond line.");
    assert_eq!(fake.description.as_deref(), paragraph, "the instructions' first paragraph");
    assert_eq!((fake.sharing.as_str(), fake.scope.as_str()), ("shared", "global"));
}

#[tokio::test]
async fn ls_of_a_configuration_that_does_not_parse_is_one_error_row() {
    let fx = fake();
    std::fs::write(&fx.config, "{ not json").unwrap();
    let rows = ls(&fx.daemon, &fx.request()).await.unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!((rows[0].name.as_str(), rows[0].state.as_str()), (fx.config.to_str().unwrap(), "error"));
    assert!(rows[0].error.as_deref().is_some_and(|e| e.contains(":1:3: ")), "{rows:?}");
}

#[tokio::test]
async fn tools_before_and_after_a_refresh() {
    let fx = fake();
    let server =
        |tool: Option<&str>| ListRequest { server: Some("fake".into()), tool: tool.map(str::to_owned), ..fx.request() };
    let e = tools(&fx.daemon, &server(None)).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Server);
    assert!(e.message.contains("`mcpx tools fake` starts it"), "{e}");
    let started = value(&tools(&fx.daemon, &ListRequest { start: true, ..server(None) }).await.unwrap());
    assert_eq!(started.as_array().unwrap().len(), 6, "started and listed: {started}");

    let refreshed = refresh(&fx.daemon, &RefreshRequest { server: Some("fake".into()), ..fx.request() }).await.unwrap();
    assert_eq!(refreshed, json!({ "fake": { "ok": true } }));
    let all = value(&tools(&fx.daemon, &server(None)).await.unwrap());
    let names: Vec<&str> = all.as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["echo", "progress", "fail", "slow", "ask", "exit"]);
    let one = value(&tools(&fx.daemon, &server(Some("echo"))).await.unwrap());
    assert_eq!(one["description"], "Echoes the message back");

    let e = tools(&fx.daemon, &server(Some("nope"))).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::UnknownTool);
    assert!(e.message.contains("its tools: echo, progress"), "{e}");
    let e = tools(&fx.daemon, &ListRequest { server: Some("other".into()), ..fx.request() }).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::UnknownServer);
    assert!(e.message.contains("configured servers: fake"), "{e}");
    let e = tools(&fx.daemon, &fx.request()).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Usage);
}

#[tokio::test]
async fn tools_hides_what_include_and_exclude_leave_out() {
    let fx = Fixture::new(&[("fake", json!({ "excludeTools": ["exit", "fail"] }))]);
    refresh(&fx.daemon, &fx.request()).await.unwrap();
    let listed = value(&tools(&fx.daemon, &ListRequest { server: Some("fake".into()), ..fx.request() }).await.unwrap());
    assert_eq!(listed.as_array().unwrap().len(), 4);
    let rows = ls(&fx.daemon, &fx.request()).await.unwrap();
    assert_eq!(row(&rows, "fake").tools, Some(4));
    let e = call(&fx.daemon, &fx.call("fake.exit", json!({})), None, None, None).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::UnknownTool);
    assert!(e.message.contains("excluded by includeTools/excludeTools"), "{e}");
}

#[tokio::test]
async fn search_ranks_the_tools_that_match_a_word() {
    let fx = fake();
    let words = |w: &[&str]| SearchRequest { words: w.iter().map(|w| (*w).to_owned()).collect(), ..fx.request() };
    assert!(search(&fx.daemon, &words(&["echo"])).await.unwrap().is_empty(), "nothing listed yet");
    refresh(&fx.daemon, &fx.request()).await.unwrap();
    let hits = search(&fx.daemon, &words(&["ECHO"])).await.unwrap();
    assert_eq!((hits[0].server.as_str(), hits[0].tool.as_str()), ("fake", "echo"));
    let hits = search(&fx.daemon, &words(&["report the progress", "of a server"])).await.unwrap();
    let found: Vec<&str> = hits.iter().map(|h| h.tool.as_str()).collect();
    // The name and description first; then a description alone, and the server's name.
    assert_eq!(found[..2], ["progress", "exit"], "{found:?}");
    assert!(search(&fx.daemon, &words(&["zebra"])).await.unwrap().is_empty());
    assert!(hits.len() <= SEARCH_HITS);
    let e = search(&fx.daemon, &words(&["", " "])).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Usage);
}

#[tokio::test]
async fn call_starts_the_server_once_and_returns_the_result_as_sent() {
    let fx = fake();
    let result = call(&fx.daemon, &fx.call("fake.echo", json!({ "message": "hi" })), None, None, None).await.unwrap();
    assert_eq!(result.get(), r#"{"content":[{"type":"text","text":"hi"}]}"#);
    call(&fx.daemon, &fx.call("fake.echo", json!({ "message": "again" })), None, None, None).await.unwrap();
    assert_eq!(fx.server.count("launch"), 1);
    assert_eq!(fx.server.count("initialize"), 1);
    assert_eq!(fx.server.log().first().map(String::as_str), Some("launch fake global"));
    assert_eq!(fx.server.count("tools/call echo"), 2);
}

#[tokio::test]
async fn call_streams_progress_with_the_callers_token() {
    let fx = fake();
    let (tx, mut rx) = crate::notices::channel(Arc::default());
    let result = call(&fx.daemon, &fx.call("fake.progress", json!({})), Some(tx), None, None).await.unwrap();
    assert!(result.get().contains("done"));
    let progress = rx.recv().await.unwrap();
    assert_eq!(progress.method(), Some("notifications/progress"));
    let params: Value = serde_json::from_str::<Value>(progress.as_str()).unwrap()["params"].clone();
    assert_eq!(params["progressToken"], "mcpx-call", "the caller sees its own token");
    assert_eq!(params["message"], "half");
}

#[tokio::test]
async fn call_says_what_it_waits_on_only_when_asked() {
    let fx = fake();
    let statuses = |rx: &mut tokio::sync::mpsc::UnboundedReceiver<Value>| {
        let mut phases = Vec::new();
        while let Ok(s) = rx.try_recv() {
            phases.push(s);
        }
        phases
    };
    let req = fx.call("fake.echo", json!({ "message": "hi" }));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    call(&fx.daemon, &req, None, Some(tx), None).await.unwrap();
    assert_eq!(
        statuses(&mut rx),
        [
            json!({ "phase": "starting", "server": "fake", "command": "server" }),
            json!({ "phase": "calling", "server": "fake", "tool": "echo" }),
        ],
        "a first call starts the server"
    );
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    call(&fx.daemon, &req, None, Some(tx), None).await.unwrap();
    assert_eq!(statuses(&mut rx), [json!({ "phase": "calling", "server": "fake", "tool": "echo" })]);
    let (tx, mut rx) = crate::notices::channel(Arc::default());
    call(&fx.daemon, &req, Some(tx), None, None).await.unwrap();
    assert!(rx.try_recv().is_none(), "no status among the notifications");
}

#[tokio::test]
async fn a_call_waiting_for_a_busy_exclusive_instance_says_so() {
    let fx = Fixture::new(&[("fake", json!({ "sharing": "exclusive" }))]);
    let daemon = fx.daemon.clone();
    let mut slow = fx.call("fake.slow", json!({}));
    slow.timeout_ms = Some(0);
    let holder = tokio::spawn(async move { call(&daemon, &slow, None, None, None).await });
    let busy = || status(&fx.daemon).instances.iter().any(|i| i.calls == 1);
    tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while !busy() {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the slow call holds the instance");
    let mut req = fx.call("fake.echo", json!({ "message": "hi" }));
    req.timeout_ms = Some(200);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let e = call(&fx.daemon, &req, None, Some(tx), None).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Timeout);
    let first = rx.try_recv().ok();
    assert_eq!(
        first,
        Some(json!({ "phase": "waiting", "server": "fake",
            "reason": "its instance is busy with another call (it is `exclusive`)" }))
    );
    holder.abort();
}

#[tokio::test]
async fn call_errors_have_their_kinds() {
    let fx = Fixture::new(&[("fake", json!({})), ("off", json!({ "disabled": true }))]);
    let kind = |r: Result<Box<RawValue>, ApiError>| r.unwrap_err().kind;
    assert_eq!(
        kind(call(&fx.daemon, &fx.call("nope.echo", json!({})), None, None, None).await),
        ErrorKind::UnknownServer
    );
    assert_eq!(kind(call(&fx.daemon, &fx.call("fake", json!({})), None, None, None).await), ErrorKind::Usage);
    assert_eq!(kind(call(&fx.daemon, &fx.call("fake.", json!({})), None, None, None).await), ErrorKind::Usage);
    assert_eq!(kind(call(&fx.daemon, &fx.request(), None, None, None).await), ErrorKind::Usage);
    assert_eq!(kind(call(&fx.daemon, &fx.call("fake.echo", json!([1])), None, None, None).await), ErrorKind::Usage);
    assert_eq!(kind(call(&fx.daemon, &fx.call("off.echo", json!({})), None, None, None).await), ErrorKind::Config);
    assert_eq!(fx.server.count("launch"), 0, "no error above starts a server");

    let failed = call(&fx.daemon, &fx.call("fake.fail", json!({})), None, None, None).await.unwrap_err();
    assert_eq!((failed.kind, failed.code), (ErrorKind::Rpc, Some(-32000)));
    assert!(failed.message.contains("answered tools/call with an error: it failed"), "{failed}");
    // The server is listed now: an unknown tool is refused before it is sent.
    let unknown = call(&fx.daemon, &fx.call("fake.nope", json!({})), None, None, None).await.unwrap_err();
    assert_eq!(unknown.kind, ErrorKind::UnknownTool);
    assert_eq!(fx.server.count("tools/call nope"), 0);
    let slow = CallRequest { timeout_ms: Some(50), ..fx.call("fake.slow", json!({})) };
    assert_eq!(kind(call(&fx.daemon, &slow, None, None, None).await), ErrorKind::Timeout);
    fx.server.wait_for("notifications/cancelled").await;
}

#[tokio::test]
async fn a_server_that_exits_mid_call_is_a_server_error_and_shows_in_status() {
    let fx = fake();
    let e = call(&fx.daemon, &fx.call("fake.exit", json!({})), None, None, None).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Server);
    assert!(e.message.contains("exited with code 3"), "{e}");
    let instance = status(&fx.daemon).instances.into_iter().find(|i| i.server == "fake").unwrap();
    assert_eq!(instance.state, "exited");
    assert_eq!(instance.last_error.as_deref(), Some("server exited with code 3"));
}

#[tokio::test]
async fn status_shows_each_instance_under_its_pool_key() {
    let fx = Fixture::new(&[("shared", json!({})), ("mine", json!({ "scope": "session", "supervised": false }))]);
    call(&fx.daemon, &fx.call("shared.echo", json!({ "message": "a" })), None, None, None).await.unwrap();
    let mut req = fx.call("mine.echo", json!({ "message": "b" }));
    req.caller.session = Some("s1".into());
    call(&fx.daemon, &req, None, None, None).await.unwrap();

    let status = status(&fx.daemon);
    assert_eq!(status.daemon.pid, std::process::id());
    assert_eq!(status.daemon.config_files, std::slice::from_ref(&fx.config));
    let rows: Vec<(&str, &str, &str, bool)> =
        status.instances.iter().map(|i| (i.server.as_str(), i.key.as_str(), i.state.as_str(), i.supervised)).collect();
    assert_eq!(rows, [("mine", "session:s1", "running", false), ("shared", "global", "running", true)]);
    assert!(status.instances.iter().all(|i| i.pid.is_some() && i.calls == 0));
}

#[tokio::test]
async fn a_call_scoped_instance_serves_one_call() {
    let fx = Fixture::new(&[("once", json!({ "scope": "call" }))]);
    for message in ["a", "b"] {
        call(&fx.daemon, &fx.call("once.echo", json!({ "message": message })), None, None, None).await.unwrap();
    }
    assert_eq!(fx.server.count("launch once call:"), 2, "{:?}", fx.server.log());
    assert_eq!(fx.server.count("terminate"), 2);
    assert!(status(&fx.daemon).instances.iter().all(|i| i.state != "running"));
}

#[tokio::test]
async fn restart_goes_through_the_supervisor_or_starts_again() {
    let fx = Fixture::new(&[("sup", json!({})), ("direct", json!({ "supervised": false }))]);
    let named = |server: &str| RestartRequest { server: Some(server.into()), ..fx.request() };
    call(&fx.daemon, &fx.call("sup.echo", json!({ "message": "a" })), None, None, None).await.unwrap();
    let pid = fx.daemon.pool.instances()[0].info.pid();
    let restarted = restart(&fx.daemon, &named("sup")).await.unwrap();
    assert_eq!((restarted["restarted"].as_u64(), restarted["replaced"].as_u64()), (Some(1), Some(0)));
    assert_ne!(restarted["pid"].as_u64().map(|p| p as u32), pid, "a new process");
    assert_eq!((fx.server.count("restart"), fx.server.count("launch sup")), (1, 1), "the same supervisor");
    assert_eq!(fx.server.count("initialize"), 2, "initialized again");

    // Not running, or not supervised: started (again) under the caller's key.
    let restarted = restart(&fx.daemon, &named("direct")).await.unwrap();
    assert_eq!(restarted["restarted"], 0);
    let restarted = restart(&fx.daemon, &named("direct")).await.unwrap();
    assert_eq!(restarted["restarted"], 1);
    assert_eq!(fx.server.count("launch direct global"), 2);

    let e = restart(&fx.daemon, &named("nope")).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::UnknownServer);
    assert_eq!(restart(&fx.daemon, &fx.request()).await.unwrap_err().kind, ErrorKind::Usage);
}

#[tokio::test]
async fn restart_with_a_key_touches_only_that_instance() {
    let fx = Fixture::new(&[("mine", json!({ "scope": "session", "supervised": false }))]);
    for session in ["a", "b"] {
        let mut req = fx.call("mine.echo", json!({ "message": session }));
        req.caller.session = Some(session.into());
        call(&fx.daemon, &req, None, None, None).await.unwrap();
    }
    let only_a = RestartRequest { server: Some("mine".into()), key: Some("session:a".into()), ..fx.request() };
    let restarted = restart(&fx.daemon, &only_a).await.unwrap();
    assert_eq!(restarted["restarted"], 1);
    assert_eq!(fx.server.count("launch mine session:a"), 2);
    assert_eq!(fx.server.count("launch mine session:b"), 1);
}

#[tokio::test]
async fn refresh_reports_per_server() {
    let fx = Fixture::new(&[("a", json!({})), ("b", json!({})), ("off", json!({ "disabled": true }))]);
    let all = refresh(&fx.daemon, &fx.request()).await.unwrap();
    assert_eq!(all, json!({ "a": { "ok": true }, "b": { "ok": true } }));
    // Running now: listed again without a second start.
    refresh(&fx.daemon, &fx.request()).await.unwrap();
    assert_eq!((fx.server.count("launch"), fx.server.count("tools/list")), (2, 4));
    let e = refresh(&fx.daemon, &RefreshRequest { server: Some("nope".into()), ..fx.request() }).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::UnknownServer);
}

#[tokio::test]
async fn stop_stops_the_daemons_own_children_and_asks_it_to_exit() {
    let fx = Fixture::new(&[("sup", json!({})), ("direct", json!({ "supervised": false }))]);
    for target in ["sup.echo", "direct.echo"] {
        call(&fx.daemon, &fx.call(target, json!({ "message": "x" })), None, None, None).await.unwrap();
    }
    assert_eq!(stop(&fx.daemon, &fx.request()).await, json!({ "stopping": true }));
    fx.daemon.exit_requested().await;
    assert_eq!(fx.daemon.exit(), Exit::Stop);
    assert_eq!(fx.server.count("terminate"), 1, "only the direct child is stopped; the supervisor keeps its server");
}

#[tokio::test]
async fn upgrade_refuses_what_is_not_an_executable_file() {
    let fx = fake();
    let to = |binary: PathBuf| UpgradeRequest { binary: Some(binary) };
    let e = upgrade(&fx.daemon, &to(fx.config.with_file_name("missing"))).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Usage);
    assert!(
        e.message.starts_with("cannot upgrade, the daemon keeps running: ") && e.message.contains("missing"),
        "{e}"
    );
    let e = upgrade(&fx.daemon, &to(fx.config.clone())).await.unwrap_err();
    assert!(e.message.contains("is not executable (mode 0"), "{e}");
}

#[tokio::test]
async fn health_names_this_daemon() {
    let fx = fake();
    let health = health(&fx.daemon);
    assert_eq!(health["pid"], std::process::id());
    assert_eq!(health["started_at_ms"], fx.daemon.started_at);
}

#[tokio::test]
async fn split_target_takes_the_longest_configured_server_name() {
    let fx = Fixture::new(&[("a", json!({})), ("a.b", json!({}))]);
    let config = fx.daemon.resolve_for(&fx.caller()).unwrap();
    let target = |t| Naming { server: None, name: None, target: Some(t) };
    assert_eq!(split_target(&config, target("a.b.c"), &TOOL).unwrap(), ("a.b".into(), "c".into()));
    assert_eq!(split_target(&config, target("a.x"), &TOOL).unwrap(), ("a".into(), "x".into()));
    assert_eq!(split_target(&config, target("z.x"), &TOOL).unwrap_err().kind, ErrorKind::UnknownServer);
    let named = Naming { server: Some("s"), name: Some("t"), target: None };
    assert_eq!(split_target(&config, named, &TOOL).unwrap(), ("s".into(), "t".into()));
}
