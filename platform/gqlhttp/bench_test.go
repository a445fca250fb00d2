package gqlhttp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/valyala/fasthttp"

	"github.com/emsanalytics/emsquery/app/gqlpublic"
	"github.com/emsanalytics/emsquery/internal/dbtest"
	"github.com/emsanalytics/emsquery/internal/gqltest"
	"github.com/emsanalytics/emsquery/internal/servicetest"
	"github.com/emsanalytics/emsquery/modules/patients"
	"github.com/emsanalytics/emsquery/modules/resources"
	"github.com/emsanalytics/emsquery/platform/database"
	"github.com/emsanalytics/emsquery/platform/gqlfield"
	"github.com/emsanalytics/emsquery/platform/gqlhttp"
	"github.com/emsanalytics/emsquery/platform/jsonscalar"
	"github.com/emsanalytics/emsquery/platform/keyset"
	"github.com/emsanalytics/emsquery/platform/requestbody"
	"github.com/emsanalytics/emsquery/platform/serverconn"
)

// The GraphQL path's costs per request, end to end on a real database: the endpoint on a Fiber
// app configured as the server's, served on a loopback TCP listener through serverconn.Lingering
// (the cork, the client watch), asked by a keep-alive client that discards the body. Allocations
// and CPU profiles (-cpuprofile) are the robust measures; the client's share is the same on
// both sides of a comparison.
//
//	go test ./platform/gqlhttp/ -run '^$' -bench 'GraphQLPath' -benchmem -count 10
//
// BENCH_PATIENTS sets the rows of dim_patient for the patients benchmark (default 1,000,000).

// writeBufferSize is the server's (app/server.go): a light answer and its head go out in one
// write.
const writeBufferSize = 64 << 10

// benchServer serves es's /graphql as app.NewServer does, and returns its base URL.
func benchServer(b *testing.B, es *gqlpublic.Config) string {
	b.Helper()
	o := gqltest.Options()
	o.RequestTimeout = 30 * time.Second
	f := fiber.New(fiber.Config{DisableStartupMessage: true, WriteBufferSize: writeBufferSize, StreamRequestBody: true, DisablePreParseMultipartForm: true})
	requestbody.StreamBodies(f, func(*fasthttp.RequestHeader) bool { return true })
	f.All("/graphql", gqlhttp.New(gqlpublic.Executable(*es), o).Handlers(func(c *fiber.Ctx) error { return c.Next() })...)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = f.Listener(serverconn.Lingering(ln, time.Minute)) }()
	b.Cleanup(func() { _ = f.Shutdown() })
	return "http://" + ln.Addr().String() + "/graphql"
}

