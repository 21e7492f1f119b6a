"""bench/soak (issue 26): a long, moderate mixed load through a 3-node RF=3 Shoal cluster with a node
restarted every 10 minutes; per minute the throughput, p99, each node's RSS and data on disk and the
errors, their slopes per hour, and a verdict against the issue's Done-when line.

    bench/soak [--hours H | --minutes M] [--restart-every 10m] [--kill] [--down 0s]
               [--rate R | --calibrate 45s] [--load-fraction 0.5] [--keys 1000000] [--interval 10s]
               [--window-before 10s] [--window-after 60s] [--warmup 5m] [--rss-bound 25] [--disk-bound 50]
               [--dir DIR] [--keep] [--json OUT] [--write-md [bench/SOAK.md]] [--note TEXT]
               [--shoal-config 'KEY: VALUE']...

Phases, on one cluster (`shoal cluster up -n 3`: nodes on 127.0.0.1..3, num_tokens 16, the server's
defaults otherwise, hinted handoff included), every `shoal stress` in the driver mode pointed at all
three nodes (the driver reconnects to a restarted node; `-mode simplenative` never does):

  preload     `shoal stress write n=KEYS cl=QUORUM -pop seq=1..KEYS`: every key the soak reads exists
  calibrate   `shoal stress mixed duration=45s cl=QUORUM -pop dist=uniform(1..KEYS) -rate threads=64`,
              unthrottled: the cluster's max for this load (skipped with --rate R, which fixes the rate)
  soak        `shoal stress mixed duration=H cl=QUORUM --keep-going -pop dist=uniform(1..KEYS)
              -rate fixed=R/s -log interval=10s` with R = --load-fraction (0.5) of the calibrated max:
              reads and writes 1:1 over a fixed key set, so the data set itself does not grow
  restarts    every --restart-every (default 10m; 0: none) one node, 1, 2, 3, 1, ... in turn:
              `shoal cluster stop N --graceful` (SIGTERM; --kill: SIGKILL, a crash), --down seconds
              down, then `shoal cluster start N` (waits until it is NORMAL)
  samples     every 10 s each node's RSS (/proc/PID/status) and its data directory's size

Per minute of the soak (its intervals by their middle): throughput, p99 (the HDR histograms of the
minute's intervals merged; latency from each operation's intended start, so a stall counts in full),
errors (operations that failed all of the client's tries), each node's largest RSS and data-dir size
sampled in the minute. Errors in an interval that overlaps a restart's window [stop - --window-before,
back NORMAL + --window-after] are that restart's; any other error counts against the verdict. Minutes
that overlap a restart's window are left out of the throughput and p99 slopes (not of RSS or disk), and
so are the first --warmup minutes (5m: right after the unthrottled calibration, compaction is still
catching up; the report gives the slopes with them too).

Slopes per hour: throughput and p99 by Theil-Sen (the median of the slopes between every two minutes)
as % of their median minute, so that the periodic spikes of flushes and restarts do not pass for a
trend (least squares, as % of the mean, is reported beside); RSS and disk (the three nodes summed) by
least squares in MB per hour. The verdict (issue 26's Done-when line):
  - throughput and p99 slopes within +-5% per hour;
  - RSS and disk bounded: the largest value of the last third of the minutes at most --rss-bound %
    (25) / --disk-bound % (50) above the largest of the first third (the slopes are shown beside);
  - 0 errors beyond the restarts' windows; every restart brought its node back; the client held the
    fixed rate (mean of the minutes outside restarts >= 95% of it).
A run under an hour is a validation of the tool, never the 1-hour run of record (the report says so).

Output: a progress line every minute on stderr, the JSON (--json, default DIR/soak.json), DIR/soak.md
and with --write-md the report (default bench/SOAK.md) and its chart (soak.svg beside it). The work
directory (default $HOME/.cache/shoal/bench/soak/STAMP) keeps each stress's log and report
(stress-{preload,calibrate,soak}.{log,json}), the restarts and samples (soak-raw.json) and the nodes'
logs; `bench/soak --analyse DIR [--write-md]` writes the outputs again from them, without a run. The
cluster is always stopped at the end (also on Ctrl-C and SIGTERM), its data deleted unless --keep.
"""

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

from . import lifecycle, plots
from .lifecycle import ShoalSystem, binary_id, hdr_decode, hdr_percentile_ms, run_cmd, source_commit
from .proc import alive, dir_bytes, machine, rss_kib
from .steadiness import mid, steady_intervals
from .util import BENCH_HOME, HERE, Fail, log, md_table, shown

NODES = 3
MB = 1e6
SLOPE_BOUND_PCT = 5.0  # throughput and p99: within +-5% of their mean per hour
RATE_HELD = 0.95  # the client must reach this share of the fixed rate outside the restarts' windows
MIN_MINUTES = 6  # fewer minutes outside restarts: no slope, no verdict
CAL_THREADS = 64
MAX_TABLE_ROWS = 120  # longer runs: the Markdown table shows blocks of minutes


# ---------------------------------------------------------------- pure analysis (unit-tested)

