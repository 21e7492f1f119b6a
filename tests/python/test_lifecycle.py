"""Node lifecycle operations that move data (issue 21), end to end: real `shoal server`
processes on 127.0.0.x started by `shoal cluster up`, the DataStax Python driver and
`shoal tool`.

`shoal tool rebuild` streams every range a node replicates from another live replica
(nodetool rebuild), as sorted files over the internode port (`cluster::stream`)."""

import os
import threading
import time

import pytest
from cassandra import ConsistencyLevel
from cassandra.query import SimpleStatement

from cluster_harness import ShoalCluster
from shoal_harness import EXTERNAL
from test_cluster import EventListener, session_on, tool_when_up, wait_no_hints, wait_state

pytestmark = pytest.mark.skipif(bool(EXTERNAL), reason="starts its own cluster of shoal processes")


def table_rows(session, cl):
    """Every row of rb.t, sorted, read at `cl` partition by partition (keys 0..2999)."""
    rows = []
    query = session.prepare("SELECT k, c, v FROM rb.t WHERE k = ?")
    query.consistency_level = cl
    for k in range(3000):
        rows.extend((r.k, r.c, r.v) for r in session.execute(query, (k,)))
    return sorted(rows)


def test_rebuild_streams_what_a_replica_missed(tmp_path):
    """A node that was down (hints off) misses writes, updates and deletes; after `shoal tool
    rebuild` it alone answers at CL ONE exactly what the cluster holds, the sessions
    show in netstats on both sides, and a rebuild with no live source names the ranges."""
    with ShoalCluster(tmp_path / "c", nodes=3, config={"hinted_handoff_enabled": False}) as c:
        cluster, s = session_on(c, [c.address(1)], cl=ConsistencyLevel.ALL)
        try:
            s.execute("CREATE KEYSPACE rb WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
            s.execute("CREATE TABLE rb.t (k int, c int, v text, PRIMARY KEY (k, c))")
            assert cluster.control_connection.wait_for_schema_agreement(wait_time=30)
            insert = s.prepare("INSERT INTO rb.t (k, c, v) VALUES (?, ?, ?)")
            for k in range(300):
                for c_ in range(3):
                    s.execute(insert, (k, c_, f"old-{k}-{c_}"))
        finally:
            cluster.shutdown()

        stale = c.address(3)
        c.stop(3)
        wait_state(c, stale, "DN", observer=1)
        cluster, s = session_on(c, [c.address(1)], cl=ConsistencyLevel.QUORUM)
        try:
            insert = s.prepare("INSERT INTO rb.t (k, c, v) VALUES (?, ?, ?)")
            insert.consistency_level = ConsistencyLevel.QUORUM
            for k in range(300, 3000):
                s.execute(insert, (k, 0, f"new-{k}"))
            for k in range(0, 300, 3):
                s.execute(SimpleStatement(f"UPDATE rb.t SET v = 'updated' WHERE k = {k} AND c = 1"))
            for k in range(1, 300, 10):
                s.execute(SimpleStatement(f"DELETE FROM rb.t WHERE k = {k}"))
            for k in range(2, 300, 10):
                s.execute(SimpleStatement(f"DELETE FROM rb.t WHERE k = {k} AND c = 2"))
        finally:
            cluster.shutdown()
        assert c.tool("listpendinghints", node=1)["total_bytes"] == 0, "hinted handoff is off in this cluster"

        # What the cluster holds (not read at ALL here: that would read-repair node 3).
        model = {(k, c_): f"old-{k}-{c_}" for k in range(300) for c_ in range(3)}
        model.update({(k, 0): f"new-{k}" for k in range(300, 3000)})
        model.update({(k, 1): "updated" for k in range(0, 300, 3)})
        for k in range(1, 300, 10):
            for c_ in range(3):
                model.pop((k, c_), None)
        for k in range(2, 300, 10):
            model.pop((k, 2), None)
        expected = sorted((k, c_, v) for (k, c_), v in model.items())

        c.start(3)
        wait_state(c, stale, "UN", observer=1)

        cluster, s = session_on(c, [stale], cl=ConsistencyLevel.ONE)
        try:
            before = table_rows(s, ConsistencyLevel.ONE)
            assert len(before) == 900 and before != expected, "node 3 alone has only what it had before it stopped"

            result = c.tool("rebuild", node=3)
            assert result["operation"] == "rebuild"
            assert result["bytes"] > 0 and result["entries"] > 0, result
            assert {x["source"] for x in result["sessions"]} <= {c.address(1), c.address(2)}, result

            after = table_rows(s, ConsistencyLevel.ONE)
            assert after == expected, "node 3 alone answers what the cluster holds"
        finally:
            cluster.shutdown()

        received = [x for x in c.tool("netstats", node=3)["sessions"] if x["direction"] == "receiving"]
        assert received and all(x["state"] == "done" and x["bytes_done"] == x["bytes_total"] for x in received), received
        # The files' bytes came over bulk connections (raw bytes off the runtime), not chunk requests.
        assert all(x["via"] == "bulk" for x in received if x["bytes_total"]), received
        sent = c.tool("netstats", node=1)["sessions"] + c.tool("netstats", node=2)["sessions"]
        # Only the sessions to node 3 since its restart (the bootstraps of nodes 2 and 3 streamed
        # system_auth from the nodes before them; node 3 forgot its own when it stopped).
        since = min(x["started_unix_ms"] for x in received)
        to_3 = [x for x in sent if x["direction"] == "sending" and x["peer"].rsplit(":", 1)[0] == stale
                and x["started_unix_ms"] >= since]
        assert {x["session"] for x in received} == {x["session"] for x in to_3}
        assert all(x["state"] == "done" for x in sent), sent

        unknown = c.tool("rebuild", "--keyspace", "nosuch", node=3, check=False)
        assert "Unknown keyspace 'nosuch'" in unknown["error"], unknown

        # With both other replicas down there is no source: the error names the ranges.
        c.stop(1)
        c.stop(2)
        wait_state(c, c.address(1), "DN", observer=3)
        wait_state(c, c.address(2), "DN", observer=3)
        failed = c.tool("rebuild", node=3, check=False)
        assert failed.get("exit_code") == 1, failed
        assert "Unable to find sufficient sources for streaming range" in failed["error"], failed


def test_repair_reconciles_only_the_partitions_that_differ(tmp_path):
    """A node down with hints off misses inserts, partition deletes and row deletes. `repair
    --preview` counts exactly the partitions that differ and writes nothing; `repair` makes the
    node alone answer at CL ONE exactly what the cluster holds, reports the bytes it wrote back
    (no more than the differing partitions hold); a second repair finds nothing; a repair with a
    replica down is refused, naming it."""
    with ShoalCluster(tmp_path / "c", nodes=3, config={"hinted_handoff_enabled": False}) as c:
        cluster, s = session_on(c, [c.address(1)], cl=ConsistencyLevel.ALL)
        try:
            s.execute("CREATE KEYSPACE rp WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
            s.execute("CREATE TABLE rp.t (k int, c int, v text, PRIMARY KEY (k, c))")
            assert cluster.control_connection.wait_for_schema_agreement(wait_time=30)
            insert = s.prepare("INSERT INTO rp.t (k, c, v) VALUES (?, ?, ?)")
            for k in range(500):
                for c_ in range(2):
                    s.execute(insert, (k, c_, f"v-{k}-{c_}"))
        finally:
            cluster.shutdown()
        model = {(k, c_): f"v-{k}-{c_}" for k in range(500) for c_ in range(2)}

        stale = c.address(3)
        c.stop(3)
        wait_state(c, stale, "DN", observer=1)
        cluster, s = session_on(c, [c.address(1)], cl=ConsistencyLevel.QUORUM)
        try:
            insert = s.prepare("INSERT INTO rp.t (k, c, v) VALUES (?, ?, ?)")
            insert.consistency_level = ConsistencyLevel.QUORUM
            for k in range(500, 1500):
                s.execute(insert, (k, 0, f"new-{k}"))
                model[(k, 0)] = f"new-{k}"
            delete_partition = s.prepare("DELETE FROM rp.t WHERE k = ?")
            delete_partition.consistency_level = ConsistencyLevel.QUORUM
            delete_row = s.prepare("DELETE FROM rp.t WHERE k = ? AND c = 1")
            delete_row.consistency_level = ConsistencyLevel.QUORUM
            for k in range(0, 200, 2):
                s.execute(delete_partition, (k,))
                model.pop((k, 0), None)
                model.pop((k, 1), None)
            for k in range(1, 200, 2):
                s.execute(delete_row, (k,))
                model.pop((k, 1), None)
        finally:
            cluster.shutdown()
        expected = sorted((k, c_, v) for (k, c_), v in model.items())
        c.start(3)
        wait_state(c, stale, "UN", observer=1)

        def node3_rows():
            cluster, s = session_on(c, [stale], cl=ConsistencyLevel.ONE)
            try:
                query = s.prepare("SELECT k, c, v FROM rp.t WHERE k = ?")
                rows = []
                for k in range(1500):
                    rows.extend((r.k, r.c, r.v) for r in s.execute(query, (k,)))
                return sorted(rows)
            finally:
                cluster.shutdown()

        preview = c.tool("repair", "rp", "--preview", node=1)
        assert preview["partitions_differing"] == 1000 + 100 + 100, preview
        assert preview["partitions_compared"] == 1500 and preview["bytes_repaired"] == 0, preview
        assert len(node3_rows()) == 1000, "the preview changed nothing"

        repaired = c.tool("repair", "rp", node=1)
        assert repaired["partitions_differing"] == preview["partitions_differing"], repaired
        assert 0 < repaired["bytes_repaired"] <= repaired["bytes_estimated"], repaired
        assert node3_rows() == expected, "node 3 alone answers what the cluster holds"

        again = c.tool("repair", "rp", node=1)
        assert again["partitions_differing"] == 0 and again["bytes_repaired"] == 0, again
        # Every node's primary ranges together are the whole ring: nothing differs there either
        # (--full: an incremental repair would compare nothing, every range being repaired now).
        pr = [c.tool("repair", "rp", "-pr", "--full", node=i) for i in (1, 2, 3)]
        assert sum(x["partitions_compared"] for x in pr) == 1500 and all(x["partitions_differing"] == 0 for x in pr), pr

        assert "Unknown table 'nosuch' in keyspace 'rp'" in c.tool("repair", "rp", "nosuch", node=1, check=False)["error"]
        c.stop(2)
        wait_state(c, c.address(2), "DN", observer=1)
        down = c.tool("repair", "rp", node=1, check=False)
        assert f"Endpoint not alive: /{c.address(2)}:" in down["error"], down


def test_cleanup_after_lowering_the_replication_factor(tmp_path):
    """RF 3 -> 2 on 3 nodes: every node still holds every row until `shoal tool cleanup`, which
    drops what it no longer replicates; then every row is still read at ALL, and each node's load
    is within 20% of its effective ownership share."""
    with ShoalCluster(tmp_path / "c", nodes=3) as c:
        cluster, s = session_on(c, [c.address(1)], cl=ConsistencyLevel.ALL)
        try:
            s.execute("CREATE KEYSPACE cu WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
            s.execute("CREATE TABLE cu.t (k int PRIMARY KEY, v text)")
            assert cluster.control_connection.wait_for_schema_agreement(wait_time=30)
            insert = s.prepare("INSERT INTO cu.t (k, v) VALUES (?, ?)")
            for k in range(4000):
                s.execute(insert, (k, f"{k:06}" + "x" * 1000))
            s.execute("ALTER KEYSPACE cu WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 2}")
            assert cluster.control_connection.wait_for_schema_agreement(wait_time=30)
        finally:
            cluster.shutdown()
        for i in (1, 2, 3):
            c.tool("flush", node=i)
        before = [c.tool("info", node=i)["load_bytes"] for i in (1, 2, 3)]
        for i in (1, 2, 3):
            c.tool("cleanup", "cu", node=i)
        after = [c.tool("info", node=i)["load_bytes"] for i in (1, 2, 3)]
        assert all(a < b for a, b in zip(after, before)), (before, after)
        assert sum(after) < sum(before) * 0.8, (before, after)

        owns = {}
        for dc in c.tool("status", "cu", node=1)["datacenters"]:
            for n in dc["nodes"]:
                owns[n["address"]] = n["owns"]
        total_load, total_owns = sum(after), sum(owns.values())
        for i, load in zip((1, 2, 3), after):
            share, owned = load / total_load, owns[c.address(i)] / total_owns
            assert abs(share - owned) <= 0.2 * owned, (i, share, owned, after, owns)

        cluster, s = session_on(c, [c.address(1)], cl=ConsistencyLevel.ALL)
        try:
            query = s.prepare("SELECT v FROM cu.t WHERE k = ?")
            for k in range(4000):
                row = s.execute(query, (k,)).one()
                assert row is not None and row.v.startswith(f"{k:06}"), k
        finally:
            cluster.shutdown()


def kv_table(c, ks, rows=3000, value=lambda k: f"before-{k}"):
    """`ks.t (k int PRIMARY KEY, v text)` at RF=3 with `rows` rows (`value(k)`) written at ALL."""
    cluster, s = session_on(c, [c.address(1)], cl=ConsistencyLevel.ALL)
    try:
        s.execute(f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 3}}")
        s.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v text)")
        assert cluster.control_connection.wait_for_schema_agreement(wait_time=30)
        insert = s.prepare(f"INSERT INTO {ks}.t (k, v) VALUES (?, ?)")
        for k in range(rows):
            s.execute(insert, (k, value(k)))
    finally:
        cluster.shutdown()


class WritesAllAlong:
    """A client thread writing `ks.t` keys 100000.. at QUORUM through `coordinators` until the
    block ends; `acked` lists the writes that were acknowledged (a failed write was not, and
    promises nothing)."""

    def __init__(self, c, ks, coordinators):
        self.cluster, self.session = session_on(c, [c.address(i) for i in coordinators], cl=ConsistencyLevel.QUORUM)
        self.ks, self.acked, self.stop = ks, [], threading.Event()
        self.acked_at = {}  # key -> when its write was acknowledged (UTC, for a failure's message)
        self.thread = threading.Thread(target=self._run)

    def _run(self):
        insert = self.session.prepare(f"INSERT INTO {self.ks}.t (k, v) VALUES (?, ?)")
        insert.consistency_level = ConsistencyLevel.QUORUM
        k = 100_000
        while not self.stop.is_set() and k < 200_000:
            try:
                self.session.execute(insert, (k, f"during-{k}"))
                self.acked.append(k)
                self.acked_at[k] = time.strftime("%H:%M:%S", time.gmtime()) + f".{int(time.time() * 1000) % 1000:03d}"
            except Exception:  # not acknowledged: nothing to check
                pass
            k += 1

    def __enter__(self):
        self.thread.start()
        time.sleep(1)
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=60)
        self.cluster.shutdown()
        assert len(self.acked) > 100, len(self.acked)
        return False


