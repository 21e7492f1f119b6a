//! Range movement planning for the topology changes and rebuild (issue 21):
//! which token ranges of a keyspace move, from which node to which, when a
//! node bootstraps (joins, or takes the place of a dead node), is
//! decommissioned, is removed (removenode) or rebuilds. Pure functions of a
//! `ClusterView` and a `KeyspaceDef`: `node::lifecycle` runs the plans over
//! stream sessions on a node, and the simulator (`crates/sim`) runs the same
//! plans over its in-memory network.
//!
//! A plan names ranges as the ring cuts them (`TokenMetadata::ranges`): the
//! ring with the joiner placed for a bootstrap, the current ring (the leaving
//! or removed node still in it) for the others. Its maps are ordered, so the
//! same view and keyspace give the same plan.
//!
//! Invariants:
//! - Bootstrap plans exactly the ranges the joiner replicates once placed.
//!   Strict (consistent range movement) each comes from the replica that
//!   loses it, so the new replicas of a range hold at least what a quorum of
//!   the old ones held; otherwise from the first live replica in ring order.
//!   A replacement takes the dead node's ranges from the first live fellow
//!   replica of each (the ring with the dead node in it says which).
//! - Decommission and removenode hand each range the node replicated to
//!   every node that replicates it once the node is gone and did not before:
//!   decommission from the leaver itself (which holds every write it
//!   acknowledged), removenode from a live surviving replica, one in the
//!   preferred data center when there is one.
//! - No planned source is the target or down as far as the view knows. A
//!   range without a source is an error naming it in Cassandra's words
//!   (`rebuild` lists such ranges and still plans the others).

use std::collections::BTreeMap;

use ring::topology::{NodeInfo, TokenMetadata};
use types::schema::KeyspaceDef;
use uuid::Uuid;

use crate::view::{host, strategy, uuid, ClusterView};

/// Token ranges `(start, end]`, in ring order.
pub type Ranges = Vec<(i64, i64)>;

/// What `rebuild` streams: the ranges by the replica to fetch them from, and
/// the ranges no live replica but this node holds (described for the error).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rebuild {
    pub by_source: BTreeMap<Uuid, Ranges>,
    pub unavailable: Vec<String>,
}

