package drivertest

import (
	"fmt"
	"math/big"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"gopkg.in/inf.v0"
)

// typeCase is one CQL type: a column of that type, a value to write through a
// prepared INSERT and the Go type to read it back into.
type typeCase struct {
	col     string
	cqlType string
	value   any
	// wire is the set of protocol type ids the result metadata may report.
	wire []gocql.Type
	// equal compares the written and the read value (default reflect.DeepEqual).
	equal func(want, got any) bool
}

func mustUUID() gocql.UUID {
	u, err := gocql.RandomUUID()
	if err != nil {
		panic(err)
	}
	return u
}

func mustBig(s string) *big.Int {
	b, ok := new(big.Int).SetString(s, 10)
	if !ok {
		panic(s)
	}
	return b
}

func typeCases() []typeCase {
	timeEqual := func(want, got any) bool { return want.(time.Time).Equal(got.(time.Time)) }
	return []typeCase{
		{col: "c_ascii", cqlType: "ascii", value: "plain ascii ~!@#", wire: []gocql.Type{gocql.TypeAscii}},
		{col: "c_bigint", cqlType: "bigint", value: int64(-9223372036854775807), wire: []gocql.Type{gocql.TypeBigInt}},
		{col: "c_blob", cqlType: "blob", value: []byte{0x00, 0x01, 0xfe, 0xff, 0x7f}, wire: []gocql.Type{gocql.TypeBlob}},
		{col: "c_boolean", cqlType: "boolean", value: true, wire: []gocql.Type{gocql.TypeBoolean}},
		{col: "c_date", cqlType: "date", value: time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC), wire: []gocql.Type{gocql.TypeDate}, equal: timeEqual},
		{col: "c_decimal", cqlType: "decimal", value: inf.NewDec(-1234567890123456789, 7), wire: []gocql.Type{gocql.TypeDecimal},
			equal: func(want, got any) bool {
				w, g := want.(*inf.Dec), got.(*inf.Dec)
				return g != nil && w.Cmp(g) == 0 && w.Scale() == g.Scale()
			}},
		{col: "c_double", cqlType: "double", value: 3.141592653589793, wire: []gocql.Type{gocql.TypeDouble}},
		{col: "c_duration", cqlType: "duration", value: gocql.Duration{Months: 14, Days: 3, Nanoseconds: 3_000_000_004},
			wire: []gocql.Type{gocql.TypeDuration}},
		{col: "c_float", cqlType: "float", value: float32(-1.25), wire: []gocql.Type{gocql.TypeFloat}},
		{col: "c_inet4", cqlType: "inet", value: net.ParseIP("192.168.1.42"), wire: []gocql.Type{gocql.TypeInet},
			equal: func(want, got any) bool { return want.(net.IP).Equal(got.(net.IP)) }},
		{col: "c_inet6", cqlType: "inet", value: net.ParseIP("2001:db8::ff00:42:8329"), wire: []gocql.Type{gocql.TypeInet},
			equal: func(want, got any) bool { return want.(net.IP).Equal(got.(net.IP)) }},
		{col: "c_int", cqlType: "int", value: int32(-2147483647), wire: []gocql.Type{gocql.TypeInt}},
		{col: "c_smallint", cqlType: "smallint", value: int16(-32000), wire: []gocql.Type{gocql.TypeSmallInt}},
		{col: "c_text", cqlType: "text", value: "héllo wörld ✓ 日本", wire: []gocql.Type{gocql.TypeVarchar, gocql.TypeText}},
		{col: "c_time", cqlType: "time", value: 13*time.Hour + 14*time.Minute + 15*time.Second + 123456789, wire: []gocql.Type{gocql.TypeTime}},
		{col: "c_timestamp", cqlType: "timestamp", value: time.UnixMilli(1700000000123).UTC(), wire: []gocql.Type{gocql.TypeTimestamp}, equal: timeEqual},
		{col: "c_timeuuid", cqlType: "timeuuid", value: gocql.TimeUUID(), wire: []gocql.Type{gocql.TypeTimeUUID}},
		{col: "c_tinyint", cqlType: "tinyint", value: int8(-7), wire: []gocql.Type{gocql.TypeTinyInt}},
		{col: "c_uuid", cqlType: "uuid", value: mustUUID(), wire: []gocql.Type{gocql.TypeUUID}},
		{col: "c_varchar", cqlType: "varchar", value: "varchar value", wire: []gocql.Type{gocql.TypeVarchar, gocql.TypeText}},
		{col: "c_varint", cqlType: "varint", value: mustBig("-123456789012345678901234567890"), wire: []gocql.Type{gocql.TypeVarint},
			equal: func(want, got any) bool { return got.(*big.Int) != nil && want.(*big.Int).Cmp(got.(*big.Int)) == 0 }},
		{col: "c_list", cqlType: "list<int>", value: []int{3, 1, 2, 1}, wire: []gocql.Type{gocql.TypeList}},
		{col: "c_set", cqlType: "set<text>", value: []string{"a", "b", "c"}, wire: []gocql.Type{gocql.TypeSet}},
		{col: "c_map", cqlType: "map<text, int>", value: map[string]int{"one": 1, "two": 2, "minus": -1}, wire: []gocql.Type{gocql.TypeMap}},
		{col: "c_frozen_list", cqlType: "frozen<list<int>>", value: []int{7, 8, 9}, wire: []gocql.Type{gocql.TypeList}},
		{col: "c_tuple_list", cqlType: "list<frozen<tuple<int, text>>>", value: []intText{{1, "one"}, {-2, "minus two"}}, wire: []gocql.Type{gocql.TypeList}},
		{col: "c_nested", cqlType: "map<text, frozen<list<int>>>", value: map[string][]int{"a": {1, 2}, "b": {3}}, wire: []gocql.Type{gocql.TypeMap}},
	}
}

