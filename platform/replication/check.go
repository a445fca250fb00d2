package replication

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Report is what Check found.
type Report struct {
	// Missing lists what following the tables needs and the server lacks, one sentence each
	// with the statement that provides it; empty when everything is in place.
	Missing []string
	// Role is the role the connection logs in as; Tables the followed tables that exist.
	Role   string
	Tables []TableInfo
}

// TableInfo is a followed table as the catalog has it.
type TableInfo struct {
	// Name as in Options; Schema where the search_path found it.
	Name, Schema string
	OID          uint32
	// ReplicaIdentity: 'd' default, 'f' full, 'i' index, 'n' nothing. Only 'f' gives the old
	// values of every UPDATE and DELETE.
	ReplicaIdentity byte
	Partitioned     bool
	Optional        bool
}

// Table is the named table's entry, or nil.
func (r *Report) Table(name string) *TableInfo {
	for i := range r.Tables {
		if r.Tables[i].Name == name {
			return &r.Tables[i]
		}
	}
	return nil
}

// MissingError is Start's refusal when Check found something missing.
type MissingError struct{ Missing []string }

func (e *MissingError) Error() string {
	return "logical replication is not set up: " + strings.Join(e.Missing, "; ")
}

// Check reads what following the tables needs from the server opts.Conn reaches: wal_level
// logical, a primary, the role's REPLICATION attribute, the publication and the tables it
// publishes (with every operation, no row filter or column list, through the partitioned
// table's root), and a free replication slot. The error is for a check that could not run
// (the server unreachable); what is missing is in the Report.
func Check(ctx context.Context, opts Options) (*Report, error) {
	opts = opts.withDefaults()
	conn, err := connect(ctx, connConfig(opts))
	if errors.Is(err, pgconn.ErrStandbyConnection) {
		return &Report{Missing: []string{errNoPrimary}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("replication check: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	r, err := check(ctx, conn, opts)
	if err != nil {
		return nil, fmt.Errorf("replication check: %w", err)
	}
	return r, nil
}

// connect opens a plain connection (not from a pool: the package's few statements run at start
// and per poll) with cfg's settings.
func connect(ctx context.Context, cfg *pgx.ConnConfig) (*pgx.Conn, error) {
	cc := cfg.Copy()
	cc.ValidateConnect = pgconn.ValidateConnectTargetSessionAttrsPrimary
	cc.RuntimeParams["application_name"] = "emsquery replication check"
	return pgx.ConnectConfig(ctx, cc)
}

// errNoPrimary is what Check reports when every host answered as a standby.
const errNoPrimary = "no host is a primary (each answered as a standby, in recovery): the slot needs the primary"

// connConfig is opts.Conn with the search_path of opts.Schema.
func connConfig(opts Options) *pgx.ConnConfig {
	cc := opts.Conn.Copy()
	if opts.Schema != "" {
		cc.RuntimeParams["search_path"] = pgx.Identifier{opts.Schema}.Sanitize()
	}
	return cc
}

func check(ctx context.Context, conn *pgx.Conn, opts Options) (*Report, error) {
	r := &Report{}
	const qServer = `SELECT current_setting('wal_level'), pg_is_in_recovery(), current_user::text,
       r.rolreplication OR r.rolsuper,
       current_setting('max_replication_slots')::int,
       (SELECT count(*) FROM pg_replication_slots)::int
FROM pg_roles r WHERE r.rolname = current_user`
	var walLevel string
	var standby, replication bool
	var maxSlots, slots int
	if err := conn.QueryRow(ctx, qServer).Scan(&walLevel, &standby, &r.Role, &replication, &maxSlots, &slots); err != nil {
		return nil, fmt.Errorf("server settings: %w", err)
	}
	if walLevel != "logical" {
		r.Missing = append(r.Missing, fmt.Sprintf("the server's wal_level is %s, not logical (ALTER SYSTEM SET wal_level = logical; then restart PostgreSQL)", walLevel))
	}
	if standby {
		r.Missing = append(r.Missing, "the server is a standby (in recovery): the slot needs the primary")
	}
	role := ident(r.Role)
	if !replication {
		r.Missing = append(r.Missing, fmt.Sprintf("the role %s lacks the REPLICATION attribute (ALTER ROLE %s REPLICATION)", role, role))
	}
	if slots >= maxSlots {
		r.Missing = append(r.Missing, fmt.Sprintf("all %d replication slots (max_replication_slots) are in use (raise max_replication_slots; then restart PostgreSQL)", maxSlots))
	}

	const qTables = `SELECT t.name, t.optional, c.oid, n.nspname::text, c.relreplident::text, c.relkind = 'p', c.relpersistence = 'u'
FROM unnest($1::text[], $2::bool[]) WITH ORDINALITY AS t(name, optional, i)
LEFT JOIN pg_class c ON c.oid = to_regclass(quote_ident(t.name))
LEFT JOIN pg_namespace n ON n.oid = c.relnamespace
ORDER BY t.i`
	names, optional := tableList(opts)
	rows, err := conn.Query(ctx, qTables, names, optional)
	if err != nil {
		return nil, fmt.Errorf("tables: %w", err)
	}
	var absent, unlogged []string
	for rows.Next() {
		var t TableInfo
		var oid *uint32
		var schema, ident *string
		var partitioned, isUnlogged *bool
		if err := rows.Scan(&t.Name, &t.Optional, &oid, &schema, &ident, &partitioned, &isUnlogged); err != nil {
			return nil, fmt.Errorf("tables: %w", err)
		}
		if oid == nil {
			if !t.Optional {
				absent = append(absent, t.Name)
			}
			continue
		}
		if *isUnlogged {
			unlogged = append(unlogged, t.Name)
		}
		t.OID, t.Schema, t.ReplicaIdentity, t.Partitioned = *oid, *schema, (*ident)[0], *partitioned
		r.Tables = append(r.Tables, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("tables: %w", err)
	}
	if len(absent) > 0 {
		r.Missing = append(r.Missing, fmt.Sprintf("the table(s) %s do not exist in the connection's search_path", strings.Join(absent, ", ")))
	}
	for _, name := range unlogged {
		r.Missing = append(r.Missing, fmt.Sprintf("the table %s is UNLOGGED: its changes are not in the WAL (ALTER TABLE %s SET LOGGED)", name, ident(name)))
	}

	pub := ident(opts.Publication)
	const qPublication = `SELECT p.oid, p.pubinsert, p.pubupdate, p.pubdelete, p.pubtruncate, p.pubviaroot
FROM pg_publication p WHERE p.pubname = $1`
	var pubOID uint32
	var ins, upd, del, trunc, viaRoot bool
	err = conn.QueryRow(ctx, qPublication, opts.Publication).Scan(&pubOID, &ins, &upd, &del, &trunc, &viaRoot)
	if err == pgx.ErrNoRows {
		r.Missing = append(r.Missing, fmt.Sprintf("the publication %s does not exist (CREATE PUBLICATION %s FOR TABLE %s; run by the tables' owner)",
			pub, pub, strings.Join(tableNames(r.Tables, names), ", ")))
		return r, nil
	}
	if err != nil {
		return nil, fmt.Errorf("publication: %w", err)
	}
	var ops []string
	for _, o := range []struct {
		on   bool
		name string
	}{{ins, "insert"}, {upd, "update"}, {del, "delete"}, {trunc, "truncate"}} {
		if !o.on {
			ops = append(ops, o.name)
		}
	}
	if len(ops) > 0 {
		r.Missing = append(r.Missing, fmt.Sprintf("the publication %s does not publish %s (ALTER PUBLICATION %s SET (publish = 'insert, update, delete, truncate'))",
			pub, strings.Join(ops, ", "), pub))
	}
	var partitioned []string
	for _, t := range r.Tables {
		if t.Partitioned {
			partitioned = append(partitioned, t.Name)
		}
	}
	if len(partitioned) > 0 && !viaRoot {
		r.Missing = append(r.Missing, fmt.Sprintf("the publication %s reports changes of the partitioned table(s) %s under their partitions' names (ALTER PUBLICATION %s SET (publish_via_partition_root = true))",
			pub, strings.Join(partitioned, ", "), pub))
	}

	// pg_publication_tables expands FOR ALL TABLES and TABLES IN SCHEMA, and lists a
	// partitioned table itself when the publication publishes through the root. Row filters
	// and column lists (PostgreSQL 15) would hide changes; to_jsonb reads their columns
	// without failing on older servers, which have neither.
	const qPublished = `SELECT t.name,
       EXISTS (SELECT FROM pg_publication_tables pt
               WHERE pt.pubname = $1 AND pt.schemaname = n.nspname AND pt.tablename = c.relname),
       EXISTS (SELECT FROM pg_publication_rel pr
               WHERE pr.prpubid = $2 AND pr.prrelid = c.oid
                 AND (to_jsonb(pr)->>'prqual' IS NOT NULL OR to_jsonb(pr)->>'prattrs' IS NOT NULL))
FROM unnest($3::text[]) WITH ORDINALITY AS t(name, i)
JOIN pg_class c ON c.oid = to_regclass(quote_ident(t.name))
JOIN pg_namespace n ON n.oid = c.relnamespace
ORDER BY t.i`
	existing := make([]string, len(r.Tables))
	for i, t := range r.Tables {
		existing[i] = t.Name
	}
	rows, err = conn.Query(ctx, qPublished, opts.Publication, pubOID, existing)
	if err != nil {
		return nil, fmt.Errorf("published tables: %w", err)
	}
	var unpublished, filtered []string
	for rows.Next() {
		var name string
		var published, filter bool
		if err := rows.Scan(&name, &published, &filter); err != nil {
			return nil, fmt.Errorf("published tables: %w", err)
		}
		switch {
		case !published && !(contains(partitioned, name) && !viaRoot) && !contains(unlogged, name):
			unpublished = append(unpublished, name)
		case filter:
			filtered = append(filtered, name)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("published tables: %w", err)
	}
	if len(unpublished) > 0 {
		r.Missing = append(r.Missing, fmt.Sprintf("the publication %s does not publish %s (ALTER PUBLICATION %s ADD TABLE %s; run by the tables' owner)",
			pub, strings.Join(unpublished, ", "), pub, strings.Join(unpublished, ", ")))
	}
	if len(filtered) > 0 {
		r.Missing = append(r.Missing, fmt.Sprintf("the publication %s publishes %s with a row filter or column list (ALTER PUBLICATION %s SET TABLE ... without WHERE or column lists)",
			pub, strings.Join(filtered, ", "), pub))
	}
	return r, nil
}

// tableList is the tables to look up and whether each is optional.
func tableList(opts Options) ([]string, []bool) {
	names := append(append([]string(nil), opts.Tables...), opts.OptionalTables...)
	optional := make([]bool, len(names))
	for i := len(opts.Tables); i < len(names); i++ {
		optional[i] = true
	}
	return names, optional
}

// tableNames is the existing tables' names, or the configured required ones when none exists.
func tableNames(found []TableInfo, configured []string) []string {
	if len(found) == 0 {
		return configured
	}
	names := make([]string, len(found))
	for i, t := range found {
		names[i] = ident(t.Name)
	}
	return names
}

// ident quotes an identifier for the statements shown to a DBA, only when it needs quoting.
func ident(s string) string {
	for i, r := range s {
		if !(r >= 'a' && r <= 'z' || r == '_' || i > 0 && r >= '0' && r <= '9') {
			return pgx.Identifier{s}.Sanitize()
		}
	}
	if s == "" {
		return `""`
	}
	return s
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
