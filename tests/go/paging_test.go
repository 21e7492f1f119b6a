package drivertest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// pagedRows runs stmt with the given page size and returns every row as a
// slice of ints (one per selected column), in the order the server sent them.
//
// manual=false uses Iter(), which fetches the following pages by itself;
// the scan stops (and the returned error says so) once more than maxRows
// rows arrive, so a server that keeps handing out the same page cannot hang
// the test. manual=true drives paging by hand with PageState and gives up
// after maxPages pages. Both run under ctx.
func pagedRows(ctx context.Context, s *gocql.Session, stmt string, ncols, pageSize int, manual bool, maxRows, maxPages int, values ...any) ([][]int, int, error) {
	var rows [][]int
	scanRow := func(sc interface{ Scan(...any) error }) error {
		row := make([]int, ncols)
		dest := make([]any, ncols)
		for i := range row {
			dest[i] = &row[i]
		}
		if err := sc.Scan(dest...); err != nil {
			return err
		}
		rows = append(rows, row)
		return nil
	}

	if !manual {
		iter := s.Query(stmt, values...).PageSize(pageSize).WithContext(ctx).Iter()
		sc := iter.Scanner()
		for sc.Next() {
			if err := scanRow(sc); err != nil {
				_ = iter.Close()
				return rows, 0, fmt.Errorf("scanning row %d: %w", len(rows), err)
			}
			if len(rows) > maxRows {
				_ = iter.Close()
				return rows, 0, fmt.Errorf("automatic paging returned more than %d rows; the server appears to repeat pages", maxRows)
			}
		}
		if err := sc.Err(); err != nil {
			return rows, 0, err
		}
		return rows, 0, nil
	}

	var state []byte
	pages := 0
	for {
		if pages >= maxPages {
			return rows, pages, fmt.Errorf("manual paging did not finish after %d pages (%d rows so far); the paging state never ran out", pages, len(rows))
		}
		if err := ctx.Err(); err != nil {
			return rows, pages, fmt.Errorf("after %d pages: %w", pages, err)
		}
		iter := s.Query(stmt, values...).PageSize(pageSize).PageState(state).WithContext(ctx).Iter()
		next := iter.PageState()
		pageRows := 0
		sc := iter.Scanner()
		for sc.Next() {
			if err := scanRow(sc); err != nil {
				_ = iter.Close()
				return rows, pages, fmt.Errorf("page %d: scanning: %w", pages, err)
			}
			pageRows++
		}
		if err := sc.Err(); err != nil {
			return rows, pages, fmt.Errorf("page %d: %w", pages, err)
		}
		pages++
		if pageRows > pageSize {
			return rows, pages, fmt.Errorf("page %d: expected at most %d rows (the page size), got %d", pages-1, pageSize, pageRows)
		}
		if len(next) == 0 {
			return rows, pages, nil
		}
		if string(next) == string(state) {
			return rows, pages, fmt.Errorf("page %d: the server returned the same paging state it was given (%x)", pages-1, next)
		}
		state = next
	}
}

// loadPartitions inserts (k, v) = (i, i*10) for i in [0, n) concurrently.
func loadPartitions(t *testing.T, s *gocql.Session, table string, n int) {
	t.Helper()
	ins := fmt.Sprintf("INSERT INTO %s (k, v) VALUES (?, ?)", table)
	if err := parallelDo(n, 16, func(i int) error { return s.Query(ins, i, i*10).Exec() }); err != nil {
		t.Fatalf("loading %d rows into %s: expected success, got %v", n, table, err)
	}
}

// loadClustered inserts rows (k, c) for every k < nk, c < nc, using one
// unlogged batch per partition (chunks of at most 100 rows).
func loadClustered(t *testing.T, s *gocql.Session, table string, nk, nc int) {
	t.Helper()
	ins := fmt.Sprintf("INSERT INTO %s (k, c, v) VALUES (?, ?, ?)", table)
	type chunk struct{ k, from, to int }
	var chunks []chunk
	for k := 0; k < nk; k++ {
		for from := 0; from < nc; from += 100 {
			chunks = append(chunks, chunk{k, from, min(from+100, nc)})
		}
	}
	if err := parallelDo(len(chunks), 8, func(i int) error {
		ch := chunks[i]
		b := s.Batch(gocql.UnloggedBatch)
		for c := ch.from; c < ch.to; c++ {
			b.Query(ins, ch.k, c, ch.k*100000+c)
		}
		return b.Exec()
	}); err != nil {
		t.Fatalf("loading %dx%d rows into %s: expected success, got %v", nk, nc, table, err)
	}
}

