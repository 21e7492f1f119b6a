//! `HintStore`: the per-target segment queues, their locking, appends,
//! recovery, replay cursors and deletion. The crate docs (`lib.rs`) state the
//! contract; this module keeps it.
//!
//! Invariants (per target, under its mutex):
//! - `segments` is in sequence order, which is append order; at most one
//!   segment is active (open for appends) and it is the last one.
//! - A segment's `len` is the end of its last valid record; bytes past it are
//!   never read. `delivered_to` (≥ `HEADER_LEN`, ≤ `len`) is the acknowledged
//!   prefix, kept in memory only.
//! - `pending_bytes` is the sum over segments of `len - delivered_to`.
//! - Replay reads only sealed segments, outside the lock; a sealed segment's
//!   bytes up to `len` never change, so a reader never races an append.
//! - Sequence numbers only grow (also across `delete_target` and reopen, where
//!   they restart past the largest file name found), so a stale cursor can
//!   never acknowledge a newer segment.
//!
//! Lock order: the target map, then one target's mutex; never the reverse.

use crate::format::{encode_record, SegmentHeader, HEADER_LEN, MAX_PAYLOAD_LEN, RECORD_HEADER_LEN};
use crate::segment::{self, Damage, DamageKind};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{SystemTime, UNIX_EPOCH};
use tracing::{debug, error, warn};
use uuid::Uuid;

/// Default size after which a target's active segment is sealed and a new one started.
pub const DEFAULT_SEGMENT_BYTES: u64 = 32 << 20;

const SEGMENT_SUFFIX: &str = ".hints";
const CORRUPT_SUFFIX: &str = ".hints.corrupt";

/// Where and how hints are kept. Build with `HintConfig::new` and adjust fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HintConfig {
    /// Directory of the segment files (created if missing). Owned by one store.
    pub dir: PathBuf,
    /// Bound on a target's pending bytes (records with their 16-byte headers; segment
    /// headers excluded); 0 = unlimited (Cassandra's `max_hints_size_per_host`).
    pub max_bytes_per_target: u64,
    /// Seal the active segment and start a new one when the next record would
    /// take it past this many bytes (a segment always holds at least one record).
    pub segment_bytes: u64,
}

impl HintConfig {
    /// Unlimited bytes per target, 32 MiB segments.
    pub fn new(dir: impl Into<PathBuf>) -> HintConfig {
        HintConfig { dir: dir.into(), max_bytes_per_target: 0, segment_bytes: DEFAULT_SEGMENT_BYTES }
    }
}

/// One hint: a mutation for a target replica, as opaque bytes, with the time it was hinted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hint {
    pub created_at_ms: i64,
    pub payload: Vec<u8>,
}

/// Hints to deliver to `target`, oldest first, and the cursor `ack` needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HintBatch {
    pub target: Uuid,
    pub hints: Vec<Hint>,
    cursor: Cursor,
}

impl HintBatch {
    /// Bytes of the segment this batch covers (records skipped by the
    /// `drop_older_than` cutoff included): what `ack` takes off `pending_bytes`.
    pub fn bytes(&self) -> u64 {
        self.cursor.end - self.cursor.start
    }
}

/// A byte range `[start, end)` of record data in segment `seq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cursor {
    seq: u64,
    start: u64,
    end: u64,
    /// Hints in the range left out of the batch by the age cutoff.
    skipped: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum HintError {
    #[error("hints for {target} would exceed the {max_bytes}-byte bound")]
    TargetFull { target: Uuid, max_bytes: u64 },
    #[error("hint payload of {len} bytes exceeds the {max}-byte limit")]
    PayloadTooLarge { len: usize, max: usize },
    #[error("invalid hint store configuration: {0}")]
    InvalidConfig(String),
    #[error("hint store I/O error: {0}")]
    Io(#[from] io::Error),
}

/// Counters since `open` (recovery included).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HintStats {
    /// Segments whose reading ended at a record running past the end of the
    /// data (an interrupted append): the record and anything after it skipped.
    pub torn_records: u64,
    /// Segments whose reading ended at a record with a bad checksum or an
    /// impossible length: the record and anything after it skipped.
    pub corrupt_records: u64,
    /// Segment files with an unreadable header (or another target's), renamed `.corrupt`.
    pub corrupt_segments: u64,
    /// Hints acknowledged without being delivered because they were older than
    /// the `drop_older_than` cutoff (whole segments dropped by it not included).
    pub expired_hints: u64,
    /// Hints stored since `open` (Cassandra's `Storage.TotalHints`).
    pub stored_hints: u64,
    /// Hints delivered and acknowledged since `open` (`HintsService.HintsSucceeded`).
    pub replayed_hints: u64,
}

