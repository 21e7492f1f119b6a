//! The read path: one partition's slices, and scans over token ranges.
//! Deletions and TTLs are applied here, so callers see only live data.
//!
//! One traversal (`traverse`) reads a partition through a `Cursor`: the
//! RocksDB iterator for `read_partition` and `scan`, an in-memory sorted slice
//! for raw partitions (`raw`: a raw read records every entry the traversal
//! uses, and resolving a raw partition replays the traversal over its cells).

use rocksdb::{DBRawIteratorWithThreadMode, ReadOptions};
use types::mutation::{ClusteringBound, DeletionTime, Liveness};
use uuid::Uuid;

use crate::cell::CellRef;
use crate::engine::{read_lock, Db, Storage, TableStore};
use crate::keys::{self, ColumnPart};
use crate::memtable::{merge_values, MemCursor, MergeCursor};
use crate::packed::Unpacked;
use crate::row_cache::Lookup;
use crate::StorageError;

/// A stored (key, merged value) pair.
pub(crate) type StoredEntry = (Vec<u8>, Vec<u8>);

/// A live cell as read.
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    pub value: Vec<u8>,
    pub timestamp: i64,
    /// 0 when the cell does not expire.
    pub ttl: i32,
    /// Expiry in seconds since the epoch when `ttl > 0`.
    pub local_expiration: i32,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ColumnData {
    Simple(Cell),
    /// Elements of a non-frozen collection, in element order: (path, cell).
    Complex(Vec<(Vec<u8>, Cell)>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Serialized clustering values (empty for the static row).
    pub clustering: Vec<Vec<u8>>,
    pub marker: Option<Liveness>,
    /// Live columns, by column id.
    pub columns: Vec<(u16, ColumnData)>,
}

impl Row {
    pub fn column(&self, id: u16) -> Option<&ColumnData> {
        self.columns.iter().find(|(c, _)| *c == id).map(|(_, d)| d)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Partition {
    pub token: i64,
    pub key: Vec<u8>,
    pub static_row: Option<Row>,
    pub rows: Vec<Row>,
}

/// What to read from one partition.
#[derive(Clone, Debug)]
pub struct PartitionRead {
    pub table: Uuid,
    pub token: i64,
    pub partition_key: Vec<u8>,
    /// Clustering slices in clustering order; empty means the whole partition.
    pub ranges: Vec<(ClusteringBound, ClusteringBound)>,
    pub reversed: bool,
    pub include_static: bool,
    /// Stop after this many live rows.
    pub row_limit: usize,
    /// Seconds since the epoch, for TTL expiry.
    pub now: i32,
}

impl PartitionRead {
    /// A read of every row of a partition of `table` (token and key left to fill in), as of `now`.
    pub fn whole(table: Uuid, now: i32) -> PartitionRead {
        PartitionRead {
            table,
            token: 0,
            partition_key: Vec::new(),
            ranges: Vec::new(),
            reversed: false,
            include_static: true,
            row_limit: usize::MAX,
            now,
        }
    }
}

/// A scan over partitions in token order.
#[derive(Clone, Debug)]
pub struct ScanRange {
    pub table: Uuid,
    /// Start here (inclusive token) ...
    pub start_token: i64,
    /// ... but strictly after this partition key at `start_token`, when set (paging).
    pub after_key: Option<Vec<u8>>,
    /// Inclusive end token.
    pub end_token: i64,
    pub partition_limit: usize,
    /// Rows per partition (PER PARTITION LIMIT), and clustering slices applied to each.
    pub per_partition: PartitionRead,
    /// Total live rows across partitions.
    pub row_limit: usize,
}

struct Header {
    partition_deletion: Option<i64>,
    ranges: Vec<keys::RangeDeletion>,
}

impl Header {
    fn shadowing(&self, row: &[u8]) -> i64 {
        let mut max = self.partition_deletion.unwrap_or(i64::MIN);
        for (s, si, e, ei, ts) in &self.ranges {
            if keys::bound_start_admits(s, *si, row) && keys::bound_end_admits(e, *ei, row) {
                max = max.max(*ts);
            }
        }
        max
    }
}

impl Storage {
    /// Reads one partition; `None` when it holds no live data in the slices.
    pub fn read_partition(&self, read: &PartitionRead) -> Result<Option<Partition>, StorageError> {
        let store = self.table(&read.table)?;
        let start = std::time::Instant::now();
        let mut scanned = Scanned::default();
        let cf = self.cf(&store)?;
        let hit = std::cell::Cell::new(false);
        let out = traverse(
            &store,
            read,
            |lower, upper| self.cells_via_cache(&store, &cf, lower, upper, Some(&hit)),
            &mut scanned,
        );
        // A partition the row cache answered went through no SSTable (Cassandra counts a row cache hit so).
        scanned.sstables = if hit.get() { 0 } else { self.partition_files(&store, read) };
        scanned.record(&store, start);
        out
    }

    /// The table's SSTables whose key range meets the partition `read` reads
    /// (`partition_range`): those its cursor goes through (`spans`). 0 when
    /// the partition's keys cannot be made (the read failed on that already).
    pub(crate) fn partition_files(&self, store: &TableStore, read: &PartitionRead) -> u64 {
        let Ok((_, lower, upper)) = partition_range(read) else { return 0 };
        self.spans.count(&store.cf_name, &lower, &upper, || {
            let files = self.db.live_files().ok()?;
            Some(
                files
                    .into_iter()
                    .filter_map(|f| Some((f.column_family_name, f.level, f.start_key?, f.end_key?)))
                    .collect(),
            )
        })
    }

    fn read_partition_in(&self, store: &TableStore, read: &PartitionRead) -> Result<Option<Partition>, StorageError> {
        let cf = self.cf(store)?;
        traverse(store, read, |lower, upper| self.cells(store, &cf, lower, upper), &mut ())
    }

    /// Scans partitions in token order within `[start_token, end_token]`.
    pub fn scan(&self, scan: &ScanRange) -> Result<Vec<Partition>, StorageError> {
        let store = self.table(&scan.table)?;
        let _timer = metrics::Timer::start(&store.metrics.range_latency);
        let cf = self.cf(&store)?;
        let mut lower = keys::token_bytes(scan.start_token).to_vec();
        if let Some(after) = &scan.after_key {
            let mut prefix = Vec::new();
            keys::partition_prefix(scan.start_token, after, &mut prefix)?;
            match keys::prefix_successor(&prefix) {
                Some(s) => lower = s,
                None => return Ok(Vec::new()),
            }
        }
        let upper = match keys::prefix_successor(&keys::token_bytes(scan.end_token)) {
            Some(u) => u,
            None => vec![0xFF; 9],
        };
        let mut out = Vec::new();
        let mut rows_total = 0usize;
        let mut next = lower;
        while out.len() < scan.partition_limit && rows_total < scan.row_limit {
            let (token, pk) = {
                let mut it = self.cursor(&store, &cf, next.clone(), upper.clone());
                it.seek_to_first();
                if !it.valid() {
                    it.status()?;
                    break;
                }
                let Some(k) = it.key() else { break };
                let Some((token, pk, _)) = keys::split_partition(k) else { break };
                (token, pk.to_vec())
            };
            let mut read = scan.per_partition.clone();
            read.token = token;
            read.partition_key = pk.clone();
            read.row_limit = read.row_limit.min(scan.row_limit - rows_total);
            if let Some(p) = self.read_partition_in(&store, &read)? {
                rows_total += p.rows.len().max(usize::from(p.static_row.is_some()));
                out.push(p);
            }
            let mut prefix = Vec::new();
            keys::partition_prefix(token, &pk, &mut prefix)?;
            match keys::prefix_successor(&prefix) {
                Some(s) => next = s,
                None => break,
            }
        }
        Ok(out)
    }

    /// The partitions (token, key) within `[start_token, end_token]`, in
    /// token order, after `after_key` at `start_token` when set; at most
    /// `partition_limit` of them. Partitions may hold only deleted data.
    pub fn scan_keys(&self, scan: &ScanRange) -> Result<Vec<(i64, Vec<u8>)>, StorageError> {
        let store = self.table(&scan.table)?;
        let _timer = metrics::Timer::start(&store.metrics.range_latency);
        let cf = self.cf(&store)?;
        let mut next = keys::token_bytes(scan.start_token).to_vec();
        if let Some(after) = &scan.after_key {
            let mut prefix = Vec::new();
            keys::partition_prefix(scan.start_token, after, &mut prefix)?;
            match keys::prefix_successor(&prefix) {
                Some(s) => next = s,
                None => return Ok(Vec::new()),
            }
        }
        let upper = keys::prefix_successor(&keys::token_bytes(scan.end_token)).unwrap_or_else(|| vec![0xFF; 9]);
        let mut out = Vec::new();
        let mut it = self.cursor(&store, &cf, next.clone(), upper);
        it.seek_to_first();
        while out.len() < scan.partition_limit && it.valid() {
            let Some(k) = it.key() else { break };
            let Some((token, pk, _)) = keys::split_partition(k) else { break };
            let pk = pk.to_vec();
            let mut prefix = Vec::new();
            keys::partition_prefix(token, &pk, &mut prefix)?;
            out.push((token, pk));
            match keys::prefix_successor(&prefix) {
                Some(s) => it.seek(&s),
                None => break,
            }
        }
        it.status()?;
        Ok(out)
    }

    /// The cell entries of one partition, `[lower, upper)` (`traverse`'s
    /// bounds): packed rows shown as the cells they hold (`packed::Unpacked`).
    ///
    /// A partition of a table without clustering columns can hold only its
    /// deletion and one row (no static columns, no range tombstones), so it
    /// is read with two point lookups, which bloom filters answer for most
    /// files, instead of an iterator that seeks into every file.
    pub(crate) fn cells<'a>(
        &'a self,
        store: &'a TableStore,
        cf: &impl rocksdb::AsColumnFamilyRef,
        lower: Vec<u8>,
        upper: Vec<u8>,
    ) -> Result<Unpacked<'a, Box<dyn Cursor + 'a>>, StorageError> {
        self.cells_via_cache(store, cf, lower, upper, None)
    }

    /// `cells`, through the row cache for a partition of a cached table
    /// (`row_cache`) when `hit` is given: it is set when the cache answered.
    pub(crate) fn cells_via_cache<'a>(
        &'a self,
        store: &'a TableStore,
        cf: &impl rocksdb::AsColumnFamilyRef,
        lower: Vec<u8>,
        upper: Vec<u8>,
        hit: Option<&std::cell::Cell<bool>>,
    ) -> Result<Unpacked<'a, Box<dyn Cursor + 'a>>, StorageError> {
        let point = store.layout.clustering.is_empty() && lower.last() == Some(&keys::SECTION_PARTITION_DELETION);
        let inner: Box<dyn Cursor + 'a> = if point {
            let prefix = &lower[..lower.len() - 1];
            let lookup = match hit {
                Some(_) if store.row_cached => self.row_cache.get(store.cache_id, prefix),
                _ => Lookup::Off,
            };
            match lookup {
                Lookup::Hit(entries) => {
                    if let Some(hit) = hit {
                        hit.set(true);
                    }
                    Box::new(SliceCursor::new(entries, &lower, &upper))
                }
                Lookup::Miss(ticket) => {
                    let entries = self.point_entries(store, cf, prefix)?;
                    self.row_cache.fill(ticket, &entries);
                    Box::new(SliceCursor::new(entries, &lower, &upper))
                }
                Lookup::Off => Box::new(SliceCursor::new(self.point_entries(store, cf, prefix)?, &lower, &upper)),
            }
        } else {
            self.cursor(store, cf, lower, upper)
        };
        Ok(Unpacked::new(inner, &store.layout))
    }

    /// Every stored entry of the partition `prefix` of a table without
    /// clustering columns (its partition deletion and its row), merged over
    /// the memtables and RocksDB: two point lookups in one `MultiGet`.
    fn point_entries(
        &self,
        store: &TableStore,
        cf: &impl rocksdb::AsColumnFamilyRef,
        prefix: &[u8],
    ) -> Result<Vec<StoredEntry>, StorageError> {
        let keys = [with_section(prefix, keys::SECTION_PARTITION_DELETION), with_section(prefix, keys::SECTION_ROWS)];
        // Memtables before RocksDB (see `memtable`).
        let mems = read_lock(&store.mem).live();
        let mut found = Vec::with_capacity(2);
        let values = self.db.batched_multi_get_cf(cf, &keys, true);
        for (key, value) in keys.into_iter().zip(values) {
            let stored = value?;
            let operands: Vec<Vec<u8>> = mems.iter().filter_map(|m| m.get(&key)).collect();
            let merged = match (stored, operands.is_empty()) {
                (None, true) => None,
                (Some(v), true) => Some(v.to_vec()),
                (stored, false) => merge_values(&key, stored.as_deref(), operands.iter().map(Vec::as_slice)),
            };
            if let Some(v) = merged {
                found.push((key, v));
            }
        }
        Ok(found)
    }

    /// A cursor over the table's entries in `[lower, upper)`: its memtables
    /// and its column family merged, or the column family's iterator alone
    /// when no memtable holds anything.
    pub(crate) fn cursor<'a>(
        &'a self,
        store: &TableStore,
        cf: &impl rocksdb::AsColumnFamilyRef,
        lower: Vec<u8>,
        upper: Vec<u8>,
    ) -> Box<dyn Cursor + 'a> {
        self.cursor_with(store, cf, lower, upper, true)
    }

    /// `cursor`, saying whether the blocks it reads from files enter the
    /// block cache (`fill_cache`: false for a scan of much data read once,
    /// such as a stream's export).
    pub(crate) fn cursor_with<'a>(
        &'a self,
        store: &TableStore,
        cf: &impl rocksdb::AsColumnFamilyRef,
        lower: Vec<u8>,
        upper: Vec<u8>,
        fill_cache: bool,
    ) -> Box<dyn Cursor + 'a> {
        // Memtables before RocksDB (see `memtable`).
        let mems = read_lock(&store.mem).live();
        let mut kids: Vec<Box<dyn Cursor + 'a>> =
            mems.into_iter().map(|m| Box::new(MemCursor::new(m, &lower, &upper)) as Box<dyn Cursor + 'a>).collect();
        let mut opts = ReadOptions::default();
        opts.fill_cache(fill_cache);
        opts.set_iterate_lower_bound(lower);
        opts.set_iterate_upper_bound(upper);
        let stored: DBRawIteratorWithThreadMode<'a, Db> = self.db.raw_iterator_cf_opt(cf, opts);
        if kids.is_empty() {
            return Box::new(stored);
        }
        kids.push(Box::new(stored));
        Box::new(MergeCursor::new(kids))
    }
}

