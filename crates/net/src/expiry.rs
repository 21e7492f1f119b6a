//! How long an expiring request (`Verb::ExpiringReq`) has been on its way
//! when it arrives, by its sender's clock, so that a replica can drop the
//! requests whose sender has already given up (Cassandra's
//! `internode_timeout`). Sans-IO: the caller passes the clocks' readings.
//!
//! Both ends read a *steady* clock ([`steady_clock_us`]): the wall clock
//! read once, when the process starts, advanced by the monotonic clock. A
//! wall clock that steps (NTP, an operator, a skewed node) does not move it,
//! so two processes' steady clocks differ by a constant for their whole
//! lives, unknown (their wall clocks differed at their starts) but fixed.
//! The age is measured against the connection's *floor*: the smallest
//! `receiver's clock - sender's stamp` seen on the connection lately, which
//! is that constant plus the quickest transit (near zero on a live link).
//! `age = (now - stamp) - floor` is then how much longer than the quickest
//! request this one took: time queued at the sender, in the sockets (a
//! paused receiver), and nothing of the offset. A restarted process gets new
//! connections, hence new floors.
//!
//! Invariants:
//! - A constant offset between the clocks, of either sign and any size,
//!   never makes a request look older than it is; a step of either wall
//!   clock changes no steady clock.
//! - The floor is the minimum over the current window and the one before
//!   (`WINDOW` each), so it also follows clocks that drift or step (a
//!   caller passing other clocks): a step that makes requests look younger
//!   counts at once; one that makes them look older is forgotten within two
//!   windows. Until then requests of that connection look older by the
//!   step, and may be dropped early; a dropped request is one its sender
//!   times out on and hints, so that would cost latency, not data.
//! - The first request on a connection sets the floor and is 0 old: a
//!   request is only ever judged against requests seen before it.

use std::sync::OnceLock;
use std::time::Duration;

use tokio::time::Instant;

/// This process's steady clock, in microseconds: the wall clock (since the
/// epoch) when it was first read, plus the monotonic time since. Expiring
/// requests are stamped and judged with it.
pub fn steady_clock_us() -> i64 {
    static START: OnceLock<(std::time::Instant, i64)> = OnceLock::new();
    let (monotonic, wall) = START.get_or_init(|| {
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX));
        (std::time::Instant::now(), wall)
    });
    wall.saturating_add(i64::try_from(monotonic.elapsed().as_micros()).unwrap_or(i64::MAX))
}

/// The length of the floor's windows.
pub const WINDOW: Duration = Duration::from_secs(10);

/// The age estimator of one connection's expiring requests.
#[derive(Debug, Default)]
pub struct TransitClock {
    /// When the current window began (None before the first request).
    started: Option<Instant>,
    /// The smallest offset (µs) in the current and the previous window.
    current: Option<i64>,
    previous: Option<i64>,
}

impl TransitClock {
    pub fn new() -> TransitClock {
        TransitClock::default()
    }

