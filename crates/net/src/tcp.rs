//! The TCP transport: one listener, one lazily opened outbound connection per
//! peer, frames multiplexed by request id.
//!
//! Shape (tasks, all on the runtime that called `TcpTransport::bind`):
//! - an accept loop; each inbound connection gets a task that reads the peer's
//!   handshake, then its requests (pushed to the bounded inbound queue), and
//!   writes our responses back on the same connection;
//! - per peer, a task that owns the peer's bounded outbound queue: it connects
//!   when the first frame is queued, writes the handshake, then coalesces
//!   whatever is queued into one `write_all` (TCP_NODELAY is set, so batching
//!   is ours), while a reader matches response frames to pending requests.
//!
//! Bulk connections: a node that moves a lot of bytes (streaming's file
//! data) opens a connection of its own for them (`BulkConnector`, blocking),
//! whose first frame is `BulkHandshake` instead of `Handshake`. The accept
//! side hands such a connection, as a blocking socket, to the handler the
//! node registered (`serve_bulk`); it writes one byte (`BULK_READY`) once it
//! serves, and from then on the two sides speak their own protocol in raw
//! bytes. Those bytes are copied, checksummed and sent by the handler's and
//! the opener's threads (low-priority ones), not by the runtime's workers,
//! so a stream at disk speed does not delay the requests beside it (on
//! loopback even the receiving side's kernel work runs in the sending
//! thread). A node with no handler closes bulk connections at once.
//!
//! Inline requests: a node may serve one verb's requests in the inbound
//! connection's own task (`serve_inline`) instead of the inbound queue: the
//! frames of that verb decoded from one read go to its handler together,
//! which answers them before the task reads again, so their responses go
//! out with the connection's next write, without waking another task. The
//! handler must not wait (it runs on a runtime worker); the node registers
//! one only where that holds (replica mutations when writes do not wait
//! for an fsync).
//!
//! Encryption (`TcpConfig::tls`, cassandra.yaml's `server_encryption_options`
//! with `internode_encryption: all`): every connection, both ways, is TLS;
//! the accepting side requires the peer's certificate when configured so
//! (mutual authentication: only holders of the cluster's certificates can
//! connect, hence join or send a mutation). Bulk connections are not
//! offered then (`bulk_connector` is None: their point is `sendfile`, which
//! TLS rules out), so streaming uses request frames.
//!
//! Invariants:
//! - Responses travel on the connection their request came in on, so a
//!   request's fate is tied to one connection: when it closes, every request
//!   still pending to that peer fails at once with `ConnectionClosed` and the
//!   frames still queued are failed too (the caller writes a hint; nothing
//!   is retried behind its back).
//! - After a failed connect, sends to that peer fail fast with `Unreachable`
//!   for a backoff (doubling from `reconnect_backoff_min` to
//!   `reconnect_backoff_max`); the next send after it tries again.
//! - Every queue and map is bounded (see `TcpConfig`); a full one fails the
//!   send with `Overloaded` or answers the request with `Failure(Overloaded)`.
//! - A frame error (garbage, bad checksum, oversized, wrong flags) closes only
//!   the connection it arrived on, with a `warn!`; other peers are unaffected.
//! - Dropping the last `TcpTransport` handle (or `shutdown()`) stops the
//!   listener and every task and closes every connection.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::expiry::{steady_clock_us, TransitClock};
use crate::frame::{Frame, FrameDecoder, FrameError, Verb, PAYLOAD_BYTES_MAX_DEFAULT};
use crate::message::{decode_handshake, encode_handshake, Expiring, Failure, FailureCode};
use crate::transport::{
    await_response, check_one_way_verb, check_request_verb, response_result, Inbound, NetError, Responder,
    ResponderKind, Response, Transport,
};

/// Read buffer growth step.
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// What serves the bulk connections peers open to this node: it gets the
/// connection as a blocking socket and the peer's listen address, and must
/// not block the caller (a runtime worker): it starts a thread of its own.
pub type BulkHandler = Arc<dyn Fn(std::net::TcpStream, SocketAddr) + Send + Sync>;

/// What serves one verb's requests inline (`TcpTransport::serve_inline`):
/// the requests of that verb decoded from one read of one connection,
/// which it answers (or fails) before returning, without waiting.
pub type InlineHandler = Arc<dyn Fn(Vec<Inbound>) + Send + Sync>;

/// The handlers a node registers after `bind`, read by every inbound
/// connection: bulk connections' and the inline verb's.
#[derive(Default)]
struct Handlers {
    bulk: OnceLock<BulkHandler>,
    inline: OnceLock<(Verb, InlineHandler)>,
}

/// The byte a bulk connection's handler writes before anything else, so the
/// opener knows the connection is served (and never sends a byte too early).
pub const BULK_READY: u8 = 0xB1;

/// A connection's read side: a TCP stream's, or a TLS session's.
type ReadSide = Box<dyn AsyncRead + Send + Unpin>;
/// A connection's write side.
type WriteSide = Box<dyn AsyncWrite + Send + Unpin>;

/// TLS for every internode connection: how this node connects (presenting
/// its certificate, checking the peer's chain) and accepts (requiring the
/// peer's certificate when configured so).
#[derive(Clone)]
pub struct InternodeTls {
    pub connector: tls::tokio_rustls::TlsConnector,
    pub acceptor: tls::tokio_rustls::TlsAcceptor,
}

impl fmt::Debug for InternodeTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("InternodeTls")
    }
}

