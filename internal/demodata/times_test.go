package demodata

import (
	"reflect"
	"slices"
	"testing"
	"time"
)

// The time points follow the timeline of contract 6.12.1 with plausible intervals, and arrival
// on scene is exactly occurred_at + response_time_s.
func TestTimes(t *testing.T) {
	d, err := New(Config{Records: 100_000, Seed: DefaultSeed})
	if err != nil {
		t.Fatal(err)
	}
	var (
		n, turnouts, turnoutOver60, negative int
		missing                              [7]int
		callProcessing, turnout              []float64
	)
	for it := d.RecordRows(); it.Next(); n++ {
		r, tm := it.Record(), it.Times()
		vals := []struct {
			ok bool
			at time.Time
		}{
			{tm.UnitNotifiedAt.Valid, tm.UnitNotifiedAt.Time}, {tm.EnRouteAt.Valid, tm.EnRouteAt.Time},
			{tm.AtPatientAt.Valid, tm.AtPatientAt.Time}, {tm.LeftSceneAt.Valid, tm.LeftSceneAt.Time},
			{tm.AtDestinationAt.Valid, tm.AtDestinationAt.Time}, {tm.TransferOfCareAt.Valid, tm.TransferOfCareAt.Time},
			{tm.BackInServiceAt.Valid, tm.BackInServiceAt.Time},
		}
		for i, v := range vals {
			if !v.ok {
				missing[i]++
				continue
			}
			if v.at.Before(r.OccurredAt) || v.at.Sub(r.OccurredAt) > 12*time.Hour || v.at.Nanosecond() != 0 {
				t.Fatalf("record %d: %s %s, call %s", r.RecordID, TimeColumns[i], v.at, r.OccurredAt)
			}
		}
		if vals[0].ok {
			callProcessing = append(callProcessing, vals[0].at.Sub(r.OccurredAt).Seconds())
		}
		if vals[0].ok && vals[1].ok {
			s := vals[1].at.Sub(vals[0].at).Seconds()
			turnout = append(turnout, s)
			turnouts++
			if s > 60 {
				turnoutOver60++
			}
			if s < 0 {
				negative++
			}
		}
		if r.ResponseTimeS.Valid {
			arrived := r.OccurredAt.Add(time.Duration(r.ResponseTimeS.Int32) * time.Second)
			if vals[1].ok && !vals[1].at.Before(arrived) {
				t.Fatalf("record %d: en route %s not before arrival %s", r.RecordID, vals[1].at, arrived)
			}
			if vals[2].ok && vals[2].at.Before(arrived) || vals[3].ok && !vals[3].at.After(arrived) {
				t.Fatalf("record %d: at patient %s or left scene %s before arrival %s", r.RecordID, vals[2].at, vals[3].at, arrived)
			}
		}
		transported := r.Transported.Valid && r.Transported.Bool
		if !transported && (vals[4].ok || vals[5].ok) {
			t.Fatalf("record %d is not transported but has a destination time", r.RecordID)
		}
		for i := 3; i < 6; i++ { // left scene, at destination, transfer, back in service: in order
			for j := i + 1; j < 7; j++ {
				if vals[i].ok && vals[j].ok && vals[j].at.Before(vals[i].at) {
					t.Fatalf("record %d: %s %s before %s %s", r.RecordID, TimeColumns[j], vals[j].at, TimeColumns[i], vals[i].at)
				}
			}
		}
	}
	median := func(xs []float64) float64 { slices.Sort(xs); return xs[len(xs)/2] }
	if m := median(callProcessing); m < 20 || m > 90 {
		t.Errorf("median call processing %.0f s, want tens of seconds", m)
	}
	if m := median(turnout); m < 20 || m > 60 {
		t.Errorf("median turnout %.0f s, want tens of seconds under 60", m)
	}
	if share := float64(turnoutOver60) / float64(turnouts); share < 0.05 || share > 0.3 {
		t.Errorf("%.1f %% of turnouts over 60 s, want some (5 to 30 %%)", 100*share)
	}
	if negative == 0 || negative > turnouts/100 {
		t.Errorf("%d negative turnouts (clock errors) of %d, want a few", negative, turnouts)
	}
	for i, m := range missing {
		if m == 0 || m > n/2 {
			t.Errorf("%s: %d of %d NULL, want some", TimeColumns[i], m, n)
		}
	}
}

// Every unit has shifts of 8 to 24 hours that never overlap, and some unit is staffed in
// every hour of the period.
func TestShifts(t *testing.T) {
	d, err := New(Config{Records: 100_000, Seed: DefaultSeed})
	if err != nil {
		t.Fatal(err)
	}
	shifts := d.Shifts()
	if !reflect.DeepEqual(shifts, d.Shifts()) {
		t.Fatal("two calls gave different shifts")
	}
	last := map[int32]Shift{}
	staffed := map[time.Time]bool{}
	for _, s := range shifts {
		if h := s.End.Sub(s.Start).Hours(); h < 8 || h > 24 {
			t.Fatalf("shift %+v lasts %.1f h", s, h)
		}
		if p, ok := last[s.ResourceID]; ok && s.Start.Before(p.End) {
			t.Fatalf("shifts %+v and %+v overlap or are out of order", p, s)
		}
		last[s.ResourceID] = s
		for h := s.Start.Truncate(time.Hour); h.Before(s.End); h = h.Add(time.Hour) {
			staffed[h] = true
		}
	}
	for _, r := range d.Resources {
		if _, ok := last[r.ResourceID]; !ok {
			t.Errorf("resource %d has no shift", r.ResourceID)
		}
	}
	for h := PeriodStart; h.Before(daysAfter(PeriodEnd, 1)); h = h.Add(time.Hour) {
		if !staffed[h] {
			t.Fatalf("no unit staffed at %s", h)
		}
	}
}

// At the demo's size, transports per staffed hour are what services report (a few tenths) for
// the whole, and about one at most for a unit: busy units are the ones staffed around the clock.
func TestUnitHourUtilization(t *testing.T) {
	if testing.Short() {
		t.Skip("generates a million records")
	}
	d, err := New(Config{Records: 1_000_000, Seed: DefaultSeed})
	if err != nil {
		t.Fatal(err)
	}
	hours := map[int32]float64{}
	var all float64
	for _, s := range d.Shifts() {
		h := s.End.Sub(s.Start).Hours()
		hours[s.ResourceID] += h
		all += h
	}
	transports := map[int32]float64{}
	var total float64
	for it := d.RecordRows(); it.Next(); {
		r := it.Record()
		if r.Transported.Valid && r.Transported.Bool && r.SKResource.Valid {
			transports[d.Resources[r.SKResource.Int64-1].ResourceID]++
			total++
		}
	}
	if uhu := total / all; uhu < 0.15 || uhu > 0.6 {
		t.Errorf("unit hour utilization %.2f, want a few tenths", uhu)
	}
	for id, n := range transports {
		if uhu := n / hours[id]; uhu > 1.2 {
			t.Errorf("resource %d: %.0f transports in %.0f staffed hours (%.2f an hour)", id, n, hours[id], uhu)
		}
	}
}
