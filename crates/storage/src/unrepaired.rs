//! Which token ranges of each table hold writes no repair has compared yet:
//! what makes repair incremental (issue 21). A range whose replicas all
//! agreed at the last repair, and that none of them has written since, is
//! not compared again.
//!
//! The node gives storage the ring's tokens (`Storage::set_ring`): sorted
//! bounds `b_0 < ... < b_{n-1}` cut the ring into the ranges `(b_{i-1}, b_i]`,
//! range 0 being the one that wraps, `(b_{n-1}, b_0]` (no bounds: one range,
//! the whole ring). Per table and range there are two numbers: a write
//! generation, bumped after every write that lands in the range (`mark`),
//! and the generation at which a repair last found the range's replicas
//! agreeing (`clean_at`). The range is repaired while the two are equal. A
//! repair asks every replica for the state of its ranges (`states`) before
//! it compares them; once it finished a range it tells each replica the
//! generation that replica reported (`set_repaired`), which marks the range
//! repaired there only if nothing was written in it since.
//!
//! Invariants:
//! - A write is marked after it is in its memtable: a repair that read a
//!   generation the write had not bumped yet compares data that may lack
//!   the write, and the bump keeps the range unrepaired after it.
//! - Generations only grow: they start at the open's wall-clock
//!   microseconds, and a range cut anew (`set_ring`) starts above every
//!   generation of the ranges it overlaps, so a generation reported before a
//!   restart or a ring change never matches again.
//! - What is repaired survives only a clean shutdown (`save`, from
//!   `Storage::shutdown`); `load` removes the file, so after a crash every
//!   range of every table is unrepaired (the commit log replay marks
//!   nothing). A table with no state yet is unrepaired everywhere.
//! - A range asked about that is not exactly one of this node's ranges (the
//!   views of a topology change disagree) is reported unrepaired and never
//!   marked repaired.
//! - A range cut anew is repaired only if every range it overlaps was.
//! - Streamed files, cleanup and TRUNCATE make every range of the table
//!   unrepaired (`forget`).

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use uuid::Uuid;

use crate::engine::{read_lock, write_lock};

/// A `clean_at` no generation reaches: never repaired.
const NEVER: u64 = u64::MAX;
/// The saved state's file in the data directory.
pub(crate) const FILE: &str = "unrepaired.state";
const MAGIC: &[u8; 8] = b"SHOALUR1";

/// What a replica says of one range it was asked about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RangeState {
    /// Every write in the range was compared by a repair that found the
    /// replicas agreeing.
    pub repaired: bool,
    /// The range's write generation now (what `set_repaired` is given back).
    pub generation: u64,
}

/// One table's generations, one pair per range of `bounds`.
struct Marks {
    generation: Box<[AtomicU64]>,
    clean_at: Box<[AtomicU64]>,
}

impl Marks {
    fn new(ranges: usize, generation: u64, repaired: impl Fn(usize) -> bool) -> Marks {
        Marks {
            generation: (0..ranges).map(|_| AtomicU64::new(generation)).collect(),
            clean_at: (0..ranges).map(|i| AtomicU64::new(if repaired(i) { generation } else { NEVER })).collect(),
        }
    }

    fn repaired(&self, i: usize) -> bool {
        match (self.generation.get(i), self.clean_at.get(i)) {
            (Some(g), Some(c)) => g.load(Ordering::SeqCst) == c.load(Ordering::SeqCst),
            _ => false,
        }
    }
}

#[derive(Default)]
struct Inner {
    bounds: Vec<i64>,
    tables: HashMap<Uuid, Arc<Marks>>,
}

/// See the module docs.
pub(crate) struct Unrepaired {
    inner: RwLock<Inner>,
    /// The first generation of every range at open.
    epoch: u64,
}

/// The range of `bounds` holding `token`.
fn index(bounds: &[i64], token: i64) -> usize {
    let i = bounds.partition_point(|b| *b < token);
    if i >= bounds.len() {
        0
    } else {
        i
    }
}

/// The index of the range that is exactly `(start, end]`, if one is.
fn exact(bounds: &[i64], (start, end): (i64, i64)) -> Option<usize> {
    match bounds {
        [] => (start == end).then_some(0),
        [only] => (start == end && end == *only).then_some(0),
        _ => {
            let i = index(bounds, end);
            let prev = bounds.get((i + bounds.len() - 1) % bounds.len())?;
            (bounds.get(i) == Some(&end) && *prev == start).then_some(i)
        }
    }
}

