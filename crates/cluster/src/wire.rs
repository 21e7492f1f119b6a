//! Payloads the cluster layer defines on top of `net`'s frames: the read
//! command inside `ReadReq`/`DigestReq`, scans (`ScanReq`/`ScanRsp`), read
//! repair (`RepairReq`), repair's validation and its record (`HashesReq`, `RepairedReq`),
//! streaming (`Stream*`, `stream`), and the schema messages (`SchemaPush`/`SchemaPull`
//! carry JSON keyspace definitions). Big-endian, length-prefixed, like
//! `net::message`; layouts in `crates/net/FORMAT.md`'s terms:
//!
//! ```text
//! bound    := inclusive:u8 count:u16 blob[count]
//! command  := flags:u8 (bit0 reversed, bit1 include_static) row_limit:u64 now:i32
//!             range_count:u16 (start:bound end:bound)[range_count]
//! ScanReq  := table:uuid start_token:i64 end_token:i64 has_after:u8 [after_key:blob]
//!             partition_limit:u32
//! ScanRsp  := truncated:u8 count:u32 (token:i64 key:blob)[count]
//! RepairReq:= table:uuid count:u32 (key:blob value:blob)[count]
//! StreamReq:= session:uuid table:uuid count:u32 (start:i64 end:i64)[count] known:u32 held:u32
//! StreamRsp:= count:u32 (bytes:u64 entries:u64 crc32c:u32)[count] complete:u8
//! StreamChunkReq := session:uuid file:u32 offset:u64 len:u32      StreamChunkRsp := bytes
//! StreamDoneReq  := session:uuid                                  StreamDoneRsp  := (empty)
//! HashesReq:= table:uuid start:i64 end:i64 now:i32 flags:u8 (bit0 after, bit1 compact first,
//!             bit2 slices) [after_token:i64 after_key:blob] limit:u32 (slices: their number)
//! HashesRsp:= more:u8 count:u32 (token:i64 key:blob hash:u64 bytes:u64)[count]
//!             | count:u32 hash:u64[count]   (slice mode)
//! RepairPushReq, RepairPushRsp: `cluster::repair`
//! StreamPullReq := session:uuid table:uuid source:blob("ip:port") count:u32 (start:i64 end:i64)[count]
//! StreamPullRsp := files:u32 bytes:u64 fetched:u64 entries:u64
//! RepairedReq   := table:uuid repaired_at:i64 count:u32 (start:i64 end:i64)[count]
//!                  [count:u32 generation:u64[count]]   (the replica's generations, incremental repair)
//! RepairedRsp   := (empty)
//! RepairStateReq:= table:uuid count:u32 (start:i64 end:i64)[count]
//! RepairStateRsp:= count:u32 (repaired:u8 generation:u64)[count]
//! CounterMutationReq := consistency:u16 MutationReq   (counter cells hold deltas)
//! CounterMutationRsp := 0 | 1 consistency:u16 required:i32 alive:i32 (Unavailable)
//!                       | 2 consistency:u16 received:i32 block_for:i32 (WriteTimeout)
//!                       | 3 message:blob (Invalid) | 4 message:blob (server error)
//! ```
//!
//! Invariants: decoders are bounds-checked and never panic on garbage; every
//! count is checked against the bytes left before allocating.

use bytes::{BufMut, Bytes, BytesMut};
use storage::{IndexScan, PartitionHash, PartitionRead, ScanRange};
use types::bytes::ByteReader;
use types::mutation::ClusteringBound;
use uuid::Uuid;

#[derive(Clone, Debug, thiserror::Error)]
#[error("malformed {what}")]
pub struct WireError {
    pub what: &'static str,
}

type Reader<'a> = ByteReader<'a, WireError>;

/// The checks of this crate's payloads on top of `ByteReader`.
trait PayloadChecks {
    /// A count of items each at least `min_item` bytes long.
    fn count(&mut self, n: usize, min_item: usize) -> Result<usize, WireError>;
    /// Nothing may follow the payload.
    fn finish(&self) -> Result<(), WireError>;
}

impl PayloadChecks for Reader<'_> {
    fn count(&mut self, n: usize, min_item: usize) -> Result<usize, WireError> {
        if n.saturating_mul(min_item) > self.remaining() {
            return Err(self.error());
        }
        Ok(n)
    }

    fn finish(&self) -> Result<(), WireError> {
        if self.is_empty() {
            Ok(())
        } else {
            Err(self.error())
        }
    }
}

fn put_blob(out: &mut BytesMut, b: &[u8]) {
    out.put_u32(b.len() as u32);
    out.put_slice(b);
}

/// `count:u32 (start:i64 end:i64)[count]`: token ranges.
fn put_ranges(out: &mut BytesMut, ranges: &[(i64, i64)]) {
    out.put_u32(ranges.len() as u32);
    for (start, end) in ranges {
        out.put_i64(*start);
        out.put_i64(*end);
    }
}

