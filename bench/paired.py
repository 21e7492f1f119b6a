#!/usr/bin/env python3
"""bench/paired.py: a paired A/B of two `shoal` binaries, both serving at once, for a machine too noisy
for `bench/ab.py`'s one-after-another rounds (a shared VM's steal time moves a run's CPU-us/op by 20 %).

    bench/paired.py BIN_A BIN_B [ROUNDS]      (env: WORKLOAD=mixed|read|write (default mixed), RATIO=read=9,write=1
                                                (mixed's), N=300000 rows,
                                                RATE=15000 op/s per server, DURATION=40s, CLIENT=the stress binary
                                                (default: the build's))

Both servers start at once (A on 127.0.0.1, B on 127.0.0.2, their data in temp dirs under /tmp/ab), each
gets `shoal stress write n=N` and then every key read once (so the row cache is warm), one after the
other. Then each round runs the same fixed-rate workload against both at the same time, for the same
window: `mixed` is `ratio(RATIO) -pop dist=uniform(1..N)`, `read` uniform reads, `write`
uniform overwrites, each `-rate fixed=RATE/s threads=64` with `--server-pid`. Whatever the host does to
the machine in a window, it does to both servers: compare their server CPU-us/op round by round (the
ratio B/A is printed per round, and its median). A fixed rate well under the maximum keeps both
servers equally loaded; their per-op cost is higher than at saturation (less batching), so report the
ratio, not the absolute figures. Swap A and B in a second run to check that the two slots are equal.
Prints one line per round, then the rounds as JSON (each round's slots A and B: op/s, server CPU-us/op, p99
ms, and errors plus missing and mismatched rows).
"""
import json, os, shutil, statistics, subprocess, sys, tempfile

from shoal_bench.util import start_shoal

a, b = sys.argv[1], sys.argv[2]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
workload = os.environ.get("WORKLOAD", "mixed")
n = int(os.environ.get("N", "300000"))
rate = int(os.environ.get("RATE", "15000"))
duration = os.environ.get("DURATION", "40s")
client = os.environ.get("CLIENT") or os.path.join(
    os.environ.get("CARGO_TARGET_DIR") or os.path.expanduser("~/.cache/shoal/target"), "release", "shoal")
args = {
    "mixed": ["mixed", f"duration={duration}", f"ratio({os.environ.get('RATIO', 'read=9,write=1')})", "-pop", f"dist=uniform(1..{n})"],
    "read": ["read", f"duration={duration}", "-pop", f"dist=uniform(1..{n})"],
    "write": ["write", f"duration={duration}", "-pop", f"dist=uniform(1..{n})"],
}[workload]


def stress(host, port, extra, out=None):
    return subprocess.Popen([client, "stress", *extra, "-node", host, "-port", f"native={port}"],
                            stdout=out or subprocess.DEVNULL, stderr=subprocess.STDOUT)


os.makedirs("/tmp/ab", exist_ok=True)
servers = []
try:
    for exe, host in ((a, "127.0.0.1"), (b, "127.0.0.2")):
        d = tempfile.mkdtemp(prefix="paired.", dir="/tmp/ab")
        srv, port, _ = start_shoal(exe, d + "/data", d + "/log", host=host)
        servers.append((exe, host, port, srv, d))
    for _, host, port, _, _ in servers:
        for load in (["write", f"n={n}", "-rate", "threads=64"], ["read", f"n={n}", "-pop", f"seq=1..{n}", "-rate", "threads=64"]):
            if stress(host, port, load).wait() != 0:
                raise SystemExit(f"the load of {host}:{port} failed")
    results = []
    for r in range(1, rounds + 1):
        runs = []
        for exe, host, port, srv, d in servers:
            j = f"{d}/round{r}.json"
            extra = [*args, "-rate", f"fixed={rate}/s", "threads=64", "--server-pid", str(srv.pid), "--json", j]
            runs.append((exe, j, stress(host, port, extra, open(f"{d}/round{r}.log", "w"))))
        # By slot, not by binary: an A/A run (one binary in both slots) checks the slots are equal.
        row = {}
        for slot, (exe, j, p) in zip("AB", runs):
            if p.wait() != 0:
                raise SystemExit(f"round {r} against {exe} failed: {j[:-5]}.log")
            sm = json.load(open(j))["summary"]
            row[slot] = (round(sm["op_rate"]), round(sm["server_cpu_us_per_op"], 2), sm["latency"]["p99_ms"],
                         sm["errors"] + sm["missing"] + sm["mismatched"])
        ra, rb = row["A"][1], row["B"][1]
        row["ratio"] = round(rb / ra, 3) if ra else None
        results.append(row)
        print(f"{workload} round {r}: A {row['A'][0]} op/s {ra} us/op p99 {row['A'][2]} ms | "
              f"B {row['B'][0]} op/s {rb} us/op p99 {row['B'][2]} ms | B/A {row['ratio']}", flush=True)
    ratios = [r["ratio"] for r in results if r["ratio"]]
    print(f"median B/A server CPU-us/op: {statistics.median(ratios):.3f} over {len(ratios)} rounds", flush=True)
    print(json.dumps({"a": a, "b": b, "workload": workload, "rate": rate, "n": n, "rounds": results}))
finally:
    for _, _, _, srv, d in servers:
        srv.terminate()
        try:
            srv.wait(30)
        except subprocess.TimeoutExpired:
            srv.kill()
        shutil.rmtree(d, ignore_errors=True)
