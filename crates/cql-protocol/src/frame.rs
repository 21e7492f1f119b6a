//! The 9-byte frame header (v5: the envelope header), and version negotiation.
//!
//! ```text
//!   0         8        16        24        32         40
//!   +---------+---------+---------+---------+---------+
//!   | version |  flags  |      stream       | opcode  |
//!   +---------+---------+---------+---------+---------+
//!   |                length                 |
//!   +---------+---------+---------+---------+
//! ```
//!
//! `version` carries the direction in its top bit (0x04 request, 0x84
//! response); `stream` is a signed 16-bit id the response echoes (EVENTs use
//! -1); `length` is the body length, unsigned.
//!
//! # Version negotiation (what drivers do, and what we answer)
//!
//! We speak v4 and v5 (v5 without the USE_BETA flag, which it has not needed
//! since Cassandra 4.0; a v5 frame with the flag is taken too, as Cassandra
//! 5.0.9 takes it). Drivers find out what else we lack by being refused:
//!
//! - The DataStax python driver (3.29+, `cassandra/connection.py`,
//!   `cassandra/cluster.py`) opens each connection with OPTIONS at its current
//!   version, starting at 0x42 (DSE_V2). A response that is an ERROR with code
//!   0x000A on a stream >= 0 whose message contains the exact, case-sensitive
//!   substring `unsupported protocol version` marks the connection
//!   `is_unsupported_proto_version`; the connection factory then raises
//!   `ProtocolVersionUnsupported` and `Cluster.protocol_downgrade` picks the next
//!   lower version from its own list, skipping beta versions:
//!   0x42 -> 0x41 (DSE_V1) -> 5 -> 4 (6 is beta and skipped). It does not parse
//!   the list of versions in the message. Any other ProtocolError text makes it
//!   log an error and give up on the host.
//! - The driver reads the answer's header with `version & 0x7f`, which must be
//!   a version it knows (1..6, 0x41, 0x42), so answering 0x84 to a 0x42 request
//!   is fine, and it uses the 9-byte layout for versions >= 3.
//! - The scylla Rust driver speaks v4 only and rejects any response whose
//!   version byte is not exactly 0x84. gocql starts at v4 too (it would parse
//!   Scylla's "the lowest supported version is N and the greatest is M" if
//!   refused; it never is).
//! - gocql v2 opens at v5 and steps down to v4 only when it can read the
//!   refusal as a protocol error: a ProtocolError (or ServerError) frame on
//!   stream 0, which it reserves and reads as "the server could not read the
//!   stream id". The same error on the request's stream (its first request is
//!   never on stream 0) reaches its handshake wrapped in a type its check does
//!   not unwrap, and it gives up on the host. A close right after the refusal
//!   can also reach it before the refusal.
//! - The python driver and the Java driver 4 send their first request on
//!   stream 0, so any answer on stream 0 is the answer to it.
//! - Cassandra 5.0.9 (checked with raw frames against a running node) answers
//!   an unknown version with
//!   `Invalid or unsupported protocol version (66); supported versions are (3/v3, 4/v4, 5/v5, 6/v6-beta)`
//!   (`ProtocolVersion.invalidVersionMessage`), in a header carrying its own
//!   highest version, and keeps the connection open. Versions older than its
//!   oldest (1 and 2) it answers in their own version and 8-byte header, on
//!   stream 0, so old clients can read it. It answers an unknown newer version
//!   on the request's stream, which gocql never meets (Cassandra speaks v5).
//!
//! - Cassandra 5.0.9 answers a v5 OPTIONS in 0x85, and v6 without USE_BETA with
//!   `Beta version of the protocol used (6/v6-beta), but USE_BETA flag is unset`
//!   (v6 with the flag it speaks, as a beta). We do not speak v6 at all: it is
//!   refused as any unknown version (the python driver never offers it, and
//!   the Java driver 4 and gocql v2 start at v5).
//!
//! We answer with `4/v4, 5/v5` as the versions: older versions (1, 2, 3) in
//! their own version (1 and 2 with the legacy 8-byte header), newer ones in a
//! 0x85 header, as Cassandra 5.0.9; always on stream 0 (Cassandra: the
//! request's), so gocql v2 steps down; the refused frame is skipped and the
//! connection kept. See [`crate::FrameError`].
//!
//! Which of 4 and 5 a connection speaks is the server's business: it takes the
//! version of its STARTUP, and answers a frame of the other version after it
//! with Cassandra's "Invalid message version" ProtocolError.