fn ranges(r: &mut Reader<'_>) -> Result<Vec<(i64, i64)>, WireError> {
    let n = r.u32()? as usize;
    let n = r.count(n, 16)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push((r.i64()?, r.i64()?));
    }
    Ok(out)
}

fn put_bound(out: &mut BytesMut, b: &ClusteringBound) {
    out.put_u8(u8::from(b.inclusive));
    out.put_u16(b.prefix.len() as u16);
    for p in &b.prefix {
        put_blob(out, p);
    }
}

fn bound(r: &mut Reader<'_>) -> Result<ClusteringBound, WireError> {
    let inclusive = r.u8()? != 0;
    let n = r.u16()? as usize;
    let n = r.count(n, 4)?;
    let mut prefix = Vec::with_capacity(n);
    for _ in 0..n {
        prefix.push(Bytes::copy_from_slice(r.blob()?));
    }
    Ok(ClusteringBound { prefix, inclusive })
}

/// The slice part of a partition read (table, token and key travel in `net::ReadRequest`).
pub fn encode_command(read: &PartitionRead) -> Bytes {
    let mut out = BytesMut::new();
    out.put_u8(u8::from(read.reversed) | (u8::from(read.include_static) << 1));
    out.put_u64(read.row_limit as u64);
    out.put_i32(read.now);
    out.put_u16(read.ranges.len() as u16);
    for (s, e) in &read.ranges {
        put_bound(&mut out, s);
        put_bound(&mut out, e);
    }
    out.freeze()
}

pub fn decode_command(
    table: Uuid,
    token: i64,
    partition_key: Vec<u8>,
    bytes: &[u8],
) -> Result<PartitionRead, WireError> {
    let mut r = ByteReader::new(bytes, WireError { what: "read command" });
    let flags = r.u8()?;
    let row_limit = usize::try_from(r.u64()?).unwrap_or(usize::MAX);
    let now = r.i32()?;
    let n = r.u16()? as usize;
    let n = r.count(n, 6)?;
    let mut ranges = Vec::with_capacity(n);
    for _ in 0..n {
        ranges.push((bound(&mut r)?, bound(&mut r)?));
    }
    r.finish()?;
    Ok(PartitionRead {
        table,
        token,
        partition_key,
        ranges,
        reversed: flags & 1 != 0,
        include_static: flags & 2 != 0,
        row_limit,
        now,
    })
}

/// A key query's token range, the key it starts after, and its limit, as
/// scans and index scans carry them: `start_token:i64 end_token:i64
/// has_after:u8 [after_key:blob] limit:u32`.
struct KeyRange {
    start_token: i64,
    end_token: i64,
    after_key: Option<Vec<u8>>,
    partition_limit: usize,
}

fn put_key_range(out: &mut BytesMut, start_token: i64, end_token: i64, after_key: Option<&[u8]>, limit: usize) {
    out.put_i64(start_token);
    out.put_i64(end_token);
    match after_key {
        Some(k) => {
            out.put_u8(1);
            put_blob(out, k);
        }
        None => out.put_u8(0),
    }
    out.put_u32(u32::try_from(limit).unwrap_or(u32::MAX));
}

fn read_key_range(r: &mut Reader<'_>) -> Result<KeyRange, WireError> {
    let start_token = r.i64()?;
    let end_token = r.i64()?;
    let after_key = if r.u8()? != 0 { Some(r.blob()?.to_vec()) } else { None };
    let partition_limit = r.u32()? as usize;
    Ok(KeyRange { start_token, end_token, after_key, partition_limit })
}

pub fn encode_scan(scan: &ScanRange) -> Bytes {
    let mut out = BytesMut::new();
    out.put_slice(scan.table.as_bytes());
    put_key_range(&mut out, scan.start_token, scan.end_token, scan.after_key.as_deref(), scan.partition_limit);
    out.freeze()
}

/// A key scan: the per-partition read is unused by replicas (they return keys only).
pub fn decode_scan(bytes: &[u8]) -> Result<ScanRange, WireError> {
    let mut r = ByteReader::new(bytes, WireError { what: "scan request" });
    let table = r.uuid()?;
    let KeyRange { start_token, end_token, after_key, partition_limit } = read_key_range(&mut r)?;
    r.finish()?;
    Ok(ScanRange {
        table,
        start_token,
        after_key,
        end_token,
        partition_limit,
        per_partition: PartitionRead::whole(table, 0),
        row_limit: usize::MAX,
    })
}

/// `IndexScanReq := index:uuid value:blob start_token:i64 end_token:i64 has_after:u8 [after_key:blob] limit:u32 now:i32`
pub fn encode_index_scan(scan: &IndexScan) -> Bytes {
    let mut out = BytesMut::new();
    out.put_slice(scan.index.as_bytes());
    put_blob(&mut out, &scan.value);
    put_key_range(&mut out, scan.start_token, scan.end_token, scan.after_key.as_deref(), scan.partition_limit);
    out.put_i32(scan.now);
    out.freeze()
}

