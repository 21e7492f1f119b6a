//! Native-protocol (v4) value serialization: `Value` <-> bytes, and
//! validation of bound bytes against a `CqlType` without building a `Value`.
//!
//! The byte forms are Cassandra's (`TypeSerializer` subclasses):
//! fixed-width big-endian integers, IEEE floats, `[int scale][varint]`
//! decimals, two's-complement varints, 16-byte UUIDs, 4/16-byte inets,
//! `u32` dates with the epoch at 2^31, `i64` nanosecond times, durations as
//! three zig-zag vints (Cassandra's `VIntCoding`, not protobuf varints),
//! collections as `[int count]` then `[int length][bytes]` per element
//! (protocol v3+ layout), tuples/UDTs as `[int length][bytes]` per field with
//! -1 for null.
//!
//! Invariants:
//! - `validate` accepts exactly what Cassandra's serializers accept for a
//!   bound value, with Cassandra's error messages, except where noted on the
//!   function (it is slightly stricter for `text`, `time`, null collection
//!   elements and negative collection counts).
//! - `Value::serialize` writes sets sorted by the element comparator and
//!   deduplicated, maps sorted by key with unique keys, so the output is the
//!   canonical form Cassandra stores; `Value::deserialize` produces the same
//!   canonical order, so `deserialize(serialize(v))` is the canonical `v`.
//! - Nothing here panics on any input bytes.

use std::cmp::Ordering;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use num_bigint::BigInt;
use uuid::Uuid;

use crate::bytes::ByteReader;
use crate::compare::compare_values;
use crate::literal::NANOS_PER_DAY;
use crate::value::{Value, ValueError};
use crate::CqlType;

// ---------------------------------------------------------------------------
// Byte-level helpers shared by codec, compare and order.

/// A bounds-checked reader over a byte slice (the crate's `ByteReader`, read
/// with `Option`s).
#[derive(Clone)]
pub(crate) struct Cursor<'a>(ByteReader<'a, ()>);

impl<'a> Cursor<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Cursor(ByteReader::new(buf, ()))
    }

    pub(crate) fn remaining(&self) -> usize {
        self.0.remaining()
    }

    pub(crate) fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        self.0.take(n).ok()
    }

    pub(crate) fn read_i32(&mut self) -> Option<i32> {
        self.0.i32().ok()
    }

    /// Reads an `[int length][bytes]` element; `Some(None)` for length -1
    /// (null). Other negative lengths are treated as malformed (Cassandra reads
    /// them as null too, but they could not be written back identically).
    pub(crate) fn read_value(&mut self) -> Option<Option<&'a [u8]>> {
        let len = self.read_i32()?;
        if len == -1 {
            return Some(None);
        }
        if len < 0 {
            return None;
        }
        self.take(len as usize).map(Some)
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

pub(crate) fn be_i64(bytes: &[u8]) -> Option<i64> {
    Some(i64::from_be_bytes(bytes.try_into().ok()?))
}

pub(crate) fn be_i32(bytes: &[u8]) -> Option<i32> {
    Some(i32::from_be_bytes(bytes.try_into().ok()?))
}

/// The elements of a serialized list or set; `None` if the bytes are not
/// `[int count]` followed by exactly `count` elements.
pub(crate) fn split_collection(bytes: &[u8]) -> Option<Vec<Option<&[u8]>>> {
    let mut c = Cursor::new(bytes);
    let n = c.read_i32()?;
    if n < 0 {
        return None;
    }
    let mut out = Vec::with_capacity((n as usize).min(256));
    for _ in 0..n {
        out.push(c.read_value()?);
    }
    if c.remaining() != 0 {
        return None;
    }
    Some(out)
}

/// The entries of a serialized map; `None` if malformed.
#[allow(clippy::type_complexity)]
pub(crate) fn split_map(bytes: &[u8]) -> Option<Vec<(Option<&[u8]>, Option<&[u8]>)>> {
    let mut c = Cursor::new(bytes);
    let n = c.read_i32()?;
    if n < 0 {
        return None;
    }
    let mut out = Vec::with_capacity((n as usize).min(256));
    for _ in 0..n {
        let k = c.read_value()?;
        let v = c.read_value()?;
        out.push((k, v));
    }
    if c.remaining() != 0 {
        return None;
    }
    Some(out)
}

