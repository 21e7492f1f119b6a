//! Cassandra 5's dynamic data masking functions: `mask_null`,
//! `mask_default` (a fixed value of the argument's type: zero, `****`, the
//! epoch, empty collections, ...), `mask_replace`, `mask_inner` and
//! `mask_outer` (text with its inner or outer characters replaced by a
//! padding character, `*` by default) and `mask_hash` (a blob: the digest of
//! the value's serialized bytes, SHA-256 unless named).

use md5::Digest;
use types::{CqlType, Value};

use crate::error::QueryError;

/// The value `mask_default` gives for a type.
pub fn default_value(ty: &CqlType) -> Value {
    match ty {
        CqlType::Ascii => Value::Ascii("****".into()),
        CqlType::Text => Value::Text("****".into()),
        CqlType::Blob => Value::Blob(Vec::new()),
        CqlType::Boolean => Value::Boolean(false),
        CqlType::TinyInt => Value::TinyInt(0),
        CqlType::SmallInt => Value::SmallInt(0),
        CqlType::Int => Value::Int(0),
        CqlType::BigInt => Value::BigInt(0),
        CqlType::Counter => Value::Counter(0),
        CqlType::Varint => Value::Varint(0.into()),
        CqlType::Float => Value::Float(0.0),
        CqlType::Double => Value::Double(0.0),
        CqlType::Decimal => Value::Decimal { unscaled: 0.into(), scale: 0 },
        CqlType::Uuid => Value::Uuid(uuid::Uuid::nil()),
        CqlType::TimeUuid => Value::TimeUuid(uuid::Uuid::from_u128(0x1381_4000_1dd2_11b2_8080_8080_8080_8080)),
        CqlType::Timestamp => Value::Timestamp(0),
        CqlType::Date => Value::Date(1 << 31),
        CqlType::Time => Value::Time(0),
        CqlType::Duration => Value::Duration { months: 0, days: 0, nanos: 0 },
        CqlType::Inet => Value::Inet(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED)),
        CqlType::List { .. } => Value::List(Vec::new()),
        CqlType::Set { .. } => Value::Set(Vec::new()),
        CqlType::Map { .. } => Value::Map(Vec::new()),
        CqlType::Tuple(items) => Value::Tuple(items.iter().map(|t| Some(default_value(t))).collect()),
        CqlType::Udt { fields, .. } => Value::Udt(fields.iter().map(|(_, t)| Some(default_value(t))).collect()),
    }
}

fn padding(function: &str, pad: Option<&str>) -> Result<char, QueryError> {
    let Some(pad) = pad else { return Ok('*') };
    let mut chars = pad.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) => Ok(c),
        _ => Err(QueryError::Invalid(format!(
            "The padding argument for function system.{function} should be single-character, but '{pad}' has {} characters.",
            pad.chars().count()
        ))),
    }
}

/// `mask_inner` (`outer` false) or `mask_outer` of `text`: `begin` and `end`
/// characters (negative or null: none) are kept (inner) or masked (outer).
pub fn mask_text(
    function: &str,
    outer: bool,
    text: &str,
    begin: Option<i32>,
    end: Option<i32>,
    pad: Option<&str>,
) -> Result<String, QueryError> {
    let pad = padding(function, pad)?;
    let chars: Vec<char> = text.chars().collect();
    let n = chars.len();
    let begin = (begin.unwrap_or(0).max(0) as usize).min(n);
    let end = (end.unwrap_or(0).max(0) as usize).min(n - begin);
    Ok(chars
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let edge = i < begin || i >= n - end;
            if edge != outer {
                *c
            } else {
                pad
            }
        })
        .collect())
}

/// `mask_hash`: the digest of `bytes` with the named algorithm (Java's names).
pub fn hash(bytes: &[u8], algorithm: Option<&str>) -> Result<Vec<u8>, QueryError> {
    use ring_crypto::digest;
    let algorithm = algorithm.unwrap_or("SHA-256");
    let ring_algorithm = match algorithm.to_ascii_uppercase().as_str() {
        "MD5" => return Ok(md5::Md5::digest(bytes).to_vec()),
        "SHA-1" | "SHA1" | "SHA" => &digest::SHA1_FOR_LEGACY_USE_ONLY,
        "SHA-256" => &digest::SHA256,
        "SHA-384" => &digest::SHA384,
        "SHA-512" => &digest::SHA512,
        "SHA-512/256" => &digest::SHA512_256,
        _ => return Err(QueryError::Invalid(format!("Hash algorithm not found: {algorithm}"))),
    };
    Ok(digest::digest(ring_algorithm, bytes).as_ref().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inner_and_outer_masks() {
        let m = |outer, b, e| mask_text("f", outer, "abcdef", b, e, None).expect("masked");
        assert_eq!(m(false, Some(1), Some(2)), "a***ef");
        assert_eq!(m(true, Some(1), Some(2)), "*bcd**");
        assert_eq!(m(true, Some(10), Some(2)), "******");
        assert_eq!(m(false, None, Some(1)), "*****f");
        assert_eq!(m(false, Some(-1), Some(2)), "****ef");
        assert_eq!(mask_text("f", false, "abcdef", Some(1), Some(2), Some("#")).expect("masked"), "a###ef");
        assert!(mask_text("f", false, "x", None, None, Some("xy")).is_err());
    }

    #[test]
    fn hashes() {
        let h = hash(b"x", None).expect("sha-256");
        assert_eq!(h.first().copied(), Some(0x2d));
        assert_eq!(h.len(), 32);
        assert_eq!(hash(b"x", Some("SHA-512")).expect("sha-512").len(), 64);
        assert!(hash(b"x", Some("nope")).is_err());
    }
}
