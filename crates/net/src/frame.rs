//! The internode frame: one versioned, checksummed, length-prefixed message
//! envelope, and a streaming decoder over a `BytesMut`. Sans-IO: no sockets,
//! no clock.
//!
//! Layout (all integers big-endian; `FORMAT.md` has the same table):
//!
//! | offset  | size | field         | notes                                              |
//! |---------|------|---------------|----------------------------------------------------|
//! | 0       | 4    | `magic`       | `0x53484F4C` (`"SHOL"`)                             |
//! | 4       | 1    | `version`     | `1`                                                |
//! | 5       | 1    | `verb`        | [`Verb`] code                                      |
//! | 6       | 1    | `flags`       | bit 0 `IS_RESPONSE`, bit 1 `IS_ONE_WAY`, others 0  |
//! | 7       | 8    | `request_id`  | matches a response to its request; 0 for one-way   |
//! | 15      | 4    | `payload_len` | `n`, at most the decoder's `payload_bytes_max`     |
//! | 19      | n    | `payload`     | verb-specific (`message.rs`)                       |
//! | 19 + n  | 4    | `crc32c`      | CRC-32C of bytes `[0, 19 + n)`: header and payload |
//!
//! Invariants:
//! - `decode(encode(f)) == f` for every valid frame (tested for all verbs and
//!   flag combinations, and every truncation yields "need more bytes").
//! - The decoder never panics and never allocates more than the bytes it was
//!   given: the payload length is checked against `payload_bytes_max` as soon
//!   as the header is complete, before any payload arrives.
//! - A *fatal* [`FrameError`] (bad magic, unsupported version, unknown flags,
//!   oversized payload, checksum mismatch, flags contradicting the verb) means
//!   framing is lost or the peer is broken: the caller must drop the
//!   connection. The decoder consumes nothing on a fatal error.
//! - An unknown verb in an otherwise valid frame is *not* fatal: the frame is
//!   consumed and the error carries its request id and flags, so a newer peer's
//!   request can be answered with `Failure` instead of losing the connection.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crc32c::crc32c;

/// `"SHOL"`: rejects connections that speak anything else (HTTP, CQL, ...).
pub const MAGIC: u32 = 0x5348_4F4C;
/// The only frame version this build speaks.
pub const VERSION: u8 = 1;
/// Bytes before the payload.
pub const HEADER_LEN: usize = 19;
/// Bytes after the payload (the checksum).
pub const TRAILER_LEN: usize = 4;
/// Default payload limit: 16 MiB. Why: a mutation larger than Cassandra's
/// default `max_mutation_size` (half of a 32 MiB commit-log segment) is refused
/// anyway, and the limit bounds what one peer can make us buffer.
pub const PAYLOAD_BYTES_MAX_DEFAULT: u32 = 16 * 1024 * 1024;