def missing_on(c, node, ks, keys):
    """The keys node `node` alone does not answer at CL ONE (it reads its own replicas locally)."""
    cluster, s = session_on(c, [c.address(node)], cl=ConsistencyLevel.ONE)
    try:
        query = s.prepare(f"SELECT v FROM {ks}.t WHERE k = ?")
        return [k for k in keys if s.execute(query, (k,)).one() is None]
    finally:
        cluster.shutdown()


def ring_states(c, observer=1):
    return {n["address"]: n for dc in c.tool("status", node=observer)["datacenters"] for n in dc["nodes"]}


def test_a_node_added_under_writes_streams_its_ranges_and_misses_nothing(tmp_path):
    """`shoal cluster add` on a 3-node RF=3 cluster taking QUORUM writes all along: the new node
    is JOINING while it streams its ranges (writes for them reach it too), then NORMAL; afterwards
    it alone answers at CL ONE for every row written before and every write acknowledged during
    the join, and every node names the same replicas for a key."""
    with ShoalCluster(tmp_path / "c", nodes=3) as c:
        kv_table(c, "bs")
        with WritesAllAlong(c, "bs", (1, 2, 3)) as writes:
            assert c.add() == 4
        wait_state(c, c.address(4), "UN", observer=1)
        missing = missing_on(c, 4, "bs", list(range(3000)) + writes.acked)
        assert not missing, f"{len(missing)} rows missing on the new node, e.g. {missing[:10]}"
        for key in ("0", "17", "100000"):
            seen = {tuple(c.tool("getendpoints", "bs", "t", key, node=i)["endpoints"]) for i in (1, 2, 3, 4)}
            assert len(seen) == 1 and len(next(iter(seen))) == 3, (key, seen)


