//! Unit tests of crate-level behaviour; the statement cases live in `tests/`.

use crate::{parse, parse_script};

#[test]
fn script_numbers_markers_per_statement() {
    let statements = parse_script("SELECT * FROM t WHERE a = ?; ; INSERT INTO t (a, b) VALUES (?, :b);").unwrap();
    assert_eq!(statements.len(), 2);
    assert_eq!(statements[0].bind_markers().len(), 1);
    let markers = statements[1].bind_markers();
    assert_eq!(
        markers.iter().map(|m| (m.index, m.name.clone())).collect::<Vec<_>>(),
        vec![(0, None), (1, Some("b".into()))]
    );
}

#[test]
fn empty_script_is_empty() {
    assert_eq!(parse_script("  -- nothing\n ;;").unwrap(), vec![]);
}

#[test]
fn empty_statement_is_an_error() {
    assert_eq!(parse("").unwrap_err().to_string(), "line 1:0 no viable alternative at input '<EOF>'");
}

#[test]
fn script_keeps_batch_inner_semicolons() {
    let statements =
        parse_script("BEGIN BATCH INSERT INTO t (a) VALUES (?); UPDATE t SET a = ? WHERE k = 1; APPLY BATCH; USE ks")
            .unwrap();
    assert_eq!(statements.len(), 2);
    assert_eq!(statements[0].bind_markers().len(), 2);
    assert_eq!(statements[1], crate::Statement::Use { keyspace: "ks".into() });
}

#[test]
fn script_error_names_the_separator() {
    assert_eq!(parse_script("USE a USE b").unwrap_err().to_string(), "line 1:6 mismatched input 'USE' expecting ';'");
}

mod resolve {
    use types::CqlType;

    use crate::ast::{TypeError, TypeExpr};
    use crate::{parse, Statement};

    /// Resolves the type of the second column of `CREATE TABLE t (k int PRIMARY KEY, v <ty>)`.
    fn resolve(ty: &str) -> Result<CqlType, TypeError> {
        let Statement::CreateTable(table) = parse(&format!("CREATE TABLE t (k int PRIMARY KEY, v {ty})")).unwrap()
        else {
            panic!("not a CREATE TABLE");
        };
        let expr: &TypeExpr = &table.columns[1].ty;
        expr.resolve(&mut |keyspace, name| match (keyspace, name) {
            (None | Some("ks"), "addr") => Ok(CqlType::Udt {
                keyspace: "ks".into(),
                name: "addr".into(),
                fields: vec![("street".into(), CqlType::Text)],
                frozen: false,
            }),
            (keyspace, name) => Err(format!("Unknown type {}.{name}", keyspace.unwrap_or("ks"))),
        })
    }

    fn text(ty: &str) -> String {
        match resolve(ty) {
            Ok(resolved) => resolved.to_cql(),
            Err(error) => format!("error: {error}"),
        }
    }

    #[test]
    fn natives_and_collections() {
        assert_eq!(resolve("varchar"), Ok(CqlType::Text));
        assert_eq!(text("list<int>"), "list<int>");
        assert_eq!(text("map<text, frozen<set<int>>>"), "map<text, frozen<set<int>>>");
    }

    #[test]
    fn frozen_propagates_inwards() {
        assert_eq!(
            resolve("frozen<map<text, list<int>>>"),
            Ok(CqlType::Map {
                key: Box::new(CqlType::Text),
                value: Box::new(CqlType::List { elem: Box::new(CqlType::Int), frozen: true }),
                frozen: true
            })
        );
        assert_eq!(
            resolve("tuple<int, list<int>>"),
            Ok(CqlType::Tuple(vec![CqlType::Int, CqlType::List { elem: Box::new(CqlType::Int), frozen: true }]))
        );
    }

