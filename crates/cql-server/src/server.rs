//! The native-protocol server: accepts connections, splits frames, runs
//! requests concurrently (many stream ids in flight per connection), and
//! writes responses and events back, coalescing writes.
//!
//! The writes one read of a connection brings in run as groups of at most
//! `GROUP_MAX`, each in order, into one `data::WriteGroup`: this node's
//! share of every write is collected into its `WriteBatch`, committed as one
//! storage batch (one commit log record) once all ran; then the group awaits
//! the writes it deferred to replicas, and its answers leave together after
//! both.
//! In periodic mode a group runs on the connection's reader task and writes
//! its answers on the socket itself (`dispatch`, `Conn::send_now`); in
//! batch/group mode it runs on the blocking pool. Other requests run as
//! tasks of their own, answered as each finishes through the writer task,
//! which yields once before it drains its queue, so answers finished
//! together go out in one send.
//!
//! Protocol v4 and v5: a connection speaks the version of its STARTUP. A v5
//! connection switches both directions to segments (`cql_protocol::segment`)
//! right after the server answers STARTUP (READY or AUTHENTICATE): the reader
//! reads into `raw`, checks and unpacks whole segments into the envelope buffer
//! the v4 path reads frames from (an envelope split over several segments comes
//! out whole), and every writer packs its envelopes into segments before they
//! go to the socket or the writer task (`Wire::framed`), LZ4-compressed when
//! STARTUP asked for lz4 (snappy is refused on v5, as Cassandra refuses it). A
//! segment with a bad CRC is answered with a ProtocolError on stream 0 (in a
//! segment; Cassandra 5.0.9's message, led by a connection id) and closes the
//! connection, as Cassandra 5.0.9 does; a frame of the other version after STARTUP is answered with
//! Cassandra's "Invalid message version" ProtocolError. The v4 path is the one
//! it was: no per-request allocation or copy added (one version compare per
//! frame, a branch per send). v5's request fields: a QUERY's or BATCH's
//! `keyspace` and PREPARE's run in place of the session's; an EXECUTE's result
//! metadata id is compared with the statement's current result columns, and a
//! Rows answer carries Metadata_changed with the new id (and full column
//! specs) when they differ (`execute_v5`); `now_in_seconds` is the request's
//! "now" for TTL expiry on reads and for the expiry and deletion times its
//! writes write (`select::Page`, `modify::WriteOpts`), as Cassandra's
//! `QueryOptions.getNowInSeconds`; write timestamps stay the node's clock's.
//!
//! With `PasswordAuthenticator`, STARTUP is answered with AUTHENTICATE and
//! the connection accepts only AUTH_RESPONSE until a login succeeds
//! (AUTH_SUCCESS); a failed login answers an AUTHENTICATION error and keeps
//! the connection open for another try. The role logged in goes with every
//! request of the connection (`Processor::query`).
//!
//! Invariants:
//! - Bad bytes on one connection never affect another: a frame error answers
//!   on that connection (ProtocolError, or Invalid for an oversized frame) and
//!   closes it when the framing is lost.
//! - Every response goes out on the stream id of its request.
//! - A request whose writes joined a write group is answered only after the
//!   group committed (with the commit's error if it failed).
//! - In-flight requests per connection are bounded (`MAX_IN_FLIGHT`); when
//!   the bound is hit the connection stops reading (back-pressure).
//! - The bytes of requests admitted and not yet answered stay under the
//!   node's and the client address's limits (`limits`): a request's body
//!   bytes are reserved from its frame header, before its body is read, and
//!   given back when its answer is handed to the writer. A request that does
//!   not fit is answered Overloaded at once and its body discarded as it
//!   arrives (throw on overload), or the connection reads nothing more until
//!   it fits (backpressure). Connections over
//!   `native_transport_max_concurrent_connections(_per_ip)` are closed as
//!   they are accepted.

