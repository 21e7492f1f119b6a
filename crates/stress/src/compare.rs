//! `shoal stress compare A.json B.json [--json OUT]`: two reports side by side
//! (throughput, latency percentiles, errors, client and server CPU per
//! operation) with the ratio B/A of each figure, and 95% confidence intervals
//! for throughput and mean latency.
//!
//! The confidence intervals come from the per-interval series of each run
//! (`intervals` of the report; intervals shorter than half the typical one,
//! such as the last, are left out, and intervals without a successful
//! operation are left out of the latency series). For each series we take the
//! mean and sample variance; the difference B − A gets Welch's t interval
//! (unequal variances, Welch–Satterthwaite degrees of freedom); the ratio B/A
//! gets the same construction on the log scale (delta method: the variance of
//! ln(mean) is var / (n · mean²)), so its interval is B/A · exp(±t · se) and
//! never crosses zero. Interval values of one run are not independent (a
//! compaction or a GC pause spans several), so these intervals are optimistic;
//! runs of 30 or more intervals make them meaningful, and a ratio whose
//! interval includes 1 is no evidence of a difference.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde::Serialize;

use crate::legacy::group_thousands;
use crate::report::{IntervalRow, Report};
use crate::{EXIT_FAILED, EXIT_USAGE};

pub const USAGE: &str = "usage: shoal stress compare A.json B.json [--json OUT.json]
       (two --json reports of shoal stress runs or merges; ratios are B/A)";

/// What the confidence intervals are and how they are computed (printed and in the JSON).
pub const METHOD: &str = "95% CI from the per-interval series (intervals shorter than half the typical one left out): \
Welch t interval for the difference B-A, and for the ratio B/A the same on the log scale (delta method); \
interval values are autocorrelated, so the intervals are optimistic";

/// Entry point of `shoal stress compare ...`.
pub fn main(args: &[String]) -> ExitCode {
    let (a, b, json) = match parse(args) {
        Ok(Some(parsed)) => parsed,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("shoal stress compare: {e}\n\n{USAGE}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let result = (|| -> Result<(), String> {
        let (ra, rb) = (Report::read(&a)?, Report::read(&b)?);
        let comparison = compare(&a.display().to_string(), &ra, &b.display().to_string(), &rb);
        print!("{}", comparison.text());
        if let Some(path) = json {
            let text = serde_json::to_string_pretty(&comparison).map_err(|e| format!("--json: {e}"))?;
            std::fs::write(&path, text + "\n").map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        }
        Ok(())
    })();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("shoal stress compare: {e}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

fn parse(args: &[String]) -> Result<Option<(PathBuf, PathBuf, Option<PathBuf>)>, String> {
    let mut files = Vec::new();
    let mut json = None;
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        i += 1;
        if matches!(arg, "help" | "-h" | "--help") {
            return Ok(None);
        }
        if let Some(value) = arg.strip_prefix("--json=") {
            json = Some(PathBuf::from(value));
        } else if arg == "--json" {
            json = Some(PathBuf::from(args.get(i).ok_or("--json needs a file name")?));
            i += 1;
        } else if arg.starts_with('-') {
            return Err(format!("unknown option `{arg}`"));
        } else {
            files.push(PathBuf::from(arg));
        }
    }
    match <[PathBuf; 2]>::try_from(files) {
        Ok([a, b]) => Ok(Some((a, b, json))),
        Err(files) => Err(format!("compare takes two reports, A and B (got {})", files.len())),
    }
}

/// A 95% confidence interval of B − A and of B/A.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Interval {
    pub n_a: usize,
    pub n_b: usize,
    pub mean_a: f64,
    pub mean_b: f64,
    pub diff: f64,
    pub diff_low: f64,
    pub diff_high: f64,
    pub diff_df: f64,
    pub ratio: f64,
    pub ratio_low: f64,
    pub ratio_high: f64,
    pub ratio_df: f64,
}

/// One figure of both runs.
#[derive(Clone, Debug, Serialize)]
pub struct Metric {
    pub name: String,
    pub a: Option<f64>,
    pub b: Option<f64>,
    /// B/A, where both are known and A is not zero.
    pub ratio: Option<f64>,
    /// From the per-interval series (throughput and mean latency only).
    pub ci95: Option<Interval>,
    /// Why there is no interval where one was expected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ci95_missing: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub a: String,
    pub b: String,
    pub a_description: String,
    pub b_description: String,
    pub metrics: Vec<Metric>,
    pub method: &'static str,
}

fn describe(r: &Report) -> String {
    let s = &r.summary;
    let clients = if s.clients > 1 { format!(", {} clients", s.clients) } else { String::new() };
    format!(
        "{} {} ops in {:.1} s, {} threads ({}){clients}",
        s.command,
        group_thousands(s.ops),
        s.elapsed_s,
        r.settings.threads,
        r.settings.rate
    )
}

