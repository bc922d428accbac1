//! The benchmarks' load generator, `mcpx-load`, against the fake server through mcpx and
//! directly, for a handful of calls: its report has every field, and every answer was
//! checked (its own unit tests cover the parsing and the statistics).

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::harness::{Run, World, fake_http, fake_server, mcpx_bin};

/// The load generator, built beside mcpx by `cargo build --workspace`.
fn load_bin() -> PathBuf {
    let path = mcpx_bin().with_file_name("mcpx-load");
    assert!(path.exists(), "{} is missing: build it with `cargo build -p mcpx-load`", path.display());
    path
}

/// Runs `mcpx-load` with 2 callers of 5 measured calls each and `args`, in `w`'s
/// environment; its JSON report, checked for the fields every report has.
fn load(w: &World, args: &[&str]) -> Value {
    let mut cmd = w.launcher().program(load_bin());
    cmd.args(["--callers", "2", "--calls", "5", "--warmup", "0.05"]).args(args).stdin(std::process::Stdio::null());
    let report = Run::of(cmd, &format!("mcpx-load {}", args.join(" "))).ok();
    let report: Value = serde_json::from_str(&report).unwrap_or_else(|e| panic!("not JSON ({e}): {report}"));
    assert_eq!(report["callers"], 2, "{report}");
    assert_eq!(report["calls"], 10, "{report}");
    // The initialize of each caller, its warm-up calls and its 5 measured calls.
    let warm = report["warmup_calls"].as_u64().unwrap();
    assert_eq!(report["checked"].as_u64().unwrap(), 2 + warm + 10, "{report}");
    for key in ["p50", "p90", "p99", "mean", "max"] {
        assert!(report["latency_us"][key].as_f64().unwrap() > 0.0, "{key}: {report}");
    }
    assert!(report["calls_per_s"].as_f64().unwrap() > 0.0, "{report}");
    assert!(report["cpu_us_per_call"]["self"].is_number(), "{report}");
    report
}

#[test]
fn load_generator_drives_every_path_and_checks_every_answer() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    w.run(&["ls"]).ok();
    let daemon = w.daemon_pid().unwrap().to_string();
    let daemon_pid = format!("daemon={daemon}");

    let serve =
        load(&w, &["--tool", "fake__echo", "--pid", &daemon_pid, "stdio", "--", mcpx_bin().to_str().unwrap(), "serve"]);
    assert_eq!(serve["mode"], "stdio");
    assert!(serve["cpu_us_per_call"]["daemon"].is_number(), "{serve}");
    assert!(serve["cpu_us_per_call"]["callers"].is_number(), "{serve}");

    let socket = w.path("run/daemon.sock");
    let one = load(&w, &["--pid", &daemon_pid, "http", "--unix", socket.to_str().unwrap(), "/mcp/fake"]);
    assert_eq!(one["mode"], "http");
    load(&w, &["--tool", "fake__echo", "http", "--unix", socket.to_str().unwrap(), "/mcp"]);

    // Direct: the fake server's own streamable HTTP answering JSON, and its stdio.
    let (_server, url) = fake_http("127.0.0.1:0", &[("FAKE_HTTP_RESPONSE", "json")]);
    let direct = load(&w, &["http", &url]);
    assert_eq!(direct["reconnects"], 0, "one keep-alive connection per caller: {direct}");
    load(&w, &["stdio", "--", &fake_server()]);

    // A wrong tool fails the run and says which caller and why.
    let mut cmd = w.launcher().program(load_bin());
    cmd.args(["--calls", "1", "--warmup", "0", "--tool", "nope", "http", &url]);
    let run = Run::of(cmd, "mcpx-load with a wrong tool");
    assert_ne!(run.code, 0, "{}", run.stdout);
    assert!(run.stderr.contains("caller 0"), "{}", run.stderr);
}
