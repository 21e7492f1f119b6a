//! `shoal stress` end to end against a real `shoal server` process on
//! loopback: a write run, a verify run that must find every value, a verify
//! with the wrong seed that must fail, the legacy syntax, the output files,
//! and the exit codes scripts rely on (0 ok, 1 failed run, 2 bad command line);
//! two concurrent client processes merged into one report and compared; a run
//! whose server is killed in the middle, with and without `--keep-going`.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

mod common;
use common::Node;

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
        "write",
        "n=2000",
        "-rate",
        "threads=16",
        "-node",
        "127.0.0.1",
        "-port",
        &port,
        "--json",
        &file("write.json"),
        "--csv",
        &file("write.csv"),
        "--hdr-log",
        &file("write.hlog"),
        "--plot",
        &file("write.svg"),
        "--server-pid",
        &pid,
        "--cost-per-hour",
        "1.0",
    ]);
    assert_eq!(write.status.code(), Some(0), "write run");
    let stdout = String::from_utf8_lossy(&write.stdout);
    assert!(
        stdout.lines().any(|l| l.starts_with("total,interval_op_rate,interval_key_rate,avg_latency,elapsed_time,")),
        "{stdout}"
    );
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
    let svg = std::fs::read_to_string(out.path().join("write.svg")).expect("svg");
    assert!(svg.starts_with("<svg") && svg.contains("Throughput") && svg.contains("p99.9"), "{svg:.300}");

    // The same chart's spec, drawn by `shoal stress plot` (bench/compare's path), as HTML.
    let spec = r##"{"title": "two systems", "x_label": "s", "panels": [{"title": "latency", "log_y": true,
        "series": [{"name": "shoal", "color": "#1f77b4", "points": [[0, 0.2], [1, 0.3]]},
                   {"name": "cassandra", "points": [[0, 3.0], [1, 180.0]]}]}]}"##;
    std::fs::write(out.path().join("spec.json"), spec).expect("spec");
    let plot = stress(&["plot", &file("spec.json"), &file("spec.html")]);
    assert_eq!(plot.status.code(), Some(0), "{}", String::from_utf8_lossy(&plot.stderr));
    let html = std::fs::read_to_string(out.path().join("spec.html")).expect("html");
    assert!(html.starts_with("<!DOCTYPE html>") && html.contains("cassandra"), "{html:.300}");
    let bad = stress(&["plot", &file("spec.json"), &file("spec.png")]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains(".svg or .html"));
    assert_eq!(stress(&["plot", &file("spec.json")]).status.code(), Some(2), "usage");

    let verify = stress(&["verify", "n=2000", "-port", &port, "--json", &file("verify.json")]);
    assert_eq!(verify.status.code(), Some(0), "verify finds every value");
    let summary = json(&out.path().join("verify.json"))["summary"].clone();
    assert_eq!(
        (summary["ops"].as_u64(), summary["missing"].as_u64(), summary["mismatched"].as_u64()),
        (Some(2000), Some(0), Some(0))
    );

    // Other values (another seed) and keys never written are reported, with exit code 1.
    let wrong = stress(&["verify", "n=100", "seed=2", "-port", &port]);
    assert_eq!(wrong.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&wrong.stdout).contains("0 missing, 100 with wrong values"));
    let missing = stress(&["verify", "n=100", "-pop", "seq=1951..2050", "-port", &port]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stdout).contains("50 missing, 0 with wrong values"));

    // A mixed open-loop run reports service time next to the corrected latency.
    let mixed = stress(&[
        "mixed",
        "read=9",
        "write=1",
        "duration=1s",
        "no-warmup",
        "-pop",
        "uniform(1..2000)",
        "-rate",
        "fixed=500/s",
        "-port",
        &port,
        "--json",
        &file("mixed.json"),
    ]);
    assert_eq!(mixed.status.code(), Some(0));
    let summary = json(&out.path().join("mixed.json"))["summary"].clone();
    assert!(summary["reads"].as_u64().unwrap_or(0) > summary["writes"].as_u64().unwrap_or(0));
    assert_eq!(summary["missing"], 0);
    assert!(summary["service_time"]["p50_ms"].as_f64().unwrap_or(0.0) > 0.0);
    // Per operation type: separate histograms and lines for reads and writes.
    let (reads, writes) =
        (summary["read"]["ops"].as_u64().expect("read ops"), summary["write"]["ops"].as_u64().expect("write ops"));
    assert_eq!(Some(reads + writes), summary["ops"].as_u64());
    assert_eq!(Some(reads), summary["reads"].as_u64());
    assert!(
        summary["read"]["latency_hdr"].is_string() && summary["write"]["service_hdr"].is_string(),
        "fixed rate: both histograms"
    );
    let text = String::from_utf8_lossy(&mixed.stdout);
    assert!(text.contains("Read latency") && text.contains("Write latency"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.ends_with(",read_op_rate,read_mean_ms,read_p99_ms,write_op_rate,write_mean_ms,write_p99_ms")),
        "{text}"
    );

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
    let counted = stress(&[
        "write",
        "n=50",
        "cl=THREE",
        "no-warmup",
        "keep-going",
        "-port",
        &port,
        "--json",
        &file("errors.json"),
    ]);
    let summary = json(&out.path().join("errors.json"))["summary"].clone();
    // Each operation had cassandra-stress's ten tries: the first and 9 retries.
    assert_eq!((summary["errors"].as_u64(), summary["retries"].as_u64()), (Some(50), Some(450)));
    assert_eq!(counted.status.code(), Some(1), "every operation failed");
    let once = stress(&[
        "write",
        "n=50",
        "cl=THREE",
        "no-warmup",
        "-errors",
        "ignore",
        "retries=0",
        "-port",
        &port,
        "--json",
        &file("once.json"),
    ]);
    assert_eq!(once.status.code(), Some(1));
    let summary = json(&out.path().join("once.json"))["summary"].clone();
    assert_eq!((summary["errors"].as_u64(), summary["retries"].as_u64()), (Some(50), Some(0)));
}