use std::collections::HashSet;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use cql_protocol::{
    decode_request_frame, encode_event_in, encode_response_in, parse_header, result_metadata_id, supported_options,
    Compression, ErrorBody, ErrorKind, EventType, FrameError, FrameHeader, Opcode, ProtocolError, QueryParams, Request,
    Response, ResultBody, SegmentCodec, StartupOptions, HEADER_LEN, PROTOCOL_V5, PROTOCOL_VERSION,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

use crate::auth::{decode_plain, PASSWORD_AUTHENTICATOR};
use crate::data::{self, WriteGroup};
use crate::error::QueryError;
use crate::processor::Processor;
use crate::tls::{Accepted, ServerTls};

mod limits;

use limits::{Admission, BytesPermit, Endpoint};
pub use limits::{
    ClientLimits, NativeLimits, DEFAULT_MAX_REQUEST_DATA_IN_FLIGHT, DEFAULT_MAX_REQUEST_DATA_IN_FLIGHT_PER_IP,
};

/// A connection's read side: a TCP stream's, or a TLS session's.
type ReadSide = Box<dyn AsyncRead + Send + Unpin>;
/// A connection's write side.
type WriteSide = Box<dyn AsyncWrite + Send + Unpin>;

/// Requests one connection may have in flight before the server stops reading from it.
pub const MAX_IN_FLIGHT: usize = 1024;

/// At most this many requests run in one group (one write group, one
/// commit, one send of the answers): more ready requests make more groups.
/// When groups ran as tasks, 128 left one worker executing a client's whole
/// burst while the other idled (110–125 k op/s at 128 vs 137–142 k at 32).
/// Since groups run on the reader task, fewer, larger groups cost less:
/// each group is one commit log `pwrite` and one `sendto`, and each send
/// wakes the client's reader (on the benchmark VM an inter-processor
/// interrupt: 11% of the server's samples sat in `sock_def_readable`). 128
/// takes a whole read of a 128-thread client in one group (2,000,000
/// writes, 128 threads, 3 alternating rounds, fresh node each: 5.8–6.4
/// server CPU-µs/op at 32 vs 5.4–6.1 at 128, client 2.9–3.1 vs 2.1–2.5).
const GROUP_MAX: usize = 128;

#[derive(Clone)]
pub struct ServerConfig {
    pub max_frame_bytes: u32,
    pub stages: Stages,
    /// `client_encryption_options`, when enabled.
    pub tls: Option<Arc<ServerTls>>,
    /// Bytes in flight and connections (`limits`).
    pub limits: NativeLimits,
}

/// How many requests of each kind execute at once on this node, over all
/// connections (cassandra.yaml's `concurrent_reads` and `concurrent_writes`,
/// the sizes of Cassandra's read and mutation stages): more wait their turn.
/// A write group (up to `GROUP_MAX` writes of one connection, run in order)
/// takes one write slot while it runs and commits, not while it waits for
/// remote replicas; a read takes one read slot until it is answered.
#[derive(Clone, Debug)]
pub struct Stages {
    reads: Arc<Semaphore>,
    writes: Arc<Semaphore>,
}

impl Stages {
    pub fn new(concurrent_reads: u32, concurrent_writes: u32) -> Stages {
        Stages {
            reads: Arc::new(Semaphore::new(concurrent_reads.max(1) as usize)),
            writes: Arc::new(Semaphore::new(concurrent_writes.max(1) as usize)),
        }
    }
}

/// Serves connections from `listener` until `shutdown` fires; then closes
/// the connections it accepted too (`shoal tool drain`, or the node's stop).
pub async fn serve(
    listener: TcpListener,
    processor: Arc<Processor>,
    config: ServerConfig,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let limits = Arc::new(ClientLimits::new(config.limits));
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => match limits.admit(peer.ip()) {
                    Ok(admission) => {
                        let processor = Arc::clone(&processor);
                        let config = config.clone();
                        let mut stop = shutdown.clone();
                        tokio::spawn(async move {
                            tokio::select! {
                                ended = connection(stream, peer, processor, config, admission) => {
                                    if let Err(e) = ended {
                                        tracing::debug!(%peer, error = %e, "connection ended with an error");
                                    }
                                }
                                _ = stop.wait_for(|stopped| *stopped) => {}
                            }
                        });
                    }
                    // Over a connection limit: closed at once, unanswered (as Cassandra's
                    // `ConnectionLimitHandler`); `admit` logged it.
                    Err(_) => drop(stream),
                },
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            },
            _ = shutdown.changed() => return,
        }
    }
}

struct Conn {
    processor: Arc<Processor>,
    keyspace: Mutex<Option<String>>,
    /// The role this connection logged in as (None: anonymous, or not yet).
    login: Mutex<Option<String>>,
    /// How answers are written: version, compression, segments.
    wire: Mutex<Wire>,
    tx: mpsc::Sender<Bytes>,
    /// The socket's write half, shared by the writer task and `send_now`.
    socket: Arc<tokio::sync::Mutex<WriteSide>>,
    /// The node's read and write stages, shared by every connection.
    stages: Stages,
    /// The client address's reserve of bytes in flight (and the node's, through it).
    endpoint: Arc<Endpoint>,
    /// The client's address (the audit log's `source`).
    peer: SocketAddr,
}

/// How a connection writes its answers.
#[derive(Clone, Copy, Debug)]
struct Wire {
    /// The protocol version of the answers: the request's until STARTUP, then
    /// the connection's.
    version: u8,
    /// v4's frame body compression, from STARTUP (never set on v5).
    compression: Option<Compression>,
    /// v5 after STARTUP: envelopes go out in segments.
    segments: Option<SegmentCodec>,
}

impl Wire {
    /// Puts `envelopes` (whole response envelopes) in the form the socket takes:
    /// as they are (v4, and v5 before STARTUP is answered), or in segments.
    fn framed(self, envelopes: BytesMut) -> BytesMut {
        match self.segments {
            None => envelopes,
            Some(codec) => {
                let segments = envelopes.len() / cql_protocol::segment::MAX_PAYLOAD + 1;
                let mut out = BytesMut::with_capacity(envelopes.len() + 12 * segments);
                codec.encode(&envelopes, &mut out);
                out
            }
        }
    }
}

