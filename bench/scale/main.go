// Command scale measures what docs/scaling.md reports: requests per second, and per second of
// the service's CPU, for a light and a heavy workload, with the service reading from the
// primary, from a streaming standby, and through PgBouncer in transaction pooling mode; and
// date-range workloads on the plain and the partitioned layout.
//
// It starts a throwaway primary and a standby of it (internal/pgtest), loads the demo data
// (-records), builds the service and runs it with GOMAXPROCS=1 (one service core) against each
// target, with -workers closed-loop clients for -duration per line. CPU times come from
// /proc (internal/procstat): the service's own, and the database's (the run's postmasters, their children, and
// pgbouncer). It prints a markdown table. Not part of make test or
// make bench: go run ./bench/scale.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/internal/demodata"
	"github.com/emsanalytics/emsquery/internal/launcher"
	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/internal/procstat"
	"github.com/emsanalytics/emsquery/schema"
)

const apiKey = "scale-bench-key-0123456789abcdef0123456789"

var workloads = []struct{ name, query string }{
	{"light: records_count(station)", `{ records_count(station: "Central") { count } }`},
	{"heavy: unique_counts, 2 columns, one year", `{ unique_counts(columns: ["station", "degree_of_urgency"], start_date: "2024-01-01", end_date: "2024-12-31") { column value count } }`},
}

// layoutWorkloads compare the plain and the partitioned layout, on the primary.
var layoutWorkloads = []struct{ name, query string }{
	{"unique_counts, 2 columns, one month", `{ unique_counts(columns: ["station", "degree_of_urgency"], start_date: "2024-03-01", end_date: "2024-03-31") { column value count } }`},
	{"unique_counts, 2 columns, one year", `{ unique_counts(columns: ["station", "degree_of_urgency"], start_date: "2024-01-01", end_date: "2024-12-31") { column value count } }`},
	{"distinct_values station, one day", `{ distinct_values(columns: ["station"], start_date: "2024-03-05", end_date: "2024-03-05") { value } }`},
}

