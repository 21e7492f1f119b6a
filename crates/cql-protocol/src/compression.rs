//! Frame body compression for protocol v4 (spec section 5): LZ4 and Snappy.
//!
//! - LZ4: a 4-byte big-endian uncompressed length, then one raw LZ4 block
//!   (Cassandra's `LZ4Compressor`; the python driver flips the length to
//!   little-endian and calls `lz4.block.decompress`).
//! - Snappy: the raw Snappy format (no framing), as `snappy-java`'s
//!   `Snappy.compress` writes it.
//!
//! Only the body is compressed, never the header, and STARTUP never is (the
//! algorithm is chosen by STARTUP). Decompression refuses to inflate beyond
//! [`MAX_EXPANSION`] times the compressed size (neither format can expand
//! more than that) or beyond [`MAX_DECOMPRESSED_LEN`], so a tiny frame cannot
//! make the server allocate gigabytes. The LZ4 decoder is the safe, checked one
//! (`lz4_flex` features `safe-decode` + `checked-decode`).

use bytes::Bytes;

use crate::error::ProtocolError;

/// Upper bound on the inflation ratio accepted when decompressing. LZ4 tops out
/// near 255:1 and Snappy near 64:3; a claim beyond this is a lie.
pub const MAX_EXPANSION: usize = 256;
/// Upper bound on a decompressed body: the spec's 256 MB frame limit.
pub const MAX_DECOMPRESSED_LEN: usize = 256 * 1024 * 1024;

/// A body compression algorithm, as named in STARTUP's `COMPRESSION` option.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Compression {
    Lz4,
    Snappy,
}

impl Compression {
    /// The algorithm for a STARTUP `COMPRESSION` value. Case-insensitive, as
    /// Cassandra lower-cases it before matching.
    pub fn from_name(name: &str) -> Option<Compression> {
        match name.to_ascii_lowercase().as_str() {
            "lz4" => Some(Compression::Lz4),
            "snappy" => Some(Compression::Snappy),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Compression::Lz4 => "lz4",
            Compression::Snappy => "snappy",
        }
    }

    /// Compresses a whole body.
    pub fn compress(self, input: &[u8]) -> Vec<u8> {
        match self {
            Compression::Lz4 => {
                let len = i32::try_from(input.len()).expect("body longer than 2 GiB cannot be LZ4-framed");
                let mut out = vec![0u8; 4 + lz4_flex::block::get_maximum_output_size(input.len())];
                let (prefix, block) = out.split_first_chunk_mut::<4>().expect("the buffer holds the 4-byte length");
                *prefix = len.to_be_bytes();
                // The buffer has the block format's worst-case size, so this cannot fail.
                let n = lz4_flex::block::compress_into(input, block)
                    .expect("lz4 output buffer sized by get_maximum_output_size");
                out.truncate(4 + n);
                out
            }
            Compression::Snappy => {
                snap::raw::Encoder::new().compress_vec(input).expect("snappy compresses any input below 4 GiB")
            }
        }
    }

    /// Decompresses a whole body received with the COMPRESSION flag.
    pub fn decompress(self, input: &[u8]) -> Result<Bytes, ProtocolError> {
        let limit = input.len().saturating_mul(MAX_EXPANSION).saturating_add(64).min(MAX_DECOMPRESSED_LEN);
        match self {
            Compression::Lz4 => {
                let err = |reason: String| ProtocolError::Decompression { codec: "lz4", reason };
                let Some((len, block)) = input.split_first_chunk::<4>() else {
                    return Err(err(format!("body of {} bytes has no length prefix", input.len())));
                };
                let len = i32::from_be_bytes(*len);
                let len = usize::try_from(len).map_err(|_| err(format!("negative uncompressed length {len}")))?;
                if len > limit {
                    return Err(err(format!("uncompressed length {len} is more than the limit {limit}")));
                }
                let mut out = vec![0u8; len];
                let n = lz4_flex::block::decompress_into(block, &mut out).map_err(|e| err(e.to_string()))?;
                if n != len {
                    return Err(err(format!("expected {len} bytes, block holds {n}")));
                }
                Ok(Bytes::from(out))
            }
            Compression::Snappy => {
                let err = |reason: String| ProtocolError::Decompression { codec: "snappy", reason };
                let len = snap::raw::decompress_len(input).map_err(|e| err(e.to_string()))?;
                if len > limit {
                    return Err(err(format!("uncompressed length {len} is more than the limit {limit}")));
                }
                let mut out = vec![0u8; len];
                let n = snap::raw::Decoder::new().decompress(input, &mut out).map_err(|e| err(e.to_string()))?;
                out.truncate(n);
                Ok(Bytes::from(out))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(Compression::from_name("LZ4"), Some(Compression::Lz4));
        assert_eq!(Compression::from_name("snappy"), Some(Compression::Snappy));
        assert_eq!(Compression::from_name("zstd"), None);
    }

    #[test]
    fn round_trips() {
        let data: Vec<u8> = (0..10_000u32).flat_map(|i| (i % 97).to_be_bytes()).collect();
        for c in [Compression::Lz4, Compression::Snappy] {
            for input in [&data[..], b"", b"x"] {
                let z = c.compress(input);
                assert_eq!(&c.decompress(&z).unwrap()[..], input, "{c:?}");
            }
        }
        // The LZ4 length prefix is big-endian.
        let z = Compression::Lz4.compress(&data);
        assert_eq!(&z[..4], &(data.len() as u32).to_be_bytes());
    }

    #[test]
    fn lies_and_garbage_are_errors() {
        // Claims 1 GiB from a 5-byte body.
        assert!(Compression::Lz4.decompress(&[0x40, 0, 0, 0, 0]).is_err());
        assert!(Compression::Lz4.decompress(&[0xFF, 0xFF, 0xFF, 0xFF, 0]).is_err());
        assert!(Compression::Lz4.decompress(&[0, 0]).is_err());
        assert!(Compression::Lz4.decompress(&[0, 0, 0, 10, 0xF0, 1, 2]).is_err());
        assert!(Compression::Snappy.decompress(&[0xFF, 0xFF, 0xFF, 0xFF, 0x0F]).is_err());
        assert!(Compression::Snappy.decompress(&[5, 0xFF, 0xFF]).is_err());
    }
}
