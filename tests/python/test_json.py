"""JSON support, as Cassandra 5.0.9 has it: SELECT JSON (one `[json]` text
column, a JSON object per row), INSERT JSON (literal and bind marker,
DEFAULT NULL / DEFAULT UNSET), toJson() in the selection and fromJson() in
terms, with every type's JSON text both ways and Cassandra's error messages.

Every expected text here was read from a Cassandra 5.0.9 node
(SHOAL_TEST_EXTERNAL=127.0.0.1:9042). Where the two differ on purpose the
test says so: a value fromJson() cannot read is a FUNCTION_FAILURE error in
Cassandra and an INVALID one in Shoal (same message), and Shoal refuses the
empty value of a tinyint, smallint or duration (`""`) that Cassandra stores
without validating it."""

import json

import pytest
from cassandra import FunctionFailure, InvalidRequest
from cassandra.query import SimpleStatement

from shoal_harness import EXTERNAL

JACKSON_AT = "[Source: REDACTED (`StreamReadFeature.INCLUDE_SOURCE_IN_LOCATION` disabled)"


@pytest.fixture(scope="module")
def js(module_ks_session):
    s = module_ks_session
    s.execute('CREATE TYPE addr (street text, "Zip" int)')
    s.execute(
        "CREATE TABLE t (k int PRIMARY KEY, a ascii, t text, b blob, bo boolean, ti tinyint, si smallint, i int,"
        " bi bigint, vi varint, f float, d double, de decimal, u uuid, tu timeuuid, ip inet, ts timestamp,"
        " dt date, tm time, du duration, l list<int>, st set<text>, m map<int, text>, fl frozen<list<int>>,"
        ' tup tuple<int, text>, ud frozen<addr>, "Cap" int, mt map<timestamp, boolean>,'
        " mf map<frozen<list<int>>, int>)"
    )
    s.execute("CREATE TABLE c (p int, c int, v int, s int static, PRIMARY KEY (p, c))")
    return s


def one(session, query, params=None):
    rows = list(session.execute(query, params))
    assert len(rows) == 1, rows
    return rows[0][0]


def invalid(session, query, params=None):
    with pytest.raises(InvalidRequest) as e:
        session.execute(query, params)
    return str(e.value)


def message(error):
    """The server's message inside the driver's error text."""
    text = str(error)
    return text.split('message="', 1)[1].rsplit('"', 1)[0] if 'message="' in text else text


EVERY_TYPE = (
    '{"k": 1, "a": "abc", "t": "h\\u00e9\\"\\\\\\n\\t\\u0001/", "b": "0x00ff", "bo": true, "ti": 1, "si": -2,'
    ' "i": 3, "bi": 4, "vi": 123456789012345678901234567890, "f": 1.5, "d": 0.1, "de": 1.10,'
    ' "u": "b1a2c3d4-0000-4000-8000-000000000000", "tu": "6ba7b810-9dad-11d1-80b4-00c04fd430c8", "ip": "::1",'
    ' "ts": "2011-02-03 04:05:00", "dt": "2011-02-03", "tm": "08:12:54.123456789", "du": "1y2mo3d4h5m6s7ms8us9ns",'
    ' "l": [1,2], "st": ["b","a"], "m": {"2": "x", "1": "y"}, "fl": [3], "tup": [1, "z"],'
    ' "ud": {"street": "s", "\\"Zip\\"": 5}, "\\"Cap\\"": 7, "mt": {"2011-02-03 04:05:00": true},'
    ' "mf": {"[1, 2]": 3}}'
)

EVERY_TYPE_OUT = (
    '{"k": 1, "\\"Cap\\"": 7, "a": "abc", "b": "0x00ff", "bi": 4, "bo": true, "d": 0.1, "de": 1.1,'
    ' "dt": "2011-02-03", "du": "1y2mo3d4h5m6s7ms8us9ns", "f": 1.5, "fl": [3], "i": 3, "ip": "0:0:0:0:0:0:0:1",'
    ' "l": [1, 2], "m": {"1": "y", "2": "x"}, "mf": {"[1, 2]": 3}, "mt": {"2011-02-03 04:05:00.000Z": true},'
    ' "si": -2, "st": ["a", "b"], "t": "hé\\"\\\\\\n\\t\\u0001/", "ti": 1, "tm": "08:12:54.123456789",'
    ' "ts": "2011-02-03 04:05:00.000Z", "tu": "6ba7b810-9dad-11d1-80b4-00c04fd430c8", "tup": [1, "z"],'
    ' "u": "b1a2c3d4-0000-4000-8000-000000000000", "ud": {"street": "s", "\\"Zip\\"": 5},'
    ' "vi": 123456789012345678901234567890}'
)


