"""GROUP BY and CAST in SELECT, as Cassandra 5.0.9 has them.

GROUP BY takes a prefix of the primary key (columns restricted by `=` may be
skipped); each group gives one row, aggregates computed over the group and
other selectors taken from the group's first row. LIMIT, PER PARTITION LIMIT
and the page size count groups. CAST converts numbers, times and most
scalars to text, named `cast(x as type)`. Error messages are Cassandra's
(apache/cassandra SelectStatement, Selectable.WithCast)."""

import datetime
import uuid

import pytest
from cassandra import InvalidRequest
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.query import SimpleStatement

from shoal_harness import all_pages

# (a, b, c, d): partition a, clustering (b, c).
ROWS = [
    (1, 1, 1, 10),
    (1, 1, 2, 20),
    (1, 2, 1, 30),
    (2, 1, 1, 40),
    (3, 1, 1, 50),
    (3, 1, 2, 60),
    (3, 2, 1, 70),
    (3, 3, 5, 80),
]

PARTITIONS = 40
GROUPS = 10  # c1 values per partition
PER_GROUP = 3  # c2 values per group
BIG = 1500  # rows in each of the 3 groups of the `big` partition


def _load(session, stmt, args):
    results = execute_concurrent_with_args(session, stmt, args, concurrency=64, raise_on_first_error=True)
    assert len(results) == len(args)


@pytest.fixture(scope="module")
def s(module_ks_session):
    s = module_ks_session
    s.execute("CREATE TABLE t (a int, b int, c int, d int, e text, PRIMARY KEY (a, b, c))")
    s.execute("CREATE TABLE cp (p1 int, p2 int, c int, v int, PRIMARY KEY ((p1, p2), c))")
    s.execute("CREATE TABLE many (k int, c1 int, c2 int, v int, PRIMARY KEY (k, c1, c2))")
    s.execute("CREATE TABLE big (k int, c1 int, c2 int, v int, PRIMARY KEY (k, c1, c2))")
    s.execute("CREATE TABLE st (k int, c int, s int static, v int, PRIMARY KEY (k, c))")
    s.execute(
        "CREATE TABLE ct (k int PRIMARY KEY, f float, db double, de decimal, vi varint, bi bigint,"
        " ts timestamp, dt date, tu timeuuid, bo boolean, ip inet, tx text, u uuid, bl blob)"
    )
    ins = s.prepare("INSERT INTO t (a, b, c, d, e) VALUES (?, ?, ?, ?, ?)")
    _load(s, ins, [(a, b, c, d, f"e{d}") for a, b, c, d in ROWS])
    ins = s.prepare("INSERT INTO many (k, c1, c2, v) VALUES (?, ?, ?, ?)")
    keys = [(k, c1, c2) for k in range(PARTITIONS) for c1 in range(GROUPS) for c2 in range(PER_GROUP)]
    _load(s, ins, [(k, c1, c2, k * 100 + c1 * 10 + c2) for k, c1, c2 in keys])
    ins = s.prepare("INSERT INTO big (k, c1, c2, v) VALUES (0, ?, ?, ?)")
    _load(s, ins, [(c1, c2, c2) for c1 in range(3) for c2 in range(BIG)])
    s.execute("INSERT INTO cp (p1, p2, c, v) VALUES (1, 1, 1, 1)")
    # Partitions 0-9 hold only their static value; 10-19 two rows each.
    _load(s, s.prepare("INSERT INTO st (k, s) VALUES (?, ?)"), [(k, k) for k in range(20)])
    ins = s.prepare("INSERT INTO st (k, c, v) VALUES (?, ?, ?)")
    _load(s, ins, [(k, c, c) for k in range(10, 20) for c in range(2)])
    s.execute(
        "INSERT INTO ct (k, f, db, de, vi, bi, ts, dt, tu, bo, ip, tx, u, bl) VALUES (1, 1.5, 2.75, 1.25, 42,"
        " 300, '2024-03-05 10:00:00+0000', '2024-03-05', 50554d6e-29bb-11e5-b345-feff819cdc9f, true,"
        " '127.0.0.1', 'hello', 01234567-89ab-cdef-0123-456789abcdef, 0x01)"
    )
    return s


def rows(session, query):
    return [tuple(r) for r in session.execute(query)]


def invalid(session, query):
    with pytest.raises(InvalidRequest) as e:
        session.execute(query)
    return str(e.value)


# ---- GROUP BY -------------------------------------------------------------


