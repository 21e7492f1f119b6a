//! Repair of one token range of one table across its replicas (issue 21),
//! sending little more than what differs:
//!
//! 1. Validation, in three rounds (a Merkle tree of two levels, then its
//!    leaves). The node running the repair (always one of the range's
//!    replicas) hashes its own partitions of the range
//!    (`Storage::partition_hashes`) and cuts the range into coarse slices of
//!    about `COARSE_PARTITIONS` of them; every other replica answers one
//!    hash per coarse slice (`HashesReq` in slice mode, 8 bytes a slice);
//!    for the coarse slices that differ, one hash per fine slice
//!    (`FINE_SLICES` each, about 8 partitions); for the fine slices that
//!    differ, its partition hashes (one request for all of them, paged).
//!    Only the partitions whose hashes differ are repaired.
//! 2. Push (`RepairPushReq`, lz4-compressed): this node sends its version of
//!    each differing partition to each replica that differs; the replica
//!    merges it (keeping what is newer on either side, as every write does)
//!    and answers only what it holds that this node's version lacked
//!    (usually nothing). What comes back is applied here and pushed on to
//!    the other replicas. So a replica that missed writes receives them
//!    once, and nothing is fetched only to be thrown away.
//!
//! Invariants:
//! - A replica's version is never overwritten: a push is merged cell by cell
//!   (`merge_raw`), so the newest cell or deletion wins on every replica.
//! - After a range's repair without error, every replica holds the merge of
//!   what every replica held when it was validated.
//! - Every byte sent or received for the repair (payloads and frame
//!   headers) is counted in `RangeRepair::wire_bytes`.
//! - Decoders are bounds-checked and never panic on garbage; a compressed
//!   push may not claim more than `PUSH_BYTES_MAX` once decompressed.

#![deny(clippy::indexing_slicing)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use net::{Transport, Verb};
use storage::{PartitionRead, RawPartition, Storage};
use types::bytes::ByteReader;
use uuid::Uuid;

use crate::view::ClusterView;
use crate::wire::{self, HashesRequest, WireError};
use crate::Coordinator;

/// About this many partitions per coarse validation slice: every replica
/// sends one hash per coarse slice.
pub const COARSE_PARTITIONS: usize = 64;
/// The most coarse slices of one range (one response of 8 bytes each).
const COARSE_SLICES_MAX: usize = 1 << 20;
/// Fine slices per differing coarse slice (about 8 partitions each): only
/// the fine slices that differ are compared partition by partition.
pub const FINE_SLICES: u32 = 8;
/// Partition hashes per validation page.
const HASHES_PAGE: u32 = 10_000;
/// A validation may wait for a compaction of the table.
const VALIDATION_TIMEOUT: Duration = Duration::from_secs(3600);
/// Uncompressed bytes of partitions per push.
const PUSH_BATCH_BYTES: usize = 1 << 20;
/// The most a push may decompress to.
pub const PUSH_BYTES_MAX: usize = 64 << 20;
/// What one message costs on the wire beside its payload (frame header and trailer).
const FRAME_BYTES: u64 = (net::frame::HEADER_LEN + net::frame::TRAILER_LEN) as u64;

/// What the repair of a range found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RangeRepair {
    /// Partitions held by any replica.
    pub compared: u64,
    /// Partitions whose replicas differ.
    pub differing: u64,
    /// Bytes of the differing partitions (the largest replica's version):
    /// what repairing them moves at most.
    pub estimated_bytes: u64,
    /// Bytes of cells written to replicas that lacked them.
    pub repaired_bytes: u64,
    /// Bytes this node sent and received for the repair (validation and
    /// pushes, frames included).
    pub wire_bytes: u64,
}

impl RangeRepair {
    pub fn add(&mut self, other: &RangeRepair) {
        self.compared += other.compared;
        self.differing += other.differing;
        self.estimated_bytes += other.estimated_bytes;
        self.repaired_bytes += other.repaired_bytes;
        self.wire_bytes += other.wire_bytes;
    }
}

/// One range to repair.
pub struct RangeTask<'a> {
    pub table: Uuid,
    pub range: (i64, i64),
    /// The range's replicas, this node among them.
    pub replicas: &'a [Uuid],
    /// Seconds since the epoch: every replica reads as of this moment.
    pub now: i32,
    /// Only find what differs.
    pub preview: bool,
    /// Each replica compacts the table before its first validation of this
    /// repair (`validated`), as Cassandra's full repair reads every SSTable:
    /// replicas that purged different tombstones then hash alike. An
    /// incremental repair does not (a purge difference only costs a push).
    pub compact: bool,
}

