//! Streaming token ranges between two storages (`export_ranges`,
//! `ingest_streamed`), checked against a reference.
//!
//! A seeded randomized test: the model's random operations (cells, rows,
//! range and partition deletions, TTLs, collections) go to the source A, the
//! receiver B or both, and always to the reference C, with flushes and
//! compactions in between. Then A exports a token range and B ingests it:
//! inside the range B must answer exactly as C (it now holds A's writes and
//! its own, merged by the table's rules whatever their order), outside it B
//! must answer as before. Ingesting the same range again changes nothing; a
//! damaged file is refused and changes nothing; into an empty storage the
//! export is exactly A's data of the range. Exports cut into many files at
//! random sizes over random ranges lose and add nothing (an empty receiver
//! then holds exactly the sender's partitions of the ranges). Replay a
//! failure with `STREAM_SEED=<seed> cargo test --release -p storage --test stream`.

#![allow(clippy::unwrap_used, reason = "an integration test: a failed unwrap names its line")]

mod common;

use common::model::*;
use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use storage::{Partition, Storage, StorageError};
use uuid::Uuid;

/// `(start, end]` ranges over the model's partition tokens (-1000, 7, 7, MAX).
const RANGES: [(i64, i64); 7] = [
    (5, 5),               // the whole ring
    (-2000, 7),           // -1000 and both 7s
    (7, i64::MAX),        // MAX only
    (i64::MAX, -1000),    // wraps: -1000 only
    (-1000, 7),           // both 7s, not -1000
    (8, 100),             // nothing
    (i64::MIN, i64::MAX), // everything but MIN itself
];

fn contains((start, end): (i64, i64), t: i64) -> bool {
    if start == end {
        true
    } else if start < end {
        start < t && t <= end
    } else {
        t > start || t <= end
    }
}

fn read_all(s: &Storage, table: Uuid, now: i32) -> Vec<Option<Partition>> {
    PARTITIONS
        .iter()
        .map(|&(token, pk)| s.read_partition(&ReadSpec::full(now).to_read(table, token, pk)).expect("read"))
        .collect()
}

fn run_seed(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let table = Uuid::from_u128(0x5743_0000_0000_0000_0000_0000_0000_0000 | seed as u128);
    let dirs: Vec<tempfile::TempDir> = (0..5).map(|_| tempfile::tempdir().expect("tempdir")).collect();
    let ks = vec![keyspace("ks", true, vec![model_table("ks", "t", table, 864_000)])];
    let open_one = |i: usize| open_small(dirs[i].path(), &ks);
    let (a, b, c) = (open_one(0), open_one(1), open_one(2));
    let spool = dirs[3].path();
    // A year ahead of the wall clock: nothing expires or is purged under the test.
    let now = now_secs() + 365 * 24 * 3600;
    let mut model = Model::default();
    let steps = rng.gen_range(20..120);
    for _ in 0..steps {
        let action = rng.gen_range(0..100);
        if action < 4 {
            [&a, &b, &c][rng.gen_range(0..3)].flush(None).expect("flush");
        } else if action < 6 {
            [&a, &b, &c][rng.gen_range(0..3)].compact(None).expect("compact");
        } else {
            let mut gen = Gen { rng: &mut rng, table, now };
            let m = gen.op(&mut model, &mut String::new());
            let to = rng.gen_range(0..3);
            if to != 1 {
                a.apply(std::slice::from_ref(&m)).expect("apply A");
            }
            if to != 0 {
                b.apply(std::slice::from_ref(&m)).expect("apply B");
            }
            c.apply(std::slice::from_ref(&m)).expect("apply C");
        }
    }
    let range = RANGES[rng.gen_range(0..RANGES.len())];
    // Files are cut only once a 16 KiB block is written, so this model's small ranges make one
    // file each; `exports_cut_at_any_size_lose_and_add_nothing` cuts many.
    let file_bytes = 512;
    let what = format!("STREAM_SEED={seed} range {range:?}");
    let before = read_all(&b, table, now);
    let expected = read_all(&c, table, now);
    let files = a.export_ranges(&table, &[range], &spool.join("1"), file_bytes).expect("export");
    let entries: u64 = files.iter().map(|f| f.entries).sum();
    assert!(files.iter().all(|f| f.entries > 0 && f.bytes > 0), "{what}: no empty files");

    if let Some(first) = files.first() {
        // A damaged file is refused, by name, before anything is ingested.
        let good = std::fs::read(&first.path).unwrap();
        let mut bad = good.clone();
        let at = bad.len() / 2;
        bad[at] ^= 0x40;
        std::fs::write(&first.path, &bad).unwrap();
        match b.ingest_streamed(&table, &files) {
            Err(StorageError::Invalid(e)) => assert!(e.contains("damaged"), "{what}: {e}"),
            other => panic!("{what}: a damaged file was not refused: {other:?}"),
        }
        assert_eq!(read_all(&b, table, now), before, "{what}: a refused stream changed the receiver");
        std::fs::write(&first.path, &good).unwrap();
    }
    assert_eq!(b.ingest_streamed(&table, &files).expect("ingest"), entries, "{what}");
    let after = read_all(&b, table, now);
    for (i, &(token, pk)) in PARTITIONS.iter().enumerate() {
        let want = if contains(range, token) { &expected[i] } else { &before[i] };
        assert_eq!(&after[i], want, "{what}: partition pk={pk} token={token} after the stream");
    }

    // Into an empty storage, the export is exactly the sender's data of the range: no entry lost
    // or added at any file boundary.
    let empty = open_one(4);
    let copy = a.export_ranges(&table, &[range], &spool.join("3"), file_bytes).expect("export to an empty node");
    empty.ingest_streamed(&table, &copy).expect("ingest into an empty node");
    let (sent, got) = (read_all(&a, table, now), read_all(&empty, table, now));
    for (i, &(token, pk)) in PARTITIONS.iter().enumerate() {
        let want = if contains(range, token) { &sent[i] } else { &None };
        assert_eq!(&got[i], want, "{what}: partition pk={pk} token={token} in an empty receiver");
    }

    // The same range again (a retried stream) changes nothing, also after compaction.
    let again = a.export_ranges(&table, &[range], &spool.join("2"), 1 << 20).expect("export again");
    b.ingest_streamed(&table, &again).expect("ingest again");
    b.compact(None).expect("compact");
    assert_eq!(read_all(&b, table, now), after, "{what}: a second ingest changed the receiver");
}