/// Compares B with A.
pub fn compare(a_name: &str, a: &Report, b_name: &str, b: &Report) -> Comparison {
    let mut metrics = Vec::new();
    let mut plain = |name: &str, va: Option<f64>, vb: Option<f64>| {
        metrics.push(Metric {
            name: name.to_string(),
            a: va,
            b: vb,
            ratio: ratio(va, vb),
            ci95: None,
            ci95_missing: None,
        });
    };
    let (sa, sb) = (&a.summary, &b.summary);
    let with_series = |name: &str, va: f64, vb: f64, series: fn(&[IntervalRow]) -> Vec<f64>| {
        let ci = welch(&series(&a.intervals), &series(&b.intervals));
        let missing = ci.is_err().then(|| ci.clone().err().unwrap_or_default());
        Metric {
            name: name.to_string(),
            a: Some(va),
            b: Some(vb),
            ratio: ratio(Some(va), Some(vb)),
            ci95: ci.ok(),
            ci95_missing: missing,
        }
    };
    let throughput = with_series("op/s", sa.op_rate, sb.op_rate, rate_series);
    let mean = with_series("mean latency ms", sa.latency.mean_ms, sb.latency.mean_ms, mean_series);
    let mut all = vec![throughput, mean];
    plain("p50 ms", Some(sa.latency.p50_ms), Some(sb.latency.p50_ms));
    plain("p95 ms", Some(sa.latency.p95_ms), Some(sb.latency.p95_ms));
    plain("p99 ms", Some(sa.latency.p99_ms), Some(sb.latency.p99_ms));
    plain("p99.9 ms", Some(sa.latency.p999_ms), Some(sb.latency.p999_ms));
    plain("max ms", Some(sa.latency.max_ms), Some(sb.latency.max_ms));
    plain("errors", Some(sa.errors as f64), Some(sb.errors as f64));
    plain("client CPU us/op", sa.client_cpu_us_per_op, sb.client_cpu_us_per_op);
    plain("server CPU us/op", sa.server_cpu_us_per_op, sb.server_cpu_us_per_op);
    for (name, ta, tb) in [("read", &sa.read, &sb.read), ("write", &sa.write, &sb.write)] {
        if let (Some(ta), Some(tb)) = (ta, tb) {
            plain(&format!("{name} op/s"), Some(ta.op_rate), Some(tb.op_rate));
            plain(&format!("{name} mean ms"), Some(ta.latency.mean_ms), Some(tb.latency.mean_ms));
            plain(&format!("{name} p99 ms"), Some(ta.latency.p99_ms), Some(tb.latency.p99_ms));
        }
    }
    all.extend(metrics);
    Comparison {
        a: a_name.to_string(),
        b: b_name.to_string(),
        a_description: describe(a),
        b_description: describe(b),
        metrics: all,
        method: METHOD,
    }
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if a != 0.0 => Some(b / a),
        _ => None,
    }
}

/// Intervals long enough to count: at least half the median duration.
fn full_intervals(rows: &[IntervalRow]) -> impl Iterator<Item = &IntervalRow> {
    let mut durations: Vec<f64> = rows.iter().map(|r| r.duration_s).collect();
    durations.sort_by(f64::total_cmp);
    let median = durations.get(durations.len() / 2).copied().unwrap_or(0.0);
    rows.iter().filter(move |r| r.duration_s >= median / 2.0 && r.duration_s > 0.0)
}

fn rate_series(rows: &[IntervalRow]) -> Vec<f64> {
    full_intervals(rows).map(|r| r.op_rate).collect()
}

fn mean_series(rows: &[IntervalRow]) -> Vec<f64> {
    full_intervals(rows).filter(|r| r.op_rate > 0.0).map(|r| r.latency.mean_ms).collect()
}

fn mean_var(x: &[f64]) -> (f64, f64) {
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var)
}

/// Welch–Satterthwaite degrees of freedom of `terms` = (variance of the mean, n).
fn satterthwaite(terms: [(f64, usize); 2]) -> f64 {
    let total: f64 = terms.iter().map(|(v, _)| v).sum();
    let denominator: f64 = terms.iter().map(|(v, n)| v * v / (*n as f64 - 1.0)).sum();
    if denominator > 0.0 {
        total * total / denominator
    } else {
        f64::INFINITY
    }
}

