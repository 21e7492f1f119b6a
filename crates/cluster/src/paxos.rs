//! Lightweight transactions: single-decree Paxos per partition, with
//! Cassandra's semantics (`StorageProxy.cas`, Paxos v1's state, v2's round
//! trips).
//!
//! A conditional write (or a SERIAL read) runs at a coordinator:
//! 1. **prepare + read** (one round trip): a ballot newer than any seen is
//!    sent to every live replica of the partition (the local data center's
//!    for LOCAL_SERIAL, pending replicas too); each promises not to accept
//!    older ballots (durably) and answers what it accepted and last
//!    committed, and its raw data for the rows the condition reads;
//! 2. an accepted proposal newer than the newest commit among the promises
//!    may have been chosen: it is proposed again under this ballot and
//!    committed, and the transaction starts over;
//! 3. otherwise the quorum's data, reconciled, is the current state: the
//!    caller's `decide` either answers without writing (a failed condition,
//!    a read: no further round trip) or returns the update;
//! 4. **propose** (one round trip): the update, with every timestamp moved
//!    to the ballot's, is accepted by a quorum;
//! 5. **commit**: every replica applies it (hints for the down ones), and the
//!    coordinator waits for the statement's consistency level (not at all at
//!    ANY; at ONE the local replica's apply is enough).
//!    An uncontended successful CAS thus costs two round trips plus the
//!    commit's wait.
//!
//! A replica keeps per partition (`storage::Storage::paxos_put`, under a
//! striped lock): the highest ballot promised, the proposal accepted last,
//! and the most recent commit.
//!
//! Invariants:
//! - A replica promises or accepts only ballots at least as new as every
//!   ballot it promised, and records that before answering.
//! - A proposal is committed only after a quorum accepted it; committing
//!   the same proposal twice changes nothing.
//! - The timestamps of a committed update are its ballot's microseconds,
//!   and a ballot is always newer (in microseconds) than the newest commit
//!   its quorum reported, so last-write-wins order is Paxos order.
//! - A coordinator that cannot win a ballot before `cas_contention_timeout`
//!   fails with WriteTimeout (write type CAS) or, for a read, ReadTimeout.
//! - A proposal of this request's update that some replica accepted is
//!   never followed by another attempt: a later proposer may still commit
//!   it, so the request fails with WriteTimeout (its outcome unknown) rather
//!   than answer "not applied" for a write that may happen.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use net::{message, Transport, Verb};
use storage::{merge_raw, Partition, PartitionRead, RawPartition, Storage};
use types::bytes::ByteReader;
use types::mutation::Mutation;
use types::schema::KeyspaceDef;
use types::{Consistency, WriteType};
use uuid::Uuid;

use crate::coordinator::Coordinator;
use crate::plan::{AckCounter, CoordError, Requirement};
use crate::view::ClusterView;
use crate::wire::WireError;

type Reader<'a> = ByteReader<'a, WireError>;

/// A Paxos ballot: microseconds since the epoch, then the proposer's bits
/// (so two coordinators never make the same ballot).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ballot {
    pub micros: i64,
    pub node: u64,
}

impl Ballot {
    fn put(&self, out: &mut BytesMut) {
        out.put_i64(self.micros);
        out.put_u64(self.node);
    }

    fn read(r: &mut Reader<'_>) -> Result<Ballot, WireError> {
        Ok(Ballot { micros: r.i64()?, node: r.u64()? })
    }
}

/// A proposed update: the mutations of one partition, encoded as internode
/// mutation payloads (empty for a proposal that writes nothing).
#[derive(Clone, Debug, PartialEq)]
pub struct Proposal {
    pub ballot: Ballot,
    pub update: Bytes,
}

impl Proposal {
    fn put(&self, out: &mut BytesMut) {
        self.ballot.put(out);
        out.put_u32(self.update.len() as u32);
        out.put_slice(&self.update);
    }

    fn read(r: &mut Reader<'_>) -> Result<Proposal, WireError> {
        let ballot = Ballot::read(r)?;
        let update = Bytes::copy_from_slice(r.blob()?);
        Ok(Proposal { ballot, update })
    }

    fn put_opt(p: &Option<Proposal>, out: &mut BytesMut) {
        match p {
            Some(p) => {
                out.put_u8(1);
                p.put(out);
            }
            None => out.put_u8(0),
        }
    }

