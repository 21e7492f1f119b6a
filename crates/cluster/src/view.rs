//! `ClusterView`: an immutable snapshot of the cluster as this node sees it
//! (endpoints, their status and liveness, the token ring), swapped atomically
//! by gossip and read by everything else: the coordinator, the system tables
//! (`system.peers`), the admin API.
//!
//! Invariants:
//! - Endpoints are keyed by host id, never by address: a known host id that
//!   shows up at a new address is the same node (a disk re-attached to a new
//!   machine), and its address is updated in place.
//! - The token ring holds exactly the endpoints whose status owns tokens
//!   (NORMAL, LEAVING, and shut-down nodes that were NORMAL), so a node that
//!   is down keeps its ranges (writes to it are hinted, not moved).
//! - While endpoints are JOINING with announced tokens or LEAVING, `pending`
//!   is the ring as it will be (joiners placed, leavers gone), and writes
//!   also go to its `pending_replicas`.
//! - Only the gossip task (or a test) publishes; readers take `snapshot()`
//!   and never hold a lock while working.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, RwLock};

use ring::strategy::ReplicationStrategy;
use ring::topology::{HostId, NodeInfo, TokenMetadata};
use types::schema::{KeyspaceDef, Replication};
use uuid::Uuid;

/// Gossip status (Cassandra's STATUS application state).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Status {
    /// Started, choosing tokens; owns nothing yet.
    Joining,
    Normal,
    Leaving,
    Left,
    /// Announced a clean shutdown; keeps its tokens.
    Shutdown,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Joining => "BOOT",
            Status::Normal => "NORMAL",
            Status::Leaving => "LEAVING",
            Status::Left => "LEFT",
            Status::Shutdown => "shutdown",
        }
    }

    pub fn parse(s: &str) -> Option<Status> {
        Some(match s {
            "BOOT" => Status::Joining,
            "NORMAL" => Status::Normal,
            "LEAVING" => Status::Leaving,
            "LEFT" => Status::Left,
            "shutdown" => Status::Shutdown,
            _ => return None,
        })
    }

    /// Whether an endpoint in this status owns its tokens.
    pub fn owns_tokens(self) -> bool {
        matches!(self, Status::Normal | Status::Leaving | Status::Shutdown)
    }

    /// nodetool's one-letter state: N(ormal), J(oining), L(eaving), M(oving).
    pub fn letter(self) -> char {
        match self {
            Status::Joining => 'J',
            Status::Leaving | Status::Left => 'L',
            Status::Normal | Status::Shutdown => 'N',
        }
    }
}

/// One node as this node knows it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Endpoint {
    pub host_id: Uuid,
    /// Internode address: listen_address and storage_port.
    pub internode: SocketAddr,
    /// Where CQL clients reach it.
    pub rpc_address: IpAddr,
    pub native_port: u16,
    pub dc: String,
    pub rack: String,
    pub tokens: Vec<i64>,
    pub status: Status,
    /// The failure detector's verdict (always true for the local node).
    pub alive: bool,
    pub schema_version: Option<Uuid>,
    pub release_version: String,
    /// Bytes of live data on disk, as last gossiped.
    pub load_bytes: u64,
    /// Gossip generation (seconds since the epoch at start).
    pub generation: u64,
}

#[cfg(test)]
impl Endpoint {
    /// Node `n` of a test: host id `n`, at 127.0.0.`n` (internode port 7000,
    /// native port 9042), in dc1 and rack r1.
    pub(crate) fn test_node(n: u8, tokens: &[i64], status: Status, alive: bool) -> Endpoint {
        Endpoint {
            host_id: Uuid::from_u128(u128::from(n)),
            internode: SocketAddr::new(std::net::Ipv4Addr::new(127, 0, 0, n).into(), 7000),
            rpc_address: std::net::Ipv4Addr::new(127, 0, 0, n).into(),
            native_port: 9042,
            dc: "dc1".into(),
            rack: "r1".into(),
            tokens: tokens.to_vec(),
            status,
            alive,
            schema_version: None,
            release_version: String::new(),
            load_bytes: 0,
            generation: 1,
        }
    }
}

impl Endpoint {
    pub fn address(&self) -> IpAddr {
        self.internode.ip()
    }

    /// nodetool status' two letters: U/D then N/J/L.
    pub fn state(&self) -> String {
        format!("{}{}", if self.alive { 'U' } else { 'D' }, self.status.letter())
    }
}

