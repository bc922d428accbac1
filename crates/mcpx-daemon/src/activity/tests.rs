use std::os::unix::fs::PermissionsExt;

use super::*;

fn entry(activity: &Activity, server: &str, outcome: &str, started_ms: u64) -> Entry {
    Entry {
        id: activity.next_id(started_ms),
        started_ms,
        duration_us: 1500,
        path: "shell".into(),
        client: "shell pid:1".into(),
        server: server.into(),
        pid: Some(7),
        key: Some("global".into()),
        method: "tools/call".into(),
        name: "echo".into(),
        outcome: outcome.into(),
        code: None,
        error: None,
        bytes_in: 10,
        bytes_out: 20,
    }
}

/// `activity` closed (its writer joined: everything queued is written) and opened again.
fn reopened(activity: Activity, state: &Dir) -> Activity {
    drop(activity);
    Activity::open(state)
}

#[test]
fn entries_are_written_off_the_call_and_read_back_newest_first_filtered() {
    let dir = tempfile::tempdir().unwrap();
    let state = Dir::open_unchecked(dir.path()).unwrap();
    let activity = Activity::open(&state);
    let now = crate::schema::now_ms();
    activity.record(entry(&activity, "a", "ok", now - 2));
    activity.record(entry(&activity, "b", "failed", now - 1));
    activity.record(entry(&activity, "a", "ok", now));
    let activity = reopened(activity, &state);
    let all = activity.list(&Filter::default()).unwrap();
    assert_eq!(all.iter().map(|e| e.server.as_str()).collect::<Vec<_>>(), ["a", "b", "a"]);
    assert!(all[0].started_ms >= all[1].started_ms, "newest first");
    let errors = activity.list(&Filter { errors: true, ..Filter::default() }).unwrap();
    assert_eq!(errors.iter().map(|e| e.server.as_str()).collect::<Vec<_>>(), ["b"]);
    let of_a = activity.list(&Filter { server: Some("a".into()), limit: 1, ..Filter::default() }).unwrap();
    assert_eq!(of_a.len(), 1);
    let mode = std::fs::metadata(dir.path().join(FILE)).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    // A new daemon reads what the last one wrote; `clear` empties it.
    let again = reopened(activity, &state);
    assert_eq!(again.list(&Filter::default()).unwrap().len(), 3);
    again.clear().unwrap();
    assert!(again.list(&Filter::default()).unwrap().is_empty());
    // What is older than it is kept for goes with the next write.
    again.record(entry(&again, "old", "ok", now - KEEP.as_millis() as u64 - 1000));
    again.record(entry(&again, "new", "ok", now));
    let again = reopened(again, &state);
    let kept: Vec<String> = again.list(&Filter::default()).unwrap().into_iter().map(|e| e.server).collect();
    assert_eq!(kept, ["new"], "{kept:?}");
    assert_eq!(again.failed.load(Ordering::Relaxed), 0);
}