/// What a message is, in Cassandra's nouns (`org.apache.cassandra.net.Verb`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Verb {
    /// First frame on every connection: the sender's listen address.
    Handshake = 0x00,
    /// The first frame of a bulk connection (`tcp`'s module docs): the same
    /// payload as `Handshake`, one-way; the connection then carries raw bytes.
    BulkHandshake = 0x03,
    Echo = 0x01,
    EchoRsp = 0x02,
    MutationReq = 0x10,
    MutationRsp = 0x11,
    ReadReq = 0x12,
    ReadRsp = 0x13,
    DigestReq = 0x14,
    DigestRsp = 0x15,
    /// Partition keys in a token range (range scans).
    ScanReq = 0x16,
    ScanRsp = 0x17,
    /// Read repair: merge these raw cells.
    RepairReq = 0x18,
    RepairRsp = 0x19,
    /// TRUNCATE of one table on every node.
    TruncateReq = 0x1A,
    TruncateRsp = 0x1B,
    HintReq = 0x20,
    HintRsp = 0x21,
    SchemaPush = 0x30,
    SchemaPull = 0x31,
    SchemaRsp = 0x32,
    /// Streaming (`cluster::stream`): export token ranges of a table for a session.
    StreamReq = 0x40,
    StreamRsp = 0x41,
    /// A chunk of one of a session's files.
    StreamChunkReq = 0x42,
    StreamChunkRsp = 0x43,
    /// The receiver holds the session's data: the export may go.
    StreamDoneReq = 0x44,
    StreamDoneRsp = 0x45,
    /// Repair's validation: hashes of a token range's partitions (`cluster::wire::HashesRequest`).
    HashesReq = 0x46,
    HashesRsp = 0x47,
    /// Pull ranges from a named source (a leaving node hands its ranges over).
    StreamPullReq = 0x48,
    StreamPullRsp = 0x49,
    /// Repair finished these ranges of a table: record when it began
    /// (repair-based tombstone GC, `cluster::repaired`).
    RepairedReq = 0x4A,
    RepairedRsp = 0x4B,
    /// Repair: this node's version of differing partitions; the replica merges
    /// them and answers what it holds that they lacked (`cluster::repair`).
    RepairPushReq = 0x4C,
    RepairPushRsp = 0x4D,
    /// Incremental repair: is each of these ranges repaired on the replica,
    /// at which write generation (`cluster::wire::RepairStateRequest`).
    RepairStateReq = 0x4E,
    RepairStateRsp = 0x4F,
    /// Lightweight transactions (`cluster::paxos`): promise a ballot and read.
    PaxosPrepareReq = 0x62,
    PaxosPrepareRsp = 0x63,
    /// Accept a proposal.
    PaxosProposeReq = 0x64,
    PaxosProposeRsp = 0x65,
    /// Apply a chosen proposal.
    PaxosCommitReq = 0x66,
    PaxosCommitRsp = 0x67,
    /// A counter update for the counter leader to apply and replicate
    /// (Cassandra's `COUNTER_MUTATION_REQ`, `cluster::counter`).
    CounterMutationReq = 0x60,
    CounterMutationRsp = 0x61,
    /// Secondary index lookup: the partitions holding a value in a token
    /// range, from the replica's local index (`cluster::wire::encode_index_scan`).
    IndexScanReq = 0x68,
    IndexScanRsp = 0x69,
    /// A request that belongs to a trace session (`TRACING ON`): the
    /// session id, then the inner request's verb and payload
    /// (`message::Traced`). The replica serves the inner request, recording
    /// its steps in the session, and answers with the inner request's
    /// response verb. A node older than tracing answers `Failure(UnknownVerb)`.
    TracedReq = 0x6A,
    /// A request that expires (Cassandra's message expiration with
    /// `internode_timeout`): the sender's creation time and timeout, then
    /// the inner request's verb and payload (`message::Expiring`). The
    /// transport wraps the verbs [`Verb::is_droppable`] says in it; the
    /// replica drops one whose sender has given up on it unanswered, counted
    /// as a dropped message of its inner verb, and otherwise answers with the
    /// inner request's response verb. A node older than it answers
    /// `Failure(UnknownVerb)`, and the sender sends that peer bare requests.
    ExpiringReq = 0x6B,
    /// A response carrying an error (`message::Failure`) instead of the
    /// request's normal response.
    Failure = 0x7F,
}

