//! `mcpx call` at a real pseudo-terminal, as a person uses it: the status line of a
//! slow start (shown, then cleared; absent when stderr is not a terminal), and a
//! server's `elicitation/create` answered in a form (accepted with typed answers,
//! declined), declined at once without a terminal or with `--no-input`, and
//! `sampling/createMessage` declined with a message that says why.

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

use crate::harness::{Run, World, fake_server, wait_until};

/// A command running with stdin and stderr on a new pseudo-terminal (output not
/// processed), stdout piped:
/// what reaches the terminal is collected as it comes, and keys are typed into it.
pub(crate) struct Terminal {
    child: Option<Child>,
    keys: std::fs::File,
    seen: Arc<Mutex<Vec<u8>>>,
}

impl Terminal {
    pub(crate) fn spawn(mut cmd: Command) -> Terminal {
        use nix::sys::termios::{OutputFlags, SetArg, tcgetattr, tcsetattr};
        let pty = nix::pty::openpty(None, None).unwrap();
        // Output not processed (no newline to CR LF), so every CR seen is one mcpx wrote.
        let mut attrs = tcgetattr(&pty.slave).unwrap();
        attrs.output_flags.remove(OutputFlags::OPOST);
        tcsetattr(&pty.slave, SetArg::TCSANOW, &attrs).unwrap();
        let slave = std::fs::File::from(pty.slave);
        cmd.stdin(Stdio::from(slave.try_clone().unwrap())).stderr(Stdio::from(slave)).stdout(Stdio::piped());
        let child = cmd.spawn().unwrap();
        drop(cmd); // Our copies of the terminal's descriptors: the read below ends with the child.
        let master = std::fs::File::from(pty.master);
        let keys = master.try_clone().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        std::thread::spawn(move || {
            let mut master = master;
            let mut buf = [0u8; 4096];
            // The read fails (EIO) once no process holds the terminal any more.
            while let Ok(n) = master.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Terminal { child: Some(child), keys, seen }
    }

    /// What reached the terminal so far, escape sequences and carriage returns removed.
    fn screen(&self) -> String {
        plain(&String::from_utf8_lossy(&self.seen.lock().unwrap()))
    }

    /// Waits until the terminal shows `text`.
    #[track_caller]
    pub(crate) fn wait_for(&self, text: &str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !self.screen().contains(text) {
            assert!(std::time::Instant::now() < deadline, "the terminal never showed {text:?}:\n{}", self.screen());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub(crate) fn type_keys(&mut self, keys: &str) {
        self.keys.write_all(keys.as_bytes()).unwrap();
        self.keys.flush().unwrap();
    }

    /// Waits for the command to end; returns its exit status and stdout, and the
    /// terminal's whole transcript, raw.
    pub(crate) fn finish(mut self) -> (Run, String) {
        let child = self.child.take().unwrap();
        let run = Run::wait(child, "mcpx at a terminal");
        // The reader thread has seen all once the child is gone and its output drained.
        wait_until("the terminal's output is read", Duration::from_secs(10), || Arc::strong_count(&self.seen) == 1);
        let raw = String::from_utf8_lossy(&self.seen.lock().unwrap()).into_owned();
        (run, raw)
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `text` without ANSI escape sequences (CSI and OSC) and carriage returns.
fn plain(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.next() {
                Some('[') => {
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                Some(']') => {
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' || (c == '\u{1b}' && chars.next_if_eq(&'\\').is_some()) {
                            break;
                        }
                    }
                }
                _ => {}
            },
            '\r' => {}
            c => out.push(c),
        }
    }
    out
}

/// A world with the fake server, its daemon started (so that the daemon holds no
/// descriptor of a test's terminal).
fn world(env: serde_json::Value) -> World {
    let w = World::new(json!({ "fake": { "command": fake_server(), "env": env } }));
    w.run(&["ls"]).ok();
    w
}

/// The fake's `elicit` result, from `mcpx call --json` output.
pub(crate) fn elicited(run: &Run) -> serde_json::Value {
    let text = run.json()["content"][0]["text"].as_str().unwrap().to_owned();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn a_form_at_the_terminal_sends_the_typed_answers_to_the_server() {
    let w = world(json!({}));
    let mut cmd = w.command();
    cmd.args(["call", "fake.elicit", "--json"]);
    let mut t = Terminal::spawn(cmd);
    t.wait_for("Answer");
    t.type_keys("\r"); // Fill in the form (the first choice).
    t.wait_for("age:");
    t.type_keys("4.5\r"); // Not a whole number: asked again.
    t.wait_for("a whole number");
    t.type_keys("\x7f\x7f\x7f42\r");
    t.wait_for("Where to write");
    t.type_keys("ada@example.org\r");
    t.wait_for("Your name:");
    t.type_keys("Ada\r");
    t.wait_for("ratio (optional)");
    t.type_keys("\r"); // Its default, 0.5.
    t.wait_for("Size (optional)");
    t.type_keys("\x1b[B\r"); // One down from the default Medium: Large.
    t.wait_for("subscribe (optional)");
    t.type_keys("n");
    let (run, raw) = t.finish();
    assert_eq!(run.code, 0, "{run:?}\nterminal: {raw}");
    assert_eq!(
        elicited(&run),
        json!({ "action": "accept", "content": {
            "age": 42, "email": "ada@example.org", "name": "Ada", "ratio": 0.5, "size": "l", "subscribe": false,
        } }),
        "what the server received"
    );
    insta::assert_snapshot!("elicitation_form", final_screen(&raw));
}

#[test]
fn a_form_escapes_what_the_server_wrote() {
    let w = world(json!({}));
    let hostile = "\u{1b}]0;pwned\u{7} \u{1b}[2J hidden\roverwritten \u{9b}31m é";
    let schema = json!({ "type": "object", "properties": {
        "pick": { "type": "string", "title": format!("T {hostile}"), "default": "b",
                  "enum": ["a", "b"], "enumNames": [hostile, "B"] },
        "text": { "type": "string", "description": hostile, "default": hostile, "format": hostile },
    } });
    let mut cmd = w.command();
    cmd.args(["call", "fake.elicit", "--json", &json!({ "schema": schema }).to_string()]);
    let mut t = Terminal::spawn(cmd);
    t.wait_for("Answer");
    t.type_keys("\r");
    t.wait_for("(optional)");
    t.type_keys("\r"); // The default choice, B.
    t.wait_for("[\\e]0;pwned");
    t.type_keys("\r"); // The default text, shown escaped.
    let (run, raw) = t.finish();
    assert_eq!(run.code, 0, "{run:?}\nterminal: {raw}");
    assert_eq!(
        elicited(&run),
        json!({ "action": "accept", "content": { "pick": "b", "text": hostile } }),
        "the default is sent as the server wrote it"
    );
    let text = crate::terminal::without_status_line(&raw);
    if let Some((at, c)) = crate::terminal::raw_control(&text) {
        panic!("a raw {c:?} reached the terminal at byte {at}:\n{text}");
    }
    assert!(text.contains("T \\e]0;pwned\\x07 \\e[2J hidden\\roverwritten \\u{9b}31m é"), "{text}");
}

#[test]
fn a_declined_form_tells_the_server_so() {
    let w = world(json!({}));
    let mut cmd = w.command();
    cmd.args(["call", "fake.elicit", "--json"]);
    let mut t = Terminal::spawn(cmd);
    t.wait_for("Answer");
    t.type_keys("\x1b[B\r"); // decline
    let (run, raw) = t.finish();
    assert_eq!(run.code, 0, "{run:?}\nterminal: {raw}");
    assert_eq!(elicited(&run), json!({ "action": "decline" }));
}

#[test]
fn a_call_that_ends_during_the_form_gives_the_terminal_back() {
    let w = world(json!({}));
    let mut cmd = w.command();
    cmd.args(["call", "fake.elicit", "--timeout", "1s"]);
    let t = Terminal::spawn(cmd);
    t.wait_for("Answer");
    let (run, raw) = t.finish();
    assert_eq!(run.code, 5, "the deadline passed: {run:?}\nterminal: {raw}");
    let screen = final_screen(&raw);
    assert!(screen.contains("mcpx: the call ended before the server's question was answered"), "{screen}");
    assert!(raw.rfind("\u{1b}[?25h") > raw.rfind("\u{1b}[?25l"), "the cursor is shown again: {raw:?}");
}

#[test]
fn without_a_terminal_or_with_no_input_the_question_is_declined_at_once() {
    let w = world(json!({}));
    let piped = w.call("fake.elicit", "{}");
    assert_eq!(piped.code, 1, "the fake returns the refusal as isError: {piped:?}");
    assert!(
        piped.stdout.contains("`mcpx call` ran without a terminal (or with --no-input)"),
        "the refusal says why: {piped:?}"
    );
    let mut cmd = w.command();
    cmd.args(["call", "fake.elicit", "--no-input"]);
    let t = Terminal::spawn(cmd);
    let (run, raw) = t.finish();
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stdout.contains("ran without a terminal (or with --no-input)"), "{run:?}");
    assert!(!plain(&raw).contains("Answer"), "no form: {raw}");
}

#[test]
fn sampling_from_the_shell_is_declined_with_a_reason() {
    let w = world(json!({}));
    let mut cmd = w.command();
    cmd.args(["call", "fake.sample"]);
    let t = Terminal::spawn(cmd);
    let (run, _) = t.finish();
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stdout.contains("mcpx cannot sample a model from the shell; use an MCP client"), "{run:?}");
}

#[test]
fn a_slow_start_shows_a_status_line_that_is_cleared() {
    let w = world(json!({ "FAKE_INIT_DELAY_MS": "1500" }));
    let mut cmd = w.command();
    cmd.args(["call", "fake.echo", r#"{"message":"hi"}"#]);
    let t = Terminal::spawn(cmd);
    t.wait_for("starting fake (mcpx-fake-server)");
    let (run, raw) = t.finish();
    assert_eq!(run.code, 0, "{run:?}\nterminal: {raw}");
    assert_eq!(run.stdout, "hi\n");
    assert!(raw.contains("\x1b[2K") || raw.ends_with('\r'), "the line is erased: {raw:?}");
    let last = raw.rsplit("starting fake").next().unwrap_or_default();
    assert!(plain(last.rsplit("\x1b[2K").next().unwrap_or_default()).trim().is_empty(), "nothing left: {raw:?}");

    // Not a terminal: nothing on stderr but what was there before.
    w.run(&["stop", "--all"]).ok();
    let piped = w.run(&["call", "fake.echo", "message=hi"]);
    assert_eq!(piped.code, 0, "{piped:?}");
    assert_eq!(piped.stderr, "", "no status line when stderr is not a terminal");
}

/// What the terminal shows at the end, given everything written to it: a small
/// screen that knows the moves a prompt makes (newline, carriage return, cursor up
/// and down, erase line); other escape sequences are dropped.
fn final_screen(raw: &str) -> String {
    let mut lines: Vec<Vec<char>> = vec![Vec::new()];
    let (mut row, mut col) = (0usize, 0usize);
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' => {
                row += 1;
                col = 0;
            }
            '\r' => col = 0,
            '\u{1b}' if chars.next_if_eq(&'[').is_some() => {
                let mut arg = String::new();
                let mut end = ' ';
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        end = c;
                        break;
                    }
                    arg.push(c);
                }
                let n: usize = arg.parse().unwrap_or(1);
                match end {
                    'A' => row = row.saturating_sub(n),
                    'B' => row += n,
                    'K' => {
                        lines.resize(lines.len().max(row + 1), Vec::new());
                        lines[row].clear();
                        col = 0;
                    }
                    _ => {}
                }
            }
            '\u{1b}' => {}
            c => {
                lines.resize(lines.len().max(row + 1), Vec::new());
                let line = &mut lines[row];
                line.resize(line.len().max(col), ' ');
                if col < line.len() {
                    line[col] = c;
                } else {
                    line.push(c);
                }
                col += 1;
            }
        }
    }
    let text: Vec<String> = lines.iter().map(|l| l.iter().collect::<String>().trim_end().to_owned()).collect();
    text.join("\n").trim_end().to_owned()
}

#[test]
fn a_failed_start_shows_the_servers_stderr_tail() {
    let w = world(json!({ "FAKE_STDERR_ON_START": "cannot find the API key", "FAKE_EXIT_BEFORE_INIT": "3" }));
    let mut cmd = w.command();
    cmd.args(["call", "fake.echo", r#"{"message":"hi"}"#]);
    let t = Terminal::spawn(cmd);
    let (run, raw) = t.finish();
    assert_eq!(run.code, 4, "{run:?}\nterminal: {raw}");
    let screen = final_screen(&raw);
    assert!(screen.contains("cannot find the API key"), "the stderr tail: {screen}");
    assert!(!screen.contains("starting fake"), "no status line left: {screen}");
}
