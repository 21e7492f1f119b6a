//! `-mode simplenative`: the stress tool's own lean CQL client for the
//! operations of a run, as cassandra-stress's `simplenative` mode used
//! Cassandra's SimpleClient instead of the Java driver.
//!
//! The scylla driver still connects first: it creates the schema, prepares the
//! statements, truncates, and reads the ring and the keyspace's replication.
//! This client then opens its own connections (`connectionsPerHost`, default one
//! per node), prepares the statements on each, and sends every EXECUTE itself,
//! through the server's own codec (`cql-protocol`, its client half, whose
//! `encode_execute` writes an EXECUTE without building a `Request`):
//! - a worker writes its frame straight into the connection's write buffer and
//!   waits on a oneshot channel kept under the frame's stream id;
//! - one writer task per connection sends whatever frames have gathered with one
//!   `write` (it yields once after being woken, so the other ready workers can
//!   add theirs first);
//! - one reader task per connection splits the responses off its read buffer
//!   and hands each to the channel under its stream id.
//!
//! `lwt` sends every EXECUTE with its serial consistency (flag 0x10) and reads
//! `[applied]` (and `v`) from the result (`cas_outcome`); `counter_write` binds
//! the increments before the key.
//!
//! Routing is token-aware: the key's Murmur3 token finds its range in a table
//! built once from the driver's replica map (each ring token's replicas, those
//! of the preferred data center first); the operation index (plus the attempt)
//! picks among the preferred replicas, so retries go to the next one.
//!
//! With `-transport` (TLS) every connection is a TLS session (`transport.rs`),
//! and the driver, which has no TLS in this build, is not used at all: the
//! setup goes through one more connection of this client (`control.rs`),
//! which reads the ring from the system tables.
//!
//! Why: the driver spends about 3.3 client CPU-µs per write on the benchmark's
//! machine (future moves, tracing spans, load-balancing plans, per-request
//! timers), which on a 2-core machine shared with the server caps what any
//! server can show. See ADR 0004.
//!
//! Invariants:
//! - A stream id belongs to one request from the moment it leaves the free list
//!   until its response (or its connection's failure) is handed over; then it
//!   goes back. A request that timed out keeps its id until a late response
//!   arrives.
//! - A connection that fails (read or write error, end of stream, a frame that
//!   does not parse) fails every request waiting on it and every later one.
//!   There is no reconnection; retries (`-errors retries=N`) go to the next
//!   replica.
//! - Every request gets the driver mode's 12 s timeout, give or take the
//!   second of the connection's timeout sweep (`sweep_loop`): no timer per
//!   request, which had been ~7% of the client's CPU at full speed.
//! - Nothing read from the wire is trusted: headers and bodies are parsed by
//!   `cql-protocol`, which checks every length.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use cql_protocol::frame::{parse_response_header, FrameHeader, Opcode, HEADER_LEN};
use cql_protocol::request::{encode_execute_serial, encode_request, Request, StartupOptions};
use cql_protocol::response::{decode_response, ErrorBody, ErrorKind, Response, ResultBody, Rows};
use scylla::client::session::Session;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, Notify};

use crate::settings::{Command, Consistency, SerialConsistency, Settings};
use crate::transport::Tls;
use crate::workload::Statements;

/// How long a request may wait for its response (the driver mode's request timeout).
pub const TIMEOUT: Duration = Duration::from_secs(12);

/// The largest response frame accepted (Cassandra's default native_transport_max_frame_size is 16 MiB;
/// results of the stress table are far below it).
const MAX_FRAME: u32 = 256 << 20;

/// Stream ids per connection: protocol v4 allows 0..=32767 for requests.
const STREAMS: usize = 32768;

/// RESULT kind Void (spec 4.2.5.1), the whole body of a successful write's answer.
const RESULT_VOID: [u8; 4] = [0, 0, 0, 1];

/// A response frame, or why none came.
type Reply = Result<(FrameHeader, Bytes), String>;

/// How often a connection looks for requests past [`TIMEOUT`].
const SWEEP: Duration = Duration::from_secs(1);

