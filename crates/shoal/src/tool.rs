//! `shoal tool`: nodetool's successor. Each command is one request to a
//! node's admin API (HTTP/1.1 + JSON, `node::admin`) and prints either the
//! API's JSON (`--json`) or a table laid out like nodetool's.
//!
//! Also the minimal blocking HTTP client the launcher (`shoal cluster`)
//! uses to watch its nodes.
//!
//! Invariants:
//! - Every network call is bounded: connect, read and write timeouts.
//! - Exit codes: 0 success, 1 the node is unreachable or answered an error
//!   (printed as `error: ...`, nodetool's form), 2 a bad command line (clap).
//! - `--json` prints the API's answer unchanged, so scripts see one format.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::process::ExitCode;
use std::time::Duration;

use serde_json::Value as Json;

/// Connect timeout of every admin request.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Read timeout for quick requests.
const QUICK_TIMEOUT: Duration = Duration::from_secs(30);
/// Read timeout for flush and compaction, which may take long.
const MAINTENANCE_TIMEOUT: Duration = Duration::from_secs(6 * 3600);
/// Largest answer accepted.
const MAX_RESPONSE_BYTES: u64 = 64 << 20;

#[derive(clap::Args)]
pub struct ToolArgs {
    /// Node to ask (its listen_address). Before or after the command, as nodetool takes it.
    #[arg(short = 'h', long = "host", default_value = "127.0.0.1", global = true)]
    host: String,
    /// The node's admin port (admin_port). Before or after the command.
    #[arg(short = 'p', long = "port", default_value_t = 7199, global = true)]
    port: u16,
    /// Print the admin API's JSON instead of a table.
    #[arg(long, global = true)]
    json: bool,
    /// Print help.
    #[arg(long, action = clap::ArgAction::Help, global = true)]
    help: Option<bool>,
    #[command(subcommand)]
    command: ToolCommand,
}

/// `-h` is the host (nodetool's flag), so no command has a `-h` help flag:
/// `--help` prints help.
#[derive(clap::Subcommand)]
#[command(disable_help_flag = true)]
enum ToolCommand {
    /// Cluster status: state, load, tokens, ownership, host id, rack per node.
    Status {
        /// Show effective ownership under this keyspace's replication.
        keyspace: Option<String>,
    },
    /// One line per token of the ring.
    Ring {
        /// Show effective ownership under this keyspace's replication.
        keyspace: Option<String>,
    },
    /// Cluster name, snitch, partitioner, schema versions.
    Describecluster,
    /// The replicas (primary first) of a partition key.
    Getendpoints {
        keyspace: String,
        table: String,
        /// The partition key: a value as text (42, abc, a uuid, a blob in hex); compound keys as a:b.
        #[arg(allow_hyphen_values = true)]
        key: String,
    },
    /// This node: host id, load, generation, uptime, data center, rack.
    Info {
        /// Show all tokens.
        #[arg(short = 'T', long)]
        tokens: bool,
    },
    /// Flush memtables to disk: all tables, a keyspace's, or some tables.
    Flush { keyspace: Option<String>, tables: Vec<String> },
    /// Major compaction (purges what gc_grace_seconds allows): all tables, a keyspace's, or some tables.
    Compact { keyspace: Option<String>, tables: Vec<String> },
    /// Purge now what gc_grace_seconds and the repaired horizon let go (deleted data, expired
    /// cells and deletion markers): all tables, a keyspace's, or some tables.
    Garbagecollect { keyspace: Option<String>, tables: Vec<String> },
    /// Flush every memtable and stop serving CQL clients (the native port closes, its
    /// connections too); the node stays up, serving no clients, until it is stopped.
    Drain,
    /// Set the probability (0 to 1) of tracing a request the client did not ask to trace.
    Settraceprobability {
        #[arg(allow_hyphen_values = true)]
        value: String,
    },
    /// Print the probability of tracing a request the client did not ask to trace.
    Gettraceprobability,
    /// Set how fast compactions may write, in MiB/s (0 to disable throttling), until the
    /// node restarts (shoal.yaml's compaction_throughput then).
    Setcompactionthroughput {
        #[arg(allow_hyphen_values = true)]
        value: String,
    },
    /// Print how fast compactions may write (0: unthrottled).
    Getcompactionthroughput,
    /// Pending hints per target node.
    Listpendinghints,
    /// Stream this node's ranges from the other replicas (all user keyspaces, or one); prints
    /// what moved when done.
    Rebuild {
        /// Only this keyspace (nodetool's -ks).
        #[arg(long = "keyspace", short = 'k', alias = "ks")]
        keyspace: Option<String>,
        /// Prefer replicas in this data center as sources.
        source_dc: Option<String>,
    },
    /// Streaming sessions: running and recently finished, with bytes and files done.
    Netstats,
    /// Background work owed and running: pending tasks (compactions due, memtables waiting to be
    /// flushed), RocksDB's running compactions and flushes, and per table what it owes.
    Compactionstats {
        /// Sizes as KiB, MiB, GiB (nodetool's -H).
        #[arg(short = 'H', long = "human-readable")]
        human_readable: bool,
    },
    /// The latencies of the requests this node coordinated, per operation (percentiles in µs).
    Proxyhistograms,
    /// A table's local read and write latencies on this node (percentiles in µs): `KS TABLE` or `KS.TABLE`.
    Tablehistograms { keyspace: String, table: Option<String> },
    /// Per keyspace and table: SSTables, disk space, memtable size, local read and write counts
    /// and latencies. All tables, a keyspace's, or `KS.TABLE`s.
    Tablestats { tables: Vec<String> },
    /// The request stages (Cassandra's thread pools): active, pending and completed requests.
    Tpstats,
    /// What this node holds of every endpoint's gossiped state.
    Gossipinfo,
    /// Repair: replicas compare per-partition hashes of this node's ranges; partitions that
    /// differ are reconciled and written back. All user keyspaces, a keyspace, or some tables.
    Repair {
        keyspace: Option<String>,
        tables: Vec<String>,
        /// Only the ranges this node is the primary replica of (run on every node to cover the ring once).
        #[arg(long = "partitioner-range", visible_alias = "pr")]
        primary_range: bool,
        /// Report what differs without repairing it.
        #[arg(long)]
        preview: bool,
        /// Compare every range, also those every replica holds repaired (by default a repair
        /// is incremental: it skips them); each replica compacts the table first.
        #[arg(long, conflicts_with = "validate")]
        full: bool,
        /// Compare only the ranges every replica holds repaired, repairing nothing: they should
        /// agree; any that do not are reported out of sync (run a full repair).
        #[arg(long)]
        validate: bool,
    },
    /// The repairs run on this node, by an operator or the auto_repair schedule (oldest first).
    #[command(name = "repair_admin")]
    RepairAdmin {
        /// What to do: `list`.
        #[arg(value_parser = ["list"], default_value = "list")]
        action: String,
    },
    /// Delete the data of ranges this node no longer replicates (after adding nodes or lowering
    /// a replication factor): all user keyspaces, a keyspace, or some tables.
    Cleanup { keyspace: Option<String>, tables: Vec<String> },
    /// Hand this node's ranges to the nodes that take them over, then leave the ring for good.
    Decommission,
    /// `bootstrap resume`: resume this node's failed bootstrap (it stays JOINING after one);
    /// the ranges it already received are not streamed again. Answers once the node joined.
    Bootstrap {
        /// What to do: `resume`.
        #[arg(value_parser = ["resume"])]
        action: String,
    },
    /// Take a snapshot of every user keyspace, some keyspaces, or one table (`--table`, nodetool's
    /// `-cf`, with one keyspace): hard links of the tables' files under
    /// `<data dir>/snapshots/TAG/KEYSPACE/`, with each table's schema.cql.
    Snapshot {
        keyspaces: Vec<String>,
        /// The snapshot's name (default: the time now in milliseconds).
        #[arg(short = 't', long = "tag")]
        tag: Option<String>,
        /// One table of the (one) keyspace given.
        #[arg(long = "table", visible_alias = "column-family")]
        table: Option<String>,
        /// Do not flush memtables first (the snapshot misses what they hold); nodetool's -sf.
        #[arg(long = "skip-flush")]
        skip_flush: bool,
    },
    /// Every snapshot on this node: per table its true size (files only the snapshot still
    /// holds), size on disk and creation time.
    Listsnapshots,
    /// Remove the snapshot named by -t, or all snapshots (--all), of every keyspace or of some.
    Clearsnapshot {
        keyspaces: Vec<String>,
        /// The snapshot to remove.
        #[arg(short = 't')]
        tag: Option<String>,
        /// Remove every snapshot.
        #[arg(long)]
        all: bool,
    },
    /// Write the rows of this node's snapshot TAG of KEYSPACE (or of one TABLE) back into the
    /// cluster, with their original timestamps, TTLs and tombstones, re-creating a table
    /// dropped since from the snapshot's schema.
    Restore {
        /// The snapshot (its tag).
        #[arg(short = 't', long = "tag")]
        tag: String,
        keyspace: String,
        table: Option<String>,
        /// Consistency level of the writes.
        #[arg(long = "consistency", default_value = "ONE")]
        consistency: String,
    },
    /// sstableloader's job: read a snapshot directory (a tag's, or one keyspace's in it; the node
    /// asked must be able to read it) and write every row to its replicas in this cluster, with
    /// its original timestamps, TTLs and tombstones. The tables must exist.
    Load {
        dir: String,
        /// Consistency level of the writes.
        #[arg(long = "consistency", default_value = "ONE")]
        consistency: String,
        /// Create the keyspaces, types and tables the cluster lacks from the snapshot's schema
        /// (restoring a backup into a fresh cluster).
        #[arg(long = "create-schema")]
        create_schema: bool,
    },
    /// Back this node up: its snapshot TAG (taken now unless it exists) of every user keyspace,
    /// or of those given, copied to DIR/HOST_ID/TAG/ with every file synced. `load DIR
    /// --create-schema` restores a cluster's backups into any cluster.
    Backup {
        dir: String,
        keyspaces: Vec<String>,
        /// The snapshot's name (default: the time now in milliseconds).
        #[arg(short = 't', long = "tag")]
        tag: Option<String>,
    },
    /// Turn incremental backups on (every flushed SSTable hard-linked under backups/) until restart.
    Enablebackup,
    /// Turn incremental backups off until restart.
    Disablebackup,
    /// Whether incremental backups are on: `running` or `not running`.
    Statusbackup,
    /// Remove a node that is down for good: its ranges are re-replicated from the surviving
    /// replicas. `removenode status` shows removals in progress; `removenode force` completes
    /// them without their streams (repair afterwards).
    Removenode {
        /// The dead node's host id (`status` shows it), or `status`, or `force`.
        host_id: String,
    },
}