def test_a_node_decommissioned_under_writes_hands_over_its_ranges(tmp_path):
    """`shoal cluster decommission 4` on a 4-node RF=3 cluster taking QUORUM writes: node 4 is
    LEAVING while the nodes that take its ranges over pull them (writes for those ranges reach them
    meanwhile), then LEFT and stopped; every remaining node alone answers at CL ONE for every row
    written before and every write acknowledged during it; node 4 refuses to start again on its
    directory; decommissioning below the replication factor is refused."""
    with ShoalCluster(tmp_path / "c", nodes=4) as c:
        kv_table(c, "dm")
        with WritesAllAlong(c, "dm", (1, 2, 3)) as writes:
            c.decommission(4)
        for i in (1, 2, 3):
            missing = missing_on(c, i, "dm", list(range(3000)) + writes.acked)
            assert not missing, f"node {i}: {len(missing)} rows missing, e.g. {missing[:10]}"
        states = {a: n["state"] for a, n in ring_states(c).items()}
        assert states.get(c.address(4)) != "UN" and all(states[c.address(i)] == "UN" for i in (1, 2, 3)), states

        again = c._cluster("start", 4, "--timeout", 30, timeout=90, check=False)
        assert again.returncode != 0 and "decommissioned" in (again.stdout + again.stderr), again.stdout + again.stderr
        refused = c.tool("decommission", node=3, check=False)
        assert "Not enough live nodes to maintain replication factor in keyspace dm" in refused["error"], refused


