//! Joining the cluster: starts internode messaging and gossip, chooses the
//! node's tokens on first start (balanced allocation against the ring gossip
//! shows, Cassandra 4's `allocate_tokens_for_local_replication_factor`),
//! becomes NORMAL (a new node that is not a seed first stays JOINING while
//! it bootstraps: `Lifecycle::bootstrap`, then `finish_bootstrap`), and
//! spawns the cluster's background tasks (view refresh
//! and driver events, verb handlers, hint replay, schema sync, load gossip).
//!
//! Invariants:
//! - Tokens are chosen once and persisted before the node announces them;
//!   a restart (under any address) announces the same tokens.
//! - A non-seed node refuses to pick tokens before it has heard from a
//!   NORMAL peer (otherwise two first starts would each build a ring alone).
//! - CQL clients are served only after the node is NORMAL (the caller starts
//!   the CQL server after `join` returns).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use cluster::gossip::{ClusterEvent, Gossip, GossipConfig, LocalState};
use cluster::stream::{StreamRegistry, StreamSource};
use cluster::verbs::{self, SchemaSync};
use cluster::{ClusterView, Coordinator, CoordinatorConfig, Status, ViewHandle};
use cql_protocol::{Event, StatusChangeType, TopologyChangeType};
use net::{TcpConfig, TcpTransport};
use rand::SeedableRng;
use storage::Storage;
use uuid::Uuid;

use crate::config::NodeConfig;

pub struct Joined {
    pub view: Arc<ViewHandle>,
    pub coordinator: Arc<Coordinator<TcpTransport>>,
    pub gossip: Arc<Gossip>,
    pub transport: TcpTransport,
    pub tokens: Vec<i64>,
    /// The node is JOINING: it must stream its ranges (`Lifecycle::bootstrap`), then
    /// call `finish_bootstrap`, before it serves.
    pub bootstrap: bool,
    /// The dead node whose place this one takes (replace_address_first_boot), while it bootstraps.
    pub replacing: Option<Uuid>,
    pub hints: Arc<hints::HintStore>,
    /// Exports peers pull (`cluster::stream`), and every stream session's progress.
    pub streams: Arc<StreamSource>,
    pub stream_registry: Arc<StreamRegistry>,
    inbound: Option<tokio::sync::mpsc::Receiver<net::Inbound>>,
    events: Option<tokio::sync::mpsc::UnboundedReceiver<ClusterEvent>>,
}

/// The seeds' internode addresses. A seed is an IP (with or without a port) or a host name (a
/// StatefulSet pod's DNS name, say), resolved once at start to every address of the listen
/// address's family, as Cassandra's SimpleSeedProvider does; a name that does not resolve (a pod
/// not created yet) is left out with a warning.
async fn seed_addrs(config: &NodeConfig) -> Vec<SocketAddr> {
    let mut out = Vec::new();
    for seed in &config.seeds {
        let s = seed.trim();
        if let Some(a) = s
            .parse::<SocketAddr>()
            .ok()
            .or_else(|| s.parse::<IpAddr>().ok().map(|ip| SocketAddr::new(ip, config.storage_port)))
        {
            out.push(a);
            continue;
        }
        let (host, port) = match s.rsplit_once(':').map(|(h, p)| (h, p.parse::<u16>())) {
            Some((h, Ok(p))) => (h, p),
            _ => (s, config.storage_port),
        };
        match tokio::time::timeout(SEED_LOOKUP_TIMEOUT, tokio::net::lookup_host((host, port))).await {
            Ok(Ok(addrs)) => {
                let before = out.len();
                out.extend(addrs.filter(|a| a.is_ipv4() == config.listen_address.is_ipv4()));
                if out.len() == before {
                    tracing::warn!("seed {s} has no address of the listen address's family; left out of the seeds");
                }
            }
            Ok(Err(e)) => tracing::warn!("seed {s} does not resolve ({e}); left out of the seeds"),
            Err(_) => tracing::warn!("seed {s} did not resolve within {SEED_LOOKUP_TIMEOUT:?}; left out of the seeds"),
        }
    }
    out.sort();
    out.dedup();
    out
}

