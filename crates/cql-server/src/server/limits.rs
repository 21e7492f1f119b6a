//! Self-protection of the native port, in Cassandra's terms (its
//! `ClientResourceLimits` and `ConnectionLimitHandler`):
//!
//! - Bytes in flight: the body sizes of the requests admitted but not yet
//!   answered, over the node (`native_transport_max_request_data_in_flight`)
//!   and per client address (`..._per_ip`). A request's bytes are reserved
//!   when its frame header is read, before its body is, and given back once
//!   its answer is handed to the connection's writer (`BytesPermit`).
//!   When a request does not fit, the server either answers it at once with
//!   Overloaded and discards its body (throw on overload), or reads nothing
//!   more from that connection until it fits (backpressure).
//! - Connections: at most `native_transport_max_concurrent_connections` on
//!   the node and `..._per_ip` per client address; one over the limit is
//!   closed as it is accepted, without an answer (as Cassandra does).
//!
//! Invariants:
//! - Bytes in flight never pass a limit, but for one request larger than the
//!   limit itself, admitted alone (nothing else in flight there), so that it
//!   can be served at all.
//! - Every reservation is given back exactly once: by the permit that took it
//!   over, or by the connection when it ends with a frame it had reserved for.
//! - The hot path is a few atomic operations: no lock and no allocation per
//!   request. The per-address table's lock is taken when a connection opens
//!   and closes.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// cassandra.yaml's limits on the native port, resolved (`node::config`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NativeLimits {
    /// `native_transport_max_request_data_in_flight` (Cassandra 4.0's
    /// `native_transport_max_concurrent_requests_in_bytes`).
    pub max_request_data_in_flight: u64,
    /// `native_transport_max_request_data_in_flight_per_ip`.
    pub max_request_data_in_flight_per_ip: u64,
    /// `native_transport_max_concurrent_connections`; None: unlimited.
    pub max_concurrent_connections: Option<u64>,
    /// `native_transport_max_concurrent_connections_per_ip`; None: unlimited.
    pub max_concurrent_connections_per_ip: Option<u64>,
    /// Shoal-only `native_transport_throw_on_overload`: every connection
    /// answers Overloaded instead of pausing (a client still opts in alone
    /// with the STARTUP option `THROW_ON_OVERLOAD`, as in Cassandra).
    pub throw_on_overload: bool,
}

/// Shoal's defaults. Cassandra derives them from the JVM heap (a tenth of it
/// over the node, a fortieth per address); Shoal has no heap to size from, so
/// they are fixed, in the same 4:1 ratio: 256MiB, 64MiB.
pub const DEFAULT_MAX_REQUEST_DATA_IN_FLIGHT: u64 = 256 << 20;
pub const DEFAULT_MAX_REQUEST_DATA_IN_FLIGHT_PER_IP: u64 = 64 << 20;

impl Default for NativeLimits {
    fn default() -> NativeLimits {
        NativeLimits {
            max_request_data_in_flight: DEFAULT_MAX_REQUEST_DATA_IN_FLIGHT,
            max_request_data_in_flight_per_ip: DEFAULT_MAX_REQUEST_DATA_IN_FLIGHT_PER_IP,
            max_concurrent_connections: None,
            max_concurrent_connections_per_ip: None,
            throw_on_overload: true,
        }
    }
}

/// How often at most a refused connection is logged (with the count refused since).
const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Bytes in use against a limit (Cassandra's `ResourceLimits.Concurrent`).
#[derive(Debug)]
struct Reserve {
    using: AtomicU64,
    limit: u64,
}

impl Reserve {
    fn new(limit: u64) -> Reserve {
        Reserve { using: AtomicU64::new(0), limit }
    }

    /// Takes `n` if it fits, or if nothing is in use (a request larger than
    /// the limit goes alone rather than never).
    fn try_allocate(&self, n: u64) -> bool {
        self.using
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |using| {
                (using == 0 || using.saturating_add(n) <= self.limit).then(|| using.saturating_add(n))
            })
            .is_ok()
    }

    fn release(&self, n: u64) {
        self.using.fetch_sub(n, Ordering::SeqCst);
    }

    fn using(&self) -> u64 {
        self.using.load(Ordering::SeqCst)
    }
}

