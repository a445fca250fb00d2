package systemtest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/emsanalytics/emsquery/internal/demodata"
	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// measuresDemoDB returns a fresh database holding records demo records with the time columns
// and unit shifts of schema/measures.sql.
func measuresDemoDB(t *testing.T, records int) servicetest.DB {
	t.Helper()
	db := servicetest.WithMeasures(t, servicetest.NewDB(t))
	ctx := context.Background()
	cfg, err := db.Cluster.ConnConfig(db.Name)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	d, err := demodata.New(demodata.Config{Records: records, Seed: demodata.DefaultSeed})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := demodata.Load(ctx, conn, d, demodata.LoadOptions{Measures: true}); err != nil {
		t.Fatal(err)
	}
	return db
}

// TestPerformanceExample opens docs/examples/performance.html as its reader would, served from
// an origin of its own that the service allows, in headless Chromium, on demo data of a month
// against the same month a year earlier. What its charts show (e2e/performance.mjs reads each
// drawn figure) equals SQL's: the heat map's 168 cells, the 90th-fractile turnout and travel by
// station with the share within the NFPA 1710 targets and its Wilson interval, and the
// comparison with last year. After a load and its NOTIFY, the page shows the new figures
// without reloading. With PERFORMANCE_SCREENSHOT set, a PNG of the page is written there.
func TestPerformanceExample(t *testing.T) {
	if _, err := os.Stat("/usr/bin/chromium"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("browser test needs /usr/bin/chromium (Debian package chromium)")
		}
		t.Skip("browser test needs /usr/bin/chromium (Debian package chromium)")
	}
	script := e2eScript(t, "performance.mjs", "playwright-core")
	db := measuresDemoDB(t, 20_000)
	pool := db.Pool(t)
	ctx := context.Background()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pages := &http.Server{Handler: http.FileServer(http.Dir("../docs/examples")), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = pages.Serve(ln) }()
	t.Cleanup(func() { _ = pages.Close() })
	origin := "http://" + ln.Addr().String()
	svc := servicetest.Start(t, db, map[string]string{
		"SECURITY__CORS__ALLOW_ORIGINS": `["` + origin + `"]`,
		"CACHE__MAX_STALENESS":          "3600",
	})
	waitCacheLive(t, svc)

	const month = "2025-12"
	first := performanceFromSQL(t, pool, month)

	runCtx, cancel := context.WithTimeout(ctx, 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(runCtx, "node", script)
	cmd.Env = append(os.Environ(),
		"PAGE_URL="+origin+"/performance.html#"+url.Values{"api": {svc.URL}, "key": {svc.Key}, "month": {month}}.Encode(),
		"SCREENSHOT="+os.Getenv("PERFORMANCE_SCREENSHOT"),
	)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	var log strings.Builder
	go func() {
		defer close(lines)
		r := bufio.NewReader(out)
		for {
			line, err := r.ReadString('\n')
			if line != "" {
				lines <- strings.TrimSpace(line)
			}
			if err != nil {
				return
			}
		}
	}()
	fail := func(format string, args ...any) {
		t.Helper()
		_ = stdin.Close()
		cancel()
		for range lines {
		}
		_ = cmd.Wait()
		t.Fatalf(format+"\nbrowser run:\n%s", append(args, strings.ReplaceAll(log.String(), svc.Key, "<key>"))...)
	}
	// waitShown reads the page's reports until one shows want.
	waitShown := func(what string, want any) {
		t.Helper()
		deadline := time.After(60 * time.Second)
		mismatch := "nothing shown"
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					fail("%s: the browser run ended; last difference: %s", what, mismatch)
				}
				if !strings.HasPrefix(line, "SHOWN ") {
					log.WriteString(line + "\n")
					continue
				}
				var got any
				if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "SHOWN ")), &got); err != nil {
					fail("%s: %v", what, err)
				}
				if mismatch = differs("", got, want); mismatch == "" {
					return
				}
			case <-deadline:
				fail("%s: the page does not show SQL's figures within 60 s; last difference: %s", what, mismatch)
			}
		}
	}
	waitShown("first answers", first)

	// A load: an hour of calls on a Monday morning at the first station, each with a turnout
	// over NFPA 1710's 60 s; then its NOTIFY.
	if _, err := pool.Exec(ctx, `INSERT INTO fact_record (record_id, occurred_at, station_id, station, response_time_s, transported,
			unit_notified_at, en_route_at)
		SELECT m.id + g, t, s.station_id, s.station_name, 300 + g, true, t + interval '30 seconds', t + interval '125 seconds'
		FROM generate_series(1, 40) AS g
		CROSS JOIN LATERAL (SELECT timestamp '2025-12-15 09:00' + g * interval '90 seconds') AS c(t)
		CROSS JOIN (SELECT max(record_id) AS id FROM fact_record) AS m
		CROSS JOIN (SELECT station_id, station_name FROM dim_station ORDER BY station_id LIMIT 1) AS s`); err != nil {
		fail("load: %v", err)
	}
	if _, err := pool.Exec(ctx, `NOTIFY emsquery_refresh`); err != nil {
		fail("notify: %v", err)
	}
	next := performanceFromSQL(t, pool, month)
	if reflect.DeepEqual(first, next) {
		fail("the load changed nothing the page shows")
	}
	waitShown("answers after a load", next)

	_ = stdin.Close()
	for line := range lines {
		log.WriteString(line + "\n")
	}
	if err := cmd.Wait(); err != nil || !strings.Contains(log.String(), "0 failed") {
		t.Fatalf("browser run failed: %v\n%s", err, strings.ReplaceAll(log.String(), svc.Key, "<key>"))
	}
}

