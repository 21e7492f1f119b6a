//! Server-side `DESCRIBE` (Cassandra 4.0+), as cqlsh 6.x uses it: cqlsh sends
//! the statement text unchanged and prints the rows it gets back.
//!
//! Result shapes (all columns in the table spec `system.describe`):
//! - listings (`KEYSPACES`, `TABLES`, `TYPES`, `FUNCTIONS`, `AGGREGATES`):
//!   `keyspace_name, type, name` (text);
//! - elements (`KEYSPACE`, `TABLE`, `TYPE`, `SCHEMA`, a bare name, ...):
//!   `keyspace_name, type, name, create_statement` (text);
//! - `CLUSTER`: `cluster, partitioner, snitch` (text) and, when the session
//!   uses a non-system keyspace, `range_ownership map<text, list<text>>`.
//!
//! Invariants:
//! - The CREATE statements are byte for byte what Cassandra 4.1 prints
//!   (`CqlBuilder`: four-space indentation, `WITH` options in Cassandra's
//!   order joined by `\n    AND `, a double space before the keyspace's
//!   `AND durable_writes`), so scripts and tools diffing schemas see no change.
//! - Names in rows and statements are quoted only where CQL needs it
//!   (`ColumnIdentifier.maybeQuote`: not `[a-z][a-z0-9_]*` or reserved).
//! - Elements come in Cassandra's order: keyspaces and tables by name ignoring
//!   case, types so that a type follows the types it uses.
//! - Shoal has no functions, aggregates or views: their listings are
//!   empty and naming one gives Cassandra's not-found error. A table's
//!   secondary indexes follow it, by name.

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::net::IpAddr;

use cql::ast::{Describe, DescribeTarget, QualifiedName};
use cql_protocol::{ColumnSpec, ResultBody, RowsMetadata, RowsWriter};
use types::schema::{ClusteringOrder, ColumnDef, ColumnKind, KeyspaceDef, Replication, TableDef, UdtDef};
use types::CqlType;

use crate::error::QueryError;
use crate::schema::Schema;
use crate::system::{NodeInfo, PARTITIONER};

/// The table spec of every DESCRIBE result column.
const SPEC_KEYSPACE: &str = "system";
const SPEC_TABLE: &str = "describe";

// ---------------------------------------------------------------------------
// Execution
// ---------------------------------------------------------------------------

/// Runs a DESCRIBE statement against a schema snapshot.
///
/// `session_keyspace` is the keyspace of the connection's `USE` (Cassandra's
/// raw keyspace): listings are limited to it, unqualified names resolve in it
/// and `DESCRIBE CLUSTER` adds its range ownership.
pub fn execute(
    schema: &Schema,
    session_keyspace: Option<&str>,
    describe: &Describe,
    node: &NodeInfo,
) -> Result<ResultBody, QueryError> {
    let internals = describe.with_internals;
    let rows = match &describe.target {
        DescribeTarget::Cluster => return Ok(cluster(schema, session_keyspace, node)),
        DescribeTarget::Keyspaces => {
            let elements = sorted_keyspaces(schema.keyspaces.values().map(|k| &**k)).into_iter().map(Element::Keyspace);
            return Ok(listing(elements));
        }
        DescribeTarget::Tables => {
            return listing_per_keyspace(schema, session_keyspace, |ks| {
                sorted_tables(ks).into_iter().map(Element::Table).collect()
            })
        }
        DescribeTarget::Types => {
            return listing_per_keyspace(schema, session_keyspace, |ks| {
                let mut types: Vec<&UdtDef> = ks.types.values().collect();
                types.sort_by(|a, b| compare_ignore_case(&a.name, &b.name));
                types.into_iter().map(Element::Type).collect()
            })
        }
        DescribeTarget::Functions | DescribeTarget::Aggregates => {
            return listing_per_keyspace(schema, session_keyspace, |_| Vec::new())
        }
        DescribeTarget::Schema { full } => {
            let keyspaces = schema.keyspaces.values().map(|k| &**k).filter(|k| *full || !Schema::is_system(&k.name));
            sorted_keyspaces(keyspaces).into_iter().flat_map(|ks| keyspace_elements(ks, false)).collect()
        }
        DescribeTarget::Keyspace { keyspace, only } => {
            let ks = element_keyspace(schema, keyspace.as_deref(), session_keyspace)?;
            keyspace_elements(ks, *only)
        }
        DescribeTarget::Table(name) => table_elements(schema, name, session_keyspace)?,
        DescribeTarget::Index(name) => {
            let ks = element_keyspace(schema, name.keyspace.as_deref(), session_keyspace)?;
            match find_index(ks, &name.name) {
                Some(e) => vec![e],
                None => {
                    return Err(QueryError::Invalid(format!(
                        "Table for existing index '{}' not found in '{}'",
                        name.name, ks.name
                    )))
                }
            }
        }
        DescribeTarget::MaterializedView(name) => {
            let ks = element_keyspace(schema, name.keyspace.as_deref(), session_keyspace)?;
            return Err(QueryError::Invalid(format!("Materialized view '{}' not found in '{}'", name.name, ks.name)));
        }
        DescribeTarget::Type(name) => {
            let ks = element_keyspace(schema, name.keyspace.as_deref(), session_keyspace)?;
            match ks.types.get(&name.name) {
                Some(udt) => vec![Element::Type(udt)],
                None => {
                    return Err(QueryError::Invalid(format!(
                        "User defined type '{}' not found in '{}'",
                        name.name, ks.name
                    )))
                }
            }
        }
        DescribeTarget::Function(name) => {
            let ks = element_keyspace(schema, name.keyspace.as_deref(), session_keyspace)?;
            return Err(QueryError::Invalid(format!(
                "User defined function '{}' not found in '{}'",
                name.name, ks.name
            )));
        }
        DescribeTarget::Aggregate(name) => {
            let ks = element_keyspace(schema, name.keyspace.as_deref(), session_keyspace)?;
            return Err(QueryError::Invalid(format!(
                "User defined aggregate '{}' not found in '{}'",
                name.name, ks.name
            )));
        }
        DescribeTarget::Generic(name) => generic(schema, name, session_keyspace)?,
    };
    Ok(elements_result(rows, internals))
}

/// One schema element of a DESCRIBE result.
#[derive(Clone, Copy)]
enum Element<'s> {
    Keyspace(&'s KeyspaceDef),
    Type(&'s UdtDef),
    Table(&'s TableDef),
    Index(&'s TableDef, &'s types::schema::IndexDef),
}

/// The index named `name` in `ks`, as a DESCRIBE element.
fn find_index<'s>(ks: &'s KeyspaceDef, name: &str) -> Option<Element<'s>> {
    ks.tables.values().find_map(|t| t.indexes.iter().find(|i| i.name == name).map(|i| Element::Index(t, i)))
}

/// A table then its indexes (by name), as DESCRIBE lists them.
fn with_indexes(t: &TableDef) -> Vec<Element<'_>> {
    let mut indexes: Vec<&types::schema::IndexDef> = t.indexes.iter().collect();
    indexes.sort_by(|a, b| a.name.cmp(&b.name));
    std::iter::once(Element::Table(t)).chain(indexes.into_iter().map(|i| Element::Index(t, i))).collect()
}