// benchAsk posts query to url b.N times on clients keep-alive connections, each asking in turn
// (clients > 1: b.RunParallel, clients in all); every answer must be 200 and as long as the
// first, which must contain want. The connections are plain ones (no goroutines of net/http's
// client: its costs would hide the service's).
func benchAsk(b *testing.B, url, query, want string, clients int) {
	b.Helper()
	first := newBenchClient(b, url, query)
	size, head, err := first.ask(true)
	if err != nil {
		b.Fatal(err)
	}
	if !bytes.Contains(head, []byte(want)) {
		b.Fatalf("unexpected answer %s", head)
	}
	b.SetBytes(size)
	b.ReportAllocs()
	cpu0, io0 := processCPU(b), processIO(b)
	b.ResetTimer()
	if clients <= 1 {
		for range b.N {
			if n, _, err := first.ask(false); err != nil || n != size {
				b.Fatalf("answer of %d bytes, want %d: %v", n, size, err)
			}
		}
	} else {
		b.SetParallelism((clients + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
		b.RunParallel(func(pb *testing.PB) {
			c := newBenchClient(b, url, query)
			for pb.Next() {
				if n, _, err := c.ask(false); err != nil || n != size {
					b.Errorf("answer of %d bytes, want %d: %v", n, size, err)
					return
				}
			}
		})
	}
	b.StopTimer()
	cpu1, io1 := processCPU(b), processIO(b)
	b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(io1.reads-io0.reads)/float64(b.N), "reads/op")
	b.ReportMetric(float64(io1.writes-io0.writes)/float64(b.N), "writes/op")
}

// benchClient asks one question on one keep-alive connection.
type benchClient struct {
	conn net.Conn
	req  []byte
	r    *bufio.Reader
	buf  []byte
}

func newBenchClient(b *testing.B, url, query string) *benchClient {
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/graphql")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	body := `{"query":` + strconv.Quote(query) + `}`
	req := []byte("POST /graphql HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	return &benchClient{conn: conn, req: req, r: bufio.NewReaderSize(conn, 64<<10), buf: make([]byte, 64<<10)}
}

// ask sends the question and reads the answer: its body's size, and its first bytes when asked.
func (c *benchClient) ask(keepHead bool) (size int64, head []byte, err error) {
	if _, err := c.conn.Write(c.req); err != nil {
		return 0, nil, err
	}
	status, err := c.r.ReadSlice('\n')
	if err != nil || !bytes.HasPrefix(status, []byte("HTTP/1.1 200 ")) {
		return 0, nil, fmt.Errorf("status %q, %v", status, err)
	}
	length, chunked := int64(-1), false
	for {
		line, err := c.r.ReadSlice('\n')
		if err != nil {
			return 0, nil, err
		}
		if len(line) <= 2 {
			break
		}
		k, v, _ := strings.Cut(strings.ToLower(strings.TrimSpace(string(line))), ":")
		switch k {
		case "content-length":
			length, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		case "transfer-encoding":
			chunked = strings.TrimSpace(v) == "chunked"
		}
	}
	var br io.Reader = io.LimitReader(c.r, length)
	if chunked {
		br = httputil.NewChunkedReader(c.r)
	}
	if keepHead {
		head = make([]byte, 200)
		k, _ := io.ReadFull(br, head)
		head = head[:k]
	}
	n, err := io.CopyBuffer(io.Discard, br, c.buf)
	if err != nil {
		return 0, nil, err
	}
	if chunked {
		if _, err := c.r.Discard(2); err != nil { // the CRLF after the last chunk
			return 0, nil, err
		}
	}
	return n + int64(len(head)), head, nil
}

// processCPU is the test process's processor time so far (user and system), in nanoseconds:
// the service's and the client's, not the database's.
func processCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// ioCounts are the test process's read and write system calls so far (Linux's /proc/self/io;
// zero elsewhere).
type ioCounts struct{ reads, writes int64 }

func processIO(b *testing.B) ioCounts {
	var c ioCounts
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return c
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "syscr":
			c.reads = n
		case "syscw":
			c.writes = n
		}
	}
	return c
}

// BenchmarkGraphQLPathResources is the light path: the bench's resources question, a whole
// table of a few hundred rows (about 24 KB of JSON, sent whole).
func BenchmarkGraphQLPathResources(b *testing.B) {
	url := lightServer(b)
	benchAsk(b, url, `{ resources { sk_resource resource_id callsign station_id station valid_from valid_to } }`, `{"data":{"resources":[{"sk_resource":1,`, 1)
}

// BenchmarkGraphQLPathStationResources is the other light question: the 20 stations, each with
// its resources (a nested list, decoded and written by gqljson), about 2 KB of JSON.
func BenchmarkGraphQLPathStationResources(b *testing.B) {
	url := lightServer(b)
	benchAsk(b, url, `{ station_resources { station_id station_name resources { resource_id } } }`, `{"data":{"station_resources":[{"station_id":1,`, 1)
}

// BenchmarkGraphQLPathResourcesBare is BenchmarkGraphQLPathResources' baseline: on the same
// data, listener, client and pool settings, a bare fasthttp handler runs the statement the
// resources module runs and writes the rows' bytes, without GraphQL or JSON. Its cpu-ns/op
// subtracted from BenchmarkGraphQLPathResources' is what the GraphQL path adds to a light
// question (make bench's bare server measures the same against the whole service).
func BenchmarkGraphQLPathResourcesBare(b *testing.B) {
	benchBare(b, `SELECT sk_resource, resource_id, callsign, station_id, station, valid_from, valid_to
FROM dim_resource
WHERE sk_resource > $1
ORDER BY sk_resource
LIMIT $2`, pgx.QueryResultFormats{pgx.TextFormatCode, pgx.TextFormatCode, pgx.TextFormatCode, pgx.TextFormatCode,
		pgx.TextFormatCode, pgx.BinaryFormatCode, pgx.BinaryFormatCode}, int64(0), int64(1000))
}

