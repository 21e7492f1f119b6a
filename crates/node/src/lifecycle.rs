//! Node lifecycle operations that move data (issue 21). Today: `rebuild`
//! (nodetool rebuild): stream every range this node replicates from another
//! live replica (`cluster::stream`), for a node that missed writes beyond the
//! hint window, lost its disk, or joined a new data center; and `repair`
//! (nodetool repair): replicas compare hashes of each range's slices, then of
//! the partitions of the slices that differ, and only the partitions that
//! differ are pushed and merged (`cluster::repair`); and
//! `cleanup` (nodetool cleanup): drop the data of ranges this node no longer
//! replicates.
//! `bootstrap` (a new node streams the ranges it will own) and
//! `decommission` (the nodes taking over a leaving node's ranges pull them)
//! and `removenode` (the same for a dead node, from its surviving replicas)
//! use the same sessions. Which ranges move from where to where is planned
//! by `cluster::movement` (shared with the simulator); this module runs the
//! plans.
//!
//! Invariants:
//! - One data-moving operation at a time on a node; a second is refused
//!   with a message naming the one running, except that a repair started by
//!   the schedule (`auto_repair`) is stopped at its next range and the new
//!   operation runs after it.
//! - A range with no live replica but this node fails the operation, naming
//!   the range and its replicas (Cassandra's "Unable to find sufficient
//!   sources for streaming range"); the ranges that did have a source are
//!   still streamed, so a retry has less to do.
//! - A failed session is tried again (resuming, `cluster::stream`) before the
//!   operation gives up on it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use cluster::gossip::Gossip;
use cluster::stream::{Receiver, StreamRegistry, StreamStats};
use cluster::view::host;
use cluster::wire;
use cluster::{ClusterView, Coordinator};
use cql_server::schema::{Schema, SchemaService};
use net::{TcpTransport, Transport, Verb};
use serde_json::{json, Value as Json};
use types::schema::{KeyspaceDef, Replication};
use uuid::Uuid;

/// Tries of one session before the operation gives up on it.
const SESSION_TRIES: usize = 3;
/// How long a joining node waits for the schema to agree with the NORMAL nodes.
const SCHEMA_WAIT: std::time::Duration = std::time::Duration::from_secs(60);
/// How long a joining node waits, after announcing its tokens, before it
/// streams: every coordinator must have seen its pending ranges by then
/// (Cassandra's ring delay, 30 s; gossip converges in about a second here).
const RING_DELAY: std::time::Duration = std::time::Duration::from_secs(3);
/// Marks a decommissioned data directory: the node refuses to start on it.
pub const DECOMMISSIONED: &str = "decommissioned";
/// How long a node that left keeps gossiping LEFT before it answers.
const LEFT_DELAY: std::time::Duration = std::time::Duration::from_secs(2);
/// A pull may stream a whole range set: bounded generously.
const PULL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3600);
/// What one message costs on the wire beside its payload (frame header and trailer).
const FRAME_BYTES: u64 = (net::frame::HEADER_LEN + net::frame::TRAILER_LEN) as u64;
/// How long a replica may take to record a finished repair.
const REPAIRED_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

pub struct Lifecycle {
    pub coordinator: Arc<Coordinator<TcpTransport>>,
    /// This node's gossip state (status changes: LEAVING, LEFT).
    pub gossip: Arc<Gossip>,
    pub schema: Arc<SchemaService>,
    pub registry: Arc<StreamRegistry>,
    /// Where received files wait to be ingested.
    pub spool: PathBuf,
    /// The operation running, if any.
    running: Mutex<Option<String>>,
    /// Set while another operation waits for a scheduled repair to stop.
    preempt: AtomicBool,
    /// The last `REPAIR_HISTORY` repairs run on this node, oldest first
    /// (`repair_admin list`).
    repairs: Mutex<std::collections::VecDeque<Json>>,
    /// Where this node's bootstrap stands (`bootstrap resume`).
    bootstrap_state: tokio::sync::watch::Sender<BootstrapState>,
}

/// Where a node's bootstrap stands (nodetool's bootstrap states).
#[derive(Clone, Debug, PartialEq)]
pub enum BootstrapState {
    /// Streaming (or waiting to).
    InProgress,
    /// Streaming failed: the node stays JOINING until `bootstrap resume` (or
    /// a restart) resumes it.
    Failed(String),
    /// The node joined (or never had to bootstrap); the report of the
    /// bootstrap that finished, if this process ran one.
    Completed(Option<Json>),
}

impl BootstrapState {
    pub fn name(&self) -> &'static str {
        match self {
            BootstrapState::InProgress => "IN_PROGRESS",
            BootstrapState::Failed(_) => "FAILED",
            BootstrapState::Completed(_) => "COMPLETED",
        }
    }
}

/// Node-local key: the ranges of each table this node's bootstrap has
/// streamed (`table:start:end` entries joined by `,`). A resumed bootstrap
/// (`bootstrap resume`, or a restart) skips them; cleared once it joined.
pub const BOOTSTRAP_STREAMED: &str = "bootstrap_streamed";

/// A (table, range) a bootstrap streamed.
type Streamed = std::collections::BTreeSet<(Uuid, i64, i64)>;

fn parse_streamed(value: &str) -> Streamed {
    value
        .split(',')
        .filter_map(|entry| {
            let mut parts = entry.splitn(3, ':');
            let table = parts.next()?.parse().ok()?;
            Some((table, parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
        })
        .collect()
}

/// What a repair started by the schedule runs as (other operations preempt it).
const SCHEDULED_REPAIR: &str = "scheduled repair";
/// How long an operation waits for a scheduled repair to stop at its next range.
const PREEMPT_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

/// Repairs `repair_admin list` remembers.
const REPAIR_HISTORY: usize = 100;

/// Who started a repair (`repair_admin list`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RepairTrigger {
    /// `shoal tool repair`.
    Operator,
    /// The automatic schedule (`auto_repair`).
    Schedule,
}

/// Which ranges a repair compares (`shoal tool repair`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RepairMode {
    /// The ranges some replica wrote since every replica last agreed
    /// (`storage::Storage::repair_states`); the others are only recorded as
    /// repaired again. The default.
    Incremental,
    /// Every range, each replica's table compacted first (`--full`).
    Full,
    /// Only the ranges every replica says are repaired, compared without
    /// repairing anything (`--validate`): any difference there means
    /// repaired data went out of sync, and a full repair is due.
    Validate,
}