/// A range a repair covers, `(start, end]`, with its replicas.
pub type ReplicatedRange = ((i64, i64), Vec<Uuid>);

/// The ranges of `ks` a repair run on the view's local node covers, in ring
/// order, with their replicas: every range it replicates that has another
/// replica (only those it is primary for with `primary_only`). Every replica
/// of them must be up: the first one the view has down is the error.
pub fn ranges_to_repair(
    view: &ClusterView,
    ks: &types::schema::KeyspaceDef,
    primary_only: bool,
) -> Result<Vec<ReplicatedRange>, Uuid> {
    let mut out = Vec::new();
    for (range, primary) in view.ring.ranges() {
        let replicas = view.replicas(ks, range.end);
        if !replicas.contains(&view.local) || replicas.len() < 2 {
            continue;
        }
        if primary_only && crate::view::uuid(primary) != view.local {
            continue;
        }
        if let Some(dead) = replicas.iter().find(|r| !view.is_alive(**r)) {
            return Err(*dead);
        }
        out.push(((range.start, range.end), replicas));
    }
    Ok(out)
}

/// Partition hashes by (token, key): (hash, bytes).
type Hashes = BTreeMap<(i64, Vec<u8>), (u64, u64)>;

/// Repairs (or with `preview`, compares) one range. `validated` lists the
/// replicas that already compacted the table for this repair (each does so
/// before its first validation, as Cassandra's validation reads every
/// SSTable); this call adds the ones it asked.
pub async fn repair_range<T: Transport + Clone>(
    coordinator: &Arc<Coordinator<T>>,
    view: &ClusterView,
    task: &RangeTask<'_>,
    validated: &mut Vec<Uuid>,
) -> Result<RangeRepair, String> {
    let mut out = RangeRepair::default();
    let local = view.local;
    let first = !validated.contains(&local);
    let mine = local_hashes(&coordinator.storage, task, first && task.compact).await?;
    if first {
        validated.push(local);
    }
    // Coarse slices of about COARSE_PARTITIONS partitions, each cut into FINE_SLICES fine ones.
    let coarse = storage::bucket_count(task.range, (mine.len() / COARSE_PARTITIONS).clamp(1, COARSE_SLICES_MAX) as u32);
    let my_coarse = storage::fold_buckets(task.range, coarse, mine.iter().map(|((t, _), (h, _))| (*t, *h)));
    // This node's partitions by coarse slice, for the fine slices of those that differ.
    let mut by_coarse: BTreeMap<u32, Vec<(i64, u64)>> = BTreeMap::new();
    for ((token, _), (hash, _)) in &mine {
        by_coarse.entry(storage::bucket_of(task.range, coarse, *token)).or_default().push((*token, *hash));
    }

    // Round 1: every other replica's coarse slice hashes; round 2: the fine slice hashes of the
    // coarse slices that differ; round 3: the partition hashes of the fine slices that differ.
    let mut theirs: Vec<(Uuid, Hashes, Slices)> = Vec::new();
    for &replica in task.replicas.iter().filter(|r| **r != local) {
        let addr = view.endpoint(replica).map(|e| e.internode).ok_or("unknown replica")?;
        let first = !validated.contains(&replica);
        let their_coarse =
            slice_hashes(coordinator, addr, task, vec![task.range], coarse, first && task.compact, &mut out.wire_bytes)
                .await?;
        if first {
            validated.push(replica);
        }
        let their_coarse = their_coarse.into_iter().next().unwrap_or_default();
        if their_coarse.len() != my_coarse.len() {
            return Err(format!("validation on {}: {} slices, not {}", addr.ip(), their_coarse.len(), my_coarse.len()));
        }
        let differ: Vec<u32> =
            (0..coarse).filter(|i| their_coarse.get(*i as usize) != my_coarse.get(*i as usize)).collect();
        let mut slices = Slices { range: task.range, coarse, fine: BTreeMap::new() };
        for chunk in differ.chunks(wire::HASHES_RANGES_MAX) {
            let ranges: Vec<(i64, i64)> = chunk.iter().map(|c| storage::bucket_range(task.range, coarse, *c)).collect();
            let their_fine =
                slice_hashes(coordinator, addr, task, ranges.clone(), FINE_SLICES, false, &mut out.wire_bytes).await?;
            for ((c, range), theirs) in chunk.iter().zip(&ranges).zip(their_fine) {
                let count = storage::bucket_count(*range, FINE_SLICES);
                let my_fine = storage::fold_buckets(*range, count, by_coarse.get(c).into_iter().flatten().copied());
                let differ: BTreeSet<u32> =
                    (0..count).filter(|i| theirs.get(*i as usize) != my_fine.get(*i as usize)).collect();
                if !differ.is_empty() {
                    slices.fine.insert(*c, (count, differ));
                }
            }
        }
        let fine_ranges = slices.ranges();
        let mut hashes = Hashes::new();
        for chunk in fine_ranges.chunks(wire::HASHES_RANGES_MAX) {
            hashes.extend(remote_hashes(coordinator, addr, task, chunk.to_vec(), &mut out.wire_bytes).await?);
        }
        theirs.push((replica, hashes, slices));
    }

    // The partitions to repair, and the replicas (other than this node) that differ on each.
    let mut differing: BTreeMap<(i64, Vec<u8>), Vec<Uuid>> = BTreeMap::new();
    let mut seen: BTreeSet<&(i64, Vec<u8>)> = mine.keys().collect();
    for (replica, hashes, slices) in &theirs {
        seen.extend(hashes.keys());
        let keys: BTreeSet<&(i64, Vec<u8>)> =
            hashes.keys().chain(mine.keys().filter(|(t, _)| slices.contains(*t))).collect();
        for key in keys {
            if hashes.get(key).map(|h| h.0) != mine.get(key).map(|h| h.0) {
                differing.entry(key.clone()).or_default().push(*replica);
            }
        }
    }
    out.compared = seen.len() as u64;
    out.differing = differing.len() as u64;
    out.estimated_bytes = differing
        .keys()
        .map(|k| {
            let theirs_max = theirs.iter().filter_map(|(_, h, _)| h.get(k)).map(|h| h.1).max().unwrap_or(0);
            theirs_max.max(mine.get(k).map_or(0, |h| h.1))
        })
        .sum();
    if task.preview || differing.is_empty() {
        return Ok(out);
    }

    // Push this node's version of each differing partition to the replicas that differ; apply here
    // what they answer this node lacked, then push that on to every other replica.
    let mut by_replica: BTreeMap<Uuid, Vec<(i64, Vec<u8>)>> = BTreeMap::new();
    for (key, replicas) in &differing {
        for r in replicas {
            by_replica.entry(*r).or_default().push(key.clone());
        }
    }
    let mut newer: BTreeSet<(i64, Vec<u8>)> = BTreeSet::new();
    for (replica, keys) in &by_replica {
        let addr = view.endpoint(*replica).map(|e| e.internode).ok_or("unknown replica")?;
        for batch in batches(&coordinator.storage, task, keys).await? {
            let (answer, wire) = push(coordinator, addr, task, &batch).await?;
            out.wire_bytes += wire;
            out.repaired_bytes += answer.applied_bytes;
            let storage = Arc::clone(&coordinator.storage);
            let table = task.table;
            let mut lacked = Vec::new();
            for (token, key, cells) in answer.newer {
                if !cells.is_empty() {
                    out.repaired_bytes += cells.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum::<u64>();
                    lacked.extend(cells);
                    newer.insert((token, key));
                }
            }
            if !lacked.is_empty() {
                tokio::task::spawn_blocking(move || storage.apply_repair(&table, &lacked))
                    .await
                    .map_err(|e| format!("repair task failed: {e}"))?
                    .map_err(|e| e.to_string())?;
            }
        }
    }
    if !newer.is_empty() {
        // This node now holds the merge of every replica; the others get what they still lack.
        let keys: Vec<(i64, Vec<u8>)> = newer.into_iter().collect();
        for &replica in task.replicas.iter().filter(|r| **r != local) {
            let addr = view.endpoint(replica).map(|e| e.internode).ok_or("unknown replica")?;
            for batch in batches(&coordinator.storage, task, &keys).await? {
                let (answer, wire) = push(coordinator, addr, task, &batch).await?;
                out.wire_bytes += wire;
                out.repaired_bytes += answer.applied_bytes;
            }
        }
    }
    Ok(out)
}

