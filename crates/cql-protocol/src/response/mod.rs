//! Responses (spec 4.2): the server encodes them straight into its write
//! buffer; the test client decodes them.
//!
//! A response body is, in order: the tracing id (`[uuid]`, flag 0x02), the
//! warnings (`[string list]`, flag 0x08), the custom payload (`[bytes map]`,
//! flag 0x04), then the message; that is the order Cassandra writes and the
//! python driver reads. A response carries the version of the connection
//! (0x84 or 0x85, [`encode_response_in`]); the v4 entry points write 0x84.

mod authenticate;
mod error;
mod event;
mod ready;
mod result;
mod supported;

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};
use uuid::Uuid;

pub use error::{ErrorBody, ErrorKind, WriteType};
pub use event::{
    Event, EventType, SchemaChange, SchemaChangeTarget, SchemaChangeType, StatusChangeType, TopologyChangeType,
};
pub use result::{
    result_metadata_id, ColumnSpec, Prepared, PreparedMetadata, ResultBody, Rows, RowsIter, RowsMetadata, RowsWriter,
};
pub use supported::{supported_options, CQL_VERSION};

use crate::compression::Compression;
use crate::error::ProtocolError;
use crate::frame::{self, FrameHeader, Opcode, FLAG_TRACING, FLAG_WARNING, PROTOCOL_VERSION, RESPONSE_BIT};
use crate::wire::{self, Reader};

/// The stream id of server-pushed EVENT frames.
pub const EVENT_STREAM: i16 = -1;

/// A response message.
#[derive(Clone, Debug, PartialEq)]
pub enum Response {
    Error(ErrorBody),
    Ready,
    /// The authenticator's full class name.
    Authenticate(String),
    /// STARTUP option name -> supported values (see [`supported_options`]).
    Supported(BTreeMap<String, Vec<String>>),
    Result(ResultBody),
    Event(Event),
    AuthChallenge(Option<Bytes>),
    AuthSuccess(Option<Bytes>),
}

impl Response {
    pub fn opcode(&self) -> Opcode {
        match self {
            Response::Error(_) => Opcode::Error,
            Response::Ready => Opcode::Ready,
            Response::Authenticate(_) => Opcode::Authenticate,
            Response::Supported(_) => Opcode::Supported,
            Response::Result(_) => Opcode::Result,
            Response::Event(_) => Opcode::Event,
            Response::AuthChallenge(_) => Opcode::AuthChallenge,
            Response::AuthSuccess(_) => Opcode::AuthSuccess,
        }
    }
}

/// A decoded response with what its frame carried besides the message.
#[derive(Clone, Debug, PartialEq)]
pub struct ResponseFrame {
    pub tracing_id: Option<Uuid>,
    pub warnings: Vec<String>,
    pub custom_payload: Option<Vec<(String, Option<Bytes>)>>,
    pub response: Response,
}

/// Writes a whole response frame (header and body) at the end of `out`.
///
/// The body is compressed when `compression` is set and the body is not empty.
/// Non-empty `warnings` set the WARNING flag and precede the message.
pub fn encode_response(
    out: &mut BytesMut,
    stream: i16,
    compression: Option<Compression>,
    warnings: &[String],
    response: &Response,
) {
    encode_response_traced(out, stream, compression, None, warnings, response);
}

/// [`encode_response`] for a traced request: `tracing_id` sets the TRACING
/// flag and opens the body.
pub fn encode_response_traced(
    out: &mut BytesMut,
    stream: i16,
    compression: Option<Compression>,
    tracing_id: Option<Uuid>,
    warnings: &[String],
    response: &Response,
) {
    encode_response_in(out, PROTOCOL_VERSION, stream, compression, tracing_id, warnings, response);
}

