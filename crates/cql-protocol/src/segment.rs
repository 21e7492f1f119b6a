//! Protocol v5 framing: the segments (the v5 spec's "frames") that carry
//! envelopes once the server has answered STARTUP (READY or AUTHENTICATE).
//!
//! ```text
//! uncompressed: | 3 bytes LE: payload length (17 bits), self-contained (bit 17) | CRC24 (3 bytes LE) |
//!               | payload (<= 128 KiB - 1) | CRC32 of the payload (4 bytes LE) |
//! lz4:          | 5 bytes LE: compressed length (17 bits), uncompressed length (17 bits), self-contained
//!               | (bit 34) | CRC24 (3 bytes LE) | payload | CRC32 of the payload as sent (4 bytes LE) |
//! ```
//!
//! Facts from the spec (`native_protocol_v5.spec` section 2) and Cassandra's
//! `FrameEncoderCrc`, `FrameEncoderLZ4` and `Crc`:
//! - The CRC24 covers the header bytes before it (3 or 5), read as a
//!   little-endian integer, with Cassandra's polynomial 0x1974F0B and initial
//!   value 0x875060.
//! - The CRC32 is zlib's CRC-32 of the payload, started with the four bytes
//!   `FA 2D 55 CA` (Cassandra's `Crc.crc32()`).
//! - In an LZ4 segment the payload is one raw LZ4 block; an uncompressed length
//!   of 0 means the payload was sent uncompressed (it would not shrink).
//! - A self-contained segment holds one or more whole envelopes; an envelope
//!   longer than [`MAX_PAYLOAD`] goes in consecutive segments that are not
//!   self-contained.
//!
//! Invariants:
//! - [`SegmentCodec::encode`] is given whole envelopes, back to back, and cuts
//!   only at envelope boundaries except inside an envelope that alone exceeds
//!   [`MAX_PAYLOAD`]; every segment it writes decodes with [`SegmentCodec::decode`].
//! - [`SegmentCodec::decode`] consumes only complete segments, checks both
//!   CRCs before it uses a length or a byte of payload, never inflates an LZ4
//!   payload past the 17-bit length, and never panics. It appends payloads in
//!   order: the envelope layer above reads them as one stream, so an envelope
//!   split across segments comes out whole (the self-contained flag is not
//!   needed to reassemble, and is not checked).
//! - A CRC mismatch is not recoverable: Cassandra 5.0.9 answers a ProtocolError
//!   on stream 0, `<connection id> invalid, unrecoverable CRC mismatch detected
//!   in frame header. Read 15335787, Computed 15401323` (`body` for the CRC32,
//!   its values as Java's signed ints), in a segment, then closes the
//!   connection (checked with raw segments against a running node); the
//!   server does the same with [`SegmentError`]'s message.

use bytes::{BufMut, BytesMut};

/// The largest payload of one segment (uncompressed length, for LZ4 too).
pub const MAX_PAYLOAD: usize = 128 * 1024 - 1;
/// Header of an uncompressed segment (3 bytes of fields, 3 of CRC24).
pub const UNCOMPRESSED_HEADER_LEN: usize = 6;
/// Header of an LZ4 segment (5 bytes of fields, 3 of CRC24).
pub const COMPRESSED_HEADER_LEN: usize = 8;
/// The CRC32 that follows the payload.
pub const TRAILER_LEN: usize = 4;

const CRC24_INIT: u32 = 0x875060;
const CRC24_POLY: u32 = 0x1974F0B;
const CRC32_SEED: [u8; 4] = [0xFA, 0x2D, 0x55, 0xCA];
const SELF_CONTAINED_BIT: u64 = 1 << 17;
const LZ4_SELF_CONTAINED_BIT: u64 = 1 << 34;
const LEN_MASK: u64 = 0x1FFFF;

/// Cassandra's CRC24 of the `len` low bytes of `bytes`, lowest byte first.
pub fn crc24(mut bytes: u64, len: usize) -> u32 {
    let mut crc = CRC24_INIT;
    for _ in 0..len {
        crc ^= ((bytes & 0xFF) as u32) << 16;
        bytes >>= 8;
        for _ in 0..8 {
            crc <<= 1;
            if crc & 0x100_0000 != 0 {
                crc ^= CRC24_POLY;
            }
        }
    }
    crc & 0xFF_FFFF
}

/// Cassandra's CRC32 of a payload: CRC-32 (zlib's) seeded with `FA 2D 55 CA`.
pub fn crc32(payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&CRC32_SEED);
    h.update(payload);
    h.finalize()
}

