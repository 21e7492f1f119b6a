//! Request tracing: Cassandra's `TRACING ON` and the native protocol's
//! tracing flag. The node's [`Tracer`] starts trace sessions (the
//! coordinator, [`Tracer::begin`]) and joins them (a replica serving a traced
//! internode message, [`Tracer::join`]); the session a thread works for is
//! thread-local ([`with`]; [`Instrumented`] carries it into a future that
//! another task polls), so the layers below record their steps with
//! [`event`] without a parameter on every call.
//!
//! What a session leaves are [`Record`]s: its start (a row of
//! `system_traces.sessions`), its events (rows of `system_traces.events`)
//! and its end (the session's `duration`). They go into a bounded queue
//! that the node's trace writer (`cql_server::traces`) drains, writing them
//! through the normal write path, off the request's path.
//!
//! Invariants:
//! - Recording never blocks and never fails a request: when the queue is
//!   full the record is dropped and counted ([`Tracer::dropped`]).
//! - With no session current on the thread, [`event`] is one thread-local
//!   read and a branch: the activity's text is never built.
//! - Event ids are version-1 UUIDs, distinct and increasing per node
//!   ([`Tracer::new_timeuuid`]): a session's events never overwrite each
//!   other and sort in the order this node recorded them.
//! - `source_elapsed` counts microseconds from when this node began its part
//!   of the session: the coordinator from the request's start, a replica
//!   from the message's arrival.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::mpsc;
use uuid::Uuid;

/// How long trace rows live: Cassandra writes them with a TTL of one day
/// (`tracetype_query_ttl`, 86400 s).
pub const TRACE_TTL_SECONDS: i32 = 86_400;

/// The records the queue holds by default before it drops new ones.
pub const QUEUE_CAPACITY: usize = 16_384;

/// The start of a session: its `system_traces.sessions` row, all but `duration`.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionStart {
    pub session: Uuid,
    pub client: IpAddr,
    /// Cassandra's `Tracing.TraceType` name: `QUERY` for client requests.
    pub command: &'static str,
    pub coordinator: IpAddr,
    pub coordinator_port: i32,
    pub parameters: BTreeMap<String, String>,
    /// What the request was, e.g. `Execute CQL3 query`.
    pub request: String,
    /// Milliseconds since the Unix epoch.
    pub started_at: i64,
}

/// One step of a request on one node: a `system_traces.events` row.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    pub session: Uuid,
    pub event_id: Uuid,
    pub activity: String,
    pub source: IpAddr,
    pub source_port: i32,
    /// Microseconds since this node began its part of the session.
    pub source_elapsed: i32,
    pub thread: String,
}

/// What a trace session leaves, in the order it is recorded.
#[derive(Clone, Debug, PartialEq)]
pub enum Record {
    Start(SessionStart),
    Event(Event),
    /// The request was answered after `duration` microseconds.
    Finish {
        session: Uuid,
        duration: i32,
    },
}

/// The 100-ns ticks between 1582-10-15 (version-1 UUIDs' epoch) and 1970-01-01.
const GREGORIAN_OFFSET_TICKS: u64 = 0x01B2_1DD2_1381_4000;

/// A node's tracing: where its records go, the trace probability, and the
/// time UUIDs of its events.
pub struct Tracer {
    /// This node's internode address: events' `source` and `source_port`.
    source: SocketAddr,
    tx: mpsc::Sender<Record>,
    dropped: AtomicU64,
    /// The probability of tracing a request the client did not ask to trace
    /// (`nodetool settraceprobability`), as `f64` bits; 0 by default.
    probability: AtomicU64,
    last_ticks: AtomicU64,
    clock_seq: u16,
    node: [u8; 6],
}

