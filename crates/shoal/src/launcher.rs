//! `shoal cluster`: a local test cluster on loopback, ccm's job. Node i
//! (1-based) is a `shoal server` process on 127.0.0.i with its data under
//! `DIR/node{i}/data` and its output in `DIR/node{i}/node.log`; the cluster's
//! state (per node: address, pid, dc, rack, data dir, server arguments) is
//! `DIR/nodes.json`. Nodes start one at a time, each waiting until its admin
//! API reports it NORMAL, so a joining node sees the ring when it picks tokens.
//!
//! Invariants:
//! - Only processes this launcher started are signalled: the pid comes from
//!   nodes.json, and `/proc/PID/cmdline` must name a `shoal` binary running
//!   `server` on that node's data directory (so a recycled pid is never hit).
//!   Zombies count as stopped.
//! - nodes.json is rewritten atomically (temp file, rename) after every
//!   change, before waiting on anything, so an interrupted command leaves a
//!   state that `down` can clean up.
//! - Every wait is bounded and its failure names the node and its log.
//! - Nodes run in their own process group: a Ctrl-C in the launcher's
//!   terminal does not reach them.
//! - With `--auth` / `--tls` each node reads `DIR/node{i}/shoal.yaml` (the
//!   user's `--config` file, if any, followed by the security settings);
//!   with `--tls` a throw-away CA under `DIR/tls/` issues each node's
//!   keystore (also to nodes added later) and one for clients.

use std::fs::OpenOptions;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value as Json;

use crate::tool;

const STATE_FILE: &str = "nodes.json";
const STOP_TIMEOUT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(200);

#[derive(clap::Args)]
pub struct ClusterArgs {
    /// The cluster's directory (nodes.json, node data and logs).
    #[arg(long, global = true, default_value = "shoal-cluster", value_name = "DIR")]
    dir: PathBuf,
    #[command(subcommand)]
    command: ClusterCommand,
}

#[derive(clap::Subcommand)]
enum ClusterCommand {
    /// Start N nodes on 127.0.0.1..N, one at a time, and wait until all are UN.
    Up(UpArgs),
    /// Each node's address, pid, whether it runs, and its state as the first running node sees it.
    Status {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Stop one node: SIGKILL (a crash), or SIGTERM with --graceful.
    Stop {
        /// The node's index (1-based).
        node: usize,
        /// SIGTERM and wait up to 30 s for a clean exit.
        #[arg(long)]
        graceful: bool,
    },
    /// Restart one stopped node on its data directory, optionally under a new address.
    Start {
        /// The node's index (1-based).
        node: usize,
        /// Run it under this address instead (its disk moved to a new machine).
        #[arg(long, value_name = "IP")]
        address: Option<IpAddr>,
        /// Seconds to wait for it to be NORMAL.
        #[arg(long, default_value_t = 120)]
        timeout: u64,
    },
    /// Add a node on the next address: it bootstraps (streams its ranges from the current
    /// replicas, JOINING meanwhile) and waits until it is NORMAL.
    Add {
        /// Its data center (default: the last node's).
        #[arg(long)]
        dc: Option<String>,
        /// Its rack (default: the last node's).
        #[arg(long)]
        rack: Option<String>,
        /// Seconds to wait for it to be NORMAL.
        #[arg(long, default_value_t = 300)]
        timeout: u64,
    },
    /// Decommission one running node (it hands its ranges to the nodes that take them over and
    /// leaves the ring), then stop it.
    Decommission {
        /// The node's index (1-based).
        node: usize,
    },
    /// Remove a stopped node for good (removenode, run on the first running node): its ranges are
    /// re-replicated from the surviving replicas.
    Remove {
        /// The node's index (1-based).
        node: usize,
    },
    /// Replace stopped node N by a fresh one (an empty data directory, at its address or another)
    /// that takes its tokens and streams its ranges (replace_address_first_boot).
    Replace {
        /// The node's index (1-based).
        node: usize,
        /// Run the replacement under this address instead.
        #[arg(long, value_name = "IP")]
        address: Option<IpAddr>,
        /// Seconds to wait for it to be NORMAL.
        #[arg(long, default_value_t = 300)]
        timeout: u64,
    },
    /// Stop every node (SIGTERM, SIGKILL after 30 s).
    Down {
        /// Then remove the cluster's directory.
        #[arg(long)]
        clear: bool,
    },
}

#[derive(clap::Args)]
struct UpArgs {
    /// Number of nodes.
    #[arg(short = 'n', long = "nodes", value_name = "N")]
    nodes: usize,
    /// Data centers (dc1..dcD); nodes are split evenly, in order.
    #[arg(long, default_value_t = 1)]
    dcs: usize,
    /// Racks per data center (rack1..rackR), assigned round-robin.
    #[arg(long, default_value_t = 1)]
    racks: usize,
    /// Vnodes per node (the server's default when absent).
    #[arg(long)]
    num_tokens: Option<u32>,
    #[arg(long, default_value = "Test Cluster")]
    cluster_name: String,
    /// CQL port of every node (each node has its own address).
    #[arg(long, default_value_t = 9042)]
    native_port: u16,
    /// Admin API port of every node.
    #[arg(long, default_value_t = 7199)]
    admin_port: u16,
    /// Seconds to wait for each node, and then for all to see each other UN.
    #[arg(long, default_value_t = 120)]
    timeout: u64,
    /// Logins and permissions: PasswordAuthenticator and CassandraAuthorizer
    /// (default superuser cassandra/cassandra).
    #[arg(long)]
    auth: bool,
    /// TLS for clients (TLS only) and between nodes (internode_encryption: all,
    /// mutual authentication), with a throw-away CA in DIR/tls/.
    #[arg(long)]
    tls: bool,
    /// More `shoal server` arguments, after `--`.
    #[arg(last = true)]
    server_args: Vec<String>,
}

/// `DIR/nodes.json`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct ClusterState {
    cluster_name: String,
    binary: PathBuf,
    native_port: u16,
    admin_port: u16,
    nodes: Vec<NodeState>,
    /// `--auth` / `--tls` and the user's `--config` they are added to.
    #[serde(default)]
    security: Security,
}

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
struct Security {
    auth: bool,
    tls: bool,
    /// The `--config` file given after `--`, copied into each node's file.
    user_config: Option<PathBuf>,
}

