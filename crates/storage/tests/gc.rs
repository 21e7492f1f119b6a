//! Tombstone and TTL garbage collection with `gc_grace_seconds = 0`: after a
//! flush and a major compaction, deleted and expired data is gone from the
//! RocksDB files (checked by reading them raw), live data stays, and purging
//! never changes what a read returns (no resurrection of shadowed data); and
//! nothing deleted after the table's repaired horizon goes.

#![allow(clippy::unwrap_used, reason = "an integration test: a failed unwrap names its line")]

mod common;

use std::path::Path;

use common::*;
use storage::cell::{CellRef, KIND_EXPIRING, KIND_LIVE, KIND_TOMBSTONE};
use storage::keys::{self, ColumnPart, Layout};
use storage::packed;
use storage::{Partition, Storage, StorageConfig};
use types::mutation::{ClusteringBound, Mutation, RangeTombstone};
use types::schema::TableDef;
use uuid::Uuid;

struct Env {
    dir: tempfile::TempDir,
    cfg: StorageConfig,
    table: TableDef,
    storage: Option<Storage>,
}

impl Env {
    fn new(gc_grace: i32) -> Env {
        Env::with_table(model_table("ks", "t", Uuid::new_v4(), gc_grace))
    }
    fn with_table(table: TableDef) -> Env {
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(dir.path(), periodic());
        let (storage, _) = open(&cfg);
        storage.set_schema(&[keyspace("ks", true, vec![table.clone()])]).unwrap();
        Env { dir, cfg, table, storage: Some(storage) }
    }
    fn st(&self) -> &Storage {
        self.storage.as_ref().unwrap()
    }
    fn id(&self) -> Uuid {
        self.table.id
    }
    fn apply(&self, m: Mutation) {
        self.st().apply(&[m]).unwrap();
    }
    fn read(&self, pk: i32) -> Option<Partition> {
        self.st().read_partition(&full_read(self.id(), pk, now_secs())).unwrap()
    }
    fn flush(&self) {
        self.st().flush(None).unwrap();
    }
    fn compact(&self) {
        self.st().compact(None).unwrap();
    }
    /// Closes the storage, lists what the files hold, and reopens.
    fn raw(&mut self) -> Vec<String> {
        let s = self.storage.take().unwrap();
        s.shutdown().unwrap();
        drop(s);
        let out = describe_raw(self.dir.path(), &self.table);
        let (s, _) = open(&self.cfg);
        self.storage = Some(s);
        out
    }
    fn table_size(&self) -> u64 {
        self.st().table_size_bytes(&self.id())
    }
}

/// One line per raw entry: `pk=.. <what> [clustering] col=.. <kind> ts=..`.
fn describe_raw(dir: &Path, table: &TableDef) -> Vec<String> {
    let layout = Layout::of(table);
    let mut out = Vec::new();
    for (_cf, entries) in raw_entries(dir) {
        for (k, v) in entries {
            let (_, pk, rest) = keys::split_partition(&k).expect("partition prefix");
            let pk = i32::from_be_bytes(pk.try_into().unwrap());
            let (section, body) = rest.split_first().unwrap();
            // (what, cell): rows are packed, one entry per column part.
            let cells: Vec<(String, Vec<u8>)> = match *section {
                keys::SECTION_PARTITION_DELETION => vec![("partition-deletion".to_string(), v.clone())],
                keys::SECTION_RANGE_TOMBSTONE => vec![("range-tombstone".to_string(), v.clone())],
                keys::SECTION_STATIC => packed::entries(&v)
                    .map(|(col, cell)| (format!("static {}", column(keys::parse_column_part(col))), cell.to_vec()))
                    .collect(),
                _ => {
                    let n = keys::clustering_len(&layout, body).unwrap();
                    assert_eq!(n, body.len(), "a row key holds the clustering only");
                    let ck = keys::decode_clustering(&layout, body).unwrap();
                    let c1 = i32::from_be_bytes(ck[0].as_slice().try_into().unwrap());
                    let c2 = String::from_utf8_lossy(&ck[1]).to_string();
                    packed::entries(&v)
                        .map(|(col, cell)| {
                            (format!("row ({c1},{c2:?}) {}", column(keys::parse_column_part(col))), cell.to_vec())
                        })
                        .collect()
                }
            };
            for (what, cell) in cells {
                let cell = CellRef::decode(&cell).expect("cell");
                let kind = match cell.kind {
                    KIND_LIVE => "live",
                    KIND_EXPIRING => "expiring",
                    KIND_TOMBSTONE => "tombstone",
                    _ => "?",
                };
                out.push(format!("pk={pk} {what} {kind} ts={}", cell.timestamp));
            }
        }
    }
    out
}

