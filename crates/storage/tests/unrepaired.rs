//! Repair's bookkeeping through the engine (`Storage::repair_states`): every
//! write path but a repair's own merges makes its range unrepaired, streamed
//! files, cleanup and TRUNCATE make the whole table unrepaired, and what is
//! repaired survives a clean shutdown but not a crash.

#![allow(clippy::unwrap_used, reason = "an integration test: a failed unwrap names its line")]

mod common;

use common::*;
use storage::{PartitionRead, Storage};
use uuid::Uuid;

const RING: [i64; 3] = [-(1 << 62), 0, 1 << 62];

fn ranges() -> Vec<(i64, i64)> {
    vec![(RING[2], RING[0]), (RING[0], RING[1]), (RING[1], RING[2])]
}

fn repaired(s: &Storage, table: &Uuid) -> Vec<bool> {
    s.repair_states(table, &ranges()).iter().map(|r| r.repaired).collect()
}

/// Repairs every range (as a repair that found the replicas agreeing does).
fn repair_all(s: &Storage, table: &Uuid) {
    let states = s.repair_states(table, &ranges());
    let done: Vec<((i64, i64), u64)> = ranges().into_iter().zip(states.iter().map(|r| r.generation)).collect();
    assert_eq!(s.set_repaired(table, &done), 3);
    assert_eq!(repaired(s, table), vec![true, true, true]);
}

/// A key whose token lies in range `i` of `ranges()`.
fn key_in(i: usize) -> i32 {
    let (start, end) = ranges()[i];
    (0..10_000)
        .find(|pk| {
            let t = token_of(*pk);
            if start < end {
                start < t && t <= end
            } else {
                t > start || t <= end
            }
        })
        .unwrap()
}

fn write(s: &Storage, table: Uuid, pk: i32) {
    let mut m = mutation(table, pk);
    let mut r = row(vec![]);
    r.cells.push(live_cell(17, now_micros(), text("v")));
    m.rows.push(r);
    s.apply(&[m]).unwrap();
}

#[test]
fn writes_unrepair_their_range_and_repairs_merges_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let table = Uuid::from_u128(11);
    let s = open_small(dir.path(), &[keyspace("ks", true, vec![kv_table("ks", "t", table)])]);
    s.set_ring(&RING);
    assert_eq!(repaired(&s, &table), vec![false, false, false], "never repaired");
    repair_all(&s, &table);
    write(&s, table, key_in(1));
    assert_eq!(repaired(&s, &table), vec![true, false, true]);
    repair_all(&s, &table);

    // A repair's merge of another replica's version leaves the state alone;
    // read repair's (apply_raw) does not.
    let other = tempfile::tempdir().unwrap();
    let o = open_small(other.path(), &[keyspace("ks", true, vec![kv_table("ks", "t", table)])]);
    write(&o, table, key_in(2));
    let read = PartitionRead { partition_key: int(key_in(2)).to_vec(), ..full_read(table, key_in(2), now_secs()) };
    let raw = o.read_raw(&read).unwrap();
    s.apply_repair(&table, &raw.cells).unwrap();
    assert_eq!(repaired(&s, &table), vec![true, true, true]);
    s.apply_raw(&table, &raw.cells).unwrap();
    assert_eq!(repaired(&s, &table), vec![true, true, false]);

    // Cleanup and TRUNCATE unrepair everything.
    repair_all(&s, &table);
    s.cleanup(&table, &[(i64::MIN, i64::MAX)]).unwrap();
    assert_eq!(repaired(&s, &table), vec![false, false, false]);
    repair_all(&s, &table);
    s.truncate(&table).unwrap();
    assert_eq!(repaired(&s, &table), vec![false, false, false]);
}

#[test]
fn repaired_ranges_survive_a_clean_shutdown_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let table = Uuid::from_u128(12);
    let schema = [keyspace("ks", true, vec![kv_table("ks", "t", table)])];
    {
        let s = open_small(dir.path(), &schema);
        s.set_ring(&RING);
        repair_all(&s, &table);
        write(&s, table, key_in(0));
        s.shutdown().unwrap();
    }
    {
        let (s, _) = open(&config(dir.path(), periodic()));
        s.set_ring(&RING);
        assert_eq!(repaired(&s, &table), vec![false, true, true], "after a clean shutdown");
        repair_all(&s, &table);
        // Killed: no shutdown.
    }
    let (s, _) = open(&config(dir.path(), periodic()));
    s.set_ring(&RING);
    assert_eq!(repaired(&s, &table), vec![false, false, false], "after a crash");
}
