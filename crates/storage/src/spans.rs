//! Which SSTables a partition read goes through (Cassandra's
//! `Table.SSTablesPerReadHistogram`, nodetool tablehistograms' "SSTables"):
//! the live files of the table whose key range meets the partition's.
//!
//! A partition of a table with clustering columns is read with one RocksDB
//! iterator over the partition's key range (`read::traverse`), and Shoal's
//! bloom filters are whole-key ones that an iterator does not consult, so
//! every file whose [smallest, largest] key range meets the partition's is
//! sought into: the files of level 0 that overlap it, and at most a few per
//! deeper level. That count is what this module gives, from a copy of every
//! column family's file spans (`DB::live_files`), sorted per level.
//!
//! A partition of a table without clustering columns is read with point
//! lookups (`Storage::cells`), which do consult the bloom filters: for it the
//! count is the files that could hold the partition, an upper bound of those
//! read (a file whose filter rules the key out is counted, not read; RocksDB
//! does not tell which filters said no for one read through its C API).
//!
//! Invariants:
//! - The copy is at most `REFRESH` old (flushes and compactions change the
//!   files; a read in between counts against the files of up to `REFRESH`
//!   ago), or newer: `invalidate` after a flush this node made.
//! - One reader at a time refreshes the copy, outside the lock readers take;
//!   the others count against the copy they find.
//! - Counting never fails a read: a `live_files` error keeps the old copy.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// The longest a copy of the file spans is used.
const REFRESH: Duration = Duration::from_millis(250);

/// One file's key range, inclusive.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Span {
    smallest: Vec<u8>,
    largest: Vec<u8>,
}

/// A column family's files, by level; each level after 0 sorted by `smallest`.
type Levels = Vec<Vec<Span>>;

/// Every column family's files, and when they were listed.
type Listed = (Instant, Arc<HashMap<String, Levels>>);

/// What `list` gives: each live file's column family, level, smallest and largest key.
type Listing = Vec<(String, i32, Vec<u8>, Vec<u8>)>;

#[derive(Default)]
pub(crate) struct FileSpans {
    copy: RwLock<Option<Listed>>,
    refreshing: AtomicBool,
}

