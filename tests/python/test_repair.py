"""Repair at the issue's scale, on real `shoal server` processes: a replica down with hinted
handoff off misses 100,000 writes and 10,000 deletes; `shoal tool repair --preview` predicts what
`repair` then reconciles; afterwards the replica alone (the other two stopped) answers exactly the
right data at CL ONE, the bytes written back are reported and within 2x of what was missing, and a
second repair finds nothing."""

import subprocess

import pytest
from cassandra import ConsistencyLevel
from cassandra.concurrent import execute_concurrent_with_args

from cluster_harness import ShoalCluster
from shoal_harness import EXTERNAL
from test_cluster import session_on, tool_when_up, wait_state

pytestmark = pytest.mark.skipif(bool(EXTERNAL), reason="starts its own cluster of shoal processes")

KS = "rs"
COLUMNS, SIZE = 5, 34
STRESS = ["-schema", f"keyspace={KS}", "replication(factor=3)", "-col", f"n={COLUMNS}", f"size=FIXED({SIZE})"]
BEFORE, MISSED, DELETED = 20_000, 100_000, 10_000


def stress(c, nodes, *args, timeout=900):
    """`shoal stress ARGS` (command and words, then dash options) with `nodes` as contact points."""
    cmd = c.stress_command([c.address(n) for n in nodes], args, STRESS)
    return subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)


def repair(c, *args, node=1):
    """`shoal tool repair ARGS` on node `node`. A repair needs every replica up when it starts ("Endpoint
    not alive" otherwise): run again once every node is UN (`tool_when_up`)."""
    return tool_when_up(c, "repair", *args, node=node, refused="Endpoint not alive")


def key(k):
    return f"{k:010d}".encode()


def test_repair_of_100k_missed_writes_and_10k_deletes(tmp_path):
    with ShoalCluster(tmp_path / "c", nodes=3, config={"hinted_handoff_enabled": False}) as c:
        pre = stress(c, (1, 2, 3), "write", f"n={BEFORE}", "cl=ALL", "-rate", "threads=16")
        assert pre.returncode == 0, pre.stdout + pre.stderr
        stale = c.address(3)
        c.stop(3)
        wait_state(c, stale, "DN", observer=1)
        lo, hi = BEFORE + 1, BEFORE + MISSED
        missed = stress(c, (1, 2), "write", f"n={MISSED}", "cl=QUORUM", "-pop", f"seq={lo}..{hi}",
                        "-rate", "threads=32")
        assert missed.returncode == 0, missed.stdout + missed.stderr
        cluster, s = session_on(c, [c.address(1), c.address(2)], cl=ConsistencyLevel.QUORUM)
        try:
            delete = s.prepare(f"DELETE FROM {KS}.standard1 WHERE key = ?")
            results = execute_concurrent_with_args(s, delete, [(key(k),) for k in range(1, DELETED + 1)],
                                                   concurrency=64, raise_on_first_error=True)
            assert all(ok for ok, _ in results)
        finally:
            cluster.shutdown()
        assert c.tool("listpendinghints", node=1)["total_bytes"] == 0, "hinted handoff is off in this cluster"
        c.start(3)
        wait_state(c, stale, "UN", observer=1)

        # What node 3 lacks, in bytes of storage (nodetool's Load, after flush and compaction): all
        # node 1 holds beyond the rows node 3 still shares with it (100,000 rows and 10,000 partition
        # deletions). And in bytes of CQL payload: keys and values, and the deleted keys.
        for i in (1, 3):
            c.tool("flush", node=i)
            c.tool("compact", node=i)
        load1, load3 = (c.tool("info", node=i)["load_bytes"] for i in (1, 3))
        missing_bytes = load1 - load3 * (BEFORE - DELETED) / BEFORE
        payload_bytes = MISSED * (10 + COLUMNS * SIZE) + DELETED * 10
        assert missing_bytes > 0.5 * payload_bytes, (load1, load3)
        preview = repair(c, KS, "--preview", node=1)
        assert preview["bytes_repaired"] == 0, preview
        repaired = repair(c, KS, node=1)
        differing = repaired["partitions_differing"]
        assert differing == MISSED + DELETED, repaired
        assert abs(preview["partitions_differing"] - differing) <= 0.1 * differing, (preview, repaired)
        wire = repaired["bytes_on_wire"]
        assert repaired["bytes_repaired"] > 0 and 0.5 * missing_bytes <= wire <= 2 * missing_bytes, (missing_bytes, repaired)
        print(f"repair: {differing} partitions in {repaired['seconds']:.1f} s; {wire} bytes on the wire = "
              f"{wire / missing_bytes:.2f}x the {missing_bytes:.0f} bytes missing (storage), "
              f"{wire / payload_bytes:.2f}x the {payload_bytes} bytes of CQL payload; preview "
              f"{preview['partitions_differing']} partitions, {preview['bytes_on_wire']} bytes on the wire")

        again = repair(c, KS, node=1)
        assert again["partitions_differing"] == 0 and again["bytes_repaired"] == 0, again

        # Node 3 alone: every row written and not deleted, none of the deleted ones.
        c.stop(1)
        c.stop(2)
        wait_state(c, c.address(1), "DN", observer=3)
        wait_state(c, c.address(2), "DN", observer=3)
        kept = tmp_path / "kept.failed"
        v = stress(c, (3,), "verify", f"n={BEFORE + MISSED - DELETED}", "cl=ONE", "-pop", f"seq={DELETED + 1}..{hi}",
                   "-rate", "threads=16", "--failed-keys", str(kept))
        assert v.returncode == 0 and kept.read_text() == "", v.stdout[-3000:] + v.stderr
        gone = tmp_path / "gone.failed"
        stress(c, (3,), "verify", f"n={DELETED}", "cl=ONE", "-pop", f"seq=1..{DELETED}", "-rate", "threads=16",
               "--failed-keys", str(gone))
        assert gone.read_text().split() == [key(k).decode() for k in range(1, DELETED + 1)], "deleted rows stay deleted"