pub fn decode_index_scan(bytes: &[u8]) -> Result<IndexScan, WireError> {
    let mut r = ByteReader::new(bytes, WireError { what: "index scan request" });
    let index = r.uuid()?;
    let value = r.blob()?.to_vec();
    let KeyRange { start_token, end_token, after_key, partition_limit } = read_key_range(&mut r)?;
    let now = r.i32()?;
    r.finish()?;
    Ok(IndexScan { index, value, start_token, after_key, end_token, partition_limit, now })
}

pub fn encode_keys(truncated: bool, keys: &[(i64, Vec<u8>)]) -> Bytes {
    let mut out = BytesMut::new();
    out.put_u8(u8::from(truncated));
    out.put_u32(keys.len() as u32);
    for (t, k) in keys {
        out.put_i64(*t);
        put_blob(&mut out, k);
    }
    out.freeze()
}

/// Partition keys (token, key) in token order.
pub type Keys = Vec<(i64, Vec<u8>)>;

/// `(truncated, keys)`: truncated when the replica stopped at the limit.
pub fn decode_keys(bytes: &[u8]) -> Result<(bool, Keys), WireError> {
    let mut r = ByteReader::new(bytes, WireError { what: "scan response" });
    let truncated = r.u8()? != 0;
    let n = r.u32()? as usize;
    let n = r.count(n, 12)?;
    let mut keys = Vec::with_capacity(n);
    for _ in 0..n {
        let t = r.i64()?;
        keys.push((t, r.blob()?.to_vec()));
    }
    r.finish()?;
    Ok((truncated, keys))
}

pub fn encode_repair(table: Uuid, cells: &[(Vec<u8>, Vec<u8>)]) -> Bytes {
    let mut out = BytesMut::new();
    out.put_slice(table.as_bytes());
    out.put_u32(cells.len() as u32);
    for (k, v) in cells {
        put_blob(&mut out, k);
        put_blob(&mut out, v);
    }
    out.freeze()
}

pub type RepairCells = Vec<(Vec<u8>, Vec<u8>)>;

pub fn decode_repair(bytes: &[u8]) -> Result<(Uuid, RepairCells), WireError> {
    let mut r = ByteReader::new(bytes, WireError { what: "repair request" });
    let table = r.uuid()?;
    let n = r.u32()? as usize;
    let n = r.count(n, 8)?;
    let mut cells = Vec::with_capacity(n);
    for _ in 0..n {
        let k = r.blob()?.to_vec();
        cells.push((k, r.blob()?.to_vec()));
    }
    r.finish()?;
    Ok((table, cells))
}

/// A file of a stream session, as the sender describes it (`StreamRsp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamFileInfo {
    pub bytes: u64,
    pub entries: u64,
    pub crc32c: u32,
}

/// `StreamReq`: export these token ranges (`(start, end]`) of a table for a
/// session, and answer with its files once there are more than `known` of
/// them or the export is complete; the receiver holds the first `held`
/// files whole (the sender may delete them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamRequest {
    pub session: Uuid,
    pub table: Uuid,
    pub ranges: Vec<(i64, i64)>,
    pub known: u32,
    pub held: u32,
}

pub fn encode_stream_request(req: &StreamRequest) -> Bytes {
    let mut out = BytesMut::with_capacity(44 + 16 * req.ranges.len());
    out.put_slice(req.session.as_bytes());
    out.put_slice(req.table.as_bytes());
    put_ranges(&mut out, &req.ranges);
    out.put_u32(req.known);
    out.put_u32(req.held);
    out.freeze()
}

pub fn decode_stream_request(bytes: &[u8]) -> Result<StreamRequest, WireError> {
    let mut r = ByteReader::new(bytes, WireError { what: "stream request" });
    let session = r.uuid()?;
    let table = r.uuid()?;
    let ranges = ranges(&mut r)?;
    let (known, held) = (r.u32()?, r.u32()?);
    r.finish()?;
    Ok(StreamRequest { session, table, ranges, known, held })
}

/// `StreamRsp`: the session's files so far, and whether they are all of it.
pub fn encode_stream_files(files: &[StreamFileInfo], complete: bool) -> Bytes {
    let mut out = BytesMut::with_capacity(5 + 20 * files.len());
    out.put_u32(files.len() as u32);
    for f in files {
        out.put_u64(f.bytes);
        out.put_u64(f.entries);
        out.put_u32(f.crc32c);
    }
    out.put_u8(u8::from(complete));
    out.freeze()
}

pub fn decode_stream_files(bytes: &[u8]) -> Result<(Vec<StreamFileInfo>, bool), WireError> {
    let mut r = ByteReader::new(bytes, WireError { what: "stream files" });
    let n = r.u32()? as usize;
    let n = r.count(n, 20)?;
    let mut files = Vec::with_capacity(n);
    for _ in 0..n {
        files.push(StreamFileInfo { bytes: r.u64()?, entries: r.u64()?, crc32c: r.u32()? });
    }
    let complete = r.u8()? != 0;
    r.finish()?;
    Ok((files, complete))
}

