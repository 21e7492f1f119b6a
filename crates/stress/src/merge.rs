//! `shoal stress merge A.json B.json ... [--json OUT] [--plot OUT.svg]`: the
//! reports of client processes that ran at the same time, combined into the
//! report one run would have given.
//!
//! How: counts are summed; latency is the sum of the full HDR histograms each
//! report carries (`hdr.rs`), so percentiles are those of every operation, not
//! averages of percentiles; the measured phase spans from the earliest start to
//! the latest end, and the op rate is all operations over that span. Intervals
//! are aligned on wall-clock time: each input interval goes to the slot
//! `floor((midpoint - t0) / interval)` where `t0` is the earliest interval
//! start, so intervals of processes started a fraction of a second apart fall
//! together (a last interval shorter than a quarter of the step joins the slot
//! of the one before it); a slot's rate is the sum of each process's rate in it (its
//! operations over its own interval time), its percentiles come from the
//! merged histograms. Per operation type statistics come from `mixed` reports
//! and from `write`/`read` reports (all of a write run's operations are
//! writes), so a write process and a read process merge into a mixed report.
//! Client CPU is summed over the processes; server CPU, when the reports
//! sampled the same server PIDs, is the servers' CPU over the union of the
//! phases (from the cumulative readings each report keeps), never a sum of
//! overlapping windows.
//!
//! Invariants: merged ops, errors and histogram counts equal the sums of the
//! inputs'; the merged maximum is the maximum of the maxima; the merged report
//! is a report like any other (it can be compared, plotted, merged again).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use hdrhistogram::Histogram;

use crate::report::{self, IntervalRow, Report, Summary, TypeStats};
use crate::settings::Command;
use crate::stats::{new_histogram, OpType, Percentiles};
use crate::{hdr, legacy, plot, EXIT_FAILED, EXIT_USAGE};

pub const USAGE: &str = "usage: shoal stress merge A.json B.json ... [--json OUT.json] [--plot OUT.svg]
       (the --json reports of client processes that ran at the same time)";

