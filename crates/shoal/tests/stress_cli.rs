//! `shoal stress` end to end against a real `shoal server` process on
//! loopback: a write run, a verify run that must find every value, a verify
//! with the wrong seed that must fail, the legacy syntax, the output files,
//! and the exit codes scripts rely on (0 ok, 1 failed run, 2 bad command line).

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A `shoal server` child process, killed (by its PID) when dropped.
struct Node {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Node {
    fn start() -> Node {
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("free port");
        let dir = tempfile::tempdir().expect("temp dir");
        let child = Command::new(env!("CARGO_BIN_EXE_shoal"))
            .args(["server", "--listen-address", "127.0.0.1", "--native-port", &port.to_string(), "--data-dir"])
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start shoal");
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(addr).is_err() {
            assert!(Instant::now() < deadline, "shoal did not start listening on {addr}");
            std::thread::sleep(Duration::from_millis(50));
        }
        Node { child, port, _dir: dir }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn stress(args: &[&str]) -> Output {
    let output = Command::new(env!("CARGO_BIN_EXE_shoal")).arg("stress").args(args).output().expect("run shoal stress");
    eprintln!(
        "$ shoal stress {}\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("valid JSON")
}

#[test]
fn write_then_verify_against_a_real_node() {
    let node = Node::start();
    let out = tempfile::tempdir().expect("temp dir");
    let port = format!("native={}", node.port);
    let pid = node.child.id().to_string();
    let file = |name: &str| out.path().join(name).display().to_string();

    let write = stress(&[
        "write", "n=2000", "-rate", "threads=16", "-node", "127.0.0.1", "-port", &port, "--json", &file("write.json"), "--csv",
        &file("write.csv"), "--hdr-log", &file("write.hlog"), "--plot", &file("write.png"), "--server-pid", &pid,
        "--cost-per-hour", "1.0",
    ]);
    assert_eq!(write.status.code(), Some(0), "write run");
    let stdout = String::from_utf8_lossy(&write.stdout);
    assert!(stdout.lines().any(|l| l.starts_with("total,interval_op_rate,interval_key_rate,avg_latency,elapsed_time,")), "{stdout}");
    let report = json(&out.path().join("write.json"));
    let summary = &report["summary"];
    assert_eq!(summary["ops"], 2000);
    assert_eq!(summary["errors"], 0);
    assert_eq!(summary["writes"], 2000);
    assert!(summary["op_rate"].as_f64().unwrap_or(0.0) > 0.0);
    assert!(summary["latency"]["p99_ms"].as_f64().unwrap_or(0.0) > 0.0);
    assert!(summary["server_cpu_us_per_op"].as_f64().is_some(), "server CPU sampled from /proc");
    assert!(summary["dollars_per_million_ops"].as_f64().is_some());
    assert!(!report["intervals"].as_array().expect("intervals").is_empty());
    let csv = std::fs::read_to_string(out.path().join("write.csv")).expect("csv");
    let last = csv.lines().last().expect("an interval line");
    assert_eq!(last.split(',').count(), 12, "{last}");
    assert_eq!(last.split(',').next(), Some("2000"), "{last}");
    assert!(std::fs::read_to_string(out.path().join("write.hlog")).expect("hdr log").contains("Tag=latency,"));
    assert!(std::fs::read(out.path().join("write.png")).expect("png").starts_with(b"\x89PNG"));

    let verify = stress(&["verify", "n=2000", "-port", &port, "--json", &file("verify.json")]);
    assert_eq!(verify.status.code(), Some(0), "verify finds every value");
    let summary = json(&out.path().join("verify.json"))["summary"].clone();
    assert_eq!((summary["ops"].as_u64(), summary["missing"].as_u64(), summary["mismatched"].as_u64()), (Some(2000), Some(0), Some(0)));

    // Other values (another seed) and keys never written are reported, with exit code 1.
    let wrong = stress(&["verify", "n=100", "seed=2", "-port", &port]);
    assert_eq!(wrong.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&wrong.stdout).contains("0 missing, 100 with wrong values"));
    let missing = stress(&["verify", "n=100", "-pop", "seq=1951..2050", "-port", &port]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stdout).contains("50 missing, 0 with wrong values"));

    // A mixed open-loop run reports service time next to the corrected latency.
    let mixed = stress(&["mixed", "read=9", "write=1", "duration=1s", "no-warmup", "-pop", "uniform(1..2000)", "-rate", "fixed=500/s", "-port", &port, "--json", &file("mixed.json")]);
    assert_eq!(mixed.status.code(), Some(0));
    let summary = json(&out.path().join("mixed.json"))["summary"].clone();
    assert!(summary["reads"].as_u64().unwrap_or(0) > summary["writes"].as_u64().unwrap_or(0));
    assert_eq!(summary["missing"], 0);
    assert!(summary["service_time"]["p50_ms"].as_f64().unwrap_or(0.0) > 0.0);

    // The legacy syntax, with its one line saying how it was read.
    let host = format!("127.0.0.1:{}", node.port);
    let legacy = stress(&["-d", &host, "-n", "300", "-t", "4", "-c", "3", "-p", "7102", "-o", "INSERT"]);
    assert_eq!(legacy.status.code(), Some(0));
    let first = String::from_utf8_lossy(&legacy.stdout).lines().next().unwrap_or_default().to_string();
    assert_eq!(
        first,
        "legacy syntax: write 300 keys, 3 columns, SimpleStrategy RF 1, 4 threads, retries 10; -p 7102 is a Thrift port; using the native port 9042"
    );

    // Without --keep-going the first error stops the run; with it errors are counted.
    let fail = stress(&["write", "n=50", "cl=THREE", "no-warmup", "-port", &port]);
    assert_eq!(fail.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&fail.stderr).contains("stopped at the first error"));
    let counted = stress(&["write", "n=50", "cl=THREE", "no-warmup", "keep-going", "-port", &port, "--json", &file("errors.json")]);
    assert_eq!(json(&out.path().join("errors.json"))["summary"]["errors"], 50);
    assert_eq!(counted.status.code(), Some(1), "every operation failed");
}

#[test]
fn bad_command_lines_exit_2_with_the_valid_options() {
    let bad = stress(&["write", "n=10", "-bogus"]);
    assert_eq!(bad.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(stderr.contains("unknown option `-bogus`"), "{stderr}");
    assert!(stderr.contains("-rate threads=N"), "lists the valid options: {stderr}");
    assert_eq!(stress(&["-n", "10", "-z"]).status.code(), Some(2));
    assert_eq!(stress(&["help"]).status.code(), Some(0));
}
