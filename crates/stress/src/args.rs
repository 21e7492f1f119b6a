//! Command-line parsing: cassandra-stress's (new) syntax, and the dispatch to
//! the legacy parser (`legacy.rs`) when the line starts with a legacy flag.
//!
//! The new syntax is a command word, its `key=value` / bare-word parameters,
//! then option groups (`-rate ...`, `-node ...`, `-col ...`, `-schema ...`,
//! `-pop ...`, `-mode ...`, `-port ...`, `-log ...`, `-errors ...`,
//! `-transport ...`) each taking
//! the words up to the next word starting with `-`, and `--long VALUE` options.
//! Parsing is pure (no file or network access) and every rejection is a
//! `UsageError` whose text names the offending word; `lib.rs` prints it with
//! the list of valid options and exits with code 2.

use std::path::PathBuf;
use std::time::Duration;

use crate::legacy;
use crate::settings::{
    AddDistribution, Command, Consistency, LwtRatio, Population, Rate, Ratio, Replication, RunLength,
    SerialConsistency, Settings, Transport, Truncate,
};

/// A command line that cannot be run; the text names what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Invocation {
    Help,
    Run(Box<Settings>),
}

/// The valid options, printed after every usage error and by `help`.
pub const USAGE: &str = "\
usage: shoal stress write|read|mixed|verify|counter_write|counter_read|lwt [n=N | duration=30s] [cl=ONE]
         [no-warmup] [truncate=never|once|always] [interval=1s] [seed=N] [keep-going]
         [ratio(read=9,write=1[,delete=1]) | read=9 write=1]      (mixed only; delete: driver mode)
         [add=fixed(1) | add=uniform(1..10)]                      (counter_write: each increment)
         [ratio(insert=1,update=1)] [serial-cl=SERIAL|LOCAL_SERIAL] (lwt only)
       counter_write/counter_read: cassandra-stress's counter1 table (key blob, C0..Cn-1 counter)
       lwt (a Shoal extension): INSERT ... IF NOT EXISTS on new keys and UPDATE ... SET v = ? IF v = ?
           on keys inserted earlier, table lwt1; Paxos at serial-cl=, the commit at cl=
       -rate threads=N | fixed=X/s [threads=N] | throttle=X/s [threads=N]
       -node host[:port],host... | file=FILE  [dc=DC]
       -port native=9042
       -col n=5 size=FIXED(34)
       -schema [keyspace=keyspace1] replication(factor=1)
               | replication(strategy=NetworkTopologyStrategy,DC1=3,DC2=3)
               [compaction(strategy=LeveledCompactionStrategy[,k=v...])] [durable_writes=true|false]
               [gc_grace_seconds=N]        (a Shoal extension: the table's gc_grace_seconds)
       -pop seq=1..N | uniform(1..N) | gaussian(1..N) | dist=uniform(1..N)
       -mode native cql3 prepared | simplenative [user=U password=P] [connectionsPerHost=N]
                                   (simplenative: the stress tool's own lean client, not the driver)
       -transport truststore=CA.pem [keystore=KEY_AND_CERT.pem] [hostname-verification=true]
                                   TLS, with -mode simplenative only; PEM files (not JKS), an unencrypted key
       -log interval=1s
       -errors ignore [retries=N]  (ignore: as --keep-going; retries: as --retries)
       -K N | --retries N          extra tries per operation (default 9, as cassandra-stress)
       --keep-going                count errors and go on (default: stop at the first)
       --json FILE  --csv FILE  --hdr-log FILE  --plot FILE.svg|.html
       --failed-keys FILE          at the end, write the keys of the operations that failed for good
                                   (and verify's missing or wrong rows), sorted, one per line
       --server-pid PID[,PID...]   report server CPU-us per op from /proc/PID/stat
       --cost-per-hour X           report dollars per million operations
       --client-threads N          threads of the client runtime (default: a quarter of the cores, at least 1)
   or the legacy syntax: shoal stress -d host,host -n N -t threads -c columns -S size
         -o INSERT|READ -e CL -l RF -R strategy -O DC1:3,DC2:3 -K retries -k -r -p port
         -f file -D nodesfile -i interval (and --num-keys=N, --columns=N, --operation=..., ...)
   on --json reports: shoal stress merge A.json B.json ... [--json OUT] [--plot OUT.svg]
                      shoal stress compare A.json B.json [--json OUT]";

fn err<T>(text: impl Into<String>) -> Result<T, UsageError> {
    Err(UsageError(text.into()))
}

/// Parses the arguments after `shoal stress`.
pub fn parse(args: &[String]) -> Result<Invocation, UsageError> {
    let mut args: &[String] = args;
    // A pasted `cassandra-stress ...` or `stress ...` line keeps its program name.
    if let Some(first) = args.first() {
        if first == "cassandra-stress" || first == "stress" || first.ends_with("/cassandra-stress") {
            args = &args[1..];
        }
    }
    let Some(first) = args.first() else {
        return err("missing command: write, read, mixed, verify, counter_write, counter_read or lwt");
    };
    match first.as_str() {
        "help" | "-h" | "--help" | "-help" => return Ok(Invocation::Help),
        "write" | "read" | "mixed" | "verify" | "counter_write" | "counter_read" | "lwt" => {}
        "user" | "print" => {
            return err(format!(
                "command `{first}` is not supported by shoal stress (yet); use write, read, mixed, verify, \
                 counter_write, counter_read or lwt"
            ));
        }
        other if other.starts_with('-') => return legacy::parse(args).map(|s| Invocation::Run(Box::new(s))),
        other => {
            return err(format!(
                "unknown command `{other}`: use write, read, mixed, verify, counter_write, counter_read or lwt"
            ))
        }
    }
    parse_new(args).map(|s| Invocation::Run(Box::new(s)))
}

fn parse_new(args: &[String]) -> Result<Settings, UsageError> {
    let command = match args[0].as_str() {
        "write" => Command::Write,
        "read" => Command::Read,
        "mixed" => Command::Mixed,
        "counter_write" => Command::CounterWrite,
        "counter_read" => Command::CounterRead,
        "lwt" => Command::Lwt,
        _ => Command::Verify,
    };
    let mut settings = Settings::new(command);
    let mut explicit_threads = false;
    let mut i = 1;
    // The command's own parameters, up to the first option.
    while i < args.len() && !args[i].starts_with('-') {
        command_param(&mut settings, &args[i])?;
        i += 1;
    }
    while i < args.len() {
        let option = args[i].as_str();
        i += 1;
        if let Some(long) = option.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (long, None),
            };
            match name {
                "keep-going" | "no-warmup" | "help" => {
                    if inline.is_some() {
                        return err(format!("--{name} takes no value"));
                    }
                    match name {
                        "keep-going" => settings.keep_going = true,
                        "no-warmup" => settings.warmup = false,
                        _ => return err("--help must come alone"),
                    }
                    continue;
                }
                _ => {}
            }
            let value = match inline {
                Some(v) => v,
                None => {
                    let Some(v) = args.get(i) else { return err(format!("--{name} needs a value")) };
                    i += 1;
                    v.clone()
                }
            };
            long_option(&mut settings, name, &value)?;
            continue;
        }
        // An option group: the words up to the next one starting with '-'.
        let start = i;
        while i < args.len() && !args[i].starts_with('-') {
            i += 1;
        }
        let words = &args[start..i];
        match option {
            "-rate" => explicit_threads |= rate_option(&mut settings, words)?,
            "-node" => node_option(&mut settings, words)?,
            "-port" => port_option(&mut settings, words)?,
            "-col" => col_option(&mut settings, words)?,
            "-schema" => schema_option(&mut settings, words)?,
            "-pop" => pop_option(&mut settings, words)?,
            "-mode" => mode_option(&mut settings, words)?,
            "-log" => log_option(&mut settings, words)?,
            "-errors" => errors_option(&mut settings, words)?,
            "-transport" => transport_option(&mut settings, words)?,
            "-K" => {
                let [word] = words else { return err("-K needs one number (retries)") };
                settings.retries = parse_u32(word, "-K")?;
            }
            other => return err(format!("unknown option `{other}`")),
        }
    }
    // Open-loop runs are not limited by a closed-loop thread count unless asked.
    if matches!(settings.rate, Rate::Fixed(_)) && !explicit_threads {
        settings.threads = 1024;
    }
    settings.validate().map_err(UsageError)?;
    Ok(settings)
}

fn command_param(settings: &mut Settings, word: &str) -> Result<(), UsageError> {
    if word == "no-warmup" {
        settings.warmup = false;
        return Ok(());
    }
    if word == "keep-going" {
        settings.keep_going = true;
        return Ok(());
    }
    if let Some(inner) = call_args(word, "ratio") {
        if settings.command == Command::Lwt {
            let mut ratio = LwtRatio { insert: 0, update: 0 };
            for (key, value) in key_values(inner)? {
                match key.as_str() {
                    "insert" => ratio.insert = parse_u32(&value, "ratio insert")?,
                    "update" => ratio.update = parse_u32(&value, "ratio update")?,
                    other => return err(format!("ratio({other}=...) is not an lwt operation; use insert and update")),
                }
            }
            settings.lwt_ratio = ratio;
            return Ok(());
        }
        if settings.command != Command::Mixed {
            return err("ratio(...) applies to mixed and lwt only");
        }
        let mut ratio = Ratio { read: 0, write: 0, delete: 0 };
        for (key, value) in key_values(inner)? {
            match key.as_str() {
                "read" => ratio.read = parse_u32(&value, "ratio read")?,
                "write" | "insert" => ratio.write = parse_u32(&value, "ratio write")?,
                "delete" => ratio.delete = parse_u32(&value, "ratio delete")?,
                other => return err(format!("ratio({other}=...) is not an operation; use read, write and delete")),
            }
        }
        settings.ratio = ratio;
        return Ok(());
    }
    let Some((key, value)) = word.split_once('=') else {
        return err(format!("unknown parameter `{word}` of {}", settings.command.name()));
    };
    match key {
        "n" => settings.length = RunLength::Ops(parse_count(value, "n=")?),
        "duration" => settings.length = RunLength::Time(parse_duration(value, "duration=")?),
        "cl" => settings.consistency = parse_consistency(value)?,
        "truncate" => {
            settings.truncate = match value {
                "never" => Truncate::Never,
                "once" => Truncate::Once,
                "always" => Truncate::Always,
                _ => return err(format!("truncate={value}: use never, once or always")),
            }
        }
        "interval" => settings.interval = parse_duration(value, "interval=")?,
        "add" if settings.command == Command::CounterWrite => settings.counter_add = parse_add(value)?,
        "add" => return err("add= (the counter increment) applies to counter_write only"),
        "serial-cl" if settings.command == Command::Lwt => {
            settings.serial_consistency = SerialConsistency::parse(value)
                .ok_or_else(|| UsageError(format!("serial-cl={value}: use SERIAL or LOCAL_SERIAL")))?
        }
        "serial-cl" => return err("serial-cl= applies to lwt only"),
        "seed" => settings.seed = parse_count(value, "seed=")?,
        "err<" | "n<" | "n>" => {
            return err(format!("`{key}` (auto-stop on error margins) is not supported; use n= or duration="))
        }
        "read" | "write" | "insert" if settings.command == Command::Mixed => {
            // The shorthand `read=9 write=1`; a word overrides only its own weight.
            let weight = parse_u32(value, key)?;
            if settings.ratio == (Ratio { read: 1, write: 1, delete: 0 }) {
                settings.ratio = Ratio { read: 0, write: 0, delete: 0 };
            }
            if key == "read" {
                settings.ratio.read = weight;
            } else {
                settings.ratio.write = weight;
            }
        }
        _ => return err(format!("unknown parameter `{word}` of {}", settings.command.name())),
    }
    Ok(())
}

/// `add=`: `fixed(N)`, `uniform(LO..HIGH)` or a bare number (cassandra-stress's
/// distributions of a counter increment; the others are refused by name).
fn parse_add(value: &str) -> Result<AddDistribution, UsageError> {
    let number = |text: &str| {
        text.trim().parse::<i64>().map_err(|_| UsageError(format!("add={value}: `{text}` is not a whole number")))
    };
    let lower = value.to_ascii_lowercase();
    if let Some(inner) = call_args(&lower, "fixed") {
        return Ok(AddDistribution::Fixed(number(inner)?));
    }
    if let Some(inner) = call_args(&lower, "uniform") {
        let Some((lo, hi)) = inner.split_once("..") else {
            return err(format!("add={value}: use uniform(LO..HIGH)"));
        };
        return Ok(AddDistribution::Uniform { lo: number(lo)?, hi: number(hi)? });
    }
    if lower.contains('(') {
        return err(format!("add={value}: only fixed(N) and uniform(LO..HIGH) increments are supported"));
    }
    Ok(AddDistribution::Fixed(number(value)?))
}

/// Returns whether `threads=` was given.
fn rate_option(settings: &mut Settings, words: &[String]) -> Result<bool, UsageError> {
    let mut explicit_threads = false;
    if words.is_empty() {
        return err("-rate needs threads=N, fixed=X/s or throttle=X/s");
    }
    for word in words {
        let Some((key, value)) = word.split_once('=') else {
            return err(format!("-rate: unknown word `{word}`"));
        };
        match key {
            "threads" => {
                settings.threads = parse_u32(value, "threads=")?;
                explicit_threads = true;
            }
            "fixed" => settings.rate = Rate::Fixed(parse_rate(value)?),
            "throttle" => settings.rate = Rate::Throttle(parse_rate(value)?),
            "threads>" | "threads<" | "auto" => {
                return err("-rate auto mode (threads>=N) is not supported; give threads=N")
            }
            _ => return err(format!("-rate: unknown word `{word}`")),
        }
    }
    Ok(explicit_threads)
}

fn node_option(settings: &mut Settings, words: &[String]) -> Result<(), UsageError> {
    let mut hosts = Vec::new();
    for word in words {
        if let Some(file) = word.strip_prefix("file=") {
            settings.nodes.file = Some(PathBuf::from(file));
        } else if let Some(dc) = word.strip_prefix("datacenter=").or_else(|| word.strip_prefix("dc=")) {
            settings.nodes.dc = Some(dc.to_string());
        } else if word == "whitelist" {
            // cassandra-stress's whitelist: only the given hosts; the driver still discovers peers.
        } else if word.contains('=') {
            return err(format!("-node: unknown word `{word}`"));
        } else {
            hosts.extend(split_hosts(word)?);
        }
    }
    if !hosts.is_empty() {
        settings.nodes.hosts = hosts;
    } else if settings.nodes.file.is_some() {
        settings.nodes.hosts.clear();
    }
    Ok(())
}

/// Splits `a,b:9043,c` into hosts, refusing empty entries.
pub(crate) fn split_hosts(word: &str) -> Result<Vec<String>, UsageError> {
    let mut hosts = Vec::new();
    for host in word.split(',') {
        let host = host.trim();
        if host.is_empty() {
            return err(format!("empty host in `{word}`"));
        }
        hosts.push(host.to_string());
    }
    Ok(hosts)
}

fn port_option(settings: &mut Settings, words: &[String]) -> Result<(), UsageError> {
    for word in words {
        match word.split_once('=') {
            Some(("native", v)) => settings.port = parse_port(v)?,
            Some(("thrift", _)) | Some(("jmx", _)) => {} // no meaning for a CQL-only client
            _ => return err(format!("-port: unknown word `{word}`; use native=9042")),
        }
    }
    Ok(())
}

fn col_option(settings: &mut Settings, words: &[String]) -> Result<(), UsageError> {
    for word in words {
        match word.split_once('=') {
            Some(("n", v)) => settings.columns = parse_fixed(v, "-col n=")?,
            Some(("size", v)) => settings.column_size = parse_fixed(v, "-col size=")?,
            Some(("names", _)) | Some(("comparator", _)) | Some(("timestamp", _)) | Some(("super", _)) => {
                return err(format!("-col {word}: only n= and size= are supported"));
            }
            _ => return err(format!("-col: unknown word `{word}`; use n=5 size=FIXED(34)")),
        }
    }
    Ok(())
}

/// `FIXED(34)` or `34`; other distributions are refused by name.
fn parse_fixed(value: &str, what: &str) -> Result<u32, UsageError> {
    let upper = value.to_ascii_uppercase();
    if let Some(inner) = upper.strip_prefix("FIXED(").and_then(|r| r.strip_suffix(')')) {
        return parse_u32(inner, what);
    }
    if upper.contains('(') {
        return err(format!("{what}{value}: only FIXED(N) sizes are supported"));
    }
    parse_u32(value, what)
}

fn schema_option(settings: &mut Settings, words: &[String]) -> Result<(), UsageError> {
    for word in words {
        if let Some(inner) = call_args(word, "replication") {
            let mut strategy: Option<String> = None;
            let mut factor: Option<u32> = None;
            let mut dcs = Vec::new();
            for (key, value) in key_values(inner)? {
                match key.as_str() {
                    "strategy" | "class" => strategy = Some(short_strategy(&value)),
                    "factor" | "replication_factor" => factor = Some(parse_u32(&value, "replication factor")?),
                    dc => dcs.push((dc.to_string(), parse_u32(&value, "replication factor of a data center")?)),
                }
            }
            settings.schema.replication = replication_from(strategy.as_deref(), factor, dcs)?;
        } else if let Some(inner) = call_args(word, "compaction") {
            let mut class = None;
            let mut options = Vec::new();
            for (key, value) in key_values(inner)? {
                if key == "strategy" || key == "class" {
                    class = Some(value);
                } else {
                    options.push((key, value));
                }
            }
            let Some(class) = class else { return err("compaction(...) needs strategy=NAME") };
            settings.schema.compaction = Some((class, options));
        } else if let Some((key, value)) = word.split_once('=') {
            match key {
                "durable_writes" => {
                    settings.schema.durable_writes = match value.to_ascii_lowercase().as_str() {
                        "true" => true,
                        "false" => false,
                        _ => return err(format!("durable_writes={value}: use true or false")),
                    }
                }
                "gc_grace_seconds" | "gc_grace" => {
                    settings.schema.gc_grace_seconds = Some(parse_u32(value, "gc_grace_seconds")?);
                }
                "keyspace" => {
                    if value.is_empty() || !value.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                        return err(format!("keyspace={value}: use letters, digits and _"));
                    }
                    settings.schema.keyspace = value.to_string();
                }
                _ => return err(format!("-schema: unknown word `{word}`")),
            }
        } else {
            return err(format!("-schema: unknown word `{word}`"));
        }
    }
    Ok(())
}

