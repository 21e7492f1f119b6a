//! READY (opcode 0x02): the answer to STARTUP (without authentication) and to
//! REGISTER. The body is empty.

use crate::error::ProtocolError;
use crate::response::Response;
use crate::wire::Reader;

pub(super) fn decode(_r: &mut Reader) -> Result<Response, ProtocolError> {
    Ok(Response::Ready)
}
