//! Sans-IO replica plans: which replicas a request goes to, how many answers
//! a consistency level blocks for, and when enough answered. Cassandra's
//! `ConsistencyLevel.blockFor`, `assureSufficientLiveReplicas` and the
//! response handlers' counting, as pure functions and small state machines
//! (the coordinator drives them over the network; the simulator drives them
//! over a seeded in-memory one).
//!
//! Invariants:
//! - Availability is checked before anything is sent: too few live replicas
//!   is `Unavailable { required, alive }`, with Cassandra's numbers (for
//!   LOCAL_* the local data center's, for EACH_QUORUM the first failing DC's).
//! - Only answers that the level counts are counted: for LOCAL_ONE and
//!   LOCAL_QUORUM an acknowledgement from another data center does not count;
//!   for EACH_QUORUM every data center must reach its own quorum.
//! - A tracker is satisfied at most once, and `received` never exceeds what
//!   was counted (it is what WriteTimeout / ReadTimeout report).

use std::collections::BTreeMap;

use types::schema::{KeyspaceDef, Replication};
use types::{Consistency, WriteType};
use uuid::Uuid;

use crate::view::ClusterView;

/// Why a request could not be coordinated; mapped to the CQL error of the
/// same name by the server.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CoordError {
    #[error("Cannot achieve consistency level {}", consistency.name())]
    Unavailable { consistency: Consistency, required: i32, alive: i32 },
    #[error("Operation timed out - received only {received} responses.")]
    WriteTimeout { consistency: Consistency, received: i32, block_for: i32, write_type: WriteType },
    #[error("Operation timed out - received only {received} responses.")]
    ReadTimeout { consistency: Consistency, received: i32, block_for: i32, data_present: bool },
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Server(String),
    /// Replicas answered with a failure (Cassandra's ReadFailureException),
    /// e.g. a secondary index still building on them. `reasons`: each
    /// failed replica and Cassandra's `RequestFailureReason` code for it.
    #[error("{message}")]
    ReadFailure {
        consistency: Consistency,
        received: i32,
        block_for: i32,
        failures: i32,
        message: String,
        reasons: Vec<(std::net::IpAddr, u16)>,
    },
}

/// How many answers a level needs, and which ones count.
#[derive(Clone, Debug, PartialEq)]
pub struct Requirement {
    pub consistency: Consistency,
    /// Total answers needed (for EACH_QUORUM the sum of the per-DC quorums).
    pub block_for: usize,
    /// LOCAL_*: only answers from this data center count.
    pub only_dc: Option<String>,
    /// EACH_QUORUM with NetworkTopologyStrategy: answers needed per DC.
    pub per_dc: BTreeMap<String, usize>,
}

fn quorum(rf: u32) -> usize {
    (rf / 2 + 1) as usize
}

fn total_rf(replication: &Replication) -> u32 {
    match replication {
        Replication::Simple { replication_factor } => *replication_factor,
        Replication::NetworkTopology { data_centers } => data_centers.values().sum(),
        Replication::Local => 1,
    }
}

fn rf_in_dc(replication: &Replication, dc: &str) -> u32 {
    match replication {
        Replication::Simple { replication_factor } => *replication_factor,
        Replication::NetworkTopology { data_centers } => data_centers.get(dc).copied().unwrap_or(0),
        Replication::Local => 1,
    }
}

impl Requirement {
    /// Cassandra's `blockFor` for a keyspace at a level, from the coordinator's
    /// data center. Refuses levels that make no sense for the request kind.
    pub fn of(
        replication: &Replication,
        cl: Consistency,
        local_dc: &str,
        write: bool,
    ) -> Result<Requirement, CoordError> {
        if !write && cl == Consistency::Any {
            return Err(CoordError::Invalid("ANY ConsistencyLevel is only supported for writes".into()));
        }
        if matches!(cl, Consistency::Serial | Consistency::LocalSerial) {
            return Err(CoordError::Invalid(format!(
                "You must use conditional updates for serializable writes; {} is not a valid consistency level here",
                cl.name()
            )));
        }
        let total = total_rf(replication);
        let mut req = Requirement { consistency: cl, block_for: 0, only_dc: None, per_dc: BTreeMap::new() };
        req.block_for = match cl {
            Consistency::Any | Consistency::One => 1,
            Consistency::Two => 2,
            Consistency::Three => 3,
            Consistency::Quorum | Consistency::Serial => quorum(total),
            Consistency::All => total as usize,
            Consistency::LocalOne => {
                req.only_dc = Some(local_dc.to_string());
                1
            }
            Consistency::LocalQuorum | Consistency::LocalSerial => {
                req.only_dc = Some(local_dc.to_string());
                quorum(rf_in_dc(replication, local_dc))
            }
            Consistency::EachQuorum => match replication {
                Replication::NetworkTopology { data_centers } => {
                    for (dc, rf) in data_centers {
                        if *rf > 0 {
                            req.per_dc.insert(dc.clone(), quorum(*rf));
                        }
                    }
                    req.per_dc.values().sum()
                }
                _ => quorum(total),
            },
        };
        // EACH_QUORUM's blockFor is the sum of its data centers' quorums; any other level counts one total.
        assert!(req.per_dc.is_empty() || req.block_for == req.per_dc.values().sum::<usize>());
        Ok(req)
    }

