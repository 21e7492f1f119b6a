//! The classic scale layout, simulated (issue 24): the Netflix report's
//! cluster of 288 nodes, 96 in each of three availability zones, at RF 3
//! (and its 48, 96 and 144 node steps), with the real write path.
//!
//! Every node is a real `cluster::Coordinator` with its replica verb handler
//! (`verbs::serve`), a RocksDB `storage::Storage` and a `hints::HintStore` in
//! a temporary directory, talking over `net::MemNetwork` (no loss, no delay:
//! this run counts, it does not inject faults) on one current-thread tokio
//! runtime with paused time. The zones are racks of one data center and the
//! keyspace is `NetworkTopologyStrategy {datacenter1: 3}`, so each partition
//! has one replica per zone, as the report's "data was automatically
//! replicated across all three zones". Each node's 16 tokens are chosen as a
//! joining Shoal node chooses them (`ring::allocation`, local RF 3), the
//! nodes joining in zone order a, b, c, a, ...; ownership is also shown for
//! random tokens, the placement without that algorithm.
//!
//! Modelled, not run: membership (every node starts with the whole ring, all
//! NORMAL; a lost node is marked down on every view at once, what the
//! failure detectors conclude within seconds) and the clients, which are
//! token-aware as `shoal stress` and the drivers are: each write goes to one
//! of its replicas, in turn, skipping one known down.
//!
//! A run (`run_scale`) writes `writes` partitions at CL ONE with every node
//! up, then loses one node and writes `loss_writes` more, then brings it back
//! and replays the hints (`verbs::replay_once`, the dispatcher's pass), and
//! reports (`ScaleReport`): ownership balance; messages on the network and
//! replica writes per client write; how evenly the replica writes spread;
//! during the loss, the hints stored per client write and the share of
//! writes that needed one; and after the replay, whether the returned node
//! holds every write it replicates (read from its own storage; a miss fails
//! the run).
//!
//! Invariants:
//! - A run is a function of its `ScaleConfig` (tokens and the lost node come
//!   from its seed); wall time only measures it.
//! - Nothing is estimated where it can be counted: messages are the
//!   network's, replica writes are the handlers' and the local applies'
//!   (each replica's storage holding the partition), hints are the stores'.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;

use cluster::verbs;
use cluster::{ClusterView, Coordinator, Endpoint, Status, ViewHandle};
use net::{MemNetwork, MemTransport};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use ring::ownership::effective_ownership;
use ring::topology::{NodeInfo, TokenMetadata};
use storage::Storage;
use tokio::task::JoinHandle;
use types::schema::{KeyspaceDef, Replication};
use types::{Consistency, WriteType};
use uuid::Uuid;

use crate::harness::{FixedSchema, CLUSTER_NAME};
use crate::table;

/// The data center of every node; the zones are its racks.
pub const DC: &str = "datacenter1";
/// The report's three availability zones.
pub const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];
/// Tokens per node (Shoal's default `num_tokens`).
pub const VNODES: usize = 16;
/// Replicas per partition: one per zone.
pub const RF: u32 = 3;

/// One scale run.
#[derive(Clone, Debug)]
pub struct ScaleConfig {
    pub nodes: usize,
    /// Client writes with every node up (one new partition each).
    pub writes: u64,
    /// Client writes while one node is down.
    pub loss_writes: u64,
    pub seed: u64,
}

/// Effective ownership at RF 3 (the share of all data a node holds), over the nodes.
#[derive(Clone, Debug, PartialEq)]
pub struct Balance {
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    /// Coefficient of variation (standard deviation / mean).
    pub cv: f64,
}

impl Balance {
    fn of(values: &[f64]) -> Balance {
        let n = values.len().max(1) as f64;
        let mean = values.iter().sum::<f64>() / n;
        let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
        Balance {
            mean,
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            cv: if mean > 0.0 { var.sqrt() / mean } else { 0.0 },
        }
    }

    /// The most loaded node against the mean: what caps a cluster's rate.
    pub fn max_over_mean(&self) -> f64 {
        if self.mean > 0.0 {
            self.max / self.mean
        } else {
            0.0
        }
    }
}

