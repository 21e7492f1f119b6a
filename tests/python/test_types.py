"""Every CQL type round-trips: written as CQL literals (simple statements) and
as bound values (prepared statements), read back and compared with the Python
values the driver produces. Nulls and empty collections follow Cassandra."""

import datetime
import math
import uuid
from decimal import Decimal

import pytest
from cassandra.util import Date, Duration, OrderedMapSerializedKey, SortedSet, Time

TIMEUUID = uuid.UUID("e6a7a070-8e1e-11ee-b9d1-0242ac120002")  # version 1
UUID4 = uuid.UUID("550e8400-e29b-41d4-a716-446655440000")

COLUMNS = [
    ("a", "ascii"),
    ("t", "text"),
    ("vc", "varchar"),
    ("b", "blob"),
    ("bo", "boolean"),
    ("ti", "tinyint"),
    ("si", "smallint"),
    ("i", "int"),
    ("bi", "bigint"),
    ("vi", "varint"),
    ("f", "float"),
    ("d", "double"),
    ("de", "decimal"),
    ("u", "uuid"),
    ("tu", "timeuuid"),
    ("ts", "timestamp"),
    ("dt", "date"),
    ("tm", "time"),
    ("du", "duration"),
    ("ip", "inet"),
    ("l", "list<int>"),
    ("s", "set<text>"),
    ("m", "map<text, int>"),
    ("fl", "frozen<list<int>>"),
    ("tp", "tuple<int, text>"),
    ("ud", "frozen<addr>"),
]
NAMES = [c for c, _ in COLUMNS]

# Row 1: ordinary values, as CQL literals and as the Python values read back.
LITERALS_1 = {
    "a": "'ascii text'",
    "t": "'text ünïcödé ✓'",
    "vc": "'varchar'",
    "b": "0xcafe00ff",
    "bo": "true",
    "ti": "-128",
    "si": "32767",
    "i": "2147483647",
    "bi": "-9223372036854775808",
    "vi": "123456789012345678901234567890",
    "f": "1.5",
    "d": "3.141592653589793",
    "de": "12345.6789",
    "u": str(UUID4),
    "tu": str(TIMEUUID),
    "ts": "'2024-02-29 12:34:56.789+0000'",
    "dt": "'2024-02-29'",
    "tm": "'13:45:56.123456789'",
    "du": "1y2mo3d4h5m6s7ms8us9ns",
    "ip": "'192.168.1.1'",
    "l": "[3, 1, 2]",
    "s": "{'b', 'a'}",
    "m": "{'y': 2, 'x': 1}",
    "fl": "[4, 5]",
    "tp": "(7, 'seven')",
    "ud": "{street: 'Main St', zip: 12345}",
}
VALUES_1 = {
    "a": "ascii text",
    "t": "text ünïcödé ✓",
    "vc": "varchar",
    "b": b"\xca\xfe\x00\xff",
    "bo": True,
    "ti": -128,
    "si": 32767,
    "i": 2147483647,
    "bi": -9223372036854775808,
    "vi": 123456789012345678901234567890,
    "f": 1.5,
    "d": 3.141592653589793,
    "de": Decimal("12345.6789"),
    "u": UUID4,
    "tu": TIMEUUID,
    "ts": datetime.datetime(2024, 2, 29, 12, 34, 56, 789000),
    "dt": Date(datetime.date(2024, 2, 29)),
    "tm": Time("13:45:56.123456789"),
    "du": Duration(14, 3, 14_706_007_008_009),
    "ip": "192.168.1.1",
    "l": [3, 1, 2],
    "s": {"a", "b"},
    "m": {"x": 1, "y": 2},
    "fl": [4, 5],
    "tp": (7, "seven"),
    "ud": ("Main St", 12345),
}

