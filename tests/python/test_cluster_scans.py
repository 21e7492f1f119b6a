"""Full-table scans and large batches on a real 3-node cluster (issue 28).

- A scan pages across the ring's ranges and the replicas' partitions: at every
  page size each row comes back exactly once, and paging ends.
- A batch over many partitions is checked as Cassandra checks it
  (batch_size_warn_threshold / batch_size_fail_threshold, the warning returned
  to the client), and whatever is accepted reaches every replica, however many
  internode messages it takes (a replica's share of a 10,000-partition batch is
  more than one message holds)."""

import pytest
from cassandra import ConsistencyLevel, InvalidRequest
from cassandra.query import BatchStatement, BatchType, SimpleStatement

from cluster_harness import ShoalCluster
from shoal_harness import EXTERNAL, all_pages
from test_cluster import session_on

pytestmark = pytest.mark.skipif(bool(EXTERNAL), reason="starts its own cluster of shoal processes")


def _no_panic(cluster):
    for i in range(1, cluster.nodes + 1):
        text = cluster.log_path(i).read_text(errors="replace")
        assert "panicked" not in text, f"node {i} logged a panic:\n{cluster.logs()}"


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    with ShoalCluster(tmp_path_factory.mktemp("scans") / "c", nodes=3) as c:
        cl, s = session_on(c, c.contact_points)
        s.execute("CREATE KEYSPACE pg WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 2}")
        s.execute("CREATE TABLE pg.many (k int PRIMARY KEY, v int)")
        s.execute("CREATE TABLE pg.grid (k int, c int, v int, PRIMARY KEY (k, c))")
        s.execute("CREATE KEYSPACE bt WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        s.execute("CREATE TABLE bt.kv (k int PRIMARY KEY, v int)")
        assert cl.control_connection.wait_for_schema_agreement(wait_time=30)
        ins = s.prepare("INSERT INTO pg.many (k, v) VALUES (?, ?)")
        ins.consistency_level = ConsistencyLevel.ALL
        for k in range(1000):
            s.execute(ins, (k, k))
        for k in range(3):
            for c_ in range(3):
                s.execute(SimpleStatement(f"INSERT INTO pg.grid (k, c, v) VALUES ({k}, {c_}, 0)", consistency_level=ConsistencyLevel.ALL))
        cl.shutdown()
        yield c
        _no_panic(c)


@pytest.mark.parametrize("coordinator", [1, 3])
@pytest.mark.parametrize("cl", [ConsistencyLevel.ONE, ConsistencyLevel.QUORUM])
def test_full_scan_of_1000_partitions_returns_each_once(three, coordinator, cl):
    cluster, s = session_on(three, [three.address(coordinator)], cl=cl)
    try:
        for fetch in (100, 7, 1000, 1001):
            ks = [r.k for r in all_pages(s, "SELECT k FROM pg.many", fetch, 1000 // fetch + 5)]
            assert len(ks) == 1000 and set(ks) == set(range(1000)), (
                f"fetch_size={fetch} via node {coordinator}: {len(ks)} rows, {len(set(ks))} distinct"
            )
    finally:
        cluster.shutdown()


def test_full_scan_of_3x3_at_every_small_page_size(three):
    cluster, s = session_on(three, [three.address(2)], cl=ConsistencyLevel.QUORUM)
    try:
        expected = sorted((k, c) for k in range(3) for c in range(3))
        for fetch in (1, 2, 3, 4, 9, 10):
            rows = [(r.k, r.c) for r in all_pages(s, "SELECT k, c FROM pg.grid", fetch, 9 // fetch + 5)]
            assert sorted(rows) == expected and len(rows) == 9, f"fetch_size={fetch}: {rows}"
            # Within each partition the clustering order holds.
            for k in range(3):
                assert [c for kk, c in rows if kk == k] == [0, 1, 2], f"fetch_size={fetch}: {rows}"
    finally:
        cluster.shutdown()


def _batch(session, keys, kind=BatchType.UNLOGGED, table="bt.kv"):
    ins = session.prepare(f"INSERT INTO {table} (k, v) VALUES (?, ?)")
    b = BatchStatement(batch_type=kind, consistency_level=ConsistencyLevel.QUORUM)
    for k in keys:
        b.add(ins, (k, -k))
    return session.execute(b)


def _all_readable(session, keys, table="bt.kv"):
    sel = session.prepare(f"SELECT v FROM {table} WHERE k = ?")
    sel.consistency_level = ConsistencyLevel.ALL
    for k in keys:
        row = session.execute(sel, (k,)).one()
        assert row is not None and row.v == -k, f"key {k} at ALL: {row}"


def test_batches_of_10_1000_10000_partitions_with_the_default_thresholds(three):
    """Sizes as Cassandra 5.0.9 counts them (74 bytes per single-row partition
    here, the same figures its own warnings give): 10 partitions are applied
    silently; 200 are applied with Cassandra's two warnings; 1,000 and 10,000
    (74,000 and 740,000 bytes, over the 50 KiB fail threshold) are refused with
    InvalidRequest "Batch too large" and write nothing."""
    cluster, s = session_on(three, [three.address(1)])
    try:
        rs = _batch(s, range(10), BatchType.LOGGED)
        assert not rs.response_future.warnings, rs.response_future.warnings
        _all_readable(s, range(10))

        rs = _batch(s, range(1000, 1200))
        assert rs.response_future.warnings == [
            "Batch for [bt.kv] is of size 14800, exceeding specified threshold of 5120 by 9680.",
            "Unlogged batch covering 200 partitions detected against table [bt.kv]. "
            "You should use a logged batch for atomicity, or asynchronous writes for performance.",
        ], rs.response_future.warnings
        _all_readable(s, range(1000, 1200))

        for n in (1000, 10_000):
            with pytest.raises(InvalidRequest, match="Batch too large"):
                _batch(s, range(100_000, 100_000 + n), BatchType.LOGGED)
        none = s.execute(SimpleStatement("SELECT k FROM bt.kv WHERE k = 100000", consistency_level=ConsistencyLevel.ALL)).one()
        assert none is None, "a refused batch wrote something"
    finally:
        cluster.shutdown()
    _no_panic(three)


def test_an_accepted_10000_partition_batch_reaches_every_replica(tmp_path):
    """With batch_size_fail_threshold raised, a 10,000-partition batch at RF=3 is
    accepted; each replica's share (10,000 mutations, more than one internode
    message holds) goes in several messages, and every row is readable at ALL."""
    config = {"batch_size_fail_threshold": "64MiB"}
    with ShoalCluster(tmp_path / "c", nodes=3, config=config) as c:
        cluster, s = session_on(c, [c.address(1)])
        try:
            s.execute("CREATE KEYSPACE bt WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
            s.execute("CREATE TABLE bt.kv (k int PRIMARY KEY, v int)")
            assert cluster.control_connection.wait_for_schema_agreement(wait_time=30)
            _batch(s, range(10_000))
            _batch(s, range(20_000, 21_000), BatchType.LOGGED)
            _all_readable(s, range(0, 10_000, 7))
            _all_readable(s, range(20_000, 21_000, 7))
            count = s.execute(SimpleStatement("SELECT count(*) FROM bt.kv", consistency_level=ConsistencyLevel.ALL)).one()[0]
            assert count == 11_000
        finally:
            cluster.shutdown()
        _no_panic(c)
