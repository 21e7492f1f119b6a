//! Decoding errors: [`FrameError`] for a bad frame header, [`ProtocolError`] for a
//! bad frame body.
//!
//! Both know what to answer the client: [`FrameError::encode_reply`] writes the
//! whole ERROR frame (header version included, see [`crate::frame`]), and
//! [`ProtocolError::to_error_body`] gives the ERROR body for a request whose
//! header was fine. Messages follow Cassandra's wording where Cassandra has one.
//!
//! Connection policy (mirrors Cassandra 4/5's pre-v5 pipeline, which closes the
//! channel after a bare `ProtocolException` from header decoding and keeps it
//! open for errors tied to a stream):
//! - unsupported version: answer on stream 0 (see [`FrameError::reply_version`]
//!   and [`crate::frame`]), skip the frame, keep the connection: Cassandra
//!   5.0.9 keeps it too, and a driver that reads the refusal then closes it
//!   itself (gocql v2 reads its answers on one goroutine and its handshake on
//!   another: a server that closes at once can make it see the close first);
//! - unknown opcode, wrong direction: answer, then close; the client does not
//!   speak our framing, so nothing after it can be trusted;
//! - frame too big: answer with Invalid (0x2200), skip the body, keep going;
//! - a body that fails to decode ([`ProtocolError`]): answer ProtocolError on
//!   its stream and keep going; the frame boundary is known.

use bytes::BytesMut;

use crate::frame::{Opcode, MAX_PROTOCOL_VERSION};
use crate::response::{ErrorBody, ErrorKind};

/// The versions we accept, as Cassandra lists them in the unsupported-version
/// message ("3/v3, 4/v4, 5/v5, 6/v6-beta" for Cassandra 5.0.9; we do not speak
/// 3 or 6).
pub const SUPPORTED_VERSIONS_DESCRIPTION: &str = "4/v4, 5/v5";
/// The same versions, one per entry, as SUPPORTED's `PROTOCOL_VERSIONS` lists them.
pub const SUPPORTED_VERSIONS: [&str; 2] = ["4/v4", "5/v5"];

/// A frame header the server cannot accept.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The version byte (direction bit removed) is not 4 or 5. `stream` is always 0
    /// (see [`crate::frame`]); `body_len` is read from the header layout of
    /// that version.
    #[error("Invalid or unsupported protocol version ({version}); supported versions are ({SUPPORTED_VERSIONS_DESCRIPTION})")]
    UnsupportedVersion { version: u8, stream: i16, body_len: u32 },
    /// The opcode byte names no message.
    #[error("Unknown opcode {opcode}")]
    UnknownOpcode { opcode: u8, stream: i16 },
    /// A response opcode, or a frame with the response bit (0x80) set, was sent
    /// to the server.
    #[error(
        "Wrong protocol direction (expected {}, got {}) for opcode {} ({})",
        if *response_bit { "REQUEST" } else { "RESPONSE" },
        if *response_bit { "RESPONSE" } else { "REQUEST" },
        *opcode as u8,
        opcode.name()
    )]
    WrongDirection { opcode: Opcode, response_bit: bool, stream: i16 },
    /// Header plus body exceed the configured maximum frame length.
    /// Cassandra answers this with Invalid (0x2200), not ProtocolError.
    #[error("Request is too big: length {} exceeds maximum allowed length {max_frame_len}.", *body_len as u64 + crate::frame::HEADER_LEN as u64)]
    TooBig { stream: i16, body_len: u32, max_frame_len: u32 },
}

impl FrameError {
    /// The stream id to answer on (as far as it could be read; 0 otherwise).
    pub fn stream(&self) -> i16 {
        match *self {
            FrameError::UnsupportedVersion { stream, .. }
            | FrameError::UnknownOpcode { stream, .. }
            | FrameError::WrongDirection { stream, .. }
            | FrameError::TooBig { stream, .. } => stream,
        }
    }

    /// True when the connection must be closed once the answer is flushed.
    pub fn closes_connection(&self) -> bool {
        !matches!(self, FrameError::TooBig { .. } | FrameError::UnsupportedVersion { .. })
    }

    /// For an error that keeps the connection: how many bytes (header and
    /// body) the refused frame spans and must be discarded before the next one.
    pub fn bytes_to_skip(&self) -> Option<usize> {
        match *self {
            FrameError::TooBig { body_len, .. } => Some(crate::frame::HEADER_LEN + body_len as usize),
            FrameError::UnsupportedVersion { version: 1 | 2, body_len, .. } => {
                Some(crate::frame::LEGACY_HEADER_LEN + body_len as usize)
            }
            FrameError::UnsupportedVersion { body_len, .. } => Some(crate::frame::HEADER_LEN + body_len as usize),
            _ => None,
        }
    }

    /// The ERROR body to send.
    pub fn error_body(&self) -> ErrorBody {
        let kind = match self {
            FrameError::TooBig { .. } => ErrorKind::Invalid,
            _ => ErrorKind::ProtocolError,
        };
        ErrorBody::new(kind, self.to_string())
    }

    /// The protocol version to put in the answer's header, as Cassandra 5.0.9
    /// picks it (`ProtocolVersion.decode`, checked against a running 5.0.9):
    /// a version older than ours (1, 2, 3) is answered in that version, so an
    /// old client can read the refusal (versions 1 and 2 in their own 8-byte
    /// layout, CASSANDRA-11464); a newer one in our highest, 5 (0x85), as
    /// Cassandra answers in its own. Drivers accept a 0x85 refusal to a newer
    /// version: the python driver reads any version it knows, gocql v2 any of
    /// 3..5, and the scylla Rust driver only ever sends v4. The other errors
    /// come from a v4 or v5 header: see [`FrameError::encode_reply_in`].
    pub fn reply_version(&self) -> u8 {
        match *self {
            FrameError::UnsupportedVersion { version: v @ 1..=3, .. } => v,
            _ => MAX_PROTOCOL_VERSION,
        }
    }