/// The cluster at one moment.
#[derive(Clone, Debug)]
pub struct ClusterView {
    pub cluster_name: String,
    pub local: Uuid,
    pub endpoints: BTreeMap<Uuid, Endpoint>,
    /// The ring of token-owning endpoints.
    pub ring: TokenMetadata,
    /// The ring with the joining endpoints placed too, while any join.
    pub pending: Option<TokenMetadata>,
    /// Bumped on every publish.
    pub version: u64,
}

pub fn host(id: Uuid) -> HostId {
    HostId(id.as_u128())
}

pub fn uuid(id: HostId) -> Uuid {
    Uuid::from_u128(id.0)
}

/// The ring placement a keyspace's replication asks for.
pub fn strategy(replication: &Replication) -> ReplicationStrategy {
    match replication {
        Replication::Simple { replication_factor } => ReplicationStrategy::Simple { rf: *replication_factor },
        Replication::NetworkTopology { data_centers } => {
            ReplicationStrategy::NetworkTopology { dcs: data_centers.clone() }
        }
        Replication::Local => ReplicationStrategy::Local,
    }
}

impl ClusterView {
    /// A view holding only this node (before gossip has run, or alone).
    pub fn single(cluster_name: &str, local: Endpoint) -> ClusterView {
        let mut endpoints = BTreeMap::new();
        let id = local.host_id;
        endpoints.insert(id, local);
        ClusterView::build(cluster_name, id, endpoints, 0)
    }

    /// Builds the ring from the endpoints.
    pub fn build(cluster_name: &str, local: Uuid, endpoints: BTreeMap<Uuid, Endpoint>, version: u64) -> ClusterView {
        let mut ring = TokenMetadata::new();
        for e in endpoints.values() {
            if e.status.owns_tokens() && !e.tokens.is_empty() {
                // A token claimed twice: the first (smaller host id) keeps it;
                // the conflict is logged by gossip.
                if let Err(err) = ring
                    .add_node(NodeInfo::new(host(e.host_id), e.dc.clone(), e.rack.clone()), e.tokens.iter().copied())
                {
                    tracing::warn!(host_id = %e.host_id, "not placing endpoint in the ring: {err}");
                }
            }
        }
        // Joining endpoints that announced their tokens own nothing yet, but
        // writes for the ranges they will own go to them too (pending ranges).
        // Likewise a LEAVING endpoint still owns its ranges, and the nodes that take them over
        // get their writes already.
        let joining: Vec<&Endpoint> =
            endpoints.values().filter(|e| e.status == Status::Joining && !e.tokens.is_empty()).collect();
        let leaving: Vec<&Endpoint> = endpoints.values().filter(|e| e.status == Status::Leaving).collect();
        let moving = !joining.is_empty() || !leaving.is_empty();
        let pending = (moving && !ring.is_empty()).then(|| {
            let mut with = ring.clone();
            for e in joining {
                let info = NodeInfo::new(host(e.host_id), e.dc.clone(), e.rack.clone());
                if let Err(err) = with.add_node(info, e.tokens.iter().copied()) {
                    tracing::warn!(host_id = %e.host_id, "not placing a joining endpoint in the pending ring: {err}");
                }
            }
            for e in leaving {
                with.remove_node(host(e.host_id));
            }
            with
        });
        ClusterView { cluster_name: cluster_name.to_string(), local, endpoints, ring, pending, version }
    }

    /// The replicas a write of `token` must also reach while nodes join:
    /// those of the ring with the joining nodes placed that are not
    /// replicas now (Cassandra's pending endpoints). Empty when none join.
    pub fn pending_replicas(&self, ks: &KeyspaceDef, token: i64) -> Vec<Uuid> {
        let Some(pending) = &self.pending else { return Vec::new() };
        if matches!(ks.replication, Replication::Local) {
            return Vec::new();
        }
        let now = self.replicas(ks, token);
        strategy(&ks.replication).replicas(pending, token).into_iter().map(uuid).filter(|r| !now.contains(r)).collect()
    }

    /// The topology changes in progress that this node sees, other than its
    /// own: each moving endpoint (a joiner that announced its tokens, a
    /// node leaving, a dead node being removed) with what it is doing, in
    /// host id order. One topology change at a time cluster-wide: a node
    /// starts one only when this is empty, and of two started at once (each
    /// unseen by the other when it began) the one whose moving node has the
    /// smaller host id goes on (`yields_to`).
    pub fn topology_changes(&self) -> Vec<(Uuid, String)> {
        self.endpoints
            .values()
            .filter(|e| e.host_id != self.local)
            .filter_map(|e| {
                let doing = match (e.status, e.alive) {
                    (Status::Joining, true) if !e.tokens.is_empty() => "is joining",
                    (Status::Joining, false) if !e.tokens.is_empty() => {
                        "is joining but down (restart it to resume its bootstrap, or removenode its host id)"
                    }
                    (Status::Leaving, true) => "is leaving (decommission)",
                    (Status::Leaving, false) => "is being removed (removenode)",
                    _ => return None,
                };
                Some((e.host_id, format!("/{} {doing}", e.address())))
            })
            .collect()
    }

