//! Output: the interval lines (stdout and `--csv`), the progress bar on a
//! terminal, the `--hdr-log` interval log, the final summary and `--json`.
//!
//! Invariant: every interval line starts with the legacy tool's five columns
//! `total,interval_op_rate,interval_key_rate,avg_latency,elapsed_time`
//! (average latency in seconds, elapsed in whole seconds) so old scripts still
//! parse it; the columns after them are added at the end, never inserted.

use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::Path;
use std::time::{Duration, SystemTime};

use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;
use serde::{Deserialize, Serialize};

use crate::hdr;
use crate::legacy::group_thousands;
use crate::settings::{Command, Rate, RunLength, Settings};
use crate::stats::{OpType, Percentiles, Recorder, TypeRecorder};

/// The header of the interval lines.
pub const HEADER: &str =
    "total,interval_op_rate,interval_key_rate,avg_latency,elapsed_time,mean_ms,p50_ms,p95_ms,p99_ms,p999_ms,max_ms,errors";

/// The columns `mixed` runs add after `HEADER`'s, per operation type.
pub const MIXED_COLUMNS: &str = "read_op_rate,read_mean_ms,read_p99_ms,write_op_rate,write_mean_ms,write_p99_ms";

/// The columns `lwt` runs add after `HEADER`'s: conditional statements in the
/// interval that applied and that did not (errors are `HEADER`'s own column).
pub const LWT_COLUMNS: &str = "applied,not_applied";

/// The statistics of one operation type (mixed runs), for an interval or a whole run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TypeStats {
    pub ops: u64,
    pub errors: u64,
    pub op_rate: f64,
    pub latency: Percentiles,
    pub service_time: Percentiles,
    /// The latency histogram (`hdr.rs`: base64 of the V2 compressed serialization).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_hdr: Option<String>,
    /// The service-time histogram, only where it differs from latency (fixed-rate runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_hdr: Option<String>,
}

impl TypeStats {
    pub fn of(t: &TypeRecorder, seconds: f64, fixed: bool) -> TypeStats {
        TypeStats {
            ops: t.ops,
            errors: t.errors,
            op_rate: t.ops as f64 / seconds.max(1e-9),
            latency: Percentiles::of(&t.latency),
            service_time: Percentiles::of(&t.service),
            latency_hdr: Some(hdr::encode(&t.latency)),
            service_hdr: fixed.then(|| hdr::encode(&t.service)),
        }
    }
}

/// One interval, as printed and as stored in the JSON report.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IntervalRow {
    /// Successful operations since the measured phase began.
    pub total_ops: u64,
    pub op_rate: f64,
    pub row_rate: f64,
    /// Seconds from the start of the measured phase to the end of this interval.
    pub elapsed_s: f64,
    pub duration_s: f64,
    pub errors: u64,
    pub latency: Percentiles,
    pub service_time: Percentiles,
    /// Wall-clock start of the interval, seconds since the Unix epoch (`merge` aligns on it).
    #[serde(default)]
    pub start_unix_s: f64,
    /// Successful operations in this interval.
    #[serde(default)]
    pub ops: u64,
    #[serde(default)]
    pub rows: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_hdr: Option<String>,
    /// Only where it differs from latency (fixed-rate runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_hdr: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<TypeStats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write: Option<TypeStats>,
    /// `lwt`: conditional statements of the interval that applied / did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_applied: Option<u64>,
}

impl IntervalRow {
    /// The interval line (without newline).
    pub fn line(&self, whole_seconds: bool) -> String {
        let elapsed = if whole_seconds { format!("{:.0}", self.elapsed_s) } else { format!("{:.1}", self.elapsed_s) };
        let l = &self.latency;
        let mut line = format!(
            "{},{:.0},{:.0},{:.6},{},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{}",
            self.total_ops,
            self.op_rate,
            self.row_rate,
            l.mean_ms / 1000.0,
            elapsed,
            l.mean_ms,
            l.p50_ms,
            l.p95_ms,
            l.p99_ms,
            l.p999_ms,
            l.max_ms,
            self.errors
        );
        if self.read.is_some() || self.write.is_some() {
            for t in [&self.read, &self.write] {
                let (rate, mean, p99) =
                    t.as_ref().map_or((0.0, 0.0, 0.0), |t| (t.op_rate, t.latency.mean_ms, t.latency.p99_ms));
                line.push_str(&format!(",{rate:.0},{mean:.3},{p99:.3}"));
            }
        }
        if let (Some(applied), Some(not_applied)) = (self.applied, self.not_applied) {
            line.push_str(&format!(",{applied},{not_applied}"));
        }
        line
    }
}

