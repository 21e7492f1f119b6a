"""Secondary indexes (CREATE INDEX / CREATE CUSTOM INDEX ... USING 'sai',
DROP INDEX), as Cassandra 5.0.9 has them: DDL forms and errors,
system_schema.indexes rows, DESCRIBE, and indexed queries (equality,
CONTAINS, CONTAINS KEY, m[k] = v, clustering and partition key components,
static columns) with paging, LIMIT and the ALLOW FILTERING rules; writes,
deletes and TTL expiry reflected. Messages checked against Cassandra 5.0.9."""

import time

import pytest
from cassandra import InvalidRequest, ReadFailure
from cassandra.protocol import ConfigurationException
from cassandra.query import SimpleStatement

from shoal_harness import all_pages

FILTERING = (
    "Cannot execute this query as it might involve data filtering and thus may have unpredictable performance. "
    "If you want to execute this query despite the performance unpredictability, use ALLOW FILTERING"
)

TABLE = (
    "CREATE TABLE t (k int, k2 int, c int, v int, s int static, l list<int>, st set<text>, "
    "m map<text, int>, f frozen<list<int>>, w int, PRIMARY KEY ((k, k2), c))"
)


def rows_of(session, query, *args):
    """Rows of a query, retried while an index is still building."""
    deadline = time.time() + 20
    while True:
        try:
            return list(session.execute(query, args) if args else session.execute(query))
        except Exception as e:  # noqa: BLE001 - a building index fails the query
            building = isinstance(e, ReadFailure) and ("INDEX_NOT_AVAILABLE" in str(e) or "UNKNOWN" in str(e))
            if not building or time.time() > deadline:
                raise
            time.sleep(0.2)


def keys(rows):
    return sorted((r.k, r.k2, r.c) for r in rows)


def invalid(session, query, message):
    with pytest.raises(InvalidRequest) as e:
        session.execute(query)
    assert message in str(e.value), str(e.value)


@pytest.fixture
def t(ks_session):
    s = ks_session
    s.execute(TABLE)
    return s


def test_ddl_forms_names_and_system_schema(t, keyspace):
    s = t
    for stmt in [
        "CREATE INDEX ON t (v)",
        "CREATE INDEX ON t (c)",
        "CREATE INDEX ON t (k)",
        "CREATE INDEX ON t (s)",
        "CREATE INDEX ON t (l)",
        "CREATE INDEX ON t (keys(m))",
        "CREATE INDEX ON t (values(m))",
        "CREATE INDEX ON t (entries(m))",
        "CREATE INDEX ON t (st)",
        "CREATE INDEX ON t (full(f))",
        "CREATE CUSTOM INDEX ON t (w) USING 'StorageAttachedIndex'",
        "CREATE CUSTOM INDEX ON t (k2) USING 'sai'",
        "CREATE INDEX IF NOT EXISTS ON t (v)",
    ]:
        s.execute(stmt)
    rows = list(s.execute(f"SELECT * FROM system_schema.indexes WHERE keyspace_name = '{keyspace}'"))
    got = {r.index_name: (r.table_name, r.kind, dict(r.options)) for r in rows}
    assert got == {
        "t_c_idx": ("t", "COMPOSITES", {"target": "c"}),
        "t_f_idx": ("t", "COMPOSITES", {"target": "full(f)"}),
        "t_k2_idx": ("t", "CUSTOM", {"class_name": "sai", "target": "k2"}),
        "t_k_idx": ("t", "COMPOSITES", {"target": "k"}),
        "t_l_idx": ("t", "COMPOSITES", {"target": "values(l)"}),
        "t_m_idx": ("t", "COMPOSITES", {"target": "keys(m)"}),
        "t_m_idx_1": ("t", "COMPOSITES", {"target": "values(m)"}),
        "t_m_idx_2": ("t", "COMPOSITES", {"target": "entries(m)"}),
        "t_s_idx": ("t", "COMPOSITES", {"target": "s"}),
        "t_st_idx": ("t", "COMPOSITES", {"target": "values(st)"}),
        "t_v_idx": ("t", "COMPOSITES", {"target": "v"}),
        "t_w_idx": ("t", "CUSTOM", {"class_name": "StorageAttachedIndex", "target": "w"}),
    }
    assert [r.index_name for r in rows] == sorted(got)
    d = list(s.execute(f"DESCRIBE INDEX {keyspace}.t_m_idx_2"))
    assert [(r.type, r.name, r.create_statement) for r in d] == [
        ("index", "t_m_idx_2", f"CREATE INDEX t_m_idx_2 ON {keyspace}.t (entries(m));")
    ]
    d = list(s.execute(f"DESCRIBE INDEX {keyspace}.t_k2_idx"))
    assert d[0].create_statement == f"CREATE CUSTOM INDEX t_k2_idx ON {keyspace}.t (k2) USING 'sai';"
    table = list(s.execute(f"DESCRIBE TABLE {keyspace}.t"))
    assert [r.type for r in table] == ["table"] + ["index"] * 12
    assert [r.name for r in table[1:]] == sorted(got)
    s.execute(f"DROP INDEX {keyspace}.t_v_idx")
    s.execute(f"DROP INDEX IF EXISTS {keyspace}.t_v_idx")
    invalid(s, f"DROP INDEX {keyspace}.t_v_idx", f"Index '{keyspace}.t_v_idx' doesn't exist'")
    s.execute('CREATE INDEX "CamelIdx" ON t (v)')
    d = list(s.execute(f'DESCRIBE INDEX {keyspace}."CamelIdx"'))
    assert (d[0].name, d[0].create_statement) == ('"CamelIdx"', f'CREATE INDEX "CamelIdx" ON {keyspace}.t (v);')


