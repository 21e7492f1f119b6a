//! Placement: Cassandra's Murmur3 partitioner, the token ring, replica
//! placement, ownership and balanced token allocation.
//!
//! This crate is pure (no I/O, no clock, no global RNG); randomness comes in
//! as a `&mut impl rand::Rng` argument.
//!
//! Invariants:
//! - `token_of(key)` equals what Cassandra's `Murmur3Partitioner.getToken`
//!   returns for the same serialized partition key, byte for byte. The test
//!   vectors below were taken from real Cassandra via the drivers' test suites.
//! - Tokens are in `[i64::MIN + 1, i64::MAX]`: Cassandra maps `Long.MIN_VALUE`
//!   (its "minimum token", never owned by a key) to `Long.MAX_VALUE`, and no
//!   node may own it.
//! - The ring (`TokenMetadata`) maps each token to one node; a range is
//!   `(previous token, token]`, wrapping past `i64::MAX`, and a key's primary
//!   replica is the owner of the first ring token `>=` the key's token.
//! - `ReplicationStrategy::replicas` places replicas exactly as Cassandra's
//!   `SimpleStrategy` / `NetworkTopologyStrategy` do (checked against the
//!   python driver's `make_token_replica_map` on generated topologies, see
//!   `tests/placement_fixture.rs`), primary replica first, no duplicates.
//! - Ownership fractions are of 2^64 tokens; primary ownership sums to 1,
//!   effective ownership to the number of replicas per range.
//! - `allocate_tokens` returns the requested number of distinct tokens not
//!   owned by anyone in the ring; it only reads the ring it is given.

pub mod allocation;
pub mod murmur3;
pub mod ownership;
pub mod strategy;
pub mod tokens;
pub mod topology;

pub use allocation::allocate_tokens;
pub use murmur3::token_of;
pub use ownership::{effective_ownership, primary_ownership};
pub use strategy::ReplicationStrategy;
pub use topology::{range_size, HostId, NodeInfo, TokenMetadata, TokenRange, TopologyError};

/// A Murmur3 token.
pub type Token = i64;
