"""bench/lifecycle (issue 21): the cost of topology changes and repair, Shoal beside Apache Cassandra.

    bench/lifecycle [--gb-per-node 5] [--system shoal|cassandra|both] [--smoke] [--json OUT] [--dir DIR] [--keep]
                    [--cassandra-gb-per-node 1] [--cassandra-load-minutes 15] [--dd-mib 2048]
                    [--rate 2000] [--baseline-s 20] [--no-same-size] [--shoal-config 'KEY: VALUE']...
                    [--cycles K] [--cpu-trace]

For each system, on one local cluster (Shoal: `shoal cluster` on 127.0.0.1..; Cassandra:
bench/cassandra-cluster.sh), in this order:

  dd          the work directory's disk: sequential write (oflag=direct, conv=fdatasync) and read
              (iflag=direct) of --dd-mib MiB with 1 MiB blocks, MB/s: the bound on a joining node's rate
  load        3 nodes, RF=3, hinted handoff off from the start: `shoal stress write n=N cl=ONE
              -col n=5 size=FIXED(200) -rate threads=64` (1,010-byte rows: 10-byte key + 5 x 200 B),
              N = GB-per-node * 1e9 / 1010 (every node holds every row at RF=3 on 3 nodes); then a
              flush on every node and each node's load (`shoal tool info` load_bytes; nodetool info Load)
  baseline    client latency with no topology change: `shoal stress write duration=20s cl=QUORUM
              -rate fixed=2000/s threads=8` on keys past the loaded ones; p99 from intended start
  bootstrap   a 4th node joins (`shoal cluster add`; cassandra-cluster.sh add, auto_bootstrap): time to
              NORMAL (UN), bytes of table data it received, MB/s over its stream sessions (and over the
              whole bootstrap), the ratio to dd's write rate, bytes on the wire; then cleanup on nodes 1-3
  decommission  that node leaves (`shoal cluster decommission`; nodetool decommission): time, bytes
              handed over, MB/s
  bootstrap+load, decommission+load   the same with the fixed-rate stress of the baseline running all
              along (started 10 s before the operation, SIGINT after it); the client's p99 over the
              1-second intervals that overlap the operation (their HDR histograms merged) against the
              baseline's p99, and against the same run's p99 in the seconds just before the operation
  repair      node 3 stopped, 1% of the rows rewritten at QUORUM with other values (`seed=2
              -pop seq=1..N/100`), node 3 started, then `repair --preview` and `repair` of the keyspace on
              node 1 (nodetool repair -full): partitions differing, bytes repaired, seconds, and the bytes on
              the wire against the true difference (1% of the rows x 1,010 B)

Bytes on the wire: every TCP connection to or from the cluster's storage port (Shoal's internode
messages and streams; Cassandra's 7000), polled with `ss -ti` every 0.5 s during the operation: the sum
of bytes_received over those sockets (each byte counted once, at its receiver; gossip included).

--system both (the default): Shoal at --gb-per-node, then Cassandra at --cassandra-gb-per-node (its load
stopped after --cassandra-load-minutes, the rows written by then are its data set), then Shoal again
on Cassandra's row count (unless --no-same-size), so the side-by-side table compares the same data.
Cassandra is skipped, with a note, when it is not installed (scripts/cassandra/install.sh).

--smoke: 50 MB per node, dd of 256 MiB, 10 s baseline, every phase; a few minutes.

Output: progress lines, a final table, the JSON (--json, default DIR/lifecycle.json) and DIR/lifecycle.md
(the tables as Markdown, for bench/LIFECYCLE.md). The work directory (default
$HOME/.cache/shoal/bench/lifecycle/STAMP) keeps the stress reports and node logs; cluster data is
deleted at the end unless --keep (which also leaves the clusters up).
"""

import argparse
import base64
import json
import math
import os
import re
import shlex
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import threading
import time
import zlib

from . import cputrace
from .proc import machine
from .servers import cassandra_installed
from . import util
from .util import BENCH_HOME, CASS_INSTALL, CASS_REF, HERE, Fail, free_port, log, md_table, shown

# The shoal binary: $SHOAL_BIN (scripts/env.sh), else the release build; main() points this at a copy in the
# work directory, so a rebuild during a run cannot mix two versions in one cluster.
SHOAL_BIN = os.environ.get("SHOAL_BIN") or util.SHOAL_BIN

KEY_BYTES, COLS, COL_BYTES = 10, 5, 200
ROW_BYTES = KEY_BYTES + COLS * COL_BYTES  # what one row carries: the unit of the "true difference"
KEYSPACE = "lc"
STRESS_SHAPE = ["-schema", f"keyspace={KEYSPACE}", "replication(factor=3)", "-col", f"n={COLS}",
                f"size=FIXED({COL_BYTES})"]
MB = 1e6


# ---------------------------------------------------------------- small helpers

