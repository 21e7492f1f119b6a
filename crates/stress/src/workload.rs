//! The workloads: cassandra-stress's `keyspace1.standard1` table
//! (`key blob PRIMARY KEY, "C0".."Cn-1" blob`), its keys, its values and the
//! key population; cassandra-stress's `counter1` (the same columns as
//! counters) for `counter_write`/`counter_read`; and Shoal's own `lwt1`
//! (`key blob PRIMARY KEY, v bigint, "C0".."Cn-1" blob`) for `lwt`.
//!
//! Invariants, all of which `verify` relies on:
//! - a key is the 10 ASCII digits of its index, zero-padded (`0000000042`);
//! - a value depends only on (seed, key index, column), never on the operation,
//!   the thread or the time, so any write of a key writes the same bytes;
//! - operation `i` of a run touches the same key index and (for `mixed` and
//!   `lwt`) does the same kind of operation on every run with the same seed,
//!   whatever the thread scheduling; a counter increment depends only on
//!   (seed, operation, column);
//! - `lwt`: insert operation `i` inserts key `lo + i % width` (a new key while
//!   `i` < width), and an update targets the key of an earlier insert
//!   operation of the same phase, so it meets an existing row unless that
//!   insert is still in flight or did not apply.
//!
//! The generators are our own (SplitMix64) so the bytes do not change when a
//! dependency's random number generator does.

use crate::settings::{AddDistribution, Command, LwtRatio, Population, Ratio, Schema, Settings, KEY_INDEX_LIMIT};

/// Length of every key.
pub const KEY_LEN: usize = 10;

/// The table name, as cassandra-stress names it.
pub const TABLE: &str = "standard1";

/// cassandra-stress's counter table (`counter_write`, `counter_read`).
pub const COUNTER_TABLE: &str = "counter1";

/// The `lwt` command's table (a Shoal extension: cassandra-stress has none).
pub const LWT_TABLE: &str = "lwt1";

/// The table a run of `command` uses.
pub fn table_of(command: Command) -> &'static str {
    match command {
        Command::CounterWrite | Command::CounterRead => COUNTER_TABLE,
        Command::Lwt => LWT_TABLE,
        Command::Write | Command::Read | Command::Mixed | Command::Verify => TABLE,
    }
}

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

/// What an operation does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    Write,
    Read,
    Verify,
    /// `counter_write`: add to every counter column of the key.
    CounterAdd,
    /// `counter_read`.
    CounterRead,
    /// `lwt`: `INSERT ... IF NOT EXISTS`.
    LwtInsert,
    /// `lwt`: `UPDATE ... IF v = ?`.
    LwtUpdate,
    /// `mixed` with `delete=`: `DELETE FROM ... WHERE key = ?`.
    Delete,
}

/// The kind of operation `op` of a run of `settings`.
pub fn op_kind(settings: &Settings, op: u64) -> OpKind {
    match settings.command {
        Command::Write => OpKind::Write,
        Command::Read => OpKind::Read,
        Command::Verify => OpKind::Verify,
        Command::Mixed => mixed_kind(settings.ratio, settings.seed, op),
        Command::CounterWrite => OpKind::CounterAdd,
        Command::CounterRead => OpKind::CounterRead,
        Command::Lwt => lwt_plan(settings.lwt_ratio, settings.seed, 0, op).0,
    }
}

/// Whether `lwt` operation `op` is an insert.
fn lwt_inserts(ratio: LwtRatio, seed: u64, op: u64) -> bool {
    let total = u64::from(ratio.insert) + u64::from(ratio.update);
    let r = mix64(mix64(seed ^ 0x5EED_0005) ^ op);
    ((u128::from(r) * u128::from(total)) >> 64) < u128::from(ratio.insert)
}

/// How far an update looks back for an earlier insert operation before it
/// becomes an insert itself (only reached with a tiny insert weight).
const LWT_LOOKBACK: u64 = 100_000;

