//! Repair-based tombstone GC (ScyllaDB's tombstone_gc mode `repair`): when
//! the last successful repair of each token range of a table began, and the
//! repaired horizon of a table that follows from it.
//!
//! A node keeps, per table, the start time (unix seconds) of the last
//! successful repair of each `(start, end]` range of the ring, in its
//! node-local metadata (`Storage::local_update`, key `repaired:<table id>`,
//! value `start:end:secs` entries joined by `,`). The node that ran a repair
//! records the ranges it finished, and tells every other replica of each
//! (`RepairedReq`), which records them the same way. A table's horizon
//! (`horizon`, applied by `Storage::set_tombstone_horizon`) is the oldest of
//! those times over the ranges this node replicates, less a propagation
//! delay (ScyllaDB's `propagation_delay_in_seconds`: a delete still on its
//! way to the replicas when the repair began, or stamped by a coordinator
//! whose clock is behind, is not counted as repaired): a tombstone deleted
//! before it was on every replica of this node's ranges when that repair
//! began (a repair compares every replica, all of them up), so purging it
//! cannot let a replica bring the deleted data back.
//!
//! Invariants:
//! - A record only moves forward: recording keeps the later time per range.
//! - A range with no record (never repaired, or new since a topology change)
//!   counts as never repaired (0): every tombstone in it stays.
//! - An unreadable entry is skipped, as if the range had no record.
//! - A node that has been part of a multi-node ring (`CLUSTERED`) purges
//!   nothing while it does not see a ring of several nodes holding itself
//!   (it may have just restarted and not heard from its peers yet).

use std::collections::BTreeMap;

use storage::{Storage, StorageError};
use types::schema::{KeyspaceDef, Replication};
use uuid::Uuid;

use crate::view::{host, ClusterView, Status};

/// Node-local mark: this node has seen a ring with another node in it.
pub const CLUSTERED: &str = "clustered";

/// Start time of the last successful repair, by `(start, end]` range.
pub type Records = BTreeMap<(i64, i64), i64>;

/// The node-local key holding a table's records.
pub fn key(table: &Uuid) -> String {
    format!("repaired:{table}")
}

/// Reads `start:end:secs,...` (unreadable entries are skipped).
pub fn parse(value: &str) -> Records {
    value
        .split(',')
        .filter_map(|entry| {
            let mut parts = entry.splitn(3, ':');
            let start = parts.next()?.parse().ok()?;
            let end = parts.next()?.parse().ok()?;
            let at = parts.next()?.parse().ok()?;
            Some(((start, end), at))
        })
        .collect()
}

/// Writes records as `parse` reads them.
pub fn format(records: &Records) -> String {
    let entries: Vec<String> = records.iter().map(|((s, e), at)| format!("{s}:{e}:{at}")).collect();
    entries.join(",")
}

/// A table's records on this node.
pub fn load(storage: &Storage, table: &Uuid) -> Records {
    storage.local_get(&key(table)).map(|v| parse(&v)).unwrap_or_default()
}

/// Records that a repair that began at `at` finished `ranges` of `table`,
/// keeping a later time already recorded. Blocking (the metadata is fsynced).
pub fn record(storage: &Storage, table: &Uuid, ranges: &[(i64, i64)], at: i64) -> Result<(), StorageError> {
    storage.local_update(&key(table), |old| {
        let mut records = old.map(parse).unwrap_or_default();
        for range in ranges {
            let entry = records.entry(*range).or_insert(at);
            *entry = (*entry).max(at);
        }
        format(&records)
    })
}

/// Whether the view shows a ring holding another node than this one.
/// Gives storage the ring's tokens, which cut the ranges incremental repair
/// keeps its state by (`Storage::set_ring`): periodically, and before this
/// node answers or asks for that state. Not a ring of this node alone while
/// it has not heard from its peers since it started (that would merge its
/// ranges, and a merged range is repaired only if all of its parts were).
pub fn cut_ring(storage: &Storage, view: &ClusterView) {
    if sees_peers(view) || storage.local_get(CLUSTERED).is_none_or(|v| v.is_empty()) {
        let tokens: Vec<i64> = view.ring.ranges().map(|(range, _)| range.end).collect();
        storage.set_ring(&tokens);
    }
}

