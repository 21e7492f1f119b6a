//! The runner: connects through the scylla driver, creates the schema,
//! prepares the statements (and, with `-mode simplenative`, opens the lean
//! client of `native.rs`, which then carries every operation), runs the warmup
//! and the measured phase, and reports every interval. With `-transport` (TLS,
//! simplenative only) the driver is not used: `control.rs` does its part of
//! the setup through the lean client.
//!
//! A phase spawns `threads` tokio tasks. Each claims the next operation index
//! from a shared counter, so the set of operations done is the same whatever
//! the scheduling (`workload.rs`). In closed-loop mode a task sends as soon as
//! its previous request returned; in fixed-rate mode operation `i` is due at
//! `start + i / rate` and its latency counts from that intended time even when
//! the task was late (coordinated omission corrected), while its service time
//! counts from the actual send; throttle mode caps the rate without catching up.
//!
//! Invariants: nothing recorded during the warmup reaches the results; a failed
//! operation (after its retries) stops the phase unless `keep_going`, and the
//! first failure's text is kept for the error message; with `keep_going` a
//! worker pauses after each failure (`backoff`, up to 100 ms) so a dead node
//! (connection refused: requests fail at once) costs a bounded error rate, not
//! a busy loop, and no pause or retry outlives the deadline; CPU is sampled
//! exactly at the measured phase's start and end. Per operation the worker
//! reads the clock twice (send, answer) and nothing else: the deadline is a
//! flag the reporter loop sets, and the INSERT's values are written straight
//! into the request (`InsertRow`). With `--failed-keys` the key of every
//! operation that did not succeed (`failed_keys::counts`) is recorded, in both
//! phases, into the caller's `FailedKeys`, on the failing path only. SIGINT
//! (Ctrl-C) ends the run as its deadline would (`Interrupt`): what ran is
//! reported. `counter_write`/`counter_read` and `lwt` go through the same
//! phases; `lwt`'s measured phase continues after its warmup's operation
//! indexes (so its inserts meet new keys), and its updates expect the `v` the
//! run last saw for their key (`LwtValues`).

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use scylla::client::execution_profile::ExecutionProfile;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::policies::retry::FallthroughRetryPolicy;
use scylla::serialize::row::{RowSerializationContext, SerializeRow};
use scylla::serialize::writers::RowWriter;
use scylla::serialize::SerializationError;
use scylla::statement::prepared::PreparedStatement;
use scylla::value::{CqlValue, Row};

use crate::control::Control;
use crate::cpu;
use crate::failed_keys::{self, FailedKeys};
use crate::native::{Cas, Native, Stmt};
use crate::report::{IntervalRow, Reporter};
use crate::settings::{Command, Population, Rate, RunLength, SerialConsistency, Settings, Transport, Truncate};
use crate::stats::{OpType, Outcome, Recorder, Shards};
use crate::transport::Tls;
use crate::workload::{self, OpKind};

/// A run that could not start or finish: the text says why.
#[derive(Debug)]
pub struct RunError(pub String);

/// What the measured phase produced.
pub struct Measured {
    pub total: Recorder,
    pub intervals: Vec<IntervalRow>,
    pub elapsed: Duration,
    /// Wall-clock time the measured phase began.
    pub started: SystemTime,
    /// CPU seconds of this client process during the measured phase.
    pub client_cpu_s: Option<f64>,
    /// Threads of the client's runtime.
    pub client_threads: usize,
    /// Cumulative CPU seconds of all `--server-pid` processes at the measured phase's
    /// start and end.
    pub server_cpu: Option<(f64, f64)>,
    /// The first failed operation, when it stopped the run.
    pub stopped_by: Option<String>,
}

/// What runs the setup's statements (schema, truncation): the driver, or with
/// `-transport` the lean client's setup connection.
enum Setup {
    Driver(Box<Session>),
    Native(Control),
}

impl Setup {
    async fn execute(&self, cql: &str) -> Result<(), RunError> {
        match self {
            Setup::Driver(session) => {
                session.query_unpaged(cql.to_string(), &[]).await.map_err(|e| RunError(format!("{cql}: {e}")))?;
            }
            Setup::Native(control) => {
                control.query(cql).await.map_err(RunError)?;
            }
        }
        Ok(())
    }
}

/// The driver's prepared statements (driver mode), as `workload::Statements`.
#[derive(Default)]
struct Prepared {
    write: Option<PreparedStatement>,
    read: Option<PreparedStatement>,
    update: Option<PreparedStatement>,
    delete: Option<PreparedStatement>,
}

/// What [`run`] sets up: the setup's connection, the driver's prepared
/// statements (driver mode) and the lean client (simplenative).
type Connected = (Setup, Prepared, Option<Native>);

