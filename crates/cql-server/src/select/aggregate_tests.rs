//! `sum` and `avg`: results as Cassandra 5.0.9's `AggregateFcts` computes
//! them, and the selection's names, types and refusals.
//! tests/python/test_functions.py runs them through the server.

use super::test_support;
use num_bigint::BigInt;

use super::aggregate::{compute, Numeric};
use super::*;

fn run(kind: Numeric, ty: CqlType, values: &[Value]) -> Value {
    let bytes: Vec<Vec<u8>> = values.iter().map(Value::to_bytes).collect();
    let out = compute(kind, &ty, bytes.iter().map(Vec::as_slice)).unwrap();
    Value::deserialize(&ty, &out).unwrap()
}

fn dec(unscaled: i64, scale: i32) -> Value {
    Value::Decimal { unscaled: BigInt::from(unscaled), scale }
}

#[test]
fn integer_sums_wrap_in_their_type() {
    let ints = [Value::Int(i32::MAX), Value::Int(1)];
    assert_eq!(run(Numeric::Sum, CqlType::Int, &ints), Value::Int(i32::MIN));
    let tiny = [Value::TinyInt(100), Value::TinyInt(100)];
    assert_eq!(run(Numeric::Sum, CqlType::TinyInt, &tiny), Value::TinyInt(-56));
    let small = [Value::SmallInt(30_000), Value::SmallInt(30_000)];
    assert_eq!(run(Numeric::Sum, CqlType::SmallInt, &small), Value::SmallInt(-5536));
    let big = [Value::BigInt(i64::MAX), Value::BigInt(2)];
    assert_eq!(run(Numeric::Sum, CqlType::BigInt, &big), Value::BigInt(i64::MIN + 1));
    assert_eq!(run(Numeric::Sum, CqlType::Counter, &[Value::Counter(3), Value::Counter(4)]), Value::Counter(7));
}

#[test]
fn integer_averages_do_not_overflow_and_truncate() {
    // Summed in 64 bits: no wrap for ints.
    let ints = [Value::Int(i32::MAX), Value::Int(i32::MAX)];
    assert_eq!(run(Numeric::Avg, CqlType::Int, &ints), Value::Int(i32::MAX));
    // Past 64 bits: a big integer.
    let big = [Value::BigInt(i64::MAX), Value::BigInt(i64::MAX), Value::BigInt(i64::MAX)];
    assert_eq!(run(Numeric::Avg, CqlType::BigInt, &big), Value::BigInt(i64::MAX));
    // Truncated toward zero.
    assert_eq!(run(Numeric::Avg, CqlType::Int, &[Value::Int(1), Value::Int(2)]), Value::Int(1));
    assert_eq!(run(Numeric::Avg, CqlType::Int, &[Value::Int(-1), Value::Int(-2)]), Value::Int(-1));
    assert_eq!(run(Numeric::Avg, CqlType::TinyInt, &[Value::TinyInt(100), Value::TinyInt(101)]), Value::TinyInt(100));
    let vi = [Value::Varint(BigInt::from(7)), Value::Varint(BigInt::from(-2))];
    assert_eq!(run(Numeric::Avg, CqlType::Varint, &vi), Value::Varint(BigInt::from(2)));
}

#[test]
fn empty_input_gives_zero() {
    assert_eq!(run(Numeric::Sum, CqlType::Int, &[]), Value::Int(0));
    assert_eq!(run(Numeric::Avg, CqlType::Int, &[]), Value::Int(0));
    assert_eq!(run(Numeric::Avg, CqlType::BigInt, &[]), Value::BigInt(0));
    assert_eq!(run(Numeric::Sum, CqlType::Double, &[]), Value::Double(0.0));
    assert_eq!(run(Numeric::Avg, CqlType::Float, &[]), Value::Float(0.0));
    assert_eq!(run(Numeric::Sum, CqlType::Decimal, &[]), dec(0, 0));
    assert_eq!(run(Numeric::Avg, CqlType::Decimal, &[]), dec(0, 0));
    assert_eq!(run(Numeric::Sum, CqlType::Varint, &[]), Value::Varint(BigInt::from(0)));
    assert_eq!(run(Numeric::Avg, CqlType::Varint, &[]), Value::Varint(BigInt::from(0)));
}

