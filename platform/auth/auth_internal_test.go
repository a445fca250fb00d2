package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

func hexDigest(s string) string {
	d := sha256.Sum256([]byte(s))
	return hex.EncodeToString(d[:])
}

func TestFindMatchesOnlyItsKey(t *testing.T) {
	var entries []string
	for i := range 5 {
		entries = append(entries, fmt.Sprintf(`{"name":"k%d","sha256":%q,"scopes":["graphql"]}`, i, hexDigest(fmt.Sprintf("secret-%d", i))))
	}
	keys, err := parseKeyFile([]byte("[" + strings.Join(entries, ",") + "]"))
	if err != nil {
		t.Fatal(err)
	}
	set := &keySet{keys: keys}
	for i := range 5 {
		k := set.find(fmt.Sprintf("secret-%d", i))
		if k == nil || k.name != fmt.Sprintf("k%d", i) {
			t.Errorf("secret-%d found %v", i, k)
		}
	}
	for _, wrong := range []string{"", "secret-5", "secret-", hexDigest("secret-0")} {
		if k := set.find(wrong); k != nil {
			t.Errorf("%q found %s", wrong, k.name)
		}
	}
}

func TestParseKeyFileErrorsShowNoHash(t *testing.T) {
	h := hexDigest("a key")
	for name, c := range map[string]struct{ file, want string }{
		"truncated":              {`[{"name":"a","sha256":"` + h, "ends too early"},
		"syntax":                 {`[{"name":"a","sha256":"` + h + `" "scopes":[]}]`, "invalid JSON at byte"},
		"not a list":             {`{"name":"a"}`, "JSON list"},
		"unknown field":          {`[{"name":"a","sha256":"` + h + `","scopes":["graphql"],"scope":"x"}]`, `unknown field "scope"`},
		"short hash":             {`[{"name":"a","sha256":"` + h[:60] + `","scopes":["graphql"]}]`, "64 hex characters"},
		"hash in scopes":         {`[{"name":"a","sha256":"` + h + `","scopes":["` + h + `"]}]`, "a text of 64 characters"},
		"no scope":               {`[{"name":"a","sha256":"` + h + `","scopes":[]}]`, "scopes is empty"},
		"bad name":               {`[{"name":"a b","sha256":"` + h + `","scopes":["graphql"]}]`, "entry 0: name must be"},
		"reserved name":          {`[{"name":"default","sha256":"` + h + `","scopes":["graphql"]}]`, "stands for AUTHENTICATION__API_KEY"},
		"duplicate name":         {`[{"name":"a","sha256":"` + h + `","scopes":["graphql"]},{"name":"a","sha256":"` + hexDigest("b") + `","scopes":["graphql"]}]`, "used twice"},
		"duplicate key":          {`[{"name":"a","sha256":"` + h + `","scopes":["graphql"]},{"name":"b","sha256":"` + h + `","scopes":["graphql"]}]`, "entry 1 (b): the same key as a"},
		"negative rate":          {`[{"name":"a","sha256":"` + h + `","scopes":["graphql"],"rate_per_second":-1}]`, "rate_per_second"},
		"negative max_in_flight": {`[{"name":"a","sha256":"` + h + `","scopes":["graphql"],"max_in_flight":-1}]`, "max_in_flight must be"},
		"negative max_streams":   {`[{"name":"a","sha256":"` + h + `","scopes":["graphql"],"max_streams":-1}]`, "max_streams must be"},
		"negative min_cell":      {`[{"name":"a","sha256":"` + h + `","scopes":["graphql"],"min_cell":-1}]`, "min_cell must be"},
		"min_cell above 1000":    {`[{"name":"a","sha256":"` + h + `","scopes":["graphql"],"min_cell":1001}]`, "min_cell must be"},
		"burst, no rate":         {`[{"name":"a","sha256":"` + h + `","scopes":["graphql"],"burst":3}]`, "burst is set without"},
		"trailing things":        {`[] []`, "more after"},
	} {
		_, err := parseKeyFile([]byte(c.file))
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q, want %q in it", name, err, c.want)
		}
		if strings.Contains(err.Error(), h[:16]) {
			t.Errorf("%s: error shows the hash: %q", name, err)
		}
	}
}

