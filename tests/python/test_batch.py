"""Batches: logged and unlogged, through the protocol's BATCH message
(BatchStatement) and as CQL text (BEGIN BATCH ... APPLY BATCH)."""

import time

import pytest
from cassandra import InvalidRequest
from cassandra.query import BatchStatement, BatchType, SimpleStatement


@pytest.fixture
def tables(ks_session):
    ks_session.execute("CREATE TABLE a (k int, c int, v text, PRIMARY KEY (k, c))")
    ks_session.execute("CREATE TABLE b (k text PRIMARY KEY, n int)")
    return ks_session


def _a(session, k):
    return [(r.c, r.v) for r in session.execute(f"SELECT c, v FROM a WHERE k = {k}")]


@pytest.mark.parametrize("batch_type", [BatchType.LOGGED, BatchType.UNLOGGED], ids=["logged", "unlogged"])
def test_batch_statement_of_prepared_inserts(tables, batch_type):
    ins_a = tables.prepare("INSERT INTO a (k, c, v) VALUES (?, ?, ?)")
    ins_b = tables.prepare("INSERT INTO b (k, n) VALUES (?, ?)")
    batch = BatchStatement(batch_type=batch_type)
    for c in range(20):
        batch.add(ins_a, (1, c, f"x{c}"))
    for k in range(5):  # other partitions, and another table
        batch.add(ins_a, (2 + k, 0, "other"))
        batch.add(ins_b, (f"key{k}", k))
    tables.execute(batch)
    assert _a(tables, 1) == [(c, f"x{c}") for c in range(20)]
    assert all(_a(tables, 2 + k) == [(0, "other")] for k in range(5))
    assert sorted((r.k, r.n) for r in tables.execute("SELECT k, n FROM b")) == [(f"key{k}", k) for k in range(5)]


def test_batch_statement_mixes_simple_and_prepared(tables):
    ins = tables.prepare("INSERT INTO a (k, c, v) VALUES (?, ?, ?)")
    batch = BatchStatement()
    batch.add(ins, (10, 1, "prepared"))
    batch.add(SimpleStatement("INSERT INTO a (k, c, v) VALUES (%s, %s, %s)"), (10, 2, "simple-with-values"))
    batch.add("INSERT INTO a (k, c, v) VALUES (10, 3, 'plain text')")
    batch.add(SimpleStatement("UPDATE a SET v = 'updated' WHERE k = 10 AND c = 1"))
    tables.execute(batch)
    assert _a(tables, 10) == [(1, "updated"), (2, "simple-with-values"), (3, "plain text")]


def test_batch_statement_with_delete(tables):
    tables.execute("INSERT INTO a (k, c, v) VALUES (11, 1, 'old')")
    ins = tables.prepare("INSERT INTO a (k, c, v) VALUES (?, ?, ?)")
    dele = tables.prepare("DELETE FROM a WHERE k = ? AND c = ?")
    batch = BatchStatement(batch_type=BatchType.UNLOGGED)
    batch.add(dele, (11, 1))
    batch.add(ins, (11, 2, "new"))
    tables.execute(batch)
    assert _a(tables, 11) == [(2, "new")]


def test_batch_statement_one_client_timestamp_for_all(tables):
    # The driver sends one client-side timestamp (microseconds) with the BATCH
    # message; every statement in it gets that timestamp.
    ins = tables.prepare("INSERT INTO a (k, c, v) VALUES (?, ?, ?)")
    batch = BatchStatement()
    batch.add(ins, (12, 1, "a"))
    batch.add(ins, (12, 2, "b"))
    before = int(time.time() * 1e6)
    tables.execute(batch)
    after = int(time.time() * 1e6)
    wts = [r.wt for r in tables.execute("SELECT writetime(v) AS wt FROM a WHERE k = 12")]
    assert len(wts) == 2 and wts[0] == wts[1], f"one timestamp for the whole batch: {wts}"
    assert before - 5_000_000 <= wts[0] <= after + 5_000_000, f"writetime {wts[0]} is not 'now' in microseconds ({before})"


