//! Secondary indexes at the schema level: `CREATE [CUSTOM] INDEX` and
//! `DROP INDEX` with Cassandra 5.0's validation, default names and messages,
//! the `target` text `system_schema.indexes` and DESCRIBE show, and the
//! query side's question "which index serves this restriction".
//!
//! Invariants:
//! - Index names are unique within a keyspace; a default name is
//!   `<table>_<column>_idx` with non-word characters removed, then `_1`,
//!   `_2`, … until unused (Cassandra's `generateDefaultIndexName`).
//! - A table holds at most one index of each kind (legacy or
//!   storage-attached) per target: a second is refused as a duplicate.
//! - Every index gets its own storage id (`IndexDef::id`): each replica keeps
//!   its entries in a column family of their own (`storage::index`).

use std::collections::BTreeMap;

use cql::ast;
use cql_protocol::{SchemaChange, SchemaChangeTarget, SchemaChangeType};
use types::schema::{ColumnKind, IndexDef, IndexTargetKind, KeyspaceDef, TableDef};
use types::CqlType;
use uuid::Uuid;

use crate::error::QueryError;

type Keyspaces = BTreeMap<String, KeyspaceDef>;

/// The class names Cassandra 5 takes for a storage-attached index.
fn is_sai(class: &str) -> bool {
    let c = class.to_ascii_lowercase();
    c == "sai" || c == "storageattachedindex" || c == "org.apache.cassandra.index.sai.storageattachedindex"
}

/// Whether a `USING` class names the legacy index (`legacy_local_table`).
fn is_legacy(class: &str) -> bool {
    class.eq_ignore_ascii_case("legacy_local_table")
}

