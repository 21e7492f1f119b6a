//! The `sum` and `avg` aggregates, with the results of Cassandra 5.0.9's
//! `AggregateFcts`:
//!
//! - They are defined over tinyint, smallint, int, bigint, counter, float,
//!   double, decimal and varint; the result has the argument's type.
//! - Nulls are skipped; over no (non-null) values both give 0.
//! - `sum` of an integer type wraps in that type (Java's arithmetic); `avg`
//!   of an integer type sums in 64 bits (in a big integer past that) and
//!   truncates the quotient toward zero.
//! - float and double sum in double precision with Kahan's compensation;
//!   a float result is the double rounded to float.
//! - decimal and varint sums are exact; the varint average truncates and the
//!   decimal average is the running mean `avg += (x - avg) / n`, each
//!   quotient rounded half-even to the scale of `x - avg`.

use num_bigint::{BigInt, Sign};

use types::{CqlType, Value};

use crate::functions::arith::as_long;

/// The types `sum` and `avg` are defined over, in Cassandra's order.
pub(super) const NUMERIC: [CqlType; 9] = [
    CqlType::TinyInt,
    CqlType::SmallInt,
    CqlType::Int,
    CqlType::BigInt,
    CqlType::Float,
    CqlType::Double,
    CqlType::Decimal,
    CqlType::Varint,
    CqlType::Counter,
];

/// Cassandra's refusal of `sum`/`avg` of a non-numeric column.
pub(super) fn no_signature(function: &str) -> String {
    let known: Vec<String> = NUMERIC.iter().map(|t| format!("system.{function} : ({0}) -> {0}", t.to_cql())).collect();
    format!(
        "Invalid call to function {function}, none of its type signatures match (known type signatures: {})",
        known.join(", ")
    )
}

/// Which aggregate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Numeric {
    Sum,
    Avg,
}

/// The aggregate of the (non-null, serialized) `values` of type `ty`; `None`
/// for a type it is not defined over (refused when planning).
pub(crate) fn compute<'v>(kind: Numeric, ty: &CqlType, values: impl Iterator<Item = &'v [u8]>) -> Option<Vec<u8>> {
    // A value that does not decode is skipped, as a null.
    let values: Vec<Value> = values.filter_map(|v| Value::deserialize(ty, v).ok()).collect();
    let out = match ty {
        CqlType::TinyInt | CqlType::SmallInt | CqlType::Int | CqlType::BigInt | CqlType::Counter => {
            let longs: Vec<i64> = values.iter().filter_map(as_long).collect();
            let n = match kind {
                Numeric::Sum => longs.iter().fold(0i64, |a, b| a.wrapping_add(*b)),
                Numeric::Avg => long_average(&longs),
            };
            // Narrowing keeps the low bits, as Java's casts (a wrapped sum).
            match ty {
                CqlType::TinyInt => Value::TinyInt(n as i8),
                CqlType::SmallInt => Value::SmallInt(n as i16),
                CqlType::Int => Value::Int(n as i32),
                CqlType::Counter => Value::Counter(n),
                _ => Value::BigInt(n),
            }
        }
        CqlType::Float | CqlType::Double => {
            let doubles: Vec<f64> = values
                .iter()
                .filter_map(|v| match v {
                    Value::Float(f) => Some(f64::from(*f)),
                    Value::Double(d) => Some(*d),
                    _ => None,
                })
                .collect();
            let d = match kind {
                Numeric::Sum => kahan_sum(doubles.iter().copied()),
                Numeric::Avg => double_average(&doubles),
            };
            if *ty == CqlType::Float {
                Value::Float(d as f32)
            } else {
                Value::Double(d)
            }
        }
        CqlType::Varint => {
            let ints: Vec<&BigInt> =
                values.iter().filter_map(|v| if let Value::Varint(i) = v { Some(i) } else { None }).collect();
            let sum: BigInt = ints.iter().copied().sum();
            match kind {
                Numeric::Sum => Value::Varint(sum),
                // BigInt division truncates toward zero, as Java's BigInteger.
                Numeric::Avg if ints.is_empty() => Value::Varint(BigInt::from(0)),
                Numeric::Avg => Value::Varint(sum / BigInt::from(ints.len())),
            }
        }
        CqlType::Decimal => {
            let decimals: Vec<Dec> = values
                .into_iter()
                .filter_map(|v| match v {
                    Value::Decimal { unscaled, scale } => Some(Dec { unscaled, scale }),
                    _ => None,
                })
                .collect();
            let zero = Dec { unscaled: BigInt::from(0), scale: 0 };
            let d = match kind {
                Numeric::Sum => decimals.iter().fold(zero, |a, b| a.add(b)),
                Numeric::Avg => {
                    let mut avg = zero;
                    for (i, x) in decimals.iter().enumerate() {
                        let step = x.sub(&avg).div_half_even(&BigInt::from(i + 1));
                        avg = avg.add(&step);
                    }
                    avg
                }
            };
            Value::Decimal { unscaled: d.unscaled, scale: d.scale }
        }
        _ => return None,
    };
    Some(out.to_bytes())
}

