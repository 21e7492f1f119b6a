package shoal.drivertests;

import com.datastax.oss.driver.api.core.CqlSession;
import java.net.InetSocketAddress;

/** Where the server under test is: env vars CQL_HOST, CQL_PORT, CQL_DC (or -Dcql.host etc.). */
final class Env {
  static final String HOST = setting("cql.host", "CQL_HOST", "127.0.0.1");
  static final int PORT = Integer.parseInt(setting("cql.port", "CQL_PORT", "9042"));
  static final String DC = setting("cql.dc", "CQL_DC", "datacenter1");

  private Env() {}

  private static String setting(String property, String envVar, String fallback) {
    String value = System.getProperty(property);
    if (value == null || value.isBlank()) {
      value = System.getenv(envVar);
    }
    return value == null || value.isBlank() ? fallback : value.trim();
  }

  static InetSocketAddress contactPoint() {
    return new InetSocketAddress(HOST, PORT);
  }

  /** A session with the driver's default settings: one contact point and the local DC, nothing else. */
  static CqlSession connect() {
    return CqlSession.builder().addContactPoint(contactPoint()).withLocalDatacenter(DC).build();
  }

  static String describe() {
    return HOST + ":" + PORT + " (dc " + DC + ")";
  }
}
