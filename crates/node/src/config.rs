//! Node configuration: a YAML file with cassandra.yaml's names where the
//! concept is the same, overridden by command-line flags, validated once into
//! a typed `NodeConfig` with no options left to resolve.
//!
//! Invariants:
//! - Unknown keys are an error that names them (never silently ignored).
//! - Every duration and size accepts Cassandra 4.1's unit syntax
//!   (`10000ms`, `10s`, `3h`, `16MiB`) and the legacy `_in_ms` / `_in_mb` keys.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use storage::CommitlogSync;

/// The file as written. Every field is optional; defaults come from `build`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    pub cluster_name: Option<String>,
    pub num_tokens: Option<u32>,
    pub partitioner: Option<String>,
    pub data_file_directories: Option<Vec<String>>,
    pub listen_address: Option<String>,
    pub rpc_address: Option<String>,
    pub native_transport_port: Option<u16>,
    pub storage_port: Option<u16>,
    pub native_transport_max_frame_size: Option<Size>,
    pub native_transport_max_frame_size_in_mb: Option<u64>,
    /// Bytes of requests admitted on the native port and not yet answered,
    /// over the node (`256MiB`; Cassandra's default is a tenth of the heap).
    pub native_transport_max_request_data_in_flight: Option<Size>,
    /// The same per client address (`64MiB`; Cassandra's: a fortieth of the heap).
    pub native_transport_max_request_data_in_flight_per_ip: Option<Size>,
    /// Cassandra 4.0's names of the two above: bytes, -1 for the default.
    pub native_transport_max_concurrent_requests_in_bytes: Option<i64>,
    pub native_transport_max_concurrent_requests_in_bytes_per_ip: Option<i64>,
    /// Connections on the native port, over the node and per client address
    /// (-1, the default: unlimited); more are closed as they are accepted.
    pub native_transport_max_concurrent_connections: Option<i64>,
    pub native_transport_max_concurrent_connections_per_ip: Option<i64>,
    /// Shoal-only: a request over the limits above is answered Overloaded at
    /// once (true, the default) instead of pausing its connection until it
    /// fits (false: Cassandra's behaviour unless the client asks, with the
    /// STARTUP option `THROW_ON_OVERLOAD`).
    pub native_transport_throw_on_overload: Option<bool>,
    pub commitlog_sync: Option<String>,
    pub commitlog_sync_period: Option<Dur>,
    pub commitlog_sync_period_in_ms: Option<u64>,
    pub commitlog_sync_group_window: Option<Dur>,
    pub commitlog_sync_group_window_in_ms: Option<u64>,
    pub concurrent_writes: Option<u32>,
    pub concurrent_reads: Option<u32>,
    /// Request threads (the async runtime's workers); ScyllaDB's `--smp`.
    pub worker_threads: Option<u32>,
    pub endpoint_snitch: Option<String>,
    pub seed_provider: Option<Vec<SeedProvider>>,
    pub dc: Option<String>,
    pub rack: Option<String>,
    pub hinted_handoff_enabled: Option<bool>,
    pub max_hint_window: Option<Dur>,
    pub max_hint_window_in_ms: Option<u64>,
    /// Bytes of hints kept per down node (Cassandra 4.1's key; Cassandra's
    /// default 0 means unbounded, Shoal's default is 1GiB).
    pub max_hints_size_per_host: Option<Size>,
    /// The failure detector's conviction threshold (default 8).
    pub phi_convict_threshold: Option<f64>,
    /// Token allocation on first start balances ownership for a keyspace
    /// with this many replicas in the node's data center (default 3).
    pub allocate_tokens_for_local_replication_factor: Option<u32>,
    pub write_request_timeout: Option<Dur>,
    pub read_request_timeout: Option<Dur>,
    /// Replicas judge how long a request has waited by the coordinator's
    /// clock (Cassandra 4.1's name; default true), and drop those whose
    /// coordinator has given up. False: by when they arrived.
    pub internode_timeout: Option<bool>,
    /// The same, Cassandra's name before 4.1.
    pub cross_node_timeout: Option<bool>,
    /// How long a lightweight transaction's coordinator retries a contended
    /// Paxos ballot before a CAS WriteTimeout (default 1000ms, as Cassandra).
    pub cas_contention_timeout: Option<Dur>,
    /// Shoal-only: a table's memtable is flushed at this size (default 256MiB).
    pub memtable_size: Option<Size>,
    /// All tables' active (not yet flushing) memtables together: above it
    /// the largest is flushed (default 1GiB; Cassandra's default is a
    /// quarter of the heap).
    pub memtable_heap_space: Option<Size>,
    pub block_cache_size: Option<Size>,
    /// The row cache (whole partitions of tables without clustering columns,
    /// in front of the memtables and the files): Cassandra's name, default
    /// 512MiB (Cassandra's is 0, off; ScyllaDB's cache is always on); 0 turns it off.
    pub row_cache_size: Option<Size>,
    /// The same in MiB (Cassandra before 4.1).
    pub row_cache_size_in_mb: Option<u64>,
    pub batch_size_warn_threshold: Option<Size>,
    pub batch_size_warn_threshold_in_kb: Option<u64>,
    pub batch_size_fail_threshold: Option<Size>,
    pub batch_size_fail_threshold_in_kb: Option<u64>,
    pub unlogged_batch_across_partitions_warn_threshold: Option<u32>,
    /// Guardrail (Cassandra 5.0): above this percentage of disk usage of the
    /// data directory, warn (1..=100; -1, the default, turns it off).
    pub data_disk_usage_percentage_warn_threshold: Option<i64>,
    /// Guardrail (Cassandra 5.0): above this percentage, refuse writes that
    /// add data (1..=100; -1, the default, turns it off).
    pub data_disk_usage_percentage_fail_threshold: Option<i64>,
    /// Guardrail (Cassandra 5.0): the data directory's disk counts as this
    /// big at most (`500GiB`; unset: the file system's size).
    pub data_disk_usage_max_disk_size: Option<Size>,
    /// A new node streams its ranges from the current replicas before it
    /// serves (default true).
    pub auto_bootstrap: Option<bool>,
    /// On this node's first start, take the place (the tokens) of the dead
    /// node at this address and stream its ranges (Cassandra's
    /// -Dcassandra.replace_address_first_boot).
    pub replace_address_first_boot: Option<String>,
    /// Bootstrap streams each range from the replica that loses it, and fails
    /// if that one is down (default true; Cassandra's
    /// -Dcassandra.consistent.rangemovement).
    pub consistent_rangemovement: Option<bool>,
    /// Bytes per second a node streams out to all peers together (`24MiB/s`;
    /// 0 = unthrottled, Shoal's default; Cassandra's is 24MiB/s).
    pub stream_throughput_outbound: Option<Size>,
    /// The same in megabits per second (Cassandra before 4.1).
    pub stream_throughput_outbound_megabits_per_sec: Option<u64>,
    /// Bytes per second a node streams out to all peers together while it
    /// serves client requests (at least 10 a second; default 24MiB/s,
    /// Cassandra's `stream_throughput_outbound`; 0 = no such limit): an idle
    /// node streams as fast as it can, a busy one leaves its CPU to its
    /// clients. The lower of this and `stream_throughput_outbound` applies.
    pub stream_throughput_outbound_under_load: Option<Size>,
    /// Bytes per second compactions may write (`64MiB/s`; 0 = unthrottled,
    /// Shoal's and ScyllaDB's default; Cassandra's is 64MiB/s). Changed at
    /// run time by `shoal tool setcompactionthroughput`.
    pub compaction_throughput: Option<Size>,
    /// The same in MiB per second (Cassandra before 4.1).
    pub compaction_throughput_mb_per_sec: Option<u64>,
    /// Shoal-only (no cassandra.yaml equivalent): the port of the HTTP/JSON
    /// admin API that `shoal tool` speaks, on `listen_address`. Default 7199,
    /// the port Cassandra's JMX (nodetool) listens on.
    pub admin_port: Option<u16>,
    /// ScyllaDB's: the port of the Prometheus endpoint (`/metrics`), default
    /// 9180; 0 turns it off (`/metrics` stays on the admin port).
    pub prometheus_port: Option<u16>,
    /// ScyllaDB's: the address the Prometheus endpoint binds (default `listen_address`).
    pub prometheus_address: Option<String>,
    /// Shoal-only (ScyllaDB's `propagation_delay_in_seconds` of
    /// `tombstone_gc` mode `repair`): a repair's record counts only for
    /// tombstones deleted this long before it began, for deletes still on
    /// their way to every replica then and clocks that disagree (default 1h).
    pub tombstone_gc_propagation_delay: Option<Dur>,
    /// Shoal-only: repair each table's primary ranges on a schedule, so every
    /// range is repaired within gc_grace_seconds (default true; only acts in
    /// multi-node clusters).
    pub auto_repair: Option<bool>,
    /// How often the schedule looks for tables due (default 60s).
    pub auto_repair_check_interval: Option<Dur>,
    /// Hard-link every flushed SSTable under `<data dir>/backups/` (default false).
    pub incremental_backups: Option<bool>,
    /// `AllowAllAuthenticator` (the default: no login) or
    /// `PasswordAuthenticator`, short or fully qualified
    /// (`org.apache.cassandra.auth.PasswordAuthenticator`).
    pub authenticator: Option<String>,
    /// `AllowAllAuthorizer` (the default) or `CassandraAuthorizer`.
    pub authorizer: Option<String>,
    /// `CassandraRoleManager`, the only role manager.
    pub role_manager: Option<String>,
    /// How long a role read from `system_auth` is trusted (default 2s).
    pub roles_validity: Option<Dur>,
    pub roles_validity_in_ms: Option<u64>,
    /// How long a role's permissions are trusted (default 2s).
    pub permissions_validity: Option<Dur>,
    pub permissions_validity_in_ms: Option<u64>,
    /// TLS on the native port (Cassandra 5's PEM shape).
    pub client_encryption_options: Option<EncryptionOptionsFile>,
    /// TLS between nodes (`internode_encryption`, PEM files as for clients).
    pub server_encryption_options: Option<EncryptionOptionsFile>,
    /// Cassandra's audit log (`FileAuditLogger`).
    pub audit_logging_options: Option<AuditOptionsFile>,
}