/// Everything the workers share during one run.
struct Engine {
    settings: Settings,
    setup: Setup,
    /// The driver's statements (driver mode; simplenative prepares its own).
    prepared: Prepared,
    population: Population,
    /// `lwt`: the `v` each key is believed to hold (what the last applied update
    /// wrote, or what a refused one reported); a key not here holds the inserted 0.
    lwt_values: LwtValues,
    /// `-mode simplenative`: the lean client the operations go through.
    native: Option<Native>,
    /// `--failed-keys`: where the keys of failed operations are recorded.
    failed_keys: Option<Arc<FailedKeys>>,
    /// Set by SIGINT (Ctrl-C): the run ends as at its deadline.
    interrupt: Arc<Interrupt>,
}

/// SIGINT ends a run early, as its deadline would: no new operation starts, the
/// ones in flight finish (without further retries), and the report, `--json` and
/// `--failed-keys` cover what ran.
#[derive(Default)]
struct Interrupt {
    seen: AtomicBool,
    wake: tokio::sync::Notify,
}

impl Interrupt {
    /// Listens for SIGINT for the rest of the process.
    fn listen(self: &Arc<Self>) {
        let this = Arc::clone(self);
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("shoal stress: interrupted: ending the run and reporting what ran");
                this.seen.store(true, Ordering::SeqCst);
                // A stored permit: the phase loop sees it even if it is not waiting right now.
                this.wake.notify_one();
            }
        });
    }
}

/// Hosts as `host:port` strings for the driver, from `-node` and `-node file=`.
pub fn resolve_hosts(settings: &Settings) -> Result<Vec<String>, RunError> {
    let mut hosts = settings.nodes.hosts.clone();
    if let Some(file) = &settings.nodes.file {
        let text = std::fs::read_to_string(file)
            .map_err(|e| RunError(format!("cannot read node file {}: {e}", file.display())))?;
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            hosts.extend(line.split([',', ' ', '\t']).filter(|h| !h.is_empty()).map(str::to_string));
        }
    }
    if hosts.is_empty() {
        return Err(RunError("no hosts to connect to".to_string()));
    }
    Ok(hosts.into_iter().map(|h| with_port(&h, settings.port)).collect())
}

/// `host` → `host:port`; `host:port` and `[v6]:port` unchanged; a bare IPv6 address is bracketed.
pub fn with_port(host: &str, port: u16) -> String {
    if let Ok(IpAddr::V6(v6)) = host.parse::<IpAddr>() {
        return format!("[{v6}]:{port}");
    }
    if host.contains(':') {
        host.to_string()
    } else {
        format!("{host}:{port}")
    }
}

fn driver_consistency(c: crate::settings::Consistency) -> scylla::statement::Consistency {
    use crate::settings::Consistency as C;
    use scylla::statement::Consistency as D;
    match c {
        C::Any => D::Any,
        C::One => D::One,
        C::Two => D::Two,
        C::Three => D::Three,
        C::Quorum => D::Quorum,
        C::All => D::All,
        C::LocalQuorum => D::LocalQuorum,
        C::EachQuorum => D::EachQuorum,
        C::LocalOne => D::LocalOne,
    }
}

/// Runs the whole benchmark: setup, warmup, measured phase. With `failed_keys`,
/// the keys of the operations that did not succeed are recorded there, also
/// those of a run that then ends with an error.
pub async fn run(
    settings: &Settings,
    reporter: &mut Reporter,
    failed_keys: Option<Arc<FailedKeys>>,
) -> Result<Measured, RunError> {
    let hosts = resolve_hosts(settings)?;
    let (setup, prepared, native) = match &settings.transport {
        None => connect_driver(settings, &hosts).await?,
        Some(transport) => connect_tls(settings, &hosts, transport).await?,
    };
    if let Setup::Native(control) = &setup {
        reporter.note(&format!("TLS: {} (-transport)", control.tls().unwrap_or("?")));
    }
    let engine = Arc::new(Engine {
        settings: settings.clone(),
        setup,
        prepared,
        population: settings.effective_population(),
        lwt_values: LwtValues::default(),
        native,
        failed_keys,
        interrupt: Arc::new(Interrupt::default()),
    });
    engine.interrupt.listen();

    if settings.truncate != Truncate::Never {
        truncate(&engine).await?;
    }
    // `lwt`'s measured phase goes on after the warmup's operations, so its inserts meet new keys.
    let mut first_op = 0;
    if settings.warmup && settings.command != Command::Verify {
        let (ops, time) = warmup_size(settings);
        reporter.note(&format!("warming up: {} operations or {:.1} s, whichever ends first", ops, time.as_secs_f64()));
        let warm = run_phase(&engine, 0, Some(ops), Some(time), None).await?;
        if settings.command == Command::Lwt {
            first_op = warm.ops_claimed;
        }
        if let Some(error) = warm.stopped_by {
            return Err(RunError(format!(
                "the warmup stopped at the first error (use --keep-going to count errors and go on): {error}"
            )));
        }
        if settings.truncate == Truncate::Always {
            truncate(&engine).await?;
        }
    }

    let (max_ops, max_time) = match settings.length {
        RunLength::Ops(n) => (Some(n), None),
        RunLength::Time(d) => (None, Some(d)),
    };
    let client_cpu_0 = cpu::own_cpu_seconds();
    let server_cpu_0 = if settings.server_pids.is_empty() { None } else { cpu::cpu_seconds_of(&settings.server_pids) };
    let phase = run_phase(&engine, first_op, max_ops, max_time, Some(reporter)).await?;
    let client_cpu_1 = cpu::own_cpu_seconds();
    let server_cpu_1 = if settings.server_pids.is_empty() { None } else { cpu::cpu_seconds_of(&settings.server_pids) };
    Ok(Measured {
        total: phase.total,
        intervals: phase.intervals,
        elapsed: phase.elapsed,
        started: phase.started,
        client_cpu_s: client_cpu_0.zip(client_cpu_1).map(|(a, b)| b - a),
        client_threads: settings.runtime_threads(),
        server_cpu: server_cpu_0.zip(server_cpu_1),
        stopped_by: phase.stopped_by,
    })
}

