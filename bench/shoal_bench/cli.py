"""bench/compare: Shoal side by side with Apache Cassandra, the benchmark of record (issue 5).

    bench/compare [--quick | --smoke] [--runs 3] [--n 2000000 | --long] [--threads 128]
                  [--rf1-only | --rf3 | --rf3-only | --scenarios rf1,rf3,lwt,counter]
                  [--lwt-n N] [--counter-n N] [--shoal-only] [--client simplenative|driver] [--out DIR]
                  [--auth] [--tls] [--cassandra-config template|latest|both] [--cassandra-heap 4G]
                  [--no-settle] [--settle-timeout 900] [--no-verify]
    bench/compare --steadiness [--minutes 30] [--with-cassandra] [--threads 128]
    bench/compare --durability [--durability-duration 10s] [--durability-threads 1,2,4,...,256]

Starts Apache Cassandra (scripts/cassandra/start.sh, WIPE=1) and a `shoal server`, in turn,
never both at once, with equivalent settings (RF=1, commit log periodic 10 s, num_tokens 16, data on
the same disk) and runs the same `shoal stress` workloads against each, --runs times:

  (1) write:  shoal stress write n=N truncate=always -rate threads=T       (an empty table each run)
  (2) mixed:  shoal stress mixed n=N ratio(read=9,write=1) -pop dist=uniform(1..N)   (after the load)
  (3) fixed:  shoal stress write duration=Ds -rate fixed=X/s threads=T, X = 50% of Cassandra's
              median write rate (coordinated-omission corrected latency)
  (4) max:    RF=1 only, shoal stress write duration=Ms truncate=always -rate threads=U for each U in
              --max-threads (default 128,256,256x2,512x2; UxC: U threads over C connections per node,
              -mode connectionsPerHost=C): each system's maximum write throughput is its best median over
              the levels (Shoal's only among those with a median p99 <= 10 ms), as cassandra-stress's
              default mode ramps its thread count up to find the maximum

each with `-mode simplenative` (the stress tool's own lean CQL client, ADR 0004; --client driver
runs the scylla driver instead), --json and --server-pid, so every run carries ops/s, p50/p95/p99/p99.9 and the server's
CPU-us per operation (/proc/PID/stat); peak RSS is the server's VmHWM (reset before each run).
Before the measured runs each server gets the same discarded warm-up (Cassandra needs its JIT warm).
--rf3 adds the same at RF=3, CL=QUORUM on local 3-node clusters (`shoal cluster up -n 3`,
bench/cassandra-cluster.sh).

Settled cost and read-back (issue 24; on unless --no-settle, --no-verify):

  settle: after each kept run of a workload that writes (write, mixed, fixed, max@, counter_write, lwt) the
          server is flushed (`shoal tool flush`; `nodetool flush`) and polled (`shoal tool compactionstats
          --json`; `nodetool compactionstats`) until no task is pending or running, then until its processes'
          CPU grows by less than 2% of a core over 2 s, or holds steady below 10% of a core over two such
          windows (a JVM's idle background; at most --settle-timeout seconds). "settled CPU-us/op"
          = the server's CPU inside the run's window plus the CPU from the window's end until settled, divided
          by the window's operations; beside the in-window "server CPU-us/op" in the tables and runs.json.
          Every phase starts on a settled server, so no debt leaks into the next one.
  verify: after each write and mixed run, `shoal stress verify n=N` reads back the keys the write runs made
          and records the keys checked, missing and wrong; a mixed run with a missing row stops the benchmark.
  --long: write phases of at least 10x Shoal's memtable budget in bytes (memtable_space, 1 GiB): n from the
          standard1 row's bytes (10-byte key + 5 x 34-byte columns), 59,700,000 rows, so flushes and
          compactions reach their steady state (slow: about 5 min per Shoal run, 30 per Cassandra run here,
          plus each run's verify); the mixed runs stay at 2,000,000 operations (--mixed-n) over that load.

Cassandra's configuration (--cassandra-config, the rf1 and rf3 scenarios; LWT, counters and --auth/--tls
always run the template): `template` (scripts/cassandra/cassandra.yaml.template, 2 GB heap; the default),
`latest` (the template with Cassandra 5.0.9's cassandra_latest.yaml settings: trie memtables off heap, BTI
sstables, UCS compaction, ...; see cassconf.py; and the heap cassandra-env.sh would pick on this machine,
max(min(RAM/2, 1 GB), min(RAM/4, 8 GB)); at RF=3 the cluster script's 1 GB per node) or `both` (template, then
latest; each ratio is Shoal against the faster of the two for that workload, and the table names it; the
fixed rate is 50% of the template's median write rate). --cassandra-heap sets the heap of both.

LWT and counters (issue 23; in every run unless --rf1-only, --rf3-only or --scenarios leaves them out),
each on a fresh single node per system (RF=1), after a discarded warm-up, --runs times:

  (5) lwt:     shoal stress lwt n=L truncate=always ratio(insert=1,update=1) cl=QUORUM serial-cl=SERIAL
               (a Shoal extension: INSERT ... IF NOT EXISTS on new keys, UPDATE ... IF v = ? on inserted ones)
  (6) counter: shoal stress counter_write n=C truncate=always cl=ONE add=fixed(1), then
               shoal stress counter_read n=C cl=ONE -pop dist=uniform(1..C)     (cassandra-stress's counter1)

L = --lwt-n (default min(n, 200,000); quick 20,000; smoke 2,000), C = --counter-n (default n; quick
100,000; smoke 10,000). --scenarios picks the scenarios by name (rf1, rf3, lwt, counter), e.g.
`--scenarios lwt,counter`; RESULTS.md gets their own section ("LWT and counters"), which a run without
them carries over from the RESULTS.md it replaces.

--auth and --tls (either or both; RF=1 only): after the plain RF=1 runs, each system runs write, mixed and
fixed-rate again (the plain runs' rate; no max phase) on a server restarted with PasswordAuthenticator +
CassandraAuthorizer (--auth; the client logs in as cassandra/cassandra) and a TLS-only native port (--tls:
client_encryption_options with a PEM keystore from a throw-away CA made by `openssl`; Cassandra through its
PEMBasedSslContextFactory; the client `-transport truststore=ca.pem`, simplenative only). The report adds a
section with each system's cost per operation against its plain run (server and client CPU-us/op, ops/s, p99)
and Shoal against Cassandra with the same settings.

Output: one table (median of the runs, Shoal/Cassandra ratios), RESULTS.md (date, versions, machine,
exact commands, the table, which issue-5 targets are met, every run's numbers), SVGs of throughput
and latency over time for both systems (drawn by `shoal stress plot` from JSON chart specs), and the
raw JSON/logs. The full mode writes bench/RESULTS.md and bench/results-*.svg (JSON and the chart specs
in the gitignored bench/out/STAMP/); --quick and --smoke write everything to their own directory
(bench/out/STAMP/, a temp dir) and never touch bench/RESULTS.md.

Modes: default n=2,000,000, 3 runs, 30 s fixed-rate runs, 20 s max runs; --quick n=100,000, 1 run,
10 s fixed, 5 s max runs at 128,256; --smoke n=20,000, 1 run, no fixed-rate or max phase, Shoal only when Cassandra is not installed (or with
--shoal-only), under 2 minutes (scripts/test.sh runs it; no target is asserted anywhere).

Opt-in, instead of the comparison (both may be given; the output goes to bench/ unless --out):
  --steadiness: after a discarded warm-up, one long write run per system (Shoal; Cassandra too with
      --with-cassandra), `shoal stress write duration=Mm -pop seq=1..K -rate threads=T -log interval=10s`
      (K = --keys, default 10,000,000 as in the 2011 thread's `stress -n 10000000`: the data grows, then
      keys are overwritten; flushes and compactions run under load all along), the server sampled every 5 s
      (CPU, RSS, data on disk). Reports the rate per minute and the mean of the last 5 minutes against the
      first 5 (the first and last fifth under 10 minutes): PASS when within 10%. STEADINESS.md,
      steadiness.svg.
  --durability: Shoal with commitlog_sync batch, group (2 ms window) and periodic (for reference), one
      server per mode, `shoal stress write duration=D -rate threads=T` for T = 1, 2, 4, ..., 256, and the
      disk's own fsync rate (4 KiB appends + os.fsync for --fsync-seconds, before and after, on the data
      directories' file system) as the bound; ops per fsync = ops/s / fsyncs/s. DURABILITY.md,
      durability.svg.

Env: CARGO_TARGET_DIR (the shoal binary is $CARGO_TARGET_DIR/release/shoal, default
~/.cache/shoal/target), CASS_HOME (the Cassandra install, default ~/.cache/cassandra-ref),
CASS_REF (its scripts, default scripts/cassandra), BENCH_HOME (server data, default
~/.cache/shoal/bench: Cassandra's and Shoal's data on the same disk), CASS_PORT, CASS_STORAGE_PORT,
CASS_JMX_PORT (the single Cassandra node's ports, default 9042, 7000, 7199, as start.sh reads them).
"""
# This module: the command line (argparse; the docstring above is --help's text), `main` with its exit
# codes and signal handling. The work is in compare, steadiness and durability.

