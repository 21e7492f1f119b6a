"""Counter columns: schema rules, UPDATE c = c + n, counter batches, deletes,
reads at every consistency level. Every error is Cassandra 5.0.9's (checked
with SHOAL_TEST_EXTERNAL pointing at a Cassandra)."""

import os
import threading
import time

import pytest
from cassandra import ConsistencyLevel, InvalidRequest, Unavailable
from cassandra.protocol import ConfigurationException, SyntaxException
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import FallthroughRetryPolicy, RoundRobinPolicy, WhiteListRoundRobinPolicy
from cassandra.query import BatchStatement, BatchType, SimpleStatement

from cluster_harness import ShoalCluster
from shoal_harness import EXTERNAL, wait_until


@pytest.fixture
def ctr(ks_session):
    ks_session.execute("CREATE TABLE t (k int PRIMARY KEY, c counter, d counter)")
    ks_session.execute("CREATE TABLE tc (k int, ck text, c counter, s counter static, PRIMARY KEY (k, ck))")
    ks_session.execute("CREATE TABLE plain (k int PRIMARY KEY, v int)")
    return ks_session


def refused(session, query, message, exc=InvalidRequest, cl=None):
    st = SimpleStatement(query, consistency_level=cl) if cl is not None else query
    with pytest.raises(exc) as e:
        session.execute(st)
    assert message in str(e.value), str(e.value)


def row(session, k):
    return [(r.c, r.d) for r in session.execute(f"SELECT c, d FROM t WHERE k = {k}")]


@pytest.mark.parametrize(
    "ddl, message",
    [
        ("CREATE TABLE x (k int PRIMARY KEY, c counter, v int)", "Cannot mix counter and non counter columns in the same table"),
        ("CREATE TABLE x (k int PRIMARY KEY, c counter, l list<int>)", "Cannot mix counter and non counter columns in the same table"),
        ("CREATE TABLE x (k counter PRIMARY KEY, c counter)", "counter type is not supported for PRIMARY KEY column 'k'"),
        ("CREATE TABLE x (k int, ck counter, c counter, PRIMARY KEY (k, ck))", "counter type is not supported for PRIMARY KEY column 'ck'"),
        ("CREATE TABLE x (k int PRIMARY KEY, c counter) WITH default_time_to_live = 10", "Cannot set default_time_to_live on a table with counters"),
        ("CREATE TABLE x (k int PRIMARY KEY, c list<counter>)", "Counters are not allowed inside collections: list<counter>"),
        ("CREATE TABLE x (k int PRIMARY KEY, c frozen<list<counter>>)", "Counters are not allowed inside collections: frozen<list<counter>>"),
        ("CREATE TABLE x (k int PRIMARY KEY, c tuple<int, counter>)", "Counters are not allowed inside tuples"),
        ("CREATE TABLE x (k int PRIMARY KEY, c counter, s counter static)", "Static columns are only useful (and thus allowed) if the table has at least one clustering column"),
    ],
)
def test_counter_table_schema_rules(ks_session, ddl, message):
    refused(ks_session, ddl, message)


def test_alter_rules(ctr):
    ks = ctr.keyspace
    refused(ctr, "ALTER TABLE t ADD v int", f'{ks}.t: Cannot have a non counter column ("v") in a counter table', ConfigurationException)
    refused(ctr, "ALTER TABLE plain ADD c counter", f'{ks}.plain: Cannot have a counter column ("c") in a non counter table', ConfigurationException)
    refused(ctr, "ALTER TABLE t WITH default_time_to_live = 5", "Cannot set default_time_to_live on a table with counters")
    ctr.execute("ALTER TABLE t ADD e counter")
    ctr.execute("ALTER TABLE tc ADD s2 counter static")
    ctr.execute("UPDATE t SET e = e + 7 WHERE k = 1")
    assert [r.e for r in ctr.execute("SELECT e FROM t WHERE k = 1")] == [7]
    ctr.execute("ALTER TABLE t DROP e")
    assert [(r.k, r.c, r.d) for r in ctr.execute("SELECT * FROM t")] == []