/// A connected socket, before its halves go to the reader and the writer.
enum Io {
    Plain(TcpStream),
    Tls(Box<tls::tokio_rustls::client::TlsStream<TcpStream>>),
}

/// One connection: the write buffer and the requests waiting, under one lock.
pub(crate) struct Conn {
    addr: SocketAddr,
    /// The TLS session's protocol version and cipher suite (`-transport`).
    tls: Option<String>,
    /// [`TIMEOUT`] (shorter in tests).
    timeout: Duration,
    state: Mutex<ConnState>,
    wake_writer: Notify,
}

struct ConnState {
    out: BytesMut,
    free: Vec<i16>,
    /// Per stream id in use: the waiting request and the sweep it was sent
    /// in; `Waiting::TimedOut` once its caller was told it timed out (the id
    /// stays taken until the late response arrives).
    waiting: Vec<Option<Waiting>>,
    /// Sweeps so far (`sweep_loop`).
    sweeps: u32,
    failed: Option<String>,
}

enum Waiting {
    Request(oneshot::Sender<Reply>, u32),
    TimedOut,
}

impl Conn {
    fn lock(&self) -> MutexGuard<'_, ConnState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Connects (through TLS with `tls`), starts the reader and writer tasks and
    /// says STARTUP (and, when the server asks, authenticates with `auth`).
    pub(crate) async fn open(
        addr: SocketAddr,
        auth: Option<&(String, String)>,
        tls: Option<&Tls>,
    ) -> Result<Arc<Conn>, String> {
        Conn::open_with(addr, auth, tls, TIMEOUT).await
    }

    async fn open_with(
        addr: SocketAddr,
        auth: Option<&(String, String)>,
        tls: Option<&Tls>,
        timeout: Duration,
    ) -> Result<Arc<Conn>, String> {
        let socket = TcpStream::connect(addr).await.map_err(|e| format!("cannot connect to {addr}: {e}"))?;
        socket.set_nodelay(true).map_err(|e| format!("{addr}: TCP_NODELAY: {e}"))?;
        let (io, session) = match tls {
            None => (Io::Plain(socket), None),
            Some(tls) => {
                let stream = tls.handshake(socket, addr).await?;
                let session = crate::transport::describe(&stream);
                (Io::Tls(Box::new(stream)), Some(session))
            }
        };
        let conn = Arc::new(Conn {
            addr,
            tls: session,
            timeout,
            state: Mutex::new(ConnState {
                out: BytesMut::with_capacity(64 << 10),
                // Popped from the end: ids are handed out from 0 up.
                free: (0..=i16::MAX).rev().collect(),
                waiting: (0..STREAMS).map(|_| None).collect(),
                sweeps: 0,
                failed: None,
            }),
            wake_writer: Notify::new(),
        });
        match io {
            Io::Plain(socket) => {
                let (rd, wr) = socket.into_split();
                conn.start(rd, wr);
            }
            Io::Tls(stream) => {
                let (rd, wr) = tokio::io::split(*stream);
                conn.start(rd, wr);
            }
        }
        let options = BTreeMap::from([("CQL_VERSION".to_string(), "3.0.0".to_string())]);
        match conn.request(&Request::Startup(StartupOptions(options))).await? {
            Response::Ready => Ok(conn),
            Response::Authenticate(class) => {
                let Some((user, password)) = auth else {
                    return Err(format!("{addr} asks for authentication ({class}): give -mode user=U password=P"));
                };
                // SASL PLAIN, as PasswordAuthenticator expects: \0user\0password.
                let token = Bytes::from(format!("\0{user}\0{password}").into_bytes());
                match conn.request(&Request::AuthResponse(token)).await? {
                    Response::AuthSuccess(_) => Ok(conn),
                    other => Err(format!("{addr}: authentication failed: {}", describe(&other))),
                }
            }
            other => Err(format!("{addr}: STARTUP answered with {}", describe(&other))),
        }
    }

    /// The TLS session's protocol version and cipher suite; `None` on plain TCP.
    pub(crate) fn tls(&self) -> Option<&str> {
        self.tls.as_deref()
    }

