//! Helpers shared by the statement executors: name resolution, partition key
//! composition, and turning stored cells back into CQL values (a non-frozen
//! collection's or user type's cells into one value: a user type's cell path
//! is its field's position, `field_path`).

use std::sync::Arc;

use bytes::Bytes;
use cql::ast::QualifiedName;
use storage::{Cell, ColumnData, Row};
use types::schema::{ColumnDef, KeyspaceDef, TableDef};
use types::CqlType;

use crate::error::QueryError;
use crate::schema::Schema;

/// One end of a slice on a single column: its value and whether it is
/// inclusive (`None`: unbounded).
pub type ValueBound = Option<(Bytes, bool)>;
/// One end of a slice on a prefix of columns (`(c1, c2) > (x, y)`).
pub type PrefixBound = Option<(Vec<Bytes>, bool)>;

pub const NO_KEYSPACE: &str =
    "No keyspace has been specified. USE a keyspace, or explicitly specify keyspace.tablename";

pub fn keyspace_name<'a>(q: &'a QualifiedName, session: Option<&'a str>) -> Result<&'a str, QueryError> {
    match (&q.keyspace, session) {
        (Some(k), _) => Ok(k.as_str()),
        (None, Some(k)) => Ok(k),
        (None, None) => Err(QueryError::Invalid(NO_KEYSPACE.into())),
    }
}

pub fn resolve_keyspace<'s>(schema: &'s Schema, name: &str) -> Result<&'s Arc<KeyspaceDef>, QueryError> {
    schema.keyspace(name).ok_or_else(|| QueryError::Invalid(format!("Keyspace {name} does not exist")))
}

/// Resolves `[ks.]table` against the schema and the session's keyspace.
pub fn resolve_table<'s>(
    schema: &'s Schema,
    q: &QualifiedName,
    session: Option<&str>,
) -> Result<(&'s Arc<KeyspaceDef>, &'s TableDef), QueryError> {
    let ks_name = keyspace_name(q, session)?;
    let ks = resolve_keyspace(schema, ks_name)?;
    let table = ks.tables.get(&q.name).ok_or_else(|| QueryError::Invalid(format!("unconfigured table {}", q.name)))?;
    Ok((ks, table))
}

pub fn column<'t>(table: &'t TableDef, name: &str) -> Result<(usize, &'t ColumnDef), QueryError> {
    table.columns.iter().enumerate().find(|(_, c)| c.name == name).ok_or_else(|| {
        QueryError::Invalid(format!("Undefined column name {name} in table {}.{}", table.keyspace, table.name))
    })
}

/// [`column`], trying position `hint` first: a statement that names columns
/// in the table's order (as drivers and tools write INSERTs) finds each one
/// at the first compare.
pub fn column_near<'t>(table: &'t TableDef, name: &str, hint: usize) -> Result<(usize, &'t ColumnDef), QueryError> {
    match table.columns.get(hint) {
        Some(c) if c.name == name => Ok((hint, c)),
        _ => column(table, name),
    }
}

/// Every combination of one value from each list, in the lists' order (the
/// keys or clusterings of `IN` restrictions on several columns).
pub fn cartesian(lists: &[&Vec<Bytes>]) -> Vec<Vec<Bytes>> {
    let mut out: Vec<Vec<Bytes>> = vec![Vec::new()];
    for list in lists {
        let mut next = Vec::with_capacity(out.len() * list.len());
        for prefix in &out {
            for v in list.iter() {
                let mut p = prefix.clone();
                p.push(v.clone());
                next.push(p);
            }
        }
        out = next;
    }
    out
}

/// The serialized partition key: the value itself for one column, the
/// CompositeType form (`u16 len | bytes | 0x00` per component) for several.
pub fn compose_partition_key(components: &[Bytes]) -> Result<Bytes, QueryError> {
    for c in components {
        if c.len() > u16::MAX as usize {
            return Err(QueryError::Invalid(format!(
                "Key length of {} is longer than maximum of {}",
                c.len(),
                u16::MAX
            )));
        }
    }
    if components.len() == 1 {
        if components[0].is_empty() {
            return Err(QueryError::Invalid("Key may not be empty".into()));
        }
        return Ok(components[0].clone());
    }
    let parts: Vec<&[u8]> = components.iter().map(|c| c.as_ref()).collect();
    Ok(Bytes::from(ring::tokens::compound_key(&parts)))
}

