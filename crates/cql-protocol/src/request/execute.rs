//! EXECUTE (opcode 0x0A): `<id><query_parameters>`, the id a `[short bytes]`
//! returned by PREPARE, the parameters exactly as in QUERY. From v5 on the id
//! is followed by the `[short bytes]` result metadata id the Prepared result
//! carried: `<id><result_metadata_id><query_parameters>`.

use bytes::{BufMut, Bytes, BytesMut};
use types::Consistency;

use crate::error::ProtocolError;
use crate::frame::{self, Opcode, PROTOCOL_VERSION};
use crate::request::query::{decode_params, encode_params, QueryParams, SERIAL_CONSISTENCY, SKIP_METADATA, VALUES};
use crate::request::Request;
use crate::wire::{self, Reader};

pub(super) fn decode(r: &mut Reader, version: u8) -> Result<Request, ProtocolError> {
    let id = r.read_short_bytes()?;
    let result_metadata_id = if version >= 5 { Some(r.read_short_bytes()?) } else { None };
    let params = decode_params(r, version)?;
    Ok(Request::Execute { id, result_metadata_id, params })
}

pub(super) fn encode(
    out: &mut BytesMut,
    version: u8,
    id: &Bytes,
    result_metadata_id: Option<&Bytes>,
    params: &QueryParams,
) {
    wire::write_short_bytes(out, id);
    if version >= 5 {
        wire::write_short_bytes(out, result_metadata_id.map_or(&[][..], |b| &b[..]));
    }
    encode_params(out, version, params);
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
    encode_execute_serial(out, stream, id, consistency, None, skip_metadata, values)
}

/// [`encode_execute`] with a serial consistency (flag 0x10) for the Paxos
/// phase of a conditional statement (`SERIAL` or `LOCAL_SERIAL`); `None`
/// sends no flag (the server then uses `SERIAL`).
pub fn encode_execute_serial<'a>(
    out: &mut BytesMut,
    stream: i16,
    id: &[u8],
    consistency: Consistency,
    serial: Option<Consistency>,
    skip_metadata: bool,
    values: impl IntoIterator<Item = &'a [u8]>,
) {
    frame::write_frame(out, PROTOCOL_VERSION, 0, stream, Opcode::Execute, None, |out| {
        wire::write_short_bytes(out, id);
        wire::write_consistency(out, consistency);
        let flags_at = out.len();
        let mut flags = if skip_metadata { SKIP_METADATA } else { 0 };
        if serial.is_some() {
            flags |= SERIAL_CONSISTENCY;
        }
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
        if let Some(serial) = serial {
            wire::write_consistency(out, serial);
        }
    });
}
