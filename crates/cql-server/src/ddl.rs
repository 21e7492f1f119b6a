//! Schema statements: CREATE/ALTER/DROP KEYSPACE, TABLE and TYPE, with
//! Cassandra's validation and messages. Each returns the schema change to
//! announce (RESULT SchemaChange and an EVENT to registered connections).

use std::collections::BTreeMap;

use cql::ast::{self, AlterTableAction, AlterTypeAction, OptionValue, TypeExpr};
use cql_protocol::{SchemaChange, SchemaChangeTarget, SchemaChangeType};
use types::schema::{ClusteringOrder, ColumnDef, ColumnKind, KeyspaceDef, Replication, TableDef, TableOptions, UdtDef};
use types::CqlType;
use uuid::Uuid;

use crate::common;
use crate::error::QueryError;
use crate::schema::{Schema, SchemaService};

type Keyspaces = BTreeMap<String, KeyspaceDef>;

/// The outcome of a DDL statement: the change to announce, or nothing when
/// IF [NOT] EXISTS made it a no-op.
pub type Outcome = Option<SchemaChange>;

fn change(kind: SchemaChangeType, target: SchemaChangeTarget) -> Outcome {
    Some(SchemaChange { change: kind, target })
}

fn valid_name(name: &str, max: usize) -> bool {
    !name.is_empty() && name.len() <= max && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn option_text(v: &OptionValue) -> String {
    match v {
        OptionValue::Constant(l) => l.raw_text(),
        OptionValue::Identifier(s) => s.clone(),
        OptionValue::Map(_) => String::new(),
    }
}

fn option_map(name: &str, v: &OptionValue) -> Result<BTreeMap<String, String>, QueryError> {
    match v {
        OptionValue::Map(pairs) => Ok(pairs.iter().cloned().collect()),
        _ => Err(QueryError::Syntax(format!("Invalid value for property '{name}'. It should be a map."))),
    }
}

fn parse_replication(ks: &str, map: &BTreeMap<String, String>) -> Result<Replication, QueryError> {
    let class = map
        .get("class")
        .ok_or_else(|| QueryError::Config("Missing mandatory option 'class' for replication".into()))?;
    let short = class.rsplit('.').next().unwrap_or(class);
    let rf = |k: &str, v: &str| -> Result<u32, QueryError> {
        v.trim().parse::<i64>().ok().filter(|n| *n >= 0).map(|n| n as u32).ok_or_else(|| {
            QueryError::Config(format!("Replication factor must be non-negative integer; found {v} for {k}"))
        })
    };
    match short {
        "SimpleStrategy" => {
            let mut factor = None;
            for (k, v) in map {
                match k.as_str() {
                    "class" => {}
                    "replication_factor" => factor = Some(rf(k, v)?),
                    other => {
                        return Err(QueryError::Config(format!(
                            "Unrecognized strategy option {{{other}}} passed to SimpleStrategy for keyspace {ks}"
                        )))
                    }
                }
            }
            let replication_factor = factor.ok_or_else(|| {
                QueryError::Config("SimpleStrategy requires a replication_factor strategy option.".into())
            })?;
            Ok(Replication::Simple { replication_factor })
        }
        "NetworkTopologyStrategy" => {
            let mut data_centers = BTreeMap::new();
            for (k, v) in map {
                if k == "class" {
                    continue;
                }
                data_centers.insert(k.clone(), rf(k, v)?);
            }
            Ok(Replication::NetworkTopology { data_centers })
        }
        _ => Err(QueryError::Config(format!("Unable to find replication strategy class '{class}'"))),
    }
}

fn keyspace_options(
    name: &str,
    options: &[(String, OptionValue)],
    current: Option<&KeyspaceDef>,
) -> Result<(Replication, bool), QueryError> {
    let mut replication = current.map(|k| k.replication.clone());
    let mut durable = current.map(|k| k.durable_writes).unwrap_or(true);
    for (k, v) in options {
        match k.as_str() {
            "replication" => replication = Some(parse_replication(name, &option_map(k, v)?)?),
            "durable_writes" => {
                durable = match option_text(v).to_ascii_lowercase().as_str() {
                    "true" => true,
                    "false" => false,
                    other => {
                        return Err(QueryError::Syntax(format!("Invalid boolean value {other} for 'durable_writes'")))
                    }
                }
            }
            other => return Err(QueryError::Syntax(format!("Unknown property '{other}'"))),
        }
    }
    let replication = replication.ok_or_else(|| QueryError::Config("Missing mandatory option 'replication'".into()))?;
    Ok((replication, durable))
}

fn qualified(table: &ast::QualifiedName, session: Option<&str>) -> Result<(String, String), QueryError> {
    let ks = common::keyspace_name(table, session)?.to_string();
    Ok((ks, table.name.clone()))
}

fn user_keyspace<'k>(kss: &'k mut Keyspaces, name: &str) -> Result<&'k mut KeyspaceDef, QueryError> {
    if Schema::is_system(name) {
        return Err(QueryError::Unauthorized(format!("{name} keyspace is not user-modifiable.")));
    }
    kss.get_mut(name).ok_or_else(|| QueryError::Invalid(format!("Keyspace '{name}' doesn't exist")))
}