/// `StreamChunkReq`: up to `len` bytes of a session's file from `offset`.
pub fn encode_stream_chunk(session: Uuid, file: u32, offset: u64, len: u32) -> Bytes {
    let mut out = BytesMut::with_capacity(32);
    out.put_slice(session.as_bytes());
    out.put_u32(file);
    out.put_u64(offset);
    out.put_u32(len);
    out.freeze()
}

pub fn decode_stream_chunk(bytes: &[u8]) -> Result<(Uuid, u32, u64, u32), WireError> {
    let mut r = ByteReader::new(bytes, WireError { what: "stream chunk request" });
    let chunk = (r.uuid()?, r.u32()?, r.u64()?, r.u32()?);
    r.finish()?;
    Ok(chunk)
}

/// `StreamDoneReq`: the receiver holds the session's data.
pub fn encode_stream_done(session: Uuid) -> Bytes {
    Bytes::copy_from_slice(session.as_bytes())
}

pub fn decode_stream_done(bytes: &[u8]) -> Result<Uuid, WireError> {
    let mut r = ByteReader::new(bytes, WireError { what: "stream done" });
    let session = r.uuid()?;
    r.finish()?;
    Ok(session)
}

/// `HashesReq`: repair's validation of token ranges of a table: partition
/// hashes a page at a time, or (slice mode) hashes of equal token slices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HashesRequest {
    pub table: Uuid,
    /// `(start, end]` ranges, wrapping, answered in this order.
    pub ranges: Vec<(i64, i64)>,
    /// Seconds since the epoch: every replica reads as of the same moment.
    pub now: i32,
    /// Partition mode: resume in `ranges[index]`, strictly after the
    /// partition (token, key) when given (`HashesPage::next`).
    pub resume: Option<Resume>,
    /// Partition mode: partitions per page; slice mode: slices per range.
    pub limit: u32,
    /// Compact the table first, so replicas compare canonical data.
    pub compact_first: bool,
    /// Slice mode: `limit` slice hashes of each range (`Storage::bucket_hashes`).
    pub slices: bool,
}

/// Where a page of partition hashes starts: an index into the request's
/// ranges, and the partition (token, key) it follows, if any.
pub type Resume = (u32, Option<(i64, Vec<u8>)>);

/// The most ranges one `HashesReq` may name.
pub const HASHES_RANGES_MAX: usize = 65_536;

pub fn encode_hashes_request(req: &HashesRequest) -> Bytes {
    let mut out = BytesMut::with_capacity(40 + 16 * req.ranges.len());
    out.put_slice(req.table.as_bytes());
    out.put_i32(req.now);
    out.put_u8(u8::from(req.resume.is_some()) | (u8::from(req.compact_first) << 1) | (u8::from(req.slices) << 2));
    put_ranges(&mut out, &req.ranges);
    if let Some((index, after)) = &req.resume {
        out.put_u32(*index);
        out.put_u8(u8::from(after.is_some()));
        if let Some((token, key)) = after {
            out.put_i64(*token);
            put_blob(&mut out, key);
        }
    }
    out.put_u32(req.limit);
    out.freeze()
}

pub fn decode_hashes_request(bytes: &[u8]) -> Result<HashesRequest, WireError> {
    let err = WireError { what: "hashes request" };
    let mut r = ByteReader::new(bytes, err.clone());
    let table = r.uuid()?;
    let now = r.i32()?;
    let flags = r.u8()?;
    if flags & !7 != 0 {
        return Err(err);
    }
    let ranges = ranges(&mut r)?;
    if ranges.len() > HASHES_RANGES_MAX {
        return Err(err);
    }
    let resume = if flags & 1 != 0 {
        let index = r.u32()?;
        let after = if r.u8()? != 0 { Some((r.i64()?, r.blob()?.to_vec())) } else { None };
        Some((index, after))
    } else {
        None
    };
    let limit = r.u32()?;
    r.finish()?;
    Ok(HashesRequest { table, ranges, now, resume, limit, compact_first: flags & 2 != 0, slices: flags & 4 != 0 })
}

/// `HashesRsp` in slice mode: each range's slice hashes.
pub fn encode_slice_hashes(per_range: &[Vec<u64>]) -> Bytes {
    let mut out = BytesMut::with_capacity(4 + per_range.iter().map(|h| 4 + 8 * h.len()).sum::<usize>());
    out.put_u32(per_range.len() as u32);
    for hashes in per_range {
        out.put_u32(hashes.len() as u32);
        for h in hashes {
            out.put_u64(*h);
        }
    }
    out.freeze()
}

pub fn decode_slice_hashes(bytes: &[u8]) -> Result<Vec<Vec<u64>>, WireError> {
    let mut r = ByteReader::new(bytes, WireError { what: "slice hashes" });
    let n = r.u32()? as usize;
    let n = r.count(n, 4)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let m = r.u32()? as usize;
        let m = r.count(m, 8)?;
        let mut hashes = Vec::with_capacity(m);
        for _ in 0..m {
            hashes.push(r.u64()?);
        }
        out.push(hashes);
    }
    r.finish()?;
    Ok(out)
}

