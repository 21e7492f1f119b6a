//! The coordinator: runs a client's write or read against the replicas of
//! each partition at a consistency level (Cassandra's `StorageProxy`).
//!
//! Writes go to every live replica (the local one applied directly, remote
//! ones as `MutationReq`); the request answers when the level's `blockFor`
//! acknowledgements arrived, or fails with WriteTimeout after
//! `write_request_timeout`. Replicas that are down, fail, or do not answer in
//! time get a hint. Reads send one data request (the closest replica) and
//! digest requests to the other replicas the level needs; on a mismatch they
//! fetch full data from each, reconcile by the storage merge rules, write the
//! winners back to stale replicas and wait for those writes (blocking read
//! repair) before answering.
//!
//! Invariants:
//! - Unavailable is decided before anything is sent (`plan`).
//! - A write acknowledged at level L was applied by L's `blockFor` replicas
//!   (or, for ANY, at least hinted).
//! - A read at level L returns data that, when the request succeeds, is the
//!   reconciliation of `blockFor` replicas, and those replicas hold at least
//!   that data afterwards (monotonic quorum reads).
//! - Nothing here blocks a runtime thread on the network: remote work is
//!   awaited; only local storage calls are synchronous.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use net::{message, ReadRequest, ReadResponse, Transport, Verb};
use storage::{IndexScan, Partition, PartitionRead, RawPartition, ScanRange, Storage, WriteBatch};
use types::mutation::Mutation;
use types::schema::{KeyspaceDef, Replication};
use types::{Consistency, WriteType};
use uuid::Uuid;

use crate::plan::{AckCounter, CoordError, ReadPlan, Requirement, WritePlan};
use crate::view::{ClusterView, ViewHandle};
use crate::wire;

#[derive(Clone, Debug)]
pub struct CoordinatorConfig {
    pub write_timeout: Duration,
    pub read_timeout: Duration,
    /// A lightweight transaction retries contended ballots this long (`paxos`).
    pub cas_contention_timeout: Duration,
    pub hinted_handoff_enabled: bool,
    pub max_hint_window: Duration,
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        CoordinatorConfig {
            write_timeout: Duration::from_secs(2),
            read_timeout: Duration::from_secs(5),
            cas_contention_timeout: Duration::from_secs(1),
            hinted_handoff_enabled: true,
            max_hint_window: Duration::from_secs(3 * 3600),
        }
    }
}

pub struct Coordinator<T: Transport> {
    pub view: Arc<ViewHandle>,
    pub storage: Arc<Storage>,
    pub transport: T,
    pub hints: Arc<hints::HintStore>,
    pub config: CoordinatorConfig,
    /// When each currently-down endpoint was first seen down (for the hint window).
    down_since: Mutex<HashMap<Uuid, Instant>>,
    /// Draws the pauses between contended Paxos ballots (`paxos`).
    pub(crate) paxos_rng: Mutex<rand::rngs::StdRng>,
    /// The counter leader's partition locks (`counter`).
    pub(crate) counter_locks: crate::counter::CounterLocks,
    /// Request tracing: the sessions this node's replica side joins (`traced`).
    tracer: std::sync::OnceLock<Arc<trace::Tracer>>,
}

/// A storage error keeps its CQL kind across the cluster path, as on one node
/// (`cql-server`'s `From<StorageError>`): what the request got wrong is
/// Invalid, what the node failed at is a ServerError.
pub(crate) fn storage_err(e: storage::StorageError) -> CoordError {
    use storage::StorageError as E;
    match e {
        E::KeyTooLong(_) | E::Invalid(_) | E::UnknownTable(_) | E::DiskUsageExceeded => {
            CoordError::Invalid(e.to_string())
        }
        other => CoordError::Server(other.to_string()),
    }
}

pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// The wait for a write's remote replicas ([`Coordinator::write_across`]),
/// ending with the write's outcome.
pub type PendingWrite = std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), CoordError>> + Send>>;

/// A replica's answer to a read.
enum ReadAnswer {
    Data(RawPartition),
    Digest([u8; 16]),
}

impl<T: Transport + Clone> Coordinator<T> {
    pub fn new(
        view: Arc<ViewHandle>,
        storage: Arc<Storage>,
        transport: T,
        hints: Arc<hints::HintStore>,
        config: CoordinatorConfig,
    ) -> Self {
        use rand::SeedableRng;
        Coordinator {
            view,
            storage,
            transport,
            hints,
            config,
            down_since: Mutex::new(HashMap::new()),
            paxos_rng: Mutex::new(rand::rngs::StdRng::seed_from_u64(rand::random())),
            counter_locks: crate::counter::CounterLocks::default(),
            tracer: std::sync::OnceLock::new(),
        }
    }

    /// Records the steps of traced requests this node serves as a replica
    /// into `tracer` (set once; a traced request arriving before is served
    /// untraced).
    pub fn set_tracer(&self, tracer: Arc<trace::Tracer>) {
        let _ = self.tracer.set(tracer);
    }

    pub fn tracer(&self) -> Option<&Arc<trace::Tracer>> {
        self.tracer.get()
    }

    /// Seeds the pauses of contended Paxos rounds (the simulator's runs replay).
    pub fn seed_paxos(&self, seed: u64) {
        use rand::SeedableRng;
        *self.paxos_rng.lock().unwrap_or_else(|p| p.into_inner()) = rand::rngs::StdRng::seed_from_u64(seed);
    }

    pub(crate) fn local_only(view: &ClusterView, ks: &KeyspaceDef) -> bool {
        matches!(ks.replication, Replication::Local) || view.ring.is_empty()
    }

