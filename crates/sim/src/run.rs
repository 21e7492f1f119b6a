//! One seed, start to finish: draw the run's shape from the seed, start the
//! cluster, run concurrent clients against random coordinators while the
//! nemesis injects faults (and, in a lifecycle run, the operator changes the
//! topology and repairs: `lifecycle`), then heal, let the operation in
//! progress finish, wait for the failure detectors, replay hints, check the
//! replicas, read every partition at ALL, check liveness, and judge the
//! history (`checker`).
//!
//! During the workload every node also runs the real hint dispatcher
//! (`verbs::dispatch_hints`), so hints are replayed into the faulty network
//! too; it is stopped when the workload ends.
//!
//! Phases after the workload (each a precondition of the next):
//! 1. heal: partitions removed, no loss, small delays, killed nodes
//!    restarted (not one killed for good); the topology change in progress
//!    finishes; wait until every node knows the latest membership and sees
//!    every member up;
//! 2. settle (longer than the write timeout, so coordinators have hinted
//!    every replica that did not answer), then `verbs::replay_once` on every
//!    node until no hint for a member is pending (bounded);
//! 3. the local storage of every replica of the final ring, before any read
//!    repair or repair: every one must hold every acknowledged write
//!    (hinted handoff alone), except in a lifecycle run with faults, where a
//!    quorum of them must (a range streamed while a hint for its old owner
//!    was pending is repaired later, in Cassandra as here);
//! 4. a lifecycle run repairs every node's primary ranges, then every
//!    replica must hold every acknowledged write;
//! 5. one ALL read per partition (read repair), checked the same way;
//! 6. local storage again, and every replica's raw digest must agree;
//! 7. liveness: one QUORUM write per row and one QUORUM read per partition,
//!    each through another coordinator; all must succeed. Last, because
//!    these writes overwrite every row and would hide a lost write from the
//!    checks above.
//!
//! Determinism: every random draw comes from one `StdRng` seeded with the
//! seed (the network's seed is drawn from it too), on a current-thread
//! runtime with paused time whose blocking pool takes turns with it
//! (`gate`), so a seed replays the same run; `SimReport::trace_hash`
//! fingerprints it.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use cluster::verbs;
use cluster::{CoordError, Status};
use net::{MemFaults, MemStats};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use types::Consistency;

use crate::checker::{self, Property, Snapshot, Violation};
use crate::gate::Gate;
use crate::harness::{self, lock, Clock, SimCluster, State, HEARTBEAT_PERIOD};
use crate::history::{History, ReadRecord, WriteRecord};
use crate::lifecycle::{self, OpKind, OpStats, Ops};
use crate::table::{self, ReadShape, Rows};

/// What kind of run.
#[derive(Clone, Debug, Default)]
pub struct SimConfig {
    /// Inject faults: message loss, delays, partitions. Off, the network only
    /// delays messages a little, and every operation is expected to succeed.
    pub faults: bool,
    /// Force the number of nodes (else 3 to 5, from the seed).
    pub nodes: Option<usize>,
    /// Break the run on purpose, to show the checker notices.
    pub sabotage: Option<Sabotage>,
    /// Change the topology and repair during the workload (`lifecycle`);
    /// with `faults`, the nemesis also kills nodes.
    pub lifecycle: bool,
    /// The operations to run, each at a fraction of the workload (1.0: when
    /// the clients stop), instead of random ones.
    pub script: Option<Vec<(f64, OpKind)>>,
}

impl SimConfig {
    pub fn with_faults() -> SimConfig {
        SimConfig { faults: true, ..SimConfig::default() }
    }

