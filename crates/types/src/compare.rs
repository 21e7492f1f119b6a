//! Cassandra's comparators: the order of serialized values of each CQL type
//! (`AbstractType.compare`), and the same order on `Value`s.
//!
//! Rules (from `db/marshal/*Type.java`):
//! - the empty value sorts before every other value of every type;
//! - `tinyint`..`bigint`, `counter`, `timestamp`: signed; `date`, `time`,
//!   `text`, `ascii`, `blob`, `inet`, `duration`: unsigned bytewise, shorter
//!   prefix first;
//! - `boolean`: false (0) before true (any non-zero byte);
//! - `float`/`double`: Java's `Float.compare`/`Double.compare` (-0.0 < 0.0,
//!   every NaN equal and greater than +Infinity);
//! - `varint`/`decimal`: numerically (so `1.0` equals `1.00`);
//! - `uuid`: version first, then the timestamp for version 1 (else the msb
//!   unsigned), then the lsb unsigned;
//! - `timeuuid`: timestamp, then the lsb as signed bytes;
//! - frozen list/set: element-wise, then shorter first; map: key then value
//!   per entry, then shorter first; tuple/UDT: field-wise with null before
//!   any value, trailing nulls ignored.
//!
//! Invariants: `compare_serialized` is a total preorder on valid values and
//! never panics (malformed bytes fall back to a bytewise order);
//! `compare_values(a, b) == compare_serialized(ty, a.to_bytes(), b.to_bytes())`
//! for values of type `ty`. One deliberate deviation: Cassandra's tuple
//! comparator ignores trailing *empty* fields after the shorter tuple ends,
//! which makes it non-transitive; here only trailing nulls are ignored.

use std::cmp::Ordering;
use std::net::IpAddr;

use num_bigint::{BigInt, Sign};

use crate::codec::{be_i32, split_collection, split_fields, split_map};
use crate::value::Value;
use crate::CqlType;

/// Compares two serialized values of type `ty` with Cassandra's comparator.
pub fn compare_serialized(ty: &CqlType, a: &[u8], b: &[u8]) -> Ordering {
    match (a.is_empty(), b.is_empty()) {
        (true, true) => return Ordering::Equal,
        (true, false) => return Ordering::Less,
        (false, true) => return Ordering::Greater,
        (false, false) => {}
    }
    match ty {
        CqlType::Ascii
        | CqlType::Text
        | CqlType::Blob
        | CqlType::Inet
        | CqlType::Duration
        | CqlType::Date
        | CqlType::Time => a.cmp(b),
        CqlType::Boolean => {
            let x = a.first().is_some_and(|v| *v != 0);
            let y = b.first().is_some_and(|v| *v != 0);
            x.cmp(&y)
        }
        CqlType::TinyInt
        | CqlType::SmallInt
        | CqlType::Int
        | CqlType::BigInt
        | CqlType::Counter
        | CqlType::Timestamp => signed_cmp(a, b),
        CqlType::Varint => BigInt::from_signed_bytes_be(a).cmp(&BigInt::from_signed_bytes_be(b)),
        CqlType::Float => match (<[u8; 4]>::try_from(a), <[u8; 4]>::try_from(b)) {
            (Ok(x), Ok(y)) => f32_key(u32::from_be_bytes(x)).cmp(&f32_key(u32::from_be_bytes(y))),
            _ => a.cmp(b),
        },
        CqlType::Double => match (<[u8; 8]>::try_from(a), <[u8; 8]>::try_from(b)) {
            (Ok(x), Ok(y)) => f64_key(u64::from_be_bytes(x)).cmp(&f64_key(u64::from_be_bytes(y))),
            _ => a.cmp(b),
        },
        CqlType::Decimal => match (decimal_key_of_bytes(a), decimal_key_of_bytes(b)) {
            (Some(x), Some(y)) => x.cmp(&y),
            _ => a.cmp(b),
        },
        CqlType::Uuid => match (<[u8; 16]>::try_from(a), <[u8; 16]>::try_from(b)) {
            (Ok(x), Ok(y)) => uuid_cmp(&x, &y),
            _ => a.cmp(b),
        },
        CqlType::TimeUuid => match (<[u8; 16]>::try_from(a), <[u8; 16]>::try_from(b)) {
            (Ok(x), Ok(y)) if uuid_version(&x) == 1 && uuid_version(&y) == 1 => timeuuid_cmp(&x, &y),
            _ => a.cmp(b),
        },
        CqlType::List { elem, .. } | CqlType::Set { elem, .. } => match (split_collection(a), split_collection(b)) {
            (Some(x), Some(y)) => {
                for (ea, eb) in x.iter().zip(y.iter()) {
                    let c = compare_opt(elem, *ea, *eb);
                    if c != Ordering::Equal {
                        return c;
                    }
                }
                x.len().cmp(&y.len())
            }
            _ => a.cmp(b),
        },
        CqlType::Map { key, value, .. } => match (split_map(a), split_map(b)) {
            (Some(x), Some(y)) => {
                for ((ka, va), (kb, vb)) in x.iter().zip(y.iter()) {
                    let c = compare_opt(key, *ka, *kb).then_with(|| compare_opt(value, *va, *vb));
                    if c != Ordering::Equal {
                        return c;
                    }
                }
                x.len().cmp(&y.len())
            }
            _ => a.cmp(b),
        },
        CqlType::Tuple(types) => compare_fields(&types.iter().collect::<Vec<_>>(), a, b),
        CqlType::Udt { fields, .. } => compare_fields(&fields.iter().map(|(_, t)| t).collect::<Vec<_>>(), a, b),
    }
}

