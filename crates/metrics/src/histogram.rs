//! A latency (or size) histogram with Cassandra's `EstimatedHistogram`
//! bucket layout: bucket `i` counts values in `(offsets[i-1], offsets[i]]`,
//! the offsets growing by a factor of 1.2 (1, 2, 3, 4, 5, 6, 7, 8, 10, 12,
//! 14, 17, 20, ...), so a percentile is read as its bucket's upper offset,
//! the value `nodetool tablehistograms` prints. Values are microseconds for
//! latencies (or plain counts, bytes).
//!
//! Invariants:
//! - `record` is two relaxed atomic adds plus a search of 110 offsets.
//! - A value above the last offset lands in the overflow bucket, reported as
//!   the last offset (Cassandra's behaviour) and counted in `count`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::LazyLock;

/// Number of buckets (the last is the overflow bucket).
pub const BUCKETS: usize = 111;

/// The upper bound of each bucket but the overflow one (ascending).
pub static OFFSETS: LazyLock<[u64; BUCKETS - 1]> = LazyLock::new(|| {
    let mut out = [0u64; BUCKETS - 1];
    let mut last = 1u64;
    for slot in out.iter_mut() {
        *slot = last;
        let next = (last as f64 * 1.2).round() as u64;
        last = next.max(last + 1);
    }
    out
});

/// Lock-free histogram; see the module docs.
pub struct Histogram {
    buckets: [AtomicU64; BUCKETS],
    sum: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram { buckets: std::array::from_fn(|_| AtomicU64::new(0)), sum: AtomicU64::new(0) }
    }
}

impl Histogram {
    pub fn new() -> Histogram {
        Histogram::default()
    }

    /// The bucket `value` falls in.
    pub fn bucket_of(value: u64) -> usize {
        OFFSETS.partition_point(|&o| o < value)
    }

    pub fn record(&self, value: u64) {
        self.record_n(value, 1);
    }

    /// Records `n` values of `value` each (a run of writes timed together).
    pub fn record_n(&self, value: u64, n: u64) {
        if let Some(b) = self.buckets.get(Histogram::bucket_of(value)) {
            b.fetch_add(n, Ordering::Relaxed);
        }
        self.sum.fetch_add(value.saturating_mul(n), Ordering::Relaxed);
    }

    /// Records a duration in microseconds.
    pub fn record_since(&self, start: std::time::Instant) {
        self.record(start.elapsed().as_micros() as u64);
    }

    pub fn snapshot(&self) -> Snapshot {
        let buckets: Vec<u64> = self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).collect();
        Snapshot { count: buckets.iter().sum(), sum: self.sum.load(Ordering::Relaxed), buckets, zeroes: 0 }
    }
}

/// Records the time from its making to its drop into a histogram (µs).
pub struct Timer<'a>(&'a Histogram, std::time::Instant);

impl Timer<'_> {
    pub fn start(histogram: &Histogram) -> Timer<'_> {
        Timer(histogram, std::time::Instant::now())
    }
}

impl Drop for Timer<'_> {
    fn drop(&mut self) {
        self.0.record_since(self.1);
    }
}

/// A histogram of small counts where 0 is a value of its own (Cassandra's
/// `EstimatedHistogram` with `considerZeroes`, as its SSTables per read):
/// zeroes are counted apart, the rest as `Histogram` does.
#[derive(Default)]
pub struct CountHistogram {
    zeroes: AtomicU64,
    rest: Histogram,
}

impl CountHistogram {
    pub fn record(&self, value: u64) {
        if value == 0 {
            self.zeroes.fetch_add(1, Ordering::Relaxed);
        } else {
            self.rest.record(value);
        }
    }

    pub fn snapshot(&self) -> Snapshot {
        let mut s = self.rest.snapshot();
        s.zeroes = self.zeroes.load(Ordering::Relaxed);
        s.count += s.zeroes;
        s
    }
}

/// A histogram's counts at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    pub buckets: Vec<u64>,
    /// Every value recorded, `zeroes` included.
    pub count: u64,
    /// Sum of the recorded values.
    pub sum: u64,
    /// Values of 0 counted apart (`CountHistogram`; 0 for a `Histogram`,
    /// whose first bucket holds them, reported as 1).
    pub zeroes: u64,
}