    /// Faults, node kills, and topology changes and repairs.
    pub fn lifecycle_with_faults() -> SimConfig {
        SimConfig { faults: true, lifecycle: true, ..SimConfig::default() }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sabotage {
    /// After hint replay, truncate the table on this node: a replica loses
    /// its data behind the cluster's back.
    DropReplicaData { node: usize },
    /// A joiner's bootstrap leaves out of its streams the range holding the
    /// most partitions.
    SkipBootstrapRange,
    /// The nodes taking over a leaving node's ranges do not pull them.
    SkipDecommissionStreams,
}

/// The shape of one run, drawn from its seed.
#[derive(Clone, Debug)]
pub struct Params {
    pub nodes: usize,
    pub vnodes: usize,
    pub clients: usize,
    pub partitions: i32,
    pub rows: i32,
    pub workload: Duration,
    pub write_fraction: f64,
    pub think_ms_max: u64,
    pub loss_max: f64,
    /// How often each node's hint dispatcher runs during the workload.
    pub hint_period: Duration,
    /// Topology changes and repairs run (`SimConfig::lifecycle`).
    pub lifecycle: bool,
    /// The nemesis kills nodes, and removals and replacements (which kill
    /// one for good) may run: a lifecycle run with faults.
    pub kills: bool,
}

impl Params {
    fn draw(rng: &mut StdRng, config: &SimConfig) -> Params {
        Params {
            nodes: config.nodes.unwrap_or_else(|| rng.gen_range(3..=5)),
            vnodes: rng.gen_range(2..=16),
            clients: rng.gen_range(2..=6),
            partitions: rng.gen_range(2..=8),
            rows: rng.gen_range(1..=3),
            workload: Duration::from_millis(rng.gen_range(5_000..=15_000)),
            write_fraction: rng.gen_range(0.3..0.8),
            think_ms_max: rng.gen_range(1..=200),
            loss_max: if config.faults { rng.gen_range(0.0..=0.3) } else { 0.0 },
            hint_period: Duration::from_millis(rng.gen_range(300..=3_000)),
            lifecycle: config.lifecycle,
            kills: config.lifecycle && config.faults,
        }
    }
}

impl fmt::Display for Params {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} nodes x {} vnodes, {} clients, {} partitions x {} rows, {:.1}s of workload, {:.0}% writes, think <= {}ms, loss <= {:.0}%{}",
            self.nodes,
            self.vnodes,
            self.clients,
            self.partitions,
            self.rows,
            self.workload.as_secs_f64(),
            self.write_fraction * 100.0,
            self.think_ms_max,
            self.loss_max * 100.0,
            match (self.lifecycle, self.kills) {
                (true, true) => ", topology changes, kills",
                (true, false) => ", topology changes",
                _ => "",
            }
        )
    }
}

/// A run that kept every property.
#[derive(Clone, Debug)]
pub struct SimReport {
    pub seed: u64,
    pub params: Params,
    pub writes: usize,
    pub writes_acked: usize,
    pub reads: usize,
    pub reads_ok: usize,
    pub hints_delivered: usize,
    pub virtual_time: Duration,
    pub wall_time: Duration,
    pub net: MemStats,
    /// What the topology changes and repairs did (lifecycle runs).
    pub ops: OpStats,
    /// NORMAL nodes at the end.
    pub final_nodes: usize,
    /// Hash of the event trace and the network's delivery history.
    pub trace_hash: u64,
}

impl fmt::Display for SimReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "seed {}: {}; writes {}/{} acked, reads {}/{} ok, {} hints replayed, {} msgs ({} lost, {} cut), {:.1}s virtual in {:.0}ms",
            self.seed,
            self.params,
            self.writes_acked,
            self.writes,
            self.reads_ok,
            self.reads,
            self.hints_delivered,
            self.net.sent,
            self.net.dropped_by_fault,
            self.net.dropped_by_partition,
            self.virtual_time.as_secs_f64(),
            self.wall_time.as_secs_f64() * 1e3
        )?;
        if self.params.lifecycle {
            write!(f, "; {}; {} nodes at the end", self.ops, self.final_nodes)?;
        }
        Ok(())
    }
}

/// A run that broke a property (or could not run): prints its seed.
#[derive(Clone, Debug)]
pub struct SimFailure {
    pub seed: u64,
    pub violation: Violation,
    pub params: Option<Params>,
    pub trace_tail: Vec<String>,
}

impl fmt::Display for SimFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "simulation failed: SIM_SEED={} (replay: SIM_SEED={} cargo test --release -p sim)",
            self.seed, self.seed
        )?;
        writeln!(f, "{}", self.violation)?;
        if let Some(p) = &self.params {
            writeln!(f, "run: {p}")?;
        }
        writeln!(f, "last events:")?;
        for line in &self.trace_tail {
            writeln!(f, "  {line}")?;
        }
        Ok(())
    }
}

thread_local! {
    /// Panics on this thread since the run started (tokio catches a task's
    /// panic; this makes it count).
    static PANICS: Cell<u32> = const { Cell::new(0) };
    static FIRST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

fn count_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.with(|p| p.set(p.get() + 1));
            FIRST_PANIC.with(|f| {
                f.borrow_mut().get_or_insert_with(|| info.to_string());
            });
            previous(info);
        }));
    });
    PANICS.with(|p| p.set(0));
    FIRST_PANIC.with(|f| f.borrow_mut().take());
}

