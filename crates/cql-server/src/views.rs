//! `system_views`, Cassandra 4.0+'s virtual tables of the node's state,
//! readable from cqlsh on every node: `clients` (the connections open now),
//! `settings` (the configuration in force), `thread_pools` (the request
//! stages), `local_read_latency`, `local_write_latency`,
//! `local_scan_latency` (per table, this replica's), `disk_usage` (per
//! table) and `caches` (the block cache, Cassandra's chunk cache, and the
//! row cache, `rows`).
//!
//! Invariants:
//! - Rows are made from the node's live counters on every read; nothing is
//!   stored and nothing here is replicated: each node answers for itself.
//! - A value Shoal does not measure is null, never a made-up zero.
//! - A connection is listed from its accept until its socket closes
//!   ([`ClientGuard`] removes it).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use types::schema::TableDef;
use types::{CqlType, Value};

use crate::processor::Processor;
use crate::system::VirtualRow;

/// One client connection as `system_views.clients` shows it.
pub struct Client {
    pub address: SocketAddr,
    pub ssl: bool,
    pub requests: AtomicU64,
    info: Mutex<ClientInfo>,
}

#[derive(Clone, Default)]
struct ClientInfo {
    stage: &'static str,
    driver_name: Option<String>,
    driver_version: Option<String>,
    protocol_version: Option<u8>,
    username: Option<String>,
    ssl_protocol: Option<String>,
    ssl_cipher_suite: Option<String>,
}

impl Client {
    fn info(&self) -> std::sync::MutexGuard<'_, ClientInfo> {
        self.info.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// STARTUP was answered: the driver's name and version, the protocol version.
    pub fn started(&self, driver_name: Option<&str>, driver_version: Option<&str>, protocol_version: u8) {
        let mut info = self.info();
        info.stage = "ready";
        info.driver_name = driver_name.map(str::to_string);
        info.driver_version = driver_version.map(str::to_string);
        info.protocol_version = Some(protocol_version);
    }

    /// The connection authenticated as `username`.
    pub fn logged_in(&self, username: &str) {
        let mut info = self.info();
        info.stage = "ready";
        info.username = Some(username.to_string());
    }

    /// The TLS session's protocol and cipher suite (TLS connections).
    pub fn tls(&self, protocol: Option<String>, cipher_suite: Option<String>) {
        let mut info = self.info();
        info.ssl_protocol = protocol;
        info.ssl_cipher_suite = cipher_suite;
    }

    pub fn authenticating(&self) {
        self.info().stage = "authenticating";
    }
}

/// The node's open client connections.
#[derive(Default)]
pub struct Clients {
    next: AtomicU64,
    open: Mutex<BTreeMap<u64, Arc<Client>>>,
}

/// Keeps a connection listed while it lives.
pub struct ClientGuard {
    clients: Arc<Clients>,
    id: u64,
    pub client: Arc<Client>,
}

impl Drop for ClientGuard {
    fn drop(&mut self) {
        self.clients.open.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.id);
    }
}

impl Clients {
    /// Lists a new connection from `address`.
    pub fn open(self: &Arc<Self>, address: SocketAddr, ssl: bool) -> ClientGuard {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let client = Arc::new(Client {
            address,
            ssl,
            requests: AtomicU64::new(0),
            info: Mutex::new(ClientInfo { stage: "established", ..ClientInfo::default() }),
        });
        self.open.lock().unwrap_or_else(|p| p.into_inner()).insert(id, Arc::clone(&client));
        ClientGuard { clients: Arc::clone(self), id, client }
    }

    fn list(&self) -> Vec<Arc<Client>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner()).values().cloned().collect()
    }
}

/// The tables of `system_views`: (name, comment, partition key, clustering, other columns).
pub(crate) fn tables() -> Vec<crate::system::SystemTable> {
    let text = || CqlType::Text;
    let latency = |name, comment| {
        (
            name,
            comment,
            vec![("keyspace_name", text())],
            vec![("table_name", text())],
            vec![
                ("count", CqlType::BigInt),
                ("max_ms", CqlType::Double),
                ("p50th_ms", CqlType::Double),
                ("p99th_ms", CqlType::Double),
                ("per_second", CqlType::Double),
            ],
        )
    };
    vec![
        (
            "clients",
            "currently connected clients",
            vec![("address", CqlType::Inet)],
            vec![("port", CqlType::Int)],
            vec![
                ("connection_stage", text()),
                ("driver_name", text()),
                ("driver_version", text()),
                ("hostname", text()),
                ("protocol_version", CqlType::Int),
                ("request_count", CqlType::BigInt),
                ("ssl_cipher_suite", text()),
                ("ssl_enabled", CqlType::Boolean),
                ("ssl_protocol", text()),
                ("username", text()),
            ],
        ),
        ("settings", "current settings", vec![("name", text())], vec![], vec![("value", text())]),
        (
            "thread_pools",
            "",
            vec![("name", text())],
            vec![],
            vec![
                ("active_tasks", CqlType::Int),
                ("active_tasks_limit", CqlType::Int),
                ("blocked_tasks", CqlType::BigInt),
                ("blocked_tasks_all_time", CqlType::BigInt),
                ("completed_tasks", CqlType::BigInt),
                ("pending_tasks", CqlType::Int),
            ],
        ),
        latency("local_read_latency", "local read latency"),
        latency("local_scan_latency", "local range scan latency"),
        latency("local_write_latency", "local write latency"),
        (
            "disk_usage",
            "",
            vec![("keyspace_name", text())],
            vec![("table_name", text())],
            vec![("mebibytes", CqlType::BigInt)],
        ),
        (
            "caches",
            "system caches",
            vec![("name", text())],
            vec![],
            vec![
                ("capacity_bytes", CqlType::BigInt),
                ("entry_count", CqlType::Int),
                ("hit_count", CqlType::BigInt),
                ("hit_ratio", CqlType::Double),
                ("recent_hit_rate_per_second", CqlType::BigInt),
                ("recent_request_rate_per_second", CqlType::BigInt),
                ("request_count", CqlType::BigInt),
                ("size_bytes", CqlType::BigInt),
            ],
        ),
    ]
}