func fmtRows(rows [][]int, limit int) string {
	var b strings.Builder
	for i, r := range rows {
		if i == limit {
			fmt.Fprintf(&b, " ... (%d more)", len(rows)-limit)
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprint(&b, r)
	}
	return b.String()
}

// TestPagingPartitions: 1,000 single-row partitions, full-table scan at page
// sizes 100 and 7 with automatic and manual paging: every key exactly once.
func TestPagingPartitions(t *testing.T) {
	s := shared(t)
	ks := createKeyspace(t, s)
	table := ks + ".t"
	mustExec(t, s, fmt.Sprintf("CREATE TABLE %s (k int PRIMARY KEY, v int)", table))
	const n = 1000
	loadPartitions(t, s, table, n)

	for _, cols := range []string{"k", "k, v"} {
		ncols := strings.Count(cols, ",") + 1
		for _, pageSize := range []int{100, 7} {
			for _, manual := range []bool{false, true} {
				mode := "auto"
				if manual {
					mode = "manual"
				}
				t.Run(fmt.Sprintf("select_%s_page%d_%s", strings.ReplaceAll(cols, ", ", "_"), pageSize, mode), func(t *testing.T) {
					scanPartitions(t, s, table, cols, ncols, n, pageSize, manual, mode)
				})
			}
		}
	}
}

func scanPartitions(t *testing.T, s *gocql.Session, table, cols string, ncols, n, pageSize int, manual bool, mode string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	maxPages := n/pageSize + 5
	stmt := fmt.Sprintf("SELECT %s FROM %s", cols, table)
	rows, pages, err := pagedRows(ctx, s, stmt, ncols, pageSize, manual, 2*n, maxPages)
	if err != nil {
		t.Fatalf("%s with PageSize(%d), %s paging: expected %d rows, got error after %d rows: %v",
			stmt, pageSize, mode, n, len(rows), err)
	}
	seen := make(map[int]int, n)
	var dups, bad []int
	for _, r := range rows {
		seen[r[0]]++
		if seen[r[0]] == 2 {
			dups = append(dups, r[0])
		}
		if r[0] < 0 || r[0] >= n || ncols > 1 && r[1] != r[0]*10 {
			bad = append(bad, r[0])
		}
	}
	var missing []int
	for k := 0; k < n; k++ {
		if seen[k] == 0 {
			missing = append(missing, k)
		}
	}
	sort.Ints(dups)
	if len(rows) != n || len(seen) != n || len(dups) > 0 || len(missing) > 0 || len(bad) > 0 {
		t.Errorf("%s, PageSize(%d) %s scan: expected %d rows with %d distinct keys, got %d rows, %d distinct; duplicated keys %s; missing keys %s; wrong rows %s",
			stmt, pageSize, mode, n, n, len(rows), len(seen), head(dups), head(missing), head(bad))
	}
	if manual {
		wantPages := (n + pageSize - 1) / pageSize
		if pages < wantPages || pages > wantPages+1 {
			t.Errorf("%s, PageSize(%d) manual scan: expected %d or %d pages, got %d", stmt, pageSize, wantPages, wantPages+1, pages)
		}
	}
}

func head(xs []int) string {
	if len(xs) == 0 {
		return "none"
	}
	if len(xs) > 10 {
		return fmt.Sprintf("%v ... (%d in all)", xs[:10], len(xs))
	}
	return fmt.Sprint(xs)
}

// TestPagingSmallClustered: a 3 x 3 table scanned at page sizes 1..4. Each
// page boundary falls inside or at the end of a partition at some page size,
// which is where a server that resumes paging at the wrong place duplicates,
// drops or endlessly repeats rows.
func TestPagingSmallClustered(t *testing.T) {
	s := shared(t)
	ks := createKeyspace(t, s)
	table := ks + ".t"
	mustExec(t, s, fmt.Sprintf("CREATE TABLE %s (k int, c int, v int, PRIMARY KEY (k, c))", table))
	loadClustered(t, s, table, 3, 3)

	const total = 9
	for _, pageSize := range []int{1, 2, 3, 4} {
		for _, manual := range []bool{true, false} {
			mode := "auto"
			if manual {
				mode = "manual"
			}
			t.Run(fmt.Sprintf("page%d_%s", pageSize, mode), func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				rows, pages, err := pagedRows(ctx, s, fmt.Sprintf("SELECT k, c, v FROM %s", table), 3, pageSize, manual, total+5, total+5)
				if err != nil {
					t.Fatalf("SELECT k, c, v with PageSize(%d), %s paging: expected %d rows, got error after %d rows (%d pages): %v; rows so far: %s",
						pageSize, mode, total, len(rows), pages, err, fmtRows(rows, 20))
				}
				checkClusteredScan(t, fmt.Sprintf("PageSize(%d) %s", pageSize, mode), rows, 3, 3)
			})
		}
	}
}

