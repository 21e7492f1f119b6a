//! Durable hint store for hinted handoff (Cassandra's `HintsService` storage
//! side): when a replica is down, the coordinator keeps the mutation it could
//! not deliver as a *hint* for that target host id, and replays it when gossip
//! marks the target UP. This crate only keeps hints; it does not decide when to
//! hint (`max_hint_window`, `hinted_handoff_enabled`), deliver, or rate-limit.
//! See `docs/design/cluster.md` ("Hints").
//!
//! Layout: per target host id, append-only segment files
//! `<dir>/<target-uuid>-<seq:020>.hints`, each a checksummed header (magic,
//! format version, target, creation time) followed by checksummed records
//! `len | crc32c | created_at_ms | payload`. The byte layout is in `FORMAT.md`.
//!
//! Contract and invariants:
//! - **Oldest first.** `next_batch` returns a target's hints in the order they
//!   were stored (segment sequence, then file order), from one segment at a
//!   time, starting after the last acknowledged position.
//! - **Durability.** `store` appends each record with one `write` syscall, so
//!   an `Ok` hint survives the process being killed; `sync` (called by the node
//!   every few seconds and at shutdown) fsyncs the segments written since, and
//!   the directory. A machine crash may lose hints stored since the last sync.
//! - **Recovery never panics.** `open` walks every segment; a torn or corrupt
//!   record (bad checksum, length past the end) ends that segment's reading
//!   with a warn log and a counter in `stats`, keeping every record before it;
//!   a segment with an unreadable header is skipped and renamed `.corrupt`.
//! - **At-least-once replay.** `ack` deletes a segment's file once all of it is
//!   delivered. Progress inside a segment lives in memory only: after a restart
//!   a partially delivered segment is replayed from its start, and a batch not
//!   acknowledged is returned again. Replay is idempotent because a hint
//!   carries the mutation with its original write timestamps (LWW).
//! - **Bounded.** A target's pending bytes (records not yet acknowledged,
//!   record headers included) never exceed `max_bytes_per_target` (0 =
//!   unlimited): `store` refuses with `HintError::TargetFull` instead. Disk use
//!   may additionally hold segment headers and the acknowledged prefix of the
//!   segment being replayed.
//! - **Replay never races appends.** Replay reads only sealed segments;
//!   `next_batch` seals the active one when it reaches it, so the next `store`
//!   starts a new segment.
//! - **Age cutoff.** `drop_older_than(target, cutoff_ms)` deletes segments
//!   whose hints are all older than the cutoff and makes `next_batch` leave out
//!   older hints (the cutoff is in memory and only moves forward).
//!
//! Concurrency: `HintStore` is `Send + Sync`; each target has its own mutex
//! (held for an append's `write`, never for a replay read or an fsync), so
//! stores for different targets do not contend. One drainer per target is
//! expected; two would get the same batches (harmless, but duplicated work).

#![deny(clippy::indexing_slicing)]
#![cfg_attr(test, allow(clippy::indexing_slicing))]

mod format;
mod segment;
mod store;

pub use format::MAX_PAYLOAD_LEN;
pub use store::{Hint, HintBatch, HintConfig, HintError, HintStats, HintStore, DEFAULT_SEGMENT_BYTES};

/// CRC-32C as used by the hint format (exposed for tools and tests).
pub fn crc32c(data: &[u8]) -> u32 {
    ::crc32c::crc32c(data)
}
