//! Response codec tests: golden bytes, round trips of every kind, and a
//! seeded property loop over truncations, mutations and random bytes.

use super::*;
use crate::frame::{parse_response_header, HEADER_LEN};
use ::types::{Consistency, CqlType};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const MAX: u32 = 256 * 1024 * 1024;

fn split(frame: &[u8]) -> (FrameHeader, Bytes) {
    let header = parse_response_header(frame, MAX).unwrap().unwrap();
    assert_eq!(frame.len(), header.frame_len());
    (header, Bytes::copy_from_slice(&frame[HEADER_LEN..]))
}

fn col(name: &str, ty: CqlType) -> ColumnSpec {
    ColumnSpec { keyspace: "ks".into(), table: "t".into(), name: name.into(), ty }
}

fn sample_rows() -> Rows {
    let columns = vec![
        col("k", CqlType::Int),
        col("v", CqlType::Text),
        col("m", CqlType::Map { key: Box::new(CqlType::Text), value: Box::new(CqlType::BigInt), frozen: false }),
    ];
    let mut w = RowsWriter::new(columns.len());
    for i in 0..3i32 {
        w.push_cell(Some(&i.to_be_bytes()));
        w.push_cell(if i == 1 { None } else { Some(b"text") });
        w.push_cell_with(|buf| buf.extend_from_slice(&0i32.to_be_bytes()));
        w.end_row();
    }
    w.finish(RowsMetadata::new(columns).with_paging_state(Some(Bytes::from_static(b"\x01\x02"))))
}

fn errors() -> Vec<ErrorBody> {
    let cl = Consistency::Quorum;
    let kinds = vec![
        ErrorKind::ServerError,
        ErrorKind::ProtocolError,
        ErrorKind::AuthenticationError,
        ErrorKind::Unavailable { consistency: cl, required: 2, alive: 1 },
        ErrorKind::Overloaded,
        ErrorKind::IsBootstrapping,
        ErrorKind::TruncateError,
        ErrorKind::WriteTimeout { consistency: cl, received: 1, block_for: 2, write_type: WriteType::Simple },
        ErrorKind::WriteTimeout { consistency: cl, received: 0, block_for: 2, write_type: WriteType::BatchLog },
        ErrorKind::ReadTimeout { consistency: cl, received: 1, block_for: 2, data_present: true },
        ErrorKind::ReadFailure {
            consistency: cl,
            received: 1,
            block_for: 2,
            num_failures: 1,
            data_present: false,
            reasons: vec![("10.0.0.3".parse().unwrap(), 0x0001)],
        },
        ErrorKind::FunctionFailure { keyspace: "ks".into(), function: "f".into(), arg_types: vec!["int".into()] },
        ErrorKind::WriteFailure {
            consistency: Consistency::All,
            received: 2,
            block_for: 3,
            num_failures: 2,
            write_type: WriteType::Cdc,
            reasons: vec![("10.0.0.3".parse().unwrap(), 0x0001), ("2001:db8::7".parse().unwrap(), 0x0003)],
        },
        ErrorKind::WriteTimeout {
            consistency: Consistency::Serial,
            received: 0,
            block_for: 1,
            write_type: WriteType::Cas,
        },
        ErrorKind::SyntaxError,
        ErrorKind::Unauthorized,
        ErrorKind::Invalid,
        ErrorKind::ConfigError,
        ErrorKind::AlreadyExists { keyspace: "ks".into(), table: "".into() },
        ErrorKind::AlreadyExists { keyspace: "ks".into(), table: "t".into() },
        ErrorKind::Unprepared { id: Bytes::from_static(&[1, 2, 3]) },
    ];
    kinds.into_iter().map(|k| ErrorBody::new(k, "something went wrong")).collect()
}

fn schema_changes() -> Vec<SchemaChange> {
    let targets = [
        SchemaChangeTarget::Keyspace("ks".into()),
        SchemaChangeTarget::Table("ks".into(), "t".into()),
        SchemaChangeTarget::Type("ks".into(), "addr".into()),
        SchemaChangeTarget::Function("ks".into(), "f".into(), vec!["int".into(), "text".into()]),
        SchemaChangeTarget::Aggregate("ks".into(), "agg".into(), vec![]),
    ];
    let changes = [SchemaChangeType::Created, SchemaChangeType::Updated, SchemaChangeType::Dropped];
    targets.iter().flat_map(|t| changes.iter().map(move |&change| SchemaChange { change, target: t.clone() })).collect()
}