/// `audit_logging_options` as written: lists are comma-separated strings,
/// as in cassandra.yaml. Keys Shoal has no use for (the archiving ones) are
/// accepted and ignored; the logger must be the file logger.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditOptionsFile {
    pub enabled: Option<bool>,
    pub logger: Option<serde::de::IgnoredAny>,
    pub audit_logs_dir: Option<PathBuf>,
    pub included_keyspaces: Option<String>,
    pub excluded_keyspaces: Option<String>,
    pub included_categories: Option<String>,
    pub excluded_categories: Option<String>,
    pub included_users: Option<String>,
    pub excluded_users: Option<String>,
    pub roll_cycle: Option<String>,
    pub block: Option<bool>,
    pub max_queue_weight: Option<u64>,
    pub max_log_size: Option<u64>,
    pub archive_command: Option<serde::de::IgnoredAny>,
    pub max_archive_retries: Option<serde::de::IgnoredAny>,
    pub allow_nodetool_archive_command: Option<serde::de::IgnoredAny>,
}

impl AuditOptionsFile {
    fn build(&self, data_dir: &Path) -> Result<cql_server::audit::AuditOptions, ConfigError> {
        use cql_server::audit::{AuditOptions, Category, RollCycle};
        let dir = self.audit_logs_dir.clone().unwrap_or_else(|| data_dir.join("audit"));
        let mut o = AuditOptions::new(dir);
        o.enabled = self.enabled.unwrap_or(false);
        let list = |v: &Option<String>| -> std::collections::BTreeSet<String> {
            v.as_deref()
                .unwrap_or_default()
                .split(',')
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .map(str::to_string)
                .collect()
        };
        let categories = |v: &Option<String>| -> Result<std::collections::BTreeSet<Category>, ConfigError> {
            list(v)
                .iter()
                .map(|c| {
                    Category::parse(c).ok_or_else(|| {
                        ConfigError(format!(
                            "audit_logging_options: unknown category {c} (QUERY, DML, DDL, DCL, OTHER, AUTH, ERROR, PREPARE)"
                        ))
                    })
                })
                .collect()
        };
        o.included_keyspaces = list(&self.included_keyspaces);
        if self.excluded_keyspaces.is_some() {
            o.excluded_keyspaces = list(&self.excluded_keyspaces);
        }
        o.included_categories = categories(&self.included_categories)?;
        o.excluded_categories = categories(&self.excluded_categories)?;
        o.included_users = list(&self.included_users);
        o.excluded_users = list(&self.excluded_users);
        if let Some(cycle) = &self.roll_cycle {
            o.roll_cycle = RollCycle::parse(cycle).ok_or_else(|| {
                ConfigError(format!("audit_logging_options: roll_cycle {cycle} is not one of MINUTELY, HOURLY, DAILY"))
            })?;
        }
        o.block = self.block.unwrap_or(true);
        o.max_queue_weight = self.max_queue_weight.unwrap_or(o.max_queue_weight).max(1 << 10);
        o.max_log_size = self.max_log_size.unwrap_or(o.max_log_size);
        Ok(o)
    }
}

/// `client_encryption_options` as written. Cassandra's keys Shoal has no
/// use for (`protocol`, `cipher_suites`, the context factory's class) are
/// accepted and ignored; `store_type` must be PEM.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EncryptionOptionsFile {
    pub enabled: Option<bool>,
    /// `server_encryption_options` only: none | all (dc and rack not yet).
    pub internode_encryption: Option<String>,
    pub legacy_ssl_storage_port_enabled: Option<bool>,
    pub optional: Option<bool>,
    pub keystore: Option<PathBuf>,
    pub keystore_password: Option<String>,
    pub require_client_auth: Option<yaml_flag::Flag>,
    pub truststore: Option<PathBuf>,
    pub truststore_password: Option<String>,
    pub store_type: Option<String>,
    pub ssl_context_factory: Option<serde::de::IgnoredAny>,
    pub protocol: Option<serde::de::IgnoredAny>,
    pub accepted_protocols: Option<serde::de::IgnoredAny>,
    pub cipher_suites: Option<serde::de::IgnoredAny>,
    pub algorithm: Option<serde::de::IgnoredAny>,
    pub require_endpoint_verification: Option<bool>,
}

/// A yaml flag Cassandra writes as a boolean or as the strings
/// `true`/`false`/`optional` (`require_client_auth`).
mod yaml_flag {
    #[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
    #[serde(untagged)]
    pub enum Flag {
        Bool(bool),
        Text(TextFlag),
    }

    #[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
    #[serde(rename_all = "lowercase")]
    pub enum TextFlag {
        True,
        False,
        Optional,
    }
}

/// `server_encryption_options`, as the node read them: TLS on every
/// internode connection, or none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InternodeEncryption {
    /// `internode_encryption: all`.
    pub all: bool,
    pub keystore: Option<PathBuf>,
    pub keystore_password: Option<String>,
    pub truststore: Option<PathBuf>,
    /// Peers must present a certificate chained to the truststore.
    pub require_client_auth: bool,
    /// The peer's certificate must name its address.
    pub require_endpoint_verification: bool,
}

impl InternodeEncryption {
    /// The transport's TLS, None when off. Errors name the file and the fault.
    pub fn build(&self) -> Result<Option<net::InternodeTls>, String> {
        if !self.all {
            return Ok(None);
        }
        let need = |what: &str| format!("server_encryption_options: internode_encryption: all needs a {what}");
        let keystore = self.keystore.as_deref().ok_or_else(|| need("keystore"))?;
        let truststore = self.truststore.as_deref().ok_or_else(|| need("truststore (the CA that signed the nodes)"))?;
        let roots = tls::truststore(truststore)?;
        let password = self.keystore_password.as_deref();
        let client_roots = self.require_client_auth.then(|| std::sync::Arc::clone(&roots));
        let server = tls::server_config(tls::Keystore::read(keystore, password)?, client_roots)?;
        let client =
            tls::client_config(tls::Keystore::read(keystore, password)?, roots, self.require_endpoint_verification)?;
        Ok(Some(net::InternodeTls {
            connector: tls::tokio_rustls::TlsConnector::from(std::sync::Arc::new(client)),
            acceptor: tls::tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(server)),
        }))
    }
}

