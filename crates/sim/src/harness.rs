//! The simulated cluster: real nodes in one process over one
//! `net::MemNetwork`. Each node has its own RocksDB `Storage` and
//! `HintStore` in a temporary directory, a real `cluster::Coordinator`, the
//! real replica handler (`cluster::verbs::serve`, with a `StreamSource`)
//! draining its inbound queue, and its own `ViewHandle`. Nodes can be added
//! (a joiner, a replacement), killed (their network endpoint and tasks
//! stop; storage and hints stay, as on a disk), restarted, and retired.
//!
//! Membership is modelled, not run: chitchat gossips over real UDP with an
//! unseeded RNG. Instead the cluster holds the membership as announced
//! (`Membership`: every endpoint with its tokens and status, one version per
//! change), and each node knows some version of it, plus its own verdicts
//! on liveness:
//! - an announcement (a joiner's JOINING with its tokens, a LEAVING, an
//!   abort) reaches the nodes one by one, each after a random gossip delay
//!   of at most `GOSSIP_DELAY_MAX` (`Spread::Gossip`); the end of a topology
//!   change (NORMAL, LEFT) reaches every node at once (`Spread::Everywhere`;
//!   see the crate docs for why);
//! - each running node runs a simulated failure detector: each
//!   `HEARTBEAT_PERIOD` it sends `Verb::Echo` to every peer it knows (not
//!   LEFT) over the same faulty network, marks a peer down in its own view
//!   after `CONVICT_AFTER_FAILURES` consecutive failed heartbeats and up again
//!   at the first success, publishes the view and tells its coordinator
//!   (`observe_liveness`). Views therefore disagree between nodes, as gossip
//!   views do.
//!
//! Nodes talk through `MemTransport`: when a node is killed
//! (`MemNetwork::remove_node`), every request it is waiting on fails at
//! once, in the order the requests were sent.
//!
//! Invariants:
//! - Everything runs on the caller's current-thread runtime with paused
//!   time; work on the blocking pool (streaming, repair) takes turns with it
//!   (`gate`), so nothing races.
//! - A node's view changes only when it learns a newer membership version or
//!   its own failure detector changes a verdict; it is always
//!   `ClusterView::build` of what it knows, as gossip's view is.
//! - Host ids, tokens and addresses are never reused: node `nI` is
//!   `10.0.0.(I+1)` for the whole run.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use cluster::stream::{Receiver, StreamRegistry, StreamSource};
use cluster::verbs::{self, SchemaSync};
use cluster::{ClusterView, Coordinator, CoordinatorConfig, Endpoint, Status, ViewHandle};
use net::{Inbound, MemNetwork, MemTransport, Transport, Verb};
use rand::rngs::StdRng;
use rand::Rng;
use storage::{CommitlogSync, Storage, StorageConfig};
use tokio::task::JoinHandle;
use types::schema::KeyspaceDef;
use uuid::Uuid;

use crate::history::Trace;
use crate::table;

pub const CLUSTER_NAME: &str = "sim";
pub const HEARTBEAT_PERIOD: Duration = Duration::from_millis(250);
pub const HEARTBEAT_TIMEOUT: Duration = Duration::from_millis(200);
pub const CONVICT_AFTER_FAILURES: u32 = 3;
/// The longest an announcement takes to reach a node.
pub const GOSSIP_DELAY_MAX: Duration = Duration::from_millis(500);
/// The size the simulated nodes cut their stream exports into.
const SIM_STREAM_FILE_BYTES: u64 = 64 << 10;

/// Short timeouts: virtual time is free, but each one is a step of the run.
pub fn coordinator_config() -> CoordinatorConfig {
    CoordinatorConfig {
        write_timeout: Duration::from_millis(500),
        read_timeout: Duration::from_millis(500),
        cas_contention_timeout: Duration::from_millis(1000),
        hinted_handoff_enabled: true,
        max_hint_window: Duration::from_secs(3 * 3600),
    }
}

/// Whether a node's process runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Running,
    /// Killed: no network, no tasks; its disk is kept (restart, or removal).
    Down,
    /// Left the cluster (decommissioned, removed, replaced, or a joiner given
    /// up on): never runs again.
    Gone,
}