def test_a_dead_node_removed_under_writes_is_re_replicated(tmp_path):
    """Node 4 of a 4-node RF=3 cluster dies; `shoal cluster remove 4` (removenode, on node 1) under
    continuous QUORUM writes has the nodes that gain its ranges pull them from surviving replicas;
    then every remaining node alone answers at CL ONE for every row written before and every write
    acknowledged meanwhile, and node 4 is gone from the ring (not DN). A live node is refused."""
    with ShoalCluster(tmp_path / "c", nodes=4) as c:
        kv_table(c, "rm")
        refused = c._cluster("remove", 4, timeout=120, check=False)
        assert refused.returncode != 0 and "is running" in refused.stderr, refused.stderr
        c.stop(4)
        wait_state(c, c.address(4), "DN", observer=1)
        with WritesAllAlong(c, "rm", (1, 2, 3)) as writes:
            c.remove(4)
        for i in (1, 2, 3):
            missing = missing_on(c, i, "rm", list(range(3000)) + writes.acked)
            assert not missing, f"node {i}: {len(missing)} rows missing, e.g. {missing[:10]}"
        for i in (1, 2, 3):
            states = ring_states(c, observer=i)
            assert c.address(4) not in states and len(states) == 3, (i, states)


def test_a_dead_node_is_replaced_by_a_fresh_one_that_streams_its_ranges(tmp_path):
    """Node 3 of a 4-node RF=3 cluster dies and loses its disk; `shoal cluster replace 3` starts a
    fresh node at its address with replace_address_first_boot: it takes node 3's tokens under a new
    host id and streams its ranges from their other replicas, under continuous QUORUM writes; then
    it alone answers at CL ONE for every row written before or acknowledged during the
    replacement, and no node lists the old host id."""
    with ShoalCluster(tmp_path / "c", nodes=4) as c:
        kv_table(c, "rq")
        before = ring_states(c)[c.address(3)]
        c.stop(3)
        wait_state(c, c.address(3), "DN", observer=1)
        with WritesAllAlong(c, "rq", (1, 2, 4)) as writes:
            c.replace(3)
        wait_state(c, c.address(3), "UN", observer=1)
        nodes = ring_states(c)
        assert len(nodes) == 4 and nodes[c.address(3)]["host_id"] != before["host_id"], nodes
        assert nodes[c.address(3)]["tokens"] == before["tokens"]
        assert before["host_id"] not in {n["host_id"] for n in nodes.values()}
        missing = missing_on(c, 3, "rq", list(range(3000)) + writes.acked)
        assert not missing, f"{len(missing)} rows missing on the replacement, e.g. {missing[:10]}"


