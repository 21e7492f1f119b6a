//! The arithmetic operators (`+ - * / %` and negation) over values, with the
//! result types and results of Cassandra 5.0.9's `OperationFcts`:
//!
//! - Numbers: the result type is the wider operand type (tinyint < smallint
//!   < int < bigint; float, double; varint; decimal), except that float with
//!   bigint is double and varint with float or double is decimal. Integer
//!   results wrap as Java's arithmetic does; integer division by zero fails
//!   (`/ by zero`), float and double follow IEEE 754 (infinities, NaN).
//! - varint is exact; decimal is exact for `+ - * %`, and `/` keeps at least
//!   32 significant digits (rounded half up, trailing zeros stripped). Other
//!   numbers enter decimal arithmetic through Java's `Double.toString`
//!   (`2` is `2.0`), as Cassandra's `BigDecimal.valueOf(double)` does.
//! - timestamp and date `±` duration (months, then days, then the rest; a
//!   date takes only whole days); text and ascii concatenate with `+`.
//!
//! A failure is a `FunctionFailure` naming the operation's function
//! (`_add`, `_substract`, ...) and argument types.

use cql::ast::ArithmeticOp;
use num_bigint::{BigInt, Sign};
use types::{CqlType, Value};

use crate::error::QueryError;

/// The operator as written.
pub fn symbol(op: ArithmeticOp) -> char {
    match op {
        ArithmeticOp::Add => '+',
        ArithmeticOp::Subtract => '-',
        ArithmeticOp::Multiply => '*',
        ArithmeticOp::Divide => '/',
        ArithmeticOp::Modulo => '%',
    }
}

/// The native function Cassandra implements the operator with.
pub fn function_name(op: ArithmeticOp) -> &'static str {
    match op {
        ArithmeticOp::Add => "_add",
        ArithmeticOp::Subtract => "_substract",
        ArithmeticOp::Multiply => "_multiply",
        ArithmeticOp::Divide => "_divide",
        ArithmeticOp::Modulo => "_modulo",
    }
}

/// Binding strength, for naming nested operations with their parentheses.
pub fn precedence(op: ArithmeticOp) -> u8 {
    match op {
        ArithmeticOp::Add | ArithmeticOp::Subtract => 1,
        _ => 2,
    }
}

/// The number types arithmetic is defined over.
pub fn is_numeric(ty: &CqlType) -> bool {
    matches!(
        ty,
        CqlType::TinyInt
            | CqlType::SmallInt
            | CqlType::Int
            | CqlType::BigInt
            | CqlType::Counter
            | CqlType::Float
            | CqlType::Double
            | CqlType::Varint
            | CqlType::Decimal
    )
}

fn integer_rank(ty: &CqlType) -> Option<u8> {
    match ty {
        CqlType::TinyInt => Some(1),
        CqlType::SmallInt => Some(2),
        CqlType::Int => Some(3),
        CqlType::BigInt | CqlType::Counter => Some(4),
        _ => None,
    }
}

/// The type of `l op r`, or `None` where Cassandra has no such operation.
pub fn result_type(op: ArithmeticOp, l: &CqlType, r: &CqlType) -> Option<CqlType> {
    if is_numeric(l) && is_numeric(r) {
        return Some(numeric_result(l, r));
    }
    let additive = matches!(op, ArithmeticOp::Add | ArithmeticOp::Subtract);
    match (l, r) {
        (CqlType::Timestamp, CqlType::Duration) if additive => Some(CqlType::Timestamp),
        (CqlType::Date, CqlType::Duration) if additive => Some(CqlType::Date),
        (CqlType::Ascii, CqlType::Ascii) if op == ArithmeticOp::Add => Some(CqlType::Ascii),
        (CqlType::Ascii | CqlType::Text, CqlType::Ascii | CqlType::Text) if op == ArithmeticOp::Add => {
            Some(CqlType::Text)
        }
        _ => None,
    }
}

