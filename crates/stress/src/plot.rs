//! `--plot FILE.svg|FILE.html`: a run's throughput and latency percentiles
//! over time, as a [`Chart`] (two panels over elapsed seconds; the latency
//! panel on a log axis) drawn by `chart.rs`, the project's one plotting path.

use std::path::Path;

use crate::chart::{Chart, Panel, Series};
use crate::report::IntervalRow;
use crate::settings::{Rate, RunLength, Settings};

/// Draws throughput and latency percentiles of `intervals` into `path` under
/// `title`; `from_intended`: the latency counts from intended starts
/// (fixed-rate runs).
pub fn write(path: &Path, title: &str, from_intended: bool, intervals: &[IntervalRow]) -> Result<(), String> {
    chart(title, from_intended, intervals).write(path)
}

/// The chart title of a run of `settings`.
pub fn title(settings: &Settings) -> String {
    let length = match settings.length {
        RunLength::Ops(n) => format!("n={}", crate::legacy::group_thousands(n)),
        RunLength::Time(d) => format!("duration={}s", d.as_secs()),
    };
    let rate = match settings.rate {
        Rate::Closed => format!("threads={}", settings.threads),
        Rate::Fixed(r) => format!("fixed={r}/s"),
        Rate::Throttle(r) => format!("throttle={r}/s threads={}", settings.threads),
    };
    format!(
        "shoal stress {} {length} {rate} cl={} columns={}x{}",
        settings.command.name(),
        settings.consistency.name(),
        settings.columns,
        settings.column_size
    )
}

/// The chart of a run: throughput, then latency percentiles on a log axis.
pub fn chart(title: &str, from_intended: bool, intervals: &[IntervalRow]) -> Chart {
    let series = |name: &str, color: &str, value: fn(&IntervalRow) -> f64| Series {
        name: name.to_string(),
        color: Some(color.to_string()),
        points: intervals.iter().map(|r| (r.elapsed_s, value(r))).collect(),
    };
    let throughput = Panel {
        title: "Throughput".to_string(),
        y_label: "op/s".to_string(),
        log_y: false,
        series: vec![series("op/s", "#1f77b4", |r| r.op_rate)],
        hlines: Vec::new(),
    };
    let latency = Panel {
        title: if from_intended { "Latency from intended start" } else { "Latency" }.to_string(),
        y_label: "ms (log)".to_string(),
        log_y: true,
        series: vec![
            series("p50", "#2ca02c", |r| r.latency.p50_ms),
            series("p95", "#ff7f0e", |r| r.latency.p95_ms),
            series("p99", "#d62728", |r| r.latency.p99_ms),
            series("p99.9", "#9467bd", |r| r.latency.p999_ms),
        ],
        hlines: Vec::new(),
    };
    Chart {
        title: title.to_string(),
        x_label: "elapsed seconds".to_string(),
        log_x: false,
        panels: vec![throughput, latency],
        width: 1200,
        panel_height: 380,
    }
}