# Row 2: edge values (extremes, empty strings and blobs, negative numbers, IPv6).
LITERALS_2 = {
    "a": "''",
    "t": "'it''s'",
    "vc": "''",
    "b": "0x",
    "bo": "false",
    "ti": "127",
    "si": "-32768",
    "i": "-2147483648",
    "bi": "9223372036854775807",
    "vi": "-1267650600228229401496703205376",
    "f": "-0.25",
    "d": "-1.0E-300",
    "de": "-1.500E+10",
    "u": "00000000-0000-0000-0000-000000000000",
    "tu": str(TIMEUUID),
    "ts": "-1000",
    "dt": "'1969-12-31'",
    "tm": "'00:00:00'",
    "du": "-2d",
    "ip": "'::1'",
    "l": "[-1]",
    "s": "{''}",
    "m": "{'': -1}",
    "fl": "[]",
    "tp": "(null, null)",
    "ud": "{street: null, zip: 0}",
}
VALUES_2 = {
    "a": "",
    "t": "it's",
    "vc": "",
    "b": b"",
    "bo": False,
    "ti": 127,
    "si": -32768,
    "i": -2147483648,
    "bi": 9223372036854775807,
    "vi": -(2**100),
    "f": -0.25,
    "d": -1.0e-300,
    "de": Decimal("-1.500E+10"),
    "u": uuid.UUID(int=0),
    "tu": TIMEUUID,
    "ts": datetime.datetime(1969, 12, 31, 23, 59, 59),
    "dt": Date(datetime.date(1969, 12, 31)),
    "tm": Time(0),
    "du": Duration(0, -2, 0),
    "ip": "::1",
    "l": [-1],
    "s": {""},
    "m": {"": -1},
    "fl": [],
    "tp": (None, None),
    "ud": (None, 0),
}


def _bind_value(col, value):
    """The Python value to bind for a column in a prepared statement."""
    if col == "s":
        return set(value)
    if col == "m":
        return dict(value)
    return value


def _norm(value):
    if isinstance(value, SortedSet):
        return set(value)
    if isinstance(value, OrderedMapSerializedKey):
        return dict(value)
    if isinstance(value, tuple):  # tuples and UDTs (namedtuples)
        return tuple(value)
    return value


def _same(got, exp):
    if isinstance(exp, float) and isinstance(got, float) and math.isnan(exp):
        return math.isnan(got)
    if isinstance(exp, Decimal):
        # Cassandra keeps the scale: 1.500E+10 is not 1.5E+10.
        return isinstance(got, Decimal) and got == exp and got.as_tuple() == exp.as_tuple()
    if type(exp) is bool or type(exp) is int:
        return type(got) is type(exp) and got == exp
    return _norm(got) == exp


def assert_row(row, expected, context):
    assert row is not None, f"{context}: row not found"
    got = row._asdict()
    bad = [f"  {c}: expected {e!r}, got {got.get(c)!r}" for c, e in expected.items() if not _same(got.get(c), e)]
    assert not bad, f"{context}: {len(bad)} column(s) differ:\n" + "\n".join(bad)


@pytest.fixture
def all_types(ks_session):
    ks_session.execute("CREATE TYPE addr (street text, zip int)")
    cols = ", ".join(f"{c} {t}" for c, t in COLUMNS)
    ks_session.execute(f"CREATE TABLE all_types (k int PRIMARY KEY, {cols})")
    return ks_session


def _insert_literals(session, k, literals):
    cols = ", ".join(literals)
    vals = ", ".join(literals.values())
    session.execute(f"INSERT INTO all_types (k, {cols}) VALUES ({k}, {vals})")


@pytest.mark.parametrize("row_id,literals,values", [(1, LITERALS_1, VALUES_1), (2, LITERALS_2, VALUES_2)], ids=["ordinary", "edges"])
def test_literals_round_trip(all_types, row_id, literals, values):
    _insert_literals(all_types, row_id, literals)
    row = all_types.execute(f"SELECT * FROM all_types WHERE k = {row_id}").one()
    assert_row(row, values, f"literal row {row_id}")


@pytest.mark.parametrize("row_id,values", [(1, VALUES_1), (2, VALUES_2)], ids=["ordinary", "edges"])
def test_prepared_round_trip(all_types, row_id, values):
    ins = all_types.prepare(f"INSERT INTO all_types (k, {', '.join(NAMES)}) VALUES (?{', ?' * len(NAMES)})")
    all_types.execute(ins, [row_id] + [_bind_value(c, values[c]) for c in NAMES])
    sel = all_types.prepare("SELECT * FROM all_types WHERE k = ?")
    row = all_types.execute(sel, [row_id]).one()
    assert_row(row, values, f"prepared row {row_id}")


