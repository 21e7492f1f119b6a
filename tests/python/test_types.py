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
