#!/usr/bin/env bash
# A local N-node Apache Cassandra cluster on 127.0.0.1..N for bench/compare --rf3 (ccm's job for
# the reference), from the jars and config template of scripts/cassandra (install.sh).
#   bench/cassandra-cluster.sh up [N]     start N nodes (default 3), one at a time, empty data
#   bench/cassandra-cluster.sh status     pids, and nodetool status as node 1 sees it
#   bench/cassandra-cluster.sh pids       the running nodes' pids, comma-separated
#   bench/cassandra-cluster.sh down       stop the nodes this script started (pid files only)
#   bench/cassandra-cluster.sh add        start node N+1 on 127.0.0.(N+1) with auto_bootstrap (it streams its
#                                         ranges, JOINING, then opens CQL); waits until node 1 sees it UN
#   bench/cassandra-cluster.sh stop I     stop node I (SIGTERM, KILL after 60 s); its data stays
#   bench/cassandra-cluster.sh start I    restart stopped node I on its data and config
#   bench/cassandra-cluster.sh nodetool I ARGS...   nodetool against node I (its JMX port)
# Node i: listen/rpc address 127.0.0.i, storage 7000, CQL 9042, JMX 7099+100*i (7199, 7299, ...),
# seeds 127.0.0.1, heap CASSANDRA_HEAP (default 1G), everything under CLUSTER_DIR/node<i>.
# Env: CASS_HOME (the install, default $HOME/.cache/cassandra-ref), CASS_REF (the scripts,
#      default scripts/cassandra of this repository), CLUSTER_DIR (default $HOME/.cache/shoal/bench/cassandra-cluster),
#      CASSANDRA_HEAP, UP_TIMEOUT (seconds per node, default 240), ADD_TIMEOUT (seconds for a
#      bootstrapping node to open CQL and be UN, default 3600).
set -euo pipefail
CASS_HOME="${CASS_HOME:-$HOME/.cache/cassandra-ref}"
CASS_REF="${CASS_REF:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../scripts/cassandra" && pwd)}"
CLUSTER_DIR="${CLUSTER_DIR:-$HOME/.cache/shoal/bench/cassandra-cluster}"
HEAP="${CASSANDRA_HEAP:-1G}"
UP_TIMEOUT="${UP_TIMEOUT:-240}"
ADD_TIMEOUT="${ADD_TIMEOUT:-3600}"

die() { echo "cassandra-cluster: $*" >&2; exit 1; }
port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }
# The live pid of node i, if this script started it (pid file + command line naming its config).
node_pid() {
  local f="$CLUSTER_DIR/node$1/cassandra.pid" pid
  [ -f "$f" ] || return 1
  pid="$(cat "$f")"
  kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q "CassandraDaemon" || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q "$CLUSTER_DIR/node$1/conf/" || return 1
  echo "$pid"
}
nodes() { local d; for d in "$CLUSTER_DIR"/node*; do [ -d "$d" ] && echo "${d##*/node}"; done | sort -n; }
nodetool() {
  local jmx="$1"; shift
  mapfile -t O < <(grep -E '^--add|^-Djdk' "$CASS_REF/jvm17.options")
  timeout 120 java "${O[@]}" -Xmx256m -Dlogback.configurationFile="$CLUSTER_DIR/node1/conf/logback.xml" \
    -Dcassandra.logdir="$CLUSTER_DIR/nodetool-logs" -cp "$CLUSTER_DIR/node1/conf:$CASS_HOME/lib/*" \
    org.apache.cassandra.tools.NodeTool -h 127.0.0.1 -p "$jmx" "$@"
}

# Node i's config: the template at 127.0.0.i; auto_bootstrap false unless $2 is "bootstrap".
write_conf() {
  local i="$1" d="$CLUSTER_DIR/node$1"
  mkdir -p "$d"/{conf,logs,data/data,data/commitlog,data/saved_caches,data/hints,data/cdc_raw}
  sed -e "s|@CASS_HOME@|$d|g" -e "s|@PORT@|9042|g" -e "s|@STORAGE_PORT@|7000|g" \
      -e "s|^cluster_name: .*|cluster_name: bench3|" \
      -e "s|^allocate_tokens_for_local_replication_factor: .*|allocate_tokens_for_local_replication_factor: 3|" \
      -e "s|^listen_address: .*|listen_address: 127.0.0.$i|" \
      -e "s|^rpc_address: .*|rpc_address: 127.0.0.$i|" \
      "$CASS_REF/cassandra.yaml.template" > "$d/conf/cassandra.yaml"
  # An empty cluster: nothing to stream, so no bootstrap wait (and no 'another node is joining').
  [ "${2:-}" = bootstrap ] || echo "auto_bootstrap: false" >> "$d/conf/cassandra.yaml"
  cp "$CASS_REF/logback.xml" "$d/conf/logback.xml"
}