impl Verb {
    pub const ALL: [Verb; 50] = [
        Verb::Handshake,
        Verb::BulkHandshake,
        Verb::Echo,
        Verb::EchoRsp,
        Verb::MutationReq,
        Verb::MutationRsp,
        Verb::ReadReq,
        Verb::ReadRsp,
        Verb::DigestReq,
        Verb::DigestRsp,
        Verb::ScanReq,
        Verb::ScanRsp,
        Verb::RepairReq,
        Verb::RepairRsp,
        Verb::TruncateReq,
        Verb::TruncateRsp,
        Verb::HintReq,
        Verb::HintRsp,
        Verb::SchemaPush,
        Verb::SchemaPull,
        Verb::SchemaRsp,
        Verb::StreamReq,
        Verb::StreamRsp,
        Verb::StreamChunkReq,
        Verb::StreamChunkRsp,
        Verb::StreamDoneReq,
        Verb::StreamDoneRsp,
        Verb::HashesReq,
        Verb::HashesRsp,
        Verb::StreamPullReq,
        Verb::StreamPullRsp,
        Verb::RepairedReq,
        Verb::RepairedRsp,
        Verb::RepairPushReq,
        Verb::RepairPushRsp,
        Verb::RepairStateReq,
        Verb::RepairStateRsp,
        Verb::PaxosPrepareReq,
        Verb::PaxosPrepareRsp,
        Verb::PaxosProposeReq,
        Verb::PaxosProposeRsp,
        Verb::PaxosCommitReq,
        Verb::PaxosCommitRsp,
        Verb::Failure,
        Verb::CounterMutationReq,
        Verb::CounterMutationRsp,
        Verb::IndexScanReq,
        Verb::IndexScanRsp,
        Verb::TracedReq,
        Verb::ExpiringReq,
    ];

    pub fn code(self) -> u8 {
        self as u8
    }

    pub fn from_code(code: u8) -> Option<Verb> {
        Verb::ALL.into_iter().find(|v| v.code() == code)
    }

    /// The first frame of a connection: `Handshake` or `BulkHandshake`.
    pub fn is_handshake(self) -> bool {
        matches!(self, Verb::Handshake | Verb::BulkHandshake)
    }

    /// True for verbs a request (expecting a response) may carry: those
    /// with a response verb, `TracedReq` and `ExpiringReq`.
    pub fn is_request(self) -> bool {
        matches!(self, Verb::TracedReq | Verb::ExpiringReq) || self.response().is_some()
    }

    /// Requests a replica may drop unanswered once their sender has given
    /// up on them (Cassandra's droppable verbs: mutations, reads, range
    /// reads): serving them late does nothing for the client, whose
    /// coordinator has already answered or timed out (and hinted a
    /// mutation). The transport sends these in `ExpiringReq`.
    pub fn is_droppable(self) -> bool {
        matches!(self, Verb::MutationReq | Verb::ReadReq | Verb::DigestReq | Verb::ScanReq | Verb::IndexScanReq)
    }

    /// True for verbs that travel in response frames (`IS_RESPONSE` set).
    pub fn is_response(self) -> bool {
        matches!(
            self,
            Verb::EchoRsp
                | Verb::MutationRsp
                | Verb::ReadRsp
                | Verb::DigestRsp
                | Verb::ScanRsp
                | Verb::RepairRsp
                | Verb::TruncateRsp
                | Verb::HintRsp
                | Verb::SchemaRsp
                | Verb::StreamRsp
                | Verb::StreamChunkRsp
                | Verb::StreamDoneRsp
                | Verb::HashesRsp
                | Verb::StreamPullRsp
                | Verb::RepairedRsp
                | Verb::RepairPushRsp
                | Verb::RepairStateRsp
                | Verb::PaxosPrepareRsp
                | Verb::PaxosProposeRsp
                | Verb::PaxosCommitRsp
                | Verb::CounterMutationRsp
                | Verb::IndexScanRsp
                | Verb::Failure
        )
    }

