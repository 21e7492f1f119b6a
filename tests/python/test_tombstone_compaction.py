"""Tombstone compactions and the operator commands around them (issue 25), on a real `shoal server`
with the DataStax driver and `shoal tool`:

- a delete-heavy table with a small gc_grace_seconds stays bounded on disk with no `shoal tool
  compact`: the node's background tombstone compactions purge the deletion markers (storage `purge`);
- `shoal tool garbagecollect` purges now what the background would leave for a day;
- the marker counts and the time of the last purge survive a restart;
- `shoal tool settraceprobability` / `gettraceprobability`;
- `shoal tool setcompactionthroughput` / `getcompactionthroughput`, and shoal.yaml's
  `compaction_throughput`;
- `shoal tool drain`: memtables flushed, the native port closed, the node up but serving no client.
"""

import json
import shutil
import socket
import subprocess
import time

from cassandra.concurrent import execute_concurrent_with_args

from shoal_harness import connect_cluster, create_keyspace, wait_until

VALUE = "x" * 300


def _tool_json(node, *args):
    return json.loads(node.tool(*args, "--json"))


def _table_stats(node, ks, table):
    stats = _tool_json(node, "compactionstats")
    (t,) = [t for t in stats["tables"] if (t["keyspace"], t["table"]) == (ks, table)]
    return t


def _load(node):
    return _tool_json(node, "info")["load_bytes"]


