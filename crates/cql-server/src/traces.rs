//! The trace writer: drains the node's trace queue (`trace::Tracer`) and
//! writes each record as rows of `system_traces` (`sessions`, `events`)
//! through the normal write path, at ONE, with Cassandra's TTL of one day,
//! so any node reads a trace back. Also what the server does for a traced
//! request ([`begin`]): the session's request text and parameters, as
//! Cassandra's messages describe themselves.
//!
//! Invariants:
//! - Runs off the requests' path: records are written by this task (on the
//!   blocking pool), never by the request that made them; a write that fails
//!   loses those rows only (logged at debug), never the writer.
//! - Nothing this writer does is traced: its thread has no session.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use cql_protocol::{BatchStatement, QueryParams, Request};
use trace::{Record, TraceState, Tracer};
use types::{Consistency, Value};

use crate::auth::AuthTables;
use crate::processor::Processor;

/// At most this many records are written as one group.
const RECORDS_PER_WRITE: usize = 512;

const INSERT_SESSION: &str = "INSERT INTO system_traces.sessions (session_id, client, command, coordinator, \
     coordinator_port, parameters, request, started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) USING TTL 86400";
const FINISH_SESSION: &str = "UPDATE system_traces.sessions USING TTL 86400 SET duration = ? WHERE session_id = ?";
const INSERT_EVENT: &str = "INSERT INTO system_traces.events (session_id, event_id, activity, source, \
     source_elapsed, source_port, thread) VALUES (?, ?, ?, ?, ?, ?, ?) USING TTL 86400";

/// Writes the records `rx` yields until every sender is gone. The
/// statements' TTL is `trace::TRACE_TTL_SECONDS` (checked by the tests).
pub async fn write_records(processor: Arc<Processor>, mut rx: tokio::sync::mpsc::Receiver<Record>) {
    let mut dropped = 0;
    while let Some(first) = rx.recv().await {
        if let Some(now) = processor.tracer.as_ref().map(|t| t.dropped()).filter(|now| *now > dropped) {
            tracing::warn!("{} trace records dropped (the trace queue was full); {now} in all", now - dropped);
            dropped = now;
        }
        let mut records = vec![first];
        while records.len() < RECORDS_PER_WRITE {
            match rx.try_recv() {
                Ok(r) => records.push(r),
                Err(_) => break,
            }
        }
        let processor = Arc::clone(&processor);
        let written = tokio::task::spawn_blocking(move || write(&processor, &records)).await;
        if let Err(e) = written {
            tracing::debug!("trace writer task failed: {e}");
        }
    }
}

/// Writes `records` as one group of statements at ONE.
fn write(processor: &Processor, records: &[Record]) {
    let statements: Vec<(&str, Vec<Value>)> = records.iter().map(statement).collect();
    if let Err(e) = processor.modify(&statements, Consistency::One) {
        tracing::debug!(records = records.len(), "trace rows not written: {e}");
    }
}

/// The statement that writes `record`, and its values.
fn statement(record: &Record) -> (&'static str, Vec<Value>) {
    match record {
        Record::Start(s) => (
            INSERT_SESSION,
            vec![
                Value::Uuid(s.session),
                Value::Inet(s.client),
                Value::Text(s.command.to_string()),
                Value::Inet(s.coordinator),
                Value::Int(s.coordinator_port),
                Value::Map(
                    s.parameters.iter().map(|(k, v)| (Value::Text(k.clone()), Value::Text(v.clone()))).collect(),
                ),
                Value::Text(s.request.clone()),
                Value::Timestamp(s.started_at),
            ],
        ),
        Record::Event(e) => (
            INSERT_EVENT,
            vec![
                Value::Uuid(e.session),
                Value::TimeUuid(e.event_id),
                Value::Text(e.activity.clone()),
                Value::Inet(e.source),
                Value::Int(e.source_elapsed),
                Value::Int(e.source_port),
                Value::Text(e.thread.clone()),
            ],
        ),
        Record::Finish { session, duration } => (FINISH_SESSION, vec![Value::Int(*duration), Value::Uuid(*session)]),
    }
}