#[derive(Debug, Default)]
struct Counters {
    torn_records: AtomicU64,
    corrupt_records: AtomicU64,
    corrupt_segments: AtomicU64,
    expired_hints: AtomicU64,
    stored_hints: AtomicU64,
    replayed_hints: AtomicU64,
}

#[derive(Debug)]
struct Segment {
    seq: u64,
    path: PathBuf,
    /// End of the last valid record.
    len: u64,
    /// End of the acknowledged prefix (in memory only).
    delivered_to: u64,
    /// Newest `created_at_ms` in the segment (`i64::MIN` when empty).
    max_created_at_ms: i64,
    /// Open while the segment is active or has writes not yet fsynced.
    file: Option<Arc<File>>,
    active: bool,
    /// Written since the last fsync.
    dirty: bool,
}

impl Segment {
    fn undelivered(&self) -> u64 {
        self.len - self.delivered_to
    }

    /// No more appends; the handle is kept only until a `sync` needs it.
    fn seal(&mut self) {
        self.active = false;
        if !self.dirty {
            self.file = None;
        }
    }
}

#[derive(Debug)]
struct TargetState {
    target: Uuid,
    segments: VecDeque<Segment>,
    next_seq: u64,
    pending_bytes: u64,
    /// Hints created before this are skipped by `next_batch`.
    cutoff_ms: i64,
}

impl TargetState {
    fn new(target: Uuid, next_seq: u64) -> TargetState {
        TargetState { target, segments: VecDeque::new(), next_seq, pending_bytes: 0, cutoff_ms: i64::MIN }
    }

    /// Takes off segment `seq`'s bytes from `new_len` on (damage found there).
    fn truncate(&mut self, seq: u64, new_len: u64) {
        if let Some(seg) = self.segments.iter_mut().find(|s| s.seq == seq) {
            let new_len = new_len.clamp(seg.delivered_to, seg.len);
            self.pending_bytes -= seg.len - new_len;
            seg.len = new_len;
        }
    }
}

/// The durable hint store. See the crate docs for the contract.
pub struct HintStore {
    config: HintConfig,
    targets: RwLock<HashMap<Uuid, Arc<Mutex<TargetState>>>>,
    /// A segment file was created since the directory was last fsynced.
    dir_dirty: AtomicBool,
    counters: Counters,
}

impl std::fmt::Debug for HintStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HintStore")
            .field("dir", &self.config.dir)
            .field("targets", &self.targets().len())
            .field("pending_bytes", &self.total_pending_bytes())
            .finish()
    }
}

