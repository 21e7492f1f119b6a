//! Behaviour of the hint store through its public API: ordering, acks,
//! recovery from damage, bounds, concurrency, deletion and crash survival.

#![allow(clippy::unwrap_used, reason = "an integration test: a failed unwrap names its line")]

use hints::{Hint, HintConfig, HintError, HintStats, HintStore};
use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use uuid::Uuid;

const HEADER: u64 = 36;
const RECORD: u64 = 16;

fn open(dir: &Path, segment_bytes: u64, max_bytes: u64) -> HintStore {
    let mut config = HintConfig::new(dir);
    config.segment_bytes = segment_bytes;
    config.max_bytes_per_target = max_bytes;
    HintStore::open(config).unwrap()
}

fn payload(i: u32) -> Vec<u8> {
    format!("mutation-{i:05}").into_bytes()
}

/// Drains everything (acking each batch), returning the payloads in delivery order.
fn drain(store: &HintStore, target: Uuid, max_bytes: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while let Some(batch) = store.next_batch(target, max_bytes).unwrap() {
        assert!(!batch.hints.is_empty());
        out.extend(batch.hints.iter().map(|h| h.payload.clone()));
        store.ack(&batch).unwrap();
    }
    out
}

fn segment_files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_str().unwrap().ends_with(suffix))
        .collect();
    files.sort();
    files
}

#[test]
fn round_trip_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
    {
        let store = open(dir.path(), 1 << 20, 0);
        assert!(store.targets().is_empty());
        store.store(a, 1_000, b"first").unwrap();
        store.store(b, 2_000, b"").unwrap();
        store.store(a, 3_000, b"second").unwrap();
        store.sync().unwrap();
        assert_eq!(store.targets(), vec![a, b]);
        assert_eq!(store.pending_bytes(a), 2 * RECORD + 11);
        assert_eq!(store.total_pending_bytes(), 3 * RECORD + 11);
    }
    let store = open(dir.path(), 1 << 20, 0);
    assert_eq!(store.targets(), vec![a, b]);
    assert_eq!(store.pending_bytes(a), 2 * RECORD + 11);
    let batch = store.next_batch(a, 1 << 20).unwrap().unwrap();
    assert_eq!(batch.target, a);
    assert_eq!(
        batch.hints,
        vec![
            Hint { created_at_ms: 1_000, payload: b"first".to_vec() },
            Hint { created_at_ms: 3_000, payload: b"second".to_vec() }
        ]
    );
    assert_eq!(batch.bytes(), 2 * RECORD + 11);
    store.ack(&batch).unwrap();
    assert_eq!(store.pending_bytes(a), 0);
    assert_eq!(store.next_batch(a, 1 << 20).unwrap(), None);
    let batch = store.next_batch(b, 1).unwrap().unwrap();
    assert_eq!(batch.hints, vec![Hint { created_at_ms: 2_000, payload: vec![] }]);
    assert_eq!(store.next_batch(Uuid::from_u128(3), 100).unwrap(), None);
    // Counted since this open: the two hints delivered, nothing damaged or stored.
    assert_eq!(store.stats(), HintStats { replayed_hints: 2, ..Default::default() });
}

#[test]
fn oldest_first_across_segments_and_new_appends() {
    let dir = tempfile::tempdir().unwrap();
    let t = Uuid::new_v4();
    // 14-byte payloads make 30-byte records; 100-byte segments hold 2 records each.
    let store = open(dir.path(), 100, 0);
    for i in 0..10 {
        store.store(t, i64::from(i), &payload(i)).unwrap();
    }
    assert_eq!(segment_files(dir.path(), ".hints").len(), 5);
    // One record per batch: max_bytes smaller than a record still yields one.
    let first = store.next_batch(t, 1).unwrap().unwrap();
    assert_eq!(first.hints.len(), 1);
    assert_eq!(first.hints[0].payload, payload(0));
    // Not acked: the same batch again.
    assert_eq!(store.next_batch(t, 1).unwrap().unwrap(), first);
    store.ack(&first).unwrap();
    store.ack(&first).unwrap(); // a second ack is a no-op
                                // Stores during replay go after everything already pending.
    store.store(t, 10, &payload(10)).unwrap();
    let rest = drain(&store, t, 1 << 20);
    assert_eq!(rest, (1..=10).map(payload).collect::<Vec<_>>());
    assert_eq!(store.pending_bytes(t), 0);
    assert!(segment_files(dir.path(), ".hints").is_empty());

    // Ordering also holds across reopen, with several segments.
    for i in 20..27 {
        store.store(t, 0, &payload(i)).unwrap();
    }
    drop(store);
    let store = open(dir.path(), 100, 0);
    assert_eq!(drain(&store, t, 45), (20..27).map(payload).collect::<Vec<_>>());
}

