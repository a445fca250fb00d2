package app

import (
	"testing"

	"github.com/emsanalytics/emsquery/internal/pgtest"
)

// The shared clusters the tests start are destroyed when they end.
func TestMain(m *testing.M) { pgtest.Main(m) }