// BenchmarkGraphQLPathStationResourcesBare is BenchmarkGraphQLPathStationResources' baseline,
// as BenchmarkGraphQLPathResourcesBare is BenchmarkGraphQLPathResources'.
func BenchmarkGraphQLPathStationResourcesBare(b *testing.B) {
	benchBare(b, `SELECT s.station_id, s.station_name,
       COALESCE(array_agg(r.resource_id ORDER BY r.resource_id, r.sk_resource)
                FILTER (WHERE r.sk_resource IS NOT NULL), '{}') AS resource_ids
FROM dim_station s
LEFT JOIN dim_resource r ON r.station_id = s.station_id
GROUP BY s.station_id
ORDER BY s.station_id`)
}

// BenchmarkGraphQLPathStationResourcesPlain is the rung between BenchmarkGraphQLPathStationResources
// and its bare baseline: the same question answered by a plain Fiber route on an app configured
// as the server's, through the service's own database layer and the resources module's
// repository (the statement, its decoding, the pool's gate and limits), its JSON written by hand
// and checked equal, byte for byte, to the GraphQL path's answer. What it costs beyond the bare
// server is Fiber, the database layer and the JSON; what the GraphQL path costs beyond it is the
// endpoint, gqlgen's executor and the direct JSON path.
func BenchmarkGraphQLPathStationResourcesPlain(b *testing.B) {
	fixture := lightFixture(b)
	repo := resources.NewRepository(dbtest.Open(b, fixture))
	graphQL := benchServer(b, &gqlpublic.Config{Resolvers: gqltest.RealResources{FakePublic: &gqltest.FakePublic{}, R: resources.NewResolver(repo, 1000)}})
	f := fiber.New(fiber.Config{DisableStartupMessage: true, WriteBufferSize: writeBufferSize, StreamRequestBody: true, DisablePreParseMultipartForm: true})
	requestbody.StreamBodies(f, func(*fasthttp.RequestHeader) bool { return true })
	var outs sync.Pool // the answers' buffers, reused: c.Send copies the answer
	f.Post("/graphql", func(c *fiber.Ctx) error {
		body, err := requestbody.ReadBody(c)
		if err != nil {
			return err
		}
		body.Release() // one question only: its bytes are not looked at
		buf, _ := outs.Get().(*[]byte)
		if buf == nil {
			buf = new([]byte)
		}
		defer outs.Put(buf)
		out := append((*buf)[:0], `{"data":{"station_resources":[`...)
		first := true
		_, err = repo.EachStationResources(c.UserContext(), func(st *resources.StationResources) bool {
			if !first {
				out = append(out, ',')
			}
			first = false
			out = append(out, `{"station_id":`...)
			out = strconv.AppendInt(out, int64(st.StationID), 10)
			out = append(out, `,"station_name":`...)
			out = jsonscalar.AppendString(out, st.StationName)
			out = append(out, `,"resources":[`...)
			for i, r := range st.Resources {
				if i > 0 {
					out = append(out, ',')
				}
				out = append(out, `{"resource_id":`...)
				out = strconv.AppendInt(out, int64(r.ResourceID), 10)
				out = append(out, '}')
			}
			out = append(out, "]}"...)
			return true
		})
		if err != nil {
			return err
		}
		*buf = append(out, "]}}"...)
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
		return c.Send(*buf)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = f.Listener(serverconn.Lingering(ln, time.Minute)) }()
	b.Cleanup(func() { _ = f.Shutdown() })
	plain := "http://" + ln.Addr().String() + "/graphql"
	const query = `{ station_resources { station_id station_name resources { resource_id } } }`
	if want, got := answerOf(b, graphQL, query), answerOf(b, plain, query); !bytes.Equal(got, want) {
		b.Fatalf("the plain route answers\n%s\nthe GraphQL path\n%s", got, want)
	}
	benchAsk(b, plain, query, `{"data":{"station_resources":[{"station_id":1,`, 1)
}

// answerOf is the whole body of the answer to query at url.
func answerOf(b *testing.B, url, query string) []byte {
	b.Helper()
	c := newBenchClient(b, url, query)
	if _, err := c.conn.Write(c.req); err != nil {
		b.Fatal(err)
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("status %d: %v", resp.StatusCode, err)
	}
	return body
}

// benchBare asks a bare fasthttp server, on lightFixture's data, that answers every request
// with the bytes of the rows of q, through a pool configured as the GraphQL path's (dbtest.Open:
// database.PoolConfig), q prepared once per session as a DBA would (and as the resources
// module does: database.PlanOnce).
func benchBare(b *testing.B, q string, args ...any) {
	args = append([]any{pgx.QueryExecModeCacheStatement}, args...)
	fixture := lightFixture(b)
	pc, err := database.PoolConfig(database.Options{
		Hosts: []string{fixture.Host}, Ports: []int{fixture.Port}, Name: fixture.Name, Username: fixture.User,
		Password: fixture.Password, Schema: "public", PoolSize: 1, MaxOverflow: 1,
		PoolTimeout: 30 * time.Second, PoolRecycle: time.Hour,
	}, database.Timeouts{StatementTimeout: 30 * time.Second, ExportTimeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	srv := &fasthttp.Server{Handler: func(c *fasthttp.RequestCtx) {
		rows, err := pool.Query(context.Background(), q, args...) // not c: see bench/run/floor.go
		if err != nil {
			c.Error(err.Error(), 500)
			return
		}
		for rows.Next() {
			for _, v := range rows.RawValues() {
				c.Response.AppendBody(v)
			}
		}
		if rows.Close(); rows.Err() != nil {
			c.Error(rows.Err().Error(), 500)
		}
	}, WriteBufferSize: writeBufferSize}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = srv.Serve(serverconn.Lingering(ln, time.Minute)) }()
	b.Cleanup(func() { _ = srv.Shutdown() })
	benchAsk(b, "http://"+ln.Addr().String()+"/graphql", `{ bare }`, "", 1)
}

// lightServer serves the resources module's fields over lightFixture's data.
func lightServer(b *testing.B) string {
	fixture := lightFixture(b)
	db := dbtest.Open(b, fixture)
	return benchServer(b, &gqlpublic.Config{Resolvers: gqltest.RealResources{FakePublic: &gqltest.FakePublic{}, R: resources.NewResolver(resources.NewRepository(db), 1000)}})
}

// lightFixture is a database of 20 stations and 200 resource versions.
func lightFixture(b *testing.B) servicetest.DB {
	fixture := servicetest.NewDB(b)
	pool := fixture.Pool(b)
	for _, q := range []string{
		`INSERT INTO dim_station (station_id, station_name) SELECT i, 'Station ' || i FROM generate_series(1, 20) AS i`,
		`INSERT INTO dim_resource (sk_resource, resource_id, callsign, station_id, station, valid_from, valid_to)
		 SELECT i, 1000 + i % 150, 'AMB' || (i % 150), 1 + i % 20, 'Station ' || (1 + i % 20), date '2020-01-01' + i,
		        CASE WHEN i % 3 = 0 THEN NULL ELSE date '2021-01-01' + i END
		 FROM generate_series(1, 200) AS i`,
		`ANALYZE`,
	} {
		if _, err := pool.Exec(context.Background(), q); err != nil {
			b.Fatal(err)
		}
	}
	return fixture
}

// BenchmarkGraphQLPathPatients is the heavy path: every patient, all fields, streamed (about 90
// bytes of JSON a row).
func BenchmarkGraphQLPathPatients(b *testing.B) {
	n := 1_000_000
	if s := os.Getenv("BENCH_PATIENTS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	fixture := servicetest.NewDB(b)
	pool := fixture.Pool(b)
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO dim_patient (sk_patient, age, date_of_birth, gender, weight)
		 SELECT i, CASE WHEN i %% 17 = 0 THEN NULL ELSE i %% 100 END, date '1920-01-01' + i %% 30000,
		        CASE i %% 3 WHEN 0 THEN 'female' WHEN 1 THEN 'male' ELSE NULL END, (400 + i %% 900) / 10.0
		 FROM generate_series(1, %d) AS i`, n),
		`VACUUM ANALYZE dim_patient`,
	} {
		if _, err := pool.Exec(context.Background(), q); err != nil {
			b.Fatal(err)
		}
	}
	db := dbtest.Open(b, fixture)
	url := benchServer(b, &gqlpublic.Config{Resolvers: gqltest.RealPatients{FakePublic: &gqltest.FakePublic{}, R: patients.NewResolver(patients.NewRepository(db), 1000)}})
	for _, clients := range []int{1, 4} {
		b.Run(fmt.Sprintf("c=%d", clients), func(b *testing.B) {
			benchAsk(b, url, `{ patients { sk_patient age date_of_birth gender weight } }`, `{"data":{"patients":[{"sk_patient":1,`, clients)
		})
	}
}

// memoryPatients answers patients with rows held in memory, as the database would send them
// (patientRowsSQL's columns in patientFormats), written by the module's own column writer: the
// list's encoding and sending without the database.
type memoryPatients struct {
	*gqltest.FakePublic
	rows [][][]byte
}

func (f memoryPatients) Query() gqlpublic.QueryResolver { return f }

func (f memoryPatients) Patients(ctx context.Context, _, _ *int) ([]*patients.Patient, error) {
	src := patients.NewRepository(nil).PatientList(keyset.All)
	src.Rows = func(_ context.Context, yield func([][]byte) bool) (bool, error) {
		for _, r := range f.rows {
			if !yield(r) {
				return false, nil
			}
		}
		return true, nil
	}
	return gqlfield.List(ctx, src, true)
}

// BenchmarkGraphQLPathPatientsEncode is BenchmarkGraphQLPathPatients without the database: the
// same rows, from memory, encoded and sent.
func BenchmarkGraphQLPathPatientsEncode(b *testing.B) {
	const n = 1_000_000
	rows := make([][][]byte, n)
	genders := [][]byte{[]byte("female"), []byte("male"), nil}
	for i := range rows {
		sk := strconv.AppendInt(nil, int64(i+1), 10)
		var age []byte
		if (i+1)%17 != 0 {
			age = strconv.AppendInt(nil, int64((i+1)%100), 10)
		}
		// date '1920-01-01' + i % 30000, in days from 2000-01-01; the weight (400 + i % 900) / 10,
		// numeric(5,1) as text.
		born := binary.BigEndian.AppendUint32(nil, uint32(int32(-29220+(i+1)%30000)))
		weight := strconv.AppendFloat(nil, float64(400+(i+1)%900)/10, 'f', 1, 64)
		rows[i] = [][]byte{sk, age, born, genders[(i+1)%3], weight}
	}
	url := benchServer(b, &gqlpublic.Config{Resolvers: memoryPatients{&gqltest.FakePublic{}, rows}})
	benchAsk(b, url, `{ patients { sk_patient age date_of_birth gender weight } }`, `{"data":{"patients":[{"sk_patient":1,`, 1)
}

// BenchmarkGraphQLPathLightHandler is the light question's fixed cost without the network and
// the database: the endpoint's Fiber handler called with one request, the resources (200) held
// in memory. Less noisy than the end-to-end benchmarks on a busy machine (its allocations and
// time are the path's own).
func BenchmarkGraphQLPathLightHandler(b *testing.B) {
	es := gqlpublic.Executable(gqlpublic.Config{Resolvers: gqltest.PublicData(200)})
	f := fiber.New(fiber.Config{DisableStartupMessage: true})
	f.All("/graphql", gqlhttp.New(es, gqltest.Options()).Handlers(func(c *fiber.Ctx) error { return c.Next() })...)
	benchHandler(b, f.Handler(), `{"query":"{ resources { sk_resource resource_id callsign station_id station valid_from valid_to } }"}`)
}

// benchHandler calls h with a POST of body to /graphql b.N times; every answer must be 200.
func benchHandler(b *testing.B, h fasthttp.RequestHandler, body string) {
	var req fasthttp.Request
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI("/graphql")
	req.Header.SetContentType("application/json")
	req.SetBodyString(body)
	var ctx fasthttp.RequestCtx
	b.ReportAllocs()
	cpu0 := processCPU(b)
	for b.Loop() {
		ctx.Init(&req, nil, nil)
		h(&ctx)
		if ctx.Response.StatusCode() != 200 {
			b.Fatalf("answer %d %.300s", ctx.Response.StatusCode(), ctx.Response.Body())
		}
	}
	// The process's processor time: on a busy machine, time per operation also counts the
	// waits for a processor.
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}