pub fn sees_peers(view: &ClusterView) -> bool {
    view.ring.nodes().any(|n| n.host_id != host(view.local))
}

/// Whether a node that was part of a multi-node ring is now alone in it
/// because every other node it knows of has left (decommission, removenode):
/// it may purge as a single node again.
pub fn left_alone(view: &ClusterView) -> bool {
    view.ring.node(host(view.local)).is_some()
        && !sees_peers(view)
        && view.endpoints.keys().any(|id| *id != view.local)
        && view.endpoints.values().all(|e| e.host_id == view.local || e.status == Status::Left)
}

/// Which ranges bound the horizon of a keyspace's tables on this node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// This node's data has no other replica (local replication, a node
    /// never part of a multi-node ring, or ranges it alone replicates): no
    /// constraint.
    Free,
    /// A node that was part of a ring (`clustered`) but does not see itself
    /// in a ring of several nodes (restarted and not yet gossiping, joining,
    /// left): nothing is purged.
    Hold,
    /// The ranges this node replicates together with other nodes.
    Shared(Vec<(i64, i64)>),
}

impl Scope {
    /// The horizon of a table with these records: the oldest record over the
    /// shared ranges (0 for a range without one) less `delay` seconds.
    pub fn horizon(&self, records: &Records, delay: i64) -> i64 {
        match self {
            Scope::Free => i64::MAX,
            Scope::Hold => 0,
            Scope::Shared(ranges) => ranges
                .iter()
                .map(|range| records.get(range).copied().unwrap_or(0).saturating_sub(delay))
                .min()
                .unwrap_or(i64::MAX),
        }
    }
}

/// The `Scope` of the tables of `ks` on this node.
pub fn scope(view: &ClusterView, ks: &KeyspaceDef, clustered: bool) -> Scope {
    if matches!(ks.replication, Replication::Local) || !clustered {
        return Scope::Free;
    }
    if view.ring.node(host(view.local)).is_none() || !sees_peers(view) {
        return Scope::Hold;
    }
    let shared: Vec<(i64, i64)> = view
        .ring
        .ranges()
        .filter(|(range, _)| {
            let replicas = view.replicas(ks, range.end);
            replicas.len() > 1 && replicas.contains(&view.local)
        })
        .map(|(range, _)| (range.start, range.end))
        .collect();
    if shared.is_empty() {
        Scope::Free
    } else {
        Scope::Shared(shared)
    }
}