/// A page of partition hashes, and where the next page starts (an index
/// into the request's ranges, and the last partition of this page).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HashesPage {
    pub hashes: Vec<PartitionHash>,
    pub next: Option<Resume>,
}

/// `HashesRsp`: a page of partition hashes, compactly (varint lengths).
pub fn encode_hashes(page: &HashesPage) -> Bytes {
    let mut out = BytesMut::new();
    match &page.next {
        None => out.put_u8(0),
        Some((index, after)) => {
            out.put_u8(1 | (u8::from(after.is_some()) << 1));
            out.put_u32(*index);
            if let Some((token, key)) = after {
                out.put_i64(*token);
                put_blob(&mut out, key);
            }
        }
    }
    out.put_u32(page.hashes.len() as u32);
    for h in &page.hashes {
        out.put_i64(h.token);
        put_varint(&mut out, h.key.len() as u64);
        out.put_slice(&h.key);
        out.put_u64(h.hash);
        put_varint(&mut out, h.bytes);
    }
    out.freeze()
}

pub fn decode_hashes(bytes: &[u8]) -> Result<HashesPage, WireError> {
    let err = WireError { what: "hashes" };
    let mut r = ByteReader::new(bytes, err.clone());
    let flags = r.u8()?;
    if flags & !3 != 0 {
        return Err(err);
    }
    let next = if flags & 1 != 0 {
        let index = r.u32()?;
        let after = if flags & 2 != 0 { Some((r.i64()?, r.blob()?.to_vec())) } else { None };
        Some((index, after))
    } else {
        None
    };
    let n = r.u32()? as usize;
    let n = r.count(n, 8 + 1 + 8 + 1)?;
    let mut hashes = Vec::with_capacity(n);
    for _ in 0..n {
        let token = r.i64()?;
        let len = usize::try_from(get_varint(&mut r)?).map_err(|_| err.clone())?;
        let key = r.take(len)?.to_vec();
        let hash = r.u64()?;
        let bytes = get_varint(&mut r)?;
        hashes.push(PartitionHash { token, key, hash, bytes });
    }
    r.finish()?;
    Ok(HashesPage { hashes, next })
}

fn put_varint(out: &mut BytesMut, mut n: u64) {
    while n >= 0x80 {
        out.put_u8((n as u8) | 0x80);
        n >>= 7;
    }
    out.put_u8(n as u8);
}

fn get_varint(r: &mut Reader<'_>) -> Result<u64, WireError> {
    let mut n = 0u64;
    for shift in (0..64).step_by(7) {
        let b = r.u8()?;
        n |= u64::from(b & 0x7F) << shift;
        if b & 0x80 == 0 {
            return Ok(n);
        }
    }
    Err(r.error())
}

/// `StreamPullReq`: pull these ranges of a table from `source` (for a node leaving the ring, or
/// removenode), as session `session`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamPull {
    pub session: Uuid,
    pub table: Uuid,
    pub source: std::net::SocketAddr,
    pub ranges: Vec<(i64, i64)>,
}

pub fn encode_stream_pull(req: &StreamPull) -> Bytes {
    let mut out = BytesMut::new();
    out.put_slice(req.session.as_bytes());
    out.put_slice(req.table.as_bytes());
    put_blob(&mut out, req.source.to_string().as_bytes());
    put_ranges(&mut out, &req.ranges);
    out.freeze()
}

pub fn decode_stream_pull(bytes: &[u8]) -> Result<StreamPull, WireError> {
    let mut r = ByteReader::new(bytes, WireError { what: "stream pull" });
    let session = r.uuid()?;
    let table = r.uuid()?;
    let source = std::str::from_utf8(r.blob()?).ok().and_then(|s| s.parse().ok()).ok_or(r.error())?;
    let ranges = ranges(&mut r)?;
    r.finish()?;
    Ok(StreamPull { session, table, source, ranges })
}

/// `StreamPullRsp`: what the session moved.
pub fn encode_stream_stats(stats: &crate::stream::StreamStats) -> Bytes {
    let mut out = BytesMut::with_capacity(28);
    out.put_u32(stats.files as u32);
    out.put_u64(stats.bytes);
    out.put_u64(stats.fetched);
    out.put_u64(stats.entries);
    out.freeze()
}

pub fn decode_stream_stats(bytes: &[u8]) -> Result<crate::stream::StreamStats, WireError> {
    let mut r = ByteReader::new(bytes, WireError { what: "stream stats" });
    let stats =
        crate::stream::StreamStats { files: r.u32()? as usize, bytes: r.u64()?, fetched: r.u64()?, entries: r.u64()? };
    r.finish()?;
    Ok(stats)
}

/// `RepairedReq`: a repair that began at `repaired_at` (unix seconds)
/// finished these ranges of a table (`crate::repaired`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Repaired {
    pub table: Uuid,
    pub repaired_at: i64,
    pub ranges: Vec<(i64, i64)>,
    /// The replica's write generation of each range when the repair read it
    /// (`RepairStateRsp`): each range still at it is repaired there
    /// (`Storage::set_repaired`). Empty: record the time only.
    pub generations: Vec<u64>,
}

