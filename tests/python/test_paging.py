"""Paging: 10,000 rows in one partition and 10,000 rows over 1,000 partitions,
read 100 rows a page: every row exactly once, in Cassandra's order."""

import pytest
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.query import SimpleStatement

from shoal_harness import all_pages, create_keyspace, unique_keyspace_name

N = 10_000
PARTITIONS = 1_000
PER_PARTITION = N // PARTITIONS
PAGE = 100


def _load(session, stmt, args):
    results = execute_concurrent_with_args(session, stmt, args, concurrency=64, raise_on_first_error=True)
    assert len(results) == len(args)


@pytest.fixture(scope="module")
def paged(cluster, session):
    ks = unique_keyspace_name("paging")
    create_keyspace(session, ks)
    s = cluster.connect(ks)
    s.execute("CREATE TABLE wide (k int, c int, v text, PRIMARY KEY (k, c))")
    s.execute("CREATE TABLE many (k int, c int, v int, PRIMARY KEY (k, c))")
    s.execute("CREATE TABLE single (k int PRIMARY KEY, v int)")
    s.execute("CREATE TABLE grid (k int, c int, v int, PRIMARY KEY (k, c))")
    ins = s.prepare("INSERT INTO wide (k, c, v) VALUES (1, ?, ?)")
    _load(s, ins, [(c, f"v{c}") for c in range(N)])
    ins = s.prepare("INSERT INTO many (k, c, v) VALUES (?, ?, ?)")
    _load(s, ins, [(k, c, k * 100 + c) for k in range(PARTITIONS) for c in range(PER_PARTITION)])
    _load(s, s.prepare("INSERT INTO single (k, v) VALUES (?, ?)"), [(k, k) for k in range(PARTITIONS)])
    _load(s, s.prepare("INSERT INTO grid (k, c, v) VALUES (?, ?, 0)"), [(k, c) for k in range(3) for c in range(3)])
    yield s
    try:
        s.execute(f"DROP KEYSPACE {ks}")
    finally:
        s.shutdown()


def _pages(session, stmt, params=None):
    """All pages of a query, as lists of rows, fetched one page at a time."""
    rs = session.execute(stmt, params)
    pages = [list(rs.current_rows)]
    while rs.has_more_pages:
        assert len(pages) < N + 10, "paging does not terminate"
        rs.fetch_next_page()
        pages.append(list(rs.current_rows))
    return pages


def _check_pages(pages, total):
    sizes = [len(p) for p in pages]
    assert all(s <= PAGE for s in sizes), f"a page holds more than fetch_size={PAGE} rows: {max(sizes)}"
    assert sum(sizes) == total, f"expected {total} rows over all pages, got {sum(sizes)}"
    assert len(pages) >= total // PAGE, f"only {len(pages)} pages for {total} rows at {PAGE} a page (no paging?)"
    return [r for p in pages for r in p]


def test_single_partition_every_row_once_in_clustering_order(paged):
    stmt = SimpleStatement("SELECT c, v FROM wide WHERE k = 1", fetch_size=PAGE)
    rows = _check_pages(_pages(paged, stmt), N)
    cs = [r.c for r in rows]
    assert cs == list(range(N)), f"first disorder at index {next(i for i, c in enumerate(cs) if c != i)}"
    assert all(r.v == f"v{r.c}" for r in rows)


def test_single_partition_descending(paged):
    stmt = SimpleStatement("SELECT c FROM wide WHERE k = 1 ORDER BY c DESC", fetch_size=PAGE)
    cs = [r.c for r in _check_pages(_pages(paged, stmt), N)]
    assert cs == list(range(N - 1, -1, -1)), "ORDER BY c DESC must return every row once, descending"


def test_single_partition_prepared_with_slice(paged):
    sel = paged.prepare("SELECT c FROM wide WHERE k = ? AND c >= ? AND c < ?")
    sel.fetch_size = PAGE
    cs = [r.c for r in _check_pages(_pages(paged, sel, (1, 2_500, 7_777)), 7_777 - 2_500)]
    assert cs == list(range(2_500, 7_777))


def test_single_partition_iteration_follows_pages(paged):
    # Plain iteration over the ResultSet fetches the following pages by itself.
    stmt = SimpleStatement("SELECT c FROM wide WHERE k = 1", fetch_size=PAGE)
    assert [r.c for r in paged.execute(stmt)] == list(range(N))


def test_limit_larger_than_page(paged):
    stmt = SimpleStatement("SELECT c FROM wide WHERE k = 1 LIMIT 250", fetch_size=PAGE)
    cs = [r.c for r in _check_pages(_pages(paged, stmt), 250)]
    assert cs == list(range(250))


def test_resume_from_paging_state(paged):
    stmt = SimpleStatement("SELECT c FROM wide WHERE k = 1", fetch_size=PAGE)
    first = paged.execute(stmt)
    assert [r.c for r in first.current_rows] == list(range(PAGE))
    state = first.paging_state
    assert state, "no paging_state after the first page"
    second = paged.execute(stmt, paging_state=state)
    assert [r.c for r in second.current_rows] == list(range(PAGE, 2 * PAGE)), "resumed page"


