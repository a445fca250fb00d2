#!/usr/bin/env bash
# One-command demo (`make demo`): a throwaway PostgreSQL cluster in .demo/, filled once with
# deterministic demo data, and the service running in the foreground against it.
#
#   scripts/demo.sh          start (or reuse) the cluster, load data if needed, run the service
#   scripts/demo.sh stop     stop the demo cluster
#   scripts/demo.sh reset    stop it and delete it with its data, password and API key
#
# Settings: DEMO_PG_PORT (cluster port, default 55432), DEMO_PORT (service port, default 9090),
# DEMO_RECORDS (records to load, default 1000000; a different count reloads the data),
# DEMO_LAYOUT (plain, default, or partitioned: fact_record partitioned by month as in
# schema/partitioned.sql; each layout has a database of its own, ems_demo and
# ems_demo_partitioned, so switching back and forth loads each only once).
#
# Why the details: initdb and postgres refuse to run as root, so as root the cluster runs as
# the `postgres` user that Debian's package creates. When that user cannot reach the repository
# (a checkout under /root, mode 700), the cluster lives under /var/lib/postgresql instead and
# .demo/pg is a symlink to it. The cluster listens on 127.0.0.1 only, with a generated password.
# It is set up for CACHE__CHANGES=replication (docs/replication.md), which the demo runs with:
# wal_level=logical and room for the service's slot, the publication of the followed tables and
# REPLICA IDENTITY FULL on fact_record; the service logs in as the superuser, which has
# REPLICATION.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
demo="$root/.demo"
pg_port=${DEMO_PG_PORT:-55432}
app_port=${DEMO_PORT:-9090}
records=${DEMO_RECORDS:-1000000}
layout=${DEMO_LAYOUT:-plain}
case "$layout" in
  plain) dbname=ems_demo ;;
  partitioned) dbname=ems_demo_partitioned ;;
  *) echo "demo: DEMO_LAYOUT must be plain or partitioned, got '$layout'" >&2; exit 1 ;;
esac

die() { echo "demo: $*" >&2; exit 1; }
say() { echo "demo: $*" >&2; }

valid_port() { [[ $1 =~ ^[0-9]+$ ]] && [ "$1" -ge 1 ] && [ "$1" -le 65535 ]; }
valid_port "$pg_port" || die "DEMO_PG_PORT must be a port number, got '$pg_port'"
valid_port "$app_port" || die "DEMO_PORT must be a port number, got '$app_port'"
[[ $records =~ ^[1-9][0-9]*$ ]] || die "DEMO_RECORDS must be a positive number, got '$records'"

is_root() { [ "$(id -u)" = 0 ]; }

# as_pg runs a command as the cluster's owner: the postgres user when we are root, else
# ourselves. It runs from / so that an unreadable working directory does not matter.
as_pg() {
  if is_root; then
    if command -v runuser >/dev/null 2>&1; then
      (cd / && runuser -u postgres -- "$@")
    else
      (cd / && su postgres -s /bin/bash -c "$(printf '%q ' "$@")")
    fi
  else
    (cd / && "$@")
  fi
}

# mkdir_pg creates a directory that the cluster's owner owns: as root we create it (the parent
# may be ours) and hand it over.
mkdir_pg() {
  mkdir -p "$1"
  if is_root; then chown postgres: "$1"; fi
}

# port_busy succeeds when something accepts TCP connections on 127.0.0.1:$1.
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Where the cluster lives: .demo itself unless the postgres user cannot reach it (see above).
cluster_root() {
  if ! is_root; then echo "$demo"; return; fi
  id postgres >/dev/null 2>&1 || die "running as root needs the 'postgres' user (Debian's postgresql package creates it)"
  if [ -L "$demo/pg" ]; then dirname "$(readlink "$demo/pg")"; return; fi
  if runuser -u postgres -- test -x "$demo" 2>/dev/null; then echo "$demo"; return; fi
  local home
  home=$(getent passwd postgres | cut -d: -f6)
  [ -n "$home" ] && [ -d "$home" ] || home=/var/tmp
  echo "$home/emsquery-demo-$(printf %s "$root" | cksum | cut -d' ' -f1)"
}

mkdir -p "$demo"
croot=$(cluster_root)
pgdata="$croot/pg"
sockdir="$croot/run"
pglog="$pgdata/postgres.log" # in the data directory: the cluster's owner can always write there
pwfile="$demo/pg-password"

need_bindir() {
  bindir=$("$root/scripts/ensure-postgres.sh") || die "PostgreSQL server binaries are not available"
  if [ ! -x "$bindir/pg_ctl" ] || [ ! -x "$bindir/psql" ]; then die "no pg_ctl/psql in $bindir"; fi
}

running() { [ -f "$pgdata/PG_VERSION" ] && as_pg "$bindir/pg_ctl" -D "$pgdata" status >/dev/null 2>&1; }