/// nodetool's two-letter flags, which clap cannot take as short flags: `-pr`
/// (repair's primary range only) becomes `--pr`, only after `tool`.
pub fn nodetool_flags(args: impl Iterator<Item = std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let mut in_tool = false;
    args.map(|a| {
        if a == "tool" {
            in_tool = true;
        }
        match a.to_str() {
            Some("-pr") if in_tool => "--pr".into(),
            Some("-cf") if in_tool => "--table".into(),
            Some("-sf") if in_tool => "--skip-flush".into(),
            _ => a,
        }
    })
    .collect()
}

/// Why a request got no answer.
#[derive(Debug)]
pub enum ClientError {
    /// Nothing accepted the connection (wording of nodetool's JMX failure).
    Connect { target: String, reason: String },
    /// The connection broke or the answer is not HTTP + JSON.
    Protocol(String),
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::Connect { target, reason } => write!(f, "Failed to connect to '{target}' - {reason}."),
            ClientError::Protocol(m) => write!(f, "{m}"),
        }
    }
}

/// An answer: HTTP status and JSON body.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub body: Json,
}

impl Reply {
    /// The API's error message, for a non-200 answer.
    pub fn error(&self) -> String {
        self.body
            .get("error")
            .and_then(Json::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| format!("HTTP {}", self.status))
    }
}

/// Percent-encodes a query value (everything but RFC 3986 unreserved characters).
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `path?k=v&...` with encoded values; empty values are left out.
pub fn with_query(path: &str, params: &[(&str, Option<&str>)]) -> String {
    let parts: Vec<String> = params.iter().filter_map(|(k, v)| v.map(|v| format!("{k}={}", encode(v)))).collect();
    if parts.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{}", parts.join("&"))
    }
}

/// One request to a node's admin API (`Connection: close`), bounded by timeouts.
pub fn request(host: &str, port: u16, method: &str, path: &str, timeout: Duration) -> Result<Reply, ClientError> {
    let target = format!("{host}:{port}");
    let connect_error = |reason: String| ClientError::Connect { target: target.clone(), reason };
    let addrs: Vec<_> = (host, port).to_socket_addrs().map_err(|e| connect_error(e.to_string()))?.collect();
    let mut last = "no address".to_string();
    let mut stream = None;
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = e.to_string(),
        }
    }
    let mut stream = stream.ok_or_else(|| connect_error(last))?;
    let broken = |e: std::io::Error| ClientError::Protocol(format!("admin API at {target}: {e}"));
    stream.set_read_timeout(Some(timeout)).map_err(broken)?;
    stream.set_write_timeout(Some(QUICK_TIMEOUT)).map_err(broken)?;
    let head = format!("{method} {path} HTTP/1.1\r\nHost: {target}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).map_err(broken)?;
    let mut raw = Vec::new();
    stream.take(MAX_RESPONSE_BYTES).read_to_end(&mut raw).map_err(broken)?;
    parse_reply(&raw).map_err(|m| ClientError::Protocol(format!("admin API at {target}: {m}")))
}

fn parse_reply(raw: &[u8]) -> Result<Reply, String> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n").ok_or("no HTTP response")?;
    let head = String::from_utf8_lossy(&raw[..end]);
    let status_line = head.lines().next().unwrap_or_default();
    let status: u16 = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line '{status_line}'"))?;
    let body = &raw[end + 4..];
    let body: Json = serde_json::from_slice(body).map_err(|e| format!("answer is not JSON ({e})"))?;
    Ok(Reply { status, body })
}

/// GET and expect 200.
pub fn get(host: &str, port: u16, path: &str) -> Result<Json, String> {
    let reply = request(host, port, "GET", path, QUICK_TIMEOUT).map_err(|e| e.to_string())?;
    if reply.status == 200 {
        Ok(reply.body)
    } else {
        Err(reply.error())
    }
}

pub fn main(args: ToolArgs) -> ExitCode {
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Connect(e)) => {
            eprintln!("shoal tool: {e}");
            ExitCode::FAILURE
        }
        Err(Failure::Error(m)) => {
            eprintln!("error: {m}");
            ExitCode::FAILURE
        }
    }
}

enum Failure {
    Connect(ClientError),
    Error(String),
}

fn call(args: &ToolArgs, method: &str, path: &str, timeout: Duration) -> Result<Json, Failure> {
    match request(&args.host, args.port, method, path, timeout) {
        Ok(reply) if reply.status == 200 => Ok(reply.body),
        Ok(reply) => Err(Failure::Error(reply.error())),
        Err(e @ ClientError::Connect { .. }) => Err(Failure::Connect(e)),
        Err(e) => Err(Failure::Error(e.to_string())),
    }
}

