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
    /// A native function of one column converting its value (toTimestamp, ...).
    Convert {
        column: usize,
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
            Sel::Count | Sel::CountColumn(_) | Sel::Min(_) | Sel::Max(_) => true,
            Sel::ToJson { inner, .. } | Sel::Cast { inner, .. } => inner.is_aggregate(),
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
