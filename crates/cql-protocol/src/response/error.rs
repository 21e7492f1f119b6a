//! ERROR (opcode 0x00): `<code><message>` then a payload that depends on the
//! code (spec section 9). Every v4 code is here with its payload.
//!
//! v5 changes two payloads (`native_protocol_v5.spec` section 9): READ_FAILURE
//! and WRITE_FAILURE carry a `<reasonmap>` (an `[int]` n, then n pairs of an
//! `[inetaddr]` replica and a `[short]` failure code) where v4 has the `[int]`
//! number of failures.
//!
//! The v5 spec also lets a WRITE_TIMEOUT of write type CAS end with a `[short]`
//! count of contentions (Cassandra 4 writes it when Paxos gave up under
//! contention). Shoal never writes it: no driver reads it (the Java driver 4's
//! codec, the Python driver, gocql v2 and the scylla Rust driver all stop after
//! the write type), and the Java driver 4 on v5 decodes the frames of a segment
//! straight off its payload, so two unread bytes at the end become the start of
//! a "next frame" and the connection fails with `readerIndex(80) + length(2)
//! exceeds writerIndex(80)`. The decoder accepts the body with or without it.

use std::net::IpAddr;

use bytes::{Bytes, BytesMut};
use types::Consistency;
pub use types::WriteType;

use crate::error::ProtocolError;
use crate::wire::{self, Reader};

/// An error code with its payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// 0x0000: a server-side bug.
    ServerError,
    /// 0x000A: the client broke the protocol.
    ProtocolError,
    /// 0x0100
    AuthenticationError,
    /// 0x1000: not enough replicas alive to try.
    Unavailable { consistency: Consistency, required: i32, alive: i32 },
    /// 0x1001
    Overloaded,
    /// 0x1002
    IsBootstrapping,
    /// 0x1003
    TruncateError,
    /// 0x1100
    WriteTimeout { consistency: Consistency, received: i32, block_for: i32, write_type: WriteType },
    /// 0x1200
    ReadTimeout { consistency: Consistency, received: i32, block_for: i32, data_present: bool },
    /// 0x1300
    /// `reasons`: each failed replica and its failure code (v5's reason map);
    /// v4 sends only `num_failures`.
    ReadFailure {
        consistency: Consistency,
        received: i32,
        block_for: i32,
        num_failures: i32,
        data_present: bool,
        reasons: Vec<(IpAddr, u16)>,
    },
    /// 0x1400
    FunctionFailure { keyspace: String, function: String, arg_types: Vec<String> },
    /// 0x1500
    /// `reasons` as in [`ErrorKind::ReadFailure`].
    WriteFailure {
        consistency: Consistency,
        received: i32,
        block_for: i32,
        num_failures: i32,
        write_type: WriteType,
        reasons: Vec<(IpAddr, u16)>,
    },
    /// 0x2000
    SyntaxError,
    /// 0x2100
    Unauthorized,
    /// 0x2200: syntactically fine but invalid (also unknown tables).
    Invalid,
    /// 0x2300
    ConfigError,
    /// 0x2400: `table` is empty when a keyspace already exists.
    AlreadyExists { keyspace: String, table: String },
    /// 0x2500: unknown prepared statement id.
    Unprepared { id: Bytes },
}

pub const SERVER_ERROR: i32 = 0x0000;
pub const PROTOCOL_ERROR: i32 = 0x000A;
pub const AUTHENTICATION_ERROR: i32 = 0x0100;
pub const UNAVAILABLE: i32 = 0x1000;
pub const OVERLOADED: i32 = 0x1001;
pub const IS_BOOTSTRAPPING: i32 = 0x1002;
pub const TRUNCATE_ERROR: i32 = 0x1003;
pub const WRITE_TIMEOUT: i32 = 0x1100;
pub const READ_TIMEOUT: i32 = 0x1200;
pub const READ_FAILURE: i32 = 0x1300;
pub const FUNCTION_FAILURE: i32 = 0x1400;
pub const WRITE_FAILURE: i32 = 0x1500;
pub const SYNTAX_ERROR: i32 = 0x2000;
pub const UNAUTHORIZED: i32 = 0x2100;
pub const INVALID: i32 = 0x2200;
pub const CONFIG_ERROR: i32 = 0x2300;
pub const ALREADY_EXISTS: i32 = 0x2400;
pub const UNPREPARED: i32 = 0x2500;

