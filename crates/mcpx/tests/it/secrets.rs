//! The secret store from the command line: `mcpx secret set|ls|rm` with the file
//! store, and `${secret:NAME}` and VS Code's `${input:ID}` reaching a server's
//! environment, while the value shows in no output, log or error.

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serde_json::json;

use crate::harness::{Run, World, fake_server, wait_until};

/// A value no test output would hold by chance.
const VALUE: &str = "s3cr3t-7f1c9e";

/// `mcpx secret set NAME`, the value piped on stdin (a line, as `echo` writes it), run in `dir`.
pub(crate) fn set(w: &World, dir: &Path, name: &str, value: &str) -> Run {
    let mut cmd = w.command();
    cmd.args(["secret", "set", name])
        .current_dir(dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    // A refused name exits before reading: the pipe may be closed by then.
    let _ = child.stdin.take().unwrap().write_all(format!("{value}\n").as_bytes());
    Run::wait(child, "mcpx secret set")
}

/// `mcpx call SERVER.env '{"name": VAR}'` in `dir`.
pub(crate) fn env_of(w: &World, dir: &Path, server: &str, var: &str) -> Run {
    let args = json!({ "name": var }).to_string();
    w.run_with(&["call", &format!("{server}.env"), &args], |c| {
        c.current_dir(dir);
    })
}

/// Asserts that `text` (what `what` printed or kept) does not hold the value.
#[track_caller]
fn assert_hidden(what: &str, text: &str) {
    assert!(!text.contains(VALUE), "the secret's value shows in {what}:\n{text}");
}

/// `${secret:NAME}` in a server's `env`: unset, the call fails with exit 2 saying
/// to run `mcpx secret set`; set from stdin, the server sees the value; `secret ls`
/// names it and where it is kept; `rm` makes the next call fail again. The secrets
/// file is 0600, and the value is in no output, no error, no `status --json`, no
/// `ls --json`, no file of the state directory but the secrets file, and not on the
/// daemon's or the supervisor's command line.
#[test]
fn secret_set_from_stdin_reaches_the_server_and_shows_nowhere() {
    let w = World::new(json!({ "s": { "command": fake_server(), "env": { "K": "${secret:API_TOKEN}" } } }));
    let dir = w.dir.path();
    let mut outputs = Vec::new();

    let unset = env_of(&w, dir, "s", "K");
    assert_eq!(unset.code, 2, "{unset:?}");
    assert!(unset.stderr.contains("secret `API_TOKEN` is not set: run `mcpx secret set API_TOKEN`"), "{unset:?}");

    let done = set(&w, dir, "API_TOKEN", VALUE);
    outputs.push(format!("{done:?}"));
    done.ok();
    assert_eq!(env_of(&w, dir, "s", "K").ok(), format!("{VALUE}\n"));
    let file = w.path("state/secrets.json");
    assert_eq!(std::fs::metadata(&file).unwrap().mode() & 0o777, 0o600);
    // No mcpx process has it on its command line: the daemon, and the server's supervisor.
    let instance = w.instance("s").expect("s runs");
    let supervisor = instance["supervisor_pid"].as_i64().expect("s is supervised");
    for pid in [i64::from(w.daemon_pid().unwrap()), supervisor] {
        if let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) {
            assert_hidden(&format!("/proc/{pid}/cmdline"), &String::from_utf8_lossy(&cmdline));
        }
    }

    let ls = w.run(&["secret", "ls", "--json"]);
    outputs.push(format!("{ls:?}"));
    assert_eq!(
        ls.json(),
        json!({ "store": "file", "location": format!("file {}", file.display()), "names": ["API_TOKEN"], "logins": [] })
    );
    let table = w.run(&["secret", "ls"]).ok();
    assert!(table.contains("API_TOKEN") && table.contains(&format!("file {}", file.display())), "{table}");
    for args in [&["status", "--json"][..], &["ls", "--json"], &["ls", "--long"]] {
        outputs.push(format!("{:?}", w.run(args)));
    }

    let rm = w.run(&["secret", "rm", "API_TOKEN"]);
    outputs.push(format!("{rm:?}"));
    rm.ok();
    let again = w.run(&["secret", "rm", "API_TOKEN"]);
    assert_eq!(again.code, 2, "{again:?}");
    assert!(again.stderr.contains("secret `API_TOKEN` is not set"), "{again:?}");
    let gone = env_of(&w, dir, "s", "K");
    outputs.push(format!("{gone:?}"));
    assert_eq!(gone.code, 2, "{gone:?}");
    assert!(gone.stderr.contains("run `mcpx secret set API_TOKEN`"), "{gone:?}");
    let restart = w.run_with(&["restart", "s"], |cmd| {
        cmd.current_dir(dir);
    });
    outputs.push(format!("{restart:?}"));
    assert_eq!(restart.code, 2, "{restart:?}");
    assert!(restart.stderr.contains("its running instances were kept"), "{restart:?}");
    outputs.push(format!("{:?}", w.run(&["ls", "--json"])));

    for (i, output) in outputs.iter().enumerate() {
        assert_hidden(&format!("command output {i}"), output);
    }
    for entry in std::fs::read_dir(w.path("state")).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() && path != file {
            assert_hidden(&path.display().to_string(), &String::from_utf8_lossy(&std::fs::read(&path).unwrap()));
        }
    }
}

