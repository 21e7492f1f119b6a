//! `CAST(selector AS type)`: the conversions Cassandra's native cast
//! functions offer (numbers to numbers and text, timeuuid/timestamp/date
//! between themselves, most scalar types to text), with Java's numeric
//! conversion rules (narrowing keeps the low bits, floats truncate and
//! saturate).

use num_bigint::{BigInt, Sign};
use types::{CqlType, Value};

use crate::functions::arith::is_numeric;

fn textual(ty: &CqlType) -> bool {
    matches!(ty, CqlType::Ascii | CqlType::Text)
}

/// Whether Cassandra has a cast from `from` to `to` (`from != to`).
pub(crate) fn supported(from: &CqlType, to: &CqlType) -> bool {
    if is_numeric(from) && (textual(to) || (is_numeric(to) && *to != CqlType::Counter)) {
        return true;
    }
    match from {
        CqlType::Ascii => *to == CqlType::Text,
        CqlType::Inet | CqlType::Boolean | CqlType::Time | CqlType::Uuid => textual(to),
        CqlType::TimeUuid => textual(to) || matches!(to, CqlType::Date | CqlType::Timestamp),
        CqlType::Timestamp => textual(to) || *to == CqlType::Date,
        CqlType::Date => textual(to) || *to == CqlType::Timestamp,
        _ => false,
    }
}

/// A number as Java's `Number` sees it.
enum Num {
    Long(i64),
    Float(f32),
    Double(f64),
    Big(BigInt),
    Decimal(BigInt, i32),
}

/// The low 64 bits of `b` in two's complement (`BigInteger.longValue`).
fn low_bits(b: &BigInt) -> i64 {
    let (sign, digits) = b.to_u64_digits();
    let low = digits.first().copied().unwrap_or(0);
    if sign == Sign::Minus {
        low.wrapping_neg() as i64
    } else {
        low as i64
    }
}

/// The integer part of `unscaled * 10^-scale` (`BigDecimal.toBigInteger`).
fn truncate(unscaled: &BigInt, scale: i32) -> BigInt {
    let ten = BigInt::from(10);
    if scale <= 0 {
        unscaled * ten.pow(scale.unsigned_abs().min(10_000))
    } else {
        unscaled / ten.pow(scale.unsigned_abs())
    }
}

fn decimal_text(unscaled: &BigInt, scale: i32) -> String {
    Value::Decimal { unscaled: unscaled.clone(), scale }.to_cql_literal()
}

/// Parses `123.45`, `-1.5E10`, `1e-7` into `(unscaled, scale)`.
fn parse_decimal(s: &str) -> Option<(BigInt, i32)> {
    let (mantissa, exp) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], s[i + 1..].trim_start_matches('+').parse::<i32>().ok()?),
        None => (s, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let unscaled: BigInt = format!("{int}{frac}").parse().ok()?;
    Some((unscaled, (frac.len() as i32).checked_sub(exp)?))
}

impl Num {
    fn of(v: Value) -> Option<Num> {
        Some(match v {
            Value::TinyInt(x) => Num::Long(x.into()),
            Value::SmallInt(x) => Num::Long(x.into()),
            Value::Int(x) => Num::Long(x.into()),
            Value::BigInt(x) | Value::Counter(x) => Num::Long(x),
            Value::Float(x) => Num::Float(x),
            Value::Double(x) => Num::Double(x),
            Value::Varint(x) => Num::Big(x),
            Value::Decimal { unscaled, scale } => Num::Decimal(unscaled, scale),
            _ => return None,
        })
    }

    fn long(&self) -> i64 {
        match self {
            Num::Long(x) => *x,
            Num::Float(x) => *x as i64,
            Num::Double(x) => *x as i64,
            Num::Big(b) => low_bits(b),
            Num::Decimal(u, s) => low_bits(&truncate(u, *s)),
        }
    }

