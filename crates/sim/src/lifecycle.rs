//! Topology changes and repair during a run (issue 21), driven the way an
//! operator and the nodes drive them, with the code the server runs:
//! `cluster::movement` decides which ranges move from where to where,
//! `cluster::stream` moves them (a joiner's `Receiver::fetch`; a gaining
//! node's `serve_pull`, what it runs on `StreamPullReq`), and
//! `cluster::repair::repair_range` repairs. Only the sequencing (announce,
//! ring delay, stream, announce) is the simulator's, after
//! `node::lifecycle` and `node::join`.
//!
//! Operations, one at a time (the cluster's own rule):
//! - join: a new node announced JOINING with its tokens (coordinators then
//!   write to it as a pending replica, blockFor + 1); after `RING_DELAY` it
//!   streams each range it will replicate from the replica that loses it
//!   (strict), then is announced NORMAL. Killed, it is either given up on
//!   (retired, announced LEFT: its writes also went to the old replicas) or
//!   restarted and resumes.
//! - decommission: a NORMAL node announced LEAVING; after `RING_DELAY` each
//!   gaining node pulls its ranges from it; then LEFT, and it stops. A failed
//!   hand-over (the leaver killed, or too many failed sessions) makes it
//!   NORMAL again.
//! - removenode: a node is killed for good; once a live node sees it down it
//!   announces it being removed (LEAVING), the gaining nodes pull from live
//!   surviving replicas, it is announced LEFT, and the gaining nodes are
//!   repaired (removenode copies from any replica, which may lack writes the
//!   dead node held: Cassandra's advice, and the simulator's, is to repair).
//! - replace: a node is killed for good; a new node takes its tokens (the
//!   dead one LEFT, the new one JOINING at once), bootstraps its ranges from
//!   the dead node's fellow replicas, turns NORMAL, and is repaired.
//! - repair: every range a node replicates, `repair_range` with each.
//!
//! Failed stream sessions are tried again with the same session id
//! (resuming from the files already fetched); a session that makes no
//! progress in `SESSION_TIMEOUT` counts as failed. Removals and
//! replacements are never given up (they end once the network heals);
//! joins and decommissions give up after `TRIES` rounds.
//!
//! After every operation, and every `MONITOR_PERIOD` while clients run,
//! each acknowledged write must be on a quorum of the replicas its
//! partition has at that moment (`check_quorum_now`): a wrong stream plan,
//! a coordinator that skips pending replicas or a hand-over that moves
//! nothing shows there, for the while before hints or later writes hide it.
//!
//! Invariants:
//! - At most one operation runs at a time, and a node killed for good
//!   (`Ops::doomed`) stays dead until it has been removed or replaced and
//!   the repair after it has ended.
//! - While a node killed for good is not yet replaced or removed and
//!   repaired, reads of the partitions it replicated are exempt from the
//!   read checks (`checker::Exemption`): its share of acknowledged writes
//!   may exist on one other replica only until that repair, in Cassandra as
//!   here.
//! - Every random draw (host ids, tokens, sessions, choices) comes from the
//!   run's seeded generator.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use cluster::movement::{self, Ranges};
use cluster::repair::{self, RangeRepair, RangeTask};
use cluster::stream::StreamStats;
use cluster::{wire, Status};
use rand::Rng;
use uuid::Uuid;

use crate::checker::{self, Exemption, Property, Violation};
use crate::harness::{endpoint, lock, name_of, SimNode, Spread, State};
use crate::run::{self, Sabotage, Shared};
use crate::table;

/// How long a change is announced before ranges move: every view has it by
/// then (`harness::GOSSIP_DELAY_MAX`) and every write sent under an older
/// view has landed or timed out (the write timeout, plus the network's
/// largest delay).
pub const RING_DELAY: Duration = Duration::from_secs(2);
/// A stream session that has not finished in this long counts as failed.
const SESSION_TIMEOUT: Duration = Duration::from_secs(3);
/// The repair of one range that has not finished in this long fails.
const RANGE_REPAIR_TIMEOUT: Duration = Duration::from_secs(3);
/// Rounds of sessions before a join or decommission gives up.
const TRIES: usize = 6;
/// Between two rounds.
const RETRY_PAUSE: Duration = Duration::from_millis(700);
/// How long an operation waits for a killed node to come back, or for a
/// node to see a dead one down.
const WAIT_MAX: Duration = Duration::from_secs(30);
/// Polling period of those waits.
const POLL: Duration = Duration::from_millis(100);
/// Nodes ever opened in a run (joins and replacements add nodes).
pub const NODES_MAX: usize = 9;
/// Fewest NORMAL nodes: the replication factor.
const NORMAL_MIN: usize = table::REPLICATION_FACTOR as usize;
/// Most NORMAL nodes a join may lead to.
const NORMAL_MAX: usize = 6;

