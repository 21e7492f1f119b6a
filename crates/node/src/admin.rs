//! The admin API: what `nodetool` gets from JMX, as HTTP/1.1 + JSON on
//! `listen_address:admin_port` (default 7199, Cassandra's JMX port), spoken
//! by `shoal tool` and the `shoal cluster` launcher.
//!
//! Endpoints (all answer JSON; errors are `{"error": "..."}`):
//! `GET /v1/status[?keyspace=]`, `GET /v1/ring[?keyspace=]`,
//! `GET /v1/describecluster`, `GET /v1/getendpoints?keyspace=&table=&key=`,
//! `GET /v1/hints`, `GET /v1/info`, `GET /v1/compactionstats`, `POST /v1/flush[?keyspace=&table=]`,
//! `POST /v1/compact[?keyspace=&table=]`, `POST /v1/garbagecollect[?keyspace=&table=]` (the same purge
//! as compact: what gc_grace and the repaired horizon let go), `POST /v1/drain` (flushes every
//! memtable and stops serving CQL clients; the node stays up), `GET /v1/traceprobability`,
//! `POST /v1/traceprobability?value=`, `POST /v1/rebuild[?keyspace=&source_dc=]`
//! (answers when the streams are done), `POST /v1/repair[?keyspace=&table=...&pr=true&preview=true&full=true&validate=true]`
//! (answers when done), `POST /v1/cleanup[?keyspace=&table=...]`, `POST /v1/removenode?host_id=` (or `?action=status|force`),
//! `POST /v1/decommission`
//! (answers when the node has left), `POST /v1/bootstrap/resume` (resumes a failed bootstrap;
//! answers when the node joined), `GET /v1/netstats`, `GET /v1/repair_admin` (the repairs
//! run on this node, by an operator or the `auto_repair` schedule),
//! `POST /v1/snapshot[?tag=&keyspace=...&table=&skip_flush=true]`, `GET /v1/snapshots`,
//! `POST /v1/clearsnapshot?tag=|all=true[&keyspace=...]`,
//! `POST /v1/restore?tag=&keyspace=[&table=&consistency=]`, `POST /v1/load?dir=[&consistency=&create_schema=true]`
//! and `POST /v1/backup?dir=[&tag=&keyspace=...]` (answer when done; `snapshots`),
//! `GET /v1/incremental_backup`, `POST /v1/incremental_backup/enable|disable` (the
//! `incremental_backups` setting, until the node restarts), `GET /v1/compactionthroughput`,
//! `POST /v1/compactionthroughput?value=MIB` (until the node restarts).
//! `GET /dashboard` (and its assets and peer proxy, `dashboard`) is the live
//! dashboard: HTML, JavaScript and CSS, not JSON.
//!
//! Invariants:
//! - A hand-written, minimal server: one request per connection, always
//!   `Connection: close`; the request head is bounded (16 KiB, else 431), the
//!   body is bounded and ignored, the whole request must arrive within 10 s
//!   and the answer be taken within 30 s.
//! - No input panics the node: a malformed request line, header, query string
//!   or key answers 400 on its own connection and nothing else is affected.
//! - Reads take snapshots (`ViewHandle::snapshot`, `SchemaService::snapshot`)
//!   and hold no lock while answering; flush and compaction run on the
//!   blocking pool, never on the runtime's workers.
//! - Error wording follows what nodetool prints for the same mistake
//!   (`Unknown keyspace 'ks'`, `Keyspace [ks] does not exist.`, ...).

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use cluster::view::{ClusterView, Endpoint, Status, ViewHandle};
use cql::ast::Literal;
use cql::lexer::TokenKind;
use cql_server::bind::{literal_value, Receiver};
use cql_server::schema::{Schema, SchemaService};
use cql_server::system::{PARTITIONER, RELEASE_VERSION};
use serde_json::{json, Value as Json};
use storage::Storage;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use types::schema::{KeyspaceDef, TableDef};
use types::CqlType;
use uuid::Uuid;

/// Largest request head (request line and headers) accepted.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;
/// Largest request body read (and discarded); no endpoint takes a body.
const MAX_BODY_BYTES: usize = 64 * 1024;
/// The whole request must arrive within this time.
const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The answer must be taken within this time.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// Connections served at once; further ones wait in the accept backlog.
const MAX_CONNECTIONS: usize = 64;

/// What the admin API reads and acts on.
pub struct AdminState {
    /// Data-moving operations (rebuild) and the stream sessions' progress.
    pub lifecycle: Arc<crate::lifecycle::Lifecycle>,
    pub view: Arc<ViewHandle>,
    pub schema: Arc<SchemaService>,
    pub storage: Arc<Storage>,
    /// Pending hint bytes per target host id (`HintStore::pending_bytes`).
    pub pending_hints: Arc<dyn Fn() -> Vec<(Uuid, u64)> + Send + Sync>,
    /// The hint store's counters (stored, replayed, expired).
    pub hint_stats: Arc<dyn Fn() -> hints::HintStats + Send + Sync>,
    /// The configured snitch, fully qualified (describecluster).
    pub snitch: String,
    /// When the node started (info's uptime).
    pub started: Instant,
    /// The admin port, the same on every node: the dashboard's proxy reads peers on it.
    pub admin_port: u16,
    /// Told after a schema change made here (restore re-creating a table):
    /// the node gossips its new schema version at once.
    pub schema_changed: Arc<dyn Fn() + Send + Sync>,
    /// The node's request tracer (`settraceprobability`).
    pub tracer: Arc<trace::Tracer>,
    /// Turned true by `drain`: the CQL server stops accepting and closes its connections.
    pub native_stop: Arc<tokio::sync::watch::Sender<bool>>,
    /// Where `drain` stands: 0 not drained, 1 draining, 2 drained.
    pub drain_state: std::sync::atomic::AtomicU8,
}

