package deploytest_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/internal/deploytest"
	"github.com/emsanalytics/emsquery/internal/fixture"
	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// loadCompose reads deploy/compose.yaml as `docker compose --env-file deploy/.env` does, after
// the operator's steps its header gives: cp deploy/.env.example deploy/.env, then set the values
// it names. The files are copied into a folder laid out as the repository is (deploy/ beside
// schema/), so that the relative paths resolve as they would in a clone; compose's own
// environment is the env file alone (not the test's: an operator's shell sets none of these).
func loadCompose(t *testing.T, edits map[string]string, profiles ...string) (*types.Project, string) {
	t.Helper()
	root := deploytest.Root()
	work := t.TempDir()
	deploy := filepath.Join(work, "deploy")
	if err := os.MkdirAll(deploy, 0o755); err != nil {
		t.Fatal(err)
	}
	compose, err := os.ReadFile(filepath.Join(root, "deploy", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile(filepath.Join(root, "deploy", ".env.example"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"compose.yaml": compose,
		".env":         []byte(deploytest.EditEnv(t, string(example), edits)),
	} {
		if err := os.WriteFile(filepath.Join(deploy, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	opts, err := cli.NewProjectOptions([]string{filepath.Join(deploy, "compose.yaml")},
		cli.WithWorkingDirectory(deploy),
		cli.WithEnvFiles(filepath.Join(deploy, ".env")),
		cli.WithDotEnv,
		cli.WithProfiles(profiles),
	)
	if err != nil {
		t.Fatal(err)
	}
	project, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("compose: %v", err)
	}
	return project, work
}

// environment is a service's resolved environment (environment: over env_file:), as the
// container gets it.
func environment(t *testing.T, s types.ServiceConfig) map[string]string {
	t.Helper()
	env := map[string]string{}
	for k, v := range s.Environment {
		if v == nil {
			t.Fatalf("service %s: %s has no value", s.Name, k)
		}
		env[k] = *v
	}
	return env
}

func envList(env map[string]string) []string {
	var list []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		list = append(list, k+"="+env[k])
	}
	return list
}

// TestCompose starts what deploy/compose.yaml describes, without Docker: the postgres service as
// its image would set it up, then the service binary with exactly the environment compose gives
// the emsquery container, and expects it ready (/v1/healthz 200, also through the container's
// health check command) and answering a query as the read-only role.
//
// What stands in for the containers, and the only values changed:
//   - The database is a throwaway cluster of this machine's PostgreSQL set up as the postgres
//     image sets up its first start: no TLS, password (scram-sha-256) logins over TCP, the
//     superuser "postgres" with POSTGRES_PASSWORD, the database POSTGRES_DB, then the files of
//     /docker-entrypoint-initdb.d in name order (.sql through psql as the superuser, .sh run
//     with the container's environment). The image runs them over its local socket; here psql
//     reaches the cluster over TCP (PGHOST, PGPORT, PGPASSWORD).
//   - Container names and ports: DATABASE__HOST (the postgres service's name) and DATABASE__PORT
//     are rewritten to the cluster's 127.0.0.1 and port, APP__PORT and the Prometheus port to
//     free ports (the container's own ports, published or not), and LOG__PATH (a volume) to a
//     temporary folder. Every other variable is passed exactly as compose resolves it.
func TestCompose(t *testing.T) {
	t.Parallel()
	psql := deploytest.Tool(t, "psql", "Debian package postgresql-client; make test-deps installs it",
		"/usr/lib/postgresql/15/bin/psql")
	key := servicetest.RandomKey()
	superPassword := "super-" + servicetest.RandomKey()[:12]
	readerPassword := "r@ad:/%-" + servicetest.RandomKey()[:12]
	project, work := loadCompose(t, map[string]string{
		"AUTHENTICATION__API_KEY": key,
		"DATABASE__PASSWORD":      readerPassword,
		"POSTGRES_PASSWORD":       superPassword,
	})

	svc, err := project.GetService("emsquery")
	if err != nil {
		t.Fatal(err)
	}
	pg, err := project.GetService("postgres")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := project.GetService("prometheus"); err == nil {
		t.Error("prometheus runs without --profile observability")
	}
	if dep, ok := svc.DependsOn["postgres"]; !ok || dep.Condition != types.ServiceConditionHealthy {
		t.Errorf("emsquery depends_on postgres %+v, want condition service_healthy", svc.DependsOn)
	}
	env := environment(t, svc)
	if env["DATABASE__HOST"] != pg.Name || env["DATABASE__PORT"] != "5432" {
		t.Fatalf("the service connects to %s:%s, want the postgres service %s:5432", env["DATABASE__HOST"], env["DATABASE__PORT"], pg.Name)
	}
	if env["DATABASE__USERNAME"] != "emsquery_reader" {
		t.Errorf("the service logs in as %q, want the read-only role emsquery_reader", env["DATABASE__USERNAME"])
	}
	if env["DATABASE__PASSWORD"] != readerPassword || env["AUTHENTICATION__API_KEY"] != key {
		t.Error("the env file's password or key did not reach the service")
	}

	// The database, as the image makes it on first start.
	c := pgtest.New(t, pgtest.Options{})
	pgEnv := environment(t, pg)
	if pgEnv["POSTGRES_PASSWORD"] != superPassword {
		t.Fatalf("POSTGRES_PASSWORD = %q, want the env file's", pgEnv["POSTGRES_PASSWORD"])
	}
	dbName := cmp(pgEnv["POSTGRES_DB"], "postgres")
	superuser := cmp(pgEnv["POSTGRES_USER"], "postgres")
	if superuser != "postgres" {
		t.Fatalf("POSTGRES_USER %q: this emulation has the cluster's superuser postgres only", superuser)
	}
	ctx := context.Background()
	if dbName != "postgres" {
		if err := c.Exec(ctx, "postgres", "CREATE DATABASE "+pgx.Identifier{dbName}.Sanitize()); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Exec(ctx, "postgres", "ALTER ROLE postgres PASSWORD "+quote(superPassword)); err != nil {
		t.Fatal(err)
	}
	pgEnv["POSTGRES_USER"] = superuser
	pgEnv["PATH"] = os.Getenv("PATH")
	pgEnv["PGHOST"] = c.Host()
	pgEnv["PGPORT"] = strconv.Itoa(c.Port())
	pgEnv["PGPASSWORD"] = superPassword
	for _, f := range initFiles(t, project, pg, work) {
		var cmd *exec.Cmd
		switch filepath.Ext(f.target) {
		case ".sql":
			cmd = exec.Command(psql, "-v", "ON_ERROR_STOP=1", "--username", superuser, "--no-password", "--no-psqlrc", "--dbname", dbName, "-f", f.source)
		case ".sh":
			cmd = exec.Command("bash", f.source)
		default:
			t.Fatalf("%s: the postgres image runs only .sql, .sql.gz and .sh files", f.target)
		}
		cmd.Env = envList(pgEnv)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("init file %s: %v\n%s", f.target, err, out)
		}
	}
	// The ETL's load, as the superuser.
	if err := execAs(ctx, c, dbName, superPassword, fixture.EdgeSQL); err != nil {
		t.Fatal(err)
	}
	var want int
	if err := queryAs(ctx, c, dbName, superPassword, "SELECT count(*) FROM fact_record", &want); err != nil {
		t.Fatal(err)
	}

	// The service, with the container's environment and the rewrites above.
	env["DATABASE__HOST"] = c.Host()
	env["DATABASE__PORT"] = strconv.Itoa(c.Port())
	env["LOG__PATH"] = t.TempDir()
	bin := servicetest.Binary(t)
	var p *deploytest.Proc
	var base string
	var metricsPort int
	for attempt := 1; ; attempt++ {
		port := freePort(t)
		metricsPort = freePort(t)
		env["APP__PORT"] = strconv.Itoa(port)
		env["OTEL_EXPORTER_PROMETHEUS_PORT"] = strconv.Itoa(metricsPort)
		p = deploytest.Start(t, []string{bin}, envList(env), t.TempDir(), nil)
		base = "http://127.0.0.1:" + strconv.Itoa(port)
		err := p.Await(base+"/v1/healthz", 200, 30*time.Second)
		if err == nil {
			break
		}
		if !p.AddressInUse() || attempt == 3 {
			t.Fatalf("%v\noutput:\n%s", err, p.Output())
		}
	}

	// The container's health check command, with the image's binary.
	hc := svc.HealthCheck
	if hc == nil || len(hc.Test) < 2 || hc.Test[0] != "CMD" || hc.Test[1] != "/app/emsquery" {
		t.Fatalf("emsquery healthcheck %+v, want [CMD /app/emsquery ...]", hc)
	}
	check := func() error {
		cmd := exec.Command(bin, hc.Test[2:]...)
		cmd.Env = envList(env)
		cmd.Dir = t.TempDir()
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	if err := check(); err != nil {
		t.Errorf("health check on a ready service: %v", err)
	}

	got := graphQL(t, base, env["AUTHENTICATION__API_KEY_HEADER"], key, `{ records_count { count } }`)
	if wantBody := fmt.Sprintf(`{"data":{"records_count":{"count":%d}}}`, want); got != wantBody {
		t.Errorf("records_count answered %s, want %s", got, wantBody)
	}
	resp := get(t, "http://127.0.0.1:"+strconv.Itoa(metricsPort)+"/metrics")
	if !strings.Contains(resp, "http_server_request_duration_seconds") {
		t.Errorf("no request metrics on the Prometheus port the compose file sets")
	}

	// Readiness, not liveness: with the database gone the health check fails.
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	p.WaitStatus(t, base+"/v1/healthz", 503, 30*time.Second)
	if err := check(); err == nil {
		t.Error("health check passes while the database is down: it must ask /v1/healthz, not /v1/ping")
	}
}

// TestComposeObservability: --profile observability adds Prometheus and Grafana, and every file
// the compose file mounts (dashboard, alert rules, schema) is in the repository.
func TestComposeObservability(t *testing.T) {
	t.Parallel()
	project, work := loadCompose(t, map[string]string{
		"AUTHENTICATION__API_KEY": "k",
		"DATABASE__PASSWORD":      "p",
		"POSTGRES_PASSWORD":       "s",
	}, "observability")
	for _, name := range []string{"prometheus", "grafana"} {
		if _, err := project.GetService(name); err != nil {
			t.Errorf("--profile observability: %v", err)
		}
	}
	for _, s := range project.Services {
		for _, v := range s.Volumes {
			if v.Type != types.VolumeTypeBind {
				continue
			}
			rel, err := filepath.Rel(work, v.Source)
			if err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("service %s mounts %s, outside the repository", s.Name, v.Source)
				continue
			}
			if _, err := os.Stat(filepath.Join(deploytest.Root(), rel)); err != nil {
				t.Errorf("service %s mounts %s: %v", s.Name, rel, err)
			}
		}
	}
	grafana, _ := project.GetService("grafana")
	provisioned := false
	for _, c := range grafana.Configs {
		provisioned = provisioned || strings.HasPrefix(c.Target, "/etc/grafana/provisioning/dashboards/")
	}
	if !provisioned {
		t.Error("grafana: no dashboard provider in /etc/grafana/provisioning/dashboards/")
	}
}

type initFile struct{ target, source string }

// initFiles are the postgres service's /docker-entrypoint-initdb.d files in the order the image
// runs them (by name), each written to a file of its own: a bind mount's source, or a config's
// content.
func initFiles(t *testing.T, project *types.Project, pg types.ServiceConfig, work string) []initFile {
	t.Helper()
	const dir = "/docker-entrypoint-initdb.d/"
	var files []initFile
	for _, v := range pg.Volumes {
		if strings.HasPrefix(v.Target, dir) {
			rel, err := filepath.Rel(work, v.Source)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, initFile{v.Target, filepath.Join(deploytest.Root(), rel)})
		}
	}
	for _, c := range pg.Configs {
		if !strings.HasPrefix(c.Target, dir) {
			continue
		}
		cfg, ok := project.Configs[c.Source]
		if !ok || cfg.Content == "" {
			t.Fatalf("config %s: no content", c.Source)
		}
		path := filepath.Join(t.TempDir(), filepath.Base(c.Target))
		if err := os.WriteFile(path, []byte(cfg.Content), 0o700); err != nil {
			t.Fatal(err)
		}
		files = append(files, initFile{c.Target, path})
	}
	slices.SortFunc(files, func(a, b initFile) int { return strings.Compare(a.target, b.target) })
	if len(files) == 0 {
		t.Fatal("the postgres service has no init files: the schema would not be made")
	}
	return files
}

func cmp(v, dflt string) string {
	if v == "" {
		return dflt
	}
	return v
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func connectAs(ctx context.Context, c *pgtest.Cluster, db, password string) (*pgx.Conn, error) {
	cfg, err := c.ConnConfig(db)
	if err != nil {
		return nil, err
	}
	cfg.Password = password
	return pgx.ConnectConfig(ctx, cfg)
}

func execAs(ctx context.Context, c *pgtest.Cluster, db, password, sql string) error {
	conn, err := connectAs(ctx, c, db, password)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

func queryAs(ctx context.Context, c *pgtest.Cluster, db, password, sql string, dest any) error {
	conn, err := connectAs(ctx, c, db, password)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return conn.QueryRow(ctx, sql).Scan(dest)
}
