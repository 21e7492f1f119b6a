"""Bad CQL gets the right error kind with Cassandra's kind of message (the
expected texts are what Cassandra 5.0 answers; 4.0 wordings are accepted
where they differ), and the session keeps working afterwards."""

import re

import pytest
from cassandra import AlreadyExists, ConsistencyLevel, InvalidRequest, Unavailable
from cassandra.policies import FallthroughRetryPolicy
from cassandra.protocol import SyntaxException
from cassandra.query import SimpleStatement


@pytest.fixture(scope="module")
def ks(module_ks_session):
    s = module_ks_session
    s.execute("CREATE TABLE t (k int PRIMARY KEY, v int)")
    s.execute("CREATE TABLE comp (a int, b text, c int, v int, PRIMARY KEY ((a, b), c))")
    s.execute("CREATE TABLE bk (k blob PRIMARY KEY, v int)")
    s.execute("CREATE TABLE tk (k text PRIMARY KEY, v int)")
    return s


def _message(exc):
    return getattr(exc, "message", None) or str(exc)


def _fails(session, query, exc_type, *patterns, params=None):
    """Runs `query`, expects `exc_type`, and checks every regex in `patterns`
    (case-insensitive) against the server's message."""
    try:
        session.execute(query, params)
    except exc_type as e:
        msg = _message(e)
    except Exception as e:
        pytest.fail(f"{query!r}: expected {exc_type.__name__}, got {type(e).__name__}: {_message(e)!r}")
    else:
        pytest.fail(f"{query!r} succeeded; expected {exc_type.__name__}")
    for p in patterns:
        assert re.search(p, msg, re.IGNORECASE), f"{query!r}: message {msg!r} does not match {p!r}"
    return msg


def test_syntax_error_reports_line_and_column(ks):
    _fails(ks, "SELEC * FROM t", SyntaxException, r"line 1:\d+")
    msg = _fails(ks, "SELECT * FORM t", SyntaxException, r"line 1:\d+", "FORM")
    assert "line 1:9" in msg, f"the error points at FORM (line 1:9): {msg!r}"
    # At end of input Cassandra says "line 0:-1 mismatched input '<EOF>'".
    _fails(ks, "INSERT INTO t (k, v) VALUES (1, 2", SyntaxException, r"line \d+:-?\d+")
    _fails(ks, "SELECT * FROM t WHERE k = 1 ANDD v = 2", SyntaxException, r"line 1:")


def test_syntax_error_on_prepare(ks):
    with pytest.raises(SyntaxException) as info:
        ks.prepare("UPDATE t SET v = ? WHER k = ?")
    assert "line 1:" in _message(info.value)


def test_unknown_keyspace(ks):
    _fails(ks, "SELECT * FROM no_such_ks.t", InvalidRequest, r"keyspace '?no_such_ks'? does not exist")
    _fails(ks, "INSERT INTO no_such_ks.t (k, v) VALUES (1, 1)", InvalidRequest, "no_such_ks")
    _fails(ks, "USE no_such_ks", InvalidRequest, r"keyspace '?no_such_ks'? does not exist")


def test_unknown_table(ks):
    _fails(ks, "SELECT * FROM no_such_table", InvalidRequest,
           r"(unconfigured table no_such_table|table '?no_such_table'? does not exist)")
    _fails(ks, "INSERT INTO no_such_table (k) VALUES (1)", InvalidRequest, "no_such_table")
    _fails(ks, "DROP TABLE no_such_table", InvalidRequest, "no_such_table")


def test_unknown_column(ks):
    _fails(ks, "SELECT nope FROM t", InvalidRequest, r"Undefined column name nope")
    _fails(ks, "INSERT INTO t (k, nope) VALUES (1, 1)", InvalidRequest, r"Undefined column name nope")
    _fails(ks, "UPDATE t SET nope = 1 WHERE k = 1", InvalidRequest, r"Undefined column name nope")
    _fails(ks, "SELECT * FROM t WHERE nope = 1", InvalidRequest, r"Undefined column name nope")


def test_missing_partition_key_part(ks):
    _fails(ks, "INSERT INTO comp (a, c, v) VALUES (1, 1, 1)", InvalidRequest,
           r"Some partition key parts are missing: b")
    _fails(ks, "UPDATE comp SET v = 1 WHERE a = 1 AND c = 1", InvalidRequest,
           r"Some partition key parts are missing: b")
    _fails(ks, "DELETE FROM comp WHERE b = 'x'", InvalidRequest, r"Some partition key parts are missing: a")
    _fails(ks, "INSERT INTO t (v) VALUES (1)", InvalidRequest, r"Some partition key parts are missing: k")


def test_missing_clustering_key_on_insert(ks):
    _fails(ks, "INSERT INTO comp (a, b, v) VALUES (1, 'x', 1)", InvalidRequest, r"Some clustering keys are missing: c")


def test_type_mismatch(ks):
    _fails(ks, "INSERT INTO t (k, v) VALUES ('abc', 1)", InvalidRequest, r"Invalid STRING constant \(abc\) for \"k\" of type int")
    _fails(ks, "INSERT INTO t (k, v) VALUES (1, 'abc')", InvalidRequest, r"Invalid STRING constant \(abc\) for \"v\" of type int")
    _fails(ks, "SELECT * FROM t WHERE k = 'x'", InvalidRequest, r"\"k\"", "int")
    _fails(ks, "INSERT INTO t (k, v) VALUES (1, 1.5)", InvalidRequest, r"FLOAT constant \(1.5\)")
    _fails(ks, "INSERT INTO t (k, v) VALUES (99999999999, 1)", InvalidRequest, r"int")
    _fails(ks, "INSERT INTO bk (k, v) VALUES ('text', 1)", InvalidRequest, r"\"k\"", "blob")


