"""Durability: in `commitlog_sync: batch` mode every acknowledged write
survives kill -9; a SIGTERM restart keeps schema, data, tombstones, TTLs,
timestamps and the node's identity. Each test runs its own node."""

import time

from cassandra import ConsistencyLevel
from cassandra.cluster import NoHostAvailable
from cassandra.concurrent import execute_concurrent_with_args

from shoal_harness import connect_cluster, create_keyspace, wait_until

N = 500


def _connect(node):
    c = connect_cluster(node)
    return c, c.connect()


def _all_rows(session, table):
    return {r.k: r.v for r in session.execute(f"SELECT k, v FROM {table}")}


def _write_acknowledged(session, table, keys, tag):
    ins = session.prepare(f"INSERT INTO {table} (k, v) VALUES (?, ?)")
    ins.consistency_level = ConsistencyLevel.ONE
    results = execute_concurrent_with_args(session, ins, [(k, f"{tag}-{k}") for k in keys], concurrency=32,
                                           raise_on_first_error=False)
    failed = [(k, r) for k, (ok, r) in zip(keys, results) if not ok]
    assert not failed, f"{len(failed)} writes failed, e.g. {failed[:3]}"
    return {k: f"{tag}-{k}" for k in keys}


def test_acknowledged_writes_survive_kill9_in_batch_mode(shoal_node_factory):
    node = shoal_node_factory(config={"commitlog_sync": "batch"})
    c, s = _connect(node)
    try:
        create_keyspace(s, "dur")
        s.execute("CREATE TABLE dur.t (k int PRIMARY KEY, v text)")
        expected = _write_acknowledged(s, "dur.t", list(range(N)), "v")
        dele = s.prepare("DELETE FROM dur.t WHERE k = ?")
        for k in range(0, N, 10):
            s.execute(dele, (k,))
            del expected[k]
        node.kill9()  # immediately after the last acknowledgement
    finally:
        c.shutdown()

    node.start()
    c, s = _connect(node)
    try:
        assert "dur" in c.metadata.keyspaces and "t" in c.metadata.keyspaces["dur"].tables, "schema lost by kill -9"
        got = _all_rows(s, "dur.t")
        missing = sorted(set(expected) - set(got))
        resurrected = sorted(set(got) - set(expected))
        wrong = sorted(k for k in expected if k in got and got[k] != expected[k])
        assert not missing and not resurrected and not wrong, (
            f"after kill -9: {len(missing)} acknowledged writes lost (e.g. {missing[:5]}), "
            f"{len(resurrected)} deleted rows back (e.g. {resurrected[:5]}), {len(wrong)} wrong values"
        )

        # Crash again after the replay: the recovered state and new writes are durable too.
        expected.update(_write_acknowledged(s, "dur.t", list(range(N, N + 100)), "w"))
        node.kill9()
    finally:
        c.shutdown()

    node.start()
    c, s = _connect(node)
    try:
        got = _all_rows(s, "dur.t")
        assert got == expected, f"after the second kill -9: {len(set(expected) - set(got))} lost, {len(set(got) - set(expected))} extra"
    finally:
        c.shutdown()


def _identity(session):
    row = session.execute("SELECT host_id, tokens, cluster_name FROM system.local WHERE key = 'local'").one()
    return row.host_id, set(row.tokens), row.cluster_name


