//! Randomized, model-based paging test against a real `shoal server` process
//! (scylla Rust driver, unprepared statements).
//!
//! A seeded generator makes random tables (1 or 2 partition key columns of
//! int / text / bigint, 0-2 clustering columns of int / text, each ASC or
//! DESC, sometimes a static column, 1-2 regular columns) and fills them with
//! random data: rows written by INSERT (row marker) or UPDATE (no marker),
//! cells set to null, row, clustering range and partition deletions,
//! static-only partitions, and rows and partitions written `USING TTL 1` that
//! have expired by the time the queries run. Every write carries an explicit,
//! increasing `USING TIMESTAMP`, so an in-memory model (Cassandra's rules:
//! a row is live while it has a live row marker or a live cell; a partition
//! without live rows but with live static cells shows as one row when the
//! clustering columns are unrestricted) knows exactly what must be live.
//!
//! Each query case (full scans, `SELECT DISTINCT`, LIMIT, PER PARTITION
//! LIMIT, token ranges, single partitions with clustering slices and ORDER BY,
//! partition key IN) runs unpaged and then page by page at a random page size.
//! It fails when paging does not end (more pages than rows + 5), when a page
//! holds more rows than the page size, when the pages put together differ
//! from the unpaged result row for row, or when the unpaged result differs
//! from the model (in Cassandra's order: partitions by Murmur3 token, rows by
//! clustering order; for IN queries, partition by partition).
//!
//! Environment:
//! - `PAGING_SEED`: the master seed (decimal or 0x hex); default a fixed one.
//!   Each of the tables gets a seed derived from it.
//! - `PAGING_CASES`: the number of query cases over all tables (default 3000).
//! - `PAGING_TABLE`: run only the table with this index (to replay a failure
//!   with the same `PAGING_SEED` and `PAGING_CASES`).
//!
//! `paging_regressions` holds the fixed cases of the bug report: 1,000
//! single-row partitions at page sizes 100 and 7, and a 3 x 3 table at page
//! sizes 1 to 4, each row exactly once.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::response::PagingState;
use scylla::statement::unprepared::Statement;
use scylla::value::{CqlValue, Row};

mod common;
use common::Node;

const KS: &str = "paging_model";
const DEFAULT_SEED: u64 = 0x5EED_0000_2B1D_7A31;
const DEFAULT_CASES: usize = 3000;
const TABLES: usize = 24;
/// Microseconds; every write's `USING TIMESTAMP` counts up from here.
const TIMESTAMP_BASE: i64 = 1_700_000_000_000_000;

// ---------------------------------------------------------------------------
// A small seeded PRNG (SplitMix64).

struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    /// Uniform in `lo..=hi` (small ranges only).
    fn between(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as i64
    }

    fn percent(&mut self, p: u64) -> bool {
        self.next_u64() % 100 < p
    }

    fn pick<T: Clone>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())].clone()
    }
}

/// The seed of table `i` under master seed `seed`.
fn derive_seed(seed: u64, i: u64) -> u64 {
    let mut r = Rng::new(seed ^ i.wrapping_mul(0xD1B5_4A32_D192_ED03));
    r.next_u64()
}

// ---------------------------------------------------------------------------
// Schema and values.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ty {
    Int,
    BigInt,
    Text,
}

impl Ty {
    fn cql(self) -> &'static str {
        match self {
            Ty::Int => "int",
            Ty::BigInt => "bigint",
            Ty::Text => "text",
        }
    }
}

/// A value; within one column all values have the same variant, and the
/// derived order is Cassandra's order for the type (text: bytewise).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Val {
    Int(i32),
    Big(i64),
    Text(String),
}

impl Val {
    /// The CQL literal (text values hold only [a-z0-9]).
    fn literal(&self) -> String {
        match self {
            Val::Int(i) => i.to_string(),
            Val::Big(b) => b.to_string(),
            Val::Text(s) => format!("'{s}'"),
        }
    }

    /// The serialized value, as hashed into a partition key.
    fn bytes(&self) -> Vec<u8> {
        match self {
            Val::Int(i) => i.to_be_bytes().to_vec(),
            Val::Big(b) => b.to_be_bytes().to_vec(),
            Val::Text(s) => s.as_bytes().to_vec(),
        }
    }
}

fn show_value(v: &Option<Val>) -> String {
    match v {
        None => "null".to_string(),
        Some(v) => v.literal(),
    }
}

fn show_row(r: &[Option<Val>]) -> String {
    format!("({})", r.iter().map(show_value).collect::<Vec<_>>().join(", "))
}

#[derive(Clone, Copy)]
enum Role {
    Key,
    Clustering,
    Value,
}

fn gen_text(rng: &mut Rng, alphabet: &[u8], min: usize, max: usize) -> String {
    let n = min + rng.below(max - min + 1);
    (0..n).map(|_| alphabet[rng.below(alphabet.len())] as char).collect()
}

fn gen_val(rng: &mut Rng, ty: Ty, role: Role) -> Val {
    match (ty, role) {
        (Ty::Int, Role::Key) => Val::Int(rng.between(-300, 300) as i32),
        (Ty::Int, Role::Clustering) => Val::Int(rng.between(-3, 12) as i32),
        (Ty::Int, Role::Value) => Val::Int(rng.between(-1000, 1000) as i32),
        (Ty::BigInt, Role::Key) => {
            if rng.percent(50) {
                Val::Big(rng.between(-300, 300))
            } else {
                Val::Big(rng.next_u64() as i64)
            }
        }
        (Ty::BigInt, _) => Val::Big(rng.between(-100_000, 100_000)),
        (Ty::Text, Role::Key) => Val::Text(gen_text(rng, b"abcdefghijklmnopqrstuvwxyz0123456789", 1, 6)),
        (Ty::Text, Role::Clustering) => Val::Text(gen_text(rng, b"abcd", 1, 2)),
        (Ty::Text, Role::Value) => Val::Text(gen_text(rng, b"abcdefghijklmnopqrstuvwxyz", 0, 8)),
    }
}

#[derive(Clone, Debug)]
struct Col {
    name: String,
    ty: Ty,
}

#[derive(Clone, Debug)]
struct Table {
    name: String,
    pk: Vec<Col>,
    ck: Vec<Col>,
    /// Per clustering column: declared DESC.
    desc: Vec<bool>,
    stat: Option<Col>,
    regs: Vec<Col>,
}

impl Table {
    fn generate(rng: &mut Rng, name: String) -> Table {
        let key_types = [Ty::Int, Ty::Text, Ty::BigInt];
        let npk = if rng.percent(30) { 2 } else { 1 };
        let pk = (0..npk).map(|i| Col { name: format!("p{i}"), ty: rng.pick(&key_types) }).collect();
        let nck = rng.below(3);
        let ck = (0..nck).map(|i| Col { name: format!("c{i}"), ty: rng.pick(&[Ty::Int, Ty::Text]) }).collect();
        let desc = (0..nck).map(|_| rng.percent(40)).collect();
        let stat = (nck > 0 && rng.percent(60)).then(|| Col { name: "s".into(), ty: rng.pick(&[Ty::Int, Ty::Text]) });
        let nreg = 1 + rng.below(2);
        let regs = (0..nreg).map(|i| Col { name: format!("v{i}"), ty: rng.pick(&key_types) }).collect();
        Table { name, pk, ck, desc, stat, regs }
    }

