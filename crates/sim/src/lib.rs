//! Seeded, replayable simulation of the cluster layer (Tier A of
//! `docs/design/cluster.md`, "Simulation"): the real coordinator, replica
//! verb handlers, hint store and replay, and RocksDB storage of 3–5 nodes,
//! over `net::MemNetwork` with message loss, delays and partitions, on one
//! current-thread tokio runtime with paused time. Membership is modelled (a
//! heartbeat failure detector per node, see `harness`), not gossiped.
//!
//! A run is a function of its seed (`run_seed`): the workload, the fault
//! schedule and the network's own random draws all come from one
//! `StdRng::seed_from_u64(seed)`. The checker (`checker`) then asserts that
//! no acknowledged write is lost, replicas converge after hint replay and
//! read repair, QUORUM reads see earlier acknowledged QUORUM writes, and the
//! healed cluster serves requests. A failure prints `SIM_SEED=<seed>`, the
//! broken property and the tail of the event trace.
//!
//! Modules: `table` (schema and data shape), `harness` (nodes, failure
//! detector), `history` (what clients saw; the trace), `checker`
//! (properties), `run` (workload, nemesis, final phases).
//!
//! Invariants:
//! - No wall-clock time or unseeded randomness influences a run's path
//!   (wall time only measures it); a seed run twice has the same
//!   `SimReport::trace_hash`.
//! - The simulator never works around the code under test: a broken
//!   property is reported, not retried.

pub mod checker;
pub mod harness;
pub mod history;
pub mod run;
pub mod table;

pub use checker::{Property, Violation};
pub use run::{join_cleanup, run_seed, Sabotage, SimConfig, SimFailure, SimReport};