// performanceFromSQL is what the page must show for month (YYYY-MM), computed with SQL, in the
// shape e2e/performance.mjs reports (numbers as float64, NULL as nil).
func performanceFromSQL(t *testing.T, pool *pgxpool.Pool, month string) any {
	t.Helper()
	start, err := time.Parse("2006-01", month)
	if err != nil {
		t.Fatal(err)
	}
	end, prevStart := start.AddDate(0, 1, 0), start.AddDate(-1, 0, 0)
	prevEnd := prevStart.AddDate(0, 1, 0)
	rows := func(q string, args ...any) [][]any {
		t.Helper()
		r, err := pool.Query(context.Background(), q, args...)
		if err != nil {
			t.Fatal(err)
		}
		out, err := pgx.CollectRows(r, func(row pgx.CollectableRow) ([]any, error) { return row.Values() })
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	num := func(v any) any {
		switch x := v.(type) {
		case nil:
			return nil
		case int64:
			return float64(x)
		case float64:
			return x
		}
		t.Fatalf("unexpected %T", v)
		return nil
	}

	var heat []any
	for _, r := range rows(`SELECT d, h, count(r.record_id)
		FROM generate_series(1, 7) AS d CROSS JOIN generate_series(0, 23) AS h
		LEFT JOIN fact_record r ON extract(isodow FROM r.occurred_at) = d AND extract(hour FROM r.occurred_at) = h
		     AND r.occurred_at >= $1 AND r.occurred_at < $2
		GROUP BY d, h ORDER BY d, h`, start, end) {
		heat = append(heat, []any{float64(r[0].(int32)), float64(r[1].(int32)), num(r[2])})
	}

	// An interval by station: NEAREST_RANK is percentile_disc; negative intervals are excluded.
	interval := func(from, to string, target float64) []any {
		out := []any{}
		for _, r := range rows(`WITH iv AS (SELECT station, extract(epoch FROM `+to+` - `+from+`)::float8 AS s
				FROM fact_record WHERE occurred_at >= $1 AND occurred_at < $2)
			SELECT station, count(*), count(s) FILTER (WHERE s >= 0),
			       percentile_disc(0.9) WITHIN GROUP (ORDER BY s) FILTER (WHERE s >= 0),
			       count(*) FILTER (WHERE s >= 0 AND s <= $3)
			FROM iv GROUP BY station ORDER BY station NULLS LAST`, start, end, target) {
			measured, within := float64(r[2].(int64)), float64(r[4].(int64))
			m := map[string]any{"station": r[0], "count": num(r[1]), "measured": measured, "fractile": num(r[3]),
				"within": nil, "share": nil, "ci_low": nil, "ci_high": nil}
			if measured > 0 {
				lo, hi := wilson(within, measured, 1.959963984540054)
				m["within"], m["share"], m["ci_low"], m["ci_high"] = within, within/measured, lo, hi
			}
			out = append(out, m)
		}
		return out
	}
	const arrived = `(occurred_at + response_time_s * interval '1 second')`

	var comparison []any
	for _, r := range rows(`WITH cur AS (SELECT station, count(*) AS n,
			percentile_disc(0.9) WITHIN GROUP (ORDER BY response_time_s::float8) FILTER (WHERE response_time_s >= 0) AS f
			FROM fact_record WHERE occurred_at >= $1 AND occurred_at < $2 GROUP BY station),
		prev AS (SELECT station, count(*) AS n,
			percentile_disc(0.9) WITHIN GROUP (ORDER BY response_time_s::float8) FILTER (WHERE response_time_s >= 0) AS f
			FROM fact_record WHERE occurred_at >= $3 AND occurred_at < $4 GROUP BY station),
		s AS (SELECT station FROM cur UNION SELECT station FROM prev)
		SELECT s.station, coalesce(p.n, 0), coalesce(c.n, 0), p.f, c.f
		FROM s LEFT JOIN cur c ON c.station IS NOT DISTINCT FROM s.station
		       LEFT JOIN prev p ON p.station IS NOT DISTINCT FROM s.station
		ORDER BY s.station NULLS LAST`, start, end, prevStart, prevEnd) {
		prev, cur := float64(r[1].(int64)), float64(r[2].(int64))
		var ratio any
		if prev != 0 {
			ratio = (cur - prev) / prev
		}
		comparison = append(comparison, map[string]any{"station": r[0], "previous": prev, "current": cur,
			"change": cur - prev, "change_ratio": ratio, "previous_fractile": num(r[3]), "current_fractile": num(r[4])})
	}
	return map[string]any{
		"heat":       heat,
		"turnout":    interval("unit_notified_at", "en_route_at", 60),
		"travel":     interval("en_route_at", arrived, 240),
		"comparison": comparison,
	}
}

// wilson is the Wilson score interval of within/n (contract 6.12.2).
func wilson(within, n, z float64) (lo, hi float64) {
	p := within / n
	center := p + z*z/(2*n)
	margin := z * math.Sqrt(p*(1-p)/n+z*z/(4*n*n))
	lo, hi = (center-margin)/(1+z*z/n), (center+margin)/(1+z*z/n)
	if within == 0 {
		lo = 0
	}
	if within == n {
		hi = 1
	}
	return lo, hi
}

// differs says where got (decoded JSON) differs from want, "" when it does not: numbers within
// a relative 1e-9 (the contract's tolerance for the Wilson bounds), everything else exactly.
func differs(path string, got, want any) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: got %v, want an object", path, got)
		}
		for k, wv := range w {
			if d := differs(path+"."+k, g[k], wv); d != "" {
				return d
			}
		}
		return ""
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Sprintf("%s: got %.300v, want %d elements %.300v", path, got, len(w), w)
		}
		for i := range w {
			if d := differs(fmt.Sprintf("%s[%d]", path, i), g[i], w[i]); d != "" {
				return d
			}
		}
		return ""
	case float64:
		g, ok := got.(float64)
		if !ok || math.Abs(g-w) > 1e-9*math.Max(1, math.Abs(w)) {
			return fmt.Sprintf("%s: got %v, want %v", path, got, w)
		}
		return ""
	}
	if !reflect.DeepEqual(got, want) {
		return fmt.Sprintf("%s: got %v, want %v", path, got, want)
	}
	return ""
}