    /// Refuses `operation` while another topology change is in progress
    /// (`topology_changes`, leaving out `subject`: the node this operation
    /// itself moves), naming it.
    pub fn check_no_topology_change(&self, operation: &str, subject: Uuid) -> Result<(), String> {
        let others: Vec<String> =
            self.topology_changes().into_iter().filter(|(id, _)| *id != subject).map(|(_, what)| what).collect();
        if others.is_empty() {
            return Ok(());
        }
        Err(format!(
            "Cannot start {operation}: another topology change is in progress ({}). \
             One topology change at a time: wait for it to finish",
            others.join("; ")
        ))
    }

    /// After announcing a topology change that moves `subject`: the first
    /// other change this one must yield to (one that moves a node with a
    /// smaller host id; both began before either saw the other).
    pub fn yields_to(&self, subject: Uuid) -> Option<String> {
        self.topology_changes().into_iter().find(|(id, _)| *id < subject && *id != subject).map(|(_, what)| what)
    }

    pub fn local(&self) -> Option<&Endpoint> {
        self.endpoints.get(&self.local)
    }

    pub fn endpoint(&self, id: Uuid) -> Option<&Endpoint> {
        self.endpoints.get(&id)
    }

    /// Other nodes (not LEFT).
    pub fn peers(&self) -> impl Iterator<Item = &Endpoint> + '_ {
        self.endpoints.values().filter(move |e| e.host_id != self.local && e.status != Status::Left)
    }

    pub fn is_alive(&self, id: Uuid) -> bool {
        id == self.local || self.endpoints.get(&id).map(|e| e.alive).unwrap_or(false)
    }

    /// The replicas of `token` for a keyspace, primary first. A keyspace
    /// with local replication (the system keyspaces) lives on this node only.
    pub fn replicas(&self, ks: &KeyspaceDef, token: i64) -> Vec<Uuid> {
        if matches!(ks.replication, Replication::Local) || self.ring.is_empty() {
            return vec![self.local];
        }
        strategy(&ks.replication).replicas(&self.ring, token).into_iter().map(uuid).collect()
    }

    /// Whether this node is the ring's only member, so that every token has
    /// the same replicas: `replicas` of any one token.
    pub fn sole_owner(&self) -> bool {
        self.ring.node_count() == 1 && self.ring.node(host(self.local)).is_some()
    }

    /// The local data center.
    pub fn local_dc(&self) -> &str {
        self.local().map(|e| e.dc.as_str()).unwrap_or("datacenter1")
    }

    pub fn dc_of(&self, id: Uuid) -> Option<&str> {
        self.endpoints.get(&id).map(|e| e.dc.as_str())
    }

    /// Schema versions and the addresses reporting each (describecluster).
    pub fn schema_versions(&self) -> BTreeMap<String, Vec<IpAddr>> {
        let mut out: BTreeMap<String, Vec<IpAddr>> = BTreeMap::new();
        for e in self.endpoints.values().filter(|e| e.alive && e.status != Status::Left) {
            let v = e.schema_version.map(|v| v.to_string()).unwrap_or_else(|| "UNKNOWN".to_string());
            out.entry(v).or_default().push(e.address());
        }
        out
    }
}

/// The current view, swapped atomically, with a change notification.
pub struct ViewHandle {
    current: RwLock<Arc<ClusterView>>,
    changed: tokio::sync::watch::Sender<u64>,
}

impl ViewHandle {
    pub fn new(view: ClusterView) -> ViewHandle {
        let (changed, _) = tokio::sync::watch::channel(view.version);
        ViewHandle { current: RwLock::new(Arc::new(view)), changed }
    }

    pub fn snapshot(&self) -> Arc<ClusterView> {
        Arc::clone(&self.current.read().unwrap_or_else(|p| p.into_inner()))
    }

    pub fn publish(&self, mut view: ClusterView) {
        let version = {
            let mut cur = self.current.write().unwrap_or_else(|p| p.into_inner());
            view.version = cur.version + 1;
            let v = view.version;
            *cur = Arc::new(view);
            v
        };
        self.changed.send_replace(version);
    }

    /// Notified on every publish.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }
}