/// What a node knows of the membership, and its failure detector's verdicts.
struct Known {
    version: u64,
    endpoints: Arc<BTreeMap<Uuid, Endpoint>>,
    alive: BTreeMap<Uuid, bool>,
    failures: BTreeMap<Uuid, u32>,
}

/// A node's process: its state and the tasks of its current life.
struct Life {
    state: State,
    tasks: Vec<JoinHandle<()>>,
    dispatcher: Option<JoinHandle<()>>,
}

/// One node.
pub struct SimNode {
    pub index: usize,
    pub host_id: Uuid,
    pub addr: SocketAddr,
    pub view: Arc<ViewHandle>,
    pub coordinator: Arc<Coordinator<MemTransport>>,
    pub storage: Arc<Storage>,
    pub hints: Arc<hints::HintStore>,
    pub registry: Arc<StreamRegistry>,
    /// Where received stream files wait to be ingested.
    pub spool: PathBuf,
    base: PathBuf,
    /// This life's stream source (exports do not survive a restart).
    streams: Mutex<Arc<StreamSource>>,
    known: Mutex<Known>,
    life: Mutex<Life>,
}

impl SimNode {
    pub fn name(&self) -> String {
        format!("n{}", self.index)
    }

    pub fn state(&self) -> State {
        lock(&self.life).state
    }

    pub fn running(&self) -> bool {
        self.state() == State::Running
    }

    /// This node's side of stream sessions it receives (bootstrap, rebuild).
    pub fn receiver(&self) -> Receiver<'_, MemTransport> {
        Receiver {
            transport: &self.coordinator.transport,
            storage: &self.storage,
            registry: &self.registry,
            spool: &self.spool,
        }
    }

    /// The stream source of this life (what serves `StreamPullReq` too).
    pub fn streams(&self) -> Arc<StreamSource> {
        Arc::clone(&lock(&self.streams))
    }

    /// The membership version this node knows.
    pub fn known_version(&self) -> u64 {
        lock(&self.known).version
    }

    /// Publishes the view built from what this node knows.
    fn publish_view(&self) {
        let view = {
            let known = lock(&self.known);
            let endpoints: BTreeMap<Uuid, Endpoint> = known
                .endpoints
                .iter()
                .map(|(id, e)| {
                    let mut e = e.clone();
                    e.alive = *id == self.host_id || known.alive.get(id).copied().unwrap_or(true);
                    (*id, e)
                })
                .collect();
            ClusterView::build(CLUSTER_NAME, self.host_id, endpoints, 0)
        };
        self.view.publish(view);
        self.coordinator.observe_liveness(&self.view.snapshot());
    }

    /// Learns membership `version` unless it knows a newer one.
    fn learn(&self, version: u64, endpoints: &Arc<BTreeMap<Uuid, Endpoint>>) {
        {
            let mut known = lock(&self.known);
            if version <= known.version {
                return;
            }
            known.version = version;
            known.endpoints = Arc::clone(endpoints);
        }
        self.publish_view();
    }
}

/// The schema never changes during a run: every node has it from the start.
pub(crate) struct FixedSchema;

impl SchemaSync for FixedSchema {
    fn version(&self) -> Uuid {
        Uuid::from_u128(1)
    }
    fn export(&self) -> Vec<u8> {
        Vec::new()
    }
    fn merge(&self, _payload: &[u8]) -> Result<bool, String> {
        Ok(false)
    }
}

/// Virtual time since the run started, and the trace, shared by every task.
pub struct Clock {
    pub start: tokio::time::Instant,
    pub trace: Mutex<Trace>,
}

impl Clock {
    pub fn new() -> Clock {
        Clock { start: tokio::time::Instant::now(), trace: Mutex::new(Trace::default()) }
    }

    pub fn now(&self) -> Duration {
        tokio::time::Instant::now() - self.start
    }

