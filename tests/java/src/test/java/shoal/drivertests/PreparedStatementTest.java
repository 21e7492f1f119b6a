package shoal.drivertests;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import com.datastax.oss.driver.api.core.CqlSession;
import com.datastax.oss.driver.api.core.cql.BoundStatement;
import com.datastax.oss.driver.api.core.cql.ColumnDefinitions;
import com.datastax.oss.driver.api.core.cql.PreparedStatement;
import com.datastax.oss.driver.api.core.cql.Row;
import com.datastax.oss.driver.api.core.cql.SimpleStatement;
import com.datastax.oss.driver.api.core.type.DataTypes;
import com.datastax.oss.driver.api.core.type.codec.TypeCodecs;
import com.datastax.oss.protocol.internal.util.Bytes;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Prepared statements (positional and named values, metadata, re-preparation) and simple statements with values. */
class PreparedStatementTest extends CqlTestBase {

  @BeforeAll
  void createTables() {
    ddl("CREATE TABLE " + table("kv") + " (k int PRIMARY KEY, v text, n bigint)");
    ddl("CREATE TABLE " + table("wide") + " (a int, b text, c int, v text, PRIMARY KEY ((a, b), c))");
  }

  private String readV(int k) {
    Row row = session.execute(SimpleStatement.newInstance("SELECT v FROM " + table("kv") + " WHERE k = ?", k)).one();
    assertNotNull(row, "SELECT v WHERE k = " + k + ": expected one row, got none");
    return row.getString("v");
  }

  @Test
  void positionalBindValues() {
    PreparedStatement insert = session.prepare("INSERT INTO " + table("kv") + " (k, v, n) VALUES (?, ?, ?)");
    session.execute(insert.bind(1, "one", 1L));
    PreparedStatement select = session.prepare("SELECT v, n FROM " + table("kv") + " WHERE k = ?");
    Row row = session.execute(select.bind(1)).one();
    assertNotNull(row, "prepared SELECT k = 1: expected one row, got none");
    assertEquals("one", row.getString(0), "v");
    assertEquals(1L, row.getLong(1), "n");
    // setters by index on a bound statement
    session.execute(insert.bind().setInt(0, 2).setString(1, "two").setLong(2, 2L));
    assertEquals("two", readV(2), "v written with setInt/setString by index");
  }

  @Test
  void namedBindValuesByColumnName() {
    PreparedStatement insert = session.prepare("INSERT INTO " + table("kv") + " (k, v) VALUES (?, ?)");
    assertEquals(List.of("k", "v"), names(insert.getVariableDefinitions()), "bind marker names (column names)");
    session.execute(insert.boundStatementBuilder().setString("v", "three").setInt("k", 3).build());
    assertEquals("three", readV(3), "v written by column name");
  }

  @Test
  void namedBindMarkers() {
    PreparedStatement insert = session.prepare(
        "INSERT INTO " + table("kv") + " (k, v, n) VALUES (:key, :value, :num)");
    assertEquals(List.of("key", "value", "num"), names(insert.getVariableDefinitions()), "named bind markers");
    session.execute(insert.boundStatementBuilder().setLong("num", 4L).setString("value", "four").setInt("key", 4).build());
    PreparedStatement select = session.prepare("SELECT v FROM " + table("kv") + " WHERE k = :wanted");
    Row row = session.execute(select.boundStatementBuilder().setInt("wanted", 4).build()).one();
    assertNotNull(row, "SELECT with :wanted = 4: expected one row, got none");
    assertEquals("four", row.getString("v"), "v written with named markers");
  }

