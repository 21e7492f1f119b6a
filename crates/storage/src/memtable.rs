//! Shoal's memtables: the writes of a table since its last flush, in memory,
//! sorted by key, the writes to one key already merged into one value.
//!
//! Writes no longer go through RocksDB's memtable. A RocksDB memtable insert
//! is a walk down a skiplist of every entry, a cache miss per level, and it
//! was a third of the CPU of a write (ARCHITECTURE.md, performance). Here
//! B-trees keyed by the key's first 8 bytes (the token, so most comparisons
//! are one integer compare in a node already in cache) and then the whole
//! key take the insert: 4,096 of them per memtable, one per value of the
//! token's top 12 bits (16 locked shards of 256 sub-maps), so with 256 MiB
//! memtables a tree holds a few hundred entries and a search misses the
//! cache at fewer levels, and two writes to one key merge at once, by the same
//! last-write-wins function as the RocksDB merge operator (`merge_values`).
//!
//! Keys and values live in a bump arena per shard (`Arena`), so an insert
//! allocates nothing of its own and a flushed memtable is freed a chunk at a
//! time; the B-tree holds pointers into it (the module's only `unsafe`).
//! Freed chunks are kept, emptied, for the next memtables (`SPARE_CHUNKS`).
//!
//! A table has one active memtable and the frozen ones waiting to be flushed
//! (`Memtables`). A flush (`engine`) writes a frozen memtable as a sorted file
//! of merge operands and ingests it into the table's column family, where
//! RocksDB merges it with older data exactly as it merged its own flushes.
//! Reads see the memtables and RocksDB through one [`MergeCursor`].
//!
//! Invariants:
//! - A value here is a merge operand, never a base value: reads and flushes
//!   merge it with what RocksDB holds for the key. Merging is commutative,
//!   associative and idempotent (last write wins per cell), so a read that
//!   sees a memtable both here and, just ingested, in RocksDB is still right.
//! - `min_seq` is at most the commit log sequence number of every logged
//!   write in the memtable; the log keeps every record at or above the
//!   smallest `min_seq` of all unflushed memtables and of the writes logged
//!   but not inserted yet (`CommitLog::reserve`: a write is logged, and in
//!   `batch`/`group` mode synced, before it is inserted here).
//! - Nothing is inserted into a memtable once it is frozen: writers insert
//!   holding the table's `Memtables` read lock, and freezing takes its
//!   write lock.
//! - Every key and value pointer in a shard's map points into that shard's
//!   arena, whose chunks never grow past their capacity (so never move) and
//!   are freed or emptied for reuse only with the shard; probe keys for
//!   lookups point into the caller's bytes and never enter a map.
//! - Readers take the memtables before they open the RocksDB iterator, so a
//!   flush that ends between the two is seen twice (harmless), never missed.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use crate::engine::{lock, read_lock, write_lock};
use crate::read::Cursor;
use crate::{cell, packed};

/// Bytes counted per entry on top of its key and value (its B-tree slot and
/// share of a node).
const ENTRY_OVERHEAD: usize = 64;

/// Entries a [`MemCursor`] copies out of the memtable per lock: few after a
/// seek (a partition read seeks often and reads little), doubling as it
/// walks on, up to `MAX_CHUNK`.
const FIRST_CHUNK: usize = 4;
const MAX_CHUNK: usize = 128;

/// Merges operands of one key: the function of the RocksDB merge operator.
pub(crate) fn merge_values<'a>(
    key: &[u8],
    existing: Option<&'a [u8]>,
    operands: impl Iterator<Item = &'a [u8]>,
) -> Option<Vec<u8>> {
    if packed::is_packed_key(key) {
        Some(packed::merge(existing, operands))
    } else {
        cell::merge_operands(existing, operands)
    }
}

/// Bytes in a shard's [`Arena`] (or, for a probe, the caller's slice).
#[derive(Clone, Copy)]
struct Raw {
    ptr: NonNull<u8>,
    len: usize,
}

impl Raw {
    fn of(bytes: &[u8]) -> Raw {
        Raw { ptr: NonNull::from(bytes).cast(), len: bytes.len() }
    }

