//! Tombstone compactions: deletion markers purged without an operator, as
//! Cassandra's single-SSTable tombstone compactions do, so a delete-heavy
//! table stops growing on its own.
//!
//! Automatic RocksDB compactions never purge deletion markers (see `filter`:
//! a marker may shadow operands the filter cannot see). Only the two-pass
//! purge of `Storage::compact` may. So the node runs that same purge in the
//! background, one table at a time, when a table's markers are worth it:
//! - Every deletion marker written (row, range, partition and collection
//!   deletions) is counted by its local deletion time, in 10-second buckets
//!   (`Markers`), on the write path (`write::encode_mutation`): no scan.
//! - A table is due when the markers that `gc_grace_seconds` and its
//!   repaired horizon would let go (`gc_before`, as the filter computes it)
//!   exceed `tombstone_threshold` (default 0.2) of its estimated keys
//!   (RocksDB's `rocksdb.estimate-num-keys`), and its last tombstone
//!   compaction (or, before the first, the opening of the engine or the
//!   table's creation) is at least `tombstone_compaction_interval` seconds
//!   old (default 86400). Both are the table's `compaction` options, as in
//!   Cassandra; `'enabled': 'false'` turns them off with the rest.
//!   `unchecked_tombstone_compaction` is accepted and changes nothing: the
//!   purge always takes the whole table, so there are no overlapping files
//!   to check.
//! - `Storage::tombstone_compaction` checks and runs at most one purge; the
//!   node calls it every few seconds on the blocking pool.
//!
//! Invariants:
//! - At most one purge runs at a time, with major compactions included
//!   (both hold `Storage::compacting`; a tombstone compaction that finds it
//!   held waits for the next check).
//! - Paced: after a tombstone compaction that took `d`, none starts for
//!   another `d` (background purges take at most half the time).
//! - The safety argument of `filter` holds unchanged: the purge is
//!   `Storage::compact`'s own two passes; this module only decides when.
//! - The counts, the last purge's time and the purge count survive restarts:
//!   `save` writes every table's to `FILE` in the data directory (at a clean
//!   shutdown, after each purge, and every `SAVE_EVERY` while markers are
//!   written: `Storage::tombstone_compaction`, the node's check, saves
//!   what changed), and the engine's open reads them back (`load`). So a
//!   node restarted more often than `tombstone_compaction_interval` still
//!   purges, and markers written before a restart still count after it.
//! - The counts are an estimate: markers written since the last save are
//!   not counted after a crash (the commit log replay counts nothing),
//!   markers streamed or repaired in are not counted, and a purge forgets
//!   only buckets wholly before its `gc_before`. Being wrong costs a purge
//!   too many or too late, never data; a missing or damaged `FILE` counts
//!   nothing and starts each table's interval at the open.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use types::schema::TableOptions;
use uuid::Uuid;

use crate::engine::lock;

/// The file in the data directory that keeps each table's markers across
/// restarts (`save`, `load`).
pub(crate) const FILE: &str = "tombstone-markers.json";
/// Least time between two saves while markers are written.
pub(crate) const SAVE_EVERY: Duration = Duration::from_secs(10);

/// Width of a bucket of marker counts, in seconds.
pub(crate) const BUCKET_SECS: i64 = 10;
/// Most buckets kept per table; past it the oldest is folded into the next
/// (which makes its markers look younger: later to purge, never earlier).
const MAX_BUCKETS: usize = 8192;

/// Cassandra's `tombstone_threshold` default.
pub const DEFAULT_THRESHOLD: f64 = 0.2;
/// Cassandra's `tombstone_compaction_interval` default, in seconds.
pub const DEFAULT_INTERVAL_SECS: i64 = 86_400;

/// A table's tombstone compaction options (its CQL `compaction` map).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct PurgeOptions {
    pub enabled: bool,
    pub threshold: f64,
    pub interval_secs: i64,
}

impl PurgeOptions {
    pub fn of(options: &TableOptions) -> PurgeOptions {
        let get = |k: &str| options.compaction.get(k).map(|v| v.trim());
        PurgeOptions {
            enabled: get("enabled").is_none_or(|v| !v.eq_ignore_ascii_case("false")),
            threshold: get("tombstone_threshold")
                .and_then(|v| v.parse::<f64>().ok())
                .filter(|t| t.is_finite() && *t >= 0.0)
                .unwrap_or(DEFAULT_THRESHOLD),
            interval_secs: get("tombstone_compaction_interval")
                .and_then(|v| v.parse::<i64>().ok())
                .filter(|s| *s >= 0)
                .unwrap_or(DEFAULT_INTERVAL_SECS),
        }
    }
}

/// One table's deletion markers written and its tombstone compactions.
/// Shared by the successive `TableStore`s of one table (new on TRUNCATE).
pub(crate) struct Markers {
    /// Markers written, by bucket (local deletion time rounded down to
    /// `BUCKET_SECS`).
    counts: Mutex<BTreeMap<i64, u64>>,
    /// When the last tombstone compaction of the table ended (unix seconds),
    /// or when counting began.
    pub last_purge: AtomicI64,
    /// Tombstone compactions run on the table.
    pub purges: AtomicU64,
    /// Changed since the last `save`.
    dirty: AtomicBool,
}

