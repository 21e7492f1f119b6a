//! Stream sessions over the in-memory network (`net::MemNetwork`): a source
//! node serving `Stream*` verbs from a real storage, a receiver pulling a
//! token range with `cluster::stream::Receiver::fetch`. Checks what arrives, that a
//! session resumes from the bytes the receiver already holds (a retry does
//! not send them again), that a damaged partial file is refused and fetched
//! again whole, and that the throttle holds the sender to its rate. Also
//! repair's validation (`verbs::validate`) paged over random sets of ranges
//! at random page sizes: every partition once, in order.

#![allow(clippy::unwrap_used, reason = "an integration test: a failed unwrap names its line")]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use cluster::stream::{self, StreamRegistry, StreamSource};
use net::{MemNetwork, MemTransport, TcpConfig, TcpTransport, Transport};
use storage::{CommitlogSync, PartitionRead, Storage, StorageConfig};
use types::mutation::{CellWrite, Liveness, Mutation, RowWrite};
use types::schema::{ClusteringOrder, ColumnDef, ColumnKind, KeyspaceDef, Replication, TableDef, TableOptions};
use types::CqlType;
use uuid::Uuid;

const TABLE: Uuid = Uuid::from_u128(0x5713_0000_0000_0000_0000_0000_0000_0001);

fn keyspace() -> KeyspaceDef {
    let col = |name: &str, ty, kind, id| ColumnDef {
        name: name.to_string(),
        ty,
        kind,
        position: 0,
        order: ClusteringOrder::Asc,
        id,
    };
    let table = TableDef {
        keyspace: "ks".into(),
        name: "t".into(),
        id: TABLE,
        columns: vec![
            col("k", CqlType::Int, ColumnKind::PartitionKey, 16),
            col("v", CqlType::Text, ColumnKind::Regular, 17),
        ],
        options: TableOptions::default(),
        next_column_id: 18,
        dropped_columns: BTreeMap::new(),
        indexes: Vec::new(),
    };
    KeyspaceDef {
        name: "ks".into(),
        replication: Replication::Simple { replication_factor: 1 },
        durable_writes: true,
        tables: [("t".to_string(), table)].into_iter().collect(),
        types: BTreeMap::new(),
    }
}

fn storage(dir: &std::path::Path) -> Arc<Storage> {
    let (s, _) = Storage::open(StorageConfig {
        data_dir: dir.to_path_buf(),
        commitlog_sync: CommitlogSync::Periodic { period: Duration::from_secs(10) },
        cache_bytes: 8 << 20,
        row_cache_bytes: 4 << 20,
        memtable_bytes: 8 << 20,
        memtable_space: 64 << 20,
        tombstone_horizon: i64::MAX,
    })
    .unwrap();
    s.set_schema(&[keyspace()]).unwrap();
    Arc::new(s)
}

fn token(k: i32) -> i64 {
    i64::from(k).wrapping_mul(0x9E37_79B9_7F4A_7C15u64 as i64)
}

/// `k` -> a value of about 1 KiB that names it.
fn value(k: i32) -> Bytes {
    Bytes::from(format!("{k:08}-{}", "x".repeat(1000)))
}

fn write(s: &Storage, keys: std::ops::Range<i32>) {
    let mutations: Vec<Mutation> = keys
        .map(|k| {
            let mut m = Mutation::new(TABLE, token(k), Bytes::copy_from_slice(&k.to_be_bytes()));
            m.rows.push(RowWrite {
                clustering: Vec::new(),
                is_static: false,
                marker: Some(Liveness { timestamp: 1, ttl: 0, local_expiration: 0 }),
                deletion: None,
                complex_deletions: Vec::new(),
                cells: vec![CellWrite {
                    column: 17,
                    path: None,
                    timestamp: 1,
                    ttl: 0,
                    local_deletion_time: 0,
                    value: Some(value(k)),
                }],
            });
            m
        })
        .collect();
    for chunk in mutations.chunks(500) {
        s.apply(chunk).unwrap();
    }
}

fn has(s: &Storage, k: i32) -> bool {
    let read = PartitionRead {
        table: TABLE,
        token: token(k),
        partition_key: k.to_be_bytes().to_vec(),
        ranges: Vec::new(),
        reversed: false,
        include_static: true,
        row_limit: usize::MAX,
        now: 0,
    };
    s.read_partition(&read).unwrap().is_some()
}

struct Pair<T = MemTransport> {
    _dirs: Vec<tempfile::TempDir>,
    source: Arc<Storage>,
    receiver: Arc<Storage>,
    streams: Arc<StreamSource>,
    transport: T,
    peer: SocketAddr,
    spool: std::path::PathBuf,
    registry: StreamRegistry,
}

