//! SUPPORTED (opcode 0x06): the answer to OPTIONS, a `[string multimap]` of
//! STARTUP option -> supported values.
//!
//! Cassandra 4/5 (`OptionsMessage`) sends `CQL_VERSION`, `COMPRESSION` and
//! `PROTOCOL_VERSIONS` (each version as "N/vN", beta ones "N/vN-beta"), plus
//! `CHECKSUM` on v5 connections. The python driver reads `CQL_VERSION` (and
//! sends back its first entry in STARTUP) and indexes `COMPRESSION` directly,
//! so both must be present. `PROTOCOL_VERSIONS` lists the versions we speak in
//! Cassandra's format (Cassandra 5.0.9 lists `3/v3, 4/v4, 5/v5, 6/v6-beta`; we
//! list `4/v4, 5/v5`). Cassandra lists snappy in COMPRESSION on v5 connections
//! too, though a v5 STARTUP asking for it is refused; so do we.

use std::collections::BTreeMap;

use bytes::BytesMut;

use crate::error::{ProtocolError, SUPPORTED_VERSIONS};
use crate::wire::{self, Reader};

/// The CQL language version we announce (Cassandra 5.0's).
pub const CQL_VERSION: &str = "3.4.7";

/// The SUPPORTED map, as Cassandra builds it for a v4 connection.
pub fn supported_options() -> BTreeMap<String, Vec<String>> {
    let mut m = BTreeMap::new();
    m.insert("CQL_VERSION".to_string(), vec![CQL_VERSION.to_string()]);
    m.insert("COMPRESSION".to_string(), vec!["lz4".to_string(), "snappy".to_string()]);
    m.insert("PROTOCOL_VERSIONS".to_string(), SUPPORTED_VERSIONS.iter().map(|v| v.to_string()).collect());
    m
}

pub(super) fn encode(out: &mut BytesMut, options: &BTreeMap<String, Vec<String>>) {
    wire::write_string_multimap(out, options);
}

pub(super) fn decode(r: &mut Reader) -> Result<BTreeMap<String, Vec<String>>, ProtocolError> {
    r.read_string_multimap()
}
