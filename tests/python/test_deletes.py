"""Deletes at every granularity (cell, row, clustering range, partition),
TRUNCATE, and collection updates and element deletes."""

import pytest


@pytest.fixture
def t(ks_session):
    ks_session.execute(
        "CREATE TABLE t (k int, c int, v int, w text, s set<text>, m map<text, int>, l list<int>, PRIMARY KEY (k, c))"
    )
    return ks_session


def _cs(s, k):
    return [r.c for r in s.execute(f"SELECT c FROM t WHERE k = {k}")]


def _fill(s, k, n=10):
    ins = s.prepare("INSERT INTO t (k, c, v) VALUES (?, ?, ?)")
    for c in range(n):
        s.execute(ins, (k, c, c * 10))


def test_delete_one_column(t):
    t.execute("INSERT INTO t (k, c, v, w) VALUES (1, 1, 10, 'ten')")
    t.execute("DELETE v FROM t WHERE k = 1 AND c = 1")
    row = t.execute("SELECT v, w FROM t WHERE k = 1 AND c = 1").one()
    assert row is not None and row.v is None and row.w == "ten", f"got {row}"
    t.execute("DELETE w FROM t WHERE k = 1 AND c = 1")
    row = t.execute("SELECT * FROM t WHERE k = 1 AND c = 1").one()
    assert row is not None, "an INSERTed row survives the deletion of all its columns (row marker)"
    assert (row.v, row.w) == (None, None)


def test_set_to_null_deletes(t):
    t.execute("INSERT INTO t (k, c, v, w) VALUES (2, 1, 10, 'ten')")
    t.execute("UPDATE t SET w = null WHERE k = 2 AND c = 1")
    assert t.execute("SELECT w FROM t WHERE k = 2 AND c = 1").one().w is None


def test_delete_row(t):
    _fill(t, 3, 5)
    t.execute("DELETE FROM t WHERE k = 3 AND c = 2")
    assert _cs(t, 3) == [0, 1, 3, 4]
    assert t.execute("SELECT * FROM t WHERE k = 3 AND c = 2").one() is None


def test_delete_clustering_range(t):
    _fill(t, 4)
    del_range = t.prepare("DELETE FROM t WHERE k = ? AND c > 3 AND c <= 7")
    t.execute(del_range, (4,))
    assert _cs(t, 4) == [0, 1, 2, 3, 8, 9], "c > 3 AND c <= 7 removed"
    _fill(t, 5)
    t.execute("DELETE FROM t WHERE k = 5 AND c >= 2 AND c < 4")
    t.execute("DELETE FROM t WHERE k = 5 AND c > 8")
    t.execute("DELETE FROM t WHERE k = 5 AND c <= 0")
    assert _cs(t, 5) == [1, 4, 5, 6, 7, 8]


def test_range_delete_then_rewrite_inside_range(t):
    _fill(t, 6)
    t.execute("DELETE FROM t WHERE k = 6 AND c >= 3 AND c <= 6")
    t.execute("INSERT INTO t (k, c, v) VALUES (6, 5, 55)")
    assert _cs(t, 6) == [0, 1, 2, 5, 7, 8, 9]
    assert t.execute("SELECT v FROM t WHERE k = 6 AND c = 5").one().v == 55


def test_range_delete_on_descending_table(ks_session):
    ks_session.execute("CREATE TABLE rd (k int, c int, v int, PRIMARY KEY (k, c)) WITH CLUSTERING ORDER BY (c DESC)")
    for c in range(10):
        ks_session.execute(f"INSERT INTO rd (k, c, v) VALUES (1, {c}, {c})")
    ks_session.execute("DELETE FROM rd WHERE k = 1 AND c > 3 AND c <= 7")
    got = [r.c for r in ks_session.execute("SELECT c FROM rd WHERE k = 1")]
    assert got == [9, 8, 3, 2, 1, 0], f"DESC clustering, range delete: {got}"


def test_delete_partition(t):
    _fill(t, 7)
    _fill(t, 8, 3)
    t.execute("DELETE FROM t WHERE k = 7")
    assert _cs(t, 7) == []
    assert _cs(t, 8) == [0, 1, 2], "other partitions stay"
    t.execute("INSERT INTO t (k, c, v) VALUES (7, 100, 1)")
    assert _cs(t, 7) == [100], "a later write to a deleted partition is visible"


def test_delete_with_in_on_clustering(t):
    _fill(t, 9, 6)
    t.execute("DELETE FROM t WHERE k = 9 AND c IN (1, 3, 5)")
    assert _cs(t, 9) == [0, 2, 4]


def test_truncate(t):
    for k in range(20):
        t.execute(f"INSERT INTO t (k, c, v) VALUES ({k}, 0, {k})")
    t.execute("TRUNCATE t")
    assert list(t.execute("SELECT * FROM t")) == [], "TRUNCATE empties the table"
    t.execute("INSERT INTO t (k, c, v) VALUES (1, 1, 1)")
    assert [(r.k, r.c) for r in t.execute("SELECT k, c FROM t")] == [(1, 1)], "the table works after TRUNCATE"
    t.execute("TRUNCATE TABLE t")
    assert t.execute("SELECT count(*) FROM t").one().count == 0


