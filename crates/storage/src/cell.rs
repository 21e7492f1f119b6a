//! The on-disk form of a cell (and of every deletion marker) and
//! last-write-wins reconciliation with Cassandra's tie rules.
//!
//! Layout: `kind: u8 | timestamp: i64 BE | [ttl: i32 BE | expiry: i32 BE] (expiring) |
//! [deletion time: i32 BE] (tombstone) | value bytes`. A counter cell
//! (`KIND_COUNTER`, storage format 3) holds a counter context
//! (`types::counter`) as its value and the newest shard's timestamp as its own.
//!
//! Invariants:
//! - `merge` is commutative and associative, so RocksDB may merge operands
//!   in any grouping (partial merges) and still reach Cassandra's answer.
//!   Regular cells reconcile last-write-wins (`reconcile`); two counter cells
//!   merge their contexts shard by shard; a tombstone beats a counter cell
//!   whatever their timestamps (Cassandra's `Conflicts.resolveCounter`,
//!   CASSANDRA-7346). A column holds regular cells or counter cells, never
//!   both (the schema refuses turning one into the other), which the
//!   associativity of the mixed rules relies on.
//! - Bytes that fail to decode never win a merge and never panic.
#![deny(clippy::indexing_slicing)]

use std::borrow::Cow;
use std::cmp::Ordering;

pub const KIND_LIVE: u8 = 0;
pub const KIND_EXPIRING: u8 = 1;
pub const KIND_TOMBSTONE: u8 = 2;
pub const KIND_COUNTER: u8 = 3;

/// A decoded view of a stored cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CellRef<'a> {
    pub kind: u8,
    pub timestamp: i64,
    /// Expiring cells only.
    pub ttl: i32,
    /// Expiry for expiring cells, deletion time for tombstones, `i32::MAX` for live cells.
    pub local_deletion_time: i32,
    pub value: &'a [u8],
}

pub const NO_DELETION_TIME: i32 = i32::MAX;

