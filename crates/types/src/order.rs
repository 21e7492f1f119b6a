//! Order-preserving, self-delimiting byte encoding of key components
//! (clustering columns), so storage can order rows with plain `memcmp`.
//!
//! A component is `order key ++ tie-break`:
//! - the order key is prefix-free, and two order keys are equal exactly when
//!   Cassandra's comparator says the values are equal; `memcmp` of order keys
//!   follows the comparator;
//! - the tie-break holds what the comparator ignores but the bytes carry
//!   (the raw byte of a `true`, a NaN's bits, redundant sign bytes of a
//!   varint, a decimal's scale, a tuple's trailing null fields), so the
//!   encoding is reversible. Tie-breaks of nested elements are collected
//!   after the enclosing order key, so they never outrank a real difference.
//!
//! Order key layout: a tag byte — `0x02` empty value, `0x03` value followed
//! by its typed payload, `0x04` bytes that are not a valid value of the type
//! (kept verbatim, escaped; they sort after every valid value); inside
//! collections and tuples `0x01` marks a null element/field and `0x00` ends
//! the sequence. Typed payloads: sign-flipped big-endian integers; Java-order
//! float keys (every NaN shares the top key); UUIDs rearranged into
//! comparison order; varints as a sign + length header and the magnitude
//! (inverted when negative); decimals as sign, exponent and digit string;
//! variable-length bytes with `0x00` escaped as `0x00 0xFF` and a
//! `0x00 0x00` terminator; collections/tuples as their elements' order keys
//! followed by `0x00`. DESC components are the bytewise complement of the
//! whole ASC encoding.
//!
//! Invariants (for valid values `a`, `b` of the type):
//! - every encoding is prefix-free, so concatenated components compare
//!   component by component;
//! - if `compare_serialized(ty, a, b)` is `Less`/`Greater`, `memcmp` of the
//!   encodings agrees (reversed for DESC), whatever follows them;
//! - encodings are equal iff the bytes are equal; values that compare `Equal`
//!   with different bytes (`1.0`/`1.00`, NaN payloads, `0x01`/`0x02`
//!   booleans, padded varints, tuples with extra trailing nulls) are ordered
//!   by their tie-breaks, in a fixed but otherwise arbitrary order;
//! - `decode_key_component(encode_key_component(x))` returns exactly `x` and
//!   the number of bytes consumed;
//! - nothing panics on any input; decoding bytes this module did not produce
//!   yields `ValueError::CorruptKey`.

use num_bigint::{BigInt, BigUint, Sign};

use crate::codec::{be_i32, pack_collection, split_collection, split_fields, split_map, write_len_prefixed};
use crate::compare::{f32_key, f64_key, reorder_back_timestamp, reorder_timestamp, strip_trailing_nulls, DecimalKey};
use crate::value::ValueError;
use crate::CqlType;

const TAG_END: u8 = 0x00;
const TAG_NULL: u8 = 0x01;
const TAG_EMPTY: u8 = 0x02;
const TAG_VALUE: u8 = 0x03;
const TAG_RAW: u8 = 0x04;

/// Largest tie-break count (padding bytes, trailing nulls) accepted when decoding.
const MAX_COUNT: usize = 1 << 28;
/// Largest number of trailing decimal zeros rebuilt when decoding a decimal.
const MAX_TRAILING_ZEROS: i64 = 20_000_000;

/// Appends the order-preserving encoding of the serialized value `bytes` of
/// type `ty` (the empty value included) to `out`; `desc` inverts the order.
pub fn encode_key_component(ty: &CqlType, bytes: &[u8], desc: bool, out: &mut Vec<u8>) {
    let start = out.len();
    let mut tie = Vec::new();
    encode_component(ty, bytes, out, &mut tie);
    out.extend_from_slice(&tie);
    if desc {
        if let Some(tail) = out.get_mut(start..) {
            for b in tail {
                *b = !*b;
            }
        }
    }
}