/// How long one seed's name lookup may take at start.
const SEED_LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

pub async fn join(
    config: &NodeConfig,
    storage: &Arc<Storage>,
    host_id: Uuid,
    generation: u64,
    release_version: &str,
) -> anyhow::Result<Joined> {
    let internode = SocketAddr::new(config.listen_address, config.storage_port);
    let mut tcp = TcpConfig::new(internode);
    tcp.internode_timeout = config.internode_timeout;
    tcp.tls = config.internode_encryption.build().map_err(|e| anyhow::anyhow!("server_encryption_options: {e}"))?;
    let (transport, inbound) = TcpTransport::bind(tcp)
        .await
        .with_context(|| format!("cannot listen for peers on {internode} (storage_port)"))?;
    let hints = Arc::new(
        hints::HintStore::open(hints::HintConfig {
            dir: config.data_dir.join("hints"),
            max_bytes_per_target: config.max_hints_bytes_per_host,
            segment_bytes: hints::DEFAULT_SEGMENT_BYTES,
        })
        .context("cannot open the hints directory")?,
    );
    let persisted: Vec<i64> =
        storage.local_get("tokens").map(|t| t.split(',').filter_map(|x| x.parse().ok()).collect()).unwrap_or_default();
    let local = LocalState {
        host_id,
        internode,
        rpc_address: config.rpc_address,
        native_port: config.native_port,
        dc: config.dc.clone(),
        rack: config.rack.clone(),
        release_version: release_version.to_string(),
    };
    let seeds = seed_addrs(config).await;
    let mut gossip_config = GossipConfig::new(&config.cluster_name, generation, internode, seeds.clone());
    gossip_config.phi_convict_threshold = config.phi_convict_threshold;
    if config.internode_encryption.all {
        // Only peers that proved the cluster's certificate enter the ring (gossip is plain UDP).
        let t = transport.clone();
        gossip_config.admit = Some(cluster::gossip::Admission(Arc::new(move |peer| {
            let ok = t.is_verified(peer);
            if !ok {
                t.verify(peer);
            }
            ok
        })));
    }
    // A bootstrap that did not finish (killed, a source down) resumes at the next start.
    let resuming = !persisted.is_empty() && storage.local_get(BOOTSTRAPPING).is_some_and(|v| !v.is_empty());
    let status = if persisted.is_empty() || resuming { Status::Joining } else { Status::Normal };
    let gossip = Arc::new(
        Gossip::start(&gossip_config, local.clone(), status, &persisted).await.context("cannot start gossip")?,
    );

    // The nodes this node removed (removenode) stay removed after its restart.
    if let Some(removed) = storage.local_get(cluster::gossip::REMOVED).filter(|r| !r.is_empty()) {
        gossip.set(cluster::gossip::REMOVED, removed).await;
    }
    let me = local.endpoint(persisted.clone(), status, generation);
    let view = Arc::new(ViewHandle::new(ClusterView::single(&config.cluster_name, me)));

    let (tokens, bootstrap) = if persisted.is_empty() {
        let i_am_seed = seeds.is_empty() || seeds.contains(&internode);
        let alone = seeds.iter().all(|s| *s == internode);
        let ring = if alone { gossip.view().await } else { wait_for_ring(&gossip, i_am_seed, &seeds).await? };
        // Joining moves ranges: not while another node joins, leaves or is removed.
        let moves = config.replace_address.is_some() || (config.auto_bootstrap && !i_am_seed && !ring.ring.is_empty());
        if moves {
            let operation = if config.replace_address.is_some() { "replace" } else { "bootstrap" };
            ring.check_no_topology_change(operation, host_id).map_err(anyhow::Error::msg)?;
        }
        if let Some(addr) = config.replace_address {
            let (tokens, dead) = take_place_of(addr, &ring, host_id)?;
            storage.local_set(BOOTSTRAPPING, "1")?;
            storage.local_set(REPLACING, &dead.to_string())?;
            let text: Vec<String> = tokens.iter().map(|t| t.to_string()).collect();
            storage.local_set("tokens", &text.join(","))?;
            // The dead node leaves every ring (this node marks it removed, as removenode does) and
            // this one announces its tokens as JOINING: its ranges are pending here.
            mark_removed(storage, &gossip, dead).await?;
            gossip.set_tokens(&tokens).await;
            tracing::info!(%addr, %dead, "replacing a dead node: taking its tokens, bootstrapping its ranges");
            (tokens, true)
        } else {
            let mut rng = rand::rngs::StdRng::from_entropy();
            // While the DC has no more nodes than the factor, every node holds
            // every range at that factor; balance for the largest factor that
            // still tells nodes apart instead.
            let in_dc = ring.ring.dc_node_count(&config.dc) as u32;
            let rf = config.allocation_rf.min(in_dc).max(1);
            let tokens = ring::allocation::allocate_tokens(
                &ring.ring,
                &config.dc,
                &config.rack,
                config.num_tokens as usize,
                rf,
                &mut rng,
            );
            // A seed that starts a cluster, or a node told not to, owns its ranges at once; any
            // other node streams them first (bootstrap) and stays JOINING meanwhile.
            let bootstrap = config.auto_bootstrap && !i_am_seed && !ring.ring.is_empty();
            if bootstrap {
                storage.local_set(BOOTSTRAPPING, "1")?;
            }
            let text: Vec<String> = tokens.iter().map(|t| t.to_string()).collect();
            storage.local_set("tokens", &text.join(","))?;
            tracing::info!(
                count = tokens.len(),
                peers = ring.endpoints.len().saturating_sub(1),
                bootstrap,
                "allocated tokens"
            );
            gossip.set_tokens(&tokens).await;
            if !bootstrap {
                gossip.set_status(Status::Normal).await;
            }
            (tokens, bootstrap)
        }
    } else {
        (persisted, resuming)
    };
    let replacing = if bootstrap { storage.local_get(REPLACING).and_then(|h| h.parse::<Uuid>().ok()) } else { None };
    let coordinator_config = CoordinatorConfig {
        write_timeout: config.write_request_timeout,
        read_timeout: config.read_request_timeout,
        cas_contention_timeout: config.cas_contention_timeout,
        hinted_handoff_enabled: config.hinted_handoff_enabled,
        max_hint_window: config.max_hint_window,
    };
    let coordinator = Arc::new(Coordinator::new(
        Arc::clone(&view),
        Arc::clone(storage),
        transport.clone(),
        Arc::clone(&hints),
        coordinator_config,
    ));
    // First real view before serving.
    view.publish(gossip.view().await);
    let (events_tx, events_rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(Arc::clone(&gossip).run_refresh(Duration::from_millis(100), Arc::clone(&view), events_tx));
    let stream_registry = Arc::new(StreamRegistry::default());
    let streams = Arc::new(
        StreamSource::new(
            Arc::clone(storage),
            cluster::stream::staging_dir(&config.data_dir),
            config.data_dir.join("streams").join("in"),
            config.stream_throughput_bytes,
            Arc::clone(&stream_registry),
        )
        .with_under_load(config.stream_throughput_under_load_bytes),
    );
    // Streamed file data travels on bulk connections, served by bulk threads.
    let source = Arc::clone(&streams);
    transport.serve_bulk(Arc::new(move |conn, from| Arc::clone(&source).serve_bulk(conn, from)));
    // Replica mutations are applied in the connection's own task (one wake-up
    // less each way, and a read's mutations share one commit), unless a write
    // waits for an fsync (batch/group commit log), which must not hold a worker.
    if !storage.writes_block() {
        let storage = Arc::clone(storage);
        transport.serve_inline(
            net::Verb::MutationReq,
            Arc::new(move |requests| cluster::verbs::apply_mutations(&storage, requests)),
        );
    }
    Ok(Joined {
        view,
        coordinator,
        gossip,
        transport,
        tokens,
        bootstrap,
        replacing,
        hints,
        streams,
        stream_registry,
        inbound: Some(inbound),
        events: Some(events_rx),
    })
}

/// Set while a bootstrap has not finished (a restart resumes it).
const BOOTSTRAPPING: &str = "bootstrapping";
/// The host id of the dead node a bootstrapping replacement takes the place of.
const REPLACING: &str = "replacing";

/// Adds `host_id` to the nodes this node has removed (removenode, replace):
/// persisted, so a restart announces it again, and gossiped, so every view
/// drops it from the ring.
pub(crate) async fn mark_removed(storage: &Storage, gossip: &Gossip, host_id: Uuid) -> anyhow::Result<()> {
    let mut removed: Vec<String> = storage
        .local_get(cluster::gossip::REMOVED)
        .map(|r| r.split(',').filter(|h| !h.is_empty()).map(str::to_string).collect())
        .unwrap_or_default();
    removed.push(host_id.to_string());
    let list = removed.join(",");
    storage.local_set(cluster::gossip::REMOVED, &list)?;
    gossip.set(cluster::gossip::REMOVED, list).await;
    Ok(())
}

/// The tokens and host id of the dead node at `addr` that this node
/// (`me`) replaces: Cassandra's checks, in its words.
fn take_place_of(addr: std::net::IpAddr, view: &ClusterView, me: Uuid) -> anyhow::Result<(Vec<i64>, Uuid)> {
    let Some(dead) = view.endpoints.values().find(|e| e.address() == addr && e.host_id != me && e.status.owns_tokens())
    else {
        anyhow::bail!("Cannot replace_address /{addr} because it doesn't exist in gossip");
    };
    if dead.alive {
        anyhow::bail!("Cannot replace a live node /{addr}");
    }
    Ok((dead.tokens.clone(), dead.host_id))
}

impl Joined {
    /// The bootstrap streamed everything: the node owns its ranges from now on.
    pub async fn finish_bootstrap(&mut self, storage: &Storage) -> anyhow::Result<()> {
        storage.local_set(BOOTSTRAPPING, "")?;
        storage.local_set(REPLACING, "")?;
        storage.local_set(crate::lifecycle::BOOTSTRAP_STREAMED, "")?;
        self.replacing = None;
        self.gossip.set_status(Status::Normal).await;
        self.bootstrap = false;
        Ok(())
    }
}

/// Waits until gossip shows a ring to join: a seed alone proceeds after a
/// few rounds; anyone else waits for a NORMAL peer (at most 60 s).
async fn wait_for_ring(gossip: &Gossip, i_am_seed: bool, seeds: &[SocketAddr]) -> anyhow::Result<ClusterView> {
    let start = Instant::now();
    let settle = Duration::from_secs(2);
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let view = gossip.view().await;
        let normal_peers =
            view.peers().filter(|e| e.status == Status::Normal && e.alive && !e.tokens.is_empty()).count();
        let joining_peers = view.peers().filter(|e| e.status == Status::Joining && e.alive).count();
        if normal_peers > 0 && start.elapsed() >= settle && joining_peers == 0 {
            return Ok(view);
        }
        if i_am_seed && normal_peers == 0 && start.elapsed() >= settle {
            return Ok(view);
        }
        if start.elapsed() > Duration::from_secs(60) {
            anyhow::bail!("Unable to contact any seeds: {seeds:?} (no NORMAL node answered gossip within 60 s)");
        }
    }
}

