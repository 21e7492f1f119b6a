package shoal.drivertests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.datastax.oss.driver.api.core.cql.BatchStatement;
import com.datastax.oss.driver.api.core.cql.BatchStatementBuilder;
import com.datastax.oss.driver.api.core.cql.BatchType;
import com.datastax.oss.driver.api.core.cql.BoundStatement;
import com.datastax.oss.driver.api.core.cql.PreparedStatement;
import com.datastax.oss.driver.api.core.cql.ResultSet;
import com.datastax.oss.driver.api.core.cql.Row;
import com.datastax.oss.driver.api.core.cql.SimpleStatement;
import com.datastax.oss.driver.api.core.cql.Statement;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Paging: every row exactly once, in order, and paging always ends. Pages are fetched one at a
 * time (executeAsync + fetchNextPage) so that a server that never stops paging fails the test
 * instead of hanging it.
 */
class PagingTest extends CqlTestBase {
  private static final int PARTITIONS = 1_000;
  private static final int WIDE_ROWS = 1_000;
  private static final int WIDE_KEY = 7;

  @BeforeAll
  void createAndLoadTables() {
    // (a) 1,000 single-row partitions
    ddl("CREATE TABLE " + table("keys") + " (k int PRIMARY KEY, v int)");
    PreparedStatement insertKey = session.prepare("INSERT INTO " + table("keys") + " (k, v) VALUES (?, ?)");
    List<BoundStatement> writes = new ArrayList<>();
    for (int k = 0; k < PARTITIONS; k++) {
      writes.add(insertKey.bind(k, k * 10));
    }
    executeConcurrently(writes, 128);

    // (b) 3 partitions x 3 clustering rows
    ddl("CREATE TABLE " + table("grid") + " (k int, c int, v int, PRIMARY KEY (k, c))");
    PreparedStatement insertGrid = session.prepare("INSERT INTO " + table("grid") + " (k, c, v) VALUES (?, ?, ?)");
    for (int k = 0; k < 3; k++) {
      for (int c = 0; c < 3; c++) {
        session.execute(insertGrid.bind(k, c, k * 3 + c));
      }
    }

    // (c) one partition of 1,000 rows, written in single-partition unlogged batches
    ddl("CREATE TABLE " + table("wide") + " (k int, c int, v int, PRIMARY KEY (k, c))");
    PreparedStatement insertWide = session.prepare("INSERT INTO " + table("wide") + " (k, c, v) VALUES (?, ?, ?)");
    List<BatchStatement> batches = new ArrayList<>();
    for (int start = 0; start < WIDE_ROWS; start += 50) {
      BatchStatementBuilder batch = BatchStatement.builder(BatchType.UNLOGGED);
      for (int c = start; c < start + 50; c++) {
        batch.addStatement(insertWide.bind(WIDE_KEY, c, c));
      }
      batches.add(batch.build());
    }
    executeConcurrently(batches, 8);
    // a neighbouring partition that a partition query must not leak into
    session.execute(insertWide.bind(WIDE_KEY + 1, 0, -1));
  }

  private static SimpleStatement paged(String cql, int pageSize) {
    return SimpleStatement.builder(cql).setPageSize(pageSize).build();
  }

  /** The most pages a correct server could need: one per row, plus a few empty trailing pages. */
  private static int pageBound(int rows) {
    return rows + 5;
  }

  private static String duplicates(List<Integer> values) {
    Map<Integer, Integer> counts = new TreeMap<>();
    values.forEach(v -> counts.merge(v, 1, Integer::sum));
    List<String> repeated = counts.entrySet().stream().filter(e -> e.getValue() > 1)
        .map(e -> e.getKey() + "x" + e.getValue()).collect(Collectors.toList());
    return repeated.size() > 20 ? repeated.subList(0, 20) + " ... (" + repeated.size() + " keys repeated)"
        : repeated.toString();
  }

  private static String missing(Set<Integer> seen, int expected) {
    List<Integer> absent = IntStream.range(0, expected).filter(i -> !seen.contains(i)).boxed().collect(Collectors.toList());
    return absent.size() > 20 ? absent.subList(0, 20) + " ... (" + absent.size() + " missing)" : absent.toString();
  }

