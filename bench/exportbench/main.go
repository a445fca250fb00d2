// Command exportbench measures the CSV export (GET /v1/reports/main-report/export) on a large
// data set: its throughput as a ratio to `COPY (same query) TO STDOUT` on a kept database session
// in the same run (target: at least 0.8), and the service's peak resident memory while it
// streams (target: under 100 MB). It is a benchmark, not a test: it prints its figures, and it
// exits non-zero only when it cannot measure, or with -check when a target is missed.
//
// Without -dsn it starts a throwaway PostgreSQL cluster (internal/pgtest) and fills it with
// `go run ./cmd/demodata -records N -seed S`; with -dsn it uses a database that already holds
// demo data (for example the one `make demo` fills). It builds the service, starts it against
// the database, and for each round runs, one after the other on a warm cache:
//
//   - COPY (<query>) TO STDOUT WITH (FORMAT csv, HEADER) on one session kept for the whole run
//     (pgconn's CopyTo, what psql's \copy sends), the query being the one the service runs
//     inside COPY for the same arguments (reports.ExportQuery); kept, so that the start and
//     login of a psql process and a new session per round, which the service's pool does not
//     pay, are not counted against the database;
//   - the export over HTTP, read by a client that discards the bytes, while the service's
//     VmRSS is sampled every 5 ms;
//   - with -rows-reference, the same query read row by row through pgx and written with
//     encoding/csv in this process, without HTTP: the best case of the alternative design
//     (stream rows from a parameterised query and write the CSV in Go).
//
// Usage:
//
//	go run ./bench/exportbench                      # 1,000,000 records, 3 rounds
//	go run ./bench/exportbench -records 200000 -rounds 5
//	go run ./bench/exportbench -dsn 'host=127.0.0.1 port=55432 dbname=ems_demo user=postgres password=...'
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/emsanalytics/emsquery/internal/launcher"
	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/internal/procstat"
	"github.com/emsanalytics/emsquery/modules/records"
	"github.com/emsanalytics/emsquery/modules/reports"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "exportbench:", err)
		os.Exit(1)
	}
}

type options struct {
	records       int
	seed          uint64
	dsn           string
	rounds        int
	start, end    string
	rowsReference bool
	check         bool
}

