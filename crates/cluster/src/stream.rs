//! Streaming token ranges between nodes (issue 21): the network half of
//! `storage::stream`. The receiver pulls; the sender serves.
//!
//! A stream session moves one table's ranges from one peer: the receiver
//! asks the peer to export them (`StreamReq`: the peer writes sorted files
//! with `Storage::export_ranges` and answers with each file's length,
//! entries and CRC-32C), fetches every file into its spool directory (over
//! a bulk connection, `bulk_wire`, where the transport has them and the peer
//! serves them; else in chunks, `StreamChunkReq`, at most `CHUNK_BYTES`
//! each), has storage check
//! and ingest the files (`Storage::ingest_streamed`), then tells the peer it
//! is done (`StreamDoneReq`), which deletes the export.
//!
//! Resumable: a session is named by the receiver. Asking again for the same
//! session gets the same files (the sender keeps an export until it is done
//! or `SESSION_TTL` passes), and the receiver continues each file from the
//! bytes it already holds, so a retry does not send again what was
//! received. A file whose CRC does not match is fetched again whole.
//! Throttled by the sender: `stream_throughput_outbound` bytes per second
//! over all its sessions (0 = unthrottled), as Cassandra's setting.
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

/// An export a peer is pulling.
struct OutSession {
    files: Vec<StreamedFile>,
    created: Instant,
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
    pub registry: Arc<StreamRegistry>,
}

impl StreamSource {
    /// A source exporting under `dir` (what an earlier run left there is
    /// deleted: its sessions are gone with the process).
    pub fn new(
        storage: Arc<Storage>,
        dir: PathBuf,
        spool: PathBuf,
        throughput: u64,
        registry: Arc<StreamRegistry>,
    ) -> StreamSource {
        let _ = std::fs::remove_dir_all(&dir);
        StreamSource {
            storage,
            dir,
            spool,
            sessions: Mutex::new(HashMap::new()),
            throughput,
            next_send: Mutex::new(Instant::now()),
            registry,
        }
    }

