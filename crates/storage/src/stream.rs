//! Streaming a table's token ranges between nodes as sorted files: the
//! storage half of bootstrap, decommission, removenode, replace and repair
//! (issue 21). The sender writes every stored entry of the ranges into
//! RocksDB sorted files (`export_ranges`); the receiver checks each file's
//! CRC-32C and ingests it whole into the table's column family
//! (`ingest_streamed`), with no per-row write path, no commit log record and
//! no memtable.
//!
//! Entries go into the files as merge operands, never as plain values: an
//! entry merges with whatever the receiver already holds for the key (writes
//! it took as a pending replica while the stream ran, or an earlier partial
//! stream) by the table's rules (`cell`: last write wins per cell, deletion
//! markers included), so the order in which streamed files and new writes
//! land does not matter, and ingesting the same file twice changes nothing.
//!
//! `cleanup` deletes what lies outside the ranges a node keeps, after a
//! topology or replication change moved them elsewhere.
//!
//! Ranges are Cassandra's `(start, end]` over Murmur3 tokens, wrapping past
//! `i64::MAX`; `start == end` is the whole ring. Keys begin with the token
//! (`keys`), so a range is one or two key ranges.
//!
//! Invariants:
//! - An export holds every entry of the ranges that was written before it
//!   started: each file is read from the table's memtables merged with its
//!   column family, as a read sees them (nothing is flushed for it, so the
//!   sources of a join do not all flush at once); entries outside the
//!   ranges are never exported.
//! - A file is ingested only if its length and CRC-32C match what the sender
//!   reported (its CRC read back here, or computed by the receiver as it
//!   wrote the file: `ingest_streamed_checked`); a damaged file changes
//!   nothing and is reported by name.

#![deny(clippy::indexing_slicing)]

use std::path::{Path, PathBuf};

use rocksdb::{IngestExternalFileOptions, SstFileWriter};
use uuid::Uuid;

use crate::engine::Storage;
use crate::keys;
use crate::read::Cursor;
use crate::StorageError;

/// A sorted file of streamed entries, as the sender describes it to the
/// receiver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamedFile {
    /// The file, in the export's directory.
    pub path: PathBuf,
    pub bytes: u64,
    /// Entries (rows, partition and range deletions) in the file.
    pub entries: u64,
    /// CRC-32C of the whole file.
    pub crc32c: u32,
}

impl StreamedFile {
    /// Whether the file on disk has the length and CRC-32C the sender reported.
    pub fn is_whole(&self) -> Result<bool, StorageError> {
        Ok(file_crc(&self.path)? == (self.crc32c, self.bytes))
    }
}

/// The key ranges `[lower, upper)` (upper `None`: to the end) holding the
/// partitions of the token range `(start, end]`.
pub(crate) fn key_ranges(start: i64, end: i64) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    // A span [lo, hi] of tokens is the keys from lo's up to (not including) hi + 1's.
    crate::validate::token_spans((start, end))
        .into_iter()
        .map(|(lo, hi)| (keys::token_bytes(lo).to_vec(), hi.checked_add(1).map(|n| keys::token_bytes(n).to_vec())))
        .collect()
}

/// The key ranges of token ranges `(start, end]`, sorted, overlapping ones
/// merged (so nothing is visited twice).
pub(crate) fn merged_key_ranges(ranges: &[(i64, i64)]) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    let mut bounds: Vec<(Vec<u8>, Option<Vec<u8>>)> =
        ranges.iter().flat_map(|&(start, end)| key_ranges(start, end)).collect();
    bounds.sort();
    let mut merged: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
    for (lower, upper) in bounds {
        match merged.last_mut() {
            Some((_, last_upper)) if last_upper.as_ref().is_none_or(|u| *u >= lower) => {
                if last_upper.is_some() && upper.as_ref().is_none_or(|u| Some(u) > last_upper.as_ref()) {
                    *last_upper = upper;
                }
            }
            _ => merged.push((lower, upper)),
        }
    }
    merged
}

/// A key above every key a table holds: the largest token, then more bytes
/// than any key has.
fn above_every_key() -> Vec<u8> {
    vec![0xFF; 8 + 2 + keys::MAX_KEY_LENGTH + 1]
}

/// `Storage::export_next` reports its progress every this many bytes.
pub const PACE_BYTES: u64 = 1 << 20;

/// CRC-32C and length of a file, read back in 1 MiB pieces.
fn file_crc(path: &Path) -> Result<(u32, u64), StorageError> {
    let file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    Ok((crc32c_prefix(&file, len)?, len))
}

/// CRC-32C of the first `len` bytes of `file`, read in 1 MiB pieces (an
/// error if it holds fewer): a streamed file's check, or the bytes a
/// resumed stream already holds.
pub fn crc32c_prefix(file: &std::fs::File, len: u64) -> std::io::Result<u32> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; (1 << 20).min(len as usize)];
    let (mut crc, mut at) = (0u32, 0u64);
    while at < len {
        let want = ((len - at) as usize).min(buf.len());
        let piece = buf.get_mut(..want).ok_or_else(|| std::io::Error::other("a read past the buffer"))?;
        file.read_exact_at(piece, at)?;
        crc = crc32c::crc32c_append(crc, piece);
        at += want as u64;
    }
    Ok(crc)
}