def test_the_schedule_repairs_a_replica_that_missed_writes(tmp_path):
    """auto_repair (on by default; here checking every 2 s, on a table with gc_grace_seconds = 6, so
    its ranges are due every 3 s): node 3, down with hints off, misses 2,000 writes. Once it is
    back, the schedule repairs them without an operator: `repair_admin list` shows the runs the
    schedule started, one of which found the differences, and node 3 alone (the others stopped)
    then answers every row at CL ONE. An operator's repair while the schedule runs every few seconds
    is accepted (a scheduled repair on that node stops at its next range for it)."""
    import time

    config = {"hinted_handoff_enabled": False, "auto_repair_check_interval": "2s"}
    with ShoalCluster(tmp_path / "c", nodes=3, config=config) as c:
        pre = stress(c, (1, 2, 3), "write", "n=1000", "cl=ALL", "-rate", "threads=8")
        assert pre.returncode == 0, pre.stdout + pre.stderr
        cluster, s = session_on(c, [c.address(1)], cl=ConsistencyLevel.ALL)
        try:
            s.execute(f"ALTER TABLE {KS}.standard1 WITH gc_grace_seconds = 6")
            assert cluster.control_connection.wait_for_schema_agreement(wait_time=30)
        finally:
            cluster.shutdown()
        c.stop(3)
        wait_state(c, c.address(3), "DN", observer=1)
        missed = stress(c, (1, 2), "write", "n=2000", "cl=QUORUM", "-pop", "seq=1001..3000", "-rate", "threads=8")
        assert missed.returncode == 0, missed.stdout + missed.stderr
        c.start(3)
        wait_state(c, c.address(3), "UN", observer=1)

        def scheduled():
            return [r for i in (1, 2, 3) for r in c.tool("repair_admin", "list", node=i)["repairs"]
                    if r["trigger"] == "schedule" and r["state"] == "done"]

        deadline = time.time() + 90
        while time.time() < deadline and sum(r["partitions_differing"] for r in scheduled()) < 2000:
            time.sleep(1)
        runs = scheduled()
        assert sum(r["partitions_differing"] for r in runs) >= 2000, runs
        assert all(r["keyspace"] == KS and r["primary_range_only"] for r in runs), runs
        manual = repair(c, KS, node=2)
        assert manual["operation"] == "repair", manual

        c.stop(1)
        c.stop(2)
        wait_state(c, c.address(1), "DN", observer=3)
        wait_state(c, c.address(2), "DN", observer=3)
        failed = tmp_path / "alone.failed"
        v = stress(c, (3,), "verify", "n=3000", "cl=ONE", "-rate", "threads=8", "--failed-keys", str(failed))
        assert v.returncode == 0 and failed.read_text() == "", v.stdout[-2000:] + v.stderr


