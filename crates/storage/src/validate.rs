//! Validation for repair (issue 21): a hash of every partition of a token
//! range, so replicas can tell which partitions differ without sending their
//! data (ScyllaDB's row-level repair compares hashes the same way; a
//! partition is the unit here). Repair then fetches and reconciles only the
//! partitions whose hashes differ (`raw`: `read_raw`, `merge_raw`,
//! `repair_diff`, `apply_raw`).
//!
//! A partition's hash is the digest of its raw read (`read_raw`: every cell
//! and deletion marker as reconciled at `now`, what digest reads compare),
//! so two replicas that hold the same writes hash alike however their
//! files are laid out or compacted.
//!
//! Repair first compares `bucket_hashes`: one hash per equal token slice
//! of the range (a Merkle tree's leaves), so only the slices that differ
//! are compared partition by partition; the wire then carries a few bytes
//! per slice instead of ~40 per partition.
//!
//! Invariants:
//! - Pages are in token order and never overlap: a page resumes strictly
//!   after the last partition of the one before it.
//! - Slice `i` of `buckets` over `(start, end]` is `bucket_range(.., i)`, and
//!   a token lies in slice `bucket_of(..)`: the two agree, the slices are
//!   disjoint, none is empty, and together they are the range.

#![deny(clippy::indexing_slicing)]

use uuid::Uuid;

use crate::engine::Storage;
use crate::read::{PartitionRead, ScanRange};
use crate::StorageError;

/// One partition of a range, as validation sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionHash {
    pub token: i64,
    pub key: Vec<u8>,
    /// The first 8 bytes of the partition's raw digest.
    pub hash: u64,
    /// Bytes of the partition's raw data: what repairing it moves at most.
    pub bytes: u64,
}

impl Storage {
    /// The hashes of the partitions of `table` in the token range `(start,
    /// end]` (wrapping; `start == end` is the whole ring), in token order,
    /// strictly after the partition `after` (from an earlier page), at most
    /// `limit` of them, read as of `now` (seconds; replicas compare at the
    /// same `now`, so TTLs expire alike). Returns the page and whether more
    /// partitions may follow.
    pub fn partition_hashes(
        &self,
        table: &Uuid,
        range: (i64, i64),
        after: Option<(i64, &[u8])>,
        limit: usize,
        now: i32,
    ) -> Result<(Vec<PartitionHash>, bool), StorageError> {
        let mut out = Vec::new();
        for (lo, hi) in token_spans(range) {
            let (start_token, after_key) = match after {
                Some((t, _)) if t > hi => continue,
                Some((t, k)) if t >= lo => (t, Some(k.to_vec())),
                _ => (lo, None),
            };
            let want = limit.saturating_sub(out.len());
            let scan = ScanRange {
                table: *table,
                start_token,
                after_key,
                end_token: hi,
                partition_limit: want,
                per_partition: PartitionRead::whole(*table, now),
                row_limit: usize::MAX,
            };
            let keys = self.scan_keys(&scan)?;
            let full = keys.len() >= want;
            for (token, key) in keys {
                let read = PartitionRead { token, partition_key: key.clone(), ..PartitionRead::whole(*table, now) };
                let raw = self.read_raw_uncounted(&read)?;
                let mut encoded = Vec::new();
                raw.encode(&mut encoded);
                let digest = raw.digest();
                let hash = digest.first_chunk::<8>().map_or(0, |d| u64::from_be_bytes(*d));
                out.push(PartitionHash { token, key, hash, bytes: encoded.len() as u64 });
            }
            if full {
                return Ok((out, true));
            }
        }
        Ok((out, false))
    }
}

/// How many slices `bucket_hashes` may cut `range` into: at most one per
/// token, so no slice is empty.
pub fn bucket_count(range: (i64, i64), wanted: u32) -> u32 {
    u32::try_from(range_width(range).min(u128::from(wanted.max(1)))).unwrap_or(1)
}

/// The slice hashes of `range` cut in `buckets` (`bucket_count`) from its
/// partitions' (token, hash) pairs in token order: each slice folds the
/// hashes of its partitions, 0 when it has none (what `bucket_hashes`
/// answers, and what a repair computes from its own partitions).
pub fn fold_buckets(range: (i64, i64), buckets: u32, hashes: impl IntoIterator<Item = (i64, u64)>) -> Vec<u64> {
    let mut out = vec![0u64; buckets as usize];
    for (token, hash) in hashes {
        if let Some(slot) = out.get_mut(bucket_of(range, buckets, token) as usize) {
            *slot = (*slot ^ hash).wrapping_mul(0x0000_0100_0000_01b3).rotate_left(17);
        }
    }
    out
}

/// The number of tokens in `(start, end]` (`start == end`: the whole ring).
fn range_width((start, end): (i64, i64)) -> u128 {
    if start == end {
        1u128 << 64
    } else {
        u128::from(end.wrapping_sub(start) as u64)
    }
}

