"""The comparison itself (the default mode): `Bench` runs `shoal stress` against a started server
and keeps every run's numbers; per scenario a warm-up, then write, mixed, fixed-rate and (RF=1) the
maximum-rate sweep over client threads and connections; the LWT and counter scenarios (issue 23)
run their own workloads instead (`EXTRA_SCENARIOS`, `extra_workloads`). Then the tables (the medians
with Shoal/Cassandra ratios, every run, the max-rate levels), the issue-5 targets, the charts over
time (`results_plots`) and RESULTS.md (`write_results`).

Issue 24: each kept run of a workload that writes is followed by the server's settle (`settle_after`:
the settled CPU-us/op, the tail included) and, for write and mixed runs, `shoal stress verify`
(`verify_after`: missing and wrong rows; a mixed run must find every row). With more than one
Cassandra configuration (`cassandra` = the template, `cassandra-latest`), each ratio is Shoal against
the faster for that workload (`best_cassandra`). `write_runs_json` keeps every run's numbers."""

import datetime
import json
import os
import re
import shlex
import statistics
import time

from . import plots, settle
from .proc import CLK_TCK, alive, hwm_kib, machine, machine_busy_ticks, reset_hwm
from .servers import serve, server_cpu_s
from .util import BENCH_HOME, CASS_REF, ROOT, SHOAL_BIN, Fail, log, md_table, sh, shown, shown_out