def test_every_type_round_trips_through_insert_json_and_select_json(js):
    js.execute("INSERT INTO t JSON %s", [EVERY_TYPE])
    rs = js.execute("SELECT JSON * FROM t WHERE k = 1")
    assert rs.column_names == ["[json]"]
    rows = list(rs)
    assert [r[0] for r in rows] == [EVERY_TYPE_OUT]
    # Case-sensitive names keep their double quotes inside the key.
    assert json.loads(rows[0][0])['"Cap"'] == 7


def test_values_print_as_cassandra_prints_them(js):
    js.execute(
        "INSERT INTO t (k, d, f, de, ip, ts, du, dt, tm) VALUES"
        " (3, 1e20, 1e-5, 1e3, '1.2.3.4', -62135596800001, 0s, '-0001-01-01', '00:00:00')"
    )
    assert one(js, "SELECT JSON k, d, f, de, ip, ts, du, dt, tm FROM t WHERE k = 3") == (
        '{"k": 3, "d": 1.0E20, "f": 1.0E-5, "de": 1E+3, "ip": "1.2.3.4", "ts": "0001-12-31 23:59:59.999Z",'
        ' "du": "", "dt": "-0001-01-01", "tm": "00:00:00.000000000"}'
    )
    js.execute("INSERT INTO t (k, ts, ip, dt, de) VALUES (4, 253402300800000, '2001:db8::1', '+12345-01-01', 0.000001)")
    assert one(js, "SELECT JSON k, ts, ip, dt, de FROM t WHERE k = 4") == (
        '{"k": 4, "ts": "+10000-01-01 00:00:00.000Z", "ip": "2001:db8:0:0:0:0:0:1", "dt": "+12345-01-01",'
        ' "de": 0.000001}'
    )
    js.execute("INSERT INTO t (k, de, d, f) VALUES (5, 0.0000001, 12345678.9, 1.0E7)")
    assert one(js, "SELECT JSON k, de, d, f FROM t WHERE k = 5") == '{"k": 5, "de": 1E-7, "d": 1.23456789E7, "f": 1.0E7}'
    # JSON has no NaN or infinities: null.
    js.execute("INSERT INTO t (k, f, d) VALUES (2, NaN, -Infinity)")
    assert one(js, "SELECT JSON k, f, d FROM t WHERE k = 2") == '{"k": 2, "f": null, "d": null}'
    js.execute("INSERT INTO t (k, de, du, tm) VALUES (90, -1.5E-10, -5ns, 1)")
    assert one(js, "SELECT JSON k, de, du, tm FROM t WHERE k = 90") == (
        '{"k": 90, "de": -1.5E-10, "du": "-5ns", "tm": "00:00:00.000000001"}'
    )
    js.execute("INSERT INTO t (k, de, f, d) VALUES (92, 0.00000, 123456.7, 9999999.0)")
    assert one(js, "SELECT JSON k, de, f, d FROM t WHERE k = 92") == '{"k": 92, "de": 0.00000, "f": 123456.7, "d": 9999999.0}'


