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

use rocksdb::WriteOptions;

use crate::engine::{CommitlogSync, Storage};
use crate::StorageError;

/// The column family holding Paxos records.
pub(crate) const PAXOS_CF: &str = "paxos";

impl Storage {
    /// The Paxos record stored under `key` (the caller's encoding of table
    /// and partition), if any.
    pub fn paxos_get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        let cf = self
            .db
            .cf_handle(PAXOS_CF)
            .ok_or_else(|| StorageError::Engine(format!("column family {PAXOS_CF} is missing")))?;
        Ok(self.db.get_cf(&cf, key)?)
    }

    /// Replaces the Paxos record under `key`, durably per the commit log mode.
    pub fn paxos_put(&self, key: &[u8], record: &[u8]) -> Result<(), StorageError> {
        self.check_poisoned()?;
        let cf = self
            .db
            .cf_handle(PAXOS_CF)
            .ok_or_else(|| StorageError::Engine(format!("column family {PAXOS_CF} is missing")))?;
        let mut opts = WriteOptions::default();
        opts.set_sync(!matches!(self.config.commitlog_sync, CommitlogSync::Periodic { .. }));
        self.db.put_cf_opt(&cf, key, record, &opts)?;
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
            memtable_bytes: 4 << 20,
            memtable_space: 64 << 20,
            tombstone_horizon: i64::MAX,
        };
        {
            let (storage, _) = Storage::open(config.clone()).expect("open");
            assert_eq!(storage.paxos_get(b"k").expect("get"), None);
            storage.paxos_put(b"k", b"one").expect("put");
            storage.paxos_put(b"k", b"two").expect("put");
            storage.paxos_put(b"gone", b"x").expect("put");
            storage.paxos_delete(b"gone").expect("delete");
            storage.shutdown().expect("shutdown");
        }
        let (storage, _) = Storage::open(config).expect("reopen");
        assert_eq!(storage.paxos_get(b"k").expect("get").as_deref(), Some(&b"two"[..]));
        assert_eq!(storage.paxos_get(b"gone").expect("get"), None);
    }
}
