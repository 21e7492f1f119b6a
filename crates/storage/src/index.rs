//! Secondary indexes, local to each replica (Cassandra's legacy 2i and SAI
//! semantics): each index keeps its entries in a column family of its own,
//! as a hidden table of this engine (`index_table`), so its entries go
//! through the same commit log, memtables, flushes and compactions as any
//! write, and a crash or a replay loses or repeats nothing.
//!
//! Layout of the hidden table: the partition key is the indexed value
//! (prefixed with one byte so an empty value is a key too), the clustering
//! is (base token, base partition key, base clustering), and each entry is a
//! row holding only a row marker. An equality lookup of a value within a
//! token range is one partition read with one clustering slice: a seek.
//!
//! Entries are derived from every mutation written to an indexed table
//! (`Storage::collect`: client writes, hints, batches), from the partitions
//! a raw write touched (read repair, repair pushes), and by a background
//! build over the base table (`CREATE INDEX` on existing data), and for the
//! token span of streamed files once they are ingested (`reindex_span`). They are never deleted: an entry whose value was
//! overwritten or deleted is *stale* and is filtered at read time by reading
//! the base row (the coordinator's reader does that); an entry made from an
//! expiring cell expires with it.
//!
//! Invariants:
//! - Every live indexed value of a base row has an entry, once the index's
//!   build finished (`index_ready`); until then index reads are refused.
//! - An index read returns each base partition at most once, in token order
//!   then key order, and never one outside the requested token range.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::Duration;

use bytes::Bytes;
use types::mutation::{ClusteringBound, Liveness, Mutation, RowWrite};
use types::schema::{
    ClusteringOrder, ColumnDef, ColumnKind, IndexDef, IndexTargetKind, KeyspaceDef, TableDef, TableOptions,
};
use types::CqlType;
use uuid::Uuid;

use crate::engine::{lock, Storage};
use crate::read::{ColumnData, Partition, PartitionRead};
use crate::StorageError;

/// The hidden table that holds an index's entries on this replica.
pub(crate) fn index_table(base: &TableDef, index: &IndexDef) -> TableDef {
    let col = |name: &str, ty: CqlType, kind: ColumnKind, position: u32, id: u16| ColumnDef {
        name: name.to_string(),
        ty,
        kind,
        position,
        order: ClusteringOrder::Asc,
        id,
    };
    TableDef {
        keyspace: base.keyspace.clone(),
        name: format!("{}.{}", base.name, index.name),
        id: index.id,
        columns: vec![
            col("value", CqlType::Blob, ColumnKind::PartitionKey, 0, 0),
            col("token", CqlType::BigInt, ColumnKind::Clustering, 0, 1),
            col("pk", CqlType::Blob, ColumnKind::Clustering, 1, 2),
            col("ck", CqlType::Blob, ColumnKind::Clustering, 2, 3),
        ],
        options: TableOptions { gc_grace_seconds: base.options.gc_grace_seconds, ..TableOptions::default() },
        next_column_id: 4,
        dropped_columns: Default::default(),
        indexes: Vec::new(),
    }
}

/// Every table storage keeps for `keyspaces`: each table, then the hidden
/// tables of its indexes.
pub(crate) fn expand(keyspaces: &[KeyspaceDef]) -> Vec<(&KeyspaceDef, TableDef)> {
    let mut out = Vec::new();
    for ks in keyspaces {
        for t in ks.tables.values() {
            out.push((ks, t.clone()));
            for i in &t.indexes {
                out.push((ks, index_table(t, i)));
            }
        }
    }
    out
}

/// The partition key of a value's entries: a tag byte, then the value.
pub fn entry_key(value: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(value.len() + 1);
    k.push(1);
    k.extend_from_slice(value);
    k
}

/// The token of a value's entries partition (local only: FNV-1a).
pub fn entry_token(value: &[u8]) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in value {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h as i64
}

/// An `entries(m)` index's value: the map key and value, each length-prefixed.
pub fn entry_value(key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + value.len() + 8);
    out.extend_from_slice(&(key.len() as u32).to_be_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(&(value.len() as u32).to_be_bytes());
    out.extend_from_slice(value);
    out
}