    /// SAFETY (for every caller): a `Raw` in a shard's map points into that
    /// shard's arena, which lives as long as the map and never moves or
    /// changes written bytes; a probe `Raw` is used only while its slice is
    /// borrowed and never enters a map.
    #[allow(unsafe_code)]
    fn bytes(&self) -> &[u8] {
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

/// How many entries ahead a flush prefetches (`Memtable::for_each`).
const PREFETCH_AHEAD: usize = 8;

/// Asks the CPU to bring the first two cache lines of `raw`'s bytes into
/// cache. Only a hint: it reads nothing and cannot fault.
fn prefetch(raw: Raw) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let p = raw.ptr.as_ptr() as *const i8;
        // SAFETY: prefetching is a hint that never faults, whatever the
        // address; `wrapping_add` keeps the second line's address
        // computation free of any in-bounds requirement.
        #[allow(unused_unsafe, unsafe_code)]
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(p);
            if raw.len > 64 {
                _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(64));
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = raw;
}

/// A key ordered exactly as its bytes: by the first 8 bytes as a big-endian
/// integer (zero-padded), then by all bytes.
#[derive(Clone, Copy)]
struct MemKey {
    head: u64,
    key: Raw,
}

impl MemKey {
    /// A key pointing at `key` (see [`Raw::bytes`] for how long it may live).
    fn probe(key: &[u8]) -> MemKey {
        let mut head = [0u8; 8];
        let n = key.len().min(8);
        head[..n].copy_from_slice(&key[..n]);
        MemKey { head: u64::from_be_bytes(head), key: Raw::of(key) }
    }
}

impl Ord for MemKey {
    fn cmp(&self, other: &MemKey) -> std::cmp::Ordering {
        self.head.cmp(&other.head).then_with(|| self.key.bytes().cmp(other.key.bytes()))
    }
}
impl PartialOrd for MemKey {
    fn partial_cmp(&self, other: &MemKey) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl PartialEq for MemKey {
    fn eq(&self, other: &MemKey) -> bool {
        self.cmp(other).is_eq()
    }
}
impl Eq for MemKey {}

/// Where a shard's keys and values live: bump-allocated in chunks that never
/// grow past their capacity (so never move) and are freed with the shard,
/// a few frees per flush instead of two per entry (the flush thread freeing
/// the writers' allocations one by one was a third of a flush's CPU).
#[derive(Default)]
struct Arena {
    chunks: Vec<Vec<u8>>,
}

const ARENA_CHUNK: usize = 1 << 20;

/// Chunks of freed arenas (flushed memtables), emptied, for the next
/// memtables' arenas. A fresh chunk's pages are faulted in and zeroed by the
/// kernel as the writers fill it, once per memtable; a profile at full speed
/// had 7% of the server's CPU in `clear_page_erms`. At most
/// `MAX_SPARE_CHUNKS` are kept, and the flush thread frees them once no
/// flush has run for a while ([`release_spare_chunks`]), so an idle node
/// holds none.
static SPARE_CHUNKS: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());
const MAX_SPARE_CHUNKS: usize = 256;

/// Frees the spare arena chunks (outside the lock).
pub(crate) fn release_spare_chunks() {
    let spare = std::mem::take(&mut *lock(&SPARE_CHUNKS));
    drop(spare);
}

/// An empty chunk for at least `len` bytes: a spare one when it is big
/// enough.
fn new_chunk(len: usize) -> Vec<u8> {
    if len <= ARENA_CHUNK {
        if let Some(chunk) = lock(&SPARE_CHUNKS).pop() {
            return chunk;
        }
    }
    Vec::with_capacity(len.max(ARENA_CHUNK))
}

impl Drop for Arena {
    fn drop(&mut self) {
        let mut spare = lock(&SPARE_CHUNKS);
        for mut chunk in self.chunks.drain(..) {
            if chunk.capacity() == ARENA_CHUNK && spare.len() < MAX_SPARE_CHUNKS {
                chunk.clear();
                spare.push(chunk);
            }
        }
    }
}

impl Arena {
    fn put(&mut self, bytes: &[u8]) -> Raw {
        let fits = self.chunks.last().is_some_and(|c| c.capacity() - c.len() >= bytes.len());
        if !fits {
            self.chunks.push(new_chunk(bytes.len()));
        }
        let chunk = self.chunks.last_mut().expect("a chunk with room");
        let start = chunk.len();
        chunk.extend_from_slice(bytes); // within capacity: no reallocation
        Raw::of(&chunk[start..])
    }

