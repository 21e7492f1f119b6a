//! Model-based randomized test of the storage engine against an in-memory
//! reference implementing Cassandra's semantics (LWW with Cassandra's tie
//! rules, row/range/partition/collection deletions, TTLs, row markers and
//! static rows), interleaved with flushes, compactions and reopens.
//!
//! Replay a failure with `STORAGE_SEED=<seed> [STORAGE_STEPS=<n>] cargo test
//! --release -p storage --test model`. `STORAGE_SEEDS=<n>` runs more seeds.
//!
//! Time: the model's `now` starts a year in the future of the wall clock and
//! only moves forward, so the compaction filter (which uses the real clock)
//! never sees an expired cell or a purgeable tombstone; every compaction must
//! then only drop data that is shadowed, and reads must never change.
//!
//! Even seeds use a size-tiered table (RocksDB universal compaction), odd
//! seeds a leveled one (RocksDB level compaction).

#![allow(clippy::unwrap_used, reason = "an integration test: a failed unwrap names its line")]

mod common;

use std::collections::VecDeque;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::time::Instant;

use common::model::*;
use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use storage::{ColumnData, Partition, ScanRange, Storage, StorageConfig};
use types::mutation::RowWrite;
use types::schema::KeyspaceDef;
use uuid::Uuid;

// ---------------------------------------------------------------------------
// The driver.

struct Run {
    seed: u64,
    step: usize,
    base_now: i32,
    log: VecDeque<String>,
}

impl Run {
    fn fail(&self, what: &str, expected: &dyn std::fmt::Debug, actual: &dyn std::fmt::Debug) -> ! {
        let ops: Vec<&String> = self.log.iter().collect();
        panic!(
            "model mismatch (STORAGE_SEED={} step {}): {what}\n  expected: {expected:?}\n  actual:   {actual:?}\n  last operations (oldest first):\n    {}",
            self.seed,
            self.step,
            ops.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n    ")
        );
    }

    fn note(&mut self, s: String) {
        self.log.push_back(format!("[{}] {s}", self.step));
        if self.log.len() > 60 {
            self.log.pop_front();
        }
    }
}

fn check_read(run: &Run, storage: &Storage, model: &Model, table: Uuid, token: i64, pk: i32, spec: &ReadSpec) {
    let expected = model.read(token, pk, spec);
    let actual = storage.read_partition(&spec.to_read(table, token, pk)).expect("read_partition");
    if expected != actual {
        let mut spec_desc = spec.describe();
        spec_desc = spec_desc.replace(&format!("now=+{}", spec.now), &format!("now=base+{}", spec.now - run.base_now));
        spec_desc.push_str(&diff(&expected, &actual));
        run.fail(&format!("read_partition pk={pk} {spec_desc}"), &expected, &actual);
    }
}

fn check_all(run: &Run, rng: &mut StdRng, storage: &Storage, model: &Model, table: Uuid, now: i32) {
    for &(token, pk) in &PARTITIONS {
        let mut spec = ReadSpec::full(now);
        check_read(run, storage, model, table, token, pk, &spec);
        spec.reversed = true;
        check_read(run, storage, model, table, token, pk, &spec);
        // A random slice.
        let spec = ReadSpec {
            ranges: vec![rand_slice(rng)],
            reversed: rng.gen_bool(0.5),
            include_static: rng.gen_bool(0.7),
            row_limit: usize::MAX,
            now,
        };
        check_read(run, storage, model, table, token, pk, &spec);
        // Several disjoint slices.
        let spec = ReadSpec {
            ranges: rand_multi_slices(rng),
            reversed: rng.gen_bool(0.5),
            include_static: rng.gen_bool(0.5),
            row_limit: if rng.gen_bool(0.3) { rng.gen_range(0..4) } else { usize::MAX },
            now,
        };
        check_read(run, storage, model, table, token, pk, &spec);
        // Row limits.
        let spec = ReadSpec {
            ranges: if rng.gen_bool(0.3) { vec![rand_slice(rng)] } else { Vec::new() },
            reversed: rng.gen_bool(0.5),
            include_static: rng.gen_bool(0.7),
            row_limit: rng.gen_range(0..5),
            now,
        };
        check_read(run, storage, model, table, token, pk, &spec);
        // The future: TTLs run out.
        let spec = ReadSpec { now: now + rng.gen_range(1..40), reversed: rng.gen_bool(0.5), ..ReadSpec::full(now) };
        check_read(run, storage, model, table, token, pk, &spec);
    }
}

