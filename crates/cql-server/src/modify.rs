//! INSERT, UPDATE, DELETE and BATCH: turning statements into mutations.
//!
//! Invariants:
//! - Writes never read first, except where Cassandra reads too: list element
//!   replacement/removal by index or by value (`l[i] = x`, `l = l - [..]`).
//! - Every mutation carries one timestamp: USING TIMESTAMP, else the client's
//!   default timestamp, else the node's monotonic clock.
//! - A counter update's cells carry deltas (`types::mutation::COUNTER_TTL`),
//!   never values: the data plane sends them to the counter leader
//!   (`WriteType::Counter`), which turns them into shards.
//! - Primary key values are never null or unset; a missing key part is an
//!   error naming the column, in Cassandra's words.
//! - A whole value written to a non-frozen collection or user type first
//!   deletes the column's cells (a complex deletion at timestamp - 1), then
//!   writes one cell per element or non-null field; a user type's field cell
//!   is addressed by the field's position (`common::field_path`), so
//!   `c.f = v` and `DELETE c.f` write that one cell.

use std::sync::Arc;

use bytes::Bytes;
use cql::ast::{self, AssignmentOp, DeleteTarget, InsertValues, Operator, RelationLhs, Term};
use cql_protocol::BoundValue;
use storage::{ColumnData, PartitionRead};
use types::mutation::{CellWrite, ClusteringBound, DeletionTime, Liveness, Mutation, RangeTombstone, RowWrite};
use types::schema::{ColumnDef, ColumnKind, KeyspaceDef, TableDef};
use types::{CqlType, Value};

use crate::bind::{eval, eval_value, BindCtx, Bound, Receiver};
use crate::common::{self, ValueBound};
use crate::error::QueryError;
use crate::processor::Processor;
use crate::schema::Schema;

/// Cassandra's maximum TTL (20 years).
pub const MAX_TTL: i32 = 630_720_000;

/// Per-execution write settings.
pub struct WriteOpts {
    /// The client's default timestamp (protocol) or a BATCH's USING TIMESTAMP.
    pub default_timestamp: Option<i64>,
    /// Written by the node itself (auth's tables): the replicated system
    /// keyspaces accept it.
    pub system: bool,
    /// The request's "now" in seconds (protocol v5's now_in_seconds): the base
    /// of TTL expiry and the local deletion time of tombstones, in place of
    /// the node's clock.
    pub now_in_seconds: Option<i32>,
}

/// The mutations of one statement and the keyspace they belong to.
pub struct Planned {
    pub keyspace: Arc<KeyspaceDef>,
    pub mutations: Vec<Mutation>,
}

fn using_values(
    using: &ast::Using,
    table: &TableDef,
    ctx: &BindCtx<'_>,
    proc: &Processor,
    opts: &WriteOpts,
) -> Result<(i64, i32), QueryError> {
    let timestamp = match &using.timestamp {
        Some(t) => match eval_value(t, &Receiver { name: "[timestamp]", ty: &CqlType::BigInt }, ctx)? {
            Some(Value::BigInt(ts)) => {
                if ts == i64::MIN {
                    return Err(QueryError::invalid("Invalid timestamp: the minimum long value is reserved"));
                }
                ts
            }
            _ => return Err(QueryError::invalid("Invalid null value of timestamp")),
        },
        None => opts.default_timestamp.unwrap_or_else(|| proc.clock.now_micros()),
    };
    let ttl = match &using.ttl {
        Some(t) => match eval(t, &Receiver { name: "[ttl]", ty: &CqlType::Int }, ctx)? {
            Bound::Value(b) => {
                let ttl =
                    i32::from_be_bytes(b.as_ref().try_into().map_err(|_| QueryError::invalid("Invalid TTL value"))?);
                if ttl < 0 {
                    return Err(QueryError::Invalid(format!("A TTL must be greater or equal to 0, but was {ttl}")));
                }
                if ttl > MAX_TTL {
                    return Err(QueryError::Invalid(format!(
                        "ttl is too large. requested ({ttl}) maximum ({MAX_TTL})"
                    )));
                }
                ttl
            }
            Bound::Unset => table.options.default_time_to_live,
            Bound::Null => return Err(QueryError::invalid("Invalid null value of TTL")),
        },
        None => table.options.default_time_to_live,
    };
    Ok((timestamp, ttl))
}

/// Candidate values for each column restricted by = / IN in a WHERE clause of
/// a modification, by column index.
struct KeyRestrictions {
    values: Vec<Option<Vec<Bytes>>>,
    /// A clustering slice (for range deletions): column position, lower, upper.
    slice: Option<(usize, ValueBound, ValueBound)>,
}