impl<'a> CellRef<'a> {
    pub fn decode(bytes: &'a [u8]) -> Option<CellRef<'a>> {
        let (&kind, rest) = bytes.split_first()?;
        let (timestamp, rest) = rest.split_first_chunk()?;
        let timestamp = i64::from_be_bytes(*timestamp);
        match kind {
            KIND_LIVE => Some(CellRef { kind, timestamp, ttl: 0, local_deletion_time: NO_DELETION_TIME, value: rest }),
            KIND_EXPIRING => {
                let (ttl, rest) = rest.split_first_chunk()?;
                let (expiry, value) = rest.split_first_chunk()?;
                let (ttl, expiry) = (i32::from_be_bytes(*ttl), i32::from_be_bytes(*expiry));
                Some(CellRef { kind, timestamp, ttl, local_deletion_time: expiry, value })
            }
            KIND_TOMBSTONE => {
                let (ldt, value) = rest.split_first_chunk()?;
                Some(CellRef { kind, timestamp, ttl: 0, local_deletion_time: i32::from_be_bytes(*ldt), value })
            }
            KIND_COUNTER => {
                Some(CellRef { kind, timestamp, ttl: 0, local_deletion_time: NO_DELETION_TIME, value: rest })
            }
            _ => None,
        }
    }

    pub fn is_tombstone(&self) -> bool {
        self.kind == KIND_TOMBSTONE
    }

    /// Live at `now` (seconds since epoch): not a tombstone and not expired.
    pub fn is_live(&self, now: i32) -> bool {
        match self.kind {
            KIND_LIVE | KIND_COUNTER => true,
            KIND_EXPIRING => self.local_deletion_time > now,
            _ => false,
        }
    }
}

pub fn encode_live(timestamp: i64, value: &[u8], out: &mut Vec<u8>) {
    out.reserve(9 + value.len());
    out.push(KIND_LIVE);
    out.extend_from_slice(&timestamp.to_be_bytes());
    out.extend_from_slice(value);
}

/// A live cell's bytes (for tests).
#[cfg(test)]
pub(crate) fn live(timestamp: i64, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_live(timestamp, value, &mut out);
    out
}

pub fn encode_expiring(timestamp: i64, ttl: i32, expiry: i32, value: &[u8], out: &mut Vec<u8>) {
    out.reserve(17 + value.len());
    out.push(KIND_EXPIRING);
    out.extend_from_slice(&timestamp.to_be_bytes());
    out.extend_from_slice(&ttl.to_be_bytes());
    out.extend_from_slice(&expiry.to_be_bytes());
    out.extend_from_slice(value);
}

pub fn encode_tombstone(timestamp: i64, local_deletion_time: i32, out: &mut Vec<u8>) {
    out.push(KIND_TOMBSTONE);
    out.extend_from_slice(&timestamp.to_be_bytes());
    out.extend_from_slice(&local_deletion_time.to_be_bytes());
}

/// A counter cell holding `context`; its timestamp is the newest shard's.
pub fn encode_counter(context: &[u8], out: &mut Vec<u8>) {
    out.reserve(9 + context.len());
    out.push(KIND_COUNTER);
    out.extend_from_slice(&types::counter::max_timestamp(context).to_be_bytes());
    out.extend_from_slice(context);
}

/// Encodes a cell or marker: a tombstone when `value` is `None`, a counter
/// cell when `ttl` is `COUNTER_TTL`, expiring when `ttl > 0`.
pub fn encode(timestamp: i64, ttl: i32, local_deletion_time: i32, value: Option<&[u8]>, out: &mut Vec<u8>) {
    match value {
        None => encode_tombstone(timestamp, local_deletion_time, out),
        Some(v) if ttl == types::mutation::COUNTER_TTL => {
            if types::counter::is_normal(v) {
                encode_counter(v, out)
            } else {
                encode_counter(&types::counter::from_shards(types::counter::shards(v).collect()), out)
            }
        }
        Some(v) if ttl > 0 => encode_expiring(timestamp, ttl, local_deletion_time, v, out),
        Some(v) => encode_live(timestamp, v, out),
    }
}

/// Cassandra's `Cells.reconcile` for regular cells: the higher timestamp wins;
/// on a tie, expiring-or-tombstone beats live, tombstone beats expiring, the
/// later local deletion time wins, and finally the greater value wins.
pub fn reconcile<'a>(left: CellRef<'a>, right: CellRef<'a>) -> CellRef<'a> {
    if left.timestamp != right.timestamp {
        return if left.timestamp > right.timestamp { left } else { right };
    }
    let left_dying = left.kind != KIND_LIVE;
    let right_dying = right.kind != KIND_LIVE;
    if left_dying || right_dying {
        if left_dying != right_dying {
            return if left_dying { left } else { right };
        }
        let left_tomb = left.is_tombstone();
        let right_tomb = right.is_tombstone();
        if left_tomb != right_tomb {
            return if left_tomb { left } else { right };
        }
        if left.local_deletion_time != right.local_deletion_time {
            return if left.local_deletion_time > right.local_deletion_time { left } else { right };
        }
    }
    match left.value.cmp(right.value) {
        Ordering::Less => right,
        _ => left,
    }
}

/// Two stored cells reconciled: the winner, or for two counter cells their
/// merged context; bytes that do not decode never win.
pub fn pick<'a>(left: &'a [u8], right: &'a [u8]) -> Cow<'a, [u8]> {
    match (CellRef::decode(left), CellRef::decode(right)) {
        (Some(l), Some(r)) => {
            match (l.kind, r.kind) {
                (KIND_COUNTER, KIND_COUNTER) => {
                    let merged = types::counter::merge(l.value, r.value);
                    if merged == l.value {
                        return Cow::Borrowed(left);
                    }
                    if merged == r.value {
                        return Cow::Borrowed(right);
                    }
                    let mut out = Vec::with_capacity(9 + merged.len());
                    encode_counter(&merged, &mut out);
                    return Cow::Owned(out);
                }
                // A tombstone beats a counter cell whatever the timestamps.
                (KIND_COUNTER, KIND_TOMBSTONE) => return Cow::Borrowed(right),
                (KIND_TOMBSTONE, KIND_COUNTER) => return Cow::Borrowed(left),
                // Never in one column (see invariants): a fixed order keeps the merge deterministic.
                (KIND_COUNTER, _) => return Cow::Borrowed(left),
                (_, KIND_COUNTER) => return Cow::Borrowed(right),
                _ => {}
            }
            let chosen = reconcile(l, r);
            if chosen == r && chosen != l {
                Cow::Borrowed(right)
            } else {
                Cow::Borrowed(left)
            }
        }
        (None, Some(_)) => Cow::Borrowed(right),
        _ => Cow::Borrowed(left),
    }
}

/// The RocksDB merge function: the existing value and all operands reconciled.
pub fn merge_operands<'a>(existing: Option<&'a [u8]>, operands: impl Iterator<Item = &'a [u8]>) -> Option<Vec<u8>> {
    let mut acc: Option<Cow<'a, [u8]>> = None;
    for next in existing.into_iter().chain(operands) {
        acc = Some(match acc {
            None => Cow::Borrowed(next),
            Some(Cow::Borrowed(prev)) => pick(prev, next),
            Some(Cow::Owned(prev)) => Cow::Owned(pick(&prev, next).into_owned()),
        });
    }
    acc.map(Cow::into_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tomb(ts: i64, ldt: i32) -> Vec<u8> {
        let mut out = Vec::new();
        encode_tombstone(ts, ldt, &mut out);
        out
    }
    fn exp(ts: i64, ttl: i32, at: i32, v: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_expiring(ts, ttl, at, v, &mut out);
        out
    }
    fn winner(cells: &[Vec<u8>]) -> Vec<u8> {
        merge_operands(None, cells.iter().map(|c| c.as_slice())).unwrap()
    }

    #[test]
    fn higher_timestamp_wins_in_any_order() {
        let a = live(10, b"new");
        let b = live(5, b"old");
        assert_eq!(winner(&[a.clone(), b.clone()]), a);
        assert_eq!(winner(&[b, a.clone()]), a);
    }

    #[test]
    fn tombstone_wins_a_timestamp_tie() {
        let a = live(10, b"x");
        let t = tomb(10, 100);
        assert_eq!(winner(&[a.clone(), t.clone()]), t);
        assert_eq!(winner(&[t.clone(), a]), t);
        let e = exp(10, 5, 200, b"x");
        assert_eq!(winner(&[e.clone(), t.clone()]), t);
        assert_eq!(winner(&[live(10, b"z"), e.clone()]), e);
    }

    #[test]
    fn greater_value_wins_a_full_tie() {
        assert_eq!(winner(&[live(1, b"a"), live(1, b"b")]), live(1, b"b"));
        assert_eq!(winner(&[live(1, b"b"), live(1, b"a")]), live(1, b"b"));
    }

    #[test]
    fn garbage_never_wins() {
        let a = live(1, b"a");
        assert_eq!(winner(&[vec![9, 9], a.clone(), vec![]]), a);
        assert_eq!(CellRef::decode(&[KIND_EXPIRING, 0, 0]), None);
    }

    fn counter(shards: &[(u8, i64, i64, i64)]) -> Vec<u8> {
        let list = shards
            .iter()
            .map(|&(id, clock, count, timestamp)| types::counter::Shard { id: [id; 16], clock, count, timestamp })
            .collect();
        let mut out = Vec::new();
        encode_counter(&types::counter::from_shards(list), &mut out);
        out
    }

    fn merged(cells: &[&Vec<u8>]) -> Vec<u8> {
        merge_operands(None, cells.iter().map(|c| c.as_slice())).unwrap()
    }

    #[test]
    fn counter_cells_merge_by_shard_and_lose_to_tombstones() {
        let a = counter(&[(1, 2, 5, 10)]);
        let b = counter(&[(1, 3, 7, 20), (2, 1, 1, 15)]);
        let m = merged(&[&a, &b]);
        assert_eq!(m, counter(&[(1, 3, 7, 20), (2, 1, 1, 15)]));
        let c = CellRef::decode(&m).unwrap();
        assert_eq!((c.kind, c.timestamp), (KIND_COUNTER, 20));
        // A tombstone wins whatever the timestamps (CASSANDRA-7346).
        let t = tomb(1, 100);
        assert_eq!(merged(&[&b, &t]), t);
        assert_eq!(merged(&[&t, &a, &b]), t);
    }

    /// Random sequences of counter cells and tombstones merge to the same
    /// bytes in any order and grouping, and merging a cell again changes nothing.
    #[test]
    fn counter_merge_is_commutative_associative_idempotent() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let random_cell = |rng: &mut rand::rngs::StdRng| {
            if rng.gen_bool(0.15) {
                tomb(rng.gen_range(0..5), rng.gen_range(0..3))
            } else {
                let n = rng.gen_range(1..4);
                let shards: Vec<(u8, i64, i64, i64)> = (0..n)
                    .map(|_| (rng.gen_range(0..3), rng.gen_range(0..4), rng.gen_range(-3..3), rng.gen_range(0..5)))
                    .collect();
                counter(&shards)
            }
        };
        for _ in 0..3000 {
            let cells: Vec<Vec<u8>> = (0..rng.gen_range(1..6)).map(|_| random_cell(&mut rng)).collect();
            let all = merged(&cells.iter().collect::<Vec<_>>());
            let mut shuffled = cells.clone();
            shuffled.reverse();
            let mid = rng.gen_range(0..cells.len());
            shuffled.rotate_left(mid);
            assert_eq!(merged(&shuffled.iter().collect::<Vec<_>>()), all, "order");
            // Grouping: merge a prefix first (a partial merge), then the rest.
            let (head, tail) = cells.split_at(mid.max(1));
            let partial = merged(&head.iter().collect::<Vec<_>>());
            let mut rest: Vec<&Vec<u8>> = vec![&partial];
            rest.extend(tail.iter());
            assert_eq!(merged(&rest), all, "grouping");
            let again: Vec<&Vec<u8>> = cells.iter().chain(cells.iter()).collect();
            assert_eq!(merged(&again), all, "idempotent");
        }
    }
}
