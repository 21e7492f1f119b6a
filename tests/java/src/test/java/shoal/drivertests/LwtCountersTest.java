package shoal.drivertests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.datastax.oss.driver.api.core.ConsistencyLevel;
import com.datastax.oss.driver.api.core.cql.BatchStatement;
import com.datastax.oss.driver.api.core.cql.BatchType;
import com.datastax.oss.driver.api.core.cql.PreparedStatement;
import com.datastax.oss.driver.api.core.cql.ResultSet;
import com.datastax.oss.driver.api.core.cql.Row;
import com.datastax.oss.driver.api.core.cql.SimpleStatement;
import com.datastax.oss.driver.api.core.servererrors.InvalidQueryException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Lightweight transactions (wasApplied, the current values, SERIAL reads) and counter columns. */
class LwtCountersTest extends CqlTestBase {

  @BeforeAll
  void createTables() {
    ddl("CREATE TABLE " + table("lwt") + " (k int, c int, v int, PRIMARY KEY (k, c))");
    ddl("CREATE TABLE " + table("reg") + " (k int PRIMARY KEY, v int)");
    ddl("CREATE TABLE " + table("hits") + " (page text PRIMARY KEY, views counter, likes counter)");
  }

  @Test
  void conditionalWritesReportWhetherTheyApplied() {
    PreparedStatement insert =
        session.prepare("INSERT INTO " + table("lwt") + " (k, c, v) VALUES (?, ?, ?) IF NOT EXISTS");
    assertTrue(session.execute(insert.bind(1, 0, 10)).wasApplied());
    ResultSet again = session.execute(insert.bind(1, 0, 11));
    assertFalse(again.wasApplied());
    Row existing = again.one();
    assertEquals(10, existing.getInt("v"));

    PreparedStatement update =
        session.prepare("UPDATE " + table("lwt") + " SET v = ? WHERE k = ? AND c = ? IF v = ?");
    ResultSet refused = session.execute(update.bind(12, 1, 0, 99));
    assertFalse(refused.wasApplied());
    assertEquals(10, refused.one().getInt("v"));
    assertTrue(session.execute(update.bind(12, 1, 0, 10)).wasApplied());

    SimpleStatement serial = SimpleStatement.newInstance(
            "SELECT v FROM " + table("lwt") + " WHERE k = 1 AND c = 0")
        .setConsistencyLevel(ConsistencyLevel.SERIAL);
    assertEquals(12, session.execute(serial).one().getInt("v"));

    BatchStatement batch = BatchStatement.newInstance(BatchType.LOGGED,
        SimpleStatement.newInstance("UPDATE " + table("lwt") + " SET v = 13 WHERE k = 1 AND c = 0 IF v = 12"),
        SimpleStatement.newInstance("INSERT INTO " + table("lwt") + " (k, c, v) VALUES (1, 1, 1) IF NOT EXISTS"));
    assertTrue(session.execute(batch).wasApplied());
    assertFalse(session.execute(batch).wasApplied());

    String delete = "DELETE FROM " + table("lwt") + " WHERE k = 1 AND c = 1 IF EXISTS";
    assertTrue(execute(delete).wasApplied());
    assertFalse(execute(delete).wasApplied());
  }

  @Test
  void concurrentCompareAndSetWinsEachValueOnce() throws Exception {
    execute("INSERT INTO " + table("reg") + " (k, v) VALUES (0, 0)");
    PreparedStatement read = session.prepare("SELECT v FROM " + table("reg") + " WHERE k = 0");
    PreparedStatement cas = session.prepare("UPDATE " + table("reg") + " SET v = ? WHERE k = 0 IF v = ?");
    Map<Integer, AtomicInteger> won = new ConcurrentHashMap<>();
    ExecutorService pool = Executors.newFixedThreadPool(6);
    try {
      List<Future<?>> done = new ArrayList<>();
      for (int w = 0; w < 6; w++) {
        done.add(pool.submit(() -> {
          for (int n = 0; n < 15; ) {
            int v = session.execute(read.bind().setConsistencyLevel(ConsistencyLevel.SERIAL)).one().getInt("v");
            if (session.execute(cas.bind(v + 1, v)).wasApplied()) {
              won.computeIfAbsent(v, x -> new AtomicInteger()).incrementAndGet();
              n++;
            }
          }
          return null;
        }));
      }
      for (Future<?> f : done) {
        f.get();
      }
    } finally {
      pool.shutdown();
    }
    for (int v = 0; v < 90; v++) {
      assertEquals(1, won.getOrDefault(v, new AtomicInteger()).get(), "expected value " + v + " won once");
    }
  }

  @Test
  void countersAddUp() {
    PreparedStatement inc = session.prepare(
        "UPDATE " + table("hits") + " SET views = views + ?, likes = likes - ? WHERE page = ?");
    List<com.datastax.oss.driver.api.core.cql.Statement<?>> updates = new ArrayList<>();
    for (int i = 0; i < 200; i++) {
      updates.add(inc.bind(1L, (long) (i % 2), "p" + (i % 4)));
    }
    executeConcurrently(updates, 16);
    BatchStatement batch = BatchStatement.newInstance(BatchType.COUNTER,
        SimpleStatement.newInstance("UPDATE " + table("hits") + " SET views = views + 100 WHERE page = 'p0'"),
        SimpleStatement.newInstance("UPDATE " + table("hits") + " SET views = views + 100 WHERE page = 'p1'"));
    session.execute(batch);
    long[][] want = {{150, 0}, {150, -50}, {50, 0}, {50, -50}};
    for (int p = 0; p < 4; p++) {
      Row row = execute("SELECT views, likes FROM " + table("hits") + " WHERE page = ?", "p" + p).one();
      assertEquals(want[p][0], row.getLong("views"), "views of p" + p);
      assertEquals(want[p][1], row.getLong("likes"), "likes of p" + p);
    }
    assertThrows(InvalidQueryException.class,
        () -> execute("INSERT INTO " + table("hits") + " (page, views) VALUES ('x', 1)"));
  }
}
