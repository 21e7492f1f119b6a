//! Histograms as text, so the `--json` report carries them whole and
//! `shoal stress merge` can add the histograms of several client processes
//! exactly: the HdrHistogram V2 compressed serialization (the format of
//! `--hdr-log` and of every HdrHistogram implementation), in standard base64
//! with padding.
//!
//! Invariant: `decode(&encode(h))` has the same bounds, counts, min and max as
//! `h`, so merged percentiles equal those of one histogram fed every value.

use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// `h` as base64 of its V2 compressed serialization.
pub fn encode(h: &Histogram<u64>) -> String {
    let mut bytes = Vec::new();
    // Serializing into a Vec fails only for histograms with more than 2^31 buckets.
    if let Err(e) = V2DeflateSerializer::new().serialize(h, &mut bytes) {
        panic!("serializing a latency histogram: {e:?}");
    }
    base64_encode(&bytes)
}

/// The histogram `encode` wrote.
pub fn decode(text: &str) -> Result<Histogram<u64>, String> {
    let bytes = base64_decode(text)?;
    Deserializer::new().deserialize(&mut bytes.as_slice()).map_err(|e| format!("not an HDR histogram: {e:?}"))
}

pub fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

pub fn base64_decode(text: &str) -> Result<Vec<u8>, String> {
    let text = text.trim_end_matches('=');
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0;
    for c in text.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return Err(format!("not base64: byte {c:#04x}")),
        };
        acc = acc << 6 | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits & 0xFF) as u8);
        }
    }
    if bits >= 6 {
        return Err("truncated base64".to_string());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::new_histogram;

    #[test]
    fn base64_round_trips_and_matches_the_standard() {
        assert_eq!(base64_encode(b""), "");
        assert_eq!(base64_encode(b"f"), "Zg==");
        assert_eq!(base64_encode(b"fo"), "Zm8=");
        assert_eq!(base64_encode(b"foobar"), "Zm9vYmFy");
        for len in 0..40 {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            assert_eq!(base64_decode(&base64_encode(&bytes)).expect("decodes"), bytes);
        }
        assert!(base64_decode("Zm9v!").is_err());
        assert!(base64_decode("Z").is_err());
    }

    #[test]
    fn histograms_round_trip_and_add() {
        let mut a = new_histogram();
        let mut b = new_histogram();
        for v in [1u64, 5, 100, 2_500, 99_999, 3_000_000] {
            a.record(v).expect("in range");
            b.record(v * 3).expect("in range");
        }
        let a2 = decode(&encode(&a)).expect("decodes");
        assert_eq!((a2.len(), a2.min(), a2.max(), a2.high()), (a.len(), a.min(), a.max(), a.high()));
        let mut sum = decode(&encode(&new_histogram())).expect("empty decodes");
        assert!(sum.is_empty());
        sum.add(&a2).expect("same bounds");
        sum.add(decode(&encode(&b)).expect("decodes")).expect("same bounds");
        assert_eq!(sum.len(), 12);
        assert_eq!(sum.max(), a.max().max(b.max()));
        assert!(decode("AAAA").is_err());
    }
}
