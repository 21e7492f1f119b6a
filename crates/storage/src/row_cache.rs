//! The row cache: the merged stored entries of whole partitions, kept in
//! memory in front of the memtables and RocksDB, as ScyllaDB's cache (and
//! Cassandra's row cache, `row_cache_size`), for tables without clustering
//! columns (a partition is one row: its partition deletion and its packed
//! row, at most two entries). A hit is a hash lookup and an `Arc` clone,
//! where a miss is a `MultiGet` through the block cache, the index and data
//! block searches, bloom probes and the merge of each file's operands.
//!
//! What is cached is a partition's (key, merged value) pairs exactly as the
//! read path gets them from the memtables and RocksDB (`Storage::cells`),
//! not a query's result: deletions and TTLs are still applied by the read's
//! own traversal at its own `now`, so an entry never needs to change when a
//! cell expires, and raw reads (digests, read repair) see what a stored read
//! would. Compaction does not change what an entry means: it drops only
//! what reads already ignore (shadowed and purgeable data).
//!
//! Invariants:
//! - No read returns an entry older than a write that completed before the
//!   read began. A write reaches its partition's entry *after* its memtable
//!   insert (`Storage::write`), under the shard's lock: it bumps the shard's
//!   epoch and either merges its operand into the entry (`update`: the
//!   entry was read since its last write; the merge is the one reads and
//!   RocksDB use, so the entry is then what a read of storage returns) or
//!   removes it (`invalidate`). A miss takes the shard's epoch with its
//!   lookup and fills only if the epoch is unchanged when it returns, under
//!   the same lock: a write that raced with the miss's read of storage
//!   bumped the epoch, so the possibly stale read is not kept. Nor is a fill
//!   made while a write of its shard is between the start of its memtable
//!   insert and its cache step (`begin_write` counts it in flight): a
//!   concurrent miss may already have read that write from the memtable
//!   and returned it, and an older read filled meanwhile would then take a
//!   reader back in time (a read after a newer read returns older data:
//!   `storage/tests/row_cache.rs`'s racing readers caught it). Nor is a hit
//!   served while a write of its shard is in flight: an entry filled before
//!   the write began is older than what a miss may already have read from
//!   the memtable; the lookup is a miss then, and reads storage. A write the
//!   entry already held (inserted before the fill's read, merged after) is
//!   merged twice, harmlessly: merging is idempotent.
//! - Writes skip the lock while no miss has ever been taken (`armed`): a
//!   miss arms the cache (a store, then a `SeqCst` fence) before its read of
//!   storage, and a write looks (a `SeqCst` fence, then a load) after its
//!   memtable insert, so either the write sees it armed, or the miss's read of
//!   the memtable (whose shard lock it takes after the write released it)
//!   sees the write.
//! - Whatever changes stored data without `Storage::write` (TRUNCATE, a
//!   dropped or altered table, streamed files ingested, cleanup) calls
//!   `invalidate_table`, which bumps every shard's epoch too.
//! - The entries' weights (`Slot::weight`: the blob and `ENTRY_OVERHEAD`) never sum past the capacity after an
//!   insert returns: inserting evicts (CLOCK: an entry read since the hand
//!   last passed gets another turn) until they fit; an entry heavier than a
//!   shard's share of the capacity is not kept.

use std::collections::hash_map::RandomState;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::engine::lock;
use crate::memtable::merge_values;
use crate::read::{Pairs, StoredEntry};

/// Shards, each with its own lock, epoch and share of the capacity.
const SHARDS: usize = 256;

/// Entries a partition may have to be cached: a partition of a table
/// without clustering columns has its deletion and its row.
pub(crate) const MAX_ENTRIES: usize = 2;

/// Bytes counted per partition beyond its blob: the map's slot and control
/// byte at its load factor, the `Arc`'s header, the clock queue's item.
const ENTRY_OVERHEAD: usize = 128;

