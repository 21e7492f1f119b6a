//! Expected texts are Cassandra 5.0.9's, read from a running node
//! (`SELECT JSON`, `toJson`, `INSERT JSON` errors).

use std::net::IpAddr;

use num_bigint::BigInt;
use uuid::Uuid;

use super::*;

fn list(elem: CqlType) -> CqlType {
    CqlType::List { elem: Box::new(elem), frozen: false }
}

fn set(elem: CqlType) -> CqlType {
    CqlType::Set { elem: Box::new(elem), frozen: true }
}

fn map(key: CqlType, value: CqlType) -> CqlType {
    CqlType::Map { key: Box::new(key), value: Box::new(value), frozen: false }
}

fn addr() -> CqlType {
    CqlType::Udt {
        keyspace: "ks".into(),
        name: "addr".into(),
        fields: vec![("street".into(), CqlType::Text), ("Zip".into(), CqlType::Int)],
        frozen: true,
    }
}

/// The JSON `text` read for `ty`.
fn read(ty: &CqlType, text: &str) -> Result<Vec<u8>, ValueError> {
    from_json(ty, &parse(text).unwrap(), 1_000)
}

/// `text` read for `ty` and printed back.
fn round(ty: &CqlType, text: &str) -> String {
    to_json(ty, &read(ty, text).unwrap())
}

fn err(ty: &CqlType, text: &str) -> String {
    match read(ty, text) {
        Err(e) => e.to_string(),
        Ok(b) => panic!("{text} read as {b:?} for {ty}"),
    }
}

fn json_of(v: Value) -> String {
    to_json(&type_of(&v), &v.to_bytes())
}

fn type_of(v: &Value) -> CqlType {
    match v {
        Value::Float(_) => CqlType::Float,
        Value::Double(_) => CqlType::Double,
        Value::Decimal { .. } => CqlType::Decimal,
        Value::Timestamp(_) => CqlType::Timestamp,
        Value::Date(_) => CqlType::Date,
        Value::Time(_) => CqlType::Time,
        Value::Duration { .. } => CqlType::Duration,
        Value::Inet(_) => CqlType::Inet,
        other => panic!("no type for {other:?}"),
    }
}

