//! The cluster simulation suite.
//!
//! - `seeds_with_faults_keep_every_property`: `SIM_RUNS` seeds (default
//!   `DEFAULT_RUNS`) starting at `SIM_SEED_BASE` (default 0), spread over
//!   `SIM_THREADS` threads (default: the available cores). `SIM_SEED=<n>`
//!   runs exactly that seed and prints its report (`SIM_VERBOSE=1`: every
//!   seed's report). Every failing seed is
//!   printed with its property and trace tail; the test then fails with the
//!   smallest one.
//! - `lifecycle_seeds_keep_every_property`: the same with topology changes,
//!   repairs and node kills (`SIM_LIFECYCLE_RUNS`, default
//!   `DEFAULT_LIFECYCLE_RUNS`; `SIM_SEED` replays one here too).
//! - A fault-free seed where everything must succeed (with and without
//!   topology changes), seeds run twice that must take the same path, and
//!   sabotaged runs (a replica's data dropped by hand; a bootstrap that
//!   skips a range; a decommission that hands nothing over) that the
//!   checker must catch, so the checker is not a no-op.

#![allow(clippy::unwrap_used, reason = "an integration test: a failed unwrap names its line")]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use sim::{join_cleanup, run_seed, OpKind, OpStats, Property, Sabotage, SimConfig, SimFailure, SimReport};

/// Keeps the default run under a minute on a 2-core machine (see the report
/// this test prints: mean wall time per seed).
const DEFAULT_RUNS: u64 = 300;
/// Lifecycle seeds cost several plain ones each (streams, repairs, more
/// nodes and virtual time).
const DEFAULT_LIFECYCLE_RUNS: u64 = 24;

fn env_u64(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    match value.trim().parse() {
        Ok(v) => Some(v),
        Err(_) => panic!("{name}={value:?} is not a number"),
    }
}

/// Runs the seeds the environment asks for (see the module docs) with
/// `config`, `runs_var` or `default_runs` of them; panics with the smallest
/// failing seed. Returns the reports and whether it ran one seed only.
fn run_seeds(what: &str, config: &SimConfig, runs_var: &str, default_runs: u64) -> (Vec<SimReport>, bool) {
    let single = env_u64("SIM_SEED");
    let verbose = env_u64("SIM_VERBOSE").is_some_and(|v| v > 0);
    let seeds: Vec<u64> = match single {
        Some(seed) => vec![seed],
        None => {
            let base = env_u64("SIM_SEED_BASE").unwrap_or(0);
            let runs = env_u64(runs_var).unwrap_or(default_runs);
            (base..base + runs).collect()
        }
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = env_u64("SIM_THREADS").map_or(cores, |t| t.max(1) as usize).min(seeds.len()).max(1);
    let next = AtomicUsize::new(0);
    let reports: Mutex<Vec<SimReport>> = Mutex::new(Vec::new());
    let failures: Mutex<Vec<SimFailure>> = Mutex::new(Vec::new());
    let wall = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&seed) = seeds.get(i) else { break };
                match run_seed(seed, config) {
                    Ok(report) => {
                        if single.is_some() || verbose {
                            eprintln!("{report}");
                        }
                        reports.lock().unwrap().push(report);
                    }
                    Err(failure) => {
                        eprintln!("{failure}");
                        failures.lock().unwrap().push(failure);
                    }
                }
            });
        }
    });
    join_cleanup();
    let wall = wall.elapsed();
    let reports = reports.into_inner().unwrap();
    let mut failures = failures.into_inner().unwrap();
    let sum = |f: fn(&SimReport) -> usize| reports.iter().map(f).sum::<usize>();
    let seed_ms: Vec<f64> = reports.iter().map(|r| r.wall_time.as_secs_f64() * 1e3).collect();
    eprintln!(
        "{what}: {} seeds on {threads} threads in {:.1}s ({:.0} ms per seed, slowest {:.0} ms); {} failed; \
         writes {}/{} acked, reads {}/{} ok, {} hints replayed",
        seeds.len(),
        wall.as_secs_f64(),
        seed_ms.iter().sum::<f64>() / seed_ms.len().max(1) as f64,
        seed_ms.iter().copied().fold(0.0, f64::max),
        failures.len(),
        sum(|r| r.writes_acked),
        sum(|r| r.writes),
        sum(|r| r.reads_ok),
        sum(|r| r.reads),
        sum(|r| r.hints_delivered),
    );
    if !failures.is_empty() {
        failures.sort_by_key(|f| f.seed);
        let seeds: Vec<String> = failures.iter().map(|f| f.seed.to_string()).collect();
        panic!("{}failing seeds: {}", failures[0], seeds.join(", "));
    }
    (reports, single.is_some())
}

