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
//! Invariants:
//! - Pages are in token order and never overlap: a page resumes strictly
//!   after the last partition of the one before it.

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
                let raw = self.read_raw(&read)?;
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
    use super::token_spans;

    #[test]
    fn spans_cover_the_range_in_token_order() {
        assert_eq!(token_spans((5, 5)), vec![(i64::MIN, i64::MAX)]);
        assert_eq!(token_spans((-10, 10)), vec![(-9, 10)]);
        assert_eq!(token_spans((10, -10)), vec![(i64::MIN, -10), (11, i64::MAX)]);
        assert_eq!(token_spans((i64::MAX, 0)), vec![(i64::MIN, 0)]);
    }
}
