//! The row cache (`row_cache`) seen from outside: a read served by it is
//! the read the memtables and files would answer, after every way stored
//! data changes (writes, deletions, TTL expiry, TRUNCATE, streamed files
//! ingested, cleanup, flushes and compactions), and under writers and
//! readers racing on the same partitions.

#![allow(clippy::unwrap_used, reason = "an integration test: a failed unwrap names its line")]

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use storage::{RowCacheStats, Storage};
use types::mutation::Mutation;
use uuid::Uuid;

fn put_ttl(table: Uuid, pk: i32, value: &str, ts: i64, ttl: i32, expiry: i32) -> Mutation {
    let mut m = mutation(table, pk);
    let mut r = row(Vec::new());
    r.cells.push(expiring_cell(17, ts, ttl, expiry, text(value)));
    m.rows.push(r);
    m
}

fn stats(storage: &Storage) -> RowCacheStats {
    storage.node_samples().row_cache
}

#[test]
fn cached_partitions_follow_writes_deletions_ttls_and_truncate() {
    let dir = tempfile::tempdir().unwrap();
    let (storage, t) = open_kv(dir.path());
    storage.apply(&[kv(t, 1, "a", 1)]).unwrap();
    assert_eq!(kv_get(&storage, t, 1).as_deref(), Some("a"));
    let s = stats(&storage);
    assert_eq!((s.entries, s.hits, s.requests), (1, 0, 1), "a miss fills");
    assert_eq!(kv_get(&storage, t, 1).as_deref(), Some("a"));
    assert_eq!(stats(&storage).hits, 1, "the second read hits");
    // A miss of an absent partition is cached as empty too.
    assert_eq!(kv_get(&storage, t, 9), None);
    assert_eq!(kv_get(&storage, t, 9), None);
    assert_eq!(stats(&storage).hits, 2);

    // A newer write, an older one (loses by its timestamp), a deletion, a write after it.
    storage.apply(&[kv(t, 1, "b", 5)]).unwrap();
    assert_eq!(kv_get(&storage, t, 1).as_deref(), Some("b"));
    storage.apply(&[kv(t, 1, "old", 2)]).unwrap();
    assert_eq!(kv_get(&storage, t, 1).as_deref(), Some("b"));
    storage.apply(&[kv_delete(t, 1, 6)]).unwrap();
    assert_eq!(kv_get(&storage, t, 1), None);
    storage.apply(&[kv(t, 1, "c", 7)]).unwrap();
    assert_eq!(kv_get(&storage, t, 1).as_deref(), Some("c"));
    storage.apply(&[kv(t, 9, "z", 1)]).unwrap();
    assert_eq!(kv_get(&storage, t, 9).as_deref(), Some("z"), "a cached empty partition is invalidated by a write");

    // Flushes and compactions do not change what a cached partition reads as.
    assert_eq!(kv_get(&storage, t, 1).as_deref(), Some("c"));
    storage.flush(None).unwrap();
    storage.compact(None).unwrap();
    let hits = stats(&storage).hits;
    assert_eq!(kv_get(&storage, t, 1).as_deref(), Some("c"));
    assert_eq!(stats(&storage).hits, hits + 1, "still cached after a flush and a compaction");

    // A TTL expires at the read's own `now`, cached or not.
    let now = now_secs();
    storage.apply(&[put_ttl(t, 2, "brief", 1, 100, now + 100)]).unwrap();
    assert_eq!(kv_get_at(&storage, t, 2, now).as_deref(), Some("brief"));
    assert_eq!(kv_get_at(&storage, t, 2, now).as_deref(), Some("brief"));
    assert_eq!(kv_get_at(&storage, t, 2, now + 101), None, "expired while cached");

    // The raw read (digests, read repair) from the cache equals the stored one.
    let cached = storage.read_raw(&full_read(t, 1, now)).unwrap();
    assert_eq!(storage.resolve_raw(&full_read(t, 1, now), &cached).unwrap().map(|p| p.rows.len()), Some(1));

    storage.truncate(&t).unwrap();
    assert_eq!(kv_get(&storage, t, 1), None, "TRUNCATE empties the cache of its table");
    assert_eq!(kv_get(&storage, t, 9), None);
    storage.apply(&[kv(t, 1, "after", 8)]).unwrap();
    assert_eq!(kv_get(&storage, t, 1).as_deref(), Some("after"));
}

