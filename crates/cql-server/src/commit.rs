//! Group commit across connections: the writes that request groups collect
//! (`Storage::collect_writes`) wait here, and one leader task makes all that
//! are waiting in one storage batch (one commit log write), then the next
//! round, until none wait.
//!
//! Requests wait for their commit asynchronously, so while a commit runs the
//! runtime's workers go on executing requests, whose writes then form the
//! next round: the busier the node, the more writes share one log write.
//! (RocksDB's own write groups make waiting writers block their threads,
//! which on a few cores leaves every group one or two writes long.)
//!
//! Invariants:
//! - A request group is answered only after the round holding its writes
//!   was committed, with that round's error if it failed.
//! - At most one leader runs at a time; a leader leaves only when nothing
//!   waits, and a failed or panicking round fails its waiters, never hangs them.

use std::sync::{Arc, Mutex};

use storage::{Collected, Storage};
use tokio::sync::oneshot;

use crate::error::QueryError;

type Reply = oneshot::Sender<Result<(), QueryError>>;

#[derive(Default)]
pub struct CommitQueue {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    waiting: Vec<(Collected, Reply)>,
    leading: bool,
}

impl CommitQueue {
    /// Makes `writes` durably per the commit log mode, with whatever else is
    /// waiting. Call from the runtime (a leader task may be spawned).
    pub async fn commit(self: &Arc<Self>, storage: &Arc<Storage>, writes: Collected) -> Result<(), QueryError> {
        let (tx, rx) = oneshot::channel();
        let lead = {
            let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
            s.waiting.push((writes, tx));
            !std::mem::replace(&mut s.leading, true)
        };
        if lead {
            let (queue, storage) = (Arc::clone(self), Arc::clone(storage));
            tokio::spawn(async move { queue.lead(&storage) });
        }
        rx.await.unwrap_or_else(|_| Err(QueryError::Server("the commit of this write was abandoned".into())))
    }

    fn lead(&self, storage: &Storage) {
        loop {
            let round = {
                let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
                if s.waiting.is_empty() {
                    s.leading = false;
                    return;
                }
                std::mem::take(&mut s.waiting)
            };
            let (groups, replies): (Vec<Collected>, Vec<Reply>) = round.into_iter().unzip();
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| storage.commit_collected(&groups)));
            let result = match result {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(QueryError::from(e)),
                Err(_) => Err(QueryError::Server("internal error while committing writes".into())),
            };
            for reply in replies {
                let _ = reply.send(result.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::CommitQueue;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_waiter_is_answered_and_nothing_is_left_leading() {
        let dir = tempfile::tempdir().unwrap();
        let config = storage::StorageConfig {
            data_dir: dir.path().to_path_buf(),
            commitlog_sync: storage::CommitlogSync::Periodic { period: Duration::from_secs(10) },
            cache_bytes: 8 << 20,
            memtable_bytes: 8 << 20,
        };
        let storage = Arc::new(storage::Storage::open(config).unwrap().0);
        let queue = Arc::new(CommitQueue::default());
        let mut tasks = Vec::new();
        for _ in 0..200 {
            let (queue, storage) = (Arc::clone(&queue), Arc::clone(&storage));
            // Empty groups: the queue's protocol alone (the storage tests cover the writes).
            tasks.push(tokio::spawn(async move { queue.commit(&storage, storage::Collected::default()).await }));
        }
        for t in tasks {
            t.await.unwrap().unwrap();
        }
        assert!(!queue.state.lock().unwrap().leading);
        assert!(queue.state.lock().unwrap().waiting.is_empty());
    }
}