/// A cursor over the sorted entries of one key range `[lower, upper)`: the
/// RocksDB raw iterator for stored data, [`SliceCursor`] for cells held in
/// memory. [`traverse`] reads partitions through it, so stored and in-memory
/// data are read by the same code.
pub(crate) trait Cursor {
    fn seek_to_first(&mut self);
    fn seek_to_last(&mut self);
    /// Positions at the first entry `>= key`.
    fn seek(&mut self, key: &[u8]);
    /// Positions at the last entry `<= key`.
    fn seek_for_prev(&mut self, key: &[u8]);
    fn valid(&self) -> bool;
    fn key(&self) -> Option<&[u8]>;
    fn value(&self) -> Option<&[u8]>;
    fn next(&mut self);
    fn prev(&mut self);
    /// The error that ended the walk early, if one did: a cursor over files
    /// is not valid after a read error, exactly as at the end of its range,
    /// so every walk that stops at `!valid()` checks this before it answers
    /// (a damaged file fails the read, never shortens it). A seek clears it.
    fn status(&self) -> Result<(), rocksdb::Error> {
        Ok(())
    }
}

impl Cursor for DBRawIteratorWithThreadMode<'_, Db> {
    #[inline]
    fn seek_to_first(&mut self) {
        DBRawIteratorWithThreadMode::seek_to_first(self)
    }
    #[inline]
    fn seek_to_last(&mut self) {
        DBRawIteratorWithThreadMode::seek_to_last(self)
    }
    #[inline]
    fn seek(&mut self, key: &[u8]) {
        DBRawIteratorWithThreadMode::seek(self, key)
    }
    #[inline]
    fn seek_for_prev(&mut self, key: &[u8]) {
        DBRawIteratorWithThreadMode::seek_for_prev(self, key)
    }
    #[inline]
    fn valid(&self) -> bool {
        DBRawIteratorWithThreadMode::valid(self)
    }
    #[inline]
    fn key(&self) -> Option<&[u8]> {
        DBRawIteratorWithThreadMode::key(self)
    }
    #[inline]
    fn value(&self) -> Option<&[u8]> {
        DBRawIteratorWithThreadMode::value(self)
    }
    #[inline]
    fn next(&mut self) {
        DBRawIteratorWithThreadMode::next(self)
    }
    #[inline]
    fn prev(&mut self) {
        DBRawIteratorWithThreadMode::prev(self)
    }
    fn status(&self) -> Result<(), rocksdb::Error> {
        DBRawIteratorWithThreadMode::status(self)
    }
}