/// `-mode simplenative`: the stress tool's own client writes what the driver then
/// verifies, verifies what it wrote, sees wrong values, runs a mixed workload, and
/// reports a server error with its protocol code and message.
#[test]
fn simplenative_client_against_a_real_node() {
    let node = Node::start();
    let out = tempfile::tempdir().expect("temp dir");
    let port = format!("native={}", node.port);
    let file = |name: &str| out.path().join(name).display().to_string();
    let sn = ["-mode", "simplenative"];

    let write = stress(
        &[&["write", "n=3000", "-rate", "threads=32", "-port", &port, "--json", &file("w.json")][..], &sn].concat(),
    );
    assert_eq!(write.status.code(), Some(0), "write run");
    let summary = json(&out.path().join("w.json"))["summary"].clone();
    assert_eq!((summary["ops"].as_u64(), summary["errors"].as_u64()), (Some(3000), Some(0)));

    // The driver reads every row the lean client wrote, and the lean client reads them too.
    let by_driver = stress(&["verify", "n=3000", "-port", &port]);
    assert_eq!(by_driver.status.code(), Some(0), "the driver verifies what simplenative wrote");
    let by_native = stress(&[&["verify", "n=3000", "-port", &port, "--json", &file("v.json")][..], &sn].concat());
    assert_eq!(by_native.status.code(), Some(0));
    let summary = json(&out.path().join("v.json"))["summary"].clone();
    assert_eq!(
        (summary["ops"].as_u64(), summary["missing"].as_u64(), summary["mismatched"].as_u64()),
        (Some(3000), Some(0), Some(0))
    );
    let wrong = stress(&[&["verify", "n=100", "seed=2", "-port", &port][..], &sn].concat());
    assert_eq!(wrong.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&wrong.stdout).contains("0 missing, 100 with wrong values"));
    let missing = stress(&[&["verify", "n=100", "-pop", "seq=2951..3050", "-port", &port][..], &sn].concat());
    assert!(String::from_utf8_lossy(&missing.stdout).contains("50 missing, 0 with wrong values"));

    let mixed = stress(
        &[
            &[
                "mixed",
                "ratio(read=9,write=1)",
                "n=2000",
                "-pop",
                "dist=uniform(1..3000)",
                "-port",
                &port,
                "--json",
                &file("m.json"),
            ][..],
            &sn,
        ]
        .concat(),
    );
    assert_eq!(mixed.status.code(), Some(0));
    let summary = json(&out.path().join("m.json"))["summary"].clone();
    assert_eq!((summary["ops"].as_u64(), summary["missing"].as_u64()), (Some(2000), Some(0)));
    assert!(summary["reads"].as_u64().unwrap_or(0) > summary["writes"].as_u64().unwrap_or(0));

    // A server error keeps Cassandra's code and message.
    let fail = stress(&[&["write", "n=10", "cl=THREE", "no-warmup", "-port", &port][..], &sn].concat());
    assert_eq!(fail.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&fail.stderr);
    assert!(stderr.contains("error 0x1000: Cannot achieve consistency level THREE"), "{stderr}");

    // Nothing listens on the port: a clear error, exit 1.
    let closed = format!("native={}", common::free_port());
    let refused = stress(&[&["write", "n=10", "-port", &closed][..], &sn].concat());
    assert_eq!(refused.status.code(), Some(1));
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

