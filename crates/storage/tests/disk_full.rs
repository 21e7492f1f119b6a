//! A full disk: the disk usage guardrail refuses writes that add data above
//! its fail threshold (deletions and reads go on), and a real ENOSPC (commit
//! log appends, memtable flushes) fails the write that meets it without
//! poisoning the engine or losing an acknowledged write; writes work again
//! once there is room, and everything acknowledged is there after a reopen.
//! The ENOSPC test runs on a small tmpfs it mounts (skipped where mounting is
//! not permitted).

#![allow(clippy::unwrap_used, reason = "an integration test: a failed unwrap names its line")]

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use storage::{ColumnData, CommitlogSync, DiskUsageConfig, DiskUsageState, Storage, StorageError};
use types::mutation::Mutation;
use uuid::Uuid;

/// `INSERT INTO kv (k, v) VALUES (pk, value)`.
fn kv(table: Uuid, pk: i32, value: &str) -> Mutation {
    let ts = now_micros();
    let mut m = mutation(table, pk);
    let mut r = row(Vec::new());
    r.marker = marker(ts);
    r.cells.push(live_cell(17, ts, text(value)));
    m.rows.push(r);
    m
}

/// `DELETE FROM kv WHERE k = pk`.
fn kv_delete(table: Uuid, pk: i32) -> Mutation {
    let mut m = mutation(table, pk);
    m.partition_deletion = Some(deletion(now_micros(), now_secs()));
    m
}

fn kv_get(storage: &Storage, table: Uuid, pk: i32) -> Option<String> {
    let p = storage.read_partition(&full_read(table, pk, now_secs())).unwrap()?;
    match p.rows.first()?.column(17)? {
        ColumnData::Simple(c) => Some(String::from_utf8(c.value.clone()).unwrap()),
        _ => None,
    }
}

fn value_of(pk: i32, len: usize) -> String {
    let mut v = format!("{pk}-");
    while v.len() < len {
        v.push_str("abcdefghijklmnopqrstuvwxyz0123456789");
    }
    v.truncate(len);
    v
}

fn open_kv(dir: &Path, table: Uuid, memtable_bytes: usize) -> Storage {
    let mut cfg = config(dir, CommitlogSync::Batch);
    cfg.memtable_bytes = memtable_bytes;
    cfg.memtable_space = 8 * memtable_bytes;
    open_kv_as(&cfg, table)
}

#[test]
fn the_guardrail_refuses_writes_over_the_fail_threshold() {
    let dir = tempfile::tempdir().unwrap();
    let table = Uuid::new_v4();
    // Memtables big enough not to flush here: the usage only grows.
    let storage = open_kv(dir.path(), table, 64 << 20);
    assert_eq!(storage.disk_usage(), DiskUsageState::NotAvailable, "off by default");
    assert_eq!(storage.disk_usage_percent(), None);
    // The disk counts as 32 MiB: over 16 MiB of files (RocksDB's MANIFEST
    // alone takes 4 MiB, preallocated) and memtables it is full.
    let cap = DiskUsageConfig { warn_percent: Some(25), fail_percent: Some(50), max_disk_bytes: Some(32 << 20) };
    storage.monitor_disk_usage(cap).unwrap();
    assert_eq!(storage.disk_usage(), DiskUsageState::Spacious);

    let value = value_of(0, 64 << 10);
    let mut acked = Vec::new();
    let mut stuffed = false;
    let deadline = Instant::now() + Duration::from_secs(30);
    let refusal = loop {
        assert!(Instant::now() < deadline, "no refusal after {} writes", acked.len());
        let pk = acked.len() as i32;
        match storage.apply(&[kv(table, pk, &value)]) {
            Ok(()) => acked.push(pk),
            Err(e) => break e,
        }
        stuffed |= storage.disk_usage() == DiskUsageState::Stuffed;
        // The monitor samples once a second: about 2.5 MiB a second (the log
        // and the memtable) crosses the band between the thresholds in 3.
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(matches!(refusal, StorageError::DiskUsageExceeded), "{refusal:?}");
    assert_eq!(
        refusal.to_string(),
        "Guardrail replica_disk_usage violated: Write request failed because disk usage exceeds failure threshold"
    );
    assert!(stuffed, "over the warn threshold before the fail threshold");
    assert_eq!(storage.disk_usage(), DiskUsageState::Full);
    assert!(storage.disk_usage_percent().unwrap() > 50);
    // Reads go on, and every acknowledged write is there.
    for &pk in &acked {
        assert_eq!(kv_get(&storage, table, pk).as_deref(), Some(value.as_str()), "key {pk}");
    }
    // Deletions pass (they add no data); a write of data in a batch with them does not.
    storage.apply(&[kv_delete(table, 0)]).unwrap();
    assert_eq!(kv_get(&storage, table, 0), None);
    let refused = storage.apply(&[kv_delete(table, 1), kv(table, 1, "x")]).unwrap_err();
    assert!(matches!(refused, StorageError::DiskUsageExceeded), "{refused:?}");
    assert!(kv_get(&storage, table, 1).is_some(), "a refused batch writes nothing");

    // More room (a bigger cap): sampled at once, writes are accepted again.
    storage.monitor_disk_usage(DiskUsageConfig { max_disk_bytes: Some(1 << 30), ..cap }).unwrap();
    assert_eq!(storage.disk_usage(), DiskUsageState::Spacious);
    storage.apply(&[kv(table, 100_000, "back")]).unwrap();
    // Off: nothing is refused whatever the usage.
    storage.monitor_disk_usage(DiskUsageConfig::default()).unwrap();
    assert_eq!(storage.disk_usage(), DiskUsageState::NotAvailable);
    storage.shutdown().unwrap();
}

#[test]
fn a_cap_over_the_disk_size_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open_kv(dir.path(), Uuid::new_v4(), 1 << 20);
    let cap = DiskUsageConfig { warn_percent: None, fail_percent: Some(90), max_disk_bytes: Some(u64::MAX) };
    let err = storage.monitor_disk_usage(cap).unwrap_err();
    assert!(err.to_string().contains("data_disk_usage_max_disk_size"), "{err}");
}

