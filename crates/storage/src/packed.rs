//! Packed rows: one RocksDB entry per row (ADR 0002).
//!
//! A static row (`prefix | 0x02`) or a clustering row (`prefix | 0x03 |
//! clustering`) is stored under its row key alone; the value lists the row's
//! entries, each a column part (`keys` describes them: row deletion, row
//! marker, simple cell, collection deletion, collection element) with its
//! cell bytes (`cell`):
//!
//! ```text
//! value = entry*        entry = varint(len) column part | varint(len) cell
//! ```
//!
//! Partition deletions and range tombstones stay one entry each.
//!
//! The rest of storage still thinks in *cell entries* — `row key | column
//! part` → cell — the layout before packing: [`Unpacked`] shows a cursor over
//! stored entries as cell entries, [`RowPacker`] turns cell entries into
//! packed rows, and [`merge`] is the merge operator for packed rows.
//!
//! Invariants:
//! - Entries within a value are sorted by column part, bytewise, each column
//!   part at most once. Cell entries of a row therefore sort exactly as they
//!   did as separate keys (clustering encodings are self-delimiting, so no
//!   row key is a prefix of another row's key).
//! - [`merge`] reconciles entry by entry with `cell::pick`, so it is
//!   commutative and associative like the cell merge; bytes that do not parse
//!   end a value's entries and never panic.

#![deny(clippy::indexing_slicing)]

use std::borrow::Cow;

use crate::cell;
use crate::keys::{self, Layout};
use crate::read::Cursor;
use crate::varint;

/// True when entries under `key` are packed rows (static or clustering rows).
pub fn is_packed_key(key: &[u8]) -> bool {
    matches!(
        keys::split_partition(key).and_then(|(_, _, rest)| rest.first().copied()),
        Some(keys::SECTION_STATIC | keys::SECTION_ROWS)
    )
}

/// The length of the row key that starts `key` when `key` is a cell entry
/// key inside a packed row (`row key | column part`), else `None`.
pub fn row_key_len(layout: &Layout, key: &[u8]) -> Option<usize> {
    let (_, _, rest) = keys::split_partition(key)?;
    let prefix_len = key.len() - rest.len();
    let (&section, body) = rest.split_first()?;
    let clustering = match section {
        keys::SECTION_STATIC => 0,
        keys::SECTION_ROWS => keys::clustering_len(layout, body)?,
        _ => return None,
    };
    Some(prefix_len + 1 + clustering)
}

/// The entries of a packed value, in order: (column part, cell).
pub struct Entries<'a> {
    value: &'a [u8],
    pos: usize,
}

pub fn entries(value: &[u8]) -> Entries<'_> {
    Entries { value, pos: 0 }
}

impl<'a> Iterator for Entries<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.value.len() {
            return None;
        }
        let parsed = (|| {
            let mut pos = self.pos;
            let n = varint::get(self.value, &mut pos)?;
            let column = self.value.get(pos..pos.checked_add(n)?)?;
            pos += n;
            let n = varint::get(self.value, &mut pos)?;
            let cell = self.value.get(pos..pos.checked_add(n)?)?;
            Some(((column, cell), pos + n))
        })();
        match parsed {
            Some((entry, next)) => {
                self.pos = next;
                Some(entry)
            }
            None => {
                // Garbage ends the value; it never panics and never wins.
                self.pos = self.value.len();
                None
            }
        }
    }
}

/// Appends one entry to a packed value under construction.
pub fn push_entry(column: &[u8], cell: &[u8], out: &mut Vec<u8>) {
    varint::put(column.len(), out);
    out.extend_from_slice(column);
    varint::put(cell.len(), out);
    out.extend_from_slice(cell);
}

/// Encodes entries sorted by column part, reconciling repeated column parts.
fn encode_sorted<'a>(sorted: impl Iterator<Item = (&'a [u8], &'a [u8])>, out: &mut Vec<u8>) {
    let mut pending: Option<(&'a [u8], Cow<'a, [u8]>)> = None;
    for (column, cell) in sorted {
        pending = match pending {
            Some((c, Cow::Borrowed(best))) if c == column => Some((c, cell::pick(best, cell))),
            // Only counter cells merge into new bytes.
            Some((c, Cow::Owned(best))) if c == column => Some((c, Cow::Owned(cell::pick(&best, cell).into_owned()))),
            Some((c, best)) => {
                push_entry(c, &best, out);
                Some((column, Cow::Borrowed(cell)))
            }
            None => Some((column, Cow::Borrowed(cell))),
        };
    }
    if let Some((c, best)) = pending {
        push_entry(c, &best, out);
    }
}

