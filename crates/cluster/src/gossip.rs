//! Membership over chitchat (scuttlebutt anti-entropy + phi-accrual failure
//! detection over UDP on the internode address): publishes this node's
//! application states, and turns what it hears into `ClusterView`s and
//! topology/status events.
//!
//! Application states (chitchat key → value), mirroring Cassandra's:
//! `host_id`, `status` (BOOT/NORMAL/LEAVING/LEFT/shutdown), `tokens` (decimal,
//! comma separated), `dc`, `rack`, `rpc_address`, `native_port`, `internode`
//! (ip:port of the TCP messaging service), `schema` (uuid),
//! `release_version`, `load` (bytes). The chitchat node id is the host id;
//! the chitchat generation is the start time in seconds (Cassandra's
//! generation).
//!
//! Invariants:
//! - A peer is identified by its host id. Several chitchat identities with
//!   the same host id (a node restarted, perhaps under another address)
//!   collapse into one endpoint: the highest generation whose announcement
//!   has arrived whole (`announced`) wins, so the old address is forgotten
//!   rather than shown as a second, dead node, and a restarting node stays
//!   in the ring (down) until its new state is complete.
//! - A peer from another cluster is never merged: chitchat's `cluster_id` is
//!   the cluster name, and messages with another id are dropped.
//! - The view is rebuilt from chitchat state alone, on a timer; events are
//!   the differences between consecutive views.
//! - With an admission predicate (`GossipConfig::admit`: internode
//!   encryption), a peer enters the view only once admitted; chitchat state
//!   alone (unauthenticated UDP) never puts a node in the ring.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use chitchat::transport::UdpTransport;
use chitchat::{spawn_chitchat, ChitchatConfig, ChitchatHandle, ChitchatId, FailureDetectorConfig, NodeState};
use uuid::Uuid;

use crate::view::{ClusterView, Endpoint, Status, ViewHandle};

/// What this node announces about itself.
#[derive(Clone, Debug)]
pub struct LocalState {
    pub host_id: Uuid,
    pub internode: SocketAddr,
    pub rpc_address: IpAddr,
    pub native_port: u16,
    pub dc: String,
    pub rack: String,
    pub release_version: String,
}

impl LocalState {
    /// This node as an endpoint of the view.
    pub fn endpoint(&self, tokens: Vec<i64>, status: Status, generation: u64) -> Endpoint {
        Endpoint {
            host_id: self.host_id,
            internode: self.internode,
            rpc_address: self.rpc_address,
            native_port: self.native_port,
            dc: self.dc.clone(),
            rack: self.rack.clone(),
            tokens,
            status,
            alive: true,
            schema_version: None,
            release_version: self.release_version.clone(),
            load_bytes: 0,
            generation,
        }
    }
}

#[derive(Clone, Debug)]
pub struct GossipConfig {
    pub cluster_name: String,
    pub generation: u64,
    /// UDP address gossip binds (the internode address; TCP and UDP ports
    /// are separate spaces).
    pub listen: SocketAddr,
    pub seeds: Vec<SocketAddr>,
    pub interval: Duration,
    /// Cassandra's `phi_convict_threshold` (default 8).
    pub phi_convict_threshold: f64,
    /// How often the view is rebuilt from gossip state.
    pub refresh: Duration,
    /// Which peers (by internode address) may enter the view; None: all.
    /// With internode encryption, only those that proved the cluster's
    /// certificate (`net::TcpTransport::is_verified`), so a process without
    /// it never joins the ring however it gossips.
    pub admit: Option<Admission>,
}

/// The predicate of `GossipConfig::admit`.
#[derive(Clone)]
pub struct Admission(pub Arc<dyn Fn(SocketAddr) -> bool + Send + Sync>);

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Admission")
    }
}

impl GossipConfig {
    pub fn new(cluster_name: &str, generation: u64, listen: SocketAddr, seeds: Vec<SocketAddr>) -> GossipConfig {
        GossipConfig {
            cluster_name: cluster_name.to_string(),
            generation,
            listen,
            seeds,
            interval: Duration::from_millis(200),
            phi_convict_threshold: 8.0,
            refresh: Duration::from_millis(100),
            admit: None,
        }
    }
}

/// A membership change, as drivers are told about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClusterEvent {
    /// A node joined the ring (`TOPOLOGY_CHANGE NEW_NODE`), at its native address.
    NewNode(SocketAddr),
    RemovedNode(SocketAddr),
    /// `STATUS_CHANGE UP` / `DOWN`.
    Up {
        host_id: Uuid,
        native: SocketAddr,
    },
    Down {
        host_id: Uuid,
        native: SocketAddr,
    },
}

