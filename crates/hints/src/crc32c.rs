//! CRC-32C (Castagnoli), the checksum of segment headers and hint records.
//!
//! Table-driven, one byte at a time, reflected polynomial `0x82F63B78`, initial
//! value and final xor `0xFFFFFFFF` (the iSCSI/ext4 variant). `update` composes:
//! `update(update(0, a), b) == crc32c(a ‖ b)`, so a record's checksum is taken
//! over its fields without concatenating them first.

const POLY: u32 = 0x82F6_3B78;

const fn make_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut bit = 0;
        while bit < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            bit += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
}

static TABLE: [u32; 256] = make_table();

/// Extends `crc` (the CRC-32C of some prefix, 0 for the empty one) with `data`.
pub fn update(crc: u32, data: &[u8]) -> u32 {
    let mut c = !crc;
    for &b in data {
        c = TABLE[((c ^ u32::from(b)) & 0xFF) as usize] ^ (c >> 8);
    }
    !c
}

/// The CRC-32C of `data`.
pub fn crc32c(data: &[u8]) -> u32 {
    update(0, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_check_value() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(b""), 0);
    }

    #[test]
    fn rfc3720_vectors() {
        // iSCSI (RFC 3720, B.4): 32 bytes of zeros, of 0xFF, ascending.
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(crc32c(&[0xFFu8; 32]), 0x62A8_AB43);
        let ascending: Vec<u8> = (0u8..32).collect();
        assert_eq!(crc32c(&ascending), 0x46DD_794E);
    }

    #[test]
    fn update_composes() {
        let data = b"hinted handoff keeps writes for a down replica";
        for split in 0..data.len() {
            assert_eq!(update(update(0, &data[..split]), &data[split..]), crc32c(data));
        }
    }
}
