package main

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/internal/pgtest"
)

// TestPsqlCost measures what a baseline of the export run through psql would pay on top of the
// database's work: a psql process and a new session per request (`psql -c "\copy ..."`),
// against the same COPY of ten rows on a kept session (pgconn's CopyTo, copyRequest), 40
// requests each, alternating. It needs psql (Debian's postgresql-client) and a PostgreSQL
// cluster, so it runs only when asked:
//
//	BENCH_PSQL_COST=1 go test -run TestPsqlCost -v -count=1 ./bench/run
func TestPsqlCost(t *testing.T) {
	if os.Getenv("BENCH_PSQL_COST") == "" {
		t.Skip("set BENCH_PSQL_COST=1 to measure psql's cost per request")
	}
	psql, err := exec.LookPath("psql")
	if err != nil {
		t.Skip("no psql on PATH")
	}
	ctx := context.Background()
	url := pgtest.New(t, pgtest.Options{}).URL("postgres")
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	const sel = `SELECT g, md5(g::text) FROM generate_series(1, 10) g`
	var a, b []time.Duration
	for range 40 {
		t0 := time.Now()
		var n byteCount
		if _, err := conn.PgConn().CopyTo(ctx, &n, "COPY ("+sel+") TO STDOUT WITH (FORMAT csv, HEADER)"); err != nil {
			t.Fatal(err)
		}
		a = append(a, time.Since(t0))
		t0 = time.Now()
		cmd := exec.Command(psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", `\copy (`+sel+`) to stdout with (format csv, header)`)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatal(err, string(out))
		}
		b = append(b, time.Since(t0))
	}
	slices.Sort(a)
	slices.Sort(b)
	t.Logf("40 requests each, alternating: kept session CopyTo p50 %v (min %v, max %v); psql \\copy per request p50 %v (min %v, max %v)", a[20], a[0], a[39], b[20], b[0], b[39])
}
