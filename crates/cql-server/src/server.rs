//! The native-protocol server: accepts connections, splits frames, runs
//! requests concurrently (many stream ids in flight per connection), and
//! writes responses and events back, coalescing writes.
//!
//! Invariants:
//! - Bad bytes on one connection never affect another: a frame error answers
//!   on that connection (ProtocolError, or Invalid for an oversized frame) and
//!   closes it when the framing is lost.
//! - Every response goes out on the stream id of its request.
//! - In-flight requests per connection are bounded (`MAX_IN_FLIGHT`); when
//!   the bound is hit the connection stops reading (back-pressure).

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use cql_protocol::{
    decode_request_frame, encode_event, encode_response, parse_header, supported_options, Compression, ErrorBody, ErrorKind,
    EventType, FrameHeader, Opcode, Request, Response, ResultBody, WriteType, HEADER_LEN,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};

use crate::error::QueryError;
use crate::processor::Processor;

/// Requests one connection may have in flight before the server stops reading from it.
pub const MAX_IN_FLIGHT: usize = 1024;

#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub max_frame_bytes: u32,
}

/// Serves connections from `listener` until `shutdown` fires.
pub async fn serve(listener: TcpListener, processor: Arc<Processor>, config: ServerConfig, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let processor = Arc::clone(&processor);
                    let config = config.clone();
                    tokio::spawn(async move {
                        if let Err(e) = connection(stream, peer, processor, config).await {
                            tracing::debug!(%peer, error = %e, "connection ended with an error");
                        }
                    });
                }
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
    compression: Mutex<Option<Compression>>,
    tx: mpsc::Sender<Bytes>,
}

impl Conn {
    fn compression(&self) -> Option<Compression> {
        *self.compression.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn send(&self, stream: i16, response: Response, compress: bool) {
        let mut out = BytesMut::with_capacity(256);
        let compression = if compress { self.compression() } else { None };
        encode_response(&mut out, stream, compression, &[], &response);
        let _ = self.tx.send(out.freeze()).await;
    }
}

async fn connection(stream: TcpStream, peer: SocketAddr, processor: Arc<Processor>, config: ServerConfig) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let (mut reader, mut writer) = stream.into_split();
    let (tx, mut rx) = mpsc::channel::<Bytes>(256);
    let writer_task = tokio::spawn(async move {
        let mut buf = BytesMut::with_capacity(64 * 1024);
        while let Some(first) = rx.recv().await {
            buf.extend_from_slice(&first);
            // Coalesce whatever else is ready into one write.
            while buf.len() < 256 * 1024 {
                match rx.try_recv() {
                    Ok(more) => buf.extend_from_slice(&more),
                    Err(_) => break,
                }
            }
            if writer.write_all(&buf).await.is_err() {
                return;
            }
            buf.clear();
        }
        let _ = writer.shutdown().await;
    });
    let conn = Arc::new(Conn { processor, keyspace: Mutex::new(None), compression: Mutex::new(None), tx });
    let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let mut started = false;
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let mut skip: usize = 0;
    'read: loop {
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
                    e.encode_reply(&mut out);
                    let _ = conn.tx.send(out.freeze()).await;
                    tracing::debug!(%peer, error = %e, "frame error");
                    if e.closes_connection() {
                        break 'read;
                    }
                    skip = HEADER_LEN + e.body_to_skip().unwrap_or(0) as usize;
                    continue;
                }
            };
            let total = HEADER_LEN + header.body_len as usize;
            if buf.len() < total {
                buf.reserve(total - buf.len());
                break;
            }
            let frame = buf.split_to(total).freeze();
            let body = frame.slice(HEADER_LEN..);
            if !started && !matches!(header.opcode, Opcode::Startup | Opcode::Options) {
                let msg = format!("Unexpected message {}, expecting STARTUP or OPTIONS", header.opcode.name());
                conn.send(header.stream, Response::Error(ErrorBody::new(ErrorKind::ProtocolError, msg)), false).await;
                continue;
            }
            let request = match decode_request_frame(&header, body, conn.compression()) {
                Ok(r) => r.request,
                Err(e) => {
                    conn.send(header.stream, Response::Error(e.to_error_body()), true).await;
                    continue;
                }
            };
            match request {
                Request::Startup(options) => {
                    match options.check() {
                        Ok(compression) => {
                            // READY goes out uncompressed; compression starts after it.
                            conn.send(header.stream, Response::Ready, false).await;
                            *conn.compression.lock().unwrap_or_else(|p| p.into_inner()) = compression;
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
                Request::AuthResponse(_) => {
                    let body = ErrorBody::new(ErrorKind::ProtocolError, "Unexpected AUTH_RESPONSE: authentication is not enabled");
                    conn.send(header.stream, Response::Error(body), true).await;
                }
                request => {
                    let Ok(permit) = Arc::clone(&in_flight).acquire_owned().await else { break 'read };
                    let conn = Arc::clone(&conn);
                    tokio::spawn(async move {
                        let response = run_request(&conn, &header, request).await;
                        conn.send(header.stream, response, true).await;
                        drop(permit);
                    });
                }
            }
        }
        match reader.read_buf(&mut buf).await {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(%peer, error = %e, "read failed");
                break;
            }
        }
    }
    drop(conn);
    let _ = writer_task.await;
    Ok(())
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
                    encode_event(&mut out, conn.compression(), &event);
                    if conn.tx.send(out.freeze()).await.is_err() {
                        return;
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(_) => return,
            }
        }
    });
}

