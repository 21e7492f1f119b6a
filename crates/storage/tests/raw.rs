//! Raw partition reads, merges and read repair against three replicas.
//!
//! A seeded randomized test: the model's random operations (cells, rows,
//! range and partition deletions, TTLs, collections) go to a random non-empty
//! subset of replicas A and B, and all of them to C; reads then check that
//! resolving the merge of A's and B's raw partitions answers as C does, and
//! that repairing A and B from the merge makes them agree (digests) and
//! answer as C. Replay a failure with `RAW_SEED=<seed> [RAW_STEPS=<n>] cargo
//! test --release -p storage --test raw`; `RAW_SEEDS=<n>` runs more seeds.

#![allow(clippy::unwrap_used, reason = "an integration test: a failed unwrap names its line")]

mod common;

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::time::Instant;

use common::model::*;
use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use storage::{merge_raw, repair_diff, Partition, PartitionRead, RawPartition, Row, Storage};
use uuid::Uuid;

struct Replicas {
    a: Storage,
    b: Storage,
    c: Storage,
    table: Uuid,
    _dirs: Vec<tempfile::TempDir>,
}

fn replicas(table: Uuid) -> Replicas {
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().expect("tempdir")).collect();
    let ks = vec![keyspace("ks", true, vec![model_table("ks", "t", table, 864_000)])];
    let open_one = |i: usize| open_small(dirs[i].path(), &ks);
    let (a, b, c) = (open_one(0), open_one(1), open_one(2));
    Replicas { a, b, c, table, _dirs: dirs }
}

/// (static row, rows) of an answer; no partition reads as nothing.
fn parts(p: &Option<Partition>) -> (Option<Row>, Vec<Row>) {
    match p {
        Some(p) => (p.static_row.clone(), p.rows.clone()),
        None => (None, Vec::new()),
    }
}

fn round_trip(raw: &RawPartition, what: &str) {
    let mut bytes = Vec::new();
    raw.encode(&mut bytes);
    let back = RawPartition::decode(&bytes).unwrap_or_else(|e| panic!("{what}: decode of encode failed: {e}"));
    assert_eq!(&back, raw, "{what}: encode/decode round trip");
}

/// A random read of one partition: whole, a slice or several, either
/// direction, small row limits, now or later.
fn rand_read(rng: &mut StdRng, table: Uuid, now: i32) -> (PartitionRead, String) {
    let (token, pk) = PARTITIONS[rng.gen_range(0..PARTITIONS.len())];
    let spec = ReadSpec {
        ranges: match rng.gen_range(0..3) {
            0 => Vec::new(),
            1 => vec![rand_slice(rng)],
            _ => rand_multi_slices(rng),
        },
        reversed: rng.gen_bool(0.5),
        include_static: rng.gen_bool(0.7),
        row_limit: if rng.gen_bool(0.4) { usize::MAX } else { rng.gen_range(0..4) },
        now: if rng.gen_bool(0.2) { now + rng.gen_range(1..40) } else { now },
    };
    (spec.to_read(table, token, pk), format!("pk={pk} {}", spec.describe()))
}

/// Whether `raw` covered `key`, as `RawPartition::last_key` documents it:
/// the header section always; rows up to and including the last row (every
/// key starting with `last_key`) in the read direction.
fn covers(raw: &RawPartition, key: &[u8], reversed: bool) -> bool {
    if raw.exhausted {
        return true;
    }
    let mut rows_start = Vec::new();
    storage::keys::partition_prefix(raw.token, &raw.partition_key, &mut rows_start).unwrap();
    rows_start.push(storage::keys::SECTION_ROWS);
    if !key.starts_with(&rows_start) {
        return true;
    }
    match &raw.last_key {
        None => false,
        Some(last) if reversed => key >= last.as_slice(),
        Some(last) => key <= last.as_slice() || key.starts_with(last),
    }
}

/// `full` restricted to what `raw` covers.
fn restricted(full: &RawPartition, raw: &RawPartition, reversed: bool) -> Entries {
    full.cells.iter().filter(|(k, _)| covers(raw, k, reversed)).cloned().collect()
}