/// One tuple/UDT field: `Ok(None)` is null, `Err(len)` a length below -1.
pub(crate) type Field<'a> = Result<Option<&'a [u8]>, i32>;

/// The fields of a serialized tuple/UDT (as many as are present); `None` if a
/// length is truncated. Lengths below -1 are reported as `Err(len)` entries so
/// callers that need exact round trips can reject them.
pub(crate) fn split_fields(bytes: &[u8]) -> Option<Vec<Field<'_>>> {
    let mut c = Cursor::new(bytes);
    let mut out = Vec::new();
    while c.remaining() > 0 {
        let len = c.read_i32()?;
        if len < -1 {
            out.push(Err(len));
        } else if len < 0 {
            out.push(Ok(None));
        } else {
            out.push(Ok(Some(c.take(len as usize)?)));
        }
    }
    Some(out)
}

pub(crate) fn write_len_prefixed(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        Some(b) => {
            let len = i32::try_from(b.len()).unwrap_or(i32::MAX);
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(b);
        }
    }
}

/// Packs elements as a v3+ collection: `[int count]` then each element.
pub(crate) fn pack_collection<'a>(items: impl ExactSizeIterator<Item = Option<&'a [u8]>>) -> Vec<u8> {
    let mut out = Vec::new();
    let n = i32::try_from(items.len()).unwrap_or(i32::MAX);
    out.extend_from_slice(&n.to_be_bytes());
    for it in items {
        write_len_prefixed(&mut out, it);
    }
    out
}

// ---------------------------------------------------------------------------
// Cassandra's VIntCoding (used by durations).

/// Writes `v` zig-zag encoded as a Cassandra unsigned vint.
pub(crate) fn write_vint(v: i64, out: &mut Vec<u8>) {
    let u = ((v << 1) ^ (v >> 63)) as u64;
    write_unsigned_vint(u, out);
}

pub(crate) fn write_unsigned_vint(u: u64, out: &mut Vec<u8>) {
    // Java: 9 - ((numberOfLeadingZeros(u | 1) - 1) / 7), with truncating division.
    let magnitude = (u | 1).leading_zeros() as i32;
    let size = (9 - (magnitude - 1) / 7) as usize;
    let extra = size - 1;
    // `size` is 1..=9: the encoding is the last `size` bytes of `u` written big-endian in 9 bytes, the
    // first of them carrying `extra` high 1-bits.
    let mut buf = [0u8; 9];
    buf[1..].copy_from_slice(&u.to_be_bytes());
    let encoded = buf.get_mut(9 - size..).expect("a vint is 1 to 9 bytes");
    if let Some(first) = encoded.first_mut() {
        *first |= !(0xffu8.checked_shr(extra as u32).unwrap_or(0));
    }
    out.extend_from_slice(encoded);
}

/// Reads a zig-zag vint; `None` if the input ends early.
pub(crate) fn read_vint(c: &mut Cursor<'_>) -> Option<i64> {
    let first = *c.take(1)?.first()?;
    let extra = first.leading_ones() as usize;
    let mut u: u64 = if extra >= 8 { 0 } else { u64::from(first & (0xffu8 >> extra)) };
    for &b in c.take(extra)? {
        u = (u << 8) | u64::from(b);
    }
    Some(((u >> 1) as i64) ^ -((u & 1) as i64))
}

// ---------------------------------------------------------------------------
// Validation.

/// True if Cassandra accepts a zero-length byte string as a value of `ty`.
pub fn allows_empty(ty: &CqlType) -> bool {
    !matches!(
        ty,
        CqlType::TinyInt | CqlType::SmallInt | CqlType::Date | CqlType::Time | CqlType::Duration | CqlType::List { .. }
    )
}