def test_aggregates_per_group(s):
    assert rows(s, "SELECT a, b, count(*), max(d), min(d), count(d) FROM t WHERE a = 3 GROUP BY a, b") == [
        (3, 1, 2, 60, 50, 2),
        (3, 2, 1, 70, 70, 1),
        (3, 3, 1, 80, 80, 1),
    ]


def test_group_by_partition_key_over_partitions(s):
    got = sorted(rows(s, "SELECT a, count(*), max(d) FROM t GROUP BY a"))
    assert got == [(1, 3, 30), (2, 1, 40), (3, 4, 80)]


def test_group_by_full_primary_key_is_every_row(s):
    got = sorted(rows(s, "SELECT a, b, c, count(*) FROM t GROUP BY a, b, c"))
    assert got == [(a, b, c, 1) for a, b, c, _ in ROWS]


def test_non_aggregates_take_the_first_row_of_the_group(s):
    assert rows(s, "SELECT a, b, c, d, e FROM t WHERE a = 3 GROUP BY a, b") == [
        (3, 1, 1, 50, "e50"),
        (3, 2, 1, 70, "e70"),
        (3, 3, 5, 80, "e80"),
    ]
    assert rows(s, "SELECT * FROM t WHERE a = 1 GROUP BY a") == [(1, 1, 1, 10, "e10")]


def test_columns_restricted_by_eq_can_be_skipped(s):
    assert rows(s, "SELECT b, count(*) FROM t WHERE a = 3 GROUP BY b") == [(1, 2), (2, 1), (3, 1)]
    assert rows(s, "SELECT c, count(*) FROM t WHERE a = 3 AND b = 1 GROUP BY c") == [(1, 1), (2, 1)]


def test_reversed_order_groups_and_first_rows(s):
    assert rows(s, "SELECT b, c, count(*), min(c) FROM t WHERE a = 3 GROUP BY a, b ORDER BY b DESC") == [
        (3, 5, 1, 5),
        (2, 1, 1, 1),
        (1, 2, 2, 1),
    ]


def test_limit_and_per_partition_limit_count_groups(s):
    assert rows(s, "SELECT b, count(*) FROM t WHERE a = 3 GROUP BY a, b LIMIT 2") == [(1, 2), (2, 1)]
    got = sorted(rows(s, "SELECT a, b, count(*) FROM t GROUP BY a, b PER PARTITION LIMIT 1"))
    assert got == [(1, 1, 2), (2, 1, 1), (3, 1, 2)]
    got = rows(s, "SELECT a, b, count(*) FROM t WHERE a = 3 GROUP BY a, b PER PARTITION LIMIT 2 LIMIT 1")
    assert got == [(3, 1, 2)]


def test_in_restriction_groups_each_partition(s):
    got = sorted(rows(s, "SELECT a, b, count(*) FROM t WHERE a IN (1, 3) GROUP BY a, b"))
    assert got == [(1, 1, 2), (1, 2, 1), (3, 1, 2), (3, 2, 1), (3, 3, 1)]


def test_no_rows_no_groups(s):
    assert rows(s, "SELECT a, count(*) FROM t WHERE a = 99 GROUP BY a") == []
    # Without GROUP BY an aggregate query still returns its one row.
    assert rows(s, "SELECT count(*) FROM t WHERE a = 99") == [(0,)]


def test_prepared_group_by_with_bound_limit(s):
    ps = s.prepare("SELECT b, count(*) FROM t WHERE a = ? GROUP BY a, b LIMIT ?")
    assert [tuple(r) for r in s.execute(ps, (3, 2))] == [(1, 2), (2, 1)]


def test_group_by_errors(s):
    assert "Group by is currently only supported on the columns of the PRIMARY KEY, got d" in invalid(
        s, "SELECT a, count(*) FROM t WHERE a = 1 GROUP BY a, d"
    )
    order = "Group by currently only support groups of columns following their declared order in the PRIMARY KEY"
    for q in [
        "SELECT a, count(*) FROM t WHERE a = 1 GROUP BY c",
        "SELECT a, count(*) FROM t WHERE a = 1 GROUP BY a, c, b",
        "SELECT a, count(*) FROM t WHERE a = 1 GROUP BY a, a",
        "SELECT a, count(*) FROM t GROUP BY b",
        "SELECT a, count(*) FROM t GROUP BY a, c",
    ]:
        assert order in invalid(s, q), q
    assert "Group by is not supported on only a part of the partition key" in invalid(
        s, "SELECT p1, count(*) FROM cp GROUP BY p1"
    )
    assert "Grouping on clustering columns is not allowed for SELECT DISTINCT queries" in invalid(
        s, "SELECT DISTINCT a FROM t GROUP BY a, b"
    )
    assert "Undefined column name zz" in invalid(s, "SELECT a FROM t GROUP BY zz")


