//! Request tracing in the cluster layer (`trace`): the coordinator's
//! requests to replicas carry the trace session (`Verb::TracedReq`) while
//! its thread works for one ([`outgoing`]), and a replica serving such a
//! request joins the session ([`serve`]): its steps become events of the
//! session with this node as their source, timed from the message's arrival.
//!
//! Invariants:
//! - Outside a trace session requests go as they always did (one
//!   thread-local read decides); a traced request differs only by its
//!   envelope, so the replica serves it exactly as the plain one.
//! - A `TracedReq` that does not decode is failed (`MalformedPayload`), as any
//!   undecodable request; one arriving while this node has no tracer is
//!   served untraced.
//! - Event texts follow Cassandra 5.0's where a step corresponds (verb names
//!   such as `MUTATION_REQ`, "Appending to commitlog", "Adding to t memtable").

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use net::{FailureCode, Inbound, Traced, Transport, Verb};
use storage::Storage;
use types::mutation::Mutation;
use uuid::Uuid;

use crate::coordinator::Coordinator;
use crate::verbs::SchemaSync;

/// Cassandra 5.0's name of a verb (`org.apache.cassandra.net.Verb`), as its
/// trace events spell it.
pub fn verb_name(verb: Verb) -> &'static str {
    match verb {
        Verb::MutationReq => "MUTATION_REQ",
        Verb::MutationRsp => "MUTATION_RSP",
        Verb::ReadReq | Verb::DigestReq => "READ_REQ",
        Verb::ReadRsp | Verb::DigestRsp => "READ_RSP",
        Verb::ScanReq | Verb::IndexScanReq => "RANGE_REQ",
        Verb::ScanRsp | Verb::IndexScanRsp => "RANGE_RSP",
        Verb::RepairReq => "READ_REPAIR_REQ",
        Verb::RepairRsp => "READ_REPAIR_RSP",
        Verb::TruncateReq => "TRUNCATE_REQ",
        Verb::CounterMutationReq => "COUNTER_MUTATION_REQ",
        Verb::PaxosPrepareReq => "PAXOS_PREPARE_REQ",
        Verb::PaxosProposeReq => "PAXOS_PROPOSE_REQ",
        Verb::PaxosCommitReq => "PAXOS_COMMIT_REQ",
        Verb::Echo => "ECHO_REQ",
        _ => "INTERNAL_REQ",
    }
}

/// The verb and payload to send a request under: as they are outside a
/// trace session; inside one, the send is recorded and the request wrapped
/// in a `TracedReq`, so the replica records its own steps.
pub fn outgoing(addr: SocketAddr, verb: Verb, payload: Bytes) -> (Verb, Bytes) {
    let Some(state) = trace::current() else { return (verb, payload) };
    state.event(format!("Sending {} message to /{addr} message size {} bytes", verb_name(verb), payload.len()));
    (Verb::TracedReq, Traced { session: state.session_id(), verb, payload }.encode())
}

/// The event of a replica's answer arriving at the coordinator: its response
/// verb's name, or `FAILURE_RSP` for a failure or no answer in time.
pub(crate) fn answered(addr: SocketAddr, verb: Verb, ok: bool) -> String {
    let name = if ok { verb_name(verb) } else { "FAILURE_RSP" };
    format!("{name} message received from /{addr}")
}

/// The names of the tables `mutations` write, each once (for trace events).
pub(crate) fn table_names(storage: &Storage, mutations: &[Mutation]) -> Vec<String> {
    let mut ids: Vec<Uuid> = mutations.iter().map(|m| m.table).collect();
    ids.sort_unstable();
    ids.dedup();
    ids.iter().map(|id| table_name(storage, id)).collect()
}

/// A table's name, or its id when this node does not know it.
pub(crate) fn table_name(storage: &Storage, id: &Uuid) -> String {
    storage
        .keyspace_of(id)
        .and_then(|ks| ks.tables.values().find(|t| t.id == *id).map(|t| t.name.clone()))
        .unwrap_or_else(|| id.to_string())
}

/// Records a local write's steps (Cassandra's `Keyspace.applyInternal`).
pub(crate) fn record_local_write(storage: &Storage, mutations: &[Mutation]) {
    if trace::is_tracing() {
        trace::event(|| "Appending to commitlog".to_string());
        for table in table_names(storage, mutations) {
            trace::event(|| format!("Adding to {table} memtable"));
        }
    }
}