/// The CA's name (its certificate's common name), per cluster.
fn ca_name(cluster_name: &str) -> String {
    format!("Shoal throw-away CA for {cluster_name}")
}

/// With `--tls`: `DIR/tls/` holds the CA (`ca.pem`, `ca.key`), each node's
/// keystore (`node{i}.pem`) and the clients' (`client.pem`, key and
/// certificate). Makes the CA on first use.
fn authority(dir: &Path, cluster_name: &str) -> Result<tls::generate::Authority, String> {
    let tls_dir = dir.join("tls");
    let (ca_pem, ca_key) = (tls_dir.join("ca.pem"), tls_dir.join("ca.key"));
    if ca_key.exists() {
        let key = std::fs::read_to_string(&ca_key).map_err(|e| format!("{}: {e}", ca_key.display()))?;
        let cert = std::fs::read_to_string(&ca_pem).map_err(|e| format!("{}: {e}", ca_pem.display()))?;
        return tls::generate::Authority::load(&ca_name(cluster_name), &key, cert);
    }
    std::fs::create_dir_all(&tls_dir).map_err(|e| format!("cannot create {}: {e}", tls_dir.display()))?;
    let ca = tls::generate::Authority::create(&ca_name(cluster_name))?;
    write_private(&ca_key, &ca.key_pem())?;
    std::fs::write(&ca_pem, &ca.cert_pem).map_err(|e| format!("{}: {e}", ca_pem.display()))?;
    let client = ca.issue("client", &[IpAddr::V4(Ipv4Addr::LOCALHOST)])?;
    write_private(&tls_dir.join("client.pem"), &client)?;
    Ok(ca)
}

/// Writes a file holding a private key, readable by its owner only.
fn write_private(path: &Path, text: &str) -> Result<(), String> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    file.write_all(text.as_bytes()).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Writes node `index`'s `shoal.yaml` (the user's config, then the security
/// settings) and returns its path; None when there is nothing to add.
fn node_config(
    dir: &Path,
    cluster_name: &str,
    security: &Security,
    index: usize,
    addr: IpAddr,
) -> Result<Option<PathBuf>, String> {
    if !security.auth && !security.tls {
        return Ok(None);
    }
    let mut yaml = match &security.user_config {
        Some(path) => std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?,
        None => String::new(),
    };
    yaml.push_str("\n# Added by shoal cluster up (--auth / --tls):\n");
    if security.auth {
        yaml.push_str("authenticator: PasswordAuthenticator\nauthorizer: CassandraAuthorizer\n");
    }
    if security.tls {
        let ca = authority(dir, cluster_name)?;
        let tls_dir = dir.join("tls");
        let keystore = tls_dir.join(format!("node{index}.pem"));
        write_private(&keystore, &ca.issue(&format!("node{index}"), &[addr])?)?;
        let (keystore, truststore) = (json_path(&keystore), json_path(&tls_dir.join("ca.pem")));
        yaml.push_str(&format!(
            "client_encryption_options: {{enabled: true, keystore: {keystore}}}\n\
             server_encryption_options: {{internode_encryption: all, keystore: {keystore}, truststore: {truststore}, \
             require_client_auth: true}}\n"
        ));
    }
    let path = dir.join(format!("node{index}")).join("shoal.yaml");
    std::fs::create_dir_all(dir.join(format!("node{index}"))).map_err(|e| format!("cannot create node dir: {e}"))?;
    std::fs::write(&path, yaml).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(Some(path))
}

