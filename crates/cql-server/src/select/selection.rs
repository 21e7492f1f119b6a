//! The selection of a SELECT: output columns (plain, writetime, ttl, token(),
//! conversions, CAST, toJson(), aggregates) and their result metadata (also for
//! PREPARE); for SELECT JSON the result is one `[json]` text column.
//! A prepared SELECT keeps its selection in its `PlanCache`.
//!
//! Invariant: a kept selection is used only in the schema version and for
//! the table it was planned for (a selection is a function of the two and
//! the statement alone: literals become constants, time functions run per
//! execution).

use super::*;
use crate::functions::{self, arith};

/// One output column.
#[derive(Clone, Debug)]
pub(super) enum Sel {
    Column(usize),
    WriteTime(usize),
    Ttl(usize),
    /// `writetime(c.f)` / `ttl(c.f)` (`ttl: true`) of a field of a user type
    /// column: a non-frozen one's field cell; a frozen one's cell where the
    /// field is not null.
    FieldMeta {
        column: usize,
        position: usize,
        ttl: bool,
    },
    /// `inner.f`: the field at `position` of a user type value.
    Field {
        inner: Box<Sel>,
        position: usize,
    },
    Token,
    Count,
    /// `count(x)`: the rows where a selector is not null.
    CountOf(Box<Sel>),
    /// `min(x)` / `max(x)` of a selector of the given type.
    Min(Box<Sel>, CqlType),
    Max(Box<Sel>, CqlType),
    /// `sum(x)` or `avg(x)` of a numeric selector of the given type (`aggregate`).
    Numeric(aggregate::Numeric, Box<Sel>, CqlType),
    /// A literal, serialized in the type it was given.
    Const(Option<Vec<u8>>),
    /// A bind marker with a type hint (`(int) ?`): the bound value, of type `ty`.
    Bind {
        index: usize,
        ty: CqlType,
    },
    /// `left op right`, the operands of types `lt` and `rt` (`functions::arith`).
    Op {
        op: ast::ArithmeticOp,
        left: Box<Sel>,
        lt: CqlType,
        right: Box<Sel>,
        rt: CqlType,
    },
    /// `-inner`, of type `ty`.
    Negate(Box<Sel>, CqlType),
    /// A native function (`functions`) of selectors.
    Native {
        function: functions::Native,
        args: Vec<Sel>,
    },
    /// A native function of one argument converting its value (toTimestamp,
    /// intAsBlob, ...): `inner`'s value, of type `from`, as a `ty`.
    Convert {
        inner: Box<Sel>,
        from: CqlType,
        function: String,
        ty: CqlType,
    },
    /// `toJson(inner)`: the JSON text of a selector's value of type `ty`.
    ToJson {
        inner: Box<Sel>,
        ty: CqlType,
    },
    /// `CAST(inner AS to)`: a selector's value of type `from` converted (`cast`).
    Cast {
        inner: Box<Sel>,
        from: CqlType,
        to: CqlType,
    },
}

impl Sel {
    pub(super) fn is_aggregate(&self) -> bool {
        match self {
            Sel::Count | Sel::CountOf(_) | Sel::Min(..) | Sel::Max(..) | Sel::Numeric(..) => true,
            Sel::ToJson { inner, .. }
            | Sel::Cast { inner, .. }
            | Sel::Convert { inner, .. }
            | Sel::Negate(inner, _)
            | Sel::Field { inner, .. } => inner.is_aggregate(),
            Sel::Op { left, right, .. } => left.is_aggregate() || right.is_aggregate(),
            Sel::Native { args, .. } => args.iter().any(Sel::is_aggregate),
            _ => false,
        }
    }
}

/// The selection of a statement: output columns and their specs.
pub struct SelectionPlan {
    pub(super) sels: Vec<Sel>,
    /// One per selector (for SELECT JSON, the keys of each row's object).
    pub specs: Vec<ColumnSpec>,
    /// SELECT JSON: rows are sent as one `[json]` text column.
    pub json: bool,
}

impl SelectionPlan {
    /// The result's metadata: its column specs, or only their count when the
    /// client asked to skip them (then no spec is built: most reads by
    /// prepared statements skip them).
    pub fn result_metadata(&self, skip_specs: bool) -> RowsMetadata {
        if !skip_specs {
            return RowsMetadata::new(self.result_specs());
        }
        let mut metadata = RowsMetadata::empty();
        metadata.columns_count = if self.json { 1 } else { self.specs.len() };
        metadata
    }