    /// Whether this node is every written partition's only replica because
    /// it is the ring's only member and a replica of the keyspace: then the
    /// write needs no per-partition plans, remote sends or hints.
    pub(crate) fn sole_replica(view: &ClusterView, ks: &KeyspaceDef, mutations: &[Mutation]) -> bool {
        if !view.sole_owner() || mutations.is_empty() {
            return false;
        }
        match ks.replication {
            // SimpleStrategy places min(factor, members) replicas: with one
            // member and a factor of at least one, that member, for every
            // token (so no replica computation per request).
            Replication::Simple { replication_factor } => replication_factor >= 1,
            // One member: every token has the replicas of the first.
            _ => mutations.first().is_some_and(|m| view.replicas(ks, m.token) == [view.local]),
        }
    }

    pub(crate) fn address(view: &ClusterView, id: Uuid) -> Option<SocketAddr> {
        view.endpoint(id).map(|e| e.internode)
    }

    /// Keeps `down_since` in step with the view; call after each view change.
    pub fn observe_liveness(&self, view: &ClusterView) {
        let mut down = self.down_since.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        for e in view.endpoints.values() {
            if e.alive {
                down.remove(&e.host_id);
            } else {
                down.entry(e.host_id).or_insert(now);
            }
        }
    }

    /// Stores a hint for `target` unless hinted handoff is off or the target
    /// has been down longer than `max_hint_window`. True when stored.
    pub(crate) fn hint(&self, target: Uuid, mutations: &[&Mutation]) -> bool {
        if !self.config.hinted_handoff_enabled {
            return false;
        }
        let down_for = self.down_since.lock().unwrap_or_else(|p| p.into_inner()).get(&target).map(|t| t.elapsed());
        if down_for.map(|d| d > self.config.max_hint_window).unwrap_or(false) {
            tracing::debug!(%target, "not hinting: down longer than max_hint_window");
            return false;
        }
        let mut stored = true;
        for chunk in message_chunks(mutations).into_iter().filter_map(|range| mutations.get(range)) {
            let payload = message::encode_mutations(chunk.iter().copied());
            if let Err(e) = self.hints.store(target, now_ms(), &payload) {
                tracing::warn!(%target, "hint not stored: {e}");
                stored = false;
            }
        }
        stored
    }

    /// The write this node completes by itself under `view`, without
    /// awaiting anything: when it alone holds what is written (a local
    /// keyspace, no ring yet, or the ring's only member), once the
    /// requirement can be met by this one live replica, this node's ack
    /// meets it. Its mutations go into `local`, the caller's batch: done
    /// once the caller commits it, which it must before answering. None when
    /// other replicas take part: then [`Coordinator::write_across`] with the
    /// same view does the write. Callers on the request path try this first,
    /// so a single node's writes build no future.
    pub fn mutate_here(
        &self,
        view: &ClusterView,
        ks: &KeyspaceDef,
        mutations: &[Mutation],
        cl: Consistency,
        local: &mut WriteBatch,
    ) -> Option<Result<(), CoordError>> {
        if !(Self::local_only(view, ks) || Self::sole_replica(view, ks, mutations)) {
            return None;
        }
        if !matches!(ks.replication, Replication::Local) {
            let available = Requirement::of(&ks.replication, cl, view.local_dc(), true)
                .and_then(|r| r.assure_available(std::iter::once(view.local_dc())));
            if let Err(e) = available {
                return Some(Err(e));
            }
        }
        if trace::is_tracing() {
            trace::event(|| "Determining replicas for mutation".to_string());
            crate::traced::record_local_write(&self.storage, mutations);
        }
        Some(self.storage.collect(local, mutations).map_err(storage_err))
    }

    /// Applies `mutations` at `cl`, alone: the write path of a request group
    /// ([`Coordinator::mutate_here`], else [`Coordinator::write_across`]),
    /// with a batch of its own committed before the wait for remote replicas.
    /// `write_type` is WriteTimeout's. What the simulation drives.
    pub async fn mutate(
        self: &Arc<Self>,
        ks: &KeyspaceDef,
        mutations: Vec<Mutation>,
        cl: Consistency,
        write_type: WriteType,
    ) -> Result<(), CoordError> {
        let view = self.view.snapshot();
        let mut local = WriteBatch::new();
        let pending = match self.mutate_here(&view, ks, &mutations, cl, &mut local) {
            Some(done) => {
                done?;
                None
            }
            None => Some(self.write_across(view, ks, mutations, cl, write_type, &mut local)?),
        };
        self.storage.commit(std::slice::from_ref(&local)).map_err(storage_err)?;
        match pending {
            Some(pending) => pending.await,
            None => Ok(()),
        }
    }

    /// The write [`Coordinator::mutate_here`] gave back (other replicas take
    /// part), under the view it was given. Now, without awaiting: checks
    /// availability (Unavailable is returned here), hints the down replicas,
    /// queues the remote sends, and collects this node's share into `local`
    /// (counting its ack, valid once the caller commits `local`, which it
    /// must before answering). Returns the wait for the remote acks, which
    /// ends with the write's outcome (WriteTimeout after `write_timeout`).
    pub fn write_across(
        self: &Arc<Self>,
        view: Arc<ClusterView>,
        ks: &KeyspaceDef,
        mutations: Vec<Mutation>,
        cl: Consistency,
        write_type: WriteType,
        local: &mut WriteBatch,
    ) -> Result<PendingWrite, CoordError> {
        self.write_replicas(view, ks, mutations, cl, write_type, Some(local))
    }

    /// [`Coordinator::write_across`] of mutations this node already applied
    /// (the counter leader's): its own ack counts at once.
    pub(crate) fn replicate(
        self: &Arc<Self>,
        view: Arc<ClusterView>,
        ks: &KeyspaceDef,
        mutations: Vec<Mutation>,
        cl: Consistency,
        write_type: WriteType,
    ) -> Result<PendingWrite, CoordError> {
        self.write_replicas(view, ks, mutations, cl, write_type, None)
    }

