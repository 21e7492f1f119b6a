//! A sorted file damaged on disk fails the reads that reach it: a scan, a
//! key scan, a stream export and a partition read answer an error naming
//! the corruption, never a shorter answer that looks whole.
//!
//! RocksDB's iterators stop at a block whose checksum does not match, and
//! look exactly as they do at the end of their range unless their status is
//! asked (`Cursor::status`).

#![allow(clippy::unwrap_used, reason = "an integration test: a failed unwrap names its line")]

mod common;

use std::path::{Path, PathBuf};

use common::*;
use storage::{Storage, StorageError};
use uuid::Uuid;

const ROWS: i32 = 20_000;

fn sorted_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "sst") {
                out.push(p);
            }
        }
    }
    out
}

fn is_corruption(e: &StorageError) -> bool {
    matches!(e, StorageError::Engine(m) if m.contains("Corruption") || m.contains("checksum"))
}

#[test]
fn a_damaged_file_fails_scans_exports_and_reads_instead_of_shortening_them() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), periodic());
    let table = Uuid::new_v4();
    {
        let storage: Storage = open_kv_as(&cfg, table);
        for pk in 0..ROWS {
            storage.apply(&[kv(table, pk, &format!("value {pk} {}", "x".repeat(100)), 1)]).unwrap();
        }
        storage.flush(None).unwrap();
        storage.compact(None).unwrap();
        assert_eq!(storage.scan_keys(&whole_ring(table)).unwrap().len(), ROWS as usize);
        storage.shutdown().unwrap();
    }
    // Flip a byte in the middle of the table's largest file: a data block.
    let files = sorted_files(dir.path());
    let file = files.iter().max_by_key(|p| std::fs::metadata(p).unwrap().len()).unwrap();
    let mut bytes = std::fs::read(file).unwrap();
    assert!(bytes.len() > 256 << 10, "{} holds {} bytes", file.display(), bytes.len());
    let at = bytes.len() / 3;
    bytes[at] ^= 0x5A;
    std::fs::write(file, &bytes).unwrap();

    let (storage, _) = open(&cfg);
    match storage.scan_keys(&whole_ring(table)) {
        Err(e) => assert!(is_corruption(&e), "{e}"),
        Ok(keys) => panic!("a key scan over a damaged file answered {} of {ROWS} keys", keys.len()),
    }
    match storage.scan(&whole_ring(table)) {
        Err(e) => assert!(is_corruption(&e), "{e}"),
        Ok(parts) => panic!("a scan over a damaged file answered {} of {ROWS} partitions", parts.len()),
    }
    let out = tempfile::tempdir().unwrap();
    match storage.export_ranges(&table, &[(0, 0)], out.path(), 64 << 20) {
        Err(e) => assert!(is_corruption(&e), "{e}"),
        Ok(files) => panic!(
            "an export of a damaged file answered {} of {ROWS} entries",
            files.iter().map(|f| f.entries).sum::<u64>()
        ),
    }
    // Partition reads: those in the damaged block fail, every other one is right.
    let (mut failed, mut right) = (0, 0);
    for pk in 0..ROWS {
        match storage.read_partition(&full_read(table, pk, now_secs())) {
            Err(e) => {
                assert!(is_corruption(&e), "pk {pk}: {e}");
                failed += 1;
            }
            Ok(_) => {
                assert_eq!(kv_get(&storage, table, pk), Some(format!("value {pk} {}", "x".repeat(100))), "pk {pk}");
                right += 1;
            }
        }
    }
    assert!(failed > 0 && right > 0, "{failed} reads failed, {right} were right");
}
