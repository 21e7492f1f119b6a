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

mod common;

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::time::Instant;

use bytes::Bytes;
use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use storage::{Cell, ColumnData, Partition, PartitionRead, Row, ScanRange, Storage, StorageConfig};
use types::mutation::{ClusteringBound, DeletionTime, Liveness, Mutation, RangeTombstone, RowWrite};
use types::schema::KeyspaceDef;
use uuid::Uuid;

// ---------------------------------------------------------------------------
// The reference model.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Live,
    Expiring,
    Tomb,
}

#[derive(Clone, Debug, PartialEq)]
struct MCell {
    kind: Kind,
    ts: i64,
    ttl: i32,
    /// Expiry for expiring cells, deletion time for tombstones, i32::MAX for live cells.
    ldt: i32,
    value: Vec<u8>,
}

impl MCell {
    fn live(ts: i64, value: Vec<u8>) -> MCell {
        MCell { kind: Kind::Live, ts, ttl: 0, ldt: i32::MAX, value }
    }
    fn expiring(ts: i64, ttl: i32, expiry: i32, value: Vec<u8>) -> MCell {
        MCell { kind: Kind::Expiring, ts, ttl, ldt: expiry, value }
    }
    fn tomb(ts: i64, ldt: i32) -> MCell {
        MCell { kind: Kind::Tomb, ts, ttl: 0, ldt, value: Vec::new() }
    }
    fn is_live(&self, now: i32) -> bool {
        match self.kind {
            Kind::Live => true,
            Kind::Expiring => self.ldt > now,
            Kind::Tomb => false,
        }
    }
    fn to_cell(&self) -> Cell {
        let expiring = self.kind == Kind::Expiring;
        Cell {
            value: self.value.clone(),
            timestamp: self.ts,
            ttl: if expiring { self.ttl } else { 0 },
            local_expiration: if expiring { self.ldt } else { 0 },
        }
    }
}

/// Cassandra's `Cells.resolveRegular`: higher timestamp; on a tie, tombstones
/// and expiring cells beat live cells, tombstones beat expiring cells, the
/// later local deletion time wins, then the greater value.
fn resolve(a: &MCell, b: &MCell) -> MCell {
    if a.ts != b.ts {
        return if a.ts > b.ts { a.clone() } else { b.clone() };
    }
    let a_dying = a.kind != Kind::Live;
    let b_dying = b.kind != Kind::Live;
    if a_dying || b_dying {
        if a_dying != b_dying {
            return if a_dying { a.clone() } else { b.clone() };
        }
        let a_tomb = a.kind == Kind::Tomb;
        let b_tomb = b.kind == Kind::Tomb;
        if a_tomb != b_tomb {
            return if a_tomb { a.clone() } else { b.clone() };
        }
        if a.ldt != b.ldt {
            return if a.ldt > b.ldt { a.clone() } else { b.clone() };
        }
    }
    if a.value >= b.value {
        a.clone()
    } else {
        b.clone()
    }
}

fn put<K: Ord>(map: &mut BTreeMap<K, MCell>, key: K, cell: MCell) {
    match map.get_mut(&key) {
        Some(old) => *old = resolve(old, &cell),
        None => {
            map.insert(key, cell);
        }
    }
}

fn max_opt(slot: &mut Option<i64>, ts: i64) {
    *slot = Some(slot.map_or(ts, |t| t.max(ts)));
}

/// The int clustering value: `None` is the empty value (`blobAsInt(0x)`),
/// which Cassandra sorts before every int (as `Option`'s order does).
type C1 = Option<i32>;

fn c1_bytes(c1: C1) -> Vec<u8> {
    c1.map(|v| v.to_be_bytes().to_vec()).unwrap_or_default()
}

/// A clustering (c1 int ASC, c2 text DESC), ordered in clustering order.
#[derive(Clone, Debug, PartialEq, Eq)]
struct CKey {
    c1: C1,
    c2: Vec<u8>,
}

