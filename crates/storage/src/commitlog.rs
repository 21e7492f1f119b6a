//! Shoal's commit log: the durable record of writes that are still only in
//! memtables, kept as Cassandra-style segment files.
//!
//! Every write reserves a sequence number (`reserve`), is appended here,
//! made durable by `sync` as the mode says (the caller drives Cassandra's
//! `commitlog_sync` modes by when it calls it), and only then goes to its
//! table's memtable, where reads see it; its reservation ends there. Once
//! memtables are flushed, `discard_below` deletes the closed segments whose
//! records are all flushed or reserved by none. `open` replays what is left.
//!
//! On-disk format, in directory `dir`:
//! - Segments are files `CommitLog-<id>.log`, `id` a 20-digit zero-padded
//!   decimal u64; ids increase, and replay goes in id order.
//! - A segment starts with a 16-byte header, the magic `SHOALCL2` and the
//!   segment's id (u64 LE), followed by records:
//!   `len: u32 LE | crc: u32 LE | seq: u64 LE | payload (len bytes)`, where
//!   `crc` is CRC-32 of the 8 id bytes, the 8 seq bytes and the payload, and
//!   `len <= 256 MiB`. (Segments of the first format, magic `SHOALCL1` with
//!   no id, whose CRC leaves the id out, still replay.)
//! - Segments are recycled, as Cassandra once did: a segment no longer needed
//!   is renamed `CommitLog-spare-<n>.log` (at most `MAX_SPARES` of them; the
//!   rest are deleted), and a new segment takes a spare's file, renamed to
//!   its own name, and writes over it from its header on. Writing into pages
//!   the page cache and the file system already hold skips what a write to a
//!   new file pays per 4 KiB: a page allocated and zeroed, a block reserved
//!   (about half of an append's CPU, ARCHITECTURE.md, performance). Past the
//!   last record written since, the file holds the earlier segment's bytes;
//!   their CRCs were computed with another id, so replay stops there, and a
//!   header that still names another id (a crash between the rename and the
//!   header write) means the segment holds nothing.
//! - The next segment is made ahead of need (`prepare_next`, on the engine's
//!   `commitlog-alloc` thread, as Cassandra's segment allocator): file,
//!   header, directory fsync and, for a spare, its pages read back into the
//!   page cache, so a rotation only swaps files and no append waits on the
//!   disk. A rotation that finds none ready makes its own.
//!
//! Invariants:
//! - Records are written whole with one `pwrite(2)` and never span segments;
//!   a new segment is started when the next record would push the current one
//!   past `segment_bytes` (a bigger record gets a fresh segment to itself).
//! - Only the current segment is written; after `open`, after a failed write
//!   and after rotation, appends go to a new segment. A prepared segment is
//!   not in `segments` (nothing is in it, and nothing discards it) until a
//!   rotation takes it; its id is above the current segment's, or it is
//!   deleted unused, so segments are written in id order. Left on disk at a
//!   stop, it replays as an empty segment. Creating a segment
//!   fsyncs the directory so its name survives a crash; a segment that could
//!   not be created (a full disk) leaves no file, and the next append tries
//!   again.
//! - A spare's name never parses as a segment's, so replay never reads one;
//!   `open` deletes the spares it finds (their pages are likely not cached
//!   any more, and a write into an uncached page would read it first).
//! - Within a segment records are in append order, which may differ from seq
//!   order: writers reserve a seq before they append.
//! - At replay a short record, a CRC mismatch or an oversized length ends that
//!   segment (normal for the tail of the last one after a crash).
//! - When `sync` returns Ok, every record appended before the call is durable.
//!   After a failed fsync every later `sync` fails (the log is poisoned).
//! - A closed segment is deleted only when its largest seq is below the
//!   caller's lowest unflushed seq; the current segment is never deleted.
//!   The caller reads `lowest_reserved` *before* the memtables' lowest seqs
//!   and passes the smaller: a write whose record is appended but not yet in
//!   a memtable is still reserved, and one whose reservation ended is in its
//!   memtable before it ended, so neither is missed.

#![deny(clippy::indexing_slicing)]

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use crate::StorageError;

const MAGIC: &[u8; 8] = b"SHOALCL2";
/// The magic of the first format: no id in the header or the CRCs.
const MAGIC_V1: &[u8; 8] = b"SHOALCL1";
/// Magic and id.
const HEADER: u64 = 16;
pub(crate) const RECORD_HEADER: usize = 16;
/// Spare segment files kept for reuse: 512 MiB of 32 MiB segments, about
/// what two 256 MiB memtables' flushes discard, so in a steady stream of
/// writes nearly every new segment takes a spare.
const MAX_SPARES: usize = 16;
const SPARE_PREFIX: &str = "CommitLog-spare-";
const MAX_PAYLOAD: usize = 256 << 20;

/// The commit log; see the module documentation.
pub(crate) struct CommitLog {
    dir: PathBuf,
    segment_bytes: u64,
    next_seq: AtomicU64,
    /// Seqs reserved (`reserve`) whose writes are not in a memtable yet.
    reserved: Mutex<BTreeSet<u64>>,
    /// End position of the last completed append (mirrors `State::position`).
    appended: AtomicU64,
    state: Mutex<State>,
    sync: Mutex<SyncState>,
    sync_done: Condvar,
    /// Each fsync's duration (µs), for the metrics.
    pub(crate) fsync_latency: metrics::Histogram,
    /// The sync journal of the power-loss layer (`power_loss`), when the
    /// environment asks for it (`SYNC_JOURNAL_ENV`).
    journal: Option<Mutex<File>>,
    /// Set by a rotation, for the allocator (`wait_for_rotation`).
    rotated: Mutex<bool>,
    rotation: Condvar,
}