/// Entries sorted by key (strictly ascending), by index: what a
/// [`SliceCursor`] walks.
pub(crate) trait Pairs {
    fn count(&self) -> usize;
    fn key_at(&self, i: usize) -> &[u8];
    fn value_at(&self, i: usize) -> &[u8];
}

impl<S: AsRef<[StoredEntry]>> Pairs for S {
    fn count(&self) -> usize {
        self.as_ref().len()
    }
    fn key_at(&self, i: usize) -> &[u8] {
        &self.as_ref()[i].0
    }
    fn value_at(&self, i: usize) -> &[u8] {
        &self.as_ref()[i].1
    }
}

/// A [`Cursor`] over the entries of sorted [`Pairs`] that fall in
/// `[lower, upper)`.
pub(crate) struct SliceCursor<S> {
    cells: S,
    /// The entries within `[lower, upper)`: `lo..hi` of `cells`.
    lo: usize,
    hi: usize,
    /// Relative to `lo`; `usize::MAX` (or anything past `hi - lo`) when not valid.
    pos: usize,
}

/// The first index in `lo..hi` whose key is not `before` (keys ascending).
fn partition_point<S: Pairs>(cells: &S, mut lo: usize, mut hi: usize, before: impl Fn(&[u8]) -> bool) -> usize {
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if before(cells.key_at(mid)) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

impl<S: Pairs> SliceCursor<S> {
    pub(crate) fn new(sorted: S, lower: &[u8], upper: &[u8]) -> SliceCursor<S> {
        let n = sorted.count();
        let lo = partition_point(&sorted, 0, n, |k| k < lower);
        let hi = partition_point(&sorted, lo, n, |k| k < upper);
        SliceCursor { cells: sorted, lo, hi, pos: usize::MAX }
    }

    fn len(&self) -> usize {
        self.hi - self.lo
    }

    fn at(&self) -> Option<usize> {
        (self.pos < self.len()).then_some(self.lo + self.pos)
    }
}

impl<S: Pairs> Cursor for SliceCursor<S> {
    fn seek_to_first(&mut self) {
        self.pos = 0;
    }
    fn seek_to_last(&mut self) {
        self.pos = self.len().wrapping_sub(1);
    }
    fn seek(&mut self, key: &[u8]) {
        self.pos = partition_point(&self.cells, self.lo, self.hi, |k| k < key) - self.lo;
    }
    fn seek_for_prev(&mut self, key: &[u8]) {
        self.pos = (partition_point(&self.cells, self.lo, self.hi, |k| k <= key) - self.lo).wrapping_sub(1);
    }
    fn valid(&self) -> bool {
        self.pos < self.len()
    }
    fn key(&self) -> Option<&[u8]> {
        self.at().map(|i| self.cells.key_at(i))
    }
    fn value(&self) -> Option<&[u8]> {
        self.at().map(|i| self.cells.value_at(i))
    }
    fn next(&mut self) {
        if self.valid() {
            self.pos += 1;
        }
    }
    fn prev(&mut self) {
        if self.valid() {
            self.pos = self.pos.wrapping_sub(1);
        }
    }
}

impl<C: Cursor + ?Sized> Cursor for Box<C> {
    fn seek_to_first(&mut self) {
        (**self).seek_to_first()
    }
    fn seek_to_last(&mut self) {
        (**self).seek_to_last()
    }
    fn seek(&mut self, key: &[u8]) {
        (**self).seek(key)
    }
    fn seek_for_prev(&mut self, key: &[u8]) {
        (**self).seek_for_prev(key)
    }
    fn valid(&self) -> bool {
        (**self).valid()
    }
    fn key(&self) -> Option<&[u8]> {
        (**self).key()
    }
    fn value(&self) -> Option<&[u8]> {
        (**self).value()
    }
    fn next(&mut self) {
        (**self).next()
    }
    fn prev(&mut self) {
        (**self).prev()
    }
    fn status(&self) -> Result<(), rocksdb::Error> {
        (**self).status()
    }
}

/// A [`Cursor`] confined to `[lower, upper)` of another cursor: one
/// iterator serves every section and slice of a partition read (building
/// a RocksDB iterator costs more than seeking one).
struct Window<'c, C: Cursor> {
    it: &'c mut C,
    lower: &'c [u8],
    upper: &'c [u8],
}

