//! Balance of `allocate_tokens` versus random tokens while a ring grows node
//! by node: the max/min ratio of effective ownership (nodetool's "Owns
//! (effective)") over the nodes of each DC, for NetworkTopologyStrategy with
//! RF 3 per DC and 16 tokens per node. Run with `--nocapture` for the tables.

#![allow(clippy::unwrap_used, reason = "an integration test: a failed unwrap names its line")]

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use ring::tokens::random_tokens;
use ring::{allocate_tokens, effective_ownership, HostId, NodeInfo, ReplicationStrategy, Token, TokenMetadata};

const RF: u32 = 3;
const NUM_TOKENS: usize = 16;
const SEEDS: u64 = 4;

/// One DC's balance after a join.
#[derive(Clone, Debug)]
struct Balance {
    nodes: usize,
    /// max / min effective ownership.
    ratio: f64,
    /// max / min of ownership relative to the node's fair share inside its
    /// rack (ownership * nodes in the rack): with as many racks as RF every
    /// rack holds exactly one replica of everything, so a node in a smaller
    /// rack must own more; this measures what allocation can influence.
    rack_ratio: f64,
}

fn max_min(v: &[f64]) -> f64 {
    let max = v.iter().copied().fold(f64::MIN, f64::max);
    let min = v.iter().copied().fold(f64::MAX, f64::min);
    max / min
}

/// Grows a ring (`layout[i]` = dc, rack of node i); after each join returns
/// the balance of every DC that has nodes.
fn grow(layout: &[(&str, &str)], seed: u64, balanced: bool) -> Vec<BTreeMap<String, Balance>> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut tm = TokenMetadata::new();
    let mut dcs: Vec<&str> = layout.iter().map(|l| l.0).collect();
    dcs.sort();
    dcs.dedup();
    let strategy = ReplicationStrategy::network_topology(dcs.iter().map(|d| (*d, RF)));
    let mut out = Vec::new();
    for (i, &(dc, rack)) in layout.iter().enumerate() {
        let tokens = if balanced {
            allocate_tokens(&tm, dc, rack, NUM_TOKENS, RF, &mut rng)
        } else {
            loop {
                let t = random_tokens(&mut rng, NUM_TOKENS);
                if t.iter().all(|&x| tm.owner_of(x).is_none()) {
                    break t;
                }
            }
        };
        tm.add_node(NodeInfo::new(HostId(i as u128 + 1), dc, rack), tokens).unwrap();
        let eff = effective_ownership(&tm, &strategy);
        let mut per_dc = BTreeMap::new();
        for d in tm.datacenters() {
            let hosts: Vec<HostId> = tm.nodes_in_dc(d).collect();
            let own: Vec<f64> = hosts.iter().map(|h| eff[h]).collect();
            let in_rack: Vec<f64> = hosts
                .iter()
                .map(|h| {
                    let rack = &tm.node(*h).unwrap().rack;
                    let n = hosts.iter().filter(|o| &tm.node(**o).unwrap().rack == rack).count();
                    eff[h] * n as f64
                })
                .collect();
            let b = Balance { nodes: hosts.len(), ratio: max_min(&own), rack_ratio: max_min(&in_rack) };
            per_dc.insert(d.to_string(), b);
        }
        out.push(per_dc);
    }
    out
}

/// `runs[seed][step]` → the balance of `dc` after each step where that DC
/// grew, per seed.
fn series(runs: &[Vec<BTreeMap<String, Balance>>], dc: &str) -> Vec<Vec<Balance>> {
    runs.iter()
        .map(|steps| {
            let mut s: Vec<Balance> = Vec::new();
            for step in steps {
                if let Some(b) = step.get(dc) {
                    if s.last().is_none_or(|l| l.nodes != b.nodes) {
                        s.push(b.clone());
                    }
                }
            }
            s
        })
        .collect()
}

/// Mean and worst ratio at `nodes` DC nodes over the seeds.
fn stats(series: &[Vec<Balance>], nodes: usize) -> (f64, f64) {
    let v: Vec<f64> = series.iter().map(|s| s[nodes - 1].ratio).collect();
    (v.iter().sum::<f64>() / v.len() as f64, v.iter().copied().fold(f64::MIN, f64::max))
}