/// Entry point of `shoal stress merge ...`.
pub fn main(args: &[String]) -> ExitCode {
    let (files, json, plot_path) = match parse(args) {
        Ok(Some(parsed)) => parsed,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("shoal stress merge: {e}\n\n{USAGE}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    match run(&files, json.as_deref(), plot_path.as_deref()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("shoal stress merge: {e}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

type Parsed = (Vec<PathBuf>, Option<PathBuf>, Option<PathBuf>);

/// Input files, `--json` and `--plot`; `None` for help.
fn parse(args: &[String]) -> Result<Option<Parsed>, String> {
    let mut files = Vec::new();
    let (mut json, mut plot_path) = (None, None);
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        match name {
            "help" | "-h" | "--help" => return Ok(None),
            "--json" | "--plot" => {
                let value = match inline {
                    Some(v) => v,
                    None => {
                        let v = args.get(i).ok_or(format!("{name} needs a file name"))?;
                        i += 1;
                        v.clone()
                    }
                };
                let slot = if name == "--json" { &mut json } else { &mut plot_path };
                *slot = Some(PathBuf::from(value));
            }
            other if other.starts_with('-') => return Err(format!("unknown option `{other}`")),
            _ => files.push(PathBuf::from(arg)),
        }
    }
    if files.is_empty() {
        return Err("no reports to merge".to_string());
    }
    if let Some(path) = plot_path.as_deref().filter(|p| !crate::chart::plottable(p)) {
        return Err(format!("--plot {}: the file name must end in .svg or .html", path.display()));
    }
    Ok(Some((files, json, plot_path)))
}

fn run(files: &[PathBuf], json: Option<&Path>, plot_path: Option<&Path>) -> Result<(), String> {
    let mut inputs = Vec::new();
    for file in files {
        inputs.push((file.display().to_string(), Report::read(file)?));
    }
    let merged = merge(&inputs)?;
    let s = &merged.summary;
    println!("merged {} reports ({} client processes):", inputs.len(), s.clients);
    for (name, r) in &inputs {
        println!(
            "  {name}: {} {} ops, {} errors, {} threads, measured phase {:.1} s from {}",
            r.summary.command,
            legacy::group_thousands(r.summary.ops),
            legacy::group_thousands(r.summary.errors),
            r.settings.threads,
            r.summary.elapsed_s,
            clock_time(r.summary.start_unix_s)
        );
    }
    let starts: Vec<f64> = inputs.iter().map(|(_, r)| r.summary.start_unix_s).collect();
    let spread = starts.iter().copied().fold(f64::MIN, f64::max) - starts.iter().copied().fold(f64::MAX, f64::min);
    println!("measured phases started within {spread:.2} s of each other; intervals aligned on wall-clock time");
    let mixed = s.read.is_some() || s.write.is_some();
    println!("{}", report::header(if mixed { Command::Mixed } else { Command::Write }));
    let whole_seconds = merged.settings.interval_s.fract() == 0.0;
    for row in &merged.intervals {
        println!("{}", row.line(whole_seconds));
    }
    print!("{}", s.text());
    if let Some(path) = json {
        merged.write(path)?;
    }
    if let Some(path) = plot_path {
        let title =
            format!("shoal stress merge of {} clients: {} threads={}", s.clients, s.command, merged.settings.threads);
        plot::write(path, &title, s.latency_from_intended, &merged.intervals)?;
    }
    Ok(())
}

/// `hh:mm:ss.s` UTC of a Unix time.
fn clock_time(unix_s: f64) -> String {
    let day = unix_s.rem_euclid(86_400.0);
    format!("{:02}:{:02}:{:04.1} UTC", (day / 3600.0) as u64, (day / 60.0) as u64 % 60, day % 60.0)
}

/// One operation type's share of a report or an interval.
struct TypePiece<'a> {
    ops: u64,
    errors: u64,
    latency_hdr: &'a Option<String>,
    service_hdr: &'a Option<String>,
}

/// The per-type pieces of a report (or interval) of `command`: a mixed run's own,
/// or all of a write (read, verify) run's operations as writes (reads).
#[allow(clippy::too_many_arguments)]
fn typed<'a>(
    command: &str,
    ops: u64,
    errors: u64,
    latency_hdr: &'a Option<String>,
    service_hdr: &'a Option<String>,
    read: &'a Option<TypeStats>,
    write: &'a Option<TypeStats>,
) -> [Option<TypePiece<'a>>; 2] {
    let of = |t: &'a Option<TypeStats>| {
        t.as_ref().map(|t| TypePiece {
            ops: t.ops,
            errors: t.errors,
            latency_hdr: &t.latency_hdr,
            service_hdr: &t.service_hdr,
        })
    };
    let whole = || Some(TypePiece { ops, errors, latency_hdr, service_hdr });
    match command {
        "write" => [None, whole()],
        "read" | "verify" => [whole(), None],
        _ => [of(read), of(write)],
    }
}

/// Sums of counts and histograms.
struct Acc {
    ops: u64,
    errors: u64,
    latency: Histogram<u64>,
    service: Histogram<u64>,
}

impl Acc {
    fn new() -> Acc {
        Acc { ops: 0, errors: 0, latency: new_histogram(), service: new_histogram() }
    }

    /// Adds a piece; its service time is its latency where it has none of its own.
    fn add(
        &mut self,
        ops: u64,
        errors: u64,
        latency_hdr: &Option<String>,
        service_hdr: &Option<String>,
        what: &str,
    ) -> Result<(), String> {
        self.ops += ops;
        self.errors += errors;
        let Some(latency_text) = latency_hdr else {
            return Err(format!(
                "{what} has no latency histogram (written by an older shoal stress?); merge needs them"
            ));
        };
        let latency = hdr::decode(latency_text).map_err(|e| format!("{what}: {e}"))?;
        let service = match service_hdr {
            Some(text) => hdr::decode(text).map_err(|e| format!("{what}: {e}"))?,
            None => latency.clone(),
        };
        self.latency.add(&latency).map_err(|e| format!("{what}: {e:?}"))?;
        self.service.add(&service).map_err(|e| format!("{what}: {e:?}"))?;
        Ok(())
    }

    fn type_stats(&self, op_rate: f64, with_service: bool) -> TypeStats {
        TypeStats {
            ops: self.ops,
            errors: self.errors,
            op_rate,
            latency: Percentiles::of(&self.latency),
            service_time: Percentiles::of(&self.service),
            latency_hdr: Some(hdr::encode(&self.latency)),
            service_hdr: with_service.then(|| hdr::encode(&self.service)),
        }
    }
}

