#!/usr/bin/env python3
"""bench/ab.py: A/B two or more `shoal` binaries on one node, the way the write-path changes were
measured (ADR 0002, ADR 0003, the commit messages).

    bench/ab.py BIN_A,BIN_B[,...] [ROUNDS]      (BIN@CONFIG.yaml: that binary with `--config CONFIG.yaml`; env: N=300000 rows, CLIENT=the stress binary (default: the build's),
                                                 WORKLOADS=write,mixed; add `read` for reads from files,
                                                 `fixed` for tail latency at a fixed rate: RATE=19896, DURATION=20s;
                                                 WARM=1 reads every key once before the mixed run, unreported)

Each round starts every binary in turn (the order alternates between rounds) as a fresh
`shoal server` on a free port with its data in a temp dir under /tmp/ab, runs
`shoal stress write n=N -rate threads=64` and then `shoal stress mixed n=N/2
ratio(read=9,write=1) -pop dist=uniform(1..N) -rate threads=64` with --server-pid (and, with
`read` in WORKLOADS, `shoal tool flush` then `shoal stress read n=N/2 -pop dist=uniform(1..N)`: point
reads served from SSTables, not memtables; with `fixed`, after a write of N rows, three runs of
`shoal stress write duration=DURATION -rate fixed=RATE/s threads=128 -mode simplenative`, where
stalls of the write path show as p99.9 and max: a run's op/s, CPU-us/op, p99, p99.9 and max ms),
and prints (op/s, server CPU-us/op, p99 ms) per workload, then all rounds as JSON. Compare binaries within one
invocation only: the machine is shared and noisy.
"""
import json, os, shutil, subprocess, sys, tempfile

from shoal_bench.util import start_shoal

bins = sys.argv[1].split(",")
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 2
n = int(os.environ.get("N", "300000"))
client = os.environ.get("CLIENT") or os.path.join(
    os.environ.get("CARGO_TARGET_DIR") or os.path.expanduser("~/.cache/shoal/target"), "release", "shoal")
workloads = [w for w in (("write", ["write", f"n={n}"]), ("mixed", ["mixed", f"n={n//2}", "ratio(read=9,write=1)", "-pop", f"dist=uniform(1..{n})"]),
                         ("read", ["read", f"n={n//2}", "-pop", f"dist=uniform(1..{n})"]))
             if w[0] in os.environ.get("WORKLOADS", "write,mixed").split(",")]
if "fixed" in os.environ.get("WORKLOADS", ""):
    if not any(name == "write" for name, _ in workloads):
        workloads.insert(0, ("write", ["write", f"n={n}"]))
    fixed = ["write", f"duration={os.environ.get('DURATION', '20s')}", "-rate", f"fixed={os.environ.get('RATE', '19896')}/s",
             "threads=128", "-mode", "simplenative"]
    workloads += [(f"fixed{i}", fixed) for i in (1, 2, 3)]
results = {b: [] for b in bins}
for r in range(rounds):
    for b in (bins if r % 2 == 0 else bins[::-1]):
        os.makedirs("/tmp/ab", exist_ok=True)
        d = tempfile.mkdtemp(prefix="run.", dir="/tmp/ab")
        exe, _, conf = b.partition("@")
        srv, port, admin = start_shoal(exe, d + "/data", d + "/log", extra=["--config", conf] if conf else [])
        row = {}
        for name, args in workloads:
            if name == "mixed" and os.environ.get("WARM") == "1":
                # Every key read once first (not reported), as a long-running read workload would have.
                subprocess.run([client, "stress", "read", f"n={n}", "-pop", f"seq=1..{n}", "-rate", "threads=64",
                                "-node", "127.0.0.1", "-port", f"native={port}"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            if name == "read":
                subprocess.run([client, "tool", "-p", str(admin), "flush"], stdout=subprocess.DEVNULL, check=True)
            j = f"{d}/{name}.json"
            rate = [] if "-rate" in args else ["-rate", "threads=64"]
            subprocess.run([client, "stress", *args, *rate, "-node", "127.0.0.1", "-port", f"native={port}",
                            "--json", j, "--server-pid", str(srv.pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            sm = json.load(open(j))["summary"]
            row[name] = (round(sm["op_rate"]), round(sm["server_cpu_us_per_op"], 1), sm["latency"]["p99_ms"])
            if name.startswith("fixed"):
                row[name] += (sm["latency"]["p999_ms"], sm["latency"]["max_ms"])
        srv.terminate(); srv.wait(30)
        shutil.rmtree(d, ignore_errors=True)
        results[b].append(row)
        print(os.path.basename(exe) + (f"@{os.path.basename(conf)}" if conf else ""), row, flush=True)
print(json.dumps(results))