/// Null (`None`) sorts before any value, including the empty value.
fn compare_opt(ty: &CqlType, a: Option<&[u8]>, b: Option<&[u8]>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(x), Some(y)) => compare_serialized(ty, x, y),
    }
}

fn compare_fields(types: &[&CqlType], a: &[u8], b: &[u8]) -> Ordering {
    let (Some(x), Some(y)) = (split_fields(a), split_fields(b)) else {
        return a.cmp(b);
    };
    let x = strip_trailing_nulls(x.into_iter().map(|f| f.unwrap_or(None)).collect());
    let y = strip_trailing_nulls(y.into_iter().map(|f| f.unwrap_or(None)).collect());
    for (i, (fa, fb)) in x.iter().zip(y.iter()).enumerate() {
        let ty = types.get(i).copied().unwrap_or(&CqlType::Blob);
        let c = compare_opt(ty, *fa, *fb);
        if c != Ordering::Equal {
            return c;
        }
    }
    x.len().cmp(&y.len())
}

pub(crate) fn strip_trailing_nulls<T>(mut fields: Vec<Option<T>>) -> Vec<Option<T>> {
    while matches!(fields.last(), Some(None)) {
        fields.pop();
    }
    fields
}

/// Cassandra's `LongType.compareLongs` (and Int32/Short/Byte): first byte
/// signed, the rest unsigned; numeric order for same-length values.
fn signed_cmp(a: &[u8], b: &[u8]) -> Ordering {
    let x = a.first().map(|v| *v as i8);
    let y = b.first().map(|v| *v as i8);
    x.cmp(&y).then_with(|| a.cmp(b))
}

/// An unsigned key whose order is Java's `Float.compare` order; every NaN maps
/// to `u32::MAX`, which no other float produces.
pub(crate) fn f32_key(bits: u32) -> u32 {
    if f32::from_bits(bits).is_nan() {
        u32::MAX
    } else if bits & 0x8000_0000 != 0 {
        !bits
    } else {
        bits ^ 0x8000_0000
    }
}

/// As `f32_key`, for `Double.compare`.
pub(crate) fn f64_key(bits: u64) -> u64 {
    if f64::from_bits(bits).is_nan() {
        u64::MAX
    } else if bits & 0x8000_0000_0000_0000 != 0 {
        !bits
    } else {
        bits ^ 0x8000_0000_0000_0000
    }
}

pub(crate) fn uuid_version(b: &[u8; 16]) -> u8 {
    b[6] >> 4
}

fn halves(b: &[u8; 16]) -> (u64, u64) {
    let v = u128::from_be_bytes(*b);
    ((v >> 64) as u64, v as u64)
}

/// Moves a version-1 UUID's time fields into significance order
/// (time_hi+version, time_mid, time_low), as `TimeUUIDType.reorderTimestampBytes`.
pub(crate) fn reorder_timestamp(msb: u64) -> u64 {
    (msb << 48) | ((msb << 16) & 0xFFFF_0000_0000) | (msb >> 32)
}

/// Inverse of `reorder_timestamp`.
pub(crate) fn reorder_back_timestamp(x: u64) -> u64 {
    (x << 32) | ((x >> 16) & 0xFFFF_0000) | (x >> 48)
}