    /// The result's columns: the selectors', or for SELECT JSON the one
    /// `[json]` text column (named after the table, as Cassandra's).
    pub fn result_specs(&self) -> Vec<ColumnSpec> {
        if !self.json {
            return self.specs.clone();
        }
        let (keyspace, table) = self.specs.first().map(|s| (s.keyspace.clone(), s.table.clone())).unwrap_or_default();
        vec![ColumnSpec { keyspace, table, name: "[json]".into(), ty: CqlType::Text }]
    }
}

/// The selection of a prepared SELECT, kept with the prepared statement so
/// that its executions share one plan instead of each resolving its columns
/// and building its specs again (8 % of a cached point read's server CPU).
/// A plan is reused only for the schema version and the table it was made
/// for: after any schema change the next execution plans it again (an
/// ALTER TABLE ... ADD shows in `SELECT *` at once, as in Cassandra).
#[derive(Default)]
pub struct PlanCache {
    selection: std::sync::Mutex<Option<CachedSelection>>,
}

struct CachedSelection {
    version: uuid::Uuid,
    keyspace: String,
    table: String,
    plan: std::sync::Arc<SelectionPlan>,
}

impl PlanCache {
    /// `select`'s selection over `table` in schema `version`: the one kept,
    /// or planned now (and kept; a selection that fails to plan is not).
    pub fn selection(
        &self,
        version: uuid::Uuid,
        table: &TableDef,
        select: &ast::Select,
    ) -> Result<std::sync::Arc<SelectionPlan>, QueryError> {
        let mut kept = self.selection.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = kept.as_ref() {
            if c.version == version && c.keyspace == table.keyspace && c.table == table.name {
                return Ok(std::sync::Arc::clone(&c.plan));
            }
        }
        let plan = std::sync::Arc::new(plan_selection(table, select)?);
        *kept = Some(CachedSelection {
            version,
            keyspace: table.keyspace.clone(),
            table: table.name.clone(),
            plan: std::sync::Arc::clone(&plan),
        });
        Ok(plan)
    }
}

pub(super) fn spec(table: &TableDef, name: String, ty: CqlType) -> ColumnSpec {
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
    Ok(SelectionPlan { sels, specs, json: select.json })
}

pub(super) fn column_arg(table: &TableDef, expr: &SelectorExpr, what: &str) -> Result<usize, QueryError> {
    match expr {
        SelectorExpr::Column(name) => Ok(common::column(table, name)?.0),
        _ => Err(QueryError::Invalid(format!("Only column names are supported as arguments of {what}"))),
    }
}

