"""A full disk (issue 22): the disk usage guardrail (Cassandra 5.0's
`data_disk_usage_percentage_warn_threshold` / `_fail_threshold`) refuses writes
with Cassandra's message once the data directory's disk is over the fail
threshold, while reads and deletions go on, and takes writes again once there
is room; with the guardrail off, a real ENOSPC fails writes without crashing
the node or losing an acknowledged write across a restart.

Each test mounts a small tmpfs for its node's data directory (we run as root;
skipped with the reason where mounting is not permitted) and unmounts it at the
end. Every wait is bounded."""

import contextlib
import errno
import os
import subprocess
import time

import pytest
from cassandra import InvalidRequest
from cassandra.cluster import EXEC_PROFILE_DEFAULT, ExecutionProfile, NoHostAvailable
from cassandra.policies import FallthroughRetryPolicy
from cassandra.protocol import ServerError

from shoal_harness import connect_cluster, create_keyspace, wait_until

MIB = 1 << 20

# Cassandra 5.0's words (Guardrails.replicaDiskUsage, decorated by Guardrail.decorateMessage).
REFUSAL = "Guardrail replica_disk_usage violated: Write request failed because disk usage exceeds failure threshold"
WARNING = "Guardrail replica_disk_usage violated: Replica disk usage exceeds warning threshold"


@contextlib.contextmanager
def small_disk(path, size_mb):
    """A tmpfs of `size_mb` MiB mounted at `path` for the block; unmounted after."""
    path.mkdir(parents=True, exist_ok=True)
    try:
        out = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(path)],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"cannot mount a tmpfs for the data directory: {e}")
    if out.returncode != 0:
        pytest.skip("cannot mount a tmpfs for the data directory (needs root or CAP_SYS_ADMIN): "
                    f"{(out.stderr or out.stdout).strip()}")
    try:
        yield path
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True, timeout=30).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30)


def fill(path, leave_bytes):
    """Fills the file system of `path` with the file `path`, then gives `leave_bytes` of it back."""
    chunk = b"\x5a" * MIB
    written = 0
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                n = f.write(chunk)
                if not n:
                    break
                written += n
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise
    os.truncate(path, max(0, written - leave_bytes))


def server_message(e):
    """The server's message of a driver exception (`message="..."` in its text)."""
    text = getattr(e, "message", None) or str(e)
    start = text.find('message="')
    return text[start + len('message="'):-1] if start >= 0 and text.endswith('"') else text


