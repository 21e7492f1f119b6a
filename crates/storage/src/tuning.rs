//! How a table's CQL `compaction` and `compression` options become RocksDB
//! column-family options, and the compression check that stops compressing
//! data LZ4 cannot shrink.
//!
//! - `SizeTieredCompactionStrategy` (the default) is RocksDB's universal
//!   compaction with STCS's thresholds: `min_threshold` similar-sized runs
//!   are merged together (`min_merge_width`), at most `max_threshold`
//!   (`max_merge_width`). Merging four at a time instead of two rewrites each
//!   row about half as often as the data grows. `LeveledCompactionStrategy`
//!   is RocksDB's leveled compaction.
//! - A size-tiered table small enough to merge whole (`full_merge`: live
//!   data up to `FULL_MERGE_LEAVE` memtables) is kept in one sorted run:
//!   universal compaction's size-amplification trigger is set to 1%, so
//!   every merge of the table takes all its runs, and while every table is
//!   that small the node runs one merge at a time (`compaction_threads`, per
//!   8 cores).
//!   Runs flushed while a merge runs wait for the next one, so each merge
//!   takes what arrived during the last and each row is rewritten about
//!   once per merge instead of once per tier. In overwrites of 10 M keys
//!   (2.35 GB live), compaction threads' CPU per 10 s went from 0.66-1.03
//!   cores (10th-90th percentile) to 0.73-0.83, and the write rate from
//!   153.7 k/s (10 minutes) to 193.9 k/s (8 minutes); the same trigger with
//!   three merges at a time was no better than tiering (153.4 k/s), as
//!   merges of the newest runs raced the whole-table merge. Larger tables are tiered as before (size amplification 200%,
//!   up to three merges at a time): merging them whole would take long
//!   enough for new runs to pile up behind it.
//! - `compression`: `{'enabled': 'false'}` or an empty class (the old
//!   `sstable_compression: ''`) turns compression off; any compressor class
//!   is written as LZ4 (the only codec this build links). Only the
//!   bottommost level is compressed (RocksDB's `bottommost_compression`):
//!   it holds most of the data, while flushes and the merges of newer runs
//!   above it would pay LZ4 on rows that are merged again soon (in a long
//!   write run LZ4 was ~20% of compaction CPU).
//! - The compression check (`Storage::tune_compression`) compresses a sample
//!   of a recently written table's newest rows with LZ4. RocksDB stores a
//!   block uncompressed when LZ4 saves less than 1/8 of it
//!   (`max_compressed_bytes_per_kb` 896), after spending the CPU to try; when
//!   the sample saves less than that, the table's new files are written
//!   uncompressed, and compression comes back once a sample saves a fifth.
//!
//! Invariants:
//! - Compression only changes how new files are written: every block
//!   records its own compression, so switching it at any time never changes
//!   what is read.
//! - A table whose options turn compression off is never compressed.
//! - Compaction style (size-tiered or leveled) is fixed when the table's
//!   column family opens; the thresholds and compression change at once on
//!   ALTER TABLE.
//! - A column family opens tiered (merging it whole is chosen only once its
//!   live size is known), and the merge mode has hysteresis
//!   (`FULL_MERGE_ENTER` < `FULL_MERGE_LEAVE`), so a table near the bound
//!   does not switch at every flush.

use rocksdb::{DBCompactionStyle, DBCompressionType, Options, UniversalCompactOptions};
use types::schema::TableOptions;

/// The RocksDB shape of a table's options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shape {
    pub leveled: bool,
    pub min_merge_width: i32,
    pub max_merge_width: i32,
    /// The table asks for compression (it may still be skipped, see module docs).
    pub compress: bool,
}

/// A tiered table whose live data is at most this many memtables starts
/// being merged whole.
const FULL_MERGE_ENTER: u64 = 10;
/// A table merged whole goes back to tiers above this many memtables of live
/// data. Merged whole, a table gathers about 1.5 times its live size in new
/// runs while one merge runs (15 runs at 2.35 GB live, under a 2-core
/// machine's full write load): 12 memtables keep that well under the 36
/// runs at which its flushes wait (`flush::MAX_SORTED_RUNS_MERGED_WHOLE`).
const FULL_MERGE_LEAVE: u64 = 12;
/// Universal compaction's size-amplification trigger, in percent, of a
/// tiered table (RocksDB's default) and of one merged whole.
const TIERED_SIZE_AMPLIFICATION: u32 = 200;
const FULL_MERGE_SIZE_AMPLIFICATION: u32 = 1;

/// Samples saving less than this fraction are stored uncompressed (RocksDB's
/// own per-block rule: keep the compressed block only when it is at most
/// 7/8 of the raw one).
const OFF_ABOVE: f64 = 0.875;
/// Compression comes back when a sample compresses to this fraction or less.
const ON_BELOW: f64 = 0.8;
/// Bytes of keys and values compressed per check.
pub(crate) const SAMPLE_BYTES: usize = 64 << 10;
/// Smaller samples decide nothing.
pub(crate) const MIN_SAMPLE_BYTES: usize = 4 << 10;

