package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/internal/procstat"
)

// row is one measurement: a workload at one concurrency on one data set.
type row struct {
	Set     *dataSet
	W       workload
	Conc    int
	Svc     measurement
	SvcCPU  time.Duration // the service process's CPU time during the measured part
	PeakRSS int64         // the service's peak resident memory (warm-up and measurement)
	Hand    measurement   // the hand-written SQL (the primary baseline)
	Capt    measurement   // the captured SQL (the second baseline)
	Floor   *measurement  // the bare server (floor.go), on the light lines at concurrency 1
	// FloorCPU is the bare server's CPU time while it was measured.
	FloorCPU time.Duration
	// FloorRatios are the service's rate over the bare server's, one per round of slices.
	FloorRatios []float64
	Heavy       bool // the database works over 10 ms (hand-written median at the lowest concurrency)
	// Warm marks a warm line: the answer cache on, the same question repeated; Hand is then the
	// cold line's and Capt is not measured. Cache counts the service's Cache-Status headers.
	Warm  bool
	Cache *cacheTally

	Target  string
	Verdict string // "met", "MISSED" or ""

	// SvcDB and SvcDriver are the database's and the load driver's processor time while the
	// service side was measured, HandDB and HandDriver while the hand-written side was (cold
	// lines).
	SvcDB, SvcDriver, HandDB, HandDriver time.Duration
}

func ratio(a, b measurement) float64 {
	if b.RPS() == 0 {
		return 0
	}
	return a.RPS() / b.RPS()
}

// ratio is the service's throughput over the hand-written SQL's: what the targets are about.
func (r row) ratio() float64 { return ratio(r.Svc, r.Hand) }

// ratioCaptured is the service's throughput over its own SQL's: the service's own overhead. The
// two ratios together separate it from the quality of the service's SQL.
func (r row) ratioCaptured() float64 { return ratio(r.Svc, r.Capt) }

// The targets with the cache off, judged in the benchmark, never as timed tests (a ratio of two
// sides of one run holds on a busy machine, a time does not); every ratio is against the
// hand-written SQL.
const (
	heavyRatio   = 0.9 // database work over 10 ms: service throughput / hand-written SQL, any concurrency
	lightRatio   = 0.5 // records_count of one station, station_resources, resources, at concurrency 1
	lightConc    = 1
	exportRatio  = 0.8 // export / the hand-written COPY on a kept session
	exportRSS    = 100 << 20
	patientsRSS  = 150 << 20 // patients with 200,000 rows
	patientsRows = 200_000

	// Cache on, the same question repeated: the heavy dashboard questions at least 10 times the
	// hand-written SQL's throughput, the light ones at least 1 (faster than the database itself),
	// the service's peak RSS within CACHE__MAX_BYTES + 60 MB. Heavy as for the cold targets: where
	// the database works over 10 ms (distinct_values of a month is light at 100,000 records).
	warmHeavyRatio = 10
	warmLightRatio = 1
	warmRSS        = cacheMaxBytes + 60<<20
)

// judge sets the row's target and whether it was met.
func (r *row) judge() {
	ratio := r.ratio()
	ok := func(b bool) string {
		if b {
			return "met"
		}
		return "MISSED"
	}
	switch {
	case r.Svc.Errors > 0 || r.Hand.Errors > 0 || r.Capt.Errors > 0 || (r.Floor != nil && r.Floor.Errors > 0):
		r.Target, r.Verdict = "no errors", "ERRORS"
	case r.Warm:
		want := float64(warmLightRatio)
		if r.Heavy {
			want = warmHeavyRatio
		}
		r.Target = fmt.Sprintf("≥ %.0f, RSS ≤ %d MB", want, warmRSS>>20)
		if r.Cache.headerless() {
			r.Verdict = "no cache in this build"
			return
		}
		r.Verdict = ok(ratio >= want && r.PeakRSS <= warmRSS)
	case r.W.isExport():
		r.Target = fmt.Sprintf("≥ %.2f, RSS < %d MB", exportRatio, exportRSS>>20)
		r.Verdict = ok(ratio >= exportRatio && r.PeakRSS < exportRSS)
	case r.Set.RSSOnly:
		r.Target = fmt.Sprintf("RSS < %d MB", patientsRSS>>20)
		r.Verdict = ok(r.PeakRSS < patientsRSS)
	case r.Heavy:
		r.Target = fmt.Sprintf("≥ %.2f", heavyRatio)
		r.Verdict = ok(ratio >= heavyRatio)
	case r.W.Light && r.Conc == lightConc:
		r.Target = fmt.Sprintf("≥ %.2f", lightRatio)
		r.Verdict = ok(ratio >= lightRatio)
	}
}

