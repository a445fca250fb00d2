package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/emsanalytics/emsquery/internal/procstat"
	"github.com/emsanalytics/emsquery/platform/database"
)

// open sends the workload's request once and returns the response, to be read by the caller;
// a status other than 200 is an error.
func (s *service) open(ctx context.Context, w workload) (*http.Response, error) {
	req, err := s.newRequest(ctx, w)
	if err != nil {
		return nil, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1000))
		resp.Body.Close()
		return nil, fmt.Errorf("%s: %s: %.300s", w.Name, resp.Status, b)
	}
	return resp, nil
}

func (s *service) newRequest(ctx context.Context, w workload) (*http.Request, error) {
	var req *http.Request
	var err error
	if w.isExport() {
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, s.url+exportPath+"?"+w.Export, nil)
		if err == nil {
			req.Header.Set("SERVICE-X-API-KEY", s.key)
		}
	} else {
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, s.url+w.Path, bytes.NewReader(w.body()))
		if err == nil {
			req.Header.Set("Content-Type", "application/json")
		}
	}
	if err != nil {
		return nil, err
	}
	req.Header.Set("x-api-key", s.key)
	return req, nil
}

// serviceRequest is the service side of a measurement: the workload's HTTP request, sent by the
// lean client (httpclient.go) on the worker's keep-alive connection, the response read to the
// end and checked against want, the answer that was compared with the hand-written SQL (status
// 200, the same size and ends: answercheck.go), and its Cache-Status counted in tally. A
// response that fails its check is a failed request, which fails the run (measure).
func (s *service) serviceRequest(w workload, want *answerPrint, tally *cacheTally) request {
	var req rawRequest
	if w.isExport() {
		req = newRawRequest(s.host, http.MethodGet, exportPath+"?"+w.Export, nil,
			"SERVICE-X-API-KEY", s.key, "x-api-key", s.key)
	} else {
		req = newRawRequest(s.host, http.MethodPost, w.Path, w.body(),
			"Content-Type", "application/json", "x-api-key", s.key)
	}
	return func(ctx context.Context, worker int) (int64, error) {
		got := &answerPrint{}
		resp, n, err := s.rc.do(ctx, worker, req, got)
		if err != nil {
			return n, err
		}
		if resp.status != http.StatusOK {
			return 0, fmt.Errorf("%d %s: %.300s", resp.status, http.StatusText(resp.status), resp.errBody)
		}
		if err := want.differs(got); err != nil {
			return 0, err
		}
		if !w.isExport() {
			tally.noteValue(resp.cacheStatus, resp.hasCache)
		}
		return n, nil
	}
}

// pgxRequest is the captured baseline of a GraphQL workload: the statements the service sent, in
// order on one connection of a pool configured as the service's, every row read (its raw bytes,
// as the service's driver receives them).
func pgxRequest(pool *pgxpool.Pool, sts []statement) request {
	args := statementArgs(sts)
	return func(ctx context.Context, _ int) (int64, error) {
		return runStatements(ctx, pool, sts, args, func([]byte) {})
	}
}

// statementArgs are the arguments of each of sts, as runStatements passes them.
func statementArgs(sts []statement) [][]any {
	args := make([][]any, len(sts))
	for i, st := range sts {
		args[i] = st.args()
		if st.Prepared {
			// Prepared as the service prepares it: once per connection, under a name.
			args[i] = append([]any{pgx.QueryExecModeCacheStatement}, args[i]...)
		}
	}
	return args
}