    pub fn event(&self, who: &str, what: std::fmt::Arguments<'_>) {
        let at = self.now();
        lock(&self.trace).event(at, who, what);
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The membership as announced: every endpoint that was ever part of the
/// cluster, with its tokens and status (`alive` is each view's own).
struct Membership {
    version: u64,
    endpoints: Arc<BTreeMap<Uuid, Endpoint>>,
}

/// How an announcement reaches the nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spread {
    /// Each node after its own random delay (at most `GOSSIP_DELAY_MAX`);
    /// the announcing node (if any) at once.
    Gossip { origin: Option<usize> },
    /// Every node at once.
    Everywhere,
}

pub struct SimCluster {
    pub net: MemNetwork,
    pub keyspace: Arc<KeyspaceDef>,
    pub vnodes: usize,
    nodes: Mutex<Vec<Arc<SimNode>>>,
    membership: Mutex<Membership>,
    dir: PathBuf,
    clock: Arc<Clock>,
    /// How often running nodes replay hints, while they do (the workload).
    dispatch: Mutex<Option<Duration>>,
}

pub fn endpoint(host_id: Uuid, addr: SocketAddr, tokens: Vec<i64>, status: Status) -> Endpoint {
    Endpoint {
        host_id,
        internode: addr,
        rpc_address: addr.ip(),
        native_port: 9042,
        dc: "datacenter1".to_string(),
        rack: "rack1".to_string(),
        tokens,
        status,
        alive: true,
        schema_version: None,
        release_version: "sim".to_string(),
        load_bytes: 0,
        generation: 1,
    }
}

/// Node `index`'s address.
pub fn address(index: usize) -> SocketAddr {
    let octet = u8::try_from(index + 1).unwrap_or(u8::MAX);
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, octet)), 7000)
}

/// The name (`nI`) of the node at `addr`.
pub fn name_of(addr: SocketAddr) -> String {
    match addr.ip() {
        IpAddr::V4(ip) => format!("n{}", ip.octets()[3].saturating_sub(1)),
        IpAddr::V6(ip) => ip.to_string(),
    }
}

/// What `open_replica` opens: a node's storage, hint store and coordinator.
pub(crate) type Replica = (Arc<Storage>, Arc<hints::HintStore>, Arc<Coordinator<MemTransport>>);

/// A node's storage (RocksDB under `base/data`, commit log periodic: writes
/// acknowledge at once, without the blocking pool), hint store
/// (`base/hints`) and coordinator over `transport` and `view`, with
/// `keyspace` installed. `name` prefixes the errors.
pub(crate) fn open_replica(
    base: &Path,
    name: &str,
    keyspace: &KeyspaceDef,
    cache_bytes: usize,
    memtable_space: usize,
    view: &Arc<ViewHandle>,
    transport: MemTransport,
) -> Result<Replica, String> {
    let config = StorageConfig {
        data_dir: base.join("data"),
        commitlog_sync: CommitlogSync::Periodic { period: Duration::from_secs(10) },
        cache_bytes,
        row_cache_bytes: 4 << 20,
        memtable_bytes: 4 << 20,
        memtable_space,
        tombstone_horizon: i64::MAX,
    };
    let (storage, _) = Storage::open(config).map_err(|e| format!("{name}: Storage::open: {e}"))?;
    storage.set_schema(std::slice::from_ref(keyspace)).map_err(|e| format!("{name}: set_schema: {e}"))?;
    let hints = hints::HintStore::open(hints::HintConfig::new(base.join("hints")))
        .map_err(|e| format!("{name}: HintStore::open: {e}"))?;
    let storage = Arc::new(storage);
    let hints = Arc::new(hints);
    let coordinator = Arc::new(Coordinator::new(
        Arc::clone(view),
        Arc::clone(&storage),
        transport,
        Arc::clone(&hints),
        coordinator_config(),
    ));
    Ok((storage, hints, coordinator))
}

impl SimCluster {
    /// Opens `n` NORMAL nodes under `dir` with tokens, host ids and the
    /// network seed drawn from `rng`, and starts them. Must run inside the
    /// simulation's runtime.
    pub fn start(
        rng: &mut StdRng,
        n: usize,
        vnodes: usize,
        dir: &Path,
        clock: &Arc<Clock>,
    ) -> Result<Arc<SimCluster>, String> {
        let net = MemNetwork::new(rng.gen());
        let mut endpoints = BTreeMap::new();
        let mut ids = Vec::with_capacity(n);
        for i in 0..n {
            let host_id = Uuid::from_u128(rng.gen());
            let tokens = ring::tokens::random_tokens(rng, vnodes);
            endpoints.insert(host_id, endpoint(host_id, address(i), tokens, Status::Normal));
            ids.push(host_id);
        }
        let cluster = Arc::new(SimCluster {
            net,
            keyspace: Arc::new(table::keyspace()),
            vnodes,
            nodes: Mutex::new(Vec::new()),
            membership: Mutex::new(Membership { version: 1, endpoints: Arc::new(endpoints) }),
            dir: dir.to_path_buf(),
            clock: Arc::clone(clock),
            dispatch: Mutex::new(None),
        });
        for host_id in ids {
            cluster.open_node(host_id)?;
        }
        Ok(cluster)
    }

