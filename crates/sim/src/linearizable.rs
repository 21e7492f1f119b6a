//! A linearizability checker for compare-and-set registers (Wing & Gong's
//! search with Lowe's memoization, as Knossos and Porcupine do it).
//!
//! A history holds, per register, operations with the logical instants they
//! were invoked and returned: reads (the value seen), CAS that applied, CAS
//! that did not (with the value the condition saw), and CAS whose outcome
//! the client never learned (a timeout: it may take effect at any instant
//! after its invocation, or never). The history is linearizable when some
//! total order of the operations, each placed between its invocation and
//! its return, explains every answer from an empty register; registers are
//! independent (linearizability is compositional), so each is searched on
//! its own.
//!
//! Invariants:
//! - Pure: the verdict depends on the history only; the tests feed it
//!   histories known good and known bad.
//! - Every operation that returned is placed; an unknown one may be left
//!   out. The search is exhaustive (with memoization of the set of placed
//!   operations and the register's value), so a `Err` is a real violation.

use std::collections::{BTreeMap, HashSet};

/// A register's value: `None` until the first write.
pub type Value = Option<i64>;

/// What an operation did, as the client saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A read returned this value.
    Read(Value),
    /// `IF v = expected SET v = new` applied.
    CasApplied { expected: Value, new: i64 },
    /// It did not apply: the condition saw `current`.
    CasRefused { expected: Value, current: Value },
    /// The client got an error (a timeout): it may have applied, or not.
    CasUnknown { expected: Value, new: i64 },
}

/// One operation on one register.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Op {
    pub key: i32,
    pub kind: Kind,
    /// Logical instant of the invocation.
    pub call: u64,
    /// Logical instant of the return; `u64::MAX` for an unknown outcome.
    pub ret: u64,
}

/// Why a register's history is not linearizable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotLinearizable {
    pub key: i32,
    /// The operations of that register, in invocation order.
    pub ops: Vec<Op>,
}

impl std::fmt::Display for NotLinearizable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "register {}: no linearization of its {} operations", self.key, self.ops.len())?;
        for op in self.ops.iter().rev().take(30).rev() {
            let ret = if op.ret == u64::MAX { "?".to_string() } else { op.ret.to_string() };
            writeln!(f, "  [{}, {ret}] {:?}", op.call, op.kind)?;
        }
        Ok(())
    }
}

/// The register after `op` from `state`, if `op`'s answer fits `state`.
fn step(op: &Kind, state: Value) -> Option<Value> {
    match *op {
        Kind::Read(v) => (v == state).then_some(state),
        Kind::CasApplied { expected, new } => (expected == state).then_some(Some(new)),
        Kind::CasRefused { expected, current } => (current == state && expected != state).then_some(state),
        // An unknown CAS is placed only where it applies: placed where it
        // does not, it would change nothing, the same as leaving it out
        // (which the search may always do), so that branch is not explored.
        Kind::CasUnknown { expected, new } => (expected == state).then_some(Some(new)),
    }
}

/// Checks every register of `ops`.
pub fn check(ops: &[Op]) -> Result<(), NotLinearizable> {
    let mut by_key: BTreeMap<i32, Vec<Op>> = BTreeMap::new();
    for op in ops {
        by_key.entry(op.key).or_default().push(op.clone());
    }
    for (key, mut ops) in by_key {
        ops.sort_by_key(|o| (o.call, o.ret));
        if !register(&ops) {
            return Err(NotLinearizable { key, ops });
        }
    }
    Ok(())
}

