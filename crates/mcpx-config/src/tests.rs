//! The configuration's tests: files in each dialect read, merged and resolved, trust,
//! expansion and the errors' messages, on real files in temporary directories.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::*;

/// No secrets: these entries use none.
const NO_SECRETS: std::collections::BTreeMap<String, String> = std::collections::BTreeMap::new();

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn env_for(dir: &Path) -> ConfigEnv {
    ConfigEnv { home: Some(dir.join("home")), xdg_config_home: Some(dir.join("xdg")), ..ConfigEnv::default() }
}

fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// Parses one file's text with an explicit request.
fn parse_text(text: &str) -> Result<ResolvedConfig, ConfigError> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.json");
    write(&file, text);
    let cache = ConfigCache::new(env_for(dir.path()));
    let mut cfg = cache.resolve(&ResolveRequest { cwd: None, explicit: Some(file) })?;
    drop(cache);
    // The file's syntax error, else its first bad entry: the error it was before files and
    // entries failed alone.
    let first = cfg.file_errors.pop().or_else(|| cfg.errors.pop_first().map(|(_, e)| e));
    match first {
        Some(error) => {
            drop(cfg);
            Err(std::sync::Arc::try_unwrap(error.0).unwrap())
        }
        None => Ok(cfg),
    }
}

fn command_of(entry: &ServerEntry) -> &str {
    match &entry.transport {
        TransportSpec::Stdio { command, .. } => command,
        TransportSpec::Remote { url, .. } => url,
    }
}

#[test]
fn jsonc_comments_and_trailing_commas() {
    let cfg = parse_text(
        r#"// leading comment
        {
          /* block
             comment */
          "mcpServers": {
            "a": {
              "command": "npx", // why
              "args": ["-y", "pkg",],
              "env": { "K": "v", },
              "somethingElse": {"kept": true},
            },
            "b": { "url": "https://x/mcp", "headers": {"H": "1"}, "transport": "sse" },
          },
          "otherProgram": 1,
        }"#,
    )
    .unwrap();
    let a = cfg.get("a").unwrap();
    assert_eq!(
        a.transport,
        TransportSpec::Stdio {
            command: "npx".into(),
            args: vec!["-y".into(), "pkg".into()],
            env: [("K".to_string(), "v".to_string())].into(),
            cwd: None,
        }
    );
    assert_eq!(a.options, ServerOptions::default());
    assert_eq!(
        cfg.get("b").unwrap().transport,
        TransportSpec::Remote {
            url: "https://x/mcp".into(),
            headers: [("H".to_string(), "1".to_string())].into(),
            kind: RemoteKind::Sse
        }
    );
}

#[test]
fn vscode_servers_key_merged_with_mcp_servers() {
    let cfg = parse_text(
        r#"{
          "servers": {
            "a": { "type": "stdio", "command": "from-servers" },
            "b": { "type": "sse", "url": "https://b" },
            "c": { "type": "http", "url": "https://c" }
          },
          "mcpServers": { "a": { "command": "from-mcpServers" } }
        }"#,
    )
    .unwrap();
    assert_eq!(command_of(cfg.get("a").unwrap()), "from-mcpServers");
    assert!(matches!(cfg.get("b").unwrap().transport, TransportSpec::Remote { kind: RemoteKind::Sse, .. }));
    assert!(matches!(cfg.get("c").unwrap().transport, TransportSpec::Remote { kind: RemoteKind::Http, .. }));
}

