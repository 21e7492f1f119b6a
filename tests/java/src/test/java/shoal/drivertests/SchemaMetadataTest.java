package shoal.drivertests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.datastax.oss.driver.api.core.CqlIdentifier;
import com.datastax.oss.driver.api.core.CqlSession;
import com.datastax.oss.driver.api.core.config.DefaultDriverOption;
import com.datastax.oss.driver.api.core.config.DriverConfigLoader;
import com.datastax.oss.driver.api.core.cql.ResultSet;
import com.datastax.oss.driver.api.core.metadata.Metadata;
import com.datastax.oss.driver.api.core.metadata.schema.ClusteringOrder;
import com.datastax.oss.driver.api.core.metadata.schema.ColumnMetadata;
import com.datastax.oss.driver.api.core.metadata.schema.KeyspaceMetadata;
import com.datastax.oss.driver.api.core.metadata.schema.TableMetadata;
import com.datastax.oss.driver.api.core.type.DataType;
import com.datastax.oss.driver.api.core.type.DataTypes;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Supplier;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/** Schema metadata as the driver builds it from system_schema (and system_virtual_schema). */
class SchemaMetadataTest extends CqlTestBase {

  /** The driver refreshes metadata before a DDL request completes; allow a little slack anyway. */
  private static final long METADATA_WAIT_MS = 5_000;

  private <T> T awaitMetadata(String what, Supplier<Optional<T>> lookup, Supplier<String> current) {
    long deadline = System.currentTimeMillis() + METADATA_WAIT_MS;
    while (true) {
      Optional<T> found = lookup.get();
      if (found.isPresent()) {
        return found.get();
      }
      if (System.currentTimeMillis() > deadline) {
        return fail(what + ": expected it in session.getMetadata(), not there after "
            + METADATA_WAIT_MS + " ms; metadata has " + current.get());
      }
      sleep(100);
    }
  }