    /// Opens a new node (the next index) with `host_id` and starts it. It
    /// knows the membership as announced now; announcing it is the caller's.
    pub fn open_node(self: &Arc<Self>, host_id: Uuid) -> Result<Arc<SimNode>, String> {
        let index = lock(&self.nodes).len();
        let addr = address(index);
        let name = format!("n{index}");
        let base = self.dir.join(&name);
        let (version, endpoints) = {
            let m = lock(&self.membership);
            (m.version, Arc::clone(&m.endpoints))
        };
        let (transport, inbound) = self.net.add_node(addr);
        let view = Arc::new(ViewHandle::new(ClusterView::build(CLUSTER_NAME, host_id, (*endpoints).clone(), 0)));
        let (storage, hints, coordinator) =
            open_replica(&base, &name, &self.keyspace, 1 << 20, 64 << 20, &view, transport)?;
        let registry = Arc::new(StreamRegistry::default());
        let streams = Arc::new(self.stream_source(&base, &storage, &registry));
        let node = Arc::new(SimNode {
            index,
            host_id,
            addr,
            view,
            coordinator,
            storage,
            hints,
            registry,
            spool: base.join("streams").join("in"),
            base,
            streams: Mutex::new(streams),
            known: Mutex::new(Known { version, endpoints, alive: BTreeMap::new(), failures: BTreeMap::new() }),
            life: Mutex::new(Life { state: State::Down, tasks: Vec::new(), dispatcher: None }),
        });
        node.publish_view();
        lock(&self.nodes).push(Arc::clone(&node));
        self.boot(&node, inbound, node.streams());
        Ok(node)
    }

    fn stream_source(&self, base: &Path, storage: &Arc<Storage>, registry: &Arc<StreamRegistry>) -> StreamSource {
        // Small files: the simulation's exports run to several, so the sender's flow control (a few
        // files ahead of the receiver, held files deleted) is in every stream it simulates.
        StreamSource::new(
            Arc::clone(storage),
            base.join("streams").join("out"),
            base.join("streams").join("in"),
            0,
            Arc::clone(registry),
        )
        .with_file_bytes(SIM_STREAM_FILE_BYTES)
    }

    /// Starts a life of `node` with `streams`: its verb handler, failure
    /// detector and (during the workload) hint dispatcher.
    fn boot(
        self: &Arc<Self>,
        node: &Arc<SimNode>,
        inbound: tokio::sync::mpsc::Receiver<Inbound>,
        streams: Arc<StreamSource>,
    ) {
        *lock(&node.streams) = Arc::clone(&streams);
        let serve = tokio::spawn(verbs::serve(Arc::clone(&node.coordinator), Arc::new(FixedSchema), streams, inbound));
        let detector = tokio::spawn(failure_detector(Arc::clone(node), Arc::clone(&self.clock)));
        let dispatcher = lock(&self.dispatch)
            .map(|period| tokio::spawn(verbs::dispatch_hints(Arc::clone(&node.coordinator), period)));
        let mut life = lock(&node.life);
        life.state = State::Running;
        life.tasks = vec![serve, detector];
        life.dispatcher = dispatcher;
    }

    /// Ends `node`'s current life (its tasks and network endpoint), leaving it in `state`.
    fn stop(&self, node: &SimNode, state: State) {
        let mut life = lock(&node.life);
        life.state = state;
        let dispatcher = life.dispatcher.take();
        for task in life.tasks.drain(..).chain(dispatcher) {
            task.abort();
        }
        drop(life);
        self.net.remove_node(node.addr);
    }

    /// Kills node `index` (a crash: it may be restarted, on the same disk).
    pub fn kill(&self, index: usize) {
        let Some(node) = self.node(index) else { return };
        if node.running() {
            self.clock.event("nemesis", format_args!("kill {}", node.name()));
            self.stop(&node, State::Down);
        }
    }

