//! The activity record (`mcpx activity`): a call by every path (the CLI, `serve`,
//! `/mcp`, `/mcp/<server>`, `exec`, `serve --code`), each with its client, outcome
//! and duration; refusals, server requests and pin events; arguments kept with secrets
//! masked; and calls that keep working when the record cannot be written.

use std::io::{BufRead, BufReader, Write};
use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{Serve, Spawned, World, e2e_dir, fake_server};
use crate::serve::{initialize, rpc};

/// `mcpx serve` initialized as the MCP client `name`; its `tools/call` of `tool` is
/// answered before this returns.
fn serve_call(w: &World, name: &str, tool: &str) {
    let mut cmd = w.command();
    cmd.arg("serve").stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped());
    let mut child = Spawned(cmd.spawn().unwrap());
    let mut stdin = child.0.stdin.take().unwrap();
    let mut lines = BufReader::new(child.0.stdout.take().unwrap()).lines();
    let init = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": { "protocolVersion": "2025-11-25",
        "capabilities": {}, "clientInfo": { "name": name, "version": "1.0" } } });
    let call = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": { "name": tool, "arguments": { "message": name } } });
    writeln!(stdin, "{init}").unwrap();
    lines.next().unwrap().unwrap();
    writeln!(stdin, "{}", json!({ "jsonrpc": "2.0", "method": "notifications/initialized" })).unwrap();
    writeln!(stdin, "{call}").unwrap();
    let answer = lines.next().unwrap().unwrap();
    assert!(answer.contains(name), "{answer}");
}

fn entries(w: &World, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["activity", "--json", "--limit", "0"];
    all.extend(args);
    let out = w.run(&all).ok();
    out.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect()
}