# Starts node i's JVM on its config and data; its pid goes to node<i>/cassandra.pid.
launch() {
  local i="$1" d="$CLUSTER_DIR/node$1" jmx=$((7099 + 100 * $1)) jamm
  jamm="$(ls "$CASS_HOME"/lib/jamm-*.jar | head -1)"
  mapfile -t JVM_OPTS < <(grep -E '^-' "$CASS_REF/jvm17.options")
  # `cd; java &` (not `cd && java &`): $! must be java itself, and no subshell may hold our stdout.
  ( cd "$d"; setsid nohup java "${JVM_OPTS[@]}" -Xms"$HEAP" -Xmx"$HEAP" -javaagent:"$jamm" \
      -Dcassandra.jmx.local.port="$jmx" \
      -Dcassandra.ring_delay_ms=1000 -Dcassandra.skip_wait_for_gossip_to_settle=0 \
      -Dcassandra.config="file://$d/conf/cassandra.yaml" \
      -Dcassandra.storagedir="$d/data" -Dcassandra.logdir="$d/logs" \
      -Dlogback.configurationFile="$d/conf/logback.xml" -Dcassandra-foreground=yes \
      -cp "$d/conf/:$CASS_HOME/lib/*" \
      org.apache.cassandra.service.CassandraDaemon -f >> "$d/logs/stdout.log" 2>&1 < /dev/null & echo $! > "$d/cassandra.pid" )
  echo "node $i (127.0.0.$i, JMX $jmx): started pid $(cat "$d/cassandra.pid"), waiting for 127.0.0.$i:9042 ..."
}

# Waits up to $2 seconds for node i's CQL port (fails if the JVM exits).
wait_cql() {
  local i="$1" limit="$2" d="$CLUSTER_DIR/node$1" pid t=0
  pid="$(cat "$d/cassandra.pid")"
  until port_open "127.0.0.$i" 9042; do
    kill -0 "$pid" 2>/dev/null || { tail -30 "$d/logs/stdout.log" >&2; die "node $i exited; see $d/logs/system.log"; }
    [ "$t" -ge "$limit" ] && die "node $i: no CQL on 127.0.0.$i:9042 after ${limit}s; see $d/logs/system.log"
    sleep 1; t=$((t + 1))
  done
  echo "node $i is up after ${t}s"
}

# Waits up to $2 seconds until node 1 (or, when node 1 is the one, node 2) sees 127.0.0.$1 as UN.
wait_un() {
  local i="$1" limit="$2" t=0 via=1
  [ "$i" = 1 ] && via=2
  until nodetool $((7099 + 100 * via)) status 2>/dev/null | grep -qE "^UN +127\.0\.0\.$i "; do
    [ "$t" -ge "$limit" ] && die "node $via does not see node $i UN after ${limit}s"
    sleep 3; t=$((t + 3))
  done
}

check_installed() {
  [ -f "$CASS_HOME/lib/cassandra-all-$(cat "$CASS_HOME/VERSION" 2>/dev/null || echo 5.0.9).jar" ] \
    || die "Apache Cassandra is not installed in $CASS_HOME; run $CASS_REF/install.sh"
  [ -f "$CASS_REF/cassandra.yaml.template" ] || die "no $CASS_REF/cassandra.yaml.template"
}

free_ports() {
  local i="$1" p
  for p in 9042 7000; do port_open "127.0.0.$i" "$p" && die "127.0.0.$i:$p is in use by another process"; done
  port_open 127.0.0.1 $((7099 + 100 * i)) && die "JMX port $((7099 + 100 * i)) is in use by another process"
  return 0
}