def test_literal_and_prepared_writes_read_the_same(all_types):
    _insert_literals(all_types, 1, LITERALS_1)
    ins = all_types.prepare(f"INSERT INTO all_types (k, {', '.join(NAMES)}) VALUES (?{', ?' * len(NAMES)})")
    all_types.execute(ins, [2] + [_bind_value(c, VALUES_1[c]) for c in NAMES])
    rows = {r.k: r._asdict() for r in all_types.execute("SELECT * FROM all_types")}
    assert set(rows) == {1, 2}
    r1, r2 = rows[1], rows[2]
    diff = [c for c in NAMES if _norm(r1[c]) != _norm(r2[c])]
    assert not diff, f"literal vs prepared differ in {diff}: {[(r1[c], r2[c]) for c in diff]}"


def test_collection_order_is_cassandras(all_types):
    _insert_literals(all_types, 1, LITERALS_1)
    row = all_types.execute("SELECT l, s, m FROM all_types WHERE k = 1").one()
    assert list(row.l) == [3, 1, 2], "a list keeps insertion order"
    assert list(row.m.keys()) == ["x", "y"], f"map keys come back sorted, got {list(row.m.keys())}"


def test_special_floats(all_types):
    all_types.execute("INSERT INTO all_types (k, f, d) VALUES (3, NaN, -Infinity)")
    all_types.execute("INSERT INTO all_types (k, f, d) VALUES (4, Infinity, NaN)")
    r3 = all_types.execute("SELECT f, d FROM all_types WHERE k = 3").one()
    r4 = all_types.execute("SELECT f, d FROM all_types WHERE k = 4").one()
    assert math.isnan(r3.f) and r3.d == -math.inf, f"got {r3}"
    assert r4.f == math.inf and math.isnan(r4.d), f"got {r4}"


def test_timestamp_literal_forms(all_types):
    forms = {
        10: ("'2024-02-29 12:34:56.789+0000'", datetime.datetime(2024, 2, 29, 12, 34, 56, 789000)),
        11: ("'2024-02-29T12:34:56Z'", datetime.datetime(2024, 2, 29, 12, 34, 56)),
        12: ("'2024-02-29'", datetime.datetime(2024, 2, 29)),
        13: ("1709210096789", datetime.datetime(2024, 2, 29, 12, 34, 56, 789000)),
        14: ("'2024-02-29 14:34:56+0200'", datetime.datetime(2024, 2, 29, 12, 34, 56)),
    }
    for k, (lit, _) in forms.items():
        all_types.execute(f"INSERT INTO all_types (k, ts) VALUES ({k}, {lit})")
    for k, (lit, exp) in forms.items():
        row = all_types.execute(f"SELECT ts FROM all_types WHERE k = {k}").one()
        assert row.ts == exp, f"timestamp literal {lit}: expected {exp}, got {row.ts}"


def test_nulls_everywhere(all_types):
    all_types.execute("INSERT INTO all_types (k) VALUES (5)")
    row = all_types.execute("SELECT * FROM all_types WHERE k = 5").one()
    assert_row(row, {c: None for c in NAMES}, "row with only a key")

    ins = all_types.prepare(f"INSERT INTO all_types (k, {', '.join(NAMES)}) VALUES (?{', ?' * len(NAMES)})")
    all_types.execute(ins, [6] + [None] * len(NAMES))
    row = all_types.execute("SELECT * FROM all_types WHERE k = 6").one()
    assert row is not None, "a row inserted with all-null values still exists (row marker)"
    assert_row(row, {c: None for c in NAMES}, "prepared all-null row")

    # Writing null over a value deletes it.
    _insert_literals(all_types, 7, LITERALS_1)
    all_types.execute("INSERT INTO all_types (k, i, t, l) VALUES (7, null, null, null)")
    row = all_types.execute("SELECT i, t, l, bi FROM all_types WHERE k = 7").one()
    assert (row.i, row.t, row.l, row.bi) == (None, None, None, VALUES_1["bi"]), f"got {row}"


