//! Writes and deletions of one partition: the unit that storage applies
//! atomically and that the coordinator ships to replicas.
//!
//! Invariants:
//! - Timestamps are microseconds since the Unix epoch (Cassandra's `writetime`).
//! - `local_deletion_time` is seconds since the epoch: for a tombstone, when it
//!   was deleted (purgeable `gc_grace_seconds` later); for an expiring cell,
//!   when it expires (`write time + ttl`).
//! - Clustering values and partition keys are the serialized (wire-form) bytes.

use bytes::Bytes;
use uuid::Uuid;

/// When and at what timestamp something was deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeletionTime {
    pub timestamp: i64,
    pub local_deletion_time: i32,
}

/// A row's primary-key liveness (written by INSERT), as Cassandra's `LivenessInfo`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Liveness {
    pub timestamp: i64,
    /// 0 when the row marker does not expire.
    pub ttl: i32,
    /// Expiry (seconds since epoch) when `ttl > 0`.
    pub local_expiration: i32,
}

/// One cell write or cell deletion.
#[derive(Clone, Debug, PartialEq)]
pub struct CellWrite {
    pub column: u16,
    /// The element key for a non-frozen collection's cell: the set element, the
    /// map key, or the list element's time-ordered id.
    pub path: Option<Bytes>,
    pub timestamp: i64,
    /// 0 when the cell does not expire.
    pub ttl: i32,
    /// See module invariants; ignored for a live cell without TTL.
    pub local_deletion_time: i32,
    /// `None` for a cell tombstone.
    pub value: Option<Bytes>,
}

/// Writes to one row (or the static row) of a partition.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct RowWrite {
    pub clustering: Vec<Bytes>,
    pub is_static: bool,
    pub marker: Option<Liveness>,
    pub deletion: Option<DeletionTime>,
    /// Whole-collection deletions (before setting a collection to a new value).
    pub complex_deletions: Vec<(u16, DeletionTime)>,
    pub cells: Vec<CellWrite>,
}

/// One end of a clustering range: a prefix of the clustering columns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusteringBound {
    /// Empty for an unbounded end.
    pub prefix: Vec<Bytes>,
    pub inclusive: bool,
}

impl ClusteringBound {
    pub fn unbounded() -> ClusteringBound {
        ClusteringBound { prefix: Vec::new(), inclusive: true }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct RangeTombstone {
    pub start: ClusteringBound,
    pub end: ClusteringBound,
    pub deletion: DeletionTime,
}

/// All changes to one partition of one table.
#[derive(Clone, Debug, PartialEq)]
pub struct Mutation {
    pub table: Uuid,
    pub token: i64,
    /// Serialized partition key (CompositeType form for compound keys).
    pub partition_key: Bytes,
    pub partition_deletion: Option<DeletionTime>,
    pub range_tombstones: Vec<RangeTombstone>,
    pub rows: Vec<RowWrite>,
}

impl Mutation {
    pub fn new(table: Uuid, token: i64, partition_key: Bytes) -> Mutation {
        Mutation { table, token, partition_key, partition_deletion: None, range_tombstones: Vec::new(), rows: Vec::new() }
    }

    pub fn is_empty(&self) -> bool {
        self.partition_deletion.is_none() && self.range_tombstones.is_empty() && self.rows.is_empty()
    }
}
