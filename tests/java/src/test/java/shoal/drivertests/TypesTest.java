package shoal.drivertests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.datastax.oss.driver.api.core.cql.ColumnDefinitions;
import com.datastax.oss.driver.api.core.cql.PreparedStatement;
import com.datastax.oss.driver.api.core.cql.Row;
import com.datastax.oss.driver.api.core.data.CqlDuration;
import com.datastax.oss.driver.api.core.data.TupleValue;
import com.datastax.oss.driver.api.core.data.UdtValue;
import com.datastax.oss.driver.api.core.type.DataType;
import com.datastax.oss.driver.api.core.type.DataTypes;
import com.datastax.oss.driver.api.core.type.TupleType;
import com.datastax.oss.driver.api.core.type.UserDefinedType;
import com.datastax.oss.driver.api.core.uuid.Uuids;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.nio.ByteBuffer;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalTime;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/** Every CQL type (but counter) round-trips through a prepared INSERT and a SELECT. */
class TypesTest extends CqlTestBase {

  /** Column name to CQL type, in table order. */
  private static final Map<String, String> COLUMNS = new LinkedHashMap<>();

  static {
    COLUMNS.put("c_ascii", "ascii");
    COLUMNS.put("c_bigint", "bigint");
    COLUMNS.put("c_blob", "blob");
    COLUMNS.put("c_boolean", "boolean");
    COLUMNS.put("c_date", "date");
    COLUMNS.put("c_decimal", "decimal");
    COLUMNS.put("c_double", "double");
    COLUMNS.put("c_duration", "duration");
    COLUMNS.put("c_float", "float");
    COLUMNS.put("c_inet", "inet");
    COLUMNS.put("c_int", "int");
    COLUMNS.put("c_smallint", "smallint");
    COLUMNS.put("c_text", "text");
    COLUMNS.put("c_time", "time");
    COLUMNS.put("c_timestamp", "timestamp");
    COLUMNS.put("c_timeuuid", "timeuuid");
    COLUMNS.put("c_tinyint", "tinyint");
    COLUMNS.put("c_uuid", "uuid");
    COLUMNS.put("c_varchar", "varchar");
    COLUMNS.put("c_varint", "varint");
    COLUMNS.put("c_list", "list<int>");
    COLUMNS.put("c_set", "set<text>");
    COLUMNS.put("c_map", "map<text, int>");
    COLUMNS.put("c_tuple", "tuple<int, text>");
    COLUMNS.put("c_frozen_list", "frozen<list<int>>");
    COLUMNS.put("c_map_of_lists", "map<text, frozen<list<int>>>");
    COLUMNS.put("c_list_of_maps", "list<frozen<map<int, text>>>");
    COLUMNS.put("c_set_of_tuples", "set<frozen<tuple<int, text>>>");
    COLUMNS.put("c_frozen_nested", "frozen<map<text, frozen<set<bigint>>>>");
  }

  private static final TupleType INT_TEXT = DataTypes.tupleOf(DataTypes.INT, DataTypes.TEXT);
  private static final AtomicInteger NEXT_KEY = new AtomicInteger(1);

  /** One value to store in one column; {@code type} is what the server's result metadata must say. */
  static final class Case {
    final String column;
    final DataType type;
    final Object value;
    final String label;

    Case(String column, DataType type, Object value, String label) {
      this.column = column;
      this.type = type;
      this.value = value;
      this.label = label;
    }

    @Override
    public String toString() {
      return column + " = " + label;
    }
  }

  private static Case of(String column, DataType type, Object value) {
    return new Case(column, type, value, String.valueOf(value));
  }

  private static Case of(String column, DataType type, Object value, String label) {
    return new Case(column, type, value, label);
  }

  private static InetAddress inet(String address) {
    try {
      return InetAddress.getByName(address);
    } catch (UnknownHostException e) {
      throw new IllegalArgumentException(address, e);
    }
  }

