//! `exp`, `log` and `log10` of decimals, as Cassandra 5.0.9 computes them:
//! 32 significant digits (rounded half even), trailing zeros stripped.
//! Computed in fixed point with guard digits (`W` digits after the point):
//! `exp` by halving the argument below 1/2, a Taylor series and squaring
//! back; `ln` by `2·atanh((m-1)/(m+1))` on the mantissa `m` in [1, 10)
//! plus the exponent times `ln 10`.

use num_bigint::{BigInt, Sign};

use super::arith::Dec;

/// Significant digits of a result.
const DIGITS: u32 = 32;

fn pow10(n: u32) -> BigInt {
    BigInt::from(10).pow(n)
}

/// `d` as a fixed-point number with `w` digits after the point (truncated).
fn fixed(d: &Dec, w: u32) -> BigInt {
    let shift = i64::from(w) - i64::from(d.scale);
    if shift >= 0 {
        &d.unscaled * pow10(shift as u32)
    } else {
        &d.unscaled / pow10((-shift) as u32)
    }
}

/// A fixed-point value rounded to `DIGITS` significant digits, half even, trailing zeros stripped.
fn round(v: &BigInt, w: u32) -> Dec {
    let digits = v.magnitude().to_str_radix(10).len() as u32;
    let drop = digits.saturating_sub(DIGITS);
    let down = pow10(drop);
    let mut q = v / &down;
    let rem = v - &q * &down;
    let twice = rem.magnitude() * 2u32;
    let away = match twice.cmp(down.magnitude()) {
        std::cmp::Ordering::Greater => true,
        std::cmp::Ordering::Equal => q.magnitude().bit(0),
        std::cmp::Ordering::Less => false,
    };
    if away && drop > 0 {
        q += if v.sign() == Sign::Minus { -1 } else { 1 };
    }
    Dec { unscaled: q, scale: w as i32 - drop as i32 }.strip_trailing_zeros()
}

/// `e^x`; `None` for arguments too large to compute.
pub fn exp(x: &Dec) -> Option<Dec> {
    let approx: f64 = types::json::big_decimal_to_string(&x.unscaled, x.scale).parse().ok()?;
    if !approx.is_finite() || approx.abs() > 100_000.0 {
        return None;
    }
    let halvings = (approx.abs() * 2.0).max(1.0).log2().ceil() as u32 + 1;
    // Guard digits for the squarings and for the leading zeros of a small result.
    let w = DIGITS + 20 + halvings + (approx.abs() / 2.3) as u32;
    let one = pow10(w);
    let mut y = fixed(x, w) / BigInt::from(2).pow(halvings);
    let negative = y.sign() == Sign::Minus;
    if negative {
        y = -y;
    }
    let (mut sum, mut term) = (one.clone(), one.clone());
    for n in 1u32.. {
        term = &term * &y / (&one * BigInt::from(n));
        if term.sign() == Sign::NoSign {
            break;
        }
        sum += &term;
    }
    for _ in 0..halvings {
        sum = &sum * &sum / &one;
    }
    if negative {
        sum = &one * &one / sum;
    }
    Some(round(&sum, w))
}

/// `2·atanh(z)` for a fixed-point `z` in [0, 1).
fn two_atanh(z: &BigInt, one: &BigInt) -> BigInt {
    let z2 = z * z / one;
    let (mut sum, mut power) = (z.clone(), z.clone());
    for k in 1u32.. {
        power = &power * &z2 / one;
        let term = &power / BigInt::from(2 * k + 1);
        if term.sign() == Sign::NoSign {
            break;
        }
        sum += term;
    }
    sum * 2
}

/// `ln x` in fixed point with `w` digits; `None` for x <= 0.
fn ln_fixed(x: &Dec, w: u32) -> Option<BigInt> {
    if x.unscaled.sign() != Sign::Plus {
        return None;
    }
    let one = pow10(w);
    // x = m * 10^e with m in [1, 10).
    let e = x.unscaled.to_str_radix(10).len() as i64 - 1 - i64::from(x.scale);
    let m = Dec { unscaled: x.unscaled.clone(), scale: (x.unscaled.to_str_radix(10).len() - 1) as i32 };
    let m = fixed(&m, w);
    let ln_m = two_atanh(&((&m - &one) * &one / (&m + &one)), &one);
    let ten = pow10(w + 1);
    let ln10 = two_atanh(&((&ten - &one) * &one / (&ten + &one)), &one);
    Some(ln_m + ln10 * BigInt::from(e))
}

/// The error Cassandra reports for the log of a number zero or less.
pub const LOG_DOMAIN: &str = "java.lang.ArithmeticException: Natural log of number zero or less";

/// `ln x`; `None` for x <= 0.
pub fn ln(x: &Dec) -> Option<Dec> {
    let w = DIGITS + 30;
    ln_fixed(x, w).map(|v| round(&v, w))
}

/// `log10 x`; `None` for x <= 0.
pub fn log10(x: &Dec) -> Option<Dec> {
    let w = DIGITS + 30;
    let one = pow10(w);
    let ln_x = ln_fixed(x, w)?;
    let ln10 = ln_fixed(&Dec { unscaled: BigInt::from(10), scale: 0 }, w)?;
    Some(round(&(ln_x * &one / ln10), w))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Dec {
        Dec::parse(s).expect("decimal")
    }

    fn text(x: Option<Dec>) -> String {
        let x = x.expect("defined");
        types::json::big_decimal_to_string(&x.unscaled, x.scale)
    }

    #[test]
    fn results_match_cassandra() {
        assert_eq!(text(exp(&d("1.25"))), "3.4903429574618413761305460296723");
        assert_eq!(text(ln(&d("1.25"))), "0.22314355131420975576629509030983");
        assert_eq!(text(log10(&d("1.25"))), "0.096910013008056414358783315826521");
        assert_eq!(text(exp(&d("-1.25"))), "0.28650479686019010032488542664784");
        assert_eq!(text(exp(&d("125.00"))), "1.9355760420357225687206244905275E+54");
        assert_eq!(text(ln(&d("1250000.00"))), "14.038654109278483859874243818416");
        assert_eq!(text(log10(&d("0.00125"))), "-2.9030899869919435856412166841735");
        assert_eq!(text(exp(&d("0"))), "1");
        assert_eq!(text(ln(&d("1.00"))), "0");
        assert_eq!(text(log10(&d("10.000"))), "1");
        assert!(ln(&d("0")).is_none());
        assert!(ln(&d("-1")).is_none());
    }
}
