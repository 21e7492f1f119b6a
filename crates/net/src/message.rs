//! Payload codecs: what travels inside a frame for each verb. Hand-encoded,
//! big-endian, no serde. Sans-IO.
//!
//! Invariants:
//! - `decode(encode(x)) == x` for every value (mutations, failures, reads,
//!   handshakes), checked on seeded random mutations.
//! - Decoding never panics on any input and never allocates more than the input
//!   could describe: every count is clamped by the bytes left before anything
//!   is reserved. Trailing bytes after a message are an error.
//! - Decoded byte strings (keys, values, paths) share the payload's memory.
//!
//! Encodings (`FORMAT.md` has the same grammar):
//!
//! ```text
//! blob        := len:u32 bytes[len]
//! deletion    := timestamp:i64 local_deletion_time:i32
//! liveness    := timestamp:i64 ttl:i32 local_expiration:i32
//! bound       := inclusive:u8(0|1) count:u16 blob[count]
//! mutation    := table:uuid[16] token:i64 partition_key:blob flags:u8 (bit0: deletion follows)
//!                [deletion] rt_count:u32 (bound bound deletion)[rt_count] row_count:u32 row[row_count]
//! row         := flags:u8 (bit0 static, bit1 marker, bit2 deletion) clustering_count:u16 blob[..]
//!                [liveness] [deletion] complex_count:u32 (column:u16 deletion)[..] cell_count:u32 cell[..]
//! cell        := column:u16 flags:u8 (bit0 path, bit1 value) [path:blob] timestamp:i64 ttl:i32
//!                local_deletion_time:i32 [value:blob]
//! MutationReq := count:u32 mutation[count]          MutationRsp := (empty)
//! ReadReq     := table:uuid[16] token:i64 partition_key:blob command:blob
//! ReadRsp     := body:blob
//! Failure     := code:u16 message_len:u16 utf8[message_len]
//! Handshake   := family:u8(4|6) ip[4|16] port:u16
//! ```

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use bytes::{BufMut, Bytes, BytesMut};
use types::mutation::{CellWrite, ClusteringBound, DeletionTime, Liveness, Mutation, RangeTombstone, RowWrite};
use uuid::Uuid;

use crate::frame::Verb;

/// Mutations one `MutationReq` may carry. Why: a request is one partition's
/// writes per table (an unlogged batch to one replica at most), so this is
/// generous; it bounds the work one frame can ask for.
pub const MUTATIONS_PER_MESSAGE_MAX: usize = 4096;
/// Failure messages are cut to this many bytes: they are for humans and logs.
pub const FAILURE_MESSAGE_BYTES_MAX: usize = 4096;

const MUTATION_HAS_DELETION: u8 = 0b1;
const ROW_STATIC: u8 = 0b001;
const ROW_MARKER: u8 = 0b010;
const ROW_DELETION: u8 = 0b100;
const CELL_PATH: u8 = 0b01;
const CELL_VALUE: u8 = 0b10;

// Smallest encodings, used to clamp counts before reserving memory.
const MIN_BLOB: usize = 4;
const MIN_DELETION: usize = 12;
const MIN_BOUND: usize = 3;
const MIN_RANGE_TOMBSTONE: usize = 2 * MIN_BOUND + MIN_DELETION;
const MIN_ROW: usize = 1 + 2 + 4 + 4;
const MIN_COMPLEX_DELETION: usize = 2 + MIN_DELETION;
const MIN_CELL: usize = 2 + 1 + 8 + 4 + 4;
const MIN_MUTATION: usize = 16 + 8 + MIN_BLOB + 1 + 4 + 4;

/// Why a payload could not be decoded. The peer sent something this node
/// cannot interpret; the request gets a `Failure(MalformedPayload)`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    #[error("internode payload truncated while reading {what}")]
    Truncated { what: &'static str },
    #[error("invalid {what} in internode payload: {detail}")]
    Invalid { what: &'static str, detail: String },
    #[error("{count} trailing bytes after the internode message")]
    TrailingBytes { count: usize },
}

/// Why a remote node failed a request (the `Failure` verb's code).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FailureCode {
    /// Anything without a more precise code.
    Unknown,
    /// The responder does not know the request's verb (a newer sender).
    UnknownVerb,
    /// The payload could not be decoded.
    MalformedPayload,
    /// The responder's queues are full; retry elsewhere or later.
    Overloaded,
    /// Storage refused the operation (for example after an fsync failure).
    Storage,
    /// The responder gave up on its own deadline.
    Timeout,
    /// The responder does not serve this verb (no handler registered).
    Unsupported,
    /// A code this build does not know (a newer responder).
    Other(u16),
}

