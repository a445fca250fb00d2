package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/emsanalytics/emsquery/internal/launcher"
	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/internal/procstat"
)

// TestClientCost measures what the HTTP client of the driver costs per request: the same
// service, the same requests one at a time (c=1), sent by Go's net/http client, by fasthttp's
// HostClient and by rawClient (httpclient.go), in alternating slices. For each it reports the
// rate, the median, the driver's own processor time per request and the service's. It takes a
// minute and a PostgreSQL cluster, so it runs only when asked:
//
//	BENCH_CLIENT_COST=1 go test -run TestClientCost -v -count=1 ./bench/run
func TestClientCost(t *testing.T) {
	if os.Getenv("BENCH_CLIENT_COST") == "" {
		t.Skip("set BENCH_CLIENT_COST=1 to measure the HTTP clients")
	}
	ctx := context.Background()
	tmp := t.TempDir()
	bin, err := launcher.Build(ctx, tmp)
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Destroy()
	s := &dataSet{Records: 10_000}
	if err := load(ctx, cluster, s, 1); err != nil {
		t.Fatal(err)
	}
	svc, err := startService(ctx, bin, tmp, s.DB, s.Records, false, false)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.stop()
	host := strings.TrimPrefix(svc.url, "http://")
	res, _ := workloadByName("resources")
	pat, _ := workloadByName("patients")

	type target struct {
		name         string
		method, path string
		body         []byte
	}
	targets := []target{
		{"GET /v1/ping", http.MethodGet, "/v1/ping", nil},
		{"resources", http.MethodPost, res.Path, res.body()},
		{"patients", http.MethodPost, pat.Path, pat.body()}, // 9,091 rows, a large body
	}
	hc := &fasthttp.HostClient{Addr: host, MaxConns: 16, MaxResponseBodySize: 1 << 30}
	rc := &rawClient{addr: host}
	defer rc.close()
	clients := []struct {
		name string
		do   func(tg target) request
	}{
		{"net/http", func(tg target) request {
			return func(ctx context.Context, _ int) (int64, error) {
				var rd io.Reader
				if tg.body != nil {
					rd = strings.NewReader(string(tg.body))
				}
				req, err := http.NewRequestWithContext(ctx, tg.method, svc.url+tg.path, rd)
				if err != nil {
					return 0, err
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("x-api-key", svc.key)
				resp, err := httpClient.Do(req)
				if err != nil {
					return 0, err
				}
				defer resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					return 0, fmt.Errorf("%s", resp.Status)
				}
				return io.Copy(io.Discard, resp.Body)
			}
		}},
		{"fasthttp", func(tg target) request {
			return func(ctx context.Context, _ int) (int64, error) {
				req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
				defer fasthttp.ReleaseRequest(req)
				defer fasthttp.ReleaseResponse(resp)
				req.SetRequestURI(svc.url + tg.path)
				req.Header.SetMethod(tg.method)
				req.Header.SetContentType("application/json")
				req.Header.Set("x-api-key", svc.key)
				if tg.body != nil {
					req.SetBodyRaw(tg.body)
				}
				if err := hc.Do(req, resp); err != nil {
					return 0, err
				}
				if resp.StatusCode() != http.StatusOK {
					return 0, fmt.Errorf("%d", resp.StatusCode())
				}
				return int64(len(resp.Body())), nil
			}
		}},
		{"raw", func(tg target) request {
			rr := newRawRequest(host, tg.method, tg.path, tg.body, "Content-Type", "application/json", "x-api-key", svc.key)
			return func(ctx context.Context, w int) (int64, error) {
				resp, n, err := rc.do(ctx, w, rr, io.Discard)
				if err == nil && resp.status != http.StatusOK {
					err = fmt.Errorf("%d", resp.status)
				}
				return n, err
			}
		}},
	}
	pid := svc.pid()
	for _, tg := range targets {
		type sum struct {
			m              measurement
			driver, server time.Duration
		}
		sums := make([]sum, len(clients))
		for round := range 4 {
			for i, cl := range clients {
				do := cl.do(tg)
				if round == 0 {
					closedLoop(ctx, 1, 300*time.Millisecond, do)
				}
				d0, s0 := selfCPU(), serviceCPU(t, pid)
				m := closedLoop(ctx, 1, time.Second, do)
				if m.Errors > 0 {
					t.Fatalf("%s %s: %v", cl.name, tg.name, m.FirstErr)
				}
				sums[i].driver += selfCPU() - d0
				sums[i].server += serviceCPU(t, pid) - s0
				if round == 0 {
					sums[i].m = m
				} else {
					sums[i].m = sums[i].m.merge(m)
				}
			}
		}
		for i, cl := range clients {
			m := sums[i].m
			n := time.Duration(m.Requests)
			t.Logf("%-13s %-9s %7.0f req/s  p50 %.3f ms  driver CPU/req %.3f ms  service CPU/req %.3f ms",
				tg.name, cl.name, m.RPS(), msf(m.P50), msf(sums[i].driver/n), msf(sums[i].server/n))
		}
	}
}

func serviceCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	d, err := procstat.CPUTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// selfCPU is this process's user and system processor time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
