//! Evaluating terms: literals, bind markers, collection literals and the
//! native functions (now(), uuid(), toTimestamp(), fromJson(), ...) into the
//! serialized bytes of a target type, with Cassandra's error messages.
//!
//! Invariants:
//! - Every produced value has passed `types::codec::validate` for its type:
//!   nothing malformed reaches storage.
//! - Sets and maps are produced sorted and deduplicated by their comparator.

use bytes::Bytes;
use cql::ast::{ArithmeticOp, Literal, Term};
use cql_protocol::BoundValue;
use types::value::ValueError;
use types::{CqlType, Value};

use crate::clock::Clock;
use crate::error::QueryError;
use crate::functions::{self, arith, Arg};

/// A bound term: a value, null, or unset (a v4 "not set" bind value).
#[derive(Clone, Debug, PartialEq)]
pub enum Bound {
    Value(Bytes),
    Null,
    Unset,
}

impl Bound {
    pub fn into_option(self) -> Option<Bytes> {
        match self {
            Bound::Value(b) => Some(b),
            _ => None,
        }
    }
}

/// Bound values of one execution plus what functions need.
pub struct BindCtx<'a> {
    pub values: &'a [BoundValue],
    pub clock: &'a Clock,
}

/// Where a value goes, for error messages ("for \"col\" of type int").
pub struct Receiver<'a> {
    pub name: &'a str,
    pub ty: &'a CqlType,
}

fn literal_kind(l: &Literal) -> &'static str {
    match l {
        Literal::String(_) => "STRING",
        Literal::Integer(_) => "INTEGER",
        Literal::Float(_) => "FLOAT",
        Literal::Boolean(_) => "BOOLEAN",
        Literal::Uuid(_) => "UUID",
        Literal::Hex(_) => "HEX",
        Literal::Duration(_) => "DURATION",
        Literal::Null => "NULL",
    }
}

fn invalid_constant(l: &Literal, r: &Receiver<'_>) -> QueryError {
    QueryError::Invalid(format!(
        "Invalid {} constant ({}) for \"{}\" of type {}",
        literal_kind(l),
        l.raw_text(),
        r.name,
        r.ty.to_cql()
    ))
}

fn marshal(e: ValueError, r: &Receiver<'_>) -> QueryError {
    QueryError::Invalid(format!("Invalid value for \"{}\" of type {}: {}", r.name, r.ty.to_cql(), e))
}

/// Converts a literal to a `Value` of type `ty`.
pub fn literal_value(l: &Literal, r: &Receiver<'_>) -> Result<Option<Value>, QueryError> {
    use types::literal as lit;
    let ty = r.ty;
    let bad = || invalid_constant(l, r);
    let v = match (l, ty) {
        (Literal::Null, _) => return Ok(None),
        (Literal::String(s), CqlType::Text) => Value::Text(s.clone()),
        (Literal::String(s), CqlType::Ascii) => {
            if !s.is_ascii() {
                return Err(QueryError::Invalid(format!("Invalid ASCII character in string literal \"{}\"", r.name)));
            }
            Value::Ascii(s.clone())
        }
        (Literal::String(s), CqlType::Timestamp) => {
            Value::Timestamp(lit::parse_timestamp(s).map_err(|e| marshal(e, r))?)
        }
        (Literal::Integer(s), CqlType::Timestamp) => Value::Timestamp(s.parse().map_err(|_| bad())?),
        (Literal::String(s), CqlType::Date) => Value::Date(lit::parse_date(s).map_err(|e| marshal(e, r))?),
        (Literal::Integer(s), CqlType::Date) => Value::Date(s.parse().map_err(|_| bad())?),
        (Literal::String(s), CqlType::Time) => Value::Time(lit::parse_time(s).map_err(|e| marshal(e, r))?),
        (Literal::Integer(s), CqlType::Time) => Value::Time(s.parse().map_err(|_| bad())?),
        (Literal::String(s), CqlType::Inet) => Value::Inet(lit::parse_inet(s).map_err(|e| marshal(e, r))?),
        (Literal::Boolean(b), CqlType::Boolean) => Value::Boolean(*b),
        (Literal::String(s), CqlType::Boolean) => match s.to_ascii_lowercase().as_str() {
            "true" => Value::Boolean(true),
            "false" => Value::Boolean(false),
            _ => return Err(bad()),
        },
        (Literal::Integer(s), CqlType::TinyInt) => Value::TinyInt(s.parse().map_err(|_| bad())?),
        (Literal::Integer(s), CqlType::SmallInt) => Value::SmallInt(s.parse().map_err(|_| bad())?),
        (Literal::Integer(s), CqlType::Int) => Value::Int(s.parse().map_err(|_| bad())?),
        (Literal::Integer(s), CqlType::BigInt | CqlType::Counter) => Value::BigInt(s.parse().map_err(|_| bad())?),
        (Literal::Integer(s), CqlType::Varint) => Value::Varint(s.parse().map_err(|_| bad())?),
        (Literal::Integer(s) | Literal::Float(s), CqlType::Float) => {
            Value::Float(parse_float(s).ok_or_else(bad)? as f32)
        }
        (Literal::Integer(s) | Literal::Float(s), CqlType::Double) => Value::Double(parse_float(s).ok_or_else(bad)?),
        (Literal::Integer(s) | Literal::Float(s), CqlType::Decimal) => parse_decimal(s).ok_or_else(bad)?,
        (Literal::Uuid(u), CqlType::Uuid) => Value::Uuid(*u),
        (Literal::Uuid(u), CqlType::TimeUuid) => {
            if u.get_version_num() != 1 {
                return Err(QueryError::Invalid(format!(
                    "Invalid UUID constant ({u}) for \"{}\" of type timeuuid: not a time-based UUID",
                    r.name
                )));
            }
            Value::TimeUuid(*u)
        }
        (Literal::Hex(b), CqlType::Blob) => Value::Blob(b.clone()),
        (Literal::Duration(s), CqlType::Duration) | (Literal::String(s), CqlType::Duration) => {
            let (months, days, nanos) = lit::parse_duration(s).map_err(|e| marshal(e, r))?;
            Value::Duration { months, days, nanos }
        }
        _ => return Err(bad()),
    };
    Ok(Some(v))
}

