"""token(k) is Cassandra's Murmur3Partitioner, checked against fixed vectors
(taken from Cassandra and the drivers' own test suites) and against the
Python driver's partitioner."""

import datetime
import struct
import uuid
from decimal import Decimal

import pytest
from cassandra.util import Date, SortedSet, Time

# (key bytes, Cassandra's token)
VECTORS = [
    (b"123", -7468325962851647638),
    (b"\x00\xff\x10\xfa\x99" * 10, 5837342703291459765),
    (b"\xfe" * 8, -8927430733708461935),
    (b"\x10" * 8, 1446172840243228796),
    (b"9223372036854775807", 7162290910810015547),
    (b"test", -6017608668500074083),
    ("kremówki".encode("utf-8"), 4354931215268080151),
]


def _utf8(b):
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return None


TEXT_VECTORS = [(_utf8(k), t) for k, t in VECTORS if _utf8(k) is not None]


@pytest.fixture(scope="module")
def keyed(module_ks_session):
    s = module_ks_session
    s.execute("CREATE TABLE by_blob (k blob PRIMARY KEY, v int)")
    s.execute("CREATE TABLE by_text (k text PRIMARY KEY, v int)")
    s.execute("CREATE TABLE by_int (k int PRIMARY KEY, v int)")
    s.execute("CREATE TABLE by_bigint (k bigint PRIMARY KEY, v int)")
    s.execute("CREATE TABLE by_pair (a text, b int, v int, PRIMARY KEY ((a, b)))")
    return s


def test_driver_partitioner_agrees_with_vectors(cluster):
    from_key = cluster.metadata.token_map.token_class.from_key
    bad = [(k, t, from_key(k).value) for k, t in VECTORS if from_key(k).value != t]
    assert not bad, f"driver Murmur3 differs from the vectors (test data problem): {bad}"


@pytest.mark.parametrize("key,token", VECTORS, ids=[k.hex()[:16] for k, _ in VECTORS])
def test_blob_key_token(keyed, key, token):
    keyed.execute("INSERT INTO by_blob (k, v) VALUES (%s, 1)", (key,))
    row = keyed.execute("SELECT token(k) AS t FROM by_blob WHERE k = %s", (key,)).one()
    assert row is not None, "row not found"
    assert row.t == token, f"token({key!r}) = {row.t}, Cassandra gives {token}"


@pytest.mark.parametrize("key,token", TEXT_VECTORS, ids=[k for k, _ in TEXT_VECTORS])
def test_text_key_token(keyed, key, token):
    ins = keyed.prepare("INSERT INTO by_text (k, v) VALUES (?, 1)")
    keyed.execute(ins, (key,))
    sel = keyed.prepare("SELECT token(k) AS t FROM by_text WHERE k = ?")
    row = keyed.execute(sel, (key,)).one()
    assert row is not None, "row not found"
    assert row.t == token, f"token({key!r}) = {row.t}, Cassandra gives {token}"
    # Also as a literal in the CQL text.
    lit = key.replace("'", "''")
    assert keyed.execute(f"SELECT token(k) AS t FROM by_text WHERE k = '{lit}'").one().t == token


def test_many_text_keys_agree_with_driver(keyed):
    keys = [f"key{i}" for i in range(200)]
    ins = keyed.prepare("INSERT INTO by_text (k, v) VALUES (?, ?)")
    for i, k in enumerate(keys):
        keyed.execute(ins, (k, i))
    from_key = keyed.cluster.metadata.token_map.token_class.from_key
    got = {r.k: r.t for r in keyed.execute("SELECT k, token(k) AS t FROM by_text")}
    bad = [(k, got.get(k), from_key(k.encode()).value) for k in keys if got.get(k) != from_key(k.encode()).value]
    assert not bad, f"{len(bad)} keys disagree with the driver's partitioner, e.g. {bad[:3]}"


