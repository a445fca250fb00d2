// Command run is `make bench`: it measures every workload of the service against the database's
// own speed for the same SQL, side by side, and prints the results as a markdown table.
//
// It starts a throwaway PostgreSQL cluster (internal/pgtest), loads the demo generator's data
// (internal/demodata, as `go run ./cmd/demodata`) at each size, builds the service and runs it as
// a real process on loopback. For each workload and concurrency it measures, with the same
// closed-loop driver (driver.go):
//
//   - the service: N workers sending the workload's HTTP request back to back over keep-alive
//     connections, reading every response to the end, while the service's resident memory is
//     sampled (the service is started afresh for each measurement, so its peak RSS is that
//     workload's);
//   - the baseline: N workers running the same SQL the service sent, with the same parameters,
//     directly through pgx (a pool of N connections, the same prepared-statement mode as the
//     service), reading every row; for the CSV export, psql's \copy of the same query.
//
// The SQL is captured from the database, not rebuilt: before measuring, each request is sent
// once with log_statement=all on the benchmark database and the statements and bind parameters
// the server logged are what the baseline runs (capture.go).
//
// Usage:
//
//	go run ./bench/run                                 # 100,000 and 1,000,000 records
//	go run ./bench/run -sizes 100000,1000000,5000000   # and a larger set
//	go run ./bench/run -sizes 100000 -workloads patients,export -duration 2s
//	go run ./bench/run -doc docs/benchmarks.md         # also write the results into the doc
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/internal/demodata"
	"github.com/emsanalytics/emsquery/internal/pgtest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type options struct {
	sizes       []int
	patientsRSS int
	conc        []int
	duration    time.Duration
	warmup      time.Duration
	rounds      int
	only        map[string]bool
	seed        uint64
	out         string
	doc         string
	profile     string
}

func parseFlags() (options, error) {
	var o options
	sizes := flag.String("sizes", "100000,1000000", "records of each data set, comma separated (add e.g. 5000000 for a larger one)")
	flag.IntVar(&o.patientsRSS, "patients-rss", 200_000, "also measure patients on a data set with this many dim_patient rows, for the peak-RSS target (0: skip)")
	conc := flag.String("concurrency", "1,16", "concurrencies (closed-loop workers), comma separated")
	flag.DurationVar(&o.duration, "duration", 4*time.Second, "measured time of each measurement (requests in flight at its end are awaited)")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured time before each measurement")
	flag.IntVar(&o.rounds, "rounds", 4, "slices each measurement is split into, alternating service and baseline")
	only := flag.String("workloads", "", "only these workloads, comma separated (default: all)")
	flag.Uint64Var(&o.seed, "seed", demodata.DefaultSeed, "demo data seed")
	flag.StringVar(&o.out, "o", "", "also write the results (markdown) to this file")
	flag.StringVar(&o.profile, "profile", "", "write a CPU profile of the service for each line into this folder (builds the service with -tags pprof)")
	flag.StringVar(&o.doc, "doc", "", "replace the results section of this markdown file (between <!-- results:begin --> and <!-- results:end -->)")
	flag.Parse()
	var err error
	if o.sizes, err = intList(*sizes); err != nil {
		return o, fmt.Errorf("-sizes: %w", err)
	}
	if o.conc, err = intList(*conc); err != nil {
		return o, fmt.Errorf("-concurrency: %w", err)
	}
	if *only != "" {
		o.only = map[string]bool{}
		for n := range strings.SplitSeq(*only, ",") {
			if _, ok := workloadByName(n); !ok {
				return o, fmt.Errorf("-workloads: unknown workload %q", n)
			}
			o.only[n] = true
		}
	}
	return o, nil
}

func intList(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// dataSet is one loaded database and the workloads measured on it.
type dataSet struct {
	Records   int
	Patients  int64
	DB        dbTarget
	Workloads []workload
	// RSSOnly marks the set loaded for the patients peak-RSS target.
	RSSOnly bool
}

func run() error {
	o, err := parseFlags()
	if err != nil {
		return err
	}
	began := time.Now()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	root, err := moduleRoot()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "emsquery-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	progress("building the service")
	if o.profile != "" {
		if err := os.MkdirAll(o.profile, 0o755); err != nil {
			return err
		}
	}
	bin, err := buildService(root, tmp, o.profile != "")
	if err != nil {
		return err
	}
	progress("starting a PostgreSQL cluster")
	cluster, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		return fmt.Errorf("start a PostgreSQL cluster: %w", err)
	}
	defer cluster.Destroy()

	var sets []*dataSet
	for _, n := range o.sizes {
		sets = append(sets, &dataSet{Records: n, Workloads: selectWorkloads(o, nil)})
	}
	if o.patientsRSS > 0 && (o.only == nil || o.only["patients"]) {
		// demodata makes one patient per 1.1 records.
		n := int(math.Round(float64(o.patientsRSS) * 1.1))
		p, _ := workloadByName("patients")
		sets = append(sets, &dataSet{Records: n, Workloads: []workload{p}, RSSOnly: true})
	}
	for _, s := range sets {
		if err := load(ctx, cluster, s, o.seed); err != nil {
			return err
		}
	}

	env, err := machine(ctx, cluster)
	if err != nil {
		return err
	}
	env.cpu0 = sampleCPU(cluster.PostmasterPID())
	var rows []row
	for _, s := range sets {
		stmts, err := capture(ctx, cluster, bin, tmp, s)
		if err != nil {
			return err
		}
		heavy := map[string]bool{}
		for _, w := range s.Workloads {
			for _, c := range o.conc {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				r, err := measure(ctx, bin, tmp, s, w, c, stmts[w.Name], o)
				if err != nil {
					return err
				}
				if _, ok := heavy[w.Name]; !ok {
					// The database's work: the baseline's median at the first (lowest) concurrency.
					heavy[w.Name] = r.Base.P50 > 10*time.Millisecond
				}
				r.Heavy = heavy[w.Name]
				r.judge()
				rows = append(rows, r)
				progress("%-8s %-22s c=%-3d service %8.1f req/s  baseline %8.1f req/s  ratio %.2f  RSS %5.1f MB  %s",
					count(s.Records), w.Name, c, r.Svc.RPS(), r.Base.RPS(), r.ratio(), mb(r.PeakRSS), r.Verdict)
			}
		}
	}
	env.Wall = time.Since(began)
	env.OtherCPU = otherShare(env.cpu0, sampleCPU(cluster.PostmasterPID()))
	md := render(env, o, sets, rows)
	fmt.Print(md)
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(md), 0o644); err != nil {
			return err
		}
	}
	if o.doc != "" {
		if err := replaceSection(o.doc, md); err != nil {
			return err
		}
	}
	return nil
}