#[test]
fn streamed_ranges_merge_into_the_receiver() {
    let seeds: Vec<u64> = match std::env::var("STREAM_SEED").ok().and_then(|s| s.parse().ok()) {
        Some(seed) => vec![seed],
        None => (0..40).collect(),
    };
    for seed in seeds {
        run_seed(seed);
    }
}

#[test]
fn an_export_holds_only_its_ranges_and_whole_ring_exports_everything() {
    let table = Uuid::from_u128(0x5743_1111);
    let dirs: Vec<tempfile::TempDir> = (0..2).map(|_| tempfile::tempdir().expect("tempdir")).collect();
    let ks = vec![keyspace("ks", true, vec![model_table("ks", "t", table, 864_000)])];
    let (s, _) = open(&config(dirs[0].path(), periodic()));
    s.set_schema(&ks).expect("set_schema");
    let mut rng = StdRng::seed_from_u64(7);
    let now = now_secs() + 365 * 24 * 3600;
    let mut model = Model::default();
    for _ in 0..200 {
        let m = Gen { rng: &mut rng, table, now }.op(&mut model, &mut String::new());
        s.apply(std::slice::from_ref(&m)).expect("apply");
    }
    let count = |ranges: &[(i64, i64)], sub: &str| -> u64 {
        let files = s.export_ranges(&table, ranges, &dirs[1].path().join(sub), 1 << 20).expect("export");
        files.iter().map(|f| f.entries).sum()
    };
    let whole = count(&[(0, 0)], "whole");
    assert!(whole > 0);
    // Disjoint ranges add up to the whole ring; overlapping ones are not counted twice.
    let parts = count(&[(i64::MIN, -1)], "a") + count(&[(-1, i64::MIN)], "b");
    assert_eq!(parts, whole);
    assert_eq!(count(&[(i64::MIN, -1), (-1, i64::MIN)], "ab"), whole);
    assert_eq!(count(&[(-2000, 7), (-1000, 8), (0, 0)], "overlap"), whole);
    assert_eq!(count(&[(8, 100)], "empty"), 0);
    assert!(dirs[1].path().join("empty").read_dir().expect("dir").next().is_none(), "no empty file is left");
    assert!(matches!(
        s.export_ranges(&Uuid::from_u128(1), &[(0, 0)], dirs[1].path(), 1),
        Err(StorageError::UnknownTable(_))
    ));
}