impl Storage {
    /// Writes every stored entry of `table` whose token lies in one of
    /// `ranges` (`(start, end]`) into sorted files of about `max_file_bytes`
    /// under `dir` (created if missing): `export_next` until nothing is
    /// left. Returns the files in key order; none when the ranges hold
    /// nothing.
    pub fn export_ranges(
        &self,
        table: &Uuid,
        ranges: &[(i64, i64)],
        dir: &Path,
        max_file_bytes: u64,
    ) -> Result<Vec<StreamedFile>, StorageError> {
        std::fs::create_dir_all(dir)?;
        let mut files = Vec::new();
        let mut after = None;
        loop {
            let path = dir.join(format!("{}-{}.sst", std::process::id(), files.len()));
            match self.export_next(table, ranges, after.as_deref(), &path, max_file_bytes, &mut |_| {})? {
                Some((file, last)) => {
                    files.push(file);
                    after = Some(last);
                }
                None => return Ok(files),
            }
        }
    }

    /// One file of an export, written to `path`: the stored entries of
    /// `table` in `ranges` (`(start, end]`) whose keys come after `after`
    /// (`None`: from the first), read from the memtables and the column
    /// family merged, so the export holds everything written before it
    /// began, in key order, until the file reaches about `max_file_bytes`.
    /// Returns the file and its last key (the next call's `after`), or
    /// `None` when no entry is left (no file is written then). Each call
    /// reads what is stored when it runs: an entry written since an earlier call may be in a later
    /// file too, which the receiver's merge makes harmless. `pace` is
    /// called with the bytes written each time the file has grown by
    /// another `PACE_BYTES` (a caller that throttles sleeps in it).
    pub fn export_next(
        &self,
        table: &Uuid,
        ranges: &[(i64, i64)],
        after: Option<&[u8]>,
        path: &Path,
        max_file_bytes: u64,
        pace: &mut dyn FnMut(u64),
    ) -> Result<Option<(StreamedFile, Vec<u8>)>, StorageError> {
        let store = self.table(table)?;
        let cf = self.cf(&store)?;
        // The smallest key after `after`.
        let from = after.map(|a| [a, &[0u8]].concat());
        let options = crate::flush::writer_options();
        let mut writer: Option<SstFileWriter<'_>> = None;
        let (mut entries, mut last, mut paced) = (0u64, Vec::new(), 0u64);
        'ranges: for (lower, upper) in merged_key_ranges(ranges) {
            if from.as_ref().zip(upper.as_ref()).is_some_and(|(from, upper)| upper <= from) {
                continue;
            }
            let lower = match &from {
                Some(from) if *from > lower => from.clone(),
                _ => lower,
            };
            // The memtables merged with the column family, as a read sees
            // them: nothing is flushed for an export.
            let mut it = self.cursor_with(&store, &cf, lower, upper.unwrap_or_else(above_every_key), false);
            it.seek_to_first();
            while let (Some(key), Some(value)) = (it.key(), it.value()) {
                let w = match writer.as_mut() {
                    Some(w) => w,
                    None => {
                        let w = SstFileWriter::create(&options);
                        w.open(path)?;
                        writer.insert(w)
                    }
                };
                w.merge(key, value)?;
                entries += 1;
                last.clear();
                last.extend_from_slice(key);
                let size = w.file_size();
                if size >= paced + PACE_BYTES {
                    pace(size - paced);
                    paced = size;
                }
                if size >= max_file_bytes.max(1) {
                    break 'ranges;
                }
                it.next();
            }
            it.status()?;
        }
        let Some(mut writer) = writer else { return Ok(None) };
        writer.finish()?;
        let (crc32c, bytes) = file_crc(path)?;
        Ok(Some((StreamedFile { path: path.to_path_buf(), bytes, entries, crc32c }, last)))
    }

    /// Cleanup (nodetool cleanup): deletes every entry of `table` whose
    /// token lies outside `keep` (the ranges this node replicates), after
    /// flushing the table, and compacts what was deleted away. Returns the
    /// number of key ranges deleted.
    pub fn cleanup(&self, table: &Uuid, keep: &[(i64, i64)]) -> Result<usize, StorageError> {
        let store = self.table(table)?;
        self.flusher.flush_now(&store)?;
        let cf = self.cf(&store)?;
        let top = above_every_key();
        let mut gaps = Vec::new();
        let mut from = Some(Vec::new());
        for (lower, upper) in merged_key_ranges(keep) {
            if let Some(f) = from.take() {
                if f < lower {
                    gaps.push((f, lower));
                }
            }
            from = upper;
            if from.is_none() {
                break;
            }
        }
        if let Some(f) = from {
            gaps.push((f, top));
        }
        for (lower, upper) in &gaps {
            self.db.delete_range_cf(&cf, lower, upper)?;
        }
        self.row_cache.invalidate_table(store.cache_id);
        self.unrepaired.forget(table);
        for (lower, upper) in &gaps {
            self.db.compact_range_cf(&cf, Some(lower), Some(upper));
        }
        Ok(gaps.len())
    }

    /// Ingests files another node exported for `table` (`export_ranges`),
    /// after checking each against its reported length and CRC-32C; the
    /// files are moved into the database. All or nothing: a damaged file
    /// fails the call before any file is ingested. Returns the entries
    /// ingested.
    pub fn ingest_streamed(&self, table: &Uuid, files: &[StreamedFile]) -> Result<u64, StorageError> {
        self.ingest_files(table, files, true)
    }

    /// `ingest_streamed` for files whose CRC-32C the caller computed over
    /// the bytes as it wrote them and found equal to the sender's (a stream
    /// receiver): only their lengths are checked here, so the files are not
    /// read once more before RocksDB opens them.
    pub fn ingest_streamed_checked(&self, table: &Uuid, files: &[StreamedFile]) -> Result<u64, StorageError> {
        self.ingest_files(table, files, false)
    }

    fn ingest_files(&self, table: &Uuid, files: &[StreamedFile], read_crc: bool) -> Result<u64, StorageError> {
        if files.is_empty() {
            return Ok(0);
        }
        let store = self.table(table)?;
        for f in files {
            let (crc, bytes) =
                if read_crc { file_crc(&f.path)? } else { (f.crc32c, std::fs::metadata(&f.path)?.len()) };
            if (crc, bytes) != (f.crc32c, f.bytes) {
                return Err(StorageError::Invalid(format!(
                    "streamed file {} is damaged: {bytes} bytes with CRC-32C {crc:08x}, the sender wrote {} bytes with {:08x}",
                    f.path.display(),
                    f.bytes,
                    f.crc32c
                )));
            }
        }
        let cf = self.cf(&store)?;
        let mut ingest = IngestExternalFileOptions::default();
        ingest.set_move_files(true);
        let paths: Vec<&Path> = files.iter().map(|f| f.path.as_path()).collect();
        let indexed = !store.def.indexes.is_empty();
        let files_before = if indexed { self.file_names(&store.cf_name) } else { Default::default() };
        self.db.ingest_external_file_cf_opts(&cf, &ingest, paths)?;
        self.row_cache.invalidate_table(store.cache_id);
        self.unrepaired.forget(table);
        if indexed {
            // The streamed data's secondary index entries, written before the stream counts as received.
            let span = self.new_files_span(&store.cf_name, &files_before).unwrap_or((i64::MIN, i64::MAX));
            self.reindex_span(table, span)?;
        }
        for f in files {
            // Moved files are linked into the database; the name here is spare.
            let _ = std::fs::remove_file(&f.path);
        }
        Ok(files.iter().map(|f| f.entries).sum())
    }
}

