//! Storage key layout: how a table's partitions, rows and cells map onto one
//! sorted RocksDB column family.
//!
//! ```text
//! partition prefix = token (8 bytes, sign bit flipped, big endian) | pk length (u16 BE) | pk bytes
//! key = prefix | section | ...
//!   section 0x00  partition deletion            (nothing follows)
//!   section 0x01  range tombstone               | u32 len | start prefix | incl | u32 len | end prefix | incl
//!   section 0x02  static row                    | column part
//!   section 0x03  clustering rows               | clustering | column part
//! clustering  = each component in `types::order` form (order-preserving, self-delimiting, DESC inverted)
//! column part = column id (u16 BE)                                  simple cell
//!             | column id | 0x00                                    collection deletion
//!             | column id | 0x01 | path                             collection element
//! column id 0 = row deletion, 1 = row marker (primary key liveness)
//! ```
//!
//! Stored, a static or clustering row is one key (`prefix | section |
//! clustering`) whose value packs the row's column parts and cells
//! (`packed`); the keys above are the *cell entries* reads and replicas
//! work with, `row key | column part`.
//!
//! Invariants:
//! - Within a partition, keys sort as Cassandra orders its contents: deletion
//!   info first, then the static row, then rows in clustering order; within a
//!   row, the row deletion and marker come before every cell.
//! - Partitions sort by token, so a token range is a key range.

#![deny(clippy::indexing_slicing)]

use bytes::Bytes;
use types::schema::{ClusteringOrder, TableDef};
use types::CqlType;

use crate::StorageError;

pub const SECTION_PARTITION_DELETION: u8 = 0x00;
pub const SECTION_RANGE_TOMBSTONE: u8 = 0x01;
pub const SECTION_STATIC: u8 = 0x02;
pub const SECTION_ROWS: u8 = 0x03;

pub const COLUMN_ROW_DELETION: u16 = 0;
pub const COLUMN_ROW_MARKER: u16 = 1;
/// Schema column ids start here so the row-level ids above never collide.
pub const FIRST_USER_COLUMN_ID: u16 = 16;

pub const COMPLEX_DELETION: u8 = 0x00;
pub const COMPLEX_ELEMENT: u8 = 0x01;

/// Cassandra limits a partition key (and each clustering value) to 64 KiB.
pub const MAX_KEY_LENGTH: usize = u16::MAX as usize;

/// What storage needs to know about a table's clustering to encode and parse keys.
#[derive(Clone, Debug)]
pub struct Layout {
    pub clustering: Vec<(CqlType, bool /* desc */)>,
    /// Element comparator type for each non-frozen collection column, by column id.
    pub paths: Vec<(u16, PathKind)>,
}

#[derive(Clone, Debug)]
pub enum PathKind {
    /// Set elements and map keys, ordered by the element type.
    Ordered(CqlType),
    /// List element ids: 16 raw bytes ordered bytewise.
    ListId,
}

impl Layout {
    pub fn of(table: &TableDef) -> Layout {
        let clustering = table.clustering().map(|c| (c.ty.clone(), c.order == ClusteringOrder::Desc)).collect();
        let paths = table
            .columns
            .iter()
            .filter_map(|c| {
                if !c.ty.is_multi_cell() {
                    return None;
                }
                let kind = match &c.ty {
                    CqlType::Set { elem, .. } => PathKind::Ordered((**elem).clone()),
                    CqlType::Map { key, .. } => PathKind::Ordered((**key).clone()),
                    CqlType::List { .. } => PathKind::ListId,
                    // UDT fields are addressed by their field index (u16 BE).
                    _ => PathKind::Ordered(CqlType::SmallInt),
                };
                Some((c.id, kind))
            })
            .collect();
        Layout { clustering, paths }
    }

    pub fn path_kind(&self, column: u16) -> Option<&PathKind> {
        self.paths.iter().find(|(id, _)| *id == column).map(|(_, k)| k)
    }
}