impl FailureCode {
    pub fn to_u16(self) -> u16 {
        match self {
            FailureCode::Unknown => 0,
            FailureCode::UnknownVerb => 1,
            FailureCode::MalformedPayload => 2,
            FailureCode::Overloaded => 3,
            FailureCode::Storage => 4,
            FailureCode::Timeout => 5,
            FailureCode::Unsupported => 6,
            FailureCode::Other(code) => code,
        }
    }

    pub fn from_u16(code: u16) -> FailureCode {
        match code {
            0 => FailureCode::Unknown,
            1 => FailureCode::UnknownVerb,
            2 => FailureCode::MalformedPayload,
            3 => FailureCode::Overloaded,
            4 => FailureCode::Storage,
            5 => FailureCode::Timeout,
            6 => FailureCode::Unsupported,
            other => FailureCode::Other(other),
        }
    }
}

/// The payload of a `Failure` response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub code: FailureCode,
    pub message: String,
}

impl Failure {
    pub fn new(code: FailureCode, message: impl Into<String>) -> Failure {
        Failure { code, message: message.into() }
    }

    /// Encodes, cutting the message to [`FAILURE_MESSAGE_BYTES_MAX`] bytes at a
    /// character boundary.
    pub fn encode(&self) -> Bytes {
        let mut cut = self.message.len().min(FAILURE_MESSAGE_BYTES_MAX);
        while !self.message.is_char_boundary(cut) {
            cut -= 1;
        }
        let message = self.message.get(..cut).unwrap_or_default();
        let mut buf = BytesMut::with_capacity(4 + message.len());
        buf.put_u16(self.code.to_u16());
        buf.put_u16(message.len() as u16);
        buf.put_slice(message.as_bytes());
        buf.freeze()
    }

    pub fn decode(payload: &Bytes) -> Result<Failure, DecodeError> {
        let mut r = Reader::new(payload);
        let code = FailureCode::from_u16(r.u16("failure code")?);
        let len = r.u16("failure message length")? as usize;
        let bytes = r.take(len, "failure message")?;
        let message = String::from_utf8_lossy(&bytes).into_owned();
        r.finish()?;
        Ok(Failure { code, message })
    }
}

/// A read of one partition: routing fields plus an opaque command that the
/// coordinator and replica agree on (the slice filter; to be specified).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadRequest {
    pub table: Uuid,
    pub token: i64,
    pub partition_key: Bytes,
    pub command: Bytes,
}

impl ReadRequest {
    pub fn encode(&self) -> Bytes {
        let mut buf = BytesMut::with_capacity(16 + 8 + 8 + self.partition_key.len() + self.command.len());
        buf.put_slice(self.table.as_bytes());
        buf.put_i64(self.token);
        put_blob(&mut buf, &self.partition_key);
        put_blob(&mut buf, &self.command);
        buf.freeze()
    }

    pub fn decode(payload: &Bytes) -> Result<ReadRequest, DecodeError> {
        let mut r = Reader::new(payload);
        let table = r.uuid("table id")?;
        let token = r.i64("token")?;
        let partition_key = r.blob("partition key")?;
        let command = r.blob("read command")?;
        r.finish()?;
        Ok(ReadRequest { table, token, partition_key, command })
    }
}

/// A request in a trace session (`Verb::TracedReq`): the session id, then
/// the inner request's verb code and its payload, as they would travel alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Traced {
    pub session: Uuid,
    /// A request verb with a response verb of its own (never `TracedReq`).
    pub verb: Verb,
    pub payload: Bytes,
}

impl Traced {
    pub fn encode(&self) -> Bytes {
        let mut buf = BytesMut::with_capacity(16 + 1 + self.payload.len());
        buf.put_slice(self.session.as_bytes());
        buf.put_u8(self.verb.code());
        buf.put_slice(&self.payload);
        buf.freeze()
    }

    pub fn decode(payload: &Bytes) -> Result<Traced, DecodeError> {
        let mut r = Reader::new(payload);
        let session = r.uuid("trace session")?;
        let (verb, payload) = read_inner_request(r, "traced verb", "traced payload")?;
        Ok(Traced { session, verb, payload })
    }
}

