//! CQL values as JSON, both ways, with Cassandra 5.0.9's exact text: what
//! `SELECT JSON` and `toJson()` print (`AbstractType.toJSONString`) and what
//! `INSERT JSON` and `fromJson()` accept (`AbstractType.fromJSONObject`,
//! `cql3/Json.java`), messages included.
//!
//! - [`parse`] reads JSON text as Cassandra's Jackson does (`parse.rs`).
//! - [`to_json`] prints a serialized value; [`to_json_function`] is
//!   `toJson()` (null and meaningless empty values give `null`).
//! - [`from_json`] turns a parsed value into the serialized value of a type.
//! - [`name_key`] writes a column or field name as a JSON key (names that
//!   are not all lower case keep their CQL double quotes) and
//!   [`handle_case_sensitivity`] reads keys back the same way.
//!
//! Invariants:
//! - Pure: no clock (`now` for timestamps is a parameter), no I/O (host
//!   names in `inet` values are not resolved).
//! - Every value [`from_json`] returns is a valid serialized value of its
//!   type (possibly empty, where Cassandra accepts `""`).
//! - Nothing here panics on any input text or bytes; malformed bytes print
//!   as `""`.

mod java;
mod parse;
#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::fmt::Write as _;

use num_bigint::BigInt;

use crate::codec::{hex, pack_collection, split_collection, split_fields, split_map, write_len_prefixed};
use crate::compare::compare_serialized;
use crate::literal;
use crate::value::{Value, ValueError};
use crate::CqlType;

pub use java::{big_decimal_to_string, double_to_string, float_to_string};
pub use parse::{parse, parse_object, Json, JsonError};

// ---------------------------------------------------------------------------
// Writing.

/// Appends `s` quoted as Jackson's `JsonStringEncoder.quoteAsString` does
/// (no surrounding quotes): `"` and `\` escaped, `\b \t \n \f \r` short,
/// other control characters below 0x20 as `\u00XX`; nothing else escaped.
pub fn quote_into(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c => out.push(c),
        }
    }
}

/// Appends `"s"`, JSON-quoted.
fn quoted(s: &str, out: &mut String) {
    out.push('"');
    quote_into(s, out);
    out.push('"');
}

/// Appends a column, alias or UDT field name as a JSON object key: a name
/// that is not all lower case is written with its CQL double quotes
/// (`"\"Foo\""`), as `Selection.rowToJson` and `UserType.toJSONString` do.
pub fn name_key(name: &str, out: &mut String) {
    if name == name.to_lowercase() {
        quoted(name, out);
    } else {
        quoted(&format!("\"{name}\""), out);
    }
}

/// The JSON text of a serialized value of `ty` (`toJSONString`).
pub fn to_json(ty: &CqlType, bytes: &[u8]) -> String {
    let mut out = String::new();
    write_json(ty, bytes, &mut out);
    out
}

/// `toJson(x)`: `null` for a null argument and for the empty value of a
/// type whose empty value means nothing, else [`to_json`].
pub fn to_json_function(ty: &CqlType, bytes: Option<&[u8]>) -> String {
    match bytes {
        None => "null".into(),
        Some(b) if b.is_empty() && empty_is_meaningless(ty) => "null".into(),
        Some(b) => to_json(ty, b),
    }
}

/// `AbstractType.isEmptyValueMeaningless`.
fn empty_is_meaningless(ty: &CqlType) -> bool {
    matches!(
        ty,
        CqlType::Boolean
            | CqlType::Counter
            | CqlType::Timestamp
            | CqlType::Decimal
            | CqlType::Double
            | CqlType::Float
            | CqlType::Inet
            | CqlType::Int
            | CqlType::Varint
            | CqlType::BigInt
            | CqlType::Uuid
            | CqlType::TimeUuid
    )
}

