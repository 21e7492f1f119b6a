//! The engine: opening RocksDB (and replaying the commit log into the
//! memtables), column families per table and their tuning, the schema
//! (`set_schema`, recorded in the manifest: `manifest.rs`), the commit log
//! sync thread of each mode, and maintenance (flush, compact, truncate,
//! shutdown). The write path itself is `write.rs`.
//!
//! At open the log is replayed into memtables, which are flushed before the
//! first write; full memtables are flushed into RocksDB by `flush`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rocksdb::{
    BlockBasedOptions, BoundColumnFamily, Cache, ColumnFamilyDescriptor, DBWithThreadMode, MultiThreaded, Options,
};
use types::schema::{KeyspaceDef, TableDef};
use uuid::Uuid;

use crate::commitlog::CommitLog;
use crate::disk_usage::{DiskUsage, DiskUsageConfig, DiskUsageState};
use crate::flush::{self, Flusher, Tables};
use crate::keys::Layout;
use crate::manifest::{read_manifest, write_manifest, Manifest};
use crate::memtable::{self, Memtables};
use crate::write::{poison, GroupCommit};
use crate::{filter, purge, tuning, StorageError};

/// Commit log segment size (Cassandra's `commitlog_segment_size` default).
const SEGMENT_BYTES: u64 = 32 << 20;

pub(crate) type Db = DBWithThreadMode<MultiThreaded>;

/// Cassandra's `commitlog_sync` modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommitlogSync {
    /// Acknowledge at once; fsync every `period`.
    Periodic { period: Duration },
    /// fsync before acknowledging; concurrent writers share one fsync.
    Batch,
    /// Acknowledge after the next group fsync, taken every `window`.
    Group { window: Duration },
}

#[derive(Clone, Debug)]
pub struct StorageConfig {
    pub data_dir: PathBuf,
    pub commitlog_sync: CommitlogSync,
    /// Block cache size for reads.
    pub cache_bytes: usize,
    /// Row cache size (`row_cache`): whole partitions of tables without
    /// clustering columns, in front of the memtables and RocksDB; 0 for none.
    pub row_cache_bytes: usize,
    /// Memtable size per table before a flush.
    pub memtable_bytes: usize,
    /// All tables' active (not yet flushing) memtables together: above it
    /// the largest is flushed.
    pub memtable_space: usize,
    /// The repaired horizon (`Storage::set_tombstone_horizon`) every table
    /// has until one is set for it: `i64::MAX` (no constraint: tombstones go
    /// after `gc_grace_seconds`) for a lone node; a cluster node opens with
    /// 0, so nothing is purged before it has computed each table's horizon
    /// from the repairs it knows of.
    pub tombstone_horizon: i64,
}

/// One table's background work owed (`Storage::compaction_stats`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableCompactionStats {
    pub id: Uuid,
    pub keyspace: String,
    pub table: String,
    /// RocksDB's `rocksdb.compaction-pending`: a compaction is due.
    pub compaction_pending: bool,
    /// RocksDB's `rocksdb.estimate-pending-compaction-bytes`.
    pub pending_compaction_bytes: u64,
    /// RocksDB's `rocksdb.mem-table-flush-pending` (its own memtables: only
    /// what RocksDB writes itself, as during ingestion).
    pub mem_table_flush_pending: bool,
    /// Shoal's memtables frozen and not yet written (flushes owed).
    pub frozen_memtables: u64,
    pub frozen_bytes: u64,
    /// Deletion markers counted since the table's last purge (`purge`).
    pub tombstone_markers: u64,
    /// Of those, the ones gc_grace and the repaired horizon let go now.
    pub droppable_tombstones: u64,
    /// Tombstone compactions run on the table (kept across restarts).
    pub tombstone_compactions: u64,
    /// When the table's last tombstone or major compaction ended (unix
    /// seconds; before the first, when its markers began to be counted):
    /// `tombstone_compaction_interval` runs from here.
    pub last_tombstone_compaction: i64,
}

/// The node's background work owed and running (`Storage::compaction_stats`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionStats {
    /// RocksDB's `rocksdb.num-running-compactions` (the whole database).
    pub running_compactions: u64,
    /// RocksDB's `rocksdb.num-running-flushes` (the whole database).
    pub running_flushes: u64,
    /// A major compaction (`Storage::compact`) or a tombstone compaction runs now.
    pub major_compaction: bool,
    /// A tombstone compaction (`purge`) runs now.
    pub tombstone_compaction: bool,
    pub tables: Vec<TableCompactionStats>,
}

impl CompactionStats {
    /// nodetool's "pending tasks": per table, a compaction due, a RocksDB
    /// flush due, and each frozen memtable not yet written.
    pub fn pending_tasks(&self) -> u64 {
        self.tables
            .iter()
            .map(|t| u64::from(t.compaction_pending) + u64::from(t.mem_table_flush_pending) + t.frozen_memtables)
            .sum()
    }

    /// Nothing owed and nothing running: the node has settled.
    pub fn idle(&self) -> bool {
        self.pending_tasks() == 0
            && self.running_compactions == 0
            && self.running_flushes == 0
            && !self.major_compaction
    }
}

/// One table's metrics and gauges at scrape time (`Storage::table_samples`).
pub struct TableSample {
    pub keyspace: String,
    pub table: String,
    pub metrics: Arc<metrics::TableMetrics>,
    /// SSTable files on every level (`rocksdb.num-files-at-levelN`).
    pub live_sstables: u64,
    /// Bytes of the live SSTable files (`rocksdb.live-sst-files-size`).
    pub live_disk_bytes: u64,
    /// Bytes of every SSTable file, obsolete ones not yet deleted included (`rocksdb.total-sst-files-size`).
    pub total_disk_bytes: u64,
    /// Bytes in the table's memtables (active and frozen).
    pub memtable_bytes: u64,
    /// Frozen memtables waiting to be flushed.
    pub pending_flushes: u64,
    /// Whether RocksDB owes the table a compaction (`rocksdb.compaction-pending`).
    pub pending_compactions: u64,
    /// `rocksdb.estimate-pending-compaction-bytes`.
    pub pending_compaction_bytes: u64,
    /// `rocksdb.estimate-num-keys`: rows (and markers) on disk, estimated.
    pub estimated_rows: u64,
}

/// Node-wide storage gauges (`Storage::node_samples`).
pub struct NodeSample {
    pub commitlog_bytes: u64,
    /// Commit log fsync durations (µs).
    pub commitlog_fsync: metrics::Snapshot,
    pub block_cache_bytes: u64,
    pub block_cache_capacity: u64,
    /// The row cache's size, entries, hits and lookups (`row_cache`).
    pub row_cache: crate::row_cache::RowCacheStats,
    /// Bytes RocksDB's compactions read and wrote since the engine opened
    /// (Compaction.BytesCompacted is the written side).
    pub compaction_bytes_read: u64,
    pub compaction_bytes_written: u64,
}

