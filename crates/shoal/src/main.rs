//! The `shoal` binary: one entry point with subcommands (`shoal server`,
//! `stress`, `tool`, `cluster`).

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
    /// Comma-separated seed addresses (used by the cluster).
    #[arg(long, value_name = "IP,IP")]
    seeds: Option<String>,
    /// Port of the HTTP/JSON admin API (`shoal tool`), on the listen address; default 7199.
    #[arg(long, value_name = "PORT")]
    admin_port: Option<u16>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The driver's info lines would interleave with `shoal stress` output.
    // The benchmark prints its own lines; the driver reports connection trouble as errors it counts.
    let default_level = if matches!(cli.command, Command::Stress { .. }) { "warn,scylla=error" } else { "info" };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SHOAL_LOG").unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level)),
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
    };
    let config = file.build(overrides)?;
    node::run(config)
}
