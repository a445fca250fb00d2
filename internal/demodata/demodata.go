// Package demodata generates a deterministic, EMS-like data set for the analytics schema
// (contract section 1) and loads it into PostgreSQL with COPY (see Load).
//
// The data exists so that the demo, benchmarks and manual testing see the shapes real data has:
// day/night and weekday rhythms, skewed urgencies, a slowly changing resource dimension, NULLs
// in every nullable column, station names with non-ASCII letters and an apostrophe. Nothing in
// it comes from real people.
//
// Determinism: every table draws from its own PCG stream derived from the seed, so the same seed
// and record count give byte-identical rows from the same program, whatever order the tables are
// produced in. The large tables (patients, records, oxygen) are produced by iterators that keep
// only one day of records in memory, so loading a million records needs a few megabytes.
package demodata

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// The records cover two whole calendar years, ending on PeriodEnd (inclusive).
var (
	PeriodStart = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	PeriodEnd   = time.Date(2025, 12, 31, 0, 0, 0, 0, time.UTC)
)

// periodDays is the number of days from PeriodStart to PeriodEnd, both included.
var periodDays = int(PeriodEnd.Sub(PeriodStart).Hours()/24) + 1

// AgeReference is the date at which dim_patient.age is the patient's age in whole years, so that
// age and date_of_birth agree (the dimension has one age per patient, not one per record).
var AgeReference = PeriodEnd

// DefaultSeed is the seed used when none is given; any fixed value would do.
const DefaultSeed uint64 = 1

// Config sizes and seeds a data set.
type Config struct {
	Records int    // rows of fact_record
	Seed    uint64 // same seed and Records: same rows
}

// Independent random streams, one per concern, so that adding a draw to one table does not
// change any other table and the tables can be generated in any order.
const (
	streamDimensions uint64 = iota + 1
	streamCalendar
	streamRecords
	streamPatients
	streamTimes  // the time points of schema/measures.sql (times.go)
	streamShifts // fact_unit_shift
)

func newRNG(seed, stream uint64) *rand.Rand {
	// The constant spreads small stream numbers across PCG's sequence space.
	return rand.New(rand.NewPCG(seed, stream*0x9E3779B97F4A7C15))
}

// Station is a row of dim_station.
type Station struct {
	StationID   int32
	StationName string

	municipality string  // home municipality of most of its missions
	weight       float64 // relative mission volume
}

// Resource is a row of dim_resource: one version of a resource.
type Resource struct {
	SKResource int64
	ResourceID int32
	Callsign   string
	StationID  pgtype.Int4
	Station    pgtype.Text
	ValidFrom  time.Time
	ValidTo    pgtype.Date // inclusive last day; NULL for the current version

	weight       float64 // relative share of missions while valid
	municipality string  // station's home municipality; "" when not stationed
}

// Patient is a row of dim_patient.
type Patient struct {
	SKPatient   int64
	Age         pgtype.Int4
	DateOfBirth pgtype.Date
	Gender      pgtype.Text
	Weight      pgtype.Numeric // numeric(5,1), kg
}

// Record is a row of fact_record.
type Record struct {
	RecordID        int64
	OccurredAt      time.Time // local time, UTC location (timestamp without time zone)
	StationID       pgtype.Int4
	Station         pgtype.Text
	SKResource      pgtype.Int8
	SKPatient       pgtype.Int8
	DegreeOfUrgency pgtype.Text
	Distance        pgtype.Numeric // numeric(7,2), km
	ResponseTimeS   pgtype.Int4
	Municipality    pgtype.Text
	Transported     pgtype.Bool
}

// Oxygen is a row of fact_oxygen.
type Oxygen struct {
	SKOxygen       int64
	RecordID       int64
	Route          pgtype.Text
	FlowRate       pgtype.Numeric // numeric(4,1), l/min
	AdministeredAt pgtype.Timestamp
}

