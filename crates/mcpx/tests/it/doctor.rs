//! `mcpx doctor`: a healthy world passes every check (exit 0); a broken one gets a line
//! per problem, each saying what to do (exit 1).

use std::os::unix::fs::PermissionsExt;

use serde_json::json;

use crate::harness::{World, fake_server};

/// `mcpx doctor [args]` with a home of the world's own, so the user's service unit and
/// clients' files are the test's.
fn doctor(w: &World, args: &[&str]) -> crate::harness::Run {
    let home = w.path("home");
    std::fs::create_dir_all(&home).unwrap();
    let mut all = vec!["doctor"];
    all.extend_from_slice(args);
    w.run_with(&all, |cmd| {
        cmd.env("HOME", &home).env("XDG_CONFIG_HOME", home.join(".config")).env("XDG_DATA_HOME", home.join("data"));
    })
}

/// The report with this world's paths and the daemon's pid and version made constant.
fn stable(w: &World, text: &str) -> String {
    let text = w.redact(text);
    let mut out = String::new();
    for line in text.lines() {
        let end = line.find(" answers (pid ");
        let line = match (end.and_then(|end| line[..end].rfind("daemon ")), end) {
            (Some(start), Some(end)) => {
                let close = line[end..].find(')').map_or(line.len(), |i| end + i);
                format!("{}daemon [VERSION] answers (pid [PID]{}", &line[..start], &line[close..])
            }
            // The kernel's Landlock ABI and the system files differ between machines.
            _ if line.contains("code-mode") => match (line.find("Landlock ABI "), line.find("the system files ")) {
                (Some(abi), Some(files)) => {
                    let end = line[files..].find(", Deno's cache").map_or(line.len(), |i| files + i);
                    let digits =
                        line[abi + 13..].find(|c: char| !c.is_ascii_digit()).map_or(line.len(), |i| abi + 13 + i);
                    format!(
                        "{}Landlock ABI [N]{}the system files [FILES]{}",
                        &line[..abi],
                        &line[digits..files],
                        &line[end..]
                    )
                }
                _ => line.to_owned(),
            },
            _ => line.to_owned(),
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

#[test]
fn a_healthy_world_passes_every_check() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    let run = doctor(&w, &[]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    insta::assert_snapshot!("healthy", stable(&w, &run.stdout));
    let report = doctor(&w, &["--json"]).json();
    assert_eq!(report["ok"], true);
    let levels: Vec<&str> =
        report["findings"].as_array().unwrap().iter().map(|f| f["level"].as_str().unwrap()).collect();
    assert!(levels.iter().all(|l| *l == "ok"), "{report}");
}

#[test]
fn a_broken_world_gets_a_line_per_problem_and_exit_1() {
    let w = World::new(json!({}));
    // The explicit file imports Cursor's user file, which does not parse.
    let servers = json!({ "fake": { "command": fake_server() }, "gone": { "command": "no-such-mcp-server-anywhere" } });
    w.write_config(&json!({ "mcpServers": servers, "imports": ["cursor"] }).to_string());
    let home = w.path("home");
    std::fs::create_dir_all(home.join(".cursor")).unwrap();
    std::fs::write(home.join(".cursor/mcp.json"), "{ \"mcpServers\": { \"x\": ").unwrap();
    // A service unit that would kill every server on a restart.
    std::fs::create_dir_all(home.join(".config/systemd/user")).unwrap();
    std::fs::write(
        home.join(".config/systemd/user/mcpx.service"),
        "[Service]\nExecStart=mcpx daemon\nKillMode=mixed\n",
    )
    .unwrap();

    let run = doctor(&w, &[]);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let out = w.redact(&run.stdout);
    let line = |needle: &str| {
        out.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle:?} in:\n{out}"))
            .to_owned()
    };
    let command = line("no-such-mcp-server-anywhere");
    assert!(command.starts_with("error  commands") && command.contains("install it"), "{command}");
    let config = line(".cursor/mcp.json");
    assert!(config.starts_with("error  config"), "{config}");
    let service = line("KillMode=mixed");
    assert!(service.starts_with("error  service") && service.contains("mcpx service install"), "{service}");
    assert!(line("same build").starts_with("ok     daemon"));
    assert!(out.ends_with("3 error(s), 0 warning(s)\n"), "{out}");
    let report = doctor(&w, &["--json"]).json();
    assert_eq!(report["ok"], false);

    // A directory open to others: the daemon is not asked through it.
    let cache = w.path("cache");
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = doctor(&w, &[]);
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let out = w.redact(&run.stdout);
    assert!(out.contains("error  directories  [TMP]/cache has mode 0755"), "{out}");
    assert!(out.contains("chmod 700 [TMP]/cache"), "{out}");
    assert!(out.contains("error  daemon       not asked"), "{out}");
}