stop_cluster() {
  if running; then
    as_pg "$bindir/pg_ctl" -D "$pgdata" -m fast -w stop >/dev/null
    say "demo cluster stopped ($pgdata)"
  else
    say "demo cluster is not running"
  fi
}

case "${1:-start}" in
  start) ;;
  stop) need_bindir; stop_cluster; exit 0 ;;
  reset)
    need_bindir; stop_cluster
    rm -rf "$pgdata" "$sockdir" "$pwfile" "$demo/api-key" "$demo/pg"
    [ "$croot" = "$demo" ] || rmdir "$croot" 2>/dev/null || true
    say "demo cluster, password and API key deleted"
    exit 0 ;;
  *) die "usage: scripts/demo.sh [start|stop|reset]" ;;
esac

command -v go >/dev/null 2>&1 || die "the Go toolchain (go) is needed to build the demo data loader and the service"
need_bindir
umask 077 # the password and key files are for this user only

# 1. The cluster: create once, reuse afterwards.
if [ ! -f "$pgdata/PG_VERSION" ] || [ ! -s "$pwfile" ]; then
  if [ -e "$pgdata" ]; then
    # A half-made cluster (interrupted initdb) or one whose password is lost: start over.
    say "removing incomplete demo cluster $pgdata"
    if running; then as_pg "$bindir/pg_ctl" -D "$pgdata" -m immediate -w stop >/dev/null || true; fi
    rm -rf "$pgdata"
  fi
  say "creating demo cluster in $pgdata"
  [ "$croot" = "$demo" ] || say "(not in .demo: the postgres user cannot reach $root; .demo/pg links to it)"
  od -An -tx1 -N24 /dev/urandom | tr -d ' \n' >"$pwfile"
  [ "$croot" = "$demo" ] || { mkdir_pg "$croot"; ln -sfn "$pgdata" "$demo/pg"; }
  mkdir_pg "$pgdata"
  # initdb reads the password from a file the cluster owner can read; it is removed right after.
  tmp_pw="$croot/.initdb-pw"
  cp "$pwfile" "$tmp_pw"
  if is_root; then chown postgres: "$tmp_pw"; fi
  if ! as_pg "$bindir/initdb" -D "$pgdata" -U postgres --pwfile="$tmp_pw" --auth=scram-sha-256 \
      --encoding=UTF8 --locale=C.UTF-8 >"$demo/initdb.log" 2>&1; then
    rm -rf "$tmp_pw" "$pwfile" "$pgdata"
    cat "$demo/initdb.log" >&2
    die "initdb failed"
  fi
  rm -f "$tmp_pw" "$demo/initdb.log"
  echo "include_if_exists = 'demo.conf'" >>"$pgdata/postgresql.conf"
fi

cluster_version=$(cat "$pgdata/PG_VERSION")
bin_version=$("$bindir/pg_ctl" --version | awk '{print $3}' | cut -d. -f1) # "pg_ctl (PostgreSQL) 15.14"
[ "$cluster_version" = "$bin_version" ] ||
  die "the demo cluster was made by PostgreSQL $cluster_version but $bindir is $bin_version; run 'scripts/demo.sh reset'"

