//! Seeded, replayable simulation of the cluster layer (Tier A of
//! `docs/design/cluster.md`, "Simulation"): the real coordinator, replica
//! verb handlers, hint store and replay, streaming, repair and RocksDB
//! storage of 3–9 nodes, over `net::MemNetwork` with message loss, delays,
//! partitions and node kills, on one current-thread tokio runtime with
//! paused time. Membership is modelled (announcements spread with a gossip
//! delay, a heartbeat failure detector per node, see `harness`), not
//! gossiped. A lifecycle run also changes the topology while clients run
//! (joins, decommissions, removals and replacements of dead nodes, repairs:
//! `lifecycle`), with the range plans of `cluster::movement` and the
//! stream and repair code the server runs.
//!
//! A run is a function of its seed (`run_seed`): the workload, the fault
//! schedule, the operations and the network's own random draws all come
//! from one `StdRng::seed_from_u64(seed)`. The checker (`checker`) then
//! asserts that no acknowledged write is lost (on the replicas of the final
//! ring), replicas converge after hint replay, repair and read repair,
//! QUORUM reads see earlier acknowledged QUORUM writes, and the healed
//! cluster serves requests. A failure prints `SIM_SEED=<seed>`, the broken
//! property and the tail of the event trace.
//!
//! Lightweight transactions have a run of their own (`lwt`): concurrent
//! CAS and SERIAL reads under the same kinds of faults, judged by a
//! linearizability checker (`linearizable`).
//!
//! Modules: `table` (schema and data shape), `harness` (nodes, membership,
//! failure detector), `gate` (the blocking pool takes turns with the
//! runtime), `lifecycle` (topology changes and repair), `history` (what
//! clients saw; the trace), `checker` (properties), `run` (workload,
//! nemesis, final phases).
//!
//! Modelling choices (what the simulation does not cover):
//! - The end of a topology change (a joiner NORMAL, a leaver LEFT) reaches
//!   every view at once. With Cassandra's gossip it spreads over a few
//!   rounds, during which a coordinator that has not heard reads the old
//!   replicas and may miss a write acknowledged under the new ring: a known
//!   limit of gossip-based membership, which the read checks would flag and
//!   which is not what the simulation looks for.
//! - Announcements reach every node within `harness::GOSSIP_DELAY_MAX`,
//!   partitions or not, and `lifecycle::RING_DELAY` is longer: the
//!   assumption Cassandra's ring delay makes.
//! - A killed node keeps everything it acknowledged (periodic commit log
//!   mode loses up to a period of writes on a real crash).
//!
//! Invariants:
//! - No wall-clock time or unseeded randomness influences a run's path
//!   (wall time only measures it); a seed run twice has the same
//!   `SimReport::trace_hash`.
//! - The simulator never works around the code under test: a broken
//!   property is reported, not retried.

pub mod checker;
pub mod gate;
pub mod harness;
pub mod history;
pub mod lifecycle;
pub mod linearizable;
pub mod lwt;
pub mod run;
pub mod scale;
pub mod table;

pub use checker::{Property, Violation};
pub use lifecycle::{OpKind, OpStats};
pub use lwt::{run_lwt_seed, LwtFailure, LwtReport, LwtSabotage};
pub use run::{join_cleanup, run_seed, Sabotage, SimConfig, SimFailure, SimReport};