/// One table's `Markers` as `FILE` keeps them.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub(crate) struct SavedMarkers {
    /// (bucket, markers) pairs, oldest first.
    buckets: Vec<(i64, u64)>,
    last_purge: i64,
    purges: u64,
}

/// `FILE`'s content: each table's markers by table id.
#[derive(Serialize, Deserialize, Default)]
pub(crate) struct Saved {
    pub tables: BTreeMap<Uuid, SavedMarkers>,
}

impl Markers {
    pub fn new(now: i64) -> Markers {
        Markers {
            counts: Mutex::new(BTreeMap::new()),
            last_purge: AtomicI64::new(now),
            purges: AtomicU64::new(0),
            dirty: AtomicBool::new(false),
        }
    }

    /// The markers `save` kept.
    pub fn restored(saved: &SavedMarkers) -> Markers {
        let mut counts = BTreeMap::new();
        for &(bucket, n) in &saved.buckets {
            *counts.entry(bucket).or_insert(0) += n;
            fold_oldest(&mut counts);
        }
        Markers {
            counts: Mutex::new(counts),
            last_purge: AtomicI64::new(saved.last_purge),
            purges: AtomicU64::new(saved.purges),
            dirty: AtomicBool::new(false),
        }
    }

    /// What `save` keeps of these markers.
    pub fn saved(&self) -> SavedMarkers {
        SavedMarkers {
            buckets: lock(&self.counts).iter().map(|(&b, &n)| (b, n)).collect(),
            last_purge: self.last_purge.load(Ordering::Relaxed),
            purges: self.purges.load(Ordering::Relaxed),
        }
    }

    /// Whether these markers changed since `take_dirty` last said so.
    pub fn take_dirty(&self) -> bool {
        self.dirty.swap(false, Ordering::Relaxed)
    }

    /// Counts one tombstone compaction of the table.
    pub fn count_purge(&self) {
        self.purges.fetch_add(1, Ordering::Relaxed);
        self.mark_dirty();
    }

    /// Marks these markers changed (a save that failed).
    pub fn mark_dirty(&self) {
        self.dirty.store(true, Ordering::Relaxed);
    }

    /// Counts one marker deleted at `local_deletion_time` (unix seconds).
    pub fn add(&self, local_deletion_time: i32) {
        let bucket = i64::from(local_deletion_time).div_euclid(BUCKET_SECS) * BUCKET_SECS;
        let mut counts = lock(&self.counts);
        self.dirty.store(true, Ordering::Relaxed);
        *counts.entry(bucket).or_insert(0) += 1;
        fold_oldest(&mut counts);
    }

    /// Markers surely deleted before `gc_before` (whole buckets only).
    pub fn droppable(&self, gc_before: i64) -> u64 {
        lock(&self.counts).range(..gc_before.saturating_sub(BUCKET_SECS).saturating_add(1)).map(|(_, n)| n).sum()
    }

    /// Markers counted and not yet forgotten.
    pub fn total(&self) -> u64 {
        lock(&self.counts).values().sum()
    }

    /// Forgets the markers a purge with this `gc_before` dropped, and marks
    /// the purge's end at `now`.
    pub fn purged(&self, gc_before: i64, now: i64) {
        let mut counts = lock(&self.counts);
        let kept = counts.split_off(&gc_before.saturating_sub(BUCKET_SECS).saturating_add(1));
        *counts = kept;
        self.last_purge.store(now, Ordering::Relaxed);
        self.dirty.store(true, Ordering::Relaxed);
    }
}

/// Past `MAX_BUCKETS`, folds the oldest bucket into the next.
fn fold_oldest(counts: &mut BTreeMap<i64, u64>) {
    if counts.len() > MAX_BUCKETS {
        if let Some((_, n)) = counts.pop_first() {
            if let Some(mut next) = counts.first_entry() {
                *next.get_mut() += n;
            }
        }
    }
}

/// Writes every table's markers to `dir/FILE` (through a temporary file,
/// then renamed).
pub(crate) fn save(dir: &Path, tables: &[(Uuid, &Markers)]) -> std::io::Result<()> {
    let saved = Saved { tables: tables.iter().map(|(id, m)| (*id, m.saved())).collect() };
    let bytes = serde_json::to_vec(&saved).map_err(std::io::Error::other)?;
    crate::manifest::write_durably(dir, FILE, &bytes)
}