fn key_restrictions(
    table: &TableDef,
    where_clause: &[ast::Relation],
    ctx: &BindCtx<'_>,
    allow_slice: bool,
) -> Result<KeyRestrictions, QueryError> {
    let mut values: Vec<Option<Vec<Bytes>>> = vec![None; table.columns.len()];
    let mut slice: Option<(usize, ValueBound, ValueBound)> = None;
    for rel in where_clause {
        let name = match &rel.lhs {
            RelationLhs::Column(n) => n,
            RelationLhs::Token(_) => {
                return Err(QueryError::invalid(
                    "The token function cannot be used in WHERE clauses for UPDATE and DELETE statements",
                ))
            }
            RelationLhs::MultiColumn(_) => {
                return Err(QueryError::invalid(
                    "Multi-column relations are not supported in UPDATE and DELETE statements yet",
                ))
            }
            RelationLhs::MapElement { column, .. } => {
                return Err(QueryError::Invalid(format!("Non PRIMARY KEY columns found in where clause: {column}")))
            }
        };
        let (i, c) = common::column(table, name)?;
        if !matches!(c.kind, ColumnKind::PartitionKey | ColumnKind::Clustering) {
            return Err(QueryError::Invalid(format!("Non PRIMARY KEY columns found in where clause: {name}")));
        }
        let r = Receiver { name, ty: &c.ty };
        let value = |t: &Term| -> Result<Bytes, QueryError> {
            match eval(t, &r, ctx)? {
                Bound::Value(b) => Ok(b),
                Bound::Null => Err(QueryError::Invalid(format!("Invalid null value in condition for column {name}"))),
                Bound::Unset => Err(QueryError::Invalid(format!("Invalid unset value for column {name}"))),
            }
        };
        match rel.op {
            Operator::Eq => values[i] = Some(vec![value(&rel.rhs)?]),
            Operator::In => {
                let list = match &rel.rhs {
                    Term::List(items) => items.iter().map(&value).collect::<Result<Vec<_>, _>>()?,
                    Term::Bind(_) => {
                        let lt = CqlType::List { elem: Box::new(c.ty.clone()), frozen: true };
                        match eval_value(&rel.rhs, &Receiver { name, ty: &lt }, ctx)? {
                            Some(Value::List(items)) => items.into_iter().map(|v| Bytes::from(v.to_bytes())).collect(),
                            _ => {
                                return Err(QueryError::Invalid(format!(
                                    "Invalid null value for IN restriction on {name}"
                                )))
                            }
                        }
                    }
                    _ => return Err(QueryError::Invalid(format!("Invalid IN restriction on {name}"))),
                };
                values[i] = Some(list);
            }
            Operator::Gt | Operator::Gte | Operator::Lt | Operator::Lte
                if c.kind == ColumnKind::Clustering && allow_slice =>
            {
                let v = value(&rel.rhs)?;
                let pos = c.position as usize;
                let s = slice.get_or_insert((pos, None, None));
                if s.0 != pos {
                    return Err(QueryError::invalid(
                        "Only one clustering column can be restricted by a slice in a DELETE",
                    ));
                }
                match rel.op {
                    Operator::Gt => s.1 = Some((v, false)),
                    Operator::Gte => s.1 = Some((v, true)),
                    Operator::Lt => s.2 = Some((v, false)),
                    _ => s.2 = Some((v, true)),
                }
            }
            Operator::Gt | Operator::Gte | Operator::Lt | Operator::Lte if c.kind == ColumnKind::Clustering => {
                return Err(QueryError::invalid(
                    "Slice restrictions are not supported on the clustering columns in UPDATE statements",
                ))
            }
            _ => {
                return Err(QueryError::Invalid(format!(
                    "Invalid operator for PRIMARY KEY column {name} in a modification statement"
                )))
            }
        }
    }
    Ok(KeyRestrictions { values, slice })
}

/// Partition keys (serialized) for the restricted partition key columns.
fn partition_keys(table: &TableDef, r: &KeyRestrictions) -> Result<Vec<Bytes>, QueryError> {
    let mut lists = Vec::new();
    let mut missing = Vec::new();
    for (i, c) in table.columns.iter().enumerate() {
        if c.kind == ColumnKind::PartitionKey {
            match &r.values[i] {
                Some(v) => lists.push(v),
                None => missing.push(c.name.clone()),
            }
        }
    }
    if !missing.is_empty() {
        return Err(QueryError::Invalid(format!("Some partition key parts are missing: {}", missing.join(", "))));
    }
    common::cartesian(&lists).iter().map(|k| common::compose_partition_key(k)).collect()
}

/// Clustering value lists in clustering order; the leading restricted prefix.
fn clustering_lists<'r>(table: &TableDef, r: &'r KeyRestrictions) -> (Vec<&'r Vec<Bytes>>, Vec<String>) {
    let mut lists = Vec::new();
    let mut missing = Vec::new();
    for (i, c) in table.columns.iter().enumerate() {
        if c.kind == ColumnKind::Clustering {
            match &r.values[i] {
                Some(v) if missing.is_empty() => lists.push(v),
                _ => missing.push(c.name.clone()),
            }
        }
    }
    (lists, missing)
}

fn new_mutation(table: &TableDef, key: Bytes) -> Mutation {
    Mutation::new(table.id, ring::token_of(&key), key)
}

/// A list element id: ordered by time, then by position within the statement.
/// Prepended elements get ids below every appended one.
fn list_path(timestamp: i64, index: usize, prepend: bool) -> Bytes {
    let base: u64 = 1 << 63;
    let t = timestamp.max(0) as u64;
    let order = if prepend { base - t.min(base - 1) } else { base + t.min(base - 1) };
    let mut path = Vec::with_capacity(16);
    path.extend_from_slice(&order.to_be_bytes());
    path.extend_from_slice(&(index as u64).to_be_bytes());
    Bytes::from(path)
}

struct CellCtx<'c> {
    timestamp: i64,
    ttl: i32,
    clock: &'c crate::clock::Clock,
    /// The node's time in seconds, read on first use: most writes (no TTL,
    /// no nulls, no deletions) never need it.
    now: std::cell::Cell<Option<i32>>,
}

impl<'c> CellCtx<'c> {
    fn new(timestamp: i64, ttl: i32, clock: &'c crate::clock::Clock) -> CellCtx<'c> {
        CellCtx { timestamp, ttl, clock, now: std::cell::Cell::new(None) }
    }

    /// At the request's own "now" (v5 now_in_seconds), when it has one.
    fn at(self, now_in_seconds: Option<i32>) -> CellCtx<'c> {
        self.now.set(now_in_seconds);
        self
    }

    fn now(&self) -> i32 {
        if let Some(now) = self.now.get() {
            return now;
        }
        let now = self.clock.now_seconds();
        self.now.set(Some(now));
        now
    }