/// Runs allocator and random growth, prints the table, and checks that the
/// allocator stays within `bound` at `balanced_at` DC sizes and beats random
/// by far at every size listed in `compare_at`.
fn check(name: &str, layout: &[(&str, &str)], dc: &str, balanced_at: &[usize], compare_at: &[usize], bound: f64) {
    let alloc: Vec<_> = (0..SEEDS).map(|s| grow(layout, s, true)).collect();
    let random: Vec<_> = (0..SEEDS).map(|s| grow(layout, s, false)).collect();
    let (alloc, random) = (series(&alloc, dc), series(&random, dc));
    let nodes = alloc[0].len();
    println!("{name}, {dc}: effective ownership max/min (mean / worst of {SEEDS} seeds)");
    println!("  nodes  allocator      random");
    for n in 1..=nodes {
        let (am, aw) = stats(&alloc, n);
        let (rm, rw) = stats(&random, n);
        println!("  {n:>5}  {am:.3} / {aw:.3}  {rm:.3} / {rw:.3}");
    }
    for &n in balanced_at {
        let (_, worst) = stats(&alloc, n);
        assert!(worst <= bound, "{name}: allocator max/min {worst:.3} at {n} nodes exceeds {bound}");
    }
    for &n in compare_at {
        let (am, _) = stats(&alloc, n);
        let (rm, _) = stats(&random, n);
        assert!(
            (am - 1.0) * 4.0 < rm - 1.0,
            "{name}: allocator {am:.3} not far better than random {rm:.3} at {n} nodes"
        );
    }
    // Between full rack multiples, the share inside each rack stays fair.
    for s in &alloc {
        for b in s {
            assert!(b.rack_ratio <= bound, "{name}: in-rack max/min {:.3} at {} nodes", b.rack_ratio, b.nodes);
        }
    }
}

const RACKS: [&str; 3] = ["r1", "r2", "r3"];

#[test]
fn one_dc_three_racks() {
    let layout: Vec<_> = (0..12).map(|i| ("dc1", RACKS[i % 3])).collect();
    check("1 DC, 3 racks", &layout, "dc1", &[3, 6, 9, 12], &[6, 9, 12], 1.15);
}

#[test]
fn one_dc_one_rack() {
    let layout: Vec<_> = (0..12).map(|_| ("dc1", "r1")).collect();
    let all: Vec<usize> = (1..=12).collect();
    check("1 DC, 1 rack", &layout, "dc1", &all, &[6, 9, 12], 1.15);
}

#[test]
fn two_dcs() {
    // Joins alternate between dc1 (3 racks) and dc2 (1 rack), 12 nodes each.
    let layout: Vec<_> =
        (0..24).map(|i| if i % 2 == 0 { ("dc1", RACKS[(i / 2) % 3]) } else { ("dc2", "r1") }).collect();
    check("2 DCs", &layout, "dc1", &[3, 6, 9, 12], &[6, 9, 12], 1.15);
    let all: Vec<usize> = (1..=12).collect();
    check("2 DCs", &layout, "dc2", &all, &[6, 9, 12], 1.15);
}

#[test]
fn allocation_contract() {
    let mut rng = StdRng::seed_from_u64(11);
    let mut tm = TokenMetadata::new();
    assert!(allocate_tokens(&tm, "dc1", "r1", 0, 3, &mut rng).is_empty());

    // The first node of a DC: evenly spaced from a random offset.
    let first = allocate_tokens(&tm, "dc1", "r1", 8, 3, &mut rng);
    assert_eq!(first.len(), 8);
    let step = 1i64 << 61;
    for w in first.windows(2) {
        assert_eq!(w[1].wrapping_sub(w[0]), step);
    }
    tm.add_node(NodeInfo::new(HostId(1), "dc1", "r1"), first.clone()).unwrap();

    // Later nodes: distinct, sorted, unowned, deterministic for a seed.
    for (i, rack) in ["r2", "r3", "r1", "r2"].iter().enumerate() {
        let a = allocate_tokens(&tm, "dc1", rack, 8, 0, &mut StdRng::seed_from_u64(i as u64));
        let b = allocate_tokens(&tm, "dc1", rack, 8, 0, &mut StdRng::seed_from_u64(i as u64));
        assert_eq!(a, b);
        assert_eq!(a.len(), 8);
        assert!(a.windows(2).all(|w| w[0] < w[1]));
        assert!(a.iter().all(|&t| t != Token::MIN && tm.owner_of(t).is_none()));
        tm.add_node(NodeInfo::new(HostId(i as u128 + 2), "dc1", *rack), a).unwrap();
    }

    // A new DC's first node steps past tokens another DC already owns: put
    // dc1's tokens exactly where dc2's evenly spaced ones would land.
    let offset: u64 = StdRng::seed_from_u64(5).gen();
    let mut tm = TokenMetadata::new();
    let clash: Vec<Token> = (0..4u64).map(|i| offset.wrapping_add(i << 62) as i64).collect();
    tm.add_node(NodeInfo::new(HostId(1), "dc1", "r1"), clash.clone()).unwrap();
    let dc2 = allocate_tokens(&tm, "dc2", "r1", 4, 3, &mut StdRng::seed_from_u64(5));
    let mut expected: Vec<Token> = clash.iter().map(|t| t.wrapping_add(1)).collect();
    expected.sort_unstable();
    assert_eq!(dc2, expected);
}