/// Serves the admin API until `shutdown` turns true.
pub async fn serve(
    listener: TcpListener,
    kind: Listener,
    state: Arc<AdminState>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        if *shutdown.borrow() {
            return;
        }
        let permit = tokio::select! {
            p = Arc::clone(&slots).acquire_owned() => match p { Ok(p) => p, Err(_) => return },
            _ = shutdown.changed() => continue,
        };
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = shutdown.changed() => continue,
        };
        match accepted {
            Ok((stream, peer)) => {
                let state = Arc::clone(&state);
                tokio::spawn(async move {
                    if let Err(e) = handle_connection(stream, kind, &state).await {
                        tracing::debug!(%peer, "admin connection: {e}");
                    }
                    drop(permit);
                });
            }
            Err(e) => {
                // EMFILE and the like: back off instead of spinning.
                tracing::warn!("admin API: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

// ---------------------------------------------------------------- HTTP

/// A parsed request: method, decoded path and query parameters.
#[derive(Debug, PartialEq)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub query: Vec<(String, String)>,
}

impl Request {
    fn param(&self, name: &str) -> Option<&str> {
        self.query.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str()).filter(|v| !v.is_empty())
    }
}

/// An answer: HTTP status and JSON body, or a body of other bytes (`/metrics`, the dashboard).
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub body: Json,
    /// When set, sent instead of `body`: its content type and bytes.
    pub raw: Option<(&'static str, std::borrow::Cow<'static, [u8]>)>,
    /// A `Location` header (a redirect).
    pub location: Option<&'static str>,
}

impl Response {
    fn ok(body: Json) -> Response {
        Response { status: 200, body, raw: None, location: None }
    }

    pub(crate) fn error(status: u16, message: impl Into<String>) -> Response {
        Response { status, body: json!({ "error": message.into() }), raw: None, location: None }
    }

    fn bytes(status: u16, content_type: &'static str, bytes: impl Into<std::borrow::Cow<'static, [u8]>>) -> Response {
        Response { status, body: Json::Null, raw: Some((content_type, bytes.into())), location: None }
    }

    fn raw(content_type: &'static str, bytes: Vec<u8>) -> Response {
        Response::bytes(200, content_type, bytes)
    }
}

/// The Prometheus exposition format's content type.
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What a listener serves: the whole admin API, or only `/metrics` (the
/// `prometheus_port` listener).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listener {
    Admin,
    Metrics,
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        301 => "Moved Permanently",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Payload Too Large",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        _ => "Error",
    }
}

async fn handle_connection(mut stream: TcpStream, kind: Listener, state: &AdminState) -> std::io::Result<()> {
    let response = match tokio::time::timeout(READ_TIMEOUT, read_request(&mut stream)).await {
        Err(_) => Response::error(408, "request not received in time"),
        Ok(Err(ReadError::Io(e))) => return Err(e),
        Ok(Err(ReadError::Http(r))) => r,
        Ok(Ok(request)) if kind == Listener::Metrics && request.path.trim_end_matches('/') != "/metrics" => {
            Response::error(404, "this port serves /metrics only")
        }
        Ok(Ok(request)) => route(&request, state).await,
    };
    match tokio::time::timeout(WRITE_TIMEOUT, write_response(&mut stream, &response)).await {
        Ok(r) => r,
        Err(_) => Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "client did not read the answer")),
    }
}

async fn write_response(stream: &mut TcpStream, response: &Response) -> std::io::Result<()> {
    let (content_type, body) = match &response.raw {
        Some((content_type, bytes)) => (*content_type, std::borrow::Cow::Borrowed(bytes.as_ref())),
        None => {
            let mut body = serde_json::to_vec_pretty(&response.body).unwrap_or_else(|_| b"{}".to_vec());
            body.push(b'\n');
            ("application/json", std::borrow::Cow::Owned(body))
        }
    };
    let location = response.location.map(|l| format!("Location: {l}\r\n")).unwrap_or_default();
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{location}Cache-Control: no-store\r\nConnection: close\r\n\r\n",
        response.status,
        reason(response.status),
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(&body).await?;
    stream.flush().await?;
    let _ = stream.shutdown().await;
    Ok(())
}

enum ReadError {
    Io(std::io::Error),
    Http(Response),
}

async fn read_request(stream: &mut TcpStream) -> Result<Request, ReadError> {
    let mut buf = Vec::with_capacity(1024);
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i;
        }
        if buf.len() >= MAX_HEAD_BYTES {
            return Err(ReadError::Http(Response::error(
                431,
                format!("request head larger than {MAX_HEAD_BYTES} bytes"),
            )));
        }
        let mut chunk = [0u8; 4096];
        let want = (MAX_HEAD_BYTES + 4).saturating_sub(buf.len()) as u64;
        let n = (&mut *stream).take(want).read(&mut chunk).await.map_err(ReadError::Io)?;
        if n == 0 {
            if buf.is_empty() {
                return Err(ReadError::Io(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "closed before a request",
                )));
            }
            return Err(ReadError::Http(Response::error(400, "incomplete request head")));
        }
        buf.extend(chunk.iter().take(n));
    };
    if head_end > MAX_HEAD_BYTES {
        return Err(ReadError::Http(Response::error(431, format!("request head larger than {MAX_HEAD_BYTES} bytes"))));
    }
    let head = buf.get(..head_end).unwrap_or_default();
    let (request, content_length) = parse_head(head).map_err(|e| ReadError::Http(Response::error(400, e)))?;
    if content_length > MAX_BODY_BYTES {
        return Err(ReadError::Http(Response::error(413, format!("request body larger than {MAX_BODY_BYTES} bytes"))));
    }
    // Read (and drop) the body so the client sees a clean close.
    let mut have = buf.len().saturating_sub(head_end + 4);
    let mut chunk = [0u8; 4096];
    while have < content_length {
        let want = (content_length - have) as u64;
        let n = (&mut *stream).take(want).read(&mut chunk).await.map_err(ReadError::Io)?;
        if n == 0 {
            return Err(ReadError::Http(Response::error(400, "request body shorter than Content-Length")));
        }
        have += n;
    }
    Ok(request)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Parses a request head (without the final blank line): the request line
/// and headers. Returns the request and its Content-Length.
pub fn parse_head(head: &[u8]) -> Result<(Request, usize), String> {
    let text = std::str::from_utf8(head).map_err(|_| "request head is not UTF-8".to_string())?;
    let mut lines = text.split("\r\n");
    let line = lines.next().unwrap_or_default();
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(format!("malformed request line '{}'", truncate(line)));
    };
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(format!("malformed method '{}'", truncate(method)));
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(format!("unsupported protocol version '{}'", truncate(version)));
    }
    if !target.starts_with('/') {
        return Err(format!("request target must be a path, got '{}'", truncate(target)));
    }
    let mut content_length = 0usize;
    for header in lines {
        let Some((name, value)) = header.split_once(':') else {
            return Err(format!("malformed header line '{}'", truncate(header)));
        };
        if name.is_empty() || name.bytes().any(|b| b.is_ascii_whitespace() || b.is_ascii_control()) {
            return Err(format!("malformed header name '{}'", truncate(name)));
        }
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            content_length = value.parse().map_err(|_| format!("invalid Content-Length '{}'", truncate(value)))?;
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            return Err("Transfer-Encoding is not supported (no endpoint takes a body)".to_string());
        }
    }
    let (raw_path, raw_query) = target.split_once('?').unwrap_or((target, ""));
    let path = percent_decode(raw_path, false)
        .ok_or_else(|| format!("invalid percent-encoding in path '{}'", truncate(raw_path)))?;
    let mut query = Vec::new();
    for pair in raw_query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let k =
            percent_decode(k, true).ok_or_else(|| format!("invalid percent-encoding in query '{}'", truncate(pair)))?;
        let v =
            percent_decode(v, true).ok_or_else(|| format!("invalid percent-encoding in query '{}'", truncate(pair)))?;
        query.push((k, v));
    }
    Ok((Request { method: method.to_string(), path, query }, content_length))
}