    fn cell(&self, column: u16, path: Option<Bytes>, value: Option<Bytes>) -> CellWrite {
        let (ttl, ldt) = match &value {
            None => (0, self.now()),
            Some(_) if self.ttl > 0 => (self.ttl, self.now().saturating_add(self.ttl)),
            Some(_) => (0, 0),
        };
        CellWrite { column, path, timestamp: self.timestamp, ttl, local_deletion_time: ldt, value }
    }

    fn deletion(&self) -> DeletionTime {
        DeletionTime { timestamp: self.timestamp, local_deletion_time: self.now() }
    }
}

fn check_value_size(col: &ColumnDef, v: &Bytes) -> Result<(), QueryError> {
    // Cells are limited by the commit log segment in Cassandra; Shoal caps a cell at 64 MiB.
    const MAX_CELL: usize = 64 << 20;
    if v.len() > MAX_CELL {
        return Err(QueryError::Invalid(format!(
            "Value for column {} is too large: {} bytes (maximum {} bytes)",
            col.name,
            v.len(),
            MAX_CELL
        )));
    }
    Ok(())
}

/// Writes a whole value to a column: one cell, or for a non-frozen
/// collection a collection tombstone just before the new elements.
fn set_column(row: &mut RowWrite, col: &ColumnDef, bound: Bound, cc: &CellCtx) -> Result<(), QueryError> {
    let value = match bound {
        Bound::Unset => return Ok(()),
        Bound::Null => None,
        Bound::Value(v) => Some(v),
    };
    if !col.ty.is_multi_cell() {
        if let Some(v) = &value {
            check_value_size(col, v)?;
        }
        row.cells.push(cc.cell(col.id, None, value));
        return Ok(());
    }
    row.complex_deletions.push((col.id, DeletionTime { timestamp: cc.timestamp - 1, local_deletion_time: cc.now() }));
    if let Some(v) = value {
        add_elements(row, col, &v, cc, false)?;
    }
    Ok(())
}

/// Adds elements of a serialized collection value as cells.
fn add_elements(
    row: &mut RowWrite,
    col: &ColumnDef,
    value: &[u8],
    cc: &CellCtx,
    prepend: bool,
) -> Result<(), QueryError> {
    let parsed = Value::deserialize(&col.ty, value)
        .map_err(|e| QueryError::Invalid(format!("Invalid value for column {}: {e}", col.name)))?;
    match parsed {
        Value::Set(items) => {
            for item in items {
                row.cells.push(cc.cell(col.id, Some(Bytes::from(item.to_bytes())), Some(Bytes::new())));
            }
        }
        Value::Map(pairs) => {
            for (k, v) in pairs {
                row.cells.push(cc.cell(col.id, Some(Bytes::from(k.to_bytes())), Some(Bytes::from(v.to_bytes()))));
            }
        }
        Value::Udt(fields) => {
            // A null field writes no cell (the whole-value deletion before it
            // already covers the old one).
            for (i, field) in fields.into_iter().enumerate() {
                if let Some(v) = field {
                    row.cells.push(cc.cell(col.id, Some(common::field_path(i)), Some(Bytes::from(v.to_bytes()))));
                }
            }
        }
        Value::List(items) => {
            for (i, item) in items.into_iter().enumerate() {
                row.cells.push(cc.cell(
                    col.id,
                    Some(list_path(cc.timestamp, i, prepend)),
                    Some(Bytes::from(item.to_bytes())),
                ));
            }
        }
        _ => return Err(QueryError::Invalid(format!("Invalid collection value for column {}", col.name))),
    }
    Ok(())
}

/// The columns a statement already named (by index in the table): a bit
/// set, on the heap only for tables of more than 128 columns.
enum Seen {
    Small(u128),
    Large(Vec<bool>),
}

impl Seen {
    fn new(columns: usize) -> Seen {
        if columns <= 128 {
            Seen::Small(0)
        } else {
            Seen::Large(vec![false; columns])
        }
    }

    /// Marks `index`; false when it was already marked.
    fn insert(&mut self, index: usize) -> bool {
        match self {
            Seen::Small(bits) => {
                let bit = 1u128 << index;
                let fresh = *bits & bit == 0;
                *bits |= bit;
                fresh
            }
            Seen::Large(v) => !std::mem::replace(&mut v[index], true),
        }
    }
}

/// What a write to a counter table may not have, in Cassandra's words.
fn counter_checks(table: &TableDef, using: &ast::Using, if_clause: &Option<ast::IfClause>) -> Result<(), QueryError> {
    if !table.is_counter() {
        return Ok(());
    }
    match if_clause {
        Some(ast::IfClause::Exists) => {
            return Err(QueryError::invalid("Conditional updates are not supported on counter tables"))
        }
        Some(ast::IfClause::Conditions(_)) => {
            return Err(QueryError::invalid("Conditions on counters are not supported"))
        }
        None => {}
    }
    if using.timestamp.is_some() {
        return Err(QueryError::invalid("Cannot provide custom timestamp for counter updates"));
    }
    if using.ttl.is_some() {
        return Err(QueryError::invalid("Cannot provide custom TTL for counter updates"));
    }
    Ok(())
}

/// A counter update's cell: the delta, for the counter leader (`COUNTER_TTL`).
fn counter_cell(col: &ColumnDef, delta: i64, cc: &CellCtx) -> CellWrite {
    CellWrite {
        column: col.id,
        path: None,
        timestamp: cc.timestamp,
        ttl: types::mutation::COUNTER_TTL,
        local_deletion_time: i32::MAX,
        value: Some(Bytes::copy_from_slice(&delta.to_be_bytes())),
    }
}