impl ErrorKind {
    pub fn code(&self) -> i32 {
        match self {
            ErrorKind::ServerError => SERVER_ERROR,
            ErrorKind::ProtocolError => PROTOCOL_ERROR,
            ErrorKind::AuthenticationError => AUTHENTICATION_ERROR,
            ErrorKind::Unavailable { .. } => UNAVAILABLE,
            ErrorKind::Overloaded => OVERLOADED,
            ErrorKind::IsBootstrapping => IS_BOOTSTRAPPING,
            ErrorKind::TruncateError => TRUNCATE_ERROR,
            ErrorKind::WriteTimeout { .. } => WRITE_TIMEOUT,
            ErrorKind::ReadTimeout { .. } => READ_TIMEOUT,
            ErrorKind::ReadFailure { .. } => READ_FAILURE,
            ErrorKind::FunctionFailure { .. } => FUNCTION_FAILURE,
            ErrorKind::WriteFailure { .. } => WRITE_FAILURE,
            ErrorKind::SyntaxError => SYNTAX_ERROR,
            ErrorKind::Unauthorized => UNAUTHORIZED,
            ErrorKind::Invalid => INVALID,
            ErrorKind::ConfigError => CONFIG_ERROR,
            ErrorKind::AlreadyExists { .. } => ALREADY_EXISTS,
            ErrorKind::Unprepared { .. } => UNPREPARED,
        }
    }
}

/// The body of an ERROR response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorBody {
    pub kind: ErrorKind,
    pub message: String,
}

impl ErrorBody {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> ErrorBody {
        ErrorBody { kind, message: message.into() }
    }
    pub fn server_error(message: impl Into<String>) -> ErrorBody {
        ErrorBody::new(ErrorKind::ServerError, message)
    }
    pub fn protocol_error(message: impl Into<String>) -> ErrorBody {
        ErrorBody::new(ErrorKind::ProtocolError, message)
    }
    pub fn invalid(message: impl Into<String>) -> ErrorBody {
        ErrorBody::new(ErrorKind::Invalid, message)
    }
    pub fn syntax_error(message: impl Into<String>) -> ErrorBody {
        ErrorBody::new(ErrorKind::SyntaxError, message)
    }
    pub fn config_error(message: impl Into<String>) -> ErrorBody {
        ErrorBody::new(ErrorKind::ConfigError, message)
    }

    pub fn code(&self) -> i32 {
        self.kind.code()
    }

    /// Writes the body in the layout of protocol `version` (4 or 5).
    pub(crate) fn encode(&self, out: &mut BytesMut, version: u8) {
        let v5 = version >= 5;
        wire::write_int(out, self.kind.code());
        wire::write_string(out, &self.message);
        match &self.kind {
            ErrorKind::Unavailable { consistency, required, alive } => {
                wire::write_consistency(out, *consistency);
                wire::write_int(out, *required);
                wire::write_int(out, *alive);
            }
            ErrorKind::WriteTimeout { consistency, received, block_for, write_type } => {
                wire::write_consistency(out, *consistency);
                wire::write_int(out, *received);
                wire::write_int(out, *block_for);
                wire::write_string(out, write_type.name());
            }
            ErrorKind::ReadTimeout { consistency, received, block_for, data_present } => {
                wire::write_consistency(out, *consistency);
                wire::write_int(out, *received);
                wire::write_int(out, *block_for);
                wire::write_u8(out, u8::from(*data_present));
            }
            ErrorKind::ReadFailure { consistency, received, block_for, num_failures, data_present, reasons } => {
                wire::write_consistency(out, *consistency);
                wire::write_int(out, *received);
                wire::write_int(out, *block_for);
                write_failures(out, v5, *num_failures, reasons);
                wire::write_u8(out, u8::from(*data_present));
            }
            ErrorKind::FunctionFailure { keyspace, function, arg_types } => {
                wire::write_string(out, keyspace);
                wire::write_string(out, function);
                wire::write_string_list(out, arg_types);
            }
            ErrorKind::WriteFailure { consistency, received, block_for, num_failures, write_type, reasons } => {
                wire::write_consistency(out, *consistency);
                wire::write_int(out, *received);
                wire::write_int(out, *block_for);
                write_failures(out, v5, *num_failures, reasons);
                wire::write_string(out, write_type.name());
            }
            ErrorKind::AlreadyExists { keyspace, table } => {
                wire::write_string(out, keyspace);
                wire::write_string(out, table);
            }
            ErrorKind::Unprepared { id } => wire::write_short_bytes(out, id),
            ErrorKind::ServerError
            | ErrorKind::ProtocolError
            | ErrorKind::AuthenticationError
            | ErrorKind::Overloaded
            | ErrorKind::IsBootstrapping
            | ErrorKind::TruncateError
            | ErrorKind::SyntaxError
            | ErrorKind::Unauthorized
            | ErrorKind::Invalid
            | ErrorKind::ConfigError => {}
        }
    }