fn check_scans(run: &Run, rng: &mut StdRng, storage: &Storage, model: &Model, table: Uuid, now: i32) {
    let ordered = model.ordered_partitions();
    // Start somewhere: the beginning, or at/after one of the partitions.
    let (start_token, after_key) = match rng.gen_range(0..3) {
        0 => (i64::MIN, None),
        1 => {
            let (t, _) = PARTITIONS[rng.gen_range(0..PARTITIONS.len())];
            (t, None)
        }
        _ => {
            let (t, pk) = PARTITIONS[rng.gen_range(0..PARTITIONS.len())];
            (t, Some(pk))
        }
    };
    let end_token = if rng.gen_bool(0.7) { i64::MAX } else { PARTITIONS[rng.gen_range(0..PARTITIONS.len())].0 };
    let in_range: Vec<(i64, i32)> = ordered
        .iter()
        .copied()
        .filter(|&(t, pk)| {
            let after_start = match after_key {
                None => t >= start_token,
                Some(a) => t > start_token || (t == start_token && pk_bytes(pk) > pk_bytes(a)),
            };
            after_start && t <= end_token
        })
        .collect();
    let partition_limit = if rng.gen_bool(0.5) { usize::MAX } else { rng.gen_range(1..4) };

    // scan_keys: every partition holding anything, live or not.
    let per = ReadSpec {
        ranges: if rng.gen_bool(0.3) { vec![rand_slice(rng)] } else { Vec::new() },
        reversed: rng.gen_bool(0.3),
        include_static: rng.gen_bool(0.8),
        row_limit: if rng.gen_bool(0.5) { usize::MAX } else { rng.gen_range(1..4) },
        now,
    };
    let scan = ScanRange {
        table,
        start_token,
        after_key: after_key.map(pk_bytes),
        end_token,
        partition_limit,
        per_partition: per.to_read(table, 0, 0),
        row_limit: if rng.gen_bool(0.5) { usize::MAX } else { rng.gen_range(1..8) },
    };
    let expected_keys: Vec<(i64, Vec<u8>)> =
        in_range.iter().take(partition_limit).map(|&(t, pk)| (t, pk_bytes(pk))).collect();
    let actual_keys = storage.scan_keys(&scan).expect("scan_keys");
    if expected_keys != actual_keys {
        run.fail(
            &format!("scan_keys start={start_token} after={after_key:?} end={end_token} limit={partition_limit}"),
            &expected_keys,
            &actual_keys,
        );
    }

    // scan: live partitions, with the per-partition read and a total row limit.
    let mut expected = Vec::new();
    let mut total = 0usize;
    for &(t, pk) in &in_range {
        if expected.len() >= scan.partition_limit || total >= scan.row_limit {
            break;
        }
        let spec = ReadSpec { row_limit: per.row_limit.min(scan.row_limit - total), ranges: per.ranges.clone(), ..per };
        if let Some(p) = model.read(t, pk, &spec) {
            total += p.rows.len().max(usize::from(p.static_row.is_some()));
            expected.push(p);
        }
    }
    let actual: Vec<Partition> = storage.scan(&scan).expect("scan");
    if expected != actual {
        run.fail(
            &format!(
                "scan start={start_token} after={after_key:?} end={end_token} partition_limit={} row_limit={} per: {}",
                scan.partition_limit,
                scan.row_limit,
                per.describe()
            ),
            &expected,
            &actual,
        );
    }
}

fn schema(table: Uuid) -> Vec<KeyspaceDef> {
    schema_with(table, false)
}

/// The model table; `leveled` picks LeveledCompactionStrategy (RocksDB's level
/// style) instead of the default size-tiered one (RocksDB's universal style).
fn schema_with(table: Uuid, leveled: bool) -> Vec<KeyspaceDef> {
    let mut t = model_table("ks", "t", table, 864_000);
    if leveled {
        t.options.compaction.clear();
        t.options
            .compaction
            .insert("class".into(), "org.apache.cassandra.db.compaction.LeveledCompactionStrategy".into());
    }
    vec![keyspace("ks", true, vec![t])]
}

