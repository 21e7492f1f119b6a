//! EVENT (opcode 0x0C, always on stream -1) and the schema-change description
//! shared with the Schema_change RESULT.
//!
//! An event body is the event type as a `[string]`, then:
//! - TOPOLOGY_CHANGE: `[string]` NEW_NODE / REMOVED_NODE (/ MOVED_NODE, which
//!   Cassandra also sends and drivers accept), then the node's `[inet]`;
//! - STATUS_CHANGE: `[string]` UP / DOWN, then `[inet]`;
//! - SCHEMA_CHANGE: `<change_type><target><options>`: CREATED / UPDATED /
//!   DROPPED; KEYSPACE, TABLE, TYPE, FUNCTION or AGGREGATE; then the keyspace,
//!   the keyspace and name, or the keyspace, name and `[string list]` of
//!   argument types (as CQL types).

use std::net::SocketAddr;

use bytes::BytesMut;

use crate::error::ProtocolError;
use crate::wire::{self, Reader};

/// The event types a client can REGISTER for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    TopologyChange,
    StatusChange,
    SchemaChange,
}

impl EventType {
    pub fn name(self) -> &'static str {
        match self {
            EventType::TopologyChange => "TOPOLOGY_CHANGE",
            EventType::StatusChange => "STATUS_CHANGE",
            EventType::SchemaChange => "SCHEMA_CHANGE",
        }
    }

    pub fn from_name(name: &str) -> Option<EventType> {
        Some(match name {
            "TOPOLOGY_CHANGE" => EventType::TopologyChange,
            "STATUS_CHANGE" => EventType::StatusChange,
            "SCHEMA_CHANGE" => EventType::SchemaChange,
            _ => return None,
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TopologyChangeType {
    NewNode,
    RemovedNode,
    MovedNode,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StatusChangeType {
    Up,
    Down,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SchemaChangeType {
    Created,
    Updated,
    Dropped,
}

/// What a schema change touched.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SchemaChangeTarget {
    Keyspace(String),
    /// Keyspace, table. Index changes are reported as changes to their table.
    Table(String, String),
    /// Keyspace, user type.
    Type(String, String),
    /// Keyspace, function, argument types as CQL types.
    Function(String, String, Vec<String>),
    /// Keyspace, aggregate, argument types as CQL types.
    Aggregate(String, String, Vec<String>),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SchemaChange {
    pub change: SchemaChangeType,
    pub target: SchemaChangeTarget,
}

/// A server-pushed event.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Event {
    TopologyChange { change: TopologyChangeType, addr: SocketAddr },
    StatusChange { change: StatusChangeType, addr: SocketAddr },
    SchemaChange(SchemaChange),
}

impl Event {
    pub fn event_type(&self) -> EventType {
        match self {
            Event::TopologyChange { .. } => EventType::TopologyChange,
            Event::StatusChange { .. } => EventType::StatusChange,
            Event::SchemaChange(_) => EventType::SchemaChange,
        }
    }

    pub(crate) fn encode(&self, out: &mut BytesMut) {
        wire::write_string(out, self.event_type().name());
        match self {
            Event::TopologyChange { change, addr } => {
                let name = match change {
                    TopologyChangeType::NewNode => "NEW_NODE",
                    TopologyChangeType::RemovedNode => "REMOVED_NODE",
                    TopologyChangeType::MovedNode => "MOVED_NODE",
                };
                wire::write_string(out, name);
                wire::write_inet(out, addr);
            }
            Event::StatusChange { change, addr } => {
                let name = match change {
                    StatusChangeType::Up => "UP",
                    StatusChangeType::Down => "DOWN",
                };
                wire::write_string(out, name);
                wire::write_inet(out, addr);
            }
            Event::SchemaChange(sc) => sc.encode(out),
        }
    }

    pub(crate) fn decode(r: &mut Reader) -> Result<Event, ProtocolError> {
        let kind = r.read_string()?;
        Ok(match kind.as_str() {
            "TOPOLOGY_CHANGE" => {
                let change = match r.read_string()?.as_str() {
                    "NEW_NODE" => TopologyChangeType::NewNode,
                    "REMOVED_NODE" => TopologyChangeType::RemovedNode,
                    "MOVED_NODE" => TopologyChangeType::MovedNode,
                    other => return Err(unknown("topology change", other)),
                };
                Event::TopologyChange { change, addr: r.read_inet()? }
            }
            "STATUS_CHANGE" => {
                let change = match r.read_string()?.as_str() {
                    "UP" => StatusChangeType::Up,
                    "DOWN" => StatusChangeType::Down,
                    other => return Err(unknown("status change", other)),
                };
                Event::StatusChange { change, addr: r.read_inet()? }
            }
            "SCHEMA_CHANGE" => Event::SchemaChange(SchemaChange::decode(r)?),
            other => return Err(unknown("event type", other)),
        })
    }
}

impl SchemaChange {
    pub(crate) fn encode(&self, out: &mut BytesMut) {
        let change = match self.change {
            SchemaChangeType::Created => "CREATED",
            SchemaChangeType::Updated => "UPDATED",
            SchemaChangeType::Dropped => "DROPPED",
        };
        wire::write_string(out, change);
        match &self.target {
            SchemaChangeTarget::Keyspace(ks) => {
                wire::write_string(out, "KEYSPACE");
                wire::write_string(out, ks);
            }
            SchemaChangeTarget::Table(ks, name) | SchemaChangeTarget::Type(ks, name) => {
                let target = if matches!(self.target, SchemaChangeTarget::Table(..)) { "TABLE" } else { "TYPE" };
                wire::write_string(out, target);
                wire::write_string(out, ks);
                wire::write_string(out, name);
            }
            SchemaChangeTarget::Function(ks, name, args) | SchemaChangeTarget::Aggregate(ks, name, args) => {
                let target =
                    if matches!(self.target, SchemaChangeTarget::Function(..)) { "FUNCTION" } else { "AGGREGATE" };
                wire::write_string(out, target);
                wire::write_string(out, ks);
                wire::write_string(out, name);
                wire::write_string_list(out, args);
            }
        }
    }

    pub(crate) fn decode(r: &mut Reader) -> Result<SchemaChange, ProtocolError> {
        let change = match r.read_string()?.as_str() {
            "CREATED" => SchemaChangeType::Created,
            "UPDATED" => SchemaChangeType::Updated,
            "DROPPED" => SchemaChangeType::Dropped,
            other => return Err(unknown("schema change type", other)),
        };
        let target = match r.read_string()?.as_str() {
            "KEYSPACE" => SchemaChangeTarget::Keyspace(r.read_string()?),
            "TABLE" => SchemaChangeTarget::Table(r.read_string()?, r.read_string()?),
            "TYPE" => SchemaChangeTarget::Type(r.read_string()?, r.read_string()?),
            "FUNCTION" => SchemaChangeTarget::Function(r.read_string()?, r.read_string()?, r.read_string_list()?),
            "AGGREGATE" => SchemaChangeTarget::Aggregate(r.read_string()?, r.read_string()?, r.read_string_list()?),
            other => return Err(unknown("schema change target", other)),
        };
        Ok(SchemaChange { change, target })
    }
}

fn unknown(what: &'static str, value: &str) -> ProtocolError {
    ProtocolError::UnknownName { what, value: value.to_string() }
}