impl EncryptionOptionsFile {
    fn build_internode(&self) -> Result<InternodeEncryption, ConfigError> {
        use yaml_flag::{Flag, TextFlag};
        let all = match self.internode_encryption.as_deref().map(str::to_ascii_lowercase).as_deref() {
            None | Some("none") => false,
            Some("all") => true,
            Some(other @ ("dc" | "rack")) => {
                return Err(ConfigError(format!(
                    "server_encryption_options: internode_encryption: {other} is not supported yet; use all or none"
                )))
            }
            Some(other) => {
                return Err(ConfigError(format!(
                    "server_encryption_options: internode_encryption must be none, all, dc or rack (got {other})"
                )))
            }
        };
        let require_client_auth = match self.require_client_auth {
            None | Some(Flag::Bool(false)) | Some(Flag::Text(TextFlag::False)) => false,
            Some(Flag::Bool(true)) | Some(Flag::Text(TextFlag::True)) => true,
            Some(Flag::Text(TextFlag::Optional)) => {
                return Err(ConfigError(
                    "server_encryption_options: require_client_auth: optional is not supported yet".into(),
                ))
            }
        };
        Ok(InternodeEncryption {
            all,
            keystore: self.keystore.clone(),
            keystore_password: self.keystore_password.clone(),
            truststore: self.truststore.clone(),
            require_client_auth,
            require_endpoint_verification: self.require_endpoint_verification.unwrap_or(false),
        })
    }

    fn build(&self) -> Result<cql_server::tls::ClientEncryption, ConfigError> {
        use yaml_flag::{Flag, TextFlag};
        if let Some(kind) = self.store_type.as_deref().filter(|t| !t.eq_ignore_ascii_case("PEM")) {
            return Err(ConfigError(format!(
                "client_encryption_options: store_type {kind} is not supported; Shoal reads PEM files"
            )));
        }
        let require_client_auth = match self.require_client_auth {
            None | Some(Flag::Bool(false)) | Some(Flag::Text(TextFlag::False)) => false,
            Some(Flag::Bool(true)) | Some(Flag::Text(TextFlag::True)) => true,
            Some(Flag::Text(TextFlag::Optional)) => {
                return Err(ConfigError(
                    "client_encryption_options: require_client_auth: optional is not supported yet".into(),
                ))
            }
        };
        Ok(cql_server::tls::ClientEncryption {
            enabled: self.enabled.unwrap_or(false),
            optional: self.optional.unwrap_or(false),
            keystore: self.keystore.clone(),
            keystore_password: self.keystore_password.clone(),
            require_client_auth,
            truststore: self.truststore.clone(),
        })
    }
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedProvider {
    pub class_name: String,
    #[serde(default)]
    pub parameters: Vec<SeedParameters>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedParameters {
    pub seeds: String,
}

/// A duration written as a number (milliseconds) or with a unit.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(untagged)]
pub enum Dur {
    Millis(u64),
    Text(String),
}

/// A size written as a number (bytes) or with a unit (KiB, MiB, GiB, B).
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(untagged)]
pub enum Size {
    Bytes(u64),
    Text(String),
}

/// Overrides from the command line (`shoal server --data-dir ...`).
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub data_dir: Option<PathBuf>,
    pub listen_address: Option<String>,
    pub native_port: Option<u16>,
    pub cluster_name: Option<String>,
    pub num_tokens: Option<u32>,
    pub dc: Option<String>,
    pub rack: Option<String>,
    pub seeds: Option<String>,
    pub admin_port: Option<u16>,
    pub replace_address: Option<String>,
}

/// The validated configuration of one node.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    pub cluster_name: String,
    pub num_tokens: u32,
    pub data_dir: PathBuf,
    pub listen_address: IpAddr,
    pub rpc_address: IpAddr,
    pub native_port: u16,
    pub storage_port: u16,
    pub max_frame_bytes: u32,
    /// Bytes in flight and connections on the native port.
    pub native_limits: cql_server::server::NativeLimits,
    pub commitlog_sync: CommitlogSync,
    pub concurrent_writes: u32,
    pub concurrent_reads: u32,
    /// Request threads; 0 = one per core.
    pub worker_threads: usize,
    pub endpoint_snitch: String,
    pub seeds: Vec<String>,
    pub dc: String,
    pub rack: String,
    pub hinted_handoff_enabled: bool,
    pub max_hint_window: Duration,
    /// 0 = unbounded.
    pub max_hints_bytes_per_host: u64,
    pub phi_convict_threshold: f64,
    pub allocation_rf: u32,
    pub write_request_timeout: Duration,
    pub read_request_timeout: Duration,
    pub internode_timeout: bool,
    pub cas_contention_timeout: Duration,
    pub memtable_bytes: usize,
    pub memtable_space: usize,
    pub block_cache_bytes: usize,
    pub row_cache_bytes: usize,
    /// The admin API's port (Shoal-only; default 7199), bound on `listen_address`.
    pub admin_port: u16,
    /// The Prometheus endpoint's port (default 9180; 0 = none) and address (default `listen_address`).
    pub prometheus_port: u16,
    pub prometheus_address: Option<IpAddr>,
    /// Streaming's outbound limit, bytes per second over all sessions; 0 = unthrottled.
    pub stream_throughput_bytes: u64,
    /// The same while the node serves clients (`stream_throughput_outbound_under_load`); 0 = none.
    pub stream_throughput_under_load_bytes: u64,
    /// How fast compactions may write, bytes per second; 0 = unthrottled.
    pub compaction_throughput_bytes: u64,
    pub auto_bootstrap: bool,
    pub consistent_rangemovement: bool,
    /// The dead node this one replaces on its first start.
    pub replace_address: Option<IpAddr>,
    pub batch_limits: cql_server::BatchLimits,
    /// The disk usage guardrail (`data_disk_usage_*`; storage `disk_usage`).
    pub disk_usage: storage::DiskUsageConfig,
    /// Repair-based tombstone GC: the horizon is the last repair's start less this (`horizon`).
    pub tombstone_gc_propagation_delay: Duration,
    /// The automatic repair schedule (`auto_repair`), checking this often; None when off.
    pub auto_repair: Option<Duration>,
    /// `incremental_backups`: every flushed file also hard-linked under `<data dir>/backups/`.
    pub incremental_backups: bool,
    /// Who may connect (`authenticator`), what they may do (`authorizer`)
    /// and how long roles and permissions are cached.
    pub auth: cql_server::auth::AuthConfig,
    /// `client_encryption_options`.
    pub client_encryption: cql_server::tls::ClientEncryption,
    /// `server_encryption_options`.
    pub internode_encryption: InternodeEncryption,
    /// `audit_logging_options`.
    pub audit: cql_server::audit::AuditOptions,
}

#[derive(Debug, thiserror::Error)]
#[error("invalid configuration: {0}")]
pub struct ConfigError(pub String);

