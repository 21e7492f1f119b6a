//! AUTH_RESPONSE (opcode 0x0F): one SASL token as `[bytes]`. A null token is
//! decoded as an empty one (for PLAIN, both are "no credentials").

use bytes::{Bytes, BytesMut};

use crate::error::ProtocolError;
use crate::request::Request;
use crate::wire::{self, Reader};

pub(super) fn decode(r: &mut Reader) -> Result<Request, ProtocolError> {
    Ok(Request::AuthResponse(r.read_bytes()?.unwrap_or_default()))
}

pub(super) fn encode(out: &mut BytesMut, token: &Bytes) {
    wire::write_bytes(out, Some(token));
}