fn truncate(s: &str) -> String {
    if s.chars().count() <= 80 {
        return s.to_string();
    }
    let mut out: String = s.chars().take(80).collect();
    out.push_str("...");
    out
}

/// Decodes `%XX` escapes (and, in a query, `+` as a space); None when an
/// escape is malformed or the result is not UTF-8.
pub fn percent_decode(s: &str, plus_is_space: bool) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'%' => {
                let hi = (*bytes.get(i + 1)? as char).to_digit(16)?;
                let lo = (*bytes.get(i + 2)? as char).to_digit(16)?;
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

// ---------------------------------------------------------------- routes

async fn route(request: &Request, state: &AdminState) -> Response {
    if request.path == "/dashboard" || request.path.starts_with("/dashboard/") {
        return dashboard_route(request, state).await;
    }
    let path = request.path.trim_end_matches('/');
    let method = match path {
        "/v1/flush"
        | "/v1/compact"
        | "/v1/garbagecollect"
        | "/v1/drain"
        | "/v1/rebuild"
        | "/v1/repair"
        | "/v1/bootstrap/resume"
        | "/v1/cleanup"
        | "/v1/decommission"
        | "/v1/snapshot"
        | "/v1/clearsnapshot"
        | "/v1/restore"
        | "/v1/load"
        | "/v1/backup"
        | "/v1/incremental_backup/enable"
        | "/v1/incremental_backup/disable"
        | "/v1/removenode" => "POST",
        "/v1/status"
        | "/v1/ring"
        | "/v1/describecluster"
        | "/v1/getendpoints"
        | "/v1/hints"
        | "/v1/info"
        | "/v1/netstats"
        | "/v1/compactionstats"
        | "/v1/repair_admin"
        | "/v1/traceprobability"
        | "/v1/compactionthroughput"
        | "/v1/proxyhistograms"
        | "/v1/tablehistograms"
        | "/v1/tablestats"
        | "/v1/tpstats"
        | "/v1/gossipinfo"
        | "/metrics"
        | "/v1/snapshots"
        | "/v1/incremental_backup" => "GET",
        _ => return Response::error(404, format!("no such endpoint: {}", truncate(&request.path))),
    };
    // The endpoints with both: reading and setting the trace probability and the compaction throughput.
    let settable = matches!(path, "/v1/traceprobability" | "/v1/compactionthroughput");
    let method = if settable && request.method == "POST" { "POST" } else { method };
    if request.method != method {
        return Response::error(405, format!("{path} takes {method}, not {}", request.method));
    }
    let result = match path {
        "/v1/status" => status(request, state),
        "/v1/ring" => ring(request, state),
        "/v1/describecluster" => Ok(describecluster(state)),
        "/v1/getendpoints" => getendpoints(request, state),
        "/v1/hints" => Ok(hints(state)),
        "/v1/info" => Ok(info(state)),
        "/v1/netstats" => Ok(netstats(state)),
        "/v1/compactionstats" => Ok(compactionstats(state)),
        "/v1/repair_admin" => Ok(state.lifecycle.repair_history()),
        "/metrics" => {
            return Response::raw(PROMETHEUS_TEXT, crate::exporter::prometheus(state).into_bytes());
        }
        "/v1/proxyhistograms" => Ok(crate::exporter::proxyhistograms()),
        "/v1/tpstats" => Ok(crate::exporter::tpstats()),
        "/v1/gossipinfo" => Ok(gossipinfo(state)),
        "/v1/tablestats" => tablestats(request, state),
        "/v1/tablehistograms" => tablehistograms(request, state),
        "/v1/traceprobability" => traceprobability(request, state),
        "/v1/compactionthroughput" => compactionthroughput(request, state),
        "/v1/drain" => drain(state).await,
        "/v1/rebuild" => rebuild(request, state).await,
        "/v1/repair" => repair(request, state).await,
        "/v1/bootstrap/resume" => state.lifecycle.resume_bootstrap().await.map_err(|e| Response::error(500, e)),
        "/v1/cleanup" => cleanup(request, state).await,
        "/v1/snapshot" => crate::snapshots::snapshot(request, state).await,
        "/v1/snapshots" => crate::snapshots::list(state).await,
        "/v1/clearsnapshot" => crate::snapshots::clear(request, state).await,
        "/v1/restore" => crate::snapshots::restore(request, state).await,
        "/v1/load" => crate::snapshots::load(request, state).await,
        "/v1/backup" => crate::snapshots::backup(request, state).await,
        "/v1/incremental_backup" => Ok(json!({ "enabled": state.storage.incremental_backups() })),
        "/v1/incremental_backup/enable" | "/v1/incremental_backup/disable" => {
            state.storage.set_incremental_backups(path.ends_with("enable"));
            Ok(json!({ "enabled": state.storage.incremental_backups() }))
        }
        "/v1/decommission" => state.lifecycle.decommission(&state.storage).await.map_err(|e| Response::error(500, e)),
        "/v1/removenode" => match (request.param("action"), request.param("host_id").map(str::parse::<Uuid>)) {
            (Some("status"), _) => Ok(state.lifecycle.removal_status()),
            (Some("force"), _) => {
                state.lifecycle.force_removal(&state.storage).await.map_err(|e| Response::error(500, e))
            }
            (Some(other), _) => Err(Response::error(400, format!("removenode: unknown action {}", truncate(other)))),
            (None, Some(Ok(id))) => {
                state.lifecycle.removenode(id, &state.storage).await.map_err(|e| Response::error(500, e))
            }
            (None, Some(Err(_))) => Err(Response::error(400, "host_id is not a UUID".to_string())),
            (None, None) => Err(Response::error(400, "removenode needs host_id (or action=status|force)".to_string())),
        },
        "/v1/compact" => maintenance(request, state, Maintenance::Compact).await,
        "/v1/garbagecollect" => maintenance(request, state, Maintenance::Garbagecollect).await,
        _ => maintenance(request, state, Maintenance::Flush).await,
    };
    match result {
        Ok(body) => Response::ok(body),
        Err(r) => r,
    }
}

type Answer = Result<Json, Response>;

/// `GET /dashboard`, `/dashboard/<asset>` and `/dashboard/peer/<address>/v1/<endpoint>` (module `dashboard`).
async fn dashboard_route(request: &Request, state: &AdminState) -> Response {
    if request.method != "GET" {
        return Response::error(405, format!("{} takes GET, not {}", truncate(&request.path), request.method));
    }
    let rest = request.path.strip_prefix("/dashboard").unwrap_or_default();
    if rest.is_empty() {
        return Response::bytes(200, "text/html; charset=utf-8", crate::dashboard::INDEX_HTML);
    }
    if rest == "/" {
        // The page's relative links assume `/dashboard` (it may sit behind a proxy's prefix).
        let mut r = Response::error(301, "the dashboard is at ../dashboard");
        r.location = Some("../dashboard");
        return r;
    }
    if let Some(peer) = rest.strip_prefix("/peer/") {
        return peer_proxy(peer, state).await;
    }
    match crate::dashboard::asset(rest.trim_start_matches('/')) {
        Some((content_type, bytes)) => Response::bytes(200, content_type, bytes),
        None => Response::error(404, format!("no such endpoint: {}", truncate(&request.path))),
    }
}

/// The dashboard's read of another node's admin API (`dashboard::get`): only ring members,
/// only the read-only endpoints.
async fn peer_proxy(rest: &str, state: &AdminState) -> Response {
    let peer = match crate::dashboard::parse_peer_path(rest) {
        Ok(p) => p,
        Err(e) => return Response::error(400, e),
    };
    let member =
        state.view.snapshot().endpoints.values().any(|e| e.status != Status::Left && e.address() == peer.address);
    if !member {
        return Response::error(404, format!("{} is not a node of this cluster", peer.address));
    }
    match crate::dashboard::get(SocketAddr::new(peer.address, state.admin_port), peer.endpoint).await {
        Ok(answer) => Response::bytes(answer.status, "application/json", answer.body),
        Err(e) => Response::error(502, format!("node {} did not answer: {e}", peer.address)),
    }
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// Bytes of user data this node stores (SSTables and memtables of the
/// user tables): the Load that status and info show for the local node.
pub fn local_load(schema: &Schema, storage: &Storage) -> u64 {
    stored_tables(schema).map(|t| storage.table_size_bytes(&t.id)).sum()
}

fn load_of(e: &Endpoint, view: &ClusterView, local_load: u64) -> u64 {
    if e.host_id == view.local {
        local_load
    } else {
        e.load_bytes
    }
}

/// Ownership per host: effective under `ks`'s replication when given, else primary.
fn ownership(view: &ClusterView, ks: Option<&KeyspaceDef>) -> BTreeMap<Uuid, f64> {
    let owns = match ks {
        Some(ks) => ring::effective_ownership(&view.ring, &cluster::view::strategy(&ks.replication)),
        None => ring::primary_ownership(&view.ring),
    };
    owns.into_iter().map(|(h, f)| (cluster::view::uuid(h), f)).collect()
}

fn keyspace_for_ownership(request: &Request, schema: &Schema) -> Result<Option<Arc<KeyspaceDef>>, Response> {
    match request.param("keyspace") {
        None => Ok(None),
        Some(name) => match schema.keyspace(name) {
            Some(ks) => Ok(Some(Arc::clone(ks))),
            // nodetool status: StorageService.effectiveOwnership's wording.
            None => Err(Response::error(404, format!("The keyspace {name}, does not exist"))),
        },
    }
}

fn status(request: &Request, state: &AdminState) -> Answer {
    let view = state.view.snapshot();
    let schema = state.schema.snapshot();
    let ks = keyspace_for_ownership(request, &schema)?;
    let owns = ownership(&view, ks.as_deref());
    let load = local_load(&schema, &state.storage);
    let mut dcs: BTreeMap<&str, Vec<&Endpoint>> = BTreeMap::new();
    for e in view.endpoints.values().filter(|e| e.status != Status::Left) {
        dcs.entry(e.dc.as_str()).or_default().push(e);
    }
    let datacenters: Vec<Json> = dcs
        .into_iter()
        .map(|(dc, mut nodes)| {
            nodes.sort_by_key(|e| (e.address(), e.host_id));
            let nodes: Vec<Json> = nodes
                .iter()
                .map(|e| {
                    json!({
                        "state": e.state(),
                        "status": e.status.as_str(),
                        "alive": e.alive,
                        "address": e.address().to_string(),
                        "load_bytes": load_of(e, &view, load),
                        "tokens": e.tokens.len(),
                        "owns": owns.get(&e.host_id),
                        "host_id": e.host_id.to_string(),
                        "rack": e.rack,
                        "native_address": SocketAddr::new(e.rpc_address, e.native_port).to_string(),
                    })
                })
                .collect();
            json!({ "name": dc, "nodes": nodes })
        })
        .collect();
    Ok(json!({
        "cluster_name": view.cluster_name,
        "local_host_id": view.local.to_string(),
        "keyspace": ks.as_ref().map(|k| k.name.clone()),
        "owns_effective": ks.is_some(),
        "datacenters": datacenters,
    }))
}

fn ring(request: &Request, state: &AdminState) -> Answer {
    let view = state.view.snapshot();
    let schema = state.schema.snapshot();
    let ks = keyspace_for_ownership(request, &schema)?;
    let owns = ownership(&view, ks.as_deref());
    let load = local_load(&schema, &state.storage);
    let mut tokens: Vec<(i64, &Endpoint)> = Vec::new();
    for e in view.endpoints.values().filter(|e| e.status != Status::Left) {
        tokens.extend(e.tokens.iter().map(|t| (*t, e)));
    }
    tokens.sort_by_key(|(t, e)| (*t, e.host_id));
    let entries: Vec<Json> = tokens
        .iter()
        .map(|(t, e)| {
            json!({
                "address": e.address().to_string(),
                "dc": e.dc,
                "rack": e.rack,
                "status": if e.alive { "Up" } else { "Down" },
                "state": state_word(e.status),
                "load_bytes": load_of(e, &view, load),
                "owns": owns.get(&e.host_id),
                "token": t.to_string(),
                "host_id": e.host_id.to_string(),
            })
        })
        .collect();
    Ok(json!({
        "keyspace": ks.as_ref().map(|k| k.name.clone()),
        "owns_effective": ks.is_some(),
        "ring": entries,
    }))
}

/// nodetool ring's State column.
fn state_word(status: Status) -> &'static str {
    match status {
        Status::Joining => "Joining",
        Status::Leaving | Status::Left => "Leaving",
        Status::Normal | Status::Shutdown => "Normal",
    }
}

/// `nodetool gossipinfo`: what this node holds of every endpoint's gossiped
/// state (this node's own load and schema are its current ones).
fn gossipinfo(state: &AdminState) -> Json {
    let view = state.view.snapshot();
    let local_load = local_load(&state.schema.snapshot(), &state.storage);
    let endpoints: Vec<Json> = view
        .endpoints
        .values()
        .map(|e| {
            let schema = if e.host_id == view.local { Some(state.schema.snapshot().version) } else { e.schema_version };
            json!({
                "address": e.address().to_string(),
                "port": e.internode.port(),
                "generation": e.generation,
                "alive": e.alive,
                "status": e.status.as_str(),
                "load": load_of(e, &view, local_load),
                "schema": schema.map(|s| s.to_string()),
                "dc": e.dc,
                "rack": e.rack,
                "release_version": e.release_version,
                "rpc_address": e.rpc_address.to_string(),
                "native_port": e.native_port,
                "host_id": e.host_id.to_string(),
                "tokens": e.tokens.len(),
            })
        })
        .collect();
    json!({ "endpoints": endpoints })
}

fn describecluster(state: &AdminState) -> Json {
    let view = state.view.snapshot();
    let schema = state.schema.snapshot();
    // This node's own version is its schema service's, which may be newer
    // than what the view last heard.
    let local_address = view.local().map(|e| e.address());
    let mut versions: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (version, addrs) in view.schema_versions() {
        let addrs: Vec<String> =
            addrs.into_iter().filter(|a| Some(*a) != local_address).map(|a| a.to_string()).collect();
        if !addrs.is_empty() {
            versions.insert(version, addrs);
        }
    }
    if let Some(a) = local_address {
        versions.entry(schema.version.to_string()).or_default().push(a.to_string());
    }
    for addrs in versions.values_mut() {
        addrs.sort_by_key(|a| a.parse::<IpAddr>().ok());
    }
    let present: Vec<&Endpoint> = view.endpoints.values().filter(|e| e.status != Status::Left).collect();
    let count = |f: &dyn Fn(&Endpoint) -> bool| present.iter().filter(|e| f(e)).count();
    let mut dcs: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for e in &present {
        let entry = dcs.entry(e.dc.as_str()).or_default();
        entry.0 += 1;
        if !e.alive {
            entry.1 += 1;
        }
    }
    let mut releases: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for e in &present {
        releases.entry(e.release_version.as_str()).or_default().push(e.address().to_string());
    }
    let keyspaces: BTreeMap<&str, BTreeMap<String, String>> =
        schema.keyspaces.values().map(|k| (k.name.as_str(), k.replication.to_map())).collect();
    json!({
        "name": view.cluster_name,
        "snitch": state.snitch,
        "dynamic_endpoint_snitch": "enabled",
        "partitioner": PARTITIONER,
        "schema_versions": versions,
        "stats": {
            "live": count(&|e| e.alive),
            "joining": count(&|e| e.status == Status::Joining),
            "moving": 0,
            "leaving": count(&|e| e.status == Status::Leaving),
            "unreachable": count(&|e| !e.alive),
        },
        "datacenters": dcs.into_iter().map(|(dc, (n, down))| (dc, json!({"nodes": n, "down": down}))).collect::<BTreeMap<_, _>>(),
        "database_versions": releases,
        "keyspaces": keyspaces,
    })
}

fn getendpoints(request: &Request, state: &AdminState) -> Answer {
    let (Some(ks_name), Some(table_name), Some(key)) = (
        request.param("keyspace"),
        request.param("table"),
        request.query.iter().find(|(k, _)| k == "key").map(|(_, v)| v),
    ) else {
        return Err(Response::error(400, "getendpoints needs the parameters keyspace, table and key"));
    };
    let schema = state.schema.snapshot();
    // StorageService.getNaturalEndpoints' wording.
    let ks = schema.keyspace(ks_name).ok_or_else(|| Response::error(404, format!("Unknown keyspace '{ks_name}'")))?;
    let table = ks
        .tables
        .get(table_name)
        .ok_or_else(|| Response::error(404, format!("Unknown table '{table_name}' in keyspace '{ks_name}'")))?;
    let partition_key = partition_key_bytes(table, key).map_err(|e| Response::error(400, e))?;
    let token = ring::token_of(&partition_key);
    let view = state.view.snapshot();
    let endpoints: Vec<String> = view
        .replicas(ks, token)
        .into_iter()
        .filter_map(|id| view.endpoint(id).map(|e| e.address().to_string()))
        .collect();
    Ok(json!({
        "keyspace": ks.name,
        "table": table.name,
        "key": key,
        "token": token.to_string(),
        "endpoints": endpoints,
    }))
}

/// The serialized partition key for nodetool's key syntax: a single column's
/// value as text (an int `42`, text `abc` unquoted, a uuid, a blob in hex
/// with or without `0x`); compound keys as `a:b` with `\:` for a literal
/// colon. Values are converted by the same rules as CQL literals.
pub fn partition_key_bytes(table: &TableDef, key: &str) -> Result<Vec<u8>, String> {
    let columns: Vec<_> = table.partition_key().collect();
    let parts = if columns.len() == 1 { vec![key.to_string()] } else { split_components(key) };
    if parts.len() != columns.len() {
        let names: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
        return Err(format!(
            "the partition key of {}.{} has {} components ({}), separated by ':'; got {}",
            table.keyspace,
            table.name,
            columns.len(),
            names.join(", "),
            parts.len()
        ));
    }
    let mut components = Vec::with_capacity(parts.len());
    for (col, text) in columns.iter().zip(&parts) {
        let literal = key_literal(&col.ty, text).ok_or_else(|| {
            format!("Invalid value '{}' for \"{}\" of type {}", truncate(text), col.name, col.ty.to_cql())
        })?;
        let value = literal_value(&literal, &Receiver { name: &col.name, ty: &col.ty }).map_err(|e| e.to_string())?;
        let value = value.ok_or_else(|| format!("Invalid null value for partition key part {}", col.name))?;
        components.push(Bytes::from(value.to_bytes()));
    }
    cql_server::common::compose_partition_key(&components).map(|b| b.to_vec()).map_err(|e| e.to_string())
}

/// Splits `a:b:c` on unescaped colons (CompositeType.fromString); `\:` is a colon.
fn split_components(key: &str) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut chars = key.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&':') => {
                chars.next();
                if let Some(p) = parts.last_mut() {
                    p.push(':');
                }
            }
            ':' => parts.push(String::new()),
            c => {
                if let Some(p) = parts.last_mut() {
                    p.push(c);
                }
            }
        }
    }
    parts
}

