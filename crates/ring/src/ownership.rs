//! Ownership as `nodetool status` reports it: "Owns" (primary ranges) and
//! "Owns (effective)" (ranges replicated under a keyspace's strategy).
//!
//! Invariants:
//! - Fractions are of the whole ring, 2^64 tokens: a range `(prev, token]`
//!   counts `token - prev` (wrapping) tokens; a lone token owns the ring, 1.0.
//! - Every node in the ring appears in the result, with 0.0 if it owns or
//!   replicates nothing.
//! - Primary ownership sums to 1.0 over all nodes. Effective ownership sums
//!   to the number of replicas per range: `min(rf, nodes)` for `Simple`, and
//!   `min(rf_dc, nodes in dc)` summed over the DCs for `NetworkTopology`.
//! - `Local` data is held entirely by each node: effective ownership 1.0 for
//!   every node (Cassandra calls ownership meaningless there).
//! - Sums are exact (integers) before the final division.

use std::collections::BTreeMap;

use crate::strategy::ReplicationStrategy;
use crate::topology::{HostId, TokenMetadata};

const RING: f64 = 18_446_744_073_709_551_616.0; // 2^64

/// Each node's share of the ring as primary owner ("Owns").
pub fn primary_ownership(tm: &TokenMetadata) -> BTreeMap<HostId, f64> {
    let mut sums: BTreeMap<HostId, u128> = tm.nodes().map(|n| (n.host_id, 0)).collect();
    for (range, owner) in tm.ranges() {
        *sums.entry(owner).or_default() += range.size();
    }
    sums.into_iter().map(|(h, s)| (h, s as f64 / RING)).collect()
}

/// Each node's share of the ring's data it holds under `strategy`
/// ("Owns (effective)").
pub fn effective_ownership(tm: &TokenMetadata, strategy: &ReplicationStrategy) -> BTreeMap<HostId, f64> {
    if matches!(strategy, ReplicationStrategy::Local) {
        return tm.nodes().map(|n| (n.host_id, 1.0)).collect();
    }
    let mut sums: BTreeMap<HostId, u128> = tm.nodes().map(|n| (n.host_id, 0)).collect();
    for (range, replicas) in strategy.replica_map(tm) {
        let size = range.size();
        for host in replicas {
            *sums.entry(host).or_default() += size;
        }
    }
    sums.into_iter().map(|(h, s)| (h, s as f64 / RING)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::NodeInfo;

    #[test]
    fn owns_and_effective_owns() {
        let mut tm = TokenMetadata::new();
        let q = 1i64 << 62; // a quarter of the ring
        tm.add_node(NodeInfo::new(HostId(1), "dc1", "r1"), [-q, q]).unwrap();
        tm.add_node(NodeInfo::new(HostId(2), "dc1", "r1"), [0]).unwrap();
        tm.add_node(NodeInfo::new(HostId(3), "dc2", "r1"), [i64::MAX]).unwrap();
        let owns = primary_ownership(&tm);
        assert_eq!(owns[&HostId(2)], 0.25);
        assert!((owns[&HostId(1)] - 0.5).abs() < 1e-12);
        assert!((owns[&HostId(3)] - 0.25).abs() < 1e-12);
        assert!((owns.values().sum::<f64>() - 1.0).abs() < 1e-12);

        let simple = effective_ownership(&tm, &ReplicationStrategy::Simple { rf: 2 });
        assert!((simple.values().sum::<f64>() - 2.0).abs() < 1e-12);

        let nts = ReplicationStrategy::network_topology([("dc1", 1)]);
        let eff = effective_ownership(&tm, &nts);
        assert_eq!(eff[&HostId(3)], 0.0);
        assert_eq!(eff[&HostId(2)], 0.25);
        assert_eq!(eff[&HostId(1)], 0.75);

        let nts = ReplicationStrategy::network_topology([("dc1", 3), ("dc2", 1)]);
        let eff = effective_ownership(&tm, &nts);
        assert!(eff.values().all(|&v| v == 1.0));

        let mut one = TokenMetadata::new();
        one.add_node(NodeInfo::new(HostId(9), "dc1", "r1"), [123]).unwrap();
        assert_eq!(primary_ownership(&one)[&HostId(9)], 1.0);
    }
}
