package measures_test

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/internal/servicetest"
	"github.com/emsanalytics/emsquery/schema"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

//go:embed testdata/measures.sql
var measuresSQL string

// env is the service on a database holding the measures' fixture, and a pool for the
// test's own SQL.
type env struct {
	db   servicetest.DB
	svc  *servicetest.Service
	pool *pgxpool.Pool
}

// fixtureDB is a fresh database with the extensions and the fixture (extensions false: the
// fixture's records on the core schema alone, without the time columns and fact_unit_shift).
func fixtureDB(t *testing.T, extensions bool) servicetest.DB {
	t.Helper()
	db := servicetest.NewDB(t)
	script := measuresSQL
	if extensions {
		script = schema.MeasuresDDL + script
	} else {
		// Only the statements of the core schema.
		var kept []string
		for _, stmt := range strings.Split(measuresSQL, ";\n") {
			if !strings.Contains(stmt, "unit_notified_at") && !strings.Contains(stmt, "back_in_service_at") && !strings.Contains(stmt, "fact_unit_shift") {
				kept = append(kept, stmt)
			}
		}
		script = strings.Join(kept, ";\n")
	}
	exec(t, db, script)
	return db
}

func exec(t *testing.T, db servicetest.DB, sql string) {
	t.Helper()
	if err := db.Cluster.Exec(context.Background(), db.Name, sql); err != nil {
		t.Fatalf("%v\n%.500s", err, sql)
	}
}

func start(t *testing.T, settings map[string]string) env {
	t.Helper()
	db := fixtureDB(t, true)
	return env{db: db, svc: startOn(t, db, settings), pool: db.Pool(t)}
}

// startOn starts the service on db with the settings.
func startOn(t *testing.T, db servicetest.DB, settings map[string]string) *servicetest.Service {
	t.Helper()
	return servicetest.Start(t, db, settings)
}

// ask posts query and returns the field's JSON, failing on errors.
func (e env) ask(t *testing.T, query string, vars map[string]any, field string) json.RawMessage {
	t.Helper()
	return e.svc.Field(t, "/graphql", query, vars, field)
}

// errorsOf posts query and returns its errors' codes and messages, failing when there are none.
func errorsOf(t *testing.T, svc *servicetest.Service, key, path, query string, vars map[string]any) (string, string) {
	t.Helper()
	resp := svc.GraphQLWithHeaders(t, path, query, vars, map[string]string{svc.Header: key})
	if len(resp.Errors) == 0 {
		t.Fatalf("no error for %s: %.1000s", query, resp.Raw)
	}
	return resp.Errors[0].Code(), resp.Errors[0].Message
}

// sameAnswer compares a JSON answer with the expected value: numbers within 1e-9 relative
// (the figures are float8 computed in another order), everything else exactly.
func sameAnswer(t *testing.T, what string, got json.RawMessage, want any) {
	t.Helper()
	wj, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(wj, &w); err != nil {
		t.Fatal(err)
	}
	if path, ok := near(g, w, ""); !ok {
		t.Fatalf("%s: differs at %s\n got %.3000s\nwant %.3000s", what, path, got, wj)
	}
}

func near(g, w any, path string) (string, bool) {
	switch w := w.(type) {
	case float64:
		gf, ok := g.(float64)
		if !ok {
			return path, false
		}
		return path, gf == w || math.Abs(gf-w) <= 1e-9*math.Max(math.Abs(gf), math.Abs(w))
	case []any:
		gl, ok := g.([]any)
		if !ok || len(gl) != len(w) {
			return path + fmt.Sprintf(" (length %d, want %d)", len(gl), len(w)), false
		}
		for i := range w {
			if p, ok := near(gl[i], w[i], fmt.Sprintf("%s[%d]", path, i)); !ok {
				return p, false
			}
		}
		return path, true
	case map[string]any:
		gm, ok := g.(map[string]any)
		if !ok || len(gm) != len(w) {
			return path + " (members)", false
		}
		for k, v := range w {
			if p, ok := near(gm[k], v, path+"."+k); !ok {
				return p, false
			}
		}
		return path, true
	default:
		return path, g == w
	}
}

// keysFile writes a keys file of entries and returns its path.
func keysFile(t *testing.T, entries ...map[string]any) string {
	t.Helper()
	b, err := json.Marshal(entries)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
