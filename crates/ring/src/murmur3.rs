//! MurmurHash3 x64_128 as Cassandra implements it (`MurmurHash.hash3_x64_128`).
//!
//! Cassandra's version differs from the reference one in the tail: it reads
//! the trailing bytes as *signed* Java bytes, so a byte >= 0x80 is
//! sign-extended before it is shifted into place. Keys whose tail holds such a
//! byte hash differently from the reference implementation.

use crate::Token;

const C1: u64 = 0x87c3_7b91_1142_53d5;
const C2: u64 = 0x4cf5_ad43_2745_937f;

/// The Murmur3 token of a serialized partition key (for a compound key, the
/// CompositeType encoding: per component `u16 len | bytes | 0x00`). The empty
/// key has the minimum token, as in Cassandra's `Murmur3Partitioner.getToken`.
pub fn token_of(key: &[u8]) -> Token {
    if key.is_empty() {
        return i64::MIN;
    }
    let h1 = hash3_x64_128_h1(key, 0) as i64;
    if h1 == i64::MIN {
        i64::MAX
    } else {
        h1
    }
}

fn fmix(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

fn block(data: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&data[at..at + 8]);
    u64::from_le_bytes(word)
}

/// Returns the first 64 bits (h1) of Cassandra's MurmurHash3 x64_128.
fn hash3_x64_128_h1(data: &[u8], seed: u64) -> u64 {
    let len = data.len();
    let nblocks = len / 16;
    let mut h1 = seed;
    let mut h2 = seed;

    for i in 0..nblocks {
        let mut k1 = block(data, i * 16);
        let mut k2 = block(data, i * 16 + 8);

        k1 = k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2);
        h1 ^= k1;
        h1 = h1.rotate_left(27).wrapping_add(h2).wrapping_mul(5).wrapping_add(0x52dc_e729);

        k2 = k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1);
        h2 ^= k2;
        h2 = h2.rotate_left(31).wrapping_add(h1).wrapping_mul(5).wrapping_add(0x3849_5ab5);
    }

    let tail = &data[nblocks * 16..];
    // Java bytes are signed: sign-extend each tail byte, as Cassandra does.
    let byte = |i: usize| tail[i] as i8 as i64 as u64;
    let mut k1: u64 = 0;
    let mut k2: u64 = 0;
    let rest = tail.len();
    if rest > 8 {
        for i in (8..rest).rev() {
            k2 ^= byte(i) << ((i - 8) * 8);
        }
        k2 = k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1);
        h2 ^= k2;
    }
    if rest > 0 {
        for i in (0..rest.min(8)).rev() {
            k1 ^= byte(i) << (i * 8);
        }
        k1 = k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2);
        h1 ^= k1;
    }

    h1 ^= len as u64;
    h2 ^= len as u64;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    h1 = fmix(h1);
    h2 = fmix(h2);
    h1 = h1.wrapping_add(h2);
    h1
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Vectors from real Cassandra (python driver's test_metadata.py and
    /// scylla-rust-driver's partitioner tests), see shared/dependencies.md §7.
    #[test]
    fn matches_cassandra_vectors() {
        let cases: Vec<(Vec<u8>, i64)> = vec![
            (b"123".to_vec(), -7468325962851647638),
            (b"\x00\xff\x10\xfa\x99".repeat(10), 5837342703291459765),
            (b"\xfe".repeat(8), -8927430733708461935),
            (b"\x10".repeat(8), 1446172840243228796),
            (b"9223372036854775807".to_vec(), 7162290910810015547),
            (b"test".to_vec(), -6017608668500074083),
            ("kremówki".as_bytes().to_vec(), 4354931215268080151),
        ];
        for (key, expected) in cases {
            assert_eq!(token_of(&key), expected, "key {key:?}");
        }
    }

    #[test]
    fn empty_key_has_the_minimum_token() {
        // Cassandra gives the empty key the minimum token (no CQL partition key
        // is empty, but the ring's range arithmetic may ask); no other key
        // gets it, since a hash of i64::MIN is normalized to i64::MAX.
        assert_eq!(token_of(b""), i64::MIN);
        assert_ne!(token_of(b"\0"), i64::MIN);
    }
}
