//! PREPARE (opcode 0x09): the query to prepare, as a `[long string]`. v5 adds
//! an `[int]` of flags and, with flag 0x01, the `[string]` keyspace to prepare
//! it in: `<query><flags>[<keyspace>]`. The answer is a Prepared RESULT.

use bytes::BytesMut;

use crate::error::ProtocolError;
use crate::request::Request;
use crate::wire::{self, Reader};

/// v5 PREPARE flag: a keyspace follows.
const WITH_KEYSPACE: i32 = 0x01;

pub(super) fn decode(r: &mut Reader, version: u8) -> Result<Request, ProtocolError> {
    let query = r.read_long_string()?;
    let mut keyspace = None;
    if version >= 5 {
        let flags = r.read_int()?;
        if flags & WITH_KEYSPACE != 0 {
            keyspace = Some(r.read_string()?);
        }
    }
    Ok(Request::Prepare { query, keyspace })
}

pub(super) fn encode(out: &mut BytesMut, version: u8, query: &str, keyspace: Option<&str>) {
    wire::write_long_string(out, query);
    if version >= 5 {
        match keyspace {
            Some(ks) => {
                wire::write_int(out, WITH_KEYSPACE);
                wire::write_string(out, ks);
            }
            None => wire::write_int(out, 0),
        }
    }
}
