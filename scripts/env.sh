# Sourced by the other scripts: where builds and the venv live (outside the clone,
# so a fresh clone reuses the RocksDB build: ~15-20 min cold on 2 cores).
export SHOAL_CACHE="${SHOAL_CACHE:-$HOME/.cache/shoal}"
export SHOAL_VENV="${SHOAL_VENV:-$SHOAL_CACHE/venv}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$SHOAL_CACHE/target}"
export SHOAL_BIN="${SHOAL_BIN:-$CARGO_TARGET_DIR/release/shoal}"
