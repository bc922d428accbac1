//! `mcpx status` telling instances of one server apart: the config file and the
//! command or URL as written, in `--json` and in the table.

use serde_json::json;

use std::time::Duration;

use crate::harness::{World, fake_http, fake_server, wait_until};

/// One server name defined in two project files, with two commands, called from
/// each project's directory: two instances, whose rows name their file and their
/// command as written (a `${VAR}` stays unexpanded).
#[test]
fn status_tells_two_definitions_of_one_server_apart() {
    let w = World::new(json!({}));
    let link = w.path("fake-link");
    std::os::unix::fs::symlink(fake_server(), &link).unwrap();
    let (a, b) = (w.path("a"), w.path("b"));
    for (dir, command) in [(&a, fake_server()), (&b, link.display().to_string())] {
        std::fs::create_dir(dir).unwrap();
        let servers =
            json!({ "mcpServers": { "fake": { "command": command, "env": { "TOKEN": "${MCPX_T_SECRET}" } } } });
        std::fs::write(dir.join(".mcp.json"), servers.to_string()).unwrap();
    }
    for dir in [&a, &b] {
        w.trust_in(dir);
        let run = w.run_with(&["call", "fake.counter", "{}"], |c| {
            c.current_dir(dir).env_remove("MCPX_CONFIG").env("MCPX_T_SECRET", "s3cret-value");
        });
        assert_eq!(run.ok(), "1\n");
    }
    let status = w.status();
    let rows: Vec<&serde_json::Value> =
        status["instances"].as_array().unwrap().iter().filter(|i| i["server"] == "fake").collect();
    assert_eq!(rows.len(), 2, "{status}");
    let mut seen: Vec<(String, String)> = rows
        .iter()
        .map(|r| (r["source"].as_str().unwrap_or("").into(), r["command"].as_str().unwrap_or("").into()))
        .collect();
    seen.sort();
    let mut want = vec![
        (a.join(".mcp.json").display().to_string(), fake_server()),
        (b.join(".mcp.json").display().to_string(), link.display().to_string()),
    ];
    want.sort();
    assert_eq!(seen, want, "{status}");
    let table = w.run(&["status"]).ok();
    for (source, command) in &want {
        assert!(table.contains(source.as_str()) && table.contains(command.as_str()), "{table}");
    }
    assert!(!table.contains("s3cret-value") && !status.to_string().contains("s3cret-value"), "{table}");
}

/// An upgrade logs what became of each remote session: an HTTP+SSE session (MCP
/// 2024-11-05), which no later daemon can take up, ends with a line naming its
/// server and URL; a streamable HTTP session is kept, also with a line.
#[test]
fn an_upgrade_logs_each_remote_session() {
    let (_sse, sse_port) = crate::remote::everything("sse");
    let (_http, http_port) = crate::remote::everything("streamableHttp");
    let sse_url = format!("http://127.0.0.1:{sse_port}/sse");
    let http_url = format!("http://127.0.0.1:{http_port}/mcp");
    let w = World::new(json!({
        "ev_sse": { "url": sse_url, "transport": "sse" },
        "ev_http": { "url": http_url },
    }));
    for server in ["ev_sse", "ev_http"] {
        assert!(w.call(&format!("{server}.echo"), r#"{"message":"hi"}"#).ok().contains("hi"));
    }
    w.run(&["upgrade"]).ok();
    let log = w.log_once_it_has("HTTP+SSE session ended");
    let line = log.lines().find(|l| l.contains("HTTP+SSE session ended")).unwrap();
    assert!(line.contains("ev_sse") && line.contains(&sse_url), "{line}");
    let log = w.log_once_it_has("MCP session kept for the next daemon");
    let line = log.lines().find(|l| l.contains("MCP session kept for the next daemon")).unwrap();
    assert!(line.contains("ev_http") && line.contains(&http_url), "{line}");
}

/// A remote instance whose server went away is `lost`: one row per server and URL,
/// kept for a while (10 minutes; the test hook shortens it) and then removed.
#[test]
fn a_lost_remote_row_is_removed_after_its_time() {
    let (server, url) = fake_http("127.0.0.1:0", &[]);
    let mut w = World::new(json!({ "gone": { "url": url } }));
    w.env.push(("MCPX_TEST_LOST_KEEP_MS".into(), "1500".into()));
    assert_eq!(w.call("gone.counter", "{}").ok(), "1\n");
    drop(server);
    let run = w.call("gone.counter", "{}");
    assert_ne!(run.code, 0, "{run:?}");
    let rows = |w: &World| -> Vec<serde_json::Value> {
        w.status()["instances"].as_array().unwrap().iter().filter(|i| i["server"] == "gone").cloned().collect()
    };
    let lost = rows(&w);
    assert_eq!(lost.len(), 1, "{lost:?}");
    assert_eq!(lost[0]["state"], "lost", "{lost:?}");
    assert_eq!(lost[0]["url"], url.as_str(), "{lost:?}");
    wait_until("the lost row is removed", Duration::from_secs(15), || rows(&w).is_empty());
}

/// `lost` remote instances of one server and URL under two pool keys are one row.
#[test]
fn lost_remote_instances_of_one_url_are_one_row() {
    let (server, url) = fake_http("127.0.0.1:0", &[]);
    let w = World::new(json!({ "per": { "url": url, "mcpx": { "scope": "session" } } }));
    for session in ["a", "b"] {
        assert_eq!(w.run(&["call", "--session", session, "per.counter", "{}"]).ok(), "1\n");
    }
    drop(server);
    for session in ["a", "b"] {
        let run = w.run(&["call", "--session", session, "per.counter", "{}"]);
        assert_ne!(run.code, 0, "{run:?}");
    }
    let status = w.status();
    let rows: Vec<&serde_json::Value> =
        status["instances"].as_array().unwrap().iter().filter(|i| i["server"] == "per").collect();
    assert_eq!(rows.len(), 1, "{status}");
    assert_eq!(rows[0]["state"], "lost", "{status}");
}