/// A base clustering as one blob: each value length-prefixed.
fn encode_clustering(values: &[Bytes]) -> Vec<u8> {
    let mut out = Vec::new();
    for v in values {
        out.extend_from_slice(&(v.len() as u32).to_be_bytes());
        out.extend_from_slice(v);
    }
    out
}

/// The components of a partition key (CompositeType form when the key has
/// more than one column).
fn key_components(key: &[u8], n: usize) -> Option<Vec<&[u8]>> {
    if n <= 1 {
        return Some(vec![key]);
    }
    let mut out = Vec::with_capacity(n);
    let mut rest = key;
    while !rest.is_empty() {
        let (len, tail) = rest.split_first_chunk::<2>()?;
        let len = u16::from_be_bytes(*len) as usize;
        let (value, tail) = tail.split_at_checked(len)?;
        out.push(value);
        rest = tail.get(1..)?;
    }
    (out.len() == n).then_some(out)
}

/// Largest indexed value kept (a partition key of the hidden table).
const MAX_VALUE: usize = 65_000;

/// One index entry to write: (value, base clustering, liveness).
struct Entry {
    value: Vec<u8>,
    clustering: Vec<u8>,
    liveness: Liveness,
}

/// What a base row holds of one column, as the index sees it.
enum Cells<'a> {
    /// A simple cell (or frozen collection): value, timestamp, ttl, expiry.
    Simple(&'a [u8], i64, i32, i32),
    /// The elements of a non-frozen collection.
    Complex(Vec<Element<'a>>),
}

/// One element of a non-frozen collection: (path, value, timestamp, ttl, expiry).
type Element<'a> = (&'a [u8], &'a [u8], i64, i32, i32);

/// The base row an entry points at.
struct BaseRow<'a> {
    pk: &'a [u8],
    clustering: &'a [Bytes],
    is_static: bool,
    /// The row's newest timestamp (for the entries of key columns).
    ts: Option<i64>,
}

/// The entries of one index for one base row.
fn row_entries(
    table: &TableDef,
    index: &IndexDef,
    column: &ColumnDef,
    row: BaseRow<'_>,
    cells: Option<Cells<'_>>,
    out: &mut Vec<Entry>,
) {
    let BaseRow { pk, clustering, is_static, ts: row_ts } = row;
    let plain = |ts: i64| Liveness { timestamp: ts, ttl: 0, local_expiration: 0 };
    let ck = if is_static { Vec::new() } else { encode_clustering(clustering) };
    match column.kind {
        ColumnKind::PartitionKey => {
            let Some(ts) = row_ts else { return };
            let Some(parts) = key_components(pk, table.partition_key_len()) else { return };
            let Some(v) = parts.get(column.position as usize) else { return };
            out.push(Entry { value: v.to_vec(), clustering: Vec::new(), liveness: plain(ts) });
        }
        ColumnKind::Clustering => {
            let (Some(ts), false) = (row_ts, is_static) else { return };
            let Some(v) = clustering.get(column.position as usize) else { return };
            out.push(Entry { value: v.to_vec(), clustering: ck, liveness: plain(ts) });
        }
        ColumnKind::Regular | ColumnKind::Static => {
            let live = |ts, ttl, exp| Liveness { timestamp: ts, ttl, local_expiration: exp };
            match (index.target, cells) {
                (IndexTargetKind::Simple | IndexTargetKind::Full, Some(Cells::Simple(v, ts, ttl, exp))) => {
                    out.push(Entry { value: v.to_vec(), clustering: ck, liveness: live(ts, ttl, exp) });
                }
                (target, Some(Cells::Complex(elements))) => {
                    let is_set = matches!(column.ty, CqlType::Set { .. });
                    for (path, v, ts, ttl, exp) in elements {
                        let value = match target {
                            IndexTargetKind::Values if is_set => path.to_vec(),
                            IndexTargetKind::Values => v.to_vec(),
                            IndexTargetKind::Keys => path.to_vec(),
                            IndexTargetKind::Entries => entry_value(path, v),
                            _ => continue,
                        };
                        out.push(Entry { value, clustering: ck.clone(), liveness: live(ts, ttl, exp) });
                    }
                }
                _ => {}
            }
        }
    }
}