/// One of every response kind (every error kind, result kind and event).
fn sample_responses() -> Vec<Response> {
    let mut v: Vec<Response> = errors().into_iter().map(Response::Error).collect();
    v.push(Response::Ready);
    v.push(Response::Authenticate("org.apache.cassandra.auth.PasswordAuthenticator".into()));
    v.push(Response::Supported(supported_options()));
    v.push(Response::AuthChallenge(Some(Bytes::from_static(b"challenge"))));
    v.push(Response::AuthSuccess(None));
    v.push(Response::Result(ResultBody::Void));
    v.push(Response::Result(ResultBody::Rows(sample_rows())));
    let mut no_meta = sample_rows();
    no_meta.metadata = no_meta.metadata.without_column_specs();
    v.push(Response::Result(ResultBody::Rows(no_meta)));
    let mut mixed = sample_rows();
    mixed.metadata.global_table_spec = None;
    mixed.metadata.columns[1].table = "other".into();
    v.push(Response::Result(ResultBody::Rows(mixed)));
    v.push(Response::Result(ResultBody::SetKeyspace("ks".into())));
    v.push(Response::Result(ResultBody::Prepared(Box::new(Prepared::new(
        Bytes::from_static(&[0xAB; 16]),
        PreparedMetadata::new(vec![1, 0], vec![col("v", CqlType::Text), col("k", CqlType::Int)]),
        RowsMetadata::new(vec![col("v", CqlType::Text)]),
    )))));
    v.push(Response::Result(ResultBody::Prepared(Box::new(Prepared::new(
        Bytes::from_static(b"x"),
        PreparedMetadata::new(vec![], vec![]),
        RowsMetadata::empty(),
    )))));
    let mut changed = sample_rows();
    changed.metadata.new_metadata_id = Some(result_metadata_id(&changed.metadata.columns));
    v.push(Response::Result(ResultBody::Rows(changed)));
    for sc in schema_changes() {
        v.push(Response::Result(ResultBody::SchemaChange(sc.clone())));
        v.push(Response::Event(Event::SchemaChange(sc)));
    }
    let v4: std::net::SocketAddr = "127.0.0.2:9042".parse().unwrap();
    let v6: std::net::SocketAddr = "[2001:db8::1]:9042".parse().unwrap();
    for change in [TopologyChangeType::NewNode, TopologyChangeType::RemovedNode, TopologyChangeType::MovedNode] {
        v.push(Response::Event(Event::TopologyChange { change, addr: v4 }));
    }
    for change in [StatusChangeType::Up, StatusChangeType::Down] {
        v.push(Response::Event(Event::StatusChange { change, addr: v6 }));
    }
    v
}

fn encoded(c: Option<Compression>, tracing: Option<Uuid>, warnings: &[String], r: &Response) -> BytesMut {
    let mut out = BytesMut::new();
    encode_response_traced(&mut out, 7, c, tracing, warnings, r);
    out
}

#[test]
fn golden_ready_and_error() {
    assert_eq!(&encoded(None, None, &[], &Response::Ready)[..], &[0x84, 0, 0, 7, 0x02, 0, 0, 0, 0]);
    // An empty body is never compressed.
    assert_eq!(&encoded(Some(Compression::Lz4), None, &[], &Response::Ready)[..], &[0x84, 0, 0, 7, 0x02, 0, 0, 0, 0]);
    let e = ErrorBody::new(ErrorKind::Unavailable { consistency: Consistency::Quorum, required: 3, alive: 1 }, "x");
    let frame = encoded(None, None, &[], &Response::Error(e));
    let want = [
        0x84, 0, 0, 7, 0x00, 0, 0, 0, 17, // header
        0, 0, 0x10, 0, // code
        0, 1, b'x', // message
        0, 4, // QUORUM
        0, 0, 0, 3, 0, 0, 0, 1, // required, alive
    ];
    assert_eq!(&frame[..], &want[..]);
}

#[test]
fn golden_warning_and_event() {
    let warnings = vec!["w".to_string()];
    let frame = encoded(None, None, &warnings, &Response::Result(ResultBody::Void));
    assert_eq!(&frame[..], &[0x84, 0x08, 0, 7, 0x08, 0, 0, 0, 9, 0, 1, 0, 1, b'w', 0, 0, 0, 1]);
    let mut out = BytesMut::new();
    let addr = "10.0.0.1:9042".parse().unwrap();
    encode_event(&mut out, None, &Event::StatusChange { change: StatusChangeType::Up, addr });
    let mut want = vec![0x84, 0, 0xFF, 0xFF, 0x0C, 0, 0, 0, 0];
    want.extend_from_slice(b"\x00\x0dSTATUS_CHANGE\x00\x02UP\x04\x0a\x00\x00\x01\x00\x00\x23\x52");
    want[8] = (want.len() - HEADER_LEN) as u8;
    assert_eq!(&out[..], &want[..]);
}