/// A request that expires (`Verb::ExpiringReq`): when its sender made it
/// (wall clock, microseconds since the epoch) and how long the sender waits
/// for its answer, then the inner request's verb code and its payload, as
/// they would travel alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expiring {
    pub created_at_us: i64,
    pub timeout_ms: u32,
    /// A request verb with a response verb of its own (never `TracedReq`
    /// or `ExpiringReq`).
    pub verb: Verb,
    pub payload: Bytes,
}

impl Expiring {
    /// Bytes before the inner payload.
    pub const HEADER_LEN: usize = 8 + 4 + 1;

    pub fn encode(&self) -> Bytes {
        let mut buf = BytesMut::with_capacity(Self::HEADER_LEN + self.payload.len());
        buf.put_i64(self.created_at_us);
        buf.put_u32(self.timeout_ms);
        buf.put_u8(self.verb.code());
        buf.put_slice(&self.payload);
        buf.freeze()
    }

    pub fn decode(payload: &Bytes) -> Result<Expiring, DecodeError> {
        let mut r = Reader::new(payload);
        let created_at_us = r.i64("creation time")?;
        let timeout_ms = r.u32("timeout")?;
        let (verb, payload) = read_inner_request(r, "expiring verb", "expiring payload")?;
        Ok(Expiring { created_at_us, timeout_ms, verb, payload })
    }
}

/// The rest of a wrapper's payload (`Traced`, `Expiring`): the inner
/// request's verb, one with a response verb of its own (so never a wrapper),
/// then its payload to the end of the frame.
fn read_inner_request(
    mut r: Reader<'_>,
    verb_what: &'static str,
    payload_what: &'static str,
) -> Result<(Verb, Bytes), DecodeError> {
    let code = r.u8(verb_what)?;
    let verb = Verb::from_code(code)
        .filter(|v| v.response().is_some())
        .ok_or_else(|| DecodeError::Invalid { what: verb_what, detail: format!("{code:#04x}") })?;
    let rest = r.remaining();
    let payload = r.take(rest, payload_what)?;
    r.finish()?;
    Ok((verb, payload))
}

/// The answer to a `ReadReq` (data) or `DigestReq` (digest): opaque for now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadResponse {
    pub body: Bytes,
}

impl ReadResponse {
    pub fn encode(&self) -> Bytes {
        let mut buf = BytesMut::with_capacity(4 + self.body.len());
        put_blob(&mut buf, &self.body);
        buf.freeze()
    }

    pub fn decode(payload: &Bytes) -> Result<ReadResponse, DecodeError> {
        let mut r = Reader::new(payload);
        let body = r.blob("read response")?;
        r.finish()?;
        Ok(ReadResponse { body })
    }
}

/// The acknowledgement of a `MutationReq`: the replica applied every mutation
/// (commit log + memtable). Empty on the wire; a failed apply answers
/// `Failure` instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct MutationAck;

impl MutationAck {
    pub fn encode(&self) -> Bytes {
        Bytes::new()
    }

    pub fn decode(payload: &Bytes) -> Result<MutationAck, DecodeError> {
        Reader::new(payload).finish()?;
        Ok(MutationAck)
    }
}

/// Encodes the handshake payload: the sender's listen address, which the
/// receiver reports as the `from` of every message on that connection.
pub fn encode_handshake(listen: SocketAddr) -> Bytes {
    let mut buf = BytesMut::with_capacity(19);
    match listen.ip() {
        IpAddr::V4(ip) => {
            buf.put_u8(4);
            buf.put_slice(&ip.octets());
        }
        IpAddr::V6(ip) => {
            buf.put_u8(6);
            buf.put_slice(&ip.octets());
        }
    }
    buf.put_u16(listen.port());
    buf.freeze()
}

pub fn decode_handshake(payload: &Bytes) -> Result<SocketAddr, DecodeError> {
    let mut r = Reader::new(payload);
    let ip = match r.u8("address family")? {
        4 => {
            let b = r.take(4, "IPv4 address")?;
            IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(&b[..]).map_err(|_| truncated("IPv4 address"))?))
        }
        6 => {
            let b = r.take(16, "IPv6 address")?;
            IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(&b[..]).map_err(|_| truncated("IPv6 address"))?))
        }
        other => return Err(invalid("address family", format!("{other}, expected 4 or 6"))),
    };
    let port = r.u16("port")?;
    r.finish()?;
    Ok(SocketAddr::new(ip, port))
}

