//! Behaviour of the two transports: the TCP transport on 127.0.0.1 (request
//! matching under concurrency, dead and silent peers, garbage and oversized
//! frames, reconnects) and the in-memory network (partitions, loss, delay,
//! crashes, determinism for a seed). Every test is bounded by short timeouts.

#![allow(clippy::unwrap_used, reason = "an integration test: a failed unwrap names its line")]

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use net::message::{decode_mutations, encode_mutations};
use net::{
    Failure, FailureCode, Flags, Frame, FrameDecoder, Inbound, MemConfig, MemFaults, MemNetwork, MutationAck, NetError,
    TcpConfig, TcpTransport, Transport, Verb,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;
use types::mutation::{CellWrite, Mutation, RowWrite};

/// Answers Echo with EchoRsp, MutationReq with an ack after decoding, and
/// SchemaPull with a Storage failure (to exercise `Failure`).
fn spawn_handler(mut inbound: mpsc::Receiver<Inbound>) -> tokio::task::JoinHandle<Vec<(SocketAddr, Verb)>> {
    tokio::spawn(async move {
        let mut one_way = Vec::new();
        while let Some(message) = inbound.recv().await {
            if !message.responder.expects_response() {
                one_way.push((message.from, message.verb));
                continue;
            }
            match message.verb {
                Verb::Echo => message.responder.respond(Verb::EchoRsp, message.payload),
                Verb::MutationReq => match decode_mutations(&message.payload) {
                    Ok(_) => message.responder.respond(Verb::MutationRsp, MutationAck.encode()),
                    Err(e) => message.responder.fail(FailureCode::MalformedPayload, &e.to_string()),
                },
                _ => message.responder.fail(FailureCode::Storage, "commit log is poisoned"),
            }
        }
        one_way
    })
}

fn config() -> TcpConfig {
    let mut config = TcpConfig::new("127.0.0.1:0".parse().unwrap());
    config.connect_timeout = Duration::from_secs(1);
    config.reconnect_backoff_min = Duration::from_millis(20);
    config.reconnect_backoff_max = Duration::from_millis(200);
    config
}

async fn tcp_node(config: TcpConfig) -> (TcpTransport, tokio::task::JoinHandle<Vec<(SocketAddr, Verb)>>) {
    let (transport, inbound) = TcpTransport::bind(config).await.unwrap();
    (transport, spawn_handler(inbound))
}

/// An address where nothing listens.
async fn dead_addr() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap()
}