/// A path as a quoted YAML (JSON) string.
fn json_path(path: &Path) -> String {
    Json::String(path.to_string_lossy().into_owned()).to_string()
}

/// Takes `--config FILE` out of `args` (it goes into the node's own file).
fn take_config(args: &mut Vec<String>) -> Option<PathBuf> {
    let at = args.iter().position(|a| a == "--config")?;
    let path = args.get(at + 1).map(PathBuf::from);
    args.drain(at..(at + 2).min(args.len()));
    path
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct NodeState {
    index: usize,
    address: IpAddr,
    /// The pid of the last start; None once stopped by the launcher.
    pid: Option<u32>,
    dc: String,
    rack: String,
    data_dir: PathBuf,
    log: PathBuf,
    /// `shoal server` arguments.
    args: Vec<String>,
}

pub fn main(args: ClusterArgs) -> ExitCode {
    let result = match args.command {
        ClusterCommand::Up(up) => cmd_up(&args.dir, up),
        ClusterCommand::Status { json } => cmd_status(&args.dir, json),
        ClusterCommand::Stop { node, graceful } => cmd_stop(&args.dir, node, graceful),
        ClusterCommand::Start { node, address, timeout } => {
            cmd_start(&args.dir, node, address, Duration::from_secs(timeout))
        }
        ClusterCommand::Decommission { node } => cmd_decommission(&args.dir, node),
        ClusterCommand::Remove { node } => cmd_remove(&args.dir, node),
        ClusterCommand::Replace { node, address, timeout } => {
            cmd_replace(&args.dir, node, address, Duration::from_secs(timeout))
        }
        ClusterCommand::Add { dc, rack, timeout } => cmd_add(&args.dir, dc, rack, Duration::from_secs(timeout)),
        ClusterCommand::Down { clear } => cmd_down(&args.dir, clear),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("shoal cluster: {e}");
            ExitCode::FAILURE
        }
    }
}

// ---------------------------------------------------------------- layout

/// Node i's address: 127.0.0.i.
fn address(index: usize) -> Result<IpAddr, String> {
    match u8::try_from(index) {
        Ok(i) if (1..=254).contains(&i) => Ok(IpAddr::V4(Ipv4Addr::new(127, 0, 0, i))),
        _ => Err(format!("node index {index} is out of range (1..254)")),
    }
}

/// (dc, rack) of each node, 1-based dc and rack numbers: nodes split evenly
/// into `dcs` data centers in order (the first `n % dcs` get one more), racks
/// round-robin within each.
fn placement(n: usize, dcs: usize, racks: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::with_capacity(n);
    for dc in 0..dcs {
        let size = n / dcs + usize::from(dc < n % dcs);
        for pos in 0..size {
            out.push((dc + 1, pos % racks + 1));
        }
    }
    out
}

fn state_path(dir: &Path) -> PathBuf {
    dir.join(STATE_FILE)
}