def test_a_joining_node_killed_mid_bootstrap_resumes_and_misses_nothing(tmp_path):
    """Node 4 is killed while it bootstraps (JOINING, tokens announced, before its streams end);
    writes go on at QUORUM meanwhile. Restarted on its directory it resumes the bootstrap and turns
    NORMAL; then it alone answers at CL ONE for every earlier row and every acknowledged write, and
    the ring is the same on every node."""
    import subprocess

    with ShoalCluster(tmp_path / "c", nodes=3) as c:
        kv_table(c, "kb")
        with WritesAllAlong(c, "kb", (1, 2, 3)) as writes:
            add = subprocess.Popen(
                [c.bin_path, "cluster", "--dir", str(c.workdir), "add", "--timeout", "120"],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            try:
                log = c.workdir / "node4" / "node.log"
                deadline = time.time() + 60
                while time.time() < deadline and not (log.exists() and "bootstrapping" in log.read_text()):
                    time.sleep(0.05)
                assert "bootstrapping" in log.read_text(), "node 4 never started its bootstrap"
                c.stop(4)  # SIGKILL, during the ring delay: the streams have not run yet
            finally:
                out, _ = add.communicate(timeout=120)
            assert add.returncode != 0, out
            assert "bootstrap done" not in log.read_text()
            states = ring_states(c)
            assert states[c.address(4)]["state"] in ("DJ", "UJ"), states
            c.start(4)
        wait_state(c, c.address(4), "UN", observer=1)
        assert "bootstrap done" in (c.workdir / "node4" / "node.log").read_text()
        missing = missing_on(c, 4, "kb", list(range(3000)) + writes.acked)
        assert not missing, f"{len(missing)} rows missing on the resumed node, e.g. {missing[:10]}"
        rings = {tuple(sorted((a, n["tokens"], n["state"]) for a, n in ring_states(c, observer=i).items())) for i in (1, 2, 3, 4)}
        assert len(rings) == 1, rings


def test_one_topology_change_at_a_time(tmp_path):
    """While dead node 5 is being removed (removenode on node 1, streams throttled to 256 KiB/s),
    a decommission of node 4 and a `cluster add` are each refused with a message naming the change
    in progress, and change nothing; the removal then completes."""
    config = {"stream_throughput_outbound": "256KiB/s"}
    with ShoalCluster(tmp_path / "c", nodes=5, config=config) as c:
        kv_table(c, "oc", value=lambda k: f"{k:06}" + "x" * 1000)
        c.stop(5)
        wait_state(c, c.address(5), "DN", observer=1)

        removal = threading.Thread(target=c.remove, args=(5,))
        removal.start()
        try:
            # Every live node has heard (gossip) that node 5 is being removed.
            deadline = time.time() + 30
            while time.time() < deadline and any(
                ring_states(c, observer=i).get(c.address(5), {}).get("state") != "DL" for i in (1, 2, 3, 4)
            ):
                time.sleep(0.1)
            assert all(ring_states(c, observer=i)[c.address(5)]["state"] == "DL" for i in (1, 2, 3, 4))
            expected = f"another topology change is in progress (/{c.address(5)} is being removed (removenode))"

            second = c.tool("decommission", node=4, check=False)
            assert expected in second["error"], second
            joined = c._cluster("add", "--timeout", 60, timeout=120, check=False)
            assert joined.returncode != 0 and expected in joined.stdout + joined.stderr, joined.stdout + joined.stderr
            states = ring_states(c)
            assert states[c.address(4)]["state"] == "UN", states
            assert states[c.address(5)]["state"] == "DL", "node 5 was still being removed during both refusals"
        finally:
            removal.join(timeout=300)
        states = ring_states(c)
        assert sorted(states) == sorted(c.address(i) for i in (1, 2, 3, 4)), states
        assert all(n["state"] == "UN" for n in states.values()), states


def peers_seen(session):
    """The peer addresses in system.peers of the node that answers (nodes 1 and 3 here)."""
    return {str(r.peer) for r in session.execute("SELECT peer FROM system.peers")}


def test_a_source_killed_mid_bootstrap_fails_the_join_which_resumes_later(tmp_path):
    """Node 2, a source of node 4's bootstrap, is killed while it streams (throttled to 256 KiB/s);
    QUORUM writes go on meanwhile. The join fails with a message naming the lost source and node 4
    stays up, JOINING with its tokens on every ring (so no other topology change starts); once
    node 2 is back, `shoal tool bootstrap resume` on node 4 streams only what it had not received
    (the ranges of the other sources are not streamed again), node 4 turns NORMAL and alone
    answers at CL ONE for every earlier row and every acknowledged write; every node shows the
    same ring. A driver's event connection hears of node 4 only once it is NORMAL: NEW_NODE, then UP
    (Cassandra tells its listeners of ring members only)."""
    import subprocess

    with ShoalCluster(tmp_path / "c", nodes=3, config={"stream_throughput_outbound": "256KiB/s"}) as c:
        kv_table(c, "ks2", value=lambda k: f"before-{k}" + os.urandom(500).hex())  # incompressible
        events = EventListener(c.address(1), c.native_port)
        with WritesAllAlong(c, "ks2", (1, 3)) as writes:
            add = subprocess.Popen(
                [c.bin_path, "cluster", "--dir", str(c.workdir), "add", "--timeout", "180"],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            try:
                deadline = time.time() + 60
                sending = []
                while time.time() < deadline and not sending:
                    sending = [x for x in c.tool("netstats", node=2, check=False).get("sessions", [])
                               if x["direction"] == "sending" and x["state"] != "done"]
                    time.sleep(0.1)
                assert sending, "node 2 never streamed to the joining node"
                c.stop(2)  # SIGKILL, mid-stream
            finally:
                out, _ = add.communicate(timeout=300)
            assert add.returncode != 0, out + c.logs()
            assert f"{c.address(2)}" in out and "failed to bootstrap" in out and "bootstrap resume" in out, out
            for i in (1, 3):
                wait_state(c, c.address(4), "UJ", observer=i)
                assert ring_states(c, observer=i)[c.address(4)]["tokens"], "node 4 keeps its announced tokens"
            # As in Cassandra, a joining node is no driver's peer until it is NORMAL.
            assert c.address(4) not in peers_seen(writes.session), "a JOINING node listed in system.peers"
            info = c.tool("info", node=4)
            assert info["bootstrap"]["state"] == "FAILED" and c.address(2) in info["bootstrap"]["error"], info
            refused = c.tool("decommission", node=3, check=False)
            assert f"/{c.address(4)} is joining" in refused["error"], refused
            c.start(2)
            wait_state(c, c.address(2), "UN", observer=4)
            # (On a loaded machine node 4's failure detector may hold a source down for a moment.)
            resumed = tool_when_up(c, "bootstrap", "resume", node=4, refused="is down", nodes=(1, 2, 3))
            assert resumed["operation"] == "bootstrap" and resumed["ranges_already_streamed"] > 0, resumed
            # (system_auth, streamed after the user keyspace, comes from whichever node holds it.)
            user = [s for s in resumed["sessions"] if not s["keyspace"].startswith("system")]
            assert {s["source"] for s in user} == {c.address(2)}, resumed["sessions"]
            again = c.tool("bootstrap", "resume", node=4, check=False)
            assert "already bootstrapped" in again["error"], again
        wait_state(c, c.address(4), "UN", observer=1)
        events.wait_for("TOPOLOGY_CHANGE", "NEW_NODE", c.address(4))
        events.wait_for("STATUS_CHANGE", "UP", c.address(4))
        events.close()
        about4 = [(kind, change) for kind, change, ip in events.seen if ip == c.address(4)]
        assert about4 == [("TOPOLOGY_CHANGE", "NEW_NODE"), ("STATUS_CHANGE", "UP")], events.seen
        assert c.tool("info", node=4)["bootstrap"]["state"] == "COMPLETED"
        cluster, s = session_on(c, [c.address(1)])
        try:
            assert c.address(4) in peers_seen(s), "the NORMAL node is missing from system.peers"
        finally:
            cluster.shutdown()
        assert "bootstrap done" in (c.workdir / "node4" / "node.log").read_text()
        # Node 2 missed the writes made while it was down until their hints reach it; a CL ONE read
        # of a key node 4 does not replicate may go to node 2.
        wait_no_hints(c, (1, 3))
        missing = missing_on(c, 4, "ks2", list(range(3000)) + writes.acked)
        assert not missing, (f"{len(missing)} rows missing on the resumed node, e.g. {missing[:10]}, acknowledged at "
                             f"{[writes.acked_at.get(k) for k in missing[:10]]} (UTC)")
        rings = {tuple(sorted((a, n["tokens"], n["state"]) for a, n in ring_states(c, observer=i).items())) for i in (1, 2, 3, 4)}
        assert len(rings) == 1, rings


def test_a_removal_that_cannot_stream_stays_pending_until_forced(tmp_path):
    """Nodes 4 and 5 of 5 are down; `removenode` of node 5 cannot hand the ranges node 4 gains to
    it, so it fails naming node 4 and the removal stays pending (node 5 `DL`, `removenode status`
    names it, no other topology change starts). `removenode force` completes it without streams:
    node 5 leaves every ring; `removenode status` then says no removals are in process."""
    with ShoalCluster(tmp_path / "c", nodes=5) as c:
        kv_table(c, "rf")
        dead = ring_states(c)[c.address(5)]["host_id"]
        c.stop(4)
        c.stop(5)
        for i in (4, 5):
            wait_state(c, c.address(i), "DN", observer=1)
        failed = c.tool("removenode", dead, node=1, check=False)
        assert "removenode: streaming" in failed["error"] and c.address(4) in failed["error"], failed
        status = c.tool("removenode", "status", node=1)
        assert [n["host_id"] for n in status["removing"]] == [dead], status
        wait_state(c, c.address(5), "DL", observer=2)
        refused = c.tool("decommission", node=3, check=False)
        assert f"/{c.address(5)} is being removed (removenode)" in refused["error"], refused

        forced = c.tool("removenode", "force", node=1)
        assert [n["host_id"] for n in forced["removed"]] == [dead], forced
        for i in (1, 2, 3):
            states = ring_states(c, observer=i)
            assert c.address(5) not in states and states[c.address(4)]["state"] == "DN", (i, states)
        assert c.tool("removenode", "status", node=1)["removing"] == []
        again = c.tool("removenode", "force", node=1, check=False)
        assert "No removals in process." in again["error"], again
