//! The node's metrics: lock-free latency histograms with Cassandra's bucket
//! layout, the client request metrics every request records, per-table
//! metrics, and the Prometheus text format they are scraped in.
//!
//! Invariants:
//! - Recording is a few relaxed atomic adds and never blocks, allocates or
//!   takes a lock: the write path pays for it per request, not per scrape.
//! - Reading (a scrape, `nodetool`-style commands) takes a snapshot by
//!   loading each atomic once; a snapshot taken during recording may be off
//!   by the requests in flight, never torn in a way that makes a count
//!   smaller than an earlier one (counts only grow).
//! - Names and labels follow Cassandra's metric names (the mapping is in
//!   README's "Operating Shoal"), written `shoal_<group>_<name>` in
//!   Prometheus' conventions: seconds, bytes, `_total` for counters.

pub mod client;
pub mod histogram;
pub mod prom;
pub mod table;

pub use client::{ClientRequests, Op, Outcome, CLIENT};

use std::sync::atomic::{AtomicU64, Ordering};

/// Reads that found replicas disagreeing and wrote the difference back
/// before answering (Cassandra's `ReadRepair.RepairedBlocking`).
pub static READ_REPAIRS: AtomicU64 = AtomicU64::new(0);

/// Internode requests this node refused unserved because its inbound queue
/// was full (Cassandra's `DroppedMessage.Dropped` per verb), by verb name in
/// Cassandra's spelling (`MUTATION_REQ`). Drops are rare: a lock is fine.
pub static DROPPED_MESSAGES: std::sync::Mutex<std::collections::BTreeMap<String, u64>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// Counts one dropped message of `verb` (a Rust-style name: `MutationReq`).
pub fn dropped(verb: &str) {
    let name = screaming_snake(verb);
    *DROPPED_MESSAGES.lock().unwrap_or_else(|p| p.into_inner()).entry(name).or_insert(0) += 1;
}

/// The dropped messages per verb, with the verbs clients' requests become
/// (`MUTATION_REQ`, `READ_REQ`) always listed.
pub fn dropped_messages() -> Vec<(String, u64)> {
    let mut all = DROPPED_MESSAGES.lock().unwrap_or_else(|p| p.into_inner()).clone();
    for verb in ["MUTATION_REQ", "READ_REQ"] {
        all.entry(verb.to_string()).or_insert(0);
    }
    all.into_iter().collect()
}

/// `MutationReq` -> `MUTATION_REQ`.
fn screaming_snake(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// Native protocol connections open now (Cassandra's `Client.connectedNativeClients`).
pub static CONNECTED_CLIENTS: AtomicU64 = AtomicU64::new(0);

/// Counts a client connection while it lives.
pub struct ClientConnection(());

impl ClientConnection {
    pub fn open() -> ClientConnection {
        CONNECTED_CLIENTS.fetch_add(1, Ordering::Relaxed);
        ClientConnection(())
    }
}

impl Drop for ClientConnection {
    fn drop(&mut self) {
        CONNECTED_CLIENTS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A request stage's counts (Cassandra's thread pool metrics): tasks
/// running, waiting for a slot, and done.
#[derive(Default)]
pub struct Stage {
    pub active: AtomicU64,
    pub pending: AtomicU64,
    pub completed: AtomicU64,
}

impl Stage {
    /// Counts a task waiting for the stage until [`Queued::run`].
    pub fn queue(&self) -> Queued<'_> {
        self.pending.fetch_add(1, Ordering::Relaxed);
        Queued(self, false)
    }
}

/// A task of a [`Stage`]: pending until `run`, then active until dropped.
pub struct Queued<'a>(&'a Stage, bool);

impl Queued<'_> {
    pub fn run(&mut self) {
        if !self.1 {
            self.1 = true;
            self.0.pending.fetch_sub(1, Ordering::Relaxed);
            self.0.active.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        if self.1 {
            self.0.active.fetch_sub(1, Ordering::Relaxed);
            self.0.completed.fetch_add(1, Ordering::Relaxed);
        } else {
            self.0.pending.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// The node's request stages: Cassandra's `ReadStage` and `MutationStage`
/// for client requests, as `concurrent_reads`/`concurrent_writes` bound them.
pub static READ_STAGE: Stage = Stage::new_const();
pub static MUTATION_STAGE: Stage = Stage::new_const();

/// Client requests (CQL reads and writes) this process has finished.
pub fn client_requests_completed() -> u64 {
    READ_STAGE.completed.load(Ordering::Relaxed) + MUTATION_STAGE.completed.load(Ordering::Relaxed)
}

/// The stages by Cassandra's pool names (`tpstats`, `/metrics`, `system_views.thread_pools`).
pub const STAGES: [(&str, &Stage); 2] = [("ReadStage", &READ_STAGE), ("MutationStage", &MUTATION_STAGE)];

impl Stage {
    pub const fn new_const() -> Stage {
        Stage { active: AtomicU64::new(0), pending: AtomicU64::new(0), completed: AtomicU64::new(0) }
    }
}
pub use histogram::{CountHistogram, Histogram, Snapshot, Timer};
pub use prom::Writer;
pub use table::TableMetrics;

#[cfg(test)]
mod tests {
    #[test]
    fn dropped_messages_are_named_as_cassandra_names_verbs() {
        assert_eq!(super::screaming_snake("MutationReq"), "MUTATION_REQ");
        assert_eq!(super::screaming_snake("PaxosPrepareReq"), "PAXOS_PREPARE_REQ");
        super::dropped("HintReq");
        let all = super::dropped_messages();
        assert!(all.contains(&("HINT_REQ".to_string(), 1)), "{all:?}");
        assert!(all.iter().any(|(v, _)| v == "MUTATION_REQ"));
    }
}
