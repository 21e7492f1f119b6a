//! Snapshots (`nodetool snapshot`): a keyspace's tables as they are on disk
//! now, kept as hard links, and read back for `restore` and `load`.
//!
//! Layout, one directory per tag and keyspace:
//!
//! ```text
//! <data dir>/snapshots/<tag>/<keyspace>/manifest.json        what is in it (`SnapshotManifest`)
//! <data dir>/snapshots/<tag>/<keyspace>/db/                  a RocksDB checkpoint holding only
//!                                                              the snapshot's tables' column families
//! <data dir>/snapshots/<tag>/<keyspace>/<table>-<id>/schema.cql   the CREATE statements (written by the node)
//! ```
//!
//! Taking one: the tables' memtables are flushed, RocksDB checkpoints the
//! whole database into a scratch directory (its sorted files hard-linked,
//! its small metadata files copied), the checkpoint is opened on its own
//! with compactions off and every column family not of the snapshot's
//! tables is dropped (which unlinks only the checkpoint's links), and the
//! scratch directory is renamed into place.
//!
//! Reading one (`SnapshotReader`): its files are hard-linked (copied across
//! file systems) into a scratch directory, which is opened as a storage of
//! its own (so a snapshot is read with the engine's own read path, merge
//! operator and all, and never written to); `partitions` yields every
//! partition's raw cells (`RawPartition`), tombstones, TTLs and write
//! timestamps as stored.
//!
//! Invariants:
//! - A snapshot directory never changes after its rename into place, and
//!   nothing under it is written by reading it.
//! - Hard links share the live files' data: a snapshot costs disk space only
//!   for the files compaction has since removed from the live tables
//!   (its "true size": files no live table holds any more).
//! - Scratch directories (`.tmp-*`, `.read-*`) are removed when done, and
//!   at the next snapshot operation if a crash left one.

#![deny(clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rocksdb::{ColumnFamilyDescriptor, Options};
use types::schema::{KeyspaceDef, TableDef};
use uuid::Uuid;

use crate::engine::{Db, Storage, StorageConfig};
use crate::read::{PartitionRead, ScanRange};
use crate::{keys, CommitlogSync, RawPartition, StorageError};

/// Where snapshots live, under the data directory.
pub const SNAPSHOTS_DIR: &str = "snapshots";
/// The description of one keyspace's snapshot.
pub const SNAPSHOT_MANIFEST: &str = "manifest.json";

/// What a keyspace's snapshot holds (`manifest.json`).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct SnapshotManifest {
    pub tag: String,
    /// When it was taken, milliseconds since the epoch.
    pub created_at: i64,
    /// The keyspace as it was, holding exactly the snapshot's tables.
    pub keyspace: KeyspaceDef,
    pub tables: Vec<SnapshotTable>,
}

/// One table of a snapshot.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct SnapshotTable {
    pub table: String,
    pub id: Uuid,
    /// Its column family in `db/`.
    pub column_family: String,
    /// Its sorted files in `db/`.
    pub files: Vec<String>,
}

/// One row of `nodetool listsnapshots`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotEntry {
    pub tag: String,
    pub keyspace: String,
    pub table: String,
    /// Bytes of its files the live tables no longer hold (Cassandra's true
    /// size: not deduplicated across snapshots).
    pub true_size: u64,
    /// Bytes of its files.
    pub size_on_disk: u64,
    pub created_at: i64,
}

/// Scratch directory names: unique within the process.
static SCRATCH: AtomicU64 = AtomicU64::new(0);

fn scratch_name(kind: &str) -> String {
    format!(".{kind}-{}-{}", std::process::id(), SCRATCH.fetch_add(1, Ordering::Relaxed))
}

/// Whether `tag` can name a snapshot directory.
pub fn valid_tag(tag: &str) -> bool {
    !tag.is_empty() && tag != "." && tag != ".." && !tag.starts_with('.') && !tag.contains('/') && !tag.contains('\0')
}

