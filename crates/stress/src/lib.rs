//! `shoal stress`: the benchmark tool. It speaks only CQL, so it runs
//! unchanged against Shoal, Apache Cassandra and ScyllaDB: through the scylla
//! Rust driver, or with `-mode simplenative` through its own lean token-aware
//! client (`native`, ADR 0004), which the benchmark of record uses.
//!
//! Flow: `args` (or `legacy`) turns the command line into `settings::Settings`;
//! `run` connects (the driver sets up the schema and reads the ring in both
//! modes), creates the `workload` schema, runs the warmup and the measured
//! phase with `stats` histograms, trying each failed operation again as
//! cassandra-stress does (`-errors retries=N`, 9 by default); `report` prints interval lines and
//! the summary and writes `--json`/`--csv`/`--hdr-log`. With `-transport`
//! (TLS, `transport`) the lean client alone runs (the driver has no TLS in this
//! build): `control` does the driver's part of the setup. `plot` draws `--plot`
//! through `chart` (SVG, the project's one plotting path);
//! `cpu` samples client and server CPU from /proc; `hdr` turns histograms
//! into text for the JSON report; `failed_keys` collects the keys of failed
//! operations for `--failed-keys FILE`, written when the run ends, whether it
//! succeeded or not (a file that cannot be written makes the exit code 1).
//!
//! `plot SPEC.json OUT.svg` draws a `chart::Chart` spec (bench/compare's
//! plots). Two commands work on `--json` reports instead of a cluster: `merge`
//! (`merge.rs`) combines the reports of client processes that ran at the same
//! time into the report one run would have given, and `compare` (`compare.rs`)
//! sets two reports side by side with ratios and confidence intervals.
//!
//! Exit codes (invariant, scripts rely on them): 0 success; 1 the run failed
//! (connection, schema, the first error without `--keep-going`, every operation
//! failed, `verify` found missing or wrong rows, or the `--failed-keys` file
//! could not be written); 2 the command line was not understood. `merge` and
//! `compare`: 0 done, 1 a report could not be read or merged, 2 the command
//! line was not understood.

pub mod args;
pub mod chart;
pub mod compare;
pub mod control;
pub mod cpu;
pub mod failed_keys;
pub mod hdr;
pub mod legacy;
pub mod merge;
pub mod native;
pub mod plot;
pub mod report;
pub mod run;
pub mod settings;
pub mod stats;
pub mod transport;
pub mod workload;

use std::process::ExitCode;
use std::sync::Arc;

use crate::args::Invocation;
use crate::failed_keys::FailedKeys;
use crate::report::{JsonSettings, Report, Reporter, Summary};
use crate::settings::{Command, Settings};

/// Exit code of a command line that was not understood.
pub const EXIT_USAGE: u8 = 2;
/// Exit code of a run that failed.
pub const EXIT_FAILED: u8 = 1;

/// Entry point of `shoal stress ARGS...`.
pub fn main(args: Vec<String>) -> ExitCode {
    match args.first().map(String::as_str) {
        Some("merge") => return merge::main(&args[1..]),
        Some("compare") => return compare::main(&args[1..]),
        Some("plot") => return chart::main(&args[1..]),
        _ => {}
    }
    let settings = match args::parse(&args) {
        Ok(Invocation::Help) => {
            println!("{}", args::USAGE);
            return ExitCode::SUCCESS;
        }
        Ok(Invocation::Run(settings)) => *settings,
        Err(e) => {
            eprintln!("shoal stress: {e}\n\n{}", args::USAGE);
            return ExitCode::from(EXIT_USAGE);
        }
    };
    if let Some(note) = &settings.legacy_note {
        println!("{note}");
    }
    for pid in &settings.server_pids {
        if cpu::cpu_seconds(&pid.to_string()).is_none() {
            eprintln!("shoal stress: --server-pid {pid}: no such process (cannot read /proc/{pid}/stat)");
            return ExitCode::from(EXIT_USAGE);
        }
    }
    let failed_keys = settings.failed_keys.as_ref().map(|_| Arc::new(FailedKeys::new()));
    let code = match run_and_report(&settings, &args, failed_keys.clone()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("shoal stress: {e}");
            ExitCode::from(EXIT_FAILED)
        }
    };
    if let (Some(path), Some(keys)) = (&settings.failed_keys, &failed_keys) {
        if let Err(e) = keys.write(path) {
            eprintln!("shoal stress: {e}");
            return ExitCode::from(EXIT_FAILED);
        }
    }
    code
}

fn run_and_report(
    settings: &Settings,
    args: &[String],
    failed_keys: Option<Arc<FailedKeys>>,
) -> Result<ExitCode, String> {
    let mut reporter = Reporter::new(settings)?;
    let workers = settings.runtime_threads();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    let measured = runtime.block_on(run::run(settings, &mut reporter, failed_keys)).map_err(|e| e.0)?;
    drop(runtime);

    let summary = Summary::new(settings, &measured);
    print!("{}", summary.text());
    if let Some(path) = &settings.json {
        Report::new(args, JsonSettings::of(settings), summary.clone(), measured.intervals.clone()).write(path)?;
    }
    if let Some(path) = &settings.plot {
        plot::write(path, &plot::title(settings), summary.latency_from_intended, &measured.intervals)?;
    }
    if let Some(error) = &measured.stopped_by {
        eprintln!("shoal stress: stopped at the first error (use --keep-going to count errors and go on): {error}");
        return Ok(ExitCode::from(EXIT_FAILED));
    }
    if summary.ops == 0 && summary.errors > 0 {
        eprintln!("shoal stress: every operation failed ({} errors)", legacy::group_thousands(summary.errors));
        return Ok(ExitCode::from(EXIT_FAILED));
    }
    if settings.command == Command::Verify {
        let bad = summary.missing + summary.mismatched + summary.errors;
        println!(
            "verify: {} keys checked, {} missing, {} with wrong values, {} errors",
            legacy::group_thousands(summary.ops + summary.errors),
            legacy::group_thousands(summary.missing),
            legacy::group_thousands(summary.mismatched),
            legacy::group_thousands(summary.errors)
        );
        if bad > 0 {
            return Ok(ExitCode::from(EXIT_FAILED));
        }
    }
    Ok(ExitCode::SUCCESS)
}