/// True if a zero-length value of `ty` has a `Value` form (the empty string or blob).
pub fn empty_has_value(ty: &CqlType) -> bool {
    matches!(ty, CqlType::Ascii | CqlType::Text | CqlType::Blob)
}

/// Checks that `bytes` is a valid serialized value of `ty`, as Cassandra's
/// `TypeSerializer.validate` does for bound values (collections recursively).
///
/// Deviations from Cassandra (all stricter): `text` must be standard UTF-8
/// (Cassandra also lets through modified-UTF-8 NUL and surrogates); `time`
/// must lie in `0..86400e9`; collections may not contain null elements
/// ("null is not supported inside collections"), element lengths below -1
/// or a negative element count.
pub fn validate(ty: &CqlType, bytes: &[u8]) -> Result<(), ValueError> {
    let n = bytes.len();
    let m = ValueError::marshal;
    match ty {
        CqlType::Ascii => {
            if let Some(b) = bytes.iter().find(|b| **b > 127) {
                return Err(m(format!("Invalid byte for ascii: {}", *b as i8)));
            }
        }
        CqlType::Text => {
            if std::str::from_utf8(bytes).is_err() {
                return Err(ValueError::marshal("String didn't validate."));
            }
        }
        CqlType::Blob | CqlType::Varint => {}
        CqlType::Boolean => {
            if n != 1 && n != 0 {
                return Err(m(format!("Expected 1 or 0 byte value ({n})")));
            }
        }
        CqlType::TinyInt => {
            if n != 1 {
                return Err(m(format!("Expected 1 byte for a tinyint ({n})")));
            }
        }
        CqlType::SmallInt => {
            if n != 2 {
                return Err(m(format!("Expected 2 bytes for a smallint ({n})")));
            }
        }
        CqlType::Int => {
            if n != 4 && n != 0 {
                return Err(m(format!("Expected 4 or 0 byte int ({n})")));
            }
        }
        CqlType::BigInt | CqlType::Counter => {
            if n != 8 && n != 0 {
                return Err(m(format!("Expected 8 or 0 byte long ({n})")));
            }
        }
        CqlType::Float => {
            if n != 4 && n != 0 {
                return Err(m(format!("Expected 4 or 0 byte value for a float ({n})")));
            }
        }
        CqlType::Double => {
            if n != 8 && n != 0 {
                return Err(m(format!("Expected 8 or 0 byte value for a double ({n})")));
            }
        }
        CqlType::Decimal => {
            if n != 0 && n < 4 {
                return Err(m(format!("Expected 0 or at least 4 bytes ({n})")));
            }
        }
        CqlType::Uuid => {
            if n != 16 && n != 0 {
                return Err(m(format!("UUID should be 16 or 0 bytes ({n})")));
            }
        }
        CqlType::TimeUuid => {
            if n != 16 && n != 0 {
                return Err(m(format!("UUID should be 16 or 0 bytes ({n})")));
            }
            if n == 16 && bytes.get(6).map(|b| b & 0xf0) != Some(0x10) {
                return Err(ValueError::marshal("Invalid version for TimeUUID type."));
            }
        }
        CqlType::Timestamp => {
            if n != 8 && n != 0 {
                return Err(m(format!("Expected 8 or 0 byte long for date ({n})")));
            }
        }
        CqlType::Date => {
            if n != 4 {
                return Err(m(format!("Expected 4 byte long for date ({n})")));
            }
        }
        CqlType::Time => {
            let Some(v) = be_i64(bytes) else {
                return Err(m(format!("Expected 8 byte long for time ({n})")));
            };
            if !(0..NANOS_PER_DAY).contains(&v) {
                return Err(m(format!(
                    "Invalid time value {v}: must be between 0 and {} nanoseconds",
                    NANOS_PER_DAY - 1
                )));
            }
        }
        CqlType::Duration => {
            decode_duration(bytes)?;
        }
        CqlType::Inet => {
            if n != 0 && n != 4 && n != 16 {
                return Err(m(format!("Expected 4 or 16 byte inetaddress; got {}", hex(bytes))));
            }
        }
        CqlType::List { elem, .. } => validate_list_or_set(elem, bytes, "list")?,
        CqlType::Set { elem, .. } => {
            if n != 0 {
                validate_list_or_set(elem, bytes, "set")?;
            }
        }
        CqlType::Map { key, value, .. } => {
            if n != 0 {
                validate_map(key, value, bytes)?;
            }
        }
        CqlType::Tuple(types) => validate_fields(bytes, types.iter().map(|t| (None, t)), "tuple")?,
        CqlType::Udt { fields, .. } => {
            validate_fields(bytes, fields.iter().map(|(name, t)| (Some(name.as_str()), t)), "UDT")?
        }
    }
    Ok(())
}

