//! Measurement: HDR histograms of latency (from the intended start: corrected
//! for coordinated omission in fixed-rate runs) and service time (from the
//! actual send), plus operation, row and error counters; in `mixed` runs the
//! same again for each operation type (read, write).
//!
//! Workers record into one of a few mutex-guarded shards (a shard per worker
//! would cost a histogram per in-flight request); the reporter drains all
//! shards once per interval. Invariants: every completed operation is counted
//! in exactly one interval; latencies are recorded in microseconds; a drained
//! shard is empty; in a recorder with per-type statistics, the per-type counts
//! and histograms add up to the totals.

use std::sync::Mutex;

use hdrhistogram::Histogram;

/// Significant figures of every histogram (0.1% value resolution).
const SIGFIG: u8 = 3;

/// The operation types that get their own statistics in `mixed` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpType {
    Read = 0,
    Write = 1,
}

impl OpType {
    pub const ALL: [OpType; 2] = [OpType::Read, OpType::Write];

    pub fn name(self) -> &'static str {
        match self {
            OpType::Read => "read",
            OpType::Write => "write",
        }
    }
}

/// The statistics of one operation type.
#[derive(Clone, Debug)]
pub struct TypeRecorder {
    pub latency: Histogram<u64>,
    pub service: Histogram<u64>,
    /// Successful operations.
    pub ops: u64,
    /// Operations that failed after all retries.
    pub errors: u64,
}

impl TypeRecorder {
    fn new() -> TypeRecorder {
        TypeRecorder { latency: new_histogram(), service: new_histogram(), ops: 0, errors: 0 }
    }

    fn merge(&mut self, other: &TypeRecorder) {
        let _ = self.latency.add(&other.latency);
        let _ = self.service.add(&other.service);
        self.ops += other.ops;
        self.errors += other.errors;
    }

    fn clear(&mut self) {
        self.latency.reset();
        self.service.reset();
        self.ops = 0;
        self.errors = 0;
    }
}

/// What one interval (or a whole run) measured.
#[derive(Clone, Debug)]
pub struct Recorder {
    /// Microseconds from the intended start (closed loop: the actual send) to the answer.
    pub latency: Histogram<u64>,
    /// Microseconds from the first send to the answer.
    pub service: Histogram<u64>,
    /// Successful operations.
    pub ops: u64,
    /// Rows (partitions) written or read successfully: the legacy "key rate".
    pub rows: u64,
    /// Operations that failed after all retries.
    pub errors: u64,
    /// Reads (and verifies) that found no row.
    pub missing: u64,
    /// Verifies that found a row with different values.
    pub mismatched: u64,
    /// `lwt`: conditional statements that applied, and that did not.
    pub applied: u64,
    pub not_applied: u64,
    pub reads: u64,
    pub writes: u64,
    /// Extra tries spent on retries.
    pub retries: u64,
    /// Per operation type, indexed by `OpType as usize` (mixed runs only).
    pub types: Option<Box<[TypeRecorder; 2]>>,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::new()
    }
}

/// How one operation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Written,
    Read,
    /// A read or verify found no row.
    Missing,
    /// A verify found a row with wrong values.
    Mismatched,
    /// A verify found the row with the expected values.
    Verified,
    /// A conditional statement (`lwt`) applied.
    Applied,
    /// A conditional statement's condition did not hold (`[applied]` false).
    NotApplied,
    Failed,
}

impl Recorder {
    pub fn new() -> Recorder {
        Recorder {
            latency: new_histogram(),
            service: new_histogram(),
            ops: 0,
            rows: 0,
            errors: 0,
            missing: 0,
            mismatched: 0,
            applied: 0,
            not_applied: 0,
            reads: 0,
            writes: 0,
            retries: 0,
            types: None,
        }
    }

    /// A recorder that also keeps statistics per operation type.
    pub fn with_types() -> Recorder {
        Recorder { types: Some(Box::new([TypeRecorder::new(), TypeRecorder::new()])), ..Recorder::new() }
    }