/// Turns entries into mutations of the index's hidden table.
fn entry_mutations(index: Uuid, token: i64, pk: &[u8], entries: Vec<Entry>, out: &mut Vec<Mutation>) {
    for e in entries {
        if e.value.len() > MAX_VALUE {
            continue;
        }
        let mut m = Mutation::new(index, entry_token(&e.value), Bytes::from(entry_key(&e.value)));
        m.rows.push(RowWrite {
            clustering: vec![
                Bytes::copy_from_slice(&token.to_be_bytes()),
                Bytes::copy_from_slice(pk),
                Bytes::from(e.clustering),
            ],
            marker: Some(e.liveness),
            ..RowWrite::default()
        });
        out.push(m);
    }
}

/// The index entries a base mutation makes (none for deletions: stale
/// entries are filtered at read time).
pub(crate) fn mutation_entries(table: &TableDef, m: &Mutation, out: &mut Vec<Mutation>) {
    for index in &table.indexes {
        let Some(column) = table.column(&index.column) else { continue };
        let mut entries = Vec::new();
        for row in &m.rows {
            let row_ts = row
                .cells
                .iter()
                .filter(|c| c.value.is_some())
                .map(|c| c.timestamp)
                .chain(row.marker.map(|l| l.timestamp))
                .max();
            let cells = match column.kind {
                ColumnKind::Regular | ColumnKind::Static if row.is_static == (column.kind == ColumnKind::Static) => {
                    let mine = row.cells.iter().filter(|c| c.column == column.id);
                    if matches!(index.target, IndexTargetKind::Simple | IndexTargetKind::Full) {
                        mine.filter(|c| c.path.is_none())
                            .filter_map(|c| {
                                c.value.as_deref().map(|v| Cells::Simple(v, c.timestamp, c.ttl, c.local_deletion_time))
                            })
                            .last()
                    } else {
                        let elements: Vec<_> = mine
                            .filter_map(|c| match (&c.path, &c.value) {
                                (Some(p), Some(v)) => Some((&p[..], &v[..], c.timestamp, c.ttl, c.local_deletion_time)),
                                _ => None,
                            })
                            .collect();
                        (!elements.is_empty()).then_some(Cells::Complex(elements))
                    }
                }
                ColumnKind::Regular | ColumnKind::Static => continue,
                _ => None,
            };
            let base =
                BaseRow { pk: &m.partition_key, clustering: &row.clustering, is_static: row.is_static, ts: row_ts };
            row_entries(table, index, column, base, cells, &mut entries);
        }
        entry_mutations(index.id, m.token, &m.partition_key, entries, out);
    }
}

/// The index entries of a partition as read (live data only), for the
/// indexes `only` names (all when `None`).
pub(crate) fn partition_entries(table: &TableDef, p: &Partition, only: Option<&Uuid>, out: &mut Vec<Mutation>) {
    let rows = p.static_row.iter().map(|r| (r, true)).chain(p.rows.iter().map(|r| (r, false)));
    for index in table.indexes.iter().filter(|i| only.is_none_or(|id| *id == i.id)) {
        let Some(column) = table.column(&index.column) else { continue };
        let mut entries = Vec::new();
        for (row, is_static) in rows.clone() {
            let row_ts = row
                .columns
                .iter()
                .flat_map(|(_, d)| match d {
                    ColumnData::Simple(c) => vec![c.timestamp],
                    ColumnData::Complex(e) => e.iter().map(|(_, c)| c.timestamp).collect(),
                })
                .chain(row.marker.map(|l| l.timestamp))
                .max();
            let cells = match row.column(column.id) {
                Some(ColumnData::Simple(c)) => Some(Cells::Simple(&c.value, c.timestamp, c.ttl, c.local_expiration)),
                Some(ColumnData::Complex(e)) => Some(Cells::Complex(
                    e.iter().map(|(p, c)| (&p[..], &c.value[..], c.timestamp, c.ttl, c.local_expiration)).collect(),
                )),
                None => None,
            };
            if matches!(column.kind, ColumnKind::Regular | ColumnKind::Static)
                && is_static != (column.kind == ColumnKind::Static)
            {
                continue;
            }
            let clustering: Vec<Bytes> = row.clustering.iter().map(|c| Bytes::copy_from_slice(c)).collect();
            let base = BaseRow { pk: &p.key, clustering: &clustering, is_static, ts: row_ts };
            row_entries(table, index, column, base, cells, &mut entries);
        }
        entry_mutations(index.id, p.token, &p.key, entries, out);
    }
}