// Column lists in the order the Values methods return them, for COPY.
var (
	StationColumns  = []string{"station_id", "station_name"}
	ResourceColumns = []string{"sk_resource", "resource_id", "callsign", "station_id", "station", "valid_from", "valid_to"}
	PatientColumns  = []string{"sk_patient", "age", "date_of_birth", "gender", "weight"}
	RecordColumns   = []string{"record_id", "occurred_at", "station_id", "station", "sk_resource", "sk_patient",
		"degree_of_urgency", "distance", "response_time_s", "municipality", "transported"}
	OxygenColumns = []string{"sk_oxygen", "record_id", "route", "flow_rate", "administered_at"}
)

// Values returns the row in StationColumns order.
func (s Station) Values() []any { return []any{s.StationID, s.StationName} }

// Values returns the row in ResourceColumns order.
func (r Resource) Values() []any {
	return []any{r.SKResource, r.ResourceID, r.Callsign, r.StationID, r.Station, pgtype.Date{Time: r.ValidFrom, Valid: true}, r.ValidTo}
}

// Values returns the row in PatientColumns order.
func (p Patient) Values() []any {
	return []any{p.SKPatient, p.Age, p.DateOfBirth, p.Gender, p.Weight}
}

// Values returns the row in RecordColumns order.
func (r Record) Values() []any {
	return []any{r.RecordID, pgtype.Timestamp{Time: r.OccurredAt, Valid: true}, r.StationID, r.Station, r.SKResource,
		r.SKPatient, r.DegreeOfUrgency, r.Distance, r.ResponseTimeS, r.Municipality, r.Transported}
}

// Values returns the row in OxygenColumns order.
func (o Oxygen) Values() []any {
	return []any{o.SKOxygen, o.RecordID, o.Route, o.FlowRate, o.AdministeredAt}
}

// Municipalities that records name; stations belong to one of them.
var municipalities = []struct {
	name string
	size float64 // relative population, drives mission volume
}{
	{"Oslo", 3.0}, {"Bergen", 2.0}, {"Trondheim", 1.6}, {"Stavanger", 1.4}, {"Kristiansand", 1.1},
	{"Tromsø", 0.9}, {"Bodø", 0.7}, {"Ålesund", 0.8}, {"Drammen", 1.0}, {"Fredrikstad", 0.9},
	{"Hamar", 0.6}, {"Molde", 0.5}, {"Lillehammer", 0.5}, {"Sandnes", 0.9}, {"Haugesund", 0.6},
}

// stationNames are taken in order; the first 20 (the smallest data set) already hold the
// awkward cases the service must handle: non-ASCII letters and an apostrophe.
var stationNames = []struct{ name, municipality string }{
	{"Oslo Sentrum", "Oslo"}, {"Bergen Haukeland", "Bergen"}, {"Trondheim St. Olav's", "Trondheim"},
	{"Ålesund Sør", "Ålesund"}, {"Stavanger Våland", "Stavanger"}, {"Tromsø Breivika", "Tromsø"},
	{"Bodø Rønvik", "Bodø"}, {"Kristiansand Lund", "Kristiansand"}, {"Drammen Åssiden", "Drammen"},
	{"Fredrikstad Øst", "Fredrikstad"}, {"Oslo Ullevål", "Oslo"}, {"Bergen Åsane", "Bergen"},
	{"Hamar Ringsaker", "Hamar"}, {"Molde Årø", "Molde"}, {"Lillehammer Nord", "Lillehammer"},
	{"Sandnes Gann", "Sandnes"}, {"Haugesund Karmøy", "Haugesund"}, {"Oslo Grorud", "Oslo"},
	{"Trondheim Heimdal", "Trondheim"}, {"Stavanger Madla", "Stavanger"}, {"Bergen Fyllingsdalen", "Bergen"},
	{"Ålesund Nord", "Ålesund"}, {"Tromsø Kvaløya", "Tromsø"}, {"Kristiansand Vågsbygd", "Kristiansand"},
	{"Drammen Konnerud", "Drammen"}, {"Oslo Søndre Nordstrand", "Oslo"}, {"Fredrikstad Gamlebyen", "Fredrikstad"},
	{"Bodø Hunstad", "Bodø"}, {"Hamar Stange", "Hamar"}, {"Molde Hjelset", "Molde"},
	{"Sandnes Ganddal", "Sandnes"}, {"Haugesund Nord", "Haugesund"}, {"Lillehammer Fåberg", "Lillehammer"},
	{"Trondheim Byåsen", "Trondheim"}, {"Bergen Laksevåg", "Bergen"}, {"Stavanger Hundvåg", "Stavanger"},
	{"Tromsø Tromsdalen", "Tromsø"}, {"Oslo Majorstuen", "Oslo"}, {"Kristiansand Søm", "Kristiansand"},
	{"Ålesund Spjelkavik", "Ålesund"},
}