/// The operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    Join,
    Decommission,
    Removenode,
    Replace,
    Repair,
}

/// What the operations did, over a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpStats {
    pub joined: usize,
    pub joins_aborted: usize,
    pub decommissioned: usize,
    pub decommissions_aborted: usize,
    pub removed: usize,
    pub replaced: usize,
    pub repairs: usize,
    pub repairs_failed: usize,
    /// Stream sessions that failed and were tried again (or given up).
    pub sessions_failed: usize,
    /// Nodes the nemesis killed (and restarted).
    pub kills: usize,
}

impl OpStats {
    pub fn add(&mut self, o: &OpStats) {
        self.joined += o.joined;
        self.joins_aborted += o.joins_aborted;
        self.decommissioned += o.decommissioned;
        self.decommissions_aborted += o.decommissions_aborted;
        self.removed += o.removed;
        self.replaced += o.replaced;
        self.repairs += o.repairs;
        self.repairs_failed += o.repairs_failed;
        self.sessions_failed += o.sessions_failed;
        self.kills += o.kills;
    }
}

impl std::fmt::Display for OpStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "joins {} (+{} aborted), decommissions {} (+{} aborted), removals {}, replacements {}, repairs {} (+{} failed), {} sessions retried, {} kills",
            self.joined,
            self.joins_aborted,
            self.decommissioned,
            self.decommissions_aborted,
            self.removed,
            self.replaced,
            self.repairs,
            self.repairs_failed,
            self.sessions_failed,
            self.kills
        )
    }
}

/// The operations' state that the nemesis and the final phases look at.
#[derive(Debug, Default)]
pub struct Ops {
    /// Nodes the operation in progress moves or streams between (the
    /// nemesis kills among them first).
    pub involved: Vec<usize>,
    /// A node killed for good, until it is removed or replaced and the
    /// repair after it has ended.
    pub doomed: Option<usize>,
    /// The node the nemesis killed and will restart.
    pub killed: Option<usize>,
    /// Joiners given up on: never restarted.
    pub abandoned: Vec<usize>,
    pub stats: OpStats,
    pub exemptions: Vec<Exemption>,
}

fn event(shared: &Shared, what: std::fmt::Arguments<'_>) {
    shared.clock.event("operator", what);
}

fn set_involved(shared: &Shared, nodes: Vec<usize>) {
    lock(&shared.ops).involved = nodes;
}

fn stats(shared: &Shared, f: impl FnOnce(&mut OpStats)) {
    f(&mut lock(&shared.ops).stats);
}

fn harness_error(detail: String) -> Violation {
    Violation::new(Property::Harness, detail)
}

/// A random element of `from` (None when empty).
fn pick(shared: &Shared, from: &[usize]) -> Option<usize> {
    if from.is_empty() {
        return None;
    }
    let i = lock(&shared.rng).gen_range(0..from.len());
    from.get(i).copied()
}

fn new_id(shared: &Shared) -> Uuid {
    Uuid::from_u128(lock(&shared.rng).gen())
}

/// Running NORMAL nodes.
fn normal_running(shared: &Shared) -> Vec<usize> {
    let cluster = &shared.cluster;
    cluster.with_status(Status::Normal).into_iter().filter(|i| cluster.node(*i).is_some_and(|n| n.running())).collect()
}

/// Checks, right after an operation ends, that every acknowledged write is
/// on a quorum of the replicas its partition has now (read from their
/// storage, down or not): true at every moment, since a write is on a
/// quorum when acknowledged and a consistent range movement hands the
/// losing replica's copy to the gaining one, except where an exemption is
/// open (a node killed for good, not yet repaired after).
fn check_quorum_now(shared: &Shared, when: &str) -> Result<(), Violation> {
    let exemptions = lock(&shared.ops).exemptions.clone();
    // Exempt partitions are not judged, nor read: while a dead node's
    // replacement joins, a three-node ring has two members.
    let open = |pk: &i32| exemptions.iter().any(|e| e.until.is_none() && e.pks.contains(pk));
    let judged = (0..shared.params.partitions).filter(|pk| !open(pk));
    let snapshots = run::local_snapshots_of(&shared.cluster, judged, when)?;
    let quorum = table::REPLICATION_FACTOR as usize / 2 + 1;
    checker::check_quorum_durable(&lock(&shared.history), &snapshots, quorum, &exemptions)
}