    /// Exports `ranges` of `table` for `session` (or returns the files of
    /// an export already made for it). Blocking: run it off the runtime.
    pub fn prepare(
        &self,
        peer: SocketAddr,
        session: Uuid,
        table: Uuid,
        ranges: &[(i64, i64)],
    ) -> Result<Vec<StreamFileInfo>, String> {
        self.expire();
        if let Some(s) = lock(&self.sessions).get(&session) {
            return Ok(infos(&s.files));
        }
        self.registry.start(session, peer, table, Direction::Sending);
        let dir = self.dir.join(session.to_string());
        let files = self.storage.export_ranges(&table, ranges, &dir, FILE_BYTES).map_err(|e| e.to_string());
        let files = match files {
            Ok(files) => files,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                self.registry.update(session, |s| s.state = format!("failed: {e}"));
                return Err(e);
            }
        };
        let info = infos(&files);
        self.registry.update(session, |s| {
            s.files_total = files.len();
            s.bytes_total = files.iter().map(|f| f.bytes).sum();
            s.entries = files.iter().map(|f| f.entries).sum();
        });
        lock(&self.sessions).insert(session, Arc::new(OutSession { files, created: Instant::now() }));
        Ok(info)
    }

    /// How long to hold a chunk of `bytes` so the node sends at most
    /// `stream_throughput_outbound`: the chunk goes when its own bytes have
    /// been paid for at that rate (a session of one chunk is throttled too).
    pub fn delay_for(&self, bytes: u64) -> Duration {
        if self.throughput == 0 {
            return Duration::ZERO;
        }
        let mut next = lock(&self.next_send);
        let now = Instant::now();
        *next = (*next).max(now) + Duration::from_secs_f64(bytes as f64 / self.throughput as f64);
        *next - now
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
        let f = s.files.get(file as usize).ok_or_else(|| format!("stream session {session} has no file {file}"))?;
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
        if lock(&self.sessions).remove(&session).is_some() {
            let _ = std::fs::remove_dir_all(self.dir.join(session.to_string()));
            self.registry.update(session, |s| s.state = "done".into());
        }
    }

    fn expire(&self) {
        let old: Vec<Uuid> =
            lock(&self.sessions).iter().filter(|(_, s)| s.created.elapsed() > SESSION_TTL).map(|(id, _)| *id).collect();
        for id in old {
            tracing::warn!(session = %id, "stream export unfinished after an hour: deleted");
            lock(&self.sessions).remove(&id);
            let _ = std::fs::remove_dir_all(self.dir.join(id.to_string()));
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
        let (transport, storage, registry, spool) = (self.transport, self.storage, self.registry, self.spool);
        let request = wire::encode_stream_request(session, table, ranges);
        let (_, payload) = transport
            .send_request(peer, Verb::StreamReq, request, PREPARE_TIMEOUT)
            .await
            .map_err(|e| format!("{peer} did not prepare the stream: {e}"))?;
        let infos = wire::decode_stream_files(&payload).map_err(|e| format!("{peer}: {e}"))?;
        let dir = spool.join(session.to_string());
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let total: u64 = infos.iter().map(|f| f.bytes).sum();
        registry.update(session, |s| {
            s.files_total = infos.len();
            s.bytes_total = total;
            s.entries = infos.iter().map(|f| f.entries).sum();
        });
        let mut files = Vec::with_capacity(infos.len());
        let mut fetched = 0u64;
        for (i, info) in infos.iter().enumerate() {
            let path = dir.join(format!("{i}.sst"));
            fetched += self.fetch_file(peer, session, i as u32, info, &path).await?;
            files.push(StreamedFile { path, bytes: info.bytes, entries: info.entries, crc32c: info.crc32c });
            registry.update(session, |s| s.files_done += 1);
        }
        let (store, to_ingest) = (Arc::clone(storage), files.clone());
        let ingested = crate::bulk::run(move || store.ingest_streamed(&table, &to_ingest))
            .await
            .map_err(|e| format!("ingest task failed: {e}"))?;
        if let Err(e) = ingested {
            // A damaged file is fetched again whole on the next try; the rest are kept.
            for f in files.iter().filter(|f| !f.is_whole().unwrap_or(true)) {
                let _ = std::fs::remove_file(&f.path);
            }
            return Err(e.to_string());
        }
        let _ = std::fs::remove_dir_all(&dir);
        let done = wire::encode_stream_done(session);
        if let Err(e) = transport.send_request(peer, Verb::StreamDoneReq, done, CHUNK_TIMEOUT).await {
            // The data is in; the peer deletes its export after SESSION_TTL.
            tracing::warn!(%peer, %session, "cannot tell the peer the stream is done: {e}");
        }
        Ok(StreamStats { files: infos.len(), bytes: total, fetched, entries: infos.iter().map(|f| f.entries).sum() })
    }

    /// Brings `path` to `info.bytes` bytes from `peer`, starting from what it
    /// already holds. Returns the bytes fetched.
    async fn fetch_file(
        &self,
        peer: SocketAddr,
        session: Uuid,
        index: u32,
        info: &StreamFileInfo,
        path: &Path,
    ) -> Result<u64, String> {
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
                Ok::<_, String>((Arc::new(file), held))
            })
            .await??
        };
        let (file, mut offset) = opened;
        registry.update(session, |s| {
            s.bytes_done += offset;
            s.bytes_skipped += offset;
        });
        if offset < info.bytes {
            if let Some(fetched) = self.fetch_bulk(peer, session, index, info.bytes, (&file, path), offset, &io).await?
            {
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
        Ok(fetched)
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
        offset: u64,
        io: &(impl Fn(std::io::Error) -> String + Clone + Send + 'static),
    ) -> Result<Option<u64>, String> {
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
            let received = match receive_bulk(conn, session, index, bytes, (&file, &path), offset, &io, &mut progress) {
                // An idle connection the peer closed meanwhile: once more on a new one.
                Err(Received::Unanswered(e)) if reused => {
                    tracing::debug!(%peer, "a reused bulk stream connection failed ({e}); opening a new one");
                    let (conn, _) = connector.connect(peer).map_err(|e| format!("{peer}: {e}"))?;
                    receive_bulk(conn, session, index, bytes, (&file, &path), offset, &io, &mut progress)
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
/// bytes fetched.
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
    offset: u64,
    io: &impl Fn(std::io::Error) -> String,
    progress: &mut impl FnMut(u64),
) -> Result<(u64, std::net::TcpStream), Received> {
    use std::io::Write;
    let peer = conn.peer_addr().map(|a| a.to_string()).unwrap_or_default();
    let net = |e: std::io::Error| format!("{peer}: file {index} of the stream: {e}");
    let asked = conn
        .set_read_timeout(Some(CHUNK_TIMEOUT))
        .and_then(|()| conn.write_all(&bulk_wire::encode_request(session, index, offset, bytes - offset)))
        .and_then(|()| bulk_wire::read_response(&mut conn));
    let n = asked.map_err(|e| Received::Unanswered(net(e)))?.map_err(|e| Received::Failed(format!("{peer}: {e}")))?;
    let received = receive_into(&mut conn, n, (index, bytes), (dest, path), offset, io, progress);
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
    offset: u64,
    io: &impl Fn(std::io::Error) -> String,
    progress: &mut impl FnMut(u64),
) -> Result<u64, String> {
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
    Ok(base - offset)
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
            let files = crate::bulk::run(move || source.prepare(from, req.session, req.table, &req.ranges))
                .await
                .map_err(|e| format!("stream export task failed: {e}"))??;
            Ok((Verb::StreamRsp, wire::encode_stream_files(&files)))
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