/// One key component's text as the CQL literal nodetool's `fromString` would
/// read: string-like types take the text as it is; everything else is lexed
/// as one CQL constant.
fn key_literal(ty: &CqlType, text: &str) -> Option<Literal> {
    match ty {
        CqlType::Text | CqlType::Ascii | CqlType::Inet | CqlType::Date | CqlType::Time | CqlType::Duration => {
            return Some(Literal::String(text.to_string()))
        }
        CqlType::Timestamp => {
            let digits = text.strip_prefix('-').unwrap_or(text);
            if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                return Some(Literal::Integer(text.to_string()));
            }
            return Some(Literal::String(text.to_string()));
        }
        CqlType::Blob => {
            let digits = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")).unwrap_or(text);
            return decode_hex(digits).map(Literal::Hex);
        }
        _ => {}
    }
    let tokens = cql::lexer::tokenize(text.trim()).ok()?;
    let [token, eof] = tokens.as_slice() else { return None };
    if eof.kind != TokenKind::Eof {
        return None;
    }
    Some(match &token.kind {
        TokenKind::Integer(s) => Literal::Integer(s.clone()),
        TokenKind::Float(s) => Literal::Float(s.clone()),
        TokenKind::Boolean(b) => Literal::Boolean(*b),
        TokenKind::Uuid(s) => Literal::Uuid(s.parse().ok()?),
        TokenKind::Str(s) => Literal::String(s.clone()),
        TokenKind::Duration(s) => Literal::Duration(s.clone()),
        TokenKind::Hex(d) => Literal::Hex(decode_hex(d)?),
        TokenKind::Word(w) if w == "nan" => Literal::Float("NaN".to_string()),
        TokenKind::Word(w) if w == "infinity" => Literal::Float("Infinity".to_string()),
        _ => return None,
    })
}

