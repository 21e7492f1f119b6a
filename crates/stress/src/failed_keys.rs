//! `--failed-keys FILE`: the keys of a run's operations that did not succeed,
//! written when the run ends, so that a test can check a later `verify`
//! against a `write` run: every key the verify lists must be one whose write
//! was never acknowledged.
//!
//! What counts (`counts`): an operation of any kind (write, read, verify read)
//! that failed for good, after its retries, in the warmup or the measured
//! phase; and a verify read that found the row missing or with wrong values.
//! A plain read (`read`, `mixed`) that finds no row is not a failure: it may
//! have drawn a key never written. Without `--keep-going` the run stops at its
//! first failure, which is recorded, as are the operations that were in flight
//! and failed while the run stopped.
//!
//! Invariants: only the failing path records (a lock and a push of the key
//! index), so an operation that succeeds costs one branch; the file holds each
//! key once, in ascending order, as the text the error messages print (the
//! key's 10 digits, `workload::key`), one per line, each line ended by a
//! newline; it is empty when nothing failed, and written whenever the option
//! is given and the command line was accepted, also when the run ends with an
//! error (`lib.rs`).

use std::path::Path;
use std::sync::Mutex;

use crate::stats::Outcome;
use crate::workload::{self, OpKind};

/// The key indexes of the failed operations, shared by the workers of all phases.
#[derive(Debug, Default)]
pub struct FailedKeys {
    indexes: Mutex<Vec<u64>>,
}

/// Whether an operation of `kind` that ended with `outcome` goes into the file.
pub fn counts(kind: OpKind, outcome: Outcome) -> bool {
    match outcome {
        Outcome::Failed => true,
        Outcome::Missing | Outcome::Mismatched => kind == OpKind::Verify,
        Outcome::Written | Outcome::Read | Outcome::Verified | Outcome::Applied | Outcome::NotApplied => false,
    }
}

impl FailedKeys {
    pub fn new() -> FailedKeys {
        FailedKeys::default()
    }

    /// Records that an operation on key `index` did not succeed.
    pub fn record(&self, index: u64) {
        self.indexes.lock().unwrap_or_else(|p| p.into_inner()).push(index);
    }

    /// The recorded keys as text, ascending, each once. Keys are fixed-width
    /// digits, so their order is their indexes' order.
    pub fn keys(&self) -> Vec<String> {
        let mut indexes = self.indexes.lock().unwrap_or_else(|p| p.into_inner()).clone();
        indexes.sort_unstable();
        indexes.dedup();
        indexes.into_iter().map(|index| String::from_utf8_lossy(&workload::key(index)).into_owned()).collect()
    }

    /// The file's content: one key per line, each line ended by a newline.
    pub fn text(&self) -> String {
        self.keys().into_iter().map(|key| key + "\n").collect()
    }

    /// Writes the file (replacing one that exists).
    pub fn write(&self, path: &Path) -> Result<(), String> {
        std::fs::write(path, self.text()).map_err(|e| format!("cannot write --failed-keys {}: {e}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_lists_each_failed_key_once_in_order() {
        let failed = FailedKeys::new();
        assert_eq!(failed.text(), "");
        for index in [42, 7, 1_000_000, 42, 9_999_999_999, 7] {
            failed.record(index);
        }
        assert_eq!(failed.keys(), ["0000000007", "0000000042", "0001000000", "9999999999"]);
        assert_eq!(failed.text(), "0000000007\n0000000042\n0001000000\n9999999999\n");
    }

    #[test]
    fn failures_and_bad_verifies_count_plain_misses_do_not() {
        for kind in [OpKind::Write, OpKind::Read, OpKind::Verify] {
            assert!(counts(kind, Outcome::Failed), "{kind:?}");
        }
        assert!(counts(OpKind::Verify, Outcome::Missing));
        assert!(counts(OpKind::Verify, Outcome::Mismatched));
        assert!(!counts(OpKind::Verify, Outcome::Verified));
        assert!(!counts(OpKind::Read, Outcome::Missing), "a read may draw a key never written");
        assert!(!counts(OpKind::Read, Outcome::Read));
        assert!(!counts(OpKind::Write, Outcome::Written));
    }

    /// Without a server nothing can fail for good mid-run here (the end-to-end
    /// runs against a real node live in `crates/shoal/tests/stress_cli.rs`), but
    /// a run that cannot connect still ends with exit code 1 and replaces the
    /// file with an empty one: no operation ran, so none failed.
    #[test]
    fn a_run_that_cannot_connect_still_writes_the_file() {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
            listener.local_addr().expect("its address").port()
        };
        let path = std::env::temp_dir().join(format!("shoal-stress-failed-keys-{}.txt", std::process::id()));
        std::fs::write(&path, "stale\n").expect("write the stale file");
        let args = format!(
            "write n=10 no-warmup keep-going -node 127.0.0.1 -port native={port} --failed-keys {}",
            path.display()
        );
        let code = crate::main(args.split_whitespace().map(str::to_string).collect());
        let text = std::fs::read_to_string(&path);
        let _ = std::fs::remove_file(&path);
        assert_eq!(code, std::process::ExitCode::from(crate::EXIT_FAILED));
        assert_eq!(text.expect("the file was written"), "");
    }
}