def test_what_json_values_are_read_as(js):
    js.execute(
        "INSERT INTO t JSON %s",
        [
            '{"k": 29, "ts": "2011-02-03T04:05:06.789+0200", "de": "1.50", "f": "1e3", "d": " 2.5 ", "vi": "+12",'
            ' "i": "+5", "bi": "-0", "si": "12", "ti": 7, "bo": "TRUE", "ip": "::ffff:1.2.3.4", "l": "[1, 2]",'
            ' "m": "{\\"1\\": \\"a\\"}", "mt": {"1000": false}, "b": "0x", "tup": [1, null], "ud": {"STREET": "n"}}'
        ],
    )
    assert one(js, "SELECT JSON k, ts, de, f, d, vi, i, bi, si, ti, bo, ip, l, m, mt, b, tup, ud FROM t WHERE k = 29") == (
        '{"k": 29, "ts": "2011-02-03 02:05:06.789Z", "de": 1.50, "f": 1000.0, "d": 2.5, "vi": 12, "i": 5, "bi": 0,'
        ' "si": 12, "ti": 7, "bo": true, "ip": "1.2.3.4", "l": [1, 2], "m": {"1": "a"},'
        ' "mt": {"1970-01-01 00:00:01.000Z": false}, "b": "0x", "tup": [1, null],'
        ' "ud": {"street": "n", "\\"Zip\\"": null}}'
    )
    # A timestamp number must be a Java Long: one that fits an int is refused.
    js.execute("INSERT INTO t JSON '{\"k\": 30, \"ts\": 3000000000, \"f\": 16777217, \"d\": 9007199254740993}'")
    assert one(js, "SELECT JSON ts, f, d FROM t WHERE k = 30") == (
        '{"ts": "1970-02-04 17:20:00.000Z", "f": 1.6777216E7, "d": 9.007199254740992E15}'
    )
    # An empty string is the empty value: "" in SELECT JSON, null from toJson().
    js.execute("INSERT INTO t JSON '{\"k\": 80, \"i\": \"\", \"f\": \"\", \"bo\": \"\", \"u\": \"\", \"t\": \"\"}'")
    assert one(js, "SELECT JSON i, f, bo, u, t FROM t WHERE k = 80") == '{"i": "", "f": "", "bo": false, "u": "", "t": ""}'
    row = list(js.execute("SELECT toJson(i), toJson(f), toJson(bo), toJson(u), toJson(t) FROM t WHERE k = 80"))[0]
    assert tuple(row) == ("null", "null", "false", "null", '""')


def test_strings_are_escaped_as_jackson_escapes_them(js):
    js.execute("INSERT INTO t JSON %s", ['{"k": 203, "t": "\\u001f\\u007f\\u2028\\ud800", "a": "/\\b\\f\\r"}'])
    # Control characters below 0x20 as \u00XX (upper case) or their short escape; nothing else is
    # escaped; a surrogate without its pair is stored as '?' (Java's UTF-8 encoder).
    assert one(js, "SELECT JSON t, a FROM t WHERE k = 203") == '{"t": "\\u001F\x7f\u2028?", "a": "/\\b\\f\\r"}'


def test_insert_json_default_null_and_default_unset(js):
    js.execute("INSERT INTO t JSON '{\"k\": 40, \"i\": 4, \"t\": \"x\", \"l\": [1]}'")
    js.execute("INSERT INTO t JSON '{\"k\": 40, \"i\": 5}' DEFAULT UNSET")
    assert one(js, "SELECT JSON i, t, l FROM t WHERE k = 40") == '{"i": 5, "t": "x", "l": [1]}'
    # An explicit null is a null with DEFAULT UNSET too.
    js.execute("INSERT INTO t JSON '{\"k\": 40, \"t\": null}' DEFAULT UNSET")
    assert one(js, "SELECT JSON i, t, l FROM t WHERE k = 40") == '{"i": 5, "t": null, "l": [1]}'
    # DEFAULT NULL (the default) clears the columns the document leaves out.
    js.execute("INSERT INTO t JSON '{\"k\": 40, \"i\": 6}' DEFAULT NULL")
    assert one(js, "SELECT JSON i, t, l FROM t WHERE k = 40") == '{"i": 6, "t": null, "l": null}'
    # Keys are case-insensitive unless quoted: "I", lower-cased after the document is read, replaces
    # the value of "i". A repeated key's last value wins; text after the document is ignored.
    js.execute("INSERT INTO t JSON '{\"K\": 41, \"I\": 1, \"i\": 2} trailing'")
    assert one(js, "SELECT JSON k, i FROM t WHERE k = 41") == '{"k": 41, "i": 1}'
    js.execute("INSERT INTO t JSON '{\"k\": 42, \"i\": 1, \"i\": 2}'")
    assert one(js, "SELECT JSON k, i FROM t WHERE k = 42") == '{"k": 42, "i": 2}'