impl<C: Cursor> Cursor for Window<'_, C> {
    fn seek_to_first(&mut self) {
        self.it.seek(self.lower);
    }
    fn seek_to_last(&mut self) {
        self.it.seek_for_prev(self.upper);
        if self.it.key().is_some_and(|k| k >= self.upper) {
            self.it.prev();
        }
    }
    fn seek(&mut self, key: &[u8]) {
        self.it.seek(key.max(self.lower));
    }
    fn seek_for_prev(&mut self, key: &[u8]) {
        self.it.seek_for_prev(key);
        if self.it.key().is_some_and(|k| k >= self.upper) {
            self.seek_to_last();
        }
    }
    fn valid(&self) -> bool {
        self.it.valid() && self.it.key().is_some_and(|k| k >= self.lower && k < self.upper)
    }
    fn key(&self) -> Option<&[u8]> {
        self.it.key()
    }
    fn value(&self) -> Option<&[u8]> {
        self.it.value()
    }
    fn next(&mut self) {
        self.it.next()
    }
    fn prev(&mut self) {
        self.it.prev()
    }
    fn status(&self) -> Result<(), rocksdb::Error> {
        self.it.status()
    }
}

/// What a traversal reports besides the partition it reads. `()` observes
/// nothing (`read_partition`: no buffer, no copies); a raw read records.
pub(crate) trait Visitor {
    /// An entry the read used: a deletion marker, a static or row entry.
    fn entry(&mut self, key: &[u8], value: &[u8]);
    /// The read stopped at its row limit before the end of its slices;
    /// `rows_start | last_row` is the key prefix of the last row it covered
    /// (`None` when it covered no row).
    fn stopped(&mut self, rows_start: &[u8], last_row: Option<&[u8]>);
    /// At the end: the tombstones (deletion markers and cell tombstones) and
    /// the other cells the read went through (Cassandra's tombstones and
    /// live cells scanned).
    #[inline(always)]
    fn scanned(&mut self, _tombstones: u64, _cells: u64) {}
}

