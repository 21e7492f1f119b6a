// The one thing of RocksDB's that Shoal reaches through C++ rather than its
// C API (throttle.rs): reading and changing a rate limiter's rate while the
// database that uses it is open (nodetool's setcompactionthroughput). The C
// API can only make a limiter and hand it to options before the open.
//
// The struct below has the layout of the C API's own (RocksDB's db/c.cc,
// which does not export it): a handle holding a shared pointer to the
// limiter. Handles come from rocksdb_ratelimiter_create only.

#include <cstdint>
#include <memory>

#include "rocksdb/rate_limiter.h"

struct rocksdb_ratelimiter_t {
  std::shared_ptr<rocksdb::RateLimiter> rep;
};

extern "C" {

// Sets the limiter's rate; `bytes_per_second` must be positive.
void shoal_ratelimiter_set_bytes_per_second(rocksdb_ratelimiter_t* limiter, int64_t bytes_per_second) {
  limiter->rep->SetBytesPerSecond(bytes_per_second);
}

int64_t shoal_ratelimiter_get_bytes_per_second(const rocksdb_ratelimiter_t* limiter) {
  return limiter->rep->GetBytesPerSecond();
}

// Bytes every caller of the limiter asked for since it was made (all
// priorities): compactions' writes, and RocksDB's own flushes.
int64_t shoal_ratelimiter_total_bytes_through(const rocksdb_ratelimiter_t* limiter) {
  return limiter->rep->GetTotalBytesThrough(rocksdb::Env::IO_TOTAL);
}

}  // extern "C"