    /// Takes back the last `put` of `len` bytes.
    fn unput(&mut self, len: usize) {
        if let Some(chunk) = self.chunks.last_mut() {
            chunk.truncate(chunk.len().saturating_sub(len));
        }
    }
}

/// One shard: its entries (key → merge operand) and the arena they live in.
/// The entries are split over [`SUBS`] B-trees by the next bits of the key's
/// head (`sub_of`), so sub-map `i` holds keys below those of sub-map `i + 1`
/// and each insert searches a tree a few levels shallower.
struct ShardData {
    maps: Vec<BTreeMap<MemKey, Raw>>,
    arena: Arena,
}

impl Default for ShardData {
    fn default() -> ShardData {
        ShardData { maps: (0..SUBS).map(|_| BTreeMap::new()).collect(), arena: Arena::default() }
    }
}

// SAFETY: the raw pointers in `maps` point into `arena`, owned by the same
// value and only read (never written again) once put; all access goes
// through the shard's RwLock.
#[allow(unsafe_code)]
unsafe impl Send for ShardData {}
#[allow(unsafe_code)]
unsafe impl Sync for ShardData {}

/// Shards of a memtable: by the key's top 4 bits (its token's), so the
/// shards in order hold the keys in order, and a reader waits only for
/// writes to its own sixteenth of the ring.
const SHARDS: usize = 16;

type Shard = RwLock<ShardData>;

fn shard_of(head: u64) -> usize {
    (head >> 60) as usize
}

/// Sub-maps per shard: by the 8 bits of the key's head after the shard's 4.
const SUBS: usize = 256;

fn sub_of(head: u64) -> usize {
    ((head >> 52) & 0xff) as usize
}

/// One memtable.
pub(crate) struct Memtable {
    shards: [Shard; SHARDS],
    entries: AtomicUsize,
    bytes: AtomicUsize,
    /// The smallest commit log seq of a logged write in it (`u64::MAX`: none).
    min_seq: AtomicU64,
}

impl Default for Memtable {
    fn default() -> Memtable {
        Memtable {
            shards: std::array::from_fn(|_| RwLock::new(ShardData::default())),
            entries: AtomicUsize::new(0),
            bytes: AtomicUsize::new(0),
            min_seq: AtomicU64::new(u64::MAX),
        }
    }
}

impl Memtable {
    /// Merges `ops` (key, merge operand) in; `seq` is the commit log record
    /// that holds them, if they were logged. Each operand takes its shard's
    /// lock on its own, so readers never wait for a whole commit.
    pub fn insert<'a>(&self, ops: impl Iterator<Item = (&'a [u8], &'a [u8])>, seq: Option<u64>) {
        if let Some(seq) = seq {
            self.min_seq.fetch_min(seq, Ordering::Relaxed);
        }
        let (mut grown, mut added) = (0usize, 0usize);
        for (key, value) in ops {
            let probe = MemKey::probe(key);
            let mut guard = write_lock(&self.shards[shard_of(probe.head)]);
            let shard = &mut *guard;
            // The key goes into the arena first, so a new key costs one
            // search; an existing one gives the bytes back.
            let stored = MemKey { head: probe.head, key: shard.arena.put(key) };
            match shard.maps[sub_of(probe.head)].entry(stored) {
                std::collections::btree_map::Entry::Vacant(e) => {
                    grown += key.len() + value.len() + ENTRY_OVERHEAD;
                    added += 1;
                    e.insert(shard.arena.put(value));
                }
                std::collections::btree_map::Entry::Occupied(mut e) => {
                    shard.arena.unput(key.len());
                    if let Some(merged) = merge_values(key, Some(e.get().bytes()), std::iter::once(value)) {
                        // The old value's bytes stay in the arena until the flush.
                        grown += merged.len();
                        *e.get_mut() = shard.arena.put(&merged);
                    }
                }
            }
        }
        self.entries.fetch_add(added, Ordering::Relaxed);
        self.bytes.fetch_add(grown, Ordering::Relaxed);
    }

    /// Approximate memory held, in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Whether it holds nothing (without taking a lock).
    pub fn is_empty(&self) -> bool {
        self.entries.load(Ordering::Relaxed) == 0
    }

