//! Lightweight transactions at the statement level: the `IF` clauses of
//! INSERT, UPDATE, DELETE and conditional BATCHes, bound to values
//! (`checks`), evaluated against the partition's current rows (`holds`),
//! and the `[applied]` result Cassandra answers (`result`). The Paxos
//! rounds are the data plane's (`DataPlane::cas`, `cluster::paxos`).
//!
//! Invariants:
//! - A conditional write touches one partition of one table; its update is
//!   planned at timestamp 0 and gets the ballot's time in the data plane.
//! - Conditions follow Cassandra: `=`/`!=`/`IN` compare nulls as values,
//!   the order operators are false on a null column and refuse a null
//!   operand; a condition on a missing row sees nulls.
//! - A failed write's result has `[applied]` = false and, for each row the
//!   statement conditioned that exists, the columns Cassandra shows: all
//!   of them after `IF [NOT] EXISTS`, else the conditioned ones (regular
//!   columns first, then static, each in the order first named), after the
//!   primary key in a batch.

use bytes::Bytes;
use cql::ast::{self, ConditionLhs, Operator, Term};
use cql_protocol::{ColumnSpec, Rows, RowsMetadata, RowsWriter};
use storage::{Partition, Row};
use types::compare::compare_serialized;
use types::mutation::Mutation;
use types::schema::{ColumnDef, ColumnKind, TableDef};
use types::{CqlType, Value};

use crate::bind::{eval, BindCtx, Bound, Receiver};
use crate::common;
use crate::error::QueryError;
use crate::select::compare_clustering;

/// A statement's `IF`, as the parser gives it.
#[derive(Clone, Copy)]
pub enum Clause<'a> {
    NotExists,
    Exists,
    Conditions(&'a [ast::Condition]),
}

