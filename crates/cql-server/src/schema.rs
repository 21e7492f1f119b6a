//! The schema service: the node's current schema as an immutable snapshot,
//! replaced atomically on every DDL and persisted through storage.
//!
//! Invariants:
//! - Readers take an `Arc<Schema>` snapshot and never see a half-applied change.
//! - The schema version is a digest of the user keyspaces' definitions, so two
//!   nodes with the same schema report the same `schema_version`.
//! - Built-in keyspaces (`system`, `system_schema`, ...) are virtual: they are
//!   part of every snapshot, never persisted and never stored in RocksDB.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};

use types::schema::KeyspaceDef;
use uuid::Uuid;

use crate::error::QueryError;
use crate::system;

/// A consistent view of all keyspaces.
#[derive(Debug)]
pub struct Schema {
    pub keyspaces: BTreeMap<String, Arc<KeyspaceDef>>,
    pub version: Uuid,
}

impl Schema {
    pub fn keyspace(&self, name: &str) -> Option<&Arc<KeyspaceDef>> {
        self.keyspaces.get(name)
    }

    pub fn is_system(name: &str) -> bool {
        system::SYSTEM_KEYSPACES.contains(&name)
    }

    /// User keyspaces only (what is persisted).
    pub fn user_keyspaces(&self) -> Vec<KeyspaceDef> {
        self.keyspaces.values().filter(|k| !Schema::is_system(&k.name)).map(|k| (**k).clone()).collect()
    }
}

pub struct SchemaService {
    current: RwLock<Arc<Schema>>,
    /// Microseconds of the last change (local DDL or one adopted from a
    /// peer); persisted. Between nodes the newer schema wins (ties: the
    /// larger version), so replicas of the schema converge.
    timestamp: std::sync::atomic::AtomicI64,
    /// Serializes DDL so each change applies to the latest schema.
    ddl: Mutex<()>,
    storage: Arc<storage::Storage>,
}

impl SchemaService {
    pub fn new(storage: Arc<storage::Storage>, user: Vec<KeyspaceDef>) -> SchemaService {
        let schema = build(user);
        let timestamp = storage.local_get("schema_timestamp").and_then(|t| t.parse().ok()).unwrap_or(0);
        SchemaService {
            current: RwLock::new(Arc::new(schema)),
            timestamp: timestamp.into(),
            ddl: Mutex::new(()),
            storage,
        }
    }

    /// When the current schema was made (microseconds since the epoch; 0 for none).
    pub fn timestamp(&self) -> i64 {
        self.timestamp.load(std::sync::atomic::Ordering::Acquire)
    }

    fn set_timestamp(&self, ts: i64) -> Result<(), QueryError> {
        self.timestamp.store(ts, std::sync::atomic::Ordering::Release);
        self.storage
            .local_set("schema_timestamp", &ts.to_string())
            .map_err(|e| QueryError::Server(format!("cannot persist schema: {e}")))
    }

    /// The user schema and its timestamp, for a peer.
    ///
    /// Taken under the DDL lock: a DDL swaps the snapshot and then the
    /// timestamp, and an export between the two would pair the old keyspaces
    /// with the new timestamp. A peer already holding the new schema could
    /// then adopt that torn export (same timestamp, larger version) and undo
    /// the DDL cluster-wide.
    pub fn export(&self) -> Vec<u8> {
        let _guard = self.ddl.lock().unwrap_or_else(|p| p.into_inner());
        let snapshot = self.snapshot();
        let doc = serde_json::json!({ "timestamp": self.timestamp(), "keyspaces": snapshot.user_keyspaces() });
        serde_json::to_vec(&doc).unwrap_or_default()
    }

    /// Adopts a peer's exported schema when it is newer than ours (ties:
    /// the larger version wins). True when ours changed.
    pub fn merge_export(&self, payload: &[u8]) -> Result<bool, QueryError> {
        #[derive(serde::Deserialize)]
        struct Export {
            timestamp: i64,
            keyspaces: Vec<KeyspaceDef>,
        }
        let theirs: Export =
            serde_json::from_slice(payload).map_err(|e| QueryError::Protocol(format!("bad schema from peer: {e}")))?;
        let _guard = self.ddl.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.snapshot();
        let their_version = digest(&theirs.keyspaces);
        if their_version == current.version || (theirs.timestamp, their_version) < (self.timestamp(), current.version) {
            return Ok(false);
        }
        self.storage
            .set_schema(&theirs.keyspaces)
            .map_err(|e| QueryError::Server(format!("cannot persist schema: {e}")))?;
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(build(theirs.keyspaces));
        self.set_timestamp(theirs.timestamp)?;
        Ok(true)
    }

