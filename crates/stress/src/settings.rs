//! The typed settings of one `shoal stress` run: what both command-line
//! syntaxes (cassandra-stress's new one in `args.rs`, the legacy one in
//! `legacy.rs`) produce, and the only thing the runner reads.
//!
//! Invariants (checked by `Settings::validate`, which both parsers call): at
//! least one column, a column size of at least one byte, at least one thread,
//! positive rates, a population range with `lo <= hi` whose keys fit in the
//! 10-byte key (below 10^10), and a mixed ratio with at least one non-zero
//! weight.

use std::path::PathBuf;
use std::time::Duration;

/// The largest key index a 10-digit key can hold, plus one.
pub const KEY_INDEX_LIMIT: u64 = 10_000_000_000;

/// What the run does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    Write,
    Read,
    Mixed,
    /// Re-read every key of the population and check every value.
    Verify,
    /// cassandra-stress's `counter_write`: `UPDATE counter1 SET "C0" = "C0" + ?, ...`
    /// with increments drawn from `-add` (default `fixed(1)`).
    CounterWrite,
    /// cassandra-stress's `counter_read`: `SELECT "C0", ... FROM counter1 WHERE key = ?`.
    CounterRead,
    /// A Shoal extension (cassandra-stress has no LWT command): `INSERT ... IF NOT
    /// EXISTS` on new keys and `UPDATE ... IF v = ?` on keys inserted earlier in the
    /// run, in the `lwt1` table, Paxos at the serial consistency (`serial-cl=`).
    Lwt,
}

impl Command {
    pub fn name(self) -> &'static str {
        match self {
            Command::Write => "write",
            Command::Read => "read",
            Command::Mixed => "mixed",
            Command::Verify => "verify",
            Command::CounterWrite => "counter_write",
            Command::CounterRead => "counter_read",
            Command::Lwt => "lwt",
        }
    }

    /// Whether the run writes (and so creates the schema first).
    pub fn writes(self) -> bool {
        matches!(self, Command::Write | Command::Mixed | Command::CounterWrite | Command::Lwt)
    }
}

/// `add=`: the distribution of a counter increment (cassandra-stress's `-add`,
/// default `fixed(1)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddDistribution {
    Fixed(i64),
    /// Inclusive; drawn per (seed, operation, column).
    Uniform {
        lo: i64,
        hi: i64,
    },
}

impl AddDistribution {
    pub fn describe(self) -> String {
        match self {
            AddDistribution::Fixed(n) => format!("fixed({n})"),
            AddDistribution::Uniform { lo, hi } => format!("uniform({lo}..{hi})"),
        }
    }
}

/// `lwt`'s mix: weights of `INSERT ... IF NOT EXISTS` and `UPDATE ... IF`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LwtRatio {
    pub insert: u32,
    pub update: u32,
}

/// The serial consistency of `lwt`'s Paxos phase (`serial-cl=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SerialConsistency {
    Serial,
    LocalSerial,
}

impl SerialConsistency {
    pub fn parse(text: &str) -> Option<SerialConsistency> {
        match text.to_ascii_uppercase().as_str() {
            "SERIAL" => Some(SerialConsistency::Serial),
            "LOCAL_SERIAL" => Some(SerialConsistency::LocalSerial),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SerialConsistency::Serial => "SERIAL",
            SerialConsistency::LocalSerial => "LOCAL_SERIAL",
        }
    }
}

/// When the measured phase ends.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RunLength {
    /// A fixed number of operations (`n=`).
    Ops(u64),
    /// A fixed time (`duration=`).
    Time(Duration),
}

/// How requests are issued.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rate {
    /// Closed loop: `threads` requests in flight, each issued when the previous one returns.
    Closed,
    /// Open loop: request `i` is due at `start + i / rate`; latency is measured from that
    /// intended time (corrected for coordinated omission), service time from the actual send.
    Fixed(f64),
    /// Closed loop capped at a rate: no catching up, latency from the actual send.
    Throttle(f64),
}

/// Consistency levels by their CQL names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Consistency {
    Any,
    One,
    Two,
    Three,
    Quorum,
    All,
    LocalQuorum,
    EachQuorum,
    LocalOne,
}

impl Consistency {
    pub const ALL_NAMES: &'static str = "ANY, ONE, TWO, THREE, QUORUM, ALL, LOCAL_QUORUM, EACH_QUORUM, LOCAL_ONE";