def test_incremental_repair_compares_only_what_was_written_since(tmp_path):
    """Repair is incremental by default: a range every replica holds repaired (the replicas agreed
    at a repair and none of them was written in it since) is not compared again. `--validate`
    compares exactly those ranges and finds them in agreement; `--full` compares every range. What
    a node holds repaired survives its clean shutdown, not a crash (SIGKILL): its ranges are all
    compared again."""
    with ShoalCluster(tmp_path / "c", nodes=3, config={"hinted_handoff_enabled": False}) as c:
        pre = stress(c, (1, 2, 3), "write", "n=3000", "cl=ALL", "-rate", "threads=8")
        assert pre.returncode == 0, pre.stdout + pre.stderr
        first = repair(c, KS, node=1)
        assert first["mode"] == "incremental" and first["ranges_compared"] == first["ranges"] > 0, first
        assert first["partitions_compared"] == 3000 and first["partitions_differing"] == 0, first
        ranges = first["ranges"]
        second = repair(c, KS, node=1)
        assert second["ranges_compared"] == 0 and second["partitions_compared"] == 0, second
        valid = repair(c, KS, "--validate", node=1)
        assert valid["ranges_compared"] == ranges and valid["partitions_compared"] == 3000, valid
        assert valid["partitions_differing"] == 0 and valid["tables"][0]["ranges_out_of_sync"] == 0, valid

        # Node 3, stopped cleanly, misses three writes: only their ranges are compared.
        c.stop(3, graceful=True)
        wait_state(c, c.address(3), "DN", observer=1)
        missed = stress(c, (1, 2), "write", "n=3", "cl=QUORUM", "-pop", "seq=3001..3003", "-rate", "threads=1")
        assert missed.returncode == 0, missed.stdout + missed.stderr
        c.start(3)
        wait_state(c, c.address(3), "UN", observer=1)
        third = repair(c, KS, node=1)
        assert 1 <= third["ranges_compared"] <= 3 and third["partitions_differing"] == 3, third
        assert third["partitions_compared"] <= 3 * 3003 / ranges * 4, third
        print(f"incremental: {third['ranges_compared']} of {ranges} ranges and {third['partitions_compared']} of "
              f"3003 partitions compared for 3 missed writes")
        assert repair(c, KS, node=1)["ranges_compared"] == 0

        # A crash forgets what node 2 held repaired.
        c.stop(2)
        c.start(2)
        wait_state(c, c.address(2), "UN", observer=1)
        after_crash = repair(c, KS, node=1)
        assert after_crash["ranges_compared"] == ranges and after_crash["partitions_differing"] == 0, after_crash
        full = repair(c, KS, "--full", node=1)
        assert full["mode"] == "full" and full["ranges_compared"] == ranges, full
        assert full["partitions_compared"] == 3003 and full["partitions_differing"] == 0, full
        history = c.tool("repair_admin", "list", node=1)["repairs"]
        assert [r["mode"] for r in history][-3:] == ["incremental", "incremental", "full"], history
