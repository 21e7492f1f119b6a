//! Raw (unfiltered) partition reads: the storage half of digest reads and
//! blocking read repair.
//!
//! Every write is a merge operand reconciled by `cell::reconcile`, so a
//! replica's state of a partition is exactly its set of (key, merged value)
//! pairs under the partition prefix. A raw read (`Storage::read_raw`) returns
//! the pairs a `read_partition` traversal uses: deletion markers, range
//! tombstones, the static row when asked for, and every entry of the rows in
//! the requested slices, tombstones and expired cells included. A coordinator
//! merges replicas' raw partitions (`merge_raw`: per key, the merge operator's
//! winner), resolves the result into live rows (`Storage::resolve_raw`, the
//! same traversal over the cells in memory) and writes back to each stale
//! replica the pairs it lacks (`repair_diff`, `Storage::apply_raw`).
//!
//! Coverage: a raw read that stops at its row limit before the end of its
//! slices is not `exhausted`; it covered the whole header section, and the
//! rows in the read direction up to and including its last row (`last_key`).
//! A merge of replicas covers only what all of them covered.
//!
//! Invariants:
//! - `RawPartition::cells` are strictly ascending by key (`decode` rejects
//!   anything else; every function here tolerates a violation by sorting).
//! - Nothing here panics on malformed input: `decode` is bounds-checked and
//!   `apply_raw` refuses keys and values that are not storage's own.

#![deny(clippy::indexing_slicing)]

use std::borrow::Cow;
use std::collections::BTreeMap;

use md5::{Digest, Md5};
use types::bytes::ByteReader;
use uuid::Uuid;

use crate::cell::{self, CellRef};
use crate::engine::Storage;
use crate::keys;
use crate::packed::{self, RowPacker};
use crate::read::{self, Partition, PartitionRead, SliceCursor, Visitor};
use crate::StorageError;

/// One replica's unfiltered data for one partition read: what
/// [`Storage::read_raw`] returns and replicas exchange for digest reads and
/// read repair.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawPartition {
    /// The table read.
    pub table: Uuid,
    /// The partition's token.
    pub token: i64,
    /// The serialized partition key.
    pub partition_key: Vec<u8>,
    /// Full RocksDB keys (partition prefix included) in ascending key order,
    /// each with its merged (LWW winner) value in `cell`'s format.
    pub cells: Vec<(Vec<u8>, Vec<u8>)>,
    /// False when the replica stopped at the read's `row_limit` before the end
    /// of the requested slices: keys past `last_key` (in the read direction)
    /// are unknown for it.
    pub exhausted: bool,
    /// When not `exhausted`: the key prefix (partition prefix, rows section,
    /// encoded clustering) of the last row covered in the read direction.
    /// Every key that starts with it, and every row key before it in the read
    /// direction, was covered. `None` when no row was covered (a row limit of
    /// 0); the header section (partition deletion, range tombstones, static
    /// row) is always covered in full. `None` when `exhausted`.
    pub last_key: Option<Vec<u8>>,
}

/// `encode`'s format version.
const RAW_FORMAT: u8 = 1;
const FLAG_EXHAUSTED: u8 = 0x01;
const FLAG_LAST_KEY: u8 = 0x02;