/// Runs one seed. (The failure is returned unboxed: it is built once per
/// failing seed, and the caller prints it.)
#[allow(clippy::result_large_err)]
pub fn run_seed(seed: u64, config: &SimConfig) -> Result<SimReport, SimFailure> {
    count_panics();
    let wall = std::time::Instant::now();
    let fail = |violation: Violation| SimFailure { seed, violation, params: None, trace_tail: Vec::new() };
    let dir = tempfile::Builder::new()
        .prefix("shoal-sim-")
        .tempdir()
        .map_err(|e| fail(harness_error(format!("tempdir: {e}"))))?;
    let gate = Arc::new(Gate::default());
    let mut builder = tokio::runtime::Builder::new_current_thread();
    builder.enable_time().start_paused(true);
    gate.install(&mut builder);
    let rt = builder.build().map_err(|e| fail(harness_error(format!("runtime: {e}"))))?;
    let run = std::panic::catch_unwind(AssertUnwindSafe(|| rt.block_on(simulate(seed, config, dir.path()))));
    // Stops the verb handlers, failure detectors and the network pump.
    gate.close();
    drop(rt);
    let mut run = match run {
        Ok(run) => run,
        Err(_) => {
            let what = FIRST_PANIC.with(|f| f.borrow_mut().take()).unwrap_or_default();
            return Err(fail(harness_error(format!("the simulation panicked: {what}"))));
        }
    };
    if PANICS.with(Cell::get) > 0 && run.result.is_ok() {
        let what = FIRST_PANIC.with(|f| f.borrow_mut().take()).unwrap_or_default();
        run.result = Err(harness_error(format!("a task panicked: {what}")));
    }
    if gate.stuck() && run.result.is_ok() {
        run.result = Err(harness_error("the blocking pool and the runtime waited on each other too long".into()));
    }
    let trace = lock(&run.clock.trace);
    let tail = trace.tail();
    let trace_hash = trace.hash() ^ run.net.trace_hash.rotate_left(1);
    drop(trace);
    reap(run.cluster, dir);
    let history = lock(&run.history);
    match run.result {
        Ok(()) => Ok(SimReport {
            seed,
            params: run.params,
            writes: history.writes.len(),
            writes_acked: history.acked_writes(),
            reads: history.reads.len(),
            reads_ok: history.ok_reads(),
            hints_delivered: run.hints_delivered,
            virtual_time: run.virtual_time,
            wall_time: wall.elapsed(),
            net: run.net,
            ops: run.ops,
            final_nodes: run.final_nodes,
            trace_hash,
        }),
        Err(violation) => Err(SimFailure { seed, violation, params: Some(run.params), trace_tail: tail }),
    }
}

fn harness_error(detail: String) -> Violation {
    Violation::new(Property::Harness, detail)
}

static REAPERS: Mutex<Vec<std::thread::JoinHandle<()>>> = Mutex::new(Vec::new());

/// Closes the nodes' storage and removes the directory off the simulation's
/// thread: closing a `Storage` joins its commit-log thread, which sleeps in
/// 50 ms steps, and that would otherwise dominate a seed's time.
pub(crate) fn reap(cluster: Option<Arc<SimCluster>>, dir: tempfile::TempDir) {
    let handle = std::thread::spawn(move || {
        drop(cluster);
        drop(dir);
    });
    lock(&REAPERS).push(handle);
}

/// Waits until every finished run's storage is closed and its directory removed.
pub fn join_cleanup() {
    let handles: Vec<_> = std::mem::take(&mut *lock(&REAPERS));
    for h in handles {
        let _ = h.join();
    }
}

struct Run {
    params: Params,
    cluster: Option<Arc<SimCluster>>,
    clock: Arc<Clock>,
    history: Arc<Mutex<History>>,
    result: Result<(), Violation>,
    hints_delivered: usize,
    virtual_time: Duration,
    net: MemStats,
    ops: OpStats,
    final_nodes: usize,
}

/// What every task of a run shares.
pub(crate) struct Shared {
    pub(crate) rng: Mutex<StdRng>,
    pub(crate) history: Arc<Mutex<History>>,
    pub(crate) clock: Arc<Clock>,
    pub(crate) cluster: Arc<SimCluster>,
    pub(crate) params: Params,
    pub(crate) sabotage: Option<Sabotage>,
    pub(crate) ops: Mutex<Ops>,
}

async fn simulate(seed: u64, config: &SimConfig, dir: &std::path::Path) -> Run {
    let mut rng = StdRng::seed_from_u64(seed);
    let params = Params::draw(&mut rng, config);
    let clock = Arc::new(Clock::new());
    let history = Arc::new(Mutex::new(History::default()));
    let cluster = match SimCluster::start(&mut rng, params.nodes, params.vnodes, dir, &clock) {
        Ok(c) => c,
        Err(e) => {
            return Run {
                params,
                cluster: None,
                clock,
                history,
                result: Err(harness_error(e)),
                hints_delivered: 0,
                virtual_time: Duration::ZERO,
                net: MemStats::default(),
                ops: OpStats::default(),
                final_nodes: 0,
            }
        }
    };
    clock.event("sim", format_args!("seed {seed}: {params}"));
    let shared = Arc::new(Shared {
        rng: Mutex::new(rng),
        history: Arc::clone(&history),
        clock: Arc::clone(&clock),
        cluster,
        params: params.clone(),
        sabotage: config.sabotage,
        ops: Mutex::new(Ops::default()),
    });
    let mut hints_delivered = 0;
    let result = phases(&shared, config, &mut hints_delivered).await;
    let net = shared.cluster.net.stats();
    let virtual_time = clock.now();
    let ops = lock(&shared.ops).stats.clone();
    let final_nodes = shared.cluster.with_status(Status::Normal).len();
    let cluster = Some(Arc::clone(&shared.cluster));
    drop(shared);
    Run { params, cluster, clock, history, result, hints_delivered, virtual_time, net, ops, final_nodes }
}