def test_empty_collections_read_back_as_null(all_types):
    all_types.execute("INSERT INTO all_types (k, l, s, m) VALUES (8, [], {}, {})")
    row = all_types.execute("SELECT l, s, m FROM all_types WHERE k = 8").one()
    assert row is not None, "row with empty collections must exist (row marker)"
    assert (row.l, row.s, row.m) == (None, None, None), f"empty collections must read as null, got {row}"

    ins = all_types.prepare("INSERT INTO all_types (k, l, s, m) VALUES (?, ?, ?, ?)")
    all_types.execute(ins, [9, [], set(), {}])
    row = all_types.execute("SELECT l, s, m FROM all_types WHERE k = 9").one()
    assert (row.l, row.s, row.m) == (None, None, None), f"bound empty collections must read as null, got {row}"

    # Overwriting a non-empty collection with an empty one clears it.
    all_types.execute("INSERT INTO all_types (k, l, s, m) VALUES (10, [1], {'a'}, {'a': 1})")
    all_types.execute("UPDATE all_types SET l = [], s = {}, m = {} WHERE k = 10")
    row = all_types.execute("SELECT l, s, m FROM all_types WHERE k = 10").one()
    assert (row.l, row.s, row.m) == (None, None, None), f"got {row}"


def test_frozen_empty_list_is_a_value(all_types):
    all_types.execute("INSERT INTO all_types (k, fl) VALUES (11, [])")
    row = all_types.execute("SELECT fl FROM all_types WHERE k = 11").one()
    assert row.fl == [], f"a frozen empty list is a value, not null: got {row.fl!r}"


def test_result_metadata_names_and_order(all_types):
    _insert_literals(all_types, 1, LITERALS_1)
    rs = all_types.execute("SELECT bi, k, t, ud FROM all_types WHERE k = 1")
    assert rs.column_names == ["bi", "k", "t", "ud"]
    row = rs.one()
    assert row.ud.street == "Main St" and row.ud.zip == 12345, f"UDT fields by name: {row.ud!r}"


# ---------------------------------------------------------------- clustering order per type
#
# Clustering columns sort by their type's comparator (checked against
# Cassandra 5.0): numbers numerically, text/ascii/blob/inet as unsigned bytes
# (a prefix first), uuid by version then unsigned bits, timeuuid by time then
# the low 64 bits as a signed long, dates and times chronologically.


def _signed64(x):
    return x - (1 << 64) if x >= (1 << 63) else x


def _inet_key(a):
    import socket

    return socket.inet_pton(socket.AF_INET6 if ":" in a else socket.AF_INET, a)


ORDER_CASES = {
    "tinyint": ([5, -128, 127, 0, -1, 1], int),
    "smallint": ([300, -32768, 32767, 0, -1, -300], int),
    "int": ([2**31 - 1, -(2**31), 0, -1, 1, 256, -256], int),
    "bigint": ([2**63 - 1, -(2**63), 0, -1, 1, 2**32, -(2**32)], int),
    "varint": ([0, -1, 1, 127, 128, -128, -129, 2**100, -(2**100), 255, 256], int),
    "decimal": ([Decimal("0"), Decimal("-1.5"), Decimal("1.25"), Decimal("100"), Decimal("-100.001"),
                 Decimal("1E+10"), Decimal("0.001"), Decimal("-0.002")], Decimal),
    "float": ([0.0, -1.5, 1.5, 2.0**100, -(2.0**100), 0.25, float("inf"), float("-inf")], float),
    "double": ([0.0, -1.5, 1.5, 1e300, -1e300, 0.1, -0.1, float("inf"), float("-inf")], float),
    "text": (["", "Z", "a", "aa", "é", "中", "b", "\x00", "\x7f", "ÿ"], lambda s: s.encode("utf-8")),
    "ascii": (["", "A", "a", "ab", "b", "\x01", "~", "0"], lambda s: s.encode("ascii")),
    "blob": ([b"", b"\x00", b"\x00\x00", b"\x7f", b"\x80", b"\xff", b"\x01\xff", b"a"], bytes),
    "boolean": ([True, False], int),
    "uuid": ([uuid.UUID("00000000-0000-4000-8000-000000000000"), uuid.UUID("ffffffff-ffff-4fff-bfff-ffffffffffff"),
              uuid.UUID("7fffffff-ffff-4fff-8fff-ffffffffffff"), uuid.UUID("80000000-0000-4000-8000-000000000001"),
              uuid.UUID("80000000-0000-4000-7000-000000000001"), uuid.UUID("80000000-0000-4000-f000-000000000001"),
              uuid.UUID("00000000-0000-1000-8000-000000000000"), uuid.UUID("00000000-0000-6000-8000-000000000000")],
             lambda u: ((u.int >> 76) & 0xF, u.int)),
    "timeuuid": ([uuid.UUID("00000001-0000-1000-8000-000000000000"), uuid.UUID("00000000-0001-1000-8000-000000000000"),
                  uuid.UUID("00000000-0000-1001-8000-000000000000"), uuid.UUID("00000000-0000-1000-0000-000000000000"),
                  uuid.UUID("00000000-0000-1000-ff00-000000000000"), uuid.UUID("00000000-0000-1000-7f00-000000000000"),
                  uuid.UUID("00000000-0000-1000-8000-000000000001"), uuid.UUID("e6a7a070-8e1e-11ee-b9d1-0242ac120002")],
                 lambda u: (u.time, _signed64(u.int & ((1 << 64) - 1)))),
    "timestamp": ([datetime.datetime(2024, 1, 1), datetime.datetime(1969, 12, 31, 23, 59, 59),
                   datetime.datetime(1900, 1, 1), datetime.datetime(2100, 1, 1), datetime.datetime(1970, 1, 1),
                   datetime.datetime(2024, 1, 1, 0, 0, 0, 1000)], lambda d: d),
    "date": ([Date(datetime.date(2024, 1, 1)), Date(datetime.date(1969, 12, 31)), Date(datetime.date(1, 1, 1)),
              Date(datetime.date(9999, 12, 31)), Date(datetime.date(1970, 1, 1))], lambda d: d.days_from_epoch),
    "time": ([Time(0), Time("23:59:59.999999999"), Time("12:00:00"), Time("00:00:00.000000001"), Time("11:59:59")],
             lambda t: t.nanosecond_time),
    "inet": (["10.0.0.1", "::1", "9.255.255.255", "255.255.255.255", "fe80::1", "0.0.0.0", "::"], _inet_key),
    "frozen<list<int>>": ([[1], [1, 0], [2], [], [0, 5], [-1]], list),
    "tuple<int, text>": ([(1, "b"), (1, "a"), (0, "z"), (-5, "a"), (2, "")], tuple),
}


