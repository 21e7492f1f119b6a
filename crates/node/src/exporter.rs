//! What the node's metrics say, in two forms: the Prometheus text a scrape
//! of `/metrics` gets (on `prometheus_port`, default 9180 as ScyllaDB's, and
//! on the admin port), and the JSON of the `nodetool`-style commands
//! (`proxyhistograms`, `tablehistograms`, `tablestats`, `tpstats`).
//!
//! Invariants:
//! - A scrape reads atomics and RocksDB properties only: it takes no lock a
//!   write waits for (the table map's read lock, briefly, to list tables).
//! - Every family's name and meaning is in README's "Operating Shoal"
//!   table, with the Cassandra metric it stands for.

use std::sync::atomic::Ordering;

use metrics::client::{Op, CLIENT};
use metrics::prom::Writer;
use metrics::{Snapshot, Stage};
use serde_json::{json, Value as Json};

use crate::admin::AdminState;

/// The `le` bounds of the cells-per-read histograms.
const SCANNED_BOUNDS: [u64; 10] = [0, 1, 10, 100, 1_000, 5_000, 10_000, 50_000, 100_000, 1_000_000];
/// Bucket bounds (bytes) of the partition size histogram.
const PARTITION_SIZE_BOUNDS: [u64; 9] =
    [100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000, 1_000_000_000, 10_000_000_000];

/// The request stages, by Cassandra's pool names.
const STAGES: [(&str, &Stage); 2] = metrics::STAGES;

/// The Prometheus text of every family.
pub fn prometheus(state: &AdminState) -> String {
    let mut w = Writer::new();
    client_requests(&mut w);
    // One walk over the tables' RocksDB properties serves both sections.
    let samples = state.storage.table_samples();
    tables(&mut w, &samples);
    node(&mut w, state, &samples);
    w.finish()
}

fn client_requests(w: &mut Writer) {
    let used: Vec<_> = CLIENT.used().collect();
    let help =
        "Latency of client requests this node coordinated (ClientRequest.Latency), by operation and consistency level.";
    for (op, cl, slot) in &used {
        w.latency(
            "shoal_client_request_latency_seconds",
            help,
            &[("op", op.label()), ("cl", cl.name())],
            &slot.latency.snapshot(),
        );
    }
    type Count = fn(&metrics::client::Slot) -> u64;
    let counters: [(&str, &str, Count); 3] = [
        ("shoal_client_request_timeouts_total", "Client requests that timed out (ClientRequest.Timeouts).", |s| {
            s.timeouts.load(Ordering::Relaxed)
        }),
        (
            "shoal_client_request_unavailables_total",
            "Client requests refused for want of live replicas (ClientRequest.Unavailables).",
            |s| s.unavailables.load(Ordering::Relaxed),
        ),
        ("shoal_client_request_failures_total", "Client requests replicas failed (ClientRequest.Failures).", |s| {
            s.failures.load(Ordering::Relaxed)
        }),
    ];
    for (name, help, read) in counters {
        for (op, cl, slot) in &used {
            w.counter(name, help, &[("op", op.label()), ("cl", cl.name())], read(slot));
        }
    }
}