def run_cmd(cmd, timeout, env=None, check=True):
    """Runs a command; returns (stdout, stderr, wall seconds). Fail on timeout or, with check, exit != 0."""
    t0 = time.time()
    try:
        p = subprocess.run(cmd, env=env, timeout=timeout, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise Fail(f"timed out after {timeout}s: {' '.join(map(shlex.quote, cmd))}")
    if check and p.returncode != 0:
        tail = "\n".join((p.stdout + p.stderr).splitlines()[-30:])
        raise Fail(f"exit {p.returncode}: {' '.join(map(shlex.quote, cmd))}\n{tail}")
    return p.stdout, p.stderr, time.time() - t0


def mb(n):
    return None if n is None else n / MB


def fmt(v, digits=1, unit=""):
    if v is None:
        return "-"
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return "-"
    return f"{v:,.{digits}f}{unit}"


def ratio(a, b):
    return a / b if a is not None and b else None


class Ticker(threading.Thread):
    """Calls fn() every `every` seconds and logs what it returns (a progress line), until stop()."""

    def __init__(self, fn, every=10.0):
        super().__init__(daemon=True)
        self.fn, self.every, self.halt = fn, every, threading.Event()

    def run(self):
        while not self.halt.wait(self.every):
            try:
                line = self.fn()
            except Exception as e:  # a progress probe must never break the run
                line = f"(progress unavailable: {e})"
            if line:
                log("  " + line)

    def stop(self):
        self.halt.set()
        self.join(10)


# ---------------------------------------------------------------- HDR histograms (shoal stress --json)

def hdr_decode(text):
    """A base64 V2-deflate HdrHistogram (as `shoal stress --json` writes `latency_hdr`, microseconds) as
    {highest equivalent value: count}."""
    raw = base64.b64decode(text)
    _, n = struct.unpack(">II", raw[:8])
    body = zlib.decompress(raw[8:8 + n])
    _, plen, _, digits, low, _, _ = struct.unpack(">IIIIqqd", body[:40])
    payload = body[40:40 + plen]
    unit_mag = int(math.floor(math.log2(max(low, 1))))
    half_mag = int(math.ceil(math.log2(2 * 10 ** digits))) - 1
    half = 1 << half_mag
    out, idx, i = {}, 0, 0
    while i < len(payload):
        v, shift = 0, 0
        for k in range(9):  # zig-zag LEB128, at most 9 bytes (the 9th whole)
            b = payload[i]
            i += 1
            if k == 8:
                v |= b << shift
                break
            v |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        v = (v >> 1) ^ -(v & 1)
        if v < 0:
            idx += -v  # a run of empty buckets
            continue
        if v:
            bucket = (idx >> half_mag) - 1
            sub = (idx & (half - 1)) + half
            if bucket < 0:
                sub, bucket = sub - half, 0
            lo = sub << (bucket + unit_mag)
            hi = lo + (1 << (bucket + unit_mag)) - 1
            out[hi] = out.get(hi, 0) + v
        idx += 1
    return out


def hdr_percentile_ms(hists, q):
    total = {}
    for h in hists:
        for k, v in h.items():
            total[k] = total.get(k, 0) + v
    count = sum(total.values())
    if not count:
        return None
    want, seen = max(1, math.ceil(q / 100 * count)), 0
    for k in sorted(total):
        seen += total[k]
        if seen >= want:
            return k / 1000.0
    return None


def window_latency(report, t0, t1):
    """p50/p99 (ms) and ops of the stress report's intervals that overlap [t0, t1]."""
    ivs = [iv for iv in report.get("intervals", [])
           if iv.get("latency_hdr") and iv["start_unix_s"] < t1 and iv["start_unix_s"] + iv["duration_s"] > t0]
    hists = [hdr_decode(iv["latency_hdr"]) for iv in ivs]
    return dict(p50_ms=hdr_percentile_ms(hists, 50), p99_ms=hdr_percentile_ms(hists, 99),
                ops=sum(iv["ops"] for iv in ivs), errors=sum(iv.get("errors", 0) for iv in ivs), intervals=len(ivs))


# ---------------------------------------------------------------- bytes on the wire

SS_BYTES = re.compile(r"\bbytes_received:(\d+)")


class WireMeter(threading.Thread):
    """Bytes over TCP connections to or from `port` (the cluster's storage port), from `ss -ti` every
    0.5 s: per socket, bytes_received now minus at the start (0 for a socket opened meanwhile); a socket
    that closes keeps its last reading. Sums both directions once each (a byte counts at its receiver)."""

    def __init__(self, port, every=0.5):
        super().__init__(daemon=True)
        self.port, self.every, self.halt = port, every, threading.Event()
        self.first, self.last, self.error = self.read(), {}, None
        self.last.update(self.first)

    def read(self):
        try:
            out = subprocess.run(["ss", "-tinH", "state", "established",
                                  f"( sport = :{self.port} or dport = :{self.port} )"],
                                 text=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=10).stdout
        except (OSError, subprocess.TimeoutExpired) as e:
            self.error = str(e)
            return {}
        socks, key = {}, None
        for line in out.splitlines():
            if not line.startswith(("\t", " ")):
                f = line.split()
                key = (f[-2], f[-1]) if len(f) >= 2 else None
            elif key is not None:
                m = SS_BYTES.search(line)
                socks[key] = int(m.group(1)) if m else 0
        return socks

    def run(self):
        while not self.halt.wait(self.every):
            self.last.update(self.read())

    def stop(self):
        self.halt.set()
        self.join(10)
        self.last.update(self.read())
        return sum(v - self.first.get(k, 0) for k, v in self.last.items() if v >= self.first.get(k, 0))


# ---------------------------------------------------------------- the disk

DD_RATE = re.compile(r"^(\d+) bytes .* copied, ([\d.]+) s", re.M)


def dd_rates(directory, mib):
    """Sequential write and read of `mib` MiB in 1 MiB blocks: O_DIRECT with an fdatasync at the end for
    the write, O_DIRECT for the read (so neither is the page cache). MB/s each (1 MB = 10^6 bytes)."""
    path = os.path.join(directory, f"dd-probe.{os.getpid()}")
    try:
        out = {}
        for what, cmd in (("write", ["dd", "if=/dev/zero", f"of={path}", "bs=1M", f"count={mib}", "oflag=direct",
                                     "conv=fdatasync"]),
                          ("read", ["dd", f"if={path}", "of=/dev/null", "bs=1M", "iflag=direct"])):
            _, err, _ = run_cmd(cmd, timeout=1800)
            m = DD_RATE.search(err)
            if not m:
                raise Fail(f"cannot read dd's rate from: {err.strip()}")
            out[f"{what}_mb_s"] = int(m.group(1)) / float(m.group(2)) / MB
            out[f"{what}_cmd"] = " ".join(cmd).replace(path, "FILE")
        out["mib"] = mib
        return out
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass


# ---------------------------------------------------------------- shoal stress

class Stress:
    """`shoal stress` against a cluster, its output in DIR/NAME.log and its report in DIR/NAME.json."""

    def __init__(self, contact, port, out):
        self.contact, self.port, self.out = contact, port, out

    def cmd(self, words, name):
        return ([SHOAL_BIN, "stress"] + words + ["-node", ",".join(self.contact), "-port", f"native={self.port}"] +
                STRESS_SHAPE + ["--json", os.path.join(self.out, f"{name}.json")])

    def start(self, words, name):
        logf = open(os.path.join(self.out, f"{name}.log"), "w")
        cmd = self.cmd(words, name)
        logf.write("$ " + " ".join(map(shlex.quote, cmd)) + "\n")
        logf.flush()
        proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        logf.close()
        proc.name = name
        return proc

    def last_line(self, name):
        """The stress's last interval line as (total ops, op/s), if any."""
        try:
            with open(os.path.join(self.out, f"{name}.log"), "rb") as f:
                f.seek(max(0, os.fstat(f.fileno()).st_size - 4096))
                lines = f.read().decode(errors="replace").splitlines()
        except OSError:
            return None
        for line in reversed(lines):
            f = line.split(",")
            if len(f) > 3 and f[0].strip().isdigit():
                try:
                    return int(f[0]), float(f[1])
                except ValueError:
                    continue
        return None

    def finish(self, proc, timeout, interrupt=False):
        """Waits for (with interrupt: first SIGINTs) a started run; returns its JSON report."""
        if interrupt and proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)
            raise Fail(f"stress {proc.name} did not end within {timeout}s (killed); see {proc.name}.log")
        path = os.path.join(self.out, f"{proc.name}.json")
        if proc.returncode != 0 and not os.path.exists(path):
            with open(os.path.join(self.out, f"{proc.name}.log"), errors="replace") as f:
                lines = f.readlines()
            why = [x for x in lines[1:] if "error" in x.lower() or x.startswith("shoal stress")][:3] or lines[-5:]
            raise Fail(f"stress {proc.name} failed (exit {proc.returncode}): {''.join(why).strip()} "
                       f"(see {shown(os.path.join(self.out, proc.name + '.log'))})")
        with open(path) as f:
            return json.load(f)

    def run(self, words, name, timeout, progress_total=None, cap_s=None):
        """One run to its end (or SIGINT after cap_s seconds), with a progress line every 15 s."""
        proc = self.start(words, name)
        t0 = time.time()

        def progress():
            got = self.last_line(name)
            if not got:
                return f"{name}: starting"
            done = f"{got[0]:,}" + (f"/{progress_total:,} ({100 * got[0] / progress_total:.0f}%)"
                                    if progress_total else "")
            return f"{name}: {done} ops, {got[1]:,.0f} op/s, {time.time() - t0:.0f} s"

        ticker = Ticker(progress, 15)
        ticker.start()
        try:
            while proc.poll() is None:
                if cap_s is not None and time.time() - t0 > cap_s:
                    log(f"  {name}: {cap_s:.0f} s cap reached: stopping it (SIGINT); its rows so far are the data set")
                    return self.finish(proc, 120, interrupt=True)
                if time.time() - t0 > timeout:
                    return self.finish(proc, 60, interrupt=True)
                time.sleep(0.5)
            return self.finish(proc, 60)
        finally:
            ticker.stop()
            if proc.poll() is None:
                proc.kill()


