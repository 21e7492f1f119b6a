"""The comparison itself (the default mode): `Bench` runs `shoal stress` against a started server
and keeps every run's numbers; per scenario a warm-up, then write, mixed, fixed-rate and (RF=1) the
maximum-rate sweep over client threads and connections. Then the tables (the medians with
Shoal/Cassandra ratios, every run, the max-rate levels), the issue-5 targets, the charts over time
(`results_plots`) and RESULTS.md (`write_results`)."""

import datetime
import json
import os
import shlex
import statistics
import time

from . import plots
from .proc import CLK_TCK, alive, hwm_kib, machine, machine_busy_ticks, reset_hwm
from .servers import serve
from .util import BENCH_HOME, CASS_REF, ROOT, SHOAL_BIN, Fail, log, md_table, sh, shown, shown_out



class Bench:
    def __init__(self, args, out):
        self.args, self.out = args, out
        self.rows = []          # every run: dict(scenario, system, workload, run, ...)
        self.commands = {}      # (scenario, workload) -> a command line as run (first system, run 1)
        self.fixed_rate = {}    # scenario -> (ops/s, what it is 50% of)
        self.notes = []
        self.warmups = {}       # scenario -> discarded warm-up writes per server

    def stress(self, server, scenario, workload, run, stress_args, timeout, keep=True, mode=()):
        """One `shoal stress` run; mode: extra -mode words (connectionsPerHost=N)."""
        name = f"{scenario}-{server.system}-{workload}" + (f"-{run}" if run else "")
        path = os.path.join(self.out, name + ".json")
        if self.args.client == "simplenative" or mode:
            stress_args = stress_args + ["-mode"] + (["simplenative"] if self.args.client == "simplenative" else
                                                     ["native", "cql3", "prepared"]) + list(mode)
        cmd = [SHOAL_BIN, "stress"] + stress_args + [
            "-node", ",".join(server.nodes), "-port", f"native={server.port}",
            "--json", path, "--server-pid", ",".join(map(str, server.pids))]
        cmd_line = " ".join(shlex.quote(a) for a in ["shoal", "stress"] + stress_args)
        log(f"{server.label} {scenario} {workload}{' run ' + str(run) if run else ''}: {cmd_line}")
        for pid in server.pids:
            if not alive(pid):
                raise Fail(f"{server.label} (pid {pid}) is not running any more")
        reset_hwm(server.pids)
        b0, w0 = machine_busy_ticks(), time.time()
        text = sh(cmd, timeout=timeout, check=False)
        b1, w1 = machine_busy_ticks(), time.time()
        with open(os.path.join(self.out, name + ".log"), "w") as f:
            f.write(" ".join(map(shlex.quote, cmd)) + "\n" + text)
        if not os.path.exists(path) or "Total errors" not in text:
            lines = text.splitlines()
            first = next((x for x in lines if x.startswith("shoal stress:") or "error" in x.lower()), "")
            raise Fail(f"{server.label} {workload}: stress failed: {first} (log: {name}.log)\n" + "\n".join(lines[-20:]))
        report = json.load(open(path))
        s = report["summary"]
        if s.get("stopped_by"):
            raise Fail(f"{server.label} {workload}: stopped by an error: {s['stopped_by']}")
        if not keep:
            log(f"  (discarded) {s['op_rate']:,.0f} op/s")
            return None
        wall = max(w1 - w0, 1e-9)
        lat = s["latency"]
        row = dict(scenario=scenario, system=server.system, workload=workload, run=run, json=path,
                   ops=s["ops"], errors=s["errors"], retries=s.get("retries", 0), ops_s=s["op_rate"], p50=lat["p50_ms"], p95=lat["p95_ms"],
                   p99=lat["p99_ms"], p999=lat["p999_ms"], max=lat["max_ms"],
                   cpu_us=s.get("server_cpu_us_per_op"), server_cores=(s.get("server_cpu_s") or 0) / max(s["elapsed_s"], 1e-9),
                   client_cpu_us=s.get("client_cpu_us_per_op"),
                   rss_mib=sum(hwm_kib(p) for p in server.pids) / 1024, elapsed=s["elapsed_s"],
                   machine_busy=(b1 - b0) / CLK_TCK / wall, intended=s.get("latency_from_intended", False))
        if row["cpu_us"] is None:
            raise Fail(f"{server.label}: no server CPU in {path} (could /proc/PID/stat of {server.pids} be read?)")
        self.rows.append(row)
        self.commands.setdefault((scenario, workload), cmd_line)
        log(f"  {row['ops_s']:,.0f} op/s, p50 {row['p50']:.2f} p99 {row['p99']:.2f} ms, "
            f"server {row['cpu_us']:.1f} CPU-us/op, peak RSS {row['rss_mib']:,.0f} MiB, "
            f"machine {row['machine_busy']:.2f} of {os.cpu_count()} cores busy")
        return row

    def scenario(self, server, scenario, cl_args, n, fixed_of=None):
        """Warm-up, then write, mixed and fixed-rate runs against one started server."""
        a = self.args
        # Positional words (cl=...) must come before the first option (-pop, -schema, -rate).
        cl = [w for w in cl_args if "=" in w and not w.startswith("-") and "(" not in w]
        opts = [w for w in cl_args if w not in cl]
        T = opts + ["-rate", f"threads={a.threads}"]
        warm = a.warmup if a.warmup is not None else min(n, 300_000)
        self.warmups[scenario] = (warm, 0 if a.smoke else warm // 2)
        slow = 120 + n // 500  # bounded: at least 500 op/s
        log(f"{server.label} {scenario}: JIT/cache warm-up, discarded ({warm:,} writes + "
            f"{self.warmups[scenario][1]:,} mixed ops)")
        self.stress(server, scenario, "warmup-write", 0, ["write", f"n={warm}"] + cl + T, 120 + warm // 500, keep=False)
        if not a.smoke:
            self.stress(server, scenario, "warmup-mixed", 0, ["mixed", f"n={warm // 2}", "ratio(read=9,write=1)"] + cl +
                        ["-pop", f"dist=uniform(1..{warm})"] + T, 120 + warm // 500, keep=False)
        for r in range(1, a.runs + 1):
            self.stress(server, scenario, "write", r, ["write", f"n={n}", "truncate=always"] + cl + T, slow)
        m = a.mixed_n or n
        for r in range(1, a.runs + 1):
            self.stress(server, scenario, "mixed", r, ["mixed", f"n={m}", "ratio(read=9,write=1)"] + cl +
                        ["-pop", f"dist=uniform(1..{n})"] + T, 120 + m // 500)
        if a.fixed_s > 0:
            if scenario not in self.fixed_rate:
                base = self.median(scenario, fixed_of or server.system, "write", "ops_s")
                self.fixed_rate[scenario] = (max(100, int(base * 0.5)), fixed_of or server.system)
            rate = self.fixed_rate[scenario][0]
            for r in range(1, a.runs + 1):
                self.stress(server, scenario, "fixed", r, ["write", f"duration={a.fixed_s}s"] + cl + opts +
                            ["-rate", f"fixed={rate}/s", f"threads={a.threads}"], a.fixed_s * 3 + 120)
        if scenario == "rf1" and a.max_s > 0:
            for u in max_levels(a):
                threads, conns = level_args(u)
                for r in range(1, a.runs + 1):
                    self.stress(server, scenario, f"max@{u}", r, ["write", f"duration={a.max_s}s", "truncate=always"] +
                                cl + opts + ["-rate", f"threads={threads}"], a.max_s * 3 + 120,
                                mode=[f"connectionsPerHost={conns}"] if conns else [])

    def median(self, scenario, system, workload, key):
        vals = [r[key] for r in self.rows if (r["scenario"], r["system"], r["workload"]) == (scenario, system, workload)]
        if not vals:
            return None
        return max(vals) if key == "rss_mib" else statistics.median(vals)

    def median_run(self, scenario, system, workload):
        """The run with the median throughput (fixed-rate runs: the median p99; they all have one rate)."""
        key = "p99" if workload == "fixed" else "ops_s"
        runs = sorted((r for r in self.rows if (r["scenario"], r["system"], r["workload"]) == (scenario, system, workload)),
                      key=lambda r: r[key])
        return runs[(len(runs) - 1) // 2] if runs else None


def run_system(bench, server, scenario, cl_args, n, fixed_of):
    serve(server, lambda s: bench.scenario(s, scenario, cl_args, n, fixed_of))




# ---------------------------------------------------------------------------------------------
# Tables

METRICS = [("ops_s", "ops/s", "{:,.0f}"), ("p50", "p50 ms", "{:.2f}"), ("p95", "p95 ms", "{:.2f}"),
           ("p99", "p99 ms", "{:.2f}"), ("p999", "p99.9 ms", "{:.2f}"), ("cpu_us", "server CPU-us/op", "{:.1f}"),
           ("rss_mib", "peak RSS MiB", "{:,.0f}")]
WORKLOADS = [("write", "write"), ("mixed", "mixed r9:w1"), ("fixed", "fixed-rate write")]
SCENARIOS = [("rf1", "RF=1, CL=ONE, 1 node"), ("rf3", "RF=3, CL=QUORUM, 3 local nodes")]



def summary_table(bench):
    rows = []
    for sc, sc_name in SCENARIOS:
        for wl, wl_name in WORKLOADS:
            meds = {}
            for system, label in (("cassandra", "Cassandra"), ("shoal", "Shoal")):
                if bench.median(sc, system, wl, "ops_s") is None:
                    continue
                meds[system] = {k: bench.median(sc, system, wl, k) for k, _, _ in METRICS}
                extra = f" @{bench.fixed_rate[sc][0]:,}/s" if wl == "fixed" else ""
                rows.append([sc.upper(), wl_name + extra, label] + [f.format(meds[system][k]) for k, _, f in METRICS])
            if len(meds) == 2:
                c, s = meds["cassandra"], meds["shoal"]
                rows.append([sc.upper(), wl_name, "**Shoal/Cassandra**"] +
                            [f"**{s[k] / c[k]:.2f}x**" if c[k] else "-" for k, _, _ in METRICS])
    return md_table(["scenario", "workload", "system"] + [h for _, h, _ in METRICS], rows)


def runs_table(bench):
    rows = []
    for r in bench.rows:
        rows.append([r["scenario"].upper(), r["workload"], r["system"], str(r["run"]), f"{r['ops']:,}",
                     f"{r['ops_s']:,.0f}", f"{r['p50']:.2f}", f"{r['p95']:.2f}", f"{r['p99']:.2f}", f"{r['p999']:.2f}",
                     f"{r['max']:.1f}", f"{r['cpu_us']:.1f}", f"{r['server_cores']:.2f}",
                     f"{r['client_cpu_us'] or 0:.1f}", f"{r['rss_mib']:,.0f}", f"{r['elapsed']:.1f}",
                     f"{r['machine_busy']:.2f}", f"{r['errors']} ({r.get('retries', 0)})"])
    return md_table(["scenario", "workload", "system", "run", "ops", "ops/s", "p50", "p95", "p99", "p99.9", "max ms",
                     "server CPU-us/op", "server cores busy", "client CPU-us/op", "peak RSS MiB", "seconds",
                     "machine cores busy", "errors (retries)"], rows)


def cores_lines(bench):
    """Where the cores went in each system's median write and mixed run (the machine has os.cpu_count())."""
    out = []
    for sc, _ in SCENARIOS:
        for wl in ("write", "mixed"):
            parts = []
            for system, label in (("cassandra", "Cassandra"), ("shoal", "Shoal")):
                r = bench.median_run(sc, system, wl)
                if r:
                    client = (r["client_cpu_us"] or 0) * r["ops_s"] / 1e6
                    parts.append(f"{label} {r['ops_s']:,.0f} op/s with its server {r['server_cores']:.2f} cores busy, "
                                 f"the client {client:.2f}, the whole machine {r['machine_busy']:.2f}")
            if parts:
                out.append(f"- {sc.upper()} {wl}, cores busy in the median run (of {os.cpu_count()}): " + "; ".join(parts) + ".")
    return out


def targets(bench):
    """The issue-5 targets: (text, met) for what was measured."""
    out = []
    for sc, limit in (("rf1", 10), ("rf3", 5)):
        c, s = bench.median(sc, "cassandra", "write", "cpu_us"), bench.median(sc, "shoal", "write", "cpu_us")
        if c and s:
            ratio = s / c
            out.append((f"{sc.upper()}: server CPU-us per write <= 1/{limit} of Cassandra's: Shoal {s:.1f} vs "
                        f"Cassandra {c:.1f} CPU-us/op = {ratio:.2f}x (needs <= {1 / limit:.2f}x; "
                        f"Cassandra/Shoal = {c / s:.1f}, needs >= {limit})", ratio <= 1 / limit))
    cm, sm = max_rate(bench, "cassandra", None), max_rate(bench, "shoal", 10)
    c, s = bench.median("rf1", "cassandra", "write", "ops_s"), bench.median("rf1", "shoal", "write", "ops_s")
    if cm and sm:
        (cu, c, _), (su, s, p99) = cm, sm
        out.append((f"RF1: maximum write throughput >= 5x Cassandra's with p99 <= 10 ms (phase 4, each system's best "
                    f"level): Shoal {s:,.0f} op/s at {level_name(su)} vs Cassandra {c:,.0f} at {level_name(cu)} = "
                    f"{s / c:.2f}x (needs >= 5x), Shoal's p99 {p99:.2f} ms", s / c >= 5 and p99 <= 10))
    elif c and s:
        p99 = bench.median("rf1", "shoal", "write", "p99")
        out.append((f"RF1: maximum write throughput >= 5x Cassandra's with p99 <= 10 ms: Shoal {s:,.0f} vs Cassandra "
                    f"{c:,.0f} op/s = {s / c:.2f}x (needs >= 5x), Shoal's p99 {p99:.2f} ms",
                    s / c >= 5 and p99 <= 10))
    return out


def max_levels(a):
    """The phase-4 levels of --max-threads, as given: U (client threads) or UxC (U threads over C
    connections per node, cassandra-stress's -mode connectionsPerHost=C)."""
    return [u.strip() for u in a.max_threads.split(",") if u.strip()]


def level_args(u):
    """(threads, connections per host or None) of a level U or UxC; ValueError when malformed."""
    t, _, c = u.partition("x")
    threads, conns = int(t), (int(c) if c else None)
    if threads < 1 or (conns is not None and conns < 1):
        raise ValueError(u)
    return threads, conns


def level_name(u):
    threads, conns = level_args(u)
    return f"threads={threads}" + (f", {conns} connections" if conns else "")


def max_rate(bench, system, p99_cap):
    """(level, median ops/s, median p99) of the level with the best median write rate in phase 4
    (only among those whose median p99 is at most p99_cap ms, when given), or None."""
    best = None
    for u in max_levels(bench.args):
        ops, p99 = bench.median("rf1", system, f"max@{u}", "ops_s"), bench.median("rf1", system, f"max@{u}", "p99")
        if ops is None or (p99_cap is not None and p99 > p99_cap):
            continue
        if best is None or ops > best[1]:
            best = (u, ops, p99)
    return best


def max_table(bench):
    """Phase 4: the median write rate and p99 per level (threads, connections), both systems, and the ratio of their bests."""
    rows = []
    for u in max_levels(bench.args):
        cells = [level_name(u)]
        for system in ("cassandra", "shoal"):
            ops = bench.median("rf1", system, f"max@{u}", "ops_s")
            cells += ([f"{ops:,.0f}", f"{bench.median('rf1', system, f'max@{u}', 'p99'):.2f}",
                       f"{bench.median('rf1', system, f'max@{u}', 'cpu_us'):.1f}"] if ops is not None else ["-", "-", "-"])
        rows.append(cells)
    if not any(c != "-" for r in rows for c in r[1:]):
        return None
    cm, sm = max_rate(bench, "cassandra", None), max_rate(bench, "shoal", 10)
    if cm and sm:
        cpu = lambda system, u: f"{bench.median('rf1', system, f'max@{u}', 'cpu_us'):.1f}"
        rows.append([f"**best** (Shoal: p99 <= 10 ms): Shoal/Cassandra **{sm[1] / cm[1]:.2f}x**",
                     f"**{cm[1]:,.0f}** ({level_name(cm[0])})", f"{cm[2]:.2f}", cpu("cassandra", cm[0]),
                     f"**{sm[1]:,.0f}** ({level_name(sm[0])})", f"{sm[2]:.2f}", cpu("shoal", sm[0])])
    return md_table(["level", "Cassandra ops/s", "p99 ms", "CPU-us/op", "Shoal ops/s", "p99 ms", "CPU-us/op"], rows)


# ---------------------------------------------------------------------------------------------
# Charts: both systems' throughput and latency over time (drawn by `shoal stress plot`, see plots)

def results_plots(bench, results_dir):
    """Per scenario and workload, each system's median run (fixed rate: the run with the median p99)
    over time: throughput, p50 and p99 latency. Returns [(SVG name, drawn)]."""
    made = []
    for sc, _ in SCENARIOS:
        for wl, wl_name in WORKLOADS:
            tput, p50, p99 = [], [], []
            for system, label in (("cassandra", "Cassandra"), ("shoal", "Shoal")):
                r = bench.median_run(sc, system, wl)
                if r:
                    with open(r["json"]) as f:
                        ivs = json.load(f)["intervals"]
                    name = f"{label} (run {r['run']})"
                    tput.append(plots.series(name, [(iv["elapsed_s"], iv["op_rate"]) for iv in ivs], system))
                    p50.append(plots.series(name, [(iv["elapsed_s"], iv["latency"]["p50_ms"]) for iv in ivs], system))
                    p99.append(plots.series(name, [(iv["elapsed_s"], iv["latency"]["p99_ms"]) for iv in ivs], system))
            if not tput:
                continue
            svg = f"results-{wl}.svg" if sc == "rf1" else f"results-{sc}-{wl}.svg"
            short = "RF=1 ONE" if sc == "rf1" else "RF=3 QUORUM, 3 nodes"
            if wl == "fixed":  # latency from each request's intended start: coordinated omission corrected
                title = f"{short}: writes at fixed {bench.fixed_rate[sc][0]:,}/s, median-p99 run, from intended start"
            else:
                title = f"{short}: {wl_name}, median run"
            spec = plots.chart(title, "elapsed seconds", [plots.panel("Throughput", "op/s", tput),
                                                          plots.panel("Latency p50", "ms", p50),
                                                          plots.panel("Latency p99", "ms", p99)])
            made.append((svg, plots.draw(spec, os.path.join(results_dir, svg), bench.out)))
    return made


# ---------------------------------------------------------------------------------------------
# RESULTS.md

def versions(cass_version):
    shoal = sh([SHOAL_BIN, "--version"], timeout=30).strip()
    head = sh(["git", "-C", ROOT, "log", "-1", "--format=%h %cd", "--date=short"], timeout=30, check=False).strip()
    built = datetime.datetime.fromtimestamp(os.path.getmtime(SHOAL_BIN), datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    java = sh(["java", "-version"], timeout=30, check=False).strip().splitlines()
    return {"shoal": f"`{shoal}` ({shown(SHOAL_BIN)}, built {built}; workspace HEAD {head})",
            "cassandra": f"Apache Cassandra {cass_version} (Maven Central jars, {shown(CASS_REF)}), {java[0] if java else 'java ?'}"}


def write_results(bench, path, argv, started, vers, charts, results_dir):
    """RESULTS.md at `path`; charts: [(SVG name in results_dir, drawn)] from `results_plots`."""
    a = bench.args
    tgt = targets(bench)
    L = ["# Shoal vs Apache Cassandra: the benchmark of record (issue 5)", "",
         f"Measured {started} by `{' '.join(argv)}` (wall time {bench.wall / 60:.1f} min).", "",
         "## Setup", "",
         f"- Shoal: {vers['shoal']}", f"- Cassandra: {vers['cassandra']}", f"- Machine: {machine()}",
         "- Client: the same `shoal stress` binary ("
         + ("`-mode simplenative`: its own lean CQL client, token-aware, one connection per node (ADR 0004)"
            if a.client == "simplenative" else "scylla Rust driver")
         + f", prepared statements, 1 client runtime thread) on the same machine, `-rate threads={a.threads}` "
         f"({a.threads} requests in flight).",
         "- Cassandra: `scripts/cassandra/start.sh` (WIPE=1) in a private CASS_HOME under "
         f"`{shown(BENCH_HOME)}/cassandra` (jars linked from the install): 2 GB heap, G1, num_tokens 16, commit log "
         "periodic 10 s, otherwise Cassandra 5.0's defaults (cassandra.yaml.template)."
         " RF=3: `bench/cassandra-cluster.sh up 3` (127.0.0.1-3, 1 GB heap each, seeds 127.0.0.1).",
         f"- Shoal: `shoal server` with num_tokens 16, commit log periodic 10 s (both defaults), default memtables "
         f"(256 MiB per table, 1 GiB in all) and block cache (256 MiB), data in a fresh directory under `{shown(BENCH_HOME)}` (the same disk as "
         "Cassandra's). "
         "RF=3: `shoal cluster up -n 3`.",
         "- In turn, never both at once: Cassandra first (its median write rate sets the fixed rate), then Shoal.",
         "- Warm-up: before the measured runs, each server gets the same discarded warm-up (" +
         ", ".join(f"{sc.upper()}: {w:,} writes + {m:,} mixed ops" for sc, (w, m) in bench.warmups.items()) +
         "; Cassandra needs its JIT warm). Each stress run also has its own short warm-up (a quarter of n, at "
         "most 50,000 ops or 10 s) before its measured phase.",
         "- Errors: as cassandra-stress (`-errors retries=9`, its default), a failed operation is tried again up "
         "to 9 times, each time on the next replica, and counts as an error only after the tenth failure; "
         "one that fails all ten stops the benchmark. The runs table shows errors and retries.",
         "- Server CPU-us/op: utime+stime of the server process(es) from /proc/PID/stat over the measured phase "
         "(`--server-pid`), divided by the operations. It does not count work after the phase ends (flushes, "
         "compactions still running), for either system. Peak RSS: VmHWM, reset before each run (the sum over "
         "nodes at RF=3); the table shows the highest over the runs.",
         "", "## Commands", "", "```sh", f"bench/compare {' '.join(argv[1:])}".rstrip(), "```", "",
         "Per system and scenario (`-node`, `-port`, `--json FILE --server-pid PID` appended to each):", "", "```sh"]
    for (sc, wl), cmd in bench.commands.items():
        L.append(f"# {sc} {wl}\n{cmd}")
    L += ["```", "",
          f"## Results: median of {a.runs} run{'s' if a.runs > 1 else ''} (peak RSS: the highest)", "",
          summary_table(bench), "",
          "Ratios are Shoal/Cassandra: above 1 is better for ops/s, below 1 is better for the rest.", ""]
    mt = max_table(bench)
    if mt:
        L += [f"## Maximum write throughput: client threads and connections swept (RF1, {a.max_s} s runs, median of {a.runs})", "",
              "Each system's maximum is its best median over the levels, client threads and connections per node (Shoal's only where its median p99 "
              "is at most 10 ms), as cassandra-stress's default mode ramps threads up to find it.", "", mt, ""]
    L += ["## Issue 5 targets", ""]
    L += [f"- {'MET' if met else '**NOT MET**'}: {t}" for t, met in tgt]
    measured = {t.split(":")[0] for t, _ in tgt}
    if "RF1" not in measured:
        L.append("- Not measured here: the RF=1 targets (CPU per write <= 1/10, throughput >= 5x with p99 <= 10 ms).")
    if "RF3" not in measured:
        L.append("- Not measured here: the RF=3 QUORUM target (CPU per write <= 1/5; run with `--rf3`).")
    L += ["- Measured separately: the steadiness run (`bench/compare --steadiness`: bench/STEADINESS.md) and the "
          "`commitlog_sync: batch/group` durability variant (`bench/compare --durability`: bench/DURABILITY.md).", ""]
    L += ["## Caveats", "",
          f"- A shared, noisy {os.cpu_count()}-core virtual machine: other engineers' builds and test suites (cargo "
          "build/test, the cluster simulation) may run at the same time; the per-run table's 'machine cores busy' "
          "(all processes, /proc/stat; the server's and client's share is in 'server cores busy' and the client's "
          "CPU per op) shows how loaded the machine was. Compare the ratios of one run of this script, not absolute "
          "numbers across runs.",
          "- Client and server share the 2 cores: the client's CPU is part of every measurement (its own CPU-us "
          "per op is in the per-run table), and both systems are limited by the same cores.",
          "- The two systems ran one after the other, so they met different background load; the medians damp it.",
          ] + [f"- {n}" for n in bench.notes] + cores_lines(bench) + [""]
    if charts:
        L += ["## Over time (the median run of each system; fixed rate: the run with the median p99)", ""]
        L += [plots.md_image(svg, drawn, results_dir, path, bench.out) for svg, drawn in charts]
        L.append("")
    L += ["## Every run", "", runs_table(bench), "",
          f"Raw JSON reports and stress/server logs: `{shown_out(bench.out)}` "
          "(not committed).", ""]
    with open(path, "w") as f:
        f.write("\n".join(L))


# ---------------------------------------------------------------------------------------------
# Steadiness (issue 5, opt-in): one long write run per system, the rate per minute, and the mean of
# the last window against the first (5 minutes each; the first and last fifth of runs under 10).

# -pop seq=1..KEYS (`--keys`): the keys are written in order and then again, as the classic runs did.
# The default is the run behind the complaint itself (the 2011 EC2 thread: `stress -n 10000000` run after
