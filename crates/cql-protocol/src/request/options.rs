//! OPTIONS (opcode 0x05): asks which STARTUP options the server supports. The
//! body is empty (anything in it is ignored); the answer is SUPPORTED.

use crate::error::ProtocolError;
use crate::request::Request;
use crate::wire::Reader;

pub(super) fn decode(_r: &mut Reader) -> Result<Request, ProtocolError> {
    Ok(Request::Options)
}
