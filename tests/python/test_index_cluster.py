"""Secondary indexes in a 3-node cluster: each replica indexes the data it
holds, and an indexed query fans out over the ring's token ranges at the
request's consistency level, so it returns every matching row of every node,
paged, from any coordinator. RF=2, so no node holds all the data."""

import time

import pytest
from cassandra import ConsistencyLevel, ReadFailure
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import WhiteListRoundRobinPolicy
from cassandra.query import SimpleStatement

from cluster_harness import ShoalCluster
from shoal_harness import EXTERNAL

pytestmark = pytest.mark.skipif(bool(EXTERNAL), reason="starts its own cluster of shoal processes")


def session_on(cluster, hosts, cl):
    profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy(hosts), consistency_level=cl, request_timeout=30)
    c = Cluster(hosts, port=cluster.native_port, execution_profiles={EXEC_PROFILE_DEFAULT: profile}, protocol_version=4)
    return c, c.connect()


def paged(session, query, fetch):
    deadline = time.time() + 30
    while True:
        try:
            rs = session.execute(SimpleStatement(query, fetch_size=fetch))
            rows = list(rs.current_rows)
            while rs.has_more_pages:
                rs.fetch_next_page()
                rows.extend(rs.current_rows)
            return rows
        except ReadFailure:
            # An index still building on some replica.
            if time.time() > deadline:
                raise
            time.sleep(0.3)


def test_indexed_queries_return_every_row_across_the_ring(tmp_path):
    with ShoalCluster(tmp_path / "c", nodes=3) as c:
        cluster, s = session_on(c, [c.address(1)], ConsistencyLevel.QUORUM)
        try:
            s.execute("CREATE KEYSPACE ix WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 2}")
            s.execute("CREATE TABLE ix.t (k int, c int, v int, tags set<text>, PRIMARY KEY (k, c))")
            assert cluster.control_connection.wait_for_schema_agreement(wait_time=30)
            ins = s.prepare("INSERT INTO ix.t (k, c, v, tags) VALUES (?, ?, ?, ?)")
            expected = {}
            for k in range(300):
                for cc in range(2):
                    v = (k * 2 + cc) % 5
                    s.execute(ins, (k, cc, v, {f"t{k % 3}"}))
                    expected.setdefault(v, set()).add((k, cc))
            # Built in the background on each node from the data it holds.
            s.execute("CREATE INDEX ON ix.t (v)")
            s.execute("CREATE CUSTOM INDEX ON ix.t (tags) USING 'sai'")
            assert cluster.control_connection.wait_for_schema_agreement(wait_time=30)
        finally:
            cluster.shutdown()
        for node in (1, 2, 3):
            for cl in (ConsistencyLevel.ONE, ConsistencyLevel.QUORUM, ConsistencyLevel.ALL):
                cluster, s = session_on(c, [c.address(node)], cl)
                try:
                    for fetch in (7, 100, 5000):
                        got = paged(s, "SELECT k, c, v FROM ix.t WHERE v = 3", fetch)
                        assert len(got) == len(expected[3]), (node, cl, fetch)
                        assert {(r.k, r.c) for r in got} == expected[3], (node, cl, fetch)
                    tagged = paged(s, "SELECT k FROM ix.t WHERE tags CONTAINS 't1'", 50)
                    assert sorted({r.k for r in tagged}) == [k for k in range(300) if k % 3 == 1]
                finally:
                    cluster.shutdown()
        # Writes after the build, through another coordinator, are found; overwritten values are not.
        cluster, s = session_on(c, [c.address(2)], ConsistencyLevel.QUORUM)
        try:
            s.execute("UPDATE ix.t SET v = 3 WHERE k = 1000 AND c = 0")
            s.execute("UPDATE ix.t SET v = 4 WHERE k = 0 AND c = 0")
            s.execute("DELETE FROM ix.t WHERE k = 1")
            now = expected[3] | {(1000, 0)}
            now = {(k, cc) for k, cc in now if k != 1 and (k, cc) != (0, 0)}
            got = paged(s, "SELECT k, c FROM ix.t WHERE v = 3", 13)
            assert {(r.k, r.c) for r in got} == now
            got = paged(s, "SELECT k, c FROM ix.t WHERE v = 3 LIMIT 17", 5)
            assert len(got) == 17
        finally:
            cluster.shutdown()


def test_a_bootstrapped_node_indexes_what_it_streamed(tmp_path):
    """A node joining an RF=1 ring streams its ranges from the others and
    indexes them before it serves: indexed queries at ONE, through it, still
    return every row (with RF=1 each range has a single replica to answer)."""
    with ShoalCluster(tmp_path / "c", nodes=2) as c:
        cluster, s = session_on(c, [c.address(1)], ConsistencyLevel.ONE)
        try:
            s.execute("CREATE KEYSPACE ixb WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
            s.execute("CREATE TABLE ixb.t (k int PRIMARY KEY, v int)")
            s.execute("CREATE INDEX ON ixb.t (v)")
            assert cluster.control_connection.wait_for_schema_agreement(wait_time=30)
            ins = s.prepare("INSERT INTO ixb.t (k, v) VALUES (?, ?)")
            for k in range(400):
                s.execute(ins, (k, k % 4))
        finally:
            cluster.shutdown()
        new = c.add()
        cluster, s = session_on(c, [c.address(new)], ConsistencyLevel.ONE)
        try:
            got = paged(s, "SELECT k FROM ixb.t WHERE v = 2", 37)
            assert sorted(r.k for r in got) == list(range(2, 400, 4))
        finally:
            cluster.shutdown()