pub struct Gossip {
    handle: ChitchatHandle,
    local: LocalState,
    cluster_name: String,
    generation: u64,
    admit: Option<Admission>,
}

impl Gossip {
    /// Starts gossiping. The view is refreshed by `run_refresh`, which the
    /// caller spawns.
    pub async fn start(
        config: &GossipConfig,
        local: LocalState,
        status: Status,
        tokens: &[i64],
    ) -> anyhow::Result<Gossip> {
        let id = ChitchatId::new(local.host_id.to_string(), config.generation, config.listen);
        let fd = FailureDetectorConfig {
            phi_threshold: config.phi_convict_threshold,
            initial_interval: config.interval * 4,
            max_interval: Duration::from_secs(10),
            ..FailureDetectorConfig::default()
        };
        let chitchat_config = ChitchatConfig {
            chitchat_id: id,
            cluster_id: config.cluster_name.clone(),
            gossip_interval: config.interval,
            listen_addr: config.listen,
            seed_nodes: config.seeds.iter().filter(|s| **s != config.listen).map(|s| s.to_string()).collect(),
            failure_detector_config: fd,
            marked_for_deletion_grace_period: Duration::from_secs(3600),
            catchup_callback: None,
            extra_liveness_predicate: None,
            protocol_version: chitchat::ProtocolVersion::V0,
        };
        let mut initial = vec![
            ("host_id".to_string(), local.host_id.to_string()),
            ("dc".to_string(), local.dc.clone()),
            ("rack".to_string(), local.rack.clone()),
            ("rpc_address".to_string(), local.rpc_address.to_string()),
            ("native_port".to_string(), local.native_port.to_string()),
            ("internode".to_string(), local.internode.to_string()),
            ("release_version".to_string(), local.release_version.clone()),
            ("status".to_string(), status.as_str().to_string()),
        ];
        if !tokens.is_empty() {
            initial.push(("tokens".to_string(), join_tokens(tokens)));
        }
        let handle = spawn_chitchat(chitchat_config, initial, &UdpTransport).await?;
        Ok(Gossip {
            handle,
            local,
            cluster_name: config.cluster_name.clone(),
            generation: config.generation,
            admit: config.admit.clone(),
        })
    }

    /// Sets one of this node's application states.
    pub async fn set(&self, key: &str, value: String) {
        self.handle.with_chitchat(|c| c.self_node_state().set(key, value.clone())).await;
    }

    pub async fn set_tokens(&self, tokens: &[i64]) {
        self.set("tokens", join_tokens(tokens)).await;
    }

    pub async fn set_status(&self, status: Status) {
        self.set("status", status.as_str().to_string()).await;
    }

    /// Builds the view from chitchat's current state.
    pub async fn view(&self) -> ClusterView {
        let chitchat = self.handle.chitchat();
        let guard = chitchat.lock().await;
        let live: Vec<ChitchatId> = guard.live_nodes().cloned().collect();
        let me = self.local.host_id.to_string();
        let marked = |key: &str| -> Vec<Uuid> {
            guard
                .node_states()
                .iter()
                // Live nodes' marks, this node's own included (chitchat does not list itself as live).
                .filter(|(id, state)| live.contains(id) || state.get("host_id") == Some(me.as_str()))
                .filter_map(|(_, state)| state.get(key))
                .flat_map(|list| list.split(',').filter_map(|h| h.trim().parse().ok()).collect::<Vec<Uuid>>())
                .collect()
        };
        let (removing, removed) = (marked(REMOVING), marked(REMOVED));
        let states: Vec<(ChitchatId, Endpoint, bool)> = guard
            .node_states()
            .iter()
            .filter_map(|(id, state)| {
                endpoint_of(id, state, live.contains(id)).map(|e| (id.clone(), e, announced(state)))
            })
            .collect();
        drop(guard);
        let mut endpoints = incarnations(self.local.host_id, self.generation, states);
        if let Some(admit) = &self.admit {
            endpoints.retain(|id, e| *id == self.local.host_id || (admit.0)(e.internode));
        }
        // removenode: a node that is down and named by a live node as being removed is LEAVING (its
        // ranges' new owners get writes), then LEFT once named as removed.
        for (marks, status) in [(&removing, Status::Leaving), (&removed, Status::Left)] {
            for id in marks {
                if let Some(e) = endpoints
                    .get_mut(id)
                    .filter(|e| !e.alive && (e.status.owns_tokens() || e.status == Status::Joining))
                {
                    e.status = status;
                }
            }
        }
        // A node that died while joining, before it announced tokens, owns and takes nothing: it is
        // not part of the cluster (a refused or failed join leaves no ghost in status).
        endpoints.retain(|_, e| e.alive || e.status != Status::Joining || !e.tokens.is_empty());
        ClusterView::build(&self.cluster_name, self.local.host_id, endpoints, 0)
    }