impl NodeConfig {
    /// The configuration in force by cassandra.yaml's names (Shoal-only keys by
    /// Shoal's), as `system_views.settings` lists it. Secrets are not listed.
    pub fn settings(&self) -> Vec<(String, String)> {
        let ms = |d: Duration| format!("{}ms", d.as_millis());
        let mib = |b: u64| format!("{}MiB", b >> 20);
        let (sync, sync_period) = match self.commitlog_sync {
            CommitlogSync::Periodic { period } => ("periodic", Some(("commitlog_sync_period", ms(period)))),
            CommitlogSync::Batch => ("batch", None),
            CommitlogSync::Group { window } => ("group", Some(("commitlog_sync_group_window", ms(window)))),
        };
        let mut out: Vec<(&str, String)> = vec![
            ("cluster_name", self.cluster_name.clone()),
            ("num_tokens", self.num_tokens.to_string()),
            ("data_file_directories", self.data_dir.display().to_string()),
            ("listen_address", self.listen_address.to_string()),
            ("rpc_address", self.rpc_address.to_string()),
            ("native_transport_port", self.native_port.to_string()),
            ("storage_port", self.storage_port.to_string()),
            ("admin_port", self.admin_port.to_string()),
            ("prometheus_port", self.prometheus_port.to_string()),
            ("native_transport_max_frame_size", mib(u64::from(self.max_frame_bytes))),
            ("commitlog_sync", sync.to_string()),
            ("concurrent_reads", self.concurrent_reads.to_string()),
            ("concurrent_writes", self.concurrent_writes.to_string()),
            ("worker_threads", self.worker_threads.to_string()),
            ("endpoint_snitch", self.endpoint_snitch.clone()),
            ("seeds", self.seeds.join(",")),
            ("dc", self.dc.clone()),
            ("rack", self.rack.clone()),
            ("hinted_handoff_enabled", self.hinted_handoff_enabled.to_string()),
            ("max_hint_window", ms(self.max_hint_window)),
            ("max_hints_size_per_host", mib(self.max_hints_bytes_per_host)),
            ("phi_convict_threshold", self.phi_convict_threshold.to_string()),
            ("write_request_timeout", ms(self.write_request_timeout)),
            ("read_request_timeout", ms(self.read_request_timeout)),
            ("internode_timeout", self.internode_timeout.to_string()),
            ("cas_contention_timeout", ms(self.cas_contention_timeout)),
            ("memtable_heap_space", mib(self.memtable_space as u64)),
            ("block_cache_size", mib(self.block_cache_bytes as u64)),
            ("row_cache_size", mib(self.row_cache_bytes as u64)),
            ("auto_bootstrap", self.auto_bootstrap.to_string()),
            ("authenticator", format!("{:?}Authenticator", self.auth.authenticator)),
            ("authorizer", format!("{:?}Authorizer", self.auth.authorizer)),
            ("client_encryption_options_enabled", self.client_encryption.enabled.to_string()),
            ("tombstone_gc_propagation_delay", ms(self.tombstone_gc_propagation_delay)),
            ("auto_repair", self.auto_repair.is_some().to_string()),
        ];
        out.extend(sync_period);
        out.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    }
}

impl ConfigFile {
    pub fn parse(text: &str) -> Result<ConfigFile, ConfigError> {
        if text.trim().is_empty() {
            return Ok(ConfigFile::default());
        }
        serde_saphyr::from_str(text).map_err(|e| ConfigError(e.to_string()))
    }

