package auth

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strings"
)

// Scope is what a key may use: one GraphQL endpoint, or the CSV export.
type Scope string

const (
	ScopeGraphQL Scope = "graphql" // /graphql
	ScopeServe   Scope = "serve"   // /serve/graphql
	ScopeLookups Scope = "lookups" // /lookups/graphql
	ScopeExport  Scope = "export"  // the CSV export
)

// AllScopes lists every scope, in the order messages name them.
var AllScopes = []Scope{ScopeGraphQL, ScopeServe, ScopeLookups, ScopeExport}

// scopeSet is a set of scopes as bits, in AllScopes' order.
type scopeSet uint8

func (s scopeSet) has(scope Scope) bool { return s&scopeBit(scope) != 0 }

func scopeBit(scope Scope) scopeSet {
	if i := slices.Index(AllScopes, scope); i >= 0 {
		return 1 << i
	}
	return 0
}

func (s scopeSet) names() []string {
	var out []string
	for _, sc := range AllScopes {
		if s.has(sc) {
			out = append(out, string(sc))
		}
	}
	return out
}

// DefaultKeyName is the name AUTHENTICATION__API_KEY goes by in logs and metrics; a key in the
// file may not take it.
const DefaultKeyName = "default"

// Entry is one key of AUTHENTICATION__API_KEYS_FILE. The key itself is never stored: only the
// hex SHA-256 of its text. RatePerSecond 0 (or absent) means no limit; Burst is how many
// requests may come at once (default: the rate rounded up, at least 1). MaxInFlight bounds the
// key's requests running at once, from the key check until the last byte of the response is
// sent (0 or absent: no bound): a rate bounds how often a key asks, this how much of the
// service its slow requests hold at a time (contract 6.10).
type Entry struct {
	Name          string  `json:"name"`
	SHA256        string  `json:"sha256"`
	Scopes        []Scope `json:"scopes"`
	RatePerSecond float64 `json:"rate_per_second,omitempty"`
	Burst         int     `json:"burst,omitempty"`
	MaxInFlight   int     `json:"max_in_flight,omitempty"`
	// MaxStreams bounds the key's live answers open at once (contract 6.11; 0 or absent:
	// LIMITS__MAX_STREAMS_PER_KEY does, as for AUTHENTICATION__API_KEY). A stream counts here,
	// not in max_in_flight.
	MaxStreams int `json:"max_streams,omitempty"`
	// MinCell is the key's small-cell threshold (contract 6.12.4; 0 or absent: none of its
	// own): its answers of the EMS performance measures suppress counts from 1 to MinCell-1.
	// Above 1 it also confines the key to the fields whose answers suppress or hold no counts
	// (SmallCellKey).
	MinCell int `json:"min_cell,omitempty"`
}

// keyNamePattern keeps names fit for a log line and a metric attribute: no spaces, quotes or
// line breaks, and short.
var keyNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// maxKeyFileSize bounds the file read; thousands of keys fit.
const maxKeyFileSize = 4 << 20