#[test]
fn batches_respect_max_bytes_within_one_segment() {
    let dir = tempfile::tempdir().unwrap();
    let t = Uuid::new_v4();
    let store = open(dir.path(), 1 << 20, 0);
    for i in 0..10 {
        store.store(t, 0, &payload(i)).unwrap();
    }
    let batch = store.next_batch(t, 95).unwrap().unwrap(); // 3 records of 30 bytes
    assert_eq!(batch.hints.len(), 3);
    assert_eq!(batch.bytes(), 90);
    store.ack(&batch).unwrap();
    assert_eq!(store.pending_bytes(t), 7 * 30);
    let batch = store.next_batch(t, 1 << 20).unwrap().unwrap();
    assert_eq!(
        batch.hints.iter().map(|h| h.payload.clone()).collect::<Vec<_>>(),
        (3..10).map(payload).collect::<Vec<_>>()
    );
}

#[test]
fn ack_deletes_delivered_segments_and_reopen_does_not_replay_them() {
    let dir = tempfile::tempdir().unwrap();
    let t = Uuid::new_v4();
    {
        let store = open(dir.path(), 100, 0);
        for i in 0..6 {
            store.store(t, 0, &payload(i)).unwrap();
        }
        assert_eq!(segment_files(dir.path(), ".hints").len(), 3);
        // A whole segment per batch: two records each.
        for _ in 0..2 {
            let batch = store.next_batch(t, 1 << 20).unwrap().unwrap();
            assert_eq!(batch.hints.len(), 2);
            store.ack(&batch).unwrap();
        }
        assert_eq!(segment_files(dir.path(), ".hints").len(), 1);
        assert_eq!(store.pending_bytes(t), 60);
    }
    let store = open(dir.path(), 100, 0);
    assert_eq!(store.pending_bytes(t), 60);
    assert_eq!(drain(&store, t, 1 << 20), vec![payload(4), payload(5)]);
    assert!(segment_files(dir.path(), ".hints").is_empty());
    drop(store);
    let store = open(dir.path(), 100, 0);
    assert!(store.targets().is_empty());
}

/// Documented at-least-once replay: progress inside a segment is in memory
/// only, so after a restart a partially acknowledged segment is replayed from
/// its start (hints carry their original timestamps, so this is idempotent).
#[test]
fn partial_ack_then_reopen_replays_the_whole_segment() {
    let dir = tempfile::tempdir().unwrap();
    let t = Uuid::new_v4();
    {
        let store = open(dir.path(), 1 << 20, 0);
        for i in 0..4 {
            store.store(t, 0, &payload(i)).unwrap();
        }
        let batch = store.next_batch(t, 60).unwrap().unwrap();
        assert_eq!(batch.hints.len(), 2);
        store.ack(&batch).unwrap();
        assert_eq!(store.pending_bytes(t), 60);
    }
    let store = open(dir.path(), 1 << 20, 0);
    assert_eq!(store.pending_bytes(t), 120);
    assert_eq!(drain(&store, t, 1 << 20), (0..4).map(payload).collect::<Vec<_>>());
}

#[test]
fn target_full_bounds_pending_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (t, other) = (Uuid::new_v4(), Uuid::new_v4());
    let store = open(dir.path(), 100, 110); // room for three 30-byte records and 20 bytes
    for i in 0..3 {
        store.store(t, 0, &payload(i)).unwrap();
    }
    match store.store(t, 0, &payload(3)) {
        Err(HintError::TargetFull { target, max_bytes }) => {
            assert_eq!((target, max_bytes), (t, 110));
        }
        other => panic!("expected TargetFull, got {other:?}"),
    }
    assert_eq!(store.pending_bytes(t), 90);
    // A smaller record still fits; the bound is per target.
    store.store(t, 0, b"1234").unwrap();
    assert!(matches!(store.store(t, 0, b""), Err(HintError::TargetFull { .. })));
    store.store(other, 0, &payload(9)).unwrap();
    // Acknowledging makes room again.
    let batch = store.next_batch(t, 1).unwrap().unwrap();
    store.ack(&batch).unwrap();
    store.store(t, 0, &payload(3)).unwrap();
    assert_eq!(store.pending_bytes(t), 110);
    assert_eq!(drain(&store, t, 1 << 20), vec![payload(1), payload(2), b"1234".to_vec(), payload(3)]);
    // The bound survives reopen (pending bytes are recomputed from the files).
    for i in 0..3 {
        store.store(t, 0, &payload(i)).unwrap();
    }
    drop(store);
    let store = open(dir.path(), 100, 110);
    assert!(matches!(store.store(t, 0, &payload(3)), Err(HintError::TargetFull { .. })));
}

