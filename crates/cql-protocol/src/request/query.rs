//! QUERY (opcode 0x07): `<query><query_parameters>`, and the query parameters
//! shared with EXECUTE.
//!
//! `<query_parameters>` is
//! `<consistency><flags>[<n>[name_1]<value_1>...][<result_page_size>][<paging_state>][<serial_consistency>][<timestamp>]`
//! with the one-byte flags 0x01 values, 0x02 skip metadata, 0x04 page size,
//! 0x08 paging state, 0x10 serial consistency, 0x20 default timestamp,
//! 0x40 names for values (only meaningful with 0x01). Unknown flag bits are
//! ignored. A default timestamp of `i64::MIN` is refused, as Cassandra does.
//!
//! Protocol v5 makes the flags a 4-byte `[int]` and adds two of them, whose
//! values follow the timestamp: 0x80 `[string]` keyspace (the statement runs
//! in it instead of the connection's) and 0x100 `[int]` now_in_seconds (the
//! time the request takes as "now" for TTL expiry, Cassandra's testing hook).

use bytes::{Bytes, BytesMut};
use types::Consistency;

use crate::error::ProtocolError;
use crate::request::Request;
use crate::wire::{self, Reader};

pub(super) const VALUES: u8 = 0x01;
pub(super) const SKIP_METADATA: u8 = 0x02;
const PAGE_SIZE: u8 = 0x04;
const PAGING_STATE: u8 = 0x08;
pub(super) const SERIAL_CONSISTENCY: u8 = 0x10;
const DEFAULT_TIMESTAMP: u8 = 0x20;
const NAMES_FOR_VALUES: u8 = 0x40;
/// v5: a keyspace follows the timestamp.
pub(super) const WITH_KEYSPACE: u32 = 0x80;
/// v5: now_in_seconds follows the keyspace.
pub(super) const WITH_NOW_IN_SECONDS: u32 = 0x100;

/// One bound value (`[value]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BoundValue {
    /// Length -1.
    Null,
    /// Length -2: leave the column as it is.
    Unset,
    /// The serialized value, a slice of the request body.
    Set(Bytes),
}

impl BoundValue {
    pub fn as_bytes(&self) -> Option<&Bytes> {
        match self {
            BoundValue::Set(b) => Some(b),
            _ => None,
        }
    }
}

/// The values bound to a statement's markers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BoundValues {
    Positional(Vec<BoundValue>),
    /// Each value with the name of its marker (flag 0x40), in wire order.
    Named(Vec<(String, BoundValue)>),
}

impl Default for BoundValues {
    fn default() -> BoundValues {
        BoundValues::Positional(Vec::new())
    }
}

