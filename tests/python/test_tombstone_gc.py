"""Repair-based tombstone GC (issue 21), end to end: real `shoal server` processes on 127.0.0.x
started by `shoal cluster up`, the DataStax Python driver and `shoal tool`.

A node purges a tombstone only once it is older than `gc_grace_seconds` *and* than the start of
the last successful repair of every range the node shares with other replicas
(`cluster::repaired`, `node::horizon`). So a delete made while a replica was down (hints off) for
longer than gc_grace does not come back when the replica returns: the other replicas kept their
tombstones, however often they compacted, because no repair could finish while it was down."""

import time

import pytest
from cassandra import ConsistencyLevel

from cluster_harness import ShoalCluster
from shoal_harness import EXTERNAL, wait_until
from test_cluster import session_on, wait_state

pytestmark = pytest.mark.skipif(bool(EXTERNAL), reason="starts its own cluster of shoal processes")

GC_GRACE = 2
# Hints off, so node 3 misses the deletes; no propagation delay (1h by default), so a repair
# counts for every delete made before it began.
CONFIG = {"hinted_handoff_enabled": False, "tombstone_gc_propagation_delay": "0s"}
KEYS = 200
PARTITIONS = 100


def rows_at(c, cl):
    """Every row of both tables, read through node 1 at `cl` key by key, as sorted tuples."""
    cluster, s = session_on(c, [c.address(1)], cl=cl)
    try:
        p = s.prepare("SELECT k, v FROM tg.p WHERE k = ?")
        r = s.prepare("SELECT k, c, v, w FROM tg.r WHERE k = ?")
        out = [("p", row.k, row.v) for k in range(KEYS) for row in s.execute(p, (k,))]
        out += [("r", row.k, row.c, row.v, row.w) for k in range(PARTITIONS) for row in s.execute(r, (k,))]
        return sorted(out, key=repr)
    finally:
        cluster.shutdown()


def flush_and_compact(c, nodes):
    for i in nodes:
        c.tool("flush", node=i)
        c.tool("compact", node=i)


def compared(c):
    """Partitions each table's replicas hold, tombstones included (`repair --preview --full`
    compacts every replica first, then hashes every partition it holds in every range)."""
    preview = c.tool("repair", "tg", "--preview", "--full", node=1)
    return {t["table"]: t["partitions_compared"] for t in preview["tables"]}