fn column(part: Option<ColumnPart<'_>>) -> String {
    match part {
        Some(ColumnPart::Simple(keys::COLUMN_ROW_DELETION)) => "row-deletion".into(),
        Some(ColumnPart::Simple(keys::COLUMN_ROW_MARKER)) => "marker".into(),
        Some(ColumnPart::Simple(c)) => format!("col={c}"),
        Some(ColumnPart::ComplexDeletion(c)) => format!("col={c} complex-deletion"),
        Some(ColumnPart::Element(c, p)) => format!("col={c} element {p:02x?}"),
        None => "?".into(),
    }
}

fn ck(c1: i32, c2: &str) -> Vec<bytes::Bytes> {
    vec![int(c1), text(c2)]
}

/// A row with a marker and both simple columns, at `ts`.
fn insert(table: Uuid, pk: i32, c1: i32, c2: &str, ts: i64) -> Mutation {
    let mut m = mutation(table, pk);
    let mut r = row(ck(c1, c2));
    r.marker = marker(ts);
    r.cells.push(live_cell(A, ts, int(c1)));
    r.cells.push(live_cell(B, ts, text("value")));
    m.rows.push(r);
    m
}

fn rows_of(p: &Option<Partition>) -> Vec<Vec<Vec<u8>>> {
    p.as_ref().map(|p| p.rows.iter().map(|r| r.clustering.clone()).collect()).unwrap_or_default()
}

/// Deletion times safely in the past, so `gc_grace_seconds = 0` makes them purgeable.
fn past() -> i32 {
    now_secs() - 60
}

fn assert_no_line(raw: &[String], needle: &str, what: &str) {
    let hits: Vec<&String> = raw.iter().filter(|l| l.contains(needle)).collect();
    assert!(
        hits.is_empty(),
        "{what}: still in storage after flush + major compaction(s): {hits:#?}\nall entries: {raw:#?}"
    );
}

fn assert_line(raw: &[String], needle: &str, what: &str) {
    assert!(raw.iter().any(|l| l.contains(needle)), "{what}: missing from storage: {raw:#?}");
}

fn deleted_row_is_purged_and_live_rows_stay_after(compactions: usize) {
    purge_deleted_row_scenario(Env::new(0), compactions);
}

fn purge_deleted_row_scenario(mut env: Env, compactions: usize) {
    let t = env.id();
    env.apply(insert(t, 1, 1, "a", 10));
    env.apply(insert(t, 1, 2, "b", 10));
    env.flush();
    let mut m = mutation(t, 1);
    let mut r = row(ck(1, "a"));
    r.deletion = Some(deletion(20, past()));
    m.rows.push(r);
    env.apply(m);
    env.flush();
    for _ in 0..compactions {
        env.compact();
    }
    assert_eq!(rows_of(&env.read(1)), vec![ck(2, "b").iter().map(|b| b.to_vec()).collect::<Vec<_>>()]);
    let raw = env.raw();
    assert_no_line(&raw, "row (1,\"a\")", "deleted row (its cells and its deletion)");
    assert_line(&raw, "row (2,\"b\") marker", "live row");
    assert_eq!(raw.len(), 3, "only the live row's marker and two cells remain: {raw:#?}");
    assert_eq!(rows_of(&env.read(1)).len(), 1);
}

fn deleted_cell_is_purged_after(compactions: usize) {
    let mut env = Env::new(0);
    let t = env.id();
    env.apply(insert(t, 1, 1, "a", 10));
    env.flush();
    let mut m = mutation(t, 1);
    let mut r = row(ck(1, "a"));
    r.cells.push(cell_tombstone(B, 20, past()));
    m.rows.push(r);
    env.apply(m);
    env.flush();
    for _ in 0..compactions {
        env.compact();
    }
    let raw = env.raw();
    assert_no_line(&raw, "col=21", "deleted cell");
    assert_line(&raw, "col=20 live", "live cell");
    assert_line(&raw, "marker live", "row marker");
    let p = env.read(1).expect("row stays");
    assert!(p.rows[0].column(B).is_none() && p.rows[0].column(A).is_some());
}

