//! The on-disk bytes of a hint segment, sans-IO: the segment header and the
//! record framing. `FORMAT.md` (next to `Cargo.toml`) is the prose version of
//! this module; the two must agree.
//!
//! Invariants:
//! - Every integer is big-endian.
//! - The header is fixed-size (`HEADER_LEN`) and checksummed on its own, so a
//!   segment is identified (magic, version, target) before any record is read.
//! - A record's checksum covers its length, its timestamp and its payload, so
//!   a torn or flipped record is detected, never mistaken for a shorter one.
//! - Decoding never panics: every slice access is length-checked.

use uuid::Uuid;

/// `SHHT`: "Shoal hints".
pub const MAGIC: [u8; 4] = *b"SHHT";
/// The only format version this crate writes and reads.
pub const VERSION: u16 = 1;
/// Bytes in a segment header; the first record starts here.
pub const HEADER_LEN: u64 = 36;
/// Bytes in a record before its payload: `len | crc | created_at_ms`.
pub const RECORD_HEADER_LEN: u64 = 16;
/// The largest payload a record may carry (the `len` field is a `u32`, and one
/// hint is one mutation, which Cassandra caps far below this).
pub const MAX_PAYLOAD_LEN: usize = 256 << 20;

/// What a segment header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeader {
    pub target: Uuid,
    pub created_at_ms: i64,
}

/// Why a segment header was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderError {
    Short { len: usize },
    BadMagic,
    UnsupportedVersion(u16),
    BadFlags(u16),
    BadChecksum,
}

impl std::fmt::Display for HeaderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeaderError::Short { len } => write!(f, "header is {len} bytes, needs {HEADER_LEN}"),
            HeaderError::BadMagic => write!(f, "bad magic"),
            HeaderError::UnsupportedVersion(v) => write!(f, "unsupported format version {v}"),
            HeaderError::BadFlags(x) => write!(f, "unknown header flags {x:#06x}"),
            HeaderError::BadChecksum => write!(f, "header checksum mismatch"),
        }
    }
}

impl SegmentHeader {
    pub fn encode(&self) -> [u8; HEADER_LEN as usize] {
        let mut out = [0u8; HEADER_LEN as usize];
        out[0..4].copy_from_slice(&MAGIC);
        out[4..6].copy_from_slice(&VERSION.to_be_bytes());
        // 6..8: flags, all zero in version 1.
        out[8..24].copy_from_slice(self.target.as_bytes());
        out[24..32].copy_from_slice(&self.created_at_ms.to_be_bytes());
        let crc = crc32c::crc32c(&out[0..32]);
        out[32..36].copy_from_slice(&crc.to_be_bytes());
        out
    }

    pub fn decode(buf: &[u8]) -> Result<SegmentHeader, HeaderError> {
        let Some(h) = buf.first_chunk::<{ HEADER_LEN as usize }>() else {
            return Err(HeaderError::Short { len: buf.len() });
        };
        if h[0..4] != MAGIC {
            return Err(HeaderError::BadMagic);
        }
        let stored_crc = u32::from_be_bytes([h[32], h[33], h[34], h[35]]);
        if crc32c::crc32c(&h[0..32]) != stored_crc {
            return Err(HeaderError::BadChecksum);
        }
        let version = u16::from_be_bytes([h[4], h[5]]);
        if version != VERSION {
            return Err(HeaderError::UnsupportedVersion(version));
        }
        let flags = u16::from_be_bytes([h[6], h[7]]);
        if flags != 0 {
            return Err(HeaderError::BadFlags(flags));
        }
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(&h[8..24]);
        let mut created = [0u8; 8];
        created.copy_from_slice(&h[24..32]);
        Ok(SegmentHeader { target: Uuid::from_bytes(uuid), created_at_ms: i64::from_be_bytes(created) })
    }
}

/// The fixed part of a record, as read (not yet verified).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    pub len: u32,
    pub crc: u32,
    pub created_at_ms: i64,
}

