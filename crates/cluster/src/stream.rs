//! Streaming token ranges between nodes (issue 21): the network half of
//! `storage::stream`. The receiver pulls; the sender serves.
//!
//! A stream session moves one table's ranges from one peer: the receiver
//! asks the peer to export them (`StreamReq`), and the peer writes sorted
//! files with `Storage::export_next`, one at a time, in a staging directory
//! (`staging_dir`: memory where `/dev/shm` allows), at most
//! `EXPORT_AHEAD_FILES` files ahead of the receiver. Each `StreamReq` answers
//! with the files so far (length, entries, CRC-32C) and whether that is all,
//! and tells the sender which files the receiver already holds whole (the
//! sender deletes them). The receiver fetches every file into its spool
//! directory (over a bulk connection, `bulk_wire`, where the transport has
//! them and the peer serves them; else in chunks, `StreamChunkReq`, at most
//! `CHUNK_BYTES` each), asks again until the export is complete, has
//! storage check and ingest the files (`Storage::ingest_streamed`), then
//! tells the peer it is done (`StreamDoneReq`), which deletes the export.
//!
//! Resumable: a session is named by the receiver. Asking again for the same
//! session gets the same files (the sender keeps an export until it is done
//! or `SESSION_TTL` passes), and the receiver continues each file from the
//! bytes it already holds, so a retry does not send again what was
//! received. A file whose CRC does not match is fetched again whole; if the
//! sender deleted it already (the receiver had said it held it), both ends
//! drop the session and the next try starts it over.
//! Throttled by the sender: `stream_throughput_outbound` bytes per second
//! over all its sessions (0 = unthrottled), as Cassandra's setting, and
//! while the node serves clients `stream_throughput_outbound_under_load`
//! (the lower applies); the export's writes are paced alike.
//!
//! The disk and CPU work of a session (the export, chunk reads and writes,
//! the ingest) runs on the low-priority bulk threads (`crate::bulk`), never
//! on the runtime's workers, so requests are served first; so does a bulk
//! connection's (each end on a thread of its own): the bytes are copied,
//! sent and, on loopback, delivered by those threads, where chunk frames
//! are by the runtime's.
//!
//! Invariants:
//! - Nothing is ingested unless every file of the session arrived whole and
//!   matches its CRC-32C (storage checks before it ingests anything).
//! - A chunk request never reads outside a file of the session it names.
//! - A session's staged files the receiver does not hold yet come to less
//!   than `EXPORT_AHEAD_FILES` files' worth, plus the file being written;
//!   files it holds are deleted.
//! - Every session a node serves or receives is listed in its
//!   `StreamRegistry` (nodetool netstats) with bytes done and total.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use net::{Transport, Verb};
use storage::{Storage, StreamedFile};
use uuid::Uuid;

use crate::wire::{self, StreamFileInfo};

/// The most bytes one chunk response carries.
pub const CHUNK_BYTES: u32 = 4 << 20;
/// The size of the files an export is cut into.
const FILE_BYTES: u64 = 64 << 20;
/// An export nobody finished is deleted after this long.
pub const SESSION_TTL: Duration = Duration::from_secs(3600);
/// How long the receiver waits for the sender to export (large ranges take a while).
const PREPARE_TIMEOUT: Duration = Duration::from_secs(600);
const CHUNK_TIMEOUT: Duration = Duration::from_secs(60);
/// A receiver syncs a file it writes every this many bytes.
const SYNC_BYTES: u64 = 16 << 20;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Which way a session's bytes go, seen from this node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Sending,
    Receiving,
}

/// A session's progress, as `nodetool netstats` shows it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct StreamStatus {
    pub session: Uuid,
    pub peer: SocketAddr,
    pub table: Uuid,
    pub direction: Direction,
    pub files_total: usize,
    pub files_done: usize,
    pub bytes_total: u64,
    pub bytes_done: u64,
    /// Bytes a resumed session did not fetch again.
    pub bytes_skipped: u64,
    pub entries: u64,
    /// How the receiver took the files' bytes: `bulk` (a bulk connection,
    /// `net::tcp`), `requests` (chunk request verbs) or `none` yet.
    pub via: String,
    /// `running`, `done` or `failed: <why>`.
    pub state: String,
    /// Seconds since the Unix epoch.
    pub started_unix_s: u64,
    /// The same in milliseconds (concurrent sessions' overlap).
    pub started_unix_ms: u64,
    pub elapsed_s: f64,
}

/// Every stream session of this node: running ones and the last finished.
#[derive(Default)]
pub struct StreamRegistry {
    sessions: Mutex<BTreeMap<Uuid, (StreamStatus, Instant)>>,
    /// Bytes sent and received by every session since the start (metrics).
    bytes_sent: std::sync::atomic::AtomicU64,
    bytes_received: std::sync::atomic::AtomicU64,
}

/// Finished sessions kept for `netstats`.
const FINISHED_KEPT: usize = 64;

impl StreamRegistry {
    fn start(&self, session: Uuid, peer: SocketAddr, table: Uuid, direction: Direction) {
        let since_epoch = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
        let (started_unix_s, started_unix_ms) = (since_epoch.as_secs(), since_epoch.as_millis() as u64);
        let status = StreamStatus {
            session,
            peer,
            table,
            direction,
            files_total: 0,
            files_done: 0,
            bytes_total: 0,
            bytes_done: 0,
            bytes_skipped: 0,
            entries: 0,
            via: "none".into(),
            state: "running".into(),
            started_unix_s,
            started_unix_ms,
            elapsed_s: 0.0,
        };
        let mut sessions = lock(&self.sessions);
        sessions.insert(session, (status, Instant::now()));
        // Keep the newest finished sessions for netstats, not all of them.
        while sessions.len() > FINISHED_KEPT {
            let oldest_finished = sessions
                .iter()
                .filter(|(_, (s, _))| s.state != "running")
                .min_by_key(|(_, (_, t))| *t)
                .map(|(id, _)| *id);
            match oldest_finished {
                Some(id) => sessions.remove(&id),
                None => break,
            };
        }
    }

