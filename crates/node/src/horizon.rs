//! Repair-based tombstone GC on this node (issue 21): every `PERIOD`, sets
//! each user table's repaired horizon (`Storage::set_tombstone_horizon`)
//! from the repairs recorded for the ranges this node replicates, less
//! `tombstone_gc_propagation_delay` (`cluster::repaired::horizon`), so a
//! tombstone is purged only once every replica holds it. Also keeps the
//! `clustered` mark: set once this node sees another node in its ring,
//! cleared once every other node it knows of has left and it has been alone
//! for `ALONE_FOR`. And gives storage the ring's tokens, which cut the
//! ranges incremental repair keeps its state by (`Storage::set_ring`).
//!
//! Invariants:
//! - Until the first pass every table's horizon is 0 (the node opens storage
//!   with `tombstone_horizon: 0`), and a table created between two passes
//!   starts at 0 too: nothing is purged before the node has computed it.
//! - A horizon is written to storage only when it changes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cluster::repaired::{self, CLUSTERED};
use cluster::ClusterView;
use cql_server::schema::{Schema, SchemaService};
use storage::Storage;

/// How often the horizons are computed.
pub const PERIOD: Duration = Duration::from_secs(2);
/// How long a node that was in a ring must see every other node left before
/// it purges as a single node again.
const ALONE_FOR: Duration = Duration::from_secs(30);

/// Runs forever: one pass every `PERIOD`.
pub async fn maintain(
    storage: Arc<Storage>,
    view: Arc<cluster::ViewHandle>,
    schema: Arc<SchemaService>,
    propagation_delay: Duration,
) {
    let delay = i64::try_from(propagation_delay.as_secs()).unwrap_or(i64::MAX);
    let mut tick = tokio::time::interval(PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut alone_since: Option<Instant> = None;
    loop {
        tick.tick().await;
        let (storage, view, schema) = (Arc::clone(&storage), view.snapshot(), schema.snapshot());
        repaired::cut_ring(&storage, &view);
        alone_since =
            match tokio::task::spawn_blocking(move || pass(&storage, &view, &schema, delay, alone_since)).await {
                Ok(Ok(alone)) => alone,
                Ok(Err(e)) => {
                    tracing::warn!("cannot update the repaired horizons: {e}");
                    None
                }
                Err(e) => {
                    tracing::warn!("the repaired horizon task failed: {e}");
                    None
                }
            };
    }
}

/// One pass: the `clustered` mark, then every user table's horizon. Returns
/// since when this node has been alone in the ring after the others left.
fn pass(
    storage: &Storage,
    view: &ClusterView,
    schema: &Schema,
    delay: i64,
    alone_since: Option<Instant>,
) -> Result<Option<Instant>, storage::StorageError> {
    let mut clustered = storage.local_get(CLUSTERED).is_some_and(|v| !v.is_empty());
    let alone_since = repaired::left_alone(view).then(|| alone_since.unwrap_or_else(Instant::now));
    if !clustered && repaired::sees_peers(view) {
        storage.local_set(CLUSTERED, "1")?;
        clustered = true;
    } else if clustered && alone_since.is_some_and(|t| t.elapsed() >= ALONE_FOR) {
        tracing::info!("every other node has left the ring: tombstones go after gc_grace_seconds alone again");
        storage.local_set(CLUSTERED, "")?;
        clustered = false;
    }
    for ks in schema.keyspaces.values() {
        if Schema::is_local(&ks.name) {
            continue;
        }
        let scope = repaired::scope(view, ks, clustered);
        for table in ks.tables.values() {
            let horizon = scope.horizon(&repaired::load(storage, &table.id), delay);
            // A table storage does not hold yet (a schema change on its way) is set next time.
            if storage.tombstone_horizon(&table.id).is_ok_and(|h| h != horizon) {
                tracing::debug!(keyspace = %ks.name, table = %table.name, horizon, "repaired horizon");
                storage.set_tombstone_horizon(&table.id, horizon)?;
            }
        }
    }
    Ok(alone_since)
}
