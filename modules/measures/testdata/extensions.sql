-- The optional extensions of contract 6.12.6, as an ETL would add them.
ALTER TABLE fact_record
  ADD COLUMN unit_notified_at timestamp, ADD COLUMN en_route_at timestamp, ADD COLUMN at_patient_at timestamp,
  ADD COLUMN left_scene_at timestamp, ADD COLUMN at_destination_at timestamp,
  ADD COLUMN transfer_of_care_at timestamp, ADD COLUMN back_in_service_at timestamp;
CREATE TABLE fact_unit_shift (
  resource_id integer NOT NULL,
  shift_start timestamp NOT NULL,
  shift_end timestamp NOT NULL,
  CHECK (shift_end > shift_start)
);
