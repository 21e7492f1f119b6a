//! Lightweight transactions under faults: concurrent compare-and-set and
//! SERIAL reads on a few registers of a simulated cluster (the real
//! coordinator's `Coordinator::cas`, the real Paxos replica handlers and
//! storage), with message loss and delay, partitions and node kills, then
//! a check that the history is linearizable (`linearizable`).
//!
//! Each register is the row `(pk, c = 0)` of the simulation's table; its
//! value is an `i64` (big-endian in `v`), and every CAS writes a value no
//! other CAS writes, so a history pins down which write a read saw. A
//! client's CAS expects the value it last saw; one that got an error has an
//! unknown outcome (it may still be chosen: a later proposer finishes it).
//!
//! `LwtSabotage::ReadThenWrite` runs the same workload with the CAS done the
//! way a naive client would, a QUORUM read and then a QUORUM write: the
//! checker must reject such runs (lost updates), which shows it is not a
//! no-op.
//!
//! Invariants:
//! - A run is a function of its seed (workload, faults, the network's and
//!   Paxos's random draws; ballots take the wall clock's microseconds, but
//!   only their order steers a run, and that follows the run's events).
//! - Every operation that returned is in the history with its instants;
//!   the final SERIAL read of each register (after healing) must succeed.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cluster::paxos::CasRequest;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use storage::Partition;
use types::Consistency;

use crate::gate::Gate;
use crate::harness::{lock, Clock, SimCluster, State};
use crate::linearizable::{self, Kind, NotLinearizable, Op};
use crate::run::short;
use crate::table::{self, V_ID};

/// Break the run on purpose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LwtSabotage {
    /// CAS as a QUORUM read, then (if it matched) a QUORUM write: not atomic.
    ReadThenWrite,
}

/// The shape of one run, drawn from its seed.
#[derive(Clone, Debug)]
pub struct LwtParams {
    pub nodes: usize,
    pub vnodes: usize,
    pub clients: usize,
    pub keys: i32,
    pub workload: Duration,
    pub loss_max: f64,
}

impl LwtParams {
    fn draw(rng: &mut StdRng) -> LwtParams {
        LwtParams {
            nodes: rng.gen_range(3..=5),
            vnodes: rng.gen_range(2..=8),
            clients: rng.gen_range(2..=5),
            keys: rng.gen_range(1..=3),
            workload: Duration::from_millis(rng.gen_range(3_000..=8_000)),
            loss_max: rng.gen_range(0.0..=0.25),
        }
    }
}

/// A run whose history was linearizable.
#[derive(Clone, Debug)]
pub struct LwtReport {
    pub seed: u64,
    pub params: LwtParams,
    pub applied: usize,
    pub refused: usize,
    pub unknown: usize,
    pub reads: usize,
    pub kills: usize,
    pub wall_time: Duration,
}

/// Why a run failed: the history was not linearizable, or the harness broke.
#[derive(Debug)]
pub enum LwtFailure {
    NotLinearizable { seed: u64, params: LwtParams, violation: NotLinearizable, trace: Vec<String> },
    Harness { seed: u64, detail: String },
}

impl std::fmt::Display for LwtFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LwtFailure::NotLinearizable { seed, params, violation, trace } => {
                writeln!(f, "SIM_SEED={seed} ({params:?}): not linearizable")?;
                write!(f, "{violation}")?;
                writeln!(f, "last events:")?;
                for line in trace {
                    writeln!(f, "  {line}")?;
                }
                Ok(())
            }
            LwtFailure::Harness { seed, detail } => write!(f, "SIM_SEED={seed}: harness: {detail}"),
        }
    }
}

struct Shared {
    rng: Mutex<StdRng>,
    cluster: Arc<SimCluster>,
    clock: Arc<Clock>,
    params: LwtParams,
    sabotage: Option<LwtSabotage>,
    /// The logical clock and the history.
    history: Mutex<(u64, Vec<Op>)>,
    next_value: Mutex<i64>,
    kills: Mutex<usize>,
}

impl Shared {
    fn tick(&self) -> u64 {
        let mut h = lock(&self.history);
        h.0 += 1;
        h.0
    }

    fn record(&self, key: i32, kind: Kind, call: u64, known: bool) {
        let mut h = lock(&self.history);
        h.0 += 1;
        let ret = if known { h.0 } else { u64::MAX };
        h.1.push(Op { key, kind, call, ret });
    }
}

