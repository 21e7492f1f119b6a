//! Errors a request can end in, in Cassandra's terms. Each maps to one native
//! protocol error code; messages follow Cassandra's wording so drivers and
//! people recognise them.

use types::{Consistency, WriteType};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QueryError {
    /// 0x2000: the statement does not parse.
    #[error("{0}")]
    Syntax(String),
    /// 0x2200: the statement parses but is not valid (unknown table, type mismatch, ...).
    #[error("{0}")]
    Invalid(String),
    /// 0x2400: CREATE of something that exists (table is empty for a keyspace).
    #[error("{message}")]
    AlreadyExists { keyspace: String, table: String, message: String },
    /// 0x2100: not permitted (e.g. altering a system keyspace).
    #[error("{0}")]
    Unauthorized(String),
    /// 0x2300: a valid statement the configuration refuses.
    #[error("{0}")]
    Config(String),
    /// 0x1000: not enough live replicas for the consistency level.
    #[error("Cannot achieve consistency level {}", .consistency.name())]
    Unavailable { consistency: Consistency, required: i32, alive: i32 },
    /// 0x1100
    #[error("Operation timed out - received only {received} responses.")]
    WriteTimeout { consistency: Consistency, received: i32, block_for: i32, write_type: WriteType },
    /// 0x1200
    #[error("Operation timed out - received only {received} responses.")]
    ReadTimeout { consistency: Consistency, received: i32, block_for: i32, data_present: bool },
    /// 0x2500: EXECUTE of an id this node does not know.
    #[error("Prepared query with ID {} not found (either the query was not prepared on this host (maybe the host has been restarted?) or you have prepared too many queries and it has been evicted from the internal cache)", hex(.0))]
    Unprepared(Vec<u8>),
    /// 0x1001
    #[error("{0}")]
    Overloaded(String),
    /// 0x000A
    #[error("{0}")]
    Protocol(String),
    /// 0x0000: a fault of the node (storage error and the like).
    #[error("{0}")]
    Server(String),
    /// 0x1400: a function (an arithmetic operation included) failed on its arguments.
    #[error("{message}")]
    FunctionFailure { keyspace: String, function: String, arg_types: Vec<String>, message: String },
    /// 0x1300: replicas failed the read (e.g. a secondary index still building);
    /// `reasons`: each failed replica and its `RequestFailureReason` code (v5's reason map).
    #[error("{message}")]
    ReadFailure {
        consistency: Consistency,
        received: i32,
        block_for: i32,
        failures: i32,
        message: String,
        reasons: Vec<(std::net::IpAddr, u16)>,
    },
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl QueryError {
    pub fn invalid(msg: impl Into<String>) -> QueryError {
        QueryError::Invalid(msg.into())
    }
}

impl From<storage::StorageError> for QueryError {
    fn from(e: storage::StorageError) -> Self {
        match e {
            // The disk usage guardrail's refusal is an InvalidRequest, as
            // Cassandra's guardrails are (`GuardrailViolatedException`).
            storage::StorageError::KeyTooLong(_)
            | storage::StorageError::Invalid(_)
            | storage::StorageError::DiskUsageExceeded => QueryError::Invalid(e.to_string()),
            storage::StorageError::UnknownTable(_) => QueryError::Invalid(e.to_string()),
            other => QueryError::Server(other.to_string()),
        }
    }
}