    fn full_name(&self) -> String {
        format!("{KS}.{}", self.name)
    }

    fn create_cql(&self) -> String {
        let mut cols = Vec::new();
        for c in self.pk.iter().chain(&self.ck) {
            cols.push(format!("{} {}", c.name, c.ty.cql()));
        }
        if let Some(s) = &self.stat {
            cols.push(format!("{} {} static", s.name, s.ty.cql()));
        }
        for c in &self.regs {
            cols.push(format!("{} {}", c.name, c.ty.cql()));
        }
        let pk: Vec<&str> = self.pk.iter().map(|c| c.name.as_str()).collect();
        let mut key = format!("({})", pk.join(", "));
        for c in &self.ck {
            key.push_str(", ");
            key.push_str(&c.name);
        }
        let mut cql = format!("CREATE TABLE {} ({}, PRIMARY KEY ({key}))", self.full_name(), cols.join(", "));
        if !self.ck.is_empty() {
            let orders: Vec<String> = self
                .ck
                .iter()
                .zip(&self.desc)
                .map(|(c, d)| format!("{} {}", c.name, if *d { "DESC" } else { "ASC" }))
                .collect();
            let _ = write!(cql, " WITH CLUSTERING ORDER BY ({})", orders.join(", "));
        }
        cql
    }

    /// Compares clusterings in the table's clustering order.
    fn cmp_clustering(&self, a: &[Val], b: &[Val]) -> Ordering {
        for ((x, y), desc) in a.iter().zip(b).zip(&self.desc) {
            let o = if *desc { y.cmp(x) } else { x.cmp(y) };
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    }

    fn gen_key(&self, rng: &mut Rng) -> Vec<Val> {
        self.pk.iter().map(|c| gen_val(rng, c.ty, Role::Key)).collect()
    }

    fn gen_clustering(&self, rng: &mut Rng) -> Vec<Val> {
        self.ck.iter().map(|c| gen_val(rng, c.ty, Role::Clustering)).collect()
    }

    fn key_conditions(&self, key: &[Val]) -> Vec<String> {
        self.pk.iter().zip(key).map(|(c, v)| format!("{} = {}", c.name, v.literal())).collect()
    }

    fn clustering_conditions(&self, ck: &[Val]) -> Vec<String> {
        self.ck.iter().zip(ck).map(|(c, v)| format!("{} = {}", c.name, v.literal())).collect()
    }

    fn token_call(&self) -> String {
        let pk: Vec<&str> = self.pk.iter().map(|c| c.name.as_str()).collect();
        format!("token({})", pk.join(", "))
    }
}

/// The Murmur3 token and serialized form of a partition key (Cassandra's
/// CompositeType encoding for a compound key).
fn token_of(key: &[Val]) -> (i64, Vec<u8>) {
    let bytes = if key.len() == 1 {
        key[0].bytes()
    } else {
        let parts: Vec<Vec<u8>> = key.iter().map(Val::bytes).collect();
        let refs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
        ring::tokens::compound_key(&refs)
    };
    (ring::token_of(&bytes), bytes)
}

// ---------------------------------------------------------------------------
// Clustering slices (`c0 = x AND c1 > y AND c1 <= z`).

#[derive(Clone, Debug, Default)]
struct Slice {
    /// Equalities on the first clustering columns.
    eq: Vec<Val>,
    /// Bounds (value, inclusive) on the clustering column after `eq`.
    lo: Option<(Val, bool)>,
    hi: Option<(Val, bool)>,
}

impl Slice {
    fn is_empty(&self) -> bool {
        self.eq.is_empty() && self.lo.is_none() && self.hi.is_none()
    }

    fn matches(&self, ck: &[Val]) -> bool {
        if ck[..self.eq.len()] != self.eq[..] {
            return false;
        }
        let Some(v) = ck.get(self.eq.len()) else { return true };
        let lo_ok = match &self.lo {
            None => true,
            Some((b, true)) => v >= b,
            Some((b, false)) => v > b,
        };
        let hi_ok = match &self.hi {
            None => true,
            Some((b, true)) => v <= b,
            Some((b, false)) => v < b,
        };
        lo_ok && hi_ok
    }

    fn conditions(&self, t: &Table) -> Vec<String> {
        let mut out = t.clustering_conditions(&self.eq);
        if let Some(c) = t.ck.get(self.eq.len()) {
            if let Some((v, incl)) = &self.lo {
                out.push(format!("{} {} {}", c.name, if *incl { ">=" } else { ">" }, v.literal()));
            }
            if let Some((v, incl)) = &self.hi {
                out.push(format!("{} {} {}", c.name, if *incl { "<=" } else { "<" }, v.literal()));
            }
        }
        out
    }

    /// A random slice; values are often taken from `rows` (existing clusterings).
    /// With `nonempty_range`, a bounded range never has lo >= hi.
    fn generate(rng: &mut Rng, t: &Table, rows: &[Vec<Val>], nonempty_range: bool) -> Slice {
        let mut s = Slice::default();
        if t.ck.is_empty() {
            return s;
        }
        let value = |rng: &mut Rng, col: usize| -> Val {
            if !rows.is_empty() && rng.percent(70) {
                rows[rng.below(rows.len())][col].clone()
            } else {
                gen_val(rng, t.ck[col].ty, Role::Clustering)
            }
        };
        if t.ck.len() == 2 && rng.percent(35) {
            s.eq.push(value(rng, 0));
        }
        let col = s.eq.len();
        let shape = rng.below(4);
        if shape == 0 || shape == 2 || (shape == 3 && s.eq.is_empty()) {
            s.lo = Some((value(rng, col), rng.percent(50)));
        }
        if shape == 1 || shape == 2 {
            s.hi = Some((value(rng, col), rng.percent(50)));
        }
        if nonempty_range {
            if let (Some((a, ai)), Some((b, bi))) = (&s.lo, &s.hi) {
                match a.cmp(b) {
                    Ordering::Less => {}
                    Ordering::Equal => s.hi = None,
                    Ordering::Greater => {
                        let (lo, hi) = ((b.clone(), *bi), (a.clone(), *ai));
                        s.lo = Some(lo);
                        s.hi = Some(hi);
                    }
                }
            }
        }
        s
    }
}

// ---------------------------------------------------------------------------
// Writes and the model.

#[derive(Clone, Debug)]
struct Cell {
    val: Val,
    /// Written with TTL 1: expired when the queries run.
    ttl: bool,
}

#[derive(Clone, Debug, Default)]
struct MRow {
    /// The row marker (INSERT): `Some(ttl)`.
    marker: Option<bool>,
    /// Per regular column; `None` is null (never written, or a tombstone).
    cells: Vec<Option<Cell>>,
}

#[derive(Clone, Debug, Default)]
struct MPart {
    stat: Option<Cell>,
    rows: BTreeMap<Vec<Val>, MRow>,
}

#[derive(Clone, Debug)]
enum Op {
    /// `INSERT` of a row (with a row marker), some regular columns (a `None`
    /// value is an explicit null), optionally the static column.
    Insert {
        key: Vec<Val>,
        ck: Vec<Val>,
        regs: Vec<(usize, Option<Val>)>,
        stat: Option<Val>,
        ttl: bool,
    },
    /// `INSERT INTO t (pk, s)`: the static row only, no row marker.
    InsertStatic {
        key: Vec<Val>,
        stat: Val,
        ttl: bool,
    },
    /// `UPDATE ... SET` regular columns: cells only, no row marker.
    Update {
        key: Vec<Val>,
        ck: Vec<Val>,
        regs: Vec<(usize, Option<Val>)>,
        ttl: bool,
    },
    UpdateStatic {
        key: Vec<Val>,
        stat: Val,
        ttl: bool,
    },
    DeleteRow {
        key: Vec<Val>,
        ck: Vec<Val>,
    },
    DeleteRange {
        key: Vec<Val>,
        slice: Slice,
    },
    DeletePartition {
        key: Vec<Val>,
    },
    /// `DELETE v0, v1 FROM ...`: cell tombstones.
    DeleteCells {
        key: Vec<Val>,
        ck: Vec<Val>,
        regs: Vec<usize>,
    },
    DeleteStatic {
        key: Vec<Val>,
    },
}

impl Op {
    fn key(&self) -> &[Val] {
        match self {
            Op::Insert { key, .. }
            | Op::InsertStatic { key, .. }
            | Op::Update { key, .. }
            | Op::UpdateStatic { key, .. }
            | Op::DeleteRow { key, .. }
            | Op::DeleteRange { key, .. }
            | Op::DeletePartition { key }
            | Op::DeleteCells { key, .. }
            | Op::DeleteStatic { key } => key,
        }
    }