impl RawPartition {
    /// Appends the binary form to `out`:
    /// `version u8 | table (16 bytes) | token i64 BE | u32 len | partition key |
    /// flags u8 (1 exhausted, 2 last key) | [u32 len | last key] |
    /// u32 count | count × (u32 len | key | u32 len | value)`, integers big endian.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let body: usize = self.cells.iter().map(|(k, v)| 8 + k.len() + v.len()).sum();
        out.reserve(40 + self.partition_key.len() + self.last_key.as_ref().map_or(0, Vec::len) + body);
        out.push(RAW_FORMAT);
        out.extend_from_slice(self.table.as_bytes());
        out.extend_from_slice(&self.token.to_be_bytes());
        put_bytes(out, &self.partition_key);
        let mut flags = 0;
        if self.exhausted {
            flags |= FLAG_EXHAUSTED;
        }
        if self.last_key.is_some() {
            flags |= FLAG_LAST_KEY;
        }
        out.push(flags);
        if let Some(last) = &self.last_key {
            put_bytes(out, last);
        }
        out.extend_from_slice(&(self.cells.len() as u32).to_be_bytes());
        for (k, v) in &self.cells {
            put_bytes(out, k);
            put_bytes(out, v);
        }
    }

    /// Parses `encode`'s form. Rejects (never panics on) truncated or
    /// trailing bytes, unknown versions or flags, a `last_key` on an exhausted
    /// partition, keys outside the partition and keys out of order.
    pub fn decode(input: &[u8]) -> Result<RawPartition, StorageError> {
        let mut r = ByteReader::new(input, Truncated);
        let version = r.u8()?;
        if version != RAW_FORMAT {
            return Err(invalid(format!("unknown format version {version}")));
        }
        let table = r.uuid()?;
        let token = r.i64()?;
        let partition_key = r.blob()?.to_vec();
        let flags = r.u8()?;
        if flags & !(FLAG_EXHAUSTED | FLAG_LAST_KEY) != 0 {
            return Err(invalid(format!("unknown flags {flags:#x}")));
        }
        let exhausted = flags & FLAG_EXHAUSTED != 0;
        let last_key = if flags & FLAG_LAST_KEY != 0 { Some(r.blob()?.to_vec()) } else { None };
        if exhausted && last_key.is_some() {
            return Err(invalid("an exhausted partition has no last key"));
        }
        let mut prefix = Vec::new();
        keys::partition_prefix(token, &partition_key, &mut prefix)?;
        if let Some(last) = &last_key {
            if !last.starts_with(&prefix) || last.get(prefix.len()) != Some(&keys::SECTION_ROWS) {
                return Err(invalid("last key is not a row of the partition"));
            }
        }
        let count = r.u32()? as usize;
        // Each entry takes at least 8 bytes: never trust the count for an allocation.
        let mut cells = Vec::with_capacity(count.min(r.remaining() / 8));
        for _ in 0..count {
            let key = r.blob()?;
            let value = r.blob()?;
            if !key.starts_with(&prefix) || key.len() == prefix.len() {
                return Err(invalid("key outside the partition"));
            }
            if cells.last().is_some_and(|(last, _): &(Vec<u8>, Vec<u8>)| last.as_slice() >= key) {
                return Err(invalid("keys out of order"));
            }
            cells.push((key.to_vec(), value.to_vec()));
        }
        if r.remaining() != 0 {
            return Err(invalid(format!("{} trailing bytes", r.remaining())));
        }
        Ok(RawPartition { table, token, partition_key, cells, exhausted, last_key })
    }

    /// Appends the compact form of a whole (exhausted) partition, for
    /// repair's pushes: `token i64 BE | varint len | partition key | varint
    /// count | count × (varint len | key after the partition prefix | varint
    /// len | value)`. The table and the partition prefix of every key are
    /// left out (the reader knows the table and rebuilds the prefix).
    pub fn encode_compact(&self, out: &mut Vec<u8>) {
        let mut prefix = Vec::new();
        let prefix_len = match keys::partition_prefix(self.token, &self.partition_key, &mut prefix) {
            Ok(()) => prefix.len(),
            Err(_) => 0,
        };
        out.extend_from_slice(&self.token.to_be_bytes());
        crate::varint::put(self.partition_key.len(), out);
        out.extend_from_slice(&self.partition_key);
        crate::varint::put(self.cells.len(), out);
        for (k, v) in &self.cells {
            let suffix = k.get(prefix_len..).unwrap_or(k);
            crate::varint::put(suffix.len(), out);
            out.extend_from_slice(suffix);
            crate::varint::put(v.len(), out);
            out.extend_from_slice(v);
        }
    }

    /// Parses one `encode_compact` partition of `table` from `input` at
    /// `pos` (advanced past it): a whole, exhausted partition. Rejects (never
    /// panics on) truncated input, empty keys and keys out of order.
    pub fn decode_compact(table: Uuid, input: &[u8], pos: &mut usize) -> Result<RawPartition, StorageError> {
        let mut take = |n: usize| -> Result<&[u8], StorageError> {
            let end = pos.checked_add(n).ok_or(Truncated)?;
            let bytes = input.get(*pos..end).ok_or(Truncated)?;
            *pos = end;
            Ok(bytes)
        };
        let token = i64::from_be_bytes(*take(8)?.first_chunk::<8>().ok_or(Truncated)?);
        let varint = |pos: &mut usize| crate::varint::get(input, pos).ok_or(Truncated);
        let pk_len = varint(pos)?;
        let partition_key = input.get(*pos..pos.saturating_add(pk_len)).ok_or(Truncated)?.to_vec();
        *pos += pk_len;
        let mut prefix = Vec::new();
        keys::partition_prefix(token, &partition_key, &mut prefix)?;
        let count = varint(pos)?;
        // Each entry takes at least 3 bytes: never trust the count for an allocation.
        let mut cells: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(count.min(input.len().saturating_sub(*pos) / 3));
        for _ in 0..count {
            let key_len = varint(pos)?;
            let suffix = input.get(*pos..pos.saturating_add(key_len)).ok_or(Truncated)?;
            *pos += key_len;
            let value_len = varint(pos)?;
            let value = input.get(*pos..pos.saturating_add(value_len)).ok_or(Truncated)?;
            *pos += value_len;
            if suffix.is_empty() {
                return Err(invalid("key outside the partition"));
            }
            let mut key = Vec::with_capacity(prefix.len() + suffix.len());
            key.extend_from_slice(&prefix);
            key.extend_from_slice(suffix);
            if cells.last().is_some_and(|(last, _)| *last >= key) {
                return Err(invalid("keys out of order"));
            }
            cells.push((key, value.to_vec()));
        }
        Ok(RawPartition { table, token, partition_key, cells, exhausted: true, last_key: None })
    }

    /// MD5 over the cells (keys and values, length-prefixed) and `exhausted`:
    /// replicas whose digests agree hold the same data for the read.
    pub fn digest(&self) -> [u8; 16] {
        let mut md5 = Md5::new();
        md5.update((self.cells.len() as u64).to_be_bytes());
        for (k, v) in &self.cells {
            md5.update((k.len() as u64).to_be_bytes());
            md5.update(k);
            md5.update((v.len() as u64).to_be_bytes());
            md5.update(v);
        }
        md5.update([u8::from(self.exhausted)]);
        md5.finalize().into()
    }
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    out.extend_from_slice(bytes);
}

