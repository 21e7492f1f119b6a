//! The engine: opening RocksDB, the schema manifest, column families per
//! table, the write path (commit log, then memtables) and the commit log
//! sync modes.
//!
//! A write reserves a commit log sequence number, merges its operands into
//! the tables' active memtables (`memtable`), appends one log record
//! (`commitlog`) and syncs as the mode says; full memtables are flushed into
//! RocksDB by `flush`. At open the log is replayed into memtables, which are
//! flushed before the first write.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use rocksdb::{
    BlockBasedOptions, BoundColumnFamily, Cache, ColumnFamilyDescriptor, DBWithThreadMode, MultiThreaded, Options,
};
use types::mutation::Mutation;
use types::schema::{KeyspaceDef, TableDef};
use uuid::Uuid;

use crate::commitlog::{self, CommitLog};
use crate::flush::{self, Flusher, Tables};
use crate::keys::{self, Layout};
use crate::memtable::{self, Memtables};
use crate::packed::RowPacker;
use crate::{cell, filter, tuning, StorageError};

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
    /// Memtable size per table before a flush.
    pub memtable_bytes: usize,
    /// All tables' active (not yet flushing) memtables together: above it
    /// the largest is flushed.
    pub memtable_space: usize,
}

pub(crate) struct TableStore {
    pub def: TableDef,
    pub layout: Layout,
    pub cf_name: String,
    pub durable: bool,
    pub gc_grace: Arc<AtomicI32>,
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
}

impl TableStore {
    fn new(
        def: &TableDef,
        cf_name: String,
        durable: bool,
        gc_grace: Arc<AtomicI32>,
        mem: Option<Arc<RwLock<Memtables>>>,
    ) -> TableStore {
        let shape = tuning::shape(&def.options);
        let compressing = Arc::new(AtomicBool::new(shape.compress));
        let mem = mem.unwrap_or_default();
        let full_merge = Arc::new(AtomicBool::new(false));
        TableStore {
            def: def.clone(),
            layout: Layout::of(def),
            cf_name,
            durable,
            gc_grace,
            shape,
            compressing,
            full_merge,
            mem,
        }
    }
}

/// The on-disk layout this build reads and writes: 1 stored a key per cell,
/// 2 packs each row into one key (`packed`, ADR 0002).
pub const STORAGE_FORMAT: u32 = 2;

#[derive(serde::Serialize, serde::Deserialize, Default)]
struct Manifest {
    /// `STORAGE_FORMAT` of the data; manifests before the field are format 1.
    #[serde(default = "format_one")]
    format: u32,
    keyspaces: Vec<KeyspaceDef>,
    /// Table id -> column family name (the name changes on TRUNCATE).
    column_families: BTreeMap<Uuid, String>,
    /// Node-local metadata (host id, tokens, ...) owned by the node.
    local: BTreeMap<String, String>,
    /// Table id -> the first commit log seq written after its last TRUNCATE:
    /// replay skips the table's older records. Cleared once the log has been
    /// replayed and flushed at open.
    #[serde(default)]
    truncated: BTreeMap<Uuid, u64>,
}

pub struct Storage {
    pub(crate) db: Arc<Db>,
    pub(crate) tables: Tables,
    log: Arc<CommitLog>,
    flusher: Arc<Flusher>,
    flush_thread: Mutex<Option<JoinHandle<()>>>,
    manifest: Mutex<Manifest>,
    config: StorageConfig,
    cache: Cache,
    /// Shared with compaction filter factories: the live gc_grace per column family.
    gc_registry: filter::GcRegistry,
    /// On only during the purging pass of a major compaction (see filter.rs).
    purge_markers: Arc<AtomicBool>,
    /// Serializes major compactions (the purge flag is global).
    compacting: Mutex<()>,
    poisoned: Arc<Mutex<Option<String>>>,
    group: Arc<GroupCommit>,
    stop: Arc<AtomicBool>,
    syncer: Mutex<Option<JoinHandle<()>>>,
}

const MANIFEST: &str = "schema.json";