    fn int(&self) -> i32 {
        match self {
            Num::Float(x) => *x as i32,
            Num::Double(x) => *x as i32,
            _ => self.long() as i32,
        }
    }

    fn double(&self) -> f64 {
        match self {
            Num::Long(x) => *x as f64,
            Num::Float(x) => f64::from(*x),
            Num::Double(x) => *x,
            Num::Big(b) => b.to_string().parse().unwrap_or(f64::NAN),
            Num::Decimal(u, s) => decimal_text(u, *s).parse().unwrap_or(f64::NAN),
        }
    }

    fn float(&self) -> f32 {
        match self {
            Num::Long(x) => *x as f32,
            Num::Float(x) => *x,
            Num::Double(x) => *x as f32,
            Num::Big(b) => b.to_string().parse().unwrap_or(f32::NAN),
            Num::Decimal(u, s) => decimal_text(u, *s).parse().unwrap_or(f32::NAN),
        }
    }

    fn decimal(&self) -> Option<(BigInt, i32)> {
        match self {
            Num::Long(x) => Some((BigInt::from(*x), 0)),
            Num::Float(x) if x.is_finite() => parse_decimal(&format!("{x:?}")),
            Num::Double(x) if x.is_finite() => parse_decimal(&format!("{x:?}")),
            Num::Float(_) | Num::Double(_) => None,
            Num::Big(b) => Some((b.clone(), 0)),
            Num::Decimal(u, s) => Some((u.clone(), *s)),
        }
    }
}

/// The text Cassandra gives a value cast to text: its CQL literal unquoted.
fn as_text(v: &Value) -> String {
    match v {
        Value::Ascii(s) | Value::Text(s) => s.clone(),
        // Java's Float/Double/BigDecimal.toString (`1.5E7`, `1.0E-19`).
        Value::Float(f) => types::json::float_to_string(*f),
        Value::Double(d) => types::json::double_to_string(*d),
        Value::Decimal { unscaled, scale } => types::json::big_decimal_to_string(unscaled, *scale),
        _ => {
            let lit = v.to_cql_literal();
            match lit.strip_prefix('\'').and_then(|l| l.strip_suffix('\'')) {
                Some(inner) => inner.replace("''", "'"),
                None => lit,
            }
        }
    }
}