def test_int_and_bigint_key_tokens(keyed):
    from_key = keyed.cluster.metadata.token_map.token_class.from_key
    for k in (0, 1, -1, 2**31 - 1, -(2**31), 42):
        keyed.execute("INSERT INTO by_int (k, v) VALUES (%s, 0)", (k,))
        t = keyed.execute("SELECT token(k) AS t FROM by_int WHERE k = %s", (k,)).one().t
        assert t == from_key(struct.pack(">i", k)).value, f"int key {k}: token {t}"
    for k in (0, 1, -1, 2**63 - 1, -(2**63)):
        keyed.execute("INSERT INTO by_bigint (k, v) VALUES (%s, 0)", (k,))
        t = keyed.execute("SELECT token(k) AS t FROM by_bigint WHERE k = %s", (k,)).one().t
        assert t == from_key(struct.pack(">q", k)).value, f"bigint key {k}: token {t}"


def test_composite_key_token(keyed):
    from_key = keyed.cluster.metadata.token_map.token_class.from_key
    for a, b in (("x", 1), ("", 0), ("kremówki", -5), ("a" * 300, 2**31 - 1)):
        keyed.execute("INSERT INTO by_pair (a, b, v) VALUES (%s, %s, 0)", (a, b))
        t = keyed.execute("SELECT token(a, b) AS t FROM by_pair WHERE a = %s AND b = %s", (a, b)).one().t
        ab = a.encode()
        composite = struct.pack(">H", len(ab)) + ab + b"\x00" + struct.pack(">H", 4) + struct.pack(">i", b) + b"\x00"
        assert t == from_key(composite).value, f"token(({a[:10]!r}, {b})) = {t}"


def test_token_restriction_selects_by_token(keyed):
    from_key = keyed.cluster.metadata.token_map.token_class.from_key
    for k, _ in VECTORS:
        keyed.execute("INSERT INTO by_blob (k, v) VALUES (%s, 2)", (k,))
    tokens = sorted(t for _, t in VECTORS)
    lo, hi = tokens[1], tokens[4]
    got = [r.t for r in keyed.execute(f"SELECT token(k) AS t FROM by_blob WHERE token(k) > {lo} AND token(k) <= {hi}")]
    assert got == tokens[2:5], f"token range ({lo}, {hi}]: {got}"
    row = keyed.execute(f"SELECT k FROM by_blob WHERE token(k) = {VECTORS[0][1]}").one()
    assert row is not None and row.k == VECTORS[0][0]
    assert from_key(row.k).value == VECTORS[0][1]


# Partition keys of every type hash their serialized value: the server's
# token(k) must equal the driver's Murmur3 of the routing key the driver builds
# from the same bound value (this is what token-aware routing relies on).
KEY_CASES = {
    "ascii": ["a", "hello world", "~" * 100],
    "text": ["x", "kremówki", "中文", "a" * 1000],
    "blob": [b"\x00", b"\xff" * 33, b"\x80\x7f"],
    "boolean": [True, False],
    "tinyint": [0, -128, 127],
    "smallint": [1, -32768, 32767],
    "varint": [0, -1, 127, 128, -129, 2**100, -(2**100)],
    "float": [0.0, -1.5, 3.25],
    "double": [0.0, -1.5, 1e300],
    "decimal": [Decimal("0"), Decimal("-1.500E+10"), Decimal("12345.6789")],
    "uuid": [uuid.UUID("550e8400-e29b-41d4-a716-446655440000"), uuid.UUID(int=0)],
    "timeuuid": [uuid.UUID("e6a7a070-8e1e-11ee-b9d1-0242ac120002")],
    "timestamp": [datetime.datetime(2024, 2, 29, 12, 0, 0), datetime.datetime(1960, 1, 1)],
    "date": [Date(datetime.date(2024, 2, 29)), Date(datetime.date(1969, 12, 31))],
    "time": [Time("12:34:56.789"), Time(0)],
    "inet": ["127.0.0.1", "::1", "2001:db8::ff00:42:8329"],
    "frozen<list<int>>": [[1, 2, 3], [-1]],
    # SortedSet: the driver serializes in iteration order, and a Python set's
    # order changes with PYTHONHASHSEED (canonical order is tested below).
    "frozen<set<text>>": [SortedSet(["a", "b"]), SortedSet(["z"])],
    "frozen<map<text, int>>": [{"a": 1, "b": 2}],
    "tuple<int, text>": [(1, "a"), (-7, "")],
}