impl HintStore {
    /// Opens (creating if needed) `config.dir` and recovers its segments: each
    /// is walked and checked, a damaged tail is skipped (warn log, counted in
    /// `stats`), a segment with an unreadable header is renamed `.corrupt`,
    /// empty ones are deleted. Recovered segments are sealed; new hints go to
    /// new segments. Nothing is acknowledged yet: every recovered hint is pending.
    pub fn open(config: HintConfig) -> Result<HintStore, HintError> {
        if config.segment_bytes == 0 {
            return Err(HintError::InvalidConfig("segment_bytes must be positive".to_string()));
        }
        fs::create_dir_all(&config.dir)?;
        let store = HintStore {
            config,
            targets: RwLock::new(HashMap::new()),
            dir_dirty: AtomicBool::new(false),
            counters: Counters::default(),
        };
        let mut found: BTreeMap<Uuid, (u64, Vec<(u64, PathBuf)>)> = BTreeMap::new();
        for entry in fs::read_dir(&store.config.dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let Some((target, seq, corrupt)) = name.to_str().and_then(parse_segment_name) else { continue };
            if !entry.file_type()?.is_file() {
                continue;
            }
            let (next_seq, files) = found.entry(target).or_default();
            *next_seq = (*next_seq).max(seq.saturating_add(1));
            if !corrupt {
                files.push((seq, entry.path()));
            }
        }
        let mut map = HashMap::new();
        for (target, (next_seq, mut files)) in found {
            files.sort_unstable();
            let mut state = TargetState::new(target, next_seq);
            for (seq, path) in files {
                if let Some(seg) = store.recover_segment(target, seq, path)? {
                    state.pending_bytes += seg.undelivered();
                    state.segments.push_back(seg);
                }
            }
            map.insert(target, Arc::new(Mutex::new(state)));
        }
        *write(&store.targets) = map;
        Ok(store)
    }

    fn recover_segment(&self, target: Uuid, seq: u64, path: PathBuf) -> Result<Option<Segment>, HintError> {
        let (header, file_len) = segment::read_header(&path)?;
        match header {
            Ok(h) if h.target == target => {}
            Ok(h) => {
                self.quarantine(&path, &format!("header names target {}", h.target));
                return Ok(None);
            }
            Err(_) if file_len == 0 => {
                // Created, then the process died before the header was written.
                debug!(path = %path.display(), "removing an empty hint segment");
                remove_segment_file(&path)?;
                return Ok(None);
            }
            Err(e) => {
                self.quarantine(&path, &e.to_string());
                return Ok(None);
            }
        }
        let walk = segment::walk(&path, HEADER_LEN, file_len, u64::MAX, false)?;
        if let Some(damage) = &walk.damage {
            self.report_damage(&path, damage, walk.records);
        }
        if walk.records == 0 {
            if walk.damage.is_some() {
                self.quarantine(&path, "no readable record");
            } else {
                debug!(path = %path.display(), "removing a hint segment without records");
                remove_segment_file(&path)?;
            }
            return Ok(None);
        }
        Ok(Some(Segment {
            seq,
            path,
            len: walk.next,
            delivered_to: HEADER_LEN,
            max_created_at_ms: walk.max_created_at_ms,
            file: None,
            active: false,
            dirty: false,
        }))
    }

    /// Renames a segment that cannot be read to `<name>.hints.corrupt` (kept for
    /// inspection, never read again).
    fn quarantine(&self, path: &Path, why: &str) {
        self.counters.corrupt_segments.fetch_add(1, Ordering::Relaxed);
        let mut to = path.as_os_str().to_owned();
        to.push(".corrupt");
        match fs::rename(path, &to) {
            Ok(()) => warn!(path = %path.display(), why, "unreadable hint segment skipped and renamed .corrupt"),
            Err(e) => {
                warn!(path = %path.display(), why, error = %e, "unreadable hint segment skipped; renaming it failed")
            }
        }
    }