/// A tmpfs mounted for one test, unmounted when dropped.
struct Tmpfs {
    _dir: tempfile::TempDir,
    mnt: PathBuf,
}

impl Tmpfs {
    fn mount(mib: u64) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().unwrap();
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        let out =
            Command::new("mount").args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"]).arg(&mnt).output();
        match out {
            Ok(out) if out.status.success() => Some(Tmpfs { _dir: dir, mnt }),
            Ok(out) => {
                eprintln!("skipped: cannot mount a tmpfs: {}", String::from_utf8_lossy(&out.stderr).trim());
                None
            }
            Err(e) => {
                eprintln!("skipped: cannot run mount: {e}");
                None
            }
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let unmounted = Command::new("umount").arg(&self.mnt).status().is_ok_and(|s| s.success());
        if !unmounted {
            let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
        }
    }
}

/// Fills the file system of `dir` with a file `path`, then gives back
/// `leave` bytes of it.
fn pad(path: &Path, leave: u64) {
    let mut file = std::fs::File::create(path).unwrap();
    let chunk = vec![0x5au8; 1 << 20];
    let mut written = 0u64;
    loop {
        match file.write(&chunk) {
            Ok(0) => break,
            Ok(n) => written += n as u64,
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
                break;
            }
        }
    }
    file.set_len(written.saturating_sub(leave)).unwrap();
}

#[test]
fn enospc_fails_writes_alone_and_loses_nothing_acknowledged() {
    let Some(fs) = Tmpfs::mount(48) else { return };
    let data = fs.mnt.join("data");
    let table = Uuid::new_v4();
    let storage = open_kv(&data, table, 1 << 20);
    let padding = fs.mnt.join("padding");
    pad(&padding, 6 << 20);

    // Write until the disk is full: every write is acknowledged or fails
    // for want of space, and the node keeps going.
    let mut acked = Vec::new();
    let mut failures = 0;
    let mut pk = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while failures < 20 {
        assert!(Instant::now() < deadline, "{} writes acknowledged and {failures} failed in 60 s", acked.len());
        match storage.apply(&[kv(table, pk, &value_of(pk, 32 << 10))]) {
            Ok(()) => acked.push(pk),
            Err(e) => {
                assert!(e.is_out_of_space(), "a full disk fails a write for want of space, not with {e:?}");
                assert!(e.to_string().contains("disk is full"), "{e}");
                failures += 1;
            }
        }
        pk += 1;
    }
    assert!(acked.len() > 20, "only {} writes before the disk was full", acked.len());
    // Reads go on; deletions of what is there fail or pass, but never poison.
    for &k in &acked {
        assert_eq!(kv_get(&storage, table, k), Some(value_of(k, 32 << 10)), "key {k}");
    }
    if let Err(e) = storage.apply(&[kv_delete(table, -1)]) {
        assert!(e.is_out_of_space(), "{e:?}");
    }

    // Room again: writes are accepted again (at once, or once the flush
    // thread's next try, a second later at most, flushed the memtables
    // waiting), flushes work again.
    std::fs::remove_file(&padding).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    for k in pk..pk + 50 {
        while let Err(e) = storage.apply(&[kv(table, k, &value_of(k, 32 << 10))]) {
            assert!(e.is_out_of_space() && Instant::now() < deadline, "key {k} with room again: {e:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
        acked.push(k);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while let Err(e) = storage.flush(None) {
        assert!(Instant::now() < deadline, "flushes still fail with room again: {e}");
        std::thread::sleep(Duration::from_millis(200));
    }
    for &k in &acked {
        assert_eq!(kv_get(&storage, table, k), Some(value_of(k, 32 << 10)), "key {k} after the flush");
    }
    storage.apply(&[kv(table, 1_000_000, "after the flush")]).unwrap();
    acked.push(1_000_000);

    // A crash (no shutdown): the commit log, torn records and all, replays
    // every acknowledged write.
    drop(storage);
    let storage = open_kv(&data, table, 1 << 20);
    for &k in &acked {
        let want = if k == 1_000_000 { "after the flush".to_string() } else { value_of(k, 32 << 10) };
        assert_eq!(kv_get(&storage, table, k), Some(want), "key {k} after a reopen");
    }
    storage.shutdown().unwrap();
}