impl Tracer {
    /// A tracer whose records go into a queue of `capacity`, and that queue's
    /// other end (for the trace writer).
    pub fn new(source: SocketAddr, capacity: usize) -> (Arc<Tracer>, mpsc::Receiver<Record>) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let random: u64 = rand::random();
        let mut node = [0u8; 6];
        node.copy_from_slice(&random.to_be_bytes()[2..8]);
        // The multicast bit: a node id that is not a MAC address (RFC 9562).
        node[0] |= 0x01;
        let tracer = Tracer {
            source,
            tx,
            dropped: AtomicU64::new(0),
            probability: AtomicU64::new(0f64.to_bits()),
            last_ticks: AtomicU64::new(0),
            clock_seq: (random >> 48) as u16 & 0x3FFF,
            node,
        };
        (Arc::new(tracer), rx)
    }

    pub fn source(&self) -> SocketAddr {
        self.source
    }

    /// Records dropped because the queue was full (or the writer gone).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Sets the probability of tracing a request the client did not ask to
    /// trace (clamped to [0, 1]; NaN is 0).
    pub fn set_probability(&self, p: f64) {
        let p = if p.is_nan() { 0.0 } else { p.clamp(0.0, 1.0) };
        self.probability.store(p.to_bits(), Ordering::Relaxed);
    }

    pub fn probability(&self) -> f64 {
        f64::from_bits(self.probability.load(Ordering::Relaxed))
    }

    /// Whether to trace a request the client did not ask to trace: a draw
    /// at the trace probability (no draw while it is 0).
    pub fn sample(&self) -> bool {
        let p = self.probability();
        p > 0.0 && (p >= 1.0 || rand::random::<f64>() < p)
    }

    /// A version-1 UUID of now, distinct from and greater than every one this
    /// tracer made before.
    pub fn new_timeuuid(&self) -> Uuid {
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() / 100).unwrap_or(0) as u64
            + GREGORIAN_OFFSET_TICKS;
        let mut last = self.last_ticks.load(Ordering::Relaxed);
        let ticks = loop {
            let next = if wall > last { wall } else { last + 1 };
            match self.last_ticks.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => break next,
                Err(seen) => last = seen,
            }
        };
        uuid::Builder::from_gregorian_timestamp(ticks, self.clock_seq, &self.node).into_uuid()
    }

    /// Starts a session for a request from `client` that this node
    /// coordinates: records its start and makes it the caller's to run under
    /// ([`with`]) and end ([`TraceState::finish`]).
    pub fn begin(
        self: &Arc<Self>,
        client: IpAddr,
        request: &str,
        parameters: BTreeMap<String, String>,
    ) -> Arc<TraceState> {
        let session = self.new_timeuuid();
        let started_at = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0);
        self.push(Record::Start(SessionStart {
            session,
            client,
            command: "QUERY",
            coordinator: self.source.ip(),
            coordinator_port: i32::from(self.source.port()),
            parameters,
            request: request.to_string(),
            started_at,
        }));
        Arc::new(TraceState { tracer: Arc::clone(self), session, started: Instant::now() })
    }

    /// Joins `session` on this node (a replica serving one of its messages):
    /// elapsed times count from now.
    pub fn join(self: &Arc<Self>, session: Uuid) -> Arc<TraceState> {
        Arc::new(TraceState { tracer: Arc::clone(self), session, started: Instant::now() })
    }

    fn push(&self, record: Record) {
        if self.tx.try_send(record).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// One node's part of one trace session.
pub struct TraceState {
    tracer: Arc<Tracer>,
    session: Uuid,
    started: Instant,
}

impl TraceState {
    pub fn session_id(&self) -> Uuid {
        self.session
    }

    /// Microseconds since this node's part of the session began (saturating).
    pub fn elapsed_micros(&self) -> i32 {
        i32::try_from(self.started.elapsed().as_micros()).unwrap_or(i32::MAX)
    }

    /// Records a step of the request on this node.
    pub fn event(&self, activity: impl Into<String>) {
        let thread = std::thread::current().name().unwrap_or("unnamed").to_string();
        let source = self.tracer.source;
        self.tracer.push(Record::Event(Event {
            session: self.session,
            event_id: self.tracer.new_timeuuid(),
            activity: activity.into(),
            source: source.ip(),
            source_port: i32::from(source.port()),
            source_elapsed: self.elapsed_micros(),
            thread,
        }));
    }

    /// Ends the session (the coordinator, once the request is answered): its
    /// `duration`, at least 1 µs, is what clients wait for before reading
    /// its events.
    pub fn finish(&self) {
        self.tracer.push(Record::Finish { session: self.session, duration: self.elapsed_micros().max(1) });
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<TraceState>>> = const { RefCell::new(None) };
}

/// The session this thread works for, if any.
pub fn current() -> Option<Arc<TraceState>> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Whether this thread works for a trace session.
pub fn is_tracing() -> bool {
    CURRENT.with(|c| c.borrow().is_some())
}

/// Records a step in the session this thread works for; `activity` is not
/// called when there is none.
#[inline]
pub fn event(activity: impl FnOnce() -> String) {
    CURRENT.with(|c| {
        if let Some(state) = c.borrow().as_ref() {
            state.event(activity());
        }
    });
}

/// Runs `f` with `state` as this thread's session, then puts back the one
/// before (also when `f` panics).
pub fn with<R>(state: Arc<TraceState>, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Arc<TraceState>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let before = self.0.take();
            CURRENT.with(|c| *c.borrow_mut() = before);
        }
    }
    let before = CURRENT.with(|c| c.borrow_mut().replace(state));
    let _restore = Restore(before);
    f()
}