/// The hint after a statement that could not be prepared.
fn prepare_hint(settings: &Settings) -> String {
    let creator = match settings.command {
        Command::CounterRead | Command::CounterWrite => "counter_write",
        Command::Lwt => "lwt",
        _ => "write",
    };
    format!(
        "(does {}.{} exist with {} columns? `shoal stress {creator}` creates it)",
        settings.schema.keyspace,
        workload::table_of(settings.command),
        settings.columns
    )
}

/// Connects through the driver: the schema, the driver's statements and (simplenative)
/// the lean client over the ring the driver read.
async fn connect_driver(settings: &Settings, hosts: &[String]) -> Result<Connected, RunError> {
    let profile = ExecutionProfile::builder()
        .consistency(driver_consistency(settings.consistency))
        // Retries are ours (-K), counted and reported; the driver must not hide any.
        .retry_policy(Arc::new(FallthroughRetryPolicy::new()))
        .request_timeout(Some(Duration::from_secs(12)))
        .build()
        .into_handle();
    let mut builder = SessionBuilder::new().known_nodes(hosts).default_execution_profile_handle(profile);
    if let Some(dc) = &settings.nodes.dc {
        builder = builder.prefer_datacenter(dc.clone());
    }
    if let Some(user) = &settings.user {
        builder = builder.user(user.clone(), settings.password.clone().unwrap_or_default());
    }
    if let Some(n) = settings.connections_per_host {
        builder = builder.pool_size(scylla::client::PoolSize::PerHost(n));
    }
    let session = builder.build().await.map_err(|e| RunError(format!("cannot connect to {}: {e}", hosts.join(","))))?;

    if settings.command.writes() {
        for cql in workload::schema_cql(settings) {
            session.query_unpaged(cql.clone(), &[]).await.map_err(|e| RunError(format!("{cql}: {e}")))?;
        }
        session.await_schema_agreement().await.map_err(|e| RunError(format!("schema agreement: {e}")))?;
    }
    let statements = workload::Statements::of(settings);
    let serial = match settings.serial_consistency {
        SerialConsistency::Serial => scylla::statement::SerialConsistency::Serial,
        SerialConsistency::LocalSerial => scylla::statement::SerialConsistency::LocalSerial,
    };
    let mut prepared = Prepared::default();
    for (cql, slot) in [
        (&statements.write, &mut prepared.write),
        (&statements.read, &mut prepared.read),
        (&statements.update, &mut prepared.update),
        (&statements.delete, &mut prepared.delete),
    ] {
        let Some(cql) = cql else { continue };
        let mut statement = session
            .prepare(cql.clone())
            .await
            .map_err(|e| RunError(format!("cannot prepare `{cql}`: {e}\n{}", prepare_hint(settings))))?;
        if settings.command == Command::Lwt {
            statement.set_serial_consistency(Some(serial));
        }
        // Rows are decoded by the metadata the PREPARE returned, and the
        // server is asked to leave it out of each result (SKIP_METADATA), as
        // the Java driver behind cassandra-stress does for bound statements.
        statement.set_use_cached_result_metadata(true);
        *slot = Some(statement);
    }
    let native = if settings.simple_native {
        Some(Native::connect(&session, settings, statements).await.map_err(RunError)?)
    } else {
        None
    };
    Ok((Setup::Driver(Box::new(session)), prepared, native))
}

