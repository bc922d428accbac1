//! `mcpx connect` and `mcpx disconnect` on each client's own file in a HOME of the test's
//! own: the real CLIs (Claude Code, Codex, Gemini CLI, pinned in e2e/) see mcpx come and
//! go; every format is edited keeping its comments, and one that cannot be edited safely
//! is refused with nothing changed; `--move` hands a client's servers to mcpx and
//! `disconnect --restore` hands them back, byte for byte.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::clients::{ALL, user_file};
use crate::era_matrix::node;
use crate::harness::{Run, World, e2e_dir, fake_server, mcpx_bin};

/// A world whose HOME is its own `home/` (its `.config` is where XDG_CONFIG_HOME would
/// point), reading mcpx's user config there: nothing from the test's environment moves a
/// client's file.
fn world() -> (World, PathBuf) {
    let mut w = World::new(json!({}));
    let home = w.path("home");
    std::fs::create_dir_all(&home).unwrap();
    w.env.push(("HOME".into(), home.display().to_string()));
    let moving =
        ["MCPX_CONFIG", "XDG_CONFIG_HOME", "CODEX_HOME", "CLAUDE_CONFIG_DIR", "GEMINI_CLI_HOME", "COPILOT_HOME"];
    w.unset.extend(moving.map(String::from));
    w.env.push(("MCPX_T_K".into(), "moved-value".into()));
    (w, home)
}

/// The fixture of `client`'s user-level file, placeholders left as they are (nothing
/// here runs them), written where the client keeps it; its path and text.
fn place(home: &Path, client: &str) -> (PathBuf, String) {
    let (fixture, dest) = user_file(client);
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/clients").join(fixture))
            .unwrap();
    let path = home.join(dest);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, &text).unwrap();
    (path, text)
}

/// A file's text as a value, in its own format (JSONC, TOML or YAML).
fn value_of(path: &Path, text: &str) -> Value {
    match path.extension().and_then(|e| e.to_str()) {
        Some("toml") => serde_json::to_value(toml::from_str::<toml::Table>(text).unwrap()).unwrap(),
        Some("yaml") => serde_norway::from_str(text).unwrap(),
        _ => jsonc_parser::cst::CstRootNode::parse(text, &jsonc_parser::ParseOptions::default())
            .unwrap()
            .to_serde_value()
            .unwrap(),
    }
}

/// The comment lines of a text (`//` or `#` first on the line).
fn comments(text: &str) -> Vec<&str> {
    text.lines().map(str::trim).filter(|l| l.starts_with("//") || l.starts_with('#')).collect()
}

/// Which clients `connect --json` says reach mcpx.
fn connected(w: &World) -> Vec<String> {
    let listed = w.run(&["connect", "--json"]).json();
    let rows = listed.as_array().unwrap();
    assert_eq!(rows.len(), ALL.len(), "{listed}");
    rows.iter().filter(|r| r["mcpx"] != json!([])).filter_map(|r| r["client"].as_str().map(str::to_owned)).collect()
}