pub fn encode_repaired(req: &Repaired) -> Bytes {
    let mut out = BytesMut::with_capacity(32 + 24 * req.ranges.len());
    out.put_slice(req.table.as_bytes());
    out.put_i64(req.repaired_at);
    put_ranges(&mut out, &req.ranges);
    if !req.generations.is_empty() {
        out.put_u32(req.generations.len() as u32);
        for g in &req.generations {
            out.put_u64(*g);
        }
    }
    out.freeze()
}

pub fn decode_repaired(bytes: &[u8]) -> Result<Repaired, WireError> {
    let mut r = ByteReader::new(bytes, WireError { what: "repaired" });
    let table = r.uuid()?;
    let repaired_at = r.i64()?;
    let ranges = ranges(&mut r)?;
    let mut generations = Vec::new();
    if !r.is_empty() {
        let n = r.u32()? as usize;
        let n = r.count(n, 8)?;
        if n != ranges.len() {
            return Err(WireError { what: "repaired: one generation per range" });
        }
        for _ in 0..n {
            generations.push(r.u64()?);
        }
    }
    r.finish()?;
    Ok(Repaired { table, repaired_at, ranges, generations })
}

/// `RepairStateReq`: is each of these ranges of a table repaired on the
/// replica, and at which write generation (incremental repair).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepairStateRequest {
    pub table: Uuid,
    pub ranges: Vec<(i64, i64)>,
}

pub fn encode_repair_state_request(req: &RepairStateRequest) -> Bytes {
    let mut out = BytesMut::with_capacity(20 + 16 * req.ranges.len());
    out.put_slice(req.table.as_bytes());
    put_ranges(&mut out, &req.ranges);
    out.freeze()
}

pub fn decode_repair_state_request(bytes: &[u8]) -> Result<RepairStateRequest, WireError> {
    let mut r = ByteReader::new(bytes, WireError { what: "repair state request" });
    let table = r.uuid()?;
    let ranges = ranges(&mut r)?;
    r.finish()?;
    Ok(RepairStateRequest { table, ranges })
}

pub fn encode_repair_states(states: &[storage::RangeState]) -> Bytes {
    let mut out = BytesMut::with_capacity(4 + 9 * states.len());
    out.put_u32(states.len() as u32);
    for s in states {
        out.put_u8(u8::from(s.repaired));
        out.put_u64(s.generation);
    }
    out.freeze()
}

pub fn decode_repair_states(bytes: &[u8]) -> Result<Vec<storage::RangeState>, WireError> {
    let mut r = ByteReader::new(bytes, WireError { what: "repair states" });
    let n = r.u32()? as usize;
    let n = r.count(n, 9)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let repaired = match r.u8()? {
            0 => false,
            1 => true,
            _ => return Err(WireError { what: "repair states: a flag is 0 or 1" }),
        };
        out.push(storage::RangeState { repaired, generation: r.u64()? });
    }
    r.finish()?;
    Ok(out)
}

/// `CounterMutationReq`: counter updates (deltas) for the leader to apply at `consistency`.
pub fn encode_counter_request(consistency: types::Consistency, mutations: &[types::mutation::Mutation]) -> Bytes {
    let body = net::message::encode_mutations(mutations.iter());
    let mut out = BytesMut::with_capacity(2 + body.len());
    out.put_u16(consistency.code());
    out.put_slice(&body);
    out.freeze()
}

pub fn decode_counter_request(
    bytes: &Bytes,
) -> Result<(types::Consistency, Vec<types::mutation::Mutation>), WireError> {
    let err = WireError { what: "counter mutation" };
    let code: [u8; 2] = bytes.get(..2).and_then(|c| c.try_into().ok()).ok_or_else(|| err.clone())?;
    let cl = types::Consistency::from_code(u16::from_be_bytes(code)).ok_or_else(|| err.clone())?;
    let mutations = net::message::decode_mutations(&bytes.slice(2..)).map_err(|_| err)?;
    Ok((cl, mutations))
}

/// `CounterMutationRsp`: the leader's outcome, as the coordinator reports it.
pub fn encode_counter_outcome(outcome: &Result<(), crate::plan::CoordError>) -> Bytes {
    use crate::plan::CoordError as E;
    let mut out = BytesMut::with_capacity(16);
    match outcome {
        Ok(()) => out.put_u8(0),
        Err(E::Unavailable { consistency, required, alive }) => {
            out.put_u8(1);
            out.put_u16(consistency.code());
            out.put_i32(*required);
            out.put_i32(*alive);
        }
        Err(E::WriteTimeout { consistency, received, block_for, .. })
        | Err(E::ReadTimeout { consistency, received, block_for, .. }) => {
            out.put_u8(2);
            out.put_u16(consistency.code());
            out.put_i32(*received);
            out.put_i32(*block_for);
        }
        Err(E::Invalid(m)) => {
            out.put_u8(3);
            put_blob(&mut out, m.as_bytes());
        }
        // A counter leader reads no index; were it to fail so, the coordinator reports a server error.
        Err(E::Server(m)) | Err(E::ReadFailure { message: m, .. }) => {
            out.put_u8(4);
            put_blob(&mut out, m.as_bytes());
        }
    }
    out.freeze()
}

