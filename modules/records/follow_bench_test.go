package records_test

import (
	"fmt"
	"testing"

	"github.com/emsanalytics/emsquery/modules/records"
	"github.com/emsanalytics/emsquery/platform/replication"
	"github.com/emsanalytics/emsquery/platform/replication/delta"
)

// What following one load costs per row and question: a load of 1,000 records applied to a
// question with a date range and a filter, keyed by one text column and by the record's time
// (record_series' key needs the time parsed).
//
//	go test ./modules/records/ -run '^$' -bench FollowApply -benchmem
func BenchmarkFollowApply(b *testing.B) {
	text := func(s string) replication.Value { return replication.Value{Kind: replication.Text, Text: s} }
	rel := &replication.Relation{Table: records.RecordTable, Columns: []replication.Column{
		{Name: "record_id", TypeName: "int8"}, {Name: "occurred_at", TypeName: "timestamp"},
		{Name: "station_id", TypeName: "int4"}, {Name: "station", TypeName: "text"},
		{Name: "sk_resource", TypeName: "int8"}, {Name: "sk_patient", TypeName: "int8"},
		{Name: "degree_of_urgency", TypeName: "text"}, {Name: "distance", TypeName: "numeric", TypeMod: 7<<16 | 2 + 4},
		{Name: "response_time_s", TypeName: "int4"}, {Name: "municipality", TypeName: "text"},
		{Name: "transported", TypeName: "bool"},
	}}
	tx := &replication.Transaction{Tables: []string{records.RecordTable}}
	for i := range 1000 {
		tx.Rows = append(tx.Rows, replication.Row{Op: replication.Insert, Relation: rel, New: []replication.Value{
			text(fmt.Sprint(1000000 + i)), text(fmt.Sprintf("2025-06-%02d %02d:%02d:00", 1+i%28, i%24, i%60)),
			text(fmt.Sprint(1 + i%30)), text(fmt.Sprintf("Station %d", 1+i%30)), text(fmt.Sprint(1 + i%200)), {Kind: replication.Null},
			text([]string{"A", "H", "V"}[i%3]), text(fmt.Sprintf("%d.50", i%120)), text(fmt.Sprint(200 + i%1500)),
			text(fmt.Sprintf("Municipality %d", i%50)), text([]string{"t", "f", "t"}[i%3]),
		}})
	}
	urgency := "H"
	f := records.RecordFilter{StartDate: "2025-01-01", EndDate: "2025-12-31",
		Filters: []records.Filter{{Column: "degree_of_urgency", Operator: "EQUALS", Value: &urgency}}}
	where, ok := f.Selects(func(records.Column) bool { return true })
	if !ok {
		b.Fatal("filter not followed")
	}
	municipality, _ := records.LookupColumn("municipality")
	occurred, _ := records.LookupColumn("occurred_at")
	keys := map[string]func(delta.Row) (delta.Key, error){
		"text": func(r delta.Row) (delta.Key, error) {
			v, err := records.ValueText(municipality, r)
			return delta.MakeKey(v), err
		},
		"time": func(r delta.Row) (delta.Key, error) {
			v, err := records.ValueText(occurred, r)
			if err != nil || v == nil {
				return "", err
			}
			t, err := records.ParseTimestamp(*v)
			label := t.Format("2006-01")
			return delta.MakeKey(&label), err
		},
	}
	for name, key := range keys {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				c := delta.NewCounter(delta.Selector{Table: records.RecordTable, Where: where, Key: key}, map[delta.Key]int64{}, nil)
				if _, err := c.Apply(tx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(tx.Rows)), "ns/row")
		})
	}
}