fn resolve_type(ks: &KeyspaceDef, ty: &TypeExpr) -> Result<CqlType, QueryError> {
    let mut lookup = |keyspace: Option<&str>, name: &str| -> Result<CqlType, String> {
        if keyspace.is_some_and(|k| k != ks.name) {
            return Err(format!("Statement on keyspace {} cannot refer to a user type in keyspace {}; user types can only be used in the keyspace they are defined in", ks.name, keyspace.unwrap_or_default()));
        }
        match ks.types.get(name) {
            Some(u) => Ok(CqlType::Udt {
                keyspace: ks.name.clone(),
                name: u.name.clone(),
                fields: frozen_fields(&u.fields),
                frozen: false,
            }),
            None => Err(format!("Unknown type {}.{}", ks.name, name)),
        }
    };
    ty.resolve(&mut lookup).map_err(|e| QueryError::Invalid(e.0))
}

/// A user type's field type, kept as declared (`system_schema.types` and
/// DESCRIBE show `list<int>` as Cassandra does); a user type in it must be
/// declared frozen. A column of the type sees its fields frozen
/// (`frozen_fields`): a field's value is one cell of the field.
fn field_type(ks: &KeyspaceDef, ty: &TypeExpr) -> Result<CqlType, QueryError> {
    let resolved = resolve_type(ks, ty)?;
    if let CqlType::Udt { frozen: false, .. } = resolved {
        return Err(QueryError::invalid("A user type cannot contain non-frozen UDTs"));
    }
    Ok(resolved)
}

/// A user type's fields as a column's type holds them: each one frozen.
fn frozen_fields(fields: &[(String, CqlType)]) -> Vec<(String, CqlType)> {
    fields.iter().map(|(n, t)| (n.clone(), t.clone().frozen())).collect()
}

/// A column's type: as `resolve_type`, and a non-frozen user type whose
/// declared fields include a non-frozen collection is refused (Cassandra:
/// its cells would need cells of their own). `added`: the column's name when
/// ALTER TABLE ADD names it, as Cassandra's message there does.
fn column_type(ks: &KeyspaceDef, ty: &TypeExpr, added: Option<&str>) -> Result<CqlType, QueryError> {
    let resolved = resolve_type(ks, ty)?;
    if let CqlType::Udt { name, frozen: false, .. } = &resolved {
        if ks.types.get(name).is_some_and(|u| u.fields.iter().any(|(_, t)| t.is_multi_cell())) {
            let refused = "Non-frozen UDTs with nested non-frozen collections are not supported";
            return Err(QueryError::Invalid(match added {
                Some(column) => format!("{refused} for column {column}"),
                None => refused.to_string(),
            }));
        }
    }
    Ok(resolved)
}

fn compaction_class(name: &str) -> Result<String, QueryError> {
    let short = name.rsplit('.').next().unwrap_or(name);
    match short {
        "SizeTieredCompactionStrategy"
        | "LeveledCompactionStrategy"
        | "TimeWindowCompactionStrategy"
        | "UnifiedCompactionStrategy" => Ok(format!("org.apache.cassandra.db.compaction.{short}")),
        _ => Err(QueryError::Config(format!("Unable to find compaction strategy class '{name}'"))),
    }
}