    pub fn parse(text: &str) -> Option<Consistency> {
        Some(match text.to_ascii_uppercase().as_str() {
            "ANY" => Consistency::Any,
            "ONE" => Consistency::One,
            "TWO" => Consistency::Two,
            "THREE" => Consistency::Three,
            "QUORUM" => Consistency::Quorum,
            "ALL" => Consistency::All,
            "LOCAL_QUORUM" => Consistency::LocalQuorum,
            "EACH_QUORUM" => Consistency::EachQuorum,
            "LOCAL_ONE" => Consistency::LocalOne,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Consistency::Any => "ANY",
            Consistency::One => "ONE",
            Consistency::Two => "TWO",
            Consistency::Three => "THREE",
            Consistency::Quorum => "QUORUM",
            Consistency::All => "ALL",
            Consistency::LocalQuorum => "LOCAL_QUORUM",
            Consistency::EachQuorum => "EACH_QUORUM",
            Consistency::LocalOne => "LOCAL_ONE",
        }
    }
}

/// `truncate=`: when the table is emptied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Truncate {
    Never,
    /// Before the warmup.
    Once,
    /// Before the warmup and again before the measured phase.
    Always,
}

/// Key population: which key index operation `i` touches. Ranges are inclusive,
/// 1-based as in cassandra-stress (`seq=1..N`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Population {
    Seq {
        lo: u64,
        hi: u64,
    },
    Uniform {
        lo: u64,
        hi: u64,
    },
    /// Mean at the middle of the range, standard deviation a sixth of its width, clamped.
    Gaussian {
        lo: u64,
        hi: u64,
    },
}

impl Population {
    pub fn range(self) -> (u64, u64) {
        match self {
            Population::Seq { lo, hi } | Population::Uniform { lo, hi } | Population::Gaussian { lo, hi } => (lo, hi),
        }
    }

    pub fn describe(self) -> String {
        let (kind, (lo, hi)) = match self {
            Population::Seq { .. } => ("seq", self.range()),
            Population::Uniform { .. } => ("uniform", self.range()),
            Population::Gaussian { .. } => ("gaussian", self.range()),
        };
        format!("{kind}({lo}..{hi})")
    }
}

/// Keyspace replication.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Replication {
    Simple { factor: u32 },
    NetworkTopology { dcs: Vec<(String, u32)> },
}

impl Replication {
    /// The CQL map literal for `CREATE KEYSPACE ... WITH replication = `.
    pub fn cql(&self) -> String {
        match self {
            Replication::Simple { factor } => {
                format!("{{'class': 'SimpleStrategy', 'replication_factor': {factor}}}")
            }
            Replication::NetworkTopology { dcs } => {
                let mut text = String::from("{'class': 'NetworkTopologyStrategy'");
                for (dc, rf) in dcs {
                    text.push_str(&format!(", '{}': {rf}", dc.replace('\'', "''")));
                }
                text.push('}');
                text
            }
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Replication::Simple { factor } => format!("SimpleStrategy RF {factor}"),
            Replication::NetworkTopology { dcs } => {
                let list: Vec<String> = dcs.iter().map(|(dc, rf)| format!("{dc}:{rf}")).collect();
                format!("NetworkTopologyStrategy {}", list.join(","))
            }
        }
    }
}

/// Schema options (`-schema`).
#[derive(Clone, Debug, PartialEq)]
pub struct Schema {
    pub keyspace: String,
    pub replication: Replication,
    /// Compaction class name (e.g. `LeveledCompactionStrategy`), with its extra options.
    pub compaction: Option<(String, Vec<(String, String)>)>,
    pub durable_writes: bool,
    /// `gc_grace_seconds=N` (a Shoal extension): the table's gc_grace_seconds.
    pub gc_grace_seconds: Option<u32>,
}

/// `-node`: where to connect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nodes {
    /// Hosts as given (`host` or `host:port`).
    pub hosts: Vec<String>,
    /// A file with one host per line (or comma separated); read when the run starts.
    pub file: Option<PathBuf>,
    /// Preferred (local) data center for routing.
    pub dc: Option<String>,
}

/// `-transport`: TLS on the client connections (PEM files, read when the run starts).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transport {
    /// `truststore=`: the CA certificates (PEM) the servers' chains must lead to.
    pub truststore: PathBuf,
    /// `keystore=`: the client's private key and certificate chain (one PEM file), for
    /// servers that require client certificates.
    pub keystore: Option<PathBuf>,
    /// `hostname-verification=true`: the server's certificate must also name the address
    /// connected to (off by default, as in cassandra-stress: only the chain is checked).
    pub hostname_verification: bool,
}

