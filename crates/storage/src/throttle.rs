//! Compaction throughput: how fast RocksDB's compactions may write, in
//! bytes per second, changed while the node runs (`compaction_throughput`
//! in shoal.yaml, nodetool's `setcompactionthroughput` /
//! `getcompactionthroughput`). 0 means unthrottled, ScyllaDB's default
//! (Cassandra's is 64 MiB/s): a write-heavy node whose compactions fall
//! behind reads more files per read and stalls writes at the level-0 limit.
//!
//! One RocksDB rate limiter, made before the database opens and handed to
//! its options (its compactions, and its own flushes at high priority, ask
//! it before they write); the database keeps its own reference, so dropping
//! ours is safe at any time. RocksDB's C API can make the limiter but not
//! change its rate afterwards: `throttle.cc`, a shim over its C++ API,
//! does that (`build.rs` compiles it).
//!
//! Invariants:
//! - The limiter's rate is always positive (RocksDB asserts it): 0 is kept
//!   as `UNTHROTTLED`, a rate no disk reaches, and reported back as 0.
//! - Shoal's own memtable flushes (`flush.rs`, written by `SstFileWriter`
//!   and ingested) do not go through the limiter; neither do streaming's
//!   files, which `stream_throughput_outbound` throttles.

use rocksdb::AsRawPtr;

/// The rate that stands for "unthrottled" (RocksDB needs one): 1 EiB/s.
const UNTHROTTLED: i64 = 1 << 60;

/// RocksDB's defaults for its rate limiter: refill every 100 ms, and a low
/// priority request served first once in 10 tries.
const REFILL_PERIOD_US: i64 = 100_000;
const FAIRNESS: i32 = 10;

#[allow(unsafe_code)]
mod ffi {
    use librocksdb_sys::rocksdb_ratelimiter_t;

    unsafe extern "C" {
        pub(super) fn shoal_ratelimiter_set_bytes_per_second(limiter: *mut rocksdb_ratelimiter_t, bytes: i64);
        pub(super) fn shoal_ratelimiter_get_bytes_per_second(limiter: *const rocksdb_ratelimiter_t) -> i64;
        pub(super) fn shoal_ratelimiter_total_bytes_through(limiter: *const rocksdb_ratelimiter_t) -> i64;
    }
}

/// The compaction rate limiter; see the module documentation.
pub(crate) struct CompactionThrottle {
    limiter: *mut librocksdb_sys::rocksdb_ratelimiter_t,
}

// SAFETY: the handle is only read after it is made (its shared pointer is
// never reassigned), and RocksDB's rate limiters are thread-safe (every
// call takes the limiter's own mutex or reads atomics).
#[allow(unsafe_code)]
unsafe impl Send for CompactionThrottle {}
#[allow(unsafe_code)]
unsafe impl Sync for CompactionThrottle {}

impl CompactionThrottle {
    /// Makes the limiter, unthrottled, and hands it to `options` (before the
    /// database opens with them).
    pub(crate) fn attach(options: &mut rocksdb::Options) -> CompactionThrottle {
        // SAFETY: rocksdb_ratelimiter_create returns a new handle (never null:
        // it allocates with `new`); rocksdb_options_set_ratelimiter copies its
        // shared pointer into the options, which outlive this call.
        #[allow(unsafe_code)]
        let limiter = unsafe {
            let limiter = librocksdb_sys::rocksdb_ratelimiter_create(UNTHROTTLED, REFILL_PERIOD_US, FAIRNESS);
            librocksdb_sys::rocksdb_options_set_ratelimiter(options.as_raw_ptr(), limiter);
            limiter
        };
        CompactionThrottle { limiter }
    }

    /// Sets the rate, in bytes per second; 0: unthrottled.
    pub(crate) fn set(&self, bytes_per_second: u64) {
        let rate = match i64::try_from(bytes_per_second) {
            Ok(0) | Err(_) => UNTHROTTLED,
            Ok(rate) => rate.min(UNTHROTTLED),
        };
        // SAFETY: `limiter` is the live handle `attach` made; the rate is positive.
        #[allow(unsafe_code)]
        unsafe {
            ffi::shoal_ratelimiter_set_bytes_per_second(self.limiter, rate)
        };
    }

    /// The rate, in bytes per second (0: unthrottled), as the limiter holds it.
    pub(crate) fn get(&self) -> u64 {
        // SAFETY: `limiter` is the live handle `attach` made.
        #[allow(unsafe_code)]
        let rate = unsafe { ffi::shoal_ratelimiter_get_bytes_per_second(self.limiter) };
        if rate >= UNTHROTTLED {
            0
        } else {
            u64::try_from(rate).unwrap_or(0)
        }
    }

    /// Bytes that went through the limiter since the open (compactions'
    /// writes, RocksDB's own flushes).
    pub(crate) fn bytes_through(&self) -> u64 {
        // SAFETY: `limiter` is the live handle `attach` made.
        #[allow(unsafe_code)]
        let bytes = unsafe { ffi::shoal_ratelimiter_total_bytes_through(self.limiter) };
        u64::try_from(bytes).unwrap_or(0)
    }
}

impl Drop for CompactionThrottle {
    fn drop(&mut self) {
        // SAFETY: the handle `attach` made, dropped once; the options and the
        // database hold their own references to the limiter.
        #[allow(unsafe_code)]
        unsafe {
            librocksdb_sys::rocksdb_ratelimiter_destroy(self.limiter)
        };
    }
}
