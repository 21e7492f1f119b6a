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
//! cluster node from its repairs). Deletion markers go only in the two-pass
//! purge of `Storage::compact`, which the node also runs by itself, as
//! Cassandra's tombstone compactions, on a table whose droppable markers
//! (counted on the write path) exceed its `tombstone_threshold`
//! (`purge`: `Storage::tombstone_compaction`), so a delete-heavy table stops
//! growing with no operator.
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
//! Secondary indexes (`index`) are hidden tables of the engine, one column
//! family each, fed by the write path, raw writes, ingested streams and a
//! background build; `index_keys` looks a value up within a token range.
//!
//! Replicas exchange unfiltered partition data for digest reads and read
//! repair (`raw`): `read_raw`, `merge_raw`, `resolve_raw`, `repair_diff`,
//! `apply_raw`. Topology changes and repair move whole token ranges as
//! sorted files (`stream`): `export_ranges`, `ingest_streamed`; repair
//! compares replicas by per-partition hashes (`validate`: `partition_hashes`),
//! and skips the ranges no write reached since every replica last agreed
//! (`unrepaired`: `set_ring`, `repair_states`, `set_repaired`).
//!
//! Snapshots (`snapshot`) keep a keyspace's tables as hard links to their
//! sorted files (a RocksDB checkpoint trimmed to those tables), and open
//! them again read-only as a storage of their own to read their raw cells.
//!
//! Invariants:
//! - The manifest (`schema.json`) names every column family in use; it is
//!   written atomically (temp file, fsync, rename, fsync dir) and column
//!   families it does not name are dropped at open.
//! - After an fsync failure (or a failed log append other than for want of
//!   space) the engine is poisoned: every later write fails (it never
//!   acknowledges a write it may not have made durable).
//! - A full disk (ENOSPC, EDQUOT) never poisons, panics or loses an
//!   acknowledged write: the write that hits it fails (`NoSpace`; it never
//!   reaches its memtable), a failed
//!   flush keeps its memtable and leaves no partial file, writers never wait
//!   for flushes that fail (they are refused once their table has too many
//!   memtables waiting), and writes work
//!   again once there is room (RocksDB's own background errors for want of
//!   space clear by themselves, through its `SstFileManager`).
//! - With the disk usage guardrail on (`disk_usage`), while the data
//!   directory's disk is over the fail threshold every mutation that adds
//!   data is refused before anything is written (`DiskUsageExceeded`); reads
//!   and deletions go on.
//! - Every acknowledged durable write is in the commit log until the
//!   memtable holding it has been ingested into its column family, and a
//!   logged write is readable only once its record is in the log (synced,
//!   in `batch` and `group` mode).
//! - The power-loss layer (`power_loss`, fault tests only) changes nothing
//!   a journaled fsync made durable.
//! - Writes collected into a `WriteBatch` (`Storage::collect`) are made when
//!   the batch is committed (`Storage::commit`); whoever owns a batch answers
//!   the requests whose writes it holds only after that commit.

pub mod cell;
mod commitlog;
mod counter;
mod disk_usage;
mod engine;
mod filter;
mod flush;
mod index;
pub mod keys;
mod manifest;
mod memtable;
pub mod packed;
mod paxos;
pub mod power_loss;
mod purge;
mod raw;
mod read;
mod row_cache;
pub mod snapshot;
mod spans;
mod stream;
mod throttle;
mod tuning;
mod unrepaired;
mod validate;
mod varint;
mod write;

pub use commitlog::SYNC_JOURNAL_ENV;
pub use counter::LocalShard;
pub use disk_usage::{adds_data, usage_percent, DiskUsageConfig, DiskUsageState, MONITOR_INTERVAL};
pub use engine::{
    CommitlogSync, CompactionStats, NodeSample, Storage, StorageConfig, TableCompactionStats, TableSample,
};
pub use index::{entry_value as index_entry_value, IndexScan, INDEX_NOT_AVAILABLE};
pub use manifest::STORAGE_FORMAT;
pub use purge::{DEFAULT_INTERVAL_SECS as TOMBSTONE_COMPACTION_INTERVAL, DEFAULT_THRESHOLD as TOMBSTONE_THRESHOLD};
pub use raw::{merge_raw, repair_diff, RawPartition};
pub use read::{Cell, ColumnData, Partition, PartitionRead, Row, ScanRange};
pub use row_cache::RowCacheStats;
pub use snapshot::{SnapshotEntry, SnapshotManifest, SnapshotReader};
pub use stream::{crc32c_prefix, StreamedFile};
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
    /// A write refused by the disk usage guardrail (`disk_usage`), in
    /// Cassandra's words (its `replica_disk_usage` guardrail's failure; an
    /// InvalidRequest to clients).
    #[error(
        "Guardrail replica_disk_usage violated: Write request failed because disk usage exceeds failure threshold"
    )]
    DiskUsageExceeded,
    /// The data directory's file system is out of space (ENOSPC, EDQUOT): the
    /// write failed, and writes work again once there is room.
    #[error("Write failed: the data directory's disk is full ({0})")]
    NoSpace(String),
}

impl StorageError {
    /// Whether this is the file system running out of space (ENOSPC, or
    /// EDQUOT: out of quota).
    pub fn is_out_of_space(&self) -> bool {
        match self {
            StorageError::NoSpace(_) => true,
            StorageError::Io(e) => matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)),
            // RocksDB's I/O errors, by the message of its NoSpace status or the system's.
            StorageError::Engine(message) => {
                ["No space left on device", "Disk quota exceeded", "NoSpace"].iter().any(|m| message.contains(m))
            }
            _ => false,
        }
    }
}

impl From<rocksdb::Error> for StorageError {
    fn from(e: rocksdb::Error) -> Self {
        StorageError::Engine(e.into_string())
    }
}