/// `lwt` operation `op` of a phase whose operations start at `first`: its kind,
/// and the operation whose key it touches (itself for an insert; for an update
/// an earlier insert operation of the phase, drawn uniformly in `first..op` and
/// then stepped down to the nearest insert). An update with no insert before it
/// in the phase is an insert.
pub fn lwt_plan(ratio: LwtRatio, seed: u64, first: u64, op: u64) -> (OpKind, u64) {
    if op <= first || lwt_inserts(ratio, seed, op) {
        return (OpKind::LwtInsert, op);
    }
    let r = mix64(mix64(seed ^ 0x5EED_0006) ^ op);
    let start = first + ((u128::from(r) * u128::from(op - first)) >> 64) as u64;
    let mut j = start;
    while start - j < LWT_LOOKBACK {
        if lwt_inserts(ratio, seed, j) || j == first {
            return (OpKind::LwtUpdate, j);
        }
        j -= 1;
    }
    (OpKind::LwtInsert, op)
}

/// The key index of `lwt` operation `key_op` (see [`lwt_plan`]).
pub fn lwt_key_index(population: Population, key_op: u64) -> u64 {
    let (lo, hi) = population.range();
    lo + key_op % (hi - lo + 1)
}

/// The increment of counter column `column` in operation `op` (`add=`).
pub fn counter_increment(add: AddDistribution, seed: u64, op: u64, column: u32) -> i64 {
    match add {
        AddDistribution::Fixed(n) => n,
        AddDistribution::Uniform { lo, hi } => {
            let width = (i128::from(hi) - i128::from(lo) + 1) as u128;
            let r = mix64(mix64(seed ^ 0x5EED_0007) ^ op ^ (u64::from(column) << 56));
            (i128::from(lo) + ((u128::from(r) * width) >> 64) as i128) as i64
        }
    }
}

fn mixed_kind(ratio: Ratio, seed: u64, op: u64) -> OpKind {
    let total = u64::from(ratio.read) + u64::from(ratio.write) + u64::from(ratio.delete);
    let r = mix64(mix64(seed ^ 0x5EED_0004) ^ op);
    let draw = (u128::from(r) * u128::from(total)) >> 64;
    if draw < u128::from(ratio.read) {
        OpKind::Read
    } else if draw < u128::from(ratio.read) + u128::from(ratio.write) {
        OpKind::Write
    } else {
        OpKind::Delete
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
    let cql =
        format!("CREATE TABLE IF NOT EXISTS {}.{TABLE} (key blob PRIMARY KEY, {})", schema.keyspace, cols.join(", "));
    with_compaction(cql, schema)
}

/// `CREATE TABLE IF NOT EXISTS ks.counter1 (key blob PRIMARY KEY, "C0" counter, ...)`,
/// cassandra-stress's counter table.
pub fn create_counter_table_cql(schema: &Schema, columns: u32) -> String {
    let cols: Vec<String> = column_names(columns).into_iter().map(|c| format!("{c} counter")).collect();
    let cql = format!(
        "CREATE TABLE IF NOT EXISTS {}.{COUNTER_TABLE} (key blob PRIMARY KEY, {})",
        schema.keyspace,
        cols.join(", ")
    );
    with_compaction(cql, schema)
}

/// `CREATE TABLE IF NOT EXISTS ks.lwt1 (key blob PRIMARY KEY, v bigint, "C0" blob, ...)`.
pub fn create_lwt_table_cql(schema: &Schema, columns: u32) -> String {
    let cols: Vec<String> = column_names(columns).into_iter().map(|c| format!("{c} blob")).collect();
    let cql = format!(
        "CREATE TABLE IF NOT EXISTS {}.{LWT_TABLE} (key blob PRIMARY KEY, v bigint, {})",
        schema.keyspace,
        cols.join(", ")
    );
    with_compaction(cql, schema)
}

/// The keyspace and table a run of `settings` creates (only runs that write create them).
pub fn schema_cql(settings: &Settings) -> Vec<String> {
    let schema = &settings.schema;
    let table = match settings.command {
        Command::CounterWrite | Command::CounterRead => create_counter_table_cql(schema, settings.columns),
        Command::Lwt => create_lwt_table_cql(schema, settings.columns),
        Command::Write | Command::Read | Command::Mixed | Command::Verify => create_table_cql(schema, settings.columns),
    };
    vec![create_keyspace_cql(schema), table]
}

/// The statements a run prepares: `write` (INSERT, the counter UPDATE or the LWT
/// INSERT), `read` (SELECT) and `update` (the LWT UPDATE).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Statements {
    pub write: Option<String>,
    pub read: Option<String>,
    pub update: Option<String>,
    /// `mixed` with `delete=`: the DELETE of a key's row.
    pub delete: Option<String>,
}

