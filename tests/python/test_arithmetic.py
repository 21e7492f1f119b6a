"""Arithmetic operators in selectors and terms, as Cassandra 5.0.9 has them
(apache/cassandra cql3/functions/OperationFcts.java, NumberType and its
subclasses, FunctionResolver.java for the overload resolution).

- In the selection: `v + 1`, `-v`, `v % 3`, operations nest and mix with
  functions and aggregates (`max(v) * 2`, `sum(v + 1)`). The result type is
  the wider operand type (`int + bigint` is bigint, `tinyint + smallint`
  smallint, `float + bigint` double, `varint + double` decimal); integer
  results wrap as Java's arithmetic. An untyped literal takes its preferred
  type (`1` int, `1.5` double, `'a'` text, or ascii beside an ascii).
- timestamp and date `±` duration; text and ascii concatenate with `+`.
- In terms (INSERT values, UPDATE SET, WHERE) the untyped operands take the
  receiver's type: `SET b = 2147483647 + 1` is a bigint sum. A bind marker
  needs a type hint (`(int) ?`), except beside a duration.
- Integer (and varint, decimal) division by zero is a function failure
  (error code 0x1400) naming the operation; doubles give infinities.
"""

from decimal import Decimal
import datetime

import pytest
from cassandra import FunctionFailure, InvalidRequest


@pytest.fixture(scope="module")
def ar(module_ks_session):
    s = module_ks_session
    s.execute(
        "CREATE TABLE t (k int, c int, v int, b bigint, d double, f float, dc decimal, vi varint, sm smallint,"
        " ti tinyint, s text, a ascii, ts timestamp, dt date, du duration, PRIMARY KEY (k, c))"
    )
    s.execute(
        "INSERT INTO t (k, c, v, b, d, f, dc, vi, sm, ti, s, a, ts, dt, du) VALUES (1, 1, 10, 100, 1.5, 2.5, 1.25,"
        " 12345678901234567890, 3, 4, 'x', 'asc', '2024-01-02 03:04:05.678+0000', '2024-01-02', 1h30m)"
    )
    s.execute("INSERT INTO t (k, c, v) VALUES (1, 2, 20 + 5)")
    return s


def row(session, query, params=None):
    rs = session.execute(query, params)
    rows = list(rs)
    assert len(rows) == 1, rows
    return rows[0], [(n, t.typename) for n, t in zip(rs.column_names, rs.column_types)]


WHERE = " FROM t WHERE k = 1 AND c = 1"


def test_numeric_operations_and_their_types(ar):
    r, cols = row(ar, "SELECT v + 1, v * 2, b - 1, d / 2, f * 2, v + b, v + d, v + f, dc * 2, vi + 1, sm + ti,"
                      " -v, v % 3" + WHERE)
    assert tuple(r) == (11, 20, 99, 0.75, 5.0, 110, 11.5, 12.5, Decimal("2.500"), 12345678901234567891, 7, -10, 1)
    assert [t for _, t in cols] == ["int", "int", "bigint", "double", "float", "bigint", "double", "float",
                                    "decimal", "varint", "smallint", "int", "int"]
    assert [n for n, _ in cols] == ["v + 1", "v * 2", "b - 1", "d / 2", "f * 2", "v + b", "v + d", "v + f",
                                    "dc * 2", "vi + 1", "sm + ti", "-v", "v % 3"]


def test_result_types_follow_the_wider_operand(ar):
    r, cols = row(ar, "SELECT ti + ti, ti + sm, ti * 1, f + d, f + b, f + dc, b + vi, f + vi, v / 3, -7 / 2, -7 % 3"
                      + WHERE)
    assert tuple(r) == (8, 7, 4, 4.0, 102.5, Decimal("3.75"), 12345678901234567990,
                        Decimal("12345678901234567892.5"), 3, -3, -1)
    assert [t for _, t in cols] == ["tinyint", "smallint", "int", "double", "double", "decimal", "varint",
                                    "decimal", "int", "int", "int"]


def test_integer_results_wrap(ar):
    r, _ = row(ar, "SELECT v + 2147483647, ti * ti * ti * ti, (bigint) 9223372036854775807 + 1" + WHERE)
    assert tuple(r) == (-2147483639, 0, -9223372036854775808)