def test_ddl_errors(t, keyspace):
    s = t
    s.execute("CREATE INDEX ON t (v)")
    invalid(s, "CREATE INDEX ON t (v)", "Index t_v_idx_1 is a duplicate of existing index t_v_idx")
    invalid(s, "CREATE INDEX t_v_idx ON t (c)", "Index 't_v_idx' already exists")
    invalid(
        s,
        "CREATE INDEX ON t (f)",
        "Cannot create values() index on frozen column f. Frozen collections are immutable and must be fully "
        "indexed by using the 'full(f)' modifier",
    )
    invalid(s, "CREATE INDEX ON t (full(l))", "full() indexes can only be created on frozen collections")
    invalid(s, "CREATE INDEX ON t (keys(l))", "Cannot create index on keys of column l with non-map type")
    invalid(s, "CREATE INDEX ON t (entries(l))", "Cannot create index on entries of column l with non-map type")
    invalid(s, "CREATE INDEX ON t (keys(v))", "Cannot create keys() index on v. Non-collection columns only support simple indexes")
    invalid(s, "CREATE INDEX ON t (nope)", f"Undefined column name nope in table {keyspace}.t")
    invalid(s, "CREATE INDEX ON nope (v)", "Table 'nope' doesn't exist")
    invalid(s, "CREATE INDEX ON nope_ks.t (v)", "Keyspace 'nope_ks' doesn't exist")
    s.execute("CREATE CUSTOM INDEX ON t (w) USING 'sai'")
    invalid(s, "CREATE CUSTOM INDEX ON t (w) USING 'StorageAttachedIndex'", "Cannot create more than one storage-attached index on the same column: w")
    with pytest.raises(ConfigurationException) as e:
        s.execute("CREATE CUSTOM INDEX ON t (w) USING 'foo'")
    assert "Unable to find custom indexer class 'foo'" in str(e.value)
    invalid(
        s,
        "CREATE CUSTOM INDEX ON t (w) USING 'org.apache.cassandra.index.sasi.SASIIndex'",
        "SASI indexes are disabled. Enable in cassandra.yaml to use.",
    )
    try:
        s.execute("CREATE TABLE cn (k int PRIMARY KEY, n counter)")
    except InvalidRequest:
        pass  # a build without counter columns
    else:
        invalid(s, "CREATE INDEX ON cn (n)", "Secondary indexes on counter tables aren't supported")
    s.execute("CREATE TABLE single (k int PRIMARY KEY, v int)")
    invalid(s, "CREATE INDEX ON single (k)", "Cannot create secondary index on the only partition key column k")
    s.execute("CREATE INDEX myi ON single (v)")
    invalid(s, "ALTER TABLE single DROP v", "Cannot drop column v because it has dependent secondary indexes (myi)")
    invalid(s, "CREATE INDEX myi ON t (w)", "Index 'myi' already exists")
    s.execute("CREATE INDEX IF NOT EXISTS myi ON t (w)")