pub fn token_bytes(token: i64) -> [u8; 8] {
    ((token as u64) ^ (1u64 << 63)).to_be_bytes()
}

pub fn token_from_bytes(bytes: [u8; 8]) -> i64 {
    (u64::from_be_bytes(bytes) ^ (1u64 << 63)) as i64
}

pub fn partition_prefix(token: i64, partition_key: &[u8], out: &mut Vec<u8>) -> Result<(), StorageError> {
    if partition_key.len() > MAX_KEY_LENGTH {
        return Err(StorageError::KeyTooLong(partition_key.len()));
    }
    out.extend_from_slice(&token_bytes(token));
    out.extend_from_slice(&(partition_key.len() as u16).to_be_bytes());
    out.extend_from_slice(partition_key);
    Ok(())
}

/// Splits a key into (token, partition key, rest starting at the section byte).
pub fn split_partition(key: &[u8]) -> Option<(i64, &[u8], &[u8])> {
    let (token, rest) = key.split_first_chunk()?;
    let (len, rest) = rest.split_first_chunk()?;
    let (pk, rest) = rest.split_at_checked(u16::from_be_bytes(*len) as usize)?;
    Some((token_from_bytes(*token), pk, rest))
}

/// Encodes a (possibly partial) clustering prefix.
pub fn encode_clustering(layout: &Layout, values: &[Bytes], out: &mut Vec<u8>) -> Result<(), StorageError> {
    if values.len() > layout.clustering.len() {
        return Err(StorageError::Invalid(format!(
            "clustering prefix has {} components, table has {}",
            values.len(),
            layout.clustering.len()
        )));
    }
    for (value, (ty, desc)) in values.iter().zip(&layout.clustering) {
        if value.len() > MAX_KEY_LENGTH {
            return Err(StorageError::KeyTooLong(value.len()));
        }
        types::order::encode_key_component(ty, value, *desc, out);
    }
    Ok(())
}

/// Returns the length of the encoded full clustering at the start of `input`.
pub fn clustering_len(layout: &Layout, input: &[u8]) -> Option<usize> {
    let mut at = 0;
    for (ty, desc) in &layout.clustering {
        let (_, used) = types::order::decode_key_component(ty, input.get(at..)?, *desc).ok()?;
        at += used;
    }
    Some(at)
}

pub fn decode_clustering(layout: &Layout, input: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut at = 0;
    let mut values = Vec::with_capacity(layout.clustering.len());
    for (ty, desc) in &layout.clustering {
        let (value, used) = types::order::decode_key_component(ty, input.get(at..)?, *desc).ok()?;
        at += used;
        values.push(value);
    }
    Some(values)
}

/// The column part of a key, parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnPart<'a> {
    Simple(u16),
    ComplexDeletion(u16),
    Element(u16, &'a [u8]),
}

pub fn parse_column_part(input: &[u8]) -> Option<ColumnPart<'_>> {
    let (id, rest) = input.split_first_chunk()?;
    let id = u16::from_be_bytes(*id);
    match rest.split_first() {
        None => Some(ColumnPart::Simple(id)),
        Some((&COMPLEX_DELETION, [])) => Some(ColumnPart::ComplexDeletion(id)),
        Some((&COMPLEX_ELEMENT, path)) => Some(ColumnPart::Element(id, path)),
        _ => None,
    }
}

pub fn encode_path(layout: &Layout, column: u16, path: &[u8], out: &mut Vec<u8>) -> Result<(), StorageError> {
    match layout.path_kind(column) {
        Some(PathKind::Ordered(ty)) => {
            types::order::encode_key_component(ty, path, false, out);
            Ok(())
        }
        Some(PathKind::ListId) => {
            out.extend_from_slice(path);
            Ok(())
        }
        None => Err(StorageError::Invalid(format!("column {column} is not a non-frozen collection"))),
    }
}

