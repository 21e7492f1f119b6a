//! The classic report's layout, simulated (`sim::scale`): for each node
//! count, the real write path of that many nodes in three zones at RF 3, and
//! what it counted, as a Markdown table (and JSON with `--json FILE`).
//!
//! ```sh
//! cargo run --release -p sim --example scale -- --nodes 48,96,144,288 --writes 20000 --loss-writes 20000
//! ```

use std::io::Write;

use sim::scale::{run_scale, ScaleConfig, ScaleReport};

struct Args {
    nodes: Vec<usize>,
    writes: u64,
    loss_writes: u64,
    seed: u64,
    json: Option<String>,
}

fn parse() -> Result<Args, String> {
    let mut a = Args { nodes: vec![48, 96, 144, 288], writes: 20_000, loss_writes: 20_000, seed: 1, json: None };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--nodes" => {
                a.nodes = value()?
                    .split(',')
                    .map(|n| n.trim().parse::<usize>().map_err(|e| format!("--nodes: {e}")))
                    .collect::<Result<_, _>>()?
            }
            "--writes" => a.writes = value()?.parse().map_err(|e| format!("--writes: {e}"))?,
            "--loss-writes" => a.loss_writes = value()?.parse().map_err(|e| format!("--loss-writes: {e}"))?,
            "--seed" => a.seed = value()?.parse().map_err(|e| format!("--seed: {e}"))?,
            "--json" => a.json = Some(value()?),
            "-h" | "--help" => {
                return Err("usage: scale [--nodes 48,96,144,288] [--writes N] [--loss-writes N] [--seed S] \
                            [--json FILE]"
                    .into())
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if a.nodes.iter().any(|&n| !(3..=4096).contains(&n)) {
        return Err("--nodes: each between 3 and 4096".into());
    }
    Ok(a)
}

fn json(r: &ScaleReport) -> String {
    let b = |b: &sim::scale::Balance| {
        format!(
            "{{\"mean\": {:.6}, \"min\": {:.6}, \"max\": {:.6}, \"cv\": {:.6}, \"max_over_mean\": {:.4}}}",
            b.mean,
            b.min,
            b.max,
            b.cv,
            b.max_over_mean()
        )
    };
    format!(
        "{{\"nodes\": {}, \"ownership\": {}, \"ownership_random_tokens\": {}, \"writes\": {}, \
         \"messages_per_write\": {:.4}, \"replica_writes_per_write\": {:.4}, \"replica_load\": {}, \
         \"peers_per_node\": {:.2}, \"loss_writes\": {}, \"loss_share\": {:.6}, \"hints_per_write\": {:.6}, \
         \"hint_bytes_per_write\": {:.3}, \"loss_acked\": {}, \"hints_replayed\": {}, \"returned_holds\": [{}, {}], \
         \"wall_seconds\": {:.1}}}",
        r.nodes,
        b(&r.ownership),
        b(&r.ownership_random),
        r.writes,
        r.messages_per_write,
        r.replica_writes_per_write,
        b(&r.replica_load),
        r.peers_per_node,
        r.loss_writes,
        r.loss_share,
        r.hints_per_write,
        r.hint_bytes_per_write,
        r.loss_acked,
        r.hints_replayed,
        r.returned_holds.0,
        r.returned_holds.1,
        r.wall_seconds
    )
}

fn main() {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let mut reports = Vec::new();
    for &nodes in &args.nodes {
        let config = ScaleConfig { nodes, writes: args.writes, loss_writes: args.loss_writes, seed: args.seed };
        eprintln!("{nodes} nodes: {} writes, then {} with one node down ...", args.writes, args.loss_writes);
        match run_scale(&config) {
            Ok(r) => {
                eprintln!("{nodes} nodes: done in {:.1} s", r.wall_seconds);
                reports.push(r);
            }
            Err(e) => {
                eprintln!("{nodes} nodes: FAILED: {e}");
                std::process::exit(1);
            }
        }
    }
    println!(
        "| nodes | ownership max/mean (allocated tokens) | ownership max/mean (random tokens) | messages per client write | \
         replica writes per client write | replica writes max/mean per node | peers per node | \
         writes with the lost node as replica | hints per client write during the loss | hint bytes per client write | \
         acked during the loss | replayed: the node holds |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in &reports {
        println!(
            "| {} | {:.3} | {:.3} | {:.2} | {:.2} | {:.3} | {:.1} | {:.2}% | {:.4} | {:.1} | {}/{} | {}/{} |",
            r.nodes,
            r.ownership.max_over_mean(),
            r.ownership_random.max_over_mean(),
            r.messages_per_write,
            r.replica_writes_per_write,
            r.replica_load.max_over_mean(),
            r.peers_per_node,
            100.0 * r.loss_share,
            r.hints_per_write,
            r.hint_bytes_per_write,
            r.loss_acked,
            r.loss_writes,
            r.returned_holds.0,
            r.returned_holds.1
        );
    }
    if let Some(path) = &args.json {
        let body = format!("[\n  {}\n]\n", reports.iter().map(json).collect::<Vec<_>>().join(",\n  "));
        let written = std::fs::File::create(path).and_then(|mut f| f.write_all(body.as_bytes()));
        if let Err(e) = written {
            eprintln!("cannot write {path}: {e}");
            std::process::exit(1);
        }
    }
}