func main() {
	records := flag.Int("records", 500_000, "demo records")
	workers := flag.Int("workers", 8, "closed-loop clients")
	duration := flag.Duration("duration", 8*time.Second, "measured time per line")
	flag.Parse()
	if err := run(*records, *workers, *duration); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

func run(records, workers int, duration time.Duration) error {
	ctx := context.Background()
	primary, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		return err
	}
	defer primary.Destroy()
	if err := primary.CreateDatabase(ctx, "bench", false); err != nil {
		return err
	}
	cfg, err := primary.ConnConfig("bench")
	if err != nil {
		return err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	d, err := demodata.New(demodata.Config{Records: records, Seed: demodata.DefaultSeed})
	if err != nil {
		return err
	}
	if _, err := demodata.Load(ctx, conn, d, demodata.LoadOptions{ApplySchema: true}); err != nil {
		return err
	}
	conn.Close(ctx)
	if err := primary.CreateDatabase(ctx, "bench_partitioned", false); err != nil {
		return err
	}
	pcfg, err := primary.ConnConfig("bench_partitioned")
	if err != nil {
		return err
	}
	if conn, err = pgx.ConnectConfig(ctx, pcfg); err != nil {
		return err
	}
	if _, err := demodata.Load(ctx, conn, d, demodata.LoadOptions{ApplySchema: true, Layout: schema.Partitioned}); err != nil {
		return err
	}
	conn.Close(ctx)
	standby, err := primary.StartStandby()
	if err != nil {
		return err
	}
	defer standby.Destroy()
	if err := standby.WaitForReplay(ctx, primary); err != nil {
		return err
	}
	bouncer, err := primary.StartPgBouncer()
	if err != nil {
		return err
	}
	defer bouncer.Stop()

	dir, err := os.MkdirTemp("", "scale-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, err := launcher.Build(ctx, dir)
	if err != nil {
		return err
	}
	targets := []struct {
		name string
		env  []string
	}{
		{"primary", []string{"DATABASE__HOST=" + primary.Host(), "DATABASE__PORT=" + strconv.Itoa(primary.Port())}},
		{"standby (prefer-standby)", []string{"DATABASE__HOST=" + primary.Host() + "," + standby.Host(),
			"DATABASE__PORT=" + strconv.Itoa(primary.Port()) + "," + strconv.Itoa(standby.Port()), "DATABASE__TARGET_SESSION_ATTRS=prefer-standby"}},
		{"PgBouncer (transaction mode)", []string{"DATABASE__HOST=" + bouncer.Host(), "DATABASE__PORT=" + strconv.Itoa(bouncer.Port()), "DATABASE__TRANSACTION_POOLING=yes"}},
	}
	fmt.Printf("%d records, %d clients, %s per line, service GOMAXPROCS=1\n\n", records, workers, duration)
	fmt.Println("| workload | database path | requests/s | requests per service CPU-second | database CPU ms per request |")
	fmt.Println("|---|---|---:|---:|---:|")
	for _, w := range workloads {
		for _, tg := range targets {
			res, err := measure(bin, dir, append(tg.env, "DATABASE__NAME=bench", "DATABASE__PASSWORD="+primary.Password()), w.query, workers, duration,
				primary.PostmasterPID(), standby.PostmasterPID())
			if err != nil {
				return fmt.Errorf("%s / %s: %w", w.name, tg.name, err)
			}
			fmt.Printf("| %s | %s | %.0f | %.0f | %.2f |\n", w.name, tg.name, res.rps, res.perCPU, res.dbMs)
		}
	}
	fmt.Println()
	fmt.Println("| workload | layout | requests/s | requests per service CPU-second | database CPU ms per request |")
	fmt.Println("|---|---|---:|---:|---:|")
	for _, w := range layoutWorkloads {
		for _, name := range []string{"bench", "bench_partitioned"} {
			env := []string{"DATABASE__HOST=" + primary.Host(), "DATABASE__PORT=" + strconv.Itoa(primary.Port()),
				"DATABASE__NAME=" + name, "DATABASE__PASSWORD=" + primary.Password()}
			res, err := measure(bin, dir, env, w.query, workers, duration, primary.PostmasterPID(), standby.PostmasterPID())
			if err != nil {
				return fmt.Errorf("%s / %s: %w", w.name, name, err)
			}
			layout := "plain"
			if name != "bench" {
				layout = "partitioned by month"
			}
			fmt.Printf("| %s | %s | %.0f | %.0f | %.2f |\n", w.name, layout, res.rps, res.perCPU, res.dbMs)
		}
	}
	return nil
}

type result struct{ rps, perCPU, dbMs float64 }

func measure(bin, dir string, env []string, query string, workers int, duration time.Duration, postmasters ...int) (result, error) {
	settings := map[string]string{"GOMAXPROCS": "1",
		"AUTHENTICATION__API_KEY": apiKey,
		"DATABASE__USERNAME":      "postgres", "DATABASE__ENCRYPT": "no", "DATABASE__POOL_SIZE": strconv.Itoa(workers),
		"LOG__PATH": filepath.Join(dir, "logs"), "LOG__CONSOLE__ENABLED": "false", "OTEL_METRICS_EXPORTER": "none",
		// Every line measures the path to the database: with the answer cache on (its default)
		// the same question repeated is answered from memory after its first time, and the
		// lines would measure the cache, with no database work at all.
		"CACHE__ENABLED": "false"}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		settings[k] = v
	}
	url, err := launcher.Loopback(settings)
	if err != nil {
		return result{}, err
	}
	proc, err := launcher.Start(launcher.Options{Bin: bin, Dir: dir, Settings: settings})
	if err != nil {
		return result{}, err
	}
	defer proc.Kill()
	if err := proc.WaitReady(context.Background(), url+"/v1/healthz", 20*time.Second); err != nil {
		return result{}, err
	}
	body, _ := json.Marshal(map[string]any{"query": query})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}, Timeout: 30 * time.Second}
	send := func() error {
		req, _ := http.NewRequest(http.MethodPost, url+"/graphql", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-api-key", apiKey)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil && (resp.StatusCode != http.StatusOK || bytes.Contains(b, []byte(`"errors"`))) {
			err = fmt.Errorf("status %d: %.200s", resp.StatusCode, b)
		}
		return err
	}
	loop := func(until time.Time, n *atomic.Int64) error {
		var wg sync.WaitGroup
		var first atomic.Value
		for range workers {
			wg.Go(func() {
				for time.Now().Before(until) {
					if err := send(); err != nil {
						first.CompareAndSwap(nil, err)
						return
					}
					n.Add(1)
				}
			})
		}
		wg.Wait()
		if err, _ := first.Load().(error); err != nil {
			return err
		}
		return nil
	}
	var warm atomic.Int64
	if err := loop(time.Now().Add(time.Second), &warm); err != nil {
		return result{}, err
	}
	// The service's processor time and the database's, before and after the measured loop.
	cpu := func() (svc, db time.Duration, err error) {
		if svc, err = procstat.CPUTime(proc.PID()); err != nil {
			return 0, 0, err
		}
		db, err = databaseCPU(postmasters...)
		return svc, db, err
	}
	svc0, db0, err := cpu()
	if err != nil {
		return result{}, err
	}
	start := time.Now()
	var n atomic.Int64
	if err := loop(start.Add(duration), &n); err != nil {
		return result{}, err
	}
	elapsed := time.Since(start).Seconds()
	svc1, db1, err := cpu()
	if err != nil {
		return result{}, err
	}
	reqs := float64(n.Load())
	return result{rps: reqs / elapsed, perCPU: reqs / (svc1 - svc0).Seconds(), dbMs: (db1 - db0).Seconds() * 1000 / reqs}, nil
}

// databaseCPU sums the processor time of the run's database processes: the postmasters in
// roots, their children (backends, walsender, startup and the other workers), and pgbouncer. A
// measurement keeps its connections for its whole length, so backends that end in between do
// not hide processor time.
func databaseCPU(roots ...int) (time.Duration, error) {
	procs, err := procstat.Processes()
	if err != nil {
		return 0, err
	}
	var sum time.Duration
	for _, p := range procs {
		if p.Comm == "pgbouncer" || slices.Contains(roots, p.PID) || slices.Contains(roots, p.PPID) {
			sum += p.CPU()
		}
	}
	return sum, nil
}
