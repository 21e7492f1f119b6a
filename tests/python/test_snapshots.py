"""Snapshots, restore and load, end to end: real `shoal server` processes, `shoal tool` and the
DataStax Python driver.

- snapshot -> DROP TABLE -> restore gives back every row, with its write time, TTL and
  deletions as they were;
- a snapshot taken on a 1-node cluster, loaded (`shoal tool load DIR`) into a 3-node RF=3
  cluster of another token layout, puts every row on each of its 3 replicas (reads at ONE
  against each node alone);
- listsnapshots / clearsnapshot print nodetool's shapes; bad input gets nodetool's wording.
"""

import json
import os
import re
import subprocess
import time

import pytest
from cassandra import ConsistencyLevel
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import WhiteListRoundRobinPolicy

from cluster_harness import ShoalCluster
from shoal_harness import EXTERNAL, connect_cluster

pytestmark = pytest.mark.skipif(bool(EXTERNAL), reason="starts its own shoal processes")

ROWS = 200


def tool(node, *args):
    """`shoal tool` against `node`: (exit code, stdout, stderr)."""
    cmd = [node.bin_path, "tool", "-h", node.host, "-p", str(node.config["admin_port"]), *map(str, args)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    return out.returncode, out.stdout, out.stderr


def ok(node, *args):
    code, out, err = tool(node, *args)
    assert code == 0, f"shoal tool {' '.join(map(str, args))}: exit {code}\n{out}\n{err}"
    return out


def fill(session, ks):
    """A table with live rows, a TTL'd row, a deleted row and a deleted cell."""
    session.execute(f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    session.execute(f"CREATE TABLE {ks}.t (k int, c int, v text, n int, s set<int>, PRIMARY KEY (k, c))")
    insert = session.prepare(f"INSERT INTO {ks}.t (k, c, v, n, s) VALUES (?, ?, ?, ?, ?) USING TIMESTAMP ?")
    for i in range(ROWS):
        session.execute(insert, (i % 37, i, f"v{i}", i * 3, {i, i + 1}, 1_000_000 + i))
    session.execute(f"INSERT INTO {ks}.t (k, c, v) VALUES (1000, 1, 'ttl') USING TTL 86400")
    session.execute(f"DELETE FROM {ks}.t WHERE k = 0 AND c = 0")
    session.execute(f"DELETE n FROM {ks}.t WHERE k = 1 AND c = 1")


def normalize(rows):
    return sorted((r.k, r.c, r.v, r.n, tuple(sorted(r.s or ())), r.writetime_v) for r in rows)


def table_rows(session, ks, cl=ConsistencyLevel.ONE):
    from cassandra.query import SimpleStatement

    q = SimpleStatement(f"SELECT k, c, v, n, s, writetime(v) FROM {ks}.t", consistency_level=cl, fetch_size=1000)
    return normalize(session.execute(q))


def test_snapshot_drop_restore_gives_back_every_row(shoal_node_factory):
    node = shoal_node_factory()
    cluster = connect_cluster(node)
    s = cluster.connect()
    try:
        fill(s, "snapks")
        s.execute("CREATE INDEX t_n ON snapks.t (n)")
        before = table_rows(s, "snapks")
        assert len(before) == ROWS  # the TTL row in, the deleted row out
        ttl_before = s.execute("SELECT ttl(v) FROM snapks.t WHERE k = 1000 AND c = 1").one()[0]

        out = ok(node, "snapshot", "-t", "before_drop", "snapks")
        assert out.splitlines() == [
            "Requested creating snapshot(s) for [snapks] with snapshot name [before_drop] and options {skipFlush=false}",
            "Snapshot directory: before_drop",
        ]
        table_id = s.execute("SELECT id FROM system_schema.tables WHERE keyspace_name = 'snapks' AND table_name = 't'").one()[0]
        snap = node.data_dir / "snapshots" / "before_drop" / "snapks"
        schema_cql = (snap / f"t-{table_id.hex}" / "schema.cql").read_text()
        assert "CREATE TABLE IF NOT EXISTS snapks.t" in schema_cql, schema_cql
        assert "CREATE INDEX IF NOT EXISTS t_n ON snapks.t (n);" in schema_cql, schema_cql
        manifest = json.loads((snap / "manifest.json").read_text())
        assert [t["table"] for t in manifest["tables"]] == ["t"]
        # Hard links: the snapshot's files are the live files (a second link each).
        files = [snap / "db" / f for f in manifest["tables"][0]["files"]]
        assert files and all(f.stat().st_nlink >= 2 for f in files), [(f, f.stat().st_nlink) for f in files]

        s.execute("DROP TABLE snapks.t")
        out = ok(node, "restore", "-t", "before_drop", "snapks", "t")
        assert "Re-created table snapks.t from the snapshot's schema" in out, out
        after = table_rows(s, "snapks")
        assert after == before
        ttl_after = s.execute("SELECT ttl(v) FROM snapks.t WHERE k = 1000 AND c = 1").one()[0]
        assert 0 < ttl_after <= ttl_before
        # The index came back with the table, its entries written as the rows were.
        assert [tuple(r) for r in s.execute("SELECT k, c FROM snapks.t WHERE n = 30")] == [(10 % 37, 10)]
        assert s.execute("SELECT * FROM snapks.t WHERE k = 0 AND c = 0").one() is None
        assert s.execute("SELECT n FROM snapks.t WHERE k = 1 AND c = 1").one()[0] is None

        # Restoring over live rows changes nothing: the same cells, the same timestamps.
        ok(node, "restore", "-t", "before_drop", "snapks")
        assert table_rows(s, "snapks") == before
        # A newer write wins over the snapshot's older one.
        s.execute("UPDATE snapks.t SET v = 'new' WHERE k = 2 AND c = 2")
        ok(node, "restore", "--tag", "before_drop", "snapks", "t", "--consistency", "ALL")
        assert s.execute("SELECT v FROM snapks.t WHERE k = 2 AND c = 2").one()[0] == "new"

        # The keyspace dropped too (with a user type): both come back from the snapshot's schema.
        s.execute("CREATE TYPE snapks.pt (x int, y text)")
        s.execute("CREATE TABLE snapks.u (k int PRIMARY KEY, p frozen<pt>)")
        s.execute("INSERT INTO snapks.u (k, p) VALUES (1, {x: 1, y: 'one'})")
        ok(node, "snapshot", "-t", "whole", "snapks")
        rows_t = table_rows(s, "snapks")
        s.execute("DROP KEYSPACE snapks")
        out = ok(node, "restore", "-t", "whole", "snapks")
        assert "Re-created table snapks.t" in out and "Re-created table snapks.u" in out, out
        assert table_rows(s, "snapks") == rows_t
        p = s.execute("SELECT p FROM snapks.u WHERE k = 1").one()[0]
        assert (p.x, p.y) == (1, "one")
    finally:
        cluster.shutdown()


def test_listsnapshots_and_clearsnapshot_shapes(shoal_node_factory):
    node = shoal_node_factory()
    cluster = connect_cluster(node)
    s = cluster.connect()
    try:
        assert ok(node, "listsnapshots") == "Snapshot Details: \nThere are no snapshots\n"
        s.execute("CREATE KEYSPACE lsa WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE KEYSPACE lsb WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        for ks in ("lsa", "lsb"):
            s.execute(f"CREATE TABLE {ks}.t1 (k int PRIMARY KEY, v text)")
            s.execute(f"CREATE TABLE {ks}.t2 (k int PRIMARY KEY, v text)")
            for i in range(20):
                s.execute(f"INSERT INTO {ks}.t1 (k, v) VALUES ({i}, 'x')")
                s.execute(f"INSERT INTO {ks}.t2 (k, v) VALUES ({i}, 'y')")

        # Default tag: the time in milliseconds, as nodetool's.
        t0 = int(time.time() * 1000)
        out = ok(node, "snapshot")
        first = out.splitlines()[0]
        m = re.fullmatch(r"Requested creating snapshot\(s\) for \[all keyspaces\] with snapshot name \[(\d+)\] "
                         r"and options \{skipFlush=false\}", first)
        assert m, out
        default_tag = m.group(1)
        assert t0 <= int(default_tag) <= int(time.time() * 1000)
        assert out.splitlines()[1] == f"Snapshot directory: {default_tag}"
        # One table (nodetool's -cf), skipping the flush (-sf).
        out = ok(node, "snapshot", "-t", "one", "-cf", "t2", "-sf", "lsa")
        assert out.splitlines()[0] == (
            "Requested creating snapshot(s) for [lsa] with snapshot name [one] and options {skipFlush=true}")

        listed = json.loads(ok(node, "listsnapshots", "--json"))
        got = sorted((e["tag"], e["keyspace"], e["table"]) for e in listed["snapshots"])
        want = sorted([(default_tag, ks, t) for ks in ("lsa", "lsb") for t in ("t1", "t2")] + [("one", "lsa", "t2")])
        assert got == want
        assert all(e["size_on_disk"] > 0 and e["true_size"] == 0 for e in listed["snapshots"]), listed
        text = ok(node, "listsnapshots")
        lines = text.splitlines()
        assert lines[0] == "Snapshot Details: "
        assert re.match(r"Snapshot name\s+Keyspace name\s+Column family name\s+True size\s+Size on disk\s+"
                        r"Creation time\s+Expiration time$", lines[1]), text
        assert any(re.match(r"one\s+lsa\s+t2\s+0 bytes\s+[\d.]+ (bytes|KiB)\s+\d{4}-\d\d-\d\dT", l) for l in lines), text
        assert text.endswith("\n\nTotal TrueDiskSpaceUsed: 0 bytes\n\n"), text

        # Once compaction replaces the live files, the snapshot alone holds its own: true size.
        for i in range(20, 40):
            s.execute(f"INSERT INTO lsa.t2 (k, v) VALUES ({i}, 'z')")
        ok(node, "compact", "lsa", "t2")
        listed = json.loads(ok(node, "listsnapshots", "--json"))
        one = [e for e in listed["snapshots"] if e["tag"] == "one"]
        assert one[0]["true_size"] == one[0]["size_on_disk"] > 0, listed
        assert listed["total_true_size"] >= one[0]["true_size"]

        # clearsnapshot: nodetool's request line; a keyspace's part only; unknown tags are no error.
        out = ok(node, "clearsnapshot", "-t", default_tag, "lsb")
        assert out == f"Requested clearing snapshot(s) for [lsb] with snapshot name [{default_tag}]\n"
        listed = json.loads(ok(node, "listsnapshots", "--json"))
        assert sorted((e["tag"], e["keyspace"]) for e in listed["snapshots"]) == sorted(
            [(default_tag, "lsa"), (default_tag, "lsa"), ("one", "lsa")])
        assert ok(node, "clearsnapshot", "-t", "nosuch") == (
            "Requested clearing snapshot(s) for [all keyspaces] with snapshot name [nosuch]\n")
        out = ok(node, "clearsnapshot", "--all")
        assert out == "Requested clearing snapshot(s) for [all keyspaces] with [all snapshots]\n"
        assert ok(node, "listsnapshots") == "Snapshot Details: \nThere are no snapshots\n"
        assert not any((node.data_dir / "snapshots").iterdir())
    finally:
        cluster.shutdown()


def test_bad_input_gets_nodetools_wording(shoal_node_factory):
    node = shoal_node_factory()
    cluster = connect_cluster(node)
    s = cluster.connect()
    try:
        s.execute("CREATE KEYSPACE badks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE badks.t (k int PRIMARY KEY)")
        code, out, err = tool(node, "snapshot", "-t", "x", "nosuch")
        assert code == 1 and err.strip() == "error: Keyspace nosuch does not exist", (out, err)
        code, out, err = tool(node, "snapshot", "-t", "x", "-cf", "nosuch", "badks")
        assert code == 1 and err.strip() == "error: Unknown keyspace/cf pair (badks.nosuch)", err
        code, out, err = tool(node, "snapshot", "-t", "x", "-cf", "t", "badks", "system_auth")
        assert code == 1 and "you must specify one and only one keyspace" in err, err
        ok(node, "snapshot", "-t", "x", "badks")
        code, out, err = tool(node, "snapshot", "-t", "x", "badks")
        assert code == 1 and err.strip() == "error: Snapshot x already exists.", err
        code, out, err = tool(node, "snapshot", "-t", "a/b", "badks")
        assert code == 1 and err.strip() == "error: Snapshot name cannot contain /", err
        code, out, err = tool(node, "snapshot", "-t", "", "badks")
        assert code == 1 and err.strip() == "error: You must supply a snapshot name.", err
        code, out, err = tool(node, "clearsnapshot")
        assert code == 1 and err.strip() == "error: Specify snapshot name or --all", err
        code, out, err = tool(node, "clearsnapshot", "-t", "x", "--all")
        assert code == 1 and err.strip() == "error: Specify only one of snapshot name or --all", err
        code, out, err = tool(node, "restore", "-t", "nosuch", "badks")
        assert code == 1 and err.strip() == "error: Snapshot nosuch does not exist", err
        code, out, err = tool(node, "restore", "-t", "x", "badks", "nosuch")
        assert code == 1 and "Unknown keyspace/cf pair (badks.nosuch)" in err, err
        code, out, err = tool(node, "load", str(node.data_dir / "nowhere"))
        assert code == 1 and err.startswith("error: "), err
        # Load needs the tables to exist, as sstableloader does.
        s.execute("DROP TABLE badks.t")
        code, out, err = tool(node, "load", str(node.data_dir / "snapshots" / "x"))
        assert code == 1 and err.strip() == "error: Unknown keyspace/cf pair (badks.t)", err
    finally:
        cluster.shutdown()


def test_snapshot_of_one_node_loads_into_three_replicas(shoal_node_factory, tmp_path):
    node = shoal_node_factory(num_tokens=4)
    cluster = connect_cluster(node)
    s = cluster.connect()
    try:
        fill(s, "loadks")
        before = table_rows(s, "loadks")
        ok(node, "snapshot", "-t", "ship", "loadks")
    finally:
        cluster.shutdown()
    node.stop()
    snapshot_dir = node.data_dir / "snapshots" / "ship"

    with ShoalCluster(tmp_path / "three", nodes=3, num_tokens=16) as three:
        c = Cluster(three.contact_points, port=three.native_port, protocol_version=4)
        s = c.connect()
        try:
            s.execute("CREATE KEYSPACE loadks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
            s.execute("CREATE TABLE loadks.t (k int, c int, v text, n int, s set<int>, PRIMARY KEY (k, c))")
        finally:
            c.shutdown()
        report = three.tool("load", str(snapshot_dir), node=2)
        [ks] = report["keyspaces"]
        assert ks["keyspace"] == "loadks" and ks["tables"][0]["partitions"] == 38, report
        for i in (1, 2, 3):
            profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([three.address(i)]),
                                       consistency_level=ConsistencyLevel.ONE, request_timeout=30)
            c = Cluster([three.address(i)], port=three.native_port, protocol_version=4,
                        execution_profiles={EXEC_PROFILE_DEFAULT: profile})
            s = c.connect()
            try:
                assert table_rows(s, "loadks") == before, f"node {i}"
                assert s.execute("SELECT * FROM loadks.t WHERE k = 0 AND c = 0").one() is None
                assert 0 < s.execute("SELECT ttl(v) FROM loadks.t WHERE k = 1000 AND c = 1").one()[0] <= 86400
            finally:
                c.shutdown()


def backups_of(node, ks, table):
    root = node.data_dir / "backups" / ks
    dirs = [d for d in root.iterdir() if d.name.startswith(f"{table}-")] if root.exists() else []
    return sorted(f for d in dirs for f in d.iterdir())


def test_incremental_backups_link_every_flushed_sstable(shoal_node_factory):
    node = shoal_node_factory(config={"incremental_backups": True})
    plain = shoal_node_factory()
    for n in (node, plain):
        cluster = connect_cluster(n)
        s = cluster.connect()
        try:
            s.execute("CREATE KEYSPACE bk WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
            s.execute("CREATE TABLE bk.t (k int PRIMARY KEY, v text)")
            for round_ in range(3):
                for i in range(50):
                    s.execute("INSERT INTO bk.t (k, v) VALUES (%s, %s)", (round_ * 100 + i, f"r{round_}"))
                ok(n, "flush", "bk", "t")
            # A flush with nothing to write writes no file, and backs up none.
            ok(n, "flush", "bk", "t")
        finally:
            cluster.shutdown()
    files = backups_of(node, "bk", "t")
    assert len(files) == 3, files
    # Hard links of the live files, which compaction then replaces: the backups stay.
    assert all(f.suffix == ".sst" and f.stat().st_size > 0 and f.stat().st_nlink == 2 for f in files), \
        [(f, f.stat().st_nlink) for f in files]
    ok(node, "compact", "bk", "t")
    assert backups_of(node, "bk", "t") == files
    assert all(f.stat().st_nlink == 1 for f in files)
    # Off by default (cassandra.yaml's default).
    assert not (plain.data_dir / "backups").exists()
    # nodetool's statusbackup / enablebackup / disablebackup, until the node restarts.
    assert ok(node, "statusbackup") == "running\n"
    assert ok(plain, "statusbackup") == "not running\n"
    ok(plain, "enablebackup")
    assert ok(plain, "statusbackup") == "running\n"
    cluster = connect_cluster(plain)
    s = cluster.connect()
    try:
        s.execute("INSERT INTO bk.t (k, v) VALUES (1, 'after')")
    finally:
        cluster.shutdown()
    ok(plain, "flush", "bk", "t")
    assert len(backups_of(plain, "bk", "t")) == 1
    ok(plain, "disablebackup")
    assert ok(plain, "statusbackup") == "not running\n"


def test_backup_to_a_directory_restores_into_a_fresh_cluster(shoal_node_factory, tmp_path):
    import shutil

    node = shoal_node_factory()
    cluster = connect_cluster(node)
    s = cluster.connect()
    try:
        fill(s, "bkpks")
        before = table_rows(s, "bkpks")
        host_id = str(s.execute("SELECT host_id FROM system.local").one()[0])
    finally:
        cluster.shutdown()
    target = tmp_path / "backup"
    out = ok(node, "backup", str(target), "-t", "nightly", "bkpks")
    assert re.fullmatch(rf"Backed up snapshot nightly to {re.escape(str(target / host_id / 'nightly'))} "
                        r"\(\d+ files, [\d.]+ (bytes|KiB|MiB)\)\n", out), out
    copied = target / host_id / "nightly" / "bkpks"
    manifest = json.loads((copied / "manifest.json").read_text())
    # Copies, not links: the backup owes nothing to the node's disk.
    files = [copied / "db" / f for f in manifest["tables"][0]["files"]]
    assert files and all(f.stat().st_nlink == 1 for f in files)
    code, _, err = tool(node, "backup", str(target), "-t", "nightly")
    assert code == 1 and "already exists" in err, err
    # The node and its disk are gone.
    node.stop()
    shutil.rmtree(node.data_dir)

    fresh = shoal_node_factory()
    out = ok(fresh, "load", str(target), "--create-schema")
    assert re.search(r"bkpks\s+t\s+38\s+", out), out
    c = connect_cluster(fresh)
    s = c.connect()
    try:
        assert table_rows(s, "bkpks") == before
    finally:
        c.shutdown()


def test_backup_to_an_s3_store_restores_into_a_fresh_cluster(shoal_node_factory, tmp_path, monkeypatch):
    """The same through an S3-compatible store: moto's server, on loopback."""
    import shutil
    import socket
    import sys
    from pathlib import Path

    import boto3

    from shoal_harness import free_port, wait_until

    port = free_port()
    moto_bin = Path(sys.executable).parent / "moto_server"
    log = open(tmp_path / "moto.log", "wb")
    # moto checks signatures and IAM policies after its first 4 requests (the set-up below): a
    # request Shoal signs wrongly is refused.
    env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT="4")
    moto = subprocess.Popen([str(moto_bin), "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log,
                            stdin=subprocess.DEVNULL, env=env)
    try:
        def listening():
            with socket.socket() as sock:
                return sock.connect_ex(("127.0.0.1", port)) == 0
        wait_until(listening, 30, what="moto_server")
        endpoint = f"http://127.0.0.1:{port}"
        setup = dict(endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="setup",
                     aws_secret_access_key="setup")
        iam = boto3.client("iam", **setup)
        iam.create_user(UserName="shoal")
        iam.put_user_policy(UserName="shoal", PolicyName="s3", PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
        key = iam.create_access_key(UserName="shoal")["AccessKey"]
        boto3.client("s3", **setup).create_bucket(Bucket="shoal-backups")
        # Parts of 5 MiB (S3's smallest): the big table's file goes up in parts and comes back by ranges.
        creds = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": key["AccessKeyId"],
                 "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"], "AWS_REGION": "us-east-1",
                 "SHOAL_S3_MULTIPART_CHUNKSIZE": "5MiB"}
        for k, v in creds.items():
            monkeypatch.setenv(k, v)
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                          aws_access_key_id=key["AccessKeyId"], aws_secret_access_key=key["SecretAccessKey"])

        node = shoal_node_factory()
        cluster = connect_cluster(node)
        s = cluster.connect()
        try:
            fill(s, "s3ks")
            before = table_rows(s, "s3ks")
            # About 12 MiB of incompressible values: one file of more than two parts.
            s.execute("CREATE TABLE s3ks.big (k int PRIMARY KEY, v text)")
            insert = s.prepare("INSERT INTO s3ks.big (k, v) VALUES (?, ?)")
            big = {i: os.urandom(5000).hex() for i in range(1200)}
            for k, v in big.items():
                s.execute(insert, (k, v))
            host_id = str(s.execute("SELECT host_id FROM system.local").one()[0])
        finally:
            cluster.shutdown()
        out = ok(node, "backup", "s3://shoal-backups/nightly", "-t", "t1", "s3ks")
        assert out.startswith(f"Backed up snapshot t1 to s3://shoal-backups/nightly/{host_id}/t1 ("), out
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket="shoal-backups")["Contents"]]
        assert f"nightly/{host_id}/t1/s3ks/manifest.json" in keys, keys
        assert any(k.endswith(".sst") for k in keys), keys
        # The big table's file went up in 3 parts (a multipart upload's ETag ends in "-<parts>").
        sizes = {o["Key"]: o["Size"] for o in s3.list_objects_v2(Bucket="shoal-backups")["Contents"]}
        largest = max((k for k in sizes if k.endswith(".sst")), key=sizes.get)
        assert sizes[largest] > 10 << 20, sizes
        etag = s3.head_object(Bucket="shoal-backups", Key=largest)["ETag"]
        assert etag.strip('"').endswith("-3"), (largest, sizes[largest], etag)
        # No upload was left unfinished.
        assert not s3.list_multipart_uploads(Bucket="shoal-backups").get("Uploads"), "an upload left open"
        code, _, err = tool(node, "backup", "s3://shoal-backups/nightly", "-t", "t1")
        assert code == 1 and "already exists" in err, err
        node.stop()
        shutil.rmtree(node.data_dir)

        # A wrong secret is refused by the store: the signature is checked.
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
        wrong = shoal_node_factory()
        code, _, err = tool(wrong, "load", "s3://shoal-backups/nightly", "--create-schema")
        assert code == 1 and "HTTP 403" in err, err
        wrong.stop()
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])

        fresh = shoal_node_factory()
        out = ok(fresh, "load", "s3://shoal-backups/nightly", "--create-schema")
        assert re.search(r"s3ks\s+t\s+38\s+", out), out
        c = connect_cluster(fresh)
        s = c.connect()
        try:
            assert table_rows(s, "s3ks") == before
            assert dict(s.execute("SELECT k, v FROM s3ks.big").all()) == big
        finally:
            c.shutdown()
        # The big file came back in ranged GETs of one part each (moto logs each answer's status).
        logged = re.sub(r"\x1b\[[0-9;]*m", "", (tmp_path / "moto.log").read_text())
        ranged = re.findall(r'"GET /shoal-backups/(\S+) HTTP/1.1" 206', logged)
        assert ranged.count(largest) == 3, ranged
        # The fetched copy is gone once loaded.
        assert not [p for p in (fresh.data_dir / "snapshots").iterdir() if p.name.startswith(".s3-")]
    finally:
        moto.terminate()
        try:
            moto.wait(timeout=10)
        except subprocess.TimeoutExpired:
            moto.kill()
        log.close()