import argparse
import datetime
import os
import signal
import sys
import tempfile
import time

from . import settle
from .cassconf import CONFIGS
from .compare import (EXTRA_HEADING, Bench, write_runs_json, extra_section, extra_table, level_args, update_section, max_levels, results_plots, run_system, security_cost_lines, security_table,
                      summary_table, targets, variant_name, versions, write_results)
from .durability import durability
from .security import Security
from .servers import CassandraCluster, CassandraNode, ShoalCluster, ShoalNode, cassandra_installed, stop_all
from .steadiness import STEADY_KEYS, steadiness
from .util import BENCH_HOME, CASS_INSTALL, CASS_REF, HERE, SHOAL_BIN, Fail, log


def run():
    ap = argparse.ArgumentParser(prog="bench/compare", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="n=100,000, 1 run, 10 s fixed-rate runs")
    mode.add_argument("--smoke", action="store_true", help="n=20,000, 1 run, no fixed-rate phase (CI; < 2 min)")
    ap.add_argument("--runs", type=int, help="runs of each workload (median reported); default 3 (1 in quick/smoke)")
    ap.add_argument("--n", type=int, help="rows written per write run; default 2,000,000")
    ap.add_argument("--mixed-n", type=int, help="operations per mixed run (default n)")
    ap.add_argument("--warmup", type=int, help="discarded warm-up writes per server (default min(n, 300,000))")
    ap.add_argument("--threads", type=int, default=128, help="requests in flight (-rate threads=); default 128")
    ap.add_argument("--client", choices=["simplenative", "driver"], default="simplenative",
                    help="the stress client: its own lean CQL client (-mode simplenative, the default) or the scylla driver")
    ap.add_argument("--fixed-seconds", dest="fixed_s", type=int, help="length of each fixed-rate run (0: none)")
    ap.add_argument("--max-seconds", dest="max_s", type=int, help="length of each max-throughput run (0: none)")
    ap.add_argument("--max-threads", help="levels of the max-throughput phase: client threads U, or UxC for U threads "
                    "over C connections per node (default 128,256,256x2,512x2)")
    sc = ap.add_mutually_exclusive_group()
    sc.add_argument("--rf1-only", action="store_true", help="only RF=1 (the default)")
    sc.add_argument("--rf3", action="store_true", help="also RF=3 QUORUM on 3-node local clusters (slow on 2 cores)")
    sc.add_argument("--rf3-only", action="store_true", help="only the RF=3 QUORUM scenario")
    sc.add_argument("--scenarios", help="comma-separated scenarios to run, of rf1, rf3, lwt, counter (default: rf1, "
                    "lwt, counter; with --rf3 also rf3)")
    ap.add_argument("--rf3-n", type=int, help="rows per RF=3 write run (default min(n, 200,000))")
    ap.add_argument("--lwt-n", type=int, help="operations per LWT run (default min(n, 200,000); quick 20,000)")
    ap.add_argument("--counter-n", type=int, help="operations per counter_write/counter_read run (default n)")
    ap.add_argument("--shoal-only", action="store_true", help="do not run Cassandra")
    ap.add_argument("--out", help="directory for RESULTS.md, SVGs, JSON and logs (default: see above)")
    ap.add_argument("--long", action="store_true", help="write phases of at least 10x the memtable budget in bytes "
                    f"(n={settle.long_write_n():,}; issue 24's steady-state compaction)")
    ap.add_argument("--no-settle", dest="settle", action="store_false", help="do not flush and wait for compactions "
                    "and an idle server after each writing run (no settled CPU-us/op)")
    ap.add_argument("--settle-timeout", type=int, default=900, help="longest wait for a server to settle, seconds "
                    "(default 900)")
    ap.add_argument("--no-verify", dest="verify", action="store_false", help="do not read back the written rows "
                    "with `shoal stress verify` after each write and mixed run")
    ap.add_argument("--cassandra-config", choices=["template", "latest", "both"], default="template",
                    help="Cassandra's configuration for rf1/rf3: the template (default), cassandra_latest.yaml's "
                    "settings with cassandra-env.sh's heap, or both (ratios against the faster)")
    ap.add_argument("--cassandra-heap", help="Cassandra's heap (start.sh's CASSANDRA_HEAP, e.g. 4G) for every "
                    "configuration, instead of 2G (template) and cassandra-env.sh's choice (latest)")
    ap.add_argument("--auth", action="store_true", help="also RF=1 with PasswordAuthenticator + CassandraAuthorizer "
                    "on both servers (the client logs in as cassandra/cassandra)")
    ap.add_argument("--tls", action="store_true", help="also RF=1 with a TLS-only native port on both servers "
                    "(with --auth: both at once)")
    ex = ap.add_argument_group("steadiness and durability (opt-in; they run instead of the comparison)")
    ex.add_argument("--steadiness", action="store_true", help="a long write run: the rate per minute, the last "
                    "5 minutes within 10%% of the first 5 (STEADINESS.md, steadiness.svg)")
    ex.add_argument("--keys", type=int, default=STEADY_KEYS, help="the steadiness run's key population, "
                    "-pop seq=1..KEYS (default %(default)s; 1000000000 makes every write a new row)")
    ex.add_argument("--minutes", type=float, default=30, help="length of the steadiness run (default 30; under 10 "
                    "compares the first and last fifth)")
    ex.add_argument("--with-cassandra", action="store_true", help="the steadiness run against Cassandra too (it "
                    "doubles the time)")
    ex.add_argument("--durability", action="store_true", help="Shoal with commitlog_sync batch and group (and "
                    "periodic) vs client threads, against the disk's fsync rate (DURABILITY.md, durability.svg)")
    ex.add_argument("--durability-duration", default="10s", help="length of each durability run (default 10s)")
    ex.add_argument("--durability-threads", default="1,2,4,8,16,32,64,128,256", help="client threads to try")
    ex.add_argument("--durability-modes", default="batch,group,periodic", help="commitlog_sync modes to try")
    ex.add_argument("--fsync-seconds", type=float, default=3, help="length of each fsync-rate probe (default 3)")
    a = ap.parse_args()
    extra = a.steadiness or a.durability
    if extra and (a.quick or a.smoke or a.rf3 or a.rf3_only or a.shoal_only or a.scenarios):
        ap.error("--steadiness and --durability run on their own (Shoal only unless --with-cassandra): not with "
                 "--quick, --smoke, --rf3, --rf3-only, --scenarios or --shoal-only")
    if a.with_cassandra and not a.steadiness:
        ap.error("--with-cassandra goes with --steadiness")
    problem = security_args_problem(a)
    if problem:
        ap.error(problem)
    if a.minutes <= 0 or a.fsync_seconds <= 0:
        ap.error("--minutes and --fsync-seconds must be positive")
    try:
        if not all(int(t) > 0 for t in a.durability_threads.split(",")):
            raise ValueError
    except ValueError:
        ap.error("--durability-threads: a comma-separated list of positive numbers")
    if a.long:
        if a.n is not None:
            ap.error("--long sets n itself: not with --n")
        a.n = settle.long_write_n()
        if a.mixed_n is None:
            a.mixed_n = 2_000_000  # the mixed runs read and update the long load; their own length stays the default
    if a.smoke:
        defaults = dict(n=20_000, runs=1, fixed_s=0, warmup=5_000, mixed_n=10_000, max_s=0, max_threads="",
                        lwt_n=2_000, counter_n=10_000)
    elif a.quick:
        defaults = dict(n=100_000, runs=1, fixed_s=10, max_s=5, max_threads="128,256", lwt_n=20_000)
    else:
        defaults = dict(n=2_000_000, runs=3, fixed_s=30, max_s=20, max_threads="128,256,256x2,512x2")
    for k, v in defaults.items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    if a.settle_timeout < 1:
        ap.error("--settle-timeout must be positive")
    if a.n < 1 or a.runs < 1 or a.threads < 1:
        ap.error("--n, --runs and --threads must be positive")
    try:
        for u in max_levels(a):
            level_args(u)
    except ValueError:
        ap.error("--max-threads: a comma-separated list of U (client threads) or UxC (U threads, C connections "
                 "per node), all positive")
    if a.rf3_n is None:
        a.rf3_n = min(a.n, 200_000)
    if a.lwt_n is None:
        a.lwt_n = min(a.n, 200_000)
    if a.counter_n is None:
        a.counter_n = a.n
    try:
        a.scenario_names = scenario_names(a)
    except ValueError as e:
        ap.error(str(e))
    if a.lwt_n < 1 or a.counter_n < 1:
        ap.error("--lwt-n and --counter-n must be positive")

    if not os.access(SHOAL_BIN, os.X_OK):
        raise Fail(f"no shoal binary at {SHOAL_BIN}; build it: source scripts/env.sh && cargo build --release -p shoal")
    installed, cass_version = cassandra_installed()
    with_cassandra = a.with_cassandra if extra else not a.shoal_only
    if with_cassandra and not installed:
        msg = (f"Apache Cassandra is not installed under {CASS_INSTALL} (no lib/cassandra-all-{cass_version}.jar): "
               f"run {CASS_REF}/install.sh (java 17 + mvn), or pass --shoal-only")
        if not a.smoke:
            raise Fail(msg)
        log(f"{msg}\n  -> smoke: Shoal only")
        with_cassandra = False
    if with_cassandra and not os.path.isfile(os.path.join(CASS_REF, "start.sh")):
        raise Fail(f"no {CASS_REF}/start.sh (set CASS_REF to the directory of the Cassandra scripts)")

    stamp = time.strftime("%Y%m%d-%H%M%S")
    if a.out:
        out = results_dir = os.path.abspath(a.out)
    elif a.smoke:
        out = results_dir = tempfile.mkdtemp(prefix="shoal-bench-smoke.")
    elif a.quick:
        out = results_dir = os.path.join(HERE, "out", stamp)
    else:
        out, results_dir = os.path.join(HERE, "out", stamp), HERE
    os.makedirs(out, exist_ok=True)
    os.makedirs(BENCH_HOME, exist_ok=True)
    if extra:
        started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        vers = versions(cass_version)
        argv = ["bench/compare"] + sys.argv[1:]
        if a.steadiness:
            steadiness(a, out, results_dir, with_cassandra, vers, started, argv)
        if a.durability:
            if a.steadiness:
                started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
            durability(a, out, results_dir, vers, started, argv)
        return
    log(f"bench/compare: n={a.n:,}, runs={a.runs}, threads={a.threads}, fixed-rate {a.fixed_s}s, "
        f"{'Cassandra + Shoal' if with_cassandra else 'Shoal only'}, scenarios {','.join(a.scenario_names)}"
        f"{', RF=1 with ' + Security(a.auth, a.tls).label + ' too' if a.auth or a.tls else ''}; output {out}")

    security = Security(a.auth, a.tls)
    if security:
        security.prepare(os.path.join(out, "tls"))
    bench = Bench(a, out, security)
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    bench.started = started
    t0 = time.time()
    vers = versions(cass_version)
    bench.versions = vers
    if not with_cassandra:
        bench.notes.append("Cassandra was not run (--shoal-only or not installed): no ratios; the fixed rate is "
                           "50% of Shoal's own median write rate.")
    names = a.scenario_names
    configs = cassandra_configs(a.cassandra_config)
    heap = a.cassandra_heap
    node = lambda o: [CassandraNode(o, config=c, heap=heap) for c in configs]
    cluster = lambda o: [CassandraCluster(o, config=c, heap=heap) for c in configs]
    template = lambda o: [CassandraNode(o, heap=heap)]
    scen = [("rf1", [], a.n, node, ShoalNode)] if "rf1" in names else []
    if security:
        scen.append((variant_name(security), [], a.n, lambda o: [CassandraNode(o, security=security, heap=heap)],
                     lambda o: ShoalNode(o, security=security)))
    if "rf3" in names:
        scen.append(("rf3", ["cl=QUORUM", "-schema", "replication(factor=3)"], a.rf3_n, cluster, ShoalCluster))
    for name, n in (("lwt", a.lwt_n), ("counter", a.counter_n)):
        if name in names:
            scen.append((name, [], n, template, ShoalNode))
    for name, cl_args, n, cass_cls, shoal_cls in scen:
        # The fixed rate: 50% of the first Cassandra configuration's median write rate (the template's with both).
        fixed_of = ("cassandra" if configs[0] == "template" or name not in ("rf1", "rf3") else
                    f"cassandra-{configs[0]}") if with_cassandra else "shoal"
        if security and name == variant_name(security) and "rf1" in bench.fixed_rate:
            bench.fixed_rate[name] = bench.fixed_rate["rf1"]  # the plain runs' rate: the same load, secured
        try:
            if with_cassandra:
                for cass in cass_cls(out):
                    run_system(bench, cass, name, cl_args, n, fixed_of)
            run_system(bench, shoal_cls(out), name, cl_args, n, fixed_of)
        except Fail as e:
            if name != "rf3" or a.rf3_only:
                raise
            bench.notes.append(f"The RF=3 scenario failed and is incomplete: {str(e).splitlines()[0]}")
            log(f"RF=3 failed: {e}")
    bench.wall = time.time() - t0
    write_runs_json(bench, os.path.join(out, "runs.json"))
    if a.fixed_s > 0:
        for sc_name, (rate, of) in bench.fixed_rate.items():
            if security and sc_name == variant_name(security):
                bench.notes.append(f"{sc_name.upper()} fixed-rate runs: {rate:,} op/s, the plain RF1 runs' rate.")
                continue
            bench.notes.append(f"{sc_name.upper()} fixed-rate runs: {rate:,} op/s = 50% of {of}'s median write rate.")

    charts = results_plots(bench, results_dir)
    results = os.path.join(results_dir, "RESULTS.md")
    argv = ["bench/compare"] + sys.argv[1:]
    if results_dir == HERE and not any(n in a.scenario_names for n in ("rf1", "rf3")):
        # Only LWT/counters measured: the benchmark of record keeps its other sections, this one is replaced.
        update_section(results, EXTRA_HEADING, extra_section(bench, argv))
    else:
        write_results(bench, results, argv, started, vers, charts, results_dir)
    print()
    print(f"Median of {a.runs} run(s); Cassandra's JIT warm-up runs (and Shoal's) were discarded.")
    if any(r["scenario"] in ("rf1", "rf3") or r["scenario"].startswith("rf1-") for r in bench.rows):
        print(summary_table(bench))
    extra = extra_table(bench)
    if extra:
        print(f"\nLWT and counters (median of {a.runs} run(s)):\n{extra}")
    for t, met in targets(bench):
        print(f"{'MET    ' if met else 'NOT MET'}  {t}")
    if security:
        table = security_table(bench)
        print(f"\n{security.label} against the plain RF=1 runs (medians):\n{table or '(nothing to compare)'}")
        for line in security_cost_lines(bench):
            print(line)
    print(f"\nwrote {results}" + "".join(f"\n      {os.path.join(results_dir, svg)}" for svg, drawn in charts if drawn) +
          f"\nraw JSON and logs: {out}")
    if a.smoke and not all(drawn for _, drawn in charts):
        # CI's check that the specs and `shoal stress plot` agree; a full run keeps its numbers instead.
        raise Fail("smoke: a chart was not drawn (see the warning above)")


