//! Keeps work on tokio's blocking pool from racing the simulation's thread.
//!
//! Streaming and repair run storage work on the blocking pool
//! (`spawn_blocking`: exports, ingests, validation, pushes, and the replica
//! handlers of `HashesReq`, `RepairPushReq`, `RepairedReq`, which also answer
//! from that thread). On a paused clock tokio stops time while such a task
//! runs, but the runtime's own thread keeps polling the tasks that are ready,
//! so which of the two touches storage or the network first would be up to
//! the OS scheduler, and a seed would not replay. The gate makes them take
//! turns, through the runtime builder's thread hooks:
//!
//! - the blocking pool has one thread and no keep-alive, so each burst of
//!   blocking work starts a thread (`on_thread_start`) that runs the tasks
//!   queued, in the order they were spawned, then ends (`on_thread_stop`);
//! - that thread starts only once the runtime's thread has run out of ready
//!   tasks and parks (`on_thread_park`; the clock cannot move meanwhile);
//! - the runtime's thread, woken (`on_thread_unpark`, by the blocking work's
//!   own wake-ups or a spurious timeout), waits until the blocking thread has
//!   ended before it polls anything.
//!
//! So at any moment either the runtime's thread or one blocking task runs,
//! and which one depends only on the order of events in the run.
//!
//! Invariants:
//! - Neither side waits forever: after `WAIT_MAX` of wall time a wait gives
//!   up and marks the gate `stuck`, which the run reports (the run may then
//!   not replay; it is never silently wrong).
//! - `close` (before the runtime is dropped) lets every waiter through, so
//!   shutting down never hangs on the gate.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// The longest either side waits for the other (wall time).
const WAIT_MAX: Duration = Duration::from_secs(60);

#[derive(Default)]
struct State {
    /// The runtime's thread is parked (idle).
    parked: bool,
    /// Blocking-pool threads alive.
    blocking: usize,
    closing: bool,
    stuck: bool,
}

#[derive(Default)]
pub struct Gate {
    state: Mutex<State>,
    turn: Condvar,
}

impl Gate {
    /// Configures `builder` (a current-thread runtime) to take turns through this gate.
    pub fn install(self: &Arc<Gate>, builder: &mut tokio::runtime::Builder) {
        let (start, stop, park, unpark) = (Arc::clone(self), Arc::clone(self), Arc::clone(self), Arc::clone(self));
        builder
            .max_blocking_threads(1)
            .thread_keep_alive(Duration::ZERO)
            .on_thread_start(move || start.blocking_starts())
            .on_thread_stop(move || stop.blocking_stops())
            .on_thread_park(move || park.runtime_parks())
            .on_thread_unpark(move || unpark.runtime_unparks());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Waits on the condition until `ready` holds, the gate closes, or
    /// `WAIT_MAX`; returns the lock, held.
    fn wait_until<'a>(
        &'a self,
        mut state: std::sync::MutexGuard<'a, State>,
        ready: impl Fn(&State) -> bool,
    ) -> std::sync::MutexGuard<'a, State> {
        let deadline = std::time::Instant::now() + WAIT_MAX;
        while !ready(&state) && !state.closing {
            let now = std::time::Instant::now();
            if now >= deadline {
                state.stuck = true;
                break;
            }
            state = self.turn.wait_timeout(state, deadline - now).unwrap_or_else(std::sync::PoisonError::into_inner).0;
        }
        state
    }

    fn blocking_starts(&self) {
        let mut state = self.lock();
        state.blocking += 1;
        drop(self.wait_until(state, |s| s.parked));
    }

    fn blocking_stops(&self) {
        let mut state = self.lock();
        state.blocking = state.blocking.saturating_sub(1);
        self.turn.notify_all();
    }

    fn runtime_parks(&self) {
        self.lock().parked = true;
        self.turn.notify_all();
    }

    fn runtime_unparks(&self) {
        // Checked and cleared under one lock: a blocking thread starting now waits for the next park.
        let mut state = self.wait_until(self.lock(), |s| s.blocking == 0);
        state.parked = false;
    }

    /// Lets every waiter through (call before dropping the runtime).
    pub fn close(&self) {
        self.lock().closing = true;
        self.turn.notify_all();
    }

    /// Whether a wait gave up (see the module docs).
    pub fn stuck(&self) -> bool {
        self.lock().stuck
    }
}