/// The record once it holds at least `count` entries (it is written off the call's
/// path, so an entry may land a moment after its answer).
fn recorded(w: &World, count: usize) -> Vec<Value> {
    let mut seen = Vec::new();
    for _ in 0..200 {
        seen = entries(w, &[]);
        if seen.len() >= count {
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    seen
}

/// The one entry `pick` keeps.
#[track_caller]
fn one(seen: &[Value], what: &str, pick: impl Fn(&Value) -> bool) -> Value {
    let found: Vec<&Value> = seen.iter().filter(|e| pick(e)).collect();
    assert_eq!(found.len(), 1, "{what}: {found:?}\nin {seen:#?}");
    found[0].clone()
}

fn call(id: u64, name: &str, message: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": { "name": name, "arguments": { "message": message } } })
}

#[test]
fn every_path_records_its_calls_with_its_client_outcome_and_duration() {
    let mut w = World::new(json!({}));
    w.env.push(("MCPX_DENO".to_owned(), e2e_dir().join("node_modules/.bin/deno").display().to_string()));
    let definitions = w.path("definitions.json");
    std::fs::write(&definitions, "{}").unwrap();
    w.set_servers(json!({ "fake": { "command": fake_server(), "env": { "FAKE_DEFINITIONS": definitions } } }));
    // The shell: one call answered, one whose server exits.
    assert_eq!(w.call("fake.echo", r#"{"message":"by-shell"}"#).ok(), "by-shell\n");
    assert_ne!(w.call("fake.exit", r#"{"code":3}"#).code, 0);
    // Two MCP clients over `mcpx serve` at once, each named by its clientInfo.
    std::thread::scope(|s| {
        s.spawn(|| serve_call(&w, "client-one", "fake__echo"));
        s.spawn(|| serve_call(&w, "client-two", "fake__echo"));
    });
    // The HTTP endpoint: the aggregate and one server passed through.
    let (session, _) = initialize(&w, "/mcp", "2025-11-25");
    assert!(rpc(&w, "/mcp", &session, call(2, "fake__echo", "by-http"))["result"].is_object());
    let (session, _) = initialize(&w, "/mcp/fake", "2025-11-25");
    assert!(rpc(&w, "/mcp/fake", &session, call(2, "echo", "by-passthrough"))["result"].is_object());
    // A call that carries progress, and one during which the server asks the client.
    let mut serve = Serve::start(&w, json!({ "elicitation": {} }));
    let mut seen = Vec::new();
    let params = json!({ "name": "fake__progress", "arguments": { "count": 3, "interval_ms": 10 },
        "_meta": { "progressToken": "p" } });
    assert!(serve.request_seeing("tools/call", params, &mut seen)["result"].is_object());
    assert_eq!(seen.iter().filter(|m| m["method"] == "notifications/progress").count(), 3, "{seen:?}");
    serve.send(json!({ "jsonrpc": "2.0", "id": 50, "method": "tools/call", "params": { "name": "fake__elicit" } }));
    loop {
        let m = serve.recv();
        if m["method"] == "elicitation/create" {
            serve.send(json!({ "jsonrpc": "2.0", "id": m["id"], "result": { "action": "decline" } }));
        } else if m["id"] == 50 {
            break;
        }
    }
    drop(serve);
    // Code mode: a script from the shell, and one an MCP client runs.
    let exec = w.run(&["exec", "return (await fake.echo({ message: 'by-exec' })).content"]);
    assert_eq!(exec.code, 0, "{}", exec.stderr);
    let mut code = w.command();
    code.args(["serve", "--code"]);
    let mut code = Serve::start_cmd_args(code, json!({}));
    let script = json!({ "name": "mcpx_exec",
        "arguments": { "code": "return (await fake.echo({ message: 'by-serve-code' })).content" } });
    let ran = code.request("tools/call", script);
    assert_eq!(ran["result"]["isError"], false, "{ran}");
    drop(code);
    // A tool new on the pinned server is held: refused on the shell and on HTTP.
    std::fs::write(&definitions, json!({ "fresh": { "description": "New." } }).to_string()).unwrap();
    w.run(&["restart", "fake"]).ok();
    assert_eq!(w.call("fake.fresh", r#"{"message":"x"}"#).code, 2);
    let (session, _) = initialize(&w, "/mcp/fake", "2025-11-25");
    assert!(rpc(&w, "/mcp/fake", &session, call(2, "fresh", "x"))["error"].is_object());

    let seen = recorded(&w, 14);
    let cwd = w.dir.path().display().to_string();
    let shell = one(&seen, "shell", |e| e["path"] == "shell" && e["name"] == "echo");
    let client = shell["client"].as_str().unwrap();
    assert!(client.starts_with("shell pid:") && client.ends_with(&cwd), "{shell}");
    assert!(shell["duration_us"].as_u64().unwrap() > 0 && shell["pid"].as_u64().is_some(), "{shell}");
    let failed = one(&seen, "exit", |e| e["name"] == "exit");
    assert_eq!(failed["outcome"], "failed");
    assert!(failed["error"].as_str().unwrap().contains("exited with code 3"), "{failed}");
    let mut clients: Vec<&str> = seen
        .iter()
        .filter(|e| e["path"] == "serve" && e["name"] == "echo")
        .map(|e| e["client"].as_str().unwrap())
        .collect();
    clients.sort();
    assert_eq!(clients, ["client-one 1.0", "client-two 1.0"], "each MCP client by its clientInfo");
    for (path, name) in [("/mcp", "echo"), ("/mcp/fake", "echo"), ("serve --code", "echo")] {
        let e = one(&seen, path, |e| e["path"] == path && e["name"] == name && e["outcome"] == "ok");
        assert_eq!(e["client"], "t 1", "{e}");
        assert!(e["duration_us"].as_u64().unwrap() > 0, "{e}");
    }
    let exec = one(&seen, "exec", |e| e["path"] == "exec");
    assert!(exec["client"].as_str().unwrap().starts_with("shell pid:"), "{exec}");
    assert_eq!(exec["outcome"], "ok");
    let progress = one(&seen, "progress", |e| e["name"] == "progress");
    assert_eq!((&progress["path"], progress["notifications"].as_u64()), (&json!("serve"), Some(3)), "{progress}");
    let asked = one(&seen, "elicitation", |e| e["method"] == "elicitation/create");
    assert_eq!(
        (&asked["name"], &asked["answered"], &asked["outcome"]),
        (&json!("elicit"), &json!("decline"), &json!("ok"))
    );
    let refused: Vec<&Value> = seen.iter().filter(|e| e["name"] == "fresh" && e["outcome"] == "refused").collect();
    let paths: Vec<&str> = refused.iter().map(|e| e["path"].as_str().unwrap()).collect();
    assert_eq!(paths.len(), 2, "{refused:?}");
    assert!(paths.contains(&"shell") && paths.contains(&"/mcp/fake"), "{paths:?}");
    assert!(refused.iter().all(|e| e["error"].as_str().unwrap().contains("held")), "{refused:?}");
    let held = one(&seen, "pin event", |e| e["method"] == "pin/held");
    assert_eq!((&held["name"], &held["outcome"], &held["path"]), (&json!("fresh"), &json!("held"), &json!("pins")));

    // Per server and tool: calls, errors, percentiles.
    let stats: Vec<Value> =
        w.run(&["activity", "--stats", "--json"]).ok().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let exit = stats.iter().find(|s| s["name"] == "exit").unwrap_or_else(|| panic!("{stats:?}"));
    assert_eq!(exit["error_rate"].as_f64(), Some(1.0));
    let echo = stats.iter().find(|s| s["name"] == "echo").unwrap();
    assert!(echo["p99_ms"].as_f64() >= echo["p50_ms"].as_f64(), "{echo}");
    // Filters, one entry whole, and the record emptied.
    assert_eq!(entries(&w, &["--errors"]).len(), seen.iter().filter(|e| e["outcome"] != "ok").count());
    assert!(entries(&w, &["--server", "nope"]).is_empty());
    assert!(entries(&w, &["--until", "1h"]).is_empty(), "nothing is older than an hour");
    let shown = w.run(&["activity", "show", &shell["id"].to_string()]).ok();
    assert!(shown.contains("client: shell pid:") && shown.contains("outcome: ok"), "{shown}");
    assert_eq!(w.run(&["activity", "show", "7"]).code, 2);
    assert!(w.run(&["activity", "--clear"]).ok().contains("empty"));
    assert!(entries(&w, &[]).is_empty());
}

#[test]
fn follow_prints_each_call_as_it_is_recorded() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    assert_eq!(w.call("fake.echo", r#"{"message":"before"}"#).ok(), "before\n");
    let mut cmd = w.command();
    cmd.args(["activity", "--follow", "--json"]).stdout(std::process::Stdio::piped());
    let mut follower = Spawned(cmd.spawn().unwrap());
    let mut lines = BufReader::new(follower.0.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(first["name"], "echo");
    w.call("fake.counter", "{}").ok();
    let next: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(next["name"], "counter", "the new call, after what was there");
}

#[test]
fn kept_arguments_mask_every_secret_and_the_files_hold_none() {
    let mut w = World::new(json!({}));
    w.env.push(("FAKE_TOKEN".to_owned(), "env-token-7f3a".to_owned()));
    let value = w.path("value");
    std::fs::write(&value, "store-secret-91c2\n").unwrap();
    w.run_with(&["secret", "set", "api_key"], |c| {
        c.stdin(std::fs::File::open(&value).unwrap());
    })
    .ok();
    // A login as `mcpx auth login` keeps it, beside the user's secret.
    let store = w.path("state/secrets.json");
    let mut secrets: Value = serde_json::from_str(&std::fs::read_to_string(&store).unwrap()).unwrap();
    let login = json!({ "access_token": "login-access-4d1e", "refresh_token": "login-refresh-b8c0" }).to_string();
    secrets["secrets"]["oauth-9594c76830ce8f80"] = json!(login);
    std::fs::write(&store, secrets.to_string()).unwrap();
    let config = json!({
        "activity": { "arguments": true },
        "mcpServers": { "fake": { "command": fake_server(),
            "env": { "API_KEY": "${secret:api_key}", "TOKEN": "Bearer ${FAKE_TOKEN}" } } },
    });
    w.write_config(&config.to_string());
    let message = "store-secret-91c2 and env-token-7f3a, login-access-4d1e login-refresh-b8c0, then plain words";
    assert_eq!(w.call("fake.echo", &json!({ "message": message }).to_string()).ok(), format!("{message}\n"));
    let seen = recorded(&w, 1);
    let kept = &seen[0];
    let (arguments, result) = (kept["arguments"].as_str().unwrap(), kept["result"].as_str().unwrap());
    let masked = "[secret] and [secret], [secret] [secret], then plain words";
    assert_eq!(arguments, json!({ "message": masked }).to_string(), "{kept}");
    assert!(result.contains(masked), "{result}");
    // The files hold the batches compressed: what they hold decompressed is the whole
    // record as listed, searched too.
    let everything = w.run(&["activity", "--json", "--limit", "0"]).ok();
    w.run(&["stop"]).ok();
    let files = std::fs::read_dir(w.path("state/activity")).unwrap().map(|f| std::fs::read(f.unwrap().path()).unwrap());
    for bytes in files.chain([everything.into_bytes()]) {
        for secret in ["store-secret-91c2", "env-token-7f3a", "login-access-4d1e", "login-refresh-b8c0"] {
            assert!(!bytes.windows(secret.len()).any(|w| w == secret.as_bytes()), "{secret} is in the record");
        }
    }
    // Off by default: nothing of a call's arguments is kept.
    w.set_servers(json!({ "fake": { "command": fake_server() } }));
    w.call("fake.echo", r#"{"message":"x"}"#).ok();
    let seen = recorded(&w, 2);
    assert!(seen[0].get("arguments").is_none(), "{}", seen[0]);
}

/// Whether `done` holds within 5 s.
fn wait_for(mut done: impl FnMut() -> bool) -> bool {
    (0..200).any(|_| {
        done() || {
            std::thread::sleep(Duration::from_millis(25));
            false
        }
    })
}

/// A mount for the length of a test, lazily unmounted on drop.
struct Mount(std::path::PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        #[allow(clippy::disallowed_methods)] // Reason: umount is the tool for this.
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Runs `mount` with `args`; false when mounts are not allowed here (not root).
fn mount(args: &[&str]) -> bool {
    #[allow(clippy::disallowed_methods)] // Reason: mount is the tool for this.
    let out = std::process::Command::new("mount").args(args).output().unwrap();
    out.status.success()
}

/// With the record's directory on a full tmpfs, then on a read-only bind mount, calls
/// are answered, and `status` and `doctor` say the record fails.
#[test]
fn a_full_or_read_only_record_never_fails_a_call() {
    for case in ["full", "read-only"] {
        let w = World::new(json!({ "fake": { "command": fake_server() } }));
        let dir = w.path("state/activity");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        let _mounted = match case {
            "full" => {
                if !mount(&["-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", dir.to_str().unwrap()]) {
                    eprintln!("skipped: mounting a tmpfs needs root");
                    return;
                }
                let mounted = Mount(dir.clone());
                // The record opens, then the disk fills under it.
                assert_eq!(w.call("fake.echo", r#"{"message":"first"}"#).ok(), "first\n");
                assert!(wait_for(|| !entries(&w, &[]).is_empty()), "the first call is recorded");
                let mut filler = std::fs::File::create(dir.join("filler")).unwrap();
                while filler.write_all(&[0u8; 4 << 10]).is_ok() {}
                mounted
            }
            _ => {
                if !mount(&["--bind", dir.to_str().unwrap(), dir.to_str().unwrap()]) {
                    eprintln!("skipped: a bind mount needs root");
                    return;
                }
                let mounted = Mount(dir.clone());
                assert!(mount(&["-o", "remount,bind,ro", dir.to_str().unwrap()]));
                mounted
            }
        };
        for i in 0..200 {
            let message = format!("{case}-{i}-{}", "x".repeat(200));
            assert_eq!(w.call("fake.echo", &json!({ "message": message }).to_string()).ok(), format!("{message}\n"));
        }
        assert!(wait_for(|| w.status()["daemon"]["activity_error"].is_string()), "{case}: {}", w.status());
        let status = w.status();
        let error = status["daemon"]["activity_error"].as_str().unwrap();
        let said = if case == "full" { "No space left" } else { "Read-only file system" };
        assert!(error.contains(said), "{case}: {error}");
        let doctor = w.run(&["doctor"]);
        assert!(doctor.stdout.contains("activity"), "{case}: {}", doctor.stdout);
        if case == "full" {
            // Room again: the record takes calls again.
            std::fs::remove_file(dir.join("filler")).unwrap();
            let before = entries(&w, &[]).len();
            for _ in 0..3 {
                w.call("fake.echo", r#"{"message":"after"}"#).ok();
            }
            assert!(wait_for(|| entries(&w, &[]).len() >= before + 3), "the record recovers: {}", w.log());
        }
        w.run(&["stop"]).ok();
    }
}