impl Joined {
    /// Spawns the cluster's background tasks. `processor_events` receives
    /// the driver-visible events.
    pub fn spawn_tasks(
        &mut self,
        schema: Arc<dyn SchemaSync>,
        processor_events: tokio::sync::broadcast::Sender<Event>,
        mut schema_changed: tokio::sync::mpsc::UnboundedReceiver<()>,
        load: Arc<dyn Fn() -> u64 + Send + Sync>,
    ) {
        if let Some(inbound) = self.inbound.take() {
            tokio::spawn(verbs::serve(
                Arc::clone(&self.coordinator),
                Arc::clone(&schema),
                Arc::clone(&self.streams),
                inbound,
            ));
        }
        tokio::spawn(verbs::dispatch_hints(Arc::clone(&self.coordinator), Duration::from_millis(500)));
        tokio::spawn(verbs::sync_schema(
            Arc::clone(&self.view),
            self.transport.clone(),
            Arc::clone(&schema),
            Duration::from_millis(500),
        ));
        // Driver events, and the hint window's down-since clock.
        if let Some(mut events) = self.events.take() {
            let coordinator = Arc::clone(&self.coordinator);
            let view = Arc::clone(&self.view);
            tokio::spawn(async move {
                while let Some(ev) = events.recv().await {
                    coordinator.observe_liveness(&view.snapshot());
                    let event = match ev {
                        ClusterEvent::NewNode(addr) => {
                            Event::TopologyChange { change: TopologyChangeType::NewNode, addr }
                        }
                        ClusterEvent::RemovedNode(addr) => {
                            Event::TopologyChange { change: TopologyChangeType::RemovedNode, addr }
                        }
                        ClusterEvent::Up { native, .. } => {
                            Event::StatusChange { change: StatusChangeType::Up, addr: native }
                        }
                        ClusterEvent::Down { native, .. } => {
                            Event::StatusChange { change: StatusChangeType::Down, addr: native }
                        }
                    };
                    let _ = processor_events.send(event);
                }
            });
        }
        // Gossip the schema version (at once after local DDL, whose push the
        // data plane makes and waits for) and the load.
        let gossip = Arc::clone(&self.gossip);
        let hints = Arc::clone(&self.hints);
        tokio::spawn(async move {
            let mut last_version = None;
            let mut last_load = Instant::now() - Duration::from_secs(60);
            let mut last_sync = Instant::now();
            loop {
                tokio::select! {
                    _ = schema_changed.recv() => {}
                    _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                }
                let version = schema.version();
                if last_version != Some(version) {
                    gossip.set("schema", version.to_string()).await;
                    last_version = Some(version);
                }
                if last_load.elapsed() > Duration::from_secs(5) {
                    let load = Arc::clone(&load);
                    let bytes = tokio::task::spawn_blocking(move || load()).await.unwrap_or(0);
                    gossip.set("load", bytes.to_string()).await;
                    last_load = Instant::now();
                }
                if last_sync.elapsed() > Duration::from_secs(5) {
                    if let Err(e) = hints.sync() {
                        tracing::warn!("cannot sync hints: {e}");
                    }
                    last_sync = Instant::now();
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ConfigFile, Overrides};

    fn config(seeds: &str) -> NodeConfig {
        ConfigFile::default()
            .build(Overrides {
                seeds: Some(seeds.to_string()),
                listen_address: Some("127.0.0.1".into()),
                ..Default::default()
            })
            .unwrap()
    }

    #[tokio::test]
    async fn seeds_may_be_addresses_or_host_names() {
        let c = config("127.0.0.5, 127.0.0.6:7001, localhost, no-such-host.invalid");
        let seeds = seed_addrs(&c).await;
        assert_eq!(
            seeds,
            vec![
                "127.0.0.1:7000".parse::<SocketAddr>().unwrap(),
                "127.0.0.5:7000".parse().unwrap(),
                "127.0.0.6:7001".parse().unwrap()
            ]
        );
        assert_eq!(seed_addrs(&config("localhost:7005")).await, vec!["127.0.0.1:7005".parse::<SocketAddr>().unwrap()]);
    }
}
