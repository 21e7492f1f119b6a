//! SELECT: restriction analysis (`plan`), reads from storage or a virtual
//! table with filtering (`reader`), paging (`paging`), and the selection
//! (`selection`: columns, writetime/ttl, token(), functions, aggregates,
//! `cast`), GROUP BY (`group`: validation, grouped reads and paging by
//! groups); this module runs them (`execute`) and writes the result rows, for SELECT
//! JSON as one JSON object per row (`types::json`).
//!
//! Invariants:
//! - Rows are produced in Cassandra's order: partitions by token (or in the
//!   order of an IN list), rows by clustering order, reversed for ORDER BY
//!   against the declared order.
//! - A paging state resumes exactly after the last row returned; a query
//!   paged to the end returns every row exactly once.
//! - A restriction Shoal cannot serve exactly is refused with Cassandra's
//!   message, never answered approximately.

use std::borrow::Cow;
use std::cmp::Ordering as CmpOrdering;

use bytes::{BufMut, Bytes, BytesMut};
use cql::ast::{self, CellMetadataKind, Operator, RelationLhs, Selection, SelectorExpr, Term};
use cql_protocol::{ColumnSpec, ResultBody, RowsMetadata, RowsWriter};
use storage::{PartitionRead, Row, ScanRange};
use types::bytes::ByteReader;
use types::mutation::ClusteringBound;
use types::schema::{ClusteringOrder, ColumnKind, TableDef};
use types::{CqlType, Value};

use crate::bind::{eval, eval_value, BindCtx, Bound, Receiver};
use crate::common::{self, CellOut, PrefixBound, ValueBound};
use crate::error::QueryError;
use crate::processor::Processor;
use crate::schema::Schema;
use crate::system;

/// Paging and output options of one execution.
pub struct Page<'a> {
    pub consistency: types::Consistency,
    pub page_size: Option<usize>,
    pub paging_state: Option<&'a [u8]>,
    pub skip_metadata: bool,
    /// The request's "now" in seconds (protocol v5's now_in_seconds): what
    /// TTL expiry is checked against, in place of the node's clock.
    pub now_in_seconds: Option<i32>,
}

mod aggregate;
#[cfg(test)]
mod aggregate_tests;
mod cast;
mod group;
#[cfg(test)]
mod group_tests;
#[cfg(test)]
mod json_tests;
mod paging;
mod plan;
#[cfg(test)]
mod plan_cache_tests;
mod reader;
mod selection;
#[cfg(test)]
mod test_support;

pub(crate) use aggregate::{compute as numeric_aggregate, Numeric as NumericAggregate};
pub(crate) use cast::{cast as cast_value, supported as cast_supported};
use group::*;
use paging::*;
use plan::*;
use reader::*;
use selection::*;
pub use selection::{plan_selection, PlanCache, SelectionPlan};

/// `what` is the bind variable name, `clause` the clause as errors name it.
fn limit_value(term: &Option<Term>, what: &str, clause: &str, ctx: &BindCtx<'_>) -> Result<Option<u32>, QueryError> {
    let Some(t) = term else { return Ok(None) };
    match eval_value(t, &Receiver { name: what, ty: &CqlType::Int }, ctx)? {
        Some(Value::Int(n)) if n > 0 => Ok(Some(n as u32)),
        Some(Value::Int(_)) => Err(QueryError::Invalid(format!("{clause} must be strictly positive"))),
        _ => Err(QueryError::Invalid(format!("Invalid null value of {what}"))),
    }
}