pub(super) fn plan_selector(table: &TableDef, expr: &SelectorExpr) -> Result<(Sel, String, CqlType), QueryError> {
    match expr {
        SelectorExpr::Column(name) => {
            let (i, c) = common::column(table, name)?;
            Ok((Sel::Column(i), c.name.clone(), c.ty.clone()))
        }
        SelectorExpr::CountRows => Ok((Sel::Count, "count".into(), CqlType::BigInt)),
        SelectorExpr::CellMetadata { kind, target } => {
            if let SelectorExpr::Field { expr, field } = &**target {
                return plan_field_metadata(table, *kind, expr, field);
            }
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
            // `fname` as written (it names the column), `canonical` its pre-5.0 spelling.
            let fname = function.name.to_ascii_lowercase();
            let canonical = crate::bind::legacy_function_name(&fname);
            match canonical.as_str() {
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
                    let [arg] = args.as_slice() else {
                        return Err(QueryError::Invalid(format!(
                            "Invalid number of arguments in call to function system.count: 1 required but {} provided",
                            args.len()
                        )));
                    };
                    // count(1) and the like count rows, named as count(*).
                    if untyped_literal(arg).is_some() {
                        return Ok((Sel::Count, "count".into(), CqlType::BigInt));
                    }
                    let (inner, name, _) = aggregate_argument(table, arg)?;
                    Ok((Sel::CountOf(Box::new(inner)), format!("system.count({name})"), CqlType::BigInt))
                }
                "min" | "max" => {
                    let [arg] = args.as_slice() else {
                        return Err(QueryError::Invalid(format!(
                            "Invalid number of arguments in call to function system.{fname}: 1 required but {} provided",
                            args.len()
                        )));
                    };
                    let (inner, name, ty) = aggregate_argument(table, arg)?;
                    let inner = Box::new(inner);
                    let sel = if fname == "min" { Sel::Min(inner, ty.clone()) } else { Sel::Max(inner, ty.clone()) };
                    Ok((sel, format!("system.{fname}({name})"), ty))
                }
                "sum" | "avg" => {
                    // Each overload takes one argument.
                    let [arg] = args.as_slice() else {
                        return Err(QueryError::Invalid(aggregate::no_signature(&fname)));
                    };
                    let (inner, name, ty) = aggregate_argument(table, arg)?;
                    if !aggregate::NUMERIC.contains(&ty) {
                        return Err(QueryError::Invalid(aggregate::no_signature(&fname)));
                    }
                    let kind = if fname == "sum" { aggregate::Numeric::Sum } else { aggregate::Numeric::Avg };
                    Ok((Sel::Numeric(kind, Box::new(inner), ty.clone()), format!("system.{fname}({name})"), ty))
                }
                "writetime" | "ttl" => {
                    let kind = if fname == "ttl" { CellMetadataKind::Ttl } else { CellMetadataKind::WriteTime };
                    let target =
                        args.first().cloned().ok_or_else(|| QueryError::invalid("writetime/ttl need an argument"))?;
                    plan_selector(table, &SelectorExpr::CellMetadata { kind, target: Box::new(target) })
                }
                "totimestamp" | "todate" | "tounixtimestamp" | "dateof" | "unixtimestampof" => {
                    let (inner, iname, from) = one_argument(table, &fname, args)?;
                    if !matches!(from, CqlType::TimeUuid | CqlType::Timestamp | CqlType::Date) {
                        return Err(QueryError::Invalid(format!(
                            "Type error: {iname} cannot be passed as argument 0 of function system.{fname} of type timeuuid"
                        )));
                    }
                    let ty = match canonical.as_str() {
                        "totimestamp" | "dateof" => CqlType::Timestamp,
                        "todate" => CqlType::Date,
                        _ => CqlType::BigInt,
                    };
                    let name = format!("system.{fname}({iname})");
                    Ok((
                        Sel::Convert { inner: Box::new(inner), from, function: canonical.clone(), ty: ty.clone() },
                        name,
                        ty,
                    ))
                }
                "tojson" | "to_json" => {
                    let [arg] = args.as_slice() else {
                        return Err(QueryError::Invalid(format!(
                            "Invalid number of arguments for function system.{fname}(any)"
                        )));
                    };
                    if matches!(arg, SelectorExpr::Term(Term::Literal(ast::Literal::Null))) {
                        return Err(QueryError::Invalid(format!(
                            "Cannot infer type of argument NULL in call to function system.{fname}(any): use type casts to disambiguate"
                        )));
                    }
                    let (inner, name, ty) = plan_selector(table, arg)?;
                    let sel = Sel::ToJson { inner: Box::new(inner), ty };
                    Ok((sel, format!("system.{fname}({name})"), CqlType::Text))
                }
                "fromjson" | "from_json" => Err(QueryError::Invalid(format!(
                    "{fname}() cannot be used in the selection clause of a SELECT statement"
                ))),
                other if other.ends_with("asblob") || other.starts_with("blobas") => {
                    let target = other.strip_suffix("asblob").or_else(|| other.strip_prefix("blobas")).unwrap_or(other);
                    // There is no blobAsBlob.
                    let native = CqlType::from_simple_name(target)
                        .filter(|t| *t != CqlType::Blob)
                        .ok_or_else(|| QueryError::Invalid(format!("Unknown function '{fname}'")))?;
                    let (inner, iname, from) = one_argument(table, &fname, args)?;
                    // xAsBlob takes an x, blobAsX a blob or any other value (its
                    // bytes, checked when read).
                    let (expected, ty) =
                        if other.ends_with("asblob") { (native, CqlType::Blob) } else { (CqlType::Blob, native) };
                    if from != expected && expected != CqlType::Blob {
                        return Err(QueryError::Invalid(format!(
                            "Type error: {iname} cannot be passed as argument 0 of function system.{fname} of type {}",
                            expected.to_cql()
                        )));
                    }
                    let name = format!("system.{fname}({iname})");
                    Ok((
                        Sel::Convert { inner: Box::new(inner), from, function: other.to_string(), ty: ty.clone() },
                        name,
                        ty,
                    ))
                }
                _ => plan_native(table, &function.to_string().to_ascii_lowercase(), &fname, args),
            }
        }
        SelectorExpr::Cast { expr, ty } => {
            let (inner, name, from) = plan_selector(table, expr)?;
            // Cassandra ignores a cast to the selector's own type.
            if from == *ty {
                return Ok((inner, name, from));
            }
            if !cast::supported(&from, ty) {
                // Cassandra 5 resolves a CAST as its cast_as_<type> function.
                return Err(crate::functions::no_cast(&format!("system.cast_as_{}", ty.to_cql()), ty));
            }
            let name = format!("cast({name} as {})", ty.to_cql());
            Ok((Sel::Cast { inner: Box::new(inner), from, to: ty.clone() }, name, ty.clone()))
        }
        SelectorExpr::BinaryOp { op, lhs, rhs } => plan_operation(table, *op, lhs, rhs),
        SelectorExpr::Negate(inner) => {
            if let Some(l) = untyped_literal(expr) {
                return Err(cannot_infer(&literal_text(&l)));
            }
            let (sel, name, ty) = plan_selector(table, inner)?;
            let name = match **inner {
                SelectorExpr::BinaryOp { .. } => format!("-({name})"),
                _ => format!("-{name}"),
            };
            let Some(out) = arith::negate_type(&ty) else {
                if ty == CqlType::Timestamp {
                    return Err(QueryError::invalid("Ambiguous negation: use type casts to disambiguate"));
                }
                let known: Vec<String> = aggregate::NUMERIC
                    .iter()
                    .map(|t| format!("system.\"_negate\" : ({0}) -> {0}", t.to_cql()))
                    .collect();
                return Err(QueryError::Invalid(format!(
                    "Invalid call to function system._negate, none of its type signatures match (known type signatures: {})",
                    known.join(", ")
                )));
            };
            Ok((Sel::Negate(Box::new(sel), ty), name, out))
        }
        SelectorExpr::TypeHint { ty: ast::TypeExpr::Native(ty), expr: inner }
            if matches!(**inner, SelectorExpr::Term(Term::Bind(_))) =>
        {
            let SelectorExpr::Term(t @ Term::Bind(m)) = &**inner else {
                return Err(QueryError::invalid("This selector is not supported yet"));
            };
            let name = format!("({ty}){}", crate::bind::term_text(t));
            Ok((Sel::Bind { index: m.index, ty: ty.clone() }, name, ty.clone()))
        }
        SelectorExpr::TypeHint { ty: ast::TypeExpr::Native(ty), expr: inner } => match untyped_literal(inner) {
            Some(l) => {
                let text = literal_text(&l);
                let value = crate::bind::literal_value(&l, &Receiver { name: &text, ty })?;
                Ok((Sel::Const(value.map(|v| v.to_bytes())), format!("({ty}){text}"), ty.clone()))
            }
            None => {
                let (sel, name, from) = plan_selector(table, inner)?;
                if from != *ty {
                    return Err(QueryError::Invalid(format!("Cannot assign value {name} to a {}", ty.to_cql())));
                }
                Ok((sel, name, from))
            }
        },
        SelectorExpr::Term(t) => Err(cannot_infer(&crate::bind::term_text(t))),
        SelectorExpr::Field { expr, field } => {
            let (inner, name, ty) = plan_selector(table, expr)?;
            let (position, field_ty) = udt_field(&name, &ty, field)?;
            Ok((Sel::Field { inner: Box::new(inner), position }, format!("{name}.{field}"), field_ty))
        }
        _ => Err(QueryError::invalid("This selector is not supported yet")),
    }
}