fn run(args: &ToolArgs) -> Result<(), Failure> {
    if let ToolCommand::Snapshot { keyspaces, tag, table, skip_flush } = &args.command {
        return snapshot(args, keyspaces, tag.as_deref(), table.as_deref(), *skip_flush);
    }
    if let ToolCommand::Clearsnapshot { keyspaces, tag, all } = &args.command {
        return clearsnapshot(args, keyspaces, tag.as_deref(), *all);
    }
    let (method, paths, timeout): (&str, Vec<String>, Duration) = match &args.command {
        ToolCommand::Status { keyspace } => {
            ("GET", vec![with_query("/v1/status", &[("keyspace", keyspace.as_deref())])], QUICK_TIMEOUT)
        }
        ToolCommand::Ring { keyspace } => {
            ("GET", vec![with_query("/v1/ring", &[("keyspace", keyspace.as_deref())])], QUICK_TIMEOUT)
        }
        ToolCommand::Describecluster => ("GET", vec!["/v1/describecluster".to_string()], QUICK_TIMEOUT),
        ToolCommand::Getendpoints { keyspace, table, key } => (
            "GET",
            vec![with_query(
                "/v1/getendpoints",
                &[("keyspace", Some(keyspace)), ("table", Some(table)), ("key", Some(key))],
            )],
            QUICK_TIMEOUT,
        ),
        ToolCommand::Info { .. } => ("GET", vec!["/v1/info".to_string()], QUICK_TIMEOUT),
        ToolCommand::Listpendinghints => ("GET", vec!["/v1/hints".to_string()], QUICK_TIMEOUT),
        ToolCommand::Drain => ("POST", vec!["/v1/drain".to_string()], MAINTENANCE_TIMEOUT),
        ToolCommand::Gettraceprobability => ("GET", vec!["/v1/traceprobability".to_string()], QUICK_TIMEOUT),
        ToolCommand::Settraceprobability { value } => {
            ("POST", vec![with_query("/v1/traceprobability", &[("value", Some(value))])], QUICK_TIMEOUT)
        }
        ToolCommand::Getcompactionthroughput => ("GET", vec!["/v1/compactionthroughput".to_string()], QUICK_TIMEOUT),
        ToolCommand::Setcompactionthroughput { value } => {
            ("POST", vec![with_query("/v1/compactionthroughput", &[("value", Some(value))])], QUICK_TIMEOUT)
        }
        ToolCommand::Netstats => ("GET", vec!["/v1/netstats".to_string()], QUICK_TIMEOUT),
        ToolCommand::Compactionstats { .. } => ("GET", vec!["/v1/compactionstats".to_string()], QUICK_TIMEOUT),
        ToolCommand::RepairAdmin { .. } => ("GET", vec!["/v1/repair_admin".to_string()], QUICK_TIMEOUT),
        ToolCommand::Proxyhistograms => ("GET", vec!["/v1/proxyhistograms".to_string()], QUICK_TIMEOUT),
        ToolCommand::Tpstats => ("GET", vec!["/v1/tpstats".to_string()], QUICK_TIMEOUT),
        ToolCommand::Gossipinfo => ("GET", vec!["/v1/gossipinfo".to_string()], QUICK_TIMEOUT),
        ToolCommand::Tablehistograms { keyspace, table } => {
            let (ks, t) = match (table, keyspace.split_once('.')) {
                (Some(t), _) => (keyspace.as_str(), t.as_str()),
                (None, Some((ks, t))) => (ks, t),
                (None, None) => {
                    return Err(Failure::Error(
                        "tablehistograms requires <keyspace> <table> or <keyspace.table>".into(),
                    ))
                }
            };
            (
                "GET",
                vec![with_query("/v1/tablehistograms", &[("keyspace", Some(ks)), ("table", Some(t))])],
                QUICK_TIMEOUT,
            )
        }
        ToolCommand::Tablestats { tables } => {
            let paths = if tables.is_empty() {
                vec!["/v1/tablestats".to_string()]
            } else {
                tables
                    .iter()
                    .map(|name| match name.split_once('.') {
                        Some((ks, t)) => with_query("/v1/tablestats", &[("keyspace", Some(ks)), ("table", Some(t))]),
                        None => with_query("/v1/tablestats", &[("keyspace", Some(name))]),
                    })
                    .collect()
            };
            ("GET", paths, QUICK_TIMEOUT)
        }
        ToolCommand::Repair { keyspace, tables, primary_range, preview, full, validate } => {
            let mut params: Vec<(&str, Option<&str>)> = vec![("keyspace", keyspace.as_deref())];
            params.extend(tables.iter().map(|t| ("table", Some(t.as_str()))));
            params.push(("pr", primary_range.then_some("true")));
            params.push(("preview", preview.then_some("true")));
            params.push(("full", full.then_some("true")));
            params.push(("validate", validate.then_some("true")));
            ("POST", vec![with_query("/v1/repair", &params)], MAINTENANCE_TIMEOUT)
        }
        ToolCommand::Decommission => ("POST", vec!["/v1/decommission".to_string()], MAINTENANCE_TIMEOUT),
        ToolCommand::Listsnapshots => ("GET", vec!["/v1/snapshots".to_string()], QUICK_TIMEOUT),
        ToolCommand::Statusbackup => ("GET", vec!["/v1/incremental_backup".to_string()], QUICK_TIMEOUT),
        ToolCommand::Enablebackup => ("POST", vec!["/v1/incremental_backup/enable".to_string()], QUICK_TIMEOUT),
        ToolCommand::Disablebackup => ("POST", vec!["/v1/incremental_backup/disable".to_string()], QUICK_TIMEOUT),
        ToolCommand::Restore { tag, keyspace, table, consistency } => (
            "POST",
            vec![with_query(
                "/v1/restore",
                &[
                    ("tag", Some(tag)),
                    ("keyspace", Some(keyspace)),
                    ("table", table.as_deref()),
                    ("consistency", Some(consistency)),
                ],
            )],
            MAINTENANCE_TIMEOUT,
        ),
        ToolCommand::Load { dir, consistency, create_schema } => {
            // The node opens the directory: give it an absolute path.
            let dir = absolute_unless_url(dir);
            let params = [
                ("dir", Some(dir.as_str())),
                ("consistency", Some(consistency)),
                ("create_schema", create_schema.then_some("true")),
            ];
            ("POST", vec![with_query("/v1/load", &params)], MAINTENANCE_TIMEOUT)
        }
        ToolCommand::Backup { dir, keyspaces, tag } => {
            let dir = absolute_unless_url(dir);
            let mut params: Vec<(&str, Option<&str>)> = vec![("dir", Some(&dir)), ("tag", tag.as_deref())];
            params.extend(keyspaces.iter().map(|k| ("keyspace", Some(k.as_str()))));
            ("POST", vec![with_query("/v1/backup", &params)], MAINTENANCE_TIMEOUT)
        }
        ToolCommand::Snapshot { .. } | ToolCommand::Clearsnapshot { .. } => return Ok(()),
        ToolCommand::Bootstrap { .. } => ("POST", vec!["/v1/bootstrap/resume".to_string()], MAINTENANCE_TIMEOUT),
        ToolCommand::Removenode { host_id } => match host_id.as_str() {
            "status" | "force" => (
                "POST",
                vec![with_query("/v1/removenode", &[("action", Some(host_id))])],
                if host_id == "status" { QUICK_TIMEOUT } else { MAINTENANCE_TIMEOUT },
            ),
            _ => ("POST", vec![with_query("/v1/removenode", &[("host_id", Some(host_id))])], MAINTENANCE_TIMEOUT),
        },
        ToolCommand::Cleanup { keyspace, tables } => {
            let mut params: Vec<(&str, Option<&str>)> = vec![("keyspace", keyspace.as_deref())];
            params.extend(tables.iter().map(|t| ("table", Some(t.as_str()))));
            ("POST", vec![with_query("/v1/cleanup", &params)], MAINTENANCE_TIMEOUT)
        }
        ToolCommand::Rebuild { keyspace, source_dc } => (
            "POST",
            vec![with_query("/v1/rebuild", &[("keyspace", keyspace.as_deref()), ("source_dc", source_dc.as_deref())])],
            MAINTENANCE_TIMEOUT,
        ),
        ToolCommand::Flush { keyspace, tables }
        | ToolCommand::Compact { keyspace, tables }
        | ToolCommand::Garbagecollect { keyspace, tables } => {
            let path = match args.command {
                ToolCommand::Flush { .. } => "/v1/flush",
                ToolCommand::Compact { .. } => "/v1/compact",
                _ => "/v1/garbagecollect",
            };
            let paths = if tables.is_empty() {
                vec![with_query(path, &[("keyspace", keyspace.as_deref())])]
            } else {
                tables
                    .iter()
                    .map(|t| with_query(path, &[("keyspace", keyspace.as_deref()), ("table", Some(t))]))
                    .collect()
            };
            ("POST", paths, MAINTENANCE_TIMEOUT)
        }
    };
    let mut answers = Vec::with_capacity(paths.len());
    for path in &paths {
        answers.push(call(args, method, path, timeout)?);
    }
    if args.json {
        for a in &answers {
            println!("{}", serde_json::to_string_pretty(a).unwrap_or_default());
        }
        return Ok(());
    }
    let Some(answer) = answers.first() else { return Ok(()) };
    let text = match &args.command {
        ToolCommand::Status { .. } => format_status(answer),
        ToolCommand::Ring { .. } => format_ring(answer),
        ToolCommand::Describecluster => format_describecluster(answer),
        ToolCommand::Getendpoints { .. } => strings(&answer["endpoints"]).iter().map(|e| format!("{e}\n")).collect(),
        ToolCommand::Info { tokens } => format_info(answer, *tokens),
        ToolCommand::Listpendinghints => format_hints(answer),
        ToolCommand::Netstats => format_netstats(answer),
        ToolCommand::Compactionstats { human_readable } => format_compactionstats(answer, *human_readable),
        ToolCommand::Rebuild { .. } | ToolCommand::Bootstrap { .. } => format_rebuild(answer),
        ToolCommand::Repair { .. } => format_repair(answer),
        ToolCommand::RepairAdmin { .. } => format_repair_admin(answer),
        ToolCommand::Proxyhistograms => format_proxyhistograms(answer),
        ToolCommand::Tablehistograms { .. } => format_tablehistograms(answer),
        ToolCommand::Tablestats { .. } => format_tablestats(&answers),
        ToolCommand::Tpstats => format_tpstats(answer),
        ToolCommand::Gossipinfo => format_gossipinfo(answer),
        ToolCommand::Removenode { host_id } if host_id == "status" => format_removal_status(answer),
        ToolCommand::Listsnapshots => format_listsnapshots(answer),
        ToolCommand::Statusbackup => {
            if answer["enabled"].as_bool() == Some(true) { "running\n" } else { "not running\n" }.to_string()
        }
        ToolCommand::Restore { .. } | ToolCommand::Load { .. } => format_load(answer),
        ToolCommand::Backup { .. } => format!(
            "Backed up snapshot {} to {} ({} files, {})\n",
            text(&answer["tag"]),
            text(&answer["directory"]),
            text(&answer["files"]),
            human_bytes(answer.get("bytes").and_then(Json::as_u64).unwrap_or(0))
        ),
        ToolCommand::Gettraceprobability => {
            format!(
                "Current trace probability: {:?}\n",
                answer.get("probability").and_then(Json::as_f64).unwrap_or(0.0)
            )
        }
        ToolCommand::Getcompactionthroughput => {
            // f64's Display prints a whole number without a fraction: `64`, `1.5`.
            let mib = answer.get("mib_per_second").and_then(Json::as_f64).unwrap_or(0.0);
            format!("Current compaction throughput: {mib} MiB/s\n")
        }
        // nodetool prints nothing on success.
        ToolCommand::Flush { .. }
        | ToolCommand::Compact { .. }
        | ToolCommand::Garbagecollect { .. }
        | ToolCommand::Drain
        | ToolCommand::Settraceprobability { .. }
        | ToolCommand::Setcompactionthroughput { .. }
        | ToolCommand::Cleanup { .. }
        | ToolCommand::Decommission
        | ToolCommand::Snapshot { .. }
        | ToolCommand::Clearsnapshot { .. }
        | ToolCommand::Enablebackup
        | ToolCommand::Disablebackup
        | ToolCommand::Removenode { .. } => String::new(),
    };
    print!("{text}");
    Ok(())
}