    /// Writes the complete ERROR frame that answers this error (other than
    /// an unsupported version: in v4).
    pub fn encode_reply(&self, out: &mut BytesMut) {
        self.encode_reply_in(out, crate::frame::PROTOCOL_VERSION);
    }

    /// Writes the complete ERROR frame (an envelope, for a v5 connection: the
    /// caller puts it in a segment) that answers this error, in `version`, the
    /// connection's, unless the error is an unsupported version.
    pub fn encode_reply_in(&self, out: &mut BytesMut, version: u8) {
        let version = match self {
            FrameError::UnsupportedVersion { .. } => self.reply_version(),
            _ => version,
        };
        crate::frame::write_error_frame(out, version, self.stream(), &self.error_body());
    }
}

/// A request (or, on the client side, response) body that does not decode.
/// Answered with ProtocolError (0x000A) on the request's stream.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    #[error("Not enough bytes to read {what}: need {needed}, {remaining} left")]
    Truncated { what: &'static str, needed: usize, remaining: usize },
    #[error("Cannot decode {what} as UTF-8")]
    InvalidUtf8 { what: &'static str },
    #[error("Invalid negative length {len} for {what}")]
    NegativeLength { what: &'static str, len: i32 },
    /// A `[value]` length below -2 (Cassandra's wording).
    #[error("Invalid ByteBuf length {0}")]
    InvalidValueLength(i32),
    #[error("Unknown code {0} for a consistency level")]
    UnknownConsistency(u16),
    #[error("Invalid IP address length {0} in [inet] (must be 4 or 16)")]
    InvalidInetLength(u8),
    #[error("Unknown type id {0:#06x} in [option]")]
    UnknownTypeId(u16),
    #[error("Unsupported custom type {0}")]
    UnsupportedCustomType(String),
    #[error("Type description nested deeper than {0} levels")]
    TypeTooDeep(usize),
    #[error("Unknown batch type {0}")]
    InvalidBatchType(u8),
    #[error("Invalid query kind in BATCH messages. Must be 0 or 1 but got {0}")]
    InvalidBatchQueryKind(u8),
    #[error("Invalid BATCH flags {0:#04x}: the 4 rightmost bits must always be 0")]
    InvalidBatchFlags(u8),
    #[error("BATCH flag 0x40 (names for values) does not match how its statements are encoded")]
    BatchNamesMismatch,
    #[error("Out of bound timestamp, must be in [{}, {}] (got {})", i64::MIN + 1, i64::MAX, .0)]
    TimestampOutOfBound(i64),
    #[error("Received a compressed frame but no compression was negotiated in STARTUP")]
    CompressionNotNegotiated,
    #[error("{codec} decompression failed: {reason}")]
    Decompression { codec: &'static str, reason: String },
    #[error("Unknown compression algorithm: {0}")]
    UnknownCompression(String),
    /// STARTUP of a v5 connection asked for snappy (Cassandra 5.0.9's wording).
    #[error("Snappy compression is not supported in protocol V5")]
    SnappyInV5,
    /// A v4 frame on a v5 connection or the other way round, after STARTUP
    /// (Cassandra 5.0.9's wording, its missing space included).
    #[error(
        "Invalid message version. Got {got}/v{got} but previousmessages on this connection had version {had}/v{had}"
    )]
    VersionChanged { got: u8, had: u8 },
    #[error("Missing value CQL_VERSION in STARTUP message")]
    MissingCqlVersion,
    #[error("CQL version {0} is not supported by the binary protocol (supported version are >= 3.0.0)")]
    UnsupportedCqlVersion(String),
    #[error("Opcode {0:?} is not a request")]
    NotARequest(Opcode),
    #[error("Opcode {0:?} is not a response")]
    NotAResponse(Opcode),
    #[error("Unknown RESULT kind {0}")]
    UnknownResultKind(i32),
    #[error("Unknown error code {0:#06x}")]
    UnknownErrorCode(i32),
    #[error("Unknown {what} '{value}'")]
    UnknownName { what: &'static str, value: String },
}

impl ProtocolError {
    /// The ERROR body (code ProtocolError, 0x000A) that answers this error.
    pub fn to_error_body(&self) -> ErrorBody {
        ErrorBody::new(ErrorKind::ProtocolError, self.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_follow_cassandra() {
        let e = FrameError::UnsupportedVersion { version: 66, stream: 3, body_len: 0 };
        assert_eq!(e.to_string(), "Invalid or unsupported protocol version (66); supported versions are (4/v4, 5/v5)");
        // The python driver's test: `'unsupported protocol version' in response.message`.
        assert!(e.to_string().contains("unsupported protocol version"));
        let e = FrameError::TooBig { stream: 1, body_len: 100, max_frame_len: 50 };
        assert_eq!(e.to_string(), "Request is too big: length 109 exceeds maximum allowed length 50.");
        assert_eq!(e.error_body().kind, ErrorKind::Invalid);
        assert!(!e.closes_connection());
        let e = FrameError::WrongDirection { opcode: Opcode::Query, response_bit: true, stream: 0 };
        assert_eq!(e.to_string(), "Wrong protocol direction (expected REQUEST, got RESPONSE) for opcode 7 (QUERY)");
        let e = FrameError::WrongDirection { opcode: Opcode::Ready, response_bit: false, stream: 0 };
        assert_eq!(e.to_string(), "Wrong protocol direction (expected RESPONSE, got REQUEST) for opcode 2 (READY)");
        assert_eq!(ProtocolError::UnknownConsistency(42).to_string(), "Unknown code 42 for a consistency level");
    }
}
