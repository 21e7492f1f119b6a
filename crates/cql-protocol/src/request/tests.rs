//! Request codec tests: golden bytes, round trips, zero copy, and a seeded
//! property loop over truncations, mutations and random bytes.

use super::*;
use crate::frame::{parse_header, HEADER_LEN};
use ::types::Consistency;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const MAX: u32 = 256 * 1024 * 1024;

fn split(frame: &[u8]) -> (FrameHeader, Bytes) {
    let header = parse_header(frame, MAX).unwrap().unwrap();
    assert_eq!(frame.len(), header.frame_len());
    (header, Bytes::copy_from_slice(&frame[HEADER_LEN..]))
}

fn encode(stream: i16, compression: Option<Compression>, req: &Request) -> BytesMut {
    let mut out = BytesMut::new();
    encode_request(&mut out, stream, compression, req);
    out
}

fn round_trip(compression: Option<Compression>, req: &Request) {
    let frame = encode(3, compression, req);
    let (header, body) = split(&frame);
    assert_eq!(header.stream, 3);
    assert_eq!(header.opcode, req.opcode());
    let got = decode_request(&header, body, compression).unwrap();
    assert_eq!(&got, req);
}

fn value(b: &'static [u8]) -> BoundValue {
    BoundValue::Set(Bytes::from_static(b))
}

fn full_params() -> QueryParams {
    QueryParams {
        consistency: Consistency::LocalQuorum,
        values: BoundValues::Positional(vec![value(b"\x00\x00\x00\x2a"), BoundValue::Null, BoundValue::Unset]),
        skip_metadata: true,
        page_size: Some(5000),
        paging_state: Some(Bytes::from_static(b"state")),
        serial_consistency: Some(Consistency::LocalSerial),
        default_timestamp: Some(1_700_000_000_000_000),
        keyspace: None,
        now_in_seconds: None,
    }
}

/// One of every request kind, with most options used.
pub(crate) fn sample_requests() -> Vec<Request> {
    let mut named = QueryParams::new(Consistency::One);
    named.values = BoundValues::Named(vec![("k".into(), value(b"abc")), ("v".into(), BoundValue::Null)]);
    vec![
        Request::Startup(StartupOptions::new("3.0.0").with("COMPRESSION", "lz4").with("DRIVER_NAME", "test")),
        Request::Options,
        Request::Query { query: "SELECT * FROM ks.t WHERE k = ?".into(), params: full_params() },
        Request::Query { query: "INSERT INTO t (k, v) VALUES (:k, :v)".into(), params: named.clone() },
        Request::Query { query: "USE ks".into(), params: QueryParams::new(Consistency::Any) },
        Request::Prepare { query: "SELECT v FROM t WHERE k = ?".into(), keyspace: None },
        Request::Execute {
            id: Bytes::from_static(&[0xde, 0xad, 0xbe, 0xef]),
            result_metadata_id: None,
            params: full_params(),
        },
        Request::Execute { id: Bytes::from_static(b"id"), result_metadata_id: None, params: named },
        Request::Batch(Batch {
            kind: BatchKind::Unlogged,
            statements: vec![
                BatchStatement::Query {
                    query: "INSERT INTO t (k) VALUES (?)".into(),
                    values: BoundValues::Positional(vec![value(b"\x01")]),
                },
                BatchStatement::Prepared {
                    id: Bytes::from_static(b"0123456789abcdef"),
                    values: BoundValues::Positional(vec![value(b""), BoundValue::Unset]),
                },
            ],
            consistency: Consistency::Quorum,
            serial_consistency: Some(Consistency::Serial),
            default_timestamp: Some(42),
            keyspace: None,
            now_in_seconds: None,
        }),
        Request::Batch(Batch {
            kind: BatchKind::Counter,
            statements: vec![BatchStatement::Prepared {
                id: Bytes::from_static(b"p"),
                values: BoundValues::Named(vec![("c".into(), value(b"\x00\x00\x00\x00\x00\x00\x00\x01"))]),
            }],
            consistency: Consistency::One,
            serial_consistency: None,
            default_timestamp: None,
            keyspace: None,
            now_in_seconds: None,
        }),
        Request::Register { events: vec!["TOPOLOGY_CHANGE".into(), "STATUS_CHANGE".into(), "SCHEMA_CHANGE".into()] },
        Request::AuthResponse(Bytes::from_static(b"\0cassandra\0cassandra")),
    ]
}