/// How often `monitor` checks the quorum invariant.
const MONITOR_PERIOD: Duration = Duration::from_millis(500);

/// Checks the quorum invariant (`check_quorum_now`) every `MONITOR_PERIOD`
/// until `until`: the copies a write lacks between a topology change and
/// a hint replay exist only for a while.
pub(crate) async fn monitor(shared: Arc<Shared>, until: tokio::time::Instant) -> Result<(), Violation> {
    loop {
        tokio::time::sleep(MONITOR_PERIOD).await;
        if tokio::time::Instant::now() >= until {
            return Ok(());
        }
        check_quorum_now(&shared, &format!("at {:.3}s", shared.clock.now().as_secs_f64()))?;
    }
}

/// Runs the operations until `until` (drawn from the seed), or `script`
/// (fraction of the workload at which to start, operation) to its end.
pub(crate) async fn operator(
    shared: Arc<Shared>,
    until: tokio::time::Instant,
    script: Option<Vec<(f64, OpKind)>>,
) -> Result<(), Violation> {
    if let Some(script) = script {
        let start = tokio::time::Instant::now();
        for (at, op) in script {
            let when = start + shared.params.workload.mul_f64(at.max(0.0));
            tokio::time::sleep_until(when).await;
            run_op(&shared, op).await?;
        }
        return Ok(());
    }
    loop {
        let (gap, roll) = {
            let mut rng = lock(&shared.rng);
            (Duration::from_millis(rng.gen_range(300..=2_500)), rng.gen_range(0..100))
        };
        if tokio::time::Instant::now() + gap >= until {
            return Ok(());
        }
        tokio::time::sleep(gap).await;
        let cluster = &shared.cluster;
        let normal = cluster.with_status(Status::Normal).len();
        let room = cluster.nodes().len() < NODES_MAX;
        let kills = shared.params.kills;
        let op = match roll {
            0..=29 if room && normal < NORMAL_MAX => OpKind::Join,
            30..=49 if normal > NORMAL_MIN => OpKind::Decommission,
            50..=64 if kills && normal > NORMAL_MIN => OpKind::Removenode,
            65..=79 if kills && room => OpKind::Replace,
            _ => OpKind::Repair,
        };
        run_op(&shared, op).await?;
    }
}

async fn run_op(shared: &Arc<Shared>, op: OpKind) -> Result<(), Violation> {
    let ran = match op {
        OpKind::Join => join(shared).await,
        OpKind::Decommission => decommission(shared).await,
        OpKind::Removenode => removenode(shared).await,
        OpKind::Replace => replace(shared).await,
        OpKind::Repair => {
            let Some(i) = pick(shared, &normal_running(shared)) else { return Ok(()) };
            let Some(node) = shared.cluster.node(i) else { return Ok(()) };
            event(shared, format_args!("repair {}", node.name()));
            match repair_node(shared, &node, false).await {
                Ok(r) => {
                    event(shared, format_args!("repair {} done: {} partitions differed", node.name(), r.differing));
                    stats(shared, |s| s.repairs += 1);
                }
                Err(e) => {
                    event(shared, format_args!("repair {} failed: {e}", node.name()));
                    stats(shared, |s| s.repairs_failed += 1);
                }
            }
            Ok(())
        }
    };
    set_involved(shared, Vec::new());
    ran?;
    check_quorum_now(shared, &format!("after the {op:?}"))
}

/// Waits until `node` runs again (the nemesis restarts the nodes it kills);
/// false after `WAIT_MAX`.
async fn wait_running(node: &SimNode) -> bool {
    let deadline = tokio::time::Instant::now() + WAIT_MAX;
    while !node.running() {
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(POLL).await;
    }
    true
}

/// Waits until `watcher`'s view has `dead` down; false after `WAIT_MAX`.
async fn wait_seen_down(watcher: &SimNode, dead: Uuid) -> bool {
    let deadline = tokio::time::Instant::now() + WAIT_MAX;
    while watcher.view.snapshot().is_alive(dead) {
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(POLL).await;
    }
    true
}

