//! SELECT: restriction analysis, reads from storage (or a virtual table),
//! filtering, paging, and the selection (columns, writetime/ttl, token(),
//! functions, aggregates).
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

const FILTERING: &str = "Cannot execute this query as it might involve data filtering and thus may have unpredictable performance. If you want to execute this query despite the performance unpredictability, use ALLOW FILTERING";

/// Paging and output options of one execution.
pub struct Page<'a> {
    pub consistency: types::Consistency,
    pub page_size: Option<usize>,
    pub paging_state: Option<&'a [u8]>,
    pub skip_metadata: bool,
}

/// One output column.
#[derive(Clone, Debug)]
enum Sel {
    Column(usize),
    WriteTime(usize),
    Ttl(usize),
    Token,
    Count,
    CountColumn(usize),
    Min(usize),
    Max(usize),
    /// A native function of one column converting its value (toTimestamp, ...).
    Convert {
        column: usize,
        function: String,
        ty: CqlType,
    },
}

impl Sel {
    fn is_aggregate(&self) -> bool {
        matches!(self, Sel::Count | Sel::CountColumn(_) | Sel::Min(_) | Sel::Max(_))
    }
}

/// The selection of a statement: output columns and their specs.
pub struct SelectionPlan {
    sels: Vec<Sel>,
    pub specs: Vec<ColumnSpec>,
}

fn spec(table: &TableDef, name: String, ty: CqlType) -> ColumnSpec {
    ColumnSpec { keyspace: table.keyspace.clone(), table: table.name.clone(), name, ty }
}

/// Resolves the selection (also used by PREPARE for result metadata).
pub fn plan_selection(table: &TableDef, select: &ast::Select) -> Result<SelectionPlan, QueryError> {
    let mut sels = Vec::new();
    let mut specs = Vec::new();
    match &select.selection {
        Selection::Wildcard => {
            for (i, c) in table.columns.iter().enumerate() {
                sels.push(Sel::Column(i));
                specs.push(spec(table, c.name.clone(), c.ty.clone()));
            }
        }
        Selection::Selectors(list) => {
            for s in list {
                let (sel, name, ty) = plan_selector(table, &s.expr)?;
                sels.push(sel);
                specs.push(spec(table, s.alias.clone().unwrap_or(name), ty));
            }
        }
    }
    if sels.iter().any(Sel::is_aggregate) && !sels.iter().all(|s| s.is_aggregate() || matches!(s, Sel::Column(_))) {
        return Err(QueryError::Invalid("Cannot mix aggregate and non-aggregate selectors other than columns".into()));
    }
    Ok(SelectionPlan { sels, specs })
}

fn column_arg(table: &TableDef, expr: &SelectorExpr, what: &str) -> Result<usize, QueryError> {
    match expr {
        SelectorExpr::Column(name) => Ok(common::column(table, name)?.0),
        _ => Err(QueryError::Invalid(format!("Only column names are supported as arguments of {what}"))),
    }
}

fn plan_selector(table: &TableDef, expr: &SelectorExpr) -> Result<(Sel, String, CqlType), QueryError> {
    match expr {
        SelectorExpr::Column(name) => {
            let (i, c) = common::column(table, name)?;
            Ok((Sel::Column(i), c.name.clone(), c.ty.clone()))
        }
        SelectorExpr::CountRows => Ok((Sel::Count, "count".into(), CqlType::BigInt)),
        SelectorExpr::CellMetadata { kind, target } => {
            let i = column_arg(table, target, "writetime/ttl")?;
            let c = &table.columns[i];
            let fname = match kind {
                CellMetadataKind::WriteTime => "writetime",
                CellMetadataKind::MaxWriteTime => "maxwritetime",
                CellMetadataKind::Ttl => "ttl",
            };
            if matches!(c.kind, ColumnKind::PartitionKey | ColumnKind::Clustering) {
                return Err(QueryError::Invalid(format!(
                    "Cannot use selection function {fname} on PRIMARY KEY part {}",
                    c.name
                )));
            }
            if c.ty.is_multi_cell() && !matches!(kind, CellMetadataKind::MaxWriteTime) {
                return Err(QueryError::Invalid(format!(
                    "Cannot use selection function {fname} on non-frozen collection {}",
                    c.name
                )));
            }
            match kind {
                CellMetadataKind::Ttl => Ok((Sel::Ttl(i), format!("ttl({})", c.name), CqlType::Int)),
                _ => Ok((Sel::WriteTime(i), format!("{fname}({})", c.name), CqlType::BigInt)),
            }
        }
        SelectorExpr::FunctionCall { function, args } => {
            let fname = function.name.to_ascii_lowercase();
            match fname.as_str() {
                "token" => {
                    let pk: Vec<&str> = table.partition_key().map(|c| c.name.as_str()).collect();
                    let given: Vec<String> = args
                        .iter()
                        .map(|a| match a {
                            SelectorExpr::Column(n) => Ok(n.clone()),
                            _ => Err(QueryError::invalid("token() takes the partition key columns")),
                        })
                        .collect::<Result<_, _>>()?;
                    if given.iter().map(String::as_str).collect::<Vec<_>>() != pk {
                        return Err(QueryError::Invalid(format!(
                            "Type error: the token function arguments must be the partition key columns in order: {}",
                            pk.join(", ")
                        )));
                    }
                    Ok((Sel::Token, format!("system.token({})", pk.join(", ")), CqlType::BigInt))
                }
                "count" => {
                    let i = column_arg(
                        table,
                        args.first().ok_or_else(|| QueryError::invalid("count() needs an argument"))?,
                        "count",
                    )?;
                    Ok((Sel::CountColumn(i), format!("system.count({})", table.columns[i].name), CqlType::BigInt))
                }
                "min" | "max" => {
                    let i = column_arg(
                        table,
                        args.first().ok_or_else(|| QueryError::invalid("min/max need an argument"))?,
                        &fname,
                    )?;
                    let c = &table.columns[i];
                    let sel = if fname == "min" { Sel::Min(i) } else { Sel::Max(i) };
                    Ok((sel, format!("system.{fname}({})", c.name), c.ty.clone()))
                }
                "writetime" | "ttl" => {
                    let kind = if fname == "ttl" { CellMetadataKind::Ttl } else { CellMetadataKind::WriteTime };
                    let target =
                        args.first().cloned().ok_or_else(|| QueryError::invalid("writetime/ttl need an argument"))?;
                    plan_selector(table, &SelectorExpr::CellMetadata { kind, target: Box::new(target) })
                }
                "totimestamp" | "todate" | "tounixtimestamp" | "dateof" | "unixtimestampof" => {
                    let i = column_arg(
                        table,
                        args.first().ok_or_else(|| QueryError::invalid("function needs an argument"))?,
                        &fname,
                    )?;
                    let c = &table.columns[i];
                    if !matches!(c.ty, CqlType::TimeUuid | CqlType::Timestamp | CqlType::Date) {
                        return Err(QueryError::Invalid(format!(
                            "Type error: {} cannot be passed as argument 0 of function system.{fname} of type timeuuid",
                            c.name
                        )));
                    }
                    let ty = match fname.as_str() {
                        "totimestamp" | "dateof" => CqlType::Timestamp,
                        "todate" => CqlType::Date,
                        _ => CqlType::BigInt,
                    };
                    Ok((
                        Sel::Convert { column: i, function: fname.clone(), ty: ty.clone() },
                        format!("system.{fname}({})", c.name),
                        ty,
                    ))
                }
                other if other.ends_with("asblob") || other.starts_with("blobas") => {
                    let i = column_arg(
                        table,
                        args.first().ok_or_else(|| QueryError::invalid("function needs an argument"))?,
                        other,
                    )?;
                    let ty = if other.ends_with("asblob") {
                        CqlType::Blob
                    } else {
                        CqlType::from_simple_name(&other[6..])
                            .ok_or_else(|| QueryError::Invalid(format!("Unknown function {other}")))?
                    };
                    let name = format!("system.{other}({})", table.columns[i].name);
                    Ok((Sel::Convert { column: i, function: other.to_string(), ty: ty.clone() }, name, ty))
                }
                other => Err(QueryError::Invalid(format!("Unknown function '{other}'"))),
            }
        }
        SelectorExpr::Cast { .. } => Err(QueryError::invalid("CAST in the selection is not supported yet")),
        _ => Err(QueryError::invalid("This selector is not supported yet")),
    }
}