/// `CREATE [CUSTOM] INDEX`: adds the index to its table. `None` when IF NOT
/// EXISTS made it a no-op.
pub(crate) fn create_index(
    kss: &mut Keyspaces,
    session: Option<&str>,
    ci: &ast::CreateIndex,
) -> Result<Option<SchemaChange>, QueryError> {
    let ks_name = crate::common::keyspace_name(&ci.table, session)?.to_string();
    let Some(ks) = kss.get_mut(&ks_name) else {
        return Err(QueryError::Invalid(format!("Keyspace '{ks_name}' doesn't exist")));
    };
    let all_names: Vec<String> = ks.tables.values().flat_map(|t| t.indexes.iter().map(|i| i.name.clone())).collect();
    let Some(table) = ks.tables.get_mut(&ci.table.name) else {
        return Err(QueryError::Invalid(format!("Table '{}' doesn't exist", ci.table.name)));
    };
    if table.columns.iter().any(|c| c.ty == CqlType::Counter) {
        return Err(QueryError::invalid("Secondary indexes on counter tables aren't supported"));
    }
    if ci.column.is_empty() {
        return Err(QueryError::invalid("Only CUSTOM indexes can be created without specifying a target column"));
    }
    let class_name = match &ci.using {
        Some(class) if is_legacy(class) => None,
        Some(class) if is_sai(class) => Some(class.clone()),
        // Cassandra 5 ships SASI disabled (`sasi_indexes_enabled: false`); Shoal has none.
        Some(class) if class == "org.apache.cassandra.index.sasi.SASIIndex" => {
            return Err(QueryError::invalid("SASI indexes are disabled. Enable in cassandra.yaml to use."))
        }
        Some(class) => return Err(QueryError::Config(format!("Unable to find custom indexer class '{class}'"))),
        None => None,
    };
    let Some(column) = table.column(&ci.column).cloned() else {
        return Err(QueryError::Invalid(format!(
            "Undefined column name {} in table {}.{}",
            ci.column, ks_name, table.name
        )));
    };
    if column.kind == ColumnKind::PartitionKey && table.partition_key_len() == 1 {
        return Err(QueryError::Invalid(format!(
            "Cannot create secondary index on the only partition key column {}",
            column.name
        )));
    }
    if let CqlType::Udt { frozen: false, .. } = column.ty {
        return Err(QueryError::Invalid(format!("Cannot create index on non-frozen UDT column {}", column.name)));
    }
    let collection = matches!(column.ty, CqlType::List { .. } | CqlType::Set { .. } | CqlType::Map { .. });
    let frozen = matches!(
        column.ty,
        CqlType::List { frozen: true, .. } | CqlType::Set { frozen: true, .. } | CqlType::Map { frozen: true, .. }
    );
    let is_map = matches!(column.ty, CqlType::Map { .. });
    let name = &column.name;
    let target = match ci.function.as_deref() {
        Some("full") => {
            if !frozen {
                return Err(QueryError::invalid("full() indexes can only be created on frozen collections"));
            }
            IndexTargetKind::Full
        }
        Some(f) if !collection => {
            return Err(QueryError::Invalid(format!(
                "Cannot create {f}() index on {name}. Non-collection columns only support simple indexes"
            )))
        }
        Some("keys") if !is_map => {
            return Err(QueryError::Invalid(format!("Cannot create index on keys of column {name} with non-map type")))
        }
        Some("entries") if !is_map => {
            return Err(QueryError::Invalid(format!(
                "Cannot create index on entries of column {name} with non-map type"
            )))
        }
        _ if frozen => {
            let f = ci.function.as_deref().unwrap_or("values");
            return Err(QueryError::Invalid(format!(
                "Cannot create {f}() index on frozen column {name}. Frozen collections are immutable and must be fully indexed by using the 'full({name})' modifier"
            )));
        }
        Some("keys") => IndexTargetKind::Keys,
        Some("entries") => IndexTargetKind::Entries,
        Some(_) => IndexTargetKind::Values,
        None if collection => IndexTargetKind::Values,
        None => IndexTargetKind::Simple,
    };
    if let Some(n) = &ci.name {
        if all_names.iter().any(|x| x == n) {
            if ci.if_not_exists {
                return Ok(None);
            }
            return Err(QueryError::Invalid(format!("Index '{n}' already exists")));
        }
    }
    let index_name = ci.name.clone().unwrap_or_else(|| default_name(&all_names, &table.name, name));
    if let Some(existing) = table
        .indexes
        .iter()
        .find(|i| i.column == column.name && i.target == target && i.class_name.is_some() == class_name.is_some())
    {
        if ci.if_not_exists {
            return Ok(None);
        }
        if class_name.is_some() {
            return Err(QueryError::Invalid(format!(
                "Cannot create more than one storage-attached index on the same column: {name}"
            )));
        }
        return Err(QueryError::Invalid(format!(
            "Index {index_name} is a duplicate of existing index {}",
            existing.name
        )));
    }
    if !valid_index_name(&index_name) {
        return Err(QueryError::Invalid(format!(
            "Index name must not be empty, or contain non-alphanumeric-underscore characters (got \"{index_name}\")"
        )));
    }
    table.indexes.push(IndexDef {
        name: index_name,
        id: Uuid::new_v4(),
        column: column.name.clone(),
        target,
        class_name,
    });
    let table_name = table.name.clone();
    Ok(Some(SchemaChange { change: SchemaChangeType::Updated, target: SchemaChangeTarget::Table(ks_name, table_name) }))
}

fn valid_index_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Cassandra's default index name: `<table>_<column>_idx` without non-word
/// characters, then `_1`, `_2`, … past the names taken in the keyspace.
pub(crate) fn default_name(taken: &[String], table: &str, column: &str) -> String {
    let base: String =
        format!("{table}_{column}_idx").chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
    if !taken.contains(&base) {
        return base;
    }
    (1..).map(|n| format!("{base}_{n}")).find(|n| !taken.contains(n)).unwrap_or(base)
}

/// `DROP INDEX [IF EXISTS] [ks.]name`.
pub(crate) fn drop_index(
    kss: &mut Keyspaces,
    session: Option<&str>,
    name: &ast::QualifiedName,
    if_exists: bool,
) -> Result<Option<SchemaChange>, QueryError> {
    let ks_name = crate::common::keyspace_name(name, session)?.to_string();
    let found = kss.get_mut(&ks_name).and_then(|ks| {
        ks.tables.values_mut().find(|t| t.indexes.iter().any(|i| i.name == name.name)).map(|t| {
            t.indexes.retain(|i| i.name != name.name);
            t.name.clone()
        })
    });
    match found {
        Some(table) => Ok(Some(SchemaChange {
            change: SchemaChangeType::Updated,
            target: SchemaChangeTarget::Table(ks_name, table),
        })),
        None if if_exists => Ok(None),
        None => Err(QueryError::Invalid(format!("Index '{ks_name}.{}' doesn't exist'", name.name))),
    }
}