impl Ord for CKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.c1.cmp(&other.c1).then_with(|| other.c2.cmp(&self.c2))
    }
}

impl PartialOrd for CKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl CKey {
    fn clustering(&self) -> Vec<Bytes> {
        vec![Bytes::from(c1_bytes(self.c1)), Bytes::copy_from_slice(&self.c2)]
    }
}

/// A clustering prefix bound (0, 1 or 2 components).
#[derive(Clone, Debug, PartialEq)]
struct MBound {
    c1: Option<C1>,
    c2: Option<Vec<u8>>,
    incl: bool,
}

impl MBound {
    fn to_bound(&self) -> ClusteringBound {
        let mut prefix = Vec::new();
        if let Some(c1) = self.c1 {
            prefix.push(Bytes::from(c1_bytes(c1)));
            if let Some(c2) = &self.c2 {
                prefix.push(Bytes::copy_from_slice(c2));
            }
        }
        ClusteringBound { prefix, inclusive: self.incl }
    }
    /// The row's clustering, cut to this bound's length, against the bound, in clustering order.
    fn cmp_row(&self, k: &CKey) -> Ordering {
        match self.c1 {
            None => Ordering::Equal,
            Some(c1) => match k.c1.cmp(&c1) {
                Ordering::Equal => match &self.c2 {
                    None => Ordering::Equal,
                    Some(c2) => c2.cmp(&k.c2), // DESC
                },
                o => o,
            },
        }
    }
    fn start_admits(&self, k: &CKey) -> bool {
        if self.c1.is_none() {
            return true;
        }
        match self.cmp_row(k) {
            Ordering::Equal => self.incl,
            Ordering::Greater => true,
            Ordering::Less => false,
        }
    }
    fn end_admits(&self, k: &CKey) -> bool {
        if self.c1.is_none() {
            return true;
        }
        match self.cmp_row(k) {
            Ordering::Equal => self.incl,
            Ordering::Less => true,
            Ordering::Greater => false,
        }
    }
}

fn in_slice(k: &CKey, start: &MBound, end: &MBound) -> bool {
    start.start_admits(k) && end.end_admits(k)
}

#[derive(Clone, Debug, Default)]
struct MRow {
    deletion: Option<i64>,
    marker: Option<MCell>,
    simple: BTreeMap<u16, MCell>,
    complex_deletion: BTreeMap<u16, i64>,
    elements: BTreeMap<(u16, i32), MCell>,
}

impl MRow {
    /// The row as read at `now` under `shadow` (the partition/range deletion
    /// covering it), or `None` when nothing in it is live.
    fn read(&self, shadow: i64, now: i32) -> Option<Row> {
        let shadow = shadow.max(self.deletion.unwrap_or(i64::MIN));
        let marker = self.marker.as_ref().filter(|m| m.ts > shadow && m.is_live(now)).map(|m| Liveness {
            timestamp: m.ts,
            ttl: if m.kind == Kind::Expiring { m.ttl } else { 0 },
            local_expiration: if m.kind == Kind::Expiring { m.ldt } else { 0 },
        });
        let mut columns: Vec<(u16, ColumnData)> = Vec::new();
        for (col, c) in &self.simple {
            if c.ts > shadow && c.is_live(now) {
                columns.push((*col, ColumnData::Simple(c.to_cell())));
            }
        }
        let mut complex: BTreeMap<u16, Vec<(Vec<u8>, Cell)>> = BTreeMap::new();
        for ((col, path), c) in &self.elements {
            let col_shadow = shadow.max(self.complex_deletion.get(col).copied().unwrap_or(i64::MIN));
            if c.ts > col_shadow && c.is_live(now) {
                complex.entry(*col).or_default().push((path.to_be_bytes().to_vec(), c.to_cell()));
            }
        }
        for (col, items) in complex {
            columns.push((col, ColumnData::Complex(items)));
        }
        columns.sort_by_key(|(c, _)| *c);
        if marker.is_none() && columns.is_empty() {
            return None;
        }
        Some(Row { clustering: Vec::new(), marker, columns })
    }
}