/// A restriction on one column evaluated after the read (ALLOW FILTERING,
/// virtual tables).
#[derive(Debug)]
struct Filter {
    column: usize,
    op: Operator,
    /// For IN: several values; otherwise one.
    values: Vec<Vec<u8>>,
}

enum PartitionPlan {
    /// Exactly these partition keys (components per key), in this order.
    Keys(Vec<Vec<Bytes>>),
    /// A token range, `(token, inclusive)` ends.
    Range { start: Option<(i64, bool)>, end: Option<(i64, bool)> },
}

struct ReadPlan {
    partitions: PartitionPlan,
    ranges: Vec<(ClusteringBound, ClusteringBound)>,
    clustering_restricted: bool,
    filters: Vec<Filter>,
    reversed: bool,
}

fn bytes_of(b: Bound, col: &str) -> Result<Bytes, QueryError> {
    match b {
        Bound::Value(v) => Ok(v),
        Bound::Null => Err(QueryError::Invalid(format!("Invalid null value in condition for column {col}"))),
        Bound::Unset => Err(QueryError::Invalid(format!("Invalid unset value for column {col}"))),
    }
}

/// The candidate values of `col = x` or `col IN (...)`.
fn relation_values(rel: &ast::Relation, name: &str, ty: &CqlType, ctx: &BindCtx<'_>) -> Result<Vec<Bytes>, QueryError> {
    let r = Receiver { name, ty };
    match rel.op {
        Operator::In => match &rel.rhs {
            Term::List(items) | Term::Tuple(items) => items.iter().map(|t| bytes_of(eval(t, &r, ctx)?, name)).collect(),
            Term::Bind(_) => {
                let list_ty = CqlType::List { elem: Box::new(ty.clone()), frozen: true };
                let lr = Receiver { name, ty: &list_ty };
                match eval_value(&rel.rhs, &lr, ctx)? {
                    Some(Value::List(items)) => Ok(items.into_iter().map(|v| Bytes::from(v.to_bytes())).collect()),
                    _ => Err(QueryError::Invalid(format!("Invalid null value for IN restriction on {name}"))),
                }
            }
            _ => Err(QueryError::Invalid(format!("Invalid IN restriction on {name}"))),
        },
        _ => Ok(vec![bytes_of(eval(&rel.rhs, &r, ctx)?, name)?]),
    }
}

fn sort_dedup(ty: &CqlType, values: &mut Vec<Bytes>, desc: bool) {
    values.sort_by(|a, b| {
        let o = types::compare::compare_serialized(ty, a, b);
        if desc {
            o.reverse()
        } else {
            o
        }
    });
    values.dedup();
}

fn token_value(rel: &ast::Relation, ctx: &BindCtx<'_>) -> Result<i64, QueryError> {
    let r = Receiver { name: "partition key token", ty: &CqlType::BigInt };
    match eval_value(&rel.rhs, &r, ctx)? {
        Some(Value::BigInt(t)) => Ok(t),
        _ => Err(QueryError::invalid("Invalid null value for the partition key token")),
    }
}