def _tool_fails(node, *args):
    """`shoal tool ARGS` that must fail: (exit code, stderr)."""
    cmd = [node.bin_path, "tool", "-h", node.host, "-p", str(node.config["admin_port"]), *map(str, args)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0, f"{cmd} succeeded: {out.stdout}"
    return out.returncode, out.stderr


def test_delete_heavy_table_stays_bounded_without_compact(shoal_node_factory):
    """Rounds of 4000 rows written then deleted (half by partition, half row by row) in a table with
    gc_grace_seconds = 0 and a 1-second tombstone_compaction_interval: after each round the node
    purges by itself (a tombstone compaction counted in compactionstats) and the load falls back
    to near nothing, so it never grows round over round. Nothing calls flush or compact."""
    node = shoal_node_factory()
    c = connect_cluster(node)
    try:
        s = c.connect()
        create_keyspace(s, "tc")
        s.execute(
            "CREATE TABLE tc.q (k int, c int, v text, PRIMARY KEY (k, c)) WITH gc_grace_seconds = 0 "
            "AND compaction = {'class': 'SizeTieredCompactionStrategy', 'tombstone_threshold': '0.2', "
            "'tombstone_compaction_interval': '1'}"
        )
        ins = s.prepare("INSERT INTO tc.q (k, c, v) VALUES (?, ?, ?)")
        del_partition = s.prepare("DELETE FROM tc.q WHERE k = ?")
        del_row = s.prepare("DELETE FROM tc.q WHERE k = ? AND c = ?")
        peaks, floors = [], []
        for round_ in range(3):
            base = round_ * 1000
            keys = range(base, base + 1000)
            execute_concurrent_with_args(s, ins, [(k, c_, VALUE) for k in keys for c_ in range(4)], concurrency=64)
            peaks.append(_load(node))
            execute_concurrent_with_args(s, del_partition, [(k,) for k in keys if k % 2 == 0], concurrency=64)
            execute_concurrent_with_args(s, del_row, [(k, c_) for k in keys if k % 2 for c_ in range(4)],
                                         concurrency=64)
            assert _table_stats(node, "tc", "q")["tombstone_markers"] >= 500 + 500 * 4 - 1
            # The background purges: markers forgotten, a tombstone compaction counted, the load falls.
            done = wait_until(
                lambda: (lambda t: t if t["tombstone_compactions"] > round_ and t["tombstone_markers"] == 0
                         else None)(_table_stats(node, "tc", "q")),
                90, interval=0.5, what=f"round {round_}: a tombstone compaction")
            assert done["droppable_tombstones"] == 0, done
            floors.append(wait_until(lambda: (lambda b: [b] if b < peaks[-1] / 10 else None)(_load(node)), 30,
                                     what=f"round {round_}: the load falls")[0])
            assert s.execute("SELECT count(*) FROM tc.q").one()[0] == 0
        # Bounded: round after round the peak is one round's data, not the sum of all.
        assert max(peaks) < 2 * min(peaks), (peaks, floors)
        assert max(floors) < min(peaks) / 10, (peaks, floors)
    finally:
        c.shutdown()


def test_garbagecollect_purges_now(shoal_node_factory):
    """With the default tombstone_compaction_interval (a day) the background leaves the deleted
    rows; `shoal tool garbagecollect KS TABLE` purges them at once (nodetool prints nothing), its
    JSON names the tables, and unknown names fail as nodetool's do."""
    node = shoal_node_factory()
    c = connect_cluster(node)
    try:
        s = c.connect()
        create_keyspace(s, "gcks")
        s.execute("CREATE TABLE gcks.t (k int PRIMARY KEY, v text) WITH gc_grace_seconds = 0")
        ins = s.prepare("INSERT INTO gcks.t (k, v) VALUES (?, ?)")
        dele = s.prepare("DELETE FROM gcks.t WHERE k = ?")
        execute_concurrent_with_args(s, ins, [(k, VALUE) for k in range(5000)], concurrency=64)
        node.tool("flush", "gcks")
        execute_concurrent_with_args(s, dele, [(k,) for k in range(5000)], concurrency=64)
        node.tool("flush", "gcks")
        full = _load(node)
        time.sleep(12)  # past the markers' 10-second bucket, and two background checks
        t = _table_stats(node, "gcks", "t")
        assert t["droppable_tombstones"] >= 5000 and t["tombstone_compactions"] == 0, t
        assert _load(node) > full / 2
        assert node.tool("garbagecollect", "gcks", "t") == ""
        assert _load(node) < full / 10
        assert _table_stats(node, "gcks", "t")["tombstone_markers"] == 0
        assert s.execute("SELECT count(*) FROM gcks.t").one()[0] == 0
        answer = _tool_json(node, "garbagecollect", "gcks")
        assert answer["operation"] == "garbagecollect" and answer["tables"] == ["gcks.t"], answer
        assert "Keyspace [nope] does not exist." in _tool_fails(node, "garbagecollect", "nope")[1]
        assert "Unknown keyspace/cf pair (gcks.nope)" in _tool_fails(node, "garbagecollect", "gcks", "nope")[1]
    finally:
        c.shutdown()


def test_marker_counts_survive_a_restart(shoal_node_factory):
    """The deletion markers counted before a clean restart are counted after it, and the table's
    tombstone_compaction_interval (a day by default) still runs from its creation, not from the
    restart (DATA_DIR/tombstone-markers.json): compactionstats says the same before and after."""
    node = shoal_node_factory()
    c = connect_cluster(node)
    try:
        s = c.connect()
        create_keyspace(s, "rk")
        s.execute("CREATE TABLE rk.t (k int PRIMARY KEY, v text) WITH gc_grace_seconds = 0")
        dele = s.prepare("DELETE FROM rk.t WHERE k = ?")
        execute_concurrent_with_args(s, dele, [(k,) for k in range(2000)], concurrency=64)
    finally:
        c.shutdown()
    before = _table_stats(node, "rk", "t")
    assert before["tombstone_markers"] >= 2000, before
    time.sleep(1.1)  # a restarted interval would show in last_tombstone_compaction
    node.restart()
    after = _table_stats(node, "rk", "t")
    kept = ("tombstone_markers", "tombstone_compactions", "last_tombstone_compaction")
    assert {k: after[k] for k in kept} == {k: before[k] for k in kept}, (before, after)


def test_trace_probability(shoal_node_factory):
    """get/settraceprobability as nodetool prints them; at 1 every request is traced (sessions
    appear in system_traces), at 0 none; out-of-range values are refused."""
    node = shoal_node_factory()
    assert node.tool("gettraceprobability") == "Current trace probability: 0.0\n"
    assert node.tool("settraceprobability", "0.25") == ""
    assert node.tool("gettraceprobability") == "Current trace probability: 0.25\n"
    assert _tool_json(node, "gettraceprobability") == {"probability": 0.25}
    assert "Trace probability must be between 0 and 1" in _tool_fails(node, "settraceprobability", "1.5")[1]
    assert "Trace probability must be between 0 and 1" in _tool_fails(node, "settraceprobability", "-0.1")[1]
    assert _tool_fails(node, "settraceprobability", "lots")[0] == 1
    assert node.tool("gettraceprobability") == "Current trace probability: 0.25\n"
    c = connect_cluster(node)
    try:
        s = c.connect()
        create_keyspace(s, "tp")
        s.execute("CREATE TABLE tp.t (k int PRIMARY KEY, v int)")
        node.tool("settraceprobability", "0")
        sessions = lambda: s.execute("SELECT count(*) FROM system_traces.sessions").one()[0]  # noqa: E731
        before = sessions()
        node.tool("settraceprobability", "1")
        ins = s.prepare("INSERT INTO tp.t (k, v) VALUES (?, ?)")
        for k in range(20):
            s.execute(ins, (k, k))
        wait_until(lambda: sessions() >= before + 20, 30, interval=0.3, what="20 traced sessions")
        node.tool("settraceprobability", "0")
        time.sleep(1)
        settled = sessions()
        for k in range(20):
            s.execute(ins, (k, k))
        time.sleep(2)
        assert sessions() == settled
    finally:
        c.shutdown()


def test_compaction_throughput(shoal_node_factory):
    """get/setcompactionthroughput as nodetool's (MiB/s, 0: unthrottled), starting from shoal.yaml's
    `compaction_throughput`; until a restart, which goes back to the file's; bad values refused with
    nodetool's kind of message and nothing changed. A compaction under a low rate still completes
    and keeps every row (the storage test `compaction_throughput.rs` checks the rate itself)."""
    node = shoal_node_factory(config={"compaction_throughput": "64MiB/s"})
    assert node.tool("getcompactionthroughput") == "Current compaction throughput: 64 MiB/s\n"
    assert _tool_json(node, "getcompactionthroughput") == {"bytes_per_second": 64 << 20, "mib_per_second": 64.0}
    assert node.tool("setcompactionthroughput", "16") == ""
    assert node.tool("getcompactionthroughput") == "Current compaction throughput: 16 MiB/s\n"
    for bad in ("-1", "fast", "1.5"):
        code, err = _tool_fails(node, "setcompactionthroughput", bad)
        assert code == 1 and "compaction_throughput must be a whole number of MiB/s" in err, (bad, code, err)
    assert node.tool("getcompactionthroughput") == "Current compaction throughput: 16 MiB/s\n"
    c = connect_cluster(node)
    try:
        s = c.connect()
        create_keyspace(s, "ct")
        s.execute("CREATE TABLE ct.t (k int PRIMARY KEY, v text)")
        ins = s.prepare("INSERT INTO ct.t (k, v) VALUES (?, ?)")
        for part in range(3):
            execute_concurrent_with_args(s, ins, [(k, VALUE) for k in range(part * 500, (part + 1) * 500)])
            node.tool("flush", "ct", "t")
        node.tool("setcompactionthroughput", "1")
        node.tool("compact", "ct", "t")
        assert s.execute("SELECT count(*) FROM ct.t").one()[0] == 1500
    finally:
        c.shutdown()
    assert node.tool("setcompactionthroughput", "0") == ""
    assert node.tool("getcompactionthroughput") == "Current compaction throughput: 0 MiB/s\n"
    node.restart()
    assert node.tool("getcompactionthroughput") == "Current compaction throughput: 64 MiB/s\n"


def test_drain_flushes_and_stops_serving_clients(shoal_node_factory):
    """After `shoal tool drain`: the open session's connection is closed and no new one is
    accepted, the admin API still answers (netstats: Mode DRAINED), and every write is in the
    data files: the node, killed (no clean shutdown's flush) and started again without its commit
    log, still has them."""
    node = shoal_node_factory()
    c = connect_cluster(node)
    try:
        s = c.connect()
        create_keyspace(s, "dr")
        s.execute("CREATE TABLE dr.t (k int PRIMARY KEY, v text)")
        ins = s.prepare("INSERT INTO dr.t (k, v) VALUES (?, ?)")
        execute_concurrent_with_args(s, ins, [(k, VALUE) for k in range(2000)], concurrency=64)
        assert node.tool("drain") == ""
        assert _tool_json(node, "netstats")["mode"] == "DRAINED"
        assert "Mode: DRAINED" in node.tool("netstats")
        try:
            socket.create_connection((node.host, node.port), timeout=2).close()
            refused = False
        except OSError:
            refused = True
        assert refused, "the native port still accepts connections after drain"
        try:
            s.execute("SELECT count(*) FROM dr.t")
            served = True
        except Exception:  # noqa: BLE001 (the driver's errors for a closed connection vary)
            served = False
        assert not served, "a query was served after drain"
        assert node.is_running()
        assert _tool_json(node, "drain")["mode"] == "DRAINED"  # a second drain answers the same
    finally:
        c.shutdown()
    node.kill9()
    shutil.rmtree(node.data_dir / "commitlog")
    node.start()
    c = connect_cluster(node)
    try:
        s = c.connect()
        assert s.execute("SELECT count(*) FROM dr.t").one()[0] == 2000
    finally:
        c.shutdown()
