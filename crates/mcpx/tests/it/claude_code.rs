//! Claude Code's CLI (`@anthropic-ai/claude-code`, pinned in e2e/package.json and
//! installed by scripts/setup-e2e.sh) against mcpx: the entries `claude mcp add` writes
//! in each of its scopes are imported and called, and `claude mcp list` reports
//! `mcpx serve` as connected.
//!
//! The package ships a native binary (its postinstall copies it from a per-platform
//! package, `@anthropic-ai/claude-code-linux-x64` here), so Node runs only npm, to
//! install it: `claude` itself needs no Node at run time, pinned or not. Every run of
//! `claude` gets the world's own HOME and `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`
//! (no update check, no telemetry), and works offline.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::harness::{Run, World, e2e_dir, fake_server, mcpx_bin};

/// Claude Code's CLI, where scripts/setup-e2e.sh installs it.
fn claude_bin() -> PathBuf {
    let bin = e2e_dir().join("node_modules/.bin/claude");
    assert!(
        bin.exists(),
        "Claude Code's CLI is not installed at {}: run `bash scripts/setup-e2e.sh` (scripts/test.sh does)",
        bin.display()
    );
    bin
}

/// A world with a HOME of its own (`home/`), holding a project directory
/// (`home/project`), for `claude` and mcpx alike: `claude` writes `home/.claude.json`,
/// the daemon (started with this HOME) reads it.
struct ClaudeWorld {
    w: World,
    home: PathBuf,
    project: PathBuf,
}

impl ClaudeWorld {
    /// A world whose mcpx config is the world's own file (`MCPX_CONFIG`) holding `servers`.
    fn new(servers: serde_json::Value) -> ClaudeWorld {
        let mut w = World::new(servers);
        let home = w.path("home");
        let project = home.join("project");
        std::fs::create_dir_all(&project).unwrap();
        w.env.push(("HOME".to_owned(), home.display().to_string()));
        // Claude Code keeps `.claude.json` in CLAUDE_CONFIG_DIR when it is set, and mcpx
        // finds its user config and the clients' files from that and XDG_CONFIG_HOME,
        // CODEX_HOME and GEMINI_CLI_HOME: none of the test runner's may leak in.
        w.unset.extend(["CLAUDE_CONFIG_DIR", "XDG_CONFIG_HOME", "CODEX_HOME", "GEMINI_CLI_HOME"].map(String::from));
        ClaudeWorld { w, home, project }
    }

    /// A world without `MCPX_CONFIG`, so that mcpx reads the project files found upward
    /// and its user config, `home/.config/mcpx/config.json`, which imports Claude Code's
    /// user-level file.
    fn importing() -> ClaudeWorld {
        let mut cw = ClaudeWorld::new(json!({}));
        cw.w.unset.push("MCPX_CONFIG".to_owned());
        let config = cw.home.join(".config/mcpx/config.json");
        std::fs::create_dir_all(config.parent().unwrap()).unwrap();
        std::fs::write(&config, json!({ "imports": ["claude-code"], "mcpServers": {} }).to_string()).unwrap();
        cw
    }

    /// Runs `claude <args>` in `dir`, in the world's environment (its MCPX_* directories
    /// included: `claude` passes its environment to the servers it starts).
    fn claude(&self, dir: &Path, args: &[&str]) -> Run {
        let mut cmd = self.w.launcher().program(claude_bin());
        cmd.args(args)
            .current_dir(dir)
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .stdin(std::process::Stdio::null());
        Run::of(cmd, &format!("claude {}", args.join(" ")))
    }

    /// Runs `mcpx <args>` in `dir`.
    fn mcpx(&self, dir: &Path, args: &[&str]) -> Run {
        self.w.run_with(args, |cmd| {
            cmd.current_dir(dir);
        })
    }

    /// `mcpx ls --json` in `dir`: server name → its row.
    fn ls(&self, dir: &Path) -> std::collections::BTreeMap<String, serde_json::Value> {
        let rows = self.mcpx(dir, &["ls", "--json"]).json();
        rows.as_array()
            .unwrap_or_else(|| panic!("ls --json gave no array: {rows}"))
            .iter()
            .map(|row| (row["name"].as_str().unwrap_or_default().to_owned(), row.clone()))
            .collect()
    }
}

