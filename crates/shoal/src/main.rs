//! The `shoal` binary: one entry point with subcommands (`shoal server`,
//! `stress`, `tool`, `cluster`, `chaos`).

mod launcher;
mod tool;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Rust allocations go to mimalloc: glibc's arenas take a lock when a block
/// is freed on another thread than the one that allocated it, which a
/// request handed between runtime workers does all the time (the write
/// path's futex calls were mostly that lock). RocksDB's own allocations
/// stay with glibc.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (its options enum, v2 and v3 alike;
/// the sys crate leaves it unnamed).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Freed memory goes back to the OS 2 s after it was last used, not 10 ms:
/// a request's blocks are freed and allocated again at once, and with the
/// default the pages were returned and faulted in (zeroed) again all the
/// time (`perf`: 3% of the server in `clear_page_erms` under
/// `mi_page_free_list_extend`). `MIMALLOC_PURGE_DELAY` still overrides.
/// A node that goes idle still gives its memory back, two seconds later.
fn tune_allocator() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: called first thing in `main`, before any other thread
        // exists (mimalloc's option setters are not thread-safe); the option
        // is a plain integer.
        #[allow(unsafe_code)]
        unsafe {
            libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 2000)
        };
    }
}

#[derive(Parser)]
#[command(name = "shoal", version, about = "Shoal: a Cassandra-compatible, write-optimized database")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a node in the foreground (CQL on 127.0.0.1:9042, data under ./data by default).
    Server(ServerArgs),
    /// Benchmark a CQL cluster (cassandra-stress syntax; `shoal stress help`).
    #[command(disable_help_flag = true)]
    Stress {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Inspect and operate a running node through its admin API (nodetool's successor; `-h HOST -p PORT`).
    #[command(disable_help_flag = true)]
    Tool(tool::ToolArgs),
    /// Run a local test cluster on 127.0.0.1..N (ccm's successor): up, status, stop, start, down.
    Cluster(launcher::ClusterArgs),
    /// Fault injection for tests on a stopped node's files (the fault harness's offline half).
    Chaos(ChaosArgs),
}

#[derive(clap::Args)]
struct ChaosArgs {
    #[command(subcommand)]
    command: ChaosCommand,
}

#[derive(Subcommand)]
enum ChaosCommand {
    /// After a node ran with SHOAL_SYNC_JOURNAL=1 and was killed (SIGKILL), drop what its commit log
    /// had not fsynced, as a power failure would (a seeded part of the unsynced pages survives).
    PowerLoss {
        /// The killed node's data directory.
        #[arg(value_name = "DATA_DIR")]
        data_dir: PathBuf,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(clap::Args)]
struct ServerArgs {
    /// YAML configuration (cassandra.yaml names where the concept is the same).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Data directory (commit log, tables, schema).
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Address for CQL clients (and, later, peers).
    #[arg(long, value_name = "IP")]
    listen_address: Option<String>,
    /// CQL native protocol port.
    #[arg(long, value_name = "PORT")]
    native_port: Option<u16>,
    #[arg(long, value_name = "NAME")]
    cluster_name: Option<String>,
    /// Vnodes per node.
    #[arg(long, value_name = "N")]
    num_tokens: Option<u32>,
    /// Data center name (used by the cluster).
    #[arg(long, value_name = "DC")]
    dc: Option<String>,
    /// Rack name (used by the cluster).
    #[arg(long, value_name = "RACK")]
    rack: Option<String>,
    /// Comma-separated seeds: addresses or host names, resolved at start (used by the cluster).
    #[arg(long, value_name = "HOST,HOST")]
    seeds: Option<String>,
    /// Port of the HTTP/JSON admin API (`shoal tool`), on the listen address; default 7199.
    #[arg(long, value_name = "PORT")]
    admin_port: Option<u16>,
    /// On first start, take the place of the dead node at this address (replace_address_first_boot).
    #[arg(long, value_name = "IP")]
    replace_address: Option<String>,
}

fn main() -> ExitCode {
    tune_allocator();
    let cli = Cli::parse_from(tool::nodetool_flags(std::env::args_os()));
    // The driver's info lines would interleave with `shoal stress` output.
    // The benchmark prints its own lines; the driver reports connection trouble as errors it counts.
    let default_level = if matches!(cli.command, Command::Stress { .. }) { "warn,scylla=error" } else { "info" };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SHOAL_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level)),
        )
        .with_writer(std::io::stderr)
        .init();
    match cli.command {
        Command::Server(args) => match server(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("shoal: {e:#}");
                ExitCode::FAILURE
            }
        },
        Command::Stress { args } => stress::main(args),
        Command::Tool(args) => tool::main(args),
        Command::Cluster(args) => launcher::main(args),
        Command::Chaos(args) => chaos(args),
    }
}

fn chaos(args: ChaosArgs) -> ExitCode {
    let ChaosCommand::PowerLoss { data_dir, seed, json } = args.command;
    match storage::power_loss::power_loss(&data_dir, seed) {
        Ok(loss) if json => match serde_json::to_string_pretty(&loss) {
            Ok(text) => {
                println!("{text}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("shoal chaos power-loss: {e}");
                ExitCode::FAILURE
            }
        },
        Ok(loss) => {
            println!(
                "power loss in {} (seed {seed}): {} unsynced commit log bytes dropped in {} segments{}",
                data_dir.display(),
                loss.bytes_lost,
                loss.segments.iter().filter(|s| s.fate != "none").count(),
                if loss.journaled { "" } else { " (no fsync had completed: nothing was durable)" }
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("shoal chaos power-loss: {}: {e}", data_dir.display());
            ExitCode::FAILURE
        }
    }
}

fn server(args: ServerArgs) -> anyhow::Result<()> {
    let file = match &args.config {
        Some(path) => node::ConfigFile::load(path)?,
        None => node::ConfigFile::default(),
    };
    let overrides = node::Overrides {
        data_dir: args.data_dir,
        listen_address: args.listen_address,
        native_port: args.native_port,
        cluster_name: args.cluster_name,
        num_tokens: args.num_tokens,
        dc: args.dc,
        rack: args.rack,
        seeds: args.seeds,
        admin_port: args.admin_port,
        replace_address: args.replace_address,
    };
    let config = file.build(overrides)?;
    node::run(config)
}
