package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The Cache column and the warm lines' verdict read the Cache-Status headers counted.
func TestCacheTally(t *testing.T) {
	var none cacheTally
	none.note(http.Header{})
	if !none.headerless() {
		t.Error("no header: not headerless")
	}
	var warm cacheTally
	for range 999 {
		warm.note(http.Header{headerCacheStatus: {cacheHit}})
	}
	warm.note(http.Header{headerCacheStatus: {cacheMiss}})
	if warm.headerless() || warm.hitShare() != 0.999 {
		t.Errorf("999 hits and a miss: headerless %v, share %v", warm.headerless(), warm.hitShare())
	}
	r := row{Warm: true, Cache: &warm}
	if got := r.cacheCell(); got != "on, 99.9% hits" {
		t.Errorf("cacheCell = %q", got)
	}
	r = row{Cache: &cacheTally{}}
	r.Cache.note(http.Header{headerCacheStatus: {cacheBypass}})
	if got := r.cacheCell(); got != "off" {
		t.Errorf("cold cacheCell = %q", got)
	}
	for f, want := range map[float64]string{1: "100%", 0.99999: "99.9%", 0.5: "50%", 0: "0%"} {
		if got := percent(f); got != want {
			t.Errorf("percent(%v) = %q, want %q", f, got, want)
		}
	}
}

// The processor-time table divides each side's times by its requests, and its sums' ratio is
// the hand-written side's sum over the service side's.
func TestRenderTimes(t *testing.T) {
	s := &dataSet{}
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	rows := []row{
		{Set: s, W: workload{Name: "light"}, Conc: lightConc, Svc: measurement{Requests: 10}, Hand: measurement{Requests: 10}},
		{Set: s, W: workload{Name: "heavy"}, Conc: 16,
			Svc: measurement{Requests: 4, Elapsed: time.Second}, SvcCPU: ms(100), SvcDB: ms(200), SvcDriver: ms(20),
			Hand: measurement{Requests: 5, Elapsed: time.Second}, HandDB: ms(250), HandDriver: ms(50)},
	}
	var b strings.Builder
	renderTimes(func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }, s, rows, true)
	out := b.String()
	// Service side 25 + 50 + 5 = 80 ms a request, hand-written 50 + 10 = 60: 0.75.
	if want := "| heavy | 25.0 | 50.0 | 5.00 | 80.0 | 50.0 | 10.0 | 60.0 | 0.75 | 0.80 |"; !strings.Contains(out, want) {
		t.Errorf("renderTimes:\n%s\nwant the line %s", out, want)
	}
	if strings.Contains(out, "| light |") {
		t.Errorf("renderTimes wrote the c=%d line:\n%s", lightConc, out)
	}
}

// The processor-time table's columns are explained once, under the first data set that has it.
func TestRenderTimesExplainedOnce(t *testing.T) {
	small, large := &dataSet{}, &dataSet{}
	var rows []row
	for _, s := range []*dataSet{small, large} {
		rows = append(rows, row{Set: s, W: workload{Name: "heavy"}, Conc: 16, Svc: measurement{Requests: 1}, Hand: measurement{Requests: 1}})
	}
	var b strings.Builder
	p := func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }
	explained := false
	for _, s := range []*dataSet{small, large} {
		explained = renderTimes(p, s, rows, !explained) || explained
	}
	out := b.String()
	if n := strings.Count(out, "**Sums' ratio**"); n != 1 {
		t.Errorf("the columns explained %d times, want once:\n%s", n, out)
	}
	if n := strings.Count(out, "| heavy |"); n != 2 {
		t.Errorf("%d lines, want one per data set:\n%s", n, out)
	}
}

// The markers count only as lines of their own: a page that names them in its prose keeps its
// prose, and its section is the one replaced.
func TestReplaceSectionMarkerLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "page.md")
	page := "-doc rewrites `<!-- results:begin -->` to `<!-- results:end -->`.\n\n<!-- results:begin -->\nold\n<!-- results:end -->\nafter\n"
	if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := replaceSection(path, "results", "new\n"); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "-doc rewrites `<!-- results:begin -->` to `<!-- results:end -->`.\n\n<!-- results:begin -->\nnew\n<!-- results:end -->\nafter\n"
	if string(got) != want {
		t.Errorf("page:\n%s\nwant:\n%s", got, want)
	}
	if err := replaceSection(path, "live", "x"); err == nil {
		t.Error("a page without the live section: no error")
	}
}