    /// The normal response verb of a request verb (`None` for responses and
    /// for `Handshake`, which is never answered; `TracedReq` and `ExpiringReq`
    /// are answered with their inner request's, see [`Verb::is_request`]).
    pub fn response(self) -> Option<Verb> {
        match self {
            Verb::Echo => Some(Verb::EchoRsp),
            Verb::MutationReq => Some(Verb::MutationRsp),
            Verb::ReadReq => Some(Verb::ReadRsp),
            Verb::DigestReq => Some(Verb::DigestRsp),
            Verb::ScanReq => Some(Verb::ScanRsp),
            Verb::RepairReq => Some(Verb::RepairRsp),
            Verb::TruncateReq => Some(Verb::TruncateRsp),
            Verb::HintReq => Some(Verb::HintRsp),
            Verb::SchemaPush | Verb::SchemaPull => Some(Verb::SchemaRsp),
            Verb::StreamReq => Some(Verb::StreamRsp),
            Verb::StreamChunkReq => Some(Verb::StreamChunkRsp),
            Verb::StreamDoneReq => Some(Verb::StreamDoneRsp),
            Verb::HashesReq => Some(Verb::HashesRsp),
            Verb::StreamPullReq => Some(Verb::StreamPullRsp),
            Verb::RepairedReq => Some(Verb::RepairedRsp),
            Verb::RepairPushReq => Some(Verb::RepairPushRsp),
            Verb::RepairStateReq => Some(Verb::RepairStateRsp),
            Verb::PaxosPrepareReq => Some(Verb::PaxosPrepareRsp),
            Verb::PaxosProposeReq => Some(Verb::PaxosProposeRsp),
            Verb::PaxosCommitReq => Some(Verb::PaxosCommitRsp),
            Verb::CounterMutationReq => Some(Verb::CounterMutationRsp),
            Verb::IndexScanReq => Some(Verb::IndexScanRsp),
            _ => None,
        }
    }
}

/// Frame flags (one byte; unknown bits are a fatal error in version 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct Flags(u8);

impl Flags {
    pub const NONE: Flags = Flags(0);
    /// The frame answers the request with the same `request_id`.
    pub const IS_RESPONSE: Flags = Flags(0b01);
    /// The sender expects no response.
    pub const IS_ONE_WAY: Flags = Flags(0b10);
    const KNOWN: u8 = 0b11;

    pub fn bits(self) -> u8 {
        self.0
    }

    pub fn from_bits(bits: u8) -> Option<Flags> {
        (bits & !Flags::KNOWN == 0).then_some(Flags(bits))
    }

    pub fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }

    pub fn is_response(self) -> bool {
        self.contains(Flags::IS_RESPONSE)
    }

    pub fn is_one_way(self) -> bool {
        self.contains(Flags::IS_ONE_WAY)
    }
}

impl std::ops::BitOr for Flags {
    type Output = Flags;
    fn bitor(self, rhs: Flags) -> Flags {
        Flags(self.0 | rhs.0)
    }
}

/// One decoded (or to-be-encoded) frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub verb: Verb,
    pub flags: Flags,
    pub request_id: u64,
    pub payload: Bytes,
}

impl Frame {
    pub fn request(verb: Verb, request_id: u64, payload: Bytes) -> Frame {
        Frame { verb, flags: Flags::NONE, request_id, payload }
    }

    pub fn one_way(verb: Verb, payload: Bytes) -> Frame {
        Frame { verb, flags: Flags::IS_ONE_WAY, request_id: 0, payload }
    }

    pub fn response(verb: Verb, request_id: u64, payload: Bytes) -> Frame {
        Frame { verb, flags: Flags::IS_RESPONSE, request_id, payload }
    }

    /// Bytes this frame occupies on the wire.
    pub fn encoded_len(&self) -> usize {
        HEADER_LEN + self.payload.len() + TRAILER_LEN
    }

    /// Appends the frame to `dst`.
    ///
    /// Panics if the payload exceeds `u32::MAX` bytes: senders check payloads
    /// against the (much smaller) configured limit before queueing them.
    pub fn encode(&self, dst: &mut BytesMut) {
        let payload_len =
            u32::try_from(self.payload.len()).expect("internode payload over 4 GiB: callers check the limit first");
        let start = dst.len();
        dst.reserve(self.encoded_len());
        dst.put_u32(MAGIC);
        dst.put_u8(VERSION);
        dst.put_u8(self.verb.code());
        dst.put_u8(self.flags.bits());
        dst.put_u64(self.request_id);
        dst.put_u32(payload_len);
        dst.put_slice(&self.payload);
        let crc = match dst.get(start..) {
            Some(written) => crc32c(written),
            None => unreachable!("the frame was just appended at `start`"),
        };
        dst.put_u32(crc);
        debug_assert_eq!(dst.len() - start, self.encoded_len());
    }