impl<'a> Clause<'a> {
    /// The clause of an INSERT (`if_not_exists`) or an UPDATE/DELETE's `IF`.
    pub fn of(if_not_exists: bool, if_clause: Option<&'a ast::IfClause>) -> Option<Clause<'a>> {
        if if_not_exists {
            return Some(Clause::NotExists);
        }
        match if_clause? {
            ast::IfClause::Exists => Some(Clause::Exists),
            ast::IfClause::Conditions(c) => Some(Clause::Conditions(c)),
        }
    }
}

/// What one conditioned row must satisfy.
#[derive(Clone, Debug)]
enum Test {
    NotExists,
    Exists,
    Conditions(Vec<Bound1>),
}

/// One condition with its operands bound.
#[derive(Clone, Debug)]
struct Bound1 {
    column: ColumnDef,
    target: Target,
    op: Operator,
    /// One operand; several for IN (None: null).
    values: Vec<Option<Bytes>>,
}

#[derive(Clone, Debug)]
enum Target {
    Whole,
    /// `m[key]`, `l[index]` (the key or index serialized).
    Element(Bytes),
    /// `u.field`: the field's position.
    Field(usize),
}

/// A row a statement conditioned, and its test.
#[derive(Clone, Debug)]
pub struct Check {
    /// The clustering row, or `None` for the static row (a statement on
    /// static columns only).
    clustering: Option<Vec<Bytes>>,
    test: Test,
}

/// The checks of one statement on the rows of its mutation.
pub fn checks(table: &TableDef, clause: Clause<'_>, m: &Mutation, ctx: &BindCtx<'_>) -> Result<Vec<Check>, QueryError> {
    if m.partition_deletion.is_some() || !m.range_tombstones.is_empty() {
        return Err(QueryError::invalid(
            "DELETE statements must restrict all PRIMARY KEY columns with equality relations in order to delete non static columns",
        ));
    }
    let test = match clause {
        Clause::NotExists => Test::NotExists,
        Clause::Exists => Test::Exists,
        Clause::Conditions(conds) => Test::Conditions(bind(table, conds, ctx)?),
    };
    let regular: Vec<&types::mutation::RowWrite> = m.rows.iter().filter(|r| !r.is_static).collect();
    let clustering = match regular.as_slice() {
        [] if table.clustering_len() == 0 => Some(Vec::new()),
        [] => None,
        [row] => Some(row.clustering.clone()),
        _ => {
            return Err(QueryError::invalid(
                "IN on the clustering key columns is not supported with conditional updates",
            ))
        }
    };
    if clustering.is_none() {
        if let Test::Conditions(c) = &test {
            if c.iter().any(|b| b.column.kind != ColumnKind::Static) {
                let missing: Vec<&str> = table.clustering().map(|c| c.name.as_str()).collect();
                return Err(QueryError::Invalid(format!("Some clustering keys are missing: {}", missing.join(", "))));
            }
        }
    }
    Ok(vec![Check { clustering, test }])
}

fn bind(table: &TableDef, conds: &[ast::Condition], ctx: &BindCtx<'_>) -> Result<Vec<Bound1>, QueryError> {
    let mut out = Vec::with_capacity(conds.len());
    for c in conds {
        let name = match &c.lhs {
            ConditionLhs::Column(n)
            | ConditionLhs::Element { column: n, .. }
            | ConditionLhs::Field { column: n, .. } => n,
        };
        let (_, col) = common::column(table, name)?;
        if matches!(col.kind, ColumnKind::PartitionKey | ColumnKind::Clustering) {
            return Err(QueryError::Invalid(format!("PRIMARY KEY column '{name}' cannot have IF conditions")));
        }
        let (target, ty) = match &c.lhs {
            ConditionLhs::Column(_) => (Target::Whole, col.ty.clone()),
            ConditionLhs::Element { key, .. } => {
                let (key_ty, value_ty) = match &col.ty {
                    CqlType::Map { key, value, .. } => ((**key).clone(), (**value).clone()),
                    CqlType::List { elem, .. } => (CqlType::Int, (**elem).clone()),
                    _ => {
                        return Err(QueryError::Invalid(format!(
                            "Invalid element access syntax for non-collection column {name}"
                        )))
                    }
                };
                let key = match eval(key, &Receiver { name, ty: &key_ty }, ctx)? {
                    Bound::Value(v) => v,
                    Bound::Null => {
                        return Err(QueryError::Invalid(format!("Invalid null value for {name} element access")))
                    }
                    Bound::Unset => {
                        return Err(QueryError::Invalid(format!("Invalid 'unset' value for {name} element access")))
                    }
                };
                (Target::Element(key), value_ty)
            }
            ConditionLhs::Field { field, .. } => {
                let CqlType::Udt { fields, .. } = &col.ty else {
                    return Err(QueryError::Invalid(format!(
                        "Invalid field selection: {name} of type {} is not a user type",
                        col.ty
                    )));
                };
                let Some(pos) = fields.iter().position(|(f, _)| f == field) else {
                    return Err(QueryError::Invalid(format!("Unknown field {field} in user type {}", col.ty)));
                };
                let fty = fields.get(pos).map(|(_, t)| t.clone()).unwrap_or(CqlType::Blob);
                (Target::Field(pos), fty)
            }
        };
        let values = match c.op {
            Operator::In => in_values(&c.rhs, name, &ty, ctx)?,
            Operator::Contains | Operator::ContainsKey => {
                let operand_ty = match (&ty, c.op) {
                    (CqlType::Map { key, .. }, Operator::ContainsKey) => (**key).clone(),
                    (CqlType::Map { value, .. }, _) => (**value).clone(),
                    (CqlType::List { elem, .. } | CqlType::Set { elem, .. }, Operator::Contains) => (**elem).clone(),
                    _ => {
                        let what = if c.op == Operator::Contains { "CONTAINS" } else { "CONTAINS KEY" };
                        let kind = if c.op == Operator::Contains { "non-collection" } else { "non-map" };
                        return Err(QueryError::Invalid(format!("Cannot use {what} on {kind} column {name}")));
                    }
                };
                vec![operand(&c.rhs, name, &operand_ty, c.op, ctx)?]
            }
            Operator::Eq | Operator::Neq | Operator::Lt | Operator::Lte | Operator::Gt | Operator::Gte => {
                vec![operand(&c.rhs, name, &ty, c.op, ctx)?]
            }
            other => {
                return Err(QueryError::Invalid(format!("Unsupported operator {} in a condition", op_text(other))))
            }
        };
        out.push(Bound1 { column: col.clone(), target, op: c.op, values });
    }
    Ok(out)
}

fn op_text(op: Operator) -> &'static str {
    match op {
        Operator::Eq => "=",
        Operator::Lt => "<",
        Operator::Lte => "<=",
        Operator::Gt => ">",
        Operator::Gte => ">=",
        Operator::Neq => "!=",
        Operator::In => "IN",
        Operator::NotIn => "NOT IN",
        Operator::Contains => "CONTAINS",
        Operator::ContainsKey => "CONTAINS KEY",
        Operator::NotContains => "NOT CONTAINS",
        Operator::NotContainsKey => "NOT CONTAINS KEY",
        Operator::Like => "LIKE",
        Operator::IsNot => "IS NOT",
    }
}

