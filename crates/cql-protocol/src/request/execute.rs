//! EXECUTE (opcode 0x0A): `<id><query_parameters>`, the id a `[short bytes]`
//! returned by PREPARE, the parameters exactly as in QUERY.

use bytes::{BufMut, Bytes, BytesMut};
use types::Consistency;

use crate::error::ProtocolError;
use crate::frame::{self, Opcode, PROTOCOL_VERSION};
use crate::request::query::{decode_params, encode_params, QueryParams, SKIP_METADATA, VALUES};
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

/// Client side: an EXECUTE frame of prepared statement `id` with `values` bound
/// positionally and no other parameter, written at the end of `out` without
/// building a [`Request`] (no allocation per value). The bytes are those
/// [`crate::encode_request`] writes for the same request, uncompressed.
pub fn encode_execute<'a>(
    out: &mut BytesMut,
    stream: i16,
    id: &[u8],
    consistency: Consistency,
    skip_metadata: bool,
    values: impl IntoIterator<Item = &'a [u8]>,
) {
    frame::write_frame(out, PROTOCOL_VERSION, 0, stream, Opcode::Execute, None, |out| {
        wire::write_short_bytes(out, id);
        wire::write_consistency(out, consistency);
        let flags_at = out.len();
        let flags = if skip_metadata { SKIP_METADATA } else { 0 };
        wire::write_u8(out, flags);
        let count_at = out.len();
        out.put_u16(0);
        let mut count = 0u16;
        for value in values {
            wire::write_bytes(out, Some(value));
            count = count.checked_add(1).expect("more than 65535 bound values");
        }
        if count == 0 {
            // As `encode_request`: no VALUES flag and no count for no values.
            out.truncate(count_at);
        } else {
            wire::patch(out, flags_at, [flags | VALUES]);
            wire::patch(out, count_at, count.to_be_bytes());
        }
    });
}
