-- The analytics schema with fact_record range-partitioned by month on occurred_at (contract
-- section 6.6): the same tables, columns and indexes as schema.sql, answered identically by the
-- service. ETL authors choose it for large fact tables: a date range reads only the months it
-- covers, and old months are detached or dropped in an instant instead of deleted row by row.
--
-- What PostgreSQL requires of a partitioned table, and what it changes:
--   * every unique constraint holds the partition key: fact_record's primary key is
--     (record_id, occurred_at), so record_id alone is no longer enforced unique: the ETL keeps
--     it unique;
--   * a foreign key must reference a unique constraint, so fact_oxygen's key to fact_record is
--     dropped: the ETL keeps it true;
--   * a row needs a partition for its month: create the months before loading them with
--     SELECT create_fact_record_months(first_day, last_day). A row outside every month lands
--     in fact_record_default (nothing is refused); creating its month later moves it over.
--     Keep the default partition empty: a date range that reaches into it reads all of it.
--
-- Indexes are declared once on fact_record; PostgreSQL creates them on every partition, the
-- ones made later included. Tables are created in the connection's search_path (public by
-- default). The file is idempotent.

CREATE TABLE IF NOT EXISTS dim_station (
    station_id   integer PRIMARY KEY,
    station_name text NOT NULL UNIQUE
);

CREATE TABLE IF NOT EXISTS dim_resource (
    sk_resource bigint PRIMARY KEY,
    resource_id integer NOT NULL,
    callsign    text NOT NULL,
    station_id  integer REFERENCES dim_station (station_id),
    station     text,
    valid_from  date NOT NULL,
    valid_to    date
);

CREATE TABLE IF NOT EXISTS dim_patient (
    sk_patient    bigint PRIMARY KEY,
    age           integer,
    date_of_birth date,
    gender        text,
    weight        numeric(5,1)
);

CREATE TABLE IF NOT EXISTS fact_record (
    record_id         bigint NOT NULL,
    occurred_at       timestamp without time zone NOT NULL,
    station_id        integer,
    station           text,
    sk_resource       bigint REFERENCES dim_resource (sk_resource),
    sk_patient        bigint REFERENCES dim_patient (sk_patient),
    degree_of_urgency text,
    distance          numeric(7,2),
    response_time_s   integer,
    municipality      text,
    transported       boolean,
    PRIMARY KEY (record_id, occurred_at)
) PARTITION BY RANGE (occurred_at);

CREATE TABLE IF NOT EXISTS fact_record_default PARTITION OF fact_record DEFAULT;

CREATE TABLE IF NOT EXISTS fact_oxygen (
    sk_oxygen       bigint PRIMARY KEY,
    record_id       bigint NOT NULL,
    route           text,
    flow_rate       numeric(4,1),
    administered_at timestamp without time zone
);

CREATE INDEX IF NOT EXISTS fact_record_occurred_at_idx ON fact_record (occurred_at);
CREATE INDEX IF NOT EXISTS fact_record_station_idx ON fact_record (station);
CREATE INDEX IF NOT EXISTS fact_record_station_id_idx ON fact_record (station_id);
CREATE INDEX IF NOT EXISTS fact_record_sk_resource_idx ON fact_record (sk_resource);
CREATE INDEX IF NOT EXISTS fact_record_sk_patient_idx ON fact_record (sk_patient);
CREATE INDEX IF NOT EXISTS fact_oxygen_record_id_idx ON fact_oxygen (record_id);
CREATE INDEX IF NOT EXISTS dim_resource_station_id_idx ON dim_resource (station_id);

-- create_fact_record_months makes the monthly partitions fact_record_yYYYYmMM for every month
-- from first_day's to last_day's (both included) that has none yet, in fact_record's schema,
-- and moves rows of those months out of the default partition into them. It returns how many
-- partitions it made. Run it before loading new months. A partition does not inherit its
-- table's REPLICA IDENTITY: when fact_record's is FULL (docs/replication.md: the counting
-- answers then follow UPDATEs and DELETEs too), each month made gets FULL as well.
CREATE OR REPLACE FUNCTION create_fact_record_months(first_day date, last_day date) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    parent regclass := 'fact_record'::regclass;
    ns     text := (SELECT relnamespace::regnamespace::text FROM pg_class WHERE oid = parent);
    dflt   regclass;
    month  date := date_trunc('month', first_day)::date;
    name   text;
    made   integer := 0;
BEGIN
    SELECT inhrelid::regclass INTO dflt
      FROM pg_inherits i JOIN pg_partitioned_table p ON p.partrelid = i.inhparent
     WHERE i.inhparent = parent AND p.partdefid = i.inhrelid;
    WHILE month <= last_day LOOP
        name := format('fact_record_y%sm%s', to_char(month, 'YYYY'), to_char(month, 'MM'));
        IF to_regclass(format('%I.%I', ns, name)) IS NULL THEN
            -- Rows of the month in the default partition would make the new partition's
            -- creation fail; take them out first and put them back through the parent.
            IF dflt IS NOT NULL THEN
                EXECUTE format('CREATE TEMP TABLE fact_record_moving ON COMMIT DROP AS
                                WITH moved AS (DELETE FROM %s WHERE occurred_at >= %L AND occurred_at < %L RETURNING *)
                                SELECT * FROM moved', dflt, month, month + interval '1 month');
            END IF;
            EXECUTE format('CREATE TABLE %I.%I PARTITION OF %s FOR VALUES FROM (%L) TO (%L)',
                           ns, name, parent, month, month + interval '1 month');
            IF (SELECT relreplident FROM pg_class WHERE oid = parent) = 'f' THEN
                EXECUTE format('ALTER TABLE %I.%I REPLICA IDENTITY FULL', ns, name);
            END IF;
            IF dflt IS NOT NULL THEN
                EXECUTE format('INSERT INTO %s SELECT * FROM fact_record_moving', parent);
                DROP TABLE fact_record_moving;
            END IF;
            made := made + 1;
        END IF;
        month := (month + interval '1 month')::date;
    END LOOP;
    RETURN made;
END
$$;

-- The read-only role the service logs in as (docs/deploy.md, "Roles"): it may read these tables
-- and nothing else, and its sessions are read-only. It is made without a password, so nobody
-- can log in as it until whoever installs the database sets one:
--   ALTER ROLE emsquery_reader PASSWORD '...';
-- (deploy/compose.yaml does that on the database's first start, from DATABASE__PASSWORD). Made
-- only when the one running this file may make roles; the grants follow when the role exists.
DO $$
BEGIN
    CREATE ROLE emsquery_reader LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION;
    ALTER ROLE emsquery_reader SET default_transaction_read_only = on;
EXCEPTION
    -- Made by an earlier run, or at the same moment by a run in another database (roles belong
    -- to the whole server).
    WHEN duplicate_object OR unique_violation THEN NULL;
    WHEN insufficient_privilege THEN
        RAISE NOTICE 'role emsquery_reader not made: % may not make roles', current_user;
END
$$;
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'emsquery_reader') THEN
        EXECUTE format('GRANT USAGE ON SCHEMA %I TO emsquery_reader', current_schema());
        EXECUTE format('GRANT SELECT ON ALL TABLES IN SCHEMA %I TO emsquery_reader', current_schema());
        -- Tables this role (the ETL's, say) makes here later, such as new partitions.
        EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA %I GRANT SELECT ON TABLES TO emsquery_reader',
                       current_schema());
    END IF;
END
$$;
