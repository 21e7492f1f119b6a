//! The replica side of internode messaging: drains the transport's inbound
//! queue and answers each request (apply mutations, raw reads and digests,
//! key scans, read-repair writes, lightweight transactions' Paxos rounds, repair validation and the record of a
//! finished repair (`repaired`), schema push/pull,
//! streaming, echo). Also the hint
//! dispatcher (replays stored hints to targets that are up again), the
//! schema puller (fetches the schema from a peer that gossips another
//! version) and the DDL's schema push (`push_schema`: returns once every live
//! peer applied the change, failed pushes sent again, bounded).
//!
//! Invariants:
//! - Every request is answered or failed (`Failure` with a code), never
//!   silently dropped, except when the node is shutting down and when its
//!   sender has given up on it (an expired `ExpiringReq`, dropped unserved
//!   and counted as a dropped message of its verb, as Cassandra does).
//! - An undecodable payload answers `Failure(MalformedPayload)` and changes
//!   nothing.
//! - Hints for a target are deleted only after the target acknowledged
//!   every mutation in them.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use net::{message, FailureCode, Inbound, ReadRequest, ReadResponse, Transport, Verb};
use storage::{Storage, WriteBatch};
use uuid::Uuid;

use crate::coordinator::Coordinator;
use crate::stream::StreamSource;
use crate::view::{Status, ViewHandle};
use crate::wire;

/// The schema as the cluster layer sees it (implemented by the CQL layer's
/// schema service).
pub trait SchemaSync: Send + Sync + 'static {
    /// The current schema version (gossiped as `schema`).
    fn version(&self) -> Uuid;
    /// The user schema, serialized for a peer.
    fn export(&self) -> Vec<u8>;
    /// Merges a peer's exported schema; `Ok(true)` when it changed ours.
    fn merge(&self, payload: &[u8]) -> Result<bool, String>;
}

/// At most this many queued mutation requests are applied as one group.
const MUTATION_GROUP_MAX: usize = 256;

/// Serves inbound requests until the queue closes. The mutation requests
/// already queued when the loop wakes are applied as one group: one storage
/// write group, one commit log write (one fsync in `batch` mode), each
/// answered after that commit.
pub async fn serve<T: Transport + Clone>(
    coordinator: Arc<Coordinator<T>>,
    schema: Arc<dyn SchemaSync>,
    streams: Arc<StreamSource>,
    mut inbound: tokio::sync::mpsc::Receiver<Inbound>,
) {
    while let Some(first) = inbound.recv().await {
        let storage = &coordinator.storage;
        let mut mutations = Vec::new();
        let mut next = Some(first);
        while let Some(msg) = next.take() {
            // A request its sender has given up on is dropped here (counted),
            // as Cassandra's stages do when they dequeue one.
            let Some(msg) = msg.live() else {
                if mutations.len() < MUTATION_GROUP_MAX {
                    next = inbound.try_recv().ok();
                }
                continue;
            };
            if msg.verb == Verb::TracedReq {
                crate::traced::serve(&coordinator, &schema, msg);
            } else if msg.verb == Verb::MutationReq {
                mutations.push(msg);
            } else if matches!(msg.verb, Verb::StreamReq | Verb::StreamChunkReq | Verb::StreamDoneReq) {
                tokio::spawn(serve_stream(Arc::clone(&streams), msg));
            } else if msg.verb == Verb::CounterMutationReq {
                tokio::spawn(Arc::clone(&coordinator).serve_counter(msg));
            } else if msg.verb == Verb::StreamPullReq {
                let (streams, transport) = (Arc::clone(&streams), coordinator.transport.clone());
                tokio::spawn(async move {
                    let Inbound { from, payload, responder, .. } = msg;
                    match crate::stream::serve_pull(&streams, &transport, &payload).await {
                        Ok(body) => responder.respond(Verb::StreamPullRsp, body),
                        Err(e) => {
                            tracing::warn!(%from, "stream pull failed: {e}");
                            responder.fail(FailureCode::Storage, &e);
                        }
                    }
                });
            } else if matches!(msg.verb, Verb::PaxosPrepareReq | Verb::PaxosProposeReq | Verb::PaxosCommitReq) {
                // Paxos records are made durable before the answer (an fsync in batch mode).
                let storage = Arc::clone(storage);
                tokio::task::spawn_blocking(move || serve_paxos(&storage, msg));
            } else {
                if msg.verb == Verb::RepairStateReq {
                    // The state is kept by the ranges of the ring this node sees now.
                    crate::repaired::cut_ring(storage, &coordinator.view.snapshot());
                }
                let (storage, schema) = (Arc::clone(storage), Arc::clone(&schema));
                let blocking = (storage.writes_block() && msg.verb == Verb::RepairReq)
                    || matches!(msg.verb, Verb::TruncateReq | Verb::RepairedReq | Verb::RepairPushReq);
                if msg.verb == Verb::HashesReq {
                    // Repair's validation reads whole ranges: bulk work, behind requests.
                    tokio::spawn(async move {
                        let _ = crate::bulk::run(move || handle(&storage, &*schema, msg)).await;
                    });
                } else if blocking {
                    tokio::task::spawn_blocking(move || handle(&storage, &*schema, msg));
                } else {
                    tokio::spawn(async move { handle(&storage, &*schema, msg) });
                }
            }
            if mutations.len() < MUTATION_GROUP_MAX {
                next = inbound.try_recv().ok();
            }
        }
        if !mutations.is_empty() {
            let storage = Arc::clone(storage);
            if storage.writes_block() {
                tokio::task::spawn_blocking(move || apply_mutations(&storage, mutations));
            } else {
                tokio::spawn(async move { apply_mutations(&storage, mutations) });
            }
        }
    }
}

