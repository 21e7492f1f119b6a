//! Snapshots, restore and load: the admin API's `POST /v1/snapshot`,
//! `GET /v1/snapshots`, `POST /v1/clearsnapshot`, `POST /v1/restore` and
//! `POST /v1/load`, `POST /v1/backup` (`shoal tool snapshot`,
//! `listsnapshots`, `clearsnapshot`, `restore`, `load`, `backup`).
//!
//! A snapshot is storage's (`storage::snapshot`): per keyspace, hard links
//! of the tables' sorted files, with each table's `schema.cql` (its CREATE
//! TYPE and CREATE TABLE statements) written here. Restore and load read a
//! snapshot's raw cells (`storage::SnapshotReader`) and write each
//! partition to its replicas under the ring now through the coordinator
//! (`Coordinator::load_partition`), so the original write timestamps, TTLs
//! and tombstones are kept and any cluster size or token layout works; what
//! a replica already holds that is newer wins, as for any write.
//!
//! Invariants:
//! - Reading and writing run on the blocking pool and the runtime, never
//!   holding a schema lock (schema snapshots are taken per table).
//! - Error wording follows nodetool's (`Keyspace ks does not exist`,
//!   `Unknown keyspace/cf pair (ks.t)`, `Snapshot t already exists.`).
//! - Restore re-creates a dropped table (and its keyspace and types) from
//!   the snapshot's schema; load needs the table to exist, as
//!   sstableloader does. Either maps columns by name (`remap_columns`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cql_server::describe::{create_table_cql, create_type_cql};
use cql_server::schema::Schema;
use serde_json::{json, Value as Json};
use types::schema::{KeyspaceDef, TableDef};
use types::Consistency;

use crate::admin::{AdminState, Request, Response};

type Answer = Result<Json, Response>;

/// Partitions read from a snapshot per page.
const PAGE: usize = 256;
/// How long restore waits for the other live nodes to take a re-created table.
const SCHEMA_WAIT: Duration = Duration::from_secs(30);

fn params<'a>(request: &'a Request, name: &str) -> Vec<&'a str> {
    request.query.iter().filter(|(k, v)| k == name && !v.is_empty()).map(|(_, v)| v.as_str()).collect()
}

fn param<'a>(request: &'a Request, name: &str) -> Option<&'a str> {
    params(request, name).into_iter().next()
}

fn now_millis() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// Milliseconds since the epoch as Java's `Instant.toString` writes them
/// (listsnapshots' Creation time): `2024-01-15T10:30:00.123Z`.
fn instant(ms: i64) -> String {
    let (days, rem) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let (y, mo, d) = types::literal::civil_from_days(days);
    let (h, mi, s, milli) = (rem / 3_600_000, rem / 60_000 % 60, rem / 1000 % 60, rem % 1000);
    if milli == 0 {
        format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
    } else {
        format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{milli:03}Z")
    }
}

/// A table's `schema.cql`: its keyspace's types, the table, then its indexes.
pub fn schema_cql(ks: &KeyspaceDef, table: &TableDef) -> String {
    let mut out = String::new();
    for udt in ks.types.values() {
        out.push_str(&create_type_cql(udt).replacen("CREATE TYPE ", "CREATE TYPE IF NOT EXISTS ", 1));
        out.push_str("\n\n");
    }
    out.push_str(&create_table_cql(table).replacen("CREATE TABLE ", "CREATE TABLE IF NOT EXISTS ", 1));
    out.push('\n');
    for statement in index_statements(table) {
        out.push('\n');
        out.push_str(&statement.replacen(" INDEX ", " INDEX IF NOT EXISTS ", 1));
        out.push('\n');
    }
    out
}

/// The CREATE INDEX statements of a table's indexes, by creation order.
fn index_statements(table: &TableDef) -> Vec<String> {
    table.indexes.iter().map(|i| cql_server::index::create_statement(&table.keyspace, &table.name, i)).collect()
}