fn operand(
    term: &Term,
    name: &str,
    ty: &CqlType,
    op: Operator,
    ctx: &BindCtx<'_>,
) -> Result<Option<Bytes>, QueryError> {
    match eval(term, &Receiver { name, ty }, ctx)? {
        Bound::Value(v) => Ok(Some(v)),
        Bound::Null if matches!(op, Operator::Eq | Operator::Neq) => Ok(None),
        Bound::Null => {
            Err(QueryError::Invalid(format!("Invalid comparison with null for operator \"{}\"", op_text(op))))
        }
        Bound::Unset => Err(QueryError::Invalid(format!("Invalid 'unset' value in condition on {name}"))),
    }
}

fn in_values(term: &Term, name: &str, ty: &CqlType, ctx: &BindCtx<'_>) -> Result<Vec<Option<Bytes>>, QueryError> {
    match term {
        Term::List(items) | Term::Tuple(items) => items
            .iter()
            .map(|t| match eval(t, &Receiver { name, ty }, ctx)? {
                Bound::Value(v) => Ok(Some(v)),
                Bound::Null => Ok(None),
                Bound::Unset => Err(QueryError::Invalid(format!("Invalid 'unset' value in condition on {name}"))),
            })
            .collect(),
        other => {
            let list_ty = CqlType::List { elem: Box::new(ty.clone()), frozen: false };
            match eval(other, &Receiver { name, ty: &list_ty }, ctx)? {
                Bound::Value(v) => match Value::deserialize(&list_ty, &v) {
                    Ok(Value::List(items)) => Ok(items.into_iter().map(|i| Some(Bytes::from(i.to_bytes()))).collect()),
                    _ => Err(QueryError::Invalid(format!("Invalid list value for IN condition on {name}"))),
                },
                Bound::Null => Err(QueryError::invalid("Invalid null list in IN condition")),
                Bound::Unset => Err(QueryError::Invalid(format!("Invalid 'unset' value in condition on {name}"))),
            }
        }
    }
}

fn find_row<'p>(partition: Option<&'p Partition>, clustering: &Option<Vec<Bytes>>) -> Option<&'p Row> {
    let p = partition?;
    match clustering {
        None => p.static_row.as_ref().filter(|r| !r.columns.is_empty()),
        Some(ck) => p
            .rows
            .iter()
            .find(|r| r.clustering.len() == ck.len() && r.clustering.iter().zip(ck).all(|(a, b)| a[..] == b[..])),
    }
}

fn static_row(partition: Option<&Partition>) -> Option<&Row> {
    partition?.static_row.as_ref()
}

/// The current value of a condition's target.
fn current(b: &Bound1, row: Option<&Row>, now: i32) -> Option<Vec<u8>> {
    let whole = common::stored_column(&b.column, row?, now)?.value;
    match &b.target {
        Target::Whole => Some(whole),
        Target::Element(key) => match Value::deserialize(&b.column.ty, &whole).ok()? {
            Value::Map(pairs) => {
                let CqlType::Map { key: kt, .. } = &b.column.ty else { return None };
                pairs
                    .into_iter()
                    .find(|(k, _)| compare_serialized(kt, &k.to_bytes(), key).is_eq())
                    .map(|(_, v)| v.to_bytes())
            }
            Value::List(items) => {
                let index = i32::from_be_bytes(key.as_ref().try_into().ok()?);
                items.into_iter().nth(usize::try_from(index).ok()?).map(|v| v.to_bytes())
            }
            _ => None,
        },
        Target::Field(pos) => match Value::deserialize(&b.column.ty, &whole).ok()? {
            Value::Udt(fields) => fields.into_iter().nth(*pos).flatten().map(|v| v.to_bytes()),
            _ => None,
        },
    }
}