#[test]
fn oversized_payload_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), 1 << 20, 0);
    let big = vec![0u8; hints::MAX_PAYLOAD_LEN + 1];
    assert!(matches!(store.store(Uuid::new_v4(), 0, &big), Err(HintError::PayloadTooLarge { .. })));
    assert!(HintStore::open(HintConfig { segment_bytes: 0, ..HintConfig::new(dir.path()) }).is_err());
}

/// Writes `n` hints into one segment, closes the store, returns the segment path.
fn one_segment(dir: &Path, t: Uuid, n: u32) -> PathBuf {
    let store = open(dir, 1 << 20, 0);
    for i in 0..n {
        store.store(t, i64::from(i), &payload(i)).unwrap();
    }
    store.sync().unwrap();
    drop(store);
    let files = segment_files(dir, ".hints");
    assert_eq!(files.len(), 1);
    files[0].clone()
}

#[test]
fn truncated_tail_keeps_every_record_before_it() {
    let t = Uuid::new_v4();
    // Cut inside the last record's payload, inside its header, and right after the segment header.
    for (cut, expect) in [(HEADER + 4 * 30 + 20, 4), (HEADER + 4 * 30 + 7, 4), (HEADER + 2, 0)] {
        let dir = tempfile::tempdir().unwrap();
        let path = one_segment(dir.path(), t, 5);
        fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(cut).unwrap();
        let store = open(dir.path(), 1 << 20, 0);
        assert_eq!(store.stats().torn_records, 1, "cut at {cut}");
        assert_eq!(store.pending_bytes(t), 30 * expect);
        assert_eq!(drain(&store, t, 1 << 20), (0..expect as u32).map(payload).collect::<Vec<_>>());
        if expect == 0 {
            // Nothing readable: quarantined, not deleted.
            assert_eq!(segment_files(dir.path(), ".corrupt").len(), 1);
        }
        // New hints go to a new segment, never behind the damage.
        store.store(t, 0, b"after").unwrap();
        drop(store);
        let store = open(dir.path(), 1 << 20, 0);
        assert_eq!(drain(&store, t, 1 << 20), vec![b"after".to_vec()]);
    }
}

#[test]
fn flipped_byte_keeps_every_record_before_it() {
    let t = Uuid::new_v4();
    // Flip a byte in record 2's length, checksum, timestamp and payload.
    for within in [0u64, 5, 9, 20] {
        let dir = tempfile::tempdir().unwrap();
        let path = one_segment(dir.path(), t, 5);
        let mut bytes = fs::read(&path).unwrap();
        bytes[(HEADER + 2 * 30 + within) as usize] ^= 0x40;
        fs::write(&path, &bytes).unwrap();
        let store = open(dir.path(), 1 << 20, 0);
        let stats = store.stats();
        assert_eq!(stats.torn_records + stats.corrupt_records, 1, "flip at {within}");
        assert_eq!(drain(&store, t, 1 << 20), vec![payload(0), payload(1)], "flip at {within}");
    }
}

#[test]
fn damage_found_during_replay_ends_the_segment() {
    let dir = tempfile::tempdir().unwrap();
    let t = Uuid::new_v4();
    let path = one_segment(dir.path(), t, 5);
    let store = open(dir.path(), 1 << 20, 0);
    // Damaged after recovery checked it (bit rot while the store is open).
    let mut bytes = fs::read(&path).unwrap();
    bytes[(HEADER + 3 * 30 + 20) as usize] ^= 1;
    fs::write(&path, &bytes).unwrap();
    assert_eq!(drain(&store, t, 1 << 20), (0..3).map(payload).collect::<Vec<_>>());
    assert_eq!(store.stats().corrupt_records, 1);
    assert_eq!(store.pending_bytes(t), 0);
    assert!(segment_files(dir.path(), ".hints").is_empty());
}

