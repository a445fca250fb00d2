package deploytest_test

import (
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coreos/go-systemd/v22/unit"

	"github.com/emsanalytics/emsquery/internal/deploytest"
	"github.com/emsanalytics/emsquery/internal/fixture"
	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// keysCredential is where the unit's LoadCredential=keys.json puts the keys file, and so the
// value of AUTHENTICATION__API_KEYS_FILE that the unit's comment tells operators to set.
const keysCredential = "/run/credentials/emsquery.service/keys.json"

// TestSystemd installs the service as deploy/emsquery.service's header says (the same lines
// docs/deploy.md gives) and starts it as systemd would, then expects /v1/healthz 200 and a query
// answered: with the key in the env file, and with a keys file loaded as a credential (the
// unit's commented lines switched on, as its comment says).
//
// What stands in for systemd, without it running as PID 1:
//   - A temporary folder stands for "/": the install lines, the unit's paths and the settings
//     that name files (LOG__PATH, AUTHENTICATION__API_KEYS_FILE, DATABASE__SSL_ROOT_CERT) are
//     taken under it. The binaries (install, env) are the machine's own.
//   - The unit is parsed with go-systemd's unit-file reader. As root, the test reads
//     EnvironmentFile= (with systemd's syntax: ParseEnvironmentFile), makes LogsDirectory= owned
//     by the service's user, copies LoadCredential= files to a folder only that user reads,
//     sets LOGS_DIRECTORY and CREDENTIALS_DIRECTORY, applies Environment= and then the env file
//     over it (systemd's precedence), expands ${VAR} in ExecStart=, and runs it as an unused
//     uid and gid, as DynamicUser=yes does.
//   - The sandboxing options (ProtectSystem= and the rest) are not applied; a test that checks
//     the folder the service writes is its logs folder stands in for ProtectSystem=strict.
//
// The database has TLS (DATABASE__ENCRYPT=yes, the example's value, is kept) and the service logs
// in as the read-only role the schema makes.
func TestSystemd(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		deploytest.Unavailable(t, "root (to start the service as another user, as DynamicUser does)", nil)
	}
	uid := unusedID(t)
	c := pgtest.SharedWith(t, pgtest.Options{SSL: true})
	db := pgtest.NewDatabase(t, c)
	ctx := context.Background()
	password := "r@ad:/%-" + servicetest.RandomKey()[:12]
	if err := c.Exec(ctx, db, "ALTER ROLE emsquery_reader PASSWORD "+quote(password)); err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, db, fixture.EdgeSQL); err != nil {
		t.Fatal(err)
	}
	var want int
	if err := queryAs(ctx, c, db, c.Password(), "SELECT count(*) FROM fact_record", &want); err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{
		"DATABASE__HOST":     c.Host(),
		"DATABASE__PORT":     strconv.Itoa(c.Port()),
		"DATABASE__NAME":     db,
		"DATABASE__USERNAME": "emsquery_reader",
		"DATABASE__PASSWORD": password,
	}
	wantAnswer := `{"data":{"records_count":{"count":` + strconv.Itoa(want) + `}}}`

	t.Run("api key", func(t *testing.T) {
		key := servicetest.RandomKey()
		s := install(t, uid, false, withSettings(settings, map[string]string{"AUTHENTICATION__API_KEY": key}), "")
		if got := graphQL(t, s.base, "", key, `{ records_count { count } }`); got != wantAnswer {
			t.Errorf("records_count answered %s, want %s", got, wantAnswer)
		}
		s.checkLogs(t)
	})
	t.Run("keys file", func(t *testing.T) {
		out, err := exec.Command(servicetest.Binary(t), "key", "new", "--name", "ops", "--scopes", "graphql").Output()
		if err != nil {
			t.Fatal(err)
		}
		key, entry, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
		s := install(t, uid, true, withSettings(settings, map[string]string{
			"AUTHENTICATION__API_KEY":       "",
			"AUTHENTICATION__API_KEYS_FILE": keysCredential,
		}), "["+entry+"]")
		if got := graphQL(t, s.base, "", key, `{ records_count { count } }`); got != wantAnswer {
			t.Errorf("records_count answered %s, want %s", got, wantAnswer)
		}
	})
}

func withSettings(base, more map[string]string) map[string]string {
	m := map[string]string{}
	for k, v := range base {
		m[k] = v
	}
	for k, v := range more {
		m[k] = v
	}
	return m
}

// TestSystemdAnalyzeVerify runs `systemd-analyze verify` on the unit as shipped and with its
// keys-file lines switched on, where systemd-analyze is installed (Debian's systemd package);
// elsewhere the test says so and skips, even under CI: the unit's semantics are checked by
// TestSystemd, this adds systemd's own reading of its syntax.
func TestSystemdAnalyzeVerify(t *testing.T) {
	t.Parallel()
	bin, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed: the unit's syntax is not verified by systemd here (TestSystemd still reads and runs it)")
	}
	for _, keys := range []bool{false, true} {
		dir := t.TempDir()
		path := filepath.Join(dir, "emsquery.service")
		if err := os.WriteFile(path, []byte(unitText(t, keys)), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bin, "verify", path).CombinedOutput()
		if err != nil || len(strings.TrimSpace(string(out))) > 0 {
			t.Errorf("systemd-analyze verify (keys file %v): %v\n%s", keys, err, out)
		}
	}
}