impl Conn {
    fn wire(&self) -> Wire {
        *self.wire.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set_wire(&self, wire: Wire) {
        *self.wire.lock().unwrap_or_else(|p| p.into_inner()) = wire;
    }

    async fn send(&self, stream: i16, response: Response, compress: bool) {
        let mut out = BytesMut::with_capacity(256);
        let wire = self.wire();
        let compression = if compress { wire.compression } else { None };
        encode_response_in(&mut out, wire.version, stream, compression, None, &[], &response);
        let _ = self.tx.send(wire.framed(out).freeze()).await;
    }

    fn encode_all(&self, responses: &[Reply]) -> BytesMut {
        let mut out = BytesMut::with_capacity(64 * responses.len());
        let wire = self.wire();
        for r in responses {
            // A traced request ends here: answered once its writes were acknowledged.
            let tracing_id = r.trace.as_ref().map(|t| {
                t.finish();
                t.session_id()
            });
            encode_response_in(
                &mut out,
                wire.version,
                r.stream,
                wire.compression,
                tracing_id,
                &r.warnings,
                &r.response,
            );
        }
        wire.framed(out)
    }

    /// The responses of a request group, as one message to the writer.
    async fn send_all(&self, responses: Vec<Reply>) {
        let _ = self.tx.send(self.encode_all(&responses).freeze()).await;
    }

    /// The responses of a request group, written on the socket by the
    /// caller when the writer task is not writing (else handed to it).
    /// Whole buffers under the socket's lock: frames never interleave.
    async fn send_now(&self, responses: Vec<Reply>) {
        let out = self.encode_all(&responses);
        match self.socket.try_lock() {
            // A failed write closes the connection; the reader sees it.
            // The flush matters under TLS: rustls keeps what the socket did not take.
            Ok(mut socket) => {
                if socket.write_all(&out).await.is_ok() {
                    let _ = socket.flush().await;
                }
            }
            Err(_) => drop(self.tx.send(out.freeze()).await),
        }
    }
}

async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    processor: Arc<Processor>,
    config: ServerConfig,
    admission: Admission,
) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let _counted = metrics::ClientConnection::open();
    let accepted = match &config.tls {
        Some(tls) => tls.accept(stream).await?,
        None => Accepted::Plain(stream),
    };
    let (ssl, tls_info) = match &accepted {
        Accepted::Tls(stream) => {
            let session = stream.get_ref().1;
            let protocol = session.protocol_version().map(|v| format!("{v:?}").replace('_', "."));
            (true, (protocol, session.negotiated_cipher_suite().map(|c| format!("{:?}", c.suite()))))
        }
        Accepted::Plain(_) => (false, (None, None)),
    };
    let listed = processor.clients.open(peer, ssl);
    listed.client.tls(tls_info.0, tls_info.1);
    let client = Arc::clone(&listed.client);
    let (mut reader, writer): (ReadSide, WriteSide) = match accepted {
        Accepted::Plain(stream) => {
            let (r, w) = stream.into_split();
            (Box::new(r), Box::new(w))
        }
        Accepted::Tls(stream) => {
            let (r, w) = tokio::io::split(*stream);
            (Box::new(r), Box::new(w))
        }
    };
    let writer = Arc::new(tokio::sync::Mutex::new(writer));
    let shared = Arc::clone(&writer);
    let (tx, mut rx) = mpsc::channel::<Bytes>(256);
    let writer_task = tokio::spawn(async move {
        let mut buf = BytesMut::with_capacity(64 * 1024);
        while let Some(first) = rx.recv().await {
            buf.extend_from_slice(&first);
            // Let the requests already scheduled finish first: a response
            // wakes this task into the worker's next slot, ahead of them, so
            // without yielding every response would be its own send (the
            // kernel's loopback send is most of a small request's cost).
            tokio::task::yield_now().await;
            // Coalesce whatever else is ready into one write.
            while buf.len() < 256 * 1024 {
                match rx.try_recv() {
                    Ok(more) => buf.extend_from_slice(&more),
                    Err(_) => break,
                }
            }
            {
                let mut socket = writer.lock().await;
                // Under TLS a write may leave records in rustls' buffer when the socket is
                // full; only a flush sends them (on plain TCP it is free).
                if socket.write_all(&buf).await.is_err() || socket.flush().await.is_err() {
                    return;
                }
            }
            buf.clear();
        }
        let _ = writer.lock().await.shutdown().await;
    });
    let conn = Arc::new(Conn {
        processor,
        keyspace: Mutex::new(None),
        login: Mutex::new(None),
        wire: Mutex::new(Wire { version: PROTOCOL_VERSION, compression: None, segments: None }),
        tx,
        socket: shared,
        stages: config.stages.clone(),
        endpoint: Arc::clone(admission.endpoint()),
        peer,
    });
    let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let mut started = false;
    // After AUTHENTICATE and until AUTH_SUCCESS only AUTH_RESPONSE is accepted.
    let mut authenticating = false;
    // Requests that do not fit the limits are answered Overloaded (else the
    // connection waits for room): the node's choice, or the client's
    // (STARTUP's THROW_ON_OVERLOAD).
    let mut throw_on_overload = config.limits.throw_on_overload;
    let mut ready: Vec<(FrameHeader, Request)> = Vec::new();
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let mut skip: usize = 0;
    // The protocol version of the connection (fixed by STARTUP), and, on v5
    // once STARTUP is answered, the segment codec: bytes are then read into
    // `raw` and the envelopes they carry unpacked into `buf`.
    let mut version = PROTOCOL_VERSION;
    let mut segments: Option<SegmentCodec> = None;
    let mut raw = BytesMut::new();
    // The body bytes reserved for the frame at the head of `buf` (its header
    // parsed, its body not all read yet); they go with the request to `ready`.
    let mut head_reserved: Option<u32> = None;
    'read: loop {
        // Backpressure: the body bytes of the frame at the head of `buf`, when they do not fit.
        let mut wait_for: Option<u32> = None;
        loop {
            if skip > 0 {
                let n = skip.min(buf.len());
                let _ = buf.split_to(n);
                skip -= n;
                if skip > 0 {
                    break;
                }
            }
            let header = match parse_header(&buf, config.max_frame_bytes) {
                Ok(Some(h)) => h,
                Ok(None) => break,
                Err(e) => {
                    let mut out = BytesMut::new();
                    let wire = conn.wire();
                    e.encode_reply_in(&mut out, wire.version);
                    let _ = conn.tx.send(wire.framed(out).freeze()).await;
                    tracing::debug!(%peer, error = %e, "frame error");
                    if e.closes_connection() {
                        break 'read;
                    }
                    skip = e.bytes_to_skip().unwrap_or(HEADER_LEN);
                    if matches!(e, FrameError::UnsupportedVersion { .. }) {
                        // As Cassandra: drop what was read with it, and no more (the
                        // length of a frame in a foreign version may mean nothing).
                        skip = skip.min(buf.len());
                    }
                    continue;
                }
            };
            let total = HEADER_LEN + header.body_len as usize;
            if header.version != version {
                if started {
                    // As Cassandra: answered on its stream, skipped, the connection kept.
                    let e = ProtocolError::VersionChanged { got: header.version, had: version };
                    conn.send(header.stream, Response::Error(e.to_error_body()), true).await;
                    skip = total;
                    continue;
                }
                // Before STARTUP each request is answered in its own version.
                version = header.version;
                conn.set_wire(Wire { version, ..conn.wire() });
            }
            if head_reserved.is_none() && started && !authenticating && is_dispatched(header.opcode) {
                if conn.endpoint.try_reserve(header.body_len) {
                    head_reserved = Some(header.body_len);
                } else if throw_on_overload {
                    // As Cassandra: discarded unread, answered at once; the connection goes on.
                    let message = conn.endpoint.overloaded_message();
                    conn.send(header.stream, Response::Error(ErrorBody::new(ErrorKind::Overloaded, message)), true)
                        .await;
                    skip = total;
                    continue;
                } else {
                    wait_for = Some(header.body_len);
                    break;
                }
            }
            if buf.len() < total {
                buf.reserve(total - buf.len());
                break;
            }
            let frame = buf.split_to(total).freeze();
            // From here the request holds its reservation: `dispatch` turns it into
            // its answer's permit; a request answered here gives it back.
            let reserved = head_reserved.take().map_or(0, u64::from);
            let body = frame.slice(HEADER_LEN..);
            if !started && !matches!(header.opcode, Opcode::Startup | Opcode::Options) {
                conn.endpoint.release(reserved);
                let msg = format!("Unexpected message {}, expecting STARTUP or OPTIONS", header.opcode.name());
                conn.send(header.stream, Response::Error(ErrorBody::new(ErrorKind::ProtocolError, msg)), false).await;
                continue;
            }
            if authenticating && header.opcode != Opcode::AuthResponse {
                conn.endpoint.release(reserved);
                let msg = format!("Unexpected message {}, expecting SASL_RESPONSE", header.opcode.name());
                conn.send(header.stream, Response::Error(ErrorBody::new(ErrorKind::ProtocolError, msg)), true).await;
                continue;
            }
            let request = match decode_request_frame(&header, body, conn.wire().compression) {
                Ok(r) => r.request,
                Err(e) => {
                    conn.endpoint.release(reserved);
                    conn.send(header.stream, Response::Error(e.to_error_body()), true).await;
                    continue;
                }
            };
            if !matches!(
                request,
                Request::Query { .. } | Request::Prepare { .. } | Request::Execute { .. } | Request::Batch(_)
            ) {
                // Answered here, not by `dispatch` (none of these was reserved for).
                conn.endpoint.release(reserved);
            }
            match request {
                Request::Startup(_) if started => {
                    // As Cassandra: a connection is started once.
                    let msg = "Unexpected message STARTUP, the connection is already initialized".to_string();
                    conn.send(header.stream, Response::Error(ErrorBody::new(ErrorKind::ProtocolError, msg)), true)
                        .await;
                }
                Request::Startup(options) => {
                    let checked = match options.check() {
                        Ok(Some(Compression::Snappy)) if version >= PROTOCOL_V5 => Err(ProtocolError::SnappyInV5),
                        other => other,
                    };
                    match checked {
                        Ok(compression) => {
                            // Cassandra's value is "1"; "true" is taken too.
                            throw_on_overload |= options
                                .get(StartupOptions::THROW_ON_OVERLOAD)
                                .is_some_and(|v| v == "1" || v.eq_ignore_ascii_case("true"));
                            // READY (or AUTHENTICATE) goes out uncompressed; compression starts after it.
                            client.started(
                                options.get(StartupOptions::DRIVER_NAME),
                                options.get(StartupOptions::DRIVER_VERSION),
                                version,
                            );
                            if conn.processor.auth.authenticator.requires_login() {
                                client.authenticating();
                                let class = PASSWORD_AUTHENTICATOR.to_string();
                                conn.send(header.stream, Response::Authenticate(class), false).await;
                                authenticating = true;
                            } else {
                                conn.send(header.stream, Response::Ready, false).await;
                            }
                            if version >= PROTOCOL_V5 {
                                // From here on both directions are segments; what came in
                                // after STARTUP already is.
                                let codec = if compression.is_some() { SegmentCodec::LZ4 } else { SegmentCodec::PLAIN };
                                conn.set_wire(Wire { version, compression: None, segments: Some(codec) });
                                segments = Some(codec);
                                raw.extend_from_slice(&buf);
                                buf.clear();
                                if let Err(e) = codec.decode(&mut raw, &mut buf) {
                                    corrupt_segment(&conn, e).await;
                                    break 'read;
                                }
                            } else {
                                conn.set_wire(Wire { version, compression, segments: None });
                            }
                            started = true;
                        }
                        Err(e) => conn.send(header.stream, Response::Error(e.to_error_body()), false).await,
                    }
                }
                Request::Options => conn.send(header.stream, Response::Supported(supported_options()), true).await,
                Request::Register { events } => {
                    let mut wanted = HashSet::new();
                    for e in &events {
                        if let Some(t) = EventType::from_name(e) {
                            wanted.insert(t);
                        }
                    }
                    spawn_event_forwarder(Arc::clone(&conn), wanted);
                    conn.send(header.stream, Response::Ready, true).await;
                }
                Request::AuthResponse(token) if conn.processor.auth.authenticator.requires_login() => {
                    // bcrypt is slow on purpose: off the runtime's workers. The
                    // connection reads nothing else meanwhile (nothing else may run
                    // before the login anyway).
                    // Repeated failures from this address: wait first (without a thread).
                    let wait = conn.processor.auth.throttle.wait(peer.ip());
                    if !wait.is_zero() {
                        tokio::time::sleep(wait).await;
                    }
                    let processor = Arc::clone(&conn.processor);
                    let outcome = tokio::task::spawn_blocking(move || {
                        let credentials = decode_plain(&token);
                        let user = credentials.as_ref().map(|c| c.username.clone()).ok();
                        (user, credentials.and_then(|c| processor.auth.login(&*processor, &c)))
                    })
                    .await;
                    if let (Some(audit), Ok((user, result))) = (&conn.processor.audit, &outcome) {
                        let user = user.as_deref().unwrap_or("");
                        audit.login(user, peer, result.as_ref().map(|_| ()).map_err(String::as_str));
                    }
                    let response = match outcome.map(|(_, result)| result) {
                        Ok(Ok(role)) => {
                            client.logged_in(&role);
                            *conn.login.lock().unwrap_or_else(|p| p.into_inner()) = Some(role);
                            authenticating = false;
                            Response::AuthSuccess(None)
                        }
                        // The connection stays open, still authenticating: the client may retry.
                        Ok(Err(message)) => {
                            let failures = conn.processor.auth.throttle.failed(peer.ip());
                            if failures == crate::auth::FREE_FAILURES {
                                tracing::warn!(
                                    "{failures} failed logins from {}: its further attempts are slowed down",
                                    peer.ip()
                                );
                            }
                            Response::Error(ErrorBody::new(ErrorKind::AuthenticationError, message))
                        }
                        Err(e) => Response::Error(ErrorBody::new(
                            ErrorKind::AuthenticationError,
                            format!("Unable to perform authentication: {e}"),
                        )),
                    };
                    conn.send(header.stream, response, true).await;
                }
                Request::AuthResponse(_) => {
                    let body = ErrorBody::new(
                        ErrorKind::ProtocolError,
                        "Unexpected AUTH_RESPONSE: authentication is not enabled",
                    );
                    conn.send(header.stream, Response::Error(body), true).await;
                }
                request => {
                    client.requests.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    ready.push((header, request));
                    if ready.len() >= GROUP_MAX && !dispatch(&conn, &in_flight, &mut ready).await {
                        break 'read;
                    }
                }
            }
        }
        // Everything this read brought in runs before the next read.
        if !ready.is_empty() && !dispatch(&conn, &in_flight, &mut ready).await {
            break 'read;
        }
        if let Some(bytes) = wait_for {
            // Nothing more is read from this connection until its next request fits
            // (what it sent meanwhile waits in the socket: TCP slows the client down).
            conn.endpoint.reserve(bytes).await;
            head_reserved = Some(bytes);
            continue;
        }
        let into = if segments.is_some() { &mut raw } else { &mut buf };
        match reader.read_buf(into).await {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(%peer, error = %e, "read failed");
                break;
            }
        }
        if let Some(codec) = segments {
            if let Err(e) = codec.decode(&mut raw, &mut buf) {
                corrupt_segment(&conn, e).await;
                break;
            }
        }
    }
    // Requests read before a framing error still get their answers.
    if !ready.is_empty() {
        dispatch(&conn, &in_flight, &mut ready).await;
    }
    // A frame whose body never came in full.
    conn.endpoint.release(head_reserved.map_or(0, u64::from));
    drop(conn);
    let _ = writer_task.await;
    drop(admission);
    Ok(())
}

