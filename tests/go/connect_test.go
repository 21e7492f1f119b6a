package drivertest

import (
	"context"
	"sync"
	"testing"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// frameVersions records the protocol version of every frame gocql reads.
type frameVersions struct {
	mu       sync.Mutex
	versions map[int]int // version -> frames seen
}

func (f *frameVersions) ObserveFrameHeader(_ context.Context, h gocql.ObservedFrameHeader) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.versions == nil {
		f.versions = map[int]int{}
	}
	f.versions[int(h.Version)&0x7f]++ // drop the response direction bit
}

func (f *frameVersions) snapshot() map[int]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[int]int, len(f.versions))
	for k, v := range f.versions {
		out[k] = v
	}
	return out
}

// TestDefaultConnect connects the way an application does: NewCluster with
// only the port set, no ProtoVersion. gocql v2 then negotiates, starting at
// protocol v5; a server that does not speak v5 must reject it in a way that
// lets the driver fall back to v4 (an error on stream 0), otherwise the
// connection fails here.
func TestDefaultConnect(t *testing.T) {
	logger := &recordingLogger{}
	frames := &frameVersions{}
	cluster := defaultCluster()
	cluster.Logger = logger
	cluster.FrameHeaderObserver = frames

	session, err := cluster.CreateSession()
	if err != nil {
		t.Fatalf("default connect to %s:%d (gocql.NewCluster, Port only, ProtoVersion negotiated): expected a session, got error: %v\n"+
			"gocql negotiates starting at protocol v5 and only falls back to v4 when the server's error reply "+
			"arrives on stream 0.\ngocql log:\n%s", cqlHost(), cqlPort(), err, logger.dump())
	}
	defer session.Close()

	proto := logger.discoveredProto()
	if proto != 4 && proto != 5 {
		t.Fatalf("negotiated protocol version: expected 4 or 5, got %d\ngocql log:\n%s", proto, logger.dump())
	}
	t.Logf("negotiated native protocol v%d with %s:%d", proto, cqlHost(), cqlPort())

	var releaseVersion string
	if err := session.Query("SELECT release_version FROM system.local").Scan(&releaseVersion); err != nil {
		t.Fatalf("SELECT release_version FROM system.local on the default session: expected one row, got error: %v", err)
	}
	if releaseVersion == "" {
		t.Errorf("system.local release_version: expected a non-empty version string, got %q", releaseVersion)
	}
	t.Logf("server release_version %s", releaseVersion)

	// Every frame on the established connections must use the negotiated
	// version (frames from rejected negotiation attempts may differ, so we
	// only require that the negotiated version dominates).
	seen := frames.snapshot()
	if seen[proto] == 0 {
		t.Errorf("frame versions observed: expected frames of negotiated version v%d, got %v", proto, seen)
	}
	for v, n := range seen {
		if v != proto && n > 2 {
			t.Errorf("frame versions observed: expected only v%d after negotiation (plus at most a rejected attempt), got %d frames of v%d (all: %v)",
				proto, n, v, seen)
		}
	}

	// A prepared statement with a bound value over the default session.
	var key string
	if err := session.Query("SELECT key FROM system.local WHERE key = ?", "local").Scan(&key); err != nil {
		t.Fatalf("prepared SELECT key FROM system.local WHERE key = ? on the default session: expected a row, got error: %v", err)
	}
	if key != "local" {
		t.Errorf("system.local key: expected %q, got %q", "local", key)
	}
}

// TestNegotiatesProtocolV5 checks that default settings end on protocol v5
// (gocql v2 opens at v5; Cassandra 4.0+ and Shoal speak it) and that every
// frame after the handshake is a v5 one, with a value larger than one
// 128 KiB v5 segment written and read back.
func TestNegotiatesProtocolV5(t *testing.T) {
	logger := &recordingLogger{}
	frames := &frameVersions{}
	cluster := defaultCluster()
	cluster.Logger = logger
	cluster.FrameHeaderObserver = frames
	session, err := cluster.CreateSession()
	if err != nil {
		t.Fatalf("default connect to %s:%d: %v\ngocql log:\n%s", cqlHost(), cqlPort(), err, logger.dump())
	}
	// Closed after the keyspace's cleanup (cleanups run last registered first).
	t.Cleanup(session.Close)
	if proto := logger.discoveredProto(); proto != 5 {
		t.Fatalf("negotiated protocol version: expected 5, got %d\ngocql log:\n%s", proto, logger.dump())
	}
	ks := createKeyspace(t, session)
	if err := session.Query("CREATE TABLE " + ks + ".blobs (k int PRIMARY KEY, v blob)").Exec(); err != nil {
		t.Fatalf("CREATE TABLE: %v", err)
	}
	for i, size := range []int{0, 131071, 131072, 300 * 1024, 1024 * 1024} {
		value := make([]byte, size)
		for j := range value {
			value[j] = byte((j*31 + i) % 251)
		}
		if err := session.Query("INSERT INTO "+ks+".blobs (k, v) VALUES (?, ?)", i, value).Exec(); err != nil {
			t.Fatalf("INSERT of %d bytes: %v", size, err)
		}
		var got []byte
		if err := session.Query("SELECT v FROM "+ks+".blobs WHERE k = ?", i).Scan(&got); err != nil {
			t.Fatalf("SELECT of %d bytes: %v", size, err)
		}
		if len(got) != size || string(got) != string(value) {
			t.Fatalf("value of %d bytes read back as %d bytes (or different bytes)", size, len(got))
		}
	}
	seen := frames.snapshot()
	if seen[5] == 0 {
		t.Fatalf("frame versions observed: expected v5 frames, got %v", seen)
	}
	for v, n := range seen {
		if v != 5 && n > 2 {
			t.Errorf("frame versions observed: expected only v5 after negotiation, got %d frames of v%d (all: %v)", n, v, seen)
		}
	}
}

// TestPinnedProtocolV4 connects with ProtoVersion = 4, the fallback every
// v4-only server must support.
func TestPinnedProtocolV4(t *testing.T) {
	cluster := defaultCluster()
	cluster.ProtoVersion = 4
	session := newSession(t, cluster)
	var key string
	if err := session.Query("SELECT key FROM system.local").Scan(&key); err != nil {
		t.Fatalf("SELECT key FROM system.local over protocol v4: expected a row, got error: %v", err)
	}
	if key != "local" {
		t.Errorf("system.local key over protocol v4: expected %q, got %q", "local", key)
	}
}