#[test]
fn text_and_ascii() {
    assert_eq!(
        round(&CqlType::Text, r#""h\u00e9\"\\\n\t\u0001/\u001f\u007f""#),
        "\"hé\\\"\\\\\\n\\t\\u0001/\\u001F\u{7f}\""
    );
    assert_eq!(round(&CqlType::Ascii, r#""abc""#), r#""abc""#);
    assert_eq!(round(&CqlType::Text, r#""""#), r#""""#);
    assert_eq!(err(&CqlType::Text, "1"), "Expected a UTF-8 string, but got a Integer: 1");
    assert_eq!(err(&CqlType::Ascii, "1"), "Expected an ascii string, but got a Integer: 1");
    assert_eq!(
        err(&CqlType::Ascii, r#""é""#),
        "Invalid ASCII character in string literal: java.nio.charset.UnmappableCharacterException: Input length = 1"
    );
    assert_eq!(read(&CqlType::Text, r#""\ud83d\ude00""#).unwrap(), "😀".as_bytes());
    // A surrogate without its pair: Java's UTF-8 encoder writes '?'.
    assert_eq!(read(&CqlType::Text, r#""a\ud800b\udc00""#).unwrap(), b"a?b?");
}

#[test]
fn integers() {
    assert_eq!(round(&CqlType::Int, "3"), "3");
    assert_eq!(round(&CqlType::Int, r#""+5""#), "5");
    assert_eq!(round(&CqlType::BigInt, r#""-0""#), "0");
    assert_eq!(round(&CqlType::TinyInt, "1"), "1");
    assert_eq!(round(&CqlType::SmallInt, r#""12""#), "12");
    assert_eq!(round(&CqlType::BigInt, "3000000000"), "3000000000");
    assert_eq!(round(&CqlType::Varint, "123456789012345678901234567890"), "123456789012345678901234567890");
    assert_eq!(round(&CqlType::Varint, r#""-0012""#), "-12");
    assert_eq!(err(&CqlType::Int, r#""abc""#), "Unable to make int from 'abc'");
    assert_eq!(err(&CqlType::Int, "1.5"), "Expected an int value, but got a Double: 1.5");
    assert_eq!(err(&CqlType::Int, "3000000000"), "Expected an int value, but got a Long: 3000000000");
    assert_eq!(err(&CqlType::Int, "true"), "Expected an int value, but got a Boolean: true");
    assert_eq!(err(&CqlType::Int, "[1]"), "Expected an int value, but got a ArrayList: [1]");
    assert_eq!(
        err(&CqlType::Int, r#"{"a": 1, "b": [1, "x"]}"#),
        "Expected an int value, but got a LinkedHashMap: {a=1, b=[1, x]}"
    );
    assert_eq!(err(&CqlType::TinyInt, "1000"), "Unable to make byte from '1000'");
    assert_eq!(err(&CqlType::TinyInt, "1.0"), "Unable to make byte from '1.0'");
    assert_eq!(err(&CqlType::TinyInt, "false"), "Expected a byte value, but got a Boolean: false");
    assert_eq!(err(&CqlType::SmallInt, "1e2"), "Unable to make short from '100.0'");
    assert_eq!(err(&CqlType::SmallInt, r#""x""#), "Unable to make short from 'x'");
    assert_eq!(err(&CqlType::BigInt, "1.5"), "Expected a bigint value, but got a Double: 1.5");
    assert_eq!(
        err(&CqlType::BigInt, "123456789012345678901234567890"),
        "Expected a bigint value, but got a BigInteger: 123456789012345678901234567890"
    );
    assert_eq!(err(&CqlType::BigInt, r#""9223372036854775808""#), "Unable to make long from '9223372036854775808'");
    assert_eq!(err(&CqlType::Varint, "1.5"), "Value '1.5' is not a valid representation of a varint value");
    assert_eq!(err(&CqlType::Varint, "1e2"), "Value '100.0' is not a valid representation of a varint value");
    assert_eq!(err(&CqlType::Varint, r#""""#), "Value '' is not a valid representation of a varint value");
    // The empty string is the empty value.
    assert_eq!(read(&CqlType::Int, r#""""#).unwrap(), Vec::<u8>::new());
    assert_eq!(to_json(&CqlType::Int, &[]), r#""""#);
    assert_eq!(to_json_function(&CqlType::Int, Some(&[])), "null");
    assert_eq!(to_json_function(&CqlType::Int, None), "null");
}

#[test]
fn floating_point() {
    assert_eq!(round(&CqlType::Float, "1.5"), "1.5");
    assert_eq!(round(&CqlType::Double, "0.1"), "0.1");
    assert_eq!(round(&CqlType::Double, "100"), "100.0");
    assert_eq!(round(&CqlType::Float, "16777217"), "1.6777216E7");
    assert_eq!(round(&CqlType::Double, "9007199254740993"), "9.007199254740992E15");
    assert_eq!(round(&CqlType::Float, r#""1e3""#), "1000.0");
    assert_eq!(round(&CqlType::Double, r#"" 2.5 ""#), "2.5");
    assert_eq!(round(&CqlType::Float, r#""1.5f""#), "1.5");
    assert_eq!(round(&CqlType::Double, r#""2d""#), "2.0");
    assert_eq!(round(&CqlType::Float, r#""0x1p3""#), "8.0");
    // JSON has no NaN or infinity: Cassandra prints null.
    assert_eq!(round(&CqlType::Double, r#""NaN""#), "null");
    assert_eq!(round(&CqlType::Float, r#""-Infinity""#), "null");
    assert_eq!(round(&CqlType::Float, "3.4028235e39"), "null");
    assert_eq!(err(&CqlType::Float, r#""x""#), "Unable to make float from 'x'");
    assert_eq!(err(&CqlType::Float, "true"), "Expected a float value, but got a Boolean: true");
    assert_eq!(err(&CqlType::Double, "[1]"), "Expected a double value, but got a ArrayList: [1]");
    for (v, text) in [
        (1e20, "1.0E20"),
        (0.001, "0.001"),
        (12345678.9, "1.23456789E7"),
        (9999999.0, "9999999.0"),
        (-0.0, "-0.0"),
        (0.0, "0.0"),
        (1e308, "1.0E308"),
        (123.456, "123.456"),
        (0.0001, "1.0E-4"),
    ] {
        assert_eq!(json_of(Value::Double(v)), text);
    }
    for (v, text) in [(1e-5f32, "1.0E-5"), (1.0e7, "1.0E7"), (123456.7, "123456.7"), (-0.0, "-0.0")] {
        assert_eq!(json_of(Value::Float(v)), text);
    }
}

#[test]
fn decimals() {
    assert_eq!(round(&CqlType::Decimal, "1.10"), "1.1");
    assert_eq!(round(&CqlType::Decimal, r#""1.50""#), "1.50");
    assert_eq!(round(&CqlType::Decimal, "100"), "100");
    assert_eq!(round(&CqlType::Decimal, "0.1e-2"), "0.001");
    assert_eq!(round(&CqlType::Decimal, "123.456e-10"), "1.23456E-8");
    assert_eq!(round(&CqlType::Decimal, r#""1e5""#), "1E+5");
    assert_eq!(round(&CqlType::Decimal, r#"".5""#), "0.5");
    assert_eq!(round(&CqlType::Decimal, r#""5.""#), "5");
    assert_eq!(err(&CqlType::Decimal, r#""x""#), "Value 'x' is not a valid representation of a decimal value");
    assert_eq!(err(&CqlType::Decimal, "true"), "Value 'true' is not a valid representation of a decimal value");
    assert_eq!(err(&CqlType::Decimal, "1e400"), "Value 'Infinity' is not a valid representation of a decimal value");
    let dec = |u: i64, scale: i32| json_of(Value::Decimal { unscaled: BigInt::from(u), scale });
    assert_eq!(dec(1, -3), "1E+3");
    assert_eq!(dec(1, 6), "0.000001");
    assert_eq!(dec(1, 7), "1E-7");
    assert_eq!(dec(-15, 11), "-1.5E-10");
    assert_eq!(dec(0, 5), "0.00000");
    assert_eq!(dec(-1, 2), "-0.01");
    let big: BigInt = "12345678901234567890".parse().unwrap();
    assert_eq!(json_of(Value::Decimal { unscaled: big, scale: -30 }), "1.2345678901234567890E+49");
}

#[test]
fn booleans_blobs_uuids_inets() {
    assert_eq!(round(&CqlType::Boolean, "true"), "true");
    assert_eq!(round(&CqlType::Boolean, r#""TRUE""#), "true");
    assert_eq!(round(&CqlType::Boolean, r#""False""#), "false");
    assert_eq!(round(&CqlType::Boolean, r#""""#), "false");
    assert_eq!(err(&CqlType::Boolean, r#""yes""#), "Unable to make boolean from 'yes'");
    assert_eq!(err(&CqlType::Boolean, "1"), "Expected a boolean value, but got a Integer: 1");

    assert_eq!(round(&CqlType::Blob, r#""0x00ff""#), r#""0x00ff""#);
    assert_eq!(round(&CqlType::Blob, r#""0xABcd""#), r#""0xabcd""#);
    assert_eq!(round(&CqlType::Blob, r#""0x""#), r#""0x""#);
    assert_eq!(
        err(&CqlType::Blob, r#""00ff""#),
        "Value '00ff' is not a valid blob representation: String representation of blob is missing 0x prefix: 00ff"
    );
    assert_eq!(
        err(&CqlType::Blob, r#""0xzz""#),
        "Value '0xzz' is not a valid blob representation: cannot parse 'zz' as hex bytes"
    );
    assert_eq!(
        err(&CqlType::Blob, r#""0x123""#),
        "Value '0x123' is not a valid blob representation: cannot parse '123' as hex bytes"
    );
    assert_eq!(
        err(&CqlType::Blob, "5"),
        "Value '5' is not a valid blob representation: class java.lang.Integer cannot be cast to class java.lang.String (java.lang.Integer and java.lang.String are in module java.base of loader 'bootstrap')"
    );
    assert_eq!(
        err(&CqlType::Blob, "[5]"),
        "Value '[5]' is not a valid blob representation: class java.util.ArrayList cannot be cast to class java.lang.String (java.util.ArrayList and java.lang.String are in module java.base of loader 'bootstrap')"
    );

    let u = r#""b1a2c3d4-0000-4000-8000-000000000000""#;
    assert_eq!(round(&CqlType::Uuid, u), u);
    assert_eq!(
        round(&CqlType::Uuid, r#""B1A2C3D4-0000-4000-8000-00000000000A""#),
        r#""b1a2c3d4-0000-4000-8000-00000000000a""#
    );
    assert_eq!(err(&CqlType::Uuid, r#""x""#), "Unable to make UUID from 'x'");
    assert_eq!(err(&CqlType::Uuid, "1"), "Expected a string representation of a uuid, but got a Integer: 1");
    let tu = r#""6ba7b810-9dad-11d1-80b4-00c04fd430c8""#;
    assert_eq!(round(&CqlType::TimeUuid, tu), tu);
    assert_eq!(err(&CqlType::TimeUuid, u), "TimeUUID supports only version 1 UUIDs");
    assert_eq!(err(&CqlType::TimeUuid, r#""x""#), "Unknown timeuuid representation: x");
    assert_eq!(err(&CqlType::TimeUuid, "1"), "Expected a string representation of a timeuuid, but got a Integer: 1");
    assert_eq!(to_json(&CqlType::Uuid, Uuid::nil().as_bytes()), r#""00000000-0000-0000-0000-000000000000""#);

    assert_eq!(round(&CqlType::Inet, r#""::1""#), r#""0:0:0:0:0:0:0:1""#);
    assert_eq!(round(&CqlType::Inet, r#""2001:db8::1""#), r#""2001:db8:0:0:0:0:0:1""#);
    assert_eq!(round(&CqlType::Inet, r#""1.2.3.4""#), r#""1.2.3.4""#);
    assert_eq!(round(&CqlType::Inet, r#""::ffff:1.2.3.4""#), r#""1.2.3.4""#);
    let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
    assert_eq!(json_of(Value::Inet(mapped)), r#""10.0.0.1""#);
    assert_eq!(err(&CqlType::Inet, r#""x y""#), "Unable to make inet address from 'x y'");
    assert_eq!(err(&CqlType::Inet, "1"), "Expected a string representation of an inet value, but got a Integer: 1");
}

#[test]
fn dates_and_times() {
    assert_eq!(round(&CqlType::Timestamp, r#""2011-02-03 04:05:00""#), r#""2011-02-03 04:05:00.000Z""#);
    assert_eq!(round(&CqlType::Timestamp, r#""2011-02-03T04:05:06.789+0200""#), r#""2011-02-03 02:05:06.789Z""#);
    assert_eq!(round(&CqlType::Timestamp, "-5000000000"), r#""1969-11-04 03:06:40.000Z""#);
    assert_eq!(round(&CqlType::Timestamp, r#""now""#), r#""1970-01-01 00:00:01.000Z""#);
    assert_eq!(json_of(Value::Timestamp(-62_135_596_800_001)), r#""0001-12-31 23:59:59.999Z""#);
    assert_eq!(json_of(Value::Timestamp(253_402_300_800_000)), r#""+10000-01-01 00:00:00.000Z""#);
    assert_eq!(
        err(&CqlType::Timestamp, "1000"),
        "Expected a long or a datestring representation of a timestamp value, but got a Integer: 1000"
    );
    assert_eq!(err(&CqlType::Timestamp, r#""garbage""#), "Unable to parse a date/time from 'garbage'");

    assert_eq!(round(&CqlType::Date, r#""2011-02-03""#), r#""2011-02-03""#);
    assert_eq!(round(&CqlType::Date, r#""0""#), r#""-5877641-06-23""#);
    assert_eq!(json_of(Value::Date(literal::parse_date("+12345-01-01").unwrap())), r#""+12345-01-01""#);
    assert_eq!(json_of(Value::Date(literal::parse_date("-0001-01-01").unwrap())), r#""-0001-01-01""#);
    assert_eq!(err(&CqlType::Date, r#""x""#), "Unable to coerce 'x' to a formatted date (long)");
    assert_eq!(err(&CqlType::Date, r#""""#), "Unable to coerce '' to a formatted date (long)");
    assert_eq!(err(&CqlType::Date, "1"), "Expected a string representation of a date value, but got a Integer: 1");

    assert_eq!(round(&CqlType::Time, r#""08:12:54.123456789""#), r#""08:12:54.123456789""#);
    assert_eq!(json_of(Value::Time(1)), r#""00:00:00.000000001""#);
    assert_eq!(
        err(&CqlType::Time, r#""25:00:00""#),
        "(TimeType) Unable to coerce '25:00:00' to a formatted time (long)"
    );
    assert_eq!(err(&CqlType::Time, "1"), "Expected a string representation of a time value, but got a Integer: 1");

    assert_eq!(round(&CqlType::Duration, r#""1y2mo3d4h5m6s7ms8us9ns""#), r#""1y2mo3d4h5m6s7ms8us9ns""#);
    assert_eq!(round(&CqlType::Duration, r#""-P1Y2M""#), r#""-1y2mo""#);
    assert_eq!(json_of(Value::Duration { months: 0, days: 0, nanos: 0 }), r#""""#);
    assert_eq!(json_of(Value::Duration { months: 0, days: 0, nanos: -5 }), r#""-5ns""#);
    // Cassandra raises this one directly (an InvalidRequest, not wrapped).
    assert_eq!(
        read(&CqlType::Duration, r#""x""#),
        Err(ValueError::InvalidRequest("Unable to convert 'x' to a duration".into()))
    );
    assert_eq!(err(&CqlType::Duration, "1"), "Expected a string representation of a duration, but got a Integer: 1");
}

#[test]
fn collections() {
    let l = list(CqlType::Int);
    assert_eq!(round(&l, "[1, 2]"), "[1, 2]");
    assert_eq!(round(&l, r#""[1, 2]""#), "[1, 2]");
    assert_eq!(round(&l, "[]"), "[]");
    assert_eq!(err(&l, "1"), "Expected a list, but got a Integer: 1");
    assert_eq!(err(&l, "[1, null]"), "Invalid null element in list");
    assert!(err(&l, r#""[1, 2""#).starts_with(
        "Error decoding JSON string: Unexpected end-of-input: expected close marker for Array (start marker at [Source: REDACTED"
    ));

    let s = set(CqlType::Text);
    assert_eq!(round(&s, r#"["b", "a", "b"]"#), r#"["a", "b"]"#);
    assert_eq!(err(&s, r#"{"a": 1}"#), "Expected a list (representing a set), but got a LinkedHashMap: {a=1}");
    assert_eq!(err(&s, "[null]"), "Invalid null element in set");

    let m = map(CqlType::Int, CqlType::Text);
    assert_eq!(round(&m, r#"{"2": "x", "1": "y"}"#), r#"{"1": "y", "2": "x"}"#);
    assert_eq!(round(&m, r#""{\"1\": \"a\"}""#), r#"{"1": "a"}"#);
    assert_eq!(err(&m, "[1]"), "Expected a map, but got a ArrayList: [1]");
    assert_eq!(err(&m, r#"{"1": null}"#), "Invalid null value in map");
    assert_eq!(err(&m, r#"{"x": "a"}"#), "Unable to make int from 'x'");
    // Non-string keys are printed as JSON, then quoted.
    let mt = map(CqlType::Timestamp, CqlType::Boolean);
    assert_eq!(
        round(&mt, r#"{"2011-02-03 04:05:00": true, "1000": false}"#),
        r#"{"1970-01-01 00:00:01.000Z": false, "2011-02-03 04:05:00.000Z": true}"#
    );
    let mf = map(CqlType::List { elem: Box::new(CqlType::Int), frozen: true }, CqlType::Int);
    assert_eq!(round(&mf, r#"{"[1, 2]": 3}"#), r#"{"[1, 2]": 3}"#);
    let mb = map(CqlType::Boolean, CqlType::Double);
    assert_eq!(round(&mb, r#"{"true": 1.5, "false": -0.0}"#), r#"{"false": -0.0, "true": 1.5}"#);
    let md = map(CqlType::Decimal, CqlType::Int);
    assert_eq!(round(&md, r#"{"1.50": 1, "1e3": 2}"#), r#"{"1.50": 1, "1E+3": 2}"#);
    let mu = map(addr(), CqlType::Int);
    assert_eq!(round(&mu, r#"{"{\"street\": \"x\"}": 1}"#), r#"{"{\"street\": \"x\", \"\\\"Zip\\\"\": null}": 1}"#);
    let me = map(CqlType::Int, CqlType::Text);
    assert_eq!(round(&me, r#"{"": "a"}"#), r#"{"": "a"}"#);
}

#[test]
fn tuples_and_udts() {
    let t = CqlType::Tuple(vec![CqlType::Int, CqlType::Text]);
    assert_eq!(round(&t, r#"[1, "z"]"#), r#"[1, "z"]"#);
    assert_eq!(round(&t, "[1, null]"), "[1, null]");
    assert_eq!(round(&t, r#""[1, \"a\"]""#), r#"[1, "a"]"#);
    assert_eq!(err(&t, "[1]"), "Tuple is missing items (expected 2): [1]");
    assert_eq!(err(&t, r#"[1, "a", 2]"#), "Tuple contains extra items (expected 2): [1, a, 2]");
    assert_eq!(err(&t, r#"{"a": 1}"#), "Expected a list representation of a tuple, but got a LinkedHashMap: {a=1}");

    let u = addr();
    assert_eq!(round(&u, r#"{"street": "s", "\"Zip\"": 5}"#), r#"{"street": "s", "\"Zip\"": 5}"#);
    assert_eq!(round(&u, r#"{"STREET": "n"}"#), r#"{"street": "n", "\"Zip\"": null}"#);
    assert_eq!(round(&u, r#"{"street": null}"#), r#"{"street": null, "\"Zip\"": null}"#);
    assert_eq!(err(&u, r#"{"nope": 1}"#), "Unknown field 'nope' in value of user defined type addr");
    assert_eq!(err(&u, r#"{"Zip": 1}"#), "Unknown field 'zip' in value of user defined type addr");
    assert_eq!(err(&u, "[1]"), "Expected a map, but got a ArrayList: [1]");
    // A UDT value serialized with fewer fields than the type has.
    assert_eq!(to_json(&u, &[0, 0, 0, 1, b'a']), r#"{"street": "a", "\"Zip\"": null}"#);

    let nested =
        CqlType::Tuple(vec![CqlType::Int, CqlType::List { elem: Box::new(CqlType::Text), frozen: true }, addr()]);
    assert_eq!(round(&nested, r#"[1, ["a"], {"street": "e"}]"#), r#"[1, ["a"], {"street": "e", "\"Zip\"": null}]"#);
    let sets_of_udt = set(addr());
    assert_eq!(
        round(&sets_of_udt, r#"[{"street": "b"}, {"street": "a"}]"#),
        r#"[{"street": "a", "\"Zip\"": null}, {"street": "b", "\"Zip\"": null}]"#
    );
}

#[test]
fn keys_and_case() {
    let mut out = String::new();
    name_key("k", &mut out);
    out.push(' ');
    name_key("Cap", &mut out);
    out.push(' ');
    name_key("writetime(i)", &mut out);
    assert_eq!(out, r#""k" "\"Cap\"" "writetime(i)""#);

    let entries = |text: &str| match parse(text).unwrap() {
        Json::Object(e) => e,
        other => panic!("{other:?}"),
    };
    let keys =
        |e: Vec<(String, Json)>| e.into_iter().map(|(k, v)| format!("{k}={}", v.java_string())).collect::<Vec<_>>();
    assert_eq!(keys(handle_case_sensitivity(entries(r#"{"k": 10, "I": 1, "Zzz": 1}"#))), ["k=10", "i=1", "zzz=1"]);
    assert_eq!(keys(handle_case_sensitivity(entries(r#"{"\"k\"": 28, "\"I\"": 1}"#))), ["k=28", "I=1"]);
    // "K" lower-cased replaces the value of "k" in place.
    assert_eq!(keys(handle_case_sensitivity(entries(r#"{"k": 12, "K": 13}"#))), ["k=13"]);
}

#[test]
fn parser_values() {
    assert_eq!(parse(r#"{"k": 26, "k": 27, "a": 1}"#).unwrap().java_string(), "{k=27, a=1}");
    assert_eq!(parse(" [1, 2.5, -0, true, null, \"x\"] ").unwrap().java_string(), "[1, 2.5, 0, true, null, x]");
    assert_eq!(parse("1e400").unwrap(), Json::Float(f64::INFINITY));
    assert_eq!(parse("-0").unwrap().class_name(), "Integer");
    assert_eq!(parse("2147483648").unwrap().class_name(), "Long");
    assert_eq!(parse("9223372036854775808").unwrap().class_name(), "BigInteger");
    assert_eq!(parse("1.0").unwrap().class_name(), "Double");
    // Whatever follows the first complete value is ignored, but not right after a number.
    assert!(parse(r#"{"k": 12} trailing"#).is_ok());
    assert!(parse("5 x").is_ok());
    assert!(parse(r#""1" x"#).is_ok());
    assert_eq!(parse("[[[]]]").unwrap(), Json::Array(vec![Json::Array(vec![Json::Array(vec![])])]));
    assert!(parse(&format!("{}{}", "[".repeat(1000), "]".repeat(1000))).is_ok());
}

const AT: &str = "[Source: REDACTED (`StreamReadFeature.INCLUDE_SOURCE_IN_LOCATION` disabled)";

fn parse_err(text: &str) -> String {
    parse(text).unwrap_err().to_string()
}

fn object_err(text: &str) -> String {
    parse_object(text).unwrap_err().to_string()
}

#[test]
fn parser_errors() {
    assert_eq!(
        parse_err("x"),
        format!("com.fasterxml.jackson.core.JsonParseException: Unrecognized token 'x': was expecting (JSON String, Number, Array, Object or token 'null', 'true' or 'false')\n at {AT}; line: 1, column: 2]")
    );
    assert_eq!(
        parse_err(r#"{"k": 1,}"#),
        format!("com.fasterxml.jackson.core.JsonParseException: Unexpected character ('}}' (code 125)): was expecting double-quote to start field name\n at {AT}; line: 1, column: 9]")
    );
    assert_eq!(
        parse_err(r#"{"k": 75, "i": 01}"#),
        format!("com.fasterxml.jackson.core.JsonParseException: Invalid numeric value: Leading zeroes not allowed\n at {AT}; line: 1, column: 17]")
    );
    assert_eq!(
        parse_err(r#"{"k": 75, "i": -}"#),
        format!("com.fasterxml.jackson.core.JsonParseException: Unexpected character ('}}' (code 125)) in numeric value: expected digit (0-9) to follow minus sign, for valid numeric value\n at {AT}; line: 1, column: 17]")
    );
    assert_eq!(
        parse_err(r#"{"k": 75, "i": 1.}"#),
        format!("com.fasterxml.jackson.core.JsonParseException: Unexpected character ('}}' (code 125)) in numeric value: Decimal point not followed by a digit\n at {AT}; line: 1, column: 17]")
    );
    assert_eq!(
        parse_err(r#"{"k": 96, "i": 1e}"#),
        format!("com.fasterxml.jackson.core.JsonParseException: Unexpected character ('}}' (code 125)) in numeric value: Exponent indicator not followed by a digit\n at {AT}; line: 1, column: 17]")
    );
    assert_eq!(
        parse_err(r#"{"k": 75, "i": NaN}"#),
        format!("com.fasterxml.jackson.core.JsonParseException: Non-standard token 'NaN': enable `JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS` to allow\n at {AT}; line: 1, column: 19]")
    );
    assert_eq!(
        parse_err(r#"{"k": 96, "i": -Infinity}"#),
        format!("com.fasterxml.jackson.core.JsonParseException: Non-standard token '-Infinity': enable `JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS` to allow\n at {AT}; line: 1, column: 25]")
    );
    assert_eq!(
        parse_err(r#"{"k": 96, "i": +1}"#),
        format!("com.fasterxml.jackson.core.JsonParseException: Unexpected character ('+' (code 43)) in numeric value: JSON spec does not allow numbers to have plus signs: enable `JsonReadFeature.ALLOW_LEADING_PLUS_SIGN_FOR_NUMBERS` to allow\n at {AT}; line: 1, column: 17]")
    );
    assert_eq!(
        parse_err(r#"{"k": 96, "i": .5}"#),
        format!("com.fasterxml.jackson.core.JsonParseException: Unexpected character ('.' (code 46)): expected a valid value (JSON String, Number, Array, Object or token 'null', 'true' or 'false')\n at {AT}; line: 1, column: 16]")
    );
    assert_eq!(
        parse_err(r#"{"k": 96, "l": [1,]}"#),
        format!("com.fasterxml.jackson.core.JsonParseException: Unexpected character (']' (code 93)): expected a valid value (JSON String, Number, Array, Object or token 'null', 'true' or 'false')\n at {AT}; line: 1, column: 19]")
    );
    assert_eq!(
        parse_err(r#"{"k": 96, "l": [1 2]}"#),
        format!("com.fasterxml.jackson.core.JsonParseException: Unexpected character ('2' (code 50)): was expecting comma to separate Array entries\n at {AT}; line: 1, column: 19]")
    );
    assert_eq!(
        parse_err(r#"{"k": 78, "i": 5 x}"#),
        format!("com.fasterxml.jackson.core.JsonParseException: Unexpected character ('x' (code 120)): was expecting comma to separate Object entries\n at {AT}; line: 1, column: 18]")
    );
    assert_eq!(
        parse_err(r#"{"k" 96}"#),
        format!("com.fasterxml.jackson.core.JsonParseException: Unexpected character ('9' (code 57)): was expecting a colon to separate field name and value\n at {AT}; line: 1, column: 6]")
    );
    assert_eq!(
        parse_err(r#"{"k": 96"#),
        format!("com.fasterxml.jackson.core.io.JsonEOFException: Unexpected end-of-input: expected close marker for Object (start marker at {AT}; line: 1, column: 1])\n at {AT}; line: 1, column: 9]")
    );
    assert_eq!(
        parse_err(r#"{"k": 96, "t": "abc"#),
        format!("com.fasterxml.jackson.core.io.JsonEOFException: Unexpected end-of-input: was expecting closing quote for a string value\n at {AT}; line: 1, column: 20]")
    );
    assert_eq!(
        parse_err(r#"{"k": 96, "t": "\x"}"#),
        format!("com.fasterxml.jackson.core.JsonParseException: Unrecognized character escape 'x' (code 120)\n at {AT}; line: 1, column: 18]")
    );
    assert_eq!(
        parse_err(r#"{"k": 96, "t": "\u12g4"}"#),
        format!("com.fasterxml.jackson.core.JsonParseException: Unexpected character ('g' (code 103)): expected a hex-digit for character escape sequence\n at {AT}; line: 1, column: 21]")
    );
    assert_eq!(
        parse_err(r#"{"k": 96, "t": truex}"#),
        format!("com.fasterxml.jackson.core.JsonParseException: Unrecognized token 'truex': was expecting (JSON String, Number, Array, Object or token 'null', 'true' or 'false')\n at {AT}; line: 1, column: 21]")
    );
    assert_eq!(
        parse_err("{\"k\": 75, \"t\": \"a\tb\"}"),
        format!("com.fasterxml.jackson.core.JsonParseException: Illegal unquoted character ((CTRL-CHAR, code 9)): has to be escaped using backslash to be included in string value\n at {AT}; line: 1, column: 18]")
    );
    assert_eq!(
        parse_err(r#"{"k": 96, "t": "é", "i": x}"#),
        format!("com.fasterxml.jackson.core.JsonParseException: Unrecognized token 'x': was expecting (JSON String, Number, Array, Object or token 'null', 'true' or 'false')\n at {AT}; line: 1, column: 27]")
    );
    assert_eq!(
        parse_err("5x"),
        format!("com.fasterxml.jackson.core.JsonParseException: Unexpected character ('x' (code 120)): Expected space separating root-level values\n at {AT}; line: 1, column: 2]")
    );
    assert_eq!(
        parse_err(""),
        format!("com.fasterxml.jackson.databind.exc.MismatchedInputException: No content to map due to end-of-input\n at {AT}; line: 1]")
    );
    assert_eq!(
        parse_err(&format!("{}{}", "[".repeat(1001), "]".repeat(1001))),
        "com.fasterxml.jackson.core.exc.StreamConstraintsException: Document nesting depth (1001) exceeds the maximum allowed (1000, from `StreamReadConstraints.getMaxNestingDepth()`)"
    );
    assert_eq!(
        parse_err(&"9".repeat(1001)),
        "com.fasterxml.jackson.core.exc.StreamConstraintsException: Number value length (1001) exceeds the maximum allowed (1000, from `StreamReadConstraints.getMaxNumberLength()`)"
    );
    assert!(parse(&"9".repeat(1000)).is_ok());
}

#[test]
fn documents_that_are_not_objects() {
    assert_eq!(parse_object("null").unwrap(), None);
    assert_eq!(parse_object(r#" {"k": 1} "#).unwrap(), Some(vec![("k".to_string(), Json::Int(1.into()))]));
    assert_eq!(
        object_err("  [1]"),
        format!("com.fasterxml.jackson.databind.exc.MismatchedInputException: Cannot deserialize value of type `java.util.LinkedHashMap<java.lang.Object,java.lang.Object>` from Array value (token `JsonToken.START_ARRAY`)\n at {AT}; line: 1, column: 3]")
    );
    assert_eq!(
        object_err("5"),
        format!("com.fasterxml.jackson.databind.exc.MismatchedInputException: Cannot deserialize value of type `java.util.LinkedHashMap<java.lang.Object,java.lang.Object>` from Integer value (token `JsonToken.VALUE_NUMBER_INT`)\n at {AT}; line: 1, column: 1]")
    );
    assert_eq!(
        object_err("1.5"),
        format!("com.fasterxml.jackson.databind.exc.MismatchedInputException: Cannot deserialize value of type `java.util.LinkedHashMap<java.lang.Object,java.lang.Object>` from Floating-point value (token `JsonToken.VALUE_NUMBER_FLOAT`)\n at {AT}; line: 1, column: 1]")
    );
    assert_eq!(
        object_err("true"),
        format!("com.fasterxml.jackson.databind.exc.MismatchedInputException: Cannot deserialize value of type `java.util.LinkedHashMap<java.lang.Object,java.lang.Object>` from Boolean value (token `JsonToken.VALUE_TRUE`)\n at {AT}; line: 1, column: 1]")
    );
    assert_eq!(
        object_err(r#""x""#),
        format!("com.fasterxml.jackson.databind.exc.MismatchedInputException: Cannot construct instance of `java.util.LinkedHashMap` (although at least one Creator exists): no String-argument constructor/factory method to deserialize from String value ('x')\n at {AT}; line: 1, column: 1]")
    );
    assert_eq!(
        object_err(r#""""#),
        format!("com.fasterxml.jackson.databind.exc.InvalidFormatException: Cannot coerce empty String (\"\") to element of `java.util.LinkedHashMap` (but could if coercion was enabled using `CoercionConfig`)\n at {AT}; line: 1, column: 1]")
    );
}

#[test]
fn java_number_parsing() {
    use super::java::*;
    assert_eq!(parse_integer("+5", -10, 10), Some(5));
    assert_eq!(parse_integer("11", -10, 10), None);
    assert_eq!(parse_integer(" 1", -10, 10), None);
    assert_eq!(parse_integer("", -10, 10), None);
    assert_eq!(parse_integer("-", -10, 10), None);
    assert_eq!(parse_integer(&"9".repeat(40), i64::MIN, i64::MAX), None);
    assert_eq!(parse_big_integer("+12"), Some(BigInt::from(12)));
    assert_eq!(parse_big_integer("1.0"), None);
    assert_eq!(parse_big_decimal("-1.50e-2"), Some((BigInt::from(-150), 4)));
    assert_eq!(parse_big_decimal("1E+3"), Some((BigInt::from(1), -3)));
    assert_eq!(parse_big_decimal("."), None);
    assert_eq!(parse_big_decimal("1e"), None);
    assert_eq!(parse_big_decimal(" 1"), None);
    assert_eq!(parse_big_decimal("1e2147483648"), None);
    assert_eq!(parse_double("  -Infinity "), Some(f64::NEG_INFINITY));
    assert_eq!(parse_double("0x1.8p1"), Some(3.0));
    assert_eq!(parse_double("0x10P-4d"), Some(1.0));
    assert_eq!(parse_double("1e"), None);
    assert_eq!(parse_double("e5"), None);
    assert_eq!(parse_double("1.5x"), None);
    assert!(parse_double("NaN").unwrap().is_nan());
    assert_eq!(parse_float("1e-50"), Some(0.0));
}

#[test]
fn nothing_panics_on_malformed_bytes() {
    for ty in [
        CqlType::Int,
        CqlType::Float,
        CqlType::Double,
        CqlType::Timestamp,
        CqlType::Inet,
        CqlType::Decimal,
        CqlType::Duration,
        list(CqlType::Int),
        map(CqlType::Int, CqlType::Int),
        addr(),
        CqlType::Tuple(vec![CqlType::Int]),
    ] {
        for bytes in [&[1u8][..], &[0, 0, 0, 5, 1], &[0xff; 3], &[0x80, 0, 0, 0, 0, 0, 0, 0, 0]] {
            let _ = to_json(&ty, bytes);
        }
    }
}