    /// The smallest commit log seq it holds, if it holds a logged write.
    pub fn min_seq(&self) -> Option<u64> {
        Some(self.min_seq.load(Ordering::Relaxed)).filter(|&s| s != u64::MAX)
    }

    /// The operand stored for `key`.
    pub fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        let k = MemKey::probe(key);
        read_lock(&self.shards[shard_of(k.head)]).maps[sub_of(k.head)].get(&k).map(|v| v.bytes().to_vec())
    }

    /// Calls `f` with every entry in key order (for a flush; the memtable
    /// is frozen, so the locks are uncontended). Stops at the first error.
    ///
    /// Entries were put into the arena in arrival order, so in key order
    /// each one is a cache miss; the bytes of the entry `PREFETCH_AHEAD`
    /// places on are prefetched, so its miss overlaps the work on this one.
    pub fn for_each<E>(&self, mut f: impl FnMut(&[u8], &[u8]) -> Result<(), E>) -> Result<(), E> {
        let mut window: Vec<(MemKey, Raw)> = Vec::new();
        for shard in &self.shards {
            for map in &read_lock(shard).maps {
                window.clear();
                window.extend(map.iter().map(|(k, v)| (*k, *v)));
                for (i, (k, v)) in window.iter().enumerate() {
                    if let Some((ahead_k, ahead_v)) = window.get(i + PREFETCH_AHEAD) {
                        prefetch(ahead_k.key);
                        prefetch(*ahead_v);
                    }
                    f(k.key.bytes(), v.bytes())?;
                }
            }
        }
        Ok(())
    }

    /// Up to `limit` entries within `[lower, upper)` after (`forward`) or
    /// before `from`, nearest first.
    fn chunk(
        &self,
        lower: &[u8],
        upper: &[u8],
        from: Bound<&[u8]>,
        forward: bool,
        limit: usize,
    ) -> Vec<(Vec<u8>, Vec<u8>)> {
        let lo = MemKey::probe(lower);
        let hi = MemKey::probe(upper);
        let bounds: (Bound<MemKey>, Bound<MemKey>) = if forward {
            let start = match from {
                Bound::Included(k) if k > lower => Bound::Included(MemKey::probe(k)),
                Bound::Excluded(k) if k >= lower => Bound::Excluded(MemKey::probe(k)),
                _ => Bound::Included(lo),
            };
            (start, Bound::Excluded(hi))
        } else {
            let end = match from {
                Bound::Included(k) if k < upper => Bound::Included(MemKey::probe(k)),
                Bound::Excluded(k) if k <= upper => Bound::Excluded(MemKey::probe(k)),
                _ => Bound::Excluded(hi),
            };
            (Bound::Included(lo), end)
        };
        if bounds_empty(&bounds) {
            return Vec::new();
        }
        let head = |b: &Bound<MemKey>| match b {
            Bound::Included(k) | Bound::Excluded(k) => k.head,
            Bound::Unbounded => 0,
        };
        // Sub-maps in key order are numbered `shard * SUBS + sub`.
        let bucket = |head: u64| shard_of(head) * SUBS + sub_of(head);
        let (first, last) = (bucket(head(&bounds.0)), bucket(head(&bounds.1)));
        let pick = |(k, v): (&MemKey, &Raw)| (k.key.bytes().to_vec(), v.bytes().to_vec());
        // The sub-maps of `shard` within `first..=last`.
        let subs = |shard: usize| {
            let lo = first.max(shard * SUBS) - shard * SUBS;
            let hi = last.min(shard * SUBS + SUBS - 1) - shard * SUBS;
            lo..=hi
        };
        let mut out = Vec::new();
        if forward {
            'shards: for shard in first / SUBS..=last / SUBS {
                let data = read_lock(&self.shards[shard]);
                for map in &data.maps[subs(shard)] {
                    let want = limit - out.len();
                    out.extend(map.range(bounds).take(want).map(pick));
                    if out.len() >= limit {
                        break 'shards;
                    }
                }
            }
        } else {
            'shards: for shard in (first / SUBS..=last / SUBS).rev() {
                let data = read_lock(&self.shards[shard]);
                for map in data.maps[subs(shard)].iter().rev() {
                    let want = limit - out.len();
                    out.extend(map.range(bounds).rev().take(want).map(pick));
                    if out.len() >= limit {
                        break 'shards;
                    }
                }
            }
            out.reverse();
        }
        out
    }
}