// cacheCell says what the answer cache did in the line: off (cold), or the share of the
// measured responses that came from memory (warm).
func (r row) cacheCell() string {
	t := r.Cache
	switch {
	case t == nil || t.total() == 0:
		if r.Warm {
			return "on"
		}
		return "off"
	case !r.Warm && t.hit.Load() == 0:
		return "off"
	case !r.Warm:
		return fmt.Sprintf("off, yet %s hits", percent(t.hitShare()))
	case t.headerless():
		return "on, no Cache-Status"
	default:
		return fmt.Sprintf("on, %s hits", percent(t.hitShare()))
	}
}

// percent writes a share as a percentage, never rounding a share below 1 up to 100%.
func percent(f float64) string {
	v := math.Floor(f*1000) / 10
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f%%", v)
	}
	return fmt.Sprintf("%.1f%%", v)
}

// environment describes where and how the run happened.
type environment struct {
	Date     time.Time
	CPU      string
	Cores    int
	MemGiB   float64
	Kernel   string
	Go       string
	Postgres string
	Settings string
	Wall     time.Duration
	// OtherCPU is the share of the machine's processor time that processes other than the
	// benchmark's (this program and its children, the service, the cluster) used while it
	// measured: other work on the machine, which the alternating slices spread over both sides.
	OtherCPU float64
	cpu0     cpuSample
}

// cpuSample is the machine's busy time and this run's own, in clock ticks.
type cpuSample struct{ total, busy, own int64 }

// sampleCPU reads the machine's processor time and that of this process (with its waited-for
// children: the services it stopped) and of the cluster's postmaster (with its backends, those
// that ended and those still running).
func sampleCPU(postmaster int) (cpuSample, error) {
	m, err := procstat.ReadMachine()
	if err != nil {
		return cpuSample{}, err
	}
	s := cpuSample{total: m.Total, busy: m.Busy}
	self, err := procstat.Self()
	if err != nil {
		return s, err
	}
	s.own = self.UTime + self.STime + self.CUTime + self.CSTime
	db, err := clusterTicks(postmaster)
	s.own += db
	return s, err
}

// clusterTicks is the processor time, in clock ticks, of the cluster whose postmaster is
// postmaster: its own, its backends' and workers' that still run, and those of the ones that
// ended (which the postmaster waited for). 0 without a postmaster.
func clusterTicks(postmaster int) (int64, error) {
	if postmaster <= 0 {
		return 0, nil
	}
	procs, err := procstat.Processes()
	if err != nil {
		return 0, err
	}
	var t int64
	for _, p := range procs {
		switch {
		case p.PID == postmaster:
			t += p.UTime + p.STime + p.CUTime + p.CSTime
		case p.PPID == postmaster:
			t += p.UTime + p.STime
		}
	}
	return t, nil
}

// otherShare is the share of all processor time that others used between a and b.
func otherShare(a, b cpuSample) float64 {
	if b.total <= a.total {
		return 0
	}
	return max(0, float64((b.busy-a.busy)-(b.own-a.own))/float64(b.total-a.total))
}

