//! Flushing memtables: a frozen memtable becomes a sorted file of merge
//! operands (RocksDB's `SstFileWriter`), ingested into the table's column
//! family; then the commit log drops the segments no memtable needs.
//!
//! One thread (`memtable-flush`) flushes what writers froze; `Storage::flush`,
//! `compact` and `shutdown` flush in the caller's thread. Flushes run one at
//! a time, oldest frozen memtable of a table first.
//!
//! Memory: a table's active memtable is frozen at `memtable_bytes`, and
//! while all tables' active memtables together hold more than `space` the
//! flush thread flushes the largest (Cassandra flushes the largest memtable
//! when memtables fill `memtable_heap_space`).
//!
//! Back-pressure instead of collapse: a writer whose table already has
//! `MAX_FROZEN` memtables waiting waits for a flush, and the flush waits
//! while the column family has more than `MAX_SORTED_RUNS` level-0 files
//! (RocksDB's own slowdown trigger; `MAX_SORTED_RUNS_MERGED_WHOLE` for a
//! table merged whole), so writes slow down to what flushing and compaction
//! sustain and memory stays bounded. While flushes fail (a full disk) nobody
//! waits for them: writes to a table with more than `MAX_FROZEN` memtables
//! waiting are refused instead (`Flusher::admit`), until a flush works.
//!
//! With `incremental_backups` on, every file flushed is also hard-linked
//! into `<data dir>/backups/<keyspace>/<table>-<id>/` before it is ingested
//! (Cassandra's incremental backups): a sorted file of the merge operands
//! the memtable held, which ingestion moves into the database unchanged.
//!
//! Invariants:
//! - A frozen memtable leaves its table's list only after its file is
//!   ingested (or its table is gone), so reads see its data throughout. A
//!   flush that fails (a full disk) removes its partial file and is retried.
//! - The log discards a segment only when every record in it is older than
//!   every unflushed memtable's `min_seq` (`lowest_live`).

#![deny(clippy::indexing_slicing)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

use rocksdb::{BlockBasedOptions, DBCompressionType, IngestExternalFileOptions, Options, SstFileWriter};
use uuid::Uuid;

use crate::commitlog::CommitLog;
use crate::engine::{lock, read_lock, write_lock, Db, TableStore};
use crate::keys;
use crate::memtable::{self, Memtable};
use crate::tuning;
use crate::varint;
use crate::StorageError;

/// Frozen memtables a table may have waiting before its writers wait.
const MAX_FROZEN: usize = 3;

/// Level-0 files above which a flush waits for compaction (RocksDB's
/// `level0_slowdown_writes_trigger` default).
const MAX_SORTED_RUNS: u64 = 20;

/// The same for a table merged whole (`tuning::full_merge`; RocksDB's
/// `level0_stop_writes_trigger` default): its next merge takes every run
/// flushed while the last one ran, about 15 of them at 2.35 GB live, and
/// more runs only make that merge larger, not the table's backlog longer.
const MAX_SORTED_RUNS_MERGED_WHOLE: u64 = 36;

/// How long a flush waits for compaction before it ingests anyway.
const MAX_COMPACTION_WAIT: Duration = Duration::from_secs(30);

/// Commit log size above which the table pinning its oldest segment is
/// flushed, so a rarely written table does not keep the log growing.
const MAX_LOG_BYTES: u64 = 1 << 30;

pub(crate) type Tables = Arc<RwLock<HashMap<Uuid, Arc<TableStore>>>>;

pub(crate) struct Flusher {
    db: Arc<Db>,
    tables: Tables,
    log: Arc<CommitLog>,
    /// Where files are written before ingestion.
    dir: PathBuf,
    memtable_bytes: usize,
    /// Bound on all active memtables together.
    space: usize,
    /// Set when a writer froze a memtable; the flush thread clears it.
    wanted: Mutex<bool>,
    /// Signalled when work is wanted and when a flush finished.
    cond: Condvar,
    one_at_a_time: Mutex<()>,
    pub stop: AtomicBool,
    /// `hold_compactions`: RocksDB starts no compaction of any table, and
    /// flushes do not wait for one.
    held: AtomicBool,
    files: AtomicU64,
    /// When a memtable was last flushed (the spare arena chunks go once
    /// none has been for `SPARE_CHUNKS_IDLE`).
    last_flush: Mutex<Instant>,
    /// Set while flushes fail (from the last failed flush to the next one
    /// that works), with the failure: writers do not wait for flushes then.
    failing: AtomicBool,
    failure: Mutex<Option<String>>,
    /// `incremental_backups`: where every flushed file is also hard-linked
    /// (`<data dir>/backups`), None while off.
    backups: RwLock<Option<PathBuf>>,
}