/// Applies mutation requests as one write batch and answers each after the
/// batch's commit (an undecodable or refused request fails alone). Also the
/// transport's inline handler for `MutationReq` where writes do not wait
/// for an fsync (`inline_mutations`).
pub fn apply_mutations(storage: &Storage, requests: Vec<Inbound>) {
    let mut batch = WriteBatch::new();
    let applied: Vec<_> = requests
        .into_iter()
        .filter_map(Inbound::live)
        .map(|msg| {
            let outcome = match message::decode_mutations(&msg.payload) {
                Ok(mutations) => {
                    crate::traced::record_local_write(storage, &mutations);
                    storage.collect(&mut batch, &mutations).map_err(|e| (FailureCode::Storage, e.to_string()))
                }
                Err(e) => Err((FailureCode::MalformedPayload, e.to_string())),
            };
            (msg.from, msg.responder, outcome)
        })
        .collect();
    let committed = storage.commit(std::slice::from_ref(&batch)).map_err(|e| e.to_string());
    for (from, responder, outcome) in applied {
        match outcome.and_then(|()| committed.clone().map_err(|e| (FailureCode::Storage, e))) {
            Ok(()) => responder.respond(Verb::MutationRsp, Bytes::new()),
            Err((code, e)) => {
                tracing::debug!(%from, "mutation request failed: {e}");
                responder.fail(code, &e);
            }
        }
    }
}

/// A lightweight transaction's prepare, propose or commit (`paxos`).
pub(crate) fn serve_paxos(storage: &Storage, msg: Inbound) {
    let Inbound { from, verb, payload, responder, .. } = msg;
    let Some(rsp) = verb.response() else { return };
    match crate::paxos::serve(storage, verb, &payload) {
        Ok(body) => responder.respond(rsp, body),
        Err(crate::paxos::ServeError::Malformed(e)) => responder.fail(FailureCode::MalformedPayload, &e),
        Err(crate::paxos::ServeError::Storage(e)) => {
            tracing::debug!(%from, ?verb, "paxos request failed: {e}");
            responder.fail(FailureCode::Storage, &e);
        }
    }
}

/// A streaming request (`stream::serve` does the work off the runtime's workers).
async fn serve_stream(streams: Arc<StreamSource>, msg: Inbound) {
    let Inbound { from, verb, payload, responder, .. } = msg;
    match crate::stream::serve(streams, from, verb, payload).await {
        Ok((rsp, body)) => responder.respond(rsp, body),
        Err(e) => {
            tracing::debug!(%from, ?verb, "stream request failed: {e}");
            responder.fail(FailureCode::Storage, &e);
        }
    }
}