    /// Rebuilds the view every `refresh` and publishes it when it changed,
    /// reporting the differences as events. Runs until the task is dropped.
    pub async fn run_refresh(
        self: Arc<Self>,
        refresh: Duration,
        view: Arc<ViewHandle>,
        events: tokio::sync::mpsc::UnboundedSender<ClusterEvent>,
    ) {
        let mut tick = tokio::time::interval(refresh);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let next = self.view().await;
            let prev = view.snapshot();
            if prev.endpoints == next.endpoints {
                continue;
            }
            for ev in diff(&prev, &next) {
                tracing::info!(?ev, "cluster change");
                let _ = events.send(ev);
            }
            view.publish(next);
        }
    }

    /// Announces a clean shutdown and stops gossiping. A node that has left
    /// the ring (decommissioned) keeps announcing LEFT: a shutdown must not
    /// put its tokens back.
    pub async fn shutdown(&self) {
        self.announce_shutdown().await;
        let _ = self.handle.initiate_shutdown();
    }

    /// Announces a clean shutdown but goes on gossiping (drain): peers mark
    /// this node down (a SHUTDOWN status is down however fresh its
    /// heartbeat) and hint its writes until it restarts. Waits for one or two
    /// rounds to carry the news. Idempotent; LEFT stays LEFT.
    pub async fn announce_shutdown(&self) {
        let left = Status::Left.as_str();
        let status = self.handle.with_chitchat(|c| c.self_node_state().get("status").map(str::to_string)).await;
        if status.as_deref() != Some(left) {
            self.set_status(Status::Shutdown).await;
        }
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
}

/// Application states a node uses to remove a dead one (removenode): the
/// host ids it is removing, and those it has removed.
pub const REMOVING: &str = "removing";
pub const REMOVED: &str = "removed";

fn join_tokens(tokens: &[i64]) -> String {
    tokens.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(",")
}

/// The keys every node announces at start (`Gossip::start`) that place it:
/// without them it would be shown in the default data center and rack, or
/// at its gossip address.
const PLACEMENT_KEYS: [&str; 5] = ["dc", "rack", "internode", "rpc_address", "native_port"];

/// Whether a node's announcement has arrived whole: where it is
/// (`PLACEMENT_KEYS`), its status, and its tokens when that status owns
/// some. Chitchat carries a new incarnation's keys over one or more rounds;
/// until they are all here, the incarnation before it (a restarted node's
/// last state, down) stands for the node, so a restart never drops the
/// node and its tokens from the ring for a moment, nor places it in the
/// wrong data center (its ranges' writes would go to other nodes, and no
/// hint to it).
fn announced(state: &NodeState) -> bool {
    if PLACEMENT_KEYS.iter().any(|k| state.get(k).is_none()) {
        return false;
    }
    match state.get("status").and_then(Status::parse) {
        Some(status) => !status.owns_tokens() || state.get("tokens").is_some_and(|t| !t.is_empty()),
        None => false,
    }
}

/// One endpoint per host id from chitchat's identities (`(id, endpoint,
/// announced)`): the most recent incarnation whose announcement arrived
/// whole; none for a node with no such incarnation yet. This node is only
/// its own incarnation (`local`, `generation`), always alive.
fn incarnations(local: Uuid, generation: u64, states: Vec<(ChitchatId, Endpoint, bool)>) -> BTreeMap<Uuid, Endpoint> {
    let mut endpoints: BTreeMap<Uuid, ((bool, u64), Endpoint)> = BTreeMap::new();
    for (id, mut e, complete) in states {
        if e.host_id == local {
            if id.generation_id != generation {
                continue;
            }
            e.alive = true;
        }
        let rank = (complete, id.generation_id);
        match endpoints.get(&e.host_id) {
            Some((best, _)) if *best >= rank => {}
            _ => {
                endpoints.insert(e.host_id, (rank, e));
            }
        }
    }
    // A node known only by a partial announcement is not placed anywhere yet.
    endpoints.into_iter().filter(|(k, ((complete, _), _))| *complete || *k == local).map(|(k, (_, e))| (k, e)).collect()
}

