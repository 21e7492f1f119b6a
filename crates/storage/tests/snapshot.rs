//! Snapshots: what one holds, that it is hard links, that it outlives the
//! live files it linked, that reading it gives every partition's raw cells
//! (tombstones included) and that applying them elsewhere reproduces the
//! table; listing and clearing; column ids matched by name.

#![allow(clippy::unwrap_used, reason = "an integration test: a failed unwrap names its line")]

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;

use common::*;
use storage::snapshot::{keyspace_dirs, read_manifest, remap_columns};
use storage::{RawPartition, SnapshotReader};
use types::mutation::Mutation;
use uuid::Uuid;

fn put(table: Uuid, pk: i32, ts: i64, value: &str) -> Mutation {
    let mut m = mutation(table, pk);
    let mut r = row(Vec::new());
    r.marker = marker(ts);
    r.cells.push(live_cell(17, ts, text(value)));
    m.rows.push(r);
    m
}

fn read_all(reader: &SnapshotReader, table: Uuid) -> BTreeMap<Vec<u8>, RawPartition> {
    let mut out = BTreeMap::new();
    let n = reader
        .partitions(&table, 3, |p| {
            out.insert(p.partition_key.clone(), p);
            Ok(())
        })
        .unwrap();
    assert_eq!(n as usize, out.len());
    out
}

#[test]
fn a_snapshot_keeps_its_tables_and_reads_back_raw() {
    let dir = tempfile::tempdir().unwrap();
    let (t, u, other) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    let ks = keyspace("ks", true, vec![kv_table("ks", "t", t), kv_table("ks", "u", u)]);
    let ks2 = keyspace("ks2", true, vec![kv_table("ks2", "o", other)]);
    let s = open_small(dir.path(), &[ks.clone(), ks2]);
    for pk in 0..50 {
        s.apply(&[put(t, pk, 1_000 + pk as i64, "t"), put(u, pk, 5, "u"), put(other, pk, 5, "o")]).unwrap();
    }
    let mut gone = mutation(t, 7);
    gone.partition_deletion = Some(deletion(9_999, now_secs()));
    s.apply(&[gone]).unwrap();

    // Only table t of ks.
    let mut only_t = ks.clone();
    only_t.tables.retain(|name, _| name == "t");
    let extra = vec![(std::path::PathBuf::from("t-x/schema.cql"), "CREATE TABLE ks.t ...".to_string())];
    let snap = s.take_snapshot("tag1", &only_t, false, 42, &extra).unwrap();
    assert_eq!(snap, dir.path().join("snapshots/tag1/ks"));
    assert!(s.take_snapshot("tag1", &only_t, false, 42, &[]).unwrap_err().to_string().contains("already exists"));
    let manifest = read_manifest(&snap).unwrap();
    assert_eq!(manifest.tables.len(), 1);
    assert_eq!(manifest.tables[0].id, t);
    assert_eq!(std::fs::read_to_string(snap.join("t-x/schema.cql")).unwrap(), "CREATE TABLE ks.t ...");
    // The checkpoint holds t's column family alone, its files linked to the live ones.
    let cfs = column_families(&snap);
    assert_eq!(cfs, vec![manifest.tables[0].column_family.clone()]);
    assert!(!manifest.tables[0].files.is_empty());
    for f in &manifest.tables[0].files {
        assert!(std::fs::metadata(snap.join("db").join(f)).unwrap().nlink() >= 2, "{f} is not a hard link");
    }
    assert_eq!(keyspace_dirs(&dir.path().join("snapshots/tag1")).unwrap(), vec![snap.clone()]);
    assert_eq!(keyspace_dirs(&snap).unwrap(), vec![snap.clone()]);

    // Live data moves on; the snapshot does not.
    for pk in 0..50 {
        s.apply(&[put(t, pk, 2_000_000, "new")]).unwrap();
    }
    s.compact(Some(&t)).unwrap();
    let listed = s.list_snapshots().unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0].tag.as_str(), listed[0].keyspace.as_str(), listed[0].table.as_str()), ("tag1", "ks", "t"));
    assert!(listed[0].size_on_disk > 0);
    assert_eq!(listed[0].true_size, listed[0].size_on_disk, "compaction replaced every live file");

    let scratch = dir.path().join("scratch");
    let reader = SnapshotReader::open(&snap, &scratch).unwrap();
    let parts = read_all(&reader, t);
    assert_eq!(parts.len(), 50, "every partition, the deleted one too");
    // Applied to an empty copy of the table, the cells read back the same as the original did.
    let copy_dir = tempfile::tempdir().unwrap();
    let copy = open_small(copy_dir.path(), std::slice::from_ref(&ks));
    for p in parts.values() {
        copy.apply_raw(&t, &p.cells).unwrap();
    }
    for pk in 0..50 {
        let got = copy.read_partition(&full_read(t, pk, now_secs())).unwrap();
        if pk == 7 {
            assert!(got.is_none(), "the partition deletion came along");
            continue;
        }
        let row = &got.unwrap().rows[0];
        let cell = match row.column(17).unwrap() {
            storage::ColumnData::Simple(c) => c.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!((cell.value.as_slice(), cell.timestamp), (&b"t"[..], 1_000 + pk as i64));
    }
    let scratch_dirs = || std::fs::read_dir(&scratch).unwrap().count();
    assert_eq!(scratch_dirs(), 1);
    drop(reader);
    assert_eq!(scratch_dirs(), 0, "the reader's scratch directory goes with it");

    // Clearing: by keyspace, by tag, all.
    s.take_snapshot("tag2", &only_t, true, 43, &[]).unwrap();
    assert_eq!(s.clear_snapshots(Some("tag1"), &["nosuch".to_string()]).unwrap(), 0);
    assert_eq!(s.clear_snapshots(Some("tag1"), &["ks".to_string()]).unwrap(), 1);
    assert!(!dir.path().join("snapshots/tag1").exists());
    assert_eq!(s.list_snapshots().unwrap().len(), 1);
    assert_eq!(s.clear_snapshots(None, &[]).unwrap(), 1);
    assert!(s.list_snapshots().unwrap().is_empty());
}

#[test]
fn column_ids_are_matched_by_name() {
    let (from_id, to_id) = (Uuid::new_v4(), Uuid::new_v4());
    let from = kv_table("ks", "t", from_id);
    let mut to = kv_table("ks", "t", to_id);
    // `v` got another id in the target; a column it lacks is left out.
    to.columns[1].id = 30;
    let mut from_extra = from.clone();
    from_extra.columns.push(common::col(
        "w",
        types::CqlType::Int,
        types::schema::ColumnKind::Regular,
        0,
        types::schema::ClusteringOrder::Asc,
        18,
    ));
    let prefix = |column: u16| {
        let mut k = Vec::new();
        storage::keys::partition_prefix(5, &int(1), &mut k).unwrap();
        k.push(storage::keys::SECTION_ROWS);
        k.extend_from_slice(&column.to_be_bytes());
        k
    };
    let cells = vec![(prefix(1), vec![1]), (prefix(17), vec![2]), (prefix(18), vec![3])];
    let out = remap_columns(&from_extra, &to, cells.clone());
    assert_eq!(out, vec![(prefix(1), vec![1]), (prefix(30), vec![2])]);
    // The same ids: unchanged.
    assert_eq!(remap_columns(&from, &from, cells.clone()), cells);
}