/// Hex digits to bytes; None for an odd count or a non-hex digit.
fn decode_hex(digits: &str) -> Option<Vec<u8>> {
    digits
        .as_bytes()
        .chunks(2)
        .map(|pair| {
            let [hi, lo] = pair else { return None };
            let hi = (*hi as char).to_digit(16)?;
            let lo = (*lo as char).to_digit(16)?;
            Some((hi * 16 + lo) as u8)
        })
        .collect()
}

fn hints(state: &AdminState) -> Json {
    let view = state.view.snapshot();
    let mut pending = (state.pending_hints)();
    pending.sort();
    let total: u64 = pending.iter().map(|(_, b)| b).sum();
    let targets: Vec<Json> = pending
        .iter()
        .filter(|(_, bytes)| *bytes > 0)
        .map(|(id, bytes)| {
            let e = view.endpoint(*id);
            json!({
                "host_id": id.to_string(),
                "address": e.map(|e| e.address().to_string()),
                "dc": e.map(|e| e.dc.clone()),
                "rack": e.map(|e| e.rack.clone()),
                "status": e.map(|e| if e.alive { "UP" } else { "DOWN" }),
                "pending_bytes": bytes,
            })
        })
        .collect();
    json!({ "hints": targets, "total_bytes": total })
}

fn info(state: &AdminState) -> Json {
    let view = state.view.snapshot();
    let schema = state.schema.snapshot();
    let load = local_load(&schema, &state.storage);
    let local = view.local();
    let address: Option<IpAddr> = local.map(|e| e.address());
    json!({
        "host_id": view.local.to_string(),
        "cluster_name": view.cluster_name,
        "address": address.map(|a| a.to_string()),
        "native_address": local.map(|e| SocketAddr::new(e.rpc_address, e.native_port).to_string()),
        "status": local.map(|e| e.status.as_str()),
        "generation": local.map(|e| e.generation),
        "uptime_seconds": state.started.elapsed().as_secs(),
        "load_bytes": load,
        "data_center": local.map(|e| e.dc.clone()),
        "rack": local.map(|e| e.rack.clone()),
        "tokens": local.map(|e| e.tokens.iter().map(|t| t.to_string()).collect::<Vec<_>>()).unwrap_or_default(),
        "schema_version": schema.version.to_string(),
        "release_version": RELEASE_VERSION,
        "pid": std::process::id(),
        "now": unix_now(),
        "bootstrap": bootstrap_state(state),
    })
}