// intText is a Go struct gocql marshals to and from tuple<int, text>.
type intText struct {
	A int
	B string
}

func wireTypeOK(got gocql.Type, allowed []gocql.Type) bool {
	for _, a := range allowed {
		if got == a {
			return true
		}
	}
	return false
}

// TestTypesRoundTrip writes every CQL type through a prepared INSERT, reads
// it back through a prepared SELECT and compares, then writes nulls.
func TestTypesRoundTrip(t *testing.T) {
	s := shared(t)
	ks := createKeyspace(t, s)
	cases := typeCases()

	cols := []string{"k int PRIMARY KEY", "c_tuple tuple<int, text>"}
	for _, c := range cases {
		cols = append(cols, c.col+" "+c.cqlType)
	}
	mustExec(t, s, fmt.Sprintf("CREATE TABLE %s.types (%s)", ks, strings.Join(cols, ", ")))

	for i, c := range cases {
		key := i + 1
		t.Run(c.col+"_"+strings.NewReplacer("<", "_", ">", "", ", ", "_").Replace(c.cqlType), func(t *testing.T) {
			ins := fmt.Sprintf("INSERT INTO %s.types (k, %s) VALUES (?, ?)", ks, c.col)
			if err := s.Query(ins, key, c.value).Exec(); err != nil {
				t.Fatalf("%s with %s = %#v: expected success, got error: %v", ins, c.cqlType, c.value, err)
			}
			sel := fmt.Sprintf("SELECT %s FROM %s.types WHERE k = ?", c.col, ks)
			got := reflect.New(reflect.TypeOf(c.value))
			iter := s.Query(sel, key).Iter()
			found := iter.Scan(got.Interface())
			meta := iter.Columns()
			if err := iter.Close(); err != nil {
				t.Fatalf("%s: expected a %s value, got error: %v", sel, c.cqlType, err)
			}
			if !found {
				t.Fatalf("%s: expected one row, got none", sel)
			}
			gotV := got.Elem().Interface()
			eq := c.equal
			if eq == nil {
				eq = func(want, got any) bool { return reflect.DeepEqual(want, got) }
			}
			if !eq(c.value, gotV) {
				t.Errorf("%s round trip: wrote %#v, read back %#v", c.cqlType, c.value, gotV)
			}
			if len(meta) != 1 || meta[0].TypeInfo == nil {
				t.Errorf("%s result metadata: expected one column, got %v", c.cqlType, meta)
			} else if tt := meta[0].TypeInfo.Type(); !wireTypeOK(tt, c.wire) {
				t.Errorf("%s result metadata type id: expected one of %#04x, got %#04x", c.cqlType, c.wire, tt)
			}

			// Explicit null through the same prepared statement: reads back
			// as a nil pointer.
			if err := s.Query(ins, key, nil).Exec(); err != nil {
				t.Fatalf("%s with %s = null: expected success, got error: %v", ins, c.cqlType, err)
			}
			ptr := reflect.New(reflect.PointerTo(reflect.TypeOf(c.value)))
			if err := s.Query(sel, key).Scan(ptr.Interface()); err != nil {
				t.Fatalf("%s after writing null: expected a row, got error: %v", sel, err)
			}
			if !ptr.Elem().IsNil() {
				t.Errorf("%s after writing null: expected null (nil pointer), got %#v", c.cqlType, ptr.Elem().Elem().Interface())
			}
		})
	}

	t.Run("tuple_int_text", func(t *testing.T) {
		key := 1000
		// gocql binds a top-level tuple column one marker per element (its
		// own tests do the same); a single marker for the whole tuple makes
		// it expect one value per element but marshal them as tuples.
		ins := fmt.Sprintf("INSERT INTO %s.types (k, c_tuple) VALUES (?, (?, ?))", ks)
		if err := s.Query(ins, key, 42, "forty-two").Exec(); err != nil {
			t.Fatalf("%s with (42, 'forty-two'): expected success, got error: %v", ins, err)
		}
		var (
			a int
			b string
		)
		sel := fmt.Sprintf("SELECT c_tuple FROM %s.types WHERE k = ?", ks)
		if err := s.Query(sel, key).Scan(&a, &b); err != nil {
			t.Fatalf("%s: expected a tuple, got error: %v", sel, err)
		}
		if a != 42 || b != "forty-two" {
			t.Errorf("tuple<int, text> round trip: wrote (42, %q), read back (%d, %q)", "forty-two", a, b)
		}
		// A tuple with a null element.
		if err := s.Query(ins, key, nil, "only text").Exec(); err != nil {
			t.Fatalf("%s with (null, 'only text'): expected success, got error: %v", ins, err)
		}
		var (
			pa *int
			pb *string
		)
		if err := s.Query(sel, key).Scan(&pa, &pb); err != nil {
			t.Fatalf("%s: expected a tuple, got error: %v", sel, err)
		}
		if pa != nil || pb == nil || *pb != "only text" {
			t.Errorf("tuple<int, text> with a null element: expected (null, %q), got (%v, %v)", "only text", derefStr(pa), derefStr(pb))
		}
	})

	t.Run("unset_columns_are_null", func(t *testing.T) {
		key := 2000
		mustExec(t, s, fmt.Sprintf("INSERT INTO %s.types (k) VALUES (?)", ks), key)
		row := map[string]any{}
		sel := fmt.Sprintf("SELECT * FROM %s.types WHERE k = ?", ks)
		iter := s.Query(sel, key).Iter()
		if !iter.MapScan(row) {
			err := iter.Close()
			t.Fatalf("%s: expected one row, got none (err %v)", sel, err)
		}
		if err := iter.Close(); err != nil {
			t.Fatalf("%s: expected success, got error: %v", sel, err)
		}
		for _, c := range cases {
			if _, ok := row[c.col]; !ok {
				t.Errorf("SELECT * row: expected column %s, got columns %v", c.col, mapKeys(row))
			}
		}
		for _, c := range cases {
			ptr := reflect.New(reflect.PointerTo(reflect.TypeOf(c.value)))
			q := fmt.Sprintf("SELECT %s FROM %s.types WHERE k = ?", c.col, ks)
			if err := s.Query(q, key).Scan(ptr.Interface()); err != nil {
				t.Errorf("%s: expected a row, got error: %v", q, err)
				continue
			}
			if !ptr.Elem().IsNil() {
				t.Errorf("never-written %s column %s: expected null, got %#v", c.cqlType, c.col, ptr.Elem().Elem().Interface())
			}
		}
		var (
			pa *int
			pb *string
		)
		q := fmt.Sprintf("SELECT c_tuple FROM %s.types WHERE k = ?", ks)
		if err := s.Query(q, key).Scan(&pa, &pb); err != nil {
			t.Fatalf("%s: expected a row, got error: %v", q, err)
		}
		if pa != nil || pb != nil {
			t.Errorf("never-written tuple<int, text> column: expected null, got (%s, %s)", derefStr(pa), derefStr(pb))
		}
	})
}

func mapKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

func derefStr[T any](p *T) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprintf("%#v", *p)
}

type address struct {
	Street string   `cql:"street"`
	Zip    int      `cql:"zip"`
	Tags   []string `cql:"tags"`
}

// TestUDT round-trips a frozen user-defined type, on its own and inside a
// collection, written as a struct and as a map, reads a null UDT, and checks
// the type shows up in the keyspace metadata.
func TestUDT(t *testing.T) {
	s := shared(t)
	ks := createKeyspace(t, s)
	mustExec(t, s, fmt.Sprintf("CREATE TYPE %s.address (street text, zip int, tags frozen<list<text>>)", ks))
	mustExec(t, s, fmt.Sprintf(
		"CREATE TABLE %s.people (k int PRIMARY KEY, home frozen<address>, past list<frozen<address>>)", ks))

	home := address{Street: "1 Main St", Zip: 12345, Tags: []string{"a", "b"}}
	past := []address{{Street: "old", Zip: 1, Tags: []string{"x"}}, {Street: "older", Zip: 2, Tags: []string{"y", "z"}}}

	ins := fmt.Sprintf("INSERT INTO %s.people (k, home, past) VALUES (?, ?, ?)", ks)
	if err := s.Query(ins, 1, home, past).Exec(); err != nil {
		t.Fatalf("%s: expected success, got error: %v", ins, err)
	}
	var (
		gotHome address
		gotPast []address
	)
	sel := fmt.Sprintf("SELECT home, past FROM %s.people WHERE k = ?", ks)
	if err := s.Query(sel, 1).Scan(&gotHome, &gotPast); err != nil {
		t.Fatalf("%s: expected a row, got error: %v", sel, err)
	}
	if !reflect.DeepEqual(gotHome, home) {
		t.Errorf("frozen<address>: wrote %+v, read back %+v", home, gotHome)
	}
	if !reflect.DeepEqual(gotPast, past) {
		t.Errorf("list<frozen<address>>: wrote %+v, read back %+v", past, gotPast)
	}

	// A UDT given as a map, with a field left out (reads back as null).
	ins2 := fmt.Sprintf("INSERT INTO %s.people (k, home) VALUES (?, ?)", ks)
	if err := s.Query(ins2, 2, map[string]any{"street": "map st", "zip": 7}).Exec(); err != nil {
		t.Fatalf("%s with a map-valued UDT: expected success, got error: %v", ins2, err)
	}
	m := map[string]any{}
	if err := s.Query(fmt.Sprintf("SELECT home FROM %s.people WHERE k = ?", ks), 2).Scan(&m); err != nil {
		t.Fatalf("SELECT home as a map: expected a row, got error: %v", err)
	}
	if m["street"] != "map st" || m["zip"] != 7 {
		t.Errorf("map-valued address: expected street=%q zip=7, got %#v", "map st", m)
	}
	if tags, ok := m["tags"].([]string); ok && len(tags) != 0 {
		t.Errorf("map-valued address: expected tags to be null/empty, got %#v", m["tags"])
	}

	// A row without the UDT column reads back as null.
	mustExec(t, s, fmt.Sprintf("INSERT INTO %s.people (k) VALUES (?)", ks), 3)
	var nullHome *address
	if err := s.Query(fmt.Sprintf("SELECT home FROM %s.people WHERE k = ?", ks), 3).Scan(&nullHome); err != nil {
		t.Fatalf("SELECT an unset frozen<address>: expected a row, got error: %v", err)
	}
	if nullHome != nil {
		t.Errorf("unset frozen<address>: expected null, got %+v", *nullHome)
	}

	// The type is part of the keyspace metadata.
	cluster := testCluster()
	cluster.Metadata.CacheMode = gocql.Disabled
	km, err := newSession(t, cluster).KeyspaceMetadata(ks)
	if err != nil {
		t.Fatalf("KeyspaceMetadata(%q): expected metadata, got error: %v", ks, err)
	}
	ut, ok := km.UserTypes["address"]
	if !ok {
		t.Fatalf("KeyspaceMetadata(%q).UserTypes: expected address, got %v", ks, km.UserTypes)
	}
	if fmt.Sprint(ut.FieldNames) != "[street zip tags]" {
		t.Errorf("address field names: expected [street zip tags], got %v", ut.FieldNames)
	}
	if len(ut.FieldTypes) != 3 || ut.FieldTypes[0] == nil || ut.FieldTypes[1] == nil || ut.FieldTypes[2] == nil ||
		ut.FieldTypes[0].Type() != gocql.TypeVarchar && ut.FieldTypes[0].Type() != gocql.TypeText ||
		ut.FieldTypes[1].Type() != gocql.TypeInt || ut.FieldTypes[2].Type() != gocql.TypeList {
		t.Errorf("address field types: expected [text int list<text>], got %v", ut.FieldTypes)
	}
}