/// A segment that cannot be read: the connection is lost. The messages are
/// Cassandra 5.0.9's, less the connection id it puts first.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SegmentError {
    #[error("invalid, unrecoverable CRC mismatch detected in frame header. Read {read}, Computed {computed}")]
    HeaderCrc { read: u32, computed: u32 },
    /// The CRC32s are shown as Java shows them: signed.
    #[error(
        "invalid, unrecoverable CRC mismatch detected in frame body. Read {}, Computed {}",
        *read as i32,
        *computed as i32
    )]
    PayloadCrc { read: u32, computed: u32 },
    #[error("invalid frame: lz4 payload does not decompress: {0}")]
    Decompression(String),
}

/// Encoder and decoder of segments, uncompressed or LZ4 (what STARTUP chose).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentCodec {
    lz4: bool,
}

impl SegmentCodec {
    /// Uncompressed segments.
    pub const PLAIN: SegmentCodec = SegmentCodec { lz4: false };
    /// LZ4 segments.
    pub const LZ4: SegmentCodec = SegmentCodec { lz4: true };

    pub fn is_lz4(self) -> bool {
        self.lz4
    }

    fn header_len(self) -> usize {
        if self.lz4 {
            COMPRESSED_HEADER_LEN
        } else {
            UNCOMPRESSED_HEADER_LEN
        }
    }

    /// Appends `envelopes` (whole envelopes, back to back) to `out` as
    /// segments: runs of whole envelopes in self-contained segments of at most
    /// [`MAX_PAYLOAD`] bytes, and each envelope longer than that alone, cut
    /// into segments that are not self-contained.
    pub fn encode(self, envelopes: &[u8], out: &mut BytesMut) {
        let mut rest = envelopes;
        while !rest.is_empty() {
            // Whole envelopes that fit one payload.
            let mut run = 0;
            while let Some(len) = rest.get(run..).and_then(envelope_len) {
                if run + len > MAX_PAYLOAD {
                    break;
                }
                run += len;
            }
            if run == 0 {
                // One envelope too long for a segment (or bytes that are no
                // envelope: sent as they are rather than lost).
                let len = envelope_len(rest).unwrap_or(rest.len()).min(rest.len());
                let (big, tail) = rest.split_at(len);
                if big.len() <= MAX_PAYLOAD {
                    self.write_segment(big, true, out);
                } else {
                    for part in big.chunks(MAX_PAYLOAD) {
                        self.write_segment(part, false, out);
                    }
                }
                rest = tail;
            } else {
                let (whole, tail) = rest.split_at(run);
                self.write_segment(whole, true, out);
                rest = tail;
            }
        }
    }

    /// Appends one segment holding `payload` (at most [`MAX_PAYLOAD`] bytes).
    pub fn write_segment(self, payload: &[u8], self_contained: bool, out: &mut BytesMut) {
        debug_assert!(payload.len() <= MAX_PAYLOAD);
        if !self.lz4 {
            out.reserve(UNCOMPRESSED_HEADER_LEN + payload.len() + TRAILER_LEN);
            let mut header = payload.len() as u64 & LEN_MASK;
            if self_contained {
                header |= SELF_CONTAINED_BIT;
            }
            put_le(out, header, 3);
            put_le(out, u64::from(crc24(header, 3)), 3);
            out.extend_from_slice(payload);
            out.put_u32_le(crc32(payload));
            return;
        }
        let at = out.len();
        let bound = lz4_flex::block::get_maximum_output_size(payload.len());
        out.resize(at + COMPRESSED_HEADER_LEN + bound, 0);
        let body_at = at + COMPRESSED_HEADER_LEN;
        let compressed = out
            .get_mut(body_at..)
            .and_then(|dst| lz4_flex::block::compress_into(payload, dst).ok())
            .filter(|&n| n < payload.len());
        let (sent_len, uncompressed_len) = match compressed {
            Some(n) => (n, payload.len()),
            None => {
                // Would not shrink: sent as is, uncompressed length 0.
                out.truncate(body_at);
                out.extend_from_slice(payload);
                (payload.len(), 0)
            }
        };
        out.truncate(body_at + sent_len);
        let mut header = (sent_len as u64 & LEN_MASK) | ((uncompressed_len as u64 & LEN_MASK) << 17);
        if self_contained {
            header |= LZ4_SELF_CONTAINED_BIT;
        }
        let word = header | (u64::from(crc24(header, 5)) << 40);
        if let Some(h) = out.get_mut(at..body_at) {
            h.copy_from_slice(&word.to_le_bytes());
        }
        let crc = out.get(body_at..).map_or(0, crc32);
        out.put_u32_le(crc);
    }