#[derive(Clone, Debug, Default)]
struct MPartition {
    deletion: Option<i64>,
    ranges: Vec<(MBound, MBound, i64)>,
    static_row: MRow,
    rows: BTreeMap<CKey, MRow>,
}

impl MPartition {
    fn shadow(&self, k: &CKey) -> i64 {
        let mut max = self.deletion.unwrap_or(i64::MIN);
        for (s, e, ts) in &self.ranges {
            if in_slice(k, s, e) {
                max = max.max(*ts);
            }
        }
        max
    }
}

/// Partitions: (token, pk). Two share a token on purpose.
const PARTITIONS: [(i64, i32); 4] = [(-1000, 5), (7, 3), (7, -1), (i64::MAX, 9)];

fn pk_bytes(pk: i32) -> Vec<u8> {
    pk.to_be_bytes().to_vec()
}

#[derive(Default)]
struct Model {
    parts: BTreeMap<i32, MPartition>,
    /// Partitions that hold any entry in storage (shadowed or not).
    written: BTreeSet<i32>,
}

struct ReadSpec {
    ranges: Vec<(MBound, MBound)>,
    reversed: bool,
    include_static: bool,
    row_limit: usize,
    now: i32,
}

impl ReadSpec {
    fn full(now: i32) -> ReadSpec {
        ReadSpec { ranges: Vec::new(), reversed: false, include_static: true, row_limit: usize::MAX, now }
    }
    fn to_read(&self, table: Uuid, token: i64, pk: i32) -> PartitionRead {
        PartitionRead {
            table,
            token,
            partition_key: pk_bytes(pk),
            ranges: self.ranges.iter().map(|(s, e)| (s.to_bound(), e.to_bound())).collect(),
            reversed: self.reversed,
            include_static: self.include_static,
            row_limit: self.row_limit,
            now: self.now,
        }
    }
    fn describe(&self) -> String {
        format!(
            "ranges={:?} reversed={} include_static={} row_limit={} now=+{}",
            self.ranges, self.reversed, self.include_static, self.row_limit, self.now
        )
    }
}

impl Model {
    fn read(&self, token: i64, pk: i32, spec: &ReadSpec) -> Option<Partition> {
        let part = self.parts.get(&pk)?;
        let static_row =
            if spec.include_static { part.static_row.read(part.deletion.unwrap_or(i64::MIN), spec.now) } else { None };
        let mut rows = Vec::new();
        for (k, r) in &part.rows {
            let selected = spec.ranges.is_empty() || spec.ranges.iter().any(|(s, e)| in_slice(k, s, e));
            if !selected {
                continue;
            }
            if let Some(mut row) = r.read(part.shadow(k), spec.now) {
                row.clustering = vec![c1_bytes(k.c1), k.c2.clone()];
                rows.push(row);
            }
        }
        if spec.reversed {
            rows.reverse();
        }
        rows.truncate(spec.row_limit);
        if rows.is_empty() && static_row.is_none() {
            return None;
        }
        Some(Partition { token, key: pk_bytes(pk), static_row, rows })
    }

    /// Partitions in storage order: token, then length-prefixed key bytes.
    fn ordered_partitions(&self) -> Vec<(i64, i32)> {
        let mut v: Vec<(i64, i32)> = PARTITIONS.iter().copied().filter(|(_, pk)| self.written.contains(pk)).collect();
        v.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| pk_bytes(a.1).cmp(&pk_bytes(b.1))));
        v
    }
}

// ---------------------------------------------------------------------------
// Random operations.

const C1_VALUES: [i32; 7] = [-3, -1, 0, 1, 2, 3, 5];
const C2_VALUES: [&str; 8] = ["", "a", "ab", "b", "\u{0}", "a\u{0}", "é", "zz"];
const TEXT_VALUES: [&str; 5] = ["", "x", "xy", "y", "\u{0}z"];