/// This node's partition hashes of the range (compacting the table first when asked).
async fn local_hashes(storage: &Arc<Storage>, task: &RangeTask<'_>, compact_first: bool) -> Result<Hashes, String> {
    let storage = Arc::clone(storage);
    let (table, range, now) = (task.table, task.range, task.now);
    crate::bulk::run(move || {
        if compact_first {
            storage.compact(Some(&table)).map_err(|e| e.to_string())?;
        }
        let mut out = Hashes::new();
        storage
            .each_partition_hash(&table, range, now, |p| {
                out.insert((p.token, p.key), (p.hash, p.bytes));
            })
            .map_err(|e| e.to_string())?;
        Ok(out)
    })
    .await
    .map_err(|e| format!("validation task failed: {e}"))?
}

/// The fine slices in which a replica differs from this node: by coarse
/// slice of the range, the number of fine slices it was cut into and those
/// that differ.
struct Slices {
    range: (i64, i64),
    coarse: u32,
    fine: BTreeMap<u32, (u32, BTreeSet<u32>)>,
}

impl Slices {
    fn contains(&self, token: i64) -> bool {
        let c = storage::bucket_of(self.range, self.coarse, token);
        self.fine.get(&c).is_some_and(|(count, differ)| {
            let sub = storage::bucket_range(self.range, self.coarse, c);
            differ.contains(&storage::bucket_of(sub, *count, token))
        })
    }