pub(crate) struct TableStore {
    pub def: TableDef,
    pub layout: Layout,
    pub cf_name: String,
    pub durable: bool,
    pub gc_grace: Arc<AtomicI32>,
    /// The repaired horizon (unix seconds): tombstones deleted at or after it
    /// are kept whatever their age (`filter`). Shared, as `gc_grace`, by the
    /// successive `TableStore`s of one table.
    pub horizon: Arc<AtomicI64>,
    /// The RocksDB shape of the table's `compaction` and `compression` options.
    pub shape: tuning::Shape,
    /// Whether the column family now writes compressed files (`tuning`).
    pub compressing: Arc<AtomicBool>,
    /// Whether the column family is merged whole (`tuning::full_merge`; set
    /// by `Flusher::tune_merges`).
    pub full_merge: Arc<AtomicBool>,
    /// Writes not yet flushed into the column family; shared by the
    /// successive `TableStore`s of one table across schema changes, new on
    /// TRUNCATE.
    pub mem: Arc<RwLock<Memtables>>,
    /// Latencies and scan counts (`metrics::table`); shared, as `gc_grace`,
    /// by the successive `TableStore`s of one table, TRUNCATE's included.
    pub metrics: Arc<metrics::TableMetrics>,
    /// Deletion markers written and tombstone compactions (`purge`); shared
    /// as `mem` is.
    pub markers: Arc<purge::Markers>,
    /// The table's partitions in the row cache are keyed by this (`row_cache`):
    /// kept, as `mem` is, across schema changes; new on TRUNCATE, so a read
    /// that began before a TRUNCATE can never fill the new table's entries.
    pub cache_id: u64,
    /// Reads of this table go through the row cache: it has no clustering
    /// columns and its `caching` option does not say `'enabled': 'false'`
    /// (ScyllaDB's sub-option; Cassandra's `rows_per_partition` is not
    /// consulted, as ScyllaDB does not). Writes invalidate whatever it says.
    pub row_cached: bool,
}

impl TableStore {
    fn new(
        def: &TableDef,
        cf_name: String,
        durable: bool,
        gc_grace: Arc<AtomicI32>,
        horizon: Arc<AtomicI64>,
        mem: Option<Arc<RwLock<Memtables>>>,
        markers: Option<Arc<purge::Markers>>,
    ) -> TableStore {
        let shape = tuning::shape(&def.options);
        let compressing = Arc::new(AtomicBool::new(shape.compress));
        let mem = mem.unwrap_or_default();
        let full_merge = Arc::new(AtomicBool::new(false));
        let markers = markers.unwrap_or_else(|| Arc::new(purge::Markers::new(unix_now())));
        static CACHE_IDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        TableStore {
            cache_id: CACHE_IDS.fetch_add(1, Ordering::Relaxed),
            row_cached: def.clustering().next().is_none()
                && !def.options.caching.get("enabled").is_some_and(|v| v.eq_ignore_ascii_case("false")),
            def: def.clone(),
            layout: Layout::of(def),
            cf_name,
            durable,
            gc_grace,
            horizon,
            shape,
            compressing,
            full_merge,
            mem,
            markers,
            metrics: Arc::default(),
        }
    }

    /// The store with `from`'s metrics (a new store of the same table).
    fn keeping_metrics(self, from: Option<&TableStore>) -> TableStore {
        match from {
            Some(old) => TableStore { metrics: Arc::clone(&old.metrics), ..self },
            None => self,
        }
    }
}

pub struct Storage {
    pub(crate) db: Arc<Db>,
    pub(crate) tables: Tables,
    pub(crate) log: Arc<CommitLog>,
    pub(crate) flusher: Arc<Flusher>,
    pub(crate) flush_thread: Mutex<Option<JoinHandle<()>>>,
    pub(crate) manifest: Mutex<Manifest>,
    pub(crate) config: StorageConfig,
    pub(crate) cache: Cache,
    /// Partitions of tables without clustering columns (`row_cache`).
    pub(crate) row_cache: crate::row_cache::RowCache,
    /// Shared with compaction filter factories: the live gc_grace and
    /// repaired horizon per column family.
    pub(crate) gc_registry: filter::GcRegistry,
    /// On only during the purging pass of a major compaction (see filter.rs).
    pub(crate) purge_markers: Arc<AtomicBool>,
    /// Serializes major and tombstone compactions (the purge flag is global).
    pub(crate) compacting: Mutex<()>,
    /// A tombstone compaction runs now (`purge`).
    pub(crate) tombstone_compacting: AtomicBool,
    /// No tombstone compaction starts before this (`purge`'s pacing).
    pub(crate) purge_pace: Mutex<Instant>,
    /// When the tombstone markers were last saved (`purge::save`).
    pub(crate) markers_saved_at: Mutex<Instant>,
    pub(crate) poisoned: Arc<Mutex<Option<String>>>,
    pub(crate) group: Arc<GroupCommit>,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) syncer: Mutex<Option<JoinHandle<()>>>,
    /// The `commitlog-alloc` thread: makes the log's next segment ahead of need.
    pub(crate) allocator: Mutex<Option<JoinHandle<()>>>,
    /// How fast compactions may write (`throttle`).
    pub(crate) throttle: crate::throttle::CompactionThrottle,
    /// Which ranges of each table hold writes no repair compared (`unrepaired`).
    pub(crate) unrepaired: crate::unrepaired::Unrepaired,
    /// The disk usage guardrail's state (`disk_usage`), and its monitor thread.
    pub(crate) disk_usage: Arc<DiskUsage>,
    pub(crate) disk_monitor: Mutex<Option<JoinHandle<()>>>,
    /// Secondary index builds (`index`): the queue and the indexes not queryable yet.
    pub(crate) index_jobs: Arc<crate::index::IndexJobs>,
    /// The options the database was opened with: they hold its statistics (tickers).
    pub(crate) statistics: Options,
    /// Every table's file spans, for the SSTables a read goes through (`spans`).
    pub(crate) spans: crate::spans::FileSpans,
}