    fn cql(&self, t: &Table, ts: i64) -> String {
        let using =
            |ttl: bool| if ttl { format!("USING TTL 1 AND TIMESTAMP {ts}") } else { format!("USING TIMESTAMP {ts}") };
        let table = t.full_name();
        let stat_name = t.stat.as_ref().map(|s| s.name.clone()).unwrap_or_default();
        let row_where = |key: &[Val], ck: &[Val]| {
            let mut c = t.key_conditions(key);
            c.extend(t.clustering_conditions(ck));
            c.join(" AND ")
        };
        let sets = |regs: &[(usize, Option<Val>)]| {
            regs.iter().map(|(i, v)| format!("{} = {}", t.regs[*i].name, show_value(v))).collect::<Vec<_>>().join(", ")
        };
        match self {
            Op::Insert { key, ck, regs, stat, ttl } => {
                let mut names: Vec<String> = t.pk.iter().chain(&t.ck).map(|c| c.name.clone()).collect();
                let mut values: Vec<String> = key.iter().chain(ck).map(Val::literal).collect();
                if let Some(s) = stat {
                    names.push(stat_name.clone());
                    values.push(s.literal());
                }
                for (i, v) in regs {
                    names.push(t.regs[*i].name.clone());
                    values.push(show_value(v));
                }
                format!("INSERT INTO {table} ({}) VALUES ({}) {}", names.join(", "), values.join(", "), using(*ttl))
            }
            Op::InsertStatic { key, stat, ttl } => {
                let mut names: Vec<String> = t.pk.iter().map(|c| c.name.clone()).collect();
                let mut values: Vec<String> = key.iter().map(Val::literal).collect();
                names.push(stat_name.clone());
                values.push(stat.literal());
                format!("INSERT INTO {table} ({}) VALUES ({}) {}", names.join(", "), values.join(", "), using(*ttl))
            }
            Op::Update { key, ck, regs, ttl } => {
                format!("UPDATE {table} {} SET {} WHERE {}", using(*ttl), sets(regs), row_where(key, ck))
            }
            Op::UpdateStatic { key, stat, ttl } => {
                format!(
                    "UPDATE {table} {} SET {stat_name} = {} WHERE {}",
                    using(*ttl),
                    stat.literal(),
                    row_where(key, &[])
                )
            }
            Op::DeleteRow { key, ck } => format!("DELETE FROM {table} {} WHERE {}", using(false), row_where(key, ck)),
            Op::DeleteRange { key, slice } => {
                let mut c = t.key_conditions(key);
                c.extend(slice.conditions(t));
                format!("DELETE FROM {table} {} WHERE {}", using(false), c.join(" AND "))
            }
            Op::DeletePartition { key } => {
                format!("DELETE FROM {table} {} WHERE {}", using(false), row_where(key, &[]))
            }
            Op::DeleteCells { key, ck, regs } => {
                let names: Vec<&str> = regs.iter().map(|i| t.regs[*i].name.as_str()).collect();
                format!("DELETE {} FROM {table} {} WHERE {}", names.join(", "), using(false), row_where(key, ck))
            }
            Op::DeleteStatic { key } => {
                format!("DELETE {stat_name} FROM {table} {} WHERE {}", using(false), row_where(key, &[]))
            }
        }
    }
}

/// What is written, in timestamp order (writes are applied in the order they
/// are generated, each with a higher timestamp than the one before).
#[derive(Default)]
struct Model {
    parts: BTreeMap<Vec<Val>, MPart>,
}

impl Model {
    fn apply(&mut self, t: &Table, op: &Op) {
        let nregs = t.regs.len();
        let part = self.parts.entry(op.key().to_vec()).or_default();
        let cell = |v: &Option<Val>, ttl: bool| v.as_ref().map(|v| Cell { val: v.clone(), ttl });
        match op {
            Op::Insert { ck, regs, stat, ttl, .. } => {
                let row =
                    part.rows.entry(ck.clone()).or_insert_with(|| MRow { marker: None, cells: vec![None; nregs] });
                row.marker = Some(*ttl);
                for (i, v) in regs {
                    row.cells[*i] = cell(v, *ttl);
                }
                if let Some(s) = stat {
                    part.stat = Some(Cell { val: s.clone(), ttl: *ttl });
                }
            }
            Op::InsertStatic { stat, ttl, .. } | Op::UpdateStatic { stat, ttl, .. } => {
                part.stat = Some(Cell { val: stat.clone(), ttl: *ttl })
            }
            Op::Update { ck, regs, ttl, .. } => {
                let row =
                    part.rows.entry(ck.clone()).or_insert_with(|| MRow { marker: None, cells: vec![None; nregs] });
                for (i, v) in regs {
                    row.cells[*i] = cell(v, *ttl);
                }
            }
            Op::DeleteRow { ck, .. } => {
                part.rows.remove(ck);
            }
            Op::DeleteRange { slice, .. } => part.rows.retain(|ck, _| !slice.matches(ck)),
            Op::DeletePartition { .. } => {
                part.rows.clear();
                part.stat = None;
            }
            Op::DeleteCells { ck, regs, .. } => {
                if let Some(row) = part.rows.get_mut(ck) {
                    for i in regs {
                        row.cells[*i] = None;
                    }
                }
            }
            Op::DeleteStatic { .. } => part.stat = None,
        }
    }

    /// Clusterings of the rows the model holds for `key` (live or not).
    fn clusterings(&self, key: &[Val]) -> Vec<Vec<Val>> {
        self.parts.get(key).map(|p| p.rows.keys().cloned().collect()).unwrap_or_default()
    }

