//! Unit tests of the lean client: consistency levels, token routing, a
//! request's timeout against a server that never answers it, and TLS
//! (`-transport`) against a rustls server.

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

/// A server that answers STARTUP and then nothing: the request times out
/// (within its timeout and one sweep), its stream id stays taken, and the
/// late answer gives the id back.
#[tokio::test]
async fn a_request_without_answer_times_out_and_keeps_its_stream_until_the_late_answer() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (late_tx, late_rx) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let frame = async |socket: &mut TcpStream| {
            let mut header = [0u8; HEADER_LEN];
            socket.read_exact(&mut header).await.unwrap();
            let len = u32::from_be_bytes(header[5..9].try_into().unwrap()) as usize;
            let mut body = vec![0u8; len];
            socket.read_exact(&mut body).await.unwrap();
            [header[2], header[3]]
        };
        // STARTUP -> READY (version 4 response, same stream, opcode 0x02, empty body).
        let stream = frame(&mut socket).await;
        socket.write_all(&[0x84, 0, stream[0], stream[1], 0x02, 0, 0, 0, 0]).await.unwrap();
        // OPTIONS: answered only when the test says so.
        let stream = frame(&mut socket).await;
        late_rx.await.unwrap();
        socket.write_all(&[0x84, 0, stream[0], stream[1], 0x02, 0, 0, 0, 0]).await.unwrap();
        let mut rest = Vec::new();
        let _ = socket.read_to_end(&mut rest).await;
    });
    let conn = Conn::open_with(addr, None, None, Duration::from_secs(1)).await.unwrap();
    let started = std::time::Instant::now();
    let err = conn.request(&Request::Options).await.unwrap_err();
    assert!(err.contains("no response") && err.contains("within 1 s"), "{err}");
    let waited = started.elapsed();
    assert!(waited >= Duration::from_secs(1) && waited < Duration::from_secs(5), "{waited:?}");
    assert_eq!(conn.lock().free.len(), STREAMS - 1, "the timed-out request keeps its stream id");
    late_tx.send(()).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while conn.lock().free.len() != STREAMS && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(conn.lock().free.len(), STREAMS, "the late answer frees the stream id");
    server.abort();
}

/// A TLS server (crate `tls`, as Shoal's) presenting `keystore` that answers
/// every request frame with READY on its stream; its address.
async fn tls_server(keystore: &std::path::Path) -> SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let config = tls::server_config(tls::Keystore::read(keystore, None).unwrap(), None).unwrap();
    let acceptor = tls::tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut stream) = acceptor.accept(socket).await else { return };
                let mut header = [0u8; HEADER_LEN];
                while stream.read_exact(&mut header).await.is_ok() {
                    let len = u32::from_be_bytes(header[5..9].try_into().unwrap()) as usize;
                    let mut body = vec![0u8; len];
                    if stream.read_exact(&mut body).await.is_err() {
                        return;
                    }
                    let ready = [0x84, 0, header[2], header[3], 0x02, 0, 0, 0, 0];
                    if stream.write_all(&ready).await.is_err() || stream.flush().await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

fn transport(truststore: &std::path::Path, hostname_verification: bool) -> crate::settings::Transport {
    crate::settings::Transport { truststore: truststore.to_path_buf(), keystore: None, hostname_verification }
}

/// Through TLS a connection says STARTUP and carries many requests at once (the
/// writer flushes what the TLS stream holds back); a server whose certificate
/// another CA signed is refused at the handshake; the name in the certificate is
/// checked only when asked.
#[tokio::test]
async fn a_tls_connection_verifies_the_chain_and_the_name_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name);
    let ca = tls::generate::Authority::create("stress CA").unwrap();
    std::fs::write(path("ca.pem"), &ca.cert_pem).unwrap();
    std::fs::write(path("here.pem"), ca.issue("here", &["127.0.0.1".parse().unwrap()]).unwrap()).unwrap();
    std::fs::write(path("elsewhere.pem"), ca.issue("elsewhere", &["10.1.2.3".parse().unwrap()]).unwrap()).unwrap();
    let other = tls::generate::Authority::create("another CA").unwrap();
    std::fs::write(path("other.pem"), &other.cert_pem).unwrap();

    let here = tls_server(&path("here.pem")).await;
    let verified = Tls::new(&transport(&path("ca.pem"), true)).unwrap();
    let conn = Conn::open_with(here, None, Some(&verified), Duration::from_secs(5)).await.unwrap();
    assert!(conn.tls().is_some_and(|t| t.starts_with("TLSv1_3 TLS13_")), "{:?}", conn.tls());
    let answers = futures_join(&conn, 500).await;
    assert!(answers.iter().all(|a| matches!(a, Ok(Response::Ready))), "{answers:?}");

    let untrusted = Tls::new(&transport(&path("other.pem"), false)).unwrap();
    let err = Conn::open_with(here, None, Some(&untrusted), Duration::from_secs(5)).await.err().unwrap();
    assert!(err.contains("TLS handshake failed") && err.contains("signed by a CA of the truststore"), "{err}");

    let elsewhere = tls_server(&path("elsewhere.pem")).await;
    let err = Conn::open_with(elsewhere, None, Some(&verified), Duration::from_secs(5)).await.err().unwrap();
    assert!(err.contains("not valid for name") && err.contains("hostname-verification=true"), "{err}");
    let unverified = Tls::new(&transport(&path("ca.pem"), false)).unwrap();
    assert!(Conn::open_with(elsewhere, None, Some(&unverified), Duration::from_secs(5)).await.is_ok());

    // A server that does not speak TLS (here: closes at once).
    let plain = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let plain_addr = plain.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((socket, _)) = plain.accept().await {
            drop(socket)
        }
    });
    let err = Conn::open_with(plain_addr, None, Some(&verified), Duration::from_secs(5)).await.err().unwrap();
    assert!(err.contains("does the server speak TLS"), "{err}");
}

