//! Built-in virtual keyspaces: `system` (local, peers, peers_v2),
//! `system_schema` (keyspaces, tables, columns, types, functions, aggregates,
//! views, indexes, triggers, dropped_columns), with the columns the DataStax
//! Python driver and the scylla Rust driver read at connect time, and
//! `system_virtual_schema` (keyspaces, tables, columns), which Cassandra 4.0+
//! has and the Java driver 4 and the Python driver read for a server of release
//! 4.0 or later: without it the Java driver's whole schema refresh fails.
//!
//! Cassandra models `system` and `system_schema` as ordinary local tables and
//! only `system_views` and `system_virtual_schema` as virtual keyspaces; Shoal
//! answers the same way: `system_virtual_schema` describes itself, and
//! `system_schema` does not list it.
//!
//! Invariants:
//! - Rows are generated from the current schema snapshot and the node's
//!   identity on every read; nothing here is stored.
//! - `tokens` are the decimal strings of the node's Murmur3 tokens, and
//!   `partitioner` is Cassandra's Murmur3Partitioner class name, so drivers
//!   build a token map and route by token.

use std::collections::BTreeMap;
use std::net::IpAddr;

use types::schema::{ClusteringOrder, ColumnDef, ColumnKind, KeyspaceDef, Replication, TableDef, TableOptions};
use types::{CqlType, Value};
use uuid::Uuid;

use crate::schema::Schema;

pub const SYSTEM_KEYSPACES: &[&str] = &[
    "system",
    "system_schema",
    "system_virtual_schema",
    "system_views",
    "system_auth",
    "system_distributed",
    "system_traces",
];

/// The system keyspaces stored and replicated like user keyspaces.
pub const REPLICATED_SYSTEM_KEYSPACES: &[&str] = &["system_auth", "system_distributed", "system_traces"];

/// `gc_grace_seconds` of the `system_auth` tables (90 days, Cassandra's).
const AUTH_GC_GRACE: i32 = 90 * 24 * 3600;

/// The keyspaces Cassandra itself calls virtual: described in
/// `system_virtual_schema`, absent from `system_schema`.
const CASSANDRA_VIRTUAL_KEYSPACES: &[&str] = &["system_virtual_schema", "system_views"];

/// Whether Cassandra calls `keyspace` virtual (DESCRIBE shows it as a
/// `VIRTUAL KEYSPACE` in a comment, not as CQL that recreates it).
pub fn is_cassandra_virtual(keyspace: &str) -> bool {
    CASSANDRA_VIRTUAL_KEYSPACES.contains(&keyspace)
}

fn in_system_schema(ks: &KeyspaceDef) -> bool {
    !is_cassandra_virtual(&ks.name)
}

/// The release version drivers see. Drivers pick their schema parser from it
/// (>= 4.0 means `system_schema` with Cassandra 4's columns).
pub const RELEASE_VERSION: &str = "4.1.7";
pub const CQL_VERSION: &str = "3.4.6";
pub const PARTITIONER: &str = "org.apache.cassandra.dht.Murmur3Partitioner";

/// What the node says about itself and its peers.
#[derive(Clone, Debug)]
pub struct NodeInfo {
    pub cluster_name: String,
    pub host_id: Uuid,
    pub listen_address: IpAddr,
    pub rpc_address: IpAddr,
    pub native_port: u16,
    pub storage_port: u16,
    pub data_center: String,
    pub rack: String,
    pub tokens: Vec<i64>,
    pub gossip_generation: i32,
}

fn text() -> CqlType {
    CqlType::Text
}
fn frozen_map_text() -> CqlType {
    CqlType::Map { key: Box::new(CqlType::Text), value: Box::new(CqlType::Text), frozen: true }
}
fn frozen_list_text() -> CqlType {
    CqlType::List { elem: Box::new(CqlType::Text), frozen: true }
}
fn set_text() -> CqlType {
    CqlType::Set { elem: Box::new(CqlType::Text), frozen: false }
}