impl<T: net::Transport> Pair<T> {
    fn receiver(&self) -> stream::Receiver<'_, T> {
        stream::Receiver {
            transport: &self.transport,
            storage: &self.receiver,
            registry: &self.registry,
            spool: &self.spool,
        }
    }
}

/// A source holding keys 0..n (memtable and flushed files both), serving the stream verbs; an empty receiver.
fn pair(n: i32, throughput: u64) -> Pair {
    let net = MemNetwork::new(7);
    let peer: SocketAddr = "10.0.0.1:7000".parse().unwrap();
    let (_source_transport, inbound) = net.add_node(peer);
    let (transport, _receiver_inbound) = net.add_node("10.0.0.2:7000".parse().unwrap());
    pair_on(n, throughput, transport, peer, inbound)
}

/// `pair` over real TCP on 127.0.0.1: the file data travels on bulk connections (`net::tcp`).
async fn tcp_pair(n: i32, throughput: u64) -> Pair<TcpTransport> {
    let config = || TcpConfig::new("127.0.0.1:0".parse().unwrap());
    let (source_transport, inbound) = TcpTransport::bind(config()).await.unwrap();
    let (transport, _receiver_inbound) = TcpTransport::bind(config()).await.unwrap();
    let peer = source_transport.local_addr();
    let p = pair_on(n, throughput, transport, peer, inbound);
    let serving = Arc::clone(&p.streams);
    source_transport.serve_bulk(Arc::new(move |conn, from| Arc::clone(&serving).serve_bulk(conn, from)));
    // The source's transport lives as long as the test's runtime.
    std::mem::forget(source_transport);
    p
}

fn pair_on<T>(
    n: i32,
    throughput: u64,
    transport: T,
    peer: SocketAddr,
    inbound: tokio::sync::mpsc::Receiver<net::Inbound>,
) -> Pair<T> {
    pair_cut(n, throughput, transport, peer, inbound, None)
}