  private void assertEveryKeyOnce(String what, List<Integer> keys) {
    Set<Integer> distinct = new HashSet<>(keys);
    assertEquals(PARTITIONS, distinct.size(),
        what + ": distinct keys: expected " + PARTITIONS + ", got " + distinct.size() + "; missing " + missing(distinct, PARTITIONS));
    assertEquals(PARTITIONS, keys.size(),
        what + ": rows: expected " + PARTITIONS + " (each key once), got " + keys.size() + "; repeated " + duplicates(keys));
  }

  // (a) ------------------------------------------------------------------------------------------

  @ParameterizedTest(name = "page size {0}")
  @ValueSource(ints = {100, 7, 1000, 5000})
  void fullScanReturnsEveryPartitionOnce(int pageSize) {
    Statement<?> scan = paged("SELECT k FROM " + table("keys"), pageSize);
    List<List<Row>> pages = fetchPages(scan, pageBound(PARTITIONS));
    List<Integer> keys = new ArrayList<>();
    flatten(pages).forEach(r -> keys.add(r.getInt("k")));
    assertEveryKeyOnce("SELECT k FROM keys at page size " + pageSize + " (" + pages.size() + " pages)", keys);
  }

  @Test
  void fullScanThroughSynchronousIteration() {
    // what most applications do: iterate the ResultSet and let the driver fetch pages behind it
    ResultSet rs = session.execute(paged("SELECT k, v FROM " + table("keys"), 100));
    List<Integer> keys = new ArrayList<>();
    for (Row row : rs) {
      int k = row.getInt("k");
      assertEquals(k * 10, row.getInt("v"), "v of k " + k);
      keys.add(k);
      if (keys.size() > 2 * PARTITIONS) {
        fail("synchronous iteration of SELECT k, v FROM keys (page size 100) did not end: more than "
            + 2 * PARTITIONS + " rows for a " + PARTITIONS + "-row table; repeated " + duplicates(keys));
      }
    }
    assertTrue(rs.isFullyFetched(), "isFullyFetched() after iterating to the end");
    assertEveryKeyOnce("synchronous iteration at page size 100", keys);
  }

  @Test
  void scanReturnsPartitionsInTokenOrder() {
    List<Row> rows = flatten(fetchPages(
        paged("SELECT token(k), k FROM " + table("keys"), 100), pageBound(PARTITIONS)));
    assertEquals(PARTITIONS, rows.size(), "rows of SELECT token(k), k");
    for (int i = 1; i < rows.size(); i++) {
      long previous = rows.get(i - 1).getLong(0);
      long current = rows.get(i).getLong(0);
      if (current < previous) {
        fail("full scan is not in token order: row " + i + " (k=" + rows.get(i).getInt(1) + ", token " + current
            + ") follows k=" + rows.get(i - 1).getInt(1) + " with token " + previous);
      }
    }
  }

  @Test
  void resumingFromASavedPagingState() {
    // stateless paging, as web applications do it: keep the paging state, run a new statement with it
    SimpleStatement first = paged("SELECT k FROM " + table("keys"), 100);
    ResultSet page1 = session.execute(first);
    List<Integer> keys = new ArrayList<>();
    int available = page1.getAvailableWithoutFetching();
    assertEquals(100, available, "rows available without fetching in the first page of 100");
    for (int i = 0; i < available; i++) {
      keys.add(page1.one().getInt("k"));
    }
    ByteBuffer state = page1.getExecutionInfo().getPagingState();
    assertNotNull(state, "paging state after the first of several pages: expected one, got null");

    List<List<Row>> rest = fetchPages(first.setPagingState(state), pageBound(PARTITIONS));
    flatten(rest).forEach(r -> keys.add(r.getInt("k")));
    assertEveryKeyOnce("first page, then the rest resumed from its paging state", keys);
  }

  @Test
  void limitAcrossPages() {
    List<List<Row>> pages = fetchPages(paged("SELECT k FROM " + table("keys") + " LIMIT 250", 100), pageBound(250));
    List<Integer> keys = new ArrayList<>();
    flatten(pages).forEach(r -> keys.add(r.getInt("k")));
    assertEquals(250, keys.size(), "rows of SELECT ... LIMIT 250 at page size 100 (" + pages.size() + " pages)");
    assertEquals(250, new HashSet<>(keys).size(), "distinct keys of SELECT ... LIMIT 250; repeated " + duplicates(keys));
  }