/// Writes bring a cached partition up to date instead of forgetting it: the
/// same seeded writes (overwrites with older and newer timestamps, TTLs,
/// partition deletions, several rows in one batch) and flushes go to a node
/// with the cache and to one without; after each step every partition's raw
/// entries are byte for byte the cache-less node's, and a read right after
/// a write is a hit. Then both compact: compaction drops shadowed cells from
/// the files but not from the cache, so from there the two agree on what the
/// entries resolve to (what reads return), not on their bytes.
#[test]
fn writes_keep_cached_partitions_current_byte_for_byte() {
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let t = Uuid::new_v4();
    let open_with = |dir: &std::path::Path, row_cache_bytes: usize| {
        let mut cfg = config(dir, periodic());
        cfg.row_cache_bytes = row_cache_bytes;
        open_kv_as(&cfg, t)
    };
    let (cached, plain) = (open_with(dirs[0].path(), 8 << 20), open_with(dirs[1].path(), 0));
    let now = now_secs();
    let mut rng = StdRng::seed_from_u64(20261202);
    for pk in 0..8 {
        assert_eq!(kv_get(&cached, t, pk), None, "every partition read once: cached (empty)");
    }
    for step in 0..400 {
        let pk = rng.gen_range(0..8);
        let ts = rng.gen_range(1..200);
        let batch: Vec<Mutation> = match rng.gen_range(0..10) {
            0 => vec![kv_delete(t, pk, ts)],
            1 => vec![put_ttl(t, pk, &format!("ttl{step}"), ts, 50, now + 50)],
            2 => vec![kv(t, pk, &format!("a{step}"), ts), kv(t, (pk + 1) % 8, &format!("b{step}"), ts)],
            3 if step % 7 == 0 => {
                cached.flush(None).unwrap();
                plain.flush(None).unwrap();
                continue;
            }
            _ => vec![kv(t, pk, &format!("v{step}"), ts)],
        };
        cached.apply(&batch).unwrap();
        plain.apply(&batch).unwrap();
        let hits = stats(&cached).hits;
        assert_eq!(kv_get(&cached, t, pk), kv_get(&plain, t, pk), "step {step} pk {pk}");
        assert_eq!(stats(&cached).hits, hits + 1, "step {step}: the partition written is still cached");
        for pk in 0..8 {
            let read = full_read(t, pk, now);
            assert_eq!(cached.read_raw(&read).unwrap(), plain.read_raw(&read).unwrap(), "step {step} pk {pk}");
        }
    }
    cached.compact(None).unwrap();
    plain.compact(None).unwrap();
    for pk in 0..8 {
        let read = full_read(t, pk, now);
        let resolved = |s: &Storage| s.resolve_raw(&read, &s.read_raw(&read).unwrap()).unwrap();
        assert_eq!(resolved(&cached), resolved(&plain), "after compaction, pk {pk}");
        assert_eq!(cached.read_partition(&read).unwrap(), plain.read_partition(&read).unwrap(), "pk {pk}");
    }
}

/// A write merges into a cached partition read since its last write, and
/// forgets one that was not: a partition written twice in a row costs its
/// second write no merge, and is read from storage next.
#[test]
fn a_partition_written_twice_without_a_read_between_is_forgotten() {
    let dir = tempfile::tempdir().unwrap();
    let (storage, t) = open_kv(dir.path());
    storage.apply(&[kv(t, 1, "a", 1)]).unwrap();
    assert_eq!(kv_get(&storage, t, 1).as_deref(), Some("a"));
    storage.apply(&[kv(t, 1, "b", 2)]).unwrap();
    assert_eq!(stats(&storage).entries, 1, "kept, brought up to the write");
    let hits = stats(&storage).hits;
    assert_eq!(kv_get(&storage, t, 1).as_deref(), Some("b"));
    assert_eq!(stats(&storage).hits, hits + 1, "a hit after the write");
    storage.apply(&[kv(t, 1, "c", 3)]).unwrap();
    storage.apply(&[kv(t, 1, "d", 4)]).unwrap();
    assert_eq!(stats(&storage).entries, 0, "the second write in a row forgets it");
    let hits = stats(&storage).hits;
    assert_eq!(kv_get(&storage, t, 1).as_deref(), Some("d"));
    assert_eq!(stats(&storage).hits, hits, "read from storage, and cached again");
    assert_eq!(stats(&storage).entries, 1);
}

#[test]
fn streamed_files_and_cleanup_invalidate_the_table() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let t = Uuid::new_v4();
    let ks = [keyspace("ks", true, vec![kv_table("ks", "kv", t)])];
    let (a, _) = open(&config(dirs[0].path(), periodic()));
    let (b, _) = open(&config(dirs[1].path(), periodic()));
    a.set_schema(&ks).unwrap();
    b.set_schema(&ks).unwrap();
    for pk in 0..50 {
        a.apply(&[kv(t, pk, &format!("a{pk}"), 10)]).unwrap();
    }
    b.apply(&[kv(t, 1, "b-old", 1)]).unwrap();
    // B caches its own state of every partition: empty, or its older value of 1.
    for pk in 0..50 {
        assert_eq!(kv_get(&b, t, pk), (pk == 1).then(|| "b-old".to_string()));
    }
    assert_eq!(stats(&b).entries, 50);
    let files = a.export_ranges(&t, &[(5, 5)], &dirs[2].path().join("spool"), 1 << 20).unwrap();
    b.ingest_streamed(&t, &files).unwrap();
    for pk in 0..50 {
        assert_eq!(kv_get(&b, t, pk), Some(format!("a{pk}")), "pk {pk}: the ingested files are read, not the cache");
    }

    // Cleanup keeping no range: every partition goes, cached or not.
    let keep: Vec<(i64, i64)> = Vec::new();
    b.cleanup(&t, &keep).unwrap();
    for pk in 0..50 {
        assert_eq!(kv_get(&b, t, pk), None, "pk {pk} after cleanup");
    }
}