pub fn decode_counter_outcome(bytes: &[u8]) -> Result<Result<(), crate::plan::CoordError>, WireError> {
    use crate::plan::CoordError as E;
    let mut r = ByteReader::new(bytes, WireError { what: "counter outcome" });
    let cl = |r: &mut Reader<'_>| {
        let code = r.u16()?;
        types::Consistency::from_code(code).ok_or(WireError { what: "counter outcome consistency" })
    };
    let outcome = match r.u8()? {
        0 => Ok(()),
        1 => Err(E::Unavailable { consistency: cl(&mut r)?, required: r.i32()?, alive: r.i32()? }),
        2 => Err(E::WriteTimeout {
            consistency: cl(&mut r)?,
            received: r.i32()?,
            block_for: r.i32()?,
            write_type: types::WriteType::Counter,
        }),
        3 => Err(E::Invalid(String::from_utf8_lossy(r.blob()?).into_owned())),
        4 => Err(E::Server(String::from_utf8_lossy(r.blob()?).into_owned())),
        _ => return Err(WireError { what: "counter outcome kind" }),
    };
    r.finish()?;
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn round_trips() {
        let read = PartitionRead {
            table: Uuid::from_u128(7),
            token: 42,
            partition_key: b"pk".to_vec(),
            ranges: vec![(
                ClusteringBound { prefix: vec![Bytes::from_static(b"a")], inclusive: false },
                ClusteringBound::unbounded(),
            )],
            reversed: true,
            include_static: false,
            row_limit: 10,
            now: 99,
        };
        let back = decode_command(read.table, 42, b"pk".to_vec(), &encode_command(&read)).unwrap();
        assert_eq!(format!("{back:?}"), format!("{read:?}"));
        let keys = vec![(1, b"x".to_vec()), (-5, Vec::new())];
        assert_eq!(decode_keys(&encode_keys(true, &keys)).unwrap(), (true, keys));
        let cells = vec![(b"k".to_vec(), b"v".to_vec())];
        assert_eq!(decode_repair(&encode_repair(Uuid::from_u128(3), &cells)).unwrap(), (Uuid::from_u128(3), cells));
        let req = StreamRequest {
            session: Uuid::from_u128(5),
            table: Uuid::from_u128(6),
            ranges: vec![(i64::MIN, -1), (i64::MAX, 0)],
            known: 7,
            held: 3,
        };
        assert_eq!(decode_stream_request(&encode_stream_request(&req)).unwrap(), req);
        let files = vec![StreamFileInfo { bytes: 1 << 40, entries: 3, crc32c: 0xDEAD_BEEF }];
        for complete in [false, true] {
            assert_eq!(decode_stream_files(&encode_stream_files(&files, complete)).unwrap(), (files.clone(), complete));
        }
        assert_eq!(
            decode_stream_chunk(&encode_stream_chunk(req.session, 2, 99, 4096)).unwrap(),
            (req.session, 2, 99, 4096)
        );
        assert_eq!(decode_stream_done(&encode_stream_done(req.session)).unwrap(), req.session);
        // Trailing bytes and short input are refused.
        let mut long = encode_stream_done(req.session).to_vec();
        long.push(0);
        assert!(decode_stream_done(&long).is_err() && decode_stream_done(&long[..15]).is_err());
        let hreq = HashesRequest {
            table: req.table,
            ranges: vec![(5, -5), (-3, 4)],
            now: 1_700_000_000,
            resume: Some((1, Some((-9, b"pk".to_vec())))),
            limit: 1000,
            compact_first: true,
            slices: false,
        };
        assert_eq!(decode_hashes_request(&encode_hashes_request(&hreq)).unwrap(), hreq);
        let first = HashesRequest { resume: None, compact_first: false, ..hreq.clone() };
        assert_eq!(decode_hashes_request(&encode_hashes_request(&first)).unwrap(), first);
        let next_range = HashesRequest { resume: Some((1, None)), ..hreq.clone() };
        assert_eq!(decode_hashes_request(&encode_hashes_request(&next_range)).unwrap(), next_range);
        let slices = HashesRequest { slices: true, ..hreq };
        assert_eq!(decode_hashes_request(&encode_hashes_request(&slices)).unwrap(), slices);
        let per_range = vec![vec![0, u64::MAX, 7], Vec::new()];
        assert_eq!(decode_slice_hashes(&encode_slice_hashes(&per_range)).unwrap(), per_range);
        assert!(decode_slice_hashes(&encode_slice_hashes(&per_range)[..10]).is_err());
        let big = PartitionHash { token: 3, key: vec![7; 300], hash: u64::MAX, bytes: 1 << 40 };
        for page in [
            HashesPage { hashes: vec![big.clone()], next: Some((2, Some((3, vec![7; 300])))) },
            HashesPage { hashes: vec![big.clone(), PartitionHash { bytes: 0, key: Vec::new(), ..big }], next: None },
            HashesPage { hashes: Vec::new(), next: Some((1, None)) },
        ] {
            let encoded = encode_hashes(&page);
            assert_eq!(decode_hashes(&encoded).unwrap(), page);
            assert!(decode_hashes(&encoded[..encoded.len() - 1]).is_err());
        }
        let pull = StreamPull {
            session: req.session,
            table: req.table,
            source: "127.0.0.4:7000".parse().unwrap(),
            ranges: vec![(1, 2), (9, -9)],
        };
        assert_eq!(decode_stream_pull(&encode_stream_pull(&pull)).unwrap(), pull);
        let stats = crate::stream::StreamStats { files: 2, bytes: 3, fetched: 1, entries: 9 };
        assert_eq!(decode_stream_stats(&encode_stream_stats(&stats)).unwrap(), stats);
        let repaired = Repaired {
            table: req.table,
            repaired_at: 1_700_000_000,
            ranges: vec![(i64::MIN, -3), (i64::MAX, 4)],
            generations: Vec::new(),
        };
        assert_eq!(decode_repaired(&encode_repaired(&repaired)).unwrap(), repaired);
        let with_generations = Repaired { generations: vec![7, u64::MAX], ..repaired.clone() };
        assert_eq!(decode_repaired(&encode_repaired(&with_generations)).unwrap(), with_generations);
        let mut short = encode_repaired(&Repaired { generations: vec![7], ..repaired.clone() }).to_vec();
        assert!(decode_repaired(&short).is_err(), "one generation per range");
        short.truncate(short.len() - 1);
        assert!(decode_repaired(&short).is_err());
        let state = RepairStateRequest { table: req.table, ranges: vec![(3, -3)] };
        assert_eq!(decode_repair_state_request(&encode_repair_state_request(&state)).unwrap(), state);
        let states = vec![
            storage::RangeState { repaired: true, generation: 9 },
            storage::RangeState { repaired: false, generation: 0 },
        ];
        assert_eq!(decode_repair_states(&encode_repair_states(&states)).unwrap(), states);
        let mut bad_flag = encode_repair_states(&states).to_vec();
        bad_flag[4] = 2;
        assert!(decode_repair_states(&bad_flag).is_err());
        let none = Repaired { ranges: Vec::new(), ..repaired };
        assert_eq!(decode_repaired(&encode_repaired(&none)).unwrap(), none);
        let mut long = encode_repaired(&none).to_vec();
        long.push(0);
        assert!(decode_repaired(&long).is_err() && decode_repaired(&long[..27]).is_err());
    }

    #[test]
    fn garbage_never_panics() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        for _ in 0..20_000 {
            let len = rng.gen_range(0..64);
            let bytes: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            let _ = decode_command(Uuid::nil(), 0, Vec::new(), &bytes);
            let _ = decode_scan(&bytes);
            let _ = decode_keys(&bytes);
            let _ = decode_repair(&bytes);
            let _ = decode_stream_request(&bytes);
            let _ = decode_stream_files(&bytes);
            let _ = decode_stream_chunk(&bytes);
            let _ = decode_stream_done(&bytes);
            let _ = decode_hashes_request(&bytes);
            let _ = decode_repair_state_request(&bytes);
            let _ = decode_repair_states(&bytes);
            let _ = decode_hashes(&bytes);
            let _ = decode_slice_hashes(&bytes);
            let _ = decode_stream_pull(&bytes);
            let _ = decode_stream_stats(&bytes);
            let _ = decode_repaired(&bytes);
        }
    }

    #[test]
    fn counter_payloads_round_trip_and_garbage_is_refused() {
        use crate::plan::CoordError;
        let m = types::mutation::Mutation::new(Uuid::from_u128(9), 42, Bytes::from_static(b"k"));
        let bytes = encode_counter_request(types::Consistency::Quorum, std::slice::from_ref(&m));
        assert_eq!(decode_counter_request(&bytes).unwrap(), (types::Consistency::Quorum, vec![m]));
        assert!(decode_counter_request(&Bytes::from_static(b"\x00")).is_err());
        let outcomes = [
            Ok(()),
            Err(CoordError::Unavailable { consistency: types::Consistency::All, required: 3, alive: 2 }),
            Err(CoordError::WriteTimeout {
                consistency: types::Consistency::Quorum,
                received: 1,
                block_for: 2,
                write_type: types::WriteType::Counter,
            }),
            Err(CoordError::Invalid("bad".into())),
            Err(CoordError::Server("down".into())),
        ];
        for o in outcomes {
            let back = decode_counter_outcome(&encode_counter_outcome(&o)).unwrap();
            assert_eq!(format!("{back:?}"), format!("{o:?}"));
        }
        assert!(decode_counter_outcome(&[9]).is_err());
        assert!(decode_counter_outcome(&[1, 0]).is_err());
    }
}