    pub fn load(path: &Path) -> Result<ConfigFile, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|e| ConfigError(format!("cannot read {}: {e}", path.display())))?;
        ConfigFile::parse(&text).map_err(|e| ConfigError(format!("{}: {}", path.display(), e.0)))
    }

    /// Applies overrides and defaults and validates everything once.
    pub fn build(self, o: Overrides) -> Result<NodeConfig, ConfigError> {
        let batch_limits = self.batch_limits()?;
        let native_limits = self.native_limits()?;
        let disk_usage = self.disk_usage()?;
        let cluster_name = o.cluster_name.or(self.cluster_name).unwrap_or_else(|| "Test Cluster".to_string());
        let num_tokens = o.num_tokens.or(self.num_tokens).unwrap_or(16);
        if num_tokens == 0 || num_tokens > 1536 {
            return Err(ConfigError(format!("num_tokens must be between 1 and 1536, got {num_tokens}")));
        }
        if let Some(p) = &self.partitioner {
            if !p.ends_with("Murmur3Partitioner") {
                return Err(ConfigError(format!(
                    "partitioner {p} is not supported; Shoal uses org.apache.cassandra.dht.Murmur3Partitioner"
                )));
            }
        }
        let data_dir = match (o.data_dir, self.data_file_directories) {
            (Some(d), _) => d,
            (None, Some(dirs)) => match dirs.as_slice() {
                [dir] => PathBuf::from(dir),
                _ => {
                    return Err(ConfigError(format!(
                        "data_file_directories must name exactly one directory, got {}",
                        dirs.len()
                    )))
                }
            },
            (None, None) => PathBuf::from("data"),
        };
        let listen_text = o.listen_address.clone().or(self.listen_address).unwrap_or_else(|| "127.0.0.1".to_string());
        let listen_address = parse_ip("listen_address", &listen_text)?;
        let rpc_address = match o.listen_address.or(self.rpc_address) {
            Some(a) => parse_ip("rpc_address", &a)?,
            None => listen_address,
        };
        if rpc_address.is_unspecified() {
            return Err(ConfigError("rpc_address must be a concrete address, not 0.0.0.0".to_string()));
        }
        let native_port = o.native_port.or(self.native_transport_port).unwrap_or(9042);
        let storage_port = self.storage_port.unwrap_or(7000);
        let admin_port = o.admin_port.or(self.admin_port).unwrap_or(7199);
        let max_frame_bytes = match (self.native_transport_max_frame_size, self.native_transport_max_frame_size_in_mb) {
            (Some(s), _) => size_bytes("native_transport_max_frame_size", &s)?,
            (None, Some(mb)) => mb.saturating_mul(1 << 20),
            (None, None) => 16 << 20,
        };
        if !(1024..=(1u64 << 30)).contains(&max_frame_bytes) {
            return Err(ConfigError(format!(
                "native_transport_max_frame_size must be between 1KiB and 1GiB, got {max_frame_bytes} bytes"
            )));
        }
        let period = match (self.commitlog_sync_period, self.commitlog_sync_period_in_ms) {
            (Some(d), _) => duration("commitlog_sync_period", &d)?,
            (None, Some(ms)) => Duration::from_millis(ms),
            (None, None) => Duration::from_millis(10_000),
        };
        let window = match (self.commitlog_sync_group_window, self.commitlog_sync_group_window_in_ms) {
            (Some(d), _) => duration("commitlog_sync_group_window", &d)?,
            (None, Some(ms)) => Duration::from_millis(ms),
            (None, None) => Duration::from_millis(2),
        };
        let commitlog_sync = match self.commitlog_sync.as_deref().unwrap_or("periodic") {
            "periodic" => {
                if period.is_zero() {
                    return Err(ConfigError("commitlog_sync_period must be greater than 0 in periodic mode".into()));
                }
                CommitlogSync::Periodic { period }
            }
            "batch" => CommitlogSync::Batch,
            "group" => CommitlogSync::Group { window },
            other => {
                return Err(ConfigError(format!(
                    "commitlog_sync must be one of periodic, batch or group; got '{other}'"
                )))
            }
        };
        let seeds = match (o.seeds, self.seed_provider) {
            (Some(s), _) => split_seeds(&s),
            (None, Some(providers)) => {
                providers.iter().flat_map(|p| p.parameters.iter().flat_map(|param| split_seeds(&param.seeds))).collect()
            }
            (None, None) => vec![listen_text.clone()],
        };
        let endpoint_snitch = self.endpoint_snitch.unwrap_or_else(|| "SimpleSnitch".to_string());
        let snitch_short = endpoint_snitch.rsplit('.').next().unwrap_or(&endpoint_snitch).to_string();
        if !["SimpleSnitch", "GossipingPropertyFileSnitch"].contains(&snitch_short.as_str()) {
            return Err(ConfigError(format!(
                "endpoint_snitch {endpoint_snitch} is not supported; use SimpleSnitch or GossipingPropertyFileSnitch"
            )));
        }
        let max_hint_window = match (self.max_hint_window, self.max_hint_window_in_ms) {
            (Some(d), _) => duration("max_hint_window", &d)?,
            (None, Some(ms)) => Duration::from_millis(ms),
            (None, None) => Duration::from_secs(3 * 3600),
        };
        let concurrent_writes = self.concurrent_writes.unwrap_or(32);
        let concurrent_reads = self.concurrent_reads.unwrap_or(32);
        if concurrent_writes == 0 || concurrent_reads == 0 {
            return Err(ConfigError("concurrent_writes and concurrent_reads must be at least 1".into()));
        }
        let authenticator = match self.authenticator.as_deref() {
            None => cql_server::auth::Authenticator::AllowAll,
            Some(name) => cql_server::auth::Authenticator::parse(name).ok_or_else(|| {
                ConfigError(format!(
                    "authenticator {name} is not supported; use AllowAllAuthenticator or PasswordAuthenticator"
                ))
            })?,
        };
        let authorizer = match self.authorizer.as_deref() {
            None => cql_server::permissions::Authorizer::AllowAll,
            Some(name) => cql_server::permissions::Authorizer::parse(name).ok_or_else(|| {
                ConfigError(format!(
                    "authorizer {name} is not supported; use AllowAllAuthorizer or CassandraAuthorizer"
                ))
            })?,
        };
        if authorizer.enabled() && !authenticator.requires_login() {
            return Err(ConfigError(
                "org.apache.cassandra.auth.CassandraAuthorizer has authorization enabled which requires \
                 org.apache.cassandra.auth.PasswordAuthenticator to enable authentication"
                    .into(),
            ));
        }
        if let Some(name) = self.role_manager.as_deref() {
            if name.strip_prefix("org.apache.cassandra.auth.").unwrap_or(name) != "CassandraRoleManager" {
                return Err(ConfigError(format!("role_manager {name} is not supported; use CassandraRoleManager")));
            }
        }
        let validity = |key: &str, d: &Option<Dur>, ms: Option<u64>| -> Result<Duration, ConfigError> {
            match (d, ms) {
                (Some(d), _) => duration(key, d),
                (None, Some(ms)) => Ok(Duration::from_millis(ms)),
                (None, None) => Ok(cql_server::auth::DEFAULT_VALIDITY),
            }
        };
        let auth = cql_server::auth::AuthConfig {
            authenticator,
            authorizer,
            roles_validity: validity("roles_validity", &self.roles_validity, self.roles_validity_in_ms)?,
            permissions_validity: validity(
                "permissions_validity",
                &self.permissions_validity,
                self.permissions_validity_in_ms,
            )?,
        };
        let client_encryption = match &self.client_encryption_options {
            Some(options) => options.build()?,
            None => cql_server::tls::ClientEncryption::default(),
        };
        let audit = match &self.audit_logging_options {
            Some(options) => options.build(&data_dir)?,
            None => cql_server::audit::AuditOptions::new(data_dir.join("audit")),
        };
        let internode_encryption = match &self.server_encryption_options {
            Some(options) => options.build_internode()?,
            None => InternodeEncryption::default(),
        };
        Ok(NodeConfig {
            auth,
            client_encryption,
            internode_encryption,
            audit,
            cluster_name,
            num_tokens,
            data_dir,
            listen_address,
            rpc_address,
            native_port,
            storage_port,
            max_frame_bytes: max_frame_bytes as u32,
            native_limits,
            commitlog_sync,
            concurrent_writes,
            concurrent_reads,
            worker_threads: self.worker_threads.unwrap_or(0) as usize,
            endpoint_snitch: snitch_short,
            seeds,
            dc: o.dc.or(self.dc).unwrap_or_else(|| "datacenter1".to_string()),
            rack: o.rack.or(self.rack).unwrap_or_else(|| "rack1".to_string()),
            hinted_handoff_enabled: self.hinted_handoff_enabled.unwrap_or(true),
            internode_timeout: match (self.internode_timeout, self.cross_node_timeout) {
                (Some(_), Some(_)) => {
                    return Err(ConfigError("give internode_timeout or cross_node_timeout, not both".into()))
                }
                (Some(on), None) | (None, Some(on)) => on,
                (None, None) => true,
            },
            max_hint_window,
            max_hints_bytes_per_host: match self.max_hints_size_per_host {
                Some(s) => size_bytes("max_hints_size_per_host", &s)?,
                None => 1 << 30,
            },
            phi_convict_threshold: match self.phi_convict_threshold {
                Some(p) if p.is_finite() && (5.0..=16.0).contains(&p) => p,
                Some(p) => return Err(ConfigError(format!("phi_convict_threshold must be between 5 and 16, got {p}"))),
                None => 8.0,
            },
            allocation_rf: match self.allocate_tokens_for_local_replication_factor {
                Some(0) => {
                    return Err(ConfigError("allocate_tokens_for_local_replication_factor must be at least 1".into()))
                }
                Some(rf) => rf,
                None => 3,
            },
            write_request_timeout: match self.write_request_timeout {
                Some(d) => duration("write_request_timeout", &d)?,
                None => Duration::from_millis(2000),
            },
            read_request_timeout: match self.read_request_timeout {
                Some(d) => duration("read_request_timeout", &d)?,
                None => Duration::from_millis(5000),
            },
            cas_contention_timeout: match self.cas_contention_timeout {
                Some(d) => duration("cas_contention_timeout", &d)?,
                None => Duration::from_millis(1000),
            },
            memtable_bytes: match self.memtable_size {
                Some(s) => size_bytes("memtable_size", &s)? as usize,
                None => 256 << 20,
            },
            memtable_space: match self.memtable_heap_space {
                Some(s) => size_bytes("memtable_heap_space", &s)? as usize,
                None => 1 << 30,
            },
            block_cache_bytes: match self.block_cache_size {
                Some(s) => size_bytes("block_cache_size", &s)? as usize,
                None => 256 << 20,
            },
            row_cache_bytes: match (&self.row_cache_size, self.row_cache_size_in_mb) {
                (Some(_), Some(_)) => {
                    return Err(ConfigError("give row_cache_size or row_cache_size_in_mb, not both".into()))
                }
                (Some(s), None) => size_bytes("row_cache_size", s)? as usize,
                (None, Some(mib)) => mib.saturating_mul(1 << 20) as usize,
                (None, None) => 512 << 20,
            },
            admin_port,
            prometheus_port: self.prometheus_port.unwrap_or(9180),
            prometheus_address: match &self.prometheus_address {
                Some(a) => Some(parse_ip("prometheus_address", a)?),
                None => None,
            },
            batch_limits,
            disk_usage,
            auto_bootstrap: self.auto_bootstrap.unwrap_or(true),
            replace_address: match o.replace_address.or(self.replace_address_first_boot) {
                Some(a) => Some(parse_ip("replace_address_first_boot", &a)?),
                None => None,
            },
            consistent_rangemovement: self.consistent_rangemovement.unwrap_or(true),
            stream_throughput_bytes: match (
                self.stream_throughput_outbound,
                self.stream_throughput_outbound_megabits_per_sec,
            ) {
                (Some(_), Some(_)) => {
                    return Err(ConfigError(
                        "give stream_throughput_outbound or stream_throughput_outbound_megabits_per_sec, not both"
                            .into(),
                    ))
                }
                (Some(rate), None) => rate_bytes("stream_throughput_outbound", &rate)?,
                (None, Some(megabits)) => megabits.saturating_mul(1_000_000 / 8),
                (None, None) => 0,
            },
            stream_throughput_under_load_bytes: match &self.stream_throughput_outbound_under_load {
                Some(rate) => rate_bytes("stream_throughput_outbound_under_load", rate)?,
                None => DEFAULT_STREAM_UNDER_LOAD,
            },
            compaction_throughput_bytes: match (self.compaction_throughput, self.compaction_throughput_mb_per_sec) {
                (Some(_), Some(_)) => {
                    return Err(ConfigError(
                        "give compaction_throughput or compaction_throughput_mb_per_sec, not both".into(),
                    ))
                }
                (Some(rate), None) => rate_bytes("compaction_throughput", &rate)?,
                (None, Some(mib)) => mib.saturating_mul(1 << 20),
                (None, None) => 0,
            },
            tombstone_gc_propagation_delay: match self.tombstone_gc_propagation_delay {
                Some(d) => duration("tombstone_gc_propagation_delay", &d)?,
                None => Duration::from_secs(3600),
            },
            incremental_backups: self.incremental_backups.unwrap_or(false),
            auto_repair: match (self.auto_repair.unwrap_or(true), self.auto_repair_check_interval) {
                (false, _) => None,
                (true, Some(d)) => Some(duration("auto_repair_check_interval", &d)?)
                    .filter(|d| !d.is_zero())
                    .or(Some(Duration::from_secs(60))),
                (true, None) => Some(Duration::from_secs(60)),
            },
        })
    }

    /// The disk usage guardrail, validated as Cassandra's `GuardrailsOptions`
    /// does: each threshold -1 (off) or 1..=100, the warn one at most the
    /// fail one; `data_disk_usage_max_disk_size` not 0 (Shoal checks it
    /// against the disk when storage starts the guardrail).
    fn disk_usage(&self) -> Result<storage::DiskUsageConfig, ConfigError> {
        let percent = |key: &str, value: Option<i64>| -> Result<Option<u8>, ConfigError> {
            match value {
                None | Some(-1) => Ok(None),
                Some(0) => Err(ConfigError(format!(
                    "Invalid value for {key}: 0 is not allowed; if attempting to disable use -1"
                ))),
                Some(v) if v < 0 => Err(ConfigError(format!(
                    "Invalid value {v} for {key}: negative values are not allowed, outside of -1 which disables the \
                     guardrail"
                ))),
                Some(v) => match u8::try_from(v) {
                    Ok(p) if p <= 100 => Ok(Some(p)),
                    _ => Err(ConfigError(format!("Invalid value {v} for {key}: maximum allowed value is 100"))),
                },
            }
        };
        let warn_percent =
            percent("data_disk_usage_percentage_warn_threshold", self.data_disk_usage_percentage_warn_threshold)?;
        let fail_percent =
            percent("data_disk_usage_percentage_fail_threshold", self.data_disk_usage_percentage_fail_threshold)?;
        if let (Some(warn), Some(fail)) = (warn_percent, fail_percent) {
            if fail < warn {
                return Err(ConfigError(format!(
                    "The warn threshold {warn} for data_disk_usage_percentage_warn_threshold should be lower than the \
                     fail threshold {fail}"
                )));
            }
        }
        let max_disk_bytes = match &self.data_disk_usage_max_disk_size {
            Some(s) => Some(size_bytes("data_disk_usage_max_disk_size", s)?),
            None => None,
        };
        if max_disk_bytes == Some(0) {
            return Err(ConfigError(
                "Invalid value for data_disk_usage_max_disk_size: 0 is not allowed; if attempting to disable use an \
                 empty value"
                    .into(),
            ));
        }
        Ok(storage::DiskUsageConfig { warn_percent, fail_percent, max_disk_bytes })
    }

    /// The native port's limits: `native_transport_max_request_data_in_flight`
    /// (256MiB) and `_per_ip` (64MiB), with units, or under Cassandra 4.0's
    /// names `native_transport_max_concurrent_requests_in_bytes(_per_ip)` in
    /// bytes (-1: the default); `native_transport_max_concurrent_connections`
    /// and `_per_ip` (-1, or any number under 1: unlimited);
    /// `native_transport_throw_on_overload` (true).
    fn native_limits(&self) -> Result<cql_server::server::NativeLimits, ConfigError> {
        let bytes = |key: &str, size: &Option<Size>, legacy_key: &str, legacy: Option<i64>, default: u64| match (
            size, legacy,
        ) {
            (Some(_), Some(_)) => Err(ConfigError(format!("give {key} or {legacy_key}, not both"))),
            (Some(s), None) => match size_bytes(key, s)? {
                0 => Err(ConfigError(format!("{key} must be greater than 0"))),
                n => Ok(n),
            },
            (None, Some(n)) => Ok(u64::try_from(n).ok().filter(|n| *n > 0).unwrap_or(default)),
            (None, None) => Ok(default),
        };
        let connections = |n: Option<i64>| n.and_then(|n| u64::try_from(n).ok()).filter(|n| *n > 0);
        Ok(cql_server::server::NativeLimits {
            max_request_data_in_flight: bytes(
                "native_transport_max_request_data_in_flight",
                &self.native_transport_max_request_data_in_flight,
                "native_transport_max_concurrent_requests_in_bytes",
                self.native_transport_max_concurrent_requests_in_bytes,
                cql_server::server::DEFAULT_MAX_REQUEST_DATA_IN_FLIGHT,
            )?,
            max_request_data_in_flight_per_ip: bytes(
                "native_transport_max_request_data_in_flight_per_ip",
                &self.native_transport_max_request_data_in_flight_per_ip,
                "native_transport_max_concurrent_requests_in_bytes_per_ip",
                self.native_transport_max_concurrent_requests_in_bytes_per_ip,
                cql_server::server::DEFAULT_MAX_REQUEST_DATA_IN_FLIGHT_PER_IP,
            )?,
            max_concurrent_connections: connections(self.native_transport_max_concurrent_connections),
            max_concurrent_connections_per_ip: connections(self.native_transport_max_concurrent_connections_per_ip),
            throw_on_overload: self.native_transport_throw_on_overload.unwrap_or(true),
        })
    }

    /// `batch_size_warn_threshold` (5KiB), `batch_size_fail_threshold`
    /// (50KiB), `unlogged_batch_across_partitions_warn_threshold` (10), each
    /// size also as Cassandra's legacy `_in_kb` key.
    fn batch_limits(&self) -> Result<cql_server::BatchLimits, ConfigError> {
        let kib = |key: &str, size: &Option<Size>, legacy: Option<u64>, default: u64| -> Result<u64, ConfigError> {
            match (size, legacy) {
                (Some(s), _) => size_bytes(key, s),
                (None, Some(kb)) => Ok(kb.saturating_mul(1024)),
                (None, None) => Ok(default),
            }
        };
        let defaults = cql_server::BatchLimits::default();
        let warn_bytes = kib(
            "batch_size_warn_threshold",
            &self.batch_size_warn_threshold,
            self.batch_size_warn_threshold_in_kb,
            defaults.warn_bytes,
        )?;
        let fail_bytes = kib(
            "batch_size_fail_threshold",
            &self.batch_size_fail_threshold,
            self.batch_size_fail_threshold_in_kb,
            defaults.fail_bytes,
        )?;
        Ok(cql_server::BatchLimits {
            warn_bytes,
            fail_bytes,
            unlogged_partitions_warn: self
                .unlogged_batch_across_partitions_warn_threshold
                .unwrap_or(defaults.unlogged_partitions_warn),
        })
    }
}