up() {
  local n="${1:-3}" i
  check_installed
  for i in $(nodes); do node_pid "$i" >/dev/null && die "node $i is already running (pid $(node_pid "$i")); run '$0 down' first"; done
  for i in $(seq 1 "$n"); do free_ports "$i"; done
  rm -rf "$CLUSTER_DIR"/node[0-9]* "$CLUSTER_DIR/nodetool-logs"   # only what an earlier up made
  for i in $(seq 1 "$n"); do
    write_conf "$i"
    launch "$i"
    wait_cql "$i" "$UP_TIMEOUT"
  done
  # Every node must see every other as UN before the benchmark creates its keyspace.
  local t=0 un=0
  while :; do
    un="$(nodetool 7199 status 2>/dev/null | grep -c '^UN' || true)"
    [ "$un" -ge "$n" ] && break
    [ "$t" -ge "$UP_TIMEOUT" ] && die "node 1 sees $un of $n nodes UN after ${UP_TIMEOUT}s"
    sleep 3; t=$((t + 3))
  done
  echo "cluster up: $n nodes UN"
}

# A new node on the next address, bootstrapping into the running cluster.
add() {
  check_installed
  node_pid 1 >/dev/null || die "node 1 is not running (run '$0 up' first)"
  local i=1 last
  last="$(nodes | tail -1)"; i=$((${last:-0} + 1))
  [ "$i" -le 9 ] || die "no more addresses: nodes 1..9 are taken (run '$0 down' and 'up' again)"
  free_ports "$i"
  rm -rf "$CLUSTER_DIR/node$i"
  write_conf "$i" bootstrap
  local t0=$SECONDS
  launch "$i"
  wait_cql "$i" "$ADD_TIMEOUT"
  wait_un "$i" "$ADD_TIMEOUT"
  echo "node $i (127.0.0.$i) joined: UN after $((SECONDS - t0))s"
}

# Stops node i (SIGTERM, KILL after 60 s); its data stays for `start`.
stop_node() {
  local i="$1" pid t=0
  pid="$(node_pid "$i")" || { echo "node $i is not running"; return 0; }
  kill "$pid"
  while kill -0 "$pid" 2>/dev/null && [ "$t" -lt 60 ]; do sleep 1; t=$((t + 1)); done
  kill -0 "$pid" 2>/dev/null && { echo "node $i (pid $pid) alive after 60s: KILL"; kill -9 "$pid"; }
  rm -f "$CLUSTER_DIR/node$i/cassandra.pid"
  echo "node $i (127.0.0.$i) stopped"
}

start_node() {
  local i="$1"
  [ -f "$CLUSTER_DIR/node$i/conf/cassandra.yaml" ] || die "no node $i in $CLUSTER_DIR"
  node_pid "$i" >/dev/null && die "node $i is already running (pid $(node_pid "$i"))"
  launch "$i"
  wait_cql "$i" "$UP_TIMEOUT"
  wait_un "$i" "$UP_TIMEOUT"
  echo "node $i (127.0.0.$i) is UN"
}

down() {
  local i pid stopped=0
  for i in $(nodes); do
    pid="$(node_pid "$i")" || continue
    kill "$pid"
    local t=0
    while kill -0 "$pid" 2>/dev/null && [ "$t" -lt 60 ]; do sleep 1; t=$((t + 1)); done
    kill -0 "$pid" 2>/dev/null && { echo "node $i (pid $pid) alive after 60s: KILL"; kill -9 "$pid"; }
    rm -f "$CLUSTER_DIR/node$i/cassandra.pid"; stopped=$((stopped + 1))
  done
  echo "stopped $stopped nodes"
}

num() { [[ "${1:-}" =~ ^[1-9]$ ]] || die "expected a node number 1..9, got '${1:-}'"; }

case "${1:-}" in
  up) up "${2:-3}" ;;
  down) down ;;
  add) add ;;
  stop) num "${2:-}"; stop_node "$2" ;;
  start) num "${2:-}"; start_node "$2" ;;
  nodetool) num "${2:-}"; node="$2"; shift 2; nodetool $((7099 + 100 * node)) "$@" ;;
  pids) p=(); for i in $(nodes); do pid="$(node_pid "$i")" && p+=("$pid"); done; (IFS=,; echo "${p[*]}") ;;
  status)
    for i in $(nodes); do echo "node $i 127.0.0.$i pid $(node_pid "$i" || echo '- (not running)')"; done
    node_pid 1 >/dev/null && nodetool 7199 status ;;
  *) echo "usage: $0 up [N] | status | pids | down | add | stop I | start I | nodetool I ARGS..." >&2; exit 2 ;;
esac
