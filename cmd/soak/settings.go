// The soak's settings, read from the environment (SOAK_*; see the package comment).

package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

type settings struct {
	duration       time.Duration
	rate           int
	records        int
	maxRSSGrowth   float64
	maxGoroutineUp int
	notifyEvery    time.Duration
	loadEvery      time.Duration
	churnEvery     time.Duration
}

func readSettings() (settings, error) {
	s := settings{duration: 10 * time.Minute, rate: 50, records: 200_000, maxRSSGrowth: 20, maxGoroutineUp: 5, notifyEvery: 30 * time.Second,
		loadEvery: time.Minute, churnEvery: 2 * time.Second}
	var errs []error
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{{"SOAK_DURATION", &s.duration}, {"SOAK_NOTIFY_EVERY", &s.notifyEvery},
		{"SOAK_LOAD_EVERY", &s.loadEvery}, {"SOAK_STREAM_EVERY", &s.churnEvery}} {
		if v := os.Getenv(d.name); v != "" {
			t, err := time.ParseDuration(v)
			if err != nil || t <= 0 {
				errs = append(errs, fmt.Errorf("%s: %q is not a positive duration (e.g. 10m)", d.name, v))
			}
			*d.dst = t
		}
	}
	ints := []struct {
		name string
		dst  *int
	}{{"SOAK_RATE", &s.rate}, {"SOAK_RECORDS", &s.records}, {"SOAK_MAX_GOROUTINE_GROWTH", &s.maxGoroutineUp}}
	for _, i := range ints {
		if v := os.Getenv(i.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || (n == 0 && i.name != "SOAK_MAX_GOROUTINE_GROWTH") {
				errs = append(errs, fmt.Errorf("%s: %q is not a positive number", i.name, v))
			}
			*i.dst = n
		}
	}
	if v := os.Getenv("SOAK_MAX_RSS_GROWTH"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 {
			errs = append(errs, fmt.Errorf("SOAK_MAX_RSS_GROWTH: %q is not a percentage", v))
		}
		s.maxRSSGrowth = f
	}
	if s.rate > 1000 {
		errs = append(errs, fmt.Errorf("SOAK_RATE: %d is more than this soak sends (1000)", s.rate))
	}
	return s, errors.Join(errs...)
}