func run() error {
	var o options
	flag.IntVar(&o.records, "records", 1_000_000, "records to generate with cmd/demodata (ignored with -dsn)")
	flag.Uint64Var(&o.seed, "seed", 1, "cmd/demodata's seed (ignored with -dsn)")
	flag.StringVar(&o.dsn, "dsn", "", "use this database, which already holds demo data, instead of a throwaway cluster (key=value or URL)")
	flag.IntVar(&o.rounds, "rounds", 3, "measured rounds; the best of each is reported")
	flag.StringVar(&o.start, "start-date", "2024-01-01", "start_date of the export (cmd/demodata's records span 2024-01-01..2025-12-31)")
	flag.StringVar(&o.end, "end-date", "2025-12-31", "end_date of the export")
	flag.BoolVar(&o.rowsReference, "rows-reference", true, "also time the row-by-row alternative (pgx rows + encoding/csv, in process)")
	flag.BoolVar(&o.check, "check", false, "exit 1 when a target (ratio >= 0.8, peak RSS < 100 MB) is missed")
	flag.Parse()
	if o.rounds < 1 {
		return errors.New("-rounds must be at least 1")
	}
	ctx := context.Background()
	cfg, cleanup, err := database(ctx, o)
	if err != nil {
		return err
	}
	defer cleanup()

	a := reports.Args{Records: records.RecordFilter{StartDate: o.start, EndDate: o.end}, Page: reports.Page{Limit: reports.All}}
	query, err := reports.ExportQuery(a)
	if err != nil {
		return err
	}
	var rows int64
	if err := withConn(ctx, cfg, func(c *pgx.Conn) error {
		return c.QueryRow(ctx, "SELECT count(*) FROM fact_record WHERE occurred_at::date BETWEEN $1::date AND $2::date", o.start, o.end).Scan(&rows)
	}); err != nil {
		return err
	}
	fmt.Printf("data: %d records in %s..%s\n", rows, o.start, o.end)

	svc, err := startService(ctx, cfg)
	if err != nil {
		return err
	}
	defer svc.stop()
	pid := svc.proc.PID()
	before, err := procstat.RSS(pid)
	if err != nil {
		return err
	}
	fmt.Printf("service: pid %d, RSS %.1f MB before the first export\n", pid, mb(before))
	// The database side's session, opened once and kept, as the service keeps its pool's.
	session, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer session.Close(context.WithoutCancel(ctx))

	url := svc.url + "/v1/reports/main-report/export?start_date=" + o.start + "&end_date=" + o.end
	// Warm-up: caches filled, both sides once.
	if _, err := svc.export(url); err != nil {
		return err
	}
	if _, err := copyOut(ctx, session, query); err != nil {
		return err
	}

	var copyRuns, svcRuns, rowRuns []result
	var peak int64
	for i := 0; i < o.rounds; i++ {
		p, err := copyOut(ctx, session, query)
		if err != nil {
			return err
		}
		copyRuns = append(copyRuns, p)

		sampler := procstat.SampleRSS(pid, 5*time.Millisecond)
		cpu0, err := procstat.CPUTime(pid)
		if err != nil {
			return err
		}
		s, err := svc.export(url)
		cpu1, cerr := procstat.CPUTime(pid)
		s.cpu = cpu1 - cpu0
		pk, perr := sampler.Stop(false)
		if err := errors.Join(err, cerr, perr); err != nil {
			return err
		}
		peak = max(peak, pk)
		svcRuns = append(svcRuns, s)
		if s.bytes != p.bytes+int64(p.lines) {
			// The service ends each record with CRLF, COPY with LF: one byte more per line. Any
			// other difference is another answer, whose time would not be the export's.
			return fmt.Errorf("round %d: the service sent %d bytes, COPY %d bytes in %d lines", i+1, s.bytes, p.bytes, p.lines)
		}
		if o.rowsReference {
			r, err := rowsCSV(ctx, session, query)
			if err != nil {
				return err
			}
			rowRuns = append(rowRuns, r)
		}
		fmt.Printf("round %d: COPY %.2fs, service %.2fs (CPU %.2fs, peak RSS %.1f MB)", i+1, p.dur.Seconds(), s.dur.Seconds(), s.cpu.Seconds(), mb(pk))
		if o.rowsReference {
			fmt.Printf(", pgx rows + encoding/csv %.2fs", rowRuns[i].dur.Seconds())
		}
		fmt.Println()
	}
	bp, bs := best(copyRuns), best(svcRuns)
	ratio := bp.dur.Seconds() / bs.dur.Seconds()
	hwm, err := procstat.PeakRSS(pid)
	if err != nil {
		return err
	}
	fmt.Printf("\nCOPY, kept session  %7.2fs  %9.0f rows/s  %6.1f MB/s\n", bp.dur.Seconds(), float64(rows)/bp.dur.Seconds(), mb(bp.bytes)/bp.dur.Seconds())
	fmt.Printf("service export      %7.2fs  %9.0f rows/s  %6.1f MB/s\n", bs.dur.Seconds(), float64(rows)/bs.dur.Seconds(), mb(bs.bytes)/bs.dur.Seconds())
	if o.rowsReference {
		br := best(rowRuns)
		fmt.Printf("pgx rows + csv (ref) %6.2fs  %9.0f rows/s  ratio to COPY %.2f\n", br.dur.Seconds(), float64(rows)/br.dur.Seconds(), bp.dur.Seconds()/br.dur.Seconds())
	}
	fmt.Printf("throughput ratio (COPY time / service time): %.2f   target >= 0.80\n", ratio)
	fmt.Printf("service peak RSS during the exports: %.1f MB (VmHWM since start %.1f MB)   target < 100 MB\n", mb(peak), mb(hwm))
	if o.check && (ratio < 0.8 || mb(peak) >= 100) {
		return errors.New("a target was missed")
	}
	return nil
}

type result struct {
	dur   time.Duration
	bytes int64
	lines int
	cpu   time.Duration // the service's CPU time (user and system) during the export
}

func best(rs []result) result {
	return slices.MinFunc(rs, func(a, b result) int { return int(a.dur - b.dur) })
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// database returns the connection settings of a database with demo data: -dsn's, or a
// throwaway cluster's filled by cmd/demodata.
func database(ctx context.Context, o options) (*pgx.ConnConfig, func(), error) {
	if o.dsn != "" {
		cfg, err := pgx.ParseConfig(o.dsn)
		return cfg, func() {}, err
	}
	c, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		return nil, nil, fmt.Errorf("start a PostgreSQL cluster: %w", err)
	}
	cleanup := func() { _ = c.Destroy() }
	if err := c.CreateDatabase(ctx, "bench", true); err != nil {
		cleanup()
		return nil, nil, err
	}
	fmt.Printf("loading %d records with cmd/demodata (seed %d)...\n", o.records, o.seed)
	t0 := time.Now()
	cmd := exec.Command("go", "run", "./cmd/demodata", "-records", strconv.Itoa(o.records),
		"-seed", strconv.FormatUint(o.seed, 10), "-dsn", c.URL("bench"), "-quiet")
	cmd.Dir = launcher.ModuleRoot()
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("cmd/demodata: %w", err)
	}
	fmt.Printf("loaded in %.1fs\n", time.Since(t0).Seconds())
	cfg, err := c.ConnConfig("bench")
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	return cfg, cleanup, nil
}

func withConn(ctx context.Context, cfg *pgx.ConnConfig, f func(*pgx.Conn) error) error {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return f(conn)
}

// copyOut runs COPY (query) TO STDOUT WITH (FORMAT csv, HEADER) on the kept session, its CSV
// counted as it arrives.
func copyOut(ctx context.Context, session *pgx.Conn, query string) (result, error) {
	var c lineCount
	t0 := time.Now()
	if _, err := session.PgConn().CopyTo(ctx, &c, "COPY ("+query+") TO STDOUT WITH (FORMAT csv, HEADER)"); err != nil {
		return result{}, fmt.Errorf("copy: %w", err)
	}
	return result{dur: time.Since(t0), bytes: c.bytes, lines: c.lines}, nil
}

