"""Nemesis schedules and scenario runs.

A scenario run on a started cluster: create its keyspace (RF = nodes), start the workload in the client
namespace, run the scenario's nemesis for --seconds (cycles of a fault held a few seconds, then healed
a few seconds; every choice from a random.Random(seed)), heal everything (network, paused/killed
nodes, skews, fillers), wait until every node sees every node UN, run `shoal tool repair KS` on every
node, run `shoal tool repair KS --full --preview` on every node (replicas' digests), read everything at
ONE from each node alone and at ALL, and run the checkers (checkers.py). It prints one line and returns
the report (a dict; the CLI writes it as JSON).

The scenarios (NEMESES): partition-majority (a minority cut off from the majority; with 3 nodes that is
one node isolated), partition-bridge (one node sees the others, which do not see each other),
kill-loop (kill -9, down a few seconds, restart), pause (SIGSTOP / SIGCONT), skew (one node's wall clock
off by up to a minute, ahead or behind), disk-full (one node's data tmpfs filled to ENOSPC, then
freed), flaky (one node's packets dropped at 15-35% both ways, plus netem delay/reordering where the
kernel has sch_netem), power-loss (kill -9 of one node, or of every node with --power-loss-all, then
`shoal chaos power-loss` on each killed node's data dir: what its commit log had not fsynced is lost, as
in a power failure; then restarted), mixed (each cycle one of the above).
"""

import json
import os
import subprocess
import sys
import time

from . import checkers

SCENARIOS = ("partition-majority", "partition-bridge", "kill-loop", "pause", "skew", "disk-full", "flaky", "power-loss",
             "mixed")