#[test]
fn floating_point_sums_are_compensated() {
    // 0.1 ten times: a naive double sum gives 0.9999999999999999.
    let tenths = vec![Value::Double(0.1); 10];
    assert_eq!(run(Numeric::Sum, CqlType::Double, &tenths), Value::Double(1.0));
    assert_eq!(run(Numeric::Avg, CqlType::Double, &tenths), Value::Double(0.1));
    let floats = [Value::Float(1.5), Value::Float(2.25)];
    assert_eq!(run(Numeric::Sum, CqlType::Float, &floats), Value::Float(3.75));
    assert_eq!(run(Numeric::Avg, CqlType::Float, &floats), Value::Float(1.875));
    // Infinities of one sign add up to that infinity, not NaN.
    let inf = [Value::Double(f64::INFINITY), Value::Double(f64::INFINITY)];
    assert_eq!(run(Numeric::Sum, CqlType::Double, &inf), Value::Double(f64::INFINITY));
    // An overflowing sum of finite values still averages.
    let max = [Value::Double(f64::MAX), Value::Double(f64::MAX)];
    assert_eq!(run(Numeric::Avg, CqlType::Double, &max), Value::Double(f64::MAX));
}

#[test]
fn decimals_are_exact() {
    // 1.5 + 2.25 = 3.75 (the larger scale).
    assert_eq!(run(Numeric::Sum, CqlType::Decimal, &[dec(15, 1), dec(225, 2)]), dec(375, 2));
    // avg(1, 2): 1 + (2 - 1) / 2, rounded half-even at scale 0, is 1.
    assert_eq!(run(Numeric::Avg, CqlType::Decimal, &[dec(1, 0), dec(2, 0)]), dec(1, 0));
    // avg(1.0, 2.0) = 1.0 + 0.5 = 1.5.
    assert_eq!(run(Numeric::Avg, CqlType::Decimal, &[dec(10, 1), dec(20, 1)]), dec(15, 1));
    // avg(1, 4): 1 + 3 / 2 = 1 + 2 (1.5 rounds to even) = 3.
    assert_eq!(run(Numeric::Avg, CqlType::Decimal, &[dec(1, 0), dec(4, 0)]), dec(3, 0));
    // avg(-1, -4): -1 + -3 / 2 = -1 + -2 = -3.
    assert_eq!(run(Numeric::Avg, CqlType::Decimal, &[dec(-1, 0), dec(-4, 0)]), dec(-3, 0));
    let vi = [Value::Varint(BigInt::from(i64::MAX)), Value::Varint(BigInt::from(i64::MAX))];
    assert_eq!(run(Numeric::Sum, CqlType::Varint, &vi), Value::Varint(BigInt::from(i64::MAX) * 2));
}

/// `t (k int, c int, n int, f double, s text, PRIMARY KEY (k, c))`.
fn table() -> TableDef {
    use ColumnKind::*;
    test_support::table(&[
        ("k", CqlType::Int, PartitionKey),
        ("c", CqlType::Int, Clustering),
        ("n", CqlType::Int, Regular),
        ("f", CqlType::Double, Regular),
        ("s", CqlType::Text, Regular),
    ])
}

fn plan(cql: &str) -> Result<SelectionPlan, String> {
    let Ok(ast::Statement::Select(select)) = cql::parse(cql) else { panic!("not a SELECT: {cql}") };
    plan_selection(&table(), &select).map_err(|e| e.to_string())
}

#[test]
fn sum_and_avg_are_named_and_typed_as_cassandra() {
    let p = plan("SELECT sum(n), avg(f), AVG(n) AS a, k FROM t").unwrap();
    let specs: Vec<(String, CqlType)> = p.specs.iter().map(|s| (s.name.clone(), s.ty.clone())).collect();
    assert_eq!(
        specs,
        vec![
            ("system.sum(n)".to_string(), CqlType::Int),
            ("system.avg(f)".to_string(), CqlType::Double),
            ("a".to_string(), CqlType::Int),
            ("k".to_string(), CqlType::Int),
        ]
    );
    assert!(p.sels.iter().take(3).all(Sel::is_aggregate));
    let p = plan("SELECT toJson(sum(n)), CAST(avg(n) AS text) FROM t").unwrap();
    assert!(p.sels.iter().all(Sel::is_aggregate));
}

