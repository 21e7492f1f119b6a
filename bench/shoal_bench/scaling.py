"""bench/scaling: Shoal's total server CPU per client write as the cluster grows (issue 24).

    bench/scaling [--nodes 1,2,3,4,6,8] [--rate-per-node 10000 | --rate 40000] [--seconds 20]
                  [--warmup 100000] [--threads 128] [--runs 1] [--worker-threads W | --cores-per-node C]
                  [--out DIR] [--report bench/SCALING.md]

For each cluster size N: `shoal cluster up -n N` (127.0.0.1..N, num_tokens 16, commit log periodic),
RF = min(3, N), a discarded warm-up of --warmup writes at QUORUM, then --runs measured runs of

    shoal stress write duration=Ss cl=QUORUM -schema 'replication(factor=RF)' -rate fixed=R/s threads=T
                 -mode simplenative -node 127.0.0.1,...,127.0.0.N --server-pid P1,...,PN

at a fixed client rate R: by default --rate-per-node times N, so each node carries the same load at
every size, as in the classic scaling runs (the cluster's throughput grows with its nodes); --rate
fixes one total for every size instead (then the load per node falls as N grows). The figure is the
sum of every node's CPU (utime+stime over the measured phase) divided by the client writes, and per
replica write (divided by RF as well). Coordination costs what it costs at every size, so from 3 nodes
on (RF=3 reached) the figure should stay flat; the goal is within +-15% of the 3-node figure up to 8.
All nodes share this machine: --cores-per-node C gives each node C request threads (`worker_threads`),
as if each ran on its own machine of C cores; --worker-threads W the same W at every size (default:
the server's own, one per core of this machine). The client runs here too: a run whose client falls
short of the fixed rate says so.

Output: a table per N (client writes/s, p50/p99, server CPU-us per client write and per replica write,
against the 3-node figure), SCALING.md with the command and machine beside them (--report), a chart
(scaling.svg beside the report) and the raw JSON (--out, default bench/out/scaling-STAMP)."""

import argparse
import json
import os
import shlex
import statistics
import sys
import time

from . import plots
from .proc import machine
from .servers import ShoalCluster, serve
from .util import HERE, SHOAL_BIN, Fail, log, md_table, sh, shown

GOAL = 0.15  # from 3 to 8 nodes: within +-15% of the 3-node figure


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="bench/scaling", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", default="1,2,3,4,6,8", help="cluster sizes to run (default 1,2,3,4,6,8)")
    rate = ap.add_mutually_exclusive_group()
    rate.add_argument("--rate-per-node", type=int, default=10000,
                      help="fixed client writes/s per node: the rate is this times N (default 10000)")
    rate.add_argument("--rate", type=int, help="one fixed total of client writes/s at every size instead")
    threads = ap.add_mutually_exclusive_group()
    threads.add_argument("--worker-threads", type=int, help="each node's worker_threads at every size")
    threads.add_argument("--cores-per-node", type=int,
                         help="each node's worker_threads is this (as if on its own machine of that many cores)")
    ap.add_argument("--pin", action="store_true",
                    help="pin node i (every thread) to its own C cores (C = --cores-per-node, default 1) with taskset, "
                         "and the client to the cores left: no node's flushes, compactions or commit log borrow "
                         "another's cores, as on separate machines")
    ap.add_argument("--seconds", type=int, default=20, help="length of each measured run (default 20)")
    ap.add_argument("--warmup", type=int, default=100000, help="discarded warm-up writes per cluster (default 100000)")
    ap.add_argument("--threads", type=int, default=128, help="requests in flight (default 128)")
    ap.add_argument("--runs", type=int, default=1, help="measured runs per size; the median is reported (default 1)")
    ap.add_argument("--out", help="raw JSON and logs (default bench/out/scaling-STAMP)")
    ap.add_argument("--report", help="write the Markdown report here (e.g. bench/SCALING.md) and the chart beside it")
    a = ap.parse_args(argv)
    try:
        a.sizes = [int(x) for x in a.nodes.split(",") if x.strip()]
    except ValueError:
        ap.error(f"--nodes: expected comma-separated numbers, got {a.nodes!r}")
    if not a.sizes or min(a.sizes) < 1 or max(a.sizes) > 254:
        ap.error("--nodes: sizes between 1 and 254")
    if a.pin:
        a.cores_per_node = a.cores_per_node or 1
        if a.worker_threads:
            ap.error("--pin: give --cores-per-node, not --worker-threads")
        if max(a.sizes) * a.cores_per_node >= (os.cpu_count() or 1):
            ap.error(f"--pin: {max(a.sizes)} nodes x {a.cores_per_node} cores leave no core of {os.cpu_count()} "
                     "for the client")
    return a


