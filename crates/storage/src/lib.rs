//! Single-node storage: Cassandra's data model on RocksDB.
//!
//! One RocksDB column family per table; keys laid out as `keys` describes,
//! each row packed into one key (`packed`); every row and deletion marker
//! written as a merge operand that keeps the last write of each cell by
//! Cassandra's rules (`cell`), so no write reads first. Deletions
//! of rows, ranges and partitions are markers applied at read time and, by the
//! compaction filter (`filter`), at compaction time; tombstones and expired
//! cells are purged after `gc_grace_seconds`, and only once deleted before
//! the table's repaired horizon (`Storage::set_tombstone_horizon`, set by a
//! cluster node from its repairs).
//! A table's `compaction` and `compression` options shape its column family
//! (`tuning`), and a compression check turns LZ4 off for data it cannot shrink.
//!
//! Writes go to Shoal's own commit log (`commitlog`: Cassandra-style
//! segments) and memtables (`memtable`: a B-tree per table, writes to one key
//! merged at once), not through RocksDB's write-ahead log and skiplist; full
//! memtables are written as sorted files and ingested into the column family
//! (`flush`). The log is synced per `CommitlogSync`: `periodic` (fsync every
//! period; a crash of the machine, not of the process, loses at most one
//! period), `batch` (fsync before acknowledging; concurrent writers share one
//! fsync) and `group` (acknowledge after the next group fsync).
//!
//! Replicas exchange unfiltered partition data for digest reads and read
//! repair (`raw`): `read_raw`, `merge_raw`, `resolve_raw`, `repair_diff`,
//! `apply_raw`. Topology changes and repair move whole token ranges as
//! sorted files (`stream`): `export_ranges`, `ingest_streamed`; repair
//! compares replicas by per-partition hashes (`validate`: `partition_hashes`),
//! and skips the ranges no write reached since every replica last agreed
//! (`unrepaired`: `set_ring`, `repair_states`, `set_repaired`).
//!
//! Invariants:
//! - The manifest (`schema.json`) names every column family in use; it is
//!   written atomically (temp file, fsync, rename, fsync dir) and column
//!   families it does not name are dropped at open.
//! - After an fsync failure (or a failed log append) the engine is poisoned:
//!   every later write fails (it never acknowledges a write it may not have
//!   made durable).
//! - Every acknowledged durable write is in the commit log until the
//!   memtable holding it has been ingested into its column family.
//! - Writes collected into a `WriteBatch` (`Storage::collect`) are made when
//!   the batch is committed (`Storage::commit`); whoever owns a batch answers
//!   the requests whose writes it holds only after that commit.

pub mod cell;
mod commitlog;
mod engine;
mod filter;
mod flush;
pub mod keys;
mod manifest;
mod memtable;
pub mod packed;
mod raw;
mod read;
mod stream;
mod tuning;
mod unrepaired;
mod validate;
mod varint;
mod write;

pub use engine::{CommitlogSync, Storage, StorageConfig};
pub use manifest::STORAGE_FORMAT;
pub use raw::{merge_raw, repair_diff, RawPartition};
pub use read::{Cell, ColumnData, Partition, PartitionRead, Row, ScanRange};
pub use stream::StreamedFile;
pub use unrepaired::RangeState;
pub use validate::{bucket_count, bucket_of, bucket_range, fold_buckets, PartitionHash};
pub use write::WriteBatch;

/// Errors from the storage engine.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("storage engine error: {0}")]
    Engine(String),
    #[error("storage is poisoned after a failed commit log sync; refusing writes: {0}")]
    Poisoned(String),
    #[error("unknown table {0}")]
    UnknownTable(uuid::Uuid),
    #[error("Key length of {0} is longer than maximum of 65535")]
    KeyTooLong(usize),
    #[error("{0}")]
    Invalid(String),
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
}

impl From<rocksdb::Error> for StorageError {
    fn from(e: rocksdb::Error) -> Self {
        StorageError::Engine(e.into_string())
    }
}