/// Encodes a `MutationReq` payload.
///
/// Panics if there are more than [`MUTATIONS_PER_MESSAGE_MAX`] mutations or a
/// collection exceeds its wire width (65 535 clustering values, 2^32 bytes):
/// callers build requests within those limits.
/// Takes a slice (`&[Mutation]`) or borrowed mutations
/// (`refs.iter().copied()`), so a caller never clones mutations to send them.
pub fn encode_mutations<'a, I>(mutations: I) -> Bytes
where
    I: IntoIterator<Item = &'a Mutation>,
    I::IntoIter: ExactSizeIterator + Clone,
{
    let mutations = mutations.into_iter();
    assert!(mutations.len() <= MUTATIONS_PER_MESSAGE_MAX, "{} mutations in one message", mutations.len());
    let mut buf = BytesMut::with_capacity(mutations.clone().map(encoded_len_hint).sum::<usize>() + 4);
    buf.put_u32(mutations.len() as u32);
    for m in mutations {
        put_mutation(&mut buf, m);
    }
    buf.freeze()
}

/// Decodes a `MutationReq` payload.
pub fn decode_mutations(payload: &Bytes) -> Result<Vec<Mutation>, DecodeError> {
    let mut r = Reader::new(payload);
    let count = r.u32("mutation count")? as usize;
    if count > MUTATIONS_PER_MESSAGE_MAX {
        return Err(invalid("mutation count", format!("{count} exceeds {MUTATIONS_PER_MESSAGE_MAX}")));
    }
    let mut out = Vec::with_capacity(r.clamp(count, MIN_MUTATION));
    for _ in 0..count {
        out.push(read_mutation(&mut r)?);
    }
    r.finish()?;
    Ok(out)
}

/// Encodes one mutation alone (hints, tests).
pub fn encode_mutation(mutation: &Mutation) -> Bytes {
    let mut buf = BytesMut::with_capacity(encoded_len_hint(mutation));
    put_mutation(&mut buf, mutation);
    buf.freeze()
}

pub fn decode_mutation(payload: &Bytes) -> Result<Mutation, DecodeError> {
    let mut r = Reader::new(payload);
    let m = read_mutation(&mut r)?;
    r.finish()?;
    Ok(m)
}

fn encoded_len_hint(m: &Mutation) -> usize {
    let cells: usize =
        m.rows.iter().flat_map(|r| r.cells.iter()).map(|c| MIN_CELL + 8 + c.value.as_ref().map_or(0, Bytes::len)).sum();
    MIN_MUTATION + m.partition_key.len() + m.rows.len() * (MIN_ROW + 32) + cells + m.range_tombstones.len() * 64
}

fn put_blob(buf: &mut BytesMut, b: &[u8]) {
    let len = u32::try_from(b.len()).expect("internode blob over 4 GiB");
    buf.put_u32(len);
    buf.put_slice(b);
}

fn put_deletion(buf: &mut BytesMut, d: &DeletionTime) {
    buf.put_i64(d.timestamp);
    buf.put_i32(d.local_deletion_time);
}

fn put_values(buf: &mut BytesMut, values: &[Bytes]) {
    let count = u16::try_from(values.len()).expect("more than 65535 clustering values");
    buf.put_u16(count);
    for v in values {
        put_blob(buf, v);
    }
}

fn put_bound(buf: &mut BytesMut, b: &ClusteringBound) {
    buf.put_u8(u8::from(b.inclusive));
    put_values(buf, &b.prefix);
}

fn put_mutation(buf: &mut BytesMut, m: &Mutation) {
    buf.put_slice(m.table.as_bytes());
    buf.put_i64(m.token);
    put_blob(buf, &m.partition_key);
    match &m.partition_deletion {
        Some(d) => {
            buf.put_u8(MUTATION_HAS_DELETION);
            put_deletion(buf, d);
        }
        None => buf.put_u8(0),
    }
    buf.put_u32(u32::try_from(m.range_tombstones.len()).expect("range tombstone count"));
    for rt in &m.range_tombstones {
        put_bound(buf, &rt.start);
        put_bound(buf, &rt.end);
        put_deletion(buf, &rt.deletion);
    }
    buf.put_u32(u32::try_from(m.rows.len()).expect("row count"));
    for row in &m.rows {
        let mut flags = 0;
        if row.is_static {
            flags |= ROW_STATIC;
        }
        if row.marker.is_some() {
            flags |= ROW_MARKER;
        }
        if row.deletion.is_some() {
            flags |= ROW_DELETION;
        }
        buf.put_u8(flags);
        put_values(buf, &row.clustering);
        if let Some(l) = &row.marker {
            buf.put_i64(l.timestamp);
            buf.put_i32(l.ttl);
            buf.put_i32(l.local_expiration);
        }
        if let Some(d) = &row.deletion {
            put_deletion(buf, d);
        }
        buf.put_u32(u32::try_from(row.complex_deletions.len()).expect("complex deletion count"));
        for (column, d) in &row.complex_deletions {
            buf.put_u16(*column);
            put_deletion(buf, d);
        }
        buf.put_u32(u32::try_from(row.cells.len()).expect("cell count"));
        for cell in &row.cells {
            let mut flags = 0;
            if cell.path.is_some() {
                flags |= CELL_PATH;
            }
            if cell.value.is_some() {
                flags |= CELL_VALUE;
            }
            buf.put_u16(cell.column);
            buf.put_u8(flags);
            if let Some(p) = &cell.path {
                put_blob(buf, p);
            }
            buf.put_i64(cell.timestamp);
            buf.put_i32(cell.ttl);
            buf.put_i32(cell.local_deletion_time);
            if let Some(v) = &cell.value {
                put_blob(buf, v);
            }
        }
    }
}