/// Splits a serialized partition key back into its components.
pub fn decompose_partition_key(key: &[u8], count: usize) -> Vec<Vec<u8>> {
    if count <= 1 {
        return vec![key.to_vec()];
    }
    let mut out = Vec::with_capacity(count);
    let mut at = 0;
    while out.len() < count {
        let Some(len_bytes) = key.get(at..at + 2) else { break };
        let len = u16::from_be_bytes([len_bytes[0], len_bytes[1]]) as usize;
        let Some(component) = key.get(at + 2..at + 2 + len) else { break };
        out.push(component.to_vec());
        at += 2 + len + 1;
    }
    while out.len() < count {
        out.push(Vec::new());
    }
    out
}

/// A live cell's write time and remaining seconds to live (`None`: no TTL).
pub type CellMeta = (i64, Option<i32>);

/// A column's value in a read row, with the metadata `writetime()`/`ttl()` need.
#[derive(Clone, Debug)]
pub struct CellOut {
    pub value: Vec<u8>,
    pub timestamp: Option<i64>,
    /// Remaining seconds to live.
    pub ttl: Option<i32>,
    /// A non-frozen user type's fields' cell metadata by position (`None`
    /// where the field has no live cell); `None` for every other column.
    pub fields: Option<Vec<Option<CellMeta>>>,
}

impl CellOut {
    pub fn plain(value: Vec<u8>) -> CellOut {
        CellOut { value, timestamp: None, ttl: None, fields: None }
    }

    fn of(cell: &Cell, now: i32) -> CellOut {
        CellOut { value: cell.value.clone(), timestamp: Some(cell.timestamp), ttl: remaining(cell, now), fields: None }
    }
}

fn remaining(cell: &Cell, now: i32) -> Option<i32> {
    if cell.ttl > 0 {
        Some((cell.local_expiration - now).max(0))
    } else {
        None
    }
}

/// The component at `position` of a serialized tuple or user type value
/// (`None`: null, or absent from a value written before the type grew).
pub fn udt_component(value: &[u8], position: usize) -> Option<&[u8]> {
    let mut rest = value;
    for i in 0..=position {
        let (len, tail) = rest.split_first_chunk::<4>()?;
        let len = i32::from_be_bytes(*len);
        if len < 0 {
            if i == position {
                return None;
            }
            rest = tail;
            continue;
        }
        let (component, tail) = tail.split_at_checked(len as usize)?;
        if i == position {
            return Some(component);
        }
        rest = tail;
    }
    None
}

/// The cell path of a non-frozen user type's field: its position, a 2-byte
/// big-endian short (Cassandra's `UserType.cellPathForField`).
pub fn field_path(position: usize) -> Bytes {
    Bytes::copy_from_slice(&(position as u16).to_be_bytes())
}

/// The field position a non-frozen user type's cell path names.
pub fn path_field(path: &[u8]) -> Option<usize> {
    match path {
        [hi, lo] => Some(u16::from_be_bytes([*hi, *lo]) as usize),
        _ => None,
    }
}

