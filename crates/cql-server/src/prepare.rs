//! PREPARE-time analysis: the name and type of every bind marker, the
//! partition key indexes drivers route by, and the result metadata.
//!
//! Invariants:
//! - `variables[i]` describes the marker with index `i`; names follow
//!   Cassandra (`col`, `in(col)`, `key(col)`, `value(col)`, `[limit]`,
//!   `[ttl]`, `[timestamp]`, `partition key token`, `:name` markers by name).
//! - `pk_indexes` is non-empty only when every partition key column is bound
//!   by a plain `col = ?` (or INSERT value), so routing by it is exact.

use cql::ast::{self, AssignmentOp, DeleteTarget, InsertValues, Operator, RelationLhs, Statement, Term};
use cql_protocol::ColumnSpec;
use types::schema::{ColumnKind, TableDef};
use types::CqlType;

use crate::common;
use crate::error::QueryError;
use crate::schema::Schema;

pub struct PrepareInfo {
    pub variables: Vec<ColumnSpec>,
    pub pk_indexes: Vec<u16>,
    pub result: Vec<ColumnSpec>,
}

struct Collector<'t> {
    table: &'t TableDef,
    specs: Vec<Option<ColumnSpec>>,
    pk_markers: Vec<Option<u16>>,
    /// The first refusal met (an operation whose operand types are ambiguous).
    error: Option<QueryError>,
}