/// A directory the node opens, made absolute (the node's working directory
/// is not this one); an `s3://` url as it is.
fn absolute_unless_url(dir: &str) -> String {
    if dir.starts_with("s3://") {
        return dir.to_string();
    }
    std::path::absolute(dir).map(|p| p.display().to_string()).unwrap_or_else(|_| dir.to_string())
}

/// `nodetool snapshot`: the request line, the snapshot, then its directory's name.
fn snapshot(
    args: &ToolArgs,
    keyspaces: &[String],
    tag: Option<&str>,
    table: Option<&str>,
    skip_flush: bool,
) -> Result<(), Failure> {
    let millis = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
    let tag = tag.map(str::to_string).unwrap_or_else(|| millis.to_string());
    if !args.json {
        let which = if keyspaces.is_empty() { "all keyspaces".to_string() } else { keyspaces.join(", ") };
        let name = if tag.is_empty() { String::new() } else { format!(" with snapshot name [{tag}]") };
        println!("Requested creating snapshot(s) for [{which}]{name} and options {{skipFlush={skip_flush}}}");
    }
    if tag.is_empty() {
        return Err(Failure::Error("You must supply a snapshot name.".to_string()));
    }
    let mut params: Vec<(&str, Option<&str>)> = vec![("tag", Some(&tag))];
    params.extend(keyspaces.iter().map(|k| ("keyspace", Some(k.as_str()))));
    params.push(("table", table));
    params.push(("skip_flush", skip_flush.then_some("true")));
    let answer = call(args, "POST", &with_query("/v1/snapshot", &params), MAINTENANCE_TIMEOUT)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&answer).unwrap_or_default());
    } else {
        println!("Snapshot directory: {tag}");
    }
    Ok(())
}

/// `nodetool clearsnapshot`: the request line, then the removal.
fn clearsnapshot(args: &ToolArgs, keyspaces: &[String], tag: Option<&str>, all: bool) -> Result<(), Failure> {
    let tag = tag.filter(|t| !t.is_empty());
    match (tag, all) {
        (None, false) => return Err(Failure::Error("Specify snapshot name or --all".to_string())),
        (Some(_), true) => return Err(Failure::Error("Specify only one of snapshot name or --all".to_string())),
        _ => {}
    }
    if !args.json {
        let which = if keyspaces.is_empty() { "all keyspaces".to_string() } else { keyspaces.join(", ") };
        let name = match tag {
            Some(t) => format!("snapshot name [{t}]"),
            None => "[all snapshots]".to_string(),
        };
        println!("Requested clearing snapshot(s) for [{which}] with {name}");
    }
    let mut params: Vec<(&str, Option<&str>)> = vec![("tag", tag), ("all", all.then_some("true"))];
    params.extend(keyspaces.iter().map(|k| ("keyspace", Some(k.as_str()))));
    let answer = call(args, "POST", &with_query("/v1/clearsnapshot", &params), QUICK_TIMEOUT)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&answer).unwrap_or_default());
    }
    Ok(())
}

