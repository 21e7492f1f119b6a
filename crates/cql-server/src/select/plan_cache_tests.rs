//! The prepared statement's selection cache: one plan per schema version
//! and table, planned again after any change.

use std::sync::Arc;

use types::schema::ColumnKind;
use types::CqlType;

use super::test_support::{select, table};
use super::PlanCache;

fn kv() -> types::schema::TableDef {
    table(&[("k", CqlType::Int, ColumnKind::PartitionKey), ("v", CqlType::Text, ColumnKind::Regular)])
}

fn names(plan: &super::SelectionPlan) -> Vec<&str> {
    plan.specs.iter().map(|s| s.name.as_str()).collect()
}

#[test]
fn a_plan_is_shared_within_a_version_and_replanned_after_a_change() {
    let cache = PlanCache::default();
    let star = select("SELECT * FROM t WHERE k = ?");
    let v1 = uuid::Uuid::from_u128(1);
    let first = cache.selection(v1, &kv(), &star).unwrap();
    let again = cache.selection(v1, &kv(), &star).unwrap();
    assert!(Arc::ptr_eq(&first, &again), "the same version and table share one plan");
    assert_eq!(names(&first), ["k", "v"]);

    // ALTER TABLE t ADD w: a new schema version, so `*` covers the new column.
    let mut altered = kv();
    altered.columns.push(types::schema::ColumnDef {
        name: "w".into(),
        ty: CqlType::BigInt,
        kind: ColumnKind::Regular,
        position: 0,
        order: types::schema::ClusteringOrder::Asc,
        id: 2,
    });
    altered.sort_columns();
    let v2 = uuid::Uuid::from_u128(2);
    let replanned = cache.selection(v2, &altered, &star).unwrap();
    assert!(!Arc::ptr_eq(&first, &replanned));
    assert_eq!(names(&replanned), ["k", "v", "w"]);

    // The same version but another table (another keyspace's `t`): planned for it.
    let mut other = altered.clone();
    other.keyspace = "ks2".into();
    let elsewhere = cache.selection(v2, &other, &star).unwrap();
    assert!(!Arc::ptr_eq(&replanned, &elsewhere));
    assert_eq!(elsewhere.specs[0].keyspace, "ks2");
}

#[test]
fn a_selection_that_fails_is_not_kept() {
    let cache = PlanCache::default();
    let v1 = uuid::Uuid::from_u128(1);
    let q = select("SELECT w FROM t WHERE k = ?");
    let err = cache.selection(v1, &kv(), &q).err().expect("w is not a column yet");
    assert!(err.to_string().contains("Undefined column name w"), "{err}");
    // Still failing, planned again (not a kept error), in the same version.
    assert!(cache.selection(v1, &kv(), &q).is_err());
    let ok = cache.selection(v1, &kv(), &select("SELECT v FROM t WHERE k = ?")).unwrap();
    assert_eq!(names(&ok), ["v"]);
}
