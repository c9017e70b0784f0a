// Package charttest renders the Helm chart in ../gatehouse in-process (the
// helm library, no helm binary) and holds the manifests to what the chart
// promises: probes on /readyz and /healthz, a non-root read-only pod, a
// termination grace above the drain, a PodDisruptionBudget and an HPA when
// more than one pod runs, a ServiceMonitor only when asked for, and a
// config that passes `gatehouse config check` with the environment the
// Secret gives the pod.
//
// It is its own module so the gateway's module never pulls in Kubernetes'
// libraries; make test vets and runs it.
package charttest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
)

const (
	chartDir      = "../gatehouse"
	clusterValues = "../values-cluster.yaml"
	repoRoot      = "../../.."
	namespace     = "llm"
)

// kube is the cluster version rendered against: the chart's kubeVersion
// (≥ 1.30, for the preStop sleep action) must admit it.
var kube = chartutil.KubeVersion{Version: "v1.31.0", Major: "1", Minor: "31"}

// manifests are one rendering of the chart, by kind; each kind holds the
// YAML documents of that kind.
type manifests map[string][]string

func (m manifests) kinds() []string {
	var k []string
	for kind := range m {
		k = append(k, kind)
	}
	slices.Sort(k)
	return k
}

// one decodes the single manifest of a kind into v.
func (m manifests) one(t *testing.T, kind string, v any) {
	t.Helper()
	docs := m[kind]
	if len(docs) != 1 {
		t.Fatalf("%d %s manifests, want 1 (kinds: %v)", len(docs), kind, m.kinds())
	}
	if err := yaml.UnmarshalStrict([]byte(docs[0]), v); err != nil {
		t.Fatalf("%s: %v\n%s", kind, err, docs[0])
	}
}

// render renders the chart with a values file (or none) and overrides
// on top, as helm template -f FILE --set … would.
func render(t *testing.T, valuesFile string, overrides map[string]any) (manifests, error) {
	t.Helper()
	chrt, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load the chart: %v", err)
	}
	vals := chartutil.Values{}
	if valuesFile != "" {
		if vals, err = chartutil.ReadValuesFile(valuesFile); err != nil {
			t.Fatalf("%s: %v", valuesFile, err)
		}
	}
	vals = chartutil.CoalesceTables(deepCopy(t, overrides), vals)
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = kube
	if !chartutil.IsCompatibleRange(chrt.Metadata.KubeVersion, kube.Version) {
		t.Fatalf("the chart's kubeVersion %q does not admit %s", chrt.Metadata.KubeVersion, kube.Version)
	}
	rv, err := chartutil.ToRenderValues(chrt, vals, chartutil.ReleaseOptions{Name: "gh", Namespace: namespace, Revision: 1, IsInstall: true}, caps)
	if err != nil {
		t.Fatalf("values: %v", err)
	}
	files, err := engine.Render(chrt, rv)
	if err != nil {
		return nil, err
	}
	m := manifests{}
	for name, text := range files {
		if !strings.HasSuffix(name, ".yaml") {
			continue // NOTES.txt, _helpers.tpl
		}
		for _, doc := range strings.Split(text, "\n---") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var head struct{ Kind string }
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil || head.Kind == "" {
				t.Fatalf("%s does not render to a manifest (%v):\n%s", name, err, doc)
			}
			m[head.Kind] = append(m[head.Kind], doc)
		}
	}
	return m, nil
}