    #[test]
    fn udts_resolve_through_the_lookup() {
        assert!(matches!(resolve("addr"), Ok(CqlType::Udt { frozen: false, .. })));
        assert!(matches!(resolve("frozen<ks.addr>"), Ok(CqlType::Udt { frozen: true, .. })));
        assert_eq!(text("other.addr2"), "error: Unknown type other.addr2");
    }

    #[test]
    fn invalid_nestings_get_cassandras_messages() {
        assert_eq!(
            text("list<list<int>>"),
            "error: Non-frozen collections are not allowed inside collections: list<list<int>>"
        );
        assert_eq!(text("set<addr>"), "error: Non-frozen UDTs are not allowed inside collections: set<addr>");
        assert_eq!(text("map<int, counter>"), "error: Counters are not allowed inside collections: map<int, counter>");
        assert_eq!(text("set<duration>"), "error: Durations are not allowed inside sets: set<duration>");
        assert_eq!(text("map<duration, int>"), "error: Durations are not allowed as map keys: map<duration, int>");
        assert_eq!(
            text("frozen<int>"),
            "error: frozen<> is only allowed on collections, tuples, and user-defined types (got int)"
        );
        assert_eq!(text("vector<float, 3>"), "error: Type vector<float, 3> is not supported");
    }
}

#[test]
fn marker_count_matches_the_markers() {
    for text in [
        "SELECT * FROM t WHERE a = ? AND b IN (?, ?) LIMIT ?",
        "INSERT INTO t (a, b, c) VALUES (?, :b, [?, ?]) USING TTL ? AND TIMESTAMP ?",
        "UPDATE t SET m[?] = ?, l = l + ? WHERE k = ? IF c = ?",
        "DELETE FROM t WHERE k = 1",
        "BEGIN BATCH INSERT INTO t (a) VALUES (?); UPDATE t SET a = ? WHERE k = ?; APPLY BATCH",
    ] {
        let statement = parse(text).unwrap();
        assert_eq!(statement.bind_marker_count(), statement.bind_markers().len(), "{text}");
        assert!(text.contains('?') == (statement.bind_marker_count() > 0), "{text}");
    }
}

#[test]
fn create_and_drop_index_forms() {
    use crate::ast::{CreateIndex, QualifiedName, Statement};
    let ci = |cql: &str| match crate::parse(cql) {
        Ok(Statement::CreateIndex(c)) => *c,
        other => panic!("{cql}: {other:?}"),
    };
    let c = ci("CREATE INDEX ON ks.t (v)");
    assert_eq!(
        c,
        CreateIndex {
            name: None,
            table: QualifiedName { keyspace: Some("ks".into()), name: "t".into() },
            if_not_exists: false,
            column: "v".into(),
            function: None,
            using: None,
            options: Vec::new(),
        }
    );
    let c = ci("CREATE INDEX IF NOT EXISTS \"Idx\" ON t (keys(m))");
    assert_eq!(
        (c.name.as_deref(), c.if_not_exists, c.function.as_deref(), c.column.as_str()),
        (Some("Idx"), true, Some("keys"), "m")
    );
    assert_eq!(ci("CREATE INDEX i ON t (full(f))").function.as_deref(), Some("full"));
    assert_eq!(ci("CREATE INDEX i ON t (entries(m))").function.as_deref(), Some("entries"));
    assert_eq!(ci("CREATE INDEX ON t (\"keys\")").function, None, "a column named keys");
    let c = ci("CREATE CUSTOM INDEX ON t (v) USING 'sai' WITH OPTIONS = {'case_sensitive': 'false'}");
    assert_eq!((c.using.as_deref(), c.options.len()), (Some("sai"), 1));
    assert!(crate::parse("CREATE CUSTOM INDEX ON t (v)").is_err(), "CUSTOM needs USING");
    assert!(crate::parse("CREATE INDEX ON t v").is_err());
    match crate::parse("DROP INDEX IF EXISTS ks.i") {
        Ok(Statement::DropIndex { name, if_exists: true }) => assert_eq!(name.to_string(), "ks.i"),
        other => panic!("{other:?}"),
    }
}