/// ALTER TABLE DROP of an indexed column: Cassandra's refusal.
pub(crate) fn check_drop_column(table: &TableDef, column: &str) -> Result<(), QueryError> {
    let dependent: Vec<&str> = table.indexes.iter().filter(|i| i.column == column).map(|i| i.name.as_str()).collect();
    if dependent.is_empty() {
        return Ok(());
    }
    Err(QueryError::Invalid(format!(
        "Cannot drop column {column} because it has dependent secondary indexes ({})",
        dependent.join(", ")
    )))
}

/// ALTER TABLE RENAME of an indexed column: Cassandra's refusal.
pub(crate) fn check_rename_column(table: &TableDef, column: &str) -> Result<(), QueryError> {
    let dependent: Vec<&str> = table.indexes.iter().filter(|i| i.column == column).map(|i| i.name.as_str()).collect();
    if dependent.is_empty() {
        return Ok(());
    }
    Err(QueryError::Invalid(format!(
        "Can't rename column {column} because it has dependent secondary indexes ({})",
        dependent.join(", ")
    )))
}

/// `system_schema.indexes`' `kind` and `options` of an index.
pub(crate) fn schema_row(index: &IndexDef) -> (&'static str, BTreeMap<String, String>) {
    let mut options = BTreeMap::new();
    options.insert("target".to_string(), index.target_text(&crate::describe::maybe_quote(&index.column)));
    match &index.class_name {
        Some(class) => {
            options.insert("class_name".to_string(), class.clone());
            ("CUSTOM", options)
        }
        None => ("COMPOSITES", options),
    }
}

/// The CREATE statement DESCRIBE prints for an index (a snapshot's
/// `schema.cql` and a restore's re-creation too).
pub fn create_statement(ks: &str, table: &str, index: &IndexDef) -> String {
    use crate::describe::maybe_quote as cql_name;
    let target = index.target_text(&cql_name(&index.column));
    let on = format!("{}.{}", cql_name(ks), cql_name(table));
    match &index.class_name {
        Some(class) => {
            format!(
                "CREATE CUSTOM INDEX {} ON {on} ({target}) USING '{}';",
                cql_name(&index.name),
                class.replace('\'', "''")
            )
        }
        None => format!("CREATE INDEX {} ON {on} ({target});", cql_name(&index.name)),
    }
}

/// The index that serves a restriction, if any: `col = v` on a simple or
/// `full()` index, `col CONTAINS v` on a `values()` index, `CONTAINS KEY` on
/// `keys()`, `m[k] = v` on `entries()`.
pub(crate) fn serving<'t>(table: &'t TableDef, column: &str, op: IndexedOp) -> Option<&'t IndexDef> {
    table.indexes.iter().find(|i| {
        i.column == column
            && matches!(
                (i.target, op),
                (IndexTargetKind::Simple | IndexTargetKind::Full, IndexedOp::Eq)
                    | (IndexTargetKind::Values, IndexedOp::Contains)
                    | (IndexTargetKind::Keys, IndexedOp::ContainsKey)
                    | (IndexTargetKind::Entries, IndexedOp::MapEntry)
            )
    })
}

/// The restrictions an index may serve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IndexedOp {
    Eq,
    Contains,
    ContainsKey,
    MapEntry,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_names_follow_cassandra() {
        let taken = vec!["t_v_idx".to_string(), "t_v_idx_1".to_string()];
        assert_eq!(default_name(&[], "t", "v"), "t_v_idx");
        assert_eq!(default_name(&taken, "t", "v"), "t_v_idx_2");
        assert_eq!(default_name(&[], "t", "Odd Name"), "t_OddName_idx");
    }
}