/// The merge operator for packed rows: every column part once, its cell the
/// winner among all inputs by Cassandra's rules.
pub fn merge<'a>(existing: Option<&'a [u8]>, operands: impl Iterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut all: Vec<(&'a [u8], &'a [u8])> = Vec::new();
    for value in existing.into_iter().chain(operands) {
        all.extend(entries(value));
    }
    // Stable: for equal column parts `pick` decides, whatever the order.
    all.sort_by(|a, b| a.0.cmp(b.0));
    let mut out = Vec::with_capacity(all.iter().map(|(c, v)| c.len() + v.len() + 4).sum());
    encode_sorted(all.into_iter(), &mut out);
    out
}

/// Builds packed rows from cell entries of one row at a time, reusing its
/// buffers (the write path packs every row of every mutation through one).
#[derive(Default)]
pub struct RowPacker {
    /// Column parts and cells of the row being built, back to back.
    scratch: Vec<u8>,
    /// (column start, column end, cell end) in `scratch`.
    spans: Vec<(u32, u32, u32)>,
    value: Vec<u8>,
}

impl RowPacker {
    pub fn clear(&mut self) {
        self.scratch.clear();
        self.spans.clear();
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Adds an entry; `column` and `cell` append the column part and the
    /// cell bytes to the buffer they get.
    pub fn add(&mut self, column: impl FnOnce(&mut Vec<u8>), cell: impl FnOnce(&mut Vec<u8>)) {
        let start = self.scratch.len() as u32;
        column(&mut self.scratch);
        let mid = self.scratch.len() as u32;
        cell(&mut self.scratch);
        self.spans.push((start, mid, self.scratch.len() as u32));
    }

    pub fn add_raw(&mut self, column: &[u8], cell: &[u8]) {
        self.add(|o| o.extend_from_slice(column), |o| o.extend_from_slice(cell));
    }

    /// The packed value of the entries added since `clear`.
    pub fn finish(&mut self) -> &[u8] {
        let scratch = &self.scratch;
        // `add` takes the spans from `scratch`'s own lengths: a miss is a bug, never silently an empty part.
        let bytes = |from: u32, to: u32| {
            scratch.get(from as usize..to as usize).expect("a span `add` recorded lies in scratch")
        };
        let part = |&(s, m, _): &(u32, u32, u32)| bytes(s, m);
        // Rows usually arrive sorted already (marker, then columns by id).
        if !self.spans.is_sorted_by(|a, b| part(a) < part(b)) {
            self.spans.sort_by(|a, b| part(a).cmp(part(b)));
        }
        self.value.clear();
        let iter = self.spans.iter().map(|&(s, m, e)| (bytes(s, m), bytes(m, e)));
        encode_sorted(iter, &mut self.value);
        &self.value
    }
}

/// Shows a cursor over stored entries (packed rows, deletion markers) as the
/// cell entries they hold: a packed row `R` appears as `R | column part` →
/// cell for each of its entries, in order.
pub(crate) struct Unpacked<'l, C: Cursor> {
    inner: C,
    layout: &'l Layout,
    /// Entries of the current stored entry when it is a packed row, as
    /// (column start, column end, cell start, cell end) in its value.
    spans: Vec<(u32, u32, u32, u32)>,
    /// Index into `spans`; `None` when the current stored entry is not packed.
    at: Option<usize>,
    key: Vec<u8>,
}