/// Mixed-workload weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ratio {
    pub read: u32,
    pub write: u32,
    /// `delete=` (a Shoal extension): deletes of the key's row.
    pub delete: u32,
}

/// Everything one run needs.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    pub command: Command,
    pub length: RunLength,
    pub consistency: Consistency,
    pub warmup: bool,
    pub truncate: Truncate,
    pub interval: Duration,
    pub seed: u64,
    /// Count failed operations and go on instead of stopping at the first one.
    pub keep_going: bool,
    /// Extra tries per operation before it counts as failed (`DEFAULT_RETRIES`
    /// unless given).
    pub retries: u32,
    pub rate: Rate,
    /// Maximum requests in flight (closed loop: exactly this many).
    pub threads: u32,
    pub nodes: Nodes,
    pub port: u16,
    pub columns: u32,
    pub column_size: u32,
    pub schema: Schema,
    /// `None`: the command's default (writes `seq`, reads `uniform`, over the key count).
    pub population: Option<Population>,
    pub ratio: Ratio,
    /// `add=` (counter_write).
    pub counter_add: AddDistribution,
    /// `ratio(insert=..,update=..)` (lwt).
    pub lwt_ratio: LwtRatio,
    /// `serial-cl=` (lwt): the Paxos phase's consistency; the commit's is `cl=`.
    pub serial_consistency: SerialConsistency,
    pub user: Option<String>,
    pub password: Option<String>,
    /// Connections the driver keeps to each node (`-mode connectionsPerHost=N`);
    /// `None`: the driver's default (one per node).
    pub connections_per_host: Option<std::num::NonZeroUsize>,
    /// `-mode simplenative`: the operations go through the stress tool's own lean
    /// client (`native.rs`) instead of the driver.
    pub simple_native: bool,
    /// `-transport`: TLS (with `-mode simplenative` only: it then also sets up the run
    /// without the driver, `control.rs`).
    pub transport: Option<Transport>,
    pub json: Option<PathBuf>,
    pub csv: Option<PathBuf>,
    pub hdr_log: Option<PathBuf>,
    pub plot: Option<PathBuf>,
    /// `--failed-keys FILE`: where the keys of the operations that did not succeed
    /// are written when the run ends (`failed_keys.rs`).
    pub failed_keys: Option<PathBuf>,
    pub server_pids: Vec<u32>,
    pub cost_per_hour: Option<f64>,
    /// Threads of the client's async runtime (`--client-threads`); `None`: `default_client_threads`.
    pub client_threads: Option<usize>,
    /// The one line saying how a legacy command line was read.
    pub legacy_note: Option<String>,
}

/// The client's runtime threads when not given: a quarter of the cores, at least one.
/// One thread drives about 150,000 requests per second; more threads cost CPU per
/// operation (cross-thread wake-ups), which on a small machine shared with the
/// server makes the client both costlier and slower.
pub fn default_client_threads(cores: usize) -> usize {
    (cores / 4).max(1)
}

/// Extra tries per operation when not given: cassandra-stress's `-errors
/// retries=9` (ten tries in all), so a timeout the server answers under load
/// (a coordinator's WriteTimeout, an overloaded replica) is tried again, as the
/// tool users compare with would, instead of ending the run.
pub const DEFAULT_RETRIES: u32 = 9;

/// Key count used for default populations of duration runs (cassandra-stress's default).
pub const DEFAULT_KEY_COUNT: u64 = 1_000_000;

impl Settings {
    /// The defaults of the new syntax for `command`.
    pub fn new(command: Command) -> Settings {
        Settings {
            command,
            length: RunLength::Ops(DEFAULT_KEY_COUNT),
            consistency: Consistency::LocalOne,
            warmup: true,
            truncate: Truncate::Never,
            interval: Duration::from_secs(1),
            seed: 1,
            keep_going: false,
            retries: DEFAULT_RETRIES,
            rate: Rate::Closed,
            threads: 50,
            nodes: Nodes { hosts: vec!["127.0.0.1".to_string()], file: None, dc: None },
            port: 9042,
            columns: 5,
            column_size: 34,
            schema: Schema {
                keyspace: "keyspace1".to_string(),
                replication: Replication::Simple { factor: 1 },
                compaction: None,
                durable_writes: true,
                gc_grace_seconds: None,
            },
            population: None,
            ratio: Ratio { read: 1, write: 1, delete: 0 },
            counter_add: AddDistribution::Fixed(1),
            lwt_ratio: LwtRatio { insert: 1, update: 1 },
            serial_consistency: SerialConsistency::Serial,
            user: None,
            connections_per_host: None,
            simple_native: false,
            transport: None,
            password: None,
            json: None,
            csv: None,
            hdr_log: None,
            plot: None,
            failed_keys: None,
            server_pids: Vec::new(),
            cost_per_hour: None,
            client_threads: None,
            legacy_note: None,
        }
    }