    /// `write_across`, with this node's share collected into `local`, or
    /// already applied when `None`.
    fn write_replicas(
        self: &Arc<Self>,
        view: Arc<ClusterView>,
        ks: &KeyspaceDef,
        mutations: Vec<Mutation>,
        cl: Consistency,
        write_type: WriteType,
        mut local: Option<&mut WriteBatch>,
    ) -> Result<PendingWrite, CoordError> {
        trace::event(|| "Determining replicas for mutation".to_string());
        let mut counters = Vec::with_capacity(mutations.len());
        let mut targets: BTreeMap<Uuid, (String, Vec<usize>)> = BTreeMap::new();
        let mut down: BTreeMap<Uuid, Vec<usize>> = BTreeMap::new();
        for (i, m) in mutations.iter().enumerate() {
            let plan = WritePlan::new(&view, ks, m.token, cl)?;
            for (r, dc) in plan.live {
                targets.entry(r).or_insert_with(|| (dc, Vec::new())).1.push(i);
            }
            for r in plan.down {
                down.entry(r).or_default().push(i);
            }
            counters.push(AckCounter::new(plan.requirement));
        }
        // This node's disk is over the disk usage guardrail's fail threshold
        // (storage `disk_usage`): refuse a write that adds data to it before
        // any replica (or hint) gets it, as Cassandra's coordinator refuses
        // a write to a full replica. (Shoal does not gossip the disk state: a
        // remote full replica refuses its share itself and is hinted, and a
        // write that then misses its level fails with the refusal.)
        if let Some((_, idx)) = targets.get(&view.local) {
            if self.storage.disk_usage() == storage::DiskUsageState::Full
                && idx.iter().filter_map(|&i| mutations.get(i)).any(storage::adds_data)
            {
                return Err(storage_err(storage::StorageError::DiskUsageExceeded));
            }
        }
        for (target, idx) in &down {
            let muts: Vec<&Mutation> = idx.iter().filter_map(|i| mutations.get(*i)).collect();
            if self.hint(*target, &muts) && cl == Consistency::Any {
                for i in idx {
                    if let Some(c) = counters.get_mut(*i) {
                        c.ack("");
                    }
                }
            }
        }
        // Every partition's only live replica is this node (RF=1 on this
        // node's ranges of a larger ring): apply and answer without the
        // machinery for remote acks.
        if down.is_empty() && targets.len() == 1 {
            if let Some((dc, idx)) = targets.get(&view.local) {
                self.apply_local(&mutations, dc, idx, &mut counters, local.as_deref_mut())?;
                return Ok(Box::pin(std::future::ready(Self::write_outcome(&counters, cl, write_type))));
            }
        }
        // Remote sends first (queued now), then the local apply. A replica's
        // share goes in as many messages as `message_chunks` makes of it; each
        // message is acknowledged (or hinted) on its own, keyed by its number.
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        // Set when a replica refused its share for its disk usage guardrail:
        // a write that then misses its level fails with that refusal.
        let refused = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut pending: BTreeMap<usize, (Uuid, String, Vec<usize>)> = BTreeMap::new();
        let mut here: Option<(String, Vec<usize>)> = None;
        for (target, (dc, idx)) in targets {
            if target == view.local {
                here = Some((dc, idx));
                continue;
            }
            let Some(addr) = Self::address(&view, target) else { continue };
            // `idx` holds indexes of `mutations` (from its enumeration above).
            let share: Vec<&Mutation> = idx.iter().filter_map(|&i| mutations.get(i)).collect();
            for range in message_chunks(&share) {
                // The ranges cut `share`, which is as long as `idx`.
                let (Some(chunk), Some(chunk_idx)) = (share.get(range.clone()), idx.get(range)) else { continue };
                let payload = message::encode_mutations(chunk.iter().copied());
                let chunk_idx = chunk_idx.to_vec();
                let (verb, payload) = crate::traced::outgoing(addr, Verb::MutationReq, payload);
                let fut = self.transport.send_request(addr, verb, payload, self.config.write_timeout);
                let (tx, refused) = (tx.clone(), Arc::clone(&refused));
                let id = pending.len();
                tokio::spawn(trace::follow(async move {
                    let r = fut.await;
                    trace::event(|| crate::traced::answered(addr, Verb::MutationRsp, r.is_ok()));
                    if let Err(net::NetError::Remote { message, .. }) = &r {
                        if *message == storage::StorageError::DiskUsageExceeded.to_string() {
                            refused.store(true, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                    let _ = tx.send((id, r.is_ok()));
                }));
                pending.insert(id, (target, dc.clone(), chunk_idx));
            }
        }
        drop(tx);
        if let Some((dc, idx)) = here {
            self.apply_local(&mutations, &dc, &idx, &mut counters, local)?;
        }
        let deadline = tokio::time::Instant::now() + self.config.write_timeout;
        let this = Arc::clone(self);
        Ok(Box::pin(async move {
            let outcome = this.await_acks(mutations, counters, pending, rx, deadline, cl, write_type).await;
            match outcome {
                Err(CoordError::WriteTimeout { .. }) if refused.load(std::sync::atomic::Ordering::Relaxed) => {
                    Err(storage_err(storage::StorageError::DiskUsageExceeded))
                }
                outcome => outcome,
            }
        }))
    }

    /// The rest of [`Coordinator::write_across`]: waits for the remote acks
    /// until every partition's requirement is met or `deadline`, hints the
    /// replicas that failed or did not answer, and gives the outcome.
    #[allow(clippy::too_many_arguments)]
    async fn await_acks(
        self: Arc<Self>,
        mutations: Vec<Mutation>,
        mut counters: Vec<AckCounter>,
        mut pending: BTreeMap<usize, (Uuid, String, Vec<usize>)>,
        mut rx: tokio::sync::mpsc::UnboundedReceiver<(usize, bool)>,
        deadline: tokio::time::Instant,
        cl: Consistency,
        write_type: WriteType,
    ) -> Result<(), CoordError> {
        while !counters.iter().all(|c| c.satisfied()) && !pending.is_empty() {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some((id, ok))) => {
                    let Some((target, dc, idx)) = pending.remove(&id) else { continue };
                    if ok {
                        for i in idx {
                            if let Some(c) = counters.get_mut(i) {
                                c.ack(&dc);
                            }
                        }
                    } else {
                        let muts: Vec<&Mutation> = idx.iter().filter_map(|i| mutations.get(*i)).collect();
                        self.hint(target, &muts);
                    }
                }
                Ok(None) | Err(_) => break,
            }
        }
        let satisfied = counters.iter().all(|c| c.satisfied());
        if !pending.is_empty() {
            // Replicas still to answer: hint those that fail or time out.
            let this = Arc::clone(&self);
            let mutations = Arc::new(mutations);
            let finish = async move {
                while !pending.is_empty() {
                    match tokio::time::timeout_at(deadline, rx.recv()).await {
                        Ok(Some((id, ok))) => {
                            if let Some((target, _, idx)) = pending.remove(&id) {
                                if !ok {
                                    let muts: Vec<&Mutation> = idx.iter().filter_map(|i| mutations.get(*i)).collect();
                                    this.hint(target, &muts);
                                }
                            }
                        }
                        Ok(None) | Err(_) => break,
                    }
                }
                for (_, (target, _, idx)) in std::mem::take(&mut pending) {
                    let muts: Vec<&Mutation> = idx.iter().filter_map(|i| mutations.get(*i)).collect();
                    this.hint(target, &muts);
                }
            };
            if satisfied {
                tokio::spawn(finish);
            } else {
                finish.await;
            }
        }
        Self::write_outcome(&counters, cl, write_type)
    }

    /// Collects the mutations at `idx` into `local` and counts this node's
    /// ack for each: the caller answers only after committing `local`, so
    /// counting the ack before that commit never lets an answer out early.
    fn apply_local(
        &self,
        mutations: &[Mutation],
        dc: &str,
        idx: &[usize],
        counters: &mut [AckCounter],
        local: Option<&mut WriteBatch>,
    ) -> Result<(), CoordError> {
        let Some(local) = local else {
            // Applied already (the counter leader's own write).
            for i in idx {
                if let Some(c) = counters.get_mut(*i) {
                    c.ack(dc);
                }
            }
            return Ok(());
        };
        if idx.len() == mutations.len() {
            // This node replicates every partition written (RF=1 on its range, or a small cluster).
            crate::traced::record_local_write(&self.storage, mutations);
            self.storage.collect(local, mutations).map_err(storage_err)?;
        } else {
            let batch: Vec<Mutation> = idx.iter().filter_map(|i| mutations.get(*i).cloned()).collect();
            crate::traced::record_local_write(&self.storage, &batch);
            self.storage.collect(local, &batch).map_err(storage_err)?;
        }
        for i in idx {
            if let Some(c) = counters.get_mut(*i) {
                c.ack(dc);
            }
        }
        Ok(())
    }

    /// Ok when every partition's requirement was met, else WriteTimeout
    /// with the first unmet partition's counts.
    fn write_outcome(counters: &[AckCounter], cl: Consistency, write_type: WriteType) -> Result<(), CoordError> {
        let Some(worst) = counters.iter().find(|c| !c.satisfied()) else { return Ok(()) };
        Err(CoordError::WriteTimeout {
            consistency: cl,
            received: worst.received(),
            block_for: worst.block_for(),
            write_type,
        })
    }

    /// Reads one partition at `cl`.
    pub async fn read(
        self: &Arc<Self>,
        ks: &KeyspaceDef,
        read: PartitionRead,
        cl: Consistency,
    ) -> Result<Option<Partition>, CoordError> {
        if matches!(cl, Consistency::Serial | Consistency::LocalSerial) {
            // A SERIAL read: a Paxos prepare round that finishes any proposal in progress first.
            let req = crate::paxos::CasRequest { read, serial: cl, commit: cl, is_read: true };
            return Ok(self.cas(ks, req, |_| Ok(None)).await?.current);
        }
        let view = self.view.snapshot();
        if Self::local_only(&view, ks) {
            if !matches!(ks.replication, Replication::Local) {
                Requirement::of(&ks.replication, cl, view.local_dc(), false)?
                    .assure_available(std::iter::once(view.local_dc()))?;
            }
            return self.read_here(&read);
        }
        let plan = ReadPlan::new(&view, ks, read.token, cl)?;
        if matches!(plan.contacts.as_slice(), [(only, _)] if *only == view.local) {
            return self.read_here(&read);
        }
        let limit = read.row_limit;
        let mut read = read;
        loop {
            let merged = self.read_round(&view, &plan, &read).await?;
            let mut result = self.storage.resolve_raw(&read, &merged).map_err(storage_err)?;
            let rows = result.as_ref().map(|p| p.rows.len()).unwrap_or(0);
            if merged.exhausted || rows >= limit || read.row_limit == usize::MAX {
                if let Some(p) = result.as_mut() {
                    p.rows.truncate(limit);
                }
                return Ok(result);
            }
            // Short read: a replica stopped at the limit, but reconciliation
            // removed rows. Ask again for more.
            read.row_limit = read.row_limit.saturating_mul(4).max(16);
        }
    }

    /// A read answered by this node alone.
    fn read_here(&self, read: &PartitionRead) -> Result<Option<Partition>, CoordError> {
        if !trace::is_tracing() {
            return self.storage.read_partition(read).map_err(storage_err);
        }
        trace::event(|| crate::traced::read_start(&self.storage, &read.table));
        let result = self.storage.read_partition(read).map_err(storage_err);
        if let Ok(p) = &result {
            trace::event(|| crate::traced::read_rows(p.as_ref()));
        }
        result
    }

    async fn ask(
        &self,
        view: &ClusterView,
        replica: Uuid,
        read: &PartitionRead,
        digest: bool,
    ) -> Result<ReadAnswer, String> {
        if replica == view.local {
            trace::event(|| crate::traced::read_start(&self.storage, &read.table));
            let raw = self.storage.read_raw(read).map_err(|e| e.to_string())?;
            trace::event(|| crate::traced::read_done(&self.storage, read, &raw));
            return Ok(if digest { ReadAnswer::Digest(raw.digest()) } else { ReadAnswer::Data(raw) });
        }
        let addr = Self::address(view, replica).ok_or("unknown replica")?;
        let req = ReadRequest {
            table: read.table,
            token: read.token,
            partition_key: Bytes::copy_from_slice(&read.partition_key),
            command: wire::encode_command(read),
        };
        let verb = if digest { Verb::DigestReq } else { Verb::ReadReq };
        let (verb, payload) = crate::traced::outgoing(addr, verb, req.encode());
        let answer = self.transport.send_request(addr, verb, payload, self.config.read_timeout).await;
        trace::event(|| crate::traced::answered(addr, Verb::ReadRsp, answer.is_ok()));
        let (_, payload) = answer.map_err(|e| e.to_string())?;
        let body = ReadResponse::decode(&payload).map_err(|e| e.to_string())?.body;
        if digest {
            let d: [u8; 16] = body.as_ref().try_into().map_err(|_| "bad digest".to_string())?;
            Ok(ReadAnswer::Digest(d))
        } else {
            RawPartition::decode(&body).map(ReadAnswer::Data).map_err(|e| e.to_string())
        }
    }

    /// One data request and digests; on mismatch, full data from every
    /// contacted replica, reconciliation and blocking repair. Returns the
    /// reconciled raw partition.
    async fn read_round(
        self: &Arc<Self>,
        view: &Arc<ClusterView>,
        plan: &ReadPlan,
        read: &PartitionRead,
    ) -> Result<RawPartition, CoordError> {
        let block_for = plan.requirement.block_for as i32;
        let cl = plan.requirement.consistency;
        let deadline = tokio::time::Instant::now() + self.config.read_timeout;
        // Phase 1: data + digests, with substitutes from `others` on failure.
        let mut queue: Vec<(Uuid, String)> = plan.others.clone();
        queue.reverse();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let spawn_ask =
            |replica: Uuid,
             digest: bool,
             tx: tokio::sync::mpsc::UnboundedSender<(Uuid, bool, Result<ReadAnswer, String>)>| {
                let this = Arc::clone(self);
                let view = Arc::clone(view);
                let read = read.clone();
                // The ask records its steps in the request's trace session, if any.
                tokio::spawn(trace::follow(async move {
                    let r = this.ask(&view, replica, &read, digest).await;
                    let _ = tx.send((replica, digest, r));
                }));
            };
        let mut outstanding = 0;
        for (i, (r, _)) in plan.contacts.iter().enumerate() {
            spawn_ask(*r, i != 0, tx.clone());
            outstanding += 1;
        }
        let mut data: Vec<(Uuid, RawPartition)> = Vec::new();
        let mut digests: Vec<(Uuid, [u8; 16])> = Vec::new();
        let counts = |dc: &str| plan.requirement.counts(dc);
        let mut counter = AckCounter::new(plan.requirement.clone());
        while outstanding > 0 {
            let Ok(Some((replica, digest, answer))) = tokio::time::timeout_at(deadline, rx.recv()).await else { break };
            outstanding -= 1;
            let dc = view.dc_of(replica).unwrap_or_default().to_string();
            match answer {
                Ok(ReadAnswer::Data(raw)) => {
                    data.push((replica, raw));
                    counter.ack(&dc);
                }
                Ok(ReadAnswer::Digest(d)) => {
                    digests.push((replica, d));
                    counter.ack(&dc);
                }
                Err(e) => {
                    tracing::debug!(%replica, "read failed: {e}");
                    // Substitute: the next live replica that counts the same way.
                    if let Some(pos) =
                        queue.iter().rposition(|(_, d)| counts(d) && (plan.requirement.per_dc.is_empty() || *d == dc))
                    {
                        let (sub, _) = queue.remove(pos);
                        spawn_ask(sub, digest, tx.clone());
                        outstanding += 1;
                    }
                }
            }
        }
        let Some(first) = data.first().filter(|_| counter.satisfied()).map(|(_, raw)| raw.digest()) else {
            return Err(CoordError::ReadTimeout {
                consistency: cl,
                received: counter.received(),
                block_for,
                data_present: !data.is_empty(),
            });
        };
        if digests.iter().all(|(_, d)| *d == first) && data.iter().all(|(_, r)| r.digest() == first) {
            return Ok(data.swap_remove(0).1);
        }
        // Phase 2: digest mismatch. Full data from the digest replicas.
        trace::event(|| format!("Digest mismatch: full data requested from {} replicas", digests.len()));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut outstanding = 0;
        for (r, _) in &digests {
            spawn_ask(*r, false, tx.clone());
            outstanding += 1;
        }
        drop(tx);
        let deadline = tokio::time::Instant::now() + self.config.read_timeout;
        while outstanding > 0 {
            let Ok(Some((replica, _, answer))) = tokio::time::timeout_at(deadline, rx.recv()).await else { break };
            outstanding -= 1;
            if let Ok(ReadAnswer::Data(raw)) = answer {
                data.push((replica, raw));
            }
        }
        if (data.len() as i32) < block_for {
            return Err(CoordError::ReadTimeout {
                consistency: cl,
                received: data.len() as i32,
                block_for,
                data_present: true,
            });
        }
        let parts: Vec<RawPartition> = data.iter().map(|(_, r)| r.clone()).collect();
        let merged = storage::merge_raw(&parts, read.reversed);
        // Phase 3: blocking read repair.
        let (repaired, acked, total) = self.write_back(view, read.table, &merged, &data).await.map_err(storage_err)?;
        if repaired > 0 {
            metrics::READ_REPAIRS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        if acked < total {
            return Err(CoordError::ReadTimeout {
                consistency: cl,
                received: (block_for - (total - acked) as i32).max(0),
                block_for,
                data_present: true,
            });
        }
        Ok(merged)
    }

    /// Writes back to each replica the cells of `merged` it lacks (read
    /// repair, and repair): applied here for this node, `RepairReq` for the
    /// others, all awaited. Returns the bytes of the cells written back, and
    /// how many remote write-backs were acknowledged out of how many sent.
    async fn write_back(
        &self,
        view: &ClusterView,
        table: Uuid,
        merged: &RawPartition,
        data: &[(Uuid, RawPartition)],
    ) -> Result<(u64, usize, usize), storage::StorageError> {
        let mut repairs = Vec::new();
        let mut bytes = 0u64;
        for (replica, raw) in data {
            let diff = storage::repair_diff(merged, raw);
            if diff.is_empty() {
                continue;
            }
            tracing::debug!(%replica, cells = diff.len(), "read repair");
            bytes += diff.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum::<u64>();
            if *replica == view.local {
                self.storage.apply_raw(&table, &diff)?;
                continue;
            }
            let Some(addr) = Self::address(view, *replica) else { continue };
            let (verb, payload) = crate::traced::outgoing(addr, Verb::RepairReq, wire::encode_repair(table, &diff));
            repairs.push(self.transport.send_request(addr, verb, payload, self.config.write_timeout));
        }
        let total = repairs.len();
        let mut acked = 0usize;
        for r in repairs {
            if r.await.is_ok() {
                acked += 1;
            }
        }
        Ok((bytes, acked, total))
    }

    /// Writes one partition's raw cells (a snapshot's, for `restore` and
    /// `load`: write timestamps, TTLs and tombstones as they were) to every
    /// live replica of `token` under the ring now: applied here for this
    /// node, `RepairReq` for the others, all awaited. Succeeds once `cl`'s
    /// count of replicas acknowledged it (Unavailable before sending when
    /// too few are alive); replicas down get nothing (repair them after).
    pub async fn load_partition(
        &self,
        ks: &KeyspaceDef,
        table: Uuid,
        token: i64,
        cells: &[(Vec<u8>, Vec<u8>)],
        cl: Consistency,
    ) -> Result<(), CoordError> {
        let view = self.view.snapshot();
        let plan = WritePlan::new(&view, ks, token, cl)?;
        let mut acked = 0usize;
        let mut sends = Vec::new();
        for (replica, _) in &plan.live {
            if *replica == view.local {
                self.storage.apply_raw(&table, cells).map_err(storage_err)?;
                acked += 1;
                continue;
            }
            let Some(addr) = Self::address(&view, *replica) else { continue };
            sends.push(self.transport.send_request(
                addr,
                Verb::RepairReq,
                wire::encode_repair(table, cells),
                self.config.write_timeout,
            ));
        }
        for send in sends {
            if send.await.is_ok() {
                acked += 1;
            }
        }
        let block_for = plan.requirement.block_for;
        if acked < block_for {
            return Err(CoordError::WriteTimeout {
                consistency: cl,
                received: acked as i32,
                block_for: block_for as i32,
                write_type: WriteType::Simple,
            });
        }
        Ok(())
    }

    /// TRUNCATE: every node empties the table. Like Cassandra, refused with
    /// Unavailable (at ALL) when a node is down, and a timeout when one does
    /// not answer within the write timeout... which is reported as a server
    /// error naming the node (Cassandra's TruncateException).
    pub async fn truncate(self: &Arc<Self>, table: Uuid) -> Result<(), CoordError> {
        let view = self.view.snapshot();
        let nodes: Vec<_> = view.endpoints.values().filter(|e| e.status.owns_tokens()).collect();
        let alive = nodes.iter().filter(|e| e.alive).count();
        if alive < nodes.len() {
            return Err(CoordError::Unavailable {
                consistency: Consistency::All,
                required: nodes.len() as i32,
                alive: alive as i32,
            });
        }
        let sends: Vec<_> = nodes
            .iter()
            .filter(|e| e.host_id != view.local)
            .map(|e| {
                (
                    e.internode,
                    self.transport.send_request(
                        e.internode,
                        Verb::TruncateReq,
                        Bytes::copy_from_slice(table.as_bytes()),
                        self.config.write_timeout,
                    ),
                )
            })
            .collect();
        self.storage.truncate(&table).map_err(storage_err)?;
        for (addr, send) in sends {
            send.await
                .map_err(|e| CoordError::Server(format!("Error during truncate: {addr} did not truncate: {e}")))?;
        }
        Ok(())
    }

    /// Partition keys in `[scan.start_token, scan.end_token]` (after
    /// `scan.after_key`), in token order, at most `scan.partition_limit`,
    /// gathered range by range from each range's replicas.
    pub async fn scan_keys(
        self: &Arc<Self>,
        ks: &KeyspaceDef,
        scan: ScanRange,
        cl: Consistency,
    ) -> Result<Vec<(i64, Vec<u8>)>, CoordError> {
        let view = self.view.snapshot();
        if Self::local_only(&view, ks) {
            return self.storage.scan_keys(&scan).map_err(storage_err);
        }
        let local = |sub: &ScanRange, _| self.storage.scan_keys(sub).map_err(storage_err);
        let ask = KeyAsk { verb: Verb::ScanReq, encode: wire::encode_scan, refusal: |_, _, _| None };
        self.gather_keys(&view, ks, cl, scan, local, ask).await
    }
}

/// A key query split by ring range (`Coordinator::gather_keys`): a token
/// range scan or a secondary index lookup.
trait RangeQuery: Clone {
    fn limit(&self) -> usize;
    fn bounds(&self) -> (i64, i64);
    /// The same query over `[lo, hi]` for at most `limit` keys; `first`:
    /// the range the query starts in, which keeps its `after_key`.
    fn narrowed(&self, lo: i64, hi: i64, first: bool, limit: usize) -> Self;
}

macro_rules! range_query {
    ($t:ty) => {
        impl RangeQuery for $t {
            fn limit(&self) -> usize {
                self.partition_limit
            }
            fn bounds(&self) -> (i64, i64) {
                (self.start_token, self.end_token)
            }
            fn narrowed(&self, lo: i64, hi: i64, first: bool, limit: usize) -> Self {
                let mut sub = self.clone();
                sub.start_token = lo;
                sub.end_token = hi;
                if !first {
                    sub.after_key = None;
                }
                sub.partition_limit = limit;
                sub
            }
        }
    };
}
range_query!(ScanRange);
range_query!(IndexScan);

/// How a key query asks a remote replica: its verb, its payload, and which
/// failures answer the whole query (the others count as no answer).
struct KeyAsk<Q, R: Fn(std::net::SocketAddr, &net::NetError, usize) -> Option<CoordError>> {
    verb: Verb,
    encode: fn(&Q) -> Bytes,
    /// (the replica, its error, the range's block_for) to the query's error.
    refusal: R,
}

impl<T: Transport + Clone> Coordinator<T> {
    /// Gathers a key query's answer range by range of the ring: each range's
    /// replicas at `cl` (this node through `local`, with the range's
    /// block_for), merged in token order; a replica that filled its limit
    /// cuts the merge at its last key so no key beyond it is missed.
    async fn gather_keys<Q: RangeQuery, R: Fn(std::net::SocketAddr, &net::NetError, usize) -> Option<CoordError>>(
        &self,
        view: &ClusterView,
        ks: &KeyspaceDef,
        cl: Consistency,
        query: Q,
        local: impl Fn(&Q, usize) -> Result<Vec<(i64, Vec<u8>)>, CoordError>,
        ask: KeyAsk<Q, R>,
    ) -> Result<Vec<(i64, Vec<u8>)>, CoordError> {
        let (start, end) = query.bounds();
        let mut out: Vec<(i64, Vec<u8>)> = Vec::new();
        for (lo, hi) in split_by_ring(view, start, end) {
            if out.len() >= query.limit() {
                break;
            }
            let plan = ReadPlan::new(view, ks, hi, cl)?;
            let block_for = plan.requirement.block_for;
            let sub = query.narrowed(lo, hi, lo == start, query.limit() - out.len());
            let mut answers: Vec<(bool, wire::Keys)> = Vec::new();
            let mut asks = Vec::new();
            for (r, _) in &plan.contacts {
                if *r == view.local {
                    let keys = local(&sub, block_for)?;
                    answers.push((keys.len() >= sub.limit(), keys));
                } else if let Some(addr) = Self::address(view, *r) {
                    let (verb, payload) = crate::traced::outgoing(addr, ask.verb, (ask.encode)(&sub));
                    let send = self.transport.send_request(addr, verb, payload, self.config.read_timeout);
                    asks.push((addr, send));
                }
            }
            for (addr, a) in asks {
                match a.await {
                    Ok((_, payload)) => {
                        if let Ok(decoded) = wire::decode_keys(&payload) {
                            answers.push(decoded);
                        }
                    }
                    Err(e) => {
                        if let Some(refused) = (ask.refusal)(addr, &e, block_for) {
                            return Err(refused);
                        }
                    }
                }
            }
            if answers.len() < block_for {
                return Err(CoordError::ReadTimeout {
                    consistency: cl,
                    received: answers.len() as i32,
                    block_for: block_for as i32,
                    data_present: false,
                });
            }
            let cut = answers.iter().filter(|(t, k)| *t && !k.is_empty()).filter_map(|(_, k)| k.last().cloned()).min();
            let mut keys: Vec<(i64, Vec<u8>)> = answers.into_iter().flat_map(|(_, k)| k).collect();
            keys.sort();
            keys.dedup();
            if let Some(cut) = cut {
                keys.retain(|k| *k <= cut);
            }
            keys.truncate(sub.limit());
            out.extend(keys);
        }
        Ok(out)
    }

    /// Secondary index lookup: the base partitions holding `scan.value` in
    /// `[scan.start_token, scan.end_token]` (after `scan.after_key`), in token
    /// order, at most `scan.partition_limit`, gathered range by range from
    /// each range's replicas (each answers from its local index) at `cl`.
    /// The caller reads each partition at `cl`, which filters stale entries.
    pub async fn index_keys(
        self: &Arc<Self>,
        ks: &KeyspaceDef,
        scan: IndexScan,
        cl: Consistency,
    ) -> Result<Vec<(i64, Vec<u8>)>, CoordError> {
        let view = self.view.snapshot();
        // Cassandra names a building storage-attached index INDEX_NOT_AVAILABLE, a legacy one UNKNOWN.
        let sai = ks.tables.values().flat_map(|t| &t.indexes).any(|i| i.id == scan.index && i.class_name.is_some());
        // (RequestFailureReason's codes: UNKNOWN 0, INDEX_NOT_AVAILABLE 6.)
        let (reason, code) = if sai { ("INDEX_NOT_AVAILABLE", 6) } else { ("UNKNOWN", 0) };
        let not_available = |from: std::net::SocketAddr, block_for: usize| CoordError::ReadFailure {
            consistency: cl,
            received: 0,
            block_for: block_for as i32,
            failures: 1,
            message: format!("Operation failed - received 0 responses and 1 failures: {reason} from /{from}"),
            reasons: vec![(from.ip(), code)],
        };
        let local_addr = Self::address(&view, view.local);
        let local_index = |sub: &IndexScan, block_for: usize| {
            self.storage.index_keys(sub).map_err(|e| match e {
                storage::StorageError::Invalid(m) if m == storage::INDEX_NOT_AVAILABLE => match local_addr {
                    Some(addr) => not_available(addr, block_for),
                    None => CoordError::Invalid(m),
                },
                other => storage_err(other),
            })
        };
        if Self::local_only(&view, ks) {
            return local_index(&scan, 1);
        }
        let refusal = |addr, e: &net::NetError, block_for| match e {
            net::NetError::Remote { message, .. } if message == storage::INDEX_NOT_AVAILABLE => {
                Some(not_available(addr, block_for))
            }
            _ => None,
        };
        let ask = KeyAsk { verb: Verb::IndexScanReq, encode: wire::encode_index_scan, refusal };
        self.gather_keys(&view, ks, cl, scan, local_index, ask).await
    }
}

/// Payload bytes (estimated) a mutation message is filled up to, well below
/// the transport's 16 MiB frame limit.
const MESSAGE_BYTES_TARGET: u64 = 4 << 20;

/// Splits mutations into the messages (or hints) that carry them, as ranges
/// of `mutations`: each at most `MUTATIONS_PER_MESSAGE_MAX` mutations and,
/// past its first mutation, about `MESSAGE_BYTES_TARGET` bytes. In order,
/// covering every mutation; never an empty range.
fn message_chunks(mutations: &[&Mutation]) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0u64);
    for (i, m) in mutations.iter().enumerate() {
        let size = m.data_size() + m.partition_key.len() as u64 + 64;
        if i > start && (i - start >= message::MUTATIONS_PER_MESSAGE_MAX || bytes + size > MESSAGE_BYTES_TARGET) {
            out.push(start..i);
            (start, bytes) = (i, 0);
        }
        bytes += size;
    }
    if start < mutations.len() {
        out.push(start..mutations.len());
    }
    out
}