    fn update(&self, session: Uuid, f: impl FnOnce(&mut StreamStatus)) {
        if let Some((status, started)) = lock(&self.sessions).get_mut(&session) {
            let before = status.bytes_done;
            f(status);
            status.elapsed_s = started.elapsed().as_secs_f64();
            let counter = match status.direction {
                Direction::Sending => &self.bytes_sent,
                Direction::Receiving => &self.bytes_received,
            };
            counter.fetch_add(status.bytes_done.saturating_sub(before), std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Bytes sent and received by every session since the node started.
    pub fn bytes_streamed(&self) -> (u64, u64) {
        let load = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        (load(&self.bytes_sent), load(&self.bytes_received))
    }

    /// The sessions, oldest first.
    pub fn list(&self) -> Vec<StreamStatus> {
        let mut out: Vec<StreamStatus> = lock(&self.sessions)
            .values()
            .map(|(s, started)| {
                let mut s = s.clone();
                if s.state == "running" {
                    s.elapsed_s = started.elapsed().as_secs_f64();
                }
                s
            })
            .collect();
        out.sort_by_key(|s| s.started_unix_s);
        out
    }
}

/// An export a peer is pulling: written a file at a time by a task of its
/// own (`StreamSource::export`), at most `EXPORT_AHEAD_FILES` ahead of what
/// the receiver holds, so the staging directory holds a few files of each
/// session whatever the ranges' size (and can be memory: `staging_dir`).
struct OutSession {
    state: Mutex<Export>,
    /// Woken whenever `state` changes.
    changed: tokio::sync::Notify,
    created: Instant,
}

#[derive(Default)]
struct Export {
    files: Vec<StreamedFile>,
    /// The receiver holds files `..held` whole; they are deleted here.
    held: usize,
    complete: bool,
    failed: Option<String>,
    /// Done or abandoned: no more files are written.
    ended: bool,
}

impl Export {
    /// Bytes exported that the receiver does not hold yet.
    fn ahead(&self) -> u64 {
        self.files.iter().skip(self.held).map(|f| f.bytes).sum()
    }
}

impl OutSession {
    /// The receiver holds the first `held` files whole: they go.
    fn hold(&self, held: usize) {
        let mut st = lock(&self.state);
        let upto = held.min(st.files.len());
        if upto <= st.held {
            return;
        }
        for f in st.files.get(st.held..upto).unwrap_or_default() {
            let _ = std::fs::remove_file(&f.path);
        }
        st.held = upto;
        drop(st);
        self.changed.notify_waiters();
    }

    fn end(&self) {
        lock(&self.state).ended = true;
        self.changed.notify_waiters();
    }
}

/// The message of a chunk request for a file the receiver said it holds
/// (deleted since); a receiver that meets it starts the session over.
const RECEIVED_AND_DELETED: &str = "was deleted once the receiver held it";

/// Where a node stages the files it exports: memory (a directory of its own
/// under `/dev/shm`, named after `data_dir`) where that is a tmpfs with
/// `STAGING_MIN_FREE` bytes free, else `data_dir/streams/out`. In memory an
/// export costs no disk writes and no reads back: on a small machine the
/// kernel's writeback of exported files behind a stream, not the copy
/// itself, is what delays the clients (`bench/LIFECYCLE.md`). Exports are
/// written a few files ahead of the receiver (`EXPORT_AHEAD_FILES`), so
/// memory use is bounded per session.
pub fn staging_dir(data_dir: &Path) -> PathBuf {
    let on_disk = data_dir.join("streams").join("out");
    let shm = Path::new("/dev/shm");
    if !is_tmpfs_with_room(shm) {
        return on_disk;
    }
    let name = std::fs::canonicalize(data_dir).unwrap_or_else(|_| data_dir.to_path_buf());
    let tag = crc32c::crc32c(name.as_os_str().as_encoded_bytes());
    shm.join(format!("{STAGING_PREFIX}{tag:08x}"))
}

/// Staging directories under `/dev/shm` begin so (`staging_dir`).
const STAGING_PREFIX: &str = "shoal-streams-";
/// Free memory `/dev/shm` must have to stage exports in.
const STAGING_MIN_FREE: u64 = 2 << 30;
/// How far an export runs ahead of its receiver, in files.
pub const EXPORT_AHEAD_FILES: u64 = 2;
/// The file in a staging directory naming the process that owns it.
const OWNER_FILE: &str = "owner.pid";
/// A staging directory naming no owner is left alone this long (it may be
/// one a node is creating).
const UNOWNED_STAGING_AGE: Duration = Duration::from_secs(600);

#[allow(clippy::unnecessary_cast, reason = "statfs's field types differ between libc targets")]
fn is_tmpfs_with_room(dir: &Path) -> bool {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    let Ok(path) = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()) else { return false };
    // SAFETY: statfs writes only into the zeroed struct it is given; `path` is NUL-terminated.
    #[allow(unsafe_code)]
    let (rc, st) = unsafe {
        let mut st: libc::statfs = std::mem::zeroed();
        (libc::statfs(path.as_ptr(), &mut st), st)
    };
    rc == 0
        && st.f_type as i64 == TMPFS_MAGIC
        && (st.f_bavail as u64).saturating_mul(st.f_bsize as u64) >= STAGING_MIN_FREE
}

/// Deletes the staging directories under `/dev/shm` whose owning process
/// is gone (a node killed while it streamed leaves its files in memory).
fn sweep_abandoned_staging(own: &Path) {
    let Ok(entries) = std::fs::read_dir("/dev/shm") else { return };
    for e in entries.flatten() {
        let path = e.path();
        let ours = e.file_name().to_string_lossy().starts_with(STAGING_PREFIX);
        if !ours || path == own {
            continue;
        }
        let owner = std::fs::read_to_string(path.join(OWNER_FILE)).ok().and_then(|s| s.trim().parse::<i32>().ok());
        let gone = match owner {
            Some(pid) => !process_exists(pid),
            // No owner named: one being created right now (its owner file not yet written), or
            // one whose owner file is lost; only the second, old, goes.
            None => e
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > UNOWNED_STAGING_AGE)),
        };
        if gone {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

/// Whether process `pid` exists (a process of another user counts).
fn process_exists(pid: i32) -> bool {
    // SAFETY: kill with signal 0 sends nothing; it only asks whether the process exists.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// The sending side: exports that peers pull in chunks, and the outbound
/// throttle.
pub struct StreamSource {
    storage: Arc<Storage>,
    dir: PathBuf,
    /// Where this node receives the files a peer asks it to pull (`StreamPullReq`).
    spool: PathBuf,
    sessions: Mutex<HashMap<Uuid, Arc<OutSession>>>,
    /// Bytes per second over all sessions; 0 = unthrottled.
    throughput: u64,
    /// When the throttle lets the next chunk go.
    next_send: Mutex<Instant>,
    /// `stream_throughput_outbound_under_load`: bytes per second over all
    /// sessions while the node serves clients; 0 = no such limit.
    under_load: u64,
    /// The same throttle for the exports' writes (their own budget, so an
    /// export runs at the rate its files are sent).
    next_export: Mutex<Instant>,
    /// The size exports are cut into.
    file_bytes: u64,
    pub registry: Arc<StreamRegistry>,
}

/// A token bucket's step: `bytes` at `rate` bytes per second (0 = free)
/// are paid for when `next` says; returns how long to wait for that.
fn pay(next: &Mutex<Instant>, rate: u64, bytes: u64) -> Duration {
    if rate == 0 {
        return Duration::ZERO;
    }
    let mut next = lock(next);
    let now = Instant::now();
    *next = (*next).max(now) + Duration::from_secs_f64(bytes as f64 / rate as f64);
    *next - now
}

/// Whether this process finished at least `SERVING_MIN_RATE` client
/// requests a second over the last `SERVING_WINDOW`: a thread of its own
/// (`stream-load-probe`, started on first use) looks once per window.
fn serving_clients() -> bool {
    use std::sync::atomic::{AtomicBool, Ordering};
    static SERVING: AtomicBool = AtomicBool::new(false);
    static PROBE: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    PROBE.get_or_init(|| {
        let probe = std::thread::Builder::new().name("stream-load-probe".into()).spawn(|| {
            let mut last = metrics::client_requests_completed();
            loop {
                std::thread::sleep(SERVING_WINDOW);
                let now = metrics::client_requests_completed();
                let rate = now.saturating_sub(last) as f64 / SERVING_WINDOW.as_secs_f64();
                SERVING.store(rate >= SERVING_MIN_RATE, Ordering::Relaxed);
                last = now;
            }
        });
        if let Err(e) = probe {
            tracing::warn!("cannot start the stream load probe (streams are not slowed for clients): {e}");
        }
    });
    SERVING.load(Ordering::Relaxed)
}

/// How often `serving_clients` looks at the client requests.
const SERVING_WINDOW: Duration = Duration::from_secs(1);
/// Client requests a second from which a node counts as serving clients.
const SERVING_MIN_RATE: f64 = 10.0;

/// How long the sender holds a `StreamReq` waiting for a new file before it
/// answers with what it has.
const ANSWER_WAIT: Duration = Duration::from_secs(10);

impl StreamSource {
    /// A source exporting under `dir` (what an earlier run left there is
    /// deleted: its sessions are gone with the process; so are staging
    /// directories in memory whose process is gone).
    pub fn new(
        storage: Arc<Storage>,
        dir: PathBuf,
        spool: PathBuf,
        throughput: u64,
        registry: Arc<StreamRegistry>,
    ) -> StreamSource {
        let _ = std::fs::remove_dir_all(&dir);
        tracing::info!("stream exports are staged in {}", dir.display());
        if dir.starts_with("/dev/shm") {
            sweep_abandoned_staging(&dir);
            if std::fs::create_dir_all(&dir).is_ok() {
                let _ = std::fs::write(dir.join(OWNER_FILE), std::process::id().to_string());
            }
        }
        StreamSource {
            storage,
            dir,
            spool,
            sessions: Mutex::new(HashMap::new()),
            throughput,
            next_send: Mutex::new(Instant::now()),
            under_load: 0,
            next_export: Mutex::new(Instant::now()),
            file_bytes: FILE_BYTES,
            registry,
        }
    }

    /// The same source, throttled to `bytes` per second over all its
    /// sessions (their sends and their exports alike) while the node serves
    /// client requests (`stream_throughput_outbound_under_load`; 0 = not).
    pub fn with_under_load(mut self, bytes: u64) -> StreamSource {
        self.under_load = bytes;
        if bytes > 0 {
            // Starts the probe, so it knows by the first stream.
            serving_clients();
        }
        self
    }

    /// The outbound rate now, bytes per second (0 = unthrottled):
    /// `stream_throughput_outbound`, and while the node serves clients
    /// `stream_throughput_outbound_under_load` too (the lower applies).
    pub fn rate(&self) -> u64 {
        let busy = if self.under_load > 0 && serving_clients() { self.under_load } else { 0 };
        match (self.throughput, busy) {
            (0, b) => b,
            (t, 0) => t,
            (t, b) => t.min(b),
        }
    }

    /// How long to hold `bytes` of export writes (`export_next`'s pace)
    /// so exports run at most at `rate`.
    fn export_delay(&self, bytes: u64) -> Duration {
        pay(&self.next_export, self.rate(), bytes)
    }

    /// The same source cutting its exports into files of `bytes` (tests:
    /// many files from little data).
    pub fn with_file_bytes(mut self, bytes: u64) -> StreamSource {
        self.file_bytes = bytes.max(1);
        self
    }

    /// Where this source stages its exports.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Answers a `StreamReq`: starts exporting `req.ranges` of `req.table`
    /// for `req.session` (the first time), deletes the files the receiver
    /// holds, and returns the session's files once there are more than
    /// `req.known` of them, the export is complete, or `ANSWER_WAIT` passed;
    /// with whether the export is complete. A failed export is reported
    /// once and forgotten (asking again starts it over).
    pub async fn prepare(
        self: &Arc<Self>,
        peer: SocketAddr,
        req: &wire::StreamRequest,
    ) -> Result<(Vec<StreamFileInfo>, bool), String> {
        self.expire();
        let s = self.session(peer, req)?;
        s.hold(req.held as usize);
        let deadline = tokio::time::Instant::now() + ANSWER_WAIT;
        loop {
            let changed = s.changed.notified();
            {
                let st = lock(&s.state);
                if let Some(e) = st.failed.clone() {
                    drop(st);
                    self.forget(req.session);
                    return Err(e);
                }
                if st.complete || st.files.len() > req.known as usize || tokio::time::Instant::now() >= deadline {
                    return Ok((infos(&st.files), st.complete));
                }
            }
            let _ = tokio::time::timeout_at(deadline, changed).await;
        }
    }

    /// The session `req` names, started (its export task spawned) if new.
    fn session(self: &Arc<Self>, peer: SocketAddr, req: &wire::StreamRequest) -> Result<Arc<OutSession>, String> {
        let mut sessions = lock(&self.sessions);
        if let Some(s) = sessions.get(&req.session) {
            return Ok(Arc::clone(s));
        }
        let dir = self.dir.join(req.session.to_string());
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let s = Arc::new(OutSession {
            state: Mutex::new(Export::default()),
            changed: tokio::sync::Notify::new(),
            created: Instant::now(),
        });
        sessions.insert(req.session, Arc::clone(&s));
        drop(sessions);
        self.registry.start(req.session, peer, req.table, Direction::Sending);
        tokio::spawn(Arc::clone(self).export(Arc::clone(&s), req.session, req.table, req.ranges.clone(), dir));
        Ok(s)
    }

    /// A session's export: `Storage::export_next` on the bulk threads, a
    /// file at a time, while the files the receiver does not hold yet come
    /// to less than `EXPORT_AHEAD_FILES` files' worth; until the ranges are exhausted,
    /// the export fails, or the session ends.
    async fn export(
        self: Arc<Self>,
        s: Arc<OutSession>,
        session: Uuid,
        table: Uuid,
        ranges: Vec<(i64, i64)>,
        dir: PathBuf,
    ) {
        let ranges = Arc::new(ranges);
        let mut after: Option<Vec<u8>> = None;
        loop {
            loop {
                let changed = s.changed.notified();
                {
                    let st = lock(&s.state);
                    if st.ended {
                        return;
                    }
                    if st.ahead() < EXPORT_AHEAD_FILES * self.file_bytes {
                        break;
                    }
                }
                changed.await;
            }
            let index = lock(&s.state).files.len();
            let path = dir.join(format!("{index}.sst"));
            let (source, ranges, from) = (Arc::clone(&self), Arc::clone(&ranges), after.take());
            let step = crate::bulk::run(move || {
                let pace = &mut |bytes| {
                    let delay = source.export_delay(bytes);
                    if !delay.is_zero() {
                        std::thread::sleep(delay);
                    }
                };
                let storage = &source.storage;
                storage
                    .export_next(&table, &ranges, from.as_deref(), &path, source.file_bytes, pace)
                    .map_err(|e| e.to_string())
            })
            .await
            .unwrap_or_else(|e| Err(format!("stream export task failed: {e}")));
            let mut st = lock(&s.state);
            if st.ended {
                if let Ok(Some((file, _))) = &step {
                    let _ = std::fs::remove_file(&file.path);
                }
                return;
            }
            match step {
                Ok(Some((file, last))) => {
                    self.registry.update(session, |r| {
                        r.files_total += 1;
                        r.bytes_total += file.bytes;
                        r.entries += file.entries;
                    });
                    st.files.push(file);
                    after = Some(last);
                }
                Ok(None) => st.complete = true,
                Err(e) => {
                    self.registry.update(session, |r| r.state = format!("failed: {e}"));
                    st.failed = Some(e);
                }
            }
            let finished = st.complete || st.failed.is_some();
            drop(st);
            s.changed.notify_waiters();
            if finished {
                return;
            }
        }
    }

    /// How long to hold a chunk of `bytes` so the node sends at most
    /// `stream_throughput_outbound`: the chunk goes when its own bytes have
    /// been paid for at that rate (a session of one chunk is throttled too).
    pub fn delay_for(&self, bytes: u64) -> Duration {
        pay(&self.next_send, self.rate(), bytes)
    }

    /// Up to `len` bytes of file `file` of `session` from `offset`. Blocking.
    pub fn chunk(&self, session: Uuid, file: u32, offset: u64, len: u32) -> Result<Vec<u8>, String> {
        let (path, n, last) = self.file_range(session, file, offset, u64::from(len.min(CHUNK_BYTES)))?;
        let mut buf = vec![0u8; n as usize];
        std::fs::File::open(&path)
            .and_then(|h| h.read_exact_at(&mut buf, offset))
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        self.sent(session, n, last);
        Ok(buf)
    }

    /// The path of file `file` of `session`, how many of `len` bytes from
    /// `offset` it holds (fewer at its end), and whether they reach its end.
    fn file_range(&self, session: Uuid, file: u32, offset: u64, len: u64) -> Result<(PathBuf, u64, bool), String> {
        let s = lock(&self.sessions).get(&session).cloned().ok_or_else(|| format!("no stream session {session}"))?;
        let st = lock(&s.state);
        let f = st.files.get(file as usize).ok_or_else(|| format!("stream session {session} has no file {file}"))?;
        if (file as usize) < st.held {
            return Err(format!("file {file} of stream session {session} {RECEIVED_AND_DELETED}"));
        }
        if offset > f.bytes {
            return Err(format!("offset {offset} is past the end of file {file} ({} bytes)", f.bytes));
        }
        let n = (f.bytes - offset).min(len);
        Ok((f.path.clone(), n, offset + n == f.bytes))
    }

    /// Counts `n` bytes of a file of `session` sent; `last`: they reached its end.
    fn sent(&self, session: Uuid, n: u64, last: bool) {
        self.registry.update(session, |st| {
            st.bytes_done += n;
            if last {
                st.files_done += 1;
            }
        });
    }

    /// Serves a bulk connection a receiver opened (`Transport::bulk_connector`)
    /// on a thread of its own at bulk priority: answers its file range
    /// requests (`bulk_wire`) until the receiver closes it or is idle for
    /// `CHUNK_TIMEOUT`. The bytes go from the page cache to the socket in
    /// the kernel (`sendfile`), throttled like chunks.
    pub fn serve_bulk(self: Arc<Self>, conn: std::net::TcpStream, from: SocketAddr) {
        let started = crate::bulk::spawn_thread("stream-send", move || {
            if let Err(e) = self.serve_bulk_conn(conn) {
                tracing::debug!(%from, "bulk stream connection ended: {e}");
            }
        });
        if !started {
            tracing::warn!(%from, "cannot serve a bulk stream connection");
        }
    }

    fn serve_bulk_conn(&self, mut conn: std::net::TcpStream) -> std::io::Result<()> {
        use std::io::{Read, Seek, Write};
        conn.set_read_timeout(Some(CHUNK_TIMEOUT))?;
        conn.set_write_timeout(Some(CHUNK_TIMEOUT))?;
        conn.write_all(&[net::BULK_READY])?;
        loop {
            let mut req = [0u8; bulk_wire::REQUEST_LEN];
            match conn.read_exact(&mut req) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
                Err(e) => return Err(e),
            }
            let (session, file, offset, len) = bulk_wire::decode_request(&req);
            let opened = self.file_range(session, file, offset, len).and_then(|(path, n, last)| {
                let mut h = std::fs::File::open(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                h.seek(std::io::SeekFrom::Start(offset)).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                Ok((h, n, last))
            });
            let (h, n, last) = match opened {
                Ok(opened) => opened,
                Err(e) => {
                    conn.write_all(&bulk_wire::encode_error(&e))?;
                    continue;
                }
            };
            conn.write_all(&bulk_wire::encode_ok(n))?;
            let mut left = n;
            while left > 0 {
                let piece = left.min(bulk_wire::PIECE_BYTES);
                let delay = self.delay_for(piece);
                if !delay.is_zero() {
                    std::thread::sleep(delay);
                }
                // File to socket: std's copy uses sendfile, no copy through this process.
                let copied = std::io::copy(&mut (&h).take(piece), &mut conn)?;
                if copied != piece {
                    // The file is shorter than the export said: the receiver's CRC check fails it.
                    return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "stream file shrank"));
                }
                left -= piece;
            }
            self.sent(session, n, last);
        }
    }

    /// The receiver has what it needs: the export goes.
    pub fn done(&self, session: Uuid) {
        if self.forget(session) {
            self.registry.update(session, |s| s.state = "done".into());
        }
    }

    /// Drops `session`: its export stops and its files go. Returns whether
    /// it was there.
    fn forget(&self, session: Uuid) -> bool {
        let removed = lock(&self.sessions).remove(&session);
        let Some(s) = removed else { return false };
        s.end();
        let _ = std::fs::remove_dir_all(self.dir.join(session.to_string()));
        true
    }

    fn expire(&self) {
        let old: Vec<Uuid> =
            lock(&self.sessions).iter().filter(|(_, s)| s.created.elapsed() > SESSION_TTL).map(|(id, _)| *id).collect();
        for id in old {
            tracing::warn!(session = %id, "stream export unfinished after an hour: deleted");
            self.forget(id);
            self.registry.update(id, |s| s.state = "failed: abandoned by the receiver".into());
        }
    }
}

/// The protocol of a bulk stream connection, after `net`'s `BulkHandshake`
/// and `BULK_READY` (big-endian):
///
/// ```text
/// request  := session:16 file:u32 offset:u64 len:u64
/// response := 0x00 n:u64, then n bytes of the file from offset (n <= len; fewer at its end)
///           | 0x01 message_len:u32 message (UTF-8): this request failed, the connection goes on
/// ```
///
/// The receiver sends one request at a time and closes the connection when
/// it is done; the file's CRC-32C (checked before ingest) covers the bytes.
mod bulk_wire {
    use std::io::{self, Read};

    use uuid::Uuid;

    pub const REQUEST_LEN: usize = 36;
    /// The sender throttles and counts in pieces of this many bytes.
    pub const PIECE_BYTES: u64 = 1 << 20;
    /// The longest error message accepted.
    const MESSAGE_MAX: u32 = 64 << 10;

    pub fn encode_request(session: Uuid, file: u32, offset: u64, len: u64) -> [u8; REQUEST_LEN] {
        let mut out = [0u8; REQUEST_LEN];
        let (id, rest) = out.split_at_mut(16);
        id.copy_from_slice(session.as_bytes());
        let (f, rest) = rest.split_at_mut(4);
        f.copy_from_slice(&file.to_be_bytes());
        let (o, l) = rest.split_at_mut(8);
        o.copy_from_slice(&offset.to_be_bytes());
        l.copy_from_slice(&len.to_be_bytes());
        out
    }

    pub fn decode_request(req: &[u8; REQUEST_LEN]) -> (Uuid, u32, u64, u64) {
        let (id, rest) = req.split_first_chunk::<16>().unwrap_or((&[0; 16], &[]));
        let (f, rest) = rest.split_first_chunk::<4>().unwrap_or((&[0; 4], &[]));
        let (o, rest) = rest.split_first_chunk::<8>().unwrap_or((&[0; 8], &[]));
        let l = rest.first_chunk::<8>().copied().unwrap_or([0; 8]);
        (Uuid::from_bytes(*id), u32::from_be_bytes(*f), u64::from_be_bytes(*o), u64::from_be_bytes(l))
    }

    pub fn encode_ok(n: u64) -> [u8; 9] {
        let mut out = [0u8; 9];
        let (status, len) = out.split_at_mut(1);
        status.copy_from_slice(&[0]);
        len.copy_from_slice(&n.to_be_bytes());
        out
    }

    pub fn encode_error(message: &str) -> Vec<u8> {
        let text = message.as_bytes();
        let text = text.get(..text.len().min(MESSAGE_MAX as usize)).unwrap_or(text);
        let mut out = Vec::with_capacity(5 + text.len());
        out.push(1);
        out.extend_from_slice(&(text.len() as u32).to_be_bytes());
        out.extend_from_slice(text);
        out
    }

    /// A response's header: `Ok(n)` bytes follow, or the sender's error.
    pub fn read_response(r: &mut impl Read) -> io::Result<Result<u64, String>> {
        let mut status = [0u8; 1];
        r.read_exact(&mut status)?;
        match status {
            [0] => {
                let mut n = [0u8; 8];
                r.read_exact(&mut n)?;
                Ok(Ok(u64::from_be_bytes(n)))
            }
            [1] => {
                let mut len = [0u8; 4];
                r.read_exact(&mut len)?;
                let len = u32::from_be_bytes(len);
                if len > MESSAGE_MAX {
                    return Err(io::Error::new(io::ErrorKind::InvalidData, format!("an error message of {len} bytes")));
                }
                let mut text = vec![0u8; len as usize];
                r.read_exact(&mut text)?;
                Ok(Err(String::from_utf8_lossy(&text).into_owned()))
            }
            other => Err(io::Error::new(io::ErrorKind::InvalidData, format!("response status {other:?}"))),
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn requests_and_responses_round_trip() {
            let id = Uuid::from_u128(0x0123_4567_89ab_cdef_0011_2233_4455_6677);
            let req = encode_request(id, 7, u64::MAX - 3, 1 << 40);
            assert_eq!(decode_request(&req), (id, 7, u64::MAX - 3, 1 << 40));
            let mut wire = encode_ok(12345).to_vec();
            wire.extend(encode_error("no stream session x"));
            wire.push(9);
            let mut r = &wire[..];
            assert_eq!(read_response(&mut r).unwrap(), Ok(12345));
            assert_eq!(read_response(&mut r).unwrap(), Err("no stream session x".to_string()));
            assert!(read_response(&mut r).is_err(), "an unknown status is an error");
            let mut huge = vec![1u8];
            huge.extend_from_slice(&u32::MAX.to_be_bytes());
            assert!(read_response(&mut &huge[..]).is_err(), "an oversized message is refused before it is read");
        }
    }
}

fn infos(files: &[StreamedFile]) -> Vec<StreamFileInfo> {
    files.iter().map(|f| StreamFileInfo { bytes: f.bytes, entries: f.entries, crc32c: f.crc32c }).collect()
}

/// What a finished session moved.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct StreamStats {
    pub files: usize,
    /// Bytes of the files.
    pub bytes: u64,
    /// Bytes fetched in this call (less than `bytes` when resumed).
    pub fetched: u64,
    pub entries: u64,
}

impl StreamStats {
    /// Adds another session's figures to these.
    pub fn add(&mut self, other: &StreamStats) {
        self.files += other.files;
        self.bytes += other.bytes;
        self.fetched += other.fetched;
        self.entries += other.entries;
    }
}

/// The receiving side of stream sessions: where fetched files wait
/// (`spool/<session>/`), the storage that ingests them, and the registry
/// that lists the sessions.
pub struct Receiver<'a, T> {
    pub transport: &'a T,
    pub storage: &'a Arc<Storage>,
    pub registry: &'a StreamRegistry,
    pub spool: &'a Path,
}

impl<T: Transport> Receiver<'_, T> {
    /// Pulls `ranges` of `table` from `peer` as session `session`, ingests
    /// them and ends the session. Calling it again with the same `session`
    /// after a failure resumes.
    pub async fn fetch(
        &self,
        peer: SocketAddr,
        session: Uuid,
        table: Uuid,
        ranges: &[(i64, i64)],
    ) -> Result<StreamStats, String> {
        self.registry.start(session, peer, table, Direction::Receiving);
        let result = self.run(peer, session, table, ranges).await;
        self.registry.update(session, |s| {
            s.state = match &result {
                Ok(_) => "done".into(),
                Err(e) => format!("failed: {e}"),
            }
        });
        result
    }