/// The register's value in a read partition (`None`: no row).
fn value_in(p: Option<&Partition>) -> Result<Option<i64>, String> {
    let Some(p) = p else { return Ok(None) };
    let Some(row) = p.rows.iter().find(|r| r.clustering.first().map(Vec::as_slice) == Some(&0i32.to_be_bytes()[..]))
    else {
        return Ok(None);
    };
    match row.column(V_ID) {
        Some(storage::ColumnData::Simple(cell)) => <[u8; 8]>::try_from(cell.value.as_slice())
            .map(|b| Some(i64::from_be_bytes(b)))
            .map_err(|_| format!("register value {:?} is not an i64", cell.value)),
        None => Ok(None),
        Some(other) => Err(format!("register cell {other:?}")),
    }
}

/// One compare-and-set through node `node`.
async fn cas(shared: &Shared, who: &str, node: usize, key: i32, expected: Option<i64>) -> Option<Option<i64>> {
    let n = shared.cluster.node(node)?;
    let new = {
        let mut next = lock(&shared.next_value);
        *next += 1;
        *next
    };
    let call = shared.tick();
    let write = table::write(key, 0, 0, &new.to_be_bytes());
    let ks = Arc::clone(&shared.cluster.keyspace);
    let outcome: Result<(bool, Option<i64>), String> = match shared.sabotage {
        None => {
            let req = CasRequest {
                read: table::full_read(key),
                serial: Consistency::Serial,
                commit: Consistency::Quorum,
                is_read: false,
            };
            let mut seen = Ok(None);
            let r = n
                .coordinator
                .cas(&ks, req, |current| {
                    seen = value_in(current);
                    Ok(match &seen {
                        Ok(v) if *v == expected => Some(vec![write.clone()]),
                        _ => None,
                    })
                })
                .await;
            match (r, seen) {
                (Ok(o), Ok(v)) => Ok((o.applied, v)),
                (Ok(_), Err(e)) => return harness(shared, who, e),
                (Err(e), _) => Err(short(&e)),
            }
        }
        Some(LwtSabotage::ReadThenWrite) => {
            match n.coordinator.read(&ks, table::full_read(key), Consistency::Quorum).await {
                Err(e) => Err(short(&e)),
                Ok(p) => match value_in(p.as_ref()) {
                    Err(e) => return harness(shared, who, e),
                    Ok(v) if v != expected => Ok((false, v)),
                    Ok(v) => {
                        let mut m = write.clone();
                        cluster::paxos::shift_timestamps(&mut m, table::TIMESTAMP_BASE_MICROS + new);
                        let w = n.coordinator.mutate(&ks, vec![m], Consistency::Quorum, types::WriteType::Simple).await;
                        w.map(|()| (true, v)).map_err(|e| short(&e))
                    }
                },
            }
        }
    };
    let kind_text = match &outcome {
        Ok((true, _)) => "applied".to_string(),
        Ok((false, v)) => format!("refused, saw {v:?}"),
        Err(e) => format!("unknown: {e}"),
    };
    shared.clock.event(who, format_args!("n{node} cas r{key} {expected:?} -> {new}: {kind_text}"));
    match outcome {
        Ok((true, _)) => {
            shared.record(key, Kind::CasApplied { expected, new }, call, true);
            Some(Some(new))
        }
        Ok((false, current)) => {
            shared.record(key, Kind::CasRefused { expected, current }, call, true);
            Some(current)
        }
        Err(_) => {
            shared.record(key, Kind::CasUnknown { expected, new }, call, false);
            None
        }
    }
}

fn harness<T>(shared: &Shared, who: &str, detail: String) -> Option<T> {
    shared.clock.event(who, format_args!("harness: {detail}"));
    lock(&shared.history).1.clear();
    None
}

