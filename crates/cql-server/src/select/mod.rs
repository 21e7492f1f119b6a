//! SELECT: restriction analysis (`plan`), reads from storage or a virtual
//! table with filtering (`reader`), paging (`paging`), and the selection
//! (`selection`: columns, writetime/ttl, token(), functions, aggregates);
//! this module runs them (`execute`) and writes the result rows.
//!
//! Invariants:
//! - Rows are produced in Cassandra's order: partitions by token (or in the
//!   order of an IN list), rows by clustering order, reversed for ORDER BY
//!   against the declared order.
//! - A paging state resumes exactly after the last row returned; a query
//!   paged to the end returns every row exactly once.
//! - A restriction Shoal cannot serve exactly is refused with Cassandra's
//!   message, never answered approximately.

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
}

mod paging;
mod plan;
mod reader;
mod selection;

use paging::*;
use plan::*;
use reader::*;
use selection::*;
pub use selection::{plan_selection, SelectionPlan};

/// `what` is the bind variable name, `clause` the clause as errors name it.
fn limit_value(term: &Option<Term>, what: &str, clause: &str, ctx: &BindCtx<'_>) -> Result<Option<u32>, QueryError> {
    let Some(t) = term else { return Ok(None) };
    match eval_value(t, &Receiver { name: what, ty: &CqlType::Int }, ctx)? {
        Some(Value::Int(n)) if n > 0 => Ok(Some(n as u32)),
        Some(Value::Int(_)) => Err(QueryError::Invalid(format!("{clause} must be strictly positive"))),
        _ => Err(QueryError::Invalid(format!("Invalid null value of {what}"))),
    }
}

/// Executes a SELECT.
pub fn execute(
    proc: &Processor,
    schema: &Schema,
    session_keyspace: Option<&str>,
    select: &ast::Select,
    ctx: &BindCtx<'_>,
    page: &Page<'_>,
) -> Result<ResultBody, QueryError> {
    let (keyspace, table) = common::resolve_table(schema, &select.table, session_keyspace)?;
    if select.json {
        return Err(QueryError::invalid("SELECT JSON is not supported yet"));
    }
    if !select.group_by.is_empty() {
        return Err(QueryError::invalid("GROUP BY is not supported yet"));
    }
    let selection = plan_selection(table, select)?;
    let plan = plan_read(table, select, ctx)?;
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
        if keys.len() > 1 && !aggregate {
            return Err(QueryError::invalid("Cannot page queries with both ORDER BY and a IN restriction on the partition key; you must either remove the ORDER BY or the IN and sort client side, or disable paging for this query"));
        }
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
        now: proc.clock.now_seconds(),
    };
    let (mut rows, next) = reader.read(&mut position, page_rows)?;
    // A LIMIT used up ends the query, whatever is left in storage.
    let next = next.filter(|p| p.remaining > 0);
    if sort_in_memory {
        let cks: Vec<(usize, CqlType)> = table.clustering().map(|c| (c.position as usize, c.ty.clone())).collect();
        let reversed = plan.reversed;
        let table_orders: Vec<bool> = table.clustering().map(|c| c.order == ClusteringOrder::Desc).collect();
        rows.sort_by(|a, b| {
            for (pos, ty) in &cks {
                let o = types::compare::compare_serialized(ty, &a.clustering[*pos], &b.clustering[*pos]);
                let o = if table_orders[*pos] { o.reverse() } else { o };
                if o != CmpOrdering::Equal {
                    return if reversed { o.reverse() } else { o };
                }
            }
            CmpOrdering::Equal
        });
    }

    let mut metadata = RowsMetadata::new(selection.specs.clone());
    if page.skip_metadata {
        metadata = metadata.without_column_specs();
    }
    let mut writer = RowsWriter::new(selection.sels.len());
    if aggregate {
        write_aggregate(table, &selection, &rows, &mut writer);
    } else {
        for row in &rows {
            write_row(table, &selection, row, &mut writer);
        }
        if let Some(next) = next {
            metadata = metadata.with_paging_state(Some(next.encode()));
        }
    }
    Ok(ResultBody::Rows(writer.finish(metadata)))
}

fn write_row(table: &TableDef, selection: &SelectionPlan, row: &RowData, w: &mut RowsWriter) {
    for sel in &selection.sels {
        match sel {
            Sel::Column(i) => w.push_cell(row.cells[*i].as_ref().map(|c| c.value.as_slice())),
            Sel::WriteTime(i) => {
                let ts = row.cells[*i].as_ref().and_then(|c| c.timestamp);
                w.push_cell(ts.map(|t| t.to_be_bytes()).as_ref().map(|b| &b[..]))
            }
            Sel::Ttl(i) => {
                let ttl = row.cells[*i].as_ref().and_then(|c| c.ttl);
                w.push_cell(ttl.map(|t| t.to_be_bytes()).as_ref().map(|b| &b[..]))
            }
            Sel::Token => w.push_cell(Some(&row.token.to_be_bytes())),
            Sel::Convert { column, function, ty } => {
                let out = row.cells[*column]
                    .as_ref()
                    .and_then(|c| convert(&table.columns[*column].ty, &c.value, function, ty));
                w.push_cell(out.as_deref())
            }
            Sel::Count | Sel::CountColumn(_) | Sel::Min(_) | Sel::Max(_) => w.push_cell(None),
        }
    }
    w.end_row();
}

fn convert(from: &CqlType, value: &[u8], function: &str, to: &CqlType) -> Option<Vec<u8>> {
    use types::literal as lit;
    if function.ends_with("asblob") || function.starts_with("blobas") {
        return Some(value.to_vec());
    }
    let ms = match Value::deserialize(from, value).ok()? {
        Value::TimeUuid(u) => lit::timeuuid_unix_ms(&u)?,
        Value::Timestamp(ms) => ms,
        Value::Date(d) => lit::date_to_timestamp(d),
        _ => return None,
    };
    let out = match to {
        CqlType::Timestamp => Value::Timestamp(ms),
        CqlType::Date => Value::Date(lit::timestamp_to_date(ms)),
        _ => Value::BigInt(ms),
    };
    Some(out.to_bytes())
}

fn write_aggregate(table: &TableDef, selection: &SelectionPlan, rows: &[RowData], w: &mut RowsWriter) {
    for sel in &selection.sels {
        match sel {
            Sel::Count => w.push_cell(Some(&(rows.len() as i64).to_be_bytes())),
            Sel::CountColumn(i) => {
                let n = rows.iter().filter(|r| r.cells[*i].is_some()).count() as i64;
                w.push_cell(Some(&n.to_be_bytes()))
            }
            Sel::Min(i) | Sel::Max(i) => {
                let ty = &table.columns[*i].ty;
                let values = rows.iter().filter_map(|r| r.cells[*i].as_ref().map(|c| c.value.as_slice()));
                let best = if matches!(sel, Sel::Min(_)) {
                    values.min_by(|a, b| types::compare::compare_serialized(ty, a, b))
                } else {
                    values.max_by(|a, b| types::compare::compare_serialized(ty, a, b))
                };
                w.push_cell(best)
            }
            Sel::Column(i) => w.push_cell(rows.first().and_then(|r| r.cells[*i].as_ref()).map(|c| c.value.as_slice())),
            _ => w.push_cell(None),
        }
    }
    w.end_row();
}