/// Writes encoded and not made yet: merge operands of one or more tables,
/// back to back in one buffer. Whoever owns a batch collects the writes of
/// many requests into it ([`Storage::collect`]) and makes them all at once
/// ([`Storage::commit`]: one log record, one fsync in `batch` mode); nothing
/// is written if it is dropped. Its owner answers the requests whose writes
/// it holds only after that commit.
#[derive(Default)]
pub struct WriteBatch {
    arena: Vec<u8>,
    /// (table, key start, key end = value start, value end) in `arena`.
    ops: Vec<(Uuid, u32, u32, u32)>,
    durable: bool,
    mutations: usize,
    /// Encoding buffers for the mutations collected into this batch.
    scratch: Scratch,
}

/// Encoding buffers, reused by every `collect` into one batch (scratch space
/// only: nothing in it outlives one call).
#[derive(Default)]
struct Scratch {
    key: Vec<u8>,
    value: Vec<u8>,
    packer: RowPacker,
}

impl WriteBatch {
    /// An empty batch, sized for a request group's writes.
    pub fn new() -> WriteBatch {
        WriteBatch { arena: Vec::with_capacity(4096), ops: Vec::with_capacity(32), ..WriteBatch::default() }
    }

    /// True when nothing was collected.
    pub fn is_empty(&self) -> bool {
        self.mutations == 0
    }

    /// Mutations collected so far.
    pub fn mutations(&self) -> usize {
        self.mutations
    }
}

