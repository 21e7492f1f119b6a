//! Tombstone compactions (`purge`): a table with `gc_grace_seconds = 0`
//! whose rows and partitions are deleted ends up with its deletion markers
//! purged and its files shrunk by the background check alone, with no
//! `compact`; live data stays; a table whose markers gc_grace keeps, or
//! whose `tombstone_compaction_interval` has not passed, is left alone.

#![allow(clippy::unwrap_used, reason = "an integration test: a failed unwrap names its line")]

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use storage::Storage;
use types::schema::TableDef;
use uuid::Uuid;

const PARTITIONS: i32 = 400;
const ROWS: i32 = 10;

fn table(gc_grace: i32, interval: Option<&str>) -> TableDef {
    let mut t = model_table("ks", "t", Uuid::new_v4(), gc_grace);
    if let Some(interval) = interval {
        t.options.compaction.insert("tombstone_compaction_interval".into(), interval.into());
    }
    t
}

/// Rows with a 200-byte value each, flushed.
fn fill(st: &Storage, id: Uuid, pks: std::ops::Range<i32>) {
    let ts = now_micros();
    for pk in pks {
        let mut m = mutation(id, pk);
        for c in 0..ROWS {
            let mut r = row(vec![int(c), text("k")]);
            r.marker = marker(ts);
            r.cells.push(live_cell(A, ts, int(c)));
            r.cells.push(live_cell(B, ts, text(&"v".repeat(200))));
            m.rows.push(r);
        }
        st.apply(&[m]).unwrap();
    }
    st.flush(None).unwrap();
}

/// Deletes every partition in `pks`: even ones whole, odd ones row by row.
/// The local deletion time is 30 s ago, so gc_grace 0 lets the markers go
/// at once (their 10-second buckets are wholly past).
fn delete(st: &Storage, id: Uuid, pks: std::ops::Range<i32>) {
    let ts = now_micros();
    let ldt = now_secs() - 30;
    for pk in pks {
        let mut m = mutation(id, pk);
        if pk % 2 == 0 {
            m.partition_deletion = Some(deletion(ts, ldt));
        } else {
            for c in 0..ROWS {
                let mut r = row(vec![int(c), text("k")]);
                r.deletion = Some(deletion(ts, ldt));
                m.rows.push(r);
            }
        }
        st.apply(&[m]).unwrap();
    }
    st.flush(None).unwrap();
}

fn stats(st: &Storage, id: Uuid) -> storage::TableCompactionStats {
    st.compaction_stats().tables.into_iter().find(|t| t.id == id).unwrap()
}

