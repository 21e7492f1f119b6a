package shoal.drivertests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.datastax.oss.driver.api.core.AllNodesFailedException;
import com.datastax.oss.driver.api.core.DefaultConsistencyLevel;
import com.datastax.oss.driver.api.core.cql.Row;
import com.datastax.oss.driver.api.core.cql.SimpleStatement;
import com.datastax.oss.driver.api.core.servererrors.AlreadyExistsException;
import com.datastax.oss.driver.api.core.servererrors.InvalidQueryException;
import com.datastax.oss.driver.api.core.servererrors.SyntaxError;
import com.datastax.oss.driver.api.core.servererrors.UnavailableException;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

/** Server errors arrive as the driver's typed exceptions, with Cassandra's meanings. */
class ErrorsTest extends CqlTestBase {

  @BeforeAll
  void createTable() {
    ddl("CREATE TABLE " + table("t") + " (k int PRIMARY KEY, v text)");
  }

  /** Like assertThrows, but says what was thrown instead when it's the wrong type. */
  private static <T extends Throwable> T expect(Class<T> type, String what, Executable action) {
    try {
      action.execute();
    } catch (Throwable t) {
      if (type.isInstance(t)) {
        return type.cast(t);
      }
      throw new AssertionError(what + ": expected " + type.getSimpleName() + ", got " + t.getClass().getName()
          + ": " + t.getMessage(), t);
    }
    return fail(what + ": expected " + type.getSimpleName() + ", but it succeeded");
  }

  @Test
  void syntaxError() {
    expect(SyntaxError.class, "SELEC * FROM t", () -> session.execute("SELEC * FROM " + table("t")));
    expect(SyntaxError.class, "SELECT * FROM t WHERE", () -> session.execute("SELECT * FROM " + table("t") + " WHERE"));
    expect(SyntaxError.class, "preparing INSERT INTO t (k, v VALUES (?, ?)",
        () -> session.prepare("INSERT INTO " + table("t") + " (k, v VALUES (?, ?)"));
  }

  @Test
  void missingTableOrKeyspace() {
    expect(InvalidQueryException.class, "SELECT from a table that does not exist",
        () -> session.execute("SELECT * FROM " + table("no_such_table")));
    expect(InvalidQueryException.class, "SELECT from a keyspace that does not exist",
        () -> session.execute("SELECT * FROM no_such_keyspace_jdt.t"));
    expect(InvalidQueryException.class, "INSERT into a table that does not exist",
        () -> session.execute("INSERT INTO " + table("no_such_table") + " (k) VALUES (1)"));
    expect(InvalidQueryException.class, "preparing a SELECT from a table that does not exist",
        () -> session.prepare("SELECT * FROM " + table("no_such_table") + " WHERE k = ?"));
    expect(InvalidQueryException.class, "DROP TABLE of a table that does not exist",
        () -> ddl("DROP TABLE " + table("no_such_table")));
  }

  @Test
  void invalidQueries() {
    expect(InvalidQueryException.class, "SELECT of an unknown column",
        () -> session.execute("SELECT nope FROM " + table("t")));
    expect(InvalidQueryException.class, "a text literal compared with an int key",
        () -> session.execute("SELECT * FROM " + table("t") + " WHERE k = 'abc'"));
    expect(InvalidQueryException.class, "INSERT without the partition key",
        () -> session.execute("INSERT INTO " + table("t") + " (v) VALUES ('x')"));
    expect(InvalidQueryException.class, "a restriction on a non-key column without ALLOW FILTERING",
        () -> session.execute("SELECT * FROM " + table("t") + " WHERE v = 'x'"));
  }

  @Test
  void createExistingTableOrKeyspace() {
    expect(AlreadyExistsException.class, "CREATE TABLE of an existing table",
        () -> ddl("CREATE TABLE " + table("t") + " (k int PRIMARY KEY, v text)"));
    expect(AlreadyExistsException.class, "CREATE KEYSPACE of an existing keyspace",
        () -> ddl("CREATE KEYSPACE " + ks + " WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"));
    // IF NOT EXISTS is not an error
    ddl("CREATE TABLE IF NOT EXISTS " + table("t") + " (k int PRIMARY KEY, v text)");
  }

  /**
   * CL THREE with one replica: Cassandra answers Unavailable (required 3, alive 1). The default retry
   * policy then tries the next node once; on a one-node cluster there is none, so the driver reports
   * AllNodesFailedException carrying the UnavailableException.
   */
  @Test
  void consistencyThreeOnOneNodeIsUnavailable() {
    for (String cql : List.of("INSERT INTO " + table("t") + " (k, v) VALUES (1, 'x')",
        "SELECT * FROM " + table("t") + " WHERE k = 1")) {
      SimpleStatement statement = SimpleStatement.builder(cql).setConsistencyLevel(DefaultConsistencyLevel.THREE).build();
      Throwable thrown;
      try {
        session.execute(statement);
        fail(cql + " at CL THREE on a one-node cluster: expected UnavailableException, but it succeeded");
        return;
      } catch (UnavailableException | AllNodesFailedException e) {
        thrown = e;
      } catch (RuntimeException e) {
        throw new AssertionError(cql + " at CL THREE: expected UnavailableException (possibly inside "
            + "AllNodesFailedException), got " + e.getClass().getName() + ": " + e.getMessage(), e);
      }
      UnavailableException unavailable = unavailable(cql, thrown);
      assertEquals(DefaultConsistencyLevel.THREE, unavailable.getConsistencyLevel(), cql + ": consistency level in the error");
      assertEquals(3, unavailable.getRequired(), cql + ": required replicas in the error");
      assertEquals(1, unavailable.getAlive(), cql + ": alive replicas in the error");
    }
  }

  private static UnavailableException unavailable(String cql, Throwable thrown) {
    if (thrown instanceof UnavailableException) {
      return (UnavailableException) thrown;
    }
    Map<?, List<Throwable>> errors = ((AllNodesFailedException) thrown).getAllErrors();
    for (List<Throwable> perNode : errors.values()) {
      for (Throwable error : perNode) {
        if (error instanceof UnavailableException) {
          return (UnavailableException) error;
        }
      }
    }
    throw new AssertionError(cql + " at CL THREE: expected an UnavailableException among the node errors, got "
        + errors, thrown);
  }

  @Test
  void sessionStillWorksAfterErrors() {
    for (int i = 0; i < 5; i++) {
      expect(SyntaxError.class, "garbage query " + i, () -> session.execute("THIS IS NOT CQL"));
    }
    session.execute(SimpleStatement.newInstance("INSERT INTO " + table("t") + " (k, v) VALUES (?, ?)", 2, "ok"));
    Row row = session.execute(SimpleStatement.newInstance("SELECT v FROM " + table("t") + " WHERE k = ?", 2)).one();
    assertNotNull(row, "SELECT after several errors: expected one row, got none");
    assertEquals("ok", row.getString(0), "value read after errors");
    assertTrue(session.getMetadata().getNodes().values().stream().allMatch(n -> n.getOpenConnections() > 0),
        "every node should still have open connections after the errors");
  }
}