/// `org.apache.cassandra.locator.NetworkTopologyStrategy` → `NetworkTopologyStrategy`.
pub(crate) fn short_strategy(name: &str) -> String {
    name.rsplit('.').next().unwrap_or(name).to_string()
}

pub(crate) fn replication_from(
    strategy: Option<&str>,
    factor: Option<u32>,
    dcs: Vec<(String, u32)>,
) -> Result<Replication, UsageError> {
    match strategy.unwrap_or(if dcs.is_empty() { "SimpleStrategy" } else { "NetworkTopologyStrategy" }) {
        "SimpleStrategy" => {
            if !dcs.is_empty() {
                return err("SimpleStrategy takes factor=N, not per-DC factors");
            }
            Ok(Replication::Simple { factor: factor.unwrap_or(1) })
        }
        "NetworkTopologyStrategy" => {
            if dcs.is_empty() {
                return err("NetworkTopologyStrategy needs per-DC factors, e.g. DC1=3,DC2=3");
            }
            if factor.is_some() {
                return err("NetworkTopologyStrategy takes per-DC factors (DC1=3), not factor=");
            }
            Ok(Replication::NetworkTopology { dcs })
        }
        other => err(format!("replication strategy `{other}`: use SimpleStrategy or NetworkTopologyStrategy")),
    }
}

