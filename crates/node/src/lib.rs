//! A Shoal node: configuration, wiring and lifecycle.
//!
//! `run` opens storage, restores the node's identity (host id, tokens) and
//! schema, joins the cluster (`join`: gossip, internode messaging, tokens),
//! serves CQL and the admin API until SIGTERM/SIGINT, then shuts down
//! cleanly: announces the shutdown to peers, stops accepting, syncs the
//! commit log and hints, and flushes memtables. `plane` connects the CQL
//! executors to the cluster coordinator; `lifecycle` runs the operations
//! that move data between nodes (rebuild, repair, ...); `horizon` keeps each
//! table's repaired horizon, below which tombstones may be purged
//! (repair-based tombstone GC: a tombstone goes only once every replica
//! holds it).
//!
//! Invariants:
//! - The host id and tokens are generated once and persisted in the data
//!   directory; a restart (even under another address) keeps them.
//! - Only this crate reads files, flags and environment variables; the
//!   libraries below take typed configuration.

#![deny(clippy::indexing_slicing)]
#![cfg_attr(test, allow(clippy::indexing_slicing))]

pub mod admin;
mod auto_repair;
pub mod config;
pub mod dashboard;
pub mod exporter;
mod horizon;
mod join;
pub mod lifecycle;
mod plane;
mod s3;
mod snapshots;

use serde_json::Value as Json;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context;
use cql_server::schema::SchemaService;
use cql_server::system::NodeInfo;
use cql_server::{Processor, ServerConfig, Stages};
use storage::{Storage, StorageConfig};
use uuid::Uuid;

pub use config::{ConfigFile, NodeConfig, Overrides};

/// Opens the node's storage and restores its identity: checks the cluster
/// name and returns the host id (generated and persisted on first start).
fn open_storage(config: &NodeConfig) -> anyhow::Result<(Arc<Storage>, Vec<types::schema::KeyspaceDef>, Uuid)> {
    let storage_config = StorageConfig {
        data_dir: config.data_dir.clone(),
        commitlog_sync: config.commitlog_sync,
        cache_bytes: config.block_cache_bytes,
        row_cache_bytes: config.row_cache_bytes,
        memtable_bytes: config.memtable_bytes,
        memtable_space: config.memtable_space,
        // Nothing is purged until the horizon task has computed each table's
        // horizon from the repairs this node knows of (`horizon`).
        tombstone_horizon: 0,
    };
    let (storage, keyspaces) = Storage::open(storage_config)
        .with_context(|| format!("cannot open data directory {}", config.data_dir.display()))?;
    let storage = Arc::new(storage);

    if let Some(name) = storage.local_get("cluster_name") {
        if name != config.cluster_name {
            anyhow::bail!(
                "Saved cluster name {name} != configured name {}: this data directory belongs to another cluster",
                config.cluster_name
            );
        }
    } else {
        storage.local_set("cluster_name", &config.cluster_name)?;
    }
    let host_id = match storage.local_get("host_id").and_then(|h| h.parse::<Uuid>().ok()) {
        Some(id) => id,
        None => {
            let id = Uuid::new_v4();
            storage.local_set("host_id", &id.to_string())?;
            id
        }
    };
    Ok((storage, keyspaces, host_id))
}