/// What one run counted.
#[derive(Clone, Debug)]
pub struct ScaleReport {
    pub nodes: usize,
    /// Ownership with the tokens Shoal's allocation chose (the run's ring).
    pub ownership: Balance,
    /// Ownership with 16 random tokens per node, for comparison.
    pub ownership_random: Balance,
    pub writes: u64,
    /// Internode messages (requests and responses) per client write, all nodes up.
    pub messages_per_write: f64,
    /// Partitions stored on replicas per client write (the report's 3.3 M / 1.1 M).
    pub replica_writes_per_write: f64,
    /// Replica writes per node over the mean, all nodes up.
    pub replica_load: Balance,
    /// Distinct peers a node exchanged replica writes with (mean), all nodes up: its connections in use.
    pub peers_per_node: f64,
    pub loss_writes: u64,
    /// Share of the client writes during the loss with the lost node among their replicas.
    pub loss_share: f64,
    /// Hints stored (all nodes) during the loss, per client write.
    pub hints_per_write: f64,
    /// Hint bytes stored per client write during the loss.
    pub hint_bytes_per_write: f64,
    /// Client writes acknowledged during the loss (CL ONE): all of them.
    pub loss_acked: u64,
    /// Hints replayed to the node once back.
    pub hints_replayed: u64,
    /// Writes the node replicates that it holds after the replay / that it replicates.
    pub returned_holds: (u64, u64),
    pub wall_seconds: f64,
}

/// Node `i`'s address: 10.1.x.y, room for every size the run allows.
fn address(i: usize) -> SocketAddr {
    let i = u16::try_from(i).unwrap_or(u16::MAX);
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 1, (i >> 8) as u8, (i & 0xff) as u8)), 7000)
}

/// The keyspace: `sim.kv` replicated once per zone.
pub fn keyspace() -> KeyspaceDef {
    let mut ks = table::keyspace();
    ks.replication = Replication::NetworkTopology { data_centers: BTreeMap::from([(DC.to_string(), RF)]) };
    ks
}

fn zone(i: usize) -> &'static str {
    ZONES[i % ZONES.len()]
}

fn host_uuid(i: usize) -> Uuid {
    Uuid::from_u128(0x0005_ca1e_0000_0000_0000_0000_0000_0000 + i as u128)
}

fn host(i: usize) -> ring::topology::HostId {
    cluster::view::host(host_uuid(i))
}

/// The tokens of `nodes` nodes joining one after another in zone order,
/// each placed by Shoal's allocation (or at random).
fn place(nodes: usize, allocate: bool, rng: &mut StdRng) -> (TokenMetadata, Vec<Vec<i64>>) {
    let mut tm = TokenMetadata::new();
    let mut all = Vec::with_capacity(nodes);
    for i in 0..nodes {
        let tokens = if allocate {
            ring::allocation::allocate_tokens(&tm, DC, zone(i), VNODES, RF, rng)
        } else {
            ring::tokens::random_tokens(rng, VNODES)
        };
        // Distinct by construction (allocation) or with overwhelming odds (random); a clash only drops the node.
        if tm.add_node(NodeInfo::new(host(i), DC.to_string(), zone(i).to_string()), tokens.iter().copied()).is_ok() {
            all.push(tokens);
        } else {
            all.push(Vec::new());
        }
    }
    (tm, all)
}

fn ownership(tm: &TokenMetadata, ks: &KeyspaceDef) -> Balance {
    let strategy = cluster::view::strategy(&ks.replication);
    let owned: Vec<f64> = effective_ownership(tm, &strategy).values().copied().collect();
    Balance::of(&owned)
}

struct Node {
    host_id: Uuid,
    addr: SocketAddr,
    view: Arc<ViewHandle>,
    coordinator: Arc<Coordinator<MemTransport>>,
    storage: Arc<Storage>,
    hints: Arc<hints::HintStore>,
    streams: Arc<cluster::stream::StreamSource>,
    serve: Option<JoinHandle<()>>,
}

fn endpoints(tokens: &[Vec<i64>]) -> BTreeMap<Uuid, Endpoint> {
    tokens
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut e = crate::harness::endpoint(host_uuid(i), address(i), t.clone(), Status::Normal);
            e.rack = zone(i).to_string();
            (e.host_id, e)
        })
        .collect()
}

fn open_node(
    i: usize,
    dir: &Path,
    net: &MemNetwork,
    endpoints: &BTreeMap<Uuid, Endpoint>,
    ks: &KeyspaceDef,
) -> Result<Node, String> {
    let base = dir.join(format!("n{i}"));
    let host_id = host_uuid(i);
    let addr = address(i);
    let view = Arc::new(ViewHandle::new(ClusterView::build(CLUSTER_NAME, host_id, endpoints.clone(), 0)));
    let (transport, inbound) = net.add_node(addr);
    // Small caches and memtables: 288 nodes share one process.
    let (storage, hints, coordinator) =
        crate::harness::open_replica(&base, &format!("n{i}"), ks, 256 << 10, 8 << 20, &view, transport)?;
    let streams = Arc::new(cluster::stream::StreamSource::new(
        Arc::clone(&storage),
        base.join("streams").join("out"),
        base.join("streams").join("in"),
        0,
        Arc::new(cluster::stream::StreamRegistry::default()),
    ));
    let serve =
        tokio::spawn(verbs::serve(Arc::clone(&coordinator), Arc::new(FixedSchema), Arc::clone(&streams), inbound));
    Ok(Node { host_id, addr, view, coordinator, storage, hints, streams, serve: Some(serve) })
}