fn table_def(
    ks: &str,
    name: &str,
    pk: &[(&str, CqlType)],
    ck: &[(&str, CqlType)],
    rest: &[(&str, CqlType)],
) -> TableDef {
    let mut columns = Vec::new();
    let mut id = 16u16;
    let mut push = |name: &str, ty: CqlType, kind: ColumnKind, position: u32| {
        columns.push(ColumnDef { name: name.to_string(), ty, kind, position, order: ClusteringOrder::Asc, id });
        id += 1;
    };
    for (i, (n, t)) in pk.iter().enumerate() {
        push(n, t.clone(), ColumnKind::PartitionKey, i as u32);
    }
    for (i, (n, t)) in ck.iter().enumerate() {
        push(n, t.clone(), ColumnKind::Clustering, i as u32);
    }
    for (n, t) in rest {
        push(n, t.clone(), ColumnKind::Regular, 0);
    }
    let mut def = TableDef {
        keyspace: ks.to_string(),
        name: name.to_string(),
        id: Uuid::new_v3(&Uuid::NAMESPACE_OID, format!("{ks}.{name}").as_bytes()),
        columns,
        options: TableOptions { gc_grace_seconds: 0, ..TableOptions::default() },
        next_column_id: id,
        dropped_columns: BTreeMap::new(),
        indexes: Vec::new(),
    };
    def.sort_columns();
    def
}

/// The table options columns shared by `system_schema.tables` and `views`.
fn option_columns() -> Vec<(&'static str, CqlType)> {
    vec![
        ("additional_write_policy", text()),
        ("bloom_filter_fp_chance", CqlType::Double),
        ("caching", frozen_map_text()),
        ("cdc", CqlType::Boolean),
        ("comment", text()),
        ("compaction", frozen_map_text()),
        ("compression", frozen_map_text()),
        ("crc_check_chance", CqlType::Double),
        ("default_time_to_live", CqlType::Int),
        ("extensions", CqlType::Map { key: Box::new(text()), value: Box::new(CqlType::Blob), frozen: true }),
        ("gc_grace_seconds", CqlType::Int),
        ("id", CqlType::Uuid),
        ("max_index_interval", CqlType::Int),
        ("memtable_flush_period_in_ms", CqlType::Int),
        ("min_index_interval", CqlType::Int),
        ("read_repair", text()),
        ("speculative_retry", text()),
    ]
}

