//! EXECUTE (opcode 0x0A): `<id><query_parameters>`, the id a `[short bytes]`
//! returned by PREPARE, the parameters exactly as in QUERY.

use bytes::{Bytes, BytesMut};

use crate::error::ProtocolError;
use crate::request::query::{decode_params, encode_params, QueryParams};
use crate::request::Request;
use crate::wire::{self, Reader};

pub(super) fn decode(r: &mut Reader) -> Result<Request, ProtocolError> {
    let id = r.read_short_bytes()?;
    let params = decode_params(r)?;
    Ok(Request::Execute { id, params })
}

pub(super) fn encode(out: &mut BytesMut, id: &Bytes, params: &QueryParams) {
    wire::write_short_bytes(out, id);
    encode_params(out, params);
}