const (
	minStations       = 20
	reserveResources  = 3    // resources with no station
	movedShare        = 0.10 // resource_ids that get a second version
	patientsPerRecord = 1 / 1.1
)

// Dataset holds the small dimensions in memory and produces the large tables on demand.
type Dataset struct {
	cfg       Config
	Stations  []Station
	Resources []Resource // ordered by SKResource
	Patients  int64      // rows of dim_patient; sk_patient runs from 1 to Patients

	dayCounts []int       // records per day of the period
	dayPick   []pickTable // resource versions valid on each day, weighted
}

// pickTable draws an index with probability proportional to its weight.
type pickTable struct {
	idx []int     // into Dataset.Resources
	cum []float64 // cumulative weights
}

func (p *pickTable) pick(rng *rand.Rand) int {
	x := rng.Float64() * p.cum[len(p.cum)-1]
	i, _ := slices.BinarySearch(p.cum, x)
	if i >= len(p.idx) {
		i = len(p.idx) - 1
	}
	return p.idx[i]
}

// New builds the dimensions and the calendar of a data set. It is cheap (milliseconds) whatever
// the size; the big tables come from Patients and Records iterators.
func New(cfg Config) (*Dataset, error) {
	if cfg.Records < 0 {
		return nil, fmt.Errorf("records must not be negative, got %d", cfg.Records)
	}
	d := &Dataset{cfg: cfg}
	rng := newRNG(cfg.Seed, streamDimensions)
	d.buildStations(rng)
	d.buildResources(rng)
	d.Patients = int64(math.Round(float64(cfg.Records) * patientsPerRecord))
	d.buildCalendar(newRNG(cfg.Seed, streamCalendar))
	d.buildDayPick()
	return d, nil
}

// Config returns the configuration the data set was built from.
func (d *Dataset) Config() Config { return d.cfg }

// stationCount grows slowly with the data: 20 stations up to 100k records, 30 at 1M, 40 at most.
func stationCount(records int) int {
	return min(max(minStations, minStations+records/100_000), len(stationNames))
}

func (d *Dataset) buildStations(rng *rand.Rand) {
	n := stationCount(d.cfg.Records)
	size := map[string]float64{}
	for _, m := range municipalities {
		size[m.name] = m.size
	}
	for i := range n {
		sn := stationNames[i]
		d.Stations = append(d.Stations, Station{
			StationID:    int32(i + 1),
			StationName:  sn.name,
			municipality: sn.municipality,
			weight:       size[sn.municipality] * (0.6 + 0.8*rng.Float64()),
		})
	}
}

func daysAfter(t time.Time, days int) time.Time { return t.AddDate(0, 0, days) }