def test_a_delete_made_while_a_replica_was_down_past_gc_grace_does_not_come_back(tmp_path):
    """Rows written at ALL; node 3 stops (hints off); half the partitions are deleted at QUORUM,
    and in a clustered table whole partitions, rows, single cells and clustering ranges; nodes 1
    and 2 flush and compact after gc_grace. Node 3 comes back holding the old data: reads at ALL,
    QUORUM and ONE through node 1 return none of it. After a repair, the tombstones and the
    data they shadow are purged on every node (the partitions the replicas hold fall to the live
    ones, and node 3's load falls), and still nothing comes back."""
    with ShoalCluster(tmp_path / "c", nodes=3, config=CONFIG) as c:
        cluster, s = session_on(c, [c.address(1)], cl=ConsistencyLevel.ALL)
        try:
            s.execute("CREATE KEYSPACE tg WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
            s.execute(f"CREATE TABLE tg.p (k int PRIMARY KEY, v text) WITH gc_grace_seconds = {GC_GRACE}")
            s.execute(
                "CREATE TABLE tg.r (k int, c int, v text, w text, PRIMARY KEY (k, c)) "
                f"WITH gc_grace_seconds = {GC_GRACE}"
            )
            assert cluster.control_connection.wait_for_schema_agreement(wait_time=30)
            insert_p = s.prepare("INSERT INTO tg.p (k, v) VALUES (?, ?)")
            insert_r = s.prepare("INSERT INTO tg.r (k, c, v, w) VALUES (?, ?, ?, ?)")
            for k in range(KEYS):
                s.execute(insert_p, (k, f"v-{k}"))
            for k in range(PARTITIONS):
                for c_ in range(3):
                    s.execute(insert_r, (k, c_, f"v-{k}-{c_}", f"w-{k}-{c_}"))
        finally:
            cluster.shutdown()
        # Node 3's copy in sorted files, as a replica that was down for long would hold it.
        for i in (1, 2, 3):
            c.tool("flush", node=i)

        model_p = {k: f"v-{k}" for k in range(KEYS)}
        model_r = {(k, c_): [f"v-{k}-{c_}", f"w-{k}-{c_}"] for k in range(PARTITIONS) for c_ in range(3)}
        stale = c.address(3)
        c.stop(3)
        wait_state(c, stale, "DN", observer=1)
        cluster, s = session_on(c, [c.address(1)], cl=ConsistencyLevel.QUORUM)
        try:
            delete_p = s.prepare("DELETE FROM tg.p WHERE k = ?")
            for k in range(0, KEYS, 2):
                s.execute(delete_p, (k,))
                del model_p[k]
            deletes = [
                ("DELETE FROM tg.r WHERE k = ?", lambda k, c_: True),  # the partition
                ("DELETE FROM tg.r WHERE k = ? AND c = 1", lambda k, c_: c_ == 1),  # a row
                ("DELETE FROM tg.r WHERE k = ? AND c > 0", lambda k, c_: c_ > 0),  # a clustering range
            ]
            for k in range(PARTITIONS):
                kind = k % 4
                if kind == 3:  # a single cell
                    s.execute(s.prepare("DELETE w FROM tg.r WHERE k = ? AND c = 2"), (k,))
                    model_r[(k, 2)][1] = None
                    continue
                text, gone = deletes[kind]
                s.execute(s.prepare(text), (k,))
                for c_ in range(3):
                    if gone(k, c_):
                        del model_r[(k, c_)]
        finally:
            cluster.shutdown()
        expected = sorted(
            [("p", k, v) for k, v in model_p.items()] + [("r", k, c_, v, w) for (k, c_), (v, w) in model_r.items()],
            key=repr,
        )
        live_r = len({k for (k, _) in model_r})

        # Past gc_grace, nodes 1 and 2 compact: no repair has finished, so their tombstones stay.
        time.sleep(GC_GRACE + 2)
        flush_and_compact(c, (1, 2))

        c.start(3)
        wait_state(c, stale, "UN", observer=1)
        for cl in (ConsistencyLevel.ALL, ConsistencyLevel.QUORUM, ConsistencyLevel.ONE):
            got = rows_at(c, cl)
            back = sorted(set(got) - set(expected), key=repr)
            name = ConsistencyLevel.value_to_name[cl]
            assert not back, f"deleted data came back at {name}: {back[:10]} ({len(back)} rows)"
            assert got == expected, f"reads at {name} differ from what the cluster holds"
        # Every partition is still held somewhere (node 3 its old data, the others tombstones).
        held = compared(c)
        assert held == {"p": KEYS, "r": PARTITIONS}, held

        repaired = c.tool("repair", "tg", node=1)
        assert repaired["repaired_at"] <= int(time.time()), repaired
        load_before = c.tool("info", node=3)["load_bytes"]

        # The repair began after every delete: at the next compaction after each node's horizon
        # (computed every 2 s) passes it, the tombstones and what they shadow go everywhere.
        def purged():
            flush_and_compact(c, (1, 2, 3))
            return compared(c) == {"p": len(model_p), "r": live_r}

        wait_until(purged, 30, interval=1, what="the purge of the repaired tombstones")
        load_after = c.tool("info", node=3)["load_bytes"]
        assert load_after < load_before, f"node 3's load did not fall: {load_before} -> {load_after}"
        for cl in (ConsistencyLevel.ALL, ConsistencyLevel.QUORUM, ConsistencyLevel.ONE):
            name = ConsistencyLevel.value_to_name[cl]
            assert rows_at(c, cl) == expected, f"reads at {name} after the purge differ from what the cluster holds"
