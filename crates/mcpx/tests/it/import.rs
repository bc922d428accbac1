//! `mcpx import`: the other clients' user-level files in a HOME of the test's own, adding
//! them to `imports` (keeping the config's comments) or copying their entries, refusing
//! what cannot be edited safely, and what `mcpx ls` says when nothing is configured.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::harness::{World, fake_server, mcpx_bin};

/// A world whose HOME is its own `home/`, with nothing from the test's environment that
/// moves the clients' files elsewhere.
fn world(servers: serde_json::Value) -> (World, PathBuf) {
    let mut w = World::new(servers);
    let home = w.path("home");
    std::fs::create_dir_all(&home).unwrap();
    w.env.push(("HOME".into(), home.display().to_string()));
    w.unset.extend(
        ["XDG_CONFIG_HOME", "CODEX_HOME", "CLAUDE_CONFIG_DIR", "GEMINI_CLI_HOME", "COPILOT_HOME"].map(String::from),
    );
    (w, home)
}

/// Writes `text` at `home/rel`, making its directories.
fn put(home: &Path, rel: &str, text: &str) {
    let path = home.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A client file holding the fake server under each of `names`, under `key`.
fn servers_file(key: &str, names: &[&str]) -> String {
    let entries: serde_json::Map<String, serde_json::Value> =
        names.iter().map(|n| ((*n).to_owned(), json!({ "command": fake_server() }))).collect();
    json!({ key: entries }).to_string()
}

const CURSOR: &str = ".cursor/mcp.json";
const GEMINI: &str = ".gemini/settings.json";
const WINDSURF: &str = ".codeium/windsurf/mcp_config.json";
/// The VS Code user file on Linux, with XDG_CONFIG_HOME unset.
const VSCODE: &str = ".config/Code/User/mcp.json";

#[test]
fn import_lists_the_client_files_in_home_with_their_server_counts() {
    let (w, home) = world(json!({}));
    put(&home, CURSOR, &servers_file("mcpServers", &["cur-a", "cur-b"]));
    put(&home, GEMINI, &servers_file("mcpServers", &["gem"]));
    put(&home, WINDSURF, "{\n  \"mcpServers\": {\n    \"w\": { \"command\": \"x\" }\n    \"v\": {}\n  }\n}\n");

    let listed = w.run(&["import", "--json"]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let listed = listed.json();
    let client =
        |name: &str| listed["clients"].as_array().unwrap().iter().find(|c| c["client"] == name).unwrap().clone();
    assert_eq!(listed["clients"].as_array().unwrap().len(), 18, "{listed}");
    assert_eq!((client("cursor")["servers"].clone(), client("cursor")["exists"].clone()), (json!(2), json!(true)));
    assert_eq!(client("cursor")["names"], json!(["cur-a", "cur-b"]));
    assert_eq!(client("gemini")["servers"], 1);
    assert_eq!((client("codex")["exists"].clone(), client("codex")["servers"].clone()), (json!(false), json!(null)));
    // A file that does not parse shows its error, naming file, line and column, not a count.
    let windsurf = client("windsurf");
    assert_eq!(windsurf["servers"], json!(null), "{windsurf}");
    let error = windsurf["error"].as_str().unwrap();
    assert!(error.contains(&format!("{}:", home.join(WINDSURF).display())) && error.contains(":4:"), "{error}");

    let table = w.run(&["import"]);
    assert_eq!(table.code, 0, "{}", table.stderr);
    insta::assert_snapshot!(w.redact(&table.stdout));
    assert!(table.stderr.contains("windsurf: "), "{}", table.stderr);

    let unknown = w.run(&["import", "cursor", "nope"]);
    assert_eq!(unknown.code, 2, "{unknown:?}");
    assert!(unknown.stderr.contains("nope") && unknown.stderr.contains("copilot-cli"), "{}", unknown.stderr);
}

/// A user config a person wrote, with comments of every kind.
const COMMENTED: &str = r#"// mcpx, my way.
{
  /* servers I wrote myself */
  "mcpServers": {
    "own": { "command": "FAKE" }, // the fake one
  },
}
"#;

#[test]
fn import_keeps_the_configs_comments_and_the_daemon_serves_the_imported_servers() {
    let (w, home) = world(json!({}));
    let original = COMMENTED.replace("FAKE", &fake_server());
    w.write_config(&original);
    put(&home, CURSOR, &servers_file("mcpServers", &["cur"]));
    put(&home, VSCODE, &json!({ "servers": { "vs": { "type": "stdio", "command": fake_server() } } }).to_string());

    let added = w.run(&["import", "cursor", "vscode"]);
    assert_eq!(added.code, 0, "{added:?}");
    assert!(added.stdout.contains("imported cursor: 1 server from ~/.cursor/mcp.json"), "{}", added.stdout);
    let edited = std::fs::read_to_string(&w.config).unwrap();
    for line in original.lines().filter(|l| !l.trim().is_empty() && l.trim() != "}") {
        assert!(edited.contains(line), "{line:?} is gone:\n{edited}");
    }
    assert!(edited.contains(r#""imports": ["cursor", "vscode"]"#), "{edited}");

    for target in ["cur.echo", "vs.echo", "own.echo"] {
        assert_eq!(w.call(target, r#"{"message":"hi"}"#).ok(), "hi\n", "{target}");
    }
    let long = w.run(&["ls", "-l"]).ok();
    let row = |name: &str| long.lines().find(|l| l.starts_with(name)).unwrap_or_default().to_owned();
    assert!(row("cur ").contains("cursor"), "{long}");
    assert!(row("vs ").contains("vscode"), "{long}");
    assert!(row("own ").contains(&w.config.display().to_string()), "{long}");

    // Again: nothing changes, not a byte.
    let again = w.run(&["import", "cursor"]);
    assert_eq!(again.code, 0, "{again:?}");
    assert!(again.stdout.contains("already imported cursor"), "{}", again.stdout);
    assert_eq!(std::fs::read_to_string(&w.config).unwrap(), edited);
}

#[test]
fn import_copy_writes_entries_that_work_and_refuses_a_name_clash_unless_forced() {
    let (w, home) = world(json!({ "mine": { "command": fake_server() } }));
    put(&home, CURSOR, &servers_file("mcpServers", &["cur", "mine"]));

    let clash = w.run(&["import", "--copy", "cursor"]);
    assert_eq!(clash.code, 2, "{clash:?}");
    assert!(clash.stderr.contains("`mine`") && clash.stderr.contains("--force"), "{}", clash.stderr);
    let before = std::fs::read_to_string(&w.config).unwrap();

    // A relative cwd meant the client's file's directory, and still does in the copy.
    put(&home, CURSOR, &json!({ "mcpServers": { "cur": { "command": fake_server(), "cwd": "." } } }).to_string());
    let copied = w.run(&["import", "--copy", "cursor"]);
    assert_eq!(copied.code, 0, "{copied:?}");
    assert!(copied.stdout.contains("copied from cursor: cur"), "{}", copied.stdout);
    let after: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&w.config).unwrap()).unwrap();
    let cwd = home.join(".cursor").display().to_string();
    assert_eq!(
        after["mcpServers"]["cur"],
        json!({ "command": fake_server(), "cwd": cwd }),
        "{after}\nbefore: {before}"
    );
    assert!(after.get("imports").is_none(), "a copy is not an import: {after}");

    // The copy stands on its own: the client's file can go.
    std::fs::remove_file(home.join(CURSOR)).unwrap();
    assert_eq!(w.call("cur.echo", r#"{"message":"copied"}"#).ok(), "copied\n");

    put(&home, CURSOR, &json!({ "mcpServers": { "cur": { "command": "replaced" } } }).to_string());
    let forced = w.run(&["import", "--copy", "--force", "cursor"]);
    assert_eq!(forced.code, 0, "{forced:?}");
    let after: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&w.config).unwrap()).unwrap();
    assert_eq!(after["mcpServers"]["cur"]["command"], "replaced");
}

#[test]
fn a_config_that_cannot_be_edited_safely_is_refused_with_the_lines_to_paste_and_left_unchanged() {
    let (w, home) = world(json!({}));
    put(&home, CURSOR, &servers_file("mcpServers", &["cur"]));
    for (text, why) in [
        ("{ \"imports\": \"cursor\" } // a string, not a list\n", "`imports` is not an array"),
        ("{\n  \"mcpServers\": {}\n  \"imports\": []\n}\n", "does not parse (line 2"),
    ] {
        w.write_config(text);
        let refused = w.run(&["import", "cursor", "gemini"]);
        assert_eq!(refused.code, 2, "{refused:?}");
        assert!(refused.stdout.contains(r#""imports": ["cursor", "gemini"]"#), "{}", refused.stdout);
        assert!(refused.stderr.contains(why) && refused.stderr.contains("unchanged"), "{}", refused.stderr);
        assert_eq!(refused.stderr.lines().count(), 1, "{}", refused.stderr);
        assert_eq!(std::fs::read(&w.config).unwrap(), text.as_bytes(), "the file must stay as it was");
    }
}

#[test]
fn ls_with_nothing_configured_names_what_import_would_find() {
    let (w, home) = world(json!({}));
    let plain = w.run(&["ls"]).ok();
    assert!(plain.contains("no servers configured") && plain.contains("mcpx import"), "{plain}");

    put(&home, CURSOR, &servers_file("mcpServers", &["a", "b"]));
    put(&home, GEMINI, &servers_file("mcpServers", &["c"]));
    let hint = w.run(&["ls"]).ok();
    assert!(
        hint.contains(
            "found 2 servers in Cursor's ~/.cursor/mcp.json and 1 in Gemini CLI's ~/.gemini/settings.json: \
             run `mcpx import cursor gemini`"
        ),
        "{hint}"
    );
    // JSON stays an empty list.
    assert_eq!(w.run(&["ls", "--json"]).json(), json!([]));
}

#[test]
fn a_config_behind_a_symbolic_link_is_edited_where_the_link_points_and_keeps_its_mode() {
    use std::os::unix::fs::PermissionsExt;
    let (w, home) = world(json!({}));
    put(&home, CURSOR, &servers_file("mcpServers", &["cur"]));
    // A dotfiles manager's layout: the config is a link into a repository.
    let real = w.path("dotfiles/mcpx.json");
    std::fs::create_dir_all(real.parent().unwrap()).unwrap();
    std::fs::write(&real, "{ /* mine */ }\n").unwrap();
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o640)).unwrap();
    std::fs::remove_file(&w.config).unwrap();
    std::os::unix::fs::symlink(&real, &w.config).unwrap();

    w.run(&["import", "cursor"]).ok();
    assert!(std::fs::symlink_metadata(&w.config).unwrap().file_type().is_symlink(), "the link must stay");
    let text = std::fs::read_to_string(&real).unwrap();
    assert!(text.contains("/* mine */") && text.contains(r#""imports": ["cursor"]"#), "{text}");
    assert_eq!(std::fs::metadata(&real).unwrap().permissions().mode() & 0o777, 0o640);
}

#[test]
fn import_refuses_to_edit_another_clients_file() {
    let (w, home) = world(json!({}));
    let text = servers_file("mcpServers", &["cur-a"]);
    put(&home, CURSOR, &text);
    let cursor = home.join(CURSOR);
    let run = w.run(&["--config", cursor.to_str().unwrap(), "import", "gemini"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("is Cursor's file, not an mcpx config"), "{}", run.stderr);
    assert_eq!(std::fs::read_to_string(&cursor).unwrap(), text, "left unchanged");
}

#[test]
fn import_warns_when_the_running_daemon_reads_other_files() {
    let (mut w, home) = world(json!({}));
    w.unset.push("MCPX_CONFIG".to_owned());
    assert_eq!(w.run(&["ls"]).code, 0, "starts the daemon with the world's HOME");
    let other = w.path("other-home");
    std::fs::create_dir_all(&other).unwrap();
    let run = w.run_with(&["import", "cursor"], |cmd| {
        cmd.env("HOME", &other);
    });
    assert_eq!(run.code, 0, "{run:?}");
    let theirs = home.join(".config/mcpx/config.json");
    assert!(
        run.stderr.contains(&format!("the running daemon reads its user config at {}", theirs.display())),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("the running daemon reads Cursor's file at"), "{}", run.stderr);
    // The same environment as the daemon's: nothing to warn about.
    let run = w.run(&["import", "cursor"]);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""), "{run:?}");
}

/// `mcpx connect` lists each client's file and whether it already reaches mcpx: an entry
/// that runs `mcpx serve`, in each client's own shape (Claude Code's per-project ones too).
#[test]
fn connect_lists_which_clients_already_reach_mcpx() {
    let (w, home) = world(json!({}));
    put(
        &home,
        CURSOR,
        &json!({ "mcpServers": { "mcpx": { "command": "/opt/bin/mcpx", "args": ["serve"] } } }).to_string(),
    );
    put(&home, GEMINI, &servers_file("mcpServers", &["gem"]));
    let project = json!({ "projects": { "/work/p": { "mcpServers": { "all": { "command": "mcpx", "args": ["serve", "--discover"] } } } } });
    put(&home, ".claude.json", &project.to_string());
    put(&home, WINDSURF, "{ \"mcpServers\": { \"w\": } }");
    let listed = w.run(&["connect", "--json"]).json();
    let row = |name: &str| listed.as_array().unwrap().iter().find(|c| c["client"] == name).unwrap().clone();
    assert_eq!(listed.as_array().unwrap().len(), 18, "{listed}");
    assert_eq!((row("cursor")["exists"].clone(), row("cursor")["mcpx"].clone()), (json!(true), json!(["mcpx"])));
    assert_eq!(row("gemini")["mcpx"], json!([]), "a file without mcpx");
    assert_eq!(row("claude-code")["mcpx"], json!([]), "a project's entry reaches mcpx in that project only");
    assert_eq!(row("codex")["exists"], false);
    assert!(row("windsurf")["error"].as_str().unwrap().contains(":1:"), "{}", row("windsurf"));
    let table = w.run(&["connect"]).ok();
    for line in ["cursor", "connected (mcpx)", "not connected", "no file", "cannot read it"] {
        assert!(table.contains(line), "{line}: {table}");
    }
    assert!(table.contains("~/.cursor/mcp.json"), "{table}");
}

/// `mcpx connect` adds mcpx to each client's own file in its own shape, keeping its
/// comments and writing a backup first (Codex's TOML too); a client already connected is
/// left as it is. `mcpx disconnect` takes it out again, the rest of the file as it was.
#[test]
fn connect_and_disconnect_edit_each_clients_file_keeping_its_comments() {
    let (mut w, home) = world(json!({}));
    // No config file named: the entries run plain `mcpx serve`.
    w.unset.push("MCPX_CONFIG".into());
    let commented =
        "// my cursor servers\n{\n  \"mcpServers\": {\n    \"mine\": { \"command\": \"x\" }, // keep me\n  },\n}\n";
    put(&home, CURSOR, commented);
    put(
        &home,
        ".claude.json",
        &json!({ "mcpServers": { "mcpx": { "command": "mcpx", "args": ["serve"] } } }).to_string(),
    );
    put(&home, ".codex/config.toml", "# codex\n[mcp_servers.a]\ncommand = \"x\"\n");
    let run = w.run(&["connect", "cursor", "vscode", "claude-desktop", "claude-code", "codex"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("claude-code:") && run.stdout.contains("already reaches mcpx"), "{}", run.stdout);
    let codex = std::fs::read_to_string(home.join(".codex/config.toml")).unwrap();
    assert!(codex.starts_with("# codex\n[mcp_servers.a]\ncommand = \"x\"\n"), "TOML comments kept: {codex}");
    assert!(codex.contains("[mcp_servers.mcpx]"), "{codex}");
    let cursor = std::fs::read_to_string(home.join(CURSOR)).unwrap();
    assert!(cursor.starts_with("// my cursor servers\n") && cursor.contains("// keep me"), "comments kept: {cursor}");
    let mcpx = mcpx_bin().display().to_string();
    let parsed = strip_comments(&cursor);
    assert_eq!(parsed["mcpServers"]["mcpx"], json!({ "command": mcpx, "args": ["serve"] }), "{cursor}");
    assert_eq!(parsed["mcpServers"]["mine"], json!({ "command": "x" }));
    let backups: Vec<_> = std::fs::read_dir(home.join(".cursor"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.display().to_string().contains("mcp.json.mcpx-backup-"))
        .collect();
    assert_eq!(backups.len(), 1, "a backup beside the file");
    assert_eq!(std::fs::read_to_string(&backups[0]).unwrap(), commented, "the backup is the file before");
    let vscode: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(home.join(VSCODE)).unwrap()).unwrap();
    assert_eq!(vscode["servers"]["mcpx"], json!({ "type": "stdio", "command": mcpx, "args": ["serve"] }));
    assert!(home.join(".config/Claude/claude_desktop_config.json").is_file(), "a missing file is made");

    let listed = w.run(&["connect", "--json"]).json();
    let connected: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["mcpx"] != json!([]))
        .filter_map(|r| r["client"].as_str())
        .collect();
    assert_eq!(connected, ["claude-desktop", "claude-code", "cursor", "vscode", "codex"], "{listed}");
    // Again: each is left as it is.
    let again = w.run(&["connect", "cursor"]).ok();
    assert!(again.contains("already reaches mcpx"), "{again}");

    let out = w.run(&["disconnect", "cursor", "gemini"]).ok();
    assert!(out.contains("cursor: removed mcpx") && out.contains("gemini: no file"), "{out}");
    assert_eq!(
        std::fs::read_to_string(home.join(CURSOR)).unwrap(),
        commented,
        "disconnect leaves the file as it was before connect"
    );
    let unknown = w.run(&["disconnect", "nope"]);
    assert_eq!(unknown.code, 2, "{unknown:?}");
}

/// `text` (JSONC: comments, trailing commas) as a value.
fn strip_comments(text: &str) -> serde_json::Value {
    jsonc_parser::cst::CstRootNode::parse(text, &jsonc_parser::ParseOptions::default())
        .unwrap()
        .to_serde_value()
        .unwrap()
}