def test_distinct_group_by_partition_key(s):
    assert sorted(rows(s, "SELECT DISTINCT a FROM t GROUP BY a")) == [(1,), (2,), (3,)]


# ---- GROUP BY with paging -----------------------------------------------


def _expected_many():
    # (k, c1, count(*), min(v)) of every group.
    return {(k, c1, PER_GROUP, k * 100 + c1 * 10) for k in range(PARTITIONS) for c1 in range(GROUPS)}


def _paged(session, query, fetch_size):
    rs = session.execute(SimpleStatement(query, fetch_size=fetch_size))
    pages = [[tuple(r) for r in rs.current_rows]]
    while rs.has_more_pages:
        assert len(pages) < 10_000, "paging does not terminate"
        rs.fetch_next_page()
        pages.append([tuple(r) for r in rs.current_rows])
    return pages


@pytest.mark.parametrize("fetch_size", [1, 3, 7, 100])
def test_paging_counts_groups(s, fetch_size):
    q = "SELECT k, c1, count(*), min(v) FROM many GROUP BY k, c1"
    pages = _paged(s, q, fetch_size)
    assert all(len(p) <= fetch_size for p in pages)
    got = [r for p in pages for r in p]
    assert len(got) == PARTITIONS * GROUPS
    assert len(set(got)) == len(got), "a group was returned twice"
    assert set(got) == _expected_many()
    # The same groups in the same order as unpaged.
    assert got == _paged(s, q, 100_000)[0]
    assert len(pages) >= PARTITIONS * GROUPS // fetch_size


def test_paging_groups_by_partition(s):
    pages = _paged(s, "SELECT k, count(*), max(c2) FROM many GROUP BY k", 3)
    got = [r for p in pages for r in p]
    assert all(len(p) <= 3 for p in pages)
    assert sorted(got) == [(k, GROUPS * PER_GROUP, PER_GROUP - 1) for k in range(PARTITIONS)]


def test_paging_with_limit_and_per_partition_limit(s):
    q = "SELECT k, c1, count(*) FROM many GROUP BY k, c1"
    unpaged = _paged(s, q + " LIMIT 95", 100_000)[0]
    pages = _paged(s, q + " LIMIT 95", 7)
    assert [r for p in pages for r in p] == unpaged
    assert len(unpaged) == 95
    pages = _paged(s, q + " PER PARTITION LIMIT 2", 3)
    got = [r for p in pages for r in p]
    assert all(len(p) <= 3 for p in pages)
    assert sorted(got) == [(k, c1, PER_GROUP) for k in range(PARTITIONS) for c1 in range(2)]
    pages = _paged(s, q + " PER PARTITION LIMIT 2 LIMIT 11", 4)
    got = [r for p in pages for r in p]
    assert len(got) == 11 and all(c1 < 2 for _, c1, _ in got)


def test_paging_inside_one_partition(s):
    q = "SELECT c1, count(*), max(v) FROM many WHERE k = 5 GROUP BY k, c1"
    got = all_pages(s, q, 3, 10)
    assert [tuple(r) for r in got] == [(c1, PER_GROUP, 500 + c1 * 10 + PER_GROUP - 1) for c1 in range(GROUPS)]
    q = "SELECT c1, count(*) FROM many WHERE k = 5 GROUP BY k, c1 ORDER BY c1 DESC"
    got = all_pages(s, q, 4, 10)
    assert [tuple(r) for r in got] == [(c1, PER_GROUP) for c1 in reversed(range(GROUPS))]


def test_groups_larger_than_a_page(s):
    pages = _paged(s, "SELECT c1, count(*), max(v), min(c2) FROM big WHERE k = 0 GROUP BY k, c1", 2)
    got = [r for p in pages for r in p]
    assert got == [(c1, BIG, BIG - 1, 0) for c1 in range(3)]
    assert all(len(p) <= 2 for p in pages)


# ---- CAST -----------------------------------------------------------------


def test_cast_numbers(s):
    rs = s.execute(
        "SELECT CAST(d AS text), CAST(d AS double), cast(d as bigint), CAST(d AS varint)"
        " FROM t WHERE a = 1 AND b = 1 AND c = 1"
    )
    assert rs.column_names == ["cast(d as text)", "cast(d as double)", "cast(d as bigint)", "cast(d as varint)"]
    assert tuple(rs.one()) == ("10", 10.0, 10, 10)
    r = s.execute(
        "SELECT CAST(db AS int), CAST(db AS text), CAST(f AS double), CAST(de AS double), CAST(vi AS int),"
        " CAST(bi AS tinyint), CAST(bi AS smallint), CAST(f AS ascii) FROM ct WHERE k = 1"
    ).one()
    assert tuple(r) == (2, "2.75", 1.5, 1.25, 42, 44, 300, "1.5")