def test_sigterm_restart_keeps_schema_and_data(shoal_node_factory):
    node = shoal_node_factory()
    c, s = _connect(node)
    try:
        identity = _identity(s)
        create_keyspace(s, "keep")
        s.execute("CREATE TYPE keep.addr (street text, zip int)")
        s.execute(
            "CREATE TABLE keep.ev (k int, c int, v text, a frozen<addr>, tags set<text>, "
            "PRIMARY KEY (k, c)) WITH CLUSTERING ORDER BY (c DESC)"
        )
        s.execute("CREATE TABLE keep.t (k int PRIMARY KEY, v text)")
        ins = s.prepare("INSERT INTO keep.ev (k, c, v, a, tags) VALUES (?, ?, ?, ?, ?)")
        for c_ in range(20):
            s.execute(ins, (1, c_, f"v{c_}", ("Main", c_), {"x", f"t{c_}"}))
        s.execute("DELETE FROM keep.ev WHERE k = 1 AND c >= 5 AND c < 10")
        s.execute("DELETE FROM keep.ev WHERE k = 1 AND c = 15")
        s.execute("INSERT INTO keep.t (k, v) VALUES (1, 'ttl') USING TTL 3600")
        s.execute("INSERT INTO keep.t (k, v) VALUES (2, 'ts') USING TIMESTAMP 424242")
        s.execute("INSERT INTO keep.t (k, v) VALUES (3, 'gone')")
        s.execute("DELETE FROM keep.t WHERE k = 3")
        expected_cs = [c_ for c_ in range(19, -1, -1) if not (5 <= c_ < 10) and c_ != 15]
        assert [r.c for r in s.execute("SELECT c FROM keep.ev WHERE k = 1")] == expected_cs
    finally:
        c.shutdown()

    rc, clean = node.stop()
    assert clean, f"SIGTERM did not stop the node within 10 s (needed SIGKILL); log:\n{node.log_tail()}"
    assert rc == 0, f"a SIGTERM shutdown should exit 0, got {rc}; log:\n{node.log_tail()}"

    node.start()
    c, s = _connect(node)
    try:
        assert _identity(s) == identity, "host_id, tokens and cluster_name must survive a restart"
        ks = c.metadata.keyspaces.get("keep")
        assert ks is not None, f"keyspace lost: {list(c.metadata.keyspaces)}"
        assert ks.replication_strategy.replication_factor == 1
        assert "addr" in ks.user_types and ks.user_types["addr"].field_names == ["street", "zip"]
        tm = ks.tables.get("ev")
        assert tm is not None, f"table lost: {list(ks.tables)}"
        assert [col.name for col in tm.clustering_key] == ["c"] and tm.clustering_key[0].is_reversed
        assert {n: col.cql_type for n, col in tm.columns.items()} == {
            "k": "int", "c": "int", "v": "text", "a": "frozen<addr>", "tags": "set<text>"}

        rows = list(s.execute("SELECT c, v, a, tags FROM keep.ev WHERE k = 1"))
        assert [r.c for r in rows] == expected_cs, "rows and range/row tombstones survive, DESC order kept"
        assert all(r.v == f"v{r.c}" and tuple(r.a) == ("Main", r.c) and set(r.tags) == {"x", f"t{r.c}"} for r in rows)
        row = s.execute("SELECT v, ttl(v) AS t FROM keep.t WHERE k = 1").one()
        assert row.v == "ttl" and 3000 < row.t <= 3600, f"TTL after restart: {row.t}"
        row = s.execute("SELECT v, writetime(v) AS wt FROM keep.t WHERE k = 2").one()
        assert (row.v, row.wt) == ("ts", 424242)
        assert s.execute("SELECT * FROM keep.t WHERE k = 3").one() is None, "a deleted row stays deleted"

        # The node takes writes and schema changes after the restart.
        s.execute("INSERT INTO keep.t (k, v) VALUES (4, 'after')")
        s.execute("CREATE TABLE keep.later (k int PRIMARY KEY)")
        assert s.execute("SELECT v FROM keep.t WHERE k = 4").one().v == "after"
    finally:
        c.shutdown()


def test_driver_reconnects_and_reprepares_after_restart(shoal_node_factory):
    node = shoal_node_factory()
    c, s = _connect(node)
    try:
        create_keyspace(s, "rp")
        s.execute("CREATE TABLE rp.t (k int PRIMARY KEY, v int)")
        ins = s.prepare("INSERT INTO rp.t (k, v) VALUES (?, ?)")
        sel = s.prepare("SELECT v FROM rp.t WHERE k = ?")
        s.execute(ins, (1, 1))

        rc, clean = node.stop()
        assert clean
        node.start()

        # The same Cluster reconnects by itself; the prepared statements are
        # re-prepared on the server's UNPREPARED answer if it forgot them.
        def attempt():
            try:
                return s.execute(sel, (1,)).one()
            except NoHostAvailable:
                return None

        row = wait_until(attempt, timeout=60, interval=0.5, what="the driver to reconnect after the restart")
        assert row.v == 1
        s.execute(ins, (2, 2))
        assert s.execute(sel, (2,)).one().v == 2
    finally:
        c.shutdown()


def test_restart_on_old_disk_is_quick(shoal_node_factory):
    """A node killed and restarted on its old disk, holding data both in flushed
    files and only in its commit log, accepts connections again within 30 s
    with every row there."""
    node = shoal_node_factory()
    c, s = _connect(node)
    try:
        create_keyspace(s, "quick")
        s.execute("CREATE TABLE quick.t (k int PRIMARY KEY, v text)")
        ins = s.prepare("INSERT INTO quick.t (k, v) VALUES (?, ?)")
        execute_concurrent_with_args(s, ins, [(k, f"v{k}" * 20) for k in range(20_000)], concurrency=64)
        node.tool("flush")  # these rows are in table files
        execute_concurrent_with_args(s, ins, [(k, f"w{k}" * 20) for k in range(20_000, 40_000)], concurrency=64)
    finally:
        c.shutdown()
    node.kill9()  # nothing flushed at exit: the last 20,000 rows come back from the commit log
    t0 = time.monotonic()
    node.start()
    took = time.monotonic() - t0
    assert took < 30, f"restart took {took:.1f}s"
    c, s = _connect(node)
    try:
        assert s.execute("SELECT key FROM system.local").one().key == "local"
        rows = _all_rows(s, "quick.t")
        assert len(rows) == 40_000, f"{len(rows)} of 40,000 rows after the restart"
        assert rows[7] == "v7" * 20 and rows[39_999] == "w39999" * 20
    finally:
        c.shutdown()