    async fn run(
        &self,
        peer: SocketAddr,
        session: Uuid,
        table: Uuid,
        ranges: &[(i64, i64)],
    ) -> Result<StreamStats, String> {
        let (storage, registry, spool) = (self.storage, self.registry, self.spool);
        let dir = spool.join(session.to_string());
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        // The files the sender has listed, those this node holds whole (a prefix), and the most it
        // was told this node holds (the sender has deleted those).
        let (mut infos, mut files, mut told) = (Vec::<StreamFileInfo>::new(), Vec::new(), 0usize);
        let mut fetched = 0u64;
        loop {
            let request = wire::encode_stream_request(&wire::StreamRequest {
                session,
                table,
                ranges: ranges.to_vec(),
                known: infos.len() as u32,
                held: files.len() as u32,
            });
            told = told.max(files.len());
            let (_, payload) = self
                .transport
                .send_request(peer, Verb::StreamReq, request, PREPARE_TIMEOUT)
                .await
                .map_err(|e| format!("{peer} did not prepare the stream: {e}"))?;
            let (listed, complete) = wire::decode_stream_files(&payload).map_err(|e| format!("{peer}: {e}"))?;
            if listed.get(..infos.len()) != Some(infos.as_slice()) {
                return Err(format!("{peer} changed the files of stream session {session}"));
            }
            registry.update(session, |s| {
                s.files_total = listed.len();
                s.bytes_total = listed.iter().map(|f| f.bytes).sum();
                s.entries = listed.iter().map(|f| f.entries).sum();
            });
            for (i, info) in listed.iter().enumerate().skip(infos.len()) {
                let file = StreamedFile {
                    path: dir.join(format!("{i}.sst")),
                    bytes: info.bytes,
                    entries: info.entries,
                    crc32c: info.crc32c,
                };
                match self.fetch_checked(peer, session, i as u32, info, &file).await {
                    Ok(n) => fetched += n,
                    Err(e) if e.contains(RECEIVED_AND_DELETED) => {
                        return Err(self.start_over(peer, session, &dir, e).await)
                    }
                    Err(e) => return Err(e),
                }
                files.push(file);
                registry.update(session, |s| s.files_done += 1);
            }
            infos = listed;
            if complete {
                break;
            }
        }
        let (store, to_ingest) = (Arc::clone(storage), files.clone());
        let ingested = crate::bulk::run(move || store.ingest_streamed_checked(&table, &to_ingest))
            .await
            .map_err(|e| format!("ingest task failed: {e}"))?;
        if let Err(e) = ingested {
            let damaged: Vec<usize> =
                files.iter().enumerate().filter(|(_, f)| !f.is_whole().unwrap_or(true)).map(|(i, _)| i).collect();
            if damaged.iter().any(|&i| i < told) {
                // The sender deleted that file once this node said it held it: it cannot come again.
                return Err(self.start_over(peer, session, &dir, e.to_string()).await);
            }
            // A damaged file is fetched again whole on the next try; the rest are kept.
            for f in damaged.iter().filter_map(|&i| files.get(i)) {
                let _ = std::fs::remove_file(&f.path);
            }
            return Err(e.to_string());
        }
        let _ = std::fs::remove_dir_all(&dir);
        self.end_session(peer, session).await;
        Ok(StreamStats {
            files: infos.len(),
            bytes: infos.iter().map(|f| f.bytes).sum(),
            fetched,
            entries: infos.iter().map(|f| f.entries).sum(),
        })
    }

