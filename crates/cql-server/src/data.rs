//! The data plane seam: how statement executors reach the data. Reads and
//! writes name a keyspace and a consistency level; the implementation decides
//! where the replicas are. The implementation is the cluster's (in `node`,
//! over `cluster::Coordinator`), for a node alone too: one set of
//! consistency rules (`cluster::plan`).
//!
//! Invariants:
//! - Executors never call `Storage` for user data directly; they go through
//!   this trait, so every read and write honours its consistency level.
//! - Implementations answer synchronously; a cluster implementation may
//!   block the calling thread on the network (the server calls it where that
//!   is allowed), or, for a write inside [`collect_deferred`], hand the wait
//!   for replicas to the caller ([`defer_write`]), who answers only after it.

use std::cell::RefCell;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;

use storage::{Partition, PartitionRead, ScanRange};
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
    /// Applies mutations of one keyspace at `cl`. `write_type` is what a
    /// WriteTimeout reports (`SIMPLE`, `BATCH`, `UNLOGGED_BATCH`).
    ///
    /// Inside [`collect_deferred`] on this thread, an implementation whose
    /// write must wait for replicas may hand that wait over with
    /// [`defer_write`] and return `Ok(())` at once: the caller then answers
    /// only after the deferred wait ends, with its error if it failed.
    fn mutate(
        &self,
        ks: &Arc<KeyspaceDef>,
        mutations: Vec<Mutation>,
        cl: Consistency,
        write_type: WriteType,
    ) -> Result<(), QueryError>;
    /// Reads one partition at `cl`.
    fn read(&self, ks: &KeyspaceDef, read: PartitionRead, cl: Consistency) -> Result<Option<Partition>, QueryError>;
    /// Partition keys in a token range at `cl`.
    fn scan_keys(&self, ks: &KeyspaceDef, scan: &ScanRange, cl: Consistency)
        -> Result<Vec<(i64, Vec<u8>)>, QueryError>;
    /// TRUNCATE: empties a table on every replica (every node must be up).
    fn truncate(&self, ks: &KeyspaceDef, table: &Uuid) -> Result<(), QueryError>;
    /// Other nodes (for `system.peers`).
    fn peers(&self) -> Vec<PeerInfo> {
        Vec::new()
    }
    /// Called after this node changed the schema (DDL): tell the peers.
    fn schema_changed(&self) {}
}

/// The rest of a write that waits for replicas, handed to the caller.
pub type DeferredWrite = Pin<Box<dyn Future<Output = Result<(), QueryError>> + Send>>;

thread_local! {
    static DEFERRED: RefCell<Option<Vec<DeferredWrite>>> = const { RefCell::new(None) };
}

/// Runs `f`, collecting the writes [`DataPlane::mutate`] defers on this
/// thread meanwhile; the caller must await every one before answering the
/// requests `f` ran. Scopes nest (an inner scope keeps its own).
pub fn collect_deferred<R>(f: impl FnOnce() -> R) -> (R, Vec<DeferredWrite>) {
    struct Restore(Option<Vec<DeferredWrite>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let outer = self.0.take();
            DEFERRED.with(|d| *d.borrow_mut() = outer);
        }
    }
    let restore = Restore(DEFERRED.with(|d| d.borrow_mut().replace(Vec::new())));
    let out = f();
    let deferred = DEFERRED.with(|d| d.borrow_mut().take()).unwrap_or_default();
    drop(restore);
    (out, deferred)
}

/// Hands `write` to the [`collect_deferred`] scope of this thread; gives it
/// back when there is none (the caller must then wait for it itself).
pub fn defer_write(write: DeferredWrite) -> Result<(), DeferredWrite> {
    DEFERRED.with(|d| match d.borrow_mut().as_mut() {
        Some(list) => {
            list.push(write);
            Ok(())
        }
        None => Err(write),
    })
}

/// How many writes this thread's scope holds (0 outside one).
pub fn deferred_writes() -> usize {
    DEFERRED.with(|d| d.borrow().as_ref().map_or(0, Vec::len))
}