// runStatements runs sts with args (statementArgs) in order on one connection of pool and hands
// every value of every row to emit, as the driver received it; it returns the bytes handed on.
func runStatements(ctx context.Context, pool *pgxpool.Pool, sts []statement, args [][]any, emit func([]byte)) (int64, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	var n int64
	for i, st := range sts {
		if st.Simple {
			res, err := conn.Conn().PgConn().Exec(ctx, st.SQL).ReadAll()
			if err != nil {
				return n, err
			}
			for _, r := range res {
				for _, row := range r.Rows {
					for _, v := range row {
						n += int64(len(v))
						emit(v)
					}
				}
			}
			continue
		}
		rows, err := conn.Query(ctx, st.SQL, args[i]...)
		if err != nil {
			return n, err
		}
		for rows.Next() {
			for _, v := range rows.RawValues() {
				n += int64(len(v))
				emit(v)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return n, err
		}
	}
	return n, nil
}

// copyRequest is a baseline of the export: the COPY ... TO STDOUT statement on a connection of
// pool, kept from request to request as the service keeps its own (pgconn's CopyTo, which the
// service's DB.CopyTo runs too), its CSV counted. Not psql's \copy: a new process and a new
// session for every request, which the service does not pay, would make the export's ratio look
// better than it is: 100 to 112 ms a request in TestPsqlCost on a busy machine, against half a
// millisecond for the same COPY on a kept session.
func copyRequest(pool *pgxpool.Pool, copySQL string) request {
	return func(ctx context.Context, _ int) (int64, error) {
		conn, err := pool.Acquire(ctx)
		if err != nil {
			return 0, err
		}
		defer conn.Release()
		var n byteCount
		_, err = conn.Conn().PgConn().CopyTo(ctx, &n, copySQL)
		return int64(n), err
	}
}

// byteCount counts what is written to it.
type byteCount int64

func (c *byteCount) Write(p []byte) (int, error) {
	*c += byteCount(len(p))
	return len(p), nil
}

// capturedPool is the pool of the captured baseline: the service's own pool configuration
// (platform/database.PoolConfig: session settings, statement mode), with conns connections, all
// opened before measuring as the service's pool opens its own at start. Whatever the service's
// pool does to its statements (prepared statements, exec mode, plan settings) the captured
// baseline does too: it measures the service's SQL as the service runs it.
func capturedPool(ctx context.Context, db dbTarget, conns, records int) (*pgxpool.Pool, error) {
	// The shipped defaults of the settings that reach the pool's configuration (a zero
	// POOL_RECYCLE would make every connection expire at once), with the timeouts the service
	// runs with on this many records (scaledTimeouts): sixteen heavy statements at once on
	// 10,000,000 records outlast the shipped 30 s.
	f := timeoutFactor(records)
	pc, err := database.PoolConfig(database.Options{
		Hosts: []string{db.Host}, Ports: []int{db.Port}, Name: db.Name, Username: db.User,
		Password: db.Password, Schema: "public", Encrypt: false,
		PoolSize: 10, MaxOverflow: 20, PoolTimeout: poolTimeout * f, PoolRecycle: 1800 * time.Second,
	}, database.Timeouts{StatementTimeout: statementTimeout * f})
	if err != nil {
		return nil, err
	}
	pc.ConnConfig.RuntimeParams["application_name"] = "bench-captured"
	return openPool(ctx, pc, conns)
}

// handPool is the pool of the hand-written baseline: plain sessions, as psql opens them.
func handPool(ctx context.Context, db dbTarget, conns int) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig("")
	if err != nil {
		return nil, err
	}
	cc := pc.ConnConfig
	cc.Host, cc.Port, cc.Database, cc.User, cc.Password = db.Host, uint16(db.Port), db.Name, db.User, db.Password
	cc.TLSConfig, cc.Fallbacks = nil, nil
	cc.RuntimeParams = map[string]string{"application_name": "bench-hand"}
	return openPool(ctx, pc, conns)
}

func openPool(ctx context.Context, pc *pgxpool.Config, conns int) (*pgxpool.Pool, error) {
	pc.MaxConns, pc.MinConns = int32(conns), int32(conns)
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, err
	}
	held := make([]*pgxpool.Conn, 0, conns)
	for range conns {
		c, err := pool.Acquire(ctx)
		if err != nil {
			pool.Close()
			return nil, err
		}
		held = append(held, c)
	}
	for _, c := range held {
		c.Release()
	}
	return pool, nil
}

// side is one of the three measured in a line.
type side struct {
	do  request
	m   measurement
	cpu time.Duration // the process's CPU time while this side ran (service and bare server only)
	pid int           // that process (0: none of this program's to measure)
	// db and driver are the cluster's and this program's (the load driver's) processor time
	// while this side ran.
	db, driver time.Duration
}