fn parse_float(s: &str) -> Option<f64> {
    match s {
        "NaN" => Some(f64::NAN),
        "Infinity" | "+Infinity" => Some(f64::INFINITY),
        "-Infinity" => Some(f64::NEG_INFINITY),
        _ => s.parse().ok(),
    }
}

fn parse_decimal(s: &str) -> Option<Value> {
    let (mantissa, exp) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], s[i + 1..].parse::<i32>().ok()?),
        None => (s, 0),
    };
    let (int_part, frac) = match mantissa.find('.') {
        Some(i) => (&mantissa[..i], &mantissa[i + 1..]),
        None => (mantissa, ""),
    };
    let digits = format!("{int_part}{frac}");
    let unscaled: num_bigint::BigInt = digits.parse().ok()?;
    let scale = (frac.len() as i32).checked_sub(exp)?;
    Some(Value::Decimal { unscaled, scale })
}

/// Evaluates a term for a receiver of type `r.ty`.
pub fn eval(term: &Term, r: &Receiver<'_>, ctx: &BindCtx<'_>) -> Result<Bound, QueryError> {
    match term {
        Term::Bind(marker) => {
            let Some(v) = ctx.values.get(marker.index) else {
                return Err(QueryError::Invalid(format!(
                    "There were {} markers(?) in CQL but {} bound variables",
                    marker.index + 1,
                    ctx.values.len()
                )));
            };
            match v {
                BoundValue::Null => Ok(Bound::Null),
                BoundValue::Unset => Ok(Bound::Unset),
                BoundValue::Set(bytes) => {
                    types::codec::validate(r.ty, bytes).map_err(|e| {
                        QueryError::Invalid(format!("Exception while binding column {}: {}", r.name, e))
                    })?;
                    if contains_set_or_map(r.ty) {
                        // Cassandra canonicalizes sets and maps when binding
                        // (sorted, deduplicated): equal values, equal bytes.
                        let canonical = types::codec::normalize(r.ty, bytes).map_err(|e| marshal(e, r))?;
                        return Ok(Bound::Value(Bytes::from(canonical)));
                    }
                    Ok(Bound::Value(bytes.clone()))
                }
            }
        }
        // fromJson can give the empty value, which has no `Value` form.
        Term::FunctionCall { function, args } if is_from_json(&function.name) => {
            Ok(from_json_call(&function.name, args, r, ctx)?.map_or(Bound::Null, Bound::Value))
        }
        other => match eval_value(other, r, ctx)? {
            Some(v) => Ok(Bound::Value(Bytes::from(v.to_bytes()))),
            None => Ok(Bound::Null),
        },
    }
}

fn is_from_json(name: &str) -> bool {
    name.eq_ignore_ascii_case("fromjson") || name.eq_ignore_ascii_case("from_json")
}

