//! The simulated cluster: N real nodes in one process over one
//! `net::MemNetwork`. Each node has its own RocksDB `Storage` and
//! `HintStore` in a temporary directory, a real `cluster::Coordinator`, the
//! real replica handler (`cluster::verbs::serve`) draining its inbound
//! queue, and its own `ViewHandle`.
//!
//! Membership is modelled, not run: chitchat gossips over real UDP with an
//! unseeded RNG, so instead every node starts knowing every endpoint (same
//! tokens, all NORMAL) and runs a simulated failure detector: each
//! `HEARTBEAT_PERIOD` it sends `Verb::Echo` to every peer over the same
//! faulty network, marks a peer down in its own view after
//! `CONVICT_AFTER_FAILURES` consecutive failed heartbeats and up again at
//! the first success, publishes the view and tells its coordinator
//! (`observe_liveness`). Views therefore disagree between nodes, as gossip
//! views do, but the ring never changes.
//!
//! Invariants:
//! - Everything runs on the caller's current-thread runtime with paused
//!   time; nothing here spawns threads or blocks on anything but local
//!   storage calls (periodic commit-log mode, so `serve` never uses
//!   `spawn_blocking`, which would let time run while a thread works).
//! - A node's view changes only through its own failure detector.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use cluster::verbs::{self, SchemaSync};
use cluster::{ClusterView, Coordinator, CoordinatorConfig, Endpoint, Status, ViewHandle};
use net::{MemNetwork, MemTransport, Transport, Verb};
use rand::rngs::StdRng;
use rand::Rng;
use storage::{CommitlogSync, Storage, StorageConfig};
use types::schema::KeyspaceDef;
use uuid::Uuid;

use crate::history::Trace;
use crate::table;

pub const CLUSTER_NAME: &str = "sim";
pub const HEARTBEAT_PERIOD: Duration = Duration::from_millis(250);
pub const HEARTBEAT_TIMEOUT: Duration = Duration::from_millis(200);
pub const CONVICT_AFTER_FAILURES: u32 = 3;

/// Short timeouts: virtual time is free, but each one is a step of the run.
pub fn coordinator_config() -> CoordinatorConfig {
    CoordinatorConfig {
        write_timeout: Duration::from_millis(500),
        read_timeout: Duration::from_millis(500),
        hinted_handoff_enabled: true,
        max_hint_window: Duration::from_secs(3 * 3600),
    }
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
}

/// The schema never changes during a run: every node has it from the start.
struct FixedSchema;

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

pub struct SimCluster {
    pub net: MemNetwork,
    pub nodes: Vec<Arc<SimNode>>,
    pub keyspace: Arc<KeyspaceDef>,
    /// Every endpoint as first published (all alive).
    pub endpoints: BTreeMap<Uuid, Endpoint>,
}

fn endpoint(host_id: Uuid, addr: SocketAddr, tokens: Vec<i64>) -> Endpoint {
    Endpoint {
        host_id,
        internode: addr,
        rpc_address: addr.ip(),
        native_port: 9042,
        dc: "datacenter1".to_string(),
        rack: "rack1".to_string(),
        tokens,
        status: Status::Normal,
        alive: true,
        schema_version: None,
        release_version: "sim".to_string(),
        load_bytes: 0,
        generation: 1,
    }
}

