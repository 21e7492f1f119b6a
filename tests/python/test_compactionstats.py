"""`shoal tool compactionstats` (nodetool compactionstats; issue 24's settle in bench/compare): the admin API's
GET /v1/compactionstats lists each table's background work owed, and after a flush the node settles to no
pending task and nothing running. Needs its own node (the admin API is Shoal's: nothing to compare against a
Cassandra over CQL)."""

import json

from cassandra.concurrent import execute_concurrent_with_args

from shoal_harness import connect_cluster, create_keyspace, wait_until


def _stats(node):
    return json.loads(node.tool("compactionstats", "--json"))


def test_compactionstats_lists_tables_and_settles_after_a_flush(shoal_node_factory):
    node = shoal_node_factory()
    c = connect_cluster(node)
    try:
        s = c.connect()
        create_keyspace(s, "cstats")
        s.execute("CREATE TABLE cstats.t (k int PRIMARY KEY, v text)")
        ins = s.prepare("INSERT INTO cstats.t (k, v) VALUES (?, ?)")
        for round_ in range(3):
            execute_concurrent_with_args(s, ins, [(k, f"v{k}" * 20) for k in range(round_ * 5000, round_ * 5000 + 5000)],
                                         concurrency=64)
            node.tool("flush", "cstats")
    finally:
        c.shutdown()
    stats = _stats(node)
    for key in ("pending_tasks", "running_compactions", "running_flushes", "major_compaction", "idle", "tables"):
        assert key in stats, stats
    (t,) = [t for t in stats["tables"] if (t["keyspace"], t["table"]) == ("cstats", "t")]
    for key in ("compaction_pending", "pending_compaction_bytes", "mem_table_flush_pending", "frozen_memtables",
                "frozen_bytes"):
        assert key in t, t
    # Flushed: nothing frozen is left; whatever compaction the three files start ends.
    settled = wait_until(lambda: (lambda v: v if v["idle"] else None)(_stats(node)), 60, interval=0.2,
                         what="compactionstats idle")
    assert settled["pending_tasks"] == 0 and settled["running_compactions"] == 0, settled
    assert all(t["frozen_memtables"] == 0 for t in settled["tables"]), settled
    # nodetool's shape (Cassandra 5.0: one aligned table of names and values).
    rows = [line.split() for line in node.tool("compactionstats").splitlines()]
    assert rows[0] == ["pending", "tasks", "0"], rows
    assert ["running", "compactions", "0"] in rows and ["major", "compaction", "none"] in rows, rows
    assert node.tool("compactionstats", "-H").split()[:3] == ["pending", "tasks", "0"]