impl Snapshot {
    /// The value at quantile `q` (0..=1): the upper offset of the bucket
    /// holding it; 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        if rank <= self.zeroes {
            return 0;
        }
        let mut seen = self.zeroes;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return upper(i);
            }
        }
        upper(BUCKETS - 1)
    }

    /// The smallest recorded value's bucket offset (0 when empty).
    pub fn min(&self) -> u64 {
        if self.zeroes > 0 {
            return 0;
        }
        self.buckets.iter().position(|&n| n > 0).map_or(0, upper)
    }

    /// The largest recorded value's bucket offset (0 when empty).
    pub fn max(&self) -> u64 {
        self.buckets.iter().rposition(|&n| n > 0).map_or(0, upper)
    }

    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }

    /// Cumulative counts of the values at or below each of `bounds`
    /// (ascending), a fine bucket counted under a bound when its whole range
    /// is: Prometheus' `le` buckets.
    pub fn cumulative(&self, bounds: &[u64]) -> Vec<u64> {
        let mut out = Vec::with_capacity(bounds.len());
        let (mut i, mut seen) = (0usize, self.zeroes);
        for &bound in bounds {
            while i < BUCKETS - 1 && upper(i) <= bound {
                seen += self.buckets.get(i).copied().unwrap_or(0);
                i += 1;
            }
            out.push(seen);
        }
        out
    }

    /// The counts since `earlier` (a later snapshot minus an earlier one).
    pub fn since(&self, earlier: &Snapshot) -> Snapshot {
        let buckets: Vec<u64> = self
            .buckets
            .iter()
            .enumerate()
            .map(|(i, n)| n.saturating_sub(earlier.buckets.get(i).copied().unwrap_or(0)))
            .collect();
        let zeroes = self.zeroes.saturating_sub(earlier.zeroes);
        Snapshot {
            count: buckets.iter().sum::<u64>() + zeroes,
            sum: self.sum.saturating_sub(earlier.sum),
            buckets,
            zeroes,
        }
    }
}

/// The upper offset of bucket `i` (the overflow bucket reports the last offset).
fn upper(i: usize) -> u64 {
    OFFSETS.get(i).or(OFFSETS.last()).copied().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_count_histogram_reports_zero_as_zero() {
        let h = super::CountHistogram::default();
        for v in [0, 0, 1, 3] {
            h.record(v);
        }
        let s = h.snapshot();
        assert_eq!((s.count, s.zeroes, s.sum), (4, 2, 4));
        assert_eq!((s.quantile(0.5), s.quantile(0.75), s.min(), s.max()), (0, 1, 0, 3));
        assert_eq!(s.cumulative(&[0, 1, 5]), vec![2, 3, 4]);
        h.record(0);
        assert_eq!(
            h.snapshot().since(&s),
            super::Snapshot { buckets: vec![0; super::BUCKETS], count: 1, sum: 0, zeroes: 1 }
        );
    }

    use super::{Histogram, OFFSETS};

    #[test]
    fn offsets_are_cassandras() {
        // EstimatedHistogram's first offsets (Cassandra's newOffsets with factor 1.2).
        assert_eq!(&OFFSETS[..20], &[1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 17, 20, 24, 29, 35, 42, 50, 60, 72]);
        assert!(OFFSETS[OFFSETS.len() - 1] > 60_000_000, "covers a minute in microseconds");
    }

    #[test]
    fn quantiles_read_bucket_upper_bounds() {
        let h = Histogram::new();
        for v in 1..=100 {
            h.record(v);
        }
        let s = h.snapshot();
        assert_eq!(s.count, 100);
        assert_eq!(s.sum, 5050);
        assert_eq!(s.min(), 1);
        assert_eq!(s.quantile(0.5), 50);
        assert_eq!(s.quantile(0.99), 103);
        assert_eq!(s.max(), 103);
        assert_eq!(Histogram::new().snapshot().quantile(0.5), 0);
    }

    #[test]
    fn cumulative_counts_whole_buckets_under_each_bound() {
        let h = Histogram::new();
        h.record_n(5, 3);
        h.record(1000);
        h.record(u64::MAX / 4);
        let s = h.snapshot();
        assert_eq!(s.cumulative(&[4, 5, 999, 1109, u64::MAX]), vec![0, 3, 3, 4, 4]);
        assert_eq!(s.count, 5, "the overflow bucket is counted");
        let later = {
            h.record(5);
            h.snapshot()
        };
        assert_eq!(later.since(&s).count, 1);
    }
}