fn split_seeds(s: &str) -> Vec<String> {
    s.split(',').map(|x| x.trim().to_string()).filter(|x| !x.is_empty()).collect()
}

fn parse_ip(key: &str, text: &str) -> Result<IpAddr, ConfigError> {
    if text == "localhost" {
        return Ok(IpAddr::from([127, 0, 0, 1]));
    }
    text.parse().map_err(|_| ConfigError(format!("{key}: '{text}' is not an IP address")))
}

/// Parses `10000ms`, `10s`, `5m`, `3h`, `1d`, `250us` (or a bare number of milliseconds).
pub fn parse_duration(text: &str) -> Option<Duration> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().ok()?;
    let d = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "ms" | "milliseconds" => Duration::from_millis(n),
        "us" | "µs" | "microseconds" => Duration::from_micros(n),
        "ns" | "nanoseconds" => Duration::from_nanos(n),
        "s" | "seconds" => Duration::from_secs(n),
        "m" | "minutes" => Duration::from_secs(n.checked_mul(60)?),
        "h" | "hours" => Duration::from_secs(n.checked_mul(3600)?),
        "d" | "days" => Duration::from_secs(n.checked_mul(86400)?),
        _ => return None,
    };
    Some(d)
}

/// Parses `16MiB`, `512KiB`, `1GiB`, `100B` (or a bare number of bytes).
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().ok()?;
    let mult: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(mult)
}