/// `POST /v1/snapshot?tag=&keyspace=...&table=&skip_flush=true`: nodetool
/// snapshot. Every user keyspace, some keyspaces, or one table of one.
pub async fn snapshot(request: &Request, state: &AdminState) -> Answer {
    let tag = param(request, "tag").map(str::to_string).unwrap_or_else(|| now_millis().to_string());
    let keyspaces = params(request, "keyspace");
    let table = param(request, "table");
    let skip_flush = param(request, "skip_flush") == Some("true");
    if tag.is_empty() {
        return Err(Response::error(400, "You must supply a snapshot name."));
    }
    if tag.contains('/') {
        return Err(Response::error(400, "Snapshot name cannot contain /"));
    }
    if !storage::snapshot::valid_tag(&tag) {
        return Err(Response::error(400, format!("Snapshot name cannot start with a dot: {tag}")));
    }
    let schema = state.schema.snapshot();
    let chosen: Vec<KeyspaceDef> = match (keyspaces.as_slice(), table) {
        (_, Some(_)) if keyspaces.len() != 1 => {
            return Err(Response::error(
                400,
                "When specifying the table for a snapshot, you must specify one and only one keyspace",
            ))
        }
        ([], None) => {
            schema.keyspaces.values().filter(|k| !Schema::is_system(&k.name)).map(|k| (**k).clone()).collect()
        }
        (names, table) => {
            let mut out = Vec::new();
            for name in names {
                let ks = schema
                    .keyspace(name)
                    .ok_or_else(|| Response::error(404, format!("Keyspace {name} does not exist")))?;
                if Schema::is_local(&ks.name) {
                    continue;
                }
                let mut ks = (**ks).clone();
                if let Some(t) = table {
                    let def = ks
                        .tables
                        .get(t)
                        .cloned()
                        .ok_or_else(|| Response::error(404, format!("Unknown keyspace/cf pair ({name}.{t})")))?;
                    ks.tables = [(t.to_string(), def)].into_iter().collect();
                }
                out.push(ks);
            }
            out
        }
    };
    if state.storage.snapshot_exists(&tag) {
        return Err(Response::error(400, format!("Snapshot {tag} already exists.")));
    }
    let storage = Arc::clone(&state.storage);
    let created_at = now_millis();
    let started = Instant::now();
    let tag_for_task = tag.clone();
    let taken = tokio::task::spawn_blocking(move || -> Result<Vec<Json>, storage::StorageError> {
        let mut out = Vec::new();
        for ks in chosen.iter().filter(|k| !k.tables.is_empty()) {
            let extra: Vec<(PathBuf, String)> = ks
                .tables
                .values()
                .map(|t| (PathBuf::from(format!("{}-{}", t.name, t.id.simple())).join("schema.cql"), schema_cql(ks, t)))
                .collect();
            let dir = storage.take_snapshot(&tag_for_task, ks, skip_flush, created_at, &extra)?;
            out.push(json!({
                "keyspace": ks.name,
                "tables": ks.tables.keys().collect::<Vec<_>>(),
                "directory": dir.display().to_string(),
            }));
        }
        Ok(out)
    })
    .await;
    let keyspaces_taken = match taken {
        Ok(Ok(k)) => k,
        Ok(Err(e)) => return Err(Response::error(500, format!("Error during taking a snapshot: {e}"))),
        Err(e) => return Err(Response::error(500, format!("Error during taking a snapshot: {e}"))),
    };
    Ok(json!({
        "tag": tag,
        "skip_flush": skip_flush,
        "keyspaces": keyspaces_taken,
        "created_at": created_at,
        "millis": started.elapsed().as_millis() as u64,
    }))
}

/// `GET /v1/snapshots`: nodetool listsnapshots (read on the blocking pool: it walks directories).
pub async fn list(state: &AdminState) -> Answer {
    let storage = Arc::clone(&state.storage);
    let entries = tokio::task::spawn_blocking(move || storage.list_snapshots())
        .await
        .map_err(|e| Response::error(500, format!("Error during list snapshot: {e}")))?
        .map_err(|e| Response::error(500, format!("Error during list snapshot: {e}")))?;
    let total: u64 = entries.iter().map(|e| e.true_size).sum();
    let snapshots: Vec<Json> = entries
        .iter()
        .map(|e| {
            json!({
                "tag": e.tag,
                "keyspace": e.keyspace,
                "table": e.table,
                "true_size": e.true_size,
                "size_on_disk": e.size_on_disk,
                "created_at": e.created_at,
                "creation_time": instant(e.created_at),
            })
        })
        .collect();
    Ok(json!({ "snapshots": snapshots, "total_true_size": total }))
}