#[test]
fn a_table_with_caching_disabled_or_a_cache_of_zero_bytes_keeps_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (storage, _) = open(&config(dir.path(), periodic()));
    let (on, off) = (Uuid::new_v4(), Uuid::new_v4());
    let mut off_def = kv_table("ks", "off", off);
    off_def.options.caching.insert("enabled".into(), "false".into());
    storage.set_schema(&[keyspace("ks", true, vec![kv_table("ks", "on", on), off_def.clone()])]).unwrap();
    for t in [on, off] {
        storage.apply(&[kv(t, 1, "v", 1)]).unwrap();
        assert_eq!(kv_get(&storage, t, 1).as_deref(), Some("v"));
        assert_eq!(kv_get(&storage, t, 1).as_deref(), Some("v"));
    }
    let s = stats(&storage);
    assert_eq!((s.entries, s.hits, s.requests), (1, 1, 2), "only the table with caching on: {s:?}");
    assert!(s.size_bytes > 0 && s.capacity_bytes == 8 << 20, "{s:?}");

    // Turned on by ALTER: writes made while it was off were still seen.
    off_def.options.caching.insert("enabled".into(), "true".into());
    storage.set_schema(&[keyspace("ks", true, vec![kv_table("ks", "on", on), off_def])]).unwrap();
    assert_eq!(kv_get(&storage, off, 1).as_deref(), Some("v"));
    storage.apply(&[kv(off, 1, "w", 2)]).unwrap();
    assert_eq!(kv_get(&storage, off, 1).as_deref(), Some("w"));

    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path(), periodic());
    cfg.row_cache_bytes = 0;
    let (storage, _) = open(&cfg);
    storage.set_schema(&[keyspace("ks", true, vec![kv_table("ks", "on", on)])]).unwrap();
    storage.apply(&[kv(on, 1, "v", 1)]).unwrap();
    assert_eq!(kv_get(&storage, on, 1).as_deref(), Some("v"));
    assert_eq!(stats(&storage), RowCacheStats::default());
}

/// One writer gives a few partitions ever newer values (each value is its
/// timestamp) with flushes between, three readers read them: no read may
/// return a value older than one whose write returned before the read began.
#[test]
fn racing_readers_never_see_a_value_older_than_a_completed_write() {
    const KEYS: i32 = 4;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path(), periodic());
    cfg.memtable_bytes = 32 << 10;
    let (storage, _) = open(&cfg);
    let t = Uuid::new_v4();
    storage.set_schema(&[keyspace("ks", true, vec![kv_table("ks", "kv", t)])]).unwrap();
    let storage = Arc::new(storage);
    let completed: Arc<Vec<AtomicU64>> = Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
    let writer = {
        let (storage, completed) = (Arc::clone(&storage), Arc::clone(&completed));
        std::thread::spawn(move || {
            let mut rng = StdRng::seed_from_u64(1);
            for ts in 1..=30_000u64 {
                let pk = rng.gen_range(0..KEYS);
                storage.apply(&[kv(t, pk, &ts.to_string(), ts as i64)]).unwrap();
                completed[pk as usize].fetch_max(ts, Ordering::SeqCst);
                if ts % 7500 == 0 {
                    storage.flush(None).unwrap();
                }
            }
        })
    };
    let readers: Vec<_> = (0..3u64)
        .map(|seed| {
            let (storage, completed) = (Arc::clone(&storage), Arc::clone(&completed));
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(100 + seed);
                let mut last: BTreeMap<i32, u64> = BTreeMap::new();
                for _ in 0..60_000 {
                    let pk = rng.gen_range(0..KEYS);
                    let floor = completed[pk as usize].load(Ordering::SeqCst);
                    let seen = kv_get(&storage, t, pk).map_or(0, |v| v.parse::<u64>().unwrap());
                    assert!(seen >= floor, "pk {pk}: read {seen} after the write of {floor} returned");
                    let before = last.insert(pk, seen).unwrap_or(0);
                    assert!(seen >= before, "pk {pk}: read {seen} after reading {before}");
                }
            })
        })
        .collect();
    writer.join().unwrap();
    for r in readers {
        r.join().unwrap();
    }
    let s = stats(&storage);
    assert!(s.hits > 0 && s.requests > s.hits, "both hits and misses happened: {s:?}");
}