impl Storage {
    /// Opens (or creates) the data directory and returns the engine and the
    /// schema it holds.
    pub fn open(config: StorageConfig) -> Result<(Storage, Vec<KeyspaceDef>), StorageError> {
        std::fs::create_dir_all(&config.data_dir)?;
        let db_path = config.data_dir.join("db");
        let manifest = read_manifest(&config.data_dir)?;
        let unrepaired = crate::unrepaired::Unrepaired::load(&config.data_dir)?;
        let saved_markers = purge::load(&config.data_dir)?;
        // HyperClockCache: lookups without a shard mutex or LRU list upkeep
        // (ARCHITECTURE.md, the life of a read: the read-path A/B).
        let cache = Cache::new_hyper_clock_cache(config.cache_bytes, 0);
        let gc_registry = filter::GcRegistry::default();
        let purge_markers = Arc::new(AtomicBool::new(false));

        let mut tables = HashMap::new();
        let mut descriptors = vec![
            ColumnFamilyDescriptor::new("default", Options::default()),
            ColumnFamilyDescriptor::new(crate::paxos::PAXOS_CF, paxos_options()),
        ];
        for (ks, table) in crate::index::expand(&manifest.keyspaces) {
            let table = &table;
            {
                let Some(cf_name) = manifest.column_families.get(&table.id) else {
                    return Err(StorageError::Invalid(format!(
                        "manifest has table {}.{} without a column family",
                        ks.name, table.name
                    )));
                };
                let gc_grace = Arc::new(AtomicI32::new(table.options.gc_grace_seconds));
                let horizon = Arc::new(AtomicI64::new(config.tombstone_horizon));
                let markers = saved_markers.tables.get(&table.id).map(|m| Arc::new(purge::Markers::restored(m)));
                let store = Arc::new(TableStore::new(
                    table,
                    cf_name.clone(),
                    ks.durable_writes,
                    gc_grace,
                    horizon,
                    None,
                    markers,
                ));
                gc_registry.register(&store);
                descriptors.push(ColumnFamilyDescriptor::new(
                    cf_name.clone(),
                    table_options(&config, &cache, &store, &gc_registry, &purge_markers),
                ));
                tables.insert(table.id, store);
            }
        }
        // Column families left behind by a crash between creating/dropping a
        // column family and writing the manifest: open them, then drop them.
        let existing =
            if db_path.join("CURRENT").exists() { Db::list_cf(&Options::default(), &db_path)? } else { Vec::new() };
        let named: Vec<String> = descriptors.iter().map(|d| d.name().to_string()).collect();
        let orphans: Vec<String> = existing.into_iter().filter(|n| !named.contains(n)).collect();
        for orphan in &orphans {
            descriptors.push(ColumnFamilyDescriptor::new(orphan.clone(), Options::default()));
        }

        let mut db_opts = Options::default();
        db_opts.create_if_missing(true);
        db_opts.create_missing_column_families(true);
        // One flush and three compactions: a long merge of big runs must not
        // hold back the merges of the small new ones behind it (their number
        // is what stalls writes). `Flusher::tune_merges` shrinks the
        // compaction pool to one thread while every table is merged whole
        // (`tuning`).
        db_opts.set_max_background_jobs(tuning::MAX_COMPACTION_THREADS + 1);
        db_opts.set_bytes_per_sync(1 << 20);
        db_opts.set_keep_log_file_num(4);
        // Compactions write with O_DIRECT where the file system takes it: in
        // a long run of overwrites compaction was ~45% of the server's CPU,
        // and a fifth of that was the kernel copying its output into the
        // page cache. All reads, compaction's included, stay buffered
        // (RocksDB's own 2 MiB compaction readahead is left as it is).
        if direct_io_works(&config.data_dir) {
            db_opts.set_use_direct_io_for_flush_and_compaction(true);
        }
        // RocksDB's tickers (per-core counters, no histograms or timers):
        // the bytes compactions read and wrote, for the metrics.
        db_opts.enable_statistics();
        db_opts.set_statistics_level(rocksdb::statistics::StatsLevel::ExceptHistogramOrTimers);
        let throttle = crate::throttle::CompactionThrottle::attach(&mut db_opts);
        let db = Db::open_cf_descriptors(&db_opts, &db_path, descriptors)?;
        for orphan in &orphans {
            tracing::warn!(column_family = %orphan, "dropping column family not named in the manifest");
            db.drop_cf(orphan)?;
        }
        // Data directories written before Shoal's own commit log hold writes
        // in RocksDB's log: RocksDB replayed them into its memtables; flush
        // them so that log goes (a no-op for empty memtables).
        for store in tables.values() {
            if let Some(cf) = db.cf_handle(&store.cf_name) {
                db.flush_cf(&cf)?;
            }
        }

        // The commit log: every intact record goes back into the memtables
        // of the tables it names (not those dropped since, nor records
        // older than a table's last TRUNCATE).
        let db = Arc::new(db);
        let tables: Tables = Arc::new(RwLock::new(tables));
        let mut replayed = 0usize;
        let log = CommitLog::open(&config.data_dir.join("commitlog"), SEGMENT_BYTES, |seq, payload| {
            let tables = read_lock(&tables);
            for (table, key, value) in flush::decode_record(payload)? {
                let Some(store) = tables.get(&table) else { continue };
                if manifest.truncated.get(&table).is_some_and(|&first| seq < first) {
                    continue;
                }
                read_lock(&store.mem).active.insert(std::iter::once((key, value)), Some(seq));
                replayed += 1;
            }
            Ok(())
        })?;
        let log = Arc::new(log);
        let ingest_dir = config.data_dir.join("ingest");
        let _ = std::fs::remove_dir_all(&ingest_dir);
        let flusher = Arc::new(Flusher::new(
            Arc::clone(&db),
            Arc::clone(&tables),
            Arc::clone(&log),
            ingest_dir,
            config.memtable_bytes,
            config.memtable_space,
        ));
        flusher.tune_merges();
        if replayed > 0 {
            tracing::info!(operands = replayed, "replayed the commit log; flushing it");
        }
        // Flush what was replayed, so the old segments go and the
        // truncation points are no longer needed.
        let replayed_into: Vec<Arc<TableStore>> =
            read_lock(&tables).values().filter(|s| !read_lock(&s.mem).active.is_empty()).cloned().collect();
        for store in &replayed_into {
            flusher.flush_now(store)?;
        }
        log.discard_below(u64::MAX);
        let mut manifest = manifest;
        if !manifest.truncated.is_empty() {
            manifest.truncated.clear();
            write_manifest(&config.data_dir, &manifest)?;
        }

        let keyspaces = manifest.keyspaces.clone();
        let storage = Storage {
            db,
            tables,
            log,
            flusher: Arc::clone(&flusher),
            flush_thread: Mutex::new(None),
            manifest: Mutex::new(manifest),
            row_cache: crate::row_cache::RowCache::new(config.row_cache_bytes),
            config,
            cache,
            gc_registry,
            purge_markers,
            compacting: Mutex::new(()),
            tombstone_compacting: AtomicBool::new(false),
            purge_pace: Mutex::new(Instant::now()),
            markers_saved_at: Mutex::new(Instant::now()),
            poisoned: Arc::new(Mutex::new(None)),
            group: Arc::new(GroupCommit::default()),
            stop: Arc::new(AtomicBool::new(false)),
            syncer: Mutex::new(None),
            allocator: Mutex::new(None),
            throttle,
            unrepaired,
            disk_usage: Arc::new(DiskUsage::new()),
            disk_monitor: Mutex::new(None),
            index_jobs: Arc::default(),
            statistics: db_opts,
            spans: Default::default(),
        };
        storage.queue_index_builds(&keyspaces);
        storage.start_syncer();
        storage.start_allocator();
        let thread = std::thread::Builder::new().name("memtable-flush".into()).spawn(move || flusher.run());
        match thread {
            Ok(h) => *lock(&storage.flush_thread) = Some(h),
            Err(e) => return Err(StorageError::Engine(format!("cannot start the memtable flush thread: {e}"))),
        }
        Ok((storage, keyspaces))
    }

    pub fn commitlog_sync(&self) -> CommitlogSync {
        self.config.commitlog_sync
    }

    /// Whether `apply` may block on an fsync (callers on an async runtime
    /// should then call it from a blocking thread).
    pub fn writes_block(&self) -> bool {
        !matches!(self.config.commitlog_sync, CommitlogSync::Periodic { .. })
    }

