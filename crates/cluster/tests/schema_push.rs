//! A DDL's schema push (`verbs::push_schema`) between two nodes on the
//! in-memory network, each with the real schema service and the real schema
//! verbs: a push that is lost is sent again, so the DDL is answered only once
//! the live peer has applied it (a driver's agreement check then cannot agree
//! on a schema without the change), and a peer that never answers is given up
//! on within the bound.

#![allow(clippy::unwrap_used, reason = "an integration test: a failed unwrap names its line")]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cluster::verbs::{self, SchemaSync};
use cluster::{ClusterView, Endpoint, Status, ViewHandle};
use cql_server::schema::SchemaService;
use net::MemNetwork;
use storage::{CommitlogSync, Storage, StorageConfig};
use types::schema::{KeyspaceDef, Replication};
use uuid::Uuid;

/// The schema service as the cluster layer sees it (the node crate's adapter does the same).
struct Schema(Arc<SchemaService>);

impl SchemaSync for Schema {
    fn version(&self) -> Uuid {
        self.0.snapshot().version
    }
    fn export(&self) -> Vec<u8> {
        self.0.export()
    }
    fn merge(&self, payload: &[u8]) -> Result<bool, String> {
        self.0.merge_export(payload).map_err(|e| e.to_string())
    }
}

struct Node {
    storage: Arc<Storage>,
    schema: Arc<Schema>,
    _dir: tempfile::TempDir,
}

fn node() -> Node {
    let dir = tempfile::tempdir().unwrap();
    let (storage, stored) = Storage::open(StorageConfig {
        data_dir: dir.path().to_path_buf(),
        commitlog_sync: CommitlogSync::Periodic { period: Duration::from_secs(10) },
        cache_bytes: 8 << 20,
        row_cache_bytes: 0,
        memtable_bytes: 8 << 20,
        memtable_space: 64 << 20,
        tombstone_horizon: i64::MAX,
    })
    .unwrap();
    let storage = Arc::new(storage);
    let schema = Arc::new(Schema(Arc::new(SchemaService::new(Arc::clone(&storage), stored))));
    Node { storage, schema, _dir: dir }
}

fn endpoint(n: u128, internode: SocketAddr) -> Endpoint {
    Endpoint {
        host_id: Uuid::from_u128(n),
        internode,
        rpc_address: internode.ip(),
        native_port: 9042,
        dc: "dc1".into(),
        rack: "rack1".into(),
        tokens: vec![n as i64],
        status: Status::Normal,
        alive: true,
        schema_version: None,
        release_version: String::new(),
        load_bytes: 0,
        generation: 1,
    }
}

/// Node 1's view: itself and node 2 at `peer`, alive.
fn view(local: SocketAddr, peer: SocketAddr) -> ViewHandle {
    let endpoints: BTreeMap<Uuid, Endpoint> =
        [endpoint(1, local), endpoint(2, peer)].into_iter().map(|e| (e.host_id, e)).collect();
    ViewHandle::new(ClusterView::build("c", Uuid::from_u128(1), endpoints, 1))
}

fn create_keyspace(schema: &SchemaService, name: &str) {
    schema
        .update(|stored| {
            let def = KeyspaceDef {
                name: name.to_string(),
                replication: Replication::Simple { replication_factor: 1 },
                durable_writes: true,
                tables: BTreeMap::new(),
                types: BTreeMap::new(),
            };
            stored.insert(name.to_string(), def);
            Ok(())
        })
        .unwrap();
}

/// Node 2 answers its schema verbs as a node does (`verbs::handle`).
fn serve(node: &Node, mut inbound: tokio::sync::mpsc::Receiver<net::Inbound>) {
    let (storage, schema) = (Arc::clone(&node.storage), Arc::clone(&node.schema));
    tokio::spawn(async move {
        while let Some(msg) = inbound.recv().await {
            verbs::handle(&storage, &*schema, msg);
        }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_push_is_sent_again_and_the_ddl_waits_until_the_peer_applied_it() {
    let (a_addr, b_addr): (SocketAddr, SocketAddr) =
        ("10.0.0.1:7000".parse().unwrap(), "10.0.0.2:7000".parse().unwrap());
    let net = MemNetwork::new(11);
    let (a_transport, _a_inbound) = net.add_node(a_addr);
    let (_b_transport, b_inbound) = net.add_node(b_addr);
    let (a, b) = (node(), node());
    serve(&b, b_inbound);
    create_keyspace(&a.schema.0, "ks");
    // Node 1's first push is lost (a one-way partition, healed a moment later).
    net.partition(a_addr, b_addr);
    let healer = net.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        healer.heal(a_addr, b_addr);
    });
    let started = Instant::now();
    let missed = verbs::push_schema(&view(a_addr, b_addr), &a_transport, &*a.schema, verbs::SCHEMA_PUSH_WAIT).await;
    assert!(missed.is_empty(), "the push was not sent again: {missed:?}");
    assert!(b.schema.0.snapshot().keyspace("ks").is_some(), "node 2 does not have the keyspace");
    assert_eq!(b.schema.version(), a.schema.version(), "the same schema has the same version");
    assert!(started.elapsed() < verbs::SCHEMA_PUSH_WAIT, "took {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_never_answers_is_given_up_on_within_the_bound() {
    let (a_addr, b_addr): (SocketAddr, SocketAddr) =
        ("10.0.0.1:7000".parse().unwrap(), "10.0.0.2:7000".parse().unwrap());
    let net = MemNetwork::new(12);
    let (a_transport, _a_inbound) = net.add_node(a_addr);
    let (_b_transport, b_inbound) = net.add_node(b_addr);
    let (a, b) = (node(), node());
    serve(&b, b_inbound);
    create_keyspace(&a.schema.0, "ks");
    net.partition(a_addr, b_addr);
    let started = Instant::now();
    let wait = Duration::from_millis(1500);
    let missed = verbs::push_schema(&view(a_addr, b_addr), &a_transport, &*a.schema, wait).await;
    assert_eq!(missed, vec![b_addr]);
    assert!(started.elapsed() < wait + Duration::from_millis(500), "took {:?}", started.elapsed());
    assert!(b.schema.0.snapshot().keyspace("ks").is_none());
}
