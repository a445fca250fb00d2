// Package dbtest is test support for code that runs its statements through platform/database:
// the service's own pool opened on a test database, and the check that a statement read as raw
// rows has its columns in the order of the struct it fills. It is apart from servicetest because
// platform/database's own tests use servicetest, which must therefore not import the database
// package's pool.
package dbtest

import (
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/emsanalytics/emsquery/internal/servicetest"
	"github.com/emsanalytics/emsquery/platform/database"
)

// Open opens the service's database pool on fixture, as the service would (two connections at
// most), closed at the end of the test.
func Open(t testing.TB, fixture servicetest.DB) *database.DB {
	t.Helper()
	db, cleanup, err := database.Open(database.Options{
		Hosts: []string{fixture.Host}, Ports: []int{fixture.Port}, Name: fixture.Name, Username: fixture.User,
		Password: fixture.Password, Schema: "public", PoolSize: 1, MaxOverflow: 1,
		PoolTimeout: 30 * time.Second, PoolRecycle: time.Hour,
	}, database.Timeouts{StatementTimeout: 30 * time.Second, ExportTimeout: time.Minute},
		slog.New(slog.NewTextHandler(io.Discard, nil)), noop.NewMeterProvider(), tracenoop.NewTracerProvider())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	return db
}

// FieldsAreColumns checks that the columns of query, a "SELECT a, b::type, c FROM ..." read as
// raw rows in formats (one per column), are T's fields in order, named by their json tags: the
// raw-row writers (gqljson.List.Fill) take struct field i from column i.
func FieldsAreColumns[T any](t testing.TB, query string, formats []int16) {
	t.Helper()
	list, _, _ := strings.Cut(strings.TrimPrefix(query, "SELECT "), "FROM ")
	var cols []string
	for _, c := range strings.Split(strings.TrimSpace(list), ",") {
		name, _, _ := strings.Cut(strings.TrimSpace(c), "::")
		cols = append(cols, name)
	}
	rt := reflect.TypeFor[T]()
	if rt.NumField() != len(cols) || len(formats) != len(cols) {
		t.Fatalf("%s: %d fields, %d columns %v, %d formats", rt.Name(), rt.NumField(), len(cols), cols, len(formats))
	}
	for i, c := range cols {
		if tag, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ","); tag != c {
			t.Errorf("%s: field %d is %q, column %d is %q", rt.Name(), i, tag, i, c)
		}
	}
}
