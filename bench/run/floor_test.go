package main

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/emsanalytics/emsquery/internal/pgtest"
)

// TestMain lets the test binary be the bare server that startFloor starts (os.Executable).
func TestMain(m *testing.M) {
	servesFloor()
	os.Exit(m.Run())
}

// The bare server answers with the bytes of the rows the captured SQL reads, prepared and
// simple statements alike, and a response of another size fails its check.
func TestBareServer(t *testing.T) {
	ctx := context.Background()
	c := pgtest.New(t, pgtest.Options{})
	db := dbTarget{Host: c.Host(), Port: c.Port(), Name: "postgres", User: "postgres", Password: c.Password()}
	limit := "3"
	sts := []statement{
		{SQL: `SELECT g, repeat('x', g) FROM generate_series(1, 10) g ORDER BY g LIMIT $1`, Params: []*string{&limit}, Prepared: true},
		{SQL: `SELECT 'abc'`, Simple: true},
	}
	pool, err := capturedPool(ctx, db, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	// 4+1, 4+2, 4+3 bytes from the first statement (the integers in binary), 3 from the second.
	size, err := pgxRequest(pool, sts)(ctx, 0)
	if err != nil || size != 21 {
		t.Fatalf("captured: %d bytes, %v; want 21", size, err)
	}
	fl, err := startFloor(ctx, t.TempDir(), db, sts, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer fl.stop()
	for range 3 {
		if n, err := fl.request(size)(ctx, 0); err != nil || n != size {
			t.Fatalf("bare server: %d bytes, %v; want %d", n, err, size)
		}
	}
	if _, err := fl.request(size+1)(ctx, 0); err == nil || !strings.Contains(err.Error(), "want 200 and 22") {
		t.Fatalf("an answer of the wrong size passed: %v", err)
	}
}