// warmUp runs one request, which also tells how long one takes, then, when requests are short,
// the full concurrency for the warm-up time. A long request warms up what a short loop would
// (the data in the caches, the connections' statements) and is measured for seconds anyway;
// waiting for a whole round of them at concurrency 16 would only make the run longer. It returns
// the median request time it saw (at the concurrency, when it ran it).
func warmUp(ctx context.Context, name string, conc int, d time.Duration, do request) (time.Duration, error) {
	t0 := time.Now()
	if _, err := do(ctx, 0); err != nil {
		return 0, fmt.Errorf("%s: %v", name, err)
	}
	first := time.Since(t0)
	if first >= d {
		return first, nil
	}
	m := closedLoop(ctx, conc, d, do)
	if m.Errors > 0 {
		return 0, fmt.Errorf("%s: %v", name, m.FirstErr)
	}
	return max(first, m.P50), nil
}

// measure runs one workload at one concurrency, cold: the service with its answer cache off
// (started afresh, so that its peak RSS belongs to this workload), the hand-written SQL and the
// captured SQL, each warmed up, then measured in alternating slices (service, hand-written,
// captured, service, ...) so that anything else the machine does while they run weighs on all
// three alike.
func measure(ctx context.Context, bin, tmp string, s *dataSet, w workload, conc int, cw capturedWorkload, o options) (row, error) {
	r := row{Set: s, W: w, Conc: conc, Cache: &cacheTally{}}
	svc, err := startService(ctx, bin, tmp, s.DB, s.Records, false, o.profile != "")
	if err != nil {
		return r, err
	}
	defer svc.stop()
	pid := svc.pid()
	sampler := procstat.SampleRSS(pid, rssInterval)

	hp, err := handPool(ctx, s.DB, conc)
	if err != nil {
		return r, err
	}
	defer hp.Close()
	cp, err := capturedPool(ctx, s.DB, conc, s.Records)
	if err != nil {
		return r, err
	}
	defer cp.Close()
	hand, captured := handRequest(hp, w.Hand.SQL), pgxRequest(cp, cw.statements)
	if w.isExport() {
		hand, captured = copyRequest(hp, handCopy(w.Hand.SQL)), copyRequest(cp, cw.statements[0].SQL)
	}
	sides := []*side{{do: svc.serviceRequest(w, cw.answer, r.Cache), pid: pid}, {do: hand}, {do: captured}}
	names := []string{"service", "hand-written SQL", "captured SQL"}
	if w.Light && conc == lightConc && !w.isExport() {
		// The light target's line also measures the bare server (floor.go), whose answer is
		// the captured SQL's bytes.
		size, err := captured(ctx, 0)
		if err != nil {
			return r, fmt.Errorf("%s: captured SQL: %w", w.Name, err)
		}
		fl, err := startFloor(ctx, tmp, s.DB, cw.statements, conc)
		if err != nil {
			return r, err
		}
		defer fl.stop()
		sides, names = append(sides, &side{do: fl.request(size), pid: fl.proc.PID()}), append(names, "bare server")
	}
	// Slices of at least four requests' time each: a long request would otherwise stretch every
	// slice (requests in flight at a slice's end are awaited).
	longest := time.Duration(0)
	for i, sd := range sides {
		l, err := warmUp(ctx, fmt.Sprintf("%s c=%d %s warm-up", w.Name, conc, names[i]), conc, o.warmup, sd.do)
		if err != nil {
			return r, err
		}
		longest = max(longest, l)
	}
	// Yet at least minRounds slices per side (-rounds permitting), however long a request: a
	// side measured in a single slice weighs whatever else the machine did then on that side
	// alone, which moved the heavy lines at c=16 by a tenth from run to run (2026-11-26).
	rounds := o.rounds
	if longest > 0 {
		rounds = max(min(o.rounds, minRounds), min(rounds, int(o.duration/(4*longest))))
	}
	if len(sides) > 3 {
		rounds = max(rounds, floorRounds)
	}
	slice := o.duration / time.Duration(rounds)
	// The service's rate over the bare server's within each round, whose two slices run back to
	// back, first one then the other: the light path's figure is their median, which a burst of
	// other work on the shared machine moves less than it moves the two sums.
	var floorRatios []float64
	for i := range rounds {
		var svcRPS, floorRPS float64
		for _, j := range sliceOrder(len(sides), i) {
			sd := sides[j]
			if len(sides) > 3 {
				// A process idle through the other sides' slices starts its own cold (caches,
				// the runtime's idle threads), and more so the larger one: on slices this short
				// that start would weigh on the service's figure, not its cost per request.
				closedLoop(ctx, conc, sliceWarmUp, sd.do)
			}
			var profiled chan error
			if j == 0 && o.profile != "" && i == 0 {
				profiled = make(chan error, 1)
				path := filepath.Join(o.profile, fmt.Sprintf("%d-%s-c%d.cpu.pprof", s.Records, w.Name, conc))
				go func() { profiled <- svc.cpuProfile(slice, path) }()
			}
			var cpu0 time.Duration
			if sd.pid != 0 {
				if cpu0, err = procstat.CPUTime(sd.pid); err != nil {
					return r, err
				}
			}
			others0, err := otherTimes(s.Postmaster)
			if err != nil {
				return r, err
			}
			m := closedLoop(ctx, conc, slice, sd.do)
			if sd.pid != 0 {
				cpu1, err := procstat.CPUTime(sd.pid)
				if err != nil {
					return r, err
				}
				sd.cpu += cpu1 - cpu0
			}
			others1, err := otherTimes(s.Postmaster)
			if err != nil {
				return r, err
			}
			sd.db += others1.db - others0.db
			sd.driver += others1.driver - others0.driver
			if profiled != nil {
				if err := <-profiled; err != nil {
					return r, err
				}
			}
			switch j {
			case 0:
				svcRPS = m.RPS()
			case 3:
				floorRPS = m.RPS()
			}
			if i == 0 {
				sd.m = m
			} else {
				sd.m = sd.m.merge(m)
			}
			if ctx.Err() != nil {
				return r, ctx.Err()
			}
		}
		if floorRPS > 0 {
			floorRatios = append(floorRatios, svcRPS/floorRPS)
		}
	}
	r.Svc, r.Hand, r.Capt, r.SvcCPU = sides[0].m, sides[1].m, sides[2].m, sides[0].cpu
	r.SvcDB, r.SvcDriver, r.HandDB, r.HandDriver = sides[0].db, sides[0].driver, sides[1].db, sides[1].driver
	if len(sides) > 3 {
		r.Floor, r.FloorCPU = &sides[3].m, sides[3].cpu
		r.FloorRatios = floorRatios
	}
	if r.PeakRSS, err = sampler.Stop(true); err != nil {
		return r, fmt.Errorf("peak RSS: %w", err)
	}
	return r, checked(w, conc, "cold", r.Svc)
}

