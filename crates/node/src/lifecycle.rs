//! Node lifecycle operations that move data (issue 21), over
//! `cluster::stream`. Today: `rebuild` (nodetool rebuild): stream every
//! range this node replicates from another live replica, for a node that
//! missed writes beyond the hint window, lost its disk, or joined a new data
//! center. Bootstrap, decommission, removenode and replace build on the same
//! sessions.
//!
//! Invariants:
//! - One data-moving operation at a time on a node; a second is refused
//!   with a message naming the one running.
//! - A range with no live replica but this node fails the operation, naming
//!   the range and its replicas (Cassandra's "Unable to find sufficient
//!   sources for streaming range"); the ranges that did have a source are
//!   still streamed, so a retry has less to do.
//! - A failed session is tried again (resuming, `cluster::stream`) before the
//!   operation gives up on it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use cluster::stream::{Receiver, StreamRegistry, StreamStats};
use cluster::Coordinator;
use cql_server::schema::{Schema, SchemaService};
use net::TcpTransport;
use serde_json::{json, Value as Json};
use types::schema::Replication;
use uuid::Uuid;

/// Tries of one session before the operation gives up on it.
const SESSION_TRIES: usize = 3;

pub struct Lifecycle {
    pub coordinator: Arc<Coordinator<TcpTransport>>,
    pub schema: Arc<SchemaService>,
    pub registry: Arc<StreamRegistry>,
    /// Where received files wait to be ingested.
    pub spool: PathBuf,
    /// The operation running, if any.
    running: Mutex<Option<String>>,
}

/// Clears the running operation when the operation ends, however it ends.
struct Running<'a>(&'a Mutex<Option<String>>);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}

impl Lifecycle {
    pub fn new(
        coordinator: Arc<Coordinator<TcpTransport>>,
        schema: Arc<SchemaService>,
        registry: Arc<StreamRegistry>,
        spool: PathBuf,
    ) -> Lifecycle {
        Lifecycle { coordinator, schema, registry, spool, running: Mutex::new(None) }
    }

    fn begin(&self, what: &str) -> Result<Running<'_>, String> {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(other) = running.as_ref() {
            return Err(format!("Cannot start {what}: {other} is already running on this node"));
        }
        *running = Some(what.to_string());
        Ok(Running(&self.running))
    }

    /// Streams every range of the user keyspaces (or of `keyspace`) that this
    /// node replicates from another live replica, preferring one in
    /// `source_dc` (else the local data center). Returns what moved, per
    /// keyspace and table.
    pub async fn rebuild(&self, keyspace: Option<&str>, source_dc: Option<&str>) -> Result<Json, String> {
        let _running = self.begin("rebuild")?;
        let started = Instant::now();
        let view = self.coordinator.view.snapshot();
        let schema = self.schema.snapshot();
        if let Some(name) = keyspace {
            if Schema::is_system(name) || !schema.keyspaces.contains_key(name) {
                return Err(format!("Unknown keyspace '{name}'"));
            }
        }
        let local_dc = view.local_dc().to_string();
        let prefer_dc = source_dc.unwrap_or(&local_dc).to_string();
        let mut sessions = Vec::new();
        let mut unavailable = Vec::new();
        let mut totals = StreamStats::default();
        let receiver = Receiver {
            transport: &self.coordinator.transport,
            storage: &self.coordinator.storage,
            registry: &self.registry,
            spool: &self.spool,
        };
        for ks in schema.keyspaces.values() {
            if Schema::is_system(&ks.name) || keyspace.is_some_and(|k| k != ks.name) {
                continue;
            }
            if matches!(ks.replication, Replication::Local) || ks.tables.is_empty() {
                continue;
            }
            // The ranges this node replicates, by the replica to stream each from.
            let mut by_source: BTreeMap<Uuid, Vec<(i64, i64)>> = BTreeMap::new();
            for (range, _) in view.ring.ranges() {
                let replicas = view.replicas(ks, range.end);
                if !replicas.contains(&view.local) {
                    continue;
                }
                let source = replicas
                    .iter()
                    .copied()
                    .filter(|r| *r != view.local && view.is_alive(*r))
                    .min_by_key(|r| view.dc_of(*r) != Some(prefer_dc.as_str()));
                match source {
                    Some(s) => by_source.entry(s).or_default().push((range.start, range.end)),
                    None => unavailable.push(format!(
                        "({}, {}] of {} (replicas {})",
                        range.start,
                        range.end,
                        ks.name,
                        replicas
                            .iter()
                            .map(|r| view.endpoint(*r).map_or_else(|| r.to_string(), |e| e.address().to_string()))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )),
                }
            }
            for (source, ranges) in by_source {
                let Some(peer) = view.endpoint(source).map(|e| e.internode) else { continue };
                for table in ks.tables.values() {
                    let session = Uuid::new_v4();
                    let mut last_error = String::new();
                    let mut done = None;
                    for attempt in 1..=SESSION_TRIES {
                        let result = receiver.fetch(peer, session, table.id, &ranges).await;
                        match result {
                            Ok(stats) => {
                                done = Some(stats);
                                break;
                            }
                            Err(e) => {
                                tracing::warn!(%peer, table = %table.name, attempt, "stream session failed: {e}");
                                last_error = e;
                            }
                        }
                    }
                    let Some(stats) = done else {
                        return Err(format!(
                            "rebuild failed: streaming {}.{} from {} failed {SESSION_TRIES} times: {last_error}",
                            ks.name,
                            table.name,
                            peer.ip()
                        ));
                    };
                    totals.files += stats.files;
                    totals.bytes += stats.bytes;
                    totals.fetched += stats.fetched;
                    totals.entries += stats.entries;
                    sessions.push(json!({
                        "keyspace": ks.name,
                        "table": table.name,
                        "source": peer.ip().to_string(),
                        "ranges": ranges.len(),
                        "session": session,
                        "files": stats.files,
                        "bytes": stats.bytes,
                        "entries": stats.entries,
                    }));
                }
            }
        }
        if !unavailable.is_empty() {
            return Err(format!(
                "Unable to find sufficient sources for streaming range {}{}",
                unavailable.iter().take(5).cloned().collect::<Vec<_>>().join("; "),
                if unavailable.len() > 5 { format!(" and {} more", unavailable.len() - 5) } else { String::new() }
            ));
        }
        let seconds = started.elapsed().as_secs_f64();
        Ok(json!({
            "operation": "rebuild",
            "keyspace": keyspace,
            "sessions": sessions,
            "files": totals.files,
            "bytes": totals.bytes,
            "entries": totals.entries,
            "seconds": seconds,
            "mb_per_s": if seconds > 0.0 { totals.bytes as f64 / seconds / 1e6 } else { 0.0 },
        }))
    }
}