/// `-transport`: TLS through the lean client alone (the driver has no TLS in this
/// build): the setup connection creates the schema and reads the ring, then the
/// lean client connects to every node and prepares its statements there.
async fn connect_tls(settings: &Settings, hosts: &[String], transport: &Transport) -> Result<Connected, RunError> {
    let tls = Tls::new(transport).map_err(RunError)?;
    let control = Control::connect(hosts, settings, &tls).await.map_err(RunError)?;
    if settings.command.writes() {
        for cql in workload::schema_cql(settings) {
            control.query(&cql).await.map_err(RunError)?;
        }
        control.await_schema_agreement().await.map_err(|e| RunError(format!("schema agreement: {e}")))?;
    }
    let (nodes, routes) = control.topology(settings).await.map_err(RunError)?;
    let statements = workload::Statements::of(settings);
    let native = Native::open(&nodes, routes, settings, Some(&tls), statements).await.map_err(|e| {
        let hint = if e.contains("cannot prepare") { prepare_hint(settings) } else { String::new() };
        RunError(format!("{e}\n{hint}").trim_end().to_string())
    })?;
    Ok((Setup::Native(control), Prepared::default(), Some(native)))
}

/// The warmup: a quarter of the run up to 50,000 operations, and at most a tenth of
/// the run's time (or 10 s).
fn warmup_size(settings: &Settings) -> (u64, Duration) {
    match settings.length {
        RunLength::Ops(n) => ((n / 4).clamp(1, 50_000), Duration::from_secs(10)),
        RunLength::Time(d) => (50_000, (d / 10).min(Duration::from_secs(10))),
    }
}

async fn truncate(engine: &Engine) -> Result<(), RunError> {
    let settings = &engine.settings;
    engine.setup.execute(&workload::truncate_cql(&settings.schema.keyspace, workload::table_of(settings.command))).await
}

/// The driver's session (driver mode).
fn session(engine: &Engine) -> Result<&Session, String> {
    match &engine.setup {
        Setup::Driver(session) => Ok(session),
        Setup::Native(_) => Err("no driver session (-transport runs go through simplenative)".to_string()),
    }
}

struct PhaseResult {
    /// One past the last operation index claimed and run.
    ops_claimed: u64,
    total: Recorder,
    intervals: Vec<IntervalRow>,
    elapsed: Duration,
    started: SystemTime,
    stopped_by: Option<String>,
}

/// Per-phase shared state.
struct PhaseState {
    next_op: AtomicU64,
    /// The phase's first operation index (0, or after `lwt`'s warmup).
    first_op: u64,
    /// One past the phase's last operation index.
    max_ops: u64,
    start: Instant,
    deadline: Option<Instant>,
    /// Set at the first error (without `keep_going`) and at the deadline: workers stop.
    stop: AtomicBool,
    first_error: Mutex<Option<String>>,
    shards: Shards,
    /// Throttle mode: the next free send slot.
    throttle_next: Mutex<Instant>,
}

async fn run_phase(
    engine: &Arc<Engine>,
    first_op: u64,
    max_ops: Option<u64>,
    max_time: Option<Duration>,
    mut reporter: Option<&mut Reporter>,
) -> Result<PhaseResult, RunError> {
    let settings = &engine.settings;
    let start = Instant::now();
    let started = SystemTime::now();
    if let Some(r) = reporter.as_deref_mut() {
        r.start_measured(started);
    }
    let mixed = settings.command == Command::Mixed;
    let shard_count = (cpu::available_cores() * 4).min(settings.threads as usize).max(1);
    let state = Arc::new(PhaseState {
        next_op: AtomicU64::new(first_op),
        first_op,
        max_ops: max_ops.map_or(u64::MAX, |n| first_op.saturating_add(n)),
        start,
        deadline: max_time.map(|d| start + d),
        stop: AtomicBool::new(engine.interrupt.seen.load(Ordering::SeqCst)),
        first_error: Mutex::new(None),
        shards: Shards::new(shard_count, mixed),
        throttle_next: Mutex::new(start),
    });
    let mut workers = tokio::task::JoinSet::new();
    for worker in 0..settings.threads as usize {
        let engine = Arc::clone(engine);
        let state = Arc::clone(&state);
        workers.spawn(async move { worker_loop(&engine, &state, worker).await });
    }

    let mut total = if mixed { Recorder::with_types() } else { Recorder::new() };
    let mut intervals = Vec::new();
    let interval = settings.interval;
    let mut next_tick = start + interval;
    let mut last_tick = start;
    let mut panicked = None;
    // The progress bar is redrawn between interval lines too, from the operations claimed.
    let progress = match (max_ops, reporter.as_deref()) {
        (Some(planned), Some(r)) if r.wants_progress() => Some(planned),
        _ => None,
    };
    let mut next_progress = start + PROGRESS_EVERY;
    let mut deadline = state.deadline;
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(deadline.unwrap_or(start).into()), if deadline.is_some() => {
                state.stop.store(true, Ordering::Relaxed);
                deadline = None;
            }
            _ = engine.interrupt.wake.notified() => {
                state.stop.store(true, Ordering::Relaxed);
            }
            _ = tokio::time::sleep_until(next_tick.into()) => {
                let now = Instant::now();
                let drained = state.shards.drain();
                total.merge(&drained);
                if let Some(r) = reporter.as_deref_mut() {
                    intervals.push(r.interval(&drained, &total, now - last_tick, now - start, max_ops));
                }
                last_tick = now;
                // A late wake-up (an overloaded machine) skips ticks instead of printing a burst of empty intervals.
                while next_tick <= now {
                    next_tick += interval;
                }
                next_progress = now + PROGRESS_EVERY;
            }
            _ = tokio::time::sleep_until(next_progress.into()), if progress.is_some() => {
                let now = Instant::now();
                if let (Some(r), Some(planned)) = (reporter.as_deref_mut(), progress) {
                    let claimed = (state.next_op.load(Ordering::Relaxed) - first_op).min(planned);
                    r.show_progress(claimed, planned, now - start);
                }
                next_progress = now + PROGRESS_EVERY;
            }
            joined = workers.join_next() => match joined {
                None => break,
                Some(Ok(())) => {}
                Some(Err(e)) => {
                    state.stop.store(true, Ordering::Relaxed);
                    panicked = Some(e.to_string());
                }
            }
        }
    }
    let now = Instant::now();
    let drained = state.shards.drain();
    total.merge(&drained);
    if let Some(r) = reporter {
        // A last partial interval, unless it is an empty sliver (the deadline fell on a tick).
        if drained.ops + drained.errors > 0 || now - last_tick >= interval / 10 {
            intervals.push(r.interval(&drained, &total, now - last_tick, now - start, max_ops));
        }
        r.finish_progress();
    }
    if let Some(p) = panicked {
        return Err(RunError(format!("a worker task failed: {p}")));
    }
    let stopped_by = state.first_error.lock().unwrap_or_else(|p| p.into_inner()).take();
    let ops_claimed = state.next_op.load(Ordering::Relaxed).min(state.max_ops);
    Ok(PhaseResult { ops_claimed, total, intervals, elapsed: now - start, started, stopped_by })
}

