#!/usr/bin/env bash
# Installs Apache Cassandra (cassandra-all and its runtime jars, from Maven Central) into
# $CASS_HOME/lib (default $HOME/.cache/cassandra-ref/lib), the reference Shoal is compared
# with: the differential driver tests (scripts/driver-tests.sh --cassandra) and bench/compare.
# Needs java 17 and mvn. Idempotent.
set -euo pipefail
CASSANDRA_VERSION="${CASSANDRA_VERSION:-5.0.9}"
CASS_HOME="${CASS_HOME:-$HOME/.cache/cassandra-ref}"
if [ -f "$CASS_HOME/lib/cassandra-all-$CASSANDRA_VERSION.jar" ]; then
  echo "cassandra: $CASSANDRA_VERSION already installed in $CASS_HOME/lib"
  exit 0
fi
command -v mvn >/dev/null 2>&1 || { echo "cassandra: mvn (Maven) and java 17 are required" >&2; exit 1; }
mkdir -p "$CASS_HOME/fetch"
cat > "$CASS_HOME/fetch/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>shoal</groupId><artifactId>cassandra-fetch</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.cassandra</groupId><artifactId>cassandra-all</artifactId>
      <version>$CASSANDRA_VERSION</version>
    </dependency>
  </dependencies>
</project>
POM
rm -rf "$CASS_HOME/lib"
( cd "$CASS_HOME/fetch" && mvn -q -B dependency:copy-dependencies \
    -DoutputDirectory="$CASS_HOME/lib" -DincludeScope=runtime )
echo "$CASSANDRA_VERSION" > "$CASS_HOME/VERSION"
echo "cassandra: installed $(ls "$CASS_HOME/lib" | wc -l) jars into $CASS_HOME/lib"