impl RepairMode {
    fn name(self) -> &'static str {
        match self {
            RepairMode::Incremental => "incremental",
            RepairMode::Full => "full",
            RepairMode::Validate => "validate",
        }
    }
}

/// A range a repair covers: its bounds, its replicas, and each replica's
/// state of it (`RepairStateRsp`).
struct Candidate {
    range: (i64, i64),
    replicas: Vec<Uuid>,
    states: Vec<storage::RangeState>,
}

impl Candidate {
    fn repaired(&self) -> bool {
        self.states.len() == self.replicas.len() && self.states.iter().all(|s| s.repaired)
    }
}

/// An operation that streamed: its sessions, what moved, how long and how fast.
fn stream_report(operation: &str, sessions: Vec<Json>, totals: &StreamStats, started: Instant) -> Json {
    let seconds = started.elapsed().as_secs_f64();
    json!({
        "operation": operation,
        "sessions": sessions,
        "files": totals.files,
        "bytes": totals.bytes,
        "entries": totals.entries,
        "seconds": seconds,
        "mb_per_s": if seconds > 0.0 { totals.bytes as f64 / seconds / 1e6 } else { 0.0 },
    })
}

/// One stream session of an operation, as its report lists it.
fn session_report(
    ks: &KeyspaceDef,
    table: &types::schema::TableDef,
    target: &cluster::Endpoint,
    pull: &wire::StreamPull,
    stats: &StreamStats,
) -> Json {
    json!({
        "keyspace": ks.name,
        "table": table.name,
        "source": pull.source.ip().to_string(),
        "target": target.address().to_string(),
        "ranges": pull.ranges.len(),
        "session": pull.session,
        "files": stats.files,
        "bytes": stats.bytes,
        "entries": stats.entries,
    })
}

/// Runs `futures` concurrently on this task; their outputs in order.
async fn join_all<F: std::future::Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<std::pin::Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut out: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, slot) in futures.iter_mut().zip(out.iter_mut()) {
            if slot.is_none() {
                match future.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => *slot = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    out.into_iter().flatten().collect()
}

/// Clears the running operation when the operation ends, however it ends.
struct Running<'a>(&'a Mutex<Option<String>>);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}

impl Lifecycle {
    pub fn new(
        coordinator: Arc<Coordinator<TcpTransport>>,
        gossip: Arc<Gossip>,
        schema: Arc<SchemaService>,
        registry: Arc<StreamRegistry>,
        spool: PathBuf,
    ) -> Lifecycle {
        Lifecycle {
            coordinator,
            gossip,
            schema,
            registry,
            spool,
            running: Mutex::new(None),
            preempt: AtomicBool::new(false),
            repairs: Mutex::new(std::collections::VecDeque::new()),
            bootstrap_state: tokio::sync::watch::Sender::new(BootstrapState::Completed(None)),
        }
    }

    /// Where this node's bootstrap stands.
    pub fn bootstrap_state(&self) -> BootstrapState {
        self.bootstrap_state.borrow().clone()
    }

    pub fn set_bootstrap_state(&self, state: BootstrapState) {
        self.bootstrap_state.send_replace(state);
    }

    /// Waits until a failed bootstrap is asked to resume (`resume_bootstrap`).
    pub async fn bootstrap_resumed(&self) {
        let mut rx = self.bootstrap_state.subscribe();
        let _ = rx.wait_for(|s| *s == BootstrapState::InProgress).await;
    }

    /// `bootstrap resume`: resumes a failed bootstrap (the ranges already
    /// streamed are not streamed again) and answers once the node joined,
    /// with the report of the resumed bootstrap, or its failure.
    pub async fn resume_bootstrap(&self) -> Result<Json, String> {
        let mut rx = self.bootstrap_state.subscribe();
        let resumed = self.bootstrap_state.send_if_modified(|s| match s {
            BootstrapState::Failed(_) => {
                *s = BootstrapState::InProgress;
                true
            }
            _ => false,
        });
        if !resumed {
            return Err(match self.bootstrap_state() {
                BootstrapState::InProgress => "Cannot resume bootstrap: it is in progress".to_string(),
                _ => "Resuming bootstrap is requested, but the node is already bootstrapped.".to_string(),
            });
        }
        rx.mark_unchanged();
        let ended = rx
            .wait_for(|s| !matches!(s, BootstrapState::InProgress))
            .await
            .map_err(|_| "the node is shutting down".to_string())?
            .clone();
        match ended {
            BootstrapState::Completed(report) => Ok(report.unwrap_or(Json::Null)),
            BootstrapState::Failed(e) => Err(e),
            BootstrapState::InProgress => Err("bootstrap state lost".to_string()),
        }
    }

    /// The (table, range)s this node's bootstrap streamed before.
    fn streamed(&self) -> Streamed {
        self.coordinator.storage.local_get(BOOTSTRAP_STREAMED).map(|v| parse_streamed(&v)).unwrap_or_default()
    }

    /// Adds `ranges` of `table` to what this node's bootstrap streamed.
    async fn record_streamed(&self, table: Uuid, ranges: &[(i64, i64)]) -> Result<(), String> {
        let storage = Arc::clone(&self.coordinator.storage);
        let entries: Vec<String> = ranges.iter().map(|(s, e)| format!("{table}:{s}:{e}")).collect();
        tokio::task::spawn_blocking(move || {
            storage.local_update(BOOTSTRAP_STREAMED, |old| {
                let mut all: Vec<&str> = old.into_iter().filter(|o| !o.is_empty()).collect();
                all.extend(entries.iter().map(String::as_str));
                all.join(",")
            })
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("cannot record the ranges streamed: {e}"))
    }

    /// This node's side of the stream sessions it receives.
    fn receiver(&self) -> Receiver<'_, TcpTransport> {
        Receiver {
            transport: &self.coordinator.transport,
            storage: &self.coordinator.storage,
            registry: &self.registry,
            spool: &self.spool,
        }
    }