/// Set (to anything) in a process's environment, its commit logs write a
/// sync journal beside themselves: after every fsync, a line of each
/// segment's id and the bytes that fsync made durable (`power_loss` reads
/// it). For fault testing only; it costs a write per fsync.
pub const SYNC_JOURNAL_ENV: &str = "SHOAL_SYNC_JOURNAL";

/// Where the sync journal of the commit log in `dir` goes (beside it, so a
/// log directory holds segments only).
pub(crate) fn journal_path(dir: &Path) -> PathBuf {
    dir.with_extension("sync-journal")
}

/// Everything appends change, under one lock.
struct State {
    /// All segments on disk, in id order; the last one is the current one.
    segments: Vec<Segment>,
    /// The current segment's file.
    file: Arc<File>,
    /// The current segment got writes since a syncer last took it.
    dirty: bool,
    /// A write to the current segment failed: the next append starts a new one.
    broken: bool,
    /// Segments closed by rotation with writes not yet taken by a syncer.
    unsynced: Vec<Arc<File>>,
    next_id: u64,
    /// Files of discarded segments, renamed, for new segments to reuse.
    spares: Vec<PathBuf>,
    /// Number of the next spare's name.
    next_spare: u64,
    /// The next segment, made ahead of need by `prepare_next` (not in
    /// `segments` until a rotation takes it).
    prepared: Option<(Segment, File)>,
    /// `prepare_next` is making a segment (outside this lock).
    preparing: bool,
    /// Bytes of records appended by this process.
    position: u64,
}

/// A seq reserved by [`CommitLog::reserve`]; dropping it releases it.
pub(crate) struct Reservation<'a> {
    log: &'a CommitLog,
    pub(crate) seq: u64,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        lock(&self.log.reserved).remove(&self.seq);
    }
}

struct Segment {
    id: u64,
    path: PathBuf,
    /// Bytes of header and records: where the next record goes.
    bytes: u64,
    /// Largest seq in the segment; 0 when it holds no record.
    max_seq: u64,
    current: bool,
}