/// An index lookup on one replica: the base partitions holding `value`
/// within `[start_token, end_token]`, after `after_key` at `start_token`.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexScan {
    pub index: Uuid,
    /// The indexed value (for `entries()`, `entry_value(key, value)`).
    pub value: Vec<u8>,
    pub start_token: i64,
    pub after_key: Option<Vec<u8>>,
    pub end_token: i64,
    pub partition_limit: usize,
    /// Seconds since the epoch: entries expired by then are not returned.
    pub now: i32,
}

/// Background index work: builds of new indexes (and rebuilds after streams).
#[derive(Default)]
pub(crate) struct IndexJobs {
    queue: Mutex<VecDeque<Job>>,
    wake: Condvar,
    /// Indexes whose build has not finished: not queryable.
    pub(crate) building: Mutex<HashSet<Uuid>>,
    started: Mutex<bool>,
}

#[derive(Clone, Debug)]
struct Job {
    table: Uuid,
    index: Uuid,
}

fn built_key(index: &Uuid) -> String {
    format!("index_built.{}", index.simple())
}

const BUILD_BATCH: usize = 256;

impl Storage {
    /// Whether an index can answer queries here (its build finished).
    pub fn index_ready(&self, index: &Uuid) -> bool {
        !lock(&self.index_jobs.building).contains(index)
    }

    /// Queues builds for the indexes of `keyspaces` not built yet on this
    /// replica (new ones, or ones whose build a restart interrupted).
    pub(crate) fn queue_index_builds(&self, keyspaces: &[KeyspaceDef]) {
        for ks in keyspaces {
            for t in ks.tables.values() {
                for i in &t.indexes {
                    if self.local_get(&built_key(&i.id)).is_some() || lock(&self.index_jobs.building).contains(&i.id) {
                        continue;
                    }
                    lock(&self.index_jobs.building).insert(i.id);
                    self.push_job(Job { table: t.id, index: i.id });
                }
            }
        }
    }

    fn push_job(&self, job: Job) {
        lock(&self.index_jobs.queue).push_back(job);
        self.index_jobs.wake.notify_all();
    }

    /// Starts the thread that runs index builds (once; it holds the engine
    /// only while it works, and ends when the engine is dropped).
    pub fn start_index_builder(self: &Arc<Self>) {
        {
            let mut started = lock(&self.index_jobs.started);
            if *started {
                return;
            }
            *started = true;
        }
        let weak: Weak<Storage> = Arc::downgrade(self);
        let jobs = Arc::clone(&self.index_jobs);
        let spawned = std::thread::Builder::new().name("index-build".into()).spawn(move || loop {
            let job = {
                let mut queue = lock(&jobs.queue);
                match queue.pop_front() {
                    Some(j) => j,
                    None => {
                        let (q, _) = jobs
                            .wake
                            .wait_timeout(queue, Duration::from_millis(500))
                            .unwrap_or_else(|e| e.into_inner());
                        drop(q);
                        if weak.strong_count() == 0 {
                            return;
                        }
                        continue;
                    }
                }
            };
            let Some(storage) = weak.upgrade() else { return };
            if storage.stop.load(std::sync::atomic::Ordering::Relaxed) {
                return;
            }
            storage.run_build(&job);
        });
        if let Err(e) = spawned {
            tracing::error!("cannot start the index build thread: {e}");
        }
    }