/// Limits and timers of a `TcpTransport`. `TcpConfig::new` gives the defaults.
#[derive(Clone, Debug)]
pub struct TcpConfig {
    /// Where to listen; also what this node tells peers in its handshake, so it
    /// must be a concrete address (Cassandra's `listen_address` rule).
    pub listen: SocketAddr,
    /// Largest payload sent or accepted.
    pub payload_bytes_max: u32,
    /// Frames queued per connection (outbound requests to a peer, or
    /// responses on an inbound connection) before sends fail fast.
    pub queue_frames_max: usize,
    /// Encoded bytes queued per connection before sends fail fast.
    pub queue_bytes_max: usize,
    /// Requests awaiting a response per peer.
    pub pending_requests_max: usize,
    /// Inbound messages waiting for the node to take them.
    pub inbound_queue_max: usize,
    /// Inbound connections served at once; more are closed on accept.
    pub inbound_connections_max: usize,
    pub connect_timeout: Duration,
    /// How long an accepted connection may take to send its handshake.
    pub handshake_timeout: Duration,
    pub reconnect_backoff_min: Duration,
    pub reconnect_backoff_max: Duration,
    /// Stop adding queued frames to one write past this many bytes.
    pub write_batch_bytes_max: usize,
    /// Encrypt every connection (None: plain TCP).
    pub tls: Option<InternodeTls>,
    /// Judge an expiring request's age by its sender's clock (Cassandra's
    /// `internode_timeout`; `expiry`'s steady clocks, the floor taking out
    /// their offset), so time spent before this node read it counts. Off:
    /// by its arrival, so only time queued here counts.
    pub internode_timeout: bool,
}

impl TcpConfig {
    pub fn new(listen: SocketAddr) -> TcpConfig {
        TcpConfig {
            listen,
            payload_bytes_max: PAYLOAD_BYTES_MAX_DEFAULT,
            // Why 16 Ki frames / 64 MiB: at 100 k replica writes/s a peer that
            // stalls for 100 ms backs up 10 k frames; more than that is a sick
            // peer, and failing fast lets the coordinator hint instead.
            queue_frames_max: 16 * 1024,
            queue_bytes_max: 64 * 1024 * 1024,
            pending_requests_max: 64 * 1024,
            inbound_queue_max: 16 * 1024,
            inbound_connections_max: 1024,
            connect_timeout: Duration::from_secs(2),
            handshake_timeout: Duration::from_secs(5),
            reconnect_backoff_min: Duration::from_millis(100),
            reconnect_backoff_max: Duration::from_secs(5),
            // Why 256 KiB: large enough to amortize a syscall over hundreds of
            // small mutations, small enough not to delay the first of them.
            write_batch_bytes_max: 256 * 1024,
            tls: None,
            internode_timeout: true,
        }
    }

    fn validate(&self) -> io::Result<()> {
        let bad = |what: &str| Err(io::Error::new(io::ErrorKind::InvalidInput, what.to_string()));
        if self.listen.ip().is_unspecified() {
            return bad("internode listen address cannot be a wildcard address (0.0.0.0 or ::)");
        }
        if self.queue_frames_max == 0 || self.inbound_queue_max == 0 || self.inbound_connections_max == 0 {
            return bad("internode queue and connection limits must be positive");
        }
        if self.reconnect_backoff_min > self.reconnect_backoff_max {
            return bad("reconnect_backoff_min exceeds reconnect_backoff_max");
        }
        if self.payload_bytes_max > u32::MAX / 2 {
            return bad("internode payload_bytes_max must be below 2 GiB");
        }
        Ok(())
    }
}

/// A cheap-to-clone handle on a running TCP transport.
#[derive(Clone)]
pub struct TcpTransport {
    inner: Arc<Inner>,
}

struct Inner {
    local_addr: SocketAddr,
    config: Arc<TcpConfig>,
    peers: Mutex<HashMap<SocketAddr, Arc<Peer>>>,
    next_request_id: AtomicU64,
    shutdown: watch::Sender<bool>,
    runtime: tokio::runtime::Handle,
    handlers: Arc<Handlers>,
    bulk_idle: Arc<BulkPool>,
    /// With TLS: the peers whose certificate this node checked (an outbound
    /// handshake succeeded), and when each other one was last tried.
    verified: Arc<Mutex<HashSet<SocketAddr>>>,
    tried: Mutex<HashMap<SocketAddr, Instant>>,
}

/// How often an unverified peer is tried again (`TcpTransport::verify`).
const VERIFY_RETRY: Duration = Duration::from_secs(2);

impl Drop for Inner {
    fn drop(&mut self) {
        self.shutdown.send_replace(true);
    }
}

impl fmt::Debug for TcpTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpTransport").field("local_addr", &self.inner.local_addr).finish()
    }
}

impl TcpTransport {
    /// Binds the listener and starts accepting. Must be called inside a tokio
    /// runtime; every task of this transport runs on it.
    pub async fn bind(config: TcpConfig) -> io::Result<(TcpTransport, mpsc::Receiver<Inbound>)> {
        config.validate()?;
        let listener = TcpListener::bind(config.listen).await?;
        let local_addr = listener.local_addr()?;
        let (inbound_tx, inbound_rx) = mpsc::channel(config.inbound_queue_max);
        let (shutdown, shutdown_rx) = watch::channel(false);
        let config = Arc::new(config);
        let handlers = Arc::new(Handlers::default());
        tokio::spawn(accept_loop(listener, inbound_tx, Arc::clone(&config), shutdown_rx, Arc::clone(&handlers)));
        let inner = Inner {
            local_addr,
            config,
            peers: Mutex::new(HashMap::new()),
            next_request_id: AtomicU64::new(1),
            shutdown,
            runtime: tokio::runtime::Handle::current(),
            handlers,
            bulk_idle: Arc::default(),
            verified: Arc::default(),
            tried: Mutex::new(HashMap::new()),
        };
        tracing::info!(%local_addr, "internode transport listening");
        Ok((TcpTransport { inner: Arc::new(inner) }, inbound_rx))
    }

    /// Stops listening, closes every connection and fails every pending
    /// request. Later sends fail with `Shutdown`.
    pub fn shutdown(&self) {
        self.inner.shutdown.send_replace(true);
    }

