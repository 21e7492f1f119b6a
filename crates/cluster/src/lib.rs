//! The cluster layer: membership (gossip over chitchat), the `ClusterView`
//! snapshot, replica plans and consistency levels, the coordinator (writes,
//! digest reads with blocking read repair, range scans), hinted handoff, the
//! internode verb handlers, streaming of token ranges (`stream`) and which
//! ranges a topology change moves where (`movement`), schema
//! propagation, repair of a token range (`repair`: slice then partition
//! hashes, then pushes of what differs), and repair's record of what it
//! repaired when (`repaired`: the repaired horizon of repair-based tombstone
//! GC).
//!
//! Boundaries: `node::plane::ClusterPlane` (the `cql-server` data plane) calls
//! the `Coordinator` for every read and write, and adapts the schema service to
//! `SchemaSync`; `node` wires gossip, the transport, hints and the verb
//! dispatcher together. Only `net` knows internode bytes of the
//! envelope; this crate defines the payloads of its own verbs (`wire`).
//!
//! Invariants: see each module; the overarching one is that a node is its
//! host id (persisted), not its address.

#![deny(clippy::indexing_slicing)]
#![cfg_attr(test, allow(clippy::indexing_slicing))]

pub mod bulk;
pub mod coordinator;
pub mod counter;
pub mod gossip;
pub mod movement;
pub mod paxos;
pub mod plan;
pub mod repair;
pub mod repaired;
pub mod stream;
pub mod traced;
pub mod verbs;
pub mod view;
pub mod wire;

pub use coordinator::{Coordinator, CoordinatorConfig};
pub use plan::CoordError;
pub use view::{ClusterView, Endpoint, Status, ViewHandle};