fn endpoint_of(id: &ChitchatId, state: &NodeState, alive: bool) -> Option<Endpoint> {
    let host_id: Uuid = state.get("host_id").or(Some(&*id.node_id)).and_then(|h| h.parse().ok())?;
    let internode = state.get("internode").and_then(|a| a.parse().ok()).unwrap_or(id.gossip_advertise_addr);
    let status = state.get("status").and_then(Status::parse).unwrap_or(Status::Joining);
    let tokens =
        state.get("tokens").map(|t| t.split(',').filter_map(|x| x.trim().parse().ok()).collect()).unwrap_or_default();
    Some(Endpoint {
        host_id,
        internode,
        rpc_address: state.get("rpc_address").and_then(|a| a.parse().ok()).unwrap_or(internode.ip()),
        native_port: state.get("native_port").and_then(|p| p.parse().ok()).unwrap_or(9042),
        dc: state.get("dc").unwrap_or("datacenter1").to_string(),
        rack: state.get("rack").unwrap_or("rack1").to_string(),
        tokens,
        status,
        // A node that announced its shutdown is down at once (as in Cassandra).
        alive: alive && status != Status::Shutdown,
        schema_version: state.get("schema").and_then(|s| s.parse().ok()),
        release_version: state.get("release_version").unwrap_or("").to_string(),
        load_bytes: state.get("load").and_then(|l| l.parse().ok()).unwrap_or(0),
        generation: id.generation_id,
    })
}

fn native(e: &Endpoint) -> SocketAddr {
    SocketAddr::new(e.rpc_address, e.native_port)
}

