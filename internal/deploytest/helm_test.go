package deploytest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
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

// alertRule is one rule of a rule group, as Prometheus reads rule files and the Prometheus
// Operator's PrometheusRule holds them.
type alertRule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type ruleGroups struct {
	Groups []struct {
		Name  string      `json:"name"`
		Rules []alertRule `json:"rules"`
	} `json:"groups"`
}

// prometheusRule is the Prometheus Operator's PrometheusRule, for a strict decode.
type prometheusRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              ruleGroups `json:"spec"`
}

// rendered is what `helm template` made, each object decoded strictly (an unknown or misplaced
// field fails) into its Kubernetes type.
type rendered struct {
	deployments     []appsv1.Deployment
	configMaps      []corev1.ConfigMap
	secrets         []corev1.Secret
	services        []corev1.Service
	serviceAccounts []corev1.ServiceAccount
	pdbs            []policyv1.PodDisruptionBudget
	ingresses       []networkingv1.Ingress
	networkPolicies []networkingv1.NetworkPolicy
	hpas            []autoscalingv2.HorizontalPodAutoscaler
	monitors        []serviceMonitor
	rules           []prometheusRule
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
		case "v1 ServiceAccount":
			err = strictAppend(doc, &r.serviceAccounts)
		case "policy/v1 PodDisruptionBudget":
			err = strictAppend(doc, &r.pdbs)
		case "networking.k8s.io/v1 Ingress":
			err = strictAppend(doc, &r.ingresses)
		case "networking.k8s.io/v1 NetworkPolicy":
			err = strictAppend(doc, &r.networkPolicies)
		case "autoscaling/v2 HorizontalPodAutoscaler":
			err = strictAppend(doc, &r.hpas)
		case "monitoring.coreos.com/v1 ServiceMonitor":
			err = strictAppend(doc, &r.monitors)
		case "monitoring.coreos.com/v1 PrometheusRule":
			err = strictAppend(doc, &r.rules)
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

// helmRun runs helm with args; its own state (repositories, cache) in the test's folder, not
// the user's.
func helmRun(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(deploytest.Helm(t), args...)
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return append(out, stderr.Bytes()...), err
	}
	return out, nil
}

