#![allow(dead_code)] // each test binary uses a different part of this module
//! Reading the data-driven case files in `tests/cases/`.
//!
//! A file holds cases, each a `### name` line, the statement text, a `---`
//! line, and the expected dump (the AST's pretty Debug form followed by its
//! bind markers, or `error: <message>`). Lines before the first `###` are
//! comments.

use std::fs;
use std::path::{Path, PathBuf};

/// One case of a case file.
pub struct Case {
    pub name: String,
    pub input: String,
    pub expected: String,
}

pub fn cases_dir() -> PathBuf {
    // The directory cargo runs the test from: a binary reused from a checkout elsewhere that
    // shared the target directory would name that checkout at compile time.
    let manifest =
        std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
    manifest.join("tests").join("cases")
}

/// All case files, sorted by name.
pub fn case_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(cases_dir())
        .expect("tests/cases exists")
        .map(|entry| entry.expect("readable entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "test"))
        .collect();
    files.sort();
    files
}

/// Splits a case file into its header (comment lines) and cases.
pub fn read_cases(path: &Path) -> (String, Vec<Case>) {
    let text = fs::read_to_string(path).expect("readable case file");
    let mut header = String::new();
    let mut cases = Vec::new();
    let mut current: Option<Pending<'_>> = None;
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("### ") {
            if let Some(case) = current.take() {
                cases.push(finish(case));
            }
            current = Some((name.trim().to_string(), Vec::new(), None));
            continue;
        }
        match current.as_mut() {
            None => {
                header.push_str(line);
                header.push('\n');
            }
            Some((_, input, expected @ None)) => {
                if line == "---" {
                    *expected = Some(Vec::new());
                } else {
                    input.push(line);
                }
            }
            Some((_, _, Some(expected))) => expected.push(line),
        }
    }
    if let Some(case) = current.take() {
        cases.push(finish(case));
    }
    (header, cases)
}

/// A case being read: name, input lines, and expected lines once `---` was seen.
type Pending<'a> = (String, Vec<&'a str>, Option<Vec<&'a str>>);

fn finish((name, input, expected): Pending<'_>) -> Case {
    let expected = expected.unwrap_or_default().join("\n").trim_end().to_string();
    Case { name, input: input.join("\n"), expected }
}

/// What a statement text parses to, in the case-file form.
pub fn render(input: &str) -> String {
    match cql::parse(input) {
        Ok(statement) => {
            let markers = statement.bind_markers();
            let mut out = format!("{statement:#?}");
            if !markers.is_empty() {
                out.push_str("\nmarkers: ");
                let list: Vec<String> = markers
                    .iter()
                    .map(|m| match &m.name {
                        Some(name) => format!("{}:{name}", m.index),
                        None => format!("{}:?", m.index),
                    })
                    .collect();
                out.push_str(&list.join(", "));
            }
            out
        }
        Err(error) => format!("error: {error}"),
    }
}