/// The header line for a run of `command`.
pub fn header(command: Command) -> String {
    match command {
        Command::Mixed => format!("{HEADER},{MIXED_COLUMNS}"),
        Command::Lwt => format!("{HEADER},{LWT_COLUMNS}"),
        _ => HEADER.to_string(),
    }
}

/// Seconds since the Unix epoch.
pub fn unix_seconds(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// Where interval output goes during a run.
pub struct Reporter {
    csv: Option<BufWriter<File>>,
    hdr: Option<HdrLog>,
    progress: bool,
    progress_shown: bool,
    whole_seconds: bool,
    errors_total: u64,
    header_printed: bool,
    command: Command,
    fixed: bool,
    /// Wall-clock time of the measured phase's start.
    started: SystemTime,
}

struct HdrLog {
    file: BufWriter<File>,
    serializer: V2DeflateSerializer,
    with_service: bool,
}

fn create(path: &Path) -> Result<BufWriter<File>, String> {
    File::create(path).map(BufWriter::new).map_err(|e| format!("cannot create {}: {e}", path.display()))
}

impl Reporter {
    pub fn new(settings: &Settings) -> Result<Reporter, String> {
        let csv = match &settings.csv {
            Some(path) => Some(create(path)?),
            None => None,
        };
        let fixed = matches!(settings.rate, Rate::Fixed(_));
        let hdr = match &settings.hdr_log {
            Some(path) => {
                Some(HdrLog { file: create(path)?, serializer: V2DeflateSerializer::new(), with_service: fixed })
            }
            None => None,
        };
        Ok(Reporter {
            csv,
            hdr,
            progress: matches!(settings.length, RunLength::Ops(_)) && std::io::stderr().is_terminal(),
            progress_shown: false,
            whole_seconds: settings.interval.subsec_nanos() == 0,
            errors_total: 0,
            header_printed: false,
            command: settings.command,
            fixed,
            started: SystemTime::now(),
        })
    }

    /// A line for the person watching (stderr), clear of the progress bar.
    pub fn note(&mut self, text: &str) {
        self.clear_progress();
        eprintln!("{text}");
    }

    /// The measured phase begins (at wall-clock time `started`): headers of every output.
    pub fn start_measured(&mut self, started: SystemTime) {
        self.started = started;
        if !self.header_printed {
            self.clear_progress();
            let header = header(self.command);
            println!("{header}");
            if let Some(csv) = &mut self.csv {
                let _ = writeln!(csv, "{header}");
            }
            self.header_printed = true;
        }
        if let Some(hdr) = &mut self.hdr {
            let result = IntervalLogWriterBuilder::new()
                .add_comment(
                    "shoal stress: latency in microseconds (tag latency; tag service: service time of fixed-rate runs)",
                )
                .with_start_time(started)
                .with_base_time(started)
                .begin_log_with(&mut hdr.file, &mut hdr.serializer)
                .map(|_| ());
            if let Err(e) = result {
                eprintln!("warning: --hdr-log: {e}");
            }
        }
    }

    /// Reports one interval; `total` already includes `interval`.
    pub fn interval(
        &mut self,
        interval: &Recorder,
        total: &Recorder,
        duration: Duration,
        elapsed: Duration,
        planned_ops: Option<u64>,
    ) -> IntervalRow {
        let seconds = duration.as_secs_f64().max(1e-9);
        self.errors_total = total.errors;
        let start = elapsed.saturating_sub(duration);
        let of_type = |t: OpType| interval.of_type(t).map(|r| TypeStats::of(r, seconds, self.fixed));
        let row = IntervalRow {
            total_ops: total.ops,
            op_rate: interval.ops as f64 / seconds,
            row_rate: interval.rows as f64 / seconds,
            elapsed_s: elapsed.as_secs_f64(),
            duration_s: duration.as_secs_f64(),
            errors: interval.errors,
            latency: Percentiles::of(&interval.latency),
            service_time: Percentiles::of(&interval.service),
            start_unix_s: unix_seconds(self.started + start),
            ops: interval.ops,
            rows: interval.rows,
            latency_hdr: Some(hdr::encode(&interval.latency)),
            service_hdr: self.fixed.then(|| hdr::encode(&interval.service)),
            read: of_type(OpType::Read),
            write: of_type(OpType::Write),
            applied: (self.command == Command::Lwt).then_some(interval.applied),
            not_applied: (self.command == Command::Lwt).then_some(interval.not_applied),
        };
        let line = row.line(self.whole_seconds);
        self.clear_progress();
        println!("{line}");
        if let Some(csv) = &mut self.csv {
            let _ = writeln!(csv, "{line}");
        }
        if let Some(hdr) = &mut self.hdr {
            let mut tagged = vec![(&interval.latency, "latency")];
            if hdr.with_service {
                tagged.push((&interval.service, "service"));
            }
            let result =
                IntervalLogWriterBuilder::new().begin_log_with(&mut hdr.file, &mut hdr.serializer).and_then(|mut w| {
                    for (histogram, tag) in tagged {
                        w.write_histogram(histogram, start, duration, Tag::new(tag))
                            .map_err(|e| std::io::Error::other(format!("{e:?}")))?;
                    }
                    Ok(())
                });
            if let Err(e) = result {
                eprintln!("warning: --hdr-log: {e}");
                self.hdr = None;
            }
        }
        if let Some(planned) = planned_ops {
            self.show_progress(total.ops + total.errors, planned, elapsed);
        }
        row
    }

    /// Whether a progress bar is drawn (`n=` runs on a terminal).
    pub fn wants_progress(&self) -> bool {
        self.progress
    }

    /// Redraws the progress bar (terminal, `n=` runs only): `done` of `planned` operations after `elapsed`.
    pub fn show_progress(&mut self, done: u64, planned: u64, elapsed: Duration) {
        if !self.progress || planned == 0 {
            return;
        }
        eprint!("\r{}\x1b[K", progress_line(done, planned, elapsed));
        let _ = std::io::stderr().flush();
        self.progress_shown = true;
    }

    fn clear_progress(&mut self) {
        if self.progress_shown {
            eprint!("\r\x1b[K");
            let _ = std::io::stderr().flush();
            self.progress_shown = false;
        }
    }

    pub fn finish_progress(&mut self) {
        self.clear_progress();
        if let Some(csv) = &mut self.csv {
            let _ = csv.flush();
        }
        if let Some(hdr) = &mut self.hdr {
            let _ = hdr.file.flush();
        }
    }
}

/// The progress bar's text: bar, percentage, operations, rate and ETA, in at
/// most 79 columns (a wrapped line could not be redrawn in place).
pub fn progress_line(done: u64, planned: u64, elapsed: Duration) -> String {
    let fraction = (done as f64 / planned.max(1) as f64).clamp(0.0, 1.0);
    let width = 20;
    let filled = ((fraction * width as f64).floor() as usize).min(width);
    let seconds = elapsed.as_secs_f64();
    let eta = if done > 0 && seconds > 0.0 {
        clock(seconds * (planned.saturating_sub(done)) as f64 / done as f64)
    } else {
        "-:--:--".to_string()
    };
    let rate = if seconds > 0.0 { done as f64 / seconds } else { 0.0 };
    let (scale, unit) = match planned {
        0..=99_999 => (1.0, ""),
        100_000..=99_999_999 => (1e3, "k"),
        100_000_000..=99_999_999_999 => (1e6, "M"),
        _ => (1e9, "G"),
    };
    let count = |n: u64| if unit.is_empty() { group_thousands(n) } else { format!("{:.1}{unit}", n as f64 / scale) };
    format!(
        "[{}{}] {:5.1}%  {}/{} ops  {} op/s  ETA {}",
        "#".repeat(filled),
        ".".repeat(width - filled),
        fraction * 100.0,
        count(done),
        count(planned),
        if rate < 1e6 { group_thousands(rate.round() as u64) } else { format!("{:.1}M", rate / 1e6) },
        eta
    )
}

/// `h:mm:ss`.
fn clock(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// The final figures of a run (or of several merged client processes).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Summary {
    pub command: String,
    pub ops: u64,
    pub rows: u64,
    pub errors: u64,
    pub retries: u64,
    pub reads: u64,
    pub writes: u64,
    pub missing: u64,
    pub mismatched: u64,
    /// `lwt`: conditional statements that applied / did not (errors are `errors`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_applied: Option<u64>,
    pub elapsed_s: f64,
    pub op_rate: f64,
    pub row_rate: f64,
    /// From the intended start in fixed-rate runs (coordinated omission corrected).
    pub latency: Percentiles,
    /// From the actual send.
    pub service_time: Percentiles,
    pub client_cpu_s: Option<f64>,
    pub client_cpu_us_per_op: Option<f64>,
    pub client_cores: usize,
    /// Threads of the client's runtime (`--client-threads`).
    #[serde(default)]
    pub client_threads: usize,
    /// Share of the client's runtime threads kept busy during the measured phase
    /// (CPU seconds over elapsed seconds times threads; about 1 means saturated).
    pub client_cpu_utilisation: Option<f64>,
    pub server_pids: Vec<u32>,
    pub server_cpu_s: Option<f64>,
    pub server_cpu_us_per_op: Option<f64>,
    pub cost_per_hour: Option<f64>,
    pub dollars_per_million_ops: Option<f64>,
    /// The first error, when it stopped the run.
    pub stopped_by: Option<String>,
    /// Wall-clock start and end of the measured phase, seconds since the Unix epoch.
    #[serde(default)]
    pub start_unix_s: f64,
    #[serde(default)]
    pub end_unix_s: f64,
    /// Latency counts from each request's intended start (fixed-rate runs).
    #[serde(default)]
    pub latency_from_intended: bool,
    /// Client processes behind these figures (more than one after `merge`).
    #[serde(default = "one")]
    pub clients: u32,
    /// Cumulative CPU seconds of the `--server-pid` processes at the phase's start and end
    /// (so `merge` can take the CPU of the union of overlapping runs).
    pub server_cpu_at_start_s: Option<f64>,
    pub server_cpu_at_end_s: Option<f64>,
    /// The whole run's latency histogram (`hdr.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_hdr: Option<String>,
    /// Only where it differs from latency (fixed-rate runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_hdr: Option<String>,
    /// Per operation type (mixed runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<TypeStats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write: Option<TypeStats>,
}

fn one() -> u32 {
    1
}

/// Client CPU above this share of its cores means the client may be the bottleneck.
pub const CLIENT_SATURATION: f64 = 0.85;

/// Measured phases shorter than this get no saturation warning.
pub const MIN_CPU_SECONDS: f64 = 2.0;

impl Summary {
    pub fn new(settings: &Settings, m: &crate::run::Measured) -> Summary {
        let t = &m.total;
        let seconds = m.elapsed.as_secs_f64().max(1e-9);
        let per_op =
            |cpu: Option<f64>| cpu.filter(|_| t.ops + t.errors > 0).map(|c| c * 1e6 / (t.ops + t.errors) as f64);
        let cores = crate::cpu::available_cores();
        let op_rate = t.ops as f64 / seconds;
        let fixed = matches!(settings.rate, Rate::Fixed(_));
        let of_type = |op: OpType| t.of_type(op).map(|r| TypeStats::of(r, seconds, fixed));
        Summary {
            command: settings.command.name().to_string(),
            ops: t.ops,
            rows: t.rows,
            errors: t.errors,
            retries: t.retries,
            reads: t.reads,
            writes: t.writes,
            missing: t.missing,
            mismatched: t.mismatched,
            applied: (settings.command == Command::Lwt).then_some(t.applied),
            not_applied: (settings.command == Command::Lwt).then_some(t.not_applied),
            elapsed_s: m.elapsed.as_secs_f64(),
            op_rate,
            row_rate: t.rows as f64 / seconds,
            latency: Percentiles::of(&t.latency),
            service_time: Percentiles::of(&t.service),
            client_cpu_s: m.client_cpu_s,
            client_cpu_us_per_op: per_op(m.client_cpu_s),
            client_cores: cores,
            client_threads: m.client_threads,
            client_cpu_utilisation: m
                .client_cpu_s
                .map(|c| c / (seconds * m.client_threads.clamp(1, cores.max(1)) as f64)),
            server_pids: settings.server_pids.clone(),
            server_cpu_s: m.server_cpu.map(|(a, b)| b - a),
            server_cpu_us_per_op: per_op(m.server_cpu.map(|(a, b)| b - a)),
            cost_per_hour: settings.cost_per_hour,
            dollars_per_million_ops: dollars_per_million(settings.cost_per_hour, op_rate),
            stopped_by: m.stopped_by.clone(),
            start_unix_s: unix_seconds(m.started),
            end_unix_s: unix_seconds(m.started + m.elapsed),
            latency_from_intended: fixed,
            clients: 1,
            server_cpu_at_start_s: m.server_cpu.map(|(a, _)| a),
            server_cpu_at_end_s: m.server_cpu.map(|(_, b)| b),
            latency_hdr: Some(hdr::encode(&t.latency)),
            service_hdr: fixed.then(|| hdr::encode(&t.service)),
            read: of_type(OpType::Read),
            write: of_type(OpType::Write),
        }
    }

    /// The human-readable summary block.
    pub fn text(&self) -> String {
        let mut out = String::from("\nResults:\n");
        let mut line = |name: &str, value: String| out.push_str(&format!("{name:<26}: {value}\n"));
        line("Op rate", format!("{} op/s", group_thousands(self.op_rate.round() as u64)));
        line("Row rate", format!("{} row/s", group_thousands(self.row_rate.round() as u64)));
        if self.command == Command::Mixed.name() {
            line("Reads / writes", format!("{} / {}", group_thousands(self.reads), group_thousands(self.writes)));
        }
        let fixed = self.latency_from_intended;
        let l = &self.latency;
        if fixed {
            out.push_str("Latency counts from each request's intended start (coordinated omission corrected)\n");
        }
        let mut line = |name: &str, value: String| out.push_str(&format!("{name:<26}: {value}\n"));
        line("Latency mean", format!("{:.3} ms", l.mean_ms));
        line("Latency median", format!("{:.3} ms", l.p50_ms));
        line("Latency 95th percentile", format!("{:.3} ms", l.p95_ms));
        line("Latency 99th percentile", format!("{:.3} ms", l.p99_ms));
        line("Latency 99.9th percentile", format!("{:.3} ms", l.p999_ms));
        line("Latency max", format!("{:.3} ms", l.max_ms));
        if fixed {
            line("Service time", percentile_list(&self.service_time));
        }
        for (name, stats) in [("Read", &self.read), ("Write", &self.write)] {
            let Some(t) = stats else { continue };
            line(
                &format!("{name}s"),
                format!(
                    "{} ops, {} op/s, {} errors",
                    group_thousands(t.ops),
                    group_thousands(t.op_rate.round() as u64),
                    group_thousands(t.errors)
                ),
            );
            line(&format!("{name} latency"), percentile_list(&t.latency));
            if fixed {
                line(&format!("{name} service time"), percentile_list(&t.service_time));
            }
        }
        line("Total operations", group_thousands(self.ops));
        line(
            "Total errors",
            format!(
                "{}{}",
                group_thousands(self.errors),
                if self.retries > 0 { format!(" ({} retries)", self.retries) } else { String::new() }
            ),
        );
        let reads = matches!(self.command.as_str(), "read" | "mixed" | "verify" | "counter_read");
        if self.missing > 0 || reads {
            line("Rows not found", group_thousands(self.missing));
        }
        if self.command == Command::Verify.name() {
            line("Rows with wrong values", group_thousands(self.mismatched));
        }
        if let (Some(applied), Some(not_applied)) = (self.applied, self.not_applied) {
            line("LWT applied", group_thousands(applied));
            line("LWT not applied", group_thousands(not_applied));
        }
        line("Total operation time", clock(self.elapsed_s));
        if let Some(us) = self.client_cpu_us_per_op {
            let detail = match self.client_cpu_utilisation {
                _ if self.elapsed_s < MIN_CPU_SECONDS => {
                    format!("rough: under {MIN_CPU_SECONDS} s, /proc counts 10 ms ticks")
                }
                Some(share) => format!(
                    "{:.0}% of {} runtime threads; {} cores",
                    share * 100.0,
                    self.client_threads,
                    self.client_cores
                ),
                None => format!("{} client processes", self.clients),
            };
            line("Client CPU", format!("{us:.1} us/op ({detail})"));
        }
        if let (Some(us), Some(cpu)) = (self.server_cpu_us_per_op, self.server_cpu_s) {
            let pids: Vec<String> = self.server_pids.iter().map(u32::to_string).collect();
            line(
                "Server CPU",
                format!("{us:.1} us/op ({:.2} cores busy; pid {})", cpu / self.elapsed_s.max(1e-9), pids.join(",")),
            );
        } else if !self.server_pids.is_empty() {
            line("Server CPU", "unavailable (a server process could not be read in /proc)".to_string());
        }
        if let (Some(d), Some(c)) = (self.dollars_per_million_ops, self.cost_per_hour) {
            line("Cost", format!("${d:.4} per million operations at ${c}/hour"));
        }
        if let Some(share) = self.client_cpu_utilisation {
            // /proc counts CPU in 10 ms ticks: a sub-second run's share is noise.
            if share > CLIENT_SATURATION && self.elapsed_s >= MIN_CPU_SECONDS {
                let remedy = if self.client_threads < self.client_cores {
                    format!("give it more with --client-threads (up to {}), ", self.client_cores)
                } else {
                    String::new()
                };
                out.push_str(&format!(
                    "WARNING: the client kept its {} runtime threads {:.0}% busy: it may be the bottleneck, not the server; \
                     {remedy}run it on another machine or with more client processes\n",
                    self.client_threads,
                    share * 100.0
                ));
            }
        }
        out
    }
}

/// `mean 1.000, p50 ..., max ... ms`.
fn percentile_list(p: &Percentiles) -> String {
    format!(
        "mean {:.3}, p50 {:.3}, p95 {:.3}, p99 {:.3}, p99.9 {:.3}, max {:.3} ms",
        p.mean_ms, p.p50_ms, p.p95_ms, p.p99_ms, p.p999_ms, p.max_ms
    )
}

pub fn dollars_per_million(cost_per_hour: Option<f64>, op_rate: f64) -> Option<f64> {
    cost_per_hour.filter(|_| op_rate > 0.0).map(|c| c / (op_rate * 3600.0) * 1e6)
}

/// The `--json` report (also what `merge` writes and `merge`/`compare` read).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    pub tool: String,
    pub version: String,
    pub command_line: Vec<String>,
    /// The files a `merge` combined.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged_from: Vec<String>,
    pub settings: JsonSettings,
    pub summary: Summary,
    pub intervals: Vec<IntervalRow>,
}