    pub fn snapshot(&self) -> Arc<Schema> {
        Arc::clone(&self.current.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Applies a change to the user keyspaces: `change` gets the current user
    /// keyspaces and edits them (or refuses). The result is persisted before
    /// it becomes visible.
    pub fn update<T>(
        &self,
        change: impl FnOnce(&mut BTreeMap<String, KeyspaceDef>) -> Result<T, QueryError>,
    ) -> Result<T, QueryError> {
        let _guard = self.ddl.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.snapshot();
        let mut user: BTreeMap<String, KeyspaceDef> =
            current.user_keyspaces().into_iter().map(|k| (k.name.clone(), k)).collect();
        let out = change(&mut user)?;
        let list: Vec<KeyspaceDef> = user.into_values().collect();
        self.storage.set_schema(&list).map_err(|e| QueryError::Server(format!("cannot persist schema: {e}")))?;
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(build(list));
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros() as i64)
            .unwrap_or(0);
        self.set_timestamp(now.max(self.timestamp() + 1))?;
        Ok(out)
    }
}

fn build(user: Vec<KeyspaceDef>) -> Schema {
    let version = digest(&user);
    let mut keyspaces: BTreeMap<String, Arc<KeyspaceDef>> = BTreeMap::new();
    for ks in system::keyspaces() {
        keyspaces.insert(ks.name.clone(), Arc::new(ks));
    }
    for ks in user {
        keyspaces.insert(ks.name.clone(), Arc::new(ks));
    }
    Schema { keyspaces, version }
}

fn digest(user: &[KeyspaceDef]) -> Uuid {
    use md5::{Digest, Md5};
    let mut hasher = Md5::new();
    for ks in user {
        // serde_json of a BTreeMap-based structure is deterministic.
        if let Ok(bytes) = serde_json::to_vec(ks) {
            hasher.update(&bytes);
        }
    }
    let mut bytes: [u8; 16] = hasher.finalize().into();
    // Mark it as a name-based (version 3) UUID, as Cassandra's schema versions are.
    bytes[6] = (bytes[6] & 0x0f) | 0x30;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    Uuid::from_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use types::schema::{KeyspaceDef, Replication};

    use super::{digest, SchemaService};

    fn service(dir: &std::path::Path) -> SchemaService {
        let config = storage::StorageConfig {
            data_dir: dir.to_path_buf(),
            commitlog_sync: storage::CommitlogSync::Periodic { period: Duration::from_secs(10) },
            cache_bytes: 8 << 20,
            memtable_bytes: 8 << 20,
            memtable_space: 64 << 20,
            tombstone_horizon: i64::MAX,
        };
        let (storage, user) = storage::Storage::open(config).unwrap();
        SchemaService::new(Arc::new(storage), user)
    }

    fn add_keyspace(s: &SchemaService, name: &str) {
        s.update(|user| {
            let def = KeyspaceDef {
                name: name.to_string(),
                replication: Replication::Simple { replication_factor: 1 },
                durable_writes: true,
                tables: BTreeMap::new(),
                types: BTreeMap::new(),
            };
            user.insert(name.to_string(), def);
            Ok(())
        })
        .unwrap();
    }

    fn parse(export: &[u8]) -> (i64, uuid::Uuid) {
        let doc: serde_json::Value = serde_json::from_slice(export).unwrap();
        let keyspaces: Vec<KeyspaceDef> = serde_json::from_value(doc["keyspaces"].clone()).unwrap();
        (doc["timestamp"].as_i64().unwrap(), digest(&keyspaces))
    }

    #[test]
    fn an_export_never_pairs_one_schema_with_another_schemas_timestamp() {
        let dir = tempfile::tempdir().unwrap();
        let s = Arc::new(service(dir.path()));
        let done = Arc::new(AtomicBool::new(false));
        let ddl = {
            let (s, done) = (Arc::clone(&s), Arc::clone(&done));
            std::thread::spawn(move || {
                for i in 0..200 {
                    add_keyspace(&s, &format!("ks{i}"));
                }
                done.store(true, Ordering::Release);
            })
        };
        let mut seen: BTreeMap<i64, uuid::Uuid> = BTreeMap::new();
        while !done.load(Ordering::Acquire) {
            let (ts, version) = parse(&s.export());
            let first = *seen.entry(ts).or_insert(version);
            assert_eq!(first, version, "timestamp {ts} exported with two different schemas");
        }
        ddl.join().unwrap();
    }

    #[test]
    fn a_peer_adopts_the_newer_schema_and_ignores_an_older_one() {
        let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (a, b) = (service(a_dir.path()), service(b_dir.path()));
        add_keyspace(&a, "old");
        let old = a.export();
        add_keyspace(&a, "new");
        assert!(b.merge_export(&a.export()).unwrap());
        assert_eq!(b.snapshot().version, a.snapshot().version);
        assert!(!b.merge_export(&old).unwrap(), "an older schema must not replace a newer one");
        assert!(b.snapshot().keyspace("new").is_some());
        assert!(!b.merge_export(&a.export()).unwrap(), "the same schema again changes nothing");
    }
}