func TestReloadKeepsLimiter(t *testing.T) {
	c := &Checker{}
	file := func(rate float64, burst int, secret string) []key {
		keys, err := parseKeyFile([]byte(fmt.Sprintf(`[{"name":"a","sha256":%q,"scopes":["graphql"],"rate_per_second":%g,"burst":%d}]`, hexDigest(secret), rate, burst)))
		if err != nil {
			t.Fatal(err)
		}
		return keys
	}
	first := c.build(file(1, 2, "one"), nil)
	now := time.Now()
	k := &first.keys[0]
	for i, want := range []bool{true, true, false} {
		if allowed := k.wait(now) == 0; allowed != want {
			t.Fatalf("request %d within the burst of 2: allowed %v, want %v", i+1, allowed, want)
		}
	}
	// A rotated key (same name, new key) keeps the spent burst; a new rate applies at once.
	second := c.build(file(1, 2, "two"), first)
	if second.keys[0].limiter != k.limiter {
		t.Fatal("the limiter was replaced on reload")
	}
	if second.keys[0].wait(now) == 0 {
		t.Error("a reload gave a spent key a new burst")
	}
	third := c.build(file(1000, 5, "two"), second)
	if d := third.keys[0].wait(now.Add(10 * time.Millisecond)); d != 0 {
		t.Errorf("the new rate is not in force: wait %s", d)
	}
	added, removed, changed := diff(first, third)
	if len(added) != 0 || len(removed) != 0 || len(changed) != 1 {
		t.Errorf("diff: added %v removed %v changed %v", added, removed, changed)
	}
}

// A reload keeps the count of a key's requests in flight (the requests running across it give
// back their places to that count) and puts a new max_in_flight in force.
func TestReloadKeepsInFlight(t *testing.T) {
	c := &Checker{}
	file := func(maxInFlight int) []key {
		keys, err := parseKeyFile([]byte(fmt.Sprintf(`[{"name":"a","sha256":%q,"scopes":["graphql"],"max_in_flight":%d}]`, hexDigest("one"), maxInFlight)))
		if err != nil {
			t.Fatal(err)
		}
		return keys
	}
	first := c.build(file(2), nil)
	first.keys[0].running.Add(2)
	second := c.build(file(3), first)
	if second.keys[0].running != first.keys[0].running || second.keys[0].running.Load() != 2 || second.keys[0].maxInFlight != 3 {
		t.Errorf("after the reload: running %d (same counter %v), max_in_flight %d", second.keys[0].running.Load(),
			second.keys[0].running == first.keys[0].running, second.keys[0].maxInFlight)
	}
	if _, _, changed := diff(first, second); len(changed) != 1 {
		t.Errorf("a new max_in_flight is not a change: %v", changed)
	}
}

// CarriesKey, asked before a body is read, agrees with the key check on what a valid key is
// (the configured header, "Bearer" with Authorization), and counts no failure.
func TestCarriesKey(t *testing.T) {
	for _, tc := range []struct {
		header, value string
		configured    string
		want          bool
	}{
		{"x-api-key", "the-key", "x-api-key", true},
		{"X-Api-Key", "the-key", "x-api-key", true},
		{"x-api-key", "another", "x-api-key", false},
		{"x-api-key", "", "x-api-key", false},
		{"other", "the-key", "x-api-key", false},
		{"Authorization", "Bearer the-key", "Authorization", true},
		{"Authorization", "bearer  the-key", "Authorization", true},
		{"Authorization", "the-key", "Authorization", true},
		{"Authorization", "Bearer another", "Authorization", false},
		{"Authorization", "Bearer the-key", "x-api-key", false},
	} {
		c := &Checker{header: tc.configured, bearerOK: strings.EqualFold(tc.configured, "Authorization"), failures: newFailureLimiter(1, nil)}
		c.keys.Store(&keySet{keys: []key{{name: DefaultKeyName, digest: sha256.Sum256([]byte("the-key"))}}})
		var h fasthttp.RequestHeader
		if tc.value != "" {
			h.Set(tc.header, tc.value)
		}
		if got := c.CarriesKey(&h); got != tc.want {
			t.Errorf("%s: %q with %s configured: %v, want %v", tc.header, tc.value, tc.configured, got, tc.want)
		}
		if len(c.failures.counts) != 0 {
			t.Errorf("%s: %q counted a failure", tc.header, tc.value)
		}
	}
}
