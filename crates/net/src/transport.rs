//! The seam between the cluster layer and the network: the [`Transport`]
//! trait (send side), [`Inbound`] messages with their [`Responder`] (receive
//! side), and [`NetError`]. Implemented by `TcpTransport` (real sockets) and
//! `MemTransport` (in-memory, seeded faults).
//!
//! Receive side: each transport is created together with a bounded
//! `mpsc::Receiver<Inbound>`; the node's verb dispatcher drains it, handles
//! each request (usually in its own task) and answers through the request's
//! `Responder`. A pull-based queue keeps the transports free of user code and
//! of spawning, which is what keeps the in-memory network deterministic.
//!
//! Invariants:
//! - `send_request` queues the frame *when called* (not when the future is
//!   first polled), so a fan-out can send to every replica and then await;
//!   the timeout also counts from the call.
//! - Every request future resolves by its deadline: with the response, a
//!   `Failure` from the peer (`NetError::Remote`), or a local error. A
//!   response that arrives later is dropped; so is one for an abandoned future.
//! - Sends fail fast with `NetError::Overloaded` when a bounded queue is full;
//!   nothing waits for queue space.
//! - A `Responder` answers at most once (it is consumed); dropping it without
//!   answering lets the requester time out, as in Cassandra.

use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;

use crate::frame::Verb;
use crate::message::{Failure, FailureCode};

/// Why a send failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NetError {
    #[error("no response from {peer} within {timeout:?}")]
    Timeout { peer: SocketAddr, timeout: Duration },
    #[error("internode queue to {peer} is full: the peer or the network is too slow")]
    Overloaded { peer: SocketAddr },
    #[error("cannot connect to {peer}: {reason}")]
    Unreachable { peer: SocketAddr, reason: String },
    #[error("connection to {peer} closed before the response arrived")]
    ConnectionClosed { peer: SocketAddr },
    #[error("{peer} failed the request ({code:?}): {message}")]
    Remote { peer: SocketAddr, code: FailureCode, message: String },
    #[error("internode payload of {len} bytes exceeds the limit of {max} bytes")]
    PayloadTooLarge { len: usize, max: u32 },
    #[error("{verb:?} cannot be sent as a request: it is a response verb or the handshake")]
    NotARequest { verb: Verb },
    #[error("the internode transport is shut down")]
    Shutdown,
}

/// A response: its verb and payload (never `Verb::Failure`: failures come back
/// as `NetError::Remote`).
pub type Response = (Verb, Bytes);

/// Sends requests and one-way messages to peers addressed by their listen
/// address. Implementations are cheap to clone and share.
///
/// The futures are `'static` (they own what they need and can be spawned),
/// but as return-position `impl Trait` in a trait they still name `&self`'s
/// lifetime: a closure *taking* `&T` cannot return one (use an `async fn`
/// helper, or capture the transport from the environment instead).
pub trait Transport: Send + Sync + 'static {
    /// The address peers use to reach this node.
    fn local_addr(&self) -> SocketAddr;

    /// Sends a request and waits at most `timeout` for its response. `verb`
    /// must be a request verb (`Verb::response()` is `Some`).
    fn send_request(
        &self,
        peer: SocketAddr,
        verb: Verb,
        payload: Bytes,
        timeout: Duration,
    ) -> impl Future<Output = Result<Response, NetError>> + Send + 'static;

    /// Queues a message that expects no response. `Ok` means queued, not
    /// delivered.
    fn send_one_way(&self, peer: SocketAddr, verb: Verb, payload: Bytes) -> Result<(), NetError>;

    /// What opens bulk connections to peers (`tcp`'s module docs): blocking
    /// sockets for raw bytes, read and written by the caller's thread, never
    /// by the runtime's workers. `None` when this transport has no such
    /// connections (the in-memory network); callers then move their bytes in
    /// request verbs.
    fn bulk_connector(&self) -> Option<crate::tcp::BulkConnector> {
        None
    }
}

/// Checks a request verb (shared by the implementations).
/// Waits for the response of a queued request until `deadline` (counted from
/// the `send_request` call). `guard` keeps the request's pending entry alive
/// until the wait ends, whatever the outcome. Shared by every transport.
pub(crate) async fn await_response<G>(
    peer: SocketAddr,
    timeout: Duration,
    deadline: tokio::time::Instant,
    queued: Result<(G, tokio::sync::oneshot::Receiver<Result<Response, NetError>>), NetError>,
) -> Result<Response, NetError> {
    let (guard, rx) = queued?;
    let result = match tokio::time::timeout_at(deadline, rx).await {
        Ok(Ok(result)) => result,
        Ok(Err(_)) => Err(NetError::ConnectionClosed { peer }),
        Err(_) => Err(NetError::Timeout { peer, timeout }),
    };
    drop(guard);
    result
}