/// `POST /v1/clearsnapshot?tag=|all=true&keyspace=...`: nodetool clearsnapshot.
pub async fn clear(request: &Request, state: &AdminState) -> Answer {
    let tag = param(request, "tag").map(str::to_string);
    let all = param(request, "all") == Some("true");
    match (&tag, all) {
        (None, false) => return Err(Response::error(400, "Specify snapshot name or --all")),
        (Some(_), true) => return Err(Response::error(400, "Specify only one of snapshot name or --all")),
        _ => {}
    }
    let keyspaces: Vec<String> = params(request, "keyspace").into_iter().map(str::to_string).collect();
    let storage = Arc::clone(&state.storage);
    let (tag2, keyspaces2) = (tag.clone(), keyspaces.clone());
    let removed = tokio::task::spawn_blocking(move || storage.clear_snapshots(tag2.as_deref(), &keyspaces2))
        .await
        .map_err(|e| Response::error(500, format!("Error during clearing snapshots: {e}")))?
        .map_err(|e| Response::error(500, format!("Error during clearing snapshots: {e}")))?;
    Ok(json!({ "tag": tag, "keyspaces": keyspaces, "removed": removed }))
}

fn consistency(request: &Request) -> Result<Consistency, Response> {
    match param(request, "consistency") {
        None => Ok(Consistency::One),
        Some(name) => Consistency::from_name(&name.to_ascii_uppercase())
            .ok_or_else(|| Response::error(400, format!("Unknown consistency level: {name}"))),
    }
}

/// `POST /v1/restore?tag=&keyspace=&table=&consistency=`: the rows of this
/// node's snapshot `tag` (of a keyspace, or one table of it) written back
/// into the cluster; a table dropped since is re-created from the snapshot.
pub async fn restore(request: &Request, state: &AdminState) -> Answer {
    let Some(tag) = param(request, "tag") else {
        return Err(Response::error(400, "You must supply a snapshot name."));
    };
    let Some(keyspace) = param(request, "keyspace") else {
        return Err(Response::error(400, "restore needs a keyspace"));
    };
    let table = param(request, "table");
    let cl = consistency(request)?;
    let dir = state.storage.snapshots_dir().join(tag).join(keyspace);
    if !state.storage.snapshot_exists(tag) {
        return Err(Response::error(404, format!("Snapshot {tag} does not exist")));
    }
    if !dir.join(storage::snapshot::SNAPSHOT_MANIFEST).is_file() {
        return Err(Response::error(404, format!("Snapshot {tag} holds no keyspace {keyspace}")));
    }
    let manifest = storage::snapshot::read_manifest(&dir).map_err(|e| Response::error(500, e.to_string()))?;
    if let Some(t) = table {
        if !manifest.keyspace.tables.contains_key(t) {
            return Err(Response::error(404, format!("Unknown keyspace/cf pair ({keyspace}.{t}) in snapshot {tag}")));
        }
    }
    // Re-create what was dropped, from the snapshot's schema.
    let created = recreate(state, &manifest.keyspace, table).await?;
    if !created.is_empty() {
        wait_for_schema_agreement(state).await;
    }
    let mut report = load_dir(state, &dir, table, cl).await?;
    if let Some(obj) = report.as_object_mut() {
        obj.insert("tag".into(), json!(tag));
        obj.insert("created".into(), json!(created));
    }
    Ok(report)
}