/// Decodes one component written by `encode_key_component` from the front of
/// `input`: the original value bytes and the number of input bytes consumed.
pub fn decode_key_component(ty: &CqlType, input: &[u8], desc: bool) -> Result<(Vec<u8>, usize), ValueError> {
    let mut r = Reader { input, pos: 0, inv: if desc { 0xFF } else { 0x00 } };
    let node = parse_component(ty, &mut r)?;
    let bytes = finish(ty, node, &mut r)?;
    Ok((bytes, r.pos))
}

// ---------------------------------------------------------------------------
// Encoding.

fn encode_component(ty: &CqlType, bytes: &[u8], key: &mut Vec<u8>, tie: &mut Vec<u8>) {
    if bytes.is_empty() {
        key.push(TAG_EMPTY);
        return;
    }
    let (key_mark, tie_mark) = (key.len(), tie.len());
    key.push(TAG_VALUE);
    if encode_payload(ty, bytes, key, tie).is_none() {
        key.truncate(key_mark);
        tie.truncate(tie_mark);
        key.push(TAG_RAW);
        write_escaped(bytes, key);
    }
}

fn encode_nested(ty: &CqlType, bytes: Option<&[u8]>, key: &mut Vec<u8>, tie: &mut Vec<u8>) {
    match bytes {
        None => key.push(TAG_NULL),
        Some(b) => encode_component(ty, b, key, tie),
    }
}

fn write_escaped(bytes: &[u8], out: &mut Vec<u8>) {
    for &b in bytes {
        out.push(b);
        if b == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0x00, 0x00]);
}

fn write_count(n: usize, out: &mut Vec<u8>) -> Option<()> {
    if n < 0xFF {
        out.push(n as u8);
    } else {
        out.push(0xFF);
        out.extend_from_slice(&u32::try_from(n).ok()?.to_be_bytes());
    }
    Some(())
}

/// Flips the sign bit of a fixed-width big-endian signed integer.
fn signed_fixed<const N: usize>(bytes: &[u8], out: &mut Vec<u8>) -> Option<()> {
    let mut arr: [u8; N] = bytes.try_into().ok()?;
    arr[0] ^= 0x80;
    out.extend_from_slice(&arr);
    Some(())
}

