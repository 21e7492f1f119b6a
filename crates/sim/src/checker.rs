//! The properties a run must keep, checked over the recorded `History` and
//! what the final phase read (through coordinators and from each replica's
//! storage directly). Pure functions: the harness gathers, this judges, so
//! the checker can be fed broken inputs by its own tests.
//!
//! Properties (names as printed on failure):
//! 1. `no-lost-write`: for every row, what is read after healing (at ALL,
//!    and from every replica's local storage) has a timestamp at least the
//!    largest acknowledged write's to that row.
//! 2. `convergence`: after hint replay and the ALL reads, every replica of a
//!    partition has the same raw digest.
//! 3. `read-your-writes`: a successful QUORUM read that started after a
//!    QUORUM write to the same partition was acknowledged returns, for that
//!    row, a timestamp at least the write's.
//!    `monotonic-reads`: a successful QUORUM read that started after
//!    another one ended returns, for every row both cover, a version at
//!    least as new (the blocking read repair invariant).
//! 4. `liveness`: after healing, QUORUM writes and reads and the ALL reads
//!    succeed, hints drain, the failure detectors see everyone up, and the
//!    topology change in progress finishes.
//! 5. `quorum-durability`: each row's latest acknowledged write is held by
//!    a quorum of the replicas its partition has (consistent range movement
//!    keeps the copies a quorum write made, whatever the order of streams
//!    and hints): checked during lifecycle runs (`lifecycle`), and after
//!    hint replay, before any repair, on the final ring of a lifecycle run
//!    with faults (where not every replica need hold it yet).
//!
//! Plus `written-values`: every version read (through a coordinator or
//! locally) is exactly what the write with that timestamp wrote, to that
//! row; and `harness`: a task panicked or the run could not finish.
//!
//! The read checks (3) leave out reads covered by an `Exemption`: reads of
//! the partitions a node killed for good replicated, from its death until
//! the repair after its removal or replacement (the only copy of a write
//! may have died with it until then, in Cassandra as here).
//!
//! Invariant: a check never passes vacuously on missing input: a row that an
//! acknowledged write touched and that a source lacks is a violation, not a
//! skip.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use crate::history::{History, ReadRecord, WriteRecord};
use crate::table::Rows;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Property {
    NoLostWrite,
    Convergence,
    ReadYourWrites,
    MonotonicReads,
    Liveness,
    QuorumDurability,
    WrittenValues,
    Harness,
}

impl Property {
    pub fn name(self) -> &'static str {
        match self {
            Property::NoLostWrite => "no-lost-write (1)",
            Property::Convergence => "convergence (2)",
            Property::ReadYourWrites => "read-your-writes (3)",
            Property::MonotonicReads => "monotonic-reads (3b)",
            Property::Liveness => "liveness (4)",
            Property::QuorumDurability => "quorum-durability (5)",
            Property::WrittenValues => "written-values",
            Property::Harness => "harness",
        }
    }
}

/// A broken property and what broke it.
#[derive(Clone, Debug, PartialEq)]
pub struct Violation {
    pub property: Property,
    pub detail: String,
}

impl Violation {
    pub fn new(property: Property, detail: impl Into<String>) -> Violation {
        Violation { property, detail: detail.into() }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "property {} violated: {}", self.property.name(), self.detail)
    }
}

/// One source's view of one partition after healing: the ALL read through a
/// coordinator, or a replica's local storage.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// For messages: `ALL read via n1`, `n2 local storage`...
    pub source: String,
    pub pk: i32,
    pub rows: Rows,
}

/// Reads the read checks leave out: of partitions `pks`, started at logical
/// time `from` or later and before `until` (still open: None).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exemption {
    pub pks: BTreeSet<i32>,
    pub from: u64,
    pub until: Option<u64>,
    /// For messages.
    pub why: String,
}

impl Exemption {
    pub fn covers(&self, r: &ReadRecord) -> bool {
        self.pks.contains(&r.pk) && r.start >= self.from && self.until.is_none_or(|u| r.start < u)
    }
}