impl<'t> Collector<'t> {
    fn new(table: &'t TableDef, count: usize) -> Collector<'t> {
        Collector { table, specs: vec![None; count], pk_markers: vec![None; table.partition_key_len()], error: None }
    }

    /// Records the markers inside `term` for a receiver named `name` of type `ty`.
    fn term(&mut self, term: &Term, name: &str, ty: &CqlType) {
        match term {
            Term::Bind(m) => {
                let n = m.name.clone().unwrap_or_else(|| name.to_string());
                if let Some(slot) = self.specs.get_mut(m.index) {
                    *slot = Some(ColumnSpec {
                        keyspace: self.table.keyspace.clone(),
                        table: self.table.name.clone(),
                        name: n,
                        ty: ty.clone(),
                    });
                }
            }
            Term::List(items) | Term::Set(items) => {
                let elem = match ty {
                    CqlType::List { elem, .. } | CqlType::Set { elem, .. } => (**elem).clone(),
                    _ => CqlType::Blob,
                };
                for i in items {
                    self.term(i, name, &elem);
                }
            }
            Term::Map(pairs) => {
                let (k, v) = match ty {
                    CqlType::Map { key, value, .. } => ((**key).clone(), (**value).clone()),
                    _ => (CqlType::Blob, CqlType::Blob),
                };
                for (a, b) in pairs {
                    self.term(a, name, &k);
                    self.term(b, name, &v);
                }
            }
            // `(x)` where no tuple is expected groups an expression.
            Term::Tuple(items) if items.len() == 1 && !matches!(ty, CqlType::Tuple(_)) => {
                for i in items {
                    self.term(i, name, ty);
                }
            }
            Term::Tuple(items) => {
                let types: Vec<CqlType> = match ty {
                    CqlType::Tuple(t) => t.clone(),
                    _ => vec![CqlType::Blob; items.len()],
                };
                for (i, t) in items.iter().zip(types.iter()) {
                    self.term(i, name, t);
                }
            }
            Term::Udt(fields) => {
                if let CqlType::Udt { fields: defs, .. } = ty {
                    for (f, t) in fields {
                        if let Some((_, fty)) = defs.iter().find(|(n, _)| n == f) {
                            self.term(t, name, fty);
                        }
                    }
                }
            }
            Term::FunctionCall { function, args } => {
                let fname = function.name.to_ascii_lowercase();
                if fname == "fromjson" || fname == "from_json" {
                    for a in args {
                        self.term(a, &format!("arg0(system.{fname})"), &CqlType::Text);
                    }
                    return;
                }
                // The native functions of `functions`: each argument as its overload takes it.
                let texts: Vec<String> = args.iter().map(crate::bind::term_text).collect();
                let typed: Vec<Option<CqlType>> = args.iter().map(crate::bind::static_type).collect();
                let resolve_args: Vec<crate::functions::Arg<'_>> = args
                    .iter()
                    .zip(&typed)
                    .map(|(a, t)| match (a, t) {
                        (_, Some(t)) => crate::functions::Arg::Typed(t),
                        (Term::Literal(l), None) => crate::functions::Arg::Literal(l),
                        _ => crate::functions::Arg::Typed(ty),
                    })
                    .collect();
                if let Ok(Some(native)) = crate::functions::resolve(&fname, &resolve_args, &texts) {
                    for (i, (a, t)) in args.iter().zip(&native.args).enumerate() {
                        self.term(a, &format!("arg{i}(system.{fname})"), t);
                    }
                    return;
                }
                let arg_ty = match crate::bind::legacy_function_name(&fname).as_str() {
                    "mintimeuuid" | "maxtimeuuid" => CqlType::Timestamp,
                    "totimestamp" | "todate" | "tounixtimestamp" | "dateof" | "unixtimestampof" => CqlType::TimeUuid,
                    f if f.starts_with("blobas") => CqlType::Blob,
                    f if f.ends_with("asblob") => CqlType::from_simple_name(&f[..f.len() - 6]).unwrap_or(CqlType::Blob),
                    _ => CqlType::Blob,
                };
                for a in args {
                    self.term(a, &format!("arg({fname})"), &arg_ty);
                }
            }
            Term::TypeHint { ty: ast::TypeExpr::Native(hint), term } => self.term(term, name, hint),
            Term::Cast { term, .. } | Term::TypeHint { term, .. } | Term::Negate(term) => self.term(term, name, ty),
            Term::BinaryOp { op, lhs, rhs } => {
                // Markers in an operation are its function's arguments (`arg0(system._add)`).
                match crate::bind::operand_types(*op, lhs, rhs, ty) {
                    Ok((lt, rt)) => {
                        let function = crate::functions::arith::function_name(*op);
                        self.term(lhs, &format!("arg0(system.{function})"), &lt);
                        self.term(rhs, &format!("arg1(system.{function})"), &rt);
                    }
                    Err(e) => {
                        self.error.get_or_insert(e);
                    }
                }
            }
            Term::Literal(_) | Term::EmptyMapOrSet => {}
        }
    }

    /// Records the type-hinted markers of a selector (`(int) ?`), named `[selection]`.
    fn selection_markers(&mut self, expr: &ast::SelectorExpr) {
        use ast::SelectorExpr as S;
        match expr {
            S::TypeHint { ty: ast::TypeExpr::Native(ty), expr } if matches!(**expr, S::Term(Term::Bind(_))) => {
                if let S::Term(t) = &**expr {
                    self.term(t, "[selection]", ty);
                }
            }
            S::BinaryOp { lhs, rhs, .. } => {
                self.selection_markers(lhs);
                self.selection_markers(rhs);
            }
            S::Negate(inner) | S::Cast { expr: inner, .. } | S::TypeHint { expr: inner, .. } => {
                self.selection_markers(inner)
            }
            S::FunctionCall { args, .. } => args.iter().for_each(|a| self.selection_markers(a)),
            _ => {}
        }
    }

    fn relations(&mut self, rels: &[ast::Relation]) -> Result<(), QueryError> {
        for rel in rels {
            match &rel.lhs {
                RelationLhs::Column(name) => {
                    let (_, c) = common::column(self.table, name)?;
                    let c = c.clone();
                    match rel.op {
                        Operator::In => match &rel.rhs {
                            Term::Bind(_) => {
                                let lt = CqlType::List { elem: Box::new(c.ty.clone()), frozen: false };
                                self.term(&rel.rhs, &format!("in({})", c.name), &lt)
                            }
                            other => self.term(
                                other,
                                &c.name,
                                &CqlType::List { elem: Box::new(c.ty.clone()), frozen: false },
                            ),
                        },
                        Operator::Contains => {
                            let elem = match &c.ty {
                                CqlType::List { elem, .. } | CqlType::Set { elem, .. } => (**elem).clone(),
                                CqlType::Map { value, .. } => (**value).clone(),
                                other => other.clone(),
                            };
                            self.term(&rel.rhs, &c.name, &elem)
                        }
                        Operator::ContainsKey => {
                            let key = match &c.ty {
                                CqlType::Map { key, .. } => (**key).clone(),
                                other => other.clone(),
                            };
                            self.term(&rel.rhs, &c.name, &key)
                        }
                        _ => {
                            if rel.op == Operator::Eq && c.kind == ColumnKind::PartitionKey {
                                if let Term::Bind(m) = &rel.rhs {
                                    self.pk_markers[c.position as usize] = Some(m.index as u16);
                                }
                            }
                            self.term(&rel.rhs, &c.name, &c.ty)
                        }
                    }
                }
                RelationLhs::Token(_) => self.term(&rel.rhs, "partition key token", &CqlType::BigInt),
                RelationLhs::MultiColumn(names) => {
                    let types: Vec<CqlType> = names
                        .iter()
                        .map(|n| common::column(self.table, n).map(|(_, c)| c.ty.clone()))
                        .collect::<Result<_, _>>()?;
                    let tuple = CqlType::Tuple(types);
                    let label = format!("({})", names.join(","));
                    match (&rel.op, &rel.rhs) {
                        (Operator::In, Term::List(items)) => {
                            for i in items {
                                self.term(i, &label, &tuple);
                            }
                        }
                        (Operator::In, other) => self.term(
                            other,
                            &format!("in{label}"),
                            &CqlType::List { elem: Box::new(tuple), frozen: false },
                        ),
                        (_, other) => self.term(other, &label, &tuple),
                    }
                }
                RelationLhs::MapElement { column, key } => {
                    let (_, c) = common::column(self.table, column)?;
                    let c = c.clone();
                    if let CqlType::Map { key: kt, value: vt, .. } = &c.ty {
                        self.term(key, &format!("key({})", c.name), kt);
                        self.term(&rel.rhs, &format!("value({})", c.name), vt);
                    }
                }
            }
        }
        Ok(())
    }

    /// The markers of an `IF` clause (Cassandra names them after the column,
    /// `key(col)`/`idx(col)` for an element's key or index, `value(col)` for
    /// an element, `in(col)` for a whole IN list).
    fn conditions(&mut self, clause: &Option<ast::IfClause>) -> Result<(), QueryError> {
        let Some(ast::IfClause::Conditions(conds)) = clause else { return Ok(()) };
        for cond in conds {
            let (name, ty) = match &cond.lhs {
                ast::ConditionLhs::Column(n) => {
                    let (_, col) = common::column(self.table, n)?;
                    (col.name.clone(), col.ty.clone())
                }
                ast::ConditionLhs::Element { column, key } => {
                    let (_, col) = common::column(self.table, column)?;
                    let col = col.clone();
                    let (label, kt, vt) = match &col.ty {
                        CqlType::Map { key, value, .. } => ("key", (**key).clone(), (**value).clone()),
                        CqlType::List { elem, .. } => ("idx", CqlType::Int, (**elem).clone()),
                        other => ("key", CqlType::Blob, other.clone()),
                    };
                    self.term(key, &format!("{label}({})", col.name), &kt);
                    (format!("value({})", col.name), vt)
                }
                ast::ConditionLhs::Field { column, field } => {
                    let (_, col) = common::column(self.table, column)?;
                    let fty = match &col.ty {
                        CqlType::Udt { fields, .. } => {
                            fields.iter().find(|(f, _)| f == field).map(|(_, t)| t.clone()).unwrap_or(CqlType::Blob)
                        }
                        _ => CqlType::Blob,
                    };
                    (format!("{}.{field}", col.name), fty)
                }
            };
            match (cond.op, &cond.rhs) {
                (Operator::In, Term::Bind(_)) => {
                    self.term(&cond.rhs, &format!("in({name})"), &CqlType::List { elem: Box::new(ty), frozen: false })
                }
                (Operator::In, Term::List(items) | Term::Tuple(items)) => {
                    for i in items {
                        self.term(i, &name, &ty);
                    }
                }
                (Operator::Contains, _) => {
                    let elem = match &ty {
                        CqlType::List { elem, .. } | CqlType::Set { elem, .. } => (**elem).clone(),
                        CqlType::Map { value, .. } => (**value).clone(),
                        other => other.clone(),
                    };
                    self.term(&cond.rhs, &name, &elem)
                }
                (Operator::ContainsKey, _) => {
                    let key = match &ty {
                        CqlType::Map { key, .. } => (**key).clone(),
                        other => other.clone(),
                    };
                    self.term(&cond.rhs, &name, &key)
                }
                (_, rhs) => self.term(rhs, &name, &ty),
            }
        }
        Ok(())
    }

    fn using(&mut self, using: &ast::Using) {
        if let Some(t) = &using.ttl {
            self.term(t, "[ttl]", &CqlType::Int);
        }
        if let Some(t) = &using.timestamp {
            self.term(t, "[timestamp]", &CqlType::BigInt);
        }
    }

    fn pk_indexes(&self) -> Vec<u16> {
        if self.pk_markers.iter().all(Option::is_some) {
            self.pk_markers.iter().flatten().copied().collect()
        } else {
            Vec::new()
        }
    }

    fn finish(self) -> Result<(Vec<ColumnSpec>, Vec<u16>), QueryError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let pk = self.pk_indexes();
        let specs = self
            .specs
            .into_iter()
            .enumerate()
            .map(|(i, s)| s.ok_or_else(|| QueryError::Invalid(format!("Cannot infer the type of bind marker {i}"))))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((specs, pk))
    }
}

