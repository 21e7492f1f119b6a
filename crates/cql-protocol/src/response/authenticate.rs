//! AUTHENTICATE (opcode 0x03): the authenticator's class name as a `[string]`,
//! e.g. `org.apache.cassandra.auth.PasswordAuthenticator`, sent instead of READY
//! when STARTUP needs credentials. Also the SASL rounds that follow:
//! AUTH_CHALLENGE (0x0E) and AUTH_SUCCESS (0x10), each a `[bytes]` token that
//! may be null.

use bytes::{Bytes, BytesMut};

use crate::error::ProtocolError;
use crate::wire::{self, Reader};

pub(super) fn encode_authenticate(out: &mut BytesMut, class: &str) {
    wire::write_string(out, class);
}

pub(super) fn decode_authenticate(r: &mut Reader) -> Result<String, ProtocolError> {
    r.read_string()
}

pub(super) fn encode_token(out: &mut BytesMut, token: &Option<Bytes>) {
    wire::write_bytes(out, token.as_deref());
}

pub(super) fn decode_token(r: &mut Reader) -> Result<Option<Bytes>, ProtocolError> {
    r.read_bytes()
}
