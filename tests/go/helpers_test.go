package drivertest

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// Connection settings come from the environment so the same suite can run
// against Shoal and against a reference Apache Cassandra.
//
//	CQL_HOST           host to connect to (default 127.0.0.1)
//	CQL_PORT           native protocol port (default 9042)
//	CQL_PROTO_VERSION  optional: pin the protocol version for every test
//	                   except TestDefaultConnect (which always negotiates).
//	                   Unset means "let gocql negotiate", as applications do.
func cqlHost() string {
	if h := os.Getenv("CQL_HOST"); h != "" {
		return h
	}
	return "127.0.0.1"
}

func cqlPort() int {
	if p := os.Getenv("CQL_PORT"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil {
			panic(fmt.Sprintf("CQL_PORT=%q is not a number: %v", p, err))
		}
		return n
	}
	return 9042
}

func pinnedProtoVersion() int {
	if v := os.Getenv("CQL_PROTO_VERSION"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			panic(fmt.Sprintf("CQL_PROTO_VERSION=%q is not a number: %v", v, err))
		}
		return n
	}
	return 0
}

// defaultCluster is gocql.NewCluster with only the port set and the
// timeouts raised slightly for slow, shared CI machines. ProtoVersion is
// deliberately left at 0 so the driver negotiates the protocol version.
func defaultCluster() *gocql.ClusterConfig {
	cluster := gocql.NewCluster(cqlHost())
	cluster.Port = cqlPort()
	cluster.Timeout = 15 * time.Second
	cluster.ConnectTimeout = 15 * time.Second
	return cluster
}

// testCluster is defaultCluster plus the optional CQL_PROTO_VERSION pin.
func testCluster() *gocql.ClusterConfig {
	cluster := defaultCluster()
	cluster.ProtoVersion = pinnedProtoVersion()
	return cluster
}

// recordingLogger is a gocql.StructuredLogger that keeps every message so a
// failing test can print what the driver saw, and that remembers the
// protocol version gocql reports after negotiation.
type recordingLogger struct {
	mu    sync.Mutex
	lines []string
	proto int
}

func (l *recordingLogger) record(level, msg string, fields []gocql.LogField) {
	var b strings.Builder
	b.WriteString(level)
	b.WriteString(": ")
	b.WriteString(msg)
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, f := range fields {
		fmt.Fprintf(&b, " %s=%v", f.Name, f.Value.Any())
		if msg == "Discovered protocol version." && f.Name == "protocol_version" &&
			f.Value.LogFieldValueType() == gocql.LogFieldTypeInt64 {
			l.proto = int(f.Value.Int64())
		}
	}
	l.lines = append(l.lines, b.String())
}

func (l *recordingLogger) Error(msg string, fields ...gocql.LogField) {
	l.record("ERROR", msg, fields)
}
func (l *recordingLogger) Warning(msg string, fields ...gocql.LogField) {
	l.record("WARN", msg, fields)
}
func (l *recordingLogger) Info(msg string, fields ...gocql.LogField) { l.record("INFO", msg, fields) }
func (l *recordingLogger) Debug(msg string, fields ...gocql.LogField) {
	l.record("DEBUG", msg, fields)
}

func (l *recordingLogger) discoveredProto() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.proto
}

func (l *recordingLogger) dump() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) == 0 {
		return "  (gocql logged nothing)"
	}
	const max = 60
	lines := l.lines
	if len(lines) > max {
		lines = lines[len(lines)-max:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// newSession opens a session on cluster, failing the test (with the driver's
// log) if that is impossible. The session is closed when the test ends.
func newSession(t testing.TB, cluster *gocql.ClusterConfig) *gocql.Session {
	t.Helper()
	logger := &recordingLogger{}
	if cluster.Logger == nil {
		cluster.Logger = logger
	}
	session, err := cluster.CreateSession()
	if err != nil {
		t.Fatalf("connecting to %s:%d (ProtoVersion=%d, 0 means negotiate): expected a session, got error: %v\ngocql log:\n%s",
			cqlHost(), cqlPort(), cluster.ProtoVersion, err, logger.dump())
	}
	t.Cleanup(session.Close)
	return session
}

// The shared session is used by most tests; it is opened lazily so a server
// that refuses connections fails every test with the same clear message.
var (
	sharedOnce    sync.Once
	sharedSess    *gocql.Session
	sharedErr     error
	sharedLogDump func() string
)

func shared(t testing.TB) *gocql.Session {
	t.Helper()
	sharedOnce.Do(func() {
		logger := &recordingLogger{}
		cluster := testCluster()
		cluster.Logger = logger
		sharedSess, sharedErr = cluster.CreateSession()
		sharedLogDump = logger.dump
	})
	if sharedErr != nil {
		t.Fatalf("connecting the shared session to %s:%d (CQL_PROTO_VERSION=%q): expected a session, got error: %v\ngocql log:\n%s",
			cqlHost(), cqlPort(), os.Getenv("CQL_PROTO_VERSION"), sharedErr, sharedLogDump())
	}
	return sharedSess
}

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedSess != nil {
		sharedSess.Close()
	}
	os.Exit(code)
}

var (
	ksCounter  atomic.Int64
	nonNameRun = regexp.MustCompile(`[^a-z0-9]+`)
	runID      = strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
)

// createKeyspace creates a uniquely named SimpleStrategy RF 1 keyspace for
// the test and drops it when the test ends.
func createKeyspace(t testing.TB, s *gocql.Session) string {
	t.Helper()
	base := nonNameRun.ReplaceAllString(strings.ToLower(strings.TrimPrefix(t.Name(), "Test")), "_")
	if len(base) > 24 {
		base = base[:24]
	}
	ks := fmt.Sprintf("gocql_%s_%s_%d", strings.Trim(base, "_"), runID, ksCounter.Add(1))
	mustExec(t, s, fmt.Sprintf(
		"CREATE KEYSPACE %s WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}", ks))
	t.Cleanup(func() {
		if err := s.Query("DROP KEYSPACE IF EXISTS " + ks).Exec(); err != nil {
			t.Logf("cleanup: DROP KEYSPACE %s failed: %v", ks, err)
		}
	})
	return ks
}

// mustExec runs a statement and fails the test if the server returns an error.
func mustExec(t testing.TB, s *gocql.Session, stmt string, values ...any) {
	t.Helper()
	if err := s.Query(stmt, values...).Exec(); err != nil {
		t.Fatalf("%s (values %v): expected success, got error: %v", stmt, values, err)
	}
}

// ctxTimeout returns a context that is cancelled after d or when the test ends.
func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// parallelDo runs fn(i) for i in [0, n) on a few goroutines and returns the
// first error.
func parallelDo(n, workers int, fn func(i int) error) error {
	var (
		wg       sync.WaitGroup
		next     atomic.Int64
		firstErr error
		errOnce  sync.Once
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("item %d: %w", i, err) })
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}
