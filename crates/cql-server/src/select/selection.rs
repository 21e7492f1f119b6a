//! The selection of a SELECT: output columns (plain, writetime, ttl, token(),
//! conversions, CAST, toJson(), aggregates) and their result metadata (also for
//! PREPARE); for SELECT JSON the result is one `[json]` text column.

use super::*;

/// One output column.
#[derive(Clone, Debug)]
pub(super) enum Sel {
    Column(usize),
    WriteTime(usize),
    Ttl(usize),
    Token,
    Count,
    CountColumn(usize),
    Min(usize),
    Max(usize),
    /// `sum(c)` or `avg(c)` of a numeric column (`aggregate`).
    Numeric(aggregate::Numeric, usize),
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
            Sel::Count | Sel::CountColumn(_) | Sel::Min(_) | Sel::Max(_) | Sel::Numeric(..) => true,
            Sel::ToJson { inner, .. } | Sel::Cast { inner, .. } | Sel::Convert { inner, .. } => inner.is_aggregate(),
            _ => false,
        }
    }

    /// A column, or toJson() of one: in an aggregate query, its value in the first row.
    pub(super) fn is_column(&self) -> bool {
        match self {
            Sel::Column(_) => true,
            Sel::ToJson { inner, .. } | Sel::Cast { inner, .. } => inner.is_column(),
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
    if sels.iter().any(Sel::is_aggregate) && !sels.iter().all(|s| s.is_aggregate() || s.is_column()) {
        return Err(QueryError::Invalid("Cannot mix aggregate and non-aggregate selectors other than columns".into()));
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
                "sum" | "avg" => {
                    // Each overload takes one argument.
                    let [arg] = args.as_slice() else {
                        return Err(QueryError::Invalid(aggregate::no_signature(&fname)));
                    };
                    let i = column_arg(table, arg, &fname)?;
                    let c = &table.columns[i];
                    if !aggregate::NUMERIC.contains(&c.ty) {
                        return Err(QueryError::Invalid(aggregate::no_signature(&fname)));
                    }
                    let kind = if fname == "sum" { aggregate::Numeric::Sum } else { aggregate::Numeric::Avg };
                    Ok((Sel::Numeric(kind, i), format!("system.{fname}({})", c.name), c.ty.clone()))
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
                    // xAsBlob takes an x, blobAsX a blob.
                    let (expected, ty) =
                        if other.ends_with("asblob") { (native, CqlType::Blob) } else { (CqlType::Blob, native) };
                    if from != expected {
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
                _ => Err(QueryError::Invalid(format!("Unknown function '{fname}'"))),
            }
        }
        SelectorExpr::Cast { expr, ty } => {
            let (inner, name, from) = plan_selector(table, expr)?;
            // Cassandra ignores a cast to the selector's own type.
            if from == *ty {
                return Ok((inner, name, from));
            }
            if !cast::supported(&from, ty) {
                let column = first_column(expr).unwrap_or(name);
                return Err(QueryError::Invalid(format!("{column} cannot be cast to {}", ty.to_cql())));
            }
            let name = format!("cast({name} as {})", ty.to_cql());
            Ok((Sel::Cast { inner: Box::new(inner), from, to: ty.clone() }, name, ty.clone()))
        }
        _ => Err(QueryError::invalid("This selector is not supported yet")),
    }
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

/// The first column a selector reads (Cassandra names it in cast errors).
fn first_column(expr: &SelectorExpr) -> Option<String> {
    match expr {
        SelectorExpr::Column(name) => Some(name.clone()),
        SelectorExpr::CellMetadata { target, .. } => first_column(target),
        SelectorExpr::FunctionCall { args, .. } => args.iter().find_map(first_column),
        SelectorExpr::Cast { expr, .. }
        | SelectorExpr::TypeHint { expr, .. }
        | SelectorExpr::Field { expr, .. }
        | SelectorExpr::Element { expr, .. } => first_column(expr),
        _ => None,
    }
}
