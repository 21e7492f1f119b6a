//! The simulated schema and its data: keyspace `sim` (SimpleStrategy, RF 3)
//! with `kv (pk int, c int, v blob, PRIMARY KEY (pk, c))`, built directly as
//! a `TableDef` (the simulator runs below the CQL layer and installs it with
//! `Storage::set_schema` on every node), the one mutation shape the workload
//! writes, and the full-partition read it checks.
//!
//! Invariants:
//! - Every write sets the row marker and `v` with one timestamp, so the
//!   timestamp of a row's `v` names the write that won the row (timestamps
//!   are unique across the whole run, see `history`).
//! - Reads use a fixed `now` and writes carry no TTL: what a read returns
//!   depends only on the cells, never on the wall clock.

use std::collections::BTreeMap;

use bytes::Bytes;
use storage::{ColumnData, Partition, PartitionRead};
use types::mutation::{CellWrite, ClusteringBound, Liveness, Mutation, RowWrite};
use types::schema::{ClusteringOrder, ColumnDef, ColumnKind, KeyspaceDef, Replication, TableDef, TableOptions};
use types::CqlType;
use uuid::Uuid;

pub const KEYSPACE: &str = "sim";
pub const TABLE: &str = "kv";
pub const REPLICATION_FACTOR: u32 = 3;

const PK_ID: u16 = 16;
const C_ID: u16 = 17;
pub(crate) const V_ID: u16 = 18;

/// `now` (seconds since the epoch) of every read: nothing expires.
pub const READ_NOW_SECS: i32 = 1_700_000_000;

/// Write timestamps are this plus a global counter (microseconds, as CQL's).
pub const TIMESTAMP_BASE_MICROS: i64 = 1_700_000_000_000_000;

/// The table's id: fixed, so every node's schema is identical.
pub fn table_id() -> Uuid {
    Uuid::from_u128(0x5153_494d_0000_4000_8000_0000_0000_6b76)
}

fn column(name: &str, ty: CqlType, kind: ColumnKind, id: u16) -> ColumnDef {
    ColumnDef { name: name.to_string(), ty, kind, position: 0, order: ClusteringOrder::Asc, id }
}

/// `CREATE KEYSPACE sim WITH replication = {'class': 'SimpleStrategy',
/// 'replication_factor': 3}` holding `CREATE TABLE sim.kv (pk int, c int,
/// v blob, PRIMARY KEY (pk, c))`.
pub fn keyspace() -> KeyspaceDef {
    let table = TableDef {
        keyspace: KEYSPACE.to_string(),
        name: TABLE.to_string(),
        id: table_id(),
        columns: vec![
            column("pk", CqlType::Int, ColumnKind::PartitionKey, PK_ID),
            column("c", CqlType::Int, ColumnKind::Clustering, C_ID),
            column("v", CqlType::Blob, ColumnKind::Regular, V_ID),
        ],
        options: TableOptions::default(),
        next_column_id: V_ID + 1,
        dropped_columns: BTreeMap::new(),
        indexes: Vec::new(),
    };
    KeyspaceDef {
        name: KEYSPACE.to_string(),
        replication: Replication::Simple { replication_factor: REPLICATION_FACTOR },
        durable_writes: true,
        tables: BTreeMap::from([(TABLE.to_string(), table)]),
        types: BTreeMap::new(),
    }
}

/// The winning write of one row: `v`'s timestamp and value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Version {
    pub ts: i64,
    pub value: Vec<u8>,
}

/// A partition as the checker sees it: clustering value `c` → its version.
pub type Rows = BTreeMap<i32, Version>;

fn int(v: i32) -> Bytes {
    Bytes::copy_from_slice(&v.to_be_bytes())
}

/// The serialized partition key of `pk`.
pub fn partition_key(pk: i32) -> Bytes {
    int(pk)
}

/// `pk`'s Murmur3 token, as the coordinator places it.
pub fn token(pk: i32) -> i64 {
    ring::token_of(&partition_key(pk))
}

/// The value written by the write with timestamp `ts`: unique per write.
pub fn value_of(ts: i64, pk: i32, c: i32) -> Vec<u8> {
    format!("w{ts}/{pk}.{c}").into_bytes()
}