  // (b) ------------------------------------------------------------------------------------------

  @ParameterizedTest(name = "page size {0}")
  @ValueSource(ints = {1, 2, 3, 4})
  void smallGridScanReturnsEachRowOnceInClusteringOrder(int pageSize) {
    List<List<Row>> pages = fetchPages(paged("SELECT k, c, v FROM " + table("grid"), pageSize), pageBound(9));
    List<Row> rows = flatten(pages);
    List<String> seen = rows.stream().map(r -> "(" + r.getInt("k") + "," + r.getInt("c") + ")")
        .collect(Collectors.toList());
    String context = " at page size " + pageSize + " (" + pages.size() + " pages): got " + seen;
    assertEquals(9, rows.size(), "rows of the 3x3 table" + context);
    assertEquals(9, new HashSet<>(seen).size(), "distinct (k,c) of the 3x3 table" + context);

    // each partition's rows are contiguous and in clustering order 0, 1, 2
    Map<Integer, List<Integer>> byPartition = new LinkedHashMap<>();
    Integer current = null;
    for (Row row : rows) {
      int k = row.getInt("k");
      if (current == null || current != k) {
        assertTrue(!byPartition.containsKey(k), "partition " + k + " appears in two separate runs" + context);
        current = k;
      }
      byPartition.computeIfAbsent(k, x -> new ArrayList<>()).add(row.getInt("c"));
      assertEquals(k * 3 + row.getInt("c"), row.getInt("v"), "v of (" + k + "," + row.getInt("c") + ")");
    }
    assertEquals(Set.of(0, 1, 2), byPartition.keySet(), "partitions" + context);
    byPartition.forEach((k, cs) -> assertEquals(List.of(0, 1, 2), cs, "clustering values of partition " + k + context));
  }

  // (c) ------------------------------------------------------------------------------------------

  @ParameterizedTest(name = "page size {0}, {1}")
  @CsvSource({"100, ASC", "7, ASC", "100, DESC", "7, DESC"})
  void partitionPagingReturnsEveryRowInOrder(int pageSize, String order) {
    String cql = "SELECT c, v FROM " + table("wide") + " WHERE k = " + WIDE_KEY + " ORDER BY c " + order;
    List<List<Row>> pages = fetchPages(paged(cql, pageSize), pageBound(WIDE_ROWS));
    List<Integer> cs = new ArrayList<>();
    flatten(pages).forEach(r -> cs.add(r.getInt("c")));
    List<Integer> expected = IntStream.range(0, WIDE_ROWS).boxed().collect(Collectors.toList());
    if (order.equals("DESC")) {
      Collections.reverse(expected);
    }
    if (!cs.equals(expected)) {
      int firstDiff = 0;
      while (firstDiff < Math.min(cs.size(), expected.size()) && cs.get(firstDiff).equals(expected.get(firstDiff))) {
        firstDiff++;
      }
      fail(cql + " at page size " + pageSize + " (" + pages.size() + " pages): expected c = " + expected.get(0)
          + ".." + expected.get(WIDE_ROWS - 1) + " each once in order, got " + cs.size() + " rows, first difference at row "
          + firstDiff + " (got " + (firstDiff < cs.size() ? cs.get(firstDiff) : "end") + "); repeated " + duplicates(cs));
    }
  }

  @ParameterizedTest(name = "page size {0}")
  @ValueSource(ints = {7, 100})
  void clusteringRangePaging(int pageSize) {
    String cql = "SELECT c FROM " + table("wide") + " WHERE k = " + WIDE_KEY + " AND c >= 100 AND c < 900";
    List<Integer> cs = new ArrayList<>();
    flatten(fetchPages(paged(cql, pageSize), pageBound(800))).forEach(r -> cs.add(r.getInt("c")));
    assertEquals(IntStream.range(100, 900).boxed().collect(Collectors.toList()), cs,
        cql + " at page size " + pageSize + ": expected c = 100..899 in order, got " + cs.size() + " rows");
  }
}
