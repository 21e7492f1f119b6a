//! `compare` on synthetic reports: the t quantiles, Welch's interval on a
//! hand-computed example, the ratio interval, the side-by-side figures and the
//! cases without enough intervals.

use super::*;
use crate::report::{JsonSettings, Summary, TypeStats};
use crate::settings::{Command, Settings};
use crate::stats::Percentiles;

fn row(op_rate: f64, mean_ms: f64, duration_s: f64) -> IntervalRow {
    let latency = Percentiles {
        mean_ms,
        p50_ms: mean_ms,
        p95_ms: mean_ms * 2.0,
        p99_ms: mean_ms * 3.0,
        p999_ms: mean_ms * 4.0,
        max_ms: mean_ms * 5.0,
    };
    IntervalRow {
        total_ops: 0,
        op_rate,
        row_rate: op_rate,
        elapsed_s: 0.0,
        duration_s,
        errors: 0,
        latency,
        service_time: latency,
        start_unix_s: 0.0,
        ops: (op_rate * duration_s) as u64,
        rows: (op_rate * duration_s) as u64,
        latency_hdr: None,
        service_hdr: None,
        read: None,
        write: None,
        applied: None,
        not_applied: None,
    }
}

fn report(rates: &[f64], means: &[f64], cpu_us: f64) -> Report {
    let settings = Settings::new(Command::Write);
    let mut intervals: Vec<IntervalRow> = rates.iter().zip(means).map(|(&r, &m)| row(r, m, 1.0)).collect();
    // A short last interval with an outlandish rate: left out of the series.
    intervals.push(row(1e9, 1e3, 0.1));
    let ops: f64 = rates.iter().sum();
    let mean = means.iter().sum::<f64>() / means.len() as f64;
    let latency = Percentiles {
        mean_ms: mean,
        p50_ms: mean,
        p95_ms: 2.0 * mean,
        p99_ms: 3.0 * mean,
        p999_ms: 4.0 * mean,
        max_ms: 10.0 * mean,
    };
    let summary = Summary {
        command: "write".to_string(),
        ops: ops as u64,
        rows: ops as u64,
        errors: 2,
        retries: 0,
        reads: 0,
        writes: ops as u64,
        missing: 0,
        mismatched: 0,
        elapsed_s: rates.len() as f64,
        op_rate: ops / rates.len() as f64,
        row_rate: ops / rates.len() as f64,
        latency,
        service_time: latency,
        client_cpu_s: Some(cpu_us * ops / 1e6),
        client_cpu_us_per_op: Some(cpu_us),
        client_cores: 2,
        client_threads: 1,
        client_cpu_utilisation: Some(0.5),
        server_pids: Vec::new(),
        server_cpu_s: None,
        server_cpu_us_per_op: None,
        cost_per_hour: None,
        dollars_per_million_ops: None,
        stopped_by: None,
        start_unix_s: 1.0,
        end_unix_s: 2.0,
        latency_from_intended: false,
        clients: 1,
        server_cpu_at_start_s: None,
        server_cpu_at_end_s: None,
        latency_hdr: None,
        service_hdr: None,
        read: None,
        write: None,
        applied: None,
        not_applied: None,
    };
    Report::new(&["write".to_string()], JsonSettings::of(&settings), summary, intervals)
}

fn close(a: f64, b: f64, tolerance: f64) -> bool {
    (a - b).abs() <= tolerance
}

#[test]
fn t_quantiles_match_the_tables() {
    for (df, t) in [
        (1.0, 12.706),
        (2.0, 4.303),
        (4.0, 2.776),
        (8.0, 2.306),
        (10.0, 2.228),
        (30.0, 2.042),
        (120.0, 1.980),
        (2.5, 3.5747),
    ] {
        let got = t_quantile_975(df);
        assert!(close(got, t, 0.0015), "df {df}: {got} vs {t}");
    }
    assert!(close(t_quantile_975(f64::INFINITY), 1.95996, 1e-5));
    assert!(close(t_quantile_975(1e6), 1.95996, 1e-4));
}