/// Cassandra's preferred type for a literal (`Constants.Type.getPreferedTypeFor`).
fn literal_type(l: &Literal) -> &'static str {
    match l {
        Literal::String(_) => "text",
        Literal::Integer(s) if s.parse::<i32>().is_ok() => "int",
        Literal::Integer(s) if s.parse::<i64>().is_ok() => "bigint",
        Literal::Integer(_) => "varint",
        Literal::Float(_) => "double",
        Literal::Boolean(_) => "boolean",
        Literal::Uuid(u) if u.get_version_num() == 1 => "timeuuid",
        Literal::Uuid(_) => "uuid",
        Literal::Hex(_) => "tinyint",
        Literal::Duration(_) => "duration",
        Literal::Null => "null",
    }
}

/// `fromJson(text)` (also `from_json`): the receiver's value read from JSON
/// text (`types::json::from_json`), serialized; `None` for a null argument
/// or the JSON `null`. A failure to read the value is a function failure
/// (error code 0x1400), as Cassandra's.
fn from_json_call(name: &str, args: &[Term], r: &Receiver<'_>, ctx: &BindCtx<'_>) -> Result<Option<Bytes>, QueryError> {
    let name = name.to_ascii_lowercase();
    let [arg] = args else {
        return Err(QueryError::Invalid(format!("Invalid number of arguments for function system.{name}(text)")));
    };
    if let Term::Literal(l) = arg {
        if !matches!(l, Literal::String(_) | Literal::Null) {
            return Err(QueryError::Invalid(format!(
                "Function system.{name} requires an argument of type text, but found argument {} of type {}",
                l.raw_text(),
                literal_type(l)
            )));
        }
    }
    let arg_name = format!("arg0(system.{name})");
    let text = match eval(arg, &Receiver { name: &arg_name, ty: &CqlType::Text }, ctx)? {
        Bound::Null => return Ok(None),
        Bound::Unset => {
            return Err(QueryError::Invalid(format!("Invalid unset value for argument in call to function {name}")))
        }
        Bound::Value(b) => String::from_utf8_lossy(&b).into_owned(),
    };
    let failure = |message: String| QueryError::FunctionFailure {
        keyspace: "system".into(),
        function: name.clone(),
        arg_types: vec!["text".into()],
        message,
    };
    let json = types::json::parse(&text).map_err(|e| {
        failure(format!("execution of 'system.{name}[text]' failed: Could not decode JSON string '{text}': {e}"))
    })?;
    if json == types::json::Json::Null {
        return Ok(None);
    }
    let value = types::json::from_json(r.ty, &json, ctx.clock.now_micros() / 1000)
        .and_then(|bytes| types::codec::validate(r.ty, &bytes).map(|()| bytes));
    match value {
        Ok(bytes) => Ok(Some(Bytes::from(bytes))),
        Err(ValueError::InvalidRequest(msg)) => Err(QueryError::Invalid(msg)),
        Err(e) => Err(failure(format!("org.apache.cassandra.serializers.MarshalException: {e}"))),
    }
}

