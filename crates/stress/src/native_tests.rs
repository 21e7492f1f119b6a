//! Unit tests of the lean client's pure parts: consistency levels and token
//! routing.

use super::*;

/// Every level maps to the protocol level of the same name (the frame then
/// carries `types::Consistency`'s code, the one the server decodes;
/// `encode_execute` is checked against `encode_request` in `cql-protocol`).
#[test]
fn every_consistency_level_maps_to_the_protocol_level_of_its_name() {
    let names: Vec<&str> = Consistency::ALL_NAMES.split(", ").collect();
    assert_eq!(names.len(), 9);
    for name in names {
        let level = Consistency::parse(name).expect("a level");
        assert_eq!(level.name(), name);
        assert_eq!(protocol_consistency(level).name(), name);
    }
}

/// A ring of three tokens: (-100, 0, 100), each range owned by its end token's
/// replicas, with the range above the last token wrapping to the first.
fn three_ranges(local: [bool; 3]) -> Routes {
    Routes::new(vec![
        (100, vec![(2, local[2]), (0, local[0])]),
        (-100, vec![(0, local[0]), (1, local[1])]),
        (0, vec![(1, local[1]), (2, local[2])]),
    ])
}

#[test]
fn a_token_goes_to_the_range_that_ends_at_or_after_it() {
    let routes = three_ranges([true; 3]);
    // Pick 0: the first replica of the range.
    for (token, node) in [(i64::MIN + 1, 0), (-100, 0), (-99, 1), (0, 1), (1, 2), (100, 2), (101, 0), (i64::MAX, 0)] {
        assert_eq!(routes.node(token, 0), Some(node), "token {token}");
    }
    // Picks cycle over the range's replicas.
    assert_eq!([0, 1, 2, 3].map(|pick| routes.node(50, pick)), [Some(2), Some(0), Some(2), Some(0)]);
}

#[test]
fn the_preferred_data_center_comes_first_and_alone() {
    // Only node 1 is local: ranges that have it always pick it.
    let routes = three_ranges([false, true, false]);
    for pick in 0..4 {
        assert_eq!(routes.node(-150, pick), Some(1));
        assert_eq!(routes.node(-50, pick), Some(1));
    }
    // A range without a local replica uses all of its replicas.
    assert_eq!([0, 1].map(|pick| routes.node(50, pick)), [Some(2), Some(0)]);
}

#[test]
fn an_unknown_ring_routes_nowhere() {
    assert_eq!(Routes::new(Vec::new()).node(5, 0), None);
    // A range whose replicas are unknown (no node the driver knows).
    assert_eq!(Routes::new(vec![(0, Vec::new())]).node(5, 0), None);
}
