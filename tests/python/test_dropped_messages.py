"""Issue 25's dropped messages, for real: a replica drops the requests its
coordinator has already given up on, unserved, and counts them per verb
(Cassandra's `DroppedMessage.Dropped`, `internode_timeout: true`).

A 3-node RF=3 cluster with a 500 ms write timeout. Node 2 is stopped with
SIGSTOP (a long GC pause) for 3 s; in its first half second a client writes
at ONE through node 1: node 1 acknowledges each write itself, its mutations
for node 2 wait in the sockets, time out after 500 ms and are hinted. When node 2 resumes it reads
them and finds most already expired by their sender's clock: it drops those
(`tpstats` counts MUTATION_REQ) instead of applying them late, and the hints
bring it every row (read back at ONE through node 2, which reads its own
copy first)."""

import os
import signal
import time

import pytest
from cassandra import ConsistencyLevel
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.policies import WhiteListRoundRobinPolicy
from cassandra.query import SimpleStatement

from cluster_harness import ShoalCluster
from shoal_harness import EXTERNAL, wait_until

pytestmark = pytest.mark.skipif(bool(EXTERNAL), reason="starts its own cluster of shoal processes")

ROWS = 300
PAUSE_S = 3.0


def session_on(cluster, host):
    profile = ExecutionProfile(
        load_balancing_policy=WhiteListRoundRobinPolicy([host]), consistency_level=ConsistencyLevel.ONE,
        request_timeout=30,
    )
    c = Cluster([host], port=cluster.native_port, execution_profiles={EXEC_PROFILE_DEFAULT: profile},
                protocol_version=4)
    return c, c.connect()


def dropped(cluster, node, verb="MUTATION_REQ"):
    doc = cluster.tool("tpstats", node=node)
    return next(m["dropped"] for m in doc["dropped_messages"] if m["message_type"] == verb)


def pid_of(cluster, node):
    for n in cluster.status()["nodes"]:
        if n["index"] == node:
            return n["pid"]
    raise AssertionError(f"no node {node} in {cluster.status()}")


def test_a_paused_replica_drops_the_writes_its_coordinator_gave_up_on(tmp_path):
    with ShoalCluster(tmp_path / "c", nodes=3, config={"write_request_timeout": "500ms"}) as c:
        one, s1 = session_on(c, c.address(1))
        two, s2 = session_on(c, c.address(2))
        try:
            s1.execute("CREATE KEYSPACE drops WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
            s1.execute("CREATE TABLE drops.t (k int PRIMARY KEY, v text)")
            insert = s1.prepare("INSERT INTO drops.t (k, v) VALUES (?, ?)")
            for k in range(20):  # node 1's connection to node 2 is up and has seen live requests
                s1.execute(insert, (k, f"v{k}"))
            before = dropped(c, 2)
            pid = pid_of(c, 2)
            os.kill(pid, signal.SIGSTOP)
            try:
                # All at once, well before node 1 can convict node 2 (about a
                # second here): each of them is sent to node 2, not hinted outright.
                start = time.monotonic()
                execute_concurrent_with_args(s1, insert, [(k, f"v{k}") for k in range(20, ROWS)], concurrency=50)
                sent_in = time.monotonic() - start
                time.sleep(max(0.0, start + PAUSE_S - time.monotonic()))
            finally:
                os.kill(pid, signal.SIGCONT)
            # Every write made more than the timeout before node 2 resumed is expired.
            # Node 2 works through its backlog: read the count once it stops moving.
            counts = [dropped(c, 2)]

            def settled():
                counts.append(dropped(c, 2))
                return counts[-1] > before and counts[-1] == counts[-2]

            wait_until(settled, 30, interval=1, what="node 2's dropped mutations counted and settled")
            count = counts[-1] - before
            assert count >= (ROWS - 20) // 2, (
                f"only {count} of the {ROWS - 20} writes made in the pause's first {sent_in:.2f} s dropped")

            select = SimpleStatement("SELECT v FROM drops.t WHERE k = %s", consistency_level=ConsistencyLevel.ONE)

            def missing():
                return [k for k in range(ROWS) if not list(s2.execute(select, (k,)))]

            wait_until(lambda: not missing(), 60, interval=1, what="hints bringing node 2 every row")
            for k in (0, 20, ROWS - 1):
                assert s2.execute(select, (k,)).one().v == f"v{k}"
        finally:
            one.shutdown()
            two.shutdown()
