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

/// `CellWrite::ttl` of a counter cell: its `value` is a counter context
/// (`counter`), never an expiring cell (counters cannot have a TTL). In a
/// counter mutation sent to the counter leader (`COUNTER_MUTATION_REQ`) the
/// value is instead the update's delta, an 8-byte big-endian `bigint`.
pub const COUNTER_TTL: i32 = i32::MIN;

/// One cell write or cell deletion.
#[derive(Clone, Debug, PartialEq)]
pub struct CellWrite {
    pub column: u16,
    /// The element key for a non-frozen collection's cell: the set element, the
    /// map key, or the list element's time-ordered id.
    pub path: Option<Bytes>,
    pub timestamp: i64,
    /// 0 when the cell does not expire; `COUNTER_TTL` for a counter cell.
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

impl CellWrite {
    /// A counter cell (see `COUNTER_TTL`).
    pub fn is_counter(&self) -> bool {
        self.ttl == COUNTER_TTL
    }
}

impl Mutation {
    pub fn new(table: Uuid, token: i64, partition_key: Bytes) -> Mutation {
        Mutation {
            table,
            token,
            partition_key,
            partition_deletion: None,
            range_tombstones: Vec::new(),
            rows: Vec::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.partition_deletion.is_none() && self.range_tombstones.is_empty() && self.rows.is_empty()
    }

    /// The bytes of data this mutation writes, as Cassandra 5.0's
    /// `PartitionUpdate.dataSize()` counts them: what `batch_size_*_threshold`
    /// compare. Fitted to the sizes Cassandra 5.0.9 reports in its batch
    /// warnings (inserts, TTLs, updates, statics, collections, row, range and
    /// partition deletions all give the same figure): 29 bytes per partition
    /// (its deletion info and static row), a range tombstone 16 bytes plus its
    /// bounds, a row 21 bytes (33 with an expiring marker) plus its clustering
    /// values, a cell 20 bytes plus its value and path, and 12 bytes per
    /// collection column. The partition key is not counted.
    pub fn data_size(&self) -> u64 {
        let prefix = |p: &[Bytes]| p.iter().map(|v| v.len() as u64).sum::<u64>();
        let ranges: u64 =
            self.range_tombstones.iter().map(|rt| prefix(&rt.start.prefix) + prefix(&rt.end.prefix) + 16).sum();
        let rows: u64 = self
            .rows
            .iter()
            .map(|r| {
                // The static row's base is in the partition's 29 bytes.
                let base = match (r.is_static, r.marker) {
                    (true, _) => 0,
                    (false, Some(m)) if m.ttl > 0 => 33,
                    (false, _) => 21,
                };
                let cells: u64 = r
                    .cells
                    .iter()
                    .map(|c| {
                        20 + c.value.as_ref().map_or(0, |v| v.len() as u64)
                            + c.path.as_ref().map_or(0, |p| p.len() as u64)
                    })
                    .sum();
                let mut complex: Vec<u16> = r.complex_deletions.iter().map(|(c, _)| *c).collect();
                complex.extend(r.cells.iter().filter(|c| c.path.is_some()).map(|c| c.column));
                complex.sort_unstable();
                complex.dedup();
                base + prefix(&r.clustering) + cells + 12 * complex.len() as u64
            })
            .sum();
        29 + ranges + rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(v: i32) -> Bytes {
        Bytes::copy_from_slice(&v.to_be_bytes())
    }

    fn cell(column: u16, value: Option<Bytes>, path: Option<Bytes>) -> CellWrite {
        CellWrite { column, path, timestamp: 1, ttl: 0, local_deletion_time: i32::MAX, value }
    }

    /// The per-partition sizes Cassandra 5.0.9 reported in its batch warnings
    /// for batches of 200 partitions of these shapes.
    #[test]
    fn data_size_matches_cassandra() {
        let live = Liveness { timestamp: 1, ttl: 0, local_expiration: i32::MAX };
        let del = DeletionTime { timestamp: 1, local_deletion_time: 1 };
        let m = |rows: Vec<RowWrite>| Mutation { rows, ..Mutation::new(Uuid::nil(), 0, int(1)) };
        // INSERT INTO kv (k int PRIMARY KEY, v int): 74; UPDATE (no marker): 74.
        let insert = RowWrite { marker: Some(live), cells: vec![cell(1, Some(int(5)), None)], ..RowWrite::default() };
        assert_eq!(m(vec![insert.clone()]).data_size(), 74);
        assert_eq!(m(vec![RowWrite { marker: None, ..insert.clone() }]).data_size(), 74);
        // ... USING TTL 100: 86.
        let ttl = Liveness { ttl: 100, ..live };
        assert_eq!(m(vec![RowWrite { marker: Some(ttl), ..insert.clone() }]).data_size(), 86);
        // INSERT (k) only: 50.
        assert_eq!(m(vec![RowWrite { marker: Some(live), ..RowWrite::default() }]).data_size(), 50);
        // kc (k int, c int, v text, s int static): a row with 'abc' 77; with the static 101.
        let row = RowWrite {
            clustering: vec![int(1)],
            marker: Some(live),
            cells: vec![cell(2, Some(Bytes::from_static(b"abc")), None)],
            ..RowWrite::default()
        };
        assert_eq!(m(vec![row.clone()]).data_size(), 77);
        let stat = RowWrite { is_static: true, cells: vec![cell(3, Some(int(1)), None)], ..RowWrite::default() };
        assert_eq!(m(vec![stat, row]).data_size(), 101);
        // DELETE FROM kv WHERE k = ?: 29; DELETE v: 70; DELETE a kc row: 54.
        assert_eq!(Mutation { partition_deletion: Some(del), ..m(vec![]) }.data_size(), 29);
        assert_eq!(m(vec![RowWrite { cells: vec![cell(1, None, None)], ..RowWrite::default() }]).data_size(), 70);
        assert_eq!(
            m(vec![RowWrite { clustering: vec![int(1)], deletion: Some(del), ..RowWrite::default() }]).data_size(),
            54
        );
        // DELETE ... WHERE k = ? AND c > 1: 49.
        let rt = RangeTombstone {
            start: ClusteringBound { prefix: vec![int(1)], inclusive: false },
            end: ClusteringBound::unbounded(),
            deletion: del,
        };
        assert_eq!(Mutation { range_tombstones: vec![rt], ..m(vec![]) }.data_size(), 49);
        // kl (k int PRIMARY KEY, m map<int,int>): INSERT {1:2} 90 (with its complex deletion), m = m + {3:4} 90.
        let entry = cell(1, Some(int(2)), Some(int(1)));
        let map = RowWrite {
            marker: Some(live),
            complex_deletions: vec![(1, del)],
            cells: vec![entry.clone()],
            ..RowWrite::default()
        };
        assert_eq!(m(vec![map]).data_size(), 90);
        assert_eq!(m(vec![RowWrite { cells: vec![entry], ..RowWrite::default() }]).data_size(), 90);
    }
}