def test_insert_json_with_a_bind_marker(js):
    p = js.prepare("INSERT INTO t JSON ? USING TTL ?")
    assert [(c.keyspace_name, c.table_name, c.name, c.type.typename) for c in p.column_metadata] == [
        (js.keyspace, "t", "[json]", "varchar"),
        (js.keyspace, "t", "[ttl]", "int"),
    ]
    assert not p.routing_key_indexes
    js.execute(p, ['{"k": 50, "i": 4, "t": "x"}', 500])
    p2 = js.prepare("INSERT INTO t JSON :doc DEFAULT UNSET")
    assert [c.name for c in p2.column_metadata] == ["doc"]
    js.execute(p2, ['{"k": 50, "i": 5}'])
    assert one(js, "SELECT JSON i, t FROM t WHERE k = 50") == '{"i": 5, "t": "x"}'
    assert message(invalid(js, p, ['{"k": 50, "i": "z"}', 5])) == "Error decoding JSON value for i: Unable to make int from 'z'"
    assert message(invalid(js, p, [None, 5])) == "Got null for INSERT JSON values"


def test_insert_json_errors(js):
    def err(doc, suffix=""):
        return message(invalid(js, "INSERT INTO t JSON %s" + suffix, [doc]))

    assert err('{"k": 10, "zzz": 1}') == "JSON values map contains unrecognized column: zzz"
    assert err('{"k": 10, "I": 1, "Zzz": 1}') == "JSON values map contains unrecognized column: zzz"
    assert err('{"k": 10, "cap": 1}') == "JSON values map contains unrecognized column: cap"
    assert err('{"\\"k\\"": 28, "\\"I\\"": 1}') == "JSON values map contains unrecognized column: I"
    # Primary key columns the document leaves out are null (or unset).
    assert err('{"i": 1}') == "Invalid null value in condition for column k"
    assert err('{"i": 1}', " DEFAULT UNSET") == "Invalid unset value for column k"
    assert err('{"k": null, "i": 1}') == "Invalid null value in condition for column k"
    assert message(invalid(js, "INSERT INTO c JSON '{\"p\": 1, \"v\": 1}'")) == "Invalid null value in condition for column c"
    assert message(invalid(js, "INSERT INTO c JSON '{\"p\": 1, \"s\": 1}'")) == "Invalid null value in condition for column c"
    assert message(invalid(js, "INSERT INTO c JSON '{\"c\": 1, \"v\": 1}'")) == "Invalid null value in condition for column p"

    bad = {
        '"k": "abc"': "k: Unable to make int from 'abc'",
        '"k": 1.5': "k: Expected an int value, but got a Double: 1.5",
        '"k": 3000000000': "k: Expected an int value, but got a Long: 3000000000",
        '"k": true': "k: Expected an int value, but got a Boolean: true",
        '"k": [1]': "k: Expected an int value, but got a ArrayList: [1]",
        '"k": {"a": 1, "b": [1, "x"]}': "k: Expected an int value, but got a LinkedHashMap: {a=1, b=[1, x]}",
        '"k": 11, "ts": 1000': (
            "ts: Expected a long or a datestring representation of a timestamp value, but got a Integer: 1000"
        ),
        '"k": 11, "ts": "garbage"': "ts: Unable to parse a date/time from 'garbage'",
        '"k": 11, "b": "00ff"': (
            "b: Value '00ff' is not a valid blob representation: String representation of blob is missing 0x prefix: 00ff"
        ),
        '"k": 11, "b": "0x123"': "b: Value '0x123' is not a valid blob representation: cannot parse '123' as hex bytes",
        '"k": 11, "b": 5': (
            "b: Value '5' is not a valid blob representation: class java.lang.Integer cannot be cast to class"
            " java.lang.String (java.lang.Integer and java.lang.String are in module java.base of loader 'bootstrap')"
        ),
        '"k": 11, "a": "\u00e9"': (
            "a: Invalid ASCII character in string literal: java.nio.charset.UnmappableCharacterException: Input length = 1"
        ),
        '"k": 11, "a": 1': "a: Expected an ascii string, but got a Integer: 1",
        '"k": 11, "t": 1': "t: Expected a UTF-8 string, but got a Integer: 1",
        '"k": 11, "bo": "yes"': "bo: Unable to make boolean from 'yes'",
        '"k": 11, "bo": 1': "bo: Expected a boolean value, but got a Integer: 1",
        '"k": 11, "ti": 1000': "ti: Unable to make byte from '1000'",
        '"k": 11, "ti": 1.0': "ti: Unable to make byte from '1.0'",
        '"k": 11, "si": 1e2': "si: Unable to make short from '100.0'",
        '"k": 11, "bi": 123456789012345678901234567890': (
            "bi: Expected a bigint value, but got a BigInteger: 123456789012345678901234567890"
        ),
        '"k": 11, "bi": "9223372036854775808"': "bi: Unable to make long from '9223372036854775808'",
        '"k": 11, "vi": 1.5': "vi: Value '1.5' is not a valid representation of a varint value",
        '"k": 11, "f": "x"': "f: Unable to make float from 'x'",
        '"k": 11, "d": [1]': "d: Expected a double value, but got a ArrayList: [1]",
        '"k": 11, "de": true': "de: Value 'true' is not a valid representation of a decimal value",
        '"k": 11, "u": "x"': "u: Unable to make UUID from 'x'",
        '"k": 11, "tu": "b1a2c3d4-0000-4000-8000-000000000000"': "tu: TimeUUID supports only version 1 UUIDs",
        '"k": 11, "tu": "x"': "tu: Unknown timeuuid representation: x",
        '"k": 11, "ip": "x y"': "ip: Unable to make inet address from 'x y'",
        '"k": 11, "ip": 1': "ip: Expected a string representation of an inet value, but got a Integer: 1",
        '"k": 11, "dt": "x"': "dt: Unable to coerce 'x' to a formatted date (long)",
        '"k": 11, "dt": 1': "dt: Expected a string representation of a date value, but got a Integer: 1",
        '"k": 11, "tm": "25:00:00"': "tm: (TimeType) Unable to coerce '25:00:00' to a formatted time (long)",
        '"k": 11, "du": 1': "du: Expected a string representation of a duration, but got a Integer: 1",
        '"k": 11, "l": 1': "l: Expected a list, but got a Integer: 1",
        '"k": 11, "l": [1, null]': "l: Invalid null element in list",
        '"k": 11, "st": {"a": 1}': "st: Expected a list (representing a set), but got a LinkedHashMap: {a=1}",
        '"k": 11, "st": [null]': "st: Invalid null element in set",
        '"k": 11, "m": [1]': "m: Expected a map, but got a ArrayList: [1]",
        '"k": 11, "m": {"1": null}': "m: Invalid null value in map",
        '"k": 11, "m": {"x": "a"}': "m: Unable to make int from 'x'",
        '"k": 11, "tup": [1]': "tup: Tuple is missing items (expected 2): [1]",
        '"k": 11, "tup": [1, "a", 2]': "tup: Tuple contains extra items (expected 2): [1, a, 2]",
        '"k": 11, "tup": {"a": 1}': "tup: Expected a list representation of a tuple, but got a LinkedHashMap: {a=1}",
        '"k": 11, "ud": {"nope": 1}': "ud: Unknown field 'nope' in value of user defined type addr",
        '"k": 11, "ud": {"Zip": 1}': "ud: Unknown field 'zip' in value of user defined type addr",
    }
    for body, expected in bad.items():
        assert err("{" + body + "}") == "Error decoding JSON value for " + expected, body
    # An unreadable duration is Cassandra's InvalidRequest as is, not wrapped.
    assert err('{"k": 11, "du": "x"}') == "Unable to convert 'x' to a duration"
    assert err('{"k": 11, "l": "[1, 2"}').startswith(
        "Error decoding JSON value for l: Error decoding JSON string: Unexpected end-of-input: expected close marker"
        " for Array (start marker at " + JACKSON_AT
    )

    # Documents that are not a JSON object.
    assert err("null") == "Got null for INSERT JSON values"
    assert err("[1]") == (
        "Could not decode JSON string as a map: com.fasterxml.jackson.databind.exc.MismatchedInputException: Cannot"
        " deserialize value of type `java.util.LinkedHashMap<java.lang.Object,java.lang.Object>` from Array value"
        " (token `JsonToken.START_ARRAY`)\n at " + JACKSON_AT + "; line: 1, column: 1]. (String was: [1])"
    )
    assert err('{"k": 1,}') == (
        "Could not decode JSON string as a map: com.fasterxml.jackson.core.JsonParseException: Unexpected character"
        " ('}' (code 125)): was expecting double-quote to start field name\n at " + JACKSON_AT
        + '; line: 1, column: 9]. (String was: {"k": 1,})'
    )
    assert err("").startswith(
        "Could not decode JSON string as a map: com.fasterxml.jackson.databind.exc.MismatchedInputException:"
        " No content to map due to end-of-input"
    )
    assert err('{"k": 75, "i": 01}').startswith(
        "Could not decode JSON string as a map: com.fasterxml.jackson.core.JsonParseException: Invalid numeric"
        " value: Leading zeroes not allowed"
    )