    /// Restarts node `index` if it is down: a new network endpoint, stream
    /// source and failure detector (which starts out seeing every peer up).
    pub fn restart(self: &Arc<Self>, index: usize) {
        let Some(node) = self.node(index) else { return };
        if node.state() != State::Down {
            return;
        }
        self.clock.event("nemesis", format_args!("restart {}", node.name()));
        {
            let mut known = lock(&node.known);
            known.alive.clear();
            known.failures.clear();
        }
        node.publish_view();
        let (_, inbound) = self.net.add_node(node.addr);
        let streams = Arc::new(self.stream_source(&node.base, &node.storage, &node.registry));
        self.boot(&node, inbound, streams);
    }

    /// Retires node `index` for good (it left, or was removed or given up on).
    pub fn retire(&self, index: usize) {
        let Some(node) = self.node(index) else { return };
        if node.state() != State::Gone {
            self.stop(&node, State::Gone);
        }
    }

    pub fn node(&self, index: usize) -> Option<Arc<SimNode>> {
        lock(&self.nodes).get(index).cloned()
    }

    /// Every node ever opened, by index.
    pub fn nodes(&self) -> Vec<Arc<SimNode>> {
        lock(&self.nodes).clone()
    }

    pub fn index_of(&self, host_id: Uuid) -> Option<usize> {
        lock(&self.nodes).iter().position(|n| n.host_id == host_id)
    }

    /// The membership as announced, and its version.
    pub fn membership(&self) -> (u64, Arc<BTreeMap<Uuid, Endpoint>>) {
        let m = lock(&self.membership);
        (m.version, Arc::clone(&m.endpoints))
    }

    /// The announced status of `host_id` (None: never announced).
    pub fn status_of(&self, host_id: Uuid) -> Option<Status> {
        lock(&self.membership).endpoints.get(&host_id).map(|e| e.status)
    }

