//! The counter leader's read of its own shards (`Storage::counter_shards`):
//! for each counter column of one row, the stored shard of one counter id,
//! deletions considered, so the leader can write the shard's next version.
//!
//! Invariants:
//! - The clock returned is the stored shard's, shadowed or not: the next
//!   version must out-rank every version any replica holds (`types::counter`
//!   keeps the highest clock), or a re-incremented counter would lose its
//!   new count to the deleted one.
//! - The count returned is 0 when the shard is shadowed by a row, range or
//!   partition deletion: a deleted counter counts again from zero, as
//!   Cassandra's leader reads no current value under a deletion.
//! - A counter whose cell is a tombstone (a deleted column) is reported as
//!   such: a tombstone beats every counter cell, so updates to it are lost
//!   until the tombstone is purged, as in Cassandra.

#![deny(clippy::indexing_slicing)]

use bytes::Bytes;
use uuid::Uuid;

use crate::cell::{self, CellRef};
use crate::engine::Storage;
use crate::keys::{self, ColumnPart};
use crate::read::Cursor;
use crate::StorageError;

/// One counter column's local shard as the leader sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct LocalShard {
    /// The stored shard's clock (0 when there is none).
    pub clock: i64,
    /// Its count, 0 when deleted.
    pub count: i64,
    /// The stored shard's timestamp (`i64::MIN` when there is none).
    pub timestamp: i64,
}

impl Storage {
    /// The shard of counter id `id` of each of `columns` in one row
    /// (`clustering`, or the static row), in the order of `columns`.
    #[allow(clippy::too_many_arguments)]
    pub fn counter_shards(
        &self,
        table: &Uuid,
        token: i64,
        partition_key: &[u8],
        is_static: bool,
        clustering: &[Bytes],
        columns: &[u16],
        id: &[u8; 16],
    ) -> Result<Vec<LocalShard>, StorageError> {
        let store = self.table(table)?;
        let cf = self.cf(&store)?;
        let mut prefix = Vec::with_capacity(partition_key.len() + 11);
        keys::partition_prefix(token, partition_key, &mut prefix)?;
        let mut row = prefix.clone();
        if is_static {
            row.push(keys::SECTION_STATIC);
        } else {
            row.push(keys::SECTION_ROWS);
            keys::encode_clustering(&store.layout, clustering, &mut row)?;
        }
        let clustering_key = row.get(prefix.len() + 1..).unwrap_or_default().to_vec();
        // Header: the partition deletion and range tombstones.
        let mut shadow = i64::MIN;
        {
            let mut lower = prefix.clone();
            lower.push(keys::SECTION_PARTITION_DELETION);
            let mut upper = prefix.clone();
            upper.push(keys::SECTION_STATIC);
            let mut it = self.cells(&store, &cf, lower, upper)?;
            it.seek_to_first();
            while it.valid() {
                let (Some(k), Some(v)) = (it.key(), it.value()) else { break };
                if let (Some((&section, body)), Some(c)) =
                    (k.get(prefix.len()..).and_then(|r| r.split_first()), CellRef::decode(v))
                {
                    match section {
                        keys::SECTION_PARTITION_DELETION => shadow = shadow.max(c.timestamp),
                        keys::SECTION_RANGE_TOMBSTONE if !is_static => {
                            if let Some(b) = keys::decode_range_bounds(body) {
                                if keys::bound_start_admits(b.start, b.start_inclusive, &clustering_key)
                                    && keys::bound_end_admits(b.end, b.end_inclusive, &clustering_key)
                                {
                                    shadow = shadow.max(c.timestamp);
                                }
                            }
                        }
                        _ => {}
                    }
                }
                it.next();
            }
        }
        let mut out = vec![LocalShard { clock: 0, count: 0, timestamp: i64::MIN }; columns.len()];
        let upper = keys::prefix_successor(&row).unwrap_or_else(|| {
            let mut end = row.clone();
            end.push(0xFF);
            end
        });
        let mut it = self.cells(&store, &cf, row.clone(), upper)?;
        it.seek_to_first();
        let mut cells: Vec<(u16, Vec<u8>)> = Vec::new();
        while it.valid() {
            let (Some(k), Some(v)) = (it.key(), it.value()) else { break };
            if let (Some(part), Some(c)) = (k.get(row.len()..).and_then(keys::parse_column_part), CellRef::decode(v)) {
                match part {
                    ColumnPart::Simple(keys::COLUMN_ROW_DELETION) => shadow = shadow.max(c.timestamp),
                    ColumnPart::Simple(col) if c.kind == cell::KIND_COUNTER => cells.push((col, c.value.to_vec())),
                    _ => {}
                }
            }
            it.next();
        }
        for (col, context) in cells {
            let Some(i) = columns.iter().position(|c| *c == col) else { continue };
            let Some(slot) = out.get_mut(i) else { continue };
            if let Some(s) = types::counter::shard_of(&context, id) {
                let live = s.timestamp > shadow;
                *slot = LocalShard { clock: s.clock, count: if live { s.count } else { 0 }, timestamp: s.timestamp };
            }
        }
        Ok(out)
    }
}