#[test]
fn merge_nearest_wins() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let sub = root.join("sub");
    let deeper = sub.join("deeper");
    fs::create_dir_all(&deeper).unwrap();
    write(&root.join(".mcp.json"), r#"{"mcpServers": {"a": {"command": "root-a"}, "b": {"command": "root-b"}}}"#);
    write(&sub.join(".mcpx.json"), r#"{"mcpServers": {"a": {"command": "sub-mcpx-a"}}}"#);
    write(&sub.join(".mcp.json"), r#"{"mcpServers": {"a": {"command": "sub-mcp-a"}, "c": {"command": "sub-c"}}}"#);
    let env = env_for(tmp.path());
    let user = env.user_file().unwrap();
    assert_eq!(user, tmp.path().join("xdg/mcpx/config.json"));
    write(&user, r#"{"mcpServers": {"a": {"command": "user-a"}, "d": {"command": "user-d"}}}"#);

    let cache = ConfigCache::new(env);
    let cfg = cache.resolve(&ResolveRequest { cwd: Some(deeper.clone()), explicit: None }).unwrap();
    let got: Vec<(&str, &str)> = cfg.servers.iter().map(|(k, v)| (k.as_str(), command_of(v))).collect();
    assert!(got.starts_with(&[("a", "sub-mcpx-a"), ("b", "root-b"), ("c", "sub-c")]));
    assert!(got.contains(&("d", "user-d")));
    assert_eq!(cfg.get("a").unwrap().source, sub.join(".mcpx.json"));
    // Only look at our files: the machine may have its own `/tmp/.mcp.json`.
    let ours: Vec<PathBuf> = cfg.files.iter().filter(|f| f.starts_with(tmp.path())).cloned().collect();
    assert_eq!(ours, vec![sub.join(".mcpx.json"), sub.join(".mcp.json"), root.join(".mcp.json"), user.clone()]);
    for f in &ours {
        assert!(cache.known_files().contains(f));
    }

    // Without a working directory only the user file applies.
    let cfg = cache.resolve(&ResolveRequest::default()).unwrap();
    assert_eq!(cfg.files, vec![user.clone()]);
    assert_eq!(command_of(cfg.get("a").unwrap()), "user-a");

    // HOME fallback when XDG_CONFIG_HOME is unset.
    let env = ConfigEnv { home: Some(tmp.path().join("home")), ..ConfigEnv::default() };
    assert_eq!(env.user_file().unwrap(), tmp.path().join("home/.config/mcpx/config.json"));
    assert_eq!(ConfigEnv::default().user_file(), None);
}

#[test]
fn explicit_file_is_the_only_file() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("p");
    write(&project.join(".mcp.json"), r#"{"mcpServers": {"a": {"command": "project"}}}"#);
    let env = env_for(tmp.path());
    write(&env.user_file().unwrap(), r#"{"mcpServers": {"u": {"command": "user"}}}"#);
    let explicit = tmp.path().join("explicit.json");
    write(&explicit, r#"{"mcpServers": {"e": {"command": "explicit"}}}"#);
    let cache = ConfigCache::new(env);

    let cfg = cache.resolve(&ResolveRequest { cwd: Some(project.clone()), explicit: Some(explicit.clone()) }).unwrap();
    assert_eq!(cfg.files, vec![explicit.clone()]);
    assert_eq!(cfg.servers.keys().collect::<Vec<_>>(), ["e"]);

    // Relative explicit paths are relative to the caller's cwd.
    let cfg = cache
        .resolve(&ResolveRequest { cwd: Some(tmp.path().to_owned()), explicit: Some("explicit.json".into()) })
        .unwrap();
    assert_eq!(cfg.files, vec![explicit]);

    // A missing explicit file is an error.
    let missing = tmp.path().join("missing.json");
    let err = cache.resolve(&ResolveRequest { cwd: None, explicit: Some(missing.clone()) }).unwrap_err();
    assert!(matches!(err, ConfigError::Io { .. }), "{err:?}");
    assert_eq!(err.file(), Some(missing.as_path()));
    assert!(err.to_string().contains("check the path given with --config or MCPX_CONFIG"), "{err}");
}

#[test]
fn unknown_mcpx_key_message() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("c.json");
    write(&file, r#"{"mcpServers": {"x": {"command": "c", "mcpx": {"max": 2, "foo": 1}}}}"#);
    let cfg = ConfigCache::new(ConfigEnv::default())
        .resolve(&ResolveRequest { cwd: None, explicit: Some(file.clone()) })
        .unwrap();
    let err = &cfg.errors["x"].0;
    assert_eq!(
        err.to_string(),
        format!(
            "{}: server `x`: unknown key `foo` in the `mcpx` block (known keys: sharing, scope, max, min, idleTimeout, callTimeout, startTimeout, supervised, bufferBytes, maxMessageBytes, orphanTimeout, description, disabled, includeTools, excludeTools, maxResultBytes, maxResultBytesPerTool, pinning, sandbox)",
            file.display()
        )
    );
    assert_eq!(err.file(), Some(file.as_path()));
    assert_eq!(err.server(), Some("x"));
}

#[test]
fn invalid_values_name_file_server_and_key() {
    let cases = [
        (r#"{"mcpx": {"idleTimeout": "5 minutes"}}"#, "mcpx.idleTimeout"),
        (r#"{"mcpx": {"scope": "planet"}}"#, "mcpx.scope"),
        (r#"{"mcpx": {"sharing": 1}}"#, "mcpx.sharing"),
        (r#"{"mcpx": {"max": 0}}"#, "mcpx.max"),
        (r#"{"mcpx": {"max": 2, "min": 3}}"#, "mcpx.min"),
        (r#"{"mcpx": {"bufferBytes": "8XB"}}"#, "mcpx.bufferBytes"),
        (r#"{"mcpx": {"includeTools": "a"}}"#, "mcpx.includeTools"),
        (r#"{"mcpx": {"supervised": "yes"}}"#, "mcpx.supervised"),
        (r#"{"mcpx": []}"#, "mcpx"),
        (r#"{"args": ["a", 1]}"#, "args[1]"),
        (r#"{"env": {"T": 5}}"#, "env.T"),
        (r#"{"args": ["${A"]}"#, "args[0]"),
    ];
    for (extra, key) in cases {
        let mut entry: serde_json::Value = serde_json::from_str(extra).unwrap();
        entry["command"] = "c".into();
        let text = serde_json::json!({"mcpServers": {"srv": entry}}).to_string();
        let err = parse_text(&text).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, ConfigError::InvalidValue { .. }), "{extra}: {msg}");
        assert!(msg.contains("c.json: server `srv`: invalid `"), "{msg}");
        assert!(msg.contains(&format!("invalid `{key}`: ")), "{extra}: {msg}");
        assert!(!msg.ends_with('.'), "{msg}");
    }
    let err = parse_text(r#"{"mcpServers": {"s": {"url": "https://x", "transport": "ws"}}}"#).unwrap_err();
    assert!(err.to_string().contains("invalid `transport`: unknown transport `ws`"), "{err}");
}

#[test]
fn command_and_url_exclusive() {
    let err = parse_text(r#"{"mcpServers": {"s": {"args": ["x"]}}}"#).unwrap_err();
    assert!(matches!(err, ConfigError::MissingCommandOrUrl { .. }));
    assert!(
        err.to_string().ends_with("server `s`: needs a `command` (local server) or a `url` (remote server)"),
        "{err}"
    );
    let err = parse_text(r#"{"mcpServers": {"s": {"command": "c", "url": "u"}}}"#).unwrap_err();
    assert!(matches!(err, ConfigError::BothCommandAndUrl { .. }));
    assert!(err.to_string().contains("c.json: server `s`: has both"), "{err}");
}

#[test]
fn syntax_error_reports_file_and_line() {
    let err = parse_text("{\n  /* a\n     multi-line comment */\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\"}\n    \"b\": {}\n  }\n}\n")
        .unwrap_err();
    let ConfigError::Syntax { file, line, column, .. } = &err else { panic!("{err:?}") };
    assert!(file.ends_with("c.json"));
    assert_eq!((*line, *column), (6, 5));
    let msg = err.to_string();
    assert!(msg.contains("c.json:6:5: expected `,` or `}`"), "{msg}");
    assert!(!msg.contains(" at line "), "{msg}");

    // A stray slash, reported by the comment stripper.
    let err = parse_text("{\n\n   / \"mcpServers\": {}}").unwrap_err();
    assert!(matches!(err, ConfigError::Syntax { line: 3, column: 4, .. }), "{err:?}");

    // Wrong shapes are reported with positions too.
    let err = parse_text("[1, 2]").unwrap_err();
    assert!(matches!(err, ConfigError::Syntax { line: 1, .. }), "{err:?}");
    // An entry of the wrong shape fails alone.
    let err = parse_text(r#"{"mcpServers": {"a": "npx"}}"#).unwrap_err();
    assert!(matches!(err, ConfigError::InvalidValue { .. }), "{err:?}");

    // A file without any server key is simply empty.
    assert!(parse_text(r#"{"editor.fontSize": 12}"#).unwrap().servers.is_empty());
}

#[test]
fn expansion_and_unset_variables() {
    let cfg = parse_text(
        r#"{"mcpServers": {
            "docs": {
              "command": "${TOOLS}/docs",
              "args": ["--token=${DOCS_TOKEN}", "$${LITERAL}"],
              "env": {"T": "${DOCS_TOKEN}", "D": "${NOPE:-fallback}"},
              "cwd": "work"
            },
            "remote": {"url": "https://h/${DOCS_TOKEN}", "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}}
        }}"#,
    )
    .unwrap();
    let docs = cfg.get("docs").unwrap();
    let env = vars(&[("TOOLS", "/opt"), ("DOCS_TOKEN", "s3cret")]);
    let ExpandedTransport::Stdio(stdio) = docs.expand(&env, &NO_SECRETS).unwrap() else { panic!() };
    assert_eq!(stdio.command, "/opt/docs");
    assert_eq!(stdio.args, ["--token=s3cret", "${LITERAL}"]);
    assert_eq!(stdio.env["T"], "s3cret");
    assert_eq!(stdio.env["D"], "fallback");
    assert_eq!(stdio.cwd, Some(docs.source.parent().unwrap().join("work")));
    let debug = format!("{stdio:?}");
    assert!(!debug.contains("s3cret"), "{debug}");
    assert!(debug.contains("${DOCS_TOKEN}"), "{debug}");

    let remote = cfg.get("remote").unwrap().expand(&env, &NO_SECRETS).unwrap();
    let ExpandedTransport::Remote(r) = &remote else { panic!() };
    assert_eq!(r.headers["Authorization"], "Bearer s3cret");
    assert!(!format!("{remote:?}").contains("s3cret"));

    let err = docs.expand(&vars(&[("TOOLS", "/opt")]), &NO_SECRETS).unwrap_err();
    assert_eq!(
        err.to_string(),
        "server `docs`: environment variable `DOCS_TOKEN` is not set in the daemon's environment (set it and restart the daemon with `mcpx stop`)"
    );
    assert!(
        matches!(&err, ConfigError::UnsetVariable { variable, server } if variable == "DOCS_TOKEN" && server == "docs")
    );
    assert_eq!(err.file(), None);
}

#[test]
fn options_durations_and_sizes() {
    let cfg = parse_text(
        r#"{"mcpServers": {"s": {"command": "c", "mcpx": {
            "sharing": "exclusive", "scope": "parent-session", "max": 2, "min": 1,
            "idleTimeout": 0, "callTimeout": "500ms", "startTimeout": 1.5, "orphanTimeout": "0",
            "bufferBytes": "64KiB", "maxMessageBytes": 1048576, "supervised": false,
            "description": "d", "disabled": true, "includeTools": ["a", "b"], "excludeTools": ["b"]
        }}}}"#,
    )
    .unwrap();
    let o = &cfg.get("s").unwrap().options;
    assert_eq!(o.sharing, Sharing::Exclusive);
    assert_eq!(o.scope, Scope::ParentSession);
    assert_eq!(o.scope.as_str(), "parent-session");
    assert_eq!((o.max, o.min), (2, 1));
    assert_eq!(o.idle_timeout, None);
    assert_eq!(o.call_timeout, Some(Duration::from_millis(500)));
    assert_eq!(o.start_timeout, Some(Duration::from_millis(1500)));
    assert_eq!(o.orphan_timeout, None);
    assert_eq!(o.buffer_bytes, 64 * 1024);
    assert_eq!(o.max_message_bytes, 1 << 20);
    assert!(!o.supervised && o.disabled);
    assert_eq!(o.description.as_deref(), Some("d"));
    assert!(o.tool_allowed("a"));
    assert!(!o.tool_allowed("b"));
    assert!(!o.tool_allowed("c"));
    assert_eq!(cfg.enabled().count(), 0);

    let d = ServerOptions::default();
    assert_eq!(d.idle_timeout, Some(Duration::from_secs(300)));
    assert_eq!(d.call_timeout, Some(Duration::from_secs(120)));
    assert_eq!(d.start_timeout, Some(Duration::from_secs(60)));
    assert_eq!(d.orphan_timeout, Some(Duration::from_secs(3600)));
    assert_eq!(d.buffer_bytes, 8 * 1024 * 1024);
    assert_eq!(d.max_message_bytes, 64 * 1024 * 1024);
    assert!(d.tool_allowed("anything"));
    for scope in Scope::ALL {
        assert_eq!(scope.as_str().parse::<Scope>(), Ok(scope));
        assert_eq!(serde_json::to_value(scope).unwrap(), scope.as_str());
    }
}

#[test]
fn fingerprint_uses_templates() {
    let text = |args: &str| {
        format!(
            r#"{{"mcpServers": {{"s": {{"command": "srv", "args": {args}, "env": {{"B": "2", "A": "${{TOKEN}}"}}}}}}}}"#
        )
    };
    let one = parse_text(&text(r#"["--x"]"#)).unwrap();
    let one = one.get("s").unwrap();
    let fp = one.fingerprint(None);
    assert_eq!(fp.len(), 16);
    assert!(fp.chars().all(|c| c.is_ascii_hexdigit()));
    // Stable across calls, and independent of the variable's value.
    assert_eq!(one.fingerprint(None), fp);
    let _ = one.expand(&vars(&[("TOKEN", "a")]), &NO_SECRETS).unwrap();
    let _ = one.expand(&vars(&[("TOKEN", "b")]), &NO_SECRETS).unwrap();
    assert_eq!(one.fingerprint(None), fp);
    // Same entry elsewhere, under another name, or with other non-process options: same.
    let mut moved = one.clone();
    moved.source = "/elsewhere/.mcp.json".into();
    moved.name = "other".into();
    moved.options.idle_timeout = None;
    assert_eq!(moved.fingerprint(None), fp);
    // Args, scope and executable identity change it.
    let two = parse_text(&text(r#"["--y"]"#)).unwrap();
    assert_ne!(two.get("s").unwrap().fingerprint(None), fp);
    let mut scoped = one.clone();
    scoped.options.scope = Scope::Repo;
    assert_ne!(scoped.fingerprint(None), fp);
    let exe = ExeIdentity { path: "/usr/bin/srv".into(), stamp: "1:2:3.000000000".into() };
    let with_exe = one.fingerprint(Some(&exe));
    assert_ne!(with_exe, fp);
    let exe2 = ExeIdentity { stamp: "1:2:4.000000000".into(), ..exe.clone() };
    assert_ne!(one.fingerprint(Some(&exe2)), with_exe);
}

#[test]
fn cache_rereads_only_changed_files() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("p");
    let file = project.join(".mcp.json");
    write(&file, r#"{"mcpServers": {"a": {"command": "one"}}}"#);
    let cache = ConfigCache::new(env_for(tmp.path()));
    let req = ResolveRequest { cwd: Some(project.clone()), explicit: None };

    let ours = |cache: &ConfigCache| {
        let cfg = cache.resolve(&req).unwrap();
        command_of(cfg.get("a").unwrap()).to_owned()
    };
    assert_eq!(ours(&cache), "one");
    let baseline = cache.reads();
    assert!(baseline >= 1);
    assert_eq!(ours(&cache), "one");
    assert_eq!(cache.reads(), baseline, "unchanged file must not be re-read");

    // Size change.
    write(&file, r#"{"mcpServers": {"a": {"command": "three"}}}"#);
    assert_eq!(ours(&cache), "three");
    assert_eq!(cache.reads(), baseline + 1);
    assert_eq!(ours(&cache), "three");
    assert_eq!(cache.reads(), baseline + 1);

    // Same size, only the mtime changes.
    write(&file, r#"{"mcpServers": {"a": {"command": "seven"}}}"#);
    let f = fs::File::options().write(true).open(&file).unwrap();
    f.set_modified(SystemTime::now() + Duration::from_secs(10)).unwrap();
    drop(f);
    assert_eq!(ours(&cache), "seven");
    assert_eq!(cache.reads(), baseline + 2);

    // A broken file is an error of that file, which keeps its last good read; fixing it
    // recovers.
    write(&file, r#"{"mcpServers": {"a": {"command": }}}"#);
    let cfg = cache.resolve(&req).unwrap();
    assert!(matches!(*cfg.file_errors[0].0, ConfigError::Syntax { .. }), "{cfg:?}");
    assert_eq!(command_of(cfg.get("a").unwrap()), "seven");
    write(&file, r#"{"mcpServers": {"a": {"command": "fixed"}}}"#);
    assert_eq!(ours(&cache), "fixed");

    // Deleted files disappear from results.
    fs::remove_file(&file).unwrap();
    let cfg = cache.resolve(&req).unwrap();
    assert!(!cfg.files.contains(&file));
    assert!(cache.known_files().contains(&file), "known files are remembered");
}

/// What a resolution records tells every change that could change its outcome: a file
/// edited, a farther file appearing, the trust records written; a broken file is never
/// reused.
#[test]
fn a_resolution_is_unchanged_until_one_of_its_inputs_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("p");
    let file = project.join(".mcp.json");
    write(&file, r#"{"mcpServers": {"a": {"command": "one"}}}"#);
    let trust = tmp.path().join("trust.json");
    let cache = ConfigCache::new(env_for(tmp.path())).with_trust_file(trust.clone());
    let req = ResolveRequest { cwd: Some(project.clone()), explicit: None };
    let recorded = |cache: &ConfigCache| cache.resolve_recorded(&req).unwrap().1;

    let inputs = recorded(&cache).expect("a good resolution is reusable");
    assert!(cache.unchanged(&inputs));
    // Another size: a same-size edit within the clock's tick keeps the stamp (as the file
    // cache has always had it).
    write(&file, r#"{"mcpServers": {"a": {"command": "three"}}}"#);
    assert!(!cache.unchanged(&inputs), "the file was edited");

    let inputs = recorded(&cache).unwrap();
    write(&tmp.path().join("xdg/mcpx/config.json"), r#"{"mcpServers": {}}"#);
    assert!(!cache.unchanged(&inputs), "the user file appeared");

    let inputs = recorded(&cache).unwrap();
    write(&project.join("sub/.mcp.json"), "{}");
    assert!(cache.unchanged(&inputs), "a file below the caller's directory is none of its own");
    write(&trust, "{}");
    assert!(!cache.unchanged(&inputs), "the trust records were written");

    write(&file, r#"{"mcpServers": {"a": {"command": }}}"#);
    assert!(recorded(&cache).is_none(), "a broken file is read again on every request");
}

#[cfg(unix)]
#[test]
fn resolve_command_lookup() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let bin1 = tmp.path().join("bin1");
    let bin2 = tmp.path().join("bin2");
    fs::create_dir_all(&bin1).unwrap();
    fs::create_dir_all(&bin2).unwrap();
    // Not executable in bin1, executable in bin2: execvp skips the first.
    write(&bin1.join("tool"), "#!/bin/sh\n");
    write(&bin2.join("tool"), "#!/bin/sh\n");
    fs::set_permissions(bin2.join("tool"), fs::Permissions::from_mode(0o755)).unwrap();
    // A directory is not a command.
    fs::create_dir_all(bin1.join("dir")).unwrap();

    let path = format!("{}:{}", bin1.display(), bin2.display());
    assert_eq!(resolve_command("tool", Some(&path), None).unwrap(), bin2.join("tool"));

    let empty = format!("{}:{}", bin1.join("dir").display(), tmp.path().join("nope").display());
    let err = resolve_command("npx", Some(&empty), None).unwrap_err();
    assert_eq!(err.to_string(), format!("command `npx` not found on PATH (searched: {empty})"));
    let err = resolve_command("mcpx-no-such-command-xyz", Some("/usr/bin:/bin"), None).unwrap_err();
    assert_eq!(err.to_string(), "command `mcpx-no-such-command-xyz` not found on PATH (searched: /usr/bin:/bin)");
    let err = resolve_command("dir", Some(&path), None).unwrap_err();
    assert_eq!(err.to_string(), format!("command `dir` not found on PATH (searched: {path})"));

    // Commands with a slash are relative to cwd.
    assert_eq!(resolve_command("./bin2/tool", Some(""), Some(tmp.path())).unwrap(), tmp.path().join("./bin2/tool"));
    let err = resolve_command("bin1/tool", None, Some(tmp.path())).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("command `bin1/tool` not found: {} is not an executable file", tmp.path().join("bin1/tool").display())
    );

    // An empty PATH entry means the working directory.
    assert_eq!(resolve_command("tool", Some(":/nonexistent"), Some(&bin2)).unwrap(), bin2.join("./tool"));

    let id = exe_identity(&bin2.join("tool")).unwrap();
    assert_eq!(id.path, fs::canonicalize(bin2.join("tool")).unwrap());
    assert_eq!(id.stamp.split(':').count(), 3);
    assert!(exe_identity(&bin1.join("missing")).is_err());
}

#[test]
fn a_bad_entry_fails_alone_and_hides_a_farther_one_of_its_name() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("p");
    write(&project.join(".mcp.json"), r#"{"mcpServers": {"good": {"command": "g"}, "bad": {"command": 42}}}"#);
    write(
        &tmp.path().join("xdg/mcpx/config.json"),
        r#"{"mcpServers": {"bad": {"command": "user"}, "user": {"command": "u"}}}"#,
    );
    let cfg =
        ConfigCache::new(env_for(tmp.path())).resolve(&ResolveRequest { cwd: Some(project), explicit: None }).unwrap();
    assert_eq!(cfg.servers.keys().collect::<Vec<_>>(), ["good", "user"]);
    let err = cfg.errors["bad"].0.to_string();
    assert!(err.contains(".mcp.json: server `bad`: invalid `command`: expected a string, found a number"), "{err}");
}

/// A project file's entry is untrusted until a record of its canonical file, name and
/// hash says otherwise, and a changed entry is untrusted again; the user config's
/// `trustProjectFiles` trusts every project file, a project file's is ignored with a
/// warning; a known file read alone is a project file unless once named explicitly.
#[test]
fn project_entries_are_trusted_only_as_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let env = env_for(dir.path());
    let proj = dir.path().join("proj");
    let file = proj.join(".mcp.json");
    write(&file, r#"{"trustProjectFiles": true, "mcpServers": {"a": {"command": "x"}, "b": {"command": "y"}}}"#);
    let user = dir.path().join("xdg/mcpx/config.json");
    write(&user, r#"{"mcpServers": {"u": {"command": "z"}}}"#);
    let trust = dir.path().join("trust.json");
    let cache = ConfigCache::new(env.clone()).with_trust_file(trust.clone());
    let req = ResolveRequest { cwd: Some(proj.clone()), explicit: None };
    let cfg = cache.resolve(&req).unwrap();
    let trusted = |cfg: &ResolvedConfig| -> Vec<String> {
        cfg.servers.values().filter(|e| e.trusted).map(|e| e.name.clone()).collect()
    };
    assert_eq!(trusted(&cfg), ["u"], "the user's own server only");
    assert!(cfg.file_warnings.iter().any(|w| w.message.contains("trustProjectFiles")), "{:?}", cfg.file_warnings);

    let mut store = TrustStore::default();
    for entry in project_entries(&proj, &env).unwrap() {
        store.add(TrustRecord { file: entry.file, server: entry.server, hash: entry.hash });
    }
    fs::write(&trust, store.to_bytes()).unwrap();
    assert_eq!(trusted(&cache.resolve(&req).unwrap()), ["a", "b", "u"]);
    write(&file, r#"{"mcpServers": {"b": {"command": "y"}, "a": {"command": "x", "args": ["new"]}}}"#);
    assert_eq!(trusted(&cache.resolve(&req).unwrap()), ["b", "u"], "a changed entry needs trust again");

    let alone = |cache: &ConfigCache| -> Vec<String> {
        let servers = cache.file_contents(&file).unwrap().unwrap().servers;
        servers.into_iter().filter(|e| e.trusted).map(|e| e.name).collect()
    };
    assert_eq!(alone(&cache), ["b"], "read alone, the file is a project file");
    cache.resolve(&ResolveRequest { cwd: None, explicit: Some(file.clone()) }).unwrap();
    assert_eq!(cache.explicit_files().keys().collect::<Vec<_>>(), [&file]);
    assert_eq!(alone(&cache), ["a", "b"], "a file named explicitly is the user's, as named");
    write(&file, r#"{"mcpServers": {"b": {"command": "y"}, "a": {"command": "x", "args": ["newer"]}}}"#);
    assert_eq!(alone(&cache), ["b"], "rewritten since it was named: not the user's any more");

    write(&user, r#"{"trustProjectFiles": true, "mcpServers": {}}"#);
    let fresh = ConfigCache::new(env).with_trust_file(dir.path().join("none.json"));
    assert_eq!(trusted(&fresh.resolve(&req).unwrap()), ["a", "b"]);
    assert_eq!(alone(&fresh), ["a", "b"]);
}

#[test]
fn a_remote_entry_takes_an_oauth_block_and_a_command_entry_does_not() {
    let cfg = parse_text(
        r#"{"mcpServers": {"r": {"url": "https://h/mcp",
            "oauth": {"issuer": "https://as.h", "clientId": "${ID}", "clientSecret": "${secret:R_SECRET}", "scopes": ["read"]}}}}"#,
    )
    .unwrap();
    let oauth = cfg.get("r").unwrap().oauth.clone().unwrap();
    assert_eq!(oauth.client_id.as_deref(), Some("${ID}"));
    assert_eq!(oauth.client_secret.as_deref(), Some("${secret:R_SECRET}"));
    assert_eq!(oauth.scopes, Some(vec!["read".to_owned()]));

    let err = parse_text(r#"{"mcpServers": {"c": {"command": "x", "oauth": {}}}}"#).unwrap_err();
    assert!(err.to_string().contains("only a `url` entry"), "{err}");
    let err = parse_text(r#"{"mcpServers": {"r": {"url": "https://h/mcp", "oauth": {"clientSecret": "${secret:}"}}}}"#)
        .unwrap_err();
    assert!(matches!(&err, ConfigError::InvalidValue { key, .. } if key == "oauth.clientSecret"), "{err:?}");
}

/// `pinning`: the user config's top level sets the default, a server's block its own
/// mode; a project file may only tighten, and a looser setting there is ignored with a
/// warning naming the file; a value that is not a mode is a warning, or the entry's
/// error in a block.
#[test]
fn pinning_defaults_to_hold_and_a_project_file_may_only_tighten_it() {
    let dir = tempfile::tempdir().unwrap();
    let env = env_for(dir.path());
    let proj = dir.path().join("proj");
    let file = proj.join(".mcp.json");
    let user = dir.path().join("xdg/mcpx/config.json");
    let req = ResolveRequest { cwd: Some(proj.clone()), explicit: None };
    let modes = |cfg: &ResolvedConfig| -> Vec<(String, Pinning)> {
        cfg.servers.values().map(|e| (e.name.clone(), e.pinning)).collect()
    };
    let pair = |name: &str, mode| (name.to_owned(), mode);

    write(&user, r#"{"mcpServers": {"u": {"command": "z"}, "loose": {"command": "w", "mcpx": {"pinning": "off"}}}}"#);
    write(&file, r#"{"mcpServers": {"p": {"command": "x"}}}"#);
    let cfg = ConfigCache::new(env.clone()).resolve(&req).unwrap();
    let want = [pair("loose", Pinning::Off), pair("p", Pinning::Hold), pair("u", Pinning::Hold)];
    assert_eq!(modes(&cfg), want, "hold by default; the user may loosen a server");

    write(&user, r#"{"pinning": "warn", "mcpServers": {"u": {"command": "z"}}}"#);
    write(
        &file,
        r#"{"pinning": "off", "mcpServers": {"p": {"command": "x"}, "s": {"command": "y", "mcpx": {"pinning": "strict"}},
            "q": {"command": "v", "mcpx": {"pinning": "off"}}}}"#,
    );
    let cfg = ConfigCache::new(env.clone()).resolve(&req).unwrap();
    let want =
        [pair("p", Pinning::Warn), pair("q", Pinning::Warn), pair("s", Pinning::Strict), pair("u", Pinning::Warn)];
    assert_eq!(modes(&cfg), want, "the user's default; a project tightens only");
    let file_warning = cfg.file_warnings.iter().find(|w| w.file == file).map(|w| w.message.clone()).unwrap_or_default();
    assert!(
        file_warning.contains("`pinning: \"off\"` is ignored: a project file may only make pinning stricter"),
        "{file_warning}"
    );
    let q = cfg.warnings.get("q").cloned().unwrap_or_default().join("\n");
    assert!(q.contains("`pinning: \"off\"` of server `q` is ignored") && q.contains(".mcp.json"), "{q}");

    write(&file, r#"{"pinning": "strict", "mcpServers": {"p": {"command": "x"}}}"#);
    let cfg = ConfigCache::new(env.clone()).resolve(&req).unwrap();
    assert_eq!(cfg.servers["p"].pinning, Pinning::Strict, "a project file's top level tightens its servers");
    assert_eq!(cfg.servers["u"].pinning, Pinning::Warn, "and only its own");

    write(&user, r#"{"pinning": "loose", "mcpServers": {"u": {"command": "z"}}}"#);
    let cfg = ConfigCache::new(env.clone()).resolve(&req).unwrap();
    assert_eq!(cfg.servers["u"].pinning, Pinning::Hold);
    assert!(cfg.file_warnings.iter().any(|w| w.message.contains("`pinning` must be")), "{:?}", cfg.file_warnings);
    let err = parse_text(r#"{"mcpServers": {"c": {"command": "x", "mcpx": {"pinning": true}}}}"#).unwrap_err();
    assert!(err.to_string().contains("mcpx.pinning"), "{err}");
}

/// `mcpx.sandbox`: parsed with its defaults, part of the fingerprint (an entry without
/// one keeps its own), an error on a `url` entry and for a malformed value, its paths
/// expanded as `cwd`'s are (and `~`).
#[test]
fn a_sandbox_is_parsed_fingerprinted_and_expanded() {
    let cfg = parse_text(
        r#"{"mcpServers": {
            "plain": {"command": "x"},
            "boxed": {"command": "x", "mcpx": {"sandbox": {"preset": "node", "read": ["~/notes", "data"],
                "write": ["${STORE}/memory"], "network": {"connect": [443]}}}},
            "open": {"command": "x", "mcpx": {"sandbox": {"preset": "binary", "network": true}}}}}"#,
    )
    .unwrap();
    let boxed = cfg.get("boxed").unwrap();
    let sandbox = boxed.options.sandbox.clone().unwrap();
    assert_eq!(sandbox.preset, Preset::Node);
    assert_eq!(sandbox.network, NetworkSpec::Ports { connect: vec![443], bind: Vec::new() });
    assert_eq!(cfg.get("open").unwrap().options.sandbox.as_ref().unwrap().network, NetworkSpec::On);
    let plain = cfg.get("plain").unwrap();
    assert_ne!(plain.cache_key(), boxed.cache_key(), "the sandbox is part of the fingerprint");
    let unboxed = ServerEntry { options: ServerOptions { sandbox: None, ..boxed.options.clone() }, ..boxed.clone() };
    assert_eq!(unboxed.cache_key(), plain.cache_key(), "no sandbox: the fingerprint it always had");
    assert_eq!(boxed.options.written()["sandbox"]["network"], serde_json::json!({ "connect": [443], "bind": [] }));

    let env: HashMap<String, String> =
        [("HOME".to_owned(), "/home/u".to_owned()), ("STORE".to_owned(), "/var/s".to_owned())].into();
    let expanded = boxed.expand_sandbox(&env, &BTreeMap::<String, String>::new()).unwrap().unwrap();
    let dir = boxed.source.parent().unwrap();
    assert_eq!(expanded.read, [PathBuf::from("/home/u/notes"), dir.join("data")]);
    assert_eq!(expanded.write, [PathBuf::from("/var/s/memory")]);

    for (text, key) in [
        (r#"{"url": "https://h/mcp", "mcpx": {"sandbox": {"preset": "node"}}}"#, "mcpx.sandbox"),
        (r#"{"command": "x", "mcpx": {"sandbox": {"read": []}}}"#, "mcpx.sandbox.preset"),
        (r#"{"command": "x", "mcpx": {"sandbox": {"preset": "java"}}}"#, "mcpx.sandbox.preset"),
        (r#"{"command": "x", "mcpx": {"sandbox": {"preset": "node", "net": true}}}"#, "mcpx.sandbox.net"),
        (r#"{"command": "x", "mcpx": {"sandbox": {"preset": "node", "network": "yes"}}}"#, "mcpx.sandbox.network"),
        (
            r#"{"command": "x", "mcpx": {"sandbox": {"preset": "node", "network": {"connect": [70000]}}}}"#,
            "mcpx.sandbox.network.connect",
        ),
        (r#"{"command": "x", "mcpx": {"sandbox": true}}"#, "mcpx.sandbox"),
    ] {
        let err = parse_text(&format!(r#"{{"mcpServers": {{"s": {text}}}}}"#)).unwrap_err();
        assert!(matches!(&err, ConfigError::InvalidValue { key: k, .. } if k == key), "{text}: {err}");
    }
}