// ---------------------------------------------------------------- formatting

/// Rows of percentiles (50% ... Max) of the `percentiles_us` objects in `columns`, two decimals as nodetool.
fn percentile_rows(columns: &[&Json]) -> Vec<Vec<String>> {
    [("50%", "50"), ("75%", "75"), ("95%", "95"), ("98%", "98"), ("99%", "99"), ("Min", "min"), ("Max", "max")]
        .iter()
        .map(|(label, key)| {
            let mut row = vec![label.to_string()];
            row.extend(columns.iter().map(|c| format!("{:.2}", c.get(*key).and_then(Json::as_f64).unwrap_or(0.0))));
            row
        })
        .collect()
}

/// `proxyhistograms` as nodetool prints it: a column per operation.
fn format_proxyhistograms(v: &Json) -> String {
    let ops = ["read", "write", "range", "cas_read", "cas_write"];
    let mut rows = vec![
        vec!["Percentile", "Read Latency", "Write Latency", "Range Latency", "CAS Read Latency", "CAS Write Latency"]
            .into_iter()
            .map(String::from)
            .collect::<Vec<_>>(),
        std::iter::once(String::new()).chain(ops.iter().map(|_| "(micros)".to_string())).collect(),
    ];
    let columns: Vec<&Json> = ops.iter().map(|op| &v[*op]["percentiles_us"]).collect();
    rows.extend(percentile_rows(&columns));
    format!("proxy histograms\n{}\n", table(&rows))
}

/// `tablehistograms` as nodetool prints it (the columns Shoal keeps).
fn format_tablehistograms(v: &Json) -> String {
    let mut rows = vec![
        vec!["Percentile", "Read Latency", "Write Latency", "Range Latency", "SSTables", "Partition Size"]
            .into_iter()
            .map(String::from)
            .collect(),
        vec!["", "(micros)", "(micros)", "(micros)", "", "(bytes)"].into_iter().map(String::from).collect(),
    ];
    rows.extend(percentile_rows(&[
        &v["read_latency_us"],
        &v["write_latency_us"],
        &v["range_latency_us"],
        &v["sstables_per_read"],
        &v["partition_size_bytes"],
    ]));
    format!("{}/{} histograms\n{}\n", text(&v["keyspace"]), text(&v["table"]), table(&rows))
}

/// `tablestats` as nodetool prints it: per keyspace its counts, then per table its lines.
fn format_tablestats(answers: &[Json]) -> String {
    let int = |t: &Json, k: &str| t.get(k).and_then(Json::as_u64).unwrap_or(0);
    let ms = |t: &Json, k: &str, count: u64| {
        if count == 0 {
            "NaN ms".to_string()
        } else {
            format!("{:.3} ms", t.get(k).and_then(Json::as_f64).unwrap_or(0.0))
        }
    };
    let keyspaces: Vec<&Json> = answers.iter().filter_map(|a| a["keyspaces"].as_array()).flatten().collect();
    let total: usize = keyspaces.iter().filter_map(|k| k["tables"].as_array()).map(Vec::len).sum();
    let mut out = format!("Total number of tables: {total}\n----------------\n");
    for ks in keyspaces {
        let tables = ks["tables"].as_array().cloned().unwrap_or_default();
        let (reads, writes) = (int(ks, "read_count"), int(ks, "write_count"));
        let mean = |key: &str, count_key: &str| {
            let count: u64 = tables.iter().map(|t| int(t, count_key)).sum();
            let sum: f64 = tables
                .iter()
                .map(|t| t.get(key).and_then(Json::as_f64).unwrap_or(0.0) * int(t, count_key) as f64)
                .sum();
            if count == 0 {
                "NaN ms".to_string()
            } else {
                format!("{:.3} ms", sum / count as f64)
            }
        };
        out.push_str(&format!("Keyspace : {}\n", text(&ks["keyspace"])));
        out.push_str(&format!(
            "\tRead Count: {reads}\n\tRead Latency: {}\n",
            mean("local_read_latency_ms", "local_read_count")
        ));
        out.push_str(&format!(
            "\tWrite Count: {writes}\n\tWrite Latency: {}\n",
            mean("local_write_latency_ms", "local_write_count")
        ));
        let flushes: u64 = tables.iter().map(|t| int(t, "pending_flushes")).sum();
        out.push_str(&format!("\tPending Flushes: {flushes}\n"));
        for t in &tables {
            let (r, w) = (int(t, "local_read_count"), int(t, "local_write_count"));
            out.push_str(&format!("\t\tTable: {}\n", text(&t["table"])));
            out.push_str(&format!("\t\tSSTable count: {}\n", int(t, "sstable_count")));
            out.push_str(&format!("\t\tSpace used (live): {}\n", int(t, "space_used_live")));
            out.push_str(&format!("\t\tSpace used (total): {}\n", int(t, "space_used_total")));
            out.push_str(&format!("\t\tMemtable data size: {}\n", int(t, "memtable_data_size")));
            out.push_str(&format!("\t\tLocal read count: {r}\n"));
            out.push_str(&format!("\t\tLocal read latency: {}\n", ms(t, "local_read_latency_ms", r)));
            out.push_str(&format!("\t\tLocal write count: {w}\n"));
            out.push_str(&format!("\t\tLocal write latency: {}\n", ms(t, "local_write_latency_ms", w)));
            out.push_str(&format!("\t\tPending flushes: {}\n", int(t, "pending_flushes")));
            out.push_str(&format!("\t\tNumber of partitions (estimate): {}\n", int(t, "estimated_rows")));
            for (label, key) in [
                ("minimum", "partition_minimum_bytes"),
                ("maximum", "partition_maximum_bytes"),
                ("mean", "partition_mean_bytes"),
            ] {
                out.push_str(&format!("\t\tCompacted partition {label} bytes: {}\n", int(t, key)));
            }
            out.push('\n');
        }
        out.push_str("----------------\n");
    }
    out
}

/// `gossipinfo` as nodetool prints it: `/ADDRESS` and the application states under it
/// (without the versions Cassandra's gossip numbers them with: Shoal's gossip has none per state).
fn format_gossipinfo(v: &Json) -> String {
    let mut out = String::new();
    for e in v["endpoints"].as_array().into_iter().flatten() {
        let int = |k: &str| e.get(k).and_then(Json::as_u64).unwrap_or(0);
        out.push_str(&format!("/{}\n", text(&e["address"])));
        out.push_str(&format!("  generation:{}\n", int("generation")));
        out.push_str(&format!("  STATUS:{}\n", text(&e["status"])));
        out.push_str(&format!("  LOAD:{}\n", int("load")));
        out.push_str(&format!("  SCHEMA:{}\n", text(&e["schema"])));
        out.push_str(&format!("  DC:{}\n", text(&e["dc"])));
        out.push_str(&format!("  RACK:{}\n", text(&e["rack"])));
        out.push_str(&format!("  RELEASE_VERSION:{}\n", text(&e["release_version"])));
        out.push_str(&format!("  INTERNAL_ADDRESS_AND_PORT:{}:{}\n", text(&e["address"]), int("port")));
        out.push_str(&format!("  NATIVE_ADDRESS_AND_PORT:{}:{}\n", text(&e["rpc_address"]), int("native_port")));
        out.push_str(&format!("  HOST_ID:{}\n", text(&e["host_id"])));
        out.push_str("  TOKENS:<hidden>\n");
        if !e["alive"].as_bool().unwrap_or(false) {
            out.push_str("  (down: the failure detector convicted it)\n");
        }
    }
    out
}

