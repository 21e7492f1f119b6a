//! JSON in statements: SELECT JSON rows and metadata, toJson() in the
//! selection, fromJson() in terms, INSERT JSON values. Expected texts are
//! Cassandra 5.0.9's (see also `types::json`'s tests and
//! tests/python/test_json.py, which runs against both).

use super::test_support::{self, select};
use cql_protocol::BoundValue;

use super::*;
use crate::clock::Clock;
use crate::common::CellOut;

/// `t (k int, c int, "Cap" int, ts timestamp, l list<int>, PRIMARY KEY (k, c))`.
fn table() -> TableDef {
    use ColumnKind::*;
    test_support::table(&[
        ("k", CqlType::Int, PartitionKey),
        ("c", CqlType::Int, Clustering),
        ("Cap", CqlType::Int, Regular),
        ("ts", CqlType::Timestamp, Regular),
        ("l", CqlType::List { elem: Box::new(CqlType::Int), frozen: false }, Regular),
    ])
}

fn int(v: i32) -> Vec<u8> {
    v.to_be_bytes().to_vec()
}

/// A row of `table()`, cells by column name.
fn row(t: &TableDef, cells: &[(&str, Vec<u8>)]) -> RowData {
    let mut out = vec![None; t.columns.len()];
    for (name, value) in cells {
        let i = t.columns.iter().position(|c| c.name == *name).unwrap();
        out[i] = Some(CellOut { value: value.clone(), timestamp: Some(1_500), ttl: None, fields: None });
    }
    RowData { token: 7, clustering: Vec::new(), cells: out }
}

/// The rows a SELECT writes for `rows`, as text cells.
fn output(cql: &str, rows: &[RowData]) -> (Vec<ColumnSpec>, Vec<Vec<Option<String>>>) {
    let t = table();
    let plan = plan_selection(&t, &select(cql)).unwrap();
    let clock = crate::clock::Clock::new(1);
    let mut out = Out::new(&plan, &clock, &[]);
    if plan.sels.iter().any(Sel::is_aggregate) {
        write_aggregate(&plan, rows, &mut out);
    } else {
        for r in rows {
            write_row(&plan, r, &mut out);
        }
    }
    let specs = plan.result_specs();
    let result = out.finish().expect("no failure").finish(RowsMetadata::new(specs.clone()));
    let cells = result
        .iter()
        .map(|r| r.unwrap().into_iter().map(|c| c.map(|b| String::from_utf8_lossy(&b).into_owned())).collect())
        .collect();
    (specs, cells)
}

fn json_rows(cql: &str, rows: &[RowData]) -> Vec<String> {
    let (specs, cells) = output(cql, rows);
    assert_eq!(specs.len(), 1);
    cells.into_iter().map(|mut r| r.remove(0).unwrap()).collect()
}

#[test]
fn select_json_has_one_text_column_named_json() {
    let plan = plan_selection(&table(), &select("SELECT JSON k, \"Cap\" FROM t")).unwrap();
    let specs = plan.result_specs();
    assert_eq!(specs.len(), 1);
    assert_eq!((specs[0].keyspace.as_str(), specs[0].table.as_str()), ("ks", "t"));
    assert_eq!((specs[0].name.as_str(), &specs[0].ty), ("[json]", &CqlType::Text));
    // Without JSON the selectors' own specs.
    let plan = plan_selection(&table(), &select("SELECT k, \"Cap\" FROM t")).unwrap();
    assert_eq!(plan.result_specs().iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["k", "Cap"]);
}