impl RecordHeader {
    pub fn decode(b: &[u8; RECORD_HEADER_LEN as usize]) -> RecordHeader {
        RecordHeader {
            len: u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
            crc: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
            created_at_ms: i64::from_be_bytes([b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]]),
        }
    }

    /// Bytes the whole record takes on disk.
    pub fn record_len(&self) -> u64 {
        RECORD_HEADER_LEN + u64::from(self.len)
    }

    /// Whether `payload` (of `self.len` bytes) matches the stored checksum.
    pub fn verify(&self, payload: &[u8]) -> bool {
        payload.len() == self.len as usize && record_checksum(self.created_at_ms, payload) == self.crc
    }
}

/// `crc32c(len ‖ created_at_ms ‖ payload)`, each integer big-endian.
pub fn record_checksum(created_at_ms: i64, payload: &[u8]) -> u32 {
    let len = payload.len() as u32;
    let crc = crc32c::crc32c_append(0, &len.to_be_bytes());
    let crc = crc32c::crc32c_append(crc, &created_at_ms.to_be_bytes());
    crc32c::crc32c_append(crc, payload)
}

/// Appends one record to `out`. The caller has checked `payload.len() <= MAX_PAYLOAD_LEN`.
pub fn encode_record(created_at_ms: i64, payload: &[u8], out: &mut Vec<u8>) {
    debug_assert!(payload.len() <= MAX_PAYLOAD_LEN);
    out.reserve(RECORD_HEADER_LEN as usize + payload.len());
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(&record_checksum(created_at_ms, payload).to_be_bytes());
    out.extend_from_slice(&created_at_ms.to_be_bytes());
    out.extend_from_slice(payload);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn checksum_is_crc32c() {
        // The standard check values of CRC-32C (Castagnoli): hint files written
        // before the `crc32c` crate replaced the hand-written table still verify.
        assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c::crc32c(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(crc32c::crc32c_append(crc32c::crc32c(b"1234"), b"56789"), 0xE306_9283);
    }

    #[test]
    fn header_round_trip_and_rejections() {
        let h = SegmentHeader { target: Uuid::from_u128(0x0123_4567_89ab_cdef), created_at_ms: -5 };
        let bytes = h.encode();
        assert_eq!(&bytes[0..4], b"SHHT");
        assert_eq!(SegmentHeader::decode(&bytes).unwrap(), h);
        for len in 0..bytes.len() {
            assert_eq!(SegmentHeader::decode(&bytes[..len]), Err(HeaderError::Short { len }));
        }
        for i in 0..bytes.len() {
            let mut bad = bytes;
            bad[i] ^= 0x10;
            assert!(SegmentHeader::decode(&bad).is_err(), "flip at {i} accepted");
        }
    }

    #[test]
    fn record_layout() {
        let mut out = Vec::new();
        encode_record(0x0102_0304_0506_0708, b"abc", &mut out);
        assert_eq!(out.len(), 19);
        assert_eq!(&out[0..4], &[0, 0, 0, 3]);
        assert_eq!(&out[8..16], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&out[16..], b"abc");
        let mut fixed = [0u8; 16];
        fixed.copy_from_slice(&out[..16]);
        let rh = RecordHeader::decode(&fixed);
        assert_eq!(rh.len, 3);
        assert_eq!(rh.record_len(), 19);
        assert!(rh.verify(b"abc"));
        assert!(!rh.verify(b"abd"));
        // The checksum is crc32c over the concatenated fields.
        let mut cat = Vec::new();
        cat.extend_from_slice(&out[0..4]);
        cat.extend_from_slice(&out[8..]);
        assert_eq!(rh.crc, crc32c::crc32c(&cat));
    }

    #[test]
    fn zeroed_record_does_not_verify() {
        // Preallocated or zero-filled space after a crash must not read as a record.
        let rh = RecordHeader::decode(&[0u8; 16]);
        assert!(!rh.verify(&[]));
    }
}
