//! Schema: keyspaces, tables, columns and their options, as Cassandra models them.
//!
//! Invariants:
//! - `TableDef::columns` lists partition key columns first (in key order), then
//!   clustering columns (in clustering order), then static columns sorted by
//!   name, then regular columns sorted by name: the order of `SELECT *` in Cassandra.
//! - A column's `id` never changes and is never reused within a table; storage
//!   keys cells by it, so ALTER TABLE DROP + ADD of the same name does not
//!   resurrect old cells.

use std::collections::BTreeMap;

use uuid::Uuid;

use crate::CqlType;

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct KeyspaceDef {
    pub name: String,
    pub replication: Replication,
    pub durable_writes: bool,
    pub tables: BTreeMap<String, TableDef>,
    pub types: BTreeMap<String, UdtDef>,
}

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Replication {
    Simple {
        replication_factor: u32,
    },
    NetworkTopology {
        data_centers: BTreeMap<String, u32>,
    },
    /// System keyspaces that live on every node and are never replicated.
    Local,
}

impl Replication {
    /// The `replication` map as `system_schema.keyspaces` shows it.
    pub fn to_map(&self) -> BTreeMap<String, String> {
        let mut map = BTreeMap::new();
        match self {
            Replication::Simple { replication_factor } => {
                map.insert("class".to_string(), "org.apache.cassandra.locator.SimpleStrategy".to_string());
                map.insert("replication_factor".to_string(), replication_factor.to_string());
            }
            Replication::NetworkTopology { data_centers } => {
                map.insert("class".to_string(), "org.apache.cassandra.locator.NetworkTopologyStrategy".to_string());
                for (dc, rf) in data_centers {
                    map.insert(dc.clone(), rf.to_string());
                }
            }
            Replication::Local => {
                map.insert("class".to_string(), "org.apache.cassandra.locator.LocalStrategy".to_string());
            }
        }
        map
    }
}

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct UdtDef {
    pub keyspace: String,
    pub name: String,
    pub fields: Vec<(String, CqlType)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ColumnKind {
    PartitionKey,
    Clustering,
    Static,
    Regular,
}

impl ColumnKind {
    /// The `kind` column of `system_schema.columns`.
    pub fn schema_name(self) -> &'static str {
        match self {
            ColumnKind::PartitionKey => "partition_key",
            ColumnKind::Clustering => "clustering",
            ColumnKind::Static => "static",
            ColumnKind::Regular => "regular",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ClusteringOrder {
    Asc,
    Desc,
}

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ColumnDef {
    pub name: String,
    pub ty: CqlType,
    pub kind: ColumnKind,
    /// Position within the partition key or clustering key; 0 otherwise.
    pub position: u32,
    /// Clustering order for clustering columns; `Asc` otherwise.
    pub order: ClusteringOrder,
    /// Stable storage id of the column (see module invariants).
    pub id: u16,
}

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TableOptions {
    pub gc_grace_seconds: i32,
    pub default_time_to_live: i32,
    /// `compaction` map, e.g. `{'class': 'SizeTieredCompactionStrategy'}`, stored with the full class name.
    pub compaction: BTreeMap<String, String>,
    pub compression: BTreeMap<String, String>,
    pub caching: BTreeMap<String, String>,
    pub comment: String,
    /// Other options Cassandra accepts and Shoal records but does not act on
    /// (e.g. `bloom_filter_fp_chance`, `speculative_retry`), as CQL literal text.
    pub extra: BTreeMap<String, String>,
}

impl Default for TableOptions {
    fn default() -> Self {
        let mut compaction = BTreeMap::new();
        compaction
            .insert("class".to_string(), "org.apache.cassandra.db.compaction.SizeTieredCompactionStrategy".to_string());
        compaction.insert("max_threshold".to_string(), "32".to_string());
        compaction.insert("min_threshold".to_string(), "4".to_string());
        let mut compression = BTreeMap::new();
        compression.insert("chunk_length_in_kb".to_string(), "16".to_string());
        compression.insert("class".to_string(), "org.apache.cassandra.io.compress.LZ4Compressor".to_string());
        let mut caching = BTreeMap::new();
        caching.insert("keys".to_string(), "ALL".to_string());
        caching.insert("rows_per_partition".to_string(), "NONE".to_string());
        TableOptions {
            gc_grace_seconds: 864_000,
            default_time_to_live: 0,
            compaction,
            compression,
            caching,
            comment: String::new(),
            extra: BTreeMap::new(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TableDef {
    pub keyspace: String,
    pub name: String,
    pub id: Uuid,
    /// See module invariants for the order.
    pub columns: Vec<ColumnDef>,
    pub options: TableOptions,
    /// The next column id to hand out; ids below it may belong to dropped columns.
    pub next_column_id: u16,
    /// Dropped columns and the time (µs) they were dropped: cells older than
    /// that are ignored if a column of the same name is added again.
    pub dropped_columns: BTreeMap<String, i64>,
    /// Secondary indexes on the table (`CREATE INDEX`), by creation order.
    #[serde(default)]
    pub indexes: Vec<IndexDef>,
}

impl TableDef {
    pub fn column(&self, name: &str) -> Option<&ColumnDef> {
        self.columns.iter().find(|c| c.name == name)
    }

    pub fn partition_key(&self) -> impl Iterator<Item = &ColumnDef> {
        self.columns.iter().filter(|c| c.kind == ColumnKind::PartitionKey)
    }

    pub fn clustering(&self) -> impl Iterator<Item = &ColumnDef> {
        self.columns.iter().filter(|c| c.kind == ColumnKind::Clustering)
    }

    pub fn partition_key_len(&self) -> usize {
        self.partition_key().count()
    }

    pub fn clustering_len(&self) -> usize {
        self.clustering().count()
    }

    /// A counter table (Cassandra's `isCounter`): its columns outside the
    /// primary key are all counters (the schema refuses any other mix).
    pub fn is_counter(&self) -> bool {
        self.columns.iter().any(|c| c.ty == crate::CqlType::Counter)
    }

    pub fn has_static(&self) -> bool {
        self.columns.iter().any(|c| c.kind == ColumnKind::Static)
    }

    /// Restores the column order invariant after columns were added.
    pub fn sort_columns(&mut self) {
        self.columns.sort_by(|a, b| {
            let rank = |c: &ColumnDef| match c.kind {
                ColumnKind::PartitionKey => (0, c.position, String::new()),
                ColumnKind::Clustering => (1, c.position, String::new()),
                ColumnKind::Static => (2, 0, c.name.clone()),
                ColumnKind::Regular => (3, 0, c.name.clone()),
            };
            rank(a).cmp(&rank(b))
        });
    }
}

/// What of a column an index indexes (Cassandra's `IndexTarget.Type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum IndexTargetKind {
    /// The column's value (a non-collection column).
    Simple,
    /// `values(c)`: each element of a set or list, each value of a map.
    Values,
    /// `keys(m)`: each key of a map.
    Keys,
    /// `entries(m)`: each (key, value) pair of a map.
    Entries,
    /// `full(c)`: a frozen collection's whole value.
    Full,
}

/// A secondary index (`CREATE [CUSTOM] INDEX`), local to each replica.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct IndexDef {
    pub name: String,
    /// The id of the index's own storage (a column family on each replica).
    pub id: Uuid,
    /// The indexed column's name.
    pub column: String,
    pub target: IndexTargetKind,
    /// `USING 'class'` of a CUSTOM index (`StorageAttachedIndex`, `sai`), as written.
    pub class_name: Option<String>,
}

impl IndexDef {
    /// The `target` option as `system_schema.indexes` shows it: `v`, `keys(m)`, `full(f)`…
    /// (`column_cql` is the column's name as CQL writes it, quoted if need be).
    pub fn target_text(&self, column_cql: &str) -> String {
        match self.target {
            IndexTargetKind::Simple => column_cql.to_string(),
            IndexTargetKind::Values => format!("values({column_cql})"),
            IndexTargetKind::Keys => format!("keys({column_cql})"),
            IndexTargetKind::Entries => format!("entries({column_cql})"),
            IndexTargetKind::Full => format!("full({column_cql})"),
        }
    }
}