/// Appends the JSON text of a serialized value of `ty`.
pub fn write_json(ty: &CqlType, b: &[u8], out: &mut String) {
    let scalar = !matches!(
        ty,
        CqlType::List { .. } | CqlType::Set { .. } | CqlType::Map { .. } | CqlType::Tuple(_) | CqlType::Udt { .. }
    );
    match ty {
        CqlType::Ascii | CqlType::Text => quoted(&String::from_utf8_lossy(b), out),
        CqlType::Blob => {
            out.push_str("\"0x");
            out.push_str(&hex(b));
            out.push('"');
        }
        CqlType::Boolean => out.push_str(if b.iter().any(|x| *x != 0) { "true" } else { "false" }),
        _ if scalar && b.is_empty() => out.push_str("\"\""),
        CqlType::Float => match <[u8; 4]>::try_from(b) {
            Ok(a) => {
                let v = f32::from_bits(u32::from_be_bytes(a));
                // JSON has no NaN or infinities: Cassandra writes null.
                if v.is_finite() {
                    out.push_str(&float_to_string(v));
                } else {
                    out.push_str("null");
                }
            }
            Err(_) => out.push_str("\"\""),
        },
        CqlType::Double => match <[u8; 8]>::try_from(b) {
            Ok(a) => {
                let v = f64::from_bits(u64::from_be_bytes(a));
                if v.is_finite() {
                    out.push_str(&double_to_string(v));
                } else {
                    out.push_str("null");
                }
            }
            Err(_) => out.push_str("\"\""),
        },
        CqlType::Inet => match inet_host_address(b) {
            Some(s) => quoted(&s, out),
            None => out.push_str("\"\""),
        },
        CqlType::Timestamp => match <[u8; 8]>::try_from(b) {
            Ok(a) => {
                out.push('"');
                write_json_timestamp(i64::from_be_bytes(a), out);
                out.push('"');
            }
            Err(_) => out.push_str("\"\""),
        },
        CqlType::List { elem, .. } | CqlType::Set { elem, .. } => match split_collection(b) {
            Some(items) => {
                out.push('[');
                for (i, item) in items.into_iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    match item {
                        Some(v) => write_json(elem, v, out),
                        None => out.push_str("null"),
                    }
                }
                out.push(']');
            }
            None => out.push_str("\"\""),
        },
        CqlType::Map { key, value, .. } => match split_map(b) {
            Some(entries) => {
                out.push('{');
                for (i, (k, v)) in entries.into_iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    // Keys must be JSON strings: a key whose JSON is not a string is quoted.
                    let k = k.map(|k| to_json(key, k)).unwrap_or_else(|| "null".into());
                    if k.starts_with('"') {
                        out.push_str(&k);
                    } else {
                        quoted(&k, out);
                    }
                    out.push_str(": ");
                    match v {
                        Some(v) => write_json(value, v, out),
                        None => out.push_str("null"),
                    }
                }
                out.push('}');
            }
            None => out.push_str("\"\""),
        },
        CqlType::Tuple(types) => {
            let fields = split_fields(b).unwrap_or_default();
            out.push('[');
            for (i, t) in types.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                match fields.get(i) {
                    Some(Ok(Some(v))) => write_json(t, v, out),
                    _ => out.push_str("null"),
                }
            }
            out.push(']');
        }
        CqlType::Udt { fields: defs, .. } => {
            let fields = split_fields(b).unwrap_or_default();
            out.push('{');
            for (i, (name, t)) in defs.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                name_key(name, out);
                out.push_str(": ");
                match fields.get(i) {
                    Some(Ok(Some(v))) => write_json(t, v, out),
                    _ => out.push_str("null"),
                }
            }
            out.push('}');
        }
        _ => match Value::deserialize(ty, b) {
            Ok(v) => write_scalar(&v, out),
            Err(_) => out.push_str("\"\""),
        },
    }
}

/// The remaining scalars, from their `Value`.
fn write_scalar(v: &Value, out: &mut String) {
    match v {
        Value::TinyInt(x) => {
            let _ = write!(out, "{x}");
        }
        Value::SmallInt(x) => {
            let _ = write!(out, "{x}");
        }
        Value::Int(x) => {
            let _ = write!(out, "{x}");
        }
        Value::BigInt(x) | Value::Counter(x) => {
            let _ = write!(out, "{x}");
        }
        Value::Varint(x) => {
            let _ = write!(out, "{x}");
        }
        Value::Decimal { unscaled, scale } => out.push_str(&big_decimal_to_string(unscaled, *scale)),
        Value::Uuid(u) | Value::TimeUuid(u) => quoted(&u.hyphenated().to_string(), out),
        Value::Date(d) => quoted(&literal::format_date(*d), out),
        Value::Time(t) => quoted(&literal::format_time(*t), out),
        Value::Duration { months, days, nanos } => {
            // `Duration.toString` prints nothing at all for a zero duration.
            if *months == 0 && *days == 0 && *nanos == 0 {
                out.push_str("\"\"");
            } else {
                quoted(&literal::format_duration(*months, *days, *nanos), out);
            }
        }
        _ => out.push_str("\"\""),
    }
}

