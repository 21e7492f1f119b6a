//! Data-driven tests of both command-line syntaxes: each case is a command
//! line and a compact description of the settings it must produce (or the
//! start of the error it must give). Includes every stress command line of
//! `shared/classic-runs.md`, with the report's placeholders filled in.

use super::*;
use crate::settings::{AddDistribution, LwtRatio, SerialConsistency, Settings, Transport};

fn words(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_string).collect()
}

fn run(line: &str) -> Result<Settings, String> {
    match parse(&words(line)) {
        Ok(Invocation::Run(s)) => Ok(*s),
        Ok(Invocation::Help) => Err("help".to_string()),
        Err(e) => Err(e.0),
    }
}

/// A one-line description of the settings that matter, for table-driven checks.
fn describe(s: &Settings) -> String {
    let length = match s.length {
        RunLength::Ops(n) => format!("n={n}"),
        RunLength::Time(d) => format!("duration={}s", d.as_secs_f64()),
    };
    let rate = match s.rate {
        Rate::Closed => format!("threads={}", s.threads),
        Rate::Fixed(r) => format!("fixed={r}/s max={}", s.threads),
        Rate::Throttle(r) => format!("throttle={r}/s threads={}", s.threads),
    };
    let mut text = format!(
        "{} {length} cl={} {rate} nodes={} port={} cols={}x{} {} pop={} retries={} keep_going={} warmup={} interval={}s",
        s.command.name(),
        s.consistency.name(),
        s.nodes.hosts.join(","),
        s.port,
        s.columns,
        s.column_size,
        s.schema.replication.describe(),
        s.effective_population().describe(),
        s.retries,
        s.keep_going,
        s.warmup,
        s.interval.as_secs_f64(),
    );
    if let Some(f) = &s.nodes.file {
        text.push_str(&format!(" nodefile={}", f.display()));
    }
    if let Some(dc) = &s.nodes.dc {
        text.push_str(&format!(" dc={dc}"));
    }
    if s.command == Command::Mixed {
        text.push_str(&format!(" ratio={}:{}", s.ratio.read, s.ratio.write));
    }
    if let Some(f) = &s.csv {
        text.push_str(&format!(" csv={}", f.display()));
    }
    text
}

