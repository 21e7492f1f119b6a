//! Cross-checks replica placement against the DataStax python driver's
//! `make_token_replica_map` (fixture made by `fixtures/gen_placement.py`).

#![allow(clippy::unwrap_used, reason = "an integration test: a failed unwrap names its line")]

use std::collections::BTreeMap;

use ring::{HostId, NodeInfo, ReplicationStrategy, Token, TokenMetadata};

const FIXTURE: &str = include_str!("fixtures/placement.txt");

struct Case {
    strategy: ReplicationStrategy,
    spec: String,
    expected: Vec<(Token, Vec<HostId>)>,
}

struct Topology {
    index: usize,
    tm: TokenMetadata,
    cases: Vec<Case>,
}

fn parse() -> Vec<Topology> {
    let mut out: Vec<Topology> = Vec::new();
    for line in FIXTURE.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let words: Vec<&str> = line.split(' ').collect();
        match words[0] {
            "topology" => {
                out.push(Topology { index: words[1].parse().unwrap(), tm: TokenMetadata::new(), cases: Vec::new() })
            }
            "node" => {
                let host = HostId(words[1].parse().unwrap());
                let tokens = words[4..].iter().map(|t| t.parse::<Token>().unwrap());
                let topo = out.last_mut().unwrap();
                topo.tm.add_node(NodeInfo::new(host, words[2], words[3]), tokens).unwrap();
            }
            "strategy" => {
                let strategy = match words[1] {
                    "simple" => ReplicationStrategy::Simple { rf: words[2].parse().unwrap() },
                    "nts" => ReplicationStrategy::network_topology(words[2..].iter().map(|kv| {
                        let (dc, rf) = kv.split_once(':').unwrap();
                        (dc, rf.parse::<u32>().unwrap())
                    })),
                    other => panic!("unknown strategy {other}"),
                };
                let spec = words[1..].join(" ");
                out.last_mut().unwrap().cases.push(Case { strategy, spec, expected: Vec::new() });
            }
            "end" => {}
            _ => {
                let token: Token = words[0].parse().unwrap();
                let hosts = words[1..].iter().map(|h| HostId(h.parse().unwrap())).collect();
                out.last_mut().unwrap().cases.last_mut().unwrap().expected.push((token, hosts));
            }
        }
    }
    out
}

fn sorted(mut v: Vec<HostId>) -> Vec<HostId> {
    v.sort();
    v
}

#[test]
fn placement_matches_python_driver() {
    let topologies = parse();
    assert_eq!(topologies.len(), 10);
    let (mut checked, mut rack_repeats) = (0, 0);
    for topo in &topologies {
        let tm = &topo.tm;
        for case in &topo.cases {
            // Every ring token is covered, in ring order.
            let ring: Vec<Token> = tm.sorted_tokens().map(|(t, _)| t).collect();
            let listed: Vec<Token> = case.expected.iter().map(|(t, _)| *t).collect();
            assert_eq!(ring, listed, "topology {} {}", topo.index, case.spec);
            for (token, driver) in &case.expected {
                let ours = case.strategy.replicas(tm, *token);
                let what = format!("topology {} {} token {token}", topo.index, case.spec);
                assert_eq!(sorted(ours.clone()), sorted(driver.clone()), "{what}: ours {ours:?}");
                let mut distinct = sorted(ours.clone());
                distinct.dedup();
                assert_eq!(distinct.len(), ours.len(), "{what}: duplicate replica");
                match &case.strategy {
                    // SimpleStrategy order is the same walk order in both.
                    ReplicationStrategy::Simple { .. } => assert_eq!(&ours, driver, "{what}"),
                    // The primary replica leads whenever the owner's DC wants one.
                    ReplicationStrategy::NetworkTopology { dcs } => {
                        let owner = tm.owner_of(*token).unwrap();
                        let dc = &tm.node(owner).unwrap().dc;
                        if dcs.get(dc).copied().unwrap_or(0) > 0 {
                            assert_eq!(ours[0], owner, "{what}");
                        }
                        // Count the cases exercising rack repeats.
                        let mut per_dc: BTreeMap<&str, (usize, Vec<&str>)> = BTreeMap::new();
                        for h in &ours {
                            let info = tm.node(*h).unwrap();
                            let e = per_dc.entry(info.dc.as_str()).or_default();
                            e.0 += 1;
                            if !e.1.contains(&info.rack.as_str()) {
                                e.1.push(&info.rack);
                            }
                        }
                        if per_dc.values().any(|(n, racks)| racks.len() < *n) {
                            rack_repeats += 1;
                        }
                    }
                    ReplicationStrategy::Local => unreachable!(),
                }
                checked += 1;
            }
        }
    }
    println!("checked {checked} replica sets, {rack_repeats} with rack repeats");
    assert!(checked > 1000);
    assert!(rack_repeats > 50, "fixture should exercise racks running out");
}
