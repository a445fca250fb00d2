package otel

import (
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// MaxSets bounds each AttrSets; past it a set is built per measurement rather than kept, so a
// client that invents operation names cannot grow the memory.
const MaxSets = 2000

// AttrSets keeps the OpenTelemetry attribute sets of measurements per key, so that recording a
// measurement builds its attribute set once per combination instead of once per request: the
// sets built for each key, up to MaxSets, as option slices (passing a slice with ... allocates
// nothing).
type AttrSets[K comparable] struct {
	build func(K) attribute.Set
	own   func(K) K
	mu    sync.RWMutex
	sets  map[K][]metric.RecordOption
}

// NewAttrSets returns a cache that builds a key's set with build. own, when not nil, copies the
// key's strings before the cache keeps it, so that a kept key does not pin a larger string (a
// whole GraphQL document) it was cut from.
func NewAttrSets[K comparable](build func(K) attribute.Set, own func(K) K) *AttrSets[K] {
	return &AttrSets[K]{build: build, own: own, sets: map[K][]metric.RecordOption{}}
}

// Get returns the record options that carry k's attribute set.
func (c *AttrSets[K]) Get(k K) []metric.RecordOption {
	c.mu.RLock()
	opt, ok := c.sets[k]
	c.mu.RUnlock()
	if ok {
		return opt
	}
	if c.own != nil {
		k = c.own(k)
	}
	opt = []metric.RecordOption{metric.WithAttributeSet(c.build(k))}
	c.mu.Lock()
	if len(c.sets) < MaxSets {
		c.sets[k] = opt
	}
	c.mu.Unlock()
	return opt
}