impl Visitor for () {
    #[inline(always)]
    fn entry(&mut self, _key: &[u8], _value: &[u8]) {}
    #[inline(always)]
    fn stopped(&mut self, _rows_start: &[u8], _last_row: Option<&[u8]>) {}
}

/// Counts what a read went through, for the table's metrics.
#[derive(Default)]
pub(crate) struct Scanned {
    pub tombstones: u64,
    pub cells: u64,
    /// The SSTables the read went through (`Storage::partition_files`).
    pub sstables: u64,
}

impl Visitor for Scanned {
    #[inline(always)]
    fn entry(&mut self, _key: &[u8], _value: &[u8]) {}
    #[inline(always)]
    fn stopped(&mut self, _rows_start: &[u8], _last_row: Option<&[u8]>) {}
    fn scanned(&mut self, tombstones: u64, cells: u64) {
        self.tombstones += tombstones;
        self.cells += cells;
    }
}

impl Scanned {
    /// Records a read of `store` that began at `start` and went through these.
    pub(crate) fn record(&self, store: &TableStore, start: std::time::Instant) {
        store.metrics.read_latency.record_since(start);
        store.metrics.tombstones_scanned.record(self.tombstones);
        store.metrics.live_scanned.record(self.cells);
        store.metrics.sstables_per_read.record(self.sstables);
    }
}