fn modification(c: &mut Collector<'_>, st: &ast::BatchStatement) -> Result<(), QueryError> {
    match st {
        ast::BatchStatement::Insert(ins) => insert(c, ins),
        ast::BatchStatement::Update(upd) => update(c, upd),
        ast::BatchStatement::Delete(del) => delete(c, del),
    }
}

fn insert(c: &mut Collector<'_>, ins: &ast::Insert) -> Result<(), QueryError> {
    match &ins.values {
        InsertValues::Columns { columns, values } => {
            for (name, term) in columns.iter().zip(values) {
                let (_, col) = common::column(c.table, name)?;
                let col = col.clone();
                if col.kind == ColumnKind::PartitionKey {
                    if let Term::Bind(m) = term {
                        c.pk_markers[col.position as usize] = Some(m.index as u16);
                    }
                }
                c.term(term, &col.name, &col.ty);
            }
        }
        InsertValues::Json { value, .. } => c.term(value, "[json]", &CqlType::Text),
    }
    c.using(&ins.using);
    Ok(())
}

fn update(c: &mut Collector<'_>, upd: &ast::Update) -> Result<(), QueryError> {
    crate::modify::check_compatible(&upd.assignments)?;
    c.using(&upd.using);
    for a in &upd.assignments {
        let (_, col) = common::column(c.table, &a.column)?;
        let col = col.clone();
        match &a.op {
            AssignmentOp::Set(t) | AssignmentOp::Add(t) | AssignmentOp::Prepend(t) => c.term(t, &col.name, &col.ty),
            AssignmentOp::Subtract(t) => {
                let ty = match &col.ty {
                    CqlType::Map { key, .. } => CqlType::Set { elem: key.clone(), frozen: false },
                    other => other.clone(),
                };
                c.term(t, &col.name, &ty)
            }
            AssignmentOp::SetElement { key, value } => match &col.ty {
                CqlType::Map { key: kt, value: vt, .. } => {
                    c.term(key, &format!("key({})", col.name), kt);
                    c.term(value, &format!("value({})", col.name), vt);
                }
                CqlType::List { elem, .. } => {
                    c.term(key, &format!("idx({})", col.name), &CqlType::Int);
                    c.term(value, &format!("value({})", col.name), elem);
                }
                other => c.term(value, &col.name, other),
            },
            AssignmentOp::SetField { field, value } => {
                let fty = match &col.ty {
                    CqlType::Udt { fields, .. } => fields.iter().find(|(f, _)| f == field).map(|(_, t)| t.clone()),
                    _ => None,
                };
                c.term(value, &format!("{}.{field}", col.name), &fty.unwrap_or(CqlType::Blob))
            }
        }
    }
    c.relations(&upd.where_clause)?;
    c.conditions(&upd.if_clause)
}