async fn run_request(conn: &Arc<Conn>, header: &FrameHeader, request: Request) -> Response {
    let processor = Arc::clone(&conn.processor);
    let keyspace = conn.keyspace.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let blocking = processor.storage.writes_block() && matches!(header.opcode, Opcode::Query | Opcode::Execute | Opcode::Batch);
    let work = move || -> (Result<ResultBody, QueryError>, Option<String>) {
        // A bug must cost one request, not the connection: answer ServerError.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || execute(&processor, keyspace, &request)));
        match outcome {
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
        }
    };

    let (result, keyspace) = if blocking {
        match tokio::task::spawn_blocking(work).await {
            Ok(r) => r,
            Err(e) => (Err(QueryError::Server(format!("request failed: {e}"))), None),
        }
    } else {
        work()
    };
    match result {
        Ok(body) => {
            if let ResultBody::SetKeyspace(_) = &body {
                *conn.keyspace.lock().unwrap_or_else(|p| p.into_inner()) = keyspace;
            }
            Response::Result(body)
        }
        Err(e) => Response::Error(error_body(e)),
    }
}

fn execute(processor: &Processor, keyspace: Option<String>, request: &Request) -> (Result<ResultBody, QueryError>, Option<String>) {
    let mut ks = keyspace;
    let result = match request {
        Request::Query { query, params } => processor.query(&mut ks, query, params),
        Request::Prepare { query } => processor.prepare(ks.as_deref(), query),
        Request::Execute { id, params } => processor.execute(&mut ks, id, params),
        Request::Batch(batch) => processor.batch(ks.as_deref(), batch),
        _ => Err(QueryError::Protocol("unexpected request".into())),
    };
    (result, ks)
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
        QueryError::Unavailable { consistency, required, alive } => ErrorKind::Unavailable { consistency, required, alive },
        QueryError::WriteTimeout { consistency, received, block_for, write_type } => ErrorKind::WriteTimeout {
            consistency,
            received,
            block_for,
            write_type: WriteType::from_name(&write_type).unwrap_or(WriteType::Simple),
        },
        QueryError::ReadTimeout { consistency, received, block_for, data_present } => {
            ErrorKind::ReadTimeout { consistency, received, block_for, data_present }
        }
        QueryError::Unprepared(id) => ErrorKind::Unprepared { id: Bytes::from(id) },
        QueryError::Overloaded(_) => ErrorKind::Overloaded,
        QueryError::Protocol(_) => ErrorKind::ProtocolError,
        QueryError::Server(_) => ErrorKind::ServerError,
    };
    ErrorBody::new(kind, message)
}