fn invalid(what: impl std::fmt::Display) -> StorageError {
    StorageError::Invalid(format!("malformed raw partition: {what}"))
}

/// A raw partition ended early (what `ByteReader` reports).
#[derive(Clone, Copy)]
struct Truncated;

impl From<Truncated> for StorageError {
    fn from(_: Truncated) -> StorageError {
        invalid("truncated")
    }
}

/// Records what a traversal uses, for `read_raw`.
#[derive(Default)]
struct Recording {
    cells: Vec<(Vec<u8>, Vec<u8>)>,
    stopped: bool,
    last_row: Option<Vec<u8>>,
    scanned: read::Scanned,
}

impl Visitor for Recording {
    fn entry(&mut self, key: &[u8], value: &[u8]) {
        self.cells.push((key.to_vec(), value.to_vec()));
    }
    fn stopped(&mut self, rows_start: &[u8], last_row: Option<&[u8]>) {
        self.stopped = true;
        self.last_row = last_row.map(|row| [rows_start, row].concat());
    }
    fn scanned(&mut self, tombstones: u64, cells: u64) {
        self.scanned.scanned(tombstones, cells);
    }
}

/// Cells in strictly ascending key order: unchanged when they already are,
/// else sorted with the values of a repeated key reconciled.
fn sorted(cells: &[(Vec<u8>, Vec<u8>)]) -> Cow<'_, [(Vec<u8>, Vec<u8>)]> {
    if cells.is_sorted_by(|a, b| a.0 < b.0) {
        return Cow::Borrowed(cells);
    }
    let mut map: BTreeMap<&[u8], Vec<u8>> = BTreeMap::new();
    for (k, v) in cells {
        reconcile_into(&mut map, k, v);
    }
    Cow::Owned(map.into_iter().map(|(k, v)| (k.to_vec(), v)).collect())
}

