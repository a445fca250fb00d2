package main

import (
	"net/http"
	"testing"
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