def test_batch_statement_with_bound_timestamps(tables):
    ins = tables.prepare("INSERT INTO a (k, c, v) VALUES (?, ?, ?) USING TIMESTAMP ?")
    batch = BatchStatement(batch_type=BatchType.UNLOGGED)
    batch.add(ins, (13, 1, "a", 1_000_000))
    batch.add(ins, (13, 2, "b", 2_000_000))
    tables.execute(batch)
    wts = [r.wt for r in tables.execute("SELECT writetime(v) AS wt FROM a WHERE k = 13")]
    assert wts == [1_000_000, 2_000_000], f"USING TIMESTAMP ? inside a batch: {wts}"


def test_cql_text_logged_batch_using_timestamp(tables):
    tables.execute(
        """
        BEGIN BATCH USING TIMESTAMP 1234
          INSERT INTO a (k, c, v) VALUES (20, 1, 'one');
          INSERT INTO a (k, c, v) VALUES (20, 2, 'two');
          UPDATE b SET n = 7 WHERE k = 'twenty';
        APPLY BATCH
        """
    )
    rows = list(tables.execute("SELECT c, v, writetime(v) AS wt FROM a WHERE k = 20"))
    assert [(r.c, r.v, r.wt) for r in rows] == [(1, "one", 1234), (2, "two", 1234)]
    row = tables.execute("SELECT n, writetime(n) AS wt FROM b WHERE k = 'twenty'").one()
    assert (row.n, row.wt) == (7, 1234)


def test_cql_text_unlogged_batch_per_statement_timestamps(tables):
    tables.execute(
        "BEGIN UNLOGGED BATCH "
        "INSERT INTO a (k, c, v) VALUES (21, 1, 'x') USING TIMESTAMP 100; "
        "INSERT INTO a (k, c, v) VALUES (21, 2, 'y') USING TIMESTAMP 200; "
        "APPLY BATCH"
    )
    rows = [(r.c, r.wt) for r in tables.execute("SELECT c, writetime(v) AS wt FROM a WHERE k = 21")]
    assert rows == [(1, 100), (2, 200)]


def test_cql_text_batch_timestamps_decide_conflicts(tables):
    tables.execute("INSERT INTO a (k, c, v) VALUES (22, 1, 'newer') USING TIMESTAMP 5000")
    tables.execute(
        "BEGIN BATCH USING TIMESTAMP 4000 "
        "UPDATE a SET v = 'older' WHERE k = 22 AND c = 1; "
        "INSERT INTO a (k, c, v) VALUES (22, 2, 'fresh'); "
        "APPLY BATCH"
    )
    assert _a(tables, 22) == [(1, "newer"), (2, "fresh")], "an older batch timestamp must not overwrite"
    tables.execute("BEGIN BATCH USING TIMESTAMP 6000 DELETE FROM a WHERE k = 22 AND c = 1; APPLY BATCH")
    assert _a(tables, 22) == [(2, "fresh")]


def test_cql_text_batch_with_bound_values(tables):
    stmt = tables.prepare(
        "BEGIN BATCH INSERT INTO a (k, c, v) VALUES (?, ?, ?); INSERT INTO a (k, c, v) VALUES (?, ?, ?); APPLY BATCH"
    )
    tables.execute(stmt, (23, 1, "p1", 23, 2, "p2"))
    assert _a(tables, 23) == [(1, "p1"), (2, "p2")]


def test_batch_cannot_mix_timestamps(tables):
    with pytest.raises(InvalidRequest):
        tables.execute(
            "BEGIN BATCH USING TIMESTAMP 10 INSERT INTO a (k, c, v) VALUES (24, 1, 'x') USING TIMESTAMP 20; APPLY BATCH"
        )