fn encode_payload(ty: &CqlType, bytes: &[u8], key: &mut Vec<u8>, tie: &mut Vec<u8>) -> Option<()> {
    match ty {
        CqlType::Ascii | CqlType::Text | CqlType::Blob | CqlType::Inet | CqlType::Duration => write_escaped(bytes, key),
        CqlType::Boolean => {
            let [b]: [u8; 1] = bytes.try_into().ok()?;
            key.push(u8::from(b != 0));
            if b != 0 {
                tie.push(b);
            }
        }
        CqlType::TinyInt => signed_fixed::<1>(bytes, key)?,
        CqlType::SmallInt => signed_fixed::<2>(bytes, key)?,
        CqlType::Int => signed_fixed::<4>(bytes, key)?,
        CqlType::BigInt | CqlType::Counter | CqlType::Timestamp => signed_fixed::<8>(bytes, key)?,
        CqlType::Date => key.extend_from_slice(&<[u8; 4]>::try_from(bytes).ok()?),
        CqlType::Time => key.extend_from_slice(&<[u8; 8]>::try_from(bytes).ok()?),
        CqlType::Float => {
            let raw: [u8; 4] = bytes.try_into().ok()?;
            let k = f32_key(u32::from_be_bytes(raw));
            key.extend_from_slice(&k.to_be_bytes());
            if k == u32::MAX {
                tie.extend_from_slice(&raw);
            }
        }
        CqlType::Double => {
            let raw: [u8; 8] = bytes.try_into().ok()?;
            let k = f64_key(u64::from_be_bytes(raw));
            key.extend_from_slice(&k.to_be_bytes());
            if k == u64::MAX {
                tie.extend_from_slice(&raw);
            }
        }
        CqlType::Uuid => {
            let v = u128::from_be_bytes(bytes.try_into().ok()?);
            let (msb, lsb) = ((v >> 64) as u64, v as u64);
            let version = (msb >> 12) & 0xf;
            let hi = if version == 1 {
                reorder_timestamp(msb)
            } else {
                (version << 60) | ((msb >> 4) & 0x0FFF_FFFF_FFFF_F000) | (msb & 0xFFF)
            };
            key.extend_from_slice(&hi.to_be_bytes());
            key.extend_from_slice(&lsb.to_be_bytes());
        }
        CqlType::TimeUuid => {
            let v = u128::from_be_bytes(bytes.try_into().ok()?);
            let (msb, lsb) = ((v >> 64) as u64, v as u64);
            if (msb >> 12) & 0xf != 1 {
                return None;
            }
            key.extend_from_slice(&reorder_timestamp(msb).to_be_bytes());
            key.extend_from_slice(&(lsb ^ 0x8080_8080_8080_8080).to_be_bytes());
        }
        CqlType::Varint => {
            let (pad, minimal) = strip_sign_padding(bytes);
            write_integer_key(&BigInt::from_signed_bytes_be(minimal), key)?;
            write_count(pad, tie)?;
        }
        CqlType::Decimal => encode_decimal(bytes, key, tie)?,
        CqlType::List { elem, .. } | CqlType::Set { elem, .. } => {
            for e in split_collection(bytes)? {
                encode_nested(elem, e, key, tie);
            }
            key.push(TAG_END);
        }
        CqlType::Map { key: kt, value: vt, .. } => {
            for (k, v) in split_map(bytes)? {
                encode_nested(kt, k, key, tie);
                encode_nested(vt, v, key, tie);
            }
            key.push(TAG_END);
        }
        CqlType::Tuple(types) => encode_fields(&types.iter().collect::<Vec<_>>(), bytes, key, tie)?,
        CqlType::Udt { fields, .. } => {
            encode_fields(&fields.iter().map(|(_, t)| t).collect::<Vec<_>>(), bytes, key, tie)?
        }
    }
    Some(())
}

fn encode_fields(types: &[&CqlType], bytes: &[u8], key: &mut Vec<u8>, tie: &mut Vec<u8>) -> Option<()> {
    let mut fields = Vec::new();
    for f in split_fields(bytes)? {
        // Lengths below -1 also mean null to Cassandra but cannot be restored exactly.
        fields.push(f.ok()?);
    }
    let total = fields.len();
    let kept = strip_trailing_nulls(fields);
    for (i, f) in kept.iter().enumerate() {
        encode_nested(field_type(types, i), *f, key, tie);
    }
    key.push(TAG_END);
    write_count(total - kept.len(), tie)
}

fn field_type<'a>(types: &[&'a CqlType], i: usize) -> &'a CqlType {
    types.get(i).copied().unwrap_or(&CqlType::Blob)
}

/// Splits two's-complement bytes into (number of redundant leading sign
/// bytes, minimal form).
fn strip_sign_padding(bytes: &[u8]) -> (usize, &[u8]) {
    let mut start = 0;
    while let (Some(&b0), Some(&b1)) = (bytes.get(start), bytes.get(start + 1)) {
        if (b0 == 0x00 && b1 & 0x80 == 0) || (b0 == 0xFF && b1 & 0x80 != 0) {
            start += 1;
        } else {
            break;
        }
    }
    (start, bytes.get(start..).unwrap_or_default())
}

