//! `mcpx call`'s arguments as people type them (`key=value` typed by the tool's
//! schema, `key:=JSON`, `key=@FILE`), the checks made before a call with the tool's
//! usage, and "did you mean" and the right hint for mistyped names. The human
//! outputs are snapshotted.

use serde_json::{Value, json};

use crate::harness::{World, fake_server};

/// A world with the fake server as `everything`, recording what it receives, and
/// a second server that is never started.
fn world() -> World {
    let w = World::new(json!({}));
    let record = w.path("record.jsonl");
    w.set_servers(json!({
        "everything": { "command": fake_server(), "env": { "FAKE_RECORD": record } },
        "filesystem": { "command": "mcpx-no-such-command" },
    }));
    w
}

/// The `arguments` of every `tools/call` the fake server received, in order.
fn calls_received(w: &World) -> Vec<Value> {
    let text = std::fs::read_to_string(w.path("record.jsonl")).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m["method"] == "tools/call")
        .map(|m| m["params"]["arguments"].clone())
        .collect()
}

/// Runs `mcpx <args>`, expects exit 2 and nothing on stdout, and returns stderr with
/// the world's directory redacted.
#[track_caller]
fn usage_error(w: &World, args: &[&str]) -> String {
    let run = w.run(args);
    assert_eq!(run.code, 2, "`mcpx {}`: {run:?}", args.join(" "));
    assert!(run.stdout.is_empty(), "errors go to stderr: {run:?}");
    w.redact(run.stderr.trim_end())
}

/// `key=value` values get the types of the tool's schema, on a server never listed
/// (it is listed first); `:=` forces JSON and `=@FILE` reads a file.
#[test]
fn key_value_arguments_are_typed_by_the_schema() {
    let w = world();
    let file = w.path("message.txt");
    std::fs::write(&file, "from a file").unwrap();
    let at_file = format!("message=@{}", file.display());
    assert_eq!(w.run(&["call", "everything.split", "message=7", "pieces=2", "delay_ms:=0"]).ok(), "7\n");
    assert_eq!(w.run(&["call", "everything.echo", &at_file]).ok(), "from a file\n");
    assert_eq!(w.run(&["call", "--server", "everything", "--tool", "echo", "message=true"]).ok(), "true\n");
    // The JSON object form still works, and passes the object as it is.
    assert_eq!(w.call("everything.echo", r#"{"message":"json"}"#).ok(), "json\n");
    assert_eq!(
        calls_received(&w),
        [
            json!({ "message": "7", "pieces": 2, "delay_ms": 0 }),
            json!({ "message": "from a file" }),
            json!({ "message": "true" }),
            json!({ "message": "json" }),
        ]
    );
}

/// A missing required argument, a wrongly typed one and an unknown one are caught
/// before the call: exit 2 with the tool's usage, and the server gets nothing.
#[test]
fn mistakes_in_arguments_show_the_usage_and_call_nothing() {
    let w = world();
    insta::assert_snapshot!("missing_required", usage_error(&w, &["call", "everything.split", "pieces=2"]));
    insta::assert_snapshot!("wrong_type", usage_error(&w, &["call", "everything.split", "message=hi", "pieces=two"]));
    insta::assert_snapshot!("unknown_argument", usage_error(&w, &["call", "everything.echo", "mesage=hi"]));
    insta::assert_snapshot!("with_descriptions", usage_error(&w, &["call", "everything.test_sampling"]));
    insta::assert_snapshot!("not_in_enum", usage_error(&w, &["call", "everything.bad_reply", "kind=other"]));
    // The JSON form is checked too once the schema is cached (unknown keys pass there).
    insta::assert_snapshot!("json_wrong_type", usage_error(&w, &["call", "everything.slow", r#"{"ms":"5"}"#]));
    insta::assert_snapshot!("not_an_argument", usage_error(&w, &["call", "everything.echo", "message=hi", "oops"]));
    assert_eq!(calls_received(&w), Vec::<Value>::new());
}

/// Mistyped servers and tools get the closest names, also across `-`/`_`; the
/// other ways of writing a tool get the dotted form.
#[test]
fn mistyped_names_get_did_you_mean_and_the_right_hint() {
    let w = world();
    insta::assert_snapshot!("unknown_server", usage_error(&w, &["call", "everythng.echo", "message=hi"]));
    insta::assert_snapshot!("unknown_server_tools", usage_error(&w, &["tools", "filesystme"]));
    insta::assert_snapshot!("unknown_tool", usage_error(&w, &["call", "everything.ehco", "message=hi"]));
    insta::assert_snapshot!("unknown_tool_separator", usage_error(&w, &["call", "everything.bad-reply", "{}"]));
    insta::assert_snapshot!("slash", usage_error(&w, &["call", "everything/echo"]));
    insta::assert_snapshot!("mcp_side_name", usage_error(&w, &["call", "everything__echo", "message=hi"]));
    insta::assert_snapshot!("server_space_tool", usage_error(&w, &["call", "everything", "echo", "message=hi"]));
    insta::assert_snapshot!("server_only", usage_error(&w, &["call", "everything"]));
    // `--json` keeps one error object, with its kind.
    let run = w.run(&["call", "everything.ehco", "--json"]);
    assert_eq!(run.code, 2);
    assert_eq!(run.json()["error"]["kind"], "unknown_tool");
}

/// `mcpx call` makes one request to the daemon, `POST /v1/call`, whichever form its
/// arguments take (`key=value` pairs, one JSON object, none, `--server`/`--tool`):
/// no `/v1/tools` first and no `/v1/health`. Its pairs go as typed, a file's text
/// read, for the daemon to type by the tool's schema. The daemon here is the test's
/// own listener on the daemon's socket, which records what it receives.
#[test]
fn call_is_one_request_to_the_daemon() {
    use crate::harness::scripted::{Answer, Body, Scripted};
    let w = World::new(json!({}));
    let daemon = Scripted::start_unix(&w.path("run/daemon.sock"), |request, _| match request.path() {
        "/v1/call" => Answer {
            status: 200,
            headers: vec![("content-type".into(), "application/x-ndjson".into())],
            body: Body::Full("{\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"recorded\"}]}}\n".into()),
        },
        _ => Answer::json(200, json!({})),
    });
    let file = w.path("note.txt");
    std::fs::write(&file, "from a file").unwrap();
    let from_file = format!("note=@{}", file.display());
    let forms: [&[&str]; 4] = [
        &["call", "everything.echo", "message=hi", "n:=5", &from_file],
        &["call", "everything.echo", r#"{"message":"hi"}"#],
        &["call", "everything.echo"],
        &["call", "--server", "everything", "--tool", "echo", "message=hi"],
    ];
    for args in forms {
        let before = daemon.seen().len();
        let run = w.run(args);
        assert_eq!((run.code, run.stdout.as_str()), (0, "recorded\n"), "{run:?}");
        let sent: Vec<String> = daemon.seen()[before..].iter().map(|r| format!("{} {}", r.method, r.path())).collect();
        assert_eq!(sent, ["POST /v1/call"], "`mcpx {}`", args.join(" "));
    }
    let first: Value = serde_json::from_str(&daemon.seen()[0].body).unwrap();
    assert_eq!(
        first["arguments"],
        json!([{ "key": "message", "value": "hi" }, { "key": "n", "value": "5", "json": true },
            { "key": "note", "value": "from a file" }]),
        "{first}"
    );
    assert_eq!(first["shown"], "call everything.echo", "{first}");
}