/// The ranges of `old` that `(start, end]` overlaps (every one for the whole ring).
fn overlapped(old: &[i64], (start, end): (i64, i64)) -> Vec<usize> {
    let n = old.len().max(1);
    if start == end || old.len() <= 1 {
        return (0..n).collect();
    }
    // Bounds strictly inside the range: each one crossed enters the next range.
    let below = |x: i64| old.partition_point(|b| *b < x);
    let at_or_below = |x: i64| old.partition_point(|b| *b <= x);
    let crossed =
        if start < end { below(end) - at_or_below(start) } else { (old.len() - at_or_below(start)) + below(end) };
    let first = index(old, start.wrapping_add(1));
    (0..(crossed + 1).min(n)).map(|k| (first + k) % n).collect()
}

impl Unrepaired {
    pub(crate) fn new() -> Unrepaired {
        let epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| u64::try_from(d.as_micros()).unwrap_or(1));
        Unrepaired { inner: RwLock::new(Inner::default()), epoch }
    }

    /// Bumps the generation of each range the tokens land in (in any order;
    /// a run of one token is counted once). Called after the writes are in
    /// their memtables.
    pub(crate) fn mark(&self, table: &Uuid, tokens: impl Iterator<Item = i64>) {
        let inner = read_lock(&self.inner);
        let Some(marks) = inner.tables.get(table) else { return };
        let mut last = None;
        for token in tokens {
            if last == Some(token) {
                continue;
            }
            last = Some(token);
            if let Some(g) = marks.generation.get(index(&inner.bounds, token)) {
                g.fetch_add(1, Ordering::SeqCst);
            }
        }
    }

    /// Cuts the ring anew at `tokens` (any order, duplicates ignored). A new
    /// range is repaired only if every old range it overlaps was.
    pub(crate) fn set_ring(&self, tokens: &[i64]) {
        let mut bounds = tokens.to_vec();
        bounds.sort_unstable();
        bounds.dedup();
        let mut inner = write_lock(&self.inner);
        if inner.bounds == bounds {
            return;
        }
        let old = std::mem::take(&mut inner.bounds);
        let ranges = ranges_of(&bounds);
        for marks in inner.tables.values_mut() {
            let cut: Vec<(bool, u64)> = ranges
                .iter()
                .map(|range| {
                    let parts = overlapped(&old, *range);
                    let repaired = parts.iter().all(|i| marks.repaired(*i));
                    let top = parts
                        .iter()
                        .filter_map(|i| marks.generation.get(*i).map(|g| g.load(Ordering::SeqCst)))
                        .max()
                        .unwrap_or(self.epoch);
                    (repaired, top.saturating_add(1))
                })
                .collect();
            *marks = Arc::new(Marks {
                generation: cut.iter().map(|(_, g)| AtomicU64::new(*g)).collect(),
                clean_at: cut.iter().map(|(r, g)| AtomicU64::new(if *r { *g } else { NEVER })).collect(),
            });
        }
        inner.bounds = bounds;
    }

    /// The state of each of `ranges` of `table` (a table asked about for the
    /// first time starts unrepaired everywhere).
    pub(crate) fn states(&self, table: &Uuid, ranges: &[(i64, i64)]) -> Vec<RangeState> {
        if !read_lock(&self.inner).tables.contains_key(table) {
            let mut inner = write_lock(&self.inner);
            let n = inner.bounds.len().max(1);
            let epoch = self.epoch;
            inner.tables.entry(*table).or_insert_with(|| Arc::new(Marks::new(n, epoch, |_| false)));
        }
        let inner = read_lock(&self.inner);
        let Some(marks) = inner.tables.get(table) else {
            // Forgotten meanwhile: unrepaired.
            return ranges.iter().map(|_| RangeState { repaired: false, generation: 0 }).collect();
        };
        ranges
            .iter()
            .map(|range| match exact(&inner.bounds, *range) {
                Some(i) => RangeState {
                    repaired: marks.repaired(i),
                    generation: marks.generation.get(i).map_or(0, |g| g.load(Ordering::SeqCst)),
                },
                None => RangeState { repaired: false, generation: 0 },
            })
            .collect()
    }

    /// Marks each range repaired whose generation is still the one given
    /// (nothing was written in it since a repair read it). Returns how many were.
    pub(crate) fn set_repaired(&self, table: &Uuid, ranges: &[((i64, i64), u64)]) -> usize {
        let inner = read_lock(&self.inner);
        let Some(marks) = inner.tables.get(table) else { return 0 };
        let mut done = 0;
        for (range, generation) in ranges {
            let Some(i) = exact(&inner.bounds, *range) else { continue };
            let (Some(g), Some(c)) = (marks.generation.get(i), marks.clean_at.get(i)) else { continue };
            if g.load(Ordering::SeqCst) == *generation {
                c.store(*generation, Ordering::SeqCst);
                // A write that bumped the generation meanwhile keeps it unrepaired.
                done += 1;
            }
        }
        done
    }

    /// Every range of `table` becomes unrepaired.
    pub(crate) fn forget(&self, table: &Uuid) {
        let inner = read_lock(&self.inner);
        let Some(marks) = inner.tables.get(table) else { return };
        for (g, c) in marks.generation.iter().zip(marks.clean_at.iter()) {
            g.fetch_add(1, Ordering::SeqCst);
            c.store(NEVER, Ordering::SeqCst);
        }
    }

    /// Ranges of `table` repaired, and ranges in all.
    pub(crate) fn count(&self, table: &Uuid) -> (usize, usize) {
        let inner = read_lock(&self.inner);
        let n = inner.bounds.len().max(1);
        match inner.tables.get(table) {
            Some(marks) => ((0..n).filter(|i| marks.repaired(*i)).count(), n),
            None => (0, n),
        }
    }

    /// Writes the ring and each table's repaired ranges to `dir/FILE`
    /// (through a temporary file, then renamed).
    pub(crate) fn save(&self, dir: &Path) -> std::io::Result<()> {
        let inner = read_lock(&self.inner);
        let n = inner.bounds.len().max(1);
        let mut out = Vec::with_capacity(16 + 8 * inner.bounds.len() + inner.tables.len() * (16 + n / 8 + 1));
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(inner.bounds.len() as u64).to_be_bytes());
        for b in &inner.bounds {
            out.extend_from_slice(&b.to_be_bytes());
        }
        out.extend_from_slice(&(inner.tables.len() as u64).to_be_bytes());
        for (table, marks) in &inner.tables {
            out.extend_from_slice(table.as_bytes());
            let mut bits = vec![0u8; n.div_ceil(8)];
            for i in (0..n).filter(|i| marks.repaired(*i)) {
                if let Some(byte) = bits.get_mut(i / 8) {
                    *byte |= 1 << (i % 8);
                }
            }
            out.extend_from_slice(&bits);
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_be_bytes());
        crate::manifest::write_durably(dir, FILE, &out)
    }

    /// Reads what `save` wrote in `dir`, then removes it (durably): a crash
    /// from here on leaves every range unrepaired. A missing or damaged file
    /// leaves every range unrepaired.
    pub(crate) fn load(dir: &Path) -> std::io::Result<Unrepaired> {
        let me = Unrepaired::new();
        let path = dir.join(FILE);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(me),
            Err(e) => return Err(e),
        };
        match decode(&bytes) {
            Some((bounds, tables)) => {
                let n = bounds.len().max(1);
                let mut inner = write_lock(&me.inner);
                for (table, bits) in tables {
                    let repaired = |i: usize| bits.get(i / 8).is_some_and(|b| b & (1 << (i % 8)) != 0);
                    inner.tables.insert(table, Arc::new(Marks::new(n, me.epoch, repaired)));
                }
                inner.bounds = bounds;
            }
            None => tracing::warn!(file = %path.display(), "damaged repair state: every range counts as unrepaired"),
        }
        std::fs::remove_file(&path)?;
        std::fs::File::open(dir)?.sync_all()?;
        Ok(me)
    }
}

