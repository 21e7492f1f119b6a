//! The scale run (`sim::scale`) on a small cluster of the classic layout:
//! 12 nodes in three zones at RF 3, the real write path, one node lost and
//! brought back. The 48–288 node runs of `bench/SCALING.md` are the same
//! code (`cargo run --release -p sim --example scale`).

use sim::scale::{run_scale, ScaleConfig};

#[test]
fn a_token_aware_write_costs_two_round_trips_and_a_lost_node_gets_every_write_back() {
    let r = run_scale(&ScaleConfig { nodes: 12, writes: 600, loss_writes: 600, seed: 7 }).expect("scale run");
    // The coordinator is a replica: a request and a response to each of the 2 others.
    assert_eq!(r.messages_per_write, 4.0, "{r:?}");
    assert_eq!(r.replica_writes_per_write, 3.0, "{r:?}");
    // Every write acknowledged at ONE with one replica of three down; one hint
    // for each write the lost node replicates, all replayed to it.
    assert_eq!(r.loss_acked, 600, "{r:?}");
    assert!(r.loss_share > 0.0 && (r.hints_per_write - r.loss_share).abs() < 1e-9, "{r:?}");
    assert_eq!(r.returned_holds.0, r.returned_holds.1, "{r:?}");
    assert_eq!(r.hints_replayed, (r.loss_share * 600.0).round() as u64, "{r:?}");
    // Shoal's token allocation balances ownership better than random tokens.
    assert!(r.ownership.max_over_mean() < r.ownership_random.max_over_mean(), "{r:?}");
    assert!((r.ownership.mean * 12.0 - 3.0).abs() < 1e-6, "each node holds 3/12 of the data on average: {r:?}");
}
