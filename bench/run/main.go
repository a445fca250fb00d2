// Command run is `make bench`: it measures every workload of the service against two baselines,
// side by side, and prints the results as a markdown table.
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
//   - the hand-written SQL (handsql.go, workloads.go): what a DBA would type for the same
//     question, values in the text, sent with the simple protocol on a pool of N connections,
//     every row read; for the CSV export, COPY (that SELECT) TO STDOUT on a kept session, as
//     psql's \copy sends it but without a new psql process per request. The targets are ratios
//     to it. Before a data set is measured, each workload's service answer is compared with the
//     answer built from this SQL's rows;
//   - the captured SQL: the statements the service sent, with the same parameters, through a
//     pgx pool configured as the service's own (platform/database.PoolConfig), every row read;
//     for the export, the service's COPY on a kept session. Against it the ratio is the service's own
//     overhead; the hand-written and captured lines together tell it from the quality of the
//     service's SQL.
//
// Those are the cold lines: the service runs with its answer cache off (CACHE__ENABLED=false).
// The dashboard questions (workload.Warm) also get warm lines, right after their cold lines: the
// service with its cache on, the same question repeated once its answer is in memory, measured
// alone against the cold line's hand-written SQL (measureWarm).
//
// Last, on the smallest data set, the live answers (contract 6.11, live.go): 1,000 streams on one
// question and 1,000 streams on 100 questions, each change an INSERT then NOTIFY; the time from
// the NOTIFY to each stream's new answer, the recomputations and statements per change, and the
// service's peak RSS. -doc writes them into their own section (-live-doc-section).
//
// With -workloads follow, on the largest data set of a cluster with logical decoding and
// pg_stat_statements, the answers that follow their tables (contract 6.13, follow.go).
//
// The service's SQL is captured from the database, not rebuilt: before measuring, each request is
// sent once with log_statement=all on the benchmark database and the statements and bind
// parameters the server logged are what the captured baseline runs (capture.go).
//
// Usage:
//
//	go run ./bench/run                                  # 100,000 and 1,000,000 records
//	go run ./bench/run -sizes 10000000 -patients-rss 0  # the 10,000,000-record size alone, cold lines
//	go run ./bench/run -sizes 100000 -workloads patients,export -duration 1s
//	go run ./bench/run -warm-max-records 0              # cold lines only
//	go run ./bench/run -doc docs/benchmarks.md          # also write the results into the doc
//	go run ./bench/run -sizes 100000 -workloads live -patients-rss 0  # the live answers alone
//	go run ./bench/run -sizes 1000000 -workloads follow -patients-rss 0  # answers that follow their tables (follow.go)
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/internal/demodata"
	"github.com/emsanalytics/emsquery/internal/launcher"
	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/internal/procstat"
)

func main() {
	servesFloor() // the bare server of floor.go, which the benchmark starts as a process of its own
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
	docSection  string
	profile     string
	// Warm lines (the answer cache on): on data sets of at most warmMax records, each measured
	// for warmDuration.
	warmMax      int
	warmDuration time.Duration
	// Live answers (live.go): on the smallest data set, unless -workloads leaves "live" out.
	live liveOptions
	// Answers that follow their tables (follow.go): on the largest data set, when -workloads
	// names "follow".
	follow followOptions
}

// liveWorkload is the name -workloads knows the live answers' scenarios by.
const liveWorkload = "live"

// runsFollow says whether the answers that follow their tables are measured: only when asked
// for, as the scenario needs a cluster of its own kind (followConf).
func (o options) runsFollow() bool {
	return o.follow.streams > 0 && o.only != nil && o.only[followWorkload]
}

// runsLive says whether the live answers are measured.
func (o options) runsLive() bool {
	return o.live.streams > 0 && (o.only == nil || o.only[liveWorkload])
}