// buildResources creates ~5 resources per station (none for the last station, which was opened
// but not yet equipped), a few unstationed reserve vehicles, and moves ~10% of the resources to
// another station during the period, which adds a second version (SCD type 2).
func (d *Dataset) buildResources(rng *rand.Rand) {
	units := make([]int, len(d.Stations)) // last unit number used per station
	var current []Resource                // one per resource_id, before moves
	resourceID := int32(0)
	callsign := func(st int) string {
		units[st]++
		return fmt.Sprintf("AMB %d-%d", d.Stations[st].StationID, units[st])
	}
	for st := range len(d.Stations) - 1 { // the last station stays empty on purpose
		m := 3 + rng.IntN(5)
		for range m {
			resourceID++
			validFrom := daysAfter(time.Date(2015, 1, 1, 0, 0, 0, 0, time.UTC), rng.IntN(9*365))
			if rng.Float64() < 0.04 { // commissioned during the period
				validFrom = daysAfter(PeriodStart, 30+rng.IntN(600))
			}
			s := d.Stations[st]
			current = append(current, Resource{
				ResourceID:   resourceID,
				Callsign:     callsign(st),
				StationID:    pgtype.Int4{Int32: s.StationID, Valid: true},
				Station:      pgtype.Text{String: s.StationName, Valid: true},
				ValidFrom:    validFrom,
				weight:       s.weight * (0.6 + 0.8*rng.Float64()) / 5,
				municipality: s.municipality,
			})
		}
	}
	stationed := len(current)
	for i := range reserveResources {
		resourceID++
		current = append(current, Resource{
			ResourceID: resourceID,
			Callsign:   fmt.Sprintf("RES %d", i+1),
			ValidFrom:  daysAfter(time.Date(2012, 1, 1, 0, 0, 0, 0, time.UTC), rng.IntN(5*365)),
			weight:     0.02,
		})
	}

	// Move a fixed share of the stationed resources; the old version ends the day before the
	// new one starts, so that every date maps to exactly one version.
	nMoves := max(1, int(math.Round(movedShare*float64(len(current)))))
	perm := rng.Perm(stationed)[:min(nMoves, stationed)]
	slices.Sort(perm)
	var moved []Resource
	lastDay := daysAfter(PeriodEnd, -30)
	for _, i := range perm {
		old := &current[i]
		lo := old.ValidFrom
		if lo.Before(PeriodStart) {
			lo = PeriodStart
		}
		lo = daysAfter(lo, 30)
		span := int(lastDay.Sub(lo).Hours()/24) + 1
		if span < 1 {
			continue
		}
		moveDay := daysAfter(lo, rng.IntN(span))
		to := rng.IntN(len(d.Stations) - 2) // any equipped station but the current one
		if int32(to+1) >= old.StationID.Int32 {
			to++
		}
		s := d.Stations[to]
		old.ValidTo = pgtype.Date{Time: daysAfter(moveDay, -1), Valid: true}
		moved = append(moved, Resource{
			ResourceID:   old.ResourceID,
			Callsign:     callsign(to),
			StationID:    pgtype.Int4{Int32: s.StationID, Valid: true},
			Station:      pgtype.Text{String: s.StationName, Valid: true},
			ValidFrom:    moveDay,
			weight:       s.weight * (0.6 + 0.8*rng.Float64()) / 5,
			municipality: s.municipality,
		})
	}
	// An ETL appends new versions as the changes happen: later moves get larger keys.
	slices.SortStableFunc(moved, func(a, b Resource) int { return a.ValidFrom.Compare(b.ValidFrom) })
	d.Resources = append(current, moved...)
	for i := range d.Resources {
		d.Resources[i].SKResource = int64(i + 1)
	}
}

// buildCalendar spreads the records over the days: a weekly rhythm, more missions in winter,
// peaks on New Year's Eve/Day and the 17th of May, and some day-to-day noise. The per-day counts
// add up to exactly Records.
func (d *Dataset) buildCalendar(rng *rand.Rand) {
	weekday := [7]float64{0.93, 1.05, 1.00, 0.99, 1.00, 1.06, 1.00} // Sunday first
	weights := make([]float64, periodDays)
	total := 0.0
	for i := range weights {
		day := daysAfter(PeriodStart, i)
		w := weekday[day.Weekday()]
		w *= 1 + 0.08*math.Cos(2*math.Pi*float64(day.YearDay()-15)/365)
		switch {
		case day.Month() == time.January && day.Day() == 1, day.Month() == time.December && day.Day() == 31:
			w *= 1.25
		case day.Month() == time.May && day.Day() == 17:
			w *= 1.2
		}
		w *= 0.9 + 0.2*rng.Float64()
		weights[i] = w
		total += w
	}
	d.dayCounts = make([]int, periodDays)
	cum, prev := 0.0, 0
	for i, w := range weights {
		cum += w
		upto := int(math.Round(float64(d.cfg.Records) * cum / total))
		if i == len(weights)-1 {
			upto = d.cfg.Records
		}
		d.dayCounts[i] = upto - prev
		prev = upto
	}
}