    /// Starts the connection's reader, writer and timeout sweep tasks.
    fn start<R, W>(self: &Arc<Self>, rd: R, wr: W)
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        tokio::spawn(read_loop(Arc::clone(self), rd));
        tokio::spawn(write_loop(Arc::clone(self), wr));
        tokio::spawn(sweep_loop(Arc::downgrade(self)));
    }

    /// Takes a stream id, lets `encode` append the frame for it to the write buffer,
    /// and wakes the writer if the buffer was empty.
    fn send(&self, encode: impl FnOnce(&mut BytesMut, i16)) -> Result<oneshot::Receiver<Reply>, String> {
        let (tx, rx) = oneshot::channel();
        let wake = {
            let mut s = self.lock();
            if let Some(why) = &s.failed {
                return Err(format!("connection to {} failed: {why}", self.addr));
            }
            let Some(stream) = s.free.pop() else {
                return Err(format!("connection to {}: all {STREAMS} stream ids are in use", self.addr));
            };
            let wake = s.out.is_empty();
            encode(&mut s.out, stream);
            s.waiting[stream as usize] = Some(Waiting::Request(tx, s.sweeps));
            wake
        };
        if wake {
            self.wake_writer.notify_one();
        }
        Ok(rx)
    }

    /// Sends one frame and waits (at most its timeout, see `sweep_loop`) for
    /// its response frame.
    async fn call(&self, encode: impl FnOnce(&mut BytesMut, i16)) -> Reply {
        let rx = self.send(encode)?;
        rx.await.unwrap_or_else(|_| Err(format!("connection to {} closed", self.addr)))
    }

    /// Sends a request built by the codec and decodes its response (setup only).
    pub(crate) async fn request(&self, request: &Request) -> Result<Response, String> {
        let (header, body) = self.call(|out, stream| encode_request(out, stream, None, request)).await?;
        decode_response(&header, body, None)
            .map(|frame| frame.response)
            .map_err(|e| format!("{}: undecodable response: {e}", self.addr))
    }

    /// Prepares `cql` on this connection: its id.
    async fn prepare(&self, cql: &str) -> Result<Bytes, String> {
        match self.request(&Request::Prepare { query: cql.to_string(), keyspace: None }).await? {
            Response::Result(ResultBody::Prepared(p)) => Ok(p.id),
            other => Err(format!("cannot prepare `{cql}` on {}: {}", self.addr, describe(&other))),
        }
    }

    /// Marks the connection failed and fails every waiting request.
    pub(crate) fn fail(&self, why: String) {
        let waiting: Vec<_> = {
            let mut s = self.lock();
            if s.failed.is_none() {
                s.failed = Some(why.clone());
            }
            s.waiting
                .iter_mut()
                .filter_map(|w| match w.take() {
                    Some(Waiting::Request(tx, _)) => Some(tx),
                    _ => None,
                })
                .collect()
        };
        for tx in waiting {
            let _ = tx.send(Err(format!("connection to {} failed: {why}", self.addr)));
        }
        self.wake_writer.notify_one();
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(conn: Arc<Conn>, mut wr: W) {
    let mut spare = BytesMut::with_capacity(64 << 10);
    loop {
        conn.wake_writer.notified().await;
        // The workers woken with this one add their frames before the write.
        tokio::task::yield_now().await;
        loop {
            {
                let mut s = conn.lock();
                if s.failed.is_some() {
                    return;
                }
                if s.out.is_empty() {
                    break;
                }
                std::mem::swap(&mut s.out, &mut spare);
            }
            // A TLS stream may keep records back until flushed (a no-op on plain TCP).
            if let Err(e) = async {
                wr.write_all(&spare).await?;
                wr.flush().await
            }
            .await
            {
                conn.fail(format!("write: {e}"));
                return;
            }
            spare.clear();
        }
    }
}

async fn read_loop<R: AsyncRead + Unpin>(conn: Arc<Conn>, mut rd: R) {
    let mut buf = BytesMut::with_capacity(64 << 10);
    let mut ready = Vec::new();
    let why = 'read: loop {
        if buf.capacity() - buf.len() < 16 << 10 {
            buf.reserve(64 << 10);
        }
        match rd.read_buf(&mut buf).await {
            Ok(0) => break "the server closed the connection".to_string(),
            Ok(_) => {}
            Err(e) => break format!("read: {e}"),
        }
        loop {
            let header = match parse_response_header(&buf, MAX_FRAME) {
                Ok(Some(header)) => header,
                Ok(None) => break,
                Err(e) => break 'read format!("unreadable response frame: {e}"),
            };
            if buf.len() < header.frame_len() {
                buf.reserve(header.frame_len() - buf.len());
                break;
            }
            let mut frame = buf.split_to(header.frame_len()).freeze();
            let body = frame.split_off(HEADER_LEN);
            // Negative streams are server-pushed events; this client registers for none.
            if header.stream >= 0 {
                ready.push((header, body));
            }
        }
        if ready.is_empty() {
            continue;
        }
        let mut handed = Vec::with_capacity(ready.len());
        {
            let mut s = conn.lock();
            for (header, body) in ready.drain(..) {
                match s.waiting.get_mut(header.stream as usize).and_then(Option::take) {
                    Some(Waiting::Request(tx, _)) => handed.push((tx, header, body)),
                    Some(Waiting::TimedOut) => {}
                    None => continue,
                }
                s.free.push(header.stream);
            }
        }
        for (tx, header, body) in handed {
            let _ = tx.send(Ok((header, body)));
        }
    };
    conn.fail(why);
}