impl Storage {
    /// Opens (or creates) the data directory and returns the engine and the
    /// schema it holds.
    pub fn open(config: StorageConfig) -> Result<(Storage, Vec<KeyspaceDef>), StorageError> {
        std::fs::create_dir_all(&config.data_dir)?;
        let db_path = config.data_dir.join("db");
        let manifest = read_manifest(&config.data_dir)?;
        let cache = Cache::new_lru_cache(config.cache_bytes);
        let gc_registry = filter::GcRegistry::default();
        let purge_markers = Arc::new(AtomicBool::new(false));

        let mut tables = HashMap::new();
        let mut descriptors = vec![ColumnFamilyDescriptor::new("default", Options::default())];
        for ks in &manifest.keyspaces {
            for table in ks.tables.values() {
                let Some(cf_name) = manifest.column_families.get(&table.id) else {
                    return Err(StorageError::Invalid(format!(
                        "manifest has table {}.{} without a column family",
                        ks.name, table.name
                    )));
                };
                let gc_grace = Arc::new(AtomicI32::new(table.options.gc_grace_seconds));
                let store = Arc::new(TableStore::new(table, cf_name.clone(), ks.durable_writes, gc_grace, None));
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
            config,
            cache,
            gc_registry,
            purge_markers,
            compacting: Mutex::new(()),
            poisoned: Arc::new(Mutex::new(None)),
            group: Arc::new(GroupCommit::default()),
            stop: Arc::new(AtomicBool::new(false)),
            syncer: Mutex::new(None),
        };
        storage.start_syncer();
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

    /// Applies mutations atomically (one write batch) and durably per the
    /// commit log mode. Mutations of keyspaces with `durable_writes = false`
    /// skip the log when every mutation in the call does.
    pub fn apply(&self, mutations: &[Mutation]) -> Result<(), StorageError> {
        let mut batch = WriteBatch::default();
        self.collect(&mut batch, mutations)?;
        self.commit(std::slice::from_ref(&batch))
    }

    /// Makes the writes of several batches as one, durably per the commit log
    /// mode (one log write; one fsync in `batch` mode). An empty batch
    /// writes nothing.
    pub fn commit(&self, batches: &[WriteBatch]) -> Result<(), StorageError> {
        if batches.iter().all(WriteBatch::is_empty) {
            return Ok(());
        }
        let durable = batches.iter().any(|g| g.durable);
        let ops = batches.iter().flat_map(|g| {
            g.ops.iter().map(move |&(table, k0, k1, v1)| {
                (table, &g.arena[k0 as usize..k1 as usize], &g.arena[k1 as usize..v1 as usize])
            })
        });
        self.write(ops, durable)
    }

    /// Encodes `mutations` into `into` for a later [`Storage::commit`], all
    /// or (on an error, a poisoned engine included) none of them.
    pub fn collect(&self, into: &mut WriteBatch, mutations: &[Mutation]) -> Result<(), StorageError> {
        self.check_poisoned()?;
        self.encode_into(into, mutations)
    }

    /// Encodes `mutations` into `into`, all or (on an error) none of them.
    fn encode_into(&self, into: &mut WriteBatch, mutations: &[Mutation]) -> Result<(), StorageError> {
        let (arena_len, ops_len) = (into.arena.len(), into.ops.len());
        let mut durable = false;
        let WriteBatch { arena, ops, scratch: Scratch { key, value, packer }, .. } = &mut *into;
        let encoded = (|| -> Result<(), StorageError> {
            for m in mutations {
                let store = self.table(&m.table)?;
                durable |= store.durable;
                encode_mutation(&store, m, key, value, packer, |k, v| {
                    let start = arena.len();
                    arena.extend_from_slice(k);
                    arena.extend_from_slice(v);
                    ops.push((m.table, start as u32, (start + k.len()) as u32, arena.len() as u32));
                })?;
            }
            Ok(())
        })();
        match encoded {
            Ok(()) => {
                into.durable |= durable;
                into.mutations += mutations.len();
                Ok(())
            }
            Err(e) => {
                into.arena.truncate(arena_len);
                into.ops.truncate(ops_len);
                Err(e)
            }
        }
    }

    /// Writes merge operands (table, key, operand) durably per the commit
    /// log mode (the log is skipped unless `durable`), poisoning the engine
    /// when the log cannot be written or a synchronous fsync fails. Every
    /// write goes through here.
    ///
    /// Order (see `memtable`'s invariants): reserve a log seq, merge into
    /// the memtables, append the log record, sync. An unknown table fails
    /// the write before anything is made.
    pub(crate) fn write<'a>(
        &self,
        ops: impl Iterator<Item = (Uuid, &'a [u8], &'a [u8])> + Clone,
        durable: bool,
    ) -> Result<(), StorageError> {
        self.check_poisoned()?;
        // The tables of the runs of consecutive operands of one table.
        let mut runs: Vec<(Arc<TableStore>, usize)> = Vec::new();
        for (table, _, _) in ops.clone() {
            match runs.last_mut() {
                Some((store, n)) if store.def.id == table => *n += 1,
                _ => runs.push((self.table(&table)?, 1)),
            }
        }
        if runs.is_empty() {
            return Ok(());
        }
        let seq = durable.then(|| self.log.next_seq());
        let mut rest = ops.clone();
        for (store, n) in &runs {
            let mems = read_lock(&store.mem);
            mems.active.insert(rest.by_ref().take(*n).map(|(_, k, v)| (k, v)), seq);
        }
        if let Some(seq) = seq {
            // Room for the record header first: the log fills it in place and
            // writes the record as it is (no copy).
            let bytes: usize = ops.clone().map(|(_, k, v)| 16 + 2 * 10 + k.len() + v.len()).sum();
            let mut buf = Vec::with_capacity(commitlog::RECORD_HEADER + bytes);
            buf.resize(commitlog::RECORD_HEADER, 0);
            flush::encode_record(ops, &mut buf);
            let appended = self.log.append_framed(seq, &mut buf);
            if let Err(e) = appended {
                poison(&self.poisoned, &format!("cannot append to the commit log: {e}"));
                return Err(e);
            }
            match self.config.commitlog_sync {
                CommitlogSync::Batch => {
                    if let Err(e) = self.log.sync() {
                        poison(&self.poisoned, &e.to_string());
                        return Err(e);
                    }
                }
                CommitlogSync::Group { .. } => self.group.wait_synced(&self.poisoned, &self.stop, &self.log)?,
                CommitlogSync::Periodic { .. } => {}
            }
        }
        for (store, _) in &runs {
            self.flusher.after_write(store);
        }
        Ok(())
    }

    /// Replaces the schema. Creates column families for new tables, drops
    /// those of removed tables and records everything in the manifest.
    pub fn set_schema(&self, keyspaces: &[KeyspaceDef]) -> Result<(), StorageError> {
        let mut manifest = lock(&self.manifest);
        let mut wanted: HashMap<Uuid, (&KeyspaceDef, &TableDef)> = HashMap::new();
        for ks in keyspaces {
            for t in ks.tables.values() {
                wanted.insert(t.id, (ks, t));
            }
        }
        // Create first, write the manifest, then drop: a crash at any point
        // leaves at worst an orphan column family, dropped at the next open.
        let mut new_tables = HashMap::new();
        for (id, (ks, table)) in &wanted {
            let existing = read_lock(&self.tables).get(id).cloned();
            // An existing table keeps its column family and the gc_grace
            // counter its compaction filter factory reads (via the registry).
            let (cf_name, gc_grace, mem) = match &existing {
                Some(store) => (store.cf_name.clone(), Arc::clone(&store.gc_grace), Some(Arc::clone(&store.mem))),
                None => {
                    (format!("t_{}_0", id.simple()), Arc::new(AtomicI32::new(table.options.gc_grace_seconds)), None)
                }
            };
            gc_grace.store(table.options.gc_grace_seconds, Ordering::Relaxed);
            let store = Arc::new(TableStore::new(table, cf_name, ks.durable_writes, gc_grace, mem));
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
            self.db.drop_cf(&store.cf_name)?;
            self.gc_registry.remove(&store.cf_name);
        }
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
        let mut manifest = lock(&self.manifest);
        let old = self.table(table)?;
        let generation = old.cf_name.rsplit('_').next().and_then(|g| g.parse::<u64>().ok()).unwrap_or(0) + 1;
        let name = format!("t_{}_{}", table.simple(), generation);
        let gc_grace = Arc::new(AtomicI32::new(old.gc_grace.load(Ordering::Relaxed)));
        let store = Arc::new(TableStore::new(&old.def, name.clone(), old.durable, gc_grace, None));
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

    fn tables_or_all(&self, table: Option<&Uuid>) -> Result<Vec<Arc<TableStore>>, StorageError> {
        Ok(match table {
            Some(id) => vec![self.table(id)?],
            None => read_lock(&self.tables).values().cloned().collect(),
        })
    }

    /// Flushes memtables of one table, or of all tables, to sorted files.
    pub fn flush(&self, table: Option<&Uuid>) -> Result<(), StorageError> {
        let stores = self.tables_or_all(table)?;
        for store in stores {
            self.flusher.flush_now(&store)?;
        }
        Ok(())
    }

    /// A major compaction of one table (or all): purges what gc_grace allows.
    /// Two passes (see filter.rs): the first merges every pending write into
    /// a plain value without purging deletion markers, the second purges
    /// markers together with the cells they shadow.
    pub fn compact(&self, table: Option<&Uuid>) -> Result<(), StorageError> {
        let stores = self.tables_or_all(table)?;
        let _one_at_a_time = lock(&self.compacting);
        for store in stores {
            let cf = self.cf(&store)?;
            self.flusher.flush_now(&store)?;
            let mut opts = rocksdb::CompactOptions::default();
            opts.set_bottommost_level_compaction(rocksdb::BottommostLevelCompaction::Force);
            self.purge_markers.store(false, Ordering::SeqCst);
            self.db.compact_range_cf_opt(&cf, None::<&[u8]>, None::<&[u8]>, &opts);
            self.purge_markers.store(true, Ordering::SeqCst);
            self.db.compact_range_cf_opt(&cf, None::<&[u8]>, None::<&[u8]>, &opts);
            self.purge_markers.store(false, Ordering::SeqCst);
        }
        Ok(())
    }

    /// Size of a table's files and memtables in bytes (for `load`).
    pub fn table_size_bytes(&self, table: &Uuid) -> u64 {
        let Ok(store) = self.table(table) else { return 0 };
        let Ok(cf) = self.cf(&store) else { return 0 };
        let sst = self.db.property_int_value_cf(&cf, "rocksdb.total-sst-files-size").ok().flatten().unwrap_or(0);
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

    /// Stops the sync and flush threads, syncs the log and flushes
    /// memtables (so the next open has no log to replay).
    pub fn shutdown(&self) -> Result<(), StorageError> {
        self.stop_threads();
        self.log.sync()?;
        self.flush(None)
    }

    fn stop_threads(&self) {
        self.stop.store(true, Ordering::Relaxed);
        self.group.wake();
        if let Some(handle) = lock(&self.syncer).take() {
            let _ = handle.join();
        }
        self.flusher.stop.store(true, Ordering::Relaxed);
        if let Some(handle) = lock(&self.flush_thread).take() {
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

fn encode_mutation(
    store: &TableStore,
    m: &Mutation,
    key: &mut Vec<u8>,
    value: &mut Vec<u8>,
    packer: &mut RowPacker,
    mut put: impl FnMut(&[u8], &[u8]),
) -> Result<(), StorageError> {
    key.clear();
    keys::partition_prefix(m.token, &m.partition_key, key)?;
    let prefix_len = key.len();
    if let Some(d) = m.partition_deletion {
        key.push(keys::SECTION_PARTITION_DELETION);
        value.clear();
        cell::encode_tombstone(d.timestamp, d.local_deletion_time, value);
        put(key, value);
    }
    for rt in &m.range_tombstones {
        key.truncate(prefix_len);
        key.push(keys::SECTION_RANGE_TOMBSTONE);
        let mut start = Vec::new();
        keys::encode_clustering(&store.layout, &rt.start.prefix, &mut start)?;
        let mut end = Vec::new();
        keys::encode_clustering(&store.layout, &rt.end.prefix, &mut end)?;
        keys::encode_range_bounds(&start, rt.start.inclusive, &end, rt.end.inclusive, key);
        value.clear();
        cell::encode_tombstone(rt.deletion.timestamp, rt.deletion.local_deletion_time, value);
        put(key, value);
    }
    for row in &m.rows {
        key.truncate(prefix_len);
        if row.is_static {
            key.push(keys::SECTION_STATIC);
        } else {
            if row.clustering.len() != store.layout.clustering.len() {
                return Err(StorageError::Invalid(format!(
                    "row has {} clustering values, table {} has {}",
                    row.clustering.len(),
                    store.def.name,
                    store.layout.clustering.len()
                )));
            }
            key.push(keys::SECTION_ROWS);
            keys::encode_clustering(&store.layout, &row.clustering, key)?;
        }
        packer.clear();
        if let Some(d) = row.deletion {
            packer.add(
                |k| k.extend_from_slice(&keys::COLUMN_ROW_DELETION.to_be_bytes()),
                |v| cell::encode_tombstone(d.timestamp, d.local_deletion_time, v),
            );
        }
        if let Some(l) = row.marker {
            packer.add(
                |k| k.extend_from_slice(&keys::COLUMN_ROW_MARKER.to_be_bytes()),
                |v| cell::encode(l.timestamp, l.ttl, l.local_expiration, Some(&[]), v),
            );
        }
        for (column, d) in &row.complex_deletions {
            packer.add(
                |k| {
                    k.extend_from_slice(&column.to_be_bytes());
                    k.push(keys::COMPLEX_DELETION);
                },
                |v| cell::encode_tombstone(d.timestamp, d.local_deletion_time, v),
            );
        }
        for c in &row.cells {
            let mut path_error = None;
            packer.add(
                |k| {
                    k.extend_from_slice(&c.column.to_be_bytes());
                    if let Some(path) = &c.path {
                        k.push(keys::COMPLEX_ELEMENT);
                        if let Err(e) = keys::encode_path(&store.layout, c.column, path, k) {
                            path_error = Some(e);
                        }
                    }
                },
                |v| cell::encode(c.timestamp, c.ttl, c.local_deletion_time, c.value.as_deref(), v),
            );
            if let Some(e) = path_error {
                return Err(e);
            }
        }
        if !packer.is_empty() {
            put(key, packer.finish());
        }
    }
    Ok(())
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

fn format_one() -> u32 {
    1
}

/// The manifest, refusing data written in another storage format (there is
/// no in-place conversion; an empty data directory of any format is fine).
fn read_manifest(dir: &Path) -> Result<Manifest, StorageError> {
    let path = dir.join(MANIFEST);
    let mut manifest: Manifest = match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map_err(|e| StorageError::Invalid(format!("cannot read {}: {e}", path.display())))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Manifest::default(),
        Err(e) => return Err(e.into()),
    };
    if manifest.format != STORAGE_FORMAT && !manifest.column_families.is_empty() {
        return Err(StorageError::Invalid(format!(
            "{} holds tables in storage format {}; this build reads format {STORAGE_FORMAT} only \
             (move the data directory away, or read it with the build that wrote it)",
            dir.display(),
            manifest.format
        )));
    }
    manifest.format = STORAGE_FORMAT;
    Ok(manifest)
}

fn write_manifest(dir: &Path, manifest: &Manifest) -> Result<(), StorageError> {
    let bytes = serde_json::to_vec_pretty(manifest).map_err(|e| StorageError::Invalid(e.to_string()))?;
    let tmp = dir.join(format!("{MANIFEST}.tmp"));
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, dir.join(MANIFEST))?;
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

fn poison(slot: &Mutex<Option<String>>, reason: &str) {
    tracing::error!(reason, "commit log sync failed; storage refuses further writes");
    let mut guard = lock(slot);
    if guard.is_none() {
        *guard = Some(reason.to_string());
    }
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

/// Group commit: writers register after their (unsynced) write and wait for
/// the first fsync that *started* after they registered.
#[derive(Default)]
struct GroupCommit {
    state: Mutex<GroupState>,
    cond: Condvar,
}

#[derive(Default)]
struct GroupState {
    /// The epoch new writers join; sealed when an fsync starts.
    open_epoch: u64,
    /// Every epoch up to this one is durable.
    synced_epoch: u64,
    waiting: usize,
}

impl GroupCommit {
    fn wait_synced(
        &self,
        poisoned: &Mutex<Option<String>>,
        stop: &AtomicBool,
        log: &CommitLog,
    ) -> Result<(), StorageError> {
        let mut state = lock(&self.state);
        let target = state.open_epoch + 1;
        state.waiting += 1;
        self.cond.notify_all();
        while state.synced_epoch < target {
            if stop.load(Ordering::Relaxed) {
                // The group thread is gone (shutdown): sync the log ourselves.
                state.waiting -= 1;
                drop(state);
                return log.sync().inspect_err(|e| poison(poisoned, &e.to_string()));
            }
            if let Some(reason) = &*lock(poisoned) {
                state.waiting -= 1;
                return Err(StorageError::Poisoned(reason.clone()));
            }
            state = self
                .cond
                .wait_timeout(state, Duration::from_millis(100))
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
        state.waiting -= 1;
        Ok(())
    }

    fn wake(&self) {
        self.cond.notify_all();
    }

    fn run(&self, log: &CommitLog, window: Duration, stop: &AtomicBool, poisoned: &Mutex<Option<String>>) {
        loop {
            {
                let mut state = lock(&self.state);
                while state.waiting == 0 && !stop.load(Ordering::Relaxed) {
                    state = self
                        .cond
                        .wait_timeout(state, Duration::from_millis(100))
                        .map(|(g, _)| g)
                        .unwrap_or_else(|p| p.into_inner().0);
                }
            }
            if stop.load(Ordering::Relaxed) {
                // Release any waiter: shutdown syncs the log itself.
                let _ = log.sync();
                let mut state = lock(&self.state);
                state.open_epoch += 1;
                state.synced_epoch = state.open_epoch;
                self.cond.notify_all();
                return;
            }
            std::thread::sleep(window);
            let sealed = {
                let mut state = lock(&self.state);
                state.open_epoch += 1;
                state.open_epoch
            };
            if let Err(e) = log.sync() {
                poison(poisoned, &e.to_string());
            } else {
                let mut state = lock(&self.state);
                state.synced_epoch = sealed;
            }
            self.cond.notify_all();
        }
    }
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
