//! The Prometheus text exposition format (version 0.0.4): `# HELP` and
//! `# TYPE` once per family, then its samples.
//!
//! Invariants:
//! - A family's header is written once, before its first sample, whatever
//!   order the caller writes samples in for other families (the caller
//!   writes one family's samples together).
//! - Label values are escaped (`\\`, `\"`, `\n`), so a table name cannot
//!   break the format.

use std::fmt::Write as _;

use crate::histogram::Snapshot;

/// The `le` bounds, in microseconds, of exported latency histograms (a
/// subset of the fine buckets' range keeps a scrape of 1,000 tables small).
pub const LATENCY_BOUNDS_US: [u64; 16] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000,
    5_000_000, 10_000_000,
];

#[derive(Default)]
pub struct Writer {
    out: String,
    current: String,
}

pub type Labels<'a> = &'a [(&'a str, &'a str)];

impl Writer {
    pub fn new() -> Writer {
        Writer::default()
    }

    pub fn finish(self) -> String {
        self.out
    }

    fn header(&mut self, name: &str, kind: &str, help: &str) {
        if self.current != name {
            self.current = name.to_string();
            let _ = writeln!(self.out, "# HELP {name} {help}");
            let _ = writeln!(self.out, "# TYPE {name} {kind}");
        }
    }

    fn sample(&mut self, name: &str, labels: Labels<'_>, extra: Option<(&str, &str)>, value: f64) {
        self.out.push_str(name);
        let mut all = labels.iter().copied().chain(extra).peekable();
        if all.peek().is_some() {
            self.out.push('{');
            for (i, (k, v)) in all.enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape(v));
            }
            self.out.push('}');
        }
        if value.is_finite() && value.fract() == 0.0 && value.abs() < 1e15 {
            let _ = writeln!(self.out, " {}", value as i64);
        } else {
            let _ = writeln!(self.out, " {value}");
        }
    }

    pub fn counter(&mut self, name: &str, help: &str, labels: Labels<'_>, value: u64) {
        self.header(name, "counter", help);
        self.sample(name, labels, None, value as f64);
    }

    pub fn gauge(&mut self, name: &str, help: &str, labels: Labels<'_>, value: f64) {
        self.header(name, "gauge", help);
        self.sample(name, labels, None, value);
    }

    /// A histogram of microsecond values exported in seconds.
    pub fn latency(&mut self, name: &str, help: &str, labels: Labels<'_>, snapshot: &Snapshot) {
        self.header(name, "histogram", help);
        let bucket = format!("{name}_bucket");
        for (bound, n) in LATENCY_BOUNDS_US.iter().zip(snapshot.cumulative(&LATENCY_BOUNDS_US)) {
            let le = format!("{}", *bound as f64 / 1e6);
            self.sample(&bucket, labels, Some(("le", &le)), n as f64);
        }
        self.sample(&bucket, labels, Some(("le", "+Inf")), snapshot.count as f64);
        self.sample(&format!("{name}_sum"), labels, None, snapshot.sum as f64 / 1e6);
        self.sample(&format!("{name}_count"), labels, None, snapshot.count as f64);
    }

    /// A histogram of plain values (counts, bytes) with the given bounds.
    pub fn values(&mut self, name: &str, help: &str, labels: Labels<'_>, snapshot: &Snapshot, bounds: &[u64]) {
        self.header(name, "histogram", help);
        let bucket = format!("{name}_bucket");
        for (bound, n) in bounds.iter().zip(snapshot.cumulative(bounds)) {
            self.sample(&bucket, labels, Some(("le", &bound.to_string())), n as f64);
        }
        self.sample(&bucket, labels, Some(("le", "+Inf")), snapshot.count as f64);
        self.sample(&format!("{name}_sum"), labels, None, snapshot.sum as f64);
        self.sample(&format!("{name}_count"), labels, None, snapshot.count as f64);
    }
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::Writer;
    use crate::Histogram;

    #[test]
    fn families_have_one_header_and_escaped_labels() {
        let mut w = Writer::new();
        w.counter("shoal_x_total", "X.", &[("table", "a\"b")], 3);
        w.counter("shoal_x_total", "X.", &[("table", "c")], 4);
        let h = Histogram::new();
        h.record(150);
        h.record(2_000_000);
        w.latency("shoal_lat_seconds", "L.", &[], &h.snapshot());
        let text = w.finish();
        assert_eq!(text.matches("# TYPE shoal_x_total counter").count(), 1);
        assert!(text.contains("shoal_x_total{table=\"a\\\"b\"} 3\n"), "{text}");
        assert!(text.contains("shoal_lat_seconds_bucket{le=\"0.00025\"} 1\n"), "{text}");
        assert!(text.contains("shoal_lat_seconds_bucket{le=\"+Inf\"} 2\n"), "{text}");
        assert!(text.contains("shoal_lat_seconds_count 2\n"), "{text}");
    }
}