/// `pair_on` with the source's exports cut into files of `file_bytes`.
fn pair_cut<T>(
    n: i32,
    throughput: u64,
    transport: T,
    peer: SocketAddr,
    mut inbound: tokio::sync::mpsc::Receiver<net::Inbound>,
    file_bytes: Option<u64>,
) -> Pair<T> {
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let source = storage(dirs[0].path());
    write(&source, 0..n / 2);
    source.flush(None).unwrap();
    write(&source, n / 2..n);
    let receiver = storage(dirs[1].path());
    let streams = StreamSource::new(
        Arc::clone(&source),
        dirs[2].path().join("out"),
        dirs[2].path().join("pulled"),
        throughput,
        Arc::default(),
    );
    let streams = Arc::new(match file_bytes {
        Some(bytes) => streams.with_file_bytes(bytes),
        None => streams,
    });
    let serving = Arc::clone(&streams);
    tokio::spawn(async move {
        while let Some(msg) = inbound.recv().await {
            let streams = Arc::clone(&serving);
            tokio::spawn(async move {
                let net::Inbound { from, verb, payload, responder, .. } = msg;
                match stream::serve(streams, from, verb, payload).await {
                    Ok((rsp, body)) => responder.respond(rsp, body),
                    Err(e) => responder.fail(net::FailureCode::Storage, &e),
                }
            });
        }
    });
    let spool = dirs[2].path().join("in");
    Pair { _dirs: dirs, source, receiver, streams, transport, peer, spool, registry: StreamRegistry::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_range_arrives_whole_and_only_that_range() {
    let registry = range_arrives_whole(pair(3000, 0)).await;
    assert_eq!(registry.list()[0].via, "requests", "the in-memory network has no bulk connections");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_range_arrives_whole_over_tcp_bulk_connections() {
    let p = tcp_pair(3000, 0).await;
    assert!(p.transport.bulk_connector().is_some());
    let registry = range_arrives_whole(p).await;
    assert_eq!(registry.list()[0].via, "bulk", "the file data came on a bulk connection");
}

/// Returns the receiver's registry.
async fn range_arrives_whole<T: Transport>(p: Pair<T>) -> StreamRegistry {
    // The keys whose tokens are negative.
    let range = (i64::MIN, -1);
    let session = Uuid::new_v4();
    let stats = p.receiver().fetch(p.peer, session, TABLE, &[range]).await.unwrap();
    assert!(stats.files >= 1 && stats.bytes > 1_000_000 && stats.fetched == stats.bytes, "{stats:?}");
    for k in 0..3000 {
        assert_eq!(has(&p.receiver, k), token(k) < 0 && token(k) != i64::MIN, "key {k}");
    }
    assert!(has(&p.source, 0) && has(&p.source, 2999));
    // Both sides list the session as done; the sender's export and the receiver's spool are gone.
    let received = p.registry.list();
    assert_eq!(received.len(), 1);
    assert_eq!((received[0].state.as_str(), received[0].bytes_done), ("done", stats.bytes));
    let sent = p.streams.registry.list();
    assert_eq!((sent[0].session, sent[0].state.as_str(), sent[0].bytes_done), (session, "done", stats.bytes));
    assert!(!p.spool.join(session.to_string()).exists());
    p.registry
}

/// An export of many files is written a few files ahead of the receiver: the sender's staging
/// directory never holds much more than `EXPORT_AHEAD_FILES` files, whatever the ranges' size, and
/// everything still arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_export_is_staged_a_few_files_ahead_of_the_receiver() {
    const FILE: u64 = 256 << 10;
    let config = || TcpConfig::new("127.0.0.1:0".parse().unwrap());
    let (source_transport, inbound) = TcpTransport::bind(config()).await.unwrap();
    let (transport, _receiver_inbound) = TcpTransport::bind(config()).await.unwrap();
    let peer = source_transport.local_addr();
    // 8 MB/s: the receiver is the slower end, so an unbounded export would run far ahead.
    let p = pair_cut(6000, 8_000_000, transport, peer, inbound, Some(FILE));
    let serving = Arc::clone(&p.streams);
    source_transport.serve_bulk(Arc::new(move |conn, from| Arc::clone(&serving).serve_bulk(conn, from)));
    std::mem::forget(source_transport);
    let staging = p._dirs[2].path().join("out");
    let watching = staging.clone();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopped = Arc::clone(&stop);
    let watcher = std::thread::spawn(move || {
        let mut peak = 0u64;
        while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
            let staged: u64 = walk(&watching).iter().filter_map(|f| std::fs::metadata(f).ok()).map(|m| m.len()).sum();
            peak = peak.max(staged);
            std::thread::sleep(Duration::from_millis(2));
        }
        peak
    });
    let stats = p.receiver().fetch(p.peer, Uuid::new_v4(), TABLE, &[(0, 0)]).await.unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let peak = watcher.join().unwrap();
    assert!(stats.files >= 10, "{stats:?}");
    assert!((0..6000).all(|k| has(&p.receiver, k)));
    let bound = (stream::EXPORT_AHEAD_FILES + 1) * FILE + FILE / 2;
    assert!(peak > 0 && peak <= bound, "staged at most {peak} bytes at once; bound {bound} ({} in all)", stats.bytes);
    assert!(walk(&staging).is_empty(), "the export is deleted once done");
}

/// Every file under `dir`, in its subdirectories too.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = e.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_session_resumes_and_a_damaged_file_is_fetched_again() {
    resumes_and_refetches(pair(3000, 0)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_session_resumes_over_tcp_bulk_connections() {
    resumes_and_refetches(tcp_pair(3000, 0).await).await;
}

async fn resumes_and_refetches<T: Transport>(p: Pair<T>) {
    let whole = (0, 0);
    // A damaged partial file: noticed by its CRC once fetched to its end, fetched again whole at
    // once, and then the session succeeds.
    let session = Uuid::new_v4();
    let (total, half) = half_held(&p, session, true).await;
    let stats = p.receiver().fetch(p.peer, session, TABLE, &[whole]).await.unwrap();
    assert_eq!(stats.bytes, total);
    assert_eq!(stats.fetched, (total - half) + total, "the rest of the damaged file, then all of it again");
    assert!((0..3000).all(|k| has(&p.receiver, k)));

    // A good partial file: only the rest is fetched.
    let session = Uuid::new_v4();
    let (total, half) = half_held(&p, session, false).await;
    let stats = p.receiver().fetch(p.peer, session, TABLE, &[whole]).await.unwrap();
    assert_eq!(stats.bytes, total);
    assert_eq!(stats.fetched, total - half, "the half already held is not sent again");
    let last = p.registry.list().into_iter().find(|s| s.session == session).unwrap();
    assert_eq!(last.bytes_skipped, half);
}

/// Has the source export the whole ring for `session` (one file of about 3 MB) and puts the first
/// half of it in the receiver's spool, as an earlier try that broke off would have left it,
/// `damaged` or not. Returns the file's size and the bytes held.
async fn half_held<T: Transport>(p: &Pair<T>, session: Uuid, damaged: bool) -> (u64, u64) {
    let req = cluster::wire::StreamRequest { session, table: TABLE, ranges: vec![(0, 0)], known: 0, held: 0 };
    let (files, _) = p.streams.prepare(p.peer, &req).await.unwrap();
    assert_eq!(files.len(), 1, "one file of about 3 MB: {files:?}");
    let exported = p.streams.dir().join(session.to_string()).join("0.sst");
    let bytes = std::fs::read(&exported).unwrap();
    assert_eq!(bytes.len() as u64, files[0].bytes);
    let half = bytes.len() / 2;
    let partial = p.spool.join(session.to_string()).join("0.sst");
    std::fs::create_dir_all(partial.parent().unwrap()).unwrap();
    let mut held = bytes[..half].to_vec();
    if damaged {
        held[half / 2] ^= 0xFF;
    }
    std::fs::write(&partial, &held).unwrap();
    (bytes.len() as u64, half as u64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sender_holds_to_its_throughput() {
    holds_throughput(pair(12_000, 8_000_000)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sender_holds_to_its_throughput_over_tcp_bulk_connections() {
    holds_throughput(tcp_pair(12_000, 8_000_000).await).await;
}

/// 8 MB/s; about 12 MB of data in 4 MiB chunks (1 MiB pieces on a bulk connection): every chunk,
/// the first too, waits until its bytes are paid for at that rate.
async fn holds_throughput<T: Transport>(p: Pair<T>) {
    let started = Instant::now();
    let stats = p.receiver().fetch(p.peer, Uuid::new_v4(), TABLE, &[(0, 0)]).await.unwrap();
    let elapsed = started.elapsed().as_secs_f64();
    let floor = stats.bytes as f64 / 8_000_000.0;
    assert!(floor > 1.0, "enough data to be throttled: {} bytes", stats.bytes);
    assert!(elapsed >= floor, "{} bytes in {elapsed:.2} s at 8 MB/s (at least {floor:.2} s)", stats.bytes);
}

/// Repair's validation pages (`verbs::validate`, through the wire codec) over
/// random sets of disjoint ranges (a wrapping one, the whole ring) at random
/// page sizes: every partition of the ranges exactly once, in the ranges'
/// order, every page but the last full; and the slice mode answers each
/// range's folded slices.
#[test]
fn validation_pages_every_partition_once_at_any_page_size() {
    use cluster::wire::{self, HashesRequest};
    use rand::{Rng, SeedableRng};

    let dir = tempfile::tempdir().unwrap();
    let s = storage(dir.path());
    write(&s, 0..2000);
    let mut rng = rand::rngs::StdRng::seed_from_u64(31);
    for _ in 0..60 {
        let ranges: Vec<(i64, i64)> = if rng.gen_ratio(1, 10) {
            let t = rng.gen();
            vec![(t, t)]
        } else {
            let n = rng.gen_range(1..=4);
            let mut tokens: Vec<i64> = (0..2 * n).map(|_| rng.gen()).collect();
            tokens.sort_unstable();
            tokens.dedup();
            let mut ranges: Vec<(i64, i64)> = tokens
                .chunks_exact(2)
                .filter_map(|p| match p {
                    [a, b] => Some((*a, *b)),
                    _ => None,
                })
                .collect();
            if rng.gen_bool(0.5) {
                if let (Some(first), Some(last)) = (tokens.first(), tokens.last()) {
                    ranges.push((*last, *first));
                }
            }
            ranges
        };
        let mut expected = Vec::new();
        for range in &ranges {
            s.each_partition_hash(&TABLE, *range, 0, |p| expected.push((p.token, p.key, p.hash))).unwrap();
        }
        let limit = rng.gen_range(1..=300);
        let mut req = HashesRequest {
            table: TABLE,
            ranges: ranges.clone(),
            now: 0,
            resume: None,
            limit,
            compact_first: false,
            slices: false,
        };
        let mut got = Vec::new();
        let most_pages = expected.len() / limit as usize + 2;
        for pages in 1.. {
            assert!(pages <= most_pages, "paging does not end ({ranges:?}, limit {limit})");
            let page = cluster::verbs::validate(&s, &req).unwrap();
            let page = wire::decode_hashes(&wire::encode_hashes(&page)).unwrap();
            let full = page.hashes.len() == limit as usize;
            got.extend(page.hashes.into_iter().map(|p| (p.token, p.key, p.hash)));
            match page.next {
                Some(next) => {
                    assert!(full, "only a full page has a next one ({ranges:?}, limit {limit})");
                    req.resume = Some(next);
                }
                None => break,
            }
        }
        assert_eq!(got, expected, "ranges {ranges:?}, limit {limit}");

        let slices = rng.gen_range(1..=64);
        let req = HashesRequest { limit: slices, slices: true, resume: None, ..req };
        let answered = cluster::verbs::validate_slices(&s, &req).unwrap();
        for (range, hashes) in ranges.iter().zip(&answered) {
            let mut mine = Vec::new();
            s.each_partition_hash(&TABLE, *range, 0, |p| mine.push((p.token, p.hash))).unwrap();
            assert_eq!(*hashes, storage::fold_buckets(*range, storage::bucket_count(*range, slices), mine));
        }
    }
}