def test_decimal_arithmetic(ar):
    r, _ = row(ar, "SELECT dc / 3, dc * dc, dc - 1.255, dc % 1, b * dc, dc + 1, dc / vi, vi / dc, dc % 0.3" + WHERE)
    assert tuple(r) == (Decimal("0.41666666666666666666666666666667"), Decimal("1.5625"), Decimal("-0.005"),
                        Decimal("0.25"), Decimal("125.000"), Decimal("2.25"),
                        Decimal("1.01250000911250008293387575469726E-19"), Decimal("9876543120987654312"),
                        Decimal("0.05"))


def test_literals_and_type_hints(ar):
    r, cols = row(ar, "SELECT 1 + 1, (int) 1 + 2, (bigint) 1 + v, 1.5 + 1, 3000000000 + 1, v - -1, (v + 1) * 2"
                      + WHERE)
    assert tuple(r) == (2, 3, 11, 2.5, 3000000001, 11, 22)
    assert cols == [("1 + 1", "int"), ("(int)1 + 2", "int"), ("(bigint)1 + v", "bigint"), ("1.5 + 1", "double"),
                    ("3000000000 + 1", "bigint"), ("v - -1", "int"), ("(v + 1) * 2", "int")]


def test_time_and_text_operations(ar):
    r, cols = row(ar, "SELECT ts + 1d, ts - 2h, dt + 1d, dt - 2d, ts - 1mo, ts + du, s + 'y', a + 'y', s + a" + WHERE)
    assert r[0] == datetime.datetime(2024, 1, 3, 3, 4, 5, 678000)
    assert r[1] == datetime.datetime(2024, 1, 2, 1, 4, 5, 678000)
    assert (r[2].days_from_epoch, r[3].days_from_epoch) == (19725, 19722)
    assert r[4] == datetime.datetime(2023, 12, 2, 3, 4, 5, 678000)
    assert r[5] == datetime.datetime(2024, 1, 2, 4, 34, 5, 678000)
    assert tuple(r[6:]) == ("xy", "ascy", "xasc")
    assert [t for _, t in cols][6:] == ["varchar", "ascii", "varchar"]


def test_operations_with_functions_and_aggregates(ar):
    r, cols = row(ar, "SELECT writetime(v) - writetime(v), max(v) * 2, sum(v + 1), count(v + 1), min(v * 2),"
                      " max(v) + min(v), count(*) + 1 FROM t WHERE k = 1")
    assert tuple(r) == (0, 50, 37, 2, 20, 35, 3)
    assert [n for n, _ in cols] == ["writetime(v) - writetime(v)", "system.max(v) * 2", "system.sum(v + 1)",
                                    "system.count(v + 1)", "system.min(v * 2)", "system.max(v) + system.min(v)",
                                    "count + 1"]
    r, cols = row(ar, "SELECT count(1), count(v + 1) FROM t WHERE k = 1")
    assert tuple(r) == (2, 2)
    assert [n for n, _ in cols] == ["count", "system.count(v + 1)"]
    r, _ = row(ar, "SELECT max(v) * 2 FROM t WHERE k = 1 AND c = 99")
    assert tuple(r) == (None,)
    r, _ = row(ar, "SELECT k, max(v) FROM t WHERE k = 1 GROUP BY k")
    assert tuple(r) == (1, 25)


def test_null_operands_give_null(ar):
    r, _ = row(ar, "SELECT v + 1, s + 'z' FROM t WHERE k = 1 AND c = 2")
    assert tuple(r) == (26, None)


def test_operations_in_json_and_casts(ar):
    r, _ = row(ar, "SELECT toJson(v + 1), toJson(d / 3), CAST(f / 3 AS text)" + WHERE)
    assert tuple(r) == ("11", "0.5", "0.8333333")
    # Text of floating point and decimal results as Java prints them.
    r, _ = row(ar, "SELECT CAST(d * 10000000 AS text), CAST(f * 10000000 AS text), CAST(d / 10000 AS text),"
                   " toJson(d * 10000000), CAST(dc / vi AS text)" + WHERE)
    assert tuple(r) == ("1.5E7", "2.5E7", "1.5E-4", "1.5E7", "1.01250000911250008293387575469726E-19")
    r, _ = row(ar, "SELECT JSON v + 1, d * 2" + WHERE)
    assert r[0] == '{"v + 1": 11, "d * 2": 3.0}'