/// One process's share of one interval slot.
#[derive(Default)]
struct Part {
    ops: u64,
    rows: u64,
    type_ops: [u64; 2],
    seconds: f64,
}

struct Slot {
    parts: BTreeMap<usize, Part>,
    all: Acc,
    rows: u64,
    types: [Option<Acc>; 2],
    duration: f64,
}

/// Merges `inputs` (name, report) into one report.
pub fn merge(inputs: &[(String, Report)]) -> Result<Report, String> {
    let Some((_, first)) = inputs.first() else { return Err("no reports to merge".to_string()) };
    let reports: Vec<&Report> = inputs.iter().map(|(_, r)| r).collect();
    let with_service = reports.iter().any(|r| r.summary.service_hdr.is_some());
    let commands: Vec<&str> = reports.iter().map(|r| r.summary.command.as_str()).collect();
    let writes = commands.iter().any(|c| matches!(*c, "write" | "mixed"));
    let reads = commands.iter().any(|c| matches!(*c, "read" | "verify" | "mixed"));
    let per_type = commands.contains(&"mixed") || (writes && reads);
    let command = if commands.iter().all(|c| *c == commands[0]) {
        commands[0].to_string()
    } else if per_type {
        "mixed".to_string()
    } else {
        commands.join("+")
    };

    // The whole run.
    let mut all = Acc::new();
    let mut types = [None, None].map(|_: Option<Acc>| if per_type { Some(Acc::new()) } else { None });
    let mut sum = Summary { command: command.clone(), ..first.summary.clone() };
    sum.rows = 0;
    sum.retries = 0;
    sum.reads = 0;
    sum.writes = 0;
    sum.missing = 0;
    sum.mismatched = 0;
    sum.applied = None;
    sum.not_applied = None;
    sum.clients = 0;
    sum.stopped_by = None;
    for (name, r) in inputs {
        let s = &r.summary;
        if s.start_unix_s <= 0.0 || s.end_unix_s < s.start_unix_s {
            return Err(format!(
                "{name} has no wall-clock times (written by an older shoal stress?); merge needs them"
            ));
        }
        all.add(s.ops, s.errors, &s.latency_hdr, &s.service_hdr, name)?;
        if per_type {
            let pieces = typed(&s.command, s.ops, s.errors, &s.latency_hdr, &s.service_hdr, &s.read, &s.write);
            for (acc, piece) in types.iter_mut().zip(pieces) {
                if let (Some(acc), Some(p)) = (acc.as_mut(), piece) {
                    acc.add(p.ops, p.errors, p.latency_hdr, p.service_hdr, name)?;
                }
            }
        }
        sum.rows += s.rows;
        sum.retries += s.retries;
        sum.reads += s.reads;
        sum.writes += s.writes;
        sum.missing += s.missing;
        sum.mismatched += s.mismatched;
        for (total, part) in [(&mut sum.applied, s.applied), (&mut sum.not_applied, s.not_applied)] {
            if let Some(n) = part {
                *total = Some(total.unwrap_or(0) + n);
            }
        }
        sum.clients += s.clients.max(1);
        if sum.stopped_by.is_none() {
            sum.stopped_by = s.stopped_by.as_ref().map(|e| format!("{name}: {e}"));
        }
    }
    let start = reports.iter().map(|r| r.summary.start_unix_s).fold(f64::MAX, f64::min);
    let end = reports.iter().map(|r| r.summary.end_unix_s).fold(f64::MIN, f64::max);
    let seconds = (end - start).max(1e-9);
    let done = all.ops + all.errors;
    let per_op = |cpu: Option<f64>| cpu.filter(|_| done > 0).map(|c| c * 1e6 / done as f64);
    sum.ops = all.ops;
    sum.errors = all.errors;
    sum.start_unix_s = start;
    sum.end_unix_s = end;
    sum.elapsed_s = end - start;
    sum.op_rate = all.ops as f64 / seconds;
    sum.row_rate = sum.rows as f64 / seconds;
    sum.latency = Percentiles::of(&all.latency);
    sum.service_time = Percentiles::of(&all.service);
    sum.latency_hdr = Some(hdr::encode(&all.latency));
    sum.service_hdr = with_service.then(|| hdr::encode(&all.service));
    sum.latency_from_intended = reports.iter().any(|r| r.summary.latency_from_intended);
    let [read, write] = types.map(|t| t.map(|acc| acc.type_stats(acc.ops as f64 / seconds, with_service)));
    sum.read = read;
    sum.write = write;
    sum.client_cpu_s = reports.iter().map(|r| r.summary.client_cpu_s).sum();
    sum.client_cpu_us_per_op = per_op(sum.client_cpu_s);
    sum.client_cores = reports.iter().map(|r| r.summary.client_cores).sum();
    sum.client_threads = reports.iter().map(|r| r.summary.client_threads).sum();
    sum.client_cpu_utilisation = None;
    let (pids, server_cpu, at) = server_cpu(&reports);
    sum.server_pids = pids;
    sum.server_cpu_s = server_cpu;
    sum.server_cpu_us_per_op = per_op(server_cpu);
    (sum.server_cpu_at_start_s, sum.server_cpu_at_end_s) = (at.map(|(a, _)| a), at.map(|(_, b)| b));
    let costs: Vec<Option<f64>> = reports.iter().map(|r| r.summary.cost_per_hour).collect();
    sum.cost_per_hour = if costs.iter().all(|c| *c == costs[0]) { costs[0] } else { None };
    sum.dollars_per_million_ops = report::dollars_per_million(sum.cost_per_hour, sum.op_rate);

    let (intervals, interval_s) = merge_intervals(inputs, per_type, with_service)?;
    let mut settings = first.settings.clone();
    settings.command = command;
    settings.interval_s = interval_s;
    settings.threads = reports.iter().map(|r| r.settings.threads).sum();
    settings.n = reports.iter().map(|r| r.settings.n).sum();
    settings.duration_s = reports.iter().map(|r| r.settings.duration_s).try_fold(0.0f64, |m, d| d.map(|d| m.max(d)));
    settings.keep_going = reports.iter().any(|r| r.settings.keep_going);
    settings.legacy = None;
    settings.population = distinct(reports.iter().map(|r| r.settings.population.as_str()));
    settings.rate = distinct(reports.iter().map(|r| r.settings.rate.as_str()));
    let mut command_line = vec!["merge".to_string()];
    command_line.extend(inputs.iter().map(|(name, _)| name.clone()));
    let mut merged = Report::new(&command_line, settings, sum, intervals);
    merged.merged_from = inputs.iter().map(|(name, _)| name.clone()).collect();
    Ok(merged)
}

