//! Internode messaging: how Shoal nodes talk to each other (Cassandra's
//! `org.apache.cassandra.net`). Replica writes, reads, digests, hints and
//! schema travel here; gossip does not (it has its own UDP protocol).
//!
//! Layers:
//! - `frame` (sans-IO): the versioned, checksummed frame and a streaming
//!   decoder. The byte layout is in `FORMAT.md` and in `frame`'s docs.
//! - `message` (sans-IO): payload codecs per verb (mutations, acks, reads,
//!   failures, the handshake).
//! - `transport`: the `Transport` trait the cluster layer codes against, the
//!   inbound queue with its `Responder`, and `NetError`.
//! - `tcp`: the real transport (tokio TCP, one connection per peer, request
//!   ids, coalesced writes). `mem`: an in-memory network with seeded faults
//!   for tests and the simulator.
//!
//! What this crate is not: it does not retry, hint, choose replicas or know
//! what a consistency level is; it moves bytes and reports failures fast.
//!
//! Invariants:
//! - Only this crate knows internode bytes.
//! - No input from a peer panics the node: decoders are bounds-checked and
//!   fuzzed with seeded garbage; a bad frame closes only its connection.
//! - Every queue and in-flight map is bounded; a full one fails fast with
//!   `NetError::Overloaded` (or answers `Failure(Overloaded)`), never blocks.
//! - Every request resolves by its deadline.
//!
//! Limits (defaults, see `TcpConfig::new` / `MemConfig::default`):
//!
//! | limit                           | default  | why                                         |
//! |---------------------------------|----------|---------------------------------------------|
//! | `payload_bytes_max`             | 16 MiB   | above Cassandra's max mutation size         |
//! | `queue_frames_max` per conn     | 16 Ki    | ~100 ms of a busy peer; then fail and hint  |
//! | `queue_bytes_max` per conn      | 64 MiB   | bounds memory held for a slow peer          |
//! | `pending_requests_max` per peer | 64 Ki    | bounds the response-matching map            |
//! | `inbound_queue_max`             | 16 Ki    | the node's dispatcher falls behind: shed    |
//! | `inbound_connections_max`       | 1024     | one per peer expected                       |
//! | `write_batch_bytes_max`         | 256 KiB  | one syscall for many small frames           |
//! | `MUTATIONS_PER_MESSAGE_MAX`     | 4096     | work one frame may ask for                  |

#![deny(clippy::indexing_slicing)]
#![cfg_attr(test, allow(clippy::indexing_slicing))]

pub mod expiry;
pub mod frame;
pub mod mem;
pub mod message;
pub mod tcp;
pub mod transport;

pub use frame::{Flags, Frame, FrameDecoder, FrameError, Verb};
pub use mem::{MemConfig, MemFaults, MemNetwork, MemStats, MemTransport};
pub use message::{DecodeError, Expiring, Failure, FailureCode, MutationAck, ReadRequest, ReadResponse, Traced};
pub use tcp::{BulkConnector, BulkHandler, InlineHandler, InternodeTls, TcpConfig, TcpTransport, BULK_READY};
pub use transport::{Inbound, NetError, Responder, Response, Transport};