/// Where this node's bootstrap stands: `{state, error}` (`IN_PROGRESS`,
/// `FAILED` with the error, `COMPLETED`).
fn bootstrap_state(state: &AdminState) -> Json {
    let now = state.lifecycle.bootstrap_state();
    let error = match &now {
        crate::lifecycle::BootstrapState::Failed(e) => Some(e.clone()),
        _ => None,
    };
    json!({ "state": now.name(), "error": error })
}

/// What `maintenance` does to each table.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Maintenance {
    Flush,
    /// A major compaction: merges everything and purges.
    Compact,
    /// nodetool garbagecollect: purges what can be purged now. Storage's
    /// purge is the major compaction's two passes (`Storage::compact`), the
    /// only safe way to drop deletion markers (storage's `filter`).
    Garbagecollect,
}

/// `POST /v1/flush`, `/v1/compact` and `/v1/garbagecollect`: every table, one keyspace's, or one table.
async fn maintenance(request: &Request, state: &AdminState, what: Maintenance) -> Answer {
    let operation = match what {
        Maintenance::Flush => "flush",
        Maintenance::Compact => "compact",
        Maintenance::Garbagecollect => "garbagecollect",
    };
    let compact = what != Maintenance::Flush;
    let schema = state.schema.snapshot();
    let keyspace = request.param("keyspace");
    let table = request.param("table");
    // (Some(ids) = these tables; None = all tables of the node.)
    let (ids, names): (Option<Vec<Uuid>>, Vec<String>) = match (keyspace, table) {
        (None, Some(_)) => return Err(Response::error(400, "a table needs its keyspace")),
        (None, None) => {
            let names = stored_tables(&schema).map(|t| format!("{}.{}", t.keyspace, t.name)).collect();
            (None, names)
        }
        (Some(ks_name), table) => {
            // NodeProbe / StorageService wording for unknown names.
            let ks = schema
                .keyspace(ks_name)
                .ok_or_else(|| Response::error(404, format!("Keyspace [{ks_name}] does not exist.")))?;
            let tables: Vec<&TableDef> = match table {
                Some(t) => vec![ks
                    .tables
                    .get(t)
                    .ok_or_else(|| Response::error(404, format!("Unknown keyspace/cf pair ({ks_name}.{t})")))?],
                None => ks.tables.values().collect(),
            };
            // The system keyspaces are virtual: nothing stored to flush.
            let stored: Vec<&TableDef> = if Schema::is_local(&ks.name) { Vec::new() } else { tables };
            (
                Some(stored.iter().map(|t| t.id).collect()),
                stored.iter().map(|t| format!("{}.{}", t.keyspace, t.name)).collect(),
            )
        }
    };
    let storage = Arc::clone(&state.storage);
    let started = Instant::now();
    let result = tokio::task::spawn_blocking(move || -> Result<(), storage::StorageError> {
        match ids {
            None => {
                if compact {
                    storage.compact(None)
                } else {
                    storage.flush(None)
                }
            }
            Some(ids) => {
                for id in &ids {
                    if compact {
                        storage.compact(Some(id))?;
                    } else {
                        storage.flush(Some(id))?;
                    }
                }
                Ok(())
            }
        }
    })
    .await;
    match result {
        Ok(Ok(())) => Ok(json!({
            "operation": operation,
            "keyspace": keyspace,
            "table": table,
            "tables": names,
            "millis": started.elapsed().as_millis() as u64,
        })),
        Ok(Err(e)) => Err(Response::error(500, format!("{operation} failed: {e}"))),
        Err(e) => Err(Response::error(500, format!("{operation} failed: {e}"))),
    }
}

