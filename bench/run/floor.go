package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/emsanalytics/emsquery/internal/launcher"
)

// The floor of a light line: what the least HTTP service in front of this database costs, on
// the same machine in the same run. A light question costs the database a fraction of a
// millisecond, and at concurrency 1 a service in front of it adds a whole HTTP round trip and
// the scheduling of one more process to the database's round trip (about 0.16 ms and 0.18 ms on
// the benchmark's machine of two shared virtual processors, where the hand-written resources
// takes 0.3 ms); no code of the service can take that back. The bare server is this program
// again (-serve-floor): fasthttp and a pgx pool configured as the service's, running the
// statements the service sent for the question (the captured SQL) and writing the rows' bytes
// as the body: no GraphQL, no JSON, no key, no log, no metrics. Its ratio to the hand-written SQL
// is the most any service could score on the line; the service's ratio beside it says how much
// of that it gives away. Measured on the light lines at concurrency 1 (the light target's), as a
// fourth side of the line's rounds, its slice next to the service's (sliceOrder).

// floorSpec is what the bare server is told, in a file (-serve-floor path).
type floorSpec struct {
	Addr       string
	DB         dbTarget
	Statements []statement
	Conns      int
}

// servesFloor runs the bare server and exits when this process was started as one
// (startFloor: -serve-floor path); otherwise it returns at once. main and the tests' TestMain
// call it first.
func servesFloor() {
	if len(os.Args) != 3 || os.Args[1] != "-serve-floor" {
		return
	}
	if err := serveFloor(os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "bare server:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// serveFloor runs the bare server until SIGINT or SIGTERM.
func serveFloor(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var spec floorSpec
	if err := json.Unmarshal(data, &spec); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	pool, err := capturedPool(ctx, spec.DB, spec.Conns, 0) // light lines: the shipped timeouts
	if err != nil {
		return err
	}
	defer pool.Close()
	args := statementArgs(spec.Statements)
	srv := &fasthttp.Server{Handler: func(c *fasthttp.RequestCtx) {
		if string(c.Path()) == floorReadyPath {
			return
		}
		// The server's context, not fasthttp's RequestCtx: pgx watches a statement's context
		// with context.AfterFunc, which costs a goroutine and two wake-ups per statement for a
		// context of another package (about 60 µs of processor time a request here) and
		// nothing for the standard library's. A RequestCtx is done only when the server shuts
		// down, as this one is.
		_, err := runStatements(ctx, pool, spec.Statements, args, func(v []byte) { c.Response.AppendBody(v) })
		if err != nil {
			c.Error(err.Error(), http.StatusInternalServerError)
		}
	}}
	ln, err := net.Listen("tcp", spec.Addr)
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown()
	}()
	return srv.Serve(ln)
}

const floorReadyPath = "/ready"

// floor is a running bare server.
type floor struct {
	proc *launcher.Process
	rc   *rawClient
	host string
}

// startFloor runs the bare server for statements (captured from the service) on conns
// connections, and returns once it answers.
func startFloor(ctx context.Context, tmp string, db dbTarget, statements []statement, conns int) (*floor, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	port, err := launcher.FreePort()
	if err != nil {
		return nil, err
	}
	host := "127.0.0.1:" + strconv.Itoa(port)
	data, err := json.Marshal(floorSpec{Addr: host, DB: db, Statements: statements, Conns: conns})
	if err != nil {
		return nil, err
	}
	path := filepath.Join(tmp, "floor.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return nil, err
	}
	proc, err := launcher.Start(launcher.Options{Bin: self, Args: []string{"-serve-floor", path}, Dir: tmp})
	if err != nil {
		return nil, err
	}
	f := &floor{proc: proc, rc: &rawClient{addr: host}, host: host}
	if err := proc.WaitReady(ctx, "http://"+host+floorReadyPath, 20*time.Second); err != nil {
		f.stop()
		return nil, fmt.Errorf("the bare server: %w", err)
	}
	return f, nil
}

func (f *floor) stop() {
	f.rc.close()
	_, _ = f.proc.Stop(os.Interrupt, 15*time.Second)
}

// request asks the bare server; its answer must be 200 and size bytes long (the rows' bytes, as
// the captured SQL reads them).
func (f *floor) request(size int64) request {
	req := newRawRequest(f.host, http.MethodGet, "/", nil)
	return func(ctx context.Context, worker int) (int64, error) {
		resp, n, err := f.rc.do(ctx, worker, req, io.Discard)
		if err != nil {
			return 0, err
		}
		if resp.status != http.StatusOK || n != size {
			return 0, fmt.Errorf("bare server: status %d, %d bytes, want 200 and %d: %.300s", resp.status, n, size, resp.errBody)
		}
		return n, nil
	}
}