/// How often the progress bar is redrawn.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// How early a fixed-rate request may be sent, to absorb the timer's 1 ms granularity.
const TIMER_SLACK: Duration = Duration::from_millis(1);

/// The pause after the `failures`-th consecutive failure of a worker (or before the
/// `failures`-th retry): 1 ms doubling up to 100 ms, so a dead node costs a bounded
/// error rate (at most `threads` × 10 per second once it is down) instead of a busy loop.
pub fn backoff(failures: u32) -> Duration {
    Duration::from_millis(1u64 << failures.saturating_sub(1).min(7)).min(MAX_BACKOFF)
}

pub const MAX_BACKOFF: Duration = Duration::from_millis(100);

/// Sleeps `pause`, but not past the phase's deadline.
async fn pause(state: &PhaseState, pause: Duration) {
    let mut until = Instant::now() + pause;
    if let Some(deadline) = state.deadline {
        until = until.min(deadline);
    }
    tokio::time::sleep_until(until.into()).await;
}

async fn worker_loop(engine: &Engine, state: &PhaseState, worker: usize) {
    let settings = &engine.settings;
    let mut buffer = Vec::new();
    let mut failures = 0u32;
    loop {
        if state.stop.load(Ordering::Relaxed) {
            return;
        }
        let op = state.next_op.fetch_add(1, Ordering::Relaxed);
        if op >= state.max_ops {
            return;
        }
        let intended = match settings.rate {
            Rate::Closed => None,
            Rate::Fixed(rate) => Some(state.start + Duration::from_secs_f64((op - state.first_op) as f64 / rate)),
            Rate::Throttle(rate) => {
                let mut next = state.throttle_next.lock().unwrap_or_else(|p| p.into_inner());
                let slot = (*next).max(Instant::now());
                *next = slot + Duration::from_secs_f64(1.0 / rate);
                Some(slot)
            }
        };
        if let (Some(due), Some(deadline)) = (intended, state.deadline) {
            if due >= deadline {
                return;
            }
        }
        if let Some(due) = intended {
            // Tokio's timer wakes on the next whole millisecond; aim a little early so the
            // timer's lateness is not counted as server latency (see `from` below).
            tokio::time::sleep_until(due.checked_sub(TIMER_SLACK).unwrap_or(due).into()).await;
        }
        // Duration runs end when the reporter loop sets `stop` at the deadline: no clock read here.
        if state.stop.load(Ordering::Relaxed) {
            return;
        }
        let sent = Instant::now();
        let (op_type, outcome, retries, error) = execute(engine, state, op, &mut buffer).await;
        let done = Instant::now();
        // A request sent early (timer slack) counts from its send, never from a later instant.
        let from = match settings.rate {
            Rate::Fixed(_) => intended.map_or(sent, |due| due.min(sent)),
            _ => sent,
        };
        let latency_us = done.saturating_duration_since(from).as_micros() as u64;
        let service_us = done.saturating_duration_since(sent).as_micros() as u64;
        state.shards.record(worker, op_type, outcome, latency_us, service_us, retries);
        match error {
            None => failures = 0,
            Some(error) if !settings.keep_going => {
                let mut first = state.first_error.lock().unwrap_or_else(|p| p.into_inner());
                if first.is_none() {
                    *first = Some(error);
                }
                state.stop.store(true, Ordering::Relaxed);
                return;
            }
            Some(_) => {
                failures = failures.saturating_add(1);
                pause(state, backoff(failures)).await;
            }
        }
    }
}