fn plan_read(table: &TableDef, select: &ast::Select, ctx: &BindCtx<'_>) -> Result<ReadPlan, QueryError> {
    let pk_len = table.partition_key_len();
    let ck_cols: Vec<(usize, &types::schema::ColumnDef)> =
        table.columns.iter().enumerate().filter(|(_, c)| c.kind == ColumnKind::Clustering).collect();
    let mut pk_values: Vec<Option<Vec<Bytes>>> = vec![None; pk_len];
    let mut token_start: Option<(i64, bool)> = None;
    let mut token_end: Option<(i64, bool)> = None;
    let mut ck_eq: Vec<Option<Vec<Bytes>>> = vec![None; ck_cols.len()];
    let mut ck_slice: Vec<(ValueBound, ValueBound)> = vec![(None, None); ck_cols.len()];
    let mut multi: Option<(PrefixBound, PrefixBound)> = None;
    let mut multi_eq: Option<Vec<Vec<Bytes>>> = None;
    let mut filters = Vec::new();

    for rel in &select.where_clause {
        match &rel.lhs {
            RelationLhs::Column(name) => {
                let (i, c) = common::column(table, name)?;
                match (c.kind, rel.op) {
                    (ColumnKind::PartitionKey, Operator::Eq | Operator::In) => {
                        let vals = relation_values(rel, name, &c.ty, ctx)?;
                        pk_values[c.position as usize] = Some(vals);
                    }
                    (ColumnKind::PartitionKey, _) if !select.allow_filtering => {
                        return Err(QueryError::invalid(
                            "Only EQ and IN relation are supported on the partition key (unless you use the token() function or allow filtering)",
                        ))
                    }
                    (ColumnKind::Clustering, Operator::Eq | Operator::In) => {
                        ck_eq[c.position as usize] = Some(relation_values(rel, name, &c.ty, ctx)?);
                    }
                    (ColumnKind::Clustering, Operator::Gt | Operator::Gte | Operator::Lt | Operator::Lte) => {
                        let v = bytes_of(eval(&rel.rhs, &Receiver { name, ty: &c.ty }, ctx)?, name)?;
                        let slot = &mut ck_slice[c.position as usize];
                        match rel.op {
                            Operator::Gt => slot.0 = Some((v, false)),
                            Operator::Gte => slot.0 = Some((v, true)),
                            Operator::Lt => slot.1 = Some((v, false)),
                            _ => slot.1 = Some((v, true)),
                        }
                    }
                    (_, op) => {
                        if !select.allow_filtering && !system::is_virtual(&table.keyspace) {
                            return Err(QueryError::Invalid(FILTERING.into()));
                        }
                        let values = match op {
                            Operator::In => relation_values(rel, name, &c.ty, ctx)?.into_iter().map(|b| b.to_vec()).collect(),
                            Operator::Contains => {
                                let elem = match &c.ty {
                                    CqlType::List { elem, .. } | CqlType::Set { elem, .. } => (**elem).clone(),
                                    CqlType::Map { value, .. } => (**value).clone(),
                                    _ => return Err(QueryError::Invalid(format!("Cannot use CONTAINS on non-collection column {name}"))),
                                };
                                vec![bytes_of(eval(&rel.rhs, &Receiver { name, ty: &elem }, ctx)?, name)?.to_vec()]
                            }
                            Operator::ContainsKey => {
                                let CqlType::Map { key, .. } = &c.ty else {
                                    return Err(QueryError::Invalid(format!("Cannot use CONTAINS KEY on non-map column {name}")));
                                };
                                vec![bytes_of(eval(&rel.rhs, &Receiver { name, ty: key }, ctx)?, name)?.to_vec()]
                            }
                            Operator::Eq | Operator::Neq | Operator::Lt | Operator::Lte | Operator::Gt | Operator::Gte => {
                                vec![bytes_of(eval(&rel.rhs, &Receiver { name, ty: &c.ty }, ctx)?, name)?.to_vec()]
                            }
                            other => return Err(QueryError::Invalid(format!("Unsupported restriction {other:?} on column {name}"))),
                        };
                        filters.push(Filter { column: i, op, values });
                    }
                }
            }
            RelationLhs::Token(cols) => {
                let pk: Vec<&str> = table.partition_key().map(|c| c.name.as_str()).collect();
                if cols.iter().map(String::as_str).collect::<Vec<_>>() != pk {
                    return Err(QueryError::Invalid(format!(
                        "The token function arguments must be in the partition key order: {}",
                        pk.join(", ")
                    )));
                }
                let t = token_value(rel, ctx)?;
                match rel.op {
                    Operator::Gt => token_start = Some((t, false)),
                    Operator::Gte => token_start = Some((t, true)),
                    Operator::Lt => token_end = Some((t, false)),
                    Operator::Lte => token_end = Some((t, true)),
                    Operator::Eq => {
                        token_start = Some((t, true));
                        token_end = Some((t, true));
                    }
                    _ => return Err(QueryError::invalid("Only EQ and slice relations are supported on token()")),
                }
            }
            RelationLhs::MultiColumn(names) => {
                let cols: Vec<&types::schema::ColumnDef> =
                    names.iter().map(|n| common::column(table, n).map(|(_, c)| c)).collect::<Result<_, _>>()?;
                for (pos, c) in cols.iter().enumerate() {
                    if c.kind != ColumnKind::Clustering || c.position as usize != pos {
                        return Err(QueryError::Invalid(format!(
                            "Multi-column relations can only be applied to clustering columns in order, starting from the first; got {}",
                            names.join(", ")
                        )));
                    }
                }
                let tuple_values = |term: &Term| -> Result<Vec<Bytes>, QueryError> {
                    let items = match term {
                        Term::Tuple(items) => items,
                        _ => return Err(QueryError::invalid("Multi-column relations need a tuple of values")),
                    };
                    if items.len() != cols.len() {
                        return Err(QueryError::Invalid(format!(
                            "Expected {} elements in value tuple, but got {}",
                            cols.len(),
                            items.len()
                        )));
                    }
                    items
                        .iter()
                        .zip(&cols)
                        .map(|(t, c)| bytes_of(eval(t, &Receiver { name: &c.name, ty: &c.ty }, ctx)?, &c.name))
                        .collect()
                };
                match rel.op {
                    Operator::Eq => multi_eq = Some(vec![tuple_values(&rel.rhs)?]),
                    Operator::In => {
                        let Term::List(items) = &rel.rhs else {
                            return Err(QueryError::invalid(
                                "IN with a bind marker for a multi-column relation is not supported yet",
                            ));
                        };
                        multi_eq = Some(items.iter().map(tuple_values).collect::<Result<_, _>>()?);
                    }
                    Operator::Gt | Operator::Gte | Operator::Lt | Operator::Lte => {
                        let orders: Vec<ClusteringOrder> = cols.iter().map(|c| c.order).collect();
                        if orders.iter().any(|o| *o != orders[0]) {
                            return Err(QueryError::invalid(
                                "Multi-column slices over clustering columns of mixed ASC/DESC order are not supported yet",
                            ));
                        }
                        let v = tuple_values(&rel.rhs)?;
                        let m = multi.get_or_insert((None, None));
                        match rel.op {
                            Operator::Gt => m.0 = Some((v, false)),
                            Operator::Gte => m.0 = Some((v, true)),
                            Operator::Lt => m.1 = Some((v, false)),
                            _ => m.1 = Some((v, true)),
                        }
                    }
                    _ => return Err(QueryError::invalid("Unsupported operator in a multi-column relation")),
                }
            }
            RelationLhs::MapElement { column, .. } => {
                return Err(QueryError::Invalid(format!(
                    "Restrictions on map elements ({column}[...]) are not supported yet"
                )))
            }
        }
    }

    // Partition: all key columns by = / IN, a token range, or a full scan.
    let restricted_pk = pk_values.iter().filter(|v| v.is_some()).count();
    let partitions = if restricted_pk == pk_len {
        let mut keys: Vec<Vec<Bytes>> = vec![Vec::new()];
        for (i, vals) in pk_values.into_iter().enumerate() {
            let mut vals = vals.unwrap_or_default();
            let ty = &table.partition_key().nth(i).map(|c| c.ty.clone()).unwrap_or(CqlType::Blob);
            dedup_keep_order(&mut vals);
            let _ = ty;
            let mut next = Vec::with_capacity(keys.len() * vals.len());
            for k in &keys {
                for v in &vals {
                    let mut k2 = k.clone();
                    k2.push(v.clone());
                    next.push(k2);
                }
            }
            keys = next;
        }
        PartitionPlan::Keys(keys)
    } else {
        if restricted_pk > 0 {
            if !select.allow_filtering {
                return Err(QueryError::Invalid(FILTERING.into()));
            }
            for (pos, vals) in pk_values.into_iter().enumerate() {
                if let Some(vals) = vals {
                    let col = table
                        .columns
                        .iter()
                        .position(|c| c.kind == ColumnKind::PartitionKey && c.position as usize == pos)
                        .unwrap_or(0);
                    filters.push(Filter {
                        column: col,
                        op: Operator::In,
                        values: vals.into_iter().map(|b| b.to_vec()).collect(),
                    });
                }
            }
        }
        PartitionPlan::Range { start: token_start, end: token_end }
    };

    // Clustering: = / IN on a prefix, then at most one slice.
    let mut ranges = Vec::new();
    let mut clustering_restricted = false;
    if let Some(eqs) = multi_eq {
        clustering_restricted = true;
        for tuple in eqs {
            let b = ClusteringBound { prefix: tuple, inclusive: true };
            ranges.push((b.clone(), b));
        }
        if ck_cols.first().map(|(_, c)| c.order == ClusteringOrder::Desc).unwrap_or(false) {
            ranges.reverse();
        }
    } else if let Some((start, end)) = multi {
        clustering_restricted = true;
        let desc = ck_cols.first().map(|(_, c)| c.order == ClusteringOrder::Desc).unwrap_or(false);
        let to_bound = |b: Option<(Vec<Bytes>, bool)>| match b {
            Some((p, incl)) => ClusteringBound { prefix: p, inclusive: incl },
            None => ClusteringBound::unbounded(),
        };
        let (s, e) = (to_bound(start), to_bound(end));
        ranges.push(if desc { (e, s) } else { (s, e) });
    } else {
        let mut prefixes: Vec<Vec<Bytes>> = vec![Vec::new()];
        let mut slice: Option<(usize, (ValueBound, ValueBound))> = None;
        let mut unrestricted_at: Option<usize> = None;
        for (pos, (_, c)) in ck_cols.iter().enumerate() {
            let has_eq = ck_eq[pos].is_some();
            let has_slice = ck_slice[pos].0.is_some() || ck_slice[pos].1.is_some();
            if !has_eq && !has_slice {
                unrestricted_at.get_or_insert(pos);
                continue;
            }
            if let Some(prev) = unrestricted_at {
                if !select.allow_filtering {
                    return Err(QueryError::Invalid(format!(
                        "PRIMARY KEY column \"{}\" cannot be restricted as preceding column \"{}\" is not restricted",
                        c.name, ck_cols[prev].1.name
                    )));
                }
                push_ck_filters(&mut filters, ck_cols[pos].0, ck_eq[pos].take(), ck_slice[pos].clone());
                continue;
            }
            if let Some((spos, _)) = slice {
                if !select.allow_filtering {
                    return Err(QueryError::Invalid(format!(
                        "Clustering column \"{}\" cannot be restricted (preceding column \"{}\" is restricted by a non-EQ relation)",
                        c.name, ck_cols[spos].1.name
                    )));
                }
                push_ck_filters(&mut filters, ck_cols[pos].0, ck_eq[pos].take(), ck_slice[pos].clone());
                continue;
            }
            clustering_restricted = true;
            if let Some(mut vals) = ck_eq[pos].take() {
                if has_slice {
                    return Err(QueryError::Invalid(format!(
                        "Column \"{}\" cannot be restricted by both an equality and an inequality relation",
                        c.name
                    )));
                }
                sort_dedup(&c.ty, &mut vals, c.order == ClusteringOrder::Desc);
                let mut next = Vec::with_capacity(prefixes.len() * vals.len());
                for p in &prefixes {
                    for v in &vals {
                        let mut p2 = p.clone();
                        p2.push(v.clone());
                        next.push(p2);
                    }
                }
                prefixes = next;
            } else {
                slice = Some((pos, ck_slice[pos].clone()));
            }
        }
        if clustering_restricted {
            for p in prefixes {
                match &slice {
                    None => {
                        let b = ClusteringBound { prefix: p.clone(), inclusive: true };
                        ranges.push((b.clone(), b));
                    }
                    Some((pos, (lo, hi))) => {
                        let desc = ck_cols[*pos].1.order == ClusteringOrder::Desc;
                        let make = |v: &Option<(Bytes, bool)>| match v {
                            Some((b, incl)) => {
                                let mut prefix = p.clone();
                                prefix.push(b.clone());
                                ClusteringBound { prefix, inclusive: *incl }
                            }
                            None => ClusteringBound { prefix: p.clone(), inclusive: true },
                        };
                        let (s, e) = (make(lo), make(hi));
                        ranges.push(if desc { (e, s) } else { (s, e) });
                    }
                }
            }
        }
    }

    // ORDER BY: the clustering order or its reverse.
    let mut reversed = false;
    if !select.order_by.is_empty() {
        if !matches!(partitions, PartitionPlan::Keys(_)) {
            return Err(QueryError::invalid(
                "ORDER BY is only supported when the partition key is restricted by an EQ or an IN.",
            ));
        }
        let mut direction: Option<bool> = None;
        for (i, o) in select.order_by.iter().enumerate() {
            let (_, c) = common::column(table, &o.column)?;
            if c.kind != ColumnKind::Clustering {
                return Err(QueryError::Invalid(format!(
                    "Order by is currently only supported on the clustered columns of the PRIMARY KEY, got {}",
                    c.name
                )));
            }
            if c.position as usize != i {
                return Err(QueryError::invalid("Order by currently only support the ordering of columns following their declared order in the PRIMARY KEY"));
            }
            let declared_desc = c.order == ClusteringOrder::Desc;
            let wanted_desc = o.order == ast::Order::Desc;
            let rev = declared_desc != wanted_desc;
            if direction.map(|d| d != rev).unwrap_or(false) {
                return Err(QueryError::invalid("Unsupported order by relation"));
            }
            direction = Some(rev);
        }
        reversed = direction.unwrap_or(false);
    }
    Ok(ReadPlan { partitions, ranges, clustering_restricted, filters, reversed })
}