/// Publishes on every node's view whether `lost` is alive.
fn mark(nodes: &[Node], lost: Uuid, alive: bool) {
    for n in nodes {
        let view = n.view.snapshot();
        let mut endpoints = view.endpoints.clone();
        if let Some(e) = endpoints.get_mut(&lost) {
            e.alive = alive || n.host_id == lost;
        }
        n.view.publish(ClusterView::build(CLUSTER_NAME, n.host_id, endpoints, 0));
        n.coordinator.observe_liveness(&n.view.snapshot());
    }
}

/// Lets every message in flight be delivered and handled (virtual time).
async fn settle(net: &MemNetwork) {
    for _ in 0..1000 {
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        if net.in_flight() == 0 {
            break;
        }
    }
    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
}

fn hint_totals(nodes: &[Node]) -> (u64, u64) {
    nodes.iter().fold((0, 0), |(h, b), n| (h + n.hints.stats().stored_hints, b + n.hints.total_pending_bytes()))
}

/// Which replica coordinates write `w`: its live `replicas` in turn
/// (token-aware, as the clients route).
fn coordinator_of(live: &[Uuid], w: u64) -> Option<Uuid> {
    live.get((w % live.len().max(1) as u64) as usize).copied()
}

/// Writes partitions `pks` at CL ONE, each through a replica (`coordinator_of`);
/// returns how many were acknowledged, and adds each (coordinator, other
/// replica) pair to `links`: the connections the writes used.
async fn write_all(
    nodes: &[Node],
    index: &BTreeMap<Uuid, usize>,
    ks: &KeyspaceDef,
    pks: std::ops::Range<u64>,
    down: Option<Uuid>,
    links: &mut std::collections::BTreeSet<(Uuid, Uuid)>,
) -> Result<u64, String> {
    let view = nodes.first().map(|n| n.view.snapshot()).ok_or("no nodes")?;
    let mut acked = 0;
    for w in pks {
        let pk = i32::try_from(w).map_err(|_| "too many writes".to_string())?;
        let live: Vec<Uuid> = view.replicas(ks, table::token(pk)).into_iter().filter(|r| Some(*r) != down).collect();
        let coordinator = coordinator_of(&live, w).ok_or("a partition without a live replica")?;
        for r in live.into_iter().filter(|r| *r != coordinator) {
            links.insert((coordinator.min(r), coordinator.max(r)));
        }
        let node = index.get(&coordinator).and_then(|i| nodes.get(*i)).ok_or("unknown coordinator")?;
        let ts = table::TIMESTAMP_BASE_MICROS + w as i64;
        let value = table::value_of(ts, pk, 0);
        let m = table::write(pk, 0, ts, &value);
        if node.coordinator.mutate(ks, vec![m], Consistency::One, WriteType::Simple).await.is_ok() {
            acked += 1;
        }
    }
    Ok(acked)
}

/// Replica writes each node holds for partitions `pks` (a replica holds the
/// partition in its own storage).
fn held(nodes: &[Node], ks: &KeyspaceDef, pks: std::ops::Range<u64>) -> Result<Vec<u64>, String> {
    let view = nodes.first().map(|n| n.view.snapshot()).ok_or("no nodes")?;
    let index: BTreeMap<Uuid, usize> = nodes.iter().enumerate().map(|(i, n)| (n.host_id, i)).collect();
    let mut per_node = vec![0u64; nodes.len()];
    for w in pks {
        let pk = i32::try_from(w).map_err(|_| "too many writes".to_string())?;
        for r in view.replicas(ks, table::token(pk)) {
            let Some(&i) = index.get(&r) else { continue };
            let Some(n) = nodes.get(i) else { continue };
            let raw = n.storage.read_raw(&table::full_read(pk)).map_err(|e| format!("n{i} read_raw: {e}"))?;
            if !raw.cells.is_empty() {
                if let Some(c) = per_node.get_mut(i) {
                    *c += 1;
                }
            }
        }
    }
    Ok(per_node)
}