/// Each client's fixture, as that client writes it (JSONC with comments, TOML, YAML
/// mapping and list): `connect` adds mcpx in the client's shape and lists it connected,
/// comments kept; `disconnect` takes it out to the same value, comments kept; connected
/// again, `disconnect --restore` puts each file back byte for byte.
#[test]
fn every_clients_format_is_edited_keeping_its_comments() {
    let (w, home) = world();
    let files: Vec<(PathBuf, String)> = ALL.iter().map(|c| place(&home, c)).collect();
    let mut args = vec!["connect"];
    args.extend(ALL);
    w.run(&args).ok();
    assert_eq!(connected(&w), ALL.map(String::from), "every client reaches mcpx");
    let mcpx = mcpx_bin().display().to_string();
    for ((path, before), client) in files.iter().zip(ALL) {
        let now = std::fs::read_to_string(path).unwrap();
        assert_eq!(comments(&now), comments(before), "{client}: comments kept\n{now}");
        let value = value_of(path, &now);
        let text = value.to_string();
        assert!(text.contains(&mcpx) && text.contains("serve"), "{client}: {value}");
    }
    let opencode = value_of(&files[7].0, &std::fs::read_to_string(&files[7].0).unwrap());
    assert_eq!(opencode["mcp"]["mcpx"]["command"], json!([mcpx, "serve"]), "OpenCode's command array");
    let goose = value_of(&files[9].0, &std::fs::read_to_string(&files[9].0).unwrap());
    assert_eq!(goose["extensions"]["mcpx"]["cmd"], mcpx, "Goose's cmd");
    let cont = value_of(&files[12].0, &std::fs::read_to_string(&files[12].0).unwrap());
    assert_eq!(cont["mcpServers"].as_array().unwrap().last().unwrap()["name"], "mcpx", "Continue's list");

    args[0] = "disconnect";
    w.run(&args).ok();
    assert_eq!(connected(&w), Vec::<String>::new());
    for ((path, before), client) in files.iter().zip(ALL) {
        let now = std::fs::read_to_string(path).unwrap();
        assert_eq!(value_of(path, &now), value_of(path, before), "{client}: the same value again");
        assert_eq!(comments(&now), comments(before), "{client}");
    }

    args[0] = "connect";
    w.run(&args).ok();
    let mut restore = vec!["disconnect", "--restore"];
    restore.extend(ALL);
    w.run(&restore).ok();
    for ((path, before), client) in files.iter().zip(ALL) {
        let now = std::fs::read_to_string(path).unwrap();
        assert_eq!(&now, before, "{client}: --restore puts back the file byte for byte");
    }
}

/// A file that cannot be edited safely, in each format (it does not parse, or its
/// servers key holds the wrong kind of value), is refused with what to paste, and left
/// exactly as it was; the other clients named are still connected.
#[test]
fn a_file_that_cannot_be_edited_safely_is_refused_and_left_alone() {
    let (w, home) = world();
    let broken = [
        ("cursor", ".cursor/mcp.json", "{ \"mcpServers\": { \"a\": } }"),
        ("vscode", ".config/Code/User/mcp.json", "{ \"servers\": [] }"),
        ("codex", ".codex/config.toml", "# mine\nmcp_servers = 3\n"),
        ("goose", ".config/goose/config.yaml", "# mine\nextensions: [1, 2]\n"),
        ("continue", ".continue/config.yaml", "mcpServers:\n  a: 1\n"),
        ("zed", ".config/zed/settings.json", "// mine\n{ \"context_servers\": 3 }"),
        ("opencode", ".config/opencode/opencode.json", "{ \"mcp\": { \"x\": "),
    ];
    for (_, rel, text) in &broken {
        std::fs::create_dir_all(home.join(rel).parent().unwrap()).unwrap();
        std::fs::write(home.join(rel), text).unwrap();
    }
    let mut args = vec!["connect", "kiro"];
    args.extend(broken.iter().map(|(c, _, _)| *c));
    let run = w.run(&args);
    assert_eq!(run.code, 2, "{run:?}");
    for (client, rel, text) in &broken {
        assert_eq!(&std::fs::read_to_string(home.join(rel)).unwrap(), text, "{client}: left as it was");
        assert!(run.stderr.contains(&format!("{client}: ")), "{client}: {}", run.stderr);
        let backups = std::fs::read_dir(home.join(rel).parent().unwrap())
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().contains("mcpx-backup"))
            .count();
        assert_eq!(backups, 0, "{client}: nothing written, not even a backup");
    }
    assert!(run.stderr.contains("by hand"), "what to paste: {}", run.stderr);
    assert!(run.stdout.contains("kiro: added `mcpx`"), "{run:?}");
}

