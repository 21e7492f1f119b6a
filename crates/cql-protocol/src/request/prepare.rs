//! PREPARE (opcode 0x09): the query to prepare, as a `[long string]`. (v5 adds
//! flags and a keyspace; v4 has neither.) The answer is a Prepared RESULT.

use bytes::BytesMut;

use crate::error::ProtocolError;
use crate::request::Request;
use crate::wire::{self, Reader};

pub(super) fn decode(r: &mut Reader) -> Result<Request, ProtocolError> {
    Ok(Request::Prepare { query: r.read_long_string()? })
}

pub(super) fn encode(out: &mut BytesMut, query: &str) {
    wire::write_long_string(out, query);
}
