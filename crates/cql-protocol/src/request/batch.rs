//! BATCH (opcode 0x0D):
//! `<type><n><query_1>...<query_n><consistency><flags>[<serial_consistency>][<timestamp>]`,
//! each query `<kind><string_or_id><n>[<name_1>]<value_1>...`, kind 0 a
//! `[long string]` query and kind 1 a `[short bytes]` prepared id.
//!
//! Flags: 0x10 serial consistency, 0x20 default timestamp, 0x40 names for
//! values; the four low bits must be 0. From v5 on the flags are an `[int]`,
//! and 0x80 `[string]` keyspace and 0x100 `[int]` now_in_seconds follow the
//! timestamp (as in QUERY). The 0x40 flag is documented but
//! broken (CASSANDRA-10246): it comes *after* the statements whose layout it
//! changes. We decode it anyway by parsing twice: first as positional values;
//! if that fails or its flags byte has 0x40, again with a name before each
//! value, accepted only if that parse's flags byte has 0x40 too.

use bytes::{Bytes, BytesMut};
use types::Consistency;

use crate::error::ProtocolError;
use crate::request::query::{
    decode_values, encode_values, read_flags, read_timestamp, write_flags, BoundValues, WITH_KEYSPACE,
    WITH_NOW_IN_SECONDS,
};
use crate::wire::{self, Reader};

const SERIAL_CONSISTENCY: u8 = 0x10;
const DEFAULT_TIMESTAMP: u8 = 0x20;
const NAMES_FOR_VALUES: u8 = 0x40;
const RESERVED: u8 = 0x0F;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum BatchKind {
    Logged = 0,
    Unlogged = 1,
    Counter = 2,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BatchStatement {
    Query { query: String, values: BoundValues },
    Prepared { id: Bytes, values: BoundValues },
}

impl BatchStatement {
    pub fn values(&self) -> &BoundValues {
        match self {
            BatchStatement::Query { values, .. } | BatchStatement::Prepared { values, .. } => values,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    pub kind: BatchKind,
    pub statements: Vec<BatchStatement>,
    pub consistency: Consistency,
    pub serial_consistency: Option<Consistency>,
    pub default_timestamp: Option<i64>,
    /// v5: the keyspace its statements run in (flag 0x80).
    pub keyspace: Option<String>,
    /// v5: the request's "now", in seconds (flag 0x100).
    pub now_in_seconds: Option<i32>,
}

pub(super) fn decode(r: &mut Reader, version: u8) -> Result<Batch, ProtocolError> {
    let mut positional = r.clone();
    let first = decode_with(&mut positional, false, version);
    if let Ok((_, flags)) = &first {
        if flags & NAMES_FOR_VALUES == 0 {
            *r = positional;
            return first.map(|(b, _)| b);
        }
    }
    let mut named = r.clone();
    match decode_with(&mut named, true, version) {
        Ok((batch, flags)) if flags & NAMES_FOR_VALUES != 0 => {
            *r = named;
            Ok(batch)
        }
        second => Err(match (first, second) {
            (Err(e), _) | (Ok(_), Err(e)) => e,
            (Ok(_), Ok(_)) => ProtocolError::BatchNamesMismatch,
        }),
    }
}

/// One parse, assuming names before values or not; returns the flags byte.
fn decode_with(r: &mut Reader, named: bool, version: u8) -> Result<(Batch, u8), ProtocolError> {
    let kind = match r.read_u8()? {
        0 => BatchKind::Logged,
        1 => BatchKind::Unlogged,
        2 => BatchKind::Counter,
        other => return Err(ProtocolError::InvalidBatchType(other)),
    };
    let n = r.read_short()? as usize;
    // A statement takes at least 5 bytes: kind, a short length, a short count.
    let mut statements = Vec::with_capacity(r.bounded_capacity(n, 5));
    for _ in 0..n {
        let statement = match r.read_u8()? {
            0 => {
                let query = r.read_long_string()?;
                BatchStatement::Query { query, values: decode_values(r, named)? }
            }
            1 => {
                let id = r.read_short_bytes()?;
                BatchStatement::Prepared { id, values: decode_values(r, named)? }
            }
            other => return Err(ProtocolError::InvalidBatchQueryKind(other)),
        };
        statements.push(statement);
    }
    let consistency = r.read_consistency()?;
    let wide = read_flags(r, version)?;
    // The low byte holds every v4 flag; the v5 ones are checked on `wide`.
    let flags = wide as u8;
    if flags & RESERVED != 0 {
        return Err(ProtocolError::InvalidBatchFlags(flags));
    }
    let serial_consistency = if flags & SERIAL_CONSISTENCY != 0 { Some(r.read_consistency()?) } else { None };
    let default_timestamp = if flags & DEFAULT_TIMESTAMP != 0 { Some(read_timestamp(r)?) } else { None };
    let v5 = version >= 5;
    let keyspace = if v5 && wide & WITH_KEYSPACE != 0 { Some(r.read_string()?) } else { None };
    let now_in_seconds = if v5 && wide & WITH_NOW_IN_SECONDS != 0 { Some(r.read_int()?) } else { None };
    let batch =
        Batch { kind, statements, consistency, serial_consistency, default_timestamp, keyspace, now_in_seconds };
    Ok((batch, flags))
}

/// Writes a BATCH body. If any statement has named values, the 0x40 flag is
/// set and positional values of other statements are written with empty names.
pub(super) fn encode(out: &mut BytesMut, version: u8, b: &Batch) {
    let named = b.statements.iter().any(|s| matches!(s.values(), BoundValues::Named(_)));
    wire::write_u8(out, b.kind as u8);
    let n = u16::try_from(b.statements.len()).expect("at most 65535 statements in a batch");
    wire::write_short(out, n);
    for s in &b.statements {
        match s {
            BatchStatement::Query { query, .. } => {
                wire::write_u8(out, 0);
                wire::write_long_string(out, query);
            }
            BatchStatement::Prepared { id, .. } => {
                wire::write_u8(out, 1);
                wire::write_short_bytes(out, id);
            }
        }
        match (named, s.values()) {
            (true, BoundValues::Positional(v)) => {
                let as_named = v.iter().map(|v| (String::new(), v.clone())).collect();
                encode_values(out, &BoundValues::Named(as_named));
            }
            (_, values) => encode_values(out, values),
        }
    }
    wire::write_consistency(out, b.consistency);
    let mut flags = 0;
    if b.serial_consistency.is_some() {
        flags |= SERIAL_CONSISTENCY;
    }
    if b.default_timestamp.is_some() {
        flags |= DEFAULT_TIMESTAMP;
    }
    if named {
        flags |= NAMES_FOR_VALUES;
    }
    let mut wide = u32::from(flags);
    if version >= 5 {
        if b.keyspace.is_some() {
            wide |= WITH_KEYSPACE;
        }
        if b.now_in_seconds.is_some() {
            wide |= WITH_NOW_IN_SECONDS;
        }
    }
    write_flags(out, version, wide);
    if let Some(c) = b.serial_consistency {
        wire::write_consistency(out, c);
    }
    if let Some(ts) = b.default_timestamp {
        wire::write_long(out, ts);
    }
    if wide & WITH_KEYSPACE != 0 {
        wire::write_string(out, b.keyspace.as_deref().unwrap_or_default());
    }
    if let Some(now) = b.now_in_seconds.filter(|_| wide & WITH_NOW_IN_SECONDS != 0) {
        wire::write_int(out, now);
    }
}