    /// What a Paxos round (a lightweight transaction's prepare or propose)
    /// needs at SERIAL or LOCAL_SERIAL: a quorum of the replicas (of this
    /// data center for LOCAL_SERIAL), as Cassandra's `forPaxos`; pending
    /// replicas are added by the caller ([`Requirement::add_pending`]).
    pub fn serial(replication: &Replication, cl: Consistency, local_dc: &str) -> Result<Requirement, CoordError> {
        let (block_for, only_dc) = match cl {
            Consistency::Serial => (quorum(total_rf(replication)), None),
            Consistency::LocalSerial => (quorum(rf_in_dc(replication, local_dc)), Some(local_dc.to_string())),
            other => {
                return Err(CoordError::Invalid(format!(
                    "Invalid consistency for conditional update. Must be one of SERIAL or LOCAL_SERIAL (got {})",
                    other.name()
                )))
            }
        };
        Ok(Requirement { consistency: cl, block_for, only_dc, per_dc: BTreeMap::new() })
    }

    /// A pending replica in `dc` (a joining node's future range) raises
    /// what a write blocks for by one when its answer counts, as Cassandra
    /// adds pending endpoints to blockFor, so the new owner cannot miss an
    /// acknowledged write. ANY is left alone.
    pub fn add_pending(&mut self, dc: &str) {
        if self.consistency == Consistency::Any || !self.counts(dc) {
            return;
        }
        if let Some(need) = self.per_dc.get_mut(dc) {
            *need += 1;
        }
        self.block_for += 1;
    }

    /// Whether an answer from a replica in `dc` counts toward this level.
    pub fn counts(&self, dc: &str) -> bool {
        match &self.only_dc {
            Some(only) => only == dc,
            None => self.per_dc.is_empty() || self.per_dc.contains_key(dc),
        }
    }

    /// Checks that enough of `live` (replica, dc) can answer.
    pub fn assure_available<'a>(&self, live: impl Iterator<Item = &'a str> + Clone) -> Result<(), CoordError> {
        if self.consistency == Consistency::Any {
            return Ok(());
        }
        if !self.per_dc.is_empty() {
            for (dc, need) in &self.per_dc {
                let alive = live.clone().filter(|d| d == dc).count();
                if alive < *need {
                    return Err(self.unavailable(*need, alive));
                }
            }
            return Ok(());
        }
        let alive = live.filter(|dc| self.counts(dc)).count();
        if alive < self.block_for {
            return Err(self.unavailable(self.block_for, alive));
        }
        Ok(())
    }

    fn unavailable(&self, required: usize, alive: usize) -> CoordError {
        CoordError::Unavailable { consistency: self.consistency, required: required as i32, alive: alive as i32 }
    }
}

/// Counts acknowledgements until a requirement is met.
#[derive(Clone, Debug)]
pub struct AckCounter {
    pub requirement: Requirement,
    received: usize,
    per_dc: BTreeMap<String, usize>,
    done: bool,
}

impl AckCounter {
    pub fn new(requirement: Requirement) -> AckCounter {
        AckCounter { requirement, received: 0, per_dc: BTreeMap::new(), done: false }
    }

    /// Records an answer from a replica in `dc`; true exactly once, when the
    /// requirement becomes met.
    pub fn ack(&mut self, dc: &str) -> bool {
        if !self.requirement.counts(dc) {
            return false;
        }
        self.received += 1;
        if !self.requirement.per_dc.is_empty() {
            // Only EACH_QUORUM counts per data center.
            *self.per_dc.entry(dc.to_string()).or_default() += 1;
        }
        if self.done {
            return false;
        }
        let met = if self.requirement.per_dc.is_empty() {
            self.received >= self.requirement.block_for
        } else {
            self.requirement.per_dc.iter().all(|(dc, need)| self.per_dc.get(dc).copied().unwrap_or(0) >= *need)
        };
        if met {
            self.done = true;
        }
        met
    }

