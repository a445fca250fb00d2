// The soak's database: the demo data, and the NOTIFY an ETL sends after a load.

package main

import (
	"context"
	"fmt"
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
