package demodata

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// The optional extensions of schema/measures.sql (contract 6.12.6): a record's NEMSIS time
// points and the units' staffed shifts. They come from random streams of their own, so that
// the rows of the five tables are the same with and without them.

// Times is a record's time columns, each NULL (Valid false) when not recorded.
type Times struct {
	UnitNotifiedAt   pgtype.Timestamp
	EnRouteAt        pgtype.Timestamp
	AtPatientAt      pgtype.Timestamp
	LeftSceneAt      pgtype.Timestamp
	AtDestinationAt  pgtype.Timestamp
	TransferOfCareAt pgtype.Timestamp
	BackInServiceAt  pgtype.Timestamp
}

// Shift is a row of fact_unit_shift: resource_id staffed in [Start, End).
type Shift struct {
	ResourceID int32
	Start, End time.Time
}

var (
	// TimeColumns are fact_record's time columns in the order Times.Values returns them.
	TimeColumns = []string{"unit_notified_at", "en_route_at", "at_patient_at", "left_scene_at",
		"at_destination_at", "transfer_of_care_at", "back_in_service_at"}
	ShiftColumns = []string{"resource_id", "shift_start", "shift_end"}
)

// Values returns the times in TimeColumns order.
func (t Times) Values() []any {
	return []any{t.UnitNotifiedAt, t.EnRouteAt, t.AtPatientAt, t.LeftSceneAt, t.AtDestinationAt,
		t.TransferOfCareAt, t.BackInServiceAt}
}

// Values returns the shift in ShiftColumns order.
func (s Shift) Values() []any {
	return []any{s.ResourceID, pgtype.Timestamp{Time: s.Start, Valid: true}, pgtype.Timestamp{Time: s.End, Valid: true}}
}

// Share of records whose time point is not recorded, per column of TimeColumns (at_patient_at
// is often left out on the tablet; a transport's hand-over time is often not pressed).
var missingTime = [7]float64{0.01, 0.02, 0.20, 0.02, 0.03, 0.10, 0.02}

// lognormal draws a duration in seconds around median.
func lognormal(rng *rand.Rand, median, sigma float64) float64 {
	return median * math.Exp(sigma*rng.NormFloat64())
}

// drawTimes makes a record's time points on the timeline of contract 6.12.1. Arrival on scene
// is occurred_at + response_time_s, so call processing, turnout and travel add up to the
// response time, all in whole seconds; a record without a response time still has the other
// points, around an arrival that was not recorded. u is the record's urgency index, km its
// distance (negative when NULL), night whether the call came before 06:00.
func drawTimes(rng *rand.Rand, r Record, u int, km float64, night bool) Times {
	arrive := float64(r.ResponseTimeS.Int32)
	if !r.ResponseTimeS.Valid {
		arrive = math.Round(max(lognormal(rng, medianResponse[u], 0.45), 60))
	}
	callProcessing := lognormal(rng, 45, 0.5)
	if u == 0 {
		callProcessing *= 0.7 // the most urgent calls are dispatched before the rest
	}
	turnout := lognormal(rng, 40, 0.35) // about one in eight over NFPA 1710's 60 s
	if night {
		turnout *= 1.4 // the crew gets up first
	}
	// Travel takes at least half of the response: the first two intervals shrink for the
	// shortest responses.
	callProcessing = math.Round(min(callProcessing, arrive/4))
	turnout = math.Round(min(turnout, arrive/4))
	notified, enRoute := callProcessing, callProcessing+turnout
	if rng.Float64() < 0.002 {
		// A clock or button error: en route before the dispatch (a negative turnout, which the
		// measures exclude).
		enRoute = max(notified-float64(1+rng.IntN(20)), 0)
	}
	atPatient := arrive + math.Round(max(lognormal(rng, 60, 0.6), 10))
	scene := lognormal(rng, 18*60, 0.45)
	if u == 0 {
		scene *= 1.4
	}
	left := max(arrive+math.Round(scene), atPatient+120)

	back := left + math.Round(rng.Float64()*300) // not transported: clear when leaving
	var atDestination, transfer float64 = -1, -1
	if r.Transported.Valid && r.Transported.Bool {
		transport := lognormal(rng, 15*60, 0.5)
		if km > 0 {
			transport = 120 + km*72*(0.85+0.3*rng.Float64()) // about 50 km/h
		}
		atDestination = left + math.Round(transport)
		transfer = atDestination + math.Round(max(lognormal(rng, 15*60, 0.5), 60))
		back = transfer + math.Round(lognormal(rng, 10*60, 0.5))
	}

	points := [7]float64{notified, enRoute, atPatient, left, atDestination, transfer, back}
	var out [7]pgtype.Timestamp
	for i, s := range points {
		recorded := rng.Float64() >= missingTime[i]
		if s >= 0 && recorded {
			out[i] = pgtype.Timestamp{Time: r.OccurredAt.Add(time.Duration(s) * time.Second), Valid: true}
		}
	}
	return Times{out[0], out[1], out[2], out[3], out[4], out[5], out[6]}
}