def test_select_json_names_its_keys_after_the_selectors(js):
    js.execute("INSERT INTO t JSON '{\"k\": 60, \"i\": 3, \"\\\"Cap\\\"\": 7, \"ts\": \"2011-02-03 04:05:00\", \"m\": {\"1\": \"y\"}}'")
    row = json.loads(
        one(js, 'SELECT JSON k, "Cap", i AS "Foo", i AS bar, writetime(i), toJson(ts), toJson(m), ttl(i), token(k) FROM t WHERE k = 60')
    )
    assert list(row) == [
        "k", '"Cap"', '"Foo"', "bar", "writetime(i)", "system.tojson(ts)", "system.tojson(m)", "ttl(i)", "system.token(k)"
    ]
    assert row["system.tojson(ts)"] == '"2011-02-03 04:05:00.000Z"'
    assert row["system.tojson(m)"] == '{"1": "y"}'
    assert row["ttl(i)"] is None and isinstance(row["writetime(i)"], int)
    assert one(js, "SELECT JSON count(*), max(i) FROM t WHERE k = 60") == '{"count": 1, "system.max(i)": 3}'
    assert one(js, "SELECT JSON DISTINCT k FROM t WHERE k = 60") == '{"k": 60}'
    assert list(js.execute("SELECT JSON * FROM t WHERE k = 999")) == []
    # Prepared: one [json] text column.
    p = js.prepare("SELECT JSON k, i FROM t WHERE k = ?")
    assert [(m[0], m[1], m[2], m[3].typename) for m in p.result_metadata] == [(js.keyspace, "t", "[json]", "varchar")]
    assert one(js, p, [60]) == '{"k": 60, "i": 3}'


