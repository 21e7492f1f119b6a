//! Helpers shared by the statement executors: name resolution, partition key
//! composition, and turning stored cells back into CQL values.

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

/// A column's value in a read row, with the metadata `writetime()`/`ttl()` need.
#[derive(Clone, Debug)]
pub struct CellOut {
    pub value: Vec<u8>,
    pub timestamp: Option<i64>,
    /// Remaining seconds to live.
    pub ttl: Option<i32>,
}

impl CellOut {
    pub fn plain(value: Vec<u8>) -> CellOut {
        CellOut { value, timestamp: None, ttl: None }
    }

    fn of(cell: &Cell, now: i32) -> CellOut {
        CellOut {
            value: cell.value.clone(),
            timestamp: Some(cell.timestamp),
            ttl: if cell.ttl > 0 { Some((cell.local_expiration - now).max(0)) } else { None },
        }
    }
}

/// Serializes a non-frozen collection's live elements as the collection value.
pub fn collection_value(ty: &CqlType, items: &[(Vec<u8>, Cell)]) -> Vec<u8> {
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
            Some(CellOut { value: collection_value(&col.ty, items), timestamp: max_ts, ttl: None })
        }
    }
}