pub fn keyspaces() -> Vec<KeyspaceDef> {
    let mut system = BTreeMap::new();
    let local = table_def(
        "system",
        "local",
        &[("key", text())],
        &[],
        &[
            ("bootstrapped", text()),
            ("broadcast_address", CqlType::Inet),
            ("broadcast_port", CqlType::Int),
            ("cluster_name", text()),
            ("cql_version", text()),
            ("data_center", text()),
            ("gossip_generation", CqlType::Int),
            ("host_id", CqlType::Uuid),
            ("listen_address", CqlType::Inet),
            ("listen_port", CqlType::Int),
            ("native_protocol_version", text()),
            ("partitioner", text()),
            ("rack", text()),
            ("release_version", text()),
            ("rpc_address", CqlType::Inet),
            ("rpc_port", CqlType::Int),
            ("schema_version", CqlType::Uuid),
            ("tokens", set_text()),
            (
                "truncated_at",
                CqlType::Map { key: Box::new(CqlType::Uuid), value: Box::new(CqlType::Blob), frozen: false },
            ),
        ],
    );
    let peers = table_def(
        "system",
        "peers",
        &[("peer", CqlType::Inet)],
        &[],
        &[
            ("data_center", text()),
            ("host_id", CqlType::Uuid),
            ("preferred_ip", CqlType::Inet),
            ("rack", text()),
            ("release_version", text()),
            ("rpc_address", CqlType::Inet),
            ("schema_version", CqlType::Uuid),
            ("tokens", set_text()),
        ],
    );
    let peers_v2 = table_def(
        "system",
        "peers_v2",
        &[("peer", CqlType::Inet)],
        &[("peer_port", CqlType::Int)],
        &[
            ("data_center", text()),
            ("host_id", CqlType::Uuid),
            ("native_address", CqlType::Inet),
            ("native_port", CqlType::Int),
            ("preferred_ip", CqlType::Inet),
            ("preferred_port", CqlType::Int),
            ("rack", text()),
            ("release_version", text()),
            ("schema_version", CqlType::Uuid),
            ("tokens", set_text()),
        ],
    );
    for t in [local, peers, peers_v2] {
        system.insert(t.name.clone(), t);
    }

    let mut schema = BTreeMap::new();
    let ks_col = ("keyspace_name", text());
    // `system_schema.columns` and `system_virtual_schema.columns` have the same columns.
    let column_rest = [
        ("clustering_order", text()),
        ("column_name_bytes", CqlType::Blob),
        ("kind", text()),
        ("position", CqlType::Int),
        ("type", text()),
    ];

    let mut tables_rest = option_columns();
    tables_rest.push(("flags", CqlType::Set { elem: Box::new(text()), frozen: true }));
    let mut views_rest = option_columns();
    views_rest.extend([
        ("base_table_id", CqlType::Uuid),
        ("base_table_name", text()),
        ("include_all_columns", CqlType::Boolean),
        ("where_clause", text()),
    ]);
    let defs = vec![
        table_def(
            "system_schema",
            "keyspaces",
            std::slice::from_ref(&ks_col),
            &[],
            &[("durable_writes", CqlType::Boolean), ("replication", frozen_map_text())],
        ),
        table_def("system_schema", "tables", std::slice::from_ref(&ks_col), &[("table_name", text())], &tables_rest),
        table_def(
            "system_schema",
            "columns",
            std::slice::from_ref(&ks_col),
            &[("table_name", text()), ("column_name", text())],
            &column_rest,
        ),
        table_def(
            "system_schema",
            "dropped_columns",
            std::slice::from_ref(&ks_col),
            &[("table_name", text()), ("column_name", text())],
            &[("dropped_time", CqlType::Timestamp), ("kind", text()), ("type", text())],
        ),
        table_def(
            "system_schema",
            "types",
            std::slice::from_ref(&ks_col),
            &[("type_name", text())],
            &[("field_names", frozen_list_text()), ("field_types", frozen_list_text())],
        ),
        table_def(
            "system_schema",
            "functions",
            std::slice::from_ref(&ks_col),
            &[("function_name", text()), ("argument_types", frozen_list_text())],
            &[
                ("argument_names", frozen_list_text()),
                ("body", text()),
                ("called_on_null_input", CqlType::Boolean),
                ("language", text()),
                ("return_type", text()),
            ],
        ),
        table_def(
            "system_schema",
            "aggregates",
            std::slice::from_ref(&ks_col),
            &[("aggregate_name", text()), ("argument_types", frozen_list_text())],
            &[
                ("final_func", text()),
                ("initcond", text()),
                ("return_type", text()),
                ("state_func", text()),
                ("state_type", text()),
            ],
        ),
        table_def("system_schema", "views", std::slice::from_ref(&ks_col), &[("view_name", text())], &views_rest),
        table_def(
            "system_schema",
            "indexes",
            std::slice::from_ref(&ks_col),
            &[("table_name", text()), ("index_name", text())],
            &[("kind", text()), ("options", frozen_map_text())],
        ),
        table_def(
            "system_schema",
            "triggers",
            std::slice::from_ref(&ks_col),
            &[("table_name", text()), ("trigger_name", text())],
            &[("options", frozen_map_text())],
        ),
    ];
    for t in defs {
        schema.insert(t.name.clone(), t);
    }
    let mut virtual_schema = BTreeMap::new();
    for (t, comment) in [
        (
            table_def("system_virtual_schema", "keyspaces", std::slice::from_ref(&ks_col), &[], &[]),
            "virtual keyspace definitions",
        ),
        (
            table_def(
                "system_virtual_schema",
                "tables",
                std::slice::from_ref(&ks_col),
                &[("table_name", text())],
                &[("comment", text())],
            ),
            "virtual table definitions",
        ),
        (
            table_def(
                "system_virtual_schema",
                "columns",
                std::slice::from_ref(&ks_col),
                &[("table_name", text()), ("column_name", text())],
                &column_rest,
            ),
            "virtual column definitions",
        ),
    ] {
        let mut t = t;
        t.options.comment = comment.to_string();
        virtual_schema.insert(t.name.clone(), t);
    }
    let mut views = BTreeMap::new();
    for (table, comment, pk, ck, rest) in crate::views::tables() {
        let mut def = table_def("system_views", table, &pk, &ck, &rest);
        def.options.comment = comment.to_string();
        views.insert(table.to_string(), def);
    }
    let mut out = vec![
        KeyspaceDef {
            name: "system_views".into(),
            replication: Replication::Local,
            durable_writes: true,
            tables: views,
            types: BTreeMap::new(),
        },
        KeyspaceDef {
            name: "system_virtual_schema".into(),
            replication: Replication::Local,
            durable_writes: true,
            tables: virtual_schema,
            types: BTreeMap::new(),
        },
        KeyspaceDef {
            name: "system".into(),
            replication: Replication::Local,
            durable_writes: true,
            tables: system,
            types: BTreeMap::new(),
        },
        KeyspaceDef {
            name: "system_schema".into(),
            replication: Replication::Local,
            durable_writes: true,
            tables: schema,
            types: BTreeMap::new(),
        },
    ];
    // Present in every Cassandra cluster and stored like user keyspaces
    // (`schema::normalize`): `system_auth` holds the roles and permissions,
    // `system_traces` the trace sessions and their events (Cassandra's
    // tables, by the same names); `system_distributed` is empty (no
    // distributed system tables yet) but listed so tools see the usual set.
    for (name, rf) in [("system_auth", 1), ("system_distributed", 3), ("system_traces", 2)] {
        let mut tables = BTreeMap::new();
        if name == "system_auth" {
            for (table, comment, pk, ck, rest) in [
                (
                    "roles",
                    "role definitions",
                    vec![("role", text())],
                    vec![],
                    vec![
                        ("can_login", CqlType::Boolean),
                        ("is_superuser", CqlType::Boolean),
                        ("member_of", set_text()),
                        ("salted_hash", text()),
                    ],
                ),
                (
                    "role_members",
                    "role memberships lookup table",
                    vec![("role", text())],
                    vec![("member", text())],
                    vec![],
                ),
                (
                    "role_permissions",
                    "permissions granted to db roles",
                    vec![("role", text())],
                    vec![("resource", text())],
                    vec![("permissions", set_text())],
                ),
                (
                    "resource_role_permissons_index",
                    "index of db roles with permissions granted on a resource",
                    vec![("resource", text())],
                    vec![("role", text())],
                    vec![],
                ),
            ] {
                let mut def = table_def(name, table, &pk, &ck, &rest);
                def.options.comment = comment.to_string();
                def.options.gc_grace_seconds = AUTH_GC_GRACE;
                tables.insert(table.to_string(), def);
            }
        }
        if name == "system_traces" {
            for (table, comment, pk, ck, rest) in trace_tables() {
                let mut def = table_def(name, table, &pk, &ck, &rest);
                def.options.comment = comment.to_string();
                tables.insert(table.to_string(), def);
            }
        }
        out.push(KeyspaceDef {
            name: name.into(),
            replication: Replication::Simple { replication_factor: rf },
            durable_writes: true,
            tables,
            types: BTreeMap::new(),
        });
    }
    out
}