#[test]
fn an_export_reads_unflushed_writes_and_flushes_nothing() {
    let table = Uuid::from_u128(0x5743_2222);
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().expect("tempdir")).collect();
    let ks = vec![keyspace("ks", true, vec![model_table("ks", "t", table, 864_000)])];
    let (a, _) = open(&config(dirs[0].path(), periodic()));
    a.set_schema(&ks).expect("set_schema");
    let mut rng = StdRng::seed_from_u64(11);
    let now = now_secs() + 365 * 24 * 3600;
    let mut model = Model::default();
    let mut write = |n: usize| {
        for _ in 0..n {
            let m = Gen { rng: &mut rng, table, now }.op(&mut model, &mut String::new());
            a.apply(std::slice::from_ref(&m)).expect("apply");
        }
    };
    // Older writes in a file, newer ones (to the same partitions) only in the memtable.
    write(150);
    a.flush(None).expect("flush");
    write(150);
    let sample = |s: &Storage| {
        let t = s.table_samples().into_iter().find(|t| t.table == "t").expect("table t");
        (t.live_sstables, t.memtable_bytes)
    };
    let (files_before, mem_before) = sample(&a);
    assert!(files_before > 0 && mem_before > 0, "{files_before} files, {mem_before} memtable bytes");
    let files = a.export_ranges(&table, &[(0, 0)], dirs[1].path(), 4 << 10).expect("export");
    assert_eq!(sample(&a), (files_before, mem_before), "the export flushed the memtable");
    let (b, _) = open(&config(dirs[2].path(), periodic()));
    b.set_schema(&ks).expect("set_schema");
    b.ingest_streamed(&table, &files).expect("ingest");
    assert_eq!(read_all(&b, table, now), read_all(&a, table, now), "the receiver lacks what the memtable held");
}

/// All of a range's partition hashes, page by page (`limit` per page).
fn all_hashes(s: &Storage, table: Uuid, range: (i64, i64), limit: usize) -> Vec<storage::PartitionHash> {
    let now = now_secs() + 365 * 24 * 3600;
    let (mut out, mut after) = (Vec::new(), None::<(i64, Vec<u8>)>);
    loop {
        let page_after = after.as_ref().map(|(t, k)| (*t, k.as_slice()));
        let (page, more) = s.partition_hashes(&table, range, page_after, limit, now).expect("hashes");
        assert!(page.len() <= limit);
        if let Some(last) = page.last() {
            after = Some((last.token, last.key.clone()));
        }
        out.extend(page);
        if !more {
            return out;
        }
    }
}

#[test]
fn replicas_with_the_same_writes_hash_alike_whatever_their_files_and_pages() {
    let table = Uuid::from_u128(0x5743_2222);
    let dirs: Vec<tempfile::TempDir> = (0..2).map(|_| tempfile::tempdir().expect("tempdir")).collect();
    let ks = vec![keyspace("ks", true, vec![model_table("ks", "t", table, 864_000)])];
    let (a, b) = (open_small(dirs[0].path(), &ks), open_small(dirs[1].path(), &ks));
    let mut rng = StdRng::seed_from_u64(11);
    let now = now_secs() + 365 * 24 * 3600;
    let mut model = Model::default();
    let mut last = None;
    for i in 0..300 {
        let m = Gen { rng: &mut rng, table, now }.op(&mut model, &mut String::new());
        a.apply(std::slice::from_ref(&m)).expect("apply A");
        b.apply(std::slice::from_ref(&m)).expect("apply B");
        // Different file layouts: A flushes often and compacts, B keeps its memtable.
        if i % 37 == 0 {
            a.flush(None).expect("flush");
        }
        last = Some(m);
    }
    a.compact(None).expect("compact");
    b.compact(None).expect("compact");
    for range in RANGES {
        let whole = all_hashes(&a, table, range, usize::MAX);
        assert_eq!(whole, all_hashes(&b, table, range, usize::MAX), "range {range:?}");
        assert_eq!(whole, all_hashes(&a, table, range, 1), "paged by one, range {range:?}");
        let tokens: Vec<i64> = whole.iter().map(|h| h.token).collect();
        let expected: Vec<i64> = PARTITIONS.iter().map(|p| p.0).filter(|t| contains(range, *t)).collect();
        let mut sorted_expected = expected.clone();
        sorted_expected.sort();
        sorted_expected.dedup();
        let mut distinct = tokens.clone();
        distinct.dedup();
        assert!(distinct.iter().all(|t| sorted_expected.contains(t)), "range {range:?}: {tokens:?}");
    }
    // One more write to B alone changes exactly that partition's hash.
    let mut m = last.expect("a write");
    for row in &mut m.rows {
        for cell in &mut row.cells {
            cell.timestamp += 1_000_000;
        }
    }
    m.rows.push(types::mutation::RowWrite {
        clustering: vec![bytes::Bytes::from_static(&[0, 0, 0, 9]), bytes::Bytes::from_static(b"zz")],
        is_static: false,
        marker: Some(types::mutation::Liveness { timestamp: 9_999_999, ttl: 0, local_expiration: 0 }),
        deletion: None,
        complex_deletions: Vec::new(),
        cells: Vec::new(),
    });
    b.apply(std::slice::from_ref(&m)).expect("apply B");
    let (ha, hb) = (all_hashes(&a, table, (0, 0), 1000), all_hashes(&b, table, (0, 0), 1000));
    let differing: Vec<i64> =
        hb.iter().filter(|h| !ha.iter().any(|x| x.key == h.key && x.hash == h.hash)).map(|h| h.token).collect();
    assert_eq!(differing, vec![m.token], "only the partition written to B alone differs");
}