fn dedup_keep_order(vals: &mut Vec<Bytes>) {
    let mut seen = Vec::new();
    vals.retain(|v| {
        if seen.contains(v) {
            false
        } else {
            seen.push(v.clone());
            true
        }
    });
}

fn push_ck_filters(filters: &mut Vec<Filter>, column: usize, eq: Option<Vec<Bytes>>, slice: (ValueBound, ValueBound)) {
    if let Some(vals) = eq {
        filters.push(Filter { column, op: Operator::In, values: vals.into_iter().map(|b| b.to_vec()).collect() });
    }
    if let Some((v, incl)) = slice.0 {
        filters.push(Filter { column, op: if incl { Operator::Gte } else { Operator::Gt }, values: vec![v.to_vec()] });
    }
    if let Some((v, incl)) = slice.1 {
        filters.push(Filter { column, op: if incl { Operator::Lte } else { Operator::Lt }, values: vec![v.to_vec()] });
    }
}

/// One logical result row before selection: every column's value by index.
struct RowData {
    token: i64,
    clustering: Vec<Vec<u8>>,
    cells: Vec<Option<CellOut>>,
}

fn passes(table: &TableDef, filters: &[Filter], row: &RowData) -> bool {
    filters.iter().all(|f| {
        let ty = &table.columns[f.column].ty;
        let Some(cell) = &row.cells[f.column] else { return false };
        let v = cell.value.as_slice();
        let cmp = |x: &[u8]| types::compare::compare_serialized(ty, v, x);
        match f.op {
            Operator::Eq => cmp(&f.values[0]) == CmpOrdering::Equal,
            Operator::Neq => cmp(&f.values[0]) != CmpOrdering::Equal,
            Operator::In => f.values.iter().any(|x| cmp(x) == CmpOrdering::Equal),
            Operator::Lt => cmp(&f.values[0]) == CmpOrdering::Less,
            Operator::Lte => cmp(&f.values[0]) != CmpOrdering::Greater,
            Operator::Gt => cmp(&f.values[0]) == CmpOrdering::Greater,
            Operator::Gte => cmp(&f.values[0]) != CmpOrdering::Less,
            Operator::Contains | Operator::ContainsKey => contains(ty, v, &f.values[0], f.op == Operator::ContainsKey),
            _ => false,
        }
    })
}