pub fn decode_path(layout: &Layout, column: u16, encoded: &[u8]) -> Option<Vec<u8>> {
    match layout.path_kind(column)? {
        PathKind::Ordered(ty) => types::order::decode_key_component(ty, encoded, false).ok().map(|(v, _)| v),
        PathKind::ListId => Some(encoded.to_vec()),
    }
}

/// Encodes a range tombstone's bounds after the section byte.
pub fn encode_range_bounds(start: &[u8], start_inclusive: bool, end: &[u8], end_inclusive: bool, out: &mut Vec<u8>) {
    out.extend_from_slice(&(start.len() as u32).to_be_bytes());
    out.extend_from_slice(start);
    out.push(start_inclusive as u8);
    out.extend_from_slice(&(end.len() as u32).to_be_bytes());
    out.extend_from_slice(end);
    out.push(end_inclusive as u8);
}

/// A range tombstone as reads and the compaction filter keep it: (start,
/// start inclusive, end, end inclusive, deletion timestamp), bounds encoded.
pub(crate) type RangeDeletion = (Vec<u8>, bool, Vec<u8>, bool, i64);

pub struct RangeBounds<'a> {
    pub start: &'a [u8],
    pub start_inclusive: bool,
    pub end: &'a [u8],
    pub end_inclusive: bool,
}

pub fn decode_range_bounds(input: &[u8]) -> Option<RangeBounds<'_>> {
    let start_len = u32::from_be_bytes(input.get(0..4)?.try_into().ok()?) as usize;
    let start = input.get(4..4 + start_len)?;
    let mut at = 4 + start_len;
    let start_inclusive = *input.get(at)? != 0;
    at += 1;
    let end_len = u32::from_be_bytes(input.get(at..at + 4)?.try_into().ok()?) as usize;
    at += 4;
    let end = input.get(at..at + end_len)?;
    at += end_len;
    let end_inclusive = *input.get(at)? != 0;
    Some(RangeBounds { start, start_inclusive, end, end_inclusive })
}

impl RangeBounds<'_> {
    /// Whether the encoded clustering `row` lies within these (encoded prefix) bounds.
    pub fn contains(&self, row: &[u8]) -> bool {
        bound_start_admits(self.start, self.start_inclusive, row) && bound_end_admits(self.end, self.end_inclusive, row)
    }
}

pub fn bound_start_admits(start: &[u8], inclusive: bool, row: &[u8]) -> bool {
    if start.is_empty() {
        return true;
    }
    if row.starts_with(start) {
        return inclusive;
    }
    row > start
}

pub fn bound_end_admits(end: &[u8], inclusive: bool, row: &[u8]) -> bool {
    if end.is_empty() {
        return true;
    }
    if row.starts_with(end) {
        return inclusive;
    }
    row < end
}

/// The smallest key greater than every key that starts with `prefix`, or
/// `None` when no such key exists (all 0xFF).
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut out = prefix.to_vec();
    while let Some(last) = out.pop() {
        if last != 0xFF {
            out.push(last + 1);
            return Some(out);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_sort_as_signed() {
        assert!(token_bytes(-5) < token_bytes(3));
        assert!(token_bytes(i64::MIN + 1) < token_bytes(i64::MIN + 2));
        assert_eq!(token_from_bytes(token_bytes(-42)), -42);
    }

    #[test]
    fn bounds_follow_prefix_semantics() {
        assert!(bound_start_admits(b"ab", true, b"abc"));
        assert!(!bound_start_admits(b"ab", false, b"abc"));
        assert!(bound_start_admits(b"ab", false, b"ac"));
        assert!(bound_end_admits(b"ab", true, b"abz"));
        assert!(!bound_end_admits(b"ab", false, b"abz"));
        assert!(bound_end_admits(b"ab", false, b"aa"));
        assert_eq!(prefix_successor(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_successor(b"\xff"), None);
    }
}