impl Statements {
    pub fn of(settings: &Settings) -> Statements {
        let ks = settings.schema.keyspace.as_str();
        let n = settings.columns;
        let (write, read, update) = match settings.command {
            Command::Write => (Some(insert_cql(ks, n)), None, None),
            Command::Read | Command::Verify => (None, Some(select_cql(ks, n)), None),
            Command::Mixed => (Some(insert_cql(ks, n)), Some(select_cql(ks, n)), None),
            Command::CounterWrite => (Some(counter_update_cql(ks, n)), None, None),
            Command::CounterRead => (None, Some(counter_select_cql(ks, n)), None),
            Command::Lwt => (Some(lwt_insert_cql(ks, n)), None, Some(lwt_update_cql(ks))),
        };
        let delete = (settings.command == Command::Mixed && settings.ratio.delete > 0)
            .then(|| format!("DELETE FROM {ks}.{TABLE} WHERE key = ?"));
        Statements { write, read, update, delete }
    }
}

fn with_compaction(mut cql: String, schema: &Schema) -> String {
    if let Some((class, options)) = &schema.compaction {
        cql.push_str(&format!(" WITH compaction = {{'class': '{}'", class.replace('\'', "''")));
        for (k, v) in options {
            cql.push_str(&format!(", '{}': '{}'", k.replace('\'', "''"), v.replace('\'', "''")));
        }
        cql.push('}');
    }
    if let Some(gc_grace) = schema.gc_grace_seconds {
        cql.push_str(if schema.compaction.is_some() { " AND " } else { " WITH " });
        cql.push_str(&format!("gc_grace_seconds = {gc_grace}"));
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

/// cassandra-stress's counter add: `UPDATE ks.counter1 SET "C0" = "C0" + ?, ... WHERE key = ?`.
pub fn counter_update_cql(keyspace: &str, columns: u32) -> String {
    let sets: Vec<String> = column_names(columns).into_iter().map(|c| format!("{c} = {c} + ?")).collect();
    format!("UPDATE {keyspace}.{COUNTER_TABLE} SET {} WHERE key = ?", sets.join(", "))
}

pub fn counter_select_cql(keyspace: &str, columns: u32) -> String {
    format!("SELECT {} FROM {keyspace}.{COUNTER_TABLE} WHERE key = ?", column_names(columns).join(", "))
}

/// `lwt`'s insert of a new key (`v` starts at the bound 0).
pub fn lwt_insert_cql(keyspace: &str, columns: u32) -> String {
    let names = column_names(columns);
    let marks = vec!["?"; columns as usize + 2];
    format!(
        "INSERT INTO {keyspace}.{LWT_TABLE} (key, v, {}) VALUES ({}) IF NOT EXISTS",
        names.join(", "),
        marks.join(", ")
    )
}

/// `lwt`'s conditional update: binds the new `v`, the key, the expected `v`.
pub fn lwt_update_cql(keyspace: &str) -> String {
    format!("UPDATE {keyspace}.{LWT_TABLE} SET v = ? WHERE key = ? IF v = ?")
}

pub fn truncate_cql(keyspace: &str, table: &str) -> String {
    format!("TRUNCATE {keyspace}.{table}")
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
        let reads = (0..100_000)
            .filter(|&op| mixed_kind(Ratio { read: 9, write: 1, delete: 0 }, 1, op) == OpKind::Read)
            .count();
        assert!((89_000..91_000).contains(&reads), "{reads}");
        assert!((0..1000).all(|op| mixed_kind(Ratio { read: 0, write: 1, delete: 0 }, 1, op) == OpKind::Write));
        let deletes = (0..100_000)
            .filter(|&op| mixed_kind(Ratio { read: 0, write: 1, delete: 1 }, 1, op) == OpKind::Delete)
            .count();
        assert!((48_000..52_000).contains(&deletes), "{deletes}");
        assert!((0..1000).all(|op| mixed_kind(Ratio { read: 1, write: 1, delete: 0 }, 1, op) != OpKind::Delete));
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
        assert_eq!(
            create_counter_table_cql(&schema, 2),
            "CREATE TABLE IF NOT EXISTS keyspace1.counter1 (key blob PRIMARY KEY, \"C0\" counter, \"C1\" counter)"
        );
        assert_eq!(
            counter_update_cql("keyspace1", 2),
            "UPDATE keyspace1.counter1 SET \"C0\" = \"C0\" + ?, \"C1\" = \"C1\" + ? WHERE key = ?"
        );
        assert_eq!(counter_select_cql("keyspace1", 2), "SELECT \"C0\", \"C1\" FROM keyspace1.counter1 WHERE key = ?");
        assert_eq!(
            create_lwt_table_cql(&schema, 1),
            "CREATE TABLE IF NOT EXISTS keyspace1.lwt1 (key blob PRIMARY KEY, v bigint, \"C0\" blob)"
        );
        assert_eq!(
            lwt_insert_cql("keyspace1", 2),
            "INSERT INTO keyspace1.lwt1 (key, v, \"C0\", \"C1\") VALUES (?, ?, ?, ?) IF NOT EXISTS"
        );
        assert_eq!(lwt_update_cql("ks"), "UPDATE ks.lwt1 SET v = ? WHERE key = ? IF v = ?");
        assert_eq!(truncate_cql("ks", COUNTER_TABLE), "TRUNCATE ks.counter1");
        let mut settings = Settings::new(Command::Lwt);
        settings.columns = 1;
        assert_eq!(schema_cql(&settings)[1], create_lwt_table_cql(&settings.schema, 1));
        let st = Statements::of(&settings);
        assert_eq!((st.write.is_some(), st.read.is_none(), st.update.is_some()), (true, true, true));
        settings.command = Command::CounterRead;
        assert_eq!(
            Statements::of(&settings).read.as_deref(),
            Some("SELECT \"C0\" FROM keyspace1.counter1 WHERE key = ?")
        );
        assert_eq!(table_of(Command::CounterWrite), "counter1");
    }

    #[test]
    fn counter_increments_follow_add() {
        assert!((0..100).all(|op| counter_increment(AddDistribution::Fixed(3), 1, op, 0) == 3));
        let add = AddDistribution::Uniform { lo: -2, hi: 2 };
        let draws: Vec<i64> = (0..1000).map(|op| counter_increment(add, 1, op, op as u32 % 5)).collect();
        assert!(draws.iter().all(|d| (-2..=2).contains(d)));
        for v in -2..=2 {
            assert!(draws.contains(&v), "{v} never drawn");
        }
        assert_eq!(counter_increment(add, 1, 7, 2), counter_increment(add, 1, 7, 2));
    }

    #[test]
    fn lwt_updates_target_earlier_inserts() {
        let ratio = LwtRatio { insert: 1, update: 3 };
        let mut inserts = 0;
        for op in 0..20_000u64 {
            let (kind, key_op) = lwt_plan(ratio, 9, 0, op);
            match kind {
                OpKind::LwtInsert => {
                    assert_eq!(key_op, op, "an insert writes its own new key");
                    inserts += 1;
                }
                OpKind::LwtUpdate => {
                    assert!(key_op < op, "op {op} updates key of op {key_op}");
                    assert_eq!(lwt_plan(ratio, 9, 0, key_op), (OpKind::LwtInsert, key_op), "the target was an insert");
                }
                other => panic!("{other:?}"),
            }
        }
        assert!((4_500..5_500).contains(&inserts), "{inserts}");
        assert_eq!(lwt_plan(ratio, 9, 0, 0).0, OpKind::LwtInsert, "nothing to update before the first insert");
        // A phase after a warmup (whose rows `truncate=always` removed) updates only its own inserts.
        for op in 5_000..6_000u64 {
            let (kind, key_op) = lwt_plan(ratio, 9, 5_000, op);
            assert!(kind == OpKind::LwtInsert || (5_000..op).contains(&key_op), "op {op} -> {key_op}");
        }
        assert_eq!(lwt_plan(ratio, 9, 5_000, 5_000).0, OpKind::LwtInsert);
        let pop = Population::Seq { lo: 1, hi: 10 };
        assert_eq!((lwt_key_index(pop, 0), lwt_key_index(pop, 9), lwt_key_index(pop, 10)), (1, 10, 1));
    }
}
