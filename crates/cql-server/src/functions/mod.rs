//! Cassandra's native scalar functions beyond the conversions `bind` and
//! `select` handle themselves, shared by terms and selectors: arithmetic
//! (`arith`), the math functions (`abs`, `exp`, `log`, `log10`, `round`),
//! `floor` time bucketing (`time`), the collection functions (`map_keys`,
//! `collection_count`, `collection_sum`, ...), `cast_as_<type>` and the
//! current time functions (`now()`, `currentTimestamp()`, ...).
//!
//! Invariants:
//! - `resolve` picks the overload from the arguments' types (an untyped
//!   literal takes the type Cassandra prefers for it, or the type the
//!   function expects at its position); `call` then gets values of exactly
//!   those types and returns a value of `Native::ty` (or null).
//! - A null argument gives a null result; errors carry Cassandra's wording.

pub mod arith;
mod decimal;
mod mask;
pub mod time;

use cql::ast::Literal;
use num_bigint::{BigInt, Sign};
use types::{CqlType, Value};

use crate::clock::Clock;
use crate::error::QueryError;

/// An argument as resolution sees it.
#[derive(Clone, Copy, Debug)]
pub enum Arg<'a> {
    /// An argument of a known type (a column, a function's result, a hinted term).
    Typed(&'a CqlType),
    /// An untyped literal.
    Literal(&'a Literal),
}

/// Which native function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    Abs,
    Exp,
    Log,
    Log10,
    Round,
    Floor,
    MapKeys,
    MapValues,
    CollectionCount,
    CollectionMin,
    CollectionMax,
    CollectionSum,
    CollectionAvg,
    CastAs,
    CurrentTimeUuid,
    CurrentTimestamp,
    CurrentDate,
    CurrentTime,
    MaskNull,
    MaskDefault,
    MaskReplace,
    MaskInner,
    MaskOuter,
    MaskHash,
}

/// A resolved call: the function, its name as written (lower case), the
/// types its arguments are given in, and its result type.
#[derive(Clone, Debug, PartialEq)]
pub struct Native {
    pub kind: Kind,
    pub name: String,
    pub args: Vec<CqlType>,
    pub ty: CqlType,
}

/// The type Cassandra prefers for an untyped literal
/// (`Constants.Type.getPreferedTypeFor`); `None` for null.
pub fn preferred_type(l: &Literal) -> Option<CqlType> {
    Some(match l {
        Literal::String(_) => CqlType::Text,
        Literal::Integer(s) if s.parse::<i32>().is_ok() => CqlType::Int,
        Literal::Integer(s) if s.parse::<i64>().is_ok() => CqlType::BigInt,
        Literal::Integer(_) => CqlType::Varint,
        Literal::Float(_) => CqlType::Double,
        Literal::Boolean(_) => CqlType::Boolean,
        Literal::Uuid(u) if u.get_version_num() == 1 => CqlType::TimeUuid,
        Literal::Uuid(_) => CqlType::Uuid,
        Literal::Hex(_) => CqlType::Blob,
        Literal::Duration(_) => CqlType::Duration,
        Literal::Null => return None,
    })
}

fn arg_type(arg: &Arg<'_>, expected: Option<&CqlType>) -> Option<CqlType> {
    match arg {
        Arg::Typed(t) => Some((*t).clone()),
        Arg::Literal(l) => match (l, expected) {
            (Literal::Null, Some(t)) => Some(t.clone()),
            (Literal::String(_), Some(t @ (CqlType::Timestamp | CqlType::Date | CqlType::Time))) => Some(t.clone()),
            (Literal::Integer(_), Some(t)) if arith::is_numeric(t) => Some(t.clone()),
            _ => preferred_type(l),
        },
    }
}