// deepCopy copies overrides through JSON, so coalescing cannot change
// the test's literals, and gives them the types a values file would.
func deepCopy(t *testing.T, v map[string]any) map[string]any {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	if err := yaml.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func mustRender(t *testing.T, valuesFile string, overrides map[string]any) manifests {
	t.Helper()
	m, err := render(t, valuesFile, overrides)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return m
}

// gatehouseConfig is the part of the rendered config the chart owns.
type gatehouseConfig struct {
	Listen  string `json:"listen"`
	Storage struct {
		SQLite   string `json:"sqlite"`
		Redis    string `json:"redis"`
		Postgres string `json:"postgres"`
	} `json:"storage"`
	Server struct {
		ShutdownGrace string `json:"shutdown_grace"`
	} `json:"server"`
	Usage struct {
		SpillDir string `json:"spill_dir"`
	} `json:"usage"`
	Providers []struct{ Name, Type string } `json:"providers"`
	Keys      []struct {
		Key    string   `json:"key"`
		Models []string `json:"models"`
	} `json:"keys"`
}

// pod is what every rendering's workload must be, whatever the values.
type pod struct {
	deploy appsv1.Deployment
	c      corev1.Container
	cm     corev1.ConfigMap
	cfg    gatehouseConfig
	env    map[string]string // what the pod's environment holds from the Secret
}

// checkPod checks the Deployment, Service, ConfigMap and Secret every
// rendering has, runs gatehouse config check on the config they give the
// pod, and returns them for the caller's own checks.
func checkPod(t *testing.T, m manifests) pod {
	t.Helper()
	var p pod
	m.one(t, "Deployment", &p.deploy)
	m.one(t, "ConfigMap", &p.cm)
	spec := p.deploy.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(spec.Containers))
	}
	p.c = spec.Containers[0]

	probe := func(name string, pr *corev1.Probe, path string) {
		if pr == nil || pr.HTTPGet == nil || pr.HTTPGet.Path != path || pr.HTTPGet.Port.String() != "http" {
			t.Errorf("%s probe: %+v, want GET %s on the http port", name, pr, path)
		}
	}
	probe("readiness", p.c.ReadinessProbe, "/readyz")
	probe("liveness", p.c.LivenessProbe, "/healthz")
	probe("startup", p.c.StartupProbe, "/healthz")
	if p.c.Resources.Requests.Cpu().IsZero() || p.c.Resources.Requests.Memory().IsZero() || p.c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v: want CPU and memory requests and a memory limit", p.c.Resources)
	}

	psc, sc := spec.SecurityContext, p.c.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("pod security context %+v: want runAsNonRoot and a non-zero runAsUser", psc)
	}
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		t.Errorf("container security context %+v: want a read-only root, no privilege escalation, all capabilities dropped", sc)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("the pod mounts a service account token it has no use for")
	}

	// The config: mounted where GATEHOUSE_CONFIG points, from the ConfigMap.
	env := map[string]corev1.EnvVar{}
	for _, e := range p.c.Env {
		env[e.Name] = e
	}
	cfgPath := env["GATEHOUSE_CONFIG"].Value
	mounts := map[string]corev1.VolumeMount{}
	for _, vm := range p.c.VolumeMounts {
		mounts[vm.MountPath] = vm
	}
	cfgMount, ok := mounts[filepath.Dir(cfgPath)]
	if !ok || cfgMount.SubPath != "" {
		t.Fatalf("GATEHOUSE_CONFIG=%s is not in a directory mount (a subPath mount never sees ConfigMap updates)", cfgPath)
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	if cm := volumes[cfgMount.Name].ConfigMap; cm == nil || cm.Name != p.cm.Name {
		t.Fatalf("%s is not mounted from the ConfigMap %s", cfgMount.MountPath, p.cm.Name)
	}
	text, ok := p.cm.Data[filepath.Base(cfgPath)]
	if !ok {
		t.Fatalf("the ConfigMap has no %s", filepath.Base(cfgPath))
	}
	if err := yaml.Unmarshal([]byte(text), &p.cfg); err != nil {
		t.Fatalf("the config: %v\n%s", err, text)
	}

	// Everything gatehouse writes is on a writable volume: the root is read-only.
	for _, path := range []string{p.cfg.Storage.SQLite, p.cfg.Usage.SpillDir} {
		if path == "" {
			continue
		}
		writable := false
		for mp, vm := range mounts {
			writable = writable || (strings.HasPrefix(path, mp+"/") && !vm.ReadOnly)
		}
		if !writable {
			t.Errorf("gatehouse writes %s, which is on no writable volume", path)
		}
	}
	if !strings.HasSuffix(p.cfg.Listen, ":"+portOf(t, p.c, "http")) || !strings.HasPrefix(p.cfg.Listen, "0.0.0.0:") {
		t.Errorf("the config listens on %s, not on every interface at the container's http port", p.cfg.Listen)
	}

	// Draining: the preStop sleep, then server.shutdown_grace, all within
	// the termination grace period.
	grace := seconds(t, p.cfg.Server.ShutdownGrace)
	var sleep int64
	if p.c.Lifecycle == nil || p.c.Lifecycle.PreStop == nil || p.c.Lifecycle.PreStop.Sleep == nil {
		t.Error("no preStop sleep: the pod would stop serving before the load balancers stop sending it requests")
	} else {
		sleep = p.c.Lifecycle.PreStop.Sleep.Seconds
	}
	if tg := spec.TerminationGracePeriodSeconds; tg == nil || *tg <= sleep+grace {
		t.Errorf("terminationGracePeriodSeconds %s is not above the preStop sleep (%ds) + shutdown_grace (%ds)", ptrString(tg), sleep, grace)
	}

	// The Service reaches the pods.
	var svc corev1.Service
	m.one(t, "Service", &svc)
	for k, v := range svc.Spec.Selector {
		if p.deploy.Spec.Template.Labels[k] != v {
			t.Errorf("the Service selects %s=%s, which the pods do not carry", k, v)
		}
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.String() != "http" {
		t.Errorf("Service ports %+v: want one, to the http port", svc.Spec.Ports)
	}

	// The environment the Secret gives, and the check of the config with it.
	p.env = map[string]string{}
	if len(p.c.EnvFrom) != 1 || p.c.EnvFrom[0].SecretRef == nil {
		t.Fatalf("envFrom %+v: want the Secret", p.c.EnvFrom)
	}
	if docs := m["Secret"]; len(docs) > 0 {
		var s corev1.Secret
		m.one(t, "Secret", &s)
		if p.c.EnvFrom[0].SecretRef.Name != s.Name {
			t.Errorf("the pod reads Secret %s, the chart makes %s", p.c.EnvFrom[0].SecretRef.Name, s.Name)
		}
		p.env = s.StringData
		checkConfig(t, text, p.env)
	}
	return p
}

func ptrString(p *int64) string {
	if p == nil {
		return "unset"
	}
	return strconv.FormatInt(*p, 10)
}

// portOf is the number of a named container port.
func portOf(t *testing.T, c corev1.Container, name string) string {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return strconv.Itoa(int(p.ContainerPort))
		}
	}
	t.Fatalf("the container has no port named %s", name)
	return ""
}

// seconds reads the "30s" the chart writes for shutdown_grace.
func seconds(t *testing.T, d string) int64 {
	t.Helper()
	n, ok := strings.CutSuffix(d, "s")
	v, err := strconv.ParseInt(n, 10, 64)
	if !ok || err != nil || v <= 0 {
		t.Fatalf("server.shutdown_grace %q: want whole seconds", d)
	}
	return v
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// checkConfig runs the gateway's own `gatehouse config check` (built from
// the main module) on the rendered config, with env as the process's
// only environment besides PATH: the variables the Secret gives the pod.
func checkConfig(t *testing.T, text string, env map[string]string) {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gatehouse-charttest")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "gatehouse")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/gatehouse")
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = &buildError{err, out}
		}
	})
	if binErr != nil {
		t.Fatalf("build gatehouse: %v", binErr)
	}
	path := filepath.Join(t.TempDir(), "gatehouse.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binPath, "config", "check", path)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Errorf("gatehouse config check on the rendered config: %v\n%s\nthe config:\n%s", err, out.String(), text)
	}
}

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + string(e.out) }
