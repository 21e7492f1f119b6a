#!/usr/bin/env bash
# The driver suites of other languages against a real server: the Java driver 4
# (tests/java, Maven) and gocql v2 (tests/go). By default against a fresh
# `shoal server` on free loopback ports; with --cassandra against Apache
# Cassandra 5.0.9 (scripts/cassandra, installed on first use), the differential
# mode: both must pass the same tests. With --cluster, against a 3-node Shoal
# cluster on 127.0.0.1..3 (`shoal cluster up`): the tests of connection,
# protocol v5, types, prepared statements, batches, paging, LWT and counters.
#
#   scripts/driver-tests.sh [--cassandra | --cluster] [--only java|go|python]
#
# Env: SHOAL_BIN (default from scripts/env.sh), JAVA_DRIVER_PROFILES (the Maven
# profiles to run, default "default datastax-4.17": the Apache driver 4.19 and
# the DataStax driver 4.17).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/env.sh"

target=shoal
only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --cassandra) target=cassandra ;;
    --cluster) target=cluster ;;
    --only) only="$2"; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "driver-tests: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

work="$(mktemp -d "${TMPDIR:-/tmp}/shoal-drivers.XXXXXX")"
server_pid=""
cleanup() {
  local rc=$?
  if [ "$target" = shoal ] && [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid"; wait "$server_pid" 2>/dev/null || true
  fi
  if [ "$target" = cassandra ]; then
    CASS_DATA="$work/cassandra" "$ROOT/scripts/cassandra/stop.sh" >/dev/null || true
  fi
  if [ "$target" = cluster ]; then
    "$SHOAL_BIN" cluster --dir "$work/cluster" down >/dev/null 2>&1 || true
  fi
  if [ $rc -ne 0 ] && [ -f "$work/server.log" ]; then
    echo "---- server log (tail) ----" >&2; tail -40 "$work/server.log" >&2
  fi
  rm -rf "$work"
  exit $rc
}
trap cleanup EXIT

port="$(free_port)"
if [ "$target" = shoal ]; then
  [ -x "$SHOAL_BIN" ] || { echo "driver-tests: no $SHOAL_BIN; build first (cargo build --release)" >&2; exit 1; }
  printf 'storage_port: %s\n' "$(free_port)" > "$work/shoal.yaml"
  "$SHOAL_BIN" server --listen-address 127.0.0.1 --native-port "$port" --admin-port "$(free_port)" \
    --config "$work/shoal.yaml" --data-dir "$work/data" > "$work/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 300); do port_open "$port" && break; kill -0 "$server_pid" || exit 1; sleep 0.1; done
  port_open "$port" || { echo "driver-tests: shoal did not listen on $port" >&2; exit 1; }
  echo "== driver tests against shoal (pid $server_pid) on 127.0.0.1:$port"
elif [ "$target" = cluster ]; then
  [ -x "$SHOAL_BIN" ] || { echo "driver-tests: no $SHOAL_BIN; build first (cargo build --release)" >&2; exit 1; }
  "$SHOAL_BIN" cluster --dir "$work/cluster" up -n 3 --native-port "$port" --admin-port "$(free_port)" \
    > "$work/server.log" 2>&1 || { cat "$work/server.log" >&2; exit 1; }
  echo "== driver tests against a 3-node shoal cluster on 127.0.0.1..3:$port"
else
  "$ROOT/scripts/cassandra/install.sh"
  CASS_DATA="$work/cassandra" CASS_PORT="$port" CASS_STORAGE_PORT="$(free_port)" CASS_JMX_PORT="$(free_port)" \
    CASSANDRA_HEAP="${CASSANDRA_HEAP:-1G}" "$ROOT/scripts/cassandra/start.sh"
  echo "== driver tests against Apache Cassandra on 127.0.0.1:$port"
fi

export CQL_HOST=127.0.0.1 CQL_PORT="$port" CQL_TARGET="$target"
# The launcher's nodes are in dc1 (a lone node and Cassandra in datacenter1).
[ "$target" = cluster ] && export CQL_DC=dc1
if [ -z "$only" ] || [ "$only" = go ]; then
  command -v go >/dev/null || { echo "driver-tests: go is required" >&2; exit 1; }
  echo "== gocql v2 (tests/go)"
  go_args=(-count=1)
  [ "$target" = cluster ] && go_args+=(-run 'Connect|ProtocolV5|Types|Prepared|Batch|Paging|Lightweight|CompareAndSet|Counters')
  ( cd "$ROOT/tests/go" && go test "${go_args[@]}" ./... )
fi
if [ -z "$only" ] || [ "$only" = java ]; then
  command -v mvn >/dev/null || { echo "driver-tests: mvn (Maven) and java 17 are required" >&2; exit 1; }
  for profile in ${JAVA_DRIVER_PROFILES:-default datastax-4.17}; do
    echo "== Java driver 4 (tests/java, profile $profile)"
    args=(-q -B test)
    [ "$profile" = default ] || args+=(-P "$profile")
    [ "$target" = cluster ] && args+=(-Dtest='ConnectionTest,ProtocolV5Test,TypesTest,PreparedStatementTest,BatchTest,PagingTest,LwtCountersTest')
    ( cd "$ROOT/tests/java" && mvn "${args[@]}" )
  done
fi
# With --cassandra: the Python driver's modules of issue 23's features (and the query features
# they build on) against the same Cassandra, with the same expectations (tests/python/README.md:
# SHOAL_TEST_EXTERNAL); Shoal-only tests skip themselves there.
if [ "$target" = cassandra ] && { [ -z "$only" ] || [ "$only" = python ]; }; then
  echo "== Python driver feature modules (tests/python, SHOAL_TEST_EXTERNAL)"
  py_modules=(test_lwt test_counters test_indexes test_json test_group_by test_functions test_arithmetic
    test_protocol_v5 test_tracing test_types test_paging test_timestamps_ttl test_deletes test_batch test_prepared
    test_udt_nonfrozen)
  ( cd "$ROOT/tests/python" && SHOAL_TEST_EXTERNAL="127.0.0.1:$port" PATH="$SHOAL_VENV/bin:$PATH" \
      "$SHOAL_VENV/bin/python" -m pytest -q "${py_modules[@]/%/.py}" )
fi
echo "== driver tests passed against $target"
