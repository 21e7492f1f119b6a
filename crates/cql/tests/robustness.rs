//! Bad input never panics the parser, nesting is bounded, and parsing time
//! does not blow up: every prefix of every case statement, seeded random
//! bytes and token soups, deep nesting, and large flat inputs.

mod common;

use common::{case_files, read_cases};

/// A small deterministic generator (xorshift64*), so failures replay.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Parses `text` both ways; a successful parse must number its markers 0..n.
fn check_no_panic(text: &str) {
    if let Ok(statement) = cql::parse(text) {
        let markers = statement.bind_markers();
        assert!(markers.iter().enumerate().all(|(i, m)| m.index == i), "bad marker numbering for {text:?}");
    }
    let _ = cql::parse_script(text);
}

fn case_inputs() -> Vec<String> {
    case_files().iter().flat_map(|path| read_cases(path).1).map(|case| case.input).collect()
}

#[test]
fn every_prefix_of_every_case_parses_without_panic() {
    let inputs = case_inputs();
    assert!(inputs.len() > 50);
    for input in &inputs {
        for (end, _) in input.char_indices() {
            check_no_panic(&input[..end]);
        }
        check_no_panic(input);
    }
}

#[test]
fn mutated_cases_parse_without_panic() {
    let inputs = case_inputs();
    let alphabet: Vec<char> = "()[]{}<>,;.:=+-*/%?!'\"$ \n0123456789abcxyzP_µ".chars().collect();
    let mut rng = Rng(0x5eed_0001);
    for _ in 0..20_000 {
        let input = &inputs[rng.below(inputs.len())];
        let mut chars: Vec<char> = input.chars().collect();
        for _ in 0..=rng.below(3) {
            let at = rng.below(chars.len() + 1);
            match rng.below(3) {
                0 if at < chars.len() => {
                    chars.remove(at);
                }
                1 if at < chars.len() => chars[at] = alphabet[rng.below(alphabet.len())],
                _ => chars.insert(at, alphabet[rng.below(alphabet.len())]),
            }
        }
        check_no_panic(&chars.into_iter().collect::<String>());
    }
}

#[test]
fn random_bytes_parse_without_panic() {
    let mut rng = Rng(0x5eed_0002);
    for _ in 0..20_000 {
        let len = rng.below(120);
        let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        check_no_panic(&String::from_utf8_lossy(&bytes));
    }
}

#[test]
fn random_token_soup_parses_without_panic() {
    const VOCABULARY: &[&str] = &[
        "SELECT",
        "INSERT",
        "UPDATE",
        "DELETE",
        "BEGIN",
        "BATCH",
        "APPLY",
        "UNLOGGED",
        "COUNTER",
        "CREATE",
        "ALTER",
        "DROP",
        "TABLE",
        "KEYSPACE",
        "TYPE",
        "DESCRIBE",
        "USE",
        "TRUNCATE",
        "FROM",
        "WHERE",
        "AND",
        "IN",
        "NOT",
        "IS",
        "NULL",
        "IF",
        "EXISTS",
        "SET",
        "VALUES",
        "INTO",
        "USING",
        "TTL",
        "TIMESTAMP",
        "LIMIT",
        "PER",
        "PARTITION",
        "ORDER",
        "BY",
        "GROUP",
        "ALLOW",
        "FILTERING",
        "JSON",
        "DISTINCT",
        "AS",
        "CAST",
        "COUNT",
        "WRITETIME",
        "TOKEN",
        "CONTAINS",
        "KEY",
        "LIKE",
        "WITH",
        "PRIMARY",
        "STATIC",
        "frozen",
        "list",
        "map",
        "tuple",
        "int",
        "text",
        "a",
        "b",
        "ks",
        "t",
        "\"Q\"",
        "1",
        "-2",
        "3.5",
        "'s'",
        "0xff",
        "1h",
        "P1D",
        "true",
        "NaN",
        "?",
        ":n",
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        "<",
        ">",
        ",",
        ";",
        ".",
        ":",
        "=",
        "+",
        "-",
        "*",
        "/",
        "%",
        "+=",
        "-=",
        "..",
        "!=",
        "<=",
    ];
    let mut rng = Rng(0x5eed_0003);
    for _ in 0..30_000 {
        let len = rng.below(40);
        let words: Vec<&str> = (0..len).map(|_| VOCABULARY[rng.below(VOCABULARY.len())]).collect();
        check_no_panic(&words.join(" "));
    }
}