use bytes::{BufMut, BytesMut};

use crate::compression::Compression;
use crate::error::FrameError;
use crate::response::ErrorBody;
use crate::wire;

/// Length of the frame header in protocol v3 and later.
pub const HEADER_LEN: usize = 9;
/// Length of the frame header of the retired versions 1 and 2.
pub const LEGACY_HEADER_LEN: usize = 8;
/// Protocol v4: what the entry points without a version write.
pub const PROTOCOL_VERSION: u8 = 4;
/// Protocol v5: envelopes in segments after STARTUP (see [`crate::segment`]).
pub const PROTOCOL_V5: u8 = 5;
/// The highest version we speak (the header of refusals of newer versions).
pub const MAX_PROTOCOL_VERSION: u8 = PROTOCOL_V5;
/// Direction bit of the version byte: set on responses.
pub const RESPONSE_BIT: u8 = 0x80;

/// The body is compressed with the algorithm chosen in STARTUP.
pub const FLAG_COMPRESSION: u8 = 0x01;
/// Request: trace this request. Response: the body starts with a tracing id.
pub const FLAG_TRACING: u8 = 0x02;
/// A `[bytes map]` custom payload precedes the message body.
pub const FLAG_CUSTOM_PAYLOAD: u8 = 0x04;
/// Response: a `[string list]` of warnings precedes the message body.
pub const FLAG_WARNING: u8 = 0x08;
/// Beta protocol version in use (only meaningful for beta versions).
pub const FLAG_USE_BETA: u8 = 0x10;

/// Message kinds, by their opcode byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Opcode {
    Error = 0x00,
    Startup = 0x01,
    Ready = 0x02,
    Authenticate = 0x03,
    Options = 0x05,
    Supported = 0x06,
    Query = 0x07,
    Result = 0x08,
    Prepare = 0x09,
    Execute = 0x0A,
    Register = 0x0B,
    Event = 0x0C,
    Batch = 0x0D,
    AuthChallenge = 0x0E,
    AuthResponse = 0x0F,
    AuthSuccess = 0x10,
}

impl Opcode {
    pub fn from_u8(b: u8) -> Option<Opcode> {
        use Opcode::*;
        Some(match b {
            0x00 => Error,
            0x01 => Startup,
            0x02 => Ready,
            0x03 => Authenticate,
            0x05 => Options,
            0x06 => Supported,
            0x07 => Query,
            0x08 => Result,
            0x09 => Prepare,
            0x0A => Execute,
            0x0B => Register,
            0x0C => Event,
            0x0D => Batch,
            0x0E => AuthChallenge,
            0x0F => AuthResponse,
            0x10 => AuthSuccess,
            _ => return None,
        })
    }

    /// True for messages a client sends.
    pub fn is_request(self) -> bool {
        use Opcode::*;
        matches!(self, Startup | Options | Query | Prepare | Execute | Register | Batch | AuthResponse)
    }

    /// Cassandra's name for the message type (as in its error messages).
    pub fn name(self) -> &'static str {
        use Opcode::*;
        match self {
            Error => "ERROR",
            Startup => "STARTUP",
            Ready => "READY",
            Authenticate => "AUTHENTICATE",
            Options => "OPTIONS",
            Supported => "SUPPORTED",
            Query => "QUERY",
            Result => "RESULT",
            Prepare => "PREPARE",
            Execute => "EXECUTE",
            Register => "REGISTER",
            Event => "EVENT",
            Batch => "BATCH",
            AuthChallenge => "AUTH_CHALLENGE",
            AuthResponse => "AUTH_RESPONSE",
            AuthSuccess => "AUTH_SUCCESS",
        }
    }
}

/// A parsed v4 frame header, or v5 envelope header (the same 9 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// Protocol version without the direction bit (4 or 5 once parsed).
    pub version: u8,
    pub flags: u8,
    pub stream: i16,
    pub opcode: Opcode,
    pub body_len: u32,
}