def fixed_words(rate, threads, lo, seconds):
    """The fixed-rate latency workload: writes at QUORUM on keys past the loaded ones (the command's words
    first, then the dash options, as `shoal stress` takes them)."""
    return ["write", f"duration={seconds}s", "cl=QUORUM", "no-warmup", "--keep-going",
            "-pop", f"seq={lo}..{lo + 50_000_000}", "-rate", f"fixed={rate}/s", f"threads={threads}"]


# ---------------------------------------------------------------- the systems

def binary_id(path):
    """Which build a run used: the binary's sha256 (first 12 hex digits) and modification time."""
    import hashlib
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return f"binary sha256 {h.hexdigest()[:12]} built {time.strftime('%Y-%m-%d %H:%M', time.localtime(os.path.getmtime(path)))}"


def span_s(sessions):
    """Seconds from the first session's start to the last one's end: sessions may overlap (a joining
    node pulls from its sources at once). Falls back to the sum of their times when the node does not
    report millisecond starts."""
    if sessions and all("started_unix_ms" in s for s in sessions):
        starts = [s["started_unix_ms"] / 1000 for s in sessions]
        ends = [s["started_unix_ms"] / 1000 + s.get("elapsed_s", 0.0) for s in sessions]
        return max(ends) - min(starts)
    return sum(s.get("elapsed_s", 0.0) for s in sessions)


def strip_ansi(text):
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


class ShoalSystem:
    name, label = "shoal", "Shoal"

    def __init__(self, work, extra=()):
        self.out, self.dir = work, os.path.join(work, "cluster")
        self.native_port, self.admin_port, self.storage_port = free_port(), free_port(), free_port()
        self.started = False
        self.extra = list(extra)  # --shoal-config lines, added to every node's shoal.yaml

    def tool(self, index, *args, timeout=600, check=True):
        out, _, _ = run_cmd([SHOAL_BIN, "tool", "-h", f"127.0.0.{index}", "-p", str(self.admin_port)] + list(args) +
                            ["--json"], timeout, check=check)
        return json.loads(out) if out.strip() else {}

    def cluster(self, *args, timeout=600):
        out, err, wall = run_cmd([SHOAL_BIN, "cluster", "--dir", self.dir] + list(args), timeout)
        return out + err, wall

    def status(self):
        out, _, _ = run_cmd([SHOAL_BIN, "cluster", "--dir", self.dir, "status", "--json"], 60)
        return json.loads(out)["nodes"]

    def running(self):
        return [n["index"] for n in self.status() if n.get("running")]

    def pids(self):
        return [n["pid"] for n in self.status() if n.get("running") and n.get("pid")]

    def labelled_pids(self):
        return {f"node{n['index']}": n["pid"] for n in self.status() if n.get("running") and n.get("pid")}

    def up(self):
        os.makedirs(self.dir, exist_ok=True)
        cfg = os.path.join(os.path.dirname(self.dir), "shoal.yaml")
        with open(cfg, "w") as f:  # as tests/python/cluster_harness.py passes config entries
            # No scheduled repair: the repair phase measures an operator's repair of the whole
            # divergence (auto_repair would reconcile part of it first, on its own clock).
            f.write(f"storage_port: {self.storage_port}\nhinted_handoff_enabled: false\nauto_repair: false\n")
            for line in self.extra:
                f.write(line + "\n")
        self.started = True
        out, wall = self.cluster("up", "--nodes", "3", "--num-tokens", "16", "--cluster-name", "lifecycle",
                                 "--native-port", str(self.native_port), "--admin-port", str(self.admin_port),
                                 "--timeout", "180", "--", "--config", cfg, timeout=900)
        return wall, self.describe_config(cfg)

    @staticmethod
    def describe_config(cfg):
        with open(cfg) as f:
            return "num_tokens 16; " + "; ".join(line.strip() for line in f if line.strip())

    def down(self, keep):
        if not self.started:
            return
        self.started = False
        if keep:
            log(f"shoal cluster left up (--keep): {SHOAL_BIN} cluster --dir {self.dir} down --clear")
            return
        out, _, _ = run_cmd([SHOAL_BIN, "cluster", "--dir", self.dir, "down"], 180, check=False)
        log(f"shoal cluster: {out.strip()}")
        logs = os.path.join(os.path.dirname(self.dir), "node-logs")
        os.makedirs(logs, exist_ok=True)
        for d in sorted(os.listdir(self.dir)) if os.path.isdir(self.dir) else []:
            src = os.path.join(self.dir, d, "node.log")
            if os.path.isfile(src):
                shutil.copyfile(src, os.path.join(logs, f"{d}.log"))
        if out.startswith("stopped"):
            shutil.rmtree(self.dir, ignore_errors=True)

    def flush(self, index):
        self.tool(index, "flush", timeout=3600)

    def load_bytes(self, index):
        return self.tool(index, "info").get("load_bytes")

    def disable_hints(self):
        return "hinted_handoff_enabled: false and auto_repair: false in the cluster's config"

    def cleanup(self, index):
        self.tool(index, "cleanup", KEYSPACE, timeout=7200)

    def sessions(self, index):
        try:
            return self.tool(index, "netstats", timeout=30).get("sessions", [])
        except (Fail, ValueError):
            return []

    def streamed_since(self, nodes, t0, direction):
        return sum(s.get("bytes_done", 0) for i in nodes for s in self.sessions(i)
                   if s.get("direction") == direction and s.get("started_unix_s", 0) >= int(t0))

    def add(self, timeout):
        before = set(n["index"] for n in self.status())
        t0 = time.time()
        sources = self.running()
        ticker = Ticker(lambda: f"bootstrap: {mb(self.streamed_since(sources, t0, 'sending')):,.0f} MB sent by "
                                f"nodes {','.join(map(str, sources))}, {time.time() - t0:.0f} s", 10)
        ticker.start()
        try:
            out, wall = self.cluster("add", "--timeout", str(timeout), timeout=timeout + 120)
        finally:
            ticker.stop()
        index = max(set(n["index"] for n in self.status()) - before)
        recv = [s for s in self.sessions(index) if s.get("direction") == "receiving"]
        r = dict(node=index, time_to_normal_s=wall, bytes=sum(s.get("bytes_done", 0) for s in recv),
                 sessions=len(recv), stream_s=span_s(recv), output=out.strip())
        log_path = os.path.join(self.dir, f"node{index}", "node.log")
        with open(log_path, errors="replace") as f:
            m = re.search(r"bootstrap done\s+bytes=(\d+)\s+seconds=([\d.]+)", strip_ansi(f.read()))
        if m:
            r["report_bytes"], r["report_s"] = int(m.group(1)), float(m.group(2))
        r["load_bytes"] = self.load_bytes(index)
        return r

    def decommission(self, index):
        t0 = time.time()
        ticker = Ticker(lambda: f"decommission: {mb(self.streamed_since([index], t0, 'sending')):,.0f} MB handed "
                                f"over, {time.time() - t0:.0f} s", 10)
        ticker.start()
        try:
            out, wall = self.cluster("decommission", str(index), timeout=6 * 3600)
        finally:
            ticker.stop()
        m = re.search(r"left the ring: (\{.*\})", out)
        rep = json.loads(m.group(1)) if m else {}
        ids = {s.get("session"): s.get("target") for s in rep.get("sessions", [])}
        targets = sorted(set(ids.values()))
        received = [s for t in targets for s in self.sessions(int(t.rsplit(".", 1)[1]))
                    if s.get("session") in ids and s.get("direction") == "receiving"]
        return dict(node=index, time_s=wall, bytes=rep.get("bytes"), report_s=rep.get("seconds"),
                    sessions=len(ids), stream_s=span_s(received) if received else None,
                    output=out.strip()[:2000])

    def stop(self, index):
        return self.cluster("stop", str(index), "--graceful", timeout=120)[0].strip()

    def start(self, index):
        out = self.cluster("start", str(index), "--timeout", "600", timeout=720)[0].strip()
        self.wait_un(index, 120)  # NORMAL in its own view; node 1 must see it up too before a repair
        return out

    def wait_un(self, index, seconds):
        """Waits until node 1 sees 127.0.0.`index` UN."""
        end, seen = time.time() + seconds, "?"
        while time.time() < end:
            try:
                st = self.tool(1, "status", timeout=30)
                nodes = [n for dc in st.get("datacenters", []) for n in dc.get("nodes", [])]
                seen = next((n.get("state") for n in nodes if n.get("address") == f"127.0.0.{index}"), "absent")
                if seen == "UN":
                    return
            except (Fail, ValueError):
                pass
            time.sleep(0.5)
        raise Fail(f"node 1 does not see node {index} UN after {seconds} s (it sees {seen})")

    def repair(self, preview):
        # --full, as Cassandra's run: every range compared, each replica compacted first.
        args = ["repair", "--full", KEYSPACE] + (["--preview"] if preview else [])
        t0 = time.time()
        rep = self.tool(1, *args, timeout=6 * 3600)
        return dict(time_s=time.time() - t0, partitions_compared=rep.get("partitions_compared"),
                    partitions_differing=rep.get("partitions_differing"), bytes_estimated=rep.get("bytes_estimated"),
                    bytes_repaired=rep.get("bytes_repaired"), reported_wire_bytes=rep.get("bytes_on_wire"),
                    report_s=rep.get("seconds"))

    def version(self):
        out, _, _ = run_cmd([SHOAL_BIN, "--version"], 30, check=False)
        return f"{out.strip() or 'shoal'}, {binary_id(SHOAL_BIN)}"