    fn read_opt(r: &mut Reader<'_>) -> Result<Option<Proposal>, WireError> {
        match r.u8()? {
            0 => Ok(None),
            _ => Proposal::read(r).map(Some),
        }
    }

    fn mutations(&self) -> Result<Vec<Mutation>, String> {
        if self.update.is_empty() {
            return Ok(Vec::new());
        }
        message::decode_mutations(&self.update).map_err(|e| e.to_string())
    }
}

/// What a replica keeps for one partition.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PaxosState {
    pub promised: Ballot,
    pub accepted: Option<Proposal>,
    pub committed: Option<Proposal>,
}

const STATE_VERSION: u8 = 1;

impl PaxosState {
    fn encode(&self) -> Vec<u8> {
        let mut out = BytesMut::new();
        out.put_u8(STATE_VERSION);
        self.promised.put(&mut out);
        Proposal::put_opt(&self.accepted, &mut out);
        Proposal::put_opt(&self.committed, &mut out);
        out.to_vec()
    }

    fn decode(bytes: &[u8]) -> Result<PaxosState, WireError> {
        let mut r = Reader::new(bytes, WireError { what: "paxos state" });
        if r.u8()? != STATE_VERSION {
            return Err(r.error());
        }
        let promised = Ballot::read(&mut r)?;
        let accepted = Proposal::read_opt(&mut r)?;
        let committed = Proposal::read_opt(&mut r)?;
        Ok(PaxosState { promised, accepted, committed })
    }
}

/// The partition a Paxos message is about.
#[derive(Clone, Debug, PartialEq)]
pub struct PaxosKey {
    pub table: Uuid,
    pub token: i64,
    pub key: Bytes,
}

impl PaxosKey {
    fn put(&self, out: &mut BytesMut) {
        out.put_slice(self.table.as_bytes());
        out.put_i64(self.token);
        out.put_u32(self.key.len() as u32);
        out.put_slice(&self.key);
    }

    fn read(r: &mut Reader<'_>) -> Result<PaxosKey, WireError> {
        Ok(PaxosKey { table: r.uuid()?, token: r.i64()?, key: Bytes::copy_from_slice(r.blob()?) })
    }

    /// The storage key of the partition's state.
    fn record_key(&self) -> Vec<u8> {
        let mut k = Vec::with_capacity(24 + self.key.len());
        k.extend_from_slice(self.table.as_bytes());
        k.extend_from_slice(&(self.token as u64 ^ (1 << 63)).to_be_bytes());
        k.extend_from_slice(&self.key);
        k
    }

    fn lock(&self) -> std::sync::MutexGuard<'static, ()> {
        static LOCKS: [Mutex<()>; 128] = [const { Mutex::new(()) }; 128];
        let stripe = (self.token as u64 % LOCKS.len() as u64) as usize;
        LOCKS.get(stripe).expect("a stripe below LOCKS.len()").lock().unwrap_or_else(|p| p.into_inner())
    }
}

// ---------------------------------------------------------------------------
// Messages
// ---------------------------------------------------------------------------

/// `PaxosPrepareReq`: promise `ballot` and, once promised, read.
#[derive(Clone, Debug)]
pub struct PrepareRequest {
    pub ballot: Ballot,
    pub key: PaxosKey,
    /// The slice command (`wire::encode_command`) of the rows the condition reads.
    pub read: Option<Bytes>,
}

impl PrepareRequest {
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::new();
        self.ballot.put(&mut out);
        self.key.put(&mut out);
        match &self.read {
            Some(c) => {
                out.put_u8(1);
                out.put_u32(c.len() as u32);
                out.put_slice(c);
            }
            None => out.put_u8(0),
        }
        out.freeze()
    }

    pub fn decode(bytes: &[u8]) -> Result<PrepareRequest, WireError> {
        let mut r = Reader::new(bytes, WireError { what: "paxos prepare" });
        let ballot = Ballot::read(&mut r)?;
        let key = PaxosKey::read(&mut r)?;
        let read = match r.u8()? {
            0 => None,
            _ => Some(Bytes::copy_from_slice(r.blob()?)),
        };
        finish(&r)?;
        Ok(PrepareRequest { ballot, key, read })
    }
}