fn rand_c1(rng: &mut StdRng) -> C1 {
    match rng.gen_range(0..40) {
        0 => Some(i32::MIN),
        1 => Some(i32::MAX),
        2 => None,
        _ => Some(C1_VALUES[rng.gen_range(0..C1_VALUES.len())]),
    }
}

fn rand_c2(rng: &mut StdRng) -> Vec<u8> {
    C2_VALUES[rng.gen_range(0..C2_VALUES.len())].as_bytes().to_vec()
}

fn rand_ckey(rng: &mut StdRng) -> CKey {
    CKey { c1: rand_c1(rng), c2: rand_c2(rng) }
}

fn rand_ts(rng: &mut StdRng) -> i64 {
    if rng.gen_range(0..50) == 0 {
        rng.gen_range(100..200)
    } else {
        rng.gen_range(2..=40)
    }
}

fn rand_text(rng: &mut StdRng) -> Vec<u8> {
    TEXT_VALUES[rng.gen_range(0..TEXT_VALUES.len())].as_bytes().to_vec()
}

fn rand_int_value(rng: &mut StdRng) -> Vec<u8> {
    rng.gen_range(-2i32..4).to_be_bytes().to_vec()
}

fn rand_elem(rng: &mut StdRng) -> i32 {
    match rng.gen_range(0..30) {
        0 => i32::MIN,
        1 => i32::MAX,
        _ => rng.gen_range(-3..5),
    }
}

fn rand_bound(rng: &mut StdRng) -> MBound {
    let len = rng.gen_range(0..3);
    let incl = rng.gen_bool(0.5);
    match len {
        0 => MBound { c1: None, c2: None, incl },
        1 => MBound { c1: Some(if rng.gen_bool(0.1) { Some(4) } else { rand_c1(rng) }), c2: None, incl },
        _ => MBound { c1: Some(rand_c1(rng)), c2: Some(rand_c2(rng)), incl },
    }
}

/// A random slice; usually start <= end in clustering order.
fn rand_slice(rng: &mut StdRng) -> (MBound, MBound) {
    loop {
        let a = rand_bound(rng);
        let b = rand_bound(rng);
        let a_before_b = match (a.c1, b.c1) {
            (Some(x), Some(y)) => {
                CKey { c1: x, c2: a.c2.clone().unwrap_or_default() }
                    <= CKey { c1: y, c2: b.c2.clone().unwrap_or_default() }
            }
            _ => true,
        };
        if a_before_b || rng.gen_bool(0.15) {
            return (a, b);
        }
    }
}

/// Disjoint slices in clustering order, as an IN restriction produces them.
fn rand_multi_slices(rng: &mut StdRng) -> Vec<(MBound, MBound)> {
    if rng.gen_bool(0.5) {
        let mut c1s: Vec<C1> = (0..rng.gen_range(1..4)).map(|_| rand_c1(rng)).collect();
        c1s.sort();
        c1s.dedup();
        c1s.into_iter()
            .map(|c| {
                let b = MBound { c1: Some(c), c2: None, incl: true };
                (b.clone(), b)
            })
            .collect()
    } else {
        let mut ks: Vec<CKey> = (0..rng.gen_range(1..5)).map(|_| rand_ckey(rng)).collect();
        ks.sort();
        ks.dedup();
        ks.into_iter()
            .map(|k| {
                let b = MBound { c1: Some(k.c1), c2: Some(k.c2), incl: true };
                (b.clone(), b)
            })
            .collect()
    }
}

struct Gen<'a> {
    rng: &'a mut StdRng,
    table: Uuid,
    now: i32,
}