/// Runs operation `op` with its retries (each after a `backoff`; none once the phase
/// is over): its type, the outcome, the retries spent, and the error text if it
/// failed for good.
async fn execute(
    engine: &Engine,
    state: &PhaseState,
    op: u64,
    buffer: &mut Vec<u8>,
) -> (OpType, Outcome, u32, Option<String>) {
    let settings = &engine.settings;
    let (kind, index) = match settings.command {
        Command::Lwt => {
            let (kind, key_op) = workload::lwt_plan(settings.lwt_ratio, settings.seed, state.first_op, op);
            (kind, workload::lwt_key_index(engine.population, key_op))
        }
        _ => (workload::op_kind(settings, op), workload::key_index(engine.population, settings.seed, op)),
    };
    let op_type = match kind {
        OpKind::Write | OpKind::CounterAdd | OpKind::LwtInsert | OpKind::LwtUpdate | OpKind::Delete => OpType::Write,
        OpKind::Read | OpKind::Verify | OpKind::CounterRead => OpType::Read,
    };
    let key = workload::key(index);
    let mut attempt = 0;
    loop {
        let result = match kind {
            OpKind::Write => write(engine, op, attempt, index, &key, buffer).await,
            OpKind::Read | OpKind::CounterRead => read(engine, op, attempt, &key, None).await,
            OpKind::Verify => read(engine, op, attempt, &key, Some((index, &mut *buffer))).await,
            OpKind::CounterAdd => counter_add(engine, op, attempt, &key, buffer).await,
            OpKind::LwtInsert => lwt_insert(engine, op, attempt, index, &key, buffer).await,
            OpKind::LwtUpdate => lwt_update(engine, op, attempt, index, &key).await,
            OpKind::Delete => delete(engine, &key).await,
        };
        let over = || state.stop.load(Ordering::Relaxed) || state.deadline.is_some_and(|d| Instant::now() >= d);
        match result {
            Ok(outcome) => {
                if let Some(failed) = &engine.failed_keys {
                    if failed_keys::counts(kind, outcome) {
                        failed.record(index);
                    }
                }
                return (op_type, outcome, attempt, None);
            }
            Err(_) if attempt < settings.retries && !over() => {
                attempt += 1;
                pause(state, backoff(attempt)).await;
            }
            Err(e) => {
                let what = match kind {
                    OpKind::Write => "write",
                    OpKind::Read => "read",
                    OpKind::Verify => "verify read",
                    OpKind::CounterAdd => "counter add",
                    OpKind::CounterRead => "counter read",
                    OpKind::LwtInsert => "INSERT IF NOT EXISTS",
                    OpKind::LwtUpdate => "UPDATE IF",
                    OpKind::Delete => "delete",
                };
                if let Some(failed) = &engine.failed_keys {
                    failed.record(index);
                }
                let tries = if attempt > 0 { format!(" after {} tries", attempt + 1) } else { String::new() };
                return (
                    op_type,
                    Outcome::Failed,
                    attempt,
                    Some(format!("{what} of key {}{tries}: {e}", String::from_utf8_lossy(&key))),
                );
            }
        }
    }
}

async fn write(
    engine: &Engine,
    op: u64,
    attempt: u32,
    index: u64,
    key: &[u8],
    buffer: &mut Vec<u8>,
) -> Result<Outcome, String> {
    let settings = &engine.settings;
    workload::row_values(settings.seed, index, settings.columns, settings.column_size, buffer);
    if let Some(native) = &engine.native {
        native.write(op, attempt, key, buffer, settings.column_size as usize).await?;
        return Ok(Outcome::Written);
    }
    let Some(insert) = &engine.prepared.write else { return Err("no INSERT statement prepared".to_string()) };
    let row = InsertRow { key, values: buffer, size: settings.column_size as usize };
    session(engine)?.execute_unpaged(insert, row).await.map_err(|e| e.to_string())?;
    Ok(Outcome::Written)
}