fn tables(w: &mut Writer, samples: &[storage::TableSample]) {
    let labels = |s: &storage::TableSample| [("keyspace", s.keyspace.clone()), ("table", s.table.clone())];
    type Latency = fn(&metrics::TableMetrics) -> Snapshot;
    let latencies: [(&str, &str, Latency); 3] = [
        ("shoal_table_read_latency_seconds", "Local partition reads of the table (Table.ReadLatency).", |m| {
            m.read_latency.snapshot()
        }),
        ("shoal_table_range_latency_seconds", "Local range scans of the table (Table.RangeLatency).", |m| {
            m.range_latency.snapshot()
        }),
        ("shoal_table_write_latency_seconds", "Local writes to the table's memtable (Table.WriteLatency).", |m| {
            m.write_latency.snapshot()
        }),
    ];
    for (name, help, read) in latencies {
        for s in samples {
            // A table's histogram appears once it saw an operation of its kind (a scrape of
            // 1,000 mostly idle tables stays small).
            let snapshot = read(&s.metrics);
            if snapshot.count == 0 {
                continue;
            }
            let l = labels(s);
            w.latency(name, help, &[(l[0].0, &l[0].1), (l[1].0, &l[1].1)], &snapshot);
        }
    }
    type Gauge = fn(&storage::TableSample) -> u64;
    let gauges: [(&str, &str, Gauge); 7] = [
        ("shoal_table_live_sstables", "SSTable files of the table (Table.LiveSSTableCount).", |s| s.live_sstables),
        (
            "shoal_table_live_disk_space_used_bytes",
            "Bytes of the table's live SSTables (Table.LiveDiskSpaceUsed).",
            |s| s.live_disk_bytes,
        ),
        (
            "shoal_table_total_disk_space_used_bytes",
            "Bytes of the table's SSTables, obsolete ones not yet deleted included (Table.TotalDiskSpaceUsed).",
            |s| s.total_disk_bytes,
        ),
        (
            "shoal_table_memtable_live_data_size_bytes",
            "Bytes in the table's memtables (Table.MemtableLiveDataSize).",
            |s| s.memtable_bytes,
        ),
        ("shoal_table_pending_flushes", "Memtables of the table waiting to be flushed (Table.PendingFlushes).", |s| {
            s.pending_flushes
        }),
        (
            "shoal_table_pending_compactions",
            "Compactions the table is owed (Table.PendingCompactions; 0 or 1 per table).",
            |s| s.pending_compactions,
        ),
        ("shoal_table_estimated_rows", "Rows on disk, estimated (Table.EstimatedPartitionCount's role).", |s| {
            s.estimated_rows
        }),
    ];
    for (name, help, read) in gauges {
        for s in samples {
            let l = labels(s);
            w.gauge(name, help, &[(l[0].0, &l[0].1), (l[1].0, &l[1].1)], read(s) as f64);
        }
    }
    let scanned: [(&str, &str, Latency); 3] = [
        (
            "shoal_table_sstables_per_read",
            "SSTables each local partition read of the table went through (Table.SSTablesPerReadHistogram).",
            |m| m.sstables_per_read.snapshot(),
        ),
        (
            "shoal_table_tombstones_scanned",
            "Tombstones each local read of the table went through (Table.TombstoneScannedHistogram).",
            |m| m.tombstones_scanned.snapshot(),
        ),
        (
            "shoal_table_live_scanned",
            "Live cells each local read of the table went through (Table.LiveScannedHistogram).",
            |m| m.live_scanned.snapshot(),
        ),
    ];
    for (name, help, read) in scanned {
        for s in samples {
            let snapshot = read(&s.metrics);
            if snapshot.count == 0 {
                continue;
            }
            let l = labels(s);
            w.values(name, help, &[(l[0].0, &l[0].1), (l[1].0, &l[1].1)], &snapshot, &SCANNED_BOUNDS);
        }
    }
    for s in samples {
        let snapshot = s.metrics.partition_size.snapshot();
        if snapshot.count == 0 {
            continue;
        }
        let l = labels(s);
        w.values(
            "shoal_table_partition_size_bytes",
            "Bytes of each partition flushes wrote, per file (Table.EstimatedPartitionSizeHistogram).",
            &[(l[0].0, &l[0].1), (l[1].0, &l[1].1)],
            &snapshot,
            &PARTITION_SIZE_BOUNDS,
        );
    }
    for s in samples {
        let l = labels(s);
        let flushed = s.metrics.bytes_flushed.load(Ordering::Relaxed);
        w.counter(
            "shoal_table_bytes_flushed_total",
            "Bytes of SSTables the table's flushes wrote (Table.BytesFlushed).",
            &[(l[0].0, &l[0].1), (l[1].0, &l[1].1)],
            flushed,
        );
    }
    let pending: u64 = samples.iter().map(|s| s.pending_compactions).sum();
    w.gauge(
        "shoal_pending_compactions",
        "Compactions owed over every table (Compaction.PendingTasks).",
        &[],
        pending as f64,
    );
    let bytes: u64 = samples.iter().map(|s| s.pending_compaction_bytes).sum();
    w.gauge(
        "shoal_pending_compaction_bytes",
        "Bytes compactions owe over every table (RocksDB's estimate).",
        &[],
        bytes as f64,
    );
}