@pytest.mark.parametrize("expr,message", [
    ("v / 0", "the operation 'int / int' failed: / by zero"),
    ("v % 0", "the operation 'int % int' failed: / by zero"),
    ("b / 0", "the operation 'bigint / int' failed: / by zero"),
    ("7 / 0", "the operation 'int / int' failed: / by zero"),
    ("ti / 0", "the operation 'tinyint / int' failed: / by zero"),
    ("vi / 0", "the operation 'varint / int' failed: BigInteger divide by zero"),
    ("dc / 0", "the operation 'decimal / int' failed: BigInteger divide by zero"),
    ("dc % 0", "the operation 'decimal % int' failed: Division by zero"),
    ("dt - 1h", "the operation 'date - duration' failed: The duration must have a day precision. Was: 1h"),
])
def test_failed_operations_are_function_failures(ar, expr, message):
    with pytest.raises(FunctionFailure) as e:
        ar.execute(f"SELECT {expr}" + WHERE)
    assert message in str(e.value)
    assert e.value.keyspace == "system"


def test_function_failure_names_the_operation(ar):
    with pytest.raises(FunctionFailure) as e:
        ar.execute("SELECT v / 0" + WHERE)
    assert (e.value.function, e.value.arg_types) == ("_divide", ["int", "int"])


def test_floating_point_division_by_zero(ar):
    r, _ = row(ar, "SELECT d / 0, f / 0" + WHERE)
    assert r[0] == float("inf") and r[1] == float("inf")


@pytest.mark.parametrize("expr,message", [
    ("s + v", "the '+' operation is not supported between s and v"),
    ("v + s", "the '+' operation is not supported between v and s"),
    ("ts + v", "Ambiguous '+' operation with args ts and v: use type hint to disambiguate, example '(int) ?'"),
    ("ts - ts", "Ambiguous '-' operation with args ts and ts"),
    ("-du", "Invalid call to function system._negate, none of its type signatures match"),
    ("v + null", "Ambiguous '+' operation with args v and NULL"),
    ("-s", "Invalid call to function system._negate, none of its type signatures match"),
    ("-1", "Cannot infer type for term -1 in selection clause (try using a cast to force a type)"),
])
def test_invalid_operations_in_the_selection(ar, expr, message):
    with pytest.raises(InvalidRequest) as e:
        ar.execute(f"SELECT {expr}" + WHERE)
    assert message in str(e.value)


def test_operations_in_terms_take_the_receiver_type(ar):
    ar.execute("UPDATE t SET b = 7 * 6, v = 2147483647 + 1, f = 1.5 * 2, d = 1 / 2, dc = 1.1 + 1, sm = 1 + 1,"
               " ti = 100 + 100 WHERE k = 2 AND c = 1")
    r, _ = row(ar, "SELECT v, b, f, d, dc, sm, ti FROM t WHERE k = 2 AND c = 1")
    assert tuple(r) == (-2147483648, 42, 3.0, 0.5, Decimal("2.1"), 2, -56)
    ar.execute("UPDATE t SET b = 2147483647 + 1, v = (1 + 2) * 3, s = 'a' + 'b', ts = '2024-01-01' + 1d,"
               " dt = '2024-01-01' - 1d WHERE k = 2 AND c = 2")
    r, _ = row(ar, "SELECT b, v, s, ts, dt FROM t WHERE k = 2 AND c = 2")
    assert tuple(r)[:3] == (2147483648, 9, "ab")
    assert r[3] == datetime.datetime(2024, 1, 2)
    assert r[4].days_from_epoch == 19722
    ar.execute("INSERT INTO t (k, c, v) VALUES (2, 3, -(1 + 2))")
    ar.execute("UPDATE t SET v = null + 1 WHERE k = 2 AND c = 1")
    r, _ = row(ar, "SELECT v FROM t WHERE k = 2 AND c = 3")
    assert tuple(r) == (-3,)
    r, _ = row(ar, "SELECT v FROM t WHERE k = 2 AND c = 1")
    assert tuple(r) == (None,)


