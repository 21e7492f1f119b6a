//! The cluster's data plane: `cql_server::data::DataPlane` over
//! `cluster::Coordinator`, and the schema service seen as
//! `cluster::verbs::SchemaSync`.
//!
//! The statement executors are synchronous; the coordinator is async. A
//! write joins the caller's `WriteGroup`: one this node completes alone
//! (`Coordinator::mutate_here`: the ring's only member) is collected into the
//! group's batch with no future built; otherwise `Coordinator::write_across`
//! collects this node's share, queues the remote sends and returns the wait
//! for the acks, polled once (served by this node's replica alone, at ONE,
//! it is done) and else handed to the group (`WriteGroup::defer`), which the
//! server awaits after its commit and before answering. A read that must
//! wait hands the thread over to the runtime (`block_in_place`) while the
//! future completes, so network waits never stall the other connections'
//! tasks. Counter updates (`WriteType::Counter`) go to their leader
//! (`Coordinator::counter_write`), which commits on its own, not in the group.
//!
//! Invariants:
//! - Coordinator errors map to the CQL errors of the same name with
//!   Cassandra's payloads (Unavailable, WriteTimeout, ReadTimeout).
//! - Must be called from a multi-threaded runtime's worker or blocking thread.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use cluster::verbs::SchemaSync;
use cluster::{CoordError, Coordinator};
use cql_server::data::{CasRequest, DataPlane, Decide, DeferredWrite, PeerInfo, WriteGroup};
use cql_server::error::QueryError;
use cql_server::schema::SchemaService;
use net::TcpTransport;
use storage::{IndexScan, Partition, PartitionRead, ScanRange};
use types::mutation::Mutation;
use types::schema::KeyspaceDef;
use types::{Consistency, WriteType};
use uuid::Uuid;

pub struct ClusterPlane {
    pub coordinator: Arc<Coordinator<TcpTransport>>,
    /// The schema this node serves: pushed to the live peers after local DDL.
    pub schema: Arc<SchemaService>,
    /// Told after local DDL: the node gossips its new schema version at once.
    pub schema_changed: tokio::sync::mpsc::UnboundedSender<()>,
}

fn run<T>(fut: impl Future<Output = T>) -> T {
    let mut fut = pin!(fut);
    if let Poll::Ready(v) = fut.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        return v;
    }
    let handle = tokio::runtime::Handle::current();
    tokio::task::block_in_place(move || handle.block_on(fut))
}

pub fn query_error(e: CoordError) -> QueryError {
    match e {
        CoordError::Unavailable { consistency, required, alive } => {
            QueryError::Unavailable { consistency, required, alive }
        }
        CoordError::WriteTimeout { consistency, received, block_for, write_type } => {
            QueryError::WriteTimeout { consistency, received, block_for, write_type }
        }
        CoordError::ReadTimeout { consistency, received, block_for, data_present } => {
            QueryError::ReadTimeout { consistency, received, block_for, data_present }
        }
        CoordError::Invalid(m) => QueryError::Invalid(m),
        CoordError::Server(m) => QueryError::Server(m),
        CoordError::ReadFailure { consistency, received, block_for, failures, message, reasons } => {
            QueryError::ReadFailure { consistency, received, block_for, failures, message, reasons }
        }
    }
}