fn delete(c: &mut Collector<'_>, del: &ast::Delete) -> Result<(), QueryError> {
    for t in &del.targets {
        if let DeleteTarget::Element { column, key } = t {
            let (_, col) = common::column(c.table, column)?;
            let col = col.clone();
            let kt = match &col.ty {
                CqlType::Map { key, .. } => (**key).clone(),
                CqlType::Set { elem, .. } => (**elem).clone(),
                _ => CqlType::Int,
            };
            c.term(key, &format!("key({})", col.name), &kt);
        }
    }
    c.using(&del.using);
    c.relations(&del.where_clause)?;
    c.conditions(&del.if_clause)
}

/// Analyzes a statement for PREPARE (and for named bind values).
pub fn analyze(schema: &Schema, session: Option<&str>, statement: &Statement) -> Result<PrepareInfo, QueryError> {
    let count = statement.bind_markers().len();
    let empty = || PrepareInfo { variables: Vec::new(), pk_indexes: Vec::new(), result: Vec::new() };
    match statement {
        Statement::Select(s) => {
            let (_, table) = common::resolve_table(schema, &s.table, session)?;
            let mut c = Collector::new(table, count);
            if let ast::Selection::Selectors(list) = &s.selection {
                for selector in list {
                    c.selection_markers(&selector.expr);
                }
            }
            c.relations(&s.where_clause)?;
            if let Some(t) = &s.per_partition_limit {
                c.term(t, "[per_partition_limit]", &CqlType::Int);
            }
            if let Some(t) = &s.limit {
                c.term(t, "[limit]", &CqlType::Int);
            }
            let result = crate::select::plan_selection(table, s)?.result_specs();
            let (variables, pk_indexes) = c.finish()?;
            Ok(PrepareInfo { variables, pk_indexes, result })
        }
        Statement::Insert(s) => {
            let (_, table) = common::resolve_table(schema, &s.table, session)?;
            let mut c = Collector::new(table, count);
            insert(&mut c, s)?;
            let (variables, pk_indexes) = c.finish()?;
            Ok(PrepareInfo { variables, pk_indexes, result: Vec::new() })
        }
        Statement::Update(s) => {
            let (_, table) = common::resolve_table(schema, &s.table, session)?;
            let mut c = Collector::new(table, count);
            update(&mut c, s)?;
            let (variables, pk_indexes) = c.finish()?;
            Ok(PrepareInfo { variables, pk_indexes, result: Vec::new() })
        }
        Statement::Delete(s) => {
            let (_, table) = common::resolve_table(schema, &s.table, session)?;
            let mut c = Collector::new(table, count);
            delete(&mut c, s)?;
            let (variables, pk_indexes) = c.finish()?;
            Ok(PrepareInfo { variables, pk_indexes, result: Vec::new() })
        }
        Statement::Batch(b) => {
            let mut variables: Vec<Option<ColumnSpec>> = vec![None; count];
            for st in &b.statements {
                let table_name = match st {
                    ast::BatchStatement::Insert(s) => &s.table,
                    ast::BatchStatement::Update(s) => &s.table,
                    ast::BatchStatement::Delete(s) => &s.table,
                };
                let (_, table) = common::resolve_table(schema, table_name, session)?;
                let mut c = Collector::new(table, count);
                if let Some(t) = &b.using.timestamp {
                    c.term(t, "[timestamp]", &CqlType::BigInt);
                }
                modification(&mut c, st)?;
                if let Some(e) = c.error {
                    return Err(e);
                }
                for (slot, spec) in variables.iter_mut().zip(c.specs) {
                    if spec.is_some() {
                        *slot = spec;
                    }
                }
            }
            let variables = variables
                .into_iter()
                .enumerate()
                .map(|(i, s)| s.ok_or_else(|| QueryError::Invalid(format!("Cannot infer the type of bind marker {i}"))))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(PrepareInfo { variables, pk_indexes: Vec::new(), result: Vec::new() })
        }
        _ => {
            if count > 0 {
                return Err(QueryError::invalid("Bind variables are not supported in this statement"));
            }
            Ok(empty())
        }
    }
}