/// Runs a node in the foreground until SIGTERM or SIGINT.
pub fn run(config: NodeConfig) -> anyhow::Result<()> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if config.worker_threads > 0 {
        builder.worker_threads(config.worker_threads);
    }
    let runtime = builder.enable_all().thread_name("shoal").build()?;
    let (storage, keyspaces, host_id) = open_storage(&config)?;
    if storage.local_get(lifecycle::DECOMMISSIONED).is_some_and(|v| !v.is_empty()) {
        anyhow::bail!(
            "This node was decommissioned and will not rejoin the ring; start it on an empty data directory to add it \
             again ({})",
            config.data_dir.display()
        );
    }
    // The disk usage guardrail (`data_disk_usage_*`): storage samples the data directory's disk.
    storage.monitor_disk_usage(config.disk_usage).context("cannot start the disk usage guardrail")?;
    storage.set_incremental_backups(config.incremental_backups);
    if config.compaction_throughput_bytes > 0 {
        storage.set_compaction_throughput(config.compaction_throughput_bytes);
    }
    let addr = SocketAddr::new(config.rpc_address, config.native_port);
    let result = runtime.block_on(async {
        // Join the ring first: CQL clients are served once the node is NORMAL.
        let generation = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let mut joined =
            join::join(&config, &storage, host_id, generation, cql_server::system::RELEASE_VERSION).await?;
        let node = NodeInfo {
            cluster_name: config.cluster_name.clone(),
            host_id,
            listen_address: config.listen_address,
            rpc_address: config.rpc_address,
            native_port: config.native_port,
            storage_port: config.storage_port,
            data_center: config.dc.clone(),
            rack: config.rack.clone(),
            tokens: joined.tokens.clone(),
            gossip_generation: generation as i32,
        };
        let schema = Arc::new(SchemaService::new(Arc::clone(&storage), keyspaces));
        let (schema_tx, schema_rx) = tokio::sync::mpsc::unbounded_channel();
        let admin_schema_tx = schema_tx.clone();
        let data_plane = Arc::new(plane::ClusterPlane {
            coordinator: Arc::clone(&joined.coordinator),
            schema: Arc::clone(&schema),
            schema_changed: schema_tx,
        });
        // Request tracing: sessions started here and joined as a replica share one queue,
        // drained into system_traces by the trace writer.
        let (tracer, trace_records) = trace::Tracer::new(
            SocketAddr::new(config.listen_address, config.storage_port),
            trace::QUEUE_CAPACITY,
        );
        joined.coordinator.set_tracer(Arc::clone(&tracer));
        let processor = Arc::new(
            Processor::new(Arc::clone(&schema), Arc::clone(&storage), node, data_plane)
                .with_tracer(Arc::clone(&tracer))
                .with_settings(config.settings())
                .with_batch_limits(config.batch_limits)
                .with_auth(config.auth)
                .with_audit(
                    cql_server::audit::AuditLog::start(
                        config.audit.clone(),
                        SocketAddr::new(config.listen_address, config.storage_port).to_string(),
                    )
                    .context("cannot start the audit log")?,
                ),
        );
        // PasswordAuthenticator: the default superuser in a cluster with no role. The roles
        // are replicated: until enough replicas of system_auth answer, try again.
        // The first try before CQL is served, so a node alone logs in its default superuser at once.
        auth_setup(Arc::clone(&processor), Arc::clone(&storage)).await;
        tokio::spawn(cql_server::traces::write_records(Arc::clone(&processor), trace_records));
        let (load_schema, load_storage) = (Arc::clone(&schema), Arc::clone(&storage));
        let load = Arc::new(move || admin::local_load(&load_schema.snapshot(), &load_storage));
        joined.spawn_tasks(
            Arc::new(plane::SchemaAdapter(Arc::clone(&schema))),
            processor.events.clone(),
            schema_rx,
            load,
        );

        let lifecycle = Arc::new(lifecycle::Lifecycle::new(
            Arc::clone(&joined.coordinator),
            Arc::clone(&joined.gossip),
            Arc::clone(&processor.schema),
            Arc::clone(&joined.stream_registry),
            config.data_dir.join("streams").join("in"),
        ));
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        // The CQL server's own stop: at shutdown, or earlier by `shoal tool drain`.
        let (native_stop, native_stop_rx) = tokio::sync::watch::channel(false);
        let native_stop = Arc::new(native_stop);
        // Admin API (`shoal tool`, `shoal cluster`) on listen_address:admin_port.
        let admin_addr = SocketAddr::new(config.listen_address, config.admin_port);
        let admin_listener = tokio::net::TcpListener::bind(admin_addr)
            .await
            .with_context(|| format!("cannot listen for the admin API on {admin_addr} (set admin_port)"))?;
        let hints = Arc::clone(&joined.hints);
        let admin_state = Arc::new(admin::AdminState {
            lifecycle: Arc::clone(&lifecycle),
            view: Arc::clone(&joined.view),
            schema: Arc::clone(&processor.schema),
            storage: Arc::clone(&storage),
            pending_hints: Arc::new(move || hints.targets().into_iter().map(|t| (t, hints.pending_bytes(t))).collect()),
            hint_stats: {
                let hints = Arc::clone(&joined.hints);
                Arc::new(move || hints.stats())
            },
            snitch: format!("org.apache.cassandra.locator.{}", config.endpoint_snitch),
            started: std::time::Instant::now(),
            admin_port: config.admin_port,
            schema_changed: Arc::new(move || {
                let _ = admin_schema_tx.send(());
            }),
            tracer,
            native_stop: Arc::clone(&native_stop),
            drain_state: std::sync::atomic::AtomicU8::new(0),
        });
        // Prometheus metrics (`/metrics`) on prometheus_address:prometheus_port (ScyllaDB's 9180); 0 turns it off.
        let metrics_task = match config.prometheus_port {
            0 => None,
            port => {
                let addr = SocketAddr::new(config.prometheus_address.unwrap_or(config.listen_address), port);
                match tokio::net::TcpListener::bind(addr).await {
                    Ok(listener) => {
                        let state = Arc::clone(&admin_state);
                        Some(tokio::spawn(admin::serve(listener, admin::Listener::Metrics, state, stop_rx.clone())))
                    }
                    // Another node on this host has it: the admin port's /metrics still serves.
                    Err(e) => {
                        tracing::warn!(
                            "cannot listen for Prometheus scrapes on {addr}: {e}; set prometheus_port (0 for \
                             none). /metrics stays on the admin port"
                        );
                        None
                    }
                }
            }
        };
        let admin_task = tokio::spawn(admin::serve(admin_listener, admin::Listener::Admin, admin_state, stop_rx.clone()));
        // A new node streams its ranges before it serves anyone (JOINING until then). A failed
        // bootstrap leaves the node JOINING, its admin API up: `shoal tool bootstrap resume` (or a
        // restart) resumes it; a SIGTERM meanwhile stops the node.
        if joined.bootstrap {
            lifecycle.set_bootstrap_state(lifecycle::BootstrapState::InProgress);
            let report = loop {
                tracing::info!("bootstrapping: streaming this node's ranges from the current replicas");
                match lifecycle.bootstrap(config.consistent_rangemovement, joined.replacing).await {
                    Ok(done) => break Some(done),
                    Err(e) => {
                        tracing::error!(
                            "bootstrap failed: {e}. This node stays JOINING: `shoal tool bootstrap resume` (or a \
                             restart) resumes it, without streaming again what it already received"
                        );
                        lifecycle.set_bootstrap_state(lifecycle::BootstrapState::Failed(e));
                        tokio::select! {
                            () = lifecycle.bootstrap_resumed() => continue,
                            () = wait_for_signal() => break None,
                        }
                    }
                }
            };
            let Some(done) = report else {
                tracing::info!("shutting down while JOINING (the next start resumes the bootstrap)");
                joined.gossip.shutdown().await;
                let _ = stop_tx.send(true);
                let _ = admin_task.await;
                joined.transport.shutdown();
                return anyhow::Ok(());
            };
            tracing::info!(bytes = %done.get("bytes").unwrap_or(&Json::Null), seconds = %done.get("seconds").unwrap_or(&Json::Null), "bootstrap done");
            joined.finish_bootstrap(&storage).await?;
            lifecycle.set_bootstrap_state(lifecycle::BootstrapState::Completed(Some(done)));
        }

        let listener =
            tokio::net::TcpListener::bind(addr).await.with_context(|| format!("cannot listen for CQL on {addr}"))?;
        let tls = cql_server::tls::ServerTls::from_options(&config.client_encryption)
            .map_err(|e| anyhow::anyhow!("client_encryption_options: {e}"))?;
        let server_config = ServerConfig {
            max_frame_bytes: config.max_frame_bytes,
            stages: Stages::new(config.concurrent_reads, config.concurrent_writes),
            tls,
            limits: config.native_limits,
        };
        let server = tokio::spawn(cql_server::serve(listener, Arc::clone(&processor), server_config, native_stop_rx));

        // Storage's compression check (storage `tuning`): every 30 s, on a blocking thread.
        let tune_storage = Arc::clone(&storage);
        let tuner = tokio::spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_secs(30));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let storage = Arc::clone(&tune_storage);
                let _ = tokio::task::spawn_blocking(move || storage.tune_compression()).await;
            }
        });
        // Tombstone compactions (storage `purge`): a check every 5 s, on the blocking pool.
        let purge_storage = Arc::clone(&storage);
        let purger = tokio::spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_secs(5));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let storage = Arc::clone(&purge_storage);
                if let Ok(Err(e)) = tokio::task::spawn_blocking(move || storage.tombstone_compaction()).await {
                    tracing::warn!("tombstone compaction failed: {e}");
                }
            }
        });
        // Repair-based tombstone GC: each table's repaired horizon, every 2 s.
        let horizons = tokio::spawn(horizon::maintain(
            Arc::clone(&storage),
            Arc::clone(&joined.view),
            Arc::clone(&processor.schema),
            config.tombstone_gc_propagation_delay,
        ));
        // The automatic repair schedule.
        let auto_repair = config.auto_repair.map(|check| {
            tokio::spawn(auto_repair::run(
                Arc::clone(&lifecycle),
                Arc::clone(&storage),
                Arc::clone(&joined.view),
                Arc::clone(&processor.schema),
                check,
            ))
        });
        tracing::info!(
            %addr,
            cluster = %config.cluster_name,
            host_id = %processor.node.host_id,
            data_dir = %config.data_dir.display(),
            "Starting listening for CQL clients on {addr}"
        );
        eprintln!("shoal: node {} listening for CQL clients on {addr}", processor.node.host_id);
        wait_for_signal().await;
        tracing::info!("shutting down: announce it, stop accepting, sync the commit log and hints, flush memtables");
        joined.gossip.shutdown().await;
        let _ = stop_tx.send(true);
        native_stop.send_replace(true);
        let _ = server.await;
        let _ = admin_task.await;
        if let Some(task) = metrics_task {
            let _ = task.await;
        }
        tuner.abort();
        purger.abort();
        horizons.abort();
        if let Some(task) = auto_repair {
            task.abort();
        }
        if let Err(e) = joined.hints.sync() {
            tracing::warn!("cannot sync hints: {e}");
        }
        joined.transport.shutdown();
        drop(processor);
        anyhow::Ok(())
    });
    runtime.shutdown_timeout(std::time::Duration::from_secs(5));
    storage.shutdown().context("clean shutdown failed")?;
    eprintln!("shoal: stopped cleanly");
    result
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// Sets auth up (`Auth::setup`) now and, while the cluster cannot answer
/// yet, every few seconds in the background until it can.
async fn auth_setup(processor: Arc<Processor>, storage: Arc<storage::Storage>) {
    let attempt = |p: Arc<Processor>, s: Arc<storage::Storage>| async move {
        match tokio::task::spawn_blocking(move || p.auth.setup(&*p, Some(&s))).await {
            Ok(outcome) => outcome.map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        }
    };
    let Err(first) = attempt(Arc::clone(&processor), Arc::clone(&storage)).await else { return };
    tracing::info!("auth setup must wait: {first}; trying again in the background");
    tokio::spawn(async move {
        for n in 1u32.. {
            tokio::time::sleep(std::time::Duration::from_secs(2)).await;
            match attempt(Arc::clone(&processor), Arc::clone(&storage)).await {
                Ok(()) => return,
                Err(e) if n % 10 == 0 => tracing::info!("auth setup must still wait: {e}"),
                Err(_) => {}
            }
        }
    });
}