/// `InetAddress.getHostAddress()`: dotted IPv4 (also for an IPv4-mapped IPv6
/// address), else eight lower-case hexadecimal groups without compression
/// (`2001:db8:0:0:0:0:0:1`).
fn inet_host_address(b: &[u8]) -> Option<String> {
    match b.len() {
        4 => Some(format!("{}.{}.{}.{}", b.first()?, b.get(1)?, b.get(2)?, b.get(3)?)),
        16 => {
            if b.get(..10)?.iter().all(|x| *x == 0) && b.get(10..12)? == [0xff, 0xff] {
                return Some(format!("{}.{}.{}.{}", b.get(12)?, b.get(13)?, b.get(14)?, b.get(15)?));
            }
            let groups: Vec<String> = b
                .chunks(2)
                .map(|g| {
                    let pair = [g.first().copied().unwrap_or(0), g.get(1).copied().unwrap_or(0)];
                    format!("{:x}", u16::from_be_bytes(pair))
                })
                .collect();
            Some(groups.join(":"))
        }
        _ => None,
    }
}

/// `yyyy-MM-dd HH:mm:ss.SSSX` in UTC, the timestamp format of Cassandra's
/// JSON: the year of era (year 0 is 1 BC, printed `0001`), at least four
/// digits, `+` above 9999; `Z` for the zone.
fn write_json_timestamp(ms: i64, out: &mut String) {
    let days = ms.div_euclid(literal::MILLIS_PER_DAY);
    let rem = ms.rem_euclid(literal::MILLIS_PER_DAY);
    let (year, month, day) = literal::civil_from_days(days);
    let year_of_era = if year > 0 { year } else { 1 - year };
    if year_of_era > 9999 {
        let _ = write!(out, "+{year_of_era}");
    } else {
        let _ = write!(out, "{year_of_era:04}");
    }
    let _ = write!(
        out,
        "-{month:02}-{day:02} {:02}:{:02}:{:02}.{:03}Z",
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000
    );
}

// ---------------------------------------------------------------------------
// Reading.

/// `JsonUtils.handleCaseSensitivity`: a key in double quotes loses them and
/// keeps its case, any other key is lower-cased. Keys are processed in
/// order, each moved as `LinkedHashMap`'s remove-then-put moves it (so a
/// renamed key goes last, or replaces the value of a key it now equals).
pub fn handle_case_sensitivity(mut entries: Vec<(String, Json)>) -> Vec<(String, Json)> {
    let keys: Vec<String> = entries.iter().map(|(k, _)| k.clone()).collect();
    for key in keys {
        let renamed = if key.len() >= 2 && key.starts_with('"') && key.ends_with('"') {
            key.get(1..key.len() - 1).unwrap_or_default().to_string()
        } else {
            let lowered = key.to_lowercase();
            if lowered == key {
                continue;
            }
            lowered
        };
        let Some(at) = entries.iter().position(|(k, _)| *k == key) else { continue };
        let (_, value) = entries.remove(at);
        parse::put(&mut entries, renamed, value);
    }
    entries
}

fn marshal(msg: impl Into<String>) -> ValueError {
    ValueError::Marshal(msg.into())
}

/// "Expected {what}, but got a {class}: {value}".
fn expected(what: &str, v: &Json) -> ValueError {
    marshal(format!("Expected {what}, but got a {}: {}", v.class_name(), v.java_string()))
}

/// A collection, tuple or UDT given as a string holds its JSON text.
fn decoded(v: &Json) -> Result<Cow<'_, Json>, ValueError> {
    match v {
        Json::String(s) => {
            parse(s).map(Cow::Owned).map_err(|e| marshal(format!("Error decoding JSON string: {}", e.message)))
        }
        other => Ok(Cow::Borrowed(other)),
    }
}