    /// The frame as one `Bytes` (tests and the in-memory network).
    pub fn to_bytes(&self) -> Bytes {
        let mut buf = BytesMut::with_capacity(self.encoded_len());
        self.encode(&mut buf);
        buf.freeze()
    }
}

/// Why bytes could not be decoded as a frame.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    #[error("bad internode magic {found:#010x}: the peer does not speak the Shoal internode protocol")]
    BadMagic { found: u32 },
    #[error("unsupported internode frame version {found} (this node speaks {VERSION})")]
    UnsupportedVersion { found: u8 },
    #[error("unknown internode frame flags {bits:#04x}")]
    UnknownFlags { bits: u8 },
    #[error("internode payload of {len} bytes exceeds the limit of {max} bytes")]
    PayloadTooLarge { len: u32, max: u32 },
    #[error("internode frame checksum mismatch: frame says {expected:#010x}, bytes give {actual:#010x}")]
    ChecksumMismatch { expected: u32, actual: u32 },
    #[error("internode frame flags {bits:#04x} contradict verb {verb:?}")]
    FlagsContradictVerb { verb: Verb, bits: u8 },
    /// Not fatal: the frame was consumed; answer `Failure` if it is a request.
    #[error("unknown internode verb {code:#04x} (request {request_id})")]
    UnknownVerb { code: u8, flags: Flags, request_id: u64 },
}

impl FrameError {
    /// True when the connection must be dropped: framing is lost or the peer
    /// speaks something else.
    pub fn is_fatal(&self) -> bool {
        !matches!(self, FrameError::UnknownVerb { .. })
    }
}

/// Splits a byte stream into frames.
#[derive(Clone, Debug)]
pub struct FrameDecoder {
    payload_bytes_max: u32,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        FrameDecoder::new(PAYLOAD_BYTES_MAX_DEFAULT)
    }
}

struct Header {
    verb_code: u8,
    flags_bits: u8,
    request_id: u64,
    payload_len: u32,
}

impl FrameDecoder {
    pub fn new(payload_bytes_max: u32) -> FrameDecoder {
        // The whole frame's length must fit in a u32-sized usize computation.
        assert!(payload_bytes_max <= u32::MAX - (HEADER_LEN + TRAILER_LEN) as u32);
        FrameDecoder { payload_bytes_max }
    }

    pub fn payload_bytes_max(&self) -> u32 {
        self.payload_bytes_max
    }

    /// Validates the fixed header. Checks run in wire order so garbage is
    /// reported as the first thing that is wrong with it.
    fn header(&self, src: &[u8]) -> Result<Option<Header>, FrameError> {
        let Some(mut h) = src.get(..HEADER_LEN) else {
            // Fail fast on a bad magic even before the header is complete.
            if let Some(&[b0, b1, b2, b3]) = src.get(..4) {
                let found = u32::from_be_bytes([b0, b1, b2, b3]);
                if found != MAGIC {
                    return Err(FrameError::BadMagic { found });
                }
            }
            return Ok(None);
        };
        let magic = h.get_u32();
        if magic != MAGIC {
            return Err(FrameError::BadMagic { found: magic });
        }
        let version = h.get_u8();
        if version != VERSION {
            return Err(FrameError::UnsupportedVersion { found: version });
        }
        let verb_code = h.get_u8();
        let flags_bits = h.get_u8();
        if Flags::from_bits(flags_bits).is_none() {
            return Err(FrameError::UnknownFlags { bits: flags_bits });
        }
        let request_id = h.get_u64();
        let payload_len = h.get_u32();
        if payload_len > self.payload_bytes_max {
            return Err(FrameError::PayloadTooLarge { len: payload_len, max: self.payload_bytes_max });
        }
        Ok(Some(Header { verb_code, flags_bits, request_id, payload_len }))
    }