@pytest.fixture
def loaded(t):
    s = t
    s.execute("INSERT INTO t (k, k2, c, v, s, l, st, m, f) VALUES (1, 1, 1, 10, 5, [1, 2], {'a', 'b'}, {'x': 1, 'y': 2}, [7, 8])")
    s.execute("INSERT INTO t (k, k2, c, v) VALUES (1, 1, 2, 20)")
    s.execute("INSERT INTO t (k, k2, c, v) VALUES (2, 1, 1, 10)")
    for stmt in [
        "CREATE INDEX ON t (v)",
        "CREATE INDEX ON t (c)",
        "CREATE INDEX ON t (k)",
        "CREATE INDEX ON t (s)",
        "CREATE INDEX ON t (l)",
        "CREATE INDEX ON t (keys(m))",
        "CREATE INDEX ON t (values(m))",
        "CREATE INDEX ON t (entries(m))",
        "CREATE INDEX ON t (st)",
        "CREATE INDEX ON t (full(f))",
        "CREATE CUSTOM INDEX ON t (k2) USING 'sai'",
    ]:
        s.execute(stmt)
    return s


@pytest.mark.parametrize(
    "where,expected",
    [
        ("v = 10", [(1, 1, 1), (2, 1, 1)]),
        ("l CONTAINS 1", [(1, 1, 1)]),
        ("st CONTAINS 'a'", [(1, 1, 1)]),
        ("m CONTAINS KEY 'x'", [(1, 1, 1)]),
        ("m CONTAINS 1", [(1, 1, 1)]),
        ("m['x'] = 1", [(1, 1, 1)]),
        ("f = [7, 8]", [(1, 1, 1)]),
        ("s = 5", [(1, 1, 1), (1, 1, 2)]),
        ("k = 1", [(1, 1, 1), (1, 1, 2)]),
        ("c = 2", [(1, 1, 2)]),
        ("k2 = 1", [(1, 1, 1), (1, 1, 2), (2, 1, 1)]),
        ("k = 1 AND k2 = 1 AND v = 10", [(1, 1, 1)]),
        ("k = 1 AND k2 = 1 AND c = 1 AND v = 10", [(1, 1, 1)]),
        ("k = 1 AND k2 = 1 AND v = 10 AND c > 0", [(1, 1, 1)]),
        ("k = 1 AND k2 = 1 AND m['x'] = 1", [(1, 1, 1)]),
        ("v = 10 AND c = 1 ALLOW FILTERING", [(1, 1, 1), (2, 1, 1)]),
        ("v = 10 AND k = 1 ALLOW FILTERING", [(1, 1, 1)]),
        ("v = 10 AND l CONTAINS 1 ALLOW FILTERING", [(1, 1, 1)]),
        ("m['x'] = 1 AND m['y'] = 2 ALLOW FILTERING", [(1, 1, 1)]),
        ("v = 10 AND token(k, k2) > -9223372036854775808", [(1, 1, 1), (2, 1, 1)]),
        ("v = 99", []),
    ],
)
def test_indexed_queries(loaded, where, expected):
    assert keys(rows_of(loaded, f"SELECT k, k2, c, v FROM t WHERE {where}")) == expected


@pytest.mark.parametrize(
    "where,message",
    [
        ("v = 10 AND c = 1", FILTERING),
        ("v = 10 AND k = 1", FILTERING),
        ("v = 10 AND w = 1", FILTERING),
        ("v = 10 AND c > 0", FILTERING),
        ("v = 10 AND l CONTAINS 1", FILTERING),
        ("v = 10 AND s = 5", FILTERING),
        ("m['x'] = 1 AND m['y'] = 2", FILTERING),
        ("k2 = 1 AND c = 1", FILTERING),
        ("v > 5", FILTERING),
        ("w = 1", FILTERING),
        ("k = 1 AND k2 = 1 AND v = 10 AND w = 1", FILTERING),
        ("k = 1 AND k2 = 1 AND m['x'] = 1 AND v = 10", FILTERING),
        ("k = 1 AND k2 IN (1, 2) AND v = 10", "Select on indexed columns and with IN clause for the PRIMARY KEY are not supported"),
        ("v = 10 ORDER BY c DESC", "ORDER BY with 2ndary indexes is not supported, except for ANN queries."),
    ],
)
def test_indexed_query_refusals(loaded, where, message):
    invalid(loaded, f"SELECT k, k2, c, v FROM t WHERE {where}", message)


def test_distinct_with_an_index(loaded):
    invalid(
        loaded,
        "SELECT DISTINCT k, k2 FROM t WHERE v = 10",
        "SELECT DISTINCT with WHERE clause only supports restriction by partition key and/or static columns.",
    )
    assert sorted((r.k, r.k2) for r in rows_of(loaded, "SELECT DISTINCT k, k2 FROM t WHERE s = 5")) == [(1, 1)]
    got = rows_of(loaded, "SELECT DISTINCT k, k2, s FROM t WHERE k2 = 1")
    assert [(r.k, r.k2, r.s) for r in got] == [(2, 1, None), (1, 1, 5)]