    /// The differing fine slices as ranges, in token order, adjacent ones joined.
    fn ranges(&self) -> Vec<(i64, i64)> {
        let mut out: Vec<(i64, i64)> = Vec::new();
        for (c, (count, differ)) in &self.fine {
            let sub = storage::bucket_range(self.range, self.coarse, *c);
            for f in differ {
                let (start, end) = storage::bucket_range(sub, *count, *f);
                match out.last_mut() {
                    Some(last) if last.1 == start => last.1 = end,
                    _ => out.push((start, end)),
                }
            }
        }
        out
    }
}

/// A replica's slice hashes: `slices` of each of `ranges`.
async fn slice_hashes<T: Transport + Clone>(
    coordinator: &Coordinator<T>,
    addr: std::net::SocketAddr,
    task: &RangeTask<'_>,
    ranges: Vec<(i64, i64)>,
    slices: u32,
    compact_first: bool,
    wire_bytes: &mut u64,
) -> Result<Vec<Vec<u64>>, String> {
    let count = ranges.len();
    let req = HashesRequest {
        table: task.table,
        ranges,
        now: task.now,
        resume: None,
        limit: slices,
        compact_first,
        slices: true,
    };
    let answer = exchange(coordinator, addr, Verb::HashesReq, wire::encode_hashes_request(&req), wire_bytes)
        .await
        .map_err(|e| format!("validation on {}: {e}", addr.ip()))?;
    let hashes = wire::decode_slice_hashes(&answer).map_err(|e| format!("validation on {}: {e}", addr.ip()))?;
    if hashes.len() != count {
        return Err(format!("validation on {}: slices of {} ranges, not {count}", addr.ip(), hashes.len()));
    }
    Ok(hashes)
}

/// A replica's partition hashes of `ranges` (parts of the task's range), page by page.
async fn remote_hashes<T: Transport + Clone>(
    coordinator: &Coordinator<T>,
    addr: std::net::SocketAddr,
    task: &RangeTask<'_>,
    ranges: Vec<(i64, i64)>,
    wire_bytes: &mut u64,
) -> Result<Hashes, String> {
    let mut out = Hashes::new();
    if ranges.is_empty() {
        return Ok(out);
    }
    let mut req = HashesRequest {
        table: task.table,
        ranges,
        now: task.now,
        resume: None,
        limit: HASHES_PAGE,
        compact_first: false,
        slices: false,
    };
    loop {
        let answer = exchange(coordinator, addr, Verb::HashesReq, wire::encode_hashes_request(&req), wire_bytes)
            .await
            .map_err(|e| format!("validation on {}: {e}", addr.ip()))?;
        let page = wire::decode_hashes(&answer).map_err(|e| format!("validation on {}: {e}", addr.ip()))?;
        out.extend(page.hashes.into_iter().map(|p| ((p.token, p.key), (p.hash, p.bytes))));
        match page.next {
            Some(next) => req.resume = Some(next),
            None => return Ok(out),
        }
    }
}