fn node(w: &mut Writer, state: &AdminState, samples: &[storage::TableSample]) {
    for (pool, stage) in STAGES {
        let l: &[(&str, &str)] = &[("pool", pool)];
        w.gauge(
            "shoal_thread_pool_active_tasks",
            "Requests running in the stage (ThreadPools.ActiveTasks).",
            l,
            stage.active.load(Ordering::Relaxed) as f64,
        );
    }
    for (pool, stage) in STAGES {
        let l: &[(&str, &str)] = &[("pool", pool)];
        w.gauge(
            "shoal_thread_pool_pending_tasks",
            "Requests waiting for the stage (ThreadPools.PendingTasks).",
            l,
            stage.pending.load(Ordering::Relaxed) as f64,
        );
    }
    for (pool, stage) in STAGES {
        let l: &[(&str, &str)] = &[("pool", pool)];
        w.counter(
            "shoal_thread_pool_completed_tasks_total",
            "Requests the stage finished (ThreadPools.CompletedTasks).",
            l,
            stage.completed.load(Ordering::Relaxed),
        );
    }
    let runtime = tokio::runtime::Handle::current().metrics();
    w.gauge("shoal_runtime_workers", "Worker threads of the node's runtime.", &[], runtime.num_workers() as f64);
    w.gauge("shoal_runtime_alive_tasks", "Tasks alive in the node's runtime.", &[], runtime.num_alive_tasks() as f64);
    w.gauge(
        "shoal_runtime_global_queue_depth",
        "Tasks queued in the runtime's global queue.",
        &[],
        runtime.global_queue_depth() as f64,
    );

    let hints = (state.hint_stats)();
    w.counter(
        "shoal_hints_stored_total",
        "Hints written for unreachable replicas (Storage.TotalHints).",
        &[],
        hints.stored_hints,
    );
    w.counter(
        "shoal_hints_replayed_total",
        "Hints delivered to their replica (HintsService.HintsSucceeded).",
        &[],
        hints.replayed_hints,
    );
    w.counter(
        "shoal_hints_expired_total",
        "Hints dropped past max_hint_window (HintsService.HintsTimedOut's role).",
        &[],
        hints.expired_hints,
    );
    let per_target = (state.pending_hints)();
    let pending: u64 = per_target.iter().map(|(_, b)| b).sum();
    w.gauge(
        "shoal_hints_pending_bytes",
        "Bytes of hints not yet delivered (HintedHandoff pending).",
        &[],
        pending as f64,
    );
    w.gauge(
        "shoal_hints_pending",
        "Replicas this node holds hints for.",
        &[],
        per_target.iter().filter(|(_, b)| *b > 0).count() as f64,
    );

    for (verb, n) in metrics::dropped_messages() {
        w.counter(
            "shoal_dropped_messages_total",
            "Internode requests refused unserved, the inbound queue full (DroppedMessage.Dropped).",
            &[("verb", &verb)],
            n,
        );
    }
    w.counter(
        "shoal_read_repairs_total",
        "Reads that repaired a replica before answering (ReadRepair.RepairedBlocking).",
        &[],
        metrics::READ_REPAIRS.load(Ordering::Relaxed),
    );
    let (sent, received) = state.lifecycle.registry.bytes_streamed();
    w.counter(
        "shoal_streaming_bytes_total",
        "Bytes streamed to or from peers (Streaming.TotalOutgoingBytes / TotalIncomingBytes).",
        &[("direction", "out")],
        sent,
    );
    w.counter("shoal_streaming_bytes_total", "", &[("direction", "in")], received);
    w.gauge(
        "shoal_connected_native_clients",
        "Native protocol connections open (Client.connectedNativeClients).",
        &[],
        metrics::CONNECTED_CLIENTS.load(Ordering::Relaxed) as f64,
    );

    let node = state.storage.node_samples();
    w.gauge(
        "shoal_commitlog_total_size_bytes",
        "Bytes of commit log segments on disk (CommitLog.TotalCommitLogSize).",
        &[],
        node.commitlog_bytes as f64,
    );
    w.latency(
        "shoal_commitlog_fsync_latency_seconds",
        "Commit log fsyncs (CommitLog.WaitingOnCommit's role).",
        &[],
        &node.commitlog_fsync,
    );
    w.gauge(
        "shoal_block_cache_usage_bytes",
        "Bytes held by the block cache (the chunk cache's role).",
        &[],
        node.block_cache_bytes as f64,
    );
    w.gauge("shoal_block_cache_capacity_bytes", "The block cache's capacity.", &[], node.block_cache_capacity as f64);
    let rows = node.row_cache;
    w.gauge(
        "shoal_row_cache_size_bytes",
        "Bytes held by the row cache (Cache.Size, row cache).",
        &[],
        rows.size_bytes as f64,
    );
    w.gauge(
        "shoal_row_cache_capacity_bytes",
        "The row cache's capacity (Cache.Capacity).",
        &[],
        rows.capacity_bytes as f64,
    );
    w.gauge("shoal_row_cache_entries", "Partitions in the row cache (Cache.Entries).", &[], rows.entries as f64);
    w.counter("shoal_row_cache_hits_total", "Row cache lookups that hit (Cache.Hits).", &[], rows.hits);
    w.counter("shoal_row_cache_requests_total", "Row cache lookups (Cache.Requests).", &[], rows.requests);
    w.counter(
        "shoal_compaction_bytes_compacted_total",
        "Bytes compactions wrote, over every table (Compaction.BytesCompacted).",
        &[],
        node.compaction_bytes_written,
    );
    w.counter(
        "shoal_compaction_bytes_read_total",
        "Bytes compactions read, over every table.",
        &[],
        node.compaction_bytes_read,
    );
    let memtables: u64 = samples.iter().map(|s| s.memtable_bytes).sum();
    w.gauge("shoal_memtable_bytes", "Bytes in every table's memtables.", &[], memtables as f64);
    w.gauge("shoal_memory_rss_bytes", "Resident memory of the node's process.", &[], rss_bytes() as f64);
}