/// The native scalar types (the sources of the `cast_as_<type>` overloads).
const NATIVE_TYPES: [CqlType; 20] = [
    CqlType::Ascii,
    CqlType::BigInt,
    CqlType::Blob,
    CqlType::Boolean,
    CqlType::Counter,
    CqlType::Date,
    CqlType::Decimal,
    CqlType::Double,
    CqlType::Duration,
    CqlType::Float,
    CqlType::Inet,
    CqlType::Int,
    CqlType::SmallInt,
    CqlType::Text,
    CqlType::Time,
    CqlType::Timestamp,
    CqlType::TimeUuid,
    CqlType::TinyInt,
    CqlType::Uuid,
    CqlType::Varint,
];

/// The math functions' overloads: each number type to itself.
const MATH_TYPES: [CqlType; 9] = [
    CqlType::TinyInt,
    CqlType::SmallInt,
    CqlType::Int,
    CqlType::BigInt,
    CqlType::Counter,
    CqlType::Float,
    CqlType::Double,
    CqlType::Varint,
    CqlType::Decimal,
];

fn no_signature(name: &str, known: &[String]) -> QueryError {
    QueryError::Invalid(format!(
        "Invalid call to function {name}, none of its type signatures match (known type signatures: {})",
        known.join(", ")
    ))
}

/// No `cast_as_<to>` overload takes the argument: Cassandra's message,
/// listing the overloads (`called`: the function as the query names it;
/// `system.cast_as_<to>` for a `CAST(x AS to)`).
pub(crate) fn no_cast(called: &str, to: &CqlType) -> QueryError {
    let known: Vec<String> = NATIVE_TYPES
        .iter()
        .filter(|from| *from != to && crate::select::cast_supported(from, to))
        .map(|from| format!("system.cast_as_{} : ({}) -> {}", to.to_cql(), from.to_cql(), to.to_cql()))
        .collect();
    no_signature(called, &known)
}

fn arg_count(name: &str, required: usize, given: usize) -> Result<(), QueryError> {
    if required != given {
        return Err(QueryError::Invalid(format!(
            "Invalid number of arguments in call to function system.{name}: {required} required but {given} provided"
        )));
    }
    Ok(())
}

