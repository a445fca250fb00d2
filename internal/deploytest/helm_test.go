package deploytest_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/emsanalytics/emsquery/internal/deploytest"
	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// serviceMonitor is the part of the Prometheus Operator's ServiceMonitor the chart sets, for a
// strict decode without the operator's module.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path"`
			Interval string `json:"interval"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// rendered is what `helm template` made, each object decoded strictly (an unknown or misplaced
// field fails) into its Kubernetes type.
type rendered struct {
	deployments []appsv1.Deployment
	configMaps  []corev1.ConfigMap
	secrets     []corev1.Secret
	services    []corev1.Service
	pdbs        []policyv1.PodDisruptionBudget
	monitors    []serviceMonitor
}

func decode(t *testing.T, manifests []byte) rendered {
	t.Helper()
	var r rendered
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(manifests), -1) {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("manifest: %v\n%s", err, doc)
		}
		var err error
		switch meta.APIVersion + " " + meta.Kind {
		case "apps/v1 Deployment":
			err = strictAppend(doc, &r.deployments)
		case "v1 ConfigMap":
			err = strictAppend(doc, &r.configMaps)
		case "v1 Secret":
			err = strictAppend(doc, &r.secrets)
		case "v1 Service":
			err = strictAppend(doc, &r.services)
		case "policy/v1 PodDisruptionBudget":
			err = strictAppend(doc, &r.pdbs)
		case "monitoring.coreos.com/v1 ServiceMonitor":
			err = strictAppend(doc, &r.monitors)
		default:
			t.Errorf("unexpected object %s %s", meta.APIVersion, meta.Kind)
			continue
		}
		if err != nil {
			t.Errorf("%s: %v\n%s", meta.Kind, err, doc)
		}
	}
	return r
}

func strictAppend[T any](doc string, list *[]T) error {
	var v T
	if err := yaml.UnmarshalStrict([]byte(doc), &v); err != nil {
		return err
	}
	*list = append(*list, v)
	return nil
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

func helm(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(deploytest.Helm(t), args...)
	// Helm's own state (repositories, cache) in the test's folder, not the user's.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return out
}

// TestHelm lints deploy/helm/emsquery (strict) and renders it with the default values and with
// ci/keys-file-values.yaml, decodes every manifest strictly, and checks what the chart promises:
// two or more replicas, liveness /v1/ping and readiness /v1/healthz on the service's port,
// settings from the ConfigMap (each a documented setting, and together settings the service
// accepts), secrets from the Secret, the keys file mounted where AUTHENTICATION__API_KEYS_FILE
// points, a Service and a PodDisruptionBudget that select the pods, resources, and the
// ServiceMonitor when asked for.
func TestHelm(t *testing.T) {
	t.Parallel()
	chart := filepath.Join(deploytest.Root(), "deploy", "helm", "emsquery")
	keysValues := filepath.Join(chart, "ci", "keys-file-values.yaml")
	docs, err := os.ReadFile(filepath.Join(deploytest.Root(), "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		args     []string
		keysFile bool
	}{
		{"default", nil, false},
		{"default with a key", []string{"--set", "secret.apiKey=k-123", "--set", "secret.databasePassword=p"}, false},
		{"keys file", []string{"-f", keysValues}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			helm(t, append([]string{"lint", "--strict", chart}, c.args...)...)
			r := decode(t, helm(t, append([]string{"template", "rel", chart}, c.args...)...))
			if len(r.deployments) != 1 || len(r.configMaps) != 1 || len(r.secrets) != 1 || len(r.services) != 1 || len(r.pdbs) != 1 {
				t.Fatalf("rendered %d Deployments, %d ConfigMaps, %d Secrets, %d Services, %d PodDisruptionBudgets; want one each",
					len(r.deployments), len(r.configMaps), len(r.secrets), len(r.services), len(r.pdbs))
			}
			d, cm, sec := r.deployments[0], r.configMaps[0], r.secrets[0]
			if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
				t.Errorf("replicas %v, want 2 or more", d.Spec.Replicas)
			}
			pod := labels.Set(d.Spec.Template.Labels)
			for what, sel := range map[string]*metav1.LabelSelector{
				"Deployment":          d.Spec.Selector,
				"PodDisruptionBudget": r.pdbs[0].Spec.Selector,
			} {
				if s, err := metav1.LabelSelectorAsSelector(sel); err != nil || s.Empty() || !s.Matches(pod) {
					t.Errorf("the %s's selector %v does not select the pods (%v)", what, sel, pod)
				}
			}
			if s := labels.SelectorFromSet(r.services[0].Spec.Selector); s.Empty() || !s.Matches(pod) {
				t.Errorf("the Service's selector %v does not select the pods", r.services[0].Spec.Selector)
			}
			if len(d.Spec.Template.Spec.Containers) != 1 {
				t.Fatalf("%d containers, want 1", len(d.Spec.Template.Spec.Containers))
			}
			ctr := d.Spec.Template.Spec.Containers[0]
			port := containerPort(ctr, "http")
			for what, probe := range map[string]*corev1.Probe{"/v1/ping": ctr.LivenessProbe, "/v1/healthz": ctr.ReadinessProbe} {
				if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != what || probe.HTTPGet.Port.String() != "http" {
					t.Errorf("probe for %s: %+v, want an HTTP GET of %s on port http", what, probe, what)
				}
			}
			if cm.Data["APP__PORT"] != port {
				t.Errorf("APP__PORT %q, container port http %s", cm.Data["APP__PORT"], port)
			}
			if ctr.Resources.Requests.Cpu().IsZero() || ctr.Resources.Requests.Memory().IsZero() || ctr.Resources.Limits.Memory().IsZero() {
				t.Errorf("resources %+v: want CPU and memory requests and a memory limit", ctr.Resources)
			}
			if len(ctr.EnvFrom) != 1 || ctr.EnvFrom[0].ConfigMapRef == nil || ctr.EnvFrom[0].ConfigMapRef.Name != cm.Name {
				t.Errorf("envFrom %+v, want the ConfigMap %s", ctr.EnvFrom, cm.Name)
			}

			// The settings: documented, free of secrets, and accepted by the service.
			env := map[string]string{}
			for k, v := range cm.Data {
				if !strings.Contains(string(docs), "`"+k+"`") {
					t.Errorf("ConfigMap setting %s is not in docs/configuration.md", k)
				}
				if strings.Contains(k, "PASSWORD") || k == "AUTHENTICATION__API_KEY" {
					t.Errorf("ConfigMap holds the secret %s", k)
				}
				env[k] = v
			}
			for _, e := range ctr.Env {
				ref := e.ValueFrom
				if ref == nil || ref.SecretKeyRef == nil || ref.SecretKeyRef.Name != sec.Name {
					t.Errorf("env %s does not come from the Secret %s", e.Name, sec.Name)
					continue
				}
				if v, ok := sec.Data[ref.SecretKeyRef.Key]; ok {
					env[e.Name] = string(v)
				}
			}
			code, out := healthcheck(t, env)
			wantCode := 1 // settings read, then nothing answers: settings accepted
			if c.name == "default" {
				wantCode = 2 // no key at all: the NOTES warn, the service refuses
			}
			if code != wantCode {
				t.Errorf("the service with the chart's settings: exit %d, want %d\n%s", code, wantCode, out)
			}

			// The keys file.
			keysPath := cm.Data["AUTHENTICATION__API_KEYS_FILE"]
			if c.keysFile != (keysPath != "") {
				t.Fatalf("AUTHENTICATION__API_KEYS_FILE %q with keys file %v", keysPath, c.keysFile)
			}
			if c.keysFile {
				if len(sec.Data["keys.json"]) == 0 {
					t.Error("the Secret holds no keys.json")
				}
				mounted := false
				for _, m := range ctr.VolumeMounts {
					for _, v := range d.Spec.Template.Spec.Volumes {
						if v.Name != m.Name || v.Secret == nil || v.Secret.SecretName != sec.Name {
							continue
						}
						for _, item := range v.Secret.Items {
							mounted = mounted || (item.Key == "keys.json" && filepath.Join(m.MountPath, item.Path) == keysPath && m.ReadOnly)
						}
					}
				}
				if !mounted {
					t.Errorf("keys.json of the Secret is not mounted read-only at %s", keysPath)
				}
				if len(r.monitors) != 1 || len(r.monitors[0].Spec.Endpoints) != 1 || r.monitors[0].Spec.Endpoints[0].Port != "metrics" {
					t.Errorf("ServiceMonitor %+v, want one scraping port metrics", r.monitors)
				} else if containerPort(ctr, "metrics") != cm.Data["OTEL_EXPORTER_PROMETHEUS_PORT"] {
					t.Errorf("metrics port %s, OTEL_EXPORTER_PROMETHEUS_PORT %s", containerPort(ctr, "metrics"), cm.Data["OTEL_EXPORTER_PROMETHEUS_PORT"])
				}
			} else if len(r.monitors) != 0 {
				t.Error("a ServiceMonitor without serviceMonitor.enabled")
			}
		})
	}
}

func containerPort(c corev1.Container, name string) string {
	i := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == name })
	if i < 0 {
		return ""
	}
	return strconv.Itoa(int(c.Ports[i].ContainerPort))
}

// healthcheck runs `emsquery --healthcheck` with exactly env: it reads the settings first (exit 2
// when they are refused), then asks APP__HOST:APP__PORT (exit 1 when nothing answers).
func healthcheck(t *testing.T, env map[string]string) (int, string) {
	t.Helper()
	cmd := exec.Command(servicetest.Binary(t), "--healthcheck")
	cmd.Env = envList(env)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}