SCENARIO_NAMES = ("rf1", "rf3", "lwt", "counter")


def cassandra_configs(choice):
    """The Cassandra configurations (cassconf.CONFIGS) of --cassandra-config, in the order they run."""
    return list(CONFIGS) if choice == "both" else [choice]


def scenario_names(a):
    """The scenarios to run, in SCENARIO_NAMES' order: --scenarios, else the --rf* flags' choice plus
    lwt and counter (--rf1-only and --rf3-only: that scenario alone). ValueError on an unknown name."""
    if a.scenarios is not None:
        names = [x.strip() for x in a.scenarios.split(",") if x.strip()]
        unknown = [x for x in names if x not in SCENARIO_NAMES]
        if unknown or not names:
            raise ValueError(f"--scenarios: {', '.join(unknown) or 'none given'}: use a comma-separated list of "
                             f"{', '.join(SCENARIO_NAMES)}")
        return [x for x in SCENARIO_NAMES if x in names]
    if a.rf3_only:
        return ["rf3"]
    if a.rf1_only:
        return ["rf1"]
    return ["rf1"] + (["rf3"] if a.rf3 else []) + ["lwt", "counter"]


def security_args_problem(a):
    """Why --auth/--tls cannot go with the other arguments, or None."""
    if not (a.auth or a.tls):
        return None
    if a.steadiness or a.durability:
        return "--auth and --tls go with the comparison, not --steadiness or --durability"
    if a.rf3 or a.rf3_only:
        return "--auth and --tls run at RF=1 only (not with --rf3 or --rf3-only)"
    if getattr(a, "scenarios", None) is not None and "rf1" not in a.scenarios.split(","):
        return "--auth and --tls need the rf1 scenario (--scenarios without rf1 leaves it out)"
    if a.tls and a.client != "simplenative":
        return "--tls needs --client simplenative: shoal stress speaks TLS through its own client only"
    return None


def on_signal(signum, _frame):
    raise SystemExit(128 + signum)


def main():
    """The entry point (bench/compare): runs, then always stops the servers still running; SIGTERM and
    SIGHUP stop it as an interrupt does. Exits 0, 1 on a `Fail`, 130 on ^C, 128+N on signal N."""
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)
    code = 0
    try:
        run()
    except Fail as e:
        print(f"bench/compare: {e}", file=sys.stderr)
        code = 1
    except KeyboardInterrupt:
        print("bench/compare: interrupted", file=sys.stderr)
        code = 130
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
        if code >= 128:
            print(f"bench/compare: stopped by signal {code - 128}", file=sys.stderr)
    finally:
        stop_all()
    sys.exit(code)
