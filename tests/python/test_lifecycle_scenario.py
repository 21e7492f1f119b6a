"""Issue 21's whole topology scenario on one cluster of real `shoal server` processes on
127.0.0.x, under `shoal stress` writes at QUORUM all along: 3 nodes at RF=3, `cluster add` (4),
`cluster add` (5), `cluster decommission`, `stop` + `cluster remove`, `stop` + `cluster replace`.

Each step runs under its own `shoal stress write ... keep-going --failed-keys` (a key range of its
own, ended with SIGINT when the step is done), so the keys it attempted and the ones never
acknowledged are known exactly. After each step:
- `shoal stress verify` at ALL over every key range written so far finds every acknowledged row
  (its missing or wrong keys are all among that range's unacknowledged writes);
- every node is UN and every node's `getendpoints` names the replicas the DataStax driver's token
  map names (the driver, connected since the start, follows the topology changes by itself);
and at the end, after `cleanup` on every node, each node's load is within 20% of its effective
ownership share."""

import json
import signal
import subprocess
import time

import pytest
from cassandra import ConsistencyLevel
from cassandra.cluster import Cluster

from cluster_harness import ShoalCluster
from shoal_harness import EXTERNAL
from test_cluster import EventListener, wait_state

pytestmark = pytest.mark.skipif(bool(EXTERNAL), reason="starts its own cluster of shoal processes")

KS = "sc"
STRESS = ["-schema", f"keyspace={KS}", "replication(factor=3)", "-col", "n=5", "size=FIXED(100)"]
STEP_KEYS = 1_000_000


def up_nodes(c):
    """(index, address) of the nodes the launcher has running."""
    return [(n["index"], n["address"]) for n in c.status()["nodes"] if n.get("running")]


def running(c):
    return [address for _, address in up_nodes(c)]


def stress_cmd(c, *args):
    """`shoal stress ARGS` (its command and words first, then its dash options) against the
    running nodes."""
    return c.stress_command(running(c), args, STRESS)


class Writes:
    """`shoal stress write` at QUORUM with keep-going over keys lo.. of its own, from the block's
    start until SIGINT at its end; then `attempted` is the key range it tried and `unacked` the
    keys whose write was not acknowledged."""

    def __init__(self, c, lo, tmp):
        self.c, self.lo, self.tmp = c, lo, tmp
        self.report, self.failed = tmp / f"w{lo}.json", tmp / f"w{lo}.failed"

    def __enter__(self):
        cmd = stress_cmd(self.c, "write", "duration=1800s", "cl=QUORUM", "keep-going", "no-warmup",
                         "-pop", f"seq={self.lo}..{self.lo + STEP_KEYS - 1}", "-rate", "threads=4", "fixed=150/s",
                         "-log", "interval=5s", "--json", str(self.report), "--failed-keys", str(self.failed))
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        time.sleep(3)
        assert self.proc.poll() is None, self.proc.communicate()[0]
        return self

    def __exit__(self, *exc):
        time.sleep(2)
        self.proc.send_signal(signal.SIGINT)
        out, _ = self.proc.communicate(timeout=120)
        assert self.proc.returncode == 0, out
        summary = json.loads(self.report.read_text())["summary"]
        self.count = summary["ops"] + summary["errors"]
        self.unacked = set(self.failed.read_text().split())
        assert summary["ops"] > 100 and len(self.unacked) <= summary["errors"], (summary, len(self.unacked))
        return False


def verify_all(c, ranges, tmp):
    """`shoal stress verify` at ALL over each (lo, count, unacked): every acknowledged row is there."""
    for lo, count, unacked in ranges:
        failed = tmp / f"v{lo}.failed"
        v = subprocess.run(stress_cmd(c, "verify", f"n={count}", "cl=ALL", "-pop", f"seq={lo}..{lo + count - 1}",
                                      "-rate", "threads=16", "--failed-keys", str(failed)),
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600)
        bad = set(failed.read_text().split())
        lost = sorted(bad - unacked)
        assert not lost, f"{len(lost)} acknowledged rows of {lo}.. not found at ALL, e.g. {lost[:5]}\n{v.stdout[-2000:]}"
        assert v.returncode == 0 or bad, v.stdout + v.stderr


