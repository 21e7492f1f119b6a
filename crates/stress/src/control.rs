//! The setup of a `-transport` (TLS) run without the driver, whose TLS is not
//! built in (its rustls feature would add a second crypto library): one more
//! connection of the lean client (`native.rs`) creates the schema, waits for
//! schema agreement, truncates, and reads the ring from the system tables, as
//! a driver's control connection does:
//! - nodes: `system.local` (the node connected to) and `system.peers` (each
//!   peer at its `rpc_address`, or its `peer` address when that is unset), all
//!   on the port connected to;
//! - tokens: each node's `tokens`;
//! - replicas: the keyspace's `replication` from `system_schema.keyspaces`,
//!   placed as SimpleStrategy and NetworkTopologyStrategy place them (walking
//!   the ring from a token, the next distinct nodes; per data center for the
//!   latter; racks are not considered, so with several racks in a data center
//!   a request may go to a non-replica, which forwards it: slower, never wrong).
//!
//! Invariants: nothing read is trusted (a cell that does not decode is an
//! error naming the table and column); every node index in the ring is a
//! position in the node list returned with it.

use std::collections::{BTreeMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use cql_protocol::request::{QueryParams, Request};
use cql_protocol::response::{Response, ResultBody, Rows};

use crate::native::{describe, Conn, Routes};
use crate::settings::{Replication, Settings};
use crate::transport::Tls;

/// How long schema versions may differ after a schema change before the run goes on
/// anyway (with a warning).
const SCHEMA_AGREEMENT: Duration = Duration::from_secs(30);

/// The setup connection.
pub struct Control {
    conn: Arc<Conn>,
    addr: SocketAddr,
}

impl Control {
    /// Connects to the first of `hosts` (`host:port`) that answers, through TLS,
    /// logging in with `-mode user= password=` when asked.
    pub async fn connect(hosts: &[String], settings: &Settings, tls: &Tls) -> Result<Control, String> {
        let auth = settings.user.clone().map(|u| (u, settings.password.clone().unwrap_or_default()));
        let mut errors = Vec::new();
        for host in hosts {
            let addrs = match tokio::net::lookup_host(host.as_str()).await {
                Ok(addrs) => addrs.collect::<Vec<_>>(),
                Err(e) => {
                    errors.push(format!("{host}: {e}"));
                    continue;
                }
            };
            for addr in addrs {
                match Conn::open(addr, auth.as_ref(), Some(tls)).await {
                    Ok(conn) => return Ok(Control { conn, addr }),
                    Err(e) => errors.push(e),
                }
            }
        }
        Err(format!("cannot connect: {}", errors.join("; ")))
    }

    /// The setup connection's TLS protocol version and cipher suite.
    pub fn tls(&self) -> Option<&str> {
        self.conn.tls()
    }

    /// Runs one statement: the rows of a SELECT, `None` for anything else.
    pub async fn query(&self, cql: &str) -> Result<Option<Rows>, String> {
        let request = Request::Query { query: cql.to_string(), params: QueryParams::new(types::Consistency::One) };
        match self.conn.request(&request).await? {
            Response::Result(ResultBody::Rows(rows)) => Ok(Some(rows)),
            Response::Result(_) => Ok(None),
            other => Err(format!("{cql}: {}", describe(&other))),
        }
    }

    /// The rows of a SELECT, by column name.
    async fn select(&self, cql: &str) -> Result<Table, String> {
        match self.query(cql).await? {
            Some(rows) => Table::new(cql, &rows),
            None => Err(format!("{cql}: the answer holds no rows")),
        }
    }

    /// Waits until every node reports the same schema version (after a schema
    /// change); past [`SCHEMA_AGREEMENT`] it warns and goes on.
    pub async fn await_schema_agreement(&self) -> Result<(), String> {
        let deadline = Instant::now() + SCHEMA_AGREEMENT;
        loop {
            let mut versions = HashSet::new();
            for cql in ["SELECT schema_version FROM system.local", "SELECT schema_version FROM system.peers"] {
                let table = self.select(cql).await?;
                for row in 0..table.rows.len() {
                    if let Some(version) = table.cell(row, "schema_version")? {
                        versions.insert(version);
                    }
                }
            }
            if versions.len() <= 1 {
                return Ok(());
            }
            if Instant::now() >= deadline {
                eprintln!(
                    "shoal stress: warning: the nodes report {} schema versions after {} s; going on",
                    versions.len(),
                    SCHEMA_AGREEMENT.as_secs()
                );
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The nodes (the one connected to first) and the routes of `settings`' keyspace.
    pub async fn topology(&self, settings: &Settings) -> Result<(Vec<SocketAddr>, Routes), String> {
        let port = self.addr.port();
        let local = self.select("SELECT data_center, tokens FROM system.local").await?;
        let peers = self.select("SELECT peer, rpc_address, data_center, tokens FROM system.peers").await?;
        let mut nodes = Vec::new();
        if !local.rows.is_empty() {
            nodes.push(NodeRing { addr: self.addr, dc: local.text(0, "data_center")?, tokens: local.tokens(0)? });
        }
        for row in 0..peers.rows.len() {
            let ip = match peers.inet(row, "rpc_address")? {
                Some(ip) if !ip.is_unspecified() => ip,
                _ => match peers.inet(row, "peer")? {
                    Some(ip) => ip,
                    None => continue,
                },
            };
            let addr = SocketAddr::new(ip, port);
            if nodes.iter().any(|n| n.addr == addr) {
                continue;
            }
            nodes.push(NodeRing { addr, dc: peers.text(row, "data_center")?, tokens: peers.tokens(row)? });
        }
        let strategy = self.strategy(settings).await?;
        let prefer_dc = settings.nodes.dc.as_deref();
        let ring = replicas(&nodes, &strategy)
            .into_iter()
            .map(|(token, replicas)| {
                let replicas = replicas
                    .into_iter()
                    .map(|i| {
                        let local = prefer_dc.is_none_or(|dc| nodes[i as usize].dc.as_deref() == Some(dc));
                        (i, local)
                    })
                    .collect();
                (token, replicas)
            })
            .collect();
        Ok((nodes.iter().map(|n| n.addr).collect(), Routes::new(ring)))
    }

    /// The keyspace's replication as the server has it (the one `-schema` asks for
    /// when the keyspace does not exist).
    async fn strategy(&self, settings: &Settings) -> Result<Strategy, String> {
        let keyspace = &settings.schema.keyspace;
        // `-schema keyspace=` allows letters, digits and _ only: safe to quote.
        let cql = format!("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = '{keyspace}'");
        let table = self.select(&cql).await?;
        if table.rows.is_empty() {
            return Ok(Strategy::of(&settings.schema.replication));
        }
        let map = table.text_map(0, "replication")?;
        Ok(Strategy::parse(&map))
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        self.conn.fail("the setup is over".to_string());
    }
}

/// A node of the ring: its address, data center and tokens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeRing {
    pub addr: SocketAddr,
    pub dc: Option<String>,
    pub tokens: Vec<i64>,
}

/// Where a keyspace's replicas go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// The next `factor` distinct nodes on the ring.
    Simple(u32),
    /// Per data center, the next distinct nodes of that data center.
    NetworkTopology(BTreeMap<String, u32>),
    /// Anything else (LocalStrategy, EverywhereStrategy...): every node, from the token's owner on.
    Everywhere,
}

impl Strategy {
    fn of(replication: &Replication) -> Strategy {
        match replication {
            Replication::Simple { factor } => Strategy::Simple(*factor),
            Replication::NetworkTopology { dcs } => Strategy::NetworkTopology(dcs.iter().cloned().collect()),
        }
    }

    /// From `system_schema.keyspaces.replication` (`class` and the factors; a
    /// transient factor `3/1` counts its full replicas, 3).
    pub fn parse(map: &BTreeMap<String, String>) -> Strategy {
        let factor = |v: &String| v.split('/').next().and_then(|f| f.trim().parse::<u32>().ok());
        let class = map.get("class").map(String::as_str).unwrap_or("");
        if class.ends_with("SimpleStrategy") {
            match map.get("replication_factor").and_then(factor) {
                Some(rf) => Strategy::Simple(rf),
                None => Strategy::Everywhere,
            }
        } else if class.ends_with("NetworkTopologyStrategy") {
            Strategy::NetworkTopology(
                map.iter()
                    .filter(|(k, _)| k.as_str() != "class")
                    .filter_map(|(k, v)| Some((k.clone(), factor(v)?)))
                    .collect(),
            )
        } else {
            Strategy::Everywhere
        }
    }
}

/// Each token of the ring with its replicas (indexes into `nodes`), the token's
/// owner first, as `strategy` places them (see the module comment).
pub fn replicas(nodes: &[NodeRing], strategy: &Strategy) -> Vec<(i64, Vec<u32>)> {
    let mut ring: Vec<(i64, u32)> =
        nodes.iter().enumerate().flat_map(|(i, n)| n.tokens.iter().map(move |&t| (t, i as u32))).collect();
    ring.sort_unstable();
    ring.dedup_by_key(|(token, _)| *token);
    let mut out = Vec::with_capacity(ring.len());
    for start in 0..ring.len() {
        let mut chosen: Vec<u32> = Vec::new();
        let mut per_dc: BTreeMap<&str, u32> = BTreeMap::new();
        for step in 0..ring.len() {
            let node = ring[(start + step) % ring.len()].1;
            if chosen.contains(&node) {
                continue;
            }
            let take = match strategy {
                Strategy::Simple(rf) => (chosen.len() as u32) < *rf,
                Strategy::Everywhere => true,
                Strategy::NetworkTopology(dcs) => {
                    let dc = nodes[node as usize].dc.as_deref().unwrap_or("");
                    let wanted = dcs.get(dc).copied().unwrap_or(0);
                    let have = per_dc.entry(dc).or_insert(0);
                    if *have < wanted {
                        *have += 1;
                        true
                    } else {
                        false
                    }
                }
            };
            if take {
                chosen.push(node);
            }
        }
        out.push((ring[start].0, chosen));
    }
    out
}

/// A result set whose cells are found by column name.
struct Table {
    what: String,
    columns: Vec<String>,
    rows: Vec<Vec<Option<Bytes>>>,
}

impl Table {
    fn new(cql: &str, rows: &Rows) -> Result<Table, String> {
        let columns = rows.metadata.columns.iter().map(|c| c.name.clone()).collect();
        let rows = rows.iter().collect::<Result<Vec<_>, _>>().map_err(|e| format!("{cql}: unreadable rows: {e}"))?;
        Ok(Table { what: cql.to_string(), columns, rows })
    }

    fn cell(&self, row: usize, column: &str) -> Result<Option<Bytes>, String> {
        let Some(i) = self.columns.iter().position(|c| c == column) else {
            return Err(format!("{}: no column {column} in the answer", self.what));
        };
        Ok(self.rows.get(row).and_then(|r| r.get(i)).cloned().flatten())
    }

    fn bad(&self, column: &str, why: &str) -> String {
        format!("{}: column {column}: {why}", self.what)
    }

    fn text(&self, row: usize, column: &str) -> Result<Option<String>, String> {
        match self.cell(row, column)? {
            None => Ok(None),
            Some(b) => String::from_utf8(b.to_vec()).map(Some).map_err(|_| self.bad(column, "not UTF-8")),
        }
    }

    fn inet(&self, row: usize, column: &str) -> Result<Option<IpAddr>, String> {
        match self.cell(row, column)? {
            None => Ok(None),
            Some(b) => decode_inet(&b).map(Some).ok_or_else(|| self.bad(column, "not an inet")),
        }
    }

    /// The `tokens` set, as Murmur3 tokens (another partitioner's tokens are an error).
    fn tokens(&self, row: usize) -> Result<Vec<i64>, String> {
        let Some(b) = self.cell(row, "tokens")? else { return Ok(Vec::new()) };
        let texts = decode_collection(&b, 1).ok_or_else(|| self.bad("tokens", "not a set<text>"))?;
        texts
            .iter()
            .map(|t| {
                std::str::from_utf8(t)
                    .ok()
                    .and_then(|t| t.parse::<i64>().ok())
                    .ok_or_else(|| self.bad("tokens", "not Murmur3 tokens"))
            })
            .collect()
    }

    fn text_map(&self, row: usize, column: &str) -> Result<BTreeMap<String, String>, String> {
        let Some(b) = self.cell(row, column)? else { return Ok(BTreeMap::new()) };
        let items = decode_collection(&b, 2).ok_or_else(|| self.bad(column, "not a map<text, text>"))?;
        let text = |b: &[u8]| String::from_utf8(b.to_vec()).map_err(|_| self.bad(column, "not UTF-8"));
        items.chunks(2).map(|kv| Ok((text(&kv[0])?, text(&kv[1])?))).collect()
    }
}

/// An `inet` cell: 4 or 16 bytes.
pub fn decode_inet(b: &[u8]) -> Option<IpAddr> {
    match b.len() {
        4 => Some(IpAddr::from(<[u8; 4]>::try_from(b).ok()?)),
        16 => Some(IpAddr::from(<[u8; 16]>::try_from(b).ok()?)),
        _ => None,
    }
}

/// A set or list (`per_item` 1) or map (`per_item` 2, keys and values in turn)
/// cell of protocol v4: an int count, then each element as int length + bytes;
/// `None` when it does not parse to the end exactly (null elements included).
pub fn decode_collection(b: &[u8], per_item: usize) -> Option<Vec<Vec<u8>>> {
    let int = |at: usize| -> Option<i32> { Some(i32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?)) };
    let count = usize::try_from(int(0)?).ok()?;
    let mut at = 4;
    let mut out = Vec::new();
    for _ in 0..count.checked_mul(per_item)? {
        let len = usize::try_from(int(at)?).ok()?;
        at += 4;
        out.push(b.get(at..at.checked_add(len)?)?.to_vec());
        at += len;
    }
    (at == b.len()).then_some(out)
}

#[cfg(test)]
#[path = "control_tests.rs"]
mod tests;