/// A replica's answer to a prepare.
#[derive(Clone, Debug)]
pub struct PrepareResponse {
    pub promised: bool,
    /// The newest ballot the replica promised (the request's when promised).
    pub highest: Ballot,
    pub accepted: Option<Proposal>,
    pub committed: Option<Proposal>,
    /// The replica's raw data for the read, when it promised.
    pub data: Option<RawPartition>,
}

impl PrepareResponse {
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::new();
        out.put_u8(u8::from(self.promised));
        self.highest.put(&mut out);
        Proposal::put_opt(&self.accepted, &mut out);
        Proposal::put_opt(&self.committed, &mut out);
        match &self.data {
            Some(d) => {
                let mut raw = Vec::new();
                d.encode(&mut raw);
                out.put_u8(1);
                out.put_u32(raw.len() as u32);
                out.put_slice(&raw);
            }
            None => out.put_u8(0),
        }
        out.freeze()
    }

    pub fn decode(bytes: &[u8]) -> Result<PrepareResponse, WireError> {
        let err = WireError { what: "paxos promise" };
        let mut r = Reader::new(bytes, err.clone());
        let promised = r.u8()? != 0;
        let highest = Ballot::read(&mut r)?;
        let accepted = Proposal::read_opt(&mut r)?;
        let committed = Proposal::read_opt(&mut r)?;
        let data = match r.u8()? {
            0 => None,
            _ => Some(RawPartition::decode(r.blob()?).map_err(|_| err.clone())?),
        };
        finish(&r)?;
        Ok(PrepareResponse { promised, highest, accepted, committed, data })
    }
}

/// `PaxosProposeReq` and `PaxosCommitReq`: a proposal for a partition.
#[derive(Clone, Debug)]
pub struct ProposalRequest {
    pub key: PaxosKey,
    pub proposal: Proposal,
}

impl ProposalRequest {
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::new();
        self.key.put(&mut out);
        self.proposal.put(&mut out);
        out.freeze()
    }

    pub fn decode(bytes: &[u8]) -> Result<ProposalRequest, WireError> {
        let mut r = Reader::new(bytes, WireError { what: "paxos proposal" });
        let key = PaxosKey::read(&mut r)?;
        let proposal = Proposal::read(&mut r)?;
        finish(&r)?;
        Ok(ProposalRequest { key, proposal })
    }
}

fn finish(r: &Reader<'_>) -> Result<(), WireError> {
    if r.is_empty() {
        Ok(())
    } else {
        Err(r.error())
    }
}

// ---------------------------------------------------------------------------
// The replica side
// ---------------------------------------------------------------------------

fn load(storage: &Storage, key: &PaxosKey) -> Result<PaxosState, String> {
    match storage.paxos_get(&key.record_key()).map_err(|e| e.to_string())? {
        Some(bytes) => PaxosState::decode(&bytes).map_err(|e| e.to_string()),
        None => Ok(PaxosState::default()),
    }
}

fn save(storage: &Storage, key: &PaxosKey, state: &PaxosState) -> Result<(), String> {
    storage.paxos_put(&key.record_key(), &key.table, &state.encode()).map_err(|e| e.to_string())
}

/// Promises `ballot` if it is newer than every ballot promised, then reads.
pub fn prepare(storage: &Storage, req: &PrepareRequest) -> Result<PrepareResponse, String> {
    let _guard = req.key.lock();
    let mut state = load(storage, &req.key)?;
    let promised = req.ballot > state.promised;
    if promised {
        state.promised = req.ballot;
        save(storage, &req.key, &state)?;
    }
    let data = match (&req.read, promised) {
        (Some(command), true) => {
            let read = crate::wire::decode_command(req.key.table, req.key.token, req.key.key.to_vec(), command)
                .map_err(|e| e.to_string())?;
            Some(storage.read_raw(&read).map_err(|e| e.to_string())?)
        }
        _ => None,
    };
    Ok(PrepareResponse {
        promised,
        highest: state.promised,
        accepted: state.accepted,
        committed: state.committed,
        data,
    })
}

/// Accepts a proposal unless a newer ballot was promised. Answers whether
/// it did, and the newest ballot promised.
pub fn propose(storage: &Storage, req: &ProposalRequest) -> Result<(bool, Ballot), String> {
    let _guard = req.key.lock();
    let mut state = load(storage, &req.key)?;
    if req.proposal.ballot < state.promised {
        return Ok((false, state.promised));
    }
    state.promised = req.proposal.ballot;
    state.accepted = Some(req.proposal.clone());
    save(storage, &req.key, &state)?;
    Ok((true, state.promised))
}

