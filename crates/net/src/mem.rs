//! The in-memory network: many nodes in one process, addressed by
//! `SocketAddr`, with seeded fault injection (loss, delay, one-way
//! partitions, isolation, crashes). For tests and the cluster simulator.
//!
//! Every message is encoded as a real frame when sent and decoded on
//! delivery, so codecs and the frame checks run as they would over TCP.
//! Messages wait in one queue ordered by (delivery time, send sequence); a
//! pump task started by `MemNetwork::new` delivers them when tokio's clock
//! reaches their time (use a paused clock to make delays free).
//!
//! Invariants:
//! - Deterministic for a given seed if the caller polls deterministically
//!   (a `current_thread` runtime, paused time, no outside I/O): the random
//!   draws (loss, then delay, for each message in send order) and delivery
//!   order depend only on the seed and the order of sends. `MemStats::
//!   trace_hash` fingerprints the delivery history for "same seed twice" checks.
//! - Loss is decided when a message is sent; partitions when it is delivered,
//!   so a partition also drops messages already in flight, and healing
//!   restores delivery of everything sent afterwards (and of in-flight
//!   messages that had not reached the partition yet).
//! - A message to an address with no node is dropped silently (the sender
//!   times out), as a packet to a dead host would be.
//! - Queues are bounded: messages in flight (`in_flight_max`), each node's
//!   inbound queue and pending requests, with the TCP transport's behaviour
//!   when full (`Overloaded` / `Failure(Overloaded)`).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::time::Instant;

use crate::frame::{Frame, FrameDecoder, Verb, PAYLOAD_BYTES_MAX_DEFAULT};
use crate::message::{Failure, FailureCode};
use crate::transport::{
    await_response, check_one_way_verb, check_request_verb, response_result, Inbound, NetError, Responder,
    ResponderKind, Response, Transport,
};

/// Faults applied to every message (requests and responses alike).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct MemFaults {
    /// Probability in `[0, 1]` that a message is lost.
    pub drop_probability: f64,
    /// One-way delay, uniform in `[delay_min, delay_max]`.
    pub delay_min: Duration,
    pub delay_max: Duration,
}

/// Bounds of the in-memory network.
#[derive(Clone, Debug)]
pub struct MemConfig {
    pub in_flight_max: usize,
    pub inbound_queue_max: usize,
    pub pending_requests_max: usize,
    pub payload_bytes_max: u32,
}

impl Default for MemConfig {
    fn default() -> Self {
        MemConfig {
            in_flight_max: 1 << 20,
            inbound_queue_max: 16 * 1024,
            pending_requests_max: 64 * 1024,
            payload_bytes_max: PAYLOAD_BYTES_MAX_DEFAULT,
        }
    }
}

/// Counters of what happened to messages.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemStats {
    pub sent: u64,
    pub delivered: u64,
    pub dropped_by_fault: u64,
    pub dropped_by_partition: u64,
    /// Sent to an address with no node (or a crashed one).
    pub dropped_no_node: u64,
    /// Refused because a bounded queue was full.
    pub dropped_overloaded: u64,
    /// Responses whose request had already timed out or been abandoned.
    pub dropped_late: u64,
    /// FNV-1a over (sequence, from, to, verb, request id) of each delivery.
    pub trace_hash: u64,
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// A handle on the network: add nodes, inject faults. Cheap to clone.
#[derive(Clone)]
pub struct MemNetwork {
    shared: Arc<MemShared>,
}

pub(crate) struct MemShared {
    state: Mutex<MemState>,
    wake: Arc<Notify>,
}

impl Drop for MemShared {
    fn drop(&mut self) {
        // Lets the pump notice the network is gone.
        self.wake.notify_one();
    }
}

struct MemState {
    rng: SimRng,
    faults: MemFaults,
    config: MemConfig,
    blocked: BTreeSet<(SocketAddr, SocketAddr)>,
    isolated: BTreeSet<SocketAddr>,
    nodes: BTreeMap<SocketAddr, MemNode>,
    queue: BinaryHeap<Reverse<InFlight>>,
    next_seq: u64,
    next_generation: u64,
    stats: MemStats,
}

/// By request id: a crashed node's pending requests fail in the order they were sent (a
/// `HashMap` would fail them in an order that differs between runs, and a seed would not replay).
type PendingMap = BTreeMap<u64, oneshot::Sender<Result<Response, NetError>>>;

struct MemNode {
    /// Distinguishes a restarted node from its previous life: replies and
    /// pending requests of an old generation are discarded.
    generation: u64,
    inbound: mpsc::Sender<Inbound>,
    pending: PendingMap,
    next_request_id: u64,
}

