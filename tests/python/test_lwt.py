"""Lightweight transactions (INSERT IF NOT EXISTS, UPDATE/DELETE IF EXISTS and
IF conditions, conditional BATCH, SERIAL reads), as Cassandra 5.0.9 answers
them: the `[applied]` column, the current values of a write that did not
apply (every column after IF [NOT] EXISTS, the conditioned ones otherwise,
regular before static, with the primary key in a batch), and Cassandra's
error messages. The expectations were taken from Cassandra 5.0.9 and the
module runs against it too (SHOAL_TEST_EXTERNAL).

The cluster test runs concurrent compare-and-set increments on a real 3-node
RF=3 cluster while a node is killed and restarted, and checks the history:
no two successful CAS took the same expected value (no lost update), and
each final value is the successes plus at most the writes whose outcome the
client never learned."""

import random
import threading
import time

import pytest
from cassandra import ConsistencyLevel, InvalidRequest, Unavailable
from cassandra.cluster import Cluster, ExecutionProfile, EXEC_PROFILE_DEFAULT
from cassandra.policies import RetryPolicy
from cassandra.query import BatchStatement, SimpleStatement

from cluster_harness import ShoalCluster
from shoal_harness import EXTERNAL


@pytest.fixture
def s(ks_session):
    ks_session.execute(
        "CREATE TABLE t (k int, c int, v int, w text, s int static, m map<text,int>, l list<int>, "
        "PRIMARY KEY (k, c))"
    )
    return ks_session


def run(session, stmt, *args):
    rs = session.execute(stmt, args) if args else session.execute(stmt)
    return rs.column_names, [tuple(r) for r in rs]


APPLIED = (["[applied]"], [(True,)])
ALL = ["[applied]", "k", "c", "s", "l", "m", "v", "w"]


def test_insert_if_not_exists_shows_the_existing_row(s):
    assert run(s, "INSERT INTO t (k,c,v) VALUES (0,0,1) IF NOT EXISTS") == APPLIED
    assert run(s, "INSERT INTO t (k,c,v) VALUES (0,0,2) IF NOT EXISTS") == (
        ALL,
        [(False, 0, 0, None, None, None, 1, None)],
    )
    assert run(s, "SELECT v FROM t WHERE k=0 AND c=0") == (["v"], [(1,)])


def test_update_conditions_show_the_conditioned_columns(s):
    run(s, "INSERT INTO t (k,c,v) VALUES (0,0,1)")
    assert run(s, "UPDATE t SET v=3 WHERE k=0 AND c=0 IF v=2") == (["[applied]", "v"], [(False, 1)])
    assert run(s, "UPDATE t SET v=3 WHERE k=0 AND c=0 IF v=1") == APPLIED
    assert run(s, "UPDATE t SET v=4 WHERE k=0 AND c=1 IF EXISTS") == (["[applied]"], [(False,)])
    assert run(s, "UPDATE t SET v=4 WHERE k=0 AND c=0 IF EXISTS") == APPLIED
    assert run(s, "UPDATE t SET v=5 WHERE k=0 AND c=0 IF v=4 AND w=null") == APPLIED
    assert run(s, "UPDATE t SET v=5 WHERE k=0 AND c=0 IF v=3 AND w='x'") == (["[applied]", "v", "w"], [(False, 5, None)])
    assert run(s, "UPDATE t SET v=5 WHERE k=0 AND c=0 IF w>'a'") == (["[applied]", "w"], [(False, None)])
    assert run(s, "UPDATE t SET v=5 WHERE k=0 AND c=0 IF v IN (1,2,4)") == (["[applied]", "v"], [(False, 5)])
    # A missing row: no values, and `= null` holds.
    assert run(s, "UPDATE t SET v=6 WHERE k=0 AND c=9 IF v=5") == (["[applied]"], [(False,)])
    assert run(s, "UPDATE t SET v=6 WHERE k=0 AND c=9 IF v=null") == APPLIED
    # Regular columns first, then static ones, each once.
    run(s, "INSERT INTO t (k,c,v,w) VALUES (5,0,1,'a')")
    assert run(s, "UPDATE t SET v=2 WHERE k=5 AND c=0 IF w='a' AND s=3 AND v=2") == (
        ["[applied]", "w", "v", "s"],
        [(False, "a", 1, None)],
    )
    assert run(s, "UPDATE t SET v=2 WHERE k=5 AND c=0 IF v=2 AND v=3") == (["[applied]", "v"], [(False, 1)])
    assert run(s, "UPDATE t SET v=2 WHERE k=5 AND c=0 IF v IN (null, 1)") == APPLIED