/// (command line, expected description).
const CASES: &[(&str, &str)] = &[
    (
        "write n=1000",
        "write n=1000 cl=LOCAL_ONE threads=50 nodes=127.0.0.1 port=9042 cols=5x34 SimpleStrategy RF 1 pop=seq(1..1000) retries=9 keep_going=false warmup=true interval=1s",
    ),
    (
        "write n=1M cl=QUORUM no-warmup -rate threads=200 -node 10.0.0.1,10.0.0.2:9043 -port native=9044 -col n=20 size=FIXED(100)",
        "write n=1000000 cl=QUORUM threads=200 nodes=10.0.0.1,10.0.0.2:9043 port=9044 cols=20x100 SimpleStrategy RF 1 pop=seq(1..1000000) retries=9 keep_going=false warmup=false interval=1s",
    ),
    (
        "read duration=30s -rate fixed=5000/s -pop gaussian(1..1000)",
        "read duration=30s cl=LOCAL_ONE fixed=5000/s max=1024 nodes=127.0.0.1 port=9042 cols=5x34 SimpleStrategy RF 1 pop=gaussian(1..1000) retries=9 keep_going=false warmup=true interval=1s",
    ),
    (
        "read duration=2m -rate throttle=1k/s threads=8 -pop dist=uniform(1..1m)",
        "read duration=120s cl=LOCAL_ONE throttle=1000/s threads=8 nodes=127.0.0.1 port=9042 cols=5x34 SimpleStrategy RF 1 pop=uniform(1..1000000) retries=9 keep_going=false warmup=true interval=1s",
    ),
    (
        "mixed ratio(read=9,write=1) n=100 -rate fixed=100/s threads=4",
        "mixed n=100 cl=LOCAL_ONE fixed=100/s max=4 nodes=127.0.0.1 port=9042 cols=5x34 SimpleStrategy RF 1 pop=uniform(1..100) retries=9 keep_going=false warmup=true interval=1s ratio=9:1",
    ),
    (
        "mixed read=9 write=1 duration=10s interval=500ms seed=7",
        "mixed duration=10s cl=LOCAL_ONE threads=50 nodes=127.0.0.1 port=9042 cols=5x34 SimpleStrategy RF 1 pop=uniform(1..1000000) retries=9 keep_going=false warmup=true interval=0.5s ratio=9:1",
    ),
    (
        "write n=10 -schema replication(strategy=NetworkTopologyStrategy,DC1=3,DC2=3) compaction(strategy=LeveledCompactionStrategy) durable_writes=false",
        "write n=10 cl=LOCAL_ONE threads=50 nodes=127.0.0.1 port=9042 cols=5x34 NetworkTopologyStrategy DC1:3,DC2:3 pop=seq(1..10) retries=9 keep_going=false warmup=true interval=1s",
    ),
    (
        "write n=10 keep-going -schema replication(factor=3) -pop seq=5..9 -K 3",
        "write n=10 cl=LOCAL_ONE threads=50 nodes=127.0.0.1 port=9042 cols=5x34 SimpleStrategy RF 3 pop=seq(5..9) retries=3 keep_going=true warmup=true interval=1s",
    ),
    (
        "verify n=2000 -node file=nodes.txt dc=DC1 -mode native cql3 prepared -errors ignore retries=2 --retries 4",
        "verify n=2000 cl=LOCAL_ONE threads=50 nodes= port=9042 cols=5x34 SimpleStrategy RF 1 pop=seq(1..2000) retries=4 keep_going=true warmup=true interval=1s nodefile=nodes.txt dc=DC1",
    ),
    (
        "write n=5 --keep-going --no-warmup -log interval=10s file=out.csv",
        "write n=5 cl=LOCAL_ONE threads=50 nodes=127.0.0.1 port=9042 cols=5x34 SimpleStrategy RF 1 pop=seq(1..5) retries=9 keep_going=true warmup=false interval=10s csv=out.csv",
    ),
    (
        "cassandra-stress write n=5",
        "write n=5 cl=LOCAL_ONE threads=50 nodes=127.0.0.1 port=9042 cols=5x34 SimpleStrategy RF 1 pop=seq(1..5) retries=9 keep_going=false warmup=true interval=1s",
    ),
    // The classic runs (shared/classic-runs.md), verbatim but for placeholders.
    (
        "stress -d node1,node2,node3,node4 -n 10000000 -t 100",
        "write n=10000000 cl=ONE threads=100 nodes=node1,node2,node3,node4 port=9042 cols=5x34 SimpleStrategy RF 1 pop=seq(1..10000000) retries=10 keep_going=false warmup=true interval=10s",
    ),
    (
        "stress -d node1,node2,node3,node4 -n 10000000 -t 200",
        "write n=10000000 cl=ONE threads=200 nodes=node1,node2,node3,node4 port=9042 cols=5x34 SimpleStrategy RF 1 pop=seq(1..10000000) retries=10 keep_going=false warmup=true interval=10s",
    ),
    (
        "stress -d node1,node2,node3,node4 -n 10000000 -t 200 --keep-going",
        "write n=10000000 cl=ONE threads=200 nodes=node1,node2,node3,node4 port=9042 cols=5x34 SimpleStrategy RF 1 pop=seq(1..10000000) retries=10 keep_going=true warmup=true interval=10s",
    ),
    (
        "cassandra-stress -K 100 -t 50 -R org.apache.cassandra.locator.NetworkTopologyStrategy --num-keys=50000000 --columns=20 -D nodelist -O DC1:3,DC2:3 --operation=INSERT",
        "write n=50000000 cl=ONE threads=50 nodes= port=9042 cols=20x34 NetworkTopologyStrategy DC1:3,DC2:3 pop=seq(1..50000000) retries=100 keep_going=false warmup=true interval=10s nodefile=nodelist",
    ),
    (
        "cassandra-stress -D nodelist --replication-factor 3 --consistency-level quorum --num-keys 10000000 -K 100 -t 100 --columns=50 --operation=INSERT",
        "write n=10000000 cl=QUORUM threads=100 nodes= port=9042 cols=50x34 SimpleStrategy RF 3 pop=seq(1..10000000) retries=100 keep_going=false warmup=true interval=10s nodefile=nodelist",
    ),
    (
        "cassandra-stress -d 10.0.0.1,10.0.0.2 -t 120 -r -p 7102 -n 1000000000 -k -f stress.log -o INSERT",
        "write n=1000000000 cl=ONE threads=120 nodes=10.0.0.1,10.0.0.2 port=9042 cols=5x34 SimpleStrategy RF 1 pop=uniform(1..1000000000) retries=10 keep_going=true warmup=true interval=10s csv=stress.log",
    ),
    (
        "cassandra-stress -d 10.0.0.1,10.0.0.2 -t 120 -r -p 7102 -e LOCAL_QUORUM -n 1000000000 -k -f stress.log -o INSERT",
        "write n=1000000000 cl=LOCAL_QUORUM threads=120 nodes=10.0.0.1,10.0.0.2 port=9042 cols=5x34 SimpleStrategy RF 1 pop=uniform(1..1000000000) retries=10 keep_going=true warmup=true interval=10s csv=stress.log",
    ),
    (
        "cassandra-stress -d 10.0.0.1,10.0.0.2 -t 20 -r -p 7102 -e LOCAL_QUORUM -n 1000000000 -k -f w.log -o INSERT",
        "write n=1000000000 cl=LOCAL_QUORUM threads=20 nodes=10.0.0.1,10.0.0.2 port=9042 cols=5x34 SimpleStrategy RF 1 pop=uniform(1..1000000000) retries=10 keep_going=true warmup=true interval=10s csv=w.log",
    ),
    (
        "cassandra-stress -d 10.0.0.1,10.0.0.2 -t 100 -r -p 7102 -e LOCAL_QUORUM -n 1000000000 -k -f r.log -o READ",
        "read n=1000000000 cl=LOCAL_QUORUM threads=100 nodes=10.0.0.1,10.0.0.2 port=9042 cols=5x34 SimpleStrategy RF 1 pop=uniform(1..1000000000) retries=10 keep_going=true warmup=true interval=10s csv=r.log",
    ),
    // Other legacy spellings.
    (
        "-d 127.0.0.1:9043 -n 500 -t 4 -c 3 -S 10 -o READ -i 1",
        "read n=500 cl=ONE threads=4 nodes=127.0.0.1:9043 port=9042 cols=3x10 SimpleStrategy RF 1 pop=gaussian(1..500) retries=10 keep_going=false warmup=true interval=1s",
    ),
    (
        "--nodes=h1 --threads 8 --num-keys 1k --column-size=64 --port 9044 --keep-trying=0",
        "write n=1000 cl=ONE threads=8 nodes=h1 port=9044 cols=5x64 SimpleStrategy RF 1 pop=seq(1..1000) retries=0 keep_going=false warmup=true interval=10s",
    ),
];

