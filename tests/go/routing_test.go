package drivertest

import (
	"fmt"
	"strings"
	"testing"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// Murmur3Partitioner tokens of an int partition key, as computed by Apache
// Cassandra 5.0 (verified against a live node).
var murmur3IntTokens = map[int]int64{
	0: -3485513579396041028,
	1: -4069959284402364209,
}

// TestTokenAwareRouting connects with a token-aware host selection policy,
// which makes gocql read the partitioner and token ring from system.local /
// system.peers and compute routing keys for prepared statements, and checks
// that reads and writes work and that token() agrees with Murmur3.
func TestTokenAwareRouting(t *testing.T) {
	ks := createKeyspace(t, shared(t))

	cluster := testCluster()
	cluster.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(gocql.RoundRobinHostPolicy())
	s := newSession(t, cluster)

	hosts := s.GetHosts()
	if len(hosts) == 0 {
		t.Fatalf("GetHosts with a token-aware policy: expected at least one host, got none")
	}
	for _, h := range hosts {
		if !strings.HasSuffix(h.Partitioner(), "Murmur3Partitioner") {
			t.Errorf("host %s partitioner: expected org.apache.cassandra.dht.Murmur3Partitioner, got %q", h.ConnectAddressAndPort(), h.Partitioner())
		}
		if len(h.Tokens()) == 0 {
			t.Errorf("host %s tokens: expected the node's tokens from system.local, got none", h.ConnectAddressAndPort())
		}
	}

	mustExec(t, s, fmt.Sprintf("CREATE TABLE %s.t (k int PRIMARY KEY, v text)", ks))
	const n = 50
	if err := parallelDo(n, 8, func(i int) error {
		return s.Query(fmt.Sprintf("INSERT INTO %s.t (k, v) VALUES (?, ?)", ks), i, fmt.Sprint("v", i)).Exec()
	}); err != nil {
		t.Fatalf("token-aware INSERT: expected success, got %v", err)
	}
	for i := 0; i < n; i++ {
		var v string
		iter := s.Query(fmt.Sprintf("SELECT v FROM %s.t WHERE k = ?", ks), i).Iter()
		ok := iter.Scan(&v)
		host := iter.Host()
		if err := iter.Close(); err != nil {
			t.Fatalf("token-aware SELECT k=%d: expected a row, got error %v", i, err)
		}
		if !ok || v != fmt.Sprint("v", i) {
			t.Fatalf("token-aware SELECT k=%d: expected v=%q, got found=%v v=%q", i, fmt.Sprint("v", i), ok, v)
		}
		if host == nil {
			t.Fatalf("token-aware SELECT k=%d: expected the iterator to report the host used, got nil", i)
		}
	}

	tokenOf := func(k int) int64 {
		t.Helper()
		var tok int64
		if err := s.Query(fmt.Sprintf("SELECT token(k) FROM %s.t WHERE k = ?", ks), k).Scan(&tok); err != nil {
			t.Fatalf("SELECT token(k) WHERE k = %d: expected a bigint token, got error %v", k, err)
		}
		return tok
	}
	for k, want := range murmur3IntTokens {
		if got := tokenOf(k); got != want {
			t.Errorf("token(k) for int key %d: expected Murmur3 token %d, got %d", k, want, got)
		}
	}
	// Stability: the same key gives the same token every time, and the
	// result metadata says bigint.
	for k := 0; k < 10; k++ {
		if a, b := tokenOf(k), tokenOf(k); a != b {
			t.Errorf("token(k) for key %d: expected the same token twice, got %d then %d", k, a, b)
		}
	}
	iter := s.Query(fmt.Sprintf("SELECT token(k) FROM %s.t WHERE k = ?", ks), 1).Iter()
	cols := iter.Columns()
	_ = iter.Close()
	if len(cols) != 1 || cols[0].TypeInfo == nil || cols[0].TypeInfo.Type() != gocql.TypeBigInt {
		t.Errorf("token(k) result metadata: expected one bigint column, got %v", cols)
	}
}
