package shoal.drivertests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.datastax.oss.driver.api.core.ProtocolVersion;
import com.datastax.oss.driver.api.core.cql.BoundStatement;
import com.datastax.oss.driver.api.core.cql.PreparedStatement;
import com.datastax.oss.driver.api.core.cql.Row;
import com.datastax.oss.driver.api.core.cql.SimpleStatement;
import com.datastax.oss.driver.api.core.cql.Statement;
import com.datastax.oss.driver.api.core.metadata.Node;
import com.datastax.oss.driver.api.core.metadata.TokenMap;
import com.datastax.oss.driver.api.core.metadata.token.Token;
import com.datastax.oss.driver.api.core.metadata.token.TokenRange;
import com.datastax.oss.driver.api.core.type.codec.TypeCodecs;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The driver's token map (Murmur3 ring, replicas) agrees with the server's token() function. */
class TokenMapTest extends CqlTestBase {
  private static final int KEYS = 200;
  private static final List<String> TEXT_KEYS =
      List.of("a", "hello", "Shoal", "ünïcødé", "the quick brown fox jumps over the lazy dog", "42");

  @BeforeAll
  void createTables() {
    ddl("CREATE TABLE " + table("ints") + " (k int PRIMARY KEY, v int)");
    ddl("CREATE TABLE " + table("texts") + " (k text PRIMARY KEY, v int)");
    ddl("CREATE TABLE " + table("composite") + " (a int, b text, v int, PRIMARY KEY ((a, b)))");
    PreparedStatement insert = session.prepare("INSERT INTO " + table("ints") + " (k, v) VALUES (?, ?)");
    List<BoundStatement> writes = new ArrayList<>();
    for (int k = 0; k < KEYS; k++) {
      writes.add(insert.bind(k, k));
    }
    executeConcurrently(writes, 64);
    for (String k : TEXT_KEYS) {
      execute("INSERT INTO " + table("texts") + " (k, v) VALUES (?, ?)", k, 1);
    }
  }

  private TokenMap tokenMap() {
    return session.getMetadata().getTokenMap().orElseGet(() -> fail(
        "session.getMetadata().getTokenMap(): expected a token map, got none (partitioner or tokens "
            + "missing from system.local/system.peers, or token metadata disabled)"));
  }

  private ProtocolVersion protocol() {
    return session.getContext().getProtocolVersion();
  }

  private static long tokenValue(TokenMap map, Token token) {
    return Long.parseLong(map.format(token));
  }

  @Test
  void tokenMapIsMurmur3() {
    TokenMap map = tokenMap();
    assertTrue(map.getPartitionerName().endsWith("Murmur3Partitioner"),
        "partitioner: expected ...Murmur3Partitioner, got " + map.getPartitionerName());
    assertFalse(map.getTokenRanges().isEmpty(), "token ranges: expected some, got none");
    for (Node node : session.getMetadata().getNodes().values()) {
      assertFalse(map.getTokens(node).isEmpty(), "tokens of node " + node.getEndPoint() + ": expected some");
    }
  }

  @Test
  void replicasForKeysAreTheNode() {
    TokenMap map = tokenMap();
    Set<Node> nodes = new HashSet<>(session.getMetadata().getNodes().values());
    for (int k = -5; k < 20; k++) {
      ByteBuffer key = TypeCodecs.INT.encode(k, protocol());
      Set<Node> replicas = map.getReplicas(ks, key);
      assertFalse(replicas.isEmpty(), "getReplicas(" + ks + ", int " + k + "): expected a node, got none");
      assertTrue(nodes.containsAll(replicas), "replicas " + replicas + " should be known nodes " + nodes);
      if (nodes.size() == 1) {
        assertEquals(nodes, replicas, "replicas of int key " + k + " on a one-node cluster");
      }
    }
    for (String k : TEXT_KEYS) {
      Set<Node> replicas = map.getReplicas(ks, TypeCodecs.TEXT.encode(k, protocol()));
      assertFalse(replicas.isEmpty(), "getReplicas(" + ks + ", text '" + k + "'): expected a node, got none");
    }
  }