fn validate_list_or_set(elem: &CqlType, bytes: &[u8], kind: &str) -> Result<(), ValueError> {
    let not_enough = || ValueError::marshal(format!("Not enough bytes to read a {kind}"));
    let mut c = Cursor::new(bytes);
    let count = c.read_i32().ok_or_else(not_enough)?;
    if count < 0 {
        return Err(ValueError::marshal(format!("The data cannot be deserialized as a {kind}")));
    }
    for _ in 0..count {
        match c.read_value().ok_or_else(not_enough)? {
            None => return Err(ValueError::marshal("null is not supported inside collections")),
            Some(e) => validate(elem, e)?,
        }
    }
    if c.remaining() > 0 {
        return Err(ValueError::marshal(format!("Unexpected extraneous bytes after {kind} value")));
    }
    Ok(())
}

fn validate_map(key: &CqlType, value: &CqlType, bytes: &[u8]) -> Result<(), ValueError> {
    let not_enough = || ValueError::marshal("Not enough bytes to read a map");
    let mut c = Cursor::new(bytes);
    let count = c.read_i32().ok_or_else(not_enough)?;
    if count < 0 {
        return Err(ValueError::marshal("The data cannot be deserialized as a map"));
    }
    for _ in 0..count {
        for ty in [key, value] {
            match c.read_value().ok_or_else(not_enough)? {
                None => return Err(ValueError::marshal("null is not supported inside collections")),
                Some(e) => validate(ty, e)?,
            }
        }
    }
    if c.remaining() > 0 {
        return Err(ValueError::marshal("Unexpected extraneous bytes after map value"));
    }
    Ok(())
}

fn validate_fields<'a>(
    bytes: &[u8],
    fields: impl Iterator<Item = (Option<&'a str>, &'a CqlType)>,
    kind: &str,
) -> Result<(), ValueError> {
    let mut c = Cursor::new(bytes);
    // Cassandra's UDT messages count only non-null fields; tuples count every field.
    let mut udt_index = 0usize;
    for (i, (name, ty)) in fields.enumerate() {
        if c.remaining() == 0 {
            return Ok(());
        }
        let label = match name {
            Some(name) => format!("{udt_index}th field {name}"),
            None => format!("{i}th component"),
        };
        let Some(size) = c.read_i32() else {
            return Err(ValueError::marshal(format!("Not enough bytes to read size of {label}")));
        };
        if size < 0 {
            continue;
        }
        let Some(field) = c.take(size as usize) else {
            return Err(ValueError::marshal(format!("Not enough bytes to read {label}")));
        };
        validate(ty, field)?;
        udt_index += 1;
    }
    if c.remaining() != 0 {
        return Err(ValueError::marshal(format!("Invalid remaining data after end of {kind} value")));
    }
    Ok(())
}