impl FileSpans {
    /// Forgets the copy: the next count reads the files again.
    pub(crate) fn invalidate(&self) {
        *self.copy.write().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// The files of column family `cf` whose key range meets
    /// `[lower, upper)`; `list` gives every live file as
    /// (column family, level, smallest, largest) when the copy is stale.
    pub(crate) fn count<L>(&self, cf: &str, lower: &[u8], upper: &[u8], list: L) -> u64
    where
        L: FnOnce() -> Option<Listing>,
    {
        let current = self.copy.read().unwrap_or_else(|p| p.into_inner()).clone();
        let fresh = current.as_ref().filter(|(at, _)| at.elapsed() < REFRESH).map(|(_, c)| Arc::clone(c));
        let copy = match fresh {
            Some(c) => c,
            None => match self.refresh(list) {
                Some(c) => c,
                None => match current {
                    Some((_, c)) => c,
                    None => return 0,
                },
            },
        };
        copy.get(cf).map_or(0, |levels| meeting(levels, lower, upper))
    }

    fn refresh<L>(&self, list: L) -> Option<Arc<HashMap<String, Levels>>>
    where
        L: FnOnce() -> Option<Listing>,
    {
        if self.refreshing.swap(true, Ordering::Acquire) {
            return None;
        }
        let built = list().map(|files| Arc::new(by_level(files)));
        if let Some(c) = &built {
            *self.copy.write().unwrap_or_else(|p| p.into_inner()) = Some((Instant::now(), Arc::clone(c)));
        }
        self.refreshing.store(false, Ordering::Release);
        built
    }
}

fn by_level(files: Listing) -> HashMap<String, Levels> {
    let mut out: HashMap<String, Levels> = HashMap::new();
    for (cf, level, smallest, largest) in files {
        let levels = out.entry(cf).or_default();
        let level = usize::try_from(level).unwrap_or(0);
        if levels.len() <= level {
            levels.resize_with(level + 1, Vec::new);
        }
        if let Some(l) = levels.get_mut(level) {
            l.push(Span { smallest, largest });
        }
    }
    for levels in out.values_mut() {
        for l in levels.iter_mut() {
            l.sort_by(|a, b| a.smallest.cmp(&b.smallest));
        }
    }
    out
}

/// The spans of `levels` that meet `[lower, upper)`: level 0 one by one
/// (its files overlap), deeper levels by binary search (theirs do not).
fn meeting(levels: &Levels, lower: &[u8], upper: &[u8]) -> u64 {
    let meets = |s: &Span| s.smallest.as_slice() < upper && s.largest.as_slice() >= lower;
    let mut n = 0;
    for (level, spans) in levels.iter().enumerate() {
        if level == 0 {
            n += spans.iter().filter(|s| meets(s)).count() as u64;
            continue;
        }
        // The first file that does not end before `lower`; the files from it on that start before `upper`.
        let first = spans.partition_point(|s| s.largest.as_slice() < lower);
        n += spans.get(first..).unwrap_or_default().iter().take_while(|s| s.smallest.as_slice() < upper).count() as u64;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(cf: &str, level: i32, smallest: &[u8], largest: &[u8]) -> (String, i32, Vec<u8>, Vec<u8>) {
        (cf.to_string(), level, smallest.to_vec(), largest.to_vec())
    }

    #[test]
    fn counts_the_overlapping_files_of_level_0_and_one_range_per_deeper_level() {
        let spans = FileSpans::default();
        let files = vec![
            file("t", 0, b"a", b"z"),
            file("t", 0, b"m", b"p"),
            file("t", 0, b"q", b"r"),
            file("t", 1, b"a", b"f"),
            file("t", 1, b"g", b"n"),
            file("t", 1, b"o", b"z"),
            file("t", 2, b"a", b"c"),
            file("t", 2, b"d", b"y"),
            file("other", 0, b"a", b"z"),
        ];
        // [n, o): level 0's a-z and m-p, level 1's g-n (o-z starts at o, the exclusive end), level 2's d-y.
        assert_eq!(spans.count("t", b"n", b"o", || Some(files.clone())), 4);
        // [o, oa): a-z and m-p; o-z; d-y.
        assert_eq!(spans.count("t", b"o", b"oa", || None), 4, "the copy is reused");
        assert_eq!(spans.count("t", b"zz", b"zzz", || None), 0);
        assert_eq!(spans.count("none", b"a", b"b", || None), 0);
        spans.invalidate();
        assert_eq!(spans.count("t", b"n", b"o", || Some(vec![file("t", 0, b"a", b"b")])), 0, "read again");
    }

    /// Random levels (level 0 overlapping, deeper levels disjoint and
    /// sorted, keys one or two bytes so bounds often touch) and random
    /// ranges: `meeting` agrees with testing every file.
    #[test]
    fn meeting_agrees_with_testing_every_file() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let key = |rng: &mut rand::rngs::StdRng| -> Vec<u8> {
            (0..rng.gen_range(1..=2)).map(|_| rng.gen_range(b'a'..=b'h')).collect()
        };
        for _ in 0..2000 {
            let mut levels: Levels = vec![Vec::new()];
            for _ in 0..rng.gen_range(0..4) {
                let (a, b) = (key(&mut rng), key(&mut rng));
                levels[0].push(Span { smallest: a.clone().min(b.clone()), largest: a.max(b) });
            }
            for _ in 0..rng.gen_range(0..3) {
                // Disjoint files: consecutive pairs of sorted distinct cut points.
                let mut cuts: Vec<Vec<u8>> = (0..rng.gen_range(0..8)).map(|_| key(&mut rng)).collect();
                cuts.sort();
                cuts.dedup();
                levels.push(
                    cuts.chunks_exact(2).map(|c| Span { smallest: c[0].clone(), largest: c[1].clone() }).collect(),
                );
            }
            let (lower, upper) = (key(&mut rng), key(&mut rng));
            let brute = levels
                .iter()
                .flatten()
                .filter(|s| s.smallest.as_slice() < upper.as_slice() && s.largest.as_slice() >= lower.as_slice())
                .count() as u64;
            assert_eq!(meeting(&levels, &lower, &upper), brute, "{levels:?} [{lower:?}, {upper:?})");
        }
    }

    #[test]
    fn a_failed_listing_counts_nothing_until_one_succeeds() {
        let spans = FileSpans::default();
        assert_eq!(spans.count("t", b"a", b"b", || None), 0);
        assert_eq!(spans.count("t", b"a", b"b", || Some(vec![file("t", 0, b"a", b"z")])), 1);
    }
}