fn contains(ty: &CqlType, collection: &[u8], needle: &[u8], key: bool) -> bool {
    let Ok(value) = Value::deserialize(ty, collection) else { return false };
    let elem_ty = match ty {
        CqlType::List { elem, .. } | CqlType::Set { elem, .. } => (**elem).clone(),
        CqlType::Map { key: k, value: v, .. } => {
            if key {
                (**k).clone()
            } else {
                (**v).clone()
            }
        }
        _ => return false,
    };
    let Ok(needle) = Value::deserialize(&elem_ty, needle) else { return false };
    match value {
        Value::List(items) | Value::Set(items) => items.contains(&needle),
        Value::Map(pairs) => pairs.iter().any(|(k, v)| if key { *k == needle } else { *v == needle }),
        _ => false,
    }
}

/// Partition keys asked of the data plane at a time by a range scan.
const SCAN_BATCH: usize = 64;

/// The inclusive token interval of a Range plan's bounds (`(token, inclusive)`),
/// or `None` when it is empty.
fn token_bounds(start: &Option<(i64, bool)>, end: &Option<(i64, bool)>) -> Option<(i64, i64)> {
    let lo = match *start {
        Some((t, true)) => t,
        Some((t, false)) => t.checked_add(1)?,
        None => i64::MIN,
    };
    let hi = match *end {
        Some((t, true)) => t,
        Some((t, false)) => t.checked_sub(1)?,
        None => i64::MAX,
    };
    (lo <= hi).then_some((lo, hi))
}

