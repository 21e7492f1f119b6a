//! Fuzz target: `cql::parse` and `cql::parse_script` must never panic, and a
//! successful parse must report a consistent set of bind markers.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(statement) = cql::parse(text) {
        let markers = statement.bind_markers();
        assert!(markers.iter().enumerate().all(|(i, m)| m.index == i));
    }
    let _ = cql::parse_script(text);
});