func helm(t *testing.T, args ...string) []byte {
	t.Helper()
	out, err := helmRun(t, args...)
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func chartDir() string { return filepath.Join(deploytest.Root(), "deploy", "helm", "emsquery") }

// existingSecrets stand for the Secrets ci/all-values.yaml names and the chart does not make:
// what the cluster would hold.
var existingSecrets = map[string]map[string]string{
	"emsquery-secrets": {"api-key": "k-from-existing-secret"},
	"analytics-app":    {"password": "p-from-cloudnativepg", "username": "app"},
	"emsquery-keys":    {"keys-file.json": `[]`},
}

// TestHelm lints deploy/helm/emsquery (strict) and renders it with the default values, with a
// key, with ci/keys-file-values.yaml, with the chart's Secret under keys of one's choosing, and
// with ci/all-values.yaml (every value set); decodes every manifest strictly; and checks what
// the chart promises:
//   - two or more replicas (or an autoscaler with two or more, and no replica count in the
//     Deployment for it to fight), liveness /v1/ping and readiness /v1/healthz on the service's
//     port, a Service, a PodDisruptionBudget and an autoscaler that select the pods, resources;
//   - settings from the ConfigMap (each a documented setting, none a secret, together settings
//     the service accepts), secrets by the keys and Secrets of secret.refs, extraEnv winning over
//     the settings, the keys file mounted where AUTHENTICATION__API_KEYS_FILE points;
//   - the drain: APP__SHUTDOWN_DELAY and APP__SHUTDOWN_TIMEOUT from `shutdown`, and a
//     terminationGracePeriodSeconds that covers both;
//   - no fixed runAsUser by default, a ServiceAccount of its own without a token;
//   - each optional object (Ingress, HorizontalPodAutoscaler, NetworkPolicy, ServiceMonitor,
//     PrometheusRule, dashboard ConfigMap) only when enabled, and then: the Ingress routes to
//     the Service's http port with the SSE annotations (the user's winning), the NetworkPolicy
//     admits the metrics port only from metricsFrom, the PrometheusRule holds the alerts of
//     deploy/prometheus/alerts.yaml (runbook links on the chosen site), the dashboard ConfigMap
//     deploy/grafana/emsquery.json.
func TestHelm(t *testing.T) {
	t.Parallel()
	chart := chartDir()
	docs, err := os.ReadFile(filepath.Join(deploytest.Root(), "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	alerts := readRuleGroups(t, filepath.Join(deploytest.Root(), "deploy", "prometheus", "alerts.yaml"))
	dashboard, err := os.ReadFile(filepath.Join(deploytest.Root(), "deploy", "grafana", "emsquery.json"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		args     []string
		keysFile bool
		all      bool // ci/all-values.yaml: every optional object
		noSA     bool // serviceAccount.create=false
		// wantEnv: variables the container must get, and their values.
		wantEnv map[string]string
	}{
		{name: "default"},
		{name: "default with a key", args: []string{"--set", "secret.apiKey=k-123", "--set", "secret.databasePassword=p"},
			wantEnv: map[string]string{"AUTHENTICATION__API_KEY": "k-123", "DATABASE__PASSWORD": "p", "APP__SHUTDOWN_DELAY": "15"}},
		{name: "keys file", args: []string{"-f", filepath.Join(chart, "ci", "keys-file-values.yaml")}, keysFile: true},
		{name: "no service account", args: []string{"--set", "secret.apiKey=k", "--set", "serviceAccount.create=false", "--set", "serviceAccount.name=shared"}, noSA: true},
		{name: "chart secret under other keys", args: []string{
			"--set", "secret.apiKey=k-456", "--set", "secret.refs.apiKey.key=token",
			"--set", "secret.refs.databasePassword.name=analytics-app", "--set", "secret.refs.databasePassword.key=password",
			"--set", "shutdown.delay=0", "--set", "shutdown.timeout=10",
		}, wantEnv: map[string]string{"AUTHENTICATION__API_KEY": "k-456", "DATABASE__PASSWORD": "p-from-cloudnativepg", "APP__SHUTDOWN_DELAY": "0", "APP__SHUTDOWN_TIMEOUT": "10"}},
		{name: "every value", args: []string{"-f", filepath.Join(chart, "ci", "all-values.yaml")}, keysFile: true, all: true,
			wantEnv: map[string]string{
				"AUTHENTICATION__API_KEY": "k-from-existing-secret", "DATABASE__PASSWORD": "p-from-cloudnativepg",
				"APP__SHUTDOWN_DELAY": "7.5", "APP__SHUTDOWN_TIMEOUT": "20", "LOG__LEVEL": "DEBUG", "APP__PORT": "8080",
				"OTEL_EXPORTER_PROMETHEUS_PORT": "9100",
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			helm(t, append([]string{"lint", "--strict", chart}, c.args...)...)
			r := decode(t, helm(t, append([]string{"template", "rel", chart}, c.args...)...))
			values := helmValues(t, c.args)
			existing := values.Secret.ExistingSecret != ""
			wantSecrets := 1
			if existing {
				wantSecrets = 0
			}
			if len(r.deployments) != 1 || len(r.secrets) != wantSecrets || len(r.services) != 1 || len(r.pdbs) != 1 || len(r.serviceAccounts) != 1-btoi(c.noSA) {
				t.Fatalf("rendered %d Deployments, %d Secrets, %d Services, %d PodDisruptionBudgets, %d ServiceAccounts; want one each (%d Secrets, %d ServiceAccounts)",
					len(r.deployments), len(r.secrets), len(r.services), len(r.pdbs), len(r.serviceAccounts), wantSecrets, 1-btoi(c.noSA))
			}
			var cm, dash *corev1.ConfigMap
			for i := range r.configMaps {
				if strings.HasSuffix(r.configMaps[i].Name, "-dashboard") {
					dash = &r.configMaps[i]
				} else {
					cm = &r.configMaps[i]
				}
			}
			if cm == nil || len(r.configMaps) != 1+btoi(c.all) {
				t.Fatalf("%d ConfigMaps: want the settings' and, with grafanaDashboard.enabled, the dashboard's", len(r.configMaps))
			}
			// The optional objects: there exactly when enabled.
			for what, n := range map[string]int{
				"Ingress": len(r.ingresses), "HorizontalPodAutoscaler": len(r.hpas), "NetworkPolicy": len(r.networkPolicies),
				"PrometheusRule": len(r.rules), "dashboard ConfigMap": btoi(dash != nil),
			} {
				if n != btoi(c.all) {
					t.Errorf("%d %s, want %d", n, what, btoi(c.all))
				}
			}
			if len(r.monitors) != btoi(c.keysFile) { // both values files enable it
				t.Errorf("%d ServiceMonitors with serviceMonitor.enabled %v", len(r.monitors), c.keysFile)
			}

			d := r.deployments[0]
			pod := labels.Set(d.Spec.Template.Labels)
			spec := d.Spec.Template.Spec
			if c.all {
				hpa := r.hpas[0]
				if d.Spec.Replicas != nil {
					t.Errorf("replicas %d with an autoscaler: each upgrade would reset its count", *d.Spec.Replicas)
				}
				if hpa.Spec.ScaleTargetRef.Kind != "Deployment" || hpa.Spec.ScaleTargetRef.Name != d.Name || hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas < 2 {
					t.Errorf("autoscaler %+v, want the Deployment %s from 2 replicas up", hpa.Spec, d.Name)
				}
				if len(hpa.Spec.Metrics) != 2 {
					t.Errorf("autoscaler metrics %+v, want CPU and memory", hpa.Spec.Metrics)
				}
			} else if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
				t.Errorf("replicas %v, want 2 or more", d.Spec.Replicas)
			}
			for what, sel := range map[string]*metav1.LabelSelector{
				"Deployment":          d.Spec.Selector,
				"PodDisruptionBudget": r.pdbs[0].Spec.Selector,
			} {
				if s, err := metav1.LabelSelectorAsSelector(sel); err != nil || s.Empty() || !s.Matches(pod) {
					t.Errorf("the %s's selector %v does not select the pods (%v)", what, sel, pod)
				}
			}
			svc := r.services[0]
			if s := labels.SelectorFromSet(svc.Spec.Selector); s.Empty() || !s.Matches(pod) {
				t.Errorf("the Service's selector %v does not select the pods", svc.Spec.Selector)
			}
			if len(spec.Containers) != 1 {
				t.Fatalf("%d containers, want 1", len(spec.Containers))
			}
			ctr := spec.Containers[0]
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
			if n := len(ctr.EnvFrom); n == 0 || ctr.EnvFrom[n-1].ConfigMapRef == nil || ctr.EnvFrom[n-1].ConfigMapRef.Name != cm.Name {
				t.Errorf("envFrom %+v, want the ConfigMap %s last (it wins over extraEnvFrom)", ctr.EnvFrom, cm.Name)
			}

			// Security: the image's non-root user, not a fixed uid of the chart's.
			if !c.all {
				if psc := spec.SecurityContext; psc == nil || psc.RunAsUser != nil || psc.FSGroup != nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
					t.Errorf("pod securityContext %+v: want runAsNonRoot and no runAsUser or fsGroup (OpenShift assigns its own)", psc)
				}
				if sc := ctr.SecurityContext; sc == nil || sc.RunAsUser != nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
					sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
					t.Errorf("container securityContext %+v: want a read-only root, no privilege escalation, every capability dropped, no runAsUser", sc)
				}
			} else if psc := spec.SecurityContext; psc == nil || psc.RunAsUser == nil || *psc.RunAsUser != 10001 {
				t.Errorf("pod securityContext %+v: want podSecurityContext's runAsUser 10001", psc)
			}
			if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
				t.Errorf("pods get a service account token (%v): the service never calls the API", spec.AutomountServiceAccountToken)
			}
			if c.noSA {
				if spec.ServiceAccountName != "shared" {
					t.Errorf("pods run as %q, want serviceAccount.name shared", spec.ServiceAccountName)
				}
			} else if sa := r.serviceAccounts[0]; spec.ServiceAccountName != sa.Name || sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
				t.Errorf("pods run as %q, the ServiceAccount is %s (token %v): want it, without a token",
					spec.ServiceAccountName, sa.Name, sa.AutomountServiceAccountToken)
			}

			// The drain.
			delay, err1 := strconv.ParseFloat(cm.Data["APP__SHUTDOWN_DELAY"], 64)
			timeout, err2 := strconv.ParseFloat(cm.Data["APP__SHUTDOWN_TIMEOUT"], 64)
			if err1 != nil || err2 != nil || delay != values.Shutdown.Delay || timeout != values.Shutdown.Timeout {
				t.Errorf("APP__SHUTDOWN_DELAY %q, APP__SHUTDOWN_TIMEOUT %q; want shutdown.delay %v and shutdown.timeout %v",
					cm.Data["APP__SHUTDOWN_DELAY"], cm.Data["APP__SHUTDOWN_TIMEOUT"], values.Shutdown.Delay, values.Shutdown.Timeout)
			}
			if g := spec.TerminationGracePeriodSeconds; g == nil || float64(*g) < math.Ceil(delay+timeout) {
				t.Errorf("terminationGracePeriodSeconds %v: the pod is killed before the drain (%v s) and the shutdown (%v s) end", g, delay, timeout)
			}

			// The settings: documented, free of secrets.
			for k := range cm.Data {
				if !strings.Contains(string(docs), "`"+k+"`") {
					t.Errorf("ConfigMap setting %s is not in docs/configuration.md", k)
				}
				if strings.Contains(k, "PASSWORD") || k == "AUTHENTICATION__API_KEY" {
					t.Errorf("ConfigMap holds the secret %s", k)
				}
			}
			// The container's environment as the kubelet makes it: envFrom in order, then env in
			// order, a later source winning; Secrets are the chart's and the cluster's.
			secrets := map[string]map[string]string{}
			for name, data := range existingSecrets {
				secrets[name] = data
			}
			for _, s := range r.secrets {
				secrets[s.Name] = map[string]string{}
				for k, v := range s.Data {
					secrets[s.Name][k] = string(v)
				}
			}
			env := maps.Clone(cm.Data)
			for _, e := range ctr.Env {
				switch {
				case e.ValueFrom == nil:
					env[e.Name] = e.Value
				case e.ValueFrom.SecretKeyRef != nil:
					ref := e.ValueFrom.SecretKeyRef
					data, ok := secrets[ref.Name]
					if !ok {
						t.Errorf("env %s: the Secret %s is neither the chart's nor one the values name", e.Name, ref.Name)
					}
					if v, ok := data[ref.Key]; ok {
						env[e.Name] = v
					} else if ref.Optional == nil || !*ref.Optional {
						t.Errorf("env %s: no key %s in the Secret %s", e.Name, ref.Key, ref.Name)
					}
				case e.ValueFrom.FieldRef != nil:
					env[e.Name] = "default"
				default:
					t.Errorf("env %s: %+v", e.Name, e.ValueFrom)
				}
			}
			for k, v := range c.wantEnv {
				if env[k] != v {
					t.Errorf("the container's %s = %q, want %q", k, env[k], v)
				}
			}
			delete(env, "POD_NAMESPACE") // extraEnv's, not a setting
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
				keysSecret, keysKey := secretOf(values, "keysFile", cm.Name)
				if len(secrets[keysSecret][keysKey]) == 0 {
					t.Errorf("the Secret %s holds no %s", keysSecret, keysKey)
				}
				mounted := false
				for _, m := range ctr.VolumeMounts {
					for _, v := range spec.Volumes {
						if v.Name != m.Name || v.Secret == nil || v.Secret.SecretName != keysSecret {
							continue
						}
						for _, item := range v.Secret.Items {
							mounted = mounted || (item.Key == keysKey && filepath.Join(m.MountPath, item.Path) == keysPath && m.ReadOnly)
						}
					}
				}
				if !mounted {
					t.Errorf("%s of the Secret %s is not mounted read-only at %s", keysKey, keysSecret, keysPath)
				}
			}
			if len(r.monitors) == 1 {
				if len(r.monitors[0].Spec.Endpoints) != 1 || r.monitors[0].Spec.Endpoints[0].Port != "metrics" {
					t.Errorf("ServiceMonitor %+v, want one scraping port metrics", r.monitors)
				} else if containerPort(ctr, "metrics") != cm.Data["OTEL_EXPORTER_PROMETHEUS_PORT"] {
					t.Errorf("metrics port %s, OTEL_EXPORTER_PROMETHEUS_PORT %s", containerPort(ctr, "metrics"), cm.Data["OTEL_EXPORTER_PROMETHEUS_PORT"])
				}
			}
			if !c.all {
				return
			}
			checkIngress(t, r.ingresses[0], svc)
			checkNetworkPolicy(t, r.networkPolicies[0], pod, values)
			checkPrometheusRule(t, r.rules[0], alerts, values.PrometheusRule.RunbookBaseURL)
			if dash.Data["emsquery.json"] != string(dashboard) || dash.Labels["grafana_dashboard"] != "1" || dash.Annotations["grafana_folder"] != "emsquery" {
				t.Errorf("dashboard ConfigMap: labels %v, annotations %v, emsquery.json equal to deploy/grafana/emsquery.json %v",
					dash.Labels, dash.Annotations, dash.Data["emsquery.json"] == string(dashboard))
			}
			if d.Annotations["secret.reloader.stakater.com/reload"] == "" {
				t.Errorf("Deployment annotations %v: want deploymentAnnotations", d.Annotations)
			}
		})
	}
}

