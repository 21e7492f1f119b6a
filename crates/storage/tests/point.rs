//! Tables without clustering columns are read with point lookups (a
//! partition holds at most its deletion and one row). Seeded random writes,
//! partition deletions, flushes and compactions against a last-write-wins
//! model: every read, of live data or of the raw partition, agrees with it.

#![allow(clippy::unwrap_used, reason = "an integration test: a failed unwrap names its line")]

mod common;

use std::collections::BTreeMap;

use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use storage::Storage;

#[test]
fn point_reads_agree_with_a_last_write_wins_model() {
    for seed in 0..8u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let dir = tempfile::tempdir().unwrap();
        let (storage, t) = open_kv(dir.path());
        // pk -> (latest deletion, latest write (ts, value))
        let mut model: BTreeMap<i32, (i64, Option<(i64, String)>)> = BTreeMap::new();
        for step in 0..400 {
            let pk = rng.gen_range(0..12);
            let ts = rng.gen_range(1..200);
            let entry = model.entry(pk).or_insert((i64::MIN, None));
            match rng.gen_range(0..10) {
                0..=6 => {
                    // Distinct values per timestamp keep ties out of the model.
                    let value = format!("v{ts}");
                    storage.apply(&[kv(t, pk, &value, ts)]).unwrap();
                    if entry.1.as_ref().is_none_or(|(old, _)| ts > *old) {
                        entry.1 = Some((ts, value));
                    }
                }
                7 => {
                    storage.apply(&[kv_delete(t, pk, ts)]).unwrap();
                    entry.0 = entry.0.max(ts);
                }
                8 => storage.flush(None).unwrap(),
                _ => {
                    if step % 5 == 0 {
                        storage.compact(None).unwrap();
                    }
                }
            }
            for (pk, (deleted, write)) in &model {
                let expect = write.as_ref().filter(|(ts, _)| ts > deleted).map(|(_, v)| v.clone());
                assert_eq!(kv_get(&storage, t, *pk), expect, "seed {seed} step {step} pk {pk}");
                let raw = storage.read_raw(&full_read(t, *pk, now_secs())).unwrap();
                let resolved = storage.resolve_raw(&full_read(t, *pk, now_secs()), &raw).unwrap();
                assert_eq!(
                    resolved,
                    storage.read_partition(&full_read(t, *pk, now_secs())).unwrap(),
                    "seed {seed} pk {pk}"
                );
            }
        }
    }
}

#[test]
fn a_read_counts_the_sstables_it_goes_through() {
    let dir = tempfile::tempdir().unwrap();
    // Without the row cache: writes keep a cached partition current, so its reads would go through no file.
    let mut cfg = config(dir.path(), periodic());
    cfg.row_cache_bytes = 0;
    let t = uuid::Uuid::new_v4();
    let storage = open_kv_as(&cfg, t);
    let per_read = |storage: &Storage| {
        let sample = storage.table_samples().into_iter().find(|s| s.table == "kv").unwrap();
        (sample.metrics.sstables_per_read.snapshot(), sample.live_sstables)
    };
    // Only in the memtable: no SSTable.
    storage.apply(&[kv(t, 1, "a", 1)]).unwrap();
    assert_eq!(kv_get(&storage, t, 1).as_deref(), Some("a"));
    let (h, _) = per_read(&storage);
    assert_eq!((h.count, h.max()), (1, 0));
    // Partition 1 alone in every file: a read of it goes through all of them, one of partition 2 through none.
    for (ts, v) in [(2, "b"), (3, "c")] {
        storage.flush(None).unwrap();
        storage.apply(&[kv(t, 1, v, ts)]).unwrap();
    }
    storage.flush(None).unwrap();
    assert_eq!(kv_get(&storage, t, 1).as_deref(), Some("c"));
    let (h, files) = per_read(&storage);
    assert!(files >= 1, "{files} files");
    assert_eq!((h.count, h.max()), (2, files));
    assert_eq!(kv_get(&storage, t, 2), None);
    let (h, _) = per_read(&storage);
    assert_eq!((h.count, h.min()), (3, 0));
}