/// `UUIDType` order on two 16-byte UUIDs.
pub(crate) fn uuid_cmp(a: &[u8; 16], b: &[u8; 16]) -> Ordering {
    let (ma, la) = halves(a);
    let (mb, lb) = halves(b);
    let (va, vb) = ((ma >> 12) & 0xf, (mb >> 12) & 0xf);
    if va != vb {
        return va.cmp(&vb);
    }
    let c = if va == 1 { (reorder_timestamp(ma) as i64).cmp(&(reorder_timestamp(mb) as i64)) } else { ma.cmp(&mb) };
    c.then_with(|| la.cmp(&lb))
}

/// `TimeUUIDType` order on two version-1 UUIDs: timestamp, then the lsb as signed bytes.
pub(crate) fn timeuuid_cmp(a: &[u8; 16], b: &[u8; 16]) -> Ordering {
    let (ma, la) = halves(a);
    let (mb, lb) = halves(b);
    (reorder_timestamp(ma) as i64)
        .cmp(&(reorder_timestamp(mb) as i64))
        .then_with(|| ((la ^ 0x0080_8080_8080_8080) as i64).cmp(&((lb ^ 0x0080_8080_8080_8080) as i64)))
}

/// A decimal in normalized scientific form: `sign * 0.d1d2d3... * 10^exp`,
/// with `d1 != 0` and no trailing zero digits (zero has sign 0 and no digits).
/// Its derived order on (sign, exp, digits) is wrong for negatives, so use `cmp`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DecimalKey {
    pub sign: i8,
    pub exp: i64,
    pub digits: Vec<u8>,
}

impl DecimalKey {
    pub(crate) fn new(unscaled: &BigInt, scale: i32) -> DecimalKey {
        let sign = match unscaled.sign() {
            Sign::NoSign => return DecimalKey { sign: 0, exp: 0, digits: Vec::new() },
            Sign::Minus => -1,
            Sign::Plus => 1,
        };
        let mut digits = unscaled.magnitude().to_radix_be(10);
        let n = digits.len() as i64;
        while digits.last() == Some(&0) {
            digits.pop();
        }
        DecimalKey { sign, exp: n - i64::from(scale), digits }
    }

    pub(crate) fn cmp(&self, other: &DecimalKey) -> Ordering {
        let c = self.sign.cmp(&other.sign);
        if c != Ordering::Equal || self.sign == 0 {
            return c;
        }
        let mag = self.exp.cmp(&other.exp).then_with(|| self.digits.cmp(&other.digits));
        if self.sign < 0 {
            mag.reverse()
        } else {
            mag
        }
    }
}

/// Splits serialized decimal bytes into (scale, unscaled). Cassandra cannot
/// read a decimal without unscaled bytes; it is treated as zero here.
pub(crate) fn decimal_parts(bytes: &[u8]) -> Option<(i32, BigInt)> {
    let scale = be_i32(bytes.get(..4)?)?;
    let rest = bytes.get(4..)?;
    Some((scale, BigInt::from_signed_bytes_be(rest)))
}

fn decimal_key_of_bytes(bytes: &[u8]) -> Option<DecimalKey> {
    let (scale, unscaled) = decimal_parts(bytes)?;
    Some(DecimalKey::new(&unscaled, scale))
}