    /// The population in effect: the explicit one, else the command's default over
    /// `1..=n` (or `1..=1,000,000` for duration runs); `lwt`'s default is every key.
    pub fn effective_population(&self) -> Population {
        if let Some(pop) = self.population {
            return pop;
        }
        if self.command == Command::Lwt {
            // Every insert a new key: operation i inserts key 1 + i (`workload::lwt_plan`).
            return Population::Seq { lo: 1, hi: KEY_INDEX_LIMIT - 1 };
        }
        let hi = match self.length {
            RunLength::Ops(n) => n.clamp(1, KEY_INDEX_LIMIT - 1),
            RunLength::Time(_) => DEFAULT_KEY_COUNT,
        };
        match self.command {
            Command::Write | Command::Verify | Command::CounterWrite | Command::Lwt => Population::Seq { lo: 1, hi },
            Command::Read | Command::Mixed | Command::CounterRead => Population::Uniform { lo: 1, hi },
        }
    }

    /// The client runtime's threads: `--client-threads`, else `default_client_threads`.
    pub fn runtime_threads(&self) -> usize {
        self.client_threads.unwrap_or_else(|| default_client_threads(crate::cpu::available_cores()))
    }

    /// Checks the invariants listed in the module comment.
    pub fn validate(&self) -> Result<(), String> {
        if self.client_threads.is_some_and(|t| t == 0 || t > 1024) {
            return Err("--client-threads must be between 1 and 1024".to_string());
        }
        if self.columns == 0 {
            return Err("-col n= must be at least 1".to_string());
        }
        if self.columns > 1000 {
            return Err("-col n= is limited to 1000 columns".to_string());
        }
        if self.column_size == 0 {
            return Err("-col size= must be at least 1 byte".to_string());
        }
        if self.threads == 0 {
            return Err("-rate threads= must be at least 1".to_string());
        }
        if self.threads > 100_000 {
            return Err("-rate threads= is limited to 100000".to_string());
        }
        match self.rate {
            Rate::Fixed(r) | Rate::Throttle(r) if !(r > 0.0 && r.is_finite()) => {
                return Err("-rate fixed=/throttle= must be a positive rate such as 1000/s".to_string());
            }
            _ => {}
        }
        match self.length {
            RunLength::Ops(0) => return Err("n= must be at least 1".to_string()),
            RunLength::Time(d) if d.is_zero() => return Err("duration= must be positive".to_string()),
            _ => {}
        }
        if self.interval < Duration::from_millis(100) {
            return Err("interval= must be at least 100ms".to_string());
        }
        let (lo, hi) = self.effective_population().range();
        if lo > hi {
            return Err(format!("-pop range {lo}..{hi} is empty"));
        }
        if hi >= KEY_INDEX_LIMIT {
            return Err(format!(
                "-pop range ends at {hi}; keys are 10 digits, so the largest is {}",
                KEY_INDEX_LIMIT - 1
            ));
        }
        if self.command == Command::Mixed && self.ratio.read == 0 && self.ratio.write == 0 && self.ratio.delete == 0 {
            return Err("ratio(read=..,write=..) needs at least one non-zero weight".to_string());
        }
        if self.command == Command::Lwt && self.lwt_ratio.insert == 0 {
            return Err("lwt: ratio(insert=..) must be at least 1: updates pick keys that inserts wrote".to_string());
        }
        if let AddDistribution::Uniform { lo, hi } = self.counter_add {
            if lo > hi {
                return Err(format!("add=uniform({lo}..{hi}) is empty"));
            }
        }
        if self.command == Command::Mixed && self.ratio.delete > 0 && self.simple_native {
            return Err("ratio(delete=..) needs the driver: -mode simplenative has no DELETE".to_string());
        }
        if self.transport.is_some() && !self.simple_native {
            return Err("-transport (TLS) needs -mode simplenative: the scylla driver in this build has no TLS \
                        (its rustls feature would add aws-lc, a second crypto library beside ring)"
                .to_string());
        }
        if self.nodes.hosts.is_empty() && self.nodes.file.is_none() {
            return Err("-node needs at least one host".to_string());
        }
        Ok(())
    }
}
