//! The compaction throttle (`throttle`, `Storage::set_compaction_throughput`):
//! a compaction writes through it, and no faster than the rate set while it
//! runs; 0 turns it off again; the data comes through whole.

#![allow(clippy::unwrap_used, reason = "an integration test: a failed unwrap names its line")]

mod common;

use std::time::{Duration, Instant};

use common::*;
use rand::distributions::Alphanumeric;
use rand::{Rng, SeedableRng};

const MIB: u64 = 1 << 20;

#[test]
fn a_compaction_writes_no_faster_than_the_throughput_set() {
    let dir = tempfile::tempdir().unwrap();
    let (st, id) = open_kv(dir.path());
    assert_eq!(st.compaction_throughput(), 0, "unthrottled by default");
    // About 3 MiB once compressed, in four files: random letters, which LZ4 barely shrinks.
    let mut rng = rand::rngs::StdRng::seed_from_u64(26);
    let ts = now_micros();
    let mut values = Vec::new();
    for file in 0..4 {
        for pk in file * 1000..(file + 1) * 1000 {
            let value: String = (&mut rng).sample_iter(&Alphanumeric).take(1000).map(char::from).collect();
            st.apply(&[kv(id, pk, &value, ts)]).unwrap();
            values.push(value);
        }
        st.flush(None).unwrap();
    }

    // A compaction rewrites the table more than once (about 12 MiB through the throttle here).
    let rate = 4 * MIB;
    st.set_compaction_throughput(rate);
    assert_eq!(st.compaction_throughput(), rate);
    let before = st.throttled_bytes();
    let started = Instant::now();
    st.compact(Some(&id)).unwrap();
    let took = started.elapsed();
    let bytes = st.throttled_bytes() - before;
    assert!(bytes > 2 * MIB, "the compaction's output went through the throttle: {bytes} bytes");
    // The limiter hands out the rate in 100 ms refills: the bytes take their
    // time at 4 MiB/s, less the first refill (and a margin for rounding).
    let least = Duration::from_secs_f64(bytes as f64 / rate as f64 - 0.2);
    assert!(took >= least, "{bytes} bytes compacted in {took:?}, faster than 4 MiB/s allows ({least:?})");

    st.set_compaction_throughput(0);
    assert_eq!(st.compaction_throughput(), 0);
    st.set_compaction_throughput(64 * MIB);
    assert_eq!(st.compaction_throughput(), 64 * MIB);
    for (pk, value) in values.iter().enumerate() {
        assert_eq!(kv_get(&st, id, pk as i32).as_deref(), Some(value.as_str()), "pk {pk}");
    }
}