/// [`encode_response_traced`] in protocol `version` (4 or 5): the header's
/// version byte and the layout of RESULT and ERROR bodies follow it. A v5
/// envelope is never compressed itself (pass `None`: the segments are).
pub fn encode_response_in(
    out: &mut BytesMut,
    version: u8,
    stream: i16,
    compression: Option<Compression>,
    tracing_id: Option<Uuid>,
    warnings: &[String],
    response: &Response,
) {
    let opcode = response.opcode();
    write_response(out, version, stream, compression, tracing_id, warnings, opcode, |out| match response {
        Response::Error(e) => e.encode(out, version),
        Response::Ready => {}
        Response::Authenticate(class) => authenticate::encode_authenticate(out, class),
        Response::Supported(options) => supported::encode(out, options),
        Response::Result(r) => r.encode(out, version),
        Response::Event(e) => e.encode(out),
        Response::AuthChallenge(token) | Response::AuthSuccess(token) => authenticate::encode_token(out, token),
    });
}

/// Writes a server-pushed EVENT frame (stream -1).
pub fn encode_event(out: &mut BytesMut, compression: Option<Compression>, event: &Event) {
    encode_event_in(out, PROTOCOL_VERSION, compression, event);
}

/// [`encode_event`] in protocol `version`.
pub fn encode_event_in(out: &mut BytesMut, version: u8, compression: Option<Compression>, event: &Event) {
    write_response(out, version, EVENT_STREAM, compression, None, &[], Opcode::Event, |out| event.encode(out));
}

#[allow(clippy::too_many_arguments)]
fn write_response(
    out: &mut BytesMut,
    version: u8,
    stream: i16,
    compression: Option<Compression>,
    tracing_id: Option<Uuid>,
    warnings: &[String],
    opcode: Opcode,
    message: impl FnOnce(&mut BytesMut),
) {
    let mut flags = 0;
    if tracing_id.is_some() {
        flags |= FLAG_TRACING;
    }
    if !warnings.is_empty() {
        flags |= FLAG_WARNING;
    }
    frame::write_frame(out, version | RESPONSE_BIT, flags, stream, opcode, compression, |out| {
        if let Some(id) = &tracing_id {
            wire::write_uuid(out, id);
        }
        if !warnings.is_empty() {
            wire::write_string_list(out, warnings);
        }
        message(out);
    });
}

/// Client side: decodes a response body. `body` must be exactly
/// `header.body_len` bytes.
pub fn decode_response(
    header: &FrameHeader,
    body: Bytes,
    compression: Option<Compression>,
) -> Result<ResponseFrame, ProtocolError> {
    if header.opcode.is_request() {
        return Err(ProtocolError::NotAResponse(header.opcode));
    }
    let body = if header.is_compressed() {
        match compression {
            Some(c) => c.decompress(&body)?,
            None => return Err(ProtocolError::CompressionNotNegotiated),
        }
    } else {
        body
    };
    let mut r = Reader::new(body);
    let tracing_id = if header.is_tracing() { Some(r.read_uuid()?) } else { None };
    let warnings = if header.has_warnings() { r.read_string_list()? } else { Vec::new() };
    let custom_payload = if header.has_custom_payload() { Some(r.read_bytes_map()?) } else { None };
    let response = match header.opcode {
        Opcode::Error => Response::Error(ErrorBody::decode(&mut r, header.version)?),
        Opcode::Ready => ready::decode(&mut r)?,
        Opcode::Authenticate => Response::Authenticate(authenticate::decode_authenticate(&mut r)?),
        Opcode::Supported => Response::Supported(supported::decode(&mut r)?),
        Opcode::Result => Response::Result(ResultBody::decode(&mut r, header.version)?),
        Opcode::Event => Response::Event(Event::decode(&mut r)?),
        Opcode::AuthChallenge => Response::AuthChallenge(authenticate::decode_token(&mut r)?),
        Opcode::AuthSuccess => Response::AuthSuccess(authenticate::decode_token(&mut r)?),
        other => return Err(ProtocolError::NotAResponse(other)),
    };
    Ok(ResponseFrame { tracing_id, warnings, custom_payload, response })
}

#[cfg(test)]
mod tests;