/// Driver-visible differences between two views.
///
/// As Cassandra's `StorageService` tells its event listeners: `NEW_NODE` when a
/// node enters the token ring (NORMAL), `UP` only for ring members (`onAlive`
/// checks `isMember`; a joining node's `UP` waits until it is NORMAL, after its
/// `NEW_NODE`), `DOWN` for any node that goes down (`onDead` has no such check),
/// `REMOVED_NODE` when a node leaves the ring or is forgotten.
pub fn diff(prev: &ClusterView, next: &ClusterView) -> Vec<ClusterEvent> {
    let mut out = Vec::new();
    for (id, e) in &next.endpoints {
        if *id == next.local {
            continue;
        }
        let member = e.status.owns_tokens();
        let up = ClusterEvent::Up { host_id: *id, native: native(e) };
        match prev.endpoints.get(id) {
            None => {
                if member {
                    out.push(ClusterEvent::NewNode(native(e)));
                    if e.alive {
                        out.push(up);
                    }
                }
            }
            Some(p) => {
                let joined = !p.status.owns_tokens() && member;
                if joined {
                    out.push(ClusterEvent::NewNode(native(e)));
                }
                let moved = p.internode != e.internode;
                if moved && member {
                    // Same host at a new address: drivers see the old one go.
                    out.push(ClusterEvent::RemovedNode(native(p)));
                    out.push(ClusterEvent::NewNode(native(e)));
                }
                if e.alive {
                    // Up when it came up, moved, or became a member while up
                    // (its earlier UP was held back as a non-member's).
                    if member && (!p.alive || moved || joined) {
                        out.push(up);
                    }
                } else if p.alive {
                    out.push(ClusterEvent::Down { host_id: *id, native: native(e) });
                }
                if e.status == Status::Left && p.status != Status::Left {
                    out.push(ClusterEvent::RemovedNode(native(e)));
                }
            }
        }
    }
    for (id, p) in &prev.endpoints {
        if !next.endpoints.contains_key(id) && *id != prev.local {
            out.push(ClusterEvent::RemovedNode(native(p)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node state with every `PLACEMENT_KEYS` key set, and `pairs`.
    fn state(pairs: &[(&str, &str)]) -> NodeState {
        let mut s = NodeState::for_test();
        let place = [
            ("dc", "dc1"),
            ("rack", "r1"),
            ("internode", "127.0.0.2:7000"),
            ("rpc_address", "127.0.0.2"),
            ("native_port", "9042"),
        ];
        for (k, v) in place.iter().chain(pairs) {
            s.set(*k, *v);
        }
        assert!(PLACEMENT_KEYS.iter().all(|k| s.get(k).is_some()));
        s
    }

    #[test]
    fn an_announcement_is_whole_with_its_place_status_and_the_tokens_it_owns() {
        assert!(!announced(&state(&[("host_id", "x")])), "no status yet");
        assert!(!announced(&state(&[("status", "NORMAL")])), "NORMAL without its tokens yet");
        assert!(announced(&state(&[("status", "NORMAL"), ("tokens", "1,2")])));
        assert!(announced(&state(&[("status", Status::Joining.as_str())])), "a joiner before its tokens owns none");
        let mut no_dc = state(&[("status", "NORMAL"), ("tokens", "1,2")]);
        no_dc.delete("dc");
        assert!(!announced(&no_dc), "without its data center it would be placed in the default one");
        let mut bare = NodeState::for_test();
        bare.set("status", "NORMAL");
        bare.set("tokens", "1,2");
        assert!(!announced(&bare));
    }

    #[test]
    fn a_restarting_node_stays_in_the_ring_until_its_new_state_has_arrived() {
        let local = Uuid::from_u128(1);
        let peer = Uuid::from_u128(2);
        let addr: SocketAddr = "127.0.0.2:7000".parse().expect("addr");
        let id = |generation| ChitchatId::new(peer.to_string(), generation, addr);
        let old_state = state(&[("host_id", &peer.to_string()), ("status", "NORMAL"), ("tokens", "10,20")]);
        let new_state = state(&[("host_id", &peer.to_string())]);
        let old = endpoint_of(&id(100), &old_state, false).expect("old incarnation");
        let partial = endpoint_of(&id(200), &new_state, false).expect("new incarnation");
        let picked = incarnations(
            local,
            1,
            vec![(id(100), old.clone(), announced(&old_state)), (id(200), partial, announced(&new_state))],
        );
        let e = picked.get(&peer).expect("the peer is still an endpoint");
        assert_eq!((e.status, e.tokens.clone(), e.alive, e.generation), (Status::Normal, vec![10, 20], false, 100));

        let whole_state = state(&[("host_id", &peer.to_string()), ("status", "NORMAL"), ("tokens", "10,20")]);
        let whole = endpoint_of(&id(200), &whole_state, true).expect("new incarnation");
        let picked = incarnations(local, 1, vec![(id(200), whole, true), (id(100), old, true)]);
        let e = picked.get(&peer).expect("the peer");
        assert_eq!((e.generation, e.alive), (200, true), "the newer incarnation wins once whole");

        let newcomer = Uuid::from_u128(3);
        let partial =
            endpoint_of(&ChitchatId::new(newcomer.to_string(), 300, addr), &new_state, true).expect("partial");
        let picked = incarnations(local, 1, vec![(ChitchatId::new(newcomer.to_string(), 300, addr), partial, false)]);
        assert!(picked.is_empty(), "a node heard of only in part is not placed (nor in the default data center)");
    }

    fn at(n: u8, status: Status, alive: bool) -> Endpoint {
        Endpoint::test_node(n, &[i64::from(n) * 100], status, alive)
    }

    /// Node 1's view holding itself and `others`.
    fn seen(others: &[Endpoint]) -> ClusterView {
        let endpoints = std::iter::once(at(1, Status::Normal, true)).chain(others.iter().cloned());
        ClusterView::build("c", Uuid::from_u128(1), endpoints.map(|e| (e.host_id, e)).collect(), 1)
    }

    #[test]
    fn drivers_hear_of_a_joining_node_only_once_it_is_a_member_and_of_its_death_at_any_time() {
        let node2: SocketAddr = "127.0.0.2:9042".parse().expect("addr");
        let up = ClusterEvent::Up { host_id: Uuid::from_u128(2), native: node2 };
        let down = ClusterEvent::Down { host_id: Uuid::from_u128(2), native: node2 };
        let alone = seen(&[]);
        let joining = seen(&[at(2, Status::Joining, true)]);
        let normal = seen(&[at(2, Status::Normal, true)]);
        assert_eq!(diff(&alone, &joining), vec![], "Cassandra's onAlive tells listeners of members only");
        assert_eq!(diff(&joining, &normal), vec![ClusterEvent::NewNode(node2), up.clone()]);
        assert_eq!(diff(&alone, &normal), vec![ClusterEvent::NewNode(node2), up.clone()]);
        let joiner_died = seen(&[at(2, Status::Joining, false)]);
        assert_eq!(diff(&joining, &joiner_died), vec![down.clone()], "onDead tells of any node");
        assert_eq!(diff(&joiner_died, &joining), vec![], "a joiner back up is still no member");
        let member_died = seen(&[at(2, Status::Normal, false)]);
        assert_eq!(diff(&normal, &member_died), vec![down]);
        assert_eq!(diff(&member_died, &normal), vec![up]);
        assert_eq!(diff(&normal, &normal), vec![]);
    }
}
