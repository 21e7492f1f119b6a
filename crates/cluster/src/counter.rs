//! Counter writes, as Cassandra's `StorageProxy.mutateCounter` and
//! `CounterMutation` do them.
//!
//! The coordinator sends each counter update (the client's deltas) to one
//! replica of its partition, the leader: itself when it is a live replica,
//! else a live replica of its own data center, else any live replica
//! (`CounterMutationReq`). The leader, under a lock of the partition
//! (`CounterLocks`), reads its own shard of each updated counter (counter id
//! = its host id), writes the shard's next version (clock + 1, count +
//! delta) through the durable write path (commit log), releases the lock,
//! then replicates the resulting cells (its whole shard, never the delta) to
//! the other replicas at the request's level, hinting those that are down
//! or fail, as for any write. It answers the coordinator once the level is
//! met (WriteTimeout with write type COUNTER otherwise).
//!
//! Invariants:
//! - Only the leader writes a new version of its shard, under the lock, from
//!   what it holds itself: versions of one shard are totally ordered by their
//!   clocks, so replicas merging them (`types::counter`) in any order and any
//!   number of times (replication, hints, read repair, repair, streaming)
//!   converge on the newest, and no increment is counted twice.
//! - An update the leader applied but failed to replicate is not lost: the
//!   leader's next version of the shard carries it, and hints, read repair
//!   and repair bring it to the others. An update whose leader died before
//!   its commit is lost; either way the client saw a timeout or an error.
//! - Unavailable is decided by the coordinator before anything is sent, and
//!   again by the leader with its own view.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use net::{Inbound, Transport, Verb};
use types::counter::Shard;
use types::mutation::{CellWrite, Mutation};
use types::schema::{KeyspaceDef, Replication};
use types::{Consistency, WriteType};
use uuid::Uuid;

use crate::coordinator::{storage_err, Coordinator, PendingWrite};
use crate::plan::{CoordError, Requirement, WritePlan};
use crate::view::ClusterView;
use crate::wire;

/// Lock stripes: updates of partitions hashing to one stripe wait for each other.
const STRIPES: usize = 1024;

/// The leader's per-partition locks (striped), held from the read of its
/// shards to the commit of their next versions.
pub struct CounterLocks {
    stripes: Vec<Mutex<()>>,
}

impl Default for CounterLocks {
    fn default() -> CounterLocks {
        CounterLocks { stripes: (0..STRIPES).map(|_| Mutex::new(())).collect() }
    }
}