    pub(crate) fn decode(r: &mut Reader, version: u8) -> Result<ErrorBody, ProtocolError> {
        let v5 = version >= 5;
        let code = r.read_int()?;
        let message = r.read_string()?;
        let write_type = |r: &mut Reader| {
            let name = r.read_string()?;
            WriteType::from_name(&name).ok_or(ProtocolError::UnknownName { what: "write type", value: name })
        };
        let kind = match code {
            SERVER_ERROR => ErrorKind::ServerError,
            PROTOCOL_ERROR => ErrorKind::ProtocolError,
            AUTHENTICATION_ERROR => ErrorKind::AuthenticationError,
            UNAVAILABLE => ErrorKind::Unavailable {
                consistency: r.read_consistency()?,
                required: r.read_int()?,
                alive: r.read_int()?,
            },
            OVERLOADED => ErrorKind::Overloaded,
            IS_BOOTSTRAPPING => ErrorKind::IsBootstrapping,
            TRUNCATE_ERROR => ErrorKind::TruncateError,
            WRITE_TIMEOUT => {
                let kind = ErrorKind::WriteTimeout {
                    consistency: r.read_consistency()?,
                    received: r.read_int()?,
                    block_for: r.read_int()?,
                    write_type: write_type(r)?,
                };
                // Cassandra's v5 contentions count, when a CAS timeout carries one.
                if v5
                    && r.remaining() == 2
                    && matches!(kind, ErrorKind::WriteTimeout { write_type: WriteType::Cas, .. })
                {
                    r.read_short()?;
                }
                kind
            }
            READ_TIMEOUT => ErrorKind::ReadTimeout {
                consistency: r.read_consistency()?,
                received: r.read_int()?,
                block_for: r.read_int()?,
                data_present: r.read_u8()? != 0,
            },
            READ_FAILURE => {
                let (consistency, received, block_for) = (r.read_consistency()?, r.read_int()?, r.read_int()?);
                let (num_failures, reasons) = read_failures(r, v5)?;
                let data_present = r.read_u8()? != 0;
                ErrorKind::ReadFailure { consistency, received, block_for, num_failures, data_present, reasons }
            }
            FUNCTION_FAILURE => ErrorKind::FunctionFailure {
                keyspace: r.read_string()?,
                function: r.read_string()?,
                arg_types: r.read_string_list()?,
            },
            WRITE_FAILURE => {
                let (consistency, received, block_for) = (r.read_consistency()?, r.read_int()?, r.read_int()?);
                let (num_failures, reasons) = read_failures(r, v5)?;
                let write_type = write_type(r)?;
                ErrorKind::WriteFailure { consistency, received, block_for, num_failures, write_type, reasons }
            }
            SYNTAX_ERROR => ErrorKind::SyntaxError,
            UNAUTHORIZED => ErrorKind::Unauthorized,
            INVALID => ErrorKind::Invalid,
            CONFIG_ERROR => ErrorKind::ConfigError,
            ALREADY_EXISTS => ErrorKind::AlreadyExists { keyspace: r.read_string()?, table: r.read_string()? },
            UNPREPARED => ErrorKind::Unprepared { id: r.read_short_bytes()? },
            other => return Err(ProtocolError::UnknownErrorCode(other)),
        };
        Ok(ErrorBody { kind, message })
    }
}

/// v4: the `[int]` number of failures; v5: the reason map.
fn write_failures(out: &mut BytesMut, v5: bool, num_failures: i32, reasons: &[(IpAddr, u16)]) {
    if !v5 {
        wire::write_int(out, num_failures);
        return;
    }
    wire::write_int(out, i32::try_from(reasons.len()).expect("fewer failed replicas than i32::MAX"));
    for (addr, code) in reasons {
        match addr {
            IpAddr::V4(a) => {
                wire::write_u8(out, 4);
                out.extend_from_slice(&a.octets());
            }
            IpAddr::V6(a) => {
                wire::write_u8(out, 16);
                out.extend_from_slice(&a.octets());
            }
        }
        wire::write_short(out, *code);
    }
}

fn read_failures(r: &mut Reader, v5: bool) -> Result<(i32, Vec<(IpAddr, u16)>), ProtocolError> {
    let n = r.read_int()?;
    if !v5 {
        return Ok((n, Vec::new()));
    }
    let count = usize::try_from(n).map_err(|_| ProtocolError::NegativeLength { what: "a reason map", len: n })?;
    // An entry takes at least 7 bytes: a length, 4 address bytes, a code.
    let mut reasons = Vec::with_capacity(r.bounded_capacity(count, 7));
    for _ in 0..count {
        let addr = match r.read_u8()? {
            4 => {
                let b = r.take(4, "an IPv4 address")?;
                IpAddr::from(<[u8; 4]>::try_from(b.as_ref()).map_err(|_| ProtocolError::InvalidInetLength(4))?)
            }
            16 => {
                let b = r.take(16, "an IPv6 address")?;
                IpAddr::from(<[u8; 16]>::try_from(b.as_ref()).map_err(|_| ProtocolError::InvalidInetLength(16))?)
            }
            other => return Err(ProtocolError::InvalidInetLength(other)),
        };
        reasons.push((addr, r.read_short()?));
    }
    Ok((n, reasons))
}