/// Answers one request of the verbs served inline or on a worker (schema
/// push/pull among them); public for the tests that serve a node's schema verbs.
pub fn handle(storage: &Storage, schema: &dyn SchemaSync, msg: Inbound) {
    let Inbound { from, verb, payload, responder, deadline } = msg;
    let fail = |responder: net::Responder, code: FailureCode, e: &dyn std::fmt::Display| {
        tracing::debug!(%from, ?verb, "internode request failed: {e}");
        responder.fail(code, &e.to_string());
    };
    match verb {
        Verb::Echo => responder.respond(Verb::EchoRsp, payload),
        Verb::MutationReq => apply_mutations(storage, vec![Inbound { from, verb, payload, responder, deadline }]),
        Verb::ReadReq | Verb::DigestReq => {
            let read = ReadRequest::decode(&payload).map_err(|e| e.to_string()).and_then(|r| {
                wire::decode_command(r.table, r.token, r.partition_key.to_vec(), &r.command).map_err(|e| e.to_string())
            });
            if let Ok(read) = &read {
                trace::event(|| crate::traced::read_start(storage, &read.table));
            }
            match read {
                Ok(read) => match storage.read_raw(&read) {
                    Ok(raw) => {
                        trace::event(|| crate::traced::read_done(storage, &read, &raw));
                        let body = if verb == Verb::DigestReq {
                            Bytes::copy_from_slice(&raw.digest())
                        } else {
                            let mut out = Vec::new();
                            raw.encode(&mut out);
                            Bytes::from(out)
                        };
                        let rsp = if verb == Verb::DigestReq { Verb::DigestRsp } else { Verb::ReadRsp };
                        responder.respond(rsp, ReadResponse { body }.encode());
                    }
                    Err(e) => fail(responder, FailureCode::Storage, &e),
                },
                Err(e) => fail(responder, FailureCode::MalformedPayload, &e),
            }
        }
        Verb::ScanReq => match wire::decode_scan(&payload) {
            Ok(scan) => match storage.scan_keys(&scan) {
                Ok(keys) => {
                    let truncated = keys.len() >= scan.partition_limit;
                    responder.respond(Verb::ScanRsp, wire::encode_keys(truncated, &keys));
                }
                Err(e) => fail(responder, FailureCode::Storage, &e),
            },
            Err(e) => fail(responder, FailureCode::MalformedPayload, &e),
        },
        Verb::IndexScanReq => match wire::decode_index_scan(&payload) {
            Ok(scan) => match storage.index_keys(&scan) {
                Ok(keys) => {
                    let truncated = keys.len() >= scan.partition_limit;
                    responder.respond(Verb::IndexScanRsp, wire::encode_keys(truncated, &keys));
                }
                Err(e) => fail(responder, FailureCode::Storage, &e),
            },
            Err(e) => fail(responder, FailureCode::MalformedPayload, &e),
        },
        Verb::RepairReq => match wire::decode_repair(&payload) {
            Ok((table, cells)) => match storage.apply_raw(&table, &cells) {
                Ok(()) => responder.respond(Verb::RepairRsp, Bytes::new()),
                Err(e) => fail(responder, FailureCode::Storage, &e),
            },
            Err(e) => fail(responder, FailureCode::MalformedPayload, &e),
        },
        Verb::TruncateReq => match <[u8; 16]>::try_from(payload.as_ref()) {
            Ok(id) => match storage.truncate(&Uuid::from_bytes(id)) {
                Ok(()) => responder.respond(Verb::TruncateRsp, Bytes::new()),
                Err(e) => fail(responder, FailureCode::Storage, &e),
            },
            Err(_) => fail(responder, FailureCode::MalformedPayload, &"truncate: a table id is 16 bytes"),
        },
        Verb::HashesReq => match wire::decode_hashes_request(&payload) {
            Ok(req) if req.slices => match validate_slices(storage, &req) {
                Ok(hashes) => responder.respond(Verb::HashesRsp, wire::encode_slice_hashes(&hashes)),
                Err(e) => fail(responder, FailureCode::Storage, &e),
            },
            Ok(req) => match validate(storage, &req) {
                Ok(page) => responder.respond(Verb::HashesRsp, wire::encode_hashes(&page)),
                Err(e) => fail(responder, FailureCode::Storage, &e),
            },
            Err(e) => fail(responder, FailureCode::MalformedPayload, &e),
        },
        Verb::RepairPushReq => match crate::repair::apply_push(storage, &payload) {
            Ok(answer) => responder.respond(Verb::RepairPushRsp, answer),
            Err(e) => fail(responder, FailureCode::Storage, &e),
        },
        Verb::RepairedReq => match wire::decode_repaired(&payload) {
            Ok(req) => match crate::repaired::record(storage, &req.table, &req.ranges, req.repaired_at) {
                Ok(()) => {
                    let at: Vec<((i64, i64), u64)> =
                        req.ranges.iter().copied().zip(req.generations.iter().copied()).collect();
                    storage.set_repaired(&req.table, &at);
                    responder.respond(Verb::RepairedRsp, Bytes::new());
                }
                Err(e) => fail(responder, FailureCode::Storage, &e),
            },
            Err(e) => fail(responder, FailureCode::MalformedPayload, &e),
        },
        Verb::RepairStateReq => match wire::decode_repair_state_request(&payload) {
            Ok(req) => {
                let states = storage.repair_states(&req.table, &req.ranges);
                responder.respond(Verb::RepairStateRsp, wire::encode_repair_states(&states));
            }
            Err(e) => fail(responder, FailureCode::MalformedPayload, &e),
        },
        Verb::SchemaPush => match schema.merge(&payload) {
            Ok(changed) => {
                if changed {
                    tracing::info!(%from, "schema updated from a peer's push");
                }
                responder.respond(Verb::SchemaRsp, Bytes::new());
            }
            Err(e) => fail(responder, FailureCode::MalformedPayload, &e),
        },
        Verb::SchemaPull => responder.respond(Verb::SchemaRsp, Bytes::from(schema.export())),
        other => fail(responder, FailureCode::UnknownVerb, &format!("unexpected verb {other:?}")),
    }
}