// processTimes are the processor times of the database cluster and of this program.
type processTimes struct{ db, driver time.Duration }

// otherTimes reads the processor time so far of the cluster whose postmaster is postmaster (0:
// none) and of this program, which drives the load.
func otherTimes(postmaster int) (processTimes, error) {
	db, err := clusterTicks(postmaster)
	if err != nil {
		return processTimes{}, err
	}
	self, err := procstat.Self()
	if err != nil {
		return processTimes{}, err
	}
	return processTimes{db: time.Duration(db) * procstat.Tick, driver: self.CPU()}, nil
}

// floorRounds is the fewest rounds of a light line measured against the bare server: slices
// of 250 ms at make bench's 2 s, each long enough for hundreds of light requests, and short
// enough that the service's slice and the bare server's next to it see the same machine. Each
// slice of such a line follows sliceWarmUp of the same requests, not measured.
const (
	floorRounds = 8
	sliceWarmUp = 25 * time.Millisecond
)

// sliceOrder is the order in which round i measures n sides (0 the service, 1 the hand-written
// SQL, 2 the captured SQL, 3 the bare server). The bare server's slice is next to the
// service's, before it in every other round, so that neither always follows the same side.
func sliceOrder(n, i int) []int {
	switch {
	case n <= 3:
		return []int{0, 1, 2}[:n]
	case i%2 == 0:
		return []int{0, 3, 1, 2}
	default:
		return []int{3, 0, 1, 2}
	}
}

// minRounds is the fewest slices a side of a cold line is measured in, alternating with the
// others (unless -rounds asks fewer).
const minRounds = 2

// rssInterval is how often the service's resident memory is sampled during a line.
const rssInterval = 5 * time.Millisecond

// responsesChecked counts the measured service responses that passed their check, for the
// run's last line.
var responsesChecked atomic.Int64