#[test]
fn unreadable_header_is_skipped_and_renamed() {
    let dir = tempfile::tempdir().unwrap();
    let t = Uuid::new_v4();
    let path = one_segment(dir.path(), t, 3);
    let mut bytes = fs::read(&path).unwrap();
    bytes[1] ^= 0xFF; // magic
    fs::write(&path, &bytes).unwrap();
    // A second, healthy segment for the same target, and junk that is not a segment.
    let store = open(dir.path(), 1 << 20, 0);
    assert_eq!(store.stats().corrupt_segments, 1);
    assert!(store.targets().is_empty());
    store.store(t, 0, b"fresh").unwrap();
    fs::write(dir.path().join("notes.txt"), b"not a segment").unwrap();
    drop(store);
    // An empty segment (crash between create and header) is removed quietly.
    let empty = dir.path().join(format!("{t}-{:020}.hints", 999));
    fs::write(&empty, b"").unwrap();
    let store = open(dir.path(), 1 << 20, 0);
    assert_eq!(store.stats().corrupt_segments, 0);
    assert!(!empty.exists());
    let corrupt = segment_files(dir.path(), ".corrupt");
    assert_eq!(corrupt.len(), 1);
    assert_eq!(corrupt[0].to_str().unwrap(), format!("{}.corrupt", path.display()));
    assert_eq!(drain(&store, t, 1 << 20), vec![b"fresh".to_vec()]);
    // New segments are numbered past the quarantined and removed ones.
    store.store(t, 0, b"x").unwrap();
    let live = segment_files(dir.path(), ".hints");
    assert!(live[0].to_str().unwrap().ends_with(&format!("{:020}.hints", 1000)), "{live:?}");
}

#[test]
fn segment_of_another_target_is_quarantined() {
    let dir = tempfile::tempdir().unwrap();
    let (t, u) = (Uuid::new_v4(), Uuid::new_v4());
    let path = one_segment(dir.path(), t, 2);
    let renamed = dir.path().join(path.file_name().unwrap().to_str().unwrap().replace(&t.to_string(), &u.to_string()));
    fs::rename(&path, &renamed).unwrap();
    let store = open(dir.path(), 1 << 20, 0);
    assert_eq!(store.stats().corrupt_segments, 1);
    assert!(store.targets().is_empty());
}