/// `claude mcp add` in each scope (user: `~/.claude.json`'s `mcpServers`; project: the
/// project's `.mcp.json`; local: `~/.claude.json`'s `projects.<project>.mcpServers`, as
/// Claude Code's documentation on MCP installation scopes describes them),
/// each entry the fake server with its own args and env. mcpx, importing `claude-code`,
/// lists all three from the project with their sources, only the user-scope one from
/// elsewhere, and calls each (from below the project: the nearest ancestor's entries
/// apply there too).
#[test]
fn claude_mcp_add_in_every_scope_is_imported_and_called() {
    let cw = ClaudeWorld::importing();
    let fake = fake_server();
    for scope in ["user", "project", "local"] {
        let env = format!("CLAUDE_SCOPE={scope}");
        let arg = format!("--from-{scope}-scope");
        cw.claude(&cw.project, &["mcp", "add", "--scope", scope, scope, "-e", &env, "--", &fake, &arg]).ok();
    }
    // What each scope wrote, where Claude Code documents it.
    let claude_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(cw.home.join(".claude.json")).unwrap()).unwrap();
    assert_eq!(claude_json["mcpServers"]["user"]["args"], json!(["--from-user-scope"]), "{claude_json}");
    let project_key = cw.project.display().to_string();
    let local = &claude_json["projects"][&project_key]["mcpServers"]["local"];
    assert_eq!(local["env"], json!({ "CLAUDE_SCOPE": "local" }), "{claude_json}");
    let mcp_json = std::fs::read_to_string(cw.project.join(".mcp.json")).unwrap();
    assert!(mcp_json.contains("--from-project-scope"), "{mcp_json}");
    cw.w.trust_in(&cw.project);

    let claude_file = cw.home.join(".claude.json").display().to_string();
    let rows = cw.ls(&cw.project);
    for (name, file, client) in [
        ("user", claude_file.clone(), Some("claude-code")),
        ("local", claude_file.clone(), Some("claude-code")),
        ("project", cw.project.join(".mcp.json").display().to_string(), None),
    ] {
        let row = rows.get(name).unwrap_or_else(|| panic!("no `{name}` in ls from the project: {rows:?}"));
        assert_eq!(row["source"]["file"], file.as_str(), "{row}");
        // `.mcp.json` is mcpx's own format too: its rows name no client.
        assert_eq!(row["source"].get("client").and_then(|c| c.as_str()), client, "{row}");
    }

    let elsewhere = cw.home.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let rows = cw.ls(&elsewhere);
    assert!(rows.contains_key("user"), "no `user` in ls outside the project: {rows:?}");
    for name in ["project", "local"] {
        assert!(!rows.contains_key(name), "`{name}` listed outside the project: {rows:?}");
    }

    let below = cw.project.join("src");
    std::fs::create_dir_all(&below).unwrap();
    for scope in ["user", "project", "local"] {
        let said = cw.mcpx(&below, &["call", &format!("{scope}.env"), r#"{"name":"CLAUDE_SCOPE"}"#]).ok();
        assert_eq!(said, format!("{scope}\n"), "the `{scope}` entry's env");
    }
    assert_eq!(cw.mcpx(&elsewhere, &["call", "user.echo", r#"{"message":"hi"}"#]).ok(), "hi\n");
}

/// `claude mcp add mcpx -- mcpx serve`, then `claude mcp list`: Claude Code starts
/// `mcpx serve` (in the world's environment, which it passes on: the daemon that serve
/// starts runs in the world's runtime directory) and reports it connected.
#[test]
fn claude_mcp_list_reports_mcpx_serve_connected() {
    let cw = ClaudeWorld::new(json!({ "fake": { "command": fake_server() } }));
    let mcpx = mcpx_bin().display().to_string();
    cw.claude(&cw.project, &["mcp", "add", "mcpx", "--", &mcpx, "serve"]).ok();
    assert_eq!(cw.w.daemon_pid(), None, "a daemon ran before `claude mcp list`");
    let listed = cw.claude(&cw.project, &["mcp", "list"]).ok();
    let line = listed
        .lines()
        .find(|line| line.starts_with("mcpx:"))
        .unwrap_or_else(|| panic!("no line for mcpx in `claude mcp list`:\n{listed}"));
    assert!(line.contains(&format!("{mcpx} serve")), "{line}");
    assert!(line.trim_end().ends_with("Connected") && !line.contains("Failed"), "{line}");
    assert!(cw.w.daemon_pid().is_some(), "the daemon mcpx serve started is not in the world's runtime directory");
}
