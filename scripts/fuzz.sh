#!/usr/bin/env bash
# Runs a cargo-fuzz target with libFuzzer without needing cargo-fuzz installed
# (nightly toolchain required; not part of CI).
#   scripts/fuzz.sh cql parse 240            # CQL parser, 240 s
#   scripts/fuzz.sh cql-protocol decode_frame 240
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CRATE="${1:?crate (cql | cql-protocol)}"; TARGET="${2:?fuzz target}"; SECONDS_TO_RUN="${3:-120}"
FUZZ_DIR="$ROOT/crates/$CRATE/fuzz"
OUT="${SHOAL_CACHE:-$HOME/.cache/shoal}/fuzz"
mkdir -p "$OUT/corpus-$CRATE-$TARGET" "$OUT/artifacts-$CRATE-$TARGET"
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table -Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
# --target keeps the sanitizer flags away from build scripts.
CARGO_TARGET_DIR="$OUT/target" cargo +nightly build --release --manifest-path "$FUZZ_DIR/Cargo.toml" \
  --target x86_64-unknown-linux-gnu --bin "$TARGET"
"$OUT/target/x86_64-unknown-linux-gnu/release/$TARGET" -max_total_time="$SECONDS_TO_RUN" \
  -artifact_prefix="$OUT/artifacts-$CRATE-$TARGET/" -print_final_stats=1 "$OUT/corpus-$CRATE-$TARGET"