func parseFlags() (options, error) {
	var o options
	sizes := flag.String("sizes", "100000,1000000", "records of each data set, comma separated (e.g. 10000000 for the large size; the service's timeouts grow with it)")
	flag.IntVar(&o.patientsRSS, "patients-rss", 200_000, "also measure patients on a data set with this many dim_patient rows, for the peak-RSS target (0: skip)")
	conc := flag.String("concurrency", "1,16", "concurrencies (closed-loop workers), comma separated")
	flag.DurationVar(&o.duration, "duration", 2*time.Second, "measured time of each side of each line (requests in flight at its end are awaited)")
	flag.DurationVar(&o.warmup, "warmup", 500*time.Millisecond, "unmeasured time at full concurrency before each side is measured, when its requests are shorter")
	flag.IntVar(&o.rounds, "rounds", 4, "slices each measurement is split into, alternating service, hand-written SQL and captured SQL")
	flag.IntVar(&o.warmMax, "warm-max-records", 1_000_000, "warm lines (answer cache on, the same question repeated) on data sets of at most this many records (0: none)")
	flag.DurationVar(&o.warmDuration, "warm-duration", 2*time.Second, "measured time of each warm line")
	only := flag.String("workloads", "", "only these workloads, comma separated (default: all; \"live\" is the live answers' scenarios)")
	flag.IntVar(&o.live.streams, "live-streams", 1000, "live answers: streams open at once in each scenario (0: no live answers)")
	flag.IntVar(&o.live.questions, "live-questions", 100, "live answers: the questions of the second scenario, the streams spread evenly over them")
	flag.IntVar(&o.live.rounds, "live-rounds", 3, "live answers: changes (INSERT, then NOTIFY) per scenario")
	flag.StringVar(&o.live.docSection, "live-doc-section", "live", "the section -doc replaces with the live answers' results")
	flag.IntVar(&o.follow.streams, "follow-streams", 1000, "answers that follow their tables (-workloads follow): live streams open at once, spread evenly over the questions")
	flag.IntVar(&o.follow.questions, "follow-questions", 100, "follow: distinct live counting questions (1 to 100)")
	flag.IntVar(&o.follow.loads, "follow-loads", 3, "follow: loads (one committed INSERT each) into fact_record")
	flag.IntVar(&o.follow.rows, "follow-rows", 1000, "follow: records per load")
	flag.IntVar(&o.follow.hitRounds, "follow-hit-rounds", 10, "follow: seconds the repeated questions are asked, for each change source with and without a writer in another database")
	flag.DurationVar(&o.follow.timeout, "follow-timeout", 5*time.Minute, "follow: how long every stream's answer is awaited after a load")
	flag.StringVar(&o.follow.docSection, "follow-doc-section", "follow", "the section -doc replaces with the results of -workloads follow")
	flag.Uint64Var(&o.seed, "seed", demodata.DefaultSeed, "demo data seed")
	flag.StringVar(&o.out, "o", "", "also write the results (markdown) to this file")
	flag.StringVar(&o.profile, "profile", "", "write a CPU profile of the service for each line into this folder (builds the service with -tags pprof)")
	flag.StringVar(&o.doc, "doc", "", "replace a results section of this markdown file (see -doc-section)")
	flag.StringVar(&o.docSection, "doc-section", "results", "the section -doc replaces: between <!-- NAME:begin --> and <!-- NAME:end -->")
	flag.Parse()
	var err error
	if o.live.streams < 0 || o.live.questions < 1 || o.live.rounds < 1 {
		return o, fmt.Errorf("-live-streams, -live-questions, -live-rounds: %d, %d, %d", o.live.streams, o.live.questions, o.live.rounds)
	}
	if o.follow.streams < 0 || o.follow.questions < 1 || o.follow.questions > followMaxQs || o.follow.loads < 1 || o.follow.rows < 1 || o.follow.hitRounds < 1 {
		return o, fmt.Errorf("-follow-streams, -follow-questions (at most %d), -follow-loads, -follow-rows, -follow-hit-rounds: %d, %d, %d, %d, %d",
			followMaxQs, o.follow.streams, o.follow.questions, o.follow.loads, o.follow.rows, o.follow.hitRounds)
	}
	if o.sizes, err = intList(*sizes); err != nil {
		return o, fmt.Errorf("-sizes: %w", err)
	}
	if o.conc, err = intList(*conc); err != nil {
		return o, fmt.Errorf("-concurrency: %w", err)
	}
	if *only != "" {
		o.only = map[string]bool{}
		for n := range strings.SplitSeq(*only, ",") {
			if _, ok := workloadByName(n); !ok && n != liveWorkload && n != followWorkload {
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
	// Postmaster is the process ID of the cluster's postmaster, whose processor time (its
	// backends') the cold lines measure.
	Postmaster int
}

func run() error {
	o, err := parseFlags()
	if err != nil {
		return err
	}
	began := time.Now()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

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
	var tags []string
	if o.profile != "" {
		tags = append(tags, "pprof") // pprof.go: a loopback profiling listener
	}
	bin, err := launcher.Build(ctx, tmp, tags...)
	if err != nil {
		return err
	}
	var sets []*dataSet
	var liveSet *dataSet // the smallest data set, where the live answers are measured
	for _, n := range o.sizes {
		s := &dataSet{Records: n, Workloads: selectWorkloads(o)}
		if o.runsLive() && (liveSet == nil || n < liveSet.Records) {
			liveSet = s
		}
		sets = append(sets, s)
	}
	var fSet *dataSet // the largest data set, where the answers that follow their tables are measured
	if o.runsFollow() {
		fSet = followSet(sets)
	}
	sets = slices.DeleteFunc(sets, func(s *dataSet) bool { return len(s.Workloads) == 0 && s != liveSet && s != fSet })
	if o.patientsRSS > 0 && (o.only == nil || o.only["patients"]) {
		// demodata makes one patient per 1.1 records.
		n := int(math.Round(float64(o.patientsRSS) * 1.1))
		p, _ := workloadByName("patients")
		sets = append(sets, &dataSet{Records: n, Workloads: []workload{p}, RSSOnly: true})
	}
	placeCluster(sets)
	progress("starting a PostgreSQL cluster")
	var clusterOpts pgtest.Options
	if fSet != nil {
		clusterOpts.Conf = followConf
	}
	cluster, err := pgtest.Start(clusterOpts)
	if err != nil {
		return fmt.Errorf("start a PostgreSQL cluster: %w", err)
	}
	defer cluster.Destroy()
	for _, s := range sets {
		s.Postmaster = cluster.PostmasterPID()
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
	if env.cpu0, err = sampleCPU(cluster.PostmasterPID()); err != nil {
		return err
	}
	var rows []row
	for _, s := range sets {
		if len(s.Workloads) == 0 {
			continue
		}
		captured, err := capture(ctx, cluster, bin, tmp, s)
		if err != nil {
			return err
		}
		for _, w := range s.Workloads {
			cold := map[int]row{}
			heavy, measured := false, false
			for _, c := range o.conc {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				r, err := measure(ctx, bin, tmp, s, w, c, captured[w.Name], o)
				if err != nil {
					return err
				}
				if !measured {
					// The database's work: the hand-written SQL's median at the first (lowest)
					// concurrency.
					heavy, measured = r.Hand.P50 > 10*time.Millisecond, true
				}
				r.Heavy = heavy
				r.judge()
				rows = append(rows, r)
				cold[c] = r
				progress("%-10s %-22s c=%-3d cold  service %8.1f  hand-written %8.1f  captured %8.1f req/s  ×hand %.2f  ×capt %.2f  RSS %5.1f MB  %s",
					count(s.Records), w.Name, c, r.Svc.RPS(), r.Hand.RPS(), r.Capt.RPS(), r.ratio(), r.ratioCaptured(), mb(r.PeakRSS), r.Verdict)
			}
			if s.RSSOnly || s.Records > o.warmMax {
				continue
			}
			for _, c := range w.Warm {
				// Against the hand-written SQL of the cold line at the same concurrency: none
				// when -concurrency left it out.
				cr, ok := cold[c]
				if !ok || ctx.Err() != nil {
					continue
				}
				r, err := measureWarm(ctx, bin, tmp, s, w, c, cr, captured[w.Name].answer, o)
				if err != nil {
					return err
				}
				r.judge()
				rows = append(rows, r)
				progress("%-10s %-22s c=%-3d warm  service %8.1f  hand-written %8.1f (cold line's)  %s  ×hand %.2f  RSS %5.1f MB  %s",
					count(s.Records), w.Name, c, r.Svc.RPS(), r.Hand.RPS(), r.cacheCell(), r.ratio(), mb(r.PeakRSS), r.Verdict)
			}
		}
	}
	env.Wall = time.Since(began)
	cpu1, err := sampleCPU(cluster.PostmasterPID())
	if err != nil {
		return err
	}
	env.OtherCPU = otherShare(env.cpu0, cpu1)
	var md, liveMD string
	if len(rows) > 0 {
		progress("every measured service response passed its check: %d responses (status 200, the size and ends of the answer compared with the hand-written SQL)", responsesChecked.Load())
		md = render(env, o, sets, rows)
	}
	if liveSet != nil {
		loadBefore := loadAverage()
		progress("live answers on %s records (load average %s)", count(liveSet.Records), loadBefore)
		results, err := measureLive(ctx, cluster, bin, tmp, liveSet, o)
		if err != nil {
			return err
		}
		liveMD = renderLive(time.Now().UTC(), loadBefore, liveSet, o, results)
	}
	var followMD string
	if fSet != nil {
		progress("answers that follow their tables on %s records (load average %s)", count(fSet.Records), loadAverage())
		r, err := measureFollow(ctx, cluster, bin, tmp, fSet, o)
		if err != nil {
			return err
		}
		followMD = renderFollow(r, o)
	}
	all := md
	if liveMD != "" {
		all += "## Live answers (contract 6.11)\n\n" + liveMD
	}
	if followMD != "" {
		all += "## Answers that follow their tables (contract 6.13)\n\n" + followMD
	}
	fmt.Print(all)
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(all), 0o644); err != nil {
			return err
		}
	}
	if o.doc != "" && md != "" {
		if err := replaceSection(o.doc, o.docSection, md); err != nil {
			return err
		}
	}
	if o.doc != "" && liveMD != "" {
		if err := replaceSection(o.doc, o.live.docSection, liveMD); err != nil {
			return err
		}
	}
	if o.doc != "" && followMD != "" {
		if err := replaceSection(o.doc, o.follow.docSection, followMD); err != nil {
			return err
		}
	}
	return nil
}

// loadAverage is the machine's load average over 1, 5 and 15 minutes (/proc/loadavg).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}

func selectWorkloads(o options) []workload {
	var out []workload
	for _, w := range allWorkloads() {
		if o.only == nil || o.only[w.Name] {
			out = append(out, w)
		}
	}
	return out
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// load creates the set's database and fills it with the demo generator's data.
func load(ctx context.Context, c *pgtest.Cluster, s *dataSet, seed uint64) error {
	name := "bench_" + strconv.Itoa(s.Records)
	if err := c.CreateDatabase(ctx, name, false); err != nil {
		return err
	}
	s.DB = dbTarget{Host: c.Host(), Port: c.Port(), Name: name, User: "postgres", Password: c.Password()}
	conn, err := c.Connect(ctx, name)
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
	lo := demodata.LoadOptions{ApplySchema: true, Measures: true} // the measures' time columns and shifts too
	if s.Records >= 2_000_000 {
		lo.Progress = prefixWriter{"          load: "} // minutes: say what it is doing
	}
	if _, err := demodata.Load(ctx, conn, d, lo); err != nil {
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

// capturedWorkload is what capture learnt of a workload: the statements the service ran for it,
// and the print of its answer (answercheck.go), which every measured response must match.
type capturedWorkload struct {
	statements []statement
	answer     *answerPrint
}

// capture sends each workload's request once with statement logging on, compares the answer
// with the one the workload's hand-written SQL gives, and returns, per workload, the statements
// the service ran and the print of the answer compared.
func capture(ctx context.Context, c *pgtest.Cluster, bin, tmp string, s *dataSet) (map[string]capturedWorkload, error) {
	db := pgx.Identifier{s.DB.Name}.Sanitize()
	if err := c.Exec(ctx, "postgres", "ALTER DATABASE "+db+" SET log_statement = 'all'"); err != nil {
		return nil, err
	}
	defer c.Exec(context.WithoutCancel(ctx), "postgres", "ALTER DATABASE "+db+" RESET log_statement") //nolint:errcheck
	svc, err := startService(ctx, bin, tmp, s.DB, s.Records, false, false)
	if err != nil {
		return nil, err
	}
	defer svc.stop()
	watcher, err := newLogWatcher(filepath.Join(c.Dir(), "postgres.log"))
	if err != nil {
		return nil, err
	}
	out := map[string]capturedWorkload{}
	for _, w := range s.Workloads {
		t0 := time.Now()
		answer, err := checkAnswer(ctx, svc, s.DB, w)
		if err != nil {
			return nil, fmt.Errorf("%s records: %w", count(s.Records), err)
		}
		progress("%-10s %-22s the service's answer is the hand-written SQL's (checked in %.1fs, %d bytes)", count(s.Records), w.Name, time.Since(t0).Seconds(), answer.size)
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
			// The message that carried the export's COPY, whole, for CopyTo: the service sends
			// its settings with it (SET LOCAL statement_timeout = LIMITS__EXPORT_TIMEOUT; ...
			// COPY ...), and without them the captured pool's session statement_timeout, the
			// shorter LIMITS__STATEMENT_TIMEOUT, would cancel a long export.
			var copyStmt string
			for _, st := range sts {
				if strings.Contains(st.SQL, "COPY (") && st.Simple {
					copyStmt = st.SQL
				}
			}
			if copyStmt == "" {
				return nil, fmt.Errorf("export: expected a COPY statement, captured %+v", sts)
			}
			sts = []statement{{SQL: copyStmt, Simple: true}}
		}
		out[w.Name] = capturedWorkload{statements: sts, answer: answer}
	}
	return out, nil
}

// checkAnswer sends the workload's request and compares the answer, as it streams in, with the
// hand-written SQL's; it returns the answer's print, to check the measured responses by.
func checkAnswer(ctx context.Context, svc *service, db dbTarget, w workload) (*answerPrint, error) {
	resp, err := svc.open(ctx, w)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	answer := &answerPrint{}
	body := io.TeeReader(resp.Body, answer)
	if w.isExport() {
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/csv") {
			return nil, fmt.Errorf("export: content type %q", ct)
		}
		err = compareCSV(ctx, db, w, body)
	} else {
		err = compareJSON(ctx, db, w, body)
	}
	if err != nil {
		return nil, err
	}
	// What the comparison's decoder left unread (white space after the JSON) is the answer's too.
	if _, err := io.Copy(io.Discard, body); err != nil {
		return nil, fmt.Errorf("%s: read the answer: %w", w.Name, err)
	}
	return answer, nil
}

// placeCluster keeps the cluster on the RAM disk pgtest prefers only while the data sets fit it
// with room to spare (the 10,000,000-record size takes some 3 GB and WAL); otherwise it puts the
// cluster in the temporary folder, where the kernel's page cache keeps the data in memory
// anyway. PGTEST_TMPDIR, when set, decides.
func placeCluster(sets []*dataSet) {
	if os.Getenv("PGTEST_TMPDIR") != "" {
		return
	}
	var records int64
	for _, s := range sets {
		records += int64(s.Records)
	}
	// Measured: 303 MB for 1,000,000 records with their indexes; WAL up to max_wal_size and more
	// during the load's one transaction.
	need := records*350 + 2<<30
	var fs syscall.Statfs_t
	if syscall.Statfs("/dev/shm", &fs) != nil {
		return
	}
	avail, err := procstat.MemInfo("MemAvailable:")
	if err != nil {
		return
	}
	room := min(int64(fs.Bavail)*fs.Bsize, avail/2)
	if need > room {
		progress("the data (about %.1f GB) would take more than half the free memory on the RAM disk: the cluster goes to %s", float64(need)/(1<<30), os.TempDir())
		os.Setenv("PGTEST_TMPDIR", os.TempDir())
	}
}

// prefixWriter writes demodata's progress lines to standard error, each with a prefix.
type prefixWriter struct{ prefix string }

func (p prefixWriter) Write(b []byte) (int, error) {
	for line := range strings.SplitSeq(strings.TrimRight(string(b), "\n"), "\n") {
		fmt.Fprintln(os.Stderr, p.prefix+line)
	}
	return len(b), nil
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