/// Splits `[start, end]` into inclusive sub-intervals that each lie in one
/// ring range, in token order.
pub fn split_by_ring(view: &ClusterView, start: i64, end: i64) -> Vec<(i64, i64)> {
    let mut bounds: Vec<i64> = view.ring.sorted_tokens().map(|(t, _)| t).collect();
    bounds.dedup();
    let mut out = Vec::new();
    let mut lo = start;
    for b in bounds {
        if b < lo {
            continue;
        }
        if b >= end {
            break;
        }
        out.push((lo, b));
        lo = b + 1;
    }
    if lo <= end {
        out.push((lo, end));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_chunks_bound_count_and_bytes() {
        let small: Vec<Mutation> =
            (0..10_000).map(|i| Mutation::new(Uuid::nil(), i, Bytes::from(vec![1u8; 4]))).collect();
        let refs: Vec<&Mutation> = small.iter().collect();
        assert_eq!(message_chunks(&refs), vec![0..4096, 4096..8192, 8192..10_000]);
        assert!(message_chunks(&[]).is_empty());
        // Big partitions go a few to a message; one over the target still goes alone.
        let big: Vec<Mutation> =
            (0..5).map(|i| Mutation::new(Uuid::nil(), i, Bytes::from(vec![0u8; 3 << 20]))).collect();
        let refs: Vec<&Mutation> = big.iter().collect();
        assert_eq!(message_chunks(&refs), vec![0..1, 1..2, 2..3, 3..4, 4..5]);
    }
    use crate::view::{Endpoint, Status};
    use std::collections::BTreeMap;

    fn one_member(dc: &str) -> ClusterView {
        let local = Endpoint {
            host_id: uuid::Uuid::from_u128(7),
            internode: "127.0.0.1:7000".parse().unwrap(),
            rpc_address: "127.0.0.1".parse().unwrap(),
            native_port: 9042,
            dc: dc.into(),
            rack: "rack1".into(),
            tokens: vec![-1 << 40, 0, 1 << 40],
            status: Status::Normal,
            alive: true,
            schema_version: None,
            release_version: "5.0.0".into(),
            load_bytes: 0,
            generation: 1,
        };
        ClusterView::single("test", local)
    }

    fn keyspace(replication: Replication) -> KeyspaceDef {
        KeyspaceDef {
            name: "ks".into(),
            replication,
            durable_writes: true,
            tables: BTreeMap::new(),
            types: BTreeMap::new(),
        }
    }

    /// The SimpleStrategy shortcut answers what the replicas of the first
    /// token answer, and other strategies still compute them.
    #[test]
    fn sole_replica_agrees_with_the_replicas_of_a_one_member_ring() {
        let view = one_member("dc1");
        assert!(view.sole_owner());
        let nts =
            |dc: &str, rf: u32| Replication::NetworkTopology { data_centers: BTreeMap::from([(dc.to_string(), rf)]) };
        for replication in [
            Replication::Simple { replication_factor: 0 },
            Replication::Simple { replication_factor: 1 },
            Replication::Simple { replication_factor: 3 },
            nts("dc1", 1),
            nts("dc1", 3),
            nts("dc2", 1),
        ] {
            let ks = keyspace(replication.clone());
            for token in [i64::MIN, -5, 0, 1 << 41, i64::MAX] {
                let mutations = [Mutation::new(uuid::Uuid::from_u128(1), token, Bytes::from_static(b"k"))];
                let want = view.replicas(&ks, token) == [view.local];
                assert_eq!(
                    Coordinator::<net::MemTransport>::sole_replica(&view, &ks, &mutations),
                    want,
                    "{replication:?} at {token}"
                );
            }
            assert!(!Coordinator::<net::MemTransport>::sole_replica(&view, &ks, &[]));
        }
    }
}
