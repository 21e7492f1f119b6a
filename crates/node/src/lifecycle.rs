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
//! use the same sessions.
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
use cluster::view::{host, uuid};
use cluster::wire;
use cluster::{ClusterView, Coordinator};
use cql_server::schema::{Schema, SchemaService};
use net::{TcpTransport, Transport, Verb};
use ring::topology::NodeInfo;
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
        }
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
            if Schema::is_system(name) || !schema.keyspaces.contains_key(name) {
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
            if Schema::is_system(&ks.name) || keyspace.is_some_and(|k| k != ks.name) {
                continue;
            }
            if matches!(ks.replication, Replication::Local) || ks.tables.is_empty() {
                continue;
            }
            // The ranges this node replicates, by the replica to stream each from.
            let mut by_source: BTreeMap<Uuid, Vec<(i64, i64)>> = BTreeMap::new();
            for (range, _) in view.ring.ranges() {
                let replicas = view.replicas(ks, range.end);
                if !replicas.contains(&view.local) {
                    continue;
                }
                let source = replicas
                    .iter()
                    .copied()
                    .filter(|r| *r != view.local && view.is_alive(*r))
                    .min_by_key(|r| view.dc_of(*r) != Some(prefer_dc.as_str()));
                match source {
                    Some(s) => by_source.entry(s).or_default().push((range.start, range.end)),
                    None => unavailable.push(format!(
                        "({}, {}] of {} (replicas {})",
                        range.start,
                        range.end,
                        ks.name,
                        replicas
                            .iter()
                            .map(|r| view.endpoint(*r).map_or_else(|| r.to_string(), |e| e.address().to_string()))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )),
                }
            }
            self.stream_keyspace(&receiver, &view, ks, by_source, &mut sessions, &mut totals).await?;
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
    /// `sessions` and `totals`.
    async fn stream_keyspace(
        &self,
        receiver: &Receiver<'_, TcpTransport>,
        view: &ClusterView,
        ks: &KeyspaceDef,
        by_source: BTreeMap<Uuid, Vec<(i64, i64)>>,
        sessions: &mut Vec<Json>,
        totals: &mut StreamStats,
    ) -> Result<(), String> {
        let me = view.local().ok_or("this node is not in its own view")?;
        // One task per source, all at once (each source's tables one after the other): the
        // sources export and send while this node receives and ingests.
        let per_source = by_source.into_iter().filter_map(|(source, ranges)| {
            let peer = view.endpoint(source).map(|e| e.internode)?;
            Some(async move {
                let mut done = Vec::new();
                for table in ks.tables.values() {
                    let session = Uuid::new_v4();
                    let pull = wire::StreamPull { session, table: table.id, source: peer, ranges: ranges.clone() };
                    let stats = self
                        .pull(receiver, me, &pull)
                        .await
                        .map_err(|e| format!("streaming {}.{} from {}: {e}", ks.name, table.name, peer.ip()))?;
                    done.push((table, pull, stats));
                }
                Ok::<_, String>(done)
            })
        });
        let mut failed = None;
        for result in join_all(per_source.collect()).await {
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
        failed.map_or(Ok(()), Err)
    }

    /// Bootstrap (a new node's join, `auto_bootstrap`): once the schema
    /// agrees with the NORMAL peers and every coordinator has had
    /// `RING_DELAY` to see this node's pending ranges (writes for them come
    /// here too from then on), streams every range this node will replicate
    /// from the replica that loses it (`strict`: Cassandra's consistent range
    /// movement; that replica must be up) or, not strict, from any live
    /// replica. The caller turns the node NORMAL after it returns Ok.
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
            .filter(|ks| !Schema::is_system(&ks.name) && !matches!(ks.replication, Replication::Local))
            .filter(|ks| !ks.tables.is_empty())
            .collect();
        let mut sessions = Vec::new();
        let mut totals = StreamStats::default();
        if !keyspaces.is_empty() {
            tokio::time::sleep(RING_DELAY).await;
            let view = self.coordinator.view.snapshot();
            if let Some(other) = view.yields_to(view.local) {
                return Err(format!(
                    "another topology change began at the same time ({other}); this bootstrap yields to it \
                     (one topology change at a time): restart this node when that one is done to resume"
                ));
            }
            let me = view.local().ok_or("bootstrap: this node is not in its own view")?;
            let mut ring = view.ring.clone();
            ring.add_node(NodeInfo::new(host(view.local), me.dc.clone(), me.rack.clone()), me.tokens.iter().copied())
                .map_err(|e| format!("bootstrap: cannot place this node's tokens: {e}"))?;
            let receiver = self.receiver();
            let address = |id: Uuid| view.endpoint(id).map_or_else(|| id.to_string(), |e| e.address().to_string());
            // A replacement's ranges are the dead node's: their data is on the dead node's fellow
            // replicas, the ring with the dead node in it says which.
            let original = match replacing.and_then(|d| view.endpoint(d)) {
                Some(dead) => {
                    let mut with = view.ring.clone();
                    with.add_node(
                        NodeInfo::new(host(dead.host_id), dead.dc.clone(), dead.rack.clone()),
                        dead.tokens.iter().copied(),
                    )
                    .map_err(|e| format!("bootstrap: cannot place the replaced node's tokens: {e}"))?;
                    Some((dead.host_id, with))
                }
                None => None,
            };
            for ks in keyspaces {
                let strategy = cluster::view::strategy(&ks.replication);
                let mut by_source: BTreeMap<Uuid, Vec<(i64, i64)>> = BTreeMap::new();
                for (range, _) in ring.ranges() {
                    let new: Vec<Uuid> = strategy.replicas(&ring, range.end).into_iter().map(uuid).collect();
                    if !new.contains(&view.local) {
                        continue;
                    }
                    if let Some((dead, with)) = &original {
                        let fellows: Vec<Uuid> = strategy.replicas(with, range.end).into_iter().map(uuid).collect();
                        let source = fellows
                            .iter()
                            .copied()
                            .find(|r| r != dead && *r != view.local && view.is_alive(*r))
                            .ok_or_else(|| {
                                format!(
                                    "Unable to find sufficient sources for streaming range ({}, {}] of {}",
                                    range.start, range.end, ks.name
                                )
                            })?;
                        by_source.entry(source).or_default().push((range.start, range.end));
                        continue;
                    }
                    let old = view.replicas(ks, range.end);
                    let losing: Vec<Uuid> = old.iter().copied().filter(|r| !new.contains(r)).collect();
                    let source = if strict && !losing.is_empty() {
                        losing.iter().copied().find(|r| view.is_alive(*r)).ok_or_else(|| {
                            let down: Vec<String> = losing.iter().map(|r| format!("/{}", address(*r))).collect();
                            format!(
                                "A node required to move the data consistently is down: {}. To stream from \
                                 another replica, which may not hold every write, set consistent_rangemovement: false",
                                down.join(", ")
                            )
                        })?
                    } else {
                        old.iter().copied().find(|r| *r != view.local && view.is_alive(*r)).ok_or_else(|| {
                            format!(
                                "Unable to find sufficient sources for streaming range ({}, {}] of {}",
                                range.start, range.end, ks.name
                            )
                        })?
                    };
                    by_source.entry(source).or_default().push((range.start, range.end));
                }
                self.stream_keyspace(&receiver, &view, ks, by_source, &mut sessions, &mut totals).await?;
            }
        }
        Ok(stream_report("bootstrap", sessions, &totals, started))
    }

    /// Repair (nodetool repair): for each range this node replicates (only
    /// those it is primary for with `primary_only`) of the user keyspaces (or
    /// `keyspace`, and of `tables` when given), the replicas compare hashes
    /// (compacting the table first, as Cassandra's validation reads every
    /// SSTable) of slices of the range, then of the partitions of differing
    /// slices; this node pushes its version of each differing partition to
    /// the replicas that differ, which merge it and answer what it lacked
    /// (`cluster::repair::repair_range`). With `preview`, only reports what
    /// differs. Every replica of a range must be up. The report counts the
    /// bytes this node sent and received for it (`bytes_on_wire`).
    ///
    /// The ranges of a table it finished (also those before a failure) are
    /// recorded as repaired at the repair's start, here and on their other
    /// replicas (`record_repaired`): the repaired horizon below which their
    /// tombstones may be purged (`cluster::repaired`).
    pub async fn repair(
        &self,
        keyspace: Option<&str>,
        tables: &[String],
        primary_only: bool,
        preview: bool,
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
        let result = self.repair_run(keyspace, tables, primary_only, preview, trigger).await;
        let mut history = self.repairs.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(run) = history.iter_mut().rev().find(|r| r["id"] == json!(id)) {
            match &result {
                Ok(report) => {
                    run["state"] = json!("done");
                    for field in
                        ["partitions_compared", "partitions_differing", "bytes_repaired", "bytes_on_wire", "seconds"]
                    {
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
        trigger: RepairTrigger,
    ) -> Result<Json, String> {
        let started = Instant::now();
        let view = self.coordinator.view.snapshot();
        let schema = self.schema.snapshot();
        if let Some(name) = keyspace {
            let Some(ks) = schema.keyspaces.get(name).filter(|_| !Schema::is_system(name)) else {
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
        let mut report = Vec::new();
        let mut total = cluster::repair::RangeRepair::default();
        for ks in schema.keyspaces.values() {
            if Schema::is_system(&ks.name) || keyspace.is_some_and(|k| k != ks.name) {
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
                let mut ranges = 0;
                // The ranges finished, with their replicas.
                let mut done: Vec<((i64, i64), Vec<Uuid>)> = Vec::new();
                let mut failed = None;
                for (range, primary) in view.ring.ranges() {
                    let replicas = view.replicas(ks, range.end);
                    if !replicas.contains(&view.local) || replicas.len() < 2 {
                        continue;
                    }
                    if trigger == RepairTrigger::Schedule && self.preempt.load(Ordering::SeqCst) {
                        failed = Some("stopped for another operation (it runs again at a later check)".to_string());
                        break;
                    }
                    if primary_only && cluster::view::uuid(primary) != view.local {
                        continue;
                    }
                    if let Some(dead) = replicas.iter().find(|r| !view.is_alive(**r)) {
                        let addr = view.endpoint(*dead).map_or_else(|| dead.to_string(), |e| e.internode.to_string());
                        failed = Some(format!("Endpoint not alive: /{addr}"));
                        break;
                    }
                    ranges += 1;
                    let task = cluster::repair::RangeTask {
                        table: table.id,
                        range: (range.start, range.end),
                        replicas: &replicas,
                        now,
                        preview,
                    };
                    match cluster::repair::repair_range(&self.coordinator, &view, &task, &mut validated).await {
                        Ok(outcome) => t.add(&outcome),
                        Err(e) => {
                            failed = Some(format!(
                                "repair of {}.{} failed in range ({}, {}]: {e}",
                                ks.name, table.name, range.start, range.end
                            ));
                            break;
                        }
                    }
                    if !preview {
                        done.push(((range.start, range.end), replicas));
                    }
                }
                if !preview {
                    self.record_repaired(&view, table.id, started_at, &done).await;
                }
                if let Some(e) = failed {
                    return Err(e);
                }
                total.add(&t);
                report.push(json!({
                    "keyspace": ks.name,
                    "table": table.name,
                    "ranges": ranges,
                    "partitions_compared": t.compared,
                    "partitions_differing": t.differing,
                    "bytes_estimated": t.estimated_bytes,
                    "bytes_repaired": t.repaired_bytes,
                    "bytes_on_wire": t.wire_bytes,
                }));
            }
        }
        Ok(json!({
            "operation": if preview { "repair --preview" } else { "repair" },
            "keyspace": keyspace,
            "primary_range_only": primary_only,
            "tables": report,
            "partitions_compared": total.compared,
            "partitions_differing": total.differing,
            "bytes_estimated": total.estimated_bytes,
            "bytes_repaired": total.repaired_bytes,
            "bytes_on_wire": total.wire_bytes,
            "repaired_at": (!preview).then_some(started_at),
            "seconds": started.elapsed().as_secs_f64(),
        }))
    }

    /// Records that the repair that began at `at` finished `done` (ranges of
    /// `table`, with their replicas): in this node's metadata, and on every
    /// other replica of each range (`RepairedReq`). A replica that is not
    /// told keeps an older time, which only keeps tombstones longer.
    async fn record_repaired(&self, view: &ClusterView, table: Uuid, at: i64, done: &[((i64, i64), Vec<Uuid>)]) {
        if done.is_empty() {
            return;
        }
        let mut by_replica: BTreeMap<Uuid, Vec<(i64, i64)>> = BTreeMap::new();
        for (range, replicas) in done {
            for r in replicas {
                by_replica.entry(*r).or_default().push(*range);
            }
        }
        for (replica, ranges) in by_replica {
            let outcome = if replica == view.local {
                let storage = Arc::clone(&self.coordinator.storage);
                tokio::task::spawn_blocking(move || {
                    cluster::repaired::record(&storage, &table, &ranges, at).map_err(|e| e.to_string())
                })
                .await
                .map_err(|e| e.to_string())
                .and_then(|r| r)
            } else {
                match view.endpoint(replica).map(|e| e.internode) {
                    Some(addr) => {
                        let body = wire::encode_repaired(&wire::Repaired { table, repaired_at: at, ranges });
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
            let Some(ks) = schema.keyspaces.get(name).filter(|_| !Schema::is_system(name)) else {
                return Err(format!("Unknown keyspace '{name}'"));
            };
            if let Some(t) = tables.iter().find(|t| !ks.tables.contains_key(t.as_str())) {
                return Err(format!("Unknown table '{t}' in keyspace '{name}'"));
            }
        }
        let mut report = Vec::new();
        for ks in schema.keyspaces.values() {
            if Schema::is_system(&ks.name) || keyspace.is_some_and(|k| k != ks.name) {
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
            .filter(|ks| !Schema::is_system(&ks.name) && !matches!(ks.replication, Replication::Local))
            .collect();
        let live_in_dc = view.ring.dc_node_count(&me.dc);
        for ks in &keyspaces {
            let rf = cluster::view::strategy(&ks.replication).rf_in_dc(&me.dc) as usize;
            if rf > 0 && live_in_dc.saturating_sub(1) < rf {
                return Err(format!(
                    "Not enough live nodes to maintain replication factor in keyspace {} (RF = {rf}, N = {live_in_dc}). \
                     Lower the replication factor first.",
                    ks.name
                ));
            }
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
        let mut after = view.ring.clone();
        after.remove_node(host(view.local));
        let mut sessions = Vec::new();
        let mut totals = StreamStats::default();
        let receiver = self.receiver();
        let result = async {
            for ks in &keyspaces {
                let strategy = cluster::view::strategy(&ks.replication);
                let mut by_target: BTreeMap<Uuid, Vec<(i64, i64)>> = BTreeMap::new();
                for (range, _) in view.ring.ranges() {
                    let old = view.replicas(ks, range.end);
                    if !old.contains(&view.local) {
                        continue;
                    }
                    for gaining in strategy.replicas(&after, range.end).into_iter().map(uuid) {
                        if !old.contains(&gaining) {
                            by_target.entry(gaining).or_default().push((range.start, range.end));
                        }
                    }
                }
                for (target, ranges) in by_target {
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
        let mut after = view.ring.clone();
        after.remove_node(host(host_id));
        let schema = self.schema.snapshot();
        let prefer = view.local_dc().to_string();
        let mut sessions = Vec::new();
        let mut totals = StreamStats::default();
        let receiver = self.receiver();
        for ks in schema.keyspaces.values() {
            if Schema::is_system(&ks.name) || matches!(ks.replication, Replication::Local) {
                continue;
            }
            let strategy = cluster::view::strategy(&ks.replication);
            // (gaining node, source) -> ranges.
            let mut moves: BTreeMap<(Uuid, Uuid), Vec<(i64, i64)>> = BTreeMap::new();
            for (range, _) in view.ring.ranges() {
                let old = view.replicas(ks, range.end);
                if !old.contains(&host_id) {
                    continue;
                }
                for gaining in strategy.replicas(&after, range.end).into_iter().map(uuid) {
                    if old.contains(&gaining) {
                        continue;
                    }
                    let source = old
                        .iter()
                        .copied()
                        .filter(|r| *r != host_id && view.is_alive(*r))
                        .min_by_key(|r| view.dc_of(*r) != Some(prefer.as_str()))
                        .ok_or_else(|| {
                            format!(
                                "Unable to find sufficient sources for streaming range ({}, {}] of {}",
                                range.start, range.end, ks.name
                            )
                        })?;
                    moves.entry((gaining, source)).or_default().push((range.start, range.end));
                }
            }
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