impl BoundValues {
    pub fn len(&self) -> usize {
        match self {
            BoundValues::Positional(v) => v.len(),
            BoundValues::Named(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// `<query_parameters>` of QUERY and EXECUTE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueryParams {
    pub consistency: Consistency,
    pub values: BoundValues,
    /// The client already has the result metadata (answer with No_metadata).
    pub skip_metadata: bool,
    /// Requested page size in rows. Cassandra treats a non-positive size as
    /// "no paging".
    pub page_size: Option<i32>,
    /// Where to resume, from a previous Rows result. A null state is `None`.
    pub paging_state: Option<Bytes>,
    /// SERIAL or LOCAL_SERIAL for conditional updates (checked at execution).
    pub serial_consistency: Option<Consistency>,
    /// Default write timestamp in microseconds.
    pub default_timestamp: Option<i64>,
    /// v5: the keyspace to run the statement in (QUERY; flag 0x80).
    pub keyspace: Option<String>,
    /// v5: the request's "now", in seconds since the epoch (flag 0x100).
    pub now_in_seconds: Option<i32>,
}

impl QueryParams {
    /// Parameters with only a consistency level.
    pub fn new(consistency: Consistency) -> QueryParams {
        QueryParams {
            consistency,
            values: BoundValues::default(),
            skip_metadata: false,
            page_size: None,
            paging_state: None,
            serial_consistency: None,
            default_timestamp: None,
            keyspace: None,
            now_in_seconds: None,
        }
    }
}

pub(super) fn decode(r: &mut Reader, version: u8) -> Result<Request, ProtocolError> {
    let query = r.read_long_string()?;
    let params = decode_params(r, version)?;
    Ok(Request::Query { query, params })
}

pub(super) fn encode(out: &mut BytesMut, version: u8, query: &str, params: &QueryParams) {
    wire::write_long_string(out, query);
    encode_params(out, version, params);
}

/// Reads the flags: one byte before v5, an `[int]` from v5 on.
pub(super) fn read_flags(r: &mut Reader, version: u8) -> Result<u32, ProtocolError> {
    if version >= 5 {
        Ok(r.read_int()? as u32)
    } else {
        r.read_u8().map(u32::from)
    }
}

pub(super) fn write_flags(out: &mut BytesMut, version: u8, flags: u32) {
    if version >= 5 {
        wire::write_int(out, flags as i32);
    } else {
        // v4 has no flag above 0x40.
        wire::write_u8(out, flags as u8);
    }
}

/// Reads `<n>` values, each preceded by a `[string]` name when `named`.
pub(super) fn decode_values(r: &mut Reader, named: bool) -> Result<BoundValues, ProtocolError> {
    let n = r.read_short()? as usize;
    if named {
        let mut v = Vec::with_capacity(r.bounded_capacity(n, 6));
        for _ in 0..n {
            let name = r.read_string()?;
            v.push((name, r.read_value()?));
        }
        Ok(BoundValues::Named(v))
    } else {
        let mut v = Vec::with_capacity(r.bounded_capacity(n, 4));
        for _ in 0..n {
            v.push(r.read_value()?);
        }
        Ok(BoundValues::Positional(v))
    }
}

/// Writes `<n>` then the values (with names for [`BoundValues::Named`]).
pub(super) fn encode_values(out: &mut BytesMut, values: &BoundValues) {
    let n = u16::try_from(values.len()).expect("at most 65535 bound values");
    wire::write_short(out, n);
    match values {
        BoundValues::Positional(v) => v.iter().for_each(|v| wire::write_value(out, v)),
        BoundValues::Named(v) => v.iter().for_each(|(name, v)| {
            wire::write_string(out, name);
            wire::write_value(out, v);
        }),
    }
}

pub(super) fn read_timestamp(r: &mut Reader) -> Result<i64, ProtocolError> {
    let ts = r.read_long()?;
    if ts == i64::MIN {
        return Err(ProtocolError::TimestampOutOfBound(ts));
    }
    Ok(ts)
}

pub(crate) fn decode_params(r: &mut Reader, version: u8) -> Result<QueryParams, ProtocolError> {
    let consistency = r.read_consistency()?;
    let flags = read_flags(r, version)?;
    let has = |f: u8| flags & u32::from(f) != 0;
    let values = if has(VALUES) { decode_values(r, has(NAMES_FOR_VALUES))? } else { BoundValues::default() };
    let page_size = if has(PAGE_SIZE) { Some(r.read_int()?) } else { None };
    let paging_state = if has(PAGING_STATE) { r.read_bytes()? } else { None };
    let serial_consistency = if has(SERIAL_CONSISTENCY) { Some(r.read_consistency()?) } else { None };
    let default_timestamp = if has(DEFAULT_TIMESTAMP) { Some(read_timestamp(r)?) } else { None };
    let v5 = version >= 5;
    let keyspace = if v5 && flags & WITH_KEYSPACE != 0 { Some(r.read_string()?) } else { None };
    let now_in_seconds = if v5 && flags & WITH_NOW_IN_SECONDS != 0 { Some(r.read_int()?) } else { None };
    Ok(QueryParams {
        consistency,
        values,
        skip_metadata: has(SKIP_METADATA),
        page_size,
        paging_state,
        serial_consistency,
        default_timestamp,
        keyspace,
        now_in_seconds,
    })
}

/// Writes `<query_parameters>`; the keyspace and now_in_seconds only in v5.
pub(crate) fn encode_params(out: &mut BytesMut, version: u8, p: &QueryParams) {
    let mut flags = 0u8;
    match &p.values {
        BoundValues::Positional(v) if v.is_empty() => {}
        BoundValues::Positional(_) => flags |= VALUES,
        BoundValues::Named(_) => flags |= VALUES | NAMES_FOR_VALUES,
    }
    if p.skip_metadata {
        flags |= SKIP_METADATA;
    }
    if p.page_size.is_some() {
        flags |= PAGE_SIZE;
    }
    if p.paging_state.is_some() {
        flags |= PAGING_STATE;
    }
    if p.serial_consistency.is_some() {
        flags |= SERIAL_CONSISTENCY;
    }
    if p.default_timestamp.is_some() {
        flags |= DEFAULT_TIMESTAMP;
    }
    let mut wide = u32::from(flags);
    if version >= 5 {
        if p.keyspace.is_some() {
            wide |= WITH_KEYSPACE;
        }
        if p.now_in_seconds.is_some() {
            wide |= WITH_NOW_IN_SECONDS;
        }
    }
    wire::write_consistency(out, p.consistency);
    write_flags(out, version, wide);
    if flags & VALUES != 0 {
        encode_values(out, &p.values);
    }
    if let Some(n) = p.page_size {
        wire::write_int(out, n);
    }
    if let Some(s) = &p.paging_state {
        wire::write_bytes(out, Some(s));
    }
    if let Some(c) = p.serial_consistency {
        wire::write_consistency(out, c);
    }
    if let Some(ts) = p.default_timestamp {
        wire::write_long(out, ts);
    }
    if wide & WITH_KEYSPACE != 0 {
        wire::write_string(out, p.keyspace.as_deref().unwrap_or_default());
    }
    if let Some(now) = p.now_in_seconds.filter(|_| wide & WITH_NOW_IN_SECONDS != 0) {
        wire::write_int(out, now);
    }
}