/// Decodes and checks a serialized duration (as `DurationSerializer.validate`).
pub(crate) fn decode_duration(bytes: &[u8]) -> Result<(i32, i32, i64), ValueError> {
    if bytes.len() < 3 {
        return Err(ValueError::marshal(format!("Expected at least 3 bytes for a duration ({})", bytes.len())));
    }
    let mut c = Cursor::new(bytes);
    let short = || ValueError::marshal("Not enough bytes to read a duration");
    let months = read_vint(&mut c).ok_or_else(short)?;
    let days = read_vint(&mut c).ok_or_else(short)?;
    let nanos = read_vint(&mut c).ok_or_else(short)?;
    let Ok(months) = i32::try_from(months) else {
        return Err(ValueError::marshal(format!("The duration months must be a 32 bits integer but was: {months}")));
    };
    let Ok(days) = i32::try_from(days) else {
        return Err(ValueError::marshal(format!("The duration days must be a 32 bits integer but was: {days}")));
    };
    if !((months >= 0 && days >= 0 && nanos >= 0) || (months <= 0 && days <= 0 && nanos <= 0)) {
        return Err(ValueError::marshal(format!(
            "The duration months, days and nanoseconds must be all of the same sign ({months}, {days}, {nanos})"
        )));
    }
    Ok((months, days, nanos))
}

// ---------------------------------------------------------------------------
// Value <-> bytes.

impl Value {
    /// Appends the value's native-protocol bytes (without the `[bytes]`
    /// length prefix). Sets are written sorted and deduplicated, maps sorted
    /// by key with the last value of a repeated key kept.
    pub fn serialize(&self, out: &mut Vec<u8>) {
        match self {
            Value::Ascii(s) | Value::Text(s) => out.extend_from_slice(s.as_bytes()),
            Value::Blob(b) => out.extend_from_slice(b),
            Value::Boolean(b) => out.push(u8::from(*b)),
            Value::TinyInt(v) => out.extend_from_slice(&v.to_be_bytes()),
            Value::SmallInt(v) => out.extend_from_slice(&v.to_be_bytes()),
            Value::Int(v) => out.extend_from_slice(&v.to_be_bytes()),
            Value::BigInt(v) | Value::Counter(v) | Value::Timestamp(v) | Value::Time(v) => {
                out.extend_from_slice(&v.to_be_bytes())
            }
            Value::Varint(v) => out.extend_from_slice(&v.to_signed_bytes_be()),
            Value::Float(v) => out.extend_from_slice(&v.to_bits().to_be_bytes()),
            Value::Double(v) => out.extend_from_slice(&v.to_bits().to_be_bytes()),
            Value::Decimal { unscaled, scale } => {
                out.extend_from_slice(&scale.to_be_bytes());
                out.extend_from_slice(&unscaled.to_signed_bytes_be());
            }
            Value::Uuid(u) | Value::TimeUuid(u) => out.extend_from_slice(u.as_bytes()),
            Value::Date(d) => out.extend_from_slice(&d.to_be_bytes()),
            Value::Duration { months, days, nanos } => {
                write_vint(i64::from(*months), out);
                write_vint(i64::from(*days), out);
                write_vint(*nanos, out);
            }
            Value::Inet(IpAddr::V4(a)) => out.extend_from_slice(&a.octets()),
            Value::Inet(IpAddr::V6(a)) => out.extend_from_slice(&a.octets()),
            Value::List(items) => {
                let ser: Vec<Vec<u8>> = items.iter().map(Value::to_bytes).collect();
                out.extend_from_slice(&pack_collection(ser.iter().map(|b| Some(b.as_slice()))));
            }
            Value::Set(items) => {
                let sorted = sorted_set(items.iter());
                let ser: Vec<Vec<u8>> = sorted.iter().map(|v| v.to_bytes()).collect();
                out.extend_from_slice(&pack_collection(ser.iter().map(|b| Some(b.as_slice()))));
            }
            Value::Map(entries) => {
                let sorted = sorted_map(entries.iter().map(|(k, v)| (k, v)));
                let n = i32::try_from(sorted.len()).unwrap_or(i32::MAX);
                out.extend_from_slice(&n.to_be_bytes());
                for (k, v) in sorted {
                    write_len_prefixed(out, Some(&k.to_bytes()));
                    write_len_prefixed(out, Some(&v.to_bytes()));
                }
            }
            Value::Tuple(fields) | Value::Udt(fields) => {
                for f in fields {
                    match f {
                        None => write_len_prefixed(out, None),
                        Some(v) => write_len_prefixed(out, Some(&v.to_bytes())),
                    }
                }
            }
        }
    }

