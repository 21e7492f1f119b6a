//! The compaction filter: drops cells shadowed by row, range or partition
//! deletions that are in the same compaction, turns expired cells into
//! tombstones, and purges tombstones older than `gc_grace_seconds` and than
//! the table's repaired horizon.
//!
//! A counter cell partly shadowed by a deletion (some shards written after
//! it) keeps only its newer shards, so purging the deletion later brings
//! none of the older shards back.
//!
//! What may go: a tombstone (cell tombstone, deletion marker, or expired
//! cell, by its local deletion time) deleted before
//! `gc_before = min(now - gc_grace_seconds, horizon)`. The horizon
//! (`Storage::set_tombstone_horizon`, `i64::MAX` for none) is the node's
//! promise that every replica of the table's data already holds every
//! tombstone deleted before it: the node sets it to the oldest start time of
//! the last successful repair of the ranges it replicates, less a propagation
//! delay (ScyllaDB's tombstone_gc mode `repair`). A replica that was down past gc_grace then
//! cannot bring deleted data back, because no repair of its ranges completes
//! while it is down, so the others keep their tombstones until it has them.
//!
//! Safety argument (why purging never resurrects data):
//! - RocksDB shows the filter only plain values: merge operands, and the
//!   result of merging them within a compaction, pass through unfiltered
//!   (they are filtered at the *next* compaction, once they are plain values).
//!   A plain value is the lowest entry for its key, and a row is one key
//!   (`packed`), so removing a cell from a plain packed row (a shadowed cell,
//!   an expired cell or a cell tombstone past gc_grace) leaves no older
//!   version of that cell behind.
//! - A deletion marker (row, range, partition, collection) shadows cells
//!   that newer, still unmerged operands (of its own row or of other keys)
//!   may hold, which the filter cannot see. So markers are purged only in the second pass of a major
//!   compaction (`Storage::compact`): the first pass turns every operand into
//!   a plain value without purging markers; the second sees every shadowed
//!   cell, drops it, and purges the marker in the same pass. RocksDB's
//!   automatic compactions never purge markers; the node's background
//!   tombstone compactions (`purge`) are this same two-pass purge, so the
//!   argument holds for them unchanged. A write arriving with an older
//!   timestamp after its tombstone is purged reappears: the gc_grace caveat
//!   Cassandra shares, which the repaired horizon narrows to writes that
//!   were on no replica when the last repair began (a late hint, a client's
//!   write with an old timestamp).

#![deny(clippy::indexing_slicing)]

use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use rocksdb::compaction_filter::{CompactionFilter, Decision};
use rocksdb::compaction_filter_factory::{CompactionFilterContext, CompactionFilterFactory};

use crate::cell::{self, CellRef};
use crate::engine::{lock, TableStore};
use crate::keys::{self, ColumnPart};
use crate::packed::{self, RowPacker};

/// Live `gc_grace_seconds` and repaired horizon per column family, shared
/// with filter factories so ALTER TABLE and a new horizon take effect at the
/// next compaction.
#[derive(Clone, Default)]
pub(crate) struct GcRegistry(Arc<Mutex<HashMap<String, GcSettings>>>);

/// A table's `gc_grace_seconds` and repaired horizon (`TableStore`).
type GcSettings = (Arc<AtomicI32>, Arc<AtomicI64>);

impl GcRegistry {
    pub fn register(&self, store: &TableStore) {
        lock(&self.0).insert(store.cf_name.clone(), (Arc::clone(&store.gc_grace), Arc::clone(&store.horizon)));
    }
    pub fn remove(&self, cf: &str) {
        lock(&self.0).remove(cf);
    }
    /// Tombstones deleted before this (unix seconds) may be purged.
    pub fn gc_before(&self, cf: &str, now: i64) -> i64 {
        let (gc_grace, horizon) = lock(&self.0)
            .get(cf)
            .map(|(g, h)| (g.load(Ordering::Relaxed), h.load(Ordering::Relaxed)))
            .unwrap_or((864_000, i64::MAX));
        (now - gc_grace as i64).min(horizon)
    }
}

pub(crate) struct Factory {
    registry: GcRegistry,
    /// Set only during the purging pass of `Storage::compact`.
    purge_markers: Arc<AtomicBool>,
    cf_name: String,
    name: CString,
}