/// A coordinator error as the trace shows it.
pub(crate) fn short(e: &CoordError) -> String {
    match e {
        CoordError::WriteTimeout { received, block_for, .. } => format!("WriteTimeout({received}/{block_for})"),
        CoordError::ReadTimeout { received, block_for, .. } => format!("ReadTimeout({received}/{block_for})"),
        CoordError::Unavailable { required, alive, .. } => format!("Unavailable(alive {alive}/{required})"),
        other => format!("{other:?}"),
    }
}

fn cl_name(cl: Consistency) -> &'static str {
    match cl {
        Consistency::All => "ALL",
        Consistency::Quorum => "QUORUM",
        _ => "other",
    }
}

/// One client write through node `node` of the rows `rows` (pk, c): one
/// row alone, several as an unlogged batch, each row with its own
/// timestamp. Recorded per row.
async fn write(shared: &Shared, who: &str, node: usize, rows: &[(i32, i32)], cl: Consistency) -> Result<(), String> {
    let (stamps, start) = {
        let mut h = lock(&shared.history);
        let stamps: Vec<i64> = rows.iter().map(|_| h.next_timestamp()).collect();
        (stamps, h.tick())
    };
    let start_at = shared.clock.now();
    let values: Vec<Vec<u8>> = rows.iter().zip(&stamps).map(|(&(pk, c), &ts)| table::value_of(ts, pk, c)).collect();
    let mutations =
        rows.iter().zip(&stamps).zip(&values).map(|((&(pk, c), &ts), v)| table::write(pk, c, ts, v)).collect();
    let write_type = if rows.len() == 1 { types::WriteType::Simple } else { types::WriteType::UnloggedBatch };
    let result = match shared.cluster.node(node) {
        Some(n) => {
            n.coordinator.mutate(&shared.cluster.keyspace, mutations, cl, write_type).await.map_err(|e| short(&e))
        }
        None => Err(format!("no node n{node}")),
    };
    let end = lock(&shared.history).tick();
    let end_at = shared.clock.now();
    let what: Vec<String> = rows
        .iter()
        .zip(&stamps)
        .map(|((pk, c), ts)| format!("pk={pk} c={c} ts={}", ts - table::TIMESTAMP_BASE_MICROS))
        .collect();
    shared.clock.event(
        who,
        format_args!(
            "n{node} write {} {} -> {}",
            cl_name(cl),
            what.join(", "),
            result.as_ref().map_or_else(|e| e.as_str(), |_| "ok")
        ),
    );
    let mut h = lock(&shared.history);
    for ((&(pk, c), ts), value) in rows.iter().zip(stamps).zip(values) {
        h.writes.push(WriteRecord { pk, c, ts, value, node, start, end, start_at, end_at, result: result.clone() });
    }
    result
}

/// One read of partition `pk` through node `node`; recorded when `record`.
async fn read(
    shared: &Shared,
    who: &str,
    node: usize,
    pk: i32,
    shape: ReadShape,
    cl: Consistency,
    record: bool,
) -> Result<Rows, String> {
    let start = lock(&shared.history).tick();
    let start_at = shared.clock.now();
    let result = match shared.cluster.node(node) {
        Some(n) => match n.coordinator.read(&shared.cluster.keyspace, table::read(pk, shape), cl).await {
            Ok(p) => table::rows(&p, shape.reversed),
            Err(e) => Err(short(&e)),
        },
        None => Err(format!("no node n{node}")),
    };
    let end = lock(&shared.history).tick();
    let end_at = shared.clock.now();
    let outcome = match &result {
        Ok(rows) => {
            let v: Vec<String> =
                rows.iter().map(|(c, v)| format!("{c}@{}", v.ts - table::TIMESTAMP_BASE_MICROS)).collect();
            format!("[{}]", v.join(" "))
        }
        Err(e) => e.clone(),
    };
    shared.clock.event(who, format_args!("n{node} read {} pk={pk}{shape} -> {outcome}", cl_name(cl)));
    if record {
        lock(&shared.history).reads.push(ReadRecord {
            pk,
            shape,
            node,
            start,
            end,
            start_at,
            end_at,
            result: result.clone(),
        });
    }
    result
}