struct SyncState {
    /// Every byte before this position is durable.
    synced: u64,
    in_flight: bool,
    failed: Option<String>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn segment_name(id: u64) -> String {
    format!("CommitLog-{id:020}.log")
}

pub(crate) fn parse_segment_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("CommitLog-")?.strip_suffix(".log")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Appends up to `n` more bytes of `r` to `buf`; returns whether all `n` were there.
fn read_more(r: &mut impl Read, buf: &mut Vec<u8>, n: usize) -> io::Result<bool> {
    let before = buf.len();
    r.take(n as u64).read_to_end(buf)?;
    Ok(buf.len() - before == n)
}

/// The fields of a record header, `(len, crc, seq)`; None if `head` is shorter than one (a torn header).
fn record_header(head: &[u8]) -> Option<(usize, u32, u64)> {
    let (len, rest) = head.split_first_chunk()?;
    let (crc, rest) = rest.split_first_chunk()?;
    let seq = rest.first_chunk()?;
    Some((u32::from_le_bytes(*len) as usize, u32::from_le_bytes(*crc), u64::from_le_bytes(*seq)))
}

/// After the 8 bytes of a segment's magic, read into `header`: the id a `SHOALCL2` header names (read into
/// `header` too); None for a header of no known format or one that ends early.
fn header_id(reader: &mut impl Read, header: &mut Vec<u8>, magic_read: bool) -> io::Result<Option<u64>> {
    if !magic_read || header != MAGIC || !read_more(reader, header, 8)? {
        return Ok(None);
    }
    Ok(header.last_chunk().map(|id| u64::from_le_bytes(*id)))
}

/// Creates segment `id` with its header, in the file of `spare` if one is
/// given (a spare that cannot be taken is deleted and a new file made), and
/// fsyncs the directory. On failure (a full disk) no file of that name is
/// left, so the next try with the same id can succeed.
fn create_segment(dir: &Path, id: u64, spare: Option<PathBuf>) -> Result<(Segment, File), StorageError> {
    let path = dir.join(segment_name(id));
    let reused = spare.and_then(|spare| {
        match std::fs::rename(&spare, &path).and_then(|()| OpenOptions::new().read(true).write(true).open(&path)) {
            Ok(file) => Some(file),
            Err(e) => {
                tracing::warn!(file = %spare.display(), "cannot reuse a spare commit log segment: {e}");
                let _ = std::fs::remove_file(&spare);
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    });
    let file = match reused {
        Some(file) => file,
        None => OpenOptions::new().write(true).create_new(true).open(&path)?,
    };
    let mut header = [0u8; HEADER as usize];
    header[..8].copy_from_slice(MAGIC);
    header[8..].copy_from_slice(&id.to_le_bytes());
    if let Err(e) = file.write_all_at(&header, 0).and_then(|()| sync_dir(dir)) {
        let _ = std::fs::remove_file(&path);
        return Err(e.into());
    }
    let segment = Segment { id, path, bytes: HEADER, max_seq: 0, current: true };
    Ok((segment, file))
}

/// Reads up to `len` bytes of `file` (a reused spare), so that its pages are
/// cached when appends write into them (`CommitLog::prepare_next`). Best
/// effort: a failed read only leaves the pages to the appends.
fn warm(file: &File, len: u64) {
    let mut buf = vec![0u8; 1 << 20];
    let mut offset = 0;
    while offset < len {
        match file.read_at(&mut buf, offset) {
            Ok(0) | Err(_) => return,
            Ok(n) => offset += n as u64,
        }
    }
}

/// CRC-32 of a record's seq (little-endian, as in its header) and payload,
/// seeded with the segment's id (`None`: a first-format segment).
fn record_crc(id: Option<u64>, seq: u64, payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    if let Some(id) = id {
        h.update(&id.to_le_bytes());
    }
    h.update(&seq.to_le_bytes());
    h.update(payload);
    h.finalize()
}

/// The sync journal's file, appended to, if the environment asks for one.
fn open_journal(dir: &Path) -> Option<Mutex<File>> {
    std::env::var_os(SYNC_JOURNAL_ENV)?;
    let path = journal_path(dir);
    match OpenOptions::new().create(true).append(true).open(&path) {
        Ok(file) => Some(Mutex::new(file)),
        Err(e) => {
            tracing::warn!(file = %path.display(), "cannot open the commit log's sync journal: {e}");
            None
        }
    }
}

/// One journal line: `id:bytes` of every segment, as of the fsync just done.
fn write_journal(journal: &Mutex<File>, sizes: &[(u64, u64)]) {
    use std::io::Write;
    let mut line = String::with_capacity(24 * sizes.len() + 1);
    for (i, (id, bytes)) in sizes.iter().enumerate() {
        if i > 0 {
            line.push(' ');
        }
        line.push_str(&format!("{id}:{bytes}"));
    }
    line.push('\n');
    if let Err(e) = lock(journal).write_all(line.as_bytes()) {
        tracing::warn!("cannot write the commit log's sync journal: {e}");
    }
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    // Only Unix can open (and so fsync) a directory.
    if cfg!(unix) {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// Replays the records of segment `id`; returns its largest seq (0: none)
/// and where its records end.
fn replay_segment(
    path: &Path,
    id: u64,
    replay: &mut impl FnMut(u64, &[u8]) -> Result<(), StorageError>,
) -> Result<(u64, u64), StorageError> {
    let mut reader = io::BufReader::new(File::open(path)?);
    let mut header = Vec::new();
    let magic_read = read_more(&mut reader, &mut header, MAGIC.len())?;
    let crc_id = if magic_read && header == MAGIC_V1 {
        None
    } else if let Some(named) = header_id(&mut reader, &mut header, magic_read)? {
        if named != id {
            // A spare renamed for this segment before its header was written.
            tracing::info!(file = %path.display(), "commit log segment was never written (its file still holds segment {named})");
            return Ok((0, 0));
        }
        Some(id)
    } else {
        tracing::warn!(file = %path.display(), "skipping commit log segment with a bad header");
        return Ok((0, 0));
    };
    let (mut offset, mut max_seq) = (header.len() as u64, 0);
    let (mut head, mut payload) = (Vec::with_capacity(RECORD_HEADER), Vec::new());
    loop {
        head.clear();
        read_more(&mut reader, &mut head, RECORD_HEADER)?;
        if head.is_empty() {
            return Ok((max_seq, offset));
        }
        let read = match record_header(&head) {
            None => Err("torn record header"),
            Some((len, ..)) if len > MAX_PAYLOAD => Err("record length over 256 MiB"),
            Some((len, crc, seq)) => {
                payload.clear();
                if !read_more(&mut reader, &mut payload, len)? {
                    Err("torn record")
                } else if record_crc(crc_id, seq, &payload) != crc {
                    Err("record checksum mismatch")
                } else {
                    Ok(seq)
                }
            }
        };
        let seq = match read {
            Ok(seq) => seq,
            Err(problem) => {
                // In a reused file, what follows the last record is the earlier
                // segment's: its checksums fail, which is how such a segment ends.
                tracing::info!(file = %path.display(), offset, "{problem}: the commit log segment ends here (a torn write, or bytes from the file's earlier use)");
                return Ok((max_seq, offset));
            }
        };
        replay(seq, &payload)?;
        max_seq = max_seq.max(seq);
        offset += (RECORD_HEADER + payload.len()) as u64;
    }
}

impl CommitLog {
    /// Opens the log in `dir` (created if missing), replaying every existing
    /// segment oldest first through `replay(seq, payload)`; an error from
    /// `replay` aborts the open. New appends go to a new segment.
    pub(crate) fn open(
        dir: &Path,
        segment_bytes: u64,
        mut replay: impl FnMut(u64, &[u8]) -> Result<(), StorageError>,
    ) -> Result<CommitLog, StorageError> {
        std::fs::create_dir_all(dir)?;
        let mut found = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let name = entry.file_name();
            match name.to_str().and_then(parse_segment_name) {
                Some(id) => found.push((id, entry.path())),
                None if name.to_str().is_some_and(|n| n.starts_with(SPARE_PREFIX)) => {
                    std::fs::remove_file(entry.path())?
                }
                None => {
                    tracing::warn!(file = %entry.path().display(), "ignoring unknown file in the commit log directory")
                }
            }
        }
        found.sort_unstable_by_key(|(id, _)| *id);

        let mut segments = Vec::with_capacity(found.len() + 1);
        let mut max_seq = 0;
        for (id, path) in found {
            let (seg_max, bytes) = replay_segment(&path, id, &mut replay)?;
            max_seq = max_seq.max(seg_max);
            segments.push(Segment { id, path, bytes, max_seq: seg_max, current: false });
        }
        let next_id = segments.last().map_or(1, |s| s.id.saturating_add(1));
        let (segment, file) = create_segment(dir, next_id, None)?;
        segments.push(segment);
        Ok(CommitLog {
            dir: dir.to_path_buf(),
            segment_bytes,
            next_seq: AtomicU64::new(max_seq.saturating_add(1)),
            reserved: Mutex::new(BTreeSet::new()),
            appended: AtomicU64::new(0),
            state: Mutex::new(State {
                segments,
                file: Arc::new(file),
                dirty: false,
                broken: false,
                unsynced: Vec::new(),
                next_id: next_id + 1,
                spares: Vec::new(),
                next_spare: 1,
                position: 0,
                prepared: None,
                preparing: false,
            }),
            sync: Mutex::new(SyncState { synced: 0, in_flight: false, failed: None }),
            sync_done: Condvar::new(),
            fsync_latency: metrics::Histogram::new(),
            journal: open_journal(dir),
            rotated: Mutex::new(false),
            rotation: Condvar::new(),
        })
    }

    /// Reserves the next record sequence number (strictly increasing, from 1).
    pub(crate) fn next_seq(&self) -> u64 {
        self.next_seq.fetch_add(1, Ordering::Relaxed)
    }

    /// Reserves the next seq for a write that will be appended and then
    /// merged into a memtable: until the reservation is dropped (after the
    /// memtable insert), `lowest_reserved` holds the segments it may be in.
    pub(crate) fn reserve(&self) -> Reservation<'_> {
        let mut reserved = lock(&self.reserved);
        let seq = self.next_seq();
        reserved.insert(seq);
        Reservation { log: self, seq }
    }

    /// The smallest seq reserved and not released (`u64::MAX`: none).
    pub(crate) fn lowest_reserved(&self) -> u64 {
        lock(&self.reserved).first().copied().unwrap_or(u64::MAX)
    }

    /// Appends one record to the current segment (not fsynced) and returns the
    /// log's end position after it, for `sync`. (Tests; the engine frames
    /// its records itself and calls `append_framed`.)
    #[cfg(test)]
    pub(crate) fn append(&self, seq: u64, payload: &[u8]) -> Result<u64, StorageError> {
        let mut record = Vec::with_capacity(RECORD_HEADER + payload.len());
        record.resize(RECORD_HEADER, 0);
        record.extend_from_slice(payload);
        self.append_framed(seq, &mut record)
    }

    /// `append` of `record[RECORD_HEADER..]`, whose first
    /// `RECORD_HEADER` bytes are room for the header: it is written there
    /// and the record goes to the file as it is, without a copy.
    pub(crate) fn append_framed(&self, seq: u64, record: &mut [u8]) -> Result<u64, StorageError> {
        let size = record.len() as u64;
        let Some((header, payload)) = record.split_first_chunk_mut::<RECORD_HEADER>() else {
            return Err(StorageError::Invalid("commit log record without room for its header".into()));
        };
        let payload_len = payload.len();
        if payload_len > MAX_PAYLOAD {
            return Err(StorageError::Invalid(format!(
                "commit log record of {payload_len} bytes is over the 256 MiB limit"
            )));
        }
        let mut guard = lock(&self.state);
        let st = &mut *guard;
        let current = st.segments.last().map_or(0, |s| s.bytes);
        if st.broken || (current > HEADER && current + size > self.segment_bytes) {
            self.rotate(st)?;
        }
        let (id, offset) = st.segments.last().map_or((0, HEADER), |s| (s.id, s.bytes));

        let crc = record_crc(Some(id), seq, payload);
        header[0..4].copy_from_slice(&(payload_len as u32).to_le_bytes());
        header[4..8].copy_from_slice(&crc.to_le_bytes());
        header[8..16].copy_from_slice(&seq.to_le_bytes());
        st.dirty = true;
        let written = st.file.write_all_at(record, offset);
        if let Err(e) = written {
            st.broken = true;
            return Err(e.into());
        }

        if let Some(segment) = st.segments.last_mut() {
            segment.bytes += size;
            segment.max_seq = segment.max_seq.max(seq);
        }
        st.position += size;
        self.appended.store(st.position, Ordering::Release);
        Ok(st.position)
    }

    /// Closes the current segment and starts a new one.
    fn rotate(&self, st: &mut State) -> Result<(), StorageError> {
        let (segment, file) = match st.prepared.take() {
            Some(prepared) => prepared,
            None => {
                // The allocator is behind (or failing): made here, in the writer's time.
                let made = create_segment(&self.dir, st.next_id, st.spares.pop())?;
                st.next_id += 1;
                made
            }
        };
        *lock(&self.rotated) = true;
        self.rotation.notify_all();
        let old = std::mem::replace(&mut st.file, Arc::new(file));
        if std::mem::take(&mut st.dirty) {
            st.unsynced.push(old);
        }
        st.broken = false;
        if let Some(last) = st.segments.last_mut() {
            last.current = false;
        }
        st.segments.push(segment);
        Ok(())
    }

    /// Makes the next segment ahead of need, unless one is made or being
    /// made: its file (a spare's, renamed, or a new one), its header, the
    /// directory fsync, and, for a spare, its pages read into the page cache.
    /// All of that is off the writers' path (`rotate` then only swaps files);
    /// run by the engine's `commitlog-alloc` thread.
    ///
    /// Why the read: a record rarely fills whole 4 KiB blocks, and a write
    /// into a block whose page is not cached reads the block from disk first,
    /// in the writer's time. A spare's pages go cold while it waits for reuse,
    /// and memory reclaim (DAMON, or plain pressure) may drop them: measured,
    /// writes waited 0.1-0.2 s behind such reads while flushes kept the disk
    /// busy, and 0.1-0.9 s on the directory fsync of a rotation.
    pub(crate) fn prepare_next(&self) -> Result<(), StorageError> {
        let Some((id, spare)) = self.begin_prepare() else { return Ok(()) };
        let reused = spare.is_some();
        let made = create_segment(&self.dir, id, spare);
        if let (Ok((_, file)), true) = (&made, reused) {
            warm(file, self.segment_bytes);
        }
        self.finish_prepare(id, made)
    }

    /// The id and the spare (if any) of the segment to prepare, unless one is
    /// prepared or being prepared.
    fn begin_prepare(&self) -> Option<(u64, Option<PathBuf>)> {
        let mut st = lock(&self.state);
        if st.prepared.is_some() || st.preparing {
            return None;
        }
        st.preparing = true;
        let id = st.next_id;
        st.next_id += 1;
        Some((id, st.spares.pop()))
    }

    /// Keeps segment `id`, just made, for the next rotation, or deletes it
    /// when a rotation that could not wait made a later segment meanwhile
    /// (it would be written after that one and replayed before it).
    fn finish_prepare(&self, id: u64, made: Result<(Segment, File), StorageError>) -> Result<(), StorageError> {
        let mut st = lock(&self.state);
        st.preparing = false;
        let (segment, file) = made?;
        if st.segments.last().is_none_or(|current| current.id < id) {
            st.prepared = Some((segment, file));
            return Ok(());
        }
        drop(st);
        drop(file);
        std::fs::remove_file(&segment.path)?;
        Ok(())
    }

    /// Waits until a rotation took a segment, or `timeout`.
    pub(crate) fn wait_for_rotation(&self, timeout: std::time::Duration) {
        let rotated = lock(&self.rotated);
        let mut rotated = if *rotated {
            rotated
        } else {
            self.rotation.wait_timeout(rotated, timeout).map(|(g, _)| g).unwrap_or_else(|p| p.into_inner().0)
        };
        *rotated = false;
    }

    /// Bytes of the segments on disk (their headers and records).
    pub(crate) fn total_bytes(&self) -> u64 {
        lock(&self.state).segments.iter().map(|s| s.bytes).sum()
    }

    /// Makes every record appended before this call durable; concurrent
    /// callers share fsyncs.
    pub(crate) fn sync(&self) -> Result<(), StorageError> {
        let wanted = self.appended.load(Ordering::Acquire);
        let mut s = lock(&self.sync);
        loop {
            if let Some(reason) = &s.failed {
                return Err(StorageError::Poisoned(reason.clone()));
            }
            if s.synced >= wanted {
                return Ok(());
            }
            if !s.in_flight {
                break;
            }
            s = self.sync_done.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
        s.in_flight = true;
        drop(s);

        let (target, files, sizes) = {
            let mut st = lock(&self.state);
            let mut files = std::mem::take(&mut st.unsynced);
            if std::mem::take(&mut st.dirty) {
                files.push(Arc::clone(&st.file));
            }
            let sizes = self.journal.as_ref().map(|_| st.segments.iter().map(|s| (s.id, s.bytes)).collect::<Vec<_>>());
            (st.position, files, sizes)
        };
        let started = std::time::Instant::now();
        let result = files.iter().try_for_each(|f| f.sync_data());
        if !files.is_empty() {
            self.fsync_latency.record_since(started);
        }
        if let (Ok(()), Some(journal), Some(sizes)) = (&result, &self.journal, sizes) {
            write_journal(journal, &sizes);
        }

        let mut s = lock(&self.sync);
        s.in_flight = false;
        match &result {
            Ok(()) => s.synced = s.synced.max(target),
            Err(e) => s.failed = Some(format!("commit log fsync failed: {e}")),
        }
        drop(s);
        self.sync_done.notify_all();
        result.map_err(StorageError::from)
    }

    /// Discards every closed segment whose records all have seq <
    /// `lowest_live`: renamed a spare while there are fewer than
    /// `MAX_SPARES`, else deleted. Returns how many were discarded. Failed
    /// discards are retried by later calls.
    pub(crate) fn discard_below(&self, lowest_live: u64) -> usize {
        let (doomed, mut spares): (Vec<Segment>, Vec<PathBuf>) = {
            let mut st = lock(&self.state);
            let (doomed, kept) =
                std::mem::take(&mut st.segments).into_iter().partition(|s| !s.current && s.max_seq < lowest_live);
            st.segments = kept;
            let room = MAX_SPARES.saturating_sub(st.spares.len()).min(doomed.len());
            let first = st.next_spare;
            st.next_spare += room as u64;
            (doomed, (first..first + room as u64).map(|n| self.dir.join(format!("{SPARE_PREFIX}{n}.log"))).collect())
        };
        let mut deleted = 0;
        let mut failed = Vec::new();
        let mut kept_spares = Vec::new();
        for segment in doomed {
            if let Some(spare) = spares.pop() {
                match std::fs::rename(&segment.path, &spare) {
                    Ok(()) => {
                        kept_spares.push(spare);
                        deleted += 1;
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!(file = %segment.path.display(), "cannot keep a commit log segment as a spare: {e}")
                    }
                }
            }
            match std::fs::remove_file(&segment.path) {
                Ok(()) => deleted += 1,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    tracing::warn!(file = %segment.path.display(), "commit log segment was already gone");
                    deleted += 1;
                }
                Err(e) => {
                    tracing::warn!(file = %segment.path.display(), "cannot delete commit log segment: {e}");
                    failed.push(segment);
                }
            }
        }
        if !failed.is_empty() || !kept_spares.is_empty() {
            let mut st = lock(&self.state);
            st.spares.append(&mut kept_spares);
            st.segments.append(&mut failed);
            st.segments.sort_unstable_by_key(|s| s.id);
        }
        deleted
    }

    /// Total bytes of the segments on disk, closed and current.
    pub(crate) fn disk_bytes(&self) -> u64 {
        lock(&self.state).segments.iter().map(|s| s.bytes).sum()
    }

    /// The smallest max-seq among closed segments holding records: the seq the
    /// oldest segment pins (None if there is none).
    pub(crate) fn oldest_pinned(&self) -> Option<u64> {
        let st = lock(&self.state);
        st.segments.iter().filter(|s| !s.current && s.max_seq > 0).map(|s| s.max_seq).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Records = Vec<(u64, Vec<u8>)>;

    fn reopen(dir: &Path, segment_bytes: u64) -> (CommitLog, Records) {
        let mut seen = Vec::new();
        let log = CommitLog::open(dir, segment_bytes, |seq, p| {
            seen.push((seq, p.to_vec()));
            Ok(())
        })
        .unwrap();
        (log, seen)
    }

    fn write(log: &CommitLog, sizes: impl IntoIterator<Item = usize>) -> Records {
        let records: Records = sizes.into_iter().map(|n| (log.next_seq(), vec![n as u8; n])).collect();
        for (seq, payload) in &records {
            log.append(*seq, payload).unwrap();
        }
        log.sync().unwrap();
        records
    }

    /// The segment files (not the spares), in id order.
    fn segment_files(dir: &Path) -> Vec<PathBuf> {
        let mut files: Vec<_> = all_files(dir).into_iter().filter(|p| !is_spare(p)).collect();
        files.sort();
        files
    }

    fn all_files(dir: &Path) -> Vec<PathBuf> {
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect()
    }

    fn is_spare(path: &Path) -> bool {
        path.file_name().unwrap().to_str().unwrap().starts_with(SPARE_PREFIX)
    }

    #[test]
    fn replays_records_across_segments() {
        let dir = tempfile::tempdir().unwrap();
        let (log, seen) = reopen(dir.path(), 4096);
        assert!(seen.is_empty());
        assert_eq!(log.next_seq(), 1);
        let mut written = write(&log, (0..300).map(|i| i * 37 % 900));
        written.extend(write(&log, [5000, 0, 10]));
        drop(log);
        assert!(segment_files(dir.path()).len() > 5);
        let (log, seen) = reopen(dir.path(), 4096);
        assert_eq!(seen, written);
        assert_eq!(log.next_seq(), written.len() as u64 + 2);
        written.extend(write(&log, [1, 2, 3]));
        drop(log);
        assert_eq!(reopen(dir.path(), 4096).1, written);
    }

    /// Damages the log with `damage(file, offsets of its records)`, then checks that
    /// only the first `kept` records replay and that the log keeps working.
    fn damaged(kept: usize, damage: impl FnOnce(&Path, &[u64])) {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = reopen(dir.path(), 1 << 20);
        let written = write(&log, (1..=20).map(|i| i * 10));
        drop(log);
        let file = segment_files(dir.path()).pop().unwrap();
        let offsets: Vec<u64> =
            written.iter().scan(HEADER, |at, (_, p)| Some(std::mem::replace(at, *at + 16 + p.len() as u64))).collect();
        damage(&file, &offsets);
        let (log, seen) = reopen(dir.path(), 1 << 20);
        assert_eq!(seen, written[..kept]);
        let mut expected = seen;
        expected.extend(write(&log, [7, 8, 9]));
        drop(log);
        assert_eq!(segment_files(dir.path()).len(), 2);
        assert_eq!(reopen(dir.path(), 1 << 20).1, expected);
    }

    #[test]
    fn torn_tail_ends_replay() {
        damaged(19, |file, offsets| {
            let f = OpenOptions::new().write(true).open(file).unwrap();
            f.set_len(offsets[19] + 16 + 50).unwrap();
        });
    }

    #[test]
    fn corrupt_record_ends_replay() {
        damaged(9, |file, offsets| {
            let mut bytes = std::fs::read(file).unwrap();
            bytes[offsets[9] as usize + 20] ^= 0x40;
            std::fs::write(file, bytes).unwrap();
        });
    }

    #[test]
    fn oversized_length_ends_replay() {
        damaged(4, |file, offsets| {
            let mut bytes = std::fs::read(file).unwrap();
            let at = offsets[4] as usize;
            bytes[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
            std::fs::write(file, bytes).unwrap();
        });
    }

    #[test]
    fn a_segment_cut_anywhere_replays_the_records_before_the_cut() {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = reopen(dir.path(), 1 << 20);
        let written = write(&log, [0, 3, 20]);
        drop(log);
        let file = segment_files(dir.path()).pop().unwrap();
        let bytes = std::fs::read(&file).unwrap();
        let ends: Vec<u64> = written
            .iter()
            .scan(HEADER, |at, (_, p)| {
                *at += 16 + p.len() as u64;
                Some(*at)
            })
            .collect();
        assert_eq!(ends.last(), Some(&(bytes.len() as u64)));
        // Inside the segment header, inside each record header, inside each payload.
        for cut in 0..=bytes.len() {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join(file.file_name().unwrap()), &bytes[..cut]).unwrap();
            let (_, seen) = reopen(dir.path(), 1 << 20);
            let whole = ends.iter().filter(|&&end| end <= cut as u64).count();
            assert_eq!(seen, written[..whole], "cut at {cut}");
        }
    }

    #[test]
    fn a_record_without_room_for_its_header_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = reopen(dir.path(), 1024);
        assert!(matches!(log.append_framed(1, &mut [0u8; RECORD_HEADER - 1]), Err(StorageError::Invalid(_))));
        log.append_framed(2, &mut [0u8; RECORD_HEADER]).unwrap();
        drop(log);
        assert_eq!(reopen(dir.path(), 1024).1, vec![(2, Vec::new())]);
    }

    #[test]
    fn discards_flushed_segments() {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = reopen(dir.path(), 256);
        assert_eq!(log.oldest_pinned(), None);
        // Two 116-byte records per segment: [1,2] [3,4] [5,6] [7,8] [9,10 current].
        write(&log, [100; 10]);
        let segment = HEADER + 2 * 116;
        assert_eq!(log.disk_bytes(), 5 * segment);
        assert_eq!(log.oldest_pinned(), Some(2));
        assert_eq!(log.discard_below(4), 1);
        assert_eq!(log.discard_below(5), 1);
        assert_eq!(log.disk_bytes(), 3 * segment);
        assert_eq!(log.oldest_pinned(), Some(6));
        assert_eq!(log.discard_below(100), 2);
        assert_eq!((log.oldest_pinned(), log.disk_bytes()), (None, segment));
        assert_eq!(segment_files(dir.path()).len(), 1);
        assert_eq!(all_files(dir.path()).len(), 1 + MAX_SPARES.min(4));
        drop(log);

        let (log, seen) = reopen(dir.path(), 256);
        assert_eq!(seen.iter().map(|r| r.0).collect::<Vec<_>>(), [9, 10]);
        assert_eq!(log.oldest_pinned(), Some(10));
        assert_eq!(log.discard_below(10), 0);
        assert_eq!(log.discard_below(11), 1);
        assert_eq!((log.disk_bytes(), segment_files(dir.path()).len()), (HEADER, 1));
        // The spares of the last run were deleted at open; this run's one is new.
        assert_eq!(all_files(dir.path()).len(), 2);
    }

    #[test]
    fn recycled_segments_replay_only_their_own_records() {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = reopen(dir.path(), 1024);
        // Two 416-byte records per segment, one segment more than the spares
        // kept, and the current one: [1,2] .. [last - 1, last].
        let last = 2 * (MAX_SPARES as u64 + 2);
        write(&log, vec![400; last as usize]);
        assert_eq!(log.discard_below(u64::MAX), MAX_SPARES + 1);
        assert_eq!(all_files(dir.path()).iter().filter(|p| is_spare(p)).count(), MAX_SPARES);
        // 26-byte records, 38 to a segment: the reused files end their new
        // records long before the old ones' bytes end.
        let mut written: Records = (last - 1..=last).map(|seq| (seq, vec![144u8; 400])).collect();
        written.extend(write(&log, std::iter::repeat_n(10, 40 * (MAX_SPARES + 1))));
        assert_eq!(all_files(dir.path()).iter().filter(|p| is_spare(p)).count(), 0);
        drop(log);
        let (log, seen) = reopen(dir.path(), 1024);
        assert_eq!(seen, written);
        written.extend(write(&log, [3, 2, 1]));
        drop(log);
        assert_eq!(reopen(dir.path(), 1024).1, written);
    }

    #[test]
    fn a_spare_renamed_before_its_header_was_written_holds_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = reopen(dir.path(), 1024);
        write(&log, [400; 4]);
        assert_eq!(log.discard_below(3), 1);
        drop(log);
        // A crash after a rotation renamed the spare, before it wrote the header.
        let spare = all_files(dir.path()).into_iter().find(|p| is_spare(p)).unwrap();
        std::fs::rename(&spare, dir.path().join(segment_name(7))).unwrap();
        let (_, seen) = reopen(dir.path(), 1024);
        assert_eq!(seen.iter().map(|r| r.0).collect::<Vec<_>>(), [3, 4]);
    }

    #[test]
    fn rotations_take_the_prepared_segment_and_replay_stays_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = reopen(dir.path(), 1024);
        let mut written = write(&log, [400; 6]);
        // Spares to reuse: the first two segments' files.
        assert_eq!(log.discard_below(5), 2);
        for round in 0..6 {
            log.prepare_next().unwrap();
            let prepared = lock(&log.state).prepared.as_ref().map(|(s, _)| s.id).unwrap();
            assert!(prepared > lock(&log.state).segments.last().unwrap().id);
            // Prepared twice is prepared once.
            log.prepare_next().unwrap();
            assert_eq!(lock(&log.state).prepared.as_ref().map(|(s, _)| s.id), Some(prepared));
            written.extend(write(&log, [400, 400, 30 + round]));
            // The rotation took it.
            assert!(lock(&log.state).prepared.is_none());
            assert!(lock(&log.state).segments.iter().any(|s| s.id == prepared && s.bytes > HEADER));
        }
        // One prepared and never written: at the next open, a segment of no records.
        log.prepare_next().unwrap();
        drop(log);
        let (log, seen) = reopen(dir.path(), 1024);
        let seqs = |r: &Records| r.iter().map(|(q, _)| *q).collect::<Vec<_>>();
        assert_eq!(seqs(&seen), seqs(&written).into_iter().filter(|&q| q >= 5).collect::<Vec<_>>());
        assert_eq!(seen, written.iter().filter(|(q, _)| *q >= 5).cloned().collect::<Records>());
        // Every closed segment, the one never written among them, goes once its records are flushed.
        log.discard_below(u64::MAX);
        assert_eq!(segment_files(dir.path()).len(), 1);
    }

    #[test]
    fn a_segment_prepared_behind_a_rotation_is_deleted_unused() {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = reopen(dir.path(), 1024);
        let mut written = write(&log, [400; 4]);
        // The allocator takes an id, then writers rotate before it is done.
        let (id, spare) = log.begin_prepare().unwrap();
        assert!(log.begin_prepare().is_none());
        written.extend(write(&log, [400; 2]));
        let current = lock(&log.state).segments.last().unwrap().id;
        assert!(current > id);
        let made = create_segment(dir.path(), id, spare).unwrap();
        let path = made.0.path.clone();
        log.finish_prepare(id, Ok(made)).unwrap();
        assert!(!path.exists());
        assert!(lock(&log.state).prepared.is_none());
        // The next one is made after the current segment.
        log.prepare_next().unwrap();
        assert!(lock(&log.state).prepared.as_ref().map(|(s, _)| s.id).unwrap() > current);
        written.extend(write(&log, [400; 3]));
        drop(log);
        assert_eq!(reopen(dir.path(), 1024).1, written);
    }

    /// Random interleavings of appends, segments prepared ahead (and ones a
    /// rotation overtook), discards and reopens: every reopen replays, in
    /// append order, every record not discarded (all with seq >= the highest
    /// discard bound, and none that was never written).
    #[test]
    fn random_interleavings_of_prepared_segments_replay_every_live_record_in_order() {
        use rand::{Rng, SeedableRng};
        let check = |seen: &Records, written: &Records, bound: u64, step: usize| {
            let mut rest = written.iter();
            for record in seen {
                assert!(rest.any(|w| w == record), "step {step}: {} replayed out of order or never written", record.0);
            }
            let kept: Vec<u64> = seen.iter().map(|r| r.0).collect();
            for (seq, _) in written.iter().filter(|(q, _)| *q >= bound) {
                assert!(kept.contains(seq), "step {step}: record {seq} (bound {bound}) lost");
            }
        };
        for seed in 0..8u64 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let dir = tempfile::tempdir().unwrap();
            let (mut log, _) = reopen(dir.path(), 1024);
            let (mut written, mut bound): (Records, u64) = (Vec::new(), 0);
            let sizes = |rng: &mut rand::rngs::StdRng| {
                (0..rng.gen_range(1..4)).map(|_| rng.gen_range(0..700)).collect::<Vec<_>>()
            };
            for step in 0..150 {
                match rng.gen_range(0..10) {
                    0..=3 => written.extend(write(&log, sizes(&mut rng))),
                    4 | 5 => log.prepare_next().unwrap(),
                    6 => {
                        if let Some((id, spare)) = log.begin_prepare() {
                            if rng.gen_bool(0.5) {
                                written.extend(write(&log, sizes(&mut rng)));
                            }
                            let made = create_segment(dir.path(), id, spare);
                            log.finish_prepare(id, made).unwrap();
                        }
                    }
                    7 | 8 => {
                        let next = written.last().map_or(1, |(q, _)| q + 1).max(bound);
                        bound = bound.max(rng.gen_range(bound..=next));
                        log.discard_below(bound);
                    }
                    _ => {
                        drop(log);
                        let seen;
                        (log, seen) = reopen(dir.path(), 1024);
                        check(&seen, &written, bound, step);
                        written = seen;
                    }
                }
            }
            drop(log);
            check(&reopen(dir.path(), 1024).1, &written, bound, usize::MAX);
        }
    }