def pin_cores(a, n):
    """With --pin: each node's cores (node i: the i-th block of --cores-per-node) and the client's (the rest)."""
    c = a.cores_per_node
    nodes = [list(range(i * c, (i + 1) * c)) for i in range(n)]
    return nodes, list(range(n * c, os.cpu_count() or 1))


def cpu_list(cores):
    return ",".join(map(str, cores))


def rf_for(n):
    return min(3, n)


def rate_for(a, n):
    return a.rate if a.rate else a.rate_per_node * n


def worker_threads(a):
    return a.worker_threads or a.cores_per_node or 0


def stress_args(a, n, warmup):
    rf = rf_for(n)
    common = ["cl=QUORUM", "-schema", f"replication(factor={rf})"]
    if warmup:
        return ["write", f"n={a.warmup}", "truncate=once"] + common + ["-rate", f"threads={a.threads}"]
    return ["write", f"duration={a.seconds}s"] + common + ["-rate", f"fixed={rate_for(a, n)}/s", f"threads={a.threads}"]


def run_stress(cluster, args, out, name, client_cores=None):
    """One stress run against the cluster (on `client_cores` when given); its report's summary (raises Fail on
    errors)."""
    path = os.path.join(out, name + ".json")
    pin = ["taskset", "-c", cpu_list(client_cores)] if client_cores else []
    cmd = pin + [SHOAL_BIN, "stress"] + args + ["-mode", "simplenative", "-node", ",".join(cluster.nodes),
                                          "-port", f"native={cluster.port}", "--json", path,
                                          "--server-pid", ",".join(map(str, cluster.pids))]
    log(f"{len(cluster.nodes)} nodes: shoal stress {' '.join(map(shlex.quote, args))}")
    text = sh(cmd, timeout=600, check=False)
    with open(os.path.join(out, name + ".log"), "w") as f:
        f.write(" ".join(map(shlex.quote, cmd)) + "\n" + text)
    if not os.path.exists(path):
        raise Fail(f"stress failed ({name}.log):\n" + "\n".join(text.splitlines()[-15:]))
    with open(path) as f:
        summary = json.load(f)["summary"]
    if summary.get("stopped_by") or summary.get("errors"):
        raise Fail(f"{name}: {summary.get('errors')} errors, stopped by {summary.get('stopped_by')}")
    return summary


def measure_size(a, n, out):
    """Warm-up and the measured runs on a fresh N-node cluster: one row of the table."""
    def work(cluster):
        client = None
        if a.pin:
            nodes, client = pin_cores(a, n)
            for pid, cores in zip(cluster.pids, nodes):
                sh(["taskset", "-a", "-p", "-c", cpu_list(cores), str(pid)], timeout=30)
            log(f"{n} nodes pinned to cores {[cpu_list(c) for c in nodes]}, the client to {cpu_list(client)}")
        run_stress(cluster, stress_args(a, n, warmup=True), out, f"n{n}-warmup", client)
        runs = [run_stress(cluster, stress_args(a, n, warmup=False), out, f"n{n}-run{r + 1}", client)
                for r in range(a.runs)]
        med = lambda key: statistics.median(s[key] for s in runs)  # noqa: E731
        lat = lambda key: statistics.median(s["latency"][key] for s in runs)  # noqa: E731
        cpu = statistics.median(s["server_cpu_us_per_op"] for s in runs)
        return dict(nodes=n, rf=rf_for(n), rate=rate_for(a, n), ops_s=med("op_rate"), p50_ms=lat("p50_ms"), p99_ms=lat("p99_ms"),
                    server_cpu_us_per_write=cpu, server_cpu_us_per_replica_write=cpu / rf_for(n),
                    client_cpu_us_per_op=statistics.median(s.get("client_cpu_us_per_op") or 0 for s in runs),
                    runs=[dict(ops_s=s["op_rate"], server_cpu_us_per_op=s["server_cpu_us_per_op"],
                               p99_ms=s["latency"]["p99_ms"]) for s in runs])
    extra = f"worker_threads: {worker_threads(a)}\n" if worker_threads(a) else ""
    return serve(ShoalCluster(out, n=n, extra_yaml=extra), work)


def verdict(rows):
    """Each row's figure against the 3-node one, and whether every size from 3 to 8 is within GOAL."""
    base = next((r["server_cpu_us_per_write"] for r in rows if r["nodes"] == 3), None)
    for r in rows:
        r["vs_3_nodes"] = r["server_cpu_us_per_write"] / base if base else None
    judged = [r for r in rows if 3 <= r["nodes"] <= 8 and r["vs_3_nodes"] is not None]
    met = bool(judged) and all(abs(r["vs_3_nodes"] - 1) <= GOAL for r in judged)
    return base, met