def check_ring(c, driver):
    """Every running node is UN in every running node's view, and getendpoints agrees with the
    driver's token map (waited for: the driver learns topology changes from events)."""
    nodes = running(c)
    indexes = [i for i, _ in up_nodes(c)]
    for i in indexes:
        for address in nodes:
            wait_state(c, address, "UN", observer=i)
    keys = [f"{k:010d}" for k in (1, 2, 3, 17, 1000, 12345, STEP_KEYS + 7, 3 * STEP_KEYS + 99)]
    expected = {}
    for key in keys:
        seen = {tuple(c.tool("getendpoints", KS, "standard1", key.encode().hex(), node=i)["endpoints"]) for i in indexes}
        assert len(seen) == 1, (key, seen)
        expected[key] = sorted(next(iter(seen)))
        assert len(expected[key]) == 3 and set(expected[key]) <= set(nodes), (key, expected[key], nodes)

    def driver_map():
        return {k: sorted(h.address for h in driver.metadata.get_replicas(KS, k.encode())) for k in keys}

    deadline = time.time() + 60
    while time.time() < deadline and driver_map() != expected:
        time.sleep(0.5)
    assert driver_map() == expected, (driver_map(), expected)


def test_a_cluster_grows_shrinks_and_replaces_nodes_under_writes(tmp_path):
    with ShoalCluster(tmp_path / "c", nodes=3) as c:
        pre = subprocess.run(stress_cmd(c, "write", "n=20000", "cl=ALL", "-rate", "threads=16"),
                             stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600)
        assert pre.returncode == 0, pre.stdout + pre.stderr
        written = [(1, 20000, set())]
        driver = Cluster([c.address(1)], port=c.native_port, protocol_version=4)
        driver.connect()
        events = EventListener(c.address(1), c.native_port)
        try:
            # (name, step, the TOPOLOGY_CHANGE event node 1 pushes to its clients, if any).
            steps = [
                ("add", lambda: c.add(), ("NEW_NODE", "127.0.0.4")),
                ("add", lambda: c.add(), ("NEW_NODE", "127.0.0.5")),
                ("decommission 4", lambda: c.decommission(4), ("REMOVED_NODE", "127.0.0.4")),
                ("remove 3", lambda: (c.stop(3), wait_state(c, c.address(3), "DN", observer=1), c.remove(3)),
                 ("REMOVED_NODE", "127.0.0.3")),
                ("replace 5", lambda: (c.stop(5), wait_state(c, c.address(5), "DN", observer=1), c.replace(5)), None),
            ]
            for number, (name, step, event) in enumerate(steps, start=1):
                lo = number * STEP_KEYS + 1
                with Writes(c, lo, tmp_path) as writes:
                    step()
                written.append((lo, writes.count, writes.unacked))
                if event:
                    events.wait_for("TOPOLOGY_CHANGE", *event)
                check_ring(c, driver)
                verify_all(c, written, tmp_path)
                print(f"step {number} ({name}): {writes.count} writes, {len(writes.unacked)} not acknowledged")
        finally:
            events.close()
            driver.shutdown()

        assert sorted(running(c)) == sorted(c.address(i) for i in (1, 2, 5)), c.status()
        indexes = [i for i, _ in up_nodes(c)]
        for i in indexes:
            c.tool("cleanup", KS, node=i)
            c.tool("flush", node=i)
        load = {c.address(i): c.tool("info", node=i)["load_bytes"] for i in indexes}
        owns = {n["address"]: n["owns"] for dc in c.tool("status", KS, node=1)["datacenters"] for n in dc["nodes"]}
        total_load, total_owns = sum(load.values()), sum(owns[a] for a in load)
        for address, bytes_ in load.items():
            share, owned = bytes_ / total_load, owns[address] / total_owns
            assert abs(share - owned) <= 0.2 * owned, (address, share, owned, load, owns)