/// Resolves a call of `name` (lower case, as written) with arguments
/// written as `texts` (for messages); `Ok(None)` when `name` is none of this
/// module's functions.
pub fn resolve(name: &str, args: &[Arg<'_>], texts: &[String]) -> Result<Option<Native>, QueryError> {
    let canonical = crate::bind::legacy_function_name(name);
    let native = |kind: Kind, args: Vec<CqlType>, ty: CqlType| Native { kind, name: name.to_string(), args, ty };
    let current = |kind: Kind, ty: CqlType| -> Result<Option<Native>, QueryError> {
        arg_count(name, 0, args.len())?;
        Ok(Some(native(kind, Vec::new(), ty)))
    };
    match canonical.as_str() {
        "now" | "currenttimeuuid" => current(Kind::CurrentTimeUuid, CqlType::TimeUuid),
        "currenttimestamp" => current(Kind::CurrentTimestamp, CqlType::Timestamp),
        "currentdate" => current(Kind::CurrentDate, CqlType::Date),
        "currenttime" => current(Kind::CurrentTime, CqlType::Time),
        "abs" | "exp" | "log" | "log10" | "round" => {
            let kind = match name {
                "abs" => Kind::Abs,
                "exp" => Kind::Exp,
                "log" => Kind::Log,
                "log10" => Kind::Log10,
                _ => Kind::Round,
            };
            let known: Vec<String> =
                MATH_TYPES.iter().map(|t| format!("system.{name} : ({0}) -> {0}", t.to_cql())).collect();
            if let [Arg::Literal(Literal::Null)] = args {
                return Err(QueryError::Invalid(format!(
                    "Ambiguous call to function {name} (can be matched by following signatures: {}): use type casts to disambiguate",
                    known.join(", ")
                )));
            }
            let ty = match args {
                [a] => arg_type(a, None).filter(|t| MATH_TYPES.contains(t)),
                _ => None,
            };
            let Some(ty) = ty else {
                return Err(no_signature(name, &known));
            };
            Ok(Some(native(kind, vec![ty.clone()], ty)))
        }
        "floor" => resolve_floor(name, args).map(Some),
        "mask_null" | "mask_default" | "mask_replace" | "mask_inner" | "mask_outer" | "mask_hash" => {
            resolve_mask(name, args, texts).map(Some)
        }
        "map_keys" | "map_values" => {
            arg_count(name, 1, args.len())?;
            let ty = args.first().and_then(|a| arg_type(a, None));
            let Some(CqlType::Map { key, value, .. }) = &ty else {
                return Err(QueryError::Invalid(format!(
                    "Function system.{name} requires a map argument, but found argument {} of type {}",
                    texts.first().map_or("", String::as_str),
                    ty.map_or("null".into(), |t| t.to_cql())
                )));
            };
            let (kind, out) = if name == "map_keys" {
                (Kind::MapKeys, CqlType::Set { elem: key.clone(), frozen: false })
            } else {
                (Kind::MapValues, CqlType::List { elem: value.clone(), frozen: false })
            };
            Ok(Some(native(kind, vec![ty.clone().unwrap_or(CqlType::Blob)], out)))
        }
        "collection_count" | "collection_min" | "collection_max" | "collection_sum" | "collection_avg" => {
            arg_count(name, 1, args.len())?;
            let ty = args.first().and_then(|a| arg_type(a, None));
            let elem = match &ty {
                Some(CqlType::List { elem, .. } | CqlType::Set { elem, .. }) => Some((**elem).clone()),
                _ => None,
            };
            let kind = match name {
                "collection_count" => Kind::CollectionCount,
                "collection_min" => Kind::CollectionMin,
                "collection_max" => Kind::CollectionMax,
                "collection_sum" => Kind::CollectionSum,
                _ => Kind::CollectionAvg,
            };
            let out = match (&kind, &ty, elem) {
                (Kind::CollectionCount, Some(CqlType::Map { .. }), _) | (Kind::CollectionCount, _, Some(_)) => {
                    Some(CqlType::Int)
                }
                (Kind::CollectionMin | Kind::CollectionMax, _, Some(e)) => Some(e),
                (Kind::CollectionSum | Kind::CollectionAvg, _, Some(e))
                    if arith::is_numeric(&e) && e != CqlType::Counter =>
                {
                    Some(e)
                }
                _ => None,
            };
            let Some(out) = out else {
                let what = if matches!(kind, Kind::CollectionSum | Kind::CollectionAvg) {
                    "a numeric set/list"
                } else if kind == Kind::CollectionCount {
                    "a collection"
                } else {
                    "a set or list"
                };
                return Err(QueryError::Invalid(format!(
                    "Function system.{name} requires {what} argument, but found argument {} of type {}",
                    texts.first().map_or("", String::as_str),
                    ty.map_or("null".into(), |t| t.to_cql())
                )));
            };
            Ok(Some(native(kind, vec![ty.unwrap_or(CqlType::Blob)], out)))
        }
        other => {
            let Some(target) = other.strip_prefix("cast_as_") else { return Ok(None) };
            let Some(to) = CqlType::from_simple_name(target).filter(|t| t.to_cql() == target) else {
                return Ok(None);
            };
            let from = match args {
                [a] => arg_type(a, None),
                _ => None,
            };
            match from {
                Some(from) if from != to && crate::select::cast_supported(&from, &to) => {
                    Ok(Some(native(Kind::CastAs, vec![from], to)))
                }
                _ => Err(no_cast(other, &to)),
            }
        }
    }
}

fn resolve_mask(name: &str, args: &[Arg<'_>], texts: &[String]) -> Result<Native, QueryError> {
    let text_of = |i: usize| texts.get(i).cloned().unwrap_or_default();
    let is_null = |a: &Arg<'_>| matches!(a, Arg::Literal(Literal::Null));
    let native = |kind: Kind, args: Vec<CqlType>, ty: CqlType| Native { kind, name: name.to_string(), args, ty };
    let signature = match name {
        "mask_hash" => "any, [text]",
        "mask_replace" => "any, any",
        "mask_inner" | "mask_outer" => "[text|varchar|ascii], int, int, [text]",
        _ => "any",
    };
    let count_ok = match name {
        "mask_null" | "mask_default" => args.len() == 1,
        "mask_hash" => (1..=2).contains(&args.len()),
        "mask_replace" => args.len() == 2,
        _ => (3..=4).contains(&args.len()),
    };
    if !count_ok {
        return Err(QueryError::Invalid(format!(
            "Invalid number of arguments for function system.{name}({signature})"
        )));
    }
    let first = args.first().copied().ok_or_else(|| QueryError::invalid("missing argument"))?;
    if name == "mask_inner" || name == "mask_outer" {
        let ty = match first {
            Arg::Literal(Literal::String(_)) => CqlType::Ascii,
            Arg::Literal(Literal::Null) => CqlType::Text,
            other => arg_type(&other, None).unwrap_or(CqlType::Blob),
        };
        if !matches!(ty, CqlType::Text | CqlType::Ascii) {
            return Err(QueryError::Invalid(format!(
                "Function system.{name} requires an argument of type [text|varchar|ascii], but found argument {} of type {}",
                text_of(0),
                ty.to_cql()
            )));
        }
        let mut types = vec![ty.clone(), CqlType::Int, CqlType::Int, CqlType::Text];
        types.truncate(args.len());
        for (i, (a, t)) in args.iter().zip(&types).enumerate().skip(1) {
            if arg_type(a, Some(t)).as_ref() != Some(t) {
                return Err(QueryError::Invalid(format!(
                    "Type error: {} cannot be passed as argument {i} of function system.{name} of type {}",
                    text_of(i),
                    t.to_cql()
                )));
            }
        }
        let kind = if name == "mask_inner" { Kind::MaskInner } else { Kind::MaskOuter };
        return Ok(native(kind, types, ty));
    }
    if is_null(&first) {
        return Err(QueryError::Invalid(format!(
            "Cannot infer type of argument NULL in call to function system.{name}({signature}): use type casts to disambiguate"
        )));
    }
    let ty = arg_type(&first, None).unwrap_or(CqlType::Blob);
    match name {
        "mask_null" => Ok(native(Kind::MaskNull, vec![ty.clone()], ty)),
        "mask_default" => Ok(native(Kind::MaskDefault, vec![ty.clone()], ty)),
        "mask_replace" => {
            let second = args.get(1).and_then(|a| arg_type(a, Some(&ty)));
            if second.as_ref() != Some(&ty) {
                return Err(QueryError::Invalid(format!(
                    "Type error: {} cannot be passed as argument 1 of function system.{name} of type {}",
                    text_of(1),
                    ty.to_cql()
                )));
            }
            Ok(native(Kind::MaskReplace, vec![ty.clone(), ty.clone()], ty))
        }
        _ => {
            let mut types = vec![ty, CqlType::Text];
            types.truncate(args.len());
            if let Some(a) = args.get(1) {
                if arg_type(a, Some(&CqlType::Text)) != Some(CqlType::Text) {
                    return Err(QueryError::Invalid(format!(
                        "Type error: {} cannot be passed as argument 1 of function system.{name} of type text",
                        text_of(1)
                    )));
                }
            }
            Ok(native(Kind::MaskHash, types, CqlType::Blob))
        }
    }
}

fn resolve_floor(name: &str, args: &[Arg<'_>]) -> Result<Native, QueryError> {
    let first = args.first().and_then(|a| arg_type(a, None));
    let start_ty = match &first {
        Some(CqlType::TimeUuid) => Some(CqlType::Timestamp),
        Some(t @ (CqlType::Timestamp | CqlType::Date | CqlType::Time)) => Some(t.clone()),
        _ => None,
    };
    let types: Option<Vec<CqlType>> = match (&first, &start_ty, args.len()) {
        (Some(f), Some(s), 2 | 3) => {
            let mut types = vec![f.clone(), CqlType::Duration, s.clone()];
            types.truncate(args.len());
            let ok = args.iter().zip(&types).all(|(a, t)| arg_type(a, Some(t)).as_ref() == Some(t));
            ok.then_some(types)
        }
        _ => None,
    };
    let Some(types) = types else {
        let known = [
            "system.floor : (timestamp, duration) -> timestamp",
            "system.floor : (timeuuid, duration, timestamp) -> timestamp",
            "system.floor : (date, duration) -> date",
            "system.floor : (date, duration, date) -> date",
            "system.floor : (timestamp, duration, timestamp) -> timestamp",
            "system.floor : (time, duration) -> time",
            "system.floor : (time, duration, time) -> time",
            "system.floor : (timeuuid, duration) -> timestamp",
        ];
        return Err(no_signature(name, &known.map(String::from)));
    };
    let ty = if types.first() == Some(&CqlType::TimeUuid) { CqlType::Timestamp } else { types[0].clone() };
    Ok(Native { kind: Kind::Floor, name: name.to_string(), args: types, ty })
}

/// Calls a resolved function on argument values of the resolved types.
pub fn call(f: &Native, args: &[Option<Value>], clock: &Clock) -> Result<Option<Value>, QueryError> {
    use types::literal as lit;
    match f.kind {
        Kind::CurrentTimeUuid => return Ok(Some(Value::TimeUuid(clock.new_timeuuid()))),
        Kind::CurrentTimestamp => return Ok(Some(Value::Timestamp(clock.now_micros() / 1000))),
        Kind::CurrentDate => return Ok(Some(Value::Date(lit::timestamp_to_date(clock.now_micros() / 1000)))),
        Kind::CurrentTime => return Ok(Some(Value::Time((clock.now_micros() % 86_400_000_000) * 1000))),
        Kind::MaskNull => return Ok(None),
        Kind::MaskDefault => return Ok(Some(mask::default_value(&f.ty))),
        Kind::MaskReplace => return Ok(args.get(1).cloned().flatten()),
        Kind::MaskInner | Kind::MaskOuter => {
            let text = match args.first() {
                Some(Some(Value::Text(t) | Value::Ascii(t))) => t,
                _ => return Ok(None),
            };
            let int = |i: usize| match args.get(i) {
                Some(Some(Value::Int(n))) => Some(*n),
                _ => None,
            };
            let pad = match args.get(3) {
                Some(Some(Value::Text(p) | Value::Ascii(p))) => Some(p.as_str()),
                _ => None,
            };
            let masked = mask::mask_text(&f.name, f.kind == Kind::MaskOuter, text, int(1), int(2), pad)?;
            return Ok(Some(if f.ty == CqlType::Ascii { Value::Ascii(masked) } else { Value::Text(masked) }));
        }
        Kind::MaskHash => {
            let Some(Some(v)) = args.first() else { return Ok(None) };
            let algorithm = match args.get(1) {
                Some(Some(Value::Text(a) | Value::Ascii(a))) => Some(a.as_str()),
                _ => None,
            };
            return Ok(Some(Value::Blob(mask::hash(&v.to_bytes(), algorithm)?)));
        }
        _ => {}
    }
    // Every other function returns null on a null argument.
    let mut values = Vec::with_capacity(args.len());
    for a in args {
        match a {
            Some(v) => values.push(v),
            None => return Ok(None),
        }
    }
    let bad = || QueryError::Server(format!("unexpected argument for function {}", f.name));
    let first = *values.first().ok_or_else(bad)?;
    Ok(Some(match f.kind {
        Kind::Abs | Kind::Exp | Kind::Log | Kind::Log10 | Kind::Round => {
            math_defined(&f.kind, first)?;
            math(&f.kind, first).ok_or_else(bad)?
        }
        Kind::Floor => floor(first, values.get(1).copied(), values.get(2).copied()).map_err(QueryError::Invalid)?,
        Kind::MapKeys | Kind::MapValues => {
            let Value::Map(pairs) = first else { return Err(bad()) };
            if f.kind == Kind::MapKeys {
                Value::Set(pairs.iter().map(|(k, _)| k.clone()).collect())
            } else {
                Value::List(pairs.iter().map(|(_, v)| v.clone()).collect())
            }
        }
        Kind::CollectionCount => match first {
            Value::List(items) | Value::Set(items) => Value::Int(items.len() as i32),
            Value::Map(pairs) => Value::Int(pairs.len() as i32),
            _ => return Err(bad()),
        },
        Kind::CollectionMin | Kind::CollectionMax => {
            let (Value::List(items) | Value::Set(items)) = first else { return Err(bad()) };
            let best = if f.kind == Kind::CollectionMin {
                items.iter().min_by(|a, b| types::compare::compare_values(a, b))
            } else {
                items.iter().max_by(|a, b| types::compare::compare_values(a, b))
            };
            return Ok(best.cloned());
        }
        Kind::CollectionSum | Kind::CollectionAvg => {
            let (Value::List(items) | Value::Set(items)) = first else { return Err(bad()) };
            let serialized: Vec<Vec<u8>> = items.iter().map(Value::to_bytes).collect();
            let kind = if f.kind == Kind::CollectionSum {
                crate::select::NumericAggregate::Sum
            } else {
                crate::select::NumericAggregate::Avg
            };
            let out =
                crate::select::numeric_aggregate(kind, &f.ty, serialized.iter().map(Vec::as_slice)).ok_or_else(bad)?;
            Value::deserialize(&f.ty, &out).map_err(|_| bad())?
        }
        Kind::CastAs => {
            let from = f.args.first().ok_or_else(bad)?;
            if *from == f.ty {
                return Ok(Some(first.clone()));
            }
            let out = crate::select::cast_value(from, &f.ty, &first.to_bytes());
            return out.map(|b| Value::deserialize(&f.ty, &b).map_err(|_| bad())).transpose();
        }
        _ => return Err(bad()),
    }))
}

/// Java's `Math.round(double)`: half up, saturating to a long.
fn java_round(x: f64) -> i64 {
    let floor = x.floor();
    let r = if x - floor >= 0.5 { floor + 1.0 } else { floor };
    r as i64
}

fn math(kind: &Kind, v: &Value) -> Option<Value> {
    let f = |x: f64| match kind {
        Kind::Exp => x.exp(),
        Kind::Log => x.ln(),
        Kind::Log10 => x.log10(),
        _ => x,
    };
    Some(match (kind, v) {
        (Kind::Round, Value::Float(x)) => {
            Value::Float(java_round(f64::from(*x)).clamp(i32::MIN.into(), i32::MAX.into()) as f32)
        }
        (Kind::Round, Value::Double(x)) => Value::Double(java_round(*x) as f64),
        (Kind::Round, Value::Decimal { unscaled, scale }) => {
            let d = arith::Dec { unscaled: unscaled.clone(), scale: *scale }.round_half_up(0);
            Value::Decimal { unscaled: d.unscaled, scale: d.scale }
        }
        (Kind::Round, other) => other.clone(),
        (Kind::Abs, Value::TinyInt(x)) => Value::TinyInt(x.wrapping_abs()),
        (Kind::Abs, Value::SmallInt(x)) => Value::SmallInt(x.wrapping_abs()),
        (Kind::Abs, Value::Int(x)) => Value::Int(x.wrapping_abs()),
        (Kind::Abs, Value::BigInt(x)) => Value::BigInt(x.wrapping_abs()),
        (Kind::Abs, Value::Counter(x)) => Value::Counter(x.wrapping_abs()),
        (Kind::Abs, Value::Float(x)) => Value::Float(x.abs()),
        (Kind::Abs, Value::Double(x)) => Value::Double(x.abs()),
        (Kind::Abs, Value::Varint(x)) => Value::Varint(BigInt::from_biguint(Sign::Plus, x.magnitude().clone())),
        (Kind::Abs, Value::Decimal { unscaled, scale }) => {
            Value::Decimal { unscaled: BigInt::from_biguint(Sign::Plus, unscaled.magnitude().clone()), scale: *scale }
        }
        (_, Value::Decimal { unscaled, scale }) => {
            let x = arith::Dec { unscaled: unscaled.clone(), scale: *scale };
            let d = match kind {
                Kind::Exp => decimal::exp(&x)?,
                Kind::Log => decimal::ln(&x)?,
                _ => decimal::log10(&x)?,
            };
            Value::Decimal { unscaled: d.unscaled, scale: d.scale }
        }
        (_, Value::Float(x)) => Value::Float(f(f64::from(*x)) as f32),
        (_, Value::Double(x)) => Value::Double(f(*x)),
        (_, Value::BigInt(x)) => Value::BigInt(f(*x as f64) as i64),
        (_, Value::Counter(x)) => Value::Counter(f(*x as f64) as i64),
        (_, Value::Int(x)) => Value::Int(f(f64::from(*x)) as i32),
        (_, Value::SmallInt(x)) => Value::SmallInt(f(f64::from(*x)) as i32 as i16),
        (_, Value::TinyInt(x)) => Value::TinyInt(f(f64::from(*x)) as i32 as i8),
        (_, Value::Varint(x)) => Value::Varint(BigInt::from(f(i64::try_from(x).ok()? as f64) as i64)),
        _ => return None,
    })
}

/// Whether `math` can compute `kind` of `v` (a varint must fit a long, as
/// Cassandra's `longValueExact`; decimals take `abs` and `round` only).
fn math_defined(kind: &Kind, v: &Value) -> Result<(), QueryError> {
    match (kind, v) {
        (Kind::Exp | Kind::Log | Kind::Log10, Value::Varint(x)) if i64::try_from(x).is_err() => {
            Err(QueryError::Server("java.lang.ArithmeticException: Overflow".into()))
        }
        (Kind::Log | Kind::Log10, Value::Decimal { unscaled, .. }) if unscaled.sign() != Sign::Plus => {
            Err(QueryError::Server(decimal::LOG_DOMAIN.into()))
        }
        (Kind::Exp, Value::Decimal { .. }) if math(kind, v).is_none() => {
            Err(QueryError::Server("java.lang.ArithmeticException: Overflow".into()))
        }
        _ => Ok(()),
    }
}

fn floor(time: &Value, duration: Option<&Value>, start: Option<&Value>) -> Result<Value, String> {
    use types::literal as lit;
    let Some(Value::Duration { months, days, nanos }) = duration else {
        return Err("floor needs a duration".into());
    };
    let (m, d, n) = (*months, *days, *nanos);
    let start_ms = match start {
        Some(Value::Timestamp(ms)) => *ms,
        Some(Value::Date(day)) => lit::date_to_timestamp(*day),
        _ => 0,
    };
    Ok(match time {
        Value::Timestamp(ms) => Value::Timestamp(time::floor_timestamp(*ms, m, d, n, start_ms)?),
        Value::TimeUuid(u) => {
            let ms = lit::timeuuid_unix_ms(u).ok_or("not a time-based UUID")?;
            Value::Timestamp(time::floor_timestamp(ms, m, d, n, start_ms)?)
        }
        Value::Date(day) => {
            let days = i64::from(*day) - (1i64 << 31);
            let floored = time::floor_date(days, m, d, n, start_ms.div_euclid(86_400_000))?;
            Value::Date(((floored + (1i64 << 31)) as u64 & 0xFFFF_FFFF) as u32)
        }
        Value::Time(ns) => {
            let start = match start {
                Some(Value::Time(s)) => *s,
                _ => 0,
            };
            Value::Time(time::floor_time(*ns, m, d, n, start)?)
        }
        _ => return Err("floor takes a timestamp, date, time or timeuuid".into()),
    })
}
