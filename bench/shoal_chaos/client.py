"""The client side of a chaos run, run inside the client's network namespace under $SHOAL_VENV's Python
(`python -m shoal_chaos.client workload|verify SPEC.json`): the DataStax Python driver against the nodes.

schema: creates KEYSPACE (RF = the node count) and its table `log (k int, v bigint, PRIMARY KEY (k, v))`.
workload: THREADS threads for SECONDS seconds, each at RATE/THREADS operations a second: a write (QUORUM; --write-cl)
  of a value no one wrote before (thread << 32 | counter) into a random key's partition, or a read (QUORUM;
  --read-cl) of a random key's partition. Each operation is one attempt (no driver retries, no speculative
  execution), recorded with its start/end (time.monotonic) and result (see checkers.py) in HISTORY
  (JSON lines).
verify: reads every key at ONE from each node alone (a whitelist policy: that node coordinates), then at
  ALL; writes {"all": [[k, v], ...] | null, "all_error", "per_node": {address: [[k, v], ...] | null}}.
"""

import json
import random
import sys
import threading
import time

from cassandra import ConsistencyLevel, Unavailable
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import (DCAwareRoundRobinPolicy, FallthroughRetryPolicy, TokenAwarePolicy,
                                WhiteListRoundRobinPolicy)


def connect(hosts, port, timeout, policy=None, consistency=ConsistencyLevel.QUORUM):
    profile = ExecutionProfile(
        load_balancing_policy=policy or TokenAwarePolicy(DCAwareRoundRobinPolicy()),
        retry_policy=FallthroughRetryPolicy(),
        consistency_level=consistency,
        request_timeout=timeout,
    )
    cluster = Cluster(hosts, port=port, execution_profiles={EXEC_PROFILE_DEFAULT: profile},
                      connect_timeout=5, control_connection_timeout=5, idle_heartbeat_interval=5)
    return cluster, cluster.connect()


def classify(kind, exc):
    """ok/fail/unknown for an exception: a write is "fail" only when the coordinator refused it before
    sending (Unavailable); timeouts, lost connections and anything else may have applied it."""
    if kind == "write":
        return "fail" if isinstance(exc, Unavailable) else "unknown"
    name = type(exc).__name__
    return "unknown" if "Timeout" in name or "TimedOut" in name else "fail"


def schema(spec):
    """Creates the keyspace (RF = spec["rf"]) and its table; retried while a node is still settling."""
    ks = spec["keyspace"]
    cluster, session = connect(spec["hosts"], spec["port"], 30)
    for attempt in range(10):
        try:
            session.execute(f"CREATE KEYSPACE IF NOT EXISTS {ks} WITH replication = "
                            f"{{'class': 'SimpleStrategy', 'replication_factor': {spec['rf']}}}")
            session.execute(f"CREATE TABLE IF NOT EXISTS {ks}.log (k int, v bigint, PRIMARY KEY (k, v))")
            break
        except Exception as e:  # noqa: BLE001 - any schema error is retried, the last one raised
            if attempt == 9:
                raise
            print(f"schema attempt {attempt}: {e}", file=sys.stderr)
            time.sleep(2)
    cluster.shutdown()


def workload(spec):
    hosts, port = spec["hosts"], spec["port"]
    ks, keys = spec["keyspace"], spec["keys"]
    cluster, session = connect(hosts, port, spec["timeout"])
    insert = session.prepare(f"INSERT INTO {ks}.log (k, v) VALUES (?, ?)")
    insert.consistency_level = getattr(ConsistencyLevel, spec.get("write_cl", "QUORUM"))
    select = session.prepare(f"SELECT v FROM {ks}.log WHERE k = ?")
    select.consistency_level = getattr(ConsistencyLevel, spec.get("read_cl", "QUORUM"))
    history, lock = [], threading.Lock()
    t0 = time.monotonic()
    deadline = t0 + spec["seconds"]
    interval = spec["threads"] / max(1.0, spec["rate"])

    def worker(t):
        rng = random.Random(spec["seed"] * 1000 + t)
        counter, mine = 0, []
        next_at = time.monotonic() + rng.random() * interval
        while True:
            now = time.monotonic()
            if now >= deadline:
                break
            if now < next_at:
                time.sleep(min(next_at - now, deadline - now))
                continue
            next_at += interval
            key = rng.randrange(keys)
            if rng.random() < spec["write_ratio"]:
                counter += 1
                value = (t << 32) | counter
                op = {"kind": "write", "key": key, "value": value, "thread": t}
                stmt, args = insert, (key, value)
            else:
                op = {"kind": "read", "key": key, "thread": t}
                stmt, args = select, (key,)
            op["start"] = time.monotonic() - t0
            try:
                rows = session.execute(stmt, args)
                if op["kind"] == "read":
                    op["seen"] = [r.v for r in rows]
                op["result"] = "ok"
            except Exception as e:  # noqa: BLE001 - every error is part of the history
                op["result"] = classify(op["kind"], e)
                op["error"] = f"{type(e).__name__}: {e}"[:300]
            op["end"] = time.monotonic() - t0
            mine.append(op)
        with lock:
            history.extend(mine)

    threads = [threading.Thread(target=worker, args=(t,), daemon=True) for t in range(spec["threads"])]
    for th in threads:
        th.start()
    for th in threads:
        th.join(spec["seconds"] + spec["timeout"] + 30)
    history.sort(key=lambda op: op["start"])
    with open(spec["history"], "w") as f:
        for op in history:
            f.write(json.dumps(op) + "\n")
    cluster.shutdown()


def read_all(session, ks, keys, consistency, attempts=3):
    stmt = session.prepare(f"SELECT k, v FROM {ks}.log WHERE k = ?")
    stmt.consistency_level = consistency
    rows = []
    for key in range(keys):
        for attempt in range(attempts):
            try:
                rows.extend([r.k, r.v] for r in session.execute(stmt, (key,), timeout=20))
                break
            except Exception:  # noqa: BLE001 - retried, then raised
                if attempt == attempts - 1:
                    raise
                time.sleep(1)
    return rows


def verify(spec):
    hosts, port, ks, keys = spec["hosts"], spec["port"], spec["keyspace"], spec["keys"]
    out = {"per_node": {}, "per_node_errors": {}, "all": None, "all_error": None}
    for host in hosts:
        try:
            cluster, session = connect([host], port, 20, policy=WhiteListRoundRobinPolicy([host]),
                                       consistency=ConsistencyLevel.ONE)
            try:
                out["per_node"][host] = read_all(session, ks, keys, ConsistencyLevel.ONE)
            finally:
                cluster.shutdown()
        except Exception as e:  # noqa: BLE001 - reported, the checker fails it
            out["per_node"][host] = None
            out["per_node_errors"][host] = f"{type(e).__name__}: {e}"[:300]
    try:
        cluster, session = connect(hosts, port, 20, consistency=ConsistencyLevel.ALL)
        try:
            out["all"] = read_all(session, ks, keys, ConsistencyLevel.ALL)
        finally:
            cluster.shutdown()
    except Exception as e:  # noqa: BLE001 - reported, the checker fails it
        out["all_error"] = f"{type(e).__name__}: {e}"[:300]
    with open(spec["out"], "w") as f:
        json.dump(out, f)


def main():
    command, path = sys.argv[1], sys.argv[2]
    with open(path) as f:
        spec = json.load(f)
    {"schema": schema, "workload": workload, "verify": verify}[command](spec)


if __name__ == "__main__":
    main()