impl Gen<'_> {
    fn ttl(&mut self) -> i32 {
        if self.rng.gen_range(0..4) == 0 {
            self.rng.gen_range(1..30)
        } else {
            0
        }
    }

    /// One random operation on one partition: applied to the model, returned as a mutation.
    fn op(&mut self, model: &mut Model, log: &mut String) -> Mutation {
        let (token, pk) = PARTITIONS[self.rng.gen_range(0..PARTITIONS.len())];
        let mut m = Mutation::new(self.table, token, int(pk));
        model.written.insert(pk);
        let now = self.now;
        let part = model.parts.entry(pk).or_default();
        let kind = self.rng.gen_range(0..100);
        let ts = rand_ts(self.rng);
        match kind {
            // Regular cell write (maybe TTL'd).
            0..=19 => {
                let k = rand_ckey(self.rng);
                let ttl = self.ttl();
                let (col, value) =
                    if self.rng.gen_bool(0.5) { (A, rand_int_value(self.rng)) } else { (B, rand_text(self.rng)) };
                let c = mk(now, ts, ttl, value.clone());
                *log = format!("pk={pk} update row {k:?} col {col} = {value:?} ts={ts} ttl={ttl}");
                put(&mut part.rows.entry(k.clone()).or_default().simple, col, c.clone());
                let mut r = row(k.clustering());
                r.cells.push(cellwrite(col, None, &c));
                m.rows.push(r);
            }
            // Static cell write, sometimes with a regular row in the same mutation.
            20..=27 => {
                let ttl = self.ttl();
                let value = rand_int_value(self.rng);
                let c = mk(now, ts, ttl, value.clone());
                *log = format!("pk={pk} update static s = {value:?} ts={ts} ttl={ttl}");
                put(&mut part.static_row.simple, S, c.clone());
                let mut r = RowWrite { is_static: true, ..RowWrite::default() };
                r.cells.push(cellwrite(S, None, &c));
                m.rows.push(r);
                if self.rng.gen_bool(0.3) {
                    let k = rand_ckey(self.rng);
                    let c = mk(now, ts, ttl, rand_text(self.rng));
                    log.push_str(&format!(" + row {k:?} b = {:?}", c.value));
                    put(&mut part.rows.entry(k.clone()).or_default().simple, B, c.clone());
                    let mut r = row(k.clustering());
                    r.cells.push(cellwrite(B, None, &c));
                    m.rows.push(r);
                }
            }
            // INSERT: row marker + columns, same timestamp and TTL.
            28..=41 => {
                let k = rand_ckey(self.rng);
                let ttl = self.ttl();
                let mc = mk(now, ts, ttl, Vec::new());
                let mut r = row(k.clustering());
                r.marker = Some(Liveness { timestamp: ts, ttl, local_expiration: if ttl > 0 { now + ttl } else { 0 } });
                let mrow = part.rows.entry(k.clone()).or_default();
                mrow.marker = Some(match &mrow.marker {
                    Some(old) => resolve(old, &mc),
                    None => mc,
                });
                *log = format!("pk={pk} insert row {k:?} ts={ts} ttl={ttl}");
                if self.rng.gen_bool(0.7) {
                    let c = mk(now, ts, ttl, rand_int_value(self.rng));
                    log.push_str(&format!(" a={:?}", c.value));
                    put(&mut mrow.simple, A, c.clone());
                    r.cells.push(cellwrite(A, None, &c));
                }
                if self.rng.gen_bool(0.5) {
                    let c = mk(now, ts, ttl, rand_text(self.rng));
                    log.push_str(&format!(" b={:?}", c.value));
                    put(&mut mrow.simple, B, c.clone());
                    r.cells.push(cellwrite(B, None, &c));
                }
                if self.rng.gen_bool(0.3) {
                    // Inserting a collection replaces it.
                    let cd = DeletionTime { timestamp: ts - 1, local_deletion_time: now };
                    r.complex_deletions.push((SET, cd));
                    max_into(&mut mrow.complex_deletion, SET, ts - 1);
                    let elems: BTreeSet<i32> = (0..self.rng.gen_range(0..3)).map(|_| rand_elem(self.rng)).collect();
                    log.push_str(&format!(" c={elems:?}"));
                    for e in elems {
                        let c = mk(now, ts, ttl, Vec::new());
                        put(&mut mrow.elements, (SET, e), c.clone());
                        r.cells.push(cellwrite(SET, Some(e), &c));
                    }
                }
                m.rows.push(r);
            }
            // Cell deletion (regular or static).
            42..=49 => {
                let c = MCell::tomb(ts, now);
                if self.rng.gen_bool(0.25) {
                    *log = format!("pk={pk} delete static s ts={ts}");
                    put(&mut part.static_row.simple, S, c.clone());
                    let mut r = RowWrite { is_static: true, ..RowWrite::default() };
                    r.cells.push(cellwrite(S, None, &c));
                    m.rows.push(r);
                } else {
                    let k = rand_ckey(self.rng);
                    let col = if self.rng.gen_bool(0.5) { A } else { B };
                    *log = format!("pk={pk} delete cell {k:?} col {col} ts={ts}");
                    put(&mut part.rows.entry(k.clone()).or_default().simple, col, c.clone());
                    let mut r = row(k.clustering());
                    r.cells.push(cellwrite(col, None, &c));
                    m.rows.push(r);
                }
            }
            // Row deletion.
            50..=57 => {
                let k = rand_ckey(self.rng);
                *log = format!("pk={pk} delete row {k:?} ts={ts}");
                max_opt(&mut part.rows.entry(k.clone()).or_default().deletion, ts);
                let mut r = row(k.clustering());
                r.deletion = Some(DeletionTime { timestamp: ts, local_deletion_time: now });
                m.rows.push(r);
            }
            // Range deletion.
            58..=64 => {
                let (s, e) = rand_slice(self.rng);
                *log = format!("pk={pk} delete range {s:?} .. {e:?} ts={ts}");
                part.ranges.push((s.clone(), e.clone(), ts));
                m.range_tombstones.push(RangeTombstone {
                    start: s.to_bound(),
                    end: e.to_bound(),
                    deletion: DeletionTime { timestamp: ts, local_deletion_time: now },
                });
            }
            // Partition deletion (rarer, and with a lower timestamp so it does not wipe everything).
            65..=67 => {
                let ts = self.rng.gen_range(1..25);
                *log = format!("pk={pk} delete partition ts={ts}");
                max_opt(&mut part.deletion, ts);
                m.partition_deletion = Some(DeletionTime { timestamp: ts, local_deletion_time: now });
            }
            // Collection element adds (set or map), maybe TTL'd.
            68..=79 => {
                let k = rand_ckey(self.rng);
                let ttl = self.ttl();
                let col = if self.rng.gen_bool(0.5) { SET } else { MAP };
                let mrow = part.rows.entry(k.clone()).or_default();
                let mut r = row(k.clustering());
                *log = format!("pk={pk} add to {k:?} col {col} ts={ts} ttl={ttl}:");
                for _ in 0..self.rng.gen_range(1..4) {
                    let e = rand_elem(self.rng);
                    let value = if col == SET { Vec::new() } else { rand_text(self.rng) };
                    let c = if ttl > 0 { MCell::expiring(ts, ttl, now + ttl, value) } else { MCell::live(ts, value) };
                    log.push_str(&format!(" {e}=>{:?}", c.value));
                    put(&mut mrow.elements, (col, e), c.clone());
                    r.cells.push(cellwrite(col, Some(e), &c));
                }
                m.rows.push(r);
            }
            // Collection element removals.
            80..=86 => {
                let k = rand_ckey(self.rng);
                let col = if self.rng.gen_bool(0.5) { SET } else { MAP };
                let mrow = part.rows.entry(k.clone()).or_default();
                let mut r = row(k.clustering());
                *log = format!("pk={pk} remove from {k:?} col {col} ts={ts}:");
                for _ in 0..self.rng.gen_range(1..3) {
                    let e = rand_elem(self.rng);
                    let c = MCell::tomb(ts, now);
                    log.push_str(&format!(" {e}"));
                    put(&mut mrow.elements, (col, e), c.clone());
                    r.cells.push(cellwrite(col, Some(e), &c));
                }
                m.rows.push(r);
            }
            // Whole-collection overwrite: complex deletion at ts-1 + new elements at ts.
            87..=93 => {
                let k = rand_ckey(self.rng);
                let ttl = self.ttl();
                let col = if self.rng.gen_bool(0.5) { SET } else { MAP };
                let mrow = part.rows.entry(k.clone()).or_default();
                let mut r = row(k.clustering());
                r.complex_deletions.push((col, DeletionTime { timestamp: ts - 1, local_deletion_time: now }));
                max_into(&mut mrow.complex_deletion, col, ts - 1);
                *log = format!("pk={pk} overwrite {k:?} col {col} ts={ts} ttl={ttl}:");
                let elems: BTreeSet<i32> = (0..self.rng.gen_range(0..4)).map(|_| rand_elem(self.rng)).collect();
                for e in elems {
                    let value = if col == SET { Vec::new() } else { rand_text(self.rng) };
                    let c = if ttl > 0 { MCell::expiring(ts, ttl, now + ttl, value) } else { MCell::live(ts, value) };
                    log.push_str(&format!(" {e}=>{:?}", c.value));
                    put(&mut mrow.elements, (col, e), c.clone());
                    r.cells.push(cellwrite(col, Some(e), &c));
                }
                m.rows.push(r);
            }
            // Whole-collection deletion (DELETE c FROM ...).
            _ => {
                let k = rand_ckey(self.rng);
                let col = if self.rng.gen_bool(0.5) { SET } else { MAP };
                *log = format!("pk={pk} delete collection {k:?} col {col} ts={ts}");
                max_into(&mut part.rows.entry(k.clone()).or_default().complex_deletion, col, ts);
                let mut r = row(k.clustering());
                r.complex_deletions.push((col, DeletionTime { timestamp: ts, local_deletion_time: now }));
                m.rows.push(r);
            }
        }
        m
    }
}

