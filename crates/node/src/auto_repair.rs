//! The automatic repair schedule (`auto_repair`, on by default; issue 21):
//! every `auto_repair_check_interval`, each table (user tables, `system_auth`,
//! `system_distributed`; not `system_traces`, whose rows are written at ONE
//! and expire within a day) whose ranges this
//! node is the primary replica of were last repaired more than half its
//! `gc_grace_seconds` ago (or never) is repaired on those ranges (`repair
//! -pr` of that table). Every node does the same for its own primary
//! ranges, so every range of the ring is repaired within gc_grace_seconds:
//! replicas converge even where hints and read repair missed something, and
//! repair-based tombstone GC (`horizon`) can purge.
//!
//! Invariants:
//! - Runs only while this node is NORMAL in a ring with other nodes and no
//!   topology change is in progress, and only for ranges that have another
//!   replica.
//! - Gives way: an operator's operation on this node stops a scheduled
//!   repair at its next range (`Lifecycle::begin`).
//! - Never waits for a replica: a table whose ranges have a replica down is
//!   left for the next check (the repair would be refused), as is every
//!   table while another operation runs on this node (`Lifecycle::begin`).
//! - Repairs one table at a time; each run shows in `repair_admin list` as
//!   triggered by the schedule.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cluster::repaired;
use cluster::view::uuid;
use cluster::{ClusterView, Status, ViewHandle};
use cql_server::schema::{Schema, SchemaService};
use storage::Storage;
use types::schema::{KeyspaceDef, Replication, TableDef};

use crate::lifecycle::{Lifecycle, RepairMode, RepairTrigger};

/// Runs forever: one check every `check`.
pub async fn run(
    lifecycle: Arc<Lifecycle>,
    storage: Arc<Storage>,
    view: Arc<ViewHandle>,
    schema: Arc<SchemaService>,
    check: Duration,
) {
    let mut tick = tokio::time::interval(check);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let (view, schema) = (view.snapshot(), schema.snapshot());
        let moving = !view.topology_changes().is_empty();
        if moving || !repaired::sees_peers(&view) || view.local().is_none_or(|me| me.status != Status::Normal) {
            continue;
        }
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        for ks in schema.keyspaces.values() {
            if Schema::is_local(&ks.name) || matches!(ks.replication, Replication::Local) || ks.name == "system_traces"
            {
                continue;
            }
            for table in ks.tables.values() {
                if !due(&view, ks, table, &repaired::load(&storage, &table.id), now) {
                    continue;
                }
                let tables = [table.name.clone()];
                match lifecycle
                    .repair(Some(&ks.name), &tables, true, false, RepairMode::Incremental, RepairTrigger::Schedule)
                    .await
                {
                    Ok(report) => tracing::info!(
                        keyspace = %ks.name,
                        table = %table.name,
                        differing = %report.get("partitions_differing").cloned().unwrap_or_default(),
                        bytes = %report.get("bytes_repaired").cloned().unwrap_or_default(),
                        "scheduled repair done"
                    ),
                    Err(e) => tracing::info!(keyspace = %ks.name, table = %table.name, "scheduled repair skipped: {e}"),
                }
            }
        }
    }
}

/// Whether `table`'s primary ranges on this node (those with another
/// replica) are due: one was last repaired (`records`) more than half the
/// table's gc_grace_seconds before `now`, or never, and every replica of
/// them is up.
fn due(view: &ClusterView, ks: &KeyspaceDef, table: &TableDef, records: &repaired::Records, now: i64) -> bool {
    let every = i64::from(table.options.gc_grace_seconds.max(0)) / 2;
    let mut any_due = false;
    for (range, primary) in view.ring.ranges() {
        if uuid(primary) != view.local {
            continue;
        }
        let replicas = view.replicas(ks, range.end);
        if replicas.len() < 2 {
            continue;
        }
        if replicas.iter().any(|r| !view.is_alive(*r)) {
            return false;
        }
        let last = records.get(&(range.start, range.end)).copied().unwrap_or(0);
        any_due |= now - last >= every;
    }
    any_due
}
