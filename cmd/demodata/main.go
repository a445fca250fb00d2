// Command demodata fills the analytics schema with deterministic, EMS-like demo data: stations,
// resources (with moved-station versions), patients, two years of mission records ending
// 2025-12-31 and their oxygen administrations, and (unless -measures=false) the records' time
// points and the units' shifts of schema/measures.sql.
//
// It connects like psql does (PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE, PGSSLMODE, ...),
// or with -dsn. The same -seed and -records always give the same data, so that a benchmark or a
// bug report can name its data set with two numbers.
//
//	go run ./cmd/demodata -records 1000000
//	go run ./cmd/demodata -records 10000 -replace -dsn 'host=127.0.0.1 port=55432 dbname=ems_demo'
//	go run ./cmd/demodata -records 1000000 -layout partitioned
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/internal/demodata"
	"github.com/emsanalytics/emsquery/schema"
)

func main() {
	os.Exit(run())
}

func run() int {
	var (
		dsn     = flag.String("dsn", "", "connection string (libpq key=value or postgres:// URL); empty: the PG* environment variables")
		records = flag.Int("records", 1_000_000, "number of mission records (fact_record rows)")
		seed    = flag.Uint64("seed", demodata.DefaultSeed, "random seed; the same seed and -records give the same data")
		ddl     = flag.Bool("schema", true, "create the tables and indexes first (idempotent)")
		replace = flag.Bool("replace", false, "empty the five tables first; without it, tables that hold data are left alone and the run fails")
		quiet   = flag.Bool("quiet", false, "print only the summary")
		layout  = flag.String("layout", "plain", "table layout: plain, or partitioned (fact_record by month, schema/partitioned.sql)")
		measure = flag.Bool("measures", true, "fill the time columns of fact_record and fact_unit_shift too (schema/measures.sql, applied with -schema)")
	)
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: demodata [flags]\n\nFills the analytics tables with deterministic demo data.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "demodata: unexpected argument %q\n", flag.Arg(0))
		return 2
	}
	if *records < 1 {
		fmt.Fprintln(os.Stderr, "demodata: -records must be at least 1")
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	cfg, err := pgx.ParseConfig(*dsn)
	if err != nil {
		fmt.Fprintf(os.Stderr, "demodata: connection settings: %v\n", err)
		return 1
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "demodata: connecting: %v\n", err)
		return 1
	}
	defer conn.Close(context.Background())

	d, err := demodata.New(demodata.Config{Records: *records, Seed: *seed})
	if err != nil {
		fmt.Fprintf(os.Stderr, "demodata: %v\n", err)
		return 2
	}
	lay, err := schema.ParseLayout(*layout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "demodata: -layout: %v\n", err)
		return 2
	}
	opt := demodata.LoadOptions{ApplySchema: *ddl, Replace: *replace, Layout: lay, Measures: *measure}
	if !*quiet {
		opt.Progress = os.Stderr
		fmt.Fprintf(os.Stderr, "loading %d records (seed %d) into %s:%d/%s\n", *records, *seed, cfg.Host, cfg.Port, cfg.Database)
	}
	sum, err := demodata.Load(ctx, conn, d, opt)
	if err != nil {
		fmt.Fprintf(os.Stderr, "demodata: %v\n", err)
		if errors.Is(err, demodata.ErrNotEmpty) {
			return 3
		}
		return 1
	}
	for _, t := range sum.Tables {
		fmt.Printf("%-12s %9d rows\n", t.Table, t.Rows)
	}
	fmt.Printf("loaded in %.1f s\n", sum.Duration.Seconds())
	return 0
}