CASS_SIZE = re.compile(r"([\d.]+)\s*(B|bytes|KiB|MiB|GiB|TiB|KB|MB|GB|TB)\b")
CASS_UNITS = {"B": 1, "bytes": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "KB": 2**10,
              "MB": 2**20, "GB": 2**30, "TB": 2**40}
CASS_TIME = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})")


def cass_bytes(text):
    m = CASS_SIZE.search(text)
    return int(float(m.group(1)) * CASS_UNITS[m.group(2)]) if m else 0


def cass_time(line):
    m = CASS_TIME.search(line)
    if not m:
        return None
    return time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")) + int(m.group(2)) / 1000


class CassandraSystem:
    """bench/cassandra-cluster.sh: nodes on 127.0.0.i, CQL 9042, storage 7000, JMX 7099+100*i."""
    name, label = "cassandra", "Cassandra"

    def __init__(self, work):
        self.out, self.script = work, os.path.join(HERE, "cassandra-cluster.sh")
        self.cluster_dir = os.path.join(work, "cassandra-cluster")
        self.env = dict(os.environ, CLUSTER_DIR=self.cluster_dir, CASS_REF=CASS_REF, CASS_HOME=CASS_INSTALL)
        self.native_port, self.storage_port = 9042, 7000
        self.started = False

    def sh(self, *args, timeout=600, check=True):
        out, err, wall = run_cmd([self.script] + list(args), timeout, env=self.env, check=check)
        return out + err, wall

    def nodetool(self, index, *args, timeout=600):
        return self.sh("nodetool", str(index), *args, timeout=timeout)[0]

    def nodes(self):
        out, _ = self.sh("status", check=False, timeout=180)
        return [int(m.group(1)) for m in re.finditer(r"^node (\d+) \S+ pid (\d+)", out, re.M)]

    def running(self):
        return self.nodes()

    def pids(self):
        out, _ = self.sh("pids", timeout=60)
        return [int(p) for p in out.strip().split(",") if p.strip()]

    def labelled_pids(self):
        return {f"jvm{i}": pid for i, pid in enumerate(self.pids(), 1)}

    def up(self):
        self.started = True
        out, wall = self.sh("up", "3", timeout=1800)
        return wall, ("cassandra-cluster.sh up 3: num_tokens 16, allocate_tokens_for_local_replication_factor 3, "
                      "heap " + os.environ.get("CASSANDRA_HEAP", "1G") + "; hinted handoff disabled by "
                      "`nodetool disablehandoff` before the repair phase")

    def down(self, keep):
        if not self.started:
            return
        self.started = False
        if keep:
            log(f"cassandra cluster left up (--keep): CLUSTER_DIR={self.cluster_dir} {self.script} down")
            return
        out, _ = self.sh("down", timeout=600, check=False)
        log(f"cassandra cluster: {out.strip()}")
        logs = os.path.join(os.path.dirname(self.cluster_dir), "cassandra-logs")
        os.makedirs(logs, exist_ok=True)
        for d in sorted(os.listdir(self.cluster_dir)) if os.path.isdir(self.cluster_dir) else []:
            src = os.path.join(self.cluster_dir, d, "logs", "system.log")
            if os.path.isfile(src):
                shutil.copyfile(src, os.path.join(logs, f"{d}-system.log"))
        if out.strip().startswith("stopped"):
            shutil.rmtree(self.cluster_dir, ignore_errors=True)

    def flush(self, index):
        self.nodetool(index, "flush", KEYSPACE, timeout=3600)

    def load_bytes(self, index):
        m = re.search(r"^Load\s*:\s*(.+)$", self.nodetool(index, "info", timeout=180), re.M)
        return cass_bytes(m.group(1)) if m else None

    def disable_hints(self):
        for i in self.running():
            self.nodetool(i, "disablehandoff", timeout=180)
        return "nodetool disablehandoff on every node"

    def cleanup(self, index):
        self.nodetool(index, "cleanup", KEYSPACE, timeout=7200)

    def log_path(self, index):
        return os.path.join(self.cluster_dir, f"node{index}", "logs", "system.log")

    def log_mark(self, index):
        try:
            return os.path.getsize(self.log_path(index))
        except OSError:
            return 0

    def log_since(self, index, mark):
        try:
            with open(self.log_path(index), errors="replace") as f:
                f.seek(mark)
                return f.read()
        except OSError:
            return ""

    @staticmethod
    def stream_stats(text, direction):
        """From a node's system.log: the bytes its stream sessions announced (`Prepare completed. Receiving N
        files(SIZE), sending N files(SIZE)`) in `direction`, and the time from the first stream line to the
        last session's completion."""
        total, first, last = 0, None, None
        for line in text.splitlines():
            if "[Stream #" not in line and "StreamResultFuture" not in line and "StreamSession" not in line:
                continue
            t = cass_time(line)
            if t is not None:
                first = t if first is None else first
                if re.search(r"is complete|All sessions completed|Session .* complete", line):
                    last = t
            m = re.search(r"Prepare completed\. Receiving \d+ files\(([^)]*)\), sending \d+ files\(([^)]*)\)", line)
            if m:
                total += cass_bytes(m.group(1) if direction == "receiving" else m.group(2))
        return total, (last - first if first is not None and last is not None and last > first else None)

    def add(self, timeout):
        before = set(self.nodes())
        marks = {i: self.log_mark(i) for i in before}
        t0 = time.time()
        ticker = Ticker(lambda: f"bootstrap: {time.time() - t0:.0f} s", 15)
        ticker.start()
        self.env["ADD_TIMEOUT"] = str(timeout)  # the script's own wait for CQL, then for UN
        try:
            out, wall = self.sh("add", timeout=2 * timeout + 300)
        finally:
            ticker.stop()
        index = max(set(self.nodes()) - before)
        got, stream_s = self.stream_stats(self.log_since(index, 0), "receiving")
        if not got:  # the sources' side, should the new node's log word it differently
            got = sum(self.stream_stats(self.log_since(i, marks[i]), "sending")[0] for i in before)
        return dict(node=index, time_to_normal_s=wall, bytes=got or None, stream_s=stream_s, output=out.strip()[-2000:],
                    load_bytes=self.load_bytes(index))

    def decommission(self, index):
        mark = self.log_mark(index)
        t0 = time.time()
        ticker = Ticker(lambda: f"decommission: {time.time() - t0:.0f} s", 15)
        ticker.start()
        try:
            out = self.nodetool(index, "decommission", timeout=6 * 3600)
        finally:
            ticker.stop()
        wall = time.time() - t0
        sent, stream_s = self.stream_stats(self.log_since(index, mark), "sending")
        self.sh("stop", str(index), timeout=180)
        return dict(node=index, time_s=wall, bytes=sent or None, stream_s=stream_s, output=out.strip()[-2000:])

    def stop(self, index):
        return self.sh("stop", str(index), timeout=180)[0].strip()

    def start(self, index):
        return self.sh("start", str(index), timeout=900)[0].strip()

    def repair(self, preview):
        marks = {i: self.log_mark(i) for i in self.running()}
        args = ["repair", "-full", KEYSPACE] + (["--preview"] if preview else [])
        t0 = time.time()
        try:
            out = self.nodetool(1, *args, timeout=6 * 3600)
        except Fail as e:
            if not preview:
                raise
            return dict(time_s=time.time() - t0, error=str(e)[-500:])  # a preview is a side number
        wall = time.time() - t0
        text = "".join(self.log_since(i, m) for i, m in marks.items())
        out_of_sync = sum(int(m.group(1)) for m in re.finditer(r"ha(?:s|ve) (\d+) range\(s\) out of sync", text))
        streamed = sum(cass_bytes(m.group(1)) for m in
                       re.finditer(r"Prepare completed\. Receiving \d+ files\(([^)]*)\)", text))
        return dict(time_s=wall, ranges_out_of_sync=out_of_sync, bytes_repaired=streamed or (0 if not preview else None),
                    output=out.strip()[-2000:])

    def version(self):
        return f"Apache Cassandra {cassandra_installed()[1]}"


