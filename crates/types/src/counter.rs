//! Counter contexts: the value a counter cell stores, as Cassandra's
//! `CounterContext` (one shard per counter id) and how two contexts merge.
//!
//! A context is a sequence of shards sorted by counter id, each
//! `counter id: 16 bytes | clock: i64 BE | count: i64 BE | timestamp: i64 BE`.
//! The counter id is the host id of the replica that led the updates of the
//! shard (`cluster::coordinator`'s counter leader); only that replica writes
//! new versions of its shard, each with the clock one higher, so the version
//! with the highest clock is the newest. The timestamp is the write time of
//! the shard's last update: reads drop shards shadowed by a row, range or
//! partition deletion (timestamp at or below the deletion's), as Cassandra
//! drops a whole counter cell shadowed by one.
//!
//! Invariants:
//! - `merge` keeps, per counter id, the greatest shard by (clock, count,
//!   timestamp): a join of a semilattice, so merging is commutative,
//!   associative and idempotent (applying a replicated shard twice changes
//!   nothing) and contexts converge whatever order replicas see updates in.
//! - Bytes that do not parse end a context (a trailing partial shard is
//!   ignored); nothing here panics.
//! - The counter's value is the sum of the counts of its live shards,
//!   wrapping as Cassandra's `long` arithmetic does.

/// Bytes of one shard.
pub const SHARD_LEN: usize = 40;

/// One replica's share of a counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// The leading replica's host id.
    pub id: [u8; 16],
    pub clock: i64,
    pub count: i64,
    /// Write time (microseconds) of the shard's last update.
    pub timestamp: i64,
}

impl Shard {
    fn rank(&self) -> (i64, i64, i64) {
        (self.clock, self.count, self.timestamp)
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.id);
        out.extend_from_slice(&self.clock.to_be_bytes());
        out.extend_from_slice(&self.count.to_be_bytes());
        out.extend_from_slice(&self.timestamp.to_be_bytes());
    }

    fn decode(bytes: &[u8]) -> Option<Shard> {
        let (id, rest) = bytes.split_first_chunk::<16>()?;
        let (clock, rest) = rest.split_first_chunk::<8>()?;
        let (count, rest) = rest.split_first_chunk::<8>()?;
        let (ts, _) = rest.split_first_chunk::<8>()?;
        Some(Shard {
            id: *id,
            clock: i64::from_be_bytes(*clock),
            count: i64::from_be_bytes(*count),
            timestamp: i64::from_be_bytes(*ts),
        })
    }
}

/// The shards of a context, in stored order.
pub fn shards(context: &[u8]) -> impl Iterator<Item = Shard> + '_ {
    context.chunks(SHARD_LEN).map_while(Shard::decode)
}

/// The shard of counter id `id`, if the context has one.
pub fn shard_of(context: &[u8], id: &[u8; 16]) -> Option<Shard> {
    shards(context).find(|s| &s.id == id)
}

/// A context of one shard.
pub fn single(shard: Shard) -> Vec<u8> {
    let mut out = Vec::with_capacity(SHARD_LEN);
    shard.encode(&mut out);
    out
}

/// A context from shards in any order (a repeated id keeps its greatest shard).
pub fn from_shards(mut list: Vec<Shard>) -> Vec<u8> {
    list.sort_by(|a, b| a.id.cmp(&b.id).then(b.rank().cmp(&a.rank())));
    list.dedup_by(|later, first| later.id == first.id);
    let mut out = Vec::with_capacity(list.len() * SHARD_LEN);
    for s in &list {
        s.encode(&mut out);
    }
    out
}

/// Merges two contexts: per counter id, the greatest shard (see invariants).
pub fn merge(left: &[u8], right: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(left.len().max(right.len()));
    let mut l = shards(left).peekable();
    let mut r = shards(right).peekable();
    loop {
        let next = match (l.peek(), r.peek()) {
            (Some(a), Some(b)) => match a.id.cmp(&b.id) {
                std::cmp::Ordering::Less => l.next(),
                std::cmp::Ordering::Greater => r.next(),
                std::cmp::Ordering::Equal => {
                    let (a, b) = (l.next(), r.next());
                    match (a, b) {
                        (Some(a), Some(b)) => Some(if b.rank() > a.rank() { b } else { a }),
                        (a, b) => a.or(b),
                    }
                }
            },
            (Some(_), None) => l.next(),
            (None, Some(_)) => r.next(),
            (None, None) => None,
        };
        let Some(shard) = next else { break };
        shard.encode(&mut out);
    }
    out
}