func (d *Dataset) buildDayPick() {
	d.dayPick = make([]pickTable, periodDays)
	for i := range d.dayPick {
		day := daysAfter(PeriodStart, i)
		var p pickTable
		sum := 0.0
		for j, r := range d.Resources {
			if r.ValidFrom.After(day) || (r.ValidTo.Valid && r.ValidTo.Time.Before(day)) {
				continue
			}
			sum += r.weight
			p.idx = append(p.idx, j)
			p.cum = append(p.cum, sum)
		}
		d.dayPick[i] = p
	}
}

// numeric returns v/10^scale as a numeric value.
func numeric(v int64, scale int32) pgtype.Numeric {
	return pgtype.Numeric{Int: big.NewInt(v), Exp: -scale, Valid: true}
}

// choose returns the index of the bucket x (uniform in [0,1)) falls in; weights sum to 1.
func choose(rng *rand.Rand, weights []float64) int {
	x := rng.Float64()
	for i, w := range weights {
		if x < w {
			return i
		}
		x -= w
	}
	return len(weights) - 1
}

// PatientIter produces dim_patient rows in sk_patient order.
type PatientIter struct {
	d   *Dataset
	rng *rand.Rand
	sk  int64
	cur Patient
}

// PatientRows starts a fresh iteration over dim_patient.
func (d *Dataset) PatientRows() *PatientIter {
	return &PatientIter{d: d, rng: newRNG(d.cfg.Seed, streamPatients)}
}

// Age buckets by decade (the last one is 90-100): patients of ambulances are mostly old.
var ageBuckets = []float64{0.04, 0.05, 0.08, 0.08, 0.09, 0.12, 0.15, 0.18, 0.16, 0.05}

var (
	genders       = []string{"female", "male", "other", "unknown", ""} // "" = NULL
	genderWeights = []float64{0.48, 0.49, 0.005, 0.02, 0.005}
)

// Next advances to the next patient; false when all have been produced.
func (it *PatientIter) Next() bool {
	if it.sk >= it.d.Patients {
		return false
	}
	it.sk++
	rng := it.rng
	p := Patient{SKPatient: it.sk}
	gender := genders[choose(rng, genderWeights)]
	p.Gender = pgtype.Text{String: gender, Valid: gender != ""}
	age := -1
	if rng.Float64() >= 0.01 {
		b := choose(rng, ageBuckets)
		age = b*10 + rng.IntN(10)
		if b == 9 {
			age = 90 + rng.IntN(11)
		}
		p.Age = pgtype.Int4{Int32: int32(age), Valid: true}
		// Born on a day that makes the patient exactly age years old on AgeReference.
		latest := AgeReference.AddDate(-age, 0, 0)
		earliest := AgeReference.AddDate(-age-1, 0, 1)
		span := int(latest.Sub(earliest).Hours()/24) + 1
		dob := daysAfter(earliest, rng.IntN(span))
		if rng.Float64() >= 0.02 { // sometimes only an estimated age is known
			p.DateOfBirth = pgtype.Date{Time: dob, Valid: true}
		}
	}
	if rng.Float64() >= 0.3 { // weight is often not recorded
		var mean float64
		switch {
		case age < 0:
			mean = 72
		case age < 18:
			mean = 4 + 3.3*float64(age)
		case gender == "female":
			mean = 68
		default:
			mean = 82
		}
		w := mean * (1 + 0.18*rng.NormFloat64())
		w = min(max(w, 2), 250)
		p.Weight = numeric(int64(math.Round(w*10)), 1)
	}
	it.cur = p
	return true
}

// Patient returns the current row.
func (it *PatientIter) Patient() Patient { return it.cur }

