//! Streaming token ranges between nodes (issue 21): the network half of
//! `storage::stream`. The receiver pulls; the sender serves.
//!
//! A stream session moves one table's ranges from one peer: the receiver
//! asks the peer to export them (`StreamReq`: the peer writes sorted files
//! with `Storage::export_ranges` and answers with each file's length,
//! entries and CRC-32C), fetches every file in chunks (`StreamChunkReq`,
//! at most `CHUNK_BYTES` each) into its spool directory, has storage check
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
//! on the runtime's workers, so requests are served first.
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
            f(status);
            status.elapsed_s = started.elapsed().as_secs_f64();
        }
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
        let s = lock(&self.sessions).get(&session).cloned().ok_or_else(|| format!("no stream session {session}"))?;
        let f = s.files.get(file as usize).ok_or_else(|| format!("stream session {session} has no file {file}"))?;
        if offset > f.bytes {
            return Err(format!("offset {offset} is past the end of file {file} ({} bytes)", f.bytes));
        }
        let n = (f.bytes - offset).min(u64::from(len.min(CHUNK_BYTES))) as usize;
        let mut buf = vec![0u8; n];
        std::fs::File::open(&f.path)
            .and_then(|h| h.read_exact_at(&mut buf, offset))
            .map_err(|e| format!("cannot read {}: {e}", f.path.display()))?;
        let end = offset + n as u64;
        let done = end == f.bytes;
        self.registry.update(session, |st| {
            st.bytes_done += n as u64;
            if done {
                st.files_done += 1;
            }
        });
        Ok(buf)
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