  private static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError("interrupted", e);
    }
  }

  private String keyspaceNames() {
    return "keyspaces " + session.getMetadata().getKeyspaces().keySet().stream()
        .map(CqlIdentifier::asInternal).sorted().collect(Collectors.toList());
  }

  private KeyspaceMetadata keyspace(String name) {
    return awaitMetadata("keyspace " + name, () -> session.getMetadata().getKeyspace(name),
        this::keyspaceNames);
  }

  private TableMetadata tableMeta(String name) {
    return awaitMetadata("table " + ks + "." + name,
        () -> session.getMetadata().getKeyspace(ks).flatMap(k -> k.getTable(name)),
        () -> session.getMetadata().getKeyspace(ks)
            .map(k -> "tables " + k.getTables().keySet().stream().map(CqlIdentifier::asInternal)
                .sorted().collect(Collectors.toList()))
            .orElse("no keyspace " + ks + " (" + keyspaceNames() + ")"));
  }

  private static String columns(List<ColumnMetadata> columns) {
    return columns.stream().map(c -> c.getName().asInternal() + " " + c.getType().asCql(true, true))
        .collect(Collectors.toList()).toString();
  }

  private static void assertType(TableMetadata table, String column, DataType expected) {
    Optional<ColumnMetadata> meta = table.getColumn(column);
    assertTrue(meta.isPresent(), "column " + column + " of " + table.getName().asInternal()
        + ": expected it, table has " + table.getColumns().keySet());
    assertEquals(expected.asCql(true, true), meta.get().getType().asCql(true, true),
        "type of column " + column);
  }

  @Test
  void keyspaceMetadataOfNewKeyspace() {
    KeyspaceMetadata meta = keyspace(ks);
    assertEquals(ks, meta.getName().asInternal(), "keyspace name");
    Map<String, String> replication = meta.getReplication();
    assertTrue(replication.getOrDefault("class", "").endsWith("SimpleStrategy"),
        "replication class: expected ...SimpleStrategy, got " + replication);
    assertEquals("1", replication.get("replication_factor"), "replication_factor in " + replication);
    assertTrue(meta.isDurableWrites(), "durable_writes: expected true");
  }

  @Test
  void tableMetadataListsColumnsKeysAndTypes() {
    ddl("CREATE TABLE " + table("events") + " ("
        + "pk1 int, pk2 text, c1 timeuuid, c2 bigint, v1 text, v2 map<text, int>, v3 frozen<list<int>>, "
        + "v4 set<uuid>, v5 decimal, s int static, "
        + "PRIMARY KEY ((pk1, pk2), c1, c2)) WITH CLUSTERING ORDER BY (c1 ASC, c2 DESC)");
    TableMetadata t = tableMeta("events");

    assertEquals(ks, t.getKeyspace().asInternal(), "table keyspace");
    assertEquals("events", t.getName().asInternal(), "table name");

    List<ColumnMetadata> pk = t.getPartitionKey();
    assertEquals("[pk1 int, pk2 text]", columns(pk), "partition key");

    Map<String, ClusteringOrder> clustering = new LinkedHashMap<>();
    t.getClusteringColumns().forEach((c, order) -> clustering.put(c.getName().asInternal(), order));
    assertEquals(Map.of("c1", ClusteringOrder.ASC, "c2", ClusteringOrder.DESC), clustering,
        "clustering columns and orders");
    assertEquals(List.of("c1", "c2"), new ArrayList<>(clustering.keySet()), "clustering column order");
    assertEquals("[pk1 int, pk2 text, c1 timeuuid, c2 bigint]", columns(t.getPrimaryKey()), "primary key");

    assertEquals(10, t.getColumns().size(), "number of columns, got " + t.getColumns().keySet());
    assertType(t, "pk1", DataTypes.INT);
    assertType(t, "pk2", DataTypes.TEXT);
    assertType(t, "c1", DataTypes.TIMEUUID);
    assertType(t, "c2", DataTypes.BIGINT);
    assertType(t, "v1", DataTypes.TEXT);
    assertType(t, "v2", DataTypes.mapOf(DataTypes.TEXT, DataTypes.INT));
    assertType(t, "v3", DataTypes.frozenListOf(DataTypes.INT));
    assertType(t, "v4", DataTypes.setOf(DataTypes.UUID));
    assertType(t, "v5", DataTypes.DECIMAL);
    assertType(t, "s", DataTypes.INT);
    assertTrue(t.getColumn("s").get().isStatic(), "column s: expected static");
    assertFalse(t.getColumn("v1").get().isStatic(), "column v1: expected not static");
    assertFalse(t.isVirtual(), "table is virtual: expected false");
    assertTrue(t.getId().isPresent(), "table id: expected one (system_schema.tables.id)");
  }

  @Test
  void alterAndDropAreReflected() {
    ddl("CREATE TABLE " + table("altered") + " (k int PRIMARY KEY, a text)");
    tableMeta("altered");
    ddl("ALTER TABLE " + table("altered") + " ADD b bigint");
    awaitMetadata("column b after ALTER TABLE ... ADD b bigint",
        () -> session.getMetadata().getKeyspace(ks).flatMap(k -> k.getTable("altered"))
            .flatMap(t -> t.getColumn("b")),
        () -> "columns " + session.getMetadata().getKeyspace(ks).flatMap(k -> k.getTable("altered"))
            .map(t -> t.getColumns().keySet().toString()).orElse("(no table)"));
    assertType(tableMeta("altered"), "b", DataTypes.BIGINT);

    ddl("ALTER TABLE " + table("altered") + " DROP a");
    awaitMetadata("column a gone after ALTER TABLE ... DROP a",
        () -> session.getMetadata().getKeyspace(ks).flatMap(k -> k.getTable("altered"))
            .filter(t -> t.getColumn("a").isEmpty()),
        () -> "columns " + session.getMetadata().getKeyspace(ks).flatMap(k -> k.getTable("altered"))
            .map(t -> t.getColumns().keySet().toString()).orElse("(no table)"));

    ddl("DROP TABLE " + table("altered"));
    awaitMetadata("table altered gone after DROP TABLE",
        () -> session.getMetadata().getKeyspace(ks).filter(k -> k.getTable("altered").isEmpty()),
        () -> "tables " + session.getMetadata().getKeyspace(ks).map(k -> k.getTables().keySet().toString())
            .orElse("(no keyspace)"));
  }

  @Test
  void schemaAgreementAfterDdl() {
    ResultSet rs = ddl("CREATE TABLE " + table("agreed") + " (k int PRIMARY KEY)");
    assertTrue(rs.getExecutionInfo().isSchemaInAgreement(),
        "ExecutionInfo.isSchemaInAgreement() after CREATE TABLE: expected true, got false");
    assertTrue(session.checkSchemaAgreement(), "session.checkSchemaAgreement(): expected true, got false");
  }

  @Test
  void systemKeyspacesAreListedInSystemSchema() {
    List<String> names = session.execute("SELECT keyspace_name FROM system_schema.keyspaces").all().stream()
        .map(r -> r.getString(0)).sorted().collect(Collectors.toList());
    for (String name : List.of("system", "system_schema", ks)) {
      assertTrue(names.contains(name),
          "SELECT keyspace_name FROM system_schema.keyspaces: expected " + name + " among " + names);
    }
  }

  /**
   * By default the driver leaves system keyspaces out of its metadata; a session that asks for them
   * must find them, described by system_schema like any other keyspace.
   */
  @Test
  void systemKeyspacesInDriverMetadataWhenRequested() {
    DriverConfigLoader config = DriverConfigLoader.programmaticBuilder()
        .withStringList(DefaultDriverOption.METADATA_SCHEMA_REFRESHED_KEYSPACES,
            List.of("system", "system_schema", ks))
        .build();
    try (CqlSession withSystem = CqlSession.builder().addContactPoint(Env.contactPoint())
        .withLocalDatacenter(Env.DC).withConfigLoader(config).build()) {
      Metadata metadata = withSystem.getMetadata();
      String present = metadata.getKeyspaces().keySet().stream().map(CqlIdentifier::asInternal).sorted()
          .collect(Collectors.toList()).toString();
      for (String name : List.of("system", "system_schema", ks)) {
        assertTrue(metadata.getKeyspace(name).isPresent(),
            "keyspace " + name + ": expected in metadata, got keyspaces " + present);
      }
      TableMetadata local = metadata.getKeyspace("system").flatMap(k -> k.getTable("local"))
          .orElseGet(() -> fail("table system.local: expected in metadata, got tables "
              + metadata.getKeyspace("system").map(k -> k.getTables().keySet().toString()).orElse("?")));
      assertEquals("[key text]", columns(local.getPartitionKey()), "system.local partition key");
      assertTrue(local.getColumn("release_version").isPresent(),
          "system.local column release_version: expected, got " + local.getColumns().keySet());
      TableMetadata tables = metadata.getKeyspace("system_schema").flatMap(k -> k.getTable("tables"))
          .orElseGet(() -> fail("table system_schema.tables: expected in metadata"));
      assertEquals("[keyspace_name text]", columns(tables.getPartitionKey()), "system_schema.tables partition key");
    }
  }
}