// TestUDTNonFrozen covers a non-frozen UDT column (Cassandra 3.6+), including
// an update of a single field.
func TestUDTNonFrozen(t *testing.T) {
	s := shared(t)
	ks := createKeyspace(t, s)
	mustExec(t, s, fmt.Sprintf("CREATE TYPE %s.address (street text, zip int, tags frozen<list<text>>)", ks))
	mustExec(t, s, fmt.Sprintf("CREATE TABLE %s.people (k int PRIMARY KEY, work address)", ks))

	work := address{Street: "2 Side Rd", Zip: 54321, Tags: []string{"office"}}
	ins := fmt.Sprintf("INSERT INTO %s.people (k, work) VALUES (?, ?)", ks)
	if err := s.Query(ins, 1, work).Exec(); err != nil {
		t.Fatalf("%s: expected success, got error: %v", ins, err)
	}
	sel := fmt.Sprintf("SELECT work FROM %s.people WHERE k = ?", ks)
	var got address
	if err := s.Query(sel, 1).Scan(&got); err != nil {
		t.Fatalf("%s: expected a row, got error: %v", sel, err)
	}
	if !reflect.DeepEqual(got, work) {
		t.Errorf("non-frozen address: wrote %+v, read back %+v", work, got)
	}

	upd := fmt.Sprintf("UPDATE %s.people SET work.zip = ? WHERE k = ?", ks)
	if err := s.Query(upd, 99999, 1).Exec(); err != nil {
		t.Fatalf("%s: expected success, got error: %v", upd, err)
	}
	want := work
	want.Zip = 99999
	got = address{}
	if err := s.Query(sel, 1).Scan(&got); err != nil {
		t.Fatalf("%s after a field update: expected a row, got error: %v", sel, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("non-frozen address after SET work.zip = 99999: expected %+v, got %+v", want, got)
	}
}