/// Where a paged read resumes.
#[derive(Clone, Debug, Default, PartialEq)]
struct Position {
    /// Index into the key list (Keys plans) or the virtual rows.
    index: u32,
    token: i64,
    partition_key: Vec<u8>,
    /// Last clustering returned in that partition (`None`: start of partition).
    after: Option<Vec<Vec<u8>>>,
    /// Rows already returned from that partition (PER PARTITION LIMIT).
    in_partition: u32,
    /// Rows still allowed by LIMIT.
    remaining: u32,
    /// The static-only row of that partition was returned.
    started: bool,
    /// Every row of that partition was returned: a Range plan resumes at the
    /// next partition, never inside this one again.
    done: bool,
}

impl Position {
    /// The first byte of an encoded state; states of another format are refused.
    const FORMAT: u8 = 2;

    /// Moves to the start of the partition `key` at `token`.
    fn enter(&mut self, token: i64, key: Vec<u8>) {
        self.token = token;
        self.partition_key = key;
        self.after = None;
        self.in_partition = 0;
        self.started = false;
        self.done = false;
    }

    fn encode(&self) -> Bytes {
        let mut b = BytesMut::new();
        b.put_u8(Self::FORMAT);
        b.put_u32(self.index);
        b.put_i64(self.token);
        b.put_u32(self.partition_key.len() as u32);
        b.put_slice(&self.partition_key);
        match &self.after {
            None => b.put_u8(0),
            Some(c) => {
                b.put_u8(1);
                b.put_u16(c.len() as u16);
                for v in c {
                    b.put_u32(v.len() as u32);
                    b.put_slice(v);
                }
            }
        }
        b.put_u32(self.in_partition);
        b.put_u32(self.remaining);
        b.put_u8(self.started as u8 | (self.done as u8) << 1);
        b.freeze()
    }

    fn decode(b: &[u8]) -> Option<Position> {
        Self::read(&mut ByteReader::new(b, ())).ok()
    }

    fn read(r: &mut ByteReader<'_, ()>) -> Result<Position, ()> {
        if r.u8()? != Self::FORMAT {
            return Err(());
        }
        let index = r.u32()?;
        let token = r.i64()?;
        let partition_key = r.blob()?.to_vec();
        let after = match r.u8()? {
            0 => None,
            _ => {
                let n = r.u16()?;
                let mut c = Vec::new();
                for _ in 0..n {
                    c.push(r.blob()?.to_vec());
                }
                Some(c)
            }
        };
        let in_partition = r.u32()?;
        let remaining = r.u32()?;
        let flags = r.u8()?;
        if !r.is_empty() || flags > 3 {
            return Err(());
        }
        let (started, done) = (flags & 1 != 0, flags & 2 != 0);
        Ok(Position { index, token, partition_key, after, in_partition, remaining, started, done })
    }
}

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

struct Reader<'a> {
    proc: &'a Processor,
    schema: &'a Schema,
    keyspace: &'a types::schema::KeyspaceDef,
    consistency: types::Consistency,
    table: &'a TableDef,
    plan: &'a ReadPlan,
    per_partition: Option<u32>,
    distinct: bool,
    now: i32,
}

