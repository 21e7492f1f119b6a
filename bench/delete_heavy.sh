#!/usr/bin/env bash
# bench/delete_heavy.sh: does a delete-heavy table stay bounded on disk with no operator (issue 25)?
#
# One shoal node; two `shoal stress` processes on one table (gc_grace_seconds=GC_GRACE,
# tombstone_compaction_interval=INTERVAL): a writer inserting new keys in sequence at RATE/s, and,
# LAG seconds behind it, a deleter deleting the same keys in the same order at the same rate (a
# queue: the live rows stay about RATE*LAG, every other row written is deleted). Nothing runs
# `shoal tool compact`: only the node's tombstone compactions purge the deletion markers.
# Every 10 s it samples the data directory's size on disk (du), the node's load (shoal tool info)
# and the table's markers and tombstone compactions (shoal tool compactionstats) into a CSV, then
# draws them (`shoal stress plot`, SVG) and says whether the usage stayed bounded: the largest
# load (the table's files and memtables: what deletion markers inflate; du adds the commit log's
# segments) of the run's second half is at most BOUND times the largest of its first half (after
# the first minute). GC_GRACE=864000 (the default gc_grace) shows the same workload unpurged.
#
# usage: bench/delete_heavy.sh [DURATION_SECONDS]   (default 1800: 30 minutes)
# env:   RATE (2000 ops/s each), LAG (20 s), GC_GRACE (0), INTERVAL (60 s), BOUND (1.2),
#        THREADS (8 per stress process), OUT (bench/out/delete_heavy-STAMP), SHOAL_BIN.
set -euo pipefail

DURATION=${1:-1800}
RATE=${RATE:-2000}
LAG=${LAG:-20}
GC_GRACE=${GC_GRACE:-0}
INTERVAL=${INTERVAL:-60}
BOUND=${BOUND:-1.2}
THREADS=${THREADS:-8}
HERE=$(cd "$(dirname "$0")" && pwd)
SHOAL_BIN=${SHOAL_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/shoal/target}/release/shoal}
OUT=${OUT:-$HERE/out/delete_heavy-$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/shoal-delete-heavy.XXXXXX")
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
NATIVE=$(free_port); ADMIN=$(free_port); STORAGE=$(free_port)
printf 'storage_port: %s\n' "$STORAGE" >"$WORK/shoal.yaml"

PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

"$SHOAL_BIN" server --config "$WORK/shoal.yaml" --data-dir "$WORK/data" --native-port "$NATIVE" \
  --admin-port "$ADMIN" >"$OUT/shoal-server.log" 2>&1 &
SERVER=$!
PIDS+=("$SERVER")
for _ in $(seq 1 120); do
  (exec 3<>"/dev/tcp/127.0.0.1/$NATIVE") 2>/dev/null && break
  sleep 0.5
done
tool() { "$SHOAL_BIN" tool -h 127.0.0.1 -p "$ADMIN" "$@"; }

STRESS_COMMON=(no-warmup "duration=${DURATION}s" -pop "seq=1..9000000000" -node "127.0.0.1" -port "native=$NATIVE"
  -schema "gc_grace_seconds=$GC_GRACE" \
  "compaction(strategy=SizeTieredCompactionStrategy,tombstone_compaction_interval=$INTERVAL)"
  -rate "throttle=${RATE}/s" "threads=$THREADS" --keep-going)
"$SHOAL_BIN" stress write "${STRESS_COMMON[@]}" >"$OUT/writer.log" 2>&1 &
PIDS+=("$!")
sleep "$LAG"
"$SHOAL_BIN" stress mixed "ratio(delete=1)" "${STRESS_COMMON[@]}" >"$OUT/deleter.log" 2>&1 &
PIDS+=("$!")

CSV="$OUT/delete_heavy.csv"
echo "seconds,disk_bytes,load_bytes,tombstone_markers,tombstone_compactions" >"$CSV"
start=$(date +%s)
while :; do
  now=$(( $(date +%s) - start ))
  disk=$(du -sb "$WORK/data" | cut -f1)
  load=$(tool info --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["load_bytes"])')
  table=$(tool compactionstats --json | python3 -c '
import json, sys
t = [t for t in json.load(sys.stdin)["tables"] if (t["keyspace"], t["table"]) == ("keyspace1", "standard1")]
print(*((t[0]["tombstone_markers"], t[0]["tombstone_compactions"]) if t else (0, 0)), sep=",")')
  echo "$now,$disk,$load,$table" >>"$CSV"
  [ "$now" -ge "$((DURATION + LAG))" ] && break
  sleep 10
done
tail -n 3 "$OUT/writer.log" "$OUT/deleter.log" || true

status=0
python3 - "$CSV" "$OUT" "$BOUND" <<'EOF' || status=$?
import csv, json, sys
path, out, bound = sys.argv[1], sys.argv[2], float(sys.argv[3])
rows = [{k: float(v) for k, v in r.items()} for r in csv.DictReader(open(path))]
mb = lambda b: b / 1e6
spec = {"title": "Delete-heavy queue workload: on-disk size with no manual compaction", "x_label": "seconds",
        "log_x": False, "panels": [
            {"title": "size", "y_label": "MB", "log_y": False, "hlines": [],
             "series": [{"name": "data directory (du)", "points": [[r["seconds"], mb(r["disk_bytes"])] for r in rows]},
                        {"name": "load (tables)", "points": [[r["seconds"], mb(r["load_bytes"])] for r in rows]}]},
            {"title": "deletion markers", "y_label": "count", "log_y": False, "hlines": [],
             "series": [{"name": "markers not yet purged", "points": [[r["seconds"], r["tombstone_markers"]] for r in rows]},
                        {"name": "tombstone compactions x1000",
                         "points": [[r["seconds"], 1000 * r["tombstone_compactions"]] for r in rows]}]}]}
json.dump(spec, open(f"{out}/delete_heavy.chart.json", "w"))
steady = [r for r in rows if r["seconds"] >= 60] or rows
half = len(steady) // 2
first, second = steady[:half] or steady, steady[half:] or steady
peak1, peak2 = max(r["load_bytes"] for r in first), max(r["load_bytes"] for r in second)
purges = int(rows[-1]["tombstone_compactions"])
ok = peak2 <= bound * peak1
xs, ys = [r["seconds"] for r in steady], [r["load_bytes"] for r in steady]
mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
var = sum((x - mx) ** 2 for x in xs)
slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var if var else 0.0
print(f"samples: {len(rows)} over {int(rows[-1]['seconds'])} s; tombstone compactions: {purges}")
print(f"load (the table's files and memtables): first-half peak {mb(peak1):.1f} MB, second-half peak "
      f"{mb(peak2):.1f} MB, last {mb(rows[-1]['load_bytes']):.1f} MB")
print(f"load trend after the first minute (least squares): {slope * 60 / 1e6:+.1f} MB/min")
print(f"data directory on disk (du, with the commit log): max {mb(max(r['disk_bytes'] for r in rows)):.1f} MB, "
      f"last {mb(rows[-1]['disk_bytes']):.1f} MB")
print(f"BOUNDED: {'yes' if ok else 'no'} (second-half peak {'<=' if ok else '>'} {bound} x first-half peak)")
sys.exit(0 if ok else 1)
EOF
"$SHOAL_BIN" stress plot "$OUT/delete_heavy.chart.json" "$OUT/delete_heavy.svg"
echo "CSV: $CSV"
echo "plot: $OUT/delete_heavy.svg"
exit $status
