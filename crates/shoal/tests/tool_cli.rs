//! `shoal tool` and `shoal cluster` end to end against real `shoal server`
//! processes on loopback: every tool command's JSON and table against a node
//! with data (getendpoints checked against `ring::token_of` and the server's
//! own `token()`), the error for an unreachable node, malformed HTTP on the
//! admin port (answered 400, the node stays up), and the launcher's
//! up/status/stop/start/down cycle with one node.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use serde_json::Value as Json;

mod common;
use common::{free_port, Node};

fn shoal(args: &[&str]) -> Output {
    let output = Command::new(env!("CARGO_BIN_EXE_shoal")).args(args).output().expect("run shoal");
    eprintln!(
        "$ shoal {}\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `shoal tool -p PORT ARGS... --json`, which must succeed.
fn tool_json(node: &Node, args: &[&str]) -> Json {
    let port = node.admin_port.to_string();
    let mut all = vec!["tool", "-p", &port];
    all.extend_from_slice(args);
    all.push("--json");
    let out = shoal(&all);
    assert_eq!(out.status.code(), Some(0), "shoal {all:?}");
    serde_json::from_slice(&out.stdout).expect("JSON output")
}

fn tool(node: &Node, args: &[&str]) -> Output {
    let port = node.admin_port.to_string();
    let mut all = vec!["tool", "-p", &port];
    all.extend_from_slice(args);
    shoal(&all)
}

async fn cql(session: &Session, text: &str) {
    session.query_unpaged(text, &[]).await.unwrap_or_else(|e| panic!("{text}: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_commands_against_a_real_node() {
    let node = Node::start();
    let session = SessionBuilder::new().known_node_addr(node.addr).build().await.expect("driver connects");
    cql(&session, "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}").await;
    cql(&session, "CREATE TABLE ks.t (k int PRIMARY KEY, v text)").await;
    cql(&session, "CREATE TABLE ks.c (a text, b int, c int, v text, PRIMARY KEY ((a, b), c))").await;
    for k in 0..500 {
        cql(&session, &format!("INSERT INTO ks.t (k, v) VALUES ({k}, '{}')", "x".repeat(200))).await;
    }
    cql(&session, "INSERT INTO ks.c (a, b, c, v) VALUES ('x:y', -3, 1, 'v')").await;

    // The commands run on blocking threads: the test's runtime keeps the driver alive.
    let status = tokio::task::block_in_place(|| tool_json(&node, &["status"]));
    assert_eq!(status["cluster_name"], "Test Cluster");
    assert_eq!(status["owns_effective"], false);
    let dcs = status["datacenters"].as_array().expect("datacenters");
    assert_eq!(dcs.len(), 1);
    assert_eq!(dcs[0]["name"], "datacenter1");
    let nodes = dcs[0]["nodes"].as_array().expect("nodes");
    assert_eq!(nodes.len(), 1);
    let me = &nodes[0];
    assert_eq!(me["state"], "UN");
    assert_eq!(me["status"], "NORMAL");
    assert_eq!(me["address"], "127.0.0.1");
    assert_eq!(me["tokens"], 16);
    assert_eq!(me["owns"], 1.0);
    assert_eq!(me["rack"], "rack1");
    assert_eq!(me["native_address"], format!("127.0.0.1:{}", node.port));
    assert_eq!(me["host_id"], status["local_host_id"]);
    let host_id = me["host_id"].as_str().expect("host id").to_string();

    let table = tokio::task::block_in_place(|| tool(&node, &["status", "ks"]));
    assert_eq!(table.status.code(), Some(0));
    let text = stdout(&table);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[..4],
        [
            "Datacenter: datacenter1",
            "=======================",
            "Status=Up/Down",
            "|/ State=Normal/Leaving/Joining/Moving"
        ]
    );
    assert!(lines[4].starts_with("--  Address    Load") && lines[4].contains("Owns (effective)  Host ID"), "{text}");
    assert!(
        lines[5].starts_with("UN  127.0.0.1  ") && lines[5].contains(&host_id) && lines[5].contains("100.0%"),
        "{text}"
    );

    let missing = tokio::task::block_in_place(|| tool(&node, &["status", "nope"]));
    assert_eq!(missing.status.code(), Some(1));
    assert!(stderr(&missing).contains("error: The keyspace nope, does not exist"), "{}", stderr(&missing));

    // info
    let info = tokio::task::block_in_place(|| tool_json(&node, &["info"]));
    assert_eq!(info["host_id"], host_id.as_str());
    assert_eq!(info["address"], "127.0.0.1");
    assert_eq!(info["data_center"], "datacenter1");
    assert_eq!(info["rack"], "rack1");
    assert_eq!(info["pid"], node.child.id());
    assert_eq!(info["tokens"].as_array().map(Vec::len), Some(16));
    assert!(info["generation"].as_u64().unwrap_or(0) > 1_600_000_000, "{info}");
    let text = stdout(&tokio::task::block_in_place(|| tool(&node, &["info"])));
    assert!(text.lines().any(|l| l.starts_with("ID") && l.ends_with(&host_id)), "{text}");
    assert!(text.contains("(invoke with -T/--tokens to see all 16 tokens)"), "{text}");

    // describecluster: the schema version is the one drivers read from system.local.
    let d = tokio::task::block_in_place(|| tool_json(&node, &["describecluster"]));
    assert_eq!(d["name"], "Test Cluster");
    assert_eq!(d["partitioner"], "org.apache.cassandra.dht.Murmur3Partitioner");
    assert!(d["snitch"].as_str().unwrap_or_default().starts_with("org.apache.cassandra.locator."), "{d}");
    let versions = d["schema_versions"].as_object().expect("schema versions");
    assert_eq!(versions.len(), 1, "{d}");
    let (version, addrs) = versions.iter().next().expect("one version");
    assert_eq!(addrs, &serde_json::json!(["127.0.0.1"]));
    let local = session
        .query_unpaged("SELECT schema_version FROM system.local", &[])
        .await
        .expect("system.local")
        .into_rows_result()
        .expect("rows");
    let (driver_version,): (uuid::Uuid,) = local.single_row().expect("one row");
    assert_eq!(version, &driver_version.to_string());
    let text = stdout(&tokio::task::block_in_place(|| tool(&node, &["describecluster"])));
    assert!(text.starts_with("Cluster Information:\n\tName: Test Cluster\n"), "{text}");

    // getendpoints: Cassandra's token of the serialized key, and the one replica.
    let e = tokio::task::block_in_place(|| tool_json(&node, &["getendpoints", "ks", "t", "42"]));
    assert_eq!(e["endpoints"], serde_json::json!(["127.0.0.1"]));
    let expected = ring::token_of(&42i32.to_be_bytes());
    assert_eq!(e["token"], expected.to_string());
    let rows = session
        .query_unpaged("SELECT token(k) FROM ks.t WHERE k = 42", &[])
        .await
        .expect("token()")
        .into_rows_result()
        .expect("rows");
    let (server_token,): (i64,) = rows.single_row().expect("one row");
    assert_eq!(server_token, expected);
    let text = stdout(&tokio::task::block_in_place(|| tool(&node, &["getendpoints", "ks", "t", "42"])));
    assert_eq!(text, "127.0.0.1\n");
    // A compound key `a:b` (an escaped colon inside a component) and a negative number.
    let e = tokio::task::block_in_place(|| tool_json(&node, &["getendpoints", "ks", "c", r"x\:y:-3"]));
    let compound = ring::tokens::compound_key(&[b"x:y", &(-3i32).to_be_bytes()]);
    assert_eq!(e["token"], ring::token_of(&compound).to_string());
    let rows = session
        .query_unpaged("SELECT token(a, b) FROM ks.c WHERE a = 'x:y' AND b = -3", &[])
        .await
        .expect("token()")
        .into_rows_result()
        .expect("rows");
    let (server_token,): (i64,) = rows.single_row().expect("one row");
    assert_eq!(e["token"], server_token.to_string());
    for (args, message) in [
        (vec!["getendpoints", "nope", "t", "1"], "error: Unknown keyspace 'nope'"),
        (vec!["getendpoints", "ks", "nope", "1"], "error: Unknown table 'nope' in keyspace 'ks'"),
        (vec!["getendpoints", "ks", "t", "abc"], "error: Invalid value 'abc' for \"k\" of type int"),
        (vec!["getendpoints", "ks", "c", "x"], "components (a, b)"),
    ] {
        let out = tokio::task::block_in_place(|| tool(&node, &args));
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(stderr(&out).contains(message), "{args:?}: {}", stderr(&out));
    }

    // ring: one entry per token, sorted.
    let r = tokio::task::block_in_place(|| tool_json(&node, &["ring"]));
    let tokens: Vec<i64> = r["ring"]
        .as_array()
        .expect("ring")
        .iter()
        .map(|e| e["token"].as_str().and_then(|t| t.parse().ok()).expect("token"))
        .collect();
    assert_eq!(tokens.len(), 16);
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");

    // flush and compact: silent on success, like nodetool; the load shows on disk.
    let out = tokio::task::block_in_place(|| tool(&node, &["flush", "ks", "t"]));
    assert_eq!((out.status.code(), stdout(&out).as_str()), (Some(0), ""));
    let f = tokio::task::block_in_place(|| tool_json(&node, &["flush", "ks"]));
    assert_eq!(f["tables"], serde_json::json!(["ks.c", "ks.t"]));
    let c = tokio::task::block_in_place(|| tool_json(&node, &["compact"]));
    assert_eq!(c["operation"], "compact");
    assert_eq!(tokio::task::block_in_place(|| tool(&node, &["compact", "ks", "c"])).status.code(), Some(0));
    let info = tokio::task::block_in_place(|| tool_json(&node, &["info"]));
    assert!(info["load_bytes"].as_u64().unwrap_or(0) > 10_000, "{info}");
    for (args, message) in [
        (vec!["flush", "nope"], "error: Keyspace [nope] does not exist."),
        (vec!["compact", "ks", "nope"], "error: Unknown keyspace/cf pair (ks.nope)"),
    ] {
        let out = tokio::task::block_in_place(|| tool(&node, &args));
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(stderr(&out).contains(message), "{args:?}: {}", stderr(&out));
    }

    // The data is still there after flush and compaction.
    let rows = session
        .query_unpaged("SELECT v FROM ks.t WHERE k = 7", &[])
        .await
        .expect("read")
        .into_rows_result()
        .expect("rows");
    let (v,): (String,) = rows.single_row().expect("one row");
    assert_eq!(v.len(), 200);

    let hints = tokio::task::block_in_place(|| tool_json(&node, &["listpendinghints"]));
    assert_eq!(hints["total_bytes"], 0);
    let text = stdout(&tokio::task::block_in_place(|| tool(&node, &["listpendinghints"])));
    assert_eq!(text, "This node does not have any pending hints\n");
    // nodetool users put the connection options after the command too.
    let port = node.admin_port.to_string();
    let after = tokio::task::block_in_place(|| shoal(&["tool", "status", "-h", "127.0.0.1", "-p", &port, "--json"]));
    assert_eq!(after.status.code(), Some(0), "{}", stderr(&after));
    let after: Json = serde_json::from_slice(&after.stdout).expect("JSON output");
    assert_eq!(after["cluster_name"], "Test Cluster");
}

#[test]
fn an_unreachable_node_is_a_clear_error() {
    let port = free_port().to_string();
    let out = shoal(&["tool", "-p", &port, "status"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.starts_with(&format!("shoal tool: Failed to connect to '127.0.0.1:{port}' - ")), "{err}");
    assert!(stdout(&out).is_empty());
}

/// Sends raw bytes to the admin port and returns the whole answer.
fn raw_request(port: u16, bytes: &[u8]) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect admin port");
    s.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
    let _ = s.write_all(bytes);
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

#[test]
fn malformed_http_gets_400_and_the_node_stays_up() {
    let node = Node::start();
    let p = node.admin_port;
    for bad in [
        &b"GARBAGE\r\n\r\n"[..],
        b"GET /v1/info\r\n\r\n",
        b"GET /v1/info HTTP/1.1\r\nno-colon\r\n\r\n",
        b"GET /v1/info HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        b"GET /v1/getendpoints?keyspace=%zz HTTP/1.1\r\n\r\n",
        b"\xff\xfe\xfd\r\n\r\n",
        b"GET /v1/info HTTP/1.1\r\nHost: x", // cut short
    ] {
        let answer = raw_request(p, bad);
        assert!(answer.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{:?} -> {answer}", String::from_utf8_lossy(bad));
        assert!(answer.contains("Connection: close\r\n"), "{answer}");
        let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
        let json: Json = serde_json::from_str(body).unwrap_or_else(|e| panic!("{answer}: {e}"));
        assert!(json["error"].is_string(), "{answer}");
    }
    let mut huge = b"GET /v1/info HTTP/1.1\r\n".to_vec();
    huge.extend(std::iter::repeat_n(b'a', 20_000));
    assert!(raw_request(p, &huge).starts_with("HTTP/1.1 431 "));
    assert!(raw_request(p, b"GET /v1/nothing HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404 "));
    assert!(raw_request(p, b"POST /v1/info HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405 "));
    assert!(raw_request(p, b"GET /v1/flush HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405 "));
    assert!(raw_request(p, b"GET /v1/getendpoints?keyspace=system HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 400 "));
    // A connection that says nothing at all.
    drop(TcpStream::connect(("127.0.0.1", p)).expect("connect"));
    // The node still answers, on both ports.
    let answer = raw_request(p, b"GET /v1/info HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    let info = tool_json(&node, &["info"]);
    assert_eq!(info["pid"], node.child.id());
    TcpStream::connect(node.addr).expect("CQL port still accepts");
}

/// Stops whatever the launcher left running if a test fails midway.
struct ClusterDir(PathBuf);

impl Drop for ClusterDir {
    fn drop(&mut self) {
        let dir = self.0.display().to_string();
        let _ = Command::new(env!("CARGO_BIN_EXE_shoal")).args(["cluster", "down", "--dir", &dir]).output();
    }
}

fn nodes_json(dir: &Path) -> Json {
    serde_json::from_str(&std::fs::read_to_string(dir.join("nodes.json")).expect("nodes.json")).expect("JSON")
}

/// Whether a pid is a live (not zombie) process.
fn alive(pid: u64) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            !matches!(stat.rsplit_once(')').and_then(|(_, r)| r.trim_start().chars().next()), Some('Z') | Some('X'))
        }
        Err(_) => false,
    }
}

#[test]
fn launcher_up_status_stop_start_down_with_one_node() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path().join("cluster");
    let _guard = ClusterDir(dir.clone());
    let d = dir.display().to_string();
    // Free ports: other nodes may run on 127.0.0.1 with the default ones.
    let native = free_port().to_string();
    let admin = free_port().to_string();
    let config = tmp.path().join("shoal.yaml");
    std::fs::write(&config, format!("storage_port: {}\n", free_port())).expect("config");
    let config = config.display().to_string();

    let up = shoal(&[
        "cluster",
        "up",
        "-n",
        "1",
        "--dir",
        &d,
        "--native-port",
        &native,
        "--admin-port",
        &admin,
        "--",
        "--config",
        &config,
    ]);
    assert_eq!(up.status.code(), Some(0));
    assert_eq!(stdout(&up).lines().last(), Some("127.0.0.1"));
    let state = nodes_json(&dir);
    let node = &state["nodes"][0];
    assert_eq!(
        (node["index"].as_u64(), node["address"].as_str(), node["dc"].as_str(), node["rack"].as_str()),
        (Some(1), Some("127.0.0.1"), Some("dc1"), Some("rack1"))
    );
    let pid = node["pid"].as_u64().expect("pid");
    assert!(alive(pid));
    assert!(dir.join("node1/data").is_dir() && dir.join("node1/node.log").is_file());
    let args: Vec<&str> = node["args"].as_array().expect("args").iter().filter_map(Json::as_str).collect();
    for pair in [["--dc", "dc1"], ["--rack", "rack1"], ["--seeds", "127.0.0.1"], ["--admin-port", admin.as_str()]] {
        assert!(args.windows(2).any(|w| w == pair), "{args:?} lacks {pair:?}");
    }

    // The node answers `shoal tool` on its admin port.
    let out = shoal(&["tool", "-p", &admin, "info", "--json"]);
    let info: Json = serde_json::from_slice(&out.stdout).expect("info JSON");
    assert_eq!(info["pid"].as_u64(), Some(pid));
    assert_eq!(info["data_center"], "dc1");

    // A second `up` on a running cluster is refused.
    let again = shoal(&["cluster", "up", "-n", "1", "--dir", &d, "--native-port", &native, "--admin-port", &admin]);
    assert_eq!(again.status.code(), Some(1));
    assert!(stderr(&again).contains("is running"), "{}", stderr(&again));

    let status = shoal(&["cluster", "status", "--dir", &d, "--json"]);
    let status: Json = serde_json::from_slice(&status.stdout).expect("status JSON");
    assert_eq!(status["nodes"][0]["running"], true);
    assert_eq!(status["nodes"][0]["state"], "UN");
    let table = stdout(&shoal(&["cluster", "status", "--dir", &d]));
    assert!(
        table
            .lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("1 ") && l.contains("127.0.0.1") && l.contains("yes") && l.ends_with("UN")),
        "{table}"
    );

    // stop (SIGKILL), start again on the same data: same host id.
    let host_id = info["host_id"].clone();
    assert_eq!(shoal(&["cluster", "stop", "1", "--dir", &d]).status.code(), Some(0));
    assert!(!alive(pid));
    assert!(nodes_json(&dir)["nodes"][0]["pid"].is_null());
    let status: Json =
        serde_json::from_slice(&shoal(&["cluster", "status", "--dir", &d, "--json"]).stdout).expect("status JSON");
    assert_eq!(status["nodes"][0]["running"], false);
    assert_eq!(shoal(&["cluster", "start", "1", "--dir", &d]).status.code(), Some(0));
    let pid2 = nodes_json(&dir)["nodes"][0]["pid"].as_u64().expect("new pid");
    assert_ne!(pid, pid2);
    assert!(alive(pid2));
    let info: Json =
        serde_json::from_slice(&shoal(&["tool", "-p", &admin, "info", "--json"]).stdout).expect("info JSON");
    assert_eq!(info["host_id"], host_id);
    assert_eq!(shoal(&["cluster", "start", "1", "--dir", &d]).status.code(), Some(1), "already running");

    // A graceful stop, then down --clear.
    assert_eq!(shoal(&["cluster", "stop", "1", "--graceful", "--dir", &d]).status.code(), Some(0));
    assert!(!alive(pid2));
    let log = std::fs::read_to_string(dir.join("node1/node.log")).expect("log");
    assert!(log.contains("stopped cleanly"), "{log}");
    assert_eq!(shoal(&["cluster", "start", "1", "--dir", &d]).status.code(), Some(0));
    let pid3 = nodes_json(&dir)["nodes"][0]["pid"].as_u64().expect("pid");
    let down = shoal(&["cluster", "down", "--dir", &d, "--clear"]);
    assert_eq!(down.status.code(), Some(0));
    assert!(!alive(pid3));
    assert!(!dir.exists());
}