/// A cached partition: one allocation holding its cache key and its stored
/// (key, merged value) pairs in key order, so a hit reads one blob
/// (`blob`'s layout: the key, a count byte, then per pair its key and value
/// lengths as u32 LE, then the pairs' bytes).
#[derive(Clone)]
pub(crate) struct Cached {
    blob: Arc<[u8]>,
    /// Per pair: the key's and the value's start and end in `blob`.
    spans: [(u32, u32, u32, u32); MAX_ENTRIES],
    count: usize,
}

impl Cached {
    fn encode(key: &[u8], entries: &[StoredEntry]) -> Arc<[u8]> {
        let body: usize = entries.iter().map(|(k, v)| 8 + k.len() + v.len()).sum();
        let mut blob = Vec::with_capacity(key.len() + 1 + body);
        blob.extend_from_slice(key);
        blob.push(entries.len() as u8);
        for (k, v) in entries {
            blob.extend_from_slice(&(k.len() as u32).to_le_bytes());
            blob.extend_from_slice(&(v.len() as u32).to_le_bytes());
        }
        for (k, v) in entries {
            blob.extend_from_slice(k);
            blob.extend_from_slice(v);
        }
        blob.into()
    }

    /// The pairs of a blob `encode` made for a key of `key_len` bytes.
    fn decode(blob: Arc<[u8]>, key_len: usize) -> Cached {
        let mut spans = [(0, 0, 0, 0); MAX_ENTRIES];
        let count = usize::from(blob.get(key_len).copied().unwrap_or(0)).min(MAX_ENTRIES);
        let mut at = key_len + 1 + 8 * count;
        for (i, span) in spans.iter_mut().enumerate().take(count) {
            let len =
                |o: usize| blob.get(o..o + 4).and_then(|b| b.try_into().ok()).map_or(0, u32::from_le_bytes) as usize;
            let (kl, vl) = (len(key_len + 1 + 8 * i), len(key_len + 5 + 8 * i));
            *span = (at as u32, (at + kl) as u32, (at + kl) as u32, (at + kl + vl) as u32);
            at += kl + vl;
        }
        Cached { blob, spans, count }
    }

    fn key_of(blob: &[u8], key_len: usize) -> &[u8] {
        blob.get(..key_len).unwrap_or_default()
    }
}

impl Pairs for Cached {
    fn count(&self) -> usize {
        self.count
    }
    fn key_at(&self, i: usize) -> &[u8] {
        let (s, e, _, _) = self.spans[i];
        &self.blob[s as usize..e as usize]
    }
    fn value_at(&self, i: usize) -> &[u8] {
        let (_, _, s, e) = self.spans[i];
        &self.blob[s as usize..e as usize]
    }
}

/// What a lookup found.
pub(crate) enum Lookup {
    /// The partition's cached entries.
    Hit(Cached),
    /// Not cached: read storage, then `fill` with the ticket.
    Miss(Ticket),
    /// The cache holds nothing (capacity 0).
    Off,
}

/// A miss's right to fill its key, if no write touched the key's shard
/// meanwhile.
pub(crate) struct Ticket {
    key: Vec<u8>,
    hash: u64,
    epoch: u64,
}

/// The cache's counters, for `system_views.caches`, `/metrics` and `tool info`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RowCacheStats {
    pub capacity_bytes: u64,
    pub size_bytes: u64,
    pub entries: u64,
    pub hits: u64,
    pub requests: u64,
}

pub(crate) struct RowCache {
    shards: Box<[Mutex<Shard>]>,
    hasher: RandomState,
    /// Each shard's share of the capacity.
    shard_capacity: usize,
    capacity: usize,
    /// Set by the first miss: until then no entry exists nor is being filled,
    /// and writes need not invalidate.
    armed: AtomicBool,
    /// Per shard: writes of its partitions between the start of their
    /// memtable insert (`begin_write`) and their cache step (`written`). A
    /// fill is refused while any is in flight (see the module's invariants).
    writing: Box<[AtomicU64]>,
}

