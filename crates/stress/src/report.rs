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
use serde::Serialize;

use crate::legacy::group_thousands;
use crate::settings::{Command, Rate, RunLength, Settings};
use crate::stats::{Percentiles, Recorder};

/// The header of the interval lines.
pub const HEADER: &str =
    "total,interval_op_rate,interval_key_rate,avg_latency,elapsed_time,mean_ms,p50_ms,p95_ms,p99_ms,p999_ms,max_ms,errors";

/// One interval, as printed and as stored in the JSON report.
#[derive(Clone, Debug, Serialize)]
pub struct IntervalRow {
    /// Successful operations since the measured phase began.
    pub total_ops: u64,
    pub op_rate: f64,
    pub row_rate: f64,
    pub elapsed_s: f64,
    pub duration_s: f64,
    pub errors: u64,
    pub latency: Percentiles,
    pub service_time: Percentiles,
}

impl IntervalRow {
    /// The interval line (without newline).
    pub fn line(&self, whole_seconds: bool) -> String {
        let elapsed = if whole_seconds { format!("{:.0}", self.elapsed_s) } else { format!("{:.1}", self.elapsed_s) };
        let l = &self.latency;
        format!(
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
        )
    }
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
        let hdr = match &settings.hdr_log {
            Some(path) => Some(HdrLog {
                file: create(path)?,
                serializer: V2DeflateSerializer::new(),
                with_service: matches!(settings.rate, Rate::Fixed(_)),
            }),
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
        })
    }

    /// A line for the person watching (stderr), clear of the progress bar.
    pub fn note(&mut self, text: &str) {
        self.clear_progress();
        eprintln!("{text}");
    }

    /// The measured phase begins: headers of every output.
    pub fn start_measured(&mut self) {
        if !self.header_printed {
            self.clear_progress();
            println!("{HEADER}");
            if let Some(csv) = &mut self.csv {
                let _ = writeln!(csv, "{HEADER}");
            }
            self.header_printed = true;
        }
        if let Some(hdr) = &mut self.hdr {
            let now = SystemTime::now();
            let result = IntervalLogWriterBuilder::new()
                .add_comment("shoal stress: latency in microseconds (tag latency; tag service: service time of fixed-rate runs)")
                .with_start_time(now)
                .with_base_time(now)
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
        let row = IntervalRow {
            total_ops: total.ops,
            op_rate: interval.ops as f64 / seconds,
            row_rate: interval.rows as f64 / seconds,
            elapsed_s: elapsed.as_secs_f64(),
            duration_s: duration.as_secs_f64(),
            errors: interval.errors,
            latency: Percentiles::of(&interval.latency),
            service_time: Percentiles::of(&interval.service),
        };
        let line = row.line(self.whole_seconds);
        self.clear_progress();
        println!("{line}");
        if let Some(csv) = &mut self.csv {
            let _ = writeln!(csv, "{line}");
        }
        if let Some(hdr) = &mut self.hdr {
            let start = elapsed.saturating_sub(duration);
            let mut tagged = vec![(&interval.latency, "latency")];
            if hdr.with_service {
                tagged.push((&interval.service, "service"));
            }
            let result = IntervalLogWriterBuilder::new().begin_log_with(&mut hdr.file, &mut hdr.serializer).and_then(|mut w| {
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

    fn show_progress(&mut self, done: u64, planned: u64, elapsed: Duration) {
        if !self.progress || planned == 0 {
            return;
        }
        let fraction = (done as f64 / planned as f64).clamp(0.0, 1.0);
        let width = 30;
        let filled = (fraction * width as f64).round() as usize;
        let eta = if fraction > 0.0 { elapsed.as_secs_f64() * (1.0 - fraction) / fraction } else { 0.0 };
        eprint!(
            "\r[{}{}] {:5.1}% {}/{} ops, ETA {}",
            "#".repeat(filled),
            ".".repeat(width - filled),
            fraction * 100.0,
            group_thousands(done),
            group_thousands(planned),
            clock(eta)
        );
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

/// `h:mm:ss`.
fn clock(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// The final figures of a run.
#[derive(Clone, Debug, Serialize)]
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
    /// Share of the client's available CPU used during the measured phase (0..1).
    pub client_cpu_utilisation: Option<f64>,
    pub server_pids: Vec<u32>,
    pub server_cpu_s: Option<f64>,
    pub server_cpu_us_per_op: Option<f64>,
    pub cost_per_hour: Option<f64>,
    pub dollars_per_million_ops: Option<f64>,
    /// The first error, when it stopped the run.
    pub stopped_by: Option<String>,
}

/// Client CPU above this share of its cores means the client may be the bottleneck.
pub const CLIENT_SATURATION: f64 = 0.85;

/// Measured phases shorter than this get no saturation warning.
pub const MIN_CPU_SECONDS: f64 = 2.0;

impl Summary {
    pub fn new(settings: &Settings, m: &crate::run::Measured) -> Summary {
        let t = &m.total;
        let seconds = m.elapsed.as_secs_f64().max(1e-9);
        let per_op = |cpu: Option<f64>| cpu.filter(|_| t.ops + t.errors > 0).map(|c| c * 1e6 / (t.ops + t.errors) as f64);
        let cores = crate::cpu::available_cores();
        let op_rate = t.ops as f64 / seconds;
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
            elapsed_s: m.elapsed.as_secs_f64(),
            op_rate,
            row_rate: t.rows as f64 / seconds,
            latency: Percentiles::of(&t.latency),
            service_time: Percentiles::of(&t.service),
            client_cpu_s: m.client_cpu_s,
            client_cpu_us_per_op: per_op(m.client_cpu_s),
            client_cores: cores,
            client_cpu_utilisation: m.client_cpu_s.map(|c| c / (seconds * cores as f64)),
            server_pids: settings.server_pids.clone(),
            server_cpu_s: m.server_cpu_s,
            server_cpu_us_per_op: per_op(m.server_cpu_s),
            cost_per_hour: settings.cost_per_hour,
            dollars_per_million_ops: settings.cost_per_hour.filter(|_| op_rate > 0.0).map(|c| c / (op_rate * 3600.0) * 1e6),
            stopped_by: m.stopped_by.clone(),
        }
    }

    /// The human-readable summary block.
    pub fn text(&self, settings: &Settings) -> String {
        let mut out = String::from("\nResults:\n");
        let mut line = |name: &str, value: String| out.push_str(&format!("{name:<26}: {value}\n"));
        line("Op rate", format!("{} op/s", group_thousands(self.op_rate.round() as u64)));
        line("Row rate", format!("{} row/s", group_thousands(self.row_rate.round() as u64)));
        if settings.command == Command::Mixed {
            line("Reads / writes", format!("{} / {}", group_thousands(self.reads), group_thousands(self.writes)));
        }
        let fixed = matches!(settings.rate, Rate::Fixed(_));
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
            let s = &self.service_time;
            line(
                "Service time",
                format!("mean {:.3}, p50 {:.3}, p99 {:.3}, p99.9 {:.3}, max {:.3} ms", s.mean_ms, s.p50_ms, s.p99_ms, s.p999_ms, s.max_ms),
            );
        }
        line("Total operations", group_thousands(self.ops));
        line("Total errors", format!("{}{}", group_thousands(self.errors), if self.retries > 0 { format!(" ({} retries)", self.retries) } else { String::new() }));
        if self.missing > 0 || matches!(settings.command, Command::Read | Command::Mixed | Command::Verify) {
            line("Rows not found", group_thousands(self.missing));
        }
        if settings.command == Command::Verify {
            line("Rows with wrong values", group_thousands(self.mismatched));
        }
        line("Total operation time", clock(self.elapsed_s));
        if let (Some(us), Some(share)) = (self.client_cpu_us_per_op, self.client_cpu_utilisation) {
            if self.elapsed_s >= MIN_CPU_SECONDS {
                line("Client CPU", format!("{us:.1} us/op ({:.0}% of {} cores)", share * 100.0, self.client_cores));
            } else {
                line("Client CPU", format!("{us:.1} us/op (rough: under {MIN_CPU_SECONDS} s, /proc counts 10 ms ticks)"));
            }
        }
        if let (Some(us), Some(cpu)) = (self.server_cpu_us_per_op, self.server_cpu_s) {
            let pids: Vec<String> = self.server_pids.iter().map(u32::to_string).collect();
            line("Server CPU", format!("{us:.1} us/op ({:.2} cores busy; pid {})", cpu / self.elapsed_s.max(1e-9), pids.join(",")));
        } else if !self.server_pids.is_empty() {
            line("Server CPU", "unavailable (a server process could not be read in /proc)".to_string());
        }
        if let (Some(d), Some(c)) = (self.dollars_per_million_ops, self.cost_per_hour) {
            line("Cost", format!("${d:.4} per million operations at ${c}/hour"));
        }
        if let Some(share) = self.client_cpu_utilisation {
            // /proc counts CPU in 10 ms ticks: a sub-second run's share is noise.
            if share > CLIENT_SATURATION && self.elapsed_s >= MIN_CPU_SECONDS {
                out.push_str(&format!(
                    "WARNING: the client used {:.0}% of its {} cores: it may be the bottleneck, not the server; \
                     run it on another machine or with more client processes\n",
                    share * 100.0,
                    self.client_cores
                ));
            }
        }
        out
    }
}

/// The `--json` report.
#[derive(Serialize)]
pub struct JsonReport<'a> {
    pub tool: &'static str,
    pub version: &'static str,
    pub command_line: &'a [String],
    pub settings: JsonSettings,
    pub summary: &'a Summary,
    pub intervals: &'a [IntervalRow],
}

#[derive(Serialize)]
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
        }
    }
}

pub fn write_json(path: &Path, report: &JsonReport<'_>) -> Result<(), String> {
    let text = serde_json::to_string_pretty(report).map_err(|e| format!("--json: {e}"))?;
    std::fs::write(path, text + "\n").map_err(|e| format!("cannot write {}: {e}", path.display()))
}
