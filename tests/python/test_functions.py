"""Native functions and aggregates in the selection, as Cassandra 5.0.9 has
them: the `sum` and `avg` aggregates (apache/cassandra
cql3/functions/AggregateFcts.java), alone, nested in toJson()/CAST and per
GROUP BY group.

sum/avg are defined over the numeric types, the result of the argument's
type: an integer sum wraps in that type, an integer average sums in 64 bits
and truncates, float/double sum with Kahan compensation, decimal and varint
are exact (the decimal average is a running mean rounded half-even to the
scale of the values). Nulls are skipped; over no values both give 0.

Function calls nest in the selection: a conversion function (xAsBlob,
blobAsX, toTimestamp, toDate, toUnixTimestamp) takes any selector of its
argument type, aggregates included, named `system.f(system.g(c))`
(apache/cassandra cql3/functions/BytesConversionFcts.java, TimeFcts.java;
FunctionResolver.java for the type error). Cassandra 5 adds snake_case
spellings (CASSANDRA-18037, listed in test/unit/.../NativeFunctionsTest.java):
to_timestamp, to_date, to_unix_timestamp, current_timestamp, current_date,
current_time, current_timeuuid, min_timeuuid, max_timeuuid, int_as_blob,
blob_as_int, ..., beside the older names.

Cassandra 5 also has the math functions abs, exp, log, log10 and round over
every number type (MathFcts.java: the argument's type; integers go through
double and back, decimals keep 32 significant digits), floor(time, duration
[, start]) (TimeFcts.java, Duration.floorTimestamp), the collection
functions (CollectionFcts.java), cast_as_<type> (CastFcts.java), the
functions without arguments (now(), currentTimestamp(), ...) anywhere, and
the masking functions (masking/*.java)."""

import datetime
import hashlib
from decimal import Decimal

import pytest
from cassandra import InvalidRequest