fn int_option(name: &str, v: &OptionValue, min: i64, max: i64) -> Result<i32, QueryError> {
    let text = option_text(v);
    let n: i64 = text.parse().map_err(|_| QueryError::Syntax(format!("Invalid integer value {text} for '{name}'")))?;
    if n < min || n > max {
        return Err(QueryError::Config(format!("{name} must be between {min} and {max}, got {n}")));
    }
    Ok(n as i32)
}

fn apply_table_options(o: &mut TableOptions, options: &[(String, OptionValue)]) -> Result<(), QueryError> {
    let mut seen = Vec::new();
    for (k, v) in options {
        if seen.contains(k) {
            return Err(QueryError::Syntax(format!("Multiple definition for property '{k}'")));
        }
        seen.push(k.clone());
        match k.as_str() {
            "gc_grace_seconds" => o.gc_grace_seconds = int_option(k, v, 0, i32::MAX as i64)?,
            "default_time_to_live" => o.default_time_to_live = int_option(k, v, 0, crate::modify::MAX_TTL as i64)?,
            "compaction" => {
                let mut m = option_map(k, v)?;
                let class = m.get("class").cloned().ok_or_else(|| {
                    QueryError::Config("Missing sub-option 'class' for the 'compaction' option.".into())
                })?;
                m.insert("class".into(), compaction_class(&class)?);
                o.compaction = m;
            }
            "compression" => o.compression = option_map(k, v)?,
            "caching" => o.caching = option_map(k, v)?,
            "comment" => o.comment = option_text(v),
            "bloom_filter_fp_chance"
            | "crc_check_chance"
            | "speculative_retry"
            | "additional_write_policy"
            | "read_repair"
            | "memtable_flush_period_in_ms"
            | "min_index_interval"
            | "max_index_interval"
            | "cdc"
            | "memtable" => {
                o.extra.insert(k.clone(), option_text(v));
            }
            "extensions" => {
                option_map(k, v)?;
            }
            other => return Err(QueryError::Syntax(format!("Unknown property '{other}'"))),
        }
    }
    Ok(())
}

/// Cassandra's refusal of a TTL on a counter table.
const COUNTER_TTL: &str = "Cannot set default_time_to_live on a table with counters";

fn is_key_compatible(ty: &CqlType) -> Result<(), String> {
    if let CqlType::Udt { keyspace, name, frozen: false, .. } = ty {
        return Err(format!("Invalid non-frozen user-defined type \"{keyspace}.{name}\""));
    }
    if ty.is_multi_cell() {
        return Err("Invalid non-frozen collection type".into());
    }
    if *ty == CqlType::Duration {
        return Err("duration type is not supported".into());
    }
    if *ty == CqlType::Counter {
        return Err("counter type is not supported".into());
    }
    Ok(())
}

