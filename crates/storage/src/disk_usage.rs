//! The disk usage guardrail: Cassandra 5.0's `data_disk_usage_percentage_warn_threshold`,
//! `data_disk_usage_percentage_fail_threshold` and `data_disk_usage_max_disk_size`
//! (Cassandra's `DiskUsageMonitor` and the guardrails `local_data_disk_usage` and
//! `replica_disk_usage`), so a node stops taking new data before its disk is full
//! instead of failing (or worse) at ENOSPC.
//!
//! A thread (`disk-usage`, started by `Storage::monitor_disk_usage`) samples the
//! data directory about once a second and keeps one state, as Cassandra's
//! `DiskUsageState`: `NotAvailable` (the guardrail is off), `Spacious`,
//! `Stuffed` (over the warn threshold) or `Full` (over the fail threshold).
//! Writers read it with one atomic load (`Storage::admit`, from
//! `Storage::collect`): while it is `Full`, a mutation that adds data is
//! refused with Cassandra's guardrail message (`StorageError::DiskUsageExceeded`,
//! an InvalidRequest to clients), reads go on.
//!
//! The measure is Cassandra's: `used` is what the data directory's files take
//! on disk plus the bytes in memtables (they will be flushed there), `free` is
//! what the file system has left for unprivileged writers (statvfs `f_bavail`),
//! and the usage is `ceil(100 * used / min(used + free, max_disk_size))` percent.
//! A threshold is crossed when the usage is above it (Cassandra's `MaxThreshold`).
//!
//! Where Shoal differs from Cassandra:
//! - Cassandra samples every 30 s (`cassandra.disk_usage.monitor_interval_ms`);
//!   Shoal every second (`MONITOR_INTERVAL`): less room is needed between the
//!   fail threshold and a full disk.
//! - Shoal's data directory holds its commit log (and hints), so they count
//!   as used; Cassandra measures `data_file_directories` only. A file's size
//!   is the space it takes (allocated blocks, each inode once), not its length.
//! - Cassandra's coordinator refuses a write when any replica gossips `FULL`
//!   (`replica_disk_usage`), and refuses DELETEs too; it skips the check for
//!   superusers (and so for every client under `AllowAllAuthenticator`).
//!   Shoal refuses at the replica: a full node refuses the writes it is
//!   given, its clients' and its peers', for every user (a coordinator that
//!   is a replica refuses before sending; one whose remote replica refused
//!   hints it, as any failed replica, and fails the write with the refusal
//!   if the level is then missed), and admits deletions (they are how space
//!   is won back, and carry no data).
//!
//! Invariants:
//! - Only the monitor thread stores the state; with both thresholds off it is
//!   `NotAvailable` and nothing is refused.
//! - The state is at most one sampling interval old: writes admitted during
//!   that interval may take the usage above the fail threshold (pick it with
//!   room to spare, as in Cassandra).
//! - A sample that fails (the directory is gone, statvfs fails) keeps the
//!   previous state and is logged.

use std::collections::HashSet;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use types::mutation::Mutation;

use crate::engine::lock;

/// How often the monitor samples the data directory.
pub const MONITOR_INTERVAL: Duration = Duration::from_secs(1);

/// While the state stays `Stuffed` or `Full`, it is logged again this often
/// (Cassandra's `cassandra.disk_usage.notify_interval_ms`, 30 minutes).
const NOTIFY_INTERVAL: Duration = Duration::from_secs(30 * 60);

/// The guardrail's settings, validated (by the node's configuration).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskUsageConfig {
    /// `data_disk_usage_percentage_warn_threshold` (1..=100; None: -1, off).
    pub warn_percent: Option<u8>,
    /// `data_disk_usage_percentage_fail_threshold` (1..=100; None: -1, off).
    pub fail_percent: Option<u8>,
    /// `data_disk_usage_max_disk_size`: the disk counts as this big at most
    /// (None: the file system's size).
    pub max_disk_bytes: Option<u64>,
}