/// How long after the last flush the flush thread frees the spare arena
/// chunks (`memtable::release_spare_chunks`).
const SPARE_CHUNKS_IDLE: Duration = Duration::from_secs(10);

impl Flusher {
    pub fn new(
        db: Arc<Db>,
        tables: Tables,
        log: Arc<CommitLog>,
        dir: PathBuf,
        memtable_bytes: usize,
        space: usize,
    ) -> Flusher {
        Flusher {
            db,
            tables,
            log,
            dir,
            memtable_bytes,
            space,
            wanted: Mutex::new(false),
            cond: Condvar::new(),
            one_at_a_time: Mutex::new(()),
            stop: AtomicBool::new(false),
            held: AtomicBool::new(false),
            files: AtomicU64::new(0),
            last_flush: Mutex::new(Instant::now()),
            failing: AtomicBool::new(false),
            failure: Mutex::new(None),
            backups: RwLock::new(None),
        }
    }

    /// Whether incremental backups are on.
    pub fn backing_up(&self) -> bool {
        read_lock(&self.backups).is_some()
    }

    /// Turns incremental backups on (into `dir`) or off (None).
    pub fn set_backups(&self, dir: Option<PathBuf>) {
        *write_lock(&self.backups) = dir;
    }

    /// With incremental backups on, hard-links a flushed file (before its
    /// ingestion, which moves it into the database without changing it)
    /// into `backups/<keyspace>/<table>-<id>/`, under a name no other flush
    /// of the table takes. A failure is logged; the flush goes on.
    fn back_up(&self, store: &TableStore, path: &std::path::Path, n: u64) {
        let Some(root) = read_lock(&self.backups).clone() else { return };
        let dir = root.join(&store.def.keyspace).join(format!("{}-{}", store.def.name, store.def.id.simple()));
        let millis =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
        let target = dir.join(format!("{}-{millis}-{n}.sst", store.cf_name));
        let linked = std::fs::create_dir_all(&dir).and_then(|()| std::fs::hard_link(path, &target));
        if let Err(e) = linked {
            tracing::error!(table = %store.cf_name, "incremental backup: cannot link {}: {e}", target.display());
        }
    }

    /// Before a write to `store`: refused while flushes fail and the table
    /// already has more than `MAX_FROZEN` memtables waiting (the writer
    /// would wait for a flush that does not come, and memory would grow).
    /// One atomic load while flushes work.
    pub fn admit(&self, store: &TableStore) -> Result<(), StorageError> {
        if !self.failing.load(Ordering::Relaxed) || read_lock(&store.mem).frozen.len() <= MAX_FROZEN {
            return Ok(());
        }
        let failure = lock(&self.failure).clone().unwrap_or_default();
        let e = StorageError::Engine(failure.clone());
        Err(if e.is_out_of_space() {
            StorageError::NoSpace(format!("memtables cannot be flushed: {failure}"))
        } else {
            StorageError::Engine(format!("memtable flushes fail, refusing writes: {failure}"))
        })
    }

    /// Records how the last flush went (`failing`).
    fn flushed(&self, outcome: &Result<(), StorageError>) {
        match outcome {
            Ok(()) => {
                if self.failing.swap(false, Ordering::Relaxed) {
                    *lock(&self.failure) = None;
                }
            }
            Err(e) => {
                *lock(&self.failure) = Some(e.to_string());
                self.failing.store(true, Ordering::Relaxed);
                // Writers waiting for this flush stop waiting (`after_write`).
                self.cond.notify_all();
            }
        }
    }

