//! What other local users can do to a user's mcpx: each test runs mcpx as the
//! victim and tries to get in as the attacker (see `harness/users.rs`).

use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;

use serde_json::json;

use crate::harness::World;

/// The harness itself: the victim's mcpx runs as the victim, its directories are
/// closed to the attacker, and the attacker's fake daemon answers and records.
#[test]
fn the_victim_runs_mcpx_and_the_attacker_is_someone_else() {
    let Some(w) = World::new(json!({})).as_victim() else { return };
    w.set_servers(json!({ "fake": { "command": w.fake_server() } }));
    assert_eq!(w.call("fake.echo", r#"{"message":"hi"}"#).ok(), "hi\n");
    let pid = w.daemon_pid().expect("a daemon runs");
    assert_eq!(std::fs::metadata(format!("/proc/{pid}")).unwrap().uid(), w.uid(), "the daemon is the victim's");
    assert_eq!(std::fs::metadata(w.path("state/daemon.log")).unwrap().uid(), w.uid());

    let attacker = w.attacker();
    assert_ne!(attacker.ids.uid, w.uid());
    let run = attacker.run("id -u; cat ../state/daemon.log");
    assert_eq!(run.stdout.trim(), attacker.ids.uid.to_string(), "{run:?}");
    assert!(run.stderr.contains("Permission denied"), "the attacker read the victim's state: {run:?}");

    let socket = attacker.home.join("fake.sock");
    let fake = attacker.fake_daemon(&socket);
    let mut stream = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    stream.write_all(b"GET /v1/health HTTP/1.1\r\nhost: localhost\r\n\r\n").unwrap();
    let mut answer = [0; 12];
    stream.read_exact(&mut answer).unwrap();
    assert_eq!(&answer, b"HTTP/1.1 200");
    assert!(fake.received().starts_with("GET /v1/health "), "{}", fake.received());
    assert_eq!(std::fs::metadata(&socket).unwrap().uid(), attacker.ids.uid);
}