fn create_table(kss: &mut Keyspaces, session: Option<&str>, ct: &ast::CreateTable) -> Result<Outcome, QueryError> {
    let (ks_name, name) = qualified(&ct.table, session)?;
    let ks = user_keyspace(kss, &ks_name)?;
    if !valid_name(&name, 222) {
        return Err(QueryError::Invalid(format!(
            "Table name must not be empty, more than 222 characters long, or contain non-alphanumeric-underscore characters (got \"{name}\")"
        )));
    }
    if ks.tables.contains_key(&name) {
        if ct.if_not_exists {
            return Ok(None);
        }
        return Err(QueryError::AlreadyExists {
            keyspace: ks_name.clone(),
            table: name.clone(),
            message: format!("Cannot add already existing table \"{name}\" to keyspace \"{ks_name}\""),
        });
    }
    if ct.compact_storage {
        return Err(QueryError::invalid("COMPACT STORAGE tables are not supported (Cassandra 4 deprecated them)"));
    }
    let pk = match ct.primary_keys.as_slice() {
        [] => {
            return Err(QueryError::Invalid(format!(
                "No PRIMARY KEY specifed for table '{name}' (exactly one required)"
            )))
        }
        [one] => one,
        _ => {
            return Err(QueryError::Invalid(format!(
                "Multiple PRIMARY KEY specified for table '{name}' (exactly one required)"
            )))
        }
    };
    let mut columns: Vec<ColumnDef> = Vec::new();
    let mut next_id: u16 = 16;
    for c in &ct.columns {
        if columns.iter().any(|x| x.name == c.name) {
            return Err(QueryError::Invalid(format!(
                "Duplicate column '{}' declaration for table {ks_name}.{name}",
                c.name
            )));
        }
        let ty = column_type(ks, &c.ty, None)?;
        columns.push(ColumnDef {
            name: c.name.clone(),
            ty,
            kind: if c.is_static { ColumnKind::Static } else { ColumnKind::Regular },
            position: 0,
            order: ClusteringOrder::Asc,
            id: next_id,
        });
        next_id += 1;
    }
    for (names, kind) in [(&pk.partition_key, ColumnKind::PartitionKey), (&pk.clustering, ColumnKind::Clustering)] {
        for (pos, key) in names.iter().enumerate() {
            let col = columns
                .iter_mut()
                .find(|c| &c.name == key)
                .ok_or_else(|| QueryError::Invalid(format!("Unknown definition {key} referenced in PRIMARY KEY")))?;
            if col.kind == ColumnKind::Static {
                return Err(QueryError::Invalid(format!("Static column {key} cannot be part of the PRIMARY KEY")));
            }
            if col.kind != ColumnKind::Regular {
                return Err(QueryError::Invalid(format!("Duplicate definition for column {key} in PRIMARY KEY")));
            }
            is_key_compatible(&col.ty)
                .map_err(|e| QueryError::Invalid(format!("{e} for PRIMARY KEY column '{key}'")))?;
            col.kind = kind;
            col.position = pos as u32;
        }
    }
    if pk.clustering.is_empty() && columns.iter().any(|c| c.kind == ColumnKind::Static) {
        return Err(QueryError::invalid(
            "Static columns are only useful (and thus allowed) if the table has at least one clustering column",
        ));
    }
    let regular = || columns.iter().filter(|c| matches!(c.kind, ColumnKind::Regular | ColumnKind::Static));
    let has_counters = regular().any(|c| c.ty == CqlType::Counter);
    if has_counters && regular().any(|c| c.ty != CqlType::Counter) {
        return Err(QueryError::invalid("Cannot mix counter and non counter columns in the same table"));
    }
    for (i, (col, order)) in ct.clustering_order.iter().enumerate() {
        let Some(c) = columns.iter_mut().find(|c| &c.name == col) else {
            return Err(QueryError::Invalid(format!(
                "Only clustering key columns can be defined in CLUSTERING ORDER directive: {col}"
            )));
        };
        if c.kind != ColumnKind::Clustering {
            return Err(QueryError::Invalid(format!("Only clustering key columns can be defined in CLUSTERING ORDER directive: {col} is not a clustering column")));
        }
        if c.position as usize != i {
            return Err(QueryError::invalid(
                "The order of columns in the CLUSTERING ORDER directive must match that of the clustering columns",
            ));
        }
        c.order = if *order == ast::Order::Desc { ClusteringOrder::Desc } else { ClusteringOrder::Asc };
    }
    let mut options = TableOptions::default();
    apply_table_options(&mut options, &ct.options)?;
    if has_counters && options.default_time_to_live > 0 {
        return Err(QueryError::invalid(COUNTER_TTL));
    }
    let mut def = TableDef {
        keyspace: ks_name.clone(),
        name: name.clone(),
        id: Uuid::new_v4(),
        columns,
        options,
        next_column_id: next_id,
        dropped_columns: BTreeMap::new(),
        indexes: Vec::new(),
    };
    def.sort_columns();
    ks.tables.insert(name.clone(), def);
    Ok(change(SchemaChangeType::Created, SchemaChangeTarget::Table(ks_name, name)))
}