fn expired_ttl_cell_is_purged_after(compactions: usize) {
    let mut env = Env::new(0);
    let t = env.id();
    env.apply(insert(t, 1, 1, "a", 10));
    // Written with a TTL that has already run out.
    let mut m = mutation(t, 1);
    let mut r = row(ck(1, "a"));
    r.cells.push(expiring_cell(B, 20, 1, past(), text("short-lived")));
    m.rows.push(r);
    // And a whole row that only lives through its TTL.
    let mut r = row(ck(3, "c"));
    r.marker = Some(types::mutation::Liveness { timestamp: 20, ttl: 1, local_expiration: past() });
    r.cells.push(expiring_cell(A, 20, 1, past(), int(3)));
    m.rows.push(r);
    env.apply(m);
    env.flush();
    for _ in 0..compactions {
        env.compact();
    }
    let p = env.read(1).expect("row 1 stays");
    assert_eq!(p.rows.len(), 1);
    assert!(p.rows[0].column(B).is_none());
    let raw = env.raw();
    assert_no_line(&raw, "col=21", "expired cell");
    assert_no_line(&raw, "row (3,", "expired row");
    assert_line(&raw, "row (1,\"a\") col=20 live", "live cell");
}

fn range_partition_and_collection_deletions_are_purged_after(compactions: usize) {
    let mut env = Env::new(0);
    let t = env.id();
    for c1 in 0..6 {
        env.apply(insert(t, 1, c1, "x", 10));
        env.apply(insert(t, 2, c1, "x", 10));
    }
    // A collection in a surviving row, with one removed element and an older overwritten generation.
    let mut m = mutation(t, 1);
    let mut r = row(ck(5, "x"));
    for e in 0..4 {
        r.cells.push(types::mutation::CellWrite { path: Some(int(e)), ..live_cell(SET, 10, bytes::Bytes::new()) });
    }
    m.rows.push(r);
    env.apply(m);
    env.flush();
    let mut m = mutation(t, 1);
    m.range_tombstones.push(RangeTombstone {
        start: ClusteringBound { prefix: vec![int(1)], inclusive: true },
        end: ClusteringBound { prefix: vec![int(3)], inclusive: false },
        deletion: deletion(20, past()),
    });
    let mut r = row(ck(5, "x"));
    r.cells.push(types::mutation::CellWrite { path: Some(int(1)), ..cell_tombstone(SET, 20, past()) });
    m.rows.push(r);
    let mut r = row(ck(4, "x"));
    r.complex_deletions.push((SET, deletion(19, past())));
    r.cells.push(types::mutation::CellWrite { path: Some(int(9)), ..live_cell(SET, 20, bytes::Bytes::new()) });
    m.rows.push(r);
    env.apply(m);
    let mut m = mutation(t, 2);
    m.partition_deletion = Some(deletion(20, past()));
    env.apply(m);
    env.flush();
    let before = env.table_size();
    for _ in 0..compactions {
        env.compact();
    }
    let after = env.table_size();

    let p = env.read(1).expect("partition 1");
    let c1s: Vec<i32> =
        p.rows.iter().map(|r| i32::from_be_bytes(r.clustering[0].as_slice().try_into().unwrap())).collect();
    assert_eq!(c1s, vec![0, 3, 4, 5]);
    assert!(env.read(2).is_none());
    let raw = env.raw();
    assert_no_line(&raw, "pk=2", "deleted partition");
    assert_no_line(&raw, "range-tombstone", "range tombstone");
    assert_no_line(&raw, "row (1,", "range-deleted row");
    assert_no_line(&raw, "row (2,", "range-deleted row");
    assert_no_line(&raw, "tombstone", "tombstones");
    assert_no_line(&raw, "complex-deletion", "collection deletion");
    assert_line(&raw, "row (5,\"x\") col=22 element", "live collection elements");
    assert!(after < before, "table size should go down: {before} -> {after}");
}