/// `mixed` with `delete=`: deletes the key's row (driver mode only).
async fn delete(engine: &Engine, key: &[u8]) -> Result<Outcome, String> {
    let Some(delete) = &engine.prepared.delete else { return Err("no DELETE prepared".to_string()) };
    session(engine)?.execute_unpaged(delete, (key,)).await.map_err(|e| e.to_string())?;
    Ok(Outcome::Written)
}

/// `counter_write`: adds each column's increment (`add=`) to the counters of `key`.
async fn counter_add(
    engine: &Engine,
    op: u64,
    attempt: u32,
    key: &[u8],
    buffer: &mut Vec<u8>,
) -> Result<Outcome, String> {
    let settings = &engine.settings;
    let increments =
        (0..settings.columns).map(|c| workload::counter_increment(settings.counter_add, settings.seed, op, c));
    if let Some(native) = &engine.native {
        buffer.clear();
        for n in increments {
            buffer.extend_from_slice(&n.to_be_bytes());
        }
        native.counter_add(op, attempt, key, buffer).await?;
        return Ok(Outcome::Written);
    }
    let Some(update) = &engine.prepared.write else { return Err("no counter UPDATE prepared".to_string()) };
    let mut values: Vec<CqlValue> = increments.map(|n| CqlValue::Counter(scylla::value::Counter(n))).collect();
    values.push(CqlValue::Blob(key.to_vec()));
    session(engine)?.execute_unpaged(update, values).await.map_err(|e| e.to_string())?;
    Ok(Outcome::Written)
}

/// The `v` an `lwt` insert writes.
const LWT_FIRST_VALUE: i64 = 0;

/// `lwt`'s believed values of `v` per key index, in shards (`Engine::lwt_values`).
struct LwtValues {
    shards: Vec<Mutex<std::collections::HashMap<u64, i64>>>,
}

impl Default for LwtValues {
    fn default() -> Self {
        LwtValues { shards: (0..64).map(|_| Mutex::new(std::collections::HashMap::new())).collect() }
    }
}

impl LwtValues {
    fn shard(&self, index: u64) -> std::sync::MutexGuard<'_, std::collections::HashMap<u64, i64>> {
        let shard = &self.shards[(workload::mix64(index) % self.shards.len() as u64) as usize];
        shard.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn get(&self, index: u64) -> i64 {
        self.shard(index).get(&index).copied().unwrap_or(LWT_FIRST_VALUE)
    }

    fn set(&self, index: u64, value: i64) {
        self.shard(index).insert(index, value);
    }
}

/// `lwt`: `INSERT ... IF NOT EXISTS` of a new key (`v` = 0 and the columns' values).
async fn lwt_insert(
    engine: &Engine,
    op: u64,
    attempt: u32,
    index: u64,
    key: &[u8],
    buffer: &mut Vec<u8>,
) -> Result<Outcome, String> {
    let settings = &engine.settings;
    workload::row_values(settings.seed, index, settings.columns, settings.column_size, buffer);
    let size = settings.column_size as usize;
    let first = LWT_FIRST_VALUE.to_be_bytes();
    let cas = if let Some(native) = &engine.native {
        let cells = || [key, &first[..]].into_iter().chain(buffer.chunks(size));
        native.cas(op, attempt, Stmt::Insert, key, cells).await?
    } else {
        let Some(insert) = &engine.prepared.write else { return Err("no LWT INSERT prepared".to_string()) };
        let mut values = vec![CqlValue::Blob(key.to_vec()), CqlValue::BigInt(LWT_FIRST_VALUE)];
        values.extend(buffer.chunks(size).map(|c| CqlValue::Blob(c.to_vec())));
        driver_cas(engine, insert, values).await?
    };
    Ok(if cas.applied { Outcome::Applied } else { Outcome::NotApplied })
}

/// `lwt`: `UPDATE ... SET v = expected + 1 WHERE key = ? IF v = expected`, `expected`
/// what this run believes the key holds; a refusal that reports the row's `v`
/// corrects the belief.
async fn lwt_update(engine: &Engine, op: u64, attempt: u32, index: u64, key: &[u8]) -> Result<Outcome, String> {
    let expected = engine.lwt_values.get(index);
    let next = expected.wrapping_add(1);
    let cas = if let Some(native) = &engine.native {
        let (next_b, expected_b) = (next.to_be_bytes(), expected.to_be_bytes());
        let cells = || [&next_b[..], key, &expected_b[..]].into_iter();
        native.cas(op, attempt, Stmt::Update, key, cells).await?
    } else {
        let Some(update) = &engine.prepared.update else { return Err("no LWT UPDATE prepared".to_string()) };
        let values = vec![CqlValue::BigInt(next), CqlValue::Blob(key.to_vec()), CqlValue::BigInt(expected)];
        driver_cas(engine, update, values).await?
    };
    if cas.applied {
        engine.lwt_values.set(index, next);
        Ok(Outcome::Applied)
    } else {
        if let Some(current) = cas.current {
            engine.lwt_values.set(index, current);
        }
        Ok(Outcome::NotApplied)
    }
}