RESERVED = {}
BENCH_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Nemesis:
    """Faults on a cluster, chosen from one seeded RNG; `events` records each with its time."""

    def __init__(self, cluster, net, rng, t0, log):
        self.c = cluster
        self.net = net
        self.rng = rng
        self.t0 = t0
        self.log = log
        self.events = []
        self.n = len(cluster.nodes)
        self.power_all = False

    def note(self, op, **detail):
        ev = {"t": round(time.monotonic() - self.t0, 2), "op": op, **detail}
        self.events.append(ev)
        self.log(f"  nemesis t={ev['t']:6.1f}s {op} {json.dumps(detail) if detail else ''}")

    def hold(self, lo, hi, deadline):
        time.sleep(max(0.0, min(self.rng.uniform(lo, hi), deadline - time.monotonic())))

    # -- one cycle of each fault: apply, hold, heal

    def partition_majority(self, deadline):
        nodes = list(range(1, self.n + 1))
        self.rng.shuffle(nodes)
        size = 1 if self.n <= 3 or self.rng.random() < 0.5 else (self.n - 1) // 2
        minority, majority = sorted(nodes[:size]), sorted(nodes[size:])
        self.net.partition([minority, majority])
        self.note("partition", minority=minority, majority=majority)
        self.hold(5, 10, deadline)
        self.net.heal()
        self.note("heal-network")

    def partition_bridge(self, deadline):
        nodes = list(range(1, self.n + 1))
        self.rng.shuffle(nodes)
        bridge, rest = nodes[0], nodes[1:]
        left, right = rest[: len(rest) // 2], rest[len(rest) // 2:]
        self.net.cut([(a, b) for a in left for b in right])
        self.note("bridge-partition", bridge=bridge, left=sorted(left), right=sorted(right))
        self.hold(5, 10, deadline)
        self.net.heal()
        self.note("heal-network")

    def flaky(self, deadline):
        i = self.rng.randint(1, self.n)
        loss = self.rng.randint(15, 35)
        self.net.set_loss(i, loss)
        netem = self.net.set_netem(i, self.rng.randint(5, 50), self.rng.randint(1, 20), self.rng.randint(5, 25))
        self.note("flaky", node=i, loss_pct=loss, netem=netem)
        self.hold(6, 12, deadline)
        self.net.heal()
        self.note("heal-network")

    def kill(self, deadline):
        node = self.c.node(self.rng.randint(1, self.n))
        self.c.kill(node)
        self.note("kill-9", node=node.index)
        self.hold(2, 6, deadline)
        self.c.restart(node)
        self.note("restart", node=node.index)
        try:
            self.c.wait_normal(node, timeout=max(5.0, min(60.0, deadline - time.monotonic() + 30)))
            self.note("up", node=node.index)
        except RuntimeError as e:
            self.note("not-up", node=node.index, why=str(e)[:200])

    def pause(self, deadline):
        node = self.c.node(self.rng.randint(1, self.n))
        self.c.pause(node)
        self.note("SIGSTOP", node=node.index)
        self.hold(4, 10, deadline)
        self.c.resume(node)
        self.note("SIGCONT", node=node.index)

    def skew(self, deadline):
        node = self.c.node(self.rng.randint(1, self.n))
        offset = self.rng.choice((-1, 1)) * self.rng.randint(10, 60)
        self.c.set_skew(node, offset)
        self.note("skew", node=node.index, seconds=offset)
        self.hold(8, 14, deadline)
        self.c.set_skew(node, 0)
        self.note("unskew", node=node.index)

    def disk_full(self, deadline):
        node = self.c.node(self.rng.randint(1, self.n))
        written = self.c.fill_disk(node)
        self.note("fill-disk", node=node.index, bytes=written)
        self.hold(6, 12, deadline)
        self.c.free_disk(node)
        self.note("free-disk", node=node.index)

    def power_loss(self, deadline):
        """A power failure: kill -9, then the storage's power-loss layer drops what each killed node's
        commit log had not fsynced (the nodes run with SHOAL_SYNC_JOURNAL=1), then a restart. One node,
        or every node at once with --power-loss-all (a whole site losing power)."""
        victims = list(self.c.nodes) if self.power_all else [self.c.node(self.rng.randint(1, self.n))]
        for node in victims:
            self.c.kill(node)
        lost = {}
        for node in victims:
            seed = self.rng.randint(0, 2**32)
            lost[node.name] = self.c.power_loss(node, seed)
        self.note("power-loss", nodes=[n.index for n in victims], unsynced_bytes_lost=lost)
        self.hold(1, 3, deadline)
        for node in victims:
            self.c.restart(node)
        self.note("restart", nodes=[n.index for n in victims])
        for node in victims:
            try:
                self.c.wait_normal(node, timeout=max(5.0, min(60.0, deadline - time.monotonic() + 30)))
                self.note("up", node=node.index)
            except RuntimeError as e:
                self.note("not-up", node=node.index, why=str(e)[:200])

    def run(self, scenario, seconds):
        ops = {
            "partition-majority": [self.partition_majority],
            "partition-bridge": [self.partition_bridge],
            "kill-loop": [self.kill],
            "pause": [self.pause],
            "skew": [self.skew],
            "disk-full": [self.disk_full],
            "flaky": [self.flaky],
            "power-loss": [self.power_loss],
            "mixed": [self.partition_majority, self.partition_bridge, self.kill, self.pause, self.skew,
                      self.disk_full, self.flaky, self.power_loss],
        }[scenario]
        if scenario in ("skew", "mixed") and not self.c.faketime_lib:
            ops = [op for op in ops if op != self.skew]
            if not ops:
                raise RuntimeError("skew needs libfaketime (scripts/setup.sh installs it)")
        deadline = time.monotonic() + seconds
        # A quiet start: the workload's first writes land on a healthy cluster.
        self.hold(2, 3, deadline)
        while time.monotonic() < deadline - 2:
            self.rng.choice(ops)(deadline)
            self.hold(3, 5, deadline)


def client_command(net, venv_python, command, spec_path):
    return net.exec_prefix(net.client_ns) + [venv_python, "-m", "shoal_chaos.client", command, spec_path]


def client_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = BENCH_DIR + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("LD_PRELOAD", None)
    return env


def run_scenario(ctx, scenario, seed, seconds, opts, log=print):
    """Runs one scenario on ctx's started cluster; returns the report."""
    import random

    cluster, net = ctx.cluster, ctx.net
    t_begin = time.monotonic()
    ks = "chaos_" + scenario.replace("-", "_")
    work = os.path.join(ctx.run_dir, ks)
    os.makedirs(work, exist_ok=True)
    hosts = [n.address for n in cluster.nodes]
    spec = {"hosts": hosts, "port": 9042, "keyspace": ks, "rf": len(hosts), "keys": opts.keys,
            "seconds": seconds, "threads": opts.threads, "rate": opts.rate, "write_ratio": opts.write_ratio,
            "timeout": opts.timeout, "seed": seed, "history": os.path.join(work, "history.jsonl"),
            "out": os.path.join(work, "verify.json"), "write_cl": opts.write_cl, "read_cl": opts.read_cl}
    spec_path = os.path.join(work, "spec.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    report = {"scenario": scenario, "seed": seed, "seconds": seconds, "nodes": len(hosts), "rf": len(hosts),
              "write_cl": opts.write_cl, "read_cl": opts.read_cl, "config": cluster.extra_config}
    log(f"chaos {scenario}: schema {ks}, workload {opts.threads} threads at {opts.rate} ops/s for {seconds}s")
    proc = subprocess.run(client_command(net, opts.python, "schema", spec_path), env=client_env(),
                          capture_output=True, text=True, timeout=180)
    if proc.returncode != 0:
        raise RuntimeError(f"creating {ks} failed:\n{proc.stdout}{proc.stderr}")
    err_path = os.path.join(work, "client.log")
    rng = random.Random(seed)
    with open(err_path, "w") as err:
        workload = subprocess.Popen(client_command(net, opts.python, "workload", spec_path), env=client_env(),
                                    stdout=err, stderr=subprocess.STDOUT)
        ctx.children.append(workload)
        nemesis = Nemesis(cluster, net, rng, time.monotonic(), log)
        nemesis.power_all = getattr(opts, "power_loss_all", False)
        try:
            nemesis.run(scenario, seconds)
        finally:
            net.heal()
            cluster.heal()
            nemesis.note("heal-all")
        try:
            workload.wait(timeout=seconds + opts.timeout + 120)
        except subprocess.TimeoutExpired:
            workload.kill()
            workload.wait()
    if workload.returncode != 0:
        with open(err_path) as f:
            raise RuntimeError(f"the workload failed ({workload.returncode}):\n{f.read()[-3000:]}")
    with open(spec["history"]) as f:
        history = [json.loads(line) for line in f if line.strip()]

    timings = {"workload_s": round(time.monotonic() - t_begin, 1)}
    t = time.monotonic()
    try:
        timings["wait_up_s"] = round(cluster.wait_all_up(timeout=180), 1)
        up_error = None
    except RuntimeError as e:
        up_error = str(e)[:500]
    repairs = {}
    t = time.monotonic()
    for node in cluster.nodes:
        for attempt in range(4):
            out, text = cluster.tool(node, "repair", ks, timeout=300)
            if isinstance(out, dict):
                repairs[node.name] = {"ok": True, "partitions_differing": out.get("partitions_differing"),
                                      "bytes_repaired": out.get("bytes_repaired")}
                break
            repairs[node.name] = {"ok": False, "error": text[:300]}
            time.sleep(3)
    timings["repair_s"] = round(time.monotonic() - t, 1)
    differing = {}
    for node in cluster.nodes:
        out, text = cluster.tool(node, "repair", ks, "--full", "--preview", timeout=300)
        differing[node.name] = out.get("partitions_differing") if isinstance(out, dict) else None
    t = time.monotonic()
    proc = subprocess.run(client_command(net, opts.python, "verify", spec_path), env=client_env(),
                          capture_output=True, text=True, timeout=600)
    timings["verify_s"] = round(time.monotonic() - t, 1)
    verify = {}
    if proc.returncode == 0:
        with open(spec["out"]) as f:
            verify = json.load(f)
    final_rows = verify.get("all") or []
    by_addr = {n.address: n.name for n in cluster.nodes}
    rows_by_node = {by_addr[a]: rows for a, rows in verify.get("per_node", {}).items()}
    for n in cluster.nodes:
        rows_by_node.setdefault(n.name, None)
    checks = {
        "no_lost_writes": checkers.check_lost(history, final_rows),
        "convergence": checkers.check_convergence(rows_by_node, differing),
        "quorum_reads": checkers.check_quorum_reads(history),
        "no_crashes": checkers.check_crashes(cluster.crash_report()),
        "rss": checkers.check_rss({n.name: n.max_rss_kb for n in cluster.nodes}, opts.rss_mb * 1024),
    }
    if verify.get("all") is None:
        checks["no_lost_writes"]["ok"] = False
        checks["no_lost_writes"]["read_error"] = verify.get("all_error") or (proc.stderr or "")[-500:]
    if up_error:
        checks["convergence"]["ok"] = False
        checks["convergence"]["not_up"] = up_error
    if not all(r["ok"] for r in repairs.values()):
        checks["convergence"]["ok"] = False
    checks["convergence"]["repairs"] = repairs
    checks["convergence"]["per_node_errors"] = verify.get("per_node_errors", {})
    verdict, failed = checkers.overall(checks)
    timings["total_s"] = round(time.monotonic() - t_begin, 1)
    report.update({
        "verdict": verdict, "failed_checks": failed, "counts": checkers.counts(history),
        "errors": checkers.error_counts(history), "checks": checks, "nemesis": nemesis.events, "timings": timings,
    })
    return report


def verdict_line(r):
    c, k = r["counts"], r["checks"]
    mb = max(k["rss"]["max_rss_kb"].values() or [0]) // 1024
    crashed = sum(1 for v in k["no_crashes"]["nodes"].values() if v["unexpected_exits"] or v["panics"])
    differing = sum(d or 0 for d in k["convergence"]["partitions_differing"].values())
    failed = f" failed={','.join(r['failed_checks'])}" if r["failed_checks"] else ""
    return (f"{r['verdict']} {r['scenario']} seed={r['seed']} {r['seconds']}s: "
            f"writes ok/fail/unknown={c['write']['ok']}/{c['write']['fail']}/{c['write']['unknown']} "
            f"reads ok/fail/unknown={c['read']['ok']}/{c['read']['fail']}/{c['read']['unknown']} "
            f"acked={k['no_lost_writes']['acknowledged']} lost={k['no_lost_writes']['lost']} "
            f"stale_reads={k['quorum_reads']['stale_reads']} differing={differing} crashed={crashed} "
            f"max_rss={mb}MiB in {r['timings']['total_s']}s{failed}")


def write_json(path, data):
    if not path:
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")


def log_stderr(msg):
    print(msg, file=sys.stderr, flush=True)