    /// `fetch_file`, then the file's CRC-32C (computed as it was written)
    /// checked against the sender's
    /// (before this node tells the sender it holds the file, which then
    /// deletes it): a damaged file (a partial one from an earlier try that
    /// was damaged) is fetched again whole, once. Returns the bytes fetched.
    async fn fetch_checked(
        &self,
        peer: SocketAddr,
        session: Uuid,
        index: u32,
        info: &StreamFileInfo,
        file: &StreamedFile,
    ) -> Result<u64, String> {
        let mut fetched = 0;
        for attempt in 0..2 {
            let (n, crc) = self.fetch_file(peer, session, index, info, &file.path).await?;
            fetched += n;
            if crc == info.crc32c {
                return Ok(fetched);
            }
            let _ = std::fs::remove_file(&file.path);
            if attempt == 0 {
                tracing::warn!(%peer, %session, "file {index} of the stream arrived damaged (its CRC-32C differs): fetching it again whole");
            }
        }
        Err(format!("file {index} of stream session {session} from {peer} arrived damaged twice (its CRC-32C differs)"))
    }

    /// Tells `peer` the session is over (it deletes its export).
    async fn end_session(&self, peer: SocketAddr, session: Uuid) {
        let done = wire::encode_stream_done(session);
        if let Err(e) = self.transport.send_request(peer, Verb::StreamDoneReq, done, CHUNK_TIMEOUT).await {
            // The peer deletes its export after SESSION_TTL.
            tracing::warn!(%peer, %session, "cannot tell the peer the stream is done: {e}");
        }
    }