// chartValues is the part of the chart's values (defaults merged with the case's) the checks
// compare with.
type chartValues struct {
	Secret struct {
		ExistingSecret string `json:"existingSecret"`
		Refs           map[string]struct {
			Name string `json:"name"`
			Key  string `json:"key"`
		} `json:"refs"`
	} `json:"secret"`
	Shutdown struct {
		Delay   float64 `json:"delay"`
		Timeout float64 `json:"timeout"`
	} `json:"shutdown"`
	NetworkPolicy struct {
		HTTPFrom    []networkingv1.NetworkPolicyPeer `json:"httpFrom"`
		MetricsFrom []networkingv1.NetworkPolicyPeer `json:"metricsFrom"`
	} `json:"networkPolicy"`
	PrometheusRule struct {
		RunbookBaseURL string `json:"runbookBaseUrl"`
	} `json:"prometheusRule"`
}

// helmValues merges the chart's values.yaml with the values files and --set pairs of args, as
// helm does for these (flat) cases.
func helmValues(t *testing.T, args []string) chartValues {
	t.Helper()
	var merged map[string]any
	readYAML(t, filepath.Join(chartDir(), "values.yaml"), &merged)
	for i := 0; i+1 < len(args); i += 2 {
		switch args[i] {
		case "-f":
			var over map[string]any
			readYAML(t, args[i+1], &over)
			mergeValues(merged, over)
		case "--set":
			path, value, _ := strings.Cut(args[i+1], "=")
			keys := strings.Split(path, ".")
			m := merged
			for _, k := range keys[:len(keys)-1] {
				m = m[k].(map[string]any)
			}
			var v any = value
			if f, err := strconv.ParseFloat(value, 64); err == nil {
				v = f
			}
			m[keys[len(keys)-1]] = v
		}
	}
	b, err := json.Marshal(merged)
	if err != nil {
		t.Fatal(err)
	}
	var v chartValues
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func mergeValues(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				mergeValues(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}

// secretOf is the Secret and key secret.refs[ref] reads: its own Secret, existingSecret, or the
// chart's (named as the release's objects, here the settings ConfigMap).
func secretOf(v chartValues, ref, release string) (string, string) {
	r := v.Secret.Refs[ref]
	switch {
	case r.Name != "":
		return r.Name, r.Key
	case v.Secret.ExistingSecret != "":
		return v.Secret.ExistingSecret, r.Key
	}
	return release, r.Key
}

func checkIngress(t *testing.T, ing networkingv1.Ingress, svc corev1.Service) {
	t.Helper()
	if ing.Spec.IngressClassName == nil || *ing.Spec.IngressClassName != "nginx" || len(ing.Spec.TLS) != 1 {
		t.Errorf("Ingress class %v, TLS %+v: want ingress.className and ingress.tls", ing.Spec.IngressClassName, ing.Spec.TLS)
	}
	paths := 0
	for _, rule := range ing.Spec.Rules {
		if rule.HTTP == nil {
			continue
		}
		for _, p := range rule.HTTP.Paths {
			paths++
			b := p.Backend.Service
			if b == nil || b.Name != svc.Name || b.Port.Name != "http" || !slices.ContainsFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool { return sp.Name == "http" }) {
				t.Errorf("Ingress path %s goes to %+v, want the Service %s's port http", p.Path, b, svc.Name)
			}
		}
	}
	if paths != 2 {
		t.Errorf("Ingress has %d paths, want ingress.hosts' 2", paths)
	}
	// SSE and exports: no buffering, idle timeouts of ingress.readTimeoutSeconds; the user's
	// annotations (proxy-body-size) win over the chart's.
	for k, want := range map[string]string{
		"nginx.ingress.kubernetes.io/proxy-buffering":    "off",
		"nginx.ingress.kubernetes.io/proxy-read-timeout": "900",
		"nginx.ingress.kubernetes.io/proxy-send-timeout": "900",
		"nginx.ingress.kubernetes.io/proxy-body-size":    "4m",
		"nginx.org/proxy-buffering":                      "False",
		"nginx.org/proxy-read-timeout":                   "900s",
		"haproxy.router.openshift.io/timeout":            "900s",
		"haproxy.org/timeout-server":                     "900s",
		"projectcontour.io/response-timeout":             "infinity",
		"cert-manager.io/cluster-issuer":                 "letsencrypt",
	} {
		if got := ing.Annotations[k]; got != want {
			t.Errorf("Ingress annotation %s = %q, want %q", k, got, want)
		}
	}
}

// checkNetworkPolicy: the policy selects the pods; the metrics port is admitted only from
// networkPolicy.metricsFrom (no rule opens it to all), the http port from httpFrom.
func checkNetworkPolicy(t *testing.T, np networkingv1.NetworkPolicy, pod labels.Set, v chartValues) {
	t.Helper()
	if s, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector); err != nil || s.Empty() || !s.Matches(pod) {
		t.Errorf("the NetworkPolicy's selector %v does not select the pods", np.Spec.PodSelector)
	}
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) || len(np.Spec.Egress) != 2 {
		t.Errorf("policy types %v, %d egress rules: want Ingress and Egress with networkPolicy.egress", np.Spec.PolicyTypes, len(np.Spec.Egress))
	}
	from := map[string][]networkingv1.NetworkPolicyPeer{}
	for _, rule := range np.Spec.Ingress {
		if len(rule.Ports) == 0 {
			t.Errorf("an ingress rule without ports admits %v to every port, metrics included", rule.From)
		}
		for _, p := range rule.Ports {
			if p.Port == nil {
				t.Errorf("an ingress rule for every port: %+v", rule)
				continue
			}
			if len(rule.From) == 0 && p.Port.String() == "metrics" {
				t.Error("the metrics port is open to every peer")
			}
			from[p.Port.String()] = append(from[p.Port.String()], rule.From...)
		}
	}
	if !equalJSON(from["metrics"], v.NetworkPolicy.MetricsFrom) || len(from["metrics"]) == 0 {
		t.Errorf("metrics port admitted from %+v, want networkPolicy.metricsFrom %+v", from["metrics"], v.NetworkPolicy.MetricsFrom)
	}
	if !equalJSON(from["http"], v.NetworkPolicy.HTTPFrom) {
		t.Errorf("http port admitted from %+v, want networkPolicy.httpFrom %+v", from["http"], v.NetworkPolicy.HTTPFrom)
	}
}