    pub fn record(&mut self, op_type: OpType, outcome: Outcome, latency_us: u64, service_us: u64, retries: u32) {
        self.retries += u64::from(retries);
        let latency_us = latency_us.clamp(1, HIGHEST_US);
        let service_us = service_us.clamp(1, HIGHEST_US);
        if let Some(types) = &mut self.types {
            let t = &mut types[op_type as usize];
            if outcome == Outcome::Failed {
                t.errors += 1;
            } else {
                t.latency.saturating_record(latency_us);
                t.service.saturating_record(service_us);
                t.ops += 1;
            }
        }
        if outcome == Outcome::Failed {
            self.errors += 1;
            return;
        }
        self.latency.saturating_record(latency_us);
        self.service.saturating_record(service_us);
        self.ops += 1;
        match outcome {
            Outcome::Written => {
                self.writes += 1;
                self.rows += 1;
            }
            Outcome::Read | Outcome::Verified => {
                self.reads += 1;
                self.rows += 1;
            }
            Outcome::Missing => {
                self.reads += 1;
                self.missing += 1;
            }
            Outcome::Mismatched => {
                self.reads += 1;
                self.rows += 1;
                self.mismatched += 1;
            }
            Outcome::Applied => {
                self.writes += 1;
                self.rows += 1;
                self.applied += 1;
            }
            Outcome::NotApplied => {
                self.writes += 1;
                self.not_applied += 1;
            }
            Outcome::Failed => {}
        }
    }

    /// Empties the recorder, keeping the histograms' allocations.
    pub fn clear(&mut self) {
        self.latency.reset();
        self.service.reset();
        self.ops = 0;
        self.rows = 0;
        self.errors = 0;
        self.missing = 0;
        self.mismatched = 0;
        self.applied = 0;
        self.not_applied = 0;
        self.reads = 0;
        self.writes = 0;
        self.retries = 0;
        if let Some(types) = &mut self.types {
            types.iter_mut().for_each(TypeRecorder::clear);
        }
    }

    /// Adds `other` into `self` (gaining per-type statistics if `other` has them).
    pub fn merge(&mut self, other: &Recorder) {
        // Same bounds on both sides, so adding cannot fail.
        let _ = self.latency.add(&other.latency);
        let _ = self.service.add(&other.service);
        self.ops += other.ops;
        self.rows += other.rows;
        self.errors += other.errors;
        self.missing += other.missing;
        self.mismatched += other.mismatched;
        self.applied += other.applied;
        self.not_applied += other.not_applied;
        self.reads += other.reads;
        self.writes += other.writes;
        self.retries += other.retries;
        if let Some(theirs) = &other.types {
            let ours = self.types.get_or_insert_with(|| Box::new([TypeRecorder::new(), TypeRecorder::new()]));
            for (a, b) in ours.iter_mut().zip(theirs.iter()) {
                a.merge(b);
            }
        }
    }

    /// The statistics of one operation type, if kept.
    pub fn of_type(&self, op_type: OpType) -> Option<&TypeRecorder> {
        self.types.as_ref().map(|t| &t[op_type as usize])
    }
}

/// Values above this (one hour, in microseconds) are recorded as this.
pub const HIGHEST_US: u64 = 3_600_000_000;

/// An empty histogram with the bounds every recorder uses (1 µs to one hour, 3 digits).
pub fn new_histogram() -> Histogram<u64> {
    // Fixed bounds: an auto-resizing histogram clamps in `saturating_record` instead of growing.
    Histogram::new_with_bounds(1, HIGHEST_US, SIGFIG).unwrap_or_else(|_| unreachable_histogram())
}
#[cold]
fn unreachable_histogram() -> Histogram<u64> {
    // `new_with_bounds` fails only for sigfig > 5 or bounds out of order; both are constants.
    panic!("hdrhistogram refused bounds 1..{HIGHEST_US} with {SIGFIG} significant figures")
}

/// Latency summary in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Percentiles {
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
}

impl Percentiles {
    pub fn of(h: &Histogram<u64>) -> Percentiles {
        debug_assert!(h.high() >= HIGHEST_US, "histograms keep their full range");
        if h.is_empty() {
            return Percentiles::default();
        }
        let ms = |us: u64| us as f64 / 1000.0;
        Percentiles {
            mean_ms: h.mean() / 1000.0,
            p50_ms: ms(h.value_at_quantile(0.50)),
            p95_ms: ms(h.value_at_quantile(0.95)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            p999_ms: ms(h.value_at_quantile(0.999)),
            max_ms: ms(h.max()),
        }
    }
}

/// Shards that workers record into and the reporter drains.
pub struct Shards {
    shards: Vec<Mutex<Recorder>>,
    types: bool,
}

impl Shards {
    /// `types`: also keep statistics per operation type.
    pub fn new(count: usize, types: bool) -> Shards {
        assert!(count > 0, "at least one shard");
        let fresh = || if types { Recorder::with_types() } else { Recorder::new() };
        Shards { shards: (0..count).map(|_| Mutex::new(fresh())).collect(), types }
    }