    /// Serves the bulk connections peers open to this node with `handler`
    /// (the first handler set stays).
    pub fn serve_bulk(&self, handler: BulkHandler) {
        let _ = self.inner.handlers.bulk.set(handler);
    }

    /// Serves `verb`'s requests inline with `handler` (see the module's
    /// "Inline requests"; the first handler set stays). The others still
    /// go to the inbound queue.
    pub fn serve_inline(&self, verb: Verb, handler: InlineHandler) {
        let _ = self.inner.handlers.inline.set((verb, handler));
    }

    /// Whether `peer` proved it holds a certificate of the cluster (a TLS
    /// handshake with it succeeded); always true without TLS.
    pub fn is_verified(&self, peer: SocketAddr) -> bool {
        self.inner.config.tls.is_none() || lock(&self.inner.verified).contains(&peer)
    }

    /// With TLS, connects to an unverified `peer` (at most every
    /// `VERIFY_RETRY`) so that its certificate is checked; see `is_verified`.
    pub fn verify(&self, peer: SocketAddr) {
        if self.is_verified(peer) || peer == self.inner.local_addr {
            return;
        }
        {
            let mut tried = lock(&self.inner.tried);
            if tried.get(&peer).is_some_and(|at| at.elapsed() < VERIFY_RETRY) {
                return;
            }
            if tried.len() > 10_000 {
                tried.retain(|_, at| at.elapsed() < VERIFY_RETRY);
            }
            tried.insert(peer, Instant::now());
        }
        let echo = self.send_request(peer, Verb::Echo, Bytes::new(), self.inner.config.connect_timeout * 2);
        self.inner.runtime.spawn(async move {
            // The handshake is what counts; the echo's own answer does not matter.
            let _ = echo.await;
        });
    }

    fn is_shut_down(&self) -> bool {
        *self.inner.shutdown.borrow()
    }

    /// The peer's shared state, starting its connection task on first use.
    fn peer(&self, addr: SocketAddr) -> Result<Arc<Peer>, NetError> {
        if self.is_shut_down() {
            return Err(NetError::Shutdown);
        }
        let mut peers = lock(&self.inner.peers);
        if let Some(peer) = peers.get(&addr) {
            return Ok(Arc::clone(peer));
        }
        let config = &self.inner.config;
        let (outbox, rx) = outbox(config.queue_frames_max, config.queue_bytes_max);
        let peer = Arc::new(Peer {
            addr,
            outbox,
            pending: Mutex::new(HashMap::new()),
            refuses_expiring: AtomicBool::new(false),
        });
        peers.insert(addr, Arc::clone(&peer));
        self.inner.runtime.spawn(run_peer(
            Arc::clone(&peer),
            rx,
            Arc::clone(config),
            self.inner.local_addr,
            self.inner.shutdown.subscribe(),
            Arc::clone(&self.inner.verified),
        ));
        Ok(peer)
    }

    fn check_payload(&self, payload: &Bytes) -> Result<(), NetError> {
        let max = self.inner.config.payload_bytes_max;
        if payload.len() > max as usize {
            return Err(NetError::PayloadTooLarge { len: payload.len(), max });
        }
        Ok(())
    }

    /// The synchronous half of `send_request`: registers the pending request
    /// and queues its frame. A droppable verb goes in an `ExpiringReq` that
    /// expires after `expires_after`, unless the peer refuses those; the
    /// flag says which went.
    fn queue_request(
        &self,
        addr: SocketAddr,
        verb: Verb,
        payload: Bytes,
        expires_after: Option<Duration>,
    ) -> Result<(Queued, bool), NetError> {
        check_request_verb(verb)?;
        self.check_payload(&payload)?;
        let peer = self.peer(addr)?;
        let room = (payload.len() + Expiring::HEADER_LEN) as u64 <= u64::from(self.inner.config.payload_bytes_max);
        let (verb, payload, wrapped) = match expires_after {
            Some(timeout) if verb.is_droppable() && room && !peer.refuses_expiring.load(Ordering::Relaxed) => {
                let expiring = Expiring {
                    created_at_us: steady_clock_us(),
                    timeout_ms: u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX),
                    verb,
                    payload,
                };
                (Verb::ExpiringReq, expiring.encode(), true)
            }
            _ => (verb, payload, false),
        };
        let request_id = self.inner.next_request_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = lock(&peer.pending);
            if pending.len() >= self.inner.config.pending_requests_max {
                return Err(NetError::Overloaded { peer: addr });
            }
            pending.insert(request_id, tx);
        }
        // From here on, dropping the guard forgets the pending entry.
        let guard = PendingGuard { peer: Arc::clone(&peer), request_id };
        match peer.outbox.push(Frame::request(verb, request_id, payload)) {
            Ok(()) => Ok(((guard, rx), wrapped)),
            Err(PushError::Full) => Err(NetError::Overloaded { peer: addr }),
            Err(PushError::Closed) => Err(NetError::Shutdown),
        }
    }
}

impl Transport for TcpTransport {
    fn local_addr(&self) -> SocketAddr {
        self.inner.local_addr
    }