impl Element<'_> {
    fn keyspace(&self) -> &str {
        match self {
            Element::Keyspace(k) => &k.name,
            Element::Type(t) => &t.keyspace,
            Element::Table(t) | Element::Index(t, _) => &t.keyspace,
        }
    }

    /// Cassandra's `SchemaElementType`, lower-cased.
    fn kind(&self) -> &'static str {
        match self {
            Element::Keyspace(_) => "keyspace",
            Element::Type(_) => "type",
            Element::Table(_) => "table",
            Element::Index(..) => "index",
        }
    }

    fn name(&self) -> &str {
        match self {
            Element::Keyspace(k) => &k.name,
            Element::Type(t) => &t.name,
            Element::Table(t) => &t.name,
            Element::Index(_, i) => &i.name,
        }
    }

    fn create_statement(&self, internals: bool) -> String {
        if crate::system::is_cassandra_virtual(self.keyspace()) {
            // As Cassandra: a virtual element cannot be recreated, so its
            // structure is shown for reference inside a comment.
            let (what, name, cql) = match self {
                Element::Keyspace(k) => {
                    ("Keyspace", maybe_quote(&k.name), format!("VIRTUAL KEYSPACE {};", maybe_quote(&k.name)))
                }
                Element::Type(t) => {
                    ("Type", format!("{}.{}", maybe_quote(&t.keyspace), maybe_quote(&t.name)), create_type_cql(t))
                }
                Element::Table(t) => (
                    "Table",
                    format!("{}.{}", maybe_quote(&t.keyspace), maybe_quote(&t.name)),
                    table_cql(t, TableCql::Virtual),
                ),
                Element::Index(t, i) => {
                    ("Index", maybe_quote(&i.name), crate::index::create_statement(&t.keyspace, &t.name, i))
                }
            };
            return format!(
                "/*\nWarning: {what} {name} is a virtual {} and cannot be recreated with CQL.\nStructure, for reference:\n{cql}\n*/",
                what.to_ascii_lowercase()
            );
        }
        match self {
            Element::Keyspace(k) => create_keyspace_cql(k),
            Element::Type(t) => create_type_cql(t),
            Element::Table(t) => table_cql(t, if internals { TableCql::WithInternals } else { TableCql::Create }),
            Element::Index(t, i) => crate::index::create_statement(&t.keyspace, &t.name, i),
        }
    }
}

fn text_column(name: &str) -> ColumnSpec {
    ColumnSpec {
        keyspace: SPEC_KEYSPACE.to_string(),
        table: SPEC_TABLE.to_string(),
        name: name.to_string(),
        ty: CqlType::Text,
    }
}

/// `keyspace_name, type, name` rows.
fn listing<'s>(elements: impl IntoIterator<Item = Element<'s>>) -> ResultBody {
    let columns = vec![text_column("keyspace_name"), text_column("type"), text_column("name")];
    let mut writer = RowsWriter::new(columns.len());
    for e in elements {
        writer.push_cell(Some(maybe_quote(e.keyspace()).as_bytes()));
        writer.push_cell(Some(e.kind().as_bytes()));
        writer.push_cell(Some(maybe_quote(e.name()).as_bytes()));
        writer.end_row();
    }
    ResultBody::Rows(writer.finish(RowsMetadata::new(columns)))
}

/// A listing of the session keyspace's elements, or of every keyspace's
/// (sorted by name) when no keyspace is in use.
fn listing_per_keyspace<'s>(
    schema: &'s Schema,
    session_keyspace: Option<&str>,
    elements: impl Fn(&'s KeyspaceDef) -> Vec<Element<'s>>,
) -> Result<ResultBody, QueryError> {
    let keyspaces: Vec<&KeyspaceDef> = match session_keyspace {
        Some(name) => vec![lookup_keyspace(schema, name)?],
        None => sorted_keyspaces(schema.keyspaces.values().map(|k| &**k)),
    };
    Ok(listing(keyspaces.into_iter().flat_map(elements)))
}

/// `keyspace_name, type, name, create_statement` rows.
fn elements_result(elements: Vec<Element<'_>>, internals: bool) -> ResultBody {
    let columns =
        vec![text_column("keyspace_name"), text_column("type"), text_column("name"), text_column("create_statement")];
    let mut writer = RowsWriter::new(columns.len());
    for e in elements {
        writer.push_cell(Some(maybe_quote(e.keyspace()).as_bytes()));
        writer.push_cell(Some(e.kind().as_bytes()));
        writer.push_cell(Some(maybe_quote(e.name()).as_bytes()));
        writer.push_cell(Some(e.create_statement(internals).as_bytes()));
        writer.end_row();
    }
    ResultBody::Rows(writer.finish(RowsMetadata::new(columns)))
}

fn lookup_keyspace<'s>(schema: &'s Schema, name: &str) -> Result<&'s KeyspaceDef, QueryError> {
    schema.keyspace(name).map(|k| &**k).ok_or_else(|| QueryError::Invalid(format!("'{name}' not found in keyspaces")))
}

/// The keyspace of a single-element DESCRIBE: the one written, else the
/// session's.
fn element_keyspace<'s>(
    schema: &'s Schema,
    written: Option<&str>,
    session_keyspace: Option<&str>,
) -> Result<&'s KeyspaceDef, QueryError> {
    let name = written
        .or(session_keyspace)
        .ok_or_else(|| QueryError::Invalid("No keyspace specified and no current keyspace".to_string()))?;
    lookup_keyspace(schema, name)
}

/// The keyspace, then (unless `only`) its types, functions, aggregates and
/// tables, each table followed by its indexes and views.
fn keyspace_elements(ks: &KeyspaceDef, only: bool) -> Vec<Element<'_>> {
    let mut out = vec![Element::Keyspace(ks)];
    if !only {
        out.extend(types_in_dependency_order(ks).into_iter().map(Element::Type));
        out.extend(sorted_tables(ks).into_iter().flat_map(with_indexes));
    }
    out
}

fn table_elements<'s>(
    schema: &'s Schema,
    name: &QualifiedName,
    session_keyspace: Option<&str>,
) -> Result<Vec<Element<'s>>, QueryError> {
    let ks = element_keyspace(schema, name.keyspace.as_deref(), session_keyspace)?;
    match ks.tables.get(&name.name) {
        Some(table) => Ok(with_indexes(table)),
        None => Err(QueryError::Invalid(format!("Table '{}' not found in keyspace '{}'", name.name, ks.name))),
    }
}

/// `DESCRIBE name` / `DESCRIBE ks.name`: a keyspace (for a bare name), else a
/// table (or index or view) of the keyspace, as Cassandra resolves it.
fn generic<'s>(
    schema: &'s Schema,
    name: &QualifiedName,
    session_keyspace: Option<&str>,
) -> Result<Vec<Element<'s>>, QueryError> {
    let ks_name = match &name.keyspace {
        Some(ks) => ks.as_str(),
        None => {
            if let Some(ks) = schema.keyspace(&name.name) {
                return Ok(keyspace_elements(ks, false));
            }
            session_keyspace.unwrap_or(&name.name)
        }
    };
    let ks = lookup_keyspace(schema, ks_name)?;
    match ks.tables.get(&name.name) {
        Some(table) => Ok(with_indexes(table)),
        None => match find_index(ks, &name.name) {
            Some(e) => Ok(vec![e]),
            None => Err(QueryError::Invalid(format!("'{}' not found in keyspace '{}'", name.name, ks.name))),
        },
    }
}