/// Evaluates a term to a `Value` (bind markers are deserialized).
pub fn eval_value(term: &Term, r: &Receiver<'_>, ctx: &BindCtx<'_>) -> Result<Option<Value>, QueryError> {
    let ty = r.ty;
    match term {
        Term::Literal(l) => literal_value(l, r),
        Term::Bind(_) => match eval(term, r, ctx)? {
            Bound::Value(b) => Value::deserialize(ty, &b).map(Some).map_err(|e| marshal(e, r)),
            _ => Ok(None),
        },
        Term::Negate(inner) => match eval_value(inner, r, ctx)? {
            Some(v) => arith::negate(&v)
                .map(Some)
                .ok_or_else(|| QueryError::Invalid(format!("Cannot negate a value of type {}", ty.to_cql()))),
            None => Ok(None),
        },
        Term::List(items) | Term::Set(items) => {
            let elem = match (ty, term) {
                (CqlType::List { elem, .. }, _) | (CqlType::Set { elem, .. }, _) => elem,
                _ => {
                    return Err(QueryError::Invalid(format!(
                        "Invalid list literal for {} of type {}",
                        r.name,
                        ty.to_cql()
                    )))
                }
            };
            let er = Receiver { name: r.name, ty: elem };
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                match eval_value(item, &er, ctx)? {
                    Some(v) => out.push(v),
                    None => return Err(QueryError::invalid("null is not supported inside collections")),
                }
            }
            Ok(Some(match ty {
                CqlType::Set { .. } => {
                    if matches!(term, Term::List(_)) {
                        return Err(QueryError::Invalid(format!(
                            "Invalid list literal for {} of type {}",
                            r.name,
                            ty.to_cql()
                        )));
                    }
                    normalize_set(out)
                }
                _ => {
                    if matches!(term, Term::Set(_)) {
                        return Err(QueryError::Invalid(format!(
                            "Invalid set literal for {} of type {}",
                            r.name,
                            ty.to_cql()
                        )));
                    }
                    Value::List(out)
                }
            }))
        }
        Term::EmptyMapOrSet => match ty {
            CqlType::Set { .. } => Ok(Some(Value::Set(Vec::new()))),
            CqlType::Map { .. } => Ok(Some(Value::Map(Vec::new()))),
            _ => Err(QueryError::Invalid(format!(
                "Invalid empty collection literal for {} of type {}",
                r.name,
                ty.to_cql()
            ))),
        },
        Term::Map(pairs) => {
            let CqlType::Map { key, value, .. } = ty else {
                return Err(QueryError::Invalid(format!("Invalid map literal for {} of type {}", r.name, ty.to_cql())));
            };
            let kr = Receiver { name: r.name, ty: key };
            let vr = Receiver { name: r.name, ty: value };
            let mut out = Vec::with_capacity(pairs.len());
            for (k, v) in pairs {
                let k = eval_value(k, &kr, ctx)?
                    .ok_or_else(|| QueryError::invalid("null is not supported inside collections"))?;
                let v = eval_value(v, &vr, ctx)?
                    .ok_or_else(|| QueryError::invalid("null is not supported inside collections"))?;
                out.push((k, v));
            }
            Ok(Some(normalize_map(out)))
        }
        // `(x)` where no tuple is expected groups an expression.
        Term::Tuple(items) if items.len() == 1 && !matches!(ty, CqlType::Tuple(_)) => match items.first() {
            Some(inner) => eval_value(inner, r, ctx),
            None => Ok(None),
        },
        Term::Tuple(items) => {
            let CqlType::Tuple(types) = ty else {
                return Err(QueryError::Invalid(format!(
                    "Invalid tuple literal for {}: {} is not a tuple",
                    r.name,
                    ty.to_cql()
                )));
            };
            if items.len() > types.len() {
                return Err(QueryError::Invalid(format!(
                    "Invalid tuple literal for {}: too many elements. Type {} expects {} but got {}",
                    r.name,
                    ty.to_cql(),
                    types.len(),
                    items.len()
                )));
            }
            let mut out = Vec::with_capacity(types.len());
            for (i, t) in types.iter().enumerate() {
                match items.get(i) {
                    Some(item) => out.push(eval_value(item, &Receiver { name: r.name, ty: t }, ctx)?),
                    None => out.push(None),
                }
            }
            Ok(Some(Value::Tuple(out)))
        }
        Term::Udt(fields) => {
            let CqlType::Udt { fields: defs, name, .. } = ty else {
                return Err(QueryError::Invalid(format!(
                    "Invalid user type literal for {} of type {}",
                    r.name,
                    ty.to_cql()
                )));
            };
            for (f, _) in fields {
                if !defs.iter().any(|(n, _)| n == f) {
                    return Err(QueryError::Invalid(format!(
                        "Unknown field '{f}' in value of user defined type {name}"
                    )));
                }
            }
            let mut out = Vec::with_capacity(defs.len());
            for (fname, fty) in defs {
                match fields.iter().find(|(n, _)| n == fname) {
                    Some((_, t)) => out.push(eval_value(t, &Receiver { name: r.name, ty: fty }, ctx)?),
                    None => out.push(None),
                }
            }
            Ok(Some(Value::Udt(out)))
        }
        Term::FunctionCall { function, args } => call_function(&function.name, args, r, ctx),
        Term::Cast { term, .. } | Term::TypeHint { term, .. } => eval_value(term, r, ctx),
        Term::BinaryOp { op, lhs, rhs } => eval_operation(*op, lhs, rhs, r, ctx),
    }
}

fn contains_set_or_map(ty: &CqlType) -> bool {
    match ty {
        CqlType::Set { .. } | CqlType::Map { .. } => true,
        CqlType::List { elem, .. } => contains_set_or_map(elem),
        CqlType::Tuple(items) => items.iter().any(contains_set_or_map),
        CqlType::Udt { fields, .. } => fields.iter().any(|(_, t)| contains_set_or_map(t)),
        _ => false,
    }
}

fn normalize_set(mut items: Vec<Value>) -> Value {
    items.sort_by(types::compare::compare_values);
    items.dedup_by(|a, b| types::compare::compare_values(a, b).is_eq());
    Value::Set(items)
}

