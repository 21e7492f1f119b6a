package shoal.drivertests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.datastax.oss.driver.api.core.CqlSession;
import com.datastax.oss.driver.api.core.config.DefaultDriverOption;
import com.datastax.oss.driver.api.core.config.DriverConfigLoader;
import com.datastax.oss.driver.api.core.cql.AsyncResultSet;
import com.datastax.oss.driver.api.core.cql.BatchStatement;
import com.datastax.oss.driver.api.core.cql.BatchStatementBuilder;
import com.datastax.oss.driver.api.core.cql.BatchType;
import com.datastax.oss.driver.api.core.cql.BoundStatement;
import com.datastax.oss.driver.api.core.cql.PreparedStatement;
import com.datastax.oss.driver.api.core.cql.Row;
import com.datastax.oss.driver.api.core.cql.SimpleStatement;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/** LOGGED and UNLOGGED batches of prepared inserts, to one partition and to many. */
class BatchTest extends CqlTestBase {
  private static final int ROWS_PER_BATCH = 100;
  /** Each test writes partitions starting at its own base key so tests never overlap. */
  private static final AtomicInteger NEXT_BASE = new AtomicInteger(0);

  private PreparedStatement insert;
  private PreparedStatement selectPartition;

  /**
   * Cassandra answers large and multi-partition batches with (correct) server-side warnings, which
   * the driver logs at WARN by default; this class alone turns that logging off to keep the output
   * quiet. The warnings are still in each result's ExecutionInfo.
   */
  @Override
  protected CqlSession connect() {
    return CqlSession.builder().addContactPoint(Env.contactPoint()).withLocalDatacenter(Env.DC)
        .withConfigLoader(DriverConfigLoader.programmaticBuilder()
            .withBoolean(DefaultDriverOption.REQUEST_LOG_WARNINGS, false).build())
        .build();
  }

  @BeforeAll
  void createTable() {
    ddl("CREATE TABLE " + table("rows") + " (k int, c int, v text, PRIMARY KEY (k, c))");
    insert = session.prepare("INSERT INTO " + table("rows") + " (k, c, v) VALUES (?, ?, ?)");
    selectPartition = session.prepare("SELECT c, v FROM " + table("rows") + " WHERE k = ?");
  }

  static Stream<Arguments> shapes() {
    List<Arguments> shapes = new ArrayList<>();
    for (BatchType type : List.of(BatchType.LOGGED, BatchType.UNLOGGED)) {
      for (int partitions : new int[] {1, 10, 100}) {
        shapes.add(Arguments.of(type, partitions));
      }
    }
    return shapes.stream();
  }

  @ParameterizedTest(name = "{0} batch of " + ROWS_PER_BATCH + " rows over {1} partition(s)")
  @MethodSource("shapes")
  void batchOfPreparedInserts(BatchType type, int partitions) {
    int base = NEXT_BASE.getAndAdd(1_000);
    int rowsPerPartition = ROWS_PER_BATCH / partitions;
    BatchStatementBuilder batch = BatchStatement.builder(type);
    for (int p = 0; p < partitions; p++) {
      for (int c = 0; c < rowsPerPartition; c++) {
        batch.addStatement(insert.bind(base + p, c, "p" + p + "c" + c));
      }
    }
    BatchStatement statement = batch.build();
    assertEquals(ROWS_PER_BATCH, statement.size(), "statements in the batch");
    session.execute(statement);
    assertPartitions(type + " batch", base, partitions, rowsPerPartition);
  }

  @Test
  void batchMixingSimpleAndPreparedStatements() {
    int base = NEXT_BASE.getAndAdd(1_000);
    BatchStatement batch = BatchStatement.newInstance(BatchType.LOGGED,
        insert.bind(base, 0, "p0c0"),
        SimpleStatement.newInstance("INSERT INTO " + table("rows") + " (k, c, v) VALUES (?, ?, ?)", base, 1, "p0c1"),
        SimpleStatement.newInstance("INSERT INTO " + table("rows") + " (k, c, v) VALUES (" + (base + 1) + ", 0, 'p1c0')"),
        SimpleStatement.newInstance("UPDATE " + table("rows") + " SET v = ? WHERE k = ? AND c = ?", "p1c1", base + 1, 1));
    session.execute(batch);
    assertPartitions("mixed batch", base, 2, 2);

    // a batch that deletes and updates what the previous one wrote
    session.execute(BatchStatement.newInstance(BatchType.UNLOGGED,
        SimpleStatement.newInstance("DELETE FROM " + table("rows") + " WHERE k = ? AND c = ?", base, 0),
        SimpleStatement.newInstance("UPDATE " + table("rows") + " SET v = 'changed' WHERE k = ? AND c = ?", base, 1)));
    List<Row> rows = session.execute(selectPartition.bind(base)).all();
    assertEquals(1, rows.size(), "rows in partition " + base + " after a batch DELETE of c = 0");
    assertEquals("changed", rows.get(0).getString("v"), "v after a batch UPDATE");
  }

  /** Reads each partition back (concurrently) and checks every row the batch wrote. */
  private void assertPartitions(String what, int base, int partitions, int rowsPerPartition) {
    List<BoundStatement> reads = new ArrayList<>();
    for (int p = 0; p < partitions; p++) {
      reads.add(selectPartition.bind(base + p));
    }
    List<List<Row>> results = new ArrayList<>();
    List<CompletionStage<AsyncResultSet>> pending = new ArrayList<>();
    reads.forEach(r -> pending.add(session.executeAsync(r)));
    for (CompletionStage<AsyncResultSet> stage : pending) {
      AsyncResultSet rs = await(stage);
      assertTrue(!rs.hasMorePages(), "a " + rowsPerPartition + "-row partition should fit in one page");
      List<Row> rows = new ArrayList<>();
      rs.currentPage().forEach(rows::add);
      results.add(rows);
    }
    int total = 0;
    for (int p = 0; p < partitions; p++) {
      List<Row> rows = results.get(p);
      assertEquals(rowsPerPartition, rows.size(), what + ": rows in partition k = " + (base + p));
      for (int c = 0; c < rowsPerPartition; c++) {
        Row row = rows.get(c);
        assertNotNull(row, what + ": row " + c);
        assertEquals(c, row.getInt("c"), what + ": clustering value " + c + " of partition " + (base + p));
        assertEquals("p" + p + "c" + c, row.getString("v"), what + ": v of (" + (base + p) + ", " + c + ")");
      }
      total += rows.size();
    }
    assertEquals(partitions * rowsPerPartition, total, what + ": total rows read back");
  }
}