    pub fn record(
        &self,
        worker: usize,
        op_type: OpType,
        outcome: Outcome,
        latency_us: u64,
        service_us: u64,
        retries: u32,
    ) {
        let shard = &self.shards[worker % self.shards.len()];
        let mut guard = shard.lock().unwrap_or_else(|p| p.into_inner());
        guard.record(op_type, outcome, latency_us, service_us, retries);
    }

    /// Everything recorded since the last drain; the shards are left empty.
    pub fn drain(&self) -> Recorder {
        let mut total = if self.types { Recorder::with_types() } else { Recorder::new() };
        for shard in &self.shards {
            let mut guard = shard.lock().unwrap_or_else(|p| p.into_inner());
            total.merge(&guard);
            guard.clear();
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_the_full_range_and_drains_empty() {
        let shards = Shards::new(3, false);
        for (i, us) in [1u64, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000_000].into_iter().enumerate() {
            shards.record(i, OpType::Write, Outcome::Written, us, us, 0);
        }
        shards.record(0, OpType::Write, Outcome::Failed, 5, 5, 2);
        let total = shards.drain();
        assert_eq!((total.ops, total.rows, total.errors, total.retries), (8, 8, 1, 2));
        let p = Percentiles::of(&total.latency);
        assert!((0.99..1.01).contains(&p.p50_ms), "the 4th of 8 values, 1000 us: {p:?}");
        assert!((3_599_000_000.0 / 1000.0..3_602_000_000.0 / 1000.0).contains(&p.max_ms), "clamped to one hour: {p:?}");
        let empty = shards.drain();
        assert_eq!((empty.ops, empty.errors), (0, 0));
        assert!(empty.latency.is_empty());
        assert!(empty.types.is_none());
    }

    #[test]
    fn per_type_statistics_add_up_to_the_totals() {
        let shards = Shards::new(2, true);
        for i in 0..10u64 {
            let (op_type, outcome) =
                if i % 3 == 0 { (OpType::Write, Outcome::Written) } else { (OpType::Read, Outcome::Read) };
            shards.record(i as usize, op_type, outcome, 100 + i * 1000, 100 + i * 1000, 0);
        }
        shards.record(1, OpType::Read, Outcome::Failed, 7, 7, 0);
        let total = shards.drain();
        let (read, write) = (total.of_type(OpType::Read).expect("kept"), total.of_type(OpType::Write).expect("kept"));
        assert_eq!((read.ops, read.errors, write.ops, write.errors), (6, 1, 4, 0));
        assert_eq!((total.reads, total.writes, total.errors), (6, 4, 1));
        assert_eq!(read.latency.len() + write.latency.len(), total.latency.len());
        assert_eq!(read.latency.max().max(write.latency.max()), total.latency.max());
        assert!(write.latency.max() > 9_000 && write.latency.min() < 200, "writes were ops 0, 3, 6, 9");
        let mut merged = Recorder::new();
        merged.merge(&total);
        assert_eq!(merged.of_type(OpType::Read).map(|r| r.ops), Some(6));
        let empty = shards.drain();
        assert_eq!(empty.of_type(OpType::Read).map(|r| r.ops), Some(0));
    }

    #[test]
    fn conditional_outcomes_are_counted_apart() {
        let shards = Shards::new(2, false);
        for (i, outcome) in
            [Outcome::Applied, Outcome::Applied, Outcome::NotApplied, Outcome::Failed].iter().enumerate()
        {
            shards.record(i, OpType::Write, *outcome, 10, 10, 0);
        }
        let total = shards.drain();
        assert_eq!((total.ops, total.applied, total.not_applied, total.errors), (3, 2, 1, 1));
        assert_eq!((total.writes, total.rows), (3, 2), "a refused condition writes no row");
        let mut merged = Recorder::new();
        merged.merge(&total);
        merged.merge(&total);
        assert_eq!((merged.applied, merged.not_applied), (4, 2));
        merged.clear();
        assert_eq!((merged.applied, merged.not_applied), (0, 0));
    }
}