impl DiskUsageConfig {
    /// Whether any threshold is set (else the guardrail is off).
    pub fn enabled(&self) -> bool {
        self.warn_percent.is_some() || self.fail_percent.is_some()
    }

    /// The state at `percent` usage (Cassandra's `DiskUsageMonitor.getState`).
    pub fn state(&self, percent: u64) -> DiskUsageState {
        if !self.enabled() {
            DiskUsageState::NotAvailable
        } else if self.fail_percent.is_some_and(|fail| percent > u64::from(fail)) {
            DiskUsageState::Full
        } else if self.warn_percent.is_some_and(|warn| percent > u64::from(warn)) {
            DiskUsageState::Stuffed
        } else {
            DiskUsageState::Spacious
        }
    }
}

/// Cassandra's `DiskUsageState`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum DiskUsageState {
    /// The guardrail is off.
    NotAvailable = 0,
    /// At or below the warn threshold.
    Spacious = 1,
    /// Above the warn threshold, at or below the fail threshold.
    Stuffed = 2,
    /// Above the fail threshold: writes that add data are refused.
    Full = 3,
}

impl DiskUsageState {
    fn from_u8(v: u8) -> DiskUsageState {
        match v {
            1 => DiskUsageState::Spacious,
            2 => DiskUsageState::Stuffed,
            3 => DiskUsageState::Full,
            _ => DiskUsageState::NotAvailable,
        }
    }
}

impl std::fmt::Display for DiskUsageState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DiskUsageState::NotAvailable => "Not Available",
            DiskUsageState::Spacious => "Spacious",
            DiskUsageState::Stuffed => "Stuffed",
            DiskUsageState::Full => "Full",
        })
    }
}

/// The usage in percent, rounded up: `used` over the disk's size for the
/// guardrail, `used + free` capped at `max_disk_bytes`. Above 100 when
/// `used` alone is over the cap; 100 for a disk of no size holding anything.
pub fn usage_percent(used: u64, free: u64, max_disk_bytes: Option<u64>) -> u64 {
    let total = u128::from(used) + u128::from(free);
    let total = max_disk_bytes.map_or(total, |max| total.min(u128::from(max)));
    if total == 0 {
        return if used == 0 { 0 } else { 100 };
    }
    let percent = (u128::from(used) * 100).div_ceil(total);
    u64::try_from(percent).unwrap_or(u64::MAX)
}

/// Whether a mutation adds data (a live cell or a row marker), as opposed to
/// only deleting: what a `Full` node refuses.
pub fn adds_data(m: &Mutation) -> bool {
    m.rows.iter().any(|row| row.marker.is_some() || row.cells.iter().any(|c| c.value.is_some()))
}

/// The state shared by the monitor and the writers.
#[derive(Default)]
pub(crate) struct DiskUsage {
    state: AtomicU8,
    /// The last sample's usage in percent (`u64::MAX`: none yet).
    percent: AtomicU64,
    config: Mutex<DiskUsageConfig>,
    /// When a `Stuffed` or `Full` state was last logged.
    notified: Mutex<Option<Instant>>,
}

impl DiskUsage {
    pub(crate) fn new() -> DiskUsage {
        DiskUsage { percent: AtomicU64::new(u64::MAX), ..DiskUsage::default() }
    }

    pub(crate) fn state(&self) -> DiskUsageState {
        DiskUsageState::from_u8(self.state.load(Ordering::Relaxed))
    }

    pub(crate) fn percent(&self) -> Option<u64> {
        Some(self.percent.load(Ordering::Relaxed)).filter(|&p| p != u64::MAX)
    }

    pub(crate) fn config(&self) -> DiskUsageConfig {
        *lock(&self.config)
    }

    pub(crate) fn set_config(&self, config: DiskUsageConfig) {
        *lock(&self.config) = config;
        if !config.enabled() {
            self.state.store(DiskUsageState::NotAvailable as u8, Ordering::Relaxed);
        }
    }

