//! Shoal's domain vocabulary: CQL data types and values, consistency levels,
//! and the schema description shared by every layer.
//!
//! This crate is pure: no I/O, no clock, no global RNG. Everything above it
//! (parser, protocol codec, storage, coordinator) speaks in these types.
//!
//! Invariants:
//! - A `Value` always serializes to the exact bytes the CQL native protocol
//!   (v4) uses for its type; storage keeps cells in that same form, so a value
//!   crosses from the wire into storage and back without re-encoding.
//! - `CqlType::to_cql()` prints the type the way Cassandra prints it in
//!   `system_schema.columns.type` (e.g. `frozen<list<int>>`, `map<text, int>`).

#![deny(clippy::indexing_slicing)]
#![cfg_attr(test, allow(clippy::indexing_slicing))]

pub mod bytes;
pub mod codec;
pub mod compare;
pub mod consistency;
pub mod counter;
pub mod cql_type;
pub mod json;
pub mod literal;
pub mod mutation;
pub mod order;
pub mod schema;
pub mod value;

pub use consistency::{Consistency, WriteType};
pub use cql_type::CqlType;
pub use value::Value;