/// `INSERT INTO sim.kv (pk, c, v) VALUES (pk, c, value) USING TIMESTAMP ts`.
pub fn write(pk: i32, c: i32, ts: i64, value: &[u8]) -> Mutation {
    let mut m = Mutation::new(table_id(), token(pk), partition_key(pk));
    m.rows.push(RowWrite {
        clustering: vec![int(c)],
        marker: Some(Liveness { timestamp: ts, ttl: 0, local_expiration: 0 }),
        cells: vec![CellWrite {
            column: V_ID,
            path: None,
            timestamp: ts,
            ttl: 0,
            local_deletion_time: 0,
            value: Some(Bytes::copy_from_slice(value)),
        }],
        ..RowWrite::default()
    });
    m
}

/// Which rows of a partition a read asks for: `SELECT * FROM sim.kv WHERE
/// pk = ? [AND c >= lo AND c <= hi] [ORDER BY c DESC] [LIMIT n]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadShape {
    /// Inclusive bounds on `c`.
    pub range: Option<(i32, i32)>,
    pub reversed: bool,
    pub limit: Option<usize>,
}

impl ReadShape {
    /// Whether the read's answer `rows` speaks for row `c`: `c` is in the
    /// range and, when the answer hit the limit, not past its last row in
    /// the read direction.
    pub fn covers(&self, rows: &Rows, c: i32) -> bool {
        if let Some((lo, hi)) = self.range {
            if c < lo || c > hi {
                return false;
            }
        }
        match self.limit {
            Some(limit) if rows.len() >= limit => {
                let last = if self.reversed { rows.keys().next() } else { rows.keys().next_back() };
                match last {
                    Some(&last) if self.reversed => c >= last,
                    Some(&last) => c <= last,
                    None => false,
                }
            }
            _ => true,
        }
    }

    /// Rows the answer may not contain: out of range, or more than the limit.
    pub fn check(&self, rows: &Rows) -> Result<(), String> {
        if let Some((lo, hi)) = self.range {
            if let Some(c) = rows.keys().find(|c| **c < lo || **c > hi) {
                return Err(format!("row c={c} outside the range {lo}..={hi}"));
            }
        }
        if let Some(limit) = self.limit {
            if rows.len() > limit {
                return Err(format!("{} rows for LIMIT {limit}", rows.len()));
            }
        }
        Ok(())
    }
}

impl std::fmt::Display for ReadShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some((lo, hi)) = self.range {
            write!(f, " c={lo}..={hi}")?;
        }
        if self.reversed {
            write!(f, " DESC")?;
        }
        if let Some(limit) = self.limit {
            write!(f, " LIMIT {limit}")?;
        }
        Ok(())
    }
}

/// `SELECT * FROM sim.kv WHERE pk = ?`.
pub fn full_read(pk: i32) -> PartitionRead {
    read(pk, ReadShape::default())
}

/// A read of partition `pk` shaped by `shape`.
pub fn read(pk: i32, shape: ReadShape) -> PartitionRead {
    let bound = |c: i32| ClusteringBound { prefix: vec![int(c)], inclusive: true };
    PartitionRead {
        table: table_id(),
        token: token(pk),
        partition_key: partition_key(pk).to_vec(),
        ranges: shape.range.map(|(lo, hi)| vec![(bound(lo), bound(hi))]).unwrap_or_default(),
        reversed: shape.reversed,
        include_static: true,
        row_limit: shape.limit.unwrap_or(usize::MAX),
        now: READ_NOW_SECS,
    }
}

/// Decodes a read's answer; a row without a plain `v` cell, with a
/// clustering value that is not an int, or out of the read direction's
/// order (`reversed`: descending) is an error (the workload never writes
/// such a row).
pub fn rows(partition: &Option<Partition>, reversed: bool) -> Result<Rows, String> {
    let mut out = Rows::new();
    let Some(p) = partition else { return Ok(out) };
    let mut previous: Option<i32> = None;
    for row in &p.rows {
        let c = match row.clustering.as_slice() {
            [c] => <[u8; 4]>::try_from(c.as_slice())
                .map(i32::from_be_bytes)
                .map_err(|_| format!("clustering value {c:?} is not an int"))?,
            other => return Err(format!("row with clustering {other:?}")),
        };
        if let Some(before) = previous {
            if (reversed && c >= before) || (!reversed && c <= before) {
                return Err(format!(
                    "row c={c} after c={before} in a {} read",
                    if reversed { "descending" } else { "ascending" }
                ));
            }
        }
        previous = Some(c);
        match row.column(V_ID) {
            Some(ColumnData::Simple(cell)) => {
                out.insert(c, Version { ts: cell.timestamp, value: cell.value.clone() });
            }
            other => return Err(format!("row c={c} has v = {other:?}")),
        }
    }
    Ok(out)
}