    fn start_syncer(&self) {
        let log = Arc::clone(&self.log);
        let db = Arc::clone(&self.db);
        let stop = Arc::clone(&self.stop);
        let poisoned = Arc::clone(&self.poisoned);
        let group = Arc::clone(&self.group);
        let handle = match self.config.commitlog_sync {
            CommitlogSync::Batch => return,
            CommitlogSync::Periodic { period } => {
                std::thread::Builder::new().name("commitlog-sync".into()).spawn(move || {
                    let tick = Duration::from_millis(50).min(period);
                    let mut waited = Duration::ZERO;
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(tick);
                        waited += tick;
                        if waited >= period {
                            waited = Duration::ZERO;
                            if let Err(e) = log.sync() {
                                poison(&poisoned, &e.to_string());
                            }
                            // Paxos records (`paxos`) go through RocksDB's own log.
                            if let Err(e) = db.flush_wal(true) {
                                poison(&poisoned, e.as_ref());
                            }
                        }
                    }
                })
            }
            CommitlogSync::Group { window } => std::thread::Builder::new()
                .name("commitlog-group".into())
                .spawn(move || group.run(&log, window, &stop, &poisoned)),
        };
        match handle {
            Ok(h) => *lock(&self.syncer) = Some(h),
            Err(e) => poison(&self.poisoned, &format!("cannot start commit log sync thread: {e}")),
        }
    }

    /// Starts the thread that makes the commit log's next segment while the
    /// current one fills (`CommitLog::prepare_next`), as Cassandra's
    /// segment allocator does. Without it (it could not start, or it is
    /// behind) a rotation makes its segment itself.
    fn start_allocator(&self) {
        let (log, stop) = (Arc::clone(&self.log), Arc::clone(&self.stop));
        let thread = std::thread::Builder::new().name("commitlog-alloc".into()).spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if let Err(e) = log.prepare_next() {
                    // A rotation makes its segment itself then, and reports what fails.
                    tracing::debug!("cannot make the next commit log segment ahead: {e}");
                }
                log.wait_for_rotation(Duration::from_millis(100));
            }
        });
        match thread {
            Ok(h) => *lock(&self.allocator) = Some(h),
            Err(e) => tracing::warn!("cannot start the commit log segment allocator: {e}"),
        }
    }

    /// Sets how fast compactions may write, in bytes per second (0:
    /// unthrottled, the default); it applies to compactions running now.
    pub fn set_compaction_throughput(&self, bytes_per_second: u64) {
        self.throttle.set(bytes_per_second);
        tracing::info!(bytes_per_second, "compaction throughput set (0: unthrottled)");
    }

    /// How fast compactions may write, in bytes per second (0: unthrottled).
    pub fn compaction_throughput(&self) -> u64 {
        self.throttle.get()
    }

    /// Bytes written through the compaction throttle since the open
    /// (compactions, and RocksDB's own flushes of its Paxos table).
    pub fn throttled_bytes(&self) -> u64 {
        self.throttle.bytes_through()
    }

    /// Turns the disk usage guardrail on (or changes its settings, or, with
    /// both thresholds off, turns it off): samples the data directory now,
    /// then about once a second on a thread of its own (`disk_usage`).
    /// Fails, as Cassandra does, when `max_disk_bytes` is over the size of
    /// the data directory's file system.
    pub fn monitor_disk_usage(&self, config: DiskUsageConfig) -> Result<(), StorageError> {
        let dir = self.config.data_dir.clone();
        if let Some(max) = config.max_disk_bytes {
            let (_, total) = crate::disk_usage::free_and_total_bytes(&dir)?;
            if max == 0 || max > total {
                return Err(StorageError::Invalid(format!(
                    "Invalid value for data_disk_usage_max_disk_size: {max} bytes specified, but only {total} bytes \
                     are actually available on disk"
                )));
            }
        }
        self.disk_usage.set_config(config);
        if !config.enabled() {
            return Ok(());
        }
        let memtable_bytes = {
            let tables = Arc::clone(&self.tables);
            move || read_lock(&tables).values().map(|s| read_lock(&s.mem).bytes() as u64).sum::<u64>()
        };
        let percent = self.disk_usage.sample(&dir, memtable_bytes())?;
        let state = self.disk_usage.update(percent);
        tracing::info!(percent, %state, ?config, "disk usage guardrail on");
        let mut monitor = lock(&self.disk_monitor);
        if monitor.is_none() {
            let (usage, stop) = (Arc::clone(&self.disk_usage), Arc::clone(&self.stop));
            let thread = std::thread::Builder::new()
                .name("disk-usage".into())
                .spawn(move || usage.run(&dir, memtable_bytes, &stop))
                .map_err(|e| StorageError::Engine(format!("cannot start the disk usage monitor: {e}")))?;
            *monitor = Some(thread);
        }
        Ok(())
    }

    /// `incremental_backups`: from now on every flushed file is also
    /// hard-linked under `<data dir>/backups/` (`flush`), or no longer.
    pub fn set_incremental_backups(&self, on: bool) {
        self.flusher.set_backups(on.then(|| self.config.data_dir.join("backups")));
    }

    /// Whether incremental backups are on (`set_incremental_backups`).
    pub fn incremental_backups(&self) -> bool {
        self.flusher.backing_up()
    }

    /// The disk usage guardrail's state now (one atomic load).
    pub fn disk_usage(&self) -> DiskUsageState {
        self.disk_usage.state()
    }

    /// The data directory's disk usage in percent at the guardrail's last
    /// sample (None while it is off or before its first sample).
    pub fn disk_usage_percent(&self) -> Option<u64> {
        self.disk_usage.percent().filter(|_| self.disk_usage.config().enabled())
    }

    /// Whether the disk usage guardrail lets `mutations` be written: while
    /// the disk is over the fail threshold, not if any of them adds data
    /// (deletions pass). One atomic load unless the disk is full.
    pub fn admit(&self, mutations: &[types::mutation::Mutation]) -> Result<(), StorageError> {
        if self.disk_usage.state() == DiskUsageState::Full && mutations.iter().any(crate::disk_usage::adds_data) {
            return Err(StorageError::DiskUsageExceeded);
        }
        Ok(())
    }

    pub(crate) fn check_poisoned(&self) -> Result<(), StorageError> {
        match &*lock(&self.poisoned) {
            Some(reason) => Err(StorageError::Poisoned(reason.clone())),
            None => Ok(()),
        }
    }

    pub(crate) fn table(&self, id: &Uuid) -> Result<Arc<TableStore>, StorageError> {
        read_lock(&self.tables).get(id).cloned().ok_or(StorageError::UnknownTable(*id))
    }

    pub(crate) fn cf(&self, store: &TableStore) -> Result<Arc<BoundColumnFamily<'_>>, StorageError> {
        self.db
            .cf_handle(&store.cf_name)
            .ok_or_else(|| StorageError::Engine(format!("column family {} is missing", store.cf_name)))
    }

    /// The keyspace holding `table`, as the schema last set says.
    pub fn keyspace_of(&self, table: &Uuid) -> Option<KeyspaceDef> {
        lock(&self.manifest).keyspaces.iter().find(|ks| ks.tables.values().any(|t| t.id == *table)).cloned()
    }

    /// Replaces the schema. Creates column families for new tables, drops
    /// those of removed tables and records everything in the manifest.
    pub fn set_schema(&self, keyspaces: &[KeyspaceDef]) -> Result<(), StorageError> {
        let mut manifest = lock(&self.manifest);
        let expanded = crate::index::expand(keyspaces);
        let mut wanted: HashMap<Uuid, (&KeyspaceDef, &TableDef)> = HashMap::new();
        for (ks, t) in &expanded {
            wanted.insert(t.id, (*ks, t));
        }
        // Create first, write the manifest, then drop: a crash at any point
        // leaves at worst an orphan column family, dropped at the next open.
        let mut new_tables = HashMap::new();
        for (id, (ks, table)) in &wanted {
            let existing = read_lock(&self.tables).get(id).cloned();
            // An existing table keeps its column family and the gc_grace and
            // horizon its compaction filter factory reads (via the registry).
            let (cf_name, gc_grace, horizon, mem, markers) = match &existing {
                Some(store) => (
                    store.cf_name.clone(),
                    Arc::clone(&store.gc_grace),
                    Arc::clone(&store.horizon),
                    Some(Arc::clone(&store.mem)),
                    Some(Arc::clone(&store.markers)),
                ),
                None => (
                    format!("t_{}_0", id.simple()),
                    Arc::new(AtomicI32::new(table.options.gc_grace_seconds)),
                    Arc::new(AtomicI64::new(self.config.tombstone_horizon)),
                    None,
                    None,
                ),
            };
            gc_grace.store(table.options.gc_grace_seconds, Ordering::Relaxed);
            let mut store = TableStore::new(table, cf_name, ks.durable_writes, gc_grace, horizon, mem, markers)
                .keeping_metrics(existing.as_deref());
            if let Some(old) = &existing {
                store.cache_id = old.cache_id;
            }
            let store = Arc::new(store);
            if let Some(old) = &existing {
                self.retune(old, &store)?;
            }
            if existing.is_none() {
                self.gc_registry.register(&store);
                let opts = table_options(&self.config, &self.cache, &store, &self.gc_registry, &self.purge_markers);
                self.db.create_cf(&store.cf_name, &opts)?;
            }
            new_tables.insert(*id, store);
        }
        let removed: Vec<Arc<TableStore>> = read_lock(&self.tables)
            .iter()
            .filter(|(id, _)| !wanted.contains_key(id))
            .map(|(_, s)| Arc::clone(s))
            .collect();
        manifest.keyspaces = keyspaces.to_vec();
        manifest.column_families = new_tables.iter().map(|(id, s)| (*id, s.cf_name.clone())).collect();
        write_manifest(&self.config.data_dir, &manifest)?;
        *write_lock(&self.tables) = new_tables;
        for store in removed {
            self.row_cache.invalidate_table(store.cache_id);
            self.db.drop_cf(&store.cf_name)?;
            self.gc_registry.remove(&store.cf_name);
        }
        drop(manifest);
        self.queue_index_builds(keyspaces);
        Ok(())
    }

    /// ALTER TABLE of an open table: new thresholds and compression apply at
    /// once; the compression check decides again from the table's options.
    fn retune(&self, old: &TableStore, new: &TableStore) -> Result<(), StorageError> {
        let (was, now) = (old.shape, new.shape);
        let full_merge = old.full_merge.load(Ordering::Relaxed);
        new.full_merge.store(full_merge, Ordering::Relaxed);
        if was == now {
            new.compressing.store(old.compressing.load(Ordering::Relaxed), Ordering::Relaxed);
            return Ok(());
        }
        if was.leveled != now.leveled {
            tracing::warn!(
                table = %format!("{}.{}", new.def.keyspace, new.def.name),
                "the compaction strategy changes when the node next starts; its thresholds and compression change now"
            );
        }
        let shape = tuning::Shape { leveled: was.leveled, ..now };
        self.set_cf_options(new, &tuning::mutable_options(&shape, now.compress, full_merge))
    }

    fn set_cf_options(&self, store: &TableStore, options: &[(&'static str, String)]) -> Result<(), StorageError> {
        let cf = self.cf(store)?;
        let pairs: Vec<(&str, &str)> = options.iter().map(|(k, v)| (*k, v.as_str())).collect();
        self.db.set_options_cf(&cf, &pairs)?;
        Ok(())
    }

    /// The compression check (see `tuning`): for every table that asks for
    /// compression and was written since its last flush, compresses a sample
    /// of its rows and turns compression of new files off or back on.
    /// Returns the tables it switched, as (table, compressing now).
    pub fn tune_compression(&self) -> Vec<(Uuid, bool)> {
        let stores: Vec<Arc<TableStore>> = read_lock(&self.tables).values().cloned().collect();
        let mut switched = Vec::new();
        for store in stores {
            if !store.shape.compress {
                continue;
            }
            let Ok(cf) = self.cf(&store) else { continue };
            if read_lock(&store.mem).active.is_empty() {
                continue;
            }
            let sample = self.sample(&store, &cf);
            if sample.len() < tuning::MIN_SAMPLE_BYTES {
                continue;
            }
            let ratio = tuning::ratio(&sample);
            let was = store.compressing.load(Ordering::Relaxed);
            let now = tuning::verdict(was, ratio);
            if now == was {
                continue;
            }
            match self.set_cf_options(&store, &tuning::compression_options(now)) {
                Ok(()) => {
                    store.compressing.store(now, Ordering::Relaxed);
                    tracing::info!(
                        table = %format!("{}.{}", store.def.keyspace, store.def.name),
                        ratio = format!("{ratio:.3}"),
                        "new files of the table are written {}",
                        if now { "LZ4-compressed" } else { "uncompressed (LZ4 would not shrink them)" }
                    );
                    switched.push((store.def.id, now));
                }
                Err(e) => tracing::warn!("cannot change the compression of {}: {e}", store.cf_name),
            }
        }
        switched
    }

    /// Whether new files of `table` are written compressed now.
    pub fn compressing(&self, table: &Uuid) -> Option<bool> {
        read_lock(&self.tables).get(table).map(|s| s.compressing.load(Ordering::Relaxed))
    }

    /// Up to `tuning::SAMPLE_BYTES` of keys and values read from a random
    /// token onwards (wrapping to the first key).
    fn sample(&self, store: &TableStore, cf: &Arc<BoundColumnFamily<'_>>) -> Vec<u8> {
        use crate::read::Cursor;
        // A randomly keyed hash: a different spot in token order each time.
        let start =
            std::hash::BuildHasher::hash_one(&std::collections::hash_map::RandomState::new(), 0u8).to_be_bytes();
        let mut out = Vec::with_capacity(tuning::SAMPLE_BYTES);
        let mut it = self.cursor(store, cf, Vec::new(), vec![0xFF; 9]);
        it.seek(&start);
        let mut wrapped = false;
        while out.len() < tuning::SAMPLE_BYTES {
            if !it.valid() {
                if wrapped {
                    break;
                }
                wrapped = true;
                it.seek_to_first();
                continue;
            }
            if wrapped && it.key().is_some_and(|k| k >= &start[..]) {
                break;
            }
            if let (Some(k), Some(v)) = (it.key(), it.value()) {
                out.extend_from_slice(k);
                out.extend_from_slice(v);
            }
            it.next();
        }
        out
    }

    /// Removes every row of a table (TRUNCATE): the table gets a new, empty
    /// column family and the old one is dropped.
    pub fn truncate(&self, table: &Uuid) -> Result<(), StorageError> {
        // A table's indexes are emptied with it.
        let indexes: Vec<Uuid> = self.table(table)?.def.indexes.iter().map(|i| i.id).collect();
        for index in &indexes {
            if self.table(index).is_ok() {
                self.truncate_one(index)?;
            }
        }
        self.truncate_one(table)
    }

    fn truncate_one(&self, table: &Uuid) -> Result<(), StorageError> {
        let mut manifest = lock(&self.manifest);
        let old = self.table(table)?;
        let generation = old.cf_name.rsplit('_').next().and_then(|g| g.parse::<u64>().ok()).unwrap_or(0) + 1;
        let name = format!("t_{}_{}", table.simple(), generation);
        let gc_grace = Arc::new(AtomicI32::new(old.gc_grace.load(Ordering::Relaxed)));
        let horizon = Arc::clone(&old.horizon);
        let store = Arc::new(
            TableStore::new(&old.def, name.clone(), old.durable, gc_grace, horizon, None, None)
                .keeping_metrics(Some(&old)),
        );
        self.gc_registry.register(&store);
        self.db.create_cf(
            &name,
            &table_options(&self.config, &self.cache, &store, &self.gc_registry, &self.purge_markers),
        )?;
        manifest.column_families.insert(*table, name);
        // Records reserved from here on are the new table's; a replay skips
        // the older ones (the old memtables are dropped with the old store).
        manifest.truncated.insert(*table, self.log.next_seq());
        write_manifest(&self.config.data_dir, &manifest)?;
        write_lock(&self.tables).insert(*table, store);
        // The old store's cached partitions are no longer looked up (the new one has its
        // own cache id); this frees them.
        self.row_cache.invalidate_table(old.cache_id);
        self.unrepaired.forget(table);
        self.db.drop_cf(&old.cf_name)?;
        self.gc_registry.remove(&old.cf_name);
        Ok(())
    }

    /// Node-local metadata kept in the manifest (host id, tokens, ...).
    pub fn local_get(&self, key: &str) -> Option<String> {
        lock(&self.manifest).local.get(key).cloned()
    }

    pub fn local_set(&self, key: &str, value: &str) -> Result<(), StorageError> {
        let mut manifest = lock(&self.manifest);
        manifest.local.insert(key.to_string(), value.to_string());
        write_manifest(&self.config.data_dir, &manifest)
    }

    /// Reads and rewrites one node-local value under the manifest's lock, so
    /// that concurrent updates of one key do not lose each other: `update`
    /// gets the value there (if any) and returns the new one.
    pub fn local_update(&self, key: &str, update: impl FnOnce(Option<&str>) -> String) -> Result<(), StorageError> {
        let mut manifest = lock(&self.manifest);
        let value = update(manifest.local.get(key).map(String::as_str));
        if manifest.local.get(key) == Some(&value) {
            return Ok(());
        }
        manifest.local.insert(key.to_string(), value);
        write_manifest(&self.config.data_dir, &manifest)
    }

    /// Sets a table's repaired horizon (unix seconds): from the next
    /// compaction on, a tombstone (or expired cell) is purged only if it was
    /// deleted before `secs` as well as more than `gc_grace_seconds` ago.
    /// `i64::MAX` lifts the constraint. The node sets it from the start
    /// times of the last repairs of the ranges this node replicates
    /// (repair-based tombstone GC, see `filter`). Kept across ALTER TABLE
    /// and TRUNCATE; not persisted (`StorageConfig::tombstone_horizon` is the
    /// value at open).
    pub fn set_tombstone_horizon(&self, table: &Uuid, secs: i64) -> Result<(), StorageError> {
        self.table(table)?.horizon.store(secs, Ordering::Relaxed);
        Ok(())
    }

    /// A table's repaired horizon (`set_tombstone_horizon`).
    pub fn tombstone_horizon(&self, table: &Uuid) -> Result<i64, StorageError> {
        Ok(self.table(table)?.horizon.load(Ordering::Relaxed))
    }

    fn tables_or_all(&self, table: Option<&Uuid>) -> Result<Vec<Arc<TableStore>>, StorageError> {
        Ok(match table {
            Some(id) => vec![self.table(id)?],
            None => read_lock(&self.tables).values().cloned().collect(),
        })
    }

    /// Stops starting compactions (`hold`), or starts them again: a node
    /// that decommissions hands all its data away, so merging it meanwhile
    /// is CPU and disk taken from its clients and its stream for nothing.
    /// Merges already running finish; a table created while held is not.
    pub fn hold_compactions(&self, hold: bool) {
        self.flusher.hold_compactions(hold);
    }

    /// Flushes memtables of one table, or of all tables, to sorted files.
    pub fn flush(&self, table: Option<&Uuid>) -> Result<(), StorageError> {
        let stores = self.tables_or_all(table)?;
        for store in stores {
            self.flusher.flush_now(&store)?;
        }
        self.spans.invalidate();
        Ok(())
    }

    /// A major compaction of one table (or all): purges what gc_grace and the
    /// table's repaired horizon allow.
    /// Two passes (see filter.rs): the first merges every pending write into
    /// a plain value without purging deletion markers, the second purges
    /// markers together with the cells they shadow.
    pub fn compact(&self, table: Option<&Uuid>) -> Result<(), StorageError> {
        let stores = self.tables_or_all(table)?;
        let _one_at_a_time = lock(&self.compacting);
        for store in stores {
            self.purge_table(&store)?;
        }
        Ok(())
    }

    /// `compact`'s two passes on one table; the caller holds `compacting`.
    /// Forgets the deletion markers counted (`purge`) that the purge dropped.
    pub(crate) fn purge_table(&self, store: &TableStore) -> Result<(), StorageError> {
        let cf = self.cf(store)?;
        let gc_before = self.gc_registry.gc_before(&store.cf_name, unix_now());
        self.flusher.flush_now(store)?;
        let mut opts = rocksdb::CompactOptions::default();
        opts.set_bottommost_level_compaction(rocksdb::BottommostLevelCompaction::Force);
        self.purge_markers.store(false, Ordering::SeqCst);
        self.db.compact_range_cf_opt(&cf, None::<&[u8]>, None::<&[u8]>, &opts);
        self.purge_markers.store(true, Ordering::SeqCst);
        self.db.compact_range_cf_opt(&cf, None::<&[u8]>, None::<&[u8]>, &opts);
        self.purge_markers.store(false, Ordering::SeqCst);
        store.markers.purged(gc_before, unix_now());
        if let Err(e) = self.save_markers(true) {
            tracing::warn!("cannot save the tombstone marker counts: {e}");
        }
        Ok(())
    }

    /// Saves every table's tombstone markers (`purge::save`): with `force`,
    /// now; else if any changed and the last save is `purge::SAVE_EVERY`
    /// old.
    pub(crate) fn save_markers(&self, force: bool) -> Result<(), StorageError> {
        let mut saved_at = lock(&self.markers_saved_at);
        if !force && saved_at.elapsed() < purge::SAVE_EVERY {
            return Ok(());
        }
        let stores: Vec<Arc<TableStore>> = read_lock(&self.tables).values().cloned().collect();
        // Every flag is taken (no short circuit).
        let changed = stores.iter().fold(false, |changed, s| s.markers.take_dirty() | changed);
        if !changed && !force {
            return Ok(());
        }
        let tables: Vec<(Uuid, &purge::Markers)> = stores.iter().map(|s| (s.def.id, &*s.markers)).collect();
        if let Err(e) = purge::save(&self.config.data_dir, &tables) {
            stores.iter().for_each(|s| s.markers.mark_dirty());
            return Err(e.into());
        }
        *saved_at = Instant::now();
        Ok(())
    }

    /// A table's deletion markers gc_grace and its repaired horizon let go
    /// now, and its estimated keys on disk (`purge`).
    fn droppable(&self, store: &TableStore) -> (u64, u64) {
        let droppable = store.markers.droppable(self.gc_registry.gc_before(&store.cf_name, unix_now()));
        let keys = self
            .cf(store)
            .ok()
            .and_then(|cf| self.db.property_int_value_cf(&cf, "rocksdb.estimate-num-keys").ok().flatten())
            .unwrap_or(0);
        (droppable, keys)
    }

    /// One check of the tombstone compactions (`purge`): runs the purge of
    /// `compact` on the table most over its `tombstone_threshold` whose
    /// `tombstone_compaction_interval` has passed, if any, and unless a
    /// major or tombstone compaction runs or the pacing holds it back.
    /// Returns the table purged. Blocks while it purges: call it off the
    /// async runtime's workers.
    pub fn tombstone_compaction(&self) -> Result<Option<Uuid>, StorageError> {
        if self.stop.load(Ordering::Relaxed) {
            return Ok(None);
        }
        if let Err(e) = self.save_markers(false) {
            tracing::warn!("cannot save the tombstone marker counts: {e}");
        }
        if Instant::now() < *lock(&self.purge_pace) {
            return Ok(None);
        }
        let now = unix_now();
        let mut due: Option<(f64, Arc<TableStore>)> = None;
        for store in read_lock(&self.tables).values() {
            let options = purge::PurgeOptions::of(&store.def.options);
            if !options.enabled || now - store.markers.last_purge.load(Ordering::Relaxed) < options.interval_secs {
                continue;
            }
            let (droppable, keys) = self.droppable(store);
            let ratio = droppable as f64 / keys.max(1) as f64;
            if droppable > 0 && ratio > options.threshold && due.as_ref().is_none_or(|(r, _)| ratio > *r) {
                due = Some((ratio, Arc::clone(store)));
            }
        }
        let Some((ratio, store)) = due else { return Ok(None) };
        let Ok(_one_at_a_time) = self.compacting.try_lock() else { return Ok(None) };
        // A table dropped meanwhile has no column family any more.
        if self.table(&store.def.id).is_err() {
            return Ok(None);
        }
        tracing::info!(
            table = %format!("{}.{}", store.def.keyspace, store.def.name),
            ratio = format!("{ratio:.2}"),
            "tombstone compaction: purging the deletion markers gc_grace_seconds lets go"
        );
        self.tombstone_compacting.store(true, Ordering::SeqCst);
        let started = Instant::now();
        let result = self.purge_table(&store);
        self.tombstone_compacting.store(false, Ordering::SeqCst);
        *lock(&self.purge_pace) = Instant::now() + started.elapsed();
        store.markers.count_purge();
        result.map(|()| Some(store.def.id))
    }

    /// Size of a table's live files and memtables in bytes (for `load`):
    /// `rocksdb.live-sst-files-size`, not the total, which also counts a
    /// finished merge's inputs until they are deleted (twice the table, for a
    /// moment, after a merge of all of it).
    pub fn table_size_bytes(&self, table: &Uuid) -> u64 {
        let Ok(store) = self.table(table) else { return 0 };
        let Ok(cf) = self.cf(&store) else { return 0 };
        let sst = self.db.property_int_value_cf(&cf, "rocksdb.live-sst-files-size").ok().flatten().unwrap_or(0);
        let mem = read_lock(&store.mem).bytes() as u64;
        sst + mem
    }

    /// The table's sorted runs on disk: each level-0 file, and each other
    /// level that holds files (size-tiered tables are universal compaction).
    pub fn sorted_runs(&self, table: &Uuid) -> u64 {
        let Ok(store) = self.table(table) else { return 0 };
        let Ok(cf) = self.cf(&store) else { return 0 };
        let files = |level: usize| {
            self.db
                .property_int_value_cf(&cf, &format!("rocksdb.num-files-at-level{level}"))
                .ok()
                .flatten()
                .unwrap_or(0)
        };
        files(0) + (1..7).filter(|&level| files(level) > 0).count() as u64
    }

    /// Whether a size-tiered table is merged whole now (`tuning::full_merge`).
    pub fn merged_whole(&self, table: &Uuid) -> Option<bool> {
        self.table(table).ok().map(|store| store.full_merge.load(Ordering::Relaxed))
    }

    /// Bytes held by a table's memtables (active and frozen), as nodetool
    /// tablestats' "Memtable data size".
    pub fn memtable_bytes(&self, table: &Uuid) -> u64 {
        self.table(table).map_or(0, |store| read_lock(&store.mem).bytes() as u64)
    }

    /// The background work this node owes or is doing now (`nodetool
    /// compactionstats`): RocksDB's running compactions and flushes (counted
    /// over the whole database: RocksDB does not say which column family
    /// runs them), whether a major compaction (`compact`) runs, and per
    /// table RocksDB's `rocksdb.compaction-pending`,
    /// `rocksdb.estimate-pending-compaction-bytes` and
    /// `rocksdb.mem-table-flush-pending` with Shoal's own frozen memtables
    /// waiting for the flusher (Shoal's memtables are not RocksDB's, so
    /// those are its flushes owed). Tables sorted by keyspace and name.
    pub fn compaction_stats(&self) -> CompactionStats {
        let db_int = |name: &str| self.db.property_int_value(name).ok().flatten().unwrap_or(0);
        let mut tables: Vec<TableCompactionStats> = read_lock(&self.tables)
            .values()
            .map(|store| {
                let (frozen_memtables, frozen_bytes) = {
                    let mem = read_lock(&store.mem);
                    (mem.frozen.len() as u64, mem.frozen.iter().map(|m| m.bytes() as u64).sum())
                };
                let cf = self.cf(store).ok();
                let cf_int = |name: &str| {
                    cf.as_ref().and_then(|cf| self.db.property_int_value_cf(cf, name).ok().flatten()).unwrap_or(0)
                };
                let (droppable_tombstones, _) = self.droppable(store);
                TableCompactionStats {
                    id: store.def.id,
                    keyspace: store.def.keyspace.clone(),
                    table: store.def.name.clone(),
                    compaction_pending: cf_int("rocksdb.compaction-pending") > 0,
                    pending_compaction_bytes: cf_int("rocksdb.estimate-pending-compaction-bytes"),
                    mem_table_flush_pending: cf_int("rocksdb.mem-table-flush-pending") > 0,
                    frozen_memtables,
                    frozen_bytes,
                    tombstone_markers: store.markers.total(),
                    droppable_tombstones,
                    tombstone_compactions: store.markers.purges.load(Ordering::Relaxed),
                    last_tombstone_compaction: store.markers.last_purge.load(Ordering::Relaxed),
                }
            })
            .collect();
        tables.sort_by(|a, b| (&a.keyspace, &a.table).cmp(&(&b.keyspace, &b.table)));
        CompactionStats {
            running_compactions: db_int("rocksdb.num-running-compactions"),
            running_flushes: db_int("rocksdb.num-running-flushes"),
            major_compaction: self.compacting.try_lock().is_err(),
            tombstone_compaction: self.tombstone_compacting.load(Ordering::SeqCst),
            tables,
        }
    }

    /// Every table's metrics and gauges (secondary index tables included),
    /// sorted by keyspace and name: what a scrape and `tablestats` read.
    pub fn table_samples(&self) -> Vec<TableSample> {
        let stores: Vec<Arc<TableStore>> = read_lock(&self.tables).values().cloned().collect();
        let mut out: Vec<TableSample> = stores
            .iter()
            .map(|store| {
                let cf = self.cf(store).ok();
                let cf_int = |name: &str| {
                    cf.as_ref().and_then(|cf| self.db.property_int_value_cf(cf, name).ok().flatten()).unwrap_or(0)
                };
                let (memtable_bytes, pending_flushes) = {
                    let mem = read_lock(&store.mem);
                    (mem.bytes() as u64, mem.frozen.len() as u64)
                };
                TableSample {
                    keyspace: store.def.keyspace.clone(),
                    table: store.def.name.clone(),
                    metrics: Arc::clone(&store.metrics),
                    live_sstables: (0..7).map(|l| cf_int(&format!("rocksdb.num-files-at-level{l}"))).sum(),
                    live_disk_bytes: cf_int("rocksdb.live-sst-files-size"),
                    total_disk_bytes: cf_int("rocksdb.total-sst-files-size"),
                    memtable_bytes,
                    pending_flushes,
                    pending_compactions: cf_int("rocksdb.compaction-pending").min(1),
                    pending_compaction_bytes: cf_int("rocksdb.estimate-pending-compaction-bytes"),
                    estimated_rows: cf_int("rocksdb.estimate-num-keys"),
                }
            })
            .collect();
        out.sort_by(|a, b| (&a.keyspace, &a.table).cmp(&(&b.keyspace, &b.table)));
        out
    }

    /// Node-wide storage gauges: commit log bytes on disk, its fsync
    /// latencies, the block cache's usage and capacity, the row cache's counters.
    pub fn node_samples(&self) -> NodeSample {
        NodeSample {
            commitlog_bytes: self.log.total_bytes(),
            commitlog_fsync: self.log.fsync_latency.snapshot(),
            block_cache_bytes: self.cache.get_usage() as u64,
            block_cache_capacity: self.config.cache_bytes as u64,
            row_cache: self.row_cache.stats(),
            compaction_bytes_read: self.statistics.get_ticker_count(rocksdb::statistics::Ticker::CompactReadBytes),
            compaction_bytes_written: self.statistics.get_ticker_count(rocksdb::statistics::Ticker::CompactWriteBytes),
        }
    }

    /// Stops the sync and flush threads, syncs the log and flushes
    /// memtables (so the next open has no log to replay).
    pub fn shutdown(&self) -> Result<(), StorageError> {
        self.stop_threads();
        self.log.sync()?;
        self.flush(None)?;
        self.unrepaired.save(&self.config.data_dir)?;
        self.save_markers(true)?;
        Ok(())
    }

    fn stop_threads(&self) {
        self.stop.store(true, Ordering::Relaxed);
        self.group.wake();
        if let Some(handle) = lock(&self.syncer).take() {
            let _ = handle.join();
        }
        if let Some(handle) = lock(&self.allocator).take() {
            let _ = handle.join();
        }
        self.flusher.stop.store(true, Ordering::Relaxed);
        if let Some(handle) = lock(&self.flush_thread).take() {
            let _ = handle.join();
        }
        if let Some(handle) = lock(&self.disk_monitor).take() {
            let _ = handle.join();
        }
    }
}

impl Drop for Storage {
    fn drop(&mut self) {
        self.stop_threads();
        // Durable writes not flushed are in the log, which the next open
        // replays. Writes of `durable_writes = false` keyspaces are not:
        // flush them (as RocksDB flushed unlogged memtables at close), so
        // only a crash loses them, as in Cassandra.
        let volatile: Vec<Arc<TableStore>> = read_lock(&self.tables).values().filter(|s| !s.durable).cloned().collect();
        for store in volatile {
            if let Err(e) = self.flusher.flush_now(&store) {
                tracing::warn!(table = %store.cf_name, "cannot flush at close: {e}");
            }
        }
    }
}

fn table_options(
    config: &StorageConfig,
    cache: &Cache,
    store: &TableStore,
    gc: &filter::GcRegistry,
    purge_markers: &Arc<AtomicBool>,
) -> Options {
    let mut opts = Options::default();
    opts.set_merge_operator_associative("shoal-lww", |key, existing, operands| {
        memtable::merge_values(key, existing, operands.iter())
    });
    opts.set_compaction_filter_factory(filter::Factory::new(
        gc.clone(),
        Arc::clone(purge_markers),
        store.cf_name.clone(),
    ));
    opts.set_write_buffer_size(config.memtable_bytes);
    opts.set_max_write_buffer_number(4);
    let mut block = BlockBasedOptions::default();
    block.set_block_cache(cache);
    block.set_bloom_filter(10.0, false);
    block.set_cache_index_and_filter_blocks(true);
    block.set_pin_l0_filter_and_index_blocks_in_cache(true);
    flush::read_blocks(&mut block);
    opts.set_block_based_table_factory(&block);
    tuning::configure(&mut opts, &store.shape);
    opts
}

/// Whether files under `dir` can be opened with O_DIRECT (tmpfs and some
/// other file systems refuse it; RocksDB would then fail every compaction).
fn direct_io_works(dir: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    let probe = dir.join(".direct-io-probe");
    let opened =
        std::fs::OpenOptions::new().write(true).create(true).truncate(true).custom_flags(libc::O_DIRECT).open(&probe);
    // Some file systems open with O_DIRECT and refuse the writes: write one
    // aligned block (O_DIRECT needs the buffer aligned too).
    let works = opened.is_ok_and(|file| {
        use std::os::unix::fs::FileExt;
        #[repr(align(4096))]
        struct Block([u8; 4096]);
        let block = Box::new(Block([0; 4096]));
        file.write_all_at(&block.0, 0).is_ok()
    });
    let _ = std::fs::remove_file(&probe);
    works
}

/// Seconds since the epoch now.
pub(crate) fn unix_now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

pub(crate) fn read_lock<T>(m: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(|p| p.into_inner())
}

pub(crate) fn write_lock<T>(m: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    m.write().unwrap_or_else(|p| p.into_inner())
}

/// The paxos column family's options: expired records are dropped by its
/// compactions, and its files are compacted at least daily so that happens
/// even where little is written.
fn paxos_options() -> Options {
    let mut opts = Options::default();
    opts.set_compaction_filter("paxos-expiry", crate::paxos::compaction_filter);
    opts.set_periodic_compaction_seconds(24 * 3600);
    opts
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The probe answers for the directory and leaves nothing behind.
    #[test]
    fn direct_io_probe_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let _ = direct_io_works(dir.path());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        assert!(!direct_io_works(&dir.path().join("missing")));
    }
}