    /// What is live once every TTL 1 write has expired, in ring order.
    fn live(&self, t: &Table) -> Vec<LivePart> {
        let mut out = Vec::new();
        for (key, part) in &self.parts {
            let stat = part.stat.as_ref().filter(|c| !c.ttl).map(|c| c.val.clone());
            let mut rows = Vec::new();
            for (ck, row) in &part.rows {
                let cells: Vec<Option<Val>> =
                    row.cells.iter().map(|c| c.as_ref().filter(|c| !c.ttl).map(|c| c.val.clone())).collect();
                let marker = row.marker == Some(false);
                if marker || cells.iter().any(Option::is_some) {
                    rows.push((ck.clone(), cells));
                }
            }
            rows.sort_by(|a, b| t.cmp_clustering(&a.0, &b.0));
            if stat.is_some() || !rows.is_empty() {
                let (token, bytes) = token_of(key);
                out.push(LivePart { key: key.clone(), token, bytes, stat, rows });
            }
        }
        out.sort_by(|a, b| (a.token, &a.bytes).cmp(&(b.token, &b.bytes)));
        out
    }
}

struct LivePart {
    key: Vec<Val>,
    token: i64,
    bytes: Vec<u8>,
    stat: Option<Val>,
    /// Live rows in clustering order: (clustering, regular cells).
    rows: Vec<(Vec<Val>, Vec<Option<Val>>)>,
}

/// Random writes for table `t`, applied to `model` as they are made.
fn gen_writes(rng: &mut Rng, t: &Table, model: &mut Model) -> Vec<Op> {
    let nparts = match rng.below(20) {
        0 => 0,
        1..=4 => rng.between(1, 3),
        5..=10 => rng.between(4, 20),
        _ => rng.between(21, 60),
    } as usize;
    let mut keys: Vec<Vec<Val>> = Vec::new();
    while keys.len() < nparts {
        let k = t.gen_key(rng);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let mut ops = Vec::new();
    let push = |ops: &mut Vec<Op>, model: &mut Model, op: Op| {
        model.apply(t, &op);
        ops.push(op);
    };
    let gen_regs = |rng: &mut Rng, for_insert: bool| -> Vec<(usize, Option<Val>)> {
        let mut regs = Vec::new();
        for (i, c) in t.regs.iter().enumerate() {
            if rng.percent(if for_insert { 75 } else { 65 }) {
                let v = if rng.percent(if for_insert { 15 } else { 10 }) {
                    None
                } else {
                    Some(gen_val(rng, c.ty, Role::Value))
                };
                regs.push((i, v));
            }
        }
        if !for_insert && regs.is_empty() {
            regs.push((0, Some(gen_val(rng, t.regs[0].ty, Role::Value))));
        }
        regs
    };

    // Partitions: normal ones, static-only ones, wholly expired ones.
    for key in &keys {
        let kind = rng.below(100);
        if let (Some(s), true) = (&t.stat, kind < 15) {
            let stat = gen_val(rng, s.ty, Role::Value);
            let op = if rng.percent(50) {
                Op::InsertStatic { key: key.clone(), stat, ttl: false }
            } else {
                Op::UpdateStatic { key: key.clone(), stat, ttl: false }
            };
            push(&mut ops, model, op);
            continue;
        }
        let expired = (15..25).contains(&kind);
        let nrows = if t.ck.is_empty() { 1 } else { rng.between(0, 12) as usize };
        let mut cks: Vec<Vec<Val>> = Vec::new();
        for _ in 0..nrows * 3 {
            if cks.len() == nrows {
                break;
            }
            let ck = t.gen_clustering(rng);
            if !cks.contains(&ck) {
                cks.push(ck);
            }
        }
        for ck in cks {
            let ttl = expired || rng.percent(12);
            let op = if rng.percent(70) {
                let stat = t.stat.as_ref().filter(|_| rng.percent(15)).map(|s| gen_val(rng, s.ty, Role::Value));
                Op::Insert { key: key.clone(), ck, regs: gen_regs(rng, true), stat, ttl }
            } else {
                Op::Update { key: key.clone(), ck, regs: gen_regs(rng, false), ttl }
            };
            push(&mut ops, model, op);
        }
        if let Some(s) = &t.stat {
            if expired || rng.percent(50) {
                let ttl = expired || rng.percent(10);
                let op = Op::UpdateStatic { key: key.clone(), stat: gen_val(rng, s.ty, Role::Value), ttl };
                push(&mut ops, model, op);
            }
        }
    }

    // Then changes: deletions of every kind, nulls, more rows (some expired).
    let nchanges = nparts * rng.below(4) / 2 + rng.below(3);
    for _ in 0..nchanges {
        let key =
            if !keys.is_empty() && rng.percent(90) { keys[rng.below(keys.len())].clone() } else { t.gen_key(rng) };
        let existing = model.clusterings(&key);
        let ck = if !existing.is_empty() && rng.percent(80) {
            existing[rng.below(existing.len())].clone()
        } else {
            t.gen_clustering(rng)
        };
        let has_ck = !t.ck.is_empty();
        let op = match rng.below(100) {
            0..=14 if has_ck => Op::DeleteRow { key, ck },
            15..=24 if has_ck => Op::DeleteRange { key, slice: range_deletion(rng, t, &existing) },
            25..=29 => Op::DeletePartition { key },
            0..=24 => Op::Insert { key, ck, regs: gen_regs(rng, true), stat: None, ttl: rng.percent(40) },
            30..=49 => {
                let regs: Vec<usize> = (0..t.regs.len()).filter(|_| rng.percent(60)).collect();
                if rng.percent(50) && !regs.is_empty() {
                    Op::DeleteCells { key, ck, regs }
                } else {
                    let regs = if regs.is_empty() { vec![0] } else { regs };
                    Op::Update { key, ck, regs: regs.into_iter().map(|i| (i, None)).collect(), ttl: false }
                }
            }
            50..=64 => Op::Update { key, ck, regs: gen_regs(rng, false), ttl: rng.percent(20) },
            65..=84 => {
                let ttl = rng.percent(60);
                Op::Insert { key, ck, regs: gen_regs(rng, true), stat: None, ttl }
            }
            _ => match &t.stat {
                Some(_) if rng.percent(30) => Op::DeleteStatic { key },
                Some(s) => Op::UpdateStatic { key, stat: gen_val(rng, s.ty, Role::Value), ttl: rng.percent(20) },
                None => Op::DeletePartition { key },
            },
        };
        push(&mut ops, model, op);
    }
    ops
}

/// A clustering range deletion: never a whole partition, never a single row.
fn range_deletion(rng: &mut Rng, t: &Table, rows: &[Vec<Val>]) -> Slice {
    loop {
        let s = Slice::generate(rng, t, rows, true);
        let single_row = s.eq.len() == t.ck.len();
        if !s.is_empty() && !single_row {
            return s;
        }
    }
}

// ---------------------------------------------------------------------------
// Queries.

#[derive(Clone, Copy, Debug, PartialEq)]
enum Sel {
    /// `SELECT *`
    Star,
    /// `SELECT pk...`
    Key,
    /// `SELECT DISTINCT pk...`
    Distinct,
    /// `SELECT DISTINCT pk..., s`
    DistinctStatic,
}

#[derive(Clone, Debug)]
enum Where {
    All,
    Token {
        lo: Option<(i64, bool)>,
        hi: Option<(i64, bool)>,
    },
    /// One partition; `order`: (reversed, name every clustering column).
    Partition {
        key: Vec<Val>,
        slice: Slice,
        order: Option<(bool, bool)>,
    },
    /// `IN` values per partition key column (a single value renders as `=`).
    In {
        values: Vec<Vec<Val>>,
        slice: Slice,
    },
}

#[derive(Clone, Debug)]
struct Query {
    sel: Sel,
    wh: Where,
    per_partition: Option<usize>,
    limit: Option<usize>,
}

impl Query {
    fn columns(&self, t: &Table) -> Vec<String> {
        let mut cols: Vec<String> = t.pk.iter().map(|c| c.name.clone()).collect();
        match self.sel {
            Sel::Key | Sel::Distinct => {}
            Sel::DistinctStatic => cols.extend(t.stat.iter().map(|c| c.name.clone())),
            Sel::Star => {
                cols.extend(t.ck.iter().chain(&t.stat).chain(&t.regs).map(|c| c.name.clone()));
            }
        }
        cols
    }

    /// What the case covers, for the summary.
    fn labels(&self) -> Vec<&'static str> {
        let mut out = vec![match &self.wh {
            Where::All => "full scan",
            Where::Token { .. } => "token range",
            Where::Partition { order: None, .. } => "partition",
            Where::Partition { order: Some(_), .. } => "partition ORDER BY",
            Where::In { .. } => "IN",
        }];
        match self.sel {
            Sel::Star => {}
            Sel::Key => out.push("SELECT pk"),
            Sel::Distinct => out.push("DISTINCT"),
            Sel::DistinctStatic => out.push("DISTINCT static"),
        }
        if let Where::Partition { slice, .. } | Where::In { slice, .. } = &self.wh {
            if !slice.is_empty() {
                out.push("clustering slice");
            }
        }
        if self.per_partition.is_some() {
            out.push("PER PARTITION LIMIT");
        }
        if self.limit.is_some() {
            out.push("LIMIT");
        }
        out
    }

    fn cql(&self, t: &Table) -> String {
        let mut q = String::from("SELECT ");
        if matches!(self.sel, Sel::Distinct | Sel::DistinctStatic) {
            q.push_str("DISTINCT ");
        }
        if self.sel == Sel::Star {
            q.push('*');
        } else {
            q.push_str(&self.columns(t).join(", "));
        }
        let _ = write!(q, " FROM {}", t.full_name());
        let mut conds = Vec::new();
        let mut order = String::new();
        match &self.wh {
            Where::All => {}
            Where::Token { lo, hi } => {
                if let Some((v, incl)) = lo {
                    conds.push(format!("{} {} {v}", t.token_call(), if *incl { ">=" } else { ">" }));
                }
                if let Some((v, incl)) = hi {
                    conds.push(format!("{} {} {v}", t.token_call(), if *incl { "<=" } else { "<" }));
                }
            }
            Where::Partition { key, slice, order: o } => {
                conds.extend(t.key_conditions(key));
                conds.extend(slice.conditions(t));
                if let Some((reversed, all)) = o {
                    let n = if *all { t.ck.len() } else { 1 };
                    let parts: Vec<String> = t.ck[..n]
                        .iter()
                        .zip(&t.desc)
                        .map(|(c, d)| format!("{} {}", c.name, if d != reversed { "DESC" } else { "ASC" }))
                        .collect();
                    order = format!(" ORDER BY {}", parts.join(", "));
                }
            }
            Where::In { values, slice } => {
                for (c, vals) in t.pk.iter().zip(values) {
                    if vals.len() == 1 {
                        conds.push(format!("{} = {}", c.name, vals[0].literal()));
                    } else {
                        let list: Vec<String> = vals.iter().map(Val::literal).collect();
                        conds.push(format!("{} IN ({})", c.name, list.join(", ")));
                    }
                }
                conds.extend(slice.conditions(t));
            }
        }
        if !conds.is_empty() {
            let _ = write!(q, " WHERE {}", conds.join(" AND "));
        }
        q.push_str(&order);
        if let Some(n) = self.per_partition {
            let _ = write!(q, " PER PARTITION LIMIT {n}");
        }
        if let Some(n) = self.limit {
            let _ = write!(q, " LIMIT {n}");
        }
        q
    }

    /// The rows the model says the query returns, projected on `columns`.
    /// For IN queries the order of partitions is the IN order (compared
    /// partition by partition, see `same_partitions`).
    fn expected(&self, t: &Table, live: &[LivePart]) -> Vec<Vec<Option<Val>>> {
        let find = |key: &[Val]| live.iter().find(|p| p.key == key);
        let parts: Vec<&LivePart> = match &self.wh {
            Where::All => live.iter().collect(),
            Where::Token { lo, hi } => live
                .iter()
                .filter(|p| {
                    let lo_ok = lo.is_none_or(|(v, incl)| if incl { p.token >= v } else { p.token > v });
                    let hi_ok = hi.is_none_or(|(v, incl)| if incl { p.token <= v } else { p.token < v });
                    lo_ok && hi_ok
                })
                .collect(),
            Where::Partition { key, .. } => find(key).into_iter().collect(),
            Where::In { values, .. } => cartesian(values).iter().filter_map(|k| find(k)).collect(),
        };
        let (slice, reversed) = match &self.wh {
            Where::Partition { slice, order, .. } => (slice.clone(), order.is_some_and(|o| o.0)),
            Where::In { slice, .. } => (slice.clone(), false),
            _ => (Slice::default(), false),
        };
        let mut out = Vec::new();
        for p in parts {
            let key: Vec<Option<Val>> = p.key.iter().cloned().map(Some).collect();
            let mut rows: Vec<Vec<Option<Val>>> = Vec::new();
            match self.sel {
                Sel::Distinct => rows.push(key),
                Sel::DistinctStatic => {
                    let mut r = key;
                    r.push(p.stat.clone());
                    rows.push(r);
                }
                Sel::Star | Sel::Key => {
                    let mut matching: Vec<&(Vec<Val>, Vec<Option<Val>>)> =
                        p.rows.iter().filter(|(ck, _)| slice.matches(ck)).collect();
                    if reversed {
                        matching.reverse();
                    }
                    for (ck, cells) in matching {
                        let mut r = key.clone();
                        if self.sel == Sel::Star {
                            r.extend(ck.iter().cloned().map(Some));
                            if t.stat.is_some() {
                                r.push(p.stat.clone());
                            }
                            r.extend(cells.iter().cloned());
                        }
                        rows.push(r);
                    }
                    // A partition with static cells but no live rows shows as
                    // one row when the clustering columns are unrestricted.
                    if p.rows.is_empty() && slice.is_empty() {
                        let mut r = key.clone();
                        if self.sel == Sel::Star {
                            r.extend(t.ck.iter().map(|_| None));
                            r.push(p.stat.clone());
                            r.extend(t.regs.iter().map(|_| None));
                        }
                        rows.push(r);
                    }
                }
            }
            if let Some(n) = self.per_partition {
                rows.truncate(n);
            }
            out.extend(rows);
        }
        if let Some(n) = self.limit {
            out.truncate(n);
        }
        out
    }

    fn generate(rng: &mut Rng, t: &Table, model: &Model, live: &[LivePart]) -> Query {
        let known: Vec<&Vec<Val>> = model.parts.keys().collect();
        let pick_key = |rng: &mut Rng| -> Vec<Val> {
            match rng.below(100) {
                0..=74 if !live.is_empty() => live[rng.below(live.len())].key.clone(),
                0..=89 if !known.is_empty() => known[rng.below(known.len())].clone(),
                _ => t.gen_key(rng),
            }
        };
        let token = |rng: &mut Rng| -> i64 {
            let token = if !live.is_empty() && rng.percent(60) {
                live[rng.below(live.len())].token.saturating_add(rng.between(-1, 1))
            } else {
                rng.next_u64() as i64
            };
            token.max(i64::MIN + 1)
        };
        let wh = match rng.below(100) {
            0..=29 => Where::All,
            30..=49 => {
                let (mut lo, mut hi) = (token(rng), token(rng));
                if rng.percent(85) && lo > hi {
                    std::mem::swap(&mut lo, &mut hi);
                }
                let (lo_incl, hi_incl) = (rng.percent(30), rng.percent(70));
                match rng.below(6) {
                    0 => Where::Token { lo: Some((lo, lo_incl)), hi: None },
                    1 => Where::Token { lo: None, hi: Some((hi, hi_incl)) },
                    _ => Where::Token { lo: Some((lo, lo_incl)), hi: Some((hi, hi_incl)) },
                }
            }
            50..=81 => {
                let key = pick_key(rng);
                let rows = model.clusterings(&key);
                let slice = if rng.percent(60) { Slice::generate(rng, t, &rows, false) } else { Slice::default() };
                let order = (!t.ck.is_empty() && rng.percent(45))
                    .then(|| (rng.percent(60), t.ck.len() == 1 || rng.percent(50)));
                Where::Partition { key, slice, order }
            }
            _ => {
                let n = 1 + rng.below(5);
                let keys: Vec<Vec<Val>> = (0..n).map(|_| pick_key(rng)).collect();
                let mut values: Vec<Vec<Val>> = Vec::new();
                for i in 0..t.pk.len() {
                    let mut vals: Vec<Val> = Vec::new();
                    for k in &keys {
                        if !vals.contains(&k[i]) && (vals.is_empty() || rng.percent(70)) {
                            vals.push(k[i].clone());
                        }
                    }
                    values.push(vals);
                }
                let rows: Vec<Vec<Val>> = keys.iter().flat_map(|k| model.clusterings(k)).collect();
                let slice = if rng.percent(30) { Slice::generate(rng, t, &rows, false) } else { Slice::default() };
                Where::In { values, slice }
            }
        };
        let scan = matches!(wh, Where::All | Where::Token { .. });
        let sel = match rng.below(100) {
            0..=54 => Sel::Star,
            55..=69 => Sel::Key,
            70..=84 if scan => Sel::Distinct,
            _ if scan && t.stat.is_some() => Sel::DistinctStatic,
            _ => Sel::Star,
        };
        let mut q = Query { sel, wh, per_partition: None, limit: None };
        if !matches!(sel, Sel::Distinct | Sel::DistinctStatic) && rng.percent(22) {
            q.per_partition = Some(1 + rng.below(4));
        }
        if rng.percent(28) {
            let n = q.expected(t, live).len();
            q.limit = Some(if rng.percent(50) { 1 + rng.below(5) } else { 1 + rng.below(n + 2) });
        }
        q
    }
}

fn cartesian(values: &[Vec<Val>]) -> Vec<Vec<Val>> {
    let mut keys: Vec<Vec<Val>> = vec![Vec::new()];
    for vals in values {
        let mut next = Vec::new();
        for k in &keys {
            for v in vals {
                let mut k2 = k.clone();
                k2.push(v.clone());
                next.push(k2);
            }
        }
        keys = next;
    }
    keys
}

// ---------------------------------------------------------------------------
// Running queries.

type Rows = Vec<Vec<Option<Val>>>;

fn to_val(v: CqlValue) -> Result<Val, String> {
    match v {
        CqlValue::Int(i) => Ok(Val::Int(i)),
        CqlValue::BigInt(b) => Ok(Val::Big(b)),
        CqlValue::Text(s) | CqlValue::Ascii(s) => Ok(Val::Text(s)),
        other => Err(format!("unexpected value {other:?}")),
    }
}

/// Reorders one page's rows into `want`'s column order (by column name).
fn convert_rows(names: &[String], want: &[String], rows: Vec<Row>) -> Result<Rows, String> {
    let mut index = Vec::with_capacity(want.len());
    for w in want {
        index.push(names.iter().position(|n| n == w).ok_or_else(|| format!("result columns {names:?} lack {w}"))?);
    }
    if names.len() != want.len() {
        return Err(format!("result columns {names:?}, expected {want:?}"));
    }
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let mut cols: Vec<Option<CqlValue>> = row.columns;
        let mut r = Vec::with_capacity(want.len());
        for &i in &index {
            r.push(cols.get_mut(i).and_then(Option::take).map(to_val).transpose()?);
        }
        out.push(r);
    }
    Ok(out)
}