fn expect_depth_error(text: &str) {
    match cql::parse(text) {
        Ok(statement) => panic!("deep input parsed: {statement:?}"),
        Err(error) => {
            assert!(error.message.contains("maximum nesting depth"), "unexpected error for deep input: {error}")
        }
    }
}

#[test]
fn deep_nesting_is_a_clean_error() {
    let n = 100_000;
    expect_depth_error(&format!("INSERT INTO t (a) VALUES ({}1{})", "[".repeat(n), "]".repeat(n)));
    expect_depth_error(&format!("INSERT INTO t (a) VALUES ({}1{})", "(".repeat(n), ")".repeat(n)));
    expect_depth_error(&format!("INSERT INTO t (a) VALUES ({}", "{a: ".repeat(n)));
    expect_depth_error(&format!("INSERT INTO t (a) VALUES ({}1)", "f(".repeat(n)));
    expect_depth_error(&format!("INSERT INTO t (a) VALUES ({}?)", "(int) ".repeat(n)));
    expect_depth_error(&format!("SELECT {}a FROM t", "- ".repeat(n)));
    expect_depth_error(&format!("SELECT {}a FROM t", "(".repeat(n)));
    expect_depth_error(&format!("SELECT {}a FROM t", "f(".repeat(n)));
    expect_depth_error(&format!("CREATE TABLE t (k {}int PRIMARY KEY)", "frozen<list<".repeat(n)));
    // Just under the limit parses.
    let ok = format!("INSERT INTO t (a) VALUES ({}1{})", "[".repeat(60), "]".repeat(60));
    assert!(cql::parse(&ok).is_ok());
}

#[test]
fn large_flat_inputs_parse() {
    let values: Vec<String> = (0..100_000).map(|i| i.to_string()).collect();
    let text = format!("SELECT * FROM t WHERE k IN ({})", values.join(", "));
    assert!(cql::parse(&text).is_ok());

    let relations: Vec<String> = (0..20_000).map(|i| format!("c{i} = ?")).collect();
    let text = format!("SELECT * FROM t WHERE {}", relations.join(" AND "));
    let statement = cql::parse(&text).expect("parses");
    assert_eq!(statement.bind_markers().len(), 20_000);

    let text = format!("INSERT INTO t (a) VALUES ('{}')", "x".repeat(1 << 20));
    assert!(cql::parse(&text).is_ok());

    let statements = "INSERT INTO t (a) VALUES (?);".repeat(10_000);
    let batch = format!("BEGIN BATCH {statements} APPLY BATCH");
    assert_eq!(cql::parse(&batch).expect("parses").bind_markers().len(), 10_000);
}

#[test]
fn nested_retries_stay_linear() {
    // Each `(` tries a type hint first; these shapes would take exponential
    // time if failed attempts were retried at every level.
    let depth = 60;
    let texts = [
        format!("INSERT INTO t (a) VALUES ({}now(){})", "(".repeat(depth), ")".repeat(depth)),
        format!("INSERT INTO t (a) VALUES ({}x", "(x, ".repeat(depth)),
        format!("INSERT INTO t (a) VALUES ({}1", "(a) ".repeat(depth)),
        format!("SELECT {}a{} FROM t", "(".repeat(depth), ")".repeat(depth)),
        format!("SELECT {}a FROM t", "(a) ".repeat(depth)),
    ];
    for _ in 0..200 {
        for text in &texts {
            check_no_panic(text);
        }
    }
}