/// The maps are keyed by the key's 64-bit keyed hash (`RowCache::hasher`),
/// as it is: a slot holds the whole key in its blob, and a lookup whose
/// hash matches another key's slot is a miss (a fill then takes the slot).
#[derive(Default)]
struct PreHashed(u64);

impl Hasher for PreHashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

#[derive(Default)]
struct Shard {
    map: HashMap<u64, Slot, BuildHasherDefault<PreHashed>>,
    /// The clock: hashes in the order the hand visits them, each with the
    /// `seq` of the slot it was pushed for (a hash whose slot has another
    /// seq, or none, is a stale item, skipped).
    queue: VecDeque<(u64, u64)>,
    /// Bumped by every invalidation of a key of this shard.
    epoch: u64,
    bytes: usize,
    next_seq: u64,
    hits: u64,
    requests: u64,
}

struct Slot {
    blob: Arc<[u8]>,
    key_len: u32,
    weight: u32,
    seq: u64,
    /// Read since the hand last passed it.
    visited: bool,
    /// Read since it was last brought up to a write (or filled, by a read):
    /// a write merges into it only then, and forgets it otherwise, so a
    /// partition written again and again without reads costs its writes no
    /// merge.
    read_since_write: bool,
}

impl Slot {
    /// Whether this slot holds the partition `prefix` of table `table` (and
    /// not another key of the same hash).
    fn holds(&self, table: u64, prefix: &[u8]) -> bool {
        let key = Cached::key_of(&self.blob, self.key_len as usize);
        key.get(..8) == Some(&table.to_be_bytes()[..]) && key.get(8..) == Some(prefix)
    }
}