fn alter_table(
    kss: &mut Keyspaces,
    session: Option<&str>,
    at: &ast::AlterTable,
    now_micros: i64,
) -> Result<Outcome, QueryError> {
    let (ks_name, name) = qualified(&at.table, session)?;
    let ks = user_keyspace(kss, &ks_name)?;
    let ks_snapshot = ks.clone();
    let Some(table) = ks.tables.get_mut(&name) else {
        if at.if_exists {
            return Ok(None);
        }
        return Err(QueryError::Invalid(format!("Table '{ks_name}.{name}' doesn't exist")));
    };
    match &at.action {
        AlterTableAction::Add { if_not_exists, columns } => {
            for c in columns {
                if table.column(&c.name).is_some() {
                    if *if_not_exists {
                        continue;
                    }
                    return Err(QueryError::Invalid(format!("Column with name '{}' already exists", c.name)));
                }
                let ty = column_type(&ks_snapshot, &c.ty, Some(&c.name))?;
                if table.is_counter() != (ty == CqlType::Counter) {
                    let (what, table_kind) =
                        if table.is_counter() { ("non counter", "counter") } else { ("counter", "non counter") };
                    return Err(QueryError::Config(format!(
                        "{ks_name}.{name}: Cannot have a {what} column (\"{}\") in a {table_kind} table",
                        c.name
                    )));
                }
                if c.is_static && table.clustering_len() == 0 {
                    return Err(QueryError::Invalid(format!(
                        "Static columns are not allowed in COMPACT STORAGE tables or tables without clustering columns ({})",
                        c.name
                    )));
                }
                let id = table.next_column_id;
                table.next_column_id += 1;
                table.columns.push(ColumnDef {
                    name: c.name.clone(),
                    ty,
                    kind: if c.is_static { ColumnKind::Static } else { ColumnKind::Regular },
                    position: 0,
                    order: ClusteringOrder::Asc,
                    id,
                });
                table.dropped_columns.remove(&c.name);
            }
            table.sort_columns();
        }
        AlterTableAction::Drop { if_exists, columns, timestamp } => {
            for c in columns {
                let Some(def) = table.column(c) else {
                    if *if_exists {
                        continue;
                    }
                    return Err(QueryError::Invalid(format!("Column {c} was not found in table {name}")));
                };
                if matches!(def.kind, ColumnKind::PartitionKey | ColumnKind::Clustering) {
                    return Err(QueryError::Invalid(format!("Cannot drop PRIMARY KEY part {c}")));
                }
                crate::index::check_drop_column(table, c)?;
                table.columns.retain(|x| &x.name != c);
                table.dropped_columns.insert(c.clone(), timestamp.unwrap_or(now_micros));
            }
        }
        AlterTableAction::Rename { if_exists, renames } => {
            for (from, to) in renames {
                let Some(pos) = table.columns.iter().position(|c| &c.name == from) else {
                    if *if_exists {
                        continue;
                    }
                    return Err(QueryError::Invalid(format!("Column {from} was not found in table {ks_name}.{name}")));
                };
                if !matches!(table.columns[pos].kind, ColumnKind::PartitionKey | ColumnKind::Clustering) {
                    return Err(QueryError::Invalid(format!("Cannot rename non PRIMARY KEY column {from}")));
                }
                crate::index::check_rename_column(table, from)?;
                if table.column(to).is_some() {
                    return Err(QueryError::Invalid(format!(
                        "Cannot rename column {from} to {to} in table '{name}'; another column with that name already exists"
                    )));
                }
                table.columns[pos].name = to.clone();
            }
            table.sort_columns();
        }
        AlterTableAction::Options(options) => {
            let mut o = table.options.clone();
            apply_table_options(&mut o, options)?;
            if table.is_counter() && o.default_time_to_live > 0 {
                return Err(QueryError::invalid(COUNTER_TTL));
            }
            table.options = o;
        }
        AlterTableAction::AlterColumnType { .. } => {
            return Err(QueryError::invalid("Altering column types is no longer supported"));
        }
        AlterTableAction::DropCompactStorage => {
            return Err(QueryError::invalid(
                "Cannot DROP COMPACT STORAGE on a table that does not use COMPACT STORAGE",
            ));
        }
    }
    Ok(change(SchemaChangeType::Updated, SchemaChangeTarget::Table(ks_name, name)))
}