/// Starts the trace session of a request from `client` (the client asked
/// for it, or the trace probability drew it): Cassandra's request text and
/// parameters for its kind; None for requests that are not traced
/// (PREPARE, which Cassandra traces too, is traced as "Preparing CQL3 query").
pub fn begin(
    tracer: &Arc<Tracer>,
    processor: &Processor,
    client: IpAddr,
    request: &Request,
) -> Option<Arc<TraceState>> {
    let mut parameters = BTreeMap::new();
    let what = match request {
        Request::Query { query, params } => {
            parameters.insert("query".to_string(), query.clone());
            put_params(&mut parameters, params);
            "Execute CQL3 query"
        }
        Request::Execute { id, params, .. } => {
            if let Some(entry) = processor.prepared_entry(id) {
                parameters.insert("query".to_string(), entry.query.clone());
            }
            put_params(&mut parameters, params);
            "Execute CQL3 prepared query"
        }
        Request::Prepare { query, .. } => {
            parameters.insert("query".to_string(), query.clone());
            "Preparing CQL3 query"
        }
        Request::Batch(batch) => {
            let queries: Vec<String> = batch
                .statements
                .iter()
                .map(|s| match s {
                    BatchStatement::Query { query, .. } => query.clone(),
                    BatchStatement::Prepared { id, .. } => {
                        processor.prepared_entry(id).map(|e| e.query.clone()).unwrap_or_default()
                    }
                })
                .collect();
            parameters.insert("consistency_level".to_string(), batch.consistency.name().to_string());
            if let Some(serial) = batch.serial_consistency {
                parameters.insert("serial_consistency_level".to_string(), serial.name().to_string());
            }
            for (i, q) in queries.into_iter().enumerate() {
                parameters.insert(format!("query_{i}"), q);
            }
            "Execute batch of CQL3 queries"
        }
        _ => return None,
    };
    Some(tracer.begin(client, what, parameters))
}

fn put_params(out: &mut BTreeMap<String, String>, params: &QueryParams) {
    out.insert("consistency_level".to_string(), params.consistency.name().to_string());
    out.insert(
        "serial_consistency_level".to_string(),
        params.serial_consistency.unwrap_or(Consistency::Serial).name().to_string(),
    );
    if let Some(size) = params.page_size {
        out.insert("page_size".to_string(), size.to_string());
    }
    if let Some(ts) = params.default_timestamp {
        out.insert("user_timestamp".to_string(), ts.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;
    use trace::TRACE_TTL_SECONDS;
    use uuid::Uuid;

    fn bind_markers(text: &str) -> usize {
        text.matches('?').count()
    }

    #[test]
    fn each_record_binds_every_marker_of_a_statement_that_parses() {
        let ip: IpAddr = "127.0.0.1".parse().expect("ip");
        let records = [
            Record::Start(trace::SessionStart {
                session: Uuid::from_u128(1),
                client: ip,
                command: "QUERY",
                coordinator: ip,
                coordinator_port: 7000,
                parameters: BTreeMap::from([("query".to_string(), "SELECT 1".to_string())]),
                request: "Execute CQL3 query".to_string(),
                started_at: 1,
            }),
            Record::Event(trace::Event {
                session: Uuid::from_u128(1),
                event_id: Uuid::from_u128(2),
                activity: "Parsing".to_string(),
                source: ip,
                source_port: 7000,
                source_elapsed: 3,
                thread: "shoal".to_string(),
            }),
            Record::Finish { session: Uuid::from_u128(1), duration: 9 },
        ];
        for record in &records {
            let (text, values) = statement(record);
            assert!(cql::parse(text).is_ok(), "{text}");
            assert_eq!(bind_markers(text), values.len(), "{text}");
            assert!(text.contains(&format!("USING TTL {TRACE_TTL_SECONDS}")), "{text}");
        }
        let (_, finish) = statement(&records[2]);
        assert_eq!(finish, vec![Value::Int(9), Value::Uuid(Uuid::from_u128(1))]);
    }
}
