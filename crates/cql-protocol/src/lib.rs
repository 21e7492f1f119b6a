//! The CQL native protocol, versions 4 and 5, as a sans-IO codec for the server side
//! (with the client-side half used by tests and by `shoal stress -mode simplenative`).
//!
//! The crate turns bytes into [`Request`]s and [`Response`]s into bytes. It owns
//! no socket, no clock and no task: the connection loop in the server calls
//! [`parse_header`] on its read buffer, splits off `body_len` bytes once they have
//! arrived, and hands them to [`decode_request`]; answers are written with
//! [`encode_response`] straight into the connection's `BytesMut` write buffer.
//!
//! v5 (`doc/native_protocol_v5.spec`) keeps v4's messages inside *envelopes* (the
//! v4 frame: same 9-byte header, version 5) and, once STARTUP is answered,
//! carries the envelopes in CRC-checked, optionally LZ4-compressed *segments*
//! ([`segment`]; the caller runs the codec over its buffers, and envelopes are
//! then never compressed themselves). Message bodies that differ in v5 take the
//! header's version (decoding) or a `version` argument (the `*_in` encoders).
//!
//! The specification is `doc/native_protocol_v4.spec` in Cassandra's repository.
//! Where the spec is silent, Cassandra 4/5's behaviour and wording are followed
//! (they are quoted in the module that needs them).
//!
//! Invariants:
//! - **No panic on any input.** Every length read from the wire is checked against
//!   the bytes that remain before anything is sliced; negative lengths are
//!   handled (`[bytes]` -1 is null, `[value]` -2 is "unset", anything else
//!   negative is an error); no allocation is sized from an untrusted count beyond
//!   what the remaining bytes could hold; type descriptions nest at most
//!   [`MAX_TYPE_DEPTH`] deep; decompression never inflates beyond what a
//!   real compressor could have produced from the received bytes.
//! - **Zero copy for values.** Bound values, prepared ids, paging states and row
//!   contents are `Bytes` slices of the received body (or of the decompressed
//!   body); only strings that are decoded as `String` are copied.
//! - **Encoding is infallible for well-formed responses.** `[string]`s longer
//!   than 65535 bytes are cut at a UTF-8 boundary (error messages that echo a
//!   huge query stay readable); a `[short bytes]` over 65535 bytes, a `[bytes]` or
//!   body over the 32-bit limits, or a `RowsWriter` row with the wrong number of
//!   cells are programmer errors and panic with a message.
//! - Only versions 4 and 5 are spoken. Every other version is refused with the
//!   ERROR frame described in [`frame`] (see there for how drivers negotiate down).

#![deny(clippy::indexing_slicing)]
#![cfg_attr(test, allow(clippy::indexing_slicing))]

pub mod compression;
pub mod error;
pub mod frame;
pub mod request;
pub mod response;
pub mod segment;
mod types;
pub mod wire;

pub use compression::Compression;
pub use error::{FrameError, ProtocolError};
pub use frame::{
    is_supported, parse_header, parse_response_header, FrameHeader, Opcode, FLAG_COMPRESSION, FLAG_CUSTOM_PAYLOAD,
    FLAG_TRACING, FLAG_USE_BETA, FLAG_WARNING, HEADER_LEN, MAX_PROTOCOL_VERSION, PROTOCOL_V5, PROTOCOL_VERSION,
};
pub use request::{
    decode_request, decode_request_frame, encode_execute, encode_execute_serial, encode_request, encode_request_in,
    encode_request_with, Batch, BatchKind, BatchStatement, BoundValue, BoundValues, QueryParams, Request, RequestFrame,
    StartupOptions,
};
pub use response::{
    decode_response, encode_event, encode_event_in, encode_response, encode_response_in, encode_response_traced,
    result_metadata_id, supported_options, ColumnSpec, ErrorBody, ErrorKind, Event, EventType, Prepared,
    PreparedMetadata, Response, ResponseFrame, ResultBody, Rows, RowsIter, RowsMetadata, RowsWriter, SchemaChange,
    SchemaChangeTarget, SchemaChangeType, StatusChangeType, TopologyChangeType, WriteType, CQL_VERSION, EVENT_STREAM,
};
pub use segment::{SegmentCodec, SegmentError};
// `types` stays private so that `use cql_protocol::*` does not shadow the
// workspace's `types` crate; its API is re-exported here.
pub use crate::types::{read_type, write_type, DURATION_CLASS, MAX_TYPE_DEPTH};