/// Sign and magnitude-length header, then the magnitude (inverted if negative).
fn write_integer_key(v: &BigInt, out: &mut Vec<u8>) -> Option<()> {
    let (sign, mag) = v.to_bytes_be();
    let neg = sign == Sign::Minus;
    if sign == Sign::NoSign {
        out.push(0x80);
        return Some(());
    }
    let len = mag.len();
    if len <= 126 {
        out.push(if neg { 0x80 - len as u8 } else { 0x80 + len as u8 });
    } else {
        let l = u32::try_from(len).ok()?;
        if neg {
            out.push(0x01);
            out.extend_from_slice(&(!l).to_be_bytes());
        } else {
            out.push(0xFF);
            out.extend_from_slice(&l.to_be_bytes());
        }
    }
    if neg {
        out.extend(mag.iter().map(|b| !b));
    } else {
        out.extend_from_slice(&mag);
    }
    Some(())
}

fn encode_decimal(bytes: &[u8], key: &mut Vec<u8>, tie: &mut Vec<u8>) -> Option<()> {
    let scale = be_i32(bytes.get(..4)?)?;
    let unscaled_bytes = bytes.get(4..)?;
    // Padding code: 0 = no unscaled bytes at all, else 1 + redundant sign bytes.
    let (pad_code, value) = if unscaled_bytes.is_empty() {
        (0, BigInt::default())
    } else {
        let (pad, minimal) = strip_sign_padding(unscaled_bytes);
        (pad + 1, BigInt::from_signed_bytes_be(minimal))
    };
    let dk = DecimalKey::new(&value, scale);
    if dk.sign == 0 {
        key.push(0x02);
    } else {
        let mut body = Vec::with_capacity(dk.digits.len() + 9);
        body.extend_from_slice(&((dk.exp as u64) ^ (1 << 63)).to_be_bytes());
        body.extend(dk.digits.iter().map(|d| d + 1));
        body.push(0x00);
        if dk.sign < 0 {
            key.push(0x01);
            key.extend(body.iter().map(|b| !b));
        } else {
            key.push(0x03);
            key.extend_from_slice(&body);
        }
    }
    tie.extend_from_slice(&((scale as u32) ^ 0x8000_0000).to_be_bytes());
    write_count(pad_code, tie)
}

// ---------------------------------------------------------------------------
// Decoding: first the order key into a `Node` tree, then the tie-breaks in
// the same traversal order.

struct Reader<'a> {
    input: &'a [u8],
    pos: usize,
    inv: u8,
}

fn eof() -> ValueError {
    ValueError::corrupt("unexpected end of input")
}

impl Reader<'_> {
    fn peek(&self) -> Result<u8, ValueError> {
        self.input.get(self.pos).map(|b| b ^ self.inv).ok_or_else(eof)
    }

    fn byte(&mut self) -> Result<u8, ValueError> {
        let b = self.peek()?;
        self.pos += 1;
        Ok(b)
    }

    fn take(&mut self, n: usize) -> Result<Vec<u8>, ValueError> {
        let end = self.pos.checked_add(n).ok_or_else(eof)?;
        let s = self.input.get(self.pos..end).ok_or_else(eof)?;
        self.pos = end;
        Ok(s.iter().map(|b| b ^ self.inv).collect())
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], ValueError> {
        self.take(N)?.try_into().map_err(|_| eof())
    }

    fn escaped(&mut self) -> Result<Vec<u8>, ValueError> {
        let mut out = Vec::new();
        loop {
            match self.byte()? {
                0x00 => match self.byte()? {
                    0xFF => out.push(0x00),
                    0x00 => return Ok(out),
                    b => return Err(ValueError::corrupt(format!("bad escape 0x00 0x{b:02x}"))),
                },
                b => out.push(b),
            }
        }
    }

    fn count(&mut self) -> Result<usize, ValueError> {
        let n = match self.byte()? {
            0xFF => u32::from_be_bytes(self.array::<4>()?) as usize,
            b => usize::from(b),
        };
        if n > MAX_COUNT {
            return Err(ValueError::corrupt(format!("count {n} too large")));
        }
        Ok(n)
    }
}