struct InFlight {
    at: Instant,
    seq: u64,
    from: SocketAddr,
    to: SocketAddr,
    bytes: Bytes,
}

impl PartialEq for InFlight {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for InFlight {}
impl PartialOrd for InFlight {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for InFlight {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl MemNetwork {
    /// A network without faults. Must be called inside a tokio runtime (it
    /// spawns the delivery pump, which stops when the network is dropped).
    pub fn new(seed: u64) -> MemNetwork {
        MemNetwork::with_config(seed, MemConfig::default())
    }

    pub fn with_config(seed: u64, config: MemConfig) -> MemNetwork {
        assert!(config.payload_bytes_max <= u32::MAX / 2, "payload_bytes_max must be below 2 GiB");
        assert!(config.inbound_queue_max > 0, "inbound_queue_max must be positive");
        let wake = Arc::new(Notify::new());
        let state = MemState {
            rng: SimRng::new(seed),
            faults: MemFaults::default(),
            config,
            blocked: BTreeSet::new(),
            isolated: BTreeSet::new(),
            nodes: BTreeMap::new(),
            queue: BinaryHeap::new(),
            next_seq: 0,
            next_generation: 0,
            stats: MemStats { trace_hash: FNV_OFFSET, ..MemStats::default() },
        };
        let shared = Arc::new(MemShared { state: Mutex::new(state), wake: Arc::clone(&wake) });
        tokio::spawn(pump(Arc::downgrade(&shared), wake));
        MemNetwork { shared }
    }

    /// Adds (or restarts) the node at `addr`. A restart forgets the old
    /// node's pending requests and queue.
    pub fn add_node(&self, addr: SocketAddr) -> (MemTransport, mpsc::Receiver<Inbound>) {
        let mut state = lock(&self.shared.state);
        let (tx, rx) = mpsc::channel(state.config.inbound_queue_max);
        let generation = state.next_generation;
        state.next_generation += 1;
        state.nodes.insert(addr, MemNode { generation, inbound: tx, pending: BTreeMap::new(), next_request_id: 1 });
        (MemTransport { shared: Arc::clone(&self.shared), addr }, rx)
    }

    /// Crashes the node: messages to it are dropped, its pending requests fail
    /// with `ConnectionClosed`, and its late replies are discarded.
    pub fn remove_node(&self, addr: SocketAddr) {
        lock(&self.shared.state).nodes.remove(&addr);
    }

    pub fn set_faults(&self, faults: MemFaults) {
        assert!((0.0..=1.0).contains(&faults.drop_probability), "drop probability {}", faults.drop_probability);
        assert!(faults.delay_min <= faults.delay_max, "delay_min exceeds delay_max");
        lock(&self.shared.state).faults = faults;
    }

    /// Blocks messages from `from` to `to` (one direction only).
    pub fn partition(&self, from: SocketAddr, to: SocketAddr) {
        lock(&self.shared.state).blocked.insert((from, to));
    }

    /// Blocks both directions between `a` and `b`.
    pub fn partition_both(&self, a: SocketAddr, b: SocketAddr) {
        let mut state = lock(&self.shared.state);
        state.blocked.insert((a, b));
        state.blocked.insert((b, a));
    }

    /// Cuts `addr` off from every other node, both directions.
    pub fn isolate(&self, addr: SocketAddr) {
        lock(&self.shared.state).isolated.insert(addr);
    }

    /// Unblocks `from` → `to`.
    pub fn heal(&self, from: SocketAddr, to: SocketAddr) {
        lock(&self.shared.state).blocked.remove(&(from, to));
    }

    /// Removes every partition and isolation.
    pub fn heal_all(&self) {
        let mut state = lock(&self.shared.state);
        state.blocked.clear();
        state.isolated.clear();
    }

    pub fn stats(&self) -> MemStats {
        lock(&self.shared.state).stats.clone()
    }

    /// Messages sent but not yet delivered or dropped.
    pub fn in_flight(&self) -> usize {
        lock(&self.shared.state).queue.len()
    }
}

/// Delivers messages as tokio's clock reaches their time.
async fn pump(shared: Weak<MemShared>, wake: Arc<Notify>) {
    loop {
        let next = {
            let Some(shared) = shared.upgrade() else { return };
            let mut state = lock(&shared.state);
            state.deliver_due(&shared, Instant::now())
        };
        match next {
            Some(at) => {
                tokio::select! {
                    _ = tokio::time::sleep_until(at) => {}
                    _ = wake.notified() => {}
                }
            }
            None => wake.notified().await,
        }
    }
}

impl MemState {
    fn link_blocked(&self, from: SocketAddr, to: SocketAddr) -> bool {
        self.blocked.contains(&(from, to))
            || (from != to && (self.isolated.contains(&from) || self.isolated.contains(&to)))
    }