/// `shoal stress ARGS` started in the background, its stdout read line by line.
struct Background {
    child: Child,
    lines: mpsc::Receiver<String>,
    stdout: std::sync::Arc<std::sync::Mutex<String>>,
    args: String,
}

impl Background {
    fn start(args: &[&str]) -> Background {
        let mut child = Command::new(env!("CARGO_BIN_EXE_shoal"))
            .arg("stress")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start shoal stress");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        let all = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let keep = std::sync::Arc::clone(&all);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                keep.lock().expect("lock").push_str(&format!("{line}\n"));
                let _ = tx.send(line);
            }
        });
        Background { child, lines, stdout: all, args: args.join(" ") }
    }

    /// Waits (bounded) for an interval line: the measured phase is running.
    fn wait_for_first_interval(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line)
                    if line.split(',').count() >= 12 && line.chars().next().is_some_and(|c| c.is_ascii_digit()) =>
                {
                    return
                }
                Ok(_) => {}
                Err(e) => panic!("shoal stress {} printed no interval line: {e}", self.args),
            }
        }
    }

    /// Waits (bounded) for the process to end: its exit code, stdout and stderr.
    fn finish(mut self, limit: Duration) -> (Option<i32>, String, String) {
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("shoal stress {} ran past {limit:?}", self.args);
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut stderr = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut stderr);
        }
        // The reader thread ends with the pipe; give it a moment to store the last lines.
        let until = Instant::now() + Duration::from_secs(2);
        while self.lines.recv_timeout(until.saturating_duration_since(Instant::now())).is_ok() {}
        let stdout = self.stdout.lock().expect("lock").clone();
        eprintln!("$ shoal stress {}\n{stdout}{stderr}", self.args);
        (status.code(), stdout, stderr)
    }
}

fn hdr_count_and_max(text: &serde_json::Value) -> (u64, u64) {
    let h = stress::hdr::decode(text.as_str().expect("a histogram")).expect("decodes");
    (h.len(), h.max())
}