/// One SERIAL read (a QUORUM read when sabotaged) through node `node`.
async fn read(shared: &Shared, who: &str, node: usize, key: i32) -> Result<Option<i64>, String> {
    let Some(n) = shared.cluster.node(node) else { return Err(format!("no node n{node}")) };
    let call = shared.tick();
    let cl = if shared.sabotage.is_some() { Consistency::Quorum } else { Consistency::Serial };
    let r = n.coordinator.read(&shared.cluster.keyspace, table::full_read(key), cl).await;
    let value = match r {
        Ok(p) => value_in(p.as_ref()),
        Err(e) => Err(short(&e)),
    };
    shared.clock.event(who, format_args!("n{node} read r{key} -> {value:?}"));
    if let Ok(v) = &value {
        shared.record(key, Kind::Read(*v), call, true);
    }
    value
}

async fn client(id: usize, shared: Arc<Shared>, until: tokio::time::Instant) {
    let who = format!("c{id}");
    let mut last: Vec<Option<i64>> = vec![None; shared.params.keys as usize];
    while tokio::time::Instant::now() < until {
        let (key, is_cas, node, think) = {
            let mut rng = lock(&shared.rng);
            let coordinators = shared.cluster.coordinators();
            let node = coordinators.get(rng.gen_range(0..coordinators.len().max(1))).copied();
            (rng.gen_range(0..shared.params.keys), rng.gen_bool(0.65), node, rng.gen_range(1..=60))
        };
        let Some(node) = node else {
            tokio::time::sleep(Duration::from_millis(think)).await;
            continue;
        };
        let slot = key as usize;
        if is_cas {
            let expected = last.get(slot).copied().flatten();
            if let Some(now) = cas(&shared, &who, node, key, expected).await {
                if let Some(s) = last.get_mut(slot) {
                    *s = now;
                }
            }
        } else if let Ok(v) = read(&shared, &who, node, key).await {
            if let Some(s) = last.get_mut(slot) {
                *s = v;
            }
        }
        tokio::time::sleep(Duration::from_millis(think)).await;
    }
}

/// Loss, delay, partitions, and one node at a time killed for a while.
async fn nemesis(shared: Arc<Shared>, until: tokio::time::Instant) {
    let net = &shared.cluster.net;
    loop {
        let addrs: Vec<_> = shared.cluster.nodes().iter().map(|n| n.addr).collect();
        let (wait, action, a, b, loss, delay, down_for) = {
            let mut rng = lock(&shared.rng);
            let n = addrs.len();
            let a = rng.gen_range(0..n);
            let b = (a + rng.gen_range(1..n)) % n;
            let loss = rng.gen_range(0.0..=shared.params.loss_max);
            let delay = Duration::from_micros(rng.gen_range(0..=30_000));
            (
                Duration::from_millis(rng.gen_range(200..=1_500)),
                rng.gen_range(0..100),
                a,
                b,
                loss,
                delay,
                Duration::from_millis(rng.gen_range(300..=2_000)),
            )
        };
        if tokio::time::Instant::now() + wait >= until {
            break;
        }
        tokio::time::sleep(wait).await;
        let name = |i: usize| crate::harness::name_of(addrs[i]);
        match action {
            0..=29 => {
                shared.clock.event("net", format_args!("faults loss={loss:.2} delay<={delay:?}"));
                net.set_faults(net::MemFaults { drop_probability: loss, delay_min: Duration::ZERO, delay_max: delay });
            }
            30..=44 => {
                shared.clock.event("net", format_args!("isolate {}", name(a)));
                net.isolate(addrs[a]);
            }
            45..=59 => {
                shared.clock.event("net", format_args!("cut {} <-> {}", name(a), name(b)));
                net.partition_both(addrs[a], addrs[b]);
            }
            60..=79 => {
                let running = shared.cluster.nodes().iter().all(|n| n.state() == State::Running);
                if running {
                    shared.clock.event("nemesis", format_args!("kill {} for {down_for:?}", name(a)));
                    *lock(&shared.kills) += 1;
                    shared.cluster.kill(a);
                    let again = Arc::clone(&shared);
                    tokio::spawn(async move {
                        tokio::time::sleep(down_for).await;
                        again.clock.event("nemesis", format_args!("restart n{a}"));
                        again.cluster.restart(a);
                    });
                }
            }
            _ => {
                shared.clock.event("net", format_args!("heal all partitions"));
                net.heal_all();
            }
        }
    }
}