/// The repaired horizon of a table of `ks` on this node (`scope`, then
/// `Scope::horizon`).
pub fn horizon(view: &ClusterView, ks: &KeyspaceDef, records: &Records, clustered: bool, delay: i64) -> i64 {
    scope(view, ks, clustered).horizon(records, delay)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::Endpoint;
    use std::collections::BTreeMap;

    fn endpoint(n: u8, tokens: Vec<i64>, status: Status) -> Endpoint {
        Endpoint::test_node(n, &tokens, status, true)
    }

    fn view(local: u8, endpoints: Vec<Endpoint>) -> ClusterView {
        let map: BTreeMap<Uuid, Endpoint> = endpoints.into_iter().map(|e| (e.host_id, e)).collect();
        ClusterView::build("c", Uuid::from_u128(local as u128), map, 1)
    }

    fn ks(rf: u32) -> KeyspaceDef {
        KeyspaceDef {
            name: "ks".into(),
            replication: Replication::Simple { replication_factor: rf },
            durable_writes: true,
            tables: BTreeMap::new(),
            types: BTreeMap::new(),
        }
    }

    #[test]
    fn records_round_trip_and_skip_garbage() {
        let mut r = Records::new();
        r.insert((i64::MIN, -5), 1_700_000_000);
        r.insert((-5, i64::MAX), 0);
        assert_eq!(parse(&format(&r)), r);
        assert_eq!(parse(""), Records::new());
        let mut one = Records::new();
        one.insert((1, 2), 3);
        assert_eq!(parse("x:1:2,1:2:3,4:5,::"), one);
    }

    #[test]
    fn horizon_is_the_oldest_repair_of_the_ranges_this_node_shares() {
        let three = view(
            1,
            vec![
                endpoint(1, vec![-100], Status::Normal),
                endpoint(2, vec![0], Status::Normal),
                endpoint(3, vec![100], Status::Normal),
            ],
        );
        // Ranges: (100, -100], (-100, 0], (0, 100]; at RF 3 node 1 holds them all.
        let mut records = Records::new();
        records.insert((100, -100), 50);
        records.insert((-100, 0), 40);
        assert_eq!(horizon(&three, &ks(3), &records, true, 0), 0, "(0, 100] was never repaired");
        records.insert((0, 100), 60);
        assert_eq!(horizon(&three, &ks(3), &records, true, 0), 40);
        assert_eq!(horizon(&three, &ks(3), &records, true, 15), 25, "less the propagation delay");
        // RF 2: node 1 replicates (100, -100] (primary) and (0, 100] (as the next node after 100).
        assert_eq!(horizon(&three, &ks(2), &records, true, 0), 50);
        // One replica per range, local replication, or a node never in a ring: no constraint.
        assert_eq!(horizon(&three, &ks(1), &records, true, 15), i64::MAX);
        let local = KeyspaceDef { replication: Replication::Local, ..ks(3) };
        assert_eq!(horizon(&three, &local, &records, true, 15), i64::MAX);
        let alone = view(1, vec![endpoint(1, vec![-100], Status::Normal)]);
        assert_eq!(horizon(&alone, &ks(3), &records, false, 15), i64::MAX);
        // A node that was in a ring and sees only itself (just restarted): nothing goes.
        assert_eq!(horizon(&alone, &ks(3), &records, true, 0), 0);
        assert!(!left_alone(&alone));
        // ... unless every other node it knows of has left.
        let left = view(1, vec![endpoint(1, vec![-100], Status::Normal), endpoint(2, vec![0], Status::Left)]);
        assert!(left_alone(&left) && !left_alone(&three));
        // A joining node (not in the ring yet) keeps everything.
        let joining = view(
            4,
            vec![
                endpoint(1, vec![-100], Status::Normal),
                endpoint(2, vec![0], Status::Normal),
                endpoint(4, vec![50], Status::Joining),
            ],
        );
        assert_eq!(horizon(&joining, &ks(3), &records, true, 0), 0);
    }

    #[test]
    fn recording_keeps_the_latest_time_per_range() {
        let dir = tempfile::tempdir().unwrap();
        let (storage, _) = Storage::open(storage::StorageConfig {
            data_dir: dir.path().to_path_buf(),
            commitlog_sync: storage::CommitlogSync::Periodic { period: std::time::Duration::from_secs(10) },
            cache_bytes: 1 << 20,
            row_cache_bytes: 0,
            memtable_bytes: 1 << 20,
            memtable_space: 8 << 20,
            tombstone_horizon: i64::MAX,
        })
        .unwrap();
        let table = Uuid::from_u128(9);
        assert!(load(&storage, &table).is_empty());
        record(&storage, &table, &[(1, 2), (2, 3)], 100).unwrap();
        record(&storage, &table, &[(2, 3), (3, 1)], 90).unwrap();
        record(&storage, &table, &[(1, 2)], 110).unwrap();
        let got = load(&storage, &table);
        assert_eq!(got.into_iter().collect::<Vec<_>>(), vec![((1, 2), 110), ((2, 3), 100), ((3, 1), 90)]);
    }
}
