//! Builds `src/throttle.cc`, the C++ shim of `throttle.rs`, against the
//! headers of the RocksDB that librocksdb-sys builds (its `links = "rocksdb"`
//! metadata names its source directory), or `ROCKSDB_INCLUDE_DIR` where
//! librocksdb-sys links a system RocksDB.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=src/throttle.cc");
    println!("cargo:rerun-if-env-changed=ROCKSDB_INCLUDE_DIR");
    let include = match (std::env::var_os("ROCKSDB_INCLUDE_DIR"), std::env::var_os("DEP_ROCKSDB_CARGO_MANIFEST_DIR")) {
        (Some(dir), _) => PathBuf::from(dir),
        (None, Some(sys)) => PathBuf::from(sys).join("rocksdb").join("include"),
        (None, None) => {
            println!(
                "cargo::error=no RocksDB headers: librocksdb-sys named no source directory; set ROCKSDB_INCLUDE_DIR"
            );
            return;
        }
    };
    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .include(include)
        .file("src/throttle.cc")
        .warnings(true)
        .compile("shoal_throttle");
}
