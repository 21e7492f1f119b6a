//! The standard workload: cassandra-stress's `keyspace1.standard1` table
//! (`key blob PRIMARY KEY, "C0".."Cn-1" blob`), its keys, its values and the
//! key population.
//!
//! Invariants, all of which `verify` relies on:
//! - a key is the 10 ASCII digits of its index, zero-padded (`0000000042`);
//! - a value depends only on (seed, key index, column), never on the operation,
//!   the thread or the time, so any write of a key writes the same bytes;
//! - operation `i` of a run touches the same key index and (for `mixed`) does
//!   the same kind of operation on every run with the same seed, whatever the
//!   thread scheduling.
//!
//! The generators are our own (SplitMix64) so the bytes do not change when a
//! dependency's random number generator does.

use crate::settings::{Population, Ratio, Schema, Settings, KEY_INDEX_LIMIT};

/// Length of every key.
pub const KEY_LEN: usize = 10;

/// The table name, as cassandra-stress names it.
pub const TABLE: &str = "standard1";

/// SplitMix64's mixing function: a bijection on u64 with good avalanche.
pub fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The key of index `index` (< 10^10).
pub fn key(index: u64) -> [u8; KEY_LEN] {
    debug_assert!(index < KEY_INDEX_LIMIT);
    let mut out = [b'0'; KEY_LEN];
    let mut rest = index;
    for slot in out.iter_mut().rev() {
        *slot = b'0' + (rest % 10) as u8;
        rest /= 10;
    }
    out
}

/// Fills `out` with the value of column `column` of key `index`.
pub fn fill_value(seed: u64, index: u64, column: u32, out: &mut [u8]) {
    let mut state = mix64(seed ^ mix64(index.wrapping_mul(0x100_0000_01B3) ^ (u64::from(column) << 48)));
    for chunk in out.chunks_mut(8) {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let word = mix64(state).to_le_bytes();
        chunk.copy_from_slice(&word[..chunk.len()]);
    }
}

/// All column values of key `index`, concatenated (`columns * size` bytes).
pub fn row_values(seed: u64, index: u64, columns: u32, size: u32, out: &mut Vec<u8>) {
    let size = size as usize;
    out.clear();
    out.resize(columns as usize * size, 0);
    for (column, chunk) in out.chunks_mut(size).enumerate() {
        fill_value(seed, index, column as u32, chunk);
    }
}

/// A uniform draw in [0, 1) that depends only on (seed, stream, i).
fn unit(seed: u64, stream: u64, i: u64) -> f64 {
    let bits = mix64(mix64(seed ^ stream) ^ i) >> 11;
    bits as f64 / (1u64 << 53) as f64
}

/// The key index operation `op` touches.
pub fn key_index(population: Population, seed: u64, op: u64) -> u64 {
    let (lo, hi) = population.range();
    let width = hi - lo + 1;
    let index = match population {
        Population::Seq { .. } => lo + op % width,
        Population::Uniform { .. } => {
            let r = mix64(mix64(seed ^ 0x5EED_0001) ^ op);
            lo + ((u128::from(r) * u128::from(width)) >> 64) as u64
        }
        Population::Gaussian { .. } => {
            // Box-Muller from two independent uniforms; mean mid-range, sd width/6.
            let u1 = unit(seed, 0x5EED_0002, op).max(f64::MIN_POSITIVE);
            let u2 = unit(seed, 0x5EED_0003, op);
            let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
            let mean = lo as f64 + (width as f64 - 1.0) / 2.0;
            let x = (mean + z * width as f64 / 6.0).round();
            x.clamp(lo as f64, hi as f64) as u64
        }
    };
    debug_assert!((lo..=hi).contains(&index));
    index
}

/// What a mixed operation does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    Write,
    Read,
    Verify,
}

/// The kind of operation `op` of a run of `settings`.
pub fn op_kind(settings: &Settings, op: u64) -> OpKind {
    use crate::settings::Command;
    match settings.command {
        Command::Write => OpKind::Write,
        Command::Read => OpKind::Read,
        Command::Verify => OpKind::Verify,
        Command::Mixed => mixed_kind(settings.ratio, settings.seed, op),
    }
}

fn mixed_kind(ratio: Ratio, seed: u64, op: u64) -> OpKind {
    let total = u64::from(ratio.read) + u64::from(ratio.write);
    let r = mix64(mix64(seed ^ 0x5EED_0004) ^ op);
    if ((u128::from(r) * u128::from(total)) >> 64) < u128::from(ratio.read) {
        OpKind::Read
    } else {
        OpKind::Write
    }
}

/// Column names: `"C0"`, `"C1"`, ... quoted (they are case-sensitive in CQL).
fn column_names(columns: u32) -> Vec<String> {
    (0..columns).map(|c| format!("\"C{c}\"")).collect()
}

/// `CREATE KEYSPACE IF NOT EXISTS ...`.
pub fn create_keyspace_cql(schema: &Schema) -> String {
    format!(
        "CREATE KEYSPACE IF NOT EXISTS {} WITH replication = {} AND durable_writes = {}",
        schema.keyspace,
        schema.replication.cql(),
        schema.durable_writes
    )
}