impl FrameHeader {
    pub fn is_compressed(&self) -> bool {
        self.flags & FLAG_COMPRESSION != 0
    }
    pub fn is_tracing(&self) -> bool {
        self.flags & FLAG_TRACING != 0
    }
    pub fn has_custom_payload(&self) -> bool {
        self.flags & FLAG_CUSTOM_PAYLOAD != 0
    }
    pub fn has_warnings(&self) -> bool {
        self.flags & FLAG_WARNING != 0
    }
    /// Header plus body, in bytes.
    pub fn frame_len(&self) -> usize {
        HEADER_LEN + self.body_len as usize
    }
}

/// Parses a request frame header at the start of `buf`.
///
/// `Ok(None)`: not enough bytes yet (fewer than 9; for the retired versions 1
/// and 2, whose header is 8 bytes, fewer than the 3 needed to read their
/// stream id). `max_frame_len` bounds header plus body, like Cassandra's
/// `native_transport_max_frame_size`.
///
/// Checks run in Cassandra's order: version, opcode and direction, length.
pub fn parse_header(buf: &[u8], max_frame_len: u32) -> Result<Option<FrameHeader>, FrameError> {
    let Some(&first) = buf.first() else {
        return Ok(None);
    };
    let version = first & !RESPONSE_BIT;
    if version == 1 || version == 2 {
        // v1/v2 header: version, flags, stream (1 byte), opcode, length (4).
        let Some(len) = buf.get(4..LEGACY_HEADER_LEN).and_then(|s| <[u8; 4]>::try_from(s).ok()) else {
            return Ok(None);
        };
        let body_len = u32::from_be_bytes(len);
        // Cassandra answers these on stream 0, in their own version and layout.
        return Err(FrameError::UnsupportedVersion { version, stream: 0, body_len });
    }
    let Some(raw) = header_bytes(buf) else {
        return Ok(None);
    };
    let (flags, stream, opcode_byte, body_len) = split_header(&raw);
    if !is_supported(version) {
        // On stream 0, whatever the request's: see the module comment (gocql v2).
        return Err(FrameError::UnsupportedVersion { version, stream: 0, body_len });
    }
    let Some(opcode) = Opcode::from_u8(opcode_byte) else {
        return Err(FrameError::UnknownOpcode { opcode: opcode_byte, stream });
    };
    let response_bit = first & RESPONSE_BIT != 0;
    if response_bit || !opcode.is_request() {
        return Err(FrameError::WrongDirection { opcode, response_bit, stream });
    }
    if u64::from(body_len) + HEADER_LEN as u64 > u64::from(max_frame_len) {
        return Err(FrameError::TooBig { stream, body_len, max_frame_len });
    }
    Ok(Some(FrameHeader { version, flags, stream, opcode, body_len }))
}

/// Whether we speak protocol `version` (4 and 5).
pub fn is_supported(version: u8) -> bool {
    version == PROTOCOL_VERSION || version == PROTOCOL_V5
}

/// Client side: parses a response frame header (version byte 0x84 or 0x85).
/// Errors reuse [`FrameError`]; `max_frame_len` bounds header plus body.
pub fn parse_response_header(buf: &[u8], max_frame_len: u32) -> Result<Option<FrameHeader>, FrameError> {
    let Some(raw) = header_bytes(buf) else {
        return Ok(None);
    };
    let (flags, stream, opcode_byte, body_len) = split_header(&raw);
    let version = raw[0] & !RESPONSE_BIT;
    if !is_supported(version) {
        return Err(FrameError::UnsupportedVersion { version, stream, body_len });
    }
    let Some(opcode) = Opcode::from_u8(opcode_byte) else {
        return Err(FrameError::UnknownOpcode { opcode: opcode_byte, stream });
    };
    let response_bit = raw[0] & RESPONSE_BIT != 0;
    if !response_bit || opcode.is_request() {
        return Err(FrameError::WrongDirection { opcode, response_bit, stream });
    }
    if u64::from(body_len) + HEADER_LEN as u64 > u64::from(max_frame_len) {
        return Err(FrameError::TooBig { stream, body_len, max_frame_len });
    }
    Ok(Some(FrameHeader { version, flags, stream, opcode, body_len }))
}

