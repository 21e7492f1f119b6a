package shoal.drivertests;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.classic.spi.IThrowableProxy;
import ch.qos.logback.core.AppenderBase;
import com.datastax.oss.driver.api.core.CqlSession;
import java.util.ArrayList;
import java.util.List;
import org.slf4j.LoggerFactory;

/**
 * Records every WARN-or-worse event logged by the driver (loggers under {@code com.datastax} and,
 * for the Apache-branded releases, {@code org.apache.cassandra}). Tests take a {@link #mark()}
 * before an action and assert {@link #since(int, CqlSession)} is empty afterwards.
 *
 * <p>Test classes run in parallel, so events are attributed to a session: the driver names its
 * threads {@code <session>-io-N}, {@code <session>-admin-N}, ... and prefixes most messages with
 * {@code [<session>]} or {@code [<session>|...]}.
 */
final class DriverWarnings extends AppenderBase<ILoggingEvent> {
  private static final String[] LOGGERS = {"com.datastax", "org.apache.cassandra"};
  private static final List<Event> EVENTS = new ArrayList<>();
  private static boolean installed;

  private DriverWarnings() {}

  private static final class Event {
    final String thread;
    final String text;

    Event(String thread, String text) {
      this.thread = thread;
      this.text = text;
    }

    boolean belongsTo(String session) {
      return thread.startsWith(session + "-") || text.contains("[" + session + "]")
          || text.contains("[" + session + "|");
    }
  }

  /** Attaches the recording appender once per JVM; safe to call from every test class. */
  static synchronized void install() {
    if (installed) {
      return;
    }
    // While another thread is still initializing SLF4J, it hands out a substitute factory: wait
    // (bounded) for logback's own context rather than fail the class on a cast.
    org.slf4j.ILoggerFactory factory = LoggerFactory.getILoggerFactory();
    for (int i = 0; i < 200 && !(factory instanceof LoggerContext); i++) {
      try {
        Thread.sleep(25);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        break;
      }
      factory = LoggerFactory.getILoggerFactory();
    }
    LoggerContext context = (LoggerContext) factory;
    DriverWarnings appender = new DriverWarnings();
    appender.setContext(context);
    appender.setName("driver-warnings");
    appender.start();
    for (String name : LOGGERS) {
      Logger logger = context.getLogger(name);
      if (logger.getLevel() == null || !logger.getLevel().isGreaterOrEqual(Level.WARN)) {
        // make sure WARN reaches us even if someone lowers the root level
        logger.setLevel(Level.WARN);
      }
      logger.addAppender(appender);
    }
    installed = true;
  }

  @Override
  protected void append(ILoggingEvent event) {
    if (!event.getLevel().isGreaterOrEqual(Level.WARN)) {
      return;
    }
    StringBuilder text = new StringBuilder();
    text.append(event.getLevel()).append(' ').append(event.getLoggerName()).append(": ")
        .append(event.getFormattedMessage());
    for (IThrowableProxy cause = event.getThrowableProxy(); cause != null; cause = cause.getCause()) {
      text.append("\n    caused by ").append(cause.getClassName()).append(": ").append(cause.getMessage());
    }
    synchronized (EVENTS) {
      EVENTS.add(new Event(event.getThreadName(), "[" + event.getThreadName() + "] " + text));
    }
  }

  /** The number of warnings recorded so far; pass it to {@link #since(int, CqlSession)}. */
  static int mark() {
    synchronized (EVENTS) {
      return EVENTS.size();
    }
  }

  /** Warnings recorded after {@code mark} that were logged by (or about) {@code session}. */
  static List<String> since(int mark, CqlSession session) {
    String name = session.getName();
    List<String> found = new ArrayList<>();
    synchronized (EVENTS) {
      for (Event event : EVENTS.subList(Math.min(mark, EVENTS.size()), EVENTS.size())) {
        if (event.belongsTo(name)) {
          found.add(event.text);
        }
      }
    }
    return found;
  }

  static String format(List<String> warnings) {
    return warnings.isEmpty() ? "(none)" : "\n  " + String.join("\n  ", warnings);
  }
}