/// One digest read with blocking read repair of A and B; checks the answers
/// against C. Returns whether the merge was exhausted.
fn read_repair(r: &Replicas, read: &PartitionRead, what: &str) -> bool {
    let raw_a = r.a.read_raw(read).expect("read_raw A");
    let raw_b = r.b.read_raw(read).expect("read_raw B");
    // What each replica holds for the slices, unlimited: a raw read returns
    // exactly the part of it that its coverage claims.
    let unlimited = PartitionRead { row_limit: usize::MAX, ..read.clone() };
    let full_a = r.a.read_raw(&unlimited).expect("read_raw A unlimited");
    let full_b = r.b.read_raw(&unlimited).expect("read_raw B unlimited");
    assert!(full_a.exhausted && full_b.exhausted, "{what}: unlimited raw read not exhausted");
    for (raw, full, name) in [(&raw_a, &full_a, "A"), (&raw_b, &full_b, "B")] {
        assert!(raw.exhausted || read.row_limit != usize::MAX, "{what}: {name} stopped without a row limit");
        assert_eq!(
            raw.cells,
            restricted(full, raw, read.reversed),
            "{what}: {name}'s raw read is not its data within the coverage it claims ({:?})",
            raw.last_key
        );
    }
    // A raw read resolves to what the replica itself answers.
    for (s, raw, name) in [(&r.a, &raw_a, "A"), (&r.b, &raw_b, "B")] {
        let own = s.read_partition(read).expect("read_partition");
        let resolved = s.resolve_raw(read, raw).expect("resolve_raw");
        assert_eq!(resolved, own, "{what}: resolve_raw of {name}'s raw read differs from {name}'s read_partition");
        round_trip(raw, what);
    }
    let merged = merge_raw(&[raw_a.clone(), raw_b.clone()], read.reversed);
    round_trip(&merged, what);
    // The merge covers what both cover, and holds the winners there.
    let both = merge_raw(&[full_a.clone(), full_b.clone()], read.reversed);
    assert!(both.exhausted, "{what}: merge of exhausted reads not exhausted");
    for (k, _) in &both.cells {
        assert_eq!(
            covers(&merged, k, read.reversed),
            covers(&raw_a, k, read.reversed) && covers(&raw_b, k, read.reversed),
            "{what}: merged coverage ({:?}) of key {k:?} is not the intersection of A's ({:?}) and B's ({:?})",
            merged.last_key,
            raw_a.last_key,
            raw_b.last_key
        );
    }
    assert_eq!(merged.cells, restricted(&both, &merged, read.reversed), "{what}: merged cells");
    let expected = r.c.read_partition(read).expect("read_partition C");
    let got = r.c.resolve_raw(read, &merged).expect("resolve_raw merged");
    if merged.exhausted {
        assert_eq!(got, expected, "{what}: resolved merge (exhausted) differs from C");
    } else {
        let (got_static, got_rows) = parts(&got);
        let (exp_static, exp_rows) = parts(&expected);
        assert_eq!(got_static, exp_static, "{what}: resolved merge (not exhausted): static row differs from C");
        assert!(
            got_rows.len() <= exp_rows.len() && got_rows[..] == exp_rows[..got_rows.len()],
            "{what}: resolved merge (not exhausted) rows are not a prefix of C's\n  merged: {got_rows:?}\n  C:      {exp_rows:?}"
        );
    }
    // Repair.
    let fix_a = repair_diff(&merged, &raw_a);
    let fix_b = repair_diff(&merged, &raw_b);
    r.a.apply_raw(&r.table, &fix_a).expect("apply_raw A");
    r.b.apply_raw(&r.table, &fix_b).expect("apply_raw B");
    if merged.exhausted {
        let again_a = r.a.read_raw(read).expect("read_raw A after repair");
        let again_b = r.b.read_raw(read).expect("read_raw B after repair");
        for (again, fix, name) in [(&again_a, &fix_a, "A"), (&again_b, &fix_b, "B")] {
            // A repaired replica may hold more live rows and stop earlier:
            // compare within what it covers now.
            let missing = repair_diff(&merge_raw(&[merged.clone(), again.clone()], read.reversed), again);
            assert!(
                missing.is_empty(),
                "{what}: {name} still lacks merged data after repair: {missing:?}\n  merged: {merged:?}\n  repaired with: {fix:?}\n  now reads: {again:?}"
            );
        }
        assert_eq!(
            again_a.digest(),
            again_b.digest(),
            "{what}: digests differ after repair\n  A: {again_a:?}\n  B: {again_b:?}"
        );
        assert_eq!(r.a.read_partition(read).expect("read A"), expected, "{what}: A after repair differs from C");
        assert_eq!(r.b.read_partition(read).expect("read B"), expected, "{what}: B after repair differs from C");
    }
    merged.exhausted
}