/// `BTreeMap::range` panics on a start after its end (or equal, both
/// excluded); such a range is empty.
fn bounds_empty(b: &(Bound<MemKey>, Bound<MemKey>)) -> bool {
    match b {
        (Bound::Included(s), Bound::Included(e)) => s > e,
        (Bound::Included(s) | Bound::Excluded(s), Bound::Excluded(e)) | (Bound::Excluded(s), Bound::Included(e)) => {
            s >= e
        }
        _ => false,
    }
}

/// A table's memtables: the active one and the frozen ones, oldest first.
#[derive(Default)]
pub(crate) struct Memtables {
    pub active: Arc<Memtable>,
    pub frozen: Vec<Arc<Memtable>>,
}

impl Memtables {
    /// Every memtable holding data, newest first.
    pub fn live(&self) -> Vec<Arc<Memtable>> {
        std::iter::once(&self.active).chain(self.frozen.iter().rev()).filter(|m| !m.is_empty()).cloned().collect()
    }

    /// The smallest commit log seq any of them holds.
    pub fn min_seq(&self) -> Option<u64> {
        std::iter::once(&self.active).chain(self.frozen.iter()).filter_map(|m| m.min_seq()).min()
    }

    pub fn bytes(&self) -> usize {
        std::iter::once(&self.active).chain(self.frozen.iter()).map(|m| m.bytes()).sum()
    }

    /// Makes the active memtable frozen (when it holds anything) and starts
    /// a new one. Returns whether it froze one.
    pub fn freeze(&mut self) -> bool {
        if self.active.is_empty() {
            return false;
        }
        let full = std::mem::take(&mut self.active);
        self.frozen.push(full);
        true
    }
}

/// A [`Cursor`] over one memtable's entries within `[lower, upper)`. It
/// copies entries out a chunk at a time, so it holds no lock between calls
/// and writers go on meanwhile (a cursor may or may not see their writes).
pub(crate) struct MemCursor {
    mem: Arc<Memtable>,
    lower: Vec<u8>,
    upper: Vec<u8>,
    chunk: Vec<(Vec<u8>, Vec<u8>)>,
    /// Index into `chunk`; `usize::MAX` (or past the end) when not valid.
    pos: usize,
    /// Entries the next refill copies.
    want: usize,
}

impl MemCursor {
    pub fn new(mem: Arc<Memtable>, lower: &[u8], upper: &[u8]) -> MemCursor {
        MemCursor {
            mem,
            lower: lower.to_vec(),
            upper: upper.to_vec(),
            chunk: Vec::new(),
            pos: usize::MAX,
            want: FIRST_CHUNK,
        }
    }

    /// Repositions: the next refill is small again.
    fn fill_fresh(&mut self, from: Bound<&[u8]>, forward: bool) {
        self.want = FIRST_CHUNK;
        self.fill(from, forward);
    }

    fn fill(&mut self, from: Bound<&[u8]>, forward: bool) {
        let chunk = self.mem.chunk(&self.lower, &self.upper, from, forward, self.want);
        self.want = (self.want * 2).min(MAX_CHUNK);
        self.chunk = chunk;
        self.pos = if forward { 0 } else { self.chunk.len().wrapping_sub(1) };
    }
}

impl Cursor for MemCursor {
    fn seek_to_first(&mut self) {
        self.fill_fresh(Bound::Unbounded, true);
    }
    fn seek_to_last(&mut self) {
        self.fill_fresh(Bound::Unbounded, false);
    }
    fn seek(&mut self, key: &[u8]) {
        self.fill_fresh(Bound::Included(key), true);
    }
    fn seek_for_prev(&mut self, key: &[u8]) {
        self.fill_fresh(Bound::Included(key), false);
    }
    fn valid(&self) -> bool {
        self.pos < self.chunk.len()
    }
    fn key(&self) -> Option<&[u8]> {
        self.chunk.get(self.pos).map(|(k, _)| k.as_slice())
    }
    fn value(&self) -> Option<&[u8]> {
        self.chunk.get(self.pos).map(|(_, v)| v.as_slice())
    }
    fn next(&mut self) {
        if !self.valid() {
            return;
        }
        if self.pos + 1 < self.chunk.len() {
            self.pos += 1;
        } else {
            let last = std::mem::take(&mut self.chunk[self.pos].0);
            self.fill(Bound::Excluded(&last), true);
        }
    }
    fn prev(&mut self) {
        if !self.valid() {
            return;
        }
        if self.pos > 0 {
            self.pos -= 1;
        } else {
            let first = std::mem::take(&mut self.chunk[0].0);
            self.fill(Bound::Excluded(&first), false);
        }
    }
}