/// `CREATE TABLE IF NOT EXISTS ks.standard1 (...)`.
pub fn create_table_cql(schema: &Schema, columns: u32) -> String {
    let cols: Vec<String> = column_names(columns).into_iter().map(|c| format!("{c} blob")).collect();
    let mut cql =
        format!("CREATE TABLE IF NOT EXISTS {}.{TABLE} (key blob PRIMARY KEY, {})", schema.keyspace, cols.join(", "));
    if let Some((class, options)) = &schema.compaction {
        cql.push_str(&format!(" WITH compaction = {{'class': '{}'", class.replace('\'', "''")));
        for (k, v) in options {
            cql.push_str(&format!(", '{}': '{}'", k.replace('\'', "''"), v.replace('\'', "''")));
        }
        cql.push('}');
    }
    cql
}

pub fn insert_cql(keyspace: &str, columns: u32) -> String {
    let names = column_names(columns);
    let marks = vec!["?"; columns as usize + 1];
    format!("INSERT INTO {keyspace}.{TABLE} (key, {}) VALUES ({})", names.join(", "), marks.join(", "))
}

pub fn select_cql(keyspace: &str, columns: u32) -> String {
    format!("SELECT {} FROM {keyspace}.{TABLE} WHERE key = ?", column_names(columns).join(", "))
}

pub fn truncate_cql(keyspace: &str) -> String {
    format!("TRUNCATE {keyspace}.{TABLE}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_ten_zero_padded_digits() {
        assert_eq!(&key(0), b"0000000000");
        assert_eq!(&key(42), b"0000000042");
        assert_eq!(&key(9_999_999_999), b"9999999999");
    }

    #[test]
    fn values_are_deterministic_and_distinct() {
        let mut a = vec![0u8; 34];
        let mut b = vec![0u8; 34];
        fill_value(1, 7, 0, &mut a);
        fill_value(1, 7, 0, &mut b);
        assert_eq!(a, b);
        fill_value(1, 7, 1, &mut b);
        assert_ne!(a, b, "columns differ");
        fill_value(2, 7, 0, &mut b);
        assert_ne!(a, b, "seeds differ");
        fill_value(1, 8, 0, &mut b);
        assert_ne!(a, b, "keys differ");
        // Pin the bytes: verify of old runs depends on them never changing.
        let mut pinned = vec![0u8; 8];
        fill_value(1, 1, 0, &mut pinned);
        assert_eq!(pinned, PINNED_VALUE.to_vec());
    }

    const PINNED_VALUE: [u8; 8] = [25, 215, 182, 138, 184, 23, 188, 93];

    #[test]
    fn populations_stay_in_range_and_are_reproducible() {
        for pop in [
            Population::Seq { lo: 1, hi: 100 },
            Population::Uniform { lo: 1, hi: 100 },
            Population::Gaussian { lo: 1, hi: 100 },
        ] {
            let draws: Vec<u64> = (0..10_000).map(|op| key_index(pop, 9, op)).collect();
            assert!(draws.iter().all(|k| (1..=100).contains(k)), "{pop:?}");
            let again: Vec<u64> = (0..10_000).map(|op| key_index(pop, 9, op)).collect();
            assert_eq!(draws, again);
        }
        assert_eq!(key_index(Population::Seq { lo: 1, hi: 3 }, 0, 4), 2);
        // The gaussian clusters around the middle: about 68% within one sd (width/6).
        let near = (0..10_000)
            .filter(|&op| (34..=67).contains(&key_index(Population::Gaussian { lo: 1, hi: 100 }, 3, op)))
            .count();
        assert!((6_000..7_600).contains(&near), "{near}");
        // The uniform spreads: every key of a small range is hit.
        let mut seen = [false; 10];
        for op in 0..1_000 {
            seen[(key_index(Population::Uniform { lo: 0, hi: 9 }, 5, op)) as usize] = true;
        }
        assert!(seen.iter().all(|s| *s));
    }

    #[test]
    fn mixed_ratio_is_respected() {
        let reads = (0..100_000).filter(|&op| mixed_kind(Ratio { read: 9, write: 1 }, 1, op) == OpKind::Read).count();
        assert!((89_000..91_000).contains(&reads), "{reads}");
        assert!((0..1000).all(|op| mixed_kind(Ratio { read: 0, write: 1 }, 1, op) == OpKind::Write));
    }

    #[test]
    fn cql_text() {
        let schema = Settings::new(crate::settings::Command::Write).schema;
        assert_eq!(
            create_keyspace_cql(&schema),
            "CREATE KEYSPACE IF NOT EXISTS keyspace1 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1} AND durable_writes = true"
        );
        assert_eq!(
            create_table_cql(&schema, 2),
            "CREATE TABLE IF NOT EXISTS keyspace1.standard1 (key blob PRIMARY KEY, \"C0\" blob, \"C1\" blob)"
        );
        assert_eq!(
            insert_cql("keyspace1", 2),
            "INSERT INTO keyspace1.standard1 (key, \"C0\", \"C1\") VALUES (?, ?, ?)"
        );
        assert_eq!(select_cql("keyspace1", 2), "SELECT \"C0\", \"C1\" FROM keyspace1.standard1 WHERE key = ?");
    }
}