/// `connect --move`: a client with three servers ends up with only mcpx, and mcpx (its
/// user config) serves the three; `disconnect --restore` brings the client's file back
/// byte for byte and takes the three out of mcpx's config. A name clash is reported
/// before anything is changed.
#[test]
fn move_hands_a_clients_servers_to_mcpx_and_restore_hands_them_back() {
    let (w, home) = world();
    let cursor = home.join(".cursor/mcp.json");
    let fake = fake_server();
    let before = format!(
        "// my servers\n{{\n  \"mcpServers\": {{\n    \"one\": {{ \"command\": \"{fake}\" }},\n    \"two\": {{ \"command\": \"{fake}\", \"env\": {{ \"K\": \"${{env:MCPX_T_K}}\" }} }}, // keep\n    \"three\": {{ \"command\": \"{fake}\" }}\n  }}\n}}\n"
    );
    std::fs::create_dir_all(cursor.parent().unwrap()).unwrap();
    std::fs::write(&cursor, &before).unwrap();
    let config = home.join(".config/mcpx/config.json");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    let config_before = "{\n  // mine\n  \"mcpServers\": { \"two\": { \"command\": \"x\" } }\n}\n";
    std::fs::write(&config, config_before).unwrap();

    let clash = w.run(&["connect", "--move", "cursor"]);
    assert_eq!(clash.code, 2, "{clash:?}");
    assert!(clash.stderr.contains("`two`") && clash.stderr.contains("nothing was changed"), "{}", clash.stderr);
    assert_eq!(std::fs::read_to_string(&cursor).unwrap(), before, "the client is untouched");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), config_before, "so is mcpx's config");

    std::fs::write(&config, "{\n  // mine\n  \"mcpServers\": {}\n}\n").unwrap();
    let config_before = std::fs::read_to_string(&config).unwrap();
    let out = w.run(&["connect", "--move", "cursor"]).ok();
    assert!(out.contains("moved one, three, two") || out.contains("moved"), "{out}");
    let now = value_of(&cursor, &std::fs::read_to_string(&cursor).unwrap());
    let names: Vec<&String> = now["mcpServers"].as_object().unwrap().keys().collect();
    assert_eq!(names, ["mcpx"], "the client sees only mcpx: {now}");
    let rows = w.run(&["ls", "--json"]).json();
    let listed: Vec<&str> = rows.as_array().unwrap().iter().filter_map(|r| r["name"].as_str()).collect();
    for name in ["one", "two", "three"] {
        assert!(listed.contains(&name), "{name}: {listed:?}");
        let out = w.run(&["call", &format!("{name}.echo"), &json!({ "message": format!("via {name}") }).to_string()]);
        assert!(out.ok().contains(&format!("via {name}")));
    }
    assert!(std::fs::read_to_string(&config).unwrap().contains("// mine"), "mcpx's config keeps its comments");

    let restored = w.run(&["disconnect", "--restore", "cursor"]).ok();
    assert!(restored.contains("took one, three, two out of") || restored.contains("took"), "{restored}");
    assert_eq!(std::fs::read_to_string(&cursor).unwrap(), before, "byte for byte");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), config_before, "the three are out of mcpx's config");
    let again = w.run(&["disconnect", "--restore", "cursor"]);
    assert_eq!(again.code, 2, "nothing recorded any more: {again:?}");
}

/// `--restore` refuses a file changed since `connect` wrote it, unless `--force`, which
/// backs up the file as it is first; a file `connect` made is removed. With `--project`,
/// moved servers go to the project's `.mcpx.json`, untrusted until `mcpx trust`.
#[test]
fn restore_refuses_a_changed_file_and_project_moves_stay_untrusted() {
    let (w, home) = world();
    w.run(&["connect", "gemini"]).ok();
    let gemini = home.join(".gemini/settings.json");
    assert!(gemini.is_file(), "connect made the file");
    let edited = std::fs::read_to_string(&gemini).unwrap().replace("{", "{ \"theme\": \"dark\",");
    std::fs::write(&gemini, &edited).unwrap();
    let refused = w.run(&["disconnect", "--restore", "gemini"]);
    assert_eq!(refused.code, 2, "{refused:?}");
    assert!(refused.stderr.contains("changed since") && refused.stderr.contains("--force"), "{}", refused.stderr);
    assert_eq!(std::fs::read_to_string(&gemini).unwrap(), edited);
    w.run(&["disconnect", "--restore", "--force", "gemini"]).ok();
    assert!(!gemini.exists(), "the file connect made is gone");
    let kept = std::fs::read_dir(gemini.parent().unwrap()).unwrap().count();
    assert_eq!(kept, 1, "the changed file was backed up first");

    let project = w.path("work/proj");
    let cursor = project.join(".cursor/mcp.json");
    std::fs::create_dir_all(cursor.parent().unwrap()).unwrap();
    std::fs::write(&cursor, json!({ "mcpServers": { "p": { "command": fake_server() } } }).to_string()).unwrap();
    let dir = project.display().to_string();
    w.run(&["connect", "--move", "--project", &dir, "cursor"]).ok();
    let moved: Value = serde_json::from_str(&std::fs::read_to_string(project.join(".mcpx.json")).unwrap()).unwrap();
    assert!(moved["mcpServers"]["p"].is_object(), "{moved}");
    let run = w.run_with(&["ls", "--json"], |c| {
        c.current_dir(&project);
    });
    let row = run.json().as_array().unwrap().iter().find(|r| r["name"] == "p").cloned().unwrap();
    assert_eq!(row["state"], "untrusted", "a project file's server stays untrusted: {row}");
    let no_project = w.run(&["connect", "--project", &dir, "windsurf"]);
    assert_eq!(no_project.code, 2, "{no_project:?}");
    assert!(no_project.stderr.contains("has no project file"), "{}", no_project.stderr);
}

