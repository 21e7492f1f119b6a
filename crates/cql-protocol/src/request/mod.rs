//! Requests (spec 4.1): the server decodes them, the test client encodes them.
//!
//! A request body is, in order: the custom payload (`[bytes map]`) when flag
//! 0x04 is set, then the message. The tracing flag adds nothing to a request
//! body, and the warning flag is ignored on requests (as Cassandra does). The
//! whole body is decompressed first when flag 0x01 is set. Bytes after the
//! message are ignored, as the spec allows.
//!
//! Decoding is zero-copy for values: everything typed `Bytes` in a [`Request`]
//! is a slice of the body handed to [`decode_request`].
//!
//! A v5 envelope has the same header and order; QUERY, PREPARE, EXECUTE and
//! BATCH bodies follow the header's version (their v5 fields are in
//! `query.rs`, `prepare.rs`, `execute.rs`, `batch.rs`), and a v5 envelope is
//! never compressed itself (its segments are: [`crate::segment`]); its
//! compression flag is ignored, as Cassandra 5.0.9 ignores it.

mod auth_response;
mod batch;
mod execute;
mod options;
mod prepare;
mod query;
mod register;
mod startup;

use bytes::{Bytes, BytesMut};

pub use batch::{Batch, BatchKind, BatchStatement};
pub use execute::{encode_execute, encode_execute_serial};
pub use query::{BoundValue, BoundValues, QueryParams};
pub use startup::StartupOptions;

use crate::compression::Compression;
use crate::error::ProtocolError;
use crate::frame::{self, FrameHeader, Opcode, FLAG_CUSTOM_PAYLOAD, FLAG_TRACING, PROTOCOL_VERSION};
use crate::wire::{self, Reader};

/// A decoded request message.
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    Startup(StartupOptions),
    Options,
    Query {
        query: String,
        params: QueryParams,
    },
    Prepare {
        query: String,
        /// v5: the keyspace to prepare it in (PREPARE flag 0x01).
        keyspace: Option<String>,
    },
    Execute {
        id: Bytes,
        /// v5: the result metadata id the client holds for `id` (None before v5).
        result_metadata_id: Option<Bytes>,
        params: QueryParams,
    },
    Batch(Batch),
    /// Event types to push to this connection (see [`crate::EventType`]).
    Register {
        events: Vec<String>,
    },
    /// The SASL token; a null token decodes as empty.
    AuthResponse(Bytes),
}

impl Request {
    pub fn opcode(&self) -> Opcode {
        match self {
            Request::Startup(_) => Opcode::Startup,
            Request::Options => Opcode::Options,
            Request::Query { .. } => Opcode::Query,
            Request::Prepare { .. } => Opcode::Prepare,
            Request::Execute { .. } => Opcode::Execute,
            Request::Batch(_) => Opcode::Batch,
            Request::Register { .. } => Opcode::Register,
            Request::AuthResponse(_) => Opcode::AuthResponse,
        }
    }
}

/// A request with what its frame carried besides the message.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestFrame {
    /// The client asked for tracing (flag 0x02).
    pub tracing: bool,
    /// The custom payload (flag 0x04), in wire order.
    pub custom_payload: Option<Vec<(String, Option<Bytes>)>>,
    pub request: Request,
}

/// Decodes a request body. `body` must be exactly `header.body_len` bytes;
/// `compression` is what STARTUP negotiated on this connection (v4 only: in
/// v5 compression is the segments', and an envelope is never compressed).
/// The message layout follows `header.version` (4 or 5).
pub fn decode_request(
    header: &FrameHeader,
    body: Bytes,
    compression: Option<Compression>,
) -> Result<Request, ProtocolError> {
    decode_request_frame(header, body, compression).map(|f| f.request)
}

/// Like [`decode_request`], also returning the tracing flag and custom payload.
pub fn decode_request_frame(
    header: &FrameHeader,
    body: Bytes,
    compression: Option<Compression>,
) -> Result<RequestFrame, ProtocolError> {
    if !header.opcode.is_request() {
        return Err(ProtocolError::NotARequest(header.opcode));
    }
    // v5: the flag means nothing on an envelope; Cassandra 5.0.9 reads the body as it is.
    let body = if header.is_compressed() && header.version < frame::PROTOCOL_V5 {
        match compression {
            Some(c) => c.decompress(&body)?,
            None => return Err(ProtocolError::CompressionNotNegotiated),
        }
    } else {
        body
    };
    let mut r = Reader::new(body);
    let custom_payload = if header.has_custom_payload() { Some(r.read_bytes_map()?) } else { None };
    let request = match header.opcode {
        Opcode::Startup => Request::Startup(startup::decode(&mut r)?),
        Opcode::Options => options::decode(&mut r)?,
        Opcode::Query => query::decode(&mut r, header.version)?,
        Opcode::Prepare => prepare::decode(&mut r, header.version)?,
        Opcode::Execute => execute::decode(&mut r, header.version)?,
        Opcode::Batch => Request::Batch(batch::decode(&mut r, header.version)?),
        Opcode::Register => register::decode(&mut r)?,
        Opcode::AuthResponse => auth_response::decode(&mut r)?,
        other => return Err(ProtocolError::NotARequest(other)),
    };
    Ok(RequestFrame { tracing: header.is_tracing(), custom_payload, request })
}

/// Client side: writes a whole request frame. STARTUP and OPTIONS are never
/// compressed (compression is only agreed by STARTUP).
pub fn encode_request(out: &mut BytesMut, stream: i16, compression: Option<Compression>, request: &Request) {
    encode_request_with(out, stream, compression, false, None, request);
}

/// Client side: [`encode_request`] with the tracing flag and a custom payload.
pub fn encode_request_with(
    out: &mut BytesMut,
    stream: i16,
    compression: Option<Compression>,
    tracing: bool,
    custom_payload: Option<&[(String, Option<Bytes>)]>,
    request: &Request,
) {
    encode_request_in(out, PROTOCOL_VERSION, stream, compression, tracing, custom_payload, request);
}

/// Client side: a request envelope of protocol `version` (4 or 5; a v5
/// envelope is never compressed itself, pass `None`: the segments are).
pub fn encode_request_in(
    out: &mut BytesMut,
    version: u8,
    stream: i16,
    compression: Option<Compression>,
    tracing: bool,
    custom_payload: Option<&[(String, Option<Bytes>)]>,
    request: &Request,
) {
    let compression = match request {
        Request::Startup(_) | Request::Options => None,
        _ => compression,
    };
    let mut flags = 0;
    if tracing {
        flags |= FLAG_TRACING;
    }
    if custom_payload.is_some() {
        flags |= FLAG_CUSTOM_PAYLOAD;
    }
    frame::write_frame(out, version, flags, stream, request.opcode(), compression, |out| {
        if let Some(payload) = custom_payload {
            wire::write_bytes_map(out, payload);
        }
        match request {
            Request::Startup(o) => startup::encode(out, o),
            Request::Options => {}
            Request::Query { query, params } => query::encode(out, version, query, params),
            Request::Prepare { query, keyspace } => prepare::encode(out, version, query, keyspace.as_deref()),
            Request::Execute { id, result_metadata_id, params } => {
                execute::encode(out, version, id, result_metadata_id.as_ref(), params)
            }
            Request::Batch(b) => batch::encode(out, version, b),
            Request::Register { events } => register::encode(out, events),
            Request::AuthResponse(token) => auth_response::encode(out, token),
        }
    });
}

#[cfg(test)]
mod tests;