    /// A file this node needs is gone at the sender, which deleted it when
    /// this node said it held it: both ends drop the session, so the next
    /// try of the same session exports and fetches everything again.
    /// Returns the error to report.
    async fn start_over(&self, peer: SocketAddr, session: Uuid, dir: &Path, error: String) -> String {
        let _ = std::fs::remove_dir_all(dir);
        self.end_session(peer, session).await;
        format!("{error}; the next try starts the stream session over")
    }

    /// Brings `path` to `info.bytes` bytes from `peer`, starting from what it
    /// already holds. Returns the bytes fetched and the CRC-32C of the whole
    /// file, computed over the bytes as they are written (and over the bytes
    /// held before, read back), so the file need not be read again to be
    /// checked.
    async fn fetch_file(
        &self,
        peer: SocketAddr,
        session: Uuid,
        index: u32,
        info: &StreamFileInfo,
        path: &Path,
    ) -> Result<(u64, u32), String> {
        let (transport, registry) = (self.transport, self.registry);
        let name = path.display().to_string();
        let io = move |e: std::io::Error| format!("{name}: {e}");
        let opened = {
            let (path, io) = (path.to_path_buf(), io.clone());
            let bytes = info.bytes;
            crate::bulk::run(move || {
                let file = std::fs::OpenOptions::new()
                    .create(true)
                    .truncate(false)
                    .read(true)
                    .write(true)
                    .open(&path)
                    .map_err(&io)?;
                let mut held = file.metadata().map_err(&io)?.len();
                if held > bytes {
                    file.set_len(0).map_err(&io)?;
                    held = 0;
                }
                let crc = storage::crc32c_prefix(&file, held).map_err(&io)?;
                Ok::<_, String>((Arc::new(file), held, crc))
            })
            .await??
        };
        let (file, mut offset, mut crc) = opened;
        registry.update(session, |s| {
            s.bytes_done += offset;
            s.bytes_skipped += offset;
        });
        if offset < info.bytes {
            let bulk = self.fetch_bulk(peer, session, index, info.bytes, (&file, path), (offset, crc), &io).await?;
            if let Some(fetched) = bulk {
                registry.update(session, |s| s.via = "bulk".into());
                return Ok(fetched);
            }
            registry.update(session, |s| s.via = "requests".into());
        }
        let mut fetched = 0;
        let mut unsynced = 0u64;
        while offset < info.bytes {
            let want = (info.bytes - offset).min(u64::from(CHUNK_BYTES)) as u32;
            let request = wire::encode_stream_chunk(session, index, offset, want);
            let (_, data) = transport
                .send_request(peer, Verb::StreamChunkReq, request, CHUNK_TIMEOUT)
                .await
                .map_err(|e| format!("{peer}: chunk {offset} of file {index}: {e}"))?;
            if data.is_empty() || data.len() as u64 > u64::from(want) {
                return Err(format!("{peer} sent {} bytes for a chunk of {want}", data.len()));
            }
            let n = data.len() as u64;
            crc = crc32c::crc32c_append(crc, &data);
            unsynced += n;
            // Written out every SYNC_BYTES, so a stream never leaves gigabytes dirty in the page
            // cache (the kernel would throttle every write of the process, client writes included).
            let sync = unsynced >= SYNC_BYTES;
            if sync {
                unsynced = 0;
            }
            let (f, io) = (Arc::clone(&file), io.clone());
            crate::bulk::run(move || {
                f.write_all_at(&data, offset).map_err(&io)?;
                if sync {
                    f.sync_data().map_err(&io)?;
                }
                Ok::<_, String>(())
            })
            .await??;
            offset += n;
            fetched += n;
            registry.update(session, |s| s.bytes_done += n);
        }
        crate::bulk::run(move || file.sync_data().map_err(io)).await??;
        Ok((fetched, crc))
    }
}