fn header_bytes(buf: &[u8]) -> Option<[u8; HEADER_LEN]> {
    buf.get(..HEADER_LEN).and_then(|s| <[u8; HEADER_LEN]>::try_from(s).ok())
}

fn split_header(raw: &[u8; HEADER_LEN]) -> (u8, i16, u8, u32) {
    let flags = raw[1];
    let stream = i16::from_be_bytes([raw[2], raw[3]]);
    let opcode = raw[4];
    let body_len = u32::from_be_bytes([raw[5], raw[6], raw[7], raw[8]]);
    (flags, stream, opcode, body_len)
}

/// Writes one frame: header, then whatever `body` appends, then patches the
/// length (and compresses the body when `compression` is set and the body is
/// not empty; an empty body is never compressed, which the spec allows and which
/// spares drivers from inflating nothing).
pub(crate) fn write_frame(
    out: &mut BytesMut,
    version_byte: u8,
    mut flags: u8,
    stream: i16,
    opcode: Opcode,
    compression: Option<Compression>,
    body: impl FnOnce(&mut BytesMut),
) {
    let start = out.len();
    out.reserve(HEADER_LEN);
    out.put_u8(version_byte);
    out.put_u8(flags);
    out.put_i16(stream);
    out.put_u8(opcode as u8);
    out.put_u32(0);
    let body_start = out.len();
    body(out);
    if let Some(c) = compression {
        if let Some(body) = out.get(body_start..).filter(|b| !b.is_empty()) {
            let compressed = c.compress(body);
            out.truncate(body_start);
            out.extend_from_slice(&compressed);
            flags |= FLAG_COMPRESSION;
        }
    }
    let body_len = u32::try_from(out.len() - body_start).expect("frame body longer than 4 GiB");
    wire::patch(out, start + 1, [flags]);
    wire::patch(out, start + 5, body_len.to_be_bytes());
}