#[test]
fn sum_and_avg_refuse_non_numeric_arguments() {
    let err = plan("SELECT sum(s) FROM t").err().unwrap();
    assert!(
        err.starts_with(
            "Invalid call to function sum, none of its type signatures match (known type signatures: \
             system.sum : (tinyint) -> tinyint, system.sum : (smallint) -> smallint"
        ),
        "{err}"
    );
    let err = plan("SELECT avg(n, f) FROM t").err().unwrap();
    assert!(err.starts_with("Invalid call to function avg, none of its type signatures match"), "{err}");
    let err = plan("SELECT avg(n), s FROM t WHERE k = 1").map(|_| ()).err();
    assert_eq!(err, None, "a column beside an aggregate takes the first row's value");
}

/// A row of `table()` with `n` (int) and `f` (double) set.
fn row(n: i32, f: f64) -> RowData {
    let t = table();
    let mut cells = vec![None; t.columns.len()];
    let cell = |value: Vec<u8>| Some(crate::common::CellOut { value, timestamp: Some(1), ttl: None, fields: None });
    for (i, c) in t.columns.iter().enumerate() {
        match c.name.as_str() {
            "n" => cells[i] = cell(n.to_be_bytes().to_vec()),
            "f" => cells[i] = cell(f.to_be_bytes().to_vec()),
            _ => {}
        }
    }
    RowData { token: 0, clustering: Vec::new(), cells }
}

/// The cells one SELECT gives for `rows` (one row: aggregate or the first row's).
fn cells(cql: &str, rows: &[RowData]) -> Vec<Option<Vec<u8>>> {
    let p = plan(cql).unwrap();
    let clock = crate::clock::Clock::new(1);
    p.sels
        .iter()
        .map(|s| {
            aggregate_cell(s, rows, &Env { clock: &clock, values: &[] }).expect("no failure").map(|c| c.into_owned())
        })
        .collect()
}

#[test]
fn conversion_functions_nest() {
    let p = plan("SELECT blobAsInt(intAsBlob(n)) FROM t").unwrap();
    assert_eq!(p.specs[0].name, "system.blobasint(system.intasblob(n))");
    assert_eq!(p.specs[0].ty, CqlType::Int);
    assert!(!p.sels[0].is_aggregate());
    let p = plan("SELECT toJson(max(n)), blobasint(intasblob(sum(n))) FROM t").unwrap();
    let names: Vec<&str> = p.specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["system.tojson(system.max(n))", "system.blobasint(system.intasblob(system.sum(n)))"]);
    assert!(p.sels.iter().all(Sel::is_aggregate));
    let rows = [row(3, 1.5), row(4, 2.5)];
    let got = cells("SELECT toJson(max(n)), blobAsInt(intAsBlob(sum(n))), doubleAsBlob(avg(f)) FROM t", &rows);
    assert_eq!(got[0].as_deref(), Some(&b"4"[..]));
    assert_eq!(got[1], Some(7i32.to_be_bytes().to_vec()));
    assert_eq!(got[2], Some(2.0f64.to_be_bytes().to_vec()));
    let got = cells("SELECT blobAsInt(intAsBlob(n)), textAsBlob(s) FROM t", &rows[..1]);
    assert_eq!(got, vec![Some(3i32.to_be_bytes().to_vec()), None]);
}

#[test]
fn conversion_functions_check_their_argument_type() {
    let err = plan("SELECT intAsBlob(s) FROM t").err().unwrap();
    assert_eq!(err, "Type error: s cannot be passed as argument 0 of function system.intasblob of type int");
    // blobAsX takes any value, its bytes checked when read.
    assert!(plan("SELECT blobAsInt(n) FROM t").is_ok());
    let err = plan("SELECT blobAsInt(intAsBlob(n), n) FROM t").err().unwrap();
    assert_eq!(err, "Invalid number of arguments in call to function system.blobasint: 1 required but 2 provided");
    assert_eq!(plan("SELECT blobAsBlob(n) FROM t").err().unwrap(), "Unknown function 'blobasblob'");
}

