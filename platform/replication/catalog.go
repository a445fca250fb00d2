package replication

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Querier runs one statement for a row: *pgx.Conn, *pgxpool.Pool and *pgx.Tx are.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// FingerprintQuery is Fingerprint's statement, for callers that run statements their own way:
// $1 the tables (text[]: Options.Tables then OptionalTables), $2 the publication.
//
// It covers what a row change does not announce: each table's identity (its oid: a table
// replaced or renamed away), name, schema, kind, replica identity, persistence (an UNLOGGED
// table's changes are not in the WAL) and columns (name, type, modifier, collation, dropped);
// the partitions under it (attaching, detaching or dropping one changes the rows without a row
// change) and their storage (relfilenode: a publication that publishes through the root does
// not send the TRUNCATE of one partition, which gives the partition new storage); the
// publication's identity and operations, and which of the tables it publishes. It leaves out what changes without changing the rows (the storage of a table
// that is not a partition: VACUUM FULL, CLUSTER; statistics), so such maintenance ends nothing;
// VACUUM FULL or CLUSTER of one partition does change it.
const FingerprintQuery = `SELECT md5(coalesce(string_agg(x, E'\n' ORDER BY x), '')) FROM (
  SELECT format('table %s %s %s %s %s %s %s', t.name, c.oid, n.nspname, c.relname, c.relkind, c.relreplident, c.relpersistence) AS x
  FROM unnest($1::text[]) AS t(name)
  LEFT JOIN pg_class c ON c.oid = to_regclass(quote_ident(t.name))
  LEFT JOIN pg_namespace n ON n.oid = c.relnamespace
  UNION ALL
  SELECT format('column %s %s %s %s %s %s %s', a.attrelid, a.attnum, a.attname, a.atttypid, a.atttypmod, a.attcollation, a.attisdropped)
  FROM unnest($1::text[]) AS t(name)
  JOIN pg_attribute a ON a.attrelid = to_regclass(quote_ident(t.name)) AND a.attnum > 0
  UNION ALL
  SELECT format('partition %s %s %s %s', to_regclass(quote_ident(t.name))::oid, p.relid::oid, p.level,
                CASE WHEN p.level > 0 THEN pg_relation_filenode(p.relid) END)
  FROM unnest($1::text[]) AS t(name)
  CROSS JOIN LATERAL pg_partition_tree(to_regclass(quote_ident(t.name))) AS p
  WHERE to_regclass(quote_ident(t.name)) IS NOT NULL
  UNION ALL
  SELECT format('publication %s %s %s %s %s %s %s', p.oid, p.puballtables, p.pubinsert, p.pubupdate, p.pubdelete, p.pubtruncate, p.pubviaroot)
  FROM pg_publication p WHERE p.pubname = $2
  UNION ALL
  SELECT format('published %s %s', pt.schemaname, pt.tablename)
  FROM pg_publication_tables pt
  WHERE pt.pubname = $2 AND pt.tablename IN (SELECT unnest($1::text[]))
) AS f`

// Fingerprint is a digest of the followed tables' definitions and the publication's tables,
// which changes when either does (see FingerprintQuery). pgoutput describes a table only with
// its next row change, so a definition change (ALTER TABLE ... ADD COLUMN, a table renamed or
// replaced, ALTER PUBLICATION) is found by comparing fingerprints, e.g. once per
// CACHE__MAX_STALENESS.
func Fingerprint(ctx context.Context, q Querier, opts Options) (string, error) {
	opts = opts.withDefaults()
	names, _ := tableList(opts)
	var f string
	if err := q.QueryRow(ctx, FingerprintQuery, names, opts.Publication).Scan(&f); err != nil {
		return "", fmt.Errorf("catalog fingerprint: %w", err)
	}
	return f, nil
}

// ReplayQuery is ReplayPosition's statement: the position a hot standby has replayed, null on
// a primary.
const ReplayQuery = `SELECT pg_last_wal_replay_lsn()::text`

// ReplayPosition is how far the server q reaches has replayed the primary's WAL, when it is a
// hot standby (standby true); a transaction whose End is at or before it is visible there. On
// a primary standby is false: a committed transaction is visible at once.
func ReplayPosition(ctx context.Context, q Querier) (pos LSN, standby bool, err error) {
	var s *string
	if err := q.QueryRow(ctx, ReplayQuery).Scan(&s); err != nil {
		return 0, false, fmt.Errorf("replay position: %w", err)
	}
	if s == nil {
		return 0, false, nil
	}
	pos, err = ParseLSN(*s)
	if err != nil {
		return 0, false, fmt.Errorf("replay position: %w", err)
	}
	return pos, true, nil
}

// Replayed says whether the server q reaches shows the transaction that ended at end: a
// primary always, a hot standby once its replay position reached end.
func Replayed(ctx context.Context, q Querier, end LSN) (bool, error) {
	pos, standby, err := ReplayPosition(ctx, q)
	if err != nil {
		return false, err
	}
	return !standby || pos >= end, nil
}
