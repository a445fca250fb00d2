package demodata

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// firstRows collects the first n records (with oxygen) and patients of a fresh data set.
func firstRows(t *testing.T, cfg Config, n int) ([]Record, []Oxygen, []Patient, *Dataset) {
	t.Helper()
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var recs []Record
	var oxy []Oxygen
	it := d.RecordRows()
	for len(recs) < n && it.Next() {
		recs = append(recs, it.Record())
		oxy = append(oxy, it.Oxygen()...)
	}
	var pats []Patient
	pit := d.PatientRows()
	for len(pats) < n && pit.Next() {
		pats = append(pats, pit.Patient())
	}
	return recs, oxy, pats, d
}

func TestDeterministic(t *testing.T) {
	cfg := Config{Records: 20_000, Seed: 42}
	r1, o1, p1, d1 := firstRows(t, cfg, 2000)
	r2, o2, p2, d2 := firstRows(t, cfg, 2000)
	for _, c := range []struct {
		name string
		a, b any
	}{
		{"stations", d1.Stations, d2.Stations},
		{"resources", d1.Resources, d2.Resources},
		{"records", r1, r2},
		{"oxygen", o1, o2},
		{"patients", p1, p2},
	} {
		if !reflect.DeepEqual(c.a, c.b) {
			t.Errorf("%s differ between two runs with the same seed", c.name)
		}
	}

	t1, t2 := allTimes(d1), allTimes(d2)
	if !reflect.DeepEqual(t1, t2) || !reflect.DeepEqual(d1.Shifts(), d2.Shifts()) {
		t.Error("time points or shifts differ between two runs with the same seed")
	}

	// Another seed must give other data, or the seed would be a no-op.
	r3, _, p3, _ := firstRows(t, Config{Records: 20_000, Seed: 43}, 2000)
	if reflect.DeepEqual(r1, r3) || reflect.DeepEqual(p1, p3) {
		t.Error("seeds 42 and 43 gave the same rows")
	}
}

func allTimes(d *Dataset) []Times {
	var out []Times
	for it := d.RecordRows(); it.Next(); {
		out = append(out, it.Times())
	}
	return out
}