impl CounterLocks {
    fn lock(&self, m: &Mutation) -> Option<std::sync::MutexGuard<'_, ()>> {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        m.table.hash(&mut h);
        m.partition_key.hash(&mut h);
        let stripe = self.stripes.get((h.finish() as usize) % STRIPES)?;
        Some(stripe.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// The delta a counter cell of a counter update carries.
fn delta(cell: &CellWrite) -> Result<i64, CoordError> {
    let bytes: [u8; 8] = cell
        .value
        .as_deref()
        .and_then(|v| v.try_into().ok())
        .ok_or_else(|| CoordError::Invalid("A counter update needs an 8-byte delta".into()))?;
    Ok(i64::from_be_bytes(bytes))
}

/// The replica to lead an update: this node when it is a live replica, else
/// a live replica of this data center, else any live replica.
fn pick_leader(view: &ClusterView, plan: &WritePlan) -> Option<Uuid> {
    if plan.live.iter().any(|(r, _)| *r == view.local) {
        return Some(view.local);
    }
    let local_dc = view.local_dc();
    plan.live.iter().find(|(_, dc)| dc == local_dc).or_else(|| plan.live.first()).map(|(r, _)| *r)
}

impl<T: Transport + Clone> Coordinator<T> {
    /// A counter write at `cl` (`mutations` hold deltas): each partition's
    /// update goes to its leader; the wait ends when every leader answered.
    /// Local keyspaces and a lone node lead every update here.
    pub fn counter_write(
        self: &Arc<Self>,
        view: Arc<ClusterView>,
        ks: &KeyspaceDef,
        mutations: Vec<Mutation>,
        cl: Consistency,
    ) -> Result<PendingWrite, CoordError> {
        if Self::local_only(&view, ks) || Self::sole_replica(&view, ks, &mutations) {
            if !matches!(ks.replication, Replication::Local) {
                Requirement::of(&ks.replication, cl, view.local_dc(), true)
                    .and_then(|r| r.assure_available(std::iter::once(view.local_dc())))?;
            }
            self.apply_as_leader(&view, mutations)?;
            return Ok(Box::pin(std::future::ready(Ok(()))));
        }
        let mut by_leader: BTreeMap<Uuid, (Vec<Mutation>, i32)> = BTreeMap::new();
        for m in mutations {
            let plan = WritePlan::new(&view, ks, m.token, cl)?;
            let block_for = plan.requirement.block_for as i32;
            let leader = pick_leader(&view, &plan).ok_or(CoordError::Unavailable {
                consistency: cl,
                required: block_for,
                alive: 0,
            })?;
            let entry = by_leader.entry(leader).or_insert_with(|| (Vec::new(), block_for));
            entry.0.push(m);
        }
        let mut waits: Vec<PendingWrite> = Vec::with_capacity(by_leader.len());
        for (leader, (muts, block_for)) in by_leader {
            if leader == view.local {
                waits.push(self.lead_counter(Arc::clone(&view), ks, muts, cl)?);
                continue;
            }
            let timeout =
                CoordError::WriteTimeout { consistency: cl, received: 0, block_for, write_type: WriteType::Counter };
            let Some(addr) = Self::address(&view, leader) else { return Err(timeout) };
            let payload = wire::encode_counter_request(cl, &muts);
            // The leader answers within its own write timeout; allow for the trip.
            let (verb, payload) = crate::traced::outgoing(addr, Verb::CounterMutationReq, payload);
            let fut = self.transport.send_request(addr, verb, payload, self.config.write_timeout * 2);
            let handle = tokio::spawn(fut);
            waits.push(Box::pin(async move {
                match handle.await {
                    Ok(Ok((_, body))) => wire::decode_counter_outcome(&body).unwrap_or(Err(timeout)),
                    Ok(Err(e)) => {
                        tracing::debug!(%leader, "counter leader failed: {e}");
                        Err(timeout)
                    }
                    Err(_) => Err(timeout),
                }
            }));
        }
        Ok(Box::pin(async move {
            let mut outcome = Ok(());
            for w in waits {
                if let Err(e) = w.await {
                    outcome = outcome.and(Err(e));
                }
            }
            outcome
        }))
    }

    /// The leader's part: applies the updates to its own shards (durably, each
    /// partition under its lock) and replicates the resulting cells at `cl`.
    pub fn lead_counter(
        self: &Arc<Self>,
        view: Arc<ClusterView>,
        ks: &KeyspaceDef,
        deltas: Vec<Mutation>,
        cl: Consistency,
    ) -> Result<PendingWrite, CoordError> {
        for m in &deltas {
            WritePlan::new(&view, ks, m.token, cl)?;
        }
        let applied = self.apply_as_leader(&view, deltas)?;
        self.replicate(view, ks, applied, cl, WriteType::Counter)
    }

    /// Each update's next shard versions, written here through the commit
    /// log under the partition's lock; returns the mutations as applied.
    fn apply_as_leader(&self, view: &ClusterView, deltas: Vec<Mutation>) -> Result<Vec<Mutation>, CoordError> {
        let id = *view.local.as_bytes();
        let mut applied = Vec::with_capacity(deltas.len());
        for mut m in deltas {
            let _guard = self.counter_locks.lock(&m);
            for row in &mut m.rows {
                // One cell per counter: repeated updates of a column add up.
                let mut cells: Vec<CellWrite> = Vec::with_capacity(row.cells.len());
                for cell in std::mem::take(&mut row.cells) {
                    if !cell.is_counter() {
                        cells.push(cell);
                        continue;
                    }
                    let d = delta(&cell)?;
                    match cells.iter_mut().find(|c| c.is_counter() && c.column == cell.column) {
                        Some(prev) => {
                            let sum = delta(prev)?.wrapping_add(d);
                            prev.value = Some(Bytes::copy_from_slice(&sum.to_be_bytes()));
                        }
                        None => cells.push(cell),
                    }
                }
                let columns: Vec<u16> = cells.iter().filter(|c| c.is_counter()).map(|c| c.column).collect();
                if !columns.is_empty() {
                    let shards = self
                        .storage
                        .counter_shards(
                            &m.table,
                            m.token,
                            &m.partition_key,
                            row.is_static,
                            &row.clustering,
                            &columns,
                            &id,
                        )
                        .map_err(storage_err)?;
                    for (cell, local) in cells.iter_mut().filter(|c| c.is_counter()).zip(shards) {
                        let shard = Shard {
                            id,
                            clock: local.clock.wrapping_add(1),
                            count: local.count.wrapping_add(delta(cell)?),
                            timestamp: cell.timestamp,
                        };
                        cell.value = Some(Bytes::from(types::counter::single(shard)));
                    }
                }
                row.cells = cells;
            }
            self.storage.apply(std::slice::from_ref(&m)).map_err(storage_err)?;
            applied.push(m);
        }
        Ok(applied)
    }

    /// Serves a `CounterMutationReq`: leads the updates and answers the
    /// outcome once the level is met or missed (never a transport failure,
    /// so the coordinator reports the leader's own Unavailable or timeout).
    pub async fn serve_counter(self: Arc<Self>, msg: Inbound) {
        let Inbound { from, payload, responder, .. } = msg;
        let (cl, deltas) = match wire::decode_counter_request(&payload) {
            Ok(r) => r,
            Err(e) => {
                responder.fail(net::FailureCode::MalformedPayload, &e.to_string());
                return;
            }
        };
        let Some(table) = deltas.first().map(|m| m.table) else {
            responder.respond(Verb::CounterMutationRsp, wire::encode_counter_outcome(&Ok(())));
            return;
        };
        let this = Arc::clone(&self);
        let led = tokio::task::spawn_blocking(move || {
            let ks = this
                .storage
                .keyspace_of(&table)
                .ok_or_else(|| CoordError::Invalid(format!("unknown table {table}")))?;
            this.lead_counter(this.view.snapshot(), &ks, deltas, cl)
        })
        .await;
        let outcome = match led {
            Ok(Ok(pending)) => pending.await,
            Ok(Err(e)) => Err(e),
            Err(e) => Err(CoordError::Server(format!("counter leader task failed: {e}"))),
        };
        if let Err(e) = &outcome {
            tracing::debug!(%from, "counter update led here failed: {e}");
        }
        responder.respond(Verb::CounterMutationRsp, wire::encode_counter_outcome(&outcome));
    }
}