    /// Queues a frame, applying loss and delay. `Err` only when the in-flight
    /// bound is hit.
    fn route(&mut self, wake: &Notify, from: SocketAddr, to: SocketAddr, frame: &Frame) -> Result<(), NetError> {
        self.stats.sent += 1;
        if self.queue.len() >= self.config.in_flight_max {
            self.stats.dropped_overloaded += 1;
            return Err(NetError::Overloaded { peer: to });
        }
        let faults = &self.faults;
        if faults.drop_probability > 0.0 && self.rng.next_f64() < faults.drop_probability {
            self.stats.dropped_by_fault += 1;
            return Ok(());
        }
        let delay = self.rng.duration_between(faults.delay_min, faults.delay_max);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.queue.push(Reverse(InFlight { at: Instant::now() + delay, seq, from, to, bytes: frame.to_bytes() }));
        wake.notify_one();
        Ok(())
    }

    /// Delivers every message due at `now`; returns when the next one is due.
    fn deliver_due(&mut self, shared: &Arc<MemShared>, now: Instant) -> Option<Instant> {
        loop {
            let at = self.queue.peek()?.0.at;
            if at > now {
                return Some(at);
            }
            if let Some(Reverse(message)) = self.queue.pop() {
                self.deliver(shared, message);
            }
        }
    }

    fn deliver(&mut self, shared: &Arc<MemShared>, message: InFlight) {
        let InFlight { seq, from, to, bytes, .. } = message;
        if self.link_blocked(from, to) {
            self.stats.dropped_by_partition += 1;
            return;
        }
        let mut buf = BytesMut::from(&bytes[..]);
        let frame = match FrameDecoder::new(self.config.payload_bytes_max).decode(&mut buf) {
            Ok(Some(frame)) if buf.is_empty() => frame,
            other => {
                // Frames are built by this crate, so this is a codec bug.
                tracing::error!(%from, %to, ?other, "in-memory network could not decode its own frame");
                return;
            }
        };
        let Some(node) = self.nodes.get_mut(&to) else {
            self.stats.dropped_no_node += 1;
            return;
        };
        self.stats.delivered += 1;
        let mut hash = self.stats.trace_hash;
        for word in [seq, addr_key(from), addr_key(to), u64::from(frame.verb.code()), frame.request_id] {
            for byte in word.to_le_bytes() {
                hash = (hash ^ u64::from(byte)).wrapping_mul(FNV_PRIME);
            }
        }
        self.stats.trace_hash = hash;
        if frame.flags.is_response() {
            match node.pending.remove(&frame.request_id) {
                Some(tx) => {
                    let _ = tx.send(response_result(from, frame.verb, frame.payload));
                }
                None => self.stats.dropped_late += 1,
            }
            return;
        }
        let responder = if frame.flags.is_one_way() {
            Responder::none()
        } else {
            let reply = MemReply {
                shared: Arc::downgrade(shared),
                responder: to,
                generation: node.generation,
                requester: from,
                request_id: frame.request_id,
            };
            Responder { kind: ResponderKind::Mem(reply) }
        };
        let inbound = Inbound { from, verb: frame.verb, payload: frame.payload, responder, deadline: None };
        if let Err(e) = node.inbound.try_send(inbound) {
            self.stats.dropped_overloaded += 1;
            let (inbound, code, text) = match e {
                mpsc::error::TrySendError::Full(i) => (i, FailureCode::Overloaded, "inbound queue full"),
                mpsc::error::TrySendError::Closed(i) => {
                    (i, FailureCode::Unsupported, "this node does not serve internode requests")
                }
            };
            if inbound.responder.expects_response() {
                let failure = Frame::response(Verb::Failure, frame.request_id, Failure::new(code, text).encode());
                let _ = self.route(&shared.wake, to, from, &failure);
            }
        }
    }
}

fn addr_key(addr: SocketAddr) -> u64 {
    let ip = match addr.ip() {
        std::net::IpAddr::V4(ip) => u64::from(u32::from(ip)),
        std::net::IpAddr::V6(ip) => {
            let v = u128::from(ip);
            (v as u64) ^ ((v >> 64) as u64)
        }
    };
    (ip << 16) ^ u64::from(addr.port())
}

/// One node's view of the in-memory network.
#[derive(Clone)]
pub struct MemTransport {
    shared: Arc<MemShared>,
    addr: SocketAddr,
}

impl std::fmt::Debug for MemTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemTransport").field("addr", &self.addr).finish()
    }
}

impl MemTransport {
    fn check_payload(&self, state: &MemState, payload: &Bytes) -> Result<(), NetError> {
        let max = state.config.payload_bytes_max;
        if payload.len() > max as usize {
            return Err(NetError::PayloadTooLarge { len: payload.len(), max });
        }
        Ok(())
    }