/// The delta of `c = c + term` (`negate`: `c = c - term`).
fn counter_delta(term: &Term, r: &Receiver<'_>, ctx: &BindCtx<'_>, negate: bool) -> Result<Option<i64>, QueryError> {
    let v = match eval(term, r, ctx)? {
        Bound::Value(b) => {
            i64::from_be_bytes(b.as_ref().try_into().map_err(|_| QueryError::invalid("Invalid counter value"))?)
        }
        Bound::Unset => return Ok(None),
        Bound::Null => return Err(QueryError::invalid("Invalid null value for counter increment/decrement")),
    };
    if !negate {
        return Ok(Some(v));
    }
    v.checked_neg().map(Some).ok_or_else(|| {
        QueryError::Invalid(format!(
            "The negation of {v} overflows supported counter precision (signed 8 bytes integer)"
        ))
    })
}

pub fn insert(
    proc: &Processor,
    schema: &Schema,
    session: Option<&str>,
    ins: &ast::Insert,
    ctx: &BindCtx<'_>,
    opts: &WriteOpts,
) -> Result<Planned, QueryError> {
    let (ks, table) = common::resolve_table(schema, &ins.table, session)?;
    reject_virtual(ks, opts)?;
    if table.is_counter() {
        return Err(QueryError::invalid("INSERT statements are not allowed on counter tables, use UPDATE instead"));
    }
    // INSERT JSON: every column of the table gets the document's value as a bind value.
    let json = match &ins.values {
        InsertValues::Json { value, default_unset } => Some(json_values(table, value, *default_unset, ctx)?),
        InsertValues::Columns { .. } => None,
    };
    let json_ctx = json.as_ref().map(|(_, _, values)| BindCtx { values, clock: ctx.clock });
    let (columns, values, values_ctx) = match (&ins.values, &json, &json_ctx) {
        (InsertValues::Columns { columns, values }, _, _) => (columns, values, ctx),
        (_, Some((columns, values, _)), Some(json_ctx)) => (columns, values, json_ctx),
        _ => return Err(QueryError::Server("INSERT JSON without its values".into())),
    };
    if columns.len() != values.len() {
        return Err(QueryError::invalid("Unmatched column names/values"));
    }
    let (timestamp, ttl) = using_values(&ins.using, table, ctx, proc, opts)?;
    let cc = CellCtx::new(timestamp, ttl, &proc.clock).at(opts.now_in_seconds);
    let mut pk: Vec<Option<Bytes>> = vec![None; table.partition_key_len()];
    let mut ck: Vec<Option<Bytes>> = vec![None; table.clustering_len()];
    let mut row = RowWrite { cells: Vec::with_capacity(columns.len()), ..RowWrite::default() };
    let mut static_row = RowWrite { is_static: true, ..RowWrite::default() };
    let mut seen = Seen::new(table.columns.len());
    let mut next = 0;
    for (name, term) in columns.iter().zip(values) {
        let (index, col) = common::column_near(table, name, next)?;
        next = index + 1;
        if !seen.insert(index) {
            return Err(QueryError::Invalid(format!("Multiple definitions found for column {name}")));
        }
        let bound = eval(term, &Receiver { name, ty: &col.ty }, values_ctx)?;
        match col.kind {
            ColumnKind::PartitionKey | ColumnKind::Clustering => {
                let v = match bound {
                    Bound::Value(v) => v,
                    Bound::Null => {
                        return Err(QueryError::Invalid(format!("Invalid null value in condition for column {name}")))
                    }
                    Bound::Unset => return Err(QueryError::Invalid(format!("Invalid unset value for column {name}"))),
                };
                if col.kind == ColumnKind::PartitionKey {
                    pk[col.position as usize] = Some(v);
                } else {
                    if v.len() > u16::MAX as usize {
                        return Err(QueryError::Invalid(format!(
                            "Key length of {} is longer than maximum of {}",
                            v.len(),
                            u16::MAX
                        )));
                    }
                    ck[col.position as usize] = Some(v);
                }
            }
            ColumnKind::Static => set_column(&mut static_row, col, bound, &cc)?,
            ColumnKind::Regular => set_column(&mut row, col, bound, &cc)?,
        }
    }
    if pk.iter().any(Option::is_none) {
        let missing: Vec<&str> =
            table.partition_key().filter(|c| pk[c.position as usize].is_none()).map(|c| c.name.as_str()).collect();
        return Err(QueryError::Invalid(format!("Some partition key parts are missing: {}", missing.join(", "))));
    }
    let only_static = row.cells.is_empty() && row.complex_deletions.is_empty() && !static_row.cells.is_empty();
    let ck_complete = ck.iter().all(Option::is_some);
    if !ck_complete {
        let missing_ck: Vec<&str> =
            table.clustering().filter(|c| ck[c.position as usize].is_none()).map(|c| c.name.as_str()).collect();
        if !(only_static && missing_ck.len() == table.clustering_len()) {
            return Err(QueryError::Invalid(format!("Some clustering keys are missing: {}", missing_ck.join(", "))));
        }
    }
    let key = match pk.as_slice() {
        [Some(only)] => common::compose_partition_key(std::slice::from_ref(only))?,
        _ => common::compose_partition_key(&pk.into_iter().flatten().collect::<Vec<_>>())?,
    };
    let mut m = new_mutation(table, key);
    if ck_complete {
        row.clustering = ck.into_iter().flatten().collect();
        row.marker =
            Some(Liveness { timestamp, ttl, local_expiration: if ttl > 0 { cc.now().saturating_add(ttl) } else { 0 } });
        m.rows.push(row);
    }
    if !static_row.cells.is_empty() || !static_row.complex_deletions.is_empty() {
        m.rows.push(static_row);
    }
    Ok(Planned { keyspace: Arc::clone(ks), mutations: vec![m] })
}

/// An INSERT JSON as a column list: the names, their bind markers and the values bound.
pub(crate) type JsonColumns = (Vec<String>, Vec<Term>, Vec<BoundValue>);