async fn simulate(
    seed: u64,
    sabotage: Option<LwtSabotage>,
    dir: &std::path::Path,
    keep: &Mutex<Option<Arc<SimCluster>>>,
) -> Result<LwtReport, LwtFailure> {
    let wall = std::time::Instant::now();
    let mut rng = StdRng::seed_from_u64(seed);
    let params = LwtParams::draw(&mut rng);
    let clock = Arc::new(Clock::new());
    let cluster = SimCluster::start(&mut rng, params.nodes, params.vnodes, dir, &clock)
        .map_err(|detail| LwtFailure::Harness { seed, detail })?;
    for node in cluster.nodes() {
        node.coordinator.seed_paxos(rng.gen());
    }
    *lock(keep) = Some(Arc::clone(&cluster));
    clock.event("sim", format_args!("lwt seed {seed}: {params:?}"));
    let shared = Arc::new(Shared {
        rng: Mutex::new(rng),
        cluster,
        clock: Arc::clone(&clock),
        params: params.clone(),
        sabotage,
        history: Mutex::new((0, Vec::new())),
        next_value: Mutex::new(0),
        kills: Mutex::new(0),
    });
    let until = tokio::time::Instant::now() + params.workload;
    let mut tasks = Vec::new();
    for id in 0..params.clients {
        tasks.push(tokio::spawn(client(id, Arc::clone(&shared), until)));
    }
    tasks.push(tokio::spawn(nemesis(Arc::clone(&shared), until)));
    for t in tasks {
        t.await.map_err(|e| LwtFailure::Harness { seed, detail: format!("a task failed: {e}") })?;
    }
    // Heal, restart, and read every register through each coordinator in turn.
    shared.cluster.net.heal_all();
    shared.cluster.net.set_faults(net::MemFaults::default());
    for node in shared.cluster.nodes() {
        if node.state() == State::Down {
            shared.cluster.restart(node.index);
        }
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    for key in 0..params.keys {
        let mut ok = false;
        for attempt in 0..10 {
            let coordinators = shared.cluster.coordinators();
            let Some(&node) = coordinators.get(attempt % coordinators.len().max(1)) else { continue };
            if read(&shared, "final", node, key).await.is_ok() {
                ok = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        if !ok {
            return Err(LwtFailure::Harness { seed, detail: format!("the final SERIAL read of r{key} failed") });
        }
    }
    let ops = std::mem::take(&mut lock(&shared.history).1);
    if ops.is_empty() {
        return Err(LwtFailure::Harness { seed, detail: "no history (a read was undecodable)".into() });
    }
    if let Err(violation) = linearizable::check(&ops) {
        let trace = lock(&clock.trace).tail();
        return Err(LwtFailure::NotLinearizable { seed, params, violation, trace });
    }
    let count = |f: fn(&Kind) -> bool| ops.iter().filter(|o| f(&o.kind)).count();
    let kills = *lock(&shared.kills);
    Ok(LwtReport {
        seed,
        params,
        applied: count(|k| matches!(k, Kind::CasApplied { .. })),
        refused: count(|k| matches!(k, Kind::CasRefused { .. })),
        unknown: count(|k| matches!(k, Kind::CasUnknown { .. })),
        reads: count(|k| matches!(k, Kind::Read(_))),
        kills,
        wall_time: wall.elapsed(),
    })
}

/// Runs one seed of the LWT simulation.
pub fn run_lwt_seed(seed: u64, sabotage: Option<LwtSabotage>) -> Result<LwtReport, LwtFailure> {
    let harness = |detail: String| LwtFailure::Harness { seed, detail };
    let dir = tempfile::Builder::new().prefix("shoal-lwt-").tempdir().map_err(|e| harness(format!("tempdir: {e}")))?;
    let gate = Arc::new(Gate::default());
    let mut builder = tokio::runtime::Builder::new_current_thread();
    builder.enable_time().start_paused(true);
    gate.install(&mut builder);
    let rt = builder.build().map_err(|e| harness(format!("runtime: {e}")))?;
    let keep = Mutex::new(None);
    let run = std::panic::catch_unwind(AssertUnwindSafe(|| rt.block_on(simulate(seed, sabotage, dir.path(), &keep))));
    gate.close();
    drop(rt);
    crate::run::reap(lock(&keep).take(), dir);
    let result = run.map_err(|_| harness("the simulation panicked".into()))?;
    if gate.stuck() && result.is_ok() {
        return Err(harness("the blocking pool and the runtime waited on each other too long".into()));
    }
    result
}
