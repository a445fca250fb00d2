package deploytest_test

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/emsanalytics/emsquery/internal/deploytest"
	"github.com/emsanalytics/emsquery/internal/fixture"
	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// composeSetup is what an operator does before `docker compose up`, as the files' headers say:
// cp deploy/.env.example deploy/.env and cp deploy/compose.env.example deploy/compose.env, then
// set the values they name (env: the service's settings; composeEnv: compose's own).
type composeSetup struct {
	files      []string // of deploy/, in -f order
	env        map[string]string
	composeEnv map[string]string
}

// loadCompose reads the files as `docker compose -f ... --env-file deploy/.env --env-file
// deploy/compose.env` does. The files are copied into a folder laid out as the repository is
// (deploy/ beside schema/), so that the relative paths resolve as they would in a clone;
// compose's own environment is the env files alone (not the test's: an operator's shell sets
// none of these).
func loadCompose(t *testing.T, setup composeSetup) (*types.Project, string) {
	t.Helper()
	project, work, err := tryLoadCompose(t, setup)
	if err != nil {
		t.Fatalf("compose: %v", err)
	}
	return project, work
}

func tryLoadCompose(t *testing.T, setup composeSetup) (*types.Project, string, error) {
	t.Helper()
	root := deploytest.Root()
	work := t.TempDir()
	deploy := filepath.Join(work, "deploy")
	if err := os.MkdirAll(deploy, 0o755); err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(root, "deploy", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	write := func(name, data string) string {
		path := filepath.Join(deploy, name)
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	var files []string
	for _, f := range setup.files {
		files = append(files, write(f, read(f)))
	}
	envFiles := []string{
		write(".env", deploytest.EditEnv(t, read(".env.example"), setup.env)),
		write("compose.env", deploytest.EditEnv(t, read("compose.env.example"), setup.composeEnv)),
	}
	opts, err := cli.NewProjectOptions(files,
		cli.WithWorkingDirectory(deploy),
		cli.WithEnvFiles(envFiles...),
		cli.WithDotEnv,
	)
	if err != nil {
		t.Fatal(err)
	}
	project, err := opts.LoadProject(context.Background())
	return project, work, err
}

// bundled is the compose files with the bundled database, as docs/deploy.md starts them.
var bundled = []string{"compose.yaml", "compose.postgres.yaml"}

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

// TestCompose starts what deploy/compose.yaml and deploy/compose.postgres.yaml describe, without
// Docker: the postgres service as its image would set it up, then the service binary with exactly
// the environment compose gives the emsquery container, and expects it ready (/v1/healthz 200,
// also through the container's health check command) and answering a query as the read-only
// role. Neither the superuser's password nor any other value of compose.env is in the service's
// environment.
//
// What stands in for the containers, and the only values changed:
//   - The database is a throwaway cluster of this machine's PostgreSQL set up as the postgres
//     image sets up its first start (setUpAsImage): no TLS, password (scram-sha-256) logins over
//     TCP, the superuser "postgres" with POSTGRES_PASSWORD, the database POSTGRES_DB, then the
//     files of /docker-entrypoint-initdb.d in name order (.sql through psql as the superuser, .sh
//     run with the container's environment). The image runs them over its local socket; here
//     psql reaches the cluster over TCP (PGHOST, PGPORT, PGPASSWORD).
//   - Container names and ports: DATABASE__HOST (the postgres service's name) and DATABASE__PORT
//     are rewritten to the cluster's 127.0.0.1 and port, APP__PORT and the Prometheus port to
//     free ports (the container's own ports, published or not), and LOG__PATH (a volume) to a
//     temporary folder. Every other variable is passed exactly as compose resolves it.
func TestCompose(t *testing.T) {
	t.Parallel()
	key := servicetest.RandomKey()
	superPassword := "super-" + servicetest.RandomKey()[:12]
	readerPassword := "r@ad:/%-" + servicetest.RandomKey()[:12]
	project, work := loadCompose(t, composeSetup{
		files:      bundled,
		env:        map[string]string{"AUTHENTICATION__API_KEY": key, "DATABASE__PASSWORD": readerPassword},
		composeEnv: map[string]string{"POSTGRES_PASSWORD": superPassword},
	})

	svc, err := project.GetService("emsquery")
	if err != nil {
		t.Fatal(err)
	}
	pg, err := project.GetService("postgres")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"prometheus", "grafana"} {
		if _, err := project.GetService(name); err == nil {
			t.Errorf("%s runs without compose.observability.yaml", name)
		}
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
	noComposeSecrets(t, svc, superPassword)

	// The database, as the image makes it on first start, with the server settings its command
	// gives.
	c := pgtest.New(t, serverOptions(t, pg))
	pgEnv := environment(t, pg)
	if pgEnv["POSTGRES_PASSWORD"] != superPassword {
		t.Fatalf("POSTGRES_PASSWORD = %q, want compose.env's", pgEnv["POSTGRES_PASSWORD"])
	}
	dbName, want := setUpAsImage(t, c, project, pg, work)

	// The service, with the container's environment and the rewrites above.
	env["DATABASE__HOST"] = c.Host()
	env["DATABASE__PORT"] = strconv.Itoa(c.Port())
	p, base, metricsPort := startWith(t, env)

	// The container's health check command, with the image's binary.
	hc := svc.HealthCheck
	if hc == nil || len(hc.Test) < 2 || hc.Test[0] != "CMD" || hc.Test[1] != "/app/emsquery" {
		t.Fatalf("emsquery healthcheck %+v, want [CMD /app/emsquery ...]", hc)
	}
	check := func() error {
		cmd := exec.Command(servicetest.Binary(t), hc.Test[2:]...)
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
		t.Errorf("records_count answered %s, want %s (database %s)", got, wantBody, dbName)
	}
	resp := get(t, "http://127.0.0.1:"+strconv.Itoa(metricsPort)+"/metrics")
	if !strings.Contains(resp, "http_server_request_duration_seconds") {
		t.Errorf("no request metrics on the Prometheus port the compose file sets")
	}
	// The bundled database is set up for CACHE__CHANGES=replication, which the service asks
	// for: it started, and follows the tables' changes.
	if env["CACHE__CHANGES"] != "replication" {
		t.Errorf("CACHE__CHANGES %q, want replication with the bundled database", env["CACHE__CHANGES"])
	}
	if h := healthzWithKey(t, base, env["AUTHENTICATION__API_KEY_HEADER"], key); !strings.Contains(h, `"source":"replication"`) {
		t.Errorf("healthz %s: want the change source replication", h)
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

// serverOptions are the test cluster's settings for the postgres service pg: the image's
// command is postgres with -c name=value options, each a line of the server's configuration.
func serverOptions(t *testing.T, pg types.ServiceConfig) pgtest.Options {
	t.Helper()
	var conf []string
	cmd := []string(pg.Command)
	if len(cmd) > 0 && cmd[0] != "postgres" {
		t.Fatalf("the postgres service's command %q: this emulation runs postgres with -c options only", cmd)
	}
	for i := 1; i < len(cmd); i += 2 {
		if cmd[i] != "-c" || i+1 >= len(cmd) || !strings.Contains(cmd[i+1], "=") {
			t.Fatalf("the postgres service's command %q: want postgres -c name=value ...", cmd)
		}
		name, value, _ := strings.Cut(cmd[i+1], "=")
		conf = append(conf, name+" = "+quote(value))
	}
	return pgtest.Options{Conf: strings.Join(conf, "\n")}
}

// healthzWithKey is /v1/healthz's body as a key holder sees it.
func healthzWithKey(t *testing.T, base, header, key string) string {
	t.Helper()
	if header == "" {
		header = "x-api-key"
	}
	req, err := http.NewRequest(http.MethodGet, base+"/v1/healthz", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(header, key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// setUpAsImage sets c up as the postgres image sets up its first start for the service pg (see
// TestCompose): the superuser's password, the database POSTGRES_DB, the init files; then loads
// the test data as the ETL would (as the superuser). It returns the database's name and its
// record count. The superuser's password becomes POSTGRES_PASSWORD unless it is c's already.
func setUpAsImage(t *testing.T, c *pgtest.Cluster, project *types.Project, pg types.ServiceConfig, work string) (string, int) {
	t.Helper()
	psql := deploytest.Tool(t, "psql", "Debian package postgresql-client; make test-deps installs it",
		"/usr/lib/postgresql/15/bin/psql")
	pgEnv := environment(t, pg)
	superPassword := pgEnv["POSTGRES_PASSWORD"]
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
	if superPassword != c.Password() {
		if err := c.Exec(ctx, "postgres", "ALTER ROLE postgres PASSWORD "+quote(superPassword)); err != nil {
			t.Fatal(err)
		}
	}
	pgEnv["POSTGRES_USER"] = superuser
	pgEnv["PATH"] = os.Getenv("PATH")
	pgEnv["PGHOST"] = c.Host()
	pgEnv["PGPORT"] = strconv.Itoa(c.Port())
	pgEnv["PGPASSWORD"] = superPassword
	pgEnv["PGDATA"] = filepath.Join(c.Dir(), "data")
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
	// The image starts the server anew after the init files: pg_hba.conf lines they added
	// count from then on.
	if err := execAs(ctx, c, dbName, superPassword, "SELECT pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}
	// The ETL's load, as the superuser.
	if err := execAs(ctx, c, dbName, superPassword, fixture.EdgeSQL); err != nil {
		t.Fatal(err)
	}
	var want int
	if err := queryAs(ctx, c, dbName, superPassword, "SELECT count(*) FROM fact_record", &want); err != nil {
		t.Fatal(err)
	}
	return dbName, want
}

// startWith runs the service binary with exactly env, its listening ports (APP__PORT,
// OTEL_EXPORTER_PROMETHEUS_PORT) rewritten to free ones and LOG__PATH to a temporary folder,
// and waits for /v1/healthz 200.
func startWith(t *testing.T, env map[string]string) (*deploytest.Proc, string, int) {
	t.Helper()
	env["LOG__PATH"] = t.TempDir()
	bin := servicetest.Binary(t)
	for attempt := 1; ; attempt++ {
		port := freePort(t)
		metricsPort := freePort(t)
		env["APP__PORT"] = strconv.Itoa(port)
		if _, ok := env["OTEL_EXPORTER_PROMETHEUS_PORT"]; ok {
			env["OTEL_EXPORTER_PROMETHEUS_PORT"] = strconv.Itoa(metricsPort)
		}
		p := deploytest.Start(t, []string{bin}, envList(env), t.TempDir(), nil)
		base := "http://127.0.0.1:" + strconv.Itoa(port)
		err := p.Await(base+"/v1/healthz", 200, 30*time.Second)
		if err == nil {
			return p, base, metricsPort
		}
		if !p.AddressInUse() || attempt == 3 {
			t.Fatalf("%v\noutput:\n%s", err, p.Output())
		}
	}
}

// composeOnly names the values of compose.env: the passwords of the database's superuser, of
// Grafana's admin and of the replication role, which only their own containers may get.
var composeOnly = []string{"POSTGRES_PASSWORD", "GRAFANA_ADMIN_PASSWORD", "GF_SECURITY_ADMIN_PASSWORD", "REPLICATION_PASSWORD", "READER_PASSWORD", "PGPASSWORD"}

// noComposeSecrets: the service's environment holds none of compose.env's variables, nor any
// of the secret values given.
func noComposeSecrets(t *testing.T, svc types.ServiceConfig, secrets ...string) {
	t.Helper()
	for k, v := range environment(t, svc) {
		if slices.Contains(composeOnly, k) || strings.HasPrefix(k, "GF_") || strings.HasPrefix(k, "POSTGRES_") {
			t.Errorf("service %s gets %s", svc.Name, k)
		}
		if v != "" && slices.Contains(secrets, v) {
			t.Errorf("service %s gets a password not its own in %s", svc.Name, k)
		}
	}
	if len(svc.EnvFiles) != 1 || filepath.Base(svc.EnvFiles[0].Path) != ".env" {
		t.Errorf("service %s reads the env files %+v, want deploy/.env alone (the service's settings)", svc.Name, svc.EnvFiles)
	}
}

// TestComposeObservability: compose.observability.yaml adds Prometheus and Grafana, Grafana's
// admin password is compose.env's and must be set (loading fails without it; no default), it
// reaches Grafana and not the service, and every file the compose files mount (dashboard, alert
// rules, schema) is in the repository.
func TestComposeObservability(t *testing.T) {
	t.Parallel()
	setup := composeSetup{
		files:      append(slices.Clone(bundled), "compose.observability.yaml"),
		env:        map[string]string{"AUTHENTICATION__API_KEY": "k", "DATABASE__PASSWORD": "p"},
		composeEnv: map[string]string{"POSTGRES_PASSWORD": "s"},
	}
	if _, _, err := tryLoadCompose(t, setup); err == nil || !strings.Contains(err.Error(), "GRAFANA_ADMIN_PASSWORD") {
		t.Errorf("compose.observability.yaml without GRAFANA_ADMIN_PASSWORD: %v, want a refusal naming it", err)
	}
	grafanaPassword := "g-" + servicetest.RandomKey()[:12]
	setup.composeEnv["GRAFANA_ADMIN_PASSWORD"] = grafanaPassword
	project, work := loadCompose(t, setup)
	for _, name := range []string{"prometheus", "grafana"} {
		if _, err := project.GetService(name); err != nil {
			t.Errorf("compose.observability.yaml: %v", err)
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
	if environment(t, grafana)["GF_SECURITY_ADMIN_PASSWORD"] != grafanaPassword {
		t.Error("Grafana's admin password is not compose.env's GRAFANA_ADMIN_PASSWORD")
	}
	provisioned := false
	for _, c := range grafana.Configs {
		provisioned = provisioned || strings.HasPrefix(c.Target, "/etc/grafana/provisioning/dashboards/")
	}
	if !provisioned {
		t.Error("grafana: no dashboard provider in /etc/grafana/provisioning/dashboards/")
	}
	svc, err := project.GetService("emsquery")
	if err != nil {
		t.Fatal(err)
	}
	noComposeSecrets(t, svc, grafanaPassword, "s")
}

// TestComposeExternalDatabase: compose.yaml alone, with the database named in deploy/.env (as
// docs/deploy.md says for a database of one's own), loads without the bundled database's
// service or its password (no depends_on on a service that is not there), and the service
// started with the environment compose gives it serves: against a throwaway cluster with TLS,
// the .env.example's DATABASE__ENCRYPT=yes kept, as the read-only role.
func TestComposeExternalDatabase(t *testing.T) {
	t.Parallel()
	// A cluster of its own: the role's password is the cluster's, not one database's.
	c := pgtest.New(t, pgtest.Options{SSL: true})
	db := pgtest.NewDatabase(t, c)
	ctx := context.Background()
	password := "r@ad:/%-" + servicetest.RandomKey()[:12]
	if err := c.Exec(ctx, db, "ALTER ROLE emsquery_reader PASSWORD "+quote(password)); err != nil {
		t.Fatal(err)
	}
	key := servicetest.RandomKey()
	// db.example.org and 6543 stand for the operator's server; rewritten to the cluster below.
	project, _ := loadCompose(t, composeSetup{
		files: []string{"compose.yaml"},
		env: map[string]string{
			"AUTHENTICATION__API_KEY": key,
			"DATABASE__HOST":          "db.example.org",
			"DATABASE__PORT":          "6543",
			"DATABASE__NAME":          db,
			"DATABASE__USERNAME":      "emsquery_reader",
			"DATABASE__PASSWORD":      password,
		},
	})
	if _, err := project.GetService("postgres"); err == nil {
		t.Error("a postgres service without compose.postgres.yaml")
	}
	svc, err := project.GetService("emsquery")
	if err != nil {
		t.Fatal(err)
	}
	if len(svc.DependsOn) != 0 {
		t.Errorf("emsquery depends_on %v without the bundled database", svc.DependsOn)
	}
	noComposeSecrets(t, svc)
	env := environment(t, svc)
	if env["DATABASE__HOST"] != "db.example.org" || env["DATABASE__PORT"] != "6543" || env["DATABASE__ENCRYPT"] != "yes" {
		t.Fatalf("the service connects to %s:%s (encrypt %s), want deploy/.env's db.example.org:6543 with TLS",
			env["DATABASE__HOST"], env["DATABASE__PORT"], env["DATABASE__ENCRYPT"])
	}
	env["DATABASE__HOST"] = c.Host()
	env["DATABASE__PORT"] = strconv.Itoa(c.Port())
	_, base, _ := startWith(t, env)
	if got := graphQL(t, base, "", key, `{ records_count { count } }`); got != `{"data":{"records_count":{"count":0}}}` {
		t.Errorf("records_count answered %s", got)
	}
}

// TestComposeHardening: every container of the compose files runs without gaining privileges
// (no-new-privileges) and with every capability dropped but those its image's entrypoint needs
// (the postgres image's root start: chown, setuid); the service's containers take none, and run
// with a read-only root file system, as every other does that writes only its volumes and tmpfs
// (Grafana writes elsewhere too).
func TestComposeHardening(t *testing.T) {
	t.Parallel()
	setups := []composeSetup{
		{files: append(slices.Clone(bundled), "compose.observability.yaml"),
			env:        map[string]string{"AUTHENTICATION__API_KEY": "k", "DATABASE__PASSWORD": "p"},
			composeEnv: map[string]string{"POSTGRES_PASSWORD": "s", "GRAFANA_ADMIN_PASSWORD": "g"}},
		{files: []string{"compose.scale.yaml"},
			env:        map[string]string{"AUTHENTICATION__API_KEY": "k", "DATABASE__PASSWORD": "p"},
			composeEnv: map[string]string{"POSTGRES_PASSWORD": "s", "REPLICATION_PASSWORD": "r"}},
	}
	rootStart := []string{"CHOWN", "DAC_OVERRIDE", "FOWNER", "SETGID", "SETUID"}
	n := 0
	for _, setup := range setups {
		project, _ := loadCompose(t, setup)
		for _, s := range project.Services {
			n++
			if !slices.Contains(s.SecurityOpt, "no-new-privileges:true") {
				t.Errorf("%s: security_opt %v, want no-new-privileges:true", s.Name, s.SecurityOpt)
			}
			if !slices.Equal(s.CapDrop, []string{"ALL"}) {
				t.Errorf("%s: cap_drop %v, want [ALL]", s.Name, s.CapDrop)
			}
			for _, c := range s.CapAdd {
				if !slices.Contains(rootStart, c) || !strings.HasPrefix(s.Image, "postgres:") || s.User != "" {
					t.Errorf("%s: cap_add %s", s.Name, c)
				}
			}
			if s.Name == "grafana" {
				continue
			}
			if !s.ReadOnly {
				t.Errorf("%s: read_only is not set", s.Name)
			}
			if strings.HasPrefix(s.Name, "emsquery") && (len(s.CapAdd) > 0 || len(s.Tmpfs) > 0) {
				t.Errorf("%s: cap_add %v, tmpfs %v: the service needs none", s.Name, s.CapAdd, s.Tmpfs)
			}
		}
	}
	if n < 9 {
		t.Errorf("%d services checked", n)
	}
}

// TestComposeScale starts what deploy/compose.scale.yaml describes, without Docker: the primary
// set up as the postgres image sets up its first start (with the file's init files: the schema,
// the read-only role's password, the replication role), a streaming standby of it, a PgBouncer
// in front of each configured by the file's own entrypoint script, and a service replica with
// exactly the environment compose gives it. The replica must log in as the read-only role (not
// the superuser, which PgBouncer does not even know), read from the standby first, and answer;
// its environment holds none of compose.env's passwords.
//
// What stands in for the containers, and the only values changed (besides TestCompose's):
//   - The standby is pgtest's (pg_basebackup -R as the superuser, as the file's does as the
//     replication role); that the replication role may connect for replication is checked on
//     its own, with its password.
//   - PgBouncer runs the compose file's entrypoint script with the container's environment, as
//     an unprivileged user, with /tmp/ (its files) rewritten to a folder of its own, the server
//     (SERVER_HOST, port 5432) to the cluster, and its listening address and port (0.0.0.0:6432)
//     to 127.0.0.1 and a free port.
//   - The replica's DATABASE__HOST (the PgBouncers' service names) and DATABASE__PORT become
//     127.0.0.1 and each PgBouncer's port, in the order the file lists them.
func TestComposeScale(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("pgbouncer"); err != nil {
		deploytest.Tool(t, "pgbouncer", "Debian package pgbouncer; make test-deps installs it", "/usr/sbin/pgbouncer")
	}
	c := pgtest.New(t, pgtest.Options{})
	key := servicetest.RandomKey()
	// A double quote, as PgBouncer's userlist must escape it.
	readerPassword := `r"ad:/%-` + servicetest.RandomKey()[:12]
	replicationPassword := "repl-" + servicetest.RandomKey()[:12]
	project, work := loadCompose(t, composeSetup{
		files: []string{"compose.scale.yaml"},
		env: map[string]string{
			"AUTHENTICATION__API_KEY": key,
			"DATABASE__PASSWORD":      readerPassword,
			"DATABASE__NAME":          "analytics",
		},
		// The cluster's own superuser password: pgtest's standby connects with it.
		composeEnv: map[string]string{"POSTGRES_PASSWORD": c.Password(), "REPLICATION_PASSWORD": replicationPassword},
	})
	primary, err := project.GetService("primary")
	if err != nil {
		t.Fatal(err)
	}
	var replicas []types.ServiceConfig
	for _, name := range []string{"emsquery-1", "emsquery-2"} {
		svc, err := project.GetService(name)
		if err != nil {
			t.Fatal(err)
		}
		replicas = append(replicas, svc)
		env := environment(t, svc)
		if env["DATABASE__USERNAME"] != "emsquery_reader" {
			t.Errorf("%s logs in as %q, want the read-only role emsquery_reader", name, env["DATABASE__USERNAME"])
		}
		if env["DATABASE__PASSWORD"] != readerPassword || env["AUTHENTICATION__API_KEY"] != key {
			t.Errorf("%s: deploy/.env's password or key did not reach it", name)
		}
		if env["DATABASE__TRANSACTION_POOLING"] != "yes" || env["CACHE__NOTIFY_CHANNEL"] != "" {
			t.Errorf("%s: DATABASE__TRANSACTION_POOLING %q, CACHE__NOTIFY_CHANNEL %q: behind PgBouncer in transaction mode, yes and empty",
				name, env["DATABASE__TRANSACTION_POOLING"], env["CACHE__NOTIFY_CHANNEL"])
		}
		noComposeSecrets(t, svc, c.Password(), replicationPassword)
	}
	if !maps.Equal(environment(t, replicas[0]), environment(t, replicas[1])) {
		t.Error("the replicas' environments differ")
	}

	// The primary, its data, and the standby.
	dbName, want := setUpAsImage(t, c, project, primary, work)
	ctx := context.Background()
	checkReplicationLogin(t, c, replicationPassword)
	standby := pgtest.NewStandby(t, c)
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := standby.WaitForReplay(waitCtx, c); err != nil {
		t.Fatal(err)
	}

	// A PgBouncer in front of each, as the file configures it.
	servers := map[string]*pgtest.Cluster{"primary": c, "standby": standby}
	bouncerPorts := map[string]int{}
	for _, name := range []string{"pgbouncer-primary", "pgbouncer-standby"} {
		b, err := project.GetService(name)
		if err != nil {
			t.Fatal(err)
		}
		benv := environment(t, b)
		if benv["DATABASE__USERNAME"] != "emsquery_reader" {
			t.Errorf("%s knows the role %q, want emsquery_reader", name, benv["DATABASE__USERNAME"])
		}
		server, ok := servers[benv["SERVER_HOST"]]
		if !ok {
			t.Fatalf("%s: SERVER_HOST %q is neither primary nor standby", name, benv["SERVER_HOST"])
		}
		bouncerPorts[name] = startBouncer(t, b, benv, server)
	}

	// A replica.
	env := environment(t, replicas[0])
	var ports []string
	hosts := strings.Split(env["DATABASE__HOST"], ",")
	for i, h := range hosts {
		p, ok := bouncerPorts[h]
		if !ok || env["DATABASE__PORT"] != "6432" {
			t.Fatalf("DATABASE__HOST %s:%s: want the PgBouncers' services on 6432", env["DATABASE__HOST"], env["DATABASE__PORT"])
		}
		hosts[i] = "127.0.0.1"
		ports = append(ports, strconv.Itoa(p))
	}
	if len(hosts) != 2 || !strings.HasPrefix(env["DATABASE__HOST"], "pgbouncer-standby,") || env["DATABASE__TARGET_SESSION_ATTRS"] != "prefer-standby" {
		t.Errorf("DATABASE__HOST %s with %s: want the standby's PgBouncer first, prefer-standby", env["DATABASE__HOST"], env["DATABASE__TARGET_SESSION_ATTRS"])
	}
	env["DATABASE__HOST"] = strings.Join(hosts, ",")
	env["DATABASE__PORT"] = strings.Join(ports, ",")
	_, base, _ := startWith(t, env)
	got := graphQL(t, base, env["AUTHENTICATION__API_KEY_HEADER"], key, `{ records_count { count } }`)
	if wantBody := fmt.Sprintf(`{"data":{"records_count":{"count":%d}}}`, want); got != wantBody {
		t.Errorf("records_count answered %s, want %s", got, wantBody)
	}
	// The reads went to the standby, as the read-only role (PgBouncer's server connections are
	// made as the client's role).
	var readers int
	if err := queryAs(ctx, standby, dbName, c.Password(), `SELECT count(*) FROM pg_stat_activity WHERE usename = 'emsquery_reader'`, &readers); err != nil {
		t.Fatal(err)
	}
	if readers == 0 {
		t.Error("no session of emsquery_reader on the standby: the replica does not read from it")
	}
}

// checkReplicationLogin: the replication role the primary's init file made may open a
// replication connection with its password, as the standby's pg_basebackup does.
func checkReplicationLogin(t *testing.T, c *pgtest.Cluster, password string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg, err := pgconn.ParseConfig(fmt.Sprintf("host=%s port=%d user=replicator dbname=postgres sslmode=disable replication=true", c.Host(), c.Port()))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Password = password
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("replication login as replicator: %v", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "IDENTIFY_SYSTEM").ReadAll(); err != nil {
		t.Errorf("IDENTIFY_SYSTEM as replicator: %v", err)
	}
}

// startBouncer runs the PgBouncer service b's entrypoint with its environment (see
// TestComposeScale for the rewrites) and returns the port it listens on.
func startBouncer(t *testing.T, b types.ServiceConfig, env map[string]string, server *pgtest.Cluster) int {
	t.Helper()
	ep := b.Entrypoint
	if len(ep) != 3 || ep[0] != "sh" || ep[1] != "-c" {
		t.Fatalf("%s: entrypoint %q, want sh -c <script>", b.Name, ep)
	}
	dir := t.TempDir()
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		// PgBouncer refuses to run as root; the image runs it as postgres.
		uid := unusedID(t)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), NoSetGroups: true}
		for _, d := range []string{filepath.Dir(dir), dir} {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chown(dir, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	port := freePort(t)
	script := ep[2]
	for _, r := range [][2]string{
		{"/tmp/", dir + "/"},
		{"port=5432", "port=" + strconv.Itoa(server.Port())},
		{"listen_addr = 0.0.0.0", "listen_addr = 127.0.0.1"},
		{"listen_port = 6432", "listen_port = " + strconv.Itoa(port)},
	} {
		if !strings.Contains(script, r[0]) {
			t.Fatalf("%s: the entrypoint has no %q to rewrite:\n%s", b.Name, r[0], script)
		}
		script = strings.ReplaceAll(script, r[0], r[1])
	}
	env = maps.Clone(env)
	env["SERVER_HOST"] = server.Host()
	env["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	p := deploytest.Start(t, []string{"sh", "-c", script}, envList(env), dir, cred)
	deadline := time.Now().Add(15 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
		if err == nil {
			conn.Close()
			return port
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not listen on %d: %v\n%s", b.Name, port, err, p.Output())
		}
		time.Sleep(50 * time.Millisecond)
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