fn target_type(b: &Bound1) -> CqlType {
    match (&b.target, &b.column.ty) {
        (Target::Whole, t) => t.clone(),
        (Target::Element(_), CqlType::Map { value, .. }) => (**value).clone(),
        (Target::Element(_), CqlType::List { elem, .. }) => (**elem).clone(),
        (Target::Field(pos), CqlType::Udt { fields, .. }) => {
            fields.get(*pos).map(|(_, t)| t.clone()).unwrap_or(CqlType::Blob)
        }
        (_, t) => t.clone(),
    }
}

/// An empty collection is null, as Cassandra stores it.
fn null_if_empty(ty: &CqlType, v: Option<Vec<u8>>) -> Option<Vec<u8>> {
    let collection = matches!(ty, CqlType::List { .. } | CqlType::Set { .. } | CqlType::Map { .. });
    v.filter(|b| !(collection && b.get(..4) == Some(&[0, 0, 0, 0][..])))
}

fn holds_one(b: &Bound1, row: Option<&Row>, now: i32) -> bool {
    let ty = target_type(b);
    let have = null_if_empty(&ty, current(b, row, now));
    let equal = |want: &Option<Bytes>| {
        let want = null_if_empty(&ty, want.as_ref().map(|w| w.to_vec()));
        match (&have, &want) {
            (None, None) => true,
            (Some(h), Some(w)) => compare_serialized(&ty, h, w).is_eq(),
            _ => false,
        }
    };
    match b.op {
        Operator::Eq => b.values.first().is_some_and(equal),
        Operator::Neq => b.values.first().is_some_and(|w| !equal(w)),
        Operator::In => b.values.iter().any(equal),
        Operator::Lt | Operator::Lte | Operator::Gt | Operator::Gte => {
            let (Some(h), Some(Some(w))) = (&have, b.values.first()) else { return false };
            let ord = compare_serialized(&ty, h, w);
            match b.op {
                Operator::Lt => ord.is_lt(),
                Operator::Lte => ord.is_le(),
                Operator::Gt => ord.is_gt(),
                _ => ord.is_ge(),
            }
        }
        Operator::Contains | Operator::ContainsKey => {
            let (Some(h), Some(Some(w))) = (&have, b.values.first()) else { return false };
            match Value::deserialize(&ty, h) {
                Ok(Value::Map(pairs)) => {
                    let CqlType::Map { key: kt, value: vt, .. } = &ty else { return false };
                    pairs.iter().any(|(k, v)| {
                        if b.op == Operator::ContainsKey {
                            compare_serialized(kt, &k.to_bytes(), w).is_eq()
                        } else {
                            compare_serialized(vt, &v.to_bytes(), w).is_eq()
                        }
                    })
                }
                Ok(Value::List(items) | Value::Set(items)) => {
                    let (CqlType::List { elem, .. } | CqlType::Set { elem, .. }) = &ty else { return false };
                    items.iter().any(|i| compare_serialized(elem, &i.to_bytes(), w).is_eq())
                }
                _ => false,
            }
        }
        _ => false,
    }
}

/// Whether every check holds on the partition's current rows.
pub fn holds(checks: &[Check], current: Option<&Partition>, now: i32) -> bool {
    checks.iter().all(|c| {
        let row = find_row(current, &c.clustering);
        match &c.test {
            Test::NotExists => row.is_none(),
            Test::Exists => row.is_some(),
            Test::Conditions(conds) => conds.iter().all(|b| {
                let r = if b.column.kind == ColumnKind::Static { static_row(current) } else { row };
                holds_one(b, r, now)
            }),
        }
    })
}

fn applied_spec(table: &TableDef) -> ColumnSpec {
    ColumnSpec {
        keyspace: table.keyspace.clone(),
        table: table.name.clone(),
        name: "[applied]".into(),
        ty: CqlType::Boolean,
    }
}

/// `[applied]` = true.
pub fn applied(table: &TableDef) -> Rows {
    let mut w = RowsWriter::new(1);
    w.push_cell(Some(&[1]));
    w.end_row();
    w.finish(RowsMetadata::new(vec![applied_spec(table)]))
}