fn mk(now: i32, ts: i64, ttl: i32, value: Vec<u8>) -> MCell {
    if ttl > 0 {
        MCell::expiring(ts, ttl, now + ttl, value)
    } else {
        MCell::live(ts, value)
    }
}

fn max_into(map: &mut BTreeMap<u16, i64>, col: u16, ts: i64) {
    let e = map.entry(col).or_insert(ts);
    *e = (*e).max(ts);
}

fn cellwrite(column: u16, path: Option<i32>, c: &MCell) -> types::mutation::CellWrite {
    types::mutation::CellWrite {
        column,
        path: path.map(int),
        timestamp: c.ts,
        ttl: if c.kind == Kind::Expiring { c.ttl } else { 0 },
        local_deletion_time: if c.kind == Kind::Live { 0 } else { c.ldt },
        value: if c.kind == Kind::Tomb { None } else { Some(Bytes::copy_from_slice(&c.value)) },
    }
}

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

/// The rows that differ between two answers, for the failure message.
fn diff(expected: &Option<Partition>, actual: &Option<Partition>) -> String {
    let (Some(e), Some(a)) = (expected, actual) else {
        return format!(
            "\n  differences: partition present in expected: {}, in actual: {}",
            expected.is_some(),
            actual.is_some()
        );
    };
    let mut out = String::from("\n  differences:");
    if e.static_row != a.static_row {
        out.push_str(&format!("\n    static: expected {:?}\n            actual   {:?}", e.static_row, a.static_row));
    }
    let key = |r: &Row| r.clustering.clone();
    let ek: Vec<_> = e.rows.iter().map(key).collect();
    let ak: Vec<_> = a.rows.iter().map(key).collect();
    if ek != ak {
        out.push_str(&format!("\n    row order/presence: expected {ek:?}\n                        actual   {ak:?}"));
    }
    for r in &e.rows {
        if let Some(o) = a.rows.iter().find(|o| o.clustering == r.clustering) {
            if o != r {
                out.push_str(&format!("\n    row {:?}: expected {:?}\n            actual   {:?}", r.clustering, r, o));
            }
        }
    }
    out
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
    let cases: Vec<(&str, Vec<types::mutation::CellWrite>, Option<Vec<u8>>)> = vec![
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