fn pop_option(settings: &mut Settings, words: &[String]) -> Result<(), UsageError> {
    let [word] = words else {
        return err("-pop takes one of seq=1..N, uniform(1..N), gaussian(1..N)");
    };
    let word = word.strip_prefix("dist=").unwrap_or(word);
    let pop = if let Some(range) = word.strip_prefix("seq=") {
        let (lo, hi) = parse_range(range)?;
        Population::Seq { lo, hi }
    } else {
        let lower = word.to_ascii_lowercase();
        if let Some(inner) = call_args(&lower, "uniform") {
            let (lo, hi) = parse_range(inner)?;
            Population::Uniform { lo, hi }
        } else if let Some(inner) = call_args(&lower, "gaussian").or_else(|| call_args(&lower, "gauss")) {
            // cassandra-stress allows a third argument (stdvrng); only the range is used here.
            let range = inner.split(',').next().unwrap_or(inner);
            let (lo, hi) = parse_range(range)?;
            Population::Gaussian { lo, hi }
        } else {
            return err(format!("-pop `{word}`: use seq=1..N, uniform(1..N) or gaussian(1..N)"));
        }
    };
    settings.population = Some(pop);
    Ok(())
}

fn mode_option(settings: &mut Settings, words: &[String]) -> Result<(), UsageError> {
    for word in words {
        match word.split_once('=') {
            None if matches!(word.as_str(), "native" | "cql3" | "prepared") => {}
            None if word == "simplenative" => settings.simple_native = true,
            None if word == "unprepared" => {
                return err("-mode unprepared: shoal stress always prepares its statements")
            }
            Some(("user", v)) => settings.user = Some(v.to_string()),
            Some(("password", v)) => settings.password = Some(v.to_string()),
            Some(("connectionsPerHost", v)) => {
                settings.connections_per_host =
                    Some(v.parse().map_err(|_| {
                        UsageError(format!("-mode connectionsPerHost={v}: expected a count of 1 or more"))
                    })?)
            }
            Some(("maxPending", _)) | Some(("protocolVersion", _)) | Some(("compression", _)) => {}
            _ => return err(format!("-mode: unknown word `{word}`")),
        }
    }
    Ok(())
}

fn log_option(settings: &mut Settings, words: &[String]) -> Result<(), UsageError> {
    for word in words {
        match word.split_once('=') {
            Some(("interval", v)) => settings.interval = parse_duration(v, "interval=")?,
            Some(("file", v)) => settings.csv = Some(PathBuf::from(v)),
            Some(("hdrfile", v)) => settings.hdr_log = Some(PathBuf::from(v)),
            _ if word == "no-summary" || word == "no-settings" => {}
            _ => return err(format!("-log: unknown word `{word}`; use interval=1s, file=FILE or hdrfile=FILE")),
        }
    }
    Ok(())
}

fn errors_option(settings: &mut Settings, words: &[String]) -> Result<(), UsageError> {
    for word in words {
        match word.split_once('=') {
            None if word == "ignore" => settings.keep_going = true,
            Some(("retries", v)) => settings.retries = parse_u32(v, "retries=")?,
            _ => return err(format!("-errors: unknown word `{word}`; use ignore and retries=N")),
        }
    }
    Ok(())
}

/// `-transport`: cassandra-stress's TLS options (`SettingsTransport`), with PEM files
/// instead of Java keystores. The files are read when the run starts (`transport.rs`).
fn transport_option(settings: &mut Settings, words: &[String]) -> Result<(), UsageError> {
    let mut truststore = None;
    let mut keystore = None;
    let mut hostname_verification = false;
    for word in words {
        let Some((key, value)) = word.split_once('=') else {
            return err(format!("-transport: unknown word `{word}`; use truststore=FILE [keystore=FILE]"));
        };
        match key {
            "truststore" | "keystore" => {
                if value.is_empty() {
                    return err(format!("-transport {key}= needs a file name"));
                }
                let lower = value.to_ascii_lowercase();
                if [".jks", ".p12", ".pfx", ".jceks"].iter().any(|ext| lower.ends_with(ext)) {
                    return err(format!(
                        "-transport {key}={value}: shoal stress needs a PEM file, not a Java keystore \
                         (export it: keytool -exportcert -rfc, or openssl pkcs12 -nodes)"
                    ));
                }
                if key == "truststore" {
                    truststore = Some(PathBuf::from(value));
                } else {
                    keystore = Some(PathBuf::from(value));
                }
            }
            // A PEM truststore has no password (Cassandra's PEM factory ignores it too).
            "truststore-password" => {}
            "keystore-password" if value.is_empty() => {}
            "keystore-password" => {
                return err("-transport keystore-password: encrypted private keys are not supported; keep the key \
                            unencrypted in the PEM keystore (openssl pkcs8 -topk8 -nocrypt) and protect the file");
            }
            "ssl-protocol" if value.eq_ignore_ascii_case("TLS") => {}
            "ssl-protocol" => {
                return err(format!(
                    "-transport ssl-protocol={value}: only TLS (the default) is accepted; shoal stress negotiates \
                     TLS 1.3 or 1.2"
                ));
            }
            // The Java key manager's algorithm (SunX509...): nothing to choose here.
            "ssl-alg" => {}
            "ssl-ciphers" => {
                return err("-transport ssl-ciphers: not supported; shoal stress offers rustls' default cipher suites");
            }
            "store-type" if value.eq_ignore_ascii_case("PEM") => {}
            "store-type" => {
                return err(format!("-transport store-type={value}: shoal stress needs PEM files (store-type=PEM)"));
            }
            // Older cassandra-stress: the Thrift transport factory, no meaning for a CQL client.
            "factory" => {}
            "hostname-verification" => {
                hostname_verification = match value.to_ascii_lowercase().as_str() {
                    "true" => true,
                    "false" => false,
                    _ => return err(format!("-transport hostname-verification={value}: use true or false")),
                }
            }
            _ => {
                return err(format!(
                    "-transport: unknown word `{word}`; use truststore=, keystore=, hostname-verification= \
                     (and cassandra-stress's truststore-password=, ssl-protocol=TLS, ssl-alg=)"
                ))
            }
        }
    }
    let Some(truststore) = truststore else {
        return err("-transport needs truststore=FILE (the CA certificates, PEM): TLS is on only with a truststore");
    };
    settings.transport = Some(Transport { truststore, keystore, hostname_verification });
    Ok(())
}

fn long_option(settings: &mut Settings, name: &str, value: &str) -> Result<(), UsageError> {
    match name {
        "json" => settings.json = Some(PathBuf::from(value)),
        "csv" => settings.csv = Some(PathBuf::from(value)),
        "hdr-log" => settings.hdr_log = Some(PathBuf::from(value)),
        "failed-keys" => {
            if value.is_empty() {
                return err("--failed-keys needs a file name");
            }
            settings.failed_keys = Some(PathBuf::from(value));
        }
        "plot" => {
            let path = PathBuf::from(value);
            if !crate::chart::plottable(&path) {
                return err(format!("--plot {value}: the file name must end in .svg or .html"));
            }
            settings.plot = Some(path);
        }
        "retries" => settings.retries = parse_u32(value, "--retries")?,
        "server-pid" => {
            settings.server_pids.clear();
            for pid in value.split(',') {
                settings.server_pids.push(parse_u32(pid.trim(), "--server-pid")?);
            }
        }
        "client-threads" => settings.client_threads = Some(parse_u32(value, "--client-threads")? as usize),
        "cost-per-hour" => {
            let cost: f64 = value
                .trim_start_matches('$')
                .parse()
                .map_err(|_| UsageError(format!("--cost-per-hour {value}: not a number")))?;
            if !(cost >= 0.0 && cost.is_finite()) {
                return err(format!("--cost-per-hour {value}: must be a non-negative number"));
            }
            settings.cost_per_hour = Some(cost);
        }
        other => return err(format!("unknown option `--{other}`")),
    }
    Ok(())
}

/// `name(inner)` → `inner` (name compared case-insensitively).
fn call_args<'a>(word: &'a str, name: &str) -> Option<&'a str> {
    let open = word.find('(')?;
    if !word[..open].eq_ignore_ascii_case(name) {
        return None;
    }
    word[open + 1..].strip_suffix(')')
}

/// `a=1,b=2` → pairs; every entry must have a value.
fn key_values(inner: &str) -> Result<Vec<(String, String)>, UsageError> {
    let mut pairs = Vec::new();
    for entry in inner.split(',').filter(|e| !e.trim().is_empty()) {
        let Some((k, v)) = entry.split_once('=') else {
            return err(format!("`{entry}` should be key=value"));
        };
        pairs.push((k.trim().to_string(), v.trim().to_string()));
    }
    Ok(pairs)
}

fn parse_consistency(value: &str) -> Result<Consistency, UsageError> {
    Consistency::parse(value).ok_or_else(|| UsageError(format!("cl={value}: use one of {}", Consistency::ALL_NAMES)))
}

pub(crate) fn parse_consistency_named(value: &str, what: &str) -> Result<Consistency, UsageError> {
    Consistency::parse(value)
        .ok_or_else(|| UsageError(format!("{what} {value}: use one of {}", Consistency::ALL_NAMES)))
}

/// A count with an optional k/m/b suffix (thousand, million, billion), `_` allowed.
pub(crate) fn parse_count(value: &str, what: &str) -> Result<u64, UsageError> {
    let clean: String = value.chars().filter(|&c| c != '_').collect();
    let (digits, scale) = match clean.chars().last().map(|c| c.to_ascii_lowercase()) {
        Some('k') => (&clean[..clean.len() - 1], 1_000),
        Some('m') => (&clean[..clean.len() - 1], 1_000_000),
        Some('b') => (&clean[..clean.len() - 1], 1_000_000_000),
        _ => (clean.as_str(), 1),
    };
    let n: u64 = digits.parse().map_err(|_| UsageError(format!("{what}{value}: not a number")))?;
    n.checked_mul(scale).ok_or_else(|| UsageError(format!("{what}{value}: too large")))
}

pub(crate) fn parse_u32(value: &str, what: &str) -> Result<u32, UsageError> {
    let n = parse_count(value, &format!("{what} "))?;
    u32::try_from(n).map_err(|_| UsageError(format!("{what} {value}: too large")))
}

pub(crate) fn parse_port(value: &str) -> Result<u16, UsageError> {
    match value.parse::<u16>() {
        Ok(p) if p > 0 => Ok(p),
        _ => err(format!("port {value}: not a TCP port")),
    }
}

/// `30s`, `5m`, `2h`, `1d`, `500ms`; a bare number is seconds.
pub(crate) fn parse_duration(value: &str, what: &str) -> Result<Duration, UsageError> {
    let bad = || UsageError(format!("{what}{value}: use a duration such as 500ms, 30s, 5m, 2h"));
    let (number, unit_ms) = if let Some(n) = value.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = value.strip_suffix('s') {
        (n, 1_000.0)
    } else if let Some(n) = value.strip_suffix('m') {
        (n, 60_000.0)
    } else if let Some(n) = value.strip_suffix('h') {
        (n, 3_600_000.0)
    } else if let Some(n) = value.strip_suffix('d') {
        (n, 86_400_000.0)
    } else {
        (value, 1_000.0)
    };
    let n: f64 = number.parse().map_err(|_| bad())?;
    if !(n >= 0.0 && n.is_finite()) || n * unit_ms > 1e12 {
        return Err(bad());
    }
    Ok(Duration::from_micros((n * unit_ms * 1_000.0).round() as u64))
}

/// `1000/s`, `1000/m`, `1k/s` or a bare number (per second).
fn parse_rate(value: &str) -> Result<f64, UsageError> {
    let (number, per_s) = if let Some(n) = value.strip_suffix("/s") {
        (n, 1.0)
    } else if let Some(n) = value.strip_suffix("/m") {
        (n, 1.0 / 60.0)
    } else if let Some(n) = value.strip_suffix("/h") {
        (n, 1.0 / 3600.0)
    } else {
        (value, 1.0)
    };
    let n = parse_count(number, "rate ")? as f64;
    if n == 0.0 {
        return err(format!("rate {value}: must be positive"));
    }
    Ok(n * per_s)
}

/// `1..N` with count suffixes allowed on both ends.
fn parse_range(text: &str) -> Result<(u64, u64), UsageError> {
    let Some((lo, hi)) = text.split_once("..") else {
        return err(format!("`{text}` is not a range such as 1..1000000"));
    };
    Ok((parse_count(lo, "range start ")?, parse_count(hi, "range end ")?))
}

#[cfg(test)]
#[path = "args_tests.rs"]
mod tests;
