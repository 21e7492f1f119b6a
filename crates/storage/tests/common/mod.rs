//! Helpers shared by the storage integration tests: schema builders, configs,
//! mutation builders and a raw view of the RocksDB files; `model`, the
//! reference model and its random operations.
#![allow(dead_code)]

pub mod model;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use storage::{ColumnData, CommitlogSync, PartitionRead, ScanRange, Storage, StorageConfig};
use types::mutation::{CellWrite, ClusteringBound, DeletionTime, Liveness, Mutation, RowWrite};
use types::schema::{ClusteringOrder, ColumnDef, ColumnKind, KeyspaceDef, Replication, TableDef, TableOptions};
use types::CqlType;
use uuid::Uuid;

pub fn config(dir: &Path, sync: CommitlogSync) -> StorageConfig {
    StorageConfig {
        data_dir: dir.to_path_buf(),
        commitlog_sync: sync,
        cache_bytes: 8 << 20,
        row_cache_bytes: 8 << 20,
        memtable_bytes: 4 << 20,
        memtable_space: 64 << 20,
        tombstone_horizon: i64::MAX,
    }
}

pub fn periodic() -> CommitlogSync {
    CommitlogSync::Periodic { period: Duration::from_millis(200) }
}

pub fn open(cfg: &StorageConfig) -> (Storage, Vec<KeyspaceDef>) {
    Storage::open(cfg.clone()).expect("Storage::open")
}

/// A storage under `dir` (`config`, commit log `periodic`) holding one table, `ks.kv` (`kv_table`); its id.
pub fn open_kv(dir: &Path) -> (Storage, Uuid) {
    let t = Uuid::new_v4();
    (open_kv_as(&config(dir, periodic()), t), t)
}

/// A storage opened with `cfg` holding one table, `ks.kv` (`kv_table`), whose id is `t`.
pub fn open_kv_as(cfg: &StorageConfig, t: Uuid) -> Storage {
    let (storage, _) = open(cfg);
    storage.set_schema(&[keyspace("ks", true, vec![kv_table("ks", "kv", t)])]).expect("set_schema");
    storage
}

/// A storage under `dir` with small memtables (64 KiB: flushes happen under test) and `keyspaces` as schema.
pub fn open_small(dir: &Path, keyspaces: &[KeyspaceDef]) -> Storage {
    let mut cfg = config(dir, periodic());
    cfg.memtable_bytes = 64 << 10;
    let (s, _) = open(&cfg);
    s.set_schema(keyspaces).expect("set_schema");
    s
}

pub fn now_secs() -> i32 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i32
}

pub fn now_micros() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_micros() as i64
}

pub fn col(name: &str, ty: CqlType, kind: ColumnKind, position: u32, order: ClusteringOrder, id: u16) -> ColumnDef {
    ColumnDef { name: name.to_string(), ty, kind, position, order, id }
}

/// Column ids of the test tables.
pub const PK: u16 = 16;
pub const C1: u16 = 17;
pub const C2: u16 = 18;
pub const S: u16 = 19;
pub const A: u16 = 20; // int
pub const B: u16 = 21; // text
pub const SET: u16 = 22; // set<int>
pub const MAP: u16 = 23; // map<int, text>

/// `CREATE TABLE ks.name (pk int, c1 int, c2 text, s int static, a int, b text,
///  c set<int>, d map<int, text>, PRIMARY KEY (pk, c1, c2)) WITH CLUSTERING ORDER BY (c1 ASC, c2 DESC)`
pub fn model_table(ks: &str, name: &str, id: Uuid, gc_grace: i32) -> TableDef {
    use ClusteringOrder::*;
    use ColumnKind::*;
    let columns = vec![
        col("pk", CqlType::Int, PartitionKey, 0, Asc, PK),
        col("c1", CqlType::Int, Clustering, 0, Asc, C1),
        col("c2", CqlType::Text, Clustering, 1, Desc, C2),
        col("s", CqlType::Int, Static, 0, Asc, S),
        col("a", CqlType::Int, Regular, 0, Asc, A),
        col("b", CqlType::Text, Regular, 0, Asc, B),
        col("c", CqlType::Set { elem: Box::new(CqlType::Int), frozen: false }, Regular, 0, Asc, SET),
        col(
            "d",
            CqlType::Map { key: Box::new(CqlType::Int), value: Box::new(CqlType::Text), frozen: false },
            Regular,
            0,
            Asc,
            MAP,
        ),
    ];
    let options = TableOptions { gc_grace_seconds: gc_grace, ..TableOptions::default() };
    TableDef {
        keyspace: ks.to_string(),
        name: name.to_string(),
        id,
        columns,
        options,
        next_column_id: 24,
        dropped_columns: BTreeMap::new(),
        indexes: Vec::new(),
    }
}