impl Reader<'_> {
    /// Reads up to `max_rows` result rows from `pos`; returns them and the
    /// position to resume from when more may follow.
    fn read(&self, pos: &mut Position, max_rows: usize) -> Result<(Vec<RowData>, Option<Position>), QueryError> {
        if system::is_virtual(&self.table.keyspace) {
            return self.read_virtual(pos, max_rows);
        }
        let mut out = Vec::new();
        let want = |out: &Vec<RowData>, pos: &Position| max_rows.saturating_sub(out.len()).min(pos.remaining as usize);
        match &self.plan.partitions {
            PartitionPlan::Keys(keys) => {
                while (pos.index as usize) < keys.len() {
                    if want(&out, pos) == 0 {
                        return Ok((out, Some(pos.clone())));
                    }
                    let key = common::compose_partition_key(&keys[pos.index as usize])?;
                    if pos.partition_key != key.as_ref() {
                        pos.enter(ring::token_of(&key), key.to_vec());
                    }
                    let done = self.read_partition(pos, &mut out, max_rows)?;
                    if !done {
                        return Ok((out, Some(pos.clone())));
                    }
                    pos.index += 1;
                    pos.partition_key.clear();
                }
                Ok((out, None))
            }
            PartitionPlan::Range { start, end } => {
                // Finish the partition the previous page stopped inside.
                if !pos.partition_key.is_empty() && !pos.done {
                    if !self.read_partition(pos, &mut out, max_rows)? {
                        return Ok((out, Some(pos.clone())));
                    }
                    pos.done = true;
                }
                let Some((mut start_token, end_token)) = token_bounds(start, end) else { return Ok((out, None)) };
                // Resume strictly after the last partition of the previous page.
                let mut after_key = None;
                if !pos.partition_key.is_empty() {
                    debug_assert!(pos.done, "a Range position resumes only after a finished partition");
                    start_token = pos.token;
                    after_key = Some(pos.partition_key.clone());
                }
                if start_token > end_token {
                    return Ok((out, None));
                }
                loop {
                    if want(&out, pos) == 0 {
                        return Ok((out, Some(pos.clone())));
                    }
                    let scan = ScanRange {
                        table: self.table.id,
                        start_token,
                        after_key: after_key.clone(),
                        end_token,
                        partition_limit: SCAN_BATCH,
                        per_partition: self.partition_read(pos, 0, 0),
                        row_limit: usize::MAX,
                    };
                    let partitions = self.proc.data.scan_keys(self.keyspace, &scan, self.consistency)?;
                    if partitions.is_empty() {
                        return Ok((out, None));
                    }
                    for (token, key) in partitions {
                        if want(&out, pos) == 0 {
                            return Ok((out, Some(pos.clone())));
                        }
                        pos.enter(token, key);
                        if !self.read_partition(pos, &mut out, max_rows)? {
                            return Ok((out, Some(pos.clone())));
                        }
                        pos.done = true;
                        start_token = token;
                        after_key = Some(pos.partition_key.clone());
                    }
                }
            }
        }
    }

    fn partition_read(&self, pos: &Position, token: i64, limit: usize) -> PartitionRead {
        let mut ranges = self.plan.ranges.clone();
        if pos.after.is_some() && self.table.clustering().next().is_none() {
            // A partition without clustering columns holds one row: nothing follows it.
            ranges.clear();
        } else if let Some(after) = &pos.after {
            // Resume strictly after the last returned row, in iteration order.
            let resume =
                ClusteringBound { prefix: after.iter().map(|v| Bytes::from(v.clone())).collect(), inclusive: false };
            ranges = if ranges.is_empty() {
                vec![(ClusteringBound::unbounded(), ClusteringBound::unbounded())]
            } else {
                ranges
            };
            let layout: Vec<(CqlType, bool)> =
                self.table.clustering().map(|c| (c.ty.clone(), c.order == ClusteringOrder::Desc)).collect();
            let cmp = |a: &[Bytes], b: &[Bytes]| compare_prefix(&layout, a, b);
            let mut adjusted = Vec::new();
            for (s, e) in ranges {
                if self.plan.reversed {
                    // Keep rows before `after`.
                    if !s.prefix.is_empty() && cmp(&s.prefix, &resume.prefix) == CmpOrdering::Greater {
                        continue;
                    }
                    let end = if e.prefix.is_empty() || cmp(&e.prefix, &resume.prefix) != CmpOrdering::Less {
                        resume.clone()
                    } else {
                        e
                    };
                    adjusted.push((s, end));
                } else {
                    if !e.prefix.is_empty() && cmp(&e.prefix, &resume.prefix) == CmpOrdering::Less {
                        continue;
                    }
                    let start = if s.prefix.is_empty() || cmp(&s.prefix, &resume.prefix) != CmpOrdering::Greater {
                        resume.clone()
                    } else {
                        s
                    };
                    adjusted.push((start, e));
                }
            }
            ranges = adjusted;
        }
        PartitionRead {
            table: self.table.id,
            token,
            partition_key: pos.partition_key.clone(),
            ranges,
            reversed: self.plan.reversed,
            include_static: self.table.has_static(),
            row_limit: limit,
            now: self.now,
        }
    }

    /// Reads rows of the partition at `pos` into `out`. Returns whether the
    /// partition is finished (false: stopped because `out` is full).
    fn read_partition(&self, pos: &mut Position, out: &mut Vec<RowData>, max_rows: usize) -> Result<bool, QueryError> {
        let per_partition_left = self.per_partition.map(|p| p.saturating_sub(pos.in_partition)).unwrap_or(u32::MAX);
        let room = max_rows.saturating_sub(out.len()).min(pos.remaining as usize).min(per_partition_left as usize);
        if per_partition_left == 0 {
            return Ok(true);
        }
        if room == 0 {
            return Ok(false);
        }
        if self.plan.ranges.is_empty() && self.plan.clustering_restricted {
            return Ok(true);
        }
        let filtering = !self.plan.filters.is_empty();
        // Read one extra row to know whether the partition continues.
        let fetch = if self.distinct {
            1
        } else if filtering {
            room.saturating_add(1).max(128)
        } else {
            room.saturating_add(1)
        };
        let read = self.partition_read(pos, pos.token, fetch);
        if read.ranges.is_empty() && pos.after.is_some() {
            return Ok(true);
        }
        let Some(partition) = self.proc.data.read(self.keyspace, read, self.consistency)? else { return Ok(true) };
        let pk_parts = common::decompose_partition_key(&partition.key, self.table.partition_key_len());
        let static_row = partition.static_row.as_ref();
        if self.distinct || (partition.rows.is_empty() && !self.plan.clustering_restricted) {
            if pos.started || pos.after.is_some() {
                return Ok(true);
            }
            // A partition with only static data shows as one row (Cassandra's rule).
            if static_row.is_some() || self.distinct {
                let row = self.row_data(&partition.key, partition.token, &pk_parts, static_row, None);
                pos.started = true;
                if passes(self.table, &self.plan.filters, &row) {
                    out.push(row);
                    pos.in_partition += 1;
                    pos.remaining = pos.remaining.saturating_sub(1);
                }
            }
            return Ok(true);
        }
        let fetched = partition.rows.len();
        let mut taken = 0usize;
        for r in &partition.rows {
            let row = self.row_data(&partition.key, partition.token, &pk_parts, static_row, Some(r));
            pos.after = Some(r.clustering.clone());
            pos.started = true;
            taken += 1;
            if !passes(self.table, &self.plan.filters, &row) {
                continue;
            }
            out.push(row);
            pos.in_partition += 1;
            pos.remaining = pos.remaining.saturating_sub(1);
            let left = self.per_partition.map(|p| p.saturating_sub(pos.in_partition)).unwrap_or(u32::MAX);
            if left == 0 {
                return Ok(true);
            }
            if out.len() >= max_rows || pos.remaining == 0 {
                return Ok(taken == fetched && fetched < fetch);
            }
        }
        if fetched >= fetch {
            // More rows may remain (filtered reads go on from `after`).
            return self.read_partition(pos, out, max_rows);
        }
        Ok(true)
    }

    fn row_data(
        &self,
        key: &[u8],
        token: i64,
        pk_parts: &[Vec<u8>],
        static_row: Option<&Row>,
        row: Option<&Row>,
    ) -> RowData {
        let mut cells = Vec::with_capacity(self.table.columns.len());
        for c in &self.table.columns {
            let cell = match c.kind {
                ColumnKind::PartitionKey => pk_parts.get(c.position as usize).map(|v| CellOut::plain(v.clone())),
                ColumnKind::Clustering => {
                    row.and_then(|r| r.clustering.get(c.position as usize)).map(|v| CellOut::plain(v.clone()))
                }
                ColumnKind::Static => static_row.and_then(|s| common::stored_column(c, s, self.now)),
                ColumnKind::Regular => row.and_then(|r| common::stored_column(c, r, self.now)),
            };
            cells.push(cell);
        }
        let _ = key;
        RowData { token, clustering: row.map(|r| r.clustering.clone()).unwrap_or_default(), cells }
    }

    fn read_virtual(
        &self,
        pos: &mut Position,
        max_rows: usize,
    ) -> Result<(Vec<RowData>, Option<Position>), QueryError> {
        let all = system::rows(self.table, self.schema, &self.proc.node, &self.proc.data.peers());
        let mut filters: Vec<Filter> = Vec::new();
        // Restrictions on a virtual table are evaluated over its generated rows.
        if let PartitionPlan::Keys(keys) = &self.plan.partitions {
            let pk_cols: Vec<usize> = (0..self.table.columns.len())
                .filter(|i| self.table.columns[*i].kind == ColumnKind::PartitionKey)
                .collect();
            for (n, col) in pk_cols.iter().enumerate() {
                filters.push(Filter {
                    column: *col,
                    op: Operator::In,
                    values: keys.iter().filter_map(|k| k.get(n).map(|b| b.to_vec())).collect(),
                });
            }
        }
        let ck_cols: Vec<usize> =
            (0..self.table.columns.len()).filter(|i| self.table.columns[*i].kind == ColumnKind::Clustering).collect();
        let mut out = Vec::new();
        let rows: Vec<RowData> = all
            .into_iter()
            .map(|values| RowData {
                token: 0,
                clustering: ck_cols.iter().map(|i| values[*i].clone().unwrap_or_default()).collect(),
                cells: values.into_iter().map(|v| v.map(CellOut::plain)).collect(),
            })
            .filter(|r| passes(self.table, &filters, r) && passes(self.table, &self.plan.filters, r))
            .filter(|r| {
                self.plan.ranges.is_empty()
                    || self.plan.ranges.iter().any(|(s, e)| in_range(self.table, &r.clustering, s, e))
            })
            .collect();
        let first = pos.index as usize;
        for (index, row) in rows.into_iter().enumerate().skip(first) {
            if out.len() >= max_rows || pos.remaining == 0 {
                pos.index = index as u32;
                return Ok((out, Some(pos.clone())));
            }
            out.push(row);
            pos.remaining = pos.remaining.saturating_sub(1);
        }
        Ok((out, None))
    }
}