  @Test
  void preparedMetadataDescribesVariablesResultAndRouting() {
    PreparedStatement insert = session.prepare(
        "INSERT INTO " + table("wide") + " (a, b, c, v) VALUES (?, ?, ?, ?)");
    ColumnDefinitions vars = insert.getVariableDefinitions();
    assertEquals(List.of("a", "b", "c", "v"), names(vars), "variable names");
    assertEquals(List.of("int", "text", "int", "text"),
        types(vars), "variable types");
    assertEquals(ks, vars.get(0).getKeyspace().asInternal(), "keyspace of variable a");
    assertEquals("wide", vars.get(0).getTable().asInternal(), "table of variable a");
    assertEquals(List.of(0, 1), insert.getPartitionKeyIndices(), "partition key indices of (a, b, c, v)");

    // partition key columns bound out of order
    PreparedStatement reordered = session.prepare(
        "INSERT INTO " + table("wide") + " (v, c, b, a) VALUES (?, ?, ?, ?)");
    assertEquals(List.of(3, 2), reordered.getPartitionKeyIndices(), "partition key indices of (v, c, b, a)");
    BoundStatement bound = reordered.bind("x", 1, "bee", 7);
    assertNotNull(bound.getRoutingKey(), "routing key of a bound INSERT: expected one, got null");
    assertEquals(compositeRoutingKeyHex(7, "bee"), Bytes.toHexString(bound.getRoutingKey()),
        "routing key of (a = 7, b = 'bee')");
    session.execute(bound);

    PreparedStatement select = session.prepare(
        "SELECT c, v FROM " + table("wide") + " WHERE a = ? AND b = ? AND c >= ?");
    ColumnDefinitions result = select.getResultSetDefinitions();
    assertEquals(List.of("c", "v"), names(result), "result column names known at prepare time");
    assertEquals(DataTypes.INT, result.get("c").getType(), "type of result column c");
    Row row = session.execute(select.bind(7, "bee", 0)).one();
    assertNotNull(row, "SELECT (7, 'bee'): expected one row, got none");
    assertEquals("x", row.getString("v"), "v");
  }