class Bench:
    def __init__(self, args, out, security=None):
        self.args, self.out = args, out
        self.rows = []          # every run: dict(scenario, system, workload, run, ...)
        self.commands = {}      # (scenario, workload) -> a command line as run (first system, run 1)
        self.fixed_rate = {}    # scenario -> (ops/s, what it is 50% of)
        self.notes = []
        self.warmups = {}       # scenario -> discarded warm-up writes per server
        self.extra_warmups = {}  # LWT/counter scenario -> (discarded warm-up operations, of which workload)
        self.security = security  # --auth/--tls (security.Security): RF=1 again with both servers secured
        self.started = None     # when the run began (UTC text), for the auth/TLS section
        self.tls_sessions = {}  # system -> the TLS version and cipher suite its stress runs reported

    def stress(self, server, scenario, workload, run, stress_args, timeout, keep=True, mode=(), verify_args=None):
        """One `shoal stress` run; mode: extra -mode words (connectionsPerHost=N). A kept run of a workload that
        writes (`WRITES`) is followed by the settle (`settle_after`, --settle) and, given verify_args (the verify
        command's words), a read-back (`verify_after`, --verify)."""
        name = f"{scenario}-{server.system}-{workload}" + (f"-{run}" if run else "")
        path = os.path.join(self.out, name + ".json")
        security = getattr(server, "security", None)
        mode = list(mode) + (security.mode_words() if security else [])
        if self.args.client == "simplenative" or mode:
            stress_args = stress_args + ["-mode"] + (["simplenative"] if self.args.client == "simplenative" else
                                                     ["native", "cql3", "prepared"]) + mode
        if security:
            stress_args = stress_args + security.transport_words()
        cmd = [SHOAL_BIN, "stress"] + stress_args + [
            "-node", ",".join(server.nodes), "-port", f"native={server.port}",
            "--json", path, "--server-pid", ",".join(map(str, server.pids))]
        cmd_line = " ".join(shlex.quote(shown_arg(a)) for a in ["shoal", "stress"] + stress_args)
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
        session = re.search(r"^TLS: (.+) \(-transport\)$", text, re.M)
        if session:
            self.tls_sessions[server.system] = session.group(1)
        with open(path) as f:
            report = json.load(f)
        s = report["summary"]
        if s.get("stopped_by"):
            raise Fail(f"{server.label} {workload}: stopped by an error: {s['stopped_by']}")
        if not keep:
            log(f"  (discarded) {s['op_rate']:,.0f} op/s")
            if workload.startswith("warmup-") and getattr(self.args, "settle", False):
                # The warm-up's flushes and compactions are not the first measured run's.
                result = self.settle_server(server)
                log(f"  settled after {result['seconds']:.0f} s" + (" (timed out)" if result["timed_out"] else ""))
            return None
        wall = max(w1 - w0, 1e-9)
        lat = s["latency"]
        row = dict(scenario=scenario, system=server.system, workload=workload, run=run, json=path,
                   applied=s.get("applied"), not_applied=s.get("not_applied"),
                   ops=s["ops"], errors=s["errors"], retries=s.get("retries", 0), ops_s=s["op_rate"], p50=lat["p50_ms"], p95=lat["p95_ms"],
                   p99=lat["p99_ms"], p999=lat["p999_ms"], max=lat["max_ms"],
                   cpu_us=s.get("server_cpu_us_per_op"), server_cores=(s.get("server_cpu_s") or 0) / max(s["elapsed_s"], 1e-9),
                   client_cpu_us=s.get("client_cpu_us_per_op"),
                   rss_mib=sum(hwm_kib(p) for p in server.pids) / 1024, elapsed=s["elapsed_s"],
                   machine_busy=(b1 - b0) / CLK_TCK / wall, intended=s.get("latency_from_intended", False))
        if row["cpu_us"] is None:
            raise Fail(f"{server.label}: no server CPU in {path} (could /proc/PID/stat of {server.pids} be read?)")
        row.update(settled_cpu_us=None, settle_s=None, settle_timed_out=None, verified=None, missing=None, wrong=None)
        if workload in WRITES or workload.startswith("max@"):
            self.settle_after(server, row, s.get("server_cpu_s"))
            if verify_args is not None:
                self.verify_after(server, scenario, workload, run, row, verify_args, mode)
        self.rows.append(row)
        self.commands.setdefault((scenario, workload), cmd_line)
        log(f"  {row['ops_s']:,.0f} op/s, p50 {row['p50']:.2f} p99 {row['p99']:.2f} ms, "
            f"server {row['cpu_us']:.1f} CPU-us/op"
            + (f" ({row['settled_cpu_us']:.1f} settled after {row['settle_s']:.0f} s)" if row["settled_cpu_us"] else "")
            + (f", verify {row['missing']} missing {row['wrong']} wrong of {row['verified']:,}" if row["verified"] else "")
            + f", peak RSS {row['rss_mib']:,.0f} MiB, machine {row['machine_busy']:.2f} of {os.cpu_count()} cores busy")
        return row

    def settle_after(self, server, row, window_cpu_s):
        """--settle: flush the server and wait until it owes no background work and its CPU is idle
        (`settle.settle`); the row gets the settled CPU per operation (the window's CPU plus the tail's)."""
        if not getattr(self.args, "settle", False):
            return
        c0 = server_cpu_s(server)
        result = self.settle_server(server)
        tail = server_cpu_s(server) - c0
        row.update(settle_s=result["seconds"], settle_timed_out=result["timed_out"], settle_tail_cpu_s=tail,
                   settled_cpu_us=settle.settled_cpu_us(window_cpu_s, tail, row["ops"]))
        if result["timed_out"]:
            self.notes.append(f"{row['scenario'].upper()} {row['workload']} {server.label} run {row['run']}: not settled "
                              f"after {self.args.settle_timeout} s (last status {result['last']}); its settled figure "
                              "counts the CPU until then.")
            log(f"  warning: not settled after {self.args.settle_timeout} s: {result['last']}")

    def settle_server(self, server):
        return settle.settle(server.flush, server.compaction_status, lambda: server_cpu_s(server),
                             self.args.settle_timeout)

    def verify_after(self, server, scenario, workload, run, row, verify_args, mode):
        """--verify: `shoal stress verify` of the keys the scenario's writes made; the row gets the keys checked,
        missing and wrong. A mixed run must find every row (Fail otherwise)."""
        if not getattr(self.args, "verify", False):
            return
        name = f"{scenario}-{server.system}-{workload}-{run}-verify"
        path = os.path.join(self.out, name + ".json")
        security = getattr(server, "security", None)
        mode = list(mode) + (security.mode_words() if security else [])
        words = list(verify_args)
        if self.args.client == "simplenative" or mode:
            words += ["-mode"] + (["simplenative"] if self.args.client == "simplenative" else
                                  ["native", "cql3", "prepared"]) + mode
        if security:
            words += security.transport_words()
        cmd = [SHOAL_BIN, "stress"] + words + ["-node", ",".join(server.nodes), "-port", f"native={server.port}",
                                               "--json", path, "--keep-going"]
        self.commands.setdefault((scenario, "verify"), " ".join(shlex.quote(shown_arg(a)) for a in ["shoal", "stress"] + words))
        text = sh(cmd, timeout=300 + row["ops"] // 200, check=False)
        with open(os.path.join(self.out, name + ".log"), "w") as f:
            f.write(" ".join(map(shlex.quote, cmd)) + "\n" + text)
        try:
            with open(path) as f:
                checked, missing, wrong, errors = settle.verify_counts(json.load(f))
        except (OSError, ValueError, KeyError) as e:
            raise Fail(f"{server.label} {workload} verify: no report ({e}; log: {name}.log)\n" + "\n".join(text.splitlines()[-20:]))
        row.update(verified=checked, missing=missing, wrong=wrong, verify_errors=errors)
        if workload == "mixed" and missing:
            raise Fail(f"{server.label} mixed run {run}: verify found {missing:,} of {checked:,} rows missing "
                       f"(a mixed run must find every row; log: {name}.log)")

    def scenario(self, server, scenario, cl_args, n, fixed_of=None):
        """Warm-up, then write, mixed and fixed-rate runs against one started server (the LWT and
        counter scenarios: `extra_scenario`)."""
        if scenario in dict(EXTRA_SCENARIOS):
            return self.extra_scenario(server, scenario, n)
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
        verify = ["verify", f"n={n}"] + cl + T
        for r in range(1, a.runs + 1):
            self.stress(server, scenario, "write", r, ["write", f"n={n}", "truncate=always"] + cl + T, slow,
                        verify_args=verify)
        m = a.mixed_n or n
        for r in range(1, a.runs + 1):
            self.stress(server, scenario, "mixed", r, ["mixed", f"n={m}", "ratio(read=9,write=1)"] + cl +
                        ["-pop", f"dist=uniform(1..{n})"] + T, 120 + m // 500, verify_args=verify)
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

    def extra_scenario(self, server, scenario, n):
        """The LWT or counter scenario against one started server: a discarded warm-up of its first
        workload, then each workload --runs times (`extra_workloads`)."""
        a = self.args
        T = ["-rate", f"threads={a.threads}"]
        warm = min(n, a.warmup if a.warmup is not None else 300_000)
        workloads = extra_workloads(scenario, n)
        first, words = workloads[0][0], extra_workloads(scenario, warm)[0][1]
        self.extra_warmups[scenario] = (warm, first)
        log(f"{server.label} {scenario}: warm-up, discarded ({warm:,} {first} operations)")
        self.stress(server, scenario, f"warmup-{first}", 0, words + T, 120 + warm // 200, keep=False)
        for wl, words in workloads:
            for r in range(1, a.runs + 1):
                self.stress(server, scenario, wl, r, words + T, 120 + n // 200)

    def median(self, scenario, system, workload, key):
        vals = [r[key] for r in self.rows if (r["scenario"], r["system"], r["workload"]) == (scenario, system, workload)
                and r.get(key) is not None]
        if not vals:
            return None
        return max(vals) if key == "rss_mib" else statistics.median(vals)

    def median_run(self, scenario, system, workload):
        """The run with the median throughput (fixed-rate runs: the median p99; they all have one rate)."""
        key = "p99" if workload == "fixed" else "ops_s"
        runs = sorted((r for r in self.rows if (r["scenario"], r["system"], r["workload"]) == (scenario, system, workload)),
                      key=lambda r: r[key])
        return runs[(len(runs) - 1) // 2] if runs else None


def write_runs_json(bench, path):
    """Every kept run's numbers (the tables' source: in-window and settled CPU-us/op, verify counts) as JSON."""
    with open(path, "w") as f:
        json.dump(dict(started=bench.started, runs=bench.rows, fixed_rate=bench.fixed_rate), f, indent=1, default=str)
        f.write("\n")


def run_system(bench, server, scenario, cl_args, n, fixed_of):
    serve(server, lambda s: bench.scenario(s, scenario, cl_args, n, fixed_of))


def shown_arg(arg):
    """A stress argument as the reports print it: a file after `truststore=` through `shown`."""
    key, eq, value = arg.partition("=")
    return f"{key}={shown(value)}" if eq and key in ("truststore", "keystore") else arg




# ---------------------------------------------------------------------------------------------
# Tables

# The workloads that write: each kept run of one (and of the max@ levels) is settled before the next.
WRITES = ("write", "mixed", "fixed", "counter_write", "lwt")

METRICS = [("ops_s", "ops/s", "{:,.0f}"), ("p50", "p50 ms", "{:.2f}"), ("p95", "p95 ms", "{:.2f}"),
           ("p99", "p99 ms", "{:.2f}"), ("p999", "p99.9 ms", "{:.2f}"), ("cpu_us", "server CPU-us/op", "{:.1f}"),
           ("settled_cpu_us", "settled CPU-us/op", "{:.1f}"), ("rss_mib", "peak RSS MiB", "{:,.0f}")]
WORKLOADS = [("write", "write"), ("mixed", "mixed r9:w1"), ("fixed", "fixed-rate write")]
SCENARIOS = [("rf1", "RF=1, CL=ONE, 1 node"), ("rf3", "RF=3, CL=QUORUM, 3 local nodes")]


# LWT and counters (issue 23): one node, RF=1, in turn as the other scenarios; their own workloads.
EXTRA_SCENARIOS = [("lwt", "LWT, RF=1, 1 node: INSERT IF NOT EXISTS on new keys + UPDATE ... IF on inserted "
                           "ones (1:1), SERIAL, commit at QUORUM"),
                   ("counter", "Counters, RF=1, CL=ONE, 1 node: cassandra-stress's counter1 (5 counter columns)")]
EXTRA_HEADING = "## LWT and counters (issue 23)"


def extra_workloads(scenario, n):
    """[(workload, stress words)] of the LWT or counter scenario, n operations each (positional words
    first: the caller appends -rate). counter_read reads the keys the last counter_write run wrote."""
    if scenario == "lwt":
        return [("lwt", ["lwt", f"n={n}", "truncate=always", "ratio(insert=1,update=1)", "cl=QUORUM",
                         "serial-cl=SERIAL"])]
    if scenario == "counter":
        return [("counter_write", ["counter_write", f"n={n}", "truncate=always", "cl=ONE", "add=fixed(1)"]),
                ("counter_read", ["counter_read", f"n={n}", "cl=ONE", "-pop", f"dist=uniform(1..{n})"])]
    raise ValueError(scenario)


def extra_table(bench):
    """The medians of the LWT and counter workloads per system, with Shoal/Cassandra ratios, or None
    when neither was measured."""
    metrics = [m for m in METRICS if m[0] not in ("rss_mib", "settled_cpu_us")]
    rows = []
    for sc, _ in EXTRA_SCENARIOS:
        for wl, _ in extra_workloads(sc, 1):
            meds = {}
            for system, label in (("cassandra", "Cassandra"), ("shoal", "Shoal")):
                if bench.median(sc, system, wl, "ops_s") is None:
                    continue
                meds[system] = {k: bench.median(sc, system, wl, k) for k, _, _ in metrics}
                rows.append([sc.upper(), wl, label] + [fmt(f, meds[system][k]) for k, _, f in metrics] +
                            [applied_share(bench, sc, system, wl)])
            if len(meds) == 2:
                c, s = meds["cassandra"], meds["shoal"]
                rows.append([sc.upper(), wl, "**Shoal/Cassandra**"] +
                            [f"**{s[k] / c[k]:.2f}x**" if c[k] and s[k] is not None else "-" for k, _, _ in metrics]
                            + [""])
    if not rows:
        return None
    return md_table(["scenario", "workload", "system"] + [h for _, h, _ in metrics] + ["LWT applied"], rows)


def applied_share(bench, scenario, system, workload):
    """`applied / not applied` summed over the runs of an LWT workload, with the applied share; '' otherwise."""
    runs = [r for r in bench.rows if (r["scenario"], r["system"], r["workload"]) == (scenario, system, workload)
            and r.get("applied") is not None]
    if not runs:
        return ""
    applied, refused = sum(r["applied"] for r in runs), sum(r["not_applied"] or 0 for r in runs)
    return f"{applied:,} / {refused:,} ({100 * applied / max(applied + refused, 1):.1f}%)"


def extra_section(bench, argv):
    """The RESULTS.md section of the LWT and counter scenarios: what ran, the medians, the commands."""
    a = bench.args
    L = [EXTRA_HEADING, "",
         f"Measured {bench.started} by `{' '.join(argv)}` on {machine()}: each system started fresh "
         f"(RF=1, one node, the settings of the Setup above), a discarded warm-up (" +
         ", ".join(f"{sc.upper()}: {w:,} {wl} operations" for sc, (w, wl) in bench.extra_warmups.items()) +
         f"), then each workload {a.runs} time{'s' if a.runs > 1 else ''}, `-rate threads={a.threads}`; "
         f"median of the runs.", ""]
    vers = getattr(bench, "versions", None)
    if vers:
        L += [f"- Shoal: {vers['shoal']}", f"- Cassandra: {vers['cassandra']}"]
    L += [f"- {sc.upper()}: {text}." for sc, text in EXTRA_SCENARIOS if sc in bench.extra_warmups]
    L += ["- `shoal stress lwt` is a Shoal extension (cassandra-stress has no LWT command): operation i is an "
          "`INSERT INTO lwt1 (key, v, \"C0\"..\"C4\") VALUES (?, 0, ...) IF NOT EXISTS` of a new key or, half the "
          "time, an `UPDATE lwt1 SET v = ? WHERE key = ? IF v = ?` of the key of an earlier insert, expecting the "
          "value the client last saw there (a refusal reports the current value). Serial consistency SERIAL, "
          "commit consistency QUORUM (one replica at RF=1). `LWT applied` sums the runs' applied / not applied "
          "statements; retries after a timeout count as one operation.",
          "- `counter_write` and `counter_read` are cassandra-stress's: `UPDATE counter1 SET \"C0\" = \"C0\" + ?, "
          "... WHERE key = ?` with `add=fixed(1)`, then `SELECT` of the keys written (uniform).",
          "- Cassandra 5.0.9 runs its default Paxos (`paxos_variant: v1`, 4 round trips per uncontended write; "
          "Shoal's is v2-like, 2 + the commit); no fixed-rate or max-rate phase for these workloads.", ""]
    table = extra_table(bench)
    if table:
        L += [table, "", "Ratios are Shoal/Cassandra: above 1 is better for ops/s, below 1 is better for the rest.", ""]
    L += ["Commands (`-node`, `-port`, `--json FILE --server-pid PID` appended to each):", "", "```sh"]
    for (sc, wl), cmd in bench.commands.items():
        if sc in dict(EXTRA_SCENARIOS):
            L.append(f"# {sc} {wl}\n{cmd}")
    L += ["```", ""]
    if a.quick or a.smoke:
        L += [f"Short runs ({'--quick' if a.quick else '--smoke'}): Cassandra's JIT is warmer after a longer "
              "warm-up, and /proc counts CPU in 10 ms ticks; the full mode's longer runs are the ones to quote.", ""]
    return L


def variant_name(security):
    """The scenario of the --auth/--tls runs: RF=1 with both servers secured (`rf1-auth-tls`)."""
    return f"rf1-{security.name}"


def scenarios(bench):
    """SCENARIOS, with the --auth/--tls variant after RF=1 when there is one."""
    if not bench.security:
        return SCENARIOS
    return [SCENARIOS[0], (variant_name(bench.security), f"RF=1 with {bench.security.label}")] + SCENARIOS[1:]



def cassandra_systems(bench):
    """The Cassandra configurations measured (`cassandra`: the template's, `cassandra-latest`), in that order."""
    found = {r["system"] for r in bench.rows if r["system"].startswith("cassandra")}
    return [x for x in ("cassandra", "cassandra-latest") if x in found]


def system_label(system):
    return {"cassandra": "Cassandra", "cassandra-latest": "Cassandra (latest)", "shoal": "Shoal"}.get(system, system)


def best_cassandra(bench, scenario, workload):
    """The faster Cassandra configuration for a workload: the higher median ops/s (fixed-rate runs, all at one rate:
    the lower median p99), or None when none ran it."""
    runs = [c for c in cassandra_systems(bench) if bench.median(scenario, c, workload, "ops_s") is not None]
    if not runs:
        return None
    if workload == "fixed":
        return min(runs, key=lambda c: bench.median(scenario, c, workload, "p99"))
    return max(runs, key=lambda c: bench.median(scenario, c, workload, "ops_s"))


def fmt(f, v):
    return "-" if v is None else f.format(v)


def verify_cell(bench, scenario, system, workload):
    """`missing / wrong` summed over a workload's verified runs ('-' when none was verified)."""
    runs = [r for r in bench.rows if (r["scenario"], r["system"], r["workload"]) == (scenario, system, workload)
            and r.get("verified") is not None]
    if not runs:
        return "-"
    return f"{sum(r['missing'] for r in runs):,} / {sum(r['wrong'] for r in runs):,}"


def summary_table(bench):
    """Medians per scenario, workload and system; the ratio row is Shoal against the faster Cassandra
    configuration for that workload (`best_cassandra`), named when more than one ran."""
    rows = []
    many = len(cassandra_systems(bench)) > 1
    for sc, sc_name in scenarios(bench):
        for wl, wl_name in WORKLOADS:
            meds = {}
            for system in cassandra_systems(bench) + ["shoal"]:
                if bench.median(sc, system, wl, "ops_s") is None:
                    continue
                meds[system] = {k: bench.median(sc, system, wl, k) for k, _, _ in METRICS}
                extra = f" @{bench.fixed_rate[sc][0]:,}/s" if wl == "fixed" else ""
                rows.append([sc.upper(), wl_name + extra, system_label(system)] +
                            [fmt(f, meds[system][k]) for k, _, f in METRICS] + [verify_cell(bench, sc, system, wl)])
            best = best_cassandra(bench, sc, wl)
            if best and "shoal" in meds:
                c, s = meds[best], meds["shoal"]
                against = f" ({'latest' if best == 'cassandra-latest' else 'template'}, the faster)" if many else ""
                rows.append([sc.upper(), wl_name, f"**Shoal/Cassandra{against}**"] +
                            [f"**{s[k] / c[k]:.2f}x**" if c[k] and s[k] is not None else "-" for k, _, _ in METRICS]
                            + [""])
    return md_table(["scenario", "workload", "system"] + [h for _, h, _ in METRICS] + ["verify missing / wrong"], rows)


def runs_table(bench):
    rows = []
    for r in bench.rows:
        settled = "-" if r.get("settled_cpu_us") is None else (
            f"{r['settled_cpu_us']:.1f}" + (" (timed out)" if r.get("settle_timed_out") else ""))
        rows.append([r["scenario"].upper(), r["workload"], r["system"], str(r["run"]), f"{r['ops']:,}",
                     f"{r['ops_s']:,.0f}", f"{r['p50']:.2f}", f"{r['p95']:.2f}", f"{r['p99']:.2f}", f"{r['p999']:.2f}",
                     f"{r['max']:.1f}", f"{r['cpu_us']:.1f}", settled, fmt("{:.0f}", r.get("settle_s")),
                     f"{r['server_cores']:.2f}",
                     f"{r['client_cpu_us'] or 0:.1f}", f"{r['rss_mib']:,.0f}", f"{r['elapsed']:.1f}",
                     f"{r['machine_busy']:.2f}", f"{r['errors']} ({r.get('retries', 0)})",
                     "-" if r.get("verified") is None else f"{r['verified']:,}: {r['missing']:,} / {r['wrong']:,}"])
    return md_table(["scenario", "workload", "system", "run", "ops", "ops/s", "p50", "p95", "p99", "p99.9", "max ms",
                     "server CPU-us/op", "settled CPU-us/op", "settle s", "server cores busy", "client CPU-us/op",
                     "peak RSS MiB", "seconds", "machine cores busy", "errors (retries)",
                     "verified: missing / wrong"], rows)


def cores_lines(bench):
    """Where the cores went in each system's median write and mixed run (the machine has os.cpu_count())."""
    out = []
    for sc, _ in scenarios(bench):
        for wl in ("write", "mixed"):
            parts = []
            for system in cassandra_systems(bench) + ["shoal"]:
                label = system_label(system)
                r = bench.median_run(sc, system, wl)
                if r:
                    client = (r["client_cpu_us"] or 0) * r["ops_s"] / 1e6
                    parts.append(f"{label} {r['ops_s']:,.0f} op/s with its server {r['server_cores']:.2f} cores busy, "
                                 f"the client {client:.2f}, the whole machine {r['machine_busy']:.2f}")
            if parts:
                out.append(f"- {sc.upper()} {wl}, cores busy in the median run (of {os.cpu_count()}): " + "; ".join(parts) + ".")
    return out


def targets(bench):
    """The issue-5 targets, the settled one and the read-back of issue 24: (text, met) for what was measured,
    each against the faster Cassandra configuration for the workload."""
    out = []
    for sc, limit in (("rf1", 10), ("rf3", 5)):
        best = best_cassandra(bench, sc, "write")
        c, s = (bench.median(sc, best, "write", "cpu_us") if best else None), bench.median(sc, "shoal", "write", "cpu_us")
        if c and s:
            ratio = s / c
            out.append((f"{sc.upper()}: server CPU-us per write <= 1/{limit} of Cassandra's: Shoal {s:.1f} vs "
                        f"{system_label(best)} {c:.1f} CPU-us/op = {ratio:.2f}x (needs <= {1 / limit:.2f}x; "
                        f"Cassandra/Shoal = {c / s:.1f}, needs >= {limit})", ratio <= 1 / limit))
        c = bench.median(sc, best, "write", "settled_cpu_us") if best else None
        s = bench.median(sc, "shoal", "write", "settled_cpu_us")
        if c and s and sc == "rf1":
            out.append((f"{sc.upper()}: settled server CPU-us per write (flushes and compactions done) <= 1/10 of "
                        f"Cassandra's (issue 24): Shoal {s:.1f} vs {system_label(best)} {c:.1f} = {s / c:.2f}x "
                        f"(needs <= 0.10x)", s / c <= 0.1))
    verified = [r for r in bench.rows if r.get("verified") is not None]
    if verified:
        bad = [r for r in verified if r["missing"] or r["wrong"]]
        out.append((f"Verify (issue 24): every write phase read back, 0 missing and 0 wrong on every system: "
                    f"{len(verified)} verified runs, {len(bad)} with missing or wrong rows"
                    + (" (" + ", ".join(f"{r['scenario'].upper()} {r['workload']} {r['system']} run {r['run']}: "
                                        f"{r['missing']:,} missing, {r['wrong']:,} wrong" for r in bad[:5]) + ")"
                       if bad else ""), not bad))
    cm, sm = best_max_rate(bench), max_rate(bench, "shoal", 10)
    best = best_cassandra(bench, "rf1", "write")
    c, s = (bench.median("rf1", best, "write", "ops_s") if best else None), bench.median("rf1", "shoal", "write", "ops_s")
    if cm and sm:
        (cu, c, _), (su, s, p99) = cm[1], sm
        out.append((f"RF1: maximum write throughput >= 5x Cassandra's with p99 <= 10 ms (phase 4, each system's best "
                    f"level): Shoal {s:,.0f} op/s at {level_name(su)} vs {system_label(cm[0])} {c:,.0f} at "
                    f"{level_name(cu)} = {s / c:.2f}x (needs >= 5x), Shoal's p99 {p99:.2f} ms", s / c >= 5 and p99 <= 10))
    elif c and s:
        p99 = bench.median("rf1", "shoal", "write", "p99")
        out.append((f"RF1: maximum write throughput >= 5x Cassandra's with p99 <= 10 ms: Shoal {s:,.0f} vs Cassandra "
                    f"{c:,.0f} op/s = {s / c:.2f}x (needs >= 5x), Shoal's p99 {p99:.2f} ms",
                    s / c >= 5 and p99 <= 10))
    return out


def best_max_rate(bench):
    """(Cassandra system, its `max_rate`) of the configuration with the best maximum write rate, or None."""
    found = [(c, max_rate(bench, c, None)) for c in cassandra_systems(bench)]
    found = [x for x in found if x[1]]
    return max(found, key=lambda x: x[1][1]) if found else None


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
    best = best_max_rate(bench)
    cass = best[0] if best else "cassandra"
    for u in max_levels(bench.args):
        cells = [level_name(u)]
        for system in (cass, "shoal"):
            ops = bench.median("rf1", system, f"max@{u}", "ops_s")
            cells += ([f"{ops:,.0f}", f"{bench.median('rf1', system, f'max@{u}', 'p99'):.2f}",
                       f"{bench.median('rf1', system, f'max@{u}', 'cpu_us'):.1f}"] if ops is not None else ["-", "-", "-"])
        rows.append(cells)
    if not any(c != "-" for r in rows for c in r[1:]):
        return None
    cm, sm = (best[1] if best else None), max_rate(bench, "shoal", 10)
    if cm and sm:
        cpu = lambda system, u: f"{bench.median('rf1', system, f'max@{u}', 'cpu_us'):.1f}"
        rows.append([f"**best** (Shoal: p99 <= 10 ms): Shoal/Cassandra **{sm[1] / cm[1]:.2f}x**",
                     f"**{cm[1]:,.0f}** ({level_name(cm[0])})", f"{cm[2]:.2f}", cpu(cass, cm[0]),
                     f"**{sm[1]:,.0f}** ({level_name(sm[0])})", f"{sm[2]:.2f}", cpu("shoal", sm[0])])
    return md_table(["level", f"{system_label(cass)} ops/s", "p99 ms", "CPU-us/op", "Shoal ops/s", "p99 ms", "CPU-us/op"],
                    rows)


# ---------------------------------------------------------------------------------------------
# Charts: both systems' throughput and latency over time (drawn by `shoal stress plot`, see plots)

def results_plots(bench, results_dir):
    """Per scenario and workload, each system's median run (fixed rate: the run with the median p99)
    over time: throughput, p50 and p99 latency. Returns [(SVG name, drawn)]."""
    made = []
    for sc, _ in SCENARIOS:
        for wl, wl_name in WORKLOADS:
            tput, p50, p99 = [], [], []
            for system in cassandra_systems(bench) + ["shoal"]:
                label = system_label(system)
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


# ---------------------------------------------------------------------------------------------
# --auth/--tls: the secured RF=1 runs against the plain ones

SECURITY_HEADING = "## Auth and TLS: the cost against the plain run"


def _signed(x):
    """`+1.5`, `-0.3`; `+0.0` for what rounds to zero (never `-0.0`)."""
    return f"{0.0 if abs(x) < 0.05 else x:+.1f}"


def _pct(new, old):
    """The change from `old` to `new` in percent, `+25%`."""
    change = (new / old - 1) * 100 if old else 0.0
    return f"{0 if abs(change) < 0.5 else change:+.0f}%"


def _med(bench, scenario, system, workload, key):
    vals = [r[key] for r in bench.rows
            if (r["scenario"], r["system"], r["workload"]) == (scenario, system, workload) and r[key] is not None]
    return statistics.median(vals) if vals else None


def security_table(bench):
    """Per workload and system: the plain RF=1 medians against those of the secured runs."""
    v, label = variant_name(bench.security), bench.security.label
    rows = []
    for wl, wl_name in WORKLOADS:
        for system, name in (("cassandra", "Cassandra"), ("shoal", "Shoal")):
            m = {(sc, k): _med(bench, sc, system, wl, k) for sc in ("rf1", v)
                 for k in ("ops_s", "cpu_us", "client_cpu_us", "p99")}
            if m[("rf1", "ops_s")] is None or m[(v, "ops_s")] is None:
                continue
            ops0, ops1, cpu0, cpu1 = m[("rf1", "ops_s")], m[(v, "ops_s")], m[("rf1", "cpu_us")], m[(v, "cpu_us")]
            c0, c1 = m[("rf1", "client_cpu_us")] or 0, m[(v, "client_cpu_us")] or 0
            rows.append([wl_name, name, f"{ops0:,.0f}", f"{ops1:,.0f}", f"{_pct(ops1, ops0)}",
                         f"{cpu0:.1f}", f"{cpu1:.1f}", f"**{_signed(cpu1 - cpu0)}** ({_pct(cpu1, cpu0)})",
                         f"{c0:.1f} -> {c1:.1f}", f"{m[('rf1', 'p99')]:.2f} -> {m[(v, 'p99')]:.2f}"])
    if not rows:
        return None
    return md_table(["workload", "system", "ops/s plain", f"ops/s {label}", "ops/s change", "server CPU-us/op plain",
                     f"server CPU-us/op {label}", "extra server CPU-us/op", "client CPU-us/op", "p99 ms"], rows)


def security_cost_lines(bench):
    """The cost per write in words: each system's extra server CPU per write (closed-loop writes, and at the
    fixed rate when measured: the same load for both variants, and runs long enough for /proc's 10 ms ticks),
    and Shoal against Cassandra."""
    v, label = variant_name(bench.security), bench.security.label
    out = []
    for wl, what in (("write", "per write"), ("fixed", "per write at the fixed rate")):
        cpu = {(sc, system): _med(bench, sc, system, wl, "cpu_us") for sc in ("rf1", v)
               for system in ("cassandra", "shoal")}
        parts = []
        for system, name in (("cassandra", "Cassandra"), ("shoal", "Shoal")):
            a, b = cpu[("rf1", system)], cpu[(v, system)]
            if a and b:
                parts.append(f"{name} {a:.1f} -> {b:.1f} ({_signed(b - a)}, {_pct(b, a)})")
        if parts:
            rate = f" ({bench.fixed_rate[v][0]:,}/s)" if wl == "fixed" and v in bench.fixed_rate else ""
            out.append(f"- Server CPU-us {what}{rate}, plain -> {label}: " + "; ".join(parts) + ".")
        c0, s0, c1, s1 = cpu[("rf1", "cassandra")], cpu[("rf1", "shoal")], cpu[(v, "cassandra")], cpu[(v, "shoal")]
        if c0 and s0 and c1 and s1:
            out.append(f"  Shoal/Cassandra: {s1 / c1:.2f}x with {label} on both (Cassandra/Shoal = {c1 / s1:.1f}), "
                       f"{s0 / c0:.2f}x plain.")
    return out


def security_section(bench, argv):
    """The RESULTS.md section of the --auth/--tls runs: what was secured, the table, the cost per write, and the
    Cassandra configuration used."""
    sec, v = bench.security, variant_name(bench.security)
    cmd = " ".join(argv)
    fixed = bench.args.fixed_s > 0
    workloads = "write, mixed and fixed-rate" if fixed else "write and mixed"
    runs = f"{bench.args.runs} run{'s' if bench.args.runs > 1 else ''} each" + (
        ", the fixed-rate ones at the plain runs' rate" if fixed else "")
    L = [SECURITY_HEADING, "",
         f"Measured {bench.started} by `{cmd}` on {machine()}. The same invocation ran each system's plain RF=1 "
         f"runs first, then the same {workloads} workloads ({runs}) against the same server restarted with "
         f"{sec.label} (scenario {v.upper()} in the tables above and below).", ""]
    if sec.auth:
        L.append("- auth: `authenticator: PasswordAuthenticator`, `authorizer: CassandraAuthorizer` on both; the "
                 f"client logs in as the default superuser (`-mode simplenative user=cassandra password=cassandra`), "
                 "once per connection; each request is then checked against the role's cached permissions.")
    if sec.tls:
        L.append("- TLS: the native port TLS-only (`client_encryption_options: enabled: true, optional: false`, no "
                 "client certificates), both servers presenting the same EC P-256 certificate from a throw-away CA "
                 "(`openssl`, PEM keystore: the unencrypted PKCS#8 key and the certificate); the client verifies the "
                 "chain, not the host name (`-transport truststore=ca.pem`). The stress client sets the run up "
                 "through its own connections (its driver has no TLS in this build).")
        if bench.tls_sessions:
            L.append("- Negotiated (as `shoal stress` reported it): " + "; ".join(
                f"{name} {bench.tls_sessions[system]}" for system, name in (("cassandra", "Cassandra"), ("shoal", "Shoal"))
                if system in bench.tls_sessions) + ".")
    table = security_table(bench)
    if table:
        L += ["", f"Medians (RF=1, `-rate threads={bench.args.threads}`):", "", table, ""]
    L += security_cost_lines(bench)
    if bench.args.runs == 1:
        L += ["", "One run of each (--quick or --smoke): a single short run moves by more than the cost measured here "
              "(Cassandra's JIT and compactions; the CPU of a run under a second is counted in /proc's 10 ms ticks). "
              + ("The fixed-rate runs, the same load for 10 s or more, are the steadiest measure here; " if fixed else "")
              + "the full mode's median of 3 runs of 2,000,000 operations is the one to quote."]
    L += ["", "Cassandra's configuration for these runs: scripts/cassandra/cassandra.yaml.template with",
          "", "```yaml"]
    if sec.auth:
        L += ["authenticator: PasswordAuthenticator", "authorizer: CassandraAuthorizer"]
    if sec.tls:
        L += ["client_encryption_options:", "  enabled: true", "  optional: false",
              "  keystore: node.pem            # private key (PKCS#8, unencrypted) + certificate, PEM",
              "  require_client_auth: false", "  ssl_context_factory:",
              "    class_name: org.apache.cassandra.security.PEMBasedSslContextFactory"]
    L += ["```", "", "and Shoal's shoal.yaml the same lines (without `ssl_context_factory`: Shoal reads PEM only).", ""]
    return L


def carried_section(path, heading):
    """The section under `heading` of the RESULTS.md being replaced (a run without --auth/--tls keeps the last
    measured one, which names its own command and date), or nothing."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return []
    start = text.find("\n" + heading + "\n")
    if start < 0:
        return []
    end = text.find("\n## ", start + 1)
    kept = "(Kept from the previous RESULTS.md: this run did not measure it.)"
    body = text[start + 1:end if end >= 0 else len(text)].rstrip("\n").split("\n")
    while body and body[-1] in (kept, ""):
        body.pop()
    return body + ["", kept, ""]


def update_section(path, heading, lines):
    """Replaces the section under `heading` of the Markdown file at `path` with `lines` (which start with
    the heading), or inserts them before "## Issue 5 targets" (at the end when there is none)."""
    with open(path) as f:
        text = f.read()
    new = "\n".join(lines).rstrip("\n") + "\n\n"
    start = text.find("\n" + heading + "\n")
    if start >= 0:
        end = text.find("\n## ", start + 1)
        text = text[:start + 1] + new + (text[end + 1:] if end >= 0 else "")
    else:
        at = text.find("\n## Issue 5 targets\n")
        text = text[:at + 1] + new + text[at + 1:] if at >= 0 else text.rstrip("\n") + "\n\n" + new
    with open(path, "w") as f:
        f.write(text.rstrip("\n") + "\n")


def setup_issue24_lines(a):
    """The Setup bullets of issue 24's additions, as this run used them."""
    L = []
    if getattr(a, "settle", False):
        L.append("- Settled CPU-us/op (issue 24): after each run that writes, the server is flushed (`shoal tool flush`; "
                 "`nodetool flush`) and polled (`shoal tool compactionstats --json`; `nodetool compactionstats`) until "
                 "no task is pending or running and its CPU grows by less than 2% of a core over 2 s, or holds steady "
                 "below 10% of a core over two such windows (an idle JVM's background, counted too; at most "
                 f"{a.settle_timeout} s); the server's CPU from the end of the measured phase until then is added to "
                 "the phase's own, divided by the phase's operations. Every phase starts on a settled server. The "
                 "nodetool polls (one JVM each, every second or so) cost Cassandra's JMX a little CPU, counted too.")
    if getattr(a, "verify", False):
        L.append("- Verify (issue 24): after each write and mixed run, `shoal stress verify n=N` reads back every key "
                 "the write runs made (the same deterministic values): keys checked, missing, wrong; a mixed run "
                 "must find every row.")
    config = getattr(a, "cassandra_config", "template")
    if config != "template":
        L.append("- Cassandra configurations (`--cassandra-config " + config + "`): `latest` is the template with "
                 "Cassandra 5.0.9's cassandra_latest.yaml settings (bench/shoal_bench/cassconf.py: trie memtables "
                 "off heap, BTI sstables, UCS, storage_compatibility_mode NONE, no key cache, ...) and the heap "
                 "cassandra-env.sh picks here"
                 + (f" (overridden: {a.cassandra_heap})" if getattr(a, "cassandra_heap", None) else "")
                 + "; each ratio is against the faster configuration for that workload (named in the table).")
    return L


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
         (", ".join(f"{sc.upper()}: {w:,} writes + {m:,} mixed ops" for sc, (w, m) in bench.warmups.items()) or
          "see each section") +
         "; Cassandra needs its JIT warm). Each stress run also has its own short warm-up (a quarter of n, at "
         "most 50,000 ops or 10 s) before its measured phase.",
         "- Errors: as cassandra-stress (`-errors retries=9`, its default), a failed operation is tried again up "
         "to 9 times, each time on the next replica, and counts as an error only after the tenth failure; "
         "one that fails all ten stops the benchmark. The runs table shows errors and retries.",
         "- Server CPU-us/op: utime+stime of the server process(es) from /proc/PID/stat over the measured phase "
         "(`--server-pid`), divided by the operations. It does not count work after the phase ends (flushes, "
         "compactions still running), for either system. Peak RSS: VmHWM, reset before each run (the sum over "
         "nodes at RF=3); the table shows the highest over the runs.",
         ] + setup_issue24_lines(a) + [
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
    if bench.security:
        L += security_section(bench, argv)
    else:
        L += carried_section(path, SECURITY_HEADING)
    if bench.extra_warmups:
        L += extra_section(bench, argv)
    else:
        L += carried_section(path, EXTRA_HEADING)
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