def parse_duration(text):
    """Seconds in '90', '90s', '10m', '1.5h' (a number without a unit is seconds)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(s|m|h)?\s*", str(text))
    if not m:
        raise ValueError(f"not a duration: {text!r} (e.g. 90s, 10m, 1.5h)")
    return float(m.group(1)) * {"s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]


def least_squares(points):
    """(slope, intercept) of the least-squares line through [(x, y)], or None with fewer than two
    distinct x."""
    pts = [(float(x), float(y)) for x, y in points if x is not None and y is not None]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    if sxx == 0:
        return None
    slope = sum((x - mx) * (y - my) for x, y in pts) / sxx
    return slope, my - slope * mx


def theil_sen(points):
    """The Theil-Sen slope through [(x, y)]: the median of the slopes between every two points of
    distinct x (a few outliers, such as a flush's latency spike, barely move it), or None."""
    pts = [(float(x), float(y)) for x, y in points if x is not None and y is not None]
    slopes = [(b[1] - a[1]) / (b[0] - a[0]) for i, a in enumerate(pts) for b in pts[i + 1:] if b[0] != a[0]]
    return statistics.median(slopes) if slopes else None


def minute_hours(row):
    """A minute's middle, in hours since the soak's start (minute 1 is [0, 60) s)."""
    return (row["minute"] - 0.5) / 60


def slope_per_hour(rows, key):
    """The slope of rows[key] per hour (its units), or None."""
    fit = least_squares([(minute_hours(r), r[key]) for r in rows if r.get(key) is not None])
    return fit[0] if fit else None


def slope_pct_per_hour(rows, key, robust=False):
    """The slope of rows[key] per hour as % of its mean over the same rows (least squares), or with
    `robust` the Theil-Sen slope as % of the median; None without two minutes."""
    vals = [r[key] for r in rows if r.get(key) is not None]
    if robust:
        s = theil_sen([(minute_hours(r), r[key]) for r in rows if r.get(key) is not None])
        center = statistics.median(vals) if vals else 0
    else:
        s = slope_per_hour(rows, key)
        center = statistics.mean(vals) if vals else 0
    if s is None or center == 0:
        return None
    return 100 * s / center


def restart_windows(restarts, before, after):
    """Each restart's window [stop - before, back NORMAL + after] (unix seconds); a restart that never
    came back has a window to the end of time."""
    out = []
    for r in restarts:
        end = r.get("t_ready")
        out.append((r["t_stop"] - before, (end if end is not None else float("inf")) + after))
    return out


def attribute_errors(intervals, windows):
    """The errors of each interval ({start_unix_s, duration_s, errors}) to the first restart window it
    overlaps. Returns (errors per restart, errors outside every window, [(start_unix_s, errors)] of
    the intervals outside)."""
    per = [0] * len(windows)
    outside, where = 0, []
    for iv in intervals:
        n = iv.get("errors") or 0
        if not n:
            continue
        lo, hi = iv["start_unix_s"], iv["start_unix_s"] + iv["duration_s"]
        hit = next((i for i, (a, b) in enumerate(windows) if lo < b and hi > a), None)
        if hit is None:
            outside += n
            where.append((lo, n))
        else:
            per[hit] += n
    return per, outside, where


def max_in(samples, key, lo, hi):
    """Per node, the largest sample[key][node] with lo <= t < hi (None-valued samples skipped)."""
    out = {}
    for s in samples:
        if lo <= s["t"] < hi:
            for node, v in s.get(key, {}).items():
                if v is not None:
                    out[node] = max(out.get(node, v), v)
    return out


def minute_rows(intervals, start, samples, windows, minute_s=60, warmup_s=0.0):
    """One row per minute of the soak: its intervals (by their middle) give throughput, p99 (their HDR
    histograms merged; the worst interval's p99 when they carry none) and errors; the samples give each
    node's largest RSS and data-dir size (MB); `restart` says whether it overlaps a restart window,
    `warmup` whether it starts within the first `warmup_s` seconds."""
    buckets = {}
    for iv in intervals:
        buckets.setdefault(int(mid(iv) // minute_s), []).append(iv)
    rows = []
    for m in sorted(buckets):
        ivs = buckets[m]
        secs = sum(iv["duration_s"] for iv in ivs)
        ops = sum(iv["ops"] for iv in ivs)
        hists = [hdr_decode(iv["latency_hdr"]) for iv in ivs if iv.get("latency_hdr")]
        p99 = hdr_percentile_ms(hists, 99) if hists else None
        if p99 is None:
            p99 = max((iv["latency"]["p99_ms"] for iv in ivs if iv.get("latency")), default=None)
        lo = start + m * minute_s
        hi = lo + minute_s
        rss, disk = max_in(samples, "rss_mb", lo, hi), max_in(samples, "disk_mb", lo, hi)
        rows.append(dict(minute=m + 1, secs=secs, ops=ops, ops_s=ops / secs if secs else 0.0, p99_ms=p99,
                         errors=sum(iv.get("errors") or 0 for iv in ivs),
                         restart=any(lo < b and hi > a for a, b in windows), warmup=m * minute_s < warmup_s,
                         rss_mb=rss, rss_total_mb=sum(rss.values()) if rss else None,
                         disk_mb=disk, disk_total_mb=sum(disk.values()) if disk else None))
    return rows


def steady_rows(rows, minute_s=60, warmup=False):
    """The minutes the throughput and p99 slopes use: past the warm-up (unless `warmup`), outside every
    restart window, and whole (at least half a minute of intervals: not the run's last fragment)."""
    return [r for r in rows if not r["restart"] and (warmup or not r.get("warmup")) and r["secs"] >= minute_s / 2]


def thirds_growth(rows, key):
    """The largest value of the last third of the minutes against the first third's: (first max, last
    max, growth as a fraction), or None with fewer than three minutes holding a value."""
    vals = [r[key] for r in rows if r.get(key) is not None]
    k = len(vals) // 3
    if k < 1:
        return None
    first, last = max(vals[:k]), max(vals[-k:])
    return first, last, (last / first - 1) if first else None


def analyse(rows, restarts, rate, unattributed, rss_bound_pct, disk_bound_pct):
    """Slopes and the verdict: {"slopes": ..., "checks": [{name, value, bound, ok}], "passed"}."""
    steady = steady_rows(rows)
    enough = len(steady) >= MIN_MINUTES
    with_warmup = steady_rows(rows, warmup=True)
    sl = dict(throughput_pct_per_h=slope_pct_per_hour(steady, "ops_s", robust=True) if enough else None,
              p99_pct_per_h=slope_pct_per_hour(steady, "p99_ms", robust=True) if enough else None,
              throughput_pct_per_h_least_squares=slope_pct_per_hour(steady, "ops_s") if enough else None,
              p99_pct_per_h_least_squares=slope_pct_per_hour(steady, "p99_ms") if enough else None,
              throughput_pct_per_h_with_warmup=slope_pct_per_hour(with_warmup, "ops_s", True) if enough else None,
              p99_pct_per_h_with_warmup=slope_pct_per_hour(with_warmup, "p99_ms", True) if enough else None,
              warmup_minutes=sum(1 for r in rows if r.get("warmup")),
              rss_mb_per_h=slope_per_hour(rows, "rss_total_mb"),
              disk_mb_per_h=slope_per_hour(rows, "disk_total_mb"),
              steady_minutes=len(steady), minutes=len(rows))
    checks = []

    def slope_check(name, v):
        checks.append(dict(name=name, value=None if v is None else round(v, 3),
                           shown="-" if v is None else f"{v:+.2f} %/h", bound=f"within +-{SLOPE_BOUND_PCT:g} %/h",
                           ok=v is not None and abs(v) <= SLOPE_BOUND_PCT,
                           note="" if enough else f"fewer than {MIN_MINUTES} minutes outside restarts"))

    slope_check("throughput slope", sl["throughput_pct_per_h"])
    slope_check("p99 slope", sl["p99_pct_per_h"])
    for name, key, bound, slope in (("RSS bounded (3 nodes summed)", "rss_total_mb", rss_bound_pct, "rss_mb_per_h"),
                                    ("disk bounded (3 nodes summed)", "disk_total_mb", disk_bound_pct,
                                     "disk_mb_per_h")):
        g = thirds_growth(rows, key)
        ok = g is not None and g[2] is not None and g[2] * 100 <= bound
        shown_v = "-" if g is None else (f"last third max {g[1]:,.0f} MB vs first {g[0]:,.0f} MB "
                                         f"({(g[2] or 0) * 100:+.1f}%); slope {sl[slope] or 0:+,.1f} MB/h")
        checks.append(dict(name=name, value=None if g is None else dict(first_max=g[0], last_max=g[1], growth=g[2]),
                           shown=shown_v, bound=f"last third's max <= first third's max +{bound:g}%", ok=ok,
                           note=""))
    checks.append(dict(name="errors beyond the restarts' windows", value=unattributed, shown=f"{unattributed:,}",
                       bound="0", ok=unattributed == 0, note=""))
    failed = [r for r in restarts if not r.get("ok")]
    checks.append(dict(name="restarts back NORMAL", value=len(restarts) - len(failed),
                       shown=f"{len(restarts) - len(failed)} of {len(restarts)}", bound="all", ok=not failed, note=""))
    mean = statistics.mean(r["ops_s"] for r in steady) if steady else None
    checks.append(dict(name="fixed rate held (minutes outside restarts)", value=mean,
                       shown="-" if mean is None else f"{mean:,.0f} of {rate:,} op/s ({mean / rate:.1%})",
                       bound=f">= {RATE_HELD:.0%} of the rate", ok=mean is not None and mean >= RATE_HELD * rate,
                       note=""))
    return dict(slopes=sl, checks=checks, passed=all(c["ok"] for c in checks))


# ---------------------------------------------------------------- the cluster, the client, the samples

class SoakCluster(ShoalSystem):
    """`shoal cluster` on 127.0.0.1..3 with the server's defaults (lifecycle's ShoalSystem turns hints and
    auto repair off; the soak keeps them), node restarts, and a teardown that always stops the nodes."""
    label = "Shoal soak cluster"

    def up(self):
        os.makedirs(self.dir, exist_ok=True)
        cfg = os.path.join(os.path.dirname(self.dir), "shoal.yaml")
        with open(cfg, "w") as f:
            f.write(f"storage_port: {self.storage_port}\n" + "".join(line + "\n" for line in self.extra))
        self.started = True
        _, wall = self.cluster("up", "--nodes", str(NODES), "--num-tokens", "16", "--cluster-name", "soak",
                               "--native-port", str(self.native_port), "--admin-port", str(self.admin_port),
                               "--timeout", "300", "--", "--config", cfg, timeout=900)
        return wall, self.describe_config(cfg)

    def node_info(self):
        """{node index (str): (pid or None, data dir)} from `shoal cluster status --json`."""
        return {str(n["index"]): (n.get("pid") if n.get("running") else None, n.get("data_dir"))
                for n in self.status()}

    def restart(self, index, kill, down_s, timeout=300):
        """Stops node `index` (SIGTERM and a clean exit, or SIGKILL), waits down_s, starts it and waits until
        it is NORMAL. Returns the restart's record (unix times; ok, error)."""
        rec = dict(node=index, how="SIGKILL" if kill else "SIGTERM", t_stop=time.time(), t_stopped=None,
                   t_ready=None, ok=False, error=None)
        try:
            self.cluster("stop", str(index), *([] if kill else ["--graceful"]), timeout=120)
            rec["t_stopped"] = time.time()
            time.sleep(down_s)
            try:
                self.cluster("start", str(index), "--timeout", str(timeout), timeout=timeout + 60)
            except Fail as e:  # once more: a start that failed to reach NORMAL in time
                rec["error"] = f"first start failed: {e}"
                time.sleep(10)
                self.cluster("start", str(index), "--timeout", str(timeout), timeout=timeout + 60)
            rec["t_ready"], rec["ok"] = time.time(), True
        except Fail as e:
            rec["error"] = str(e).strip().splitlines()[0] if str(e).strip() else "failed"
        return rec

    def teardown(self, keep):
        """Always stops every node; keeps the nodes' logs in the work directory; deletes the data unless keep."""
        if not self.started:
            return
        self.started = False
        out, _, _ = run_cmd([lifecycle.SHOAL_BIN, "cluster", "--dir", self.dir, "down"], 180, check=False)
        log(f"shoal cluster: {out.strip()}")
        logs = os.path.join(self.out, "node-logs")
        os.makedirs(logs, exist_ok=True)
        for d in sorted(os.listdir(self.dir)) if os.path.isdir(self.dir) else []:
            src = os.path.join(self.dir, d, "node.log")
            if os.path.isfile(src):
                shutil.copyfile(src, os.path.join(logs, f"{d}.log"))
        if keep:
            log(f"data kept (--keep): {shown(self.dir)}")
        elif out.startswith("stopped"):
            shutil.rmtree(self.dir, ignore_errors=True)


def stress_cmd(words, cluster, json_path):
    return ([lifecycle.SHOAL_BIN, "stress"] + words +
            ["-node", ",".join(f"127.0.0.{i}" for i in range(1, NODES + 1)), "-port", f"native={cluster.native_port}",
             "-schema", "replication(factor=3)", "--json", json_path])


def start_stress(words, cluster, work, name):
    logf = open(os.path.join(work, f"{name}.log"), "w")
    cmd = stress_cmd(words, cluster, os.path.join(work, f"{name}.json"))
    logf.write("$ " + " ".join(map(shlex.quote, cmd)) + "\n")
    logf.flush()
    proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    logf.close()
    proc.name = name
    return proc


def finish_stress(proc, work, timeout, interrupt=False):
    """Waits for a stress run (with interrupt: SIGINT first, so it still writes its report); its JSON."""
    if interrupt and proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(30)
        raise Fail(f"stress {proc.name} did not end in time (killed); see {proc.name}.log")
    path = os.path.join(work, f"{proc.name}.json")
    if not os.path.exists(path):
        raise Fail(f"stress {proc.name} wrote no report (exit {proc.returncode}); see "
                   f"{shown(os.path.join(work, proc.name + '.log'))}")
    with open(path) as f:
        return json.load(f)


def run_stress(words, cluster, work, name, timeout):
    proc = start_stress(words, cluster, work, name)
    try:
        return finish_stress(proc, work, timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def parse_interval_line(line):
    """An interval line of `shoal stress` (stdout) as dict(total_ops, op_rate, elapsed_s, p99_ms, errors), or
    None for any other line."""
    f = line.strip().split(",")
    if len(f) < 12 or not f[0].isdigit():
        return None
    try:
        return dict(total_ops=int(f[0]), op_rate=float(f[1]), elapsed_s=float(f[4]), p99_ms=float(f[8]),
                    errors=int(f[11]))
    except ValueError:
        return None


class LogTail:
    """The interval lines a running stress has added to its log since the last read."""

    def __init__(self, path):
        self.path, self.offset, self.partial = path, 0, ""

    def read(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return []
        self.offset += len(data)
        text = self.partial + data.decode(errors="replace")
        lines = text.split("\n")
        self.partial = lines.pop()
        return [x for x in map(parse_interval_line, lines) if x]


class Sampler(threading.Thread):
    """Every `every` seconds each node's RSS (MB; None while it is down) and data directory's size (MB)."""

    def __init__(self, nodes, every=10.0):
        super().__init__(daemon=True)
        self.nodes = dict(nodes)  # index -> (pid, data dir); the restarter updates it
        self.lock = threading.Lock()
        self.every, self.samples, self.halt = every, [], threading.Event()

    def update(self, nodes):
        with self.lock:
            self.nodes = dict(nodes)

    def sample(self):
        with self.lock:
            nodes = dict(self.nodes)
        rss, disk = {}, {}
        for i, (pid, data) in sorted(nodes.items()):
            rss[i] = rss_kib(pid) * 1024 / MB if pid and alive(pid) else None
            disk[i] = dir_bytes(data) / MB if data else None
        self.samples.append(dict(t=time.time(), rss_mb=rss, disk_mb=disk))

    def run(self):
        self.sample()
        while not self.halt.wait(self.every):
            self.sample()

    def finish(self):
        self.halt.set()
        self.join(120)
        self.sample()


class Restarter(threading.Thread):
    """Every `every` seconds from `t0` one node in turn (1, 2, 3, 1, ...), while a restart's window still
    ends before `end`; after each, the sampler's pids are refreshed."""

    def __init__(self, cluster, sampler, t0, end, every, kill, down_s, after_s):
        super().__init__(daemon=True)
        self.cluster, self.sampler, self.t0, self.end = cluster, sampler, t0, end
        self.every, self.kill, self.down_s, self.after_s = every, kill, down_s, after_s
        self.restarts, self.halt = [], threading.Event()

    def run(self):
        k = 1
        while self.every > 0:
            at = self.t0 + k * self.every
            if at + self.down_s + self.after_s > self.end or self.halt.wait(max(0.0, at - time.time())):
                return
            node = (k - 1) % NODES + 1
            progress(f"restart {k}: node {node} ({'SIGKILL' if self.kill else 'SIGTERM'})")
            rec = self.cluster.restart(node, self.kill, self.down_s)
            rec["index"] = k
            self.restarts.append(rec)
            progress(f"restart {k}: node {node} " + (f"back NORMAL after {rec['t_ready'] - rec['t_stop']:.1f} s"
                                                     if rec["ok"] else f"FAILED: {rec['error']}"))
            try:
                self.sampler.update(self.cluster.node_info())
            except Fail as e:
                progress(f"could not refresh the nodes' pids: {e}")
            k += 1

    def stop(self):
        self.halt.set()
        self.join(900)


def progress(msg):
    print(f"[{time.strftime('%H:%M:%S')}] soak: {msg}", file=sys.stderr, flush=True)


def minute_progress(minute, total_minutes, lines, sample, restarts, rate):
    """The progress line of one minute from the stress's interval lines of that minute and the latest sample."""
    if lines:
        ops_s = statistics.mean(x["op_rate"] for x in lines)
        p99 = max(x["p99_ms"] for x in lines)
        errors = sum(x["errors"] for x in lines)
        load = f"{ops_s:,.0f} op/s (fixed {rate:,}), worst interval p99 {p99:.1f} ms, errors {errors}"
    else:
        load = "no interval lines this minute"
    rss = sample.get("rss_mb", {}) if sample else {}
    disk = sample.get("disk_mb", {}) if sample else {}
    mem = ", ".join(f"n{i} {v:,.0f}" if v is not None else f"n{i} down" for i, v in sorted(rss.items()))
    dsk = sum(v for v in disk.values() if v is not None)
    return (f"minute {minute}/{total_minutes}: {load}; RSS MB {mem}; disk {dsk:,.0f} MB; "
            f"restarts {len(restarts)}")


# ---------------------------------------------------------------- reports

def fmt(v, spec=",.0f", none="-"):
    return none if v is None else format(v, spec)


def block_rows(rows, size):
    """Rows merged by blocks of `size` minutes (for the Markdown table of a long run)."""
    if size <= 1:
        return rows
    out = []
    for i in range(0, len(rows), size):
        b = rows[i:i + size]
        secs = sum(r["secs"] for r in b)

        def top(key):
            v = [r[key] for r in b if r.get(key) is not None]
            return max(v) if v else None

        out.append(dict(minute=f"{b[0]['minute']}-{b[-1]['minute']}", ops_s=sum(r["ops"] for r in b) / secs if secs else 0,
                        p99_ms=top("p99_ms"), errors=sum(r["errors"] for r in b), restart=any(r["restart"] for r in b),
                        rss_mb={k: max((r["rss_mb"].get(k) or 0) for r in b) for k in b[0]["rss_mb"]},
                        rss_total_mb=top("rss_total_mb"), disk_total_mb=top("disk_total_mb"),
                        disk_mb={k: max((r["disk_mb"].get(k) or 0) for r in b) for k in b[0]["disk_mb"]}))
    return out


def minutes_table(rows):
    size = max(1, -(-len(rows) // MAX_TABLE_ROWS))
    shown_rows = block_rows(rows, size)
    nodes = [str(i) for i in range(1, NODES + 1)]
    body = [[str(r["minute"]) + (" (W)" if r.get("warmup") else "") + (" (R)" if r["restart"] else ""),
             fmt(r["ops_s"]), fmt(r["p99_ms"], ".2f"),
             str(r["errors"])] + [fmt(r["rss_mb"].get(n)) for n in nodes] + [fmt(r["rss_total_mb"])] +
            [fmt(r["disk_mb"].get(n)) for n in nodes] + [fmt(r["disk_total_mb"])] for r in shown_rows]
    header = ["minute", "op/s", "p99 ms", "errors"] + [f"RSS n{n} MB" for n in nodes] + ["RSS sum MB"] + \
        [f"disk n{n} MB" for n in nodes] + ["disk sum MB"]
    note = (f"Blocks of {size} minutes (op/s: their mean; p99, RSS, disk: their largest; errors: their sum). "
            if size > 1 else "")
    return note + "(W): a warm-up minute; (R): the minute overlaps a restart's window (both left out of the " \
        "throughput and p99 slopes).\n\n" + md_table(header, body)


def restarts_table(restarts, per_restart, start):
    rows = []
    for r, n in zip(restarts, per_restart):
        rows.append([str(r["index"]), str(r["node"]), r["how"], f"{(r['t_stop'] - start) / 60:.1f}",
                     fmt(r["t_stopped"] - r["t_stop"] if r.get("t_stopped") else None, ".1f"),
                     fmt(r["t_ready"] - r["t_stopped"] if r.get("t_ready") and r.get("t_stopped") else None, ".1f"),
                     "yes" if r["ok"] else f"**no**: {r['error']}", str(n)])
    return md_table(["#", "node", "stop", "at minute", "stop s", "start to NORMAL s", "back", "errors in its window"],
                    rows)


def chart(doc):
    rows, restarts, start = doc["minutes"], doc["restarts"], doc["start_unix_s"]
    hours = len(rows) > 180
    unit, div = ("hours", 60.0) if hours else ("minutes", 1.0)
    x = lambda r: (r["minute"] - 0.5) / div  # noqa: E731
    nodes = [str(i) for i in range(1, NODES + 1)]
    per_node = lambda key: [plots.series(f"node {n}", [(x(r), r[key].get(n)) for r in rows])  # noqa: E731
                            for n in nodes]
    top = max([1] + [r["errors"] for r in rows])
    spikes = []
    for r in restarts:
        t = (r["t_stop"] - start) / 60 / div
        spikes += [(t, 0), (t, top), (t, 0)]
    return plots.chart(
        f"Soak: 3 nodes RF=3, mixed 1:1 at QUORUM, fixed {doc['rate']:,} op/s, a node restarted every "
        f"{doc['args']['restart_every_s'] / 60:g} min", f"elapsed {unit}",
        [plots.panel("Throughput per minute", "op/s", [plots.series("op/s", [(x(r), r["ops_s"]) for r in rows], "shoal")],
                     [plots.hline(doc["rate"], "fixed rate", "fsync")]),
         plots.panel("p99 per minute (the minute's HDR histograms merged)", "ms",
                     [plots.series("p99", [(x(r), r["p99_ms"]) for r in rows], "shoal")]),
         plots.panel("RSS per node (largest sample of the minute)", "MB", per_node("rss_mb")),
         plots.panel("Data directory per node", "MB", per_node("disk_mb")),
         plots.panel("Errors per minute; restarts (spikes at each stop)", "count",
                     [plots.series("errors", [(x(r), r["errors"]) for r in rows], "batch")] +
                     ([plots.series("restart", spikes, "fsync")] if spikes else []), log_y=False)])


def render_md(doc, image_line):
    a, v = doc["args"], doc["verdict"]
    minutes = doc["soak_s"] / 60
    record = minutes >= 60
    L = ["# Soak: a 3-node RF=3 cluster under a steady mixed load, a node restarted on a schedule (issue 26)", ""]
    if not record:
        L += [f"> **Validation run** ({minutes:.1f} minutes, restarts every {a['restart_every_s'] / 60:g} min): a check "
              "of the tool, not the 1-hour run of record. Its slopes per hour are extrapolated from a few minutes; "
              "issue 26's Done-when line is **not** claimed from it.", ""]
    if doc.get("note"):
        L += [f"> {doc['note']}", ""]
    if doc.get("interrupted"):
        L += ["> The run was interrupted before its end: the numbers cover what ran.", ""]
    L += [f"Measured {doc['date']} by `{doc['command']}` (wall time {doc['wall_s'] / 60:.1f} min); source at commit "
          f"{doc['commit']}, {doc['binary']}.", "",
          "## Setup", "",
          f"- Machine: {doc['machine']}; the three nodes and the client all on it.",
          f"- Cluster: `shoal cluster up -n 3` (127.0.0.1..3, num_tokens 16, "
          + "".join(f"`{line}`, " for line in a.get("shoal_config") or [])
          + "the server's defaults otherwise: hinted handoff on, commit log as shipped), keyspace `keyspace1` with RF=3.",
          f"- Data: {a['keys']:,} keys preloaded (`shoal stress write n={a['keys']} cl=QUORUM -pop seq=1..{a['keys']}`); "
          f"the soak reads and writes them 1:1 (`-pop dist=uniform(1..{a['keys']})`), so the data set does not grow.",
          ("- Rate: " + (f"{doc['rate']:,} op/s fixed by `--rate`." if a.get("rate") else
                         f"calibrated by `shoal stress mixed duration={a['calibrate_s']:g}s cl=QUORUM -rate "
                         f"threads={CAL_THREADS}` (unthrottled): {doc['calibration']['op_rate']:,.0f} op/s; the soak "
                         f"runs at {a['load_fraction']:.0%} of it, `-rate fixed={doc['rate']}/s`.")),
          f"- Soak: `{doc['soak_command']}` (the driver mode, pointed at all three nodes; `--keep-going`, each "
          f"operation tried up to {doc['retries'] + 1} times: an error is an operation that failed every try).",
          f"- Restarts: every {a['restart_every_s'] / 60:g} min, nodes 1, 2, 3 in turn: `shoal cluster stop N"
          + ("` (SIGKILL)" if a["kill"] else " --graceful` (SIGTERM, clean exit)")
          + (f", {a['down_s']:g} s down" if a["down_s"] else "") + ", then `shoal cluster start N` (waits until NORMAL).",
          f"- Samples every 10 s: each node's RSS (/proc/PID/status VmRSS) and data directory's size; per minute the "
          "largest sample of each node (MB = 10^6 bytes).",
          f"- Restart windows: [stop - {a['window_before_s']:g} s, back NORMAL + {a['window_after_s']:g} s]. Errors "
          "in a stress interval overlapping one are that restart's; minutes overlapping one are left out of the "
          "throughput and p99 slopes (RSS and disk slopes use every minute).",
          f"- Warm-up: the first {a.get('warmup_s', 0) / 60:g} minutes, right after the unthrottled calibration "
          "(compaction still catching up with the preload and the calibration's writes), are left out of the "
          "throughput and p99 slopes; the slopes with them are given below the verdict.",
          f"- p99 per minute: the HDR histograms of the minute's {a['interval_s']:g}-second intervals merged, latency "
          "from each operation's intended start (a fixed-rate run: a stall counts in full).", "",
          "## Verdict", ""]
    L.append(md_table(["check", "measured", "bound", "met"],
                      [[c["name"], c["shown"] + (f" ({c['note']})" if c.get("note") else ""), c["bound"],
                        "yes" if c["ok"] else "**no**"] for c in v["checks"]]))
    s = v["slopes"]
    L += ["", f"All met: **{'yes' if v['passed'] else 'no'}**" +
          ("" if record else " (for this validation run only)") +
          f". Throughput and p99 slopes: Theil-Sen (the median of the slopes between every two minutes, as % of "
          "the median minute: a few minutes' spikes, a flush's or a restart's, barely move it) over "
          f"{s['steady_minutes']} of {s['minutes']} minutes; by least squares (as % of the mean) throughput "
          f"{fmt(s.get('throughput_pct_per_h_least_squares'), '+.2f')} %/h and p99 "
          f"{fmt(s.get('p99_pct_per_h_least_squares'), '+.2f')} %/h; with the {s.get('warmup_minutes', 0)} warm-up "
          f"minutes (Theil-Sen) throughput {fmt(s.get('throughput_pct_per_h_with_warmup'), '+.2f')} %/h and p99 "
          f"{fmt(s.get('p99_pct_per_h_with_warmup'), '+.2f')} %/h. RSS and disk slopes by least squares over "
          f"all minutes (RSS {fmt(s['rss_mb_per_h'], '+,.1f')} MB/h, disk {fmt(s['disk_mb_per_h'], '+,.1f')} MB/h). "
          f"Errors: {doc['errors']['total']:,} in all, {doc['errors']['in_restart_windows']:,} in restart windows, "
          f"{doc['errors']['outside']:,} outside; client retries {doc['retries_used']:,}.", "",
          "Bounded, as judged here: the largest summed RSS (or disk) of the last third of the minutes may exceed "
          "the first third's largest by at most the bound. With restarts every few minutes each node process lives "
          f"at most {NODES} restart periods, so a leak slower than that shows only as RSS that climbs within each "
          "process's life (the per-node RSS lines of the chart), not as a trend of the sum.", "",
          "## Restarts", "", restarts_table(doc["restarts"], doc["errors"]["per_restart"], doc["start_unix_s"]), "",
          "## Per minute", "", minutes_table(doc["minutes"]), "",
          "## Over time", "", image_line, "",
          "## How to run", "",
          "```sh",
          "bench/soak --minutes 15 --restart-every 4m --keys 300000 --calibrate 30s   # a validation (~20 min)",
          "bench/soak --hours 1 --write-md                       # the 1-hour run of record (issue 26's Done-when)",
          "bench/soak --hours 72 --interval 30s --write-md      # the 72-hour soak",
          "bench/soak --hours 1 --kill --write-md bench/SOAK-kill.md   # restarts by SIGKILL (a crash) instead",
          "```", "",
          "The 72-hour run needs a machine of its own: 432 restarts, and a stress report that holds every "
          "interval's HDR histograms (about 13 kB per interval here: with `--interval 30s` some 8,600 intervals, "
          "~110 MB, read once at the end; the default 10 s would make it ~340 MB). The data set stays at its "
          "preload's size (the keys are overwritten, not added), plus compaction's headroom. Run it under "
          "`nohup` or `tmux`; Ctrl-C or SIGTERM stops it cleanly (the cluster is torn down and what ran is "
          "reported), and `bench/soak --analyse DIR --write-md` redoes the report from its work directory. "
          f"Raw output of this run: `{doc['work']}` (not committed).", ""]
    return "\n".join(L)


# ---------------------------------------------------------------- the run

def parse(argv):
    p = argparse.ArgumentParser(prog="bench/soak", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    length = p.add_mutually_exclusive_group()
    length.add_argument("--hours", type=float, help="the soak's length in hours (default 1; fractions allowed)")
    length.add_argument("--minutes", type=float, help="the soak's length in minutes instead")
    p.add_argument("--restart-every", default="10m", help="restart a node this often (default 10m; 0: never)")
    p.add_argument("--kill", action="store_true", help="stop nodes with SIGKILL (a crash) instead of SIGTERM")
    p.add_argument("--down", default="0s", help="how long a stopped node stays down before its start (default 0s)")
    p.add_argument("--rate", type=int, help="fixed op/s for the soak (skips the calibration)")
    p.add_argument("--calibrate", default="45s", help="the unthrottled calibration run's length (default 45s)")
    p.add_argument("--load-fraction", type=float, default=0.5, help="the soak's rate as a share of the max (0.5)")
    p.add_argument("--keys", type=int, default=1_000_000, help="keys preloaded and then read and written (1000000)")
    p.add_argument("--interval", default="10s", help="the stress's interval (default 10s)")
    p.add_argument("--window-before", default="10s", help="a restart's window starts this long before its stop (10s)")
    p.add_argument("--window-after", default="60s", help="and ends this long after the node is NORMAL again (60s)")
    p.add_argument("--warmup", default="5m", help="the first minutes left out of the throughput and p99 slopes (5m)")
    p.add_argument("--rss-bound", type=float, default=25.0, help="RSS bound: last third's max vs first's, %% (25)")
    p.add_argument("--disk-bound", type=float, default=50.0, help="disk bound: last third's max vs first's, %% (50)")
    p.add_argument("--dir", help="work directory (default $HOME/.cache/shoal/bench/soak/STAMP)")
    p.add_argument("--keep", action="store_true", help="keep the cluster's data (the cluster is always stopped)")
    p.add_argument("--json", metavar="OUT", help="the results as JSON (default DIR/soak.json)")
    p.add_argument("--write-md", nargs="?", const=os.path.join(HERE, "SOAK.md"), metavar="PATH",
                   help="write the report there (default bench/SOAK.md) and soak.svg beside it")
    p.add_argument("--note", help="a line for the report (e.g. what else the machine was doing)")
    p.add_argument("--shoal-config", action="append", default=[], metavar="'KEY: VALUE'",
                   help="a line added to every node's shoal.yaml (repeatable), e.g. 'compaction_throughput: 16MiB/s'")
    p.add_argument("--analyse", metavar="DIR", help="no run: the outputs again from a finished run's work directory")
    a = p.parse_args(argv)
    try:
        a.soak_s = (a.minutes * 60) if a.minutes is not None else (a.hours if a.hours is not None else 1.0) * 3600
        a.restart_every_s = parse_duration(a.restart_every)
        a.down_s, a.calibrate_s = parse_duration(a.down), parse_duration(a.calibrate)
        a.interval_s = parse_duration(a.interval)
        a.window_before_s, a.window_after_s = parse_duration(a.window_before), parse_duration(a.window_after)
        a.warmup_s = parse_duration(a.warmup)
    except ValueError as e:
        p.error(str(e))
    if a.soak_s < 60:
        p.error("the soak must last at least a minute")
    if a.keys < 1 or not 0 < a.load_fraction <= 1 or a.interval_s < 1 or (a.rate is not None and a.rate < 1):
        p.error("--keys, --rate and --interval must be positive and --load-fraction in (0, 1]")
    return a


def on_signal(signum, _frame):
    raise SystemExit(128 + signum)


def soak_words(a, rate):
    return ["mixed", f"duration={round(a.soak_s)}s", "cl=QUORUM", "--keep-going", "-pop", f"dist=uniform(1..{a.keys})",
            "-rate", f"fixed={rate}/s", "-log", f"interval={a.interval_s:g}s"]


def run_soak(a, cluster, work, state):
    """Preload, calibration, the soak with its restarts and samples; fills `state` as it goes (so an
    interruption still leaves what ran)."""
    log(f"preload: {a.keys:,} keys at QUORUM")
    run_stress(["write", f"n={a.keys}", "cl=QUORUM", "-pop", f"seq=1..{a.keys}", "-rate", "threads=64"],
               cluster, work, "stress-preload", timeout=7200)
    if a.rate:
        state["rate"] = a.rate
    else:
        log(f"calibration: mixed at QUORUM, unthrottled, {a.calibrate_s:g} s")
        cal = run_stress(["mixed", f"duration={round(a.calibrate_s)}s", "cl=QUORUM", "-pop", f"dist=uniform(1..{a.keys})",
                          "-rate", f"threads={CAL_THREADS}", "-log", "interval=5s"], cluster, work, "stress-calibrate",
                         timeout=a.calibrate_s + 600)["summary"]
        state["calibration"] = dict(op_rate=cal["op_rate"], p99_ms=cal["latency"]["p99_ms"], errors=cal["errors"])
        state["rate"] = max(1, round(cal["op_rate"] * a.load_fraction))
        log(f"calibration: {cal['op_rate']:,.0f} op/s max; the soak runs at {state['rate']:,} op/s")
    rate = state["rate"]
    sampler = Sampler(cluster.node_info())
    sampler.start()
    state["sampler"] = sampler
    words = soak_words(a, rate)
    state["soak_command"] = "shoal stress " + " ".join(map(shlex.quote, words))
    proc = start_stress(words, cluster, work, "stress-soak")
    state["proc"] = proc
    tail = LogTail(os.path.join(work, "stress-soak.log"))
    launched = time.time()
    lines = []
    while not lines and proc.poll() is None and time.time() - launched < 120:  # warm-up, then the first interval
        time.sleep(0.5)
        lines = tail.read()
    t0 = (time.time() - lines[0]["elapsed_s"]) if lines else time.time()
    end = t0 + a.soak_s
    restarter = Restarter(cluster, sampler, t0, end, a.restart_every_s, a.kill, a.down_s, a.window_after_s)
    restarter.start()
    state["restarter"] = restarter
    total_min = int(round(a.soak_s / 60))
    minute, pending = 1, list(lines)
    deadline = end + 600
    while proc.poll() is None:
        if time.time() > deadline:
            progress("the stress outlived its duration by 10 minutes: SIGINT")
            break
        time.sleep(1)
        pending += tail.read()
        if time.time() >= t0 + 60 * minute:
            now = [x for x in pending if x["elapsed_s"] <= 60 * minute]
            pending = [x for x in pending if x["elapsed_s"] > 60 * minute]
            progress(minute_progress(minute, total_min, now, sampler.samples[-1] if sampler.samples else None,
                                     restarter.restarts, rate))
            minute += 1
    state["report"] = finish_stress(proc, work, 300, interrupt=proc.poll() is None)


def raw_of(a, state, command, wall):
    """What the run measured besides the stress's own report (DIR/soak-raw.json): enough to analyse it again."""
    return dict(command=command, args={k: v for k, v in vars(a).items() if k != "analyse"}, rate=state.get("rate"),
                calibration=state.get("calibration"), soak_command=state.get("soak_command"),
                interrupted=bool(state.get("interrupted")), wall_s=wall,
                restarts=list(state["restarter"].restarts) if state.get("restarter") else [],
                samples=list(state["sampler"].samples) if state.get("sampler") else [],
                machine=machine(), date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), commit=source_commit(),
                binary=binary_id(lifecycle.SHOAL_BIN))


def shown_command(command):
    """A command line as the reports print it: each absolute path through `shown` (no home named)."""
    return " ".join(shown(w) if w.startswith("/") else w for w in command.split(" "))


def build_doc(raw, report, work):
    """The results: the minutes, restarts, errors, slopes and verdict of a run (its raw record and report)."""
    a = argparse.Namespace(**raw["args"])
    restarts, samples = raw["restarts"], raw["samples"]
    s = report["summary"]
    ivs = steady_intervals(report)
    windows = restart_windows(restarts, a.window_before_s, a.window_after_s)
    per, outside, where = attribute_errors(ivs, windows)
    rows = minute_rows(ivs, s["start_unix_s"], samples, windows, warmup_s=getattr(a, "warmup_s", 0.0))
    verdict = analyse(rows, restarts, raw["rate"], outside, a.rss_bound, a.disk_bound)
    return dict({k: raw[k] for k in ("machine", "date", "commit", "binary", "rate", "calibration",
                                     "soak_command", "interrupted", "wall_s", "restarts")},
                command=shown_command(raw["command"]),
                work=shown(work), note=a.note, args=raw["args"], soak_s=s["elapsed_s"], start_unix_s=s["start_unix_s"],
                retries=report.get("settings", {}).get("retries", 9), retries_used=s.get("retries", 0),
                stress_summary={k: v for k, v in s.items() if not k.endswith("_hdr")},
                errors=dict(total=sum(iv.get("errors") or 0 for iv in ivs), per_restart=per,
                            in_restart_windows=sum(per), outside=outside,
                            outside_at_minute=[round((t - s["start_unix_s"]) / 60, 2) for t, _ in where]),
                minutes=rows, verdict=verdict)


def write_outputs(doc, work, json_path, md_path):
    """soak.json, the chart and the report (DIR/soak.md, and md_path when given); returns the exit code's verdict
    part (0 met, 2 not)."""
    jpath = json_path or os.path.join(work, "soak.json")
    with open(jpath, "w") as f:
        json.dump(doc, f, indent=1, default=str)
    svg = os.path.join(os.path.dirname(os.path.abspath(md_path)) if md_path else work, "soak.svg")
    spec_dir = os.path.join(work, "chart")  # the chart's spec (not work/soak.json: that is the results)
    drawn = plots.draw(chart(doc), svg, spec_dir)
    md = md_path or os.path.join(work, "soak.md")
    text = render_md(doc, plots.md_image("soak.svg", drawn, os.path.dirname(svg), md, spec_dir))
    for path in {md, os.path.join(work, "soak.md")}:
        with open(path, "w") as f:
            f.write(text)
    for c in doc["verdict"]["checks"]:
        print(f"  {'ok  ' if c['ok'] else 'FAIL'} {c['name']}: {c['shown']} ({c['bound']})")
    print(f"soak: {'PASS' if doc['verdict']['passed'] else 'FAIL'} over {doc['soak_s'] / 60:.1f} min" +
          ("" if doc["soak_s"] >= 3600 else " (a validation run: under an hour)"))
    log(f"JSON: {shown(jpath)}; report: {shown(md)}" + (f"; chart: {shown(svg)}" if drawn else ""))
    return 0 if doc["verdict"]["passed"] else 2


def reanalyse(a):
    """--analyse DIR: the outputs again from a finished run's DIR/soak-raw.json and DIR/stress-soak.json."""
    work = os.path.abspath(a.analyse)
    try:
        with open(os.path.join(work, "soak-raw.json")) as f:
            raw = json.load(f)
        with open(os.path.join(work, "stress-soak.json")) as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        print(f"bench/soak --analyse: {e}", file=sys.stderr)
        return 1
    if a.note:
        raw["args"]["note"] = a.note
    raw["args"]["warmup"], raw["args"]["warmup_s"] = a.warmup, a.warmup_s
    return write_outputs(build_doc(raw, report, work), work, a.json, a.write_md)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    a = parse(argv)
    if a.analyse:
        return reanalyse(a)
    command = "bench/soak " + " ".join(map(shlex.quote, argv))
    work = os.path.abspath(a.dir or os.path.join(BENCH_HOME, "soak", time.strftime("%Y%m%d-%H%M%S")))
    if not os.access(lifecycle.SHOAL_BIN, os.X_OK):
        print(f"bench/soak: no shoal binary at {shown(lifecycle.SHOAL_BIN)} (cargo build --release -p shoal, or set "
              "SHOAL_BIN or CARGO_TARGET_DIR)", file=sys.stderr)
        return 1
    os.makedirs(os.path.join(work, "bin"), exist_ok=True)
    pinned = os.path.join(work, "bin", "shoal")  # a rebuild during a long run cannot mix two versions
    shutil.copy2(lifecycle.SHOAL_BIN, pinned)
    lifecycle.SHOAL_BIN = pinned
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    log(f"bench/soak: {a.soak_s / 60:g} min, restarts every {a.restart_every_s:g} s; work directory {shown(work)}; "
        f"{machine()}")
    cluster = SoakCluster(work, a.shoal_config)
    state, code, t_start = {}, 0, time.time()
    try:
        cluster.up()
        log(f"cluster up: 127.0.0.1..{NODES}, CQL port {cluster.native_port}")
        run_soak(a, cluster, work, state)
    except (KeyboardInterrupt, SystemExit) as e:
        code = 130 if isinstance(e, KeyboardInterrupt) else (e.code if isinstance(e.code, int) else 1)
        state["interrupted"] = True
        progress("interrupted: stopping the stress (its report covers what ran), then the cluster")
        proc = state.get("proc")
        if proc is not None and "report" not in state:
            try:
                state["report"] = finish_stress(proc, work, 120, interrupt=True)
            except Fail as err:
                progress(str(err))
    except Fail as e:
        progress(f"failed: {e}")
        code = 1
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # the teardown runs to its end
            signal.signal(sig, signal.SIG_IGN)
        for key in ("restarter", "sampler"):
            if state.get(key):
                try:
                    state[key].stop() if key == "restarter" else state[key].finish()
                except Exception as e:  # keep tearing down
                    progress(f"stopping the {key}: {e}")
        proc = state.get("proc")
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(30)
        cluster.teardown(a.keep)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    raw = raw_of(a, state, command, time.time() - t_start)
    with open(os.path.join(work, "soak-raw.json"), "w") as f:
        json.dump(raw, f, indent=1, default=str)
    if not a.keep:  # the pinned copy: the report names it by sha256
        shutil.rmtree(os.path.dirname(lifecycle.SHOAL_BIN), ignore_errors=True)
    if not state.get("report"):
        progress(f"no soak report to analyse; logs in {shown(work)}")
        return code or 1
    verdict = write_outputs(build_doc(raw, state["report"], work), work, a.json, a.write_md)
    return code or verdict
