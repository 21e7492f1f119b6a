//! GROUP BY validation (Cassandra 5.0.9's messages, from its
//! `SelectStatement`) and CAST in the selection (names and refusals).
//! tests/python/test_group_by.py runs the grouped reads and paging.

use super::test_support::{self, select};

use super::*;

/// `t ((p1, p2), c1, c2, v text, n int)`.
fn table() -> TableDef {
    use ColumnKind::*;
    test_support::table(&[
        ("p1", CqlType::Int, PartitionKey),
        ("p2", CqlType::Int, PartitionKey),
        ("c1", CqlType::Int, Clustering),
        ("c2", CqlType::Int, Clustering),
        ("v", CqlType::Text, Regular),
        ("n", CqlType::Int, Regular),
    ])
}

fn prefix(cql: &str) -> Result<Option<usize>, String> {
    group_by_prefix(&table(), &select(cql)).map_err(|e| e.to_string())
}

#[test]
fn group_by_takes_a_primary_key_prefix() {
    assert_eq!(prefix("SELECT * FROM t"), Ok(None));
    assert_eq!(prefix("SELECT * FROM t GROUP BY p1, p2"), Ok(Some(0)));
    assert_eq!(prefix("SELECT * FROM t GROUP BY p1, p2, c1"), Ok(Some(1)));
    assert_eq!(prefix("SELECT * FROM t GROUP BY p1, p2, c1, c2"), Ok(Some(2)));
    // Columns restricted by `=` may be left out.
    assert_eq!(prefix("SELECT * FROM t WHERE p1 = 1 AND p2 = 2 GROUP BY c1"), Ok(Some(1)));
    assert_eq!(prefix("SELECT * FROM t WHERE p1 = 1 AND p2 = 2 AND c1 = 3 GROUP BY c2"), Ok(Some(2)));
    assert_eq!(prefix("SELECT DISTINCT p1, p2 FROM t GROUP BY p1, p2"), Ok(Some(0)));
}

#[test]
fn group_by_errors_are_cassandras() {
    let order = "Group by currently only support groups of columns following their declared order in the PRIMARY KEY";
    for cql in [
        "SELECT * FROM t GROUP BY p2",
        "SELECT * FROM t GROUP BY p1, p2, c2",
        "SELECT * FROM t GROUP BY p1, p2, c1, c1",
        "SELECT * FROM t WHERE p1 = 1 AND p2 = 2 GROUP BY c2",
        "SELECT * FROM t WHERE p1 = 1 AND p2 > 2 GROUP BY c1",
    ] {
        let err = prefix(cql).expect_err(cql);
        assert!(err.contains(order), "{cql}: {err}");
    }
    let err = prefix("SELECT * FROM t GROUP BY p1, p2, v").expect_err("v");
    assert!(err.contains("Group by is currently only supported on the columns of the PRIMARY KEY, got v"), "{err}");
    let err = prefix("SELECT * FROM t GROUP BY p1").expect_err("p1");
    assert!(err.contains("Group by is not supported on only a part of the partition key"), "{err}");
    let err = prefix("SELECT DISTINCT p1, p2 FROM t GROUP BY p1, p2, c1").expect_err("distinct");
    assert!(err.contains("Grouping on clustering columns is not allowed for SELECT DISTINCT queries"), "{err}");
    let err = prefix("SELECT * FROM t GROUP BY zz").expect_err("zz");
    assert!(err.contains("Undefined column name zz"), "{err}");
}

fn names(cql: &str) -> Result<Vec<(String, CqlType)>, String> {
    let plan = plan_selection(&table(), &select(cql)).map_err(|e| e.to_string())?;
    Ok(plan.specs.into_iter().map(|s| (s.name, s.ty)).collect())
}

#[test]
fn cast_names_types_and_refusals() {
    assert_eq!(
        names("SELECT CAST(n AS text), cast(n as double), CAST(n AS int) FROM t"),
        Ok(vec![
            ("cast(n as text)".to_string(), CqlType::Text),
            ("cast(n as double)".to_string(), CqlType::Double),
            // A cast to the selector's own type is ignored (Cassandra's Selectable.WithCast).
            ("n".to_string(), CqlType::Int),
        ])
    );
    assert_eq!(names("SELECT CAST(max(n) AS text) AS m FROM t"), Ok(vec![("m".to_string(), CqlType::Text)]));
    for (query, function) in [("SELECT CAST(v AS int) FROM t", "int"), ("SELECT CAST(v AS ascii) FROM t", "ascii")] {
        let err = names(query).expect_err(query);
        let start = format!("Invalid call to function system.cast_as_{function}, none of its type signatures match");
        assert!(err.starts_with(&start), "{err}");
    }
}