#[test]
fn round_trips_every_kind() {
    let tracing = Uuid::from_u128(0x1234);
    let warnings = ["Batch too large".to_string(), "second".to_string()];
    for r in sample_responses() {
        for c in [None, Some(Compression::Lz4), Some(Compression::Snappy)] {
            for (t, w) in [(None, &[][..]), (Some(tracing), &warnings[..])] {
                let frame = encoded(c, t, w, &r);
                let (h, body) = split(&frame);
                assert_eq!(h.stream, 7);
                let got = decode_response(&h, body, c).unwrap();
                assert_eq!(got.tracing_id, t);
                assert_eq!(got.warnings, w);
                assert_eq!(got.response, as_v4(r.clone()));
            }
        }
    }
}

/// What a v4 client reads of `r`: no v5-only field.
fn as_v4(r: Response) -> Response {
    match r {
        Response::Result(ResultBody::Prepared(mut p)) => {
            p.result_metadata_id = Bytes::new();
            Response::Result(ResultBody::Prepared(p))
        }
        Response::Result(ResultBody::Rows(mut rows)) => {
            rows.metadata.new_metadata_id = None;
            Response::Result(ResultBody::Rows(rows))
        }
        Response::Error(mut e) => {
            match &mut e.kind {
                ErrorKind::ReadFailure { reasons, .. } | ErrorKind::WriteFailure { reasons, .. } => reasons.clear(),
                _ => {}
            }
            Response::Error(e)
        }
        other => other,
    }
}

#[test]
fn v5_round_trips_every_kind() {
    for r in sample_responses() {
        let mut frame = BytesMut::new();
        encode_response_in(&mut frame, 5, 9, None, None, &[], &r);
        assert_eq!(frame[0], 0x85);
        let (h, body) = split(&frame);
        assert_eq!(h.version, 5);
        let got = decode_response(&h, body, None).unwrap().response;
        // v5 sends the number of failures as the reason map's size.
        let want = match r {
            Response::Error(mut e) => {
                if let ErrorKind::ReadFailure { num_failures, reasons, .. }
                | ErrorKind::WriteFailure { num_failures, reasons, .. } = &mut e.kind
                {
                    *num_failures = reasons.len() as i32;
                }
                Response::Error(e)
            }
            other => other,
        };
        assert_eq!(got, want);
    }
}

/// A v5 CAS write timeout ends after its write type: the Java driver 4 reads
/// no contentions count and, decoding a segment's frames off its payload, would
/// take two extra bytes for the next frame's header. Cassandra's body with the
/// count still decodes.
#[test]
fn v5_cas_write_timeout_has_no_contentions_count() {
    let kind = ErrorKind::WriteTimeout {
        consistency: Consistency::Serial,
        received: 0,
        block_for: 2,
        write_type: WriteType::Cas,
    };
    let mut frame = BytesMut::new();
    encode_response_in(&mut frame, 5, 3, None, None, &[], &Response::Error(ErrorBody::new(kind.clone(), "m")));
    let want = [
        0, 0, 0x11, 0, // code
        0, 1, b'm', // message
        0, 8, // SERIAL
        0, 0, 0, 0, 0, 0, 0, 2, // received, block_for
        0, 3, b'C', b'A', b'S', // write type, and nothing after it
    ];
    assert_eq!(&frame[HEADER_LEN..], &want[..]);
    let (mut h, _) = split(&frame);
    let mut with_count = want.to_vec();
    with_count.extend_from_slice(&[0, 5]);
    h.body_len = with_count.len() as u32;
    let Response::Error(e) = decode_response(&h, Bytes::from(with_count), None).unwrap().response else { panic!() };
    assert_eq!(e.kind, kind);
}