/// A segment that does not read (bad CRC): as Cassandra 5.0.9, a
/// ProtocolError on stream 0 led by the connection's id, then the caller
/// closes the connection (the requests already read still get their answers).
async fn corrupt_segment(conn: &Conn, e: cql_protocol::SegmentError) {
    static IDS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0x5a0a1000);
    let id = IDS.fetch_add(0x9E37, std::sync::atomic::Ordering::Relaxed);
    tracing::debug!(peer = %conn.peer, error = %e, "corrupt segment: closing the connection");
    conn.send(0, Response::Error(ErrorBody::protocol_error(format!("{id:08x} {e}"))), false).await;
}

/// The requests `dispatch` runs (the others are answered by the reader):
/// those whose bytes count in flight.
fn is_dispatched(opcode: Opcode) -> bool {
    matches!(opcode, Opcode::Query | Opcode::Prepare | Opcode::Execute | Opcode::Batch)
}

/// Runs the requests in `ready` (emptying it). The writes form one group:
/// they run one after another and share one commit. In periodic mode the
/// group runs right here, on the connection's reader task (its commit never
/// waits for the disk), and its answers go straight onto the socket when the
/// writer task is not writing; a group whose writes wait for replicas is
/// awaited by a task of its own. Every other request (reads, mostly) gets a
/// task of its own, as the runtime's workers are free, and is answered as
/// soon as it is done. False when the connection is closing.
///
/// Running writes on the reader keeps a connection's write path on one
/// thread: handing each group to a task and its answers to the writer task
/// woke a second worker for every group, and on the 2-core benchmark machine
/// that worker took the core the client needed (`bench/ab.py`, N=1000000,
/// 64 client threads, 3 alternating rounds: writes 158–164k op/s at
/// 5.3–5.6 CPU-µs handed off vs 211–217k at 4.4–4.5 here; `mixed` 62.7–62.9k
/// vs 60.6–62.0k op/s).
async fn dispatch(conn: &Arc<Conn>, in_flight: &Arc<Semaphore>, ready: &mut Vec<(FrameHeader, Request)>) -> bool {
    // The bytes the requests reserved as they were read: each group's go with its answers.
    let mut bytes = conn.endpoint.permit(ready.iter().map(|(h, _)| u64::from(h.body_len)).sum());
    let (mut writes, others): (Vec<_>, Vec<_>) =
        std::mem::take(ready).into_iter().partition(|(_, r)| conn.processor.is_write(r));
    // Reads first: another worker can start them while this one writes.
    for request in others {
        let held = bytes.split(u64::from(request.0.body_len));
        if !spawn_group(conn, in_flight, vec![request], false, held).await {
            return false;
        }
    }
    if writes.is_empty() {
        return true;
    }
    let Ok(permit) = Arc::clone(in_flight).acquire_many_owned(writes.len() as u32).await else { return false };
    let mut counted = metrics::MUTATION_STAGE.queue();
    let Ok(stage) = conn.stages.writes.acquire().await else { return false };
    counted.run();
    let ran = run_now(conn, std::mem::take(&mut writes));
    drop((stage, counted));
    match ran {
        Ok(ran) if ran.is_done() => {
            conn.send_now(ran.finish().await).await;
            drop((permit, bytes));
        }
        Ok(ran) => answer_later(conn, (permit, bytes), ran.finish()),
        // Its commit waits for an fsync: the group runs on the blocking pool.
        Err(group) => {
            drop(permit);
            return spawn_group(conn, in_flight, group, true, bytes).await;
        }
    }
    true
}

