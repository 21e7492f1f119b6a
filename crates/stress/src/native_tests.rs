//! Unit tests of the lean client's pure parts: the EXECUTE frame it writes (read
//! back by the server's own decoder), consistency codes, and token routing.

use bytes::{Bytes, BytesMut};
use cql_protocol::frame::parse_header;
use cql_protocol::request::{decode_request, BoundValue, BoundValues, Request};

use super::*;

/// The server's own decoder reads what `put_execute` wrote: id, consistency, the
/// skip-metadata flag and every value, with nothing left over.
#[test]
fn put_execute_writes_what_the_server_decodes() {
    let mut out = BytesMut::new();
    out.extend_from_slice(b"leading bytes of an earlier frame");
    let start = out.len();
    let values: [&[u8]; 3] = [b"key0000001", b"", &[0xff; 34]];
    put_execute(&mut out, 4321, b"0123456789abcdef", consistency_code(Consistency::LocalQuorum), true, values.iter().copied());
    let frame = &out[start..];
    let header = parse_header(frame, 1 << 20).expect("valid header").expect("whole header");
    assert_eq!((header.stream, header.opcode, header.flags), (4321, Opcode::Execute, 0));
    assert_eq!(header.frame_len(), frame.len());
    let body = Bytes::copy_from_slice(&frame[HEADER_LEN..]);
    let Request::Execute { id, params } = decode_request(&header, body, None).expect("decodes") else {
        panic!("not an EXECUTE");
    };
    assert_eq!(&id[..], b"0123456789abcdef");
    assert_eq!(format!("{:?}", params.consistency), "LocalQuorum");
    assert!(params.skip_metadata);
    assert_eq!(params.page_size, None);
    let BoundValues::Positional(got) = params.values else { panic!("named values") };
    let want: Vec<BoundValue> = values.iter().map(|v| BoundValue::Set(Bytes::copy_from_slice(v))).collect();
    assert_eq!(got, want);
}

#[test]
fn every_consistency_level_has_its_protocol_code() {
    use Consistency::*;
    let mut out = BytesMut::new();
    for (level, name) in [
        (Any, "Any"),
        (One, "One"),
        (Two, "Two"),
        (Three, "Three"),
        (Quorum, "Quorum"),
        (All, "All"),
        (LocalQuorum, "LocalQuorum"),
        (EachQuorum, "EachQuorum"),
        (LocalOne, "LocalOne"),
    ] {
        out.clear();
        put_execute(&mut out, 0, b"id", consistency_code(level), false, std::iter::empty());
        let header = parse_header(&out, 1 << 20).expect("header").expect("whole");
        let Request::Execute { params, .. } = decode_request(&header, Bytes::copy_from_slice(&out[HEADER_LEN..]), None).expect("decodes")
        else {
            panic!("not an EXECUTE")
        };
        assert_eq!(format!("{:?}", params.consistency), name);
        assert!(!params.skip_metadata);
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
