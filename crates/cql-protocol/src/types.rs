//! CQL types as the `[option]` type descriptions of result and prepared
//! metadata (spec 4.2.5.2), in both directions.
//!
//! What the wire does not carry: frozen-ness (a `frozen<list<int>>` is sent
//! as a list of int), and the text/varchar distinction (text is sent as
//! varchar, 0x000D). In v4 `duration` has no id of its own and is the custom
//! type `org.apache.cassandra.db.marshal.DurationType`.
//!
//! Decoding therefore has to choose: collections and UDTs come back with
//! `frozen: false` at the top level and `frozen: true` when nested inside a
//! collection, tuple or UDT (where CQL requires frozen). Nesting is bounded by
//! [`MAX_TYPE_DEPTH`] so a hostile description cannot overflow the stack.

use ::types::CqlType;
use bytes::BytesMut;

use crate::error::ProtocolError;
use crate::wire::{self, Reader};

/// How deep a type description may nest.
pub const MAX_TYPE_DEPTH: usize = 64;

/// The custom class name v4 uses for `duration`.
pub const DURATION_CLASS: &str = "org.apache.cassandra.db.marshal.DurationType";

pub const ID_CUSTOM: u16 = 0x0000;
pub const ID_ASCII: u16 = 0x0001;
pub const ID_BIGINT: u16 = 0x0002;
pub const ID_BLOB: u16 = 0x0003;
pub const ID_BOOLEAN: u16 = 0x0004;
pub const ID_COUNTER: u16 = 0x0005;
pub const ID_DECIMAL: u16 = 0x0006;
pub const ID_DOUBLE: u16 = 0x0007;
pub const ID_FLOAT: u16 = 0x0008;
pub const ID_INT: u16 = 0x0009;
pub const ID_TIMESTAMP: u16 = 0x000B;
pub const ID_UUID: u16 = 0x000C;
pub const ID_VARCHAR: u16 = 0x000D;
pub const ID_VARINT: u16 = 0x000E;
pub const ID_TIMEUUID: u16 = 0x000F;
pub const ID_INET: u16 = 0x0010;
pub const ID_DATE: u16 = 0x0011;
pub const ID_TIME: u16 = 0x0012;
pub const ID_SMALLINT: u16 = 0x0013;
pub const ID_TINYINT: u16 = 0x0014;
pub const ID_LIST: u16 = 0x0020;
pub const ID_MAP: u16 = 0x0021;
pub const ID_SET: u16 = 0x0022;
pub const ID_UDT: u16 = 0x0030;
pub const ID_TUPLE: u16 = 0x0031;

/// Writes the `[option]` for `ty`.
pub fn write_type(out: &mut BytesMut, ty: &CqlType) {
    let simple = match ty {
        CqlType::Ascii => ID_ASCII,
        CqlType::BigInt => ID_BIGINT,
        CqlType::Blob => ID_BLOB,
        CqlType::Boolean => ID_BOOLEAN,
        CqlType::Counter => ID_COUNTER,
        CqlType::Decimal => ID_DECIMAL,
        CqlType::Double => ID_DOUBLE,
        CqlType::Float => ID_FLOAT,
        CqlType::Int => ID_INT,
        CqlType::Timestamp => ID_TIMESTAMP,
        CqlType::Uuid => ID_UUID,
        CqlType::Text => ID_VARCHAR,
        CqlType::Varint => ID_VARINT,
        CqlType::TimeUuid => ID_TIMEUUID,
        CqlType::Inet => ID_INET,
        CqlType::Date => ID_DATE,
        CqlType::Time => ID_TIME,
        CqlType::SmallInt => ID_SMALLINT,
        CqlType::TinyInt => ID_TINYINT,
        CqlType::Duration => {
            wire::write_short(out, ID_CUSTOM);
            wire::write_string(out, DURATION_CLASS);
            return;
        }
        CqlType::List { elem, .. } => {
            wire::write_short(out, ID_LIST);
            write_type(out, elem);
            return;
        }
        CqlType::Set { elem, .. } => {
            wire::write_short(out, ID_SET);
            write_type(out, elem);
            return;
        }
        CqlType::Map { key, value, .. } => {
            wire::write_short(out, ID_MAP);
            write_type(out, key);
            write_type(out, value);
            return;
        }
        CqlType::Udt { keyspace, name, fields, .. } => {
            wire::write_short(out, ID_UDT);
            wire::write_string(out, keyspace);
            wire::write_string(out, name);
            let n = u16::try_from(fields.len()).expect("a UDT has at most 65535 fields");
            wire::write_short(out, n);
            for (field, fty) in fields {
                wire::write_string(out, field);
                write_type(out, fty);
            }
            return;
        }
        CqlType::Tuple(elems) => {
            wire::write_short(out, ID_TUPLE);
            let n = u16::try_from(elems.len()).expect("a tuple has at most 65535 components");
            wire::write_short(out, n);
            for e in elems {
                write_type(out, e);
            }
            return;
        }
    };
    wire::write_short(out, simple);
}

/// Reads an `[option]` type description.
pub fn read_type(r: &mut Reader) -> Result<CqlType, ProtocolError> {
    read_type_at(r, 0)
}

