package shoal.drivertests;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import com.datastax.oss.driver.api.core.CqlSession;
import com.datastax.oss.driver.api.core.DefaultProtocolVersion;
import com.datastax.oss.driver.api.core.cql.PreparedStatement;
import com.datastax.oss.driver.api.core.cql.Row;
import java.nio.ByteBuffer;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Native protocol v5 with default settings: the driver negotiates V5 (Cassandra 4.0+ and Shoal
 * speak it) and its framing carries values larger than one 128 KiB segment both ways.
 */
class ProtocolV5Test extends CqlTestBase {

  @BeforeAll
  void createTable() {
    ddl("CREATE TABLE " + table("blobs") + " (k int PRIMARY KEY, v blob)");
  }

  @Test
  void defaultSettingsNegotiateV5() {
    assertEquals(DefaultProtocolVersion.V5, session.getContext().getProtocolVersion(),
        "negotiated protocol version against " + Env.describe());
    try (CqlSession fresh = Env.connect()) {
      assertEquals(DefaultProtocolVersion.V5, fresh.getContext().getProtocolVersion(),
          "negotiated protocol version of a fresh session against " + Env.describe());
    }
  }

  @Test
  void valuesLargerThanASegmentRoundTrip() {
    PreparedStatement insert = session.prepare("INSERT INTO " + table("blobs") + " (k, v) VALUES (?, ?)");
    PreparedStatement select = session.prepare("SELECT v FROM " + table("blobs") + " WHERE k = ?");
    int[] sizes = {0, 131_000, 131_071, 131_072, 300 * 1024, 1024 * 1024};
    for (int i = 0; i < sizes.length; i++) {
      byte[] value = new byte[sizes[i]];
      for (int j = 0; j < value.length; j++) {
        value[j] = (byte) ((j * 31 + i) % 251);
      }
      session.execute(insert.bind(i, ByteBuffer.wrap(value)));
      Row row = session.execute(select.bind(i)).one();
      assertNotNull(row, "row " + i + " read back");
      ByteBuffer got = row.getByteBuffer("v");
      byte[] bytes = new byte[got.remaining()];
      got.get(bytes);
      assertArrayEquals(value, bytes, "value of " + sizes[i] + " bytes read back");
    }
  }
}
