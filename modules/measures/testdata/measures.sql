-- Records for the EMS performance measures (contract 6.12), loaded after extensions.sql. Every
-- expected answer is computed by the tests with SQL over these rows.
--
-- What it covers: 3,000 records over 2023 and 2024 (leap day included) with every interval
-- kind: fractions of a second, exactly 0, negative (clock errors), far above any max_seconds,
-- NULL points; ties; a station with few records (suppression); records without resource or
-- without oxygen, oxygen without time; shifts that cross the range's ends and midnight.

INSERT INTO dim_station (station_id, station_name) VALUES (1, 'Central'), (2, 'North'), (3, 'Small');

INSERT INTO dim_resource (sk_resource, resource_id, callsign, station_id, station, valid_from, valid_to) VALUES
  (101, 1001, 'AMB 1', 1, 'Central', '2023-01-01', NULL),
  (102, 1002, 'AMB 2', 2, 'North', '2023-01-01', '2024-06-30'),
  (103, 1002, 'AMB 2', 1, 'Central', '2024-07-01', NULL),
  (104, 1003, 'AMB 3', 3, 'Small', '2023-01-01', NULL);

INSERT INTO dim_patient (sk_patient, age, gender) VALUES (201, 30, 'female'), (202, 70, 'male');

INSERT INTO fact_record (record_id, occurred_at, station_id, station, sk_resource, sk_patient,
    degree_of_urgency, distance, response_time_s, municipality, transported)
SELECT i,
       timestamp '2023-01-01' + ((i * 7919) % (731 * 1440)) * interval '1 minute' + (i % 60) * interval '1 second',
       CASE WHEN i % 97 = 0 THEN 3 WHEN i % 3 = 0 THEN 2 ELSE 1 END,
       CASE WHEN i % 97 = 0 THEN 'Small' WHEN i % 3 = 0 THEN 'North' ELSE 'Central' END,
       CASE WHEN i % 29 = 0 THEN NULL ELSE 101 + i % 4 END,
       CASE WHEN i % 2 = 0 THEN 201 ELSE 202 END,
       CASE WHEN i % 11 = 0 THEN NULL ELSE chr(65 + i % 3) END,
       (i % 50) + 0.25,
       CASE WHEN i % 41 = 0 THEN NULL WHEN i % 17 = 0 THEN 480 ELSE 60 + (i * 37) % 1200 END,
       CASE WHEN i % 5 = 0 THEN 'Bergen' ELSE 'Oslo' END,
       CASE WHEN i % 19 = 0 THEN NULL ELSE i % 4 <> 0 END
  FROM generate_series(1, 3000) AS i;

UPDATE fact_record SET
  unit_notified_at = CASE WHEN record_id % 23 = 0 THEN NULL
                          ELSE occurred_at + ((record_id * 13) % 120 + (record_id % 7) * 0.25) * interval '1 second' END;
UPDATE fact_record SET
  en_route_at = CASE WHEN record_id % 31 = 0 THEN unit_notified_at
                     WHEN record_id % 53 = 0 THEN unit_notified_at - 30 * interval '1 second'
                     WHEN record_id % 59 = 0 THEN unit_notified_at + 100000 * interval '1 second'
                     ELSE unit_notified_at + ((record_id * 17) % 150 + 0.5) * interval '1 second' END,
  left_scene_at = CASE WHEN response_time_s IS NULL THEN NULL
                       ELSE occurred_at + (response_time_s + 600 + (record_id * 11) % 1800) * interval '1 second' END;
UPDATE fact_record SET back_in_service_at = left_scene_at + (1800 + record_id % 3600) * interval '1 second';

INSERT INTO fact_oxygen (sk_oxygen, record_id, route, flow_rate, administered_at)
SELECT record_id * 10, record_id, 'mask', 6,
       CASE WHEN record_id % 35 = 0 THEN NULL
            ELSE occurred_at + (coalesce(response_time_s, 0) + record_id % 300) * interval '1 second' END
  FROM fact_record WHERE record_id % 5 = 0
UNION ALL
SELECT record_id * 10 + 1, record_id, 'nasal cannula', 2,
       occurred_at + (coalesce(response_time_s, 0) + 400) * interval '1 second'
  FROM fact_record WHERE record_id % 10 = 0;

-- Shifts: every unit staffed 12 hours a day from 07:00 or 19:00, some crossing midnight; a
-- unit (1003) with no records in some ranges, and a resource_id (1009) without dim_resource.
INSERT INTO fact_unit_shift (resource_id, shift_start, shift_end)
SELECT u, d + CASE WHEN u % 2 = 0 THEN interval '19 hours' ELSE interval '7 hours' END,
       d + CASE WHEN u % 2 = 0 THEN interval '31 hours' ELSE interval '19 hours' END
  FROM generate_series(timestamp '2022-12-31', timestamp '2024-12-31', interval '1 day') AS d,
       (VALUES (1001), (1002), (1003)) AS units(u)
 WHERE u <> 1003 OR extract(dow FROM d) IN (1, 3, 5);
INSERT INTO fact_unit_shift VALUES (1009, '2024-03-01 08:00', '2024-03-01 09:30');
