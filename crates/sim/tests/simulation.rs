//! The cluster simulation suite.
//!
//! - `seeds_with_faults_keep_every_property`: `SIM_RUNS` seeds (default
//!   `DEFAULT_RUNS`) starting at `SIM_SEED_BASE` (default 0), spread over
//!   `SIM_THREADS` threads (default: the available cores). `SIM_SEED=<n>`
//!   runs exactly that seed and prints its report (`SIM_VERBOSE=1`: every
//!   seed's report). Every failing seed is
//!   printed with its property and trace tail; the test then fails with the
//!   smallest one.
//! - A fault-free seed where everything must succeed, a seed run twice that
//!   must take the same path, and a sabotaged run (a replica's data dropped
//!   by hand) that the checker must catch, so the checker is not a no-op.

#![allow(clippy::unwrap_used, reason = "an integration test: a failed unwrap names its line")]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use sim::{join_cleanup, run_seed, Property, Sabotage, SimConfig, SimFailure, SimReport};

/// Keeps the default run under a minute on a 2-core machine (see the report
/// this test prints: mean wall time per seed).
const DEFAULT_RUNS: u64 = 300;

fn env_u64(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    match value.trim().parse() {
        Ok(v) => Some(v),
        Err(_) => panic!("{name}={value:?} is not a number"),
    }
}

#[test]
fn seeds_with_faults_keep_every_property() {
    let single = env_u64("SIM_SEED");
    let verbose = env_u64("SIM_VERBOSE").is_some_and(|v| v > 0);
    let seeds: Vec<u64> = match single {
        Some(seed) => vec![seed],
        None => {
            let base = env_u64("SIM_SEED_BASE").unwrap_or(0);
            let runs = env_u64("SIM_RUNS").unwrap_or(DEFAULT_RUNS);
            (base..base + runs).collect()
        }
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = env_u64("SIM_THREADS").map_or(cores, |t| t.max(1) as usize).min(seeds.len()).max(1);
    let config = SimConfig::with_faults();
    let next = AtomicUsize::new(0);
    let reports: Mutex<Vec<SimReport>> = Mutex::new(Vec::new());
    let failures: Mutex<Vec<SimFailure>> = Mutex::new(Vec::new());
    let wall = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&seed) = seeds.get(i) else { break };
                match run_seed(seed, &config) {
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
        "simulation: {} seeds on {threads} threads in {:.1}s ({:.0} ms per seed, slowest {:.0} ms); {} failed; \
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
    // Faults must actually bite in a fault run, or the suite proves little.
    if single.is_none() && seeds.len() >= 50 {
        assert!(sum(|r| r.writes) > sum(|r| r.writes_acked), "no write ever failed: the faults do nothing");
        assert!(sum(|r| r.hints_delivered) > 0, "no hint was ever replayed");
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
fn a_seed_replays_identically() {
    let fingerprint = |seed: u64| match run_seed(seed, &SimConfig::with_faults()) {
        Ok(r) => (r.trace_hash, r.net.sent, r.writes_acked, r.reads_ok, Vec::new()),
        Err(f) => (0, 0, 0, 0, f.trace_tail),
    };
    for seed in [1, 12, 123] {
        let (a, b) = (fingerprint(seed), fingerprint(seed));
        assert_eq!(a, b, "seed {seed} took two different paths");
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