/// `tpstats` as nodetool prints its thread pool table.
fn format_tpstats(v: &Json) -> String {
    let mut rows: Vec<Vec<String>> =
        vec![vec!["Pool Name", "Active", "Pending", "Completed", "Blocked", "All time blocked"]
            .into_iter()
            .map(String::from)
            .collect()];
    for pool in v["thread_pools"].as_array().into_iter().flatten() {
        let mut row = vec![text(&pool["name"])];
        row.extend(
            ["active", "pending", "completed", "blocked", "all_time_blocked"]
                .iter()
                .map(|k| pool.get(*k).and_then(Json::as_u64).unwrap_or(0).to_string()),
        );
        rows.push(row);
    }
    let mut dropped: Vec<Vec<String>> = vec![vec!["Message type".to_string(), "Dropped".to_string()]];
    for m in v["dropped_messages"].as_array().into_iter().flatten() {
        dropped.push(vec![text(&m["message_type"]), m.get("dropped").and_then(Json::as_u64).unwrap_or(0).to_string()]);
    }
    format!("{}\n{}", table(&rows), table(&dropped))
}

/// `listsnapshots` as Cassandra 5.0's nodetool prints it (without -e: no
/// Ephemeral column).
fn format_listsnapshots(v: &Json) -> String {
    let mut out = "Snapshot Details: \n".to_string();
    let snapshots = v.get("snapshots").and_then(Json::as_array).cloned().unwrap_or_default();
    if snapshots.is_empty() {
        out.push_str("There are no snapshots\n");
        return out;
    }
    let size = |s: &Json, k: &str| human_bytes(s.get(k).and_then(Json::as_u64).unwrap_or(0));
    let mut rows = vec![[
        "Snapshot name",
        "Keyspace name",
        "Column family name",
        "True size",
        "Size on disk",
        "Creation time",
        "Expiration time",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect::<Vec<String>>()];
    for s in &snapshots {
        rows.push(vec![
            text(&s["tag"]),
            text(&s["keyspace"]),
            text(&s["table"]),
            size(s, "true_size"),
            size(s, "size_on_disk"),
            text(&s["creation_time"]),
            String::new(),
        ]);
    }
    out.push_str(&table(&rows));
    let total = human_bytes(v.get("total_true_size").and_then(Json::as_u64).unwrap_or(0));
    out.push_str(&format!("\nTotal TrueDiskSpaceUsed: {total}\n\n"));
    out
}

/// `restore` and `load`: what was written, per table.
fn format_load(v: &Json) -> String {
    let keyspaces: Vec<Json> = match v.get("keyspaces").and_then(Json::as_array) {
        Some(list) => list.clone(),
        None => vec![v.clone()],
    };
    let mut rows = vec![["Keyspace", "Table", "Partitions", "Cells", "Bytes"].iter().map(|s| s.to_string()).collect()];
    let mut millis = 0;
    for ks in &keyspaces {
        millis += ks.get("millis").and_then(Json::as_u64).unwrap_or(0);
        for t in ks.get("tables").and_then(Json::as_array).into_iter().flatten() {
            rows.push(vec![
                text(&ks["keyspace"]),
                text(&t["table"]),
                text(&t["partitions"]),
                text(&t["cells"]),
                human_bytes(t.get("bytes").and_then(Json::as_u64).unwrap_or(0)),
            ]);
        }
    }
    let mut out = String::new();
    for created in v.get("created").and_then(Json::as_array).into_iter().flatten() {
        out.push_str(&format!("Re-created table {} from the snapshot's schema\n", text(created)));
    }
    out.push_str(&table(&rows));
    out.push_str(&format!(
        "Written at {} in {millis} ms\n",
        text(&keyspaces.first().map(|k| k["consistency"].clone()).unwrap_or(Json::Null))
    ));
    out
}

/// `compactionstats` as Cassandra 5.0's nodetool prints it: one table of
/// `pending tasks  N`, a `KEYSPACE  TABLE  N` row per table with pending
/// tasks, then what runs (RocksDB counts running compactions and flushes for
/// the whole node, not per table); then, per table owing work, what it owes.
fn format_compactionstats(v: &Json, human: bool) -> String {
    let size = |b: u64| if human { human_bytes(b) } else { b.to_string() };
    let int = |t: &Json, k: &str| t.get(k).and_then(Json::as_u64).unwrap_or(0);
    let yes = |t: &Json, k: &str| t.get(k).and_then(Json::as_bool).unwrap_or(false);
    let row = |cells: &[&str]| cells.iter().map(|c| c.to_string()).collect::<Vec<String>>();
    let tables = v.get("tables").and_then(Json::as_array).cloned().unwrap_or_default();
    let mut stats = vec![row(&["pending tasks", &int(v, "pending_tasks").to_string()])];
    let mut owed = vec![row(&[
        "keyspace",
        "table",
        "compaction pending",
        "pending compaction bytes",
        "memtables to flush",
        "memtable bytes to flush",
    ])];
    for t in &tables {
        let pending = u64::from(yes(t, "compaction_pending"))
            + u64::from(yes(t, "mem_table_flush_pending"))
            + int(t, "frozen_memtables");
        let (keyspace, name) = (text(&t["keyspace"]), text(&t["table"]));
        if pending > 0 {
            stats.push(row(&[&keyspace, &name, &pending.to_string()]));
        }
        if pending > 0 || int(t, "pending_compaction_bytes") > 0 {
            owed.push(row(&[
                &keyspace,
                &name,
                if yes(t, "compaction_pending") { "yes" } else { "no" },
                &size(int(t, "pending_compaction_bytes")),
                &int(t, "frozen_memtables").to_string(),
                &size(int(t, "frozen_bytes")),
            ]));
        }
    }
    stats.push(row(&["running compactions", &int(v, "running_compactions").to_string()]));
    stats.push(row(&["running flushes", &int(v, "running_flushes").to_string()]));
    stats.push(row(&["major compaction", if yes(v, "major_compaction") { "running" } else { "none" }]));
    let mut out = table(&stats);
    if owed.len() > 1 {
        out.push('\n');
        out.push_str(&table(&owed));
    }
    out
}

fn strings(v: &Json) -> Vec<String> {
    v.as_array().map(|a| a.iter().map(text).collect()).unwrap_or_default()
}

/// A JSON scalar as text (strings unquoted, null as "?").
fn text(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        Json::Null => "?".to_string(),
        other => other.to_string(),
    }
}

/// Sizes as nodetool prints them (FileUtils.stringifyFileSize: `#.##` and
/// binary units): `512 bytes`, `1.2 MiB`, `108.45 KiB`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [(&str, f64); 4] = [
        ("TiB", 1024.0 * 1024.0 * 1024.0 * 1024.0),
        ("GiB", 1024.0 * 1024.0 * 1024.0),
        ("MiB", 1024.0 * 1024.0),
        ("KiB", 1024.0),
    ];
    let b = bytes as f64;
    for (unit, size) in UNITS {
        if b >= size {
            let mut n = format!("{:.2}", b / size);
            while n.ends_with('0') {
                n.pop();
            }
            if n.ends_with('.') {
                n.pop();
            }
            return format!("{n} {unit}");
        }
    }
    format!("{bytes} bytes")
}

fn percent(v: &Json, decimals: usize) -> String {
    match v.as_f64() {
        Some(f) => format!("{:.*}%", decimals, f * 100.0),
        None => "?".to_string(),
    }
}