impl<'l, C: Cursor> Unpacked<'l, C> {
    pub(crate) fn new(inner: C, layout: &'l Layout) -> Unpacked<'l, C> {
        // Room for a typical row's cells and one cell's key, so a point read's first row grows neither.
        Unpacked { inner, layout, spans: Vec::with_capacity(16), at: None, key: Vec::with_capacity(64) }
    }

    /// Loads the current stored entry; false when it is a packed row with
    /// no entries (then the caller moves on).
    fn load(&mut self) -> bool {
        self.spans.clear();
        self.at = None;
        let Some(k) = self.inner.key() else { return true };
        if !is_packed_key(k) {
            return true;
        }
        let value = self.inner.value().unwrap_or_default();
        let base = value.as_ptr() as usize;
        for (column, cell) in entries(value) {
            let c0 = column.as_ptr() as usize - base;
            let v0 = cell.as_ptr() as usize - base;
            self.spans.push((c0 as u32, (c0 + column.len()) as u32, v0 as u32, (v0 + cell.len()) as u32));
        }
        !self.spans.is_empty()
    }

    fn set(&mut self, index: usize) {
        self.at = Some(index);
        self.key.clear();
        let column =
            self.spans.get(index).and_then(|&(c0, c1, _, _)| self.inner.value()?.get(c0 as usize..c1 as usize));
        if let (Some(k), Some(column)) = (self.inner.key(), column) {
            self.key.extend_from_slice(k);
            self.key.extend_from_slice(column);
        }
    }

    /// Positions at the first cell entry of the stored entry under the
    /// inner cursor, or of the next ones.
    fn settle_forward(&mut self) {
        while self.inner.valid() {
            if self.load() {
                if !self.spans.is_empty() {
                    self.set(0);
                }
                return;
            }
            self.inner.next();
        }
        self.at = None;
    }

    /// Positions at the last cell entry of the stored entry under the inner
    /// cursor, or of the previous ones.
    fn settle_backward(&mut self) {
        while self.inner.valid() {
            if self.load() {
                if !self.spans.is_empty() {
                    self.set(self.spans.len() - 1);
                }
                return;
            }
            self.inner.prev();
        }
        self.at = None;
    }
}

impl<C: Cursor> Cursor for Unpacked<'_, C> {
    fn seek_to_first(&mut self) {
        self.inner.seek_to_first();
        self.settle_forward();
    }

    fn seek_to_last(&mut self) {
        self.inner.seek_to_last();
        self.settle_backward();
    }

    fn seek(&mut self, key: &[u8]) {
        // A key inside a packed row (`row | column part...`) starts at that row.
        match row_key_len(self.layout, key).and_then(|n| key.get(..n)) {
            Some(row) if row.len() < key.len() => self.inner.seek(row),
            _ => self.inner.seek(key),
        }
        self.settle_forward();
        while self.valid() && self.key().is_some_and(|k| k < key) {
            self.next();
        }
    }

    fn seek_for_prev(&mut self, key: &[u8]) {
        self.inner.seek_for_prev(key);
        self.settle_backward();
        while self.valid() && self.key().is_some_and(|k| k > key) {
            self.prev();
        }
    }

    fn valid(&self) -> bool {
        self.inner.valid()
    }

    fn key(&self) -> Option<&[u8]> {
        match self.at {
            Some(_) => Some(&self.key),
            None => self.inner.key(),
        }
    }

    fn value(&self) -> Option<&[u8]> {
        match self.at {
            Some(i) => {
                let &(_, _, v0, v1) = self.spans.get(i)?;
                self.inner.value()?.get(v0 as usize..v1 as usize)
            }
            None => self.inner.value(),
        }
    }

    fn next(&mut self) {
        match self.at {
            Some(i) if i + 1 < self.spans.len() => self.set(i + 1),
            _ => {
                self.inner.next();
                self.settle_forward();
            }
        }
    }

    fn prev(&mut self) {
        match self.at {
            Some(i) if i > 0 => self.set(i - 1),
            _ => {
                self.inner.prev();
                self.settle_backward();
            }
        }
    }

