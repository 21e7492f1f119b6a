#!/usr/bin/env bash
# Set up, build (release) and run Shoal. With no arguments: a single node in the
# foreground, CQL on 127.0.0.1:9042, data under ./data. Any arguments are passed
# to the `shoal` binary, e.g. `scripts/shoal.sh server --config shoal.yaml`.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/env.sh"
"$ROOT/scripts/setup.sh"
cargo build --release --manifest-path "$ROOT/Cargo.toml" -p shoal
[ $# -gt 0 ] || set -- server
exec "$SHOAL_BIN" "$@"