fn numeric_result(l: &CqlType, r: &CqlType) -> CqlType {
    let either = |t: &CqlType| l == t || r == t;
    let floating = either(&CqlType::Float) || either(&CqlType::Double);
    if either(&CqlType::Decimal) || (either(&CqlType::Varint) && floating) {
        CqlType::Decimal
    } else if either(&CqlType::Varint) {
        CqlType::Varint
    } else if either(&CqlType::Double) {
        CqlType::Double
    } else if either(&CqlType::Float) {
        // A bigint does not fit a float's precision.
        if either(&CqlType::BigInt) || either(&CqlType::Counter) {
            CqlType::Double
        } else {
            CqlType::Float
        }
    } else {
        let rank = integer_rank(l).max(integer_rank(r));
        match rank {
            Some(1) => CqlType::TinyInt,
            Some(2) => CqlType::SmallInt,
            Some(3) => CqlType::Int,
            _ => CqlType::BigInt,
        }
    }
}

/// The type of `-x`, or `None` where negation is not defined.
pub fn negate_type(ty: &CqlType) -> Option<CqlType> {
    match ty {
        CqlType::Counter => Some(CqlType::BigInt),
        t if is_numeric(t) => Some(t.clone()),
        _ => None,
    }
}

/// A failed operation, as Cassandra reports it (error code 0x1400).
fn failure(op: ArithmeticOp, lt: &CqlType, rt: &CqlType, reason: &str) -> QueryError {
    QueryError::FunctionFailure {
        keyspace: "system".into(),
        function: function_name(op).into(),
        arg_types: vec![lt.to_cql(), rt.to_cql()],
        message: format!("the operation '{} {} {}' failed: {reason}", lt.to_cql(), symbol(op), rt.to_cql()),
    }
}

