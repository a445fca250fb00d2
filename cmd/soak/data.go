// The soak's database: the demo data, and the NOTIFY an ETL sends after a load.

package main

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/internal/demodata"
	"github.com/emsanalytics/emsquery/internal/pgtest"
)

// load creates the soak's database, fills it with the demo generator's data and returns the
// stations' names (for the drawn questions).
func load(ctx context.Context, c *pgtest.Cluster, records int) ([]string, error) {
	if err := c.CreateDatabase(ctx, "soak", false); err != nil {
		return nil, err
	}
	conn, err := connect(ctx, c)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	d, err := demodata.New(demodata.Config{Records: records, Seed: demodata.DefaultSeed})
	if err != nil {
		return nil, err
	}
	progress("loading %d demo records", records)
	if _, err := demodata.Load(ctx, conn, d, demodata.LoadOptions{ApplySchema: true}); err != nil {
		return nil, fmt.Errorf("load demo data: %w", err)
	}
	const q = `SELECT station_name FROM dim_station ORDER BY station_name`
	rows, _ := conn.Query(ctx, q)
	stations, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("stations: %w", err)
	}
	if len(stations) < 2 {
		return nil, fmt.Errorf("stations: %d in the demo data, want at least 2", len(stations))
	}
	return stations, nil
}

func connect(ctx context.Context, c *pgtest.Cluster) (*pgx.Conn, error) {
	cfg, err := c.ConnConfig("soak")
	if err != nil {
		return nil, err
	}
	return pgx.ConnectConfig(ctx, cfg)
}

// notifyChannel is the service's default CACHE__NOTIFY_CHANNEL, which the soak leaves as is.
const notifyChannel = "emsquery_refresh"

// notifier sends a NOTIFY on the cache's channel at a fixed interval, as an ETL does after a
// load, from its own connection.
type notifier struct {
	sent, failed atomic.Int64
	done         chan struct{}
	wg           sync.WaitGroup
	once         sync.Once
}

func startNotifier(ctx context.Context, c *pgtest.Cluster, every time.Duration) (*notifier, error) {
	conn, err := connect(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("notifier: %w", err)
	}
	n := &notifier{done: make(chan struct{})}
	n.wg.Go(func() {
		defer conn.Close(context.WithoutCancel(ctx))
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-n.done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			const q = `SELECT pg_notify($1, 'soak')`
			if _, err := conn.Exec(ctx, q, notifyChannel); err != nil {
				n.failed.Add(1)
				progress("NOTIFY failed: %v", err)
				continue
			}
			n.sent.Add(1)
		}
	})
	return n, nil
}

func (n *notifier) stop() {
	n.once.Do(func() { close(n.done) })
	n.wg.Wait()
}

// etl simulates an ETL's loads: every so often, in one transaction, a few new records of one
// station in the year after the demo data's (so that only the streams' questions and the mix's
// records_count change), the streams' answers by SQL, and NOTIFY on the cache's channel (sent at
// the commit). After each commit it has the streams checked (streams.waitFor).
type etl struct {
	conn      *pgx.Conn
	station   string
	stationID int
	truth     *truth
	live      *streams
	next      int64 // the next record_id
	rows      int64 // records inserted
	loads     atomic.Int64
	failed    atomic.Int64
	done      chan struct{}
	wg        sync.WaitGroup
	once      sync.Once
}

// newETL connects, reads the data's first answers into a new truth and picks the loads'
// station: the first of stations that is not the mix's records_count station.
func newETL(ctx context.Context, c *pgtest.Cluster, stations []string, avoid string) (*etl, error) {
	conn, err := connect(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("etl: %w", err)
	}
	e := &etl{conn: conn, truth: &truth{}, done: make(chan struct{})}
	for _, s := range stations {
		if s != avoid {
			e.station = s
			break
		}
	}
	const q = `SELECT (SELECT station_id FROM dim_station WHERE station_name = $1), (SELECT coalesce(max(record_id), 0) + 1 FROM fact_record)`
	if err := conn.QueryRow(ctx, q, e.station).Scan(&e.stationID, &e.next); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("etl: %w", err)
	}
	answers, err := sqlAnswers(ctx, conn, e.station)
	if err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	e.truth.gens = []generation{{committed: time.Now(), answers: answers}}
	return e, nil
}

// sqlAnswers is what the streams' questions that follow the data must answer, by SQL, as
// their digests (liveQuestions).
func sqlAnswers(ctx context.Context, conn interface {
	QueryRow(context.Context, string, ...any) pgx.Row
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, station string) (map[string]string, error) {
	var all, ofStation int64
	const counts = `SELECT (SELECT count(*) FROM fact_record), (SELECT count(*) FROM fact_record WHERE station = $1)`
	if err := conn.QueryRow(ctx, counts, station).Scan(&all, &ofStation); err != nil {
		return nil, fmt.Errorf("etl: counts: %w", err)
	}
	const unique = `SELECT coalesce(degree_of_urgency, 'NULL') || '=' || count(*) FROM fact_record
		WHERE occurred_at >= $1::date AND occurred_at < $2::date + 1 GROUP BY degree_of_urgency`
	rows, _ := conn.Query(ctx, unique, uniqueFrom, uniqueTo)
	parts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("etl: unique counts: %w", err)
	}
	slices.Sort(parts)
	return map[string]string{
		"records_count":         strconv.FormatInt(all, 10),
		"records_count station": strconv.FormatInt(ofStation, 10),
		"unique_counts":         strings.Join(parts, " "),
	}, nil
}

func (e *etl) start(ctx context.Context, every time.Duration) {
	r := mrand.New(mrand.NewPCG(2026, 11))
	e.wg.Go(func() {
		defer e.conn.Close(context.WithoutCancel(ctx))
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-e.done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := e.load(ctx, 1+r.IntN(20)); err != nil {
				e.failed.Add(1)
				progress("load failed: %v", err)
			}
		}
	})
}

// load inserts n records, computes the answers, and commits with a NOTIFY; then it waits for
// the streams to have the new answers.
func (e *etl) load(ctx context.Context, n int) error {
	tx, err := e.conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	const ins = `INSERT INTO fact_record (record_id, occurred_at, station_id, station, degree_of_urgency, transported)
		SELECT $1 + i, timestamp '2026-01-01' + ($1 + i) * interval '1 minute', $2, $3, (ARRAY['A', 'B', 'C'])[1 + (($1 + i) % 3)], i % 2 = 0
		FROM generate_series(0, $4 - 1) AS i`
	if _, err := tx.Exec(ctx, ins, e.next, e.stationID, e.station, n); err != nil {
		return fmt.Errorf("insert: %w", err)
	}
	answers, err := sqlAnswers(ctx, tx, e.station)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, 'soak load')`, notifyChannel); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	e.truth.mu.Lock()
	e.truth.gens = append(e.truth.gens, generation{prepared: time.Now(), answers: answers})
	e.truth.mu.Unlock()
	err = tx.Commit(ctx)
	committed := time.Now()
	e.truth.mu.Lock()
	g := &e.truth.gens[len(e.truth.gens)-1]
	if err != nil {
		e.truth.gens = e.truth.gens[:len(e.truth.gens)-1]
	} else {
		g.committed = committed
	}
	gen := *g
	e.truth.mu.Unlock()
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	e.next += int64(n)
	e.rows += int64(n)
	e.loads.Add(1)
	if e.live != nil {
		e.live.waitFor(gen)
	}
	return nil
}

func (e *etl) stop() {
	e.once.Do(func() { close(e.done) })
	e.wg.Wait()
}