impl Report {
    pub fn new(
        command_line: &[String],
        settings: JsonSettings,
        summary: Summary,
        intervals: Vec<IntervalRow>,
    ) -> Report {
        Report {
            tool: "shoal stress".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            command_line: command_line.to_vec(),
            merged_from: Vec::new(),
            settings,
            summary,
            intervals,
        }
    }

    /// Reads a `--json` report.
    pub fn read(path: &Path) -> Result<Report, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{}: not a shoal stress --json report: {e}", path.display()))
    }

    pub fn write(&self, path: &Path) -> Result<(), String> {
        let text = serde_json::to_string_pretty(self).map_err(|e| format!("--json: {e}"))?;
        std::fs::write(path, text + "\n").map_err(|e| format!("cannot write {}: {e}", path.display()))
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct JsonSettings {
    pub command: String,
    pub n: Option<u64>,
    pub duration_s: Option<f64>,
    pub consistency: String,
    pub rate: String,
    pub threads: u32,
    pub columns: u32,
    pub column_size: u32,
    pub population: String,
    pub seed: u64,
    pub keyspace: String,
    pub replication: String,
    pub warmup: bool,
    pub retries: u32,
    pub keep_going: bool,
    pub legacy: Option<String>,
    /// `-transport`: the connections were TLS.
    #[serde(default)]
    pub tls: bool,
    /// Seconds between interval lines.
    #[serde(default = "one_second")]
    pub interval_s: f64,
    /// The command's own parameters: `add=` (counter_write), the ratio and `serial-cl=` (lwt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
}

fn one_second() -> f64 {
    1.0
}

impl JsonSettings {
    pub fn of(s: &Settings) -> JsonSettings {
        JsonSettings {
            command: s.command.name().to_string(),
            n: match s.length {
                RunLength::Ops(n) => Some(n),
                RunLength::Time(_) => None,
            },
            duration_s: match s.length {
                RunLength::Time(d) => Some(d.as_secs_f64()),
                RunLength::Ops(_) => None,
            },
            consistency: s.consistency.name().to_string(),
            rate: match s.rate {
                Rate::Closed => "closed".to_string(),
                Rate::Fixed(r) => format!("fixed={r}/s"),
                Rate::Throttle(r) => format!("throttle={r}/s"),
            },
            threads: s.threads,
            columns: s.columns,
            column_size: s.column_size,
            population: s.effective_population().describe(),
            seed: s.seed,
            keyspace: s.schema.keyspace.clone(),
            replication: s.schema.replication.describe(),
            warmup: s.warmup,
            retries: s.retries,
            keep_going: s.keep_going,
            legacy: s.legacy_note.clone(),
            tls: s.transport.is_some(),
            interval_s: s.interval.as_secs_f64(),
            workload: match s.command {
                Command::CounterWrite => Some(format!("add={}", s.counter_add.describe())),
                Command::Lwt => Some(format!(
                    "ratio(insert={},update={}) serial-cl={}",
                    s.lwt_ratio.insert,
                    s.lwt_ratio.update,
                    s.serial_consistency.name()
                )),
                _ => None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_fits_in_79_columns() {
        for (done, planned) in
            [(0, 1), (5, 10), (21_752, 200_000), (543_210_987, 1_000_000_000), (500_000_000_000, 999_999_999_999)]
        {
            let line = progress_line(done, planned, Duration::from_secs(3));
            assert!(line.chars().count() <= 79, "{line}");
        }
        let line = progress_line(50_000, 200_000, Duration::from_secs(2));
        assert_eq!(line, "[#####...............]  25.0%  50.0k/200.0k ops  25,000 op/s  ETA 0:00:06");
        assert!(progress_line(0, 10, Duration::ZERO).ends_with("ETA -:--:--"));
    }

    #[test]
    fn interval_lines_keep_the_legacy_columns_first() {
        let p = Percentiles { mean_ms: 2.0, p50_ms: 1.0, p95_ms: 3.0, p99_ms: 4.0, p999_ms: 5.0, max_ms: 6.0 };
        let mut row = IntervalRow {
            total_ops: 100,
            op_rate: 50.0,
            row_rate: 50.0,
            elapsed_s: 2.0,
            duration_s: 1.0,
            errors: 1,
            latency: p,
            service_time: p,
            start_unix_s: 1.0,
            ops: 50,
            rows: 50,
            latency_hdr: None,
            service_hdr: None,
            read: None,
            write: None,
            applied: None,
            not_applied: None,
        };
        assert_eq!(row.line(true), "100,50,50,0.002000,2,2.000,1.000,3.000,4.000,5.000,6.000,1");
        assert_eq!(row.line(true).split(',').count(), HEADER.split(',').count());
        let t = TypeStats {
            ops: 40,
            errors: 0,
            op_rate: 40.0,
            latency: p,
            service_time: p,
            latency_hdr: None,
            service_hdr: None,
        };
        row.read = Some(t.clone());
        row.write = Some(TypeStats { op_rate: 10.0, ..t });
        assert_eq!(
            row.line(true),
            "100,50,50,0.002000,2,2.000,1.000,3.000,4.000,5.000,6.000,1,40,2.000,4.000,10,2.000,4.000"
        );
        assert_eq!(row.line(true).split(',').count(), header(Command::Mixed).split(',').count());
        row.read = None;
        row.write = None;
        row.applied = Some(45);
        row.not_applied = Some(5);
        assert_eq!(row.line(true), "100,50,50,0.002000,2,2.000,1.000,3.000,4.000,5.000,6.000,1,45,5");
        assert_eq!(header(Command::Lwt), format!("{HEADER},applied,not_applied"));
        assert_eq!(row.line(true).split(',').count(), header(Command::Lwt).split(',').count());
    }
}