#[test]
fn golden_startup() {
    let frame = encode(0, None, &Request::Startup(StartupOptions::new("3.0.0")));
    let mut want = vec![0x04, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x16];
    want.extend_from_slice(b"\x00\x01\x00\x0bCQL_VERSION\x00\x053.0.0");
    assert_eq!(&frame[..], &want[..]);
    let (h, body) = split(&want);
    match decode_request(&h, body, None).unwrap() {
        Request::Startup(o) => assert_eq!(o.cql_version(), Some("3.0.0")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn golden_options() {
    let frame = encode(1, Some(Compression::Lz4), &Request::Options);
    assert_eq!(&frame[..], &[0x04, 0x00, 0x00, 0x01, 0x05, 0x00, 0x00, 0x00, 0x00]);
}

#[test]
fn golden_query_with_values_and_paging() {
    let query = "SELECT * FROM t WHERE k = ?";
    let mut want = vec![0x04, 0x00, 0x00, 0x02, 0x07, 0, 0, 0, 0];
    let mut body = Vec::new();
    body.extend_from_slice(&(query.len() as u32).to_be_bytes());
    body.extend_from_slice(query.as_bytes());
    body.extend_from_slice(&[0x00, 0x01]); // ONE
    body.push(0x01 | 0x04 | 0x08); // values, page size, paging state
    body.extend_from_slice(&[0x00, 0x01, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x01]);
    body.extend_from_slice(&[0x00, 0x00, 0x00, 0x64]); // 100 rows
    body.extend_from_slice(&[0x00, 0x00, 0x00, 0x02, b'a', b'b']);
    want[5..9].copy_from_slice(&(body.len() as u32).to_be_bytes());
    want.extend_from_slice(&body);

    let mut params = QueryParams::new(Consistency::One);
    params.values = BoundValues::Positional(vec![value(b"\x00\x00\x00\x01")]);
    params.page_size = Some(100);
    params.paging_state = Some(Bytes::from_static(b"ab"));
    let req = Request::Query { query: query.into(), params };
    assert_eq!(&encode(2, None, &req)[..], &want[..]);
    let (h, body) = split(&want);
    assert_eq!(decode_request(&h, body, None).unwrap(), req);
}

#[test]
fn round_trips_plain_and_compressed() {
    for req in sample_requests() {
        round_trip(None, &req);
        round_trip(Some(Compression::Lz4), &req);
        round_trip(Some(Compression::Snappy), &req);
    }
}

#[test]
fn startup_is_never_compressed() {
    let frame = encode(0, Some(Compression::Snappy), &Request::Startup(StartupOptions::new("3.0.0")));
    assert_eq!(frame[1] & crate::FLAG_COMPRESSION, 0);
}

#[test]
fn tracing_and_custom_payload() {
    let payload = vec![("k".to_string(), Some(Bytes::from_static(b"v"))), ("n".to_string(), None)];
    for req in sample_requests() {
        let mut out = BytesMut::new();
        encode_request_with(&mut out, 9, Some(Compression::Lz4), true, Some(&payload), &req);
        let (h, body) = split(&out);
        assert!(h.is_tracing() && h.has_custom_payload());
        let f = decode_request_frame(&h, body, Some(Compression::Lz4)).unwrap();
        assert!(f.tracing);
        assert_eq!(f.custom_payload.as_ref(), Some(&payload));
        assert_eq!(f.request, req);
    }
}

#[test]
fn values_are_slices_of_the_body() {
    let req = Request::Execute { id: Bytes::from_static(b"id"), result_metadata_id: None, params: full_params() };
    let frame = encode(0, None, &req);
    let (h, body) = split(&frame);
    let range = body.as_ptr_range();
    let Request::Execute { id, params, .. } = decode_request(&h, body.clone(), None).unwrap() else { panic!() };
    assert!(range.contains(&id.as_ptr()));
    let BoundValues::Positional(values) = params.values else { panic!() };
    let BoundValue::Set(v) = &values[0] else { panic!() };
    assert!(range.contains(&v.as_ptr()));
    assert!(range.contains(&params.paging_state.unwrap().as_ptr()));
}

#[test]
fn compressed_frame_without_negotiation_is_refused() {
    let req = Request::Prepare { query: "SELECT 1".into(), keyspace: None };
    let frame = encode(0, Some(Compression::Lz4), &req);
    let (h, body) = split(&frame);
    assert_eq!(decode_request(&h, body, None), Err(ProtocolError::CompressionNotNegotiated));
}

#[test]
fn bad_fields_give_cassandra_errors() {
    let decode = |opcode: Opcode, body: &[u8]| {
        let h = FrameHeader { version: 4, flags: 0, stream: 0, opcode, body_len: body.len() as u32 };
        decode_request(&h, Bytes::copy_from_slice(body), None)
    };
    // QUERY "" at consistency 0x000B.
    assert_eq!(decode(Opcode::Query, &[0, 0, 0, 0, 0, 0x0B, 0]), Err(ProtocolError::UnknownConsistency(11)));
    // A value of length -3.
    let body = [0, 0, 0, 0, 0, 1, 0x01, 0, 1, 0xFF, 0xFF, 0xFF, 0xFD];
    assert_eq!(decode(Opcode::Query, &body), Err(ProtocolError::InvalidValueLength(-3)));
    // Default timestamp i64::MIN.
    let mut body = vec![0, 0, 0, 0, 0, 1, 0x20];
    body.extend_from_slice(&i64::MIN.to_be_bytes());
    assert_eq!(decode(Opcode::Query, &body), Err(ProtocolError::TimestampOutOfBound(i64::MIN)));
    // Batch type 3, query kind 2, reserved flag bits.
    assert_eq!(decode(Opcode::Batch, &[3, 0, 0, 0, 1, 0]), Err(ProtocolError::InvalidBatchType(3)));
    assert_eq!(decode(Opcode::Batch, &[0, 0, 1, 2]), Err(ProtocolError::InvalidBatchQueryKind(2)));
    assert_eq!(decode(Opcode::Batch, &[0, 0, 0, 0, 1, 0x01]), Err(ProtocolError::InvalidBatchFlags(1)));
    // A response opcode.
    assert_eq!(decode(Opcode::Ready, &[]), Err(ProtocolError::NotARequest(Opcode::Ready)));
}

#[test]
fn batch_names_flag_is_honoured() {
    // Same statements, once positional and once named: each decodes as sent.
    let positional = sample_requests().into_iter().find(|r| matches!(r, Request::Batch(_))).unwrap();
    round_trip(None, &positional);
    let Request::Batch(mut b) = positional else { unreachable!() };
    for s in &mut b.statements {
        let (BatchStatement::Query { values, .. } | BatchStatement::Prepared { values, .. }) = s;
        if let BoundValues::Positional(v) = values {
            *values = BoundValues::Named(v.iter().enumerate().map(|(i, v)| (format!("m{i}"), v.clone())).collect());
        }
    }
    round_trip(None, &Request::Batch(b));
}

fn valid_frames() -> Vec<(BytesMut, Option<Compression>)> {
    let mut frames = Vec::new();
    for req in sample_requests() {
        for c in [None, Some(Compression::Lz4), Some(Compression::Snappy)] {
            frames.push((encode(1, c, &req), c));
        }
    }
    frames
}

#[test]
fn every_truncation_is_an_error() {
    for (frame, c) in valid_frames() {
        let (h, body) = split(&frame);
        for n in 0..body.len() {
            let mut short = h;
            short.body_len = n as u32;
            let got = decode_request(&short, body.slice(..n), c);
            assert!(got.is_err(), "{:?} cut at {n}/{} decoded: {got:?}", h.opcode, body.len());
        }
        // And the header itself, byte by byte.
        for n in 0..HEADER_LEN {
            assert_eq!(parse_header(&frame[..n], MAX), Ok(None));
        }
    }
}

#[test]
fn mutated_and_random_frames_never_panic() {
    let mut rng = StdRng::seed_from_u64(0x5EED_CAFE);
    let frames = valid_frames();
    for _ in 0..20_000 {
        let (frame, c) = &frames[rng.gen_range(0..frames.len())];
        let mut bytes = frame.to_vec();
        for _ in 0..rng.gen_range(1..4) {
            let i = rng.gen_range(HEADER_LEN..bytes.len().max(HEADER_LEN + 1));
            if let Some(b) = bytes.get_mut(i) {
                *b = rng.gen();
            }
        }
        let (h, _) = split(frame);
        let _ = decode_request(&h, Bytes::copy_from_slice(&bytes[HEADER_LEN..]), *c);
    }
    let opcodes = [
        Opcode::Startup,
        Opcode::Options,
        Opcode::Query,
        Opcode::Prepare,
        Opcode::Execute,
        Opcode::Batch,
        Opcode::Register,
        Opcode::AuthResponse,
    ];
    for _ in 0..20_000 {
        let len = rng.gen_range(0..64);
        let bytes: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        let _ = parse_header(&bytes, MAX);
        let flags = rng.gen::<u8>() & 0x07;
        let opcode = opcodes[rng.gen_range(0..opcodes.len())];
        let h = FrameHeader { version: 4, flags, stream: 0, opcode, body_len: len as u32 };
        let c = [None, Some(Compression::Lz4), Some(Compression::Snappy)][rng.gen_range(0..3)];
        let _ = decode_request(&h, Bytes::from(bytes), c);
    }
}

/// The allocation-free client encoder writes exactly what `encode_request` writes
/// for the same EXECUTE (and what the server decodes back), with or without
/// values, after earlier bytes in the buffer.
#[test]
fn encode_execute_matches_encode_request() {
    let cases: [(&[&'static [u8]], bool, Consistency); 4] = [
        (&[], false, Consistency::One),
        (&[b"key0000001"], true, Consistency::LocalOne),
        (&[b"key0000001", b"", &[0xff; 34]], false, Consistency::Quorum),
        (&[b"k", b"v"], true, Consistency::EachQuorum),
    ];
    for (values, skip_metadata, consistency) in cases {
        let mut params = QueryParams::new(consistency);
        params.values = BoundValues::Positional(values.iter().map(|v| value(v)).collect());
        params.skip_metadata = skip_metadata;
        let request =
            Request::Execute { id: Bytes::from_static(b"0123456789abcdef"), result_metadata_id: None, params };
        let want = encode(4321, None, &request);
        let mut got = BytesMut::from(&b"an earlier frame"[..]);
        encode_execute(&mut got, 4321, b"0123456789abcdef", consistency, skip_metadata, values.iter().copied());
        assert_eq!(&got[16..], &want[..], "{values:?}");
        let (header, body) = split(&got[16..]);
        assert_eq!(decode_request(&header, body, None).unwrap(), request);
    }
    // With a serial consistency (a conditional statement's Paxos phase), with and without values.
    for (values, serial) in [(&[b"k" as &[u8], b"v"][..], Consistency::Serial), (&[][..], Consistency::LocalSerial)] {
        let mut params = QueryParams::new(Consistency::Quorum);
        params.values = BoundValues::Positional(values.iter().map(|v| value(v)).collect());
        params.serial_consistency = Some(serial);
        let request = Request::Execute { id: Bytes::from_static(b"id"), result_metadata_id: None, params };
        let want = encode(7, None, &request);
        let mut got = BytesMut::new();
        encode_execute_serial(&mut got, 7, b"id", Consistency::Quorum, Some(serial), false, values.iter().copied());
        assert_eq!(&got[..], &want[..], "{values:?} {serial:?}");
    }
}

/// The sample requests as a v5 client sends them: EXECUTE with a result
/// metadata id, and the v5-only fields set.
fn sample_requests_v5() -> Vec<Request> {
    sample_requests()
        .into_iter()
        .map(|r| match r {
            Request::Query { query, mut params } => {
                params.keyspace = Some("ks".into());
                params.now_in_seconds = Some(1_700_000_000);
                Request::Query { query, params }
            }
            Request::Prepare { query, .. } => Request::Prepare { query, keyspace: Some("other".into()) },
            Request::Execute { id, mut params, .. } => {
                params.now_in_seconds = Some(-5);
                Request::Execute { id, result_metadata_id: Some(Bytes::from_static(b"md5-of-columns")), params }
            }
            Request::Batch(mut b) => {
                b.keyspace = Some("ks2".into());
                b.now_in_seconds = Some(7);
                Request::Batch(b)
            }
            other => other,
        })
        .collect()
}

fn encode_v5(stream: i16, req: &Request) -> BytesMut {
    let mut out = BytesMut::new();
    encode_request_in(&mut out, 5, stream, None, false, None, req);
    out
}

#[test]
fn v5_requests_round_trip() {
    for req in sample_requests_v5().into_iter().chain(sample_requests()) {
        let frame = encode_v5(9, &req);
        let (header, body) = split(&frame);
        assert_eq!(header.version, 5);
        let got = decode_request(&header, body, None).unwrap();
        // v5 EXECUTE always carries a result metadata id (empty when the client had none).
        let want = match req {
            Request::Execute { id, result_metadata_id: None, params } => {
                Request::Execute { id, result_metadata_id: Some(Bytes::new()), params }
            }
            other => other,
        };
        assert_eq!(got, want);
    }
}

#[test]
fn v4_drops_v5_only_fields() {
    // The v4 layout has no room for them: a v4 encoder leaves them out.
    for req in sample_requests_v5() {
        let (header, body) = split(&encode(1, None, &req));
        let got = decode_request(&header, body, None).unwrap();
        match got {
            Request::Query { params, .. } | Request::Execute { params, .. } => {
                assert_eq!((params.keyspace, params.now_in_seconds), (None, None));
            }
            Request::Prepare { keyspace, .. } => assert_eq!(keyspace, None),
            Request::Batch(b) => assert_eq!((b.keyspace, b.now_in_seconds), (None, None)),
            _ => {}
        }
    }
}

#[test]
fn golden_v5_query_flags_are_an_int() {
    let mut params = QueryParams::new(Consistency::One);
    params.keyspace = Some("ks".into());
    params.now_in_seconds = Some(0x0102_0304);
    params.page_size = Some(10);
    let frame = encode_v5(2, &Request::Query { query: "SELECT 1".into(), params });
    let mut want = vec![0x05, 0x00, 0x00, 0x02, 0x07];
    let mut body = Vec::new();
    body.extend_from_slice(&8u32.to_be_bytes());
    body.extend_from_slice(b"SELECT 1");
    body.extend_from_slice(&[0x00, 0x01]); // ONE
    body.extend_from_slice(&[0x00, 0x00, 0x01, 0x84]); // now_in_seconds, keyspace, page size
    body.extend_from_slice(&10u32.to_be_bytes());
    body.extend_from_slice(b"\x00\x02ks");
    body.extend_from_slice(&[1, 2, 3, 4]);
    want.extend_from_slice(&(body.len() as u32).to_be_bytes());
    want.extend_from_slice(&body);
    assert_eq!(&frame[..], &want[..]);
    // PREPARE: `<query><flags>[<keyspace>]`.
    let frame = encode_v5(3, &Request::Prepare { query: "SELECT 1".into(), keyspace: Some("ks".into()) });
    assert_eq!(&frame[HEADER_LEN..], b"\x00\x00\x00\x08SELECT 1\x00\x00\x00\x01\x00\x02ks");
    let frame = encode_v5(3, &Request::Prepare { query: "SELECT 1".into(), keyspace: None });
    assert_eq!(&frame[HEADER_LEN..], b"\x00\x00\x00\x08SELECT 1\x00\x00\x00\x00");
}

#[test]
fn v5_truncations_are_errors() {
    for req in sample_requests_v5() {
        let frame = encode_v5(1, &req);
        let (header, body) = split(&frame);
        for n in 0..body.len() {
            let mut h = header;
            h.body_len = n as u32;
            // Never a panic; STARTUP/OPTIONS/REGISTER may decode from a prefix.
            let _ = decode_request(&h, body.slice(..n), None);
        }
        if matches!(req, Request::Query { .. } | Request::Execute { .. } | Request::Prepare { .. }) {
            assert!(decode_request(&header, body.slice(..body.len() - 1), None).is_err(), "{req:?}");
        }
    }
}

#[test]
fn v5_envelope_compression_flag_is_ignored() {
    let req = Request::Options;
    let mut frame =
        encode_v5(4, &Request::Query { query: "SELECT 1".into(), params: QueryParams::new(Consistency::One) });
    frame[1] |= crate::frame::FLAG_COMPRESSION;
    let (header, body) = split(&frame);
    assert!(header.is_compressed());
    assert!(matches!(decode_request(&header, body, None), Ok(Request::Query { .. })));
    // In v4 it means a compressed body.
    let mut frame = encode(4, None, &req);
    frame[1] |= crate::frame::FLAG_COMPRESSION;
    let (header, body) = split(&frame);
    assert_eq!(decode_request(&header, body, None), Err(ProtocolError::CompressionNotNegotiated));
}