/// Runs a Node 22 CLI from e2e/node_modules (`package/bin`) in `dir` with the world's
/// environment.
fn node_cli(w: &World, dir: &Path, script: &str, args: &[&str]) -> Run {
    let script = e2e_dir().join("node_modules").join(script);
    assert!(script.exists(), "{} is missing: run `bash scripts/setup-e2e.sh`", script.display());
    let mut cmd = w.launcher().program(node());
    cmd.arg(&script).args(args).current_dir(dir).stdin(std::process::Stdio::null());
    Run::of(cmd, &format!("node {} {}", script.display(), args.join(" ")))
}

/// The real CLIs, after `mcpx connect claude-code codex gemini`: `claude mcp list` and
/// `gemini mcp list` report mcpx connected (each starts `mcpx serve` and initializes),
/// `codex mcp list` lists it enabled; after `mcpx disconnect`, none lists it.
#[test]
fn the_real_clis_see_mcpx_come_and_go() {
    let (w, home) = world();
    // Gemini CLI runs no server in a folder it does not trust.
    std::fs::create_dir_all(home.join(".gemini")).unwrap();
    let trusted = json!({ home.display().to_string(): "TRUST_FOLDER" });
    std::fs::write(home.join(".gemini/trustedFolders.json"), trusted.to_string()).unwrap();
    w.run(&["connect", "claude-code", "codex", "gemini"]).ok();

    let claude = || {
        let mut cmd = w.launcher().program(e2e_dir().join("node_modules/.bin/claude"));
        cmd.args(["mcp", "list"])
            .current_dir(&home)
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .stdin(std::process::Stdio::null());
        Run::of(cmd, "claude mcp list")
    };
    let codex = || node_cli(&w, &home, "@openai/codex/bin/codex.js", &["mcp", "list"]);
    let gemini = || node_cli(&w, &home, "@google/gemini-cli/bundle/gemini.js", &["mcp", "list"]);

    let out = claude().ok();
    let line = out.lines().find(|l| l.starts_with("mcpx:")).unwrap_or_else(|| panic!("claude: {out}"));
    assert!(line.contains("serve") && line.contains("Connected"), "claude: {out}");
    let out = codex().ok();
    let line = out.lines().find(|l| l.starts_with("mcpx ")).unwrap_or_else(|| panic!("codex: {out}"));
    assert!(line.contains("serve") && line.contains("enabled"), "codex: {out}");
    let run = gemini();
    let all = format!("{}{}", run.stdout, run.stderr);
    let line = all.lines().find(|l| l.contains("mcpx:")).unwrap_or_else(|| panic!("gemini: {run:?}"));
    assert!(line.contains("serve") && line.contains("Connected"), "gemini: {all}");

    w.run(&["disconnect", "claude-code", "codex", "gemini"]).ok();
    assert!(!claude().ok().contains("mcpx"), "claude still lists mcpx");
    assert!(!codex().ok().contains("mcpx"), "codex still lists mcpx");
    let run = gemini();
    assert!(!format!("{}{}", run.stdout, run.stderr).contains("mcpx:"), "gemini still lists mcpx: {run:?}");
}