def test_many_partitions_every_row_once_in_token_order(paged):
    stmt = SimpleStatement("SELECT token(k) AS t, k, c, v FROM many", fetch_size=PAGE)
    rows = _check_pages(_pages(paged, stmt), N)
    keys = [(r.k, r.c) for r in rows]
    assert len(set(keys)) == N, f"{N - len(set(keys))} duplicate rows"
    assert set(keys) == {(k, c) for k in range(PARTITIONS) for c in range(PER_PARTITION)}
    assert all(r.v == r.k * 100 + r.c for r in rows)
    tokens = [r.t for r in rows]
    assert tokens == sorted(tokens), "a full scan returns partitions in token order"
    # Within a partition, rows are in clustering order and contiguous.
    seen = []
    for r in rows:
        if not seen or seen[-1][0] != r.k:
            assert r.k not in {k for k, _ in seen}, f"partition {r.k} split into two runs"
            seen.append((r.k, []))
        seen[-1][1].append(r.c)
    assert all(cs == list(range(PER_PARTITION)) for _, cs in seen)


def test_many_partitions_prepared_full_scan(paged):
    sel = paged.prepare("SELECT k, c FROM many")
    sel.fetch_size = 333
    got = [(r.k, r.c) for r in paged.execute(sel)]
    assert len(got) == N and len(set(got)) == N


def test_count_star(paged):
    row = paged.execute("SELECT count(*) FROM wide WHERE k = 1").one()
    assert row.count == N, f"count(*) in one partition: {row.count}"
    row = paged.execute(SimpleStatement("SELECT count(*) FROM many", fetch_size=PAGE)).one()
    assert row.count == N, f"count(*) over the table: {row.count}"
    row = paged.execute("SELECT count(*) FROM many WHERE k = 7").one()
    assert row.count == PER_PARTITION


def test_token_range_scan(paged):
    lo, hi = -(2**62), 2**62
    stmt = SimpleStatement(f"SELECT token(k) AS t, k FROM many WHERE token(k) > {lo} AND token(k) <= {hi}", fetch_size=PAGE)
    rows = list(paged.execute(stmt))
    assert rows, "no rows in half of the ring"
    assert all(lo < r.t <= hi for r in rows), "token(k) range restriction"
    tm_from_key = paged.cluster.metadata.token_map.token_class.from_key
    expected = {k for k in range(PARTITIONS) if lo < tm_from_key(k.to_bytes(4, "big")).value <= hi}
    assert {r.k for r in rows} == expected


def test_select_distinct_partition_keys(paged):
    stmt = SimpleStatement("SELECT DISTINCT k FROM many", fetch_size=PAGE)
    ks = [r.k for r in _check_pages(_pages(paged, stmt), PARTITIONS)]
    assert sorted(ks) == list(range(PARTITIONS)), "every partition key exactly once"


def test_in_on_partition_key_with_paging(paged):
    stmt = SimpleStatement("SELECT k, c FROM many WHERE k IN (3, 1, 2)", fetch_size=7)
    got = [(r.k, r.c) for r in paged.execute(stmt)]
    # Cassandra answers the partitions in the key type's order, not the IN list's.
    assert got == [(k, c) for k in (1, 2, 3) for c in range(PER_PARTITION)], got


def test_in_on_partition_key_answers_in_the_key_types_order(ks_session):
    s = ks_session
    s.execute("CREATE TABLE tk (k text PRIMARY KEY, v int)")
    s.execute("CREATE TABLE ik (k int, c int, PRIMARY KEY (k, c))")
    s.execute("CREATE TABLE ck (a int, b text, v int, PRIMARY KEY ((a, b)))")
    for k in ("b", "a", "c", "B"):
        s.execute("INSERT INTO tk (k, v) VALUES (%s, 1)", (k,))
    for k in (100, -5, 2):
        s.execute("INSERT INTO ik (k, c) VALUES (%s, 1)", (k,))
    for a, b in ((2, "x"), (1, "y"), (1, "x")):
        s.execute("INSERT INTO ck (a, b, v) VALUES (%s, %s, 1)", (a, b))
    assert [r.k for r in s.execute("SELECT k FROM tk WHERE k IN ('c', 'a', 'b', 'B', 'a')")] == ["B", "a", "b", "c"]
    assert [r.k for r in s.execute("SELECT k FROM ik WHERE k IN (100, -5, 2)")] == [-5, 2, 100]
    assert [tuple(r) for r in s.execute("SELECT a, b FROM ck WHERE a IN (2, 1) AND b IN ('y', 'x')")] == [
        (1, "x"), (1, "y"), (2, "x")]
    assert [r.k for r in s.execute("SELECT k FROM ik WHERE k IN (100, -5, 2) LIMIT 2")] == [-5, 2]


@pytest.mark.parametrize("fetch", [100, 7, 1, 999, 1000, 1001])
def test_partitions_without_clustering_each_once(paged, fetch):
    # Issue 28: at fetch_size 100 this returned 1,010 rows, at 7 1,166: a page
    # that ended on a partition's last row came back at the next page's start.
    ks = [r.k for r in all_pages(paged, "SELECT k FROM single", fetch, PARTITIONS // fetch + 5)]
    assert len(ks) == PARTITIONS and set(ks) == set(range(PARTITIONS)), f"{len(ks)} rows, {len(set(ks))} distinct"


@pytest.mark.parametrize("fetch", [1, 2, 3, 4, 5, 9, 10])
def test_3x3_at_small_page_sizes_each_once(paged, fetch):
    # Issue 28: fetch_size 2 gave 15 rows, fetch_size 1 never ended.
    rows = [(r.k, r.c) for r in all_pages(paged, "SELECT k, c FROM grid", fetch, 9 // fetch + 5)]
    assert sorted(rows) == [(k, c) for k in range(3) for c in range(3)] and len(rows) == 9, rows