/// A system table: name, comment, partition key, clustering and other columns.
pub(crate) type SystemTable = (
    &'static str,
    &'static str,
    Vec<(&'static str, CqlType)>,
    Vec<(&'static str, CqlType)>,
    Vec<(&'static str, CqlType)>,
);

/// `system_traces`' tables as Cassandra 5.0.9 defines them (`TraceKeyspace`):
/// rows written by the trace writer (`traces.rs`) with a TTL of one day,
/// `gc_grace_seconds` 0.
fn trace_tables() -> [SystemTable; 2] {
    [
        (
            "sessions",
            "tracing sessions",
            vec![("session_id", CqlType::Uuid)],
            vec![],
            vec![
                ("client", CqlType::Inet),
                ("command", text()),
                ("coordinator", CqlType::Inet),
                ("coordinator_port", CqlType::Int),
                ("duration", CqlType::Int),
                ("parameters", CqlType::Map { key: Box::new(text()), value: Box::new(text()), frozen: false }),
                ("request", text()),
                ("started_at", CqlType::Timestamp),
            ],
        ),
        (
            "events",
            "tracing events",
            vec![("session_id", CqlType::Uuid)],
            vec![("event_id", CqlType::TimeUuid)],
            vec![
                ("activity", text()),
                ("source", CqlType::Inet),
                ("source_elapsed", CqlType::Int),
                ("source_port", CqlType::Int),
                ("thread", text()),
            ],
        ),
    ]
}

/// A generated row: one optional serialized value per column of the table,
/// in the table's column order.
pub type VirtualRow = Vec<Option<Vec<u8>>>;

pub(crate) fn v(value: Value) -> Option<Vec<u8>> {
    Some(value.to_bytes())
}
fn t(s: &str) -> Option<Vec<u8>> {
    Some(s.as_bytes().to_vec())
}
fn text_map(m: &BTreeMap<String, String>) -> Option<Vec<u8>> {
    v(Value::Map(m.iter().map(|(k, x)| (Value::Text(k.clone()), Value::Text(x.clone()))).collect()))
}
fn text_list(items: impl IntoIterator<Item = String>) -> Option<Vec<u8>> {
    v(Value::List(items.into_iter().map(Value::Text).collect()))
}

/// Builds a row by column name; columns not named are null.
pub(crate) fn row(table: &TableDef, values: Vec<(&str, Option<Vec<u8>>)>) -> VirtualRow {
    let mut out: VirtualRow = vec![None; table.columns.len()];
    for (name, value) in values {
        if let Some(i) = table.columns.iter().position(|c| c.name == name) {
            out[i] = value;
        }
    }
    out
}

/// All rows of a virtual table (the caller filters and pages them).
pub fn rows(table: &TableDef, schema: &Schema, node: &NodeInfo, peers: &[crate::data::PeerInfo]) -> Vec<VirtualRow> {
    let tokens = || v(Value::Set(node.tokens.iter().map(|t| Value::Text(t.to_string())).collect()));
    match (table.keyspace.as_str(), table.name.as_str()) {
        ("system", "local") => vec![row(
            table,
            vec![
                ("key", t("local")),
                ("bootstrapped", t("COMPLETED")),
                ("broadcast_address", v(Value::Inet(node.listen_address))),
                ("broadcast_port", v(Value::Int(node.storage_port as i32))),
                ("cluster_name", t(&node.cluster_name)),
                ("cql_version", t(CQL_VERSION)),
                ("data_center", t(&node.data_center)),
                ("gossip_generation", v(Value::Int(node.gossip_generation))),
                ("host_id", v(Value::Uuid(node.host_id))),
                ("listen_address", v(Value::Inet(node.listen_address))),
                ("listen_port", v(Value::Int(node.storage_port as i32))),
                ("native_protocol_version", t("4")),
                ("partitioner", t(PARTITIONER)),
                ("rack", t(&node.rack)),
                ("release_version", t(RELEASE_VERSION)),
                ("rpc_address", v(Value::Inet(node.rpc_address))),
                ("rpc_port", v(Value::Int(node.native_port as i32))),
                ("schema_version", v(Value::Uuid(schema.version))),
                ("tokens", tokens()),
            ],
        )],
        // One list serves both tables: `row` keeps the columns the table has.
        ("system", "peers") | ("system", "peers_v2") => peers
            .iter()
            .map(|p| {
                row(
                    table,
                    vec![
                        ("peer", v(Value::Inet(p.peer))),
                        ("peer_port", v(Value::Int(i32::from(p.peer_port)))),
                        ("data_center", t(&p.data_center)),
                        ("host_id", v(Value::Uuid(p.host_id))),
                        ("rpc_address", v(Value::Inet(p.rpc_address))),
                        ("native_address", v(Value::Inet(p.rpc_address))),
                        ("native_port", v(Value::Int(i32::from(p.native_port)))),
                        ("preferred_ip", v(Value::Inet(p.peer))),
                        ("preferred_port", v(Value::Int(i32::from(p.peer_port)))),
                        ("rack", t(&p.rack)),
                        ("release_version", t(&p.release_version)),
                        ("schema_version", p.schema_version.map(Value::Uuid).and_then(v)),
                        ("tokens", v(Value::Set(p.tokens.iter().map(|t| Value::Text(t.to_string())).collect()))),
                    ],
                )
            })
            .collect(),
        ("system_schema", "keyspaces") => schema
            .keyspaces
            .values()
            .filter(|ks| in_system_schema(ks))
            .map(|ks| {
                row(
                    table,
                    vec![
                        ("keyspace_name", t(&ks.name)),
                        ("durable_writes", v(Value::Boolean(ks.durable_writes))),
                        ("replication", text_map(&ks.replication.to_map())),
                    ],
                )
            })
            .collect(),
        ("system_schema", "tables") => schema
            .keyspaces
            .values()
            .filter(|ks| in_system_schema(ks))
            .flat_map(|ks| ks.tables.values())
            .map(|tbl| {
                let o = &tbl.options;
                let mut values = vec![
                    ("keyspace_name", t(&tbl.keyspace)),
                    ("table_name", t(&tbl.name)),
                    ("additional_write_policy", t("99p")),
                    ("bloom_filter_fp_chance", v(Value::Double(0.01))),
                    ("caching", text_map(&o.caching)),
                    ("cdc", v(Value::Boolean(false))),
                    ("comment", t(&o.comment)),
                    ("compaction", text_map(&o.compaction)),
                    ("compression", text_map(&o.compression)),
                    ("crc_check_chance", v(Value::Double(1.0))),
                    ("default_time_to_live", v(Value::Int(o.default_time_to_live))),
                    ("extensions", v(Value::Map(Vec::new()))),
                    ("flags", v(Value::Set(table_flags(tbl)))),
                    ("gc_grace_seconds", v(Value::Int(o.gc_grace_seconds))),
                    ("id", v(Value::Uuid(tbl.id))),
                    ("max_index_interval", v(Value::Int(2048))),
                    ("memtable_flush_period_in_ms", v(Value::Int(0))),
                    ("min_index_interval", v(Value::Int(128))),
                    ("read_repair", t("BLOCKING")),
                    ("speculative_retry", t("99p")),
                ];
                if let Some(p) = o.extra.get("bloom_filter_fp_chance").and_then(|x| x.parse::<f64>().ok()) {
                    values.push(("bloom_filter_fp_chance", v(Value::Double(p))));
                }
                row(table, values)
            })
            .collect(),
        ("system_schema", "columns") => column_rows(table, schema.keyspaces.values().filter(|ks| in_system_schema(ks))),
        ("system_virtual_schema", "keyspaces") => {
            virtual_keyspaces(schema).map(|ks| row(table, vec![("keyspace_name", t(&ks.name))])).collect()
        }
        ("system_virtual_schema", "tables") => virtual_keyspaces(schema)
            .flat_map(|ks| ks.tables.values())
            .map(|tbl| {
                row(
                    table,
                    vec![
                        ("keyspace_name", t(&tbl.keyspace)),
                        ("table_name", t(&tbl.name)),
                        ("comment", t(&tbl.options.comment)),
                    ],
                )
            })
            .collect(),
        ("system_virtual_schema", "columns") => column_rows(table, virtual_keyspaces(schema)),
        ("system_schema", "dropped_columns") => schema
            .keyspaces
            .values()
            .flat_map(|ks| ks.tables.values())
            .flat_map(|tbl| tbl.dropped_columns.iter().map(move |(name, at)| (tbl, name, *at)))
            .map(|(tbl, name, at)| {
                row(
                    table,
                    vec![
                        ("keyspace_name", t(&tbl.keyspace)),
                        ("table_name", t(&tbl.name)),
                        ("column_name", t(name)),
                        ("dropped_time", v(Value::Timestamp(at / 1000))),
                        ("kind", t("regular")),
                    ],
                )
            })
            .collect(),
        ("system_schema", "indexes") => schema
            .keyspaces
            .values()
            .flat_map(|ks| ks.tables.values())
            .flat_map(|tbl| {
                let mut indexes: Vec<_> = tbl.indexes.iter().collect();
                indexes.sort_by(|a, b| a.name.cmp(&b.name));
                indexes.into_iter().map(move |i| (tbl, i))
            })
            .map(|(tbl, i)| {
                let (kind, options) = crate::index::schema_row(i);
                row(
                    table,
                    vec![
                        ("keyspace_name", t(&tbl.keyspace)),
                        ("table_name", t(&tbl.name)),
                        ("index_name", t(&i.name)),
                        ("kind", t(kind)),
                        ("options", text_map(&options)),
                    ],
                )
            })
            .collect(),
        ("system_schema", "types") => schema
            .keyspaces
            .values()
            .flat_map(|ks| ks.types.values())
            .map(|udt| {
                row(
                    table,
                    vec![
                        ("keyspace_name", t(&udt.keyspace)),
                        ("type_name", t(&udt.name)),
                        ("field_names", text_list(udt.fields.iter().map(|(n, _)| n.clone()))),
                        ("field_types", text_list(udt.fields.iter().map(|(_, ty)| ty.to_cql()))),
                    ],
                )
            })
            .collect(),
        // No functions, aggregates, views or triggers yet: present and empty.
        _ => Vec::new(),
    }
}

/// Whether reads of `keyspace` are answered from generated rows, not storage.
pub fn is_virtual(keyspace: &str) -> bool {
    keyspace == "system"
        || keyspace == "system_schema"
        || keyspace == "system_virtual_schema"
        || keyspace == "system_views"
}

fn virtual_keyspaces(schema: &Schema) -> impl Iterator<Item = &std::sync::Arc<KeyspaceDef>> {
    schema.keyspaces.values().filter(|ks| !in_system_schema(ks))
}

/// The rows of `system_schema.columns` / `system_virtual_schema.columns`
/// (the same columns) for the tables of `keyspaces`.
fn column_rows<'a>(
    table: &TableDef,
    keyspaces: impl Iterator<Item = &'a std::sync::Arc<KeyspaceDef>>,
) -> Vec<VirtualRow> {
    keyspaces
        .flat_map(|ks| ks.tables.values())
        .flat_map(|tbl| tbl.columns.iter().map(move |c| (tbl, c)))
        .map(|(tbl, c)| {
            let order = match (c.kind, c.order) {
                (ColumnKind::Clustering, ClusteringOrder::Asc) => "asc",
                (ColumnKind::Clustering, ClusteringOrder::Desc) => "desc",
                _ => "none",
            };
            let position = match c.kind {
                ColumnKind::PartitionKey | ColumnKind::Clustering => c.position as i32,
                _ => -1,
            };
            row(
                table,
                vec![
                    ("keyspace_name", t(&tbl.keyspace)),
                    ("table_name", t(&tbl.name)),
                    ("column_name", t(&c.name)),
                    ("clustering_order", t(order)),
                    ("column_name_bytes", Some(c.name.as_bytes().to_vec())),
                    ("kind", t(c.kind.schema_name())),
                    ("position", v(Value::Int(position))),
                    ("type", t(&c.ty.to_cql())),
                ],
            )
        })
        .collect()
}

/// `system_schema.tables.flags`, sorted as the set is: every table is
/// `compound` (no COMPACT STORAGE), a table with counters also `counter`.
fn table_flags(tbl: &types::schema::TableDef) -> Vec<Value> {
    let mut flags = vec![Value::Text("compound".into())];
    if tbl.is_counter() {
        flags.push(Value::Text("counter".into()));
    }
    flags
}