/// A [`Cursor`] over the union of several cursors' entries: equal keys are
/// one entry whose value merges theirs (`merge_values`). Moves both ways;
/// on a change of direction the other cursors are re-positioned around the
/// current key.
pub(crate) struct MergeCursor<'a> {
    kids: Vec<Box<dyn Cursor + 'a>>,
    forward: bool,
    current: Option<(Vec<u8>, Vec<u8>)>,
}

impl<'a> MergeCursor<'a> {
    pub fn new(kids: Vec<Box<dyn Cursor + 'a>>) -> MergeCursor<'a> {
        MergeCursor { kids, forward: true, current: None }
    }

    /// Takes the smallest (forward) or largest key among the valid cursors
    /// and merges the values of every cursor at it.
    fn settle(&mut self) {
        let mut best: Option<&[u8]> = None;
        for kid in &self.kids {
            if let Some(k) = kid.key() {
                let better = match best {
                    None => true,
                    Some(b) => (self.forward && k < b) || (!self.forward && k > b),
                };
                if better {
                    best = Some(k);
                }
            }
        }
        let Some(best) = best else {
            self.current = None;
            return;
        };
        let key = best.to_vec();
        let mut values = self.kids.iter().filter(|kid| kid.key() == Some(key.as_slice())).filter_map(|kid| kid.value());
        let first = values.next();
        let value = match (first, values.clone().next()) {
            (Some(v), None) => Some(v.to_vec()),
            (first, _) => merge_values(&key, first, values),
        };
        self.current = value.map(|v| (key, v));
    }

    /// Moves every cursor sitting on `key` one step on.
    fn step_past(&mut self, key: &[u8]) {
        let forward = self.forward;
        for kid in &mut self.kids {
            if kid.key() == Some(key) {
                if forward {
                    kid.next()
                } else {
                    kid.prev()
                }
            }
        }
    }
}

impl Cursor for MergeCursor<'_> {
    fn seek_to_first(&mut self) {
        self.kids.iter_mut().for_each(|k| k.seek_to_first());
        self.forward = true;
        self.settle();
    }
    fn seek_to_last(&mut self) {
        self.kids.iter_mut().for_each(|k| k.seek_to_last());
        self.forward = false;
        self.settle();
    }
    fn seek(&mut self, key: &[u8]) {
        self.kids.iter_mut().for_each(|k| k.seek(key));
        self.forward = true;
        self.settle();
    }
    fn seek_for_prev(&mut self, key: &[u8]) {
        self.kids.iter_mut().for_each(|k| k.seek_for_prev(key));
        self.forward = false;
        self.settle();
    }
    fn valid(&self) -> bool {
        self.current.is_some()
    }
    fn key(&self) -> Option<&[u8]> {
        self.current.as_ref().map(|(k, _)| k.as_slice())
    }
    fn value(&self) -> Option<&[u8]> {
        self.current.as_ref().map(|(_, v)| v.as_slice())
    }
    fn next(&mut self) {
        let Some((key, _)) = self.current.take() else { return };
        if !self.forward {
            // Every cursor to the first entry >= key; those on key move past it.
            self.kids.iter_mut().for_each(|k| k.seek(&key));
            self.forward = true;
        }
        self.step_past(&key);
        self.settle();
    }
    fn prev(&mut self) {
        let Some((key, _)) = self.current.take() else { return };
        if self.forward {
            self.kids.iter_mut().for_each(|k| k.seek_for_prev(&key));
            self.forward = false;
        }
        self.step_past(&key);
        self.settle();
    }
    fn status(&self) -> Result<(), rocksdb::Error> {
        self.kids.iter().try_for_each(|k| k.status())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::SliceCursor;

    use crate::cell::live;

    /// Keys that are not packed rows (no partition layout): cell merge.
    fn key(i: u32) -> Vec<u8> {
        let mut k = vec![0xAA];
        k.extend_from_slice(&i.to_be_bytes());
        k
    }

    fn collect_forward(c: &mut dyn Cursor) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        c.seek_to_first();
        while let Some(k) = c.key() {
            out.push(k.to_vec());
            c.next();
        }
        out
    }