/// The position and type of `field` in the user type `ty` of the selector
/// `name`, or Cassandra's refusal.
fn udt_field(name: &str, ty: &CqlType, field: &str) -> Result<(usize, CqlType), QueryError> {
    let CqlType::Udt { fields, .. } = ty else {
        return Err(QueryError::Invalid(format!(
            "Invalid field selection: {name} of type {} is not a user type",
            ty.to_cql()
        )));
    };
    fields
        .iter()
        .position(|(n, _)| n == field)
        .and_then(|p| fields.get(p).map(|(_, t)| (p, t.clone())))
        .ok_or_else(|| QueryError::Invalid(format!("{name} of type {} has no field {field}", ty.to_cql())))
}

/// `writetime(c.f)`, `maxwritetime(c.f)` or `ttl(c.f)`: of a non-frozen user
/// type, its field's cell; of a frozen one, its cell unless the field is null
/// (as Cassandra 5.0 answers).
fn plan_field_metadata(
    table: &TableDef,
    kind: CellMetadataKind,
    expr: &SelectorExpr,
    field: &str,
) -> Result<(Sel, String, CqlType), QueryError> {
    let fname = match kind {
        CellMetadataKind::WriteTime => "writetime",
        CellMetadataKind::MaxWriteTime => "maxwritetime",
        CellMetadataKind::Ttl => "ttl",
    };
    let column = column_arg(table, expr, "writetime/ttl")?;
    let c = &table.columns[column];
    let (position, _) = udt_field(&c.name, &c.ty, field)?;
    let ttl = kind == CellMetadataKind::Ttl;
    let ty = if ttl { CqlType::Int } else { CqlType::BigInt };
    let name = format!("{fname}({}.{field})", c.name);
    Ok((Sel::FieldMeta { column, position, ttl }, name, ty))
}