/// `value` (of type `from`) cast to `to`; `None` for a null or empty value.
pub(crate) fn cast(from: &CqlType, to: &CqlType, value: &[u8]) -> Option<Vec<u8>> {
    use types::literal as lit;
    let v = Value::deserialize(from, value).ok()?;
    let out = match to {
        CqlType::Text => Value::Text(as_text(&v)),
        CqlType::Ascii => Value::Ascii(as_text(&v)),
        CqlType::Timestamp | CqlType::Date => {
            let ms = match v {
                Value::TimeUuid(u) => lit::timeuuid_unix_ms(&u)?,
                Value::Timestamp(ms) => ms,
                Value::Date(d) => lit::date_to_timestamp(d),
                _ => return None,
            };
            if *to == CqlType::Date {
                Value::Date(lit::timestamp_to_date(ms))
            } else {
                Value::Timestamp(ms)
            }
        }
        _ => {
            let n = Num::of(v)?;
            match to {
                CqlType::TinyInt => Value::TinyInt(n.int() as i8),
                CqlType::SmallInt => Value::SmallInt(n.int() as i16),
                CqlType::Int => Value::Int(n.int()),
                CqlType::BigInt => Value::BigInt(n.long()),
                CqlType::Float => Value::Float(n.float()),
                CqlType::Double => Value::Double(n.double()),
                CqlType::Varint => Value::Varint(BigInt::from(n.long())),
                CqlType::Decimal => {
                    let (unscaled, scale) = n.decimal()?;
                    Value::Decimal { unscaled, scale }
                }
                _ => return None,
            }
        }
    };
    Some(out.to_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(from: CqlType, to: CqlType, v: Value) -> Option<Value> {
        cast(&from, &to, &v.to_bytes()).map(|b| Value::deserialize(&to, &b).expect("valid output"))
    }

    #[test]
    fn numbers_convert_as_java_does() {
        assert_eq!(c(CqlType::Int, CqlType::TinyInt, Value::Int(300)), Some(Value::TinyInt(44)));
        assert_eq!(c(CqlType::Double, CqlType::Int, Value::Double(-2.9)), Some(Value::Int(-2)));
        assert_eq!(c(CqlType::Double, CqlType::Int, Value::Double(1e20)), Some(Value::Int(i32::MAX)));
        assert_eq!(c(CqlType::Int, CqlType::Double, Value::Int(3)), Some(Value::Double(3.0)));
        assert_eq!(c(CqlType::Varint, CqlType::BigInt, Value::Varint(BigInt::from(-5))), Some(Value::BigInt(-5)));
        assert_eq!(
            c(CqlType::Decimal, CqlType::Int, Value::Decimal { unscaled: BigInt::from(-1234), scale: 2 }),
            Some(Value::Int(-12))
        );
        assert_eq!(
            c(CqlType::Double, CqlType::Decimal, Value::Double(2.5)),
            Some(Value::Decimal { unscaled: BigInt::from(25), scale: 1 })
        );
        assert_eq!(c(CqlType::Counter, CqlType::Int, Value::Counter(7)), Some(Value::Int(7)));
        assert_eq!(c(CqlType::Float, CqlType::Decimal, Value::Float(f32::NAN)), None);
    }

    #[test]
    fn text_and_time_casts() {
        assert_eq!(c(CqlType::Int, CqlType::Text, Value::Int(-3)), Some(Value::Text("-3".into())));
        assert_eq!(c(CqlType::Double, CqlType::Text, Value::Double(1.5)), Some(Value::Text("1.5".into())));
        assert_eq!(c(CqlType::Double, CqlType::Text, Value::Double(1.5e7)), Some(Value::Text("1.5E7".into())));
        assert_eq!(c(CqlType::Float, CqlType::Text, Value::Float(1.5e-4)), Some(Value::Text("1.5E-4".into())));
        assert_eq!(
            c(CqlType::Decimal, CqlType::Text, Value::Decimal { unscaled: BigInt::from(1), scale: 20 }),
            Some(Value::Text("1E-20".into()))
        );
        assert_eq!(c(CqlType::Boolean, CqlType::Ascii, Value::Boolean(true)), Some(Value::Ascii("true".into())));
        assert_eq!(
            c(CqlType::Timestamp, CqlType::Text, Value::Timestamp(0)),
            Some(Value::Text("1970-01-01T00:00:00.000Z".into()))
        );
        assert_eq!(
            c(CqlType::Timestamp, CqlType::Date, Value::Timestamp(86_400_000 + 5)),
            Some(Value::Date((1u32 << 31) + 1))
        );
        assert_eq!(c(CqlType::Date, CqlType::Timestamp, Value::Date(1u32 << 31)), Some(Value::Timestamp(0)));
        assert_eq!(cast(&CqlType::Int, &CqlType::Text, &[]), None);
    }

    #[test]
    fn supported_casts_follow_cassandra() {
        assert!(supported(&CqlType::Int, &CqlType::Decimal));
        assert!(supported(&CqlType::Counter, &CqlType::Text));
        assert!(supported(&CqlType::TimeUuid, &CqlType::Date));
        assert!(supported(&CqlType::Ascii, &CqlType::Text));
        assert!(!supported(&CqlType::Text, &CqlType::Int));
        assert!(!supported(&CqlType::Text, &CqlType::Ascii));
        assert!(!supported(&CqlType::Int, &CqlType::Counter));
        assert!(!supported(&CqlType::Blob, &CqlType::Text));
        assert!(!supported(&CqlType::Timestamp, &CqlType::TimeUuid));
        assert!(!supported(&CqlType::Int, &CqlType::Timestamp));
    }
}
