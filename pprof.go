//go:build pprof

package main

// Profiling hook for benchmarks, compiled only with `go build -tags pprof` and never into a
// normal build: with EMSQUERY_PPROF_ADDR set (a loopback address such as 127.0.0.1:6060), it
// serves net/http/pprof there, apart from the API.

import (
	"net/http"
	_ "net/http/pprof" //nolint:gosec // loopback only, opt-in build
	"os"
	"strings"
)

func init() {
	addr := os.Getenv("EMSQUERY_PPROF_ADDR")
	if addr == "" || !(strings.HasPrefix(addr, "127.") || strings.HasPrefix(addr, "localhost:") || strings.HasPrefix(addr, "[::1]:")) {
		return
	}
	go func() { _ = http.ListenAndServe(addr, nil) }() //nolint:gosec // profiling only
}