  @Test
  void serverTokenMatchesDriverTokenForIntKeys() {
    TokenMap map = tokenMap();
    PreparedStatement select = session.prepare("SELECT token(k) FROM " + table("ints") + " WHERE k = ?");
    for (int k : new int[] {0, 1, 7, 42, 64, 123, 199}) {
      Row row = session.execute(select.bind(k)).one();
      assertTrue(row != null, "SELECT token(k) WHERE k = " + k + ": expected one row, got none");
      long expected = tokenValue(map, map.newToken(TypeCodecs.INT.encode(k, protocol())));
      assertEquals(expected, row.getLong(0), "token(" + k + ") from the server vs the driver's Murmur3");
    }
  }

  @Test
  void serverTokenMatchesDriverTokenForTextKeys() {
    TokenMap map = tokenMap();
    PreparedStatement select = session.prepare("SELECT token(k) FROM " + table("texts") + " WHERE k = ?");
    for (String k : TEXT_KEYS) {
      Row row = session.execute(select.bind(k)).one();
      assertTrue(row != null, "SELECT token(k) WHERE k = '" + k + "': expected one row, got none");
      long expected = tokenValue(map, map.newToken(TypeCodecs.TEXT.encode(k, protocol())));
      assertEquals(expected, row.getLong(0), "token('" + k + "') from the server vs the driver's Murmur3");
    }
  }

  @Test
  void serverTokenMatchesDriverTokenForCompositeKeys() {
    TokenMap map = tokenMap();
    PreparedStatement insert = session.prepare("INSERT INTO " + table("composite") + " (a, b, v) VALUES (?, ?, 0)");
    PreparedStatement select = session.prepare("SELECT token(a, b) FROM " + table("composite") + " WHERE a = ? AND b = ?");
    for (int a = 0; a < 5; a++) {
      String b = "part-" + a;
      session.execute(insert.bind(a, b));
      BoundStatement bound = select.bind(a, b);
      Row row = session.execute(bound).one();
      assertTrue(row != null, "SELECT token(a, b) WHERE a = " + a + ": expected one row, got none");
      Token expected = map.newToken(TypeCodecs.INT.encode(a, protocol()), TypeCodecs.TEXT.encode(b, protocol()));
      assertEquals(tokenValue(map, expected), row.getLong(0),
          "token(" + a + ", '" + b + "') from the server vs the driver's Murmur3");
      // the routing key the driver computes for the bound statement hashes to the same token
      Token routed = bound.getRoutingToken() != null ? bound.getRoutingToken() : map.newToken(bound.getRoutingKey());
      assertEquals(tokenValue(map, expected), tokenValue(map, routed), "routing token of bound statement");
    }
  }

  /** What a Spark-style scan does: one query per token range; together they must see each key once. */
  @Test
  void scanningByTokenRangesFindsEveryKeyOnce() {
    TokenMap map = tokenMap();
    Map<Integer, Integer> seen = new HashMap<>();
    int queries = 0;
    for (TokenRange range : map.getTokenRanges()) {
      for (TokenRange part : range.unwrap()) {
        long start = tokenValue(map, part.getStart());
        long end = tokenValue(map, part.getEnd());
        Statement<?> stmt;
        if (end == Long.MIN_VALUE) { // (start, minToken] means "to the end of the ring"
          stmt = SimpleStatement.newInstance(
              "SELECT k, token(k) FROM " + table("ints") + " WHERE token(k) > ?", start);
        } else {
          stmt = SimpleStatement.newInstance(
              "SELECT k, token(k) FROM " + table("ints") + " WHERE token(k) > ? AND token(k) <= ?", start, end);
        }
        queries++;
        for (Row row : flatten(fetchPages(stmt.setPageSize(50), KEYS + 5))) {
          long token = row.getLong(1);
          assertTrue(part.contains(map.parse(Long.toString(token))),
              "row k=" + row.getInt(0) + " with token " + token + " returned for range " + part);
          seen.merge(row.getInt(0), 1, Integer::sum);
        }
      }
    }
    List<Integer> repeated = seen.entrySet().stream().filter(e -> e.getValue() > 1).map(Map.Entry::getKey)
        .sorted().collect(Collectors.toList());
    assertTrue(repeated.isEmpty(), "keys returned by more than one of " + queries + " token-range queries: " + repeated);
    assertEquals(KEYS, seen.size(), "distinct keys found by scanning all token ranges");
  }
}