def test_delete_if_exists_and_conditions(s):
    run(s, "INSERT INTO t (k,c,v) VALUES (0,0,5)")
    assert run(s, "DELETE FROM t WHERE k=0 AND c=0 IF v=1") == (["[applied]", "v"], [(False, 5)])
    assert run(s, "DELETE v FROM t WHERE k=0 AND c=0 IF v=1") == (["[applied]", "v"], [(False, 5)])
    assert run(s, "DELETE FROM t WHERE k=0 AND c=0 IF EXISTS") == APPLIED
    assert run(s, "DELETE FROM t WHERE k=0 AND c=0 IF EXISTS") == (["[applied]"], [(False,)])
    assert run(s, "SELECT * FROM t WHERE k=0") == (ALL[1:], [])


def test_collection_element_and_static_conditions(s):
    assert run(s, "INSERT INTO t (k,c,v,m) VALUES (1,0,1,{'a':1}) IF NOT EXISTS") == APPLIED
    assert run(s, "UPDATE t SET v=2 WHERE k=1 AND c=0 IF m['a']=1") == APPLIED
    assert run(s, "UPDATE t SET v=3 WHERE k=1 AND c=0 IF m['a']=2") == (["[applied]", "m"], [(False, {"a": 1})])
    assert run(s, "UPDATE t SET v=3 WHERE k=1 AND c=0 IF m={'a':2}") == (["[applied]", "m"], [(False, {"a": 1})])
    assert run(s, "UPDATE t SET v=3 WHERE k=1 AND c=0 IF l[0]=1") == (["[applied]", "l"], [(False, None)])
    assert run(s, "UPDATE t SET m['b']=1 WHERE k=1 AND c=0 IF m['b']=null") == APPLIED
    assert run(s, "UPDATE t SET s=1 WHERE k=1 IF s=null") == APPLIED
    assert run(s, "UPDATE t SET s=2 WHERE k=1 IF s=5") == (["[applied]", "s"], [(False, 1)])
    assert run(s, "UPDATE t SET v=9 WHERE k=1 AND c=0 IF v!=2 AND s=null") == (
        ["[applied]", "v", "s"],
        [(False, 2, 1)],
    )
    assert run(s, "INSERT INTO t (k,s) VALUES (8,1) IF NOT EXISTS") == APPLIED
    assert run(s, "INSERT INTO t (k,s) VALUES (8,1) IF NOT EXISTS") == (
        ALL,
        [(False, 8, None, 1, None, None, None, None)],
    )


def test_conditional_batches(s):
    ok = "BEGIN BATCH INSERT INTO t (k,c,v) VALUES (6,0,1) IF NOT EXISTS; INSERT INTO t (k,c,v) VALUES (6,1,1) IF NOT EXISTS; APPLY BATCH"
    assert run(s, ok) == APPLIED
    again = "BEGIN BATCH INSERT INTO t (k,c,v) VALUES (6,0,1) IF NOT EXISTS; INSERT INTO t (k,c,v) VALUES (6,2,1) IF NOT EXISTS; APPLY BATCH"
    assert run(s, again) == (ALL, [(False, 6, 0, None, None, None, 1, None)])
    failed = "BEGIN BATCH UPDATE t SET v=3 WHERE k=6 AND c=0 IF v=2; UPDATE t SET v=3 WHERE k=6 AND c=1 IF v=1; APPLY BATCH"
    assert run(s, failed) == (["[applied]", "k", "c", "v"], [(False, 6, 0, 1), (False, 6, 1, 1)])
    mixed = (
        "BEGIN BATCH UPDATE t SET v=3 WHERE k=6 AND c=0 IF v=1; UPDATE t SET v=3 WHERE k=6 AND c=1 IF v=1; "
        "INSERT INTO t (k,c,v) VALUES (6,5,5); APPLY BATCH"
    )
    assert run(s, mixed) == APPLIED
    assert run(s, "BEGIN UNLOGGED BATCH UPDATE t SET v=4 WHERE k=6 AND c=0 IF v=3; APPLY BATCH") == APPLIED
    assert run(s, "SELECT c, v FROM t WHERE k=6") == (["c", "v"], [(0, 4), (1, 3), (5, 5)])
    # The protocol's BATCH message, with bind values.
    b = BatchStatement()
    b.add(s.prepare("UPDATE t SET v=? WHERE k=6 AND c=? IF v=?"), (7, 0, 4))
    b.add(s.prepare("UPDATE t SET v=? WHERE k=6 AND c=? IF v=?"), (7, 1, 3))
    assert run(s, b) == APPLIED
    assert run(s, b) == (["[applied]", "k", "c", "v"], [(False, 6, 0, 7), (False, 6, 1, 7)])


@pytest.mark.parametrize(
    "stmt, message",
    [
        ("UPDATE t SET v=5 WHERE k=0 AND c=0 IF v>null", 'Invalid comparison with null for operator ">"'),
        ("INSERT INTO t (k,c,v) VALUES (0,0,1) IF NOT EXISTS USING TIMESTAMP 5", "Cannot provide custom timestamp for conditional updates"),
        ("UPDATE t USING TIMESTAMP 5 SET v=1 WHERE k=0 AND c=0 IF v=1", "Cannot provide custom timestamp for conditional updates"),
        ("UPDATE t SET v=1 WHERE k=0 IF v=1", "Some clustering keys are missing: c"),
        ("UPDATE t SET v=1 WHERE k IN (0,1) AND c=0 IF v=1", "IN on the partition key is not supported with conditional updates"),
        ("UPDATE t SET v=2 WHERE k=1 AND c=0 IF k=1", "PRIMARY KEY column 'k' cannot have IF conditions"),
        ("UPDATE t SET v=2 WHERE k=1 AND c=0 IF c=1", "PRIMARY KEY column 'c' cannot have IF conditions"),
        ("UPDATE t SET v=2 WHERE k=1 AND c=0 IF nope=1", "Undefined column name nope in table"),
        ("UPDATE t SET v=2 WHERE k=5 AND c=0 IF v CONTAINS 1", "Cannot use CONTAINS on non-collection column v"),
        (
            "BEGIN BATCH UPDATE t SET v=3 WHERE k=6 AND c=0 IF v=1; INSERT INTO t (k,c,v) VALUES (7,5,5); APPLY BATCH",
            "Batch with conditions cannot span multiple partitions",
        ),
        (
            "BEGIN BATCH USING TIMESTAMP 3 UPDATE t SET v=4 WHERE k=6 AND c=0 IF v=3; APPLY BATCH",
            "Cannot provide custom timestamp for conditional BATCH",
        ),
        (
            "DELETE FROM t WHERE k=8 IF EXISTS",
            "DELETE statements must restrict all PRIMARY KEY columns with equality relations in order to delete non static columns",
        ),
    ],
)
def test_errors_are_cassandras(s, stmt, message):
    with pytest.raises(InvalidRequest) as e:
        s.execute(stmt)
    assert message in str(e.value)


def test_prepared_conditions_and_serial_reads(s):
    insert = s.prepare("INSERT INTO t (k, c, v) VALUES (?, ?, ?) IF NOT EXISTS")
    update = s.prepare("UPDATE t SET v = ? WHERE k = ? AND c = ? IF v = ?")
    among = s.prepare("UPDATE t SET v = ? WHERE k = ? AND c = ? IF v IN ?")
    assert [c.name for c in update.column_metadata] == ["v", "k", "c", "v"]
    assert s.execute(insert, (3, 0, 10)).one()[0] is True
    assert s.execute(insert, (3, 0, 11)).one()[0] is False
    assert s.execute(update, (12, 3, 0, 10)).one()[0] is True
    assert tuple(s.execute(update, (13, 3, 0, 10)).one()) == (False, 12)
    assert s.execute(among, (14, 3, 0, [1, 12])).one()[0] is True
    serial = SimpleStatement("SELECT v FROM t WHERE k = 3 AND c = 0", consistency_level=ConsistencyLevel.SERIAL)
    assert s.execute(serial).one().v == 14
    local = SimpleStatement("SELECT v FROM t WHERE k = 3", consistency_level=ConsistencyLevel.LOCAL_SERIAL)
    assert [r.v for r in s.execute(local)] == [14]
    # The serial level of the write itself.
    st = SimpleStatement("UPDATE t SET v = 15 WHERE k = 3 AND c = 0 IF v = 14", serial_consistency_level=ConsistencyLevel.LOCAL_SERIAL)
    assert s.execute(st).one()[0] is True
    bad = SimpleStatement("UPDATE t SET v = 16 WHERE k = 3 AND c = 0 IF v = 15", consistency_level=ConsistencyLevel.SERIAL)
    with pytest.raises(InvalidRequest, match="SERIAL is not supported as conditional update commit consistency"):
        s.execute(bad)


def test_concurrent_compare_and_set_loses_no_update(s):
    s.execute("INSERT INTO t (k, c, v) VALUES (42, 0, 0)")
    update = s.prepare("UPDATE t SET v = ? WHERE k = 42 AND c = 0 IF v = ?")
    read = s.prepare("SELECT v FROM t WHERE k = 42 AND c = 0")
    read.consistency_level = ConsistencyLevel.SERIAL
    won = []
    lock = threading.Lock()

    def worker():
        for _ in range(15):
            while True:
                v = s.execute(read).one().v
                if s.execute(update, (v + 1, v)).one()[0]:
                    with lock:
                        won.append(v)
                    break

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(won) == list(range(90)), "each expected value was won exactly once"
    assert s.execute("SELECT v FROM t WHERE k = 42 AND c = 0").one().v == 90


def linearizable(ops):
    """Wing & Gong's search with memoization (as crates/sim/src/linearizable.rs) over one
    register's operations: (call, ret, kind, a, b) with kind "read" (a = value seen), "cas"
    (applied: a = expected, b = new), "refused" (a = expected, b = value the condition saw) or
    "unknown" (a = expected, b = new; ret = None: it may apply at any later instant, or never).
    True when some order of the operations, each between its call and its return, explains
    every answer starting from the value 0."""
    inf = float("inf")
    ops = sorted(ops, key=lambda o: o[0])
    n = len(ops)
    rets = [o[1] if o[1] is not None else inf for o in ops]
    by_ret = sorted(range(n), key=lambda i: rets[i])
    ret_pos = {i: p for p, i in enumerate(by_ret)}
    required = sum(1 for o in ops if o[1] is not None)

    def step(op, state):
        kind, a, b = op[2], op[3], op[4]
        if kind == "read":
            return state if a == state else None
        if kind in ("cas", "unknown"):
            return b if a == state else None
        return state if (b == state and a != state) else None  # refused

    placed = [False] * n
    mask, seen, stack = 0, set(), []
    state, done = 0, 0
    first = 0  # no operation before `first` (in call order) is unplaced
    first_ret = 0  # no operation before `first_ret` in `by_ret` is unplaced
    start = 0
    while True:
        if done == required:
            return True
        while first < n and placed[first]:
            first += 1
        while first_ret < n and placed[by_ret[first_ret]]:
            first_ret += 1
        horizon = rets[by_ret[first_ret]] if first_ret < n else inf
        advanced = False
        i = max(start, first)
        while i < n and ops[i][0] <= horizon:
            if not placed[i]:
                after = step(ops[i], state)
                if after is not None and (mask | 1 << i, after) not in seen:
                    placed[i] = True
                    mask |= 1 << i
                    seen.add((mask, after))
                    stack.append((state, i))
                    state = after
                    done += ops[i][1] is not None
                    start, advanced = 0, True
                    break
            i += 1
        if advanced:
            continue
        if not stack:
            return False
        state, last = stack.pop()
        placed[last] = False
        mask &= ~(1 << last)
        done -= ops[last][1] is not None
        first = min(first, last)
        first_ret = min(first_ret, ret_pos[last])
        start = last + 1


def test_the_checker_rejects_a_lost_update_and_accepts_a_late_timeout():
    assert linearizable([(1, 2, "cas", 0, 1), (3, 4, "read", 1, None)])
    assert not linearizable([(1, 2, "cas", 0, 1), (3, 6, "cas", 1, 2), (4, 7, "cas", 1, 3)])
    assert not linearizable([(1, 2, "cas", 0, 1), (3, 4, "read", 0, None)])
    assert linearizable([(1, 2, "cas", 0, 1), (3, None, "unknown", 1, 2), (4, 5, "read", 1, None), (6, 7, "read", 2, None)])
    assert not linearizable([(1, 2, "cas", 0, 1), (3, None, "unknown", 1, 2), (4, 5, "read", 2, None), (6, 7, "read", 1, None)])
    assert linearizable([(1, 2, "refused", 5, 0)])
    assert not linearizable([(1, 2, "refused", 5, 7)])


class _NoRetry(RetryPolicy):
    def on_write_timeout(self, *args, **kwargs):
        return self.RETHROW, None

    def on_read_timeout(self, *args, **kwargs):
        return self.RETHROW, None

    def on_unavailable(self, *args, **kwargs):
        return self.RETHROW, None

    def on_request_error(self, *args, **kwargs):
        # A CAS whose coordinator died may have been applied: retrying it
        # elsewhere would answer "not applied" for a write that was made.
        return self.RETHROW, None


@pytest.mark.skipif(bool(EXTERNAL), reason="starts its own 3-node Shoal cluster")
def test_cas_on_three_nodes_with_a_node_killed_keeps_every_update(tmp_path):
    """Concurrent CAS increments and SERIAL reads on 5 keys at SERIAL / QUORUM
    while node 3 is killed and restarted: every expected value is won at most
    once, each final value is the number of successes plus at most the number
    of writes whose outcome was unknown (a timeout: Paxos may still have chosen
    them), and each key's history (real-time call and return of every read and
    CAS) is linearizable (`linearizable`)."""
    keys = 5
    with ShoalCluster(tmp_path / "c", nodes=3) as c:
        profile = ExecutionProfile(consistency_level=ConsistencyLevel.QUORUM, retry_policy=_NoRetry(), request_timeout=10)
        cluster = Cluster(c.contact_points, port=c.native_port, execution_profiles={EXEC_PROFILE_DEFAULT: profile})
        session = cluster.connect()
        session.execute(
            "CREATE KEYSPACE lwt WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}"
        )
        session.execute("CREATE TABLE lwt.r (k int PRIMARY KEY, v int)")
        for k in range(keys):
            session.execute("INSERT INTO lwt.r (k, v) VALUES (%s, 0)", (k,))
        update = session.prepare("UPDATE lwt.r SET v = ? WHERE k = ? IF v = ?")
        read = session.prepare("SELECT v FROM lwt.r WHERE k = ?")
        read.consistency_level = ConsistencyLevel.SERIAL
        won = {k: [] for k in range(keys)}
        unknown = {k: 0 for k in range(keys)}
        history = {k: [] for k in range(keys)}
        lock = threading.Lock()
        now = time.monotonic_ns
        stop = time.monotonic() + 25

        def worker(seed):
            rng = random.Random(seed)
            while time.monotonic() < stop:
                k = rng.randrange(keys)
                try:
                    call = now()
                    v = session.execute(read, (k,)).one().v
                    with lock:
                        history[k].append((call, now(), "read", v, None))
                except Exception:
                    time.sleep(0.05)
                    continue
                try:
                    call = now()
                    row = session.execute(update, (v + 1, k, v)).one()
                    ret = now()
                except Exception as e:
                    if isinstance(e, (Unavailable, InvalidRequest)):
                        continue
                    with lock:
                        unknown[k] += 1
                        history[k].append((call, None, "unknown", v, v + 1))
                    continue
                with lock:
                    if row[0]:
                        won[k].append(v)
                        history[k].append((call, ret, "cas", v, v + 1))
                    else:
                        history[k].append((call, ret, "refused", v, row[1]))

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        time.sleep(6)
        c.stop(3)
        time.sleep(6)
        c.start(3)
        for t in threads:
            t.join()
        total = sum(len(w) for w in won.values())
        assert total > 50, f"too few successful CAS: {total}"
        final = {}
        for k in range(keys):
            assert len(set(won[k])) == len(won[k]), f"key {k}: an expected value was won twice: {sorted(won[k])}"
            final[k] = session.execute(read, (k,)).one().v
            assert len(won[k]) <= final[k] <= len(won[k]) + unknown[k], (k, final[k], len(won[k]), unknown[k])
            print(f"key {k}: {len(history[k])} operations, {len(won[k])} applied, {unknown[k]} unknown")
            assert linearizable(history[k]), f"key {k}: its {len(history[k])} operations have no linearization"
        cluster.shutdown()