/// Applies a chosen proposal and records it as the most recent commit.
pub fn commit(storage: &Storage, req: &ProposalRequest) -> Result<(), String> {
    let mutations = req.proposal.mutations()?;
    let _guard = req.key.lock();
    if !mutations.is_empty() {
        storage.apply(&mutations).map_err(|e| e.to_string())?;
    }
    let mut state = load(storage, &req.key)?;
    let ballot = req.proposal.ballot;
    let mut changed = false;
    if state.committed.as_ref().is_none_or(|c| c.ballot < ballot) {
        state.committed = Some(req.proposal.clone());
        changed = true;
    }
    if state.accepted.as_ref().is_some_and(|a| a.ballot <= ballot) {
        state.accepted = None;
        changed = true;
    }
    if changed {
        save(storage, &req.key, &state)?;
    }
    Ok(())
}

/// Serves a Paxos verb (the replica side of `verbs`): the response body.
pub fn serve(storage: &Storage, verb: Verb, payload: &[u8]) -> Result<Bytes, ServeError> {
    match verb {
        Verb::PaxosPrepareReq => {
            let req = PrepareRequest::decode(payload).map_err(ServeError::malformed)?;
            Ok(prepare(storage, &req).map_err(ServeError::Storage)?.encode())
        }
        Verb::PaxosProposeReq => {
            let req = ProposalRequest::decode(payload).map_err(ServeError::malformed)?;
            let (accepted, highest) = propose(storage, &req).map_err(ServeError::Storage)?;
            let mut out = BytesMut::new();
            out.put_u8(u8::from(accepted));
            highest.put(&mut out);
            Ok(out.freeze())
        }
        Verb::PaxosCommitReq => {
            let req = ProposalRequest::decode(payload).map_err(ServeError::malformed)?;
            commit(storage, &req).map_err(ServeError::Storage)?;
            Ok(Bytes::new())
        }
        other => Err(ServeError::Malformed(format!("{other:?} is not a Paxos verb"))),
    }
}

/// Why a replica could not serve a Paxos request.
#[derive(Debug)]
pub enum ServeError {
    Malformed(String),
    Storage(String),
}

impl ServeError {
    fn malformed(e: WireError) -> ServeError {
        ServeError::Malformed(e.to_string())
    }
}

fn decode_propose_response(bytes: &[u8]) -> Result<(bool, Ballot), WireError> {
    let mut r = Reader::new(bytes, WireError { what: "paxos accept" });
    let accepted = r.u8()? != 0;
    let highest = Ballot::read(&mut r)?;
    finish(&r)?;
    Ok((accepted, highest))
}

// ---------------------------------------------------------------------------
// The coordinator side
// ---------------------------------------------------------------------------

/// A conditional write or a SERIAL read of one partition.
#[derive(Clone, Debug)]
pub struct CasRequest {
    /// The rows the condition reads (and a SERIAL read returns); its table,
    /// token and key name the partition.
    pub read: PartitionRead,
    /// SERIAL or LOCAL_SERIAL.
    pub serial: Consistency,
    /// The level the commit waits for (the statement's consistency level).
    pub commit: Consistency,
    /// A read: contention fails with ReadTimeout rather than WriteTimeout.
    pub is_read: bool,
}

/// What a CAS did.
#[derive(Clone, Debug, PartialEq)]
pub struct CasOutcome {
    pub applied: bool,
    /// The rows read, reconciled across the quorum (before the update).
    pub current: Option<Partition>,
}

/// The proposer's bits of this process's ballots.
fn node_bits() -> u64 {
    static BITS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *BITS.get_or_init(|| Uuid::new_v4().as_u64_pair().1)
}

/// The last ballot microseconds this process used (ballots only grow).
static LAST_MICROS: AtomicI64 = AtomicI64::new(0);

/// A ballot newer than `after` and than every ballot this process made.
fn next_ballot(after: Ballot) -> Ballot {
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0);
    let floor = after.micros.saturating_add(1).max(now);
    let mut last = LAST_MICROS.load(Ordering::Relaxed);
    loop {
        let micros = floor.max(last.saturating_add(1));
        match LAST_MICROS.compare_exchange_weak(last, micros, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return Ballot { micros, node: node_bits() },
            Err(seen) => last = seen,
        }
    }
}