/// The one value all share, else all joined with ` + `.
fn distinct<'a>(values: impl Iterator<Item = &'a str>) -> String {
    let values: Vec<&str> = values.collect();
    if values.iter().all(|v| *v == values[0]) {
        values[0].to_string()
    } else {
        values.join(" + ")
    }
}

/// Server PIDs (the union), server CPU seconds and, when one set of PIDs was
/// sampled by all, its cumulative readings at the union's start and end.
/// Reports that sampled the same PIDs overlap in time, so their windows are
/// joined (latest end reading minus earliest start reading); different sets
/// of PIDs are different servers and add up.
fn server_cpu(reports: &[&Report]) -> (Vec<u32>, Option<f64>, Option<(f64, f64)>) {
    let mut groups: BTreeMap<Vec<u32>, Vec<&Summary>> = BTreeMap::new();
    for r in reports {
        if !r.summary.server_pids.is_empty() {
            let mut pids = r.summary.server_pids.clone();
            pids.sort_unstable();
            groups.entry(pids).or_default().push(&r.summary);
        }
    }
    let mut pids: Vec<u32> = groups.keys().flatten().copied().collect();
    pids.sort_unstable();
    pids.dedup();
    let mut total = Some(0.0);
    let mut readings = None;
    for summaries in groups.values() {
        let starts: Option<Vec<f64>> = summaries.iter().map(|s| s.server_cpu_at_start_s).collect();
        let ends: Option<Vec<f64>> = summaries.iter().map(|s| s.server_cpu_at_end_s).collect();
        let cpu = match (starts, ends) {
            (Some(a), Some(b)) => {
                let (a, b) = (a.into_iter().fold(f64::MAX, f64::min), b.into_iter().fold(f64::MIN, f64::max));
                readings = Some((a, b));
                Some(b - a)
            }
            // Without readings, the largest window is the best lower bound.
            _ => summaries
                .iter()
                .map(|s| s.server_cpu_s)
                .collect::<Option<Vec<f64>>>()
                .map(|v| v.into_iter().fold(0.0, f64::max)),
        };
        total = total.zip(cpu).map(|(t, c)| t + c);
    }
    if groups.is_empty() {
        return (pids, None, None);
    }
    (pids, total, if groups.len() == 1 { readings } else { None })
}

