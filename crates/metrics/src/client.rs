//! Client request metrics (Cassandra's `ClientRequest` group): per
//! operation and consistency level, the latency of every request the node
//! coordinated and the timeouts, unavailables and failures among them.
//!
//! What a request was is noted by the layer that knows (the data plane:
//! a partition read, a range read, a write, a Paxos write or read) on the
//! request's thread with [`note`]; the server takes the note when the
//! request is answered ([`take`]) and records it with its latency and
//! outcome. A request that touched no data (DDL, USE, a system table read)
//! notes nothing and is not counted, as Cassandra counts only what its
//! `StorageProxy` coordinates.
//!
//! Invariants:
//! - One request is recorded once, under the most specific operation it
//!   noted (Paxos over range over read over write: a conditional batch is a
//!   CAS write, a SELECT that scanned and then read partitions a range read).
//! - Counters only grow; a timeout, an unavailable and a failure are also
//!   counted in the latency histogram (Cassandra's `Latency` includes them).

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::LazyLock;

use types::Consistency;

use crate::histogram::Histogram;

/// What a coordinated request did (Cassandra's `ClientRequest` scopes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Op {
    Write = 0,
    Read = 1,
    Range = 2,
    CasRead = 3,
    CasWrite = 4,
}

impl Op {
    pub const ALL: [Op; 5] = [Op::Read, Op::Write, Op::Range, Op::CasRead, Op::CasWrite];

    /// The Prometheus label value (`op="read"`).
    pub fn label(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Range => "range",
            Op::CasRead => "cas_read",
            Op::CasWrite => "cas_write",
        }
    }

    /// Cassandra's scope name (`nodetool proxyhistograms`' rows).
    pub fn scope(self) -> &'static str {
        match self {
            Op::Read => "Read",
            Op::Write => "Write",
            Op::Range => "RangeSlice",
            Op::CasRead => "CASRead",
            Op::CasWrite => "CASWrite",
        }
    }
}

/// How a request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    Timeout,
    Unavailable,
    Failure,
    /// Any other error (invalid request and the like): latency only.
    Other,
}

/// Consistency levels in protocol-code order (the index of each level's slot).
pub const LEVELS: [Consistency; 11] = [
    Consistency::Any,
    Consistency::One,
    Consistency::Two,
    Consistency::Three,
    Consistency::Quorum,
    Consistency::All,
    Consistency::LocalQuorum,
    Consistency::EachQuorum,
    Consistency::Serial,
    Consistency::LocalSerial,
    Consistency::LocalOne,
];

/// One (operation, consistency level) pair's metrics.
#[derive(Default)]
pub struct Slot {
    pub latency: Histogram,
    pub timeouts: AtomicU64,
    pub unavailables: AtomicU64,
    pub failures: AtomicU64,
}

/// Every pair's slot.
pub struct ClientRequests {
    slots: Vec<Slot>,
}

impl Default for ClientRequests {
    fn default() -> ClientRequests {
        ClientRequests { slots: (0..Op::ALL.len() * LEVELS.len()).map(|_| Slot::default()).collect() }
    }
}

/// The node's client request metrics (one server per process).
pub static CLIENT: LazyLock<ClientRequests> = LazyLock::new(ClientRequests::default);

impl ClientRequests {
    pub fn slot(&self, op: Op, cl: Consistency) -> Option<&Slot> {
        let level = LEVELS.iter().position(|&l| l == cl)?;
        self.slots.get(op as usize * LEVELS.len() + level)
    }

    /// Records one request: its latency in microseconds and its outcome.
    pub fn record(&self, op: Op, cl: Consistency, micros: u64, outcome: Outcome) {
        let Some(slot) = self.slot(op, cl) else { return };
        slot.latency.record(micros);
        let counter = match outcome {
            Outcome::Timeout => &slot.timeouts,
            Outcome::Unavailable => &slot.unavailables,
            Outcome::Failure => &slot.failures,
            Outcome::Ok | Outcome::Other => return,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Each (operation, level) pair that saw a request, with its slot.
    pub fn used(&self) -> impl Iterator<Item = (Op, Consistency, &Slot)> {
        Op::ALL.into_iter().flat_map(move |op| {
            LEVELS.into_iter().filter_map(move |cl| {
                let slot = self.slot(op, cl)?;
                (slot.latency.snapshot().count > 0).then_some((op, cl, slot))
            })
        })
    }

    /// An operation's latencies over every level, and its error counts.
    pub fn totals(&self, op: Op) -> (crate::Snapshot, [u64; 3]) {
        let mut total = crate::Snapshot { buckets: vec![0; crate::histogram::BUCKETS], count: 0, sum: 0, zeroes: 0 };
        let mut errors = [0u64; 3];
        for cl in LEVELS {
            let Some(slot) = self.slot(op, cl) else { continue };
            let s = slot.latency.snapshot();
            for (t, n) in total.buckets.iter_mut().zip(&s.buckets) {
                *t += n;
            }
            total.count += s.count;
            total.sum += s.sum;
            errors[0] += slot.timeouts.load(Ordering::Relaxed);
            errors[1] += slot.unavailables.load(Ordering::Relaxed);
            errors[2] += slot.failures.load(Ordering::Relaxed);
        }
        (total, errors)
    }
}

thread_local! {
    static NOTED: Cell<Option<(Op, Consistency)>> = const { Cell::new(None) };
}

/// Notes on this thread that the running request does `op` at `cl` (the
/// most specific note of a request wins).
pub fn note(op: Op, cl: Consistency) {
    NOTED.with(|n| match n.get() {
        Some((seen, _)) if seen >= op => {}
        _ => n.set(Some((op, cl))),
    });
}

/// Takes (and clears) this thread's note.
pub fn take() -> Option<(Op, Consistency)> {
    NOTED.with(Cell::take)
}

#[cfg(test)]
mod tests {
    use types::Consistency;

    use super::{note, take, ClientRequests, Op, Outcome};

    #[test]
    fn the_most_specific_note_wins_and_take_clears_it() {
        note(Op::Write, Consistency::One);
        note(Op::CasWrite, Consistency::Quorum);
        note(Op::Read, Consistency::One);
        assert_eq!(take(), Some((Op::CasWrite, Consistency::Quorum)));
        assert_eq!(take(), None);
    }

    #[test]
    fn outcomes_count_where_they_belong() {
        let c = ClientRequests::default();
        c.record(Op::Read, Consistency::Quorum, 120, Outcome::Ok);
        c.record(Op::Read, Consistency::Quorum, 5000, Outcome::Timeout);
        c.record(Op::Read, Consistency::One, 80, Outcome::Unavailable);
        let (latency, errors) = c.totals(Op::Read);
        assert_eq!(latency.count, 3);
        assert_eq!(errors, [1, 1, 0]);
        assert_eq!(c.used().count(), 2);
        assert_eq!(c.totals(Op::Write).0.count, 0);
    }
}