fn run_seed(seed: u64, steps: usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg: StorageConfig = config(dir.path(), periodic());
    // Small memtables: RocksDB flushes and compacts on its own as well.
    cfg.memtable_bytes = 64 << 10;
    let table = Uuid::from_u128(0x5EED_0000_0000_0000_0000_0000_0000_0000 | seed as u128);
    let (s, loaded) = open(&cfg);
    assert!(loaded.is_empty());
    let mut storage = Some(s);
    // Odd seeds: a leveled table.
    let ks = schema_with(table, seed % 2 == 1);
    storage.as_ref().unwrap().set_schema(&ks).expect("set_schema");

    let base_now = now_secs() + 365 * 24 * 3600;
    let mut now = base_now;
    let mut model = Model::default();
    let mut run = Run { seed, step: 0, base_now, log: VecDeque::new() };

    for step in 0..steps {
        run.step = step;
        // Advance the clock now and then.
        if rng.gen_range(0..8) == 0 {
            now += rng.gen_range(1..15);
            run.note(format!("now = base+{}", now - base_now));
        }
        let action = rng.gen_range(0..1000);
        if action < 30 {
            run.note("flush".into());
            storage.as_ref().unwrap().flush(None).expect("flush");
        } else if action < 60 {
            run.note("compact".into());
            storage.as_ref().unwrap().compact(None).expect("compact");
        } else if action < 80 {
            let clean = rng.gen_bool(0.5);
            run.note(format!("reopen (shutdown first: {clean})"));
            let s = storage.take().unwrap();
            if clean {
                s.shutdown().expect("shutdown");
            }
            drop(s);
            let (s, loaded) = open(&cfg);
            if loaded != ks {
                run.fail("schema after reopen", &ks, &loaded);
            }
            storage = Some(s);
        } else if action < 83 {
            run.note("truncate".into());
            storage.as_ref().unwrap().truncate(&table).expect("truncate");
            model = Model::default();
        } else {
            let n = rng.gen_range(1..4);
            let mut ms = Vec::new();
            let mut gen = Gen { rng: &mut rng, table, now };
            let mut notes = Vec::new();
            for _ in 0..n {
                let mut line = String::new();
                ms.push(gen.op(&mut model, &mut line));
                notes.push(line);
            }
            for line in notes {
                run.note(line);
            }
            storage.as_ref().unwrap().apply(&ms).expect("apply");
        }
        check_all(&run, &mut rng, storage.as_ref().unwrap(), &model, table, now);
        if step % 5 == 0 {
            check_scans(&run, &mut rng, storage.as_ref().unwrap(), &model, table, now);
        }
    }
    // Finally: everything compacted, then reopened, reads the same.
    let s = storage.take().unwrap();
    s.compact(None).expect("compact");
    check_all(&run, &mut rng, &s, &model, table, now);
    s.shutdown().expect("shutdown");
    drop(s);
    let (s, _) = open(&cfg);
    run.step = steps;
    check_all(&run, &mut rng, &s, &model, table, now);
    check_scans(&run, &mut rng, &s, &model, table, now);
    // How much the final state holds (a model that reads back nothing tests nothing).
    let (mut rows, mut cells) = (0, 0);
    for &(token, pk) in &PARTITIONS {
        if let Some(p) = model.read(token, pk, &ReadSpec::full(now)) {
            rows += p.rows.len();
            cells += p.rows.iter().map(|r| r.columns.len()).sum::<usize>();
        }
    }
    eprintln!("seed {seed}: {steps} steps, final state {rows} live rows with {cells} live columns");
}

fn env_usize(name: &str) -> Option<usize> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