// checked fails the line when any measured service response failed (its status, its check
// against the compared answer, or the connection): the figures of a service that answered
// wrongly are not figures of the service. The baselines' failures are reported in the table.
func checked(w workload, conc int, kind string, m measurement) error {
	if m.Errors > 0 {
		return fmt.Errorf("%s c=%d %s: %d of %d measured service responses failed their check; the first: %v",
			w.Name, conc, kind, m.Errors, m.Errors+m.Requests, m.FirstErr)
	}
	responsesChecked.Add(int64(m.Requests))
	return nil
}

// measureWarm runs a warm line: the service with its answer cache on (started afresh), the
// workload's question repeated by conc workers once its answer is in memory, as a dashboard
// repeats its questions between two loads. Only the service is measured: the hand-written SQL
// is the cold line's of the same workload and concurrency, measured just before, against which
// the targets are set; the captured SQL is what a miss costs, which the cold line shows.
//
// Before measuring, requests are sent one at a time until one is a hit (the first computes the
// answer; a cache that has not read the data version yet passes requests through), and the
// answer of one more, from memory, is compared with the hand-written SQL's like the cold
// answer. A build without the cache (no Cache-Status header) is measured all the same; judge
// says so instead of judging it.
func measureWarm(ctx context.Context, bin, tmp string, s *dataSet, w workload, conc int, cold row, want *answerPrint, o options) (row, error) {
	r := row{Set: s, W: w, Conc: conc, Warm: true, Hand: cold.Hand, Heavy: cold.Heavy, Cache: &cacheTally{}}
	svc, err := startService(ctx, bin, tmp, s.DB, s.Records, true, o.profile != "")
	if err != nil {
		return r, err
	}
	defer svc.stop()
	pid := svc.pid()
	sampler := procstat.SampleRSS(pid, rssInterval)
	name := fmt.Sprintf("%s c=%d warm", w.Name, conc)

	prime := &cacheTally{}
	do := svc.serviceRequest(w, want, prime)
	for deadline, tries := time.Now().Add(30*time.Second), 0; ; tries++ {
		if _, err := do(ctx, 0); err != nil {
			return r, fmt.Errorf("%s: %v", name, err)
		}
		if prime.hit.Load() > 0 || prime.none.Load() > 0 || tries == 20 || time.Now().After(deadline) {
			break
		}
		if prime.bypass.Load() > 0 {
			time.Sleep(50 * time.Millisecond) // the cache is not live yet
		}
	}
	resp, err := svc.open(ctx, w)
	if err != nil {
		return r, fmt.Errorf("%s: %w", name, err)
	}
	prime.note(resp.Header)
	hit := &answerPrint{}
	err = compareJSON(ctx, s.DB, w, io.TeeReader(resp.Body, hit))
	if err == nil {
		_, err = io.Copy(hit, resp.Body)
	}
	resp.Body.Close()
	if err == nil {
		err = want.differs(hit) // the measured responses are held to the cold answer
	}
	if err != nil {
		return r, fmt.Errorf("warm (Cache-Status %q): %w", resp.Header.Get(headerCacheStatus), err)
	}

	if m := closedLoop(ctx, conc, o.warmup, do); m.Errors > 0 {
		return r, fmt.Errorf("%s warm-up: %v", name, m.FirstErr)
	}
	do = svc.serviceRequest(w, want, r.Cache) // the measured requests only
	var profiled chan error
	if o.profile != "" {
		profiled = make(chan error, 1)
		path := filepath.Join(o.profile, fmt.Sprintf("%d-%s-c%d-warm.cpu.pprof", s.Records, w.Name, conc))
		go func() { profiled <- svc.cpuProfile(o.warmDuration, path) }()
	}
	cpu0, err := procstat.CPUTime(pid)
	if err != nil {
		return r, err
	}
	r.Svc = closedLoop(ctx, conc, o.warmDuration, do)
	cpu1, err := procstat.CPUTime(pid)
	if err != nil {
		return r, err
	}
	r.SvcCPU = cpu1 - cpu0
	if profiled != nil {
		if err := <-profiled; err != nil {
			return r, err
		}
	}
	if r.PeakRSS, err = sampler.Stop(true); err != nil {
		return r, fmt.Errorf("peak RSS: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return r, err
	}
	return r, checked(w, conc, "warm", r.Svc)
}