async fn unpaged(session: &Session, cql: &str, want: &[String]) -> Result<Rows, String> {
    let result = session.query_unpaged(cql, &[]).await.map_err(|e| format!("unpaged query failed: {e}"))?;
    let rows = result.into_rows_result().map_err(|e| format!("unpaged: not rows: {e}"))?;
    let names: Vec<String> = rows.column_specs().iter().map(|s| s.name().to_string()).collect();
    let raw = rows
        .rows::<Row>()
        .map_err(|e| format!("unpaged rows: {e}"))?
        .collect::<Result<Vec<Row>, _>>()
        .map_err(|e| format!("{e}"))?;
    convert_rows(&names, want, raw)
}

/// The pages of `cql` at `page_size`: their rows put together and the row
/// count of each page. Fails when a page is larger than `page_size` or when
/// more than `max_pages` pages come.
async fn paged(
    session: &Session,
    cql: &str,
    want: &[String],
    page_size: usize,
    max_pages: usize,
) -> Result<(Rows, Vec<usize>), String> {
    let mut stmt = Statement::new(cql);
    stmt.set_page_size(page_size as i32);
    let mut state = PagingState::start();
    let mut all = Vec::new();
    let mut pages = Vec::new();
    loop {
        let (result, next) = session
            .query_single_page(stmt.clone(), &[], state)
            .await
            .map_err(|e| format!("page {} failed: {e}", pages.len() + 1))?;
        let rows = result.into_rows_result().map_err(|e| format!("page {}: not rows: {e}", pages.len() + 1))?;
        let names: Vec<String> = rows.column_specs().iter().map(|s| s.name().to_string()).collect();
        let raw = rows
            .rows::<Row>()
            .map_err(|e| format!("page rows: {e}"))?
            .collect::<Result<Vec<Row>, _>>()
            .map_err(|e| format!("{e}"))?;
        let n = raw.len();
        pages.push(n);
        all.extend(convert_rows(&names, want, raw)?);
        if n > page_size {
            return Err(format!(
                "page {} holds {n} rows, more than the page size {page_size} (pages so far: {pages:?})",
                pages.len()
            ));
        }
        match next.into_paging_control_flow() {
            ControlFlow::Break(()) => return Ok((all, pages)),
            ControlFlow::Continue(s) => state = s,
        }
        if pages.len() >= max_pages {
            return Err(format!(
                "paging did not end: {} pages and a paging state for more, {} rows so far (guard: {max_pages} pages); last rows: {}",
                pages.len(),
                all.len(),
                all.iter().rev().take(4).map(|r| show_row(r)).collect::<Vec<_>>().join(" ")
            ));
        }
    }
}