    /// After a write to `store`: freezes its active memtable when full and,
    /// when too many are waiting to be flushed, waits for the flush thread.
    pub fn after_write(&self, store: &TableStore) {
        if read_lock(&store.mem).active.bytes() >= self.memtable_bytes {
            let froze = {
                let mut mems = write_lock(&store.mem);
                mems.active.bytes() >= self.memtable_bytes && mems.freeze()
            };
            if froze {
                *lock(&self.wanted) = true;
                self.cond.notify_all();
            }
        }
        let too_many = || read_lock(&store.mem).frozen.len() > MAX_FROZEN;
        if !too_many() {
            return;
        }
        let mut wanted = lock(&self.wanted);
        while too_many() && !self.stop.load(Ordering::Relaxed) && !self.failing.load(Ordering::Relaxed) {
            *wanted = true;
            self.cond.notify_all();
            wanted = self
                .cond
                .wait_timeout(wanted, Duration::from_millis(50))
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }

    /// The flush thread's loop, until `stop`.
    pub fn run(&self) {
        // Failed flushes in a row (a full disk fails one a second): logged
        // at the first and then once a minute.
        let mut failures = 0u32;
        let mut logged: Option<Instant> = None;
        while !self.stop.load(Ordering::Relaxed) {
            {
                let mut wanted = lock(&self.wanted);
                if !*wanted {
                    wanted = self
                        .cond
                        .wait_timeout(wanted, Duration::from_millis(100))
                        .map(|(g, _)| g)
                        .unwrap_or_else(|p| p.into_inner().0);
                }
                *wanted = false;
            }
            if self.stop.load(Ordering::Relaxed) {
                break;
            }
            for store in self.stores() {
                if !read_lock(&store.mem).frozen.is_empty() {
                    match self.flush_frozen(&store) {
                        Ok(()) if failures > 0 => {
                            tracing::info!(table = %store.cf_name, "memtable flushed after {failures} failed tries");
                            (failures, logged) = (0, None);
                        }
                        Ok(()) => {}
                        Err(e) => {
                            if logged.is_none_or(|at| at.elapsed() >= Duration::from_secs(60)) {
                                logged = Some(Instant::now());
                                tracing::error!(table = %store.cf_name, failures, "memtable flush failed, will retry: {e}");
                            }
                            failures = failures.saturating_add(1);
                            std::thread::sleep(Duration::from_secs(1));
                        }
                    }
                }
            }
            self.enforce_space();
            if self.log.disk_bytes() > MAX_LOG_BYTES {
                self.flush_oldest();
            }
            if lock(&self.last_flush).elapsed() > SPARE_CHUNKS_IDLE {
                memtable::release_spare_chunks();
            }
        }
    }

    /// Flushes the largest active memtable while all of them together hold
    /// more than `space`.
    fn enforce_space(&self) {
        loop {
            let stores = self.stores();
            let sizes: Vec<usize> = stores.iter().map(|s| read_lock(&s.mem).active.bytes()).collect();
            if sizes.iter().sum::<usize>() <= self.space {
                return;
            }
            let Some(largest) = stores.iter().zip(&sizes).max_by_key(|(_, b)| **b).map(|(s, _)| s) else {
                return;
            };
            tracing::debug!(table = %largest.cf_name, "memtables over memtable_heap_space: flushing the largest");
            if let Err(e) = self.flush_now(largest) {
                tracing::error!(table = %largest.cf_name, "memtable flush failed, will retry: {e}");
                return;
            }
        }
    }

    fn stores(&self) -> Vec<Arc<TableStore>> {
        read_lock(&self.tables).values().cloned().collect()
    }

    /// Freezes `store`'s active memtable and flushes everything frozen, in
    /// this thread.
    pub fn flush_now(&self, store: &TableStore) -> Result<(), StorageError> {
        write_lock(&store.mem).freeze();
        self.flush_frozen(store)
    }

    /// Flushes the tables holding writes of the log's oldest segment, so it
    /// can go.
    fn flush_oldest(&self) {
        let Some(pinned) = self.log.oldest_pinned() else { return };
        for store in self.stores() {
            if read_lock(&store.mem).min_seq().is_some_and(|q| q <= pinned) {
                tracing::info!(table = %store.cf_name, bytes = self.log.disk_bytes(), "commit log over its limit: flushing a table its oldest segment holds");
                if let Err(e) = self.flush_now(&store) {
                    tracing::error!(table = %store.cf_name, "memtable flush failed: {e}");
                }
            }
        }
    }

    /// Flushes `store`'s frozen memtables, oldest first, then lets the log
    /// drop what no memtable needs.
    pub fn flush_frozen(&self, store: &TableStore) -> Result<(), StorageError> {
        let _one = lock(&self.one_at_a_time);
        loop {
            let Some(mem) = read_lock(&store.mem).frozen.first().cloned() else { break };
            let gone = read_lock(&self.tables).get(&store.def.id).is_none_or(|s| s.cf_name != store.cf_name);
            if !gone {
                let written = self.write_and_ingest(store, &mem);
                self.flushed(&written);
                written?;
                self.tune_merges();
            }
            write_lock(&store.mem).frozen.retain(|m| !Arc::ptr_eq(m, &mem));
            *lock(&self.last_flush) = Instant::now();
            self.cond.notify_all();
        }
        // Reservations first (`commitlog`'s invariants): a write released
        // after this read is already in its memtable.
        let reserved = self.log.lowest_reserved();
        let lowest_live = self.stores().iter().filter_map(|s| read_lock(&s.mem).min_seq()).min().unwrap_or(u64::MAX);
        self.log.discard_below(lowest_live.min(reserved));
        Ok(())
    }

    fn write_and_ingest(&self, store: &TableStore, mem: &Memtable) -> Result<(), StorageError> {
        if mem.is_empty() {
            return Ok(());
        }
        let cf = self
            .db
            .cf_handle(&store.cf_name)
            .ok_or_else(|| StorageError::Engine(format!("column family {} is missing", store.cf_name)))?;
        let max_runs =
            if store.full_merge.load(Ordering::Relaxed) { MAX_SORTED_RUNS_MERGED_WHOLE } else { MAX_SORTED_RUNS };
        self.wait_for_compaction(&cf, max_runs);
        std::fs::create_dir_all(&self.dir)?;
        let n = self.files.fetch_add(1, Ordering::Relaxed);
        let path = self.dir.join(format!("{}-{n}.sst", store.cf_name));
        let opts = writer_options();
        let written = (|| -> Result<(), StorageError> {
            let mut writer = SstFileWriter::create(&opts);
            writer.open(&path)?;
            let mut partition = PartitionSizes::new(&store.metrics.partition_size);
            mem.for_each(|k, v| {
                partition.add(k, v.len());
                writer.merge(k, v)
            })?;
            partition.finish();
            writer.finish()?;
            Ok(())
        })();
        if let Err(e) = written {
            // A file cut short (a full disk) goes at once, not at the next
            // open: its memtable is still there and flushes again later.
            let _ = std::fs::remove_file(&path);
            return Err(e);
        }
        let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        self.back_up(store, &path, n);
        let mut ingest = IngestExternalFileOptions::default();
        ingest.set_move_files(true);
        let result = self.db.ingest_external_file_cf_opts(&cf, &ingest, vec![&path]);
        // Moved files are linked into the database; the name here is spare.
        let _ = std::fs::remove_file(&path);
        result?;
        store.metrics.bytes_flushed.fetch_add(bytes, Ordering::Relaxed);
        Ok(())
    }

    /// Merges each size-tiered table whole or in tiers as its live size
    /// says, and sizes RocksDB's compaction pool (`tuning::full_merge`,
    /// `tuning::compaction_threads`). Runs after every flush (a table grows
    /// only then) and when storage opens. The pool is the process's (RocksDB's
    /// default environment): storages opened side by side in one process
    /// (tests) share it, and each sets it after its own flushes.
    pub fn tune_merges(&self) {
        let mut all_full = true;
        for store in self.stores() {
            let Some(cf) = self.db.cf_handle(&store.cf_name) else { continue };
            let live =
                self.db.property_int_value_cf(&cf, "rocksdb.estimate-live-data-size").ok().flatten().unwrap_or(0);
            if store.shape.leveled {
                all_full &= live == 0;
                continue;
            }
            let was = store.full_merge.load(Ordering::Relaxed);
            let now = tuning::full_merge(live, self.memtable_bytes as u64, was);
            if now != was {
                let Some(option) = tuning::merge_options(&store.shape, now) else { continue };
                if let Err(e) = self.db.set_options_cf(&cf, &[(option.0, option.1.as_str())]) {
                    tracing::warn!(table = %store.cf_name, "cannot change how the table is merged: {e}");
                    all_full = false;
                    continue;
                }
                store.full_merge.store(now, Ordering::Relaxed);
                tracing::info!(
                    table = %format!("{}.{}", store.def.keyspace, store.def.name),
                    live_bytes = live,
                    "the table is now {}",
                    if now { "merged whole (it is small)" } else { "merged in size tiers (it outgrew merging whole)" }
                );
            }
            all_full &= now;
        }
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        match rocksdb::Env::new() {
            Ok(mut env) => env.set_low_priority_background_threads(tuning::compaction_threads(all_full, cores)),
            Err(e) => tracing::warn!("cannot size the compaction pool: {e}"),
        }
    }

    /// Stops RocksDB starting compactions of the tables there are now
    /// (`hold`), or lets it start them again; merges already running finish.
    /// While held, flushes do not wait for compaction to catch up.
    pub fn hold_compactions(&self, hold: bool) {
        self.held.store(hold, Ordering::Relaxed);
        let value = if hold { "true" } else { "false" };
        for store in self.stores() {
            let Some(cf) = self.db.cf_handle(&store.cf_name) else { continue };
            if let Err(e) = self.db.set_options_cf(&cf, &[("disable_auto_compactions", value)]) {
                tracing::warn!(table = %store.cf_name, "cannot {} compactions: {e}", if hold { "hold" } else { "resume" });
            }
        }
    }

    fn wait_for_compaction(&self, cf: &impl rocksdb::AsColumnFamilyRef, max_runs: u64) {
        if self.held.load(Ordering::Relaxed) {
            return;
        }
        let start = Instant::now();
        let runs = || self.db.property_int_value_cf(cf, "rocksdb.num-files-at-level0").ok().flatten().unwrap_or(0);
        while runs() > max_runs && start.elapsed() < MAX_COMPACTION_WAIT && !self.stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Options of the files a flush writes: the block format the column
/// families read (bloom filters for point reads), uncompressed like
/// RocksDB's own flushes above the bottommost level (`tuning`).
pub(crate) fn writer_options() -> Options {
    let mut opts = Options::default();
    let mut block = BlockBasedOptions::default();
    block.set_bloom_filter(10.0, false);
    read_blocks(&mut block);
    opts.set_block_based_table_factory(&block);
    opts.set_compression_type(DBCompressionType::None);
    // Write the file out as it grows (sync_file_range every MiB) rather than leave it all dirty in
    // the page cache: gigabytes of flushed or exported files dirtied at once make the kernel
    // throttle every write of the process, the commit log's included.
    opts.set_bytes_per_sync(1 << 20);
    opts
}

/// The data block layout of every table file, flushed or compacted: 16 KiB
/// blocks (Cassandra's default chunk length) with a hash index beside each
/// block's binary search, for point reads. Against RocksDB's 4 KiB blocks
/// without the hash index (and an LRU block cache), a read from files cost
/// 29.6 instead of 36.4 server CPU-us and its p99 fell from 4.2 to 2.5 ms
/// (`bench/ab.py` with `WORKLOADS=write,read`; ARCHITECTURE.md, the life of
/// a read). Each file records its own layout: files written before read on.
pub(crate) fn read_blocks(block: &mut BlockBasedOptions) {
    block.set_block_size(16 << 10);
    block.set_data_block_index_type(rocksdb::DataBlockIndexType::BinaryAndHash);
}

/// Commit log records: the operands of one commit, each
/// `table id (16 bytes) | varint key length | key | varint value length | value`.
pub(crate) fn encode_record<'a>(ops: impl Iterator<Item = (Uuid, &'a [u8], &'a [u8])>, out: &mut Vec<u8>) {
    for (table, key, value) in ops {
        out.extend_from_slice(table.as_bytes());
        varint::put(key.len(), out);
        out.extend_from_slice(key);
        varint::put(value.len(), out);
        out.extend_from_slice(value);
    }
}

/// One operand of a commit log record: table id, key, value.
pub(crate) type RecordOperand<'a> = (Uuid, &'a [u8], &'a [u8]);

/// The operands of a record, or an error naming what is malformed.
pub(crate) fn decode_record(mut input: &[u8]) -> Result<Vec<RecordOperand<'_>>, StorageError> {
    let bad = || StorageError::Invalid("malformed commit log record".into());
    let mut out = Vec::new();
    while !input.is_empty() {
        let (id, rest) = input.split_first_chunk().ok_or_else(bad)?;
        let (key, rest) = length_prefixed(rest).ok_or_else(bad)?;
        let (value, rest) = length_prefixed(rest).ok_or_else(bad)?;
        input = rest;
        out.push((Uuid::from_bytes(*id), key, value));
    }
    Ok(out)
}

/// A varint length and that many bytes at the start of `input`, and the bytes after them.
fn length_prefixed(input: &[u8]) -> Option<(&[u8], &[u8])> {
    let mut pos = 0;
    let len = varint::get(input, &mut pos)?;
    input.get(pos..)?.split_at_checked(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_reject_damage() {
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let big = vec![7u8; 300];
        let ops = vec![(a, &b"k1"[..], &b"v1"[..]), (b, &b""[..], &big[..]), (a, &big[..], &b""[..])];
        let mut buf = Vec::new();
        encode_record(ops.iter().copied(), &mut buf);
        assert_eq!(decode_record(&buf).unwrap(), ops);
        // Cut anywhere: the operands before the cut when it falls between two, else an error.
        for cut in 1..buf.len() {
            let whole = (1..ops.len()).find(|&n| {
                let mut prefix = Vec::new();
                encode_record(ops[..n].iter().copied(), &mut prefix);
                prefix.len() == cut
            });
            match whole {
                Some(n) => assert_eq!(decode_record(&buf[..cut]).unwrap(), ops[..n], "cut at {cut}"),
                None => assert!(decode_record(&buf[..cut]).is_err(), "cut at {cut}"),
            }
        }
        assert!(decode_record(&[]).unwrap().is_empty());
    }
}

/// Sums the bytes of each partition of a sorted stream of entries (keys
/// begin with their partition prefix, `keys`) into a histogram.
struct PartitionSizes<'a> {
    histogram: &'a metrics::Histogram,
    /// The current partition's prefix and its bytes so far.
    prefix: Vec<u8>,
    bytes: u64,
}

impl<'a> PartitionSizes<'a> {
    fn new(histogram: &'a metrics::Histogram) -> Self {
        PartitionSizes { histogram, prefix: Vec::new(), bytes: 0 }
    }

