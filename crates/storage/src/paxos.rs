//! The Paxos state of lightweight transactions, per partition (Cassandra's
//! `system.paxos`): opaque records, one per (table, partition), in a column
//! family of their own (`paxos`) that, unlike the tables, is written through
//! RocksDB's own write-ahead log. `cluster::paxos` decides what a record
//! holds (promised ballot, accepted proposal, most recent commit); this
//! module only keeps it.
//!
//! Invariants:
//! - A record put is durable as the commit log mode promises a write:
//!   `batch` and `group` fsync RocksDB's log before `paxos_put` returns;
//!   `periodic` leaves it to the periodic sync (which syncs this log too),
//!   as Cassandra's `system.paxos` goes through its periodic commit log.
//! - The column family is named in no manifest and dropped by nothing: it
//!   exists from the first open on.
//! - A record expires as Cassandra's `system.paxos` rows do: after its
//!   table's `gc_grace_seconds`, at least 3 hours after its last put
//!   (`paxos_ttl`). An expired record reads as absent and compactions drop
//!   it (`expired`; the column family is compacted at least daily), so the
//!   state of partitions no longer written does not grow without bound.
//!   Records of earlier versions (no expiry) are kept.

use std::time::{SystemTime, UNIX_EPOCH};

use rocksdb::compaction_filter::Decision;
use rocksdb::WriteOptions;
use uuid::Uuid;

use crate::engine::{CommitlogSync, Storage};
use crate::StorageError;

/// The column family holding Paxos records.
pub(crate) const PAXOS_CF: &str = "paxos";

/// A stored record that expires: this byte, its expiry (seconds since the
/// epoch, big-endian u64), then the caller's record.
const EXPIRING: u8 = 0xE1;

/// The shortest life of a record (Cassandra's paxos TTL floor).
const MIN_TTL_SECS: u64 = 3 * 3600;

/// The life of a record of a table with `gc_grace_seconds`.
pub fn paxos_ttl(gc_grace_seconds: i32) -> u64 {
    u64::try_from(gc_grace_seconds).unwrap_or(0).max(MIN_TTL_SECS)
}

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// The record in a stored value, or None when it expired by `now`.
fn unwrap_record(value: &[u8], now: u64) -> Option<&[u8]> {
    match value.split_first() {
        Some((&EXPIRING, rest)) => {
            let (at, record) = rest.split_first_chunk::<8>()?;
            (now < u64::from_be_bytes(*at)).then_some(record)
        }
        _ => Some(value),
    }
}

/// Whether a stored value has expired by `now` (the compaction filter's test).
pub(crate) fn expired(value: &[u8], now: u64) -> bool {
    unwrap_record(value, now).is_none()
}

/// The paxos column family's compaction filter: drops expired records.
pub(crate) fn compaction_filter(_level: u32, _key: &[u8], value: &[u8]) -> Decision {
    if expired(value, now_secs()) {
        Decision::Remove
    } else {
        Decision::Keep
    }
}

impl Storage {
    /// The Paxos record stored under `key` (the caller's encoding of table
    /// and partition), if any.
    pub fn paxos_get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        let cf = self
            .db
            .cf_handle(PAXOS_CF)
            .ok_or_else(|| StorageError::Engine(format!("column family {PAXOS_CF} is missing")))?;
        let value = self.db.get_cf(&cf, key)?;
        Ok(value.and_then(|v| unwrap_record(&v, now_secs()).map(<[u8]>::to_vec)))
    }

    /// Replaces the Paxos record under `key` (of a partition of `table`),
    /// durably per the commit log mode; it expires after the table's
    /// `paxos_ttl`.
    pub fn paxos_put(&self, key: &[u8], table: &Uuid, record: &[u8]) -> Result<(), StorageError> {
        self.check_poisoned()?;
        let cf = self
            .db
            .cf_handle(PAXOS_CF)
            .ok_or_else(|| StorageError::Engine(format!("column family {PAXOS_CF} is missing")))?;
        let gc_grace = self.table(table).map(|t| t.gc_grace.load(std::sync::atomic::Ordering::Relaxed)).unwrap_or(0);
        let mut value = Vec::with_capacity(9 + record.len());
        value.push(EXPIRING);
        value.extend_from_slice(&(now_secs() + paxos_ttl(gc_grace)).to_be_bytes());
        value.extend_from_slice(record);
        let mut opts = WriteOptions::default();
        opts.set_sync(!matches!(self.config.commitlog_sync, CommitlogSync::Periodic { .. }));
        self.db.put_cf_opt(&cf, key, value, &opts)?;
        Ok(())
    }

    /// Removes the Paxos record under `key`.
    pub fn paxos_delete(&self, key: &[u8]) -> Result<(), StorageError> {
        let cf = self
            .db
            .cf_handle(PAXOS_CF)
            .ok_or_else(|| StorageError::Engine(format!("column family {PAXOS_CF} is missing")))?;
        self.db.delete_cf(&cf, key)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::StorageConfig;

    #[test]
    fn records_survive_a_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = StorageConfig {
            data_dir: dir.path().to_path_buf(),
            commitlog_sync: CommitlogSync::Batch,
            cache_bytes: 8 << 20,
            row_cache_bytes: 0,
            memtable_bytes: 4 << 20,
            memtable_space: 64 << 20,
            tombstone_horizon: i64::MAX,
        };
        {
            let (storage, _) = Storage::open(config.clone()).expect("open");
            assert_eq!(storage.paxos_get(b"k").expect("get"), None);
            let table = Uuid::nil();
            storage.paxos_put(b"k", &table, b"one").expect("put");
            storage.paxos_put(b"k", &table, b"two").expect("put");
            storage.paxos_put(b"gone", &table, b"x").expect("put");
            storage.paxos_delete(b"gone").expect("delete");
            storage.shutdown().expect("shutdown");
        }
        let (storage, _) = Storage::open(config).expect("reopen");
        assert_eq!(storage.paxos_get(b"k").expect("get").as_deref(), Some(&b"two"[..]));
        assert_eq!(storage.paxos_get(b"gone").expect("get"), None);
    }

    #[test]
    fn a_record_expires_after_its_ttl_and_old_records_without_one_are_kept() {
        let now = 1_000_000;
        let mut value = vec![EXPIRING];
        value.extend_from_slice(&(now + 10u64).to_be_bytes());
        value.extend_from_slice(b"rec");
        assert_eq!(unwrap_record(&value, now), Some(&b"rec"[..]));
        assert_eq!(unwrap_record(&value, now + 9), Some(&b"rec"[..]));
        assert_eq!(unwrap_record(&value, now + 10), None);
        assert!(expired(&value, now + 11) && !expired(&value, now));
        // A record of an earlier version starts with the state's version byte: never expires.
        assert_eq!(unwrap_record(&[1, 2, 3], u64::MAX), Some(&[1u8, 2, 3][..]));
        // A truncated expiring value reads as absent rather than as garbage.
        assert_eq!(unwrap_record(&[EXPIRING, 0, 0], now), None);
        assert_eq!(paxos_ttl(864_000), 864_000);
        assert_eq!(paxos_ttl(0), 3 * 3600);
        assert_eq!(paxos_ttl(-5), 3 * 3600);
    }
}