/// The node's background task: a check every 50 ms, until stopped.
fn background(st: Arc<Storage>) -> (Arc<AtomicBool>, std::thread::JoinHandle<u64>) {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let handle = std::thread::spawn(move || {
        let mut purged = 0;
        while !flag.load(Ordering::Relaxed) {
            if st.tombstone_compaction().unwrap().is_some() {
                purged += 1;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        purged
    });
    (stop, handle)
}

#[test]
fn deleted_table_shrinks_with_no_manual_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let t = table(0, Some("0"));
    let id = t.id;
    let st = Arc::new(open_small(dir.path(), &[keyspace("ks", true, vec![t])]));
    fill(&st, id, 0..PARTITIONS + 20);
    let full = st.table_size_bytes(&id);
    assert!(full > 100_000, "the table holds its rows: {full} bytes");
    // Live data is not a reason to purge.
    assert_eq!(st.tombstone_compaction().unwrap(), None);
    let (stop, handle) = background(Arc::clone(&st));
    delete(&st, id, 0..PARTITIONS);
    let deleted = stats(&st, id);
    assert!(deleted.tombstone_markers >= u64::from(PARTITIONS as u32), "{deleted:?}");

    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = stats(&st, id);
        let size = st.table_size_bytes(&id);
        // 20 partitions of 400 stay live: about 1/20 of the full size.
        if s.tombstone_compactions >= 1 && s.tombstone_markers == 0 && size < full / 10 {
            break;
        }
        assert!(Instant::now() < deadline, "not purged: {size} of {full} bytes, {s:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::Relaxed);
    assert!(handle.join().unwrap() >= 1);
    // Deleted data stays deleted, live data stays.
    let now = now_secs();
    for pk in [0, 1, PARTITIONS - 1] {
        assert!(st.read_partition(&full_read(id, pk, now)).unwrap().is_none(), "pk {pk} came back");
    }
    for pk in PARTITIONS..PARTITIONS + 20 {
        let p = st.read_partition(&full_read(id, pk, now)).unwrap().expect("a live partition");
        assert_eq!(p.rows.len(), ROWS as usize);
    }
    // Nothing more to do: the next checks purge nothing.
    assert_eq!(st.tombstone_compaction().unwrap(), None);
}

#[test]
fn markers_within_gc_grace_or_interval_are_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    // gc_grace keeps the markers for 10 days.
    let kept = table(864_000, Some("0"));
    // gc_grace 0, but the default interval (a day) has not passed since the table was made.
    let mut young = table(0, None);
    young.name = "young".into();
    let st = open_small(dir.path(), &[keyspace("ks", true, vec![kept.clone(), young.clone()])]);
    for t in [&kept, &young] {
        fill(&st, t.id, 0..PARTITIONS);
        delete(&st, t.id, 0..PARTITIONS);
    }
    for _ in 0..5 {
        assert_eq!(st.tombstone_compaction().unwrap(), None);
    }
    let k = stats(&st, kept.id);
    assert_eq!((k.droppable_tombstones, k.tombstone_compactions), (0, 0), "{k:?}");
    assert!(k.tombstone_markers >= u64::from(PARTITIONS as u32));
    let y = stats(&st, young.id);
    assert!(y.droppable_tombstones >= u64::from(PARTITIONS as u32), "{y:?}");
    assert_eq!(y.tombstone_compactions, 0);
    // What the background leaves, a major compaction purges (and it forgets what it purged).
    st.compact(Some(&young.id)).unwrap();
    assert_eq!(stats(&st, young.id).tombstone_markers, 0);
    assert!(st.table_size_bytes(&young.id) < st.table_size_bytes(&kept.id) / 10);
}

#[test]
fn marker_counts_and_the_last_purge_survive_restarts() {
    let dir = tempfile::tempdir().unwrap();
    // gc_grace 0 and the default interval (a day): the markers wait for it.
    let t = table(0, None);
    let ks = [keyspace("ks", true, vec![t.clone()])];
    let before = {
        let st = open_small(dir.path(), &ks);
        fill(&st, t.id, 0..PARTITIONS);
        delete(&st, t.id, 0..PARTITIONS);
        let s = stats(&st, t.id);
        assert!(s.tombstone_markers >= u64::from(PARTITIONS as u32), "{s:?}");
        st.shutdown().unwrap();
        s
    };
    // A second later, so an interval restarted by the open would show.
    std::thread::sleep(Duration::from_millis(1100));
    let purged = {
        let st = open_small(dir.path(), &ks);
        let s = stats(&st, t.id);
        assert_eq!(
            (s.tombstone_markers, s.droppable_tombstones, s.last_tombstone_compaction),
            (before.tombstone_markers, before.droppable_tombstones, before.last_tombstone_compaction),
            "counted before the restart, counted after it; the interval runs from the table's creation"
        );
        // Still within the interval: nothing purged in the background.
        assert_eq!(st.tombstone_compaction().unwrap(), None);
        st.compact(Some(&t.id)).unwrap();
        let s = stats(&st, t.id);
        assert_eq!(s.tombstone_markers, 0);
        assert!(s.last_tombstone_compaction > before.last_tombstone_compaction, "{s:?}");
        // No shutdown: the purge's own save is what the next open reads.
        s
    };
    let st = open_small(dir.path(), &ks);
    let s = stats(&st, t.id);
    assert_eq!((s.tombstone_markers, s.last_tombstone_compaction), (0, purged.last_tombstone_compaction));
}