/// Every [`SWEEP`], fails the requests of the connection that have waited
/// the connection's timeout (counted in whole sweeps, so a request times out between
/// `TIMEOUT` and `TIMEOUT + SWEEP` after it was sent); ends with the
/// connection.
async fn sweep_loop(conn: std::sync::Weak<Conn>) {
    loop {
        tokio::time::sleep(SWEEP).await;
        let Some(conn) = conn.upgrade() else { return };
        let limit = (conn.timeout.as_secs() / SWEEP.as_secs()) as u32;
        let expired: Vec<oneshot::Sender<Reply>> = {
            let mut s = conn.lock();
            if s.failed.is_some() {
                return;
            }
            s.sweeps += 1;
            let now = s.sweeps;
            s.waiting
                .iter_mut()
                .filter(|w| matches!(w, Some(Waiting::Request(_, sent)) if now.wrapping_sub(*sent) > limit))
                .filter_map(|w| match w.replace(Waiting::TimedOut) {
                    Some(Waiting::Request(tx, _)) => Some(tx),
                    _ => None,
                })
                .collect()
        };
        for tx in expired {
            let _ = tx.send(Err(format!("no response from {} within {} s", conn.addr, conn.timeout.as_secs())));
        }
    }
}

/// The protocol's consistency level for the run's (its codes live in `types`).
pub fn protocol_consistency(c: Consistency) -> types::Consistency {
    match c {
        Consistency::Any => types::Consistency::Any,
        Consistency::One => types::Consistency::One,
        Consistency::Two => types::Consistency::Two,
        Consistency::Three => types::Consistency::Three,
        Consistency::Quorum => types::Consistency::Quorum,
        Consistency::All => types::Consistency::All,
        Consistency::LocalQuorum => types::Consistency::LocalQuorum,
        Consistency::EachQuorum => types::Consistency::EachQuorum,
        Consistency::LocalOne => types::Consistency::LocalOne,
    }
}

/// Which token range a token falls in, and the range's replicas.
#[derive(Debug, Default)]
pub struct Routes {
    /// The ring's tokens, sorted: range `i` is `(ends[i-1], ends[i]]`, and range 0
    /// also takes the wrap-around (above the last token).
    ends: Vec<i64>,
    /// Per range: node indexes, the preferred data center's first.
    replicas: Vec<Box<[u32]>>,
    /// Per range: how many of `replicas` are in the preferred data center (all of
    /// them when none is preferred, or when none is there).
    preferred: Vec<u32>,
}