@pytest.fixture(scope="module")
def order_tables(module_ks_session):
    s = module_ks_session
    names = {}
    for i, typ in enumerate(ORDER_CASES):
        asc, desc = f"ord_{i}", f"ord_{i}_desc"
        s.execute(f"CREATE TABLE {asc} (k int, c {typ}, v int, PRIMARY KEY (k, c))")
        s.execute(f"CREATE TABLE {desc} (k int, c {typ}, v int, PRIMARY KEY (k, c)) WITH CLUSTERING ORDER BY (c DESC)")
        names[typ] = (asc, desc)
    return s, names


@pytest.mark.parametrize("typ", list(ORDER_CASES))
def test_clustering_order_by_type(order_tables, typ):
    import random

    s, names = order_tables
    values, key = ORDER_CASES[typ]
    expected = sorted(values, key=key)
    shuffled = list(values)
    random.Random(7).shuffle(shuffled)
    for table, want in ((names[typ][0], expected), (names[typ][1], expected[::-1])):
        ins = s.prepare(f"INSERT INTO {table} (k, c, v) VALUES (0, ?, 1)")
        for v in shuffled:
            s.execute(ins, (v,))
        got = [_norm(r.c) for r in s.execute(f"SELECT c FROM {table} WHERE k = 0")]
        assert got == [_norm(v) for v in want], f"{table} ({typ}): rows in the wrong order\n got {got}\nwant {want}"
        # A slice with both bounds, in the table's order.
        lo, hi = expected[1], expected[-2]
        sel = s.prepare(f"SELECT c FROM {table} WHERE k = 0 AND c > ? AND c <= ?")
        got = [_norm(r.c) for r in s.execute(sel, (lo, hi))]
        inside = expected[2:-1] if table == names[typ][0] else expected[2:-1][::-1]
        assert got == [_norm(v) for v in inside], f"{table} ({typ}): slice ({lo!r}, {hi!r}]\n got {got}\nwant {inside}"
        rev = [_norm(r.c) for r in s.execute(f"SELECT c FROM {table} WHERE k = 0 ORDER BY c ASC")]
        assert rev == [_norm(v) for v in expected], f"{table} ({typ}): ORDER BY c ASC"