/// Reads a keyspace snapshot's manifest.
pub fn read_manifest(dir: &Path) -> Result<SnapshotManifest, StorageError> {
    let path = dir.join(SNAPSHOT_MANIFEST);
    let bytes = std::fs::read(&path)?;
    serde_json::from_slice(&bytes).map_err(|e| StorageError::Invalid(format!("cannot read {}: {e}", path.display())))
}

/// The keyspace snapshots under `dir`: `dir` itself when it is one (holds
/// a manifest), else those below it, up to three levels down (a tag's
/// directory, a backup's `HOST/TAG/KS`), in path order. Hidden directories
/// (scratch) are skipped.
pub fn keyspace_dirs(dir: &Path) -> Result<Vec<PathBuf>, StorageError> {
    let mut out = Vec::new();
    find_keyspace_dirs(dir, 3, &mut out)?;
    out.sort();
    Ok(out)
}

fn find_keyspace_dirs(dir: &Path, depth: u32, out: &mut Vec<PathBuf>) -> Result<(), StorageError> {
    if dir.join(SNAPSHOT_MANIFEST).is_file() {
        out.push(dir.to_path_buf());
        return Ok(());
    }
    if depth == 0 {
        return Ok(());
    }
    for entry in std::fs::read_dir(dir)?.filter_map(Result::ok) {
        if entry.file_name().to_string_lossy().starts_with('.') || !entry.path().is_dir() {
            continue;
        }
        find_keyspace_dirs(&entry.path(), depth - 1, out)?;
    }
    Ok(())
}

/// Copies the tree `from` into `to` (which must not exist), syncing every
/// file: a backup that owes nothing to the data directory's files.
/// Returns (files, bytes).
pub fn copy_tree(from: &Path, to: &Path) -> Result<(u64, u64), StorageError> {
    if to.exists() {
        return Err(StorageError::Invalid(format!("{} already exists", to.display())));
    }
    std::fs::create_dir_all(to)?;
    let (mut files, mut bytes) = (0, 0);
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            let (f, b) = copy_tree(&entry.path(), &target)?;
            files += f;
            bytes += b;
        } else {
            bytes += std::fs::copy(entry.path(), &target)?;
            std::fs::File::open(&target)?.sync_all()?;
            files += 1;
        }
    }
    sync_dir(to)?;
    Ok((files, bytes))
}