/// `l op r` for values of types `lt` and `rt` (`result_type` must have
/// accepted them); the result has `result_type(op, lt, rt)`.
pub fn apply(op: ArithmeticOp, lt: &CqlType, l: &Value, rt: &CqlType, r: &Value) -> Result<Value, QueryError> {
    let ty = result_type(op, lt, rt)
        .ok_or_else(|| QueryError::Invalid(format!("the '{}' operation is not supported", symbol(op))))?;
    let fail = |reason: &str| failure(op, lt, rt, reason);
    let bad = || QueryError::Server(format!("unexpected operand types for {}", symbol(op)));
    Ok(match ty {
        CqlType::TinyInt | CqlType::SmallInt | CqlType::Int | CqlType::BigInt => {
            let (a, b) = (as_long(l).ok_or_else(bad)?, as_long(r).ok_or_else(bad)?);
            let n = match op {
                ArithmeticOp::Add => a.wrapping_add(b),
                ArithmeticOp::Subtract => a.wrapping_sub(b),
                ArithmeticOp::Multiply => a.wrapping_mul(b),
                ArithmeticOp::Divide if b == 0 => return Err(fail("/ by zero")),
                ArithmeticOp::Divide => a.wrapping_div(b),
                ArithmeticOp::Modulo if b == 0 => return Err(fail("/ by zero")),
                ArithmeticOp::Modulo => a.wrapping_rem(b),
            };
            narrow(n, &ty)
        }
        CqlType::Float => {
            let (a, b) = (as_f64(l).ok_or_else(bad)? as f32, as_f64(r).ok_or_else(bad)? as f32);
            Value::Float(match op {
                ArithmeticOp::Add => a + b,
                ArithmeticOp::Subtract => a - b,
                ArithmeticOp::Multiply => a * b,
                ArithmeticOp::Divide => a / b,
                ArithmeticOp::Modulo => a % b,
            })
        }
        CqlType::Double => {
            let (a, b) = (as_f64(l).ok_or_else(bad)?, as_f64(r).ok_or_else(bad)?);
            Value::Double(match op {
                ArithmeticOp::Add => a + b,
                ArithmeticOp::Subtract => a - b,
                ArithmeticOp::Multiply => a * b,
                ArithmeticOp::Divide => a / b,
                ArithmeticOp::Modulo => a % b,
            })
        }
        CqlType::Varint => {
            let (a, b) = (as_big(l).ok_or_else(bad)?, as_big(r).ok_or_else(bad)?);
            Value::Varint(match op {
                ArithmeticOp::Add => a + b,
                ArithmeticOp::Subtract => a - b,
                ArithmeticOp::Multiply => a * b,
                _ if (b.sign() == Sign::NoSign) => return Err(fail("BigInteger divide by zero")),
                // BigInt's division truncates toward zero, as BigInteger's.
                ArithmeticOp::Divide => a / b,
                ArithmeticOp::Modulo => a % b,
            })
        }
        CqlType::Decimal => {
            let (a, b) = (Dec::of(l).ok_or_else(bad)?, Dec::of(r).ok_or_else(bad)?);
            let d = match op {
                ArithmeticOp::Add => a.add(&b),
                ArithmeticOp::Subtract => a.add(&b.neg()),
                ArithmeticOp::Multiply => Dec { unscaled: a.unscaled * b.unscaled, scale: a.scale + b.scale },
                ArithmeticOp::Divide if (b.unscaled.sign() == Sign::NoSign) => {
                    return Err(fail("BigInteger divide by zero"))
                }
                ArithmeticOp::Divide => a.divide(&b),
                ArithmeticOp::Modulo if (b.unscaled.sign() == Sign::NoSign) => {
                    return Err(fail(if a.unscaled.sign() == Sign::NoSign {
                        "Division undefined"
                    } else {
                        "Division by zero"
                    }))
                }
                ArithmeticOp::Modulo => a.remainder(&b),
            };
            Value::Decimal { unscaled: d.unscaled, scale: d.scale }
        }
        CqlType::Timestamp | CqlType::Date => {
            let Value::Duration { months, days, nanos } = r else { return Err(bad()) };
            let sign = if op == ArithmeticOp::Subtract { -1 } else { 1 };
            let (months, days, nanos) = (i64::from(*months) * sign, i64::from(*days) * sign, *nanos * sign);
            match l {
                Value::Timestamp(ms) => Value::Timestamp(super::time::add_duration(*ms, months, days, nanos)),
                Value::Date(d) => {
                    if nanos != 0 {
                        let Value::Duration { months, days, nanos } = r else { return Err(bad()) };
                        let text = types::literal::format_duration(*months, *days, *nanos);
                        return Err(fail(&format!("The duration must have a day precision. Was: {text}")));
                    }
                    let ms = types::literal::date_to_timestamp(*d);
                    Value::Date(types::literal::timestamp_to_date(super::time::add_duration(ms, months, days, 0)))
                }
                _ => return Err(bad()),
            }
        }
        CqlType::Ascii | CqlType::Text => {
            let text = |v: &Value| match v {
                Value::Ascii(s) | Value::Text(s) => Some(s.clone()),
                _ => None,
            };
            let joined = text(l).ok_or_else(bad)? + &text(r).ok_or_else(bad)?;
            if ty == CqlType::Ascii {
                Value::Ascii(joined)
            } else {
                Value::Text(joined)
            }
        }
        _ => return Err(bad()),
    })
}

/// `-v` (`negate_type` must have accepted its type): integers wrap as Java's.
pub fn negate(v: &Value) -> Option<Value> {
    Some(match v {
        Value::TinyInt(x) => Value::TinyInt(x.wrapping_neg()),
        Value::SmallInt(x) => Value::SmallInt(x.wrapping_neg()),
        Value::Int(x) => Value::Int(x.wrapping_neg()),
        Value::BigInt(x) | Value::Counter(x) => Value::BigInt(x.wrapping_neg()),
        Value::Varint(x) => Value::Varint(-x),
        Value::Float(x) => Value::Float(-x),
        Value::Double(x) => Value::Double(-x),
        Value::Decimal { unscaled, scale } => Value::Decimal { unscaled: -unscaled, scale: *scale },
        Value::Duration { months, days, nanos } => {
            Value::Duration { months: months.wrapping_neg(), days: days.wrapping_neg(), nanos: nanos.wrapping_neg() }
        }
        _ => return None,
    })
}