impl RowCache {
    /// A cache holding at most `capacity` bytes (0: none).
    pub(crate) fn new(capacity: usize) -> RowCache {
        RowCache {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            hasher: RandomState::new(),
            shard_capacity: capacity / SHARDS,
            capacity,
            armed: AtomicBool::new(false),
            writing: (0..SHARDS).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    pub(crate) fn enabled(&self) -> bool {
        self.shard_capacity > 0
    }

    /// The cache key of a partition: its table's cache id
    /// (`TableStore::cache_id`), then its key prefix.
    fn key(table: u64, prefix: &[u8]) -> Vec<u8> {
        let mut key = Vec::with_capacity(8 + prefix.len());
        key.extend_from_slice(&table.to_be_bytes());
        key.extend_from_slice(prefix);
        key
    }

    /// The keyed hash of `key(table, prefix)`, without making the key.
    fn hash(&self, table: u64, prefix: &[u8]) -> u64 {
        let mut h = self.hasher.build_hasher();
        h.write(&table.to_be_bytes());
        h.write(prefix);
        h.finish()
    }

    /// The shard of a hash: bits the maps' bucket index (the low bits) and
    /// control tags (the top 7) do not use.
    fn shard(&self, hash: u64) -> &Mutex<Shard> {
        &self.shards[Self::shard_index(hash)]
    }

    fn shard_index(hash: u64) -> usize {
        (hash >> 24) as usize % SHARDS
    }

    fn writing(&self, hash: u64) -> &AtomicU64 {
        &self.writing[Self::shard_index(hash)]
    }

    /// What a write of the partition `prefix` does before its memtable
    /// insert: counts itself in flight on the partition's shard, until its
    /// `update` or `invalidate` (which every `begin_write` must be followed
    /// by, once the insert is done).
    pub(crate) fn begin_write(&self, table: u64, prefix: &[u8]) {
        self.writing(self.hash(table, prefix)).fetch_add(1, Ordering::SeqCst);
    }

    /// The cached entries of the partition whose key prefix (token, key
    /// length, key: `keys::partition_prefix`) is `prefix`, or a ticket to
    /// fill them once read.
    pub(crate) fn get(&self, table: u64, prefix: &[u8]) -> Lookup {
        if !self.enabled() {
            return Lookup::Off;
        }
        let hash = self.hash(table, prefix);
        let mut s = lock(self.shard(hash));
        s.requests += 1;
        // No hit while a write of the shard is in flight: its memtable insert may already be
        // visible to a miss (whose reader has returned the new value), while the entry does not
        // hold it until the write's cache step; this read goes to storage instead.
        let writing = self.writing(hash).load(Ordering::SeqCst) != 0;
        if let Some(slot) = s.map.get_mut(&hash).filter(|_| !writing) {
            if slot.holds(table, prefix) {
                slot.visited = true;
                slot.read_since_write = true;
                let (blob, key_len) = (Arc::clone(&slot.blob), slot.key_len as usize);
                s.hits += 1;
                drop(s);
                return Lookup::Hit(Cached::decode(blob, key_len));
            }
        }
        let epoch = s.epoch;
        drop(s);
        // Before the miss reads storage (see the module's invariants): a store of this
        // thread's own, so the fences' order decides what a racing write's load sees.
        self.armed.store(true, Ordering::SeqCst);
        std::sync::atomic::fence(Ordering::SeqCst);
        Lookup::Miss(Ticket { key: Self::key(table, prefix), hash, epoch })
    }

    /// Keeps what a miss read, unless a write invalidated its shard since
    /// the lookup (or it has more than `MAX_ENTRIES` pairs, or is too big).
    pub(crate) fn fill(&self, ticket: Ticket, entries: &[StoredEntry]) {
        if entries.len() > MAX_ENTRIES {
            return;
        }
        let key_len = ticket.key.len();
        let blob = Cached::encode(&ticket.key, entries);
        let weight = blob.len() + ENTRY_OVERHEAD;
        if weight > self.shard_capacity {
            return;
        }
        let mut s = lock(self.shard(ticket.hash));
        if s.epoch != ticket.epoch || self.writing(ticket.hash).load(Ordering::SeqCst) != 0 {
            return;
        }
        let seq = s.next_seq;
        s.next_seq += 1;
        let slot =
            Slot { blob, key_len: key_len as u32, weight: weight as u32, seq, visited: false, read_since_write: true };
        let replaced = s.map.insert(ticket.hash, slot);
        s.bytes += weight;
        s.queue.push_back((ticket.hash, seq));
        if let Some(old) = replaced {
            s.bytes -= old.weight as usize;
            s.compact_queue();
        }
        s.evict(self.shard_capacity);
    }

    /// Forgets the partition whose key prefix is `prefix`: called by every
    /// write, after its memtable insert.
    pub(crate) fn invalidate(&self, table: u64, prefix: &[u8]) {
        if let Some((hash, mut s)) = self.written(table, prefix) {
            // Whatever key holds the slot (another key of the same hash goes too: a cache may drop anything).
            s.forget(hash);
        }
    }

    /// A write's cache step, after its memtable insert (see the module's
    /// invariants): ends its `begin_write`; while the cache is not armed,
    /// nothing more; else it locks the partition's shard, bumps its epoch
    /// (ending the count under the lock), and gives back the hash and the
    /// locked shard.
    fn written(&self, table: u64, prefix: &[u8]) -> Option<(u64, std::sync::MutexGuard<'_, Shard>)> {
        let hash = self.hash(table, prefix);
        std::sync::atomic::fence(Ordering::SeqCst);
        if !self.armed.load(Ordering::SeqCst) {
            self.writing(hash).fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        let mut s = lock(self.shard(hash));
        s.epoch += 1;
        // Under the lock, after the epoch: a fill sees the write in flight or its new epoch.
        self.writing(hash).fetch_sub(1, Ordering::SeqCst);
        Some((hash, s))
    }

    /// Brings a cached partition up to a write of its entry `key` (one of
    /// the two a point read looks up: the partition's deletion or its row,
    /// `keys::SECTION_PARTITION_DELETION` / `SECTION_ROWS` after `prefix`):
    /// the entry becomes the merge of what was cached and `operand`, by the
    /// function reads and RocksDB merge with (`memtable::merge_values`), so
    /// it is what a read of storage would now return, and the next read of
    /// the partition is a hit. Called by every write of such an entry after
    /// its memtable insert, in place of `invalidate`; like it, it bumps the
    /// shard's epoch (a fill racing with the write is not kept). A partition
    /// not read since its last write is forgotten instead (`invalidate`'s
    /// cost, not a merge's, for partitions written more than read). Merging is
    /// idempotent, so a write the cached entries already held (its insert
    /// came before the fill's read) is merged again harmlessly.
    pub(crate) fn update(&self, table: u64, prefix: &[u8], key: &[u8], operand: &[u8]) {
        let Some((hash, mut s)) = self.written(table, prefix) else { return };
        let Some(slot) = s.map.get(&hash) else { return };
        let key_len = slot.key_len as usize;
        let cached = (slot.read_since_write && slot.holds(table, prefix))
            .then(|| Cached::decode(Arc::clone(&slot.blob), key_len));
        let merged = cached.as_ref().and_then(|c| merge_into(c, key, operand));
        let (Some(cached), Some(entries)) = (cached, merged.filter(|e| e.len() <= MAX_ENTRIES)) else {
            // Not read since its last write, another key of the same hash, or a merge that gave nothing: forget it.
            s.forget(hash);
            return;
        };
        let blob = Cached::encode(Cached::key_of(&cached.blob, key_len), &entries);
        let weight = blob.len() + ENTRY_OVERHEAD;
        let Some(slot) = s.map.get_mut(&hash) else { return };
        let old_weight = slot.weight as usize;
        slot.blob = blob;
        slot.weight = weight as u32;
        slot.read_since_write = false;
        s.bytes = s.bytes - old_weight + weight;
        if weight > self.shard_capacity {
            s.forget(hash);
            return;
        }
        s.evict(self.shard_capacity);
    }

    /// Forgets every partition of the table whose cache id is `table`
    /// (TRUNCATE, DROP, files ingested, cleanup) and fails the fills in flight.
    pub(crate) fn invalidate_table(&self, table: u64) {
        let id = table.to_be_bytes();
        for shard in self.shards.iter() {
            let mut s = lock(shard);
            s.epoch += 1;
            let before = s.map.len();
            let mut freed = 0;
            s.map.retain(|_, slot| {
                let keep = !slot.blob.starts_with(&id);
                if !keep {
                    freed += slot.weight as usize;
                }
                keep
            });
            s.bytes -= freed;
            if s.map.len() != before {
                s.compact_queue();
            }
        }
    }

    pub(crate) fn stats(&self) -> RowCacheStats {
        let mut out = RowCacheStats { capacity_bytes: self.capacity as u64, ..RowCacheStats::default() };
        for shard in self.shards.iter() {
            let s = lock(shard);
            out.size_bytes += s.bytes as u64;
            out.entries += s.map.len() as u64;
            out.hits += s.hits;
            out.requests += s.requests;
        }
        out
    }
}

/// `cached`'s pairs with `operand` merged into the pair of `key` (added, in
/// key order, when there is none); `None` when the merge gives nothing.
fn merge_into(cached: &Cached, key: &[u8], operand: &[u8]) -> Option<Vec<StoredEntry>> {
    let mut out: Vec<StoredEntry> = Vec::with_capacity(cached.count + 1);
    let mut merged = false;
    for i in 0..cached.count {
        let (k, v) = (cached.key_at(i), cached.value_at(i));
        if !merged && k > key {
            out.push((key.to_vec(), merge_values(key, None, std::iter::once(operand))?));
            merged = true;
        }
        if k == key {
            out.push((k.to_vec(), merge_values(k, Some(v), std::iter::once(operand))?));
            merged = true;
        } else {
            out.push((k.to_vec(), v.to_vec()));
        }
    }
    if !merged {
        out.push((key.to_vec(), merge_values(key, None, std::iter::once(operand))?));
    }
    Some(out)
}

impl Shard {
    /// Removes the entry of `hash`, if any.
    fn forget(&mut self, hash: u64) {
        if let Some(old) = self.map.remove(&hash) {
            self.bytes -= old.weight as usize;
            self.compact_queue();
        }
    }

    /// Evicts until the entries fit in `capacity`: the hand takes the oldest
    /// item; an entry read since its last turn gets another, others go.
    fn evict(&mut self, capacity: usize) {
        while self.bytes > capacity {
            let Some((hash, seq)) = self.queue.pop_front() else { break };
            let Some(slot) = self.map.get_mut(&hash) else { continue };
            if slot.seq != seq {
                continue;
            }
            if slot.visited {
                slot.visited = false;
                slot.seq = self.next_seq;
                self.queue.push_back((hash, self.next_seq));
                self.next_seq += 1;
            } else if let Some(old) = self.map.remove(&hash) {
                self.bytes -= old.weight as usize;
            }
        }
    }

    /// Drops the clock's stale items once they outnumber the live ones, so
    /// the queue stays within twice the map (invalidations leave items behind).
    fn compact_queue(&mut self) {
        if self.queue.len() > 2 * self.map.len() + 16 {
            let map = &self.map;
            self.queue.retain(|(hash, seq)| map.get(hash).is_some_and(|s| s.seq == *seq));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn pairs(n: u8, len: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        vec![(vec![n], vec![n; len])]
    }

    fn read(c: &Cached) -> Vec<(Vec<u8>, Vec<u8>)> {
        (0..c.count()).map(|i| (c.key_at(i).to_vec(), c.value_at(i).to_vec())).collect()
    }

    fn hit(c: &RowCache, t: u64, p: &[u8]) -> Option<Cached> {
        match c.get(t, p) {
            Lookup::Hit(e) => Some(e),
            _ => None,
        }
    }

    #[test]
    fn a_miss_fills_and_a_write_or_a_table_invalidation_forgets() {
        let c = RowCache::new(1 << 20);
        let (t, u) = (1u64, 2u64);
        let Lookup::Miss(ticket) = c.get(t, b"k1") else { panic!("a first lookup misses") };
        c.fill(ticket, &pairs(1, 10));
        assert_eq!(read(&hit(&c, t, b"k1").expect("filled")), pairs(1, 10));
        assert!(hit(&c, u, b"k1").is_none(), "another table's partition is another key");
        c.begin_write(t, b"k1");
        c.invalidate(t, b"k1");
        assert!(hit(&c, t, b"k1").is_none());
        for (table, k) in [(t, b"a"), (t, b"b"), (u, b"a")] {
            let Lookup::Miss(ticket) = c.get(table, k) else { panic!() };
            c.fill(ticket, &pairs(2, 10));
        }
        c.invalidate_table(t);
        assert!(hit(&c, t, b"a").is_none() && hit(&c, t, b"b").is_none());
        assert!(hit(&c, u, b"a").is_some(), "only the table's partitions go");
        let s = c.stats();
        assert_eq!(s.entries, 1);
        let blob = Cached::encode(&RowCache::key(u, b"a"), &pairs(2, 10));
        assert_eq!(s.size_bytes, (blob.len() + ENTRY_OVERHEAD) as u64);
    }

    #[test]
    fn a_blob_holds_its_key_and_pairs_and_a_partition_of_more_pairs_is_not_kept() {
        for n in 0..=MAX_ENTRIES {
            let entries: Vec<_> = (0..n).map(|i| (vec![i as u8; i + 1], vec![7; 3 * i])).collect();
            let blob = Cached::encode(b"key", &entries);
            assert_eq!(Cached::key_of(&blob, 3), b"key");
            assert_eq!(read(&Cached::decode(blob, 3)), entries);
        }
        let c = RowCache::new(1 << 20);
        let Lookup::Miss(ticket) = c.get(1, b"k") else { panic!() };
        let three = vec![(vec![1], vec![1]), (vec![2], vec![2]), (vec![3], vec![3])];
        c.fill(ticket, &three);
        assert!(hit(&c, 1, b"k").is_none());
    }

    #[test]
    fn a_fill_after_an_invalidation_of_its_shard_is_not_kept() {
        let c = RowCache::new(1 << 20);
        let t = 1u64;
        let Lookup::Miss(ticket) = c.get(t, b"k") else { panic!() };
        // A write lands between the miss's lookup and its fill.
        c.begin_write(t, b"k");
        c.invalidate(t, b"k");
        c.fill(ticket, &pairs(1, 10));
        assert!(hit(&c, t, b"k").is_none(), "the read may predate the write");
        let Lookup::Miss(ticket) = c.get(t, b"k") else { panic!() };
        c.invalidate_table(t);
        c.fill(ticket, &pairs(1, 10));
        assert!(hit(&c, t, b"k").is_none());
    }

    /// Two misses, one read of storage before a write's memtable insert and
    /// one after (that reader has returned the new value), fill in the
    /// other order while the write has not reached the cache: neither is
    /// kept, else the older would take the second reader back in time.
    #[test]
    fn a_fill_while_a_write_of_its_shard_is_in_flight_is_not_kept() {
        let c = RowCache::new(1 << 20);
        let t = 1u64;
        let Lookup::Miss(older) = c.get(t, b"k") else { panic!() };
        let Lookup::Miss(newer) = c.get(t, b"k") else { panic!() };
        c.begin_write(t, b"k");
        c.fill(newer, &pairs(2, 10));
        c.fill(older, &pairs(1, 10));
        assert!(hit(&c, t, b"k").is_none(), "no fill is kept while a write of the shard is in flight");
        c.update(t, b"k", &[9], &[9]);
        let Lookup::Miss(after) = c.get(t, b"k") else { panic!() };
        c.fill(after, &pairs(2, 10));
        assert_eq!(read(&hit(&c, t, b"k").expect("fills are kept again once the write is done")), pairs(2, 10));
    }

    /// An entry filled before a write began is not served while the write
    /// is in flight (a miss meanwhile may have read the write from the
    /// memtable and returned it; a hit on the older entry would then take
    /// that reader back in time), and is served again, brought up to the
    /// write, once the write's cache step is done.
    #[test]
    fn no_hit_while_a_write_of_its_shard_is_in_flight() {
        let c = RowCache::new(1 << 20);
        let t = 1u64;
        let Lookup::Miss(ticket) = c.get(t, b"k") else { panic!() };
        c.fill(ticket, &pairs(1, 10));
        assert_eq!(read(&hit(&c, t, b"k").expect("filled")), pairs(1, 10));
        c.begin_write(t, b"k");
        assert!(matches!(c.get(t, b"k"), Lookup::Miss(_)), "a write of the shard is in flight: no hit");
        c.invalidate(t, b"k");
        let Lookup::Miss(ticket) = c.get(t, b"k") else { panic!() };
        c.fill(ticket, &pairs(2, 10));
        assert_eq!(read(&hit(&c, t, b"k").expect("hits again once the write is done")), pairs(2, 10));
    }

    #[test]
    fn off_at_capacity_zero_and_an_entry_too_big_for_a_shard_is_not_kept() {
        let c = RowCache::new(0);
        assert!(matches!(c.get(0, b"k"), Lookup::Off));
        let c = RowCache::new(SHARDS * 1000);
        let t = 0u64;
        let Lookup::Miss(ticket) = c.get(t, b"k") else { panic!() };
        c.fill(ticket, &pairs(1, 2000));
        assert!(hit(&c, t, b"k").is_none());
    }

    #[test]
    fn the_weight_stays_within_capacity_and_entries_read_again_outlive_the_others() {
        let capacity = SHARDS * 4096;
        let c = RowCache::new(capacity);
        let t = 0u64;
        let hot: Vec<Vec<u8>> = (0..200u32).map(|i| format!("hot{i}").into_bytes()).collect();
        let mut hot_misses = 0;
        for i in 0..40_000u32 {
            // Each hot key is read every 50 cold fills: CLOCK keeps it; FIFO
            // would evict it after each shard's ~11 entries were refilled.
            for k in hot.iter().skip(i as usize % 50).step_by(50) {
                if let Lookup::Miss(ticket) = c.get(t, k) {
                    hot_misses += usize::from(i >= 20_000);
                    c.fill(ticket, &pairs(1, 100));
                }
            }
            let k = format!("cold{i}").into_bytes();
            if let Lookup::Miss(ticket) = c.get(t, &k) {
                c.fill(ticket, &pairs(1, 100));
            }
            if i % 1000 == 0 {
                assert!(c.stats().size_bytes as usize <= capacity);
            }
        }
        let s = c.stats();
        assert!(s.size_bytes as usize <= capacity && s.entries > 1000, "{s:?}");
        assert!(hot_misses < 20, "hot keys missed {hot_misses} times in the second half");
        for shard in c.shards.iter() {
            let s = lock(shard);
            assert!(s.queue.len() <= 2 * s.map.len() + 16, "the clock stays bounded");
            assert_eq!(s.bytes, s.map.values().map(|slot| slot.blob.len() + ENTRY_OVERHEAD).sum::<usize>());
        }
    }

    /// Threads write (a version number into a shared "storage", then
    /// invalidate) and read (a lookup, on a miss the storage's version after a
    /// random delay, then a fill); a read must never see a version older than
    /// the last one whose write completed before the read began, nor older
    /// than one its thread read before.
    #[test]
    fn random_races_of_reads_and_writes_never_serve_a_version_older_than_a_completed_write() {
        use std::sync::atomic::AtomicU64;
        const KEYS: usize = 8;
        let c = Arc::new(RowCache::new(1 << 20));
        let stored: Arc<Vec<AtomicU64>> = Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
        let completed: Arc<Vec<AtomicU64>> = Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
        let t = 7u64;
        let threads: Vec<_> = (0..4u64)
            .map(|seed| {
                let (c, stored, completed) = (Arc::clone(&c), Arc::clone(&stored), Arc::clone(&completed));
                std::thread::spawn(move || {
                    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
                    let mut last = [0u64; KEYS];
                    for _ in 0..20_000 {
                        let k = rng.gen_range(0..KEYS);
                        let key = [k as u8];
                        if seed == 0 {
                            // The writer: versions of a key only grow.
                            c.begin_write(t, &key);
                            let v = stored[k].fetch_add(1, Ordering::SeqCst) + 1;
                            c.invalidate(t, &key);
                            completed[k].fetch_max(v, Ordering::SeqCst);
                        } else {
                            let floor = completed[k].load(Ordering::SeqCst);
                            let seen = match c.get(t, &key) {
                                Lookup::Hit(e) => u64::from_be_bytes(e.value_at(0).try_into().unwrap()),
                                Lookup::Miss(ticket) => {
                                    let v = stored[k].load(Ordering::SeqCst);
                                    for _ in 0..rng.gen_range(0..200) {
                                        std::hint::spin_loop();
                                    }
                                    c.fill(ticket, &[(key.to_vec(), v.to_be_bytes().to_vec())]);
                                    v
                                }
                                Lookup::Off => unreachable!(),
                            };
                            assert!(seen >= floor, "key {k}: read version {seen} after version {floor} completed");
                            assert!(seen >= last[k], "key {k}: read version {seen} after reading {}", last[k]);
                            last[k] = seen;
                        }
                    }
                })
            })
            .collect();
        for th in threads {
            th.join().unwrap();
        }
        assert!(c.stats().hits > 0, "the race test must exercise hits too");
    }
}