/// Keyspaces in Cassandra's `NAME_COMPARATOR` order.
fn sorted_keyspaces<'s>(keyspaces: impl Iterator<Item = &'s KeyspaceDef>) -> Vec<&'s KeyspaceDef> {
    let mut list: Vec<&KeyspaceDef> = keyspaces.collect();
    list.sort_by(|a, b| compare_ignore_case(&a.name, &b.name));
    list
}

fn sorted_tables(ks: &KeyspaceDef) -> Vec<&TableDef> {
    let mut list: Vec<&TableDef> = ks.tables.values().collect();
    list.sort_by(|a, b| compare_ignore_case(&a.name, &b.name));
    list
}

/// Java's `String.compareToIgnoreCase`.
fn compare_ignore_case(a: &str, b: &str) -> Ordering {
    let fold = |c: char| {
        let upper = c.to_uppercase().next().unwrap_or(c);
        upper.to_lowercase().next().unwrap_or(upper)
    };
    a.chars().map(fold).cmp(b.chars().map(fold))
}

/// The keyspace's types by name, each preceded by the types it uses
/// (Cassandra's `Types.sortedStream`).
fn types_in_dependency_order(ks: &KeyspaceDef) -> Vec<&UdtDef> {
    fn visit<'k>(ks: &'k KeyspaceDef, ty: &CqlType, seen: &mut BTreeSet<String>, out: &mut Vec<&'k UdtDef>) {
        match ty {
            CqlType::List { elem, .. } | CqlType::Set { elem, .. } => visit(ks, elem, seen, out),
            CqlType::Map { key, value, .. } => {
                visit(ks, key, seen, out);
                visit(ks, value, seen, out);
            }
            CqlType::Tuple(elems) => elems.iter().for_each(|e| visit(ks, e, seen, out)),
            CqlType::Udt { keyspace, name, .. } if *keyspace == ks.name => add(ks, name, seen, out),
            _ => {}
        }
    }
    fn add<'k>(ks: &'k KeyspaceDef, name: &str, seen: &mut BTreeSet<String>, out: &mut Vec<&'k UdtDef>) {
        if seen.contains(name) {
            return;
        }
        let Some(udt) = ks.types.get(name) else { return };
        seen.insert(name.to_string());
        for (_, ty) in &udt.fields {
            visit(ks, ty, seen, out);
        }
        out.push(udt);
    }
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for name in ks.types.keys() {
        add(ks, name, &mut seen, &mut out);
    }
    out
}

// ---------------------------------------------------------------------------
// DESCRIBE CLUSTER
// ---------------------------------------------------------------------------

fn cluster(schema: &Schema, session_keyspace: Option<&str>, node: &NodeInfo) -> ResultBody {
    let with_ranges = session_keyspace.is_some_and(|ks| !Schema::is_system(ks) && schema.keyspace(ks).is_some());
    let mut columns = vec![text_column("cluster"), text_column("partitioner"), text_column("snitch")];
    if with_ranges {
        columns.push(ColumnSpec {
            ty: CqlType::Map {
                key: Box::new(CqlType::Text),
                value: Box::new(CqlType::List { elem: Box::new(CqlType::Text), frozen: false }),
                frozen: false,
            },
            ..text_column("range_ownership")
        });
    }
    let mut writer = RowsWriter::new(columns.len());
    writer.push_cell(Some(node.cluster_name.as_bytes()));
    writer.push_cell(Some(trim_prefix(PARTITIONER, "org.apache.cassandra.dht.").as_bytes()));
    writer.push_cell(Some(snitch(node).as_bytes()));
    if with_ranges {
        writer.push_cell(Some(&range_ownership(node)));
    }
    writer.end_row();
    ResultBody::Rows(writer.finish(RowsMetadata::new(columns)))
}

fn trim_prefix<'a>(s: &'a str, prefix: &str) -> &'a str {
    s.strip_prefix(prefix).unwrap_or(s)
}

/// The snitch's class name without `org.apache.cassandra.locator.`. Shoal
/// supports SimpleSnitch (which always says datacenter1/rack1) and
/// GossipingPropertyFileSnitch; a node placed elsewhere uses the latter.
fn snitch(node: &NodeInfo) -> &'static str {
    if node.data_center == "datacenter1" && node.rack == "rack1" {
        "SimpleSnitch"
    } else {
        "GossipingPropertyFileSnitch"
    }
}

/// `map<text, list<text>>`: the right token of each of the ring's ranges
/// and its replicas (`/address:port`, as `InetAddressAndPort.toString`).
///
/// Cassandra collects the ranges, sorted, into a `java.util.HashMap`, so the
/// entries go out in that map's iteration order; it is reproduced here so
/// cqlsh prints the same lines in the same order.
fn range_ownership(node: &NodeInfo) -> Vec<u8> {
    let mut tokens = node.tokens.clone();
    tokens.sort_unstable();
    tokens.dedup();
    let endpoint = java_endpoint(node.listen_address, node.storage_port);
    let keys: Vec<String> = tokens.iter().map(|t| t.to_string()).collect();
    let order = java_hash_map_order(&keys);

    let mut out = Vec::new();
    out.extend_from_slice(&(keys.len() as i32).to_be_bytes());
    for i in order {
        let key = keys[i].as_bytes();
        out.extend_from_slice(&(key.len() as i32).to_be_bytes());
        out.extend_from_slice(key);
        // list<text> with one element.
        let mut list = Vec::new();
        list.extend_from_slice(&1i32.to_be_bytes());
        list.extend_from_slice(&(endpoint.len() as i32).to_be_bytes());
        list.extend_from_slice(endpoint.as_bytes());
        out.extend_from_slice(&(list.len() as i32).to_be_bytes());
        out.extend_from_slice(&list);
    }
    out
}

/// `InetAddressAndPort.toString()` of an address without a host name:
/// `/10.0.0.1:7000`, `/[0:0:0:0:0:0:0:1]:7000`.
fn java_endpoint(address: IpAddr, port: u16) -> String {
    match address {
        IpAddr::V4(a) => format!("/{a}:{port}"),
        IpAddr::V6(a) => {
            let groups: Vec<String> = a.segments().iter().map(|g| format!("{g:x}")).collect();
            format!("/[{}]:{port}", groups.join(":"))
        }
    }
}

/// The iteration order of a `java.util.HashMap<String, _>` (default
/// capacity and load factor) into which `keys` were put in order.
fn java_hash_map_order(keys: &[String]) -> Vec<usize> {
    let mut capacity = 16usize;
    while keys.len() > capacity / 4 * 3 {
        capacity *= 2;
    }
    let bucket = |key: &str| {
        let mut h: i32 = 0;
        for unit in key.encode_utf16() {
            h = h.wrapping_mul(31).wrapping_add(i32::from(unit));
        }
        let h = h as u32;
        ((h ^ (h >> 16)) as usize) & (capacity - 1)
    };
    let mut order: Vec<(usize, usize)> = keys.iter().enumerate().map(|(i, k)| (bucket(k), i)).collect();
    order.sort_unstable();
    order.into_iter().map(|(_, i)| i).collect()
}