func machine(ctx context.Context, c *pgtest.Cluster) (environment, error) {
	e := environment{Date: time.Now().UTC(), Cores: runtime.NumCPU(), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				e.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		e.Kernel = "Linux " + strings.TrimSpace(string(b))
	}
	total, err := procstat.MemInfo("MemTotal:")
	if err != nil {
		return e, err
	}
	e.MemGiB = float64(total) / (1 << 30)
	cfg, err := c.ConnConfig("postgres")
	if err != nil {
		return e, err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return e, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var sb, wm, par string
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('shared_buffers'),
		current_setting('work_mem'), current_setting('max_parallel_workers_per_gather')`).Scan(&e.Postgres, &sb, &wm, &par); err != nil {
		return e, err
	}
	e.Settings = fmt.Sprintf("shared_buffers %s, work_mem %s, max_parallel_workers_per_gather %s, fsync off", sb, wm, par)
	return e, nil
}

// render writes the results as markdown.
func render(e environment, o options, sets []*dataSet, rows []row) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("Run of %s UTC, `make bench` wall time %s.\n\n", e.Date.Format("2006-01-02 15:04"), e.Wall.Round(time.Second))
	p("Machine: %s, %d cores, %.0f GiB memory, %s; %s; PostgreSQL %s (throwaway cluster: %s). "+
		"The service, the database and the load driver share the machine; other processes used %.0f%% of its processor time while the benchmark measured.\n\n",
		e.CPU, e.Cores, e.MemGiB, e.Kernel, e.Go, e.Postgres, e.Settings, 100*e.OtherCPU)
	p("Each cold line (cache **off**: `CACHE__ENABLED=false`): closed loop with c workers; each side warmed up (one request, then %s at c workers when a request is shorter), then measured for %s, "+
		"in %d to %d slices alternating service, hand-written SQL and captured SQL (requests in flight at a slice's end awaited); the service is restarted for each line. "+
		"Each warm line (cache **on**, `CACHE__MAX_BYTES` %d MiB, on data sets of at most %s records): the service restarted, the question sent until an answer comes from memory and that answer checked against the hand-written SQL, "+
		"%s at c workers unmeasured, then the service alone measured for %s; its hand-written figures are the cold line's above it (same workload and c); "+
		"the Cache column gives the share of the measured responses that were hits (`Cache-Status: emsquery; hit`); a build without the cache (no `Cache-Status` header) is measured but not judged. "+
		"**Hand-written**: the SQL a DBA would type for the same question, values in the text, simple protocol, every row read (the export: `COPY (that SELECT) TO STDOUT` on a kept session); "+
		"checked before measuring to give the service's answer. **Captured**: the statements and parameters the service sent, through a pgx pool configured as the service's "+
		"(the export: the service's COPY on a kept session). **×hand** = service req/s ÷ hand-written req/s (the targets' ratio); **×capt** = service req/s ÷ captured req/s. "+
		"CPU/req: the service process's CPU time per request.\n\n", o.warmup, o.duration, min(o.rounds, minRounds), o.rounds, cacheMaxBytes>>20, count(o.warmMax), o.warmup, o.warmDuration)
	var explainedFloor, explainedTimes bool
	for _, s := range sets {
		if s.RSSOnly {
			p("### patients with %s rows (%s records)\n\n", count(int(s.Patients)), count(s.Records))
		} else {
			p("### %s records (%s patients)\n\n", count(s.Records), count(int(s.Patients)))
		}
		p("| Workload | c | Cache | Service req/s | p50 ms | p99 ms | Hand-written req/s | p50 ms | p99 ms | Captured req/s | p50 ms | ×hand | ×capt | CPU/req ms | Peak RSS MB | Target | |\n")
		p("|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|---|\n")
		for _, r := range rows {
			if r.Set != s {
				continue
			}
			cpu := 0.0
			if r.Svc.Requests > 0 {
				cpu = float64(r.SvcCPU.Microseconds()) / 1000 / float64(r.Svc.Requests)
			}
			capt, captP50, xcapt := "—", "—", "—"
			if !r.Warm {
				capt, captP50, xcapt = rps(r.Capt.RPS()), ms(r.Capt.P50), fmt.Sprintf("%.2f", r.ratioCaptured())
			}
			p("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.2f | %.0f | %s | %s |\n",
				r.W.Name, r.Conc, r.cacheCell(), rps(r.Svc.RPS()), ms(r.Svc.P50), ms(r.Svc.P99), rps(r.Hand.RPS()), ms(r.Hand.P50), ms(r.Hand.P99),
				capt, captP50, ratioCell(r.ratio()), xcapt, cpu, mb(r.PeakRSS), dash(r.Target), verdict(r.Verdict))
			sides := []measurement{r.Svc, r.Hand, r.Capt}
			if r.Floor != nil {
				sides = append(sides, *r.Floor)
			}
			for i, m := range sides {
				if m.Errors > 0 && (i == 0 || !r.Warm) {
					p("| | | | %s: %d errors: %s | | | | | | | | | | | | | |\n", []string{"service", "hand-written", "captured", "bare server"}[i], m.Errors,
						strings.ReplaceAll(fmt.Sprint(m.FirstErr), "|", "/"))
				}
			}
		}
		p("\n")
		// Each table's columns are explained under the first data set that has it.
		explainedFloor = renderFloor(p, s, rows, !explainedFloor) || explainedFloor
		explainedTimes = renderTimes(p, s, rows, !explainedTimes) || explainedTimes
	}
	return b.String()
}

// lightFloorTarget is the light path's target: the service at concurrency 1 at this share of the
// bare server's rate, as the median of the rounds.
const lightFloorTarget = 0.9

// median is the middle of xs (the mean of the two middle ones when even), 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// perRequestMicros is cpu per request of m, in µs.
func perRequestMicros(cpu time.Duration, m measurement) string {
	if m.Requests == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f", float64(cpu.Microseconds())/float64(m.Requests))
}

// renderFloor writes the light lines' bare server (floor.go) of data set s, after its table,
// with what its columns mean when explain; it says whether it wrote the table.
func renderFloor(p func(string, ...any), s *dataSet, rows []row, explain bool) bool {
	head := false
	for _, r := range rows {
		if r.Set != s || r.Floor == nil {
			continue
		}
		if !head && explain {
			p("The light lines at c=%d against **a bare server** (`bench/run/floor.go`: fasthttp and a pgx pool configured as the service's, "+
				"running the captured SQL under its own context and writing the rows' bytes, no GraphQL, JSON, key, log or metrics), measured as a fourth side of the same rounds "+
				"(at least %d, its slice next to the service's, before it in every other round, each slice after %v of the same requests unmeasured): "+
				"its ×hand is the most any HTTP service in front of this database scores on this machine.\n\n", lightConc, floorRounds, sliceWarmUp)
			p("**Service ÷ bare, median** is the median over the rounds of the service's rate ÷ the bare server's in the same round "+
				"(their slices back to back); the light path's target is ≥ %.2f.\n\n", lightFloorTarget)
			p("**CPU/req µs**: each process's own processor time per request, service and bare server; their difference is " +
				"what the service adds to every request's path on a machine with a processor to spare.\n\n")
		}
		if !head {
			p("| Workload | Hand-written req/s | Bare server req/s | p50 ms | Bare ×hand | Service ×hand | Service ÷ bare | Service ÷ bare, median (rounds) | CPU/req µs, service / bare | Target |\n")
			p("|---|--:|--:|--:|--:|--:|--:|--:|--:|---|\n")
			head = true
		}
		med := median(r.FloorRatios)
		verdict := "missed"
		if med >= lightFloorTarget {
			verdict = "met"
		}
		p("| %s | %s | %s | %s | %.2f | %.2f | %.2f | %.2f (%d) | %s / %s | %s |\n", r.W.Name, rps(r.Hand.RPS()), rps(r.Floor.RPS()), ms(r.Floor.P50),
			ratio(*r.Floor, r.Hand), r.ratio(), ratio(r.Svc, *r.Floor), med, len(r.FloorRatios),
			perRequestMicros(r.SvcCPU, r.Svc), perRequestMicros(r.FloorCPU, *r.Floor), verdict)
	}
	if head {
		p("\n")
	}
	return head
}

// renderTimes writes, for the cold lines at concurrency 16 of data set s, after its table,
// the processor time each request cost the three processes that share the machine: on such a
// line the machine is busy, so a side's throughput is the machine's time divided by what one of
// its requests costs them all, and the ratio of the two sums is about the line's ×hand. It
// tells which part of the gap the service could close: only its own column differs in kind.
// It explains the columns when explain, and says whether it wrote the table.
func renderTimes(p func(string, ...any), s *dataSet, rows []row, explain bool) bool {
	head := false
	for _, r := range rows {
		if r.Set != s || r.Warm || r.Conc <= lightConc || r.Svc.Requests == 0 || r.Hand.Requests == 0 {
			continue
		}
		if !head && explain {
			p("Processor time per request on the cold lines at c=16, in ms: the service process's; the database cluster's (every backend) and the load driver's (`bench/run`, which reads every answer) " +
				"while the service was measured; the same two while the hand-written SQL was. **Sums' ratio** = the hand-written side's sum ÷ the service side's: " +
				"what ×hand comes to when the two cores are busy, so what the database's and the driver's shares leave the service.\n\n")
		}
		if !head {
			p("| Workload | Service | Database | Load driver | Service side | Database | Load driver | Hand-written side | Sums' ratio | ×hand |\n")
			p("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
			head = true
		}
		per := func(d time.Duration, m measurement) float64 {
			return float64(d.Microseconds()) / 1000 / float64(m.Requests)
		}
		svc, sdb, sdrv := per(r.SvcCPU, r.Svc), per(r.SvcDB, r.Svc), per(r.SvcDriver, r.Svc)
		hdb, hdrv := per(r.HandDB, r.Hand), per(r.HandDriver, r.Hand)
		sum, hsum := svc+sdb+sdrv, hdb+hdrv
		p("| %s | %s | %s | %s | %s | %s | %s | %s | %.2f | %.2f |\n", r.W.Name, rps(svc), rps(sdb), rps(sdrv), rps(sum),
			rps(hdb), rps(hdrv), rps(hsum), hsum/sum, r.ratio())
	}
	if head {
		p("\n")
	}
	return head
}

// ratioCell writes a ratio with two decimals, without decimals from 100 up (warm lines).
func ratioCell(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// rps writes a rate (or processor milliseconds) with no decimals from 100 up, one from 10 up,
// two below.
func rps(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func ms(d time.Duration) string {
	v := float64(d.Microseconds()) / 1000
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func dash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func verdict(v string) string {
	if v == "MISSED" || v == "ERRORS" {
		return "**" + v + "**"
	}
	return v
}

// replaceSection puts md between the markers <!-- name:begin --> and <!-- name:end --> of the
// file at path, each a line of its own: the page's prose names the markers too.
func replaceSection(path, name, md string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	begin, end := "<!-- "+name+":begin -->", "<!-- "+name+":end -->"
	i, j := markerLine(s, begin), markerLine(s, end)
	if i < 0 || j < i {
		return fmt.Errorf("%s: no %s ... %s section (each marker a line of its own)", path, begin, end)
	}
	s = s[:i+len(begin)] + "\n" + md + s[j:]
	return os.WriteFile(path, []byte(s), 0o644)
}

// markerLine is the offset in s of the first line that is marker alone, -1 if none.
func markerLine(s, marker string) int {
	for at := 0; at < len(s); {
		line, _, _ := strings.Cut(s[at:], "\n")
		if line == marker {
			return at
		}
		at += len(line) + 1
	}
	return -1
}
