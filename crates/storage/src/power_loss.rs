//! The power-loss layer of the fault tests (issue 26): after a process that
//! used a data directory was killed with SIGKILL (which leaves the page
//! cache, so everything the process wrote is still readable), [`power_loss`]
//! makes the directory's commit log look as it would after a power failure
//! at that instant: in each segment, the bytes that the process's last
//! completed fsync had not made durable are lost. A seeded random part of
//! them, whole 4 KiB pages from their start, is kept (the kernel may have
//! written some pages back on its own), and the rest is cut off, zeroed or
//! replaced by garbage, as a file system may leave it.
//!
//! What was durable comes from the sync journal the commit log writes when
//! its process runs with `SHOAL_SYNC_JOURNAL` set
//! ([`crate::SYNC_JOURNAL_ENV`]): after every fsync, each segment's id and
//! length. Its last complete line is the truth: a line torn by the kill was
//! written after its fsync and before any write of that fsync was
//! acknowledged, so the line before it is a safe (smaller) claim.
//!
//! Scope: Shoal's commit log, which holds every acknowledged write that is
//! not in a flushed file yet; that is where `commitlog_sync` promises
//! something. RocksDB's own files (flushed and ingested tables, whose
//! ingestion RocksDB syncs before the commit log lets their records go; the
//! Paxos column family's log; its MANIFEST) are left as they are.
//!
//! Invariants:
//! - Only bytes past a segment's journaled length are changed; a segment
//!   the journal does not name (made after the last fsync) is unsynced from
//!   its first byte (its name survives: creating a segment fsyncs the
//!   directory).
//! - The same directory, journal and seed give the same result.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;

use serde::Serialize;

use crate::commitlog::{journal_path, parse_segment_name};
use crate::StorageError;

const PAGE: u64 = 4096;

/// What [`power_loss`] did to one segment.
#[derive(Debug, Clone, Serialize)]
pub struct SegmentLoss {
    pub file: String,
    /// Bytes made durable by the last journaled fsync.
    pub synced: u64,
    /// The file's length before.
    pub length: u64,
    /// Unsynced bytes kept (written back before the "power failure").
    pub kept: u64,
    /// What became of the rest: "cut", "zeroed", "garbage" or "none" (nothing unsynced).
    pub fate: &'static str,
}

/// The result of [`power_loss`].
#[derive(Debug, Clone, Serialize)]
pub struct PowerLoss {
    pub seed: u64,
    /// Whether the journal had a complete line (without one, no fsync had completed: nothing in the log was durable).
    pub journaled: bool,
    pub segments: Vec<SegmentLoss>,
    /// Unsynced bytes lost, over all segments.
    pub bytes_lost: u64,
}

/// A small deterministic generator (splitmix64): the layer's choices.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

/// The last complete line of the sync journal: segment id -> durable length.
fn last_journal_line(text: &str) -> Option<Vec<(u64, u64)>> {
    let complete = text.get(..text.rfind('\n')?)?;
    let line = complete.rsplit('\n').next()?;
    line.split_whitespace()
        .map(|pair| {
            let (id, bytes) = pair.split_once(':')?;
            Some((id.parse().ok()?, bytes.parse().ok()?))
        })
        .collect()
}

/// Drops what the commit log under `data_dir` had not fsynced when its
/// process died; see the module documentation. The process must be dead.
/// The journal is removed afterwards (the next process starts a new one).
pub fn power_loss(data_dir: &Path, seed: u64) -> Result<PowerLoss, StorageError> {
    let dir = data_dir.join("commitlog");
    let journal = journal_path(&dir);
    let text = match std::fs::read_to_string(&journal) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(StorageError::Invalid(format!(
                "no sync journal at {}: the node must run with {}=1 for its power loss to be emulated",
                journal.display(),
                crate::SYNC_JOURNAL_ENV
            )))
        }
        Err(e) => return Err(e.into()),
    };
    let synced = last_journal_line(&text);
    let mut rng = Rng(seed);
    let mut segments = Vec::new();
    let mut names: Vec<(u64, std::path::PathBuf)> = std::fs::read_dir(&dir)?
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let id = entry.file_name().to_str().and_then(parse_segment_name)?;
            Some((id, entry.path()))
        })
        .collect();
    names.sort_unstable();
    let mut bytes_lost = 0;
    for (id, path) in names {
        let file = OpenOptions::new().write(true).open(&path)?;
        let length = file.metadata()?.len();
        let durable = synced.as_ref().and_then(|s| s.iter().find(|(i, _)| *i == id)).map_or(0, |(_, b)| *b).min(length);
        let unsynced = length - durable;
        let kept = if unsynced == 0 { 0 } else { (rng.below(unsynced / PAGE + 1) * PAGE).min(unsynced) };
        let start = durable + kept;
        let fate = if start >= length {
            "none"
        } else {
            match rng.below(3) {
                0 => {
                    file.set_len(start)?;
                    "cut"
                }
                1 => {
                    file.write_all_at(&vec![0u8; (length - start) as usize], start)?;
                    "zeroed"
                }
                _ => {
                    let garbage: Vec<u8> = (0..length - start).map(|_| rng.next() as u8).collect();
                    file.write_all_at(&garbage, start)?;
                    "garbage"
                }
            }
        };
        bytes_lost += length - start;
        file.sync_all()?;
        let file = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        segments.push(SegmentLoss { file, synced: durable, length, kept, fate });
    }
    std::fs::remove_file(&journal)?;
    Ok(PowerLoss { seed, journaled: synced.is_some(), segments, bytes_lost })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_complete_journal_line_counts() {
        assert_eq!(last_journal_line(""), None);
        assert_eq!(last_journal_line("1:16 2:"), None);
        assert_eq!(last_journal_line("1:16\n"), Some(vec![(1, 16)]));
        assert_eq!(last_journal_line("1:16\n1:100 2:16\n1:100 2:4"), Some(vec![(1, 100), (2, 16)]));
    }

    #[test]
    fn only_unsynced_bytes_change() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("commitlog");
        std::fs::create_dir_all(&log).unwrap();
        let seg = log.join("CommitLog-00000000000000000001.log");
        let content: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8 + 1).collect();
        std::fs::write(&seg, &content).unwrap();
        std::fs::write(journal_path(&log), "1:100\n1:10000\n1:20000 2:16").unwrap();
        for seed in 0..20 {
            std::fs::write(&seg, &content).unwrap();
            std::fs::write(journal_path(&log), "1:100\n1:10000\n1:20000 2:16").unwrap();
            let loss = power_loss(dir.path(), seed).unwrap();
            let after = std::fs::read(&seg).unwrap();
            let s = loss.segments.first().unwrap();
            assert_eq!(s.synced, 10_000, "the last complete line");
            assert_eq!(after.get(..10_000 + s.kept as usize), content.get(..10_000 + s.kept as usize));
            assert!(!journal_path(&log).exists());
        }
    }
}