// Shifts returns fact_unit_shift's rows: for every resource_id, from the first day it is in
// service (PeriodStart at the earliest) past the end of PeriodEnd, in order of resource_id and
// shift_start. A unit's shifts never overlap. The busier seven in ten stationed units (by their
// share of the records) are staffed around the clock, in 12-hour shifts (07-19, 19-07) or
// 24-hour shifts (from 08:00); the others are day units (from 07:00, 8 to 12 hours); reserve
// units are staffed on one day in ten. About one shift in 25 is not staffed. So transports per
// staffed hour come out as a service's usually do, a few tenths.
func (d *Dataset) Shifts() []Shift {
	rng := newRNG(d.cfg.Seed, streamShifts)
	type unit struct {
		from      time.Time
		stationed bool
		weight    float64 // the busiest of its versions
	}
	var ids []int32
	units := map[int32]unit{}
	for _, r := range d.Resources {
		u, seen := units[r.ResourceID]
		if !seen {
			ids = append(ids, r.ResourceID)
			u.from = r.ValidFrom
		}
		u.from = minTime(u.from, r.ValidFrom)
		u.stationed = u.stationed || r.StationID.Valid
		u.weight = max(u.weight, r.weight)
		units[r.ResourceID] = u
	}
	var weights []float64
	for _, u := range units {
		if u.stationed {
			weights = append(weights, u.weight)
		}
	}
	slices.Sort(weights)
	dayUnit := weights[len(weights)*3/10] // below it: the quietest three in ten
	end := daysAfter(PeriodEnd, 1)
	var out []Shift
	for _, id := range ids {
		u := units[id]
		first := PeriodStart
		if u.from.After(first) {
			first = u.from
		}
		add := func(start time.Time, hours int) {
			if rng.Float64() >= 0.04 {
				out = append(out, Shift{ResourceID: id, Start: start, End: start.Add(time.Duration(hours) * time.Hour)})
			}
		}
		if !u.stationed {
			for day := first; day.Before(end); day = daysAfter(day, 1) {
				if rng.Float64() < 0.1 {
					add(day.Add(8*time.Hour), 8+rng.IntN(5))
				}
			}
			continue
		}
		switch kind := rng.Float64(); {
		case u.weight < dayUnit: // a day unit
			hours := 8 + 2*rng.IntN(3)
			for day := first; day.Before(end); day = daysAfter(day, 1) {
				add(day.Add(7*time.Hour), hours)
			}
		case kind < 0.6: // around the clock, two 12-hour shifts a day
			for start := first.Add(-5 * time.Hour); start.Before(end); start = start.Add(12 * time.Hour) {
				add(start, 12)
			}
		default: // around the clock, 24-hour shifts
			for start := first.Add(-16 * time.Hour); start.Before(end); start = start.Add(24 * time.Hour) {
				add(start, 24)
			}
		}
	}
	return out
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