/// Executes a SELECT; a prepared one takes its selection from the
/// statement's `plans` (planned once per schema version).
pub fn execute(
    proc: &Processor,
    schema: &Schema,
    session_keyspace: Option<&str>,
    select: &ast::Select,
    plans: Option<&PlanCache>,
    ctx: &BindCtx<'_>,
    page: &Page<'_>,
) -> Result<ResultBody, QueryError> {
    let (keyspace, table) = common::resolve_table(schema, &select.table, session_keyspace)?;
    let planned = match plans {
        Some(plans) => plans.selection(schema.version, table, select)?,
        None => std::sync::Arc::new(plan_selection(table, select)?),
    };
    let selection: &SelectionPlan = &planned;
    let plan = plan_read(table, select, ctx)?;
    let group_prefix = group_by_prefix(table, select)?;
    let limit = limit_value(&select.limit, "[limit]", "LIMIT", ctx)?;
    let per_partition = limit_value(&select.per_partition_limit, "[per_partition_limit]", "PER PARTITION LIMIT", ctx)?;
    let aggregate = selection.sels.iter().any(Sel::is_aggregate);
    let distinct = select.distinct;
    if distinct {
        for s in &selection.sels {
            if let Sel::Column(i) = s {
                if !matches!(table.columns[*i].kind, ColumnKind::PartitionKey | ColumnKind::Static) {
                    return Err(QueryError::Invalid(format!(
                        "SELECT DISTINCT queries must only request partition key columns and/or static columns (not {})",
                        table.columns[*i].name
                    )));
                }
            }
        }
    }
    if let (PartitionPlan::Keys(keys), true, Some(_)) = (&plan.partitions, !select.order_by.is_empty(), page.page_size)
    {
        if keys.len() > 1 && (!aggregate || group_prefix.is_some()) {
            return Err(QueryError::invalid("Cannot page queries with both ORDER BY and a IN restriction on the partition key; you must either remove the ORDER BY or the IN and sort client side, or disable paging for this query"));
        }
    }

    if let Some(prefix) = group_prefix {
        let function = match select.group_by.last() {
            Some(last @ SelectorExpr::FunctionCall { .. }) => Some(group_by_function(table, last)?),
            _ => None,
        };
        let grouped =
            Grouped { table, selection, plan: &plan, prefix, function, per_partition, limit, values: ctx.values };
        let reader = Reader {
            proc,
            schema,
            keyspace,
            consistency: page.consistency,
            table,
            plan: &plan,
            per_partition: None,
            distinct,
            now: page.now_in_seconds.unwrap_or_else(|| proc.clock.now_seconds()),
        };
        let sort_in_memory =
            !select.order_by.is_empty() && matches!(&plan.partitions, PartitionPlan::Keys(k) if k.len() > 1);
        return grouped.execute(&reader, page, sort_in_memory);
    }

    let mut position = match page.paging_state {
        Some(state) => {
            Position::decode(state).ok_or_else(|| QueryError::Protocol("Invalid value for the paging state".into()))?
        }
        None => Position { remaining: limit.unwrap_or(u32::MAX), ..Position::default() },
    };
    // Aggregates read everything in one go; so do ORDER BY + IN (sorted in memory).
    let sort_in_memory =
        !select.order_by.is_empty() && matches!(&plan.partitions, PartitionPlan::Keys(k) if k.len() > 1);
    let page_rows =
        if aggregate || sort_in_memory { usize::MAX } else { page.page_size.filter(|&p| p > 0).unwrap_or(usize::MAX) };

    let reader = Reader {
        proc,
        schema,
        keyspace,
        consistency: page.consistency,
        table,
        plan: &plan,
        per_partition,
        distinct,
        now: page.now_in_seconds.unwrap_or_else(|| proc.clock.now_seconds()),
    };
    let (mut rows, next) = reader.read(&mut position, page_rows)?;
    // A LIMIT used up ends the query, whatever is left in storage.
    let next = next.filter(|p| p.remaining > 0);
    if sort_in_memory {
        sort_rows(table, plan.reversed, &mut rows);
    }

    let mut metadata = selection.result_metadata(page.skip_metadata);
    let mut out = Out::new(selection, &proc.clock, ctx.values);
    if aggregate {
        write_aggregate(selection, &rows, &mut out);
    } else {
        for row in &rows {
            write_row(selection, row, &mut out);
        }
        if let Some(next) = next {
            metadata = metadata.with_paging_state(Some(next.encode()));
        }
    }
    Ok(ResultBody::Rows(out.finish()?.finish(metadata)))
}

/// Where a result row's cells go: straight into the rows, or for SELECT JSON
/// into the row's JSON object (keys: the selectors' names), sent as the
/// row's one `[json]` cell when the row ends.
enum Sink<'s> {
    Cells(RowsWriter),
    Json { rows: RowsWriter, specs: &'s [ColumnSpec], text: String, cells: usize },
}

/// The rows being written, the clock the time functions read, and the first
/// error a selector failed with (which ends the query).
struct Out<'s> {
    sink: Sink<'s>,
    clock: &'s crate::clock::Clock,
    /// The execution's bound values (for markers in the selection).
    values: &'s [cql_protocol::BoundValue],
    error: Option<QueryError>,
}