    pub fn satisfied(&self) -> bool {
        self.done
    }

    /// Counted answers, as WriteTimeout/ReadTimeout report them (capped at blockFor).
    pub fn received(&self) -> i32 {
        self.received.min(self.requirement.block_for) as i32
    }

    pub fn block_for(&self) -> i32 {
        self.requirement.block_for as i32
    }
}

/// Where a write goes: the replicas and the pending replicas (joining
/// nodes' future ranges), blocking for the level's count plus the pending.
#[derive(Clone, Debug)]
pub struct WritePlan {
    pub requirement: Requirement,
    /// Live replicas, each with its data center: the write is sent to all.
    pub live: Vec<(Uuid, String)>,
    /// Replicas believed down: they get hints.
    pub down: Vec<Uuid>,
}

impl WritePlan {
    pub fn new(view: &ClusterView, ks: &KeyspaceDef, token: i64, cl: Consistency) -> Result<WritePlan, CoordError> {
        let mut requirement = Requirement::of(&ks.replication, cl, view.local_dc(), true)?;
        let mut live = Vec::new();
        let mut down = Vec::new();
        let pending = view.pending_replicas(ks, token);
        for r in view.replicas(ks, token).into_iter().chain(pending.iter().copied()) {
            if view.is_alive(r) {
                live.push((r, view.dc_of(r).unwrap_or_default().to_string()));
            } else {
                down.push(r);
            }
        }
        for p in &pending {
            requirement.add_pending(view.dc_of(*p).unwrap_or_default());
        }
        requirement.assure_available(live.iter().map(|(_, dc)| dc.as_str()))?;
        Ok(WritePlan { requirement, live, down })
    }
}

/// Where a read goes: `contacts[0]` gets the data request, the rest digest
/// requests; `others` are live replicas not contacted (used when a digest
/// mismatch needs more data, and by read repair).
#[derive(Clone, Debug)]
pub struct ReadPlan {
    pub requirement: Requirement,
    pub contacts: Vec<(Uuid, String)>,
    pub others: Vec<(Uuid, String)>,
}