    /// Claims the node for `what`. A scheduled repair gives way: it is asked
    /// to stop at its next range (`preempt`) and waited for, up to
    /// `PREEMPT_WAIT`; any other operation running refuses `what`.
    async fn begin(&self, what: &str) -> Result<Running<'_>, String> {
        let deadline = Instant::now() + PREEMPT_WAIT;
        loop {
            {
                let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
                match running.as_deref() {
                    None => {
                        *running = Some(what.to_string());
                        self.preempt.store(false, Ordering::SeqCst);
                        return Ok(Running(&self.running));
                    }
                    Some(SCHEDULED_REPAIR) if what != SCHEDULED_REPAIR && Instant::now() < deadline => {
                        self.preempt.store(true, Ordering::SeqCst);
                    }
                    Some(other) => return Err(format!("Cannot start {what}: {other} is already running on this node")),
                }
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }

    /// Streams every range of the user keyspaces (or of `keyspace`) that this
    /// node replicates from another live replica, preferring one in
    /// `source_dc` (else the local data center). Returns what moved, per
    /// keyspace and table.
    pub async fn rebuild(&self, keyspace: Option<&str>, source_dc: Option<&str>) -> Result<Json, String> {
        let _running = self.begin("rebuild").await?;
        let started = Instant::now();
        let view = self.coordinator.view.snapshot();
        let schema = self.schema.snapshot();
        if let Some(name) = keyspace {
            if Schema::is_local(name) || !schema.keyspaces.contains_key(name) {
                return Err(format!("Unknown keyspace '{name}'"));
            }
        }
        let local_dc = view.local_dc().to_string();
        let prefer_dc = source_dc.unwrap_or(&local_dc).to_string();
        let mut sessions = Vec::new();
        let mut unavailable = Vec::new();
        let mut totals = StreamStats::default();
        let receiver = self.receiver();
        for ks in schema.keyspaces.values() {
            if Schema::is_local(&ks.name) || keyspace.is_some_and(|k| k != ks.name) {
                continue;
            }
            if matches!(ks.replication, Replication::Local) || ks.tables.is_empty() {
                continue;
            }
            // The ranges this node replicates, by the replica to stream each from.
            let plan = cluster::movement::rebuild(&view, ks, &prefer_dc);
            if Schema::is_replicated_system(&ks.name) && keyspace.is_none() {
                // `system_auth` at its default RF 1: this node is the only replica of its
                // ranges, nothing to stream them from. Not the user's to fix: go on.
                for range in &plan.unavailable {
                    tracing::warn!("rebuild: no other replica to stream {range} from; skipped");
                }
            } else {
                unavailable.extend(plan.unavailable);
            }
            self.stream_keyspace(&receiver, &view, ks, plan.by_source, None, &mut sessions, &mut totals).await?;
        }
        if !unavailable.is_empty() {
            return Err(format!(
                "Unable to find sufficient sources for streaming range {}{}",
                unavailable.iter().take(5).cloned().collect::<Vec<_>>().join("; "),
                if unavailable.len() > 5 { format!(" and {} more", unavailable.len() - 5) } else { String::new() }
            ));
        }
        let mut report = stream_report("rebuild", sessions, &totals, started);
        if let Some(fields) = report.as_object_mut() {
            fields.insert("keyspace".into(), json!(keyspace));
        }
        Ok(report)
    }

    /// Has `target` pull `pull` (this node fetches it itself when it is the
    /// target), tried `SESSION_TRIES` times, each try resuming the session.
    async fn pull(
        &self,
        receiver: &Receiver<'_, TcpTransport>,
        target: &cluster::Endpoint,
        pull: &wire::StreamPull,
    ) -> Result<StreamStats, String> {
        let mut last_error = String::new();
        for attempt in 1..=SESSION_TRIES {
            let result = if target.host_id == self.coordinator.view.snapshot().local {
                receiver.fetch(pull.source, pull.session, pull.table, &pull.ranges).await
            } else {
                self.coordinator
                    .transport
                    .send_request(target.internode, Verb::StreamPullReq, wire::encode_stream_pull(pull), PULL_TIMEOUT)
                    .await
                    .map_err(|e| e.to_string())
                    .and_then(|(_, body)| wire::decode_stream_stats(&body).map_err(|e| e.to_string()))
            };
            match result {
                Ok(stats) => return Ok(stats),
                Err(e) => {
                    tracing::warn!(target = %target.internode, source = %pull.source, attempt, "stream session failed: {e}");
                    last_error = e;
                }
            }
        }
        Err(format!("failed {SESSION_TRIES} times: {last_error}"))
    }

    /// Streams each table of `ks` over `by_source` (source -> ranges), each
    /// session tried `SESSION_TRIES` times (resuming); adds what moved to
    /// `sessions` and `totals`. With `streamed` (a bootstrap), skips the
    /// (table, range)s in it and records each session's as it finishes;
    /// returns how many it skipped.
    #[allow(clippy::too_many_arguments, reason = "one call site per operation, each naming every part")]
    async fn stream_keyspace(
        &self,
        receiver: &Receiver<'_, TcpTransport>,
        view: &ClusterView,
        ks: &KeyspaceDef,
        by_source: BTreeMap<Uuid, Vec<(i64, i64)>>,
        streamed: Option<&Streamed>,
        sessions: &mut Vec<Json>,
        totals: &mut StreamStats,
    ) -> Result<usize, String> {
        let me = view.local().ok_or("this node is not in its own view")?;
        let mut skipped = 0;
        // One task per source, all at once (each source's tables one after the other): the
        // sources export and send while this node receives and ingests.
        let per_source = by_source.into_iter().filter_map(|(source, ranges)| {
            let peer = view.endpoint(source).map(|e| e.internode)?;
            let todo: Vec<(&types::schema::TableDef, Vec<(i64, i64)>)> = ks
                .tables
                .values()
                .map(|table| {
                    let left: Vec<(i64, i64)> = ranges
                        .iter()
                        .copied()
                        .filter(|(s, e)| !streamed.is_some_and(|done| done.contains(&(table.id, *s, *e))))
                        .collect();
                    skipped += ranges.len() - left.len();
                    (table, left)
                })
                .filter(|(_, left)| !left.is_empty())
                .collect();
            Some(async move {
                let mut done = Vec::new();
                for (table, ranges) in todo {
                    let session = Uuid::new_v4();
                    let pull = wire::StreamPull { session, table: table.id, source: peer, ranges };
                    let stats = self
                        .pull(receiver, me, &pull)
                        .await
                        .map_err(|e| format!("streaming {}.{} from {}: {e}", ks.name, table.name, peer.ip()))?;
                    if streamed.is_some() {
                        self.record_streamed(table.id, &pull.ranges).await?;
                    }
                    done.push((table, pull, stats));
                }
                Ok::<_, String>(done)
            })
        });
        let per_source: Vec<_> = per_source.collect();
        let mut failed = None;
        for result in join_all(per_source).await {
            match result {
                Ok(done) => {
                    for (table, pull, stats) in done {
                        totals.add(&stats);
                        sessions.push(session_report(ks, table, me, &pull, &stats));
                    }
                }
                Err(e) => failed = failed.or(Some(e)),
            }
        }
        failed.map_or(Ok(skipped), Err)
    }

    /// Bootstrap (a new node's join, `auto_bootstrap`): once the schema
    /// agrees with the NORMAL peers and every coordinator has had
    /// `RING_DELAY` to see this node's pending ranges (writes for them come
    /// here too from then on), streams every range this node will replicate
    /// from the replica that loses it (`strict`: Cassandra's consistent range
    /// movement; that replica must be up) or, not strict, from any live
    /// replica. The caller turns the node NORMAL after it returns Ok. The
    /// (table, range)s a failed or interrupted bootstrap of this node
    /// streamed are not streamed again (`BOOTSTRAP_STREAMED`): what the node
    /// missed while it was down comes by hints (or the next repair), as every
    /// down replica's writes do.
    pub async fn bootstrap(&self, strict: bool, replacing: Option<Uuid>) -> Result<Json, String> {
        let _running = self.begin("bootstrap").await?;
        let started = Instant::now();
        let deadline = Instant::now() + SCHEMA_WAIT;
        loop {
            let view = self.coordinator.view.snapshot();
            let ours = self.schema.snapshot().version;
            let normal: Vec<&cluster::Endpoint> =
                view.peers().filter(|e| e.alive && e.status == cluster::Status::Normal).collect();
            if !normal.is_empty() && normal.iter().all(|e| e.schema_version == Some(ours)) {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "bootstrap: the schema did not agree with the NORMAL nodes within {} s",
                    SCHEMA_WAIT.as_secs()
                ));
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        let schema = self.schema.snapshot();
        let keyspaces: Vec<&Arc<KeyspaceDef>> = schema
            .keyspaces
            .values()
            .filter(|ks| !Schema::is_local(&ks.name) && !matches!(ks.replication, Replication::Local))
            .filter(|ks| !ks.tables.is_empty())
            .collect();
        let mut sessions = Vec::new();
        let mut totals = StreamStats::default();
        let mut skipped = 0;
        if !keyspaces.is_empty() {
            tokio::time::sleep(RING_DELAY).await;
            let view = self.coordinator.view.snapshot();
            if let Some(other) = view.yields_to(view.local) {
                return Err(format!(
                    "another topology change began at the same time ({other}); this bootstrap yields to it \
                     (one topology change at a time): restart this node when that one is done to resume"
                ));
            }
            // The rings the plans are decided on (the dead node's too, for a replacement).
            let plan = cluster::movement::Bootstrap::new(&view, replacing)?;
            let receiver = self.receiver();
            let streamed = self.streamed();
            for ks in keyspaces {
                let by_source = if Schema::is_replicated_system(&ks.name) {
                    // system_auth at RF 1: a range whose only copy was the replaced node's has
                    // no source; losing it must not stop the join (the default superuser or the
                    // roles are made again, as on a fresh cluster).
                    let (by_source, skipped) = plan.sources_lenient(&view, ks);
                    for range in skipped {
                        tracing::warn!("bootstrap: {range}; skipped");
                    }
                    by_source
                } else {
                    plan.sources(&view, ks, strict)?
                };
                skipped += self
                    .stream_keyspace(&receiver, &view, ks, by_source, Some(&streamed), &mut sessions, &mut totals)
                    .await?;
            }
        }
        let mut report = stream_report("bootstrap", sessions, &totals, started);
        if let Some(fields) = report.as_object_mut() {
            fields.insert("ranges_already_streamed".into(), json!(skipped));
        }
        Ok(report)
    }

    /// Repair (nodetool repair): for each range this node replicates (only
    /// those it is primary for with `primary_only`) of the user keyspaces (or
    /// `keyspace`, and of `tables` when given), the replicas compare hashes
    /// of slices of the range, then of the partitions of differing slices;
    /// this node pushes its version of each differing partition to the
    /// replicas that differ, which merge it and answer what it lacked
    /// (`cluster::repair::repair_range`). Incremental by default: every
    /// replica first says which ranges it holds repaired (`RepairStateReq`),
    /// and a range repaired on all of them is not compared (`RepairMode`).
    /// With `preview`, only reports what differs. Every replica of a range
    /// must be up. The report counts the bytes this node sent and received
    /// for it (`bytes_on_wire`).
    ///
    /// The ranges of a table it finished (also those before a failure) are
    /// recorded as repaired at the repair's start, here and on their other
    /// replicas (`record_repaired`): the repaired horizon below which their
    /// tombstones may be purged (`cluster::repaired`), and each replica's
    /// write generation the repair saw, which marks the range repaired there
    /// if nothing was written in it since.
    pub async fn repair(
        &self,
        keyspace: Option<&str>,
        tables: &[String],
        primary_only: bool,
        preview: bool,
        mode: RepairMode,
        trigger: RepairTrigger,
    ) -> Result<Json, String> {
        let _running = self.begin(if trigger == RepairTrigger::Schedule { SCHEDULED_REPAIR } else { "repair" }).await?;
        let id = Uuid::new_v4();
        let unix = |t: std::time::SystemTime| t.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let entry = json!({
            "id": id,
            "trigger": match trigger { RepairTrigger::Operator => "operator", RepairTrigger::Schedule => "schedule" },
            "keyspace": keyspace,
            "tables": tables,
            "primary_range_only": primary_only,
            "preview": preview,
            "mode": mode.name(),
            "started_unix_s": unix(std::time::SystemTime::now()),
            "state": "running",
        });
        {
            let mut history = self.repairs.lock().unwrap_or_else(PoisonError::into_inner);
            if history.len() >= REPAIR_HISTORY {
                history.pop_front();
            }
            history.push_back(entry);
        }
        let result = self.repair_run(keyspace, tables, primary_only, preview, mode, trigger).await;
        let mut history = self.repairs.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(run) = history.iter_mut().rev().find(|r| r["id"] == json!(id)) {
            match &result {
                Ok(report) => {
                    run["state"] = json!("done");
                    for field in [
                        "ranges",
                        "ranges_compared",
                        "partitions_compared",
                        "partitions_differing",
                        "bytes_repaired",
                        "bytes_on_wire",
                        "seconds",
                    ] {
                        run[field] = report[field].clone();
                    }
                }
                Err(e) => run["state"] = json!(format!("failed: {e}")),
            }
        }
        result
    }

    /// The repairs run on this node, oldest first (`repair_admin list`).
    pub fn repair_history(&self) -> Json {
        let history = self.repairs.lock().unwrap_or_else(PoisonError::into_inner);
        json!({ "repairs": history.iter().cloned().collect::<Vec<Json>>() })
    }

    async fn repair_run(
        &self,
        keyspace: Option<&str>,
        tables: &[String],
        primary_only: bool,
        preview: bool,
        mode: RepairMode,
        trigger: RepairTrigger,
    ) -> Result<Json, String> {
        let started = Instant::now();
        let view = self.coordinator.view.snapshot();
        let schema = self.schema.snapshot();
        if let Some(name) = keyspace {
            let Some(ks) = schema.keyspaces.get(name).filter(|_| !Schema::is_local(name)) else {
                return Err(format!("Unknown keyspace '{name}'"));
            };
            if let Some(t) = tables.iter().find(|t| !ks.tables.contains_key(t.as_str())) {
                return Err(format!("Unknown table '{t}' in keyspace '{name}'"));
            }
        } else if !tables.is_empty() {
            return Err("tables can only be given with a keyspace".into());
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i32::try_from(d.as_secs()).unwrap_or(i32::MAX));
        // Every tombstone deleted before this second is on some replica now,
        // so on every replica of a range once the range is repaired.
        let started_at = i64::from(now);
        // Validation compares without repairing; nothing it sees is recorded.
        let preview = preview || mode == RepairMode::Validate;
        let mut report = Vec::new();
        let mut total = cluster::repair::RangeRepair::default();
        let (mut all_ranges, mut all_compared) = (0usize, 0usize);
        for ks in schema.keyspaces.values() {
            if Schema::is_local(&ks.name) || keyspace.is_some_and(|k| k != ks.name) {
                continue;
            }
            if matches!(ks.replication, Replication::Local) {
                continue;
            }
            for table in ks.tables.values() {
                if !tables.is_empty() && !tables.contains(&table.name) {
                    continue;
                }
                let mut validated: Vec<Uuid> = Vec::new();
                let mut t = cluster::repair::RangeRepair::default();
                let mut failed = None;
                let mut candidates = Vec::new();
                match cluster::repair::ranges_to_repair(&view, ks, primary_only) {
                    Ok(ranges) => candidates.extend(ranges.into_iter().map(|(range, replicas)| Candidate {
                        range,
                        replicas,
                        states: Vec::new(),
                    })),
                    Err(dead) => {
                        let addr = view.endpoint(dead).map_or_else(|| dead.to_string(), |e| e.internode.to_string());
                        failed = Some(format!("Endpoint not alive: /{addr}"));
                    }
                }
                if failed.is_none() {
                    if let Err(e) = self.repair_states(&view, table.id, &mut candidates, &mut t.wire_bytes).await {
                        failed = Some(format!("repair of {}.{} failed: {e}", ks.name, table.name));
                    }
                }
                let (mut compared, mut out_of_sync) = (0usize, 0usize);
                // The ranges finished, with their replicas' states.
                let mut done: Vec<&Candidate> = Vec::new();
                for candidate in candidates.iter().filter(|_| failed.is_none()) {
                    if trigger == RepairTrigger::Schedule && self.preempt.load(Ordering::SeqCst) {
                        failed = Some("stopped for another operation (it runs again at a later check)".to_string());
                        break;
                    }
                    let compare = match mode {
                        RepairMode::Incremental => !candidate.repaired(),
                        RepairMode::Full => true,
                        RepairMode::Validate => candidate.repaired(),
                    };
                    if compare {
                        compared += 1;
                        let task = cluster::repair::RangeTask {
                            table: table.id,
                            range: candidate.range,
                            replicas: &candidate.replicas,
                            now,
                            preview,
                            compact: mode == RepairMode::Full,
                        };
                        match cluster::repair::repair_range(&self.coordinator, &view, &task, &mut validated).await {
                            Ok(outcome) => {
                                out_of_sync += usize::from(outcome.differing > 0);
                                t.add(&outcome);
                            }
                            Err(e) => {
                                failed = Some(format!(
                                    "repair of {}.{} failed in range ({}, {}]: {e}",
                                    ks.name, table.name, candidate.range.0, candidate.range.1
                                ));
                                break;
                            }
                        }
                    }
                    if !preview {
                        done.push(candidate);
                    }
                }
                if !preview {
                    self.record_repaired(&view, table.id, started_at, &done).await;
                }
                if let Some(e) = failed {
                    return Err(e);
                }
                total.add(&t);
                all_ranges += candidates.len();
                all_compared += compared;
                let mut entry = json!({
                    "keyspace": ks.name,
                    "table": table.name,
                    "ranges": candidates.len(),
                    "ranges_compared": compared,
                    "ranges_skipped_repaired": if mode == RepairMode::Incremental { candidates.len() - compared } else { 0 },
                    "partitions_compared": t.compared,
                    "partitions_differing": t.differing,
                    "bytes_estimated": t.estimated_bytes,
                    "bytes_repaired": t.repaired_bytes,
                    "bytes_on_wire": t.wire_bytes,
                });
                if let Some(fields) = entry.as_object_mut().filter(|_| mode == RepairMode::Validate) {
                    fields.insert("ranges_out_of_sync".into(), json!(out_of_sync));
                }
                report.push(entry);
            }
        }
        Ok(json!({
            "operation": match (mode, preview) {
                (RepairMode::Validate, _) => "repair --validate",
                (_, true) => "repair --preview",
                _ => "repair",
            },
            "mode": mode.name(),
            "keyspace": keyspace,
            "primary_range_only": primary_only,
            "tables": report,
            "ranges": all_ranges,
            "ranges_compared": all_compared,
            "partitions_compared": total.compared,
            "partitions_differing": total.differing,
            "bytes_estimated": total.estimated_bytes,
            "bytes_repaired": total.repaired_bytes,
            "bytes_on_wire": total.wire_bytes,
            "repaired_at": (!preview).then_some(started_at),
            "seconds": started.elapsed().as_secs_f64(),
        }))
    }

    /// Asks every replica of `candidates` for its state of them (this node
    /// answers itself): whether it holds each range repaired, and at which
    /// write generation. Adds the bytes on the wire to `wire_bytes`.
    async fn repair_states(
        &self,
        view: &ClusterView,
        table: Uuid,
        candidates: &mut [Candidate],
        wire_bytes: &mut u64,
    ) -> Result<(), String> {
        let mut by_replica: BTreeMap<Uuid, Vec<usize>> = BTreeMap::new();
        for (i, c) in candidates.iter_mut().enumerate() {
            c.states = vec![storage::RangeState { repaired: false, generation: 0 }; c.replicas.len()];
            for r in &c.replicas {
                by_replica.entry(*r).or_default().push(i);
            }
        }
        for (replica, indices) in by_replica {
            let ranges: Vec<(i64, i64)> = indices.iter().filter_map(|i| candidates.get(*i).map(|c| c.range)).collect();
            let states = if replica == view.local {
                cluster::repaired::cut_ring(&self.coordinator.storage, view);
                self.coordinator.storage.repair_states(&table, &ranges)
            } else {
                let addr = view.endpoint(replica).map(|e| e.internode).ok_or("unknown replica")?;
                let body = wire::encode_repair_state_request(&wire::RepairStateRequest { table, ranges });
                *wire_bytes += body.len() as u64 + FRAME_BYTES;
                let (_, answer) = self
                    .coordinator
                    .transport
                    .send_request(addr, Verb::RepairStateReq, body, REPAIRED_TIMEOUT)
                    .await
                    .map_err(|e| format!("{}: {e}", addr.ip()))?;
                *wire_bytes += answer.len() as u64 + FRAME_BYTES;
                wire::decode_repair_states(&answer).map_err(|e| format!("{}: {e}", addr.ip()))?
            };
            if states.len() != indices.len() {
                return Err(format!("replica {replica} answered {} states for {} ranges", states.len(), indices.len()));
            }
            for (i, state) in indices.into_iter().zip(states) {
                let Some(c) = candidates.get_mut(i) else { continue };
                if let Some(slot) = c.replicas.iter().position(|r| *r == replica).and_then(|p| c.states.get_mut(p)) {
                    *slot = state;
                }
            }
        }
        Ok(())
    }

    /// Records that the repair that began at `at` finished `done` (ranges of
    /// `table`, with their replicas and the write generation each reported):
    /// in this node's metadata, and on every other replica of each range
    /// (`RepairedReq`). A replica that is not told keeps an older time, which
    /// only keeps tombstones longer, and its ranges unrepaired, which only
    /// has the next repair compare them again.
    async fn record_repaired(&self, view: &ClusterView, table: Uuid, at: i64, done: &[&Candidate]) {
        if done.is_empty() {
            return;
        }
        // Per replica: the ranges, and the generation it reported for each.
        type Finished = (Vec<(i64, i64)>, Vec<u64>);
        let mut by_replica: BTreeMap<Uuid, Finished> = BTreeMap::new();
        for c in done {
            for (r, state) in c.replicas.iter().zip(&c.states) {
                let (ranges, generations) = by_replica.entry(*r).or_default();
                ranges.push(c.range);
                generations.push(state.generation);
            }
        }
        for (replica, (ranges, generations)) in by_replica {
            let outcome = if replica == view.local {
                let storage = Arc::clone(&self.coordinator.storage);
                tokio::task::spawn_blocking(move || {
                    cluster::repaired::record(&storage, &table, &ranges, at).map_err(|e| e.to_string())?;
                    let at: Vec<((i64, i64), u64)> = ranges.into_iter().zip(generations).collect();
                    storage.set_repaired(&table, &at);
                    Ok::<_, String>(())
                })
                .await
                .map_err(|e| e.to_string())
                .and_then(|r| r)
            } else {
                match view.endpoint(replica).map(|e| e.internode) {
                    Some(addr) => {
                        let body =
                            wire::encode_repaired(&wire::Repaired { table, repaired_at: at, ranges, generations });
                        self.coordinator
                            .transport
                            .send_request(addr, Verb::RepairedReq, body, REPAIRED_TIMEOUT)
                            .await
                            .map(|_| ())
                            .map_err(|e| format!("{}: {e}", addr.ip()))
                    }
                    None => Err("unknown replica".to_string()),
                }
            };
            if let Err(e) = outcome {
                tracing::warn!(%replica, %table, "cannot record a finished repair: {e}");
            }
        }
    }

    /// Cleanup (nodetool cleanup): deletes from every table of the user
    /// keyspaces (or `keyspace`, and its `tables`) the data of ranges this
    /// node no longer replicates, after a topology or replication change.
    /// Refused while this node owns no tokens (not NORMAL).
    pub async fn cleanup(&self, keyspace: Option<&str>, tables: &[String]) -> Result<Json, String> {
        let _running = self.begin("cleanup").await?;
        let started = Instant::now();
        let view = self.coordinator.view.snapshot();
        let schema = self.schema.snapshot();
        if view.ring.node(cluster::view::host(view.local)).is_none() {
            return Err("Cannot run cleanup: this node owns no tokens (it is not NORMAL)".into());
        }
        if let Some(name) = keyspace {
            let Some(ks) = schema.keyspaces.get(name).filter(|_| !Schema::is_local(name)) else {
                return Err(format!("Unknown keyspace '{name}'"));
            };
            if let Some(t) = tables.iter().find(|t| !ks.tables.contains_key(t.as_str())) {
                return Err(format!("Unknown table '{t}' in keyspace '{name}'"));
            }
        }
        let mut report = Vec::new();
        for ks in schema.keyspaces.values() {
            if Schema::is_local(&ks.name) || keyspace.is_some_and(|k| k != ks.name) {
                continue;
            }
            if matches!(ks.replication, Replication::Local) {
                continue;
            }
            let keep: Vec<(i64, i64)> = view
                .ring
                .ranges()
                .filter(|(range, _)| view.replicas(ks, range.end).contains(&view.local))
                .map(|(range, _)| (range.start, range.end))
                .collect();
            for table in ks.tables.values() {
                if !tables.is_empty() && !tables.contains(&table.name) {
                    continue;
                }
                let (storage, kept, id) = (Arc::clone(&self.coordinator.storage), keep.clone(), table.id);
                let (before, after) = tokio::task::spawn_blocking(move || {
                    let before = storage.table_size_bytes(&id);
                    storage.cleanup(&id, &kept).map(|_| (before, storage.table_size_bytes(&id)))
                })
                .await
                .map_err(|e| format!("cleanup task failed: {e}"))?
                .map_err(|e| format!("cleanup of {}.{} failed: {e}", ks.name, table.name))?;
                report.push(json!({
                    "keyspace": ks.name,
                    "table": table.name,
                    "ranges_kept": keep.len(),
                    "bytes_before": before,
                    "bytes_after": after,
                }));
            }
        }
        Ok(json!({ "operation": "cleanup", "tables": report, "seconds": started.elapsed().as_secs_f64() }))
    }

    /// Decommission (nodetool decommission): this NORMAL node announces
    /// LEAVING (coordinators then also write to the nodes that take its
    /// ranges over), waits a ring delay, has each of those nodes pull the
    /// ranges it gains from this node (`StreamPullReq`), then announces LEFT
    /// and marks its data directory so it will not rejoin. Refused when a
    /// keyspace would be left with fewer nodes than its replication factor.
    pub async fn decommission(&self, storage: &storage::Storage) -> Result<Json, String> {
        let _running = self.begin("decommission").await?;
        let started = Instant::now();
        let view = self.coordinator.view.snapshot();
        let me = view.local().ok_or("decommission: this node is not in its own view")?.clone();
        if me.status != cluster::Status::Normal || view.ring.node(host(view.local)).is_none() {
            return Err(format!("Cannot decommission a node that is not NORMAL (it is {})", me.status.as_str()));
        }
        view.check_no_topology_change("decommission", view.local)?;
        let schema = self.schema.snapshot();
        let keyspaces: Vec<&Arc<KeyspaceDef>> = schema
            .keyspaces
            .values()
            .filter(|ks| !Schema::is_local(&ks.name) && !matches!(ks.replication, Replication::Local))
            // Nothing to hand over (system_distributed, system_traces): no replica count to keep.
            .filter(|ks| !ks.tables.is_empty())
            .collect();
        for ks in &keyspaces {
            cluster::movement::check_decommission(&view, ks, &me.dc)?;
        }
        self.gossip.set_status(cluster::Status::Leaving).await;
        tokio::time::sleep(RING_DELAY).await;
        let view = self.coordinator.view.snapshot();
        if let Some(other) = view.yields_to(view.local) {
            self.gossip.set_status(cluster::Status::Normal).await;
            return Err(format!(
                "another topology change began at the same time ({other}); this decommission yields to it \
                 and the node is NORMAL again (one topology change at a time)"
            ));
        }
        // Everything here is handed away: no compaction of it meanwhile (its streams and its clients
        // get that CPU and disk).
        storage.hold_compactions(true);
        let mut sessions = Vec::new();
        let mut totals = StreamStats::default();
        let receiver = self.receiver();
        let result = async {
            for ks in &keyspaces {
                for (target, ranges) in cluster::movement::decommission(&view, ks, view.local) {
                    let endpoint = view.endpoint(target).ok_or("a new owner is not in the view")?;
                    if !endpoint.alive {
                        return Err(format!("Cannot hand ranges to {}: it is down", endpoint.address()));
                    }
                    for table in ks.tables.values() {
                        let pull = wire::StreamPull {
                            session: Uuid::new_v4(),
                            table: table.id,
                            source: me.internode,
                            ranges: ranges.clone(),
                        };
                        let stats = self.pull(&receiver, endpoint, &pull).await.map_err(|e| {
                            format!("handing {}.{} to {}: {e}", ks.name, table.name, endpoint.address())
                        })?;
                        totals.add(&stats);
                        sessions.push(session_report(ks, table, endpoint, &pull, &stats));
                    }
                }
            }
            Ok::<(), String>(())
        }
        .await;
        if let Err(e) = result {
            // Nothing was handed over for good: this node owns its ranges again.
            storage.hold_compactions(false);
            self.gossip.set_status(cluster::Status::Normal).await;
            return Err(format!("decommission failed, the node is NORMAL again: {e}"));
        }
        storage.local_set(DECOMMISSIONED, "1").map_err(|e| e.to_string())?;
        self.gossip.set_status(cluster::Status::Left).await;
        tokio::time::sleep(LEFT_DELAY).await;
        Ok(json!({
            "operation": "decommission",
            "sessions": sessions,
            "bytes": totals.bytes,
            "entries": totals.entries,
            "seconds": started.elapsed().as_secs_f64(),
        }))
    }

    /// `removenode status`: the nodes this node sees being removed (down and
    /// named by a live node as being removed), and the operation running
    /// here, if any.
    pub fn removal_status(&self) -> Json {
        let view = self.coordinator.view.snapshot();
        let removing: Vec<Json> = view
            .endpoints
            .values()
            .filter(|e| e.status == cluster::Status::Leaving && !e.alive)
            .map(|e| json!({ "host_id": e.host_id, "address": e.address().to_string() }))
            .collect();
        let running = self.running.lock().unwrap_or_else(PoisonError::into_inner).clone();
        json!({ "removing": removing, "running_here": running })
    }

    /// `removenode force`: completes every removal this node sees pending
    /// (a removenode whose streams failed, or whose node died) without its
    /// streams: each node being removed is marked removed at once and leaves
    /// every ring. The ranges it held are then short of a replica until a
    /// repair (`shoal tool repair`) copies them from the others.
    pub async fn force_removal(&self, storage: &storage::Storage) -> Result<Json, String> {
        let view = self.coordinator.view.snapshot();
        let pending: Vec<&cluster::Endpoint> =
            view.endpoints.values().filter(|e| e.status == cluster::Status::Leaving && !e.alive).collect();
        if pending.is_empty() {
            return Err("No removals in process.".into());
        }
        let mut forced = Vec::new();
        for e in pending {
            tracing::warn!(host_id = %e.host_id, "forcing the removal of a node without its streams: repair its ranges");
            crate::join::mark_removed(storage, &self.gossip, e.host_id).await.map_err(|e| e.to_string())?;
            forced.push(json!({ "host_id": e.host_id, "address": e.address().to_string() }));
        }
        self.gossip.set(cluster::gossip::REMOVING, String::new()).await;
        tokio::time::sleep(LEFT_DELAY).await;
        Ok(json!({ "operation": "removenode force", "removed": forced }))
    }

    /// Removenode (nodetool removenode HOSTID): re-replicates the ranges of a
    /// node that is down for good from the surviving replicas. This node
    /// announces it as being removed (its ranges' new owners get writes from
    /// then on), waits the ring delay, has each node that gains a range pull
    /// it from a live replica, then announces it removed (it leaves every
    /// ring; persisted, so it stays removed after this node restarts).
    pub async fn removenode(&self, host_id: Uuid, storage: &storage::Storage) -> Result<Json, String> {
        let _running = self.begin("removenode").await?;
        let started = Instant::now();
        let view = self.coordinator.view.snapshot();
        let Some(target) = view.endpoint(host_id).cloned() else {
            return Err("Host ID not found.".into());
        };
        if host_id == view.local {
            return Err("Cannot remove self".into());
        }
        if target.alive {
            return Err(format!(
                "Node /{} is alive and owns this ID. Use decommission command to remove it from the ring",
                target.internode
            ));
        }
        if view.ring.node(host(host_id)).is_none() {
            if target.status == cluster::Status::Joining {
                // A joiner that died before it owned anything: nothing to stream, it just leaves.
                crate::join::mark_removed(storage, &self.gossip, host_id).await.map_err(|e| e.to_string())?;
                tokio::time::sleep(LEFT_DELAY).await;
                return Ok(json!({
                    "operation": "removenode",
                    "host_id": host_id,
                    "address": target.address().to_string(),
                    "sessions": [],
                    "bytes": 0,
                    "entries": 0,
                    "seconds": started.elapsed().as_secs_f64(),
                }));
            }
            return Err(format!("Host ID {host_id} owns no tokens: nothing to remove"));
        }
        view.check_no_topology_change("removenode", host_id)?;
        self.gossip.set(cluster::gossip::REMOVING, host_id.to_string()).await;
        tokio::time::sleep(RING_DELAY).await;
        let view = self.coordinator.view.snapshot();
        if let Some(other) = view.yields_to(host_id) {
            self.gossip.set(cluster::gossip::REMOVING, String::new()).await;
            return Err(format!(
                "another topology change began at the same time ({other}); this removenode yields to it \
                 (one topology change at a time): run it again when that one is done"
            ));
        }
        let schema = self.schema.snapshot();
        let prefer = view.local_dc().to_string();
        let mut sessions = Vec::new();
        let mut totals = StreamStats::default();
        let receiver = self.receiver();
        for ks in schema.keyspaces.values() {
            if Schema::is_local(&ks.name) || matches!(ks.replication, Replication::Local) {
                continue;
            }
            // (gaining node, source) -> ranges.
            let moves = match cluster::movement::removenode(&view, ks, host_id, &prefer) {
                Ok(moves) => moves,
                // A replicated system keyspace at RF 1 (system_auth's default) had its only
                // copy of those ranges on the removed node: nothing to re-replicate from.
                Err(e) if Schema::is_replicated_system(&ks.name) => {
                    tracing::warn!("removenode: {e}; {} not re-replicated (run repair if its RF is above 1)", ks.name);
                    continue;
                }
                Err(e) => return Err(e),
            };
            for ((gaining, source), ranges) in moves {
                let (Some(to), Some(from)) = (view.endpoint(gaining), view.endpoint(source)) else { continue };
                for table in ks.tables.values() {
                    let session = Uuid::new_v4();
                    let pull =
                        wire::StreamPull { session, table: table.id, source: from.internode, ranges: ranges.clone() };
                    let stats = self.pull(&receiver, to, &pull).await.map_err(|e| {
                        format!(
                            "removenode: streaming {}.{} to {} from {}: {e}",
                            ks.name,
                            table.name,
                            to.address(),
                            from.address()
                        )
                    })?;
                    totals.add(&stats);
                    sessions.push(session_report(ks, table, to, &pull, &stats));
                }
            }
        }
        crate::join::mark_removed(storage, &self.gossip, host_id).await.map_err(|e| e.to_string())?;
        self.gossip.set(cluster::gossip::REMOVING, String::new()).await;
        tokio::time::sleep(LEFT_DELAY).await;
        Ok(json!({
            "operation": "removenode",
            "host_id": host_id,
            "address": target.address().to_string(),
            "sessions": sessions,
            "bytes": totals.bytes,
            "entries": totals.entries,
            "seconds": started.elapsed().as_secs_f64(),
        }))
    }
}