/// Runs `group` as a task of its own, answered through the writer task, in
/// the write stage when it `writes` (as `dispatch` sorted it), else the read
/// stage. False when the connection is closing.
async fn spawn_group(
    conn: &Arc<Conn>,
    in_flight: &Arc<Semaphore>,
    group: Vec<(FrameHeader, Request)>,
    writes: bool,
    bytes: BytesPermit,
) -> bool {
    let Ok(permit) = Arc::clone(in_flight).acquire_many_owned(group.len() as u32).await else { return false };
    let owned = Arc::clone(conn);
    let stage = Arc::clone(if writes { &conn.stages.writes } else { &conn.stages.reads });
    answer_later(conn, (permit, bytes), async move {
        let mut counted = if writes { metrics::MUTATION_STAGE.queue() } else { metrics::READ_STAGE.queue() };
        let Ok(_slot) = stage.acquire_owned().await else { return Vec::new() };
        counted.run();
        run_group(&owned, group).await
    });
    true
}

/// A task that sends `responses` through the writer task once they are
/// ready, holding the requests' in-flight `permit` (their slots and their
/// bytes) until then.
fn answer_later(
    conn: &Arc<Conn>,
    permit: (OwnedSemaphorePermit, BytesPermit),
    responses: impl Future<Output = Vec<Reply>> + Send + 'static,
) {
    let conn = Arc::clone(conn);
    tokio::spawn(async move {
        let responses = responses.await;
        conn.send_all(responses).await;
        drop(permit);
    });
}