def test_limit_count_and_order(loaded):
    s = loaded
    all_rows = rows_of(s, "SELECT k, k2, c FROM t WHERE v = 10")
    # Token order: (2, 1) sorts before (1, 1).
    assert [(r.k, r.k2) for r in all_rows] == [(2, 1), (1, 1)]
    assert [(r.k, r.k2) for r in rows_of(s, "SELECT k, k2, c FROM t WHERE v = 10 LIMIT 1")] == [(2, 1)]
    assert rows_of(s, "SELECT count(*) FROM t WHERE v = 10")[0].count == 2


def test_writes_deletes_and_ttl_are_reflected(loaded):
    s = loaded
    s.execute("UPDATE t SET v = 11 WHERE k = 2 AND k2 = 1 AND c = 1")
    assert keys(rows_of(s, "SELECT k, k2, c FROM t WHERE v = 10")) == [(1, 1, 1)]
    assert keys(rows_of(s, "SELECT k, k2, c FROM t WHERE v = 11")) == [(2, 1, 1)]
    s.execute("DELETE FROM t WHERE k = 1 AND k2 = 1 AND c = 1")
    assert keys(rows_of(s, "SELECT k, k2, c FROM t WHERE v = 10")) == []
    assert rows_of(s, "SELECT k FROM t WHERE l CONTAINS 1") == []
    s.execute("UPDATE t SET m = m - {'x'} WHERE k = 2 AND k2 = 1 AND c = 1")
    s.execute("UPDATE t SET m['z'] = 3, l = l + [4] WHERE k = 2 AND k2 = 1 AND c = 1")
    assert keys(rows_of(s, "SELECT k, k2, c FROM t WHERE m CONTAINS KEY 'z'")) == [(2, 1, 1)]
    assert keys(rows_of(s, "SELECT k, k2, c FROM t WHERE m['z'] = 3")) == [(2, 1, 1)]
    assert keys(rows_of(s, "SELECT k, k2, c FROM t WHERE l CONTAINS 4")) == [(2, 1, 1)]
    s.execute("INSERT INTO t (k, k2, c, v) VALUES (3, 3, 3, 77) USING TTL 1")
    assert keys(rows_of(s, "SELECT k, k2, c FROM t WHERE v = 77")) == [(3, 3, 3)]
    time.sleep(2.5)
    assert rows_of(s, "SELECT k, k2, c FROM t WHERE v = 77") == []
    s.execute("DELETE FROM t WHERE k = 2 AND k2 = 1")
    assert rows_of(s, "SELECT k FROM t WHERE v = 11") == []


def test_paging_over_many_partitions(ks_session):
    s = ks_session
    s.execute("CREATE TABLE p (k int, c int, v int, PRIMARY KEY (k, c))")
    ins = s.prepare("INSERT INTO p (k, c, v) VALUES (?, ?, ?)")
    expected = set()
    for k in range(120):
        for c in range(3):
            v = (k + c) % 4
            s.execute(ins, (k, c, v))
            if v == 1:
                expected.add((k, c))
    s.execute("CREATE INDEX ON p (v)")
    rows_of(s, "SELECT k FROM p WHERE v = 1 LIMIT 1")
    for fetch in (1, 7, 50, 1000):
        got = all_pages(s, "SELECT k, c FROM p WHERE v = 1", fetch, 1000)
        assert sorted((r.k, r.c) for r in got) == sorted(expected), fetch
        assert len(got) == len(expected)
    got = all_pages(s, "SELECT k, c FROM p WHERE v = 1 LIMIT 25", 7, 100)
    assert len(got) == 25
    rows = list(s.execute(SimpleStatement("SELECT k, c FROM p WHERE v = 1", fetch_size=10)))
    assert len(rows) == len(expected)


def test_index_built_on_existing_data(ks_session):
    s = ks_session
    s.execute("CREATE TABLE b (k int PRIMARY KEY, v text)")
    ins = s.prepare("INSERT INTO b (k, v) VALUES (?, ?)")
    for k in range(500):
        s.execute(ins, (k, f"v{k % 10}"))
    s.execute("CREATE INDEX ON b (v)")
    assert sorted(r.k for r in rows_of(s, "SELECT k FROM b WHERE v = 'v3'")) == list(range(3, 500, 10))
    s.execute("TRUNCATE b")
    assert rows_of(s, "SELECT k FROM b WHERE v = 'v3'") == []