    fn send_request(
        &self,
        peer: SocketAddr,
        verb: Verb,
        payload: Bytes,
        timeout: Duration,
    ) -> impl std::future::Future<Output = Result<Response, NetError>> + Send + 'static {
        let deadline = Instant::now() + timeout;
        let queued = self.queue_request(peer, verb, payload.clone(), Some(timeout));
        let this = self.clone();
        async move {
            let (queued, wrapped) = match queued {
                Ok((queued, wrapped)) => (Ok(queued), wrapped),
                Err(e) => (Err(e), false),
            };
            match await_response(peer, timeout, deadline, queued).await {
                Err(NetError::Remote { code: FailureCode::UnknownVerb, .. }) if wrapped => {
                    // A node older than `ExpiringReq`: this request and the
                    // later ones go bare, within the same deadline.
                    tracing::info!(%peer, "peer does not know expiring requests; sending them bare");
                    if let Ok(p) = this.peer(peer) {
                        p.refuses_expiring.store(true, Ordering::Relaxed);
                    }
                    let queued = this.queue_request(peer, verb, payload, None).map(|(queued, _)| queued);
                    await_response(peer, timeout, deadline, queued).await
                }
                result => result,
            }
        }
    }

    fn bulk_connector(&self) -> Option<BulkConnector> {
        if self.inner.config.tls.is_some() {
            return None;
        }
        Some(BulkConnector {
            local: self.inner.local_addr,
            timeout: self.inner.config.connect_timeout,
            idle: Arc::clone(&self.inner.bulk_idle),
        })
    }

    fn send_one_way(&self, addr: SocketAddr, verb: Verb, payload: Bytes) -> Result<(), NetError> {
        check_one_way_verb(verb)?;
        self.check_payload(&payload)?;
        let peer = self.peer(addr)?;
        match peer.outbox.push(Frame::one_way(verb, payload)) {
            Ok(()) => Ok(()),
            Err(PushError::Full) => Err(NetError::Overloaded { peer: addr }),
            Err(PushError::Closed) => Err(NetError::Shutdown),
        }
    }
}

type PendingMap = HashMap<u64, oneshot::Sender<Result<Response, NetError>>>;

/// A queued request: the guard of its pending entry and where its answer comes.
type Queued = (PendingGuard, oneshot::Receiver<Result<Response, NetError>>);

/// What the transport knows about one peer it sends to.
struct Peer {
    addr: SocketAddr,
    outbox: Outbox,
    pending: Mutex<PendingMap>,
    /// The peer answered an `ExpiringReq` with `Failure(UnknownVerb)` (a
    /// node older than it): its requests go bare from then on.
    refuses_expiring: AtomicBool,
}

impl Peer {
    /// Delivers a result to the request's waiter; late or unknown ids are dropped.
    fn complete(&self, request_id: u64, result: Result<Response, NetError>) {
        let waiter = lock(&self.pending).remove(&request_id);
        match waiter {
            Some(tx) => {
                let _ = tx.send(result);
            }
            None => tracing::trace!(peer = %self.addr, request_id, "dropping a late internode response"),
        }
    }

    fn fail_all_pending(&self, error: &NetError) {
        let drained: Vec<_> = lock(&self.pending).drain().collect();
        for (_, tx) in drained {
            let _ = tx.send(Err(error.clone()));
        }
    }

    /// Fails every frame still queued (they would have gone out on a
    /// connection that no longer exists).
    fn fail_queued(&self, rx: &mut OutboxReceiver, error: &NetError) {
        while let Some(frame) = rx.try_recv() {
            if !frame.flags.is_one_way() {
                self.complete(frame.request_id, Err(error.clone()));
            }
        }
    }
}

/// Removes a pending request when its future finishes or is dropped.
struct PendingGuard {
    peer: Arc<Peer>,
    request_id: u64,
}

impl Drop for PendingGuard {
    fn drop(&mut self) {
        lock(&self.peer.pending).remove(&self.request_id);
    }
}

/// Locks a mutex, ignoring poisoning: the maps guarded here stay consistent
/// between statements, so a panic elsewhere cannot leave them half-updated.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The sending end of a bounded frame queue (counted in frames and bytes).
#[derive(Clone)]
struct Outbox {
    tx: mpsc::Sender<Frame>,
    queued_bytes: Arc<AtomicUsize>,
    bytes_max: usize,
}

enum PushError {
    Full,
    Closed,
}

struct OutboxReceiver {
    rx: mpsc::Receiver<Frame>,
    queued_bytes: Arc<AtomicUsize>,
}

fn outbox(frames_max: usize, bytes_max: usize) -> (Outbox, OutboxReceiver) {
    let (tx, rx) = mpsc::channel(frames_max);
    let queued_bytes = Arc::new(AtomicUsize::new(0));
    (Outbox { tx, queued_bytes: Arc::clone(&queued_bytes), bytes_max }, OutboxReceiver { rx, queued_bytes })
}

impl Outbox {
    fn push(&self, frame: Frame) -> Result<(), PushError> {
        let len = frame.encoded_len();
        let before = self.queued_bytes.fetch_add(len, Ordering::Relaxed);
        // An empty queue always takes one frame, so a single large payload
        // (within `payload_bytes_max`) can always be sent.
        if before > 0 && before + len > self.bytes_max {
            self.queued_bytes.fetch_sub(len, Ordering::Relaxed);
            return Err(PushError::Full);
        }
        match self.tx.try_send(frame) {
            Ok(()) => Ok(()),
            Err(e) => {
                self.queued_bytes.fetch_sub(len, Ordering::Relaxed);
                match e {
                    mpsc::error::TrySendError::Full(_) => Err(PushError::Full),
                    mpsc::error::TrySendError::Closed(_) => Err(PushError::Closed),
                }
            }
        }
    }
}

impl OutboxReceiver {
    async fn recv(&mut self) -> Option<Frame> {
        let frame = self.rx.recv().await?;
        self.queued_bytes.fetch_sub(frame.encoded_len(), Ordering::Relaxed);
        Some(frame)
    }

    fn try_recv(&mut self) -> Option<Frame> {
        let frame = self.rx.try_recv().ok()?;
        self.queued_bytes.fetch_sub(frame.encoded_len(), Ordering::Relaxed);
        Some(frame)
    }
}

/// Answers one request on the connection it arrived on.
pub(crate) struct TcpReply {
    outbox: Outbox,
    request_id: u64,
    payload_bytes_max: u32,
}