/// Bound on the operations of one run. A client waits at least 1 ms of
/// virtual time between operations, because an operation that fails at once
/// (Unavailable) takes no virtual time, and a loop without waits would spin
/// at one instant forever.
const OPS_MAX: usize = 50_000;

enum Op {
    Write(Vec<(i32, i32)>),
    Read(i32, ReadShape),
}

/// Mostly whole partitions; otherwise a slice, a direction and a limit.
fn random_shape(rng: &mut StdRng, rows: i32) -> ReadShape {
    if rng.gen_bool(0.6) {
        return ReadShape::default();
    }
    let range = rng.gen_bool(0.3).then(|| {
        let lo = rng.gen_range(0..rows);
        (lo, rng.gen_range(lo..rows))
    });
    let limit = rng.gen_bool(0.6).then(|| rng.gen_range(1..=rows.max(1) as usize));
    ReadShape { range, reversed: rng.gen_bool(0.5), limit }
}

async fn client(id: usize, shared: Arc<Shared>, until: tokio::time::Instant) {
    let who = format!("c{id}");
    let p = &shared.params;
    while tokio::time::Instant::now() < until {
        let ops = {
            let h = lock(&shared.history);
            h.writes.len() + h.reads.len()
        };
        if ops >= OPS_MAX {
            shared.clock.event(&who, format_args!("stops: {OPS_MAX} operations recorded"));
            break;
        }
        let (op, node, think) = {
            let mut rng = lock(&shared.rng);
            let op = if rng.gen_bool(p.write_fraction) {
                // Mostly single rows; sometimes a batch of distinct rows.
                let count = if rng.gen_bool(0.2) { rng.gen_range(2..=3) } else { 1 };
                let mut rows: Vec<(i32, i32)> = Vec::with_capacity(count);
                for _ in 0..count {
                    let row = (rng.gen_range(0..p.partitions), rng.gen_range(0..p.rows));
                    if !rows.contains(&row) {
                        rows.push(row);
                    }
                }
                Op::Write(rows)
            } else {
                Op::Read(rng.gen_range(0..p.partitions), random_shape(&mut rng, p.rows))
            };
            let coordinators = shared.cluster.coordinators();
            let node = coordinators.get(rng.gen_range(0..coordinators.len().max(1))).copied();
            (op, node, rng.gen_range(1..=p.think_ms_max))
        };
        let Some(node) = node else {
            tokio::time::sleep(Duration::from_millis(think)).await;
            continue;
        };
        match op {
            Op::Write(rows) => {
                let _ = write(&shared, &who, node, &rows, Consistency::Quorum).await;
            }
            Op::Read(pk, shape) => {
                let _ = read(&shared, &who, node, pk, shape, Consistency::Quorum, true).await;
            }
        }
        tokio::time::sleep(Duration::from_millis(think)).await;
    }
}

/// The network after healing: nothing lost, little delay.
fn calm() -> MemFaults {
    MemFaults { drop_probability: 0.0, delay_min: Duration::ZERO, delay_max: Duration::from_millis(2) }
}

/// Random loss and delay within the run's bounds; now and then a slow
/// network whose round trips approach the timeouts.
fn random_faults(rng: &mut StdRng, p: &Params) -> MemFaults {
    let drop_probability = if p.loss_max > 0.0 { rng.gen_range(0.0..=p.loss_max) } else { 0.0 };
    let delay_min = Duration::from_micros(rng.gen_range(0..=5_000));
    let spread = if rng.gen_bool(0.1) { rng.gen_range(0..=300_000) } else { rng.gen_range(0..=40_000) };
    MemFaults { drop_probability, delay_min, delay_max: delay_min + Duration::from_micros(spread) }
}