    /// The value's native-protocol bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.serialize(&mut out);
        out
    }

    /// Parses a serialized value of type `ty` (validating it first, as
    /// `validate` does).
    ///
    /// A zero-length input yields `ValueError::Empty` unless the type's empty
    /// value has a `Value` form (`ascii`, `text`, `blob`); inside tuples and
    /// UDTs such an empty field becomes `None`, inside lists/sets/maps it is an
    /// error. Tuples/UDTs with fewer fields than declared are padded with
    /// `None`. Sets and maps come out in canonical (sorted, deduplicated) order.
    pub fn deserialize(ty: &CqlType, bytes: &[u8]) -> Result<Value, ValueError> {
        validate(ty, bytes)?;
        build(ty, bytes)
    }
}

/// The elements sorted by Cassandra's comparator, duplicates dropped (first kept).
pub(crate) fn sorted_set<'a>(items: impl Iterator<Item = &'a Value>) -> Vec<&'a Value> {
    let mut v: Vec<&Value> = items.collect();
    v.sort_by(|a, b| compare_values(a, b));
    v.dedup_by(|b, a| compare_values(a, b) == Ordering::Equal);
    v
}

/// The entries sorted by key; for repeated keys the first key and last value are kept.
pub(crate) fn sorted_map<'a>(entries: impl Iterator<Item = (&'a Value, &'a Value)>) -> Vec<(&'a Value, &'a Value)> {
    let mut v: Vec<(&Value, &Value)> = entries.collect();
    v.sort_by(|a, b| compare_values(a.0, b.0));
    let mut out: Vec<(&Value, &Value)> = Vec::with_capacity(v.len());
    for (k, val) in v {
        match out.last_mut() {
            Some(last) if compare_values(last.0, k) == Ordering::Equal => last.1 = val,
            _ => out.push((k, val)),
        }
    }
    out
}

fn fixed<const N: usize>(bytes: &[u8], ty: &CqlType) -> Result<[u8; N], ValueError> {
    if bytes.is_empty() {
        return Err(ValueError::Empty(ty.to_cql()));
    }
    bytes
        .try_into()
        .map_err(|_| ValueError::marshal(format!("Expected {N} bytes for a {} value ({})", ty.to_cql(), bytes.len())))
}