/// A partition's keys: its prefix (token and key), and the start and
/// (exclusive) end of the range that holds every entry of it.
type PartitionKeys = (Vec<u8>, Vec<u8>, Vec<u8>);

/// The keys of the partition `read` reads (the one cursor `traverse` opens).
fn partition_range(read: &PartitionRead) -> Result<PartitionKeys, StorageError> {
    let mut prefix = Vec::with_capacity(read.partition_key.len() + 11);
    keys::partition_prefix(read.token, &read.partition_key, &mut prefix)?;
    let start = with_section(&prefix, 0);
    let end = keys::prefix_successor(&prefix).unwrap_or_else(|| {
        // Only for the greatest token with a 64 KiB key of 0xFF bytes.
        let mut end = prefix.clone();
        end.resize(prefix.len() + 4 * (keys::MAX_KEY_LENGTH + 1), 0xFF);
        end
    });
    Ok((prefix, start, end))
}

/// Reads one partition as `read` asks, from the entries `open(lower, upper)`
/// yields: the header section (partition deletion, range tombstones and, when
/// asked, the static row), then the clustering slices in the read direction,
/// stopping after `row_limit` live rows. This is the only read traversal:
/// stored partitions and raw partitions held in memory both go through it.
pub(crate) fn traverse<C: Cursor, V: Visitor>(
    store: &TableStore,
    read: &PartitionRead,
    mut open: impl FnMut(Vec<u8>, Vec<u8>) -> Result<C, StorageError>,
    visitor: &mut V,
) -> Result<Option<Partition>, StorageError> {
    // One cursor over the whole partition; each section and slice is a window of it.
    let (prefix, partition_start, partition_end) = partition_range(read)?;
    let mut cursor = open(partition_start.clone(), partition_end)?;

    // Deletion info and the static row come first in the partition.
    let header_end = with_section(&prefix, if read.include_static { keys::SECTION_ROWS } else { keys::SECTION_STATIC });
    let mut header = Header { partition_deletion: None, ranges: Vec::new() };
    let (mut tombstones, mut cells) = (0u64, 0u64);
    let mut static_row = None;
    {
        let mut it = Window { it: &mut cursor, lower: &partition_start, upper: &header_end };
        it.seek_to_first();
        let mut static_acc = RowAcc::new(Vec::new(), false);
        while it.valid() {
            let (Some(k), Some(v)) = (it.key(), it.value()) else { break };
            if let (Some((&section, body)), Some(c)) =
                (k.get(prefix.len()..).and_then(|r| r.split_first()), CellRef::decode(v))
            {
                match section {
                    keys::SECTION_PARTITION_DELETION => {
                        tombstones += 1;
                        visitor.entry(k, v);
                        header.partition_deletion = Some(c.timestamp)
                    }
                    keys::SECTION_RANGE_TOMBSTONE => {
                        if let Some(b) = keys::decode_range_bounds(body) {
                            tombstones += 1;
                            visitor.entry(k, v);
                            header.ranges.push((
                                b.start.to_vec(),
                                b.start_inclusive,
                                b.end.to_vec(),
                                b.end_inclusive,
                                c.timestamp,
                            ));
                        }
                    }
                    keys::SECTION_STATIC => {
                        if c.is_tombstone() {
                            tombstones += 1;
                        } else {
                            cells += 1;
                        }
                        visitor.entry(k, v);
                        static_acc.add(store, body, &c)
                    }
                    _ => {}
                }
            }
            it.next();
        }
        it.status()?;
        if read.include_static {
            let shadow = header.partition_deletion.unwrap_or(i64::MIN);
            static_row = static_acc.finish(shadow, read.now);
        }
    }

    let mut rows = Vec::new();
    let mut stopped = false;
    let all = [(ClusteringBound::unbounded(), ClusteringBound::unbounded())];
    let ranges: &[(ClusteringBound, ClusteringBound)] = if read.ranges.is_empty() { &all } else { &read.ranges };
    let rows_start = with_section(&prefix, keys::SECTION_ROWS);
    // The slices in the read's direction (no list of them is made: most reads have one).
    let ordered = (0..ranges.len()).map(|i| if read.reversed { ranges.len() - 1 - i } else { i });
    'ranges: for (start, end) in ordered.filter_map(|i| ranges.get(i)) {
        if rows.len() >= read.row_limit {
            stopped = true;
            break;
        }
        let mut lower = rows_start.clone();
        keys::encode_clustering(&store.layout, &start.prefix, &mut lower)?;
        if !start.inclusive && !start.prefix.is_empty() {
            match keys::prefix_successor(&lower) {
                Some(s) => lower = s,
                None => continue,
            }
        }
        let mut upper = rows_start.clone();
        keys::encode_clustering(&store.layout, &end.prefix, &mut upper)?;
        if end.inclusive || end.prefix.is_empty() {
            upper = match keys::prefix_successor(&upper) {
                Some(s) => s,
                None => continue,
            };
        }
        if lower >= upper {
            continue;
        }
        let mut it = Window { it: &mut cursor, lower: &lower, upper: &upper };
        if read.reversed {
            it.seek_to_last();
        } else {
            it.seek_to_first();
        }
        let mut acc: Option<RowAcc> = None;
        while it.valid() {
            let (Some(k), Some(v)) = (it.key(), it.value()) else { break };
            let body = k.get(rows_start.len()..).unwrap_or_default();
            let Some(clen) = keys::clustering_len(&store.layout, body) else {
                advance(&mut it, read.reversed);
                continue;
            };
            let (row_key, column_part) = body.split_at(clen);
            if acc.as_ref().map(|a| a.key.as_slice() != row_key).unwrap_or(true) {
                if let Some(done) = acc.take() {
                    let shadow = header.shadowing(&done.key);
                    if let Some(row) = done.finish(shadow, read.now) {
                        rows.push(row);
                        if rows.len() >= read.row_limit {
                            stopped = true;
                            break 'ranges;
                        }
                    }
                }
                acc = Some(RowAcc::new(row_key.to_vec(), read.reversed));
            }
            if let (Some(a), Some(c)) = (acc.as_mut(), CellRef::decode(v)) {
                if c.is_tombstone() {
                    tombstones += 1;
                } else {
                    cells += 1;
                }
                visitor.entry(k, v);
                a.add(store, column_part, &c);
            }
            advance(&mut it, read.reversed);
        }
        it.status()?;
        if let Some(done) = acc.take() {
            let shadow = header.shadowing(&done.key);
            if let Some(row) = done.finish(shadow, read.now) {
                rows.push(row);
            }
        }
    }
    visitor.scanned(tombstones, cells);
    if stopped {
        // Rows still hold their encoded clustering (one element, or none).
        visitor.stopped(&rows_start, rows.last().map(|r: &Row| r.clustering.first().map_or(&[][..], Vec::as_slice)));
    }
    for row in &mut rows {
        row.clustering = keys::decode_clustering(&store.layout, &row.clustering.concat())
            .ok_or_else(|| StorageError::Engine("undecodable clustering key".into()))?;
    }
    if rows.is_empty() && static_row.is_none() {
        return Ok(None);
    }
    Ok(Some(Partition { token: read.token, key: read.partition_key.clone(), static_row, rows }))
}