/// `n` OPTIONS requests in flight on one connection at once.
async fn futures_join(conn: &Arc<Conn>, n: usize) -> Vec<Result<Response, String>> {
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..n {
        let conn = Arc::clone(conn);
        tasks.spawn(async move { conn.request(&Request::Options).await });
    }
    let mut out = Vec::new();
    while let Some(answer) = tasks.join_next().await {
        out.push(answer.unwrap());
    }
    out
}

/// A conditional statement's result: `[applied]`, then (when refused on an existing row) the
/// columns of the condition; `cas_outcome` finds `v` by name, wherever it stands.
#[test]
fn cas_outcome_reads_applied_and_the_current_value() {
    use cql_protocol::response::{ColumnSpec, RowsMetadata};
    use types::CqlType;
    let spec = |name: &str, ty| ColumnSpec { keyspace: "ks".into(), table: "lwt1".into(), name: name.into(), ty };
    let rows = |columns: Vec<ColumnSpec>, cells: &[&[u8]]| {
        let mut content = Vec::new();
        for cell in cells {
            content.extend_from_slice(&(cell.len() as i32).to_be_bytes());
            content.extend_from_slice(cell);
        }
        Rows { metadata: RowsMetadata::new(columns), rows_count: 1, content: Bytes::from(content) }
    };
    let applied = rows(vec![spec("[applied]", CqlType::Boolean)], &[&[1]]);
    assert_eq!(cas_outcome(&applied), Ok(Cas { applied: true, current: None }));
    let refused = rows(
        vec![spec("[applied]", CqlType::Boolean), spec("key", CqlType::Blob), spec("v", CqlType::BigInt)],
        &[&[0], b"0000000001", &41i64.to_be_bytes()],
    );
    assert_eq!(cas_outcome(&refused), Ok(Cas { applied: false, current: Some(41) }));
    let missing_row = rows(vec![spec("[applied]", CqlType::Boolean)], &[&[0]]);
    assert_eq!(cas_outcome(&missing_row), Ok(Cas { applied: false, current: None }));
    let not_cas = rows(vec![spec("C0", CqlType::Blob)], &[b"abc"]);
    assert!(cas_outcome(&not_cas).is_err_and(|e| e.contains("[applied]")));
    let empty = Rows {
        metadata: RowsMetadata::new(vec![spec("[applied]", CqlType::Boolean)]),
        rows_count: 0,
        content: Bytes::new(),
    };
    assert!(cas_outcome(&empty).is_err_and(|e| e.contains("no row")));
}