def test_select_json_pages_and_orders(js):
    for c in range(50, 55):
        js.execute("INSERT INTO c JSON %s", ['{"p": 1, "c": %d, "v": %d, "s": 9}' % (c, c)])
    rs = js.execute(SimpleStatement("SELECT JSON * FROM c WHERE p = 1", fetch_size=2))
    assert [r[0] for r in rs] == ['{"p": 1, "c": %d, "s": 9, "v": %d}' % (c, c) for c in range(50, 55)]
    rs = js.execute('SELECT JSON c AS "X", v FROM c WHERE p = 1 ORDER BY c DESC LIMIT 2')
    assert [r[0] for r in rs] == ['{"\\"X\\"": 54, "v": 54}', '{"\\"X\\"": 53, "v": 53}']


def test_to_json_in_the_selection(js):
    js.execute("INSERT INTO t (k, l, mt, f) VALUES (70, [1, 2], {1000: false}, 1.5)")
    rs = js.execute("SELECT k, toJson(k), toJson(l), toJson(mt) AS x, toJson(writetime(i)), to_json(f) FROM t WHERE k = 70")
    assert rs.column_names[:4] == ["k", "system.tojson(k)", "system.tojson(l)", "x"]
    assert tuple(list(rs)[0]) == (70, "70", "[1, 2]", '{"1970-01-01 00:00:01.000Z": false}', "null", "1.5")
    assert message(invalid(js, "SELECT toJson(l, m) FROM t")) == "Invalid number of arguments for function system.tojson(any)"
    assert message(invalid(js, "SELECT toJson(null) FROM t")) == (
        "Cannot infer type of argument NULL in call to function system.tojson(any): use type casts to disambiguate"
    )
    assert message(invalid(js, "SELECT fromJson('1') FROM t")) == (
        "fromjson() cannot be used in the selection clause of a SELECT statement"
    )


