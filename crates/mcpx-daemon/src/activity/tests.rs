use std::os::unix::fs::PermissionsExt;

use std::time::Duration;

use super::*;

fn entry(_: &Activity, server: &str, outcome: &str, started_ms: u64) -> Entry {
    Entry { outcome: outcome.into(), ..entry_for(server, started_ms) }
}

/// An `ok` call of `server`'s `echo`.
fn entry_for(server: &str, started_ms: u64) -> Entry {
    Entry {
        started_ms,
        duration_us: 1500,
        path: "shell".into(),
        client: "shell pid:1".into(),
        server: server.into(),
        pid: Some(7),
        key: Some("global".into()),
        method: "tools/call".into(),
        name: "echo".into(),
        outcome: "ok".into(),
        bytes_in: 10,
        bytes_out: 20,
        ..Entry::default()
    }
}

fn pending(entry: Entry) -> Pending {
    Pending { entry, templates: Vec::new() }
}

fn open(state: &Dir, settings: ActivitySettings) -> Activity {
    Activity::open(state, settings, Arc::default())
}

/// `activity` closed (its writer joined: everything queued is written) and opened again.
fn reopened(activity: Activity, state: &Dir) -> Activity {
    let settings = activity.settings.clone();
    drop(activity);
    open(state, settings)
}

#[test]
fn entries_are_written_off_the_call_and_read_back_newest_first_filtered() {
    let dir = tempfile::tempdir().unwrap();
    let state = Dir::open_unchecked(dir.path()).unwrap();
    let activity = open(&state, ActivitySettings::default());
    let now = crate::schema::now_ms();
    activity.record(pending(entry(&activity, "a", "ok", now - 2)));
    activity.record(pending(entry(&activity, "b", "failed", now - 1)));
    activity.record(pending(entry(&activity, "a", "ok", now)));
    let activity = reopened(activity, &state);
    let all = activity.list(&Filter::default()).unwrap();
    assert_eq!(all.iter().map(|e| e.server.as_str()).collect::<Vec<_>>(), ["a", "b", "a"]);
    assert!(all[0].started_ms >= all[1].started_ms, "newest first");
    let errors = activity.list(&Filter { errors: true, ..Filter::default() }).unwrap();
    assert_eq!(errors.iter().map(|e| e.server.as_str()).collect::<Vec<_>>(), ["b"]);
    let of_a = activity.list(&Filter { server: Some("a".into()), limit: 1, ..Filter::default() }).unwrap();
    assert_eq!(of_a.len(), 1);
    let mode = std::fs::metadata(dir.path().join(store::DIR).join(store::FILE)).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    // A new daemon reads what the last one wrote; `clear` empties it.
    let again = reopened(activity, &state);
    assert_eq!(again.list(&Filter::default()).unwrap().len(), 3);
    again.clear().unwrap();
    assert!(again.list(&Filter::default()).unwrap().is_empty());
    // What is older than it is kept for goes with the next write.
    drop(again);
    let keep = Duration::from_millis(300);
    let again = open(&state, ActivitySettings { keep, ..ActivitySettings::default() });
    again.record(pending(entry(&again, "old", "ok", now)));
    let again = reopened(again, &state);
    std::thread::sleep(keep * 2);
    again.record(pending(entry(&again, "new", "ok", now)));
    let again = reopened(again, &state);
    let kept: Vec<String> = again.list(&Filter::default()).unwrap().into_iter().map(|e| e.server).collect();
    assert_eq!(kept, ["new"], "{kept:?}");
    assert_eq!(again.failed.load(Ordering::Relaxed), 0);
}