# A Unix socket path is limited to ~107 bytes; a deep checkout does without the socket (everything
# here connects over TCP anyway).
sockets=$sockdir
[ ${#sockdir} -le 90 ] || sockets=
conf="listen_addresses = '127.0.0.1'
port = $pg_port
unix_socket_directories = '$sockets'
wal_level = logical
max_wal_senders = 10
max_replication_slots = 10
max_wal_size = '4GB'
logging_collector = off"
if running && [ "$(as_pg cat "$pgdata/demo.conf" 2>/dev/null)" != "$conf" ]; then
  # Line 4 of postmaster.pid is the port the running cluster listens on.
  if [ "$(as_pg sed -n 4p "$pgdata/postmaster.pid")" != "$pg_port" ] && port_busy "$pg_port"; then
    die "port $pg_port on 127.0.0.1 is in use by another program; choose another with DEMO_PG_PORT=<port>"
  fi
  say "settings changed (port?), restarting the demo cluster"
  as_pg "$bindir/pg_ctl" -D "$pgdata" -m fast -w stop >/dev/null
fi
if ! running; then
  if port_busy "$pg_port"; then
    die "port $pg_port on 127.0.0.1 is in use by another program; choose another with DEMO_PG_PORT=<port>"
  fi
  [ -z "$sockets" ] || mkdir_pg "$sockdir"
  printf '%s\n' "$conf" | as_pg tee "$pgdata/demo.conf" >/dev/null
  say "starting the demo cluster on 127.0.0.1:$pg_port (log: $pglog)"
  if ! as_pg "$bindir/pg_ctl" -D "$pgdata" -l "$pglog" -w -t 60 start >/dev/null; then
    tail -n 20 "$pglog" >&2 || true
    die "the demo cluster did not start"
  fi
else
  say "reusing the running demo cluster on 127.0.0.1:$pg_port"
fi

pg_password=$(cat "$pwfile")
export PGHOST=127.0.0.1 PGPORT=$pg_port PGUSER=postgres PGPASSWORD=$pg_password PGSSLMODE=disable
unset PGSERVICE PGSERVICEFILE PGPASSFILE PGOPTIONS
psql_q() { "$bindir/psql" -X -q -v ON_ERROR_STOP=1 -tA "$@"; }

# 2. The database and its data, loaded once (and again when DEMO_RECORDS changes).
if [ -z "$(psql_q -d postgres -c "SELECT 1 FROM pg_database WHERE datname = '$dbname'")" ]; then
  psql_q -d postgres -c "CREATE DATABASE $dbname"
fi
have=0 measures=f
if [ "$(psql_q -d "$dbname" -c "SELECT to_regclass('public.fact_record') IS NOT NULL")" = t ]; then
  have=$(psql_q -d "$dbname" -c "SELECT count(*) FROM public.fact_record")
  # Data loaded before schema/measures.sql existed lacks the time columns and unit shifts.
  measures=$(psql_q -d "$dbname" -c "SELECT to_regclass('public.fact_unit_shift') IS NOT NULL")
fi
if [ "$have" != "$records" ] || [ "$measures" != t ]; then
  replace=()
  if [ "$have" != 0 ]; then
    if [ "$have" != "$records" ]; then
      say "the demo database holds $have records, DEMO_RECORDS is $records: reloading"
    else
      say "the demo data lacks the time columns and unit shifts of schema/measures.sql: reloading"
    fi
    replace=(-replace)
  fi
  say "loading $records demo records, $layout layout (once; later runs reuse them)"
  (cd "$root" && PGDATABASE=$dbname go run ./cmd/demodata -records "$records" -layout "$layout" "${replace[@]}")
else
  say "demo data already loaded ($have records)"
fi

# 2b. What CACHE__CHANGES=replication needs in the database (docs/replication.md), made again
# at each start (a reload replaces the tables, which leaves the publication without them):
# the publication of the followed tables (through the partitioned table's root with the
# partitioned layout), and REPLICA IDENTITY FULL on fact_record (on each month's partition).
pubopts=
[ "$layout" != partitioned ] || pubopts=" WITH (publish_via_partition_root = true)"
psql_q -d "$dbname" <<SQL
SET client_min_messages = warning;
DROP PUBLICATION IF EXISTS emsquery;
CREATE PUBLICATION emsquery
    FOR TABLE dim_station, dim_resource, dim_patient, fact_record, fact_oxygen, fact_unit_shift$pubopts;
DO \$\$
DECLARE p regclass;
BEGIN
    FOR p IN SELECT relid FROM pg_partition_tree('fact_record') WHERE isleaf LOOP
        IF (SELECT relreplident FROM pg_class WHERE oid = p) <> 'f' THEN
            EXECUTE format('ALTER TABLE %s REPLICA IDENTITY FULL', p);
        END IF;
    END LOOP;
END \$\$;
SQL
say "publication emsquery and REPLICA IDENTITY FULL on fact_record in place (CACHE__CHANGES=replication)"

# 3. The API key, made once.
if [ ! -s "$demo/api-key" ]; then
  od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$demo/api-key"
fi
api_key=$(cat "$demo/api-key")

# 4. The service, in the foreground.
say "building the service"
(cd "$root" && go build -o bin/emsquery .)
if port_busy "$app_port"; then
  die "port $app_port on 127.0.0.1 is in use; choose another with DEMO_PORT=<port>"
fi
mkdir -p "$demo/logs"
url="http://127.0.0.1:$app_port/graphql"
cat <<EOF

  emsquery demo
  GraphQL endpoint (GraphiQL in a browser): $url
  API key (header x-api-key):               $api_key

  Try:
    curl -s -H "x-api-key: $api_key" -H 'content-type: application/json' -d '{"query":"{ records_count { count } }"}' $url

  Database: postgres://postgres@127.0.0.1:$pg_port/$dbname (password in .demo/pg-password)
  Answers in memory follow the tables' changes (CACHE__CHANGES=replication, docs/replication.md).
  Ctrl-C stops the service; the database keeps running so the next 'make demo' starts at once.
  'scripts/demo.sh stop' stops the database, 'scripts/demo.sh reset' deletes it.

EOF
unset PGHOST PGPORT PGUSER PGPASSWORD PGSSLMODE
cd "$root"
exec env \
  DATABASE__HOST=127.0.0.1 \
  DATABASE__PORT="$pg_port" \
  DATABASE__NAME="$dbname" \
  DATABASE__USERNAME=postgres \
  DATABASE__PASSWORD="$pg_password" \
  DATABASE__ENCRYPT=no \
  AUTHENTICATION__API_KEY="$api_key" \
  CACHE__CHANGES=replication \
  LOG__PATH="$demo/logs" \
  OTEL_METRICS_EXPORTER=none \
  OTEL_TRACES_EXPORTER=none \
  APP__HOST=127.0.0.1 \
  APP__PORT="$app_port" \
  "$root/bin/emsquery"