fn spawn_event_forwarder(conn: Arc<Conn>, wanted: HashSet<EventType>) {
    let mut events = conn.processor.events.subscribe();
    tokio::spawn(async move {
        loop {
            match events.recv().await {
                Ok(event) => {
                    if !wanted.contains(&event.event_type()) {
                        continue;
                    }
                    let mut out = BytesMut::new();
                    let wire = conn.wire();
                    encode_event_in(&mut out, wire.version, wire.compression, &event);
                    if conn.tx.send(wire.framed(out).freeze()).await.is_err() {
                        return;
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(_) => return,
            }
        }
    });
}

/// Runs a request group: its requests one after another, their writes
/// collected into one write group, then committed, then answered.
///
/// In `periodic` mode the group commits on the runtime's worker (`run_now`:
/// the commit never waits for the disk, it merges into the memtables and
/// appends one log record); in `batch`/`group` mode the whole group runs on
/// the blocking pool and commits there (`run_blocking`), since its commit
/// waits for an fsync (concurrent groups share it: `CommitLog::sync`).
async fn run_group(conn: &Arc<Conn>, group: Vec<(FrameHeader, Request)>) -> Vec<Reply> {
    match run_now(conn, group) {
        Ok(ran) => ran.finish().await,
        Err(group) => run_blocking(conn, group).await,
    }
}

/// A group that ran and committed without waiting: the writes it deferred
/// to replicas are all that is left to await.
struct Ran {
    answers: Vec<Answer>,
    committed: Result<(), QueryError>,
    deferred: Vec<data::DeferredWrite>,
}

impl Ran {
    /// Whether the answers are final already (no replica to wait for).
    fn is_done(&self) -> bool {
        self.deferred.is_empty()
    }

    /// Waits for the deferred writes: each request is answered after its own.
    async fn finish(self) -> Vec<Reply> {
        let Ran { mut answers, committed, deferred } = self;
        let mut outcomes = Vec::with_capacity(deferred.len());
        for write in deferred {
            outcomes.push(write.await);
        }
        for a in &mut answers {
            if let Some(Err(e)) = a.waits.clone().filter_map(|i| outcomes.get(i)).find(|o| o.is_err()) {
                a.reply.response = Response::Error(error_body(e.clone()));
            }
        }
        answer(answers, committed)
    }
}

/// Runs a group on this thread when its commit cannot wait for the disk
/// (periodic mode, or no writes); gives the group back otherwise.
fn run_now(conn: &Conn, group: Vec<(FrameHeader, Request)>) -> Result<Ran, Vec<(FrameHeader, Request)>> {
    let storage = &conn.processor.storage;
    let writes = group.iter().any(|(h, _)| matches!(h.opcode, Opcode::Query | Opcode::Execute | Opcode::Batch));
    if writes && storage.writes_block() {
        return Err(group);
    }
    Ok(run_and_commit(conn, group))
}

/// Runs a group's requests into one write group and commits its batch; what
/// is left is the writes it deferred to replicas.
fn run_and_commit(conn: &Conn, requests: Vec<(FrameHeader, Request)>) -> Ran {
    let mut group = WriteGroup::new();
    let answers = run_requests(conn, requests, &mut group);
    let (batch, deferred) = group.into_parts();
    let committed = conn.processor.storage.commit(std::slice::from_ref(&batch)).map_err(QueryError::from);
    Ran { answers, committed, deferred }
}

/// Runs a group whose commit waits for an fsync on the blocking pool.
async fn run_blocking(conn: &Arc<Conn>, group: Vec<(FrameHeader, Request)>) -> Vec<Reply> {
    let streams: Vec<i16> = group.iter().map(|(h, _)| h.stream).collect();
    let owned = Arc::clone(conn);
    let handle = tokio::runtime::Handle::current();
    let work = move || {
        // The commit waits for an fsync here; then, on this blocking thread,
        // the waits for remote replicas.
        let ran = run_and_commit(&owned, group);
        if ran.is_done() {
            answer(ran.answers, ran.committed)
        } else {
            handle.block_on(ran.finish())
        }
    };
    match tokio::task::spawn_blocking(work).await {
        Ok(responses) => responses,
        Err(e) => {
            let body = error_body(QueryError::Server(format!("request failed: {e}")));
            streams.into_iter().map(|s| Reply::new(s, Response::Error(body.clone()))).collect()
        }
    }
}

/// What goes back for one request: its response on its stream, with the
/// client warnings (Cassandra's `ClientWarn`) its execution raised.
struct Reply {
    stream: i16,
    response: Response,
    warnings: Vec<String>,
    /// The request's trace session (`TRACING ON`, or drawn by the trace
    /// probability): ended when the answer is written, which carries its id.
    trace: Option<Arc<trace::TraceState>>,
    /// What the data plane noted the request did (`metrics::client`) and
    /// when it began: recorded with its outcome once its answer is final.
    metric: Option<(metrics::Op, types::Consistency, Instant)>,
}

impl Reply {
    fn new(stream: i16, response: Response) -> Reply {
        Reply { stream, response, warnings: Vec::new(), trace: None, metric: None }
    }

    /// Records the request in the client request metrics (once: the note is taken).
    fn record(&mut self) {
        let Some((op, cl, start)) = self.metric.take() else { return };
        let outcome = match &self.response {
            Response::Error(e) => match e.kind {
                ErrorKind::ReadTimeout { .. } | ErrorKind::WriteTimeout { .. } => metrics::Outcome::Timeout,
                ErrorKind::Unavailable { .. } => metrics::Outcome::Unavailable,
                ErrorKind::ReadFailure { .. } | ErrorKind::WriteFailure { .. } => metrics::Outcome::Failure,
                _ => metrics::Outcome::Other,
            },
            _ => metrics::Outcome::Ok,
        };
        metrics::CLIENT.record(op, cl, start.elapsed().as_micros() as u64, outcome);
    }
}

/// A request's reply, whether its writes joined the group's batch, and which
/// of the group's deferred writes are its.
struct Answer {
    reply: Reply,
    grouped: bool,
    waits: std::ops::Range<usize>,
}

/// Runs requests in order (inside the caller's write group and deferral
/// scope, if any).
fn run_requests(conn: &Conn, requests: Vec<(FrameHeader, Request)>, group: &mut WriteGroup) -> Vec<Answer> {
    requests
        .into_iter()
        .map(|(header, request)| {
            let (before, waits_from) = (group.mutations(), group.deferred());
            let start = Instant::now();
            // A note a panicked request left behind is not this one's.
            metrics::client::take();
            // The one test tracing costs an untraced request: the frame's flag, or a drawn probability.
            let trace = match &conn.processor.tracer {
                Some(tracer) if header.is_tracing() || tracer.sample() => {
                    crate::traces::begin(tracer, &conn.processor, conn.peer.ip(), &request)
                }
                _ => None,
            };
            let (response, warnings) = match &trace {
                None => run_one(conn, &request, group),
                Some(state) => trace::with(Arc::clone(state), || run_one(conn, &request, group)),
            };
            let metric = metrics::client::take().map(|(op, cl)| (op, cl, start));
            Answer {
                reply: Reply { stream: header.stream, response, warnings, trace, metric },
                grouped: group.mutations() > before,
                waits: waits_from..group.deferred(),
            }
        })
        .collect()
}

/// The answers once the group's writes were committed: a request whose
/// writes joined the group gets the commit's error when it failed.
fn answer(answers: Vec<Answer>, committed: Result<(), QueryError>) -> Vec<Reply> {
    let failed = committed.err().map(error_body);
    answers
        .into_iter()
        .map(|a| {
            let mut reply = match (&failed, a.grouped) {
                (Some(body), true) => {
                    Reply { response: Response::Error(body.clone()), warnings: Vec::new(), ..a.reply }
                }
                _ => a.reply,
            };
            reply.record();
            reply
        })
        .collect()
}

fn run_one(conn: &Conn, request: &Request, group: &mut WriteGroup) -> (Response, Vec<String>) {
    let processor = &conn.processor;
    let keyspace = conn.keyspace.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let login = conn.login.lock().unwrap_or_else(|p| p.into_inner()).clone();
    // A bug must cost one request, not the connection: answer ServerError.
    let mut warnings = Vec::new();
    // The session's keyspace before the request, for the audit log (a clone only when it is on).
    let audit_keyspace = processor.audit.as_ref().and(keyspace.clone());
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        execute(processor, keyspace, login.as_deref(), request, group, &mut warnings)
    }));
    let (result, new_keyspace) = match outcome {
        Ok(r) => r,
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".to_string());
            tracing::error!(panic = %what, "request panicked");
            (Err(QueryError::Server(format!("internal error while executing the request: {what}"))), None)
        }
    };
    if let Some(audit) = &processor.audit {
        audit_request(audit, processor, conn.peer, login.as_deref(), audit_keyspace.as_deref(), request, &result);
    }
    let keyspace = new_keyspace;
    let response = match result {
        Ok(body) => {
            if let ResultBody::SetKeyspace(_) = &body {
                *conn.keyspace.lock().unwrap_or_else(|p| p.into_inner()) = keyspace;
            }
            Response::Result(body)
        }
        Err(e) => Response::Error(error_body(e)),
    };
    (response, warnings)
}