/// What every connection shares: the node's reserve and the wake-up of
/// connections waiting for room (backpressure).
#[derive(Debug)]
struct Shared {
    global: Reserve,
    /// Requests the node's reserve refused, ever: see `Endpoint::try_reserve`.
    global_refusals: AtomicU64,
    /// Connections waiting for room: a release wakes them only when there are some.
    waiting: AtomicUsize,
    /// Tries of waiting connections (each wake-up is one).
    tries: AtomicU64,
    released: Notify,
}

/// One client address: its reserve. Requests' permits hold it, so it outlives
/// its entry in the table when answers are still on their way.
#[derive(Debug)]
pub struct Endpoint {
    bytes: Reserve,
    shared: Arc<Shared>,
}

impl Endpoint {
    /// Reserves a request's `n` body bytes against this address's limit and
    /// the node's; false (nothing taken) when either has no room.
    pub fn try_reserve(&self, n: u32) -> bool {
        let n = u64::from(n);
        let refusals = self.shared.global_refusals.load(Ordering::SeqCst);
        if !self.shared.global.try_allocate(n) {
            self.shared.global_refusals.fetch_add(1, Ordering::SeqCst);
            return false;
        }
        if self.bytes.try_allocate(n) {
            return true;
        }
        self.shared.global.release(n);
        // Those the node refused while it held these bytes for a moment may fit
        // now. Only those: waking everyone here, every waiter refused by its
        // address would wake the others for ever.
        if self.shared.global_refusals.load(Ordering::SeqCst) != refusals {
            self.wake_waiters();
        }
        false
    }

    /// Reserves `n` bytes once they fit (backpressure): the caller reads
    /// nothing meanwhile. Woken by every release while someone waits.
    pub async fn reserve(&self, n: u32) {
        let shared = &self.shared;
        shared.waiting.fetch_add(1, Ordering::SeqCst);
        let _waiting = Waiting(shared);
        loop {
            // Registered before the check: a release after it wakes this one.
            let released = shared.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            shared.tries.fetch_add(1, Ordering::Relaxed);
            if self.try_reserve(n) {
                return;
            }
            released.await;
        }
    }

    /// Gives back `n` reserved bytes.
    pub fn release(&self, n: u64) {
        if n == 0 {
            return;
        }
        self.bytes.release(n);
        self.shared.global.release(n);
        self.wake_waiters();
    }

    fn wake_waiters(&self) {
        if self.shared.waiting.load(Ordering::SeqCst) > 0 {
            self.shared.released.notify_waiters();
        }
    }

    /// A permit over `n` bytes already reserved: they are given back when it drops.
    pub fn permit(self: &Arc<Self>, n: u64) -> BytesPermit {
        BytesPermit { endpoint: Arc::clone(self), bytes: n }
    }

    /// Cassandra's OverloadedException message for bytes in flight (its
    /// wording in 5.0, `CQLMessageHandler.buildOverloadedException` with the
    /// pre-v5 allocator's description, the missing space included).
    pub fn overloaded_message(&self) -> String {
        format!(
            "Request breached limit on bytes in flight. (Using {}/{} bytes of endpoint limit and {}/{} bytes of \
             global limit.)Server is currently in an overloaded state and cannot accept more requests.",
            self.bytes.using(),
            self.bytes.limit,
            self.shared.global.using(),
            self.shared.global.limit
        )
    }
}

/// Counts a connection out of the waiters, even if its wait is dropped.
struct Waiting<'a>(&'a Shared);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Reserved bytes of requests on their way to their answers; given back on drop.
#[derive(Debug)]
pub struct BytesPermit {
    endpoint: Arc<Endpoint>,
    bytes: u64,
}