#[test]
fn deleted_row_is_purged_and_live_rows_stay() {
    deleted_row_is_purged_and_live_rows_stay_after(1);
}

/// Characterizes today's behaviour: what one major compaction leaves behind, a second one purges.
#[test]
fn deleted_row_is_purged_and_live_rows_stay_after_two_major_compactions() {
    deleted_row_is_purged_and_live_rows_stay_after(2);
}

#[test]
fn deleted_cell_is_purged() {
    deleted_cell_is_purged_after(1);
}

/// Characterizes today's behaviour: what one major compaction leaves behind, a second one purges.
#[test]
fn deleted_cell_is_purged_after_two_major_compactions() {
    deleted_cell_is_purged_after(2);
}

#[test]
fn expired_ttl_cell_is_purged() {
    expired_ttl_cell_is_purged_after(1);
}

/// Characterizes today's behaviour: what one major compaction leaves behind, a second one purges.
#[test]
fn expired_ttl_cell_is_purged_after_two_major_compactions() {
    expired_ttl_cell_is_purged_after(2);
}

#[test]
fn range_partition_and_collection_deletions_are_purged() {
    range_partition_and_collection_deletions_are_purged_after(1);
}

/// Characterizes today's behaviour: what one major compaction leaves behind, a second one purges.
#[test]
fn range_partition_and_collection_deletions_are_purged_after_two_major_compactions() {
    range_partition_and_collection_deletions_are_purged_after(2);
}

/// Reads of every partition, before and after a major compaction, must agree.
fn compaction_keeps_reads(env: &Env, pks: &[i32], what: &str) {
    let before: Vec<Option<Partition>> = pks.iter().map(|&pk| env.read(pk)).collect();
    env.compact();
    let after: Vec<Option<Partition>> = pks.iter().map(|&pk| env.read(pk)).collect();
    assert_eq!(before, after, "{what}: a major compaction changed what reads return");
}

#[test]
fn purging_a_row_deletion_does_not_resurrect_older_cells() {
    let t = Uuid::new_v4();
    let mut d = mutation(t, 1);
    let mut r = row(ck(1, "a"));
    r.deletion = Some(deletion(100, past()));
    d.rows.push(r);
    shadowed_write_after_compacted_deletion(t, d, insert(t, 1, 1, "a", 50), "row deletion");
}

#[test]
fn purging_a_partition_deletion_does_not_resurrect_older_rows() {
    let t = Uuid::new_v4();
    let mut d = mutation(t, 1);
    d.partition_deletion = Some(deletion(100, past()));
    shadowed_write_after_compacted_deletion(t, d, insert(t, 1, 1, "a", 50), "partition deletion");
}

#[test]
fn purging_a_range_tombstone_does_not_resurrect_older_rows() {
    let t = Uuid::new_v4();
    let mut d = mutation(t, 1);
    d.range_tombstones.push(RangeTombstone {
        start: ClusteringBound { prefix: vec![int(0)], inclusive: true },
        end: ClusteringBound { prefix: vec![int(5)], inclusive: true },
        deletion: deletion(100, past()),
    });
    shadowed_write_after_compacted_deletion(t, d, insert(t, 1, 1, "a", 50), "range tombstone");
}

#[test]
fn purging_a_collection_deletion_does_not_resurrect_older_elements() {
    let t = Uuid::new_v4();
    let mut d = mutation(t, 1);
    let mut r = row(ck(1, "a"));
    r.marker = marker(100);
    r.complex_deletions.push((MAP, deletion(100, past())));
    d.rows.push(r);
    let mut w = mutation(t, 1);
    let mut r = row(ck(1, "a"));
    r.cells.push(types::mutation::CellWrite { path: Some(int(7)), ..live_cell(MAP, 50, text("old")) });
    w.rows.push(r);
    shadowed_write_after_compacted_deletion(t, d, w, "collection deletion");
}