/// A page of repair's validation of this replica: partition hashes of the
/// request's ranges in order, from its resume point, at most `limit` of
/// them (compacting the table first when asked). Blocking.
pub fn validate(storage: &Storage, req: &wire::HashesRequest) -> Result<wire::HashesPage, String> {
    if req.compact_first {
        storage.compact(Some(&req.table)).map_err(|e| e.to_string())?;
    }
    let (first, mut after) = match &req.resume {
        Some((index, after)) => (*index as usize, after.clone()),
        None => (0, None),
    };
    let limit = req.limit.max(1) as usize;
    let mut page = wire::HashesPage::default();
    for (index, range) in req.ranges.iter().enumerate().skip(first) {
        let from = after.take();
        let want = limit - page.hashes.len();
        let (hashes, more) = storage
            .partition_hashes(&req.table, *range, from.as_ref().map(|(t, k)| (*t, k.as_slice())), want, req.now)
            .map_err(|e| e.to_string())?;
        page.hashes.extend(hashes);
        if page.hashes.len() >= limit {
            let last = page.hashes.last().map(|h| (h.token, h.key.clone()));
            page.next = if more {
                Some((index as u32, last))
            } else {
                (index + 1 < req.ranges.len()).then(|| ((index + 1) as u32, None))
            };
            return Ok(page);
        }
    }
    Ok(page)
}

/// Repair's validation of this replica in slice mode: `limit` slice hashes
/// of each of the request's ranges (compacting the table first when asked).
/// Blocking.
pub fn validate_slices(storage: &Storage, req: &wire::HashesRequest) -> Result<Vec<Vec<u64>>, String> {
    if req.compact_first {
        storage.compact(Some(&req.table)).map_err(|e| e.to_string())?;
    }
    req.ranges
        .iter()
        .map(|range| storage.bucket_hashes(&req.table, *range, req.limit, req.now).map_err(|e| e.to_string()))
        .collect()
}

/// Replays hints to targets that are alive, every `period`. Runs forever.
pub async fn dispatch_hints<T: Transport + Clone>(coordinator: Arc<Coordinator<T>>, period: Duration) {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let _ = replay_once(&coordinator).await;
    }
}

/// Hints older than this are dropped, not replayed: the tombstones they
/// might have been shadowed by can be purged after gc_grace_seconds
/// (Cassandra's default, 10 days), and replaying older data would resurrect
/// it. Cassandra gives each hint a TTL of its tables' smallest gc_grace.
pub const HINT_MAX_AGE_MS: i64 = 864_000 * 1000;

/// One pass over every target with hints; returns hints delivered.
pub async fn replay_once<T: Transport + Clone>(coordinator: &Coordinator<T>) -> usize {
    let mut delivered = 0;
    for target in coordinator.hints.targets() {
        if let Err(e) = coordinator.hints.drop_older_than(target, crate::coordinator::now_ms() - HINT_MAX_AGE_MS) {
            tracing::warn!(%target, "cannot expire old hints: {e}");
        }
        let view = coordinator.view.snapshot();
        let Some(endpoint) = view.endpoint(target) else { continue };
        if !endpoint.alive || !matches!(endpoint.status, Status::Normal | Status::Leaving) || target == view.local {
            continue;
        }
        let addr = endpoint.internode;
        loop {
            let batch = match coordinator.hints.next_batch(target, 1 << 20) {
                Ok(Some(b)) => b,
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(%target, "cannot read hints: {e}");
                    break;
                }
            };
            let mut ok = true;
            for hint in &batch.hints {
                let sent = coordinator
                    .transport
                    .send_request(
                        addr,
                        Verb::MutationReq,
                        Bytes::copy_from_slice(&hint.payload),
                        coordinator.config.write_timeout,
                    )
                    .await;
                if let Err(e) = sent {
                    tracing::debug!(%target, "hint replay paused: {e}");
                    ok = false;
                    break;
                }
                delivered += 1;
            }
            if !ok {
                break;
            }
            if let Err(e) = coordinator.hints.ack(&batch) {
                tracing::warn!(%target, "cannot ack hints: {e}");
                break;
            }
        }
        if delivered > 0 {
            tracing::info!(%target, delivered, "hints replayed");
        }
    }
    delivered
}