fn load(dir: &Path) -> Result<ClusterState, String> {
    let path = state_path(dir);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("no cluster in {}: cannot read {}: {e}", dir.display(), path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

fn save(dir: &Path, state: &ClusterState) -> Result<(), String> {
    let path = state_path(dir);
    let tmp = dir.join(format!("{STATE_FILE}.tmp"));
    let text = serde_json::to_string_pretty(state).map_err(|e| e.to_string())?;
    std::fs::write(&tmp, text + "\n").map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, &path).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn node_mut(state: &mut ClusterState, index: usize) -> Result<&mut NodeState, String> {
    let count = state.nodes.len();
    state
        .nodes
        .iter_mut()
        .find(|n| n.index == index)
        .ok_or_else(|| format!("no node {index} (the cluster has {count})"))
}

// ---------------------------------------------------------------- processes

/// Whether `pid` is this node's live server process (not a zombie, not a
/// recycled pid): its command line is a `shoal` binary running `server` on
/// the node's data directory.
fn is_running(node: &NodeState) -> bool {
    let Some(pid) = node.pid else { return false };
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    // The state letter follows the parenthesized command name.
    let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next());
    if matches!(state, Some('Z') | Some('X') | None) {
        return false;
    }
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else { return false };
    let args: Vec<String> = cmdline.split(|b| *b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    let data_dir = node.data_dir.to_string_lossy();
    args.first().is_some_and(|exe| exe.contains("shoal"))
        && args.iter().any(|a| a == "server")
        && args.iter().any(|a| *a == data_dir)
}

/// Sends `sig` to a node's server process, after checking it is ours.
fn signal(node: &NodeState, sig: i32) -> Result<(), String> {
    let Some(pid) = node.pid else { return Ok(()) };
    if !is_running(node) {
        return Ok(());
    }
    let pid = libc::pid_t::try_from(pid).map_err(|_| format!("pid {pid} out of range"))?;
    if pid <= 1 {
        return Err(format!("refusing to signal pid {pid}"));
    }
    #[allow(unsafe_code)]
    // SAFETY: kill(2) takes two integers and touches none of our memory; the
    // pid is positive, so it names one process, never a group or everyone.
    let rc = unsafe { libc::kill(pid, sig) };
    if rc == 0 {
        Ok(())
    } else {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ESRCH) {
            Ok(())
        } else {
            Err(format!("cannot signal node {} (pid {pid}): {e}", node.index))
        }
    }
}

/// Waits until the node's process is gone; false on timeout.
fn wait_exit(node: &NodeState, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while is_running(node) {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}

fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn spawn(state: &ClusterState, node: &NodeState) -> Result<Child, String> {
    std::fs::create_dir_all(&node.data_dir).map_err(|e| format!("cannot create {}: {e}", node.data_dir.display()))?;
    let mut log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&node.log)
        .map_err(|e| format!("cannot open {}: {e}", node.log.display()))?;
    let _ = writeln!(
        log,
        "===== shoal cluster: starting node {} on {}: {} server {}",
        node.index,
        node.address,
        state.binary.display(),
        node.args.join(" ")
    );
    let err = log.try_clone().map_err(|e| e.to_string())?;
    Command::new(&state.binary)
        .arg("server")
        .args(&node.args)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err)
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", state.binary.display()))
}

fn text_of(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The admin API's `/v1/status` nodes, flattened over data centers.
fn status_nodes(status: &Json) -> Vec<&Json> {
    status["datacenters"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|dc| dc["nodes"].as_array().into_iter().flatten())
        .collect()
}

/// Whether the node (process `pid`) answers its admin API and reports itself NORMAL.
fn is_normal(state: &ClusterState, node: &NodeState, pid: u32) -> Result<(), String> {
    let host = node.address.to_string();
    let info = tool::get(&host, state.admin_port, "/v1/info")?;
    if info["pid"].as_u64() != Some(u64::from(pid)) {
        return Err(format!("another process (pid {}) answers on {host}:{}", text_of(&info["pid"]), state.admin_port));
    }
    if info["bootstrap"]["state"].as_str() == Some("FAILED") {
        return Err(format!("{BOOTSTRAP_FAILED}{}", text_of(&info["bootstrap"]["error"])));
    }
    let status = tool::get(&host, state.admin_port, "/v1/status")?;
    let local = status["local_host_id"].as_str().unwrap_or_default();
    let me = status_nodes(&status).into_iter().find(|n| n["host_id"].as_str() == Some(local));
    match me.and_then(|n| n["status"].as_str()) {
        Some("NORMAL") => Ok(()),
        Some(other) => Err(format!("it reports itself {other}")),
        None => Err("it does not list itself".to_string()),
    }
}

/// How `is_normal` starts its answer for a node whose bootstrap failed.
const BOOTSTRAP_FAILED: &str = "failed to bootstrap: ";

/// Waits until a just-started node is NORMAL; fails early if it exits or its bootstrap fails.
fn wait_normal(state: &ClusterState, node: &NodeState, child: &mut Child, timeout: Duration) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(Some(exit)) = child.try_wait() {
            return Err(format!(
                "node {} ({}) exited ({exit}) during start-up; last lines of {}:\n{}",
                node.index,
                node.address,
                node.log.display(),
                log_tail(&node.log, 20)
            ));
        }
        let last = match is_normal(state, node, child.id()) {
            Ok(()) => return Ok(()),
            Err(e) if e.starts_with(BOOTSTRAP_FAILED) => {
                return Err(format!(
                    "node {} ({}) {e}. It stays up, JOINING: `shoal tool -h {} -p {} bootstrap resume` resumes \
                     it (so does `shoal cluster stop {}` then `start {}`)",
                    node.index, node.address, node.address, state.admin_port, node.index, node.index
                ))
            }
            Err(e) => e,
        };
        if Instant::now() >= deadline {
            return Err(format!(
                "node {} ({}) is not NORMAL after {} s ({last}); see {}; last lines:\n{}",
                node.index,
                node.address,
                timeout.as_secs(),
                node.log.display(),
                log_tail(&node.log, 20)
            ));
        }
        std::thread::sleep(POLL);
    }
}

