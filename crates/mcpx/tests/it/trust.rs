//! Trust for project files: the servers of a `.mcp.json`, `.cursor/mcp.json` or
//! `.vscode/mcp.json` found upward run nothing, and expand no `${VAR}`, until the user
//! runs `mcpx trust`; a changed entry needs trust again; `trustProjectFiles` in the
//! user config trusts every project file.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{Run, Serve, World, fake_http, fake_server, wait_until};

/// A world that reads no explicit config file: a user config (in `home`) holding
/// `user`, and a project directory `proj` whose files are written by the test.
struct Project {
    w: World,
    home: PathBuf,
    proj: PathBuf,
    /// Where the project's commands leave their marks: one file per server started.
    marks: PathBuf,
}

impl Project {
    fn new() -> Project {
        let mut w = World::new(json!({}));
        let home = w.path("home");
        let proj = w.path("proj");
        let marks = w.path("marks");
        for dir in [home.join(".config/mcpx"), proj.clone(), marks.clone()] {
            std::fs::create_dir_all(dir).unwrap();
        }
        w.unset.push("MCPX_CONFIG".to_owned());
        w.env.push(("HOME".to_owned(), home.display().to_string()));
        w.env.push(("XDG_CONFIG_HOME".to_owned(), home.join(".config").display().to_string()));
        let p = Project { w, home, proj, marks };
        p.user_config(json!({}));
        p
    }

    /// Writes the user config: `user` (the fake server), and `extra` top-level keys.
    fn user_config(&self, extra: Value) {
        let mut config = json!({ "mcpServers": { "user": { "command": fake_server() } } });
        config.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        std::fs::write(self.home.join(".config/mcpx/config.json"), config.to_string()).unwrap();
    }

    /// A stdio entry that leaves the mark `name` when it starts, then runs the fake
    /// server; `extra` keys are added to it.
    fn marking(&self, name: &str, extra: Value) -> Value {
        let script = format!("touch {}/{name}; exec {}", self.marks.display(), fake_server());
        let mut entry = json!({ "command": "sh", "args": ["-c", script] });
        entry.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        entry
    }

    /// Writes `text` (JSON) to `rel` under the project, creating its directory.
    fn write(&self, rel: &str, text: Value) -> PathBuf {
        let file = self.proj.join(rel);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, text.to_string()).unwrap();
        file
    }

    /// The marks left so far, sorted.
    fn marks(&self) -> Vec<String> {
        let mut marks: Vec<String> = std::fs::read_dir(&self.marks)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        marks.sort();
        marks
    }

    /// Runs `mcpx <args>` in the project.
    fn run(&self, args: &[&str]) -> Run {
        self.w.run_with(args, |cmd| {
            cmd.current_dir(&self.proj);
        })
    }

    /// `ls --json` in the project, by name.
    fn rows(&self) -> std::collections::BTreeMap<String, Value> {
        let run = self.run(&["ls", "--json"]);
        assert_eq!(run.code, 0, "ls: {run:?}");
        run.json().as_array().unwrap().iter().map(|r| (r["name"].as_str().unwrap().to_owned(), r.clone())).collect()
    }

    /// The names of the tools an MCP client of `mcpx serve` in the project lists.
    fn serve_tools(&self) -> Vec<String> {
        let mut cmd = self.w.command();
        cmd.current_dir(&self.proj);
        let mut serve = Serve::start_with(cmd, json!({}));
        let list = serve.request("tools/list", json!({}));
        tool_names(&list)
    }
}

/// The tool names of a `tools/list` response.
fn tool_names(list: &Value) -> Vec<String> {
    let tools = list["result"]["tools"].as_array().unwrap_or_else(|| panic!("{list}"));
    tools.iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

/// One request to `/mcp` on the daemon's unix socket, from a client in `cwd`
/// (`x-mcpx-cwd`), in `session` when given: the answer's session id and its JSON body.
fn mcp_on_socket(w: &World, cwd: &Path, session: Option<&str>, body: Value) -> (Option<String>, Value) {
    let socket = w.path("run/daemon.sock");
    let mut curl = w.launcher().program("curl");
    curl.args(["-sS", "-i", "--unix-socket"]).arg(&socket).args([
        "http://localhost/mcp",
        "-H",
        "content-type: application/json",
        "-H",
        "accept: application/json, text/event-stream",
        "-H",
        "mcp-protocol-version: 2025-06-18",
    ]);
    curl.arg("-H").arg(format!("x-mcpx-cwd: {}", cwd.display()));
    if let Some(session) = session {
        curl.arg("-H").arg(format!("mcp-session-id: {session}"));
    }
    curl.arg("-d").arg(body.to_string());
    let out = Run::of(curl, "curl /mcp").ok();
    let session = out.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.eq_ignore_ascii_case("mcp-session-id").then(|| value.trim().to_owned())
    });
    let json = out
        .lines()
        .map(|l| l.strip_prefix("data:").unwrap_or(l).trim())
        .find(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .unwrap_or(Value::Null);
    (session, json)
}