/// The slice of `(start, end]` cut in `buckets` (`bucket_count`) that holds
/// `token` (a token of the range).
pub fn bucket_of(range: (i64, i64), buckets: u32, token: i64) -> u32 {
    let width = range_width(range);
    let mut offset = u128::from(token.wrapping_sub(range.0) as u64);
    if offset == 0 {
        // Only the whole ring holds its start token: it is its last one.
        offset = width;
    }
    u32::try_from((offset * u128::from(buckets) - 1) / width).unwrap_or(buckets.saturating_sub(1))
}

/// Slice `i` of `(start, end]` cut in `buckets` (`bucket_count`), as a
/// `(start, end]` range of its own.
pub fn bucket_range(range: (i64, i64), buckets: u32, i: u32) -> (i64, i64) {
    let width = range_width(range);
    let at = |k: u32| -> i64 {
        let offset = (u128::from(k) * width / u128::from(buckets.max(1))) as u64;
        range.0.wrapping_add(offset as i64)
    };
    (at(i), at(i + 1))
}

impl Storage {
    /// One hash per slice of `range` cut in `buckets` (`bucket_count`): the
    /// partition hashes of the slice folded in token order (0 for an empty
    /// slice), read as of `now`. Replicas holding the same data answer the
    /// same vector.
    pub fn bucket_hashes(
        &self,
        table: &Uuid,
        range: (i64, i64),
        buckets: u32,
        now: i32,
    ) -> Result<Vec<u64>, StorageError> {
        let mut hashes = Vec::new();
        self.each_partition_hash(table, range, now, |p| hashes.push((p.token, p.hash)))?;
        Ok(fold_buckets(range, bucket_count(range, buckets), hashes))
    }

    /// Every partition hash of `range` in token order (`partition_hashes`,
    /// page after page), handed to `each`.
    pub fn each_partition_hash(
        &self,
        table: &Uuid,
        range: (i64, i64),
        now: i32,
        mut each: impl FnMut(PartitionHash),
    ) -> Result<(), StorageError> {
        let mut after: Option<(i64, Vec<u8>)> = None;
        loop {
            let (page, more) =
                self.partition_hashes(table, range, after.as_ref().map(|(t, k)| (*t, k.as_slice())), 10_000, now)?;
            after = page.last().map(|p| (p.token, p.key.clone()));
            page.into_iter().for_each(&mut each);
            if !more || after.is_none() {
                return Ok(());
            }
        }
    }
}

/// The inclusive token spans of `(start, end]`, in token order (`stream`'s
/// key ranges are these spans as keys).
pub(crate) fn token_spans((start, end): (i64, i64)) -> Vec<(i64, i64)> {
    if start == end {
        return vec![(i64::MIN, i64::MAX)];
    }
    if start < end {
        // start < end <= MAX, so start + 1 cannot overflow.
        return vec![(start + 1, end)];
    }
    // Wraps: [MIN, end] then (start, MAX].
    let mut out = vec![(i64::MIN, end)];
    if let Some(first) = start.checked_add(1) {
        out.push((first, i64::MAX));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{bucket_count, bucket_of, bucket_range, token_spans};

    #[test]
    fn buckets_cut_a_range_into_disjoint_slices_that_agree_with_bucket_of() {
        let inside = |(s, e): (i64, i64), t: i64| s == e || if s < e { t > s && t <= e } else { t > s || t <= e };
        for range in [(5, 5), (-10, 10), (10, -10), (i64::MAX, 0), (i64::MIN, i64::MAX), (0, 3), (-3, -1)] {
            for wanted in [1, 2, 3, 7, 64, 1000] {
                let buckets = bucket_count(range, wanted);
                assert!(buckets >= 1 && buckets <= wanted);
                let slices: Vec<(i64, i64)> = (0..buckets).map(|i| bucket_range(range, buckets, i)).collect();
                assert_eq!(slices.first().map(|s| s.0), Some(range.0), "{range:?}");
                assert_eq!(slices.last().map(|s| s.1), Some(range.1), "{range:?}");
                for w in slices.windows(2) {
                    if let [a, b] = w {
                        assert_eq!(a.1, b.0, "contiguous");
                    }
                }
                assert!(buckets == 1 || slices.iter().all(|s| s.0 != s.1), "no empty slice in {range:?} / {buckets}");
                let probes = [range.0.wrapping_add(1), range.1, range.1.wrapping_sub(1), 0, i64::MIN, i64::MAX, 12345];
                for t in probes.into_iter().filter(|t| inside(range, *t)) {
                    let i = bucket_of(range, buckets, t);
                    assert!(i < buckets);
                    assert!(
                        buckets == 1 || slices.get(i as usize).is_some_and(|s| inside(*s, t)),
                        "{t} in {range:?}/{buckets}: slice {i}"
                    );
                }
            }
        }
        assert_eq!(bucket_count((0, 3), 1000), 3, "no more slices than tokens");
    }

    #[test]
    fn spans_cover_the_range_in_token_order() {
        assert_eq!(token_spans((5, 5)), vec![(i64::MIN, i64::MAX)]);
        assert_eq!(token_spans((-10, 10)), vec![(-9, 10)]);
        assert_eq!(token_spans((10, -10)), vec![(i64::MIN, -10), (11, i64::MAX)]);
        assert_eq!(token_spans((i64::MAX, 0)), vec![(i64::MIN, 0)]);
    }
}
