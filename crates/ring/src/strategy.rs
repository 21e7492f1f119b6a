//! Replica placement: Cassandra's `SimpleStrategy`, `NetworkTopologyStrategy`
//! and `LocalStrategy`.
//!
//! Invariants:
//! - `replicas(tm, t)` depends only on the range `(prev, token]` holding `t`:
//!   the walk starts at the first ring token `>= t` (wrapping).
//! - A replica list never repeats a node and is in Cassandra's order: the
//!   order in which the ring walk accepted the nodes, so the first entry is
//!   the primary replica (the range's owner) whenever it is wanted at all.
//! - `Simple { rf }`: the first `rf` distinct nodes of the walk, ignoring
//!   data centers and racks (fewer if the ring has fewer nodes).
//! - `NetworkTopology`: per data center `dc` with `rf > 0` and nodes,
//!   `min(rf, nodes in dc)` replicas from that DC, exactly as Cassandra's
//!   `calculateNaturalReplicas`: walking the ring, the first node of each
//!   not-yet-seen rack is taken; a node of an already-seen rack is taken only
//!   while fewer than `rf - racks in dc` such repeats were taken. Hence the
//!   replicas are in distinct racks while there are enough racks, and when
//!   racks run out the extra replicas are the first repeat-rack nodes met in
//!   ring order. DCs absent from the options get no replicas.
//! - `Local`: no ring placement; the data lives only on the node that wrote
//!   it, so `replicas` is empty and callers use the local node.

use std::collections::BTreeMap;

use crate::topology::{HostId, TokenMetadata, TokenRange};
use crate::Token;

/// A keyspace's replication strategy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplicationStrategy {
    Simple { rf: u32 },
    NetworkTopology { dcs: BTreeMap<String, u32> },
    Local,
}

impl ReplicationStrategy {
    /// `NetworkTopology` from `(dc, rf)` pairs.
    pub fn network_topology<S: Into<String>>(dcs: impl IntoIterator<Item = (S, u32)>) -> Self {
        ReplicationStrategy::NetworkTopology { dcs: dcs.into_iter().map(|(dc, rf)| (dc.into(), rf)).collect() }
    }

    /// The replication factor configured for a data center (`Simple` applies
    /// its single factor to the whole ring; `Local` is 1 everywhere).
    pub fn rf_in_dc(&self, dc: &str) -> u32 {
        match self {
            ReplicationStrategy::Simple { rf } => *rf,
            ReplicationStrategy::NetworkTopology { dcs } => dcs.get(dc).copied().unwrap_or(0),
            ReplicationStrategy::Local => 1,
        }
    }

    /// The nodes holding the data of a key with token `token`, primary first.
    pub fn replicas(&self, tm: &TokenMetadata, token: Token) -> Vec<HostId> {
        match self {
            ReplicationStrategy::Simple { rf } => simple_replicas(tm, token, *rf),
            ReplicationStrategy::NetworkTopology { dcs } => nts_replicas(tm, token, dcs),
            ReplicationStrategy::Local => Vec::new(),
        }
    }

    /// Every range of the ring with its replicas, in ring order of the
    /// ranges' end tokens (empty for `Local` or an empty ring).
    pub fn replica_map(&self, tm: &TokenMetadata) -> Vec<(TokenRange, Vec<HostId>)> {
        if matches!(self, ReplicationStrategy::Local) {
            return Vec::new();
        }
        tm.ranges().map(|(range, _)| (range, self.replicas(tm, range.end))).collect()
    }
}

fn simple_replicas(tm: &TokenMetadata, token: Token, rf: u32) -> Vec<HostId> {
    let want = (rf as usize).min(tm.node_count());
    let mut out = Vec::with_capacity(want);
    if want == 0 {
        return out;
    }
    for (_, host) in tm.ring_from(token) {
        if !out.contains(&host) {
            out.push(host);
            if out.len() == want {
                break;
            }
        }
    }
    out
}

/// Per-DC state of one NTS walk (Cassandra's `DatacenterEndpoints`).
struct DcFill<'a> {
    dc: &'a str,
    rf_left: usize,
    repeats_left: i64,
    racks_seen: Vec<&'a str>,
}