/// The intervals of all inputs on one wall-clock grid, and the grid's step.
fn merge_intervals(
    inputs: &[(String, Report)],
    per_type: bool,
    with_service: bool,
) -> Result<(Vec<IntervalRow>, f64), String> {
    let step = inputs.iter().map(|(_, r)| r.settings.interval_s).fold(0.0, f64::max);
    if step.is_nan() || step <= 0.0 {
        return Err("the reports give no interval length".to_string());
    }
    let rows = inputs.iter().flat_map(|(_, r)| &r.intervals);
    let t0 = rows.clone().map(|row| row.start_unix_s).fold(f64::MAX, f64::min);
    let mut slots: BTreeMap<u64, Slot> = BTreeMap::new();
    for (index, (name, r)) in inputs.iter().enumerate() {
        let mut previous = None;
        for (n, row) in r.intervals.iter().enumerate() {
            let what = format!("{name} interval {}", n + 1);
            if row.start_unix_s <= 0.0 {
                return Err(format!(
                    "{what} has no wall-clock start (written by an older shoal stress?); merge needs it"
                ));
            }
            let mid = row.start_unix_s + row.duration_s / 2.0;
            // A sliver (the end of a run) joins its predecessor's slot rather than opening one.
            let key = match previous {
                Some(key) if row.duration_s < step / 4.0 => key,
                _ => ((mid - t0) / step).floor().max(0.0) as u64,
            };
            previous = Some(key);
            let slot = slots.entry(key).or_insert_with(|| Slot {
                parts: BTreeMap::new(),
                all: Acc::new(),
                rows: 0,
                types: [None, None].map(|_: Option<Acc>| if per_type { Some(Acc::new()) } else { None }),
                duration: 0.0,
            });
            slot.all.add(row.ops, row.errors, &row.latency_hdr, &row.service_hdr, &what)?;
            slot.rows += row.rows;
            slot.duration = slot.duration.max(row.duration_s);
            let part = slot.parts.entry(index).or_default();
            part.ops += row.ops;
            part.rows += row.rows;
            part.seconds += row.duration_s;
            if per_type {
                let pieces = typed(
                    &r.summary.command,
                    row.ops,
                    row.errors,
                    &row.latency_hdr,
                    &row.service_hdr,
                    &row.read,
                    &row.write,
                );
                for (i, (acc, piece)) in slot.types.iter_mut().zip(pieces).enumerate() {
                    if let (Some(acc), Some(p)) = (acc.as_mut(), piece) {
                        part.type_ops[i] += p.ops;
                        acc.add(p.ops, p.errors, p.latency_hdr, p.service_hdr, &what)?;
                    }
                }
            }
        }
    }
    let mut out = Vec::with_capacity(slots.len());
    let mut total_ops = 0;
    for (key, slot) in slots {
        let rate = |count: &dyn Fn(&Part) -> u64| -> f64 {
            slot.parts.values().filter(|p| p.seconds > 0.0).map(|p| count(p) as f64 / p.seconds).sum()
        };
        total_ops += slot.all.ops;
        let start = key as f64 * step;
        let op_rate = rate(&|p| p.ops);
        let row_rate = rate(&|p| p.rows);
        let [read, write] =
            [0, 1].map(|i| slot.types[i].as_ref().map(|acc| acc.type_stats(rate(&|p| p.type_ops[i]), with_service)));
        debug_assert_eq!(OpType::Write as usize, 1);
        out.push(IntervalRow {
            total_ops,
            op_rate,
            row_rate,
            elapsed_s: start + slot.duration,
            duration_s: slot.duration,
            errors: slot.all.errors,
            latency: Percentiles::of(&slot.all.latency),
            service_time: Percentiles::of(&slot.all.service),
            start_unix_s: t0 + start,
            ops: slot.all.ops,
            rows: slot.rows,
            latency_hdr: Some(hdr::encode(&slot.all.latency)),
            service_hdr: with_service.then(|| hdr::encode(&slot.all.service)),
            read,
            write,
            // Per-interval LWT outcomes are not merged (the summary's are).
            applied: None,
            not_applied: None,
        });
    }
    Ok((out, step))
}

#[cfg(test)]
#[path = "merge_tests.rs"]
mod tests;