    fn add(&mut self, key: &[u8], value_len: usize) {
        let prefix_len = keys::split_partition(key).map_or(key.len(), |(_, _, rest)| key.len() - rest.len());
        let prefix = key.get(..prefix_len).unwrap_or(key);
        if prefix != self.prefix.as_slice() {
            self.finish();
            self.prefix.clear();
            self.prefix.extend_from_slice(prefix);
        }
        self.bytes += (key.len() + value_len) as u64;
    }

    /// Records the current partition, if any.
    fn finish(&mut self) {
        if self.bytes > 0 {
            self.histogram.record(self.bytes);
            self.bytes = 0;
        }
    }
}

#[cfg(test)]
mod partition_size_tests {
    use super::*;

    #[test]
    fn each_partition_is_recorded_once_with_its_bytes() {
        let h = metrics::Histogram::new();
        let mut sizes = PartitionSizes::new(&h);
        let key = |token: i64, pk: &[u8], rest: &[u8]| {
            let mut k = Vec::new();
            keys::partition_prefix(token, pk, &mut k).unwrap();
            k.extend_from_slice(rest);
            k
        };
        let (a1, a2, b1) = (key(1, b"a", &[3, 1]), key(1, b"a", &[3, 2]), key(2, b"bb", &[3, 1]));
        sizes.add(&a1, 100);
        sizes.add(&a2, 50);
        sizes.add(&b1, 1000);
        sizes.finish();
        let snap = h.snapshot();
        assert_eq!(snap.count, 2);
        assert_eq!(snap.sum, (a1.len() + a2.len() + 150 + b1.len() + 1000) as u64);
    }
}
