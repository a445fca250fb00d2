-- The two optional extensions of the analytics schema that EMS performance measures read
-- (contract section 6.12.6). Apply this file after schema.sql or partitioned.sql; either
-- extension may also be applied alone (copy its statements). The service reads the catalog at
-- start-up and offers what it finds: without them, only the time points CALL,
-- ARRIVED_ON_SCENE and FIRST_OXYGEN exist and unit_hour_utilization is refused.
-- Tables are changed and created in the connection's search_path (public by default). The file
-- is idempotent.

-- 1. The NEMSIS time elements of a record (eTimes), each in the same local wall-clock time as
-- occurred_at, NULL when not recorded. Unit Arrived on Scene is not here: it is
-- occurred_at + response_time_s. Adding nullable columns without a default rewrites nothing,
-- whatever the table's size, and on the partitioned layout every partition inherits them.
ALTER TABLE fact_record
    ADD COLUMN IF NOT EXISTS unit_notified_at    timestamp without time zone, -- eTimes.03 Unit Notified by Dispatch
    ADD COLUMN IF NOT EXISTS en_route_at         timestamp without time zone, -- eTimes.05 Unit En Route
    ADD COLUMN IF NOT EXISTS at_patient_at       timestamp without time zone, -- eTimes.07 Arrived at Patient
    ADD COLUMN IF NOT EXISTS left_scene_at       timestamp without time zone, -- eTimes.09 Unit Left Scene
    ADD COLUMN IF NOT EXISTS at_destination_at   timestamp without time zone, -- eTimes.11 Patient Arrived at Destination
    ADD COLUMN IF NOT EXISTS transfer_of_care_at timestamp without time zone, -- eTimes.12 Destination Patient Transfer of Care
    ADD COLUMN IF NOT EXISTS back_in_service_at  timestamp without time zone; -- eTimes.13 Unit Back in Service

-- 2. When each unit was staffed and in service: one row per shift, the half-open period
-- [shift_start, shift_end), in local time. resource_id is dim_resource.resource_id (a unit
-- keeps it when it moves station). Unit hours, and so unit hour utilization (transports per
-- staffed hour), come from here: dim_resource's valid_from/valid_to say where a unit was
-- stationed, not when it was staffed.
CREATE TABLE IF NOT EXISTS fact_unit_shift (
    resource_id integer NOT NULL,
    shift_start timestamp without time zone NOT NULL,
    shift_end   timestamp without time zone NOT NULL,
    CHECK (shift_end > shift_start)
);

-- The read-only role of schema.sql reads the new table too (when the role exists; the default
-- privileges of schema.sql cover it only when the role that ran schema.sql runs this file).
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'emsquery_reader') THEN
        EXECUTE format('GRANT SELECT ON %I.fact_unit_shift TO emsquery_reader', current_schema());
    END IF;
END
$$;