/// What the order key of a component says; `finish` completes it with the tie-breaks.
enum Node {
    /// Bytes fully determined by the order key.
    Exact(Vec<u8>),
    /// A boolean `true` (its raw byte is in the tie-break).
    True,
    /// A NaN float/double (its raw bits, `usize` bytes, are in the tie-break).
    NaN(usize),
    /// A varint (redundant sign bytes in the tie-break).
    Varint(BigInt),
    /// A decimal's sign, exponent and digits (scale and padding in the tie-break).
    Decimal(Sign, i64, Vec<u8>),
    /// List/set elements; `None` is null.
    Seq(Vec<Option<Node>>),
    /// Map entries.
    Entries(Vec<(Option<Node>, Option<Node>)>),
    /// Tuple/UDT fields up to the last non-null one (trailing nulls in the tie-break).
    Fields(Vec<Option<Node>>),
}

fn parse_component(ty: &CqlType, r: &mut Reader<'_>) -> Result<Node, ValueError> {
    match r.byte()? {
        TAG_EMPTY => Ok(Node::Exact(Vec::new())),
        TAG_VALUE => parse_payload(ty, r),
        TAG_RAW => Ok(Node::Exact(r.escaped()?)),
        t => Err(ValueError::corrupt(format!("unexpected tag 0x{t:02x}"))),
    }
}

fn parse_nested(ty: &CqlType, r: &mut Reader<'_>) -> Result<Option<Node>, ValueError> {
    if r.peek()? == TAG_NULL {
        r.byte()?;
        return Ok(None);
    }
    parse_component(ty, r).map(Some)
}

fn unflip<const N: usize>(r: &mut Reader<'_>) -> Result<Node, ValueError> {
    let mut a = r.array::<N>()?;
    a[0] ^= 0x80;
    Ok(Node::Exact(a.to_vec()))
}

fn parse_payload(ty: &CqlType, r: &mut Reader<'_>) -> Result<Node, ValueError> {
    Ok(match ty {
        CqlType::Ascii | CqlType::Text | CqlType::Blob | CqlType::Inet | CqlType::Duration => Node::Exact(r.escaped()?),
        CqlType::Boolean => match r.byte()? {
            0 => Node::Exact(vec![0]),
            1 => Node::True,
            _ => return Err(ValueError::corrupt("bad boolean")),
        },
        CqlType::TinyInt => unflip::<1>(r)?,
        CqlType::SmallInt => unflip::<2>(r)?,
        CqlType::Int => unflip::<4>(r)?,
        CqlType::BigInt | CqlType::Counter | CqlType::Timestamp => unflip::<8>(r)?,
        CqlType::Date => Node::Exact(r.take(4)?),
        CqlType::Time => Node::Exact(r.take(8)?),
        CqlType::Float => {
            let k = u32::from_be_bytes(r.array::<4>()?);
            if k == u32::MAX {
                Node::NaN(4)
            } else {
                let bits = if k & 0x8000_0000 != 0 { k ^ 0x8000_0000 } else { !k };
                Node::Exact(bits.to_be_bytes().to_vec())
            }
        }
        CqlType::Double => {
            let k = u64::from_be_bytes(r.array::<8>()?);
            if k == u64::MAX {
                Node::NaN(8)
            } else {
                let bits = if k & 0x8000_0000_0000_0000 != 0 { k ^ 0x8000_0000_0000_0000 } else { !k };
                Node::Exact(bits.to_be_bytes().to_vec())
            }
        }
        CqlType::Uuid => {
            let hi = u64::from_be_bytes(r.array::<8>()?);
            let lsb = u64::from_be_bytes(r.array::<8>()?);
            let version = hi >> 60;
            let msb = if version == 1 {
                reorder_back_timestamp(hi)
            } else {
                ((hi << 4) & 0xFFFF_FFFF_FFFF_0000) | (version << 12) | (hi & 0xFFF)
            };
            Node::Exact(((u128::from(msb) << 64) | u128::from(lsb)).to_be_bytes().to_vec())
        }
        CqlType::TimeUuid => {
            let msb = reorder_back_timestamp(u64::from_be_bytes(r.array::<8>()?));
            let lsb = u64::from_be_bytes(r.array::<8>()?) ^ 0x8080_8080_8080_8080;
            Node::Exact(((u128::from(msb) << 64) | u128::from(lsb)).to_be_bytes().to_vec())
        }
        CqlType::Varint => Node::Varint(read_integer_key(r)?),
        CqlType::Decimal => parse_decimal(r)?,
        CqlType::List { elem, .. } | CqlType::Set { elem, .. } => {
            let mut items = Vec::new();
            while r.peek()? != TAG_END {
                items.push(parse_nested(elem, r)?);
            }
            r.byte()?;
            Node::Seq(items)
        }
        CqlType::Map { key, value, .. } => {
            let mut entries = Vec::new();
            while r.peek()? != TAG_END {
                let k = parse_nested(key, r)?;
                let v = parse_nested(value, r)?;
                entries.push((k, v));
            }
            r.byte()?;
            Node::Entries(entries)
        }
        CqlType::Tuple(types) => parse_fields(&types.iter().collect::<Vec<_>>(), r)?,
        CqlType::Udt { fields, .. } => parse_fields(&fields.iter().map(|(_, t)| t).collect::<Vec<_>>(), r)?,
    })
}

