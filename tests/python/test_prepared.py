"""Prepared statements: positional and named markers, routing key indexes for
token-aware routing, USING TTL ? / USING TIMESTAMP ?, LIMIT ?, unset values."""

import pytest
from cassandra.query import UNSET_VALUE


@pytest.fixture
def kv(ks_session):
    ks_session.execute("CREATE TABLE kv (k int, c int, v text, PRIMARY KEY (k, c))")
    return ks_session


def test_positional_markers_insert_and_select(kv):
    ins = kv.prepare("INSERT INTO kv (k, c, v) VALUES (?, ?, ?)")
    assert len(ins.column_metadata) == 3, f"bind metadata: {ins.column_metadata}"
    assert [c.name for c in ins.column_metadata] == ["k", "c", "v"]
    for c in range(5):
        kv.execute(ins, (1, c, f"v{c}"))
    sel = kv.prepare("SELECT c, v FROM kv WHERE k = ? AND c >= ?")
    rows = list(kv.execute(sel, (1, 2)))
    assert [(r.c, r.v) for r in rows] == [(2, "v2"), (3, "v3"), (4, "v4")]
    assert sel.result_metadata is not None and [c[2] for c in sel.result_metadata] == ["c", "v"], (
        f"PREPARED result metadata: {sel.result_metadata}"
    )


def test_named_markers_bind_by_name(kv):
    ins = kv.prepare("INSERT INTO kv (k, c, v) VALUES (:key, :clu, :val)")
    assert [c.name for c in ins.column_metadata] == ["key", "clu", "val"], (
        f"named markers must be reported by name: {[c.name for c in ins.column_metadata]}"
    )
    kv.execute(ins, {"val": "named", "key": 2, "clu": 7})
    sel = kv.prepare("SELECT v FROM kv WHERE k = :key AND c = :clu")
    row = kv.execute(sel, {"clu": 7, "key": 2}).one()
    assert row is not None and row.v == "named", f"got {row}"


def test_dict_binding_with_positional_markers_uses_column_names(kv):
    ins = kv.prepare("INSERT INTO kv (k, c, v) VALUES (?, ?, ?)")
    kv.execute(ins, {"v": "by-col-name", "k": 3, "c": 1})
    assert kv.execute("SELECT v FROM kv WHERE k = 3 AND c = 1").one().v == "by-col-name"


def test_routing_key_indexes_for_simple_partition_key(cluster, kv, keyspace):
    ins = kv.prepare("INSERT INTO kv (k, c, v) VALUES (?, ?, ?)")
    assert ins.routing_key_indexes == [0], f"routing_key_indexes {ins.routing_key_indexes}"
    upd = kv.prepare("UPDATE kv SET v = ? WHERE k = ? AND c = ?")
    assert upd.routing_key_indexes == [1], f"routing_key_indexes {upd.routing_key_indexes}"
    sel = kv.prepare("SELECT v FROM kv WHERE c = ? AND k = ?")
    assert sel.routing_key_indexes == [1], f"routing_key_indexes {sel.routing_key_indexes}"
    bound = ins.bind((42, 1, "x"))
    assert bound.routing_key == (42).to_bytes(4, "big", signed=True)
    assert bound.keyspace == keyspace, f"bound keyspace {bound.keyspace!r} (from the PREPARED table spec)"
    replicas = cluster.metadata.get_replicas(keyspace, bound.routing_key)
    assert replicas == cluster.metadata.all_hosts(), f"replicas {replicas}"


def test_routing_key_indexes_for_composite_partition_key(cluster, ks_session, keyspace):
    ks_session.execute("CREATE TABLE comp (a text, b int, c int, v int, PRIMARY KEY ((a, b), c))")
    ins = ks_session.prepare("INSERT INTO comp (c, b, v, a) VALUES (?, ?, ?, ?)")
    assert ins.routing_key_indexes == [3, 1], f"routing_key_indexes {ins.routing_key_indexes} (order of the partition key)"
    bound = ins.bind((1, 2, 3, "x"))
    # CompositeType encoding: per component u16 length, bytes, 0x00.
    expected = b"\x00\x01x\x00" + b"\x00\x04" + (2).to_bytes(4, "big") + b"\x00"
    assert bound.routing_key == expected, f"routing key {bound.routing_key!r}"
    ks_session.execute(bound)
    row = ks_session.execute("SELECT token(a, b) AS t, v FROM comp WHERE a = 'x' AND b = 2").one()
    assert row.v == 3
    assert row.t == cluster.metadata.token_map.token_class.from_key(expected).value, "token of the composite key"