def test_sai_ranges_and_intersections(ks_session):
    s = ks_session
    s.execute("CREATE TABLE s2 (k int, c int, v int, w int, x int, PRIMARY KEY (k, c))")
    ins = s.prepare("INSERT INTO s2 (k, c, v, w, x) VALUES (?, ?, ?, ?, ?)")
    for k in range(30):
        for c in range(2):
            s.execute(ins, (k, c, k % 10, c, k % 3))
    s.execute("CREATE INDEX s2_v ON s2 (v) USING 'sai'")
    s.execute("CREATE CUSTOM INDEX s2_w ON s2 (w) USING 'StorageAttachedIndex'")
    s.execute("CREATE INDEX s2_x ON s2 (x)")
    pairs = lambda rows: sorted((r.k, r.c) for r in rows)  # noqa: E731
    assert pairs(rows_of(s, "SELECT k, c FROM s2 WHERE v = 1 AND w = 1")) == [(1, 1), (11, 1), (21, 1)]
    assert pairs(rows_of(s, "SELECT k, c FROM s2 WHERE v > 7 AND w = 0")) == [
        (k, 0) for k in range(30) if k % 10 > 7
    ]
    assert pairs(rows_of(s, "SELECT k, c FROM s2 WHERE v >= 2 AND v <= 3")) == [
        (k, c) for k in range(30) for c in range(2) if k % 10 in (2, 3)
    ]
    assert pairs(rows_of(s, "SELECT k, c FROM s2 WHERE v > 8 AND k = 9")) == [(9, 0), (9, 1)]
    for where in ["v = 1 AND x = 1", "v = 1 AND c = 1", "x > 0", "v IN (1, 2)"]:
        invalid(s, f"SELECT k FROM s2 WHERE {where}", FILTERING)
    s.execute("CREATE INDEX s2_c ON s2 (c)")
    invalid(s, "ALTER TABLE s2 RENAME c TO c2", "Can't rename column c because it has dependent secondary indexes (s2_c)")


def test_prepared_indexed_queries_and_driver_metadata(loaded, cluster, keyspace):
    s = loaded
    q = s.prepare("SELECT k, k2, c FROM t WHERE v = ?")
    assert keys(rows_of(s, q, 10)) == [(1, 1, 1), (2, 1, 1)]
    q = s.prepare("SELECT k, k2, c FROM t WHERE m[?] = ?")
    assert keys(rows_of(s, q, "y", 2)) == [(1, 1, 1)]
    q = s.prepare("SELECT k, k2, c FROM t WHERE st CONTAINS ?")
    assert keys(rows_of(s, q, "b")) == [(1, 1, 1)]
    cluster.refresh_schema_metadata()
    table = cluster.metadata.keyspaces[keyspace].tables["t"]
    assert table.indexes["t_m_idx_2"].index_options == {"target": "entries(m)"}
    assert "CREATE INDEX t_v_idx ON" in table.export_as_string()


@pytest.mark.parametrize("using,reason", [("", "UNKNOWN"), ("USING 'sai'", "INDEX_NOT_AVAILABLE")])
def test_a_building_index_fails_reads_as_cassandra(ks_session, using, reason):
    """Until its build ends an index is not queryable: a read fails with
    ReadFailure (legacy: reason UNKNOWN; SAI: INDEX_NOT_AVAILABLE); after, it answers."""
    s = ks_session
    s.execute("CREATE TABLE big (k int PRIMARY KEY, v int)")
    ins = s.prepare("INSERT INTO big (k, v) VALUES (?, ?)")
    from cassandra.concurrent import execute_concurrent_with_args

    execute_concurrent_with_args(s, ins, [(k, k % 10) for k in range(20000)], concurrency=64, raise_on_first_error=True)
    s.execute(f"CREATE INDEX big_v ON big (v) {using}")
    try:
        first = list(s.execute("SELECT k FROM big WHERE v = 3"))
    except ReadFailure as e:
        assert f"Operation failed - received 0 responses and 1 failures: {reason} from /" in str(e), str(e)
        if s.cluster.protocol_version >= 5:
            # v5's reason map: the replica and its RequestFailureReason code (UNKNOWN 0, INDEX_NOT_AVAILABLE 6).
            assert list(e.error_code_map.values()) == [{"UNKNOWN": 0, "INDEX_NOT_AVAILABLE": 6}[reason]], e.error_code_map
    else:
        assert len(first) == 2000  # the build was already done
    assert len(rows_of(s, "SELECT k FROM big WHERE v = 3")) == 2000