impl Routes {
    /// `ring`: (token, replicas in ring order, whether each is in the preferred data center).
    pub fn new(mut ring: Vec<(i64, Vec<(u32, bool)>)>) -> Routes {
        ring.sort_by_key(|(token, _)| *token);
        ring.dedup_by_key(|(token, _)| *token);
        let mut routes = Routes::default();
        for (end, replicas) in ring {
            let local: Vec<u32> = replicas.iter().filter(|(_, local)| *local).map(|(n, _)| *n).collect();
            let preferred = if local.is_empty() { replicas.len() } else { local.len() };
            let mut ordered = local;
            ordered.extend(replicas.iter().filter(|(_, local)| !*local).map(|(n, _)| *n));
            routes.ends.push(end);
            routes.replicas.push(ordered.into_boxed_slice());
            routes.preferred.push(preferred as u32);
        }
        routes
    }

    /// The node to send operation `pick`'s request for `token` to: one of the
    /// range's preferred replicas chosen by `pick`; `None` when the ring is unknown.
    pub fn node(&self, token: i64, pick: u64) -> Option<u32> {
        if self.ends.is_empty() {
            return None;
        }
        let mut range = self.ends.partition_point(|&end| end < token);
        if range == self.ends.len() {
            range = 0;
        }
        let replicas = &self.replicas[range];
        let preferred = self.preferred[range] as u64;
        if preferred == 0 {
            return None;
        }
        Some(replicas[(pick % preferred) as usize])
    }
}

/// A node's connections, or why there are none.
struct Pool {
    conns: Vec<Link>,
    down: Option<String>,
}

/// A connection with the ids its server gave the run's statements.
struct Link {
    conn: Arc<Conn>,
    insert: Option<Bytes>,
    select: Option<Bytes>,
    update: Option<Bytes>,
}

/// The statement an operation executes (`Statements`' write, read and update).
#[derive(Clone, Copy)]
pub enum Stmt {
    Insert,
    Select,
    Update,
}

/// What a conditional statement (`lwt`) answered: whether it applied, and the
/// row's current `v` when it did not and the row exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cas {
    pub applied: bool,
    pub current: Option<i64>,
}

/// The lean client of a run.
pub struct Native {
    pools: Vec<Pool>,
    routes: Routes,
    consistency: types::Consistency,
    /// `lwt`: the serial consistency sent with every EXECUTE (`serial-cl=`).
    serial: Option<types::Consistency>,
    statements: Statements,
}

impl Native {
    /// Connects to every node the driver knows and prepares `statements` on each
    /// connection (see [`Native::open`]).
    pub async fn connect(session: &Session, settings: &Settings, statements: Statements) -> Result<Native, String> {
        let keyspace = settings.schema.keyspace.as_str();
        let table = crate::workload::table_of(settings.command);
        let prefer_dc = settings.nodes.dc.as_deref();
        let state = session.get_cluster_state();
        let nodes = state.get_nodes_info();
        let index: HashMap<_, u32> = nodes.iter().enumerate().map(|(i, n)| (n.host_id, i as u32)).collect();
        let ring = state
            .replica_locator()
            .ring()
            .iter()
            .map(|(token, _)| {
                let replicas = state
                    .get_token_endpoints(keyspace, table, *token)
                    .into_iter()
                    .filter_map(|(node, _)| {
                        let local = prefer_dc.is_none_or(|dc| node.datacenter.as_deref() == Some(dc));
                        index.get(&node.host_id).map(|&i| (i, local))
                    })
                    .collect();
                (token.value(), replicas)
            })
            .collect();
        let addrs: Vec<SocketAddr> =
            nodes.iter().map(|node| SocketAddr::new(node.address.ip(), node.address.port())).collect();
        Native::open(&addrs, Routes::new(ring), settings, None, statements).await
    }