fn normalize_map(mut pairs: Vec<(Value, Value)>) -> Value {
    // Later entries win for duplicate keys, as in Cassandra.
    pairs.reverse();
    pairs.sort_by(|a, b| types::compare::compare_values(&a.0, &b.0));
    pairs.dedup_by(|a, b| types::compare::compare_values(&a.0, &b.0).is_eq());
    Value::Map(pairs)
}

/// The native scalar functions usable in terms.
fn call_function(name: &str, args: &[Term], r: &Receiver<'_>, ctx: &BindCtx<'_>) -> Result<Option<Value>, QueryError> {
    use types::literal as lit;
    let lname = name.to_ascii_lowercase();
    let argc = |n: usize| -> Result<(), QueryError> {
        if args.len() != n {
            return Err(QueryError::Invalid(format!(
                "Invalid number of arguments in call to function system.{lname}: {n} required but {} provided",
                args.len()
            )));
        }
        Ok(())
    };
    let arg = |i: usize, ty: &CqlType| -> Result<Option<Value>, QueryError> {
        eval_value(&args[i], &Receiver { name: &lname, ty }, ctx)
    };
    let canonical = legacy_function_name(&lname);
    let result = match canonical.as_str() {
        "fromjson" | "from_json" => {
            return match from_json_call(name, args, r, ctx)? {
                Some(bytes) => Value::deserialize(r.ty, &bytes).map(Some).map_err(|e| marshal(e, r)),
                None => Ok(None),
            }
        }
        "now" | "currenttimeuuid" => {
            argc(0)?;
            Value::TimeUuid(ctx.clock.new_timeuuid())
        }
        "uuid" => {
            argc(0)?;
            Value::Uuid(uuid::Uuid::new_v4())
        }
        "currenttimestamp" => {
            argc(0)?;
            Value::Timestamp(ctx.clock.now_micros() / 1000)
        }
        "currentdate" => {
            argc(0)?;
            Value::Date(lit::timestamp_to_date(ctx.clock.now_micros() / 1000))
        }
        "currenttime" => {
            argc(0)?;
            Value::Time((ctx.clock.now_micros() % 86_400_000_000) * 1000)
        }
        "mintimeuuid" | "maxtimeuuid" => {
            argc(1)?;
            let Some(Value::Timestamp(ms)) = arg(0, &CqlType::Timestamp)? else { return Ok(None) };
            Value::TimeUuid(if canonical == "mintimeuuid" { lit::min_timeuuid(ms) } else { lit::max_timeuuid(ms) })
        }
        "totimestamp" | "dateof" | "todate" | "tounixtimestamp" | "unixtimestampof" => {
            argc(1)?;
            // The argument's type is whatever the term is; try timeuuid, then date, then timestamp.
            let ms = arg_as_unix_ms(&args[0], &lname, ctx)?;
            let Some(ms) = ms else { return Ok(None) };
            match canonical.as_str() {
                "totimestamp" | "dateof" => Value::Timestamp(ms),
                "todate" => Value::Date(lit::timestamp_to_date(ms)),
                _ => Value::BigInt(ms),
            }
        }
        "token" => {
            return Err(QueryError::Invalid("token() can only be used in the WHERE clause or in a selection".into()))
        }
        other if other.starts_with("blobas") => {
            argc(1)?;
            let Some(Value::Blob(b)) = arg(0, &CqlType::Blob)? else { return Ok(None) };
            let ty = CqlType::from_simple_name(&other[6..])
                .ok_or_else(|| QueryError::Invalid(format!("Unknown function system.{other}")))?;
            return Value::deserialize(&ty, &b).map(Some).map_err(|e| marshal(e, r));
        }
        other if other.ends_with("asblob") => {
            argc(1)?;
            let ty = CqlType::from_simple_name(&other[..other.len() - 6])
                .ok_or_else(|| QueryError::Invalid(format!("Unknown function system.{other}")))?;
            match arg(0, &ty)? {
                Some(v) => Value::Blob(v.to_bytes()),
                None => return Ok(None),
            }
        }
        _ => {
            let typed: Vec<Option<CqlType>> = args.iter().map(static_type).collect();
            let resolve_args: Vec<Arg<'_>> = args
                .iter()
                .zip(&typed)
                .map(|(a, t)| match (a, t) {
                    (_, Some(t)) => Arg::Typed(t),
                    (Term::Literal(l), None) => Arg::Literal(l),
                    // A bind marker or an untyped expression: the receiver's type.
                    _ => Arg::Typed(r.ty),
                })
                .collect();
            let texts: Vec<String> = args.iter().map(term_text).collect();
            // The overload returning the receiver's type, its literals read
            // as that type (`round(1.5)` for a decimal), is preferred, as
            // Cassandra's resolution filters overloads by their return type.
            let as_receiver: Vec<Arg<'_>> = resolve_args
                .iter()
                .map(|a| match a {
                    Arg::Literal(l) if literal_fits(l, r.ty) && !matches!(l, Literal::Null) => Arg::Typed(r.ty),
                    other => *other,
                })
                .collect();
            let preferred = functions::resolve(&lname, &as_receiver, &texts).ok().flatten().filter(|n| n.ty == *r.ty);
            let resolved = match preferred {
                Some(native) => Some(native),
                None => functions::resolve(&lname, &resolve_args, &texts)?,
            };
            let Some(native) = resolved else {
                return Err(QueryError::Invalid(format!("Unknown function '{lname}'")));
            };
            let mut values = Vec::with_capacity(args.len());
            for (i, (a, ty)) in args.iter().zip(&native.args).enumerate() {
                let name = format!("arg{i}(system.{lname})");
                values.push(eval_value(a, &Receiver { name: &name, ty }, ctx)?);
            }
            match functions::call(&native, &values, ctx.clock)? {
                Some(v) => v,
                None => return Ok(None),
            }
        }
    };
    coerce(result, r)
}

