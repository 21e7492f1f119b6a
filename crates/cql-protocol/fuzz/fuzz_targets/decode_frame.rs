//! Feeds arbitrary bytes to the server's read path: frame headers one after the
//! other, each body to `decode_request`, the way a connection loop would.
//! The first byte picks the negotiated compression. Any panic is a bug.
#![no_main]

use bytes::{Bytes, BytesMut};
use cql_protocol::{decode_request_frame, parse_header, Compression, HEADER_LEN};
use libfuzzer_sys::fuzz_target;

const MAX_FRAME_LEN: u32 = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, mut rest)) = data.split_first() else {
        return;
    };
    let compression = match pick % 3 {
        0 => None,
        1 => Some(Compression::Lz4),
        _ => Some(Compression::Snappy),
    };
    loop {
        match parse_header(rest, MAX_FRAME_LEN) {
            Ok(None) => return,
            Ok(Some(header)) => {
                let Some(frame) = rest.get(..header.frame_len()) else {
                    return;
                };
                let body = Bytes::copy_from_slice(&frame[HEADER_LEN..]);
                if let Err(e) = decode_request_frame(&header, body, compression) {
                    let _ = e.to_error_body();
                }
                rest = &rest[header.frame_len()..];
            }
            Err(e) => {
                let mut out = BytesMut::new();
                e.encode_reply(&mut out);
                match e.bytes_to_skip() {
                    Some(n) if !e.closes_connection() => {
                        let Some(next) = rest.get(n..) else {
                            return;
                        };
                        rest = next;
                    }
                    _ => return,
                }
            }
        }
    }
});
