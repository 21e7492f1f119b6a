package drivertest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// TestLightweightTransactions runs INSERT IF NOT EXISTS, UPDATE IF, DELETE IF
// EXISTS and a conditional batch through gocql's MapScanCAS / ScanCAS /
// ExecuteBatchCAS, and reads at SERIAL.
func TestLightweightTransactions(t *testing.T) {
	s := shared(t)
	ks := createKeyspace(t, s)
	mustExec(t, s, fmt.Sprintf("CREATE TABLE %s.lwt (k int, c int, v int, PRIMARY KEY (k, c))", ks))

	ins := fmt.Sprintf("INSERT INTO %s.lwt (k, c, v) VALUES (?, ?, ?) IF NOT EXISTS", ks)
	existing := map[string]any{}
	applied, err := s.Query(ins, 1, 0, 10).MapScanCAS(existing)
	if err != nil || !applied {
		t.Fatalf("%s: expected [applied] true, got %v, %v", ins, applied, err)
	}
	existing = map[string]any{}
	applied, err = s.Query(ins, 1, 0, 11).MapScanCAS(existing)
	if err != nil || applied {
		t.Fatalf("%s again: expected [applied] false, got %v, %v", ins, applied, err)
	}
	if existing["v"] != 10 || existing["k"] != 1 || existing["c"] != 0 {
		t.Errorf("IF NOT EXISTS refused: expected the existing row (k=1 c=0 v=10), got %v", existing)
	}

	upd := fmt.Sprintf("UPDATE %s.lwt SET v = ? WHERE k = ? AND c = ? IF v = ?", ks)
	var current int
	applied, err = s.Query(upd, 12, 1, 0, 99).ScanCAS(&current)
	if err != nil || applied || current != 10 {
		t.Fatalf("%s with a wrong expected value: expected false and v=10, got %v, v=%d, %v", upd, applied, current, err)
	}
	applied, err = s.Query(upd, 12, 1, 0, 10).ScanCAS(&current)
	if err != nil || !applied {
		t.Fatalf("%s: expected [applied] true, got %v, %v", upd, applied, err)
	}

	var v int
	serial := s.Query(fmt.Sprintf("SELECT v FROM %s.lwt WHERE k = ? AND c = ?", ks), 1, 0).Consistency(gocql.Serial)
	if err := serial.Scan(&v); err != nil || v != 12 {
		t.Fatalf("SELECT at SERIAL: expected v=12, got %d, %v", v, err)
	}

	b := s.Batch(gocql.LoggedBatch)
	b.Query(fmt.Sprintf("UPDATE %s.lwt SET v = 13 WHERE k = 1 AND c = 0 IF v = 12", ks))
	b.Query(fmt.Sprintf("INSERT INTO %s.lwt (k, c, v) VALUES (1, 1, 1) IF NOT EXISTS", ks))
	applied, iter, err := s.ExecuteBatchCAS(b)
	if iter != nil {
		_ = iter.Close()
	}
	if err != nil || !applied {
		t.Fatalf("conditional batch: expected [applied] true, got %v, %v", applied, err)
	}

	del := fmt.Sprintf("DELETE FROM %s.lwt WHERE k = ? AND c = ? IF EXISTS", ks)
	if applied, err = s.Query(del, 1, 1).MapScanCAS(map[string]any{}); err != nil || !applied {
		t.Fatalf("%s: expected true, got %v, %v", del, applied, err)
	}
	if applied, err = s.Query(del, 1, 1).MapScanCAS(map[string]any{}); err != nil || applied {
		t.Fatalf("%s of a deleted row: expected false, got %v, %v", del, applied, err)
	}
}

// TestConcurrentCompareAndSet has 8 goroutines increment one value by
// compare-and-set 20 times each; every expected value must be won once.
func TestConcurrentCompareAndSet(t *testing.T) {
	s := shared(t)
	ks := createKeyspace(t, s)
	mustExec(t, s, fmt.Sprintf("CREATE TABLE %s.reg (k int PRIMARY KEY, v int)", ks))
	mustExec(t, s, fmt.Sprintf("INSERT INTO %s.reg (k, v) VALUES (0, 0)", ks))
	read := fmt.Sprintf("SELECT v FROM %s.reg WHERE k = 0", ks)
	upd := fmt.Sprintf("UPDATE %s.reg SET v = ? WHERE k = 0 IF v = ?", ks)
	var mu sync.Mutex
	won := map[int]int{}
	err := parallelDo(8, 8, func(int) error {
		for done := 0; done < 20; {
			var v int
			if err := s.Query(read).Consistency(gocql.Serial).Scan(&v); err != nil {
				return err
			}
			var current int
			applied, err := s.Query(upd, v+1, v).ScanCAS(&current)
			if err != nil {
				return err
			}
			if applied {
				mu.Lock()
				won[v]++
				mu.Unlock()
				done++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("concurrent CAS: %v", err)
	}
	for v := 0; v < 160; v++ {
		if won[v] != 1 {
			t.Fatalf("expected value %d was won %d times (want exactly once)", v, won[v])
		}
	}
}

// TestCounters updates counter columns (single statements and a counter
// batch), reads them back, and checks Cassandra's refusal of a plain INSERT.
func TestCounters(t *testing.T) {
	s := shared(t)
	ks := createKeyspace(t, s)
	mustExec(t, s, fmt.Sprintf("CREATE TABLE %s.hits (page text PRIMARY KEY, views counter, likes counter)", ks))
	inc := fmt.Sprintf("UPDATE %s.hits SET views = views + ?, likes = likes - ? WHERE page = ?", ks)
	err := parallelDo(200, 16, func(i int) error {
		return s.Query(inc, int64(1), int64(i%2), fmt.Sprint("p", i%4)).Exec()
	})
	if err != nil {
		t.Fatalf("%s: %v", inc, err)
	}
	b := s.Batch(gocql.CounterBatch)
	b.Query(fmt.Sprintf("UPDATE %s.hits SET views = views + 100 WHERE page = 'p0'", ks))
	b.Query(fmt.Sprintf("UPDATE %s.hits SET views = views + 100 WHERE page = 'p1'", ks))
	if err := s.ExecuteBatch(b); err != nil {
		t.Fatalf("counter batch: %v", err)
	}
	want := map[string][2]int64{"p0": {150, 0}, "p1": {150, -50}, "p2": {50, 0}, "p3": {50, -50}}
	for page, w := range want {
		var views, likes int64
		q := s.Query(fmt.Sprintf("SELECT views, likes FROM %s.hits WHERE page = ?", ks), page)
		if err := q.Scan(&views, &likes); err != nil {
			t.Fatalf("reading %s: %v", page, err)
		}
		if views != w[0] || likes != w[1] {
			t.Errorf("%s: expected views=%d likes=%d, got %d %d", page, w[0], w[1], views, likes)
		}
	}
	err = s.Query(fmt.Sprintf("INSERT INTO %s.hits (page, views) VALUES ('x', 1)", ks)).Exec()
	if err == nil {
		t.Fatalf("INSERT into a counter table: expected an error")
	}
	var invalid *gocql.RequestErrInvalid
	if !errors.As(err, &invalid) {
		t.Errorf("INSERT into a counter table: expected Invalid, got %T: %v", err, err)
	}
}