func checkPrometheusRule(t *testing.T, pr prometheusRule, want ruleGroups, base string) {
	t.Helper()
	if pr.Labels["release"] != "kube-prometheus-stack" {
		t.Errorf("PrometheusRule labels %v, want prometheusRule.labels", pr.Labels)
	}
	for gi := range want.Groups {
		for ri := range want.Groups[gi].Rules {
			r := &want.Groups[gi].Rules[ri]
			if u := r.Annotations["runbook_url"]; u != "" {
				r.Annotations["runbook_url"] = strings.Replace(u, runbookBase, base, 1)
			}
		}
	}
	if !equalJSON(pr.Spec, want) {
		got, _ := json.MarshalIndent(pr.Spec, "", " ")
		t.Errorf("the PrometheusRule's groups differ from deploy/prometheus/alerts.yaml's (runbooks on %s):\n%s", base, got)
	}
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			if !strings.HasPrefix(r.Annotations["runbook_url"], base+"#") {
				t.Errorf("%s: runbook_url %q, want on %s", r.Alert, r.Annotations["runbook_url"], base)
			}
		}
	}
}

func readRuleGroups(t *testing.T, path string) ruleGroups {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var g ruleGroups
	if err := yaml.UnmarshalStrict(b, &g); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return g
}

func equalJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestHelmSchema: values.schema.json refuses what the chart cannot use, so that `helm template`
// (and install, upgrade, lint) fails before anything reaches the cluster: a wrong type, an
// unknown or misspelt value, a setting the chart sets itself or a secret among the settings, a
// value out of range, a Secret key Kubernetes would refuse; and the chart refuses a
// terminationGracePeriodSeconds shorter than the drain and the shutdown.
func TestHelmSchema(t *testing.T) {
	t.Parallel()
	chart := chartDir()
	schemaError := "values don't meet the specifications of the schema"
	for _, c := range []struct {
		set  string
		want string
	}{
		{"replicaCount=two", schemaError},
		{"ingress.enabeld=true", schemaError},
		{"secret.existingsecret=mine", schemaError},
		{"settings.APP__PORT=8080", schemaError},
		{"settings.APP__SHUTDOWN_DELAY=5", schemaError},
		{"settings.DATABASE__PASSWORD=hunter2", schemaError},
		{"settings.APP__HEALTH_CHECKS_ENABLED=false", schemaError},
		{"shutdown.delay=-1", schemaError},
		{"service.type=Ingress", schemaError},
		{"service.port=70000", schemaError},
		{"secret.refs.databasePassword.key=no/slash", schemaError},
		{"serviceMonitor.interval=soon", schemaError},
		{"podDisruptionBudget.maxUnavailable=half", schemaError},
		{"terminationGracePeriodSeconds=30", "terminationGracePeriodSeconds 30 is less than"},
	} {
		t.Run(c.set, func(t *testing.T) {
			t.Parallel()
			out, err := helmRun(t, "template", "rel", chart, "--set", c.set)
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("helm template --set %s: %v, want a refusal\n%s", c.set, err, out)
			}
			if !strings.Contains(string(out), c.want) {
				t.Errorf("helm template --set %s failed without %q:\n%s", c.set, c.want, out)
			}
		})
	}
	// What the schema accepts besides: the secret key mapping's keys, a fractional delay.
	helm(t, "template", "rel", chart, "--set", "secret.refs.databasePassword.key=password", "--set-json", "shutdown.delay=2.5")
}