// Hour-of-day shares of missions: quiet early mornings, busy daytime; weekend nights are busier.
var (
	hourWeekday = []float64{2.6, 2.2, 1.9, 1.7, 1.6, 1.8, 2.5, 3.4, 4.4, 5.1, 5.5, 5.6,
		5.5, 5.4, 5.3, 5.3, 5.3, 5.2, 5.0, 4.7, 4.3, 3.9, 3.4, 2.9}
	hourWeekend = []float64{3.8, 3.6, 3.2, 2.6, 2.1, 1.9, 2.1, 2.6, 3.3, 4.2, 4.9, 5.2,
		5.3, 5.3, 5.2, 5.1, 5.0, 5.0, 4.9, 4.7, 4.5, 4.3, 4.1, 4.0}
	cumWeekday = cumulative(hourWeekday)
	cumWeekend = cumulative(hourWeekend)
)

func cumulative(w []float64) []float64 {
	out := make([]float64, len(w))
	sum := 0.0
	for i, x := range w {
		sum += x
		out[i] = sum
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}

// Urgency A (most urgent) is rare, C and D are the bulk; "" is NULL. Each urgency has its own
// median response time, transport probability and oxygen-count distribution.
var (
	urgencies      = []string{"A", "B", "C", "D", "E", ""}
	urgencyWeights = []float64{0.03, 0.12, 0.33, 0.35, 0.15, 0.02}
	medianResponse = []float64{480, 720, 1200, 1800, 2700, 1500}
	transportShare = []float64{0.85, 0.80, 0.72, 0.68, 0.55, 0.60}
	oxygenCounts   = [][]float64{ // P(0), P(1), P(2), P(3): about 0.3 per record overall
		{0.35, 0.30, 0.20, 0.15},
		{0.55, 0.25, 0.13, 0.07},
		{0.78, 0.14, 0.06, 0.02},
		{0.88, 0.09, 0.02, 0.01},
		{0.95, 0.04, 0.01, 0.00},
		{0.85, 0.10, 0.04, 0.01},
	}
)

var (
	routes       = []string{"nasal cannula", "mask", "non-rebreather mask", "bag-valve mask", ""}
	routeWeights = []float64{0.45, 0.25, 0.20, 0.05, 0.05}
	routeFlow    = [][2]int{{10, 60}, {50, 100}, {100, 150}, {100, 150}, {20, 150}} // tenths of l/min
)

// RecordIter produces fact_record rows in record_id order (which is also occurred_at order), each
// with its fact_oxygen rows.
type RecordIter struct {
	d        *Dataset
	rng      *rand.Rand
	day      int
	secs     []int32 // seconds of the day of the current day's records, sorted
	pos      int
	id       int64
	skOxygen int64
	patients int64 // patients referenced so far; they are numbered by first appearance
	cur      Record
	oxygen   []Oxygen
	times    Times
	timesRNG *rand.Rand // the records' own stream stays as it is without the time points
}

// RecordRows starts a fresh iteration over fact_record (and fact_oxygen).
func (d *Dataset) RecordRows() *RecordIter {
	return &RecordIter{d: d, rng: newRNG(d.cfg.Seed, streamRecords), timesRNG: newRNG(d.cfg.Seed, streamTimes), day: -1}
}

// Record returns the current record.
func (it *RecordIter) Record() Record { return it.cur }

// Times returns the current record's time columns (schema/measures.sql).
func (it *RecordIter) Times() Times { return it.times }

// Oxygen returns the current record's oxygen rows; the slice is reused by the next call to Next.
func (it *RecordIter) Oxygen() []Oxygen { return it.oxygen }

// Next advances to the next record; false when all have been produced.
func (it *RecordIter) Next() bool {
	d, rng := it.d, it.rng
	for it.pos >= len(it.secs) {
		it.day++
		if it.day >= periodDays {
			return false
		}
		it.startDay()
	}
	sec := it.secs[it.pos]
	it.pos++
	it.id++
	day := daysAfter(PeriodStart, it.day)
	r := Record{RecordID: it.id, OccurredAt: day.Add(time.Duration(sec) * time.Second)}

	municipality := ""
	if rng.Float64() >= 0.005 { // a few records lack the resource
		res := &d.Resources[d.dayPick[it.day].pick(rng)]
		r.SKResource = pgtype.Int8{Int64: res.SKResource, Valid: true}
		r.StationID, r.Station = res.StationID, res.Station
		municipality = res.municipality
	}
	switch x := rng.Float64(); {
	case x < 0.01:
		municipality = ""
	case x < 0.20 || municipality == "":
		municipality = municipalities[rng.IntN(len(municipalities))].name
	}
	r.Municipality = pgtype.Text{String: municipality, Valid: municipality != ""}

	if rng.Float64() >= 0.04 { // a few records have no patient
		r.SKPatient = pgtype.Int8{Int64: it.patient(), Valid: true}
	}

	u := choose(rng, urgencyWeights)
	r.DegreeOfUrgency = pgtype.Text{String: urgencies[u], Valid: urgencies[u] != ""}

	km := -1.0
	if rng.Float64() >= 0.04 {
		km = math.Exp(math.Log(12) + 0.9*rng.NormFloat64())
		km = min(max(km, 0.5), 150)
		r.Distance = numeric(int64(math.Round(km*100)), 2)
	}

	response := -1
	if rng.Float64() >= 0.03 {
		s := medianResponse[u] * math.Exp(0.45*rng.NormFloat64())
		if sec < 6*3600 {
			s *= 1.1 // fewer crews on duty at night
		}
		if km > 0 {
			s += 15 * km
		}
		response = int(min(max(s, 60), 4*3600))
		r.ResponseTimeS = pgtype.Int4{Int32: int32(response), Valid: true}
	}

	if rng.Float64() >= 0.03 {
		r.Transported = pgtype.Bool{Bool: rng.Float64() < transportShare[u], Valid: true}
	}
	it.cur = r
	it.times = drawTimes(it.timesRNG, r, u, km, sec < 6*3600)

	it.oxygen = it.oxygen[:0]
	n := choose(rng, oxygenCounts[u])
	given := r.OccurredAt.Add(time.Duration(max(response, 900)) * time.Second)
	for range n {
		it.skOxygen++
		o := Oxygen{SKOxygen: it.skOxygen, RecordID: r.RecordID}
		route := choose(rng, routeWeights)
		o.Route = pgtype.Text{String: routes[route], Valid: routes[route] != ""}
		lo, hi := routeFlow[route][0], routeFlow[route][1]
		flow := int64(lo + 5*rng.IntN((hi-lo)/5+1)) // steps of 0.5 l/min
		if rng.Float64() >= 0.03 {
			o.FlowRate = numeric(flow, 1)
		}
		given = given.Add(time.Duration(60+rng.IntN(20*60)) * time.Second)
		if rng.Float64() >= 0.02 {
			o.AdministeredAt = pgtype.Timestamp{Time: given, Valid: true}
		}
		it.oxygen = append(it.oxygen, o)
	}
	return true
}

// startDay draws the times of the current day's records.
func (it *RecordIter) startDay() {
	n := it.d.dayCounts[it.day]
	cum := cumWeekday
	if wd := daysAfter(PeriodStart, it.day).Weekday(); wd == time.Saturday || wd == time.Sunday {
		cum = cumWeekend
	}
	it.secs = it.secs[:0]
	for range n {
		h, _ := slices.BinarySearch(cum, it.rng.Float64())
		h = min(h, 23)
		it.secs = append(it.secs, int32(h*3600+it.rng.IntN(3600)))
	}
	slices.Sort(it.secs)
	it.pos = 0
}

// patient picks the record's sk_patient: mostly a new patient, sometimes one seen before. The
// share of new patients adapts so that all Patients rows end up referenced.
func (it *RecordIter) patient() int64 {
	total := it.d.Patients
	remaining := float64(int64(it.d.cfg.Records)-it.id+1) * 0.96
	if it.patients < total && (it.patients == 0 || it.rng.Float64()*remaining < float64(total-it.patients)) {
		it.patients++
		return it.patients
	}
	if it.patients == 0 {
		return 1 // only when there are no patients at all; cannot happen with Records > 0
	}
	return 1 + it.rng.Int64N(it.patients)
}