#[test]
fn welch_interval_by_hand() {
    // Means 100 and 110, variances 2.5 and 2.5, n 5 and 5: se 1, df 8, t 2.306.
    let a = [100.0, 102.0, 98.0, 101.0, 99.0];
    let b = [110.0, 112.0, 108.0, 111.0, 109.0];
    let ci = welch(&a, &b).expect("enough intervals");
    assert!(close(ci.diff, 10.0, 1e-12) && close(ci.diff_df, 8.0, 1e-9), "{ci:?}");
    assert!(close(ci.diff_low, 10.0 - 2.306, 0.001) && close(ci.diff_high, 10.0 + 2.306, 0.001), "{ci:?}");
    // Ratio on the log scale: se² = 2.5/(5·100²) + 2.5/(5·110²).
    let se = (2.5 / (5.0 * 100.0 * 100.0) + 2.5 / (5.0 * 110.0 * 110.0f64)).sqrt();
    assert!(close(ci.ratio, 1.1, 1e-12));
    assert!(ci.ratio_df > 7.0 && ci.ratio_df < 8.0, "{}", ci.ratio_df);
    let t = t_quantile_975(ci.ratio_df);
    assert!(close(ci.ratio_low, 1.1 / (t * se).exp(), 1e-9) && close(ci.ratio_high, 1.1 * (t * se).exp(), 1e-9));
    assert!(ci.ratio_low > 1.0, "a clear difference: the interval excludes 1");
    // Identical constant series: a zero-width interval at 1.
    let same = welch(&[5.0, 5.0, 5.0], &[5.0, 5.0]).expect("computes");
    assert_eq!((same.ratio_low, same.ratio_high, same.diff_low, same.diff_high), (1.0, 1.0, 0.0, 0.0));
    assert!(welch(&[1.0], &[1.0, 2.0]).is_err());
    assert!(welch(&[0.0, 0.0], &[1.0, 2.0]).is_err());
}

#[test]
fn side_by_side_with_ratios_and_intervals() {
    let a = report(&[1000.0, 1100.0, 900.0, 1000.0, 1050.0, 950.0], &[2.0, 2.2, 1.8, 2.0, 2.1, 1.9], 12.0);
    let mut b = report(&[2000.0, 2100.0, 1900.0, 2000.0, 2050.0, 1950.0], &[1.0, 1.1, 0.9, 1.0, 1.05, 0.95], 6.0);
    b.summary.server_cpu_us_per_op = Some(20.0);
    let c = compare("a.json", &a, "b.json", &b);
    let get = |name: &str| c.metrics.iter().find(|m| m.name == name).unwrap_or_else(|| panic!("{name} missing"));
    let throughput = get("op/s");
    assert!(close(throughput.ratio.expect("ratio"), 2.0, 1e-9));
    let ci = throughput.ci95.as_ref().expect("interval");
    assert_eq!((ci.n_a, ci.n_b), (6, 6), "the short last interval is left out");
    assert!(ci.ratio_low < 2.0 && ci.ratio_high > 2.0 && ci.ratio_low > 1.8 && ci.ratio_high < 2.2, "{ci:?}");
    let mean = get("mean latency ms");
    assert!(close(mean.ratio.expect("ratio"), 0.5, 1e-9));
    assert!(mean.ci95.as_ref().is_some_and(|ci| ci.ratio_high < 1.0));
    assert!(close(get("client CPU us/op").ratio.expect("ratio"), 0.5, 1e-12));
    assert_eq!((get("server CPU us/op").a, get("server CPU us/op").ratio), (None, None));
    assert_eq!(get("errors").ratio, Some(1.0));
    assert!(get("p99.9 ms").ci95.is_none());
    let text = c.text();
    for needle in [
        "op/s",
        "mean latency ms",
        "p99.9 ms",
        "max ms",
        "errors",
        "client CPU us/op",
        "server CPU us/op",
        "Welch",
        "B/A",
    ] {
        assert!(text.contains(needle), "{needle} in\n{text}");
    }
    assert!(text.lines().any(|l| l.starts_with("op/s") && l.contains("2.000")), "{text}");
    let json = serde_json::to_value(&c).expect("serializes");
    assert!(json["metrics"][0]["ci95"]["ratio_low"].as_f64().is_some());

    // Per-type rows when both runs have them; no interval from a single interval.
    let mut one = report(&[1000.0], &[1.0], 10.0);
    let stats = TypeStats {
        ops: 1,
        errors: 0,
        op_rate: 10.0,
        latency: Percentiles::default(),
        service_time: Percentiles::default(),
        latency_hdr: None,
        service_hdr: None,
    };
    one.summary.read = Some(stats.clone());
    let mut other = one.clone();
    other.summary.read = Some(TypeStats { op_rate: 15.0, ..stats });
    let c = compare("x", &one, "y", &other);
    assert!(
        c.metrics[0].ci95.is_none() && c.metrics[0].ci95_missing.as_deref().is_some_and(|w| w.contains("at least 2"))
    );
    assert!(c.metrics.iter().any(|m| m.name == "read op/s" && m.ratio == Some(1.5)));
    assert!(c.text().contains("n/a: needs at least 2 full intervals"));
}

#[test]
fn command_line() {
    let words = |s: &str| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();
    assert!(matches!(parse(&words("a b")), Ok(Some((_, _, None)))));
    assert!(matches!(parse(&words("a b --json o")), Ok(Some((_, _, Some(_))))));
    assert!(matches!(parse(&words("a --json=o b")), Ok(Some((_, _, Some(_))))));
    assert!(parse(&words("a")).is_err());
    assert!(parse(&words("a b c")).is_err());
    assert!(parse(&words("a b --x")).is_err());
    assert!(matches!(parse(&words("help")), Ok(None)));
}