def test_other_invalid_requests(ks):
    _fails(ks, "INSERT INTO t (k) VALUES (1, 2)", InvalidRequest, r"Unmatched column names/values")
    _fails(ks, "INSERT INTO t (k, v) VALUES (1, 1) USING TTL -1", InvalidRequest, r"TTL")
    _fails(ks, "SELECT * FROM t LIMIT 0", InvalidRequest, r"LIMIT must be strictly positive")
    _fails(ks, "SELECT * FROM t WHERE v = 1", InvalidRequest, r"ALLOW FILTERING")
    _fails(ks, "CREATE TABLE nopk (k int, v int)", InvalidRequest, r"PRIMARY KEY")
    _fails(ks, "ALTER TABLE t ADD v int", InvalidRequest, r"v", r"already exists")
    _fails(ks, "ALTER TABLE t DROP k", InvalidRequest, r"PRIMARY KEY")


def test_create_existing_table_and_keyspace(ks):
    with pytest.raises(AlreadyExists) as info:
        ks.execute("CREATE TABLE t (k int PRIMARY KEY)")
    assert info.value.table == "t", f"AlreadyExists.table = {info.value.table!r}"
    assert info.value.keyspace == ks.keyspace
    ks.execute("CREATE TABLE IF NOT EXISTS t (k int PRIMARY KEY)")
    with pytest.raises(AlreadyExists) as info:
        ks.execute(f"CREATE KEYSPACE {ks.keyspace} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    assert info.value.keyspace == ks.keyspace and not info.value.table
    ks.execute(f"CREATE KEYSPACE IF NOT EXISTS {ks.keyspace} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")


def test_quorum_on_rf3_with_one_node_is_unavailable(session, keyspace):
    session.execute(f"ALTER KEYSPACE {keyspace} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 3}}")
    session.execute(f"CREATE TABLE {keyspace}.t (k int PRIMARY KEY, v int)")
    stmt = SimpleStatement(f"INSERT INTO {keyspace}.t (k, v) VALUES (1, 1)", consistency_level=ConsistencyLevel.QUORUM,
                           retry_policy=FallthroughRetryPolicy())
    with pytest.raises(Unavailable) as info:
        session.execute(stmt)
    e = info.value
    assert (e.consistency, e.required_replicas, e.alive_replicas) == (ConsistencyLevel.QUORUM, 2, 1), (
        f"Unavailable payload: consistency={e.consistency} required={e.required_replicas} alive={e.alive_replicas}")
    read = SimpleStatement(f"SELECT * FROM {keyspace}.t WHERE k = 1", consistency_level=ConsistencyLevel.ALL,
                           retry_policy=FallthroughRetryPolicy())
    with pytest.raises(Unavailable) as info:
        session.execute(read)
    assert (info.value.required_replicas, info.value.alive_replicas) == (3, 1)
    # CL ONE works on the one live replica.
    session.execute(SimpleStatement(f"INSERT INTO {keyspace}.t (k, v) VALUES (2, 2)", consistency_level=ConsistencyLevel.ONE))
    row = session.execute(SimpleStatement(f"SELECT v FROM {keyspace}.t WHERE k = 2", consistency_level=ConsistencyLevel.ONE)).one()
    assert row.v == 2


def test_key_length_limit(ks):
    ins = ks.prepare("INSERT INTO bk (k, v) VALUES (?, ?)")
    ks.execute(ins, (b"x" * 65535, 1))
    row = ks.execute("SELECT v FROM bk WHERE k = %s", (b"x" * 65535,)).one()
    assert row is not None and row.v == 1, "a 65535-byte key is allowed"
    with pytest.raises(InvalidRequest) as info:
        ks.execute(ins, (b"y" * 65536, 1))
    assert "Key length of 65536 is longer than maximum of 65535" in _message(info.value), _message(info.value)
    _fails(ks, "INSERT INTO bk (k, v) VALUES (%s, 1)", InvalidRequest, r"Key length of 70000 is longer than maximum of 65535",
           params=(b"z" * 70000,))
    _fails(ks, "INSERT INTO tk (k, v) VALUES (%s, 1)", InvalidRequest, r"Key length of 100000 is longer than maximum of 65535",
           params=("t" * 100000,))


def test_empty_blob_key(ks):
    _fails(ks, "INSERT INTO bk (k, v) VALUES (0x, 1)", InvalidRequest, r"Key may not be empty")
    _fails(ks, "INSERT INTO bk (k, v) VALUES (%s, 1)", InvalidRequest, r"Key may not be empty", params=(b"",))


def test_empty_text_key(ks):
    _fails(ks, "INSERT INTO tk (k, v) VALUES ('', 1)", InvalidRequest, r"Key may not be empty")


def test_null_key(ks):
    ins = ks.prepare("INSERT INTO t (k, v) VALUES (?, ?)")
    with pytest.raises(InvalidRequest) as info:
        ks.execute(ins, (None, 1))
    assert re.search(r"null.*\bk\b", _message(info.value), re.IGNORECASE), _message(info.value)


def test_session_still_works_after_errors(ks):
    for q in ("SELEC 1", "SELECT * FROM nope", "INSERT INTO t (k, v) VALUES ('a', 'b')"):
        with pytest.raises(Exception):
            ks.execute(q)
    ks.execute("INSERT INTO t (k, v) VALUES (100, 100)")
    assert ks.execute("SELECT v FROM t WHERE k = 100").one().v == 100