/// Moves every timestamp of `m` by `delta` microseconds (the update was
/// planned at timestamp 0; its cells take the ballot's time).
pub fn shift_timestamps(m: &mut Mutation, delta: i64) {
    let shift = |t: &mut i64| *t = t.saturating_add(delta);
    if let Some(d) = m.partition_deletion.as_mut() {
        shift(&mut d.timestamp);
    }
    for rt in &mut m.range_tombstones {
        shift(&mut rt.deletion.timestamp);
    }
    for row in &mut m.rows {
        if let Some(l) = row.marker.as_mut() {
            shift(&mut l.timestamp);
        }
        if let Some(d) = row.deletion.as_mut() {
            shift(&mut d.timestamp);
        }
        for (_, d) in &mut row.complex_deletions {
            shift(&mut d.timestamp);
        }
        for c in &mut row.cells {
            shift(&mut c.timestamp);
        }
    }
}

/// The replicas a Paxos round talks to and how many must answer.
struct Participants {
    requirement: Requirement,
    live: Vec<(Uuid, String)>,
    down: Vec<Uuid>,
}

/// How a round of prepares or proposals ended.
enum Round<T> {
    /// Enough replicas said yes: their answers.
    Won(Vec<(Uuid, T)>),
    /// Too many refused: the newest ballot one of them promised, how many
    /// said yes all the same, and whether some did not answer (and so may
    /// have said yes).
    Lost { newest: Ballot, said_yes: usize, uncertain: bool },
    /// Neither before the deadline: the yes answers received.
    TimedOut(i32),
}

impl<T: Transport + Clone> Coordinator<T> {
    fn paxos_participants(
        view: &ClusterView,
        ks: &KeyspaceDef,
        token: i64,
        serial: Consistency,
    ) -> Result<Participants, CoordError> {
        let mut requirement = Requirement::serial(&ks.replication, serial, view.local_dc())?;
        let (mut live, mut down) = (Vec::new(), Vec::new());
        let natural = if view.ring.is_empty() { vec![view.local] } else { view.replicas(ks, token) };
        let pending = if view.ring.is_empty() { Vec::new() } else { view.pending_replicas(ks, token) };
        for r in natural.iter().chain(&pending) {
            let dc = view.dc_of(*r).unwrap_or(view.local_dc()).to_string();
            if !requirement.counts(&dc) {
                continue;
            }
            if *r == view.local || view.is_alive(*r) {
                live.push((*r, dc));
            } else {
                down.push(*r);
            }
        }
        for p in &pending {
            requirement.add_pending(view.dc_of(*p).unwrap_or_default());
        }
        if requirement.block_for == 0 {
            return Err(CoordError::Unavailable { consistency: serial, required: 1, alive: 0 });
        }
        requirement.assure_available(live.iter().map(|(_, dc)| dc.as_str()))?;
        Ok(Participants { requirement, live, down })
    }