fn advance<C: Cursor>(it: &mut C, reversed: bool) {
    if reversed {
        it.prev()
    } else {
        it.next()
    }
}

fn with_section(prefix: &[u8], section: u8) -> Vec<u8> {
    let mut v = Vec::with_capacity(prefix.len() + 1);
    v.extend_from_slice(prefix);
    v.push(section);
    v
}

/// A collection's live elements: (path, cell) in path order.
type Elements = Vec<(Vec<u8>, Cell)>;

/// Collects the entries of one row (in either iteration order).
struct RowAcc {
    key: Vec<u8>,
    deletion: Option<DeletionTime>,
    marker: Option<Liveness>,
    /// Entries arrive in reverse key order (a reversed query).
    reversed: bool,
    complex_deletions: Vec<(u16, i64)>,
    simple: Vec<(u16, Cell, bool)>,
    /// Counter cells: (column, context).
    counters: Vec<(u16, Vec<u8>)>,
    elements: Vec<(u16, Vec<u8>, Cell, bool)>,
}

impl RowAcc {
    fn new(key: Vec<u8>, reversed: bool) -> RowAcc {
        RowAcc {
            key,
            reversed,
            deletion: None,
            marker: None,
            complex_deletions: Vec::new(),
            simple: Vec::new(),
            counters: Vec::new(),
            elements: Vec::new(),
        }
    }