/// The process's resident set size (`VmRSS` of `/proc/self/status`).
pub fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn percentiles(s: &Snapshot) -> Json {
    json!({
        "50": s.quantile(0.5), "75": s.quantile(0.75), "95": s.quantile(0.95), "98": s.quantile(0.98),
        "99": s.quantile(0.99), "min": s.min(), "max": s.max(),
    })
}

/// `nodetool proxyhistograms`: the coordinator's latencies per operation
/// (every consistency level), with counts and errors.
pub fn proxyhistograms() -> Json {
    let mut out = serde_json::Map::new();
    for op in Op::ALL {
        let (latency, [timeouts, unavailables, failures]) = CLIENT.totals(op);
        out.insert(
            op.label().to_string(),
            json!({
                "scope": op.scope(),
                "count": latency.count,
                "timeouts": timeouts,
                "unavailables": unavailables,
                "failures": failures,
                "percentiles_us": percentiles(&latency),
            }),
        );
    }
    Json::Object(out)
}

/// `nodetool tablehistograms KS TABLE`: the table's local latencies, the
/// SSTables each partition read went through and the partition sizes.
pub fn tablehistograms(state: &AdminState, keyspace: &str, table: &str) -> Option<Json> {
    let s = state.storage.table_samples().into_iter().find(|s| s.keyspace == keyspace && s.table == table)?;
    Some(json!({
        "keyspace": keyspace,
        "table": table,
        "read_latency_us": percentiles(&s.metrics.read_latency.snapshot()),
        "write_latency_us": percentiles(&s.metrics.write_latency.snapshot()),
        "range_latency_us": percentiles(&s.metrics.range_latency.snapshot()),
        "partition_size_bytes": percentiles(&s.metrics.partition_size.snapshot()),
        "sstables_per_read": percentiles(&s.metrics.sstables_per_read.snapshot()),
        "sstables": s.live_sstables,
    }))
}

/// `nodetool tablestats [KS[.TABLE]]`: per keyspace, its tables' counts and sizes.
pub fn tablestats(state: &AdminState, keyspace: Option<&str>, table: Option<&str>) -> Json {
    let mut keyspaces: std::collections::BTreeMap<String, Vec<Json>> = std::collections::BTreeMap::new();
    for s in state.storage.table_samples() {
        if keyspace.is_some_and(|k| k != s.keyspace) || table.is_some_and(|t| t != s.table) {
            continue;
        }
        let (reads, writes) = (s.metrics.read_latency.snapshot(), s.metrics.write_latency.snapshot());
        let partitions = s.metrics.partition_size.snapshot();
        keyspaces.entry(s.keyspace.clone()).or_default().push(json!({
            "table": s.table,
            "sstable_count": s.live_sstables,
            "space_used_live": s.live_disk_bytes,
            "space_used_total": s.total_disk_bytes,
            "memtable_data_size": s.memtable_bytes,
            "pending_flushes": s.pending_flushes,
            "estimated_rows": s.estimated_rows,
            "local_read_count": reads.count,
            "local_read_latency_ms": reads.mean() / 1000.0,
            "local_write_count": writes.count,
            "local_write_latency_ms": writes.mean() / 1000.0,
            "partition_minimum_bytes": partitions.min(),
            "partition_maximum_bytes": partitions.max(),
            "partition_mean_bytes": partitions.mean().round() as u64,
        }));
    }
    let list: Vec<Json> = keyspaces
        .into_iter()
        .map(|(name, tables)| {
            let reads: u64 = tables.iter().map(|t| t["local_read_count"].as_u64().unwrap_or(0)).sum();
            let writes: u64 = tables.iter().map(|t| t["local_write_count"].as_u64().unwrap_or(0)).sum();
            json!({ "keyspace": name, "read_count": reads, "write_count": writes, "tables": tables })
        })
        .collect();
    json!({ "keyspaces": list })
}

/// `nodetool tpstats`: the request stages' counts, and dropped messages.
pub fn tpstats() -> Json {
    let pools: Vec<Json> = STAGES
        .iter()
        .map(|(name, s)| {
            json!({
                "name": name,
                "active": s.active.load(Ordering::Relaxed),
                "pending": s.pending.load(Ordering::Relaxed),
                "completed": s.completed.load(Ordering::Relaxed),
                "blocked": 0,
                "all_time_blocked": 0,
            })
        })
        .collect();
    let dropped: Vec<Json> = metrics::dropped_messages()
        .into_iter()
        .map(|(verb, n)| json!({ "message_type": verb, "dropped": n }))
        .collect();
    json!({ "thread_pools": pools, "dropped_messages": dropped })
}