/// The type a term has on its own, whatever receives it: that of a type
/// hint, a cast, a function's result or an operation between typed terms;
/// `None` for literals, null, bind markers and operations between them.
pub fn static_type(term: &Term) -> Option<CqlType> {
    match term {
        Term::TypeHint { ty: cql::ast::TypeExpr::Native(t), .. } | Term::Cast { ty: t, .. } => Some(t.clone()),
        Term::Negate(inner) => static_type(inner).and_then(|t| arith::negate_type(&t)),
        Term::Tuple(items) if items.len() == 1 => items.first().and_then(static_type),
        Term::BinaryOp { op, lhs, rhs } => {
            let (l, r) = (static_type(lhs), static_type(rhs));
            match (l, r) {
                (Some(l), Some(r)) => arith::result_type(*op, &l, &r),
                _ => None,
            }
        }
        Term::FunctionCall { function, args } => {
            let lname = function.name.to_ascii_lowercase();
            let canonical = legacy_function_name(&lname);
            match canonical.as_str() {
                "totimestamp" | "dateof" => return Some(CqlType::Timestamp),
                "todate" => return Some(CqlType::Date),
                "tounixtimestamp" | "unixtimestampof" => return Some(CqlType::BigInt),
                "mintimeuuid" | "maxtimeuuid" => return Some(CqlType::TimeUuid),
                "uuid" => return Some(CqlType::Uuid),
                f if f.ends_with("asblob") => return Some(CqlType::Blob),
                f if f.starts_with("blobas") => return CqlType::from_simple_name(&f[6..]),
                _ => {}
            }
            let typed: Vec<Option<CqlType>> = args.iter().map(static_type).collect();
            let resolve_args: Option<Vec<Arg<'_>>> = args
                .iter()
                .zip(&typed)
                .map(|(a, t)| match (a, t) {
                    (_, Some(t)) => Some(Arg::Typed(t)),
                    (Term::Literal(l), None) => Some(Arg::Literal(l)),
                    _ => None,
                })
                .collect();
            let texts: Vec<String> = args.iter().map(term_text).collect();
            functions::resolve(&lname, &resolve_args?, &texts).ok().flatten().map(|n| n.ty)
        }
        _ => None,
    }
}