    /// How old a request stamped `created_at_us` (its sender's steady clock)
    /// is when it arrives at `now_us` (this node's steady clock) and `now`.
    pub fn age(&mut self, created_at_us: i64, now_us: i64, now: Instant) -> Duration {
        let offset = now_us.saturating_sub(created_at_us);
        match self.started {
            Some(started) if now.saturating_duration_since(started) < WINDOW => {}
            Some(_) => {
                self.previous = self.current.take();
                self.started = Some(now);
            }
            None => self.started = Some(now),
        }
        let current = self.current.map_or(offset, |c| c.min(offset));
        self.current = Some(current);
        let floor = self.previous.map_or(current, |p| p.min(current));
        Duration::from_micros(u64::try_from(offset.saturating_sub(floor)).unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_steady_clock_advances_with_the_monotonic_clock() {
        let a = steady_clock_us();
        std::thread::sleep(Duration::from_millis(20));
        let b = steady_clock_us();
        assert!((20_000..2_000_000).contains(&(b - a)), "{a} -> {b}");
        // It starts at the wall clock (within the test's run).
        let wall = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_micros() as i64;
        assert!((wall - b).abs() < 600_000_000, "steady {b}, wall {wall}");
    }

    const MS: i64 = 1000;

    #[test]
    fn a_constant_offset_of_either_sign_does_not_age_requests() {
        for skew in [0, 7_000 * MS, -7_000 * MS, i64::MAX / 4] {
            let mut clock = TransitClock::new();
            let t0 = Instant::now();
            for i in 0..100i64 {
                let sent = 1_000_000 * MS + i * 50 * MS;
                // Transit 1 ms, give or take 0.5.
                let arrived = sent + MS + (i % 3 - 1) * MS / 2;
                let age = clock.age(sent, arrived + skew, t0 + Duration::from_millis(i as u64 * 50));
                assert!(age <= Duration::from_millis(1), "skew {skew}: request {i} aged {age:?}");
            }
        }
    }

    #[test]
    fn a_request_held_in_the_sockets_is_as_old_as_the_hold() {
        let mut clock = TransitClock::new();
        let t0 = Instant::now();
        let skew = -3_000 * MS;
        for i in 0..20i64 {
            let at = 1_000_000 * MS + i * 100 * MS;
            clock.age(at, at + MS + skew, t0 + Duration::from_millis(i as u64 * 100));
        }
        // The receiver stops for 25 s (longer than two windows): requests made
        // during the pause arrive at its end, the oldest first.
        let resumed = 1_000_000 * MS + 2_000 * MS + 25_000 * MS;
        let later = t0 + Duration::from_millis(2_000 + 25_000);
        for made_ago_ms in [25_000i64, 10_000, 2_500, 500] {
            let age = clock.age(resumed - made_ago_ms * MS, resumed + skew, later);
            let want = Duration::from_millis(made_ago_ms as u64 - 1);
            assert_eq!(age, want, "made {made_ago_ms} ms before the receiver resumed");
        }
    }

    #[test]
    fn a_forward_step_of_the_receivers_clock_is_forgotten_within_two_windows() {
        let mut clock = TransitClock::new();
        let t0 = Instant::now();
        let mut aged_after = Vec::new();
        for i in 0..400i64 {
            let at = 1_000_000 * MS + i * 100 * MS;
            let step = if i >= 100 { 5_000 * MS } else { 0 };
            let age = clock.age(at, at + MS + step, t0 + Duration::from_millis(i as u64 * 100));
            if age > Duration::from_millis(1) {
                aged_after.push(i);
            }
        }
        // Requests look 5 s older from the step (i = 100, at 10 s) until the
        // pre-step minimum has left both windows (by 30 s), and never again.
        assert_eq!(aged_after.first(), Some(&100));
        assert!(aged_after.last().is_some_and(|&i| i < 300), "{aged_after:?}");
    }

    #[test]
    fn random_skews_transits_and_holds_age_requests_by_their_extra_transit_only() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x5EED);
        for _ in 0..200 {
            let skew: i64 = rng.gen_range(-3_600_000 * MS..=3_600_000 * MS);
            let mut clock = TransitClock::new();
            let t0 = Instant::now();
            let (mut sent, mut local) = (1_000_000 * MS, Duration::ZERO);
            let mut quickest = i64::MAX;
            let mut last_quick: Option<Duration> = None;
            for _ in 0..rng.gen_range(1..300) {
                sent += rng.gen_range(0..=200 * MS);
                // Most requests take 0-2 ms; some are held up to 30 s (a pause,
                // a full socket), at any point, including the very first.
                let transit =
                    if rng.gen_bool(0.05) { rng.gen_range(0..=30_000 * MS) } else { rng.gen_range(0..=2 * MS) };
                local = local.max(Duration::from_micros((sent - 1_000_000 * MS + transit) as u64));
                let age = clock.age(sent, sent + transit + skew, t0 + local);
                quickest = quickest.min(transit);
                // Never older than its own transit, whatever the skew: at most its
                // extra over the quickest request seen (the floor may be older).
                assert!(age <= Duration::from_micros((transit - quickest) as u64), "skew {skew}");
                assert!(age <= Duration::from_micros(transit as u64), "skew {skew}");
                // And a request held past a quick one of the last window is
                // as old as its hold, give or take the quick one's transit.
                if last_quick.is_some_and(|at| local - at < WINDOW) {
                    assert!(age + Duration::from_millis(2) >= Duration::from_micros(transit as u64), "skew {skew}");
                }
                if transit <= 2 * MS {
                    last_quick = Some(local);
                }
            }
        }
    }

    #[test]
    fn a_backward_step_counts_at_once() {
        let mut clock = TransitClock::new();
        let t0 = Instant::now();
        for i in 0..50i64 {
            let at = 1_000_000 * MS + i * 100 * MS;
            let step = if i >= 20 { -5_000 * MS } else { 0 };
            let age = clock.age(at, at + MS + step, t0 + Duration::from_millis(i as u64 * 100));
            assert_eq!(age, Duration::ZERO, "request {i}");
        }
    }
}