/// How `got` differs from `want`, for a failure message.
fn describe_diff(want_label: &str, want: &Rows, got_label: &str, got: &Rows) -> String {
    let mut s = format!("{want_label}: {} rows, {got_label}: {} rows", want.len(), got.len());
    if let Some(i) = (0..want.len().max(got.len())).find(|&i| want.get(i) != got.get(i)) {
        let show = |rows: &Rows| -> String {
            let from = i.saturating_sub(2);
            (from..(i + 3).min(rows.len())).map(|j| format!("\n      [{j}] {}", show_row(&rows[j]))).collect()
        };
        let _ =
            write!(s, "; first difference at row {i}\n    {want_label}:{}\n    {got_label}:{}", show(want), show(got));
    }
    let mut counts: BTreeMap<&Vec<Option<Val>>, i64> = BTreeMap::new();
    for r in want {
        *counts.entry(r).or_default() += 1;
    }
    for r in got {
        *counts.entry(r).or_default() -= 1;
    }
    let missing: Vec<String> =
        counts.iter().filter(|(_, n)| **n > 0).take(5).map(|(r, n)| format!("{} x{n}", show_row(r))).collect();
    let extra: Vec<String> =
        counts.iter().filter(|(_, n)| **n < 0).take(5).map(|(r, n)| format!("{} x{}", show_row(r), -n)).collect();
    if !missing.is_empty() {
        let _ = write!(s, "\n    in {want_label} only (first 5): {}", missing.join(" "));
    }
    if !extra.is_empty() {
        let _ = write!(s, "\n    in {got_label} only or more often (first 5): {}", extra.join(" "));
    }
    s
}