/// One session of a bootstrap: `node` fetches `ranges` of `table` from `source`.
async fn fetch(
    node: &SimNode,
    source: SocketAddr,
    session: Uuid,
    table: Uuid,
    ranges: &Ranges,
) -> Result<StreamStats, String> {
    match tokio::time::timeout(SESSION_TIMEOUT, node.receiver().fetch(source, session, table, ranges)).await {
        Ok(result) => result,
        Err(_) => Err(format!("unfinished after {SESSION_TIMEOUT:?}")),
    }
}

/// One session of a decommission or removenode: `target` pulls `ranges` of
/// `table` from `source`, as it does on `StreamPullReq`.
async fn pull(
    target: &SimNode,
    source: SocketAddr,
    session: Uuid,
    table: Uuid,
    ranges: &Ranges,
) -> Result<StreamStats, String> {
    let payload = wire::encode_stream_pull(&wire::StreamPull { session, table, source, ranges: ranges.clone() });
    let streams = target.streams();
    let served = tokio::time::timeout(
        SESSION_TIMEOUT,
        cluster::stream::serve_pull(&streams, &target.coordinator.transport, &payload),
    )
    .await
    .map_err(|_| format!("unfinished after {SESSION_TIMEOUT:?}"))??;
    wire::decode_stream_stats(&served).map_err(|e| e.to_string())
}

/// The sabotage of a bootstrap: the planned range holding the most of the
/// run's partitions, left out.
fn skip_one_range(shared: &Shared, who: &str, plan: &mut BTreeMap<Uuid, Ranges>) {
    let tokens: Vec<i64> = (0..shared.params.partitions).map(table::token).collect();
    let holds =
        |(start, end): (i64, i64), t: i64| if start < end { t > start && t <= end } else { t > start || t <= end };
    let best = plan
        .iter()
        .flat_map(|(s, rs)| rs.iter().map(move |r| (*s, *r)))
        .max_by_key(|(_, r)| tokens.iter().filter(|t| holds(*r, **t)).count());
    if let Some((source, range)) = best {
        let count = tokens.iter().filter(|t| holds(range, **t)).count();
        event(shared, format_args!("sabotage: {who} skips streaming ({}, {}] ({count} partitions)", range.0, range.1));
        if let Some(ranges) = plan.get_mut(&source) {
            ranges.retain(|r| *r != range);
            if ranges.is_empty() {
                plan.remove(&source);
            }
        }
    }
}

/// Streams the ranges `node` (JOINING, its tokens announced `RING_DELAY`
/// ago) will replicate, replacing `replacing` if given: rounds of
/// `movement::Bootstrap` plans from its own view, each failed session
/// resumed (same id) in the next round, a finished one not run again. Err
/// when it gives up (a join only: `give_up`).
async fn bootstrap(
    shared: &Arc<Shared>,
    node: &Arc<SimNode>,
    replacing: Option<Uuid>,
    give_up: bool,
) -> Result<(), String> {
    let ks = Arc::clone(&shared.cluster.keyspace);
    let who = node.name();
    let mut sessions: BTreeMap<(Uuid, Uuid, Ranges), Uuid> = BTreeMap::new();
    let mut done: BTreeSet<(Uuid, Uuid, Ranges)> = BTreeSet::new();
    let mut last = String::new();
    let mut round = 0;
    loop {
        round += 1;
        if give_up && round > TRIES {
            return Err(format!("gave up after {TRIES} rounds: {last}"));
        }
        if !node.running() {
            if give_up && lock(&shared.rng).gen_bool(0.5) {
                return Err(format!("{who} was killed"));
            }
            event(shared, format_args!("{who} waits to be restarted to resume its bootstrap"));
            if !wait_running(node).await {
                return Err(format!("{who} did not come back"));
            }
        }
        let view = node.view.snapshot();
        let plan = movement::Bootstrap::new(&view, replacing).and_then(|b| b.sources(&view, &ks, true));
        let mut plan = match plan {
            Ok(plan) => plan,
            Err(e) => {
                event(shared, format_args!("{who} cannot bootstrap yet: {e}"));
                last = e;
                tokio::time::sleep(RETRY_PAUSE).await;
                continue;
            }
        };
        if shared.sabotage == Some(Sabotage::SkipBootstrapRange) && replacing.is_none() {
            skip_one_range(shared, &who, &mut plan);
        }
        let mut involved = vec![node.index];
        involved.extend(plan.keys().filter_map(|s| shared.cluster.index_of(*s)));
        set_involved(shared, involved);
        let mut failed = None;
        'sessions: for (source, ranges) in &plan {
            let Some(addr) = view.endpoint(*source).map(|e| e.internode) else { continue };
            for table in ks.tables.values() {
                let key = (*source, table.id, ranges.clone());
                if done.contains(&key) {
                    continue;
                }
                let session = *sessions.entry(key.clone()).or_insert_with(|| new_id(shared));
                match fetch(node, addr, session, table.id, ranges).await {
                    Ok(s) => {
                        event(
                            shared,
                            format_args!(
                                "{who} streamed {} ranges from {} ({} bytes, {} fetched now)",
                                ranges.len(),
                                name_of(addr),
                                s.bytes,
                                s.fetched
                            ),
                        );
                        done.insert(key);
                    }
                    Err(e) => {
                        event(shared, format_args!("{who} streaming from {} failed: {e}", name_of(addr)));
                        stats(shared, |s| s.sessions_failed += 1);
                        failed = Some(e);
                        break 'sessions;
                    }
                }
            }
        }
        match failed {
            // It turns NORMAL itself: killed after its last session, it resumes (nothing left to stream) or gives up.
            None if node.running() => return Ok(()),
            None => last = format!("{who} was killed after streaming"),
            Some(e) => last = e,
        }
        tokio::time::sleep(RETRY_PAUSE).await;
    }
}