/// The truncated mean of longs, summed exactly.
fn long_average(longs: &[i64]) -> i64 {
    if longs.is_empty() {
        return 0;
    }
    let count = longs.len() as i64;
    let mut sum = 0i64;
    for (i, n) in longs.iter().enumerate() {
        match sum.checked_add(*n) {
            Some(s) => sum = s,
            None => {
                let big: BigInt = BigInt::from(sum) + longs[i..].iter().map(|n| BigInt::from(*n)).sum::<BigInt>();
                let mean = big / BigInt::from(count);
                // The mean of longs is a long.
                return i64::try_from(mean).unwrap_or_default();
            }
        }
    }
    sum / count
}

/// Kahan-compensated sum; a NaN from adding infinities of one sign is that infinity.
fn kahan_sum(values: impl Iterator<Item = f64>) -> f64 {
    let (mut sum, mut compensation, mut simple) = (0f64, 0f64, 0f64);
    for x in values {
        simple += x;
        let y = x - compensation;
        let t = sum + y;
        compensation = (t - sum) - y;
        sum = t;
    }
    let total = sum + compensation;
    if total.is_nan() && simple.is_infinite() {
        simple
    } else {
        total
    }
}

/// The mean of doubles: their compensated sum over the count; where that sum
/// overflows though no value is infinite, the sum of each value over the count.
fn double_average(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let count = values.len() as f64;
    let mut partial = 0f64;
    let mut overflowed = false;
    for x in values {
        partial += x;
        if partial.is_infinite() && !x.is_infinite() {
            overflowed = true;
            break;
        }
    }
    if overflowed {
        return kahan_sum(values.iter().map(|x| x / count));
    }
    kahan_sum(values.iter().copied()) / count
}

/// A decimal, `unscaled * 10^-scale` (Java's BigDecimal arithmetic).
#[derive(Clone, Debug, PartialEq)]
struct Dec {
    unscaled: BigInt,
    scale: i32,
}

impl Dec {
    /// This value with the larger scale `scale`.
    fn rescaled(&self, scale: i32) -> BigInt {
        let up = u32::try_from(i64::from(scale) - i64::from(self.scale)).unwrap_or(0);
        &self.unscaled * BigInt::from(10).pow(up)
    }

    fn add(&self, other: &Dec) -> Dec {
        let scale = self.scale.max(other.scale);
        Dec { unscaled: self.rescaled(scale) + other.rescaled(scale), scale }
    }

    fn sub(&self, other: &Dec) -> Dec {
        let scale = self.scale.max(other.scale);
        Dec { unscaled: self.rescaled(scale) - other.rescaled(scale), scale }
    }

    /// Divided by a positive integer, rounded half-even to this scale.
    fn div_half_even(&self, divisor: &BigInt) -> Dec {
        let quotient = &self.unscaled / divisor;
        let remainder = &self.unscaled - &quotient * divisor;
        let twice = remainder.magnitude() * 2u32;
        let away = match twice.cmp(divisor.magnitude()) {
            std::cmp::Ordering::Greater => true,
            std::cmp::Ordering::Equal => quotient.magnitude().bit(0),
            std::cmp::Ordering::Less => false,
        };
        let unscaled = if away {
            match self.unscaled.sign() {
                Sign::Minus => quotient - 1,
                _ => quotient + 1,
            }
        } else {
            quotient
        };
        Dec { unscaled, scale: self.scale }
    }
}