/// The serialized value of type `ty` a parsed JSON value stands for
/// (`fromJSONObject`, then binding). `now_ms` is `now` for timestamps.
///
/// Errors are Cassandra's: `Marshal` for a value the type rejects (callers
/// add "Error decoding JSON value for col: "), `InvalidRequest` where
/// Cassandra raises one directly (an unparsable duration).
pub fn from_json(ty: &CqlType, v: &Json, now_ms: i64) -> Result<Vec<u8>, ValueError> {
    let bytes = |value: Value| Ok(value.to_bytes());
    match ty {
        CqlType::Ascii => match v {
            Json::String(s) => match s.chars().find(|c| !c.is_ascii()) {
                Some(c) => Err(marshal(format!(
                    "Invalid ASCII character in string literal: java.nio.charset.UnmappableCharacterException: Input length = {}",
                    c.len_utf16()
                ))),
                None => Ok(s.as_bytes().to_vec()),
            },
            _ => Err(expected("an ascii string", v)),
        },
        CqlType::Text => match v {
            Json::String(s) => Ok(s.as_bytes().to_vec()),
            _ => Err(expected("a UTF-8 string", v)),
        },
        CqlType::Blob => {
            let detail = match v {
                Json::String(s) => match s.strip_prefix("0x") {
                    Some(digits) => match decode_hex(digits) {
                        Some(b) => return Ok(b),
                        None => format!("cannot parse '{digits}' as hex bytes"),
                    },
                    None => format!("String representation of blob is missing 0x prefix: {s}"),
                },
                other => {
                    let class = other.qualified_class_name();
                    format!(
                        "class {class} cannot be cast to class java.lang.String ({class} and java.lang.String are in module java.base of loader 'bootstrap')"
                    )
                }
            };
            Err(marshal(format!("Value '{}' is not a valid blob representation: {detail}", v.java_string())))
        }
        CqlType::Boolean => match v {
            Json::String(s) if s.is_empty() || s.eq_ignore_ascii_case("false") => bytes(Value::Boolean(false)),
            Json::String(s) if s.eq_ignore_ascii_case("true") => bytes(Value::Boolean(true)),
            Json::String(s) => Err(marshal(format!("Unable to make boolean from '{s}'"))),
            Json::Bool(b) => bytes(Value::Boolean(*b)),
            _ => Err(expected("a boolean value", v)),
        },
        CqlType::TinyInt | CqlType::SmallInt => {
            let (what, min, max) = if *ty == CqlType::TinyInt {
                ("byte", i64::from(i8::MIN), i64::from(i8::MAX))
            } else {
                ("short", i64::from(i16::MIN), i64::from(i16::MAX))
            };
            if !matches!(v, Json::String(_) | Json::Int(_) | Json::Float(_)) {
                return Err(expected(&format!("a {what} value"), v));
            }
            let text = v.java_string();
            if text.is_empty() {
                return Ok(Vec::new());
            }
            match java::parse_integer(&text, min, max) {
                Some(x) if *ty == CqlType::TinyInt => bytes(Value::TinyInt(x as i8)),
                Some(x) => bytes(Value::SmallInt(x as i16)),
                None => Err(marshal(format!("Unable to make {what} from '{text}'"))),
            }
        }
        CqlType::Int => match v {
            Json::String(s) if s.is_empty() => Ok(Vec::new()),
            Json::String(s) => java::parse_integer(s, i64::from(i32::MIN), i64::from(i32::MAX))
                .map(|x| Value::Int(x as i32).to_bytes())
                .ok_or_else(|| marshal(format!("Unable to make int from '{s}'"))),
            Json::Int(i) => match i32::try_from(i) {
                Ok(x) => bytes(Value::Int(x)),
                Err(_) => Err(expected("an int value", v)),
            },
            _ => Err(expected("an int value", v)),
        },
        CqlType::BigInt => match v {
            Json::String(s) if s.is_empty() => Ok(Vec::new()),
            Json::String(s) => java::parse_integer(s, i64::MIN, i64::MAX)
                .map(|x| Value::BigInt(x).to_bytes())
                .ok_or_else(|| marshal(format!("Unable to make long from '{s}'"))),
            Json::Int(i) => match i64::try_from(i) {
                Ok(x) => bytes(Value::BigInt(x)),
                Err(_) => Err(expected("a bigint value", v)),
            },
            _ => Err(expected("a bigint value", v)),
        },
        CqlType::Counter => Err(ValueError::InvalidRequest("Counter values cannot be set from JSON".into())),
        CqlType::Varint => {
            let text = v.java_string();
            match java::parse_big_integer(&text) {
                Some(x) => bytes(Value::Varint(x)),
                None => Err(marshal(format!("Value '{text}' is not a valid representation of a varint value"))),
            }
        }
        CqlType::Float => match v {
            Json::String(s) if s.is_empty() => Ok(Vec::new()),
            Json::String(s) => java::parse_float(s)
                .map(|x| Value::Float(x).to_bytes())
                .ok_or_else(|| marshal(format!("Unable to make float from '{s}'"))),
            Json::Int(i) => bytes(Value::Float(big_to_f32(i))),
            Json::Float(d) => bytes(Value::Float(*d as f32)),
            _ => Err(expected("a float value", v)),
        },
        CqlType::Double => match v {
            Json::String(s) if s.is_empty() => Ok(Vec::new()),
            Json::String(s) => java::parse_double(s)
                .map(|x| Value::Double(x).to_bytes())
                .ok_or_else(|| marshal(format!("Unable to make double from '{s}'"))),
            Json::Int(i) => bytes(Value::Double(big_to_f64(i))),
            Json::Float(d) => bytes(Value::Double(*d)),
            _ => Err(expected("a double value", v)),
        },
        CqlType::Decimal => {
            let text = v.java_string();
            if text.is_empty() {
                return Ok(Vec::new());
            }
            match java::parse_big_decimal(&text) {
                Some((unscaled, scale)) => bytes(Value::Decimal { unscaled, scale }),
                None => Err(marshal(format!("Value '{text}' is not a valid representation of a decimal value"))),
            }
        }
        CqlType::Uuid => match v {
            Json::String(s) if s.is_empty() => Ok(Vec::new()),
            Json::String(s) => literal::parse_uuid(s).map(|u| Value::Uuid(u).to_bytes()),
            _ => Err(expected("a string representation of a uuid", v)),
        },
        CqlType::TimeUuid => match v {
            Json::String(s) if s.is_empty() => Ok(Vec::new()),
            Json::String(s) => literal::parse_timeuuid(s).map(|u| Value::TimeUuid(u).to_bytes()),
            _ => Err(expected("a string representation of a timeuuid", v)),
        },
        CqlType::Inet => match v {
            Json::String(s) if s.is_empty() => Ok(Vec::new()),
            Json::String(s) => literal::parse_inet(s).map(|a| Value::Inet(a).to_bytes()),
            _ => Err(expected("a string representation of an inet value", v)),
        },
        CqlType::Timestamp => match v {
            // Only a `Long`: an integer small enough to be an `Integer` is refused.
            Json::Int(i) if i32::try_from(i).is_err() => match i64::try_from(i) {
                Ok(ms) => bytes(Value::Timestamp(ms)),
                Err(_) => Err(expected("a long or a datestring representation of a timestamp value", v)),
            },
            Json::String(s) if s.is_empty() => Ok(Vec::new()),
            Json::String(s) => literal::parse_timestamp_at(s, now_ms).map(|ms| Value::Timestamp(ms).to_bytes()),
            _ => Err(expected("a long or a datestring representation of a timestamp value", v)),
        },
        CqlType::Date => match v {
            Json::String(s) => literal::parse_date(s).map(|d| Value::Date(d).to_bytes()),
            _ => Err(expected("a string representation of a date value", v)),
        },
        CqlType::Time => match v {
            Json::String(s) => literal::parse_time(s).map(|t| Value::Time(t).to_bytes()),
            _ => Err(expected("a string representation of a time value", v)),
        },
        CqlType::Duration => match v {
            Json::String(s) if s.is_empty() => Ok(Vec::new()),
            Json::String(s) => literal::parse_duration(s)
                .map(|(months, days, nanos)| Value::Duration { months, days, nanos }.to_bytes()),
            _ => Err(expected("a string representation of a duration", v)),
        },
        CqlType::List { elem, .. } => {
            let v = decoded(v)?;
            let Json::Array(items) = v.as_ref() else { return Err(expected("a list", &v)) };
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                if *item == Json::Null {
                    return Err(marshal("Invalid null element in list"));
                }
                out.push(from_json(elem, item, now_ms)?);
            }
            Ok(pack_collection(out.iter().map(|b| Some(b.as_slice()))))
        }
        CqlType::Set { elem, .. } => {
            let v = decoded(v)?;
            let Json::Array(items) = v.as_ref() else { return Err(expected("a list (representing a set)", &v)) };
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                if *item == Json::Null {
                    return Err(marshal("Invalid null element in set"));
                }
                out.push(from_json(elem, item, now_ms)?);
            }
            out.sort_by(|a, b| compare_serialized(elem, a, b));
            out.dedup_by(|a, b| compare_serialized(elem, a, b).is_eq());
            Ok(pack_collection(out.iter().map(|b| Some(b.as_slice()))))
        }
        CqlType::Map { key, value, .. } => {
            let v = decoded(v)?;
            let Json::Object(entries) = v.as_ref() else { return Err(expected("a map", &v)) };
            let mut out: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(entries.len());
            for (k, val) in entries {
                if *val == Json::Null {
                    return Err(marshal("Invalid null value in map"));
                }
                // JSON keys are strings: the key type reads its string form.
                let k = from_json(key, &Json::String(k.clone()), now_ms)?;
                let val = from_json(value, val, now_ms)?;
                out.push((k, val));
            }
            // Equal keys: the last one wins.
            out.reverse();
            out.sort_by(|a, b| compare_serialized(key, &a.0, &b.0));
            out.dedup_by(|a, b| compare_serialized(key, &a.0, &b.0).is_eq());
            let mut bytes = Vec::new();
            bytes.extend_from_slice(&i32::try_from(out.len()).unwrap_or(i32::MAX).to_be_bytes());
            for (k, val) in &out {
                write_len_prefixed(&mut bytes, Some(k));
                write_len_prefixed(&mut bytes, Some(val));
            }
            Ok(bytes)
        }
        CqlType::Tuple(types) => {
            let v = decoded(v)?;
            let Json::Array(items) = v.as_ref() else {
                return Err(expected("a list representation of a tuple", &v));
            };
            if items.len() > types.len() {
                return Err(marshal(format!(
                    "Tuple contains extra items (expected {}): {}",
                    types.len(),
                    v.java_string()
                )));
            }
            if items.len() < types.len() {
                return Err(marshal(format!("Tuple is missing items (expected {}): {}", types.len(), v.java_string())));
            }
            let mut out = Vec::new();
            for (t, item) in types.iter().zip(items) {
                let field = match item {
                    Json::Null => None,
                    item => Some(from_json(t, item, now_ms)?),
                };
                write_len_prefixed(&mut out, field.as_deref());
            }
            Ok(out)
        }
        CqlType::Udt { name, fields, .. } => {
            let v = decoded(v)?;
            let Json::Object(entries) = v.as_ref() else { return Err(expected("a map", &v)) };
            let entries = handle_case_sensitivity(entries.clone());
            let mut out = Vec::new();
            for (fname, fty) in fields {
                let field = match entries.iter().find(|(k, _)| k == fname) {
                    None | Some((_, Json::Null)) => None,
                    Some((_, item)) => Some(from_json(fty, item, now_ms)?),
                };
                write_len_prefixed(&mut out, field.as_deref());
            }
            if let Some((unknown, _)) = entries.iter().find(|(k, _)| !fields.iter().any(|(f, _)| f == k)) {
                return Err(marshal(format!("Unknown field '{unknown}' in value of user defined type {name}")));
            }
            Ok(out)
        }
    }
}

/// `Number.doubleValue()` of an integer (correctly rounded).
fn big_to_f64(i: &BigInt) -> f64 {
    match i64::try_from(i) {
        Ok(x) => x as f64,
        Err(_) => i.to_string().parse().unwrap_or(f64::NAN),
    }
}

/// `Number.floatValue()` of an integer: rounded once, straight to a `float`.
fn big_to_f32(i: &BigInt) -> f32 {
    match i64::try_from(i) {
        Ok(x) => x as f32,
        Err(_) => i.to_string().parse().unwrap_or(f32::NAN),
    }
}

/// `Hex.hexToBytes`: an even number of hexadecimal digits.
fn decode_hex(digits: &str) -> Option<Vec<u8>> {
    if digits.len() & 1 != 0 {
        return None;
    }
    digits
        .as_bytes()
        .chunks(2)
        .map(|pair| {
            let hi = char::from(*pair.first()?).to_digit(16)?;
            let lo = char::from(*pair.get(1)?).to_digit(16)?;
            Some((hi * 16 + lo) as u8)
        })
        .collect()
}
