//! The storage model shared by the randomized tests: an in-memory reference
//! of Cassandra's semantics (LWW with Cassandra's tie rules, row/range/
//! partition/collection deletions, TTLs, row markers, static rows), random
//! operations that update it and return the matching mutation, and random
//! reads. `model.rs` checks storage against it; `raw.rs` uses its operations
//! and reads to drive replicas.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::Rng;
use storage::{Cell, ColumnData, Partition, PartitionRead, Row};
use types::mutation::{ClusteringBound, DeletionTime, Liveness, Mutation, RangeTombstone, RowWrite};
use uuid::Uuid;

use super::*;
// ---------------------------------------------------------------------------
// The reference model.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Live,
    Expiring,
    Tomb,
}

#[derive(Clone, Debug, PartialEq)]
pub struct MCell {
    pub kind: Kind,
    pub ts: i64,
    pub ttl: i32,
    /// Expiry for expiring cells, deletion time for tombstones, i32::MAX for live cells.
    pub ldt: i32,
    pub value: Vec<u8>,
}

impl MCell {
    pub fn live(ts: i64, value: Vec<u8>) -> MCell {
        MCell { kind: Kind::Live, ts, ttl: 0, ldt: i32::MAX, value }
    }
    pub fn expiring(ts: i64, ttl: i32, expiry: i32, value: Vec<u8>) -> MCell {
        MCell { kind: Kind::Expiring, ts, ttl, ldt: expiry, value }
    }
    pub fn tomb(ts: i64, ldt: i32) -> MCell {
        MCell { kind: Kind::Tomb, ts, ttl: 0, ldt, value: Vec::new() }
    }
    pub fn is_live(&self, now: i32) -> bool {
        match self.kind {
            Kind::Live => true,
            Kind::Expiring => self.ldt > now,
            Kind::Tomb => false,
        }
    }
    pub fn to_cell(&self) -> Cell {
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
pub fn resolve(a: &MCell, b: &MCell) -> MCell {
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

pub fn put<K: Ord>(map: &mut BTreeMap<K, MCell>, key: K, cell: MCell) {
    match map.get_mut(&key) {
        Some(old) => *old = resolve(old, &cell),
        None => {
            map.insert(key, cell);
        }
    }
}

pub fn max_opt(slot: &mut Option<i64>, ts: i64) {
    *slot = Some(slot.map_or(ts, |t| t.max(ts)));
}

/// The int clustering value: `None` is the empty value (`blobAsInt(0x)`),
/// which Cassandra sorts before every int (as `Option`'s order does).
pub type C1 = Option<i32>;

pub fn c1_bytes(c1: C1) -> Vec<u8> {
    c1.map(|v| v.to_be_bytes().to_vec()).unwrap_or_default()
}

/// A clustering (c1 int ASC, c2 text DESC), ordered in clustering order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CKey {
    pub c1: C1,
    pub c2: Vec<u8>,
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
    pub fn clustering(&self) -> Vec<Bytes> {
        vec![Bytes::from(c1_bytes(self.c1)), Bytes::copy_from_slice(&self.c2)]
    }
}

/// A clustering prefix bound (0, 1 or 2 components).
#[derive(Clone, Debug, PartialEq)]
pub struct MBound {
    pub c1: Option<C1>,
    pub c2: Option<Vec<u8>>,
    pub incl: bool,
}

impl MBound {
    pub fn to_bound(&self) -> ClusteringBound {
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
    pub fn cmp_row(&self, k: &CKey) -> Ordering {
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
    pub fn start_admits(&self, k: &CKey) -> bool {
        if self.c1.is_none() {
            return true;
        }
        match self.cmp_row(k) {
            Ordering::Equal => self.incl,
            Ordering::Greater => true,
            Ordering::Less => false,
        }
    }
    pub fn end_admits(&self, k: &CKey) -> bool {
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

pub fn in_slice(k: &CKey, start: &MBound, end: &MBound) -> bool {
    start.start_admits(k) && end.end_admits(k)
}

#[derive(Clone, Debug, Default)]
pub struct MRow {
    pub deletion: Option<i64>,
    pub marker: Option<MCell>,
    pub simple: BTreeMap<u16, MCell>,
    pub complex_deletion: BTreeMap<u16, i64>,
    pub elements: BTreeMap<(u16, i32), MCell>,
}

impl MRow {
    /// The row as read at `now` under `shadow` (the partition/range deletion
    /// covering it), or `None` when nothing in it is live.
    pub fn read(&self, shadow: i64, now: i32) -> Option<Row> {
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
pub struct MPartition {
    pub deletion: Option<i64>,
    pub ranges: Vec<(MBound, MBound, i64)>,
    pub static_row: MRow,
    pub rows: BTreeMap<CKey, MRow>,
}

impl MPartition {
    pub fn shadow(&self, k: &CKey) -> i64 {
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
pub const PARTITIONS: [(i64, i32); 4] = [(-1000, 5), (7, 3), (7, -1), (i64::MAX, 9)];

pub fn pk_bytes(pk: i32) -> Vec<u8> {
    pk.to_be_bytes().to_vec()
}

#[derive(Default)]
pub struct Model {
    pub parts: BTreeMap<i32, MPartition>,
    /// Partitions that hold any entry in storage (shadowed or not).
    pub written: BTreeSet<i32>,
}

pub struct ReadSpec {
    pub ranges: Vec<(MBound, MBound)>,
    pub reversed: bool,
    pub include_static: bool,
    pub row_limit: usize,
    pub now: i32,
}

impl ReadSpec {
    pub fn full(now: i32) -> ReadSpec {
        ReadSpec { ranges: Vec::new(), reversed: false, include_static: true, row_limit: usize::MAX, now }
    }
    pub fn to_read(&self, table: Uuid, token: i64, pk: i32) -> PartitionRead {
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
    pub fn describe(&self) -> String {
        format!(
            "ranges={:?} reversed={} include_static={} row_limit={} now=+{}",
            self.ranges, self.reversed, self.include_static, self.row_limit, self.now
        )
    }
}

impl Model {
    pub fn read(&self, token: i64, pk: i32, spec: &ReadSpec) -> Option<Partition> {
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
    pub fn ordered_partitions(&self) -> Vec<(i64, i32)> {
        let mut v: Vec<(i64, i32)> = PARTITIONS.iter().copied().filter(|(_, pk)| self.written.contains(pk)).collect();
        v.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| pk_bytes(a.1).cmp(&pk_bytes(b.1))));
        v
    }
}

// ---------------------------------------------------------------------------
// Random operations.

pub const C1_VALUES: [i32; 7] = [-3, -1, 0, 1, 2, 3, 5];
pub const C2_VALUES: [&str; 8] = ["", "a", "ab", "b", "\u{0}", "a\u{0}", "é", "zz"];
pub const TEXT_VALUES: [&str; 5] = ["", "x", "xy", "y", "\u{0}z"];

pub fn rand_c1(rng: &mut StdRng) -> C1 {
    match rng.gen_range(0..40) {
        0 => Some(i32::MIN),
        1 => Some(i32::MAX),
        2 => None,
        _ => Some(C1_VALUES[rng.gen_range(0..C1_VALUES.len())]),
    }
}

pub fn rand_c2(rng: &mut StdRng) -> Vec<u8> {
    C2_VALUES[rng.gen_range(0..C2_VALUES.len())].as_bytes().to_vec()
}

pub fn rand_ckey(rng: &mut StdRng) -> CKey {
    CKey { c1: rand_c1(rng), c2: rand_c2(rng) }
}

pub fn rand_ts(rng: &mut StdRng) -> i64 {
    if rng.gen_range(0..50) == 0 {
        rng.gen_range(100..200)
    } else {
        rng.gen_range(2..=40)
    }
}

pub fn rand_text(rng: &mut StdRng) -> Vec<u8> {
    TEXT_VALUES[rng.gen_range(0..TEXT_VALUES.len())].as_bytes().to_vec()
}

pub fn rand_int_value(rng: &mut StdRng) -> Vec<u8> {
    rng.gen_range(-2i32..4).to_be_bytes().to_vec()
}

pub fn rand_elem(rng: &mut StdRng) -> i32 {
    match rng.gen_range(0..30) {
        0 => i32::MIN,
        1 => i32::MAX,
        _ => rng.gen_range(-3..5),
    }
}

pub fn rand_bound(rng: &mut StdRng) -> MBound {
    let len = rng.gen_range(0..3);
    let incl = rng.gen_bool(0.5);
    match len {
        0 => MBound { c1: None, c2: None, incl },
        1 => MBound { c1: Some(if rng.gen_bool(0.1) { Some(4) } else { rand_c1(rng) }), c2: None, incl },
        _ => MBound { c1: Some(rand_c1(rng)), c2: Some(rand_c2(rng)), incl },
    }
}

/// A random slice; usually start <= end in clustering order.
pub fn rand_slice(rng: &mut StdRng) -> (MBound, MBound) {
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
pub fn rand_multi_slices(rng: &mut StdRng) -> Vec<(MBound, MBound)> {
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

pub struct Gen<'a> {
    pub rng: &'a mut StdRng,
    pub table: Uuid,
    pub now: i32,
}

impl Gen<'_> {
    pub fn ttl(&mut self) -> i32 {
        if self.rng.gen_range(0..4) == 0 {
            self.rng.gen_range(1..30)
        } else {
            0
        }
    }

    /// One random operation on one partition: applied to the model, returned as a mutation.
    pub fn op(&mut self, model: &mut Model, log: &mut String) -> Mutation {
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

pub fn mk(now: i32, ts: i64, ttl: i32, value: Vec<u8>) -> MCell {
    if ttl > 0 {
        MCell::expiring(ts, ttl, now + ttl, value)
    } else {
        MCell::live(ts, value)
    }
}

pub fn max_into(map: &mut BTreeMap<u16, i64>, col: u16, ts: i64) {
    let e = map.entry(col).or_insert(ts);
    *e = (*e).max(ts);
}

pub fn cellwrite(column: u16, path: Option<i32>, c: &MCell) -> types::mutation::CellWrite {
    types::mutation::CellWrite {
        column,
        path: path.map(int),
        timestamp: c.ts,
        ttl: if c.kind == Kind::Expiring { c.ttl } else { 0 },
        local_deletion_time: if c.kind == Kind::Live { 0 } else { c.ldt },
        value: if c.kind == Kind::Tomb { None } else { Some(Bytes::copy_from_slice(&c.value)) },
    }
}

/// The rows that differ between two answers, for the failure message.
pub fn diff(expected: &Option<Partition>, actual: &Option<Partition>) -> String {
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
