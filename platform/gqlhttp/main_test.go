package gqlhttp_test

import (
	"testing"

	"github.com/emsanalytics/emsquery/internal/pgtest"
)

// The endpoint's outside-in tests (stream_test.go: the real binary streams whole tables) and
// benchmarks (bench_test.go) run on PostgreSQL clusters of their own.
func TestMain(m *testing.M) { pgtest.Main(m) }
