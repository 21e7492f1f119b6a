//! Balance of `allocate_tokens` versus random tokens while a ring grows.

use rand::rngs::StdRng;
use rand::SeedableRng;
use ring::tokens::random_tokens;
use ring::{allocate_tokens, effective_ownership, HostId, NodeInfo, ReplicationStrategy, TokenMetadata};

/// Grows a ring node by node (`layout[i]` = dc, rack of node i) and returns,
/// after each join, the max/min effective ownership ratio per DC.
fn grow(layout: &[(&str, &str)], rf: u32, num_tokens: usize, seed: u64, balanced: bool) -> Vec<Vec<(String, f64)>> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut tm = TokenMetadata::new();
    let mut dcs: Vec<&str> = layout.iter().map(|l| l.0).collect();
    dcs.sort();
    dcs.dedup();
    let strategy = ReplicationStrategy::network_topology(dcs.iter().map(|d| (*d, rf)));
    let mut out = Vec::new();
    for (i, &(dc, rack)) in layout.iter().enumerate() {
        let tokens = if balanced {
            allocate_tokens(&tm, dc, rack, num_tokens, rf, &mut rng)
        } else {
            loop {
                let t = random_tokens(&mut rng, num_tokens);
                if t.iter().all(|&x| tm.owner_of(x).is_none()) {
                    break t;
                }
            }
        };
        assert_eq!(tokens.len(), num_tokens);
        tm.add_node(NodeInfo::new(HostId(i as u128 + 1), dc, rack), tokens).unwrap();
        let eff = effective_ownership(&tm, &strategy);
        let mut per_dc = Vec::new();
        for d in &dcs {
            let v: Vec<f64> = tm.nodes_in_dc(d).map(|h| eff[&h]).collect();
            if v.is_empty() {
                continue;
            }
            let max = v.iter().cloned().fold(f64::MIN, f64::max);
            let min = v.iter().cloned().fold(f64::MAX, f64::min);
            per_dc.push((d.to_string(), max / min));
        }
        out.push(per_dc);
    }
    out
}

fn layout_one_dc(racks: usize, n: usize) -> Vec<(&'static str, &'static str)> {
    const R: [&str; 4] = ["r1", "r2", "r3", "r4"];
    (0..n).map(|i| ("dc1", R[i % racks])).collect()
}

#[test]
fn explore() {
    for (name, layout) in [
        ("1dc 3racks", layout_one_dc(3, 24)),
        ("1dc 1rack", layout_one_dc(1, 24)),
        ("1dc 4racks", layout_one_dc(4, 24)),
    ] {
        for seed in 0..3 {
            let a = grow(&layout, 3, 16, seed, true);
            let r = grow(&layout, 3, 16, seed, false);
            let fmt = |v: &Vec<Vec<(String, f64)>>| {
                v.iter().map(|d| format!("{:.2}", d[0].1)).collect::<Vec<_>>().join(" ")
            };
            println!("{name} seed {seed}\n  alloc  {}\n  random {}", fmt(&a), fmt(&r));
        }
    }
}