@pytest.fixture(scope="module")
def fs(module_ks_session):
    s = module_ks_session
    s.execute(
        "CREATE TABLE n (k int, c int, ti tinyint, si smallint, i int, bi bigint, vi varint, f float, d double,"
        " de decimal, t text, PRIMARY KEY (k, c))"
    )
    s.execute("CREATE TABLE tm (k int PRIMARY KEY, tu timeuuid, ts timestamp, dt date)")
    ins = s.prepare("INSERT INTO n (k, c, ti, si, i, bi, vi, f, d, de, t) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
    rows = [
        (1, 1, 100, 30000, 2147483647, 9223372036854775807, 10**30, 1.5, 0.1, Decimal("1.5"), "a"),
        (1, 2, 100, 30000, 2147483647, 9223372036854775807, 10**30, 2.25, 0.1, Decimal("2.25"), "b"),
        (1, 3, None, None, None, None, None, None, 0.1, None, None),
        (2, 1, 1, 1, 1, 1, 1, 1.0, 0.1, Decimal("1"), "c"),
        (2, 2, 2, 2, 2, 2, 2, 2.0, 0.1, Decimal("2"), "d"),
        (2, 3, 4, 4, 4, 4, 4, 4.0, 0.1, Decimal("4"), "e"),
        (3, 1, -1, -1, -1, -1, -1, -1.0, 0.1, Decimal("-1"), "f"),
        (3, 2, -2, -2, -2, -2, -2, -2.0, 0.1, Decimal("-2"), "g"),
    ]
    for r in rows:
        s.execute(ins, r)
    return s


def one(session, query, params=None):
    rows = list(session.execute(query, params))
    assert len(rows) == 1, rows
    return rows[0]


def test_integer_sums_wrap_in_their_type(fs):
    r = one(fs, "SELECT sum(ti), sum(si), sum(i), sum(bi), sum(vi) FROM n WHERE k = 1")
    assert tuple(r) == (-56, -5536, -2, -2, 2 * 10**30)


def test_integer_averages_sum_in_64_bits_and_truncate(fs):
    r = one(fs, "SELECT avg(ti), avg(si), avg(i), avg(bi), avg(vi) FROM n WHERE k = 1")
    # The nulls of row (1, 3) are skipped; ints and bigints do not wrap.
    assert tuple(r) == (100, 30000, 2147483647, 9223372036854775807, 10**30)
    # (1 + 2 + 4) / 3 and (-1 - 2) / 2 truncate toward zero.
    assert tuple(one(fs, "SELECT avg(i), avg(vi), avg(ti) FROM n WHERE k = 2")) == (2, 2, 2)
    assert tuple(one(fs, "SELECT avg(i), avg(bi), avg(vi) FROM n WHERE k = 3")) == (-1, -1, -1)


def test_floating_point(fs):
    r = one(fs, "SELECT sum(f), avg(f), sum(d), avg(d) FROM n WHERE k = 1")
    assert tuple(r) == (3.75, 1.875, pytest.approx(0.3), pytest.approx(0.1))
    # Ten 0.1s sum to exactly 1.0 with Kahan's compensation (0.9999999999999999 naively)...
    r = one(fs, "SELECT sum(d), avg(d), count(d) FROM n")
    assert tuple(r) == (pytest.approx(0.8), 0.1, 8)
    assert one(fs, "SELECT sum(d) FROM n WHERE k = 2")[0] == pytest.approx(0.3)


def test_decimal(fs):
    r = one(fs, "SELECT sum(de), avg(de) FROM n WHERE k = 1")
    assert str(r[0]) == "3.75"
    # 1.5 + (2.25 - 1.5) / 2 = 1.5 + 0.38 (0.375 rounded half-even at scale 2).
    assert str(r[1]) == "1.88"
    r = one(fs, "SELECT sum(de), avg(de) FROM n WHERE k = 2")
    # avg(1, 2, 4): 1, then 1 + 1/2 -> 1 (scale 0, half-even), then 1 + 3/3 = 2.
    assert (str(r[0]), str(r[1])) == ("7", "2")


def test_empty_input_gives_zero(fs):
    r = one(fs, "SELECT sum(i), avg(i), sum(d), avg(f), sum(de), avg(de), avg(vi), count(*) FROM n WHERE k = 9")
    assert tuple(r) == (0, 0, 0.0, 0.0, Decimal(0), Decimal(0), 0, 0)
    # Only nulls.
    assert tuple(one(fs, "SELECT sum(i), avg(i) FROM n WHERE k = 1 AND c = 3")) == (0, 0)


def test_names_types_and_nesting(fs):
    rs = fs.execute("SELECT sum(i), avg(d), AVG(bi) AS a, k FROM n WHERE k = 2")
    assert rs.column_names == ["system.sum(i)", "system.avg(d)", "a", "k"]
    assert [t.typename for t in rs.column_types] == ["int", "double", "bigint", "int"]
    r = one(fs, "SELECT toJson(sum(i)), CAST(avg(i) AS text), k, t FROM n WHERE k = 2")
    assert tuple(r) == ("7", "2", 2, "c")


def test_per_group(fs):
    rows = list(fs.execute("SELECT k, sum(i), avg(i), sum(de) FROM n GROUP BY k"))
    got = sorted((r[0], r[1], r[2], str(r[3])) for r in rows)
    assert got == [(1, -2, 2147483647, "3.75"), (2, 7, 2, "7"), (3, -3, -1, "-3")]


def test_prepared(fs):
    ps = fs.prepare("SELECT sum(i), avg(i) FROM n WHERE k = ?")
    assert [c[2] for c in ps.result_metadata] == ["system.sum(i)", "system.avg(i)"]
    assert tuple(one(fs, ps, (2,))) == (7, 2)


@pytest.mark.parametrize("function", ["sum", "avg"])
def test_non_numeric_arguments_are_refused(fs, function):
    with pytest.raises(InvalidRequest) as e:
        fs.execute(f"SELECT {function}(t) FROM n")
    assert f"Invalid call to function {function}, none of its type signatures match" in str(e.value)


def test_conversion_functions_nest(fs):
    rs = fs.execute("SELECT blobAsInt(intAsBlob(i)), bigintAsBlob(bi) FROM n WHERE k = 2 AND c = 3")
    assert rs.column_names == ["system.blobasint(system.intasblob(i))", "system.bigintasblob(bi)"]
    assert tuple(rs.one()) == (4, b"\x00" * 7 + b"\x04")
    r = one(fs, "SELECT toJson(max(i)), blobAsInt(intAsBlob(sum(i))), toJson(avg(de)) FROM n WHERE k = 2")
    assert tuple(r) == ("4", 7, "2")
    # A null stays null through the calls.
    assert one(fs, "SELECT blobAsInt(intAsBlob(i)) FROM n WHERE k = 1 AND c = 3")[0] is None


def test_conversion_functions_check_argument_types(fs):
    with pytest.raises(InvalidRequest) as e:
        fs.execute("SELECT intAsBlob(t) FROM n")
    assert "Type error: t cannot be passed as argument 0 of function system.intasblob of type int" in str(e.value)
    # blobAsX takes a value of any type: its bytes, checked when read.
    assert one(fs, "SELECT blobAsInt(i) FROM n WHERE k = 2 AND c = 1")[0] == 1
    with pytest.raises(InvalidRequest) as e:
        fs.execute("SELECT blobAsBigint(i) FROM n WHERE k = 2 AND c = 1")
    assert "In call to function system.blobasbigint, value 0x00000001 is not a valid binary representation for type" \
        " bigint" in str(e.value)


def test_snake_case_time_functions(fs):
    fs.execute("INSERT INTO tm (k, tu, ts, dt) VALUES (1, current_timeuuid(), current_timestamp(), current_date())")
    fs.execute("INSERT INTO tm (k, tu, ts) VALUES (2, now(), to_timestamp(min_timeuuid('2024-05-06 07:08:09+0000')))")
    rs = fs.execute(
        "SELECT to_unix_timestamp(ts), to_date(ts), to_timestamp(tu), toDate(toTimestamp(tu)), to_date(tu),"
        " tounixtimestamp(ts) FROM tm WHERE k = 2"
    )
    assert rs.column_names == [
        "system.to_unix_timestamp(ts)",
        "system.to_date(ts)",
        "system.to_timestamp(tu)",
        "system.todate(system.totimestamp(tu))",
        "system.to_date(tu)",
        "system.tounixtimestamp(ts)",
    ]
    r = rs.one()
    assert r[0] == r[5] == 1714979289000
    assert str(r[1]) == "2024-05-06"
    assert r[3] == r[4]
    # The same instant (but for a midnight between the calls).
    r = one(fs, "SELECT to_date(tu), dt, to_date(ts) FROM tm WHERE k = 1")
    days = [d.days_from_epoch for d in r]
    assert max(days) - min(days) <= 1


def test_snake_case_blob_functions(fs):
    rs = fs.execute("SELECT blob_as_int(int_as_blob(i)), text_as_blob(t) FROM n WHERE k = 2 AND c = 1")
    assert rs.column_names == ["system.blob_as_int(system.int_as_blob(i))", "system.text_as_blob(t)"]
    assert tuple(rs.one()) == (1, b"c")


@pytest.fixture(scope="module")
def mf(fs):
    fs.execute(
        "CREATE TABLE fx (k int PRIMARY KEY, v int, d double, f float, dc decimal, vi varint, ti tinyint, s text,"
        " ts timestamp, dt date, tm time, l list<int>, st set<text>, m map<text, int>)"
    )
    fs.execute(
        "INSERT INTO fx (k, v, d, f, dc, vi, ti, s, ts, dt, tm, l, st, m) VALUES (1, 10, 1.5, 2.5, 1.25, 7, 4, 'x',"
        " '2024-01-02 03:04:05.678+0000', '2024-01-02', '03:04:05.123456789', [1, 2, 3], {'a', 'b'},"
        " {'p': 1, 'q': 2})"
    )
    return fs


def test_math_functions(mf):
    rs = mf.execute("SELECT abs(-3), exp(0), log(1), log10(100), round(2.5), round(-2.5) FROM fx WHERE k = 1")
    assert tuple(rs.one()) == (3, 1, 0, 2, 3.0, -2.0)
    assert rs.column_names[:2] == ["system.abs(-3)", "system.exp(0)"]
    rs = mf.execute("SELECT abs(v), exp(v), log(v), exp(d), round(f), round(dc), exp(ti), abs(-2147483648),"
                    " exp(100), log(0) FROM fx WHERE k = 1")
    assert tuple(rs.one()) == (10, 22026, 2, 4.4816890703380645, 3.0, Decimal("1"), 54, -2147483648,
                               2147483647, -2147483648)
    assert [t.typename for t in rs.column_types][:7] == ["int", "int", "int", "double", "float", "decimal", "tinyint"]


def test_decimal_math_keeps_32_digits(mf):
    r = one(mf, "SELECT exp(dc), log(dc), log10(dc), exp(-dc), exp(dc - dc), log10(dc * 8) FROM fx WHERE k = 1")
    assert tuple(r) == (Decimal("3.4903429574618413761305460296723"), Decimal("0.22314355131420975576629509030983"),
                        Decimal("0.096910013008056414358783315826521"),
                        Decimal("0.28650479686019010032488542664784"), Decimal("1"), Decimal("1"))


def test_math_function_errors(mf):
    with pytest.raises(InvalidRequest) as e:
        mf.execute("SELECT abs(s) FROM fx WHERE k = 1")
    assert "Invalid call to function abs, none of its type signatures match" in str(e.value)


def test_floor(mf):
    rs = mf.execute("SELECT floor(ts, 1h), floor(ts, 1mo), floor(ts, 1h, '2024-01-01 00:30:00'), floor(dt, 1w),"
                    " floor(tm, 90s), floor(ts, 1mo1d) FROM fx WHERE k = 1")
    r = rs.one()
    assert r[0] == datetime.datetime(2024, 1, 2, 3, 0)
    assert r[1] == datetime.datetime(2024, 1, 1)
    assert r[2] == datetime.datetime(2024, 1, 2, 2, 30)
    assert r[3].days_from_epoch == 19719
    assert r[4].nanosecond_time == 10_980_000_000_000
    assert r[5] == datetime.datetime(2023, 12, 19)
    assert rs.column_names[2] == "system.floor(ts, 1h, '2024-01-01 00:30:00')"
    for query, message in [
        ("SELECT floor(ts, -1h) FROM fx WHERE k = 1", "Negative durations are not supported by the floor function"),
        ("SELECT floor(ts, 1h, '2025-01-01') FROM fx WHERE k = 1",
         "The floor function starting time is greater than the provided time"),
        ("SELECT floor(dt, 1h) FROM fx WHERE k = 1",
         "The floor on date values cannot be computed for the 1h duration as precision is below 1 day"),
        ("SELECT floor(tm, 1d) FROM fx WHERE k = 1",
         "For time values, the floor can only be computed for durations smaller that a day"),
        ("SELECT floor(d) FROM fx WHERE k = 1", "Invalid call to function floor, none of its type signatures match"),
    ]:
        with pytest.raises(InvalidRequest) as e:
            mf.execute(query)
        assert message in str(e.value)


def test_collection_functions(mf):
    rs = mf.execute("SELECT map_keys(m), map_values(m), collection_count(l), collection_min(l), collection_max(st),"
                    " collection_sum(l), collection_avg(l) FROM fx WHERE k = 1")
    r = rs.one()
    assert (sorted(r[0]), r[1], r[2], r[3], r[4], r[5], r[6]) == (["p", "q"], [1, 2], 3, 1, "b", 6, 2)
    assert [t.typename for t in rs.column_types][2:] == ["int", "int", "varchar", "int", "int"]
    for query, message in [
        ("SELECT collection_sum(st) FROM fx WHERE k = 1",
         "Function system.collection_sum requires a numeric set/list argument, but found argument st of type set<text>"),
        ("SELECT collection_min(m) FROM fx WHERE k = 1",
         "Function system.collection_min requires a set or list argument, but found argument m of type map<text, int>"),
        ("SELECT map_keys(l) FROM fx WHERE k = 1",
         "Function system.map_keys requires a map argument, but found argument l of type list<int>"),
    ]:
        with pytest.raises(InvalidRequest) as e:
            mf.execute(query)
        assert message in str(e.value)


def test_cast_functions(mf):
    rs = mf.execute("SELECT cast_as_text(v), cast_as_int(d), cast_as_date(ts) FROM fx WHERE k = 1")
    assert rs.column_names[0] == "cast(v as text)"
    r = rs.one()
    assert (r[0], r[1], r[2].days_from_epoch) == ("10", 1, 19724)
    for query, message in [
        ("SELECT castAsText(v) FROM fx WHERE k = 1", "Unknown function 'castastext'"),
        ("SELECT system.castAsText(v) FROM fx WHERE k = 1", "Unknown function 'system.castastext'"),
        ("SELECT cast_as_varchar(v) FROM fx WHERE k = 1", "Unknown function 'cast_as_varchar'"),
        ("SELECT cast_as_text(s) FROM fx WHERE k = 1",
         "Invalid call to function cast_as_text, none of its type signatures match"),
    ]:
        with pytest.raises(InvalidRequest) as e:
            mf.execute(query)
        assert message in str(e.value)


def test_functions_without_arguments_in_the_selection(mf):
    rs = mf.execute("SELECT now(), currentTimestamp(), currentDate(), currentTime(), currentTimeUUID(),"
                    " current_timestamp() FROM fx WHERE k = 1")
    assert rs.column_names == ["system.now()", "system.currenttimestamp()", "system.currentdate()",
                               "system.currenttime()", "system.currenttimeuuid()", "system.current_timestamp()"]
    r = rs.one()
    assert r[0].version == 1 and r[4].version == 1 and r[0] != r[4]
    assert abs((datetime.datetime.utcnow() - r[1]).total_seconds()) < 60
    mf.execute("UPDATE fx SET ts = currentTimestamp() - 1h WHERE k = 2")
    assert one(mf, "SELECT k FROM fx WHERE k = 2 AND ts < currentTimestamp() ALLOW FILTERING")[0] == 2


def test_masking_functions(mf):
    rs = mf.execute("SELECT mask_null(v), mask_default(v), mask_default(s), mask_replace(v, 0),"
                    " mask_inner('abcdef', 1, 2), mask_outer('abcdef', 1, 2), mask_inner('abcdef', 1, 2, '#'),"
                    " mask_hash(s), mask_default(ts), mask_default(l) FROM fx WHERE k = 1")
    r = rs.one()
    assert tuple(r)[:7] == (None, 0, "****", 0, "a***ef", "*bcd**", "a###ef")
    assert r[7] == hashlib.sha256(b"x").digest()
    assert r[8] == datetime.datetime(1970, 1, 1)
    assert r[9] == []
    assert [t.typename for t in rs.column_types][4:8] == ["ascii", "ascii", "ascii", "blob"]
    r = one(mf, "SELECT mask_hash(s, 'SHA-512'), mask_hash(s, 'MD5') FROM fx WHERE k = 1")
    assert tuple(r) == (hashlib.sha512(b"x").digest(), hashlib.md5(b"x").digest())
    for query, message in [
        ("SELECT mask_inner(v, 1, 1) FROM fx WHERE k = 1",
         "Function system.mask_inner requires an argument of type [text|varchar|ascii], but found argument v of type int"),
        ("SELECT mask_outer('ab', 1, 1, 'xy') FROM fx WHERE k = 1",
         "The padding argument for function system.mask_outer should be single-character, but 'xy' has 2 characters."),
        ("SELECT mask_hash(s, 'nope') FROM fx WHERE k = 1", "Hash algorithm not found: nope"),
        ("SELECT mask_default(null) FROM fx WHERE k = 1",
         "Cannot infer type of argument NULL in call to function system.mask_default(any)"),
        ("SELECT mask_replace(v, 'a') FROM fx WHERE k = 1",
         "Type error: 'a' cannot be passed as argument 1 of function system.mask_replace of type int"),
    ]:
        with pytest.raises(InvalidRequest) as e:
            mf.execute(query)
        assert message in str(e.value)


def test_functions_in_terms(mf):
    mf.execute("UPDATE fx SET ts = floor(currentTimestamp(), 1d), v = abs(-7) * 2, d = exp(0.0), dc = round(1.5),"
               " s = mask_inner('abcdef', 1, 1) WHERE k = 3")
    r = one(mf, "SELECT v, d, dc, s, toUnixTimestamp(ts) % 86400000 FROM fx WHERE k = 3")
    assert tuple(r) == (14, 1.0, Decimal("2"), "a****f", 0)
    assert one(mf, "SELECT k FROM fx WHERE k = 3 AND ts = floor(currentTimestamp(), 1d) ALLOW FILTERING")[0] == 3