    fn collect_backward(c: &mut dyn Cursor) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        c.seek_to_last();
        while let Some(k) = c.key() {
            out.push(k.to_vec());
            c.prev();
        }
        out.reverse();
        out
    }

    #[test]
    fn key_order_is_byte_order() {
        let mut keys: Vec<Vec<u8>> = vec![
            vec![],
            vec![0],
            vec![0, 0],
            vec![1],
            vec![1, 2, 3, 4, 5, 6, 7, 8, 9],
            vec![1, 2, 3, 4, 5, 6, 7, 8],
            vec![0xFF; 9],
            vec![1, 2, 3, 4, 5, 6, 7, 7, 0xFF],
        ];
        let mut by_memkey = keys.clone();
        by_memkey.sort_by(|a, b| MemKey::probe(a).cmp(&MemKey::probe(b)));
        keys.sort();
        assert_eq!(keys, by_memkey);
    }

    #[test]
    fn writes_to_one_key_merge_last_write_wins() {
        let m = Memtable::default();
        let k = key(1);
        m.insert([(k.as_slice(), live(5, b"new").as_slice())].into_iter(), Some(3));
        m.insert([(k.as_slice(), live(2, b"old").as_slice())].into_iter(), Some(2));
        assert_eq!(m.get(&k), Some(live(5, b"new")));
        assert_eq!(m.entries.load(Ordering::Relaxed), 1);
        assert_eq!(m.min_seq(), Some(2));
    }

    /// Entries spread over many arena chunks, values bigger than a chunk,
    /// and overwrites (whose key bytes go back to the arena) all read back
    /// as written, by `get` and in order by `for_each`.
    #[test]
    fn arena_holds_entries_across_chunks_and_overwrites() {
        let m = Memtable::default();
        let mut want = std::collections::BTreeMap::new();
        for round in 0..3i64 {
            for i in 0..3000u32 {
                let size = if i % 997 == 0 { ARENA_CHUNK + 17 } else { 100 + (i as usize % 300) };
                let value = live(round * 10 + 1, &vec![(i % 251) as u8 ^ round as u8; size]);
                m.insert([(key(i).as_slice(), value.as_slice())].into_iter(), None);
                want.insert(key(i), value);
            }
        }
        assert_eq!(m.entries.load(Ordering::Relaxed), 3000);
        for (k, v) in &want {
            assert_eq!(m.get(k).as_ref(), Some(v));
        }
        let mut seen = Vec::new();
        m.for_each(|k, v| {
            seen.push((k.to_vec(), v.to_vec()));
            Ok::<(), ()>(())
        })
        .unwrap();
        assert_eq!(seen, want.into_iter().collect::<Vec<_>>());
    }

    /// A flushed memtable's arena chunks come back empty for the next
    /// memtables, whose entries read back as written.
    #[test]
    fn arena_chunks_are_reused_empty() {
        let v = live(1, &[7u8; 300]);
        let keys: Vec<Vec<u8>> = (0..20_000).map(key).collect();
        let first = Memtable::default();
        first.insert(keys.iter().map(|k| (k.as_slice(), v.as_slice())), None);
        drop(first);
        let chunk = new_chunk(16);
        assert!(chunk.is_empty() && chunk.capacity() >= ARENA_CHUNK);
        let w = live(2, &[9u8; 300]);
        let second = Memtable::default();
        second.insert(keys.iter().map(|k| (k.as_slice(), w.as_slice())), None);
        for k in &keys {
            assert_eq!(second.get(k), Some(w.clone()));
        }
    }

    #[test]
    fn cursor_walks_both_ways_across_chunks() {
        let m = Arc::new(Memtable::default());
        let v = live(1, b"x");
        let keys: Vec<Vec<u8>> = (0..500).map(|i| key(i * 2)).collect();
        m.insert(keys.iter().map(|k| (k.as_slice(), v.as_slice())), None);
        let (lo, hi) = (key(100), key(801));
        let want: Vec<Vec<u8>> = keys.iter().filter(|k| **k >= lo && **k < hi).cloned().collect();
        let mut c = MemCursor::new(Arc::clone(&m), &lo, &hi);
        assert_eq!(collect_forward(&mut c), want);
        assert_eq!(collect_backward(&mut c), want);
        c.seek(&key(301));
        assert_eq!(c.key(), Some(key(302).as_slice()));
        c.prev();
        assert_eq!(c.key(), Some(key(300).as_slice()));
        c.seek_for_prev(&key(5000));
        assert_eq!(c.key(), Some(key(800).as_slice()));
        c.seek(&key(0));
        assert_eq!(c.key(), Some(key(100).as_slice()));
        c.seek_for_prev(&key(99));
        assert!(!c.valid());
    }

    #[test]
    fn cursor_matches_a_sorted_list_across_shards() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let m = Arc::new(Memtable::default());
        let v = live(1, b"x");
        let mut keys: Vec<Vec<u8>> =
            (0..2000).map(|_| (0..rng.gen_range(1..12)).map(|_| rng.gen::<u8>()).collect()).collect();
        m.insert(keys.iter().map(|k| (k.as_slice(), v.as_slice())), None);
        keys.sort();
        keys.dedup();
        for _ in 0..50 {
            let mut a: Vec<u8> = (0..rng.gen_range(0..9)).map(|_| rng.gen::<u8>()).collect();
            let mut b: Vec<u8> = (0..rng.gen_range(0..9)).map(|_| rng.gen::<u8>()).collect();
            if a > b {
                std::mem::swap(&mut a, &mut b);
            }
            let want: Vec<Vec<u8>> = keys.iter().filter(|k| **k >= a && **k < b).cloned().collect();
            let mut c = MemCursor::new(Arc::clone(&m), &a, &b);
            assert_eq!(collect_forward(&mut c), want, "[{a:?}, {b:?})");
            assert_eq!(collect_backward(&mut c), want, "[{a:?}, {b:?})");
            let probe: Vec<u8> = (0..rng.gen_range(1..9)).map(|_| rng.gen::<u8>()).collect();
            c.seek(&probe);
            assert_eq!(c.key(), want.iter().find(|k| **k >= probe).map(|k| k.as_slice()));
            c.seek_for_prev(&probe);
            assert_eq!(c.key(), want.iter().rev().find(|k| **k <= probe).map(|k| k.as_slice()));
        }
    }

    #[test]
    fn merge_cursor_unions_and_merges() {
        let a: Vec<(Vec<u8>, Vec<u8>)> = [1, 3, 5, 7].iter().map(|&i| (key(i), live(1, b"a"))).collect();
        let b: Vec<(Vec<u8>, Vec<u8>)> = [2, 3, 6, 7, 9].iter().map(|&i| (key(i), live(2, b"b"))).collect();
        let (lo, hi) = (key(0), key(100));
        let kids: Vec<Box<dyn Cursor>> =
            vec![Box::new(SliceCursor::new(a, &lo, &hi)), Box::new(SliceCursor::new(b, &lo, &hi))];
        let mut c = MergeCursor::new(kids);
        let want: Vec<Vec<u8>> = [1, 2, 3, 5, 6, 7, 9].iter().map(|&i| key(i)).collect();
        assert_eq!(collect_forward(&mut c), want);
        assert_eq!(collect_backward(&mut c), want);
        c.seek(&key(3));
        assert_eq!(c.value(), Some(live(2, b"b").as_slice()), "the later write wins at a shared key");
        // Direction changes in the middle.
        c.seek(&key(4));
        assert_eq!(c.key(), Some(key(5).as_slice()));
        c.prev();
        assert_eq!(c.key(), Some(key(3).as_slice()));
        c.prev();
        assert_eq!(c.key(), Some(key(2).as_slice()));
        c.next();
        assert_eq!(c.key(), Some(key(3).as_slice()));
        c.next();
        assert_eq!(c.key(), Some(key(5).as_slice()));
        c.seek_for_prev(&key(8));
        assert_eq!(c.key(), Some(key(7).as_slice()));
        c.next();
        assert_eq!(c.key(), Some(key(9).as_slice()));
        c.next();
        assert!(!c.valid());
    }
}