#[test]
fn seeds_with_faults_keep_every_property() {
    let (reports, single) = run_seeds("simulation", &SimConfig::with_faults(), "SIM_RUNS", DEFAULT_RUNS);
    let sum = |f: fn(&SimReport) -> usize| reports.iter().map(f).sum::<usize>();
    // Faults must actually bite in a fault run, or the suite proves little.
    if !single && reports.len() >= 50 {
        assert!(sum(|r| r.writes) > sum(|r| r.writes_acked), "no write ever failed: the faults do nothing");
        assert!(sum(|r| r.hints_delivered) > 0, "no hint was ever replayed");
    }
}

#[test]
fn lifecycle_seeds_keep_every_property() {
    let config = SimConfig::lifecycle_with_faults();
    let (reports, single) = run_seeds("lifecycle simulation", &config, "SIM_LIFECYCLE_RUNS", DEFAULT_LIFECYCLE_RUNS);
    let mut ops = OpStats::default();
    for r in &reports {
        ops.add(&r.ops);
    }
    eprintln!("lifecycle simulation: {ops}");
    // Every operation must have run, and failures must have bitten, or the suite proves little.
    if !single && reports.len() >= 20 {
        assert!(ops.joined > 0 && ops.decommissioned > 0, "{ops}");
        assert!(ops.removed > 0 && ops.replaced > 0 && ops.repairs > 0, "{ops}");
        assert!(ops.kills > 0 && ops.sessions_failed > 0, "{ops}");
        assert!(ops.joins_aborted + ops.decommissions_aborted > 0, "no operation was ever given up: {ops}");
    }
}

#[test]
fn fault_free_run_acknowledges_everything() {
    for nodes in [3, 5] {
        let config = SimConfig { nodes: Some(nodes), ..SimConfig::default() };
        let report = run_seed(7, &config).unwrap_or_else(|f| panic!("{f}"));
        assert!(report.writes > 20 && report.reads > 10, "too little work: {report}");
        assert_eq!(report.writes_acked, report.writes, "{report}");
        assert_eq!(report.reads_ok, report.reads, "{report}");
        assert_eq!(report.hints_delivered, 0, "nothing fails, so nothing is hinted: {report}");
        assert_eq!(report.net.dropped_by_fault + report.net.dropped_by_partition, 0, "{report}");
    }
    join_cleanup();
}

#[test]
fn fault_free_topology_changes_acknowledge_everything() {
    let script = vec![(0.2, OpKind::Join), (0.5, OpKind::Decommission), (0.8, OpKind::Repair)];
    let config = SimConfig { nodes: Some(3), lifecycle: true, script: Some(script), ..SimConfig::default() };
    let report = run_seed(7, &config).unwrap_or_else(|f| panic!("{f}"));
    join_cleanup();
    eprintln!("{report}");
    assert_eq!((report.ops.joined, report.ops.decommissioned, report.ops.repairs), (1, 1, 1), "{report}");
    assert_eq!(report.ops.joins_aborted + report.ops.decommissions_aborted + report.ops.sessions_failed, 0, "{report}");
    assert_eq!(report.final_nodes, 3, "{report}");
    assert!(report.writes > 20 && report.reads > 10, "too little work: {report}");
    assert_eq!(report.writes_acked, report.writes, "{report}");
    assert_eq!(report.reads_ok, report.reads, "{report}");
    assert_eq!(report.hints_delivered, 0, "nothing fails, so nothing is hinted: {report}");
}