impl Factory {
    pub fn new(registry: GcRegistry, purge_markers: Arc<AtomicBool>, cf_name: String) -> Factory {
        Factory { registry, purge_markers, cf_name, name: CString::new("shoal-gc-factory").unwrap_or_default() }
    }
}

impl CompactionFilterFactory for Factory {
    type Filter = Filter;

    fn create(&mut self, context: CompactionFilterContext) -> Filter {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
        Filter {
            gc_before: self.registry.gc_before(&self.cf_name, now),
            now,
            purge_markers: context.is_full_compaction && self.purge_markers.load(Ordering::SeqCst),
            partition: Vec::new(),
            partition_deletion: None,
            ranges: Vec::new(),
            row_deletion: None,
            complex: None,
            buf: Vec::new(),
            packer: RowPacker::default(),
            verdicts: Vec::new(),
            name: CString::new("shoal-gc").unwrap_or_default(),
        }
    }

    fn name(&self) -> &CStr {
        &self.name
    }
}

pub(crate) struct Filter {
    gc_before: i64,
    now: i64,
    purge_markers: bool,
    partition: Vec<u8>,
    partition_deletion: Option<i64>,
    ranges: Vec<keys::RangeDeletion>,
    row_deletion: Option<i64>,
    complex: Option<(u16, i64)>,
    buf: Vec<u8>,
    packer: RowPacker,
    verdicts: Vec<Verdict>,
    name: CString,
}

impl Filter {
    fn purgeable(&self, c: &CellRef<'_>) -> bool {
        (c.local_deletion_time as i64) < self.gc_before
    }

    fn marker_decision(&self, c: &CellRef<'_>) -> Decision {
        if self.purge_markers && self.purgeable(c) {
            Decision::Remove
        } else {
            Decision::Keep
        }
    }

    fn shadowing(&self, row: &[u8], column: Option<u16>, is_static: bool) -> i64 {
        let mut max = self.partition_deletion.unwrap_or(i64::MIN);
        if !is_static {
            for (s, si, e, ei, ts) in &self.ranges {
                if keys::bound_start_admits(s, *si, row) && keys::bound_end_admits(e, *ei, row) {
                    max = max.max(*ts);
                }
            }
            if let Some(ts) = self.row_deletion {
                max = max.max(ts);
            }
        }
        if let (Some(col), Some((ccol, ts))) = (column, self.complex) {
            if col == ccol {
                max = max.max(ts);
            }
        }
        max
    }

    fn decide(&mut self, key: &[u8], value: &[u8]) -> Decision {
        let Some((_, pk, rest)) = keys::split_partition(key) else { return Decision::Keep };
        // `rest` ends `key`: the partition prefix is what comes before it.
        let Some(prefix) = key.get(..key.len() - rest.len()) else { return Decision::Keep };
        if self.partition.as_slice() != prefix {
            self.partition.clear();
            self.partition.extend_from_slice(prefix);
            let _ = pk;
            self.partition_deletion = None;
            self.ranges.clear();
            self.row_deletion = None;
            self.complex = None;
        }
        let Some((&section, body)) = rest.split_first() else { return Decision::Keep };
        if let keys::SECTION_STATIC | keys::SECTION_ROWS = section {
            self.row_deletion = None;
            self.complex = None;
            return self.decide_row(body, value, section == keys::SECTION_STATIC);
        }
        let Some(c) = CellRef::decode(value) else { return Decision::Keep };
        match section {
            keys::SECTION_PARTITION_DELETION => {
                self.partition_deletion = Some(c.timestamp);
                self.marker_decision(&c)
            }
            keys::SECTION_RANGE_TOMBSTONE => {
                if let Some(b) = keys::decode_range_bounds(body) {
                    self.ranges.push((
                        b.start.to_vec(),
                        b.start_inclusive,
                        b.end.to_vec(),
                        b.end_inclusive,
                        c.timestamp,
                    ));
                }
                self.marker_decision(&c)
            }
            _ => Decision::Keep,
        }
    }