fn exempt(exemptions: &[Exemption], r: &ReadRecord) -> bool {
    exemptions.iter().any(|e| e.covers(r))
}

/// Where and when an operation ran: `via nN [start..end, ops #a..#b]`.
fn span(node: usize, start_at: Duration, end_at: Duration, start: u64, end: u64) -> String {
    format!("via n{node} [{:.3}s..{:.3}s, ops #{start}..#{end}]", start_at.as_secs_f64(), end_at.as_secs_f64())
}

fn describe(w: &WriteRecord) -> String {
    format!(
        "write pk={} c={} ts={} {} {}",
        w.pk,
        w.c,
        w.ts,
        span(w.node, w.start_at, w.end_at, w.start, w.end),
        match &w.result {
            Ok(()) => "acknowledged".to_string(),
            Err(e) => format!("failed: {e}"),
        }
    )
}

/// The acknowledged write with the largest timestamp, per row (pk, c).
pub fn latest_acked(history: &History) -> BTreeMap<(i32, i32), &WriteRecord> {
    let mut out: BTreeMap<(i32, i32), &WriteRecord> = BTreeMap::new();
    for w in history.writes.iter().filter(|w| w.acked()) {
        let slot = out.entry((w.pk, w.c)).or_insert(w);
        if w.ts > slot.ts {
            *slot = w;
        }
    }
    out
}

/// Property 1 over `snapshots`: each holds, for every row of its partition
/// that an acknowledged write touched, a version at least that new.
pub fn check_no_lost_writes(history: &History, snapshots: &[Snapshot]) -> Result<(), Violation> {
    let latest = latest_acked(history);
    for s in snapshots {
        for (_, w) in latest.range((s.pk, i32::MIN)..=(s.pk, i32::MAX)) {
            let found = s.rows.get(&w.c);
            if found.is_none_or(|v| v.ts < w.ts) {
                let held = match found {
                    Some(v) => format!("an older version ts={}", v.ts),
                    None => "no such row".to_string(),
                };
                return Err(Violation::new(
                    Property::NoLostWrite,
                    format!("{} is lost: {} holds {held}", describe(w), s.source),
                ));
            }
        }
    }
    Ok(())
}

