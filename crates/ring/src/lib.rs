//! Placement: Cassandra's Murmur3 partitioner and token helpers.
//!
//! This crate is pure (no I/O, no clock); randomness comes in as an argument.
//!
//! Invariants:
//! - `token_of(key)` equals what Cassandra's `Murmur3Partitioner.getToken`
//!   returns for the same serialized partition key, byte for byte. The test
//!   vectors below were taken from real Cassandra via the drivers' test suites.
//! - Tokens are in `[i64::MIN + 1, i64::MAX]`: Cassandra maps `Long.MIN_VALUE`
//!   (its "minimum token", never owned by a key) to `Long.MAX_VALUE`.

pub mod murmur3;
pub mod tokens;

pub use murmur3::token_of;

/// A Murmur3 token.
pub type Token = i64;