def test_cast_times_and_text(s):
    r = s.execute(
        "SELECT CAST(ts AS date), CAST(ts AS text), CAST(dt AS timestamp), CAST(tu AS timestamp),"
        " CAST(bo AS text), CAST(ip AS text), CAST(u AS text), CAST(tx AS text), CAST(dt AS text) FROM ct WHERE k = 1"
    ).one()
    assert str(r[0]) == "2024-03-05"
    assert r[1] == "2024-03-05T10:00:00.000Z"
    assert r[2] == datetime.datetime(2024, 3, 5)
    assert isinstance(r[3], datetime.datetime) and r[3].year == 2015
    assert r[4:] == ("true", "127.0.0.1", str(uuid.UUID("01234567-89ab-cdef-0123-456789abcdef")), "hello", "2024-03-05")


def test_cast_of_an_aggregate_and_in_groups(s):
    assert rows(s, "SELECT b, CAST(max(d) AS text), CAST(count(*) AS int) FROM t WHERE a = 3 GROUP BY a, b") == [
        (1, "60", 2),
        (2, "70", 1),
        (3, "80", 1),
    ]


def test_cast_nulls_stay_null(s):
    s.execute("INSERT INTO ct (k) VALUES (2)")
    assert tuple(s.execute("SELECT CAST(db AS int), CAST(ts AS text) FROM ct WHERE k = 2").one()) == (None, None)


def test_cast_errors(s):
    # Cassandra 5 resolves CAST(x AS t) as its function system.cast_as_t: the function's errors.
    none = "Invalid call to function system.cast_as_{}, none of its type signatures match (known type signatures: "
    assert none.format("int") in invalid(s, "SELECT CAST(tx AS int) FROM ct")
    assert none.format("text") in invalid(s, "SELECT CAST(bl AS text) FROM ct")
    assert none.format("ascii") in invalid(s, "SELECT CAST(tx AS ascii) FROM ct")
    # A timestamp matches several of cast_as_int's overloads weakly: Cassandra calls that "Ambiguous call to
    # function", Shoal (which has no weak matches) "Invalid call to function".
    assert "call to function system.cast_as_int" in invalid(s, "SELECT CAST(ts AS int) FROM ct")


def test_order_by_with_in_sorts_the_groups(s):
    # Groups are made per partition, then ordered by their first rows (ties in
    # either partition order); LIMIT applies after.
    q = "SELECT a, b, c, count(*) FROM t WHERE a IN (1, 3) GROUP BY a, b ORDER BY b DESC"
    got = rows(s, SimpleStatement(q, fetch_size=None))
    assert [r[1] for r in got] == [3, 2, 2, 1, 1]
    assert sorted(got) == [(1, 1, 2, 2), (1, 2, 1, 1), (3, 1, 2, 2), (3, 2, 1, 1), (3, 3, 5, 1)]
    got = rows(s, SimpleStatement(q + " LIMIT 2", fetch_size=None))
    assert [r[1] for r in got] == [3, 2] and got[0] == (3, 3, 5, 1)
    # Paged, Cassandra refuses ORDER BY with IN.
    assert "Cannot page queries with both ORDER BY and a IN restriction on the partition key" in invalid(s, q)


@pytest.mark.parametrize("fetch_size", [1, 3, 100])
def test_static_only_partitions_are_groups(s, fetch_size):
    pages = _paged(s, "SELECT k, s, count(c), count(s) FROM st GROUP BY k", fetch_size)
    got = [r for p in pages for r in p]
    assert all(len(p) <= fetch_size for p in pages)
    assert sorted(got) == [(k, k, 0, 1) for k in range(10)] + [(k, k, 2, 2) for k in range(10, 20)]
    pages = _paged(s, "SELECT k, c, s, count(v) FROM st GROUP BY k, c", fetch_size)
    got = [r for p in pages for r in p]
    assert sorted(got, key=lambda r: (r[0], -1 if r[1] is None else r[1])) == [
        (k, None, k, 0) for k in range(10)
    ] + [(k, c, k, 1) for k in range(10, 20) for c in range(2)]