// unitText is deploy/emsquery.service, with its LoadCredential line switched on when keys.
func unitText(t *testing.T, keys bool) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deploytest.Root(), "deploy", "emsquery.service"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if keys {
		if !strings.Contains(text, "\n#LoadCredential=") {
			t.Fatal("the unit has no commented LoadCredential= line to switch on")
		}
		text = strings.Replace(text, "\n#LoadCredential=", "\nLoadCredential=", 1)
	}
	return text
}

type installed struct {
	root, base, logs string
	proc             *deploytest.Proc
}

var installLine = regexp.MustCompile(`(?m)^#[ \t]+(install [^#\n]*?)[ \t]*(#.*)?$`)

// install lays out the unit's install lines under a temporary root, edits the env file with
// settings (plus a free APP__PORT), and starts the service as systemd would (see TestSystemd).
// keysJSON, when not empty, is the keys file installed by the keys-file install line.
func install(t *testing.T, uid int, keys bool, settings map[string]string, keysJSON string) *installed {
	t.Helper()
	root := t.TempDir()
	// The test's temporary folders are the test user's alone; "/" and its folders are not.
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"etc/systemd/system", "usr/local/bin", "var/log", "run/credentials"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	under := func(p string) string { return filepath.Join(root, p) }
	text := unitText(t, keys)
	repo := deploytest.Root()
	docs, err := os.ReadFile(filepath.Join(repo, "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, m := range installLine.FindAllStringSubmatch(text, -1) {
		lines = append(lines, m[1])
	}
	if len(lines) < 3 {
		t.Fatalf("the unit's header gives %d install lines: %q", len(lines), lines)
	}
	keysSource := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(keysSource, []byte(keysJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, line := range lines {
		if !strings.Contains(string(docs), line) {
			t.Errorf("docs/deploy.md lacks the unit's install line %q", line)
		}
		args := strings.Fields(line)[1:]
		if args[len(args)-1] == "/etc/emsquery/keys.json" && !keys {
			continue
		}
		for i, a := range args {
			switch {
			case a == "bin/emsquery":
				args[i] = servicetest.Binary(t)
			case a == "keys.json":
				args[i] = keysSource
			case strings.HasPrefix(a, "deploy/"):
				args[i] = filepath.Join(repo, a)
			case strings.HasPrefix(a, "/"):
				args[i] = under(a)
			}
		}
		if out, err := exec.Command("install", args...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
	}

	opts, err := unit.DeserializeOptions(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parse unit: %v", err)
	}
	service := map[string][]string{}
	for _, o := range opts {
		if o.Section == "Service" {
			service[o.Name] = append(service[o.Name], o.Value)
		}
	}
	if got := service["DynamicUser"]; len(got) != 1 || got[0] != "yes" {
		t.Fatalf("DynamicUser = %q, want yes", got)
	}
	if len(service["EnvironmentFile"]) != 1 {
		t.Fatalf("EnvironmentFile = %q, want one file", service["EnvironmentFile"])
	}
	envFile := under(strings.TrimPrefix(service["EnvironmentFile"][0], "-"))

	// The operator's edit: the database, the key, and a free port.
	settings["APP__PORT"] = strconv.Itoa(freePort(t))
	b, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(envFile, []byte(deploytest.EditEnv(t, string(b), settings)), 0o600); err != nil {
		t.Fatal(err)
	}
	// Why systemd must read it: the service's user cannot.
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), NoSetGroups: true}
	cat := exec.Command("cat", envFile)
	cat.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if err := cat.Run(); err == nil {
		t.Errorf("the service's user can read %s: the settings, password and key included", envFile)
	}

	// systemd, as root: directories, credentials, environment.
	env := map[string]string{"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	logs := ""
	for _, name := range service["LogsDirectory"] {
		logs = under(filepath.Join("/var/log", name))
		mode := uint64(0o755)
		if m := service["LogsDirectoryMode"]; len(m) == 1 {
			if mode, err = strconv.ParseUint(m[0], 8, 32); err != nil {
				t.Fatal(err)
			}
		}
		mkdirOwned(t, logs, os.FileMode(mode), uid)
		env["LOGS_DIRECTORY"] = logs
	}
	creds := under("/run/credentials/emsquery.service")
	for _, lc := range service["LoadCredential"] {
		id, path, _ := strings.Cut(lc, ":")
		mkdirOwned(t, creds, 0o500, uid)
		data, err := os.ReadFile(under(path))
		if err != nil {
			t.Fatalf("LoadCredential=%s: %v", lc, err)
		}
		dst := filepath.Join(creds, id)
		if err := os.WriteFile(dst, data, 0o400); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dst, uid, uid); err != nil {
			t.Fatal(err)
		}
		env["CREDENTIALS_DIRECTORY"] = creds
	}
	for _, e := range service["Environment"] {
		k, v, _ := strings.Cut(strings.Trim(e, `"`), "=")
		env[k] = strings.ReplaceAll(v, "%d", creds)
	}
	b, err = os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	fromFile, err := deploytest.ParseEnvironmentFile(string(b))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range fromFile {
		if fileSetting[k] && strings.HasPrefix(v, "/") {
			v = under(v)
		}
		env[k] = v
	}
	if len(service["ExecStart"]) != 1 {
		t.Fatalf("ExecStart = %q, want one command", service["ExecStart"])
	}
	var argv []string
	for _, a := range strings.Fields(service["ExecStart"][0]) {
		a = os.Expand(a, func(k string) string { return env[k] })
		if _, err := os.Stat(under(a)); strings.HasPrefix(a, "/") && err == nil {
			a = under(a)
		}
		argv = append(argv, a)
	}
	for attempt := 1; ; attempt++ {
		p := deploytest.Start(t, argv, envList(env), "/", cred)
		base := "http://127.0.0.1:" + env["APP__PORT"]
		err := p.Await(base+"/v1/healthz", 200, 30*time.Second)
		if err == nil {
			return &installed{root: root, base: base, logs: logs, proc: p}
		}
		if !p.AddressInUse() || attempt == 3 {
			t.Fatalf("%v\noutput:\n%s", err, p.Output())
		}
		// Another process took the port between the test picking it and the service binding it:
		// another port, in the environment systemd passes (the env file says the first).
		env["APP__PORT"] = strconv.Itoa(freePort(t))
	}
}

// fileSetting names the settings whose value is a file or folder, taken under the test's root.
var fileSetting = map[string]bool{"LOG__PATH": true, "AUTHENTICATION__API_KEYS_FILE": true, "DATABASE__SSL_ROOT_CERT": true}

// checkLogs: the service writes its log file in LogsDirectory=, the one folder ProtectSystem=
// strict leaves it.
func (s *installed) checkLogs(t *testing.T) {
	t.Helper()
	servicetest.WaitFor(t, 5*time.Second, "a log file in LogsDirectory", func() bool {
		_, err := os.Stat(filepath.Join(s.logs, "service.log"))
		return err == nil
	})
}

// unusedID is a uid, also free as a gid, that no user or group of this machine has, as systemd
// picks for DynamicUser= (from 61184-65519).
func unusedID(t *testing.T) int {
	t.Helper()
	for id := 61234; id < 65519; id++ {
		_, uerr := user.LookupId(strconv.Itoa(id))
		_, gerr := user.LookupGroupId(strconv.Itoa(id))
		if uerr != nil && gerr != nil {
			return id
		}
	}
	t.Fatal("no free uid in systemd's DynamicUser range")
	return 0
}

func mkdirOwned(t *testing.T, dir string, mode os.FileMode, uid int) {
	t.Helper()
	if err := os.MkdirAll(dir, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, uid); err != nil {
		t.Fatal(err)
	}
}

// TestSystemdNoReload: the unit has no ExecReload=, so `systemctl reload emsquery` fails; and a
// reload could not do what it would promise: the keys file is a credential that systemd copies
// when the service starts (LoadCredential=), so SIGHUP and the file watch read that copy, never
// the edited file, and the settings are read at start only. No document may advise it, nor a
// reload after editing the keys file under systemd: `systemctl restart emsquery` is what works.
func TestSystemdNoReload(t *testing.T) {
	t.Parallel()
	opts, err := unit.DeserializeOptions(strings.NewReader(unitText(t, true)))
	if err != nil {
		t.Fatalf("parse unit: %v", err)
	}
	for _, o := range opts {
		if o.Section == "Service" && o.Name == "ExecReload" {
			t.Errorf("ExecReload=%s: a reload cannot refresh the LoadCredential= copy of the keys file", o.Value)
		}
	}
	root := deploytest.Root()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(root, "README.md"), filepath.Join(root, "deploy", "emsquery.service"),
		filepath.Join(root, "deploy", ".env.example"))
	reload := regexp.MustCompile(`systemctl\s+reload\s+emsquery|systemctl\s+kill\s+(-s|--signal)\s*(HUP|SIGHUP)`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if m := reload.Find(b); m != nil {
			t.Errorf("%s advises %q, which the unit cannot do", f, m)
		}
	}
	if !strings.Contains(unitText(t, false), "systemctl restart emsquery") {
		t.Error("the unit's comment does not say how a new keys file takes effect (systemctl restart emsquery)")
	}
}
