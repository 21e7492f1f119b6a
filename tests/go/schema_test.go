package drivertest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

type wantColumn struct {
	name    string
	cqlType string // as written in system_schema.columns.type (spaces ignored)
	kind    gocql.ColumnKind
	order   gocql.ColumnOrder // clustering columns only
}

var schemaTableColumns = []wantColumn{
	{"pk1", "int", gocql.ColumnPartitionKey, gocql.ASC},
	{"pk2", "text", gocql.ColumnPartitionKey, gocql.ASC},
	{"c1", "timestamp", gocql.ColumnClusteringKey, gocql.DESC},
	{"c2", "uuid", gocql.ColumnClusteringKey, gocql.ASC},
	{"s", "int", gocql.ColumnStatic, gocql.ASC},
	{"v_bigint", "bigint", gocql.ColumnRegular, gocql.ASC},
	{"v_list", "list<text>", gocql.ColumnRegular, gocql.ASC},
	{"v_map", "map<int,frozen<set<text>>>", gocql.ColumnRegular, gocql.ASC},
	{"v_tuple", "frozen<tuple<int,text>>", gocql.ColumnRegular, gocql.ASC},
}

const schemaTableDDL = `CREATE TABLE %s.meta_t (
	pk1 int, pk2 text, c1 timestamp, c2 uuid, s int static,
	v_bigint bigint, v_list list<text>, v_map map<int, frozen<set<text>>>, v_tuple tuple<int, text>,
	PRIMARY KEY ((pk1, pk2), c1, c2)
) WITH CLUSTERING ORDER BY (c1 DESC, c2 ASC)`

func normType(s string) string { return strings.ReplaceAll(s, " ", "") }

// checkTableMetadata compares gocql's view of meta_t with schemaTableColumns
// and returns every mismatch.
func checkTableMetadata(ks string, km *gocql.KeyspaceMetadata) []string {
	var problems []string
	if km.Name != ks {
		problems = append(problems, fmt.Sprintf("keyspace name: expected %q, got %q", ks, km.Name))
	}
	if !strings.HasSuffix(km.StrategyClass, "SimpleStrategy") {
		problems = append(problems, fmt.Sprintf("keyspace strategy class: expected ...SimpleStrategy, got %q", km.StrategyClass))
	}
	tm, ok := km.Tables["meta_t"]
	if !ok {
		names := make([]string, 0, len(km.Tables))
		for n := range km.Tables {
			names = append(names, n)
		}
		return append(problems, fmt.Sprintf("tables: expected meta_t, got %v", names))
	}
	if tm.Keyspace != ks || tm.Name != "meta_t" {
		problems = append(problems, fmt.Sprintf("table identity: expected %s.meta_t, got %s.%s", ks, tm.Keyspace, tm.Name))
	}

	var wantPK, wantCK, gotPK, gotCK []string
	for _, c := range schemaTableColumns {
		switch c.kind {
		case gocql.ColumnPartitionKey:
			wantPK = append(wantPK, c.name)
		case gocql.ColumnClusteringKey:
			wantCK = append(wantCK, c.name)
		}
	}
	for _, c := range tm.PartitionKey {
		if c == nil {
			gotPK = append(gotPK, "<nil>")
			continue
		}
		gotPK = append(gotPK, c.Name)
	}
	for _, c := range tm.ClusteringColumns {
		if c == nil {
			gotCK = append(gotCK, "<nil>")
			continue
		}
		gotCK = append(gotCK, c.Name)
	}
	if fmt.Sprint(gotPK) != fmt.Sprint(wantPK) {
		problems = append(problems, fmt.Sprintf("partition key: expected %v, got %v", wantPK, gotPK))
	}
	if fmt.Sprint(gotCK) != fmt.Sprint(wantCK) {
		problems = append(problems, fmt.Sprintf("clustering columns: expected %v, got %v", wantCK, gotCK))
	}

	if len(tm.Columns) != len(schemaTableColumns) {
		names := make([]string, 0, len(tm.Columns))
		for n := range tm.Columns {
			names = append(names, n)
		}
		problems = append(problems, fmt.Sprintf("column count: expected %d, got %d (%v)", len(schemaTableColumns), len(tm.Columns), names))
	}
	for _, want := range schemaTableColumns {
		col, ok := tm.Columns[want.name]
		if !ok {
			problems = append(problems, fmt.Sprintf("column %s: expected it in metadata, missing", want.name))
			continue
		}
		if normType(col.Validator) != want.cqlType {
			problems = append(problems, fmt.Sprintf("column %s type: expected %q, got %q", want.name, want.cqlType, col.Validator))
		}
		if col.Kind != want.kind {
			problems = append(problems, fmt.Sprintf("column %s kind: expected %v, got %v", want.name, want.kind, col.Kind))
		}
		if want.kind == gocql.ColumnClusteringKey && col.Order != want.order {
			problems = append(problems, fmt.Sprintf("column %s clustering order: expected DESC=%v, got DESC=%v (clustering_order %q)",
				want.name, want.order, col.Order, col.ClusteringOrder))
		}
		if col.Type == nil {
			problems = append(problems, fmt.Sprintf("column %s: expected a parsed TypeInfo, got nil", want.name))
		}
	}
	return problems
}

// TestSchemaMetadata checks Session.KeyspaceMetadata after CREATE TABLE, both
// read directly from system_schema (metadata cache disabled) and from the
// driver's cache, which gocql refreshes when the server pushes a
// SCHEMA_CHANGE event.
func TestSchemaMetadata(t *testing.T) {
	s := shared(t)
	ks := createKeyspace(t, s)
	mustExec(t, s, fmt.Sprintf(schemaTableDDL, ks))

	t.Run("direct", func(t *testing.T) {
		cluster := testCluster()
		cluster.Metadata.CacheMode = gocql.Disabled
		direct := newSession(t, cluster)
		km, err := direct.KeyspaceMetadata(ks)
		if err != nil {
			t.Fatalf("KeyspaceMetadata(%q) with the cache disabled: expected metadata, got error: %v", ks, err)
		}
		for _, p := range checkTableMetadata(ks, km) {
			t.Error(p)
		}
	})

	t.Run("cached_after_schema_event", func(t *testing.T) {
		// The shared session saw the keyspace being created by itself; its
		// cache must catch up with the new table through schema events.
		deadline := time.Now().Add(20 * time.Second)
		var problems []string
		for {
			km, err := s.KeyspaceMetadata(ks)
			if err != nil {
				problems = []string{fmt.Sprintf("KeyspaceMetadata(%q): expected metadata, got error: %v", ks, err)}
			} else {
				problems = checkTableMetadata(ks, km)
			}
			if len(problems) == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		for _, p := range problems {
			t.Errorf("after waiting 20s for the schema-change event refresh: %s", p)
		}
	})
}