/// VS Code's `${input:ID}` in a project's `.vscode/mcp.json` reads the same store
/// under `ID`: unset, the call fails with exit 2 saying to run `mcpx secret set ID`
/// and giving the input's description;
/// once set, the server sees the value.
#[test]
fn a_vscode_input_reads_the_secret_store() {
    let mut w = World::new(json!({}));
    let home = w.path("home");
    let project = w.path("proj");
    std::fs::create_dir_all(home.join(".config")).unwrap();
    std::fs::create_dir_all(project.join(".vscode")).unwrap();
    w.unset.push("MCPX_CONFIG".to_owned());
    w.env.push(("HOME".to_owned(), home.display().to_string()));
    w.env.push(("XDG_CONFIG_HOME".to_owned(), home.join(".config").display().to_string()));
    let file = json!({
        "inputs": [{ "type": "promptString", "id": "api-key", "description": "API key", "password": true }],
        "servers": { "v": { "type": "stdio", "command": fake_server(), "env": { "API_KEY": "${input:api-key}" } } }
    });
    std::fs::write(project.join(".vscode/mcp.json"), file.to_string()).unwrap();
    w.trust_in(&project);

    let unset = env_of(&w, &project, "v", "API_KEY");
    assert_eq!(unset.code, 2, "{unset:?}");
    assert!(unset.stderr.contains("input `api-key` (API key) is not set: run `mcpx secret set api-key`"), "{unset:?}");
    set(&w, &project, "api-key", VALUE).ok();
    assert_eq!(env_of(&w, &project, "v", "API_KEY").ok(), format!("{VALUE}\n"));
}

/// On a terminal, `secret set` turns echo off before the value is typed, so the value
/// never reaches the screen, and keeps what was typed.
#[test]
fn secret_set_on_a_terminal_reads_the_value_with_echo_off() {
    use nix::sys::termios::{LocalFlags, tcgetattr};
    use std::io::Read;
    let w = World::new(json!({ "s": { "command": fake_server(), "env": { "K": "${secret:TYPED}" } } }));
    let pty = nix::pty::openpty(None, None).unwrap();
    let mut cmd = w.command();
    cmd.args(["secret", "set", "TYPED"])
        .stdin(std::process::Stdio::from(pty.slave.try_clone().unwrap()))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    drop(cmd);
    let echo_off = || !tcgetattr(&pty.slave).unwrap().local_flags.contains(LocalFlags::ECHO);
    wait_until("secret set turns the terminal's echo off", std::time::Duration::from_secs(30), echo_off);
    let mut master = std::fs::File::from(pty.master);
    master.write_all(format!("{VALUE}\n").as_bytes()).unwrap();
    let run = Run::wait(child, "mcpx secret set on a terminal");
    assert!(run.stderr.contains("value of TYPED: "), "{run:?}");
    assert_hidden("secret set's output", &format!("{run:?}"));
    run.ok();
    // Only the test holds the terminal now: what reached the screen can be read to its end.
    drop(pty.slave);
    let mut screen = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n @ 1..) = master.read(&mut buf) {
        screen.extend_from_slice(&buf[..n]);
    }
    assert_hidden("the terminal", &String::from_utf8_lossy(&screen));
    assert_eq!(env_of(&w, w.dir.path(), "s", "K").ok(), format!("{VALUE}\n"));
}

/// A bad name and an empty value are refused with exit 2, saying what is allowed.
#[test]
fn a_bad_name_a_logins_name_or_an_empty_value_is_refused() {
    let w = World::new(json!({}));
    let bad = set(&w, w.dir.path(), "a b", VALUE);
    assert_eq!(bad.code, 2, "{bad:?}");
    assert!(bad.stderr.contains("letters, digits, `_`, `-` and `.`"), "{bad:?}");
    let empty = set(&w, w.dir.path(), "EMPTY", "");
    assert_eq!(empty.code, 2, "{empty:?}");
    assert!(empty.stderr.contains("is empty"), "{empty:?}");
    // `oauth-…` names belong to the logins `mcpx auth login` keeps.
    let login = set(&w, w.dir.path(), "oauth-0123", VALUE);
    assert_eq!(login.code, 2, "{login:?}");
    assert!(login.stderr.contains("`mcpx auth login` keeps"), "{login:?}");
    let rm = w.run(&["secret", "rm", "oauth-0123"]);
    assert_eq!(rm.code, 2, "{rm:?}");
    assert!(rm.stderr.contains("mcpx auth logout <server>"), "{rm:?}");
    assert_eq!(w.run(&["secret", "ls", "--json"]).json()["names"], json!([]));
}