impl<T: Transport> Receiver<'_, T> {
    /// Brings `file` from `offset` to `bytes` over a bulk connection to
    /// `peer`, read and written by a thread of its own at bulk priority.
    /// `None` when the transport has no bulk connections or `peer` serves
    /// none (the caller fetches in chunk requests instead).
    #[allow(clippy::too_many_arguments)]
    async fn fetch_bulk(
        &self,
        peer: SocketAddr,
        session: Uuid,
        index: u32,
        bytes: u64,
        (file, path): (&Arc<std::fs::File>, &Path),
        (offset, crc): (u64, u32),
        io: &(impl Fn(std::io::Error) -> String + Clone + Send + 'static),
    ) -> Result<Option<(u64, u32)>, String> {
        let Some(connector) = self.transport.bulk_connector() else { return Ok(None) };
        let (progress_tx, mut progress) = tokio::sync::mpsc::unbounded_channel::<u64>();
        let (file, path, io) = (Arc::clone(file), path.to_path_buf(), io.clone());
        let job = crate::bulk::run_on_thread("stream-receive", move || {
            let mut progress = |n| {
                let _ = progress_tx.send(n);
            };
            let (conn, reused) = match connector.connect(peer) {
                Ok(conn) => conn,
                Err(e) => {
                    tracing::debug!(%peer, "no bulk stream connection ({e}); fetching in chunk requests");
                    return Ok(None);
                }
            };
            let received =
                match receive_bulk(conn, session, index, bytes, (&file, &path), (offset, crc), &io, &mut progress) {
                    // An idle connection the peer closed meanwhile: once more on a new one.
                    Err(Received::Unanswered(e)) if reused => {
                        tracing::debug!(%peer, "a reused bulk stream connection failed ({e}); opening a new one");
                        let (conn, _) = connector.connect(peer).map_err(|e| format!("{peer}: {e}"))?;
                        receive_bulk(conn, session, index, bytes, (&file, &path), (offset, crc), &io, &mut progress)
                    }
                    other => other,
                };
            match received {
                Ok((fetched, conn)) => {
                    connector.give_back(peer, conn);
                    Ok(Some(fetched))
                }
                Err(Received::Unanswered(e) | Received::Failed(e)) => Err(e),
            }
        });
        tokio::pin!(job);
        loop {
            tokio::select! {
                Some(n) = progress.recv() => self.registry.update(session, |s| s.bytes_done += n),
                done = &mut job => {
                    while let Ok(n) = progress.try_recv() {
                        self.registry.update(session, |s| s.bytes_done += n);
                    }
                    return done?;
                }
            }
        }
    }
}