/// Executes a DDL statement against the schema service.
pub fn execute(
    service: &SchemaService,
    session: Option<&str>,
    stmt: &ast::Statement,
    now_micros: i64,
) -> Result<Outcome, QueryError> {
    use ast::Statement as S;
    service.update(|kss| match stmt {
        S::CreateKeyspace(ck) => {
            let name = &ck.keyspace;
            if !valid_name(name, 48) {
                return Err(QueryError::Invalid(format!(
                    "Keyspace name must not be empty, more than 48 characters long, or contain non-alphanumeric-underscore characters (got \"{name}\")"
                )));
            }
            if Schema::is_system(name) || kss.contains_key(name) {
                if ck.if_not_exists {
                    return Ok(None);
                }
                return Err(QueryError::AlreadyExists {
                    keyspace: name.clone(),
                    table: String::new(),
                    message: format!("Cannot add existing keyspace \"{name}\""),
                });
            }
            let (replication, durable_writes) = keyspace_options(name, &ck.options, None)?;
            kss.insert(
                name.clone(),
                KeyspaceDef { name: name.clone(), replication, durable_writes, tables: BTreeMap::new(), types: BTreeMap::new() },
            );
            Ok(change(SchemaChangeType::Created, SchemaChangeTarget::Keyspace(name.clone())))
        }
        S::AlterKeyspace(ak) => {
            let name = &ak.keyspace;
            // The replicated system keyspaces' replication is the user's to choose (Cassandra's too).
            let found = match kss.get_mut(name.as_str()) {
                Some(ks) if Schema::is_replicated_system(name) => Ok(ks),
                _ => user_keyspace(kss, name),
            };
            let ks = match found {
                Ok(k) => k,
                Err(_) if ak.if_exists && !Schema::is_system(name) => return Ok(None),
                Err(e) => return Err(e),
            };
            let (replication, durable) = keyspace_options(name, &ak.options, Some(ks))?;
            ks.replication = replication;
            ks.durable_writes = durable;
            Ok(change(SchemaChangeType::Updated, SchemaChangeTarget::Keyspace(name.clone())))
        }
        S::DropKeyspace { keyspace, if_exists } => {
            if Schema::is_system(keyspace) {
                return Err(QueryError::Unauthorized(format!("{keyspace} keyspace is not user-modifiable.")));
            }
            if kss.remove(keyspace).is_none() {
                if *if_exists {
                    return Ok(None);
                }
                return Err(QueryError::Config(format!("Cannot drop non existing keyspace '{keyspace}'.")));
            }
            Ok(change(SchemaChangeType::Dropped, SchemaChangeTarget::Keyspace(keyspace.clone())))
        }
        S::CreateTable(ct) => create_table(kss, session, ct),
        S::CreateIndex(ci) => crate::index::create_index(kss, session, ci),
        S::DropIndex { name, if_exists } => crate::index::drop_index(kss, session, name, *if_exists),
        S::AlterTable(at) => alter_table(kss, session, at, now_micros),
        S::DropTable { table, if_exists } => {
            let (ks_name, name) = qualified(table, session)?;
            let ks = match user_keyspace(kss, &ks_name) {
                Ok(k) => k,
                Err(_) if *if_exists && !Schema::is_system(&ks_name) => return Ok(None),
                Err(e) => return Err(e),
            };
            if ks.tables.remove(&name).is_none() {
                if *if_exists {
                    return Ok(None);
                }
                return Err(QueryError::Invalid(format!("Table '{ks_name}.{name}' doesn't exist")));
            }
            Ok(change(SchemaChangeType::Dropped, SchemaChangeTarget::Table(ks_name, name)))
        }
        S::CreateType(ct) => {
            let (ks_name, name) = qualified(&ct.name, session)?;
            let ks = user_keyspace(kss, &ks_name)?;
            if ks.types.contains_key(&name) {
                if ct.if_not_exists {
                    return Ok(None);
                }
                return Err(QueryError::AlreadyExists {
                    keyspace: ks_name.clone(),
                    table: name.clone(),
                    message: format!("A user type with name '{name}' already exists"),
                });
            }
            let snapshot = ks.clone();
            let mut fields = Vec::new();
            for (f, ty) in &ct.fields {
                if fields.iter().any(|(n, _): &(String, CqlType)| n == f) {
                    return Err(QueryError::Invalid(format!("Duplicate field name {f} in type {name}")));
                }
                fields.push((f.clone(), field_type(&snapshot, ty)?));
            }
            ks.types.insert(name.clone(), UdtDef { keyspace: ks_name.clone(), name: name.clone(), fields });
            Ok(change(SchemaChangeType::Created, SchemaChangeTarget::Type(ks_name, name)))
        }
        S::AlterType(at) => {
            let (ks_name, name) = qualified(&at.name, session)?;
            let ks = user_keyspace(kss, &ks_name)?;
            let snapshot = ks.clone();
            let Some(udt) = ks.types.get_mut(&name) else {
                if at.if_exists {
                    return Ok(None);
                }
                return Err(QueryError::Invalid(format!("No user type named {ks_name}.{name} exists.")));
            };
            match &at.action {
                AlterTypeAction::Add { if_not_exists, field, ty } => {
                    if udt.fields.iter().any(|(n, _)| n == field) {
                        if *if_not_exists {
                            return Ok(None);
                        }
                        return Err(QueryError::Invalid(format!("Cannot add new field {field} to type {ks_name}.{name}: a field with name {field} already exists")));
                    }
                    udt.fields.push((field.clone(), field_type(&snapshot, ty)?));
                }
                AlterTypeAction::Rename { renames, .. } => {
                    for (from, to) in renames {
                        let Some(f) = udt.fields.iter_mut().find(|(n, _)| n == from) else {
                            return Err(QueryError::Invalid(format!("Unkown field {from} in user type {ks_name}.{name}")));
                        };
                        f.0 = to.clone();
                    }
                }
                AlterTypeAction::AlterFieldType { .. } => return Err(QueryError::invalid("Altering field types is no longer supported")),
            }
            let updated = udt.clone();
            // Tables using the type see its new fields.
            for t in ks.tables.values_mut() {
                for c in t.columns.iter_mut() {
                    refresh_udt(&mut c.ty, &updated);
                }
            }
            Ok(change(SchemaChangeType::Updated, SchemaChangeTarget::Type(ks_name, name)))
        }
        S::DropType { name, if_exists } => {
            let (ks_name, tname) = qualified(name, session)?;
            let ks = user_keyspace(kss, &ks_name)?;
            if !ks.types.contains_key(&tname) {
                if *if_exists {
                    return Ok(None);
                }
                return Err(QueryError::Invalid(format!("No user type named {ks_name}.{tname} exists.")));
            }
            for t in ks.tables.values() {
                if t.columns.iter().any(|c| uses_udt(&c.ty, &tname)) {
                    return Err(QueryError::Invalid(format!("Cannot drop user type {ks_name}.{tname} as it is still used by table {ks_name}.{}", t.name)));
                }
            }
            ks.types.remove(&tname);
            Ok(change(SchemaChangeType::Dropped, SchemaChangeTarget::Type(ks_name, tname)))
        }
        _ => Err(QueryError::Server("not a schema statement".into())),
    })
}

fn uses_udt(ty: &CqlType, name: &str) -> bool {
    match ty {
        CqlType::Udt { name: n, fields, .. } => n == name || fields.iter().any(|(_, t)| uses_udt(t, name)),
        CqlType::List { elem, .. } | CqlType::Set { elem, .. } => uses_udt(elem, name),
        CqlType::Map { key, value, .. } => uses_udt(key, name) || uses_udt(value, name),
        CqlType::Tuple(items) => items.iter().any(|t| uses_udt(t, name)),
        _ => false,
    }
}

fn refresh_udt(ty: &mut CqlType, udt: &UdtDef) {
    match ty {
        CqlType::Udt { name, fields, .. } => {
            if *name == udt.name {
                *fields = frozen_fields(&udt.fields);
            } else {
                for (_, t) in fields.iter_mut() {
                    refresh_udt(t, udt);
                }
            }
        }
        CqlType::List { elem, .. } | CqlType::Set { elem, .. } => refresh_udt(elem, udt),
        CqlType::Map { key, value, .. } => {
            refresh_udt(key, udt);
            refresh_udt(value, udt);
        }
        CqlType::Tuple(items) => items.iter_mut().for_each(|t| refresh_udt(t, udt)),
        _ => {}
    }
}