pub(crate) fn check_request_verb(verb: Verb) -> Result<(), NetError> {
    if verb.is_request() {
        Ok(())
    } else {
        Err(NetError::NotARequest { verb })
    }
}

/// Checks a one-way verb: any non-response verb except the handshake.
pub(crate) fn check_one_way_verb(verb: Verb) -> Result<(), NetError> {
    if verb.is_response() || verb.is_handshake() {
        return Err(NetError::NotARequest { verb });
    }
    Ok(())
}

/// A message received from a peer.
pub struct Inbound {
    /// The sender's listen address (from its handshake), not the ephemeral
    /// port of the connection.
    pub from: SocketAddr,
    pub verb: Verb,
    pub payload: Bytes,
    pub responder: Responder,
    /// When the sender gives up waiting for the answer, on this node's
    /// clock (`ExpiringReq`, see `expiry`); None for requests that do not
    /// expire. Past it the request is dropped unserved ([`Inbound::live`]).
    pub deadline: Option<tokio::time::Instant>,
}

impl Inbound {
    /// True once the sender has given up on this request.
    pub fn expired(&self) -> bool {
        self.deadline.is_some_and(|d| tokio::time::Instant::now() >= d)
    }

    /// The request, unless its sender has given up on it: then it is dropped
    /// unanswered and counted as a dropped message of its verb (Cassandra's
    /// `DroppedMessage.Dropped`). Serving it would only delay the requests
    /// behind it: the coordinator has answered its client without this
    /// replica and hinted a mutation it did not get.
    pub fn live(self) -> Option<Inbound> {
        if self.expired() {
            tracing::debug!(from = %self.from, verb = ?self.verb, "expired internode request dropped");
            metrics::dropped(&format!("{:?}", self.verb));
            return None;
        }
        Some(self)
    }
}

impl fmt::Debug for Inbound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inbound")
            .field("from", &self.from)
            .field("verb", &self.verb)
            .field("payload_len", &self.payload.len())
            .field("expects_response", &self.responder.expects_response())
            .field("deadline", &self.deadline)
            .finish()
    }
}

/// Answers one inbound request. Consumed by answering.
pub struct Responder {
    pub(crate) kind: ResponderKind,
}

pub(crate) enum ResponderKind {
    /// One-way messages: answers are dropped.
    None,
    Tcp(crate::tcp::TcpReply),
    Mem(crate::mem::MemReply),
}

impl Responder {
    pub(crate) fn none() -> Responder {
        Responder { kind: ResponderKind::None }
    }

    /// False for one-way messages.
    pub fn expects_response(&self) -> bool {
        !matches!(self.kind, ResponderKind::None)
    }

    /// Sends the response. `verb` must be a response verb; anything else is
    /// sent as a `Failure` instead (a bug in the handler, reported to the
    /// requester rather than crashing the node). Fire and forget: when the
    /// connection is gone or its queue is full the answer is dropped and the
    /// requester times out.
    pub fn respond(self, verb: Verb, payload: Bytes) {
        if !verb.is_response() {
            tracing::error!(?verb, "internode handler answered with a request verb");
            return self.fail(FailureCode::Unknown, &format!("handler answered with request verb {verb:?}"));
        }
        match self.kind {
            ResponderKind::None => {}
            ResponderKind::Tcp(reply) => reply.send(verb, payload),
            ResponderKind::Mem(reply) => reply.send(verb, payload),
        }
    }

    /// Answers with a `Failure`.
    pub fn fail(self, code: FailureCode, message: &str) {
        self.respond(Verb::Failure, Failure::new(code, message).encode());
    }
}

impl fmt::Debug for Responder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Responder").field("expects_response", &self.expects_response()).finish()
    }
}

/// Turns a response frame into the caller's result: `Failure` payloads become
/// `NetError::Remote`.
pub(crate) fn response_result(peer: SocketAddr, verb: Verb, payload: Bytes) -> Result<Response, NetError> {
    if verb != Verb::Failure {
        return Ok((verb, payload));
    }
    let failure = Failure::decode(&payload)
        .unwrap_or_else(|e| Failure::new(FailureCode::MalformedPayload, format!("undecodable failure payload: {e}")));
    Err(NetError::Remote { peer, code: failure.code, message: failure.message })
}