pub(crate) fn shape(options: &TableOptions) -> Shape {
    let class = options.compaction.get("class").map(String::as_str).unwrap_or("");
    let threshold = |key: &str, default: i32| -> i32 {
        options.compaction.get(key).and_then(|v| v.trim().parse::<i32>().ok()).filter(|n| *n >= 2).unwrap_or(default)
    };
    let min_merge_width = threshold("min_threshold", 4);
    let max_merge_width = threshold("max_threshold", 32).max(min_merge_width);
    let enabled = options.compression.get("enabled").map(|v| !v.trim().eq_ignore_ascii_case("false")).unwrap_or(true);
    let class_set = options
        .compression
        .get("class")
        .or_else(|| options.compression.get("sstable_compression"))
        .map(|c| !c.trim().is_empty())
        .unwrap_or(true);
    Shape {
        leveled: class.ends_with("LeveledCompactionStrategy"),
        min_merge_width,
        max_merge_width,
        compress: enabled && class_set,
    }
}

/// Sets the compaction style, its thresholds and the compression on a new
/// column family's options.
pub(crate) fn configure(opts: &mut Options, shape: &Shape) {
    opts.set_compression_type(DBCompressionType::None);
    opts.set_bottommost_compression_type(if shape.compress { DBCompressionType::Lz4 } else { DBCompressionType::None });
    if shape.leveled {
        opts.set_compaction_style(DBCompactionStyle::Level);
        opts.set_level_compaction_dynamic_level_bytes(true);
    } else {
        opts.set_compaction_style(DBCompactionStyle::Universal);
        let mut universal = UniversalCompactOptions::default();
        universal.set_min_merge_width(shape.min_merge_width);
        universal.set_max_merge_width(shape.max_merge_width);
        universal.set_max_size_amplification_percent(TIERED_SIZE_AMPLIFICATION as i32);
        opts.set_universal_compaction_options(&universal);
    }
}

/// The mutable options (`SetOptions`) that bring an open column family to
/// `shape`, with compression as `compress` says, merged whole or tiered as
/// `full_merge` says.
pub(crate) fn mutable_options(shape: &Shape, compress: bool, full_merge: bool) -> Vec<(&'static str, String)> {
    let mut out = compression_options(compress);
    out.extend(merge_options(shape, full_merge));
    out
}

/// The universal compaction options of a size-tiered table (all of them at
/// once, so none falls back to its default); nothing for a leveled one.
pub(crate) fn merge_options(shape: &Shape, full_merge: bool) -> Option<(&'static str, String)> {
    let amplification = if full_merge { FULL_MERGE_SIZE_AMPLIFICATION } else { TIERED_SIZE_AMPLIFICATION };
    (!shape.leveled).then(|| {
        (
            "compaction_options_universal",
            format!(
                "{{min_merge_width={};max_merge_width={};max_size_amplification_percent={amplification}}}",
                shape.min_merge_width, shape.max_merge_width
            ),
        )
    })
}

/// Whether a size-tiered table with `live` bytes of data is merged whole,
/// given whether it is now (`FULL_MERGE_ENTER`, `FULL_MERGE_LEAVE`).
pub(crate) fn full_merge(live: u64, memtable_bytes: u64, now: bool) -> bool {
    let bound = if now { FULL_MERGE_LEAVE } else { FULL_MERGE_ENTER };
    live <= bound.saturating_mul(memtable_bytes)
}

/// Threads of RocksDB's compaction pool: one merge at a time per 8 cores
/// while every table is merged whole (a second merge would take the newest
/// runs away from the whole-table one and rewrite them twice), otherwise
/// `MAX_COMPACTION_THREADS`, so a long merge of big runs does not hold back
/// the merges of small new ones.
pub(crate) fn compaction_threads(all_full_merge: bool, cores: usize) -> i32 {
    if all_full_merge {
        (cores / 8).clamp(1, MAX_COMPACTION_THREADS as usize) as i32
    } else {
        MAX_COMPACTION_THREADS
    }
}

/// Merges RocksDB may run at once (`max_background_jobs` is one more: its
/// flush, unused, as Shoal flushes memtables itself).
pub(crate) const MAX_COMPACTION_THREADS: i32 = 3;

/// The mutable options that compress the bottommost level's new files with
/// LZ4 (`compress`) or not; flushes and merges above it never compress.
pub(crate) fn compression_options(compress: bool) -> Vec<(&'static str, String)> {
    vec![
        ("compression", "kNoCompression".to_string()),
        ("bottommost_compression", if compress { "kLZ4Compression" } else { "kNoCompression" }.to_string()),
    ]
}

/// LZ4's compressed size over the raw size of `sample`.
pub(crate) fn ratio(sample: &[u8]) -> f64 {
    if sample.is_empty() {
        return 1.0;
    }
    lz4_flex::block::compress(sample).len() as f64 / sample.len() as f64
}

