"""--durability (issue 5, opt-in): Shoal with commitlog_sync batch, group (2 ms window) and periodic
(for reference), one server per mode, writes against client threads 1, 2, 4, ..., 256, bounded by the
disk's own fsync rate (4 KiB appends + os.fsync, before and after). Writes DURABILITY.md and
durability.svg."""

import os
import re
import statistics
import time

from . import plots
from .compare import Bench, runs_table
from .proc import machine
from .servers import PERIODIC, ShoalNode, serve
from .util import BENCH_HOME, Fail, log, md_table, shown, shown_out

DURABILITY_MODES = {
    "batch": "commitlog_sync: batch",
    "group": "commitlog_sync: group\ncommitlog_sync_group_window: 2ms",
    "periodic": PERIODIC,
}


def seconds_of(text):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)?", text.strip())
    if not m:
        raise Fail(f"not a duration: {text!r} (use 500ms, 10s, 1m)")
    return float(m.group(1)) * {"ms": 0.001, "s": 1, None: 1, "m": 60}[m.group(2)]


def fsync_rate(directory, seconds):
    """The disk's own rate of small synchronous appends (a commit log's): write 4 KiB + fsync in a loop,
    on the data directories' file system. Returns (fsyncs/s, p50 ms, p99 ms)."""
    path = os.path.join(directory, f"fsync-probe.{os.getpid()}")
    block, lat = os.urandom(4096), []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        t0 = time.perf_counter()
        end = t0 + seconds
        while True:
            t = time.perf_counter()
            os.write(fd, block)
            os.fsync(fd)
            lat.append(time.perf_counter() - t)
            if t + lat[-1] >= end:
                break
        wall = time.perf_counter() - t0
    finally:
        os.close(fd)
        os.unlink(path)
    lat.sort()
    return len(lat) / wall, lat[len(lat) // 2] * 1e3, lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1e3


def durability_chart(secs, fsyncs, runs):
    """The chart spec. runs: [(mode, [(client threads, its row)])]; throughput (with the disk's fsync rate
    dashed) and p99 against client threads, on a log x axis as the thread counts double; throughput on a
    log axis too, as the modes differ by orders of magnitude and the fsync bound sits near the bottom."""
    tput = [plots.series(m, [(t, r["ops_s"]) for t, r in pts], m) for m, pts in runs]
    p99 = [plots.series(m, [(t, r["p99"]) for t, r in pts], m) for m, pts in runs]
    return plots.chart(f"Shoal writes vs client threads by commitlog_sync mode ({secs:g} s each, group window 2 ms)",
                       "client threads",
                       [plots.panel("Throughput", "op/s (log)", tput,
                                    [plots.hline(fsyncs, f"the disk: {fsyncs:,.0f} fsyncs/s (4 KiB appends)", "fsync")], log_y=True),
                        plots.panel("Latency p99", "ms", p99)],
                       log_x=True)


def durability(a, out, results_dir, vers, started, argv):
    bench = Bench(a, out)
    secs = seconds_of(a.durability_duration)
    threads = [int(t) for t in a.durability_threads.split(",")]
    modes = [m.strip() for m in a.durability_modes.split(",")]
    for m in modes:
        if m not in DURABILITY_MODES:
            raise Fail(f"--durability-modes: {m!r} is not one of {', '.join(DURABILITY_MODES)}")
    t0 = time.time()
    probes = [fsync_rate(BENCH_HOME, a.fsync_seconds)]
    log(f"disk: {probes[0][0]:,.0f} fsyncs/s of 4 KiB appends (p50 {probes[0][1]:.2f} ms, p99 {probes[0][2]:.2f} ms) "
        f"under {BENCH_HOME}")
    first = {}

    def work(server, mode):
        for t in threads:
            args = ["write", f"duration={a.durability_duration}", "-rate", f"threads={t}"]
            first.setdefault(mode, args)
            bench.stress(server, "durability", mode, t, args, int(secs * 3) + 120)

    for mode in modes:
        serve(ShoalNode(out, commitlog=DURABILITY_MODES[mode]), lambda s, m=mode: work(s, m))
    probes.append(fsync_rate(BENCH_HOME, a.fsync_seconds))
    log(f"disk again: {probes[1][0]:,.0f} fsyncs/s (p50 {probes[1][1]:.2f} ms, p99 {probes[1][2]:.2f} ms)")
    bench.wall = time.time() - t0
    fsyncs = statistics.mean(p[0] for p in probes)

    def row(mode, t):
        return next((r for r in bench.rows if r["workload"] == mode and r["run"] == t), None)

    header, rows = ["threads"], []
    for m in modes:
        header += [f"{m} ops/s", f"{m} p99 ms"] + ([f"{m} ops/fsync"] if m != "periodic" else [])
    for t in threads:
        cells = [str(t)]
        for m in modes:
            r = row(m, t)
            cells += [f"{r['ops_s']:,.0f}", f"{r['p99']:.2f}"] + ([f"{r['ops_s'] / fsyncs:.2f}"] if m != "periodic" else [])
        rows.append(cells)
    table = md_table(header, rows)

    svg = "durability.svg"
    spec = durability_chart(secs, fsyncs, [(m, [(t, row(m, t)) for t in threads]) for m in modes])
    drawn = plots.draw(spec, os.path.join(results_dir, svg), out)

    best = {m: max((row(m, t) for t in threads), key=lambda r: r["ops_s"]) for m in modes}
    path = os.path.join(results_dir, "DURABILITY.md")
    L = ["# Durability: commitlog_sync batch and group vs client threads (issue 5)", "",
         f"Measured {started} by `{' '.join(argv)}` (wall time {bench.wall / 60:.1f} min).", "",
         "Issue 5 asks for Shoal's synchronous commit-log modes (README, Durability: `batch` acknowledges a "
         "write after its fsync, concurrent writers sharing one; `group` after the next group fsync, one every "
         "`commitlog_sync_group_window`) measured against client concurrency, with the disk's own fsync rate "
         "as the bound: a write cannot be acknowledged faster than the disk syncs unless writers share fsyncs, "
         "so ops/s divided by the disk's fsyncs/s estimates how many writes one fsync carries.", "",
         "## Setup", "",
         f"- Shoal: {vers['shoal']}", f"- Machine: {machine()}",
         "- Server: one `shoal server --config FILE` per mode (a fresh data directory under "
         f"`{shown(BENCH_HOME)}`, num_tokens 16, default memtable and caches); the modes' YAML lines:",
         ""] + [f"  - {m}: `{DURABILITY_MODES[m].replace(chr(10), '`, `')}`" +
                (" (for reference: no fsync per write, fsynced every 10 s)" if m == "periodic" else "")
                for m in modes] + [
         "",
         f"- Client: `shoal stress write duration={a.durability_duration} -rate threads=T` for T in "
         f"{', '.join(map(str, threads))}, one after the other against the same server (the rows overwrite the "
         "default 1,000,000 keys; each run has its own warm-up of a tenth of its time).",
         f"- The disk's fsync rate: {a.fsync_seconds:g} s of a Python loop appending 4 KiB to a file and "
         f"calling os.fsync, in `{shown(BENCH_HOME)}` (the file system of the data directories), before and after the "
         f"runs: {probes[0][0]:,.0f} and {probes[1][0]:,.0f} fsyncs/s (p50 {probes[0][1]:.2f}/{probes[1][1]:.2f} ms, "
         f"p99 {probes[0][2]:.2f}/{probes[1][2]:.2f} ms); the table divides by their mean, **{fsyncs:,.0f} fsyncs/s**.",
         "", "## Commands", "", "```sh", " ".join(argv).rstrip(), "```", "",
         "Per mode and thread count (`-node`, `-port`, `--json FILE --server-pid PID` appended):", "", "```sh",
         f"shoal stress write duration={a.durability_duration} -rate threads=T", "```", "",
         "## Writes vs client threads", "", table, "",
         f"ops/fsync = ops/s / {fsyncs:,.0f} (the disk's fsyncs/s): above 1, writers share fsyncs; a single "
         "writer (threads=1) in batch mode cannot exceed about 1.", ""]
    L += [f"- {m}: best {best[m]['ops_s']:,.0f} ops/s at {best[m]['run']} threads (p99 {best[m]['p99']:.2f} ms, "
          f"server {best[m]['cpu_us']:.1f} CPU-us/op)" +
          (f", {best[m]['ops_s'] / fsyncs:.1f} writes per disk fsync" if m != "periodic" else "") for m in modes]
    L += ["", plots.md_image(svg, drawn, results_dir, path, out), "",
          "## Caveats", "",
          f"- A shared, noisy {os.cpu_count()}-core virtual machine: other engineers' builds, tests and benchmarks "
          "ran at the same time ('machine cores busy' below); the runs are short, so one background job can move a "
          "row by tens of percent. The fsync probe before and after brackets how much the disk itself moved.",
          "- The disk is the VM's virtual disk: its fsync is what the hypervisor acknowledges (possibly a host "
          "cache), not necessarily the physical medium's flush.",
          "- At high thread counts client and server compete for the same cores: the plateau there is CPU, "
          "not the disk (the server's and the machine's cores busy are in the table below).",
          "", "## Every run (the 'run' column is the client thread count)", "", runs_table(bench), "",
          f"Raw JSON reports and logs: `{shown_out(out)}` (not committed).", ""]
    with open(path, "w") as f:
        f.write("\n".join(L))
    print()
    print(f"The disk: {fsyncs:,.0f} fsyncs/s (4 KiB appends + os.fsync; {probes[0][0]:,.0f} before, {probes[1][0]:,.0f} after)")
    print(table)
    print(f"\nwrote {path}" + (f"\n      {os.path.join(results_dir, svg)}" if drawn else "") +
          f"\nraw JSON and logs: {out}")