    /// Announces a change of the membership, spread as `spread` says.
    pub fn announce(
        self: &Arc<Self>,
        rng: &mut StdRng,
        spread: Spread,
        what: std::fmt::Arguments<'_>,
        change: impl FnOnce(&mut BTreeMap<Uuid, Endpoint>),
    ) {
        let (version, endpoints) = {
            let mut m = lock(&self.membership);
            let mut endpoints = (*m.endpoints).clone();
            change(&mut endpoints);
            m.version += 1;
            m.endpoints = Arc::new(endpoints);
            (m.version, Arc::clone(&m.endpoints))
        };
        self.clock.event("gossip", format_args!("v{version}: {what}"));
        for node in self.nodes().into_iter().filter(|n| n.state() != State::Gone) {
            let delay = match spread {
                Spread::Everywhere => Duration::ZERO,
                Spread::Gossip { origin } if origin == Some(node.index) => Duration::ZERO,
                Spread::Gossip { .. } => Duration::from_micros(rng.gen_range(0..=GOSSIP_DELAY_MAX.as_micros() as u64)),
            };
            if delay.is_zero() {
                node.learn(version, &endpoints);
            } else {
                let endpoints = Arc::clone(&endpoints);
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    node.learn(version, &endpoints);
                });
            }
        }
    }

    /// A view of the ring as announced, every node up (the ring the checks
    /// judge replicas by).
    pub fn ring_view(&self) -> ClusterView {
        let (_, endpoints) = self.membership();
        let local = endpoints.values().find(|e| e.status == Status::Normal).map(|e| e.host_id).unwrap_or_default();
        ClusterView::build(CLUSTER_NAME, local, (*endpoints).clone(), 0)
    }

    /// Indices of `pk`'s replicas in the announced ring, primary first.
    pub fn replicas(&self, pk: i32) -> Vec<usize> {
        let view = self.ring_view();
        view.replicas(&self.keyspace, table::token(pk)).into_iter().filter_map(|id| self.index_of(id)).collect()
    }

    /// Indices of the nodes announced with `status`.
    pub fn with_status(&self, status: Status) -> Vec<usize> {
        self.nodes().iter().filter(|n| self.status_of(n.host_id) == Some(status)).map(|n| n.index).collect()
    }

    /// The nodes a client may use as its coordinator: running, and NORMAL or
    /// LEAVING (a joiner serves clients once it has joined).
    pub fn coordinators(&self) -> Vec<usize> {
        self.nodes()
            .iter()
            .filter(|n| n.running() && matches!(self.status_of(n.host_id), Some(Status::Normal | Status::Leaving)))
            .map(|n| n.index)
            .collect()
    }

    /// Starts (Some) or stops (None) the hint dispatcher of every running node.
    pub fn set_dispatch(&self, period: Option<Duration>) {
        *lock(&self.dispatch) = period;
        for node in self.nodes().iter().filter(|n| n.running()) {
            let mut life = lock(&node.life);
            if let Some(old) = life.dispatcher.take() {
                old.abort();
            }
            life.dispatcher =
                period.map(|period| tokio::spawn(verbs::dispatch_hints(Arc::clone(&node.coordinator), period)));
        }
    }

    /// Whether every running node knows the latest membership and sees every
    /// member (not LEFT) up.
    pub fn converged(&self) -> bool {
        let (version, _) = self.membership();
        self.nodes().iter().filter(|n| n.running()).all(|n| {
            n.known_version() == version
                && n.view.snapshot().endpoints.values().all(|e| e.alive || e.status == Status::Left)
        })
    }

    /// What keeps `converged` false, for a failure message.
    pub fn divergence(&self) -> Vec<String> {
        let (version, _) = self.membership();
        let mut out = Vec::new();
        for n in self.nodes().iter().filter(|n| n.running()) {
            if n.known_version() != version {
                out.push(format!("{} knows membership v{} of v{version}", n.name(), n.known_version()));
            }
            let view = n.view.snapshot();
            for e in view.endpoints.values().filter(|e| !e.alive && e.status != Status::Left) {
                out.push(format!("{} sees {} down", n.name(), name_of(e.internode)));
            }
        }
        out
    }

    /// Hints not yet delivered to a NORMAL node, in bytes, over the running
    /// nodes (hints for a node that left are never replayed).
    pub fn pending_hint_bytes(&self) -> u64 {
        let normal: Vec<Uuid> =
            self.with_status(Status::Normal).into_iter().filter_map(|i| self.node(i)).map(|n| n.host_id).collect();
        self.nodes()
            .iter()
            .filter(|n| n.running())
            .map(|n| {
                n.hints
                    .targets()
                    .into_iter()
                    .filter(|t| normal.contains(t))
                    .map(|t| n.hints.pending_bytes(t))
                    .sum::<u64>()
            })
            .sum()
    }
}

/// The simulated failure detector of `me` (see the module docs): runs until
/// its life ends.
async fn failure_detector(me: Arc<SimNode>, clock: Arc<Clock>) {
    let who = me.name();
    let mut tick = tokio::time::interval(HEARTBEAT_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let peers: Vec<(Uuid, SocketAddr)> = lock(&me.known)
            .endpoints
            .values()
            .filter(|e| e.host_id != me.host_id && e.status != Status::Left)
            .map(|e| (e.host_id, e.internode))
            .collect();
        // Queued now, all at once (send_request sends when called).
        let sends: Vec<_> = peers
            .iter()
            .map(|(_, addr)| me.coordinator.transport.send_request(*addr, Verb::Echo, Bytes::new(), HEARTBEAT_TIMEOUT))
            .collect();
        let mut results = Vec::with_capacity(sends.len());
        for send in sends {
            results.push(send.await.is_ok());
        }
        let mut changed = false;
        {
            let mut known = lock(&me.known);
            for ((id, addr), ok) in peers.iter().zip(results) {
                let failed = known.failures.entry(*id).or_insert(0);
                *failed = if ok { 0 } else { failed.saturating_add(1) };
                let convicted = *failed >= CONVICT_AFTER_FAILURES;
                let was = known.alive.get(id).copied().unwrap_or(true);
                let alive = if ok {
                    true
                } else if convicted {
                    false
                } else {
                    was
                };
                if alive != was {
                    known.alive.insert(*id, alive);
                    changed = true;
                    clock.event(&who, format_args!("marks {} {}", name_of(*addr), if alive { "UP" } else { "DOWN" }));
                }
            }
        }
        if changed {
            me.publish_view();
        }
    }
}