/// The tools a `/mcp` client on the unix socket in `cwd` lists.
fn socket_tools(w: &World, cwd: &Path) -> Vec<String> {
    let init = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } });
    let (session, answer) = mcp_on_socket(w, cwd, None, init);
    let session = session.unwrap_or_else(|| panic!("no session: {answer}"));
    let initialized = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    mcp_on_socket(w, cwd, Some(&session), initialized);
    let list = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list" });
    tool_names(&mcp_on_socket(w, cwd, Some(&session), list).1)
}

/// The refusal every path gives an untrusted server: it names the file and leaves the
/// decision to the user.
#[track_caller]
fn assert_refusal(text: &str, file: &Path) {
    for part in [file.display().to_string().as_str(), "ask the user", "do not run `mcpx trust` yourself"] {
        assert!(text.contains(part), "`{part}` not in {text}");
    }
}

/// A project `.mcp.json`, `.cursor/mcp.json` and `.vscode/mcp.json` whose commands
/// would leave a mark: nothing is started by `ls`, `call`, `tools`, `serve`'s
/// `tools/list`, `/mcp` on the unix socket from the project, or a daemon restart; each
/// is `untrusted` with its file, and a call exits 2 saying to ask the user. After
/// `mcpx trust --yes`, the calls work and every listing has the tools.
#[test]
fn nothing_in_a_project_runs_until_the_user_trusts_it() {
    let p = Project::new();
    let files = [
        ("a", p.write(".mcp.json", json!({ "mcpServers": { "a": p.marking("a", json!({})) } }))),
        ("c", p.write(".cursor/mcp.json", json!({ "mcpServers": { "c": p.marking("c", json!({})) } }))),
        ("v", p.write(".vscode/mcp.json", json!({ "servers": { "v": p.marking("v", json!({ "type": "stdio" })) } }))),
    ];
    let rows = p.rows();
    for (server, file) in &files {
        let row = &rows[*server];
        assert_eq!(
            (row["state"].as_str(), row["source"]["file"].as_str()),
            (Some("untrusted"), file.to_str()),
            "{row}"
        );
        let call = p.run(&["call", &format!("{server}.echo"), r#"{"message":"no"}"#]);
        assert_eq!(call.code, 2, "{call:?}");
        assert_refusal(&call.stderr, file);
        assert_eq!(p.run(&["tools", server]).code, 2);
    }
    let table = p.run(&["ls"]).ok();
    assert!(table.contains("untrusted") && table.contains("mcpx trust"), "{table}");
    assert_eq!(p.rows()["user"]["state"], "unread", "the user's own server is not held back");

    let tools = p.serve_tools();
    assert!(tools.iter().any(|t| t.starts_with("user")), "{tools:?}");
    assert!(!tools.iter().any(|t| ["a", "c", "v"].iter().any(|s| t.starts_with(&format!("{s}_")))), "{tools:?}");
    let tools = socket_tools(&p.w, &p.proj);
    assert!(!tools.iter().any(|t| ["a", "c", "v"].iter().any(|s| t.starts_with(&format!("{s}_")))), "{tools:?}");
    let mut cmd = p.w.command();
    cmd.current_dir(&p.proj);
    let mut serve = Serve::start_with(cmd, json!({}));
    let refused = serve.request("tools/call", json!({ "name": "a__echo", "arguments": { "message": "no" } }));
    assert_refusal(refused["error"]["message"].as_str().unwrap_or_else(|| panic!("{refused}")), &files[0].1);
    drop(serve);
    // One log line per file, however many listings.
    let log = p.w.assert_log_has("until the user trusts them");
    let lines = log.lines().filter(|l| l.contains("until the user trusts them") && l.contains("/proj/.mcp.json"));
    assert_eq!(lines.count(), 1, "{log}");

    p.run(&["stop"]).ok();
    assert_eq!(p.rows()["a"]["state"], "untrusted", "after a daemon restart");
    assert_eq!(p.marks(), Vec::<String>::new(), "a project server started before trust");

    p.w.trust_in(&p.proj);
    for (server, _) in &files {
        let out = p.run(&["call", &format!("{server}.echo"), &json!({ "message": server }).to_string()]).ok();
        assert_eq!(out, format!("{server}\n"));
    }
    assert_eq!(p.marks(), ["a", "c", "v"]);
    let tools = p.serve_tools();
    for server in ["a", "c", "v"] {
        assert!(tools.contains(&format!("{server}__echo")), "{tools:?}");
    }
}

/// Trust is per entry as written: changing one entry makes only that one untrusted
/// again, and adding one needs trust for the new one only.
#[test]
fn changing_one_entry_makes_only_that_entry_untrusted_again() {
    let p = Project::new();
    let servers = |b_arg: &str| {
        json!({ "mcpServers": {
        "a": { "command": fake_server() },
        "b": { "command": fake_server(), "args": [b_arg] },
    } })
    };
    p.write(".mcp.json", servers("--one"));
    p.w.trust_in(&p.proj);
    let rows = p.rows();
    assert_ne!(rows["a"]["state"], "untrusted", "{rows:?}");
    assert_ne!(rows["b"]["state"], "untrusted", "{rows:?}");

    p.write(".mcp.json", servers("--two"));
    let rows = p.rows();
    assert_ne!(rows["a"]["state"], "untrusted", "{rows:?}");
    assert_eq!(rows["b"]["state"], "untrusted", "{rows:?}");
    assert_eq!(p.run(&["call", "a.echo", r#"{"message":"still"}"#]).ok(), "still\n");
    assert_eq!(p.run(&["call", "b.echo", "{}"]).code, 2);

    let shown = p.run(&["trust", "--yes"]).ok();
    assert!(shown.contains("b: runs") && shown.contains("--two") && !shown.contains("a: runs"), "{shown}");
    assert_eq!(p.run(&["call", "b.echo", r#"{"message":"again"}"#]).ok(), "again\n");
}

/// A remote entry of an untrusted project file sends nothing, so the `${VAR}` of its
/// header reaches no one: no request gets to the server through `ls`, `call` or an MCP
/// listing. Once trusted, the header is sent.
#[test]
fn a_remote_entry_expands_no_header_variable_before_trust() {
    let mut p = Project::new();
    let record = p.w.path("http.rec");
    let (_server, url) = fake_http("127.0.0.1:0", &[("FAKE_RECORD", &record.display().to_string())]);
    p.w.env.push(("MCPX_T_TOKEN".to_owned(), "t0ken-from-the-environment".to_owned()));
    let entry = json!({ "url": url, "headers": { "Authorization": "Bearer ${MCPX_T_TOKEN}" } });
    p.write(".mcp.json", json!({ "mcpServers": { "r": entry } }));
    let headers = || std::fs::read_to_string(p.w.path("http.rec.headers")).unwrap_or_default();

    let row = &p.rows()["r"];
    assert_eq!(row["state"], "untrusted", "{row}");
    assert_eq!(p.run(&["call", "r.echo", "{}"]).code, 2);
    assert!(!p.serve_tools().iter().any(|t| t.starts_with("r__")));
    assert_eq!(headers(), "", "a request reached the server before trust");

    let shown = p.run(&["trust", "--yes"]).ok();
    assert!(shown.contains(&format!("connects to {url}")) && shown.contains("uses MCPX_T_TOKEN"), "{shown}");
    assert!(!shown.contains("t0ken"), "a value was shown: {shown}");
    assert_eq!(p.run(&["call", "r.echo", r#"{"message":"on"}"#]).ok(), "on\n");
    assert!(headers().contains("authorization"), "{}", headers());
}

/// A `min: 1` server of an untrusted project file does not start when the next daemon
/// starts its warm servers, while a trusted one of another project does.
#[test]
fn a_min_1_entry_of_an_untrusted_file_does_not_start_at_the_next_daemon_start() {
    let p = Project::new();
    let warm = |name: &str| json!({ "mcpServers": { name: p.marking(name, json!({ "mcpx": { "min": 1 } })) } });
    p.write(".mcp.json", warm("untrusted-warm"));
    let other = p.w.path("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join(".mcp.json"), warm("trusted-warm").to_string()).unwrap();
    p.w.trust_in(&other);
    // The daemon learns both files, and keeps them for the next one.
    assert_eq!(p.rows()["untrusted-warm"]["state"], "untrusted");
    p.w.run_with(&["ls"], |cmd| {
        cmd.current_dir(&other);
    })
    .ok();
    p.run(&["stop", "--all"]).ok();
    std::fs::remove_dir_all(&p.marks).unwrap();
    std::fs::create_dir_all(&p.marks).unwrap();

    p.w.status();
    wait_until("the trusted warm server runs", Duration::from_secs(30), || {
        p.w.instance("trusted-warm").is_some_and(|i| i["state"] == "running")
    });
    assert_eq!(p.marks(), ["trusted-warm"]);
    assert!(p.w.instance("untrusted-warm").is_none(), "{}", p.w.status());
}

/// Without a terminal, `mcpx trust` shows what it would trust and refuses without
/// `--yes` (exit 2), recording nothing; `--list` shows the records (0600), a second
/// run has nothing to do, and `mcpx untrust` removes the project's records.
#[test]
fn trust_needs_a_terminal_or_yes_and_untrust_takes_it_back() {
    let p = Project::new();
    let file = p.write(
        ".mcp.json",
        json!({ "mcpServers": {
        "a": { "command": fake_server(), "env": { "K": "${secret:api-token}", "H": "${HOME}" } } } }),
    );
    let refused = p.run(&["trust"]);
    assert_eq!(refused.code, 2, "{refused:?}");
    assert!(refused.stderr.contains("--yes"), "{refused:?}");
    assert!(refused.stdout.contains("uses HOME, secret:api-token"), "{refused:?}");
    assert_eq!(p.run(&["trust", "--list", "--json"]).json(), json!([]));
    let untrusted = p.run(&["call", "a.echo", "{}"]);
    assert_eq!(untrusted.code, 2);
    assert_refusal(&untrusted.stderr, &file);
    assert!(!untrusted.stderr.contains("secret"), "expanded before trust: {untrusted:?}");

    p.w.trust_in(&p.proj);
    let list = p.run(&["trust", "--list", "--json"]).json();
    let canonical = std::fs::canonicalize(&file).unwrap();
    assert_eq!(list[0]["file"], canonical.display().to_string(), "{list}");
    assert_eq!((list[0]["server"].as_str(), list[0]["hash"].as_str().map(str::len)), (Some("a"), Some(64)));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(p.w.path("state/trust.json")).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    assert!(p.run(&["trust"]).ok().contains("nothing to trust"));
    // Trusted, the entry is expanded: now it is the secret it lacks.
    let trusted = p.run(&["call", "a.echo", "{}"]);
    assert!(trusted.stderr.contains("run `mcpx secret set api-token`"), "{trusted:?}");

    p.run(&["untrust"]).ok();
    assert_eq!(p.run(&["trust", "--list", "--json"]).json(), json!([]));
    assert_eq!(p.rows()["a"]["state"], "untrusted");
    assert_refusal(&p.run(&["call", "a.echo", "{}"]).stderr, &file);
}

/// `"trustProjectFiles": true` in the user config trusts every project file; in a
/// project file it is ignored, with a warning naming the file.
#[test]
fn trust_project_files_is_honoured_only_in_the_user_config() {
    let p = Project::new();
    let file =
        p.write(".mcp.json", json!({ "trustProjectFiles": true, "mcpServers": { "a": p.marking("a", json!({})) } }));
    let rows = p.rows();
    assert_eq!(rows["a"]["state"], "untrusted", "{rows:?}");
    let warning = &rows[&file.display().to_string()];
    assert_eq!(warning["state"], "warning", "{warning}");
    assert!(warning["warnings"][0].as_str().unwrap().contains("trustProjectFiles"), "{warning}");
    assert_eq!(p.marks(), Vec::<String>::new());

    p.user_config(json!({ "trustProjectFiles": true }));
    assert_eq!(p.run(&["call", "a.echo", r#"{"message":"all"}"#]).ok(), "all\n");
    assert_eq!(p.marks(), ["a"]);
}

/// On a terminal, `mcpx trust` asks y/N: anything but yes (the default) records
/// nothing; `y` records what it showed.
#[test]
fn on_a_terminal_trust_asks_and_no_is_the_default() {
    use std::io::Write;
    let p = Project::new();
    p.write(".mcp.json", json!({ "mcpServers": { "a": { "command": fake_server() } } }));
    let answer = |typed: &str| {
        let pty = nix::pty::openpty(None, None).unwrap();
        let mut cmd = p.w.command();
        cmd.arg("trust")
            .current_dir(&p.proj)
            .stdin(std::process::Stdio::from(pty.slave.try_clone().unwrap()))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let child = cmd.spawn().unwrap();
        // The terminal keeps the line until mcpx reads it; the test holds the terminal
        // open until mcpx has finished.
        let mut master = std::fs::File::from(pty.master);
        master.write_all(typed.as_bytes()).unwrap();
        let run = Run::wait(child, "mcpx trust on a terminal");
        drop(master);
        run
    };
    let no = answer("\n");
    assert!(no.stderr.contains("trust 1 entry? [y/N]"), "{no:?}");
    assert!(no.stdout.contains("nothing trusted"), "{no:?}");
    assert_eq!(no.code, 0);
    assert_eq!(p.run(&["trust", "--list", "--json"]).json(), json!([]));
    let yes = answer("y\n");
    assert!(yes.stdout.contains("trusted 1 entry"), "{yes:?}");
    assert_eq!(p.run(&["call", "a.echo", r#"{"message":"yes"}"#]).ok(), "yes\n");
}

#[test]
fn a_project_file_linked_into_another_project_is_not_trusted_there() {
    let p = Project::new();
    // `cwd` "." runs the command in the directory the file is read from.
    p.write(".mcp.json", json!({ "mcpServers": { "srv": p.marking("srv", json!({ "cwd": "." })) } }));
    assert_eq!(p.run(&["trust", "--yes"]).code, 0);
    assert_eq!(p.run(&["call", "srv.echo", r#"{"message":"t"}"#]).ok(), "t\n");
    // A second project whose `.mcp.json` (and another's `.vscode`) links to the trusted one.
    let other = p.w.path("other");
    std::fs::create_dir_all(&other).unwrap();
    std::os::unix::fs::symlink(p.proj.join(".mcp.json"), other.join(".mcp.json")).unwrap();
    let call = p.w.run_with(&["call", "srv.echo", r#"{"message":"a"}"#], |cmd| {
        cmd.current_dir(&other);
    });
    assert_eq!(call.code, 2, "{call:?}");
    assert_refusal(&call.stderr, &other.join(".mcp.json"));
    // The same project reached through a linked directory is the same project.
    let alias = p.w.path("alias");
    std::os::unix::fs::symlink(&p.proj, &alias).unwrap();
    let call = p.w.run_with(&["call", "srv.echo", r#"{"message":"l"}"#], |cmd| {
        cmd.current_dir(&alias);
    });
    assert_eq!(call.ok(), "l\n");
}

#[test]
fn the_review_shows_the_environment_and_directory_and_quotes_what_the_file_wrote() {
    let p = Project::new();
    let entry = json!({ "command": "git", "args": ["mcp"], "env": { "PATH": "./bin:/usr/bin" }, "cwd": "bin" });
    p.write(".mcp.json", json!({ "mcpServers": { "git": entry, "safe\n  docs: runs /bin/true": { "command": "x" } } }));
    let review = p.run(&["trust"]);
    assert_eq!(review.code, 2, "{review:?}");
    assert!(review.stdout.contains("    with PATH=./bin:/usr/bin\n"), "{}", review.stdout);
    assert!(review.stdout.contains(&format!("    in bin ({})\n", p.proj.join("bin").display())), "{}", review.stdout);
    assert!(review.stdout.contains(r#"  "safe\n  docs: runs /bin/true": runs x"#), "{}", review.stdout);
    assert!(!review.stdout.contains("\n  docs: runs /bin/true"), "a name draws no line of its own: {}", review.stdout);
    assert!(review.stderr.contains("do not pass `--yes` yourself"), "{}", review.stderr);
    let nowhere = p.run(&["trust", "/nonexistent/mcpx-test"]);
    assert_eq!(nowhere.code, 2, "{nowhere:?}");
    assert!(nowhere.stderr.contains("is not a directory"), "{}", nowhere.stderr);
}