def table(rows):
    header = ["nodes", "RF", "fixed rate", "client writes/s", "p50 ms", "p99 ms", "server CPU-us per client write",
              "per replica write", "vs 3 nodes"]
    out = []
    for r in rows:
        short = " (short of the rate)" if r["ops_s"] < 0.97 * r["rate"] else ""
        vs = f"{r['vs_3_nodes']:.2f}x" if r.get("vs_3_nodes") else "-"
        out.append([str(r["nodes"]), str(r["rf"]), f"{r['rate']:,}", f"{r['ops_s']:,.0f}{short}", f"{r['p50_ms']:.2f}",
                    f"{r['p99_ms']:.2f}", f"{r['server_cpu_us_per_write']:.1f}",
                    f"{r['server_cpu_us_per_replica_write']:.1f}", vs])
    return md_table(header, out)


def chart(rows, base):
    pts = [(r["nodes"], r["server_cpu_us_per_write"]) for r in rows]
    per_replica = [(r["nodes"], r["server_cpu_us_per_replica_write"]) for r in rows]
    hl = [plots.hline(base * (1 + GOAL), "3 nodes +15%", "fsync"), plots.hline(base * (1 - GOAL), "3 nodes -15%", "fsync")] \
        if base else []
    return plots.chart("Shoal: total server CPU per client write by cluster size (RF=min(3,N), QUORUM)", "nodes", [
        plots.panel("server CPU-us per client write (all nodes)", "us", [plots.series("per client write", pts, "shoal")], hl),
        plots.panel("server CPU-us per replica write", "us", [plots.series("per replica write", per_replica, "periodic")]),
    ])


def report(a, rows, base, met, out, argv):
    m = machine()
    cmd = "bench/scaling " + " ".join(shlex.quote(shown(x) if os.path.isabs(x) else x) for x in argv)
    lines = [
        "# Shoal: server CPU per client write from 1 to 8 nodes (issue 24)",
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `{cmd}`.",
        "",
        f"- Machine: {m}",
        f"- Shoal: `{shown(SHOAL_BIN)}`; every node and the client on this one machine, nodes on 127.0.0.1..N.",
        ("- Workload: a fixed " + (f"{a.rate:,} client writes/s at every size" if a.rate else
                                    f"{a.rate_per_node:,} client writes/s per node (the rate is N times that)")
         + f" for {a.seconds} s at QUORUM, RF = min(3, N), after a discarded warm-up of {a.warmup:,} writes per "
         f"cluster; median of {a.runs} run(s)."),
        "- Request threads per node (`worker_threads`): " + (f"{worker_threads(a)}" if worker_threads(a) else
                                                              "the server's default, one per core of the machine") + "."
        + (f" Each node pinned (`taskset`, every thread) to {a.cores_per_node} core(s) of its own, the client to the "
           "cores left." if a.pin else ""),
        "- Server CPU: utime+stime of every node over the measured phase (`--server-pid`), divided by the client "
        "writes (and by RF for the per-replica figure).",
        f"- Goal: from 3 to 8 nodes within +-{GOAL:.0%} of the 3-node figure: "
        + ("**met**." if met else "**not met**." if base else "no 3-node run."),
        "",
        table(rows),
        "",
    ]
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    a = parse_args(argv)
    out = a.out or os.path.join(HERE, "out", time.strftime("scaling-%Y%m%d-%H%M%S"))
    os.makedirs(out, exist_ok=True)
    rows = []
    try:
        for n in a.sizes:
            rows.append(measure_size(a, n, out))
            log(f"{n} nodes: {rows[-1]['ops_s']:,.0f} writes/s, {rows[-1]['server_cpu_us_per_write']:.1f} server CPU-us "
                "per client write")
    except Fail as e:
        log(f"bench/scaling: {e}")
        if not rows:
            return 1
    base, met = verdict(rows)
    print(table(rows))
    with open(os.path.join(out, "scaling.json"), "w") as f:
        json.dump(dict(args=vars(a), rows=rows, goal_met=met), f, indent=1, default=str)
    if a.report:
        svg = os.path.join(os.path.dirname(os.path.abspath(a.report)), "scaling.svg")
        drawn = plots.draw(chart(rows, base), svg, out)
        text = report(a, rows, base, met, out, argv)
        text += plots.md_image("scaling.svg", drawn, os.path.dirname(svg), a.report, out) + "\n"
        with open(a.report, "w") as f:
            f.write(text)
        log(f"wrote {shown(a.report)}")
    return 0 if len(rows) == len(a.sizes) else 1