const SHORT: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_ten_thousand_concurrent_requests_match_their_responses() {
    let (a, _ha) = tcp_node(config()).await;
    let (b, _hb) = tcp_node(config()).await;
    let mut tasks = Vec::new();
    for i in 0..10_000u32 {
        // Both directions at once: each node is client and server.
        let (from, to) = if i % 2 == 0 { (a.clone(), b.local_addr()) } else { (b.clone(), a.local_addr()) };
        let payload = Bytes::from(format!("request {i} {}", "x".repeat((i % 97) as usize)));
        let response = from.send_request(to, Verb::Echo, payload.clone(), Duration::from_secs(20));
        tasks.push(tokio::spawn(async move { (payload, response.await) }));
    }
    for task in tasks {
        let (payload, response) = task.await.unwrap();
        assert_eq!(response.unwrap(), (Verb::EchoRsp, payload));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_mutations_failures_and_one_way_messages() {
    let (a, _ha) = tcp_node(config()).await;
    let (b, hb) = tcp_node(config()).await;
    let mut m = Mutation::new(uuid::Uuid::from_u128(7), -42, Bytes::from_static(b"key"));
    m.rows.push(RowWrite {
        cells: vec![CellWrite {
            column: 1,
            path: None,
            timestamp: 1,
            ttl: 0,
            local_deletion_time: 0,
            value: Some(Bytes::from_static(b"v")),
        }],
        ..RowWrite::default()
    });
    let ack = a.send_request(b.local_addr(), Verb::MutationReq, encode_mutations(&[m]), SHORT).await.unwrap();
    assert_eq!(ack.0, Verb::MutationRsp);
    assert_eq!(MutationAck::decode(&ack.1), Ok(MutationAck));

    let err = a.send_request(b.local_addr(), Verb::SchemaPull, Bytes::new(), SHORT).await.unwrap_err();
    assert_eq!(
        err,
        NetError::Remote { peer: b.local_addr(), code: FailureCode::Storage, message: "commit log is poisoned".into() }
    );
    let err = a.send_request(b.local_addr(), Verb::MutationReq, Bytes::from_static(b"junk"), SHORT).await.unwrap_err();
    assert!(matches!(err, NetError::Remote { code: FailureCode::MalformedPayload, .. }), "{err:?}");

    // Response verbs and the handshake cannot be sent as requests.
    let err = a.send_request(b.local_addr(), Verb::EchoRsp, Bytes::new(), SHORT).await.unwrap_err();
    assert_eq!(err, NetError::NotARequest { verb: Verb::EchoRsp });
    assert!(a.send_one_way(b.local_addr(), Verb::Handshake, Bytes::new()).is_err());

    // One-way messages arrive, tagged with the sender's listen address.
    a.send_one_way(b.local_addr(), Verb::SchemaPush, Bytes::from_static(b"schema")).unwrap();
    a.send_request(b.local_addr(), Verb::Echo, Bytes::new(), SHORT).await.unwrap();
    b.shutdown();
    let one_way = tokio::time::timeout(SHORT, hb).await.unwrap().unwrap();
    assert_eq!(one_way, vec![(a.local_addr(), Verb::SchemaPush)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_request_to_a_dead_peer_fails_fast() {
    let (a, _ha) = tcp_node(config()).await;
    let dead = dead_addr().await;
    let timeout = Duration::from_secs(3);
    let started = Instant::now();
    let err = a.send_request(dead, Verb::Echo, Bytes::new(), timeout).await.unwrap_err();
    assert!(matches!(err, NetError::Unreachable { .. }), "{err:?}");
    // During the backoff, sends fail at once without connecting.
    let err = a.send_request(dead, Verb::Echo, Bytes::new(), timeout).await.unwrap_err();
    assert!(matches!(err, NetError::Unreachable { .. }), "{err:?}");
    assert!(started.elapsed() < timeout, "took {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_request_to_a_silent_peer_times_out() {
    let (a, _ha) = tcp_node(config()).await;
    let silent_addr = silent_listener().await;
    let timeout = Duration::from_millis(300);
    let started = Instant::now();
    let err = a.send_request(silent_addr, Verb::Echo, Bytes::new(), timeout).await.unwrap_err();
    assert_eq!(err, NetError::Timeout { peer: silent_addr, timeout });
    let elapsed = started.elapsed();
    assert!(elapsed >= timeout && elapsed < timeout + Duration::from_secs(1), "took {elapsed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_peer_shutdown_fails_pending_requests_and_a_restart_is_reconnected() {
    let (a, _ha) = tcp_node(config()).await;
    // B takes requests and never answers them, so they stay pending. It
    // listens on its own loopback address so that no other socket (say, an
    // outbound connection of a concurrent test) takes its port while it is down.
    let mut b_config = config();
    b_config.listen = "127.0.0.37:0".parse().unwrap();
    let (b, mut b_inbound) = TcpTransport::bind(b_config).await.unwrap();
    let b_addr = b.local_addr();
    let pending = a.send_request(b_addr, Verb::Echo, Bytes::new(), Duration::from_secs(20));
    let request = tokio::time::timeout(SHORT, b_inbound.recv()).await.unwrap().unwrap();
    let started = Instant::now();
    b.shutdown();
    drop(b);
    drop(request);
    let err = pending.await.unwrap_err();
    assert_eq!(err, NetError::ConnectionClosed { peer: b_addr });
    assert!(started.elapsed() < SHORT);
    drop(b_inbound);

    // A new B on the same address is reached after the backoff.
    let mut restarted = config();
    restarted.listen = b_addr;
    let rebind_deadline = Instant::now() + SHORT;
    let (_b2, b2_inbound) = loop {
        match TcpTransport::bind(restarted.clone()).await {
            Ok(bound) => break bound,
            Err(e) => {
                assert!(Instant::now() < rebind_deadline, "cannot rebind {b_addr}: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    spawn_handler(b2_inbound);
    let deadline = Instant::now() + SHORT;
    loop {
        match a.send_request(b_addr, Verb::Echo, Bytes::from_static(b"again"), SHORT).await {
            Ok(response) => {
                assert_eq!(response, (Verb::EchoRsp, Bytes::from_static(b"again")));
                break;
            }
            Err(e) => {
                assert!(Instant::now() < deadline, "never reconnected: {e}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

/// Reads until the peer closes the connection; fails the test if it does not
/// within a few seconds.
async fn expect_closed(stream: &mut TcpStream) -> Vec<u8> {
    let mut received = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match tokio::time::timeout(SHORT, stream.read(&mut chunk)).await.expect("connection was not closed") {
            Ok(0) | Err(_) => return received,
            Ok(n) => received.extend_from_slice(&chunk[..n]),
        }
    }
}

fn handshake(from: SocketAddr) -> Vec<u8> {
    Frame::one_way(Verb::Handshake, net::message::encode_handshake(from)).to_bytes().to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_garbage_closes_only_its_connection() {
    let (a, _ha) = tcp_node(config()).await;
    let (b, _hb) = tcp_node(config()).await;
    async fn echo(t: &TcpTransport, to: SocketAddr) -> Result<net::Response, NetError> {
        t.send_request(to, Verb::Echo, Bytes::from_static(b"ok"), SHORT).await
    }
    echo(&b, a.local_addr()).await.unwrap();

    // Not our protocol at all.
    let mut garbage = TcpStream::connect(a.local_addr()).await.unwrap();
    garbage.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    assert!(expect_closed(&mut garbage).await.is_empty());

    // A valid handshake, then a frame with a broken checksum.
    let mut corrupt = TcpStream::connect(a.local_addr()).await.unwrap();
    let mut bytes = handshake("127.0.0.9:7000".parse().unwrap());
    let mut frame = Frame::request(Verb::Echo, 1, Bytes::from_static(b"hello")).to_bytes().to_vec();
    let last = frame.len() - 1;
    frame[last] ^= 0xFF;
    bytes.extend_from_slice(&frame);
    corrupt.write_all(&bytes).await.unwrap();
    assert!(expect_closed(&mut corrupt).await.is_empty());

    // A payload over A's limit closes the connection from the header alone.
    let mut oversized = TcpStream::connect(a.local_addr()).await.unwrap();
    let mut header = handshake("127.0.0.9:7000".parse().unwrap());
    header.extend_from_slice(b"SHOL\x01\x01\x00");
    header.extend_from_slice(&5u64.to_be_bytes());
    header.extend_from_slice(&u32::MAX.to_be_bytes());
    oversized.write_all(&header).await.unwrap();
    assert!(expect_closed(&mut oversized).await.is_empty());

    // The good peer's connection is untouched, and new peers are served.
    for _ in 0..10 {
        assert_eq!(echo(&b, a.local_addr()).await.unwrap().1, Bytes::from_static(b"ok"));
    }
    let (c, _hc) = tcp_node(config()).await;
    echo(&c, a.local_addr()).await.unwrap();
    echo(&a, c.local_addr()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_unknown_verb_is_answered_with_failure_and_the_connection_lives() {
    let (a, _ha) = tcp_node(config()).await;
    let mut raw = TcpStream::connect(a.local_addr()).await.unwrap();
    let mut bytes = handshake("127.0.0.9:7000".parse().unwrap());
    // A request with verb 0x6E (from a hypothetical newer node).
    let mut frame = Frame::request(Verb::Echo, 41, Bytes::new()).to_bytes().to_vec();
    frame[5] = 0x6E;
    let crc_at = frame.len() - 4;
    let crc = crc32c_reference(&frame[..crc_at]);
    frame[crc_at..].copy_from_slice(&crc.to_be_bytes());
    bytes.extend_from_slice(&frame);
    bytes.extend_from_slice(&Frame::request(Verb::Echo, 42, Bytes::from_static(b"still here")).to_bytes());
    raw.write_all(&bytes).await.unwrap();

    let mut decoder = FrameDecoder::default();
    let mut buf = bytes::BytesMut::new();
    let mut frames = Vec::new();
    while frames.len() < 2 {
        while let Some(frame) = decoder.decode(&mut buf).unwrap() {
            frames.push(frame);
        }
        if frames.len() < 2 {
            let n = tokio::time::timeout(SHORT, raw.read_buf(&mut buf)).await.unwrap().unwrap();
            assert!(n > 0, "connection closed");
        }
    }
    assert_eq!(frames[0].verb, Verb::Failure);
    assert_eq!(frames[0].flags, Flags::IS_RESPONSE);
    assert_eq!(frames[0].request_id, 41);
    assert_eq!(Failure::decode(&frames[0].payload).unwrap().code, FailureCode::UnknownVerb);
    assert_eq!(frames[1], Frame::response(Verb::EchoRsp, 42, Bytes::from_static(b"still here")));
}

/// Bitwise CRC-32C, independent of the crate's table-driven one.
fn crc32c_reference(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0x82F6_3B78 } else { crc >> 1 };
        }
    }
    !crc
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_oversized_payloads_are_refused_on_both_sides() {
    let mut small = config();
    small.payload_bytes_max = 1024;
    let (a, _ha) = tcp_node(small).await;
    let (b, _hb) = tcp_node(config()).await;
    // The sender refuses what its own limit forbids.
    let err = a.send_request(b.local_addr(), Verb::Echo, Bytes::from(vec![0u8; 2048]), SHORT).await.unwrap_err();
    assert_eq!(err, NetError::PayloadTooLarge { len: 2048, max: 1024 });
    // The receiver closes a connection that sends more than its limit.
    let err = b.send_request(a.local_addr(), Verb::Echo, Bytes::from(vec![0u8; 2048]), SHORT).await.unwrap_err();
    assert_eq!(err, NetError::ConnectionClosed { peer: a.local_addr() });
    // Within the limit, the next request reconnects and succeeds.
    let response = b.send_request(a.local_addr(), Verb::Echo, Bytes::from(vec![0u8; 1000]), SHORT).await;
    assert_eq!(response.unwrap().1.len(), 1000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_full_queues_fail_fast() {
    let mut tiny = config();
    tiny.inbound_queue_max = 1;
    // Nobody drains A's inbound queue: the first request waits there, the
    // second is answered Overloaded by the transport itself.
    let (a, _a_inbound) = TcpTransport::bind(tiny).await.unwrap();
    let (b, _hb) = tcp_node(config()).await;
    let first = b.send_request(a.local_addr(), Verb::Echo, Bytes::new(), Duration::from_millis(500));
    let second = b.send_request(a.local_addr(), Verb::Echo, Bytes::new(), SHORT).await.unwrap_err();
    assert!(matches!(second, NetError::Remote { code: FailureCode::Overloaded, .. }), "{second:?}");
    assert!(matches!(first.await, Err(NetError::Timeout { .. })));

    // Pending requests per peer are bounded.
    let silent = silent_listener().await;
    let mut one = config();
    one.pending_requests_max = 1;
    let (c, _hc) = tcp_node(one).await;
    let first = c.send_request(silent, Verb::Echo, Bytes::new(), Duration::from_millis(300));
    let err = c.send_request(silent, Verb::Echo, Bytes::new(), SHORT).await.unwrap_err();
    assert_eq!(err, NetError::Overloaded { peer: silent });
    assert!(matches!(first.await, Err(NetError::Timeout { .. })));

    // The outbound queue is bounded: a peer that stops reading fills the
    // socket buffers, then the queue, then sends fail at once.
    let mut small_queue = config();
    small_queue.queue_frames_max = 2;
    let (d, _hd) = tcp_node(small_queue).await;
    let megabyte = Bytes::from(vec![0u8; 1 << 20]);
    let mut overloaded = false;
    for _ in 0..500 {
        match d.send_one_way(silent, Verb::SchemaPush, megabyte.clone()) {
            Ok(()) => tokio::time::sleep(Duration::from_millis(1)).await,
            Err(e) => {
                assert_eq!(e, NetError::Overloaded { peer: silent });
                overloaded = true;
                break;
            }
        }
    }
    assert!(overloaded, "500 MiB queued to a peer that never reads");
}

/// A listener that accepts connections, holds them open and never reads or
/// answers.
async fn silent_listener() -> SocketAddr {
    let silent = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = silent.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = silent.accept().await {
            held.push(stream);
        }
    });
    addr
}

fn mem_addr(i: u8) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, i], 7000))
}

#[tokio::test(start_paused = true)]
async fn mem_partition_drops_messages_and_healing_restores_them() {
    let net = MemNetwork::new(1);
    let (a, a_in) = net.add_node(mem_addr(1));
    let (b, b_in) = net.add_node(mem_addr(2));
    spawn_handler(a_in);
    spawn_handler(b_in);
    let timeout = Duration::from_millis(100);
    // A closure taking `&MemTransport` could not return the future: RPITIT
    // futures capture the borrow's lifetime even though they are 'static.
    async fn echo(t: &net::MemTransport, to: SocketAddr) -> Result<net::Response, NetError> {
        t.send_request(to, Verb::Echo, Bytes::from_static(b"hi"), Duration::from_millis(100)).await
    }
    assert_eq!(echo(&a, mem_addr(2)).await.unwrap(), (Verb::EchoRsp, Bytes::from_static(b"hi")));

    // a → b blocked: the request never arrives.
    net.partition(mem_addr(1), mem_addr(2));
    assert_eq!(echo(&a, mem_addr(2)).await.unwrap_err(), NetError::Timeout { peer: mem_addr(2), timeout });
    assert_eq!(net.stats().dropped_by_partition, 1);
    // The partition is one-way: b's messages reach a...
    let delivered = net.stats().delivered;
    b.send_one_way(mem_addr(1), Verb::SchemaPush, Bytes::new()).unwrap();
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(net.stats().delivered, delivered + 1);
    // ...but a's responses to b's requests are lost.
    assert!(matches!(echo(&b, mem_addr(1)).await, Err(NetError::Timeout { .. })));
    assert_eq!(net.stats().dropped_by_partition, 2);
    net.heal(mem_addr(1), mem_addr(2));
    echo(&a, mem_addr(2)).await.unwrap();
    echo(&b, mem_addr(1)).await.unwrap();

    net.isolate(mem_addr(2));
    assert!(matches!(echo(&a, mem_addr(2)).await, Err(NetError::Timeout { .. })));
    net.heal_all();
    for _ in 0..10 {
        echo(&a, mem_addr(2)).await.unwrap();
        echo(&b, mem_addr(1)).await.unwrap();
    }
    assert_eq!(net.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn mem_delays_are_virtual_and_late_responses_are_dropped() {
    let net = MemNetwork::new(2);
    let (a, a_in) = net.add_node(mem_addr(1));
    let (_b, b_in) = net.add_node(mem_addr(2));
    spawn_handler(a_in);
    spawn_handler(b_in);
    net.set_faults(MemFaults {
        drop_probability: 0.0,
        delay_min: Duration::from_millis(50),
        delay_max: Duration::from_millis(50),
    });
    let started = Instant::now();
    a.send_request(mem_addr(2), Verb::Echo, Bytes::new(), Duration::from_secs(1)).await.unwrap();
    assert_eq!(started.elapsed(), Duration::from_millis(100), "one round trip of two 50 ms hops");
    let err = a.send_request(mem_addr(2), Verb::Echo, Bytes::new(), Duration::from_millis(70)).await.unwrap_err();
    assert!(matches!(err, NetError::Timeout { .. }));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(net.stats().dropped_late, 1);
}

#[tokio::test(start_paused = true)]
async fn mem_crashed_nodes_and_full_queues() {
    let net = MemNetwork::with_config(3, MemConfig { inbound_queue_max: 1, ..MemConfig::default() });
    let (a, a_in) = net.add_node(mem_addr(1));
    let (_b, _b_in_undrained) = net.add_node(mem_addr(2));
    spawn_handler(a_in);
    let timeout = Duration::from_millis(100);
    // b never drains: the second request is shed with Overloaded.
    let first = a.send_request(mem_addr(2), Verb::Echo, Bytes::new(), timeout);
    let err = a.send_request(mem_addr(2), Verb::Echo, Bytes::new(), timeout).await.unwrap_err();
    assert!(matches!(err, NetError::Remote { code: FailureCode::Overloaded, .. }), "{err:?}");
    assert!(matches!(first.await, Err(NetError::Timeout { .. })));
    // A crashed node is silent; its own pending requests fail.
    net.remove_node(mem_addr(2));
    assert!(matches!(
        a.send_request(mem_addr(2), Verb::Echo, Bytes::new(), timeout).await,
        Err(NetError::Timeout { .. })
    ));
    assert!(net.stats().dropped_no_node >= 1);
    let pending = a.send_request(mem_addr(9), Verb::Echo, Bytes::new(), timeout);
    net.remove_node(mem_addr(1));
    assert!(matches!(pending.await, Err(NetError::ConnectionClosed { .. })));
    assert_eq!(a.send_request(mem_addr(2), Verb::Echo, Bytes::new(), timeout).await, Err(NetError::Shutdown));
}

/// Runs a lossy, delayed three-node exchange and returns every request's
/// outcome plus the network's counters.
fn lossy_run(seed: u64) -> (Vec<bool>, net::MemStats) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
    runtime.block_on(async move {
        let net = MemNetwork::new(seed);
        net.set_faults(MemFaults {
            drop_probability: 0.2,
            delay_min: Duration::from_millis(1),
            delay_max: Duration::from_millis(30),
        });
        let mut nodes = Vec::new();
        for i in 1..=3 {
            let (t, inbound) = net.add_node(mem_addr(i));
            spawn_handler(inbound);
            nodes.push(t);
        }
        let mut requests = Vec::new();
        for i in 0..600usize {
            let from = &nodes[i % 3];
            let to = mem_addr(((i * 7 + 1) % 3) as u8 + 1);
            requests.push(from.send_request(to, Verb::Echo, Bytes::from(i.to_string()), Duration::from_millis(50)));
            if i % 50 == 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        let mut outcomes = Vec::new();
        for r in requests {
            outcomes.push(r.await.is_ok());
        }
        (outcomes, net.stats())
    })
}

#[test]
fn mem_same_seed_same_history() {
    let (outcomes, stats) = lossy_run(42);
    let ok = outcomes.iter().filter(|o| **o).count();
    // 20 % loss each way: about 64 % of round trips succeed.
    assert!((300..500).contains(&ok), "{ok} of 600 succeeded");
    assert!(stats.dropped_by_fault > 0 && stats.delivered > 0);
    assert_eq!(lossy_run(42), (outcomes.clone(), stats.clone()));
    let (other_outcomes, other_stats) = lossy_run(43);
    assert_ne!((other_outcomes, other_stats.trace_hash), (outcomes, stats.trace_hash));
}

/// A bulk connection: the handler gets a blocking socket and the opener's
/// listen address, raw bytes flow both ways after `BULK_READY`; a node with
/// no handler refuses bulk connections, and requests on the normal
/// connections go on meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_bulk_connection_carries_raw_bytes_off_the_runtime() {
    use std::io::{Read, Write};
    let (a, _ha) = tcp_node(config()).await;
    let (b, _hb) = tcp_node(config()).await;
    let (seen_tx, seen_rx) = std::sync::mpsc::channel();
    b.serve_bulk(std::sync::Arc::new(move |mut conn: std::net::TcpStream, from: SocketAddr| {
        let seen_tx = seen_tx.clone();
        std::thread::spawn(move || {
            conn.write_all(&[net::BULK_READY]).unwrap();
            let mut got = vec![0u8; 3 << 20];
            conn.read_exact(&mut got).unwrap();
            let sum: u64 = got.iter().map(|&x| u64::from(x)).sum();
            conn.write_all(&sum.to_be_bytes()).unwrap();
            seen_tx.send(from).unwrap();
        });
    }));
    let connector = a.bulk_connector().expect("the TCP transport opens bulk connections");
    let peer = b.local_addr();
    let sent: Vec<u8> = (0..3u32 << 20).map(|i| (i % 251) as u8).collect();
    let expected: u64 = sent.iter().map(|&x| u64::from(x)).sum();
    let answer = tokio::task::spawn_blocking(move || {
        let (mut conn, reused) = connector.connect(peer).unwrap();
        assert!(!reused, "a first connection is a new one");
        conn.write_all(&sent).unwrap();
        let mut sum = [0u8; 8];
        conn.read_exact(&mut sum).unwrap();
        // Given back, it is the next one taken.
        let local = conn.local_addr().unwrap();
        connector.give_back(peer, conn);
        let (again, reused) = connector.connect(peer).unwrap();
        assert!(reused && again.local_addr().unwrap() == local, "an idle connection is reused");
        u64::from_be_bytes(sum)
    });
    // A request beside it on the normal connection.
    let echo = a.send_request(peer, Verb::Echo, Bytes::from_static(b"hi"), SHORT).await.unwrap();
    assert_eq!(&echo.1[..], b"hi");
    assert_eq!(answer.await.unwrap(), expected);
    assert_eq!(seen_rx.recv_timeout(SHORT).unwrap(), a.local_addr(), "the handler learns the opener's listen address");

    // `a` registered no handler: its bulk connections are refused, its requests still served.
    let connector = b.bulk_connector().unwrap();
    let a_addr = a.local_addr();
    let refused = tokio::task::spawn_blocking(move || connector.connect(a_addr)).await.unwrap();
    assert!(refused.is_err(), "a node with no bulk handler closes bulk connections");
    let echo = b.send_request(a_addr, Verb::Echo, Bytes::from_static(b"ok"), SHORT).await.unwrap();
    assert_eq!(&echo.1[..], b"ok");
}

/// A TLS config for a transport: a keystore issued by `ca` (mutual
/// authentication: peers must present one too), trusting `ca`.
fn tls_config(ca: &tls::generate::Authority, dir: &std::path::Path, name: &str) -> TcpConfig {
    let keystore = dir.join(format!("{name}.pem"));
    std::fs::write(&keystore, ca.issue(name, &["127.0.0.1".parse().unwrap()]).unwrap()).unwrap();
    let ca_file = dir.join(format!("{name}-ca.pem"));
    std::fs::write(&ca_file, &ca.cert_pem).unwrap();
    let roots = tls::truststore(&ca_file).unwrap();
    let server = tls::server_config(tls::Keystore::read(&keystore, None).unwrap(), Some(roots.clone())).unwrap();
    let client = tls::client_config(tls::Keystore::read(&keystore, None).unwrap(), roots, false).unwrap();
    let mut config = config();
    config.tls = Some(net::InternodeTls {
        connector: tls::tokio_rustls::TlsConnector::from(std::sync::Arc::new(client)),
        acceptor: tls::tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(server)),
    });
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_tls_admits_only_holders_of_the_clusters_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let cluster_ca = tls::generate::Authority::create("cluster CA").unwrap();
    let (a, _ha) = tcp_node(tls_config(&cluster_ca, dir.path(), "a")).await;
    // A node certified later by the same authority, reloaded from its key (what `cluster add` does).
    let reloaded =
        tls::generate::Authority::load("cluster CA", &cluster_ca.key_pem(), cluster_ca.cert_pem.clone()).unwrap();
    let (b, hb) = tcp_node(tls_config(&reloaded, dir.path(), "b")).await;
    let payload = Bytes::from(vec![7u8; 300_000]); // several TLS records
    assert_eq!(
        a.send_request(b.local_addr(), Verb::Echo, payload.clone(), SHORT).await.unwrap(),
        (Verb::EchoRsp, payload)
    );
    assert!(a.is_verified(b.local_addr()));
    assert!(a.bulk_connector().is_none(), "no bulk (sendfile) connections under TLS");

    // A process with a certificate of another authority, or with no TLS at all, delivers nothing.
    let foreign_ca = tls::generate::Authority::create("cluster CA").unwrap();
    let (intruder, _hi) = tcp_node(tls_config(&foreign_ca, dir.path(), "intruder")).await;
    let (plain, _hp) = tcp_node(config()).await;
    let mut m = Mutation::new(uuid::Uuid::from_u128(7), -42, Bytes::from_static(b"key"));
    m.rows.push(RowWrite::default());
    for sender in [&intruder, &plain] {
        let err = sender.send_request(b.local_addr(), Verb::MutationReq, encode_mutations(&[m.clone()]), SHORT).await;
        assert!(err.is_err(), "{err:?}");
        sender.send_one_way(b.local_addr(), Verb::SchemaPush, Bytes::from_static(b"schema")).unwrap();
    }
    // Nor does b verify the intruder when it connects to it.
    b.verify(intruder.local_addr());
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!b.is_verified(intruder.local_addr()));
    b.shutdown();
    let received = hb.await.unwrap();
    assert!(received.is_empty(), "b accepted messages from outside the cluster: {received:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inline_verb_is_served_in_the_connection_task_in_batches_and_the_others_still_queue() {
    let (a, _ha) = tcp_node(config()).await;
    let (b, hb) = tcp_node(config()).await;
    let batches = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = std::sync::Arc::clone(&batches);
    b.serve_inline(
        Verb::MutationReq,
        std::sync::Arc::new(move |requests: Vec<Inbound>| {
            seen.lock().unwrap().push(requests.len());
            for r in requests {
                // Answered with a payload the queued handler never sends, so the test knows who answered.
                r.responder.respond(Verb::MutationRsp, Bytes::from_static(b"inline"));
            }
        }),
    );
    let sends: Vec<_> =
        (0..200).map(|_| a.send_request(b.local_addr(), Verb::MutationReq, Bytes::from_static(b"m"), SHORT)).collect();
    for s in sends {
        assert_eq!(s.await.unwrap(), (Verb::MutationRsp, Bytes::from_static(b"inline")));
    }
    let sizes = batches.lock().unwrap().clone();
    assert_eq!(sizes.iter().sum::<usize>(), 200);
    assert!(sizes.len() < 200, "requests decoded from one read go to the handler together: {sizes:?}");
    // Other verbs still reach the inbound queue's handler.
    let echo = a.send_request(b.local_addr(), Verb::Echo, Bytes::from_static(b"e"), SHORT).await.unwrap();
    assert_eq!(echo, (Verb::EchoRsp, Bytes::from_static(b"e")));
    b.shutdown();
    let _ = tokio::time::timeout(SHORT, hb).await;
}

fn dropped(verb: &str) -> u64 {
    metrics::dropped_messages().into_iter().find(|(v, _)| v == verb).map_or(0, |(_, n)| n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_requests_their_sender_gave_up_on_are_dropped_unserved_and_counted() {
    // Nobody drains B's inbound queue for a while, as a replica whose
    // mutation stage is stuck.
    let (a, _ha) = tcp_node(config()).await;
    let (b, mut b_inbound) = TcpTransport::bind(config()).await.unwrap();
    let before = dropped("MUTATION_REQ");
    let short: Vec<_> = (0..5)
        .map(|_| a.send_request(b.local_addr(), Verb::MutationReq, encode_mutations(&[]), Duration::from_millis(200)))
        .collect();
    let long = a.send_request(b.local_addr(), Verb::MutationReq, encode_mutations(&[]), SHORT);
    // Echo does not expire: it is served however late.
    let echo = a.send_request(b.local_addr(), Verb::Echo, Bytes::from_static(b"late"), SHORT);
    for request in short {
        assert!(matches!(request.await, Err(NetError::Timeout { .. })));
    }
    let mut served = Vec::new();
    while served.len() < 2 {
        let message = tokio::time::timeout(SHORT, b_inbound.recv()).await.unwrap().unwrap();
        let Some(message) = message.live() else { continue };
        assert!(message.deadline.is_some() == (message.verb == Verb::MutationReq), "{message:?}");
        served.push(message.verb);
        match message.verb {
            Verb::Echo => message.responder.respond(Verb::EchoRsp, message.payload),
            _ => message.responder.respond(Verb::MutationRsp, MutationAck.encode()),
        }
    }
    assert_eq!(served, vec![Verb::MutationReq, Verb::Echo]);
    assert_eq!(long.await.unwrap().0, Verb::MutationRsp);
    assert_eq!(echo.await.unwrap(), (Verb::EchoRsp, Bytes::from_static(b"late")));
    assert_eq!(dropped("MUTATION_REQ") - before, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_a_peer_older_than_expiring_requests_gets_them_bare() {
    // A node that predates `ExpiringReq`: it answers it `Failure(UnknownVerb)`
    // and acknowledges bare mutations; it reports the verbs it received.
    let old = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let old_addr = old.local_addr().unwrap();
    let (seen_tx, mut seen) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let Ok((mut stream, _)) = old.accept().await else { return };
        let mut decoder = FrameDecoder::default();
        let mut buf = bytes::BytesMut::new();
        loop {
            while let Ok(Some(frame)) = decoder.decode(&mut buf) {
                let _ = seen_tx.send(frame.verb);
                let answer = match frame.verb {
                    Verb::Handshake => continue,
                    Verb::MutationReq => Frame::response(Verb::MutationRsp, frame.request_id, Bytes::new()),
                    _ => {
                        let failure = Failure::new(FailureCode::UnknownVerb, "unknown verb 0x6b").encode();
                        Frame::response(Verb::Failure, frame.request_id, failure)
                    }
                };
                if stream.write_all(&answer.to_bytes()).await.is_err() {
                    return;
                }
            }
            match stream.read_buf(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    });
    let (a, _ha) = tcp_node(config()).await;
    for _ in 0..3 {
        let ack = a.send_request(old_addr, Verb::MutationReq, encode_mutations(&[]), SHORT).await.unwrap();
        assert_eq!(ack.0, Verb::MutationRsp);
    }
    let mut verbs = Vec::new();
    while let Ok(verb) = seen.try_recv() {
        verbs.push(verb);
    }
    // One expiring request, refused; then bare ones, the refused one again among them.
    assert_eq!(
        verbs,
        vec![Verb::Handshake, Verb::ExpiringReq, Verb::MutationReq, Verb::MutationReq, Verb::MutationReq]
    );
}