impl crate::Storage {
    /// Cuts the ring at the ring's `tokens` for repair's bookkeeping (the
    /// node calls it whenever its ring changes).
    pub fn set_ring(&self, tokens: &[i64]) {
        self.unrepaired.set_ring(tokens);
    }

    /// Whether each of `ranges` of `table` is repaired here, and its write
    /// generation (repair's first question to every replica).
    pub fn repair_states(&self, table: &Uuid, ranges: &[(i64, i64)]) -> Vec<RangeState> {
        self.unrepaired.states(table, ranges)
    }

    /// A repair found the replicas of these ranges agreeing when their
    /// generations were these: each range still at its generation is
    /// repaired. Returns how many were.
    pub fn set_repaired(&self, table: &Uuid, ranges: &[((i64, i64), u64)]) -> usize {
        self.unrepaired.set_repaired(table, ranges)
    }

    /// Ranges of `table` repaired here, and ranges in all (`tablestats`'
    /// "Percent repaired").
    pub fn repaired_ranges(&self, table: &Uuid) -> (usize, usize) {
        self.unrepaired.count(table)
    }
}

/// The ranges `bounds` cut the ring into, by index.
fn ranges_of(bounds: &[i64]) -> Vec<(i64, i64)> {
    match bounds {
        [] => vec![(0, 0)],
        [only] => vec![(*only, *only)],
        _ => (0..bounds.len())
            .filter_map(|i| Some((*bounds.get((i + bounds.len() - 1) % bounds.len())?, *bounds.get(i)?)))
            .collect(),
    }
}