/// The result of a write whose conditions failed, as Cassandra shows it.
pub fn not_applied(
    table: &TableDef,
    key: &[u8],
    checks: &[Check],
    current: Option<&Partition>,
    batch: bool,
    now: i32,
) -> Rows {
    let all = checks.iter().any(|c| matches!(c.test, Test::NotExists | Test::Exists));
    let mut columns: Vec<&ColumnDef> = Vec::new();
    if all {
        columns.extend(table.columns.iter());
    } else {
        if batch {
            columns.extend(
                table.columns.iter().filter(|c| matches!(c.kind, ColumnKind::PartitionKey | ColumnKind::Clustering)),
            );
        }
        for statics in [false, true] {
            for c in checks {
                if let Test::Conditions(conds) = &c.test {
                    for b in conds {
                        if (b.column.kind == ColumnKind::Static) == statics
                            && !columns.iter().any(|x| x.name == b.column.name)
                        {
                            let Some(col) = table.column(&b.column.name) else { continue };
                            columns.push(col);
                        }
                    }
                }
            }
        }
    }
    // The rows shown: each conditioned row that exists, once, in clustering order.
    let mut shown: Vec<(&Option<Vec<Bytes>>, Option<&Row>)> = Vec::new();
    for c in checks {
        let row = find_row(current, &c.clustering);
        let exists = row.is_some()
            || (c.clustering.is_some()
                && static_row(current).is_some_and(|r| !r.columns.is_empty())
                && !all
                && has_static_condition(c));
        if exists && !shown.iter().any(|(k, _)| **k == c.clustering) {
            shown.push((&c.clustering, row));
        }
    }
    // The static row (no clustering) first, as a static-only row sorts.
    let no_clustering: &[Bytes] = &[];
    shown.sort_by(|a, b| {
        compare_clustering(
            table,
            false,
            a.0.as_deref().unwrap_or(no_clustering),
            b.0.as_deref().unwrap_or(no_clustering),
        )
    });
    if shown.is_empty() {
        columns.clear();
    }
    let mut specs = vec![applied_spec(table)];
    specs.extend(columns.iter().map(|c| ColumnSpec {
        keyspace: table.keyspace.clone(),
        table: table.name.clone(),
        name: c.name.clone(),
        ty: c.ty.clone(),
    }));
    let mut w = RowsWriter::new(specs.len());
    let pk = common::decompose_partition_key(key, table.partition_key_len());
    let statics = static_row(current);
    if shown.is_empty() {
        w.push_cell(Some(&[0]));
        w.end_row();
    }
    for (clustering, row) in shown {
        w.push_cell(Some(&[0]));
        for c in &columns {
            match c.kind {
                ColumnKind::PartitionKey => w.push_cell(pk.get(c.position as usize).map(Vec::as_slice)),
                ColumnKind::Clustering => {
                    w.push_cell(clustering.as_ref().and_then(|ck| ck.get(c.position as usize)).map(|b| &b[..]))
                }
                ColumnKind::Static => {
                    let v = statics.and_then(|r| common::stored_column(c, r, now)).map(|o| o.value);
                    w.push_cell(v.as_deref())
                }
                ColumnKind::Regular => {
                    let v = row
                        .filter(|_| clustering.is_some())
                        .and_then(|r| common::stored_column(c, r, now))
                        .map(|o| o.value);
                    w.push_cell(v.as_deref())
                }
            }
        }
        w.end_row();
    }
    w.finish(RowsMetadata::new(specs))
}

fn has_static_condition(c: &Check) -> bool {
    matches!(&c.test, Test::Conditions(conds) if conds.iter().any(|b| b.column.kind == ColumnKind::Static))
}

/// The rows a CAS must read: each conditioned clustering row, in
/// clustering order (the static row is read with them).
pub fn read_ranges(
    table: &TableDef,
    checks: &[Check],
) -> Vec<(types::mutation::ClusteringBound, types::mutation::ClusteringBound)> {
    let mut rows: Vec<&Vec<Bytes>> = checks.iter().filter_map(|c| c.clustering.as_ref()).collect();
    rows.sort_by(|a, b| compare_clustering(table, false, a, b));
    rows.dedup();
    rows.into_iter()
        .map(|ck| {
            let bound = types::mutation::ClusteringBound { prefix: ck.clone(), inclusive: true };
            (bound.clone(), bound)
        })
        .collect()
}

/// Whether the checks name no clustering row (static columns only).
pub fn static_only(checks: &[Check]) -> bool {
    checks.iter().all(|c| c.clustering.is_none())
}
