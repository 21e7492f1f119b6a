//! Counter cells through the whole engine: shards written in any order, to
//! memtables and flushed files, merge to the same count after flushes and
//! compactions (the merge operator, the memtable merge and the reads agree);
//! re-applying a shard changes nothing; deletions shadow the shards written
//! before them, a cell tombstone beats every counter cell, and a compaction
//! with `gc_grace_seconds = 0` purges a deletion without bringing shadowed
//! shards back; the leader's shard read sees its own shard; read repair
//! (`merge_raw`, `repair_diff`) merges replicas' shards and converges.

#![allow(clippy::unwrap_used, reason = "an integration test: a failed unwrap names its line")]

mod common;

use bytes::Bytes;
use common::*;
use storage::{ColumnData, Storage};
use types::counter::Shard;
use types::mutation::{CellWrite, Mutation, COUNTER_TTL};
use types::schema::{ColumnKind, TableDef};
use types::CqlType;
use uuid::Uuid;

/// `CREATE TABLE ks.c (k int PRIMARY KEY, c counter) WITH gc_grace_seconds = 0`.
fn counter_table() -> TableDef {
    let mut t = kv_table("ks", "c", Uuid::new_v4());
    for c in &mut t.columns {
        if c.kind == ColumnKind::Regular {
            c.ty = CqlType::Counter;
        }
    }
    t.options.gc_grace_seconds = 0;
    t
}

const C: u16 = 17;

fn shard(id: u8, clock: i64, count: i64, ts: i64) -> Shard {
    Shard { id: [id; 16], clock, count, timestamp: ts }
}

fn counter_write(table: Uuid, pk: i32, shards: Vec<Shard>) -> Mutation {
    let ts = shards.iter().map(|s| s.timestamp).max().unwrap_or(0);
    let cell = CellWrite {
        column: C,
        path: None,
        timestamp: ts,
        ttl: COUNTER_TTL,
        local_deletion_time: i32::MAX,
        value: Some(Bytes::from(types::counter::from_shards(shards))),
    };
    let mut m = mutation(table, pk);
    m.rows.push(storage_row(vec![cell]));
    m
}

fn storage_row(cells: Vec<CellWrite>) -> types::mutation::RowWrite {
    types::mutation::RowWrite { cells, ..row(Vec::new()) }
}

fn value(s: &Storage, table: Uuid, pk: i32) -> Option<i64> {
    let p = s.read_partition(&full_read(table, pk, now_secs())).unwrap()?;
    let r = p.rows.first()?;
    match r.column(C)? {
        ColumnData::Simple(cell) => Some(i64::from_be_bytes(cell.value.as_slice().try_into().unwrap())),
        ColumnData::Complex(_) => panic!("a counter is a simple column"),
    }
}

fn env() -> (tempfile::TempDir, Storage, Uuid) {
    let dir = tempfile::tempdir().unwrap();
    let table = counter_table();
    let id = table.id;
    let s = open_small(dir.path(), &[keyspace("ks", true, vec![table])]);
    (dir, s, id)
}

#[test]
fn shards_merge_the_same_in_memtables_files_and_compactions() {
    let (_dir, s, t) = env();
    // Three leaders' successive versions, applied out of order, some twice, across flushes.
    let versions = [
        shard(1, 1, 5, 10),
        shard(2, 1, 7, 11),
        shard(1, 3, 9, 14),
        shard(3, 1, -2, 12),
        shard(1, 2, 6, 13),
        shard(2, 2, 8, 15),
        shard(1, 3, 9, 14),
    ];
    for (i, v) in versions.iter().enumerate() {
        s.apply(&[counter_write(t, 1, vec![*v])]).unwrap();
        if i % 3 == 2 {
            s.flush(None).unwrap();
        }
    }
    // Newest per leader: 9 + 8 - 2.
    assert_eq!(value(&s, t, 1), Some(15));
    s.flush(None).unwrap();
    assert_eq!(value(&s, t, 1), Some(15));
    s.compact(None).unwrap();
    assert_eq!(value(&s, t, 1), Some(15));
    // Re-applying old versions changes nothing.
    for v in &versions {
        s.apply(&[counter_write(t, 1, vec![*v])]).unwrap();
    }
    assert_eq!(value(&s, t, 1), Some(15));
    let own = s.counter_shards(&t, token_of(1), &int(1), false, &[], &[C], &[1; 16]).unwrap();
    assert_eq!((own[0].clock, own[0].count), (3, 9));
    let none = s.counter_shards(&t, token_of(1), &int(1), false, &[], &[C], &[7; 16]).unwrap();
    assert_eq!((none[0].clock, none[0].count), (0, 0));
}

