//! Per-table metrics (Cassandra's `Table` group) recorded by the storage
//! engine: local read, range and write latencies, partition sizes written. Shared by every `TableStore` of a table
//! across schema changes; gauges (SSTables, disk, memtables, pending
//! compactions) are read from the engine at scrape time instead.

use std::sync::atomic::AtomicU64;

use crate::histogram::Histogram;

#[derive(Default)]
pub struct TableMetrics {
    /// Local partition reads (µs).
    pub read_latency: Histogram,
    /// Local range scans (µs).
    pub range_latency: Histogram,
    /// Local writes: the memtable merge of each mutation (µs).
    pub write_latency: Histogram,
    /// Tombstones (deletion markers, cell tombstones) each local read went through.
    pub tombstones_scanned: Histogram,
    /// Other cells each local read went through.
    pub live_scanned: Histogram,
    /// SSTables each local partition read went through (Table.SSTablesPerReadHistogram).
    pub sstables_per_read: crate::histogram::CountHistogram,
    /// Bytes of the SSTables flushes wrote (Table.BytesFlushed).
    pub bytes_flushed: AtomicU64,
    /// Bytes of each partition a flush wrote, keys and values (the role of
    /// Table.EstimatedPartitionSizeHistogram, which Cassandra fills from
    /// each SSTable written: a partition spread over several files counts
    /// once per file).
    pub partition_size: Histogram,
}