def test_static_column_shared_by_partition(ks_session):
    s = ks_session
    s.execute("CREATE TABLE st (k int, c int, s text static, v int, PRIMARY KEY (k, c))")
    s.execute("INSERT INTO st (k, c, s, v) VALUES (1, 1, 'first', 10)")
    s.execute("INSERT INTO st (k, c, v) VALUES (1, 2, 20)")
    s.execute("UPDATE st SET s = 'shared' WHERE k = 1")
    rows = [(r.c, r.s, r.v) for r in s.execute("SELECT c, s, v FROM st WHERE k = 1")]
    assert rows == [(1, "shared", 10), (2, "shared", 20)], f"a static column is one value per partition: {rows}"
    s.execute("INSERT INTO st (k, s) VALUES (2, 'only static')")
    rows = [(r.k, r.c, r.s) for r in s.execute("SELECT k, c, s FROM st WHERE k = 2")]
    assert rows == [(2, None, "only static")], f"a partition with only a static value: {rows}"
    distinct = sorted((r.k, r.s) for r in s.execute("SELECT DISTINCT k, s FROM st"))
    assert distinct == [(1, "shared"), (2, "only static")], f"SELECT DISTINCT k, s: {distinct}"


@pytest.fixture
def srt(ks_session):
    ks_session.execute("CREATE TABLE srt (k int, c frozen<set<text>>, m map<text, int>, fm frozen<map<text, int>>, "
                       "fs frozen<set<int>>, PRIMARY KEY (k, c))")
    return ks_session, ks_session.prepare("INSERT INTO srt (k, c, m, fm, fs) VALUES (?, ?, ?, ?, ?)")


# Sets and map keys are kept in their type's order whatever order the client
# serialized them in (a list binds as a set in the given order; an OrderedDict
# keeps its order on the wire).
UNSORTED_MAP = {"b": 2, "a": 1, "c": 3}


def test_bound_map_keys_come_back_sorted(srt):
    s, ins = srt
    s.execute(ins, (1, ["x"], UNSORTED_MAP, None, [3, -1, 2]))
    row = s.execute("SELECT m, fs FROM srt WHERE k = 1").one()
    assert list(row.m.keys()) == ["a", "b", "c"], f"map keys sorted: {list(row.m.keys())}"
    assert list(row.fs) == [-1, 2, 3]


def test_bound_frozen_map_keys_come_back_sorted(srt):
    s, ins = srt
    s.execute(ins, (1, ["x"], None, UNSORTED_MAP, None))
    row = s.execute("SELECT fm FROM srt WHERE k = 1").one()
    assert list(row.fm.keys()) == ["a", "b", "c"], f"frozen map keys sorted: {list(row.fm.keys())}"


def test_frozen_set_clustering_key_is_canonical(srt):
    s, ins = srt
    s.execute(ins, (1, ["y", "x"], None, None, None))
    s.execute(ins, (1, ["x", "y"], None, None, None))
    rows = list(s.execute("SELECT c FROM srt WHERE k = 1"))
    assert len(rows) == 1, f"{{'y','x'}} and {{'x','y'}} are one clustering key: {rows}"
    assert s.execute("SELECT c FROM srt WHERE k = 1 AND c = {'x', 'y'}").one() is not None


def test_collection_literals_are_canonical(srt):
    s, _ = srt
    s.execute("INSERT INTO srt (k, c, fm) VALUES (2, {'y', 'x', 'y'}, {'z': 1, 'a': 2})")
    row = s.execute("SELECT c, fm FROM srt WHERE k = 2 AND c = {'x', 'y'}").one()
    assert row is not None, "a set literal with duplicates and unsorted elements is the canonical set"
    assert list(row.fm.keys()) == ["a", "z"], f"frozen map literal keys sorted: {list(row.fm.keys())}"


def test_large_values(ks_session):
    s = ks_session
    s.execute("CREATE TABLE big (k int PRIMARY KEY, b blob, t text, l list<blob>)")
    ins = s.prepare("INSERT INTO big (k, b, t, l) VALUES (?, ?, ?, ?)")
    sizes = [1 << 20, 5 << 20]
    for i, n in enumerate(sizes):
        blob = bytes(range(256)) * (n // 256)
        s.execute(ins, (i, blob, "é" * (n // 2), [blob[: n // 4]] * 3))
    for i, n in enumerate(sizes):
        row = s.execute("SELECT b, t, l FROM big WHERE k = %s", (i,)).one()
        assert row is not None and len(row.b) == n and row.b == bytes(range(256)) * (n // 256), f"{n}-byte blob"
        assert row.t == "é" * (n // 2), f"{n}-byte text"
        assert len(row.l) == 3 and all(len(x) == n // 4 for x in row.l)
