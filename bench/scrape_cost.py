#!/usr/bin/env python3
"""bench/scrape_cost.py: what a Prometheus scrape of a node with many tables costs (issue 25: at
1,000 tables a scrape takes under 50 ms).

    bench/scrape_cost.py [TABLES] [SCRAPES]     (defaults 1000 and 20; env SHOAL_BIN, SHOAL_VENV)

Starts a fresh `shoal server` on free ports with its data under /tmp/scrape_cost, makes TABLES tables
(one row each, through the Python driver), then scrapes `/metrics` SCRAPES times and prints the
median and the largest wall time of a scrape, the bytes and samples of one, and the server's CPU
time per scrape (from /proc/PID/stat), as a line of text and a JSON object.
"""
import json, os, shutil, socket, statistics, subprocess, sys, time, urllib.request

tables = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
scrapes = int(sys.argv[2]) if len(sys.argv) > 2 else 20
binary = os.environ.get("SHOAL_BIN") or os.path.expanduser("~/.cache/shoal/target/release/shoal")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    from cassandra.cluster import Cluster

    work = "/tmp/scrape_cost"
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    native, admin, prom, storage = free_port(), free_port(), free_port(), free_port()
    with open(f"{work}/shoal.yaml", "w") as f:
        f.write(f"storage_port: {storage}\nadmin_port: {admin}\nprometheus_port: {prom}\n")
    srv = subprocess.Popen([binary, "server", "--config", f"{work}/shoal.yaml", "--data-dir", f"{work}/data",
                            "--native-port", str(native)], stdout=open(f"{work}/log", "w"), stderr=subprocess.STDOUT,
                           start_new_session=True)
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", native), 0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        cluster = Cluster(["127.0.0.1"], port=native)
        s = cluster.connect()
        s.execute("CREATE KEYSPACE sc WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        started = time.time()
        for i in range(tables):
            s.execute(f"CREATE TABLE sc.t{i} (k int PRIMARY KEY, v int)")
            s.execute(f"INSERT INTO sc.t{i} (k, v) VALUES (1, 1)")
            if (i + 1) % 100 == 0:
                print(f"  {i + 1}/{tables} tables ({time.time() - started:.0f} s)", flush=True)
        cluster.shutdown()
        url = f"http://127.0.0.1:{prom}/metrics"
        times, body = [], b""
        cpu0 = cpu_seconds(srv.pid)
        for _ in range(scrapes):
            t0 = time.perf_counter()
            with urllib.request.urlopen(url, timeout=30) as r:
                body = r.read()
            times.append(time.perf_counter() - t0)
        cpu = (cpu_seconds(srv.pid) - cpu0) / scrapes
        samples = sum(1 for line in body.decode().splitlines() if line and not line.startswith("#"))
        out = {"tables": tables, "scrapes": scrapes, "median_ms": round(statistics.median(times) * 1e3, 1),
               "max_ms": round(max(times) * 1e3, 1), "server_cpu_ms_per_scrape": round(cpu * 1e3, 1),
               "bytes": len(body), "samples": samples}
        print(f"{tables} tables: scrape median {out['median_ms']} ms, max {out['max_ms']} ms, server CPU "
              f"{out['server_cpu_ms_per_scrape']} ms/scrape, {len(body)} bytes, {samples} samples")
        print(json.dumps(out))
    finally:
        # A node with 1,000 tables flushes each on SIGTERM: give it time, then stop it hard.
        srv.terminate()
        try:
            srv.wait(timeout=300)
        except subprocess.TimeoutExpired:
            print("server did not stop within 300 s of SIGTERM; killed", file=sys.stderr)
            srv.kill()
            srv.wait()


if __name__ == "__main__":
    main()
