package drivertest

import (
	"errors"
	"fmt"
	"testing"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// requireCode checks that err is a server error (gocql.RequestError) with the
// given protocol error code and returns it.
func requireCode(t *testing.T, what string, err error, code int) gocql.RequestError {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: expected server error code %#04x, got success", what, code)
	}
	var re gocql.RequestError
	if !errors.As(err, &re) {
		t.Fatalf("%s: expected a gocql.RequestError with code %#04x, got %T: %v", what, code, err, err)
	}
	if re.Code() != code {
		t.Fatalf("%s: expected error code %#04x, got %#04x (%T: %s)", what, code, re.Code(), err, re.Message())
	}
	if re.Message() == "" {
		t.Errorf("%s: expected a non-empty error message, got an empty one", what)
	}
	return re
}

// TestErrors checks that server errors reach the application as gocql's
// typed errors with the right protocol error codes.
func TestErrors(t *testing.T) {
	s := shared(t)
	ks := createKeyspace(t, s)
	mustExec(t, s, fmt.Sprintf("CREATE TABLE %s.t (k int PRIMARY KEY, v text)", ks))

	t.Run("syntax_error", func(t *testing.T) {
		for _, stmt := range []string{
			"SELEC * FROM system.local", // QUERY frame (gocql does not prepare it)
			"SELECT * FROM WHERE",       // PREPARE frame (gocql prepares SELECTs)
		} {
			err := s.Query(stmt).Exec()
			requireCode(t, stmt, err, gocql.ErrCodeSyntax)
			var se *gocql.RequestErrSyntax
			if !errors.As(err, &se) {
				t.Errorf("%s: expected *gocql.RequestErrSyntax, got %T: %v", stmt, err, err)
			}
		}
	})

	t.Run("missing_table", func(t *testing.T) {
		for _, stmt := range []string{
			fmt.Sprintf("SELECT * FROM %s.no_such_table", ks),
			fmt.Sprintf("SELECT * FROM %s.no_such_table WHERE k = ?", ks),
			fmt.Sprintf("/* unprepared */ SELECT * FROM %s.no_such_table", ks),
		} {
			var values []any
			if stmt[len(stmt)-1] == '?' {
				values = []any{1}
			}
			err := s.Query(stmt, values...).Exec()
			requireCode(t, stmt, err, gocql.ErrCodeInvalid)
			var ie *gocql.RequestErrInvalid
			if !errors.As(err, &ie) {
				t.Errorf("%s: expected *gocql.RequestErrInvalid, got %T: %v", stmt, err, err)
			}
		}
	})

	t.Run("missing_keyspace", func(t *testing.T) {
		stmt := "SELECT * FROM gocql_no_such_keyspace_xyz.t"
		requireCode(t, stmt, s.Query(stmt).Exec(), gocql.ErrCodeInvalid)
	})

	t.Run("already_exists", func(t *testing.T) {
		stmt := fmt.Sprintf("CREATE TABLE %s.t (k int PRIMARY KEY, v text)", ks)
		err := s.Query(stmt).Exec()
		requireCode(t, stmt, err, gocql.ErrCodeAlreadyExists)
		var ae *gocql.RequestErrAlreadyExists
		if !errors.As(err, &ae) {
			t.Fatalf("%s: expected *gocql.RequestErrAlreadyExists, got %T: %v", stmt, err, err)
		}
		if ae.Keyspace != ks || ae.Table != "t" {
			t.Errorf("%s: expected AlreadyExists keyspace=%q table=%q, got keyspace=%q table=%q", stmt, ks, "t", ae.Keyspace, ae.Table)
		}

		stmt = fmt.Sprintf("CREATE KEYSPACE %s WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}", ks)
		err = s.Query(stmt).Exec()
		requireCode(t, stmt, err, gocql.ErrCodeAlreadyExists)
		if !errors.As(err, &ae) {
			t.Fatalf("%s: expected *gocql.RequestErrAlreadyExists, got %T: %v", stmt, err, err)
		}
		if ae.Keyspace != ks || ae.Table != "" {
			t.Errorf("%s: expected AlreadyExists keyspace=%q table=\"\", got keyspace=%q table=%q", stmt, ks, ae.Keyspace, ae.Table)
		}
	})

	t.Run("unavailable_cl_three", func(t *testing.T) {
		for _, c := range []struct {
			stmt   string
			values []any
		}{
			{fmt.Sprintf("INSERT INTO %s.t (k, v) VALUES (?, ?)", ks), []any{1, "x"}},
			{fmt.Sprintf("SELECT v FROM %s.t WHERE k = ?", ks), []any{1}},
		} {
			err := s.Query(c.stmt, c.values...).Consistency(gocql.Three).Exec()
			what := c.stmt + " at CL THREE on a single replica"
			requireCode(t, what, err, gocql.ErrCodeUnavailable)
			var ue *gocql.RequestErrUnavailable
			if !errors.As(err, &ue) {
				t.Fatalf("%s: expected *gocql.RequestErrUnavailable, got %T: %v", what, err, err)
			}
			if ue.Consistency != gocql.Three || ue.Required != 3 || ue.Alive != 1 {
				t.Errorf("%s: expected unavailable consistency=THREE required=3 alive=1, got consistency=%v required=%d alive=%d",
					what, ue.Consistency, ue.Required, ue.Alive)
			}
		}
	})

	t.Run("invalid_value", func(t *testing.T) {
		// An int literal that does not fit in 32 bits, sent as a plain
		// QUERY, is rejected by the server as invalid.
		stmt := fmt.Sprintf("/* unprepared */ INSERT INTO %s.t (k, v) VALUES (99999999999, 'x')", ks)
		requireCode(t, stmt, s.Query(stmt).Exec(), gocql.ErrCodeInvalid)
	})

	t.Run("session_still_usable", func(t *testing.T) {
		mustExec(t, s, fmt.Sprintf("INSERT INTO %s.t (k, v) VALUES (?, ?)", ks), 5, "after errors")
		var v string
		if err := s.Query(fmt.Sprintf("SELECT v FROM %s.t WHERE k = ?", ks), 5).Scan(&v); err != nil || v != "after errors" {
			t.Fatalf("SELECT after a series of errors: expected %q, got %q (err %v)", "after errors", v, err)
		}
	})
}