/// An integer result narrowed to its type, keeping the low bits (Java's casts).
pub(super) fn narrow(n: i64, ty: &CqlType) -> Value {
    match ty {
        CqlType::TinyInt => Value::TinyInt(n as i8),
        CqlType::SmallInt => Value::SmallInt(n as i16),
        CqlType::Int => Value::Int(n as i32),
        _ => Value::BigInt(n),
    }
}

pub(crate) fn as_long(v: &Value) -> Option<i64> {
    match v {
        Value::TinyInt(n) => Some(i64::from(*n)),
        Value::SmallInt(n) => Some(i64::from(*n)),
        Value::Int(n) => Some(i64::from(*n)),
        Value::BigInt(n) | Value::Counter(n) => Some(*n),
        _ => None,
    }
}

pub(super) fn as_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Float(f) => Some(f64::from(*f)),
        Value::Double(d) => Some(*d),
        other => as_long(other).map(|n| n as f64),
    }
}

fn as_big(v: &Value) -> Option<BigInt> {
    match v {
        Value::Varint(b) => Some(b.clone()),
        other => as_long(other).map(BigInt::from),
    }
}

/// A decimal, `unscaled * 10^-scale`, with Java's `BigDecimal` arithmetic.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Dec {
    pub unscaled: BigInt,
    pub scale: i32,
}

fn pow10(n: u32) -> BigInt {
    BigInt::from(10).pow(n)
}

impl Dec {
    /// A number as decimal arithmetic sees it: integers, floats and doubles
    /// through Java's `Double.toString` (`BigDecimal.valueOf(double)`),
    /// varints exactly; `None` for NaN and the infinities.
    pub fn of(v: &Value) -> Option<Dec> {
        match v {
            Value::Decimal { unscaled, scale } => Some(Dec { unscaled: unscaled.clone(), scale: *scale }),
            Value::Varint(b) => Some(Dec { unscaled: b.clone(), scale: 0 }),
            other => {
                let d = as_f64(other)?;
                if !d.is_finite() {
                    return None;
                }
                Dec::parse(&types::json::double_to_string(d))
            }
        }
    }

    /// Parses `-12.5`, `1.0E10`, `1.25E-5`.
    pub fn parse(s: &str) -> Option<Dec> {
        let (mantissa, exp) = match s.find(['e', 'E']) {
            Some(i) => (&s[..i], s[i + 1..].trim_start_matches('+').parse::<i32>().ok()?),
            None => (s, 0),
        };
        let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        let unscaled: BigInt = format!("{int}{frac}").parse().ok()?;
        Some(Dec { unscaled, scale: i32::try_from(frac.len()).ok()?.checked_sub(exp)? })
    }

    fn rescaled(&self, scale: i32) -> BigInt {
        let up = u32::try_from(i64::from(scale) - i64::from(self.scale)).unwrap_or(0);
        &self.unscaled * pow10(up)
    }

    fn neg(&self) -> Dec {
        Dec { unscaled: -&self.unscaled, scale: self.scale }
    }

    fn add(&self, other: &Dec) -> Dec {
        let scale = self.scale.max(other.scale);
        Dec { unscaled: self.rescaled(scale) + other.rescaled(scale), scale }
    }

    /// The number of decimal digits of the unscaled value (`BigDecimal.precision`).
    fn precision(&self) -> i64 {
        if self.unscaled.sign() == Sign::NoSign {
            1
        } else {
            self.unscaled.magnitude().to_str_radix(10).len() as i64
        }
    }