/// `GET /v1/traceprobability`: `{probability}`; `POST ?value=P` sets it
/// (nodetool settraceprobability's check and wording).
fn traceprobability(request: &Request, state: &AdminState) -> Answer {
    if request.method == "POST" {
        let value = request.param("value").ok_or_else(|| Response::error(400, "settraceprobability needs value"))?;
        let p = value
            .trim()
            .parse::<f64>()
            .map_err(|_| Response::error(400, format!("Trace probability must be a number: {}", truncate(value))))?;
        if !(0.0..=1.0).contains(&p) {
            return Err(Response::error(400, "Trace probability must be between 0 and 1"));
        }
        state.tracer.set_probability(p);
    }
    Ok(json!({ "probability": state.tracer.probability() }))
}

/// `GET /v1/compactionthroughput`: `{mib_per_second, bytes_per_second}`
/// (0: unthrottled); `POST ?value=MIB` sets it (nodetool
/// setcompactionthroughput: MiB/s, a whole number, 0 to disable throttling).
fn compactionthroughput(request: &Request, state: &AdminState) -> Answer {
    if request.method == "POST" {
        let value =
            request.param("value").ok_or_else(|| Response::error(400, "setcompactionthroughput needs value"))?;
        let mib = value.trim().parse::<u64>().map_err(|_| {
            Response::error(400, format!("compaction_throughput must be a whole number of MiB/s: {}", truncate(value)))
        })?;
        let bytes = mib
            .checked_mul(1 << 20)
            .ok_or_else(|| Response::error(400, format!("compaction_throughput is too large: {mib} MiB/s")))?;
        state.storage.set_compaction_throughput(bytes);
    }
    let bytes = state.storage.compaction_throughput();
    Ok(json!({ "bytes_per_second": bytes, "mib_per_second": bytes as f64 / (1u64 << 20) as f64 }))
}

/// `POST /v1/drain`, as Cassandra's drain: stops the CQL server (no new
/// connections; open ones are closed), announces a shutdown to the peers
/// (they mark this node down and hint its writes instead of sending them;
/// it keeps gossiping so that a restart is all it takes to come back), then
/// flushes every memtable on the blocking pool. The node stays up, serving
/// no clients, until it is stopped. A second drain flushes again and
/// answers the same.
async fn drain(state: &AdminState) -> Answer {
    use std::sync::atomic::Ordering;
    let _ = state.drain_state.compare_exchange(0, 1, Ordering::SeqCst, Ordering::SeqCst);
    state.native_stop.send_replace(true);
    state.lifecycle.gossip.announce_shutdown().await;
    let storage = Arc::clone(&state.storage);
    let started = Instant::now();
    match tokio::task::spawn_blocking(move || storage.flush(None)).await {
        Ok(Ok(())) => {
            state.drain_state.store(2, Ordering::SeqCst);
            Ok(json!({ "operation": "drain", "mode": "DRAINED", "millis": started.elapsed().as_millis() as u64 }))
        }
        Ok(Err(e)) => Err(Response::error(500, format!("drain failed: {e}"))),
        Err(e) => Err(Response::error(500, format!("drain failed: {e}"))),
    }
}

/// The node's operation mode as nodetool netstats and info print it.
fn mode(state: &AdminState, streaming: bool) -> &'static str {
    match state.drain_state.load(std::sync::atomic::Ordering::SeqCst) {
        2 => "DRAINED",
        1 => "DRAINING",
        _ if streaming => "STREAMING",
        _ => "NORMAL",
    }
}

/// `nodetool compactionstats`: the background work owed and running
/// (`storage::Storage::compaction_stats`): pending tasks, RocksDB's running
/// compactions and flushes, and per table what it owes.
fn compactionstats(state: &AdminState) -> Json {
    let stats = state.storage.compaction_stats();
    let tables: Vec<Json> = stats
        .tables
        .iter()
        .map(|t| {
            json!({
                "keyspace": t.keyspace,
                "table": t.table,
                "compaction_pending": t.compaction_pending,
                "pending_compaction_bytes": t.pending_compaction_bytes,
                "mem_table_flush_pending": t.mem_table_flush_pending,
                "frozen_memtables": t.frozen_memtables,
                "frozen_bytes": t.frozen_bytes,
                "tombstone_markers": t.tombstone_markers,
                "droppable_tombstones": t.droppable_tombstones,
                "tombstone_compactions": t.tombstone_compactions,
                "last_tombstone_compaction": t.last_tombstone_compaction,
            })
        })
        .collect();
    json!({
        "pending_tasks": stats.pending_tasks(),
        "running_compactions": stats.running_compactions,
        "running_flushes": stats.running_flushes,
        "major_compaction": stats.major_compaction,
        "tombstone_compaction": stats.tombstone_compaction,
        "idle": stats.idle(),
        "tables": tables,
    })
}