// ---------------------------------------------------------------------------
// CREATE statements
// ---------------------------------------------------------------------------

/// Cassandra's reserved keywords (4.1's `reserved_keywords.txt`): names
/// equal to one of them (ignoring case) must be quoted.
#[rustfmt::skip]
const RESERVED: &[&str] = &[
    "add", "allow", "alter", "and", "apply", "asc", "authorize", "batch", "begin", "by", "columnfamily", "create",
    "delete", "desc", "describe", "drop", "entries", "execute", "from", "full", "grant", "if", "in", "index",
    "infinity", "insert", "into", "is", "keyspace", "limit", "materialized", "modify", "nan", "norecursive", "not",
    "null", "of", "on", "or", "order", "primary", "rename", "revoke", "schema", "select", "set", "table", "to",
    "token", "truncate", "unlogged", "update", "use", "using", "view", "where", "with",
];

/// `ColumnIdentifier.maybeQuote`: the name as CQL must spell it.
pub fn maybe_quote(name: &str) -> String {
    let mut chars = name.chars();
    let plain = matches!(chars.next(), Some('a'..='z'))
        && chars.all(|c| matches!(c, 'a'..='z' | '0'..='9' | '_'))
        && !RESERVED.contains(&name);
    if plain {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

/// `'text'` with quotes doubled (`CqlBuilder.appendWithSingleQuotes`).
fn single_quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// A type as Cassandra's `CQL3Type.toString` prints it in CREATE statements
/// (user types by their quoted-if-needed name, without keyspace).
pub fn type_cql(ty: &CqlType) -> String {
    fn frozen(frozen: bool, inner: String) -> String {
        if frozen {
            format!("frozen<{inner}>")
        } else {
            inner
        }
    }
    match ty {
        CqlType::List { elem, frozen: f } => frozen(*f, format!("list<{}>", type_cql(elem))),
        CqlType::Set { elem, frozen: f } => frozen(*f, format!("set<{}>", type_cql(elem))),
        CqlType::Map { key, value, frozen: f } => frozen(*f, format!("map<{}, {}>", type_cql(key), type_cql(value))),
        CqlType::Tuple(elems) => {
            let inner: Vec<String> = elems.iter().map(type_cql).collect();
            format!("frozen<tuple<{}>>", inner.join(", "))
        }
        CqlType::Udt { name, frozen: f, .. } => frozen(*f, maybe_quote(name)),
        simple => simple.to_cql(),
    }
}

/// `CREATE KEYSPACE ks WITH replication = {...}  AND durable_writes = true;`
/// (`KeyspaceMetadata.toCqlString`; the double space is Cassandra's).
pub fn create_keyspace_cql(ks: &KeyspaceDef) -> String {
    let mut out = format!("CREATE KEYSPACE {} WITH replication = {{'class': ", maybe_quote(&ks.name));
    match &ks.replication {
        Replication::Simple { replication_factor } => {
            let _ = write!(out, "'SimpleStrategy', 'replication_factor': '{replication_factor}'");
        }
        Replication::NetworkTopology { data_centers } => {
            out.push_str("'NetworkTopologyStrategy'");
            for (dc, rf) in data_centers {
                let _ = write!(out, ", {}: '{rf}'", single_quoted(dc));
            }
        }
        Replication::Local => out.push_str("'LocalStrategy'"),
    }
    let _ = write!(out, "}}  AND durable_writes = {};", ks.durable_writes);
    out
}

/// `CREATE TYPE ks.t (\n    f type,\n    ...\n);` (`UserType.toCqlString`).
pub fn create_type_cql(udt: &UdtDef) -> String {
    let mut out = format!("CREATE TYPE {}.{} (\n", maybe_quote(&udt.keyspace), maybe_quote(&udt.name));
    let fields: Vec<String> =
        udt.fields.iter().map(|(name, ty)| format!("    {} {}", maybe_quote(name), type_cql(ty))).collect();
    out.push_str(&fields.join(",\n"));
    out.push_str("\n);");
    out
}

/// `CREATE TABLE ks.t (...) WITH ...;` as `DESCRIBE TABLE` prints it
/// (`TableMetadata.toCqlString` without internals).
pub fn create_table_cql(t: &TableDef) -> String {
    table_cql(t, TableCql::Create)
}

/// What a table's CQL is for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum TableCql {
    Create,
    /// The options start with `ID = <table id>` (Cassandra would also
    /// re-create dropped columns, whose types Shoal does not keep).
    WithInternals,
    /// `VIRTUAL TABLE`: its clustering order and comment only, as Cassandra
    /// shows a virtual table.
    Virtual,
}

fn table_cql(t: &TableDef, how: TableCql) -> String {
    let head = if how == TableCql::Virtual { "VIRTUAL TABLE" } else { "CREATE TABLE" };
    let mut out = format!("{head} {}.{} (\n", maybe_quote(&t.keyspace), maybe_quote(&t.name));
    let partition_key = ordered(t, ColumnKind::PartitionKey);
    let clustering = ordered(t, ColumnKind::Clustering);
    let single_key = partition_key.len() == 1 && clustering.is_empty();

    let columns = create_order(t);
    for (i, c) in columns.iter().enumerate() {
        let _ = write!(out, "    {} {}", maybe_quote(&c.name), type_cql(&c.ty));
        if c.kind == ColumnKind::Static {
            out.push_str(" static");
        }
        if single_key && c.kind == ColumnKind::PartitionKey {
            out.push_str(" PRIMARY KEY");
        }
        if !single_key || i + 1 < columns.len() {
            out.push(',');
        }
        out.push('\n');
    }
    if !single_key {
        let names = |cols: &[&ColumnDef]| cols.iter().map(|c| maybe_quote(&c.name)).collect::<Vec<_>>().join(", ");
        out.push_str("    PRIMARY KEY (");
        if partition_key.len() > 1 {
            let _ = write!(out, "({})", names(&partition_key));
        } else {
            out.push_str(&names(&partition_key));
        }
        if !clustering.is_empty() {
            let _ = write!(out, ", {}", names(&clustering));
        }
        out.push_str(")\n");
    }
    out.push_str(") WITH ");

    let mut options = Vec::new();
    if how == TableCql::WithInternals {
        options.push(format!("ID = {}", t.id));
    }
    if !clustering.is_empty() {
        let order: Vec<String> = clustering
            .iter()
            .map(|c| {
                let dir = if c.order == ClusteringOrder::Desc { "DESC" } else { "ASC" };
                format!("{} {dir}", maybe_quote(&c.name))
            })
            .collect();
        options.push(format!("CLUSTERING ORDER BY ({})", order.join(", ")));
    }
    if how == TableCql::Virtual {
        options.push(format!("comment = {}", single_quoted(&t.options.comment)));
    } else {
        options.extend(table_options(t));
    }
    out.push_str(&options.join("\n    AND "));
    out.push(';');
    out
}

/// Key columns of one kind, by position.
fn ordered(t: &TableDef, kind: ColumnKind) -> Vec<&ColumnDef> {
    let mut cols: Vec<&ColumnDef> = t.columns.iter().filter(|c| c.kind == kind).collect();
    cols.sort_by_key(|c| c.position);
    cols
}

/// Cassandra's `allColumnsInCreateOrder`: partition key, clustering, then
/// static columns and regular columns, each group with its single-cell
/// columns first and its multi-cell (non-frozen collections and UDTs) after,
/// by name (bytes).
fn create_order(t: &TableDef) -> Vec<&ColumnDef> {
    let mut out = ordered(t, ColumnKind::PartitionKey);
    out.extend(ordered(t, ColumnKind::Clustering));
    for kind in [ColumnKind::Static, ColumnKind::Regular] {
        let mut cols: Vec<&ColumnDef> = t.columns.iter().filter(|c| c.kind == kind).collect();
        cols.sort_by(|a, b| (a.ty.is_multi_cell(), a.name.as_bytes()).cmp(&(b.ty.is_multi_cell(), b.name.as_bytes())));
        out.extend(cols);
    }
    out
}

/// The `WITH` options after the clustering order, in Cassandra 4.1's order
/// (`TableParams.appendCqlTo`), options Shoal does not act on at their
/// defaults unless set.
fn table_options(t: &TableDef) -> Vec<String> {
    let o = &t.options;
    let extra = |name: &str| o.extra.get(name).map(|v| unquote(v));
    let double = |name: &str, default: f64| {
        java_double(extra(name).and_then(|v| v.trim().parse::<f64>().ok()).unwrap_or(default))
    };
    let int = |name: &str, default: i64| extra(name).and_then(|v| v.trim().parse::<i64>().ok()).unwrap_or(default);
    let retry = |name: &str| single_quoted(&speculative_retry(extra(name).as_deref().unwrap_or("99p")));
    let cdc = extra("cdc").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    let read_repair = extra("read_repair").map(|v| v.to_ascii_uppercase()).unwrap_or_else(|| "BLOCKING".to_string());
    let memtable = extra("memtable").unwrap_or_else(|| "default".to_string());
    vec![
        format!("additional_write_policy = {}", retry("additional_write_policy")),
        format!("bloom_filter_fp_chance = {}", double("bloom_filter_fp_chance", 0.01)),
        format!("caching = {}", cql_map(&caching_map(&o.caching))),
        format!("cdc = {cdc}"),
        format!("comment = {}", single_quoted(&o.comment)),
        format!("compaction = {}", cql_map(&compaction_map(&o.compaction))),
        format!("compression = {}", cql_map(&compression_map(&o.compression))),
        format!("memtable = {}", single_quoted(&memtable)),
        format!("crc_check_chance = {}", double("crc_check_chance", 1.0)),
        format!("default_time_to_live = {}", o.default_time_to_live),
        "extensions = {}".to_string(),
        format!("gc_grace_seconds = {}", o.gc_grace_seconds),
        format!("max_index_interval = {}", int("max_index_interval", 2048)),
        format!("memtable_flush_period_in_ms = {}", int("memtable_flush_period_in_ms", 0)),
        format!("min_index_interval = {}", int("min_index_interval", 128)),
        format!("read_repair = {}", single_quoted(&read_repair)),
        format!("speculative_retry = {}", retry("speculative_retry")),
    ]
}

/// `{'k': 'v', ...}` sorted by key (`CqlBuilder.append(Map)`).
fn cql_map(map: &std::collections::BTreeMap<String, String>) -> String {
    let entries: Vec<String> = map.iter().map(|(k, v)| format!("{}: {}", single_quoted(k), single_quoted(v))).collect();
    format!("{{{}}}", entries.join(", "))
}

type OptionMap = std::collections::BTreeMap<String, String>;

/// `CachingParams.asMap`: both keys, defaults filled in.
fn caching_map(map: &OptionMap) -> OptionMap {
    let mut out = map.clone();
    out.entry("keys".to_string()).or_insert_with(|| "ALL".to_string());
    out.entry("rows_per_partition".to_string()).or_insert_with(|| "NONE".to_string());
    out
}

/// `CompactionParams.asMap`: the full class name, and the thresholds every
/// built-in strategy has.
fn compaction_map(map: &OptionMap) -> OptionMap {
    let mut out = map.clone();
    if let Some(class) = out.get_mut("class") {
        if !class.contains('.') {
            *class = format!("org.apache.cassandra.db.compaction.{class}");
        }
    }
    out.entry("max_threshold".to_string()).or_insert_with(|| "32".to_string());
    out.entry("min_threshold".to_string()).or_insert_with(|| "4".to_string());
    out
}

/// `CompressionParams.asMap`: `{'enabled': 'false'}` when disabled, else the
/// full class name and the chunk length.
fn compression_map(map: &OptionMap) -> OptionMap {
    let mut out = map.clone();
    if out.get("enabled").is_some_and(|v| v.eq_ignore_ascii_case("false")) {
        let mut disabled = OptionMap::new();
        disabled.insert("enabled".to_string(), "false".to_string());
        return disabled;
    }
    out.remove("enabled");
    if let Some(class) = out.remove("sstable_compression") {
        out.entry("class".to_string()).or_insert(class);
    }
    if let Some(kb) = out.remove("chunk_length_kb") {
        out.entry("chunk_length_in_kb".to_string()).or_insert(kb);
    }
    let class = out.entry("class".to_string()).or_insert_with(|| "LZ4Compressor".to_string());
    if !class.contains('.') {
        *class = format!("org.apache.cassandra.io.compress.{class}");
    }
    out.entry("chunk_length_in_kb".to_string()).or_insert_with(|| "16".to_string());
    out
}

/// An option value as raw text: a `'quoted'` value is unquoted.
fn unquote(v: &str) -> String {
    let t = v.trim();
    if t.len() >= 2 && t.starts_with('\'') && t.ends_with('\'') {
        t[1..t.len() - 1].replace("''", "'")
    } else {
        t.to_string()
    }
}

/// A speculative-retry policy as Cassandra prints it: `99p`, `50ms`,
/// `ALWAYS`, `NEVER`, `MIN(99p,50ms)`.
fn speculative_retry(v: &str) -> String {
    let t = v.trim();
    let lower = t.to_ascii_lowercase();
    if lower == "always" || lower == "never" || lower == "none" {
        return if lower == "always" { "ALWAYS".to_string() } else { "NEVER".to_string() };
    }
    for func in ["min", "max"] {
        if let Some(inner) =
            lower.strip_prefix(func).and_then(|r| r.strip_prefix('(')).and_then(|r| r.strip_suffix(')'))
        {
            let parts: Vec<String> = inner.split(',').map(speculative_retry).collect();
            return format!("{}({})", func.to_ascii_uppercase(), parts.join(","));
        }
    }
    let percentile = lower.strip_suffix("percentile").or_else(|| lower.strip_suffix('p'));
    if let Some(n) = percentile.and_then(|n| n.trim().parse::<f64>().ok()) {
        return format!("{}p", decimal_format_4(n));
    }
    if let Some(n) = lower.strip_suffix("ms").and_then(|n| n.trim().parse::<f64>().ok()) {
        return format!("{}ms", n as i64);
    }
    t.to_string()
}

/// Java's `new DecimalFormat("#.####").format(v)` (half-even rounding aside).
fn decimal_format_4(v: f64) -> String {
    let s = format!("{v:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() || s == "-0" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

/// Java's `Double.toString`: `0.01`, `1.0`, `1.0E-4`, `1.5E7`.
fn java_double(v: f64) -> String {
    if v.is_nan() {
        return "NaN".to_string();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity" } else { "-Infinity" }.to_string();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0.0" } else { "0.0" }.to_string();
    }
    let abs = v.abs();
    if (1e-3..1e7).contains(&abs) {
        let s = format!("{v}");
        if s.contains('.') {
            s
        } else {
            format!("{s}.0")
        }
    } else {
        let s = format!("{v:e}");
        let (mantissa, exponent) = s.split_once('e').unwrap_or((&s, "0"));
        let mantissa = if mantissa.contains('.') { mantissa.to_string() } else { format!("{mantissa}.0") };
        format!("{mantissa}E{exponent}")
    }
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use cql_protocol::Rows;
    use types::schema::TableOptions;
    use uuid::Uuid;

    use super::*;

    fn col(name: &str, ty: CqlType, kind: ColumnKind, position: u32, order: ClusteringOrder, id: u16) -> ColumnDef {
        ColumnDef { name: name.to_string(), ty, kind, position, order, id }
    }

    fn map_text_int() -> CqlType {
        CqlType::Map { key: Box::new(CqlType::Text), value: Box::new(CqlType::Int), frozen: false }
    }

    fn events_table() -> TableDef {
        use ClusteringOrder::{Asc, Desc};
        use ColumnKind::*;
        let mut options =
            TableOptions { gc_grace_seconds: 3600, default_time_to_live: 86400, ..TableOptions::default() };
        options.comment = "Bob's events".to_string();
        options.extra.insert("bloom_filter_fp_chance".to_string(), "0.1".to_string());
        options.extra.insert("speculative_retry".to_string(), "95PERCENTILE".to_string());
        let mut t = TableDef {
            keyspace: "shop".to_string(),
            name: "events".to_string(),
            id: Uuid::nil(),
            columns: vec![
                col("tenant", CqlType::Text, PartitionKey, 0, Asc, 0),
                col("day", CqlType::Date, PartitionKey, 1, Asc, 1),
                col("at", CqlType::TimeUuid, Clustering, 0, Desc, 2),
                col("seq", CqlType::Int, Clustering, 1, Asc, 3),
                col("owner", CqlType::Text, Static, 0, Asc, 4),
                col("attrs", map_text_int(), Regular, 0, Asc, 5),
                col("payload", CqlType::Blob, Regular, 0, Asc, 6),
                col("Score", CqlType::Double, Regular, 0, Asc, 7),
                col(
                    "addr",
                    CqlType::Udt {
                        keyspace: "shop".to_string(),
                        name: "address".to_string(),
                        fields: vec![],
                        frozen: true,
                    },
                    Regular,
                    0,
                    Asc,
                    8,
                ),
            ],
            options,
            next_column_id: 9,
            dropped_columns: BTreeMap::new(),
            indexes: Vec::new(),
        };
        t.sort_columns();
        t
    }

    fn users_table() -> TableDef {
        TableDef {
            keyspace: "shop".to_string(),
            name: "Users".to_string(),
            id: Uuid::nil(),
            columns: vec![
                col("id", CqlType::Uuid, ColumnKind::PartitionKey, 0, ClusteringOrder::Asc, 0),
                col("name", CqlType::Text, ColumnKind::Regular, 0, ClusteringOrder::Asc, 1),
            ],
            options: TableOptions::default(),
            next_column_id: 2,
            dropped_columns: BTreeMap::new(),
            indexes: Vec::new(),
        }
    }

    fn shop() -> KeyspaceDef {
        let mut tables = BTreeMap::new();
        for t in [events_table(), users_table()] {
            tables.insert(t.name.clone(), t);
        }
        let address = UdtDef {
            keyspace: "shop".to_string(),
            name: "address".to_string(),
            fields: vec![
                ("street".to_string(), CqlType::Text),
                (
                    "geo".to_string(),
                    CqlType::Udt {
                        keyspace: "shop".to_string(),
                        name: "point".to_string(),
                        fields: vec![],
                        frozen: true,
                    },
                ),
            ],
        };
        let point = UdtDef {
            keyspace: "shop".to_string(),
            name: "point".to_string(),
            fields: vec![("x".to_string(), CqlType::Double), ("y".to_string(), CqlType::Double)],
        };
        let mut types = BTreeMap::new();
        types.insert(address.name.clone(), address);
        types.insert(point.name.clone(), point);
        KeyspaceDef {
            name: "shop".to_string(),
            replication: Replication::Simple { replication_factor: 3 },
            durable_writes: true,
            tables,
            types,
        }
    }

    fn schema() -> Schema {
        let mut keyspaces = BTreeMap::new();
        for ks in crate::system::keyspaces() {
            keyspaces.insert(ks.name.clone(), Arc::new(ks));
        }
        let mut dcs = BTreeMap::new();
        dcs.insert("dc1".to_string(), 3);
        let other = KeyspaceDef {
            name: "Archive".to_string(),
            replication: Replication::NetworkTopology { data_centers: dcs },
            durable_writes: false,
            tables: BTreeMap::new(),
            types: BTreeMap::new(),
        };
        keyspaces.insert(other.name.clone(), Arc::new(other));
        keyspaces.insert("shop".to_string(), Arc::new(shop()));
        Schema { keyspaces, version: Uuid::nil() }
    }

    fn node() -> NodeInfo {
        NodeInfo {
            cluster_name: "Test Cluster".to_string(),
            host_id: Uuid::nil(),
            listen_address: "127.0.0.1".parse().unwrap(),
            rpc_address: "127.0.0.1".parse().unwrap(),
            native_port: 9042,
            storage_port: 7000,
            data_center: "datacenter1".to_string(),
            rack: "rack1".to_string(),
            tokens: vec![3074457345618258602, -9223372036854775808, -3074457345618258603],
            gossip_generation: 1,
        }
    }

    fn run(session: Option<&str>, target: DescribeTarget) -> Result<Rows, QueryError> {
        run_with(session, target, false)
    }

    fn run_with(session: Option<&str>, target: DescribeTarget, with_internals: bool) -> Result<Rows, QueryError> {
        match execute(&schema(), session, &Describe { target, with_internals }, &node())? {
            ResultBody::Rows(rows) => Ok(rows),
            other => panic!("not rows: {other:?}"),
        }
    }

    fn text_rows(rows: &Rows) -> Vec<Vec<String>> {
        rows.iter()
            .map(|r| {
                r.unwrap().into_iter().map(|c| String::from_utf8(c.expect("non-null cell").to_vec()).unwrap()).collect()
            })
            .collect()
    }

    fn names(rows: &Rows) -> Vec<&str> {
        rows.metadata.columns.iter().map(|c| c.name.as_str()).collect()
    }

    fn q(keyspace: Option<&str>, name: &str) -> QualifiedName {
        QualifiedName { keyspace: keyspace.map(str::to_string), name: name.to_string() }
    }

    fn invalid(result: Result<Rows, QueryError>) -> String {
        match result {
            Err(QueryError::Invalid(msg)) => msg,
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    const EVENTS: &str = "CREATE TABLE shop.events (
    tenant text,
    day date,
    at timeuuid,
    seq int,
    owner text static,
    \"Score\" double,
    addr frozen<address>,
    payload blob,
    attrs map<text, int>,
    PRIMARY KEY ((tenant, day), at, seq)
) WITH CLUSTERING ORDER BY (at DESC, seq ASC)
    AND additional_write_policy = '99p'
    AND bloom_filter_fp_chance = 0.1
    AND caching = {'keys': 'ALL', 'rows_per_partition': 'NONE'}
    AND cdc = false
    AND comment = 'Bob''s events'
    AND compaction = {'class': 'org.apache.cassandra.db.compaction.SizeTieredCompactionStrategy', 'max_threshold': '32', 'min_threshold': '4'}
    AND compression = {'chunk_length_in_kb': '16', 'class': 'org.apache.cassandra.io.compress.LZ4Compressor'}
    AND memtable = 'default'
    AND crc_check_chance = 1.0
    AND default_time_to_live = 86400
    AND extensions = {}
    AND gc_grace_seconds = 3600
    AND max_index_interval = 2048
    AND memtable_flush_period_in_ms = 0
    AND min_index_interval = 128
    AND read_repair = 'BLOCKING'
    AND speculative_retry = '95p';";

    const USERS: &str = "CREATE TABLE shop.\"Users\" (
    id uuid PRIMARY KEY,
    name text
) WITH additional_write_policy = '99p'
    AND bloom_filter_fp_chance = 0.01
    AND caching = {'keys': 'ALL', 'rows_per_partition': 'NONE'}
    AND cdc = false
    AND comment = ''
    AND compaction = {'class': 'org.apache.cassandra.db.compaction.SizeTieredCompactionStrategy', 'max_threshold': '32', 'min_threshold': '4'}
    AND compression = {'chunk_length_in_kb': '16', 'class': 'org.apache.cassandra.io.compress.LZ4Compressor'}
    AND memtable = 'default'
    AND crc_check_chance = 1.0
    AND default_time_to_live = 0
    AND extensions = {}
    AND gc_grace_seconds = 864000
    AND max_index_interval = 2048
    AND memtable_flush_period_in_ms = 0
    AND min_index_interval = 128
    AND read_repair = 'BLOCKING'
    AND speculative_retry = '99p';";

    #[test]
    fn create_table_matches_cassandra() {
        assert_eq!(create_table_cql(&events_table()), EVENTS);
        assert_eq!(create_table_cql(&users_table()), USERS);
    }

    #[test]
    fn create_keyspace_and_type_match_cassandra() {
        let s = schema();
        assert_eq!(
            create_keyspace_cql(s.keyspace("shop").unwrap()),
            "CREATE KEYSPACE shop WITH replication = {'class': 'SimpleStrategy', 'replication_factor': '3'}  AND durable_writes = true;"
        );
        assert_eq!(
            create_keyspace_cql(s.keyspace("Archive").unwrap()),
            "CREATE KEYSPACE \"Archive\" WITH replication = {'class': 'NetworkTopologyStrategy', 'dc1': '3'}  AND durable_writes = false;"
        );
        assert_eq!(
            create_keyspace_cql(s.keyspace("system").unwrap()),
            "CREATE KEYSPACE system WITH replication = {'class': 'LocalStrategy'}  AND durable_writes = true;"
        );
        let shop = shop();
        assert_eq!(
            create_type_cql(&shop.types["address"]),
            "CREATE TYPE shop.address (\n    street text,\n    geo frozen<point>\n);"
        );
    }

    #[test]
    fn with_internals_starts_with_the_id() {
        let rows = run_with(Some("shop"), DescribeTarget::Table(q(None, "Users")), true).unwrap();
        let stmt = &text_rows(&rows)[0][3];
        assert!(stmt
            .contains(") WITH ID = 00000000-0000-0000-0000-000000000000\n    AND additional_write_policy = '99p'\n"));
    }

    #[test]
    fn describe_keyspaces_lists_all_sorted_ignoring_case() {
        let rows = run(None, DescribeTarget::Keyspaces).unwrap();
        assert_eq!(names(&rows), ["keyspace_name", "type", "name"]);
        assert_eq!(rows.metadata.columns[0].keyspace, "system");
        assert_eq!(rows.metadata.columns[0].table, "describe");
        let got: Vec<String> = text_rows(&rows).into_iter().map(|r| r[2].clone()).collect();
        assert_eq!(
            got,
            [
                "\"Archive\"",
                "shop",
                "system",
                "system_auth",
                "system_distributed",
                "system_schema",
                "system_traces",
                "system_views",
                "system_virtual_schema"
            ]
        );
        assert_eq!(text_rows(&rows)[1], ["shop", "keyspace", "shop"]);
    }

    #[test]
    fn describe_tables_in_and_out_of_a_keyspace() {
        let rows = run(Some("shop"), DescribeTarget::Tables).unwrap();
        assert_eq!(text_rows(&rows), [["shop", "table", "events"], ["shop", "table", "\"Users\""]]);
        let rows = run(None, DescribeTarget::Tables).unwrap();
        let got: Vec<(String, String)> = text_rows(&rows).into_iter().map(|r| (r[0].clone(), r[2].clone())).collect();
        assert_eq!(got[0], ("shop".to_string(), "events".to_string()));
        assert_eq!(got[1], ("shop".to_string(), "\"Users\"".to_string()));
        assert_eq!(got[2], ("system".to_string(), "local".to_string()));
        assert!(got.iter().any(|(k, n)| k == "system_schema" && n == "tables"));
        assert_eq!(invalid(run(Some("nope"), DescribeTarget::Tables)), "'nope' not found in keyspaces");
    }

    #[test]
    fn describe_types_functions_aggregates() {
        let rows = run(Some("shop"), DescribeTarget::Types).unwrap();
        assert_eq!(text_rows(&rows), [["shop", "type", "address"], ["shop", "type", "point"]]);
        let rows = run(Some("shop"), DescribeTarget::Functions).unwrap();
        assert_eq!(rows.rows_count, 0);
        assert_eq!(names(&rows), ["keyspace_name", "type", "name"]);
        let rows = run(None, DescribeTarget::Aggregates).unwrap();
        assert_eq!(rows.rows_count, 0);
        let rows = run(Some("shop"), DescribeTarget::Type(q(None, "point"))).unwrap();
        assert_eq!(text_rows(&rows)[0][3], "CREATE TYPE shop.point (\n    x double,\n    y double\n);");
        assert_eq!(
            invalid(run(Some("shop"), DescribeTarget::Type(q(None, "nope")))),
            "User defined type 'nope' not found in 'shop'"
        );
    }

    #[test]
    fn describe_keyspace_lists_keyspace_types_then_tables() {
        let rows = run(None, DescribeTarget::Keyspace { keyspace: Some("shop".into()), only: false }).unwrap();
        assert_eq!(names(&rows), ["keyspace_name", "type", "name", "create_statement"]);
        let rows = text_rows(&rows);
        let kinds: Vec<(&str, &str)> = rows.iter().map(|r| (r[1].as_str(), r[2].as_str())).collect();
        assert_eq!(
            kinds,
            [("keyspace", "shop"), ("type", "point"), ("type", "address"), ("table", "events"), ("table", "\"Users\"")]
        );
        assert_eq!(rows[3][3], EVENTS);
        assert_eq!(rows[4][3], USERS);

        let rows = run(Some("shop"), DescribeTarget::Keyspace { keyspace: None, only: true }).unwrap();
        assert_eq!(rows.rows_count, 1);
        assert_eq!(
            invalid(run(None, DescribeTarget::Keyspace { keyspace: None, only: false })),
            "No keyspace specified and no current keyspace"
        );
        assert_eq!(
            invalid(run(None, DescribeTarget::Keyspace { keyspace: Some("nope".into()), only: false })),
            "'nope' not found in keyspaces"
        );
    }

    #[test]
    fn describe_virtual_keyspace_as_cassandra() {
        // Cassandra 5.0.9's cqlsh `DESCRIBE KEYSPACE system_virtual_schema`.
        let rows = run(None, DescribeTarget::Keyspace { keyspace: Some("system_virtual_schema".into()), only: false })
            .unwrap();
        let rows = text_rows(&rows);
        assert_eq!(
            rows[0][3],
            "/*\nWarning: Keyspace system_virtual_schema is a virtual keyspace and cannot be recreated with CQL.\n\
             Structure, for reference:\nVIRTUAL KEYSPACE system_virtual_schema;\n*/"
        );
        let keyspaces = rows.iter().find(|r| r[2] == "keyspaces").unwrap();
        assert_eq!(
            keyspaces[3],
            "/*\nWarning: Table system_virtual_schema.keyspaces is a virtual table and cannot be recreated with CQL.\n\
             Structure, for reference:\nVIRTUAL TABLE system_virtual_schema.keyspaces (\n    keyspace_name text PRIMARY KEY\n\
             ) WITH comment = 'virtual keyspace definitions';\n*/"
        );
        let columns = rows.iter().find(|r| r[2] == "columns").unwrap();
        assert!(
            columns[3].ends_with(
                "    PRIMARY KEY (keyspace_name, table_name, column_name)\n\
                 ) WITH CLUSTERING ORDER BY (table_name ASC, column_name ASC)\n    AND comment = 'virtual column definitions';\n*/"
            ),
            "{}",
            columns[3]
        );
    }

    #[test]
    fn describe_schema_skips_system_keyspaces_unless_full() {
        let rows = run(None, DescribeTarget::Schema { full: false }).unwrap();
        let keyspaces: Vec<String> =
            text_rows(&rows).into_iter().filter(|r| r[1] == "keyspace").map(|r| r[2].clone()).collect();
        assert_eq!(keyspaces, ["\"Archive\"", "shop"]);
        let rows = run(None, DescribeTarget::Schema { full: true }).unwrap();
        let keyspaces = text_rows(&rows).into_iter().filter(|r| r[1] == "keyspace").count();
        assert_eq!(keyspaces, 9);
    }

    #[test]
    fn describe_table_and_generic_names() {
        let rows = run(None, DescribeTarget::Table(q(Some("shop"), "events"))).unwrap();
        assert_eq!(text_rows(&rows), [["shop", "table", "events", EVENTS]]);
        assert_eq!(
            invalid(run(Some("shop"), DescribeTarget::Table(q(None, "nope")))),
            "Table 'nope' not found in keyspace 'shop'"
        );
        assert_eq!(
            invalid(run(None, DescribeTarget::Table(q(None, "events")))),
            "No keyspace specified and no current keyspace"
        );
        // A bare name is a keyspace first, then a table of the session keyspace.
        let rows = run(Some("shop"), DescribeTarget::Generic(q(None, "shop"))).unwrap();
        assert_eq!(text_rows(&rows)[0][1], "keyspace");
        let rows = run(Some("shop"), DescribeTarget::Generic(q(None, "events"))).unwrap();
        assert_eq!(text_rows(&rows)[0][3], EVENTS);
        let rows = run(None, DescribeTarget::Generic(q(Some("shop"), "Users"))).unwrap();
        assert_eq!(text_rows(&rows)[0][3], USERS);
        assert_eq!(
            invalid(run(Some("shop"), DescribeTarget::Generic(q(None, "nope")))),
            "'nope' not found in keyspace 'shop'"
        );
        assert_eq!(invalid(run(None, DescribeTarget::Generic(q(None, "nope")))), "'nope' not found in keyspaces");
        assert_eq!(
            invalid(run(Some("shop"), DescribeTarget::Index(q(None, "idx")))),
            "Table for existing index 'idx' not found in 'shop'"
        );
        assert_eq!(
            invalid(run(Some("shop"), DescribeTarget::MaterializedView(q(None, "mv")))),
            "Materialized view 'mv' not found in 'shop'"
        );
        assert_eq!(
            invalid(run(Some("shop"), DescribeTarget::Function(q(None, "f")))),
            "User defined function 'f' not found in 'shop'"
        );
        assert_eq!(
            invalid(run(Some("shop"), DescribeTarget::Aggregate(q(None, "a")))),
            "User defined aggregate 'a' not found in 'shop'"
        );
    }

    #[test]
    fn describe_cluster() {
        let rows = run(None, DescribeTarget::Cluster).unwrap();
        assert_eq!(names(&rows), ["cluster", "partitioner", "snitch"]);
        assert_eq!(text_rows(&rows), [["Test Cluster", "Murmur3Partitioner", "SimpleSnitch"]]);
        let rows = run(Some("system"), DescribeTarget::Cluster).unwrap();
        assert_eq!(rows.metadata.columns.len(), 3);

        let rows = run(Some("shop"), DescribeTarget::Cluster).unwrap();
        assert_eq!(names(&rows), ["cluster", "partitioner", "snitch", "range_ownership"]);
        let cells = rows.iter().next().unwrap().unwrap();
        let map = types::Value::deserialize(&rows.metadata.columns[3].ty, &cells[3].clone().unwrap()).unwrap();
        let types::Value::Map(entries) = map else { panic!("not a map") };
        assert_eq!(entries.len(), 3);
        for (_, v) in &entries {
            assert_eq!(v, &types::Value::List(vec![types::Value::Text("/127.0.0.1:7000".into())]));
        }
    }

    #[test]
    fn quoting_and_numbers() {
        assert_eq!(maybe_quote("abc_1"), "abc_1");
        assert_eq!(maybe_quote("Abc"), "\"Abc\"");
        assert_eq!(maybe_quote("1a"), "\"1a\"");
        assert_eq!(maybe_quote("select"), "\"select\"");
        assert_eq!(maybe_quote("a\"b"), "\"a\"\"b\"");
        assert_eq!(java_double(0.01), "0.01");
        assert_eq!(java_double(1.0), "1.0");
        assert_eq!(java_double(0.0001), "1.0E-4");
        assert_eq!(speculative_retry("99PERCENTILE"), "99p");
        assert_eq!(speculative_retry("99.5p"), "99.5p");
        assert_eq!(speculative_retry("50ms"), "50ms");
        assert_eq!(speculative_retry("always"), "ALWAYS");
        assert_eq!(java_endpoint("::1".parse().unwrap(), 7000), "/[0:0:0:0:0:0:0:1]:7000");
    }

    #[test]
    fn hash_map_order_matches_java() {
        // Java: new HashMap<>() with "a", "b", "c" put in reverse order
        // iterates a, b, c (hash 97, 98, 99 in buckets 1, 2, 3).
        let keys: Vec<String> = ["c", "b", "a"].iter().map(|s| s.to_string()).collect();
        assert_eq!(java_hash_map_order(&keys), [2, 1, 0]);
    }
}