#[test]
fn two_concurrent_clients_merge_into_one_report() {
    let node = Node::start();
    let out = tempfile::tempdir().expect("temp dir");
    let port = format!("native={}", node.port);
    let file = |name: &str| out.path().join(name).display().to_string();
    let (a, b) = (file("a.json"), file("b.json"));
    let common = ["no-warmup", "-rate", "threads=8", "-port", &port, "-log", "interval=500ms"];
    let mut first = vec!["write", "n=3000"];
    first.extend(common);
    first.extend(["-pop", "seq=1..3000", "--json", &a]);
    let mut second = vec!["write", "n=3000"];
    second.extend(common);
    second.extend(["-pop", "seq=3001..6000", "--json", &b]);
    let (p1, p2) = (Background::start(&first), Background::start(&second));
    let (c1, c2) = (p1.finish(Duration::from_secs(60)), p2.finish(Duration::from_secs(60)));
    assert_eq!((c1.0, c2.0), (Some(0), Some(0)), "both clients succeed");

    let merged = stress(&["merge", &a, &b, "--json", &file("merged.json"), "--plot", &file("merged.svg")]);
    assert_eq!(merged.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&merged.stdout);
    assert!(stdout.contains("merged 2 reports (2 client processes)"), "{stdout}");
    assert!(stdout.contains("Total operations          : 6,000"), "{stdout}");
    let (ra, rb, m) = (json(Path::new(&a)), json(Path::new(&b)), json(&out.path().join("merged.json")));
    let (sa, sb, sm) = (&ra["summary"], &rb["summary"], &m["summary"]);
    let ops = |s: &serde_json::Value| s["ops"].as_u64().expect("ops");
    assert_eq!(ops(sm), ops(sa) + ops(sb));
    assert_eq!(ops(sm), 6000);
    let ((na, ma), (nb, mb), (nm, mm)) = (
        hdr_count_and_max(&sa["latency_hdr"]),
        hdr_count_and_max(&sb["latency_hdr"]),
        hdr_count_and_max(&sm["latency_hdr"]),
    );
    assert_eq!(nm, na + nb, "merged histogram count");
    assert_eq!(mm, ma.max(mb), "merged max");
    assert_eq!(
        sm["latency"]["max_ms"].as_f64(),
        [sa["latency"]["max_ms"].as_f64(), sb["latency"]["max_ms"].as_f64()].into_iter().flatten().reduce(f64::max)
    );
    assert_eq!(sm["clients"], 2);
    assert_eq!(m["settings"]["threads"], 16);
    let intervals = m["intervals"].as_array().expect("intervals");
    assert_eq!(intervals.last().map(|r| r["total_ops"].as_u64()), Some(Some(6000)));
    let counted: u64 = intervals.iter().map(|r| hdr_count_and_max(&r["latency_hdr"]).0).sum();
    assert_eq!(counted, 6000, "every operation in exactly one merged interval");
    let svg = std::fs::read_to_string(out.path().join("merged.svg")).expect("svg");
    assert!(svg.starts_with("<svg") && svg.contains("merge of 2 clients"), "{svg:.300}");

    // Both halves were written: verify the whole range.
    assert_eq!(stress(&["verify", "n=6000", "-port", &port]).status.code(), Some(0));

    let cmp = stress(&["compare", &a, &b, "--json", &file("cmp.json")]);
    assert_eq!(cmp.status.code(), Some(0));
    let text = String::from_utf8_lossy(&cmp.stdout);
    assert!(text.contains("op/s") && text.contains("95% CI") && text.contains("client CPU us/op"), "{text}");
    let c = json(&out.path().join("cmp.json"));
    assert_eq!(c["metrics"][0]["name"], "op/s");
    assert!(c["metrics"][0]["ratio"].as_f64().is_some());
    assert_eq!(stress(&["compare", &a]).status.code(), Some(2));
    assert_eq!(stress(&["merge", &file("missing.json")]).status.code(), Some(1));
}