/// `nodetool tablestats [KS[.TABLE]]`: `keyspace` and `table` filter; an
/// unknown keyspace or table is nodetool's error.
fn tablestats(request: &Request, state: &AdminState) -> Answer {
    let schema = state.schema.snapshot();
    let (keyspace, table) = (request.param("keyspace"), request.param("table"));
    if let Some(ks) = keyspace {
        let Some(def) = schema.keyspace(ks) else {
            return Err(Response::error(400, format!("Unknown keyspace: {}", truncate(ks))));
        };
        if let Some(t) = table.filter(|t| !def.tables.contains_key(*t)) {
            return Err(Response::error(
                400,
                format!("Unknown table '{}' in keyspace '{}'", truncate(t), truncate(ks)),
            ));
        }
    }
    Ok(crate::exporter::tablestats(state, keyspace, table))
}

/// `nodetool tablehistograms KS TABLE`.
fn tablehistograms(request: &Request, state: &AdminState) -> Answer {
    let (Some(ks), Some(t)) = (request.param("keyspace"), request.param("table")) else {
        return Err(Response::error(400, "tablehistograms needs keyspace and table".to_string()));
    };
    crate::exporter::tablehistograms(state, ks, t)
        .ok_or_else(|| Response::error(400, format!("Table {}.{} does not exist", truncate(ks), truncate(t))))
}

/// `nodetool netstats`: every stream session, running and recently finished.
fn netstats(state: &AdminState) -> Json {
    let sessions = state.lifecycle.registry.list();
    let running = sessions.iter().filter(|s| s.state == "running").count();
    json!({
        "mode": mode(state, running > 0),
        "sessions": sessions,
    })
}

/// `nodetool rebuild [-ks KEYSPACE] [SOURCE_DC]`: streams this node's ranges
/// from the other replicas; answers when done.
async fn rebuild(request: &Request, state: &AdminState) -> Answer {
    let keyspace = request.param("keyspace");
    let source_dc = request.param("source_dc");
    state.lifecycle.rebuild(keyspace, source_dc).await.map_err(|e| Response::error(500, e))
}

/// `nodetool repair [KEYSPACE [TABLE...]] [-pr] [--preview] [--full | --validate]`: answers when
/// done. Tables come as `table=a&table=b`; `pr`, `preview`, `full` and `validate` as `true`.
async fn repair(request: &Request, state: &AdminState) -> Answer {
    use crate::lifecycle::RepairMode;
    let keyspace = request.param("keyspace");
    let tables: Vec<String> =
        request.query.iter().filter(|(k, v)| k == "table" && !v.is_empty()).map(|(_, v)| v.clone()).collect();
    let flag = |name: &str| request.param(name) == Some("true");
    let mode = match (flag("full"), flag("validate")) {
        (true, true) => return Err(Response::error(400, "--full and --validate cannot be combined")),
        (true, false) => RepairMode::Full,
        (false, true) => RepairMode::Validate,
        (false, false) => RepairMode::Incremental,
    };
    state
        .lifecycle
        .repair(keyspace, &tables, flag("pr"), flag("preview"), mode, crate::lifecycle::RepairTrigger::Operator)
        .await
        .map_err(|e| Response::error(500, e))
}

/// `nodetool cleanup [KEYSPACE [TABLE...]]`: answers when done.
async fn cleanup(request: &Request, state: &AdminState) -> Answer {
    let tables: Vec<String> =
        request.query.iter().filter(|(k, v)| k == "table" && !v.is_empty()).map(|(_, v)| v.clone()).collect();
    state.lifecycle.cleanup(request.param("keyspace"), &tables).await.map_err(|e| Response::error(500, e))
}

/// The tables storage holds (the system keyspaces are virtual).
fn stored_tables(schema: &Schema) -> impl Iterator<Item = &TableDef> + '_ {
    schema.keyspaces.values().filter(|ks| !Schema::is_local(&ks.name)).flat_map(|ks| ks.tables.values())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_request_head() {
        let (r, len) = parse_head(
            b"GET /v1/getendpoints?keyspace=ks&table=t&key=a%3Ab+c HTTP/1.1\r\nHost: x\r\nContent-Length: 3",
        )
        .unwrap();
        assert_eq!(r.method, "GET");
        assert_eq!(r.path, "/v1/getendpoints");
        assert_eq!(
            r.query,
            vec![("keyspace".into(), "ks".into()), ("table".into(), "t".into()), ("key".into(), "a:b c".into())]
        );
        assert_eq!(len, 3);
    }

    #[test]
    fn refuses_malformed_heads() {
        for head in [
            &b"GET /v1/info"[..],
            b"GET  /v1/info HTTP/1.1",
            b"get /v1/info HTTP/1.1",
            b"GET v1/info HTTP/1.1",
            b"GET /v1/info HTTP/2.0",
            b"GET /v1/info HTTP/1.1\r\nno colon here",
            b"GET /v1/info HTTP/1.1\r\nContent-Length: lots",
            b"GET /v1/info HTTP/1.1\r\nTransfer-Encoding: chunked",
            b"GET /v1/%zz HTTP/1.1",
            b"GET /v1/info?key=%ff HTTP/1.1",
            b"\xff\xfe HTTP/1.1",
        ] {
            assert!(parse_head(head).is_err(), "{}", String::from_utf8_lossy(head));
        }
    }

    #[test]
    fn splits_compound_keys_like_composite_type() {
        assert_eq!(split_components("a:b"), vec!["a", "b"]);
        assert_eq!(split_components(r"a\:x:b"), vec!["a:x", "b"]);
        assert_eq!(split_components(""), vec![""]);
    }

    #[test]
    fn key_literals_follow_nodetool() {
        assert_eq!(key_literal(&CqlType::Int, "42"), Some(Literal::Integer("42".into())));
        assert_eq!(key_literal(&CqlType::Int, "-7"), Some(Literal::Integer("-7".into())));
        assert_eq!(key_literal(&CqlType::Text, "it's"), Some(Literal::String("it's".into())));
        assert_eq!(key_literal(&CqlType::Blob, "0xcafe"), Some(Literal::Hex(vec![0xca, 0xfe])));
        assert_eq!(key_literal(&CqlType::Blob, "CAFE"), Some(Literal::Hex(vec![0xca, 0xfe])));
        assert_eq!(key_literal(&CqlType::Blob, "caf"), None);
        assert_eq!(key_literal(&CqlType::Int, "1 2"), None);
        assert_eq!(key_literal(&CqlType::Timestamp, "1000"), Some(Literal::Integer("1000".into())));
        let u = "8e2b4b0c-2f52-4c5e-9a3a-0f7b6a8d9e10";
        assert_eq!(key_literal(&CqlType::Uuid, u), Some(Literal::Uuid(u.parse().unwrap())));
    }
}