def test_from_json_in_terms(js):
    js.execute(
        "INSERT INTO t (k, i, l, m, ud, tup, ts) VALUES (fromJson('24'), from_json('7'), fromJson('[3, 1]'),"
        " fromJson('{\"1\": \"a\"}'), fromJson('{\"street\": \"q\"}'), fromJson('[1, null]'),"
        " fromJson('\"2020-01-01 00:00:00+0100\"'))"
    )
    assert one(js, "SELECT JSON k, i, l, m, ud, tup, ts FROM t WHERE k = 24") == (
        '{"k": 24, "i": 7, "l": [3, 1], "m": {"1": "a"}, "ud": {"street": "q", "\\"Zip\\"": null}, "tup": [1, null],'
        ' "ts": "2019-12-31 23:00:00.000Z"}'
    )
    js.execute("UPDATE t SET i = fromJson('9'), l = l + fromJson('[5]') WHERE k = fromJson('24')")
    assert one(js, "SELECT JSON k, i, l FROM t WHERE k = fromJson('24')") == '{"k": 24, "i": 9, "l": [3, 1, 5]}'
    js.execute("INSERT INTO t (k, i) VALUES (25, fromJson('null'))")
    js.execute("INSERT INTO t (k, i) VALUES (26, fromJson(null))")
    assert one(js, "SELECT JSON i FROM t WHERE k = 25") == '{"i": null}'
    p = js.prepare("INSERT INTO t (k, i) VALUES (?, fromJson(?))")
    names = [(c.name.replace("from_json", "fromjson"), c.type.typename) for c in p.column_metadata]
    assert names == [("k", "int"), ("arg0(system.fromjson)", "varchar")]
    js.execute(p, [27, '"8"'])
    assert one(js, "SELECT JSON i FROM t WHERE k = 27") == '{"i": 8}'


def test_from_json_errors(js):
    def failure(query):
        # A FUNCTION_FAILURE (0x1400) of system.fromjson(text). Cassandra 5.0 caches one fromJson function per
        # result type under the name (fromjson or its alias from_json) first called for that type since it
        # started, and reports that name: the two names are one function here.
        with pytest.raises(FunctionFailure) as e:
            js.execute(query)
        assert (e.value.keyspace, e.value.function.replace("from_json", "fromjson"), e.value.arg_types) == (
            "system", "fromjson", ["text"])
        return message(e.value).replace("from_json", "fromjson")

    assert failure("INSERT INTO t (k, i) VALUES (21, fromJson('\"x\"'))") == (
        "org.apache.cassandra.serializers.MarshalException: Unable to make int from 'x'"
    )
    assert failure("INSERT INTO t (k, i) VALUES (21, fromJson('1.5'))") == (
        "org.apache.cassandra.serializers.MarshalException: Expected an int value, but got a Double: 1.5"
    )
    assert failure("INSERT INTO t (k, i) VALUES (21, fromJson('x'))").startswith(
        "execution of 'system.fromjson[text]' failed: Could not decode JSON string 'x':"
        " com.fasterxml.jackson.core.JsonParseException: Unrecognized token 'x': was expecting (JSON String, Number,"
        " Array, Object or token 'null', 'true' or 'false')"
    )
    assert message(invalid(js, "INSERT INTO t (k, du) VALUES (21, fromJson('\"x\"'))")) == "Unable to convert 'x' to a duration"
    assert message(invalid(js, "INSERT INTO t (k, i) VALUES (25, fromJson('1', '2'))")) == (
        "Invalid number of arguments for function system.fromjson(text)"
    )
    assert message(invalid(js, "INSERT INTO t (k, i) VALUES (25, fromJson(1))")) == (
        "Function system.fromjson requires an argument of type text, but found argument 1 of type int"
    )


def test_jackson_reads_numbers_and_depth_as_cassandra_does(js):
    js.execute("INSERT INTO t JSON %s", ['{"k": 95, "vi": %s}' % ("9" * 1000)])
    assert json.loads(one(js, "SELECT JSON vi FROM t WHERE k = 95"))["vi"] == int("9" * 1000)
    assert message(invalid(js, "INSERT INTO t JSON %s", ['{"k": 95, "vi": %s}' % ("9" * 1001)])).startswith(
        "Could not decode JSON string as a map: com.fasterxml.jackson.core.exc.StreamConstraintsException: Number"
        " value length (1001) exceeds the maximum allowed (1000, from `StreamReadConstraints.getMaxNumberLength()`)."
    )
    deep = "[" * 1001 + "]" * 1001
    assert message(invalid(js, "INSERT INTO t JSON %s", ['{"k": 95, "l": %s}' % deep])).startswith(
        "Could not decode JSON string as a map: com.fasterxml.jackson.core.exc.StreamConstraintsException: Document"
        " nesting depth (1001) exceeds the maximum allowed (1000, from `StreamReadConstraints.getMaxNestingDepth()`)."
    )