/// Waits until every running node's admin API lists all of them as UN.
fn wait_all_up(state: &ClusterState, timeout: Duration) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    let expected: Vec<String> = state.nodes.iter().map(|n| n.address.to_string()).collect();
    loop {
        let mut problem = None;
        for node in &state.nodes {
            let seen = match tool::get(&node.address.to_string(), state.admin_port, "/v1/status") {
                Ok(status) => status_nodes(&status)
                    .iter()
                    .map(|n| {
                        (
                            n["address"].as_str().unwrap_or_default().to_string(),
                            n["state"].as_str().unwrap_or_default().to_string(),
                        )
                    })
                    .collect::<Vec<_>>(),
                Err(e) => {
                    problem = Some((node, format!("its admin API does not answer: {e}")));
                    break;
                }
            };
            let up: Vec<&String> = seen.iter().filter(|(_, s)| s == "UN").map(|(a, _)| a).collect();
            if !expected.iter().all(|a| up.contains(&a)) {
                let view: Vec<String> = seen.iter().map(|(a, s)| format!("{a} {s}")).collect();
                problem =
                    Some((node, format!("it sees {} of {} nodes UN ({})", up.len(), expected.len(), view.join(", "))));
                break;
            }
        }
        let Some((node, why)) = problem else { return Ok(()) };
        if Instant::now() >= deadline {
            return Err(format!(
                "the cluster did not converge within {} s: node {} ({}): {why}; see {}",
                timeout.as_secs(),
                node.index,
                node.address,
                node.log.display()
            ));
        }
        std::thread::sleep(POLL);
    }
}

// ---------------------------------------------------------------- commands