#[test]
fn a_seed_replays_identically() {
    let fingerprint = |seed: u64, config: &SimConfig| match run_seed(seed, config) {
        Ok(r) => (r.trace_hash, r.net.sent, r.writes_acked, r.reads_ok, r.ops, Vec::new()),
        Err(f) => (0, 0, 0, 0, OpStats::default(), f.trace_tail),
    };
    for (seed, config) in [
        (1, SimConfig::with_faults()),
        (12, SimConfig::with_faults()),
        (123, SimConfig::with_faults()),
        (5, SimConfig::lifecycle_with_faults()),
        (17, SimConfig::lifecycle_with_faults()),
    ] {
        let (a, b) = (fingerprint(seed, &config), fingerprint(seed, &config));
        assert_eq!(a, b, "seed {seed} ({config:?}) took two different paths");
    }
    join_cleanup();
}

#[test]
fn checker_catches_a_replica_that_lost_its_data() {
    let config =
        SimConfig { nodes: Some(3), sabotage: Some(Sabotage::DropReplicaData { node: 1 }), ..SimConfig::default() };
    let failure = run_seed(7, &config).expect_err("a truncated replica must break no-lost-write");
    join_cleanup();
    assert_eq!(failure.violation.property, Property::NoLostWrite, "{failure}");
    assert!(failure.violation.detail.contains("n1's local storage"), "{failure}");
    let printed = failure.to_string();
    assert!(printed.starts_with("simulation failed: SIM_SEED=7 "), "{printed}");
    assert!(printed.contains("sabotage: truncating n1's table"), "the trace tail shows the sabotage: {printed}");
}

/// Runs `op` once the clients stop (so nothing overwrites what it failed to
/// move) on a fault-free cluster of `nodes`, plain then with `sabotage`:
/// the plain run must pass, the sabotaged one must fail.
fn sabotaged_lifecycle(nodes: usize, op: OpKind, sabotage: Sabotage) -> (SimReport, SimFailure) {
    let config =
        SimConfig { nodes: Some(nodes), lifecycle: true, script: Some(vec![(1.0, op)]), ..SimConfig::default() };
    let sabotaged = SimConfig { sabotage: Some(sabotage), ..config.clone() };
    let report = run_seed(7, &config).unwrap_or_else(|f| panic!("the same {op:?} unsabotaged must pass: {f}"));
    let failure = run_seed(7, &sabotaged).expect_err("the sabotage must break a property");
    join_cleanup();
    eprintln!("{failure}");
    (report, failure)
}

#[test]
fn checker_catches_a_bootstrap_that_skips_a_range() {
    let (report, failure) = sabotaged_lifecycle(3, OpKind::Join, Sabotage::SkipBootstrapRange);
    assert_eq!(report.ops.joined, 1, "{report}");
    assert_eq!(failure.violation.property, Property::NoLostWrite, "{failure}");
    assert!(
        failure.violation.detail.contains("n3's local storage after hint replay"),
        "the joiner lacks it: {failure}"
    );
    let printed = failure.to_string();
    assert!(printed.contains("sabotage: n3 skips streaming"), "the trace tail shows the sabotage: {printed}");
}

#[test]
fn checker_catches_a_decommission_that_hands_nothing_over() {
    let (report, failure) = sabotaged_lifecycle(4, OpKind::Decommission, Sabotage::SkipDecommissionStreams);
    assert_eq!(report.ops.decommissioned, 1, "{report}");
    assert_eq!(failure.violation.property, Property::NoLostWrite, "{failure}");
    assert!(failure.violation.detail.contains("local storage after hint replay"), "{failure}");
    assert!(failure.to_string().contains("sabotage: "), "the trace tail shows the sabotage: {failure}");
}
