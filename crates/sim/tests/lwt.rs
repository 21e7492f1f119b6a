//! The lightweight transaction simulation (`sim::lwt`): concurrent CAS and
//! SERIAL reads on simulated clusters with loss, delay, partitions and node
//! kills, each history checked for linearizability.
//!
//! - `lwt_seeds_are_linearizable`: `SIM_LWT_RUNS` seeds (default
//!   `DEFAULT_RUNS`) from `SIM_SEED_BASE` (default 0) on `SIM_THREADS`
//!   threads; `SIM_SEED=<n>` runs that seed alone and prints its report.
//! - `read_then_write_is_caught`: the same workload with CAS done as a
//!   QUORUM read then a QUORUM write must fail the checker on some seed,
//!   so the checker is shown to catch a broken protocol.

#![allow(clippy::unwrap_used, reason = "an integration test: a failed unwrap names its line")]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use sim::{join_cleanup, run_lwt_seed, LwtFailure, LwtReport, LwtSabotage};

const DEFAULT_RUNS: u64 = 200;

fn env_u64(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    Some(value.trim().parse().unwrap_or_else(|_| panic!("{name}={value:?} is not a number")))
}

fn run_many(seeds: &[u64], sabotage: Option<LwtSabotage>) -> (Vec<LwtReport>, Vec<LwtFailure>) {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = env_u64("SIM_THREADS").map_or(cores, |t| t.max(1) as usize).min(seeds.len()).max(1);
    let next = AtomicUsize::new(0);
    let reports = Mutex::new(Vec::new());
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&seed) = seeds.get(i) else { break };
                match run_lwt_seed(seed, sabotage) {
                    Ok(r) => reports.lock().unwrap().push(r),
                    Err(f) => failures.lock().unwrap().push(f),
                }
            });
        }
    });
    join_cleanup();
    (reports.into_inner().unwrap(), failures.into_inner().unwrap())
}

#[test]
fn lwt_seeds_are_linearizable() {
    let single = env_u64("SIM_SEED");
    let seeds: Vec<u64> = match single {
        Some(seed) => vec![seed],
        None => {
            let base = env_u64("SIM_SEED_BASE").unwrap_or(0);
            (base..base + env_u64("SIM_LWT_RUNS").unwrap_or(DEFAULT_RUNS)).collect()
        }
    };
    let wall = Instant::now();
    let (reports, failures) = run_many(&seeds, None);
    let sum = |f: fn(&LwtReport) -> usize| reports.iter().map(f).sum::<usize>();
    if single.is_some() {
        for r in &reports {
            eprintln!("{r:?}");
        }
    }
    eprintln!(
        "lwt simulation: {} seeds in {:.1}s; {} failed; CAS {} applied, {} refused, {} unknown; {} SERIAL reads; {} kills",
        seeds.len(),
        wall.elapsed().as_secs_f64(),
        failures.len(),
        sum(|r| r.applied),
        sum(|r| r.refused),
        sum(|r| r.unknown),
        sum(|r| r.reads),
        sum(|r| r.kills),
    );
    for f in &failures {
        eprintln!("{f}");
    }
    assert!(failures.is_empty(), "{} of {} seeds failed (first above)", failures.len(), seeds.len());
    if single.is_none() && reports.len() >= 50 {
        // The faults must bite and the workload must contend, or the run proves little.
        assert!(sum(|r| r.unknown) > 0, "no CAS ever had an unknown outcome");
        assert!(sum(|r| r.refused) > 0 && sum(|r| r.applied) > 0);
        assert!(sum(|r| r.kills) > 0, "no node was ever killed");
    }
}

#[test]
fn read_then_write_is_caught() {
    let seeds: Vec<u64> = (0..24).collect();
    let (_, failures) = run_many(&seeds, Some(LwtSabotage::ReadThenWrite));
    let caught: Vec<u64> = failures
        .iter()
        .filter_map(|f| match f {
            LwtFailure::NotLinearizable { seed, .. } => Some(*seed),
            LwtFailure::Harness { .. } => None,
        })
        .collect();
    assert!(!caught.is_empty(), "a QUORUM read then write passed as CAS on every seed: the checker does nothing");
    eprintln!("read-then-write caught on seeds {caught:?} of 0..24");
}