    fn status(&self) -> Result<(), rocksdb::Error> {
        self.inner.status()
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use types::CqlType;

    use super::*;
    use crate::read::SliceCursor;

    use crate::cell::live;

    fn pack(entries: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
        let mut p = RowPacker::default();
        for (c, v) in entries {
            p.add_raw(c, v);
        }
        p.finish().to_vec()
    }

    fn unpack(value: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
        entries(value).map(|(c, v)| (c.to_vec(), v.to_vec())).collect()
    }

    fn random_row(rng: &mut StdRng) -> Vec<(Vec<u8>, Vec<u8>)> {
        (0..rng.gen_range(0..5))
            .map(|_| {
                let column = vec![0, rng.gen_range(0..6u8)];
                (column, live(rng.gen_range(0..4), &[rng.gen_range(0..3u8)]))
            })
            .collect()
    }

    #[test]
    fn packing_sorts_and_reconciles_and_merge_is_order_free() {
        let row = pack(&[(vec![0, 9], live(1, b"x")), (vec![0, 1], live(1, b"")), (vec![0, 9], live(2, b"y"))]);
        assert_eq!(unpack(&row), vec![(vec![0, 1], live(1, b"")), (vec![0, 9], live(2, b"y"))]);
        let mut rng = StdRng::seed_from_u64(7);
        for _ in 0..500 {
            let (a, b, c) = (pack(&random_row(&mut rng)), pack(&random_row(&mut rng)), pack(&random_row(&mut rng)));
            let abc = merge(None, [a.as_slice(), b.as_slice(), c.as_slice()].into_iter());
            assert_eq!(abc, merge(Some(&c), [b.as_slice(), a.as_slice()].into_iter()));
            let ab = merge(None, [a.as_slice(), b.as_slice()].into_iter());
            assert_eq!(abc, merge(Some(&ab), [c.as_slice()].into_iter()));
            let cols: Vec<Vec<u8>> = unpack(&abc).into_iter().map(|(c, _)| c).collect();
            assert!(cols.windows(2).all(|w| w[0] < w[1]));
        }
    }

    #[test]
    fn garbage_ends_a_value_without_panicking() {
        let mut row = pack(&[(vec![0, 1], live(1, b""))]);
        row.extend_from_slice(&[0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]);
        assert_eq!(unpack(&row).len(), 1);
        assert_eq!(unpack(&[0x05, 1]).len(), 0);
        assert_eq!(unpack(&merge(None, [&[0x80u8][..], &row[..]].into_iter())).len(), 1);
    }

    /// `Unpacked` over packed rows moves exactly as a cursor over the cells
    /// they hold, for random seeks in both directions.
    #[test]
    fn unpacked_cursor_matches_the_cells_it_stands_for() {
        let layout = Layout { clustering: vec![(CqlType::Int, false)], paths: Vec::new() };
        let mut rng = StdRng::seed_from_u64(11);
        for _ in 0..200 {
            let mut prefix = Vec::new();
            keys::partition_prefix(42, b"pk", &mut prefix).unwrap();
            let mut stored: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
            let mut cells: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
            if rng.gen_bool(0.5) {
                let mut k = prefix.clone();
                k.push(keys::SECTION_PARTITION_DELETION);
                stored.push((k.clone(), live(1, b"")));
                cells.push((k, live(1, b"")));
            }
            let mut rows: Vec<Vec<u8>> = Vec::new();
            if rng.gen_bool(0.5) {
                let mut k = prefix.clone();
                k.push(keys::SECTION_STATIC);
                rows.push(k);
            }
            let mut clusterings: Vec<i32> = (0..rng.gen_range(0..6)).map(|_| rng.gen_range(-3..4)).collect();
            clusterings.sort();
            clusterings.dedup();
            for c in clusterings {
                let mut k = prefix.clone();
                k.push(keys::SECTION_ROWS);
                keys::encode_clustering(&layout, &[Bytes::copy_from_slice(&c.to_be_bytes())], &mut k).unwrap();
                rows.push(k);
            }
            for k in rows {
                let row = random_row(&mut rng);
                let value = pack(&row);
                for (c, v) in unpack(&value) {
                    cells.push(([k.as_slice(), c.as_slice()].concat(), v));
                }
                stored.push((k, value));
            }
            let (lower, upper) = (prefix.clone(), keys::prefix_successor(&prefix).unwrap());
            let mut expect = SliceCursor::new(&cells, &lower, &upper);
            let mut got = Unpacked::new(SliceCursor::new(&stored, &lower, &upper), &layout);
            let mut probes: Vec<Vec<u8>> = cells.iter().map(|(k, _)| k.clone()).collect();
            probes.extend(stored.iter().map(|(k, _)| k.clone()));
            probes.extend(stored.iter().filter_map(|(k, _)| keys::prefix_successor(k)));
            probes.push(lower.clone());
            for _ in 0..30 {
                match rng.gen_range(0..6) {
                    0 => (expect.seek_to_first(), got.seek_to_first()),
                    1 => (expect.seek_to_last(), got.seek_to_last()),
                    2 | 3 => {
                        let mut p = probes[rng.gen_range(0..probes.len())].clone();
                        if rng.gen_bool(0.3) {
                            p.push(rng.gen());
                        }
                        if rng.gen_bool(0.5) {
                            (expect.seek(&p), got.seek(&p))
                        } else {
                            (expect.seek_for_prev(&p), got.seek_for_prev(&p))
                        }
                    }
                    4 => (expect.next(), got.next()),
                    _ => (expect.prev(), got.prev()),
                };
                assert_eq!(expect.valid(), got.valid());
                if expect.valid() {
                    assert_eq!(expect.key(), got.key());
                    assert_eq!(expect.value(), got.value());
                }
            }
        }
    }
}