/// Serves a `TracedReq`: unwraps it, joins its session on this node (when
/// it has a tracer) and serves the inner request in it. Traced requests are
/// rare: each runs on a thread of its own (the blocking pool), or, for a
/// counter update, in a task that carries the session.
pub(crate) fn serve<T: Transport + Clone>(
    coordinator: &Arc<Coordinator<T>>,
    schema: &Arc<dyn SchemaSync>,
    msg: Inbound,
) {
    let Inbound { from, payload, responder, deadline, .. } = msg;
    let traced = match Traced::decode(&payload) {
        Ok(t) => t,
        Err(e) => return responder.fail(FailureCode::MalformedPayload, &e.to_string()),
    };
    let inner = Inbound { from, verb: traced.verb, payload: traced.payload, responder, deadline };
    let state = coordinator.tracer().map(|tracer| {
        let state = tracer.join(traced.session);
        state.event(format!("{} message received from /{from}", verb_name(inner.verb)));
        state
    });
    let enqueued = move |state: &Option<Arc<trace::TraceState>>| {
        if let Some(state) = state {
            state.event(format!("Enqueuing response to /{from}"));
        }
    };
    if inner.verb == Verb::CounterMutationReq {
        let served = Arc::clone(coordinator).serve_counter(inner);
        tokio::spawn(async move {
            match &state {
                Some(s) => trace::Instrumented::new(Arc::clone(s), Box::pin(served)).await,
                None => served.await,
            }
            enqueued(&state);
        });
        return;
    }
    let (storage, schema) = (Arc::clone(&coordinator.storage), Arc::clone(schema));
    tokio::task::spawn_blocking(move || {
        let run = || match inner.verb {
            Verb::PaxosPrepareReq | Verb::PaxosProposeReq | Verb::PaxosCommitReq => {
                crate::verbs::serve_paxos(&storage, inner)
            }
            _ => crate::verbs::handle(&storage, &*schema, inner),
        };
        match &state {
            Some(s) => trace::with(Arc::clone(s), run),
            None => run(),
        }
        enqueued(&state);
    });
}

/// The event that ends a traced read of one partition on a replica: the live
/// rows the read found (resolved from the raw read, only when traced).
pub(crate) fn read_done(storage: &Storage, read: &storage::PartitionRead, raw: &storage::RawPartition) -> String {
    let partition = storage.resolve_raw(read, raw).ok().flatten();
    read_rows(partition.as_ref())
}

/// "Read N live rows" (Cassandra adds the tombstone cells it met, which
/// Shoal's reads do not count).
pub(crate) fn read_rows(partition: Option<&storage::Partition>) -> String {
    let rows = partition.map_or(0, |p| p.rows.len() + usize::from(p.static_row.is_some()));
    format!("Read {rows} live rows")
}

/// The event that starts a read of one partition on this node.
pub(crate) fn read_start(storage: &Storage, table: &Uuid) -> String {
    format!("Executing single-partition query on {}", table_name(storage, table))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_a_session_requests_go_as_they_are() {
        let addr: SocketAddr = "127.0.0.2:7000".parse().expect("address");
        let payload = Bytes::from_static(b"mutations");
        let (verb, sent) = outgoing(addr, Verb::MutationReq, payload.clone());
        assert_eq!((verb, sent), (Verb::MutationReq, payload));
    }

    #[test]
    fn inside_a_session_requests_carry_it_and_the_send_is_recorded() {
        let (tracer, mut records) = trace::Tracer::new("127.0.0.1:7000".parse().expect("address"), 16);
        let state = tracer.join(Uuid::from_u128(42));
        let addr: SocketAddr = "127.0.0.2:7000".parse().expect("address");
        let payload = Bytes::from_static(b"read command");
        let (verb, sent) = trace::with(state, || outgoing(addr, Verb::DigestReq, payload.clone()));
        assert_eq!(verb, Verb::TracedReq);
        let traced = Traced::decode(&sent).expect("a Traced payload");
        assert_eq!(traced, Traced { session: Uuid::from_u128(42), verb: Verb::DigestReq, payload });
        match records.try_recv() {
            Ok(trace::Record::Event(e)) => {
                assert_eq!(e.session, Uuid::from_u128(42));
                assert_eq!(e.activity, "Sending READ_REQ message to /127.0.0.2:7000 message size 12 bytes");
                assert_eq!(e.source, "127.0.0.1".parse::<std::net::IpAddr>().expect("ip"));
            }
            other => panic!("expected the send's event, got {other:?}"),
        }
        assert!(records.try_recv().is_err(), "one event");
    }

    #[test]
    fn every_request_verb_has_a_name() {
        for verb in Verb::ALL.into_iter().filter(|v| v.response().is_some()) {
            assert!(verb_name(verb).ends_with("_REQ"), "{verb:?}");
        }
        assert_eq!(verb_name(Verb::MutationReq), "MUTATION_REQ");
        assert_eq!(verb_name(Verb::ReadReq), "READ_REQ");
    }
}