    /// Decodes the complete segments at the head of `input` (removing them)
    /// and appends their payloads to `out`. A partial segment stays in
    /// `input` for the next call.
    pub fn decode(self, input: &mut BytesMut, out: &mut BytesMut) -> Result<(), SegmentError> {
        loop {
            let header_len = self.header_len();
            let Some(raw) = input.get(..header_len) else {
                return Ok(());
            };
            let fields_len = header_len - 3;
            let fields = le(raw.get(..fields_len).unwrap_or_default());
            let read = le(raw.get(fields_len..).unwrap_or_default()) as u32;
            let computed = crc24(fields, fields_len);
            if read != computed {
                return Err(SegmentError::HeaderCrc { read, computed });
            }
            let sent_len = (fields & LEN_MASK) as usize;
            let uncompressed_len = if self.lz4 { ((fields >> 17) & LEN_MASK) as usize } else { 0 };
            let total = header_len + sent_len + TRAILER_LEN;
            if input.len() < total {
                input.reserve(total - input.len());
                return Ok(());
            }
            let segment = input.split_to(total);
            let payload = segment.get(header_len..header_len + sent_len).unwrap_or_default();
            let trailer = segment.get(header_len + sent_len..).unwrap_or_default();
            let read = le(trailer) as u32;
            let computed = crc32(payload);
            if read != computed {
                return Err(SegmentError::PayloadCrc { read, computed });
            }
            if uncompressed_len == 0 {
                out.extend_from_slice(payload);
            } else {
                let at = out.len();
                out.resize(at + uncompressed_len, 0);
                let dst = out.get_mut(at..).unwrap_or_default();
                match lz4_flex::block::decompress_into(payload, dst) {
                    Ok(n) if n == uncompressed_len => {}
                    Ok(n) => {
                        return Err(SegmentError::Decompression(format!(
                            "expected {uncompressed_len} bytes, block holds {n}"
                        )))
                    }
                    Err(e) => return Err(SegmentError::Decompression(e.to_string())),
                }
            }
        }
    }
}

/// The length (header and body) of the envelope at the start of `bytes`, when
/// its 9-byte header is there.
fn envelope_len(bytes: &[u8]) -> Option<usize> {
    let len = bytes.get(5..9)?;
    let body = u32::from_be_bytes(len.try_into().ok()?) as usize;
    Some(crate::frame::HEADER_LEN + body)
}

fn put_le(out: &mut BytesMut, value: u64, len: usize) {
    out.extend_from_slice(value.to_le_bytes().get(..len).unwrap_or_default());
}

