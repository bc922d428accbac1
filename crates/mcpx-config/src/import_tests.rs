//! Tests of other clients' files: project files found upward, `imports`, Claude Code's
//! projects, Codex's TOML.

use std::fs;
use std::path::Path;

use super::*;

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn env_for(dir: &Path) -> ConfigEnv {
    ConfigEnv { home: Some(dir.join("home")), ..ConfigEnv::default() }
}

fn stdio(command: &str) -> String {
    format!(r#"{{ "command": "{command}" }}"#)
}

/// `(name, command or url, client)` of every resolved server, in name order.
fn summary(cfg: &ResolvedConfig) -> Vec<(String, String, Option<&'static str>)> {
    cfg.servers
        .values()
        .map(|e| {
            let what = match &e.transport {
                TransportSpec::Stdio { command, .. } => command.clone(),
                TransportSpec::Remote { url, kind, .. } => format!("{url} ({})", kind.as_str()),
            };
            (e.name.clone(), what, e.client.map(Client::name))
        })
        .collect()
}

fn resolve_in(env: &ConfigEnv, cwd: &Path) -> ResolvedConfig {
    ConfigCache::new(env.clone()).resolve(&ResolveRequest { cwd: Some(cwd.to_owned()), explicit: None }).unwrap()
}

#[test]
fn project_files_in_one_directory_rank_mcpx_then_mcp_then_cursor_then_vscode() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("p");
    let sub = p.join("sub");
    write(&p.join(".mcpx.json"), &format!(r#"{{"mcpServers": {{"a": {}}}}}"#, stdio("mcpx")));
    write(&p.join(".mcp.json"), &format!(r#"{{"mcpServers": {{"a": {}, "b": {}}}}}"#, stdio("mcp"), stdio("mcp")));
    write(
        &p.join(".cursor/mcp.json"),
        &format!(r#"{{"mcpServers": {{"b": {}, "c": {}}}}}"#, stdio("cursor"), stdio("${workspaceFolder}/run")),
    );
    write(
        &p.join(".vscode/mcp.json"),
        r#"{
          // VS Code's own shape: `servers`, `inputs`, `type`.
          "inputs": [{ "type": "promptString", "id": "key", "description": "API key", "password": true }],
          "servers": {
            "c": { "type": "stdio", "command": "vscode" },
            "d": { "type": "http", "url": "https://example.invalid/mcp" },
            "e": { "type": "sse", "url": "https://example.invalid/sse", "headers": { "K": "${input:key}" } }
          }
        }"#,
    );
    // A nearer directory wins over a farther `.mcpx.json`.
    write(&sub.join(".vscode/mcp.json"), r#"{"servers": {"a": {"command": "${workspaceFolderBasename}"}}}"#);
    let env = env_for(tmp.path());
    let cfg = resolve_in(&env, &sub);
    assert_eq!(
        summary(&cfg),
        vec![
            ("a".into(), "sub".into(), Some("vscode")),
            ("b".into(), "mcp".into(), None),
            ("c".into(), format!("{}/run", p.display()), Some("cursor")),
            ("d".into(), "https://example.invalid/mcp (http)".into(), Some("vscode")),
            ("e".into(), "https://example.invalid/sse (sse)".into(), Some("vscode")),
        ]
    );
    // `${input:...}` reads the secret store at expansion: unset, it fails only its server.
    let e = cfg
        .get("e")
        .unwrap()
        .expand(&std::collections::HashMap::new(), &std::collections::BTreeMap::new())
        .unwrap_err();
    assert!(e.to_string().contains("VS Code input `key` (API key) is not set: run `mcpx secret set key`"), "{e}");
    let files: Vec<_> = cfg.files.iter().map(|f| f.strip_prefix(tmp.path()).unwrap().to_owned()).collect();
    let want: Vec<std::path::PathBuf> =
        ["p/sub/.vscode/mcp.json", "p/.mcpx.json", "p/.mcp.json", "p/.cursor/mcp.json", "p/.vscode/mcp.json"]
            .iter()
            .map(Into::into)
            .collect();
    assert_eq!(files, want);
}

#[test]
fn imports_rank_below_the_user_config_in_the_order_listed_and_project_files_beat_them() {
    let tmp = tempfile::tempdir().unwrap();
    let env = env_for(tmp.path());
    let home = tmp.path().join("home");
    write(
        &env.user_file().unwrap(),
        &format!(
            r#"{{
              // Comments are fine here.
              "imports": ["cursor", "claude-desktop", "windsurf"],
              "mcpServers": {{ "u": {} }}
            }}"#,
            stdio("user")
        ),
    );
    write(
        &home.join(".cursor/mcp.json"),
        &format!(r#"{{"mcpServers": {{"u": {}, "dup": {}, "a": {}}}}}"#, stdio("x"), stdio("cursor"), stdio("cursor")),
    );
    write(
        &Client::ClaudeDesktop.user_file(&env).unwrap(),
        &format!(
            r#"{{"mcpServers": {{"dup": {}, "b": {}, "p": {}}}}}"#,
            stdio("desktop"),
            stdio("desktop"),
            stdio("far")
        ),
    );
    // Not there: skipped.
    let project = tmp.path().join("proj");
    write(&project.join(".mcp.json"), &format!(r#"{{"mcpServers": {{"p": {}}}}}"#, stdio("project")));
    let cfg = resolve_in(&env, &project);
    assert_eq!(
        summary(&cfg),
        vec![
            ("a".into(), "cursor".into(), Some("cursor")),
            ("b".into(), "desktop".into(), Some("claude-desktop")),
            ("dup".into(), "cursor".into(), Some("cursor")),
            ("p".into(), "project".into(), None),
            ("u".into(), "user".into(), None),
        ]
    );
    assert!(cfg.file_warnings.is_empty(), "{:?}", cfg.file_warnings);
    assert_eq!(cfg.files.len(), 4, "{:?}", cfg.files);
}

#[test]
fn imports_in_a_project_file_are_ignored_with_a_warning_and_bad_names_are_warned_about() {
    let tmp = tempfile::tempdir().unwrap();
    let env = env_for(tmp.path());
    let home = tmp.path().join("home");
    write(&home.join(".cursor/mcp.json"), &format!(r#"{{"mcpServers": {{"c": {}}}}}"#, stdio("cursor")));
    let project = tmp.path().join("proj");
    write(&project.join(".mcpx.json"), &format!(r#"{{"imports": ["cursor"], "mcpServers": {{"p": {}}}}}"#, stdio("p")));
    let cfg = resolve_in(&env, &project);
    assert_eq!(summary(&cfg), vec![("p".into(), "p".into(), None)]);
    assert_eq!(cfg.file_warnings.len(), 1);
    assert_eq!(cfg.file_warnings[0].file, project.join(".mcpx.json"));
    assert!(cfg.file_warnings[0].message.contains("ignored in a project file"), "{:?}", cfg.file_warnings);

    write(&env.user_file().unwrap(), r#"{"imports": ["cursr", 7, "cursor"]}"#);
    let cfg = resolve_in(&env, &project);
    assert_eq!(summary(&cfg).len(), 2, "the good import still counts");
    let messages: Vec<&str> = cfg.file_warnings.iter().map(|w| w.message.as_str()).collect();
    assert!(messages.iter().any(|m| m.contains("`imports[0]`: unknown client `cursr` (use one of: claude-desktop")));
    assert!(messages.iter().any(|m| m.contains("`imports[1]`: expected a client name")));
}

#[test]
fn a_clients_user_file_is_never_a_project_file() {
    let tmp = tempfile::tempdir().unwrap();
    let env = env_for(tmp.path());
    let home = tmp.path().join("home");
    write(&home.join(".cursor/mcp.json"), &format!(r#"{{"mcpServers": {{"c": {}}}}}"#, stdio("cursor")));
    assert!(resolve_in(&env, &home.join("work")).servers.is_empty());
    // Also when HOME is a symbolic link and the caller's directory is the real one.
    let link = tmp.path().join("home-link");
    std::os::unix::fs::symlink(&home, &link).unwrap();
    let vars = [("HOME".to_owned(), link.display().to_string())].into_iter().collect();
    let linked = ConfigEnv::from_vars(&vars);
    assert_eq!(linked.home_real.as_deref(), Some(home.canonicalize().unwrap().as_path()));
    assert!(resolve_in(&linked, &home.canonicalize().unwrap().join("work")).servers.is_empty());
}

#[test]
fn claude_code_projects_apply_to_callers_at_or_below_their_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let env = env_for(tmp.path());
    let p = tmp.path().join("p");
    let text = format!(
        r#"{{
          "numStartups": 3,
          "mcpServers": {{ "top": {top}, "x": {top}, "mcpx": {{ "type": "stdio", "command": "mcpx", "args": ["serve"] }} }},
          "projects": {{
            "{p}": {{ "allowedTools": [], "mcpServers": {{ "x": {local}, "y": {local} }} }},
            "{p}/sub": {{ "mcpServers": {{ "x": {sub} }} }},
            "{p}/empty": {{ "allowedTools": [] }}
          }}
        }}"#,
        top = r#"{"type": "stdio", "command": "top", "args": [], "env": {}}"#,
        local = stdio("local"),
        sub = stdio("sub"),
        p = p.display()
    );
    write(&Client::ClaudeCode.user_file(&env).unwrap(), &text);
    write(&env.user_file().unwrap(), r#"{"imports": ["claude-code"]}"#);
    let at = |dir: &Path| summary(&resolve_in(&env, dir)).into_iter().map(|(n, c, _)| (n, c)).collect::<Vec<_>>();
    let s = |a: &str, b: &str| (a.to_owned(), b.to_owned());
    assert_eq!(at(&p.join("sub/deeper")), vec![s("top", "top"), s("x", "sub")]);
    assert_eq!(at(&p), vec![s("top", "top"), s("x", "local"), s("y", "local")]);
    // A project without servers is still the caller's project: its parent's do not apply.
    assert_eq!(at(&p.join("empty")), vec![s("top", "top"), s("x", "top")]);
    assert_eq!(at(&tmp.path().join("q")), vec![s("top", "top"), s("x", "top")]);
    let file = Client::ClaudeCode.user_file(&env).unwrap();
    let listed = read_client_file(Client::ClaudeCode, &file, Some(&p.join("sub"))).unwrap();
    let names: Vec<(&str, &str)> = listed.iter().map(|(n, m)| (n.as_str(), m["command"].as_str().unwrap())).collect();
    assert_eq!(names, vec![("top", "top"), ("x", "sub")]);
    // Projects of other shapes are no projects; a mistake in one is the file's, with its line.
    let odd_dir = tmp.path().join("odd");
    let odd = r#"{"mcpServers": {"top": {"command": "top"}},
                  "projects": {"/a": 7, "/b": [1, {"x": 2}], "/c": {"mcpServers": "no", "history": [{}]}}}"#;
    write(&odd_dir.join(".claude.json"), odd);
    let odd_env = ConfigEnv { claude_config_dir: Some(odd_dir), ..env.clone() };
    for dir in ["/a", "/b/x", "/c"] {
        assert_eq!(summary(&resolve_in(&odd_env, Path::new(dir))).len(), 1, "{dir}");
    }
    let bad = text.replacen(r#""allowedTools": [],"#, r#""allowedTools": [,"#, 1);
    write(&tmp.path().join("bad/.claude.json"), &bad);
    let bad_env = ConfigEnv { claude_config_dir: Some(tmp.path().join("bad")), ..env.clone() };
    write(&bad_env.user_file().unwrap(), r#"{"imports": ["claude-code"]}"#);
    let cfg = resolve_in(&bad_env, &p);
    let e = cfg.file_errors[0].0.to_string();
    assert!(e.contains(".claude.json:5:") && !e.contains("at line"), "{e}");
    // `mcpx` (how Claude Code reaches mcpx) is left out everywhere; every project's
    // servers count as configured.
    let contents = ConfigCache::new(env.clone()).file_contents(&file).unwrap().unwrap();
    assert_eq!(contents.servers.len(), 5);
}

#[test]
fn a_file_that_cannot_be_read_or_is_not_a_regular_file_fails_only_itself() {
    let tmp = tempfile::tempdir().unwrap();
    let env = env_for(tmp.path());
    let home = tmp.path().join("home");
    write(
        &env.user_file().unwrap(),
        &format!(r#"{{"imports": ["cursor", "windsurf"], "mcpServers": {{"u": {}}}}}"#, stdio("u")),
    );
    // A FIFO would block a reader until a writer came; a directory cannot be read.
    let fifo = home.join(".codeium/windsurf/mcp_config.json");
    fs::create_dir_all(fifo.parent().unwrap()).unwrap();
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    fs::create_dir_all(home.join(".cursor/mcp.json")).unwrap();
    let cfg = resolve_in(&env, tmp.path());
    assert_eq!(summary(&cfg), vec![("u".into(), "u".into(), None)]);
    let errors: Vec<String> = cfg.file_errors.iter().map(|e| e.0.to_string()).collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors[0].contains(".cursor/mcp.json: cannot read config file: it is a directory"), "{errors:?}");
    assert!(errors[1].contains("mcp_config.json: cannot read config file: it is not a regular file"), "{errors:?}");
}

#[test]
fn an_entry_that_is_not_an_object_fails_alone_and_null_is_absent() {
    let tmp = tempfile::tempdir().unwrap();
    let env = env_for(tmp.path());
    let p = tmp.path().join("p");
    write(&p.join(".mcp.json"), &format!(r#"{{"mcpServers": {{"s": "npx foo", "n": null, "ok": {}}}}}"#, stdio("ok")));
    write(
        &tmp.path().join("codex/config.toml"),
        "[mcp_servers]
a = \"string\"\n[mcp_servers.b]\ncommand = \"b\"\n",
    );
    let cfg = resolve_in(&env, &p);
    assert_eq!(summary(&cfg), vec![("ok".into(), "ok".into(), None)]);
    let e = cfg.errors.get("s").unwrap().0.to_string();
    assert!(e.contains("expected an object with `command` or `url`, found a string"), "{e}");
    assert!(!cfg.errors.contains_key("n"));
    let mut env = env;
    env.codex_home = Some(tmp.path().join("codex"));
    write(&env.user_file().unwrap(), r#"{"imports": ["codex"]}"#);
    let cfg = resolve_in(&env, tmp.path());
    assert!(cfg.get("b").is_some() && cfg.errors.contains_key("a"), "{cfg:?}");
}

#[test]
fn codex_toml_servers_with_headers_and_options() {
    let tmp = tempfile::tempdir().unwrap();
    let mut env = env_for(tmp.path());
    env.codex_home = Some(tmp.path().join("codex"));
    write(
        &tmp.path().join("codex/config.toml"),
        r#"model = "o3"

[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-mcp"]
env = { "API_KEY" = "literal ${not a var}" }
startup_timeout_sec = 20
tool_timeout_sec = 45.5

[mcp_servers.remote]
url = "https://example.invalid/mcp"
bearer_token_env_var = "REMOTE_TOKEN"
http_headers = { "X-Team" = "core" }
enabled = false
"#,
    );
    write(&env.user_file().unwrap(), r#"{"imports": ["codex"]}"#);
    let cfg = resolve_in(&env, tmp.path());
    let docs = cfg.get("docs").unwrap();
    assert_eq!(docs.client, Some(Client::Codex));
    assert_eq!(docs.options.start_timeout, Some(std::time::Duration::from_secs(20)));
    assert_eq!(docs.options.call_timeout, Some(std::time::Duration::from_millis(45_500)));
    let vars: std::collections::HashMap<String, String> =
        [("REMOTE_TOKEN", "t0k")].iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    match docs.expand(&vars, &std::collections::BTreeMap::new()).unwrap() {
        ExpandedTransport::Stdio(s) => {
            assert_eq!(s.env.get("API_KEY").map(String::as_str), Some("literal ${not a var}"))
        }
        other => panic!("{other:?}"),
    }
    let remote = cfg.get("remote").unwrap();
    assert!(remote.options.disabled);
    match remote.expand(&vars, &std::collections::BTreeMap::new()).unwrap() {
        ExpandedTransport::Remote(r) => {
            assert_eq!(r.headers.get("Authorization").map(String::as_str), Some("Bearer t0k"));
            assert_eq!(r.headers.get("X-Team").map(String::as_str), Some("core"));
        }
        other => panic!("{other:?}"),
    }
    // A TOML mistake names the file, line and column.
    write(&tmp.path().join("codex/config.toml"), "[mcp_servers.docs]\ncommand = \n");
    let cfg = resolve_in(&env, tmp.path());
    let e = cfg.file_errors[0].0.to_string();
    assert!(e.contains("config.toml:2:"), "{e}");
}

#[test]
fn gemini_and_windsurf_remote_keys() {
    let tmp = tempfile::tempdir().unwrap();
    let env = env_for(tmp.path());
    let home = tmp.path().join("home");
    write(
        &home.join(".gemini/settings.json"),
        r#"{ "theme": "Default", "mcpServers": {
              "g-http": { "httpUrl": "https://example.invalid/mcp", "headers": { "Authorization": "Bearer $GEMINI_TOKEN" }, "timeout": 5000 },
              "g-sse": { "url": "https://example.invalid/sse" } } }"#,
    );
    write(
        &home.join(".codeium/windsurf/mcp_config.json"),
        r#"{ "mcpServers": { "w": { "serverUrl": "https://example.invalid/w", "headers": { "K": "${env:W}" } } } }"#,
    );
    write(&env.user_file().unwrap(), r#"{"imports": ["gemini", "windsurf"]}"#);
    let cfg = resolve_in(&env, tmp.path());
    assert_eq!(
        summary(&cfg),
        vec![
            ("g-http".into(), "https://example.invalid/mcp (http)".into(), Some("gemini")),
            ("g-sse".into(), "https://example.invalid/sse (http)".into(), Some("gemini")),
            ("w".into(), "https://example.invalid/w (http)".into(), Some("windsurf")),
        ]
    );
    assert_eq!(cfg.get("g-http").unwrap().options.call_timeout, Some(std::time::Duration::from_secs(5)));
    match &cfg.get("g-http").unwrap().transport {
        TransportSpec::Remote { headers, .. } => assert_eq!(headers["Authorization"], "Bearer ${GEMINI_TOKEN:-}"),
        other => panic!("{other:?}"),
    }
}

/// Goose's and Continue's YAML with merge keys (`<<: *anchor`) read as those clients read
/// them: the anchor's keys are the entry's, and no literal `<<` key is left.
#[test]
fn yaml_merge_keys_are_applied() {
    let dir = tempfile::tempdir().unwrap();
    let goose = dir.path().join("config.yaml");
    let text =
        "base: &base\n  type: stdio\n  enabled: false\n  args: []\nextensions:\n  g:\n    <<: *base\n    cmd: gx\n";
    write(&goose, text);
    let read = read_client_file(Client::Goose, &goose, None).unwrap();
    assert_eq!(read.len(), 1);
    let (name, entry) = &read[0];
    assert_eq!(name, "g");
    assert_eq!(entry["command"], "gx");
    assert_eq!(entry["mcpx"]["disabled"], true, "{entry:?}");
    assert!(!entry.contains_key("<<"), "{entry:?}");
    let cont = dir.path().join("c.yaml");
    write(&cont, "x: &cmd\n  command: cx\nmcpServers:\n  - name: c\n    <<: *cmd\n");
    let read = read_client_file(Client::Continue, &cont, None).unwrap();
    assert_eq!(read[0].1["command"], "cx");
}
