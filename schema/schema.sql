-- Analytics schema read by the service and filled by the ETL (contract section 1).
-- Tables are created in the connection's search_path (public by default).
-- The service itself never runs this file against a database it serves; tests, the demo and
-- ETL authors do.

CREATE TABLE IF NOT EXISTS dim_station (
    station_id   integer PRIMARY KEY,
    station_name text NOT NULL UNIQUE
);

-- Slowly changing dimension: a resource that moves station gets a new sk_resource row with the
-- same resource_id.
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
    record_id         bigint PRIMARY KEY,
    occurred_at       timestamp without time zone NOT NULL,
    station_id        integer,
    station           text,
    sk_resource       bigint REFERENCES dim_resource (sk_resource),
    sk_patient        bigint REFERENCES dim_patient (sk_patient),
    degree_of_urgency text,
    distance          numeric(7,2),
    response_time_s   integer,
    municipality      text,
    transported       boolean
);

CREATE TABLE IF NOT EXISTS fact_oxygen (
    sk_oxygen       bigint PRIMARY KEY,
    record_id       bigint NOT NULL REFERENCES fact_record (record_id),
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