    fn add(&mut self, store: &TableStore, column_part: &[u8], c: &CellRef<'_>) {
        let Some(part) = keys::parse_column_part(column_part) else { return };
        let cell = || Cell {
            value: c.value.to_vec(),
            timestamp: c.timestamp,
            ttl: c.ttl,
            local_expiration: if c.ttl > 0 { c.local_deletion_time } else { 0 },
        };
        match part {
            ColumnPart::Simple(keys::COLUMN_ROW_DELETION) => {
                self.deletion =
                    Some(DeletionTime { timestamp: c.timestamp, local_deletion_time: c.local_deletion_time })
            }
            ColumnPart::Simple(keys::COLUMN_ROW_MARKER) => {
                if !c.is_tombstone() {
                    self.marker = Some(Liveness {
                        timestamp: c.timestamp,
                        ttl: c.ttl,
                        local_expiration: if c.ttl > 0 { c.local_deletion_time } else { 0 },
                    });
                }
            }
            ColumnPart::Simple(col) if c.kind == crate::cell::KIND_COUNTER => {
                if store.def.columns.iter().any(|d| d.id == col) {
                    self.counters.push((col, c.value.to_vec()));
                }
            }
            ColumnPart::Simple(col) => {
                if store.def.columns.iter().any(|d| d.id == col) {
                    self.simple.push((col, cell(), c.is_tombstone()));
                }
            }
            ColumnPart::ComplexDeletion(col) => self.complex_deletions.push((col, c.timestamp)),
            ColumnPart::Element(col, path) => {
                if let Some(path) = keys::decode_path(&store.layout, col, path) {
                    self.elements.push((col, path, cell(), c.is_tombstone()));
                }
            }
        }
    }

    /// Applies deletions and expiry; `None` when nothing in the row is live.
    fn finish(mut self, partition_shadow: i64, now: i32) -> Option<Row> {
        let row_shadow = partition_shadow.max(self.deletion.map(|d| d.timestamp).unwrap_or(i64::MIN));
        let live = |cell: &Cell, tomb: bool, shadow: i64| {
            !tomb && cell.timestamp > shadow && (cell.ttl == 0 || cell.local_expiration > now)
        };
        let marker = match self.marker {
            Some(l) if l.timestamp > row_shadow && (l.ttl == 0 || l.local_expiration > now) => Some(l),
            _ => None,
        };
        let mut columns: Vec<(u16, ColumnData)> = Vec::new();
        self.simple.sort_by_key(|(col, _, _)| *col);
        for (col, cell, tomb) in self.simple {
            if live(&cell, tomb, row_shadow) {
                columns.push((col, ColumnData::Simple(cell)));
            }
        }
        // A counter reads as the sum of its shards not shadowed by a deletion (a `bigint`).
        for (col, context) in self.counters {
            if let Some((sum, timestamp)) = types::counter::total(&context, row_shadow) {
                let cell = Cell { value: sum.to_be_bytes().to_vec(), timestamp, ttl: 0, local_expiration: 0 };
                columns.push((col, ColumnData::Simple(cell)));
            }
        }
        // Elements arrive in key order forwards and in reverse backwards:
        // restore key order (path order within each column).
        let mut elements = self.elements;
        if self.reversed {
            elements.reverse();
        }
        elements.sort_by_key(|e| e.0);
        let mut by_col: Vec<(u16, Elements)> = Vec::new();
        for (col, path, cell, tomb) in elements {
            let col_shadow = self
                .complex_deletions
                .iter()
                .filter(|(c, _)| *c == col)
                .map(|(_, ts)| *ts)
                .max()
                .unwrap_or(i64::MIN)
                .max(row_shadow);
            if !live(&cell, tomb, col_shadow) {
                continue;
            }
            match by_col.last_mut() {
                Some((c, items)) if *c == col => items.push((path, cell)),
                _ => by_col.push((col, vec![(path, cell)])),
            }
        }
        for (col, items) in by_col {
            columns.push((col, ColumnData::Complex(items)));
        }
        columns.sort_by_key(|(col, _)| *col);
        if marker.is_none() && columns.is_empty() {
            return None;
        }
        // Rows keep their encoded clustering here; the caller decodes it.
        let clustering = if self.key.is_empty() { Vec::new() } else { vec![self.key] };
        Some(Row { clustering, marker, columns })
    }
}