def test_using_ttl_marker(kv):
    ins = kv.prepare("INSERT INTO kv (k, c, v) VALUES (?, ?, ?) USING TTL ?")
    assert len(ins.column_metadata) == 4
    assert ins.column_metadata[3].name == "[ttl]", f"TTL marker name {ins.column_metadata[3].name!r}"
    kv.execute(ins, (5, 1, "ttl", 1000))
    row = kv.execute("SELECT v, ttl(v) AS t FROM kv WHERE k = 5 AND c = 1").one()
    assert row.v == "ttl" and row.t is not None and 990 <= row.t <= 1000, f"ttl(v) = {row.t}"


def test_using_timestamp_marker(kv):
    ins = kv.prepare("INSERT INTO kv (k, c, v) VALUES (?, ?, ?) USING TIMESTAMP ?")
    assert ins.column_metadata[3].name == "[timestamp]", f"TIMESTAMP marker name {ins.column_metadata[3].name!r}"
    kv.execute(ins, (6, 1, "ts", 123456789))
    row = kv.execute("SELECT writetime(v) AS wt FROM kv WHERE k = 6 AND c = 1").one()
    assert row.wt == 123456789, f"writetime(v) = {row.wt}"


def test_using_ttl_and_timestamp_markers_together(kv):
    upd = kv.prepare("UPDATE kv USING TTL ? AND TIMESTAMP ? SET v = ? WHERE k = ? AND c = ?")
    kv.execute(upd, (500, 777, "both", 7, 1))
    row = kv.execute("SELECT v, ttl(v) AS t, writetime(v) AS wt FROM kv WHERE k = 7 AND c = 1").one()
    assert row.v == "both" and row.wt == 777 and 490 <= row.t <= 500, f"got {row}"


def test_limit_marker(kv):
    ins = kv.prepare("INSERT INTO kv (k, c, v) VALUES (?, ?, ?)")
    for c in range(10):
        kv.execute(ins, (8, c, str(c)))
    sel = kv.prepare("SELECT c FROM kv WHERE k = ? LIMIT ?")
    assert sel.column_metadata[1].name == "[limit]", f"LIMIT marker name {sel.column_metadata[1].name!r}"
    assert [r.c for r in kv.execute(sel, (8, 3))] == [0, 1, 2]
    assert [r.c for r in kv.execute(sel, (8, 100))] == list(range(10))


def test_unset_value_leaves_column_untouched(kv):
    ins = kv.prepare("INSERT INTO kv (k, c, v) VALUES (?, ?, ?)")
    kv.execute(ins, (9, 1, "keep"))
    kv.execute(ins, (9, 1, UNSET_VALUE))
    row = kv.execute("SELECT v FROM kv WHERE k = 9 AND c = 1").one()
    assert row.v == "keep", f"UNSET must not overwrite, got {row.v!r}"
    kv.execute(ins, (9, 1, None))
    row = kv.execute("SELECT v FROM kv WHERE k = 9 AND c = 1").one()
    assert row is not None and row.v is None, f"null overwrites, got {row}"


def test_in_marker_and_token_marker(kv):
    ins = kv.prepare("INSERT INTO kv (k, c, v) VALUES (?, ?, ?)")
    for k in (20, 21, 22):
        kv.execute(ins, (k, 0, str(k)))
    sel = kv.prepare("SELECT k, v FROM kv WHERE k IN ?")
    got = sorted((r.k, r.v) for r in kv.execute(sel, ([20, 22, 99],)))
    assert got == [(20, "20"), (22, "22")], f"got {got}"
    sel2 = kv.prepare("SELECT k FROM kv WHERE k IN (?, ?) AND c = ?")
    assert sorted(r.k for r in kv.execute(sel2, (21, 22, 0))) == [21, 22]


def test_preparing_twice_gives_the_same_id(kv):
    q = "SELECT v FROM kv WHERE k = ? AND c = ?"
    p1 = kv.prepare(q)
    p2 = kv.prepare(q)
    assert p1.query_id == p2.query_id, "the same query string must get the same prepared id"
    p3 = kv.prepare("SELECT c FROM kv WHERE k = ?")
    assert p3.query_id != p1.query_id


def test_prepared_statement_in_other_keyspace_needs_no_use(session, keyspace):
    session.execute(f"CREATE TABLE {keyspace}.q (k int PRIMARY KEY, v int)")
    ins = session.prepare(f"INSERT INTO {keyspace}.q (k, v) VALUES (?, ?)")
    session.execute(ins, (1, 10))
    sel = session.prepare(f"SELECT v FROM {keyspace}.q WHERE k = ?")
    assert session.execute(sel, (1,)).one().v == 10
    assert ins.bind((2, 20)).keyspace == keyspace, "bound keyspace comes from the PREPARED table spec"
