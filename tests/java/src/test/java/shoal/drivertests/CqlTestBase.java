package shoal.drivertests;

import static org.junit.jupiter.api.Assertions.fail;

import com.datastax.oss.driver.api.core.CqlSession;
import com.datastax.oss.driver.api.core.DriverException;
import com.datastax.oss.driver.api.core.cql.AsyncResultSet;
import com.datastax.oss.driver.api.core.cql.ResultSet;
import com.datastax.oss.driver.api.core.cql.Row;
import com.datastax.oss.driver.api.core.cql.SimpleStatement;
import com.datastax.oss.driver.api.core.cql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Semaphore;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.TestInstance;

/**
 * One session (default driver settings) and one freshly created keyspace per test class; the
 * keyspace is dropped and the session closed when the class is done.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
abstract class CqlTestBase {
  /** DDL can be slow on a real Cassandra; everything else keeps the driver's default timeout. */
  static final Duration DDL_TIMEOUT = Duration.ofSeconds(30);
  /** How long a test waits for one asynchronous request before giving up. */
  static final long WAIT_SECONDS = 30;

  protected CqlSession session;
  /** The keyspace of this class (unquoted, lower case). */
  protected String ks;

  @BeforeAll
  void openSessionAndKeyspace() {
    DriverWarnings.install();
    session = connect();
    ks = uniqueName(getClass().getSimpleName());
    ddl("CREATE KEYSPACE " + ks
        + " WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}");
  }

  @AfterAll
  void dropKeyspaceAndCloseSession() {
    if (session == null) {
      return;
    }
    try {
      if (ks != null) {
        ddl("DROP KEYSPACE IF EXISTS " + ks);
      }
    } finally {
      session.close();
    }
  }

  /** The session of this class; default driver settings unless a class has a reason to differ. */
  protected CqlSession connect() {
    return Env.connect();
  }

  /** A fresh lower-case identifier such as {@code jdt_pagingtest_k3x9q}, valid as a keyspace name. */
  static String uniqueName(String hint) {
    String base = hint.toLowerCase(Locale.ROOT).replaceAll("[^a-z0-9]", "");
    if (base.length() > 24) {
      base = base.substring(0, 24);
    }
    String suffix = Long.toString(System.currentTimeMillis() % 1_000_000_000L, 36)
        + Integer.toString(ThreadLocalRandom.current().nextInt(36 * 36 * 36), 36);
    return "jdt_" + base + "_" + suffix;
  }

  /** {@code ks.name}: a table of this class's keyspace. */
  String table(String name) {
    return ks + "." + name;
  }

  ResultSet ddl(String cql) {
    return session.execute(SimpleStatement.builder(cql).setTimeout(DDL_TIMEOUT).build());
  }

  ResultSet execute(String cql, Object... values) {
    return session.execute(SimpleStatement.newInstance(cql, values));
  }

  /** Runs statements with at most {@code maxInFlight} outstanding; fails on the first error. */
  void executeConcurrently(List<? extends Statement<?>> statements, int maxInFlight) {
    Semaphore permits = new Semaphore(maxInFlight);
    AtomicReference<Throwable> error = new AtomicReference<>();
    try {
      for (Statement<?> statement : statements) {
        if (error.get() != null) {
          break;
        }
        if (!permits.tryAcquire(WAIT_SECONDS, TimeUnit.SECONDS)) {
          fail("timed out waiting for in-flight writes to complete");
        }
        session.executeAsync(statement).whenComplete((rs, e) -> {
          if (e != null) {
            error.compareAndSet(null, e);
          }
          permits.release();
        });
      }
      if (!permits.tryAcquire(maxInFlight, WAIT_SECONDS, TimeUnit.SECONDS)) {
        fail("timed out waiting for in-flight writes to complete");
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError("interrupted", e);
    }
    if (error.get() != null) {
      throw new AssertionError("a concurrent write failed: " + error.get(), error.get());
    }
  }

  /** Waits for a driver future; a failure is rethrown as the driver's own exception. */
  static <T> T await(CompletionStage<T> stage) {
    try {
      return stage.toCompletableFuture().get(WAIT_SECONDS, TimeUnit.SECONDS);
    } catch (ExecutionException e) {
      if (e.getCause() instanceof DriverException) {
        throw ((DriverException) e.getCause()).copy();
      }
      throw new AssertionError("request failed: " + e.getCause(), e.getCause());
    } catch (TimeoutException e) {
      throw new AssertionError("no response within " + WAIT_SECONDS + " s", e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError("interrupted", e);
    }
  }

  /**
   * Executes {@code statement} and fetches its pages one at a time, failing if the server still
   * reports more pages after {@code maxPages} pages (a paging loop) or if a page holds more rows
   * than the statement's page size.
   */
  List<List<Row>> fetchPages(Statement<?> statement, int maxPages) {
    int pageSize = statement.getPageSize();
    List<List<Row>> pages = new ArrayList<>();
    int rows = 0;
    AsyncResultSet rs = await(session.executeAsync(statement));
    while (true) {
      List<Row> page = new ArrayList<>(rs.remaining());
      for (Row row : rs.currentPage()) {
        page.add(row);
      }
      rows += page.size();
      pages.add(page);
      if (pageSize > 0 && page.size() > pageSize) {
        fail("page " + pages.size() + " of '" + describe(statement) + "' has " + page.size()
            + " rows; expected at most the page size " + pageSize);
      }
      if (!rs.hasMorePages()) {
        return pages;
      }
      if (pages.size() >= maxPages) {
        fail("paging did not terminate: after " + pages.size() + " pages (" + rows
            + " rows) of '" + describe(statement) + "' at page size " + pageSize
            + " the server still reports more pages; expected at most " + maxPages + " pages");
      }
      rs = await(rs.fetchNextPage());
    }
  }

  static List<Row> flatten(List<List<Row>> pages) {
    List<Row> all = new ArrayList<>();
    pages.forEach(all::addAll);
    return all;
  }

  static String describe(Statement<?> statement) {
    return statement instanceof SimpleStatement ? ((SimpleStatement) statement).getQuery()
        : statement.toString();
  }
}