/// The fault schedule: until `until`, every 0.2–2.5 s, change loss and delay,
/// isolate a node, split a pair of nodes from the rest, cut one direction of
/// one link, heal every partition, or (`Params::kills`) kill a node for a
/// while (`kill_one`).
async fn nemesis(shared: Arc<Shared>, until: tokio::time::Instant) {
    let net = &shared.cluster.net;
    let faults = random_faults(&mut lock(&shared.rng), &shared.params);
    shared.clock.event("net", format_args!("faults {faults:?}"));
    net.set_faults(faults);
    let actions = if shared.params.kills { 115 } else { 100 };
    loop {
        // The nodes that may be running (those that left never come back).
        let addrs: Vec<_> =
            shared.cluster.nodes().iter().filter(|n| n.state() != State::Gone).map(|n| n.addr).collect();
        let n = addrs.len();
        let (wait, action, a, b) = {
            let mut rng = lock(&shared.rng);
            let a = rng.gen_range(0..n);
            let b = (a + rng.gen_range(1..n)) % n;
            (Duration::from_millis(rng.gen_range(200..=2_500)), rng.gen_range(0..actions), a, b)
        };
        if tokio::time::Instant::now() + wait >= until {
            break;
        }
        tokio::time::sleep(wait).await;
        let name = |i: usize| harness::name_of(addrs[i]);
        match action {
            0..=29 => {
                let faults = random_faults(&mut lock(&shared.rng), &shared.params);
                shared.clock.event(
                    "net",
                    format_args!(
                        "faults loss={:.2} delay={:?}..{:?}",
                        faults.drop_probability, faults.delay_min, faults.delay_max
                    ),
                );
                net.set_faults(faults);
            }
            30..=44 => {
                shared.clock.event("net", format_args!("isolate {}", name(a)));
                net.isolate(addrs[a]);
            }
            45..=59 => {
                shared.clock.event("net", format_args!("split {{{}, {}}} from the rest", name(a), name(b)));
                for (i, other) in addrs.iter().enumerate() {
                    if i != a && i != b {
                        net.partition_both(addrs[a], *other);
                        net.partition_both(addrs[b], *other);
                    }
                }
            }
            60..=69 => {
                shared.clock.event("net", format_args!("cut {} -> {} (one way)", name(a), name(b)));
                net.partition(addrs[a], addrs[b]);
            }
            100.. => kill_one(&shared),
            _ => {
                shared.clock.event("net", format_args!("heal all partitions"));
                net.heal_all();
            }
        }
    }
}

/// Kills a running node for 0.3–3 s, unless one is down already (a node
/// killed for good is not restarted, nor a joiner given up on): more often
/// one the operation in progress involves (a joiner, a leaver, a source, a
/// target).
fn kill_one(shared: &Arc<Shared>) {
    let cluster = &shared.cluster;
    let (candidates, involved) = {
        let ops = lock(&shared.ops);
        if ops.killed.is_some() {
            return;
        }
        let candidates: Vec<usize> = cluster
            .nodes()
            .iter()
            .filter(|n| n.running() && ops.doomed != Some(n.index))
            .filter(|n| {
                matches!(cluster.status_of(n.host_id), Some(Status::Normal | Status::Leaving | Status::Joining))
            })
            .map(|n| n.index)
            .collect();
        let involved: Vec<usize> = candidates.iter().copied().filter(|i| ops.involved.contains(i)).collect();
        (candidates, involved)
    };
    let (victim, downtime) = {
        let mut rng = lock(&shared.rng);
        let from = if !involved.is_empty() && rng.gen_bool(0.6) { &involved } else { &candidates };
        let victim = from.get(rng.gen_range(0..from.len().max(1))).copied();
        (victim, Duration::from_millis(rng.gen_range(300..=3_000)))
    };
    let Some(victim) = victim else { return };
    {
        let mut ops = lock(&shared.ops);
        ops.killed = Some(victim);
        ops.stats.kills += 1;
    }
    cluster.kill(victim);
    let shared = Arc::clone(shared);
    tokio::spawn(async move {
        tokio::time::sleep(downtime).await;
        let abandoned = lock(&shared.ops).abandoned.contains(&victim);
        if !abandoned {
            shared.cluster.restart(victim);
        }
        lock(&shared.ops).killed = None;
    });
}

/// Bounds of the final phases.
const UP_WAIT_ROUNDS_MAX: usize = 40;
const HINT_PASSES_MAX: usize = 20;
/// How long the operation in progress may take to finish once healed.
const OPERATOR_WAIT_MAX: Duration = Duration::from_secs(120);
/// Tries of each node's final repair.
const FINAL_REPAIR_TRIES: usize = 3;

/// Restarts every killed node but one killed for good (which the operation
/// in progress removes or replaces).
fn restart_killed(shared: &Arc<Shared>) {
    let doomed = lock(&shared.ops).doomed;
    for node in shared.cluster.nodes() {
        if node.state() == State::Down && doomed != Some(node.index) {
            shared.cluster.restart(node.index);
        }
    }
}

