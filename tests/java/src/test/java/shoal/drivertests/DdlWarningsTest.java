package shoal.drivertests;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * DDL must not make the driver log warnings. After each schema change the driver refreshes its
 * metadata from system_schema (and, for Cassandra 4+, system_virtual_schema); a server missing any
 * of those tables makes it log "Unexpected error while refreshing schema" at WARN.
 */
class DdlWarningsTest extends CqlTestBase {

  @Test
  void ddlLogsNoDriverWarnings() throws InterruptedException {
    int mark = DriverWarnings.mark();
    String other = uniqueName("ddlwarn");
    ddl("CREATE KEYSPACE " + other
        + " WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}");
    ddl("CREATE TABLE " + other + ".t1 (k int, c int, v text, PRIMARY KEY (k, c))");
    ddl("CREATE TABLE " + ks + ".t2 (k int PRIMARY KEY, v list<int>)");
    ddl("ALTER TABLE " + other + ".t1 ADD w int");
    ddl("DROP TABLE " + other + ".t1");
    ddl("DROP TABLE " + ks + ".t2");
    ddl("DROP KEYSPACE " + other);
    // schema change events are debounced (1 s) before the control connection refreshes; wait them out
    Thread.sleep(1_500);
    session.refreshSchema();
    List<String> warnings = DriverWarnings.since(mark, session);
    assertTrue(warnings.isEmpty(),
        "CREATE/ALTER/DROP of tables and keyspaces: expected no driver warnings, got:"
            + DriverWarnings.format(warnings));
  }
}