fn run_seed(seed: u64, steps: usize) -> (usize, usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    let table = Uuid::from_u128(0x4A30_0000_0000_0000_0000_0000_0000_0000 | seed as u128);
    let r = replicas(table);
    // A year ahead of the wall clock: compactions (real clock) never expire
    // a cell or purge a tombstone, so the replicas' answers never move.
    let base_now = now_secs() + 365 * 24 * 3600;
    let mut now = base_now;
    let mut model = Model::default();
    let (mut exhausted, mut cut) = (0, 0);
    let mut log = Vec::new();
    for step in 0..steps {
        if rng.gen_range(0..8) == 0 {
            now += rng.gen_range(1..15);
        }
        let action = rng.gen_range(0..100);
        if action < 3 {
            let s = [&r.a, &r.b, &r.c][rng.gen_range(0..3)];
            s.flush(None).expect("flush");
        } else if action < 5 {
            let s = [&r.a, &r.b, &r.c][rng.gen_range(0..3)];
            s.compact(None).expect("compact");
        } else {
            let mut gen = Gen { rng: &mut rng, table, now };
            let mut line = String::new();
            let m = gen.op(&mut model, &mut line);
            // A, B or both; C always.
            let to = rng.gen_range(0..3);
            if to != 1 {
                r.a.apply(std::slice::from_ref(&m)).expect("apply A");
            }
            if to != 0 {
                r.b.apply(std::slice::from_ref(&m)).expect("apply B");
            }
            r.c.apply(std::slice::from_ref(&m)).expect("apply C");
            log.push(format!("[{step}] to {} {line}", ["A", "B", "AB"][to]));
        }
        for _ in 0..2 {
            let (read, desc) = rand_read(&mut rng, table, now);
            let what = format!("RAW_SEED={seed} step {step} read {desc}");
            let done = catch_unwind(AssertUnwindSafe(|| read_repair(&r, &read, &what)));
            let done = match done {
                Ok(done) => done,
                Err(e) => {
                    let tail = log.len().saturating_sub(30);
                    eprintln!("last writes (oldest first):\n  {}", log[tail..].join("\n  "));
                    resume_unwind(e)
                }
            };
            if done {
                exhausted += 1;
            } else {
                cut += 1;
                // Short read: repair the rest with an unlimited read, after
                // which the limited read must answer as C.
                let full = PartitionRead { row_limit: usize::MAX, ..read.clone() };
                assert!(
                    read_repair(&r, &full, &format!("{what} (unlimited follow-up)")),
                    "{what}: unlimited read not exhausted"
                );
                let expected = r.c.read_partition(&read).expect("read C");
                assert_eq!(r.a.read_partition(&read).expect("read A"), expected, "{what}: A after full repair");
                assert_eq!(r.b.read_partition(&read).expect("read B"), expected, "{what}: B after full repair");
            }
        }
    }
    (exhausted, cut)
}

fn env_usize(name: &str) -> Option<usize> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

#[test]
fn read_repair_converges_replicas() {
    let steps = env_usize("RAW_STEPS").unwrap_or(300);
    let seeds: Vec<u64> = match std::env::var("RAW_SEED").ok().and_then(|v| v.trim().parse().ok()) {
        Some(seed) => vec![seed],
        None => {
            let n = env_usize("RAW_SEEDS").unwrap_or(3) as u64;
            (1..=n).map(|i| 0xDA7A + i * 104_729).collect()
        }
    };
    let started = Instant::now();
    for seed in seeds {
        match catch_unwind(AssertUnwindSafe(|| run_seed(seed, steps))) {
            Ok((exhausted, cut)) => {
                eprintln!("seed {seed}: {steps} steps, {exhausted} exhausted merges, {cut} cut at a row limit");
                assert!(exhausted > 0 && cut > 0, "seed {seed}: the reads exercised only one kind of merge");
            }
            Err(e) => {
                eprintln!(
                    "\n*** raw read repair test failed: replay with RAW_SEED={seed} RAW_STEPS={steps} \
                     cargo test --release -p storage --test raw\n"
                );
                resume_unwind(e);
            }
        }
    }
    eprintln!("raw test took {:?}", started.elapsed());
}

/// A replica with a single row, as a raw read of that partition.
fn one_row(storage: &Storage, table: Uuid, value: &str, ts: i64) -> RawPartition {
    let mut m = mutation(table, 5);
    let mut r = row(vec![int(1), text("a")]);
    r.marker = marker(ts);
    r.cells.push(live_cell(B, ts, text(value)));
    m.rows.push(r);
    storage.apply(&[m]).unwrap();
    storage.read_raw(&full_read(table, 5, now_secs())).unwrap()
}

#[test]
fn digest_differs_when_one_cell_differs() {
    let table = Uuid::new_v4();
    let r = replicas(table);
    let a = one_row(&r.a, table, "x", 10);
    let b = one_row(&r.b, table, "x", 10);
    assert_eq!(a.digest(), b.digest());
    assert_eq!(a.cells.len(), 2, "marker and one cell: {a:?}");
    // A newer value on one replica.
    let b = one_row(&r.b, table, "y", 11);
    assert_ne!(a.digest(), b.digest());
    // One byte of one value; the exhausted flag.
    let mut c = a.clone();
    let last = c.cells[1].1.len() - 1;
    c.cells[1].1[last] ^= 1;
    assert_ne!(a.digest(), c.digest());
    let mut c = a.clone();
    c.exhausted = false;
    assert_ne!(a.digest(), c.digest());
    // A key moved between key and value keeps the digest apart.
    let mut c = a.clone();
    let moved = c.cells[1].0.pop().unwrap();
    c.cells[1].1.insert(0, moved);
    assert_ne!(a.digest(), c.digest());
}