    fn queue_request(
        &self,
        peer: SocketAddr,
        verb: Verb,
        payload: Bytes,
    ) -> Result<(MemPendingGuard, oneshot::Receiver<Result<Response, NetError>>), NetError> {
        check_request_verb(verb)?;
        let mut guard = lock(&self.shared.state);
        let state = &mut *guard;
        self.check_payload(state, &payload)?;
        let pending_max = state.config.pending_requests_max;
        let Some(node) = state.nodes.get_mut(&self.addr) else { return Err(NetError::Shutdown) };
        if node.pending.len() >= pending_max {
            return Err(NetError::Overloaded { peer });
        }
        let request_id = node.next_request_id;
        node.next_request_id += 1;
        let generation = node.generation;
        let (tx, rx) = oneshot::channel();
        node.pending.insert(request_id, tx);
        let pending = MemPendingGuard { shared: Arc::downgrade(&self.shared), addr: self.addr, generation, request_id };
        state.route(&self.shared.wake, self.addr, peer, &Frame::request(verb, request_id, payload))?;
        Ok((pending, rx))
    }
}

impl Transport for MemTransport {
    fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    fn send_request(
        &self,
        peer: SocketAddr,
        verb: Verb,
        payload: Bytes,
        timeout: Duration,
    ) -> impl std::future::Future<Output = Result<Response, NetError>> + Send + 'static {
        let deadline = Instant::now() + timeout;
        let queued = self.queue_request(peer, verb, payload);
        await_response(peer, timeout, deadline, queued)
    }

    fn send_one_way(&self, peer: SocketAddr, verb: Verb, payload: Bytes) -> Result<(), NetError> {
        check_one_way_verb(verb)?;
        let mut state = lock(&self.shared.state);
        self.check_payload(&state, &payload)?;
        if !state.nodes.contains_key(&self.addr) {
            return Err(NetError::Shutdown);
        }
        state.route(&self.shared.wake, self.addr, peer, &Frame::one_way(verb, payload))
    }
}

/// Forgets a pending request when its future ends or is dropped.
struct MemPendingGuard {
    shared: Weak<MemShared>,
    addr: SocketAddr,
    generation: u64,
    request_id: u64,
}

impl Drop for MemPendingGuard {
    fn drop(&mut self) {
        let Some(shared) = self.shared.upgrade() else { return };
        let mut state = lock(&shared.state);
        if let Some(node) = state.nodes.get_mut(&self.addr) {
            if node.generation == self.generation {
                node.pending.remove(&self.request_id);
            }
        }
    }
}

/// Answers one request through the in-memory network.
pub(crate) struct MemReply {
    shared: Weak<MemShared>,
    responder: SocketAddr,
    generation: u64,
    requester: SocketAddr,
    request_id: u64,
}

impl MemReply {
    pub(crate) fn send(self, verb: Verb, payload: Bytes) {
        let Some(shared) = self.shared.upgrade() else { return };
        let mut state = lock(&shared.state);
        // A crashed (or restarted) node's old handlers do not get to answer.
        if state.nodes.get(&self.responder).map(|n| n.generation) != Some(self.generation) {
            return;
        }
        let frame = if payload.len() > state.config.payload_bytes_max as usize {
            let failure = Failure::new(FailureCode::Unknown, "response exceeds the internode limit");
            Frame::response(Verb::Failure, self.request_id, failure.encode())
        } else {
            Frame::response(verb, self.request_id, payload)
        };
        let _ = state.route(&shared.wake, self.responder, self.requester, &frame);
    }
}

/// SplitMix64: a tiny seeded generator owned by this crate, so a seed replays
/// the same faults whatever version of `rand` the workspace uses.
struct SimRng(u64);

impl SimRng {
    fn new(seed: u64) -> SimRng {
        SimRng(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn duration_between(&mut self, min: Duration, max: Duration) -> Duration {
        if max <= min {
            return min;
        }
        let span = u64::try_from((max - min).as_nanos()).unwrap_or(u64::MAX);
        min + Duration::from_nanos(self.next_u64() % span.saturating_add(1))
    }
}