/// The 95% intervals of B − A and B/A from the two series (see the module comment).
pub fn welch(a: &[f64], b: &[f64]) -> Result<Interval, String> {
    if a.len() < 2 || b.len() < 2 {
        return Err(format!("needs at least 2 full intervals per run (A has {}, B has {})", a.len(), b.len()));
    }
    let ((ma, va), (mb, vb)) = (mean_var(a), mean_var(b));
    let (na, nb) = (a.len(), b.len());
    let (wa, wb) = (va / na as f64, vb / nb as f64);
    let diff_df = satterthwaite([(wa, na), (wb, nb)]);
    let half = t_quantile_975(diff_df) * (wa + wb).sqrt();
    let diff = mb - ma;
    if !(ma > 0.0 && mb > 0.0) {
        return Err("a mean of zero has no ratio".to_string());
    }
    let (la, lb) = (wa / (ma * ma), wb / (mb * mb));
    let ratio_df = satterthwaite([(la, na), (lb, nb)]);
    let factor = (t_quantile_975(ratio_df) * (la + lb).sqrt()).exp();
    let ratio = mb / ma;
    Ok(Interval {
        n_a: na,
        n_b: nb,
        mean_a: ma,
        mean_b: mb,
        diff,
        diff_low: diff - half,
        diff_high: diff + half,
        diff_df,
        ratio,
        ratio_low: ratio / factor,
        ratio_high: ratio * factor,
        ratio_df,
    })
}

/// The 0.975 quantile of Student's t with `df` degrees of freedom (1.96 as df → ∞).
pub fn t_quantile_975(df: f64) -> f64 {
    if !df.is_finite() || df > 1e7 {
        return 1.959_963_984_540_054;
    }
    // Bisection on the CDF: P(T <= t) = 1 - I_{df/(df+t²)}(df/2, 1/2) / 2 for t >= 0.
    let (mut lo, mut hi) = (0.0f64, 1e4f64);
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        let upper_tail = incomplete_beta(df / 2.0, 0.5, df / (df + mid * mid)) / 2.0;
        if upper_tail > 0.025 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo + hi) / 2.0
}

/// ln Γ(x) for x > 0 (Lanczos approximation, g = 7, n = 9).
fn ln_gamma(x: f64) -> f64 {
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x) Γ(1 - x) = π / sin(πx).
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let t = x + 7.5;
    let sum = C[1..].iter().enumerate().fold(C[0], |s, (i, c)| s + c / (x + i as f64 + 1.0));
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + sum.ln()
}

/// The regularized incomplete beta function I_x(a, b).
fn incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front = (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    // The continued fraction converges fast for x < (a + 1) / (a + b + 2); use the symmetry otherwise.
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_fraction(a, b, x) / a
    } else {
        1.0 - front * beta_fraction(b, a, 1.0 - x) / b
    }
}

/// The continued fraction of the incomplete beta function (modified Lentz).
fn beta_fraction(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let mut c = 1.0;
    let mut d = 1.0 - (a + b) * x / (a + 1.0);
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..300 {
        let m = m as f64;
        for numerator in [
            m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0)),
        ] {
            d = 1.0 + numerator * d;
            if d.abs() < TINY {
                d = TINY;
            }
            c = 1.0 + numerator / c;
            if c.abs() < TINY {
                c = TINY;
            }
            d = 1.0 / d;
            h *= d * c;
        }
        if (d * c - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

fn number(v: Option<f64>) -> String {
    match v {
        None => "-".to_string(),
        Some(v) if v.abs() >= 1_000.0 => group_thousands(v.round() as u64),
        Some(v) if v == v.trunc() && v.abs() < 1e15 => format!("{v:.0}"),
        Some(v) => format!("{v:.3}"),
    }
}

/// A difference with its sign, to a precision that suits its size.
fn signed(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:+.0}")
    } else {
        format!("{v:+.3}")
    }
}

impl Comparison {
    pub fn text(&self) -> String {
        let mut out = format!("A: {} ({})\nB: {} ({})\n\n", self.a, self.a_description, self.b, self.b_description);
        out.push_str(&format!("{:<18} {:>12} {:>12} {:>8}   {}\n", "", "A", "B", "B/A", "95% CI of B/A (of B-A)"));
        for m in &self.metrics {
            let ratio = m.ratio.map_or("-".to_string(), |r| format!("{r:.3}"));
            let ci = match (&m.ci95, &m.ci95_missing) {
                (Some(c), _) => format!(
                    "{:.3} .. {:.3}  ({} .. {}; n {}+{})",
                    c.ratio_low,
                    c.ratio_high,
                    signed(c.diff_low),
                    signed(c.diff_high),
                    c.n_a,
                    c.n_b
                ),
                (None, Some(why)) => format!("n/a: {why}"),
                (None, None) => String::new(),
            };
            let line = format!("{:<18} {:>12} {:>12} {:>8}   {ci}", m.name, number(m.a), number(m.b), ratio);
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out.push_str(&format!("\n{}\n", self.method));
        out
    }
}

/// For tests and callers with files at hand.
pub fn compare_files(a: &Path, b: &Path) -> Result<Comparison, String> {
    Ok(compare(&a.display().to_string(), &Report::read(a)?, &b.display().to_string(), &Report::read(b)?))
}

#[cfg(test)]
#[path = "compare_tests.rs"]
mod tests;
