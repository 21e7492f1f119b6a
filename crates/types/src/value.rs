//! CQL values and the error type shared by their codecs.
//!
//! A `Value` is one non-null CQL value. Its wire form (native protocol v4) is
//! produced by `Value::serialize` / parsed by `Value::deserialize` (see
//! `codec.rs`); text literals are handled in `literal.rs`, comparisons in
//! `compare.rs` and the order-preserving key encoding in `order.rs`.
//!
//! Invariants:
//! - Null is `Option::None` at the use site (and inside tuples/UDTs); a
//!   `Value` is never null.
//! - Cassandra's "empty value" (a zero-length byte string, valid for most
//!   fixed-size types) has no `Value` form except for `ascii`, `text` and
//!   `blob`, where it is the empty string/blob; code that must preserve empty
//!   values works on serialized bytes instead.
//! - `Set` elements and `Map` keys produced by this crate are sorted by the
//!   element/key type's comparator and free of duplicates.

use std::net::IpAddr;

use num_bigint::BigInt;
use uuid::Uuid;

use crate::CqlType;

/// A non-null CQL value. Null is `Option::None` at the use site.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Ascii(String),
    Text(String),
    Blob(Vec<u8>),
    Boolean(bool),
    TinyInt(i8),
    SmallInt(i16),
    Int(i32),
    BigInt(i64),
    Counter(i64),
    Varint(BigInt),
    Float(f32),
    Double(f64),
    /// `unscaled * 10^-scale`.
    Decimal {
        unscaled: BigInt,
        scale: i32,
    },
    Uuid(Uuid),
    TimeUuid(Uuid),
    /// Milliseconds since the Unix epoch.
    Timestamp(i64),
    /// Days since the epoch, with 2^31 as the epoch (the wire form).
    Date(u32),
    /// Nanoseconds since midnight.
    Time(i64),
    Duration {
        months: i32,
        days: i32,
        nanos: i64,
    },
    Inet(IpAddr),
    List(Vec<Value>),
    Set(Vec<Value>),
    Map(Vec<(Value, Value)>),
    Tuple(Vec<Option<Value>>),
    Udt(Vec<Option<Value>>),
}

/// Why bytes or text are not a valid value of a CQL type.
///
/// The `Display` text of `Marshal` and `InvalidRequest` is Cassandra's own
/// message for the same failure, so it can be sent to clients as is.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    /// Cassandra's `MarshalException`: malformed bytes or an unparsable literal.
    #[error("{0}")]
    Marshal(String),
    /// Cassandra's `InvalidRequestException` raised while interpreting a literal
    /// (e.g. an out-of-range duration).
    #[error("{0}")]
    InvalidRequest(String),
    /// A valid but empty (zero-length) value of a type whose empty value has no
    /// `Value` form (e.g. an empty `int`). The payload is the CQL type name.
    #[error("empty value of type {0} has no Value representation")]
    Empty(String),
    /// An order-preserving key (see `order.rs`) that this crate did not produce.
    #[error("corrupt key component: {0}")]
    CorruptKey(String),
}

impl ValueError {
    pub(crate) fn marshal(msg: impl Into<String>) -> ValueError {
        ValueError::Marshal(msg.into())
    }

    pub(crate) fn invalid(msg: impl Into<String>) -> ValueError {
        ValueError::InvalidRequest(msg.into())
    }

    pub(crate) fn corrupt(msg: impl Into<String>) -> ValueError {
        ValueError::CorruptKey(msg.into())
    }
}

impl Value {
    /// True if this value has the shape of `ty` (variant, and recursively the
    /// elements of collections, tuples and UDTs). `Text` values are accepted
    /// for `ascii` only when they are pure ASCII; `Ascii` values are accepted
    /// for `text`; tuples/UDTs may have fewer fields than declared.
    pub fn is_of_type(&self, ty: &CqlType) -> bool {
        match (self, ty) {
            (Value::Ascii(_), CqlType::Ascii | CqlType::Text) => true,
            (Value::Text(s), CqlType::Ascii) => s.is_ascii(),
            (Value::Text(_), CqlType::Text) => true,
            (Value::Blob(_), CqlType::Blob) => true,
            (Value::Boolean(_), CqlType::Boolean) => true,
            (Value::TinyInt(_), CqlType::TinyInt) => true,
            (Value::SmallInt(_), CqlType::SmallInt) => true,
            (Value::Int(_), CqlType::Int) => true,
            (Value::BigInt(_), CqlType::BigInt) => true,
            (Value::Counter(_), CqlType::Counter) => true,
            (Value::Varint(_), CqlType::Varint) => true,
            (Value::Float(_), CqlType::Float) => true,
            (Value::Double(_), CqlType::Double) => true,
            (Value::Decimal { .. }, CqlType::Decimal) => true,
            (Value::Uuid(_), CqlType::Uuid) => true,
            (Value::TimeUuid(u), CqlType::TimeUuid) => u.get_version_num() == 1,
            (Value::TimeUuid(_), CqlType::Uuid) => true,
            (Value::Timestamp(_), CqlType::Timestamp) => true,
            (Value::Date(_), CqlType::Date) => true,
            (Value::Time(t), CqlType::Time) => (0..crate::literal::NANOS_PER_DAY).contains(t),
            (Value::Duration { .. }, CqlType::Duration) => true,
            (Value::Inet(_), CqlType::Inet) => true,
            (Value::List(items), CqlType::List { elem, .. }) => items.iter().all(|v| v.is_of_type(elem)),
            (Value::Set(items), CqlType::Set { elem, .. }) => items.iter().all(|v| v.is_of_type(elem)),
            (Value::Map(entries), CqlType::Map { key, value, .. }) => {
                entries.iter().all(|(k, v)| k.is_of_type(key) && v.is_of_type(value))
            }
            (Value::Tuple(fields), CqlType::Tuple(types)) => fields_match(fields, types.iter()),
            (Value::Udt(fields), CqlType::Udt { fields: defs, .. }) => {
                fields_match(fields, defs.iter().map(|(_, t)| t))
            }
            _ => false,
        }
    }
}

fn fields_match<'a>(fields: &[Option<Value>], mut types: impl ExactSizeIterator<Item = &'a CqlType>) -> bool {
    if fields.len() > types.len() {
        return false;
    }
    fields.iter().all(|f| match (f, types.next()) {
        (None, _) => true,
        (Some(v), Some(t)) => v.is_of_type(t),
        (Some(_), None) => false,
    })
}
