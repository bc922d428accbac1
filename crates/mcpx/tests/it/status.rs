//! `mcpx status` telling instances of one server apart: the config file and the
//! command or URL as written, in `--json` and in the table.

use serde_json::json;

use crate::harness::{World, fake_server};

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
