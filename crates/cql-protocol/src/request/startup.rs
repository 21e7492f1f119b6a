//! STARTUP (opcode 0x01): a `[string map]` of options. Never compressed.
//!
//! Cassandra requires `CQL_VERSION` (any 3.x or later is accepted; drivers
//! send "3.0.0" or the first version SUPPORTED listed) and understands
//! `COMPRESSION` ("lz4" or "snappy", case-insensitive), `NO_COMPACT`,
//! `THROW_ON_OVERLOAD`, and the informational `DRIVER_NAME`, `DRIVER_VERSION`,
//! `CLIENT_ID`, `APPLICATION_NAME`, `APPLICATION_VERSION`. Unknown keys are
//! ignored. [`StartupOptions::check`] applies Cassandra's checks with its
//! messages.

use std::collections::BTreeMap;

use bytes::BytesMut;

use crate::compression::Compression;
use crate::error::ProtocolError;
use crate::wire::{self, Reader};

/// The options of a STARTUP message.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StartupOptions(pub BTreeMap<String, String>);

impl StartupOptions {
    pub const CQL_VERSION: &'static str = "CQL_VERSION";
    pub const COMPRESSION: &'static str = "COMPRESSION";
    pub const NO_COMPACT: &'static str = "NO_COMPACT";
    pub const THROW_ON_OVERLOAD: &'static str = "THROW_ON_OVERLOAD";
    pub const DRIVER_NAME: &'static str = "DRIVER_NAME";
    pub const DRIVER_VERSION: &'static str = "DRIVER_VERSION";

    /// Options with just `CQL_VERSION`.
    pub fn new(cql_version: &str) -> StartupOptions {
        let mut m = BTreeMap::new();
        m.insert(Self::CQL_VERSION.to_string(), cql_version.to_string());
        StartupOptions(m)
    }

    pub fn with(mut self, key: &str, value: &str) -> StartupOptions {
        self.0.insert(key.to_string(), value.to_string());
        self
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    pub fn cql_version(&self) -> Option<&str> {
        self.get(Self::CQL_VERSION)
    }

    /// The requested compression, `None` when the option is absent.
    pub fn compression(&self) -> Result<Option<Compression>, ProtocolError> {
        match self.get(Self::COMPRESSION) {
            None => Ok(None),
            Some(name) => Compression::from_name(name)
                .map(Some)
                .ok_or_else(|| ProtocolError::UnknownCompression(name.to_ascii_lowercase())),
        }
    }

    /// Cassandra's STARTUP checks: `CQL_VERSION` present with a major version
    /// of at least 3, and a known compression. Returns the compression.
    pub fn check(&self) -> Result<Option<Compression>, ProtocolError> {
        let version = self.cql_version().ok_or(ProtocolError::MissingCqlVersion)?;
        let major: Option<u32> = version.split('.').next().and_then(|m| m.parse().ok());
        if !matches!(major, Some(m) if m >= 3) {
            return Err(ProtocolError::UnsupportedCqlVersion(version.to_string()));
        }
        self.compression()
    }
}

pub(super) fn decode(r: &mut Reader) -> Result<StartupOptions, ProtocolError> {
    Ok(StartupOptions(r.read_string_map()?))
}

pub(super) fn encode(out: &mut BytesMut, o: &StartupOptions) {
    wire::write_string_map(out, o.0.iter().map(|(k, v)| (k.as_str(), v.as_str())));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks() {
        assert_eq!(StartupOptions::new("3.0.0").check(), Ok(None));
        assert_eq!(StartupOptions::new("3.4.7").with("COMPRESSION", "LZ4").check(), Ok(Some(Compression::Lz4)));
        assert_eq!(StartupOptions::default().check(), Err(ProtocolError::MissingCqlVersion));
        assert!(matches!(StartupOptions::new("2.0.0").check(), Err(ProtocolError::UnsupportedCqlVersion(_))));
        let e = StartupOptions::new("3.0.0").with("COMPRESSION", "zstd").check().unwrap_err();
        assert_eq!(e.to_string(), "Unknown compression algorithm: zstd");
    }
}
