package demodata

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/schema"
)

// LoadOptions control Load.
type LoadOptions struct {
	ApplySchema bool // run the layout's DDL first (idempotent)
	// Layout is the table layout: schema.Plain (also when empty) or schema.Partitioned, whose
	// months for the whole period Load creates. Tables that exist with the other layout are
	// refused, not converted.
	Layout   schema.Layout
	Replace  bool      // empty the five tables first instead of refusing
	Progress io.Writer // one line per step; nil for none
	// Measures fills the optional extensions of schema/measures.sql too: fact_record's time
	// columns and fact_unit_shift (applied first with ApplySchema). Without it they are left
	// NULL and empty where they exist; the five tables' rows are the same either way.
	Measures bool
}

// TableCount is the number of rows loaded into one table.
type TableCount struct {
	Table string
	Rows  int64
}

// Summary reports what Load did.
type Summary struct {
	Tables   []TableCount
	Duration time.Duration
}

// ErrNotEmpty is returned (wrapped) when the tables already hold data and Replace is false.
var ErrNotEmpty = errors.New("tables already hold data")

// Load writes the data set into the five tables of the connection's search_path (and into
// fact_unit_shift, with Measures).
//
// The load happens in one transaction, so a failure leaves the database as it was, and an
// interrupted load never leaves a half-filled fact table that a second run would then refuse.
// VACUUM (ANALYZE) follows the commit.
// Speed comes from COPY streamed straight from the generators, and from building the fact
// tables' secondary indexes and checking their foreign keys once after the load instead of row
// by row; both are put back exactly as they were (same names, same definitions). Truncating in
// the same transaction also lets PostgreSQL skip WAL for the new data when wal_level is minimal,
// as in the demo cluster.
func Load(ctx context.Context, conn *pgx.Conn, d *Dataset, opt LoadOptions) (Summary, error) {
	start := time.Now()
	progress := func(format string, args ...any) {
		if opt.Progress != nil {
			fmt.Fprintf(opt.Progress, "%6.1fs  "+format+"\n", append([]any{time.Since(start).Seconds()}, args...)...)
		}
	}
	layout := opt.Layout
	if layout == "" {
		layout = schema.Plain
	}
	if opt.ApplySchema {
		if _, err := conn.Exec(ctx, layout.DDL()); err != nil {
			return Summary{}, fmt.Errorf("applying schema: %w", err)
		}
		progress("schema applied (%s layout)", layout)
		if opt.Measures {
			if _, err := conn.Exec(ctx, schema.MeasuresDDL); err != nil {
				return Summary{}, fmt.Errorf("applying schema/measures.sql: %w", err)
			}
			progress("schema/measures.sql applied")
		}
	}
	var hasShifts, hasTimes bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('fact_unit_shift') IS NOT NULL,
		(SELECT count(*) = $1 FROM pg_attribute WHERE attrelid = 'fact_record'::regclass AND attname = ANY ($2) AND NOT attisdropped)`,
		len(TimeColumns), TimeColumns).Scan(&hasShifts, &hasTimes); err != nil {
		return Summary{}, fmt.Errorf("fact_record: %w", err)
	}
	if opt.Measures && !(hasShifts && hasTimes) {
		return Summary{}, errors.New("fact_record's time columns or fact_unit_shift are missing: apply schema/measures.sql first")
	}
	var partitioned bool
	if err := conn.QueryRow(ctx, "SELECT relkind = 'p' FROM pg_class WHERE oid = 'fact_record'::regclass").Scan(&partitioned); err != nil {
		return Summary{}, fmt.Errorf("fact_record: %w", err)
	}
	if partitioned != (layout == schema.Partitioned) {
		return Summary{}, fmt.Errorf("fact_record exists with another layout than %s; load into another database or drop the tables first", layout)
	}
	if partitioned {
		var made int
		if err := conn.QueryRow(ctx, "SELECT create_fact_record_months($1, $2)", PeriodStart, PeriodEnd).Scan(&made); err != nil {
			return Summary{}, fmt.Errorf("creating the months' partitions: %w", err)
		}
		progress("%d monthly partitions created", made)
	}

	tx, err := conn.Begin(ctx)
	if err != nil {
		return Summary{}, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after Commit

	// The table names here are constants of this package, never input.
	tables := "dim_station, dim_resource, dim_patient, fact_record, fact_oxygen"
	check := []string{"fact_record", "fact_oxygen", "dim_patient", "dim_resource", "dim_station"}
	if hasShifts {
		tables += ", fact_unit_shift"
		check = append(check, "fact_unit_shift")
	}
	// Lock first so that the emptiness check and the load see the same state.
	if _, err := tx.Exec(ctx, "LOCK TABLE "+tables+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		return Summary{}, err
	}
	if !opt.Replace {
		for _, t := range check {
			var n int64
			if err := tx.QueryRow(ctx, "SELECT count(*) FROM "+t).Scan(&n); err != nil {
				return Summary{}, err
			}
			if n > 0 {
				return Summary{}, fmt.Errorf("%w: %s already has %d rows; run again with -replace to empty the tables and load new data", ErrNotEmpty, t, n)
			}
		}
	}
	if _, err := tx.Exec(ctx, "TRUNCATE "+tables); err != nil {
		return Summary{}, err
	}
	for _, s := range []string{
		// Index builds sort in memory instead of spilling to disk; local to this transaction.
		"SET LOCAL maintenance_work_mem = '256MB'",
		// Demo data can be generated again at will: waiting for the commit's WAL flush buys
		// nothing.
		"SET LOCAL synchronous_commit = off",
	} {
		if _, err := tx.Exec(ctx, s); err != nil {
			return Summary{}, err
		}
	}

	deferred, err := dropDeferrable(ctx, tx)
	if err != nil {
		return Summary{}, err
	}
	progress("dropped %d secondary indexes and foreign keys of the fact tables, to rebuild after the load", len(deferred))

	sum := Summary{}
	copyRows := func(table string, columns []string, src pgx.CopyFromSource) error {
		n, err := tx.CopyFrom(ctx, pgx.Identifier{table}, columns, src)
		if err != nil {
			return fmt.Errorf("loading %s: %w", table, err)
		}
		sum.Tables = append(sum.Tables, TableCount{Table: table, Rows: n})
		progress("%-12s %9d rows", table, n)
		return nil
	}

	i := 0
	if err := copyRows("dim_station", StationColumns, pgx.CopyFromFunc(func() ([]any, error) {
		if i >= len(d.Stations) {
			return nil, nil
		}
		i++
		return d.Stations[i-1].Values(), nil
	})); err != nil {
		return Summary{}, err
	}
	i = 0
	if err := copyRows("dim_resource", ResourceColumns, pgx.CopyFromFunc(func() ([]any, error) {
		if i >= len(d.Resources) {
			return nil, nil
		}
		i++
		return d.Resources[i-1].Values(), nil
	})); err != nil {
		return Summary{}, err
	}
	patients := d.PatientRows()
	if err := copyRows("dim_patient", PatientColumns, pgx.CopyFromFunc(func() ([]any, error) {
		if !patients.Next() {
			return nil, nil
		}
		return patients.Patient().Values(), nil
	})); err != nil {
		return Summary{}, err
	}
	records := d.RecordRows()
	recordColumns := RecordColumns
	if opt.Measures {
		recordColumns = append(slices.Clip(RecordColumns), TimeColumns...)
	}
	if err := copyRows("fact_record", recordColumns, pgx.CopyFromFunc(func() ([]any, error) {
		if !records.Next() {
			return nil, nil
		}
		if opt.Measures {
			return append(records.Record().Values(), records.Times().Values()...), nil
		}
		return records.Record().Values(), nil
	})); err != nil {
		return Summary{}, err
	}
	// The oxygen rows hang off the records: replay the (deterministic) record stream rather
	// than keep ~300k rows in memory between the two COPYs. Generating is far cheaper than
	// loading.
	records = d.RecordRows()
	var pending []Oxygen
	if err := copyRows("fact_oxygen", OxygenColumns, pgx.CopyFromFunc(func() ([]any, error) {
		for len(pending) == 0 {
			if !records.Next() {
				return nil, nil
			}
			pending = records.Oxygen()
		}
		o := pending[0]
		pending = pending[1:]
		return o.Values(), nil
	})); err != nil {
		return Summary{}, err
	}

	if opt.Measures {
		shifts := d.Shifts()
		i = 0
		if err := copyRows("fact_unit_shift", ShiftColumns, pgx.CopyFromFunc(func() ([]any, error) {
			if i >= len(shifts) {
				return nil, nil
			}
			i++
			return shifts[i-1].Values(), nil
		})); err != nil {
			return Summary{}, err
		}
	}

	for _, stmt := range deferred {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			return Summary{}, fmt.Errorf("restoring %q: %w", stmt, err)
		}
	}
	progress("indexes rebuilt, foreign keys validated")
	if err := tx.Commit(ctx); err != nil {
		return Summary{}, err
	}
	progress("committed")
	// VACUUM as well as ANALYZE: it marks the new pages all-visible, so index-only scans work
	// and the first queries do not pay for setting hint bits, nor race an autovacuum pass.
	if _, err := conn.Exec(ctx, "VACUUM (ANALYZE) "+tables); err != nil {
		return Summary{}, fmt.Errorf("data loaded, but VACUUM ANALYZE failed: %w", err)
	}
	progress("vacuumed and analyzed")
	sum.Duration = time.Since(start)
	return sum, nil
}

// dropDeferrable drops the fact tables' secondary indexes and foreign keys, and returns the
// statements that recreate them as they were. Primary keys stay: the oxygen foreign key needs
// fact_record's, and appending ascending keys to a b-tree is cheap.
func dropDeferrable(ctx context.Context, tx pgx.Tx) ([]string, error) {
	// regclass::text gives names quoted and qualified as needed for the current search_path.
	rows, err := tx.Query(ctx, `
		SELECT 'DROP INDEX ' || i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid)
		FROM pg_index i
		WHERE i.indrelid IN ('fact_record'::regclass, 'fact_oxygen'::regclass)
		  AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid AND c.contype IN ('p', 'u', 'x'))
		UNION ALL
		SELECT format('ALTER TABLE %s DROP CONSTRAINT %I', c.conrelid::regclass::text, c.conname),
		       format('ALTER TABLE %s ADD CONSTRAINT %I %s', c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid))
		FROM pg_constraint c
		WHERE c.conrelid IN ('fact_record'::regclass, 'fact_oxygen'::regclass) AND c.contype = 'f'
		ORDER BY 1`)
	if err != nil {
		return nil, err
	}
	type pair struct{ drop, create string }
	pairs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (pair, error) {
		var p pair
		return p, r.Scan(&p.drop, &p.create)
	})
	if err != nil {
		return nil, err
	}
	var restore []string
	for _, p := range pairs {
		// A partitioned table's index is shown as made ON ONLY the parent (as pg_dump makes it
		// before attaching the partitions' indexes); made so again it would stay invalid and
		// never reach the partitions.
		p.create = strings.Replace(p.create, " ON ONLY ", " ON ", 1)
		if _, err := tx.Exec(ctx, p.drop); err != nil {
			return nil, fmt.Errorf("%s: %w", p.drop, err)
		}
		restore = append(restore, p.create)
	}
	return restore, nil
}