def test_set_add_remove(t):
    t.execute("INSERT INTO t (k, c, s) VALUES (20, 0, {'a'})")
    t.execute("UPDATE t SET s = s + {'x', 'y'} WHERE k = 20 AND c = 0")
    assert set(t.execute("SELECT s FROM t WHERE k = 20 AND c = 0").one().s) == {"a", "x", "y"}
    t.execute("UPDATE t SET s = s - {'x', 'nope'} WHERE k = 20 AND c = 0")
    assert set(t.execute("SELECT s FROM t WHERE k = 20 AND c = 0").one().s) == {"a", "y"}
    t.execute("UPDATE t SET s = s - {'a', 'y'} WHERE k = 20 AND c = 0")
    assert t.execute("SELECT s FROM t WHERE k = 20 AND c = 0").one().s is None, "removing every element leaves null"
    # Adding to a missing set creates it (no read before write).
    t.execute("UPDATE t SET s = s + {'new'} WHERE k = 21 AND c = 0")
    assert set(t.execute("SELECT s FROM t WHERE k = 21 AND c = 0").one().s) == {"new"}


def test_set_replace_discards_old_elements(t):
    t.execute("INSERT INTO t (k, c, s) VALUES (22, 0, {'a', 'b'})")
    t.execute("UPDATE t SET s = {'c'} WHERE k = 22 AND c = 0")
    assert set(t.execute("SELECT s FROM t WHERE k = 22 AND c = 0").one().s) == {"c"}


def test_map_put_merge_and_delete_key(t):
    t.execute("INSERT INTO t (k, c, m) VALUES (23, 0, {'a': 1, 'b': 2})")
    t.execute("UPDATE t SET m['c'] = 3 WHERE k = 23 AND c = 0")
    t.execute("UPDATE t SET m['a'] = 10 WHERE k = 23 AND c = 0")
    t.execute("UPDATE t SET m = m + {'d': 4} WHERE k = 23 AND c = 0")
    assert dict(t.execute("SELECT m FROM t WHERE k = 23 AND c = 0").one().m) == {"a": 10, "b": 2, "c": 3, "d": 4}
    t.execute("DELETE m['b'] FROM t WHERE k = 23 AND c = 0")
    t.execute("UPDATE t SET m = m - {'d'} WHERE k = 23 AND c = 0")
    assert dict(t.execute("SELECT m FROM t WHERE k = 23 AND c = 0").one().m) == {"a": 10, "c": 3}
    upd = t.prepare("UPDATE t SET m[?] = ? WHERE k = ? AND c = ?")
    t.execute(upd, ("z", 26, 23, 0))
    dele = t.prepare("DELETE m[?] FROM t WHERE k = ? AND c = ?")
    t.execute(dele, ("a", 23, 0))
    assert dict(t.execute("SELECT m FROM t WHERE k = 23 AND c = 0").one().m) == {"c": 3, "z": 26}


def test_list_append_prepend(t):
    t.execute("INSERT INTO t (k, c, l) VALUES (24, 0, [2, 3])")
    t.execute("UPDATE t SET l = l + [4, 5] WHERE k = 24 AND c = 0")
    t.execute("UPDATE t SET l = [0, 1] + l WHERE k = 24 AND c = 0")
    assert t.execute("SELECT l FROM t WHERE k = 24 AND c = 0").one().l == [0, 1, 2, 3, 4, 5]
    t.execute("UPDATE t SET l = l - [3, 5] WHERE k = 24 AND c = 0")
    assert t.execute("SELECT l FROM t WHERE k = 24 AND c = 0").one().l == [0, 1, 2, 4]
    app = t.prepare("UPDATE t SET l = l + ? WHERE k = ? AND c = ?")
    t.execute(app, ([9], 24, 0))
    assert t.execute("SELECT l FROM t WHERE k = 24 AND c = 0").one().l == [0, 1, 2, 4, 9]


def test_list_set_and_delete_by_index(t):
    t.execute("INSERT INTO t (k, c, l) VALUES (25, 0, [10, 20, 30])")
    t.execute("UPDATE t SET l[1] = 21 WHERE k = 25 AND c = 0")
    t.execute("DELETE l[0] FROM t WHERE k = 25 AND c = 0")
    assert t.execute("SELECT l FROM t WHERE k = 25 AND c = 0").one().l == [21, 30]


def test_delete_whole_collection(t):
    t.execute("INSERT INTO t (k, c, s, m, l) VALUES (26, 0, {'a'}, {'a': 1}, [1])")
    t.execute("DELETE s, m, l FROM t WHERE k = 26 AND c = 0")
    row = t.execute("SELECT s, m, l FROM t WHERE k = 26 AND c = 0").one()
    assert row is not None and (row.s, row.m, row.l) == (None, None, None), f"got {row}"