    /// Connects to `nodes` (through TLS with `tls`), routing by `routes` (whose node
    /// indexes are positions in `nodes`), and prepares `statements` on
    /// each connection (`-mode connectionsPerHost`, `user`, `password` and the
    /// consistency level come from `settings`). Fails only when no node can be
    /// connected to and prepared on.
    pub async fn open(
        nodes: &[SocketAddr],
        routes: Routes,
        settings: &Settings,
        tls: Option<&Tls>,
        statements: Statements,
    ) -> Result<Native, String> {
        let per_node = settings.connections_per_host.map_or(1, |n| n.get());
        let auth = settings.user.clone().map(|u| (u, settings.password.clone().unwrap_or_default()));
        let mut pools = Vec::with_capacity(nodes.len());
        for &addr in nodes {
            let mut pool = Pool { conns: Vec::with_capacity(per_node), down: None };
            for _ in 0..per_node {
                let link = async {
                    let conn = Conn::open(addr, auth.as_ref(), tls).await?;
                    let mut ids = Vec::with_capacity(3);
                    for cql in [&statements.write, &statements.read, &statements.update] {
                        ids.push(match cql {
                            Some(cql) => Some(conn.prepare(cql).await?),
                            None => None,
                        });
                    }
                    let mut ids = ids.into_iter();
                    let (insert, select, update) = (ids.next().flatten(), ids.next().flatten(), ids.next().flatten());
                    Ok::<_, String>(Link { conn, insert, select, update })
                };
                match link.await {
                    Ok(link) => pool.conns.push(link),
                    Err(e) => {
                        pool.down = Some(e);
                        break;
                    }
                }
            }
            if pool.down.is_some() {
                for link in pool.conns.drain(..) {
                    link.conn.fail("closed".to_string());
                }
            }
            pools.push(pool);
        }
        if pools.iter().all(|p| p.down.is_some()) {
            let why: Vec<_> = pools.iter().filter_map(|p| p.down.clone()).collect();
            return Err(format!("simplenative: no node could be connected to and prepared on: {}", why.join("; ")));
        }
        let serial = (settings.command == Command::Lwt).then_some(match settings.serial_consistency {
            SerialConsistency::Serial => types::Consistency::Serial,
            SerialConsistency::LocalSerial => types::Consistency::LocalSerial,
        });
        Ok(Native { pools, routes, consistency: protocol_consistency(settings.consistency), serial, statements })
    }

    /// The connection for operation `op`'s `attempt` on the partition `key`.
    fn link(&self, key: &[u8], op: u64, attempt: u32) -> Result<&Link, String> {
        let pick = op.wrapping_add(u64::from(attempt));
        let node = match self.routes.node(ring::token_of(key), pick) {
            Some(node) => node as usize,
            None => (pick % self.pools.len() as u64) as usize,
        };
        let pool = &self.pools[node];
        if let Some(why) = &pool.down {
            return Err(why.clone());
        }
        Ok(&pool.conns[(op % pool.conns.len() as u64) as usize])
    }

    /// Writes the row: `key`, then `values` cut into columns of `size` bytes.
    pub async fn write(&self, op: u64, attempt: u32, key: &[u8], values: &[u8], size: usize) -> Result<(), String> {
        let link = self.link(key, op, attempt)?;
        let cells = || std::iter::once(key).chain(values.chunks(size));
        match self.execute(link, Stmt::Insert, false, cells).await? {
            None => Ok(()),
            Some(ResultBody::Void) => Ok(()),
            Some(other) => Err(format!("{}: unexpected answer to an INSERT: {other:?}", link.conn.addr)),
        }
    }

    /// `counter_write`: adds `increments` (8-byte big-endian, one per column) to the
    /// counters of `key`.
    pub async fn counter_add(&self, op: u64, attempt: u32, key: &[u8], increments: &[u8]) -> Result<(), String> {
        let link = self.link(key, op, attempt)?;
        let cells = || increments.chunks(8).chain(std::iter::once(key));
        match self.execute(link, Stmt::Insert, false, cells).await? {
            None | Some(ResultBody::Void) => Ok(()),
            Some(other) => Err(format!("{}: unexpected answer to a counter UPDATE: {other:?}", link.conn.addr)),
        }
    }

    /// `lwt`: executes the conditional `stmt` (`Insert`: INSERT ... IF NOT EXISTS,
    /// `Update`: UPDATE ... IF) on the partition `key` with `cells` bound.
    pub async fn cas<'a, I: Iterator<Item = &'a [u8]>>(
        &self,
        op: u64,
        attempt: u32,
        stmt: Stmt,
        key: &[u8],
        cells: impl Fn() -> I,
    ) -> Result<Cas, String> {
        let link = self.link(key, op, attempt)?;
        match self.execute(link, stmt, false, cells).await? {
            Some(ResultBody::Rows(rows)) => cas_outcome(&rows).map_err(|e| format!("{}: {e}", link.conn.addr)),
            other => Err(format!("{}: unexpected answer to a conditional statement: {other:?}", link.conn.addr)),
        }
    }

