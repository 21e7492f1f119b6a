"""Cell timestamps and TTLs: last-write-wins exactly as Cassandra does it,
tombstones win ties, TTL expiry, ttl() and writetime()."""

import time

import pytest

from shoal_harness import wait_until


@pytest.fixture
def t(ks_session):
    ks_session.execute("CREATE TABLE t (k int, c int, v text, w int, PRIMARY KEY (k, c))")
    return ks_session


def _row(s, k, c=1):
    return s.execute(f"SELECT v, w FROM t WHERE k = {k} AND c = {c}").one()


def test_ttl_1_disappears(t):
    t.execute("INSERT INTO t (k, c, v) VALUES (1, 1, 'short') USING TTL 1")
    start = time.monotonic()
    wait_until(lambda: t.execute("SELECT * FROM t WHERE k = 1").one() is None, timeout=10, interval=0.2,
               what="a row written with TTL 1 to expire")
    assert time.monotonic() - start < 10


def test_ttl_on_some_columns_leaves_the_rest(t):
    t.execute("INSERT INTO t (k, c, v, w) VALUES (2, 1, 'expires', 5) USING TTL 1")
    t.execute("UPDATE t SET w = 6 WHERE k = 2 AND c = 1")
    wait_until(lambda: _row(t, 2).v is None, timeout=10, interval=0.2, what="column v to expire")
    row = _row(t, 2)
    assert row is not None and row.w == 6, f"the column written without TTL stays: {row}"


def test_update_with_ttl_has_no_row_marker(t):
    t.execute("UPDATE t USING TTL 2 SET v = 'upd' WHERE k = 3 AND c = 1")
    assert _row(t, 3) is not None
    wait_until(lambda: _row(t, 3) is None, timeout=10, interval=0.2,
               what="a row created by UPDATE with TTL to disappear with its only column")


def test_ttl_and_writetime_functions(t):
    t.execute("INSERT INTO t (k, c, v, w) VALUES (4, 1, 'x', 1) USING TTL 1000 AND TIMESTAMP 1234567")
    row = t.execute("SELECT ttl(v) AS tv, ttl(w) AS tw, writetime(v) AS wv, writetime(w) AS ww FROM t WHERE k = 4 AND c = 1").one()
    assert 990 <= row.tv <= 1000 and 990 <= row.tw <= 1000, f"ttl(): {row}"
    assert row.wv == 1234567 and row.ww == 1234567, f"writetime(): {row}"
    t.execute("INSERT INTO t (k, c, v) VALUES (5, 1, 'no ttl')")
    row = t.execute("SELECT ttl(v) AS tv, writetime(v) AS wv, ttl(w) AS tw, writetime(w) AS ww FROM t WHERE k = 5 AND c = 1").one()
    assert row.tv is None, f"ttl() of a cell without TTL is null, got {row.tv}"
    now_us = time.time() * 1e6
    assert abs(row.wv - now_us) < 60e6, f"default writetime {row.wv} should be 'now' in microseconds ({now_us:.0f})"
    assert row.tw is None and row.ww is None, "ttl()/writetime() of a null cell are null"


def test_ttl_0_means_no_ttl(t):
    t.execute("INSERT INTO t (k, c, v) VALUES (6, 1, 'zero') USING TTL 0")
    row = t.execute("SELECT v, ttl(v) AS tv FROM t WHERE k = 6 AND c = 1").one()
    assert row.v == "zero" and row.tv is None, f"got {row}"


def test_default_time_to_live(ks_session):
    ks_session.execute("CREATE TABLE d (k int PRIMARY KEY, v int) WITH default_time_to_live = 500")
    ks_session.execute("INSERT INTO d (k, v) VALUES (1, 1)")
    ks_session.execute("INSERT INTO d (k, v) VALUES (2, 2) USING TTL 50")
    rows = {r.k: r.tv for r in ks_session.execute("SELECT k, ttl(v) AS tv FROM d")}
    assert 490 <= rows[1] <= 500, f"table default TTL: {rows[1]}"
    assert 40 <= rows[2] <= 50, f"explicit TTL overrides the default: {rows[2]}"


def test_older_timestamp_never_overwrites(t):
    t.execute("INSERT INTO t (k, c, v) VALUES (10, 1, 'new') USING TIMESTAMP 2000")
    t.execute("INSERT INTO t (k, c, v) VALUES (10, 1, 'old') USING TIMESTAMP 1000")
    t.execute("UPDATE t USING TIMESTAMP 1999 SET v = 'older' WHERE k = 10 AND c = 1")
    row = t.execute("SELECT v, writetime(v) AS wt FROM t WHERE k = 10 AND c = 1").one()
    assert (row.v, row.wt) == ("new", 2000), f"older writes must lose: {row}"
    t.execute("UPDATE t USING TIMESTAMP 2001 SET v = 'newest' WHERE k = 10 AND c = 1")
    assert _row(t, 10).v == "newest"