func selectWorkloads(o options, _ []workload) []workload {
	var out []workload
	for _, w := range workloads {
		if o.only == nil || o.only[w.Name] {
			out = append(out, w)
		}
	}
	return out
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func moduleRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate the module")
	}
	return filepath.Join(filepath.Dir(file), "..", ".."), nil
}

// load creates the set's database and fills it with the demo generator's data.
func load(ctx context.Context, c *pgtest.Cluster, s *dataSet, seed uint64) error {
	name := "bench_" + strconv.Itoa(s.Records)
	if err := c.CreateDatabase(ctx, name, false); err != nil {
		return err
	}
	s.DB = dbTarget{Host: c.Host(), Port: c.Port(), Name: name, User: "postgres", Password: c.Password()}
	cfg, err := c.ConnConfig(name)
	if err != nil {
		return err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	d, err := demodata.New(demodata.Config{Records: s.Records, Seed: seed})
	if err != nil {
		return err
	}
	t0 := time.Now()
	progress("loading %s records (seed %d)", count(s.Records), seed)
	if _, err := demodata.Load(ctx, conn, d, demodata.LoadOptions{ApplySchema: true}); err != nil {
		return fmt.Errorf("load %d records: %w", s.Records, err)
	}
	s.Patients = d.Patients
	// demodata's VACUUM, right after its load, leaves a varying part of the tables not
	// all-visible (most likely because the load's asynchronous commit is not flushed yet), and
	// index-only scans read the heap until a later VACUUM: which came first would decide how
	// fast the database is. Vacuum until every page is all-visible, as autovacuum would leave
	// them.
	var pages, visible int64
	for try := 0; ; try++ {
		if _, err := conn.Exec(ctx, "VACUUM dim_station, dim_resource, dim_patient, fact_record, fact_oxygen"); err != nil {
			return err
		}
		if err := conn.QueryRow(ctx, `SELECT sum(relpages), sum(relallvisible) FROM pg_class
			WHERE oid IN ('dim_patient'::regclass, 'fact_record'::regclass, 'fact_oxygen'::regclass)`).Scan(&pages, &visible); err != nil {
			return err
		}
		if visible >= pages || try == 40 {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	progress("loaded %s records in %.1fs (%d of %d pages all-visible)", count(s.Records), time.Since(t0).Seconds(), visible, pages)
	return nil
}

// capture sends each workload's request once with statement logging on and returns, per
// workload, the statements the service ran.
func capture(ctx context.Context, c *pgtest.Cluster, bin, tmp string, s *dataSet) (map[string][]statement, error) {
	db := pgx.Identifier{s.DB.Name}.Sanitize()
	if err := c.Exec(ctx, "postgres", "ALTER DATABASE "+db+" SET log_statement = 'all'"); err != nil {
		return nil, err
	}
	defer c.Exec(context.WithoutCancel(ctx), "postgres", "ALTER DATABASE "+db+" RESET log_statement") //nolint:errcheck
	svc, err := startService(bin, tmp, s.DB, false)
	if err != nil {
		return nil, err
	}
	defer svc.stop()
	watcher, err := newLogWatcher(filepath.Join(c.Dir(), "postgres.log"))
	if err != nil {
		return nil, err
	}
	out := map[string][]statement{}
	for _, w := range s.Workloads {
		body, hdr, err := svc.fetch(ctx, w)
		if err != nil {
			return nil, err
		}
		if err := w.check(body, hdr); err != nil {
			return nil, err
		}
		text, err := watcher.next()
		if err != nil {
			return nil, err
		}
		all, err := statements(parseLog(text))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", w.Name, err)
		}
		var sts []statement
		for _, st := range all {
			if strings.HasPrefix(st.SQL, "-- ping") { // pgxpool's liveness check of an idle connection
				continue
			}
			sts = append(sts, st)
		}
		if len(sts) == 0 {
			return nil, fmt.Errorf("%s: %w", w.Name, errNoStatement)
		}
		if w.isExport() {
			// The export's COPY, for psql's \copy. Settings sent with it in the same message
			// (SET LOCAL statement_timeout ...) do not change its speed and have no \copy form.
			var copyStmt string
			for _, st := range sts {
				if i := strings.Index(st.SQL, "COPY ("); i >= 0 && st.Simple {
					copyStmt = st.SQL[i:]
				}
			}
			if copyStmt == "" || strings.Contains(copyStmt, "\n") {
				return nil, fmt.Errorf("export: expected a single-line COPY statement, captured %+v", sts)
			}
			sts = []statement{{SQL: copyStmt, Simple: true}}
		}
		out[w.Name] = sts
	}
	return out, nil
}

func count(n int) string {
	s := strconv.Itoa(n)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }
