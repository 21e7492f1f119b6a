//! The legacy `stress` / old `cassandra-stress` flag syntax (`-d nodes -n N
//! -t threads -o INSERT ...`), mapped onto the same `Settings` as the new
//! syntax, so the command lines of the classic reports run verbatim.
//!
//! Invariant: the resulting `Settings` carries `legacy_note`, one line saying
//! how the line was read (what it will do, and what a flag without meaning for
//! a CQL client, such as the Thrift `-p`, became). Legacy defaults are the old
//! tool's: 1,000,000 keys, 50 threads, 5 columns of 34 bytes, CL ONE, 10 retries,
//! a report every 10 seconds; inserts walk the keys in order and reads draw
//! them from a gaussian, unless `-r` asks for uniform random keys.

use std::path::PathBuf;
use std::time::Duration;

use crate::args::{self, UsageError};
use crate::settings::{Command, Population, RunLength, Settings};

/// The legacy flags: short, long, whether it takes a value, what it means.
pub const FLAGS: &[(&str, &str, bool, &str)] = &[
    ("-d", "--nodes", true, "host,host,... (host:port allowed)"),
    ("-D", "--nodesfile", true, "file with one host per line"),
    ("-n", "--num-keys", true, "number of keys (operations)"),
    ("-F", "--num-different-keys", true, "size of the key population (default: -n)"),
    ("-t", "--threads", true, "threads (requests in flight)"),
    ("-c", "--columns", true, "columns per row"),
    ("-S", "--column-size", true, "bytes per column"),
    ("-o", "--operation", true, "INSERT or READ"),
    ("-e", "--consistency-level", true, "consistency level"),
    ("-l", "--replication-factor", true, "SimpleStrategy replication factor"),
    ("-R", "--replication-strategy", true, "SimpleStrategy or NetworkTopologyStrategy"),
    ("-O", "--strategy-properties", true, "DC1:3,DC2:3"),
    ("-Z", "--compaction-strategy", true, "compaction class"),
    ("-K", "--keep-trying", true, "retries per operation"),
    ("-k", "--keep-going", false, "count errors and go on"),
    ("-r", "--random", false, "uniform random keys"),
    ("-p", "--port", true, "Thrift port (ignored: native port 9042 is used)"),
    ("-f", "--file", true, "also write the interval lines to this file"),
    ("-i", "--progress-interval", true, "seconds between interval lines (default 10)"),
    ("-L", "--enable-cql", false, "accepted (always CQL)"),
    ("-L3", "--enable-cql3", false, "accepted (always CQL)"),
];

/// Ports the Thrift-era tools talked to; anything else given with `-p` is taken as a native port.
const THRIFT_PORTS: &[u16] = &[9160, 7102];

/// Parses a legacy command line (without the program name).
pub fn parse(args: &[String]) -> Result<Settings, UsageError> {
    let mut settings = Settings::new(Command::Write);
    settings.length = RunLength::Ops(1_000_000);
    settings.consistency = crate::settings::Consistency::One;
    settings.retries = 10;
    settings.interval = Duration::from_secs(10);
    let mut operation = "INSERT".to_string();
    let mut random = false;
    let mut population_size: Option<u64> = None;
    let mut factor: Option<u32> = None;
    let mut strategy: Option<String> = None;
    let mut dcs: Vec<(String, u32)> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let word = &args[i];
        i += 1;
        let (flag, inline) = match word.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (word.as_str(), None),
        };
        let Some(&(short, _, takes_value, _)) = FLAGS.iter().find(|(s, l, _, _)| *s == flag || *l == flag) else {
            return Err(UsageError(format!("unknown legacy option `{word}`; legacy options:\n{}", legacy_list())));
        };
        let value = if takes_value {
            match inline {
                Some(v) => v,
                None => {
                    let Some(v) = args.get(i) else { return Err(UsageError(format!("{flag} needs a value"))) };
                    i += 1;
                    v.clone()
                }
            }
        } else {
            if inline.is_some() {
                return Err(UsageError(format!("{flag} takes no value")));
            }
            String::new()
        };
        match short {
            "-d" => settings.nodes.hosts = args::split_hosts(&value)?,
            "-D" => {
                settings.nodes.file = Some(PathBuf::from(&value));
                settings.nodes.hosts.clear();
            }
            "-n" => settings.length = RunLength::Ops(args::parse_count(&value, "-n ")?),
            "-F" => population_size = Some(args::parse_count(&value, "-F ")?),
            "-t" => settings.threads = args::parse_u32(&value, "-t")?,
            "-c" => settings.columns = args::parse_u32(&value, "-c")?,
            "-S" => settings.column_size = args::parse_u32(&value, "-S")?,
            "-o" => operation = value.to_ascii_uppercase(),
            "-e" => settings.consistency = args::parse_consistency_named(&value, "-e")?,
            "-l" => factor = Some(args::parse_u32(&value, "-l")?),
            "-R" => strategy = Some(args::short_strategy(&value)),
            "-O" => {
                for entry in value.split(',') {
                    let Some((dc, rf)) = entry.split_once(':') else {
                        return Err(UsageError(format!("-O {value}: use DC1:3,DC2:3")));
                    };
                    dcs.push((dc.trim().to_string(), args::parse_u32(rf.trim(), "-O")?));
                }
            }
            "-Z" => settings.schema.compaction = Some((args::short_strategy(&value), Vec::new())),
            "-K" => settings.retries = args::parse_u32(&value, "-K")?,
            "-k" => settings.keep_going = true,
            "-r" => random = true,
            "-p" => {
                let port = args::parse_port(&value)?;
                if THRIFT_PORTS.contains(&port) {
                    notes.push(format!("-p {port} is a Thrift port; using the native port {}", settings.port));
                } else {
                    settings.port = port;
                    if port != 9042 {
                        notes.push(format!("-p {port} taken as the native (CQL) port"));
                    }
                }
            }
            "-f" => settings.csv = Some(PathBuf::from(&value)),
            "-i" => settings.interval = args::parse_duration(&value, "-i ")?,
            _ => {} // -L, -L3: always CQL.
        }
    }
    settings.command = match operation.as_str() {
        "INSERT" | "WRITE" => Command::Write,
        "READ" => Command::Read,
        other => {
            return Err(UsageError(format!("-o {other}: shoal stress supports INSERT and READ in the legacy syntax")));
        }
    };
    settings.schema.replication = args::replication_from(strategy.as_deref(), factor, dcs)?;
    let n = match settings.length {
        RunLength::Ops(n) => n,
        RunLength::Time(_) => crate::settings::DEFAULT_KEY_COUNT,
    };
    let hi = population_size.unwrap_or(n).max(1);
    settings.population = Some(match (random, settings.command) {
        (true, _) => Population::Uniform { lo: 1, hi },
        (false, Command::Read) => Population::Gaussian { lo: 1, hi },
        (false, _) => Population::Seq { lo: 1, hi },
    });
    settings.validate().map_err(UsageError)?;

    let mut line =
        format!("legacy syntax: {} {} keys, {} columns", settings.command.name(), group_thousands(n), settings.columns);
    if settings.column_size != 34 {
        line.push_str(&format!(" of {} bytes", settings.column_size));
    }
    line.push_str(&format!(", {}, {} threads", settings.schema.replication.describe(), settings.threads));
    if settings.consistency != crate::settings::Consistency::One {
        line.push_str(&format!(", CL {}", settings.consistency.name()));
    }
    if random {
        line.push_str(", random keys");
    }
    line.push_str(&format!(", retries {}", settings.retries));
    if settings.keep_going {
        line.push_str(", keep going");
    }
    if let Some(file) = &settings.nodes.file {
        line.push_str(&format!(", nodes from {}", file.display()));
    }
    if let Some(file) = &settings.csv {
        line.push_str(&format!(", log to {}", file.display()));
    }
    for note in notes {
        line.push_str("; ");
        line.push_str(&note);
    }
    settings.legacy_note = Some(line);
    Ok(settings)
}

fn legacy_list() -> String {
    FLAGS
        .iter()
        .map(|(s, l, v, what)| format!("  {s}, {l}{}  {what}", if *v { " VALUE" } else { "" }))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `50000000` → `50,000,000`.
pub fn group_thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        let left = digits.len() - i;
        if i > 0 && left / 3 * 3 == left {
            out.push(',');
        }
        out.push(c);
    }
    out
}
