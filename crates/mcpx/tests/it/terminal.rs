//! What a server says cannot take over the user's terminal: a hostile fixture server
//! (`FAKE_HOSTILE=1`) puts ESC, OSC 0 and OSC 8, CR, BEL and U+009B in its
//! instructions, tool names, descriptions, results, errors, stderr, progress and log
//! messages, and no raw control character reaches any human output, `mcpx logs` or
//! the daemon's log file; `é` prints as is, and `--json` keeps the same values.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;

use crate::harness::{Run, World, fake_server};

/// The fixture's hostile text (`mcpx-fake-server`'s `hostile::TEXT`).
const TEXT: &str = "\u{1b}]0;pwned\u{7} \u{1b}]8;;http://evil.example/\u{1b}\\link\u{1b}]8;;\u{1b}\\ \u{1b}[2J hidden\roverwritten \u{9b}31m é";

/// A world with the hostile server and one that dies at start with the hostile text
/// on stderr.
fn hostile_world() -> World {
    World::new(json!({
        "hostile": { "command": fake_server(), "env": { "FAKE_HOSTILE": "1" } },
        "broken": {
            "command": fake_server(),
            "env": { "FAKE_STDERR_ON_START": TEXT, "FAKE_EXIT_BEFORE_INIT": "1" },
        },
    }))
}

/// The first control character in `text` that a terminal would act on: C0 but
/// newline and tab, DEL, or C1.
pub fn raw_control(text: &str) -> Option<(usize, char)> {
    text.char_indices().find(|&(_, c)| {
        (c.is_control() && c != '\n' && c != '\t') || ('\u{80}'..='\u{9f}').contains(&c) || c == '\u{7f}'
    })
}

/// Asserts that neither stream of `run` holds a raw control character.
#[track_caller]
fn assert_clean(what: &str, run: &Run) {
    for (stream, text) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
        if let Some((at, c)) = raw_control(text) {
            panic!("`{what}` wrote a raw {c:?} on {stream} at byte {at}:\n{text}");
        }
    }
}