fn le(bytes: &[u8]) -> u64 {
    bytes.iter().rev().fold(0, |acc, &b| (acc << 8) | u64::from(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope(stream: i16, body_len: usize, fill: u8) -> Vec<u8> {
        let mut e = vec![0x85, 0, 0, 0, 0x08];
        e[2..4].copy_from_slice(&stream.to_be_bytes());
        e.extend_from_slice(&(body_len as u32).to_be_bytes());
        e.extend((0..body_len).map(|i| fill.wrapping_add((i % 251) as u8)));
        e
    }

    fn decode_all(codec: SegmentCodec, bytes: &[u8]) -> Vec<u8> {
        let mut input = BytesMut::from(bytes);
        let mut out = BytesMut::new();
        codec.decode(&mut input, &mut out).unwrap();
        assert!(input.is_empty(), "{} bytes left", input.len());
        out.to_vec()
    }

    /// Splits encoded segments into (self_contained, payload length) pairs.
    fn segments(codec: SegmentCodec, mut bytes: &[u8]) -> Vec<(bool, usize)> {
        let mut v = Vec::new();
        while !bytes.is_empty() {
            let h = le(&bytes[..codec.header_len() - 3]);
            let (len, sc) = if codec.lz4 { (h & LEN_MASK, h >> 34 & 1 == 1) } else { (h & LEN_MASK, h >> 17 & 1 == 1) };
            let uncompressed = if codec.lz4 { ((h >> 17) & LEN_MASK) as usize } else { 0 };
            v.push((sc, if uncompressed > 0 { uncompressed } else { len as usize }));
            bytes = &bytes[codec.header_len() + len as usize + TRAILER_LEN..];
        }
        v
    }

    #[test]
    fn crc_vectors() {
        // Headers and trailers of segments Cassandra 5.0.9 sent (raw sockets):
        // a 0x44-byte and a 0x69-byte self-contained payload.
        assert_eq!(crc24(0x44 | SELF_CONTAINED_BIT, 3), 0xB091A7);
        assert_eq!(crc24(0x69 | SELF_CONTAINED_BIT, 3), 0xA29451);
        // Its LZ4 segment: 958 bytes compressed, 1107 uncompressed, self-contained.
        assert_eq!(crc24(958 | (1107 << 17) | LZ4_SELF_CONTAINED_BIT, 5), 0x9A0987);
        // CRC-32 facts: the empty payload's CRC is the seed's own CRC-32, and
        // the seed is fed before the payload.
        assert_eq!(crc32(b""), crc32fast::hash(&CRC32_SEED));
        assert_eq!(crc32(b"abc"), crc32fast::hash(b"\xFA\x2D\x55\xCAabc"));
    }

    #[test]
    fn errors_read_as_cassandra_writes_them() {
        // The values of a run against Cassandra 5.0.9 (header 3b 00 02 6b 01 ea,
        // then trailer 67 0d 89 ef for a payload whose CRC32 ends in 0x66).
        let e = SegmentError::HeaderCrc { read: 0xEA016B, computed: 0xEB016B };
        assert_eq!(
            e.to_string(),
            "invalid, unrecoverable CRC mismatch detected in frame header. Read 15335787, Computed 15401323"
        );
        let e = SegmentError::PayloadCrc { read: 0xEF89_0D67, computed: 0xEF89_0D66 };
        assert_eq!(
            e.to_string(),
            "invalid, unrecoverable CRC mismatch detected in frame body. Read -276230809, Computed -276230810"
        );
    }

    #[test]
    fn decodes_a_cassandra_lz4_segment() {
        let hex = include_str!("testdata/cassandra_lz4_segment.hex").trim();
        let wire: Vec<u8> =
            (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
        let out = decode_all(SegmentCodec::LZ4, &wire);
        assert_eq!(out.len(), 1107);
        // One whole RESULT envelope (v5 response, stream 1, opcode 0x08).
        assert_eq!(&out[..5], &[0x85, 0, 0, 1, 0x08]);
        assert_eq!(envelope_len(&out), Some(out.len()));
        // And the uncompressed codec refuses it (its header CRC is over 5 bytes).
        let mut input = BytesMut::from(&wire[..]);
        assert!(SegmentCodec::PLAIN.decode(&mut input, &mut BytesMut::new()).is_err());
    }

    #[test]
    fn matches_a_cassandra_segment() {
        // A segment Cassandra 5.0.9 sent (RESULT Rows of `SELECT release_version
        // FROM system.local`), captured with raw sockets: header, CRC24, CRC32.
        let payload: &[u8] = b"\x85\x00\x00\x01\x08\x00\x00\x00;\x00\x00\x00\x02\x00\x00\x00\x01\x00\x00\x00\x01\x00\x06system\x00\x05local\x00\x0frelease_version\x00\r\x00\x00\x00\x01\x00\x00\x00\x055.0.9";
        let wire: Vec<u8> = [&b"D\x00\x02\xa7\x91\xb0"[..], payload, &b"\xc9\xdc6K"[..]].concat();
        assert_eq!(payload.len(), 0x44);
        let mut out = BytesMut::new();
        SegmentCodec::PLAIN.encode(payload, &mut out);
        assert_eq!(&out[..], &wire[..]);
        assert_eq!(decode_all(SegmentCodec::PLAIN, &wire), payload);
    }

    #[test]
    fn several_envelopes_share_a_self_contained_segment() {
        for codec in [SegmentCodec::PLAIN, SegmentCodec::LZ4] {
            let bytes: Vec<u8> = [envelope(1, 10, 0), envelope(2, 0, 0), envelope(3, 1000, 7)].concat();
            let mut out = BytesMut::new();
            codec.encode(&bytes, &mut out);
            assert_eq!(segments(codec, &out), vec![(true, bytes.len())]);
            assert_eq!(decode_all(codec, &out), bytes);
        }
    }

    #[test]
    fn big_envelopes_are_split_and_joined() {
        for codec in [SegmentCodec::PLAIN, SegmentCodec::LZ4] {
            let big = envelope(5, 3 * MAX_PAYLOAD + 100, 3);
            let small = envelope(6, 20, 1);
            let exact = envelope(7, MAX_PAYLOAD - 9, 9);
            let bytes: Vec<u8> = [small.clone(), big.clone(), small.clone(), exact.clone()].concat();
            let mut out = BytesMut::new();
            codec.encode(&bytes, &mut out);
            let segs = segments(codec, &out);
            assert_eq!(
                segs,
                vec![
                    (true, small.len()),
                    (false, MAX_PAYLOAD),
                    (false, MAX_PAYLOAD),
                    (false, MAX_PAYLOAD),
                    (false, big.len() - 3 * MAX_PAYLOAD),
                    (true, small.len()),
                    (true, MAX_PAYLOAD),
                ]
            );
            assert_eq!(decode_all(codec, &out), bytes);
        }
    }

    #[test]
    fn partial_segments_wait() {
        for codec in [SegmentCodec::PLAIN, SegmentCodec::LZ4] {
            let bytes = [envelope(1, 300_000, 1), envelope(2, 5, 2)].concat();
            let mut wire = BytesMut::new();
            codec.encode(&bytes, &mut wire);
            // Byte by byte in uneven chunks.
            let mut input = BytesMut::new();
            let mut out = BytesMut::new();
            for chunk in wire.chunks(7777) {
                input.extend_from_slice(chunk);
                codec.decode(&mut input, &mut out).unwrap();
            }
            assert!(input.is_empty());
            assert_eq!(&out[..], &bytes[..]);
        }
    }

    #[test]
    fn incompressible_lz4_payload_is_sent_raw() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let noise: Vec<u8> = (0..500)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let bytes = [&envelope(1, 0, 0)[..5], &(500u32).to_be_bytes()[..], &noise[..]].concat();
        let mut out = BytesMut::new();
        SegmentCodec::LZ4.encode(&bytes, &mut out);
        let h = le(&out[..5]);
        assert_eq!((h >> 17) & LEN_MASK, 0, "uncompressed length 0: raw payload");
        assert_eq!((h & LEN_MASK) as usize, bytes.len());
        assert_eq!(decode_all(SegmentCodec::LZ4, &out), bytes);
    }

    #[test]
    fn corruption_is_detected() {
        for codec in [SegmentCodec::PLAIN, SegmentCodec::LZ4] {
            let bytes = envelope(1, 2000, 0);
            let mut wire = BytesMut::new();
            codec.encode(&bytes, &mut wire);
            for i in 0..wire.len() {
                let mut bad = wire.clone();
                bad[i] ^= 0x20;
                let mut out = BytesMut::new();
                let r = codec.decode(&mut bad, &mut out);
                // A flipped length bit may leave the segment incomplete (Ok,
                // waiting) only if the header CRC matched, which it cannot.
                assert!(r.is_err(), "{codec:?}: flipping byte {i} went unnoticed");
                if i < codec.header_len() {
                    assert!(matches!(r, Err(SegmentError::HeaderCrc { .. })), "{i}: {r:?}");
                } else {
                    assert!(matches!(r, Err(SegmentError::PayloadCrc { .. })), "{i}: {r:?}");
                }
            }
        }
    }

    #[test]
    fn garbage_never_panics() {
        let mut x: u64 = 42;
        for _ in 0..2000 {
            let n = (x % 64) as usize;
            let bytes: Vec<u8> = (0..n)
                .map(|_| {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    (x >> 33) as u8
                })
                .collect();
            for codec in [SegmentCodec::PLAIN, SegmentCodec::LZ4] {
                let mut input = BytesMut::from(&bytes[..]);
                let _ = codec.decode(&mut input, &mut BytesMut::new());
            }
        }
        // A valid header whose LZ4 payload is garbage with a valid CRC32.
        let payload = [0xF0u8, 1, 2, 3];
        let header = 4u64 | (100 << 17) | LZ4_SELF_CONTAINED_BIT;
        let mut wire = BytesMut::new();
        wire.extend_from_slice(&(header | (u64::from(crc24(header, 5)) << 40)).to_le_bytes());
        wire.extend_from_slice(&payload);
        wire.put_u32_le(crc32(&payload));
        let r = SegmentCodec::LZ4.decode(&mut wire, &mut BytesMut::new());
        assert!(matches!(r, Err(SegmentError::Decompression(_))), "{r:?}");
    }
}