/// Links (or, across file systems, copies) every file of `from` into `to`.
fn link_tree(from: &Path, to: &Path) -> Result<(), StorageError> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            link_tree(&entry.path(), &target)?;
        } else if std::fs::hard_link(entry.path(), &target).is_err() {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

fn sync_dir(dir: &Path) -> Result<(), StorageError> {
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

impl Storage {
    /// The snapshots directory of this node.
    pub fn snapshots_dir(&self) -> PathBuf {
        self.config.data_dir.join(SNAPSHOTS_DIR)
    }

    /// Whether a snapshot `tag` exists (of any keyspace).
    pub fn snapshot_exists(&self, tag: &str) -> bool {
        self.snapshots_dir().join(tag).exists()
    }

    /// Snapshots `keyspace`'s tables (those it holds: pass a copy trimmed to
    /// the tables wanted) under `snapshots/<tag>/<keyspace>/`, flushing them
    /// first unless `skip_flush`. `extra` files (path relative to the
    /// keyspace's snapshot directory, content) are written beside the data
    /// before the snapshot appears. Returns its directory.
    pub fn take_snapshot(
        &self,
        tag: &str,
        keyspace: &KeyspaceDef,
        skip_flush: bool,
        created_at: i64,
        extra: &[(PathBuf, String)],
    ) -> Result<PathBuf, StorageError> {
        if !valid_tag(tag) {
            return Err(StorageError::Invalid(format!("Invalid snapshot name: {tag}")));
        }
        let root = self.snapshots_dir();
        let target = root.join(tag).join(&keyspace.name);
        if target.exists() {
            return Err(StorageError::Invalid(format!("Snapshot {tag} already exists.")));
        }
        let mut tables = Vec::new();
        for t in keyspace.tables.values() {
            let store = self.table(&t.id)?;
            if !skip_flush {
                self.flusher.flush_now(&store)?;
            }
            tables.push((t.clone(), store.cf_name.clone()));
        }
        std::fs::create_dir_all(&root)?;
        self.remove_scratch();
        let scratch = root.join(scratch_name("tmp"));
        std::fs::create_dir_all(&scratch)?;
        let made = (|| -> Result<(), StorageError> {
            let db_dir = scratch.join("db");
            rocksdb::checkpoint::Checkpoint::new(&*self.db)?.create_checkpoint(&db_dir)?;
            let keep: BTreeMap<&str, &TableDef> = tables.iter().map(|(t, cf)| (cf.as_str(), t)).collect();
            let files = trim_checkpoint(&db_dir, &keep)?;
            let manifest = SnapshotManifest {
                tag: tag.to_string(),
                created_at,
                keyspace: keyspace.clone(),
                tables: tables
                    .iter()
                    .map(|(t, cf)| SnapshotTable {
                        table: t.name.clone(),
                        id: t.id,
                        column_family: cf.clone(),
                        files: files.get(cf.as_str()).cloned().unwrap_or_default(),
                    })
                    .collect(),
            };
            let bytes = serde_json::to_vec_pretty(&manifest).map_err(|e| StorageError::Invalid(e.to_string()))?;
            std::fs::write(scratch.join(SNAPSHOT_MANIFEST), bytes)?;
            for (path, content) in extra {
                let path = scratch.join(path);
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                std::fs::write(&path, content)?;
            }
            sync_dir(&scratch)?;
            let parent = root.join(tag);
            std::fs::create_dir_all(&parent)?;
            std::fs::rename(&scratch, &target)?;
            sync_dir(&parent)?;
            Ok(())
        })();
        if let Err(e) = made {
            let _ = std::fs::remove_dir_all(&scratch);
            return Err(e);
        }
        Ok(target)
    }

    /// Opens the keyspace snapshot in `dir` for reading (`SnapshotReader`),
    /// its scratch directory beside this node's snapshots. The reader's
    /// storage sized the process's compaction pool for its own tables at
    /// open: this storage sizes it again for the live ones.
    pub fn open_snapshot(&self, dir: &Path) -> Result<SnapshotReader, StorageError> {
        let reader = SnapshotReader::open(dir, &self.snapshots_dir());
        self.flusher.tune_merges();
        reader
    }

    /// Removes scratch directories a crash left behind.
    fn remove_scratch(&self) {
        let Ok(entries) = std::fs::read_dir(self.snapshots_dir()) else { return };
        let mine = format!("-{}-", std::process::id());
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name().to_string_lossy().to_string();
            if (name.starts_with(".tmp-") || name.starts_with(".read-")) && !name.contains(&mine) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }

    /// Every table of every snapshot on this node, by tag, keyspace, table.
    pub fn list_snapshots(&self) -> Result<Vec<SnapshotEntry>, StorageError> {
        let root = self.snapshots_dir();
        let mut out = Vec::new();
        let Ok(tags) = std::fs::read_dir(&root) else { return Ok(out) };
        // A checkpoint keeps the live files' names (RocksDB never reuses a
        // file number): a snapshot's file is its own once no live file has its name.
        let live: std::collections::BTreeSet<String> =
            self.db.live_files()?.into_iter().map(|f| f.name.trim_start_matches('/').to_string()).collect();
        for tag in tags.filter_map(Result::ok) {
            if tag.file_name().to_string_lossy().starts_with('.') || !tag.path().is_dir() {
                continue;
            }
            for dir in keyspace_dirs(&tag.path())? {
                let Ok(manifest) = read_manifest(&dir) else { continue };
                for t in &manifest.tables {
                    let (mut true_size, mut size_on_disk) = (0u64, 0u64);
                    for file in &t.files {
                        let Ok(meta) = std::fs::metadata(dir.join("db").join(file)) else { continue };
                        size_on_disk += meta.len();
                        if !live.contains(file) {
                            true_size += meta.len();
                        }
                    }
                    out.push(SnapshotEntry {
                        tag: manifest.tag.clone(),
                        keyspace: manifest.keyspace.name.clone(),
                        table: t.table.clone(),
                        true_size,
                        size_on_disk,
                        created_at: manifest.created_at,
                    });
                }
            }
        }
        out.sort_by(|a, b| (&a.tag, &a.keyspace, &a.table).cmp(&(&b.tag, &b.keyspace, &b.table)));
        Ok(out)
    }

    /// Removes the snapshot `tag` (every tag when None) of `keyspaces`
    /// (every keyspace when empty). Returns the keyspace snapshots removed.
    pub fn clear_snapshots(&self, tag: Option<&str>, keyspaces: &[String]) -> Result<usize, StorageError> {
        let root = self.snapshots_dir();
        let mut removed = 0;
        let Ok(tags) = std::fs::read_dir(&root) else { return Ok(0) };
        for entry in tags.filter_map(Result::ok) {
            let name = entry.file_name().to_string_lossy().to_string();
            if name.starts_with('.') || tag.is_some_and(|t| t != name) || !entry.path().is_dir() {
                continue;
            }
            for dir in keyspace_dirs(&entry.path())? {
                let keyspace = dir.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
                if keyspaces.is_empty() || keyspaces.contains(&keyspace) {
                    std::fs::remove_dir_all(&dir)?;
                    removed += 1;
                }
            }
            // A tag directory left empty goes with its last keyspace.
            if std::fs::read_dir(entry.path()).is_ok_and(|mut d| d.next().is_none()) {
                std::fs::remove_dir(entry.path())?;
            }
        }
        Ok(removed)
    }
}

/// Opens a fresh checkpoint on its own (compactions off), drops every column
/// family but `default` and those in `keep`, and returns each kept column
/// family's sorted files.
fn trim_checkpoint(
    db_dir: &Path,
    keep: &BTreeMap<&str, &TableDef>,
) -> Result<BTreeMap<String, Vec<String>>, StorageError> {
    let names = Db::list_cf(&Options::default(), db_dir)?;
    let descriptors = names.iter().map(|name| {
        let mut opts = Options::default();
        opts.set_disable_auto_compactions(true);
        ColumnFamilyDescriptor::new(name, opts)
    });
    let mut db_opts = Options::default();
    db_opts.create_if_missing(false);
    let db = Db::open_cf_descriptors(&db_opts, db_dir, descriptors)?;
    for name in &names {
        if name != "default" && !keep.contains_key(name.as_str()) {
            db.drop_cf(name)?;
        }
    }
    let mut files: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for f in db.live_files()? {
        files.entry(f.column_family_name).or_default().push(f.name.trim_start_matches('/').to_string());
    }
    for list in files.values_mut() {
        list.sort();
    }
    drop(db);
    Ok(files)
}

/// A snapshot opened for reading (`restore`, `load`): a storage of its own
/// over links to the snapshot's files, in a scratch directory removed on drop.
pub struct SnapshotReader {
    storage: Option<Storage>,
    scratch: PathBuf,
    pub manifest: SnapshotManifest,
}

impl SnapshotReader {
    /// Opens the keyspace snapshot in `dir`, with its scratch directory under
    /// `scratch_parent` (on the snapshot's file system, links are free).
    pub fn open(dir: &Path, scratch_parent: &Path) -> Result<SnapshotReader, StorageError> {
        let manifest = read_manifest(dir)?;
        std::fs::create_dir_all(scratch_parent)?;
        let scratch = scratch_parent.join(scratch_name("read"));
        let opened = (|| -> Result<Storage, StorageError> {
            link_tree(&dir.join("db"), &scratch.join("db"))?;
            // The engine's manifest: the tables (their indexes left out:
            // the snapshot holds no index data) and their column families.
            let mut keyspace = manifest.keyspace.clone();
            for t in keyspace.tables.values_mut() {
                t.indexes.clear();
            }
            let engine = crate::manifest::Manifest {
                format: crate::STORAGE_FORMAT,
                keyspaces: vec![keyspace],
                column_families: manifest.tables.iter().map(|t| (t.id, t.column_family.clone())).collect(),
                local: BTreeMap::new(),
                truncated: BTreeMap::new(),
            };
            crate::manifest::write_manifest(&scratch, &engine)?;
            let (storage, _) = Storage::open(StorageConfig {
                data_dir: scratch.clone(),
                commitlog_sync: CommitlogSync::Periodic { period: std::time::Duration::from_secs(10) },
                cache_bytes: 8 << 20,
                row_cache_bytes: 0,
                memtable_bytes: 4 << 20,
                memtable_space: 16 << 20,
                // Nothing is purged while it is read.
                tombstone_horizon: 0,
            })?;
            Ok(storage)
        })();
        match opened {
            Ok(storage) => Ok(SnapshotReader { storage: Some(storage), scratch, manifest }),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&scratch);
                Err(e)
            }
        }
    }

    /// Calls `each` with every partition of `table` (its raw cells, in
    /// token order), in pages of `page` partitions. Returns the count.
    pub fn partitions(
        &self,
        table: &Uuid,
        page: usize,
        mut each: impl FnMut(RawPartition) -> Result<(), StorageError>,
    ) -> Result<u64, StorageError> {
        let Some(storage) = &self.storage else { return Ok(0) };
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i32).unwrap_or(0);
        let mut scan = ScanRange {
            table: *table,
            start_token: i64::MIN,
            after_key: None,
            end_token: i64::MAX,
            partition_limit: page.max(1),
            per_partition: PartitionRead::whole(*table, now),
            row_limit: usize::MAX,
        };
        let mut count = 0;
        loop {
            let keys = storage.scan_keys(&scan)?;
            for (token, key) in &keys {
                let read =
                    PartitionRead { token: *token, partition_key: key.clone(), ..PartitionRead::whole(*table, now) };
                each(storage.read_raw(&read)?)?;
                count += 1;
            }
            match keys.last() {
                Some((token, key)) if keys.len() >= scan.partition_limit => {
                    scan.start_token = *token;
                    scan.after_key = Some(key.clone());
                }
                _ => return Ok(count),
            }
        }
    }
}

