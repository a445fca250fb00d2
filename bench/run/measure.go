package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// fetch sends the workload's request once and returns the whole answer.
func (s *service) fetch(ctx context.Context, w workload) ([]byte, http.Header, error) {
	req, err := s.newRequest(ctx, w)
	if err != nil {
		return nil, nil, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("%s: %s: %.300s", w.Name, resp.Status, b)
	}
	return b, resp.Header, nil
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

// serviceRequest is the service side of a measurement: the workload's HTTP request, the
// response read to the end and its status checked (the content was checked once, by capture).
func (s *service) serviceRequest(w workload) request {
	body := w.body()
	return func(ctx context.Context, _ int) (int64, error) {
		var req *http.Request
		var err error
		if w.isExport() {
			req, err = s.newRequest(ctx, w)
		} else {
			req, err = http.NewRequestWithContext(ctx, http.MethodPost, s.url+w.Path, bytes.NewReader(body))
			if err == nil {
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("x-api-key", s.key)
			}
		}
		if err != nil {
			return 0, err
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			return 0, fmt.Errorf("%s: %.300s", resp.Status, b)
		}
		return io.Copy(io.Discard, resp.Body)
	}
}

// pgxRequest is the baseline of a GraphQL workload: the captured statements, in order on one
// connection, every row read (its raw bytes, as the service's driver receives them).
func pgxRequest(pool *pgxpool.Pool, sts []statement) request {
	args := make([][]any, len(sts))
	for i, st := range sts {
		args[i] = st.args()
	}
	return func(ctx context.Context, _ int) (int64, error) {
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
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return n, err
			}
		}
		return n, nil
	}
}

// psqlRequest is the baseline of the export: psql's \copy of the same COPY statement, its CSV
// read from psql's standard output and counted.
func psqlRequest(psql string, db dbTarget, copyStmt string) request {
	env := []string{"PATH=" + os.Getenv("PATH"), "PGHOST=" + db.Host, "PGPORT=" + strconv.Itoa(db.Port),
		"PGDATABASE=" + db.Name, "PGUSER=" + db.User, "PGPASSWORD=" + db.Password, "PGSSLMODE=disable",
		"PGAPPNAME=bench-baseline"}
	meta := `\copy ` + strings.TrimPrefix(copyStmt, "COPY ")
	return func(ctx context.Context, _ int) (int64, error) {
		cmd := exec.CommandContext(ctx, psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-c", meta)
		cmd.Env = env
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return 0, err
		}
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		n, cerr := io.Copy(io.Discard, out)
		if err := cmd.Wait(); err != nil {
			return n, fmt.Errorf("psql: %v: %s", err, stderr.String())
		}
		return n, cerr
	}
}

func newPool(ctx context.Context, db dbTarget, conns int) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig("")
	if err != nil {
		return nil, err
	}
	cc := pc.ConnConfig
	cc.Host, cc.Port, cc.Database, cc.User, cc.Password = db.Host, uint16(db.Port), db.Name, db.User, db.Password
	cc.TLSConfig, cc.Fallbacks = nil, nil
	// The session settings the service's pool sets (platform/database.PoolConfig).
	cc.RuntimeParams = map[string]string{
		"search_path": "public", "application_name": "bench-baseline", "DateStyle": "ISO, YMD",
		"default_transaction_read_only": "on",
	}
	pc.MaxConns, pc.MinConns = int32(conns), int32(conns)
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, err
	}
	// Open every connection before measuring, as the service's pool does at start.
	conns2 := make([]*pgxpool.Conn, 0, conns)
	for range conns {
		c, err := pool.Acquire(ctx)
		if err != nil {
			pool.Close()
			return nil, err
		}
		conns2 = append(conns2, c)
	}
	for _, c := range conns2 {
		c.Release()
	}
	return pool, nil
}

// measure runs one workload at one concurrency: the service (started afresh, so that its peak
// RSS belongs to this workload) and the baseline, each warmed up, then measured in alternating
// slices (service, baseline, service, ...) so that anything else the machine does while they
// run weighs on both alike.
func measure(ctx context.Context, bin, tmp string, s *dataSet, w workload, conc int, sts []statement, o options) (row, error) {
	r := row{Set: s, W: w, Conc: conc}
	svc, err := startService(bin, tmp, s.DB, o.profile != "")
	if err != nil {
		return r, err
	}
	defer svc.stop()
	pid := svc.pid()
	sampler := sampleRSS(pid)
	do := svc.serviceRequest(w)

	var base request
	if w.isExport() {
		psql, err := findPsql()
		if err != nil {
			return r, err
		}
		base = psqlRequest(psql, s.DB, sts[0].SQL)
	} else {
		pool, err := newPool(ctx, s.DB, conc)
		if err != nil {
			return r, err
		}
		defer pool.Close()
		base = pgxRequest(pool, sts)
	}

	ws := closedLoop(ctx, conc, o.warmup, do)
	if ws.Errors > 0 {
		return r, fmt.Errorf("%s c=%d warm-up: %v", w.Name, conc, ws.FirstErr)
	}
	wb := closedLoop(ctx, conc, o.warmup, base)
	if wb.Errors > 0 {
		return r, fmt.Errorf("%s c=%d baseline warm-up: %v", w.Name, conc, wb.FirstErr)
	}
	// Slices of at least four requests' time each: a long request would otherwise stretch every
	// slice (requests in flight at a slice's end are awaited).
	rounds := o.rounds
	if longest := max(ws.P50, wb.P50) * 4; longest > 0 {
		rounds = max(1, min(rounds, int(o.duration/longest)))
	}
	slice := o.duration / time.Duration(rounds)
	for i := range rounds {
		var profiled chan error
		if o.profile != "" && i == 0 {
			profiled = make(chan error, 1)
			path := filepath.Join(o.profile, fmt.Sprintf("%d-%s-c%d.cpu.pprof", s.Records, w.Name, conc))
			go func() { profiled <- svc.cpuProfile(slice, path) }()
		}
		cpu0 := cpuTime(pid)
		m := closedLoop(ctx, conc, slice, do)
		if profiled != nil {
			if err := <-profiled; err != nil {
				return r, err
			}
		}
		r.SvcCPU += cpuTime(pid) - cpu0
		b := closedLoop(ctx, conc, slice, base)
		if i == 0 {
			r.Svc, r.Base = m, b
		} else {
			r.Svc, r.Base = r.Svc.merge(m), r.Base.merge(b)
		}
		if ctx.Err() != nil {
			return r, ctx.Err()
		}
	}
	r.PeakRSS = sampler.Stop(pid)
	return r, nil
}

// findPsql finds psql on PATH or beside Debian's server binaries.
func findPsql() (string, error) {
	if p, err := exec.LookPath("psql"); err == nil {
		return p, nil
	}
	if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/psql"); len(m) > 0 {
		return m[len(m)-1], nil
	}
	return "", errors.New("the export's baseline needs psql (Debian package postgresql-client)")
}
