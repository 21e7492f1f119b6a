#!/usr/bin/env bash
# Stops the Cassandra that start.sh started (the PID in its pid file, and only if that
# process is a CassandraDaemon). Env: CASS_HOME, CASS_DATA as for start.sh.
set -euo pipefail
CASS_HOME="${CASS_HOME:-$HOME/.cache/cassandra-ref}"
CASS_DATA="${CASS_DATA:-$CASS_HOME}"
PIDFILE="$CASS_DATA/cassandra.pid"
[ -f "$PIDFILE" ] || { echo "cassandra: no pid file; not running?"; exit 0; }
PID="$(cat "$PIDFILE")"
if ! kill -0 "$PID" 2>/dev/null; then echo "cassandra: pid $PID not running"; rm -f "$PIDFILE"; exit 0; fi
if ! tr '\0' ' ' < "/proc/$PID/cmdline" | grep -q CassandraDaemon; then
  echo "cassandra: pid $PID is not CassandraDaemon; refusing to kill" >&2; exit 1
fi
kill "$PID"
for _ in $(seq 1 60); do kill -0 "$PID" 2>/dev/null || { echo "cassandra: stopped $PID"; rm -f "$PIDFILE"; exit 0; }; sleep 1; done
echo "cassandra: still alive after 60s; sending KILL to $PID"; kill -9 "$PID"; rm -f "$PIDFILE"