// lineCount counts the bytes and line feeds written to it.
type lineCount struct {
	bytes int64
	lines int
}

func (c *lineCount) Write(p []byte) (int, error) {
	c.bytes += int64(len(p))
	c.lines += bytes.Count(p, []byte{'\n'})
	return len(p), nil
}

// rowsCSV is the alternative design's best case: the same query through pgx (extended
// protocol, binary results), each row scanned into typed values and written with encoding/csv.
func rowsCSV(ctx context.Context, c *pgx.Conn, query string) (result, error) {
	var res result
	err := func() error {
		t0 := time.Now()
		cw := &countWriter{}
		bw := bufio.NewWriterSize(cw, 64<<10)
		w := csv.NewWriter(bw)
		w.UseCRLF = true
		rows, err := c.Query(ctx, query)
		if err != nil {
			return err
		}
		defer rows.Close()
		var (
			id                                                           int64
			at                                                           time.Time
			station, callsign, urgency, municipality, transp, gender, ox pgtype.Text
			resource, response, age                                      pgtype.Int4
			distance                                                     pgtype.Numeric
		)
		rec := make([]string, 13)
		text := func(t pgtype.Text) string { return t.String }
		i4 := func(n pgtype.Int4) string {
			if !n.Valid {
				return ""
			}
			return strconv.Itoa(int(n.Int32))
		}
		for rows.Next() {
			if err := rows.Scan(&id, &at, &station, &callsign, &resource, &urgency, &distance, &response, &municipality, &transp, &age, &gender, &ox); err != nil {
				return err
			}
			rec[0], rec[1], rec[2], rec[3], rec[4], rec[5] = strconv.FormatInt(id, 10), at.Format("2006-01-02 15:04:05.999999"), text(station), text(callsign), i4(resource), text(urgency)
			rec[6] = ""
			if distance.Valid {
				v, _ := distance.Value()
				rec[6], _ = v.(string)
			}
			rec[7], rec[8], rec[9], rec[10], rec[11], rec[12] = i4(response), text(municipality), text(transp), i4(age), text(gender), text(ox)
			if err := w.Write(rec); err != nil {
				return err
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		w.Flush()
		if err := bw.Flush(); err != nil {
			return err
		}
		res = result{dur: time.Since(t0), bytes: cw.n}
		return nil
	}()
	return res, err
}

type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

// service is the running binary.
type service struct {
	dir  string // logs, removed by stop
	proc *launcher.Process
	url  string
	key  string
}

// startService builds the service and starts it against cfg's database (internal/launcher),
// with a pool of two, warnings only in its log and no telemetry; it returns once /v1/ping
// answers.
func startService(ctx context.Context, cfg *pgx.ConnConfig) (*service, error) {
	dir, err := os.MkdirTemp("", "exportbench-")
	if err != nil {
		return nil, err
	}
	bin, err := launcher.Build(ctx, dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	key := strings.Repeat("k", 48)
	settings := map[string]string{
		"AUTHENTICATION__API_KEY": key,
		"DATABASE__HOST":          cfg.Host, "DATABASE__PORT": strconv.Itoa(int(cfg.Port)),
		"DATABASE__NAME": cfg.Database, "DATABASE__USERNAME": cfg.User, "DATABASE__PASSWORD": cfg.Password,
		"DATABASE__ENCRYPT": "no", "DATABASE__POOL_SIZE": "2",
		"LOG__PATH": dir, "LOG__FILE__ENABLED": "false", "LOG__LEVEL": "WARNING", "OTEL_METRICS_EXPORTER": "none",
		"OTEL_TRACES_EXPORTER": "none", // the default pushes to a collector that is not there
	}
	url, err := launcher.Loopback(settings)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	proc, err := launcher.Start(launcher.Options{Bin: bin, Dir: dir, Settings: settings})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &service{dir: dir, proc: proc, url: url, key: key}
	if err := proc.WaitReady(ctx, url+"/v1/ping", 15*time.Second); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// stop sends SIGINT, kills after 10 s, and removes the service's folder; what the service
// printed (warnings and errors) goes to standard error.
func (s *service) stop() {
	_, _ = s.proc.Stop(os.Interrupt, 10*time.Second)
	if out := s.proc.Output(); out != "" {
		fmt.Fprint(os.Stderr, out)
	}
	os.RemoveAll(s.dir)
}

func (s *service) export(url string) (result, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return result{}, err
	}
	req.Header.Set("x-api-key", s.key)
	req.Header.Set("SERVICE-X-API-KEY", s.key)
	t0 := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return result{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return result{}, fmt.Errorf("export: %s: %s", resp.Status, b)
	}
	var c lineCount
	if _, err := io.Copy(&c, resp.Body); err != nil {
		return result{}, fmt.Errorf("export: %w", err)
	}
	return result{dur: time.Since(t0), bytes: c.bytes, lines: c.lines}, nil
}
