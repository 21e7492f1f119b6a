//! Tidy checks that run with `cargo test`: conventions the code review would
//! otherwise have to catch by eye.

use std::path::{Path, PathBuf};

fn workspace_root() -> PathBuf {
    // The directory cargo runs the test from: a binary reused from a checkout elsewhere that
    // shared the target directory would name that checkout at compile time.
    let manifest =
        std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
    manifest.join("../..")
}

fn rust_sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() {
            // Fuzz targets and build outputs are not library modules.
            if name == "fuzz" || name == "target" {
                continue;
            }
            rust_sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") && path.components().any(|c| c.as_os_str() == "src") {
            out.push(path);
        }
    }
}

/// Every crate and module opens with a `//!` comment saying its role and invariants.
#[test]
fn every_module_opens_with_a_doc_comment() {
    let mut files = Vec::new();
    rust_sources(&workspace_root().join("crates"), &mut files);
    assert!(files.len() > 20, "found only {} source files", files.len());
    let missing: Vec<String> = files
        .iter()
        .filter(|f| !std::fs::read_to_string(f).map(|t| t.starts_with("//!")).unwrap_or(false))
        .map(|f| f.display().to_string())
        .collect();
    assert!(missing.is_empty(), "modules without a leading //! comment:\n{}", missing.join("\n"));
}

/// No test hides behind #[ignore] or expects a panic (rust-analyzer's rule):
/// assert the current behaviour instead, with a FIXME.
#[test]
fn no_ignored_or_should_panic_tests() {
    let mut files = Vec::new();
    rust_sources(&workspace_root().join("crates"), &mut files);
    let mut tests_dirs = Vec::new();
    for entry in std::fs::read_dir(workspace_root().join("crates")).into_iter().flatten().flatten() {
        tests_dirs.push(entry.path().join("tests"));
    }
    for dir in tests_dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            if e.path().extension().is_some_and(|x| x == "rs") {
                files.push(e.path());
            }
        }
    }
    let this = file!().rsplit('/').next().unwrap_or_default().to_string();
    let offenders: Vec<String> = files
        .iter()
        .filter(|f| !f.ends_with(&this))
        .filter(|f| {
            let text = std::fs::read_to_string(f).unwrap_or_default();
            text.contains("#[ignore") || text.contains("#[should_panic")
        })
        .map(|f| f.display().to_string())
        .collect();
    assert!(offenders.is_empty(), "tests with #[ignore] or #[should_panic]:\n{}", offenders.join("\n"));
}

/// No tracked file names a path of the machine it was written on: not the
/// checkout's own absolute path, not the home directory (write them relative to
/// the repository or as `$HOME`). A clone elsewhere must work as this one does.
#[test]
fn no_file_names_this_machines_paths() {
    let root = std::fs::canonicalize(workspace_root()).expect("the workspace root exists");
    let listed = std::process::Command::new("git").arg("-C").arg(&root).args(["ls-files", "-z"]).output();
    // A source tarball without git has no tracked files to check.
    let Some(listed) = listed.ok().filter(|o| o.status.success()) else { return };
    let mut needles = vec![format!("{}/", root.display())];
    if let Some(home) = std::env::var_os("HOME").map(PathBuf::from).filter(|h| h.components().count() > 1) {
        needles.push(format!("{}/", home.display()));
    }
    let mut offenders = Vec::new();
    for name in listed.stdout.split(|b| *b == 0).filter(|n| !n.is_empty()) {
        let name = String::from_utf8_lossy(name).to_string();
        let Ok(bytes) = std::fs::read(root.join(&name)) else { continue };
        for needle in &needles {
            if bytes.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                offenders.push(format!("{name}: names {needle}"));
            }
        }
    }
    assert!(offenders.is_empty(), "files naming this machine's paths:\n{}", offenders.join("\n"));
}