fn cmd_up(dir: &Path, up: UpArgs) -> Result<(), String> {
    if up.nodes == 0 || up.nodes > 254 {
        return Err(format!("-n must be between 1 and 254, got {}", up.nodes));
    }
    if up.dcs == 0 || up.dcs > up.nodes {
        return Err(format!("--dcs must be between 1 and the number of nodes ({}), got {}", up.nodes, up.dcs));
    }
    if up.racks == 0 {
        return Err("--racks must be at least 1".to_string());
    }
    if let Ok(old) = load(dir) {
        if let Some(n) = old.nodes.iter().find(|n| is_running(n)) {
            return Err(format!(
                "the cluster in {} is running (node {} pid {}); run `shoal cluster down --dir {}` first",
                dir.display(),
                n.index,
                n.pid.unwrap_or_default(),
                dir.display()
            ));
        }
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let dir = dir.canonicalize().map_err(|e| format!("{}: {e}", dir.display()))?;
    let binary = std::env::current_exe().map_err(|e| format!("cannot find the shoal binary: {e}"))?;
    let placement = placement(up.nodes, up.dcs, up.racks);
    // Seeds: the first node of each data center.
    let mut seeds = Vec::new();
    for (i, (dc, _)) in placement.iter().enumerate() {
        if i == 0 || placement.get(i - 1).map(|p| p.0) != Some(*dc) {
            seeds.push(address(i + 1)?.to_string());
        }
    }
    let seeds = seeds.join(",");
    let mut security = Security { auth: up.auth, tls: up.tls, user_config: None };
    if up.tls {
        // A fresh cluster gets a fresh CA.
        let _ = std::fs::remove_dir_all(dir.join("tls"));
    }
    let mut nodes = Vec::with_capacity(up.nodes);
    for (i, (dc, rack)) in placement.iter().enumerate() {
        let index = i + 1;
        let addr = address(index)?;
        let home = dir.join(format!("node{index}"));
        let data_dir = home.join("data");
        let dc = format!("dc{dc}");
        let rack = format!("rack{rack}");
        let mut args: Vec<String> = vec![
            "--listen-address".into(),
            addr.to_string(),
            "--data-dir".into(),
            data_dir.to_string_lossy().into_owned(),
            "--dc".into(),
            dc.clone(),
            "--rack".into(),
            rack.clone(),
            "--seeds".into(),
            seeds.clone(),
            "--cluster-name".into(),
            up.cluster_name.clone(),
            "--native-port".into(),
            up.native_port.to_string(),
            "--admin-port".into(),
            up.admin_port.to_string(),
        ];
        if let Some(t) = up.num_tokens {
            args.extend(["--num-tokens".to_string(), t.to_string()]);
        }
        let mut server_args = up.server_args.clone();
        if up.auth || up.tls {
            if let Some(user) = take_config(&mut server_args) {
                security.user_config = Some(user.canonicalize().map_err(|e| format!("{}: {e}", user.display()))?);
            }
        }
        if let Some(config) = node_config(&dir, &up.cluster_name, &security, index, addr)? {
            args.extend(["--config".to_string(), config.to_string_lossy().into_owned()]);
        }
        args.extend(server_args);
        nodes.push(NodeState { index, address: addr, pid: None, dc, rack, data_dir, log: home.join("node.log"), args });
    }
    let mut state = ClusterState {
        cluster_name: up.cluster_name.clone(),
        binary,
        native_port: up.native_port,
        admin_port: up.admin_port,
        nodes,
        security,
    };
    save(&dir, &state)?;
    let timeout = Duration::from_secs(up.timeout);
    for i in 0..state.nodes.len() {
        let node = state.nodes[i].clone();
        let mut child = spawn(&state, &node)?;
        state.nodes[i].pid = Some(child.id());
        save(&dir, &state)?;
        wait_normal(&state, &state.nodes[i], &mut child, timeout)?;
        println!(
            "node {} ({}, {}/{}) is NORMAL, pid {}, log {}",
            node.index,
            node.address,
            node.dc,
            node.rack,
            child.id(),
            node.log.display()
        );
    }
    wait_all_up(&state, timeout)?;
    if up.auth {
        println!("logins required: the default superuser is cassandra / cassandra (cqlsh -u cassandra -p cassandra)");
    }
    if up.tls {
        let tls_dir = dir.join("tls");
        println!(
            "TLS: clients trust {} and may present {} (cqlsh --ssl with SSL_CERTFILE={})",
            tls_dir.join("ca.pem").display(),
            tls_dir.join("client.pem").display(),
            tls_dir.join("ca.pem").display()
        );
    }
    let contact: Vec<String> = state.nodes.iter().map(|n| n.address.to_string()).collect();
    println!("{}", contact.join(","));
    Ok(())
}

fn cmd_status(dir: &Path, json: bool) -> Result<(), String> {
    let state = load(dir)?;
    let running: Vec<bool> = state.nodes.iter().map(is_running).collect();
    // The admin view of the first running node.
    let mut observer = None;
    let mut view = Vec::new();
    for (node, up) in state.nodes.iter().zip(&running) {
        if !*up {
            continue;
        }
        if let Ok(status) = tool::get(&node.address.to_string(), state.admin_port, "/v1/status") {
            view = status_nodes(&status)
                .iter()
                .map(|n| {
                    (
                        n["address"].as_str().unwrap_or_default().to_string(),
                        n["state"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect();
            observer = Some(node.index);
            break;
        }
    }
    let state_of = |n: &NodeState| view.iter().find(|(a, _)| *a == n.address.to_string()).map(|(_, s)| s.clone());
    if json {
        let nodes: Vec<Json> = state
            .nodes
            .iter()
            .zip(&running)
            .map(|(n, up)| {
                serde_json::json!({
                    "index": n.index, "address": n.address.to_string(), "pid": n.pid, "running": up,
                    "dc": n.dc, "rack": n.rack, "state": state_of(n), "data_dir": n.data_dir, "log": n.log,
                })
            })
            .collect();
        let out = serde_json::json!({ "dir": dir, "observer": observer, "nodes": nodes });
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        return Ok(());
    }
    let header = match observer {
        Some(i) => format!("State (seen by node {i})"),
        None => "State".to_string(),
    };
    let mut rows = vec![vec![
        "Node".to_string(),
        "Address".to_string(),
        "PID".to_string(),
        "Running".to_string(),
        "DC".to_string(),
        "Rack".to_string(),
        header,
    ]];
    for (n, up) in state.nodes.iter().zip(&running) {
        rows.push(vec![
            n.index.to_string(),
            n.address.to_string(),
            n.pid.map(|p| p.to_string()).unwrap_or_else(|| "-".to_string()),
            if *up { "yes" } else { "no" }.to_string(),
            n.dc.clone(),
            n.rack.clone(),
            state_of(n).unwrap_or_else(|| "?".to_string()),
        ]);
    }
    for row in rows {
        println!("{:<5} {:<15} {:<8} {:<8} {:<6} {:<7} {}", row[0], row[1], row[2], row[3], row[4], row[5], row[6]);
    }
    Ok(())
}

/// How long a decommission may take (it streams the node's ranges away).
const DECOMMISSION_TIMEOUT: Duration = Duration::from_secs(6 * 3600);

fn cmd_stop(dir: &Path, index: usize, graceful: bool) -> Result<(), String> {
    let mut state = load(dir)?;
    let node = node_mut(&mut state, index)?;
    if !is_running(node) {
        println!("node {index} is not running");
        node.pid = None;
        return save(dir, &state);
    }
    if graceful {
        signal(node, libc::SIGTERM)?;
        if !wait_exit(node, STOP_TIMEOUT) {
            return Err(format!(
                "node {index} (pid {}) did not exit within {} s of SIGTERM; see {}",
                node.pid.unwrap_or_default(),
                STOP_TIMEOUT.as_secs(),
                node.log.display()
            ));
        }
    } else {
        signal(node, libc::SIGKILL)?;
        if !wait_exit(node, STOP_TIMEOUT) {
            return Err(format!(
                "node {index} (pid {}) survived SIGKILL for {} s",
                node.pid.unwrap_or_default(),
                STOP_TIMEOUT.as_secs()
            ));
        }
    }
    println!("node {index} ({}) stopped{}", node.address, if graceful { "" } else { " (SIGKILL)" });
    node.pid = None;
    save(dir, &state)
}

fn cmd_decommission(dir: &Path, index: usize) -> Result<(), String> {
    let state = load(dir)?;
    let node = state.nodes.iter().find(|n| n.index == index).ok_or(format!("no node {index}"))?;
    if !is_running(node) {
        return Err(format!("node {index} is not running: a node that is down is removed, not decommissioned"));
    }
    let reply =
        tool::request(&node.address.to_string(), state.admin_port, "POST", "/v1/decommission", DECOMMISSION_TIMEOUT)
            .map_err(|e| e.to_string())?;
    if reply.status != 200 {
        return Err(format!("node {index}: {}", reply.error()));
    }
    println!("node {index} ({}) left the ring: {}", node.address, reply.body);
    cmd_stop(dir, index, true)
}

fn cmd_remove(dir: &Path, index: usize) -> Result<(), String> {
    let state = load(dir)?;
    let node = state.nodes.iter().find(|n| n.index == index).ok_or(format!("no node {index}"))?;
    if is_running(node) {
        return Err(format!("node {index} is running: stop it first (a live node is decommissioned)"));
    }
    let coordinator =
        state.nodes.iter().find(|n| n.index != index && is_running(n)).ok_or("no running node to run removenode")?;
    let host = coordinator.address.to_string();
    let status = tool::get(&host, state.admin_port, "/v1/status")?;
    let address = node.address.to_string();
    let host_id = status_nodes(&status)
        .into_iter()
        .find(|n| text_of(&n["address"]) == address)
        .map(|n| text_of(&n["host_id"]))
        .ok_or(format!("node {index} ({address}) is not in the ring"))?;
    let path = format!("/v1/removenode?host_id={host_id}");
    let reply =
        tool::request(&host, state.admin_port, "POST", &path, DECOMMISSION_TIMEOUT).map_err(|e| e.to_string())?;
    if reply.status != 200 {
        return Err(format!("removenode of node {index}: {}", reply.error()));
    }
    println!("node {index} ({address}, host id {host_id}) removed: {}", reply.body);
    Ok(())
}

fn cmd_replace(dir: &Path, index: usize, new_address: Option<IpAddr>, timeout: Duration) -> Result<(), String> {
    let mut state = load(dir)?;
    let node = node_mut(&mut state, index)?;
    if is_running(node) {
        return Err(format!("node {index} is running: a live node is decommissioned, not replaced"));
    }
    let dead = node.address;
    // The replacement is a new machine: nothing of the old disk.
    if node.data_dir.exists() {
        std::fs::remove_dir_all(&node.data_dir)
            .map_err(|e| format!("cannot clear {}: {e}", node.data_dir.display()))?;
    }
    if let Some(addr) = new_address {
        node.address = addr;
        set_arg(&mut node.args, "--listen-address", addr.to_string());
    }
    let mut first_boot = node.clone();
    set_arg(&mut first_boot.args, "--replace-address", dead.to_string());
    let mut child = spawn(&state, &first_boot)?;
    node_mut(&mut state, index)?.pid = Some(child.id());
    save(dir, &state)?;
    wait_normal(&state, &first_boot, &mut child, timeout)?;
    println!(
        "node {index} ({}) replaced the dead node at {dead} and is NORMAL, pid {}",
        first_boot.address,
        child.id()
    );
    Ok(())
}

/// Replaces the value after `flag` in a server argument list (or appends it).
fn set_arg(args: &mut Vec<String>, flag: &str, value: String) {
    match args.iter().position(|a| a == flag) {
        Some(i) if i + 1 < args.len() => args[i + 1] = value,
        _ => args.extend([flag.to_string(), value]),
    }
}

fn cmd_start(dir: &Path, index: usize, new_address: Option<IpAddr>, timeout: Duration) -> Result<(), String> {
    let mut state = load(dir)?;
    if let Some(addr) = new_address {
        if let Some(other) = state.nodes.iter().find(|n| n.index != index && n.address == addr && is_running(n)) {
            return Err(format!("node {} is running on {addr}", other.index));
        }
    }
    let node = node_mut(&mut state, index)?;
    if is_running(node) {
        return Err(format!("node {index} is already running (pid {})", node.pid.unwrap_or_default()));
    }
    if let Some(addr) = new_address {
        node.address = addr;
        set_arg(&mut node.args, "--listen-address", addr.to_string());
    }
    let node = node.clone();
    let mut child = spawn(&state, &node)?;
    node_mut(&mut state, index)?.pid = Some(child.id());
    save(dir, &state)?;
    wait_normal(&state, &node, &mut child, timeout)?;
    println!("node {index} ({}) is NORMAL, pid {}", node.address, child.id());
    Ok(())
}

fn cmd_add(dir: &Path, dc: Option<String>, rack: Option<String>, timeout: Duration) -> Result<(), String> {
    let dir = &dir.canonicalize().map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut state = load(dir)?;
    let last = state.nodes.last().cloned().ok_or("the cluster has no nodes")?;
    let index = state.nodes.iter().map(|n| n.index).max().unwrap_or(0) + 1;
    let addr = address(index)?;
    let home = dir.join(format!("node{index}"));
    let data_dir = home.join("data");
    let (dc, rack) = (dc.unwrap_or(last.dc.clone()), rack.unwrap_or(last.rack.clone()));
    let mut args = last.args.clone();
    set_arg(&mut args, "--listen-address", addr.to_string());
    set_arg(&mut args, "--data-dir", data_dir.to_string_lossy().into_owned());
    set_arg(&mut args, "--dc", dc.clone());
    set_arg(&mut args, "--rack", rack.clone());
    // Its own keystore (its address in its certificate).
    if let Some(config) = node_config(dir, &state.cluster_name, &state.security, index, addr)? {
        set_arg(&mut args, "--config", config.to_string_lossy().into_owned());
    }
    let node = NodeState { index, address: addr, pid: None, dc, rack, data_dir, log: home.join("node.log"), args };
    state.nodes.push(node.clone());
    let mut child = spawn(&state, &node)?;
    node_mut(&mut state, index)?.pid = Some(child.id());
    save(dir, &state)?;
    wait_normal(&state, &node, &mut child, timeout)?;
    println!(
        "node {index} ({}, {}/{}) is NORMAL, pid {}, log {}",
        addr,
        node.dc,
        node.rack,
        child.id(),
        node.log.display()
    );
    Ok(())
}

fn cmd_down(dir: &Path, clear: bool) -> Result<(), String> {
    let mut state = match load(dir) {
        Ok(s) => s,
        Err(e) if !state_path(dir).exists() => {
            if clear && dir.exists() {
                return Err(format!("{e}; not removing a directory without {STATE_FILE}"));
            }
            println!("no cluster in {}", dir.display());
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    for node in state.nodes.iter().filter(|n| is_running(n)) {
        signal(node, libc::SIGTERM)?;
    }
    let deadline = Instant::now() + STOP_TIMEOUT;
    for node in &state.nodes {
        let left = deadline.saturating_duration_since(Instant::now());
        if !wait_exit(node, left) {
            eprintln!(
                "node {} (pid {}) did not exit within {} s of SIGTERM: SIGKILL",
                node.index,
                node.pid.unwrap_or_default(),
                STOP_TIMEOUT.as_secs()
            );
            signal(node, libc::SIGKILL)?;
            if !wait_exit(node, STOP_TIMEOUT) {
                return Err(format!("node {} (pid {}) survived SIGKILL", node.index, node.pid.unwrap_or_default()));
            }
        }
    }
    for node in &mut state.nodes {
        node.pid = None;
    }
    save(dir, &state)?;
    println!("stopped {} nodes", state.nodes.len());
    if clear {
        std::fs::remove_dir_all(dir).map_err(|e| format!("cannot remove {}: {e}", dir.display()))?;
        println!("removed {}", dir.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_split_evenly_into_dcs_with_round_robin_racks() {
        assert_eq!(placement(6, 2, 1), vec![(1, 1), (1, 1), (1, 1), (2, 1), (2, 1), (2, 1)]);
        assert_eq!(placement(5, 2, 2), vec![(1, 1), (1, 2), (1, 1), (2, 1), (2, 2)]);
        assert_eq!(placement(3, 1, 3), vec![(1, 1), (1, 2), (1, 3)]);
    }

    #[test]
    fn addresses_are_loopback_by_index() {
        assert_eq!(address(1).unwrap().to_string(), "127.0.0.1");
        assert_eq!(address(12).unwrap().to_string(), "127.0.0.12");
        assert!(address(0).is_err());
        assert!(address(255).is_err());
    }

    #[test]
    fn set_arg_replaces_or_appends() {
        let mut a = vec!["--listen-address".to_string(), "127.0.0.1".to_string()];
        set_arg(&mut a, "--listen-address", "127.0.0.9".into());
        assert_eq!(a, ["--listen-address", "127.0.0.9"]);
        set_arg(&mut a, "--dc", "dc1".into());
        assert_eq!(a, ["--listen-address", "127.0.0.9", "--dc", "dc1"]);
    }
}