/// A term as Cassandra prints it in messages and column names.
pub fn term_text(term: &Term) -> String {
    match term {
        Term::Literal(Literal::String(s)) => format!("'{}'", s.replace('\'', "''")),
        Term::Literal(Literal::Null) => "NULL".into(),
        Term::Literal(l) => l.raw_text(),
        Term::Bind(m) => m.name.as_ref().map_or_else(|| "?".into(), |n| format!(":{n}")),
        Term::List(items) => format!("[{}]", items.iter().map(term_text).collect::<Vec<_>>().join(", ")),
        Term::Set(items) => format!("{{{}}}", items.iter().map(term_text).collect::<Vec<_>>().join(", ")),
        Term::Tuple(items) => format!("({})", items.iter().map(term_text).collect::<Vec<_>>().join(", ")),
        Term::Map(pairs) => format!(
            "{{{}}}",
            pairs.iter().map(|(k, v)| format!("{}: {}", term_text(k), term_text(v))).collect::<Vec<_>>().join(", ")
        ),
        Term::Udt(fields) => format!(
            "{{{}}}",
            fields.iter().map(|(k, v)| format!("{k}: {}", term_text(v))).collect::<Vec<_>>().join(", ")
        ),
        Term::EmptyMapOrSet => "{}".into(),
        Term::FunctionCall { function, args } => {
            format!("{}({})", function, args.iter().map(term_text).collect::<Vec<_>>().join(", "))
        }
        Term::Cast { term, ty } => format!("CAST({} AS {})", term_text(term), ty.to_cql()),
        Term::TypeHint { ty, term } => format!("({ty}){}", term_text(term)),
        Term::Negate(inner) => format!("-{}", term_text(inner)),
        Term::BinaryOp { op, lhs, rhs } => {
            let side = |t: &Term, right: bool| match t {
                Term::BinaryOp { op: inner, .. }
                    if arith::precedence(*inner) < arith::precedence(*op)
                        || (right && arith::precedence(*inner) == arith::precedence(*op)) =>
                {
                    format!("({})", term_text(t))
                }
                _ => term_text(t),
            };
            format!("{} {} {}", side(lhs, false), arith::symbol(*op), side(rhs, true))
        }
    }
}

/// Cassandra's refusal of an operation whose operand types it cannot infer.
pub fn ambiguous_operation(op: ArithmeticOp, lhs: &str, rhs: &str) -> QueryError {
    QueryError::Invalid(format!(
        "Ambiguous '{}' operation with args {lhs} and {rhs}: use type hint to disambiguate, example '(int) ?'",
        arith::symbol(op)
    ))
}

/// Cassandra's refusal of an operation between types it has no operation for.
pub fn unsupported_operation(op: ArithmeticOp, lhs: &str, rhs: &str) -> QueryError {
    QueryError::Invalid(format!("the '{}' operation is not supported between {lhs} and {rhs}", arith::symbol(op)))
}

/// Whether an untyped literal can be read as a `ty`.
fn literal_fits(l: &Literal, ty: &CqlType) -> bool {
    match l {
        Literal::Null => true,
        Literal::Integer(_) => arith::is_numeric(ty) || matches!(ty, CqlType::Timestamp | CqlType::Date),
        Literal::Float(_) => matches!(ty, CqlType::Float | CqlType::Double | CqlType::Decimal),
        Literal::String(_) => matches!(ty, CqlType::Text | CqlType::Ascii | CqlType::Timestamp | CqlType::Date),
        Literal::Duration(_) => *ty == CqlType::Duration,
        _ => false,
    }
}

/// Whether a term without a type of its own can be read as a `ty`.
fn untyped_fits(t: &Term, ty: &CqlType) -> bool {
    match t {
        Term::Literal(l) => literal_fits(l, ty),
        Term::Negate(inner) => arith::negate_type(ty).is_some() && untyped_fits(inner, ty),
        Term::BinaryOp { op, lhs, rhs } => {
            arith::result_type(*op, ty, ty).is_some() && untyped_fits(lhs, ty) && untyped_fits(rhs, ty)
        }
        // A function whose overload depends on its markers: resolved for `ty`.
        Term::Bind(_) | Term::FunctionCall { .. } => true,
        Term::Tuple(items) if items.len() == 1 => items.iter().all(|i| untyped_fits(i, ty)),
        _ => false,
    }
}

/// The types the operands of `lhs op rhs` are read as, for a receiver of
/// type `receiver` (Cassandra's overload resolution of the operation's
/// function, for the cases it can decide): a typed operand keeps its type,
/// an untyped one takes the receiver's (the right side of `timestamp ±`
/// is a duration).
pub fn operand_types(
    op: ArithmeticOp,
    lhs: &Term,
    rhs: &Term,
    receiver: &CqlType,
) -> Result<(CqlType, CqlType), QueryError> {
    let (lt, rt) = (static_type(lhs), static_type(rhs));
    let marker = |t: &Term, st: &Option<CqlType>| st.is_none() && matches!(t, Term::Bind(_));
    let duration_right =
        matches!(rhs, Term::Literal(Literal::Duration(_))) && matches!(receiver, CqlType::Timestamp | CqlType::Date);
    if (marker(lhs, &lt) && !duration_right) || marker(rhs, &rt) {
        return Err(ambiguous_operation(op, &term_text(lhs), &term_text(rhs)));
    }
    let unsupported = || unsupported_operation(op, &term_text(lhs), &term_text(rhs));
    let temporal = matches!(receiver, CqlType::Timestamp | CqlType::Date);
    let pick = |t: &Term, st: Option<CqlType>, right: bool| -> Result<CqlType, QueryError> {
        if let Some(st) = st {
            return Ok(st);
        }
        let want = if right && temporal { CqlType::Duration } else { receiver.clone() };
        if untyped_fits(t, &want) {
            Ok(want)
        } else {
            Err(unsupported())
        }
    };
    let l = pick(lhs, lt, false)?;
    let r = pick(rhs, rt, true)?;
    match arith::result_type(op, &l, &r) {
        Some(ty) if ty == *receiver || (ty == CqlType::Ascii && *receiver == CqlType::Text) => Ok((l, r)),
        _ => Err(unsupported()),
    }
}