#[test]
fn concurrent_stores_and_drain_lose_and_duplicate_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let t = Uuid::new_v4();
    let store = Arc::new(open(dir.path(), 4 << 10, 0));
    const THREADS: u32 = 4;
    const PER_THREAD: u32 = 2_000;
    let done = Arc::new(AtomicBool::new(false));
    let drainer = {
        let (store, done) = (store.clone(), done.clone());
        std::thread::spawn(move || {
            let mut got = Vec::new();
            loop {
                let finished = done.load(Ordering::Acquire);
                match store.next_batch(t, 1 << 10).unwrap() {
                    Some(batch) => {
                        got.extend(batch.hints.iter().map(|h| h.payload.clone()));
                        store.ack(&batch).unwrap();
                    }
                    None if finished => break got,
                    None => std::thread::yield_now(),
                }
            }
        })
    };
    let writers: Vec<_> = (0..THREADS)
        .map(|w| {
            let store = store.clone();
            std::thread::spawn(move || {
                for i in 0..PER_THREAD {
                    let p = format!("w{w}-{i:05}");
                    store.store(t, i64::from(i), p.as_bytes()).unwrap();
                    if i % 500 == 0 {
                        store.sync().unwrap();
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    done.store(true, Ordering::Release);
    let got = drainer.join().unwrap();
    assert_eq!(got.len(), (THREADS * PER_THREAD) as usize);
    let unique: HashSet<&Vec<u8>> = got.iter().collect();
    assert_eq!(unique.len(), got.len(), "duplicates delivered");
    // Each writer's hints arrive in the order it stored them.
    for w in 0..THREADS {
        let prefix = format!("w{w}-");
        let mine: Vec<&Vec<u8>> = got.iter().filter(|p| p.starts_with(prefix.as_bytes())).collect();
        let expected: Vec<Vec<u8>> = (0..PER_THREAD).map(|i| format!("w{w}-{i:05}").into_bytes()).collect();
        assert_eq!(mine.len(), expected.len());
        assert!(mine.iter().zip(&expected).all(|(a, b)| *a == b), "writer {w} out of order");
    }
    assert_eq!(store.total_pending_bytes(), 0);
    assert!(store.targets().is_empty());
    store.sync().unwrap();
    assert!(segment_files(dir.path(), ".hints").len() <= 1);
}

#[test]
fn delete_target_drops_only_that_target() {
    let dir = tempfile::tempdir().unwrap();
    let (t, u) = (Uuid::new_v4(), Uuid::new_v4());
    let store = open(dir.path(), 100, 0);
    for i in 0..5 {
        store.store(t, 0, &payload(i)).unwrap();
        store.store(u, 0, &payload(i)).unwrap();
    }
    let stale = store.next_batch(t, 1 << 20).unwrap().unwrap();
    store.delete_target(t).unwrap();
    assert_eq!(store.pending_bytes(t), 0);
    assert_eq!(store.targets(), vec![u]);
    assert!(segment_files(dir.path(), ".hints").iter().all(|p| p.to_str().unwrap().contains(&u.to_string())));
    assert_eq!(store.next_batch(t, 1 << 20).unwrap(), None);
    // A batch from before the deletion acknowledges nothing new.
    store.store(t, 0, b"later").unwrap();
    store.ack(&stale).unwrap();
    assert_eq!(store.pending_bytes(t), RECORD + 5);
    assert_eq!(drain(&store, t, 1 << 20), vec![b"later".to_vec()]);
    store.delete_target(Uuid::new_v4()).unwrap();
    drop(store);
    let store = open(dir.path(), 100, 0);
    assert_eq!(store.targets(), vec![u]);
    assert_eq!(drain(&store, u, 1 << 20), (0..5).map(payload).collect::<Vec<_>>());
}

#[test]
fn drop_older_than_skips_expired_hints() {
    let dir = tempfile::tempdir().unwrap();
    let t = Uuid::new_v4();
    let store = open(dir.path(), 100, 0);
    // Segments: [0, 10] [20, 5] [30, 40]: the first is wholly older than 15.
    for (i, at) in [0, 10, 20, 5, 30, 40].into_iter().enumerate() {
        store.store(t, at, &payload(i as u32)).unwrap();
    }
    assert_eq!(store.drop_older_than(t, 15).unwrap(), 60);
    assert_eq!(store.pending_bytes(t), 120);
    assert_eq!(segment_files(dir.path(), ".hints").len(), 2);
    let batch = store.next_batch(t, 1 << 20).unwrap().unwrap();
    assert_eq!(batch.hints, vec![Hint { created_at_ms: 20, payload: payload(2) }]);
    assert_eq!(batch.bytes(), 60); // covers the skipped hint too
    store.ack(&batch).unwrap();
    assert_eq!(store.stats().expired_hints, 1);
    // The cutoff never moves back.
    assert_eq!(store.drop_older_than(t, 0).unwrap(), 0);
    assert_eq!(drain(&store, t, 1 << 20), vec![payload(4), payload(5)]);
    // A range of only expired hints is consumed inside next_batch.
    store.store(t, 1, b"old").unwrap();
    store.store(t, 2, b"old").unwrap();
    assert_eq!(store.next_batch(t, 1).unwrap(), None);
    assert_eq!(store.pending_bytes(t), 0);
    assert_eq!(store.stats().expired_hints, 3);
}

/// The child half of `stored_hints_survive_kill`: stores hints without ever
/// calling sync, then aborts (no destructors, no flush: like kill -9).
#[test]
fn crash_child() {
    let Some(dir) = std::env::var_os("HINTS_CRASH_CHILD_DIR") else { return };
    let store = open(Path::new(&dir), 200, 0);
    let t = Uuid::from_u128(7);
    for i in 0..50 {
        store.store(t, i64::from(i), &payload(i)).unwrap();
    }
    std::process::abort();
}

#[test]
fn stored_hints_survive_kill() {
    let dir = tempfile::tempdir().unwrap();
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
        .env("HINTS_CRASH_CHILD_DIR", dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(!status.success(), "the child was expected to abort");
    let store = open(dir.path(), 200, 0);
    assert_eq!(drain(&store, Uuid::from_u128(7), 1 << 20), (0..50).map(payload).collect::<Vec<_>>());
    assert_eq!(store.stats(), HintStats { replayed_hints: 50, ..Default::default() });
}

#[test]
fn stats_count_hints_stored_and_replayed_since_open() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), 1 << 20, 0);
    let t = Uuid::from_u128(9);
    for i in 0..5 {
        store.store(t, 1_000, &payload(i)).unwrap();
    }
    assert_eq!(store.stats(), HintStats { stored_hints: 5, ..Default::default() });
    let batch = store.next_batch(t, 1 << 20).unwrap().unwrap();
    // Acknowledging the same batch twice counts its hints once.
    store.ack(&batch).unwrap();
    store.ack(&batch).unwrap();
    assert_eq!(store.stats(), HintStats { stored_hints: 5, replayed_hints: 5, ..Default::default() });
}