    fn report_damage(&self, path: &Path, damage: &Damage, records_kept: u64) {
        let counter = match damage.kind {
            DamageKind::Torn => &self.counters.torn_records,
            DamageKind::Corrupt => &self.counters.corrupt_records,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        warn!(
            path = %path.display(),
            offset = damage.offset,
            kind = ?damage.kind,
            detail = %damage.detail,
            records_kept,
            "hint segment damaged: reading stops here, later records in this segment are skipped"
        );
    }

    /// The configuration the store was opened with.
    pub fn config(&self) -> &HintConfig {
        &self.config
    }

    /// Damage and expiry counters since `open`.
    pub fn stats(&self) -> HintStats {
        let c = &self.counters;
        HintStats {
            torn_records: c.torn_records.load(Ordering::Relaxed),
            corrupt_records: c.corrupt_records.load(Ordering::Relaxed),
            corrupt_segments: c.corrupt_segments.load(Ordering::Relaxed),
            expired_hints: c.expired_hints.load(Ordering::Relaxed),
            stored_hints: c.stored_hints.load(Ordering::Relaxed),
            replayed_hints: c.replayed_hints.load(Ordering::Relaxed),
        }
    }

    fn state(&self, target: Uuid) -> Option<Arc<Mutex<TargetState>>> {
        read(&self.targets).get(&target).cloned()
    }

    fn state_or_create(&self, target: Uuid) -> Arc<Mutex<TargetState>> {
        if let Some(state) = self.state(target) {
            return state;
        }
        write(&self.targets).entry(target).or_insert_with(|| Arc::new(Mutex::new(TargetState::new(target, 0)))).clone()
    }

    /// Appends one hint for `target` with a single `write` to its active
    /// segment: once this returns `Ok` the hint survives the process being
    /// killed (not a machine crash: that needs `sync`). Refuses with
    /// `TargetFull` when the target's pending bytes would exceed
    /// `max_bytes_per_target`, and with `PayloadTooLarge` over `MAX_PAYLOAD_LEN`.
    /// After a failed write the partial record is cut off (best effort) and the
    /// segment sealed, so no later record lands behind a torn one.
    pub fn store(&self, target: Uuid, created_at_ms: i64, payload: &[u8]) -> Result<(), HintError> {
        if payload.len() > MAX_PAYLOAD_LEN {
            return Err(HintError::PayloadTooLarge { len: payload.len(), max: MAX_PAYLOAD_LEN });
        }
        let record_len = RECORD_HEADER_LEN + payload.len() as u64;
        let max_bytes = self.config.max_bytes_per_target;
        let state = self.state_or_create(target);
        let mut guard = lock(&state);
        let st = &mut *guard;
        if max_bytes > 0 && st.pending_bytes + record_len > max_bytes {
            return Err(HintError::TargetFull { target, max_bytes });
        }
        let roll = match st.segments.back() {
            Some(seg) if seg.active => seg.len > HEADER_LEN && seg.len + record_len > self.config.segment_bytes,
            _ => true,
        };
        if roll {
            if let Some(seg) = st.segments.back_mut() {
                seg.seal();
            }
            let seg = self.create_segment(st)?;
            st.segments.push_back(seg);
        }
        let mut record = Vec::with_capacity(record_len as usize);
        encode_record(created_at_ms, payload, &mut record);
        let seg = match st.segments.back_mut() {
            Some(seg) if seg.active => seg,
            _ => return Err(io::Error::other("hint store lost its active segment").into()),
        };
        let Some(file) = seg.file.clone() else {
            return Err(io::Error::other("active hint segment has no open file").into());
        };
        if let Err(e) = (&*file).write_all(&record) {
            error!(path = %seg.path.display(), error = %e, "hint append failed; sealing the segment");
            if let Err(te) = file.set_len(seg.len) {
                warn!(path = %seg.path.display(), error = %te, "could not cut off a partial hint record");
            }
            seg.dirty = true;
            seg.seal();
            return Err(e.into());
        }
        seg.len += record_len;
        seg.dirty = true;
        seg.max_created_at_ms = seg.max_created_at_ms.max(created_at_ms);
        st.pending_bytes += record_len;
        self.counters.stored_hints.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn create_segment(&self, st: &mut TargetState) -> io::Result<Segment> {
        let seq = st.next_seq;
        st.next_seq += 1;
        let path = self.config.dir.join(segment_file_name(st.target, seq));
        let file = OpenOptions::new().append(true).create_new(true).open(&path)?;
        let header = SegmentHeader { target: st.target, created_at_ms: now_ms() }.encode();
        if let Err(e) = (&file).write_all(&header) {
            drop(file);
            if let Err(re) = fs::remove_file(&path) {
                warn!(path = %path.display(), error = %re, "could not remove a hint segment whose header failed to write");
            }
            return Err(e);
        }
        self.dir_dirty.store(true, Ordering::Release);
        Ok(Segment {
            seq,
            path,
            len: HEADER_LEN,
            delivered_to: HEADER_LEN,
            max_created_at_ms: i64::MIN,
            file: Some(Arc::new(file)),
            active: true,
            dirty: true,
        })
    }

    /// Fsyncs every segment written since the last sync, then the directory if
    /// a segment was created. Returns the first error; a segment whose fsync
    /// failed is sealed (its hints may or may not be on disk; none are added to it).
    /// Dropping the store does not sync: the node calls this at shutdown.
    pub fn sync(&self) -> Result<(), HintError> {
        let states: Vec<_> = read(&self.targets).values().cloned().collect();
        let mut first_err: Option<io::Error> = None;
        for state in states {
            let files: Vec<(u64, Arc<File>)> = {
                let mut st = lock(&state);
                let mut files = Vec::new();
                for seg in st.segments.iter_mut().filter(|s| s.dirty) {
                    seg.dirty = false;
                    if let Some(file) = &seg.file {
                        files.push((seg.seq, file.clone()));
                    }
                    if !seg.active {
                        seg.file = None;
                    }
                }
                files
            };
            for (seq, file) in files {
                if let Err(e) = file.sync_data() {
                    error!(error = %e, seq, "fsync of a hint segment failed; sealing it");
                    if let Some(seg) = lock(&state).segments.iter_mut().find(|s| s.seq == seq) {
                        seg.seal();
                    }
                    first_err.get_or_insert(e);
                }
            }
        }
        if self.dir_dirty.swap(false, Ordering::AcqRel) {
            if let Err(e) = File::open(&self.config.dir).and_then(|d| d.sync_all()) {
                self.dir_dirty.store(true, Ordering::Release);
                first_err.get_or_insert(e);
            }
        }
        match first_err {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }

    /// Targets with pending hints, sorted.
    pub fn targets(&self) -> Vec<Uuid> {
        let map = read(&self.targets);
        let mut targets: Vec<Uuid> = map.iter().filter(|(_, s)| lock(s).pending_bytes > 0).map(|(t, _)| *t).collect();
        targets.sort_unstable();
        targets
    }

    /// Bytes of `target`'s records not yet acknowledged (segment headers excluded).
    pub fn pending_bytes(&self, target: Uuid) -> u64 {
        self.state(target).map_or(0, |s| lock(&s).pending_bytes)
    }

    /// `pending_bytes` summed over all targets.
    pub fn total_pending_bytes(&self) -> u64 {
        read(&self.targets).values().map(|s| lock(s).pending_bytes).sum()
    }

    /// The oldest undelivered hints of `target`, from one segment, starting
    /// after the last acknowledged position: records are taken while their
    /// bytes (16-byte record headers included) fit in `max_bytes`, and always
    /// at least one. `None` when nothing is pending.
    ///
    /// If the oldest pending hints are in the active segment, it is sealed
    /// first (the next `store` starts a new segment), so the file is read
    /// outside the lock without racing appends. Calling again before `ack`
    /// returns the same hints again. Hints older than the `drop_older_than`
    /// cutoff are left out (a range of only such hints is acknowledged
    /// internally). Damage found while reading ends the segment there (warn
    /// log, counted) and the hints before it are returned.
    pub fn next_batch(&self, target: Uuid, max_bytes: usize) -> Result<Option<HintBatch>, HintError> {
        let Some(state) = self.state(target) else { return Ok(None) };
        loop {
            let (seq, path, start, end) = {
                let mut guard = lock(&state);
                let st = &mut *guard;
                loop {
                    let Some(front) = st.segments.front_mut() else { return Ok(None) };
                    if front.delivered_to < front.len {
                        front.seal();
                        break (front.seq, front.path.clone(), front.delivered_to, front.len);
                    }
                    if front.active {
                        return Ok(None);
                    }
                    // Fully delivered (or emptied by damage): its file goes.
                    if let Some(done) = st.segments.pop_front() {
                        remove_segment_file(&done.path)?;
                    }
                }
            };
            let walk = match segment::walk(&path, start, end, max_bytes as u64, true) {
                Ok(walk) => walk,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    // Deleted by a concurrent ack or delete_target, or from outside.
                    let mut st = lock(&state);
                    if st.segments.iter().any(|s| s.seq == seq) {
                        warn!(path = %path.display(), "hint segment file vanished; its hints are lost");
                        st.truncate(seq, 0);
                        st.segments.retain(|s| s.seq != seq);
                    }
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            let mut guard = lock(&state);
            let st = &mut *guard;
            if !st.segments.iter().any(|s| s.seq == seq) {
                continue; // acknowledged or deleted meanwhile
            }
            if let Some(damage) = &walk.damage {
                self.report_damage(&path, damage, walk.records);
                st.truncate(seq, damage.offset);
            } else if walk.next == start {
                // Unreachable (a walk over a non-empty range yields a record or
                // damage); cut the segment rather than loop.
                st.truncate(seq, start);
            }
            let cutoff = st.cutoff_ms;
            let read = walk.hints.len();
            let hints: Vec<Hint> = walk.hints.into_iter().filter(|h| h.created_at_ms >= cutoff).collect();
            let cursor = Cursor { seq, start, end: walk.next, skipped: (read - hints.len()) as u64 };
            if hints.is_empty() {
                self.apply_ack(st, cursor)?;
                continue;
            }
            return Ok(Some(HintBatch { target, hints, cursor }));
        }
    }

    /// Marks `batch` delivered. A segment delivered to its end (and sealed) has
    /// its file deleted. Progress inside a segment is kept in memory only: after
    /// a restart the segment is replayed from its start. Acknowledging a batch
    /// twice, or after `delete_target`, does nothing.
    pub fn ack(&self, batch: &HintBatch) -> Result<(), HintError> {
        let Some(state) = self.state(batch.target) else { return Ok(()) };
        let mut guard = lock(&state);
        let pending = guard.pending_bytes;
        self.apply_ack(&mut guard, batch.cursor)?;
        if guard.pending_bytes < pending {
            self.counters.replayed_hints.fetch_add(batch.hints.len() as u64, Ordering::Relaxed);
        }
        Ok(())
    }

    fn apply_ack(&self, st: &mut TargetState, cursor: Cursor) -> io::Result<()> {
        let Some(idx) = st.segments.iter().position(|s| s.seq == cursor.seq) else { return Ok(()) };
        let Some(seg) = st.segments.get_mut(idx) else { return Ok(()) };
        if cursor.start > seg.delivered_to {
            // Only possible with several drainers per target acknowledging out of order.
            warn!(host = %st.target, seq = seg.seq, "hint batch acknowledged ahead of an unacknowledged one; ignored");
            return Ok(());
        }
        let new_end = cursor.end.min(seg.len);
        if new_end <= seg.delivered_to {
            return Ok(());
        }
        st.pending_bytes -= new_end - seg.delivered_to;
        seg.delivered_to = new_end;
        self.counters.expired_hints.fetch_add(cursor.skipped, Ordering::Relaxed);
        if !seg.active && seg.delivered_to >= seg.len {
            if let Some(done) = st.segments.remove(idx) {
                remove_segment_file(&done.path)?;
            }
        }
        Ok(())
    }

    /// Drops every hint for `target` (node removed from the ring): all its
    /// segment files are deleted. Later `store`s for it start new segments.
    pub fn delete_target(&self, target: Uuid) -> Result<(), HintError> {
        let Some(state) = self.state(target) else { return Ok(()) };
        let mut st = lock(&state);
        let segments = std::mem::take(&mut st.segments);
        st.pending_bytes = 0;
        let mut first_err = None;
        for seg in segments {
            if let Err(e) = remove_segment_file(&seg.path) {
                first_err.get_or_insert(e);
            }
        }
        match first_err {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }

    /// Sets `target`'s age cutoff to `cutoff_ms` (it only moves forward; kept in
    /// memory, so callers set it again after a restart, e.g. to `now - gc_grace`
    /// before each replay round, as Cassandra ignores hints older than
    /// gc_grace). Segments whose every hint is older are deleted at once;
    /// `next_batch` leaves out older hints in the others (and `ack` then drops
    /// them, counted in `HintStats::expired_hints`). Returns the pending bytes
    /// dropped with whole segments.
    pub fn drop_older_than(&self, target: Uuid, cutoff_ms: i64) -> Result<u64, HintError> {
        let Some(state) = self.state(target) else { return Ok(0) };
        let mut guard = lock(&state);
        let st = &mut *guard;
        st.cutoff_ms = st.cutoff_ms.max(cutoff_ms);
        let cutoff = st.cutoff_ms;
        let mut dropped = 0;
        let mut first_err = None;
        let mut kept = VecDeque::with_capacity(st.segments.len());
        for seg in std::mem::take(&mut st.segments) {
            if seg.len > HEADER_LEN && seg.max_created_at_ms < cutoff {
                dropped += seg.undelivered();
                if let Err(e) = remove_segment_file(&seg.path) {
                    first_err.get_or_insert(e);
                }
            } else {
                kept.push_back(seg);
            }
        }
        st.segments = kept;
        st.pending_bytes -= dropped;
        match first_err {
            Some(e) => Err(e.into()),
            None => Ok(dropped),
        }
    }
}

/// `<target>-<seq, 20 digits>.hints`: sorts by sequence within a target.
fn segment_file_name(target: Uuid, seq: u64) -> String {
    format!("{}-{seq:020}{SEGMENT_SUFFIX}", target.hyphenated())
}

/// `(target, seq, is_corrupt)` for a segment (or quarantined segment) file name.
fn parse_segment_name(name: &str) -> Option<(Uuid, u64, bool)> {
    let (stem, corrupt) = match name.strip_suffix(CORRUPT_SUFFIX) {
        Some(stem) => (stem, true),
        None => (name.strip_suffix(SEGMENT_SUFFIX)?, false),
    };
    let uuid = stem.get(..36)?;
    let seq = stem.get(36..)?.strip_prefix('-')?;
    if seq.is_empty() || !seq.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((Uuid::try_parse(uuid).ok()?, seq.parse().ok()?, corrupt))
}

fn remove_segment_file(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            warn!(path = %path.display(), error = %e, "could not delete a hint segment");
            Err(e)
        }
        _ => Ok(()),
    }
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

// Poisoning only means another thread panicked mid-operation; the state is
// still memory-safe and the counters at worst off, so carry on.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|p| p.into_inner())
}

fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn file_names_round_trip() {
        let t = Uuid::from_u128(0xdead_beef);
        let name = segment_file_name(t, 42);
        assert_eq!(name, "00000000-0000-0000-0000-0000deadbeef-00000000000000000042.hints");
        assert_eq!(parse_segment_name(&name), Some((t, 42, false)));
        assert_eq!(parse_segment_name(&format!("{name}.corrupt")), Some((t, 42, true)));
        assert_eq!(parse_segment_name("x.hints"), None);
        assert_eq!(parse_segment_name(&name.replace("-00000", "+00000")), None);
        assert_eq!(parse_segment_name("00000000-0000-0000-0000-0000deadbeef-.hints"), None);
        assert_eq!(parse_segment_name("00000000-0000-0000-0000-0000deadbeef-1x.hints"), None);
    }

    #[test]
    fn store_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<HintStore>();
    }
}
