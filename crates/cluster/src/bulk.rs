//! Bulk work off the request path: streaming's exports, chunk reads and
//! writes and ingests run on a few threads of their own, at a lower CPU
//! priority than the threads that serve requests (Linux `nice` `BULK_NICE`),
//! so a node that streams gigabytes still answers its clients first, while
//! bulk work gets every cycle nobody else wants. ScyllaDB's scheduling
//! groups (streaming gets fewer shares than statements) are the model.
//!
//! Invariants:
//! - Only this pool's threads are reniced: the runtime's workers and the
//!   blocking pool (which also runs commits in batch and group commit
//!   modes) keep the process's priority.
//! - `BULK_THREADS` threads, started on first use; a job that panics fails
//!   alone (its caller gets an error), the thread goes on.
//! - If the threads cannot start, or the caller runs on a current-thread
//!   runtime (tests, and the simulator, whose paused clock only tokio's own
//!   blocking pool holds still while a job works), jobs run on tokio's
//!   blocking pool instead.

use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// Threads of the pool.
const BULK_THREADS: usize = 2;
/// Their nice value (the process's is usually 0; 19 is the lowest priority).
pub const BULK_NICE: i32 = 10;

type Job = Box<dyn FnOnce() + Send + 'static>;

fn pool() -> Option<&'static Mutex<mpsc::Sender<Job>>> {
    static POOL: OnceLock<Option<Mutex<mpsc::Sender<Job>>>> = OnceLock::new();
    POOL.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        let mut started = 0;
        for i in 0..BULK_THREADS {
            let rx = Arc::clone(&rx);
            let spawned = std::thread::Builder::new().name(format!("bulk-{i}")).spawn(move || {
                lower_priority();
                loop {
                    let job = rx.lock().unwrap_or_else(PoisonError::into_inner).recv();
                    match job {
                        Ok(job) => job(),
                        Err(_) => return,
                    }
                }
            });
            match spawned {
                Ok(_) => started += 1,
                Err(e) => tracing::warn!("cannot start a bulk work thread: {e}"),
            }
        }
        (started > 0).then(|| Mutex::new(tx))
    })
    .as_ref()
}

/// Runs `job` on a thread of its own at the bulk threads' priority, for bulk
/// work that holds a thread for long (a stream connection), so it does not
/// take one of the pool's few. Returns at once; false if the thread could
/// not start (the job is dropped).
pub fn spawn_thread(name: &str, job: impl FnOnce() + Send + 'static) -> bool {
    let spawned = std::thread::Builder::new().name(name.to_string()).spawn(move || {
        lower_priority();
        job();
    });
    if let Err(e) = &spawned {
        tracing::warn!("cannot start a {name} thread: {e}");
    }
    spawned.is_ok()
}

/// `spawn_thread`, waited for (without blocking the runtime). On a
/// current-thread runtime (tests, the simulator) the job runs on tokio's
/// blocking pool instead, as `run`'s do. Fails if the job panicked or its
/// thread could not start.
pub async fn run_on_thread<R, F>(name: &str, job: F) -> Result<R, String>
where
    R: Send + 'static,
    F: FnOnce() -> R + Send + 'static,
{
    let current_thread = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread);
    if current_thread {
        return tokio::task::spawn_blocking(job).await.map_err(|e| format!("bulk task failed: {e}"));
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    let started = spawn_thread(name, move || {
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
        let _ = tx.send(out);
    });
    if !started {
        return Err(format!("cannot start a {name} thread"));
    }
    match rx.await {
        Ok(Ok(out)) => Ok(out),
        Ok(Err(_)) => Err(format!("{name} thread panicked")),
        Err(_) => Err(format!("{name} thread ended without an answer")),
    }
}

/// Lowers the calling thread's CPU priority to `BULK_NICE` (Linux: the nice
/// value is per thread).
fn lower_priority() {
    // SAFETY: gettid and setpriority take no pointers and only change this thread's nice value.
    #[allow(unsafe_code)]
    let rc = unsafe {
        let tid = libc::syscall(libc::SYS_gettid);
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, BULK_NICE)
    };
    if rc != 0 {
        tracing::warn!("cannot lower the bulk work thread's priority: {}", std::io::Error::last_os_error());
    }
}

/// Runs `job` on the bulk pool and waits for it (without blocking the
/// runtime). Fails if the job panicked.
pub async fn run<R, F>(job: F) -> Result<R, String>
where
    R: Send + 'static,
    F: FnOnce() -> R + Send + 'static,
{
    let current_thread = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread);
    let Some(pool) = pool().filter(|_| !current_thread) else {
        return tokio::task::spawn_blocking(job).await.map_err(|e| format!("bulk task failed: {e}"));
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    let wrapped: Job = Box::new(move || {
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
        let _ = tx.send(out);
    });
    pool.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .send(wrapped)
        .map_err(|_| "the bulk pool stopped".to_string())?;
    match rx.await {
        Ok(Ok(out)) => Ok(out),
        Ok(Err(_)) => Err("bulk task panicked".to_string()),
        Err(_) => Err("bulk task dropped".to_string()),
    }
}

#[cfg(test)]
mod tests {
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn jobs_run_on_lower_priority_threads() {
        let nice = super::run(|| {
            // SAFETY: getpriority takes no pointers.
            #[allow(unsafe_code)]
            let n = unsafe {
                let tid = libc::syscall(libc::SYS_gettid);
                libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t)
            };
            (n, std::thread::current().name().map(str::to_string))
        })
        .await
        .expect("job");
        assert_eq!(nice.1.as_deref().map(|n| n.starts_with("bulk-")), Some(true));
        assert!(nice.0 >= super::BULK_NICE, "nice {}", nice.0);
        let failed = super::run(|| -> u32 { panic!("boom") }).await;
        assert!(failed.is_err());
        assert_eq!(super::run(|| 7).await, Ok(7), "the pool survives a panic");
    }
}