fn duration(key: &str, d: &Dur) -> Result<Duration, ConfigError> {
    match d {
        Dur::Millis(ms) => Ok(Duration::from_millis(*ms)),
        Dur::Text(t) => parse_duration(t)
            .ok_or_else(|| ConfigError(format!("{key}: '{t}' is not a duration (e.g. 10000ms, 10s, 3h)"))),
    }
}

/// `stream_throughput_outbound_under_load`'s default: Cassandra's default
/// `stream_throughput_outbound`.
const DEFAULT_STREAM_UNDER_LOAD: u64 = 24 << 20;

/// A data rate: `24MiB/s`, `512KiB/s`, `100B/s`, or a bare number of bytes per second.
fn rate_bytes(key: &str, s: &Size) -> Result<u64, ConfigError> {
    match s {
        Size::Bytes(b) => Ok(*b),
        Size::Text(t) => t
            .trim()
            .strip_suffix("/s")
            .and_then(parse_size)
            .ok_or_else(|| ConfigError(format!("{key}: '{t}' is not a data rate (e.g. 24MiB/s, 0B/s)"))),
    }
}

fn size_bytes(key: &str, s: &Size) -> Result<u64, ConfigError> {
    match s {
        Size::Bytes(b) => Ok(*b),
        Size::Text(t) => {
            parse_size(t).ok_or_else(|| ConfigError(format!("{key}: '{t}' is not a size (e.g. 16MiB, 512KiB)")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_transport_limits() {
        use cql_server::server::NativeLimits;
        let build = |yaml: &str| ConfigFile::parse(yaml).unwrap().build(Overrides::default());
        let defaults = build("").unwrap().native_limits;
        assert_eq!(defaults, NativeLimits::default());
        assert_eq!(
            (defaults.max_request_data_in_flight, defaults.max_request_data_in_flight_per_ip),
            (256 << 20, 64 << 20)
        );
        assert_eq!((defaults.max_concurrent_connections, defaults.max_concurrent_connections_per_ip), (None, None));
        assert!(defaults.throw_on_overload);
        let c = build(
            "native_transport_max_request_data_in_flight: 16MiB\n\
             native_transport_max_request_data_in_flight_per_ip: 8388608\n\
             native_transport_max_concurrent_connections: 100\n\
             native_transport_max_concurrent_connections_per_ip: 10\n\
             native_transport_throw_on_overload: false\n",
        )
        .unwrap();
        assert_eq!(
            c.native_limits,
            NativeLimits {
                max_request_data_in_flight: 16 << 20,
                max_request_data_in_flight_per_ip: 8 << 20,
                max_concurrent_connections: Some(100),
                max_concurrent_connections_per_ip: Some(10),
                throw_on_overload: false,
            }
        );
        // Cassandra 4.0's names: bytes, -1 the default; -1 connections: unlimited.
        let c = build(
            "native_transport_max_concurrent_requests_in_bytes: 1048576\n\
             native_transport_max_concurrent_requests_in_bytes_per_ip: -1\n\
             native_transport_max_concurrent_connections: -1\n",
        )
        .unwrap();
        assert_eq!(c.native_limits.max_request_data_in_flight, 1 << 20);
        assert_eq!(c.native_limits.max_request_data_in_flight_per_ip, 64 << 20);
        assert_eq!(c.native_limits.max_concurrent_connections, None);
        for (yaml, message) in [
            (
                "native_transport_max_request_data_in_flight: 1MiB\nnative_transport_max_concurrent_requests_in_bytes: 5\n",
                "not both",
            ),
            ("native_transport_max_request_data_in_flight_per_ip: 0B\n", "must be greater than 0"),
            ("native_transport_max_request_data_in_flight: lots\n", "is not a size"),
        ] {
            let err = build(yaml).unwrap_err().to_string();
            assert!(err.contains(message), "{yaml:?}: {err}");
        }
    }

    #[test]
    fn defaults_are_cassandras() {
        let c = ConfigFile::parse("").unwrap().build(Overrides::default()).unwrap();
        assert_eq!(c.native_port, 9042);
        assert_eq!(c.num_tokens, 16);
        assert_eq!(c.cluster_name, "Test Cluster");
        assert_eq!(c.commitlog_sync, CommitlogSync::Periodic { period: Duration::from_secs(10) });
        assert_eq!(c.max_frame_bytes, 16 << 20);
        assert_eq!(c.admin_port, 7199);
        assert_eq!(c.tombstone_gc_propagation_delay, Duration::from_secs(3600));
        let c = ConfigFile::parse("tombstone_gc_propagation_delay: 0s\n").unwrap().build(Overrides::default()).unwrap();
        assert_eq!(c.tombstone_gc_propagation_delay, Duration::ZERO);
        assert_eq!(c.auto_repair, Some(Duration::from_secs(60)), "on by default");
        assert!(!c.incremental_backups, "off by default");
        let b = ConfigFile::parse("incremental_backups: true\n").unwrap().build(Overrides::default()).unwrap();
        assert!(b.incremental_backups);
        let c = ConfigFile::parse("auto_repair: false\n").unwrap().build(Overrides::default()).unwrap();
        assert_eq!(c.auto_repair, None);
        let c = ConfigFile::parse("auto_repair_check_interval: 2s\n").unwrap().build(Overrides::default()).unwrap();
        assert_eq!(c.auto_repair, Some(Duration::from_secs(2)));
    }

    #[test]
    fn cassandra_yaml_names_and_units() {
        let yaml = "cluster_name: prod\ncommitlog_sync: batch\nnative_transport_max_frame_size: 32MiB\n\
                    seed_provider:\n  - class_name: org.apache.cassandra.locator.SimpleSeedProvider\n    parameters:\n      - seeds: \"127.0.0.1,127.0.0.2\"\n\
                    max_hint_window: 3h\n";
        let c = ConfigFile::parse(yaml).unwrap().build(Overrides::default()).unwrap();
        assert_eq!(c.cluster_name, "prod");
        assert_eq!(c.commitlog_sync, CommitlogSync::Batch);
        assert_eq!(c.max_frame_bytes, 32 << 20);
        assert_eq!(c.seeds, vec!["127.0.0.1", "127.0.0.2"]);
        assert_eq!(c.max_hint_window, Duration::from_secs(10800));
    }

    #[test]
    fn unknown_keys_are_named() {
        let err = ConfigFile::parse("cluster_nmae: x\n").unwrap_err();
        assert!(err.0.contains("cluster_nmae"), "{}", err.0);
    }

    #[test]
    fn bad_values_are_explained() {
        let err = ConfigFile::parse("commitlog_sync: sometimes\n").unwrap().build(Overrides::default()).unwrap_err();
        assert!(err.0.contains("commitlog_sync"), "{}", err.0);
        let err =
            ConfigFile::parse("commitlog_sync_period: 10 parsecs\n").unwrap().build(Overrides::default()).unwrap_err();
        assert!(err.0.contains("commitlog_sync_period"), "{}", err.0);
    }

    #[test]
    fn flags_override_the_file() {
        let o = Overrides {
            native_port: Some(9999),
            data_dir: Some("/tmp/x".into()),
            admin_port: Some(7299),
            ..Overrides::default()
        };
        let c = ConfigFile::parse("native_transport_port: 1234\nadmin_port: 7200\n").unwrap().build(o.clone()).unwrap();
        assert_eq!(c.stream_throughput_bytes, 0, "unthrottled by default");
        assert_eq!(c.stream_throughput_under_load_bytes, 24 << 20, "Cassandra's 24MiB/s while serving clients");
        let c = ConfigFile::parse("stream_throughput_outbound_under_load: 0MiB/s\n").unwrap().build(o.clone()).unwrap();
        assert_eq!(c.stream_throughput_under_load_bytes, 0);
        assert_eq!(c.compaction_throughput_bytes, 0, "unthrottled by default");
        let c = ConfigFile::parse("compaction_throughput: 64MiB/s\n").unwrap().build(o.clone()).unwrap();
        assert_eq!(c.compaction_throughput_bytes, 64 << 20);
        let c = ConfigFile::parse("compaction_throughput_mb_per_sec: 16\n").unwrap().build(o.clone()).unwrap();
        assert_eq!(c.compaction_throughput_bytes, 16 << 20);
        let e = ConfigFile::parse("compaction_throughput: 64MiB/s\ncompaction_throughput_mb_per_sec: 16\n")
            .unwrap()
            .build(o.clone())
            .unwrap_err();
        assert!(e.0.contains("not both"), "{e:?}");
        assert!(c.internode_timeout, "on by default, as Cassandra 4.1");
        assert_eq!(c.row_cache_bytes, 512 << 20, "the row cache is on by default, as ScyllaDB's");
        let c = ConfigFile::parse("row_cache_size: 0MiB\n").unwrap().build(o.clone()).unwrap();
        assert_eq!(c.row_cache_bytes, 0);
        let c = ConfigFile::parse("row_cache_size_in_mb: 64\n").unwrap().build(o.clone()).unwrap();
        assert_eq!(c.row_cache_bytes, 64 << 20);
        let e = ConfigFile::parse("row_cache_size: 1GiB\nrow_cache_size_in_mb: 64\n")
            .unwrap()
            .build(o.clone())
            .unwrap_err();
        assert!(e.0.contains("not both"), "{e:?}");
        for (yaml, on) in [("internode_timeout: false\n", false), ("cross_node_timeout: false\n", false)] {
            assert_eq!(ConfigFile::parse(yaml).unwrap().build(o.clone()).unwrap().internode_timeout, on, "{yaml}");
        }
        let e = ConfigFile::parse("internode_timeout: true\ncross_node_timeout: false\n")
            .unwrap()
            .build(o.clone())
            .unwrap_err();
        assert!(e.0.contains("not both"), "{e:?}");
        let e = ConfigFile::parse("compaction_throughput: quick\n").unwrap().build(o.clone()).unwrap_err();
        assert!(e.0.contains("not a data rate"), "{e:?}");
        let c = ConfigFile::parse("stream_throughput_outbound: 24MiB/s\n").unwrap().build(o.clone()).unwrap();
        assert_eq!(c.stream_throughput_bytes, 24 << 20);
        let c =
            ConfigFile::parse("stream_throughput_outbound_megabits_per_sec: 200\n").unwrap().build(o.clone()).unwrap();
        assert_eq!(c.stream_throughput_bytes, 25_000_000);
        let e = ConfigFile::parse("stream_throughput_outbound: fast\n").unwrap().build(o.clone()).unwrap_err();
        assert!(e.0.contains("not a data rate"), "{e}");
        let c = ConfigFile::parse("native_transport_port: 1234\nadmin_port: 7200\n").unwrap().build(o).unwrap();
        assert_eq!(c.native_port, 9999);
        assert_eq!(c.admin_port, 7299);
        assert_eq!(c.data_dir, PathBuf::from("/tmp/x"));
    }

    #[test]
    fn cluster_keys() {
        let c = ConfigFile::parse("").unwrap().build(Overrides::default()).unwrap();
        assert_eq!((c.phi_convict_threshold, c.allocation_rf, c.max_hints_bytes_per_host), (8.0, 3, 1 << 30));
        let text = "phi_convict_threshold: 12\nallocate_tokens_for_local_replication_factor: 2\nmax_hints_size_per_host: 64MiB\n";
        let c = ConfigFile::parse(text).unwrap().build(Overrides::default()).unwrap();
        assert_eq!((c.phi_convict_threshold, c.allocation_rf, c.max_hints_bytes_per_host), (12.0, 2, 64 << 20));
        let err = ConfigFile::parse("phi_convict_threshold: 1\n").unwrap().build(Overrides::default()).unwrap_err();
        assert!(err.to_string().contains("phi_convict_threshold"), "{err}");
    }

    #[test]
    fn authenticator_short_or_qualified_names() {
        use cql_server::auth::Authenticator;
        let c = ConfigFile::parse("").unwrap().build(Overrides::default()).unwrap();
        assert_eq!(c.auth.authenticator, Authenticator::AllowAll);
        for name in ["PasswordAuthenticator", "org.apache.cassandra.auth.PasswordAuthenticator"] {
            let c =
                ConfigFile::parse(&format!("authenticator: {name}\n")).unwrap().build(Overrides::default()).unwrap();
            assert_eq!(c.auth.authenticator, Authenticator::Password);
        }
        let c =
            ConfigFile::parse("authenticator: AllowAllAuthenticator\n").unwrap().build(Overrides::default()).unwrap();
        assert_eq!(c.auth.authenticator, Authenticator::AllowAll);
        let err = ConfigFile::parse("authenticator: Ldap\n").unwrap().build(Overrides::default()).unwrap_err();
        assert!(err.to_string().contains("authenticator Ldap is not supported"), "{err}");
    }

    #[test]
    fn authorizer_needs_a_login_and_validities_take_units() {
        use cql_server::permissions::Authorizer;
        let build = |yaml: &str| ConfigFile::parse(yaml).unwrap().build(Overrides::default());
        let c = build("").unwrap();
        assert_eq!(c.auth.authorizer, Authorizer::AllowAll);
        assert_eq!(c.auth.roles_validity, Duration::from_secs(2));
        let err = build("authorizer: CassandraAuthorizer\n").unwrap_err();
        assert!(err.to_string().contains("has authorization enabled which requires"), "{err}");
        let c = build(
            "authenticator: PasswordAuthenticator\nauthorizer: CassandraAuthorizer\nroles_validity: 500ms\n\
             permissions_validity_in_ms: 3000\n",
        )
        .unwrap();
        assert_eq!(c.auth.authorizer, Authorizer::Cassandra);
        assert_eq!(c.auth.roles_validity, Duration::from_millis(500));
        assert_eq!(c.auth.permissions_validity, Duration::from_secs(3));
        assert!(build("role_manager: LdapRoleManager\n").unwrap_err().to_string().contains("role_manager"));
        assert!(build("authorizer: Nope\n").unwrap_err().to_string().contains("authorizer Nope is not supported"));
    }

    #[test]
    fn disk_usage_guardrail_keys() {
        let build = |yaml: &str| ConfigFile::parse(yaml).unwrap().build(Overrides::default());
        assert_eq!(build("").unwrap().disk_usage, storage::DiskUsageConfig::default(), "off by default");
        let c = build(
            "data_disk_usage_percentage_warn_threshold: 80\ndata_disk_usage_percentage_fail_threshold: 90\n\
             data_disk_usage_max_disk_size: 500GiB\n",
        )
        .unwrap();
        let want = storage::DiskUsageConfig { warn_percent: Some(80), fail_percent: Some(90), max_disk_bytes: None };
        assert_eq!(c.disk_usage, storage::DiskUsageConfig { max_disk_bytes: Some(500 << 30), ..want });
        let c = build("data_disk_usage_percentage_warn_threshold: -1\ndata_disk_usage_percentage_fail_threshold: 95\n")
            .unwrap();
        assert_eq!((c.disk_usage.warn_percent, c.disk_usage.fail_percent), (None, Some(95)));
        let c = build("data_disk_usage_max_disk_size: 1048576\n").unwrap();
        assert_eq!(c.disk_usage.max_disk_bytes, Some(1 << 20), "a bare number is bytes");
        for (yaml, message) in [
            ("data_disk_usage_percentage_fail_threshold: 0\n", "0 is not allowed; if attempting to disable use -1"),
            ("data_disk_usage_percentage_fail_threshold: -2\n", "negative values are not allowed"),
            ("data_disk_usage_percentage_warn_threshold: 101\n", "maximum allowed value is 100"),
            (
                "data_disk_usage_percentage_warn_threshold: 90\ndata_disk_usage_percentage_fail_threshold: 80\n",
                "should be lower than the fail threshold 80",
            ),
            ("data_disk_usage_max_disk_size: 0B\n", "0 is not allowed"),
            ("data_disk_usage_max_disk_size: lots\n", "is not a size"),
        ] {
            let err = build(yaml).unwrap_err().to_string();
            assert!(err.contains(message), "{yaml:?}: {err}");
        }
    }
}