fn in_range(table: &TableDef, clustering: &[Vec<u8>], start: &ClusteringBound, end: &ClusteringBound) -> bool {
    let layout: Vec<(CqlType, bool)> =
        table.clustering().map(|c| (c.ty.clone(), c.order == ClusteringOrder::Desc)).collect();
    let row: Vec<Bytes> = clustering.iter().map(|v| Bytes::from(v.clone())).collect();
    let cmp_start = compare_prefix(&layout, &row[..start.prefix.len().min(row.len())], &start.prefix);
    let cmp_end = compare_prefix(&layout, &row[..end.prefix.len().min(row.len())], &end.prefix);
    let after_start = start.prefix.is_empty()
        || cmp_start == CmpOrdering::Greater
        || (cmp_start == CmpOrdering::Equal && start.inclusive);
    let before_end =
        end.prefix.is_empty() || cmp_end == CmpOrdering::Less || (cmp_end == CmpOrdering::Equal && end.inclusive);
    after_start && before_end
}

/// Compares clustering prefixes in storage order (DESC columns reversed),
/// a shorter equal prefix comparing equal.
fn compare_prefix(layout: &[(CqlType, bool)], a: &[Bytes], b: &[Bytes]) -> CmpOrdering {
    for ((x, y), (ty, desc)) in a.iter().zip(b).zip(layout) {
        let o = types::compare::compare_serialized(ty, x, y);
        let o = if *desc { o.reverse() } else { o };
        if o != CmpOrdering::Equal {
            return o;
        }
    }
    CmpOrdering::Equal
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paging_state_round_trips_and_refuses_damage() {
        let p = Position {
            index: 3,
            token: -42,
            partition_key: b"pk".to_vec(),
            after: Some(vec![b"c1".to_vec(), Vec::new()]),
            in_partition: 7,
            remaining: 9,
            started: true,
            done: true,
        };
        let bytes = p.encode();
        assert_eq!(Position::decode(&bytes), Some(p.clone()));
        let none = Position { after: None, started: false, done: false, ..p };
        assert_eq!(Position::decode(&none.encode()), Some(none));
        // Every truncation, a trailing byte, another format, unknown flags: refused.
        for cut in 0..bytes.len() {
            assert_eq!(Position::decode(&bytes[..cut]), None, "cut at {cut}");
        }
        assert_eq!(Position::decode(&[bytes.as_ref(), &[0]].concat()), None);
        let mut other = bytes.to_vec();
        other[0] = 1;
        assert_eq!(Position::decode(&other), None, "format 1 (before `done`)");
        let mut flags = bytes.to_vec();
        *flags.last_mut().unwrap() = 4;
        assert_eq!(Position::decode(&flags), None);
    }

    #[test]
    fn token_bounds_are_inclusive_and_empty_when_crossed() {
        assert_eq!(token_bounds(&None, &None), Some((i64::MIN, i64::MAX)));
        assert_eq!(token_bounds(&Some((5, false)), &Some((9, true))), Some((6, 9)));
        assert_eq!(token_bounds(&Some((5, true)), &Some((5, false))), None);
        assert_eq!(token_bounds(&Some((i64::MAX, false)), &None), None);
        assert_eq!(token_bounds(&None, &Some((i64::MIN, false))), None);
    }
}
