//! Unit tests of the driverless setup: replica placement on a ring, the
//! replication map, and the decoding of the system tables' cells.

use super::*;

fn node(last: u8, dc: &str, tokens: &[i64]) -> NodeRing {
    NodeRing { addr: SocketAddr::from(([127, 0, 0, last], 9042)), dc: Some(dc.to_string()), tokens: tokens.to_vec() }
}

/// Three nodes, two tokens each, interleaved: ring order 0 1 2 0 1 2.
fn three_nodes(dcs: [&str; 3]) -> Vec<NodeRing> {
    vec![node(1, dcs[0], &[-300, 0]), node(2, dcs[1], &[-200, 100]), node(3, dcs[2], &[-100, 200])]
}

#[test]
fn simple_strategy_takes_the_next_distinct_nodes_from_the_owner_on() {
    let nodes = three_nodes(["dc1"; 3]);
    let rf1 = replicas(&nodes, &Strategy::Simple(1));
    assert_eq!(
        rf1,
        vec![(-300, vec![0]), (-200, vec![1]), (-100, vec![2]), (0, vec![0]), (100, vec![1]), (200, vec![2])]
    );
    let rf2 = replicas(&nodes, &Strategy::Simple(2));
    assert_eq!(rf2[2], (-100, vec![2, 0]));
    assert_eq!(rf2[5], (200, vec![2, 0]), "wraps around the ring");
    // More replicas than nodes: every node once.
    assert!(replicas(&nodes, &Strategy::Simple(5)).iter().all(|(_, r)| r.len() == 3));
    assert_eq!(replicas(&nodes, &Strategy::Everywhere)[1], (-200, vec![1, 2, 0]));
    assert!(replicas(&[], &Strategy::Simple(1)).is_empty());
}

#[test]
fn network_topology_strategy_counts_per_data_center() {
    let nodes = three_nodes(["dc1", "dc2", "dc1"]);
    let dcs =
        |pairs: &[(&str, u32)]| Strategy::NetworkTopology(pairs.iter().map(|(d, f)| (d.to_string(), *f)).collect());
    // dc1: one replica, the first dc1 node from the token on; dc2: one.
    let ring = replicas(&nodes, &dcs(&[("dc1", 1), ("dc2", 1)]));
    assert_eq!(ring[0], (-300, vec![0, 1]));
    assert_eq!(ring[1], (-200, vec![1, 2]));
    // A data center the keyspace does not name gets nothing.
    let ring = replicas(&nodes, &dcs(&[("dc1", 2)]));
    assert_eq!(ring[1], (-200, vec![2, 0]));
    assert!(ring.iter().all(|(_, r)| !r.contains(&1)));
}

#[test]
fn the_replication_map_gives_the_strategy() {
    let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    };
    assert_eq!(
        Strategy::parse(&map(&[("class", "org.apache.cassandra.locator.SimpleStrategy"), ("replication_factor", "3")])),
        Strategy::Simple(3)
    );
    assert_eq!(
        Strategy::parse(&map(&[("class", "NetworkTopologyStrategy"), ("dc1", "3/1"), ("dc2", "2")])),
        Strategy::NetworkTopology(
            map(&[("dc1", "3"), ("dc2", "2")]).into_iter().map(|(k, v)| (k, v.parse().unwrap_or(0))).collect()
        )
    );
    assert_eq!(Strategy::parse(&map(&[("class", "org.apache.cassandra.locator.LocalStrategy")])), Strategy::Everywhere);
    assert_eq!(Strategy::parse(&map(&[("class", "SimpleStrategy")])), Strategy::Everywhere);
    assert_eq!(Strategy::of(&Replication::Simple { factor: 2 }), Strategy::Simple(2));
}

fn collection(items: &[&[u8]]) -> Vec<u8> {
    let mut out = (items.len() as i32).to_be_bytes().to_vec();
    for item in items {
        out.extend_from_slice(&(item.len() as i32).to_be_bytes());
        out.extend_from_slice(item);
    }
    out
}

#[test]
fn collections_and_inets_decode_exactly_or_not_at_all() {
    let set = collection(&[b"-5", b"7"]);
    assert_eq!(decode_collection(&set, 1), Some(vec![b"-5".to_vec(), b"7".to_vec()]));
    // A map's count is of pairs.
    let mut map = collection(&[b"class", b"SimpleStrategy", b"replication_factor", b"1"]);
    map[3] = 2;
    assert_eq!(decode_collection(&map, 2).map(|m| m.len()), Some(4));
    assert_eq!(decode_collection(&set[..set.len() - 1], 1), None, "truncated");
    assert_eq!(decode_collection(&[set.clone(), vec![0]].concat(), 1), None, "trailing bytes");
    assert_eq!(decode_collection(&[0xff, 0xff, 0xff, 0xff], 1), None, "negative count");
    assert_eq!(decode_collection(&[0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff], 1), None, "null element");
    assert_eq!(decode_collection(&[0, 0, 0, 0], 1), Some(Vec::new()));
    assert_eq!(decode_inet(&[127, 0, 0, 2]), Some(IpAddr::from([127, 0, 0, 2])));
    assert_eq!(decode_inet(&[0; 16]), Some(IpAddr::from([0u8; 16])));
    assert_eq!(decode_inet(&[1, 2, 3]), None);
}