def test_schema_tables_flag_counter_tables(ctr):
    flags = {
        r.table_name: set(r.flags)
        for r in ctr.execute(f"SELECT table_name, flags FROM system_schema.tables WHERE keyspace_name = '{ctr.keyspace}'")
    }
    assert flags == {"t": {"compound", "counter"}, "tc": {"compound", "counter"}, "plain": {"compound"}}


def test_increments_and_decrements(ctr):
    ctr.execute("UPDATE t SET c = c + 1, d = d - 2 WHERE k = 1")
    assert row(ctr, 1) == [(1, -2)]
    ctr.execute("UPDATE t SET c += 3 WHERE k = 1")
    ctr.execute("UPDATE t SET c -= 1 WHERE k = 1")
    assert row(ctr, 1) == [(3, -2)]
    ctr.execute("UPDATE t SET c = c + 1 WHERE k IN (2, 3)")
    assert sorted((r.k, r.c, r.d) for r in ctr.execute("SELECT * FROM t")) == [(1, 3, -2), (2, 1, None), (3, 1, None)]
    ctr.execute("UPDATE t SET c = c + -9223372036854775808 WHERE k = 4")
    ctr.execute("UPDATE t SET c = c + 9223372036854775807 WHERE k = 4")
    assert row(ctr, 4) == [(-1, None)]
    # Two updates of one counter in a statement add up.
    ctr.execute("UPDATE t SET c = c + 1, c = c + 2 WHERE k = 7")
    assert row(ctr, 7) == [(3, None)]
    # Bind markers: a prepared update.
    p = ctr.prepare("UPDATE t SET c = c + ?, d = d - ? WHERE k = ?")
    for _ in range(10):
        ctr.execute(p, (5, 1, 6))
    assert row(ctr, 6) == [(50, -10)]


def test_aggregates_writetime_and_filtering_on_counters(ctr):
    for k, n in [(1, 3), (2, 6), (3, 1)]:
        ctr.execute(f"UPDATE t SET c = c + {n} WHERE k = {k}")
    r = ctr.execute("SELECT sum(c), max(c), count(c) FROM t").one()
    assert (r[0], r[1], r[2]) == (10, 6, 3)
    assert [r.k for r in ctr.execute("SELECT k FROM t WHERE c = 1 ALLOW FILTERING")] == [3]
    assert all(r[0] is not None for r in ctr.execute("SELECT writetime(c) FROM t"))
    assert [r[0] for r in ctr.execute("SELECT ttl(c) FROM t WHERE k = 1")] == [None]


@pytest.mark.parametrize(
    "query, message",
    [
        ("INSERT INTO t (k, c) VALUES (1, 1)", "INSERT statements are not allowed on counter tables, use UPDATE instead"),
        ("""INSERT INTO t JSON '{"k": 9, "c": 1}'""", "INSERT statements are not allowed on counter tables, use UPDATE instead"),
        ("UPDATE t SET c = 5 WHERE k = 1", "Cannot set the value of counter column c (counters can only be incremented/decremented, not set)"),
        ("UPDATE t USING TTL 10 SET c = c + 1 WHERE k = 1", "Cannot provide custom TTL for counter updates"),
        ("UPDATE t USING TIMESTAMP 10 SET c = c + 1 WHERE k = 1", "Cannot provide custom timestamp for counter updates"),
        ("UPDATE t SET c = c + null WHERE k = 1", "Invalid null value for counter increment/decrement"),
        ("UPDATE t SET c = c - -9223372036854775808 WHERE k = 1", "The negation of -9223372036854775808 overflows supported counter precision (signed 8 bytes integer)"),
        ("UPDATE t SET c = c + 1 WHERE k = 1 IF c = 1", "Conditions on counters are not supported"),
        ("UPDATE t SET c = c + 1 WHERE k = 1 IF EXISTS", "Conditional updates are not supported on counter tables"),
        ("UPDATE t SET c = c + 'a' WHERE k = 1", 'Invalid STRING constant (a) for "c" of type counter'),
        ("UPDATE t SET c = c + 1.5 WHERE k = 1", 'Invalid FLOAT constant (1.5) for "c" of type counter'),
        ("UPDATE t SET c = c + 1, k = 3 WHERE k = 1", "PRIMARY KEY part k found in SET part"),
        ("UPDATE tc SET c = c + 1 WHERE k = 1", "Some clustering keys are missing: ck"),
        ("UPDATE tc SET s = s + 4, c = c + 1 WHERE k = 1", "Some clustering keys are missing: ck"),
        ("UPDATE plain SET v = v + 1 WHERE k = 1", "for non counter column v"),
        ("UPDATE t SET c = c + 1, d = 1 WHERE k = 1", "Cannot set the value of counter column d (counters can only be incremented/decremented, not set)"),
        ("UPDATE t SET c = c + 1 WHERE k = 1 AND c = 1", "Non PRIMARY KEY columns found in where clause: c"),
        ("DELETE FROM t USING TIMESTAMP 5 WHERE k = 3", "Cannot provide custom timestamp for counter updates"),
        ("DELETE FROM t WHERE k = 3 IF EXISTS", "Conditional updates are not supported on counter tables"),
        ("DELETE FROM t WHERE k = 3 IF c = 1", "Conditions on counters are not supported"),
    ],
)
def test_refused_counter_writes(ctr, query, message):
    refused(ctr, query, message)


@pytest.mark.parametrize(
    "cl, message",
    [
        (ConsistencyLevel.ANY, "Consistency level ANY is not yet supported for counter table t"),
        (ConsistencyLevel.SERIAL, "Counter operations are inherently non-serializable"),
        (ConsistencyLevel.LOCAL_SERIAL, "Counter operations are inherently non-serializable"),
    ],
)
def test_refused_consistency_levels(ctr, cl, message):
    refused(ctr, "UPDATE t SET c = c + 1 WHERE k = 1", message, cl=cl)


@pytest.mark.parametrize(
    "cl",
    [
        ConsistencyLevel.ONE,
        ConsistencyLevel.LOCAL_ONE,
        ConsistencyLevel.QUORUM,
        ConsistencyLevel.LOCAL_QUORUM,
        ConsistencyLevel.EACH_QUORUM,
        ConsistencyLevel.ALL,
    ],
)
def test_writes_and_reads_at_every_level(ctr, cl):
    for _ in range(3):
        ctr.execute(SimpleStatement("UPDATE t SET c = c + 2 WHERE k = 5", consistency_level=cl))
    if cl != ConsistencyLevel.EACH_QUORUM:  # not a read level
        rows = ctr.execute(SimpleStatement("SELECT c FROM t WHERE k = 5", consistency_level=cl))
        assert [r.c for r in rows] == [6]


def test_counter_batches(ctr):
    ctr.execute("BEGIN COUNTER BATCH UPDATE t SET c = c + 1 WHERE k = 1; UPDATE t SET d = d + 1 WHERE k = 2; "
                "UPDATE t SET c = c + 2 WHERE k = 1; APPLY BATCH")
    assert row(ctr, 1) == [(3, None)]
    assert row(ctr, 2) == [(None, 1)]
    ctr.execute("BEGIN UNLOGGED BATCH UPDATE t SET c = c + 1 WHERE k = 1; APPLY BATCH")
    assert row(ctr, 1) == [(4, None)]
    ctr.execute("BEGIN COUNTER BATCH DELETE FROM t WHERE k = 2; UPDATE tc SET c = c + 1 WHERE k = 1 AND ck = 'a'; APPLY BATCH")
    assert row(ctr, 2) == []
    # The protocol's BATCH message, counter type, with prepared statements.
    p = ctr.prepare("UPDATE t SET c = c + ? WHERE k = ?")
    batch = BatchStatement(batch_type=BatchType.COUNTER)
    for k in range(10, 15):
        batch.add(p, (k, k))
    ctr.execute(batch)
    assert sorted((r.k, r.c) for r in ctr.execute("SELECT k, c FROM t WHERE k IN (10, 11, 12, 13, 14)")) == [
        (k, k) for k in range(10, 15)
    ]


@pytest.mark.parametrize(
    "query, message",
    [
        ("BEGIN BATCH UPDATE t SET c = c + 1 WHERE k = 1; APPLY BATCH", "Cannot include a counter statement in a logged batch"),
        ("BEGIN COUNTER BATCH UPDATE plain SET v = 1 WHERE k = 1; APPLY BATCH", "Cannot include non-counter statement in a counter batch"),
        ("BEGIN COUNTER BATCH UPDATE t SET c = c + 1 WHERE k = 1; UPDATE plain SET v = 1 WHERE k = 1; APPLY BATCH", "Cannot include non-counter statement in a counter batch"),
        ("BEGIN COUNTER BATCH UPDATE t SET c = c + 1 WHERE k = 1; DELETE FROM plain WHERE k = 1; APPLY BATCH", "Cannot include non-counter statement in a counter batch"),
        ("BEGIN COUNTER BATCH INSERT INTO plain (k, v) VALUES (1, 1); APPLY BATCH", "Cannot include non-counter statement in a counter batch"),
        ("BEGIN BATCH UPDATE t SET c = c + 1 WHERE k = 1; UPDATE plain SET v = 1 WHERE k = 1; APPLY BATCH", "Counter and non-counter mutations cannot exist in the same batch"),
        ("BEGIN UNLOGGED BATCH UPDATE plain SET v = 1 WHERE k = 1; UPDATE t SET c = c + 1 WHERE k = 1; APPLY BATCH", "Counter and non-counter mutations cannot exist in the same batch"),
        ("BEGIN COUNTER BATCH USING TIMESTAMP 5 UPDATE t SET c = c + 1 WHERE k = 1; APPLY BATCH", "Cannot provide custom timestamp for counter BATCH"),
        ("BEGIN COUNTER BATCH UPDATE t USING TIMESTAMP 5 SET c = c + 1 WHERE k = 1; APPLY BATCH", "Cannot provide custom timestamp for counter updates"),
        ("BEGIN UNLOGGED BATCH USING TIMESTAMP 5 UPDATE t SET c = c + 1 WHERE k = 1; APPLY BATCH", "Cannot provide custom timestamp for a BATCH containing counters"),
        ("BEGIN COUNTER BATCH UPDATE t SET c = c + 1 WHERE k = 1 IF c = 1; APPLY BATCH", "Conditions on counters are not supported"),
    ],
)
def test_refused_batches(ctr, query, message):
    refused(ctr, query, message)
    assert row(ctr, 1) == []


def test_protocol_batch_mixing_counter_and_regular_is_refused(ctr):
    batch = BatchStatement(batch_type=BatchType.COUNTER)
    batch.add("UPDATE t SET c = c + 1 WHERE k = 1")
    batch.add("UPDATE plain SET v = 1 WHERE k = 1")
    refused(ctr, batch, "Cannot include non-counter statement in a counter batch")
    logged = BatchStatement(batch_type=BatchType.LOGGED)
    logged.add("UPDATE t SET c = c + 1 WHERE k = 1")
    refused(ctr, logged, "Cannot include a counter statement in a logged batch")


def test_deleted_counter_column_stays_deleted(ctr):
    """A cell tombstone beats every counter cell whatever the timestamps
    (CASSANDRA-7346): increments after DELETE c are lost."""
    ctr.execute("UPDATE t SET c = c + 3, d = d - 2 WHERE k = 1")
    ctr.execute("DELETE c FROM t WHERE k = 1")
    assert row(ctr, 1) == [(None, -2)]
    ctr.execute("UPDATE t SET c = c + 1 WHERE k = 1")
    assert row(ctr, 1) == [(None, -2)]


def test_counter_incremented_after_its_partition_or_row_was_deleted(ctr):
    """Re-incrementing a deleted counter is not reliable in Cassandra: with its
    counter cache holding the shard (the default), it resumes from the old
    value. Shoal always does."""
    ctr.execute("UPDATE t SET c = c + 1, d = d + 1 WHERE k = 2")
    ctr.execute("DELETE FROM t WHERE k = 2")
    assert row(ctr, 2) == []
    ctr.execute("UPDATE t SET c = c + 5 WHERE k = 2")
    assert row(ctr, 2) == [(6, None)]
    ctr.execute("UPDATE t SET d = d + 5 WHERE k = 2")
    assert row(ctr, 2) == [(6, 6)]
    ctr.execute("UPDATE tc SET c = c + 1 WHERE k = 1 AND ck = 'a'")
    ctr.execute("UPDATE tc SET c = c + 1 WHERE k = 1 AND ck = 'b'")
    ctr.execute("DELETE FROM tc WHERE k = 1 AND ck = 'a'")
    ctr.execute("DELETE FROM tc WHERE k = 1 AND ck > 'a'")
    assert list(ctr.execute("SELECT * FROM tc WHERE k = 1")) == []
    ctr.execute("UPDATE tc SET c = c + 10 WHERE k = 1 AND ck = 'a'")
    ctr.execute("UPDATE tc SET c = c + 10 WHERE k = 1 AND ck = 'b'")
    assert [(r.ck, r.c) for r in ctr.execute("SELECT ck, c FROM tc WHERE k = 1")] == [("a", 11), ("b", 11)]


def test_static_counters(ctr):
    ctr.execute("UPDATE tc SET s = s + 4 WHERE k = 7")
    assert [(r.ck, r.s, r.c) for r in ctr.execute("SELECT ck, s, c FROM tc WHERE k = 7")] == [(None, 4, None)]
    ctr.execute("UPDATE tc SET s = s + 1, c = c + 2 WHERE k = 7 AND ck = 'x'")
    assert [(r.ck, r.s, r.c) for r in ctr.execute("SELECT ck, s, c FROM tc WHERE k = 7")] == [("x", 5, 2)]


def test_syntax_errors(ctr):
    refused(ctr, "DELETE c, d FROM t USING TTL 5 WHERE k = 3", "", exc=SyntaxException)
    refused(ctr, "UPDATE t SET c = d + 1 WHERE k = 1", "Only expressions of the form X = X +<value> are supported.",
            exc=SyntaxException)
    refused(ctr, "UPDATE t SET c = d - 1 WHERE k = 1", "Only expressions of the form X = X -<value> are supported.",
            exc=SyntaxException)


# The cluster test's size: 100 counters, each incremented this many times by
# 20 client threads (SHOAL_COUNTER_INCREMENTS overrides).
COUNTERS = 100
INCREMENTS = int(os.environ.get("SHOAL_COUNTER_INCREMENTS", "1000"))
CLIENTS = 20


def _session(c, hosts, cl):
    profile = ExecutionProfile(
        load_balancing_policy=WhiteListRoundRobinPolicy(hosts) if hosts != c.contact_points else RoundRobinPolicy(),
        consistency_level=cl,
        request_timeout=10,
        # Never retried by the driver: a failed increment is "maybe applied", counted by the test.
        retry_policy=FallthroughRetryPolicy(),
    )
    cluster = Cluster(hosts, port=c.native_port, execution_profiles={EXEC_PROFILE_DEFAULT: profile}, protocol_version=4)
    return cluster, cluster.connect()


@pytest.mark.skipif(bool(EXTERNAL), reason="starts its own cluster of shoal processes")
def test_cluster_counts_exactly_while_a_node_is_killed_and_restarted(tmp_path):
    """3 nodes, RF=3: 20 clients increment 100 counters at QUORUM while one node is killed
    (SIGKILL) and restarted; every final count is exact, apart from increments whose client saw
    an error (timeout, unavailable, lost connection), which may or may not have been applied:
    each counter ends in [acked, acked + maybe], read at ALL from every coordinator."""
    with ShoalCluster(tmp_path / "c", nodes=3, config={"write_request_timeout": "2000ms"}) as c:
        cl, s = _session(c, c.contact_points, ConsistencyLevel.QUORUM)
        try:
            s.execute("CREATE KEYSPACE ctr WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
            s.execute("CREATE TABLE ctr.t (k int PRIMARY KEY, c counter)")
            assert cl.control_connection.wait_for_schema_agreement(wait_time=30)
            update = s.prepare("UPDATE ctr.t SET c = c + 1 WHERE k = ?")
            acked = [0] * COUNTERS
            maybe = [0] * COUNTERS
            errors = {}
            lock = threading.Lock()
            done = [0]
            total = COUNTERS * INCREMENTS

            def client(i):
                # Client i makes every CLIENTS-th increment of the whole sequence.
                for n in range(i, total, CLIENTS):
                    k = n % COUNTERS
                    try:
                        s.execute(update, (k,))
                        ok = True
                    except Exception as e:  # a timeout, Unavailable, a connection lost with the node
                        ok = False
                        err = type(e).__name__
                    with lock:
                        done[0] += 1
                        if ok:
                            acked[k] += 1
                        else:
                            maybe[k] += 1
                            errors[err] = errors.get(err, 0) + 1

            threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
            start = time.monotonic()
            for t in threads:
                t.start()
            wait_until(lambda: done[0] >= total // 4, 120, interval=0.2, what="a quarter of the increments")
            c.stop(3)  # SIGKILL
            # While node 3 is down, a counter write at ALL is refused before anything is sent.
            down = c.address(3)
            wait_until(lambda: _state(c, down) == "DN", 60, interval=0.2, what=f"{down} DN")
            one, s1 = _session(c, [c.address(1)], ConsistencyLevel.ALL)
            try:
                with pytest.raises(Unavailable) as e:
                    s1.execute("UPDATE ctr.t SET c = c + 1 WHERE k = -1")
                assert (e.value.required_replicas, e.value.alive_replicas) == (3, 2)
            finally:
                one.shutdown()
            c.start(3)
            for t in threads:
                t.join(timeout=600)
            assert not any(t.is_alive() for t in threads)
            elapsed = time.monotonic() - start
            print(f"{total} increments by {CLIENTS} clients in {elapsed:.1f}s ({total / elapsed:.0f}/s); "
                  f"maybe applied: {sum(maybe)} {errors}")
            assert sum(maybe) <= total // 10, f"too many failed increments: {sum(maybe)} {errors}"
        finally:
            cl.shutdown()
        # Hints replayed, then every coordinator reads every counter at ALL (read repair merges shards).
        wait_until(lambda: all(c.tool("listpendinghints", node=i)["total_bytes"] == 0 for i in (1, 2, 3)), 60,
                   interval=0.5, what="hints replayed")
        for i in (1, 2, 3):
            cl, s = _session(c, [c.address(i)], ConsistencyLevel.ALL)
            try:
                got = {r.k: r.c for r in s.execute("SELECT k, c FROM ctr.t")}
            finally:
                cl.shutdown()
            bad = [(k, acked[k], maybe[k], got.get(k)) for k in range(COUNTERS)
                   if not acked[k] <= (got.get(k) or 0) <= acked[k] + maybe[k]]
            assert not bad, f"node {i}: (counter, acked, maybe, read) out of bounds: {bad[:10]}"
            assert sum(got.values()) >= sum(acked)
            assert -1 not in got

        # With RF=1 and RF=2 most partitions have replicas other than their coordinator: their
        # updates go to a remote leader (COUNTER_MUTATION_REQ), which replicates them (RF=2).
        cl, s = _session(c, c.contact_points, ConsistencyLevel.QUORUM)
        try:
            for rf in (1, 2):
                s.execute(f"CREATE KEYSPACE ctr{rf} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': {rf}}}")
                s.execute(f"CREATE TABLE ctr{rf}.t (k int PRIMARY KEY, c counter)")
            assert cl.control_connection.wait_for_schema_agreement(wait_time=30)
            updates = [s.prepare(f"UPDATE ctr{rf}.t SET c = c + ? WHERE k = ?") for rf in (1, 2)]

            def small(i):
                for n in range(i, COUNTERS * 20, CLIENTS):
                    for u in updates:
                        s.execute(u, (n % 7 - 3, n % COUNTERS))

            threads = [threading.Thread(target=small, args=(i,)) for i in range(CLIENTS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=300)
            expected = {k: 0 for k in range(COUNTERS)}
            for n in range(COUNTERS * 20):
                expected[n % COUNTERS] += n % 7 - 3
            for rf in (1, 2):
                for i in (1, 2, 3):
                    one, s1 = _session(c, [c.address(i)], ConsistencyLevel.ALL)
                    try:
                        got = {r.k: r.c for r in s1.execute(f"SELECT k, c FROM ctr{rf}.t")}
                    finally:
                        one.shutdown()
                    assert got == {k: v for k, v in expected.items()}, f"RF={rf}, read through node {i}"
        finally:
            cl.shutdown()


def _state(c, address, observer=1):
    """Node `observer`'s nodetool state of `address` (UN, DN, ...)."""
    for dc in c.tool("status", node=observer)["datacenters"]:
        for n in dc["nodes"]:
            if n["address"] == address:
                return n["state"]
    return None