/// Left-aligned columns separated by two spaces (nodetool's TableBuilder).
fn table(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| rows.iter().filter_map(|r| r.get(c)).map(|s| s.chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            line.push_str(cell);
            if c + 1 < row.len() {
                let pad = widths.get(c).copied().unwrap_or(0).saturating_sub(cell.chars().count()) + 2;
                line.push_str(&" ".repeat(pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn format_status(s: &Json) -> String {
    let owns_header = if s["owns_effective"].as_bool().unwrap_or(false) { "Owns (effective)" } else { "Owns" };
    let mut out = String::new();
    for dc in s["datacenters"].as_array().into_iter().flatten() {
        let title = format!("Datacenter: {}", text(&dc["name"]));
        out.push_str(&format!("{title}\n{}\n", "=".repeat(title.chars().count())));
        out.push_str("Status=Up/Down\n|/ State=Normal/Leaving/Joining/Moving\n");
        let mut rows =
            vec![["--", "Address", "Load", "Tokens", owns_header, "Host ID", "Rack"].map(str::to_string).to_vec()];
        for n in dc["nodes"].as_array().into_iter().flatten() {
            rows.push(vec![
                text(&n["state"]),
                text(&n["address"]),
                n["load_bytes"].as_u64().map(human_bytes).unwrap_or_else(|| "?".to_string()),
                text(&n["tokens"]),
                percent(&n["owns"], 1),
                text(&n["host_id"]),
                text(&n["rack"]),
            ]);
        }
        out.push_str(&table(&rows));
        out.push('\n');
    }
    out
}

fn format_ring(r: &Json) -> String {
    let entries: Vec<&Json> = r["ring"].as_array().map(|a| a.iter().collect()).unwrap_or_default();
    let mut dcs: Vec<String> = entries.iter().map(|e| text(&e["dc"])).collect();
    dcs.sort();
    dcs.dedup();
    let mut out = String::new();
    for dc in dcs {
        let in_dc: Vec<&&Json> = entries.iter().filter(|e| text(&e["dc"]) == dc).collect();
        let title = format!("Datacenter: {dc}");
        out.push_str(&format!("\n{title}\n{}\n", "=".repeat(title.chars().count())));
        let mut rows =
            vec![["Address", "Rack", "Status", "State", "Load", "Owns", "Token"].map(str::to_string).to_vec()];
        // nodetool's first row: the last token, where the ring wraps.
        if let Some(last) = in_dc.last() {
            rows.push(vec![
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                text(&last["token"]),
            ]);
        }
        for e in in_dc {
            rows.push(vec![
                text(&e["address"]),
                text(&e["rack"]),
                text(&e["status"]),
                text(&e["state"]),
                e["load_bytes"].as_u64().map(human_bytes).unwrap_or_else(|| "?".to_string()),
                percent(&e["owns"], 2),
                text(&e["token"]),
            ]);
        }
        out.push_str(&table(&rows));
    }
    out.push('\n');
    out
}

fn format_describecluster(d: &Json) -> String {
    let mut out = String::from("Cluster Information:\n");
    out.push_str(&format!("\tName: {}\n", text(&d["name"])));
    out.push_str(&format!("\tSnitch: {}\n", text(&d["snitch"])));
    out.push_str(&format!("\tDynamicEndPointSnitch: {}\n", text(&d["dynamic_endpoint_snitch"])));
    out.push_str(&format!("\tPartitioner: {}\n", text(&d["partitioner"])));
    out.push_str("\tSchema versions:\n");
    for (version, addrs) in d["schema_versions"].as_object().into_iter().flatten() {
        out.push_str(&format!("\t\t{version}: [{}]\n\n", strings(addrs).join(", ")));
    }
    let stats = &d["stats"];
    out.push_str("Stats for all nodes:\n");
    for (label, key) in [
        ("Live", "live"),
        ("Joining", "joining"),
        ("Moving", "moving"),
        ("Leaving", "leaving"),
        ("Unreachable", "unreachable"),
    ] {
        out.push_str(&format!("\t{label}: {}\n", text(&stats[key])));
    }
    out.push_str("\nData Centers: \n");
    for (dc, v) in d["datacenters"].as_object().into_iter().flatten() {
        out.push_str(&format!("\t{dc} #Nodes: {} #Down: {}\n", text(&v["nodes"]), text(&v["down"])));
    }
    out.push_str("\nDatabase versions:\n");
    for (version, addrs) in d["database_versions"].as_object().into_iter().flatten() {
        out.push_str(&format!("\t{version}: [{}]\n\n", strings(addrs).join(", ")));
    }
    out.push_str("Keyspaces:\n");
    for (ks, replication) in d["keyspaces"].as_object().into_iter().flatten() {
        let class = text(&replication["class"]);
        let class = class.rsplit('.').next().unwrap_or_default().to_string();
        let options: Vec<String> = replication
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| k.as_str() != "class")
            .map(|(k, v)| format!("{k}={}", text(v)))
            .collect();
        out.push_str(&format!("\t{ks} -> Replication class: {class} {{{}}}\n", options.join(", ")));
    }
    out
}

fn format_info(i: &Json, all_tokens: bool) -> String {
    let tokens = strings(&i["tokens"]);
    let mut rows: Vec<(&str, String)> = vec![
        ("ID", text(&i["host_id"])),
        ("Native Transport active", "true".to_string()),
        ("Load", i["load_bytes"].as_u64().map(human_bytes).unwrap_or_else(|| "?".to_string())),
        ("Generation No", text(&i["generation"])),
        ("Uptime (seconds)", text(&i["uptime_seconds"])),
        ("Data Center", text(&i["data_center"])),
        ("Rack", text(&i["rack"])),
        ("Schema Version", text(&i["schema_version"])),
    ];
    if all_tokens {
        rows.extend(tokens.iter().map(|t| ("Token", t.clone())));
    } else {
        rows.push(("Token", format!("(invoke with -T/--tokens to see all {} tokens)", tokens.len())));
    }
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    rows.iter().map(|(k, v)| format!("{k:<width$}: {v}\n")).collect()
}

/// netstats: the mode, then a line per session (nodetool's per-session block, one line each).
fn format_netstats(n: &Json) -> String {
    let mut out = format!("Mode: {}\n", text(&n["mode"]));
    let sessions = n["sessions"].as_array().cloned().unwrap_or_default();
    if sessions.is_empty() {
        out.push_str("Not sending any streams.\n");
        return out;
    }
    let mut rows = vec![["Session", "Direction", "Peer", "Files", "Bytes", "State"].map(String::from).to_vec()];
    for s in &sessions {
        let (done, total) = (s["bytes_done"].as_u64().unwrap_or(0), s["bytes_total"].as_u64().unwrap_or(0));
        let pct = if total > 0 { 100.0 * done as f64 / total as f64 } else { 100.0 };
        rows.push(vec![
            text(&s["session"]),
            text(&s["direction"]),
            text(&s["peer"]),
            format!("{}/{}", text(&s["files_done"]), text(&s["files_total"])),
            format!("{} / {} ({pct:.0}%)", human_bytes(done), human_bytes(total)),
            text(&s["state"]),
        ]);
    }
    out.push_str(&table(&rows));
    out
}

/// repair: per table, what was compared, what differed and what was written back.
fn format_repair(r: &Json) -> String {
    let mut rows = vec![["Table", "Ranges", "Compared", "Partitions", "Differing", "Estimated", "Repaired"]
        .map(String::from)
        .to_vec()];
    for t in r["tables"].as_array().cloned().unwrap_or_default() {
        rows.push(vec![
            format!("{}.{}", text(&t["keyspace"]), text(&t["table"])),
            text(&t["ranges"]),
            text(&t["ranges_compared"]),
            text(&t["partitions_compared"]),
            text(&t["partitions_differing"]),
            human_bytes(t["bytes_estimated"].as_u64().unwrap_or(0)),
            human_bytes(t["bytes_repaired"].as_u64().unwrap_or(0)),
        ]);
    }
    let mut out = table(&rows);
    out.push_str(&format!(
        "{} ({}) done in {:.1} s: {} of {} ranges compared ({}), \
         {} of {} partitions differed, {} written back, {} on the wire\n",
        text(&r["operation"]),
        text(&r["mode"]),
        r["seconds"].as_f64().unwrap_or(0.0),
        text(&r["ranges_compared"]),
        text(&r["ranges"]),
        match r["mode"].as_str() {
            Some("validate") => "those repaired on every replica: any difference is repaired data out of sync",
            Some("full") => "all of them",
            _ => "the others are repaired on every replica",
        },
        text(&r["partitions_differing"]),
        text(&r["partitions_compared"]),
        human_bytes(r["bytes_repaired"].as_u64().unwrap_or(0)),
        human_bytes(r["bytes_on_wire"].as_u64().unwrap_or(0))
    ));
    out
}

/// removenode status: nodetool's RemovalStatus lines.
fn format_removal_status(r: &Json) -> String {
    let removing = r["removing"].as_array().cloned().unwrap_or_default();
    if removing.is_empty() {
        return "RemovalStatus: No removals in process.\n".to_string();
    }
    removing
        .iter()
        .map(|n| format!("RemovalStatus: Removing host {} (/{})\n", text(&n["host_id"]), text(&n["address"])))
        .collect()
}

/// repair_admin list: one line per repair run on this node.
fn format_repair_admin(r: &Json) -> String {
    let mut rows =
        vec![["Id", "Trigger", "Keyspace", "Tables", "Started (unix)", "State", "Differing", "On wire", "Seconds"]
            .map(String::from)
            .to_vec()];
    for run in r["repairs"].as_array().cloned().unwrap_or_default() {
        rows.push(vec![
            text(&run["id"]),
            text(&run["trigger"]),
            if run["keyspace"].is_null() { "(all)".to_string() } else { text(&run["keyspace"]) },
            strings(&run["tables"]).join(","),
            text(&run["started_unix_s"]),
            text(&run["state"]),
            text(&run["partitions_differing"]),
            run["bytes_on_wire"].as_u64().map(human_bytes).unwrap_or_default(),
            run["seconds"].as_f64().map(|s| format!("{s:.1}")).unwrap_or_default(),
        ]);
    }
    table(&rows)
}

/// rebuild: what moved.
fn format_rebuild(r: &Json) -> String {
    let mut out = String::new();
    for s in r["sessions"].as_array().cloned().unwrap_or_default() {
        out.push_str(&format!(
            "{}.{} from {}: {} ranges, {} files, {}\n",
            text(&s["keyspace"]),
            text(&s["table"]),
            text(&s["source"]),
            text(&s["ranges"]),
            text(&s["files"]),
            human_bytes(s["bytes"].as_u64().unwrap_or(0))
        ));
    }
    if let Some(skipped) = r["ranges_already_streamed"].as_u64().filter(|n| *n > 0) {
        out.push_str(&format!("{skipped} table ranges received before were not streamed again\n"));
    }
    out.push_str(&format!(
        "{} done: {} in {:.1} s ({:.1} MB/s)\n",
        r["operation"].as_str().unwrap_or("rebuild"),
        human_bytes(r["bytes"].as_u64().unwrap_or(0)),
        r["seconds"].as_f64().unwrap_or(0.0),
        r["mb_per_s"].as_f64().unwrap_or(0.0)
    ));
    out
}

fn format_hints(h: &Json) -> String {
    let hints: Vec<&Json> = h["hints"].as_array().map(|a| a.iter().collect()).unwrap_or_default();
    if hints.is_empty() {
        return "This node does not have any pending hints\n".to_string();
    }
    let mut rows = vec![["Host ID", "Address", "Rack", "DC", "Status", "Pending"].map(str::to_string).to_vec()];
    for e in hints {
        rows.push(vec![
            text(&e["host_id"]),
            text(&e["address"]),
            text(&e["rack"]),
            text(&e["dc"]),
            text(&e["status"]),
            e["pending_bytes"].as_u64().map(human_bytes).unwrap_or_else(|| "?".to_string()),
        ]);
    }
    table(&rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_like_nodetool() {
        assert_eq!(human_bytes(512), "512 bytes");
        assert_eq!(human_bytes(1024), "1 KiB");
        assert_eq!(human_bytes(111_053), "108.45 KiB");
        assert_eq!(human_bytes(1_258_291), "1.2 MiB");
        assert_eq!(human_bytes(3 << 30), "3 GiB");
    }

    #[test]
    fn compactionstats_reads_like_nodetool() {
        let v = serde_json::json!({
            "pending_tasks": 3, "running_compactions": 1, "running_flushes": 0, "major_compaction": false, "idle": false,
            "tables": [
                {"keyspace": "ks", "table": "a", "compaction_pending": true, "pending_compaction_bytes": 2_097_152,
                 "mem_table_flush_pending": false, "frozen_memtables": 2, "frozen_bytes": 1024},
                {"keyspace": "ks", "table": "b", "compaction_pending": false, "pending_compaction_bytes": 0,
                 "mem_table_flush_pending": false, "frozen_memtables": 0, "frozen_bytes": 0}
            ]
        });
        let out = format_compactionstats(&v, true);
        let lines: Vec<Vec<&str>> = out.lines().map(|l| l.split("  ").filter(|c| !c.is_empty()).collect()).collect();
        let cells = |i: usize| lines.get(i).cloned().unwrap_or_default().iter().map(|c| c.trim()).collect::<Vec<_>>();
        assert_eq!(cells(0), ["pending tasks", "3"], "{out}");
        assert_eq!(cells(1), ["ks", "a", "3"], "{out}");
        assert_eq!(cells(2), ["running compactions", "1"], "{out}");
        assert_eq!(cells(3), ["running flushes", "0"], "{out}");
        assert_eq!(cells(4), ["major compaction", "none"], "{out}");
        assert_eq!(cells(5), Vec::<&str>::new(), "{out}");
        assert_eq!(cells(6)[..3], ["keyspace", "table", "compaction pending"], "{out}");
        assert_eq!(cells(7), ["ks", "a", "yes", "2 MiB", "2", "1 KiB"], "{out}");
        assert_eq!(lines.len(), 8, "an idle table has no row: {out}");
        assert!(out.starts_with("pending tasks        3\n"), "nodetool's aligned columns: {out}");
        let raw = format_compactionstats(&v, false);
        assert!(raw.contains("2097152"), "{raw}");
        let idle = format_compactionstats(&serde_json::json!({"pending_tasks": 0, "tables": []}), false);
        assert_eq!(
            idle,
            "pending tasks        0\nrunning compactions  0\nrunning flushes      0\nmajor compaction     none\n"
        );
    }

    #[test]
    fn queries_are_encoded() {
        assert_eq!(with_query("/v1/x", &[("key", Some("a:b c/é")), ("table", None)]), "/v1/x?key=a%3Ab%20c%2F%C3%A9");
        assert_eq!(with_query("/v1/x", &[("keyspace", None)]), "/v1/x");
    }

    #[test]
    fn status_table_has_nodetools_shape() {
        let s = serde_json::json!({
            "owns_effective": true,
            "datacenters": [{"name": "dc1", "nodes": [{"state": "UN", "address": "127.0.0.1", "load_bytes": 1_258_291, "tokens": 16,
                "owns": 1.0, "host_id": "h", "rack": "rack1"}]}]
        });
        let out = format_status(&s);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "Datacenter: dc1");
        assert_eq!(lines[1], "===============");
        assert_eq!(lines[2], "Status=Up/Down");
        assert_eq!(lines[3], "|/ State=Normal/Leaving/Joining/Moving");
        assert_eq!(lines[4], "--  Address    Load     Tokens  Owns (effective)  Host ID  Rack");
        assert_eq!(lines[5], "UN  127.0.0.1  1.2 MiB  16      100.0%            h        rack1");
    }
}
