//! Unsigned LEB128 varints (7 bits a byte, low bits first, the top bit set on
//! every byte but the last): the lengths inside packed rows (`packed.rs`) and
//! commit log records (`flush.rs`). On-disk bytes: their encoding never
//! changes.
//!
//! Invariants:
//! - `get` of what `put` wrote gives the number back; at most 10 bytes (a
//!   64-bit number) are read, and a truncated or overlong varint is `None`,
//!   never a panic.

#![deny(clippy::indexing_slicing)]

/// Appends `n`.
pub(crate) fn put(mut n: usize, out: &mut Vec<u8>) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Reads a varint at `*pos` and moves `pos` past it.
pub(crate) fn get(input: &[u8], pos: &mut usize) -> Option<usize> {
    let mut n = 0usize;
    for shift in (0..64).step_by(7) {
        let b = *input.get(*pos)?;
        *pos += 1;
        n |= ((b & 0x7F) as usize) << shift;
        if b < 0x80 {
            return Some(n);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_bad_input() {
        for n in [0usize, 1, 127, 128, 300, 16_383, 16_384, u32::MAX as usize, usize::MAX] {
            let mut buf = vec![0xAA];
            put(n, &mut buf);
            let mut pos = 1;
            assert_eq!(get(&buf, &mut pos), Some(n), "{n}");
            assert_eq!(pos, buf.len());
            // Cut anywhere inside: None.
            for cut in 1..buf.len() {
                assert_eq!(get(&buf[..cut], &mut 1), None, "{n} cut at {cut}");
            }
        }
        assert_eq!(get(&[0x80; 11], &mut 0), None, "an 11-byte varint");
        let mut buf = Vec::new();
        put(300, &mut buf);
        assert_eq!(buf, [0xAC, 0x02]);
    }
}