/// The values of an INSERT JSON, as Cassandra's `Json.parseJson` reads the
/// document: every column of the table, in order, as a column list of bind
/// markers and their bind values; a column the document leaves out is null,
/// or unset with `DEFAULT UNSET`.
pub(crate) fn json_values(
    table: &TableDef,
    document: &Term,
    default_unset: bool,
    ctx: &BindCtx<'_>,
) -> Result<JsonColumns, QueryError> {
    let text = match eval(document, &Receiver { name: "[json]", ty: &CqlType::Text }, ctx)? {
        Bound::Value(b) => String::from_utf8_lossy(&b).into_owned(),
        // Cassandra reads an unset marker as an empty document.
        Bound::Unset => String::new(),
        Bound::Null => return Err(QueryError::invalid("Got null for INSERT JSON values")),
    };
    let entries = match types::json::parse_object(&text) {
        Ok(Some(entries)) => entries,
        Ok(None) => return Err(QueryError::invalid("Got null for INSERT JSON values")),
        Err(e) => {
            return Err(QueryError::Invalid(format!(
                "Could not decode JSON string as a map: {e}. (String was: {text})"
            )))
        }
    };
    let mut entries = types::json::handle_case_sensitivity(entries);
    let now_ms = ctx.clock.now_micros() / 1000;
    let mut columns = Vec::with_capacity(table.columns.len());
    let mut markers = Vec::with_capacity(table.columns.len());
    let mut values = Vec::with_capacity(table.columns.len());
    for col in &table.columns {
        let value = match entries.iter().position(|(key, _)| *key == col.name) {
            Some(at) => match entries.remove(at).1 {
                types::json::Json::Null => BoundValue::Null,
                // Cassandra stores an empty value it would not accept as a bound
                // value (`""` for a tinyint, smallint or duration); Shoal does not.
                json => match types::json::from_json(&col.ty, &json, now_ms)
                    .and_then(|bytes| types::codec::validate(&col.ty, &bytes).map(|()| bytes))
                {
                    Ok(bytes) => BoundValue::Set(Bytes::from(bytes)),
                    Err(types::value::ValueError::InvalidRequest(msg)) => return Err(QueryError::Invalid(msg)),
                    Err(e) => {
                        return Err(QueryError::Invalid(format!("Error decoding JSON value for {}: {e}", col.name)))
                    }
                },
            },
            None if default_unset => BoundValue::Unset,
            None => BoundValue::Null,
        };
        columns.push(col.name.clone());
        markers.push(Term::Bind(ast::BindMarker { index: values.len(), name: None }));
        values.push(value);
    }
    if let Some((unknown, _)) = entries.first() {
        return Err(QueryError::Invalid(format!("JSON values map contains unrecognized column: {unknown}")));
    }
    Ok((columns, markers, values))
}

fn reject_virtual(ks: &KeyspaceDef, opts: &WriteOpts) -> Result<(), QueryError> {
    let system_write = opts.system && crate::schema::Schema::is_replicated_system(&ks.name);
    if !system_write && crate::schema::Schema::is_system(&ks.name) {
        return Err(QueryError::Invalid(format!("Modification to keyspace {} is not allowed", ks.name)));
    }
    Ok(())
}

pub fn update(
    proc: &Processor,
    schema: &Schema,
    session: Option<&str>,
    upd: &ast::Update,
    ctx: &BindCtx<'_>,
    opts: &WriteOpts,
) -> Result<Planned, QueryError> {
    check_compatible(&upd.assignments)?;
    let (ks, table) = common::resolve_table(schema, &upd.table, session)?;
    reject_virtual(ks, opts)?;
    counter_checks(table, &upd.using, &upd.if_clause)?;
    let (timestamp, ttl) = using_values(&upd.using, table, ctx, proc, opts)?;
    let cc = CellCtx::new(timestamp, ttl, &proc.clock).at(opts.now_in_seconds);
    let r = key_restrictions(table, &upd.where_clause, ctx, false)?;
    let keys = partition_keys(table, &r)?;
    let (ck_lists, missing_ck) = clustering_lists(table, &r);
    let assigned: Vec<&ColumnDef> =
        upd.assignments.iter().map(|a| common::column(table, &a.column).map(|(_, c)| c)).collect::<Result<_, _>>()?;
    for c in &assigned {
        if matches!(c.kind, ColumnKind::PartitionKey | ColumnKind::Clustering) {
            return Err(QueryError::Invalid(format!("PRIMARY KEY part {} found in SET part", c.name)));
        }
    }
    let only_static = assigned.iter().all(|c| c.kind == ColumnKind::Static);
    if !missing_ck.is_empty() && (!only_static || !ck_lists.is_empty()) {
        return Err(QueryError::Invalid(format!("Some clustering keys are missing: {}", missing_ck.join(", "))));
    }
    let clusterings =
        if ck_lists.is_empty() && table.clustering_len() > 0 { Vec::new() } else { common::cartesian(&ck_lists) };
    let mut mutations = Vec::new();
    for key in keys {
        let mut m = new_mutation(table, key.clone());
        let mut static_row = RowWrite { is_static: true, ..RowWrite::default() };
        let targets: Vec<Vec<Bytes>> = if clusterings.is_empty() { vec![] } else { clusterings.clone() };
        let mut rows: Vec<RowWrite> =
            targets.into_iter().map(|c| RowWrite { clustering: c, ..RowWrite::default() }).collect();
        for (a, col) in upd.assignments.iter().zip(&assigned) {
            if col.kind == ColumnKind::Static {
                apply_assignment(proc, table, &key, &mut static_row, a, col, ctx, &cc)?;
            } else {
                for row in rows.iter_mut() {
                    apply_assignment(proc, table, &key, row, a, col, ctx, &cc)?;
                }
            }
        }
        m.rows = rows;
        if !static_row.cells.is_empty() || !static_row.complex_deletions.is_empty() {
            m.rows.push(static_row);
        }
        mutations.push(m);
    }
    Ok(Planned { keyspace: Arc::clone(ks), mutations })
}