fn v(value: Value) -> Option<Vec<u8>> {
    crate::system::v(value)
}

fn text(s: &str) -> Option<Vec<u8>> {
    v(Value::Text(s.to_string()))
}

fn ms(micros: u64) -> Option<Vec<u8>> {
    v(Value::Double(micros as f64 / 1000.0))
}

/// All rows of a `system_views` table (the caller filters and pages them).
pub fn rows(table: &TableDef, proc: &Processor) -> Vec<VirtualRow> {
    let row = |values: Vec<(&str, Option<Vec<u8>>)>| crate::system::row(table, values);
    match table.name.as_str() {
        "clients" => {
            let mut clients = proc.clients.list();
            clients.sort_by_key(|c| c.address);
            clients
                .iter()
                .map(|c| {
                    let info = c.info().clone();
                    row(vec![
                        ("address", v(Value::Inet(c.address.ip()))),
                        ("port", v(Value::Int(i32::from(c.address.port())))),
                        ("connection_stage", text(info.stage)),
                        ("driver_name", info.driver_name.as_deref().and_then(text)),
                        ("driver_version", info.driver_version.as_deref().and_then(text)),
                        ("hostname", text(&c.address.ip().to_string())),
                        ("protocol_version", info.protocol_version.and_then(|p| v(Value::Int(i32::from(p))))),
                        ("request_count", v(Value::BigInt(c.requests.load(Ordering::Relaxed) as i64))),
                        ("ssl_enabled", v(Value::Boolean(c.ssl))),
                        ("ssl_protocol", info.ssl_protocol.as_deref().and_then(text)),
                        ("ssl_cipher_suite", info.ssl_cipher_suite.as_deref().and_then(text)),
                        ("username", text(info.username.as_deref().unwrap_or("anonymous"))),
                    ])
                })
                .collect()
        }
        "settings" => {
            let mut settings = proc.settings.clone();
            settings.sort();
            settings.iter().map(|(name, value)| row(vec![("name", text(name)), ("value", text(value))])).collect()
        }
        "thread_pools" => metrics::STAGES
            .iter()
            .map(|(name, stage)| {
                let int = |n: u64| v(Value::Int(i32::try_from(n).unwrap_or(i32::MAX)));
                row(vec![
                    ("name", text(name)),
                    ("active_tasks", int(stage.active.load(Ordering::Relaxed))),
                    ("blocked_tasks", v(Value::BigInt(0))),
                    ("blocked_tasks_all_time", v(Value::BigInt(0))),
                    ("completed_tasks", v(Value::BigInt(stage.completed.load(Ordering::Relaxed) as i64))),
                    ("pending_tasks", int(stage.pending.load(Ordering::Relaxed))),
                ])
            })
            .collect(),
        "local_read_latency" | "local_scan_latency" | "local_write_latency" => proc
            .storage
            .table_samples()
            .iter()
            .map(|s| {
                let h = match table.name.as_str() {
                    "local_read_latency" => s.metrics.read_latency.snapshot(),
                    "local_scan_latency" => s.metrics.range_latency.snapshot(),
                    _ => s.metrics.write_latency.snapshot(),
                };
                row(vec![
                    ("keyspace_name", text(&s.keyspace)),
                    ("table_name", text(&s.table)),
                    ("count", v(Value::BigInt(h.count as i64))),
                    ("max_ms", ms(h.max())),
                    ("p50th_ms", ms(h.quantile(0.5))),
                    ("p99th_ms", ms(h.quantile(0.99))),
                ])
            })
            .collect(),
        "disk_usage" => proc
            .storage
            .table_samples()
            .iter()
            .map(|s| {
                let bytes = s.total_disk_bytes + s.memtable_bytes;
                row(vec![
                    ("keyspace_name", text(&s.keyspace)),
                    ("table_name", text(&s.table)),
                    ("mebibytes", v(Value::BigInt((bytes >> 20) as i64))),
                ])
            })
            .collect(),
        "caches" => {
            let node = proc.storage.node_samples();
            let rows = node.row_cache;
            let ratio = if rows.requests == 0 { f64::NAN } else { rows.hits as f64 / rows.requests as f64 };
            vec![
                row(vec![
                    ("name", text("chunks")),
                    ("capacity_bytes", v(Value::BigInt(node.block_cache_capacity as i64))),
                    ("size_bytes", v(Value::BigInt(node.block_cache_bytes as i64))),
                ]),
                row(vec![
                    ("name", text("rows")),
                    ("capacity_bytes", v(Value::BigInt(rows.capacity_bytes as i64))),
                    ("entry_count", v(Value::Int(rows.entries.min(i32::MAX as u64) as i32))),
                    ("hit_count", v(Value::BigInt(rows.hits as i64))),
                    ("hit_ratio", v(Value::Double(ratio))),
                    ("request_count", v(Value::BigInt(rows.requests as i64))),
                    ("size_bytes", v(Value::BigInt(rows.size_bytes as i64))),
                ]),
            ]
        }
        _ => Vec::new(),
    }
}