#[test]
fn tables_calls_errors_status_and_logs_escape_server_text() {
    let w = hostile_world();
    let refresh = w.run(&["refresh"]);
    assert_eq!(refresh.code, 4, "broken fails to start: {refresh:?}");
    assert_clean("refresh", &refresh);

    let ls = w.run(&["ls"]);
    assert_clean("ls", &ls);
    assert!(ls.stdout.contains("A hostile server: \\e]0;pwned\\x07"), "the escaped instructions: {}", ls.stdout);

    let tools = w.run(&["tools", "hostile"]);
    assert_clean("tools", &tools);
    assert!(tools.stdout.contains("evil\\e[31m\\r\\u{9b}é\\x07"), "the escaped name, é as is: {}", tools.stdout);

    let search = w.run(&["search", "hostile"]);
    assert_clean("search", &search);
    assert!(search.stdout.contains("hostile.trap"), "{}", search.stdout);

    let call = w.call("hostile.trap", "{}");
    assert_clean("call", &call);
    assert_eq!(call.code, 0, "{call:?}");
    assert!(call.stdout.contains("\\e[2J hidden\\roverwritten \\u{9b}31m é"), "the result, é as is: {}", call.stdout);
    assert!(call.stdout.contains("[image image/\\e]0;pwned"), "the image's MIME type: {}", call.stdout);

    let error = w.call("hostile.trap", r#"{"fail":true}"#);
    assert_clean("call (a JSON-RPC error)", &error);
    assert_ne!(error.code, 0, "{error:?}");
    assert!(error.stderr.contains("\\e]0;pwned"), "the server's error message, escaped: {}", error.stderr);

    let broken = w.call("broken.echo", r#"{"message":"x"}"#);
    assert_clean("call (a server that dies at start)", &broken);
    assert_ne!(broken.code, 0, "{broken:?}");

    let status = w.run(&["status"]);
    assert_clean("status", &status);
    assert!(status.stdout.contains("broken stderr (tail):\n  \\e]0;pwned"), "the stderr tail: {}", status.stdout);
    w.log_once_it_has("hidden\\roverwritten \\u{9b}31m é");
    let logs = w.run(&["logs"]);
    assert_clean("logs", &logs);
    assert!(logs.stdout.contains("]0;pwned\\x07"), "the server's stderr in the log, escaped: {}", logs.stdout);
    assert!(logs.stdout.contains("hidden\\roverwritten \\u{9b}31m é"), "{}", logs.stdout);
    let file = w.log();
    assert!(raw_control(&file).is_none(), "the daemon's log file holds a raw {:?}:\n{file}", raw_control(&file));
}

#[test]
fn json_output_keeps_the_values_with_del_and_c1_escaped() {
    let w = hostile_world();
    let call = w.run(&["call", "hostile.trap", "{}", "--json"]);
    assert_clean("call --json", &call);
    assert_eq!(call.json()["content"][0]["text"], TEXT, "the same value");
    assert!(call.stdout.contains("\\u009b31m"), "U+009B as a \\u escape: {}", call.stdout);

    let tool = w.run(&["tools", "hostile", "trap", "--json"]);
    assert_clean("tools <tool> --json", &tool);
    assert_eq!(tool.json()["description"], format!("Hostile {TEXT}"));

    for args in [&["tools", "hostile", "--json"][..], &["ls", "--json"], &["search", "hostile", "--json"]] {
        let run = w.run(args);
        assert_clean(&args.join(" "), &run);
        run.json();
    }
    let error = w.run(&["call", "hostile.trap", r#"{"fail":true}"#, "--json"]);
    assert_clean("call --json (an error)", &error);
    assert!(error.json()["error"]["message"].as_str().is_some_and(|m| m.contains(TEXT)), "{}", error.stdout);
    let status = w.run(&["status", "--json"]);
    assert_clean("status --json", &status);
    status.json();
}

#[test]
fn progress_and_log_messages_on_a_terminal_are_escaped() {
    let w = hostile_world();
    w.run(&["ls"]).ok(); // Starts the daemon, so that it holds no descriptor of the terminal.
    let mut cmd = w.command();
    cmd.args(["call", "hostile.trap", "{}"]).stdin(Stdio::null());
    let (run, terminal) = with_stderr_on_a_terminal(cmd);
    assert_eq!(run.code, 0, "{run:?}\nterminal: {terminal}");
    assert!(terminal.contains("progress 1/2: \\e]0;pwned"), "the progress line: {terminal}");
    assert!(terminal.contains("log warning: \\e]0;pwned"), "the log line: {terminal}");
    assert!(terminal.contains(" é"), "é as is: {terminal}");
    // The status line's own moves are mcpx's; nothing else may remain.
    let text = without_status_line(&terminal);
    if let Some((at, c)) = raw_control(&text) {
        panic!("a raw {c:?} reached the terminal at byte {at}:\n{text}");
    }
}

/// `text` without the sequences the status line and the elicitation form draw with
/// (`mcpx call` on a terminal): erase line (`CR ESC[2K`, `ESC[2K`), cursor up and down
/// (`ESC[<n>A`, `ESC[<n>B`), cursor hidden and shown (`ESC[?25l`, `ESC[?25h`).
pub fn without_status_line(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while !rest.is_empty() {
        let digits = |s: &str| s.len() - s.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        let skip = if rest.starts_with("\r\u{1b}[2K") {
            5
        } else if let Some(after) = rest.strip_prefix("\u{1b}[") {
            let n = digits(after);
            match after[n..].chars().next() {
                Some('A' | 'B') if n > 0 => 2 + n + 1,
                Some('K') if &after[..n] == "2" => 4,
                _ if after.starts_with("?25l") || after.starts_with("?25h") => 6,
                _ => 0,
            }
        } else {
            0
        };
        if skip > 0 {
            rest = &rest[skip..];
        } else {
            let c = rest.chars().next().unwrap_or_default();
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// Runs `cmd` with its stderr on a new pseudo-terminal whose output is not
/// processed (no newline to CR LF), its stdout piped; returns what it printed and
/// what reached the terminal.
pub(crate) fn with_stderr_on_a_terminal(mut cmd: Command) -> (Run, String) {
    use nix::sys::termios::{OutputFlags, SetArg, tcgetattr, tcsetattr};
    let pty = nix::pty::openpty(None, None).unwrap();
    let mut attrs = tcgetattr(&pty.slave).unwrap();
    attrs.output_flags.remove(OutputFlags::OPOST);
    tcsetattr(&pty.slave, SetArg::TCSANOW, &attrs).unwrap();
    cmd.stderr(Stdio::from(pty.slave));
    let (tx, rx) = std::sync::mpsc::channel();
    let mut master = std::fs::File::from(pty.master);
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        // The read fails (EIO) once no process holds the terminal any more.
        while let Ok(n @ 1..) = master.read(&mut buf) {
            seen.extend_from_slice(&buf[..n]);
        }
        let _ = tx.send(seen);
    });
    let child = cmd.stdout(Stdio::piped()).spawn().unwrap();
    drop(cmd); // Only the child holds the terminal now.
    let run = Run::wait(child, "mcpx call with stderr on a terminal");
    let seen = rx.recv_timeout(Duration::from_secs(30)).expect("the terminal did not close within 30 s");
    (run, String::from_utf8_lossy(&seen).into_owned())
}