  /** The routing key of a composite partition key: each component length-prefixed and followed by a 0 byte. */
  private String compositeRoutingKeyHex(int a, String b) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    for (ByteBuffer component : List.of(
        TypeCodecs.INT.encode(a, session.getContext().getProtocolVersion()),
        TypeCodecs.TEXT.encode(b, session.getContext().getProtocolVersion()))) {
      byte[] bytes = Bytes.getArray(component);
      out.write((bytes.length >> 8) & 0xff);
      out.write(bytes.length & 0xff);
      out.write(bytes, 0, bytes.length);
      out.write(0);
    }
    return Bytes.toHexString(out.toByteArray());
  }

  @Test
  void preparingTheSameQueryGivesTheSameIdInEverySession() {
    String query = "SELECT v FROM " + table("kv") + " WHERE k = ?";
    PreparedStatement first = session.prepare(query);
    PreparedStatement again = session.prepare(query);
    assertArrayEquals(Bytes.getArray(first.getId()), Bytes.getArray(again.getId()),
        "statement id when preparing the same query twice");
    try (CqlSession other = Env.connect()) {
      PreparedStatement elsewhere = other.prepare(query);
      assertEquals(Bytes.toHexString(first.getId()), Bytes.toHexString(elsewhere.getId()),
          "statement id of the same query prepared from another session");
    }
  }

  /**
   * Cassandra forgets statements on a dropped table; executing one then gets UNPREPARED and the
   * driver must re-prepare it transparently and retry.
   */
  @Test
  void reprepareAfterTableIsRecreated() {
    ddl("CREATE TABLE " + table("recreated") + " (k int PRIMARY KEY, v text)");
    PreparedStatement insert = session.prepare("INSERT INTO " + table("recreated") + " (k, v) VALUES (?, ?)");
    PreparedStatement select = session.prepare("SELECT v FROM " + table("recreated") + " WHERE k = ?");
    session.execute(insert.bind(1, "before"));
    ddl("DROP TABLE " + table("recreated"));
    ddl("CREATE TABLE " + table("recreated") + " (k int PRIMARY KEY, v text)");
    session.execute(insert.bind(1, "after"));
    Row row = session.execute(select.bind(1)).one();
    assertNotNull(row, "SELECT from the recreated table with a statement prepared before: expected one row, got none");
    assertEquals("after", row.getString(0), "v read with a statement prepared before the table was recreated");
  }

  @Test
  void unsetValuesLeaveColumnsUntouched() {
    PreparedStatement insert = session.prepare("INSERT INTO " + table("kv") + " (k, v, n) VALUES (?, ?, ?)");
    session.execute(insert.bind(5, "five", 5L));
    // only k and n set: v is UNSET, which must not overwrite (or delete) the stored value
    session.execute(insert.bind().setInt("k", 5).setLong("n", 55L));
    Row row = session.execute(SimpleStatement.newInstance("SELECT v, n FROM " + table("kv") + " WHERE k = ?", 5)).one();
    assertNotNull(row, "SELECT k = 5: expected one row, got none");
    assertEquals("five", row.getString("v"), "v after an INSERT that left it unset");
    assertEquals(55L, row.getLong("n"), "n after the second INSERT");
  }

  @Test
  void bindListForInAndLimit() {
    PreparedStatement insert = session.prepare("INSERT INTO " + table("kv") + " (k, v) VALUES (?, ?)");
    for (int k = 10; k < 20; k++) {
      session.execute(insert.bind(k, "v" + k));
    }
    PreparedStatement in = session.prepare("SELECT k, v FROM " + table("kv") + " WHERE k IN ?");
    List<Integer> keys = List.of(11, 13, 17, 99);
    List<Integer> found = new ArrayList<>();
    for (Row row : session.execute(in.bind(keys))) {
      found.add(row.getInt("k"));
      assertEquals("v" + row.getInt("k"), row.getString("v"), "v of k " + row.getInt("k"));
    }
    found.sort(null);
    assertEquals(List.of(11, 13, 17), found, "rows for k IN " + keys);

    PreparedStatement limited = session.prepare("SELECT k FROM " + table("kv") + " WHERE k IN (10, 11, 12, 13) LIMIT ?");
    assertEquals(2, session.execute(limited.bind(2)).all().size(), "rows with LIMIT ? bound to 2");
  }

  @Test
  void simpleStatementWithPositionalValues() {
    session.execute(SimpleStatement.newInstance("INSERT INTO " + table("kv") + " (k, v, n) VALUES (?, ?, ?)", 30, "thirty", 30L));
    Row row = session.execute(SimpleStatement.newInstance("SELECT v, n FROM " + table("kv") + " WHERE k = ?", 30)).one();
    assertNotNull(row, "simple SELECT with a positional value: expected one row, got none");
    assertEquals("thirty", row.getString("v"), "v");
    assertEquals(30L, row.getLong("n"), "n");

    session.execute(SimpleStatement.builder("UPDATE " + table("kv") + " SET v = ? WHERE k = ?")
        .addPositionalValues("thirty-one", 31).build());
    assertEquals("thirty-one", readV(31), "v written by a simple UPDATE with positional values");
  }

  @Test
  void simpleStatementWithNamedValues() {
    session.execute(SimpleStatement.newInstance(
        "INSERT INTO " + table("kv") + " (k, v) VALUES (:k, :v)", Map.of("k", 40, "v", "forty")));
    Row row = session.execute(SimpleStatement.builder("SELECT v FROM " + table("kv") + " WHERE k = :k")
        .addNamedValue("k", 40).build()).one();
    assertNotNull(row, "simple SELECT with a named value: expected one row, got none");
    assertEquals("forty", row.getString("v"), "v");
  }

  private static List<String> types(ColumnDefinitions defs) {
    List<String> types = new ArrayList<>();
    defs.forEach(d -> types.add(d.getType().asCql(false, true)));
    return types;
  }

  private static List<String> names(ColumnDefinitions defs) {
    List<String> names = new ArrayList<>();
    defs.forEach(d -> names.add(d.getName().asInternal()));
    return names;
  }
}