    /// Takes a sample's usage: stores the state and logs what changed, in
    /// Cassandra's words (`local_data_disk_usage`). Returns the new state.
    pub(crate) fn update(&self, percent: u64) -> DiskUsageState {
        let config = self.config();
        let state = config.state(percent);
        self.percent.store(percent, Ordering::Relaxed);
        let old = DiskUsageState::from_u8(self.state.swap(state as u8, Ordering::Relaxed));
        let mut notified = lock(&self.notified);
        let due = state != old || notified.is_none_or(|at| at.elapsed() >= NOTIFY_INTERVAL);
        match state {
            DiskUsageState::Full if due => {
                tracing::error!(
                    "Guardrail local_data_disk_usage violated: Local data disk usage {percent}%({state}) exceeds \
                     failure threshold of {}%, will stop accepting writes",
                    config.fail_percent.unwrap_or(100)
                );
                *notified = Some(Instant::now());
            }
            DiskUsageState::Stuffed if due => {
                tracing::warn!(
                    "Guardrail local_data_disk_usage violated: Local data disk usage {percent}%({state}) exceeds \
                     warning threshold of {}%",
                    config.warn_percent.unwrap_or(100)
                );
                *notified = Some(Instant::now());
            }
            DiskUsageState::Spacious | DiskUsageState::NotAvailable
                if matches!(old, DiskUsageState::Stuffed | DiskUsageState::Full) =>
            {
                tracing::info!("Local data disk usage {percent}% is back under the thresholds ({state})");
                *notified = None;
            }
            _ => {}
        }
        state
    }

    /// One sample of `dir`: the usage in percent, counting `memtable_bytes`
    /// as used.
    pub(crate) fn sample(&self, dir: &Path, memtable_bytes: u64) -> io::Result<u64> {
        let used = directory_bytes(dir)?.saturating_add(memtable_bytes);
        let (free, _) = free_and_total_bytes(dir)?;
        Ok(usage_percent(used, free, self.config().max_disk_bytes))
    }

    /// The monitor thread's loop, until `stop`: samples `dir` every
    /// `MONITOR_INTERVAL` while the guardrail is on.
    pub(crate) fn run(&self, dir: &Path, memtable_bytes: impl Fn() -> u64, stop: &AtomicBool) {
        let tick = Duration::from_millis(100);
        let mut failing = false;
        while !stop.load(Ordering::Relaxed) {
            if self.config().enabled() {
                match self.sample(dir, memtable_bytes()) {
                    Ok(percent) => {
                        self.update(percent);
                        failing = false;
                    }
                    Err(e) if !failing => {
                        tracing::warn!(dir = %dir.display(), "cannot measure the data directory's disk usage: {e}");
                        failing = true;
                    }
                    Err(_) => {}
                }
            }
            let mut slept = Duration::ZERO;
            while slept < MONITOR_INTERVAL && !stop.load(Ordering::Relaxed) {
                std::thread::sleep(tick);
                slept += tick;
            }
        }
    }
}