@pytest.mark.parametrize("seed", range(6))
def test_random_shapes_page_sizes_and_limits_match_a_model(s, seed):
    """Seeded random tables (uneven partitions and groups, empty ones absent, single-row groups)
    grouped at random page sizes, LIMITs and PER PARTITION LIMITs: every page's groups equal a
    model computed from the ungrouped rows, none twice, none lost, in the unpaged order."""
    import random

    rnd = random.Random(seed)
    table = f"rnd{seed}"
    s.execute(f"CREATE TABLE {table} (k int, c1 int, c2 int, v int, PRIMARY KEY (k, c1, c2))")
    rows = []
    for k in rnd.sample(range(1000), rnd.randint(1, 12)):
        for c1 in rnd.sample(range(50), rnd.randint(1, 6)):
            for c2 in rnd.sample(range(50), rnd.choice([1, 1, 2, 5, 17])):
                rows.append((k, c1, c2, rnd.randint(-1000, 1000)))
    _load(s, s.prepare(f"INSERT INTO {table} (k, c1, c2, v) VALUES (?, ?, ?, ?)"), rows)
    # The model: groups in the table's own order (token order of k, then c1), from the plain rows.
    ordered = [tuple(r) for r in s.execute(SimpleStatement(f"SELECT k, c1, v FROM {table}", fetch_size=100_000))]
    groups = {}
    for k, c1, v in ordered:
        n, lo, hi = groups.get((k, c1), (0, v, v))
        groups[(k, c1)] = (n + 1, min(lo, v), max(hi, v))
    model = [(k, c1, *groups[(k, c1)]) for k, c1 in dict.fromkeys((k, c1) for k, c1, _ in ordered)]
    for _ in range(4):
        fetch = rnd.choice([1, 2, 3, 5, 8, 13, 1000])
        limit = rnd.choice([None, 1, 2, len(model), len(model) + 3, rnd.randint(1, len(model))])
        per_partition = rnd.choice([None, None, 1, 2])
        q = f"SELECT k, c1, count(*), min(v), max(v) FROM {table} GROUP BY k, c1"
        expected = model
        if per_partition is not None:
            q += f" PER PARTITION LIMIT {per_partition}"
            seen, kept = {}, []
            for g in expected:
                seen[g[0]] = seen.get(g[0], 0) + 1
                if seen[g[0]] <= per_partition:
                    kept.append(g)
            expected = kept
        if limit is not None:
            q += f" LIMIT {limit}"
            expected = expected[:limit]
        pages = _paged(s, q, fetch)
        assert all(len(p) <= fetch for p in pages), (q, fetch)
        got = [r for p in pages for r in p]
        assert got == expected, (seed, q, fetch)


@pytest.fixture(scope="module")
def tb(s):
    s.execute("CREATE TABLE tb (k int, t timestamp, v int, s text, PRIMARY KEY (k, t))")
    for k, t, v, x in [(1, "00:10", 1, "a"), (1, "00:50", 2, "b"), (1, "01:20", 3, "c"), (1, "03:00", 4, "d"),
                       (2, "00:00", 5, "e")]:
        s.execute(f"INSERT INTO tb (k, t, v, s) VALUES ({k}, '2024-01-01 {t}:00+0000', {v}, '{x}')")
    return s


def test_group_by_time_buckets(tb):
    h = lambda n: datetime.datetime(2024, 1, 1, n)  # noqa: E731
    assert rows(tb, "SELECT k, floor(t, 1h), count(*), sum(v), max(s) FROM tb GROUP BY k, floor(t, 1h)") == [
        (1, h(0), 2, 3, "b"), (1, h(1), 1, 3, "c"), (1, h(3), 1, 4, "d"), (2, h(0), 1, 5, "e")]
    assert rows(tb, "SELECT k, floor(t, 2h, '2023-12-31 23:00:00'), min(v) FROM tb WHERE k = 1"
                    " GROUP BY k, floor(t, 2h, '2023-12-31 23:00:00')") == [(1, h(0) - datetime.timedelta(hours=1), 1),
                                                                          (1, h(1), 3), (1, h(3), 4)]
    assert rows(tb, "SELECT k, count(*) FROM tb GROUP BY k, floor(t, 1h) LIMIT 2") == [(1, 2), (1, 1)]
    assert rows(tb, "SELECT k, count(*) FROM tb WHERE k = 1 GROUP BY floor(t, 1h)") == [(1, 2), (1, 1), (1, 1)]


def test_group_by_functions_errors(tb):
    assert "Group by functions are only supported on clustering columns, got v" in invalid(
        tb, "SELECT k, count(*) FROM tb GROUP BY k, floor(v, 1h)")
    assert "Group by is currently only supported on the columns of the PRIMARY KEY, got v" in invalid(
        tb, "SELECT k, count(*) FROM tb GROUP BY k, floor(t, 1h), v")
