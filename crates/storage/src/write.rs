//! The write path: mutations encoded into a `WriteBatch` (`Storage::collect`)
//! and made all at once (`Storage::commit` -> `write`): a commit log sequence
//! number is reserved, one log record is appended and synced as the mode
//! says (`GroupCommit` for `group`), and then the operands are merged into
//! the tables' active memtables. A failed append or sync poisons the engine
//! (except an append that failed for want of space: `StorageError::NoSpace`).
//! While the disk usage guardrail says the disk is full, `collect` refuses
//! writes that add data (`Storage::admit`).
//!
//! Invariants:
//! - A logged write reaches its memtable, and so reads, only after its log
//!   record is appended and synced as the mode says (in `batch` and `group`
//!   mode: durable), as Cassandra logs before it applies; so a value a read
//!   returned once survives a crash. It is acknowledged only after the
//!   commit returns.
//! - A write whose log append or sync failed is answered with the error
//!   (never acknowledged) and never reaches a memtable; its ranges are
//!   marked written (`unrepaired`) all the same, since a record whose sync
//!   failed may still be on disk and come back at replay.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use types::mutation::Mutation;
use uuid::Uuid;

use crate::commitlog::{self, CommitLog};
use crate::engine::{lock, read_lock, CommitlogSync, Storage, TableStore};
use crate::flush::{self};
use crate::keys::{self};
use crate::packed::RowPacker;
use crate::{cell, StorageError};

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
    /// An empty batch. It allocates nothing until a write is collected
    /// into it (then room for a request group's writes at once): most
    /// request groups of a read workload collect none.
    pub fn new() -> WriteBatch {
        WriteBatch::default()
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
        self.write(ops, durable, true)
    }

    /// Encodes `mutations` into `into` for a later [`Storage::commit`], all
    /// or (on an error, a poisoned engine or a refusal of the disk usage
    /// guardrail included) none of them.
    pub fn collect(&self, into: &mut WriteBatch, mutations: &[Mutation]) -> Result<(), StorageError> {
        self.check_poisoned()?;
        self.admit(mutations)?;
        self.encode_into(into, mutations)
    }

    /// Encodes `mutations` into `into`, all or (on an error) none of them.
    fn encode_into(&self, into: &mut WriteBatch, mutations: &[Mutation]) -> Result<(), StorageError> {
        if into.arena.capacity() == 0 && !mutations.is_empty() {
            // Sized for a request group's writes (`WriteBatch::new`).
            into.arena.reserve(4096);
            into.ops.reserve(32);
        }
        let (arena_len, ops_len) = (into.arena.len(), into.ops.len());
        let mut durable = false;
        let WriteBatch { arena, ops, scratch: Scratch { key, value, packer }, .. } = &mut *into;
        let encoded = (|| -> Result<(), StorageError> {
            for m in mutations {
                let store = self.table(&m.table)?;
                durable |= store.durable;
                // Offsets into the arena are u32: a batch past 4 GiB is refused, never recorded wrong.
                let mut too_big = false;
                encode_mutation(&store, m, key, value, packer, |k, v| {
                    let start = arena.len();
                    arena.extend_from_slice(k);
                    arena.extend_from_slice(v);
                    match (u32::try_from(start), u32::try_from(start + k.len()), u32::try_from(arena.len())) {
                        (Ok(k0), Ok(k1), Ok(v1)) => ops.push((m.table, k0, k1, v1)),
                        _ => too_big = true,
                    }
                })?;
                if too_big {
                    return Err(StorageError::Invalid("a write batch may hold at most 4 GiB".into()));
                }
                if !store.def.indexes.is_empty() {
                    let mut entries = Vec::new();
                    crate::index::mutation_entries(&store.def, m, &mut entries);
                    for e in &entries {
                        // An index created or dropped concurrently may not be here yet (or any more).
                        let Ok(index_store) = self.table(&e.table) else { continue };
                        encode_mutation(&index_store, e, key, value, packer, |k, v| {
                            let start = arena.len();
                            arena.extend_from_slice(k);
                            arena.extend_from_slice(v);
                            match (u32::try_from(start), u32::try_from(start + k.len()), u32::try_from(arena.len())) {
                                (Ok(k0), Ok(k1), Ok(v1)) => ops.push((e.table, k0, k1, v1)),
                                _ => too_big = true,
                            }
                        })?;
                    }
                    if too_big {
                        return Err(StorageError::Invalid("a write batch may hold at most 4 GiB".into()));
                    }
                }
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
    /// when the log cannot be written (but for want of space) or a
    /// synchronous fsync fails. Every write goes through here.
    ///
    /// Order (see `commitlog`'s and `memtable`'s invariants): reserve a log
    /// seq, append the log record, sync as the mode says, and only then
    /// merge into the memtables (where reads see the write), bring the
    /// partitions written in the row cache up to them, and release the seq; then (with `mark`) count the writes in their ranges' generations
    /// (`unrepaired`). A write whose log append or sync failed never reaches
    /// a memtable. An unknown table fails the write before anything is made.
    pub(crate) fn write<'a>(
        &self,
        ops: impl Iterator<Item = (Uuid, &'a [u8], &'a [u8])> + Clone,
        durable: bool,
        mark: bool,
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
        for (store, _) in &runs {
            self.flusher.admit(store)?;
        }
        let reservation = durable.then(|| self.log.reserve());
        let seq = reservation.as_ref().map(|r| r.seq);
        let logged = match seq {
            Some(seq) => self.log_and_sync(seq, ops.clone()),
            None => Ok(()),
        };
        if logged.is_ok() {
            // In flight for the row cache from here to `update_cached` (no fill meanwhile).
            self.for_each_cached(&runs, ops.clone(), |table, prefix, _, _| self.row_cache.begin_write(table, prefix));
            let mut rest = ops.clone();
            for (store, n) in &runs {
                let start = std::time::Instant::now();
                let mems = read_lock(&store.mem);
                mems.active.insert(rest.by_ref().take(*n).map(|(_, k, v)| (k, v)), seq);
                drop(mems);
                // One timing per run, each of its rows counted at the run's mean.
                let micros = start.elapsed().as_micros() as u64 / *n as u64;
                store.metrics.write_latency.record_n(micros, *n as u64);
            }
            self.update_cached(&runs, ops.clone());
        }
        drop(reservation);
        if mark {
            // Also after a failed sync: the record may have reached the disk,
            // and a restart would replay it.
            let mut rest = ops;
            for (store, n) in &runs {
                let tokens = rest.by_ref().take(*n).filter_map(|(_, k, _)| k.first_chunk::<8>().copied());
                self.unrepaired.mark(&store.def.id, tokens.map(keys::token_from_bytes));
            }
        }
        logged?;
        for (store, _) in &runs {
            self.flusher.after_write(store);
        }
        Ok(())
    }

    /// Brings the cached partitions (`row_cache`) the operands of `runs`
    /// wrote up to them (or forgets them): after their memtable insert,
    /// before the write is acknowledged; each ends the `begin_write` made
    /// for it before the insert.
    fn update_cached<'a>(
        &self,
        runs: &[(Arc<TableStore>, usize)],
        ops: impl Iterator<Item = (Uuid, &'a [u8], &'a [u8])>,
    ) {
        self.for_each_cached(runs, ops, |table, prefix, key, operand| match &key[prefix.len()..] {
            // The two entries a point read looks up: merged into the cached partition.
            [keys::SECTION_PARTITION_DELETION] | [keys::SECTION_ROWS] => {
                self.row_cache.update(table, prefix, key, operand)
            }
            _ => self.row_cache.invalidate(table, prefix),
        });
    }

    /// Calls `f(cache id, partition prefix, key, operand)` for each operand
    /// of `runs` whose table the row cache holds (no clustering columns),
    /// in order; nothing when the cache is off.
    fn for_each_cached<'a>(
        &self,
        runs: &[(Arc<TableStore>, usize)],
        mut ops: impl Iterator<Item = (Uuid, &'a [u8], &'a [u8])>,
        mut f: impl FnMut(u64, &'a [u8], &'a [u8], &'a [u8]),
    ) {
        if !self.row_cache.enabled() {
            return;
        }
        for (store, n) in runs {
            let run = ops.by_ref().take(*n);
            if !store.layout.clustering.is_empty() {
                // Only tables without clustering columns are cached.
                run.for_each(drop);
                continue;
            }
            for (_, key, operand) in run {
                let Some((_, _, rest)) = keys::split_partition(key) else { continue };
                f(store.cache_id, &key[..key.len() - rest.len()], key, operand);
            }
        }
    }

    /// Appends the record of `ops` to the commit log and syncs it as the
    /// mode says. A failed append poisons the engine unless it failed for
    /// want of space: then the log's next append goes to a new segment (the
    /// torn record ends the old one at replay) and the write fails alone.
    fn log_and_sync<'a>(
        &self,
        seq: u64,
        ops: impl Iterator<Item = (Uuid, &'a [u8], &'a [u8])> + Clone,
    ) -> Result<(), StorageError> {
        // Room for the record header first: the log fills it in place and
        // writes the record as it is (no copy).
        let bytes: usize = ops.clone().map(|(_, k, v)| 16 + 2 * 10 + k.len() + v.len()).sum();
        let mut buf = Vec::with_capacity(commitlog::RECORD_HEADER + bytes);
        buf.resize(commitlog::RECORD_HEADER, 0);
        flush::encode_record(ops, &mut buf);
        if let Err(e) = self.log.append_framed(seq, &mut buf) {
            if e.is_out_of_space() {
                warn_no_space(&e);
                return Err(StorageError::NoSpace(format!("cannot append to the commit log: {}", io_message(&e))));
            }
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
        Ok(())
    }
}

/// Logs a commit log append that failed for want of space: the first, then
/// at most one every 10 s with the number left out (a full disk fails every
/// write).
fn warn_no_space(e: &StorageError) {
    static LAST: AtomicU64 = AtomicU64::new(0);
    static LEFT_OUT: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let last = LAST.load(Ordering::Relaxed);
    if now >= last.saturating_add(10) && LAST.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_ok()
    {
        let left_out = LEFT_OUT.swap(0, Ordering::Relaxed);
        tracing::warn!(left_out, "cannot append to the commit log, the disk is full; writes fail: {e}");
    } else {
        LEFT_OUT.fetch_add(1, Ordering::Relaxed);
    }
}

/// The operating system's message of an I/O error (without the "I/O error" prefix).
fn io_message(e: &StorageError) -> String {
    match e {
        StorageError::Io(io) => io.to_string(),
        other => other.to_string(),
    }
}

pub(crate) fn encode_mutation(
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
        store.markers.add(d.local_deletion_time);
        key.push(keys::SECTION_PARTITION_DELETION);
        value.clear();
        cell::encode_tombstone(d.timestamp, d.local_deletion_time, value);
        put(key, value);
    }
    for rt in &m.range_tombstones {
        store.markers.add(rt.deletion.local_deletion_time);
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
            store.markers.add(d.local_deletion_time);
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
            store.markers.add(d.local_deletion_time);
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

pub(crate) fn poison(slot: &Mutex<Option<String>>, reason: &str) {
    tracing::error!(reason, "commit log sync failed; storage refuses further writes");
    let mut guard = lock(slot);
    if guard.is_none() {
        *guard = Some(reason.to_string());
    }
}

/// Group commit: writers register after their (unsynced) write and wait for
/// the first fsync that *started* after they registered.
#[derive(Default)]
pub(crate) struct GroupCommit {
    state: Mutex<GroupState>,
    cond: Condvar,
}

#[derive(Default)]
pub(crate) struct GroupState {
    /// The epoch new writers join; sealed when an fsync starts.
    open_epoch: u64,
    /// Every epoch up to this one is durable.
    synced_epoch: u64,
    waiting: usize,
}

impl GroupCommit {
    pub(crate) fn wait_synced(
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

    pub(crate) fn wake(&self) {
        self.cond.notify_all();
    }

    pub(crate) fn run(&self, log: &CommitLog, window: Duration, stop: &AtomicBool, poisoned: &Mutex<Option<String>>) {
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