    /// Sends `payload` as `verb` to each target (this node's share served
    /// on a blocking thread); each answer comes back on the channel.
    fn paxos_send(
        self: &Arc<Self>,
        view: &ClusterView,
        targets: &[(Uuid, String)],
        verb: Verb,
        payload: Bytes,
    ) -> tokio::sync::mpsc::UnboundedReceiver<(Uuid, String, Result<Bytes, String>)> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        for (target, dc) in targets {
            let (tx, target, dc, payload) = (tx.clone(), *target, dc.clone(), payload.clone());
            if target == view.local {
                let storage = Arc::clone(&self.storage);
                tokio::spawn(async move {
                    let served = tokio::task::spawn_blocking(move || serve(&storage, verb, &payload))
                        .await
                        .map_err(|e| e.to_string())
                        .and_then(|r| r.map_err(|e| format!("{e:?}")));
                    let _ = tx.send((target, dc, served));
                });
                continue;
            }
            let Some(addr) = view.endpoint(target).map(|e| e.internode) else {
                let _ = tx.send((target, dc, Err("unknown replica".into())));
                continue;
            };
            let (verb, payload) = crate::traced::outgoing(addr, verb, payload);
            let fut = self.transport.send_request(addr, verb, payload, self.config.write_timeout);
            tokio::spawn(async move {
                let r = fut.await.map(|(_, body)| body).map_err(|e| e.to_string());
                let _ = tx.send((target, dc, r));
            });
        }
        rx
    }

    /// One round of prepares or proposals: waits for `block_for` yes
    /// answers. Once they can no longer come it gives up at once, or, with
    /// `settle`, after every replica answered (or the deadline), so that a
    /// loss says whether any replica may have said yes.
    async fn paxos_round<R>(
        self: &Arc<Self>,
        view: &ClusterView,
        who: &Participants,
        verb: Verb,
        payload: Bytes,
        settle: bool,
        decode: impl Fn(&[u8]) -> Option<(bool, Ballot, R)>,
    ) -> Round<R> {
        let mut rx = self.paxos_send(view, &who.live, verb, payload);
        let deadline = tokio::time::Instant::now() + self.config.write_timeout;
        let mut counter = AckCounter::new(who.requirement.clone());
        let mut yes = Vec::new();
        let (mut refused, mut failed) = (0usize, 0usize);
        let mut newest = Ballot::default();
        let counted = who.live.iter().filter(|(_, dc)| who.requirement.counts(dc)).count();
        let mut outstanding = who.live.len();
        while outstanding > 0 {
            let Ok(Some((replica, dc, answer))) = tokio::time::timeout_at(deadline, rx.recv()).await else { break };
            outstanding -= 1;
            match answer.ok().as_deref().and_then(&decode) {
                Some((true, _, r)) => {
                    yes.push((replica, r));
                    if counter.ack(&dc) {
                        return Round::Won(yes);
                    }
                }
                Some((false, highest, _)) => {
                    refused += 1;
                    newest = newest.max(highest);
                }
                None => failed += 1,
            }
            let hopeless = counted.saturating_sub(refused + failed) < who.requirement.block_for;
            if hopeless && !settle {
                break;
            }
        }
        let uncertain = outstanding > 0 || failed > 0;
        if newest > Ballot::default() {
            return Round::Lost { newest, said_yes: yes.len(), uncertain };
        }
        Round::TimedOut(counter.received())
    }

    fn contention_error(req: &CasRequest, who: &Participants, received: i32) -> CoordError {
        let block_for = who.requirement.block_for as i32;
        if req.is_read {
            CoordError::ReadTimeout { consistency: req.serial, received, block_for, data_present: false }
        } else {
            CoordError::WriteTimeout { consistency: req.serial, received, block_for, write_type: WriteType::Cas }
        }
    }

    /// Commits a chosen proposal: every live replica gets it, down ones a
    /// hint of its mutations; waits for `cl` (nothing at ANY).
    async fn paxos_commit(
        self: &Arc<Self>,
        view: &ClusterView,
        ks: &KeyspaceDef,
        who: &Participants,
        key: &PaxosKey,
        proposal: &Proposal,
        cl: Consistency,
    ) -> Result<(), CoordError> {
        let mutations = proposal.mutations().map_err(CoordError::Server)?;
        if !mutations.is_empty() {
            let refs: Vec<&Mutation> = mutations.iter().collect();
            for down in &who.down {
                self.hint(*down, &refs);
            }
        }
        let payload = ProposalRequest { key: key.clone(), proposal: proposal.clone() }.encode();
        let mut rx = self.paxos_send(view, &who.live, Verb::PaxosCommitReq, payload);
        if cl == Consistency::Any {
            return Ok(());
        }
        let requirement = Requirement::of(&ks.replication, cl, view.local_dc(), true)?;
        let mut counter = AckCounter::new(requirement);
        let deadline = tokio::time::Instant::now() + self.config.write_timeout;
        let mut outstanding = who.live.len();
        while outstanding > 0 {
            let Ok(Some((_, dc, answer))) = tokio::time::timeout_at(deadline, rx.recv()).await else { break };
            outstanding -= 1;
            if answer.is_ok() && counter.ack(&dc) {
                return Ok(());
            }
        }
        Err(CoordError::WriteTimeout {
            consistency: cl,
            received: counter.received(),
            block_for: counter.block_for(),
            write_type: WriteType::Simple,
        })
    }

    /// Runs a conditional write (or, with a `decide` that never writes, a
    /// SERIAL read) on one partition; see the module docs. `decide` gets the
    /// current rows and returns the mutations to make (timestamps relative
    /// to 0: they are moved to the ballot's), or None to write nothing.
    pub async fn cas<F>(
        self: &Arc<Self>,
        ks: &KeyspaceDef,
        req: CasRequest,
        mut decide: F,
    ) -> Result<CasOutcome, CoordError>
    where
        F: FnMut(Option<&Partition>) -> Result<Option<Vec<Mutation>>, CoordError>,
    {
        let key = PaxosKey {
            table: req.read.table,
            token: req.read.token,
            key: Bytes::copy_from_slice(&req.read.partition_key),
        };
        let command = crate::wire::encode_command(&req.read);
        let commit_cl = match (req.is_read, req.serial) {
            (true, Consistency::LocalSerial) => Consistency::LocalQuorum,
            (true, _) => Consistency::Quorum,
            (false, _) => req.commit,
        };
        let started = tokio::time::Instant::now();
        let contention_deadline = started + self.config.cas_contention_timeout;
        let mut after = Ballot::default();
        loop {
            let view = self.view.snapshot();
            let who = Self::paxos_participants(&view, ks, key.token, req.serial)?;
            let ballot = next_ballot(after);
            // 1. prepare + read
            let prepare = PrepareRequest { ballot, key: key.clone(), read: Some(command.clone()) };
            let round = self
                .paxos_round(&view, &who, Verb::PaxosPrepareReq, prepare.encode(), false, |b| {
                    PrepareResponse::decode(b).ok().map(|r| (r.promised, r.highest, r))
                })
                .await;
            let promises = match round {
                Round::Won(p) => p,
                Round::Lost { newest, .. } => {
                    after = after.max(newest);
                    self.paxos_backoff(contention_deadline, &req, &who).await?;
                    continue;
                }
                Round::TimedOut(received) => return Err(Self::contention_error(&req, &who, received)),
            };
            let newest_commit = promises.iter().filter_map(|(_, p)| p.committed.as_ref()).max_by_key(|c| c.ballot);
            let in_progress = promises
                .iter()
                .filter_map(|(_, p)| p.accepted.as_ref())
                .max_by_key(|a| a.ballot)
                .filter(|a| newest_commit.is_none_or(|c| a.ballot > c.ballot));
            // 2. finish what an earlier proposer may have had chosen
            if let Some(earlier) = in_progress {
                let again = Proposal { ballot, update: earlier.update.clone() };
                let payload = ProposalRequest { key: key.clone(), proposal: again.clone() }.encode();
                match self.paxos_round(&view, &who, Verb::PaxosProposeReq, payload, false, propose_answer).await {
                    Round::Won(_) => self.paxos_commit(&view, ks, &who, &key, &again, commit_cl).await?,
                    Round::Lost { newest, .. } => {
                        after = after.max(newest);
                        self.paxos_backoff(contention_deadline, &req, &who).await?;
                    }
                    Round::TimedOut(received) => return Err(Self::contention_error(&req, &who, received)),
                }
                continue;
            }
            // Timestamps must follow Paxos order: this ballot must be newer, in microseconds, than the last commit.
            if let Some(c) = newest_commit.filter(|c| c.ballot.micros >= ballot.micros) {
                after = after.max(c.ballot);
                continue;
            }
            // Replicas that missed the newest commit get it (not awaited: the quorum's data has it).
            if let Some(c) = newest_commit {
                let behind: Vec<(Uuid, String)> = promises
                    .iter()
                    .filter(|(_, p)| p.committed.as_ref().is_none_or(|mine| mine.ballot < c.ballot))
                    .filter_map(|(r, _)| who.live.iter().find(|(id, _)| id == r).cloned())
                    .collect();
                if !behind.is_empty() {
                    let payload = ProposalRequest { key: key.clone(), proposal: c.clone() }.encode();
                    drop(self.paxos_send(&view, &behind, Verb::PaxosCommitReq, payload));
                }
            }
            // 3. the current state
            let parts: Vec<RawPartition> = promises.iter().filter_map(|(_, p)| p.data.clone()).collect();
            let merged = merge_raw(&parts, req.read.reversed);
            let current =
                self.storage.resolve_raw(&req.read, &merged).map_err(|e| CoordError::Server(e.to_string()))?;
            let Some(mut update) = decide(current.as_ref())? else {
                return Ok(CasOutcome { applied: false, current });
            };
            // 4. propose
            for m in &mut update {
                shift_timestamps(m, ballot.micros);
            }
            let proposal = Proposal { ballot, update: message::encode_mutations(update.iter()) };
            let payload = ProposalRequest { key: key.clone(), proposal: proposal.clone() }.encode();
            match self.paxos_round(&view, &who, Verb::PaxosProposeReq, payload, true, propose_answer).await {
                Round::Won(_) => {}
                // Accepted by some (or maybe, by one that did not answer): a
                // later proposer may still commit it, so its outcome is
                // unknown (Cassandra's timeoutIfPartial).
                Round::Lost { said_yes, uncertain, .. } if said_yes > 0 || uncertain => {
                    return Err(Self::contention_error(&req, &who, said_yes as i32));
                }
                Round::Lost { newest, .. } => {
                    after = after.max(newest);
                    self.paxos_backoff(contention_deadline, &req, &who).await?;
                    continue;
                }
                Round::TimedOut(received) => return Err(Self::contention_error(&req, &who, received)),
            }
            // 5. commit
            self.paxos_commit(&view, ks, &who, &key, &proposal, commit_cl).await?;
            return Ok(CasOutcome { applied: true, current });
        }
    }

    /// Waits a random while (up to 100 ms, as Cassandra) before another
    /// ballot, or fails once `cas_contention_timeout` has passed.
    async fn paxos_backoff(
        &self,
        deadline: tokio::time::Instant,
        req: &CasRequest,
        who: &Participants,
    ) -> Result<(), CoordError> {
        let now = tokio::time::Instant::now();
        if now >= deadline {
            return Err(Self::contention_error(req, who, 0));
        }
        let pause = {
            use rand::Rng;
            let mut rng = self.paxos_rng.lock().unwrap_or_else(|p| p.into_inner());
            Duration::from_millis(rng.gen_range(0..100))
        };
        tokio::time::sleep(pause.min(deadline - now)).await;
        Ok(())
    }
}