#[test]
fn select_json_rows() {
    let t = table();
    let r = row(
        &t,
        &[
            ("k", int(1)),
            ("c", int(2)),
            ("Cap", int(7)),
            ("ts", 1_296_705_900_000i64.to_be_bytes().to_vec()),
            ("l", [int(2), int(4), int(1), int(4), int(2)].concat()),
        ],
    );
    assert_eq!(
        json_rows("SELECT JSON * FROM t", &[r]),
        [r#"{"k": 1, "c": 2, "\"Cap\"": 7, "l": [1, 2], "ts": "2011-02-03 04:05:00.000Z"}"#]
    );
    let cells = [("k", int(1)), ("c", int(2)), ("ts", 0i64.to_be_bytes().to_vec())];
    let r = row(&t, &cells);
    assert_eq!(
        json_rows(
            "SELECT JSON k, \"Cap\", c AS \"Foo\", c AS bar, writetime(ts), ttl(ts), token(k), toJson(ts), to_json(l) FROM t",
            std::slice::from_ref(&r)
        ),
        [concat!(
            r#"{"k": 1, "\"Cap\"": null, "\"Foo\"": 2, "bar": 2, "writetime(ts)": 1500, "ttl(ts)": null, "#,
            r#""system.token(k)": 7, "system.tojson(ts)": "\"1970-01-01 00:00:00.000Z\"", "system.to_json(l)": "null"}"#
        )]
    );
    assert_eq!(
        json_rows("SELECT JSON count(*), max(c), toJson(min(k)) FROM t", &[r, row(&t, &cells)]),
        [r#"{"count": 2, "system.max(c)": 2, "system.tojson(system.min(k))": "1"}"#]
    );
    // toJson() of a column goes with aggregates as the column does: its first row's value.
    assert_eq!(
        json_rows("SELECT JSON k, toJson(c) AS \"TJ\", count(*) FROM t", &[row(&t, &cells), row(&t, &cells)]),
        [r#"{"k": 1, "\"TJ\"": "2", "count": 2}"#]
    );
    assert!(json_rows("SELECT JSON * FROM t", &[]).is_empty());
}

#[test]
fn to_json_in_a_plain_selection() {
    let t = table();
    let r = row(&t, &[("k", int(5)), ("l", [int(1), int(4), int(3)].concat())]);
    let (specs, cells) = output("SELECT k, toJson(k), toJson(l), toJson(\"Cap\") AS x FROM t", &[r]);
    let names: Vec<(&str, &CqlType)> = specs.iter().map(|s| (s.name.as_str(), &s.ty)).collect();
    assert_eq!(
        names,
        [
            ("k", &CqlType::Int),
            ("system.tojson(k)", &CqlType::Text),
            ("system.tojson(l)", &CqlType::Text),
            ("x", &CqlType::Text)
        ]
    );
    assert_eq!(cells[0][1..], [Some("5".to_string()), Some("[3]".to_string()), Some("null".to_string())]);
}

#[test]
fn json_functions_misused_in_the_selection() {
    let err = |cql: &str| match plan_selection(&table(), &select(cql)) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("{cql} was accepted"),
    };
    assert_eq!(
        err("SELECT fromJson('1') FROM t"),
        "fromjson() cannot be used in the selection clause of a SELECT statement"
    );
    assert_eq!(err("SELECT toJson(k, c) FROM t"), "Invalid number of arguments for function system.tojson(any)");
    assert_eq!(
        err("SELECT toJson(null) FROM t"),
        "Cannot infer type of argument NULL in call to function system.tojson(any): use type casts to disambiguate"
    );
}

fn from_json(term: &str, ty: &CqlType, values: &[BoundValue]) -> Result<Bound, QueryError> {
    let Ok(ast::Statement::Insert(ins)) = cql::parse(&format!("INSERT INTO t (k) VALUES ({term})")) else {
        panic!("not an INSERT")
    };
    let ast::InsertValues::Columns { values: terms, .. } = &ins.values else { panic!("no values") };
    let clock = Clock::new(0);
    eval(&terms[0], &Receiver { name: "k", ty }, &BindCtx { values, clock: &clock })
}

#[test]
fn from_json_terms() {
    let list = CqlType::List { elem: Box::new(CqlType::Int), frozen: true };
    assert_eq!(from_json("fromJson('\"5\"')", &CqlType::Int, &[]), Ok(Bound::Value(Bytes::from(int(5)))));
    assert_eq!(
        from_json("from_json('[3, 1]')", &list, &[]),
        Ok(Bound::Value(Bytes::from(Value::List(vec![Value::Int(3), Value::Int(1)]).to_bytes())))
    );
    assert_eq!(from_json("fromJson('null')", &CqlType::Int, &[]), Ok(Bound::Null));
    assert_eq!(from_json("fromJson(null)", &CqlType::Int, &[]), Ok(Bound::Null));
    assert_eq!(from_json("fromJson('\"\"')", &CqlType::Int, &[]), Ok(Bound::Value(Bytes::new())));
    let bound = [BoundValue::Set(Bytes::from_static(b"7"))];
    assert_eq!(from_json("fromJson(?)", &CqlType::Int, &bound), Ok(Bound::Value(Bytes::from(int(7)))));
    assert_eq!(
        from_json("fromJson(?)", &CqlType::Int, &[BoundValue::Unset]).unwrap_err().to_string(),
        "Invalid unset value for argument in call to function fromjson"
    );
    let err = |term: &str, ty: &CqlType| from_json(term, ty, &[]).unwrap_err().to_string();
    assert_eq!(
        err("fromJson('\"x\"')", &CqlType::Int),
        "org.apache.cassandra.serializers.MarshalException: Unable to make int from 'x'"
    );
    assert_eq!(err("fromJson('\"x\"')", &CqlType::Duration), "Unable to convert 'x' to a duration");
    assert!(err("fromJson('x')", &CqlType::Int).starts_with(
        "execution of 'system.fromjson[text]' failed: Could not decode JSON string 'x': com.fasterxml.jackson.core.JsonParseException: Unrecognized token 'x'"
    ));
    assert_eq!(
        err("fromJson('1', '2')", &CqlType::Int),
        "Invalid number of arguments for function system.fromjson(text)"
    );
    assert_eq!(
        err("fromJson(1)", &CqlType::Int),
        "Function system.fromjson requires an argument of type text, but found argument 1 of type int"
    );
}

fn insert_json(doc: &str, default_unset: bool) -> Result<Vec<(String, BoundValue)>, QueryError> {
    let clock = Clock::new(0);
    let term = Term::Literal(ast::Literal::String(doc.to_string()));
    let (columns, _, values) =
        crate::modify::json_values(&table(), &term, default_unset, &BindCtx { values: &[], clock: &clock })?;
    Ok(columns.into_iter().zip(values).collect())
}

#[test]
fn insert_json_values() {
    let set = |v: Vec<u8>| BoundValue::Set(Bytes::from(v));
    let values = insert_json(r#"{"K": 1, "c": 2, "\"Cap\"": null, "l": "[1]"}"#, false).unwrap();
    let expected = vec![
        ("k".to_string(), set(int(1))),
        ("c".to_string(), set(int(2))),
        ("Cap".to_string(), BoundValue::Null),
        ("l".to_string(), set(Value::List(vec![Value::Int(1)]).to_bytes())),
        ("ts".to_string(), BoundValue::Null),
    ];
    assert_eq!(values, expected);
    // DEFAULT UNSET leaves out what the document leaves out, not its explicit nulls.
    let values = insert_json(r#"{"k": 1, "\"Cap\"": null}"#, true).unwrap();
    let kinds: Vec<&BoundValue> = values.iter().map(|(_, v)| v).collect();
    assert_eq!(kinds, [&set(int(1)), &BoundValue::Unset, &BoundValue::Null, &BoundValue::Unset, &BoundValue::Unset]);

    let err = |doc: &str| insert_json(doc, false).unwrap_err().to_string();
    assert_eq!(err(r#"{"k": 10, "I": 1, "Zzz": 1}"#), "JSON values map contains unrecognized column: i");
    assert_eq!(err(r#"{"k": 1, "cap": 1}"#), "JSON values map contains unrecognized column: cap");
    assert_eq!(err(r#"{"k": "abc"}"#), "Error decoding JSON value for k: Unable to make int from 'abc'");
    assert_eq!(err(r#"{"k": 1, "ts": 1000}"#), "Error decoding JSON value for ts: Expected a long or a datestring representation of a timestamp value, but got a Integer: 1000");
    assert_eq!(err("null"), "Got null for INSERT JSON values");
    assert_eq!(
        err("[1]"),
        "Could not decode JSON string as a map: com.fasterxml.jackson.databind.exc.MismatchedInputException: Cannot deserialize value of type `java.util.LinkedHashMap<java.lang.Object,java.lang.Object>` from Array value (token `JsonToken.START_ARRAY`)\n at [Source: REDACTED (`StreamReadFeature.INCLUDE_SOURCE_IN_LOCATION` disabled); line: 1, column: 1]. (String was: [1])"
    );
}