/// Pulls the schema from a live peer whose gossiped version differs from
/// ours, every `period`, and pushes ours to peers after local DDL (see
/// `push_schema`). Runs forever.
pub async fn sync_schema<T: Transport + Clone>(
    view: Arc<ViewHandle>,
    transport: T,
    schema: Arc<dyn SchemaSync>,
    period: Duration,
) {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let v = view.snapshot();
        let ours = schema.version();
        let differing: Vec<_> = v
            .peers()
            .filter(|e| e.alive && e.schema_version.is_some() && e.schema_version != Some(ours))
            .map(|e| e.internode)
            .collect();
        for addr in differing {
            match transport.send_request(addr, Verb::SchemaPull, Bytes::new(), Duration::from_secs(5)).await {
                Ok((_, payload)) => match schema.merge(&payload) {
                    Ok(true) => tracing::info!(%addr, "schema pulled from a peer"),
                    Ok(false) => {}
                    Err(e) => tracing::warn!(%addr, "bad schema from a peer: {e}"),
                },
                Err(e) => tracing::debug!(%addr, "schema pull failed: {e}"),
            }
        }
    }
}

/// How long a DDL waits at most for the live peers to apply it.
pub const SCHEMA_PUSH_WAIT: Duration = Duration::from_secs(5);
/// One push waits at most this long for its answer before it is sent again.
const SCHEMA_PUSH_TRY: Duration = Duration::from_secs(2);
/// The pause before a failed push is sent again.
const SCHEMA_PUSH_RETRY: Duration = Duration::from_millis(100);

/// Pushes our schema to every live peer and waits until each has applied it
/// (a peer answers a push once it has merged it), for at most `wait`: a push
/// that failed (timed out, refused by a full queue, a connection closed) is
/// sent again; a peer the failure detector now holds down is no longer
/// waited for. Returns the live peers that did not answer in time (they pull
/// the schema later, `sync_schema`).
///
/// A DDL is answered after this: once it returns empty, every live node's
/// `system.local` shows a schema holding the change, so a driver's agreement
/// check (which compares versions, digests of content) cannot agree on a
/// schema without it, even where a peer's gossiped version is stale.
pub async fn push_schema<T: Transport>(
    view: &ViewHandle,
    transport: &T,
    schema: &dyn SchemaSync,
    wait: Duration,
) -> Vec<SocketAddr> {
    let deadline = tokio::time::Instant::now() + wait;
    let payload = Bytes::from(schema.export());
    let mut pending: Vec<(Uuid, SocketAddr)> =
        view.snapshot().peers().filter(|e| e.alive).map(|e| (e.host_id, e.internode)).collect();
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if pending.is_empty() || left.is_zero() {
            break;
        }
        // Sent at once, awaited in turn.
        let sends: Vec<_> = pending
            .iter()
            .map(|&(id, addr)| {
                let send = transport.send_request(addr, Verb::SchemaPush, payload.clone(), left.min(SCHEMA_PUSH_TRY));
                (id, addr, send)
            })
            .collect();
        let mut failed = Vec::new();
        for (id, addr, send) in sends {
            if let Err(e) = send.await {
                tracing::debug!(%addr, "schema push failed: {e}");
                failed.push((id, addr));
            }
        }
        let v = view.snapshot();
        pending = failed.into_iter().filter(|(id, _)| v.is_alive(*id)).collect();
        if !pending.is_empty() {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            tokio::time::sleep(SCHEMA_PUSH_RETRY.min(left)).await;
        }
    }
    let missed: Vec<SocketAddr> = pending.into_iter().map(|(_, addr)| addr).collect();
    if !missed.is_empty() {
        tracing::warn!(peers = ?missed, "live peers did not apply the schema within {wait:?}; they will pull it");
    }
    missed
}
