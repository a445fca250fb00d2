package servicetest

import (
	"context"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/schema"
)

// Backend is how the service reaches the databases a test makes (NewDB, NewDBOn, FixtureDB,
// FixtureDBOn): the table layout they get and whether PgBouncer stands between. The same test
// bodies run on each (RunOn), so that the answers are checked on every layout and path with
// the same expectations.
type Backend struct {
	Name   string
	Layout schema.Layout
	// PgBouncer puts a PgBouncer in transaction pooling mode, with its defaults, in front of
	// each database (one per database, see pgtest.NewPgBouncer), and tells the service so
	// (DATABASE__TRANSACTION_POOLING). The test's own pool (DB.Pool) still goes direct.
	PgBouncer bool
}

var (
	// Direct is the default: the plain layout, the service connected to PostgreSQL itself.
	Direct = Backend{Name: "direct", Layout: schema.Plain}
	// Partitioned is fact_record partitioned by month (schema/partitioned.sql), with months
	// for 2024 made and every other row in the default partition.
	Partitioned = Backend{Name: "partitioned", Layout: schema.Partitioned}
	// ThroughPgBouncer is the plain layout behind PgBouncer in transaction mode.
	ThroughPgBouncer = Backend{Name: "pgbouncer", Layout: schema.Plain, PgBouncer: true}
)

// partitionMonths are the months made on the partitioned layout: the fixture's and the tests'
// rows fall in them and, outside 2024, in the default partition.
const partitionMonthsSQL = `SELECT create_fact_record_months('2024-01-01', '2024-12-31')`

var backends struct {
	mu     sync.Mutex
	byTest map[string]Backend
}

// RunOn runs each of tests as a subtest of t, named after the function, with backend b for
// every database it makes.
func RunOn(t *testing.T, b Backend, tests ...func(*testing.T)) {
	t.Helper()
	for _, test := range tests {
		name := runtime.FuncForPC(reflect.ValueOf(test).Pointer()).Name()
		name = name[strings.LastIndex(name, ".")+1:]
		t.Run(name, func(t *testing.T) {
			backends.mu.Lock()
			if backends.byTest == nil {
				backends.byTest = map[string]Backend{}
			}
			backends.byTest[t.Name()] = b
			backends.mu.Unlock()
			// After the subtest and its own subtests, parallel ones included.
			t.Cleanup(func() {
				backends.mu.Lock()
				delete(backends.byTest, t.Name())
				backends.mu.Unlock()
			})
			test(t)
		})
	}
}

// BackendOf is the backend of t: the one RunOn gave t or a test it runs in, else Direct.
func BackendOf(t testing.TB) Backend {
	backends.mu.Lock()
	defer backends.mu.Unlock()
	for name := t.Name(); ; {
		if b, ok := backends.byTest[name]; ok {
			return b
		}
		i := strings.LastIndex(name, "/")
		if i < 0 {
			return Direct
		}
		name = name[:i]
	}
}

// newDatabase makes t's database on c for t's backend and says how the service reaches it.
func newDatabase(t testing.TB, c *pgtest.Cluster) DB {
	t.Helper()
	b := BackendOf(t)
	name := pgtest.NewDatabaseWith(t, c, b.Layout.DDL())
	db := DB{Cluster: c, Name: name, Host: c.Host(), Port: c.Port(), User: "postgres", Password: c.Password()}
	if b.Layout == schema.Partitioned {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.Exec(ctx, name, partitionMonthsSQL); err != nil {
			t.Fatalf("partitions: %v", err)
		}
	}
	if b.PgBouncer {
		// One PgBouncer per database: one shared by the whole cluster saved some 20 s of make
		// test, but in a busy full run of CI it was found not listening in the middle of the
		// run (cause not known), and a test's PgBouncer of its own cannot be lost that way.
		pgb := pgtest.NewPgBouncer(t, c)
		db.Host, db.Port, db.TransactionPooling = pgb.Host(), pgb.Port(), true
	}
	return db
}