/// What a new user's first runs do: `connect` makes mcpx's state directory private (so
/// `mcpx ls` and the client's `mcpx serve` still run), runs at once take turns and lose
/// no server, `connect` writes the path the user ran (a link on PATH, not the file it
/// points to), a new Continue file has the keys Continue requires, and Gemini CLI's
/// `mcp.allowed` leaving mcpx out is said.
#[test]
fn connect_on_a_fresh_home_in_parallel_and_through_a_link() {
    let (mut w, home) = world();
    w.unset.extend(["MCPX_STATE_DIR", "XDG_STATE_HOME"].map(String::from));
    let bin = home.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(mcpx_bin(), bin.join("mcpx")).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let fake = fake_server();
    let clients = ["cursor", "windsurf", "kiro", "amazon-q", "lm-studio", "cline"];
    for (i, client) in clients.iter().enumerate() {
        let (_, rel) = user_file(client);
        let file = home.join(rel);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        let servers: serde_json::Map<String, Value> =
            (0..3).map(|n| (format!("s{i}{n}"), json!({ "command": fake }))).collect();
        std::fs::write(&file, json!({ "mcpServers": servers }).to_string()).unwrap();
    }
    let runs: Vec<_> = clients
        .iter()
        .map(|client| {
            // Run as `mcpx`, found on PATH through the link, as a user runs it.
            let mut cmd = w.launcher().program("mcpx");
            cmd.args(["connect", "--move", client]).env("PATH", &path);
            cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap()
        })
        .collect();
    for run in runs {
        let out = run.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let state = home.join(".local/state/mcpx");
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&state).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o700, "mcpx's state directory is private");
    let config: Value =
        serde_json::from_str(&std::fs::read_to_string(home.join(".config/mcpx/config.json")).unwrap()).unwrap();
    assert_eq!(config["mcpServers"].as_object().unwrap().len(), 18, "every moved server is kept: {config}");
    let cursor = std::fs::read_to_string(home.join(".cursor/mcp.json")).unwrap();
    let written = value_of(Path::new("x.json"), &cursor)["mcpServers"]["mcpx"]["command"].clone();
    assert_eq!(written, bin.join("mcpx").display().to_string(), "the link on PATH, as run");
    w.run(&["ls"]).ok();

    w.run(&["connect", "continue"]).ok();
    let cont = std::fs::read_to_string(home.join(".continue/config.yaml")).unwrap();
    assert!(cont.starts_with("name: Local Config\nversion: 1.0.0\nschema: v1\n"), "{cont}");
    std::fs::create_dir_all(home.join(".gemini")).unwrap();
    let gemini = json!({ "mcp": { "allowed": ["g"] }, "mcpServers": { "g": { "command": fake } } });
    std::fs::write(home.join(".gemini/settings.json"), gemini.to_string()).unwrap();
    let said = w.run(&["connect", "gemini"]).ok();
    assert!(said.contains("`mcp.allowed` leaves `mcpx` out"), "{said}");
}

/// `--restore` undoes every `connect` of a file since the first: after a second
/// `--move`, and after a plain `disconnect` (mcpx's own change, not the user's), the
/// file comes back as it was before the first; a moved server edited in mcpx's config
/// since is not dropped without `--force`.
#[test]
fn restore_goes_back_to_before_the_first_connect() {
    let (w, home) = world();
    let fake = fake_server();
    let file = home.join(".codeium/windsurf/mcp_config.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let before = format!("{{\n  \"mcpServers\": {{ \"a\": {{ \"command\": \"{fake}\" }} }}\n}}\n");
    std::fs::write(&file, &before).unwrap();
    w.run(&["connect", "--move", "windsurf"]).ok();
    let now = std::fs::read_to_string(&file).unwrap();
    let added = now.replace("\"mcpServers\": {", &format!("\"mcpServers\": {{ \"b\": {{ \"command\": \"{fake}\" }},"));
    std::fs::write(&file, added).unwrap();
    w.run(&["connect", "--move", "windsurf"]).ok();
    w.run(&["disconnect", "windsurf"]).ok();
    let config = home.join(".config/mcpx/config.json");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, text.replace(&format!("\"command\": \"{fake}\""), "\"command\": \"edited\"")).unwrap();
    let refused = w.run(&["disconnect", "--restore", "windsurf"]);
    assert_eq!(refused.code, 2, "{refused:?}");
    assert!(refused.stderr.contains("changed a") || refused.stderr.contains("changed b"), "{}", refused.stderr);
    w.run(&["disconnect", "--restore", "--force", "windsurf"]).ok();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), before, "back to before the first connect");
    let left: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    assert_eq!(left["mcpServers"], json!({}), "both moves taken back out: {left}");
}