    /// `this % other` (`BigDecimal.remainder`): the sign of the dividend,
    /// at the larger scale.
    fn remainder(&self, other: &Dec) -> Dec {
        let scale = self.scale.max(other.scale);
        Dec { unscaled: self.rescaled(scale) % other.rescaled(scale), scale }
    }

    /// `this / other` (non-zero) with at least 32 significant digits and at
    /// least the operands' scales (at most 1000), rounded half up, trailing
    /// zeros stripped.
    fn divide(&self, other: &Dec) -> Dec {
        let first_digit = self.precision() - i64::from(self.scale) - other.precision() + i64::from(other.scale);
        let scale = 32i64.max(32 - first_digit).max(i64::from(self.scale)).max(i64::from(other.scale)).min(1000);
        // unscaled = round(l.u * 10^(scale - l.s + r.s) / r.u)
        let shift = scale - i64::from(self.scale) + i64::from(other.scale);
        let (mut num, mut den) = (self.unscaled.clone(), other.unscaled.clone());
        if shift >= 0 {
            num *= pow10(u32::try_from(shift).unwrap_or(0));
        } else {
            den *= pow10(u32::try_from(-shift).unwrap_or(0));
        }
        let mut q = &num / &den;
        let rem = &num - &q * &den;
        if rem.magnitude() * 2u32 >= *den.magnitude() && rem.sign() != Sign::NoSign {
            let negative = (num.sign() == Sign::Minus) != (den.sign() == Sign::Minus);
            q += if negative { -1 } else { 1 };
        }
        Dec { unscaled: q, scale: scale as i32 }.strip_trailing_zeros()
    }

    /// `BigDecimal.stripTrailingZeros`: zero is `0` (scale 0).
    pub fn strip_trailing_zeros(mut self) -> Dec {
        if self.unscaled.sign() == Sign::NoSign {
            return Dec { unscaled: BigInt::from(0), scale: 0 };
        }
        let ten = BigInt::from(10);
        loop {
            let rem = &self.unscaled % &ten;
            if rem.sign() != Sign::NoSign {
                return self;
            }
            self.unscaled /= &ten;
            self.scale -= 1;
        }
    }