/// The receiving end of a bulk stream connection: asks for `file` of
/// `session` from `offset` to `bytes` and writes what comes into `dest` (at
/// `path`); `progress` gets each read's byte count. Blocking. Returns the
/// bytes fetched and the file's CRC-32C (`crc`, that of its first `offset`
/// bytes, carried on over the bytes written).
///
/// Whole 4 KiB-aligned blocks are written with `O_DIRECT` where the file
/// system allows it, around the page cache: the kernel then has no
/// writeback of gigabytes to do behind the stream, which on a small machine
/// delays clients far more than the write itself (a buffered write of 1.5 GB
/// from an idle-priority thread took client p99 from 1.1 to 10 ms here, a
/// direct one left it at 1.4). The unaligned tail, and everything when the
/// file system refuses `O_DIRECT` or a resume starts unaligned, goes
/// through `dest`, synced every `SYNC_BYTES`.
#[allow(clippy::too_many_arguments)]
fn receive_bulk(
    mut conn: std::net::TcpStream,
    session: Uuid,
    index: u32,
    bytes: u64,
    (dest, path): (&std::fs::File, &Path),
    (offset, crc): (u64, u32),
    io: &impl Fn(std::io::Error) -> String,
    progress: &mut impl FnMut(u64),
) -> Result<((u64, u32), std::net::TcpStream), Received> {
    use std::io::Write;
    let peer = conn.peer_addr().map(|a| a.to_string()).unwrap_or_default();
    let net = |e: std::io::Error| format!("{peer}: file {index} of the stream: {e}");
    let asked = conn
        .set_read_timeout(Some(CHUNK_TIMEOUT))
        .and_then(|()| conn.write_all(&bulk_wire::encode_request(session, index, offset, bytes - offset)))
        .and_then(|()| bulk_wire::read_response(&mut conn));
    let n = asked.map_err(|e| Received::Unanswered(net(e)))?.map_err(|e| Received::Failed(format!("{peer}: {e}")))?;
    let received = receive_into(&mut conn, n, (index, bytes), (dest, path), (offset, crc), io, progress);
    received.map(|fetched| (fetched, conn)).map_err(Received::Failed)
}