/// Depth-first search for a linearization of one register's operations
/// (sorted by invocation).
fn register(ops: &[Op]) -> bool {
    let words = ops.len().div_ceil(64);
    let required: usize = ops.iter().filter(|o| o.ret != u64::MAX).count();
    let mut placed = vec![0u64; words];
    let mut seen: HashSet<(Vec<u64>, Value)> = HashSet::new();
    // Explicit stack of (state before, op placed, required placed so far).
    let mut stack: Vec<(Value, usize)> = Vec::new();
    let mut state: Value = None;
    let mut done_required = 0usize;
    let mut next_from = 0usize;
    let is_placed = |placed: &[u64], i: usize| placed.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0);
    let flip = |placed: &mut [u64], i: usize| {
        if let Some(w) = placed.get_mut(i / 64) {
            *w ^= 1 << (i % 64);
        }
    };
    loop {
        if done_required == required {
            return true;
        }
        // The earliest return among the operations not placed: only
        // operations invoked before it may come next.
        let horizon = ops
            .iter()
            .enumerate()
            .filter(|(i, _)| !is_placed(&placed, *i))
            .map(|(_, o)| o.ret)
            .min()
            .unwrap_or(u64::MAX);
        let mut advanced = false;
        let mut i = next_from;
        while let Some(op) = ops.get(i) {
            if op.call > horizon {
                break;
            }
            if !is_placed(&placed, i) {
                if let Some(after) = step(&op.kind, state) {
                    flip(&mut placed, i);
                    if seen.insert((placed.clone(), after)) {
                        stack.push((state, i));
                        state = after;
                        if op.ret != u64::MAX {
                            done_required += 1;
                        }
                        next_from = 0;
                        advanced = true;
                        break;
                    }
                    flip(&mut placed, i);
                }
            }
            i += 1;
        }
        if advanced {
            continue;
        }
        // Dead end: undo the last placement and try the next candidate.
        let Some((before, last)) = stack.pop() else { return false };
        flip(&mut placed, last);
        if ops.get(last).is_some_and(|o| o.ret != u64::MAX) {
            done_required -= 1;
        }
        state = before;
        next_from = last + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(kind: Kind, call: u64, ret: u64) -> Op {
        Op { key: 0, kind, call, ret }
    }

    #[test]
    fn sequential_histories() {
        let good = [
            op(Kind::Read(None), 1, 2),
            op(Kind::CasApplied { expected: None, new: 1 }, 3, 4),
            op(Kind::CasRefused { expected: None, current: Some(1) }, 5, 6),
            op(Kind::Read(Some(1)), 7, 8),
        ];
        assert!(check(&good).is_ok());
        let stale = [op(Kind::CasApplied { expected: None, new: 1 }, 1, 2), op(Kind::Read(None), 3, 4)];
        assert!(check(&stale).is_err(), "a read after an applied write must see it");
    }

    #[test]
    fn concurrent_operations_may_take_either_order() {
        let h = [
            op(Kind::CasApplied { expected: None, new: 1 }, 1, 10),
            op(Kind::Read(Some(1)), 2, 3),
            op(Kind::Read(None), 4, 5),
        ];
        // The read of 1 returned before the read of None began: no order fits.
        assert!(check(&h).is_err());
        let h = [
            op(Kind::CasApplied { expected: None, new: 1 }, 1, 10),
            op(Kind::Read(None), 2, 3),
            op(Kind::Read(Some(1)), 4, 5),
        ];
        assert!(check(&h).is_ok());
    }

    #[test]
    fn a_lost_update_is_caught() {
        // Two clients both win the same expected value: a read-modify-write race.
        let h = [
            op(Kind::CasApplied { expected: None, new: 1 }, 1, 2),
            op(Kind::CasApplied { expected: Some(1), new: 2 }, 3, 6),
            op(Kind::CasApplied { expected: Some(1), new: 3 }, 4, 7),
        ];
        assert!(check(&h).is_err());
    }

    #[test]
    fn unknown_outcomes_may_apply_late_or_never() {
        let h = [
            op(Kind::CasApplied { expected: None, new: 1 }, 1, 2),
            op(Kind::CasUnknown { expected: Some(1), new: 2 }, 3, u64::MAX),
            op(Kind::Read(Some(1)), 4, 5),
            op(Kind::Read(Some(2)), 6, 7),
        ];
        assert!(check(&h).is_ok(), "the timed-out CAS took effect between the reads");
        let h = [
            op(Kind::CasApplied { expected: None, new: 1 }, 1, 2),
            op(Kind::CasUnknown { expected: Some(1), new: 2 }, 3, u64::MAX),
            op(Kind::Read(Some(1)), 4, 5),
        ];
        assert!(check(&h).is_ok(), "or never");
        let h = [
            op(Kind::CasApplied { expected: None, new: 1 }, 1, 2),
            op(Kind::CasUnknown { expected: Some(1), new: 2 }, 3, u64::MAX),
            op(Kind::Read(Some(2)), 4, 5),
            op(Kind::Read(Some(1)), 6, 7),
        ];
        assert!(check(&h).is_err(), "but not undone");
    }

    #[test]
    fn registers_are_independent_and_a_refusal_reports_what_it_saw() {
        let h = [
            Op { key: 1, kind: Kind::CasApplied { expected: None, new: 5 }, call: 1, ret: 2 },
            Op { key: 2, kind: Kind::CasRefused { expected: Some(5), current: None }, call: 3, ret: 4 },
        ];
        assert!(check(&h).is_ok());
        let h = [
            Op { key: 1, kind: Kind::CasApplied { expected: None, new: 5 }, call: 1, ret: 2 },
            Op { key: 1, kind: Kind::CasRefused { expected: Some(4), current: Some(6) }, call: 3, ret: 4 },
        ];
        let err = check(&h).expect_err("the refusal saw a value never written");
        assert_eq!(err.key, 1);
    }

    #[test]
    fn many_concurrent_unknowns_stay_tractable() {
        // 12 clients each with a timed-out CAS from the same value, then reads.
        let mut h = vec![op(Kind::CasApplied { expected: None, new: 0 }, 1, 2)];
        for c in 0..12u64 {
            h.push(op(Kind::CasUnknown { expected: Some(0), new: 100 + c as i64 }, 3 + c, u64::MAX));
        }
        h.push(op(Kind::Read(Some(105)), 40, 41));
        h.push(op(Kind::Read(Some(105)), 42, 43));
        assert!(check(&h).is_ok());
    }
}