/// What `save` wrote in `dir`: nothing when there is no file; nothing, with
/// a warning, when it is damaged (counts are an estimate: see the module).
pub(crate) fn load(dir: &Path) -> std::io::Result<Saved> {
    let path = dir.join(FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Saved::default()),
        Err(e) => return Err(e),
    };
    Ok(serde_json::from_slice(&bytes).unwrap_or_else(|e| {
        tracing::warn!(file = %path.display(), "damaged tombstone marker counts, counting from zero: {e}");
        Saved::default()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn droppable_counts_whole_buckets_before_gc_before() {
        let m = Markers::new(0);
        m.add(100); // bucket [100, 110)
        m.add(109);
        m.add(110); // bucket [110, 120)
        assert_eq!(m.total(), 3);
        assert_eq!(m.droppable(109), 0);
        assert_eq!(m.droppable(110), 2);
        assert_eq!(m.droppable(119), 2);
        assert_eq!(m.droppable(120), 3);
        m.purged(115, 500);
        assert_eq!(m.total(), 1);
        assert_eq!(m.droppable(i64::MAX), 1);
        assert_eq!(m.last_purge.load(Ordering::Relaxed), 500);
    }

    #[test]
    fn markers_saved_and_loaded_are_the_same_and_a_damaged_file_counts_nothing() {
        let dir = tempfile::tempdir().expect("dir");
        assert!(load(dir.path()).expect("no file").tables.is_empty());
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let ma = Markers::new(7);
        assert!(!ma.take_dirty());
        ma.add(100);
        ma.add(105);
        ma.add(230);
        ma.purges.store(3, Ordering::Relaxed);
        assert!(ma.take_dirty() && !ma.take_dirty());
        let mb = Markers::new(9);
        save(dir.path(), &[(a, &ma), (b, &mb)]).expect("save");
        let loaded = load(dir.path()).expect("load");
        assert_eq!(loaded.tables.len(), 2);
        let back = Markers::restored(&loaded.tables[&a]);
        assert_eq!(back.saved(), ma.saved());
        assert_eq!((back.total(), back.droppable(120)), (3, 2));
        assert_eq!(back.last_purge.load(Ordering::Relaxed), 7);
        assert_eq!(back.purges.load(Ordering::Relaxed), 3);
        assert!(!back.take_dirty());
        assert_eq!(Markers::restored(&loaded.tables[&b]).saved(), mb.saved());
        std::fs::write(dir.path().join(FILE), b"{\"tables\": [1, 2").expect("damage");
        assert!(load(dir.path()).expect("damaged").tables.is_empty());
    }

    #[test]
    fn random_markers_round_trip_through_the_file_with_the_same_counts_at_every_gc_before() {
        use rand::{Rng, SeedableRng};
        let dir = tempfile::tempdir().expect("dir");
        let mut rng = rand::rngs::StdRng::seed_from_u64(42);
        for round in 0..20 {
            let m = Markers::new(rng.gen_range(0..1_000_000));
            // Empty, a few, and past MAX_BUCKETS (folded) sets of buckets, negative times included.
            let n = [0, 1, 50, MAX_BUCKETS + 300][round % 4];
            for _ in 0..n {
                m.add(rng.gen_range(-200_000..200_000));
            }
            if rng.gen_bool(0.5) {
                m.purged(rng.gen_range(-200_000..200_000), rng.gen_range(0..1_000_000));
            }
            let id = Uuid::from_u128(round as u128);
            save(dir.path(), &[(id, &m)]).expect("save");
            let back = Markers::restored(&load(dir.path()).expect("load").tables[&id]);
            assert_eq!(back.saved(), m.saved(), "round {round}");
            for _ in 0..20 {
                let gc_before = rng.gen_range(-250_000..250_000);
                assert_eq!(back.droppable(gc_before), m.droppable(gc_before), "round {round}, gc_before {gc_before}");
            }
            assert!(lock(&back.counts).len() <= MAX_BUCKETS);
        }
    }

    #[test]
    fn buckets_are_bounded_and_fold_forward() {
        let m = Markers::new(0);
        for i in 0..(MAX_BUCKETS as i32 + 10) {
            m.add(i * BUCKET_SECS as i32);
        }
        assert!(lock(&m.counts).len() <= MAX_BUCKETS);
        assert_eq!(m.total(), MAX_BUCKETS as u64 + 10);
        // Folded markers look younger, never older.
        assert_eq!(m.droppable(BUCKET_SECS * 5), 0);
    }

    #[test]
    fn options_parse_cassandra_names() {
        let mut o = TableOptions::default();
        assert_eq!(
            PurgeOptions::of(&o),
            PurgeOptions { enabled: true, threshold: DEFAULT_THRESHOLD, interval_secs: DEFAULT_INTERVAL_SECS }
        );
        o.compaction.insert("tombstone_threshold".into(), "0.5".into());
        o.compaction.insert("tombstone_compaction_interval".into(), " 5 ".into());
        o.compaction.insert("enabled".into(), "False".into());
        assert_eq!(PurgeOptions::of(&o), PurgeOptions { enabled: false, threshold: 0.5, interval_secs: 5 });
        o.compaction.insert("tombstone_threshold".into(), "-1".into());
        o.compaction.insert("tombstone_compaction_interval".into(), "soon".into());
        let p = PurgeOptions::of(&o);
        assert_eq!((p.threshold, p.interval_secs), (DEFAULT_THRESHOLD, DEFAULT_INTERVAL_SECS));
    }
}