fn read_deletion(r: &mut Reader<'_>) -> Result<DeletionTime, DecodeError> {
    Ok(DeletionTime { timestamp: r.i64("deletion timestamp")?, local_deletion_time: r.i32("local deletion time")? })
}

fn read_values(r: &mut Reader<'_>, what: &'static str) -> Result<Vec<Bytes>, DecodeError> {
    let count = r.u16(what)? as usize;
    let mut out = Vec::with_capacity(r.clamp(count, MIN_BLOB));
    for _ in 0..count {
        out.push(r.blob(what)?);
    }
    Ok(out)
}

fn read_bound(r: &mut Reader<'_>) -> Result<ClusteringBound, DecodeError> {
    let inclusive = match r.u8("bound inclusivity")? {
        0 => false,
        1 => true,
        other => return Err(invalid("bound inclusivity", format!("{other}, expected 0 or 1"))),
    };
    let prefix = read_values(r, "bound prefix")?;
    Ok(ClusteringBound { prefix, inclusive })
}

fn read_mutation(r: &mut Reader<'_>) -> Result<Mutation, DecodeError> {
    let table = r.uuid("table id")?;
    let token = r.i64("token")?;
    let partition_key = r.blob("partition key")?;
    let flags = r.u8("mutation flags")?;
    if flags & !MUTATION_HAS_DELETION != 0 {
        return Err(invalid("mutation flags", format!("{flags:#04x}")));
    }
    let partition_deletion = if flags & MUTATION_HAS_DELETION != 0 { Some(read_deletion(r)?) } else { None };
    let rt_count = r.u32("range tombstone count")? as usize;
    let mut range_tombstones = Vec::with_capacity(r.clamp(rt_count, MIN_RANGE_TOMBSTONE));
    for _ in 0..rt_count {
        let start = read_bound(r)?;
        let end = read_bound(r)?;
        let deletion = read_deletion(r)?;
        range_tombstones.push(RangeTombstone { start, end, deletion });
    }
    let row_count = r.u32("row count")? as usize;
    let mut rows = Vec::with_capacity(r.clamp(row_count, MIN_ROW));
    for _ in 0..row_count {
        rows.push(read_row(r)?);
    }
    Ok(Mutation { table, token, partition_key, partition_deletion, range_tombstones, rows })
}

fn read_row(r: &mut Reader<'_>) -> Result<RowWrite, DecodeError> {
    let flags = r.u8("row flags")?;
    if flags & !(ROW_STATIC | ROW_MARKER | ROW_DELETION) != 0 {
        return Err(invalid("row flags", format!("{flags:#04x}")));
    }
    let clustering = read_values(r, "clustering")?;
    let marker = if flags & ROW_MARKER != 0 {
        Some(Liveness {
            timestamp: r.i64("row marker timestamp")?,
            ttl: r.i32("row marker ttl")?,
            local_expiration: r.i32("row marker expiration")?,
        })
    } else {
        None
    };
    let deletion = if flags & ROW_DELETION != 0 { Some(read_deletion(r)?) } else { None };
    let complex_count = r.u32("complex deletion count")? as usize;
    let mut complex_deletions = Vec::with_capacity(r.clamp(complex_count, MIN_COMPLEX_DELETION));
    for _ in 0..complex_count {
        let column = r.u16("complex deletion column")?;
        complex_deletions.push((column, read_deletion(r)?));
    }
    let cell_count = r.u32("cell count")? as usize;
    let mut cells = Vec::with_capacity(r.clamp(cell_count, MIN_CELL));
    for _ in 0..cell_count {
        let column = r.u16("cell column")?;
        let cell_flags = r.u8("cell flags")?;
        if cell_flags & !(CELL_PATH | CELL_VALUE) != 0 {
            return Err(invalid("cell flags", format!("{cell_flags:#04x}")));
        }
        let path = if cell_flags & CELL_PATH != 0 { Some(r.blob("cell path")?) } else { None };
        let timestamp = r.i64("cell timestamp")?;
        let ttl = r.i32("cell ttl")?;
        let local_deletion_time = r.i32("cell local deletion time")?;
        let value = if cell_flags & CELL_VALUE != 0 { Some(r.blob("cell value")?) } else { None };
        cells.push(CellWrite { column, path, timestamp, ttl, local_deletion_time, value });
    }
    Ok(RowWrite { clustering, is_static: flags & ROW_STATIC != 0, marker, deletion, complex_deletions, cells })
}