/// This node's version of `keys`, read as of the task's `now`, in batches of
/// about `PUSH_BATCH_BYTES`.
async fn batches(
    storage: &Arc<Storage>,
    task: &RangeTask<'_>,
    keys: &[(i64, Vec<u8>)],
) -> Result<Vec<Vec<RawPartition>>, String> {
    let storage = Arc::clone(storage);
    let (table, now, keys) = (task.table, task.now, keys.to_vec());
    tokio::task::spawn_blocking(move || {
        let mut out = vec![Vec::new()];
        let mut size = 0usize;
        for (token, key) in keys {
            let read = PartitionRead { token, partition_key: key, ..PartitionRead::whole(table, now) };
            let raw = storage.read_raw(&read).map_err(|e| e.to_string())?;
            let bytes: usize = raw.cells.iter().map(|(k, v)| k.len() + v.len() + 8).sum();
            if size + bytes > PUSH_BATCH_BYTES && out.last().is_some_and(|b: &Vec<RawPartition>| !b.is_empty()) {
                out.push(Vec::new());
                size = 0;
            }
            size += bytes;
            if let Some(batch) = out.last_mut() {
                batch.push(raw);
            }
        }
        Ok(out.into_iter().filter(|b| !b.is_empty()).collect())
    })
    .await
    .map_err(|e| format!("repair task failed: {e}"))?
}

async fn push<T: Transport + Clone>(
    coordinator: &Coordinator<T>,
    addr: std::net::SocketAddr,
    task: &RangeTask<'_>,
    batch: &[RawPartition],
) -> Result<(PushAnswer, u64), String> {
    let mut wire_bytes = 0;
    let answer =
        exchange(coordinator, addr, Verb::RepairPushReq, encode_push(task.table, task.now, batch), &mut wire_bytes)
            .await
            .map_err(|e| format!("repair push to {}: {e}", addr.ip()))?;
    let answer = decode_push_answer(&answer).map_err(|e| format!("repair push to {}: {e}", addr.ip()))?;
    Ok((answer, wire_bytes))
}

/// One request of the repair and its answer, both counted in `wire_bytes`
/// (payload and frame).
async fn exchange<T: Transport + Clone>(
    coordinator: &Coordinator<T>,
    addr: std::net::SocketAddr,
    verb: Verb,
    payload: Bytes,
    wire_bytes: &mut u64,
) -> Result<Bytes, net::NetError> {
    *wire_bytes += payload.len() as u64 + FRAME_BYTES;
    let (_, answer) = coordinator.transport.send_request(addr, verb, payload, VALIDATION_TIMEOUT).await?;
    *wire_bytes += answer.len() as u64 + FRAME_BYTES;
    Ok(answer)
}

/// A replica's answer to a push: the bytes it applied, and per partition the
/// cells it holds that the pushed version lacked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PushAnswer {
    pub applied_bytes: u64,
    pub newer: Vec<(i64, Vec<u8>, Cells)>,
}

/// Raw cells: (full storage key, cell).
pub type Cells = Vec<(Vec<u8>, Vec<u8>)>;

/// The replica's side of `RepairPushReq`: merges each pushed partition into
/// its own (writing what it lacked) and answers what the pusher lacked.
/// Blocking.
pub fn apply_push(storage: &Storage, payload: &[u8]) -> Result<Bytes, String> {
    let (table, now, partitions) = decode_push(payload).map_err(|e| e.to_string())?;
    let mut answer = PushAnswer::default();
    let mut mine = Vec::new();
    for pushed in partitions {
        let read = PartitionRead {
            token: pushed.token,
            partition_key: pushed.partition_key.clone(),
            ..PartitionRead::whole(table, now)
        };
        let parts = [storage.read_raw(&read).map_err(|e| e.to_string())?, pushed];
        let merged = storage::merge_raw(&parts, false);
        let [held, pushed] = parts;
        let lacked = storage::repair_diff(&merged, &held);
        answer.applied_bytes += lacked.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum::<u64>();
        mine.extend(lacked);
        let theirs = storage::repair_diff(&merged, &pushed);
        if !theirs.is_empty() {
            answer.newer.push((pushed.token, pushed.partition_key, theirs));
        }
    }
    if !mine.is_empty() {
        storage.apply_repair(&table, &mine).map_err(|e| e.to_string())?;
    }
    Ok(encode_push_answer(&answer))
}