# ---------------------------------------------------------------- the run

class Lifecycle:
    def __init__(self, args, work):
        self.a, self.work = args, work

    def phase(self, title):
        log(f"== {title}")

    def run_system(self, system, rows, cap_s=None):
        """Every phase on one fresh cluster of `system`; returns its results (on a failure, those measured
        so far and the error, recorded once the cluster is down: main exits 1)."""
        a = self.a
        out = system.out  # its stress reports, logs and cluster
        os.makedirs(out, exist_ok=True)
        res = dict(system=system.name, label=system.label, version=system.version())
        res["dd"] = self.dd(out)
        try:
            self.phases(system, res, out, rows, cap_s)
        except (Fail, subprocess.SubprocessError, OSError, ValueError, KeyError) as e:
            res["error"] = str(e)
            log(f"{system.label}: FAILED: {e}")
        finally:
            system.down(a.keep)
        return res

    def dd(self, out):
        self.phase(f"dd: {self.a.dd_mib} MiB sequential write and read in {shown(out)}")
        d = dd_rates(out, self.a.dd_mib)
        log(f"  disk: write {d['write_mb_s']:,.0f} MB/s, read {d['read_mb_s']:,.0f} MB/s")
        return d

    def phases(self, system, res, out, rows, cap_s):
        a = self.a
        rows = rows or int(a.gb_per_node * 1e9 / ROW_BYTES)
        self.phase(f"{system.label}: 3 nodes up")
        wall, res["config"] = system.up()
        log(f"  up in {wall:.1f} s")
        stress = Stress([f"127.0.0.{i}" for i in (1, 2, 3)], system.native_port, out)

        # load
        self.phase(f"{system.label}: load {rows:,} rows of {ROW_BYTES} B (~{rows * ROW_BYTES / 1e9:.2f} GB per node "
                   f"at RF=3)" + (f", at most {cap_s / 60:.0f} min" if cap_s else ""))
        rep = stress.run(["write", f"n={rows}", "cl=ONE", "no-warmup", "-rate", "threads=64"], "load",
                         timeout=max(3600, rows / 200), progress_total=rows, cap_s=cap_s)
        s = rep["summary"]
        rows = min(rows, s["ops"])  # fewer when the load was stopped at its cap
        t0 = time.time()
        for i in (1, 2, 3):
            system.flush(i)
        loads = [system.load_bytes(i) for i in (1, 2, 3)]
        res["load"] = dict(rows=rows, row_bytes=ROW_BYTES, seconds=s["elapsed_s"], rows_s=s["op_rate"],
                           flush_s=time.time() - t0, load_bytes=loads,
                           command="shoal stress " + " ".join(rep.get("command_line", [])))
        log(f"  {rows:,} rows in {s['elapsed_s']:.0f} s ({s['op_rate']:,.0f} rows/s); load per node "
            f"{', '.join(fmt(mb(x), 0, ' MB') for x in loads)}")
        lo = rows + 1

        # baseline
        self.phase(f"{system.label}: baseline latency, {a.baseline_s} s at {a.rate}/s, QUORUM")
        rep = stress.run(fixed_words(a.rate, 8, lo, a.baseline_s), "baseline",
                         timeout=a.baseline_s + 120)
        base = rep["summary"]["latency"]
        res["baseline"] = dict(p50_ms=base["p50_ms"], p99_ms=base["p99_ms"], ops=rep["summary"]["ops"],
                               errors=rep["summary"]["errors"], command="shoal stress " +
                               " ".join(rep.get("command_line", [])))
        log(f"  p50 {base['p50_ms']:.2f} ms, p99 {base['p99_ms']:.2f} ms")

        if a.cycles:
            # The experiment's loop: joins and leaves under load only, back to back, no cleanup, no repair.
            res["cycles"] = []
            for c in range(a.cycles):
                self.phase(f"{system.label}: cycle {c + 1} of {a.cycles}: bootstrap of a node under load")
                join = self.topology(system, stress, out, lo, True, "bootstrap", None, tag=f"-{c + 1}")
                self.phase(f"{system.label}: cycle {c + 1} of {a.cycles}: decommission of node {join['node']} under load")
                leave = self.topology(system, stress, out, lo, True, "decommission", join["node"], tag=f"-{c + 1}")
                res["cycles"].append({"bootstrap+load": join, "decommission+load": leave})
            return

        for loaded in (False, True):
            tag = "+load" if loaded else ""
            self.phase(f"{system.label}: bootstrap of a 4th node{' under load' if loaded else ''}")
            res["bootstrap" + tag] = self.topology(system, stress, out, lo, loaded, "bootstrap", None)
            node = res["bootstrap" + tag]["node"]
            self.phase(f"{system.label}: cleanup on nodes 1-3 (as after any bootstrap)")
            t0 = time.time()
            for i in (1, 2, 3):
                system.cleanup(i)
            res["bootstrap" + tag]["cleanup_s"] = time.time() - t0
            log(f"  cleanup in {time.time() - t0:.1f} s")
            self.phase(f"{system.label}: decommission of node {node}{' under load' if loaded else ''}")
            res["decommission" + tag] = self.topology(system, stress, out, lo, loaded, "decommission", node)

        # repair
        diff_rows = max(1, rows // 100)
        self.phase(f"{system.label}: repair of 1% divergence ({diff_rows:,} rows rewritten while node 3 is down)")
        how = system.disable_hints()
        log(f"  node 3: {system.stop(3)}")
        rep = Stress(["127.0.0.1", "127.0.0.2"], system.native_port, out).run(
            ["write", f"n={diff_rows}", "cl=QUORUM", "no-warmup", "seed=2", "-pop", f"seq=1..{diff_rows}",
             "-rate", "threads=32"], "diverge", timeout=3600)
        if rep["summary"]["errors"]:
            raise Fail(f"the divergence writes had {rep['summary']['errors']} errors")
        log(f"  node 3: {system.start(3)}")
        for i in (1, 2, 3):
            system.flush(i)
        true_diff = diff_rows * ROW_BYTES
        r = dict(rows=diff_rows, true_bytes=true_diff, hints=how,
                 command="shoal stress " + " ".join(rep.get("command_line", [])))
        for preview in (True, False):
            meter = WireMeter(system.storage_port)
            meter.start()
            got = system.repair(preview)
            got["wire_bytes"] = meter.stop()
            got["wire_vs_true"] = ratio(got["wire_bytes"], true_diff)
            r["preview" if preview else "repair"] = got
            log(f"  repair{' --preview' if preview else ''}: {got['time_s']:.1f} s, "
                f"{got.get('partitions_differing', got.get('ranges_out_of_sync'))} differing "
                f"({'partitions' if 'partitions_differing' in got else 'ranges'}), "
                f"repaired {fmt(mb(got.get('bytes_repaired')), 2, ' MB')}, on the wire "
                f"{fmt(mb(got['wire_bytes']), 2, ' MB')} = {fmt(got['wire_vs_true'], 2, 'x')} the true "
                f"difference ({true_diff / MB:,.2f} MB)")
        res["repair"] = r

    def topology(self, system, stress, out, lo, loaded, op, node, tag=""):
        """A bootstrap (node None) or decommission, under the fixed-rate load or not; timed, metered."""
        a = self.a
        bg, trace, samples = None, None, None
        if loaded:
            bg = stress.start(fixed_words(a.rate, 8, lo, 6 * 3600), f"{op}-load{tag}")
            bg_start = time.time()
            if a.cpu_trace:
                trace = cputrace.CpuTrace(self.traced_processes(system, bg))
                trace.start()
            time.sleep(a.lead_s)
            if bg.poll() is not None:
                stress.finish(bg, 10)
                if trace:
                    trace.stop()
                raise Fail(f"the background stress of {op} ended early; see {op}-load{tag}.log")
        meter = WireMeter(system.storage_port)
        meter.start()
        t0 = time.time()
        try:
            r = system.add(a.join_timeout) if op == "bootstrap" else system.decommission(node)
        finally:
            t1 = time.time()
            wire = meter.stop()
            samples = trace.stop() if trace else None
            if bg is not None:
                time.sleep(1)
                rep = stress.finish(bg, 120, interrupt=True)
        r["wire_bytes"] = wire
        r["seconds"] = t1 - t0
        if bg is not None:
            w = window_latency(rep, t0, t1)
            # The same run's seconds before the operation (its first second, connecting, left out).
            lead = window_latency(rep, bg_start + 1, t0 - 0.01)
            r["client"] = dict(w, lead_p99_ms=lead["p99_ms"], lead_ops=lead["ops"],
                               whole_run_p99_ms=rep["summary"]["latency"]["p99_ms"],
                               whole_run_errors=rep["summary"]["errors"])
        if samples is not None:
            r["cpu"] = cputrace.summarize(samples, t0, t1 + 0.5)
            r["cpu_before"] = cputrace.summarize(samples, t0 - a.lead_s + 1, t0)
            r["cpu_samples"] = samples
            for key, what in (("cpu_before", f"in the {a.lead_s} s before"), ("cpu", "during it")):
                c = r[key]
                log(f"  CPU {what} ({c['seconds']:.1f} s): " + ", ".join(f"{k} {v:.1f} s" for k, v in c["kinds"][:8])
                    + "; machine: " + ", ".join(f"{k} {v:.1f} s" for k, v in c["machine"].items() if v >= 0.05))
        stream_s = r.get("stream_s")
        r["mb_s"] = mb(r["bytes"]) / stream_s if r.get("bytes") and stream_s else None
        r["mb_s_whole"] = mb(r["bytes"]) / r["seconds"] if r.get("bytes") else None
        secs = r.get("time_to_normal_s", r.get("time_s"))
        log(f"  {op} of node {r['node']}: {secs:.1f} s{' to NORMAL' if op == 'bootstrap' else ''}, "
            f"{fmt(mb(r.get('bytes')), 0, ' MB')} of table data, {fmt(r['mb_s'], 0, ' MB/s')} over the stream "
            f"sessions ({fmt(stream_s, 1, ' s')}), {fmt(r['mb_s_whole'], 0, ' MB/s')} end to end; "
            f"{fmt(mb(wire), 0, ' MB')} on the wire"
            + (f"; client p99 {fmt(r['client']['p99_ms'], 2, ' ms')} during, {fmt(r['client']['lead_p99_ms'], 2, ' ms')} "
               f"in the {a.lead_s} s before ({r['client']['errors']} errors)" if bg else ""))
        return r


    @staticmethod
    def traced_processes(system, bg):
        """{label: pid} of the nodes (node1.., as `cluster status` says; cached for 3 s, since asking costs a
        process) and of the background client."""
        cache = dict(at=0.0, pids={})

        def current():
            if time.time() - cache["at"] > 3:
                cache["at"] = time.time()
                try:
                    cache["pids"] = system.labelled_pids()
                except Exception:  # keep the last known
                    pass
            pids = dict(cache["pids"])
            if bg is not None:
                pids["client"] = bg.pid
            return pids
        return current


# ---------------------------------------------------------------- tables

def system_rows(res, dd_write=None):
    """The lifecycle table's rows of one system's results."""
    rows = []
    base = res.get("baseline", {}).get("p99_ms")
    dd = dd_write or res.get("dd", {}).get("write_mb_s")
    for key, what in (("bootstrap", "bootstrap"), ("decommission", "decommission"),
                      ("bootstrap+load", "bootstrap, under load"), ("decommission+load", "decommission, under load")):
        r = res.get(key)
        if not r:
            continue
        during = r.get("client", {}).get("p99_ms")
        rows.append([res["label"], what, fmt(mb(r.get("bytes")), 0),
                     fmt(r.get("time_to_normal_s", r.get("time_s")), 1),
                     fmt(r.get("stream_s"), 1), fmt(r.get("mb_s"), 0), fmt(r.get("mb_s_whole"), 0),
                     fmt(ratio(r.get("mb_s"), dd), 2),
                     fmt(base, 2) if during is not None else "-", fmt(r.get("client", {}).get("lead_p99_ms"), 2),
                     fmt(during, 2), fmt(ratio(during, base), 2, "x")])
    return rows


LC_HEADER = ["system", "operation", "MB moved", "s (to NORMAL / to leave)", "s streaming", "MB/s streaming",
             "MB/s end to end", "vs dd write", "p99 baseline ms", "p99 just before ms", "p99 during ms",
             "during/baseline"]
REPAIR_HEADER = ["system", "run", "s", "differing", "MB repaired", "MB on the wire (ss)", "MB on the wire (report)",
                 "true difference MB", "wire / true"]


def repair_rows(res):
    r = res.get("repair")
    if not r:
        return []
    out = []
    for key in ("preview", "repair"):
        g = r.get(key)
        if not g:
            continue
        diff = g.get("partitions_differing")
        diff = f"{diff:,} partitions" if diff is not None else f"{g.get('ranges_out_of_sync', 0):,} ranges"
        out.append([res["label"], "repair --preview" if key == "preview" else "repair", fmt(g.get("time_s"), 1), diff,
                    fmt(mb(g.get("bytes_repaired")), 2), fmt(mb(g.get("wire_bytes")), 2),
                    fmt(mb(g.get("reported_wire_bytes")), 2), fmt(mb(r["true_bytes"]), 2),
                    fmt(g.get("wire_vs_true"), 2, "x")])
    return out


CYCLE_HEADER = ["cycle", "operation", "s", "MB moved", "MB/s streaming", "p99 just before ms", "p99 during ms",
                "during/before", "during/baseline", "top CPU kinds during it (s)"]


def cycle_rows(res):
    """One row per operation of --cycles."""
    rows = []
    base = res.get("baseline", {}).get("p99_ms")
    for i, c in enumerate(res.get("cycles", []), 1):
        for key in ("bootstrap+load", "decommission+load"):
            r = c.get(key) or {}
            cl = r.get("client", {})
            top = ", ".join(f"{k} {v:.1f}" for k, v in (r.get("cpu") or {}).get("kinds", [])[:4])
            rows.append([str(i), key, fmt(r.get("time_to_normal_s", r.get("time_s")), 1), fmt(mb(r.get("bytes")), 0),
                         fmt(r.get("mb_s"), 0), fmt(cl.get("lead_p99_ms"), 2), fmt(cl.get("p99_ms"), 2),
                         fmt(ratio(cl.get("p99_ms"), cl.get("lead_p99_ms")), 2, "x"),
                         fmt(ratio(cl.get("p99_ms"), base), 2, "x"), top or "-"])
    return rows


def cycle_medians(res):
    """Per operation of --cycles: the median client p99 during it, against the baseline's."""
    base = res.get("baseline", {}).get("p99_ms")
    out = []
    for key in ("bootstrap+load", "decommission+load"):
        during = sorted(c[key]["client"]["p99_ms"] for c in res.get("cycles", [])
                        if (c.get(key) or {}).get("client", {}).get("p99_ms") is not None)
        if during:
            med = statistics.median(during)
            out.append(f"{key}: median client p99 during it {med:.2f} ms over {len(during)} cycles "
                       f"({fmt(ratio(med, base), 2, 'x')} the baseline's {fmt(base, 2, ' ms')}; "
                       f"range {during[0]:.2f}-{during[-1]:.2f} ms)")
    return out


def describe(res):
    load = res.get("load", {})
    dd = res.get("dd", {})
    lb = [x for x in load.get("load_bytes", []) if x]
    return (f"{res['label']} ({res.get('version', '')}): {load.get('rows', 0):,} rows x {ROW_BYTES} B, "
            f"load per node {', '.join(fmt(mb(x), 0, ' MB') for x in lb) or '-'}, loaded in "
            f"{fmt(load.get('seconds'), 0, ' s')}; dd write {fmt(dd.get('write_mb_s'), 0)} MB/s, read "
            f"{fmt(dd.get('read_mb_s'), 0)} MB/s; baseline p99 {fmt(res.get('baseline', {}).get('p99_ms'), 2)} ms"
            + (f"; FAILED: {res['error'].splitlines()[0]}" if res.get("error") else ""))


def goals(res):
    """The issue-21 goals, checked on one Shoal result."""
    out = []
    dd = res.get("dd", {}).get("write_mb_s")
    for key in ("bootstrap", "bootstrap+load"):
        r = res.get(key)
        if r and r.get("mb_s") is not None:
            out.append(f"{key}: {r['mb_s']:,.0f} MB/s received (goal >= 200 MB/s: "
                       f"{'met' if r['mb_s'] >= 200 else 'NOT met'}; {fmt(ratio(r['mb_s'], dd), 2)} of dd's write rate)")
    base = res.get("baseline", {}).get("p99_ms")
    for key in ("bootstrap+load", "decommission+load"):
        during = (res.get(key) or {}).get("client", {}).get("p99_ms")
        if during is not None and base:
            lead = res[key]["client"].get("lead_p99_ms")
            out.append(f"{key}: client p99 {during:.2f} ms vs {base:.2f} ms in the baseline = {during / base:.2f}x "
                       f"(goal <= 2x: {'met' if during <= 2 * base else 'NOT met'}; "
                       f"{fmt(ratio(during, lead), 2, 'x')} the {fmt(lead, 2, ' ms')} of the seconds just before)")
    g = (res.get("repair") or {}).get("repair")
    if g and g.get("wire_vs_true") is not None:
        out.append(f"repair: {g['wire_vs_true']:.2f}x the true difference on the wire "
                   f"(goal <= 1.5x: {'met' if g['wire_vs_true'] <= 1.5 else 'NOT met'})")
    return out


def source_commit():
    out, _, _ = run_cmd(["git", "-C", util.ROOT, "log", "-1", "--format=%h %cd", "--date=short"], 30, check=False)
    return out.strip() or "unknown"


def render(results, command):
    lc, rp, desc, side = [], [], [], []
    for res in results:
        lc += system_rows(res)
        rp += repair_rows(res)
        desc.append("- " + describe(res) + (f" ({res['note']})" if res.get("note") else ""))
    md = [f"Command: `{command}`", f"Machine: {machine()}", f"Date: {time.strftime('%Y-%m-%d %H:%M %Z')}; "
          f"source at commit {source_commit()} (plus the working tree the binary was built from)", "",
          *desc]
    for header, rows in ((LC_HEADER, lc), (REPAIR_HEADER, rp)):
        if rows:  # --cycles runs neither table's phases
            md += ["", md_table(header, rows)]
    for res in results:
        if res.get("cycles"):
            md += ["", f"Cycles ({res['label']}): joins and leaves under load, back to back:", "",
                   md_table(CYCLE_HEADER, cycle_rows(res)), ""] + [f"- {x}" for x in cycle_medians(res)]
    for res in results:
        if res["system"] == "shoal" and not res.get("note"):
            g = goals(res)
            if g:
                md += ["", f"Goals ({res['label']}, {res.get('load', {}).get('rows', 0):,} rows):"] + [f"- {x}" for x in g]
    cass = next((r for r in results if r["system"] == "cassandra" and "load" in r), None)
    same = next((r for r in results if r["system"] == "shoal" and r.get("note")), None)
    if cass and same:
        for key in ("bootstrap", "bootstrap+load", "decommission", "decommission+load"):
            s, c = same.get(key) or {}, cass.get(key) or {}
            side.append([key, fmt(s.get("mb_s"), 0), fmt(c.get("mb_s"), 0), fmt(s.get("mb_s_whole"), 0),
                         fmt(c.get("mb_s_whole"), 0)])
        s, c = (same.get("repair") or {}).get("repair") or {}, (cass.get("repair") or {}).get("repair") or {}
        side.append(["repair (MB on the wire / s)", fmt(ratio(mb(s.get("wire_bytes")), s.get("time_s")), 1),
                     fmt(ratio(mb(c.get("wire_bytes")), c.get("time_s")), 1), "-", "-"])
        md += ["", f"Side by side on the same data set ({cass['load']['rows']:,} rows x {ROW_BYTES} B per node):", "",
               md_table(["operation", "Shoal MB/s streaming", "Cassandra MB/s streaming", "Shoal MB/s end to end",
                         "Cassandra MB/s end to end"], side)]
    return "\n".join(md) + "\n"


# ---------------------------------------------------------------- command line

def parse(argv):
    p = argparse.ArgumentParser(prog="bench/lifecycle", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gb-per-node", type=float, help="Shoal's data per node, GB (default 5; 0.05 with --smoke)")
    p.add_argument("--system", choices=("shoal", "cassandra", "both"), default="both")
    p.add_argument("--smoke", action="store_true", help="50 MB per node, dd 256 MiB, 10 s baseline: a few minutes")
    p.add_argument("--json", metavar="OUT", help="the results as JSON (default DIR/lifecycle.json)")
    p.add_argument("--dir", metavar="DIR", help="work directory (default $HOME/.cache/shoal/bench/lifecycle/STAMP)")
    p.add_argument("--keep", action="store_true", help="leave the clusters up and their data in place")
    p.add_argument("--cassandra-gb-per-node", type=float,
                   help="Cassandra's data per node, GB (default 1; 0.05 with --smoke)")
    p.add_argument("--cassandra-load-minutes", type=float, default=15.0,
                   help="stop Cassandra's load after this long; the rows written are its data set (default 15)")
    p.add_argument("--no-same-size", action="store_true",
                   help="with --system both: no Shoal run on Cassandra's data set")
    p.add_argument("--dd-mib", type=int, default=None, help="dd's size (default 2048; 256 with --smoke)")
    p.add_argument("--rate", type=int, default=2000, help="the latency workload's fixed rate, ops/s (default 2000)")
    p.add_argument("--baseline-s", type=int, default=None, help="the baseline's length (default 20; 10 with --smoke)")
    p.add_argument("--shoal-config", action="append", default=[], metavar="'KEY: VALUE'",
                   help="a line added to every Shoal node's shoal.yaml (repeatable), e.g. 'stream_throughput_outbound: 50MiB/s'")
    p.add_argument("--join-timeout", type=int, default=3600, help="seconds a join may take (default 3600)")
    p.add_argument("--cycles", type=int, default=0, metavar="K",
                   help="an experiment: after the load and baseline, K joins and leaves under load back to back "
                        "(no cleanup, no joins without load, no repair), each with its client p99")
    p.add_argument("--cpu-trace", action="store_true",
                   help="sample /proc during each operation: CPU seconds by thread kind of the nodes, the client "
                        "and the kernel's threads, and the machine's user/nice/system/softirq/steal split")
    a = p.parse_args(argv)
    a.gb_per_node = a.gb_per_node or (0.05 if a.smoke else 5.0)
    a.cassandra_gb_per_node = a.cassandra_gb_per_node or (0.05 if a.smoke else 1.0)
    a.dd_mib = a.dd_mib or (256 if a.smoke else 2048)
    a.baseline_s = a.baseline_s or (10 if a.smoke else 20)
    a.lead_s = 3 if a.smoke else 10  # the load runs this long before the operation starts
    if a.gb_per_node <= 0 or a.cassandra_gb_per_node <= 0:
        p.error("sizes must be positive")
    if a.cycles < 0:
        p.error("--cycles must not be negative")
    return a


def on_signal(signum, _frame):
    raise SystemExit(128 + signum)


def main(argv=None):
    global SHOAL_BIN
    argv = sys.argv[1:] if argv is None else argv
    a = parse(argv)
    command = "bench/lifecycle " + " ".join(map(shlex.quote, argv))
    work = os.path.abspath(a.dir or os.path.join(BENCH_HOME, "lifecycle", time.strftime("%Y%m%d-%H%M%S")))
    want_cass = a.system in ("cassandra", "both")
    installed, version = cassandra_installed()
    if want_cass and not installed:
        print(f"bench/lifecycle: Apache Cassandra is not installed in {shown(CASS_INSTALL)} (run "
              f"scripts/cassandra/install.sh): skipping Cassandra", file=sys.stderr)
        if a.system == "cassandra":
            sys.exit(0)
        want_cass = False
    if not os.access(SHOAL_BIN, os.X_OK):
        print(f"bench/lifecycle: no shoal binary at {shown(SHOAL_BIN)} (cargo build --release, or set "
              f"CARGO_TARGET_DIR)", file=sys.stderr)
        sys.exit(1)
    os.makedirs(work, exist_ok=True)
    if a.system != "cassandra" or want_cass:  # the stress client drives Cassandra too
        os.makedirs(os.path.join(work, "bin"), exist_ok=True)
        pinned = os.path.join(work, "bin", "shoal")
        shutil.copy2(SHOAL_BIN, pinned)
        SHOAL_BIN = pinned
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)
    log(f"bench/lifecycle: work directory {shown(work)}; {machine()}")
    bench = Lifecycle(a, work)
    results, live, code = [], [], 0
    try:
        if a.system in ("shoal", "both"):
            sysm = ShoalSystem(os.path.join(work, "shoal"), a.shoal_config)
            live.append(sysm)
            results.append(bench.run_system(sysm, None))
        if want_cass:
            sysm = CassandraSystem(os.path.join(work, "cassandra"))
            live.append(sysm)
            cres = bench.run_system(sysm, int(a.cassandra_gb_per_node * 1e9 / ROW_BYTES),
                                    cap_s=a.cassandra_load_minutes * 60)
            results.append(cres)
            rows = cres.get("load", {}).get("rows")
            if a.system == "both" and not a.no_same_size and rows:
                sysm = ShoalSystem(os.path.join(work, "shoal-same-size"), a.shoal_config)
                live.append(sysm)
                res = bench.run_system(sysm, rows)
                res["note"] = "on Cassandra's data set"
                results.append(res)
    except KeyboardInterrupt:
        code = 130
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    finally:
        for s in live:
            try:
                s.down(a.keep)
            except Exception as e:  # keep stopping the others
                print(f"warning: stopping {s.label}: {e}", file=sys.stderr)
    doc = dict(command=command, machine=machine(), date=time.strftime("%Y-%m-%dT%H:%M:%S%z"), work=shown(work),
               commit=source_commit(),
               row_bytes=ROW_BYTES, results=results)
    jpath = a.json or os.path.join(work, "lifecycle.json")
    with open(jpath, "w") as f:
        json.dump(doc, f, indent=2, default=str)
    md = render(results, command)
    with open(os.path.join(work, "lifecycle.md"), "w") as f:
        f.write(md)
    print("\n" + md)
    log(f"JSON: {shown(jpath)}; Markdown: {shown(os.path.join(work, 'lifecycle.md'))}")
    if SHOAL_BIN.startswith(work + os.sep) and not a.keep:  # the pinned copy: the report names it by sha256
        shutil.rmtree(os.path.dirname(SHOAL_BIN), ignore_errors=True)
    if any(r.get("error") for r in results) and not code:
        code = 1
    sys.exit(code)