fn nts_replicas(tm: &TokenMetadata, token: Token, dcs: &BTreeMap<String, u32>) -> Vec<HostId> {
    let mut fills: Vec<DcFill<'_>> = dcs
        .iter()
        .filter_map(|(dc, &rf)| {
            let nodes = tm.dc_node_count(dc);
            if rf == 0 || nodes == 0 {
                return None;
            }
            Some(DcFill {
                dc,
                rf_left: (rf as usize).min(nodes),
                repeats_left: i64::from(rf) - tm.dc_rack_count(dc) as i64,
                racks_seen: Vec::new(),
            })
        })
        .collect();
    let mut to_fill = fills.len();
    let mut out = Vec::with_capacity(fills.iter().map(|f| f.rf_left).sum());
    if to_fill == 0 {
        return out;
    }
    for (_, host) in tm.ring_from(token) {
        let Some(info) = tm.node(host) else { continue };
        let Some(fill) = fills.iter_mut().find(|f| f.dc == info.dc) else { continue };
        if fill.rf_left == 0 || out.contains(&host) {
            continue;
        }
        if !fill.racks_seen.contains(&info.rack.as_str()) {
            fill.racks_seen.push(&info.rack);
        } else if fill.repeats_left > 0 {
            fill.repeats_left -= 1;
        } else {
            continue;
        }
        out.push(host);
        fill.rf_left -= 1;
        if fill.rf_left == 0 {
            to_fill -= 1;
            if to_fill == 0 {
                break;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::NodeInfo;

    fn h(n: u128) -> HostId {
        HostId(n)
    }

    fn ring(nodes: &[(u128, &str, &str, &[Token])]) -> TokenMetadata {
        let mut tm = TokenMetadata::new();
        for &(id, dc, rack, tokens) in nodes {
            tm.add_node(NodeInfo::new(h(id), dc, rack), tokens.iter().copied()).unwrap();
        }
        tm
    }

    #[test]
    fn simple_takes_distinct_nodes_in_ring_order() {
        let tm = ring(&[(1, "dc1", "r1", &[0, 10]), (2, "dc1", "r1", &[20]), (3, "dc2", "r1", &[30])]);
        let s = ReplicationStrategy::Simple { rf: 2 };
        assert_eq!(s.replicas(&tm, 5), vec![h(1), h(2)]);
        assert_eq!(s.replicas(&tm, -5), vec![h(1), h(2)]);
        assert_eq!(s.replicas(&tm, 25), vec![h(3), h(1)]);
        assert_eq!(ReplicationStrategy::Simple { rf: 9 }.replicas(&tm, 25), vec![h(3), h(1), h(2)]);
        assert!(ReplicationStrategy::Simple { rf: 0 }.replicas(&tm, 25).is_empty());
        assert!(ReplicationStrategy::Local.replicas(&tm, 25).is_empty());
    }

    #[test]
    fn nts_prefers_distinct_racks() {
        // Ring order: 1(r1) 2(r1) 3(r2) 4(r3) 5(r1)
        let tm = ring(&[
            (1, "dc1", "r1", &[10]),
            (2, "dc1", "r1", &[20]),
            (3, "dc1", "r2", &[30]),
            (4, "dc1", "r3", &[40]),
            (5, "dc1", "r1", &[50]),
        ]);
        let s = ReplicationStrategy::network_topology([("dc1", 3)]);
        assert_eq!(s.replicas(&tm, 5), vec![h(1), h(3), h(4)]);
        assert_eq!(s.replicas(&tm, 45), vec![h(5), h(3), h(4)]);
        let s2 = ReplicationStrategy::network_topology([("dc1", 2)]);
        assert_eq!(s2.replicas(&tm, 15), vec![h(2), h(3)]);
    }

    #[test]
    fn nts_repeats_racks_when_racks_run_out() {
        // 2 racks, rf 4: acceptable rack repeats = 4 - 2 = 2, taken from the
        // first repeat-rack nodes met in ring order.
        let tm = ring(&[
            (1, "dc1", "a", &[10]),
            (2, "dc1", "a", &[20]),
            (3, "dc1", "a", &[25]),
            (4, "dc1", "b", &[30]),
            (5, "dc1", "a", &[40]),
            (6, "dc1", "b", &[50]),
        ]);
        let s = ReplicationStrategy::network_topology([("dc1", 4)]);
        assert_eq!(s.replicas(&tm, 5), vec![h(1), h(2), h(3), h(4)]);
        assert_eq!(s.replicas(&tm, 26), vec![h(4), h(5), h(6), h(1)]);
        // A node with several tokens is only counted once (the python driver's
        // make_token_replica_map lists such a node twice for rf >= 4).
        let tm =
            ring(&[(1, "dc1", "a", &[10]), (2, "dc1", "a", &[20, 21]), (4, "dc1", "b", &[30]), (5, "dc1", "a", &[40])]);
        assert_eq!(s.replicas(&tm, 5), vec![h(1), h(2), h(4), h(5)]);
    }

    #[test]
    fn nts_places_per_dc_and_caps_at_dc_size() {
        let tm =
            ring(&[(1, "dc1", "r1", &[10]), (2, "dc2", "r1", &[20]), (3, "dc1", "r2", &[30]), (4, "dc2", "r1", &[40])]);
        let s = ReplicationStrategy::network_topology([("dc1", 5), ("dc2", 1), ("dc3", 2)]);
        assert_eq!(s.replicas(&tm, 15), vec![h(2), h(3), h(1)]);
        let only_dc2 = ReplicationStrategy::network_topology([("dc1", 0), ("dc2", 2)]);
        assert_eq!(only_dc2.replicas(&tm, 35), vec![h(4), h(2)]);
        assert!(ReplicationStrategy::network_topology([("dc9", 3)]).replicas(&tm, 0).is_empty());
    }

    #[test]
    fn replica_map_covers_each_range() {
        let tm = ring(&[(1, "dc1", "r1", &[0, 10]), (2, "dc1", "r2", &[20])]);
        let map = ReplicationStrategy::Simple { rf: 1 }.replica_map(&tm);
        let ends: Vec<_> = map.iter().map(|(r, reps)| (r.start, r.end, reps[0])).collect();
        assert_eq!(ends, vec![(20, 0, h(1)), (0, 10, h(1)), (10, 20, h(2))]);
    }
}