impl TcpReply {
    pub(crate) fn send(self, verb: Verb, payload: Bytes) {
        let frame = if payload.len() > self.payload_bytes_max as usize {
            tracing::warn!(?verb, len = payload.len(), "internode response too large; answering Failure");
            let failure = Failure::new(
                FailureCode::Unknown,
                format!("response of {} bytes exceeds the internode limit", payload.len()),
            );
            Frame::response(Verb::Failure, self.request_id, failure.encode())
        } else {
            Frame::response(verb, self.request_id, payload)
        };
        if self.outbox.push(frame).is_err() {
            tracing::debug!(
                request_id = self.request_id,
                "internode response dropped: connection closed or its queue is full"
            );
        }
    }
}

/// How long a bulk connection given back may wait for its next use (the
/// serving side waits longer before it closes an idle one).
pub const BULK_IDLE: Duration = Duration::from_secs(20);
/// Idle bulk connections kept per peer.
const BULK_IDLE_PER_PEER: usize = 4;

type BulkPool = Mutex<HashMap<SocketAddr, Vec<(std::net::TcpStream, std::time::Instant)>>>;

/// Opens bulk connections from this node (`Transport::bulk_connector`), and
/// keeps the ones given back for reuse (at most `BULK_IDLE`), so a node
/// pulling many files from a peer does not open a connection per file.
#[derive(Clone)]
pub struct BulkConnector {
    local: SocketAddr,
    timeout: Duration,
    idle: Arc<BulkPool>,
}

impl fmt::Debug for BulkConnector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BulkConnector").field("local", &self.local).finish()
    }
}

impl BulkConnector {
    /// A connection to `peer`: an idle one given back (`reused` true; the
    /// peer may have closed it meanwhile, so a caller retries a failure
    /// before its first answer on a fresh one), else a new one: connects,
    /// sends `BulkHandshake` and waits for `BULK_READY` (each step at most
    /// the transport's connect timeout). Blocking.
    pub fn connect(&self, peer: SocketAddr) -> io::Result<(std::net::TcpStream, bool)> {
        let reused = {
            let mut idle = lock(&self.idle);
            let conns = idle.entry(peer).or_default();
            conns.retain(|(_, since)| since.elapsed() < BULK_IDLE);
            conns.pop()
        };
        match reused {
            Some((conn, _)) => Ok((conn, true)),
            None => open_bulk(self.local, peer, self.timeout).map(|conn| (conn, false)),
        }
    }

    /// Gives back a connection to `peer` that stands between two exchanges
    /// of its protocol, for the next `connect`.
    pub fn give_back(&self, peer: SocketAddr, conn: std::net::TcpStream) {
        let mut idle = lock(&self.idle);
        let conns = idle.entry(peer).or_default();
        conns.retain(|(_, since)| since.elapsed() < BULK_IDLE);
        if conns.len() < BULK_IDLE_PER_PEER {
            conns.push((conn, std::time::Instant::now()));
        }
    }
}

/// Opens a bulk connection from `local` (our listen address) to `peer`.
fn open_bulk(local: SocketAddr, peer: SocketAddr, timeout: Duration) -> io::Result<std::net::TcpStream> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect_timeout(&peer, timeout)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let mut hello = BytesMut::new();
    Frame::one_way(Verb::BulkHandshake, encode_handshake(local)).encode(&mut hello);
    stream.write_all(&hello)?;
    let mut ready = [0u8; 1];
    stream.read_exact(&mut ready).map_err(|e| {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            io::Error::new(io::ErrorKind::ConnectionRefused, format!("{peer} does not serve bulk connections"))
        } else {
            e
        }
    })?;
    if ready != [BULK_READY] {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{peer} answered a bulk handshake with {ready:?}"),
        ));
    }
    Ok(stream)
}

/// Why a connection ended (for logs).
enum ConnectionEnd {
    Eof,
    Io(io::Error),
    Frame(FrameError),
    Protocol(&'static str),
    QueueClosed,
    Shutdown,
    /// A bulk connection, given to the node's handler.
    HandedOff,
    /// The TLS handshake failed (no or a foreign certificate, a plain peer).
    Tls(String),
}

impl fmt::Display for ConnectionEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectionEnd::Eof => write!(f, "closed by the peer"),
            ConnectionEnd::Io(e) => write!(f, "i/o error: {e}"),
            ConnectionEnd::Frame(e) => write!(f, "bad frame: {e}"),
            ConnectionEnd::Protocol(what) => write!(f, "protocol violation: {what}"),
            ConnectionEnd::QueueClosed => write!(f, "queue closed"),
            ConnectionEnd::Shutdown => write!(f, "shutdown"),
            ConnectionEnd::HandedOff => write!(f, "handed to the bulk handler"),
            ConnectionEnd::Tls(e) => write!(f, "TLS handshake failed: {e}"),
        }
    }
}

impl ConnectionEnd {
    /// Garbage from the peer is worth a warning; the rest is routine.
    fn is_peer_fault(&self) -> bool {
        matches!(self, ConnectionEnd::Frame(_) | ConnectionEnd::Protocol(_) | ConnectionEnd::Tls(_))
    }
}

/// Resolves when shutdown is requested or the transport is dropped.
async fn shutdown_signal(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|stopped| *stopped).await;
}