fn parse_fields(types: &[&CqlType], r: &mut Reader<'_>) -> Result<Node, ValueError> {
    let mut fields = Vec::new();
    while r.peek()? != TAG_END {
        fields.push(parse_nested(field_type(types, fields.len()), r)?);
    }
    r.byte()?;
    Ok(Node::Fields(fields))
}

fn read_integer_key(r: &mut Reader<'_>) -> Result<BigInt, ValueError> {
    let h = r.byte()?;
    let (neg, len) = match h {
        0x80 => return Ok(BigInt::default()),
        0x81..=0xFE => (false, usize::from(h - 0x80)),
        0xFF => (false, u32::from_be_bytes(r.array::<4>()?) as usize),
        0x02..=0x7F => (true, usize::from(0x80 - h)),
        0x01 => (true, (!u32::from_be_bytes(r.array::<4>()?)) as usize),
        _ => return Err(ValueError::corrupt("bad integer header")),
    };
    let mut mag = r.take(len)?;
    if neg {
        for b in &mut mag {
            *b = !*b;
        }
    }
    Ok(BigInt::from_bytes_be(if neg { Sign::Minus } else { Sign::Plus }, &mag))
}

fn parse_decimal(r: &mut Reader<'_>) -> Result<Node, ValueError> {
    let sign = match r.byte()? {
        0x01 => Sign::Minus,
        0x02 => return Ok(Node::Decimal(Sign::NoSign, 0, Vec::new())),
        0x03 => Sign::Plus,
        _ => return Err(ValueError::corrupt("bad decimal sign")),
    };
    // The exponent and digits of a negative decimal are stored inverted.
    let flip = if sign == Sign::Minus { 0xFF } else { 0x00 };
    let e: [u8; 8] = r.array::<8>()?;
    let exp = (u64::from_be_bytes(e.map(|b| b ^ flip)) ^ (1 << 63)) as i64;
    let mut digits = Vec::new();
    loop {
        match r.byte()? ^ flip {
            0x00 => break,
            d @ 1..=10 => digits.push(d - 1),
            _ => return Err(ValueError::corrupt("bad decimal digit")),
        }
    }
    Ok(Node::Decimal(sign, exp, digits))
}

/// Minimal two's complement of `v` preceded by `pad` redundant sign bytes.
fn with_sign_padding(v: &BigInt, pad: usize) -> Vec<u8> {
    let fill = if v.sign() == Sign::Minus { 0xFF } else { 0x00 };
    let mut out = vec![fill; pad];
    out.extend_from_slice(&v.to_signed_bytes_be());
    out
}