// TestIterationsIndependent checks that the oxygen replay in Load sees the same records as the
// record COPY did, even when patients are generated in between.
func TestIterationsIndependent(t *testing.T) {
	d, err := New(Config{Records: 5000, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	collect := func() (rs []Record, os []Oxygen) {
		it := d.RecordRows()
		for it.Next() {
			rs = append(rs, it.Record())
			os = append(os, it.Oxygen()...)
		}
		return rs, os
	}
	r1, o1 := collect()
	for p := d.PatientRows(); p.Next(); {
	}
	r2, o2 := collect()
	if !reflect.DeepEqual(r1, r2) || !reflect.DeepEqual(o1, o2) {
		t.Fatal("second iteration over the records differs from the first")
	}
}

func day(t time.Time) time.Time { return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC) }

func TestInvariants(t *testing.T) {
	const n = 100_000
	d, err := New(Config{Records: n, Seed: DefaultSeed})
	if err != nil {
		t.Fatal(err)
	}

	// Stations: unique ids and names, the awkward names present, one without resources.
	stationName := map[int32]string{}
	names := map[string]bool{}
	for _, s := range d.Stations {
		if _, dup := stationName[s.StationID]; dup || names[s.StationName] {
			t.Fatalf("duplicate station %d %q", s.StationID, s.StationName)
		}
		stationName[s.StationID] = s.StationName
		names[s.StationName] = true
	}
	if len(d.Stations) < 20 || len(d.Stations) > 40 {
		t.Errorf("%d stations, want 20..40", len(d.Stations))
	}
	var apostrophe, nonASCII bool
	for name := range names {
		apostrophe = apostrophe || strings.Contains(name, "'")
		nonASCII = nonASCII || strings.ContainsAny(name, "ÅØÆåøæ")
	}
	if !apostrophe || !nonASCII || !names["Ålesund Sør"] {
		t.Errorf("station names lack an apostrophe or non-ASCII letters: %v", names)
	}

	// Resources: SCD versions of one resource_id do not overlap, carry the right station name,
	// and the old version ends the day before the new one starts.
	bySK := map[int64]Resource{}
	versions := map[int32][]Resource{}
	equipped := map[int32]bool{}
	unstationed := 0
	for i, r := range d.Resources {
		if r.SKResource != int64(i+1) {
			t.Fatalf("sk_resource %d at position %d", r.SKResource, i)
		}
		bySK[r.SKResource] = r
		versions[r.ResourceID] = append(versions[r.ResourceID], r)
		if r.Callsign == "" {
			t.Errorf("resource %d has no callsign", r.SKResource)
		}
		if r.StationID.Valid {
			equipped[r.StationID.Int32] = true
			if name, ok := stationName[r.StationID.Int32]; !ok || !r.Station.Valid || r.Station.String != name {
				t.Errorf("resource %d: station %d %q does not match dim_station", r.SKResource, r.StationID.Int32, r.Station.String)
			}
		} else {
			unstationed++
			if r.Station.Valid {
				t.Errorf("resource %d has a station name but no station_id", r.SKResource)
			}
		}
	}
	if unstationed == 0 {
		t.Error("no unstationed resources")
	}
	if len(equipped) != len(d.Stations)-1 {
		t.Errorf("%d of %d stations have resources, want all but one", len(equipped), len(d.Stations))
	}
	moved := 0
	for id, vs := range versions {
		if len(vs) > 2 {
			t.Errorf("resource_id %d has %d versions", id, len(vs))
		}
		if len(vs) == 2 {
			moved++
			old, cur := vs[0], vs[1]
			if !old.ValidTo.Valid || cur.ValidTo.Valid || !old.ValidTo.Time.AddDate(0, 0, 1).Equal(cur.ValidFrom) ||
				!old.ValidFrom.Before(cur.ValidFrom) || old.StationID == cur.StationID ||
				cur.ValidFrom.Before(PeriodStart) || cur.ValidFrom.After(PeriodEnd) {
				t.Errorf("resource_id %d: inconsistent versions %+v and %+v", id, old, cur)
			}
		} else if vs[0].ValidTo.Valid {
			t.Errorf("resource_id %d: single version with valid_to", id)
		}
	}
	if share := float64(moved) / float64(len(versions)); share < 0.05 || share > 0.15 {
		t.Errorf("%d of %d resources moved, want about 10%%", moved, len(versions))
	}

	// Patients: keys dense, age and date of birth agree, genders from the list.
	genderOK := map[string]bool{"female": true, "male": true, "other": true, "unknown": true}
	var patients int64
	for it := d.PatientRows(); it.Next(); {
		p := it.Patient()
		patients++
		if p.SKPatient != patients {
			t.Fatalf("sk_patient %d at position %d", p.SKPatient, patients)
		}
		if p.Gender.Valid && !genderOK[p.Gender.String] {
			t.Errorf("patient %d: gender %q", p.SKPatient, p.Gender.String)
		}
		if p.Age.Valid && (p.Age.Int32 < 0 || p.Age.Int32 > 100) {
			t.Errorf("patient %d: age %d", p.SKPatient, p.Age.Int32)
		}
		if p.DateOfBirth.Valid {
			if !p.Age.Valid || yearsBetween(p.DateOfBirth.Time, AgeReference) != int(p.Age.Int32) {
				t.Errorf("patient %d: born %s is not %d on %s", p.SKPatient, p.DateOfBirth.Time.Format(time.DateOnly), p.Age.Int32, AgeReference.Format(time.DateOnly))
			}
		}
		if p.Weight.Valid {
			if w, _ := p.Weight.Float64Value(); w.Float64 <= 0 || w.Float64 >= 10000 {
				t.Errorf("patient %d: weight %v", p.SKPatient, w.Float64)
			}
		}
	}
	if patients != d.Patients || patients < n*85/100 || patients > n*95/100 {
		t.Errorf("%d patients (dataset says %d) for %d records, want about one per 1.1", patients, d.Patients, n)
	}

	// Records: ids dense and in time order, in the period, foreign keys resolve, the station is
	// the resource's station on that day.
	var records, oxygen, nullStation, nullPatient int64
	var lastAt time.Time
	lastOxygen := int64(0)
	maxPatient := int64(0)
	urgencies := map[string]int{}
	for it := d.RecordRows(); it.Next(); {
		r := it.Record()
		records++
		if r.RecordID != records {
			t.Fatalf("record_id %d at position %d", r.RecordID, records)
		}
		if r.OccurredAt.Before(PeriodStart) || !r.OccurredAt.Before(PeriodEnd.AddDate(0, 0, 1)) || r.OccurredAt.Before(lastAt) {
			t.Fatalf("record %d: occurred_at %s out of range or order", r.RecordID, r.OccurredAt)
		}
		if r.OccurredAt.Location() != time.UTC {
			t.Fatalf("record %d: occurred_at not in UTC location", r.RecordID)
		}
		lastAt = r.OccurredAt
		if r.SKResource.Valid {
			res, ok := bySK[r.SKResource.Int64]
			if !ok {
				t.Fatalf("record %d: sk_resource %d does not exist", r.RecordID, r.SKResource.Int64)
			}
			dd := day(r.OccurredAt)
			if res.ValidFrom.After(dd) || (res.ValidTo.Valid && res.ValidTo.Time.Before(dd)) {
				t.Errorf("record %d on %s uses resource version %d valid %s..%v", r.RecordID, dd.Format(time.DateOnly), res.SKResource, res.ValidFrom.Format(time.DateOnly), res.ValidTo)
			}
			if r.StationID != res.StationID || r.Station != res.Station {
				t.Errorf("record %d: station %v/%v, resource's is %v/%v", r.RecordID, r.StationID, r.Station, res.StationID, res.Station)
			}
		} else if r.StationID.Valid || r.Station.Valid {
			t.Errorf("record %d has a station but no resource", r.RecordID)
		}
		if !r.StationID.Valid {
			nullStation++
		}
		if r.SKPatient.Valid {
			if r.SKPatient.Int64 < 1 || r.SKPatient.Int64 > d.Patients {
				t.Fatalf("record %d: sk_patient %d does not exist", r.RecordID, r.SKPatient.Int64)
			}
			maxPatient = max(maxPatient, r.SKPatient.Int64)
		} else {
			nullPatient++
		}
		urgencies[r.DegreeOfUrgency.String]++
		if r.Distance.Valid {
			if km, _ := r.Distance.Float64Value(); km.Float64 < 0.5 || km.Float64 > 150 {
				t.Errorf("record %d: distance %v", r.RecordID, km.Float64)
			}
		}
		if r.ResponseTimeS.Valid && r.ResponseTimeS.Int32 <= 0 {
			t.Errorf("record %d: response time %d", r.RecordID, r.ResponseTimeS.Int32)
		}
		if len(it.Oxygen()) > 3 {
			t.Errorf("record %d: %d oxygen rows", r.RecordID, len(it.Oxygen()))
		}
		for _, o := range it.Oxygen() {
			oxygen++
			if o.RecordID != r.RecordID || o.SKOxygen != lastOxygen+1 {
				t.Fatalf("oxygen %d: record %d, previous sk %d", o.SKOxygen, o.RecordID, lastOxygen)
			}
			lastOxygen = o.SKOxygen
			if o.AdministeredAt.Valid {
				if after := o.AdministeredAt.Time.Sub(r.OccurredAt); after <= 0 || after > 6*time.Hour {
					t.Errorf("oxygen %d given %s after the call", o.SKOxygen, after)
				}
			}
			if o.FlowRate.Valid {
				if f, _ := o.FlowRate.Float64Value(); f.Float64 <= 0 || f.Float64 > 15 {
					t.Errorf("oxygen %d: flow %v", o.SKOxygen, f.Float64)
				}
			}
		}
	}
	if records != n {
		t.Errorf("%d records, want %d", records, n)
	}
	if lastAt.Before(PeriodEnd) {
		t.Errorf("last record at %s, want on the period's last day", lastAt)
	}
	if maxPatient < d.Patients*99/100 {
		t.Errorf("records reference patients up to %d of %d", maxPatient, d.Patients)
	}
	if nullStation == 0 || nullPatient == 0 {
		t.Errorf("records with NULL station: %d, NULL patient: %d; want some of each", nullStation, nullPatient)
	}
	if per := float64(oxygen) / float64(records); per < 0.2 || per > 0.4 {
		t.Errorf("%.2f oxygen rows per record, want about 0.3", per)
	}
	if !(urgencies["A"] < urgencies["B"] && urgencies["B"] < urgencies["C"] && urgencies["E"] < urgencies["D"] && urgencies[""] > 0) {
		t.Errorf("urgency shares not as intended: %v", urgencies)
	}
}

// yearsBetween is the age in whole years on date at of someone born on birth.
func yearsBetween(birth, at time.Time) int {
	y := at.Year() - birth.Year()
	if at.Month() < birth.Month() || (at.Month() == birth.Month() && at.Day() < birth.Day()) {
		y--
	}
	return y
}

func TestValuesMatchColumns(t *testing.T) {
	d, err := New(Config{Records: 10, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	it := d.RecordRows()
	it.Next()
	pit := d.PatientRows()
	pit.Next()
	for _, c := range []struct {
		cols []string
		vals []any
	}{
		{StationColumns, d.Stations[0].Values()},
		{ResourceColumns, d.Resources[0].Values()},
		{PatientColumns, pit.Patient().Values()},
		{RecordColumns, it.Record().Values()},
		{OxygenColumns, Oxygen{}.Values()},
	} {
		if len(c.cols) != len(c.vals) {
			t.Errorf("columns %v but %d values", c.cols, len(c.vals))
		}
	}
}

func BenchmarkRecords(b *testing.B) {
	d, err := New(Config{Records: b.N, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for it := d.RecordRows(); it.Next(); {
		_ = it.Record().Values()
	}
}