/// One audit line per statement of `request` (`audit_logging_options`).
fn audit_request(
    audit: &crate::audit::AuditLog,
    processor: &Processor,
    peer: SocketAddr,
    login: Option<&str>,
    keyspace: Option<&str>,
    request: &Request,
    result: &Result<ResultBody, QueryError>,
) {
    let outcome = result.as_ref().map(|_| ());
    let one = |text: &str, statement: Option<&cql::ast::Statement>, prepare: bool| {
        audit.statement(login, peer, statement, keyspace, text, prepare, outcome);
    };
    match request {
        Request::Query { query, .. } => one(query, cql::parse(query).ok().as_ref(), false),
        Request::Prepare { query, .. } => one(query, cql::parse(query).ok().as_ref(), true),
        Request::Execute { id, .. } => match processor.prepared_entry(id) {
            Some(entry) => one(&entry.query, Some(&entry.statement), false),
            None => one("EXECUTE of an unknown prepared statement", None, false),
        },
        Request::Batch(batch) => {
            for item in &batch.statements {
                match item {
                    cql_protocol::BatchStatement::Query { query, .. } => {
                        one(query, cql::parse(query).ok().as_ref(), false)
                    }
                    cql_protocol::BatchStatement::Prepared { id, .. } => match processor.prepared_entry(id) {
                        Some(entry) => one(&entry.query, Some(&entry.statement), false),
                        None => one("EXECUTE of an unknown prepared statement", None, false),
                    },
                }
            }
        }
        _ => {}
    }
}

