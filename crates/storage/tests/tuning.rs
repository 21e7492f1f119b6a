//! The compression check (`Storage::tune_compression`, storage `tuning`):
//! a table written with random bytes stops compressing its new files, one
//! written with text starts again, a table whose options turn compression
//! off is never switched on, and every row reads back the same whatever
//! mix of compressed and uncompressed files holds it; a small table is
//! merged whole and a large one in size tiers (`Flusher::tune_merges`);
//! held compactions (`Storage::hold_compactions`) leave runs apart.

#![allow(clippy::unwrap_used, reason = "an integration test: a failed unwrap names its line")]

mod common;

use bytes::Bytes;
use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use storage::{ColumnData, Storage};
use uuid::Uuid;

const V: u16 = 17;

fn write(storage: &Storage, table: Uuid, pk: i32, value: Bytes) {
    let ts = now_micros();
    let mut m = mutation(table, pk);
    let mut r = row(Vec::new());
    r.marker = marker(ts);
    r.cells.push(live_cell(V, ts, value));
    m.rows.push(r);
    storage.apply(&[m]).unwrap();
}

fn read(storage: &Storage, table: Uuid, pk: i32) -> Option<Vec<u8>> {
    let p = storage.read_partition(&full_read(table, pk, now_secs())).unwrap()?;
    match p.rows.first()?.column(V)? {
        ColumnData::Simple(c) => Some(c.value.clone()),
        _ => None,
    }
}

fn random_value(rng: &mut StdRng) -> Bytes {
    Bytes::from((0..200).map(|_| rng.gen::<u8>()).collect::<Vec<u8>>())
}

fn text_value(pk: i32) -> Bytes {
    Bytes::from(format!("sensor-{pk:06},temperature=21.5,humidity=40,status=ok;").repeat(4))
}

#[test]
fn random_data_turns_compression_off_and_text_turns_it_back_on() {
    let dir = tempfile::tempdir().unwrap();
    let (storage, t) = open_kv(dir.path());
    assert_eq!(storage.compressing(&t), Some(true));
    // Nothing written yet: nothing to decide.
    assert!(storage.tune_compression().is_empty());

    let mut rng = StdRng::seed_from_u64(7);
    let mut expect = Vec::new();
    for pk in 0..2000 {
        let v = random_value(&mut rng);
        write(&storage, t, pk, v.clone());
        expect.push(v);
    }
    assert_eq!(storage.tune_compression(), vec![(t, false)]);
    assert_eq!(storage.compressing(&t), Some(false));
    // Deciding again changes nothing.
    assert!(storage.tune_compression().is_empty());
    storage.flush(None).unwrap();

    // Text overwrites every row: compression comes back for new files.
    for pk in 0..2000 {
        write(&storage, t, pk, text_value(pk));
    }
    assert_eq!(storage.tune_compression(), vec![(t, true)]);
    storage.flush(None).unwrap();
    for pk in 2000..2100 {
        let v = random_value(&mut rng);
        write(&storage, t, pk, v.clone());
        expect.push(v);
    }
    // Rows in uncompressed and compressed files and in the memtable, before
    // and after they are merged into one compressed file.
    for round in 0..2 {
        for pk in 0..2000 {
            assert_eq!(read(&storage, t, pk).as_deref(), Some(&text_value(pk)[..]), "round {round} pk {pk}");
        }
        for pk in 2000..2100 {
            assert_eq!(read(&storage, t, pk).as_deref(), Some(&expect[pk as usize][..]), "round {round} pk {pk}");
        }
        storage.compact(None).unwrap();
    }
}

#[test]
fn a_table_without_compression_stays_without_and_alter_changes_it_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (storage, _) = open(&config(dir.path(), periodic()));
    let t = Uuid::new_v4();
    let mut table = kv_table("ks", "kv", t);
    table.options.compression.clear();
    table.options.compression.insert("enabled".into(), "false".into());
    storage.set_schema(&[keyspace("ks", true, vec![table.clone()])]).unwrap();
    assert_eq!(storage.compressing(&t), Some(false));
    for pk in 0..2000 {
        write(&storage, t, pk, text_value(pk));
    }
    // Compressible, but the table asks for none.
    assert!(storage.tune_compression().is_empty());
    assert_eq!(storage.compressing(&t), Some(false));

    // ALTER TABLE ... WITH compression = {'class': 'LZ4Compressor'} and new
    // size-tiered thresholds: applied to the open table.
    table.options.compression.clear();
    table.options.compression.insert("class".into(), "org.apache.cassandra.io.compress.LZ4Compressor".into());
    table.options.compaction.insert("min_threshold".into(), "6".into());
    storage.set_schema(&[keyspace("ks", true, vec![table.clone()])]).unwrap();
    assert_eq!(storage.compressing(&t), Some(true));
    storage.flush(None).unwrap();
    for pk in 0..2000 {
        assert_eq!(read(&storage, t, pk).as_deref(), Some(&text_value(pk)[..]));
    }

    // Reopened, the table keeps its options.
    drop(storage);
    let (storage, _) = open(&config(dir.path(), periodic()));
    assert_eq!(storage.compressing(&t), Some(true));
    for pk in (0..2000).step_by(97) {
        assert_eq!(read(&storage, t, pk).as_deref(), Some(&text_value(pk)[..]));
    }
}

/// Rows `from..to`, about 230 bytes each, then a flush: one new sorted run.
fn flush_rows(storage: &Storage, t: Uuid, from: i32, to: i32) {
    for pk in from..to {
        write(storage, t, pk, text_value(pk));
    }
    storage.flush(Some(&t)).unwrap();
}

