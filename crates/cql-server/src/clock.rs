//! Server-side write timestamps and time UUIDs.
//!
//! Invariants:
//! - `now_micros` never returns the same value twice and never goes back,
//!   as Cassandra's `ClientState.getTimestamp()`: two writes from this node
//!   without USING TIMESTAMP are always ordered.
//! - `new_timeuuid` returns distinct version-1 UUIDs ordered by time.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

pub struct Clock {
    last_micros: AtomicI64,
    last_uuid_ticks: AtomicI64,
    node: u64,
}

impl Clock {
    pub fn new(node_seed: u64) -> Clock {
        Clock { last_micros: AtomicI64::new(0), last_uuid_ticks: AtomicI64::new(0), node: node_seed }
    }

    fn wall_micros() -> i64 {
        SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0)
    }

    pub fn now_micros(&self) -> i64 {
        let wall = Self::wall_micros();
        let mut last = self.last_micros.load(Ordering::Relaxed);
        loop {
            let next = if wall > last { wall } else { last + 1 };
            match self.last_micros.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return next,
                Err(seen) => last = seen,
            }
        }
    }

    pub fn now_seconds(&self) -> i32 {
        (Self::wall_micros() / 1_000_000) as i32
    }

    /// A version-1 UUID for now(): 100 ns ticks since 1582-10-15, unique per call.
    pub fn new_timeuuid(&self) -> uuid::Uuid {
        const GREGORIAN_OFFSET_100NS: i64 = 0x01B2_1DD2_1381_4000;
        let wall = Self::wall_micros() * 10 + GREGORIAN_OFFSET_100NS;
        let mut last = self.last_uuid_ticks.load(Ordering::Relaxed);
        let ticks = loop {
            let next = if wall > last { wall } else { last + 1 };
            match self.last_uuid_ticks.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => break next,
                Err(seen) => last = seen,
            }
        };
        let ticks = ticks as u64;
        let time_low = (ticks & 0xFFFF_FFFF) as u32;
        let time_mid = ((ticks >> 32) & 0xFFFF) as u16;
        let time_hi = (((ticks >> 48) & 0x0FFF) as u16) | 0x1000;
        let clock_seq = ((self.node >> 48) as u16 & 0x3FFF) | 0x8000;
        let node = self.node & 0xFFFF_FFFF_FFFF;
        let mut d4 = [0u8; 8];
        d4[0..2].copy_from_slice(&clock_seq.to_be_bytes());
        d4[2..8].copy_from_slice(&node.to_be_bytes()[2..8]);
        uuid::Uuid::from_fields(time_low, time_mid, time_hi, &d4)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_strictly_increase() {
        let c = Clock::new(7);
        let a = c.now_micros();
        let b = c.now_micros();
        assert!(b > a);
        let u1 = c.new_timeuuid();
        let u2 = c.new_timeuuid();
        assert_eq!(u1.get_version_num(), 1);
        assert_ne!(u1, u2);
    }
}
