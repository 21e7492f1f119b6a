//! The CQL native-protocol server and the statement executors behind it.
//!
//! `server` owns sockets and frames and groups a connection's ready writes;
//! `processor` turns requests into executions: `select`, `modify`
//! (INSERT/UPDATE/DELETE/BATCH), `ddl`, `describe`, over the `schema` service
//! and the virtual `system` tables, and reaches user data only through the
//! `data::DataPlane` (the cluster's, implemented in `node`). `bind` evaluates
//! terms; `prepare` describes bind markers; `auth` holds the authenticator,
//! the roles, the role statements and the caches over `system_auth`, and
//! `permissions` the authorizer: GRANT / REVOKE / LIST PERMISSIONS and the
//! check each statement passes (the login exchange itself is `server`'s).
//!
//! Invariants:
//! - Only `server` knows about connections; only `cql-protocol` knows bytes
//!   on the wire; statement executors never see a socket.
//! - Every error that reaches a client is a `QueryError` with Cassandra's
//!   error code and wording.

pub mod audit;
pub mod auth;
pub mod bind;
pub mod cas;
pub mod clock;
pub mod common;
pub mod data;
pub mod ddl;
pub mod describe;
pub mod error;
pub mod functions;
pub mod index;
pub mod modify;
pub mod permissions;
pub mod prepare;
pub mod processor;
pub mod schema;
pub mod schema_merge;
pub mod select;
pub mod server;
pub mod system;
pub mod tls;
pub mod traces;
pub mod views;

pub use processor::{BatchLimits, Processor};
pub use server::{serve, ServerConfig, Stages};
