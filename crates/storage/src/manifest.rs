//! The schema manifest (`schema.json` in the data directory): the keyspaces,
//! each table's column family, node-local metadata and the storage format,
//! written atomically (temp file, fsync, rename, fsync of the directory).
//!
//! Invariant: data of another storage format is refused at open (there is no
//! in-place conversion), except format 2, which format 3 only extends (a new
//! cell kind): it is read as is and recorded as format 3 from then on. A
//! format-2 build refuses the directory afterwards, as it must once counter
//! cells may be in it.

use std::collections::BTreeMap;
use std::path::Path;

use types::schema::KeyspaceDef;
use uuid::Uuid;

use crate::StorageError;

/// The on-disk layout this build reads and writes: 1 stored a key per cell,
/// 2 packs each row into one key (`packed`, ADR 0002), 3 adds counter cells
/// (`cell::KIND_COUNTER`), which a format-2 build would take for garbage.
pub const STORAGE_FORMAT: u32 = 3;

/// The format `STORAGE_FORMAT` extends without changing anything it holds.
const FORMAT_WITHOUT_COUNTERS: u32 = 2;

#[derive(serde::Serialize, serde::Deserialize, Default)]
pub(crate) struct Manifest {
    /// `STORAGE_FORMAT` of the data; manifests before the field are format 1.
    #[serde(default = "format_one")]
    pub(crate) format: u32,
    pub(crate) keyspaces: Vec<KeyspaceDef>,
    /// Table id -> column family name (the name changes on TRUNCATE).
    pub(crate) column_families: BTreeMap<Uuid, String>,
    /// Node-local metadata (host id, tokens, ...) owned by the node.
    pub(crate) local: BTreeMap<String, String>,
    /// Table id -> the first commit log seq written after its last TRUNCATE:
    /// replay skips the table's older records. Cleared once the log has been
    /// replayed and flushed at open.
    #[serde(default)]
    pub(crate) truncated: BTreeMap<Uuid, u64>,
}

pub(crate) const MANIFEST: &str = "schema.json";

pub(crate) fn format_one() -> u32 {
    1
}

/// The manifest, refusing data written in another storage format (there is
/// no in-place conversion; an empty data directory of any format is fine).
pub(crate) fn read_manifest(dir: &Path) -> Result<Manifest, StorageError> {
    let path = dir.join(MANIFEST);
    let mut manifest: Manifest = match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map_err(|e| StorageError::Invalid(format!("cannot read {}: {e}", path.display())))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Manifest::default(),
        Err(e) => return Err(e.into()),
    };
    if manifest.format != STORAGE_FORMAT
        && manifest.format != FORMAT_WITHOUT_COUNTERS
        && !manifest.column_families.is_empty()
    {
        return Err(StorageError::Invalid(format!(
            "{} holds tables in storage format {}; this build reads format {STORAGE_FORMAT} only \
             (move the data directory away, or read it with the build that wrote it)",
            dir.display(),
            manifest.format
        )));
    }
    manifest.format = STORAGE_FORMAT;
    Ok(manifest)
}

pub(crate) fn write_manifest(dir: &Path, manifest: &Manifest) -> Result<(), StorageError> {
    let bytes = serde_json::to_vec_pretty(manifest).map_err(|e| StorageError::Invalid(e.to_string()))?;
    write_durably(dir, MANIFEST, &bytes)?;
    Ok(())
}

/// Replaces `dir/name` with `bytes` whole or not at all, durably: written to
/// a temporary file, synced, renamed over it, and the directory synced.
pub(crate) fn write_durably(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = dir.join(format!("{name}.tmp"));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, dir.join(name))?;
    std::fs::File::open(dir)?.sync_all()
}