fn cannot_infer(text: &str) -> QueryError {
    QueryError::Invalid(format!(
        "Cannot infer type for term {text} in selection clause (try using a cast to force a type)"
    ))
}

/// A literal written as a selector (`1`, `'a'`, `-1.5`), untyped.
fn untyped_literal(expr: &SelectorExpr) -> Option<ast::Literal> {
    match expr {
        SelectorExpr::Term(t) => term_literal(t),
        SelectorExpr::Negate(inner) => untyped_literal(inner).and_then(|l| negated(&l)),
        _ => None,
    }
}

fn term_literal(t: &Term) -> Option<ast::Literal> {
    match t {
        Term::Literal(l) => Some(l.clone()),
        Term::Negate(inner) => term_literal(inner).and_then(|l| negated(&l)),
        _ => None,
    }
}

/// `-literal`, for numbers.
fn negated(l: &ast::Literal) -> Option<ast::Literal> {
    let flip = |s: &str| s.strip_prefix('-').map_or_else(|| format!("-{s}"), str::to_string);
    match l {
        ast::Literal::Integer(s) => Some(ast::Literal::Integer(flip(s))),
        ast::Literal::Float(s) => Some(ast::Literal::Float(flip(s))),
        _ => None,
    }
}

fn literal_text(l: &ast::Literal) -> String {
    crate::bind::term_text(&Term::Literal(l.clone()))
}

/// The argument of an aggregate: any selector but another aggregate.
fn aggregate_argument(table: &TableDef, arg: &SelectorExpr) -> Result<(Sel, String, CqlType), QueryError> {
    let planned = plan_selector(table, arg)?;
    if planned.0.is_aggregate() {
        return Err(QueryError::invalid("aggregate functions cannot be used as arguments of aggregate functions"));
    }
    Ok(planned)
}

/// An operand of an operation or an argument of a function: planned, or an
/// untyped literal (typed by what it meets), or a bind marker.
enum Operand {
    Planned(Box<Sel>, String, CqlType),
    Literal(ast::Literal, String),
    Marker(String),
}

fn plan_operand(table: &TableDef, expr: &SelectorExpr) -> Result<Operand, QueryError> {
    if let Some(l) = untyped_literal(expr) {
        let text = literal_text(&l);
        return Ok(Operand::Literal(l, text));
    }
    if let SelectorExpr::Term(t @ Term::Bind(_)) = expr {
        return Ok(Operand::Marker(crate::bind::term_text(t)));
    }
    let (sel, name, ty) = plan_selector(table, expr)?;
    Ok(Operand::Planned(Box::new(sel), name, ty))
}

impl Operand {
    fn text(&self) -> &str {
        match self {
            Operand::Planned(_, name, _) | Operand::Literal(_, name) | Operand::Marker(name) => name,
        }
    }

    /// The operand as a selector of type `ty` (a literal is read as one).
    fn into_sel(self, ty: &CqlType) -> Result<Sel, QueryError> {
        match self {
            Operand::Planned(sel, ..) => Ok(*sel),
            Operand::Literal(l, text) => {
                let value = crate::bind::literal_value(&l, &Receiver { name: &text, ty })?;
                Ok(Sel::Const(value.map(|v| v.to_bytes())))
            }
            Operand::Marker(text) => Err(cannot_infer(&text)),
        }
    }
}

