//! REGISTER (opcode 0x0B): a `[string list]` of event types to push on this
//! connection ("TOPOLOGY_CHANGE", "STATUS_CHANGE", "SCHEMA_CHANGE"). The names
//! are kept as sent; the server validates them with
//! [`crate::EventType::from_name`]. The answer is READY.

use bytes::BytesMut;

use crate::error::ProtocolError;
use crate::request::Request;
use crate::wire::{self, Reader};

pub(super) fn decode(r: &mut Reader) -> Result<Request, ProtocolError> {
    Ok(Request::Register { events: r.read_string_list()? })
}

pub(super) fn encode(out: &mut BytesMut, events: &[String]) {
    wire::write_string_list(out, events);
}