async fn join(shared: &Arc<Shared>) -> Result<(), Violation> {
    let cluster = &shared.cluster;
    let node = cluster.open_node(new_id(shared)).map_err(harness_error)?;
    let tokens = ring::tokens::random_tokens(&mut *lock(&shared.rng), cluster.vnodes);
    let (who, host_id, addr) = (node.name(), node.host_id, node.addr);
    set_involved(shared, vec![node.index]);
    cluster.announce(
        &mut lock(&shared.rng),
        Spread::Gossip { origin: Some(node.index) },
        format_args!("{who} JOINING with {} tokens", tokens.len()),
        |eps| {
            eps.insert(host_id, endpoint(host_id, addr, tokens, Status::Joining));
        },
    );
    tokio::time::sleep(RING_DELAY).await;
    match bootstrap(shared, &node, None, true).await {
        Ok(()) => {
            cluster.announce(&mut lock(&shared.rng), Spread::Everywhere, format_args!("{who} NORMAL"), |eps| {
                if let Some(e) = eps.get_mut(&host_id) {
                    e.status = Status::Normal;
                }
            });
            stats(shared, |s| s.joined += 1);
        }
        Err(e) => {
            // Given up: it never owned a range, and every write it took also went to the old replicas.
            event(shared, format_args!("join of {who} aborted: {e}"));
            lock(&shared.ops).abandoned.push(node.index);
            cluster.retire(node.index);
            cluster.announce(
                &mut lock(&shared.rng),
                Spread::Gossip { origin: None },
                format_args!("{who} LEFT (join aborted)"),
                |eps| {
                    if let Some(e) = eps.get_mut(&host_id) {
                        e.status = Status::Left;
                    }
                },
            );
            stats(shared, |s| s.joins_aborted += 1);
        }
    }
    Ok(())
}