/// Owns one peer's outbound queue for the transport's lifetime: connects on
/// demand, runs a connection until it breaks, backs off after failures.
async fn run_peer(
    peer: Arc<Peer>,
    mut rx: OutboxReceiver,
    config: Arc<TcpConfig>,
    local_addr: SocketAddr,
    mut shutdown: watch::Receiver<bool>,
    verified: Arc<Mutex<HashSet<SocketAddr>>>,
) {
    let mut backoff = config.reconnect_backoff_min;
    let mut retry_at: Option<(Instant, String)> = None;
    loop {
        let first = tokio::select! {
            frame = rx.recv() => match frame {
                Some(frame) => frame,
                None => break,
            },
            _ = shutdown_signal(&mut shutdown) => break,
        };
        if let Some((at, reason)) = &retry_at {
            if Instant::now() < *at {
                let error =
                    NetError::Unreachable { peer: peer.addr, reason: format!("{reason} (retrying after backoff)") };
                if !first.flags.is_one_way() {
                    peer.complete(first.request_id, Err(error.clone()));
                }
                peer.fail_queued(&mut rx, &error);
                continue;
            }
        }
        let connect = tokio::time::timeout(config.connect_timeout, TcpStream::connect(peer.addr));
        let stream = tokio::select! {
            result = connect => match result {
                Ok(Ok(stream)) => Ok(stream),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err(format!("connect timed out after {:?}", config.connect_timeout)),
            },
            _ = shutdown_signal(&mut shutdown) => break,
        };
        match stream {
            Err(reason) => {
                tracing::debug!(peer = %peer.addr, %reason, ?backoff, "internode connect failed");
                let error = NetError::Unreachable { peer: peer.addr, reason: reason.clone() };
                if !first.flags.is_one_way() {
                    peer.complete(first.request_id, Err(error.clone()));
                }
                peer.fail_queued(&mut rx, &error);
                retry_at = Some((Instant::now() + backoff, reason));
                backoff = (backoff * 2).min(config.reconnect_backoff_max);
            }
            Ok(stream) => {
                backoff = config.reconnect_backoff_min;
                retry_at = None;
                tracing::debug!(peer = %peer.addr, "internode connection open");
                let end =
                    run_outbound(stream, first, &mut rx, &peer, &config, local_addr, &mut shutdown, &verified).await;
                if end.is_peer_fault() {
                    tracing::warn!(peer = %peer.addr, reason = %end, "closing internode connection");
                } else {
                    tracing::debug!(peer = %peer.addr, reason = %end, "internode connection closed");
                }
                // Queued frames first, then the pending map: a caller that
                // sends again as soon as its request failed must find its new
                // frame kept for the next connection. (A request racing with
                // the break may still fail spuriously; its late answer is dropped.)
                let error = NetError::ConnectionClosed { peer: peer.addr };
                peer.fail_queued(&mut rx, &error);
                peer.fail_all_pending(&error);
                if matches!(end, ConnectionEnd::Shutdown) {
                    break;
                }
            }
        }
    }
    peer.fail_all_pending(&NetError::Shutdown);
}

#[allow(clippy::too_many_arguments)]
async fn run_outbound(
    stream: TcpStream,
    first: Frame,
    rx: &mut OutboxReceiver,
    peer: &Peer,
    config: &TcpConfig,
    local_addr: SocketAddr,
    shutdown: &mut watch::Receiver<bool>,
    verified: &Mutex<HashSet<SocketAddr>>,
) -> ConnectionEnd {
    if let Err(e) = stream.set_nodelay(true) {
        return ConnectionEnd::Io(e);
    }
    let (read_half, write_half): (ReadSide, WriteSide) = match &config.tls {
        None => {
            let (r, w) = stream.into_split();
            (Box::new(r), Box::new(w))
        }
        Some(tls) => {
            let name = tls::rustls::pki_types::ServerName::IpAddress(peer.addr.ip().into());
            let connect = tokio::time::timeout(config.handshake_timeout, tls.connector.connect(name, stream));
            match connect.await {
                Ok(Ok(stream)) => {
                    lock(verified).insert(peer.addr);
                    let (r, w) = tokio::io::split(stream);
                    (Box::new(r), Box::new(w))
                }
                Ok(Err(e)) => return ConnectionEnd::Tls(e.to_string()),
                Err(_) => return ConnectionEnd::Tls("no TLS handshake in time".into()),
            }
        }
    };
    let handshake = Frame::one_way(Verb::Handshake, encode_handshake(local_addr));
    tokio::select! {
        end = write_frames(write_half, vec![handshake, first], rx, config.write_batch_bytes_max) => end,
        end = read_responses(read_half, peer, config.payload_bytes_max) => end,
        _ = shutdown_signal(shutdown) => ConnectionEnd::Shutdown,
    }
}

/// Writes queued frames, coalescing everything already queued (up to
/// `batch_bytes_max`) into one write.
async fn write_frames(
    mut writer: impl AsyncWrite + Unpin,
    initial: Vec<Frame>,
    rx: &mut OutboxReceiver,
    batch_bytes_max: usize,
) -> ConnectionEnd {
    let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
    for frame in initial {
        frame.encode(&mut buf);
    }
    loop {
        if buf.is_empty() {
            match rx.recv().await {
                Some(frame) => frame.encode(&mut buf),
                None => return ConnectionEnd::QueueClosed,
            }
        }
        while buf.len() < batch_bytes_max {
            match rx.try_recv() {
                Some(frame) => frame.encode(&mut buf),
                None => break,
            }
        }
        // The flush matters under TLS: rustls keeps what a full socket did not take.
        if let Err(e) = writer.write_all(&buf).await {
            return ConnectionEnd::Io(e);
        }
        if let Err(e) = writer.flush().await {
            return ConnectionEnd::Io(e);
        }
        buf.clear();
        // Give back the memory of an occasional huge frame.
        if buf.capacity() > 4 * batch_bytes_max.max(READ_CHUNK_BYTES) {
            buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
        }
    }
}

/// Reads more bytes, growing the buffer to what the next frame needs.
async fn fill(
    reader: &mut (impl AsyncRead + Unpin),
    decoder: &FrameDecoder,
    buf: &mut BytesMut,
) -> Result<(), ConnectionEnd> {
    let needed = decoder.bytes_needed(buf).map_err(ConnectionEnd::Frame)?;
    buf.reserve(READ_CHUNK_BYTES.max(needed.saturating_sub(buf.len())));
    match reader.read_buf(buf).await {
        Ok(0) => Err(ConnectionEnd::Eof),
        Ok(_) => Ok(()),
        Err(e) => Err(ConnectionEnd::Io(e)),
    }
}