def test_operations_in_where(ar):
    rows = list(ar.execute("SELECT c, v FROM t WHERE k = 0 + 1 AND c > 1 * 1"))
    assert [tuple(r) for r in rows] == [(2, 25)]
    rows = list(ar.execute("SELECT c FROM t WHERE k = 1 AND c = 1 + abs(-1)"))
    assert [tuple(r) for r in rows] == [(2,)]
    rows = list(ar.execute("SELECT c FROM t WHERE k = 1 AND v = 5 * 5 ALLOW FILTERING"))
    assert [tuple(r) for r in rows] == [(2,)]


@pytest.mark.parametrize("stmt,error,message", [
    ("UPDATE t SET v = 1 / 0 WHERE k = 9 AND c = 1", FunctionFailure,
     "the operation 'int / int' failed: / by zero"),
    ("UPDATE t SET v = 'a' + 1 WHERE k = 9 AND c = 1", InvalidRequest,
     "the '+' operation is not supported between 'a' and 1"),
    ("UPDATE t SET s = 1 + 1 WHERE k = 9 AND c = 1", InvalidRequest,
     "the '+' operation is not supported between 1 and 1"),
    ("UPDATE t SET v = 1.5 + 1 WHERE k = 9 AND c = 1", InvalidRequest,
     "the '+' operation is not supported between 1.5 and 1"),
    ("UPDATE t SET v = 3000000000 + 1 WHERE k = 9 AND c = 1", InvalidRequest,
     "Unable to make int from '3000000000'"),
    ("UPDATE t SET v = v + 1 WHERE k = 9 AND c = 1", InvalidRequest,
     "Invalid operation (v = v + 1) for non counter column v"),
    ("UPDATE t SET v = 1 + v WHERE k = 9 AND c = 1", InvalidRequest,
     "Invalid operation (v = 1 - v) for non list column v"),
])
def test_invalid_operations_in_terms(ar, stmt, error, message):
    with pytest.raises(error) as e:
        ar.execute(stmt)
    assert message in str(e.value)


def test_bind_markers_in_operations(ar):
    p = ar.prepare("UPDATE t SET v = (int) ? + 1 WHERE k = 3 AND c = 1")
    assert [(c.name, c.type.typename) for c in p.column_metadata] == [("arg0(system._add)", "int")]
    ar.execute(p, [5])
    p = ar.prepare("UPDATE t SET ts = ? + 1d WHERE k = 3 AND c = 1")
    assert [(c.name, c.type.typename) for c in p.column_metadata] == [("arg0(system._add)", "timestamp")]
    ar.execute(p, [datetime.datetime(2024, 1, 1)])
    r, _ = row(ar, "SELECT v, ts FROM t WHERE k = 3 AND c = 1")
    assert tuple(r) == (6, datetime.datetime(2024, 1, 2))
    p = ar.prepare("SELECT c FROM t WHERE k = 1 AND c = abs(?)")
    assert [(c.name, c.type.typename) for c in p.column_metadata] == [("arg0(system.abs)", "int")]
    assert [tuple(r) for r in ar.execute(p, [-2])] == [(2,)]
    for stmt, args in [("UPDATE t SET v = ? + 1 WHERE k = 3 AND c = 1", "? and 1"),
                       ("SELECT k FROM t WHERE k = ? + 1", "? and 1"),
                       ("UPDATE t SET b = ? * ? WHERE k = 3 AND c = 1", "? and ?")]:
        with pytest.raises(InvalidRequest) as e:
            ar.prepare(stmt)
        assert f"with args {args}: use type hint to disambiguate" in str(e.value)


def test_bind_markers_in_the_selection(ar):
    p = ar.prepare("SELECT (int) ? + v FROM t WHERE k = 1 AND c = 1")
    assert [(c.name, c.type.typename) for c in p.column_metadata] == [("[selection]", "int")]
    rs = ar.execute(p, [3])
    assert rs.column_names == ["(int)? + v"]
    assert tuple(rs.one()) == (13,)
    with pytest.raises(InvalidRequest) as e:
        ar.prepare("SELECT v + ? FROM t WHERE k = 1 AND c = 1")
    assert "Ambiguous '+' operation with args v and ?: use type hint to disambiguate" in str(e.value)