/// Rebuild (nodetool rebuild) of `ks` on the view's local node: every range
/// it replicates, from another live replica, one in `prefer_dc` when there is
/// one.
pub fn rebuild(view: &ClusterView, ks: &KeyspaceDef, prefer_dc: &str) -> Rebuild {
    let mut out = Rebuild::default();
    for (range, _) in view.ring.ranges() {
        let replicas = view.replicas(ks, range.end);
        if !replicas.contains(&view.local) {
            continue;
        }
        let source = replicas
            .iter()
            .copied()
            .filter(|r| *r != view.local && view.is_alive(*r))
            .min_by_key(|r| view.dc_of(*r) != Some(prefer_dc));
        match source {
            Some(s) => out.by_source.entry(s).or_default().push((range.start, range.end)),
            None => out.unavailable.push(format!(
                "({}, {}] of {} (replicas {})",
                range.start,
                range.end,
                ks.name,
                replicas
                    .iter()
                    .map(|r| view.endpoint(*r).map_or_else(|| r.to_string(), |e| e.address().to_string()))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
    out
}

/// The bootstrap of the view's local node (JOINING, its tokens announced):
/// the rings its plans are decided on, built once for every keyspace.
#[derive(Clone, Debug)]
pub struct Bootstrap {
    /// The ring with the joiner placed.
    ring: TokenMetadata,
    /// Replacing a dead node: its host id, and the ring with it in place.
    original: Option<(Uuid, TokenMetadata)>,
}

impl Bootstrap {
    /// Places the local node's tokens (and, when it replaces the dead node
    /// `replacing`, that node's as well, in a ring of their own).
    pub fn new(view: &ClusterView, replacing: Option<Uuid>) -> Result<Bootstrap, String> {
        let me = view.local().ok_or("bootstrap: this node is not in its own view")?;
        let mut ring = view.ring.clone();
        ring.add_node(NodeInfo::new(host(view.local), me.dc.clone(), me.rack.clone()), me.tokens.iter().copied())
            .map_err(|e| format!("bootstrap: cannot place this node's tokens: {e}"))?;
        // A replacement's ranges are the dead node's: their data is on the dead node's fellow
        // replicas, the ring with the dead node in it says which.
        let original = match replacing.and_then(|d| view.endpoint(d)) {
            Some(dead) => {
                let mut with = view.ring.clone();
                with.add_node(
                    NodeInfo::new(host(dead.host_id), dead.dc.clone(), dead.rack.clone()),
                    dead.tokens.iter().copied(),
                )
                .map_err(|e| format!("bootstrap: cannot place the replaced node's tokens: {e}"))?;
                Some((dead.host_id, with))
            }
            None => None,
        };
        Ok(Bootstrap { ring, original })
    }

    /// The ring once the joiner owns its tokens.
    pub fn ring(&self) -> &TokenMetadata {
        &self.ring
    }

    /// The ranges of `ks` the joiner will replicate, by the node to stream
    /// each from (see the module's invariants; `strict` is Cassandra's
    /// `consistent_rangemovement`).
    pub fn sources(
        &self,
        view: &ClusterView,
        ks: &KeyspaceDef,
        strict: bool,
    ) -> Result<BTreeMap<Uuid, Ranges>, String> {
        self.plan_sources(view, ks, strict, false).map(|(by_source, _)| by_source)
    }

    /// Like `sources`, not strict, but a range no live replica other than
    /// this node holds is left out and named in the second list instead of
    /// failing the plan (a replicated system keyspace at RF 1: its only copy
    /// was on a dead node, or there is none to move).
    pub fn sources_lenient(&self, view: &ClusterView, ks: &KeyspaceDef) -> (BTreeMap<Uuid, Ranges>, Vec<String>) {
        self.plan_sources(view, ks, false, true).unwrap_or_else(|e| (BTreeMap::new(), vec![e]))
    }

    fn plan_sources(
        &self,
        view: &ClusterView,
        ks: &KeyspaceDef,
        strict: bool,
        lenient: bool,
    ) -> Result<(BTreeMap<Uuid, Ranges>, Vec<String>), String> {
        let mut skipped = Vec::new();
        let mut missing = |unable: String| -> Result<(), String> {
            if lenient {
                skipped.push(unable);
                Ok(())
            } else {
                Err(unable)
            }
        };
        let strategy = strategy(&ks.replication);
        let address = |id: Uuid| view.endpoint(id).map_or_else(|| id.to_string(), |e| e.address().to_string());
        let unable = |start: i64, end: i64| {
            format!("Unable to find sufficient sources for streaming range ({start}, {end}] of {}", ks.name)
        };
        let mut by_source: BTreeMap<Uuid, Ranges> = BTreeMap::new();
        for (range, _) in self.ring.ranges() {
            let new: Vec<Uuid> = strategy.replicas(&self.ring, range.end).into_iter().map(uuid).collect();
            if !new.contains(&view.local) {
                continue;
            }
            if let Some((dead, with)) = &self.original {
                let fellows: Vec<Uuid> = strategy.replicas(with, range.end).into_iter().map(uuid).collect();
                match fellows.iter().copied().find(|r| r != dead && *r != view.local && view.is_alive(*r)) {
                    Some(source) => by_source.entry(source).or_default().push((range.start, range.end)),
                    None => missing(unable(range.start, range.end))?,
                }
                continue;
            }
            let old = view.replicas(ks, range.end);
            let losing: Vec<Uuid> = old.iter().copied().filter(|r| !new.contains(r)).collect();
            let source = if strict && !losing.is_empty() {
                losing.iter().copied().find(|r| view.is_alive(*r)).ok_or_else(|| {
                    let down: Vec<String> = losing.iter().map(|r| format!("/{}", address(*r))).collect();
                    format!(
                        "A node required to move the data consistently is down: {}. To stream from \
                         another replica, which may not hold every write, set consistent_rangemovement: false",
                        down.join(", ")
                    )
                })?
            } else {
                match old.iter().copied().find(|r| *r != view.local && view.is_alive(*r)) {
                    Some(source) => source,
                    None => {
                        missing(unable(range.start, range.end))?;
                        continue;
                    }
                }
            };
            by_source.entry(source).or_default().push((range.start, range.end));
        }
        Ok((by_source, skipped))
    }
}

/// Refuses to decommission a node of `dc` when `ks` would be left with fewer
/// nodes there than its replication factor.
pub fn check_decommission(view: &ClusterView, ks: &KeyspaceDef, dc: &str) -> Result<(), String> {
    let live_in_dc = view.ring.dc_node_count(dc);
    let rf = strategy(&ks.replication).rf_in_dc(dc) as usize;
    if rf > 0 && live_in_dc.saturating_sub(1) < rf {
        return Err(format!(
            "Not enough live nodes to maintain replication factor in keyspace {} (RF = {rf}, N = {live_in_dc}). \
             Lower the replication factor first.",
            ks.name
        ));
    }
    Ok(())
}

/// The ring without `node`.
fn without(view: &ClusterView, node: Uuid) -> TokenMetadata {
    let mut after = view.ring.clone();
    after.remove_node(host(node));
    after
}

/// Decommission of `leaving` (a node of the view's ring): the ranges of `ks`
/// each node gains once it is gone, by that node. The leaver is the source
/// of every one.
pub fn decommission(view: &ClusterView, ks: &KeyspaceDef, leaving: Uuid) -> BTreeMap<Uuid, Ranges> {
    let strategy = strategy(&ks.replication);
    let after = without(view, leaving);
    let mut by_target: BTreeMap<Uuid, Ranges> = BTreeMap::new();
    for (range, _) in view.ring.ranges() {
        let old = view.replicas(ks, range.end);
        if !old.contains(&leaving) {
            continue;
        }
        for gaining in strategy.replicas(&after, range.end).into_iter().map(uuid) {
            if !old.contains(&gaining) {
                by_target.entry(gaining).or_default().push((range.start, range.end));
            }
        }
    }
    by_target
}

/// Removenode of the dead node `removed`: the ranges of `ks` each node gains
/// once it is gone, by (gaining node, live replica to stream from), the
/// source preferably in `prefer_dc`.
pub fn removenode(
    view: &ClusterView,
    ks: &KeyspaceDef,
    removed: Uuid,
    prefer_dc: &str,
) -> Result<BTreeMap<(Uuid, Uuid), Ranges>, String> {
    let strategy = strategy(&ks.replication);
    let after = without(view, removed);
    let mut moves: BTreeMap<(Uuid, Uuid), Ranges> = BTreeMap::new();
    for (range, _) in view.ring.ranges() {
        let old = view.replicas(ks, range.end);
        if !old.contains(&removed) {
            continue;
        }
        for gaining in strategy.replicas(&after, range.end).into_iter().map(uuid) {
            if old.contains(&gaining) {
                continue;
            }
            let source = old
                .iter()
                .copied()
                .filter(|r| *r != removed && view.is_alive(*r))
                .min_by_key(|r| view.dc_of(*r) != Some(prefer_dc))
                .ok_or_else(|| {
                    format!(
                        "Unable to find sufficient sources for streaming range ({}, {}] of {}",
                        range.start, range.end, ks.name
                    )
                })?;
            moves.entry((gaining, source)).or_default().push((range.start, range.end));
        }
    }
    Ok(moves)
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use types::schema::{KeyspaceDef, Replication};
    use uuid::Uuid;

    use super::*;
    use crate::view::{Endpoint, Status};

    fn id(n: u8) -> Uuid {
        Uuid::from_u128(u128::from(n))
    }

    fn endpoint(n: u8, tokens: &[i64], status: Status, alive: bool) -> Endpoint {
        Endpoint::test_node(n, tokens, status, alive)
    }

    fn view(local: u8, endpoints: Vec<Endpoint>) -> ClusterView {
        ClusterView::build("c", id(local), endpoints.into_iter().map(|e| (e.host_id, e)).collect(), 1)
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

    /// Four NORMAL nodes, two tokens each: 1 at -400 and 0, 2 at -300 and
    /// 100, 3 at -200 and 200, 4 at -100 and 300.
    fn four(alive: impl Fn(u8) -> bool) -> Vec<Endpoint> {
        (1..=4u8)
            .map(|n| {
                let t = i64::from(n) * 100;
                endpoint(n, &[t - 500, t - 100], Status::Normal, alive(n))
            })
            .collect()
    }

    /// Whether `(start, end]` (wrapping) holds `token`.
    fn holds(range: (i64, i64), token: i64) -> bool {
        let (start, end) = range;
        if start < end {
            token > start && token <= end
        } else {
            token > start || token <= end
        }
    }

    /// Replicas of `token` in `ring` at RF `rf`.
    fn replicas_in(ring: &TokenMetadata, rf: u32, token: i64) -> BTreeSet<Uuid> {
        strategy(&ks(rf).replication).replicas(ring, token).into_iter().map(uuid).collect()
    }

    /// A token inside each of `ring`'s ranges (their ends).
    fn probes(ring: &TokenMetadata) -> Vec<i64> {
        ring.ranges().map(|(r, _)| r.end).collect()
    }

    #[test]
    fn bootstrap_takes_each_range_from_the_replica_that_loses_it() {
        let mut eps = four(|_| true);
        eps.push(endpoint(5, &[-250, 150], Status::Joining, true));
        let v = view(5, eps);
        let plan = Bootstrap::new(&v, None).expect("placed");
        let sources = plan.sources(&v, &ks(3), true).expect("every loser is up");
        let planned: Vec<((i64, i64), Uuid)> =
            sources.iter().flat_map(|(s, rs)| rs.iter().map(move |r| (*r, *s))).collect();
        // Exactly the ranges node 5 replicates in the new ring, each once.
        let mine: BTreeSet<(i64, i64)> = plan
            .ring()
            .ranges()
            .filter(|(r, _)| replicas_in(plan.ring(), 3, r.end).contains(&id(5)))
            .map(|(r, _)| (r.start, r.end))
            .collect();
        assert_eq!(planned.iter().map(|(r, _)| *r).collect::<BTreeSet<_>>(), mine);
        assert_eq!(planned.len(), mine.len(), "a range planned twice: {planned:?}");
        for (range, source) in &planned {
            let old = replicas_in(&v.ring, 3, range.1);
            let new = replicas_in(plan.ring(), 3, range.1);
            assert!(old.contains(source) && !new.contains(source), "{range:?} from {source}: not the loser");
        }
        // The rest of the ring stays where it is.
        for t in probes(plan.ring()) {
            if !mine.iter().any(|r| holds(*r, t)) {
                assert_eq!(replicas_in(&v.ring, 3, t), replicas_in(plan.ring(), 3, t), "token {t}");
            }
        }
    }

    #[test]
    fn strict_bootstrap_refuses_a_down_loser_and_loose_streams_from_a_live_replica() {
        // Node 1 loses (300, -400] and (-300, -250] to node 5.
        let mut eps = four(|n| n != 1);
        eps.push(endpoint(5, &[-250, 150], Status::Joining, true));
        let v = view(5, eps);
        let plan = Bootstrap::new(&v, None).expect("placed");
        let err = plan.sources(&v, &ks(3), true).expect_err("node 1 loses a range and is down");
        assert!(err.starts_with("A node required to move the data consistently is down: /127.0.0.1."), "{err}");
        let loose = plan.sources(&v, &ks(3), false).expect("any live replica will do");
        assert!(!loose.contains_key(&id(1)) && !loose.contains_key(&id(5)), "{loose:?}");
        let covered: usize = loose.values().map(Vec::len).sum();
        let mine = plan.ring().ranges().filter(|(r, _)| replicas_in(plan.ring(), 3, r.end).contains(&id(5))).count();
        assert_eq!(covered, mine, "every range of the joiner, once");
        // Only the joiner itself alive: no source at all.
        let mut alone = four(|_| false);
        alone.push(endpoint(5, &[-250, 150], Status::Joining, true));
        let v = view(5, alone);
        let err =
            Bootstrap::new(&v, None).and_then(|p| p.sources(&v, &ks(3), false)).expect_err("nobody to stream from");
        assert!(err.starts_with("Unable to find sufficient sources for streaming range ("), "{err}");
    }

    #[test]
    fn a_replacement_takes_the_dead_nodes_ranges_from_its_fellow_replicas() {
        // Node 2 died and was removed; node 5 takes its tokens.
        let mut eps = four(|n| n != 2);
        eps[1].status = Status::Left;
        eps.push(endpoint(5, &[-300, 100], Status::Joining, true));
        let v = view(5, eps);
        let plan = Bootstrap::new(&v, Some(id(2))).expect("placed");
        let sources = plan.sources(&v, &ks(3), true).expect("fellows are up");
        let mut with_dead = v.ring.clone();
        with_dead.add_node(NodeInfo::new(host(id(2)), "dc1", "rack1"), [-300, 100]).expect("dead node placed");
        let mut covered = 0;
        for (source, ranges) in &sources {
            assert!(*source != id(2) && *source != id(5));
            for range in ranges {
                covered += 1;
                let fellows = replicas_in(&with_dead, 3, range.1);
                assert!(fellows.contains(&id(2)) && fellows.contains(source), "{range:?} from {source}");
            }
        }
        let dead_ranges =
            with_dead.ranges().filter(|(r, _)| replicas_in(&with_dead, 3, r.end).contains(&id(2))).count();
        assert_eq!(covered, dead_ranges, "every range of the dead node, once");
        // Its fellows down too: nothing to stream from.
        let mut eps = four(|n| n == 1);
        eps[1].status = Status::Left;
        eps.push(endpoint(5, &[-300, 100], Status::Joining, true));
        let v = view(5, eps);
        let got = Bootstrap::new(&v, Some(id(2))).and_then(|p| p.sources(&v, &ks(3), true));
        assert!(got.is_err_and(|e| e.starts_with("Unable to find sufficient sources")));
    }

    #[test]
    fn decommission_hands_each_range_to_the_node_that_gains_it() {
        let v = view(3, four(|_| true));
        let by_target = decommission(&v, &ks(3), id(3));
        let after = without(&v, id(3));
        assert!(!by_target.contains_key(&id(3)));
        let mut handed = BTreeSet::new();
        for (target, ranges) in &by_target {
            for range in ranges {
                let old = replicas_in(&v.ring, 3, range.1);
                let new = replicas_in(&after, 3, range.1);
                assert!(old.contains(&id(3)) && !old.contains(target) && new.contains(target), "{range:?}");
                assert!(handed.insert(*range), "at RF 3 of 4 nodes one node gains each range");
            }
        }
        let leavers: BTreeSet<(i64, i64)> = v
            .ring
            .ranges()
            .filter(|(r, _)| replicas_in(&v.ring, 3, r.end).contains(&id(3)))
            .map(|(r, _)| (r.start, r.end))
            .collect();
        assert_eq!(handed, leavers);
        assert!(check_decommission(&v, &ks(3), "dc1").is_ok());
        let err = check_decommission(&v, &ks(4), "dc1").expect_err("3 nodes cannot hold RF 4");
        assert!(err.contains("(RF = 4, N = 4)"), "{err}");
    }

    #[test]
    fn removenode_streams_from_a_live_surviving_replica() {
        let v = view(1, four(|n| n != 4));
        let moves = removenode(&v, &ks(3), id(4), "dc1").expect("sources are up");
        let after = without(&v, id(4));
        assert!(!moves.is_empty());
        for ((gaining, source), ranges) in &moves {
            assert!(*source != id(4) && gaining != source);
            for range in ranges {
                let old = replicas_in(&v.ring, 3, range.1);
                assert!(old.contains(&id(4)) && old.contains(source) && !old.contains(gaining));
                assert!(replicas_in(&after, 3, range.1).contains(gaining));
            }
        }
        // At RF 4 every other node is a replica: none gains, nothing moves.
        assert!(removenode(&v, &ks(4), id(4), "dc1").expect("nothing to stream").is_empty());
        // Every surviving replica of some range down: that range has no source.
        let v = view(1, four(|n| n == 1));
        let err = removenode(&v, &ks(2), id(4), "dc1").expect_err("no live source");
        assert!(err.starts_with("Unable to find sufficient sources for streaming range ("), "{err}");
    }

    #[test]
    fn rebuild_lists_the_ranges_without_a_live_source() {
        let v = view(1, four(|_| true));
        let all = rebuild(&v, &ks(3), "dc1");
        assert!(all.unavailable.is_empty() && !all.by_source.contains_key(&id(1)));
        let mine = v.ring.ranges().filter(|(r, _)| v.replicas(&ks(3), r.end).contains(&id(1))).count();
        assert_eq!(all.by_source.values().map(Vec::len).sum::<usize>(), mine);
        // RF 2 and node 2 down: the ranges node 1 shares with it alone are listed, the others planned.
        let v = view(1, four(|n| n != 2));
        let some = rebuild(&v, &ks(2), "dc1");
        assert!(!some.unavailable.is_empty() && !some.by_source.is_empty(), "{some:?}");
        assert!(some.unavailable.iter().all(|u| u.ends_with(")") && u.contains(" of ks (replicas ")), "{some:?}");
    }
}