#[test]
fn golden_v5_prepared_and_changed_rows() {
    let result_metadata = RowsMetadata::new(vec![col("v", CqlType::Int)]);
    let p = Prepared::new(Bytes::from_static(b"ID"), PreparedMetadata::new(vec![], vec![]), result_metadata.clone());
    assert_eq!(p.result_metadata_id.len(), 16);
    let mut frame = BytesMut::new();
    encode_response_in(&mut frame, 5, 1, None, None, &[], &Response::Result(ResultBody::Prepared(Box::new(p.clone()))));
    let body = &frame[HEADER_LEN..];
    // kind 4, `ID`, then the 16-byte result metadata id, then the bind marker metadata.
    assert_eq!(&body[..8], &[0, 0, 0, 4, 0, 2, b'I', b'D']);
    assert_eq!(&body[8..10], &[0, 16]);
    assert_eq!(&body[10..26], &p.result_metadata_id[..]);
    assert_eq!(&body[26..30], &[0, 0, 0, 0]);
    // Rows with Metadata_changed: flags 0x0008 | 0x0001, count, the new id, then the specs.
    let mut rows = RowsWriter::new(1).finish(result_metadata.clone());
    rows.metadata.new_metadata_id = Some(p.result_metadata_id.clone());
    let mut frame = BytesMut::new();
    encode_response_in(&mut frame, 5, 1, None, None, &[], &Response::Result(ResultBody::Rows(rows)));
    let body = &frame[HEADER_LEN..];
    assert_eq!(&body[..12], &[0, 0, 0, 2, 0, 0, 0, 0x09, 0, 0, 0, 1]);
    assert_eq!(&body[12..14], &[0, 16]);
    // Ids depend on names and types only.
    let other = RowsMetadata::new(vec![col("v", CqlType::BigInt)]);
    assert_ne!(result_metadata_id(&other.columns), p.result_metadata_id);
    let mut renamed_table = result_metadata.columns.clone();
    renamed_table[0].table = "t2".into();
    assert_eq!(result_metadata_id(&renamed_table), p.result_metadata_id);
}

#[test]
fn rows_iterate() {
    let rows = sample_rows();
    let got: Vec<_> = rows.iter().collect::<Result<_, _>>().unwrap();
    assert_eq!(got.len(), 3);
    assert_eq!(got[1][0].as_deref(), Some(&1i32.to_be_bytes()[..]));
    assert_eq!(got[1][1], None);
    assert_eq!(got[2][2].as_deref(), Some(&[0u8, 0, 0, 0][..]));
}

#[test]
fn short_rows_are_a_programmer_error() {
    let result = std::panic::catch_unwind(|| {
        let mut w = RowsWriter::new(2);
        w.push_cell(None);
        w.end_row();
    });
    let payload = result.expect_err("a row with too few cells must panic");
    let message = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(message.contains("wrong number of cells"), "{message}");
}

#[test]
fn frame_error_replies_decode() {
    let err = crate::FrameError::UnsupportedVersion { version: 0x42, stream: 0, body_len: 0 };
    let mut out = BytesMut::new();
    err.encode_reply(&mut out);
    let (h, body) = split(&out);
    let f = decode_response(&h, body, None).unwrap();
    let Response::Error(e) = f.response else { panic!() };
    assert_eq!(e.kind, ErrorKind::ProtocolError);
    assert_eq!(e.message, "Invalid or unsupported protocol version (66); supported versions are (4/v4, 5/v5)");
}

#[test]
fn truncations_mutations_and_noise_never_panic() {
    let mut frames = Vec::new();
    for r in sample_responses() {
        for c in [None, Some(Compression::Lz4), Some(Compression::Snappy)] {
            frames.push((encoded(c, Some(Uuid::nil()), &["w".to_string()], &r), c));
        }
    }
    for (frame, c) in &frames {
        let (h, body) = split(frame);
        for n in 0..body.len() {
            let mut short = h;
            short.body_len = n as u32;
            assert!(decode_response(&short, body.slice(..n), *c).is_err(), "{:?} cut at {n}", h.opcode);
        }
    }
    let mut rng = StdRng::seed_from_u64(42);
    for _ in 0..20_000 {
        let (frame, c) = &frames[rng.gen_range(0..frames.len())];
        let (h, _) = split(frame);
        let mut body = frame[HEADER_LEN..].to_vec();
        for _ in 0..rng.gen_range(1..4) {
            if !body.is_empty() {
                let i = rng.gen_range(0..body.len());
                body[i] = rng.gen();
            }
        }
        if let Ok(f) = decode_response(&h, Bytes::from(body), *c) {
            if let Response::Result(ResultBody::Rows(rows)) = f.response {
                rows.iter().for_each(drop);
            }
        }
    }
    let opcodes = [
        Opcode::Error,
        Opcode::Ready,
        Opcode::Authenticate,
        Opcode::Supported,
        Opcode::Result,
        Opcode::Event,
        Opcode::AuthChallenge,
        Opcode::AuthSuccess,
    ];
    for _ in 0..20_000 {
        let len = rng.gen_range(0..64);
        let bytes: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        let _ = parse_response_header(&bytes, MAX);
        let opcode = opcodes[rng.gen_range(0..opcodes.len())];
        let h = FrameHeader { version: 4, flags: rng.gen::<u8>() & 0x0F, stream: 0, opcode, body_len: len as u32 };
        let _ = decode_response(&h, Bytes::from(bytes), None);
    }
}