#[test]
fn deletions_shadow_older_shards_and_purging_them_brings_none_back() {
    let (_dir, s, t) = env();
    let now = now_secs() - 10;
    s.apply(&[counter_write(t, 1, vec![shard(1, 1, 5, 10), shard(2, 1, 7, 10)])]).unwrap();
    s.flush(None).unwrap();
    // A partition deletion at 20, then a newer shard of leader 1.
    let mut del = mutation(t, 1);
    del.partition_deletion = Some(deletion(20, now));
    s.apply(&[del]).unwrap();
    assert_eq!(value(&s, t, 1), None);
    s.apply(&[counter_write(t, 1, vec![shard(1, 2, 6, 30)])]).unwrap();
    assert_eq!(value(&s, t, 1), Some(6), "leader 2's shard is shadowed");
    s.flush(None).unwrap();
    // gc_grace_seconds = 0: the major compaction purges the deletion and trims the shadowed shard.
    s.compact(None).unwrap();
    assert_eq!(value(&s, t, 1), Some(6));
    s.compact(None).unwrap();
    assert_eq!(value(&s, t, 1), Some(6));
}

#[test]
fn a_cell_tombstone_beats_every_counter_cell() {
    let (_dir, s, t) = env();
    s.apply(&[counter_write(t, 2, vec![shard(1, 1, 5, 10)])]).unwrap();
    let mut del = mutation(t, 2);
    del.rows.push(storage_row(vec![cell_tombstone(C, 5, now_secs())]));
    s.apply(&[del]).unwrap();
    s.apply(&[counter_write(t, 2, vec![shard(1, 2, 6, 40)])]).unwrap();
    assert_eq!(value(&s, t, 2), None);
    s.flush(None).unwrap();
    assert_eq!(value(&s, t, 2), None);
}

#[test]
fn read_repair_merges_replicas_shards_and_converges() {
    let (_d1, a, t) = env();
    let dir2 = tempfile::tempdir().unwrap();
    let table = a.keyspace_of(&t).unwrap();
    let b = open_small(dir2.path(), &[table]);
    // Each replica missed one leader's newest version.
    a.apply(&[counter_write(t, 3, vec![shard(1, 2, 10, 20), shard(2, 1, 4, 11)])]).unwrap();
    b.apply(&[counter_write(t, 3, vec![shard(1, 1, 3, 10), shard(2, 2, 9, 21), shard(3, 1, 1, 12)])]).unwrap();
    let read = full_read(t, 3, now_secs());
    let (ra, rb) = (a.read_raw(&read).unwrap(), b.read_raw(&read).unwrap());
    assert_ne!(ra.digest(), rb.digest());
    let merged = storage::merge_raw(&[ra.clone(), rb.clone()], false);
    assert_eq!(a.resolve_raw(&read, &merged).unwrap().map(|p| p.rows.len()), Some(1));
    for (s, raw) in [(&a, &ra), (&b, &rb)] {
        s.apply_raw(&t, &storage::repair_diff(&merged, raw)).unwrap();
    }
    assert_eq!(value(&a, t, 3), Some(10 + 9 + 1));
    assert_eq!(value(&b, t, 3), Some(10 + 9 + 1));
    assert_eq!(a.read_raw(&read).unwrap().digest(), b.read_raw(&read).unwrap().digest());
    // Repeating the repair changes nothing.
    a.apply_raw(&t, &storage::repair_diff(&merged, &ra)).unwrap();
    assert_eq!(value(&a, t, 3), Some(20));
}