type Decoded = (Vec<i64>, Vec<(Uuid, Vec<u8>)>);

fn decode(bytes: &[u8]) -> Option<Decoded> {
    let (body, crc) = bytes.split_last_chunk::<4>()?;
    if crc32c::crc32c(body) != u32::from_be_bytes(*crc) {
        return None;
    }
    let rest = body.strip_prefix(MAGIC)?;
    let (count, mut rest) = rest.split_first_chunk::<8>()?;
    let count = usize::try_from(u64::from_be_bytes(*count)).ok()?;
    let mut bounds = Vec::with_capacity(count.min(1 << 20));
    for _ in 0..count {
        let (b, r) = rest.split_first_chunk::<8>()?;
        bounds.push(i64::from_be_bytes(*b));
        rest = r;
    }
    let n = bounds.len().max(1);
    let (count, mut rest) = rest.split_first_chunk::<8>()?;
    let count = usize::try_from(u64::from_be_bytes(*count)).ok()?;
    let mut tables = Vec::with_capacity(count.min(1 << 16));
    for _ in 0..count {
        let (id, r) = rest.split_first_chunk::<16>()?;
        let (bits, r) = r.split_at_checked(n.div_ceil(8))?;
        tables.push((Uuid::from_bytes(*id), bits.to_vec()));
        rest = r;
    }
    rest.is_empty().then_some((bounds, tables))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn contains((start, end): (i64, i64), t: i64) -> bool {
        if start < end {
            start < t && t <= end
        } else {
            t > start || t <= end
        }
    }

    #[test]
    fn ranges_and_indices_agree() {
        let bounds = [-10, 0, 25];
        assert_eq!(ranges_of(&bounds), vec![(25, -10), (-10, 0), (0, 25)]);
        for t in -40..40 {
            let i = index(&bounds, t);
            assert!(contains(ranges_of(&bounds)[i], t), "token {t} in range {i}");
        }
        assert_eq!(exact(&bounds, (-10, 0)), Some(1));
        assert_eq!(exact(&bounds, (25, -10)), Some(0));
        assert_eq!(exact(&bounds, (-10, 25)), None);
        assert_eq!(exact(&[], (5, 5)), Some(0));
        assert_eq!(exact(&[7], (7, 7)), Some(0));
        assert_eq!(exact(&[7], (6, 7)), None);
    }

    #[test]
    fn overlapped_matches_brute_force() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for _ in 0..500 {
            let old: Vec<i64> = {
                let mut v: Vec<i64> = (0..rng.gen_range(0..6)).map(|_| rng.gen_range(-50..50)).collect();
                v.sort_unstable();
                v.dedup();
                v
            };
            let new: Vec<i64> = {
                let mut v: Vec<i64> = (0..rng.gen_range(1..6)).map(|_| rng.gen_range(-50..50)).collect();
                v.sort_unstable();
                v.dedup();
                v
            };
            for range in ranges_of(&new) {
                let mut want: Vec<usize> = (-60..60).filter(|t| contains(range, *t)).map(|t| index(&old, t)).collect();
                want.sort_unstable();
                want.dedup();
                let mut got = overlapped(&old, range);
                got.sort_unstable();
                assert_eq!(got, want, "old {old:?} range {range:?}");
            }
        }
    }

    #[test]
    fn a_range_is_repaired_until_written() {
        let u = Unrepaired::new();
        let t = Uuid::from_u128(1);
        u.set_ring(&[0, 100]);
        let ranges = [(100, 0), (0, 100)];
        let s = u.states(&t, &ranges);
        assert!(s.iter().all(|s| !s.repaired), "a table never repaired is unrepaired");
        assert_eq!(u.set_repaired(&t, &[(ranges[0], s[0].generation), (ranges[1], s[1].generation)]), 2);
        assert!(u.states(&t, &ranges).iter().all(|s| s.repaired));
        u.mark(&t, [50].into_iter());
        let now = u.states(&t, &ranges);
        assert!(now[0].repaired && !now[1].repaired, "{now:?}");
        // A generation read before the write does not make it repaired.
        assert_eq!(u.set_repaired(&t, &[(ranges[1], s[1].generation)]), 0);
        assert!(!u.states(&t, &ranges)[1].repaired);
        assert_eq!(u.set_repaired(&t, &[(ranges[1], now[1].generation)]), 1);
        assert_eq!(u.count(&t), (2, 2));
        // A range asked about that is not one of ours is unrepaired, and stays so.
        let other = u.states(&t, &[(0, 50)]);
        assert!(!other[0].repaired);
        assert_eq!(u.set_repaired(&t, &[((0, 50), other[0].generation)]), 0);
        u.forget(&t);
        assert!(u.states(&t, &ranges).iter().all(|s| !s.repaired));
    }

    #[test]
    fn a_new_cut_keeps_what_was_repaired_and_never_reuses_a_generation() {
        let u = Unrepaired::new();
        let t = Uuid::from_u128(2);
        u.set_ring(&[0, 100, 200]);
        let ranges = ranges_of(&[0, 100, 200]);
        let s = u.states(&t, &ranges);
        // Repair (0, 100] and (100, 200], not the wrapping one.
        u.set_repaired(&t, &[(ranges[1], s[1].generation), (ranges[2], s[2].generation)]);
        // A node joins at 50 and one at 250.
        u.set_ring(&[0, 50, 100, 200, 250]);
        let cut = [(0, 50), (50, 100), (100, 200), (200, 250), (250, 0)];
        let after = u.states(&t, &cut);
        assert_eq!(after.iter().map(|s| s.repaired).collect::<Vec<_>>(), vec![true, true, true, false, false]);
        // A generation from before the cut never matches a range of the new one.
        assert_eq!(u.set_repaired(&t, &[((100, 200), s[2].generation)]), 0);
        assert!(after.iter().all(|a| s.iter().all(|b| a.generation > b.generation)));
        // A node leaves: (100, 250] merges a repaired and an unrepaired range.
        u.set_ring(&[0, 50, 100, 250]);
        let merged = u.states(&t, &[(100, 250), (0, 50)]);
        assert_eq!(merged.iter().map(|s| s.repaired).collect::<Vec<_>>(), vec![false, true]);
    }

    #[test]
    fn repaired_ranges_survive_a_clean_shutdown_only() {
        let dir = tempfile::tempdir().unwrap();
        let t = Uuid::from_u128(3);
        let u = Unrepaired::load(dir.path()).unwrap();
        u.set_ring(&[0, 100]);
        let ranges = [(100, 0), (0, 100)];
        let s = u.states(&t, &ranges);
        u.set_repaired(&t, &[(ranges[1], s[1].generation)]);
        u.save(dir.path()).unwrap();
        let again = Unrepaired::load(dir.path()).unwrap();
        let s2 = again.states(&t, &ranges);
        assert_eq!((s2[0].repaired, s2[1].repaired), (false, true));
        assert!(s2[1].generation > s[1].generation || s2[1].generation >= again.epoch);
        // load removed the file: a crash now (no save) forgets everything.
        let crashed = Unrepaired::load(dir.path()).unwrap();
        assert!(crashed.states(&t, &ranges).iter().all(|s| !s.repaired));
        // A damaged file counts as nothing repaired.
        again.save(dir.path()).unwrap();
        let path = dir.path().join(FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        if let Some(b) = bytes.get_mut(12) {
            *b ^= 0xFF;
        }
        std::fs::write(&path, bytes).unwrap();
        let damaged = Unrepaired::load(dir.path()).unwrap();
        assert!(damaged.states(&t, &ranges).iter().all(|s| !s.repaired));
    }
}