/// How `receive_bulk` failed: before the sender answered (a reused idle
/// connection it had closed: worth one more try on a new one) or after.
enum Received {
    Unanswered(String),
    Failed(String),
}

/// The body of a bulk response of `n` bytes (`receive_bulk`).
#[allow(clippy::too_many_arguments)]
fn receive_into(
    conn: &mut std::net::TcpStream,
    n: u64,
    (index, bytes): (u32, u64),
    (dest, path): (&std::fs::File, &Path),
    (offset, mut crc): (u64, u32),
    io: &impl Fn(std::io::Error) -> String,
    progress: &mut impl FnMut(u64),
) -> Result<(u64, u32), String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    const ALIGN: usize = 4096;
    const BLOCK: usize = bulk_wire::PIECE_BYTES as usize;
    let peer = conn.peer_addr().map(|a| a.to_string()).unwrap_or_default();
    let net = |e: std::io::Error| format!("{peer}: file {index} of the stream: {e}");
    if n != bytes - offset {
        return Err(format!("{peer} offered {n} bytes of file {index} from {offset}, the file has {bytes}"));
    }
    let direct = offset
        .is_multiple_of(ALIGN as u64)
        .then(|| std::fs::OpenOptions::new().write(true).custom_flags(libc::O_DIRECT).open(path).ok())
        .flatten();
    let mut raw = vec![0u8; BLOCK + ALIGN];
    let start = raw.as_ptr().align_offset(ALIGN);
    let block = raw.get_mut(start..start + BLOCK).ok_or("cannot align the stream buffer")?;
    // `block[..filled]` holds the bytes of the file from `base`.
    let (mut base, mut filled, mut unsynced) = (offset, 0usize, 0u64);
    while base + (filled as u64) < bytes {
        let want = (BLOCK - filled).min((bytes - base) as usize - filled);
        let room = block.get_mut(filled..filled + want).ok_or("a read past the stream buffer")?;
        let got = conn.read(room).map_err(net)?;
        if got == 0 {
            return Err(format!(
                "{peer} closed the stream connection in file {index} at byte {}",
                base + filled as u64
            ));
        }
        filled += got;
        progress(got as u64);
        if filled < BLOCK && base + (filled as u64) < bytes {
            continue;
        }
        let data = block.get(..filled).ok_or("a block past the stream buffer")?;
        crc = crc32c::crc32c_append(crc, data);
        match &direct {
            Some(d) if filled.is_multiple_of(ALIGN) => d.write_all_at(data, base).map_err(io)?,
            _ => {
                dest.write_all_at(data, base).map_err(io)?;
                unsynced += filled as u64;
                if unsynced >= SYNC_BYTES {
                    // As the chunk path does: never leave gigabytes dirty in the page cache.
                    dest.sync_data().map_err(io)?;
                    unsynced = 0;
                }
            }
        }
        base += filled as u64;
        filled = 0;
    }
    Ok((base - offset, crc))
}

/// `StreamPullReq`: a peer (a node leaving, or the node running removenode)
/// asks this node to pull ranges from a source; answers when the session is
/// done, with what moved.
pub async fn serve_pull<T: Transport>(source: &StreamSource, transport: &T, payload: &[u8]) -> Result<Bytes, String> {
    let req = wire::decode_stream_pull(payload).map_err(|e| e.to_string())?;
    let receiver =
        Receiver { transport, storage: &source.storage, registry: &source.registry, spool: source.spool.as_path() };
    let stats = receiver.fetch(req.source, req.session, req.table, &req.ranges).await?;
    Ok(wire::encode_stream_stats(&stats))
}

/// Serves a stream verb for the replica handler (`verbs::serve` hands them here).
pub async fn serve(
    source: Arc<StreamSource>,
    from: SocketAddr,
    verb: Verb,
    payload: Bytes,
) -> Result<(Verb, Bytes), String> {
    match verb {
        Verb::StreamReq => {
            let req = wire::decode_stream_request(&payload).map_err(|e| e.to_string())?;
            let (files, complete) = source.prepare(from, &req).await?;
            Ok((Verb::StreamRsp, wire::encode_stream_files(&files, complete)))
        }
        Verb::StreamChunkReq => {
            let (session, file, offset, len) = wire::decode_stream_chunk(&payload).map_err(|e| e.to_string())?;
            let reader = Arc::clone(&source);
            let data = crate::bulk::run(move || reader.chunk(session, file, offset, len))
                .await
                .map_err(|e| format!("stream read task failed: {e}"))??;
            let delay = source.delay_for(data.len() as u64);
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            Ok((Verb::StreamChunkRsp, Bytes::from(data)))
        }
        Verb::StreamDoneReq => {
            let session = wire::decode_stream_done(&payload).map_err(|e| e.to_string())?;
            source.done(session);
            Ok((Verb::StreamDoneRsp, Bytes::new()))
        }
        other => Err(format!("not a stream verb: {other:?}")),
    }
}