    /// A packed row: the cell rules below for each entry, in order (the row
    /// deletion and collection deletions come before the cells they shadow).
    fn decide_row(&mut self, row: &[u8], value: &[u8], is_static: bool) -> Decision {
        let mut verdicts = std::mem::take(&mut self.verdicts);
        verdicts.clear();
        for (column_part, raw) in packed::entries(value) {
            verdicts.push(match CellRef::decode(raw) {
                Some(c) => self.decide_cell(row, column_part, &c, is_static),
                None => Verdict::Keep,
            });
        }
        let decision = if verdicts.iter().all(|v| matches!(v, Verdict::Keep)) {
            Decision::Keep
        } else if verdicts.iter().all(|v| matches!(v, Verdict::Remove)) {
            Decision::Remove
        } else {
            self.packer.clear();
            for ((column_part, raw), verdict) in packed::entries(value).zip(&verdicts) {
                match verdict {
                    Verdict::Keep => self.packer.add_raw(column_part, raw),
                    Verdict::Remove => {}
                    Verdict::Tombstone => {
                        let Some(c) = CellRef::decode(raw) else { continue };
                        self.packer.add(
                            |k| k.extend_from_slice(column_part),
                            |v| cell::encode_tombstone(c.timestamp, c.local_deletion_time, v),
                        );
                    }
                    Verdict::Trim(shadow) => {
                        let Some(c) = CellRef::decode(raw) else { continue };
                        let context = types::counter::without_shadowed(c.value, *shadow);
                        self.packer.add(|k| k.extend_from_slice(column_part), |v| cell::encode_counter(&context, v));
                    }
                }
            }
            self.buf.clear();
            self.buf.extend_from_slice(self.packer.finish());
            // SAFETY: RocksDB copies the new value before the next call into
            // this filter (see rocksdb_compactionfilter_t::Filter in c.cc), and
            // `self.buf` is neither freed nor modified until then.
            #[allow(unsafe_code)]
            let bytes: &'static [u8] = unsafe { std::mem::transmute::<&[u8], &'static [u8]>(self.buf.as_slice()) };
            Decision::Change(bytes)
        };
        self.verdicts = verdicts;
        decision
    }

    fn decide_cell(&mut self, row: &[u8], column_part: &[u8], c: &CellRef<'_>, is_static: bool) -> Verdict {
        let Some(part) = keys::parse_column_part(column_part) else { return Verdict::Keep };
        match part {
            ColumnPart::Simple(keys::COLUMN_ROW_DELETION) => {
                self.row_deletion = Some(c.timestamp);
                return self.marker_verdict(c);
            }
            ColumnPart::ComplexDeletion(col) => {
                self.complex = Some((col, c.timestamp));
                return self.marker_verdict(c);
            }
            _ => {}
        }
        let column = match part {
            ColumnPart::Element(col, _) => Some(col),
            _ => None,
        };
        let shadow = self.shadowing(row, column, is_static);
        if c.timestamp <= shadow {
            return Verdict::Remove;
        }
        match c.kind {
            // Some shards are shadowed (the cell's timestamp is its newest shard's): drop them
            // here, before the deletion that shadows them can be purged.
            cell::KIND_COUNTER if types::counter::shards(c.value).any(|s| s.timestamp <= shadow) => {
                Verdict::Trim(shadow)
            }
            cell::KIND_TOMBSTONE if self.purgeable(c) => Verdict::Remove,
            // Expired: keep only a tombstone (deleted at its expiry) until gc_grace passes.
            cell::KIND_EXPIRING if (c.local_deletion_time as i64) <= self.now => {
                if self.purgeable(c) {
                    Verdict::Remove
                } else {
                    Verdict::Tombstone
                }
            }
            _ => Verdict::Keep,
        }
    }

    fn marker_verdict(&self, c: &CellRef<'_>) -> Verdict {
        if self.purge_markers && self.purgeable(c) {
            Verdict::Remove
        } else {
            Verdict::Keep
        }
    }
}

/// What happens to one entry of a packed row.
enum Verdict {
    Keep,
    Remove,
    /// An expired cell becomes a tombstone deleted at its expiry.
    Tombstone,
    /// A counter cell loses its shards written at or before this deletion.
    Trim(i64),
}

impl CompactionFilter for Filter {
    fn filter(&mut self, _level: u32, key: &[u8], value: &[u8]) -> Decision {
        self.decide(key, value)
    }

    fn name(&self) -> &CStr {
        &self.name
    }
}