impl DataPlane for ClusterPlane {
    fn mutate(
        &self,
        group: &mut WriteGroup,
        ks: &Arc<KeyspaceDef>,
        mutations: Vec<Mutation>,
        cl: Consistency,
        write_type: WriteType,
    ) -> Result<(), QueryError> {
        metrics::client::note(metrics::Op::Write, cl);
        let view = self.coordinator.view.snapshot();
        let mut pending = if write_type == WriteType::Counter {
            // Counter updates go through their leader (`cluster::counter`), which writes on its own.
            self.coordinator.counter_write(view, ks, mutations, cl).map_err(query_error)?
        } else {
            if let Some(done) = self.coordinator.mutate_here(&view, ks, &mutations, cl, &mut group.batch) {
                return done.map_err(query_error);
            }
            self.coordinator.write_across(view, ks, mutations, cl, write_type, &mut group.batch).map_err(query_error)?
        };
        if let Poll::Ready(v) = pending.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            return v.map_err(query_error);
        }
        // Waiting for replicas: the group's owner awaits it after its commit.
        let write: DeferredWrite = Box::pin(async move { pending.await.map_err(query_error) });
        group.defer(write);
        Ok(())
    }

    fn read(&self, ks: &KeyspaceDef, read: PartitionRead, cl: Consistency) -> Result<Option<Partition>, QueryError> {
        let serial = matches!(cl, Consistency::Serial | Consistency::LocalSerial);
        let op = if serial { metrics::Op::CasRead } else { metrics::Op::Read };
        metrics::client::note(op, cl);
        run(self.coordinator.read(ks, read, cl)).map_err(query_error)
    }

    fn cas(
        &self,
        ks: &KeyspaceDef,
        req: CasRequest,
        decide: Decide<'_>,
    ) -> Result<(bool, Option<Partition>), QueryError> {
        metrics::client::note(metrics::Op::CasWrite, req.serial);
        let req = cluster::paxos::CasRequest { read: req.read, serial: req.serial, commit: req.commit, is_read: false };
        // `decide`'s own error goes back to the client as it is.
        let mut refused: Option<QueryError> = None;
        let outcome = run(self.coordinator.cas(ks, req, |current| {
            decide(current).map_err(|e| {
                refused = Some(e);
                CoordError::Server("the conditional write was refused".into())
            })
        }));
        match (outcome, refused) {
            (_, Some(e)) => Err(e),
            (Ok(o), None) => Ok((o.applied, o.current)),
            (Err(e), None) => Err(query_error(e)),
        }
    }

    fn index_keys(
        &self,
        ks: &KeyspaceDef,
        scan: &IndexScan,
        cl: Consistency,
    ) -> Result<Vec<(i64, Vec<u8>)>, QueryError> {
        metrics::client::note(metrics::Op::Range, cl);
        run(self.coordinator.index_keys(ks, scan.clone(), cl)).map_err(query_error)
    }

    fn scan_keys(
        &self,
        ks: &KeyspaceDef,
        scan: &ScanRange,
        cl: Consistency,
    ) -> Result<Vec<(i64, Vec<u8>)>, QueryError> {
        metrics::client::note(metrics::Op::Range, cl);
        run(self.coordinator.scan_keys(ks, scan.clone(), cl)).map_err(query_error)
    }

    fn truncate(&self, _ks: &KeyspaceDef, table: &Uuid) -> Result<(), QueryError> {
        run(self.coordinator.truncate(*table)).map_err(query_error)
    }

    /// The ring's other members (NORMAL, LEAVING, or announced shut down):
    /// a joining node is listed only once it is NORMAL, as Cassandra writes a
    /// peer's row only for token-ring members (`StorageService.onChange`,
    /// `handleStateNormal`); drivers refuse rows without tokens ("Found an
    /// invalid row for peer") and count every listed peer for schema agreement.
    fn peers(&self) -> Vec<PeerInfo> {
        let view = self.coordinator.view.snapshot();
        view.peers()
            .filter(|e| e.status.owns_tokens())
            .map(|e| PeerInfo {
                peer: e.internode.ip(),
                peer_port: e.internode.port(),
                rpc_address: e.rpc_address,
                native_port: e.native_port,
                data_center: e.dc.clone(),
                rack: e.rack.clone(),
                host_id: e.host_id,
                tokens: e.tokens.clone(),
                schema_version: e.schema_version,
                release_version: e.release_version.clone(),
            })
            .collect()
    }

    /// Gossips the new version and pushes the schema to every live peer,
    /// returning once each has applied it (failed pushes are sent again, for
    /// at most `SCHEMA_PUSH_WAIT` in all): the
    /// DDL's answer reaches the client only then, so a statement it sends
    /// next to any live node finds the change (a driver that skips schema
    /// agreement, or counts a node it has not connected to yet as down, saw
    /// "unconfigured table" before). A peer that missed it pulls it later.
    fn schema_changed(&self) {
        let _ = self.schema_changed.send(());
        let coordinator = &self.coordinator;
        run(cluster::verbs::push_schema(
            &coordinator.view,
            &coordinator.transport,
            &SchemaAdapter(Arc::clone(&self.schema)),
            cluster::verbs::SCHEMA_PUSH_WAIT,
        ));
    }
}

/// The schema service as the cluster layer needs it.
pub struct SchemaAdapter(pub Arc<SchemaService>);

impl SchemaSync for SchemaAdapter {
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
