//! Secondary index storage: entries written with each mutation, looked up by
//! value within a token range (with paging after a key), kept across a
//! restart (commit log replay and flushed files), built in the background for
//! data written before the index, and stale entries left for the reader to
//! filter (an overwritten value still finds its old partition here).

#![allow(clippy::unwrap_used, reason = "an integration test: a failed unwrap names its line")]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use storage::{IndexScan, Storage};
use types::mutation::{CellWrite, Mutation, RowWrite};
use types::schema::{IndexDef, IndexTargetKind, KeyspaceDef};
use uuid::Uuid;

fn text_write(table: Uuid, k: i32, v: &str, ts: i64) -> Mutation {
    let key = Bytes::copy_from_slice(&k.to_be_bytes());
    let mut m = Mutation::new(table, token_of(k), key);
    m.rows.push(RowWrite {
        cells: vec![CellWrite {
            column: 17,
            path: None,
            timestamp: ts,
            ttl: 0,
            local_deletion_time: 0,
            value: Some(Bytes::copy_from_slice(v.as_bytes())),
        }],
        ..RowWrite::default()
    });
    m
}

fn schema(table: Uuid, index: Option<Uuid>) -> Vec<KeyspaceDef> {
    let mut t = kv_table("ks", "t", table);
    if let Some(id) = index {
        t.indexes.push(IndexDef {
            name: "t_v_idx".into(),
            id,
            column: "v".into(),
            target: IndexTargetKind::Simple,
            class_name: None,
        });
    }
    vec![keyspace("ks", true, vec![t])]
}

fn lookup(s: &Storage, index: Uuid, v: &str, start: i64, after: Option<Vec<u8>>, limit: usize) -> Vec<(i64, Vec<u8>)> {
    let scan = IndexScan {
        index,
        value: v.as_bytes().to_vec(),
        start_token: start,
        after_key: after,
        end_token: i64::MAX,
        partition_limit: limit,
        now: now_secs(),
    };
    s.index_keys(&scan).expect("index_keys")
}

fn wait_ready(s: &Storage, index: Uuid) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !s.index_ready(&index) {
        assert!(Instant::now() < deadline, "index build did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn lookups_find_partitions_in_token_order_page_and_survive_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (table, index) = (Uuid::new_v4(), Uuid::new_v4());
    let keyspaces = schema(table, Some(index));
    {
        let s = Arc::new(open_small(dir.path(), &keyspaces));
        s.start_index_builder();
        wait_ready(&s, index);
        let ts = now_micros();
        let writes: Vec<Mutation> =
            (0..200).map(|k| text_write(table, k, if k % 2 == 0 { "even" } else { "odd" }, ts)).collect();
        s.apply(&writes).unwrap();
        let all = lookup(&s, index, "even", i64::MIN, None, 1000);
        assert_eq!(all.len(), 100);
        assert!(all.windows(2).all(|w| w[0] < w[1]), "token order, each partition once");
        let mut expected: Vec<(i64, Vec<u8>)> =
            writes.iter().step_by(2).map(|m| (m.token, m.partition_key.to_vec())).collect();
        expected.sort();
        assert_eq!(all, expected);
        // Paging: after the 10th key, within a token range.
        let first = lookup(&s, index, "even", i64::MIN, None, 10);
        assert_eq!(first, all[..10].to_vec());
        let (t, k) = first.last().cloned().unwrap();
        assert_eq!(lookup(&s, index, "even", t, Some(k), 10), all[10..20].to_vec());
        // Stale entries stay: the reader filters them by reading the base row.
        s.apply(&[text_write(table, 0, "changed", ts + 1)]).unwrap();
        let zero = (writes[0].token, writes[0].partition_key.to_vec());
        assert!(lookup(&s, index, "even", i64::MIN, None, 1000).contains(&zero));
        assert_eq!(lookup(&s, index, "changed", i64::MIN, None, 1000), vec![zero.clone()]);
        assert!(lookup(&s, index, "nothing", i64::MIN, None, 1000).is_empty());
        s.flush(None).unwrap();
        s.apply(&[text_write(table, 1000, "late", ts)]).unwrap();
    }
    // Flushed entries and the commit log's are both there after a restart.
    let (s, _) = open(&config(dir.path(), periodic()));
    let s = Arc::new(s);
    s.start_index_builder();
    assert!(s.index_ready(&index), "a built index stays built");
    assert_eq!(lookup(&s, index, "odd", i64::MIN, None, 1000).len(), 100);
    assert_eq!(lookup(&s, index, "late", i64::MIN, None, 1000).len(), 1);
}

#[test]
fn an_index_created_on_existing_data_is_built_and_refuses_reads_until_then() {
    let dir = tempfile::tempdir().unwrap();
    let (table, index) = (Uuid::new_v4(), Uuid::new_v4());
    let s = Arc::new(open_small(dir.path(), &schema(table, None)));
    let ts = now_micros();
    let writes: Vec<Mutation> = (0..2000).map(|k| text_write(table, k, &format!("v{}", k % 7), ts)).collect();
    s.apply(&writes).unwrap();
    s.set_schema(&schema(table, Some(index))).unwrap();
    assert!(!s.index_ready(&index), "building");
    let scan = IndexScan {
        index,
        value: b"v3".to_vec(),
        start_token: i64::MIN,
        after_key: None,
        end_token: i64::MAX,
        partition_limit: 10,
        now: now_secs(),
    };
    assert_eq!(s.index_keys(&scan).unwrap_err().to_string(), storage::INDEX_NOT_AVAILABLE);
    s.start_index_builder();
    wait_ready(&s, index);
    assert_eq!(lookup(&s, index, "v3", i64::MIN, None, 5000).len(), (0..2000).filter(|k| k % 7 == 3).count());
    // TRUNCATE empties the index with its table.
    s.truncate(&table).unwrap();
    assert!(lookup(&s, index, "v3", i64::MIN, None, 5000).is_empty());
}