fn execute(
    processor: &Processor,
    keyspace: Option<String>,
    login: Option<&str>,
    request: &Request,
    group: &mut WriteGroup,
    warnings: &mut Vec<String>,
) -> (Result<ResultBody, QueryError>, Option<String>) {
    let mut ks = keyspace;
    let result = match request {
        Request::Query { query, params } => {
            // v5: a keyspace of its own, in place of the session's (a USE in it still moves the session).
            if let Some(keyspace) = &params.keyspace {
                ks = Some(keyspace.clone());
            }
            processor.query(&mut ks, login, query, params, group, warnings)
        }
        Request::Prepare { query, keyspace } => processor.prepare(keyspace.as_deref().or(ks.as_deref()), query),
        Request::Execute { id, result_metadata_id: Some(known), params } => {
            execute_v5(processor, &mut ks, login, id, known, params, group, warnings)
        }
        Request::Execute { id, result_metadata_id: None, params } => {
            processor.execute(&mut ks, login, id, params, group, warnings)
        }
        Request::Batch(batch) => {
            processor.batch(batch.keyspace.as_deref().or(ks.as_deref()), login, batch, group, warnings)
        }
        _ => Err(QueryError::Protocol("unexpected request".into())),
    };
    (result, ks)
}

/// A v5 EXECUTE: runs it with full result metadata, then compares the result
/// columns' metadata id with `known`, the one the client holds from PREPARE
/// (or from an earlier Metadata_changed). Same: the answer is what v4 sends
/// (no column specs when the client asked to skip them). Different (the table
/// changed since PREPARE, e.g. `SELECT *` after ALTER TABLE ADD): the Rows
/// carry Metadata_changed, the new id and the full column specs, whatever the
/// client asked, as Cassandra answers.
#[allow(clippy::too_many_arguments)]
fn execute_v5(
    processor: &Processor,
    ks: &mut Option<String>,
    login: Option<&str>,
    id: &Bytes,
    known: &Bytes,
    params: &QueryParams,
    group: &mut WriteGroup,
    warnings: &mut Vec<String>,
) -> Result<ResultBody, QueryError> {
    let skip = params.skip_metadata;
    let mut result = if skip {
        let full = QueryParams { skip_metadata: false, ..params.clone() };
        processor.execute(ks, login, id, &full, group, warnings)
    } else {
        processor.execute(ks, login, id, params, group, warnings)
    };
    if let Ok(ResultBody::Rows(rows)) = &mut result {
        let current = result_metadata_id(&rows.metadata.columns);
        if current != *known {
            rows.metadata.new_metadata_id = Some(current);
        } else if skip {
            rows.metadata =
                std::mem::replace(&mut rows.metadata, cql_protocol::RowsMetadata::empty()).without_column_specs();
        }
    }
    result
}

/// Maps a query error to its native-protocol error.
pub fn error_body(e: QueryError) -> ErrorBody {
    let message = e.to_string();
    let kind = match e {
        QueryError::Syntax(_) => ErrorKind::SyntaxError,
        QueryError::Invalid(_) => ErrorKind::Invalid,
        QueryError::AlreadyExists { keyspace, table, .. } => ErrorKind::AlreadyExists { keyspace, table },
        QueryError::Unauthorized(_) => ErrorKind::Unauthorized,
        QueryError::Config(_) => ErrorKind::ConfigError,
        QueryError::Unavailable { consistency, required, alive } => {
            ErrorKind::Unavailable { consistency, required, alive }
        }
        QueryError::WriteTimeout { consistency, received, block_for, write_type } => {
            ErrorKind::WriteTimeout { consistency, received, block_for, write_type }
        }
        QueryError::ReadTimeout { consistency, received, block_for, data_present } => {
            ErrorKind::ReadTimeout { consistency, received, block_for, data_present }
        }
        QueryError::Unprepared(id) => ErrorKind::Unprepared { id: Bytes::from(id) },
        QueryError::Overloaded(_) => ErrorKind::Overloaded,
        QueryError::Protocol(_) => ErrorKind::ProtocolError,
        QueryError::Server(_) => ErrorKind::ServerError,
        QueryError::FunctionFailure { keyspace, function, arg_types, .. } => {
            ErrorKind::FunctionFailure { keyspace, function, arg_types }
        }
        QueryError::ReadFailure { consistency, received, block_for, failures, reasons, .. } => ErrorKind::ReadFailure {
            consistency,
            received,
            block_for,
            num_failures: failures,
            data_present: false,
            reasons,
        },
    };
    ErrorBody::new(kind, message)
}