/// Whether new files should be compressed, given whether they are now and a
/// sample's ratio (with a gap between the two thresholds, so a table near
/// one does not flip at every check).
pub(crate) fn verdict(compressing: bool, ratio: f64) -> bool {
    if compressing {
        ratio <= OFF_ABOVE
    } else {
        ratio <= ON_BELOW
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(compaction: &[(&str, &str)], compression: &[(&str, &str)]) -> TableOptions {
        let mut o = TableOptions::default();
        for (k, v) in compaction {
            o.compaction.insert(k.to_string(), v.to_string());
        }
        o.compression.clear();
        for (k, v) in compression {
            o.compression.insert(k.to_string(), v.to_string());
        }
        o
    }

    #[test]
    fn size_tiered_thresholds_become_merge_widths() {
        let s = shape(&TableOptions::default());
        assert_eq!(s, Shape { leveled: false, min_merge_width: 4, max_merge_width: 32, compress: true });
        let s = shape(&options(&[("min_threshold", "6"), ("max_threshold", "16")], &[]));
        assert_eq!((s.min_merge_width, s.max_merge_width), (6, 16));
        // Nonsense falls back to Cassandra's defaults; max is never below min.
        let s = shape(&options(&[("min_threshold", "1"), ("max_threshold", "x")], &[]));
        assert_eq!((s.min_merge_width, s.max_merge_width), (4, 32));
        let s = shape(&options(&[("min_threshold", "40")], &[]));
        assert_eq!((s.min_merge_width, s.max_merge_width), (40, 40));
        let s = shape(&options(&[("class", "org.apache.cassandra.db.compaction.LeveledCompactionStrategy")], &[]));
        assert!(s.leveled);
    }

    #[test]
    fn compression_options() {
        assert!(shape(&options(&[], &[])).compress);
        assert!(shape(&options(&[], &[("class", "org.apache.cassandra.io.compress.LZ4Compressor")])).compress);
        assert!(shape(&options(&[], &[("class", "ZstdCompressor")])).compress);
        assert!(!shape(&options(&[], &[("enabled", "false")])).compress);
        assert!(!shape(&options(&[], &[("enabled", "FALSE"), ("class", "LZ4Compressor")])).compress);
        assert!(!shape(&options(&[], &[("sstable_compression", "")])).compress);
        assert!(!shape(&options(&[], &[("class", "")])).compress);
    }

    #[test]
    fn mutable_options_name_rocksdb_settings() {
        let s = shape(&TableOptions::default());
        assert_eq!(
            mutable_options(&s, false, false),
            vec![
                ("compression", "kNoCompression".to_string()),
                ("bottommost_compression", "kNoCompression".to_string()),
                (
                    "compaction_options_universal",
                    "{min_merge_width=4;max_merge_width=32;max_size_amplification_percent=200}".to_string()
                ),
            ]
        );
        assert_eq!(
            merge_options(&s, true),
            Some((
                "compaction_options_universal",
                "{min_merge_width=4;max_merge_width=32;max_size_amplification_percent=1}".to_string()
            ))
        );
        let leveled = Shape { leveled: true, ..s };
        assert_eq!(
            mutable_options(&leveled, true, true),
            vec![
                ("compression", "kNoCompression".to_string()),
                ("bottommost_compression", "kLZ4Compression".to_string())
            ]
        );
    }

    #[test]
    fn small_tables_are_merged_whole_with_hysteresis() {
        let m = 256 << 20;
        assert!(full_merge(0, m, false));
        assert!(full_merge(10 * m, m, false));
        assert!(!full_merge(10 * m + 1, m, false));
        // Once merged whole, a table stays so up to the higher bound.
        assert!(full_merge(11 * m, m, true));
        assert!(full_merge(12 * m, m, true));
        assert!(!full_merge(12 * m + 1, m, true));
        assert_eq!(compaction_threads(true, 2), 1);
        assert_eq!(compaction_threads(true, 16), 2);
        assert_eq!(compaction_threads(true, 64), 3);
        assert_eq!(compaction_threads(false, 2), 3);
    }

    #[test]
    fn random_bytes_turn_compression_off_and_text_turns_it_back_on() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let random: Vec<u8> = (0..SAMPLE_BYTES)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let text: Vec<u8> =
            b"sensor-42,temperature=21.5,humidity=40 ".iter().copied().cycle().take(SAMPLE_BYTES).collect();
        let (r_random, r_text) = (ratio(&random), ratio(&text));
        assert!(r_random > OFF_ABOVE, "{r_random}");
        assert!(r_text < ON_BELOW, "{r_text}");
        assert!(!verdict(true, r_random));
        assert!(verdict(false, r_text));
        // Between the thresholds nothing changes.
        assert!(verdict(true, 0.85));
        assert!(!verdict(false, 0.85));
        assert_eq!(ratio(&[]), 1.0);
    }
}