impl BytesPermit {
    /// Moves `n` of this permit's bytes (at most all of them) into a permit of their own.
    pub fn split(&mut self, n: u64) -> BytesPermit {
        let n = n.min(self.bytes);
        self.bytes -= n;
        BytesPermit { endpoint: Arc::clone(&self.endpoint), bytes: n }
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for BytesPermit {
    fn drop(&mut self) {
        self.endpoint.release(self.bytes);
    }
}

/// One address's entry: its reserve and its open connections.
#[derive(Debug)]
struct Entry {
    endpoint: Arc<Endpoint>,
    connections: u64,
}

#[derive(Debug, Default)]
struct Table {
    addresses: HashMap<IpAddr, Entry>,
    connections: u64,
    /// Entries are swept (none open, nothing in flight) when the table reaches this size.
    sweep_at: usize,
    refused_since_log: u64,
    last_log: Option<Instant>,
}

/// The node's native-port limits: one per server, shared by its connections.
#[derive(Debug)]
pub struct ClientLimits {
    config: NativeLimits,
    shared: Arc<Shared>,
    table: Mutex<Table>,
}

/// Why a connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Over `native_transport_max_concurrent_connections`: (limit, connections with this one).
    Global(u64, u64),
    /// Over `..._per_ip`.
    PerIp(u64, u64),
}

impl ClientLimits {
    pub fn new(config: NativeLimits) -> ClientLimits {
        ClientLimits {
            config,
            shared: Arc::new(Shared {
                global: Reserve::new(config.max_request_data_in_flight),
                global_refusals: AtomicU64::new(0),
                waiting: AtomicUsize::new(0),
                tries: AtomicU64::new(0),
                released: Notify::new(),
            }),
            table: Mutex::new(Table { sweep_at: 64, ..Table::default() }),
        }
    }

    /// Admits a connection from `ip`, or refuses it when it would pass a
    /// connection limit (logged at warn, at most every 10 s).
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Admission, Refused> {
        let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        let refused = match (self.config.max_concurrent_connections, self.config.max_concurrent_connections_per_ip) {
            (Some(limit), _) if table.connections >= limit => Some(Refused::Global(limit, table.connections + 1)),
            (_, Some(limit)) => {
                let open = table.addresses.get(&ip).map_or(0, |e| e.connections);
                (open >= limit).then_some(Refused::PerIp(limit, open + 1))
            }
            _ => None,
        };
        if let Some(refused) = refused {
            table.refused_since_log += 1;
            let now = Instant::now();
            if table.last_log.is_none_or(|t| now.duration_since(t) >= REFUSAL_LOG_INTERVAL) {
                let count = std::mem::take(&mut table.refused_since_log);
                table.last_log = Some(now);
                // Cassandra's messages (`ConnectionLimitHandler`), and how many were refused.
                match refused {
                    Refused::Global(limit, using) => tracing::warn!(
                        "Exceeded maximum native connection limit of {limit} by using {using} connections \
                         ({count} connection(s) refused in the last {}s)",
                        REFUSAL_LOG_INTERVAL.as_secs()
                    ),
                    Refused::PerIp(limit, using) => tracing::warn!(
                        "Exceeded maximum native connection limit per ip of {limit} by using {using} connections \
                         ({ip}; {count} connection(s) refused in the last {}s)",
                        REFUSAL_LOG_INTERVAL.as_secs()
                    ),
                }
            }
            return Err(refused);
        }
        if table.addresses.len() >= table.sweep_at {
            // Addresses left with nothing open and nothing in flight.
            table.addresses.retain(|_, e| e.connections > 0 || e.endpoint.bytes.using() > 0);
            table.sweep_at = (table.addresses.len() * 2).max(64);
        }
        table.connections += 1;
        let entry = table.addresses.entry(ip).or_insert_with(|| Entry {
            endpoint: Arc::new(Endpoint {
                bytes: Reserve::new(self.config.max_request_data_in_flight_per_ip),
                shared: Arc::clone(&self.shared),
            }),
            connections: 0,
        });
        entry.connections += 1;
        let endpoint = Arc::clone(&entry.endpoint);
        Ok(Admission { limits: Arc::clone(self), ip, endpoint })
    }

    /// Bytes in flight over the node.
    pub fn global_using(&self) -> u64 {
        self.shared.global.using()
    }