  private static TupleValue tuple(int i, String s) {
    return INT_TEXT.newValue(i, s);
  }

  static Stream<Case> cases() {
    return Stream.of(
        of("c_ascii", DataTypes.ASCII, "plain ascii ~!@#"),
        of("c_bigint", DataTypes.BIGINT, Long.MAX_VALUE),
        of("c_bigint", DataTypes.BIGINT, Long.MIN_VALUE),
        of("c_blob", DataTypes.BLOB, ByteBuffer.wrap(new byte[] {0, 1, 2, (byte) 0x7f, (byte) 0x80, (byte) 0xff}), "0x0001027f80ff"),
        of("c_blob", DataTypes.BLOB, ByteBuffer.allocate(0), "empty blob"),
        of("c_boolean", DataTypes.BOOLEAN, true),
        of("c_boolean", DataTypes.BOOLEAN, false),
        of("c_date", DataTypes.DATE, LocalDate.of(2024, 2, 29)),
        of("c_date", DataTypes.DATE, LocalDate.of(1969, 7, 20)),
        of("c_decimal", DataTypes.DECIMAL, new BigDecimal("12345678901234567890.0123456789")),
        of("c_decimal", DataTypes.DECIMAL, new BigDecimal("-0.000001")),
        of("c_double", DataTypes.DOUBLE, Math.PI),
        of("c_double", DataTypes.DOUBLE, Double.NEGATIVE_INFINITY),
        of("c_duration", DataTypes.DURATION, CqlDuration.newInstance(14, 3, 3_723_000_000_123L)),
        of("c_duration", DataTypes.DURATION, CqlDuration.newInstance(-1, -2, -3)),
        of("c_float", DataTypes.FLOAT, 1.5f),
        of("c_float", DataTypes.FLOAT, -3.4028235e38f),
        of("c_inet", DataTypes.INET, inet("192.168.1.10")),
        of("c_inet", DataTypes.INET, inet("2001:db8::ff00:42:8329")),
        of("c_int", DataTypes.INT, Integer.MIN_VALUE),
        of("c_int", DataTypes.INT, 42),
        of("c_smallint", DataTypes.SMALLINT, Short.MIN_VALUE),
        of("c_smallint", DataTypes.SMALLINT, (short) 12345),
        of("c_text", DataTypes.TEXT, "héllo wörld ✓ 日本語 😀"),
        of("c_text", DataTypes.TEXT, "", "empty string"),
        of("c_time", DataTypes.TIME, LocalTime.of(13, 45, 30, 123_456_789)),
        of("c_time", DataTypes.TIME, LocalTime.MIDNIGHT),
        of("c_timestamp", DataTypes.TIMESTAMP, Instant.parse("2024-05-06T07:08:09.123Z")),
        of("c_timestamp", DataTypes.TIMESTAMP, Instant.parse("1969-07-20T20:17:40Z")),
        of("c_timeuuid", DataTypes.TIMEUUID, Uuids.timeBased()),
        of("c_tinyint", DataTypes.TINYINT, Byte.MIN_VALUE),
        of("c_tinyint", DataTypes.TINYINT, (byte) 127),
        of("c_uuid", DataTypes.UUID, UUID.fromString("0f4e1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b")),
        of("c_varchar", DataTypes.TEXT, "varchar is text"),
        of("c_varint", DataTypes.VARINT, new BigInteger("123456789012345678901234567890")),
        of("c_varint", DataTypes.VARINT, new BigInteger("-98765432109876543210")),
        of("c_list", DataTypes.listOf(DataTypes.INT), List.of(3, 1, 2, 3)),
        of("c_set", DataTypes.setOf(DataTypes.TEXT), Set.of("b", "a", "c")),
        of("c_map", DataTypes.mapOf(DataTypes.TEXT, DataTypes.INT), Map.of("one", 1, "two", 2, "three", 3)),
        of("c_tuple", INT_TEXT, tuple(7, "seven"), "(7, 'seven')"),
        of("c_tuple", INT_TEXT, INT_TEXT.newValue(8, null), "(8, null)"),
        of("c_frozen_list", DataTypes.frozenListOf(DataTypes.INT), List.of(5, 4, 5)),
        of("c_map_of_lists", DataTypes.mapOf(DataTypes.TEXT, DataTypes.frozenListOf(DataTypes.INT)),
            Map.of("a", List.of(1, 2), "b", List.of(), "c", List.of(3))),
        of("c_list_of_maps", DataTypes.listOf(DataTypes.frozenMapOf(DataTypes.INT, DataTypes.TEXT)),
            List.of(Map.of(1, "x"), Map.of(2, "y", 3, "z"))),
        of("c_set_of_tuples", DataTypes.setOf(INT_TEXT),
            Set.of(tuple(1, "a"), tuple(2, "b")), "{(1, 'a'), (2, 'b')}"),
        of("c_frozen_nested",
            DataTypes.frozenMapOf(DataTypes.TEXT, DataTypes.frozenSetOf(DataTypes.BIGINT)),
            Map.of("evens", Set.of(2L, 4L), "odds", Set.of(1L, 3L, 5L))));
  }