async fn decommission(shared: &Arc<Shared>) -> Result<(), Violation> {
    let cluster = &shared.cluster;
    let ks = Arc::clone(&cluster.keyspace);
    let Some(leaver) = pick(shared, &normal_running(shared)).and_then(|i| cluster.node(i)) else { return Ok(()) };
    let (who, host_id) = (leaver.name(), leaver.host_id);
    let view = leaver.view.snapshot();
    let dc = view.local_dc().to_string();
    if let Err(e) = movement::check_decommission(&view, &ks, &dc)
        .and_then(|()| view.check_no_topology_change("decommission", host_id))
    {
        event(shared, format_args!("decommission of {who} refused: {e}"));
        return Ok(());
    }
    set_involved(shared, vec![leaver.index]);
    cluster.announce(
        &mut lock(&shared.rng),
        Spread::Gossip { origin: Some(leaver.index) },
        format_args!("{who} LEAVING"),
        |eps| {
            if let Some(e) = eps.get_mut(&host_id) {
                e.status = Status::Leaving;
            }
        },
    );
    tokio::time::sleep(RING_DELAY).await;
    let mut sessions: BTreeMap<(Uuid, Uuid, Ranges), Uuid> = BTreeMap::new();
    let mut done: BTreeSet<(Uuid, Uuid, Ranges)> = BTreeSet::new();
    let mut outcome = Err(String::from("no round ran"));
    for _ in 0..TRIES {
        if !leaver.running() {
            outcome = Err(format!("{who} was killed"));
            break;
        }
        let view = leaver.view.snapshot();
        let plan = movement::decommission(&view, &ks, host_id);
        let mut involved = vec![leaver.index];
        involved.extend(plan.keys().filter_map(|t| cluster.index_of(*t)));
        set_involved(shared, involved);
        let mut failed = None;
        'sessions: for (target, ranges) in &plan {
            let (Some(endpoint), Some(node)) =
                (view.endpoint(*target), cluster.index_of(*target).and_then(|i| cluster.node(i)))
            else {
                failed = Some("a new owner is not in the view".to_string());
                break;
            };
            if !endpoint.alive {
                failed = Some(format!("Cannot hand ranges to {}: it is down", node.name()));
                break;
            }
            for table in ks.tables.values() {
                let key = (*target, table.id, ranges.clone());
                if done.contains(&key) {
                    continue;
                }
                let session = *sessions.entry(key.clone()).or_insert_with(|| new_id(shared));
                let pulled = if shared.sabotage == Some(Sabotage::SkipDecommissionStreams) {
                    event(
                        shared,
                        format_args!("sabotage: {} does not pull {} ranges from {who}", node.name(), ranges.len()),
                    );
                    Ok(StreamStats::default())
                } else {
                    pull(&node, leaver.addr, session, table.id, ranges).await
                };
                match pulled {
                    Ok(s) => {
                        event(
                            shared,
                            format_args!(
                                "{} pulled {} ranges from {who} ({} bytes)",
                                node.name(),
                                ranges.len(),
                                s.bytes
                            ),
                        );
                        done.insert(key);
                    }
                    Err(e) => {
                        event(shared, format_args!("{} pulling from {who} failed: {e}", node.name()));
                        stats(shared, |s| s.sessions_failed += 1);
                        failed = Some(e);
                        break 'sessions;
                    }
                }
            }
        }
        match failed {
            None => {
                outcome = Ok(());
                break;
            }
            Some(e) => outcome = Err(e),
        }
        tokio::time::sleep(RETRY_PAUSE).await;
    }
    match outcome {
        Ok(()) => {
            cluster.announce(
                &mut lock(&shared.rng),
                Spread::Everywhere,
                format_args!("{who} LEFT (decommissioned)"),
                |eps| {
                    if let Some(e) = eps.get_mut(&host_id) {
                        e.status = Status::Left;
                    }
                },
            );
            cluster.retire(leaver.index);
            stats(shared, |s| s.decommissioned += 1);
        }
        Err(e) => {
            // Nothing was handed over for good: the node owns its ranges again.
            event(shared, format_args!("decommission of {who} failed, NORMAL again: {e}"));
            cluster.announce(
                &mut lock(&shared.rng),
                Spread::Gossip { origin: Some(leaver.index) },
                format_args!("{who} NORMAL"),
                |eps| {
                    if let Some(e) = eps.get_mut(&host_id) {
                        e.status = Status::Normal;
                    }
                },
            );
            stats(shared, |s| s.decommissions_aborted += 1);
        }
    }
    Ok(())
}

/// Kills a running NORMAL node for good: it is doomed, and reads of its
/// partitions are exempt until `end_exemption`.
fn doom(shared: &Shared, why: &str) -> Option<Arc<SimNode>> {
    let cluster = &shared.cluster;
    let victim = pick(shared, &normal_running(shared)).and_then(|i| cluster.node(i))?;
    let ring = cluster.ring_view();
    let pks: BTreeSet<i32> = (0..shared.params.partitions)
        .filter(|pk| ring.replicas(&cluster.keyspace, table::token(*pk)).contains(&victim.host_id))
        .collect();
    let from = lock(&shared.history).tick();
    {
        let mut ops = lock(&shared.ops);
        ops.doomed = Some(victim.index);
        ops.exemptions.push(Exemption {
            pks,
            from,
            until: None,
            why: format!("{} died for good ({why})", victim.name()),
        });
    }
    event(shared, format_args!("{} dies for good ({why})", victim.name()));
    cluster.kill(victim.index);
    Some(victim)
}