#[test]
fn command_lines_map_onto_settings() {
    let mut failures = Vec::new();
    for (line, expected) in CASES {
        match run(line) {
            Ok(s) => {
                let got = describe(&s);
                if got != *expected {
                    failures.push(format!("{line}\n  expected: {expected}\n  got:      {got}"));
                }
            }
            Err(e) => failures.push(format!("{line}\n  expected: {expected}\n  error:    {e}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The one line saying how a legacy command line was read.
const LEGACY_NOTES: &[(&str, &str)] = &[
    (
        "cassandra-stress -K 100 -t 50 -R org.apache.cassandra.locator.NetworkTopologyStrategy --num-keys=50000000 --columns=20 -D nodelist -O DC1:3,DC2:3 --operation=INSERT",
        "legacy syntax: write 50,000,000 keys, 20 columns, NetworkTopologyStrategy DC1:3,DC2:3, 50 threads, retries 100, nodes from nodelist",
    ),
    (
        "stress -d node1,node2,node3,node4 -n 10000000 -t 100",
        "legacy syntax: write 10,000,000 keys, 5 columns, SimpleStrategy RF 1, 100 threads, retries 10",
    ),
    (
        "cassandra-stress -d 10.0.0.1,10.0.0.2 -t 120 -r -p 7102 -e LOCAL_QUORUM -n 1000000000 -k -f stress.log -o INSERT",
        "legacy syntax: write 1,000,000,000 keys, 5 columns, SimpleStrategy RF 1, 120 threads, CL LOCAL_QUORUM, random keys, retries 10, keep going, log to stress.log; -p 7102 is a Thrift port; using the native port 9042",
    ),
    (
        "-d h -p 9043 -n 10",
        "legacy syntax: write 10 keys, 5 columns, SimpleStrategy RF 1, 50 threads, retries 10; -p 9043 taken as the native (CQL) port",
    ),
];

#[test]
fn legacy_lines_say_how_they_were_read() {
    for (line, expected) in LEGACY_NOTES {
        let s = run(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        assert_eq!(s.legacy_note.as_deref(), Some(*expected), "{line}");
    }
    assert_eq!(run("write n=10").map(|s| s.legacy_note), Ok(None));
}

/// (command line, start of the error).
const ERRORS: &[(&str, &str)] = &[
    ("", "missing command"),
    ("bogus n=1", "unknown command `bogus`"),
    ("write n=1 -bogus x", "unknown option `-bogus`"),
    ("write n=1 --bogus x", "unknown option `--bogus`"),
    ("write x=1", "unknown parameter `x=1` of write"),
    ("write n=abc", "n=abc: not a number"),
    ("write n=0", "n= must be at least 1"),
    ("write duration=soon", "duration=soon: use a duration"),
    ("write cl=SOME", "cl=SOME: use one of"),
    ("write truncate=maybe", "truncate=maybe: use never"),
    ("write -rate threads=0", "-rate threads= must be at least 1"),
    ("write -rate fixed=0/s", "rate 0/s: must be positive"),
    ("write -rate threads>=4", "-rate auto mode (threads>=N) is not supported"),
    ("write n=10 -pop seq=1..5 keep-going", "-pop takes one of"),
    ("write -col size=GAUSSIAN(1..10)", "-col size=GAUSSIAN(1..10): only FIXED(N)"),
    ("write -col n=0", "-col n= must be at least 1"),
    ("write -schema replication(strategy=NetworkTopologyStrategy)", "NetworkTopologyStrategy needs per-DC factors"),
    ("write -schema replication(strategy=Bogus,factor=1)", "replication strategy `Bogus`"),
    ("write -pop seq=10..1", "-pop range 10..1 is empty"),
    ("write -pop seq=1..10000000000", "-pop range ends at 10000000000"),
    ("write -pop zipf(1..10)", "-pop `zipf(1..10)`"),
    ("write -port native=0", "port 0: not a TCP port"),
    ("write --json", "--json needs a value"),
    ("verify --failed-keys", "--failed-keys needs a value"),
    ("verify --failed-keys=", "--failed-keys needs a file name"),
    ("write --cost-per-hour cheap", "--cost-per-hour cheap: not a number"),
    ("write --client-threads 0", "--client-threads must be between 1 and 1024"),
    ("read ratio(read=1,write=1)", "ratio(...) applies to mixed and lwt only"),
    ("mixed ratio(read=0,write=0)", "ratio(read=..,write=..) needs at least one"),
    ("user profile=x.yaml", "command `user` is not supported"),
    ("counter_write add=gaussian(1..5)", "add=gaussian(1..5): only fixed(N) and uniform"),
    ("counter_write add=fixed(x)", "add=fixed(x): `x` is not a whole number"),
    ("counter_write add=uniform(5..1)", "add=uniform(5..1) is empty"),
    ("write add=fixed(2)", "add= (the counter increment) applies to counter_write only"),
    ("counter_read add=fixed(2)", "add= (the counter increment) applies to counter_write only"),
    ("lwt ratio(insert=0,update=1)", "lwt: ratio(insert=..) must be at least 1"),
    ("lwt ratio(read=1)", "ratio(read=...) is not an lwt operation"),
    ("lwt serial-cl=QUORUM", "serial-cl=QUORUM: use SERIAL or LOCAL_SERIAL"),
    ("write serial-cl=SERIAL", "serial-cl= applies to lwt only"),
    ("-n 10 -z", "unknown legacy option `-z`"),
    ("-n 10 -o RANGE_SLICE", "-o RANGE_SLICE: shoal stress supports INSERT and READ"),
    ("-n", "-n needs a value"),
    ("-O DC1-3 -R NetworkTopologyStrategy", "-O DC1-3: use DC1:3,DC2:3"),
    ("-R NetworkTopologyStrategy", "NetworkTopologyStrategy needs per-DC factors"),
    ("write -transport truststore=ca.pem", "-transport (TLS) needs -mode simplenative"),
    ("write -mode native cql3 prepared -transport truststore=ca.pem", "-transport (TLS) needs -mode simplenative"),
    ("write -mode simplenative -transport", "-transport needs truststore=FILE"),
    ("write -mode simplenative -transport keystore=k.pem", "-transport needs truststore=FILE"),
    ("write -mode simplenative -transport truststore=", "-transport truststore= needs a file name"),
    ("write -mode simplenative -transport truststore=ca.jks", "-transport truststore=ca.jks: shoal stress needs a PEM"),
    ("write -mode simplenative -transport truststore=a.pem keystore=k.P12", "-transport keystore=k.P12: shoal stress"),
    (
        "write -mode simplenative -transport truststore=a.pem keystore-password=s",
        "-transport keystore-password: encrypted",
    ),
    (
        "write -mode simplenative -transport truststore=a.pem ssl-protocol=TLSv1.1",
        "-transport ssl-protocol=TLSv1.1: only TLS",
    ),
    ("write -mode simplenative -transport truststore=a.pem ssl-ciphers=X,Y", "-transport ssl-ciphers: not supported"),
    (
        "write -mode simplenative -transport truststore=a.pem store-type=JKS",
        "-transport store-type=JKS: shoal stress needs PEM",
    ),
    (
        "write -mode simplenative -transport truststore=a.pem hostname-verification=yes",
        "-transport hostname-verification=yes",
    ),
    ("write -mode simplenative -transport truststore=a.pem bogus=1", "-transport: unknown word `bogus=1`"),
    ("write -mode simplenative -transport a.pem", "-transport: unknown word `a.pem`"),
];

#[test]
fn bad_command_lines_are_refused_with_a_reason() {
    let mut failures = Vec::new();
    for (line, expected) in ERRORS {
        match run(line) {
            Ok(s) => failures.push(format!("{line:?} was accepted: {}", describe(&s))),
            Err(e) if e.starts_with(expected) => {}
            Err(e) => failures.push(format!("{line:?}\n  expected: {expected}...\n  got:      {e}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn help_and_output_options() {
    assert_eq!(run("help"), Err("help".to_string()));
    assert_eq!(run("--help"), Err("help".to_string()));
    let s = run(
        "write n=10 --json a.json --csv=b.csv --hdr-log c.hlog --plot d.svg --server-pid 12,34 --cost-per-hour 1.5",
    )
    .expect("parses");
    assert_eq!(s.json.as_deref(), Some(std::path::Path::new("a.json")));
    assert_eq!(s.csv.as_deref(), Some(std::path::Path::new("b.csv")));
    assert_eq!(s.hdr_log.as_deref(), Some(std::path::Path::new("c.hlog")));
    assert_eq!(s.plot.as_deref(), Some(std::path::Path::new("d.svg")));
    assert_eq!(s.failed_keys, None);
    assert!(run("write n=10 --plot d.png").expect_err("png").contains(".svg or .html"));
    assert_eq!(s.server_pids, vec![12, 34]);
    assert_eq!(s.cost_per_hour, Some(1.5));
    assert_eq!(s.client_threads, None);
    assert_eq!(run("write n=10 --client-threads 3").expect("parses").runtime_threads(), 3);
    assert_eq!((crate::settings::default_client_threads(2), crate::settings::default_client_threads(16)), (1, 4));
    let s = run("write n=10 truncate=always -schema keyspace=bench").expect("parses");
    assert_eq!(s.truncate, Truncate::Always);
    assert_eq!(s.schema.keyspace, "bench");
}

#[test]
fn number_and_duration_syntax() {
    assert_eq!(parse_count("1_000", ""), Ok(1000));
    assert_eq!(parse_count("2m", ""), Ok(2_000_000));
    assert_eq!(parse_count("3B", ""), Ok(3_000_000_000));
    assert_eq!(parse_duration("500ms", ""), Ok(Duration::from_millis(500)));
    assert_eq!(parse_duration("1.5s", ""), Ok(Duration::from_millis(1500)));
    assert_eq!(parse_duration("5m", ""), Ok(Duration::from_secs(300)));
    assert_eq!(parse_duration("2h", ""), Ok(Duration::from_secs(7200)));
    assert_eq!(parse_duration("30", ""), Ok(Duration::from_secs(30)));
    assert_eq!(parse_rate("1000/s"), Ok(1000.0));
    assert_eq!(parse_rate("60/m"), Ok(1.0));
}

#[test]
fn connections_per_host_is_honoured() {
    assert_eq!(run("write n=10").unwrap().connections_per_host, None);
    let s = run("write n=10 -mode native cql3 connectionsPerHost=8").unwrap();
    assert_eq!(s.connections_per_host.map(|n| n.get()), Some(8));
    for bad in ["0", "x", "-1"] {
        let e = run(&format!("write n=10 -mode native cql3 connectionsPerHost={bad}")).unwrap_err();
        assert!(e.starts_with(&format!("-mode connectionsPerHost={bad}: expected a count")), "{e}");
    }
}

#[test]
fn simplenative_selects_the_lean_client() {
    assert!(!run("write n=10").unwrap().simple_native);
    assert!(!run("write n=10 -mode native cql3 prepared").unwrap().simple_native);
    let s = run("write n=10 -mode simplenative connectionsPerHost=2").unwrap();
    assert!(s.simple_native);
    assert_eq!(s.connections_per_host.map(|n| n.get()), Some(2));
}

#[test]
fn failed_keys_is_a_long_option_of_every_command() {
    for command in ["write", "read", "mixed", "verify"] {
        for option in ["--failed-keys f.txt", "--failed-keys=f.txt"] {
            let line = format!("{command} n=10 keep-going {option} -rate threads=2");
            let s = run(&line).unwrap_or_else(|e| panic!("{line}: {e}"));
            assert_eq!(s.failed_keys.as_deref(), Some(std::path::Path::new("f.txt")), "{line}");
        }
    }
    let s = run("verify n=10 cl=ALL --failed-keys v.txt --json v.json").expect("parses");
    assert_eq!(s.failed_keys.as_deref(), Some(std::path::Path::new("v.txt")));
    assert_eq!(s.json.as_deref(), Some(std::path::Path::new("v.json")));
    assert!(USAGE.contains("--failed-keys FILE"));
}

#[test]
fn transport_takes_cassandra_stress_tls_options_with_pem_files() {
    assert_eq!(run("write n=10 -mode simplenative").unwrap().transport, None);
    let s = run("write n=10 -mode simplenative user=cassandra password=cassandra -transport truststore=/tmp/ca.pem")
        .expect("parses");
    let expected = Transport { truststore: "/tmp/ca.pem".into(), keystore: None, hostname_verification: false };
    assert_eq!(s.transport, Some(expected));
    assert_eq!((s.user.as_deref(), s.password.as_deref()), (Some("cassandra"), Some("cassandra")));
    // The option may come before -mode; cassandra-stress's harmless options are accepted.
    let s = run("write n=10 -transport truststore=ca.pem truststore-password=x keystore=me.pem keystore-password= \
         ssl-protocol=TLS ssl-alg=SunX509 store-type=PEM factory=x hostname-verification=true -mode simplenative")
    .expect("parses");
    let expected =
        Transport { truststore: "ca.pem".into(), keystore: Some("me.pem".into()), hostname_verification: true };
    assert_eq!(s.transport, Some(expected));
    assert!(USAGE.contains("-transport truststore="));
}

#[test]
fn counter_commands_read_cassandra_stress_parameters() {
    let s = run("counter_write n=1000 cl=QUORUM -col n=3").expect("counter_write");
    assert_eq!(s.command, Command::CounterWrite);
    assert_eq!(s.counter_add, AddDistribution::Fixed(1), "cassandra-stress's default add=fixed(1)");
    assert_eq!(s.effective_population(), Population::Seq { lo: 1, hi: 1000 });
    assert_eq!((s.columns, s.consistency), (3, Consistency::Quorum));
    assert_eq!(run("counter_write add=fixed(5)").map(|s| s.counter_add), Ok(AddDistribution::Fixed(5)));
    assert_eq!(run("counter_write add=7").map(|s| s.counter_add), Ok(AddDistribution::Fixed(7)));
    assert_eq!(
        run("counter_write add=UNIFORM(-2..9)").map(|s| s.counter_add),
        Ok(AddDistribution::Uniform { lo: -2, hi: 9 })
    );
    let s = run("counter_read n=500 -pop dist=gaussian(1..100)").expect("counter_read");
    assert_eq!(s.command, Command::CounterRead);
    assert_eq!(s.effective_population(), Population::Gaussian { lo: 1, hi: 100 });
    assert_eq!(run("counter_read n=500").map(|s| s.effective_population()), Ok(Population::Uniform { lo: 1, hi: 500 }));
    assert!(Command::CounterWrite.writes() && !Command::CounterRead.writes());
}

#[test]
fn lwt_reads_its_ratio_and_serial_consistency() {
    let s = run("lwt n=100 cl=QUORUM").expect("lwt");
    assert_eq!(s.command, Command::Lwt);
    assert_eq!(s.lwt_ratio, LwtRatio { insert: 1, update: 1 });
    assert_eq!(s.serial_consistency, SerialConsistency::Serial);
    assert_eq!(s.effective_population(), Population::Seq { lo: 1, hi: 9_999_999_999 }, "inserts never wrap");
    let s = run("lwt duration=10s ratio(insert=1,update=3) serial-cl=local_serial -rate threads=8").expect("lwt");
    assert_eq!(s.lwt_ratio, LwtRatio { insert: 1, update: 3 });
    assert_eq!(s.serial_consistency, SerialConsistency::LocalSerial);
    assert_eq!(s.threads, 8);
    assert!(Command::Lwt.writes());
    assert_eq!(Command::Lwt.name(), "lwt");
}

#[test]
fn deletes_and_gc_grace_are_shoal_extensions() {
    let s = run("mixed ratio(write=1,delete=3) n=10 -schema gc_grace_seconds=0 compaction(strategy=SizeTieredCompactionStrategy,tombstone_compaction_interval=60)").unwrap();
    assert_eq!((s.ratio.read, s.ratio.write, s.ratio.delete), (0, 1, 3));
    assert_eq!(s.schema.gc_grace_seconds, Some(0));
    let cql = crate::workload::schema_cql(&s);
    assert!(cql[1].ends_with("'tombstone_compaction_interval': '60'} AND gc_grace_seconds = 0"), "{}", cql[1]);
    assert_eq!(
        crate::workload::Statements::of(&s).delete.as_deref(),
        Some("DELETE FROM keyspace1.standard1 WHERE key = ?")
    );
    let only = run("mixed ratio(delete=1) n=10 -schema gc_grace_seconds=5").unwrap();
    assert!(crate::workload::schema_cql(&only)[1].ends_with(" WITH gc_grace_seconds = 5"));
    assert_eq!(crate::workload::Statements::of(&run("mixed n=10").unwrap()).delete, None);
    let refused = run("mixed ratio(delete=1) n=10 -mode simplenative").unwrap_err();
    assert!(refused.contains("needs the driver"), "{refused}");
    assert!(run("mixed ratio(delete=x) n=10").unwrap_err().contains("ratio delete"));
}
