//! The data plane seam: how statement executors reach the data. Reads and
//! writes name a keyspace and a consistency level; the implementation decides
//! where the replicas are. The implementation is the cluster's (in `node`,
//! over `cluster::Coordinator`), for a node alone too: one set of
//! consistency rules (`cluster::plan`).
//!
//! Invariants:
//! - Executors never call `Storage` for user data directly; they go through
//!   this trait, so every read and write honours its consistency level.
//! - Implementations answer synchronously; reads may block the calling thread
//!   on the network (the server calls them where that is allowed); a write
//!   never waits: its local share joins the caller's [`WriteGroup`] and its
//!   wait for replicas is handed to it ([`WriteGroup::defer`]), whose owner
//!   answers only after both.

use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;

use storage::{IndexScan, Partition, PartitionRead, ScanRange, WriteBatch};
use types::mutation::Mutation;
use types::schema::KeyspaceDef;
use types::{Consistency, WriteType};
use uuid::Uuid;

use crate::error::QueryError;

/// Another node, as `system.peers` shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct PeerInfo {
    pub peer: IpAddr,
    pub peer_port: u16,
    pub rpc_address: IpAddr,
    pub native_port: u16,
    pub data_center: String,
    pub rack: String,
    pub host_id: Uuid,
    pub tokens: Vec<i64>,
    pub schema_version: Option<Uuid>,
    pub release_version: String,
}

pub trait DataPlane: Send + Sync {
    /// Applies mutations of one keyspace at `cl` as part of `group`: this
    /// node's share joins `group.batch`; a wait for other replicas is handed
    /// to the group ([`WriteGroup::defer`]) and `Ok(())` returned at once.
    /// An error returned here is the request's (nothing of it was collected).
    /// `write_type` is what a WriteTimeout reports.
    fn mutate(
        &self,
        group: &mut WriteGroup,
        ks: &Arc<KeyspaceDef>,
        mutations: Vec<Mutation>,
        cl: Consistency,
        write_type: WriteType,
    ) -> Result<(), QueryError>;
    /// Reads one partition at `cl`.
    fn read(&self, ks: &KeyspaceDef, read: PartitionRead, cl: Consistency) -> Result<Option<Partition>, QueryError>;
    /// A lightweight transaction on one partition (Paxos at `req.serial`):
    /// `decide` gets the partition's current rows (`req.read`) and returns
    /// the mutations to make (planned at timestamp 0; they take the
    /// ballot's time) or None. Answers whether they were made, and the rows
    /// `decide` saw.
    fn cas(
        &self,
        ks: &KeyspaceDef,
        req: CasRequest,
        decide: Decide<'_>,
    ) -> Result<(bool, Option<Partition>), QueryError>;
    /// Partition keys in a token range at `cl`.
    fn scan_keys(&self, ks: &KeyspaceDef, scan: &ScanRange, cl: Consistency)
        -> Result<Vec<(i64, Vec<u8>)>, QueryError>;
    /// Secondary index lookup at `cl`: the base partitions (token, key) whose
    /// replicas' local index holds the value in the scan's token range.
    fn index_keys(
        &self,
        ks: &KeyspaceDef,
        scan: &IndexScan,
        cl: Consistency,
    ) -> Result<Vec<(i64, Vec<u8>)>, QueryError>;
    /// TRUNCATE: empties a table on every replica (every node must be up).
    fn truncate(&self, ks: &KeyspaceDef, table: &Uuid) -> Result<(), QueryError>;
    /// Other nodes (for `system.peers`).
    fn peers(&self) -> Vec<PeerInfo> {
        Vec::new()
    }
    /// Called after this node changed the schema (DDL): tell the peers.
    fn schema_changed(&self) {}
}

/// A conditional write (or SERIAL read) of one partition.
#[derive(Clone, Debug)]
pub struct CasRequest {
    /// The rows the conditions read; its table, token and key name the partition.
    pub read: PartitionRead,
    /// SERIAL or LOCAL_SERIAL.
    pub serial: Consistency,
    /// The statement's consistency level: what the commit waits for.
    pub commit: Consistency,
}

/// A CAS's decision on the current rows: the mutations to make, if any.
pub type Decide<'a> = &'a mut dyn FnMut(Option<&Partition>) -> Result<Option<Vec<Mutation>>, QueryError>;

/// The rest of a write that waits for replicas, handed to the caller.
pub type DeferredWrite = Pin<Box<dyn Future<Output = Result<(), QueryError>> + Send>>;

/// The writes of a request group, explicit: what the server hands every
/// request it runs, and what it finishes once they all ran.
///
/// [`DataPlane::mutate`] collects this node's share of each write into
/// `batch` and, when other replicas must answer, hands the wait for them to
/// [`WriteGroup::defer`]. The server then commits `batch` (one commit for the
/// whole group), awaits the deferred writes, and only then answers the
/// requests, each with its own outcome. A group dropped before its commit
/// writes nothing.
pub struct WriteGroup {
    pub batch: WriteBatch,
    deferred: Vec<DeferredWrite>,
}

impl Default for WriteGroup {
    fn default() -> WriteGroup {
        WriteGroup::new()
    }
}

impl WriteGroup {
    pub fn new() -> WriteGroup {
        WriteGroup { batch: WriteBatch::new(), deferred: Vec::new() }
    }

    /// Hands over the wait for a write's remote replicas: the group's owner
    /// awaits it after the commit and before answering.
    pub fn defer(&mut self, write: DeferredWrite) {
        self.deferred.push(write);
    }

    /// Mutations collected so far (a request joined the commit if it grew).
    pub fn mutations(&self) -> usize {
        self.batch.mutations()
    }

    /// Writes deferred so far (a request's are those it added).
    pub fn deferred(&self) -> usize {
        self.deferred.len()
    }

    /// What is left to do: commit the batch, then await the deferred writes.
    pub fn into_parts(self) -> (WriteBatch, Vec<DeferredWrite>) {
        (self.batch, self.deferred)
    }
}