async fn simulate(config: &ScaleConfig, dir: &Path) -> Result<ScaleReport, String> {
    let wall = std::time::Instant::now();
    let ks = keyspace();
    let mut rng = StdRng::seed_from_u64(config.seed);
    let (tm_random, _) = place(config.nodes, false, &mut rng);
    let (tm, tokens) = place(config.nodes, true, &mut rng);
    let endpoints = endpoints(&tokens);
    let net = MemNetwork::new(rng.gen());
    let mut nodes = Vec::with_capacity(config.nodes);
    for i in 0..config.nodes {
        nodes.push(open_node(i, dir, &net, &endpoints, &ks)?);
    }
    let index: BTreeMap<Uuid, usize> = nodes.iter().enumerate().map(|(i, n)| (n.host_id, i)).collect();

    // 1. Every node up.
    let before = net.stats();
    let mut links = std::collections::BTreeSet::new();
    let acked = write_all(&nodes, &index, &ks, 0..config.writes, None, &mut links).await?;
    settle(&net).await;
    let after = net.stats();
    if acked != config.writes {
        return Err(format!("{} of {} writes failed with every node up", config.writes - acked, config.writes));
    }
    let per_node = held(&nodes, &ks, 0..config.writes)?;
    let stored: u64 = per_node.iter().sum();
    let writes = config.writes.max(1) as f64;

    // 2. One node lost: marked down everywhere, off the network.
    let lost_i = rng.gen_range(0..nodes.len());
    let (lost, lost_addr) = nodes.get(lost_i).map(|n| (n.host_id, n.addr)).ok_or("no nodes")?;
    if let Some(task) = nodes.get_mut(lost_i).and_then(|n| n.serve.take()) {
        task.abort();
    }
    net.remove_node(lost_addr);
    mark(&nodes, lost, false);
    let (hints_before, _) = hint_totals(&nodes);
    let loss = config.writes..config.writes + config.loss_writes;
    let loss_acked = write_all(&nodes, &index, &ks, loss.clone(), Some(lost), &mut Default::default()).await?;
    settle(&net).await;
    let (hints_after, hint_bytes) = hint_totals(&nodes);
    let view = nodes.first().map(|n| n.view.snapshot()).ok_or("no nodes")?;
    let mut replicated = 0u64;
    for w in loss.clone() {
        let pk = i32::try_from(w).map_err(|_| "too many writes".to_string())?;
        if view.replicas(&ks, table::token(pk)).contains(&lost) {
            replicated += 1;
        }
    }

    // 3. Back: on the network again, marked up, hints replayed.
    let (transport_back, inbound) = net.add_node(lost_addr);
    drop(transport_back);
    if let Some(n) = nodes.get_mut(lost_i) {
        n.serve = Some(tokio::spawn(verbs::serve(
            Arc::clone(&n.coordinator),
            Arc::new(FixedSchema),
            Arc::clone(&n.streams),
            inbound,
        )));
    }
    mark(&nodes, lost, true);
    let mut replayed = 0u64;
    for n in &nodes {
        replayed += verbs::replay_once(&n.coordinator).await as u64;
    }
    settle(&net).await;
    let holds = held(&nodes, &ks, loss.clone())?.get(lost_i).copied().unwrap_or(0);
    if holds != replicated {
        return Err(format!(
            "the returned node holds {holds} of the {replicated} writes it replicates after the hint replay"
        ));
    }
    let loss_writes = config.loss_writes.max(1) as f64;
    let report = ScaleReport {
        nodes: config.nodes,
        ownership: ownership(&tm, &ks),
        ownership_random: ownership(&tm_random, &ks),
        writes: config.writes,
        messages_per_write: (after.sent - before.sent) as f64 / writes,
        replica_writes_per_write: stored as f64 / writes,
        replica_load: Balance::of(&per_node.iter().map(|&c| c as f64).collect::<Vec<_>>()),
        peers_per_node: 2.0 * links.len() as f64 / config.nodes.max(1) as f64,
        loss_writes: config.loss_writes,
        loss_share: replicated as f64 / loss_writes,
        hints_per_write: (hints_after - hints_before) as f64 / loss_writes,
        hint_bytes_per_write: hint_bytes as f64 / loss_writes,
        loss_acked,
        hints_replayed: replayed,
        returned_holds: (holds, replicated),
        wall_seconds: 0.0,
    };
    for n in &mut nodes {
        if let Some(task) = n.serve.take() {
            task.abort();
        }
    }
    Ok(ScaleReport { wall_seconds: wall.elapsed().as_secs_f64(), ..report })
}

/// Runs one scale configuration (its own runtime and temporary directory).
pub fn run_scale(config: &ScaleConfig) -> Result<ScaleReport, String> {
    let dir = tempfile::Builder::new().prefix("shoal-scale-").tempdir().map_err(|e| format!("tempdir: {e}"))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    let out = rt.block_on(simulate(config, dir.path()));
    drop(rt);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn balance_of_known_values() {
        let b = Balance::of(&[1.0, 2.0, 3.0]);
        assert!((b.mean - 2.0).abs() < 1e-9 && b.min == 1.0 && b.max == 3.0);
        assert!((b.max_over_mean() - 1.5).abs() < 1e-9);
        assert!((b.cv - (2.0f64 / 3.0).sqrt() / 2.0).abs() < 1e-9);
    }

    #[test]
    fn addresses_are_distinct_up_to_the_largest_run() {
        let all: std::collections::BTreeSet<SocketAddr> = (0..600).map(address).collect();
        assert_eq!(all.len(), 600);
    }
}