// TestHelmValues: the chart's values, schema, README and ci/all-values.yaml agree. Every value
// of values.yaml is in values.schema.json and the other way round; the schema is strict
// (additionalProperties false) down to the free-form maps and Kubernetes objects; README.md
// names every value (its path, in backquotes); ci/all-values.yaml, which TestHelm renders, sets
// every one. And the chart's files/ are deploy/'s alert rules and dashboard, byte for byte.
func TestHelmValues(t *testing.T) {
	t.Parallel()
	chart := chartDir()
	var values, all map[string]any
	readYAML(t, filepath.Join(chart, "values.yaml"), &values)
	readYAML(t, filepath.Join(chart, "ci", "all-values.yaml"), &all)
	var schema map[string]any
	b, err := os.ReadFile(filepath.Join(chart, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(chart, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defs := schema["definitions"].(map[string]any)
	resolve := func(node map[string]any) map[string]any {
		if ref, ok := node["$ref"].(string); ok {
			return defs[strings.TrimPrefix(ref, "#/definitions/")].(map[string]any)
		}
		return node
	}
	var paths []string
	var walk func(prefix string, node map[string]any, vals map[string]any)
	walk = func(prefix string, node map[string]any, vals map[string]any) {
		props, _ := node["properties"].(map[string]any)
		if node["additionalProperties"] != false {
			t.Errorf("schema of %q: additionalProperties is not false", prefix)
		}
		for k := range props {
			if _, ok := vals[k]; !ok && !(prefix == "" && k == "global") {
				t.Errorf("schema has %s%s, values.yaml has no default for it", prefix, k)
			}
		}
		for k, v := range vals {
			p, ok := props[k].(map[string]any)
			if !ok {
				t.Errorf("values.yaml has %s%s, the schema does not", prefix, k)
				continue
			}
			p = resolve(p)
			sub, isMap := v.(map[string]any)
			if isMap && p["additionalProperties"] == false {
				walk(prefix+k+".", p, sub)
				continue
			}
			paths = append(paths, prefix+k)
		}
	}
	walk("", schema, values)
	slices.Sort(paths)
	if len(paths) < 60 {
		t.Errorf("%d values: %q", len(paths), paths)
	}
	for _, p := range paths {
		if !strings.Contains(string(readme), "`"+p+"`") {
			t.Errorf("README.md does not list the value %s", p)
		}
		v := any(all)
		for _, k := range strings.Split(p, ".") {
			m, _ := v.(map[string]any)
			v = m[k]
		}
		if v == nil {
			t.Errorf("ci/all-values.yaml does not set %s", p)
		}
	}

	for copy, source := range map[string]string{
		"files/alerts.yaml":   "deploy/prometheus/alerts.yaml",
		"files/emsquery.json": "deploy/grafana/emsquery.json",
	} {
		a, err1 := os.ReadFile(filepath.Join(chart, copy))
		b, err2 := os.ReadFile(filepath.Join(deploytest.Root(), source))
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			t.Errorf("the chart's %s is not %s (cp %s deploy/helm/emsquery/%s): %v %v", copy, source, source, copy, err1, err2)
		}
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