/// `CREATE TABLE ks.name (k int PRIMARY KEY, v text)` (no clustering).
pub fn kv_table(ks: &str, name: &str, id: Uuid) -> TableDef {
    use ClusteringOrder::*;
    use ColumnKind::*;
    TableDef {
        keyspace: ks.to_string(),
        name: name.to_string(),
        id,
        columns: vec![col("k", CqlType::Int, PartitionKey, 0, Asc, 16), col("v", CqlType::Text, Regular, 0, Asc, 17)],
        options: TableOptions::default(),
        next_column_id: 18,
        dropped_columns: BTreeMap::new(),
        indexes: Vec::new(),
    }
}

pub fn keyspace(name: &str, durable: bool, tables: Vec<TableDef>) -> KeyspaceDef {
    KeyspaceDef {
        name: name.to_string(),
        replication: Replication::Simple { replication_factor: 1 },
        durable_writes: durable,
        tables: tables.into_iter().map(|t| (t.name.clone(), t)).collect(),
        types: BTreeMap::new(),
    }
}

pub fn int(v: i32) -> Bytes {
    Bytes::copy_from_slice(&v.to_be_bytes())
}

pub fn text(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

/// A stand-in for the partitioner: any deterministic token will do for storage.
pub fn token_of(pk: i32) -> i64 {
    (pk as i64).wrapping_mul(0x9E37_79B9_7F4A_7C15u64 as i64)
}

pub fn live_cell(column: u16, ts: i64, value: Bytes) -> CellWrite {
    CellWrite { column, path: None, timestamp: ts, ttl: 0, local_deletion_time: 0, value: Some(value) }
}

pub fn expiring_cell(column: u16, ts: i64, ttl: i32, expiry: i32, value: Bytes) -> CellWrite {
    CellWrite { column, path: None, timestamp: ts, ttl, local_deletion_time: expiry, value: Some(value) }
}

pub fn cell_tombstone(column: u16, ts: i64, ldt: i32) -> CellWrite {
    CellWrite { column, path: None, timestamp: ts, ttl: 0, local_deletion_time: ldt, value: None }
}

pub fn row(clustering: Vec<Bytes>) -> RowWrite {
    RowWrite { clustering, ..RowWrite::default() }
}

pub fn marker(ts: i64) -> Option<Liveness> {
    Some(Liveness { timestamp: ts, ttl: 0, local_expiration: 0 })
}

pub fn deletion(ts: i64, ldt: i32) -> DeletionTime {
    DeletionTime { timestamp: ts, local_deletion_time: ldt }
}

/// A mutation of the `kv_table`/`model_table` partition `pk`.
pub fn mutation(table: Uuid, pk: i32) -> Mutation {
    Mutation::new(table, token_of(pk), int(pk))
}

/// Reads a whole partition (forwards, with statics) at `now`.
pub fn full_read(table: Uuid, pk: i32, now: i32) -> PartitionRead {
    PartitionRead {
        table,
        token: token_of(pk),
        partition_key: int(pk).to_vec(),
        ranges: Vec::new(),
        reversed: false,
        include_static: true,
        row_limit: usize::MAX,
        now,
    }
}

/// A scan of every partition of `table`, every row of each (`full_read`).
pub fn whole_ring(table: Uuid) -> ScanRange {
    ScanRange {
        table,
        start_token: i64::MIN,
        after_key: None,
        end_token: i64::MAX,
        partition_limit: usize::MAX,
        per_partition: full_read(table, 0, now_secs()),
        row_limit: usize::MAX,
    }
}

pub fn eq_bound(prefix: Vec<Bytes>) -> (ClusteringBound, ClusteringBound) {
    (ClusteringBound { prefix: prefix.clone(), inclusive: true }, ClusteringBound { prefix, inclusive: true })
}

/// RocksDB (key, value) pairs.
pub type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// Every key/value of every column family except `default`, read straight
/// from the RocksDB files (the storage must be closed). Values are the merged
/// (LWW) values, as the storage's own merge operator computes them.
pub fn raw_entries(data_dir: &Path) -> BTreeMap<String, Entries> {
    let db_path: PathBuf = data_dir.join("db");
    let names = rocksdb::DB::list_cf(&rocksdb::Options::default(), &db_path).expect("list_cf");
    let descriptors: Vec<rocksdb::ColumnFamilyDescriptor> = names
        .iter()
        .map(|n| {
            let mut o = rocksdb::Options::default();
            o.set_merge_operator_associative("shoal-lww", |_k, existing, operands| {
                storage::cell::merge_operands(existing, operands.iter())
            });
            rocksdb::ColumnFamilyDescriptor::new(n.clone(), o)
        })
        .collect();
    let db = rocksdb::DB::open_cf_descriptors_read_only(&rocksdb::Options::default(), &db_path, descriptors, false)
        .expect("open raw db read-only");
    let mut out = BTreeMap::new();
    for name in names.iter().filter(|n| n.as_str() != "default") {
        let cf = db.cf_handle(name).expect("cf handle");
        let mut entries = Vec::new();
        for item in db.iterator_cf(&cf, rocksdb::IteratorMode::Start) {
            let (k, v) = item.expect("raw iteration");
            entries.push((k.to_vec(), v.to_vec()));
        }
        out.insert(name.clone(), entries);
    }
    out
}

/// Column family names (other than `default`) present in the database.
pub fn column_families(data_dir: &Path) -> Vec<String> {
    let mut names = rocksdb::DB::list_cf(&rocksdb::Options::default(), data_dir.join("db")).expect("list_cf");
    // `default` and `paxos` (lightweight transactions' records) always exist.
    names.retain(|n| n != "default" && n != "paxos");
    names.sort();
    names
}

/// `INSERT INTO kv (k, v) VALUES (pk, value)` at `ts`.
pub fn kv(table: Uuid, pk: i32, value: &str, ts: i64) -> Mutation {
    let mut m = mutation(table, pk);
    let mut r = row(Vec::new());
    r.marker = marker(ts);
    r.cells.push(live_cell(17, ts, text(value)));
    m.rows.push(r);
    m
}

/// The value of `kv` partition `pk`, if live.
pub fn kv_get(storage: &Storage, table: Uuid, pk: i32) -> Option<String> {
    kv_get_at(storage, table, pk, now_secs())
}

pub fn kv_schema(ks: &str, tables: &[(&str, Uuid)]) -> KeyspaceDef {
    keyspace(ks, true, tables.iter().map(|(name, id)| kv_table(ks, name, *id)).collect())
}

/// A DELETE of the `kv_table` partition `pk` at `ts`.
pub fn kv_delete(table: Uuid, pk: i32, ts: i64) -> Mutation {
    let mut m = mutation(table, pk);
    m.partition_deletion = Some(deletion(ts, now_secs()));
    m
}

/// The `kv_table` partition `pk`'s `v`, read at `now`.
pub fn kv_get_at(storage: &Storage, table: Uuid, pk: i32, now: i32) -> Option<String> {
    let p = storage.read_partition(&full_read(table, pk, now)).expect("read_partition")?;
    match p.rows.first()?.column(17)? {
        ColumnData::Simple(c) => Some(String::from_utf8(c.value.clone()).expect("utf-8")),
        _ => None,
    }
}