impl ReadPlan {
    /// Orders live replicas by proximity (this node, then its data center,
    /// then the rest, each in ring order) and takes the first `blockFor`
    /// that count (per DC for EACH_QUORUM).
    pub fn new(view: &ClusterView, ks: &KeyspaceDef, token: i64, cl: Consistency) -> Result<ReadPlan, CoordError> {
        let local_dc = view.local_dc();
        let requirement = Requirement::of(&ks.replication, cl, local_dc, false)?;
        let mut live: Vec<(Uuid, String)> = view
            .replicas(ks, token)
            .into_iter()
            .filter(|r| view.is_alive(*r))
            .map(|r| (r, view.dc_of(r).unwrap_or_default().to_string()))
            .collect();
        requirement.assure_available(live.iter().map(|(_, dc)| dc.as_str()))?;
        // Stable sort keeps ring order within each proximity class.
        live.sort_by_key(|(r, dc)| {
            if *r == view.local {
                0
            } else if *dc == local_dc {
                1
            } else {
                2
            }
        });
        let mut contacts = Vec::new();
        let mut others = Vec::new();
        let mut taken: BTreeMap<String, usize> = BTreeMap::new();
        for (r, dc) in live {
            let wanted = if !requirement.counts(&dc) {
                false
            } else if let Some(need) = requirement.per_dc.get(&dc) {
                taken.get(&dc).copied().unwrap_or(0) < *need
            } else {
                contacts.len() < requirement.block_for
            };
            if wanted {
                if requirement.per_dc.contains_key(&dc) {
                    // Counted per data center only for EACH_QUORUM.
                    *taken.entry(dc.clone()).or_default() += 1;
                }
                contacts.push((r, dc));
            } else {
                others.push((r, dc));
            }
        }
        Ok(ReadPlan { requirement, contacts, others })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nts(dcs: &[(&str, u32)]) -> Replication {
        Replication::NetworkTopology { data_centers: dcs.iter().map(|(d, r)| (d.to_string(), *r)).collect() }
    }

    #[test]
    fn block_for_matches_cassandra() {
        let simple = Replication::Simple { replication_factor: 3 };
        let cases = [
            (Consistency::One, 1),
            (Consistency::Two, 2),
            (Consistency::Three, 3),
            (Consistency::Quorum, 2),
            (Consistency::All, 3),
            (Consistency::LocalQuorum, 2),
            (Consistency::LocalOne, 1),
            (Consistency::EachQuorum, 2),
            (Consistency::Any, 1),
        ];
        for (cl, n) in cases {
            assert_eq!(Requirement::of(&simple, cl, "dc1", true).unwrap().block_for, n, "{cl:?}");
        }
        let two = nts(&[("dc1", 3), ("dc2", 3)]);
        assert_eq!(Requirement::of(&two, Consistency::Quorum, "dc1", true).unwrap().block_for, 4);
        assert_eq!(Requirement::of(&two, Consistency::All, "dc1", true).unwrap().block_for, 6);
        assert_eq!(Requirement::of(&two, Consistency::LocalQuorum, "dc2", true).unwrap().block_for, 2);
        let each = Requirement::of(&two, Consistency::EachQuorum, "dc1", true).unwrap();
        assert_eq!(each.block_for, 4);
        assert_eq!(each.per_dc.len(), 2);
        assert!(Requirement::of(&two, Consistency::Any, "dc1", false).is_err());
        assert!(Requirement::of(&two, Consistency::Serial, "dc1", true).is_err());
    }

    #[test]
    fn pending_replicas_raise_block_for_where_they_count() {
        let two = nts(&[("dc1", 3), ("dc2", 3)]);
        let mut q = Requirement::of(&Replication::Simple { replication_factor: 3 }, Consistency::Quorum, "dc1", true)
            .expect("quorum");
        q.add_pending("dc1");
        assert_eq!(q.block_for, 3, "QUORUM at RF=3 with a joining replica: 2 + 1");
        let mut lq = Requirement::of(&two, Consistency::LocalQuorum, "dc1", true).expect("local quorum");
        lq.add_pending("dc2");
        assert_eq!(lq.block_for, 2, "a pending replica in another DC does not count for LOCAL_QUORUM");
        lq.add_pending("dc1");
        assert_eq!(lq.block_for, 3);
        let mut each = Requirement::of(&two, Consistency::EachQuorum, "dc1", true).expect("each quorum");
        each.add_pending("dc2");
        assert_eq!((each.block_for, each.per_dc.get("dc2").copied()), (5, Some(3)));
        let mut any = Requirement::of(&Replication::Simple { replication_factor: 3 }, Consistency::Any, "dc1", true)
            .expect("any");
        any.add_pending("dc1");
        assert_eq!(any.block_for, 1, "ANY is satisfied by a hint");
    }

    #[test]
    fn availability_per_level() {
        let two = nts(&[("dc1", 3), ("dc2", 3)]);
        let dc1_only = ["dc1", "dc1", "dc1"];
        let lq = Requirement::of(&two, Consistency::LocalQuorum, "dc1", true).unwrap();
        assert!(lq.assure_available(dc1_only.iter().copied()).is_ok());
        let each = Requirement::of(&two, Consistency::EachQuorum, "dc1", true).unwrap();
        assert_eq!(
            each.assure_available(dc1_only.iter().copied()),
            Err(CoordError::Unavailable { consistency: Consistency::EachQuorum, required: 2, alive: 0 })
        );
        let all =
            Requirement::of(&Replication::Simple { replication_factor: 3 }, Consistency::All, "dc1", true).unwrap();
        assert_eq!(
            all.assure_available(["dc1", "dc1"].iter().copied()),
            Err(CoordError::Unavailable { consistency: Consistency::All, required: 3, alive: 2 })
        );
        let any =
            Requirement::of(&Replication::Simple { replication_factor: 3 }, Consistency::Any, "dc1", true).unwrap();
        assert!(any.assure_available(std::iter::empty()).is_ok());
    }

    #[test]
    fn counting_respects_data_centers() {
        let two = nts(&[("dc1", 3), ("dc2", 3)]);
        let mut lq = AckCounter::new(Requirement::of(&two, Consistency::LocalQuorum, "dc1", true).unwrap());
        assert!(!lq.ack("dc2"));
        assert!(!lq.ack("dc2"));
        assert!(!lq.ack("dc1"));
        assert_eq!(lq.received(), 1);
        assert!(lq.ack("dc1"));
        assert!(!lq.ack("dc1"), "satisfied once");
        let mut each = AckCounter::new(Requirement::of(&two, Consistency::EachQuorum, "dc1", true).unwrap());
        assert!(!each.ack("dc1"));
        assert!(!each.ack("dc1"));
        assert!(!each.ack("dc1"));
        assert!(!each.ack("dc2"));
        assert!(each.ack("dc2"));
    }
}
