//! Test fixtures shared by the select tests: a table definition from a
//! column list, and a parsed SELECT.

use cql::ast;
use types::schema::{ClusteringOrder, ColumnDef, ColumnKind, TableDef, TableOptions};
use types::CqlType;

/// Table `ks.t` with `columns` in order: partition key and clustering
/// columns numbered by their position among their kind, ids in order.
pub(crate) fn table(columns: &[(&str, CqlType, ColumnKind)]) -> TableDef {
    let mut positions = [0u32; 3];
    let columns: Vec<ColumnDef> = columns
        .iter()
        .enumerate()
        .map(|(id, (name, ty, kind))| {
            let slot = match kind {
                ColumnKind::PartitionKey => Some(0),
                ColumnKind::Clustering => Some(1),
                _ => None,
            };
            let position = slot.and_then(|s| positions.get_mut(s)).map_or(0, |p| {
                *p += 1;
                *p - 1
            });
            ColumnDef {
                name: name.to_string(),
                ty: ty.clone(),
                kind: *kind,
                position,
                order: ClusteringOrder::Asc,
                id: id as u16,
            }
        })
        .collect();
    let mut t = TableDef {
        keyspace: "ks".into(),
        name: "t".into(),
        id: uuid::Uuid::nil(),
        next_column_id: columns.len() as u16,
        columns,
        options: TableOptions::default(),
        dropped_columns: Default::default(),
        indexes: Vec::new(),
    };
    t.sort_columns();
    t
}

/// `cql`, which must be a SELECT.
pub(crate) fn select(cql: &str) -> ast::Select {
    let Ok(ast::Statement::Select(select)) = cql::parse(cql) else { panic!("not a SELECT: {cql}") };
    *select
}