/// `POST /v1/backup?dir=&tag=&keyspace=...`: this node's snapshot `tag`
/// (taken now unless it exists; every user keyspace, or those given)
/// copied to `dir/<host id>/<tag>/`, every file synced: a backup the node's
/// disk can be lost without. `load` (with `create_schema`) restores it into
/// any cluster.
pub async fn backup(request: &Request, state: &AdminState) -> Answer {
    let Some(dir) = param(request, "dir") else {
        return Err(Response::error(400, "backup needs the directory to copy to"));
    };
    let s3 = match crate::s3::parse_url(dir) {
        Some(place) => Some((place, crate::s3::S3::from_env().map_err(|e| Response::error(400, e))?)),
        None if dir.starts_with("s3:") => {
            return Err(Response::error(400, format!("not an s3://BUCKET/PREFIX url: {dir}")))
        }
        None => None,
    };
    let dir = PathBuf::from(dir);
    if s3.is_none() && !dir.is_absolute() {
        return Err(Response::error(400, format!("the backup directory must be absolute: {}", dir.display())));
    }
    let tag = param(request, "tag").map(str::to_string).unwrap_or_else(|| now_millis().to_string());
    let took = !state.storage.snapshot_exists(&tag);
    if took {
        let mut query = vec![("tag".to_string(), tag.clone())];
        query.extend(params(request, "keyspace").into_iter().map(|k| ("keyspace".to_string(), k.to_string())));
        let snap = Request { method: "POST".into(), path: "/v1/snapshot".into(), query };
        snapshot(&snap, state).await?;
    }
    let host = state.view.snapshot().local.to_string();
    let from = state.storage.snapshots_dir().join(&tag);
    let started = Instant::now();
    if let Some(((bucket, prefix), store)) = s3 {
        let base = [prefix.as_str(), host.as_str(), tag.as_str()]
            .iter()
            .filter(|p| !p.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join("/");
        let place = format!("s3://{bucket}/{base}");
        let base2 = base.clone();
        let (files, bytes) = tokio::task::spawn_blocking(move || upload(&store, &bucket, &base2, &from))
            .await
            .map_err(|e| Response::error(500, e.to_string()))?
            .map_err(|e| Response::error(500, format!("Error during backup: {e}")))?;
        return Ok(json!({
            "tag": tag,
            "snapshot_taken": took,
            "directory": place,
            "files": files,
            "bytes": bytes,
            "millis": started.elapsed().as_millis() as u64,
        }));
    }
    let to = dir.join(&host).join(&tag);
    let to2 = to.clone();
    let (files, bytes) = tokio::task::spawn_blocking(move || storage::snapshot::copy_tree(&from, &to2))
        .await
        .map_err(|e| Response::error(500, e.to_string()))?
        .map_err(|e| Response::error(500, format!("Error during backup: {e}")))?;
    Ok(json!({
        "tag": tag,
        "snapshot_taken": took,
        "directory": to.display().to_string(),
        "files": files,
        "bytes": bytes,
        "millis": started.elapsed().as_millis() as u64,
    }))
}

/// `POST /v1/load?dir=&consistency=`: sstableloader's job for a snapshot
/// directory (a tag's, or one keyspace's under it) readable by this node:
/// every row to its replicas in this cluster, whose tables must exist.
pub async fn load(request: &Request, state: &AdminState) -> Answer {
    let Some(dir) = param(request, "dir") else {
        return Err(Response::error(400, "load needs the snapshot directory"));
    };
    let cl = consistency(request)?;
    // From an S3 store: the objects are fetched into a scratch directory first.
    let fetched = match crate::s3::parse_url(dir) {
        Some((bucket, prefix)) => {
            let store = crate::s3::S3::from_env().map_err(|e| Response::error(400, e))?;
            let scratch = state.storage.snapshots_dir().join(format!(".s3-{}-{}", std::process::id(), now_millis()));
            let scratch2 = scratch.clone();
            let got = tokio::task::spawn_blocking(move || download(&store, &bucket, &prefix, &scratch2)).await;
            match got {
                Ok(Ok(())) => Some(scratch),
                Ok(Err(e)) => {
                    let _ = std::fs::remove_dir_all(&scratch);
                    return Err(Response::error(500, format!("cannot fetch {dir}: {e}")));
                }
                Err(e) => return Err(Response::error(500, e.to_string())),
            }
        }
        None => None,
    };
    let result = load_from(request, state, fetched.clone().unwrap_or_else(|| PathBuf::from(dir)), cl).await;
    if let Some(scratch) = fetched {
        let _ = std::fs::remove_dir_all(scratch);
    }
    let mut report = result?;
    if let Some(obj) = report.as_object_mut() {
        obj.insert("directory".into(), json!(dir));
    }
    Ok(report)
}

async fn load_from(request: &Request, state: &AdminState, dir: PathBuf, cl: Consistency) -> Answer {
    let dirs =
        storage::snapshot::keyspace_dirs(&dir).map_err(|e| Response::error(404, format!("{}: {e}", dir.display())))?;
    if dirs.is_empty() {
        return Err(Response::error(
            404,
            format!("{} holds no snapshot (no {})", dir.display(), storage::snapshot::SNAPSHOT_MANIFEST),
        ));
    }
    let create_schema = param(request, "create_schema") == Some("true");
    let mut reports = Vec::new();
    for d in &dirs {
        if create_schema {
            let manifest = storage::snapshot::read_manifest(d).map_err(|e| Response::error(500, e.to_string()))?;
            if !recreate(state, &manifest.keyspace, None).await?.is_empty() {
                wait_for_schema_agreement(state).await;
            }
        }
        reports.push(load_dir(state, d, None, cl).await?);
    }
    Ok(json!({ "directory": dir.display().to_string(), "keyspaces": reports }))
}

/// Uploads every file under `from` to `bucket` at `base/<relative path>`,
/// refusing a place that already holds objects. Returns (files, bytes).
fn upload(store: &crate::s3::S3, bucket: &str, base: &str, from: &Path) -> Result<(u64, u64), String> {
    let part = crate::s3::part_bytes()?;
    if !store.list(bucket, &format!("{base}/"))?.is_empty() {
        return Err(format!("s3://{bucket}/{base} already exists"));
    }
    let mut stack = vec![from.to_path_buf()];
    let (mut files, mut bytes) = (0, 0);
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).map_err(|e| e.to_string())?.filter_map(Result::ok) {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let relative = path.strip_prefix(from).map_err(|e| e.to_string())?.to_string_lossy().to_string();
            bytes += store.put_file(bucket, &format!("{base}/{relative}"), &path, part)?;
            files += 1;
        }
    }
    Ok((files, bytes))
}