fn reconcile_into<'a>(map: &mut BTreeMap<&'a [u8], Vec<u8>>, key: &'a [u8], value: &[u8]) {
    match map.get_mut(key) {
        Some(existing) => {
            if let Some(winner) = cell::merge_operands(Some(existing.as_slice()), std::iter::once(value)) {
                *existing = winner;
            }
        }
        None => {
            map.insert(key, value.to_vec());
        }
    }
}

impl Storage {
    /// Reads one partition unfiltered: the same traversal as `read_partition`
    /// (header section, then the slices in the read direction, stopping after
    /// `row_limit` live rows), returning every key and merged value it used,
    /// tombstones, markers and expired cells included.
    /// A replica's read for a coordinator: counted in the table's read metrics.
    pub fn read_raw(&self, read: &PartitionRead) -> Result<RawPartition, StorageError> {
        let store = self.table(&read.table)?;
        let start = std::time::Instant::now();
        let hit = std::cell::Cell::new(false);
        let (raw, mut scanned) = self.read_raw_in(&store, read, Some(&hit))?;
        scanned.sstables = if hit.get() { 0 } else { self.partition_files(&store, read) };
        scanned.record(&store, start);
        Ok(raw)
    }

    /// `read_raw` without counting it in the metrics (repair's validation).
    pub(crate) fn read_raw_uncounted(&self, read: &PartitionRead) -> Result<RawPartition, StorageError> {
        let store = self.table(&read.table)?;
        // Not through the row cache: validation hashes what the files and memtables hold.
        Ok(self.read_raw_in(&store, read, None)?.0)
    }

    fn read_raw_in(
        &self,
        store: &crate::engine::TableStore,
        read: &PartitionRead,
        hit: Option<&std::cell::Cell<bool>>,
    ) -> Result<(RawPartition, read::Scanned), StorageError> {
        let cf = self.cf(store)?;
        let mut recording = Recording::default();
        read::traverse(
            store,
            read,
            |lower, upper| self.cells_via_cache(store, &cf, lower, upper, hit),
            &mut recording,
        )?;
        // Reversed reads visit rows in descending key order.
        let cells = match sorted(&recording.cells) {
            Cow::Borrowed(_) => recording.cells,
            Cow::Owned(cells) => cells,
        };
        let raw = RawPartition {
            table: read.table,
            token: read.token,
            partition_key: read.partition_key.clone(),
            cells,
            exhausted: !recording.stopped,
            last_key: recording.last_row,
        };
        Ok((raw, recording.scanned))
    }

    /// What `read_partition(read)` returns on a replica holding exactly
    /// `raw`'s cells: the read's traversal over the cells in memory. Fails
    /// when `raw` is of another partition or the table is unknown.
    pub fn resolve_raw(&self, read: &PartitionRead, raw: &RawPartition) -> Result<Option<Partition>, StorageError> {
        if raw.table != read.table || raw.token != read.token || raw.partition_key != read.partition_key {
            return Err(StorageError::Invalid("raw partition is not of the partition read".into()));
        }
        let store = self.table(&read.table)?;
        let cells = sorted(&raw.cells);
        read::traverse(&store, read, |lower, upper| Ok(SliceCursor::new(&cells, &lower, &upper)), &mut ())
    }

    /// Writes raw (key, value) pairs of one table as merge operands in one
    /// batch, through `apply`'s write path (commit log mode, durable_writes,
    /// poisoning after a failed fsync). Every key must lie in a partition
    /// section storage knows and every value must decode as a cell; otherwise
    /// nothing is written.
    pub fn apply_raw(&self, table: &Uuid, cells: &[(Vec<u8>, Vec<u8>)]) -> Result<(), StorageError> {
        self.write_raw(table, cells, true)
    }