#[test]
fn snake_case_spellings_are_the_functions_of_cassandra_5() {
    use crate::bind::legacy_function_name as legacy;
    assert_eq!(legacy("to_unix_timestamp"), "tounixtimestamp");
    assert_eq!(legacy("current_timeuuid"), "currenttimeuuid");
    assert_eq!(legacy("min_timeuuid"), "mintimeuuid");
    assert_eq!(legacy("int_as_blob"), "intasblob");
    assert_eq!(legacy("blob_as_varchar"), "blobasvarchar");
    assert_eq!(legacy("to_json"), "to_json");
    assert_eq!(legacy("blob_as_int_as_blob"), "blob_as_int_as_blob");
    let p = plan("SELECT blob_as_int(int_as_blob(n)), double_as_blob(f) FROM t").unwrap();
    let names: Vec<&str> = p.specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["system.blob_as_int(system.int_as_blob(n))", "system.double_as_blob(f)"]);
    assert_eq!(p.specs[0].ty, CqlType::Int);
    let err = plan("SELECT to_timestamp(n) FROM t").err().unwrap();
    assert_eq!(err, "Type error: n cannot be passed as argument 0 of function system.to_timestamp of type timeuuid");
    assert_eq!(plan("SELECT to_time_stamp(n) FROM t").err().unwrap(), "Unknown function 'to_time_stamp'");
}

#[test]
fn operations_are_named_and_typed_as_cassandra() {
    let p =
        plan("SELECT n + 1, (n + 1) * 2, n - (1 - 1), -n, n + f, 1.5 + 1, (bigint) 1 + n, s + 'x', max(n) * 2 FROM t")
            .unwrap();
    let specs: Vec<(String, CqlType)> = p.specs.iter().map(|s| (s.name.clone(), s.ty.clone())).collect();
    let want: Vec<(&str, CqlType)> = vec![
        ("n + 1", CqlType::Int),
        ("(n + 1) * 2", CqlType::Int),
        ("n - (1 - 1)", CqlType::Int),
        ("-n", CqlType::Int),
        ("n + f", CqlType::Double),
        ("1.5 + 1", CqlType::Double),
        ("(bigint)1 + n", CqlType::BigInt),
        ("s + 'x'", CqlType::Text),
        ("system.max(n) * 2", CqlType::Int),
    ];
    assert_eq!(specs, want.into_iter().map(|(n, t)| (n.to_string(), t)).collect::<Vec<_>>());
    assert!(p.sels.last().is_some_and(Sel::is_aggregate));
}

#[test]
fn operations_refused_as_cassandra() {
    let err = |cql: &str| plan(cql).err().unwrap_or_default();
    assert_eq!(err("SELECT s + n FROM t"), "the '+' operation is not supported between s and n");
    assert_eq!(
        err("SELECT n + ? FROM t"),
        "Ambiguous '+' operation with args n and ?: use type hint to disambiguate, example '(int) ?'"
    );
    assert_eq!(
        err("SELECT -1 FROM t"),
        "Cannot infer type for term -1 in selection clause (try using a cast to force a type)"
    );
    assert!(err("SELECT -s FROM t").starts_with("Invalid call to function system._negate"));
}

#[test]
fn operations_over_rows_and_aggregates() {
    let rows = [row(10, 1.5), row(25, 2.0)];
    let int = |n: i32| Some(n.to_be_bytes().to_vec());
    assert_eq!(cells("SELECT n * 2, n % 3 FROM t", &rows), vec![int(20), int(1)]);
    assert_eq!(
        cells("SELECT sum(n + 1), max(n) * 2, count(n + 1) FROM t", &rows),
        vec![int(37), int(50), Some(2i64.to_be_bytes().to_vec())]
    );
    assert_eq!(cells("SELECT f / 0 FROM t", &rows), vec![Some(f64::INFINITY.to_be_bytes().to_vec())]);
}