// parseKeyFile reads a keys file: a JSON list of Entry. Every problem is reported by entry
// index and name, never with a hash or a key, so that the message can be logged.
func parseKeyFile(data []byte) ([]key, error) {
	if len(data) > maxKeyFileSize {
		return nil, fmt.Errorf("larger than %d bytes", maxKeyFileSize)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	// A misspelt field ("scope", "rate") must not silently grant or lift a limit.
	dec.DisallowUnknownFields()
	var entries []Entry
	if err := dec.Decode(&entries); err != nil {
		return nil, fmt.Errorf("not a JSON list of {\"name\", \"sha256\", \"scopes\", \"rate_per_second\", \"burst\", \"max_in_flight\", \"max_streams\", \"min_cell\"}: %s", jsonProblem(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("more after the JSON list")
	}
	keys := make([]key, 0, len(entries))
	names := map[string]bool{}
	digests := map[[sha256.Size]byte]string{}
	for i, e := range entries {
		k, err := e.key()
		if err != nil {
			if keyNamePattern.MatchString(e.Name) {
				return nil, fmt.Errorf("entry %d (%s): %w", i, e.Name, err)
			}
			return nil, fmt.Errorf("entry %d: %w", i, err)
		}
		if names[k.name] {
			return nil, fmt.Errorf("entry %d (%s): the name is used twice", i, k.name)
		}
		if other, dup := digests[k.digest]; dup {
			return nil, fmt.Errorf("entry %d (%s): the same key as %s", i, k.name, other)
		}
		names[k.name], digests[k.digest] = true, k.name
		keys = append(keys, k)
	}
	return keys, nil
}

// key checks the entry and returns the key it describes (without its limiter).
func (e Entry) key() (key, error) {
	if !keyNamePattern.MatchString(e.Name) {
		return key{}, errors.New("name must be 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit")
	}
	if e.Name == DefaultKeyName {
		return key{}, fmt.Errorf("the name %q stands for AUTHENTICATION__API_KEY; choose another", DefaultKeyName)
	}
	raw, err := hex.DecodeString(e.SHA256)
	if err != nil || len(raw) != sha256.Size {
		// Never quote the value: it may be a key pasted by mistake.
		return key{}, errors.New("sha256 must be the 64 hex characters of the key's SHA-256 (emsquery key new prints it)")
	}
	if len(e.Scopes) == 0 {
		return key{}, fmt.Errorf("scopes is empty; give some of %s", scopeList())
	}
	var scopes scopeSet
	for _, s := range e.Scopes {
		bit := scopeBit(s)
		if bit == 0 {
			return key{}, fmt.Errorf("scope %q is not one of %s", shortText(string(s)), scopeList())
		}
		scopes |= bit
	}
	if math.IsNaN(e.RatePerSecond) || e.RatePerSecond < 0 {
		return key{}, errors.New("rate_per_second must be a number >= 0 (0: no limit)")
	}
	if e.Burst < 0 {
		return key{}, errors.New("burst must be a whole number >= 0")
	}
	if e.Burst > 0 && e.RatePerSecond == 0 {
		return key{}, errors.New("burst is set without rate_per_second; set both, or neither for no limit")
	}
	if e.MaxInFlight < 0 {
		return key{}, errors.New("max_in_flight must be a whole number >= 0 (0: no limit)")
	}
	if e.MaxStreams < 0 {
		return key{}, errors.New("max_streams must be a whole number >= 0 (0: none of its own, LIMITS__MAX_STREAMS_PER_KEY bounds it)")
	}
	if e.MinCell < 0 || e.MinCell > maxMinCell {
		return key{}, fmt.Errorf("min_cell must be a whole number from 0 to %d (0: no threshold of its own)", maxMinCell)
	}
	k := key{name: e.Name, scopes: scopes, rate: e.RatePerSecond, burst: e.Burst, maxInFlight: e.MaxInFlight, maxStreams: e.MaxStreams, minCell: e.MinCell}
	copy(k.digest[:], raw)
	if k.rate > 0 && k.burst == 0 {
		k.burst = max(1, int(math.Ceil(k.rate)))
	}
	return k, nil
}

func scopeList() string {
	names := make([]string, len(AllScopes))
	for i, s := range AllScopes {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// ParseScopes reads a comma list of scopes ("graphql,export").
func ParseScopes(list string) ([]Scope, error) {
	var out []Scope
	for _, s := range strings.Split(list, ",") {
		s = strings.ToLower(strings.TrimSpace(s))
		if s == "" {
			continue
		}
		if scopeBit(Scope(s)) == 0 {
			return nil, fmt.Errorf("scope %q is not one of %s", s, scopeList())
		}
		if !slices.Contains(out, Scope(s)) {
			out = append(out, Scope(s))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no scope given; give some of %s", scopeList())
	}
	return out, nil
}

// NewKey makes a new random key (256 bits, as 64 hex characters) and the file entry e with its
// SHA-256 filled in (e's other fields as the operator chose them). The key is shown once to the
// operator; only the entry goes into the file.
func NewKey(e Entry) (string, Entry, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", Entry{}, fmt.Errorf("random key: %w", err)
	}
	secret := hex.EncodeToString(b)
	d := sha256.Sum256([]byte(secret))
	e.SHA256 = hex.EncodeToString(d[:])
	if _, err := e.key(); err != nil {
		return "", Entry{}, err
	}
	return secret, e, nil
}

// jsonProblem describes a decoding error without quoting the file.
func jsonProblem(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("invalid JSON at byte %d", syn.Offset)
	case errors.As(err, &typ):
		if typ.Field != "" {
			return fmt.Sprintf("%s must not be a JSON %s", typ.Field, typ.Value)
		}
		return fmt.Sprintf("found a JSON %s", typ.Value)
	case errors.Is(err, io.EOF):
		return "the file is empty"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "it ends too early"
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "unknown field " + shortText(strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return "invalid JSON"
}

// shortText quotes a short text from the file in a message, and only says how long a longer
// one is: a long text in the wrong place may be a key or a hash.
func shortText(s string) string {
	const limit = 16
	if len(s) > limit {
		return fmt.Sprintf("(a text of %d characters)", len(s))
	}
	return s
}

// maxMinCell is the largest small-cell threshold a key may carry (contract 6.12.4: 0 to 1,000).
const maxMinCell = 1000