async fn phases(shared: &Arc<Shared>, config: &SimConfig, hints_delivered: &mut usize) -> Result<(), Violation> {
    let cluster = &shared.cluster;
    let p = shared.params.clone();
    let until = tokio::time::Instant::now() + p.workload;
    let nemesis = if config.faults {
        Some(tokio::spawn(nemesis(Arc::clone(shared), until)))
    } else {
        cluster.net.set_faults(calm());
        None
    };
    // The real hint dispatcher runs during the workload, as on a node, so
    // hints are also replayed into a faulty network.
    cluster.set_dispatch(Some(p.hint_period));
    let operator =
        config.lifecycle.then(|| tokio::spawn(lifecycle::operator(Arc::clone(shared), until, config.script.clone())));
    let monitor = config.lifecycle.then(|| tokio::spawn(lifecycle::monitor(Arc::clone(shared), until)));
    let clients: Vec<_> = (0..p.clients).map(|id| tokio::spawn(client(id, Arc::clone(shared), until))).collect();
    for c in clients {
        c.await.map_err(|e| harness_error(format!("a client task failed: {e}")))?;
    }
    let ops = {
        let h = lock(&shared.history);
        h.writes.len() + h.reads.len()
    };
    if ops >= OPS_MAX {
        return Err(harness_error(format!("the clients ran {ops} operations, more than the bound of {OPS_MAX}")));
    }
    if let Some(n) = nemesis {
        n.await.map_err(|e| harness_error(format!("the nemesis failed: {e}")))?;
    }
    if let Some(m) = monitor {
        m.await.map_err(|e| harness_error(format!("the monitor failed: {e}")))??;
    }
    // From here on `replay_once` is driven by hand (one drainer per target).
    cluster.set_dispatch(None);

    // 1. Heal, and let the operation in progress finish.
    cluster.net.heal_all();
    cluster.net.set_faults(calm());
    restart_killed(shared);
    shared.clock.event("net", format_args!("heal: no partitions, no loss"));
    if let Some(operator) = operator {
        match tokio::time::timeout(OPERATOR_WAIT_MAX, operator).await {
            Ok(Ok(result)) => result?,
            Ok(Err(e)) => return Err(harness_error(format!("the operator task failed: {e}"))),
            Err(_) => {
                let involved = lock(&shared.ops).involved.clone();
                return Err(Violation::new(
                    Property::Liveness,
                    format!(
                        "the topology change in progress (nodes {involved:?}) did not finish within {OPERATOR_WAIT_MAX:?} of healing"
                    ),
                ));
            }
        }
        restart_killed(shared);
    }
    // Heartbeats sent before the heal may still time out and convict a
    // peer; wait until every one of them has resolved.
    tokio::time::sleep(harness::HEARTBEAT_TIMEOUT).await;
    let mut rounds = 0;
    while !cluster.converged() {
        if rounds == UP_WAIT_ROUNDS_MAX {
            return Err(Violation::new(
                Property::Liveness,
                format!("views still disagree {rounds} heartbeats after healing: {}", cluster.divergence().join(", ")),
            ));
        }
        tokio::time::sleep(HEARTBEAT_PERIOD).await;
        rounds += 1;
    }
    shared.clock.event("sim", format_args!("every node sees every node up"));

    // 2. Settle, then replay hints until none is pending.
    tokio::time::sleep(harness::coordinator_config().write_timeout * 2).await;
    let mut passes = 0;
    while cluster.pending_hint_bytes() > 0 {
        if passes == HINT_PASSES_MAX {
            let left: Vec<String> = cluster
                .nodes()
                .iter()
                .filter(|n| n.running() && n.hints.total_pending_bytes() > 0)
                .map(|n| {
                    format!("{} holds {} bytes for {:?}", n.name(), n.hints.total_pending_bytes(), n.hints.targets())
                })
                .collect();
            return Err(Violation::new(
                Property::Liveness,
                format!("hints not drained after {passes} replay passes: {}", left.join(", ")),
            ));
        }
        for node in cluster.nodes().iter().filter(|n| n.running()) {
            let delivered = verbs::replay_once(&node.coordinator).await;
            if delivered > 0 {
                shared.clock.event(&node.name(), format_args!("replayed {delivered} hints"));
            }
            *hints_delivered += delivered;
        }
        passes += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    shared.clock.event("sim", format_args!("hints drained ({hints_delivered} replayed)"));

    if let Some(Sabotage::DropReplicaData { node }) = config.sabotage {
        shared.clock.event("sim", format_args!("sabotage: truncating n{node}'s table"));
        let target = cluster.node(node).ok_or_else(|| harness_error(format!("no node {node} to sabotage")))?;
        target.storage.truncate(&table::table_id()).map_err(|e| harness_error(format!("truncate: {e}")))?;
    }
    let exemptions = lock(&shared.ops).exemptions.clone();

    // 3. Hinted handoff delivered every acknowledged write to every replica
    //    (to a quorum of them, with ranges moved under faults).
    let local = local_snapshots(cluster, &p, "after hint replay")?;
    {
        let history = lock(&shared.history);
        checker::check_written_values(&history, &local)?;
        if config.lifecycle && config.faults {
            let quorum = table::REPLICATION_FACTOR as usize / 2 + 1;
            checker::check_quorum_durable(&history, &local, quorum, &exemptions)?;
        } else {
            checker::check_no_lost_writes(&history, &local)?;
        }
    }

    // 4. A repair of every node's primary ranges: then every replica holds every write.
    if config.lifecycle {
        for i in cluster.with_status(Status::Normal) {
            let Some(node) = cluster.node(i) else { continue };
            let mut tries = 0;
            loop {
                tries += 1;
                match lifecycle::repair_node(shared, &node, true).await {
                    Ok(r) => {
                        shared.clock.event(
                            "sim",
                            format_args!("final repair of {}: {} partitions differed", node.name(), r.differing),
                        );
                        break;
                    }
                    Err(e) if tries < FINAL_REPAIR_TRIES => {
                        shared.clock.event("sim", format_args!("final repair of {} failed: {e}", node.name()));
                    }
                    Err(e) => {
                        return Err(Violation::new(
                            Property::Liveness,
                            format!("the final repair of {} failed {tries} times after healing: {e}", node.name()),
                        ))
                    }
                }
            }
        }
        let local = local_snapshots(cluster, &p, "after the final repair")?;
        let history = lock(&shared.history);
        checker::check_written_values(&history, &local)?;
        checker::check_no_lost_writes(&history, &local)?;
    }

    // 5. One ALL read per partition, through a random coordinator.
    let coordinators = cluster.coordinators();
    let mut all = Vec::new();
    for pk in 0..p.partitions {
        let node = coordinators.get(lock(&shared.rng).gen_range(0..coordinators.len().max(1))).copied().unwrap_or(0);
        let rows =
            read(shared, "final", node, pk, ReadShape::default(), Consistency::All, false).await.map_err(|e| {
                Violation::new(Property::Liveness, format!("ALL read pk={pk} via n{node} after healing failed: {e}"))
            })?;
        all.push(Snapshot { source: format!("the ALL read via n{node}"), pk, rows });
    }
    {
        let history = lock(&shared.history);
        checker::check_written_values(&history, &all)?;
        checker::check_no_lost_writes(&history, &all)?;
    }

    // 6. Local storage again, and convergence of the raw data.
    let local = local_snapshots(cluster, &p, "after the ALL reads")?;
    let mut digests = Vec::new();
    for pk in 0..p.partitions {
        for node in cluster.replicas(pk) {
            let storage = &cluster.node(node).ok_or_else(|| harness_error(format!("no node n{node}")))?.storage;
            let raw =
                storage.read_raw(&table::full_read(pk)).map_err(|e| harness_error(format!("n{node} read_raw: {e}")))?;
            digests.push((pk, node, raw.digest()));
        }
    }
    {
        let history = lock(&shared.history);
        checker::check_no_lost_writes(&history, &local)?;
        checker::check_converged(&digests)?;
    }

    // 7. Liveness: QUORUM writes and reads succeed once healed.
    let n = coordinators.len().max(1);
    let via = |i: usize| coordinators.get(i % n).copied().unwrap_or(0);
    for pk in 0..p.partitions {
        for c in 0..p.rows {
            let node = via((pk * p.rows + c) as usize);
            write(shared, "heal", node, &[(pk, c)], Consistency::Quorum).await.map_err(|e| {
                Violation::new(
                    Property::Liveness,
                    format!("QUORUM write pk={pk} c={c} via n{node} after healing failed: {e}"),
                )
            })?;
        }
        let node = via(pk as usize + 1);
        read(shared, "heal", node, pk, ReadShape::default(), Consistency::Quorum, true).await.map_err(|e| {
            Violation::new(Property::Liveness, format!("QUORUM read pk={pk} via n{node} after healing failed: {e}"))
        })?;
    }

    let history = lock(&shared.history);
    checker::check_written_values(&history, &[])?;
    checker::check_read_your_writes(&history, &exemptions)?;
    checker::check_monotonic_reads(&history, &exemptions)?;
    Ok(())
}

/// Every replica's own rows of every partition, read from its storage.
fn local_snapshots(cluster: &SimCluster, p: &Params, when: &str) -> Result<Vec<Snapshot>, Violation> {
    local_snapshots_of(cluster, 0..p.partitions, when)
}

/// `local_snapshots` of the partitions `pks` only.
pub(crate) fn local_snapshots_of(
    cluster: &SimCluster,
    pks: impl Iterator<Item = i32>,
    when: &str,
) -> Result<Vec<Snapshot>, Violation> {
    let mut out = Vec::new();
    for pk in pks {
        let replicas = cluster.replicas(pk);
        if replicas.len() != table::REPLICATION_FACTOR as usize {
            return Err(harness_error(format!(
                "pk={pk} has replicas {replicas:?}, expected {}",
                table::REPLICATION_FACTOR
            )));
        }
        for node in replicas {
            let partition = cluster
                .node(node)
                .ok_or_else(|| harness_error(format!("no node n{node}")))?
                .storage
                .read_partition(&table::full_read(pk))
                .map_err(|e| harness_error(format!("n{node} read_partition: {e}")))?;
            let rows = table::rows(&partition, false)
                .map_err(|e| Violation::new(Property::WrittenValues, format!("n{node} local storage pk={pk}: {e}")))?;
            out.push(Snapshot { source: format!("n{node}'s local storage {when}"), pk, rows });
        }
    }
    Ok(out)
}