    fn run_build(&self, job: &Job) {
        let started = std::time::Instant::now();
        let name = self
            .table(&job.table)
            .ok()
            .and_then(|s| {
                s.def.indexes.iter().find(|i| i.id == job.index).map(|i| format!("{}.{}", s.def.keyspace, i.name))
            })
            .unwrap_or_else(|| job.index.to_string());
        tracing::info!(index = %name, "index build started");
        match self.build(job, &name) {
            Ok(Some(partitions)) => {
                if let Err(e) = self.local_set(&built_key(&job.index), "1") {
                    tracing::warn!(index = %name, "cannot record the index as built: {e}");
                }
                lock(&self.index_jobs.building).remove(&job.index);
                tracing::info!(index = %name, partitions, elapsed_ms = started.elapsed().as_millis() as u64, "index build finished");
            }
            Ok(None) => {
                lock(&self.index_jobs.building).remove(&job.index);
                tracing::info!(index = %name, "index build stopped: the index or its table is gone");
            }
            Err(e) => {
                tracing::error!(index = %name, "index build failed: {e}; it is tried again");
                std::thread::sleep(Duration::from_secs(1));
                self.push_job(job.clone());
            }
        }
    }

    /// Indexes every partition of the job's table. `None` when the index or
    /// the table went away (or the engine stops) meanwhile.
    fn build(&self, job: &Job, name: &str) -> Result<Option<u64>, StorageError> {
        self.index_range(&job.table, Some(&job.index), (i64::MIN, i64::MAX), name)
    }

    /// Writes the entries of every partition of `table` in the inclusive
    /// token range `span`, for index `only` (every index of the table when
    /// `None`). `None` when the table or the index went away (or the engine
    /// stops) meanwhile.
    fn index_range(
        &self,
        table: &Uuid,
        only: Option<&Uuid>,
        span: (i64, i64),
        name: &str,
    ) -> Result<Option<u64>, StorageError> {
        let mut after: Option<(i64, Vec<u8>)> = None;
        let mut done = 0u64;
        let mut last_log = std::time::Instant::now();
        loop {
            if self.stop.load(std::sync::atomic::Ordering::Relaxed) {
                return Ok(None);
            }
            let Ok(store) = self.table(table) else { return Ok(None) };
            if let Some(index) = only {
                if !store.def.indexes.iter().any(|i| i.id == *index) || self.table(index).is_err() {
                    return Ok(None);
                }
            }
            let (start_token, after_key) = match &after {
                Some((t, k)) => (*t, Some(k.clone())),
                None => (span.0, None),
            };
            let now = now_seconds();
            let scan = crate::ScanRange {
                table: *table,
                start_token,
                after_key,
                end_token: span.1,
                partition_limit: BUILD_BATCH,
                per_partition: PartitionRead::whole(*table, now),
                row_limit: usize::MAX,
            };
            let keys = self.scan_keys(&scan)?;
            if keys.is_empty() {
                return Ok(Some(done));
            }
            let mut mutations = Vec::new();
            for (token, key) in &keys {
                let mut read = PartitionRead::whole(*table, now);
                read.token = *token;
                read.partition_key = key.clone();
                if let Some(p) = self.read_partition(&read)? {
                    partition_entries(&store.def, &p, only, &mut mutations);
                }
            }
            if !mutations.is_empty() {
                self.apply(&mutations)?;
            }
            done += keys.len() as u64;
            after = keys.last().cloned();
            if last_log.elapsed() >= Duration::from_secs(10) {
                tracing::info!(index = %name, partitions = done, "index build in progress");
                last_log = std::time::Instant::now();
            }
        }
    }

    /// After files were ingested into `table` (a stream): writes the index
    /// entries of the token span they cover, before the stream counts as
    /// received (as Cassandra builds indexes of streamed sstables).
    pub(crate) fn reindex_span(&self, table: &Uuid, span: (i64, i64)) -> Result<(), StorageError> {
        let name = format!("{table} (streamed)");
        let started = std::time::Instant::now();
        if let Some(partitions) = self.index_range(table, None, span, &name)? {
            tracing::info!(table = %table, partitions, elapsed_ms = started.elapsed().as_millis() as u64, "indexed streamed data");
        }
        Ok(())
    }