def value(k, size):
    return (f"{k}:".encode() * (size // 4 + 1))[:size]


def connect(node):
    # No retries: each write's own outcome is what is checked.
    profile = ExecutionProfile(retry_policy=FallthroughRetryPolicy(), request_timeout=30)
    c = connect_cluster(node, execution_profiles={EXEC_PROFILE_DEFAULT: profile})
    return c, c.connect()


def read_all(session, keys, size):
    """The keys whose value does not read back as written."""
    sel = session.prepare("SELECT v FROM disk.t WHERE k = ?")
    bad = []
    for k in keys:
        row = session.execute(sel, (k,)).one()
        if row is None or row.v != value(k, size):
            bad.append(k)
    return bad


def test_guardrail_refuses_writes_over_the_fail_threshold_and_takes_them_again(shoal_node_factory):
    size = 64 << 10
    node = shoal_node_factory(start=False, config={
        "data_disk_usage_percentage_warn_threshold": 20,
        "data_disk_usage_percentage_fail_threshold": 40,
    })
    with small_disk(node.workdir / "disk", 300) as disk:
        node.data_dir = disk / "data"
        try:
            # About 100 MiB left: the data directory (commit log and memtables
            # count) is over 40% of what it holds plus what is free after ~25 MiB.
            padding = disk / "padding"
            fill(padding, 100 * MIB)
            node.start()
            c, s = connect(node)
            try:
                create_keyspace(s, "disk")
                s.execute("CREATE TABLE disk.t (k int PRIMARY KEY, v blob)")
                ins = s.prepare("INSERT INTO disk.t (k, v) VALUES (?, ?)")
                acked, warned, refusal = [], False, None
                deadline = time.monotonic() + 40
                while refusal is None:
                    assert time.monotonic() < deadline, f"no refusal after {len(acked)} writes of {size} bytes"
                    k = len(acked)
                    try:
                        rs = s.execute(ins, (k, value(k, size)))
                    except InvalidRequest as e:
                        refusal = e
                        break
                    acked.append(k)
                    warned |= WARNING in (rs.response_future.warnings or [])
                    time.sleep(0.01)  # the guardrail samples once a second
                assert server_message(refusal) == REFUSAL, str(refusal)
                assert warned, "writes over the warn threshold were not warned about"
                assert node.is_running()
                assert "Guardrail local_data_disk_usage violated" in node.log_tail(200_000)

                # Still refused: UPDATE and a BATCH that adds data; reads and deletions go on.
                with pytest.raises(InvalidRequest, match="replica_disk_usage"):
                    s.execute("UPDATE disk.t SET v = 0x00 WHERE k = 0")
                with pytest.raises(InvalidRequest, match="replica_disk_usage"):
                    s.execute("BEGIN BATCH DELETE FROM disk.t WHERE k = 1; "
                              "INSERT INTO disk.t (k, v) VALUES (-1, 0x00); APPLY BATCH")
                s.execute("DELETE FROM disk.t WHERE k = 0")
                s.execute("BEGIN BATCH DELETE FROM disk.t WHERE k = 1; DELETE FROM disk.t WHERE k = 2; APPLY BATCH")
                assert s.execute("SELECT k FROM disk.t WHERE k IN (0, 1, 2, -1)").all() == []
                acked = acked[3:]
                assert read_all(s, acked, size) == [], "acknowledged writes do not read back"

                # Room again: within a few samples writes are accepted.
                padding.unlink()
                k = len(acked) + 10
                def accepted():
                    try:
                        s.execute(ins, (k, value(k, size)))
                        return True
                    except InvalidRequest as e:
                        assert server_message(e) == REFUSAL, str(e)
                        return False
                wait_until(accepted, timeout=10, interval=0.2, what="a write accepted once there is room")
                acked.append(k)
                for k in range(k + 1, k + 20):
                    s.execute(ins, (k, value(k, size)))
                    acked.append(k)
                assert read_all(s, acked, size) == []
            finally:
                c.shutdown()

            # And after a restart.
            node.restart()
            c, s = connect(node)
            try:
                assert read_all(s, acked, size) == [], "acknowledged writes lost across a restart"
            finally:
                c.shutdown()
        finally:
            node.stop()


def test_enospc_without_the_guardrail_loses_no_acknowledged_write(shoal_node_factory):
    size = 32 << 10
    node = shoal_node_factory(start=False)
    with small_disk(node.workdir / "disk", 300) as disk:
        node.data_dir = disk / "data"
        try:
            node.start()
            c, s = connect(node)
            try:
                create_keyspace(s, "disk")
                s.execute("CREATE TABLE disk.t (k int PRIMARY KEY, v blob)")
                ins = s.prepare("INSERT INTO disk.t (k, v) VALUES (?, ?)")
                padding = disk / "padding"
                fill(padding, 4 * MIB)

                # Write until the disk is full: each write is acknowledged or gets an error.
                acked, errors = [], []
                deadline = time.monotonic() + 40
                k = 0
                while len(errors) < 20:
                    assert time.monotonic() < deadline, f"{len(acked)} acknowledged, {len(errors)} failed in 40 s"
                    try:
                        s.execute(ins, (k, value(k, size)))
                        acked.append(k)
                    except (ServerError, NoHostAvailable) as e:
                        errors.append(e)
                    k += 1
                assert len(acked) > 20, f"only {len(acked)} writes before the disk was full"
                messages = {server_message(e) for e in errors}
                assert all("disk is full" in m for m in messages), messages
                assert node.is_running(), "the node died at ENOSPC"
                assert read_all(s, acked, size) == [], "acknowledged writes do not read back on a full disk"
            finally:
                c.shutdown()

            # Stopped with the disk still full: it stops (its last flush may fail; the commit log
            # has everything). Then room again, and a restart: nothing acknowledged is lost.
            rc, clean = node.stop()
            assert clean, f"the node did not stop on SIGTERM with a full disk (rc {rc})"
            padding.unlink()
            node.start()
            c, s = connect(node)
            try:
                assert read_all(s, acked, size) == [], "acknowledged writes lost across the restart"
                more = list(range(k, k + 20))
                for k in more:
                    s.execute(ins, (k, value(k, size)))
                assert read_all(s, acked + more, size) == []
            finally:
                c.shutdown()
        finally:
            node.stop()


def test_a_full_replica_refuses_the_writes_it_owns_in_a_cluster(tmp_path):
    """Two nodes, RF=1, both over the fail threshold (the disk counts as 1 MiB): through one
    coordinator, a write to a partition it owns is refused before anything is sent, and a write
    to a partition of the other node is refused by that replica; either way the client gets the
    guardrail's InvalidRequest at once (not a WriteTimeout), and reads and deletions go on."""
    from cassandra import ConsistencyLevel
    from cassandra.cluster import Cluster
    from cassandra.policies import WhiteListRoundRobinPolicy

    from cluster_harness import ShoalCluster
    from shoal_harness import EXTERNAL

    if EXTERNAL:
        pytest.skip("starts its own cluster of shoal processes")
    config = {
        "write_request_timeout": "2000ms",
        "data_disk_usage_percentage_fail_threshold": 1,
        "data_disk_usage_max_disk_size": "1MiB",
    }
    with ShoalCluster(tmp_path / "c", nodes=2, config=config) as c:
        first = c.address(1)
        profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([first]),
                                   consistency_level=ConsistencyLevel.ONE, request_timeout=30,
                                   retry_policy=FallthroughRetryPolicy())
        cl = Cluster([first], port=c.native_port, execution_profiles={EXEC_PROFILE_DEFAULT: profile},
                     protocol_version=4)
        try:
            s = cl.connect()
            s.execute("CREATE KEYSPACE disk WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
            s.execute("CREATE TABLE disk.t (k text PRIMARY KEY, v int)")
            assert cl.control_connection.wait_for_schema_agreement()
            owners = {}
            for i in range(40):
                (owner,) = c.tool("getendpoints", "disk", "t", f"key{i}")["endpoints"]
                owners.setdefault(owner, f"key{i}")
                if len(owners) == 2:
                    break
            assert set(owners) == {c.address(1), c.address(2)}, owners
            ins = s.prepare("INSERT INTO disk.t (k, v) VALUES (?, 1)")
            for owner, key in owners.items():
                started = time.monotonic()
                with pytest.raises(InvalidRequest) as refused:
                    s.execute(ins, (key,))
                assert server_message(refused.value) == REFUSAL, (owner, str(refused.value))
                assert time.monotonic() - started < 1.5, f"refused by {owner} only after the write timeout"
                s.execute("DELETE FROM disk.t WHERE k = %s", (key,))
                assert s.execute("SELECT v FROM disk.t WHERE k = %s", (key,)).one() is None
        finally:
            cl.shutdown()