    /// Reads the row of `key`: the result rows (without column specs).
    pub async fn read(&self, op: u64, attempt: u32, key: &[u8]) -> Result<Rows, String> {
        let link = self.link(key, op, attempt)?;
        match self.execute(link, Stmt::Select, true, || std::iter::once(key)).await? {
            Some(ResultBody::Rows(rows)) => Ok(rows),
            other => Err(format!("{}: unexpected answer to a SELECT: {other:?}", link.conn.addr)),
        }
    }

    /// Executes the statement; `None` is a Void result recognised without decoding.
    /// An unknown id (the node forgot it: a restart) is prepared again once.
    async fn execute<'a, I: Iterator<Item = &'a [u8]>>(
        &self,
        link: &Link,
        stmt: Stmt,
        skip_metadata: bool,
        cells: impl Fn() -> I,
    ) -> Result<Option<ResultBody>, String> {
        let (id, cql) = match stmt {
            Stmt::Insert => (&link.insert, &self.statements.write),
            Stmt::Select => (&link.select, &self.statements.read),
            Stmt::Update => (&link.update, &self.statements.update),
        };
        let (Some(id), Some(cql)) = (id, cql) else {
            return Err("the statement was not prepared".to_string());
        };
        let mut id = id.clone();
        for attempt in 0..2 {
            let (header, body) = link
                .conn
                .call(|out, stream| {
                    encode_execute_serial(out, stream, &id, self.consistency, self.serial, skip_metadata, cells())
                })
                .await?;
            if header.opcode == Opcode::Result && header.flags == 0 && body[..] == RESULT_VOID {
                return Ok(None);
            }
            let response = decode_response(&header, body, None)
                .map_err(|e| format!("{}: undecodable response: {e}", link.conn.addr))?
                .response;
            match response {
                Response::Result(result) => return Ok(Some(result)),
                Response::Error(ErrorBody { kind: ErrorKind::Unprepared { .. }, .. }) if attempt == 0 => {
                    id = link.conn.prepare(cql).await?;
                }
                other => return Err(format!("{}: {}", link.conn.addr, describe(&other))),
            }
        }
        Err(format!("{}: the statement stays unprepared after preparing it again", link.conn.addr))
    }
}

impl Drop for Native {
    fn drop(&mut self) {
        for link in self.pools.iter().flat_map(|p| &p.conns) {
            link.conn.fail("the run is over".to_string());
        }
    }
}

/// The `[applied]` column (first, boolean) of a conditional statement's result,
/// and the `v` column when the result carries it (a condition that failed on an
/// existing row).
pub(crate) fn cas_outcome(rows: &Rows) -> Result<Cas, String> {
    let row = rows
        .iter()
        .next()
        .transpose()
        .map_err(|e| format!("unreadable conditional result: {e}"))?
        .ok_or_else(|| "a conditional statement answered no row".to_string())?;
    let applied = match row.first() {
        Some(Some(b)) if b.len() == 1 => b[0] != 0,
        _ => return Err("a conditional statement's first column is not [applied]".to_string()),
    };
    let v = rows.metadata.columns.iter().position(|c| c.name == "v");
    let current = v.and_then(|i| row.get(i)).and_then(|cell| cell.as_deref()).and_then(|b| {
        let bytes: [u8; 8] = b.try_into().ok()?;
        Some(i64::from_be_bytes(bytes))
    });
    Ok(Cas { applied, current })
}

/// A response that was not the expected one, in the words of the protocol: an
/// error's code, message and details, or the message's kind.
pub(crate) fn describe(response: &Response) -> String {
    match response {
        Response::Error(e) => format!("error 0x{:04X}: {} ({:?})", e.kind.code(), e.message, e.kind),
        other => format!("unexpected {} message", other.opcode().name()),
    }
}

#[cfg(test)]
#[path = "native_tests.rs"]
mod tests;