/// `RepairPushReq := table:uuid now:i32 raw_len:u32 lz4(count:u32 partition[count])`
/// (each partition in `RawPartition::encode_compact`'s form: no table, no
/// partition prefix per key).
pub fn encode_push(table: Uuid, now: i32, partitions: &[RawPartition]) -> Bytes {
    let mut body = Vec::new();
    body.extend_from_slice(&(partitions.len() as u32).to_be_bytes());
    for p in partitions {
        p.encode_compact(&mut body);
    }
    let compressed = lz4_flex::block::compress(&body);
    let mut out = BytesMut::with_capacity(24 + compressed.len());
    out.put_slice(table.as_bytes());
    out.put_i32(now);
    out.put_u32(body.len() as u32);
    out.put_slice(&compressed);
    out.freeze()
}

pub fn decode_push(bytes: &[u8]) -> Result<(Uuid, i32, Vec<RawPartition>), WireError> {
    let err = WireError { what: "repair push" };
    let mut r = ByteReader::new(bytes, err.clone());
    let table = r.uuid()?;
    let now = r.i32()?;
    let raw_len = r.u32()? as usize;
    if raw_len > PUSH_BYTES_MAX {
        return Err(err);
    }
    let rest = r.take(r.remaining())?;
    let body = lz4_flex::block::decompress(rest, raw_len).map_err(|_| err.clone())?;
    let (count, mut pos) = match body.first_chunk::<4>() {
        Some(n) => (u32::from_be_bytes(*n) as usize, 4),
        None => return Err(err),
    };
    // A partition takes at least 10 bytes.
    if count > body.len() / 10 {
        return Err(err);
    }
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        out.push(RawPartition::decode_compact(table, &body, &mut pos).map_err(|_| err.clone())?);
    }
    if pos != body.len() {
        return Err(err);
    }
    Ok((table, now, out))
}

/// `RepairPushRsp := applied:u64 count:u32 (token:i64 key:blob cells:u32 (key:blob value:blob)[cells])[count]`
pub fn encode_push_answer(answer: &PushAnswer) -> Bytes {
    let mut out = BytesMut::new();
    out.put_u64(answer.applied_bytes);
    out.put_u32(answer.newer.len() as u32);
    for (token, key, cells) in &answer.newer {
        out.put_i64(*token);
        out.put_u32(key.len() as u32);
        out.put_slice(key);
        out.put_u32(cells.len() as u32);
        for (k, v) in cells {
            out.put_u32(k.len() as u32);
            out.put_slice(k);
            out.put_u32(v.len() as u32);
            out.put_slice(v);
        }
    }
    out.freeze()
}

pub fn decode_push_answer(bytes: &[u8]) -> Result<PushAnswer, WireError> {
    let err = WireError { what: "repair push answer" };
    let mut r = ByteReader::new(bytes, err.clone());
    let applied_bytes = r.u64()?;
    let n = r.u32()? as usize;
    if n > r.remaining() / 16 {
        return Err(err);
    }
    let mut newer = Vec::with_capacity(n);
    for _ in 0..n {
        let token = r.i64()?;
        let key = r.blob()?.to_vec();
        let cells = r.u32()? as usize;
        if cells > r.remaining() / 8 {
            return Err(err);
        }
        let mut list = Vec::with_capacity(cells);
        for _ in 0..cells {
            list.push((r.blob()?.to_vec(), r.blob()?.to_vec()));
        }
        newer.push((token, key, list));
    }
    if !r.is_empty() {
        return Err(err);
    }
    Ok(PushAnswer { applied_bytes, newer })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn push_answers_round_trip_and_garbage_never_panics() {
        let answer = PushAnswer {
            applied_bytes: 42,
            newer: vec![(7, b"k".to_vec(), vec![(b"a".to_vec(), b"b".to_vec())]), (-3, Vec::new(), Vec::new())],
        };
        assert_eq!(decode_push_answer(&encode_push_answer(&answer)).unwrap(), answer);
        let empty = encode_push(Uuid::nil(), 5, &[]);
        let (table, now, parts) = decode_push(&empty).unwrap();
        assert_eq!((table, now, parts.len()), (Uuid::nil(), 5, 0));
        let mut rng = rand::rngs::StdRng::seed_from_u64(21);
        for _ in 0..20_000 {
            let len = rng.gen_range(0..80);
            let bytes: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            let _ = decode_push(&bytes);
            let _ = decode_push_answer(&bytes);
        }
        // A push that claims more than PUSH_BYTES_MAX is refused before decompressing.
        let mut huge = empty.to_vec();
        if let Some(len) = huge.get_mut(20..24) {
            len.copy_from_slice(&(PUSH_BYTES_MAX as u32 + 1).to_be_bytes());
        }
        assert!(decode_push(&huge).is_err());
    }
}