/// Fetches every object under `prefix` into `to`, at its key's path below the prefix.
fn download(store: &crate::s3::S3, bucket: &str, prefix: &str, to: &Path) -> Result<(), String> {
    let part = crate::s3::part_bytes()?;
    let listed = store.list(bucket, prefix)?;
    if listed.is_empty() {
        return Err(format!("no objects under s3://{bucket}/{prefix}"));
    }
    for key in listed {
        let relative = key.strip_prefix(prefix).unwrap_or(&key).trim_start_matches('/');
        if relative.is_empty() || relative.split('/').any(|part| part.is_empty() || part == "." || part == "..") {
            return Err(format!("refusing the object key {key}"));
        }
        let path = to.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
        }
        store.get_to_file(bucket, &key, &path, part)?;
    }
    Ok(())
}

/// Creates what of `ks` (the snapshot's; only `table` when given) the
/// schema lacks: the keyspace, its types, the tables. Returns the tables made.
async fn recreate(state: &AdminState, ks: &KeyspaceDef, table: Option<&str>) -> Result<Vec<String>, Response> {
    let schema = state.schema.snapshot();
    let mut statements = Vec::new();
    let existing = schema.keyspace(&ks.name).cloned();
    if existing.is_none() {
        statements.push(cql_server::describe::create_keyspace_cql(ks));
    }
    for udt in ks.types.values() {
        if existing.as_ref().is_none_or(|e| !e.types.contains_key(&udt.name)) {
            statements.push(create_type_cql(udt));
        }
    }
    let mut created = Vec::new();
    for t in ks.tables.values().filter(|t| table.is_none_or(|n| n == t.name)) {
        if existing.as_ref().is_none_or(|e| !e.tables.contains_key(&t.name)) {
            statements.push(create_table_cql(t));
            // Its indexes before its rows: the load then writes their entries as it writes the rows.
            statements.extend(index_statements(t));
            created.push(format!("{}.{}", ks.name, t.name));
        }
    }
    if statements.is_empty() {
        return Ok(created);
    }
    let service = Arc::clone(&state.schema);
    let announce = Arc::clone(&state.schema_changed);
    tokio::task::spawn_blocking(move || -> Result<(), String> {
        for text in &statements {
            let statement = cql::parse(text).map_err(|e| format!("{text}: {e}"))?;
            let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0);
            cql_server::ddl::execute(&service, None, &statement, now).map_err(|e| format!("{text}: {e}"))?;
        }
        announce();
        Ok(())
    })
    .await
    .map_err(|e| Response::error(500, e.to_string()))?
    .map_err(|e| Response::error(500, format!("cannot re-create the snapshot's schema: {e}")))?;
    Ok(created)
}