impl<'s> Out<'s> {
    fn new(
        selection: &'s SelectionPlan,
        clock: &'s crate::clock::Clock,
        values: &'s [cql_protocol::BoundValue],
    ) -> Out<'s> {
        let sink = if selection.json {
            Sink::Json { rows: RowsWriter::new(1), specs: &selection.specs, text: String::new(), cells: 0 }
        } else {
            Sink::Cells(RowsWriter::new(selection.sels.len()))
        };
        Out { sink, clock, values, error: None }
    }

    /// A cell's value, or the error computing it failed with.
    fn push(&mut self, cell: Result<Option<Cow<'_, [u8]>>, QueryError>) {
        match cell {
            Ok(cell) => self.push_cell(cell.as_deref()),
            Err(e) => {
                self.error.get_or_insert(e);
                self.push_cell(None);
            }
        }
    }

    fn push_cell(&mut self, cell: Option<&[u8]>) {
        match &mut self.sink {
            Sink::Cells(rows) => rows.push_cell(cell),
            Sink::Json { specs, text, cells, .. } => {
                text.push_str(if *cells == 0 { "{" } else { ", " });
                if let Some(spec) = specs.get(*cells) {
                    types::json::name_key(&spec.name, text);
                    text.push_str(": ");
                    match cell {
                        Some(bytes) => types::json::write_json(&spec.ty, bytes, text),
                        None => text.push_str("null"),
                    }
                }
                *cells += 1;
            }
        }
    }

    fn end_row(&mut self) {
        match &mut self.sink {
            Sink::Cells(rows) => rows.end_row(),
            Sink::Json { rows, text, cells, .. } => {
                text.push_str(if *cells == 0 { "{}" } else { "}" });
                rows.push_cell(Some(text.as_bytes()));
                rows.end_row();
                text.clear();
                *cells = 0;
            }
        }
    }

    fn finish(self) -> Result<RowsWriter, QueryError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        match self.sink {
            Sink::Cells(rows) | Sink::Json { rows, .. } => Ok(rows),
        }
    }
}

/// Sorts rows of several partitions by clustering order (ORDER BY with IN).
fn sort_rows(table: &TableDef, reversed: bool, rows: &mut [RowData]) {
    rows.sort_by(|a, b| compare_clustering(table, reversed, &a.clustering, &b.clustering));
}

/// Compares clusterings in the query's order (a missing value, as in a
/// static-only row, first).
pub(crate) fn compare_clustering<V: AsRef<[u8]>>(table: &TableDef, reversed: bool, a: &[V], b: &[V]) -> CmpOrdering {
    for c in table.clustering() {
        let pos = c.position as usize;
        let o = match (a.get(pos), b.get(pos)) {
            (Some(x), Some(y)) => types::compare::compare_serialized(&c.ty, x.as_ref(), y.as_ref()),
            (x, y) => x.is_some().cmp(&y.is_some()),
        };
        let o = if c.order == ClusteringOrder::Desc { o.reverse() } else { o };
        if o != CmpOrdering::Equal {
            return if reversed { o.reverse() } else { o };
        }
    }
    CmpOrdering::Equal
}

fn write_row(selection: &SelectionPlan, row: &RowData, w: &mut Out<'_>) {
    for sel in &selection.sels {
        let cell = row_cell(sel, row, &Env { clock: w.clock, values: w.values });
        w.push(cell);
    }
    w.end_row();
}

type Cell<'r> = Result<Option<Cow<'r, [u8]>>, QueryError>;

/// What selectors read besides the rows: the clock (time functions) and the
/// bound values (markers in the selection).
pub(super) struct Env<'e> {
    pub(super) clock: &'e crate::clock::Clock,
    pub(super) values: &'e [cql_protocol::BoundValue],
}

