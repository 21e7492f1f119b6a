//! The Java text forms Cassandra's JSON support goes through: how
//! `Double.toString`, `Float.toString` and `BigDecimal.toString` print
//! numbers, and what `Double.parseDouble`, `Float.parseFloat`,
//! `Long.parseLong`, `new BigInteger(s)` and `new BigDecimal(s)` accept.

use num_bigint::{BigInt, Sign};

/// `Double.toString`: `NaN`, `Infinity`, `-0.0`, plain notation with at least
/// one fraction digit for 1e-3 <= |v| < 1e7 (`100.0`, `0.001`), else
/// computerized scientific notation (`1.0E7`, `1.234E-5`). The digits are the
/// shortest that identify the value. (Java 17's `FloatingDecimal` sometimes
/// prints one digit more, or rounds a last digit differently; the value read
/// back is the same.)
pub fn double_to_string(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity".into() } else { "-Infinity".into() };
    }
    layout(&format!("{:e}", v.abs()), v.is_sign_negative(), v.abs())
}

/// `Float.toString`, as [`double_to_string`] with the shortest digits that identify the `float`.
pub fn float_to_string(v: f32) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity".into() } else { "-Infinity".into() };
    }
    layout(&format!("{:e}", v.abs()), v.is_sign_negative(), f64::from(v.abs()))
}

/// Lays out Rust's `{:e}` digits (`d.ddde±x`) the way Java prints a floating-point number.
fn layout(sci: &str, negative: bool, abs: f64) -> String {
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci, "0"));
    let exp: i64 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let mut out = String::with_capacity(digits.len() + 8);
    if negative {
        out.push('-');
    }
    if abs == 0.0 {
        out.push_str("0.0");
        return out;
    }
    let (first, rest) = digits.split_at(1.min(digits.len()));
    if (1e-3..1e7).contains(&abs) {
        if exp >= 0 {
            let int_len = exp as usize + 1;
            if digits.len() > int_len {
                let (int, frac) = digits.split_at(int_len);
                out.push_str(int);
                out.push('.');
                out.push_str(frac);
            } else {
                out.push_str(&digits);
                out.extend(std::iter::repeat_n('0', int_len - digits.len()));
                out.push_str(".0");
            }
        } else {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-exp - 1) as usize));
            out.push_str(&digits);
        }
    } else {
        out.push_str(first);
        out.push('.');
        out.push_str(if rest.is_empty() { "0" } else { rest });
        out.push('E');
        out.push_str(&exp.to_string());
    }
    out
}

/// What `Double.parseDouble` accepts, as the text Rust's parser reads:
/// surrounding white space (chars <= ' ') is trimmed; then an optional sign
/// and `NaN`, `Infinity`, a decimal number (`1`, `1.`, `.5`, `1e5`) or a
/// hexadecimal one (`0x1.8p3`), optionally followed by one of `fFdD`.
enum JavaFloat {
    Decimal(String),
    Hex { negative: bool, mantissa: u64, sticky: bool, exp2: i64 },
    NaN,
    Infinity { negative: bool },
}

fn scan_java_float(s: &str) -> Option<JavaFloat> {
    let t = s.trim_matches(|c: char| c <= ' ');
    let (negative, body) = match t.as_bytes().first() {
        Some(b'-') => (true, t.get(1..)?),
        Some(b'+') => (false, t.get(1..)?),
        _ => (false, t),
    };
    if body == "NaN" {
        return Some(JavaFloat::NaN);
    }
    if body == "Infinity" {
        return Some(JavaFloat::Infinity { negative });
    }
    let body = body.strip_suffix(['f', 'F', 'd', 'D']).unwrap_or(body);
    if let Some(hex) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        return scan_hex_float(negative, hex);
    }
    let b = body.as_bytes();
    let mut i = 0;
    let int_digits = b.iter().take_while(|c| c.is_ascii_digit()).count();
    i += int_digits;
    let mut frac_digits = 0;
    if b.get(i) == Some(&b'.') {
        i += 1;
        frac_digits = b.get(i..)?.iter().take_while(|c| c.is_ascii_digit()).count();
        i += frac_digits;
    }
    if int_digits + frac_digits == 0 {
        return None;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let exp_digits = b.get(i..)?.iter().take_while(|c| c.is_ascii_digit()).count();
        if exp_digits == 0 {
            return None;
        }
        i += exp_digits;
    }
    if i != b.len() {
        return None;
    }
    let mut text = String::with_capacity(body.len() + 3);
    if negative {
        text.push('-');
    }
    if int_digits == 0 {
        text.push('0');
    }
    text.push_str(body);
    Some(JavaFloat::Decimal(text))
}

/// `0x` hex digits `[.hex digits]` `p` exponent (the binary exponent is required).
fn scan_hex_float(negative: bool, s: &str) -> Option<JavaFloat> {
    let (mant, exp) = s.split_once(['p', 'P'])?;
    let exp2: i64 = {
        let digits = exp.strip_prefix(['+', '-']).unwrap_or(exp);
        if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        let v: i64 = digits.parse().unwrap_or(i64::MAX / 4).min(i64::MAX / 4);
        if exp.starts_with('-') {
            -v
        } else {
            v
        }
    };
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    if int.len() + frac.len() == 0 || !int.chars().chain(frac.chars()).all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let mut mantissa: u64 = 0;
    let mut sticky = false;
    let mut shift: i64 = 0;
    for (i, c) in int.chars().chain(frac.chars()).enumerate() {
        let d = u64::from(c.to_digit(16)?);
        let in_fraction = i >= int.len();
        if mantissa >> 60 == 0 {
            mantissa = (mantissa << 4) | d;
            if in_fraction {
                shift -= 4;
            }
        } else {
            sticky |= d != 0;
            if !in_fraction {
                shift += 4;
            }
        }
    }
    Some(JavaFloat::Hex { negative, mantissa, sticky, exp2: exp2.saturating_add(shift) })
}