fn plan_operation(
    table: &TableDef,
    op: ast::ArithmeticOp,
    lhs: &SelectorExpr,
    rhs: &SelectorExpr,
) -> Result<(Sel, String, CqlType), QueryError> {
    let (l, r) = (plan_operand(table, lhs)?, plan_operand(table, rhs)?);
    let side = |e: &SelectorExpr, o: &Operand, right: bool| match e {
        SelectorExpr::BinaryOp { op: inner, .. }
            if arith::precedence(*inner) < arith::precedence(op)
                || (right && arith::precedence(*inner) == arith::precedence(op)) =>
        {
            format!("({})", o.text())
        }
        _ => o.text().to_string(),
    };
    let name = format!("{} {} {}", side(lhs, &l, false), arith::symbol(op), side(rhs, &r, true));
    let ambiguous = || crate::bind::ambiguous_operation(op, l.text(), r.text());
    let literal_type = |lit: &ast::Literal, other: &Operand| match (lit, other) {
        (ast::Literal::String(_), Operand::Planned(_, _, CqlType::Ascii)) => Some(CqlType::Ascii),
        _ => functions::preferred_type(lit),
    };
    let lt = match &l {
        Operand::Planned(_, _, t) => Some(t.clone()),
        Operand::Literal(lit, _) => literal_type(lit, &r),
        Operand::Marker(_) => None,
    };
    let rt = match &r {
        Operand::Planned(_, _, t) => Some(t.clone()),
        Operand::Literal(lit, _) => literal_type(lit, &l),
        Operand::Marker(_) => None,
    };
    let (Some(lt), Some(rt)) = (lt, rt) else { return Err(ambiguous()) };
    let Some(ty) = arith::result_type(op, &lt, &rt) else {
        // A timestamp is also a bigint to Cassandra's overload resolution.
        let integer = |t: &CqlType| {
            matches!(t, CqlType::TinyInt | CqlType::SmallInt | CqlType::Int | CqlType::BigInt | CqlType::Timestamp)
        };
        if (lt == CqlType::Timestamp && integer(&rt)) || (rt == CqlType::Timestamp && integer(&lt)) {
            return Err(ambiguous());
        }
        return Err(crate::bind::unsupported_operation(op, l.text(), r.text()));
    };
    let left = Box::new(l.into_sel(&lt)?);
    let right = Box::new(r.into_sel(&rt)?);
    Ok((Sel::Op { op, left, lt, right, rt }, name, ty))
}

/// A call of one of `functions`' native functions.
fn plan_native(
    table: &TableDef,
    qualified: &str,
    fname: &str,
    args: &[SelectorExpr],
) -> Result<(Sel, String, CqlType), QueryError> {
    let operands: Vec<Operand> = args.iter().map(|a| plan_operand(table, a)).collect::<Result<_, _>>()?;
    let resolve_args: Vec<functions::Arg<'_>> = operands
        .iter()
        .map(|o| match o {
            Operand::Planned(_, _, t) => functions::Arg::Typed(t),
            Operand::Literal(l, _) => functions::Arg::Literal(l),
            Operand::Marker(_) => functions::Arg::Literal(&ast::Literal::Null),
        })
        .collect();
    let known = qualified == fname || qualified == format!("system.{fname}");
    let texts: Vec<String> = operands.iter().map(|o| o.text().to_string()).collect();
    let resolved = if known { functions::resolve(fname, &resolve_args, &texts)? } else { None };
    let Some(function) = resolved else {
        return Err(QueryError::Invalid(format!("Unknown function '{qualified}'")));
    };
    let name = if function.kind == functions::Kind::CastAs {
        let arg = operands.first().map(Operand::text).unwrap_or_default();
        format!("cast({arg} as {})", function.ty.to_cql())
    } else {
        format!("system.{fname}({})", operands.iter().map(Operand::text).collect::<Vec<_>>().join(", "))
    };
    let ty = function.ty.clone();
    let sels: Vec<Sel> =
        operands.into_iter().zip(&function.args).map(|(o, t)| o.into_sel(t)).collect::<Result<_, _>>()?;
    Ok((Sel::Native { function, args: sels }, name, ty))
}

/// The one argument of a conversion function, planned (it may be a column,
/// another function call, an aggregate, ...).
fn one_argument(table: &TableDef, fname: &str, args: &[SelectorExpr]) -> Result<(Sel, String, CqlType), QueryError> {
    let [arg] = args else {
        return Err(QueryError::Invalid(format!(
            "Invalid number of arguments in call to function system.{fname}: 1 required but {} provided",
            args.len()
        )));
    };
    plan_selector(table, arg)
}