/// A conditional statement through the driver: `[applied]` and `v` from its row.
async fn driver_cas(engine: &Engine, statement: &PreparedStatement, values: Vec<CqlValue>) -> Result<Cas, String> {
    let result = session(engine)?.execute_unpaged(statement, values).await.map_err(|e| e.to_string())?;
    let rows = result.into_rows_result().map_err(|e| e.to_string())?;
    let v = rows.column_specs().iter().position(|c| c.name() == "v");
    let row = rows
        .maybe_first_row::<Row>()
        .map_err(|e| e.to_string())?
        .ok_or_else(|| "a conditional statement answered no row".to_string())?;
    let applied = match row.columns.first() {
        Some(Some(CqlValue::Boolean(b))) => *b,
        _ => return Err("a conditional statement's first column is not [applied]".to_string()),
    };
    let current = v.and_then(|i| row.columns.get(i)).and_then(|cell| match cell {
        Some(CqlValue::BigInt(n)) => Some(*n),
        _ => None,
    });
    Ok(Cas { applied, current })
}

/// The bound values of the INSERT (`key`, then `values` cut into columns of `size`
/// bytes), written straight into the request: no per-operation vector of slices and
/// no per-value type dispatch (every column of the table is a blob).
struct InsertRow<'a> {
    key: &'a [u8],
    values: &'a [u8],
    size: usize,
}

impl SerializeRow for InsertRow<'_> {
    fn serialize(
        &self,
        ctx: &RowSerializationContext<'_>,
        writer: &mut RowWriter<'_>,
    ) -> Result<(), SerializationError> {
        let expected = 1 + self.values.len() / self.size;
        if ctx.columns().len() != expected {
            return Err(SerializationError::new(BindMismatch { expected, prepared: ctx.columns().len() }));
        }
        for value in std::iter::once(self.key).chain(self.values.chunks(self.size)) {
            writer.make_cell_writer().set_value(value).map_err(SerializationError::new)?;
        }
        Ok(())
    }

    fn is_empty(&self) -> bool {
        false
    }
}

/// The prepared INSERT has another number of columns than the run writes.
#[derive(Debug)]
struct BindMismatch {
    expected: usize,
    prepared: usize,
}

impl std::fmt::Display for BindMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the INSERT binds {} values, the run writes {}", self.prepared, self.expected)
    }
}

impl std::error::Error for BindMismatch {}

/// A read; with `expect` (verify) the row's values are compared with the ones
/// the write computed.
async fn read(
    engine: &Engine,
    op: u64,
    attempt: u32,
    key: &[u8],
    expect: Option<(u64, &mut Vec<u8>)>,
) -> Result<Outcome, String> {
    let settings = &engine.settings;
    if let Some(native) = &engine.native {
        let rows = native.read(op, attempt, key).await?;
        let Some((index, buffer)) = expect else {
            return Ok(if rows.rows_count == 0 { Outcome::Missing } else { Outcome::Read });
        };
        let Some(row) = rows.iter().next().transpose().map_err(|e| e.to_string())? else {
            return Ok(Outcome::Missing);
        };
        return Ok(check_row(settings, index, buffer, row.iter().map(Option::as_deref)));
    }
    let Some(select) = &engine.prepared.read else { return Err("no SELECT statement prepared".to_string()) };
    let result = session(engine)?.execute_unpaged(select, (key,)).await.map_err(|e| e.to_string())?;
    let rows = result.into_rows_result().map_err(|e| e.to_string())?;
    let Some((index, buffer)) = expect else {
        return Ok(if rows.rows_num() == 0 { Outcome::Missing } else { Outcome::Read });
    };
    let Some(row) = rows.maybe_first_row::<Row>().map_err(|e| e.to_string())? else {
        return Ok(Outcome::Missing);
    };
    // A value of another type than blob is a wrong value.
    let cells = row.columns.iter().map(|cell| match cell {
        Some(CqlValue::Blob(b)) => Some(b.as_slice()),
        _ => None,
    });
    Ok(check_row(settings, index, buffer, cells))
}

/// Verify: whether `cells` (null as `None`) are exactly the values the write of
/// key `index` computed (recomputed into `buffer`).
fn check_row<'a>(
    settings: &Settings,
    index: u64,
    buffer: &mut Vec<u8>,
    cells: impl ExactSizeIterator<Item = Option<&'a [u8]>>,
) -> Outcome {
    workload::row_values(settings.seed, index, settings.columns, settings.column_size, buffer);
    let expected = buffer.chunks(settings.column_size as usize);
    let same = cells.len() == settings.columns as usize && cells.zip(expected).all(|(got, want)| got == Some(want));
    if same {
        Outcome::Verified
    } else {
        Outcome::Mismatched
    }
}