    /// `apply_raw` for repair's merges: they bring a replica to what every
    /// replica of the range holds, so they leave the range's repair state
    /// as it is (`unrepaired`).
    pub fn apply_repair(&self, table: &Uuid, cells: &[(Vec<u8>, Vec<u8>)]) -> Result<(), StorageError> {
        self.write_raw(table, cells, false)
    }

    fn write_raw(&self, table: &Uuid, cells: &[(Vec<u8>, Vec<u8>)], mark: bool) -> Result<(), StorageError> {
        self.check_poisoned()?;
        let store = self.table(table)?;
        for (key, value) in cells {
            let valid_key = match keys::split_partition(key).and_then(|(_, _, rest)| rest.split_first()) {
                Some((&keys::SECTION_PARTITION_DELETION, body)) => body.is_empty(),
                Some((&keys::SECTION_RANGE_TOMBSTONE, body)) => keys::decode_range_bounds(body).is_some(),
                Some((&keys::SECTION_STATIC, body)) => keys::parse_column_part(body).is_some(),
                Some((&keys::SECTION_ROWS, body)) => keys::clustering_len(&store.layout, body)
                    .and_then(|clen| body.get(clen..))
                    .is_some_and(|column| keys::parse_column_part(column).is_some()),
                _ => false,
            };
            if !valid_key {
                return Err(StorageError::Invalid(format!("raw write: malformed key {}", hex(key))));
            }
            if CellRef::decode(value).is_none() {
                return Err(StorageError::Invalid(format!("raw write: malformed value for key {}", hex(key))));
            }
        }
        if cells.is_empty() {
            return Ok(());
        }
        // Cells of one row become one packed row (cells arrive in any order).
        let mut ops: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        type Cells<'c> = Vec<(&'c [u8], &'c [u8])>;
        let mut rows: BTreeMap<&[u8], Cells<'_>> = BTreeMap::new();
        for (key, value) in cells {
            match packed::row_key_len(&store.layout, key).and_then(|n| key.split_at_checked(n)) {
                Some((row, column)) => rows.entry(row).or_default().push((column, value)),
                None => ops.push((key.clone(), value.clone())),
            }
        }
        let mut packer = RowPacker::default();
        for (row, entries) in rows {
            packer.clear();
            for (column, cell) in entries {
                packer.add_raw(column, cell);
            }
            ops.push((row.to_vec(), packer.finish().to_vec()));
        }
        self.write(ops.iter().map(|(k, v)| (*table, k.as_slice(), v.as_slice())), store.durable, mark)?;
        if !store.def.indexes.is_empty() {
            let mut touched: Vec<(i64, Vec<u8>)> =
                cells.iter().filter_map(|(k, _)| keys::split_partition(k).map(|(t, pk, _)| (t, pk.to_vec()))).collect();
            touched.sort();
            touched.dedup();
            self.reindex_partitions(table, &touched)?;
        }
        Ok(())
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().take(64).map(|b| format!("{b:02x}")).collect()
}

/// How far a set of raw partitions is known, in the read direction.
enum Coverage {
    /// Everything the read asks for.
    All,
    /// The header section only (a replica covered no row).
    Header,
    /// The header and the rows up to and including this row prefix.
    Through(Vec<u8>),
}

/// Merges replicas' raw partitions of one read: per key, the winner by the
/// merge operator's rules (`cell::merge_operands`). When any input is not
/// exhausted the result is cut at the earliest `last_key` (in the read
/// direction, `reversed` as the read) among those inputs and is not
/// exhausted itself: past it, data is unknown for that replica. The result
/// takes its table and partition from the first input (all must be reads of
/// the same partition); no input gives an empty, exhausted partition.
pub fn merge_raw(parts: &[RawPartition], reversed: bool) -> RawPartition {
    let Some(first) = parts.first() else {
        return RawPartition {
            table: Uuid::nil(),
            token: 0,
            partition_key: Vec::new(),
            cells: Vec::new(),
            exhausted: true,
            last_key: None,
        };
    };
    let mut coverage = Coverage::All;
    for part in parts.iter().filter(|p| !p.exhausted) {
        coverage = match (coverage, &part.last_key) {
            (Coverage::Header, _) | (_, None) => Coverage::Header,
            (Coverage::All, Some(last)) => Coverage::Through(last.clone()),
            (Coverage::Through(cut), Some(last)) => {
                let earlier = if reversed { last > &cut } else { last < &cut };
                Coverage::Through(if earlier { last.clone() } else { cut })
            }
        };
    }
    let mut rows_start = Vec::with_capacity(first.partition_key.len() + 11);
    rows_start.extend_from_slice(&keys::token_bytes(first.token));
    rows_start.extend_from_slice(&(first.partition_key.len() as u16).to_be_bytes());
    rows_start.extend_from_slice(&first.partition_key);
    rows_start.push(keys::SECTION_ROWS);
    let covered = |key: &[u8]| -> bool {
        match &coverage {
            Coverage::All => true,
            _ if key < rows_start.as_slice() => true,
            Coverage::Header => false,
            Coverage::Through(cut) if reversed => key >= cut.as_slice(),
            Coverage::Through(cut) => key < cut.as_slice() || key.starts_with(cut),
        }
    };
    let mut map: BTreeMap<&[u8], Vec<u8>> = BTreeMap::new();
    for part in parts {
        for (k, v) in &part.cells {
            if covered(k) {
                reconcile_into(&mut map, k, v);
            }
        }
    }
    let (exhausted, last_key) = match coverage {
        Coverage::All => (true, None),
        Coverage::Header => (false, None),
        Coverage::Through(cut) => (false, Some(cut)),
    };
    RawPartition {
        table: first.table,
        token: first.token,
        partition_key: first.partition_key.clone(),
        cells: map.into_iter().map(|(k, v)| (k.to_vec(), v)).collect(),
        exhausted,
        last_key,
    }
}

/// The (key, merged value) pairs of `merged` that `replica` lacks or holds a
/// different value for: what read repair writes to the replica (with
/// [`Storage::apply_raw`]). `merged` (from [`merge_raw`]) holds only what its
/// coverage includes, so the repair stays within it.
pub fn repair_diff(merged: &RawPartition, replica: &RawPartition) -> Vec<(Vec<u8>, Vec<u8>)> {
    let held: BTreeMap<&[u8], &[u8]> = replica.cells.iter().map(|(k, v)| (k.as_slice(), v.as_slice())).collect();
    merged.cells.iter().filter(|(k, v)| held.get(k.as_slice()) != Some(&v.as_slice())).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(prefix: &[u8], section: u8, rest: &[u8]) -> Vec<u8> {
        [prefix, &[section], rest].concat()
    }

    use crate::cell::live;

    fn part(cells: Vec<(Vec<u8>, Vec<u8>)>, exhausted: bool, last_key: Option<Vec<u8>>) -> RawPartition {
        RawPartition { table: Uuid::from_u128(7), token: -3, partition_key: b"pk".to_vec(), cells, exhausted, last_key }
    }

    fn prefix() -> Vec<u8> {
        let mut p = Vec::new();
        keys::partition_prefix(-3, b"pk", &mut p).unwrap();
        p
    }

    #[test]
    fn unsorted_cells_are_sorted_and_repeated_keys_reconciled() {
        let p = prefix();
        let (a, b) = (key(&p, 3, b"a"), key(&p, 3, b"b"));
        let cells = vec![(b.clone(), live(1, b"old")), (a.clone(), live(1, b"")), (b.clone(), live(2, b"new"))];
        assert_eq!(sorted(&cells).into_owned(), vec![(a, live(1, b"")), (b, live(2, b"new"))]);
        assert!(matches!(sorted(&cells[..2]), Cow::Owned(_)));
        assert!(matches!(sorted(&cells[1..]), Cow::Borrowed(_)));
        assert!(matches!(sorted(&cells[..1]), Cow::Borrowed(_)));
    }

    #[test]
    fn encode_decode_round_trip() {
        let p = prefix();
        let raw = part(
            vec![(key(&p, 0, b""), live(1, b"")), (key(&p, 3, b"a\x00\x10"), live(2, b"x"))],
            false,
            Some(key(&p, 3, b"a")),
        );
        let mut out = Vec::new();
        raw.encode(&mut out);
        assert_eq!(RawPartition::decode(&out).unwrap(), raw);
        assert!(RawPartition::decode(&out[..out.len() - 1]).is_err());
        out.push(0);
        assert!(RawPartition::decode(&out).is_err());
    }

    #[test]
    fn compact_form_round_trips_whole_partitions_and_refuses_garbage() {
        let p = prefix();
        let raw = part(vec![(key(&p, 0, b""), live(1, b"")), (key(&p, 3, b"a\x00\x10"), live(2, b"x"))], true, None);
        let mut out = Vec::new();
        raw.encode_compact(&mut out);
        raw.encode_compact(&mut out);
        let mut full = Vec::new();
        raw.encode(&mut full);
        assert!(out.len() < full.len(), "no table and no partition prefix per key");
        let mut pos = 0;
        for _ in 0..2 {
            assert_eq!(RawPartition::decode_compact(raw.table, &out, &mut pos).unwrap(), raw);
        }
        assert_eq!(pos, out.len());
        for cut in 0..out.len() / 2 {
            assert!(RawPartition::decode_compact(raw.table, &out[..cut], &mut 0).is_err(), "cut at {cut}");
        }
        let backwards = part(vec![(key(&p, 3, b"b"), live(1, b"")), (key(&p, 3, b"a"), live(1, b""))], true, None);
        let mut out = Vec::new();
        backwards.encode_compact(&mut out);
        assert!(RawPartition::decode_compact(raw.table, &out, &mut 0).is_err(), "keys out of order");
    }

    #[test]
    fn merge_cuts_at_the_earliest_last_row_in_the_read_direction() {
        let p = prefix();
        let rows = |names: &[&[u8]]| -> Vec<(Vec<u8>, Vec<u8>)> {
            names.iter().map(|n| (key(&p, 3, &[n, &b"\x00\x10"[..]].concat()), live(1, n))).collect()
        };
        let header = (key(&p, 1, b"rt"), live(1, b""));
        let mut a_cells = vec![header.clone()];
        a_cells.extend(rows(&[b"a", b"b"]));
        let a = part(a_cells, false, Some(key(&p, 3, b"b")));
        let b = part(rows(&[b"a", b"c", b"d"]), true, None);
        let m = merge_raw(&[a.clone(), b.clone()], false);
        assert!(!m.exhausted);
        assert_eq!(m.last_key, Some(key(&p, 3, b"b")));
        let mut expected = vec![header];
        expected.extend(rows(&[b"a", b"b"]));
        assert_eq!(m.cells, expected);
        // Reversed: a covered rows d..c only.
        let a = part(rows(&[b"c", b"d"]), false, Some(key(&p, 3, b"c")));
        let m = merge_raw(&[a, b.clone()], true);
        assert_eq!(m.cells, rows(&[b"c", b"d"]));
        // No row covered: the header only.
        let a = part(vec![(key(&p, 0, b""), live(1, b""))], false, None);
        let m = merge_raw(&[a, b], true);
        assert_eq!(m.cells, vec![(key(&p, 0, b""), live(1, b""))]);
        assert!(!m.exhausted && m.last_key.is_none());
    }

    #[test]
    fn merge_keeps_the_winner_and_diff_names_what_a_replica_lacks() {
        let p = prefix();
        let k1 = key(&p, 3, b"a\x00\x10");
        let k2 = key(&p, 3, b"b\x00\x10");
        let a = part(vec![(k1.clone(), live(5, b"new")), (k2.clone(), live(1, b"x"))], true, None);
        let b = part(vec![(k1.clone(), live(3, b"old"))], true, None);
        let m = merge_raw(&[b.clone(), a.clone()], false);
        assert_eq!(m.cells, a.cells);
        assert!(repair_diff(&m, &a).is_empty());
        assert_eq!(repair_diff(&m, &b), a.cells);
        assert_ne!(a.digest(), b.digest());
        assert_eq!(m.digest(), a.digest());
    }
}