fn read_type_at(r: &mut Reader, depth: usize) -> Result<CqlType, ProtocolError> {
    if depth >= MAX_TYPE_DEPTH {
        return Err(ProtocolError::TypeTooDeep(MAX_TYPE_DEPTH));
    }
    let nested = depth > 0;
    let inner = |r: &mut Reader| read_type_at(r, depth + 1).map(Box::new);
    let id = r.read_short()?;
    Ok(match id {
        ID_CUSTOM => {
            let class = r.read_string()?;
            if class == DURATION_CLASS {
                CqlType::Duration
            } else {
                return Err(ProtocolError::UnsupportedCustomType(class));
            }
        }
        ID_ASCII => CqlType::Ascii,
        ID_BIGINT => CqlType::BigInt,
        ID_BLOB => CqlType::Blob,
        ID_BOOLEAN => CqlType::Boolean,
        ID_COUNTER => CqlType::Counter,
        ID_DECIMAL => CqlType::Decimal,
        ID_DOUBLE => CqlType::Double,
        ID_FLOAT => CqlType::Float,
        ID_INT => CqlType::Int,
        ID_TIMESTAMP => CqlType::Timestamp,
        ID_UUID => CqlType::Uuid,
        ID_VARCHAR => CqlType::Text,
        ID_VARINT => CqlType::Varint,
        ID_TIMEUUID => CqlType::TimeUuid,
        ID_INET => CqlType::Inet,
        ID_DATE => CqlType::Date,
        ID_TIME => CqlType::Time,
        ID_SMALLINT => CqlType::SmallInt,
        ID_TINYINT => CqlType::TinyInt,
        ID_LIST => CqlType::List { elem: inner(r)?, frozen: nested },
        ID_SET => CqlType::Set { elem: inner(r)?, frozen: nested },
        ID_MAP => {
            let key = inner(r)?;
            let value = inner(r)?;
            CqlType::Map { key, value, frozen: nested }
        }
        ID_UDT => {
            let keyspace = r.read_string()?;
            let name = r.read_string()?;
            let n = r.read_short()? as usize;
            // Each field takes at least a 2-byte name length and a 2-byte id.
            let mut fields = Vec::with_capacity(r.bounded_capacity(n, 4));
            for _ in 0..n {
                let field = r.read_string()?;
                let ty = read_type_at(r, depth + 1)?;
                fields.push((field, ty));
            }
            CqlType::Udt { keyspace, name, fields, frozen: nested }
        }
        ID_TUPLE => {
            let n = r.read_short()? as usize;
            let mut elems = Vec::with_capacity(r.bounded_capacity(n, 2));
            for _ in 0..n {
                elems.push(read_type_at(r, depth + 1)?);
            }
            CqlType::Tuple(elems)
        }
        other => return Err(ProtocolError::UnknownTypeId(other)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn enc(ty: &CqlType) -> Vec<u8> {
        let mut out = BytesMut::new();
        write_type(&mut out, ty);
        out.to_vec()
    }

    fn dec(b: &[u8]) -> Result<CqlType, ProtocolError> {
        read_type(&mut Reader::new(Bytes::copy_from_slice(b)))
    }

    #[test]
    fn golden_ids() {
        assert_eq!(enc(&CqlType::Text), [0x00, 0x0D]);
        assert_eq!(enc(&CqlType::Ascii), [0x00, 0x01]);
        assert_eq!(enc(&CqlType::TinyInt), [0x00, 0x14]);
        let list = CqlType::List { elem: Box::new(CqlType::Int), frozen: true };
        assert_eq!(enc(&list), [0x00, 0x20, 0x00, 0x09]);
        let mut dur = vec![0x00, 0x00, 0x00, DURATION_CLASS.len() as u8];
        dur.extend_from_slice(DURATION_CLASS.as_bytes());
        assert_eq!(enc(&CqlType::Duration), dur);
    }

    #[test]
    fn round_trips() {
        let udt = CqlType::Udt {
            keyspace: "ks".into(),
            name: "addr".into(),
            fields: vec![
                ("street".into(), CqlType::Text),
                ("tags".into(), CqlType::Set { elem: Box::new(CqlType::Ascii), frozen: true }),
            ],
            frozen: false,
        };
        let all = [
            CqlType::Ascii,
            CqlType::BigInt,
            CqlType::Blob,
            CqlType::Boolean,
            CqlType::Counter,
            CqlType::Decimal,
            CqlType::Double,
            CqlType::Float,
            CqlType::Int,
            CqlType::Timestamp,
            CqlType::Uuid,
            CqlType::Text,
            CqlType::Varint,
            CqlType::TimeUuid,
            CqlType::Inet,
            CqlType::Date,
            CqlType::Time,
            CqlType::SmallInt,
            CqlType::TinyInt,
            CqlType::Duration,
            CqlType::List { elem: Box::new(CqlType::Int), frozen: false },
            CqlType::Set { elem: Box::new(CqlType::Uuid), frozen: false },
            CqlType::Map {
                key: Box::new(CqlType::Text),
                value: Box::new(CqlType::List { elem: Box::new(CqlType::Int), frozen: true }),
                frozen: false,
            },
            CqlType::Tuple(vec![CqlType::Int, udt.clone().frozen()]),
            udt,
        ];
        for ty in all {
            assert_eq!(dec(&enc(&ty)).unwrap(), ty);
        }
    }

    #[test]
    fn hostile_descriptions() {
        assert_eq!(dec(&[0x00, 0x0A]), Err(ProtocolError::UnknownTypeId(0x0A)));
        assert!(matches!(dec(&[0x00, 0x00, 0x00, 0x01, b'x']), Err(ProtocolError::UnsupportedCustomType(_))));
        let deep: Vec<u8> = std::iter::repeat_n([0x00, 0x20], 10_000).flatten().collect();
        assert_eq!(dec(&deep), Err(ProtocolError::TypeTooDeep(MAX_TYPE_DEPTH)));
        assert!(dec(&[0x00, 0x31, 0xFF, 0xFF]).is_err());
    }
}