  @BeforeAll
  void createTable() {
    StringBuilder cql = new StringBuilder("CREATE TABLE " + table("all_types") + " (k int PRIMARY KEY");
    COLUMNS.forEach((name, type) -> cql.append(", ").append(name).append(' ').append(type));
    ddl(cql.append(')').toString());
  }

  /** Compares the CQL of two types, ignoring frozen: the protocol's type descriptors don't carry it. */
  private static String cql(DataType type) {
    return type.asCql(false, true);
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("cases")
  void valueRoundTripsThroughPreparedInsertAndSelect(Case c) {
    int k = NEXT_KEY.getAndIncrement();
    PreparedStatement insert = session.prepare(
        "INSERT INTO " + table("all_types") + " (k, " + c.column + ") VALUES (?, ?)");
    assertEquals(cql(c.type), cql(insert.getVariableDefinitions().get(c.column).getType()),
        "type of bind marker for " + c.column + " in the PREPARED response");
    session.execute(insert.bind(k, c.value));

    PreparedStatement select = session.prepare(
        "SELECT " + c.column + " FROM " + table("all_types") + " WHERE k = ?");
    Row row = session.execute(select.bind(k)).one();
    assertNotNull(row, "SELECT " + c.column + " for k = " + k + ": expected one row, got none");
    ColumnDefinitions defs = row.getColumnDefinitions();
    assertEquals(cql(c.type), cql(defs.get(c.column).getType()),
        "type of " + c.column + " in the ROWS metadata");
    Object back = row.getObject(c.column);
    assertEquals(c.value, back, c.column + " (" + COLUMNS.get(c.column) + "): wrote " + c.label + ", read back " + back);

    // the same value through an unprepared SELECT with the key as a literal
    Row literal = session.execute("SELECT " + c.column + " FROM " + table("all_types") + " WHERE k = " + k).one();
    assertNotNull(literal, "unprepared SELECT for k = " + k + ": expected one row, got none");
    assertEquals(c.value, literal.getObject(c.column), c.column + " via an unprepared SELECT");
  }

  @Test
  void nullsRoundTrip() {
    int k = NEXT_KEY.getAndIncrement();
    String names = String.join(", ", COLUMNS.keySet());
    String markers = COLUMNS.keySet().stream().map(n -> "?").collect(Collectors.joining(", "));
    PreparedStatement insert = session.prepare(
        "INSERT INTO " + table("all_types") + " (k, " + names + ") VALUES (?, " + markers + ")");
    List<Object> values = new ArrayList<>();
    values.add(k);
    COLUMNS.keySet().forEach(n -> values.add(null));
    session.execute(insert.bind(values.toArray()));

    Row row = session.execute("SELECT * FROM " + table("all_types") + " WHERE k = " + k).one();
    assertNotNull(row, "SELECT * for k = " + k + " after inserting nulls: expected one row, got none");
    List<String> notNull = COLUMNS.keySet().stream().filter(n -> !row.isNull(n)).collect(Collectors.toList());
    assertTrue(notNull.isEmpty(), "columns bound to null: expected all null, these were not: " + notNull);
    assertEquals(k, row.getInt("k"), "key of the all-null row");
  }

  @Test
  void allColumnsInOneRow() {
    int k = NEXT_KEY.getAndIncrement();
    Map<String, Case> firstPerColumn = new LinkedHashMap<>();
    cases().forEach(c -> firstPerColumn.putIfAbsent(c.column, c));
    String names = String.join(", ", firstPerColumn.keySet());
    String markers = firstPerColumn.keySet().stream().map(n -> "?").collect(Collectors.joining(", "));
    PreparedStatement insert = session.prepare(
        "INSERT INTO " + table("all_types") + " (k, " + names + ") VALUES (?, " + markers + ")");
    List<Object> values = new ArrayList<>();
    values.add(k);
    firstPerColumn.values().forEach(c -> values.add(c.value));
    session.execute(insert.bind(values.toArray()));

    Row row = session.execute(session.prepare("SELECT * FROM " + table("all_types") + " WHERE k = ?").bind(k)).one();
    assertNotNull(row, "SELECT * for k = " + k + ": expected one row, got none");
    for (Case c : firstPerColumn.values()) {
      assertEquals(c.value, row.getObject(c.column),
          c.column + " (" + COLUMNS.get(c.column) + ") in a row holding every type: wrote " + c.label);
    }
  }

  /** User-defined types, on their own so that a server without UDTs fails only this test. */
  @Test
  void userDefinedTypeRoundTrips() {
    ddl("CREATE TYPE " + ks + ".address (street text, number int, tags set<text>)");
    ddl("CREATE TABLE " + table("people") + " (k int PRIMARY KEY, home frozen<address>, "
        + "others list<frozen<address>>)");
    PreparedStatement insert = session.prepare(
        "INSERT INTO " + table("people") + " (k, home, others) VALUES (?, ?, ?)");
    DataType homeType = insert.getVariableDefinitions().get("home").getType();
    assertTrue(homeType instanceof UserDefinedType,
        "bind marker type for a frozen<address> column: expected a UDT, got " + homeType);
    UserDefinedType address = (UserDefinedType) homeType;
    assertEquals("address", address.getName().asInternal(), "UDT name");
    assertEquals(List.of("street", "number", "tags"),
        address.getFieldNames().stream().map(f -> f.asInternal()).collect(Collectors.toList()), "UDT fields");

    UdtValue home = address.newValue("Main St", 12, Set.of("home", "main"));
    UdtValue work = address.newValue("Dock Rd", null, Set.of());
    session.execute(insert.bind(1, home, List.of(work, home)));

    Row row = session.execute("SELECT home, others FROM " + table("people") + " WHERE k = 1").one();
    assertNotNull(row, "SELECT from a table with UDT columns: expected one row, got none");
    UdtValue back = row.getUdtValue("home");
    assertEquals("Main St", back.getString("street"), "home.street");
    assertEquals(12, back.getInt("number"), "home.number");
    assertEquals(Set.of("home", "main"), back.getSet("tags", String.class), "home.tags");
    List<UdtValue> others = row.getList("others", UdtValue.class);
    assertEquals(2, others.size(), "number of addresses in others");
    assertEquals("Dock Rd", others.get(0).getString("street"), "others[0].street");
    assertTrue(others.get(0).isNull("number"), "others[0].number: expected null");
    assertEquals("Main St", others.get(1).getString("street"), "others[1].street");

    // and the driver's schema metadata knows the type
    assertTrue(session.getMetadata().getKeyspace(ks).flatMap(m -> m.getUserDefinedType("address")).isPresent(),
        "UDT " + ks + ".address: expected in session.getMetadata()");
  }
}