def test_equal_timestamps_highest_value_wins(t):
    # Cassandra's tie-break for two live cells with the same timestamp: the
    # greater value (compared as bytes) wins, whatever the arrival order.
    t.execute("INSERT INTO t (k, c, v) VALUES (11, 1, 'b') USING TIMESTAMP 3000")
    t.execute("INSERT INTO t (k, c, v) VALUES (11, 1, 'a') USING TIMESTAMP 3000")
    t.execute("INSERT INTO t (k, c, v) VALUES (11, 2, 'a') USING TIMESTAMP 3000")
    t.execute("INSERT INTO t (k, c, v) VALUES (11, 2, 'b') USING TIMESTAMP 3000")
    assert _row(t, 11, 1).v == "b" and _row(t, 11, 2).v == "b", "equal timestamps: the greater value wins"


def test_delete_at_same_timestamp_wins(t):
    t.execute("INSERT INTO t (k, c, v) VALUES (12, 1, 'x') USING TIMESTAMP 5000")
    t.execute("DELETE FROM t USING TIMESTAMP 5000 WHERE k = 12 AND c = 1")
    assert _row(t, 12) is None, "a row delete at the write's timestamp wins"
    # Same, deleting only the cell, and in the other order.
    t.execute("INSERT INTO t (k, c, v, w) VALUES (12, 2, 'x', 1) USING TIMESTAMP 5000")
    t.execute("DELETE v FROM t USING TIMESTAMP 5000 WHERE k = 12 AND c = 2")
    row = _row(t, 12, 2)
    assert row is not None and row.v is None and row.w == 1, f"cell delete at the same timestamp wins: {row}"
    t.execute("DELETE FROM t USING TIMESTAMP 6000 WHERE k = 12 AND c = 3")
    t.execute("INSERT INTO t (k, c, v) VALUES (12, 3, 'late') USING TIMESTAMP 6000")
    assert _row(t, 12, 3) is None, "a write at the tombstone's timestamp stays deleted, whatever the order"


def test_write_below_delete_timestamp_stays_deleted(t):
    t.execute("INSERT INTO t (k, c, v) VALUES (13, 1, 'x') USING TIMESTAMP 1000")
    t.execute("DELETE FROM t USING TIMESTAMP 5000 WHERE k = 13 AND c = 1")
    t.execute("INSERT INTO t (k, c, v) VALUES (13, 1, 'resurrect?') USING TIMESTAMP 4000")
    assert _row(t, 13) is None, "a write older than the row tombstone stays deleted"
    t.execute("UPDATE t USING TIMESTAMP 4999 SET v = 'upd' WHERE k = 13 AND c = 1")
    assert _row(t, 13) is None
    t.execute("INSERT INTO t (k, c, v) VALUES (13, 1, 'newer') USING TIMESTAMP 5001")
    assert _row(t, 13).v == "newer", "a write newer than the tombstone is visible"


def test_partition_tombstone_shadows_older_writes(t):
    for c in range(3):
        t.execute(f"INSERT INTO t (k, c, v) VALUES (14, {c}, 'x') USING TIMESTAMP 100")
    t.execute("DELETE FROM t USING TIMESTAMP 200 WHERE k = 14")
    t.execute("INSERT INTO t (k, c, v) VALUES (14, 5, 'old') USING TIMESTAMP 150")
    t.execute("INSERT INTO t (k, c, v) VALUES (14, 6, 'new') USING TIMESTAMP 250")
    got = [(r.c, r.v) for r in t.execute("SELECT c, v FROM t WHERE k = 14")]
    assert got == [(6, "new")], f"partition tombstone at 200: {got}"


def test_range_tombstone_timestamps(t):
    for c in range(10):
        t.execute(f"INSERT INTO t (k, c, v) VALUES (15, {c}, 'x') USING TIMESTAMP 100")
    t.execute("DELETE FROM t USING TIMESTAMP 200 WHERE k = 15 AND c >= 2 AND c < 8")
    t.execute("INSERT INTO t (k, c, v) VALUES (15, 3, 'older') USING TIMESTAMP 199")
    t.execute("INSERT INTO t (k, c, v) VALUES (15, 4, 'newer') USING TIMESTAMP 201")
    got = [(r.c, r.v) for r in t.execute("SELECT c, v FROM t WHERE k = 15")]
    assert got == [(0, "x"), (1, "x"), (4, "newer"), (8, "x"), (9, "x")], f"range tombstone at 200: {got}"