/// Waits (up to 30 s) until the table has at most `runs` sorted runs; returns how many it has.
fn wait_for_runs(storage: &Storage, t: Uuid, runs: u64) -> u64 {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let now = storage.sorted_runs(&t);
        if now <= runs || std::time::Instant::now() > deadline {
            return now;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn a_small_table_is_merged_whole_and_a_large_one_in_tiers() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), periodic());
    let (storage, _) = open(&cfg);
    let t = Uuid::new_v4();
    storage.set_schema(&[keyspace("ks", true, vec![kv_table("ks", "kv", t)])]).unwrap();
    // A new table opens tiered; its first flush shows it is small.
    assert_eq!(storage.merged_whole(&t), Some(false));

    // One big run and three small ones. Tiered, size amplification would be
    // under 200% and three small runs are fewer than min_threshold (4), so
    // they would stay apart; merged whole, the four become one.
    flush_rows(&storage, t, 0, 8000);
    assert_eq!(storage.merged_whole(&t), Some(true));
    flush_rows(&storage, t, 8000, 8100);
    flush_rows(&storage, t, 8100, 8200);
    flush_rows(&storage, t, 8200, 8300);
    assert_eq!(wait_for_runs(&storage, t, 1), 1, "a table merged whole ends as one sorted run");
    for pk in (0..8300).step_by(97) {
        assert_eq!(read(&storage, t, pk).as_deref(), Some(&text_value(pk)[..]), "pk {pk}");
    }

    // Past 12 memtables (4 MiB each here) of live data a table is tiered
    // (this one uncompressed, so its size on disk is its live size).
    let big = Uuid::new_v4();
    let mut big_table = kv_table("ks", "big", big);
    big_table.options.compression.insert("enabled".into(), "false".into());
    storage.set_schema(&[keyspace("ks", true, vec![kv_table("ks", "kv", t), big_table.clone()])]).unwrap();
    let memtable = cfg.memtable_bytes as u64;
    let mut pk = 0;
    while storage.table_size_bytes(&big) <= 13 * memtable {
        flush_rows(&storage, big, pk, pk + 20_000);
        pk += 20_000;
        assert!(pk < 1_000_000, "the table never grew past 13 memtables");
    }
    storage.compact(Some(&big)).unwrap();
    flush_rows(&storage, big, pk, pk + 10);
    assert_eq!(storage.merged_whole(&big), Some(false));
    assert_eq!(storage.merged_whole(&t), Some(true), "the small table is still merged whole");
    for k in (0..pk + 10).step_by(997) {
        assert_eq!(read(&storage, big, k).as_deref(), Some(&text_value(k)[..]), "pk {k}");
    }

    // ALTER TABLE keeps the mode it found.
    let mut table = kv_table("ks", "kv", t);
    table.options.compaction.insert("min_threshold".into(), "6".into());
    big_table.options.compaction.insert("min_threshold".into(), "6".into());
    storage.set_schema(&[keyspace("ks", true, vec![table, big_table])]).unwrap();
    assert_eq!(storage.merged_whole(&t), Some(true));
    assert_eq!(storage.merged_whole(&big), Some(false));
}

/// A decommissioning node holds compactions (`Storage::hold_compactions`):
/// a table merged whole keeps every run its flushes make, and flushes do not
/// wait for a merge; released, the runs merge again.
#[test]
fn held_compactions_leave_runs_apart_until_released() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), periodic());
    let (storage, _) = open(&cfg);
    let t = Uuid::new_v4();
    storage.set_schema(&[keyspace("ks", true, vec![kv_table("ks", "kv", t)])]).unwrap();
    flush_rows(&storage, t, 0, 2000);
    assert_eq!(wait_for_runs(&storage, t, 1), 1);
    storage.hold_compactions(true);
    for i in 1..=4 {
        flush_rows(&storage, t, 2000 * i, 2000 * i + 100);
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(storage.sorted_runs(&t), 5, "held: no merge of the new runs");
    storage.hold_compactions(false);
    flush_rows(&storage, t, 20_000, 20_010);
    let left = wait_for_runs(&storage, t, 2);
    assert!(left <= 2, "released: the 6 runs merge ({left} left)");
    for pk in (0..2000).step_by(97).chain(2000..2100) {
        assert_eq!(read(&storage, t, pk).as_deref(), Some(&text_value(pk)[..]), "pk {pk}");
    }
}

#[test]
fn compaction_stats_list_each_table_and_settle_to_idle() {
    let dir = tempfile::tempdir().unwrap();
    let (storage, t) = open_kv(dir.path());
    let stats = storage.compaction_stats();
    let table = stats.tables.iter().find(|s| s.id == t).expect("the table is listed");
    assert_eq!((table.keyspace.as_str(), table.table.as_str()), ("ks", "kv"));
    for round in 0..6 {
        flush_rows(&storage, t, round * 500, round * 500 + 500);
    }
    // Flushed: no memtable is left frozen; whatever compaction the runs
    // started ends, and the node is idle.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut stats = storage.compaction_stats();
    while !stats.idle() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
        stats = storage.compaction_stats();
    }
    assert!(stats.idle(), "{stats:?}");
    assert_eq!(stats.pending_tasks(), 0);
    assert!(stats.tables.iter().all(|s| s.frozen_memtables == 0 && s.frozen_bytes == 0));

    // pending_tasks counts each kind of work owed; any of it is not idle.
    let mut owed = stats.clone();
    if let Some(s) = owed.tables.first_mut() {
        s.compaction_pending = true;
        s.frozen_memtables = 2;
    }
    assert_eq!(owed.pending_tasks(), 3);
    assert!(!owed.idle());
    let mut running = stats.clone();
    running.running_compactions = 1;
    assert_eq!(running.pending_tasks(), 0);
    assert!(!running.idle());
}
