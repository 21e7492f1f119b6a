package shoal.drivertests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.datastax.oss.driver.api.core.CqlSession;
import com.datastax.oss.driver.api.core.DefaultConsistencyLevel;
import com.datastax.oss.driver.api.core.ProtocolVersion;
import com.datastax.oss.driver.api.core.cql.ResultSet;
import com.datastax.oss.driver.api.core.cql.Row;
import com.datastax.oss.driver.api.core.cql.SimpleStatement;
import com.datastax.oss.driver.api.core.metadata.Node;
import com.datastax.oss.driver.api.core.metadata.NodeState;
import java.util.Collection;
import java.util.List;
import java.util.stream.Collectors;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** Connecting with the driver's default settings, and consistency levels on a single node. */
class ConnectionTest extends CqlTestBase {

  @BeforeAll
  void createTable() {
    ddl("CREATE TABLE " + table("kv") + " (k int PRIMARY KEY, v text)");
  }

  @Test
  void defaultSettingsNegotiateV4OrV5AndWork() {
    try (CqlSession fresh = Env.connect()) {
      ProtocolVersion version = fresh.getContext().getProtocolVersion();
      assertTrue(version.getCode() == 4 || version.getCode() == 5,
          "negotiated protocol version: expected V4 or V5, got " + version + " against " + Env.describe());

      Row local = fresh.execute("SELECT release_version, cluster_name FROM system.local").one();
      assertNotNull(local, "SELECT ... FROM system.local: expected one row, got none");
      String release = local.getString("release_version");
      assertTrue(release != null && !release.isEmpty(),
          "system.local release_version: expected a version string, got '" + release + "'");

      Collection<Node> nodes = fresh.getMetadata().getNodes().values();
      assertFalse(nodes.isEmpty(), "metadata nodes: expected at least one node, got none");
      List<Node> localDc = nodes.stream().filter(n -> Env.DC.equals(n.getDatacenter()))
          .collect(Collectors.toList());
      assertFalse(localDc.isEmpty(), "nodes in local datacenter '" + Env.DC + "': expected at least one, got "
          + nodes.stream().map(n -> n.getEndPoint() + " dc=" + n.getDatacenter()).collect(Collectors.toList()));
      for (Node node : localDc) {
        assertEquals(NodeState.UP, node.getState(), "state of node " + node.getEndPoint());
      }
      assertNotNull(nodes.iterator().next().getCassandraVersion(),
          "node Cassandra version (from release_version): expected a parsed version, got null (release_version '"
              + release + "')");

      // and the negotiated session does real work
      ResultSet rs = fresh.execute(SimpleStatement.newInstance(
          "INSERT INTO " + table("kv") + " (k, v) VALUES (?, ?)", 1, "one"));
      assertTrue(rs.wasApplied(), "INSERT wasApplied");
      Row row = fresh.execute(SimpleStatement.newInstance(
          "SELECT v FROM " + table("kv") + " WHERE k = ?", 1)).one();
      assertNotNull(row, "SELECT after INSERT: expected one row, got none");
      assertEquals("one", row.getString("v"), "value read back");
    }
  }

  @Test
  void connectingLogsNoDriverWarnings() throws InterruptedException {
    int mark = DriverWarnings.mark();
    List<String> warnings;
    try (CqlSession fresh = Env.connect()) {
      fresh.execute("SELECT release_version FROM system.local");
      // schema and token metadata are loaded during connect; give late events a moment
      Thread.sleep(500);
      warnings = DriverWarnings.since(mark, fresh);
    }
    assertTrue(warnings.isEmpty(),
        "connecting with default settings: expected no driver warnings, got:" + DriverWarnings.format(warnings));
  }

  @Test
  void sessionBoundToKeyspaceUsesUnqualifiedNames() {
    try (CqlSession bound = CqlSession.builder().addContactPoint(Env.contactPoint())
        .withLocalDatacenter(Env.DC).withKeyspace(ks).build()) {
      assertEquals(ks, bound.getKeyspace().map(k -> k.asInternal()).orElse(null), "session keyspace");
      bound.execute(SimpleStatement.newInstance("INSERT INTO kv (k, v) VALUES (?, ?)", 2, "two"));
      Row row = bound.execute(SimpleStatement.newInstance("SELECT v FROM kv WHERE k = ?", 2)).one();
      assertNotNull(row, "SELECT kv (unqualified) after INSERT: expected one row, got none");
      assertEquals("two", row.getString(0), "value read back through the keyspace-bound session");
    }
  }

  @ParameterizedTest
  @EnumSource(value = DefaultConsistencyLevel.class,
      names = {"ONE", "QUORUM", "LOCAL_ONE", "LOCAL_QUORUM", "ALL"})
  void consistencyLevelWorksOnOneNode(DefaultConsistencyLevel cl) {
    int k = 100 + cl.ordinal();
    session.execute(SimpleStatement.builder("INSERT INTO " + table("kv") + " (k, v) VALUES (?, ?)")
        .addPositionalValues(k, "cl " + cl).setConsistencyLevel(cl).build());
    Row row = session.execute(SimpleStatement.builder("SELECT v FROM " + table("kv") + " WHERE k = ?")
        .addPositionalValue(k).setConsistencyLevel(cl).build()).one();
    assertNotNull(row, "read at " + cl + " after write at " + cl + ": expected one row, got none");
    assertEquals("cl " + cl, row.getString("v"), "value read at " + cl);

    // a full scan at that consistency level too
    long count = session.execute(SimpleStatement.builder("SELECT k FROM " + table("kv"))
        .setConsistencyLevel(cl).build()).all().size();
    assertTrue(count >= 1, "SELECT k FROM kv at " + cl + ": expected at least 1 row, got " + count);
  }
}