/// The space the files below `dir` take on disk (allocated blocks; a file
/// with several links counted once; symbolic links not followed). Files and
/// directories that vanish while it walks (RocksDB deletes files at any
/// time) are skipped.
pub(crate) fn directory_bytes(dir: &Path) -> io::Result<u64> {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0u64;
    let mut linked: HashSet<(u64, u64)> = HashSet::new();
    let mut stack = vec![dir.to_path_buf()];
    let mut first = true;
    while let Some(path) = stack.pop() {
        let entries = match std::fs::read_dir(&path) {
            Ok(entries) => entries,
            Err(e) if !first && e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        first = false;
        for entry in entries {
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            let meta = match entry.metadata() {
                Ok(meta) => meta,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            if meta.is_dir() {
                stack.push(entry.path());
                continue;
            }
            if meta.nlink() > 1 && !linked.insert((meta.dev(), meta.ino())) {
                continue;
            }
            total = total.saturating_add(meta.blocks().saturating_mul(512));
        }
    }
    Ok(total)
}

/// The file system holding `dir`: bytes free for unprivileged writers
/// (`f_bavail`, what Java's `FileStore.getUsableSpace` reports) and its size.
#[allow(clippy::useless_conversion)] // the statvfs fields are u64 on some targets, u32 on others
pub(crate) fn free_and_total_bytes(dir: &Path) -> io::Result<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes())?;
    let mut out = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `path` is a NUL-terminated string and `out` points to memory
    // for one `statvfs`, which statvfs(3) fills when it returns 0.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::statvfs(path.as_ptr(), out.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: statvfs returned 0, so it initialized `out`.
    #[allow(unsafe_code)]
    let st = unsafe { out.assume_init() };
    let block = u64::from(st.f_frsize);
    let (avail, blocks) = (u64::from(st.f_bavail), u64::from(st.f_blocks));
    Ok((avail.saturating_mul(block), blocks.saturating_mul(block)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use types::mutation::{CellWrite, DeletionTime, Liveness, RowWrite};
    use uuid::Uuid;

    fn config(warn: Option<u8>, fail: Option<u8>) -> DiskUsageConfig {
        DiskUsageConfig { warn_percent: warn, fail_percent: fail, max_disk_bytes: None }
    }

    #[test]
    fn usage_is_used_over_used_and_free_rounded_up() {
        assert_eq!(usage_percent(0, 100, None), 0);
        assert_eq!(usage_percent(50, 50, None), 50);
        assert_eq!(usage_percent(1, 999, None), 1, "any use rounds up to 1%");
        assert_eq!(usage_percent(501, 499, None), 51);
        assert_eq!(usage_percent(100, 0, None), 100);
        assert_eq!(usage_percent(0, 0, None), 0);
        // The cap: the disk counts as max_disk_size big.
        assert_eq!(usage_percent(50, 950, Some(100)), 50);
        assert_eq!(usage_percent(50, 950, Some(10_000)), 5, "a cap over the disk's size changes nothing");
        assert_eq!(usage_percent(300, 950, Some(100)), 300, "over the cap: over 100%");
        assert_eq!(usage_percent(5, 0, Some(0)), 100);
        // No overflow at the extremes.
        assert_eq!(usage_percent(u64::MAX, u64::MAX, None), 50);
        assert_eq!(usage_percent(u64::MAX, 0, Some(1)), u64::MAX, "saturates");
    }

    #[test]
    fn thresholds_are_crossed_when_exceeded() {
        let c = config(Some(80), Some(90));
        assert_eq!(c.state(0), DiskUsageState::Spacious);
        assert_eq!(c.state(80), DiskUsageState::Spacious, "at the warn threshold: not over it");
        assert_eq!(c.state(81), DiskUsageState::Stuffed);
        assert_eq!(c.state(90), DiskUsageState::Stuffed);
        assert_eq!(c.state(91), DiskUsageState::Full);
        assert_eq!(c.state(400), DiskUsageState::Full);
        assert_eq!(config(None, None).state(100), DiskUsageState::NotAvailable, "off: never full");
        assert_eq!(config(Some(50), None).state(100), DiskUsageState::Stuffed, "warn only: never refuses");
        assert_eq!(config(None, Some(50)).state(50), DiskUsageState::Spacious);
        assert_eq!(config(None, Some(50)).state(51), DiskUsageState::Full);
        assert_eq!(config(Some(50), Some(50)).state(51), DiskUsageState::Full, "fail wins over warn");
    }

    #[test]
    fn updates_store_the_state_and_turning_off_clears_it() {
        let usage = DiskUsage::new();
        assert_eq!((usage.state(), usage.percent()), (DiskUsageState::NotAvailable, None));
        usage.set_config(config(Some(60), Some(70)));
        assert_eq!(usage.update(65), DiskUsageState::Stuffed);
        assert_eq!(usage.update(71), DiskUsageState::Full);
        assert_eq!((usage.state(), usage.percent()), (DiskUsageState::Full, Some(71)));
        assert_eq!(usage.update(10), DiskUsageState::Spacious);
        assert_eq!(usage.update(99), DiskUsageState::Full);
        usage.set_config(DiskUsageConfig::default());
        assert_eq!(usage.state(), DiskUsageState::NotAvailable);
        assert_eq!(DiskUsageState::Full.to_string(), "Full");
        assert_eq!(DiskUsageState::NotAvailable.to_string(), "Not Available");
    }

    #[test]
    fn only_mutations_adding_data_count() {
        let table = Uuid::from_u128(7);
        let live = |value: Option<&'static [u8]>| CellWrite {
            column: 1,
            path: None,
            timestamp: 1,
            ttl: 0,
            local_deletion_time: 0,
            value: value.map(Bytes::from_static),
        };
        let row = |marker: Option<Liveness>, cells: Vec<CellWrite>, deletion: Option<DeletionTime>| RowWrite {
            clustering: Vec::new(),
            is_static: false,
            marker,
            deletion,
            complex_deletions: Vec::new(),
            cells,
        };
        let with_rows = |rows: Vec<RowWrite>| {
            let mut m = Mutation::new(table, 0, Bytes::from_static(b"k"));
            m.rows = rows;
            m
        };
        let gone = DeletionTime { timestamp: 1, local_deletion_time: 1 };
        let mut partition_delete = Mutation::new(table, 0, Bytes::from_static(b"k"));
        partition_delete.partition_deletion = Some(gone);
        assert!(!adds_data(&partition_delete));
        assert!(!adds_data(&with_rows(vec![row(None, Vec::new(), Some(gone))])), "row deletion");
        assert!(!adds_data(&with_rows(vec![row(None, vec![live(None)], None)])), "a cell set to null");
        assert!(adds_data(&with_rows(vec![row(None, vec![live(Some(b"v"))], None)])), "UPDATE");
        let marker = Liveness { timestamp: 1, ttl: 0, local_expiration: 0 };
        assert!(adds_data(&with_rows(vec![row(Some(marker), Vec::new(), None)])), "INSERT of a key alone");
    }

    #[test]
    fn directory_bytes_counts_files_below_once() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(directory_bytes(dir.path()).unwrap(), 0);
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        std::fs::write(dir.path().join("a/b/f"), vec![1u8; 64 << 10]).unwrap();
        std::fs::write(dir.path().join("g"), vec![1u8; 64 << 10]).unwrap();
        let two = directory_bytes(dir.path()).unwrap();
        assert!((128 << 10..=160 << 10).contains(&two), "{two}");
        std::fs::hard_link(dir.path().join("g"), dir.path().join("a/g2")).unwrap();
        assert_eq!(directory_bytes(dir.path()).unwrap(), two, "a hard link is the same space");
        assert!(directory_bytes(&dir.path().join("missing")).is_err());
        let (free, total) = free_and_total_bytes(dir.path()).unwrap();
        assert!(total > 0 && free <= total, "{free} of {total}");
    }

    #[test]
    fn a_sample_measures_the_directory_and_the_memtables() {
        let dir = tempfile::tempdir().unwrap();
        let usage = DiskUsage::new();
        // A cap of 1 MiB over an empty directory: the memtables alone make the usage.
        usage.set_config(DiskUsageConfig {
            warn_percent: Some(40),
            fail_percent: Some(60),
            max_disk_bytes: Some(1 << 20),
        });
        assert_eq!(usage.sample(dir.path(), 0).unwrap(), 0);
        assert_eq!(usage.sample(dir.path(), 512 << 10).unwrap(), 50);
        std::fs::write(dir.path().join("f"), vec![1u8; 256 << 10]).unwrap();
        let percent = usage.sample(dir.path(), 512 << 10).unwrap();
        assert!((75..=80).contains(&percent), "{percent}");
        assert_eq!(usage.update(percent), DiskUsageState::Full);
    }
}