/// Ends the exemption of the doomed node: its ranges are repaired.
fn end_exemption(shared: &Shared) {
    let until = lock(&shared.history).tick();
    let mut ops = lock(&shared.ops);
    ops.doomed = None;
    for e in ops.exemptions.iter_mut().filter(|e| e.until.is_none()) {
        e.until = Some(until);
    }
}

/// Repairs `nodes` (every range each replicates) until each has succeeded
/// (or has left: none can while this operation runs).
async fn repair_until_done(shared: &Arc<Shared>, nodes: &[usize]) {
    for i in nodes {
        let Some(node) = shared.cluster.node(*i) else { continue };
        while node.state() != State::Gone {
            if node.running() {
                match repair_node(shared, &node, false).await {
                    Ok(r) => {
                        event(shared, format_args!("repair {} done: {} partitions differed", node.name(), r.differing));
                        stats(shared, |s| s.repairs += 1);
                        break;
                    }
                    Err(e) => {
                        event(shared, format_args!("repair {} failed: {e}", node.name()));
                        stats(shared, |s| s.repairs_failed += 1);
                    }
                }
            }
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }
}

async fn removenode(shared: &Arc<Shared>) -> Result<(), Violation> {
    let cluster = &shared.cluster;
    let ks = Arc::clone(&cluster.keyspace);
    let Some(dead) = doom(shared, "removenode") else { return Ok(()) };
    let (who, dead_id) = (dead.name(), dead.host_id);
    // The node that runs removenode: any live NORMAL node that sees the dead one down.
    let runner = loop {
        let Some(runner) = pick(shared, &normal_running(shared)).and_then(|i| cluster.node(i)) else {
            return Err(harness_error("no live node to run removenode".into()));
        };
        if wait_seen_down(&runner, dead_id).await {
            break runner;
        }
    };
    cluster.announce(
        &mut lock(&shared.rng),
        Spread::Gossip { origin: Some(runner.index) },
        format_args!("{who} being removed by {} (LEAVING)", runner.name()),
        |eps| {
            if let Some(e) = eps.get_mut(&dead_id) {
                e.status = Status::Leaving;
            }
        },
    );
    tokio::time::sleep(RING_DELAY).await;
    let mut sessions: BTreeMap<(Uuid, Uuid, Uuid, Ranges), Uuid> = BTreeMap::new();
    let mut done: BTreeSet<(Uuid, Uuid, Uuid, Ranges)> = BTreeSet::new();
    let mut runner = runner;
    let gaining: Vec<usize> = loop {
        if !runner.running() {
            if let Some(other) = pick(shared, &normal_running(shared)).and_then(|i| cluster.node(i)) {
                runner = other;
            }
        }
        let view = runner.view.snapshot();
        let moves = match movement::removenode(&view, &ks, dead_id, view.local_dc()) {
            Ok(moves) => moves,
            Err(e) => {
                event(shared, format_args!("removenode of {who} cannot stream yet: {e}"));
                tokio::time::sleep(RETRY_PAUSE).await;
                continue;
            }
        };
        let mut involved: Vec<usize> =
            moves.keys().flat_map(|(t, s)| [*t, *s]).filter_map(|id| cluster.index_of(id)).collect();
        involved.sort_unstable();
        involved.dedup();
        set_involved(shared, involved);
        let mut failed = false;
        'sessions: for ((target, source), ranges) in &moves {
            let (Some(to), Some(from)) =
                (cluster.index_of(*target).and_then(|i| cluster.node(i)), view.endpoint(*source))
            else {
                continue;
            };
            for table in ks.tables.values() {
                let key = (*target, *source, table.id, ranges.clone());
                if done.contains(&key) {
                    continue;
                }
                let session = *sessions.entry(key.clone()).or_insert_with(|| new_id(shared));
                match pull(&to, from.internode, session, table.id, ranges).await {
                    Ok(s) => {
                        event(
                            shared,
                            format_args!(
                                "{} pulled {} ranges from {} ({} bytes)",
                                to.name(),
                                ranges.len(),
                                name_of(from.internode),
                                s.bytes
                            ),
                        );
                        done.insert(key);
                    }
                    Err(e) => {
                        event(
                            shared,
                            format_args!("{} pulling from {} failed: {e}", to.name(), name_of(from.internode)),
                        );
                        stats(shared, |s| s.sessions_failed += 1);
                        failed = true;
                        break 'sessions;
                    }
                }
            }
        }
        if !failed {
            let mut targets: Vec<usize> = moves.keys().filter_map(|(t, _)| cluster.index_of(*t)).collect();
            targets.sort_unstable();
            targets.dedup();
            break targets;
        }
        tokio::time::sleep(RETRY_PAUSE).await;
    };
    cluster.announce(&mut lock(&shared.rng), Spread::Everywhere, format_args!("{who} LEFT (removed)"), |eps| {
        if let Some(e) = eps.get_mut(&dead_id) {
            e.status = Status::Left;
        }
    });
    cluster.retire(dead.index);
    repair_until_done(shared, &gaining).await;
    end_exemption(shared);
    stats(shared, |s| s.removed += 1);
    Ok(())
}