#[test]
fn purging_a_cell_tombstone_does_not_resurrect_an_older_value() {
    let t = Uuid::new_v4();
    let mut d = mutation(t, 1);
    let mut r = row(ck(1, "a"));
    r.marker = marker(100);
    r.cells.push(cell_tombstone(B, 100, past()));
    d.rows.push(r);
    let mut w = mutation(t, 1);
    let mut r = row(ck(1, "a"));
    r.cells.push(live_cell(B, 50, text("old")));
    w.rows.push(r);
    shadowed_write_after_compacted_deletion(t, d, w, "cell tombstone");
}

/// The deletion `d` reaches the sorted files (and a first major compaction)
/// before the data `w` it shadows arrives with an older timestamp: purging the
/// deletion must take the shadowed data with it, so the next major compaction
/// leaves reads unchanged. (Cassandra drops the shadowed cells in the same
/// compaction that purges the tombstone.)
fn shadowed_write_after_compacted_deletion(t: Uuid, d: Mutation, w: Mutation, what: &str) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), periodic());
    let table = model_table("ks", "t", t, 0);
    let (storage, _) = open(&cfg);
    storage.set_schema(&[keyspace("ks", true, vec![table.clone()])]).unwrap();
    let env = Env { dir, cfg, table, storage: Some(storage) };
    env.apply(d);
    env.flush();
    env.compact();
    let after_first = env.read(1);
    env.apply(w);
    env.flush();
    let before = env.read(1);
    env.compact();
    let after = env.read(1);
    assert_eq!(
        before, after,
        "{what}: a major compaction changed what reads return (deletion purged, shadowed data resurrected); \
         read after the first compaction: {after_first:?}"
    );
}

#[test]
fn shadowed_data_is_dropped_with_the_deletion_in_one_pass() {
    // The usual order: data first, deletion later, both compacted together.
    let env = Env::new(0);
    let t = env.id();
    env.apply(insert(t, 1, 1, "a", 10));
    env.apply(insert(t, 1, 2, "a", 10));
    env.flush();
    env.compact(); // the data now sits in the bottom level as plain values
    let mut d = mutation(t, 1);
    let mut r = row(ck(1, "a"));
    r.deletion = Some(deletion(20, past()));
    d.rows.push(r);
    env.apply(d);
    env.flush();
    compaction_keeps_reads(&env, &[1], "row deletion after data");
    compaction_keeps_reads(&env, &[1], "row deletion after data (second compaction)");
    assert_eq!(rows_of(&env.read(1)).len(), 1);
}

#[test]
fn tombstones_stay_within_gc_grace() {
    // With the default gc_grace (10 days) nothing deleted is purged, and reads agree.
    let mut env = Env::new(864_000);
    let t = env.id();
    env.apply(insert(t, 1, 1, "a", 10));
    env.flush();
    let mut m = mutation(t, 1);
    let mut r = row(ck(1, "a"));
    r.cells.push(cell_tombstone(B, 20, past()));
    m.rows.push(r);
    env.apply(m);
    env.flush();
    env.compact();
    env.compact();
    let raw = env.raw();
    assert_line(&raw, "col=21 tombstone", "cell tombstone within gc_grace");
}

#[test]
fn expired_cells_turn_into_tombstones_within_gc_grace() {
    let mut env = Env::new(864_000);
    let t = env.id();
    let mut m = mutation(t, 1);
    let mut r = row(ck(1, "a"));
    r.marker = marker(10);
    r.cells.push(live_cell(A, 10, int(1)));
    r.cells.push(expiring_cell(B, 20, 5, past(), text("expired")));
    m.rows.push(r);
    let mut r = row(ck(2, "b"));
    r.marker = Some(types::mutation::Liveness { timestamp: 20, ttl: 5, local_expiration: past() });
    r.cells.push(expiring_cell(A, 20, 5, past(), int(2)));
    m.rows.push(r);
    env.apply(m);
    env.flush();
    let before = env.read(1);
    // Two passes: the first merges the fresh writes, the second filters them.
    env.compact();
    env.compact();
    assert_eq!(env.read(1), before);
    let raw = env.raw();
    assert_line(&raw, "row (1,\"a\") col=21 tombstone ts=20", "expired cell kept as a tombstone");
    assert_line(&raw, "row (2,\"b\") marker tombstone ts=20", "expired row marker kept as a tombstone");
    assert_line(&raw, "row (2,\"b\") col=20 tombstone ts=20", "expired cell kept as a tombstone");
    assert_no_line(&raw, "expiring", "expired cells");
    // A live write at the same timestamp still loses (it lost to the expired cell too).
    let mut m = mutation(t, 1);
    let mut r = row(ck(1, "a"));
    r.cells.push(live_cell(B, 20, text("zzz")));
    m.rows.push(r);
    env.apply(m);
    assert_eq!(env.read(1), before);
    let p = before.expect("row 1");
    assert_eq!(p.rows.len(), 1);
    assert!(p.rows[0].column(B).is_none());
}