#[test]
fn cleanup_keeps_exactly_the_ranges_given() {
    let table = Uuid::from_u128(0x5743_3333);
    let ks = vec![keyspace("ks", true, vec![model_table("ks", "t", table, 864_000)])];
    for keep in [vec![(0, 0)], vec![(-2000, 7)], vec![(7, i64::MAX), (i64::MAX, -1000)], vec![(8, 100)], Vec::new()] {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = open_small(dir.path(), &ks);
        let mut rng = StdRng::seed_from_u64(5);
        let now = now_secs() + 365 * 24 * 3600;
        let mut model = Model::default();
        for i in 0..200 {
            let m = Gen { rng: &mut rng, table, now }.op(&mut model, &mut String::new());
            s.apply(std::slice::from_ref(&m)).expect("apply");
            if i == 100 {
                s.flush(None).expect("flush");
            }
        }
        let before = read_all(&s, table, now);
        s.cleanup(&table, &keep).expect("cleanup");
        let after = read_all(&s, table, now);
        for (i, &(token, pk)) in PARTITIONS.iter().enumerate() {
            let kept = keep.iter().any(|r| contains(*r, token));
            let want = if kept { before[i].clone() } else { None };
            assert_eq!(after[i], want, "keep {keep:?}: partition pk={pk} token={token}");
        }
        // Nothing outside `keep` is left even as raw entries (an export of the whole ring holds only kept tokens).
        let files = s.export_ranges(&table, &[(0, 0)], &dir.path().join("x"), 1 << 20).expect("export");
        let entries: u64 = files.iter().map(|f| f.entries).sum();
        let kept_entries: u64 = {
            let files = s.export_ranges(&table, &keep, &dir.path().join("y"), 1 << 20).expect("export kept");
            files.iter().map(|f| f.entries).sum()
        };
        assert_eq!(entries, if keep.is_empty() { 0 } else { kept_entries }, "keep {keep:?}");
    }
}

/// Exports of many files (`Storage::export_next` resuming after each file's
/// last key), at random file sizes and over random token ranges, into an
/// empty storage: it then holds exactly the sender's partitions of the
/// ranges and nothing else.
#[test]
fn exports_cut_at_any_size_lose_and_add_nothing() {
    for seed in 0..6u64 {
        let mut rng = StdRng::seed_from_u64(1000 + seed);
        let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().expect("tempdir")).collect();
        let (a, t) = open_kv(dirs[0].path());
        let b = open_kv_as(&config(dirs[1].path(), periodic()), t);
        let keys = rng.gen_range(300..1500);
        for pk in 0..keys {
            let value = format!("{pk}-{}", "v".repeat(rng.gen_range(50..3000)));
            a.apply(&[kv(t, pk, &value, 1)]).expect("apply");
            if rng.gen_range(0..200) == 0 {
                a.flush(None).expect("flush");
            }
        }
        let ranges: Vec<(i64, i64)> = (0..rng.gen_range(1..4)).map(|_| (rng.gen(), rng.gen())).collect();
        let file_bytes = rng.gen_range(1..=256u64 << 10);
        let what = format!("seed {} ranges {ranges:?} files of {file_bytes} bytes", 1000 + seed);
        let files = a.export_ranges(&t, &ranges, dirs[2].path(), file_bytes).expect("export");
        b.ingest_streamed(&t, &files).expect("ingest");
        let mut held = 0;
        for pk in 0..keys {
            let want = ranges.iter().any(|&r| contains(r, token_of(pk))).then(|| kv_get(&a, t, pk)).flatten();
            held += usize::from(want.is_some());
            assert_eq!(kv_get(&b, t, pk), want, "{what}: pk {pk}");
        }
        assert!(held > 0 || files.is_empty(), "{what}");
        if held > 0 && file_bytes < 32 << 10 {
            assert!(files.len() > 1, "{what}: {held} partitions in one file");
        }
    }
}
