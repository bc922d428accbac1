//! The dashboard (`mcpx ui`, `docs/ui.md`) over plain HTTP: who gets in (the link
//! once, in time, from its own host and origin, and only the user's uid), the security
//! headers, what the overview shows, and the live stream's changes within a second.

use std::io::{BufRead, BufReader, Read, Write};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::{World, fake_server};

/// One GET of `path` on the dashboard at `port`, on a connection of its own, with
/// `headers` (a `host` of its own replaces the right one): (status, lowercased head,
/// body). A connection closed without an answer is status 0.
fn get(port: u16, path: &str, headers: &[(&str, &str)]) -> (u16, String, String) {
    let mut request = format!("GET {path} HTTP/1.1\r\nconnection: close\r\n");
    if !headers.iter().any(|(k, _)| *k == "host") {
        request.push_str(&format!("host: 127.0.0.1:{port}\r\n"));
    }
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let _ = stream.write_all(request.as_bytes());
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, head.to_lowercase(), body.to_owned())
}

/// `mcpx ui --no-open --json`: the link and its port.
fn link(w: &World) -> (String, u16) {
    let answer = w.run(&["ui", "--no-open", "--json"]).json();
    let url = answer["url"].as_str().unwrap().to_owned();
    let port = answer["port"].as_u64().unwrap() as u16;
    assert!(url.starts_with(&format!("http://127.0.0.1:{port}/enter?code=")), "{url}");
    (url, port)
}

/// The path and query of a link.
fn path_of(url: &str) -> &str {
    &url[url.find("/enter").unwrap()..]
}