/// Completes a parsed order key with its tie-breaks into the original bytes.
fn finish(ty: &CqlType, node: Node, r: &mut Reader<'_>) -> Result<Vec<u8>, ValueError> {
    Ok(match node {
        Node::Exact(b) => b,
        Node::True => match r.byte()? {
            0 => return Err(ValueError::corrupt("bad boolean tie-break")),
            b => vec![b],
        },
        Node::NaN(n) => r.take(n)?,
        Node::Varint(v) => {
            let pad = r.count()?;
            with_sign_padding(&v, pad)
        }
        Node::Decimal(sign, exp, digits) => finish_decimal(sign, exp, &digits, r)?,
        Node::Seq(items) => {
            let elem = match ty {
                CqlType::List { elem, .. } | CqlType::Set { elem, .. } => elem,
                _ => return Err(ValueError::corrupt("sequence for a non-collection type")),
            };
            let mut parts = Vec::with_capacity(items.len());
            for it in items {
                parts.push(match it {
                    None => None,
                    Some(n) => Some(finish(elem, n, r)?),
                });
            }
            pack_collection(parts.iter().map(|p| p.as_deref()))
        }
        Node::Entries(entries) => {
            let CqlType::Map { key, value, .. } = ty else {
                return Err(ValueError::corrupt("entries for a non-map type"));
            };
            let mut out = Vec::new();
            let n = i32::try_from(entries.len()).unwrap_or(i32::MAX);
            out.extend_from_slice(&n.to_be_bytes());
            for (k, v) in entries {
                for (t, x) in [(&**key, k), (&**value, v)] {
                    let b = match x {
                        None => None,
                        Some(n) => Some(finish(t, n, r)?),
                    };
                    write_len_prefixed(&mut out, b.as_deref());
                }
            }
            out
        }
        Node::Fields(fields) => {
            let types: Vec<&CqlType> = match ty {
                CqlType::Tuple(ts) => ts.iter().collect(),
                CqlType::Udt { fields, .. } => fields.iter().map(|(_, t)| t).collect(),
                _ => return Err(ValueError::corrupt("fields for a non-tuple type")),
            };
            let mut out = Vec::new();
            for (i, f) in fields.into_iter().enumerate() {
                let b = match f {
                    None => None,
                    Some(n) => Some(finish(field_type(&types, i), n, r)?),
                };
                write_len_prefixed(&mut out, b.as_deref());
            }
            for _ in 0..r.count()? {
                write_len_prefixed(&mut out, None);
            }
            out
        }
    })
}

fn finish_decimal(sign: Sign, exp: i64, digits: &[u8], r: &mut Reader<'_>) -> Result<Vec<u8>, ValueError> {
    let scale = (u32::from_be_bytes(r.array::<4>()?) ^ 0x8000_0000) as i32;
    let pad_code = r.count()?;
    let mut out = scale.to_be_bytes().to_vec();
    if sign == Sign::NoSign {
        // Zero: `pad_code` zero bytes (none when the unscaled part was absent).
        out.extend(std::iter::repeat_n(0u8, pad_code));
        return Ok(out);
    }
    if pad_code == 0 {
        return Err(ValueError::corrupt("non-zero decimal without unscaled bytes"));
    }
    let trailing = exp
        .checked_add(i64::from(scale))
        .and_then(|x| x.checked_sub(digits.len() as i64))
        .filter(|t| (0..=MAX_TRAILING_ZEROS).contains(t))
        .ok_or_else(|| ValueError::corrupt("bad decimal exponent"))?;
    let d = BigUint::from_radix_be(digits, 10).ok_or_else(|| ValueError::corrupt("bad decimal digits"))?;
    let mag = d * BigUint::from(10u32).pow(trailing as u32);
    out.extend_from_slice(&with_sign_padding(&BigInt::from_biguint(sign, mag), pad_code - 1));
    Ok(out)
}