/// Serializes a non-frozen user type's live field cells (in path order) as
/// the user type value: every field of the type, null where no cell lives.
fn udt_value(fields: usize, items: &[(Vec<u8>, Cell)]) -> Vec<u8> {
    let mut values: Vec<Option<&[u8]>> = vec![None; fields];
    for (path, cell) in items {
        if let Some(slot) = path_field(path).and_then(|i| values.get_mut(i)) {
            *slot = Some(&cell.value);
        }
    }
    let mut out = Vec::new();
    for v in values {
        match v {
            Some(b) => {
                out.extend_from_slice(&(b.len() as i32).to_be_bytes());
                out.extend_from_slice(b);
            }
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }
    out
}

/// Serializes a non-frozen collection's live elements (a non-frozen user
/// type's live fields) as the collection (user type) value.
pub fn collection_value(ty: &CqlType, items: &[(Vec<u8>, Cell)]) -> Vec<u8> {
    if let CqlType::Udt { fields, .. } = ty {
        return udt_value(fields.len(), items);
    }
    let mut out = Vec::new();
    out.extend_from_slice(&(items.len() as i32).to_be_bytes());
    for (path, cell) in items {
        match ty {
            CqlType::Set { .. } => {
                out.extend_from_slice(&(path.len() as i32).to_be_bytes());
                out.extend_from_slice(path);
            }
            CqlType::Map { .. } => {
                out.extend_from_slice(&(path.len() as i32).to_be_bytes());
                out.extend_from_slice(path);
                out.extend_from_slice(&(cell.value.len() as i32).to_be_bytes());
                out.extend_from_slice(&cell.value);
            }
            _ => {
                out.extend_from_slice(&(cell.value.len() as i32).to_be_bytes());
                out.extend_from_slice(&cell.value);
            }
        }
    }
    out
}

/// A stored column's value as the client sees it.
pub fn stored_column(col: &ColumnDef, row: &Row, now: i32) -> Option<CellOut> {
    match row.column(col.id)? {
        ColumnData::Simple(cell) => Some(CellOut::of(cell, now)),
        ColumnData::Complex(items) => {
            if items.is_empty() {
                return None;
            }
            let max_ts = items.iter().map(|(_, c)| c.timestamp).max();
            let fields = match &col.ty {
                CqlType::Udt { fields, .. } => {
                    let mut meta = vec![None; fields.len()];
                    for (path, cell) in items {
                        if let Some(slot) = path_field(path).and_then(|i| meta.get_mut(i)) {
                            *slot = Some((cell.timestamp, remaining(cell, now)));
                        }
                    }
                    Some(meta)
                }
                _ => None,
            };
            Some(CellOut { value: collection_value(&col.ty, items), timestamp: max_ts, ttl: None, fields })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(value: &[u8], timestamp: i64) -> Cell {
        Cell { value: value.to_vec(), timestamp, ttl: 0, local_expiration: 0 }
    }

    fn address() -> CqlType {
        CqlType::Udt {
            keyspace: "ks".into(),
            name: "address".into(),
            fields: vec![("street".into(), CqlType::Text), ("zip".into(), CqlType::Int), ("n".into(), CqlType::Int)],
            frozen: false,
        }
    }

    #[test]
    fn field_paths_are_big_endian_shorts() {
        assert_eq!(&field_path(0)[..], &[0, 0]);
        assert_eq!(&field_path(258)[..], &[1, 2]);
        assert_eq!(path_field(&field_path(7)), Some(7));
        assert_eq!(path_field(&[1]), None);
        assert_eq!(path_field(&[0, 1, 2]), None);
    }

    #[test]
    fn udt_value_has_every_field_null_where_no_cell_lives() {
        // Only the zip field (position 1) has a cell.
        let items = vec![(field_path(1).to_vec(), cell(&5i32.to_be_bytes(), 1))];
        let v = collection_value(&address(), &items);
        let mut want = (-1i32).to_be_bytes().to_vec();
        want.extend_from_slice(&4i32.to_be_bytes());
        want.extend_from_slice(&5i32.to_be_bytes());
        want.extend_from_slice(&(-1i32).to_be_bytes());
        assert_eq!(v, want);
        assert_eq!(
            types::Value::deserialize(&address(), &v).ok(),
            Some(types::Value::Udt(vec![None, Some(types::Value::Int(5)), None]))
        );
        // A cell of a position the type does not have (or a malformed path) is ignored.
        let items = vec![(field_path(9).to_vec(), cell(b"x", 1)), (vec![1], cell(b"y", 1))];
        assert_eq!(collection_value(&address(), &items), [(-1i32).to_be_bytes(); 3].concat());
    }

    #[test]
    fn udt_component_reads_one_field() {
        let items = vec![(field_path(0).to_vec(), cell(b"main", 1)), (field_path(2).to_vec(), cell(&[0, 0, 0, 9], 1))];
        let v = collection_value(&address(), &items);
        assert_eq!(udt_component(&v, 0), Some(&b"main"[..]));
        assert_eq!(udt_component(&v, 1), None);
        assert_eq!(udt_component(&v, 2), Some(&[0u8, 0, 0, 9][..]));
        // A value written before the type grew has no later fields; a truncated one no field at all.
        assert_eq!(udt_component(&v, 3), None);
        assert_eq!(udt_component(&v[..3], 0), None);
        assert_eq!(udt_component(&[0, 0, 0, 9, 1], 0), None);
    }

    #[test]
    fn stored_udt_column_keeps_each_fields_write_time() {
        let ty = address();
        let col = ColumnDef {
            name: "a".into(),
            ty,
            kind: types::schema::ColumnKind::Regular,
            position: 0,
            order: types::schema::ClusteringOrder::Asc,
            id: 16,
        };
        let mut expiring = cell(b"x", 20);
        expiring.ttl = 100;
        expiring.local_expiration = 1_100;
        let row = Row {
            clustering: Vec::new(),
            columns: vec![(
                16,
                ColumnData::Complex(vec![
                    (field_path(0).to_vec(), expiring),
                    (field_path(1).to_vec(), cell(&[0, 0, 0, 1], 10)),
                ]),
            )],
            marker: None,
        };
        let out = stored_column(&col, &row, 1_000).expect("a live field");
        assert_eq!(out.timestamp, Some(20));
        assert_eq!(out.fields, Some(vec![Some((20, Some(100))), Some((10, None)), None]));
    }
}