/// Sorted by id with no repeats: the form `merge` keeps. Contexts from
/// elsewhere (a peer) are normalized with `from_shards` when they are not.
pub fn is_normal(context: &[u8]) -> bool {
    context.len().is_multiple_of(SHARD_LEN) && shards(context).zip(shards(context).skip(1)).all(|(a, b)| a.id < b.id)
}

/// The counter's value counting only shards written after `shadow` (a
/// deletion's timestamp), and the newest such shard's timestamp; `None`
/// when no shard is live.
pub fn total(context: &[u8], shadow: i64) -> Option<(i64, i64)> {
    shards(context).filter(|s| s.timestamp > shadow).fold(None, |acc, s| {
        let (sum, ts) = acc.unwrap_or((0i64, i64::MIN));
        Some((sum.wrapping_add(s.count), ts.max(s.timestamp)))
    })
}

/// The newest shard's timestamp (the cell's timestamp), `i64::MIN` when empty.
pub fn max_timestamp(context: &[u8]) -> i64 {
    shards(context).map(|s| s.timestamp).max().unwrap_or(i64::MIN)
}

/// The context without the shards shadowed by a deletion at `shadow`.
pub fn without_shadowed(context: &[u8], shadow: i64) -> Vec<u8> {
    let mut out = Vec::with_capacity(context.len());
    for s in shards(context).filter(|s| s.timestamp > shadow) {
        s.encode(&mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn shard(id: u8, clock: i64, count: i64, ts: i64) -> Shard {
        Shard { id: [id; 16], clock, count, timestamp: ts }
    }

    fn random_context(rng: &mut impl Rng) -> Vec<u8> {
        let n = rng.gen_range(0..4);
        from_shards(
            (0..n)
                .map(|_| shard(rng.gen_range(0..3), rng.gen_range(0..4), rng.gen_range(-5..5), rng.gen_range(0..4)))
                .collect(),
        )
    }

    #[test]
    fn merge_is_a_join() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for _ in 0..5000 {
            let (a, b, c) = (random_context(&mut rng), random_context(&mut rng), random_context(&mut rng));
            assert_eq!(merge(&a, &b), merge(&b, &a), "commutative");
            assert_eq!(merge(&merge(&a, &b), &c), merge(&a, &merge(&b, &c)), "associative");
            assert_eq!(merge(&a, &a), a, "idempotent");
            assert_eq!(merge(&merge(&a, &b), &b), merge(&a, &b), "re-applying a shard changes nothing");
            assert!(is_normal(&merge(&a, &b)));
        }
    }

    #[test]
    fn highest_clock_wins_per_shard_and_totals_add_up() {
        let a = from_shards(vec![shard(1, 3, 10, 5), shard(2, 1, 4, 6)]);
        let b = from_shards(vec![shard(1, 2, 7, 9), shard(3, 1, -2, 2)]);
        let m = merge(&a, &b);
        assert_eq!(shard_of(&m, &[1; 16]), Some(shard(1, 3, 10, 5)));
        assert_eq!(total(&m, i64::MIN), Some((12, 6)));
        // A deletion at 5 shadows the shards written at or before it.
        assert_eq!(total(&m, 5), Some((4, 6)));
        assert_eq!(total(&m, 6), None);
        assert_eq!(without_shadowed(&m, 5), single(shard(2, 1, 4, 6)));
    }

    #[test]
    fn garbage_never_panics() {
        assert_eq!(shards(&[1, 2, 3]).count(), 0);
        let mut a = single(shard(1, 1, 1, 1));
        a.extend_from_slice(&[9; 7]);
        assert_eq!(total(&a, i64::MIN), Some((1, 1)));
        assert!(!is_normal(&a));
    }
}
