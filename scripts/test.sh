#!/usr/bin/env bash
# The whole test suite: formatting and clippy (warnings are errors), Rust unit and integration tests (incl. the scylla Rust
# driver against a real `shoal` process), then the Python driver and cqlsh
# conformance tests against a real `shoal` process, then the Java driver 4 and
# gocql v2 suites against a real `shoal` process (and in part against a 3-node
# shoal cluster) and, with the same expectations, against Apache Cassandra 5.0.9
# (the differential run).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/env.sh"
"$ROOT/scripts/setup.sh"
cd "$ROOT"
echo "== cargo fmt --check (rustfmt.toml)"
cargo fmt --all -- --check
echo "== build (release; target dir $CARGO_TARGET_DIR)"
cargo build --release --workspace --bins
echo "== cargo clippy -D warnings"
cargo clippy --release --workspace --all-targets -- -D warnings
echo "== cargo test"
cargo test --release --workspace
# The slowest tests are listed at the end (what to trim when the suite grows). Two workers, each taking whole
# files (a file's tests share its module fixtures, e.g. one node); most tests wait on real nodes, not the CPU.
echo "== python driver + cqlsh tests"
PATH="$SHOAL_VENV/bin:$PATH" SHOAL_BIN="$SHOAL_BIN" "$SHOAL_VENV/bin/python" -m pytest -q -n 2 --dist loadfile \
  --durations=15 tests/python
echo "== bench/chaos ci: every fault scenario (partitions, lossy links, kill -9, pauses, clock skew, full disk, power loss) on a 3-node RF=3 cluster in network namespaces"
if chaos_why="$("$ROOT/bench/chaos" check)"; then
  SHOAL_BIN="$SHOAL_BIN" SHOAL_VENV="$SHOAL_VENV" "$ROOT/bench/chaos" ci --json-dir "$ROOT/bench/out/chaos"
else
  echo "SKIPPED: bench/chaos cannot run here ($chaos_why); it needs root, ip netns and nft"
fi
echo "== Java driver 4 and gocql v2 against shoal"
"$ROOT/scripts/driver-tests.sh"
echo "== the same suites' connection, v5, types, prepared, batch, paging, LWT and counter tests against a 3-node shoal cluster"
JAVA_DRIVER_PROFILES=default "$ROOT/scripts/driver-tests.sh" --cluster
echo "== the same, and the Python feature modules, against Apache Cassandra 5.0.9 (differential; SHOAL_SKIP_DIFFERENTIAL=1 skips it)"
if [ "${SHOAL_SKIP_DIFFERENTIAL:-0}" != 1 ]; then
  JAVA_DRIVER_PROFILES=default "$ROOT/scripts/driver-tests.sh" --cassandra
fi
echo "== bench/shoal_bench unit tests (the chart specs, shoal stress plot mocked)"
python3 -m unittest discover -s "$ROOT/bench/shoal_bench" -t "$ROOT/bench" -p "test_*.py"
echo "== bench/shoal_chaos unit tests (the checkers on known-bad histories; the network faults, when root)"
python3 -m unittest discover -s "$ROOT/bench/shoal_chaos" -t "$ROOT/bench" -p "test_*.py"
echo "== bench/compare --smoke (Shoal only, results in a temp dir; no targets asserted)"
"$ROOT/bench/compare" --smoke --shoal-only