/// Rows grouped into runs of one partition (the first `key_len` columns),
/// sorted by key: the same for two results that hold the same partitions,
/// each with the same rows in the same order, in any partition order.
fn by_partition(rows: &Rows, key_len: usize) -> Vec<Rows> {
    let mut groups: Vec<Rows> = Vec::new();
    for r in rows {
        match groups.last_mut() {
            Some(g) if g[0][..key_len] == r[..key_len] => g.push(r.clone()),
            _ => groups.push(vec![r.clone()]),
        }
    }
    groups.sort_by(|a, b| a[0][..key_len].cmp(&b[0][..key_len]));
    groups
}

struct Failure {
    table: usize,
    case: usize,
    /// Live rows in the table, to find the smallest failing case.
    size: usize,
    message: String,
}

struct TableRun {
    index: usize,
    seed: u64,
    table: Table,
    model: Model,
    live: Vec<LivePart>,
    writes: usize,
    rng: Rng,
}

impl TableRun {
    fn live_rows(&self) -> usize {
        self.live.iter().map(|p| p.rows.len().max(1)).sum()
    }

    /// Live partitions that hold only static cells.
    fn static_only(&self) -> usize {
        self.live.iter().filter(|p| p.rows.is_empty()).count()
    }

    /// Rows written and not deleted that are dead (expired or nulled).
    fn dead_rows(&self) -> usize {
        let written: usize = self.model.parts.values().map(|p| p.rows.len()).sum();
        written - self.live.iter().map(|p| p.rows.len()).sum::<usize>()
    }
}

async fn write_all(session: &Arc<Session>, statements: Vec<(Vec<Val>, String)>) {
    // Writes to one partition go in order; partitions go concurrently (each
    // write has its own timestamp, so the order does not change the result).
    let mut by_key: BTreeMap<Vec<Val>, Vec<String>> = BTreeMap::new();
    for (key, cql) in statements {
        by_key.entry(key).or_default().push(cql);
    }
    let mut tasks = tokio::task::JoinSet::new();
    for (_, list) in by_key {
        let session = Arc::clone(session);
        tasks.spawn(async move {
            for cql in list {
                if let Err(e) = session.query_unpaged(cql.as_str(), &[]).await {
                    return Err(format!("write failed: {cql}: {e}"));
                }
            }
            Ok(())
        });
        while tasks.len() >= 32 {
            if let Some(r) = tasks.join_next().await {
                r.expect("write task").unwrap_or_else(|e| panic!("{e}"));
            }
        }
    }
    while let Some(r) = tasks.join_next().await {
        r.expect("write task").unwrap_or_else(|e| panic!("{e}"));
    }
}

async fn connect(node: &Node) -> Session {
    SessionBuilder::new().known_node_addr(node.addr).build().await.expect("scylla driver connects")
}

fn env_number(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    let v = v.trim();
    let parsed = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => v.parse(),
    };
    Some(parsed.unwrap_or_else(|_| panic!("{name}={v} is not a number")))
}