/// Signs in with a fresh link: the `cookie` header's value.
fn sign_in(w: &World) -> (String, u16) {
    let (url, port) = link(w);
    let (status, head, body) = get(port, path_of(&url), &[]);
    assert_eq!(status, 200, "{head}\n{body}");
    let set = head.lines().find_map(|l| l.strip_prefix("set-cookie: ")).expect("a session cookie").to_owned();
    for attribute in ["httponly", "samesite=strict", "path=/"] {
        assert!(set.contains(attribute), "the cookie lacks {attribute}: {set}");
    }
    assert!(body.contains(r#"http-equiv="refresh" content="0; url=/""#), "{body}");
    (set.split(';').next().unwrap().to_owned(), port)
}

#[test]
fn the_link_lets_in_once_in_time_and_from_its_own_origin_only() {
    let mut w = World::new(json!({ "fake": { "command": fake_server() } }));
    w.env.push(("MCPX_TEST_UI_CODE_TTL_MS".into(), "2000".into()));
    let (url, port) = link(&w);
    let path = path_of(&url);
    let (status, head, _) = get(port, path, &[]);
    assert_eq!(status, 200, "{head}");
    let cookie =
        head.lines().find_map(|l| l.strip_prefix("set-cookie: ")).unwrap().split(';').next().unwrap().to_owned();

    // Signed in: the overview, with the security headers.
    let (status, head, body) = get(port, "/", &[("cookie", &cookie)]);
    assert_eq!(status, 200, "{head}\n{body}");
    assert!(head.contains("content-security-policy: default-src 'none'; script-src 'self'"), "{head}");
    assert!(head.contains("x-frame-options: deny") && head.contains("cache-control: no-store"), "{head}");
    assert!(body.contains("<h1>Overview</h1>") && body.contains(">fake</a>"), "{body}");
    assert!(!body.contains("<script>") && body.contains(r#"<script src="/assets/app.js" defer>"#), "{body}");
    // `status` shows the dashboard's port.
    let status = w.run(&["status", "--json"]).json();
    assert_eq!(status["daemon"]["ui_url"], format!("http://127.0.0.1:{port}/"));

    // Refused: the link again, the link without its code, no cookie, another site, another host.
    type Headers<'a> = Vec<(&'a str, &'a str)>;
    let refused: [(&str, Headers, u16); 8] = [
        (path, vec![], 403),
        ("/enter", vec![], 403),
        ("/enter?code=", vec![], 403),
        ("/", vec![], 401),
        ("/live/overview", vec![], 401),
        ("/", vec![("cookie", &cookie), ("origin", "http://evil.example")], 403),
        ("/", vec![("cookie", &cookie), ("sec-fetch-site", "cross-site")], 403),
        ("/", vec![("cookie", &cookie), ("host", "evil.example")], 421),
    ];
    for (path, headers, expected) in refused {
        let (status, head, body) = get(port, path, &headers);
        assert_eq!(status, expected, "{path} {headers:?}\n{head}\n{body}");
        assert!(!body.contains(">fake</a>"), "a refusal showed the overview: {body}");
    }
    let (status, _, _) = get(port, "/", &[("cookie", &format!("{cookie}x"))]);
    assert_eq!(status, 401, "a cookie the daemon never set");

    // A link used late is refused; a second link is good, and the same listener serves it.
    let (late, late_port) = link(&w);
    assert_eq!(late_port, port, "one listener");
    std::thread::sleep(Duration::from_millis(2200));
    let (status, _, body) = get(port, path_of(&late), &[]);
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("older than a minute"), "{body}");
    let (status, _, _) = get(port, "/", &[("cookie", &cookie)]);
    assert_eq!(status, 200, "the session outlives its link");
}

#[test]
fn the_overview_follows_a_server_started_and_a_call_made_within_a_second() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    let (cookie, port) = sign_in(&w);
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let request = format!("GET /live/overview HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncookie: {cookie}\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut events = BufReader::new(stream);
    let next_view = |events: &mut BufReader<std::net::TcpStream>| -> String {
        let mut data = String::new();
        let mut line = String::new();
        loop {
            line.clear();
            assert!(events.read_line(&mut line).unwrap() > 0, "the stream ended");
            if let Some(d) = line.strip_prefix("data: ") {
                data.push_str(d);
            } else if (line == "\r\n" || line == "\n") && !data.is_empty() {
                return data;
            }
        }
    };
    let first = next_view(&mut events);
    assert!(first.contains(r#"data-state="unread""#) || first.contains(r#"data-state="ready""#), "{first}");

    let at = Instant::now();
    assert_eq!(w.call("fake.echo", r#"{"message":"hi"}"#).ok(), "hi\n");
    let called = at.elapsed();
    let view = loop {
        let view = next_view(&mut events);
        if view.contains(r#"data-state="running""#) {
            break view;
        }
    };
    let seen = at.elapsed();
    assert!(seen < called + Duration::from_secs(1), "the change showed {:?} after the call ended", seen - called);
    // The call is counted on the overview.
    assert!(view.contains("<td>1</td>"), "{view}");
}

#[test]
fn another_user_gets_nothing_even_with_a_valid_cookie() {
    let Some(w) = World::new(json!({})).as_victim() else { return };
    w.set_servers(json!({ "fake": { "command": w.fake_server() } }));
    let attacker = w.attacker();
    // A client both users can run: GET a path with a cookie, print the raw answer.
    let client = attacker.home.join("get.py");
    std::fs::write(
        &client,
        "import socket, sys\n\
         port, path, cookie = int(sys.argv[1]), sys.argv[2], sys.argv[3]\n\
         s = socket.create_connection(('127.0.0.1', port))\n\
         s.sendall(f'GET {path} HTTP/1.1\\r\\nhost: 127.0.0.1:{port}\\r\\ncookie: {cookie}\\r\\nconnection: close\\r\\n\\r\\n'.encode())\n\
         answer = b''\n\
         while chunk := s.recv(65536):\n    answer += chunk\n\
         sys.stdout.write(answer.decode(errors='replace'))\n",
    )
    .unwrap();
    let answer = w.run(&["ui", "--no-open", "--json"]).json();
    let (url, port) = (answer["url"].as_str().unwrap().to_owned(), answer["port"].as_u64().unwrap());
    // The victim signs in, as their browser would.
    let run = w.sh(&format!("python3 {} {port} '{}' none", client.display(), path_of(&url)));
    let cookie = run.stdout.lines().find_map(|l| l.to_lowercase().strip_prefix("set-cookie: ").map(str::to_owned));
    let cookie = cookie.unwrap_or_else(|| panic!("no cookie for the victim: {run:?}"));
    let cookie = cookie.split(';').next().unwrap().to_owned();
    let victims = w.sh(&format!("python3 {} {port} / '{cookie}'", client.display()));
    assert!(victims.stdout.starts_with("HTTP/1.1 200"), "{victims:?}");
    // The attacker, with the victim's cookie: the connection closes without a byte.
    for path in ["/", "/live/overview", "/activity", "/assets/app.js", "/enter?code=x"] {
        let run = attacker.run(&format!("python3 {} {port} '{path}' '{cookie}'", client.display()));
        assert_eq!(run.stdout, "", "another user got an answer on {path}: {run:?}");
    }
}

/// One POST of `body` to `path` on the dashboard at `port`, with `headers`: (status, body).
fn post(port: u16, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nconnection: close\r\nhost: 127.0.0.1:{port}\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    (head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0), body.to_owned())
}

/// The pid of `server`'s one instance, as `status` says.
fn pid_of(w: &World, server: &str) -> Option<u64> {
    let status = w.run(&["status", "--json"]).json();
    status["instances"].as_array().unwrap().iter().find(|i| i["server"] == server).and_then(|i| i["pid"].as_u64())
}

#[test]
fn an_action_needs_the_pages_token_and_is_recorded_as_the_dashboards() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    assert_eq!(w.call("fake.echo", r#"{"message":"hi"}"#).ok(), "hi\n");
    let before = pid_of(&w, "fake").expect("a running instance");
    let (cookie, port) = sign_in(&w);
    let (_, _, page) = get(port, "/servers/fake", &[("cookie", &cookie)]);
    let csrf = page.split(r#"<meta name="mcpx-csrf" content=""#).nth(1).unwrap().split('"').next().unwrap().to_owned();
    assert_eq!(csrf.len(), 32, "{page}");
    let body = json!({ "server": "fake", "file": w.config }).to_string();
    let origin = format!("http://127.0.0.1:{port}");
    // Refused: a form of another site, a fetch without the token, with another
    // session's token, without an origin; every verb; nothing changes.
    let (other_cookie, _) = sign_in(&w);
    let (_, _, other_page) = get(port, "/", &[("cookie", &other_cookie)]);
    let other_csrf = other_page.split(r#"<meta name="mcpx-csrf" content=""#).nth(1).unwrap().split('"').next().unwrap();
    for verb in ["restart", "stop", "refresh"] {
        let path = format!("/actions/{verb}");
        let attempts: [Vec<(&str, &str)>; 5] = [
            vec![
                ("cookie", &cookie),
                ("origin", "http://evil.example"),
                ("content-type", "application/x-www-form-urlencoded"),
            ],
            vec![("cookie", &cookie), ("origin", &origin), ("content-type", "application/json")],
            vec![
                ("cookie", &cookie),
                ("origin", &origin),
                ("content-type", "application/json"),
                ("x-mcpx-csrf", other_csrf),
            ],
            vec![("cookie", &cookie), ("content-type", "application/json"), ("x-mcpx-csrf", &csrf)],
            vec![("origin", &origin), ("content-type", "application/json"), ("x-mcpx-csrf", &csrf)],
        ];
        for headers in attempts {
            let (status, answer) = post(port, &path, &headers, &body);
            assert!(matches!(status, 401 | 403), "{verb} {headers:?}: {status} {answer}");
        }
    }
    assert_eq!(pid_of(&w, "fake"), Some(before), "a refused action changed nothing");
    // The page's own: done, and recorded as the dashboard's.
    let headers = [
        ("cookie", cookie.as_str()),
        ("origin", &origin),
        ("content-type", "application/json"),
        ("x-mcpx-csrf", &csrf),
    ];
    let (status, answer) = post(port, "/actions/restart", &headers, &body);
    assert_eq!(status, 200, "{answer}");
    let after = pid_of(&w, "fake").expect("restarted");
    assert_ne!(after, before, "{answer}");
    let (status, answer) = post(port, "/actions/stop", &headers, &body);
    assert_eq!(
        (status, serde_json::from_str::<serde_json::Value>(&answer).unwrap()["stopped"].as_u64()),
        (200, Some(1))
    );
    assert_eq!(pid_of(&w, "fake"), None, "stopped");
    let (status, answer) = post(port, "/actions/nonsense", &headers, &body);
    assert_eq!(status, 400, "{answer}");
    // The record is written off the call's path: wait for it.
    let mut out = String::new();
    crate::harness::wait_until("the actions recorded", Duration::from_secs(10), || {
        out = w.run(&["activity", "--json", "--server", "fake"]).ok();
        out.contains(r#""method":"ui/restart""#) && out.contains(r#""method":"ui/stop""#)
    });
    let activity: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let restart = activity.iter().find(|e| e["method"] == "ui/restart").unwrap();
    assert_eq!((restart["path"].as_str(), restart["outcome"].as_str()), (Some("ui"), Some("ok")), "{restart}");
    let log = std::fs::read_to_string(w.path("state/daemon.log")).unwrap();
    assert!(log.contains("the dashboard's action"), "the log says what the page did");
}