fn truncated(what: &'static str) -> DecodeError {
    DecodeError::Truncated { what }
}

fn invalid(what: &'static str, detail: String) -> DecodeError {
    DecodeError::Invalid { what, detail }
}

/// A bounds-checked cursor over a payload; every read fails cleanly when the
/// payload is too short.
struct Reader<'a> {
    payload: &'a Bytes,
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(payload: &'a Bytes) -> Reader<'a> {
        Reader { payload, pos: 0 }
    }

    fn remaining(&self) -> usize {
        self.payload.len() - self.pos
    }

    /// The capacity to reserve for `count` elements of at least `min_size`
    /// bytes each: never more than the rest of the payload could hold.
    fn clamp(&self, count: usize, min_size: usize) -> usize {
        count.min(self.remaining() / min_size.max(1))
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], DecodeError> {
        let end = self.pos.checked_add(N).ok_or(truncated(what))?;
        let slice = self.payload.get(self.pos..end).ok_or(truncated(what))?;
        let mut out = [0u8; N];
        out.copy_from_slice(slice);
        self.pos = end;
        Ok(out)
    }

    fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        Ok(u8::from_be_bytes(self.array(what)?))
    }

    fn u16(&mut self, what: &'static str) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array(what)?))
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array(what)?))
    }

    fn i32(&mut self, what: &'static str) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(self.array(what)?))
    }

    fn i64(&mut self, what: &'static str) -> Result<i64, DecodeError> {
        Ok(i64::from_be_bytes(self.array(what)?))
    }

    fn uuid(&mut self, what: &'static str) -> Result<Uuid, DecodeError> {
        Ok(Uuid::from_bytes(self.array(what)?))
    }

    fn take(&mut self, len: usize, what: &'static str) -> Result<Bytes, DecodeError> {
        if len > self.remaining() {
            return Err(truncated(what));
        }
        let out = self.payload.slice(self.pos..self.pos + len);
        self.pos += len;
        Ok(out)
    }

    fn blob(&mut self, what: &'static str) -> Result<Bytes, DecodeError> {
        let len = self.u32(what)? as usize;
        self.take(len, what)
    }

    fn finish(self) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            count => Err(DecodeError::TrailingBytes { count }),
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;

    fn blob(rng: &mut StdRng, max: usize) -> Bytes {
        Bytes::from((0..rng.gen_range(0..=max)).map(|_| rng.gen::<u8>()).collect::<Vec<u8>>())
    }

    fn deletion(rng: &mut StdRng) -> DeletionTime {
        DeletionTime { timestamp: rng.gen(), local_deletion_time: rng.gen() }
    }

    fn values(rng: &mut StdRng) -> Vec<Bytes> {
        (0..rng.gen_range(0..4)).map(|_| blob(rng, 12)).collect()
    }

    fn random_mutation(rng: &mut StdRng) -> Mutation {
        let mut m = Mutation::new(Uuid::from_bytes(rng.gen()), rng.gen(), blob(rng, 20));
        if rng.gen_bool(0.2) {
            m.partition_deletion = Some(deletion(rng));
        }
        for _ in 0..rng.gen_range(0..3) {
            m.range_tombstones.push(RangeTombstone {
                start: ClusteringBound { prefix: values(rng), inclusive: rng.gen() },
                end: ClusteringBound { prefix: values(rng), inclusive: rng.gen() },
                deletion: deletion(rng),
            });
        }
        for _ in 0..rng.gen_range(0..5) {
            let mut row = RowWrite {
                clustering: values(rng),
                is_static: rng.gen_bool(0.2),
                marker: rng.gen_bool(0.5).then(|| Liveness {
                    timestamp: rng.gen(),
                    ttl: rng.gen(),
                    local_expiration: rng.gen(),
                }),
                deletion: rng.gen_bool(0.2).then(|| deletion(rng)),
                complex_deletions: Vec::new(),
                cells: Vec::new(),
            };
            for _ in 0..rng.gen_range(0..3) {
                row.complex_deletions.push((rng.gen(), deletion(rng)));
            }
            for _ in 0..rng.gen_range(0..6) {
                row.cells.push(CellWrite {
                    column: rng.gen(),
                    path: rng.gen_bool(0.3).then(|| blob(rng, 16)),
                    timestamp: rng.gen(),
                    ttl: rng.gen(),
                    local_deletion_time: rng.gen(),
                    value: rng.gen_bool(0.8).then(|| blob(rng, 40)),
                });
            }
            m.rows.push(row);
        }
        m
    }

    #[test]
    fn traced_requests_round_trip_and_refuse_bad_inner_verbs() {
        let inner = ReadRequest {
            table: Uuid::from_u128(7),
            token: -3,
            partition_key: Bytes::from_static(b"k"),
            command: Bytes::from_static(b"cmd"),
        };
        let traced = Traced { session: Uuid::from_u128(0xABCD), verb: Verb::ReadReq, payload: inner.encode() };
        let bytes = traced.encode();
        assert_eq!(bytes.len(), 16 + 1 + inner.encode().len());
        let back = Traced::decode(&bytes).unwrap();
        assert_eq!(back, traced);
        assert_eq!(ReadRequest::decode(&back.payload).unwrap(), inner);
        // An empty inner payload is fine (Echo, SchemaPull).
        let empty = Traced { session: Uuid::nil(), verb: Verb::Echo, payload: Bytes::new() };
        assert_eq!(Traced::decode(&empty.encode()).unwrap(), empty);
        // Responses, the handshake, TracedReq itself and unknown codes are refused.
        for code in [Verb::ReadRsp.code(), Verb::Handshake.code(), Verb::TracedReq.code(), 0xEE] {
            let mut raw = BytesMut::new();
            raw.put_slice(Uuid::nil().as_bytes());
            raw.put_u8(code);
            assert!(matches!(Traced::decode(&raw.freeze()), Err(DecodeError::Invalid { .. })), "{code:#x}");
        }
        for cut in 0..17 {
            assert!(matches!(Traced::decode(&bytes.slice(..cut)), Err(DecodeError::Truncated { .. })), "{cut}");
        }
    }

    #[test]
    fn expiring_requests_round_trip_and_refuse_wrappers_and_responses() {
        let inner = encode_mutations(&[]);
        let e = Expiring {
            created_at_us: 1_764_300_000_000_000,
            timeout_ms: 2000,
            verb: Verb::MutationReq,
            payload: inner,
        };
        let bytes = e.encode();
        assert_eq!(bytes.len(), Expiring::HEADER_LEN + 4);
        assert_eq!(Expiring::decode(&bytes).unwrap(), e);
        for code in [Verb::MutationRsp.code(), Verb::TracedReq.code(), Verb::ExpiringReq.code(), 0xEE] {
            let mut raw = BytesMut::new();
            raw.put_i64(1);
            raw.put_u32(1);
            raw.put_u8(code);
            assert!(matches!(Expiring::decode(&raw.freeze()), Err(DecodeError::Invalid { .. })), "{code:#x}");
        }
        for cut in 0..Expiring::HEADER_LEN {
            assert!(matches!(Expiring::decode(&bytes.slice(..cut)), Err(DecodeError::Truncated { .. })), "{cut}");
        }
    }

    #[test]
    fn random_mutations_round_trip() {
        let mut rng = StdRng::seed_from_u64(0x00C0_FFEE);
        for _ in 0..2_000 {
            let batch: Vec<Mutation> = (0..rng.gen_range(0..4)).map(|_| random_mutation(&mut rng)).collect();
            let bytes = encode_mutations(&batch);
            assert_eq!(decode_mutations(&bytes).unwrap(), batch);
            for m in &batch {
                assert_eq!(decode_mutation(&encode_mutation(m)).unwrap(), *m);
            }
        }
    }

    #[test]
    fn a_standard1_write_is_compact() {
        // cassandra-stress's row: 10-byte key, five 34-byte cells.
        let mut m = Mutation::new(Uuid::nil(), 42, Bytes::from_static(&[7u8; 10]));
        let mut row =
            RowWrite { marker: Some(Liveness { timestamp: 1, ttl: 0, local_expiration: 0 }), ..RowWrite::default() };
        for column in 1..=5 {
            row.cells.push(CellWrite {
                column,
                path: None,
                timestamp: 1,
                ttl: 0,
                local_deletion_time: 0,
                value: Some(Bytes::from_static(&[1u8; 34])),
            });
        }
        m.rows.push(row);
        let bytes = encode_mutations(std::slice::from_ref(&m));
        assert_eq!(bytes.len(), 4 + 16 + 8 + 14 + 1 + 4 + 4 + (1 + 2 + 16 + 4 + 4) + 5 * (19 + 38));
        assert_eq!(decode_mutations(&bytes).unwrap(), vec![m]);
    }

    #[test]
    fn every_truncation_of_a_mutation_is_an_error() {
        let mut rng = StdRng::seed_from_u64(7);
        for _ in 0..50 {
            let batch = vec![random_mutation(&mut rng), random_mutation(&mut rng)];
            let bytes = encode_mutations(&batch);
            for cut in 0..bytes.len() {
                assert!(decode_mutations(&bytes.slice(..cut)).is_err(), "cut at {cut}");
            }
            let mut longer = BytesMut::from(&bytes[..]);
            longer.put_u8(0);
            assert_eq!(decode_mutations(&longer.freeze()), Err(DecodeError::TrailingBytes { count: 1 }));
        }
    }

    /// Garbage, and valid messages with flipped bytes, never panic and never
    /// make the decoder reserve more than the input could describe.
    #[test]
    fn random_garbage_never_panics() {
        let mut rng = StdRng::seed_from_u64(0xBAD_5EED);
        let valid: Vec<Bytes> = (0..20).map(|_| encode_mutations(&[random_mutation(&mut rng)])).collect();
        for round in 0..20_000 {
            let bytes = if round % 2 == 0 {
                blob(&mut rng, 96)
            } else {
                let mut v = valid[rng.gen_range(0..valid.len())].to_vec();
                for _ in 0..rng.gen_range(1..4) {
                    let i = rng.gen_range(0..v.len());
                    v[i] = rng.gen();
                }
                Bytes::from(v)
            };
            let _ = decode_mutations(&bytes);
            let _ = decode_mutation(&bytes);
            let _ = ReadRequest::decode(&bytes);
            let _ = ReadResponse::decode(&bytes);
            let _ = Failure::decode(&bytes);
            let _ = decode_handshake(&bytes);
            let _ = MutationAck::decode(&bytes);
        }
        // Huge counts with no bytes behind them fail without reserving memory.
        let mut huge = BytesMut::new();
        huge.put_u32(u32::MAX);
        assert!(decode_mutations(&huge.freeze()).is_err());
    }

    #[test]
    fn small_messages_round_trip() {
        let read = ReadRequest {
            table: Uuid::from_u128(0x1234),
            token: i64::MIN + 1,
            partition_key: Bytes::from_static(b"key"),
            command: Bytes::from_static(b"slice"),
        };
        assert_eq!(ReadRequest::decode(&read.encode()).unwrap(), read);
        let rsp = ReadResponse { body: Bytes::from_static(b"rows") };
        assert_eq!(ReadResponse::decode(&rsp.encode()).unwrap(), rsp);
        assert_eq!(MutationAck::decode(&MutationAck.encode()), Ok(MutationAck));
        for code in [FailureCode::Unknown, FailureCode::Overloaded, FailureCode::Storage, FailureCode::Other(999)] {
            let f = Failure::new(code, "commit log failed: disk full");
            assert_eq!(Failure::decode(&f.encode()).unwrap(), f);
        }
        for addr in ["127.0.0.3:7000", "[::1]:7001", "[fe80::1:2:3]:65535"] {
            let addr: SocketAddr = addr.parse().unwrap();
            assert_eq!(decode_handshake(&encode_handshake(addr)).unwrap(), addr);
        }
    }

    #[test]
    fn long_failure_messages_are_cut_at_a_char_boundary() {
        let message = "é".repeat(FAILURE_MESSAGE_BYTES_MAX);
        let decoded = Failure::decode(&Failure::new(FailureCode::Unknown, message).encode()).unwrap();
        assert!(decoded.message.len() <= FAILURE_MESSAGE_BYTES_MAX);
        assert!(decoded.message.chars().all(|c| c == 'é'));
        assert_eq!(decoded.message.len(), FAILURE_MESSAGE_BYTES_MAX);
    }
}