/// Runs one query case; `Err` describes what went wrong.
async fn run_case(session: &Session, t: &Table, live: &[LivePart], q: &Query, page_size: usize) -> Result<(), String> {
    let cql = q.cql(t);
    let want_cols = q.columns(t);
    let expected = q.expected(t, live);
    let got = unpaged(session, &cql, &want_cols).await?;
    let max_pages = got.len().max(expected.len()) + 5;
    let (pages_rows, pages) = paged(session, &cql, &want_cols, page_size, max_pages).await?;
    let mut problems = Vec::new();
    if pages_rows != got {
        problems.push(format!(
            "paged result differs from the unpaged one (pages: {pages:?})\n    {}",
            describe_diff("unpaged", &got, "paged", &pages_rows)
        ));
    }
    match &q.wh {
        // The order of the partitions of an IN is not checked (nor, hence,
        // which rows a LIMIT keeps).
        Where::In { .. } if q.limit.is_some() => {}
        Where::In { .. } => {
            if by_partition(&got, t.pk.len()) != by_partition(&expected, t.pk.len()) {
                problems.push(format!(
                    "unpaged result differs from the model\n    {}",
                    describe_diff("model", &expected, "unpaged", &got)
                ));
            }
        }
        _ => {
            if got != expected {
                problems.push(format!(
                    "unpaged result differs from the model\n    {}",
                    describe_diff("model", &expected, "unpaged", &got)
                ));
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n  "))
    }
}

/// Failure kinds counted in the summary: (name, a phrase of its message).
const FAILURE_KINDS: [(&str, &str); 5] = [
    ("query error", " failed: "),
    ("paging did not end", "paging did not end"),
    ("page over page size", "more than the page size"),
    ("paged != unpaged", "differs from the unpaged one"),
    ("unpaged != model", "differs from the model"),
];

fn page_size_for(rng: &mut Rng, total: usize) -> usize {
    match rng.below(10) {
        0 => 1,
        1 => 2,
        2 => 3,
        3 => 4,
        4 => 5,
        5 => 7,
        6 => 10,
        7 => 100,
        8 => total + 1,
        _ => 1 + rng.below(total + 2),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_matches_unpaged_and_model() {
    let seed = env_number("PAGING_SEED").unwrap_or(DEFAULT_SEED);
    let cases = env_number("PAGING_CASES").map(|n| n as usize).unwrap_or(DEFAULT_CASES);
    let only_table = env_number("PAGING_TABLE").map(|n| n as usize);
    let per_table = cases.div_ceil(TABLES);
    let replay = |table: usize| format!("PAGING_SEED={seed:#x} PAGING_CASES={cases} PAGING_TABLE={table}");
    let started = Instant::now();

    let node = Node::start();
    let session = Arc::new(connect(&node).await);
    session
        .query_unpaged(
            format!("CREATE KEYSPACE {KS} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"),
            &[],
        )
        .await
        .expect("create keyspace");

    // Tables, their data and the model.
    let mut runs = Vec::new();
    let mut timestamp = TIMESTAMP_BASE;
    for index in 0..TABLES {
        if only_table.is_some_and(|t| t != index) {
            continue;
        }
        let table_seed = derive_seed(seed, index as u64);
        let mut rng = Rng::new(table_seed);
        let table = Table::generate(&mut rng, format!("t{index}"));
        session.query_unpaged(table.create_cql(), &[]).await.unwrap_or_else(|e| panic!("{}: {e}", table.create_cql()));
        let mut model = Model::default();
        let ops = gen_writes(&mut rng, &table, &mut model);
        let statements: Vec<(Vec<Val>, String)> = ops
            .iter()
            .map(|op| {
                timestamp += 1;
                (op.key().to_vec(), op.cql(&table, timestamp))
            })
            .collect();
        let writes = statements.len();
        session.await_schema_agreement().await.expect("schema agreement");
        write_all(&session, statements).await;
        let live = model.live(&table);
        runs.push(TableRun { index, seed: table_seed, table, model, live, writes, rng });
    }
    // Every TTL 1 write has expired (a cell is live while now < write time + 1 s, in seconds).
    tokio::time::sleep(Duration::from_millis(1600)).await;
    let written = started.elapsed();

    let mut failures: Vec<Failure> = Vec::new();
    let mut ran = 0usize;
    let mut rows_read = 0usize;
    let mut coverage: BTreeMap<&str, usize> = BTreeMap::new();
    let mut failure_kinds: BTreeMap<&str, usize> = BTreeMap::new();
    for run in &mut runs {
        for case in 0..per_table {
            let q = Query::generate(&mut run.rng, &run.table, &run.model, &run.live);
            let total = q.expected(&run.table, &run.live).len();
            rows_read += total;
            let page_size = page_size_for(&mut run.rng, total);
            ran += 1;
            for label in q.labels() {
                *coverage.entry(label).or_default() += 1;
            }
            if total == 0 {
                *coverage.entry("empty result").or_default() += 1;
            }
            if let Err(problem) = run_case(&session, &run.table, &run.live, &q, page_size).await {
                for (kind, phrase) in FAILURE_KINDS {
                    if problem.contains(phrase) {
                        *failure_kinds.entry(kind).or_default() += 1;
                    }
                }
                let message = format!(
                    "seed {seed:#x}, table {} (table seed {:#x}), case {case} (replay: {})\n  table: {}\n  data: {} writes; {} live partitions, {} live rows\n  query: {}\n  page size: {page_size}\n  {problem}",
                    run.index,
                    run.seed,
                    replay(run.index),
                    run.table.create_cql(),
                    run.writes,
                    run.live.len(),
                    run.live_rows(),
                    q.cql(&run.table),
                );
                failures.push(Failure { table: run.index, case, size: run.live_rows(), message });
            }
        }
    }
    eprintln!(
        "paging_model: seed {seed:#x}, {} tables ({} writes; {} live rows, {} static-only partitions, {} expired or nulled rows), {ran} cases ({rows_read} expected rows) in {:.1?} (setup {:.1?}); {} failed {failure_kinds:?}\n  cases: {coverage:?}",
        runs.len(),
        runs.iter().map(|r| r.writes).sum::<usize>(),
        runs.iter().map(TableRun::live_rows).sum::<usize>(),
        runs.iter().map(TableRun::static_only).sum::<usize>(),
        runs.iter().map(TableRun::dead_rows).sum::<usize>(),
        started.elapsed(),
        written,
        failures.len()
    );
    if !failures.is_empty() {
        let failed_tables: BTreeSet<usize> = failures.iter().map(|f| f.table).collect();
        let first: Vec<&Failure> = failures.iter().take(3).collect();
        let smallest = failures.iter().min_by_key(|f| (f.size, f.message.len())).expect("a failure");
        let mut report = format!(
            "{} of {ran} paging cases failed (tables {failed_tables:?}; {failure_kinds:?}).\n\nSmallest failing case (table {}, case {}):\n{}\n",
            failures.len(),
            smallest.table,
            smallest.case,
            smallest.message
        );
        for f in first {
            let _ = write!(report, "\n{}\n", f.message);
        }
        panic!("{report}");
    }
}

// ---------------------------------------------------------------------------
// Fixed cases from the bug report.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_regressions() {
    let node = Node::start();
    let session = Arc::new(connect(&node).await);
    session
        .query_unpaged(
            "CREATE KEYSPACE reg WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
            &[],
        )
        .await
        .expect("create keyspace");
    session.query_unpaged("CREATE TABLE reg.wide (k int PRIMARY KEY, v int)", &[]).await.expect("create table");
    session
        .query_unpaged("CREATE TABLE reg.small (k int, c int, v int, PRIMARY KEY (k, c))", &[])
        .await
        .expect("create table");
    session.await_schema_agreement().await.expect("schema agreement");
    let mut writes = Vec::new();
    for k in 0..1000i32 {
        writes.push((vec![Val::Int(k)], format!("INSERT INTO reg.wide (k, v) VALUES ({k}, {k})")));
    }
    for k in 0..3i32 {
        for c in 0..3i32 {
            writes.push((vec![Val::Int(-1 - k)], format!("INSERT INTO reg.small (k, c, v) VALUES ({k}, {c}, {c})")));
        }
    }
    write_all(&session, writes).await;

    let mut failures = Vec::new();
    let wide: Vec<Vec<i32>> = (0..1000).map(|k| vec![k]).collect();
    let small: Vec<Vec<i32>> = (0..3).flat_map(|k| (0..3).map(move |c| vec![k, c])).collect();
    for page_size in [100, 7] {
        failures.extend(regression(&session, "SELECT k FROM reg.wide", &["k"], &wide, page_size).await);
    }
    for page_size in [1, 2, 3, 4] {
        failures.extend(regression(&session, "SELECT k, c FROM reg.small", &["k", "c"], &small, page_size).await);
    }
    assert!(failures.is_empty(), "{} paging regressions:\n{}", failures.len(), failures.join("\n"));
}

/// Pages through `cql` at `page_size`; every row of `want` must come exactly
/// once (in any order), and paging must end. Returns what went wrong.
async fn regression(
    session: &Session,
    cql: &str,
    cols: &[&str],
    want: &[Vec<i32>],
    page_size: usize,
) -> Option<String> {
    let want_cols: Vec<String> = cols.iter().map(|c| c.to_string()).collect();
    let mut want: Rows = want.iter().map(|r| r.iter().map(|v| Some(Val::Int(*v))).collect()).collect();
    want.sort();
    match paged(session, cql, &want_cols, page_size, want.len() + 5).await {
        Err(e) => Some(format!("{cql} at page size {page_size}: {e}")),
        Ok((mut got, pages)) => {
            got.sort();
            (got != want).then(|| {
                format!(
                    "{cql} at page size {page_size}: {} rows in {} pages, want {} each once\n    {}",
                    got.len(),
                    pages.len(),
                    want.len(),
                    describe_diff("want (sorted)", &want, "got (sorted)", &got)
                )
            })
        }
    }
}
