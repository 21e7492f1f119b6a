//! Data-driven parser tests: every case in `tests/cases/*.test` must render
//! to its expected dump. Run with `UPDATE_EXPECT=1` to rewrite the
//! expectations from the current output (then review the diff).

mod common;

use std::fs;

use common::{case_files, read_cases, render};

#[test]
fn statement_cases() {
    let update = std::env::var_os("UPDATE_EXPECT").is_some();
    let mut failures = Vec::new();
    let mut total = 0;
    for path in case_files() {
        let (header, cases) = read_cases(&path);
        let mut rewritten = header;
        for case in &cases {
            total += 1;
            let actual = render(&case.input);
            if actual != case.expected {
                failures.push(format!(
                    "{}: case `{}`\n--- input\n{}\n--- expected\n{}\n--- actual\n{}\n",
                    path.display(),
                    case.name,
                    case.input,
                    case.expected,
                    actual
                ));
            }
            rewritten.push_str(&format!("### {}\n{}\n---\n{}\n\n", case.name, case.input, actual));
        }
        if update {
            fs::write(&path, rewritten.trim_end().to_string() + "\n").expect("writable case file");
        }
    }
    assert!(total > 0, "no cases found");
    if !update && !failures.is_empty() {
        panic!(
            "{} of {total} cases failed (UPDATE_EXPECT=1 rewrites them):\n\n{}",
            failures.len(),
            failures.join("\n")
        );
    }
}