#[test]
fn keep_going_rides_through_a_killed_server() {
    // With --keep-going: the run goes on to its end, counting errors, and exits 0.
    let mut node = Node::start();
    let out = tempfile::tempdir().expect("temp dir");
    let port = format!("native={}", node.port);
    let report = out.path().join("kill.json").display().to_string();
    let started = Instant::now();
    let run = Background::start(&[
        "write",
        "duration=6s",
        "--keep-going",
        "-rate",
        "threads=8",
        "-port",
        &port,
        "--json",
        &report,
    ]);
    run.wait_for_first_interval();
    let _ = node.child.kill();
    let _ = node.child.wait();
    let killed_at = started.elapsed();
    let (code, stdout, stderr) = run.finish(Duration::from_secs(30));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(6) + killed_at + Duration::from_secs(5),
        "ended near its duration: {:?}",
        started.elapsed()
    );
    let summary = json(Path::new(&report))["summary"].clone();
    let errors = summary["errors"].as_u64().expect("errors");
    assert!(errors > 0, "errors counted after the kill");
    assert!(summary["ops"].as_u64().unwrap_or(0) > 0);
    assert!(summary["elapsed_s"].as_f64().unwrap_or(0.0) >= 5.9, "ran to its end: {summary}");
    let total = stdout.lines().find(|l| l.starts_with("Total errors")).expect("a Total errors line");
    let printed: u64 = total
        .rsplit(':')
        .next()
        .and_then(|v| v.trim().replace(',', "").split(' ').next().map(str::to_string))
        .and_then(|v| v.parse().ok())
        .expect("a count");
    assert_eq!(printed, errors, "{total}");
    // The backoff bounds the error rate. Without it workers spun at ~1M errors/s;
    // with it 8 workers produce a few hundred to a few thousand (timing-dependent),
    // so the bound sits far from both.
    assert!(errors < 20_000, "errors pile up no faster than the backoff allows: {errors}");

    // Without --keep-going: the first error stops the run with a clear message and code 1.
    let mut node = Node::start();
    let port = format!("native={}", node.port);
    let run = Background::start(&["write", "duration=6s", "-rate", "threads=8", "-port", &port]);
    run.wait_for_first_interval();
    let _ = node.child.kill();
    let _ = node.child.wait();
    let killed = Instant::now();
    let (code, _, stderr) = run.finish(Duration::from_secs(30));
    assert_eq!(code, Some(1));
    assert!(stderr.contains("stopped at the first error (use --keep-going to count errors and go on)"), "{stderr}");
    assert!(killed.elapsed() < Duration::from_secs(4), "stopped at the kill, not at the end: {:?}", killed.elapsed());
}

#[test]
fn sigint_ends_the_run_with_its_report_and_failed_keys() {
    // Ctrl-C (SIGINT) ends a long run as its deadline would: exit 0, the summary and
    // --json cover what ran, and --failed-keys is written (empty: nothing failed).
    let node = Node::start();
    let out = tempfile::tempdir().expect("temp dir");
    let port = format!("native={}", node.port);
    let report = out.path().join("int.json").display().to_string();
    let failed = out.path().join("failed.txt");
    std::fs::write(&failed, "stale\n").expect("write");
    let failed_arg = failed.display().to_string();
    let started = Instant::now();
    let run = Background::start(&[
        "write",
        "duration=120s",
        "-rate",
        "threads=4",
        "-port",
        &port,
        "--json",
        &report,
        "--failed-keys",
        &failed_arg,
    ]);
    run.wait_for_first_interval();
    let signal = Command::new("kill").args(["-INT", &run.child.id().to_string()]).status().expect("kill");
    assert!(signal.success());
    let (code, stdout, stderr) = run.finish(Duration::from_secs(30));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(60), "ended at the signal: {:?}", started.elapsed());
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert!(stdout.contains("Op rate"), "the summary is printed: {stdout}");
    let summary = json(Path::new(&report))["summary"].clone();
    assert!(summary["ops"].as_u64().unwrap_or(0) > 0, "{summary}");
    assert_eq!(summary["errors"].as_u64(), Some(0), "{summary}");
    assert_eq!(std::fs::read_to_string(&failed).expect("failed keys"), "");
}