#[test]
fn decode_never_panics_on_garbage() {
    let seed = std::env::var("RAW_SEED").ok().and_then(|v| v.trim().parse().ok()).unwrap_or(0x06A2_BA6E_u64);
    let mut rng = StdRng::seed_from_u64(seed);
    let table = Uuid::new_v4();
    let r = replicas(table);
    one_row(&r.a, table, "x", 10);
    let mut m = mutation(table, 5);
    let mut second = row(vec![int(2), text("b")]);
    second.cells.push(live_cell(A, 4, int(1)));
    m.rows.push(second);
    m.partition_deletion = Some(deletion(3, now_secs()));
    r.a.apply(&[m]).unwrap();
    let mut read = full_read(table, 5, now_secs());
    read.row_limit = 1;
    let raw = r.a.read_raw(&read).unwrap();
    assert!(!raw.exhausted && raw.last_key.is_some(), "{raw:?}");
    let mut valid = Vec::new();
    raw.encode(&mut valid);
    let check = |bytes: &[u8]| {
        if let Ok(p) = RawPartition::decode(bytes) {
            // The form is canonical: what decodes encodes back to itself.
            let mut again = Vec::new();
            p.encode(&mut again);
            assert_eq!(again, bytes, "RAW_SEED={seed}: decode accepted a non-canonical form");
        }
    };
    check(&valid);
    assert!(RawPartition::decode(&valid).is_ok());
    for len in 0..valid.len() {
        assert!(RawPartition::decode(&valid[..len]).is_err(), "RAW_SEED={seed}: truncation to {len} bytes decoded");
    }
    for _ in 0..20_000 {
        let mut bytes = valid.clone();
        match rng.gen_range(0..4) {
            0 => {
                let n = rng.gen_range(0..64);
                bytes = (0..n).map(|_| rng.gen()).collect();
                if rng.gen_bool(0.5) && !bytes.is_empty() {
                    bytes[0] = 1;
                }
            }
            1 => {
                for _ in 0..rng.gen_range(1..4) {
                    let i = rng.gen_range(0..bytes.len());
                    bytes[i] ^= 1 << rng.gen_range(0..8);
                }
            }
            2 => {
                let i = rng.gen_range(0..bytes.len());
                bytes[i] = if rng.gen_bool(0.5) { 0xFF } else { rng.gen() };
                bytes.truncate(rng.gen_range(i..=bytes.len()));
            }
            _ => {
                let i = rng.gen_range(0..=bytes.len());
                let extra: Vec<u8> = (0..rng.gen_range(1..8)).map(|_| rng.gen()).collect();
                bytes.splice(i..i, extra);
            }
        }
        check(&bytes);
    }
}

#[test]
fn apply_raw_refuses_what_storage_did_not_write() {
    let table = Uuid::new_v4();
    let r = replicas(table);
    let good = one_row(&r.a, table, "x", 10);
    let (key, value) = good.cells[1].clone();
    let mut bad_key = key.clone();
    bad_key.truncate(9); // shorter than a partition prefix
    let mut bad_section = key.clone();
    bad_section[14] = 0x07; // token 8 + len 2 + pk 4: the section byte
    let bad_cases: Vec<(&str, Entries)> = vec![
        ("key shorter than a prefix", vec![(bad_key, value.clone())]),
        ("unknown section", vec![(bad_section, value.clone())]),
        ("garbage value", vec![(key.clone(), vec![9, 9, 9])]),
        ("empty value", vec![(key.clone(), Vec::new())]),
        (
            "one bad pair among good ones",
            vec![(key.clone(), value.clone()), (key[..key.len() - 1].to_vec(), value.clone())],
        ),
    ];
    for (what, cells) in bad_cases {
        assert!(r.b.apply_raw(&table, &cells).is_err(), "{what}: accepted");
        let raw = r.b.read_raw(&full_read(table, 5, now_secs())).unwrap();
        assert!(raw.cells.is_empty(), "{what}: something was written: {raw:?}");
    }
    assert!(r.b.apply_raw(&Uuid::new_v4(), &good.cells).is_err(), "unknown table accepted");
    // The good pairs replicate the row exactly.
    r.b.apply_raw(&table, &good.cells).unwrap();
    let copy = r.b.read_raw(&full_read(table, 5, now_secs())).unwrap();
    assert_eq!(copy, good);
    // A raw partition resolves only for its own partition.
    let other = full_read(table, 3, now_secs());
    assert!(r.a.resolve_raw(&other, &good).is_err());
}
