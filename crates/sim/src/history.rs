//! What the clients did and saw, and the event trace a failing seed prints.
//!
//! `History` records every client operation with its outcome and two kinds
//! of time: virtual time (tokio's paused clock, for people reading a trace)
//! and a logical clock (`History::tick`) that totally orders every start and
//! end in the single-threaded run, which is what the checker's "started
//! after that write was acknowledged" means.
//!
//! Invariants:
//! - Write timestamps come from one counter (`next_timestamp`), so they are
//!   unique and in issue order across all clients and coordinators.
//! - `start < end` for every operation; an operation is recorded once, when
//!   it ends.
//! - The trace keeps the last `TRACE_TAIL_MAX` lines only, but its hash
//!   covers every event: equal hashes for a seed run twice mean the runs
//!   took the same path.

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use crate::table::{ReadShape, Rows, TIMESTAMP_BASE_MICROS};

/// One row written by a client: alone, or as one of the rows of an
/// unlogged batch (each row with its own timestamp; they share the result).
#[derive(Clone, Debug)]
pub struct WriteRecord {
    pub pk: i32,
    pub c: i32,
    pub ts: i64,
    pub value: Vec<u8>,
    /// Index of the coordinating node.
    pub node: usize,
    pub start: u64,
    pub end: u64,
    pub start_at: Duration,
    pub end_at: Duration,
    /// `Err` carries the coordinator's error (WriteTimeout, Unavailable...).
    pub result: Result<(), String>,
}

impl WriteRecord {
    pub fn acked(&self) -> bool {
        self.result.is_ok()
    }
}

/// One client read of a partition.
#[derive(Clone, Debug)]
pub struct ReadRecord {
    pub pk: i32,
    pub shape: ReadShape,
    pub node: usize,
    pub start: u64,
    pub end: u64,
    pub start_at: Duration,
    pub end_at: Duration,
    pub result: Result<Rows, String>,
}

#[derive(Debug, Default)]
pub struct History {
    pub writes: Vec<WriteRecord>,
    pub reads: Vec<ReadRecord>,
    clock: u64,
    timestamps: i64,
}

impl History {
    /// The next logical instant.
    pub fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// A write timestamp larger than every one handed out before.
    pub fn next_timestamp(&mut self) -> i64 {
        self.timestamps += 1;
        TIMESTAMP_BASE_MICROS + self.timestamps
    }

    pub fn acked_writes(&self) -> usize {
        self.writes.iter().filter(|w| w.acked()).count()
    }

    pub fn ok_reads(&self) -> usize {
        self.reads.iter().filter(|r| r.result.is_ok()).count()
    }
}

/// Lines kept for a failure report.
pub const TRACE_TAIL_MAX: usize = 60;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// The event trace: one line per event, `  <virtual s> <who> <what>`.
pub struct Trace {
    tail: VecDeque<String>,
    events: u64,
    hash: u64,
}

impl Default for Trace {
    fn default() -> Self {
        Trace { tail: VecDeque::with_capacity(TRACE_TAIL_MAX), events: 0, hash: FNV_OFFSET }
    }
}

impl Trace {
    /// Records an event at virtual time `at` by `who` (`n2`, `client3`, `net`...).
    pub fn event(&mut self, at: Duration, who: &str, what: fmt::Arguments<'_>) {
        let line = format!("{:>9.3}s {who:<8} {what}", at.as_secs_f64());
        for byte in line.bytes() {
            self.hash = (self.hash ^ u64::from(byte)).wrapping_mul(FNV_PRIME);
        }
        self.events += 1;
        if self.tail.len() == TRACE_TAIL_MAX {
            self.tail.pop_front();
        }
        self.tail.push_back(line);
    }

    pub fn hash(&self) -> u64 {
        self.hash
    }

    pub fn events(&self) -> u64 {
        self.events
    }

    pub fn tail(&self) -> Vec<String> {
        self.tail.iter().cloned().collect()
    }
}