    /// Connections open over the node.
    pub fn connections(&self) -> u64 {
        self.table.lock().unwrap_or_else(|p| p.into_inner()).connections
    }
}

/// An open connection's place in the limits; it leaves them when dropped.
#[derive(Debug)]
pub struct Admission {
    limits: Arc<ClientLimits>,
    ip: IpAddr,
    endpoint: Arc<Endpoint>,
}

impl Admission {
    pub fn endpoint(&self) -> &Arc<Endpoint> {
        &self.endpoint
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        let mut table = self.limits.table.lock().unwrap_or_else(|p| p.into_inner());
        table.connections = table.connections.saturating_sub(1);
        if let Some(entry) = table.addresses.get_mut(&self.ip) {
            entry.connections = entry.connections.saturating_sub(1);
            // Kept while answers are on their way: a new connection from the
            // address must find the bytes it still has in flight.
            if entry.connections == 0 && entry.endpoint.bytes.using() == 0 {
                table.addresses.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(global: u64, per_ip: u64) -> Arc<ClientLimits> {
        Arc::new(ClientLimits::new(NativeLimits {
            max_request_data_in_flight: global,
            max_request_data_in_flight_per_ip: per_ip,
            ..NativeLimits::default()
        }))
    }

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[test]
    fn bytes_fit_under_the_address_and_the_node_limits() {
        let l = limits(100, 60);
        let a = l.admit(ip(1)).unwrap();
        let b = l.admit(ip(2)).unwrap();
        assert!(a.endpoint().try_reserve(50));
        assert!(a.endpoint().try_reserve(10));
        // The address is full: nothing taken, from the node either.
        assert!(!a.endpoint().try_reserve(1));
        assert_eq!(l.global_using(), 60);
        // Another address has room until the node is full.
        assert!(b.endpoint().try_reserve(40));
        assert!(!b.endpoint().try_reserve(1));
        assert_eq!(l.global_using(), 100);
        a.endpoint().release(60);
        assert!(b.endpoint().try_reserve(20));
        assert_eq!(l.global_using(), 60);
    }

    #[test]
    fn a_request_larger_than_a_limit_goes_alone() {
        let l = limits(100, 50);
        let a = l.admit(ip(1)).unwrap();
        assert!(a.endpoint().try_reserve(80));
        assert!(!a.endpoint().try_reserve(1));
        a.endpoint().release(80);
        assert!(a.endpoint().try_reserve(1));
        assert!(!a.endpoint().try_reserve(80));
        a.endpoint().release(1);
        assert!(a.endpoint().try_reserve(500));
        assert_eq!(l.global_using(), 500);
    }

    #[test]
    fn permits_give_their_bytes_back_once() {
        let l = limits(1000, 1000);
        let a = l.admit(ip(1)).unwrap();
        assert!(a.endpoint().try_reserve(300));
        let mut all = a.endpoint().permit(300);
        let one = all.split(100);
        let more = all.split(1000);
        assert_eq!((one.bytes(), more.bytes(), all.bytes()), (100, 200, 0));
        drop(one);
        assert_eq!(l.global_using(), 200);
        drop(all);
        assert_eq!(l.global_using(), 200);
        drop(more);
        assert_eq!(l.global_using(), 0);
    }

    #[test]
    fn the_message_is_cassandras() {
        let l = limits(16 << 20, 8 << 20);
        let a = l.admit(ip(1)).unwrap();
        assert!(a.endpoint().try_reserve(100));
        assert_eq!(
            a.endpoint().overloaded_message(),
            "Request breached limit on bytes in flight. (Using 100/8388608 bytes of endpoint limit and 100/16777216 \
             bytes of global limit.)Server is currently in an overloaded state and cannot accept more requests."
        );
    }

    #[test]
    fn connections_over_a_limit_are_refused() {
        let l = Arc::new(ClientLimits::new(NativeLimits {
            max_concurrent_connections: Some(3),
            max_concurrent_connections_per_ip: Some(2),
            ..NativeLimits::default()
        }));
        let a1 = l.admit(ip(1)).unwrap();
        let a2 = l.admit(ip(1)).unwrap();
        assert_eq!(l.admit(ip(1)).unwrap_err(), Refused::PerIp(2, 3));
        let b1 = l.admit(ip(2)).unwrap();
        assert_eq!(l.admit(ip(3)).unwrap_err(), Refused::Global(3, 4));
        assert_eq!(l.connections(), 3);
        drop(a1);
        let a3 = l.admit(ip(1)).unwrap();
        drop((a2, a3, b1));
        assert_eq!(l.connections(), 0);
        assert!(l.table.lock().unwrap().addresses.is_empty());
    }

    #[test]
    fn unlimited_connections_by_default() {
        let l = limits(1 << 20, 1 << 20);
        let open: Vec<_> = (0..500).map(|i| l.admit(ip((i % 3) as u8)).unwrap()).collect();
        assert_eq!(l.connections(), 500);
        drop(open);
        assert_eq!(l.connections(), 0);
    }

    #[test]
    fn an_address_with_bytes_in_flight_keeps_its_entry() {
        let l = limits(1000, 100);
        let a = l.admit(ip(1)).unwrap();
        assert!(a.endpoint().try_reserve(100));
        let permit = a.endpoint().permit(100);
        drop(a);
        // A new connection from the address still finds its 100 bytes in flight.
        let again = l.admit(ip(1)).unwrap();
        assert!(!again.endpoint().try_reserve(1));
        drop(permit);
        assert!(again.endpoint().try_reserve(1));
        again.endpoint().release(1);
        drop(again);
        assert!(l.table.lock().unwrap().addresses.is_empty());
    }

    #[test]
    fn stale_addresses_are_swept() {
        let l = limits(1 << 30, 1 << 20);
        let address = |i: u32| IpAddr::from((0x0a00_0000 + i).to_be_bytes());
        // 100 addresses whose connections closed with bytes in flight: kept.
        let mut permits = Vec::new();
        for i in 0..100 {
            let a = l.admit(address(i)).unwrap();
            assert!(a.endpoint().try_reserve(1));
            permits.push(a.endpoint().permit(1));
        }
        assert_eq!(l.table.lock().unwrap().addresses.len(), 100);
        drop(permits);
        // Once answered, they go at the next sweep, as the table grows.
        let open: Vec<_> = (100..130).map(|i| l.admit(address(i)).unwrap()).collect();
        assert!(l.table.lock().unwrap().addresses.len() <= 30);
        drop(open);
        assert!(l.table.lock().unwrap().addresses.is_empty());
    }

    // Waiters woken by every refused try would wake each other for ever (this test would not end).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn waiters_refused_by_their_address_do_not_wake_each_other() {
        let l = limits(1000, 100);
        let a = l.admit(ip(1)).unwrap();
        assert!(a.endpoint().try_reserve(100));
        let waiters: Vec<_> = (0..4)
            .map(|_| {
                let endpoint = Arc::clone(a.endpoint());
                tokio::spawn(async move { endpoint.reserve(50).await })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(50)).await;
        // Each was refused once, then slept (the node has room: nobody was woken).
        assert_eq!(l.shared.global_refusals.load(Ordering::SeqCst), 0);
        assert_eq!(l.shared.tries.load(Ordering::Relaxed), 4);
        assert!(waiters.iter().all(|w| !w.is_finished()));
        a.endpoint().release(100);
        // Two fit; the two others wait for them.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(waiters.iter().filter(|w| w.is_finished()).count(), 2);
        a.endpoint().release(100);
        for w in waiters {
            tokio::time::timeout(Duration::from_secs(5), w).await.unwrap().unwrap();
        }
        assert_eq!(l.global_using(), 100);
    }

    #[tokio::test]
    async fn a_waiting_connection_resumes_when_bytes_are_released() {
        let l = limits(100, 100);
        let a = l.admit(ip(1)).unwrap();
        let b = l.admit(ip(2)).unwrap();
        assert!(a.endpoint().try_reserve(90));
        let endpoint = Arc::clone(b.endpoint());
        let waiter = tokio::spawn(async move { endpoint.reserve(50).await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished());
        a.endpoint().release(60);
        tokio::time::timeout(Duration::from_secs(5), waiter).await.unwrap().unwrap();
        assert_eq!(l.global_using(), 80);
        assert_eq!(l.shared.waiting.load(Ordering::SeqCst), 0);
    }
}