// checkClusteredScan verifies a full scan of an nk x nc table: every (k, c)
// exactly once, partitions contiguous, clustering ascending within each.
func checkClusteredScan(t *testing.T, what string, rows [][]int, nk, nc int) {
	t.Helper()
	problems := []string{}
	if len(rows) != nk*nc {
		problems = append(problems, fmt.Sprintf("expected %d rows, got %d", nk*nc, len(rows)))
	}
	seen := map[[2]int]int{}
	donePartitions := map[int]bool{}
	for i, r := range rows {
		key := [2]int{r[0], r[1]}
		seen[key]++
		if seen[key] == 2 {
			problems = append(problems, fmt.Sprintf("row (k=%d, c=%d) returned more than once", r[0], r[1]))
		}
		if r[2] != r[0]*100000+r[1] {
			problems = append(problems, fmt.Sprintf("row (k=%d, c=%d): expected v=%d, got %d", r[0], r[1], r[0]*100000+r[1], r[2]))
		}
		if i > 0 {
			prev := rows[i-1]
			if prev[0] == r[0] && r[1] <= prev[1] {
				problems = append(problems, fmt.Sprintf("partition %d: expected ascending clustering order, got c=%d after c=%d", r[0], r[1], prev[1]))
			}
			if prev[0] != r[0] {
				donePartitions[prev[0]] = true
				if donePartitions[r[0]] {
					problems = append(problems, fmt.Sprintf("partition %d: expected its rows to be contiguous, it reappears at row %d", r[0], i))
				}
			}
		}
	}
	for k := 0; k < nk; k++ {
		for c := 0; c < nc; c++ {
			if seen[[2]int{k, c}] == 0 {
				problems = append(problems, fmt.Sprintf("row (k=%d, c=%d) missing", k, c))
			}
		}
	}
	if len(problems) > 0 {
		if len(problems) > 15 {
			problems = append(problems[:15], fmt.Sprintf("... %d more problems", len(problems)-15))
		}
		t.Errorf("%s full scan:\n  %s\n  rows returned: %s", what, strings.Join(problems, "\n  "), fmtRows(rows, 30))
	}
}

// TestPagingOnePartition: 1,000 rows in one partition, read at page sizes 100
// and 7, ascending and ORDER BY c DESC: the exact sequence, no repeats.
func TestPagingOnePartition(t *testing.T) {
	s := shared(t)
	ks := createKeyspace(t, s)
	table := ks + ".t"
	mustExec(t, s, fmt.Sprintf("CREATE TABLE %s (k int, c int, v int, PRIMARY KEY (k, c))", table))
	const n = 1000
	loadClustered(t, s, table, 1, n)

	for _, order := range []string{"ASC", "DESC"} {
		for _, pageSize := range []int{100, 7} {
			for _, manual := range []bool{false, true} {
				mode := "auto"
				if manual {
					mode = "manual"
				}
				t.Run(fmt.Sprintf("%s_page%d_%s", strings.ToLower(order), pageSize, mode), func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					stmt := fmt.Sprintf("SELECT k, c, v FROM %s WHERE k = ? ORDER BY c %s", table, order)
					rows, pages, err := pagedRows(ctx, s, stmt, 3, pageSize, manual, 2*n, n/pageSize+5, 0)
					if err != nil {
						t.Fatalf("%s with PageSize(%d), %s paging: expected %d rows, got error after %d rows (%d pages): %v",
							stmt, pageSize, mode, n, len(rows), pages, err)
					}
					var problems []string
					if len(rows) != n {
						problems = append(problems, fmt.Sprintf("expected %d rows, got %d", n, len(rows)))
					}
					for i, r := range rows {
						want := i
						if order == "DESC" {
							want = n - 1 - i
						}
						if r[0] != 0 || r[1] != want || r[2] != want {
							problems = append(problems, fmt.Sprintf("row %d: expected (k=0, c=%d, v=%d), got (k=%d, c=%d, v=%d)", i, want, want, r[0], r[1], r[2]))
							if len(problems) > 10 {
								break
							}
						}
					}
					if len(problems) > 0 {
						t.Errorf("ORDER BY c %s, PageSize(%d), %s paging:\n  %s", order, pageSize, mode, strings.Join(problems, "\n  "))
					}
				})
			}
		}
	}
}