impl Storage {
    /// The names of a column family's files.
    fn file_names(&self, cf_name: &str) -> std::collections::HashSet<String> {
        let files = self.db.live_files().unwrap_or_default();
        files.into_iter().filter(|f| f.column_family_name == cf_name).map(|f| f.name).collect()
    }

    /// The inclusive token span of a column family's files not in `before`
    /// (`None` when it cannot be told).
    fn new_files_span(&self, cf_name: &str, before: &std::collections::HashSet<String>) -> Option<(i64, i64)> {
        let files = self.db.live_files().ok()?;
        let token =
            |k: &Option<Vec<u8>>| k.as_ref().and_then(|k| k.first_chunk::<8>()).map(|t| keys::token_from_bytes(*t));
        let mut span: Option<(i64, i64)> = None;
        for f in files.iter().filter(|f| f.column_family_name == cf_name && !before.contains(&f.name)) {
            let (lo, hi) = (token(&f.start_key)?, token(&f.end_key)?);
            span = Some(span.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))));
        }
        span
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token_of(key: &[u8]) -> i64 {
        keys::token_from_bytes(key[..8].try_into().unwrap())
    }

    /// Whether a key range holds token `t`.
    fn holds(range: &(Vec<u8>, Option<Vec<u8>>), t: i64) -> bool {
        let k = keys::token_bytes(t).to_vec();
        k >= range.0 && range.1.as_ref().is_none_or(|u| k < *u)
    }

    #[test]
    fn key_ranges_cover_exactly_the_token_range() {
        let tokens = [i64::MIN, i64::MIN + 1, -100, -1, 0, 1, 99, 100, 101, i64::MAX - 1, i64::MAX];
        let cases = [(-100, 100), (100, -100), (0, 0), (i64::MIN, i64::MAX), (i64::MAX, i64::MIN), (99, 100)];
        for (start, end) in cases {
            let ranges = key_ranges(start, end);
            for t in tokens {
                let expected = if start == end {
                    true
                } else if start < end {
                    start < t && t <= end
                } else {
                    t > start || t <= end
                };
                let got = ranges.iter().filter(|r| holds(r, t)).count();
                assert_eq!(got, usize::from(expected), "token {t} in ({start}, {end}]");
            }
        }
        assert_eq!(token_of(&key_ranges(5, 9)[0].0), 6);
        assert!(key_ranges(i64::MAX, i64::MAX - 1).len() == 1, "nothing after MAX: only [MIN, MAX - 1]");
    }
}
