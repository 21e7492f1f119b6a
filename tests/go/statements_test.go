package drivertest

import (
	"fmt"
	"sort"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// TestPreparedStatements exercises PREPARE/EXECUTE with bound values:
// INSERT, UPDATE, DELETE, SELECT with several markers, IN lists, reuse of the
// same prepared statement, and Session.Bind.
func TestPreparedStatements(t *testing.T) {
	s := shared(t)
	ks := createKeyspace(t, s)
	mustExec(t, s, fmt.Sprintf("CREATE TABLE %s.t (k int, c int, v text, n bigint, PRIMARY KEY (k, c))", ks))

	ins := fmt.Sprintf("INSERT INTO %s.t (k, c, v, n) VALUES (?, ?, ?, ?)", ks)
	for c := 0; c < 5; c++ {
		if err := s.Query(ins, 1, c, fmt.Sprint("v", c), int64(c)*1000).Exec(); err != nil {
			t.Fatalf("%s (1, %d, ...): expected success, got error: %v", ins, c, err)
		}
	}

	mustExec(t, s, fmt.Sprintf("UPDATE %s.t SET v = ? WHERE k = ? AND c = ?", ks), "updated", 1, 2)
	mustExec(t, s, fmt.Sprintf("DELETE FROM %s.t WHERE k = ? AND c = ?", ks), 1, 4)

	var rows []string
	iter := s.Query(fmt.Sprintf("SELECT c, v, n FROM %s.t WHERE k = ? AND c >= ? AND c < ?", ks), 1, 1, 10).Iter()
	var (
		c int
		v string
		n int64
	)
	for iter.Scan(&c, &v, &n) {
		rows = append(rows, fmt.Sprintf("%d:%s:%d", c, v, n))
	}
	if err := iter.Close(); err != nil {
		t.Fatalf("prepared range SELECT: expected rows, got error: %v", err)
	}
	want := "[1:v1:1000 2:updated:2000 3:v3:3000]"
	if fmt.Sprint(rows) != want {
		t.Errorf("prepared range SELECT after UPDATE/DELETE: expected %s, got %v", want, rows)
	}

	// IN with a bound list.
	rows = rows[:0]
	iter = s.Query(fmt.Sprintf("SELECT c FROM %s.t WHERE k = ? AND c IN ?", ks), 1, []int{0, 3, 4, 99}).Iter()
	for iter.Scan(&c) {
		rows = append(rows, fmt.Sprint(c))
	}
	if err := iter.Close(); err != nil {
		t.Fatalf("prepared SELECT ... IN ?: expected rows, got error: %v", err)
	}
	if fmt.Sprint(rows) != "[0 3]" {
		t.Errorf("prepared SELECT ... c IN (0, 3, 4, 99): expected [0 3], got %v", rows)
	}

	// Session.Bind computes values from the prepared metadata.
	var gotV string
	err := s.Bind(fmt.Sprintf("SELECT v FROM %s.t WHERE k = ? AND c = ?", ks), func(q *gocql.QueryInfo) ([]any, error) {
		if len(q.Args) != 2 || q.Args[0].Name != "k" || q.Args[1].Name != "c" {
			return nil, fmt.Errorf("prepared metadata: expected bind markers [k c], got %v", q.Args)
		}
		return []any{1, 3}, nil
	}).Scan(&gotV)
	if err != nil {
		t.Fatalf("Session.Bind SELECT: expected a row, got error: %v", err)
	}
	if gotV != "v3" {
		t.Errorf("Session.Bind SELECT v WHERE k=1 AND c=3: expected %q, got %q", "v3", gotV)
	}

	// Prepared-statement metadata describes markers and result columns.
	md, err := s.StatementMetadata(ctxTimeout(t, 20*time.Second), fmt.Sprintf("SELECT c, v FROM %s.t WHERE k = ?", ks), ks)
	if err != nil {
		t.Fatalf("StatementMetadata: expected metadata, got error: %v", err)
	}
	if len(md.BindColumns) != 1 || md.BindColumns[0].Name != "k" || md.BindColumns[0].TypeInfo.Type() != gocql.TypeInt {
		t.Errorf("prepared bind markers: expected [k int], got %v", md.BindColumns)
	}
	if len(md.ResultColumns) != 2 || md.ResultColumns[0].Name != "c" || md.ResultColumns[1].Name != "v" {
		t.Errorf("prepared result columns: expected [c v], got %v", md.ResultColumns)
	}
	if fmt.Sprint(md.PKBindColumnIndexes) != "[0]" {
		t.Errorf("prepared partition-key indexes: expected [0], got %v", md.PKBindColumnIndexes)
	}
}

// TestSimpleStatements sends statements as plain QUERY frames. gocql prepares
// every statement that starts with SELECT/INSERT/UPDATE/DELETE, so a leading
// comment is used to make it send the CQL text as-is, with literal values.
func TestSimpleStatements(t *testing.T) {
	s := shared(t)
	ks := createKeyspace(t, s)
	mustExec(t, s, fmt.Sprintf("CREATE TABLE %s.t (k int PRIMARY KEY, v text, l list<int>)", ks))
	for k := 0; k < 5; k++ {
		mustExec(t, s, fmt.Sprintf("/* simple */ INSERT INTO %s.t (k, v, l) VALUES (%d, 'v%d', [%d, %d])", ks, k, k, k, k+1))
	}
	mustExec(t, s, fmt.Sprintf("/* simple */ UPDATE %s.t SET v = 'changed' WHERE k = 3", ks))

	got := map[int]string{}
	iter := s.Query(fmt.Sprintf("/* simple */ SELECT k, v, l FROM %s.t", ks)).PageSize(2).Iter()
	var (
		k int
		v string
		l []int
	)
	for iter.Scan(&k, &v, &l) {
		if _, dup := got[k]; dup {
			t.Errorf("simple SELECT with PageSize(2): key %d returned twice", k)
		}
		got[k] = fmt.Sprintf("%s%v", v, l)
	}
	if err := iter.Close(); err != nil {
		t.Fatalf("simple SELECT: expected rows, got error: %v", err)
	}
	want := map[int]string{0: "v0[0 1]", 1: "v1[1 2]", 2: "v2[2 3]", 3: "changed[3 4]", 4: "v4[4 5]"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("simple SELECT k, v, l: expected %v, got %v", want, got)
	}

	// A literal-only SELECT that gocql does prepare (no markers) agrees.
	var v3 string
	if err := s.Query(fmt.Sprintf("SELECT v FROM %s.t WHERE k = 3", ks)).Scan(&v3); err != nil {
		t.Fatalf("SELECT v WHERE k = 3 (literal): expected a row, got error: %v", err)
	}
	if v3 != "changed" {
		t.Errorf("SELECT v WHERE k = 3: expected %q, got %q", "changed", v3)
	}
}

type batchCase struct {
	name       string
	typ        gocql.BatchType
	n          int
	partitions bool // one row per partition (true) or all rows in one partition
}

// TestBatches runs logged and unlogged batches of 10 and 100 inserts, into one
// partition and into many, and reads every row back.
func TestBatches(t *testing.T) {
	s := shared(t)
	ks := createKeyspace(t, s)
	var cases []batchCase
	for _, typ := range []struct {
		name string
		typ  gocql.BatchType
	}{{"logged", gocql.LoggedBatch}, {"unlogged", gocql.UnloggedBatch}} {
		for _, n := range []int{10, 100} {
			cases = append(cases,
				batchCase{fmt.Sprintf("%s_%d_one_partition", typ.name, n), typ.typ, n, false},
				batchCase{fmt.Sprintf("%s_%d_partitions", typ.name, n), typ.typ, n, true})
		}
	}
	for i := range cases {
		mustExec(t, s, fmt.Sprintf("CREATE TABLE %s.b%d (k int, c int, v text, PRIMARY KEY (k, c))", ks, i))
	}

	for i, bc := range cases {
		t.Run(bc.name, func(t *testing.T) {
			table := fmt.Sprintf("%s.b%d", ks, i)
			b := s.Batch(bc.typ)
			for j := 0; j < bc.n; j++ {
				k, c := 7, j
				if bc.partitions {
					k, c = j, 0
				}
				b.Query(fmt.Sprintf("INSERT INTO %s (k, c, v) VALUES (?, ?, ?)", table), k, c, fmt.Sprint("v", j))
			}
			if err := b.Exec(); err != nil {
				t.Fatalf("%s batch of %d inserts: expected success, got error: %v", bc.name, bc.n, err)
			}

			var got []string
			iter := s.Query(fmt.Sprintf("SELECT k, c, v FROM %s", table)).Iter()
			var (
				k, c int
				v    string
			)
			for iter.Scan(&k, &c, &v) {
				got = append(got, fmt.Sprintf("%d/%d=%s", k, c, v))
			}
			if err := iter.Close(); err != nil {
				t.Fatalf("reading back %s: expected rows, got error: %v", table, err)
			}
			var want []string
			for j := 0; j < bc.n; j++ {
				if bc.partitions {
					want = append(want, fmt.Sprintf("%d/0=v%d", j, j))
				} else {
					want = append(want, fmt.Sprintf("7/%d=v%d", j, j))
				}
			}
			sort.Strings(got)
			sort.Strings(want)
			if len(got) != len(want) {
				t.Fatalf("%s: expected %d rows after the batch, got %d", bc.name, len(want), len(got))
			}
			for j := range want {
				if got[j] != want[j] {
					t.Fatalf("%s: expected rows %v, got %v", bc.name, want, got)
				}
			}
		})
	}

	t.Run("mixed_statements", func(t *testing.T) {
		mustExec(t, s, fmt.Sprintf("CREATE TABLE %s.mixed (k int PRIMARY KEY, v text)", ks))
		mustExec(t, s, fmt.Sprintf("INSERT INTO %s.mixed (k, v) VALUES (1, 'one')", ks))
		mustExec(t, s, fmt.Sprintf("INSERT INTO %s.mixed (k, v) VALUES (2, 'two')", ks))
		b := s.Batch(gocql.LoggedBatch)
		b.Query(fmt.Sprintf("INSERT INTO %s.mixed (k, v) VALUES (?, ?)", ks), 3, "three")
		b.Query(fmt.Sprintf("UPDATE %s.mixed SET v = ? WHERE k = ?", ks), "uno", 1)
		b.Query(fmt.Sprintf("DELETE FROM %s.mixed WHERE k = ?", ks), 2)
		b.Query(fmt.Sprintf("INSERT INTO %s.mixed (k, v) VALUES (4, 'four')", ks))
		if err := b.Exec(); err != nil {
			t.Fatalf("logged batch of INSERT/UPDATE/DELETE: expected success, got error: %v", err)
		}
		got := map[int]string{}
		iter := s.Query(fmt.Sprintf("SELECT k, v FROM %s.mixed", ks)).Iter()
		var (
			k int
			v string
		)
		for iter.Scan(&k, &v) {
			got[k] = v
		}
		if err := iter.Close(); err != nil {
			t.Fatalf("reading back mixed: expected rows, got error: %v", err)
		}
		want := map[int]string{1: "uno", 3: "three", 4: "four"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("after mixed batch: expected %v, got %v", want, got)
		}
	})
}