fn propose_answer(bytes: &[u8]) -> Option<(bool, Ballot, ())> {
    decode_propose_response(bytes).ok().map(|(accepted, highest)| (accepted, highest, ()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ballots_order_by_time_then_node() {
        let a = Ballot { micros: 5, node: 9 };
        let b = Ballot { micros: 6, node: 1 };
        assert!(a < b);
        assert!(Ballot { micros: 6, node: 2 } > b);
        let next = next_ballot(Ballot { micros: i64::MAX / 2, node: 0 });
        assert!(next.micros > i64::MAX / 2);
        assert!(next_ballot(Ballot::default()) > next, "ballots of one process only grow");
    }

    #[test]
    fn messages_and_state_round_trip() {
        let key = PaxosKey { table: Uuid::from_u128(7), token: -3, key: Bytes::from_static(b"pk") };
        let proposal = Proposal { ballot: Ballot { micros: 10, node: 2 }, update: Bytes::from_static(b"xyz") };
        let state =
            PaxosState { promised: Ballot { micros: 11, node: 3 }, accepted: Some(proposal.clone()), committed: None };
        assert_eq!(PaxosState::decode(&state.encode()).expect("state"), state);
        let req = ProposalRequest { key: key.clone(), proposal: proposal.clone() };
        let back = ProposalRequest::decode(&req.encode()).expect("proposal");
        assert_eq!((back.key, back.proposal), (key.clone(), proposal.clone()));
        let prep = PrepareRequest { ballot: proposal.ballot, key, read: Some(Bytes::from_static(b"cmd")) };
        let back = PrepareRequest::decode(&prep.encode()).expect("prepare");
        assert_eq!(back.read.as_deref(), Some(&b"cmd"[..]));
        let mut truncated = prep.encode().to_vec();
        truncated.pop();
        assert!(PrepareRequest::decode(&truncated).is_err());
        let rsp = PrepareResponse {
            promised: false,
            highest: Ballot { micros: 12, node: 1 },
            accepted: None,
            committed: Some(proposal),
            data: None,
        };
        let back = PrepareResponse::decode(&rsp.encode()).expect("promise");
        assert_eq!((back.promised, back.highest, back.committed), (rsp.promised, rsp.highest, rsp.committed));
    }
}
