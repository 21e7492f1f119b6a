//! The counter leader's read of its own shards (`Storage::counter_shards`):
//! for each counter column of one row, the stored shard of one counter id,
//! so the leader can write the shard's next version (clock + 1, count + delta).
//!
//! Invariants:
//! - The shard returned is the stored one whether or not a row, range or
//!   partition deletion shadows it: the next version must out-rank every
//!   version any replica holds (`types::counter` keeps the highest clock).
//!   Its count is kept too, so a counter incremented after its row or
//!   partition was deleted reads as its old value plus the increment (the
//!   new shard is newer than the deletion; the other replicas' shards stay
//!   shadowed). That is what Cassandra 5.0.9 answers while its counter cache
//!   holds the shard (the default); with a cold cache it counts from zero:
//!   Cassandra documents re-incrementing a deleted counter as unsupported.
//! - A counter whose cell is a tombstone (a deleted column) has no shard: a
//!   tombstone beats every counter cell, so updates to it are lost until the
//!   tombstone is purged, as in Cassandra.

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
            if let (Some(ColumnPart::Simple(col)), Some(c)) =
                (k.get(row.len()..).and_then(keys::parse_column_part), CellRef::decode(v))
            {
                if c.kind == cell::KIND_COUNTER {
                    cells.push((col, c.value.to_vec()));
                }
            }
            it.next();
        }
        it.status()?;
        for (col, context) in cells {
            let Some(i) = columns.iter().position(|c| *c == col) else { continue };
            let Some(slot) = out.get_mut(i) else { continue };
            if let Some(s) = types::counter::shard_of(&context, id) {
                *slot = LocalShard { clock: s.clock, count: s.count, timestamp: s.timestamp };
            }
        }
        Ok(out)
    }
}