/// LeveledCompactionStrategy tables map to RocksDB's level style, where a
/// manual compaction runs level by level: GC must still happen there.
#[test]
fn leveled_tables_purge_too() {
    let mut table = model_table("ks", "t", Uuid::new_v4(), 0);
    table.options.compaction.clear();
    table
        .options
        .compaction
        .insert("class".into(), "org.apache.cassandra.db.compaction.LeveledCompactionStrategy".into());
    // The same scenario as for size-tiered tables, three major compactions.
    purge_deleted_row_scenario(Env::with_table(table), 3);
}

/// Repair-based tombstone GC: a tombstone (a cell tombstone and a row
/// deletion) past gc_grace stays through major compactions while the
/// table's repaired horizon is not past its deletion time, and goes at the
/// first major compaction after the horizon passes it. The horizon survives
/// ALTER TABLE and TRUNCATE (it is not persisted: an open starts from
/// `StorageConfig::tombstone_horizon`).
#[test]
fn tombstones_wait_for_the_repaired_horizon() {
    let mut env = Env::new(0);
    let t = env.id();
    env.apply(insert(t, 1, 1, "a", 10));
    env.apply(insert(t, 1, 2, "b", 10));
    env.flush();
    let deleted_at = past();
    let mut m = mutation(t, 1);
    let mut r = row(ck(1, "a"));
    r.cells.push(cell_tombstone(B, 20, deleted_at));
    m.rows.push(r);
    let mut r = row(ck(2, "b"));
    r.deletion = Some(deletion(20, deleted_at));
    m.rows.push(r);
    env.apply(m);
    env.flush();
    assert_eq!(env.st().tombstone_horizon(&t).unwrap(), i64::MAX, "no horizon by default");

    // The last repair began in the second of the deletion: not before it.
    let before = env.read(1);
    env.st().set_tombstone_horizon(&t, deleted_at as i64).unwrap();
    env.compact();
    env.compact();
    assert_eq!(env.read(1), before);
    let raw = env.raw();
    assert_line(&raw, "row (1,\"a\") col=21 tombstone ts=20", "cell tombstone the horizon does not pass");
    assert_line(&raw, "row (2,\"b\") row-deletion tombstone ts=20", "row deletion the horizon does not pass");
    // What the kept deletion shadows goes (safe: the deletion stays).
    assert_no_line(&raw, "row (2,\"b\") col=", "cells the kept row deletion shadows");

    // A schema change keeps the horizon (the reopen in `raw` reset it).
    env.st().set_tombstone_horizon(&t, deleted_at as i64).unwrap();
    let mut altered = env.table.clone();
    altered.options.comment = "altered".into();
    env.st().set_schema(&[keyspace("ks", true, vec![altered])]).unwrap();
    assert_eq!(env.st().tombstone_horizon(&t).unwrap(), deleted_at as i64);
    env.compact();
    env.compact();
    assert_eq!(env.read(1), before);

    // A repair that began after the deletion: both tombstones go.
    env.st().set_tombstone_horizon(&t, deleted_at as i64 + 1).unwrap();
    env.compact();
    env.compact();
    assert_eq!(env.read(1), before);
    let raw = env.raw();
    assert_no_line(&raw, "tombstone", "tombstones the horizon passed");
    assert_no_line(&raw, "row (2,", "the deleted row");
    assert_line(&raw, "row (1,\"a\") col=20 live", "live cell");

    env.st().set_tombstone_horizon(&t, 7).unwrap();
    env.st().truncate(&t).unwrap();
    assert_eq!(env.st().tombstone_horizon(&t).unwrap(), 7, "TRUNCATE keeps the horizon");
}