/// Reads response frames on an outbound connection.
async fn read_responses(mut reader: impl AsyncRead + Unpin, peer: &Peer, payload_bytes_max: u32) -> ConnectionEnd {
    let mut decoder = FrameDecoder::new(payload_bytes_max);
    let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
    loop {
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(frame)) => {
                    if !frame.flags.is_response() {
                        return ConnectionEnd::Protocol("a request arrived on an outbound connection");
                    }
                    peer.complete(frame.request_id, response_result(peer.addr, frame.verb, frame.payload));
                }
                Ok(None) => break,
                Err(FrameError::UnknownVerb { code, flags, request_id }) if flags.is_response() => {
                    let message = format!("response with unknown verb {code:#04x}");
                    peer.complete(
                        request_id,
                        Err(NetError::Remote { peer: peer.addr, code: FailureCode::UnknownVerb, message }),
                    );
                }
                Err(FrameError::UnknownVerb { .. }) => {
                    return ConnectionEnd::Protocol("a request arrived on an outbound connection");
                }
                Err(e) => return ConnectionEnd::Frame(e),
            }
        }
        if let Err(end) = fill(&mut reader, &decoder, &mut buf).await {
            return end;
        }
    }
}

/// Unwraps an `ExpiringReq` into its inner request with its deadline on
/// this node's clock, or drops it (counted) when its sender has already
/// given up. A malformed one is failed (`MalformedPayload`).
fn unwrap_expiring(message: Inbound, clock: &mut TransitClock, internode_timeout: bool) -> Option<Inbound> {
    let Inbound { from, payload, responder, .. } = message;
    let expiring = match Expiring::decode(&payload) {
        Ok(expiring) => expiring,
        Err(e) => {
            responder.fail(FailureCode::MalformedPayload, &e.to_string());
            return None;
        }
    };
    let now = Instant::now();
    let age = match internode_timeout {
        true => clock.age(expiring.created_at_us, steady_clock_us(), now),
        false => Duration::ZERO,
    };
    let timeout = Duration::from_millis(u64::from(expiring.timeout_ms));
    let deadline = now + timeout.saturating_sub(age);
    let inner = Inbound { from, verb: expiring.verb, payload: expiring.payload, responder, deadline: Some(deadline) };
    inner.live()
}

async fn accept_loop(
    listener: TcpListener,
    inbound: mpsc::Sender<Inbound>,
    config: Arc<TcpConfig>,
    mut shutdown: watch::Receiver<bool>,
    handlers: Arc<Handlers>,
) {
    let permits = Arc::new(Semaphore::new(config.inbound_connections_max));
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, remote)) => match Arc::clone(&permits).try_acquire_owned() {
                    Ok(permit) => {
                        tokio::spawn(serve_inbound(stream, remote, inbound.clone(), Arc::clone(&config), shutdown.clone(), permit, Arc::clone(&handlers)));
                    }
                    Err(_) => tracing::warn!(%remote, limit = config.inbound_connections_max, "too many inbound internode connections; closing"),
                },
                Err(e) => {
                    // Typically EMFILE: wait instead of spinning.
                    tracing::warn!(error = %e, "internode accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            _ = shutdown_signal(&mut shutdown) => return,
        }
    }
}

async fn serve_inbound(
    stream: TcpStream,
    remote: SocketAddr,
    inbound: mpsc::Sender<Inbound>,
    config: Arc<TcpConfig>,
    mut shutdown: watch::Receiver<bool>,
    _permit: OwnedSemaphorePermit,
    handlers: Arc<Handlers>,
) {
    let end = serve_inbound_inner(stream, remote, inbound, &config, &mut shutdown, &handlers).await;
    if end.is_peer_fault() {
        tracing::warn!(%remote, reason = %end, "closing inbound internode connection");
    } else {
        tracing::debug!(%remote, reason = %end, "inbound internode connection closed");
    }
}

async fn serve_inbound_inner(
    stream: TcpStream,
    remote: SocketAddr,
    inbound: mpsc::Sender<Inbound>,
    config: &TcpConfig,
    shutdown: &mut watch::Receiver<bool>,
    handlers: &Handlers,
) -> ConnectionEnd {
    let inline = handlers.inline.get();
    if let Err(e) = stream.set_nodelay(true) {
        return ConnectionEnd::Io(e);
    }
    let Some(tls) = &config.tls else {
        let (reader, writer) = stream.into_split();
        return serve_frames(reader, writer, remote, inbound, inline, config, shutdown, |reader, writer, from| {
            hand_off_bulk(reader, writer, remote, from, &handlers.bulk)
        })
        .await;
    };
    let accept = tokio::select! {
        accept = tokio::time::timeout(config.handshake_timeout, tls.acceptor.accept(stream)) => accept,
        _ = shutdown_signal(shutdown) => return ConnectionEnd::Shutdown,
    };
    let stream = match accept {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => return ConnectionEnd::Tls(e.to_string()),
        Err(_) => return ConnectionEnd::Tls("no TLS handshake in time".into()),
    };
    let (reader, writer) = tokio::io::split(stream);
    serve_frames(reader, writer, remote, inbound, inline, config, shutdown, |_, _, _| {
        ConnectionEnd::Protocol("a bulk connection over internode encryption (none are offered)")
    })
    .await
}

