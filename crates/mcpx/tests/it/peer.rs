//! Who the CLI talks to and what the daemon runs: a daemon socket that another uid
//! serves is refused before anything is sent to it, and `mcpx upgrade --binary`
//! refuses a binary that others could have changed, or whose path was swapped after
//! it was probed, and the daemon keeps running its old binary.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::harness::{World, fake_server, mcpx_bin, wait_until};

/// A socket that another uid bound, renamed into the user's own runtime directory, is
/// refused before anything is sent: first by its owner, then (chowned to the user) by
/// the uid of the process serving it. `status`, `call` and `serve` all refuse it,
/// with exit 3, naming the socket and the uid.
#[test]
fn a_daemon_socket_served_by_another_uid_is_refused_and_sent_nothing() {
    let Some(w) = World::new(json!({})).as_victim() else { return };
    w.set_servers(json!({ "fake": { "command": w.fake_server() } }));
    let attacker = w.attacker();
    let fake = attacker.fake_daemon(&attacker.home.join("fake.sock"));
    let socket = w.path("run/daemon.sock");
    std::fs::rename(attacker.home.join("fake.sock"), &socket).unwrap();
    for owner in ["the attacker", "the victim"] {
        if owner == "the victim" {
            w.give(&socket);
        }
        for args in [&["status"][..], &["call", "fake.echo", r#"{"password":"hunter2"}"#], &["serve"]] {
            let run = w.run(args);
            assert!(
                fake.received().is_empty(),
                "socket owned by {owner}: the fake daemon received: {:?}",
                fake.received()
            );
            assert_eq!(run.code, 3, "socket owned by {owner}, `mcpx {}`: {run:?}", args.join(" "));
            let uid = format!("uid {}, not you (uid {})", attacker.ids.uid, w.uid());
            assert!(
                run.stderr.contains(&uid) && run.stderr.contains(&*socket.to_string_lossy()),
                "socket owned by {owner}: {}",
                run.stderr
            );
            assert_eq!(run.stderr.trim_end().lines().count(), 1, "one line: {}", run.stderr);
        }
    }
}

/// The daemon's pid and build, to show it kept running its old binary.
fn daemon_identity(w: &World) -> (serde_json::Value, serde_json::Value) {
    let status = w.status();
    (status["daemon"]["pid"].clone(), status["daemon"]["build"].clone())
}

/// `mcpx upgrade --binary <path>`, expected to be refused (exit 2, one line that
/// contains `why`) while the daemon keeps running its old binary and answering.
#[track_caller]
fn refused(w: &World, binary: &Path, why: &str) {
    let before = daemon_identity(w);
    let run = w.run(&["upgrade", "--binary", binary.to_str().unwrap()]);
    assert_eq!(run.code, 2, "upgrade to {}: {run:?}", binary.display());
    assert!(run.stderr.contains(why), "{why:?} not in: {}", run.stderr);
    assert_eq!(run.stderr.trim_end().lines().count(), 1, "one line: {}", run.stderr);
    assert_eq!(daemon_identity(w), before, "the daemon kept its old binary");
    assert_eq!(w.call("fake.echo", r#"{"message":"still"}"#).ok(), "still\n");
}

/// A copy of the mcpx binary at `path`, with mode `mode`, owned by the world's user.
fn copy_of_mcpx(w: &World, path: &Path, mode: u32) {
    std::fs::copy(mcpx_bin(), path).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    w.give(path);
}

/// A binary its group could change, or one in a directory others can write (and that
/// is not root's sticky `/tmp`), is refused.
#[test]
fn upgrade_refuses_a_binary_others_could_change() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    w.call("fake.echo", r#"{"message":"x"}"#).ok();
    let group_writable = w.path("mcpx-next");
    copy_of_mcpx(&w, &group_writable, 0o775);
    refused(&w, &group_writable, "writable by its group or others");

    let open_dir = w.path("open");
    std::fs::create_dir(&open_dir).unwrap();
    std::fs::set_permissions(&open_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    copy_of_mcpx(&w, &open_dir.join("mcpx"), 0o755);
    refused(&w, &open_dir.join("mcpx"), "writable by its group or others");
}

/// A binary that another user owns is refused, naming its owner, even in the
/// user's own directory.
#[test]
fn upgrade_refuses_another_users_binary() {
    let Some(w) = World::new(json!({})).as_victim() else { return };
    w.set_servers(json!({ "fake": { "command": w.fake_server() } }));
    w.call("fake.echo", r#"{"message":"x"}"#).ok();
    let theirs = w.path("home/mcpx-theirs");
    std::fs::copy(mcpx_bin(), &theirs).unwrap();
    let attacker = w.attacker().ids;
    std::os::unix::fs::chown(&theirs, Some(attacker.uid), Some(attacker.gid)).unwrap();
    refused(&w, &theirs, &format!("is owned by uid {}, not you (uid {}) or root", attacker.uid, w.uid()));
}

/// The binary's path swapped for another file after the daemon probed it: the upgrade
/// is refused, the swapped-in file never runs, and the daemon keeps its old binary.
#[test]
fn upgrade_refuses_a_path_swapped_after_the_probe() {
    let mut w = World::new(json!({ "fake": { "command": fake_server() } }));
    let go = w.path("go");
    w.env.push(("MCPX_TEST_UPGRADE_PAUSE".into(), go.display().to_string()));
    w.call("fake.echo", r#"{"message":"x"}"#).ok();
    let before = daemon_identity(&w);
    let next = w.path("mcpx-next");
    copy_of_mcpx(&w, &next, 0o755);

    let mut upgrade = w.command();
    upgrade
        .args(["upgrade", "--binary", next.to_str().unwrap()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let upgrade = upgrade.spawn().unwrap();
    let probed = w.path("go.probed");
    wait_until("the daemon probed the binary", Duration::from_secs(30), || probed.exists());
    // The swapped-in file leaves a mark if it ever runs, then runs mcpx as asked.
    let marker = w.path("swapped-ran");
    let swapped = w.path("swapped");
    std::fs::write(
        &swapped,
        format!("#!/bin/sh\necho ran >> '{}'\nexec '{}' \"$@\"\n", marker.display(), mcpx_bin().display()),
    )
    .unwrap();
    std::fs::set_permissions(&swapped, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::rename(&swapped, &next).unwrap();
    std::fs::write(&go, b"go").unwrap();

    let out = upgrade.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!marker.exists(), "the swapped-in file ran; upgrade said: {stderr}");
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("was replaced"), "{stderr}");
    assert_eq!(daemon_identity(&w), before, "the daemon kept its old binary");
    assert_eq!(w.call("fake.echo", r#"{"message":"still"}"#).ok(), "still\n");
}