/// Builds a `Value` from bytes already checked by `validate` (still fully bounds-checked).
fn build(ty: &CqlType, bytes: &[u8]) -> Result<Value, ValueError> {
    if bytes.is_empty() && !empty_has_value(ty) {
        return Err(ValueError::Empty(ty.to_cql()));
    }
    Ok(match ty {
        CqlType::Ascii => Value::Ascii(
            String::from_utf8(bytes.to_vec())
                .map_err(|_| ValueError::marshal(format!("Invalid US-ASCII bytes {}", hex(bytes))))?,
        ),
        CqlType::Text => Value::Text(
            String::from_utf8(bytes.to_vec())
                .map_err(|_| ValueError::marshal(format!("Invalid UTF-8 bytes {}", hex(bytes))))?,
        ),
        CqlType::Blob => Value::Blob(bytes.to_vec()),
        CqlType::Boolean => Value::Boolean(fixed::<1>(bytes, ty)?[0] != 0),
        CqlType::TinyInt => Value::TinyInt(i8::from_be_bytes(fixed(bytes, ty)?)),
        CqlType::SmallInt => Value::SmallInt(i16::from_be_bytes(fixed(bytes, ty)?)),
        CqlType::Int => Value::Int(i32::from_be_bytes(fixed(bytes, ty)?)),
        CqlType::BigInt => Value::BigInt(i64::from_be_bytes(fixed(bytes, ty)?)),
        CqlType::Counter => Value::Counter(i64::from_be_bytes(fixed(bytes, ty)?)),
        CqlType::Timestamp => Value::Timestamp(i64::from_be_bytes(fixed(bytes, ty)?)),
        CqlType::Time => Value::Time(i64::from_be_bytes(fixed(bytes, ty)?)),
        CqlType::Date => Value::Date(u32::from_be_bytes(fixed(bytes, ty)?)),
        CqlType::Varint => Value::Varint(BigInt::from_signed_bytes_be(bytes)),
        CqlType::Float => Value::Float(f32::from_bits(u32::from_be_bytes(fixed(bytes, ty)?))),
        CqlType::Double => Value::Double(f64::from_bits(u64::from_be_bytes(fixed(bytes, ty)?))),
        CqlType::Decimal => {
            let scale = bytes
                .get(..4)
                .and_then(be_i32)
                .ok_or_else(|| ValueError::marshal(format!("Expected 0 or at least 4 bytes ({})", bytes.len())))?;
            let rest = bytes.get(4..).unwrap_or_default();
            if rest.is_empty() {
                return Err(ValueError::marshal("Zero length BigInteger"));
            }
            Value::Decimal { unscaled: BigInt::from_signed_bytes_be(rest), scale }
        }
        CqlType::Uuid => Value::Uuid(Uuid::from_bytes(fixed(bytes, ty)?)),
        CqlType::TimeUuid => Value::TimeUuid(Uuid::from_bytes(fixed(bytes, ty)?)),
        CqlType::Duration => {
            let (months, days, nanos) = decode_duration(bytes)?;
            Value::Duration { months, days, nanos }
        }
        CqlType::Inet => match bytes.len() {
            4 => Value::Inet(IpAddr::V4(Ipv4Addr::from(fixed::<4>(bytes, ty)?))),
            16 => Value::Inet(IpAddr::V6(Ipv6Addr::from(fixed::<16>(bytes, ty)?))),
            _ => return Err(ValueError::marshal(format!("Expected 4 or 16 byte inetaddress; got {}", hex(bytes)))),
        },
        CqlType::List { elem, .. } | CqlType::Set { elem, .. } => {
            let kind = if matches!(ty, CqlType::List { .. }) { "list" } else { "set" };
            let parts = split_collection(bytes)
                .ok_or_else(|| ValueError::marshal(format!("Not enough bytes to read a {kind}")))?;
            let mut items = Vec::with_capacity(parts.len());
            for p in parts {
                let p = p.ok_or_else(|| ValueError::marshal("null is not supported inside collections"))?;
                items.push(build(elem, p)?);
            }
            if kind == "list" {
                Value::List(items)
            } else {
                Value::Set(sorted_set(items.iter()).into_iter().cloned().collect())
            }
        }
        CqlType::Map { key, value, .. } => {
            let parts = split_map(bytes).ok_or_else(|| ValueError::marshal("Not enough bytes to read a map"))?;
            let mut entries = Vec::with_capacity(parts.len());
            for (k, v) in parts {
                let (Some(k), Some(v)) = (k, v) else {
                    return Err(ValueError::marshal("null is not supported inside collections"));
                };
                entries.push((build(key, k)?, build(value, v)?));
            }
            let sorted: Vec<(Value, Value)> = sorted_map(entries.iter().map(|(k, v)| (k, v)))
                .into_iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            Value::Map(sorted)
        }
        CqlType::Tuple(types) => Value::Tuple(build_fields(bytes, types.iter())?),
        CqlType::Udt { fields, .. } => Value::Udt(build_fields(bytes, fields.iter().map(|(_, t)| t))?),
    })
}

fn build_fields<'a>(
    bytes: &[u8],
    types: impl ExactSizeIterator<Item = &'a CqlType>,
) -> Result<Vec<Option<Value>>, ValueError> {
    let declared = types.len();
    let parts = split_fields(bytes).ok_or_else(|| ValueError::marshal("Not enough bytes to read a tuple or UDT"))?;
    if parts.len() > declared {
        return Err(ValueError::marshal("Invalid remaining data after end of tuple value"));
    }
    let mut out = Vec::with_capacity(declared);
    let mut parts = parts.into_iter();
    for ty in types {
        let v = match parts.next() {
            None | Some(Ok(None)) | Some(Err(_)) => None,
            Some(Ok(Some(b))) if b.is_empty() && !empty_has_value(ty) => None,
            Some(Ok(Some(b))) => Some(build(ty, b)?),
        };
        out.push(v);
    }
    Ok(out)
}