impl Drop for SnapshotReader {
    fn drop(&mut self) {
        if let Some(storage) = self.storage.take() {
            let _ = storage.shutdown();
            drop(storage);
        }
        let _ = std::fs::remove_dir_all(&self.scratch);
    }
}

/// A snapshot's cells of `from` as cells of `to`, a table of the same
/// primary key (the same table re-created, or its copy in another cluster):
/// column ids are matched by name; cells of columns `to` lacks are left out.
pub fn remap_columns(from: &TableDef, to: &TableDef, cells: Vec<(Vec<u8>, Vec<u8>)>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let ids: BTreeMap<u16, Option<u16>> =
        from.columns.iter().map(|c| (c.id, to.column(&c.name).map(|d| d.id))).collect();
    if ids.iter().all(|(a, b)| Some(*a) == *b) {
        return cells;
    }
    let layout = keys::Layout::of(from);
    cells
        .into_iter()
        .filter_map(|(mut key, value)| {
            let (_, _, rest) = keys::split_partition(&key)?;
            let header = key.len() - rest.len();
            let (section, body) = rest.split_first()?;
            let offset = match *section {
                keys::SECTION_STATIC => header + 1,
                keys::SECTION_ROWS => header + 1 + keys::clustering_len(&layout, body)?,
                _ => return Some((key, value)),
            };
            let id = u16::from_be_bytes(*key.get(offset..)?.first_chunk::<2>()?);
            if id < keys::FIRST_USER_COLUMN_ID {
                return Some((key, value));
            }
            let new = (*ids.get(&id)?)?;
            key.get_mut(offset..offset + 2)?.copy_from_slice(&new.to_be_bytes());
            Some((key, value))
        })
        .collect()
}