    /// Rounded to `scale` digits after the point, half away from zero.
    pub fn round_half_up(&self, scale: i32) -> Dec {
        if self.scale <= scale {
            return self.clone();
        }
        let down = pow10(u32::try_from(self.scale - scale).unwrap_or(0));
        let mut q = &self.unscaled / &down;
        let rem = &self.unscaled - &q * &down;
        if rem.magnitude() * 2u32 >= *down.magnitude() && rem.sign() != Sign::NoSign {
            q += if self.unscaled.sign() == Sign::Minus { -1 } else { 1 };
        }
        Dec { unscaled: q, scale }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ArithmeticOp::*;

    fn dec(s: &str) -> Value {
        let d = Dec::parse(s).expect("decimal");
        Value::Decimal { unscaled: d.unscaled, scale: d.scale }
    }

    fn op(o: ArithmeticOp, l: Value, lt: CqlType, r: Value, rt: CqlType) -> Result<Value, QueryError> {
        apply(o, &lt, &l, &rt, &r)
    }

    #[test]
    fn result_types_are_the_wider_operand() {
        use CqlType::*;
        let t = |l: CqlType, r: CqlType| result_type(Add, &l, &r);
        assert_eq!(t(Int, BigInt), Some(BigInt));
        assert_eq!(t(TinyInt, SmallInt), Some(SmallInt));
        assert_eq!(t(TinyInt, TinyInt), Some(TinyInt));
        assert_eq!(t(Float, Int), Some(Float));
        assert_eq!(t(Float, BigInt), Some(Double));
        assert_eq!(t(Varint, Double), Some(Decimal));
        assert_eq!(t(BigInt, Varint), Some(Varint));
        assert_eq!(t(Timestamp, Duration), Some(Timestamp));
        assert_eq!(result_type(Multiply, &Timestamp, &Duration), None);
        assert_eq!(t(Ascii, Ascii), Some(Ascii));
        assert_eq!(t(Text, Ascii), Some(Text));
        assert_eq!(result_type(Subtract, &Text, &Text), None);
        assert_eq!(t(Text, Int), None);
    }

    #[test]
    fn integers_wrap_as_java() {
        use CqlType::*;
        assert_eq!(op(Add, Value::Int(i32::MAX), Int, Value::Int(1), Int), Ok(Value::Int(i32::MIN)));
        assert_eq!(op(Multiply, Value::TinyInt(16), TinyInt, Value::TinyInt(16), TinyInt), Ok(Value::TinyInt(0)));
        assert_eq!(op(Divide, Value::Int(i32::MIN), Int, Value::Int(-1), Int), Ok(Value::Int(i32::MIN)));
        assert_eq!(op(Divide, Value::Int(-7), Int, Value::Int(2), Int), Ok(Value::Int(-3)));
        assert_eq!(op(Modulo, Value::Int(-7), Int, Value::Int(3), Int), Ok(Value::Int(-1)));
        assert_eq!(op(Add, Value::BigInt(i64::MAX), BigInt, Value::Int(1), Int), Ok(Value::BigInt(i64::MIN)));
    }

    #[test]
    fn division_by_zero_fails_like_cassandra() {
        use CqlType::*;
        let err = op(Divide, Value::Int(7), Int, Value::Int(0), Int).expect_err("fails");
        assert_eq!(err.to_string(), "the operation 'int / int' failed: / by zero");
        assert!(matches!(err, QueryError::FunctionFailure { ref function, .. } if function == "_divide"));
        let err = op(Modulo, dec("0"), Decimal, Value::Int(0), Int).expect_err("fails");
        assert_eq!(err.to_string(), "the operation 'decimal % int' failed: Division undefined");
        assert_eq!(op(Divide, Value::Double(1.0), Double, Value::Int(0), Int), Ok(Value::Double(f64::INFINITY)));
    }

    #[test]
    fn decimals_are_exact_or_keep_32_digits() {
        use CqlType::*;
        assert_eq!(op(Multiply, dec("1.25"), Decimal, Value::Int(2), Int), Ok(dec("2.500")));
        assert_eq!(op(Divide, dec("1.25"), Decimal, Value::Int(3), Int), Ok(dec("0.41666666666666666666666666666667")));
        assert_eq!(op(Divide, dec("1.25"), Decimal, dec("1.25"), Decimal), Ok(dec("1")));
        assert_eq!(op(Modulo, dec("1.25"), Decimal, dec("0.3"), Decimal), Ok(dec("0.05")));
        assert_eq!(op(Add, Value::Float(2.5), Float, dec("1.25"), Decimal), Ok(dec("3.75")));
        assert_eq!(op(Multiply, Value::BigInt(100), BigInt, dec("1.25"), Decimal), Ok(dec("125.000")));
    }

    #[test]
    fn time_and_text() {
        use CqlType::*;
        let day = Value::Duration { months: 0, days: 1, nanos: 0 };
        assert_eq!(op(Add, Value::Timestamp(0), Timestamp, day.clone(), Duration), Ok(Value::Timestamp(86_400_000)));
        assert_eq!(op(Subtract, Value::Date(1 << 31), Date, day, Duration), Ok(Value::Date((1 << 31) - 1)));
        let hour = Value::Duration { months: 0, days: 0, nanos: 3_600_000_000_000 };
        let err = op(Add, Value::Date(1 << 31), Date, hour, Duration).expect_err("fails");
        assert!(err.to_string().ends_with("The duration must have a day precision. Was: 1h"));
        assert_eq!(
            op(Add, Value::Text("x".into()), Text, Value::Ascii("y".into()), Ascii),
            Ok(Value::Text("xy".into()))
        );
    }
}