/// Hands a plain bulk connection, as a blocking socket, to the handler.
fn hand_off_bulk(
    reader: OwnedReadHalf,
    writer: OwnedWriteHalf,
    remote: SocketAddr,
    from: SocketAddr,
    bulk: &OnceLock<BulkHandler>,
) -> ConnectionEnd {
    let Some(handler) = bulk.get() else {
        return ConnectionEnd::Protocol("a bulk connection to a node that serves none");
    };
    let stream = match reader.reunite(writer).map(TcpStream::into_std) {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => return ConnectionEnd::Io(e),
        Err(_) => return ConnectionEnd::Protocol("the connection's halves do not match"),
    };
    if let Err(e) = stream.set_nonblocking(false) {
        return ConnectionEnd::Io(e);
    }
    tracing::debug!(%remote, %from, "inbound bulk connection");
    handler(stream, from);
    ConnectionEnd::HandedOff
}

/// Reads an inbound connection's handshake, then serves its requests (or,
/// for a bulk handshake, gives the connection to `bulk`).
#[allow(clippy::too_many_arguments)]
async fn serve_frames<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    mut reader: R,
    writer: W,
    remote: SocketAddr,
    inbound: mpsc::Sender<Inbound>,
    inline: Option<&(Verb, InlineHandler)>,
    config: &TcpConfig,
    shutdown: &mut watch::Receiver<bool>,
    bulk: impl FnOnce(R, W, SocketAddr) -> ConnectionEnd,
) -> ConnectionEnd {
    let mut decoder = FrameDecoder::new(config.payload_bytes_max);
    let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
    let handshake = async {
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(frame)) => return Ok(frame),
                Ok(None) => fill(&mut reader, &decoder, &mut buf).await?,
                Err(e) => return Err(ConnectionEnd::Frame(e)),
            }
        }
    };
    let first = tokio::select! {
        first = tokio::time::timeout(config.handshake_timeout, handshake) => match first {
            Ok(Ok(frame)) => frame,
            Ok(Err(end)) => return end,
            Err(_) => return ConnectionEnd::Protocol("no handshake in time"),
        },
        _ = shutdown_signal(shutdown) => return ConnectionEnd::Shutdown,
    };
    if !first.verb.is_handshake() {
        return ConnectionEnd::Protocol("the first frame is not a handshake");
    }
    let Ok(from) = decode_handshake(&first.payload) else {
        return ConnectionEnd::Protocol("undecodable handshake");
    };
    if first.verb == Verb::BulkHandshake {
        if !buf.is_empty() {
            return ConnectionEnd::Protocol("bytes after a bulk handshake before it was answered");
        }
        return bulk(reader, writer, from);
    }
    tracing::debug!(%remote, %from, "inbound internode connection open");
    let (outbox, mut rx) = outbox(config.queue_frames_max, config.queue_bytes_max);
    let limits = (config.payload_bytes_max, config.internode_timeout);
    let requests = read_requests(reader, decoder, buf, from, &inbound, inline, outbox, limits);
    tokio::select! {
        end = write_frames(writer, Vec::new(), &mut rx, config.write_batch_bytes_max) => end,
        end = requests => end,
        _ = shutdown_signal(shutdown) => ConnectionEnd::Shutdown,
    }
}

/// Reads requests and one-way messages on an inbound connection and hands
/// them to the node: the inline verb's to its handler after each read, the
/// others to the inbound queue.
#[allow(clippy::too_many_arguments)]
async fn read_requests(
    mut reader: impl AsyncRead + Unpin,
    mut decoder: FrameDecoder,
    mut buf: BytesMut,
    from: SocketAddr,
    inbound: &mpsc::Sender<Inbound>,
    inline: Option<&(Verb, InlineHandler)>,
    outbox: Outbox,
    (payload_bytes_max, internode_timeout): (u32, bool),
) -> ConnectionEnd {
    let reply = |request_id| TcpReply { outbox: outbox.clone(), request_id, payload_bytes_max };
    let mut inline_batch = Vec::new();
    let mut clock = TransitClock::new();
    loop {
        loop {
            let frame = match decoder.decode(&mut buf) {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(FrameError::UnknownVerb { code, flags, request_id }) => {
                    if flags.is_response() {
                        return ConnectionEnd::Protocol("a response arrived on an inbound connection");
                    }
                    tracing::debug!(%from, code, "internode request with unknown verb");
                    if !flags.is_one_way() {
                        let responder = Responder { kind: ResponderKind::Tcp(reply(request_id)) };
                        responder.fail(FailureCode::UnknownVerb, &format!("unknown verb {code:#04x}"));
                    }
                    continue;
                }
                Err(e) => return ConnectionEnd::Frame(e),
            };
            if frame.flags.is_response() {
                return ConnectionEnd::Protocol("a response arrived on an inbound connection");
            }
            if frame.verb.is_handshake() {
                return ConnectionEnd::Protocol("a second handshake");
            }
            let responder = if frame.flags.is_one_way() {
                Responder::none()
            } else {
                Responder { kind: ResponderKind::Tcp(reply(frame.request_id)) }
            };
            let message = Inbound { from, verb: frame.verb, payload: frame.payload, responder, deadline: None };
            let message = if message.verb == Verb::ExpiringReq {
                match unwrap_expiring(message, &mut clock, internode_timeout) {
                    Some(message) => message,
                    None => continue,
                }
            } else {
                message
            };
            if inline.is_some_and(|(verb, _)| *verb == message.verb) {
                inline_batch.push(message);
                continue;
            }
            match inbound.try_send(message) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(message)) => {
                    tracing::debug!(%from, verb = ?message.verb, "internode inbound queue full");
                    metrics::dropped(&format!("{:?}", message.verb));
                    message.responder.fail(FailureCode::Overloaded, "inbound queue full");
                }
                Err(mpsc::error::TrySendError::Closed(message)) => {
                    message.responder.fail(FailureCode::Unsupported, "this node does not serve internode requests");
                }
            }
        }
        if let (Some((_, handler)), false) = (inline, inline_batch.is_empty()) {
            handler(std::mem::take(&mut inline_batch));
        }
        if let Err(end) = fill(&mut reader, &decoder, &mut buf).await {
            return end;
        }
    }
}