    /// Indexes the partitions a raw write touched (read repair, repair
    /// pushes): reads each back and writes the entries of its live data.
    pub(crate) fn reindex_partitions(&self, table: &Uuid, partitions: &[(i64, Vec<u8>)]) -> Result<(), StorageError> {
        let store = self.table(table)?;
        if store.def.indexes.is_empty() {
            return Ok(());
        }
        let now = now_seconds();
        let mut mutations = Vec::new();
        for (token, key) in partitions {
            let mut read = PartitionRead::whole(*table, now);
            read.token = *token;
            read.partition_key = key.clone();
            if let Some(p) = self.read_partition(&read)? {
                partition_entries(&store.def, &p, None, &mut mutations);
            }
        }
        if mutations.is_empty() {
            return Ok(());
        }
        self.apply(&mutations)
    }

    /// The base partitions (token, key) whose entries of `scan.value` lie in
    /// the scan's token range, in token order, at most `partition_limit`.
    /// Refused while the index is building.
    pub fn index_keys(&self, scan: &IndexScan) -> Result<Vec<(i64, Vec<u8>)>, StorageError> {
        if !self.index_ready(&scan.index) {
            return Err(StorageError::Invalid(INDEX_NOT_AVAILABLE.to_string()));
        }
        let token_bound = |t: i64| Bytes::copy_from_slice(&t.to_be_bytes());
        let mut start = match &scan.after_key {
            Some(k) => ClusteringBound {
                prefix: vec![token_bound(scan.start_token), Bytes::copy_from_slice(k)],
                inclusive: false,
            },
            None => ClusteringBound { prefix: vec![token_bound(scan.start_token)], inclusive: true },
        };
        let end = ClusteringBound { prefix: vec![token_bound(scan.end_token)], inclusive: true };
        let mut out: Vec<(i64, Vec<u8>)> = Vec::new();
        if scan.start_token > scan.end_token || scan.partition_limit == 0 {
            return Ok(out);
        }
        let batch = scan.partition_limit.saturating_add(1).clamp(16, 4096);
        loop {
            let read = PartitionRead {
                table: scan.index,
                token: entry_token(&scan.value),
                partition_key: entry_key(&scan.value),
                ranges: vec![(start.clone(), end.clone())],
                reversed: false,
                include_static: false,
                row_limit: batch,
                now: scan.now,
            };
            let Some(p) = self.read_partition(&read)? else { return Ok(out) };
            let fetched = p.rows.len();
            for row in &p.rows {
                let (Some(t), Some(k)) = (row.clustering.first(), row.clustering.get(1)) else { continue };
                let Ok(t) = <[u8; 8]>::try_from(t.as_slice()) else { continue };
                let key = (i64::from_be_bytes(t), k.clone());
                if out.last() != Some(&key) {
                    if out.len() >= scan.partition_limit {
                        return Ok(out);
                    }
                    out.push(key);
                }
            }
            match out.last() {
                Some((t, k)) if fetched >= batch => {
                    start =
                        ClusteringBound { prefix: vec![token_bound(*t), Bytes::copy_from_slice(k)], inclusive: false };
                }
                _ => return Ok(out),
            }
        }
    }
}

/// What a replica answers an index read while the index is building
/// (Cassandra's `RequestFailureReason.INDEX_NOT_AVAILABLE`).
pub const INDEX_NOT_AVAILABLE: &str = "INDEX_NOT_AVAILABLE";

fn now_seconds() -> i32 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn composite_keys_split_into_components() {
        let key = [0u8, 1, 7, 0, 0, 2, 8, 9, 0];
        assert_eq!(key_components(&key, 2), Some(vec![&[7u8][..], &[8, 9][..]]));
        assert_eq!(key_components(&key[..5], 2), None);
        assert_eq!(key_components(b"abc", 1), Some(vec![&b"abc"[..]]));
    }

    #[test]
    fn entry_keys_and_values_are_injective() {
        assert_eq!(entry_key(b""), vec![1]);
        assert_ne!(entry_value(b"ab", b"c"), entry_value(b"a", b"bc"));
        assert_eq!(entry_token(b"x"), entry_token(b"x"));
    }
}