#[test]
fn storage_matches_model() {
    let steps = env_usize("STORAGE_STEPS").unwrap_or(400);
    let seeds: Vec<u64> = match std::env::var("STORAGE_SEED").ok().and_then(|v| v.trim().parse().ok()) {
        Some(seed) => vec![seed],
        None => {
            let n = env_usize("STORAGE_SEEDS").unwrap_or(5) as u64;
            (1..=n).map(|i| 0xC0FFEE + i * 7919).collect()
        }
    };
    let started = Instant::now();
    for seed in seeds {
        let result = catch_unwind(AssertUnwindSafe(|| run_seed(seed, steps)));
        if let Err(e) = result {
            eprintln!(
                "\n*** storage model test failed: replay with STORAGE_SEED={seed} STORAGE_STEPS={steps} \
                 cargo test --release -p storage --test model\n"
            );
            resume_unwind(e);
        }
    }
    eprintln!("model test took {:?}", started.elapsed());
}

// ---------------------------------------------------------------------------
// Small deterministic checks of the model's tie rules against storage, so a
// model bug cannot hide a storage bug (and vice versa).

fn single(storage: &Storage, table: Uuid, now: i32) -> Option<Partition> {
    storage.read_partition(&full_read(table, 5, now)).unwrap()
}

#[test]
fn tie_rules_match_cassandra() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), periodic());
    let (storage, _) = open(&cfg);
    let table = Uuid::new_v4();
    storage.set_schema(&schema(table)).unwrap();
    let now = now_secs() + 1000;
    let k = CKey { c1: Some(1), c2: b"a".to_vec() };
    type Case = (&'static str, Vec<types::mutation::CellWrite>, Option<Vec<u8>>);
    let cases: Vec<Case> = vec![
        ("higher timestamp wins", vec![live_cell(B, 2, text("old")), live_cell(B, 3, text("a"))], Some(b"a".to_vec())),
        ("tie: greater value wins", vec![live_cell(B, 2, text("b")), live_cell(B, 2, text("a"))], Some(b"b".to_vec())),
        ("tie: tombstone beats live", vec![live_cell(B, 2, text("z")), cell_tombstone(B, 2, now)], None),
        (
            "tie: tombstone beats expiring",
            vec![expiring_cell(B, 2, 100, now + 100, text("z")), cell_tombstone(B, 2, now)],
            None,
        ),
        (
            "tie: expiring beats live",
            vec![live_cell(B, 2, text("z")), expiring_cell(B, 2, 100, now + 100, text("a"))],
            Some(b"a".to_vec()),
        ),
        (
            "tie: later expiry wins",
            vec![expiring_cell(B, 2, 200, now + 200, text("a")), expiring_cell(B, 2, 100, now + 100, text("z"))],
            Some(b"a".to_vec()),
        ),
    ];
    for (what, cells, expected) in cases {
        let pk = 5;
        // Both write orders; the second with each write in its own sorted file.
        let reversed: Vec<_> = cells.iter().rev().cloned().collect();
        for (order, cells) in [cells, reversed].into_iter().enumerate() {
            storage.truncate(&table).unwrap();
            for c in cells {
                let mut m = mutation(table, pk);
                let mut r = row(k.clustering());
                r.cells.push(c);
                m.rows.push(r);
                storage.apply(&[m]).unwrap();
                if order == 1 {
                    storage.flush(None).unwrap();
                }
            }
            let got = single(&storage, table, now).and_then(|p| {
                p.rows.first().and_then(|r| match r.column(B) {
                    Some(ColumnData::Simple(c)) => Some(c.value.clone()),
                    _ => None,
                })
            });
            assert_eq!(got, expected, "{what} (order {order})");
        }
    }
}

#[test]
fn static_row_clustering_is_empty() {
    // `Row::clustering` is documented as "empty for the static row".
    let dir = tempfile::tempdir().unwrap();
    let (storage, _) = open(&config(dir.path(), periodic()));
    let table = Uuid::new_v4();
    storage.set_schema(&schema(table)).unwrap();
    let mut m = mutation(table, 5);
    let mut r = RowWrite { is_static: true, ..RowWrite::default() };
    r.cells.push(live_cell(S, 1, int(7)));
    m.rows.push(r);
    storage.apply(&[m]).unwrap();
    let p = storage.read_partition(&full_read(table, 5, now_secs())).unwrap().expect("partition");
    let s = p.static_row.expect("static row");
    assert!(s.clustering.is_empty(), "static row clustering should be empty, got {:?}", s.clustering);
}
