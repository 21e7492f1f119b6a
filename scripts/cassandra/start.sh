#!/usr/bin/env bash
# Starts a single-node Apache Cassandra (install.sh's jars) in the background on
# 127.0.0.1:$CASS_PORT and waits until it accepts CQL connections.
# Env: CASS_HOME (the install, default $HOME/.cache/cassandra-ref), CASS_DATA (its config, data
#      and logs, default $CASS_HOME), CASS_PORT (CQL, default 9042), CASS_STORAGE_PORT (default
#      7000), CASS_JMX_PORT (default 7199), CASSANDRA_HEAP (default 2G), WIPE=1 to start empty.
# The PID goes to $CASS_DATA/cassandra.pid; stop.sh stops that process only.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CASS_HOME="${CASS_HOME:-$HOME/.cache/cassandra-ref}"
CASS_DATA="${CASS_DATA:-$CASS_HOME}"
PORT="${CASS_PORT:-9042}"
STORAGE_PORT="${CASS_STORAGE_PORT:-7000}"
JMX_PORT="${CASS_JMX_PORT:-7199}"
HEAP="${CASSANDRA_HEAP:-2G}"
PIDFILE="$CASS_DATA/cassandra.pid"
[ -d "$CASS_HOME/lib" ] || { echo "cassandra: no jars; run $HERE/install.sh first" >&2; exit 1; }
if [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
  echo "cassandra: already running, pid $(cat "$PIDFILE")"; exit 0
fi
[ "${WIPE:-0}" = 1 ] && rm -rf "$CASS_DATA/data"
mkdir -p "$CASS_DATA"/{conf,logs,data/data,data/commitlog,data/saved_caches,data/hints,data/cdc_raw}
sed -e "s|@CASS_HOME@|$CASS_DATA|g" -e "s|@PORT@|$PORT|g" -e "s|@STORAGE_PORT@|$STORAGE_PORT|g" \
  "$HERE/cassandra.yaml.template" > "$CASS_DATA/conf/cassandra.yaml"
cp "$HERE/logback.xml" "$CASS_DATA/conf/logback.xml"
JAMM="$(ls "$CASS_HOME"/lib/jamm-*.jar | head -1)"
mapfile -t JVM_OPTS < <(grep -E '^-' "$HERE/jvm17.options")
cd "$CASS_DATA"
setsid nohup java \
  "${JVM_OPTS[@]}" \
  -Xms"$HEAP" -Xmx"$HEAP" \
  -javaagent:"$JAMM" \
  -Dcassandra.jmx.local.port="$JMX_PORT" \
  -Dcassandra.ring_delay_ms=1000 -Dcassandra.skip_wait_for_gossip_to_settle=0 \
  -Dcassandra.config="file://$CASS_DATA/conf/cassandra.yaml" \
  -Dcassandra.storagedir="$CASS_DATA/data" \
  -Dcassandra.logdir="$CASS_DATA/logs" \
  -Dlogback.configurationFile="$CASS_DATA/conf/logback.xml" \
  -Dcassandra-foreground=yes \
  -cp "$CASS_DATA/conf:$CASS_HOME/lib/*" \
  org.apache.cassandra.service.CassandraDaemon -f \
  > "$CASS_DATA/logs/stdout.log" 2>&1 < /dev/null &
PID=$!
echo "$PID" > "$PIDFILE"
echo "cassandra: started pid $PID, waiting for 127.0.0.1:$PORT ..."
for i in $(seq 1 240); do
  if ! kill -0 "$PID" 2>/dev/null; then
    echo "cassandra: exited; see $CASS_DATA/logs/system.log and stdout.log" >&2
    tail -30 "$CASS_DATA/logs/stdout.log" >&2; rm -f "$PIDFILE"; exit 1
  fi
  if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
    echo "cassandra: up (pid $PID) after ${i}s"; exit 0
  fi
  sleep 1
done
echo "cassandra: timed out waiting for port $PORT" >&2; exit 1