/// Compares two values with the comparator of their type (the order of
/// `compare_serialized` on their serialized forms). Values of different
/// types are ordered by variant (`ascii` and `text` compare as text).
pub fn compare_values(a: &Value, b: &Value) -> Ordering {
    use Value as V;
    match (a, b) {
        (V::Ascii(x) | V::Text(x), V::Ascii(y) | V::Text(y)) => x.as_bytes().cmp(y.as_bytes()),
        (V::Blob(x), V::Blob(y)) => x.cmp(y),
        (V::Boolean(x), V::Boolean(y)) => x.cmp(y),
        (V::TinyInt(x), V::TinyInt(y)) => x.cmp(y),
        (V::SmallInt(x), V::SmallInt(y)) => x.cmp(y),
        (V::Int(x), V::Int(y)) => x.cmp(y),
        (V::BigInt(x), V::BigInt(y)) | (V::Counter(x), V::Counter(y)) | (V::Timestamp(x), V::Timestamp(y)) => x.cmp(y),
        (V::Time(x), V::Time(y)) => (*x as u64).cmp(&(*y as u64)),
        (V::Date(x), V::Date(y)) => x.cmp(y),
        (V::Varint(x), V::Varint(y)) => x.cmp(y),
        (V::Float(x), V::Float(y)) => f32_key(x.to_bits()).cmp(&f32_key(y.to_bits())),
        (V::Double(x), V::Double(y)) => f64_key(x.to_bits()).cmp(&f64_key(y.to_bits())),
        (V::Decimal { unscaled: ux, scale: sx }, V::Decimal { unscaled: uy, scale: sy }) => {
            DecimalKey::new(ux, *sx).cmp(&DecimalKey::new(uy, *sy))
        }
        (V::Uuid(x), V::Uuid(y)) => uuid_cmp(x.as_bytes(), y.as_bytes()),
        (V::TimeUuid(x), V::TimeUuid(y)) => {
            if uuid_version(x.as_bytes()) == 1 && uuid_version(y.as_bytes()) == 1 {
                timeuuid_cmp(x.as_bytes(), y.as_bytes())
            } else {
                x.as_bytes().cmp(y.as_bytes())
            }
        }
        (V::Duration { .. }, V::Duration { .. }) => a.to_bytes().cmp(&b.to_bytes()),
        (V::Inet(x), V::Inet(y)) => inet_octets(x).cmp(&inet_octets(y)),
        (V::List(x), V::List(y)) => compare_seq(x, y),
        (V::Set(x), V::Set(y)) => {
            let xs = crate::codec::sorted_set(x.iter());
            let ys = crate::codec::sorted_set(y.iter());
            for (ea, eb) in xs.iter().zip(ys.iter()) {
                let c = compare_values(ea, eb);
                if c != Ordering::Equal {
                    return c;
                }
            }
            xs.len().cmp(&ys.len())
        }
        (V::Map(x), V::Map(y)) => {
            let xs = crate::codec::sorted_map(x.iter().map(|(k, v)| (k, v)));
            let ys = crate::codec::sorted_map(y.iter().map(|(k, v)| (k, v)));
            for ((ka, va), (kb, vb)) in xs.iter().zip(ys.iter()) {
                let c = compare_values(ka, kb).then_with(|| compare_values(va, vb));
                if c != Ordering::Equal {
                    return c;
                }
            }
            xs.len().cmp(&ys.len())
        }
        (V::Tuple(x), V::Tuple(y)) | (V::Udt(x), V::Udt(y)) => {
            let x = strip_trailing_nulls(x.iter().map(Option::as_ref).collect());
            let y = strip_trailing_nulls(y.iter().map(Option::as_ref).collect());
            for (fa, fb) in x.iter().zip(y.iter()) {
                let c = match (fa, fb) {
                    (None, None) => Ordering::Equal,
                    (None, Some(_)) => Ordering::Less,
                    (Some(_), None) => Ordering::Greater,
                    (Some(p), Some(q)) => compare_values(p, q),
                };
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        _ => variant_rank(a).cmp(&variant_rank(b)),
    }
}

fn compare_seq(x: &[Value], y: &[Value]) -> Ordering {
    for (a, b) in x.iter().zip(y.iter()) {
        let c = compare_values(a, b);
        if c != Ordering::Equal {
            return c;
        }
    }
    x.len().cmp(&y.len())
}

fn inet_octets(a: &IpAddr) -> Vec<u8> {
    match a {
        IpAddr::V4(v) => v.octets().to_vec(),
        IpAddr::V6(v) => v.octets().to_vec(),
    }
}

fn variant_rank(v: &Value) -> u8 {
    match v {
        Value::Ascii(_) | Value::Text(_) => 0,
        Value::Blob(_) => 2,
        Value::Boolean(_) => 3,
        Value::TinyInt(_) => 4,
        Value::SmallInt(_) => 5,
        Value::Int(_) => 6,
        Value::BigInt(_) => 7,
        Value::Counter(_) => 8,
        Value::Varint(_) => 9,
        Value::Float(_) => 10,
        Value::Double(_) => 11,
        Value::Decimal { .. } => 12,
        Value::Uuid(_) => 13,
        Value::TimeUuid(_) => 14,
        Value::Timestamp(_) => 15,
        Value::Date(_) => 16,
        Value::Time(_) => 17,
        Value::Duration { .. } => 18,
        Value::Inet(_) => 19,
        Value::List(_) => 20,
        Value::Set(_) => 21,
        Value::Map(_) => 22,
        Value::Tuple(_) => 23,
        Value::Udt(_) => 24,
    }
}