/// A future polled with a session as its thread's: how a session follows
/// work handed to another task.
pub struct Instrumented<F> {
    state: Arc<TraceState>,
    inner: F,
}

impl<F: Future + Unpin> Instrumented<F> {
    pub fn new(state: Arc<TraceState>, inner: F) -> Instrumented<F> {
        Instrumented { state, inner }
    }
}

impl<F: Future + Unpin> Future for Instrumented<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        let state = Arc::clone(&this.state);
        let inner = &mut this.inner;
        with(state, || Pin::new(inner).poll(cx))
    }
}

/// Runs `fut` under the session current at this call (if any), wherever
/// it is polled: boxes it only when there is one.
pub fn follow<F: Future>(fut: F) -> impl Future<Output = F::Output> {
    let state = current();
    async move {
        match state {
            None => fut.await,
            Some(state) => Instrumented::new(state, Box::pin(fut)).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracer(capacity: usize) -> (Arc<Tracer>, mpsc::Receiver<Record>) {
        Tracer::new("127.0.0.1:7000".parse().expect("address"), capacity)
    }

    fn drain(rx: &mut mpsc::Receiver<Record>) -> Vec<Record> {
        let mut out = Vec::new();
        while let Ok(r) = rx.try_recv() {
            out.push(r);
        }
        out
    }

    #[test]
    fn no_session_records_nothing_and_builds_no_text() {
        let (_tracer, mut rx) = tracer(8);
        let mut built = false;
        event(|| {
            built = true;
            "never".to_string()
        });
        assert!(!built);
        assert!(!is_tracing());
        assert!(drain(&mut rx).is_empty());
    }

    #[test]
    fn a_session_records_start_events_and_finish_in_order() {
        let (tracer, mut rx) = tracer(64);
        let client: IpAddr = "10.0.0.9".parse().expect("ip");
        let params = BTreeMap::from([("query".to_string(), "SELECT 1".to_string())]);
        let state = tracer.begin(client, "Execute CQL3 query", params.clone());
        with(Arc::clone(&state), || {
            assert!(is_tracing());
            event(|| "Parsing SELECT 1".into());
            event(|| "Preparing statement".into());
        });
        assert!(!is_tracing(), "the session ends with the closure");
        state.finish();
        let records = drain(&mut rx);
        assert_eq!(records.len(), 4);
        let Some(Record::Start(start)) = records.first() else { panic!("{records:?}") };
        assert_eq!(start.session, state.session_id());
        assert_eq!(start.client, client);
        assert_eq!(start.coordinator, "127.0.0.1".parse::<IpAddr>().expect("ip"));
        assert_eq!(start.coordinator_port, 7000);
        assert_eq!(start.command, "QUERY");
        assert_eq!(start.parameters, params);
        let events: Vec<&Event> = records
            .iter()
            .filter_map(|r| match r {
                Record::Event(e) => Some(e),
                _ => None,
            })
            .collect();
        assert_eq!(
            events.iter().map(|e| e.activity.as_str()).collect::<Vec<_>>(),
            ["Parsing SELECT 1", "Preparing statement"]
        );
        assert!(events.iter().all(|e| e.session == state.session_id() && e.source_port == 7000));
        let ticks = |e: &Event| e.event_id.get_timestamp().expect("v1").to_gregorian().0;
        assert!(ticks(events[0]) < ticks(events[1]));
        assert!(events[0].source_elapsed <= events[1].source_elapsed);
        let Some(Record::Finish { session, duration }) = records.last() else { panic!("{records:?}") };
        assert_eq!(*session, state.session_id());
        assert!(*duration >= 1);
    }

    #[test]
    fn timeuuids_are_version_1_distinct_and_increasing_in_time() {
        let (tracer, _rx) = tracer(1);
        let ids: Vec<Uuid> = (0..1000).map(|_| tracer.new_timeuuid()).collect();
        let mut last = 0u64;
        for id in &ids {
            assert_eq!(id.get_version_num(), 1);
            let (ticks, _) = id.get_timestamp().expect("v1").to_gregorian();
            assert!(ticks > last, "ticks go forward");
            last = ticks;
        }
    }

    #[test]
    fn a_full_queue_drops_and_counts() {
        let (tracer, mut rx) = tracer(2);
        let state = tracer.join(Uuid::nil());
        for i in 0..5 {
            state.event(format!("step {i}"));
        }
        assert_eq!(tracer.dropped(), 3);
        assert_eq!(drain(&mut rx).len(), 2);
    }

    #[test]
    fn sessions_nest_and_restore_even_on_panic() {
        let (tracer, _rx) = tracer(8);
        let outer = tracer.join(Uuid::from_u128(1));
        let inner = tracer.join(Uuid::from_u128(2));
        with(Arc::clone(&outer), || {
            with(Arc::clone(&inner), || assert_eq!(current().map(|s| s.session_id()), Some(Uuid::from_u128(2))));
            assert_eq!(current().map(|s| s.session_id()), Some(Uuid::from_u128(1)));
            let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                with(Arc::clone(&inner), || panic!("boom"));
            }));
            assert!(caught.is_err());
            assert_eq!(current().map(|s| s.session_id()), Some(Uuid::from_u128(1)));
        });
        assert!(current().is_none());
    }

    #[test]
    fn probability_is_clamped_and_zero_never_samples() {
        let (tracer, _rx) = tracer(1);
        assert!(!(0..100).any(|_| tracer.sample()));
        tracer.set_probability(7.0);
        assert_eq!(tracer.probability(), 1.0);
        assert!((0..100).all(|_| tracer.sample()));
        tracer.set_probability(f64::NAN);
        assert_eq!(tracer.probability(), 0.0);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn follow_carries_the_session_into_another_task() {
        let (tracer, mut rx) = tracer(8);
        let state = tracer.join(Uuid::from_u128(9));
        let task = with(state, || {
            let fut = follow(async {
                tokio::task::yield_now().await;
                event(|| "in the task".into());
            });
            tokio::spawn(fut)
        });
        task.await.expect("task");
        let records = drain(&mut rx);
        assert!(
            matches!(records.as_slice(), [Record::Event(e)] if e.activity == "in the task" && e.session == Uuid::from_u128(9))
        );
    }
}