async fn replace(shared: &Arc<Shared>) -> Result<(), Violation> {
    let cluster = &shared.cluster;
    let Some(dead) = doom(shared, "replaced") else { return Ok(()) };
    let (dead_name, dead_id) = (dead.name(), dead.host_id);
    let tokens = cluster.membership().1.get(&dead_id).map(|e| e.tokens.clone()).unwrap_or_default();
    let node = cluster.open_node(new_id(shared)).map_err(harness_error)?;
    let (who, host_id, addr) = (node.name(), node.host_id, node.addr);
    set_involved(shared, vec![node.index]);
    // A replacement starts only once it sees the node it replaces dead.
    while !wait_seen_down(&node, dead_id).await {
        wait_running(&node).await;
    }
    cluster.announce(
        &mut lock(&shared.rng),
        Spread::Gossip { origin: Some(node.index) },
        format_args!("{dead_name} LEFT (replaced), {who} JOINING with its tokens"),
        |eps| {
            if let Some(e) = eps.get_mut(&dead_id) {
                e.status = Status::Left;
            }
            eps.insert(host_id, endpoint(host_id, addr, tokens, Status::Joining));
        },
    );
    cluster.retire(dead.index);
    tokio::time::sleep(RING_DELAY).await;
    if let Err(e) = bootstrap(shared, &node, Some(dead_id), false).await {
        return Err(Violation::new(
            Property::Liveness,
            format!("the replacement of {dead_name} by {who} stopped: {e}"),
        ));
    }
    cluster.announce(&mut lock(&shared.rng), Spread::Everywhere, format_args!("{who} NORMAL"), |eps| {
        if let Some(e) = eps.get_mut(&host_id) {
            e.status = Status::Normal;
        }
    });
    repair_until_done(shared, &[node.index]).await;
    end_exemption(shared);
    stats(shared, |s| s.replaced += 1);
    Ok(())
}

/// Repairs every range `node` replicates (only those it is primary for with
/// `primary_only`; `repair::ranges_to_repair`, as the server chooses them),
/// each with `repair_range`, as `nodetool repair` does; fails before it
/// starts if a replica is down, and at the first range that does not finish.
pub(crate) async fn repair_node(shared: &Shared, node: &SimNode, primary_only: bool) -> Result<RangeRepair, String> {
    let view = node.view.snapshot();
    let ks = &shared.cluster.keyspace;
    let mut validated = Vec::new();
    let mut total = RangeRepair::default();
    let ranges = repair::ranges_to_repair(&view, ks, primary_only).map_err(|dead| {
        let name = view.endpoint(dead).map_or_else(|| dead.to_string(), |e| name_of(e.internode));
        format!("Endpoint not alive: {name}")
    })?;
    for ((start, end), replicas) in ranges {
        let task = RangeTask {
            table: table::table_id(),
            range: (start, end),
            replicas: &replicas,
            now: table::READ_NOW_SECS,
            preview: false,
            compact: true,
        };
        let outcome = tokio::time::timeout(
            RANGE_REPAIR_TIMEOUT,
            repair::repair_range(&node.coordinator, &view, &task, &mut validated),
        )
        .await
        .map_err(|_| format!("range ({start}, {end}] unfinished after {RANGE_REPAIR_TIMEOUT:?}"))?
        .map_err(|e| format!("range ({start}, {end}]: {e}"))?;
        total.add(&outcome);
    }
    if node.state() != State::Running {
        return Err(format!("{} was killed", node.name()));
    }
    Ok(total)
}