#[test]
fn the_record_stays_within_its_size_and_a_follower_reads_forward() {
    let dir = tempfile::tempdir().unwrap();
    let state = Dir::open_unchecked(dir.path()).unwrap();
    let cap = 1 << 20;
    let mut activity = open(&state, ActivitySettings { max_bytes: cap, ..ActivitySettings::default() });
    let now = crate::schema::now_ms();
    let mut largest = 0;
    for round in 0..20u64 {
        for i in 0..500u64 {
            let mut e = entry(&activity, "s", "ok", now + round * 1000 + i);
            e.error = Some(noise(round * 1000 + i, 300));
            activity.record(pending(e));
            if i % 50 == 0 {
                largest = largest.max(activity.taken());
            }
        }
        activity = reopened(activity, &state);
        largest = largest.max(activity.taken());
    }
    assert!(largest <= cap, "the file took {largest} bytes, past its {cap}");
    let kept = activity.list(&Filter::default()).unwrap();
    assert!(kept.len() > 100 && kept.len() < 2_000, "{}", kept.len());
    assert_eq!(kept[0].started_ms, now + 19 * 1000 + 499, "the newest are kept");
    // A follower asks for what came after the newest it has, oldest first.
    let after = kept[3].id;
    let newer = activity.list(&Filter { after_id: Some(after), ..Filter::default() }).unwrap();
    assert_eq!(newer.iter().map(|e| e.id).collect::<Vec<_>>(), [kept[2].id, kept[1].id, kept[0].id]);
    let one = activity.list(&Filter { id: Some(after), ..Filter::default() }).unwrap();
    assert_eq!(one.len(), 1);
    // Ids are the time of the record: `until` keeps what was recorded before.
    let ms = kept[0].id >> 20;
    let until = activity.list(&Filter { until_ms: Some(ms), limit: 1, ..Filter::default() }).unwrap();
    let before = kept.iter().find(|e| e.id >> 20 < ms).unwrap();
    assert_eq!(until[0].id, before.id);
    assert_eq!((activity.failed.load(Ordering::Relaxed), activity.dropped.load(Ordering::Relaxed)), (0, 0));
}

/// `len` letters that compress as little as text does: a xorshift of `seed`.
fn noise(seed: u64, len: usize) -> String {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b'a' + (x % 26) as u8)
        })
        .collect()
}

#[test]
fn a_record_in_the_format_before_is_moved_over() {
    let dir = tempfile::tempdir().unwrap();
    let state = Dir::open_unchecked(dir.path()).unwrap();
    let now = crate::schema::now_ms();
    // The format before: the batches' JSON lines in an index of their own.
    {
        let dir = state.subdir(store::DIR, true).unwrap();
        let file = dir.open_file(store::FILE, mcpx_platform::fs::FileUse::ReadWrite).unwrap();
        persy::Persy::create_from_file(file).unwrap();
        let file = dir.open_file(store::FILE, mcpx_platform::fs::FileUse::ReadWrite).unwrap();
        let former = persy::Persy::open_from_file(file, persy::Config::new()).unwrap();
        let mut tx = former.begin().unwrap();
        tx.create_index::<u64, persy::ByteVec>("entries", persy::ValueMode::Replace).unwrap();
        for (n, server) in ["a", "b"].into_iter().enumerate() {
            let id = ((now + n as u64) << 20) + 1;
            let e = Entry { id, ..entry_for(server, now + n as u64) };
            let line = format!("{}\n", serde_json::to_string(&e).unwrap());
            tx.put::<u64, persy::ByteVec>("entries", id, persy::ByteVec::from(line.into_bytes())).unwrap();
        }
        tx.prepare().unwrap().commit().unwrap();
    }
    let activity = open(&state, ActivitySettings::default());
    let kept: Vec<String> = activity.list(&Filter::default()).unwrap().into_iter().map(|e| e.server).collect();
    assert_eq!(kept, ["b", "a"]);
    activity.record(pending(entry_for("c", now + 5)));
    let again = reopened(activity, &state);
    let kept: Vec<String> = again.list(&Filter::default()).unwrap().into_iter().map(|e| e.server).collect();
    assert_eq!(kept, ["c", "b", "a"]);
}

#[test]
fn off_it_opens_no_file_and_records_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let state = Dir::open_unchecked(dir.path()).unwrap();
    let activity = open(&state, ActivitySettings { enabled: false, ..ActivitySettings::default() });
    activity.record(pending(entry(&activity, "s", "ok", 1)));
    assert!(!activity.on() && activity.list(&Filter::default()).unwrap().is_empty());
    assert!(!dir.path().join(store::DIR).join(store::FILE).exists());
}