/// Waits (bounded) until every live node gossips this node's schema version.
async fn wait_for_schema_agreement(state: &AdminState) {
    let deadline = Instant::now() + SCHEMA_WAIT;
    while Instant::now() < deadline {
        let mine = state.schema.snapshot().version.to_string();
        let view = state.view.snapshot();
        let local = view.local().map(|e| e.address());
        let agreed = view
            .schema_versions()
            .into_iter()
            .all(|(version, addrs)| version == mine || addrs.iter().all(|a| Some(*a) == local));
        if agreed {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Reads one keyspace snapshot (`table` alone when given) and writes every
/// partition to its replicas; the report counts partitions per table.
async fn load_dir(state: &AdminState, dir: &Path, table: Option<&str>, cl: Consistency) -> Answer {
    let started = Instant::now();
    let (live, dir_owned) = (Arc::clone(&state.storage), dir.to_path_buf());
    let reader = tokio::task::spawn_blocking(move || live.open_snapshot(&dir_owned))
        .await
        .map_err(|e| Response::error(500, e.to_string()))?
        .map_err(|e| Response::error(500, format!("cannot open the snapshot {}: {e}", dir.display())))?;
    let reader = Arc::new(reader);
    let ks_name = reader.manifest.keyspace.name.clone();
    let mut tables = Vec::new();
    for snap_table in reader.manifest.tables.clone() {
        if table.is_some_and(|t| t != snap_table.table) {
            continue;
        }
        let schema = state.schema.snapshot();
        let ks = schema
            .keyspace(&ks_name)
            .cloned()
            .ok_or_else(|| Response::error(404, format!("Unknown keyspace '{ks_name}'")))?;
        let target = ks.tables.get(&snap_table.table).cloned().ok_or_else(|| {
            Response::error(404, format!("Unknown keyspace/cf pair ({ks_name}.{})", snap_table.table))
        })?;
        let Some(source) = reader.manifest.keyspace.tables.get(&snap_table.table).cloned() else { continue };
        // Pages of partitions come from a blocking thread through a channel.
        let (tx, mut rx) = tokio::sync::mpsc::channel::<storage::RawPartition>(PAGE);
        let (reader2, id) = (Arc::clone(&reader), snap_table.id);
        let producer = tokio::task::spawn_blocking(move || {
            reader2.partitions(&id, PAGE, |p| {
                tx.blocking_send(p).map_err(|_| storage::StorageError::Invalid("load stopped".into()))
            })
        });
        let (mut partitions, mut cells, mut bytes) = (0u64, 0u64, 0u64);
        let mut failure = None;
        while let Some(p) = rx.recv().await {
            let remapped = storage::snapshot::remap_columns(&source, &target, p.cells);
            if remapped.is_empty() {
                continue;
            }
            cells += remapped.len() as u64;
            bytes += remapped.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum::<u64>();
            if let Err(e) = state.lifecycle.coordinator.load_partition(&ks, target.id, p.token, &remapped, cl).await {
                failure = Some(e.to_string());
                break;
            }
            partitions += 1;
        }
        drop(rx);
        let read = producer.await.map_err(|e| Response::error(500, e.to_string()))?;
        if let Some(e) = failure {
            return Err(Response::error(500, format!("load of {ks_name}.{} failed: {e}", snap_table.table)));
        }
        read.map_err(|e| {
            Response::error(500, format!("cannot read the snapshot of {ks_name}.{}: {e}", snap_table.table))
        })?;
        tables.push(json!({
            "table": snap_table.table,
            "partitions": partitions,
            "cells": cells,
            "bytes": bytes,
        }));
    }
    let elapsed = started.elapsed();
    // The reader's scratch directory goes with its last reference.
    drop(reader);
    Ok(json!({
        "keyspace": ks_name,
        "directory": dir.display().to_string(),
        "consistency": cl.name(),
        "tables": tables,
        "millis": elapsed.as_millis() as u64,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_as_java_writes_them() {
        assert_eq!(instant(0), "1970-01-01T00:00:00Z");
        assert_eq!(instant(1_705_314_600_123), "2024-01-15T10:30:00.123Z");
    }
}