fn hex_value(negative: bool, mantissa: u64, sticky: bool, exp2: i64) -> f64 {
    // One bit below the last kept one stands for the dropped digits (round to nearest).
    let m = if sticky { mantissa | 1 } else { mantissa };
    let mut v = m as f64;
    let mut e = exp2;
    while e > 0 && v.is_finite() {
        let step = e.min(1000);
        v *= 2f64.powi(step as i32);
        e -= step;
    }
    while e < 0 && v != 0.0 {
        let step = (-e).min(1000);
        v /= 2f64.powi(step as i32);
        e += step;
    }
    if negative {
        -v
    } else {
        v
    }
}

/// `Double.parseDouble(s)` (`Double.valueOf`).
pub fn parse_double(s: &str) -> Option<f64> {
    match scan_java_float(s)? {
        JavaFloat::Decimal(text) => text.parse().ok(),
        JavaFloat::Hex { negative, mantissa, sticky, exp2 } => Some(hex_value(negative, mantissa, sticky, exp2)),
        JavaFloat::NaN => Some(f64::NAN),
        JavaFloat::Infinity { negative } => Some(if negative { f64::NEG_INFINITY } else { f64::INFINITY }),
    }
}

/// `Float.parseFloat(s)`: the same forms, rounded to a `float` once.
pub fn parse_float(s: &str) -> Option<f32> {
    match scan_java_float(s)? {
        JavaFloat::Decimal(text) => text.parse().ok(),
        JavaFloat::Hex { negative, mantissa, sticky, exp2 } => Some(hex_value(negative, mantissa, sticky, exp2) as f32),
        JavaFloat::NaN => Some(f32::NAN),
        JavaFloat::Infinity { negative } => Some(if negative { f32::NEG_INFINITY } else { f32::INFINITY }),
    }
}

/// `Long.parseLong` / `Integer.parseInt` / `Short.parseShort` /
/// `Byte.parseByte`: an optional sign and ASCII digits, within `min..=max`.
pub fn parse_integer(s: &str, min: i64, max: i64) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let v: i128 = if digits.len() > 30 { return None } else { s.parse().ok()? };
    let v = i64::try_from(v).ok()?;
    (min..=max).contains(&v).then_some(v)
}

/// `new BigInteger(s)`: an optional sign and at least one ASCII digit.
pub fn parse_big_integer(s: &str) -> Option<BigInt> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.strip_prefix('+').unwrap_or(s).parse().ok()
}

/// `new BigDecimal(s)`: `(unscaled, scale)` for an optional sign, digits with
/// at most one `.` (at least one digit), and an optional exponent
/// (`e`/`E`, optional sign, digits); the scale must fit an `int`.
pub fn parse_big_decimal(s: &str) -> Option<(BigInt, i32)> {
    let (negative, body) = match s.as_bytes().first() {
        Some(b'-') => (true, s.get(1..)?),
        Some(b'+') => (false, s.get(1..)?),
        _ => (false, s),
    };
    let (significand, exponent) = match body.find(['e', 'E']) {
        Some(i) => (body.get(..i)?, Some(body.get(i + 1..)?)),
        None => (body, None),
    };
    let (int, frac) = significand.split_once('.').unwrap_or((significand, ""));
    if int.len() + frac.len() == 0 || !int.bytes().chain(frac.bytes()).all(|c| c.is_ascii_digit()) {
        return None;
    }
    let exp: i64 = match exponent {
        None => 0,
        Some(e) => {
            let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
            if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
                return None;
            }
            let v = i32::try_from(e.strip_prefix('+').unwrap_or(e).parse::<i64>().ok()?).ok()?;
            i64::from(v)
        }
    };
    let scale = i32::try_from(frac.len() as i64 - exp).ok()?;
    let mut unscaled: BigInt = format!("{int}{frac}").parse().ok()?;
    if negative {
        unscaled = -unscaled;
    }
    Some((unscaled, scale))
}

/// `BigDecimal.toString()`: plain for a non-negative scale and an adjusted
/// exponent >= -6 (`1.50`, `0.000001`), else scientific (`1E+3`, `1E-7`,
/// `1.2345E+49`).
pub fn big_decimal_to_string(unscaled: &BigInt, scale: i32) -> String {
    let coeff = unscaled.magnitude().to_str_radix(10);
    let mut out = String::with_capacity(coeff.len() + 8);
    if unscaled.sign() == Sign::Minus {
        out.push('-');
    }
    if scale == 0 {
        out.push_str(&coeff);
        return out;
    }
    let adjusted = -i64::from(scale) + (coeff.len() as i64 - 1);
    if scale > 0 && adjusted >= -6 {
        let scale = scale as usize;
        if coeff.len() > scale {
            let (int, frac) = coeff.split_at(coeff.len() - scale);
            out.push_str(int);
            out.push('.');
            out.push_str(frac);
        } else {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', scale - coeff.len()));
            out.push_str(&coeff);
        }
    } else {
        let (first, rest) = coeff.split_at(1.min(coeff.len()));
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        out.push('E');
        if adjusted > 0 {
            out.push('+');
        }
        out.push_str(&adjusted.to_string());
    }
    out
}