/// Property 5 over `snapshots` (one per final replica of each partition):
/// each row's latest acknowledged write is held by at least `quorum` of its
/// partition's snapshots. Partitions under an open exemption are left out.
pub fn check_quorum_durable(
    history: &History,
    snapshots: &[Snapshot],
    quorum: usize,
    exemptions: &[Exemption],
) -> Result<(), Violation> {
    let latest = latest_acked(history);
    let mut by_pk: BTreeMap<i32, Vec<&Snapshot>> = BTreeMap::new();
    for s in snapshots {
        by_pk.entry(s.pk).or_default().push(s);
    }
    for ((pk, _), w) in &latest {
        if exemptions.iter().any(|e| e.until.is_none() && e.pks.contains(pk)) {
            continue;
        }
        let replicas = by_pk.get(pk).map(Vec::as_slice).unwrap_or_default();
        let holding = replicas.iter().filter(|s| s.rows.get(&w.c).is_some_and(|v| v.ts >= w.ts)).count();
        if holding < quorum {
            let lacking: Vec<&str> = replicas
                .iter()
                .filter(|s| s.rows.get(&w.c).is_none_or(|v| v.ts < w.ts))
                .map(|s| s.source.as_str())
                .collect();
            return Err(Violation::new(
                Property::QuorumDurability,
                format!(
                    "{} is on {holding} of {} replicas, fewer than {quorum}: lacking on {}",
                    describe(w),
                    replicas.len(),
                    lacking.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// `written-values` over client reads and snapshots: every version read was
/// written, with that value, to that row.
pub fn check_written_values(history: &History, snapshots: &[Snapshot]) -> Result<(), Violation> {
    let by_ts: BTreeMap<i64, &WriteRecord> = history.writes.iter().map(|w| (w.ts, w)).collect();
    for r in &history.reads {
        if let Ok(rows) = &r.result {
            r.shape.check(rows).map_err(|e| {
                Violation::new(
                    Property::WrittenValues,
                    format!("read pk={}{} via n{} (op #{}) returned {e}", r.pk, r.shape, r.node, r.start),
                )
            })?;
        }
    }
    let reads = history.reads.iter().filter_map(|r| {
        let rows = r.result.as_ref().ok()?;
        Some((
            format!("QUORUM read{} via n{} at {:.3}s (op #{})", r.shape, r.node, r.start_at.as_secs_f64(), r.start),
            r.pk,
            rows,
        ))
    });
    let snaps = snapshots.iter().map(|s| (s.source.clone(), s.pk, &s.rows));
    for (source, pk, rows) in reads.chain(snaps) {
        for (c, v) in rows {
            let ok = by_ts.get(&v.ts).is_some_and(|w| w.pk == pk && w.c == *c && w.value == v.value);
            if !ok {
                let what = by_ts.get(&v.ts).map(|w| describe(w)).unwrap_or_else(|| "no write".to_string());
                return Err(Violation::new(
                    Property::WrittenValues,
                    format!(
                        "{source} returned pk={pk} c={c} ts={} value={:?}, but that timestamp belongs to {what}",
                        v.ts,
                        String::from_utf8_lossy(&v.value)
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Property 3: successful reads see every write to their partition that was
/// acknowledged before they started (reads `exemptions` cover left out).
pub fn check_read_your_writes(history: &History, exemptions: &[Exemption]) -> Result<(), Violation> {
    // Acknowledged writes per partition, by acknowledgement order.
    let mut acked: BTreeMap<i32, Vec<&WriteRecord>> = BTreeMap::new();
    for w in history.writes.iter().filter(|w| w.acked()) {
        acked.entry(w.pk).or_default().push(w);
    }
    for writes in acked.values_mut() {
        writes.sort_by_key(|w| w.end);
    }
    for r in history.reads.iter().filter(|r| !exempt(exemptions, r)) {
        let Ok(rows) = &r.result else { continue };
        let Some(writes) = acked.get(&r.pk) else { continue };
        let before = writes.partition_point(|w| w.end < r.start);
        let mut newest: BTreeMap<i32, &WriteRecord> = BTreeMap::new();
        for w in writes.iter().take(before) {
            let slot = newest.entry(w.c).or_insert(w);
            if w.ts > slot.ts {
                *slot = w;
            }
        }
        for (c, w) in newest {
            if !r.shape.covers(rows, c) {
                continue;
            }
            let seen = rows.get(&c);
            if seen.is_none_or(|v| v.ts < w.ts) {
                let held = seen.map(|v| format!("ts={}", v.ts)).unwrap_or_else(|| "no row".to_string());
                return Err(Violation::new(
                    Property::ReadYourWrites,
                    format!(
                        "QUORUM read pk={}{} {} returned {held} for c={c}, after {}",
                        r.pk,
                        r.shape,
                        span(r.node, r.start_at, r.end_at, r.start, r.end),
                        describe(w)
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Property 3b: a successful QUORUM read that started after another one of
/// the same partition ended returns, for every row both cover, a version at
/// least as new (blocking read repair makes what one quorum read returned
/// durable on a quorum before it answers). A read `exemptions` cover is
/// not checked (it still binds the reads after it).
pub fn check_monotonic_reads(history: &History, exemptions: &[Exemption]) -> Result<(), Violation> {
    let mut by_pk: BTreeMap<i32, Vec<&ReadRecord>> = BTreeMap::new();
    for r in history.reads.iter().filter(|r| r.result.is_ok()) {
        by_pk.entry(r.pk).or_default().push(r);
    }
    for reads in by_pk.values() {
        let mut by_end = reads.clone();
        by_end.sort_by_key(|r| r.end);
        let mut by_start = reads.clone();
        by_start.sort_by_key(|r| r.start);
        // Newest version returned per row by the reads ended so far.
        let mut newest: BTreeMap<i32, (i64, &ReadRecord)> = BTreeMap::new();
        let mut ended = by_end.iter().peekable();
        for r in by_start {
            while let Some(earlier) = ended.next_if(|e| e.end < r.start) {
                for (c, v) in earlier.result.iter().flatten() {
                    let slot = newest.entry(*c).or_insert((v.ts, earlier));
                    if v.ts > slot.0 {
                        *slot = (v.ts, earlier);
                    }
                }
            }
            let Ok(rows) = &r.result else { continue };
            if exempt(exemptions, r) {
                continue;
            }
            for (c, (ts, earlier)) in &newest {
                if !r.shape.covers(rows, *c) {
                    continue;
                }
                let seen = rows.get(c);
                if seen.is_none_or(|v| v.ts < *ts) {
                    let held = seen.map(|v| format!("ts={}", v.ts)).unwrap_or_else(|| "no row".to_string());
                    return Err(Violation::new(
                        Property::MonotonicReads,
                        format!(
                            "QUORUM read pk={}{} via n{} [ops #{}..#{}] returned {held} for c={c}, \
                             but the earlier read{} via n{} [ops #{}..#{}] returned ts={ts}",
                            r.pk,
                            r.shape,
                            r.node,
                            r.start,
                            r.end,
                            earlier.shape,
                            earlier.node,
                            earlier.start,
                            earlier.end
                        ),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Property 2: the replicas of each partition hold identical data.
/// `digests` are (pk, node, raw digest of a full read of the partition).
pub fn check_converged(digests: &[(i32, usize, [u8; 16])]) -> Result<(), Violation> {
    let mut by_pk: BTreeMap<i32, Vec<(usize, [u8; 16])>> = BTreeMap::new();
    for (pk, node, d) in digests {
        by_pk.entry(*pk).or_default().push((*node, *d));
    }
    for (pk, replicas) in by_pk {
        if replicas.windows(2).any(|w| w[0].1 != w[1].1) {
            let list: Vec<String> = replicas.iter().map(|(n, d)| format!("n{n}={}", hex(&d[..4]))).collect();
            return Err(Violation::new(
                Property::Convergence,
                format!("replicas of pk={pk} differ after hint replay and the ALL read: {}", list.join(" ")),
            ));
        }
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::history::ReadRecord;
    use crate::table::{value_of, ReadShape, Version};

    fn write(h: &mut History, pk: i32, c: i32, acked: bool) -> i64 {
        let start = h.tick();
        let ts = h.next_timestamp();
        let end = h.tick();
        h.writes.push(WriteRecord {
            pk,
            c,
            ts,
            value: value_of(ts, pk, c),
            node: 0,
            start,
            end,
            start_at: Duration::ZERO,
            end_at: Duration::ZERO,
            result: if acked { Ok(()) } else { Err("WriteTimeout".into()) },
        });
        ts
    }

    fn version(ts: i64, pk: i32, c: i32) -> Version {
        Version { ts, value: value_of(ts, pk, c) }
    }

    fn read(h: &mut History, pk: i32, shape: ReadShape, rows: Rows) {
        let start = h.tick();
        let end = h.tick();
        h.reads.push(ReadRecord {
            pk,
            shape,
            node: 1,
            start,
            end,
            start_at: Duration::ZERO,
            end_at: Duration::ZERO,
            result: Ok(rows),
        });
    }

    #[test]
    fn a_stale_read_after_an_acknowledged_write_is_caught() {
        let mut h = History::default();
        let t1 = write(&mut h, 1, 0, true);
        read(&mut h, 1, ReadShape::default(), Rows::from([(0, version(t1, 1, 0))]));
        let t2 = write(&mut h, 1, 0, true);
        assert!(check_read_your_writes(&h, &[]).is_ok());
        read(&mut h, 1, ReadShape::default(), Rows::from([(0, version(t1, 1, 0))]));
        let v = check_read_your_writes(&h, &[]).unwrap_err();
        assert_eq!(v.property, Property::ReadYourWrites);
        assert!(v.detail.contains(&format!("ts={t2}")), "{v}");
        // A failed write is not owed to anyone.
        let mut h = History::default();
        write(&mut h, 1, 0, false);
        read(&mut h, 1, ReadShape::default(), Rows::new());
        assert!(check_read_your_writes(&h, &[]).is_ok());
    }

    #[test]
    fn a_limited_read_owes_only_the_rows_it_covers() {
        let mut h = History::default();
        let t0 = write(&mut h, 1, 0, true);
        let t2 = write(&mut h, 1, 2, true);
        let first = ReadShape { limit: Some(1), ..ReadShape::default() };
        read(&mut h, 1, first, Rows::from([(0, version(t0, 1, 0))]));
        assert!(check_read_your_writes(&h, &[]).is_ok(), "row 2 lies past LIMIT 1");
        let last = ReadShape { limit: Some(1), reversed: true, ..ReadShape::default() };
        read(&mut h, 1, last, Rows::from([(0, version(t0, 1, 0))]));
        let v = check_read_your_writes(&h, &[]).unwrap_err();
        assert!(v.detail.contains(&format!("ts={t2}")), "DESC LIMIT 1 must return row 2: {v}");
        let mut h = History::default();
        write(&mut h, 1, 0, true);
        let t2 = write(&mut h, 1, 2, true);
        let slice = ReadShape { range: Some((1, 2)), ..ReadShape::default() };
        read(&mut h, 1, slice, Rows::from([(2, version(t2, 1, 2))]));
        assert!(check_read_your_writes(&h, &[]).is_ok() && check_written_values(&h, &[]).is_ok());
        read(&mut h, 1, slice, Rows::from([(0, version(t2 - 1, 1, 0)), (2, version(t2, 1, 2))]));
        assert_eq!(
            check_written_values(&h, &[]).unwrap_err().property,
            Property::WrittenValues,
            "row 0 is outside 1..=2"
        );
    }

    #[test]
    fn a_missing_or_older_row_is_a_lost_write() {
        let mut h = History::default();
        let t1 = write(&mut h, 2, 0, true);
        let t2 = write(&mut h, 2, 1, true);
        let t3 = write(&mut h, 2, 1, false);
        let snap = |rows: Rows| vec![Snapshot { source: "n0 local storage".into(), pk: 2, rows }];
        let good = Rows::from([(0, version(t1, 2, 0)), (1, version(t3, 2, 1))]);
        assert!(check_no_lost_writes(&h, &snap(good.clone())).is_ok());
        assert!(check_written_values(&h, &snap(good)).is_ok());
        let missing = Rows::from([(1, version(t2, 2, 1))]);
        assert_eq!(check_no_lost_writes(&h, &snap(missing)).unwrap_err().property, Property::NoLostWrite);
        let older = Rows::from([(0, version(t1, 2, 0)), (1, version(t2 - 1, 2, 1))]);
        assert_eq!(check_no_lost_writes(&h, &snap(older)).unwrap_err().property, Property::NoLostWrite);
        let forged = Rows::from([(0, Version { ts: t1, value: b"other".to_vec() })]);
        assert_eq!(check_written_values(&h, &snap(forged)).unwrap_err().property, Property::WrittenValues);
    }

    #[test]
    fn a_read_older_than_an_earlier_read_is_caught() {
        let mut h = History::default();
        let t1 = write(&mut h, 3, 0, false);
        let t2 = write(&mut h, 3, 0, false);
        read(&mut h, 3, ReadShape::default(), Rows::from([(0, version(t2, 3, 0))]));
        read(&mut h, 3, ReadShape::default(), Rows::from([(0, version(t2, 3, 0))]));
        assert!(check_monotonic_reads(&h, &[]).is_ok());
        assert!(check_read_your_writes(&h, &[]).is_ok(), "failed writes are owed to no one");
        read(&mut h, 3, ReadShape { range: Some((1, 2)), ..ReadShape::default() }, Rows::new());
        assert!(check_monotonic_reads(&h, &[]).is_ok(), "row 0 is outside that read");
        read(&mut h, 3, ReadShape::default(), Rows::from([(0, version(t1, 3, 0))]));
        assert_eq!(check_monotonic_reads(&h, &[]).unwrap_err().property, Property::MonotonicReads);
    }

    #[test]
    fn exempt_reads_are_left_out_and_only_those() {
        let mut h = History::default();
        let t1 = write(&mut h, 4, 0, true);
        let from = h.tick();
        read(&mut h, 4, ReadShape::default(), Rows::new());
        read(&mut h, 5, ReadShape::default(), Rows::new());
        let until = h.tick();
        let e = Exemption { pks: BTreeSet::from([4]), from, until: Some(until), why: "n1 died".into() };
        // The read of pk 4 in the window is left out; the write to pk 5 is not owed to anyone.
        assert!(check_read_your_writes(&h, std::slice::from_ref(&e)).is_ok());
        assert_eq!(check_read_your_writes(&h, &[]).unwrap_err().property, Property::ReadYourWrites);
        // After the window, reads owe the write again.
        read(&mut h, 4, ReadShape::default(), Rows::new());
        let v = check_read_your_writes(&h, std::slice::from_ref(&e)).unwrap_err();
        assert!(v.detail.contains(&format!("ts={t1}")), "{v}");
        // Monotonic reads likewise.
        let mut h = History::default();
        let t = write(&mut h, 4, 0, false);
        read(&mut h, 4, ReadShape::default(), Rows::from([(0, version(t, 4, 0))]));
        let from = h.tick();
        read(&mut h, 4, ReadShape::default(), Rows::new());
        let open = Exemption { pks: BTreeSet::from([4]), from, until: None, why: "n1 died".into() };
        assert!(check_monotonic_reads(&h, std::slice::from_ref(&open)).is_ok());
        assert_eq!(check_monotonic_reads(&h, &[]).unwrap_err().property, Property::MonotonicReads);
    }

    #[test]
    fn a_write_on_fewer_than_a_quorum_of_replicas_is_caught() {
        let mut h = History::default();
        let t = write(&mut h, 6, 0, true);
        let snap = |source: &str, rows: Rows| Snapshot { source: source.into(), pk: 6, rows };
        let has = || Rows::from([(0, version(t, 6, 0))]);
        let two = [snap("n0", has()), snap("n1", has()), snap("n2", Rows::new())];
        assert!(check_quorum_durable(&h, &two, 2, &[]).is_ok());
        let one = [snap("n0", has()), snap("n1", Rows::new()), snap("n2", Rows::new())];
        let v = check_quorum_durable(&h, &one, 2, &[]).unwrap_err();
        assert_eq!(v.property, Property::QuorumDurability);
        assert!(v.detail.contains("on 1 of 3 replicas") && v.detail.contains("lacking on n1, n2"), "{v}");
        // Under an open exemption the partition is not judged; a closed one does not excuse it.
        let mut e = Exemption { pks: BTreeSet::from([6]), from: 0, until: None, why: "n3 died".into() };
        assert!(check_quorum_durable(&h, &one, 2, std::slice::from_ref(&e)).is_ok());
        e.until = Some(1);
        assert!(check_quorum_durable(&h, &one, 2, std::slice::from_ref(&e)).is_err());
        // No snapshot at all for a written partition is not a pass.
        assert!(check_quorum_durable(&h, &[], 2, &[]).is_err());
    }

    #[test]
    fn differing_digests_are_caught() {
        assert!(check_converged(&[(1, 0, [1; 16]), (1, 1, [1; 16]), (2, 0, [2; 16])]).is_ok());
        let v = check_converged(&[(1, 0, [1; 16]), (1, 1, [1; 16]), (1, 2, [3; 16])]).unwrap_err();
        assert_eq!(v.property, Property::Convergence);
    }
}