@pytest.fixture(scope="module")
def key_tables(keyed):
    names = {}
    for i, typ in enumerate(KEY_CASES):
        keyed.execute(f"CREATE TABLE key_{i} (k {typ} PRIMARY KEY, v int)")
        names[typ] = f"key_{i}"
    return keyed, names


@pytest.mark.parametrize("typ", list(KEY_CASES))
def test_partition_key_types_token(key_tables, typ):
    s, names = key_tables
    table = names[typ]
    from_key = s.cluster.metadata.token_map.token_class.from_key
    ins = s.prepare(f"INSERT INTO {table} (k, v) VALUES (?, ?)")
    sel = s.prepare(f"SELECT k, v, token(k) AS t FROM {table} WHERE k = ?")
    for i, key in enumerate(KEY_CASES[typ]):
        bound = ins.bind((key, i))
        s.execute(bound)
        row = s.execute(sel, (key,)).one()
        assert row is not None, f"{typ} key {key!r}: row not found by its key"
        assert row.v == i
        expected = from_key(bound.routing_key).value
        assert row.t == expected, f"{typ} key {key!r}: token(k) = {row.t}, driver's routing token {expected}"
    scanned = {r.t for r in s.execute(f"SELECT token(k) AS t FROM {table}")}
    assert len(scanned) == len(KEY_CASES[typ]), f"{typ}: full scan found {len(scanned)} partitions"


def test_frozen_set_and_map_keys_are_canonical(keyed):
    """Cassandra sorts the elements of a set and the keys of a map when it
    receives them: the same logical key sent in two element orders is one
    partition, with the token of the sorted serialization."""
    from collections import OrderedDict

    s = keyed
    s.execute("CREATE TABLE IF NOT EXISTS canon_set (k frozen<set<text>> PRIMARY KEY, v int)")
    s.execute("CREATE TABLE IF NOT EXISTS canon_map (k frozen<map<text, int>> PRIMARY KEY, v int)")
    from_key = s.cluster.metadata.token_map.token_class.from_key

    ins = s.prepare("INSERT INTO canon_set (k, v) VALUES (?, ?)")
    sorted_token = from_key(ins.bind((["a", "b"], 0)).routing_key).value
    s.execute(ins, (["b", "a"], 1))  # a list binds as a set in the given order
    s.execute(ins, (["a", "b"], 2))
    rows = [(sorted(r.k), r.v, r.t) for r in s.execute("SELECT k, v, token(k) AS t FROM canon_set")]
    assert rows == [(["a", "b"], 2, sorted_token)], (
        f"{{'b','a'}} and {{'a','b'}} must be one partition with the sorted token {sorted_token}: {rows}")

    insm = s.prepare("INSERT INTO canon_map (k, v) VALUES (?, ?)")
    sorted_token = from_key(insm.bind((OrderedDict([("a", 1), ("b", 2)]), 0)).routing_key).value
    s.execute(insm, (OrderedDict([("b", 2), ("a", 1)]), 1))
    s.execute(insm, (OrderedDict([("a", 1), ("b", 2)]), 2))
    rows = [(list(r.k.items()), r.v, r.t) for r in s.execute("SELECT k, v, token(k) AS t FROM canon_map")]
    assert rows == [([("a", 1), ("b", 2)], 2, sorted_token)], (
        f"map keys sent as b,a and a,b must be one partition with the sorted token {sorted_token}: {rows}")