/// A bind marker's value as a `ty` (null and unset read as null).
fn bound_cell(env: &Env<'_>, index: usize, ty: &CqlType) -> Cell<'static> {
    match env.values.get(index) {
        Some(cql_protocol::BoundValue::Set(bytes)) => {
            types::codec::validate(ty, bytes)
                .map_err(|e| QueryError::Invalid(format!("Exception while binding column [selection]: {e}")))?;
            Ok(Some(Cow::Owned(bytes.to_vec())))
        }
        Some(_) => Ok(None),
        None => Err(QueryError::Invalid(format!(
            "There were {} markers(?) in CQL but {} bound variables",
            index + 1,
            env.values.len()
        ))),
    }
}

/// A serialized value of type `ty` (an empty or malformed one reads as null).
fn value_of(ty: &CqlType, bytes: Option<Cow<'_, [u8]>>) -> Option<Value> {
    bytes.and_then(|b| Value::deserialize(ty, &b).ok())
}

/// `left op right` on serialized operands.
fn operation(
    op: ast::ArithmeticOp,
    (lt, left): (&CqlType, Option<Cow<'_, [u8]>>),
    (rt, right): (&CqlType, Option<Cow<'_, [u8]>>),
) -> Cell<'static> {
    let (Some(l), Some(r)) = (value_of(lt, left), value_of(rt, right)) else { return Ok(None) };
    let v = crate::functions::arith::apply(op, lt, &l, rt, &r)?;
    Ok(Some(Cow::Owned(v.to_bytes())))
}

fn native(function: &crate::functions::Native, args: Vec<Option<Cow<'_, [u8]>>>, env: &Env<'_>) -> Cell<'static> {
    let values: Vec<Option<Value>> = args.into_iter().zip(&function.args).map(|(a, t)| value_of(t, a)).collect();
    Ok(crate::functions::call(function, &values, env.clock)?.map(|v| Cow::Owned(v.to_bytes())))
}

/// The value of one selector for one row.
fn row_cell<'r>(sel: &Sel, row: &'r RowData, env: &Env<'_>) -> Cell<'r> {
    Ok(match sel {
        Sel::Column(i) => row.cells[*i].as_ref().map(|c| Cow::Borrowed(c.value.as_slice())),
        Sel::WriteTime(i) => {
            let ts = row.cells[*i].as_ref().and_then(|c| c.timestamp);
            ts.map(|t| Cow::Owned(t.to_be_bytes().to_vec()))
        }
        Sel::Ttl(i) => {
            let ttl = row.cells[*i].as_ref().and_then(|c| c.ttl);
            ttl.map(|t| Cow::Owned(t.to_be_bytes().to_vec()))
        }
        Sel::FieldMeta { column, position, ttl } => {
            let meta = row.cells[*column].as_ref().and_then(|c| match &c.fields {
                Some(fields) => fields.get(*position).copied().flatten(),
                None => common::udt_component(&c.value, *position).and(c.timestamp.map(|ts| (ts, c.ttl))),
            });
            match (meta, ttl) {
                (Some((_, Some(t))), true) => Some(Cow::Owned(t.to_be_bytes().to_vec())),
                (Some((ts, _)), false) => Some(Cow::Owned(ts.to_be_bytes().to_vec())),
                _ => None,
            }
        }
        Sel::Field { inner, position } => match row_cell(inner, row, env)? {
            Some(v) => common::udt_component(&v, *position).map(|f| Cow::Owned(f.to_vec())),
            None => None,
        },
        Sel::Token => Some(Cow::Owned(row.token.to_be_bytes().to_vec())),
        Sel::Const(v) => v.as_deref().map(Cow::Borrowed).map(|c| Cow::Owned(c.into_owned())),
        Sel::Bind { index, ty } => return bound_cell(env, *index, ty),
        Sel::Convert { inner, from, function, ty } => match row_cell(inner, row, env)? {
            Some(v) => convert(from, &v, function, ty)?.map(Cow::Owned),
            None => None,
        },
        Sel::ToJson { inner, ty } => {
            let json = types::json::to_json_function(ty, row_cell(inner, row, env)?.as_deref());
            Some(Cow::Owned(json.into_bytes()))
        }
        Sel::Cast { inner, from, to } => {
            row_cell(inner, row, env)?.and_then(|v| cast::cast(from, to, &v)).map(Cow::Owned)
        }
        Sel::Op { op, left, lt, right, rt } => {
            return operation(*op, (lt, row_cell(left, row, env)?), (rt, row_cell(right, row, env)?))
        }
        Sel::Negate(inner, ty) => value_of(ty, row_cell(inner, row, env)?)
            .and_then(|v| crate::functions::arith::negate(&v))
            .map(|v| Cow::Owned(v.to_bytes())),
        Sel::Native { function, args } => {
            let values = args.iter().map(|a| row_cell(a, row, env)).collect::<Result<Vec<_>, _>>()?;
            return native(function, values, env);
        }
        Sel::Count | Sel::CountOf(_) | Sel::Min(..) | Sel::Max(..) | Sel::Numeric(..) => None,
    })
}

/// A conversion function's result; blobAsX fails on bytes that are no X.
fn convert(from: &CqlType, value: &[u8], function: &str, to: &CqlType) -> Result<Option<Vec<u8>>, QueryError> {
    use types::literal as lit;
    if function.starts_with("blobas") && types::codec::validate(to, value).is_err() {
        return Err(QueryError::Invalid(format!(
            "In call to function system.{function}, value 0x{} is not a valid binary representation for type {}",
            crate::error::hex(value),
            to.to_cql()
        )));
    }
    if function.ends_with("asblob") || function.starts_with("blobas") {
        return Ok(Some(value.to_vec()));
    }
    let ms = match Value::deserialize(from, value).ok() {
        Some(Value::TimeUuid(u)) => lit::timeuuid_unix_ms(&u),
        Some(Value::Timestamp(ms)) => Some(ms),
        Some(Value::Date(d)) => Some(lit::date_to_timestamp(d)),
        _ => None,
    };
    let Some(ms) = ms else { return Ok(None) };
    let out = match to {
        CqlType::Timestamp => Value::Timestamp(ms),
        CqlType::Date => Value::Date(lit::timestamp_to_date(ms)),
        _ => Value::BigInt(ms),
    };
    Ok(Some(out.to_bytes()))
}

fn write_aggregate(selection: &SelectionPlan, rows: &[RowData], w: &mut Out<'_>) {
    for sel in &selection.sels {
        let cell = aggregate_cell(sel, rows, &Env { clock: w.clock, values: w.values });
        w.push(cell);
    }
    w.end_row();
}

/// The value of one selector over all the rows of an aggregate query (or
/// of one group): a non-aggregate selector takes the first row's value.
fn aggregate_cell<'r>(sel: &Sel, rows: &'r [RowData], env: &Env<'_>) -> Cell<'r> {
    match sel {
        Sel::Const(v) => return Ok(v.clone().map(Cow::Owned)),
        Sel::Bind { index, ty } => return bound_cell(env, *index, ty),
        _ => {}
    }
    if !sel.is_aggregate() {
        return match rows.first() {
            Some(r) => row_cell(sel, r, env),
            None => Ok(None),
        };
    }
    let each = |inner: &Sel| -> Result<Vec<Cow<'r, [u8]>>, QueryError> {
        let mut out = Vec::new();
        for r in rows {
            if let Some(v) = row_cell(inner, r, env)? {
                out.push(v);
            }
        }
        Ok(out)
    };
    Ok(match sel {
        Sel::Count => Some(Cow::Owned((rows.len() as i64).to_be_bytes().to_vec())),
        Sel::CountOf(inner) => Some(Cow::Owned((each(inner)?.len() as i64).to_be_bytes().to_vec())),
        Sel::Min(inner, ty) | Sel::Max(inner, ty) => {
            let values = each(inner)?;
            let values = values.into_iter();
            if matches!(sel, Sel::Min(..)) {
                values.min_by(|a, b| types::compare::compare_serialized(ty, a, b))
            } else {
                values.max_by(|a, b| types::compare::compare_serialized(ty, a, b))
            }
        }
        Sel::Numeric(kind, inner, ty) => {
            let values = each(inner)?;
            aggregate::compute(*kind, ty, values.iter().map(|v| v.as_ref())).map(Cow::Owned)
        }
        Sel::ToJson { inner, ty } => {
            let json = types::json::to_json_function(ty, aggregate_cell(inner, rows, env)?.as_deref());
            Some(Cow::Owned(json.into_bytes()))
        }
        Sel::Cast { inner, from, to } => {
            aggregate_cell(inner, rows, env)?.and_then(|v| cast::cast(from, to, &v)).map(Cow::Owned)
        }
        Sel::Convert { inner, from, function, ty } => match aggregate_cell(inner, rows, env)? {
            Some(v) => convert(from, &v, function, ty)?.map(Cow::Owned),
            None => None,
        },
        Sel::Op { op, left, lt, right, rt } => {
            let l = aggregate_cell(left, rows, env)?;
            let r = aggregate_cell(right, rows, env)?;
            return operation(*op, (lt, l), (rt, r));
        }
        Sel::Negate(inner, ty) => value_of(ty, aggregate_cell(inner, rows, env)?)
            .and_then(|v| crate::functions::arith::negate(&v))
            .map(|v| Cow::Owned(v.to_bytes())),
        Sel::Native { function, args } => {
            let values = args.iter().map(|a| aggregate_cell(a, rows, env)).collect::<Result<Vec<_>, _>>()?;
            return native(function, values, env);
        }
        _ => None,
    })
}