/// Re-serializes a value of type `ty` in canonical form: frozen (and
/// non-frozen) sets sorted by their element comparator and deduplicated,
/// maps sorted by key with unique keys (last value wins), recursively through
/// lists, tuples and UDTs. This is what Cassandra does to a bound collection
/// before storing it. Other bytes are returned unchanged. The input must pass
/// `validate`.
pub fn normalize(ty: &CqlType, bytes: &[u8]) -> Result<Vec<u8>, ValueError> {
    validate(ty, bytes)?;
    Ok(normalize_valid(ty, bytes))
}

fn normalize_valid(ty: &CqlType, bytes: &[u8]) -> Vec<u8> {
    use crate::compare::compare_serialized;
    if bytes.is_empty() {
        return Vec::new();
    }
    match ty {
        CqlType::List { elem, .. } => match split_collection(bytes) {
            Some(parts) => {
                let norm: Vec<Option<Vec<u8>>> = parts.iter().map(|p| p.map(|b| normalize_valid(elem, b))).collect();
                pack_collection(norm.iter().map(|p| p.as_deref()))
            }
            None => bytes.to_vec(),
        },
        CqlType::Set { elem, .. } => match split_collection(bytes) {
            Some(parts) => {
                let mut norm: Vec<Vec<u8>> = parts.iter().flatten().map(|b| normalize_valid(elem, b)).collect();
                norm.sort_by(|a, b| compare_serialized(elem, a, b));
                norm.dedup_by(|b, a| compare_serialized(elem, a, b) == Ordering::Equal);
                pack_collection(norm.iter().map(|b| Some(b.as_slice())))
            }
            None => bytes.to_vec(),
        },
        CqlType::Map { key, value, .. } => match split_map(bytes) {
            Some(parts) => {
                let mut entries: Vec<(Vec<u8>, Vec<u8>)> = parts
                    .iter()
                    .filter_map(|(k, v)| Some((normalize_valid(key, (*k)?), normalize_valid(value, (*v)?))))
                    .collect();
                entries.sort_by(|a, b| compare_serialized(key, &a.0, &b.0));
                let mut out: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(entries.len());
                for (k, v) in entries {
                    match out.last_mut() {
                        Some(last) if compare_serialized(key, &last.0, &k) == Ordering::Equal => last.1 = v,
                        _ => out.push((k, v)),
                    }
                }
                let mut res = Vec::new();
                let n = i32::try_from(out.len()).unwrap_or(i32::MAX);
                res.extend_from_slice(&n.to_be_bytes());
                for (k, v) in &out {
                    write_len_prefixed(&mut res, Some(k));
                    write_len_prefixed(&mut res, Some(v));
                }
                res
            }
            None => bytes.to_vec(),
        },
        CqlType::Tuple(types) => normalize_fields(bytes, types.iter()),
        CqlType::Udt { fields, .. } => normalize_fields(bytes, fields.iter().map(|(_, t)| t)),
        _ => bytes.to_vec(),
    }
}

fn normalize_fields<'a>(bytes: &[u8], mut types: impl Iterator<Item = &'a CqlType>) -> Vec<u8> {
    let Some(parts) = split_fields(bytes) else {
        return bytes.to_vec();
    };
    let mut out = Vec::with_capacity(bytes.len());
    for p in parts {
        let ty = types.next();
        match (p, ty) {
            (Ok(Some(b)), Some(ty)) => write_len_prefixed(&mut out, Some(&normalize_valid(ty, b))),
            (Ok(Some(b)), None) => write_len_prefixed(&mut out, Some(b)),
            (Ok(None), _) | (Err(_), _) => write_len_prefixed(&mut out, None),
        }
    }
    out
}