/// An ERROR frame in the 8-byte header layout of protocol v1/v2 (stream is one
/// byte), used only to refuse those versions readably.
/// Writes an uncompressed ERROR frame in the header layout of `version`: the
/// 8-byte header (one-byte stream) of versions 1 and 2, the 9-byte one otherwise.
pub(crate) fn write_error_frame(out: &mut BytesMut, version: u8, stream: i16, body: &ErrorBody) {
    let mut encoded = BytesMut::new();
    body.encode(&mut encoded, version);
    out.put_u8(version | RESPONSE_BIT);
    out.put_u8(0);
    if version == 1 || version == 2 {
        out.put_i8(stream as i8);
    } else {
        out.put_i16(stream);
    }
    out.put_u8(Opcode::Error as u8);
    // An error body is a code and a short string: far below 4 GiB.
    out.put_u32(encoded.len() as u32);
    out.extend_from_slice(&encoded);
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: u32 = 256 * 1024 * 1024;

    #[test]
    fn needs_nine_bytes() {
        let h = [0x04, 0x00, 0x00, 0x01, 0x05, 0, 0, 0, 0];
        for n in 0..HEADER_LEN {
            assert_eq!(parse_header(&h[..n], MAX), Ok(None));
        }
        let parsed = parse_header(&h, MAX).unwrap().unwrap();
        assert_eq!(parsed, FrameHeader { version: 4, flags: 0, stream: 1, opcode: Opcode::Options, body_len: 0 });
    }

    #[test]
    fn refuses_newer_versions_in_v4_on_stream_0() {
        // Answered in our highest version, on stream 0 (gocql v2 steps down only
        // then), and the connection is kept, as Cassandra 5.0.9 keeps it.
        for v in [0x42u8, 0x41, 0x06, 0x16, 0x00] {
            let h = [v, 0x00, 0x00, 0x07, 0x05, 0, 0, 0, 3];
            let err = parse_header(&h, MAX).unwrap_err();
            assert_eq!(err, FrameError::UnsupportedVersion { version: v, stream: 0, body_len: 3 });
            assert!(!err.closes_connection());
            assert_eq!(err.bytes_to_skip(), Some(HEADER_LEN + 3));
            let mut out = BytesMut::new();
            err.encode_reply(&mut out);
            assert_eq!(&out[..5], &[0x85, 0x00, 0x00, 0x00, 0x00]);
            let body = &out[HEADER_LEN..];
            assert_eq!(&body[..4], &[0, 0, 0, 0x0A]);
            let msg = String::from_utf8_lossy(&body[6..]);
            assert!(msg.contains("unsupported protocol version"), "{msg}");
        }
    }

    #[test]
    fn takes_v5_with_and_without_beta_flag() {
        for flags in [0, FLAG_USE_BETA] {
            let h = [0x05, flags, 0x00, 0x01, 0x05, 0, 0, 0, 0];
            let parsed = parse_header(&h, MAX).unwrap().unwrap();
            assert_eq!(parsed.version, 5);
            assert_eq!(parsed.opcode, Opcode::Options);
        }
        let h = [0x85, 0x00, 0x00, 0x01, 0x02, 0, 0, 0, 0];
        assert_eq!(parse_response_header(&h, MAX).unwrap().unwrap().version, 5);
    }

    #[test]
    fn refuses_v3_in_v3() {
        // An older version than ours is answered in its own version, so a
        // client that knows only that version can read the refusal.
        let h = [0x03, 0x00, 0x00, 0x09, 0x05, 0, 0, 0, 0];
        let err = parse_header(&h, MAX).unwrap_err();
        let mut out = BytesMut::new();
        err.encode_reply(&mut out);
        assert_eq!(&out[..5], &[0x83, 0x00, 0x00, 0x00, 0x00]);
        let len = u32::from_be_bytes([out[5], out[6], out[7], out[8]]) as usize;
        assert_eq!(out.len(), HEADER_LEN + len);
    }

    #[test]
    fn refuses_v2_in_its_own_layout() {
        // v2 OPTIONS: 8-byte header with a one-byte stream, answered on stream 0
        // as Cassandra 5.0.9 does.
        let h = [0x02, 0x00, 0x05, 0x05, 0, 0, 0, 2];
        for n in 0..LEGACY_HEADER_LEN {
            assert_eq!(parse_header(&h[..n], MAX), Ok(None), "{n} bytes");
        }
        let err = parse_header(&h, MAX).unwrap_err();
        assert_eq!(err, FrameError::UnsupportedVersion { version: 2, stream: 0, body_len: 2 });
        assert_eq!(err.bytes_to_skip(), Some(LEGACY_HEADER_LEN + 2));
        let mut out = BytesMut::new();
        err.encode_reply(&mut out);
        assert_eq!(&out[..4], &[0x82, 0x00, 0x00, 0x00]);
        let len = u32::from_be_bytes([out[4], out[5], out[6], out[7]]) as usize;
        assert_eq!(out.len(), 8 + len);
    }

    #[test]
    fn rejects_bad_opcode_direction_and_size() {
        let h = [0x04, 0, 0, 2, 0x04, 0, 0, 0, 0];
        assert_eq!(parse_header(&h, MAX), Err(FrameError::UnknownOpcode { opcode: 4, stream: 2 }));
        let h = [0x04, 0, 0, 2, 0x02, 0, 0, 0, 0];
        assert!(matches!(parse_header(&h, MAX), Err(FrameError::WrongDirection { response_bit: false, .. })));
        let h = [0x84, 0, 0, 2, 0x07, 0, 0, 0, 0];
        assert!(matches!(parse_header(&h, MAX), Err(FrameError::WrongDirection { response_bit: true, .. })));
        let h = [0x04, 0, 0, 2, 0x07, 0xFF, 0xFF, 0xFF, 0xFF];
        let err = parse_header(&h, MAX).unwrap_err();
        assert_eq!(err.bytes_to_skip(), Some(HEADER_LEN + u32::MAX as usize));
        assert_eq!(err.stream(), 2);
        // Exactly at the limit is fine.
        let h = [0x04, 0, 0, 2, 0x07, 0, 0, 0, 91];
        assert!(parse_header(&h, 100).unwrap().is_some());
        let h = [0x04, 0, 0, 2, 0x07, 0, 0, 0, 92];
        assert!(parse_header(&h, 100).is_err());
    }
}