/// `lhs op rhs` for a receiver of type `r.ty`.
fn eval_operation(
    op: ArithmeticOp,
    lhs: &Term,
    rhs: &Term,
    r: &Receiver<'_>,
    ctx: &BindCtx<'_>,
) -> Result<Option<Value>, QueryError> {
    let (lt, rt) = operand_types(op, lhs, rhs, r.ty)?;
    for (t, ty) in [(lhs, &lt), (rhs, &rt)] {
        if let Term::Literal(Literal::Integer(s)) = t {
            let fits = match ty {
                CqlType::TinyInt => s.parse::<i8>().is_ok(),
                CqlType::SmallInt => s.parse::<i16>().is_ok(),
                CqlType::Int => s.parse::<i32>().is_ok(),
                CqlType::BigInt | CqlType::Counter => s.parse::<i64>().is_ok(),
                _ => true,
            };
            if !fits {
                return Err(QueryError::Invalid(format!("Unable to make {} from '{s}'", ty.to_cql())));
            }
        }
    }
    let l = eval_value(lhs, &Receiver { name: r.name, ty: &lt }, ctx)?;
    let rv = eval_value(rhs, &Receiver { name: r.name, ty: &rt }, ctx)?;
    let (Some(l), Some(rv)) = (l, rv) else { return Ok(None) };
    let v = arith::apply(op, &lt, &l, &rt, &rv)?;
    Ok(Some(match (v, r.ty) {
        (Value::Ascii(s), CqlType::Text) => Value::Text(s),
        (v, _) => v,
    }))
}

fn arg_as_unix_ms(term: &Term, fname: &str, ctx: &BindCtx<'_>) -> Result<Option<i64>, QueryError> {
    use types::literal as lit;
    for ty in [CqlType::TimeUuid, CqlType::Timestamp, CqlType::Date] {
        if let Ok(v) = eval_value(term, &Receiver { name: fname, ty: &ty }, ctx) {
            return Ok(match v {
                Some(Value::TimeUuid(u)) => lit::timeuuid_unix_ms(&u),
                Some(Value::Timestamp(ms)) => Some(ms),
                Some(Value::Date(d)) => Some(lit::date_to_timestamp(d)),
                _ => None,
            });
        }
    }
    Err(QueryError::Invalid(format!("Type error: cannot pass the argument to function {fname}")))
}

/// Checks a function result against the receiver, allowing the compatible pairs Cassandra allows.
fn coerce(v: Value, r: &Receiver<'_>) -> Result<Option<Value>, QueryError> {
    let ok = v.is_of_type(r.ty)
        || matches!((&v, r.ty), (Value::TimeUuid(_), CqlType::Uuid) | (Value::Ascii(_), CqlType::Text));
    if !ok {
        return Err(QueryError::Invalid(format!(
            "Type error: cannot assign result of function to \"{}\" of type {}",
            r.name,
            r.ty.to_cql()
        )));
    }
    Ok(Some(match (v, r.ty) {
        (Value::TimeUuid(u), CqlType::Uuid) => Value::Uuid(u),
        (v, _) => v,
    }))
}

/// The lower-case name a native function has in Cassandra before 5.0 for
/// its snake_case spelling (CASSANDRA-18037: `to_timestamp` for
/// `toTimestamp`, `int_as_blob` for `intAsBlob`, ...); other names as given.
pub(crate) fn legacy_function_name(lname: &str) -> String {
    match lname {
        "current_timestamp" | "current_date" | "current_time" | "current_timeuuid" | "min_timeuuid"
        | "max_timeuuid" | "to_date" | "to_timestamp" | "to_unix_timestamp" => lname.replace('_', ""),
        _ => {
            let simple = |t: &str| !t.is_empty() && !t.contains('_');
            match (lname.strip_prefix("blob_as_"), lname.strip_suffix("_as_blob")) {
                (Some(t), _) if simple(t) => format!("blobas{t}"),
                (_, Some(t)) if simple(t) => format!("{t}asblob"),
                _ => lname.to_string(),
            }
        }
    }
}