    #[test]
    fn first_format_segments_still_replay() {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = MAGIC_V1.to_vec();
        for (seq, payload) in [(5u64, &b"five"[..]), (6, &b"six"[..])] {
            let mut body = seq.to_le_bytes().to_vec();
            body.extend_from_slice(payload);
            bytes.extend_from_slice(&(payload.len() as u32).to_le_bytes());
            bytes.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
            bytes.extend_from_slice(&body);
        }
        std::fs::write(dir.path().join(segment_name(3)), bytes).unwrap();
        let (log, seen) = reopen(dir.path(), 1024);
        assert_eq!(seen, vec![(5, b"five".to_vec()), (6, b"six".to_vec())]);
        assert_eq!(log.next_seq(), 7);
    }

    #[test]
    fn concurrent_writers_share_syncs() {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = reopen(dir.path(), 64 << 10);
        let mut written: Records = std::thread::scope(|s| {
            let threads: Vec<_> = (0..8)
                .map(|t| {
                    let log = &log;
                    s.spawn(move || {
                        (0..500)
                            .map(|i| {
                                let seq = log.next_seq();
                                let payload = format!("thread {t} record {i}").into_bytes();
                                log.append(seq, &payload).unwrap();
                                log.sync().unwrap();
                                (seq, payload)
                            })
                            .collect::<Records>()
                    })
                })
                .collect();
            threads.into_iter().flat_map(|t| t.join().unwrap()).collect()
        });
        drop(log);
        let (_, mut seen) = reopen(dir.path(), 64 << 10);
        written.sort();
        seen.sort();
        assert_eq!(seen.len(), 4000);
        assert_eq!(seen, written);
    }

    #[test]
    fn replay_error_aborts_open() {
        let dir = tempfile::tempdir().unwrap();
        write(&reopen(dir.path(), 4096).0, [1, 2, 3, 4]);
        let mut calls = 0;
        let result = CommitLog::open(dir.path(), 4096, |seq, _| {
            calls += 1;
            match seq {
                3 => Err(StorageError::Invalid("boom".into())),
                _ => Ok(()),
            }
        });
        assert!(matches!(result, Err(StorageError::Invalid(m)) if m == "boom"));
        assert_eq!(calls, 3);
    }
}