    /// Bytes needed before the next frame can be decoded (at least the header),
    /// so readers can size their buffer. Errors as [`FrameDecoder::decode`].
    pub fn bytes_needed(&self, src: &[u8]) -> Result<usize, FrameError> {
        Ok(match self.header(src)? {
            None => HEADER_LEN,
            Some(h) => HEADER_LEN + h.payload_len as usize + TRAILER_LEN,
        })
    }

    /// Takes one complete frame off the front of `src`, or returns `Ok(None)`
    /// when more bytes are needed. The payload shares `src`'s memory.
    pub fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        let Some(header) = self.header(src)? else { return Ok(None) };
        let body_end = HEADER_LEN + header.payload_len as usize;
        let total = body_end + TRAILER_LEN;
        let (Some(body), Some(&[t0, t1, t2, t3])) = (src.get(..body_end), src.get(body_end..total)) else {
            return Ok(None);
        };
        let expected = u32::from_be_bytes([t0, t1, t2, t3]);
        let actual = crc32c(body);
        if expected != actual {
            return Err(FrameError::ChecksumMismatch { expected, actual });
        }
        let flags = Flags::from_bits(header.flags_bits).unwrap_or_default();
        let Some(verb) = Verb::from_code(header.verb_code) else {
            src.advance(total);
            return Err(FrameError::UnknownVerb { code: header.verb_code, flags, request_id: header.request_id });
        };
        let contradiction = if verb.is_response() {
            // A response is never one-way and always flagged as a response.
            !flags.is_response() || flags.is_one_way()
        } else {
            flags.is_response() || (verb.is_handshake() && !flags.is_one_way())
        };
        if contradiction {
            return Err(FrameError::FlagsContradictVerb { verb, bits: header.flags_bits });
        }
        let mut frame_bytes = src.split_to(total);
        frame_bytes.truncate(body_end);
        let payload = frame_bytes.freeze().slice(HEADER_LEN..);
        Ok(Some(Frame { verb, flags, request_id: header.request_id, payload }))
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};

    use super::*;

    fn sample_frames() -> Vec<Frame> {
        let mut frames = Vec::new();
        for (i, verb) in Verb::ALL.into_iter().enumerate() {
            let payload = Bytes::from((0..i * 7).map(|b| b as u8).collect::<Vec<u8>>());
            let frame = if verb.is_response() {
                Frame::response(verb, i as u64 * 1_000_003, payload)
            } else if verb.is_handshake() {
                Frame::one_way(verb, payload)
            } else if i % 2 == 0 {
                Frame::request(verb, u64::MAX - i as u64, payload)
            } else {
                Frame::one_way(verb, payload)
            };
            frames.push(frame);
        }
        frames
    }

    #[test]
    fn verb_codes_round_trip_and_are_distinct() {
        let mut codes: Vec<u8> = Verb::ALL.iter().map(|v| v.code()).collect();
        for v in Verb::ALL {
            assert_eq!(Verb::from_code(v.code()), Some(v));
            if let Some(r) = v.response() {
                assert!(r.is_response(), "{v:?} -> {r:?}");
                assert!(!v.is_response());
            }
        }
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), Verb::ALL.len());
        let unknown = (0..=255u8).filter(|c| Verb::from_code(*c).is_none()).count();
        assert_eq!(unknown, 256 - Verb::ALL.len());
    }

    #[test]
    fn layout_is_as_documented() {
        let frame = Frame::request(Verb::MutationReq, 0x0102_0304_0506_0708, Bytes::from_static(b"abc"));
        let bytes = frame.to_bytes();
        assert_eq!(bytes.len(), HEADER_LEN + 3 + TRAILER_LEN);
        assert_eq!(&bytes[..4], b"SHOL");
        assert_eq!(bytes[4], VERSION);
        assert_eq!(bytes[5], 0x10);
        assert_eq!(bytes[6], 0);
        assert_eq!(&bytes[7..15], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&bytes[15..19], &[0, 0, 0, 3]);
        assert_eq!(&bytes[19..22], b"abc");
        assert_eq!(&bytes[22..], &crc32c(&bytes[..22]).to_be_bytes());
    }

    #[test]
    fn round_trip_every_verb_back_to_back() {
        let frames = sample_frames();
        let mut buf = BytesMut::new();
        for f in &frames {
            f.encode(&mut buf);
        }
        let mut decoder = FrameDecoder::default();
        for f in &frames {
            assert_eq!(decoder.decode(&mut buf).unwrap().as_ref(), Some(f));
        }
        assert!(buf.is_empty());
        assert_eq!(decoder.decode(&mut buf), Ok(None));
    }

    #[test]
    fn every_truncation_needs_more_bytes() {
        for f in sample_frames() {
            let bytes = f.to_bytes();
            for cut in 0..bytes.len() {
                let mut buf = BytesMut::from(&bytes[..cut]);
                assert_eq!(FrameDecoder::default().decode(&mut buf), Ok(None), "{f:?} cut at {cut}");
                assert_eq!(buf.len(), cut, "nothing consumed");
            }
            let mut buf = BytesMut::from(&bytes[..]);
            assert_eq!(FrameDecoder::default().decode(&mut buf), Ok(Some(f)));
        }
    }

    #[test]
    fn byte_at_a_time_feeding() {
        let frames = sample_frames();
        let mut wire = BytesMut::new();
        for f in &frames {
            f.encode(&mut wire);
        }
        let mut decoder = FrameDecoder::default();
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for b in wire.iter() {
            buf.put_u8(*b);
            while let Some(f) = decoder.decode(&mut buf).unwrap() {
                out.push(f);
            }
        }
        assert_eq!(out, frames);
    }

    #[test]
    fn bad_header_fields_are_fatal() {
        let good = Frame::request(Verb::Echo, 7, Bytes::from_static(b"ping")).to_bytes();
        let mut dec = FrameDecoder::default();

        let mut bad = BytesMut::from(&good[..]);
        bad[0] = b'X';
        let err = dec.decode(&mut bad).unwrap_err();
        assert!(matches!(err, FrameError::BadMagic { .. }) && err.is_fatal());
        // Bad magic is noticed from the first four bytes alone.
        let mut http = BytesMut::from(&b"GET / HTTP/1.1\r\n"[..]);
        assert!(matches!(dec.decode(&mut http), Err(FrameError::BadMagic { .. })));

        let mut bad = BytesMut::from(&good[..]);
        bad[4] = 2;
        assert_eq!(dec.decode(&mut bad), Err(FrameError::UnsupportedVersion { found: 2 }));

        let mut bad = BytesMut::from(&good[..]);
        bad[6] = 0x80;
        assert_eq!(dec.decode(&mut bad), Err(FrameError::UnknownFlags { bits: 0x80 }));

        let mut bad = BytesMut::from(&good[..]);
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert!(matches!(dec.decode(&mut bad), Err(FrameError::ChecksumMismatch { .. })));

        let mut bad = BytesMut::from(&good[..]);
        bad[20] ^= 0x40;
        assert!(matches!(dec.decode(&mut bad), Err(FrameError::ChecksumMismatch { .. })));
        assert_eq!(bad.len(), good.len(), "a fatal error consumes nothing");
    }

    #[test]
    fn oversized_payload_is_refused_from_the_header_alone() {
        let mut dec = FrameDecoder::new(1024);
        let big = Frame::request(Verb::MutationReq, 1, Bytes::from(vec![0u8; 1025])).to_bytes();
        let mut header_only = BytesMut::from(&big[..HEADER_LEN]);
        assert_eq!(dec.decode(&mut header_only), Err(FrameError::PayloadTooLarge { len: 1025, max: 1024 }));
        assert_eq!(dec.bytes_needed(&big[..HEADER_LEN]), Err(FrameError::PayloadTooLarge { len: 1025, max: 1024 }));
        let at_limit = Frame::request(Verb::MutationReq, 1, Bytes::from(vec![0u8; 1024])).to_bytes();
        assert_eq!(dec.bytes_needed(&at_limit[..3]), Ok(HEADER_LEN));
        assert_eq!(dec.bytes_needed(&at_limit[..HEADER_LEN]), Ok(at_limit.len()));
        assert!(dec.decode(&mut BytesMut::from(&at_limit[..])).unwrap().is_some());
    }

    #[test]
    fn flags_must_agree_with_the_verb() {
        let cases = [
            Frame { verb: Verb::EchoRsp, flags: Flags::NONE, request_id: 1, payload: Bytes::new() },
            Frame {
                verb: Verb::EchoRsp,
                flags: Flags::IS_RESPONSE | Flags::IS_ONE_WAY,
                request_id: 1,
                payload: Bytes::new(),
            },
            Frame { verb: Verb::Echo, flags: Flags::IS_RESPONSE, request_id: 1, payload: Bytes::new() },
            Frame { verb: Verb::Handshake, flags: Flags::NONE, request_id: 1, payload: Bytes::new() },
        ];
        for f in cases {
            let mut buf = BytesMut::from(&f.to_bytes()[..]);
            let err = FrameDecoder::default().decode(&mut buf).unwrap_err();
            assert!(matches!(err, FrameError::FlagsContradictVerb { .. }), "{f:?}: {err:?}");
            assert!(err.is_fatal());
        }
    }

    #[test]
    fn unknown_verb_is_consumed_and_not_fatal() {
        let mut wire = Frame::request(Verb::Echo, 5, Bytes::from_static(b"x")).to_bytes().to_vec();
        wire[5] = 0x6E;
        let crc = crc32c(&wire[..wire.len() - 4]);
        let n = wire.len();
        wire[n - 4..].copy_from_slice(&crc.to_be_bytes());
        let next = Frame::request(Verb::Echo, 6, Bytes::from_static(b"y"));
        let mut buf = BytesMut::from(&wire[..]);
        next.encode(&mut buf);
        let mut dec = FrameDecoder::default();
        let err = dec.decode(&mut buf).unwrap_err();
        assert_eq!(err, FrameError::UnknownVerb { code: 0x6E, flags: Flags::NONE, request_id: 5 });
        assert!(!err.is_fatal());
        assert_eq!(dec.decode(&mut buf), Ok(Some(next)));
    }

    /// Seeded garbage: the decoder never panics, never consumes bytes on a fatal
    /// error, and whatever it returns as a frame re-encodes to the same bytes.
    #[test]
    fn random_garbage_never_panics() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x5EED_F4A3);
        let valid: Vec<Bytes> = sample_frames().iter().map(Frame::to_bytes).collect();
        for round in 0..20_000 {
            let mut bytes: Vec<u8> = match round % 3 {
                // Pure noise.
                0 => (0..rng.gen_range(0..64)).map(|_| rng.gen()).collect(),
                // A valid frame with a few bytes flipped.
                1 => {
                    let mut v = valid[rng.gen_range(0..valid.len())].to_vec();
                    for _ in 0..rng.gen_range(1..4) {
                        let i = rng.gen_range(0..v.len());
                        v[i] = rng.gen();
                    }
                    v
                }
                // A valid header prefix followed by noise.
                _ => {
                    let mut v = valid[rng.gen_range(0..valid.len())][..HEADER_LEN].to_vec();
                    v.extend((0..rng.gen_range(0..48)).map(|_| rng.gen::<u8>()));
                    v
                }
            };
            bytes.truncate(rng.gen_range(0..=bytes.len()));
            let mut dec = FrameDecoder::new(rng.gen_range(0..4096));
            let mut buf = BytesMut::from(&bytes[..]);
            for _ in 0..8 {
                let before = buf.len();
                match dec.decode(&mut buf) {
                    Ok(Some(f)) => assert_eq!(before - buf.len(), f.encoded_len()),
                    Ok(None) => break,
                    Err(e) if e.is_fatal() => {
                        assert_eq!(buf.len(), before);
                        break;
                    }
                    Err(_) => assert!(buf.len() < before),
                }
            }
        }
    }
}