impl SimCluster {
    /// Opens `n` nodes under `dir` with tokens, host ids and the network seed
    /// drawn from `rng`, and starts their verb handlers. Must run inside the
    /// simulation's runtime.
    pub fn start(rng: &mut StdRng, n: usize, vnodes: usize, dir: &std::path::Path) -> Result<SimCluster, String> {
        let net = MemNetwork::new(rng.gen());
        let keyspace = Arc::new(table::keyspace());
        let mut endpoints = BTreeMap::new();
        let mut ids = Vec::with_capacity(n);
        for i in 0..n {
            let host_id = Uuid::from_u128(rng.gen());
            let addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, i as u8 + 1)), 7000);
            let tokens = ring::tokens::random_tokens(rng, vnodes);
            endpoints.insert(host_id, endpoint(host_id, addr, tokens));
            ids.push((host_id, addr));
        }
        let mut nodes = Vec::with_capacity(n);
        for (index, (host_id, addr)) in ids.into_iter().enumerate() {
            let base = dir.join(format!("n{index}"));
            let config = StorageConfig {
                data_dir: base.join("data"),
                // Acknowledge at once (no fsync on the write path, no blocking pool).
                commitlog_sync: CommitlogSync::Periodic { period: Duration::from_secs(10) },
                cache_bytes: 1 << 20,
                memtable_bytes: 4 << 20,
                memtable_space: 64 << 20,
                tombstone_horizon: i64::MAX,
            };
            let (storage, _) = Storage::open(config).map_err(|e| format!("n{index}: Storage::open: {e}"))?;
            storage.set_schema(std::slice::from_ref(&*keyspace)).map_err(|e| format!("n{index}: set_schema: {e}"))?;
            let hints = hints::HintStore::open(hints::HintConfig::new(base.join("hints")))
                .map_err(|e| format!("n{index}: HintStore::open: {e}"))?;
            let view = Arc::new(ViewHandle::new(ClusterView::build(CLUSTER_NAME, host_id, endpoints.clone(), 0)));
            let (transport, inbound) = net.add_node(addr);
            let storage = Arc::new(storage);
            let hints = Arc::new(hints);
            let coordinator = Arc::new(Coordinator::new(
                Arc::clone(&view),
                Arc::clone(&storage),
                transport,
                Arc::clone(&hints),
                coordinator_config(),
            ));
            let streams = Arc::new(cluster::stream::StreamSource::new(
                Arc::clone(&storage),
                base.join("streams").join("out"),
                base.join("streams").join("in"),
                0,
                Arc::default(),
            ));
            tokio::spawn(verbs::serve(Arc::clone(&coordinator), Arc::new(FixedSchema), streams, inbound));
            nodes.push(Arc::new(SimNode { index, host_id, addr, view, coordinator, storage, hints }));
        }
        Ok(SimCluster { net, nodes, keyspace, endpoints })
    }

    /// Indices of `pk`'s replicas, primary first (every view has the same ring).
    pub fn replicas(&self, pk: i32) -> Vec<usize> {
        let Some(first) = self.nodes.first() else { return Vec::new() };
        let view = first.view.snapshot();
        view.replicas(&self.keyspace, table::token(pk))
            .into_iter()
            .filter_map(|id| self.nodes.iter().position(|n| n.host_id == id))
            .collect()
    }

    /// Starts every node's failure detector (runs until the runtime stops).
    pub fn spawn_failure_detectors(&self, clock: &Arc<Clock>) {
        for node in &self.nodes {
            let peers: Vec<(usize, Uuid, SocketAddr)> =
                self.nodes.iter().filter(|p| p.index != node.index).map(|p| (p.index, p.host_id, p.addr)).collect();
            tokio::spawn(failure_detector(Arc::clone(node), peers, self.endpoints.clone(), Arc::clone(clock)));
        }
    }

    /// Whether every node's view has every endpoint alive.
    pub fn all_up(&self) -> bool {
        self.nodes.iter().all(|n| n.view.snapshot().endpoints.values().all(|e| e.alive))
    }

    /// Hints not yet delivered, in bytes, over all nodes.
    pub fn pending_hint_bytes(&self) -> u64 {
        self.nodes.iter().map(|n| n.hints.total_pending_bytes()).sum()
    }
}

/// The simulated failure detector of `me` (see the module docs).
async fn failure_detector(
    me: Arc<SimNode>,
    peers: Vec<(usize, Uuid, SocketAddr)>,
    mut endpoints: BTreeMap<Uuid, Endpoint>,
    clock: Arc<Clock>,
) {
    let who = format!("n{}", me.index);
    let mut failures = vec![0u32; peers.len()];
    let mut tick = tokio::time::interval(HEARTBEAT_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        // Queued now, all at once (send_request sends when called).
        let sends: Vec<_> = peers
            .iter()
            .map(|(_, _, addr)| {
                me.coordinator.transport.send_request(*addr, Verb::Echo, Bytes::new(), HEARTBEAT_TIMEOUT)
            })
            .collect();
        let mut changed = false;
        for ((send, (index, id, _)), failed) in sends.into_iter().zip(&peers).zip(failures.iter_mut()) {
            let ok = send.await.is_ok();
            *failed = if ok { 0 } else { failed.saturating_add(1) };
            let Some(e) = endpoints.get_mut(id) else { continue };
            let alive = if ok {
                true
            } else if *failed >= CONVICT_AFTER_FAILURES {
                false
            } else {
                e.alive
            };
            if alive != e.alive {
                e.alive = alive;
                changed = true;
                clock.event(&who, format_args!("marks n{index} {}", if alive { "UP" } else { "DOWN" }));
            }
        }
        if changed {
            me.view.publish(ClusterView::build(CLUSTER_NAME, me.host_id, endpoints.clone(), 0));
            me.coordinator.observe_liveness(&me.view.snapshot());
        }
    }
}