/// Cassandra's parser check of an UPDATE's SET: a column set whole (`c = v`)
/// takes no other operation, and a field is set once (`c.f = v, c.g = w` is fine).
pub(crate) fn check_compatible(assignments: &[ast::Assignment]) -> Result<(), QueryError> {
    for (i, a) in assignments.iter().enumerate() {
        let clash = assignments[..i].iter().filter(|p| p.column == a.column).any(|p| match (&p.op, &a.op) {
            (AssignmentOp::Set(_), _) | (_, AssignmentOp::Set(_)) => true,
            (AssignmentOp::SetField { field: f, .. }, AssignmentOp::SetField { field: g, .. }) => f == g,
            _ => false,
        });
        if clash {
            return Err(QueryError::Syntax(format!("Multiple incompatible setting of column {}", a.column)));
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn apply_assignment(
    proc: &Processor,
    table: &TableDef,
    key: &Bytes,
    row: &mut RowWrite,
    a: &ast::Assignment,
    col: &ColumnDef,
    ctx: &BindCtx<'_>,
    cc: &CellCtx,
) -> Result<(), QueryError> {
    let name = col.name.as_str();
    let r = Receiver { name, ty: &col.ty };
    match &a.op {
        AssignmentOp::Set(_) if col.ty == CqlType::Counter => Err(QueryError::Invalid(format!(
            "Cannot set the value of counter column {name} (counters can only be incremented/decremented, not set)"
        ))),
        AssignmentOp::Add(term) | AssignmentOp::Subtract(term) if col.ty == CqlType::Counter => {
            if let Some(delta) = counter_delta(term, &r, ctx, matches!(a.op, AssignmentOp::Subtract(_)))? {
                row.cells.push(counter_cell(col, delta, cc));
            }
            Ok(())
        }
        AssignmentOp::Set(term) => set_column(row, col, eval(term, &r, ctx)?, cc),
        AssignmentOp::Add(term) | AssignmentOp::Prepend(term) => {
            let prepend = matches!(a.op, AssignmentOp::Prepend(_));
            // Cassandra prints a prepend with a `-`.
            if prepend && !matches!(col.ty, CqlType::List { .. }) {
                return Err(QueryError::Invalid(format!(
                    "Invalid operation ({name} = {} - {name}) for non list column {name}",
                    crate::bind::term_text(term)
                )));
            }
            if matches!(col.ty, CqlType::Udt { .. } | CqlType::Tuple(_)) {
                return Err(QueryError::Invalid(format!(
                    "Invalid operation ({name} = {name} + {}) for tuple column {name}",
                    crate::bind::term_text(term)
                )));
            }
            if !col.ty.is_multi_cell() {
                return Err(QueryError::Invalid(format!(
                    "Invalid operation ({name} = {name} + {}) for non counter column {name}",
                    crate::bind::term_text(term)
                )));
            }
            match eval(term, &r, ctx)? {
                Bound::Value(v) => add_elements(row, col, &v, cc, prepend),
                Bound::Unset => Ok(()),
                Bound::Null => Ok(()),
            }
        }
        AssignmentOp::Subtract(term) => {
            if !col.ty.is_multi_cell() || !col.ty.is_collection() {
                return Err(QueryError::Invalid(format!(
                    "Invalid operation ({name} = {name} - {}) for non counter column {name}",
                    crate::bind::term_text(term)
                )));
            }
            match &col.ty {
                CqlType::Set { .. } => {
                    if let Bound::Value(v) = eval(term, &r, ctx)? {
                        if let Ok(Value::Set(items)) = Value::deserialize(&col.ty, &v) {
                            for item in items {
                                row.cells.push(cc.cell(col.id, Some(Bytes::from(item.to_bytes())), None));
                            }
                        }
                    }
                    Ok(())
                }
                CqlType::Map { key: kt, .. } => {
                    let keys_ty = CqlType::Set { elem: kt.clone(), frozen: true };
                    if let Some(Value::Set(keys)) = eval_value(term, &Receiver { name, ty: &keys_ty }, ctx)? {
                        for k in keys {
                            row.cells.push(cc.cell(col.id, Some(Bytes::from(k.to_bytes())), None));
                        }
                    }
                    Ok(())
                }
                CqlType::List { .. } => {
                    let Some(Value::List(remove)) = eval_value(term, &r, ctx)? else { return Ok(()) };
                    let remove: Vec<Vec<u8>> = remove.iter().map(Value::to_bytes).collect();
                    for (path, value) in read_list(proc, table, key, &row.clustering, col, cc.now())? {
                        if remove.contains(&value) {
                            row.cells.push(cc.cell(col.id, Some(Bytes::from(path)), None));
                        }
                    }
                    Ok(())
                }
                _ => Err(QueryError::Invalid(format!("Invalid operation for column {name}"))),
            }
        }
        AssignmentOp::SetElement { key: k, value } => match &col.ty {
            CqlType::Map { key: kt, value: vt, frozen: false } => {
                let kb = match eval(k, &Receiver { name, ty: kt }, ctx)? {
                    Bound::Value(b) => b,
                    _ => return Err(QueryError::Invalid(format!("Invalid null map key for column {name}"))),
                };
                let vb = eval(value, &Receiver { name, ty: vt }, ctx)?.into_option();
                row.cells.push(cc.cell(col.id, Some(kb), vb));
                Ok(())
            }
            CqlType::List { elem, frozen: false } => {
                let idx = match eval_value(k, &Receiver { name: "[list index]", ty: &CqlType::Int }, ctx)? {
                    Some(Value::Int(i)) => i,
                    _ => return Err(QueryError::invalid("Invalid null value for list index")),
                };
                let vb = eval(value, &Receiver { name, ty: elem }, ctx)?.into_option();
                let list = read_list(proc, table, key, &row.clustering, col, cc.now())?;
                let Some((path, _)) = usize::try_from(idx).ok().and_then(|i| list.get(i)) else {
                    return Err(QueryError::Invalid(format!(
                        "List index {idx} out of bound, list has size {}",
                        list.len()
                    )));
                };
                row.cells.push(cc.cell(col.id, Some(Bytes::from(path.clone())), vb));
                Ok(())
            }
            _ => Err(QueryError::Invalid(format!(
                "Invalid operation ({name}[{}] = {}) for non collection column {name}",
                crate::bind::term_text(k),
                crate::bind::term_text(value)
            ))),
        },
        AssignmentOp::SetField { field, value } => {
            let (position, field_ty) = match &col.ty {
                CqlType::Udt { frozen: false, .. } => udt_field(col, field)?,
                CqlType::Udt { .. } => {
                    return Err(QueryError::Invalid(format!(
                        "Invalid operation ({name}.{field} = {}) for frozen UDT column {name}",
                        crate::bind::term_text(value)
                    )))
                }
                _ => {
                    return Err(QueryError::Invalid(format!(
                        "Invalid operation ({name}.{field} = {}) for non-UDT column {name}",
                        crate::bind::term_text(value)
                    )))
                }
            };
            let receiver = format!("{name}.{field}");
            match eval(value, &Receiver { name: &receiver, ty: &field_ty }, ctx)? {
                Bound::Unset => {}
                Bound::Null => row.cells.push(cc.cell(col.id, Some(common::field_path(position)), None)),
                Bound::Value(v) => {
                    check_value_size(col, &v)?;
                    row.cells.push(cc.cell(col.id, Some(common::field_path(position)), Some(v)));
                }
            }
            Ok(())
        }
    }
}

/// The position and type of `field` in the user type column `col`.
fn udt_field(col: &ColumnDef, field: &str) -> Result<(usize, CqlType), QueryError> {
    let CqlType::Udt { fields, .. } = &col.ty else {
        return Err(QueryError::Invalid(format!("Invalid field deletion operation for non-UDT column {}", col.name)));
    };
    fields
        .iter()
        .enumerate()
        .find(|(_, (n, _))| n == field)
        .map(|(i, (_, t))| (i, t.clone()))
        .ok_or_else(|| QueryError::Invalid(format!("UDT column {} does not have a field named {field}", col.name)))
}

/// The live elements (path, value) of a list column, read before a
/// read-modify-write list operation (as Cassandra does).
/// A list element as stored: its path (a time UUID) and its value.
type ListElement = (Vec<u8>, Vec<u8>);

fn read_list(
    proc: &Processor,
    table: &TableDef,
    key: &Bytes,
    clustering: &[Bytes],
    col: &ColumnDef,
    now: i32,
) -> Result<Vec<ListElement>, QueryError> {
    let bound = ClusteringBound { prefix: clustering.to_vec(), inclusive: true };
    let read = PartitionRead {
        table: table.id,
        token: ring::token_of(key),
        partition_key: key.to_vec(),
        ranges: if clustering.is_empty() { Vec::new() } else { vec![(bound.clone(), bound)] },
        reversed: false,
        include_static: col.kind == ColumnKind::Static,
        row_limit: 1,
        now,
    };
    let schema = proc.schema.snapshot();
    let ks = schema
        .keyspace(&table.keyspace)
        .ok_or_else(|| QueryError::Invalid(format!("Keyspace '{}' does not exist", table.keyspace)))?;
    let Some(p) = proc.data.read(ks, read, types::Consistency::One)? else { return Ok(Vec::new()) };
    let row = if col.kind == ColumnKind::Static { p.static_row } else { p.rows.into_iter().next() };
    let Some(row) = row else { return Ok(Vec::new()) };
    match row.column(col.id) {
        Some(ColumnData::Complex(items)) => Ok(items.iter().map(|(p, c)| (p.clone(), c.value.clone())).collect()),
        _ => Ok(Vec::new()),
    }
}

pub fn delete(
    proc: &Processor,
    schema: &Schema,
    session: Option<&str>,
    del: &ast::Delete,
    ctx: &BindCtx<'_>,
    opts: &WriteOpts,
) -> Result<Planned, QueryError> {
    let (ks, table) = common::resolve_table(schema, &del.table, session)?;
    reject_virtual(ks, opts)?;
    counter_checks(table, &del.using, &del.if_clause)?;
    if del.using.ttl.is_some() {
        return Err(QueryError::invalid("TTL attribute is not allowed for deletes"));
    }
    let (timestamp, _) = using_values(&del.using, table, ctx, proc, opts)?;
    let cc = CellCtx::new(timestamp, 0, &proc.clock).at(opts.now_in_seconds);
    let r = key_restrictions(table, &del.where_clause, ctx, del.targets.is_empty())?;
    let keys = partition_keys(table, &r)?;
    let (ck_lists, missing_ck) = clustering_lists(table, &r);
    let mut mutations = Vec::new();
    for key in keys {
        let mut m = new_mutation(table, key.clone());
        if del.targets.is_empty() {
            // Whole rows: a partition, a range of rows, or rows.
            if ck_lists.is_empty() && r.slice.is_none() {
                m.partition_deletion = Some(cc.deletion());
            } else if missing_ck.is_empty() && r.slice.is_none() {
                for c in common::cartesian(&ck_lists) {
                    m.rows.push(RowWrite { clustering: c, deletion: Some(cc.deletion()), ..RowWrite::default() });
                }
            } else {
                let clustering: Vec<&ColumnDef> = table.clustering().collect();
                for prefix in common::cartesian(&ck_lists) {
                    let (start, end) = match &r.slice {
                        None => {
                            let b = ClusteringBound { prefix: prefix.clone(), inclusive: true };
                            (b.clone(), b)
                        }
                        Some((pos, lo, hi)) => {
                            if *pos != prefix.len() {
                                return Err(QueryError::Invalid(format!(
                                    "PRIMARY KEY column \"{}\" cannot be restricted as preceding column \"{}\" is not restricted",
                                    clustering.get(*pos).map(|c| c.name.as_str()).unwrap_or("?"),
                                    clustering.get(prefix.len()).map(|c| c.name.as_str()).unwrap_or("?")
                                )));
                            }
                            let make = |v: &Option<(Bytes, bool)>| match v {
                                Some((b, incl)) => {
                                    let mut p = prefix.clone();
                                    p.push(b.clone());
                                    ClusteringBound { prefix: p, inclusive: *incl }
                                }
                                None => ClusteringBound { prefix: prefix.clone(), inclusive: true },
                            };
                            let (s, e) = (make(lo), make(hi));
                            if clustering[*pos].order == types::schema::ClusteringOrder::Desc {
                                (e, s)
                            } else {
                                (s, e)
                            }
                        }
                    };
                    m.range_tombstones.push(RangeTombstone { start, end, deletion: cc.deletion() });
                }
            }
        } else {
            let cols: Vec<(&DeleteTarget, &ColumnDef)> = del
                .targets
                .iter()
                .map(|t| {
                    let name = match t {
                        DeleteTarget::Column(n)
                        | DeleteTarget::Element { column: n, .. }
                        | DeleteTarget::Field { column: n, .. } => n,
                    };
                    common::column(table, name).map(|(_, c)| (t, c))
                })
                .collect::<Result<_, _>>()?;
            for (_, c) in &cols {
                if matches!(c.kind, ColumnKind::PartitionKey | ColumnKind::Clustering) {
                    return Err(QueryError::Invalid(format!(
                        "Invalid identifier {} for deletion (should not be a PRIMARY KEY part)",
                        c.name
                    )));
                }
            }
            let only_static = cols.iter().all(|(_, c)| c.kind == ColumnKind::Static);
            if !missing_ck.is_empty() && (!only_static || !ck_lists.is_empty()) {
                return Err(QueryError::Invalid(format!(
                    "Some clustering keys are missing: {}",
                    missing_ck.join(", ")
                )));
            }
            let mut static_row = RowWrite { is_static: true, ..RowWrite::default() };
            let mut rows: Vec<RowWrite> = if missing_ck.is_empty() {
                common::cartesian(&ck_lists)
                    .into_iter()
                    .map(|c| RowWrite { clustering: c, ..RowWrite::default() })
                    .collect()
            } else {
                Vec::new()
            };
            for (target, col) in &cols {
                let apply = |row: &mut RowWrite| -> Result<(), QueryError> {
                    match target {
                        DeleteTarget::Column(_) => {
                            if col.ty.is_multi_cell() {
                                row.complex_deletions.push((col.id, cc.deletion()));
                            } else {
                                row.cells.push(cc.cell(col.id, None, None));
                            }
                            Ok(())
                        }
                        DeleteTarget::Element { key: k, .. } => match &col.ty {
                            CqlType::Map { key: kt, frozen: false, .. } => {
                                if let Bound::Value(kb) = eval(k, &Receiver { name: &col.name, ty: kt }, ctx)? {
                                    row.cells.push(cc.cell(col.id, Some(kb), None));
                                }
                                Ok(())
                            }
                            CqlType::Set { elem, frozen: false } => {
                                if let Bound::Value(kb) = eval(k, &Receiver { name: &col.name, ty: elem }, ctx)? {
                                    row.cells.push(cc.cell(col.id, Some(kb), None));
                                }
                                Ok(())
                            }
                            CqlType::List { frozen: false, .. } => {
                                let idx =
                                    match eval_value(k, &Receiver { name: "[list index]", ty: &CqlType::Int }, ctx)? {
                                        Some(Value::Int(i)) => i,
                                        _ => return Err(QueryError::invalid("Invalid null value for list index")),
                                    };
                                let list = read_list(proc, table, &key, &row.clustering, col, cc.now())?;
                                let Some((path, _)) = usize::try_from(idx).ok().and_then(|i| list.get(i)) else {
                                    return Err(QueryError::Invalid(format!(
                                        "List index {idx} out of bound, list has size {}",
                                        list.len()
                                    )));
                                };
                                row.cells.push(cc.cell(col.id, Some(Bytes::from(path.clone())), None));
                                Ok(())
                            }
                            _ if !col.ty.is_collection() => Err(QueryError::Invalid(format!(
                                "Invalid deletion operation for non collection column {}",
                                col.name
                            ))),
                            _ => Err(QueryError::Invalid(format!(
                                "Invalid element deletion for column {} of type {}",
                                col.name,
                                col.ty.to_cql()
                            ))),
                        },
                        DeleteTarget::Field { field, .. } => {
                            if let CqlType::Udt { frozen: true, .. } = col.ty {
                                return Err(QueryError::Invalid(format!(
                                    "Frozen UDT column {} does not support field deletions",
                                    col.name
                                )));
                            }
                            let (position, _) = udt_field(col, field)?;
                            row.cells.push(cc.cell(col.id, Some(common::field_path(position)), None));
                            Ok(())
                        }
                    }
                };
                if col.kind == ColumnKind::Static {
                    apply(&mut static_row)?;
                } else {
                    for row in rows.iter_mut() {
                        apply(row)?;
                    }
                }
            }
            m.rows = rows;
            if !static_row.cells.is_empty() || !static_row.complex_deletions.is_empty() {
                m.rows.push(static_row);
            }
        }
        mutations.push(m);
    }
    Ok(Planned { keyspace: Arc::clone(ks), mutations })
}
