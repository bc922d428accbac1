//! The core CLI against the fake server: calls, discovery from the cache,
//! sharing one instance among concurrent callers, and stopping everything.

use std::time::Duration;

use serde_json::json;

use crate::harness::{World, alive, fake_server, wait_until};

#[test]
fn call_starts_the_daemon_and_discovery_answers_from_the_cache() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    // Before any start: listed, unread, and nothing runs.
    let row = w.ls_row("fake");
    assert_eq!(row["state"], "unread");
    assert_eq!(row["tools"], serde_json::Value::Null);
    assert!(w.status()["instances"].as_array().unwrap().is_empty(), "ls must not start a server");

    assert_eq!(w.call("fake.echo", r#"{"message":"hi"}"#).ok(), "hi\n");
    let row = w.ls_row("fake");
    assert_eq!(row["state"], "running");
    assert_eq!(row["live"], 1);
    let tools = row["tools"].as_u64().unwrap();
    assert!(tools >= 10, "{row}");

    let hits = w.run(&["search", "echo", "--json"]).json();
    assert_eq!(hits[0]["server"], "fake");
    assert_eq!(hits[0]["tool"], "echo");

    // Tool objects exactly as the server sent them, unknown fields included.
    let listed = w.run(&["tools", "fake", "--json"]).json();
    assert_eq!(listed.as_array().unwrap().len() as u64, tools);
    assert!(listed.as_array().unwrap().iter().all(|t| t["x-fake"] == true), "{listed}");
    let one = w.run(&["tools", "fake", "echo"]).json();
    assert_eq!(one["name"], "echo");
    assert!(one["inputSchema"]["properties"]["message"].is_object());

    let pid = w.instance("fake").unwrap()["pid"].as_i64().unwrap() as i32;
    w.run(&["stop", "--all"]).ok();
    wait_until("the server process is gone", Duration::from_secs(10), || !alive(pid));
    assert!(w.daemon_pid().is_none(), "daemon.pid is removed at stop");

    // From the cache: a new daemon answers, and starts no server.
    let row = w.ls_row("fake");
    assert_eq!(row["state"], "ready");
    assert_eq!(row["tools"].as_u64(), Some(tools));
    assert!(w.status()["instances"].as_array().unwrap().is_empty(), "ls after stop must not start a server");
    assert_eq!(w.run(&["search", "counter", "--json"]).json()[0]["tool"], "counter");
}

#[test]
fn twenty_concurrent_calls_share_one_instance() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    // Start the instance first so every call below goes to the same process.
    w.call("fake.echo", r#"{"message":"warm"}"#).ok();
    let handles: Vec<_> = (0..20)
        .map(|i| {
            let mut cmd = w.command();
            cmd.args(["call", "fake.echo", &json!({ "message": format!("message {i}"), "delay_ms": 300 }).to_string()]);
            #[allow(clippy::disallowed_methods)] // Reason: the binary under test, from many threads.
            std::thread::spawn(move || cmd.output().unwrap())
        })
        .collect();
    for (i, h) in handles.into_iter().enumerate() {
        let out = h.join().unwrap();
        assert!(out.status.success(), "call {i}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(String::from_utf8_lossy(&out.stdout), format!("message {i}\n"));
    }
    let most: u64 = w.call("fake.inflight", "{}").ok().trim().parse().unwrap();
    assert!(most > 1, "the server saw at most {most} call in flight");
    assert_eq!(w.status()["instances"].as_array().unwrap().len(), 1);
}

#[test]
fn one_process_serves_every_call_and_keeps_its_state() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    assert_eq!(w.call("fake.counter", "{}").ok(), "1\n");
    assert_eq!(w.call("fake.counter", "{}").ok(), "2\n");
    let pid = w.instance("fake").unwrap()["pid"].clone();
    assert_eq!(w.call("fake.pid", "{}").ok().trim(), pid.to_string());
}

#[test]
fn a_reply_written_in_pieces_arrives_whole() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    let out = w.call("fake.split", r#"{"message":"in pieces","pieces":7,"delay_ms":20}"#).ok();
    assert_eq!(out, "in pieces\n");
}

#[test]
fn call_json_prints_the_whole_result_and_is_error_exits_1() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    let run = w.run(&["call", "fake.echo", r#"{"message":"x"}"#, "--json"]);
    assert_eq!(run.json(), json!({ "content": [{ "type": "text", "text": "x" }] }));
    let run = w.call("fake.env", r#"{"name":"MCPX_SURELY_UNSET"}"#);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(run.stdout, "unset\n");
    // Arguments from stdin.
    let run = w.run_with(&["call", "fake.echo", "-"], |c| {
        c.stdin(std::process::Stdio::piped());
    });
    assert_ne!(run.code, 0, "empty stdin is not a JSON object");
    let mut cmd = w.command();
    cmd.args(["call", "--server", "fake", "--tool", "echo", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(br#"{"message":"from stdin"}"#).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "from stdin\n");
}

#[test]
fn timeout_exits_5_and_cancels_upstream() {
    let w = World::new(json!({}));
    let record = w.path("record.jsonl");
    w.set_servers(json!({ "fake": { "command": fake_server(), "env": { "FAKE_RECORD": record } } }));
    let run = w.run(&["call", "fake.slow", r#"{"ms":5000}"#, "--timeout", "200ms", "--json"]);
    assert_eq!(run.code, 5, "{run:?}");
    assert_eq!(run.json()["error"]["kind"], "timeout");
    // The server was told, with the upstream id of that call.
    wait_until("the cancellation is recorded", Duration::from_secs(10), || {
        std::fs::read_to_string(&record).unwrap_or_default().contains("notifications/cancelled")
    });
    let text = std::fs::read_to_string(&record).unwrap();
    let lines: Vec<serde_json::Value> = text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let call = lines.iter().find(|m| m["method"] == "tools/call").unwrap();
    let cancel = lines.iter().find(|m| m["method"] == "notifications/cancelled").unwrap();
    assert_eq!(cancel["params"]["requestId"], call["id"]);
    // The instance stays up for the next call.
    assert_eq!(w.call("fake.echo", r#"{"message":"after"}"#).ok(), "after\n");
}

#[test]
fn a_list_change_rereads_the_schema_cache() {
    // The tool added is listed at once: pinning would hold it (tests/it/pins.rs).
    let w = World::new(json!({ "fake": { "command": fake_server(), "mcpx": { "pinning": "off" } } }));
    let before = w.ls_row("fake");
    assert_eq!(before["state"], "unread");
    w.call("fake.add_tool", r#"{"name":"brand_new"}"#).ok();
    wait_until("the new tool is listed", Duration::from_secs(10), || {
        w.run(&["search", "brand_new", "--json"])
            .json()
            .as_array()
            .is_some_and(|a| a.iter().any(|h| h["tool"] == "brand_new"))
    });
    assert_eq!(w.call("fake.brand_new", r#"{"message":"new"}"#).ok(), "new\n");
}

#[test]
fn restart_gives_a_new_process_and_logs_name_the_server() {
    let w = World::new(
        json!({ "fake": { "command": fake_server(), "env": { "FAKE_STDERR_ON_START": "hello from stderr" } } }),
    );
    w.call("fake.echo", r#"{"message":"x"}"#).ok();
    let first = w.instance("fake").unwrap()["pid"].as_i64().unwrap();
    w.run(&["restart", "fake"]).ok();
    let second = w.instance("fake").unwrap()["pid"].as_i64().unwrap();
    assert_ne!(first, second);
    assert!(!alive(first as i32));
    let logs = w.run(&["logs", "fake"]).ok();
    assert!(logs.contains("hello from stderr"), "{logs}");
    assert!(logs.lines().all(|l| l.contains("server=fake")), "{logs}");
}

/// `stop --all` leaves nothing: not the server, not a grandchild it forked and
/// left in its process group, even when the server ignores SIGTERM.
#[test]
fn stop_all_leaves_no_process_behind() {
    let w = World::new(json!({}));
    let pidfile = w.path("grandchild.pid");
    let script = format!("trap '' TERM; sleep 300 & echo $! > {}; exec {}", pidfile.display(), fake_server());
    w.set_servers(json!({ "s": { "command": "/bin/sh", "args": ["-c", script] } }));
    w.call("s.echo", r#"{"message":"x"}"#).ok();
    let server = w.instance("s").unwrap()["pid"].as_i64().unwrap() as i32;
    let grandchild: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
    assert!(alive(grandchild));
    w.run(&["stop", "--all"]).ok();
    wait_until("the server and its grandchild are gone", Duration::from_secs(10), || {
        !alive(server) && !alive(grandchild)
    });
}

/// CLIs racing on fresh directories start exactly one daemon between them.
#[test]
fn racing_clis_start_one_daemon() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let mut cmd = w.command();
            cmd.args(["ls", "--json"]);
            #[allow(clippy::disallowed_methods)] // Reason: the binary under test, from many threads.
            std::thread::spawn(move || cmd.output().unwrap())
        })
        .collect();
    for h in handles {
        let out = h.join().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let runtime = w.path("run").display().to_string();
    let daemons = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| alive(*pid))
            .filter(|pid| {
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
                cmdline.ends_with(b"\0daemon\0")
                    && String::from_utf8_lossy(&environ).contains(&format!("MCPX_RUNTIME_DIR={runtime}\0"))
            })
            .count()
    };
    wait_until("the losing daemons have exited", Duration::from_secs(10), || daemons() == 1);
}

#[test]
fn refresh_reads_an_unread_server_and_tools_starts_one_never_listed() {
    let w = World::new(json!({ "fake": { "command": fake_server(), "env": { "FAKE_PAGE_SIZE": "4" } } }));
    w.run(&["ls"]).ok();
    assert!(w.status()["instances"].as_array().unwrap().is_empty(), "ls must not start a server");
    // Named, a server never listed is started and listed (design: "Discovery").
    let before = w.run(&["tools", "fake", "--json"]).json();
    assert!(before.as_array().unwrap().len() > 8, "{before}");
    assert_eq!(w.status()["instances"].as_array().unwrap().len(), 1, "tools started the server it named");
    w.run(&["refresh", "fake"]).ok();
    // Every page of the paginated tools/list is in the cache.
    let tools = w.run(&["tools", "fake", "--json"]).json();
    assert!(tools.as_array().unwrap().len() > 8, "{tools}");
    assert_eq!(w.ls_row("fake")["tools"].as_u64().unwrap() as usize, tools.as_array().unwrap().len());
}

#[test]
fn logs_follow_prints_new_lines_about_one_server() {
    use std::io::BufRead;
    // Distinct entries (identical ones would share one instance and one name).
    let w = World::new(
        json!({ "fake": { "command": fake_server() }, "other": { "command": fake_server(), "env": { "X": "1" } } }),
    );
    w.call("other.echo", r#"{"message":"x"}"#).ok();
    let mut follow = w.command();
    follow.args(["logs", "fake", "-f", "-n", "0"]).stdout(std::process::Stdio::piped());
    let mut child = follow.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            if tx.send(line.unwrap_or_default()).is_err() {
                return;
            }
        }
    });
    // The follower may open the log after a first start was logged, so restart the
    // server (which logs) until a line arrives.
    let mut line = None;
    for _ in 0..40 {
        w.run(&["restart", "fake"]).ok();
        if let Ok(l) = rx.recv_timeout(Duration::from_millis(500)) {
            line = Some(l);
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let line = line.expect("no log line arrived");
    assert!(line.contains("server=fake"), "{line}");
}

/// Arguments of several MiB pass through the control API and the supervisor's
/// multi-frame stdin intact.
#[test]
fn large_arguments_pass_intact() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    let big = "z".repeat(5 << 20);
    let mut cmd = w.command();
    cmd.args(["call", "fake.echo", "-"]).stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    {
        use std::io::Write;
        child.stdin.take().unwrap().write_all(json!({ "message": big }).to_string().as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(out.stdout.len(), big.len() + 1);
}

#[test]
fn service_install_writes_a_unit_that_spares_the_supervisors() {
    let w = World::new(json!({}));
    let home = w.path("home");
    std::fs::create_dir(&home).unwrap();
    let run = w.run_with(&["service", "install"], |c| {
        c.env("HOME", &home).env_remove("XDG_CONFIG_HOME");
    });
    let out = run.ok();
    let unit = home.join(".config/systemd/user/mcpx.service");
    assert!(out.contains(&unit.display().to_string()), "{out}");
    let text = std::fs::read_to_string(&unit).unwrap();
    assert!(text.contains("KillMode=process") && text.contains(" daemon"), "{text}");
    let printed = w.run(&["service", "install", "--print"]).ok();
    assert!(printed.contains("KillMode=process"));
}

/// Replies far over the supervisor's buffer arrive whole while a daemon is attached
/// (flow control, not loss); a request over maxMessageBytes fails at once with a
/// size error; a closed output pipe ends the CLI quietly (SIGPIPE, no panic).
#[test]
fn big_replies_oversize_requests_and_closed_pipes() {
    let w = World::new(json!({ "fake": { "command": fake_server(), "mcpx": { "maxMessageBytes": "16MiB" } } }));
    let run = w.run(&["call", "fake.big", r#"{"line_bytes":12000000}"#, "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.json()["content"][0]["text"].as_str().unwrap().len() > 11_000_000);
    assert!(w.instance("fake").unwrap()["dropped_bytes"] == 0);

    let big = json!({ "message": "z".repeat(17 << 20) }).to_string();
    let mut cmd = w.command();
    cmd.args(["call", "fake.echo", "-", "--json"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    {
        use std::io::Write;
        child.stdin.take().unwrap().write_all(big.as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(4));
    let error: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(error["error"]["message"].as_str().unwrap().contains("it was not sent"), "{error}");

    let script = format!(
        "'{}' call fake.big '{{\"line_bytes\":2000000}}' | head -c 10 >/dev/null",
        crate::harness::mcpx_bin().display()
    );
    #[allow(clippy::disallowed_methods)] // Reason: a shell pipe that closes early.
    let piped = std::process::Command::new("/bin/bash")
        .args(["-c", &format!("{script}; echo ${{PIPESTATUS[0]}}")])
        .envs(w.launcher().command().get_envs().filter_map(|(k, v)| v.map(|v| (k.to_owned(), v.to_owned()))))
        .current_dir(w.dir.path())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&piped.stdout).trim(), "141", "{}", String::from_utf8_lossy(&piped.stderr));
    assert!(!String::from_utf8_lossy(&piped.stderr).contains("panicked"));
}

#[test]
fn relative_directories_mean_the_same_for_cli_and_daemon() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    let run = w.run_with(&["call", "fake.echo", r#"{"message":"rel"}"#], |c| {
        c.env("MCPX_STATE_DIR", "rel-state").env("MCPX_CACHE_DIR", "rel-cache").env("MCPX_RUNTIME_DIR", "rel-run");
    });
    assert_eq!(run.ok(), "rel\n");
    assert!(w.path("rel-run/daemon.sock").exists());
    assert!(w.path("rel-state/daemon.log").exists());
    let _ = w.run_with(&["stop", "--all"], |c| {
        c.env("MCPX_STATE_DIR", "rel-state").env("MCPX_CACHE_DIR", "rel-cache").env("MCPX_RUNTIME_DIR", "rel-run");
    });
}

/// One HTTP/1.1 answer read off `stream`: its head (lower-cased) and body.
fn read_answer(stream: &mut std::os::unix::net::UnixStream) -> Option<(String, Vec<u8>)> {
    use std::io::Read;
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).ok()? == 0 {
            return None;
        }
        got.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&got).to_lowercase();
    let length: usize =
        head.lines().find_map(|l| l.strip_prefix("content-length:")).map_or(0, |v| v.trim().parse().unwrap());
    let mut body = vec![0; length];
    stream.read_exact(&mut body).ok()?;
    Some((head, body))
}

/// Keep-alive on the control socket, and its drain (docs/api.md, "Keep-alive and the
/// drain"): one connection carries request after request; at `mcpx stop`, an idle
/// kept-alive connection is closed at once, and a connection accepted before the stop
/// whose request comes late is still answered, with `Connection: close`, then closed:
/// no request is read and left unanswered.
#[test]
fn the_control_socket_keeps_connections_alive_and_its_drain_drops_no_request() {
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    w.run(&["status"]).ok();
    let socket = w.path("run/daemon.sock");
    let request = b"GET /v1/health HTTP/1.1\r\nhost: localhost\r\n\r\n";
    let mut kept = UnixStream::connect(&socket).unwrap();
    for n in 0..3 {
        kept.write_all(request).unwrap();
        let (head, _) = read_answer(&mut kept).unwrap_or_else(|| panic!("answer {n} on one connection"));
        assert!(head.starts_with("http/1.1 200") && !head.contains("connection: close"), "{head}");
    }
    let mut late = UnixStream::connect(&socket).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let started = std::time::Instant::now();
    let mut stop = w.command();
    let mut stop = stop.arg("stop").stdout(std::process::Stdio::null()).spawn().unwrap();
    // The idle kept-alive connection closes without waiting for the drain's 10 s.
    kept.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(kept.read(&mut [0u8; 1]).unwrap(), 0, "the idle kept-alive connection was not closed");
    late.write_all(request).unwrap();
    let (head, body) = read_answer(&mut late).expect("the late request was dropped unanswered");
    assert!(head.starts_with("http/1.1 200") && head.contains("connection: close"), "{head}");
    assert!(!body.is_empty());
    assert_eq!(late.read(&mut [0u8; 1]).unwrap(), 0, "closed after its answer");
    assert!(stop.wait().unwrap().success());
    assert!(started.elapsed() < Duration::from_secs(8), "the stop waited out the drain: {:?}", started.elapsed());
}
