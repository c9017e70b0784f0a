package charttest

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
)

// TestDefaultValues: one pod in embedded mode, the demo model and key,
// nothing that only makes sense with several pods.
func TestDefaultValues(t *testing.T) {
	m := mustRender(t, "", nil)
	if diff := cmp.Diff([]string{"ConfigMap", "Deployment", "Secret", "Service"}, m.kinds()); diff != "" {
		t.Errorf("kinds (-want +got):\n%s", diff)
	}
	p := checkPod(t, m)
	if r := p.deploy.Spec.Replicas; r == nil || *r != 1 {
		t.Errorf("replicas %v, want 1", r)
	}
	if p.deploy.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("strategy %s: one SQLite file wants Recreate", p.deploy.Spec.Strategy.Type)
	}
	if p.cfg.Storage.SQLite == "" || p.cfg.Storage.Redis != "" {
		t.Errorf("storage %+v: want embedded mode (SQLite)", p.cfg.Storage)
	}
	if len(p.cfg.Providers) != 1 || p.cfg.Providers[0].Type != "mock" {
		t.Errorf("providers %+v: want the demo's mock provider only", p.cfg.Providers)
	}
	if len(p.cfg.Keys) != 1 || p.cfg.Keys[0].Key != "gh-demo-key" || !slices.Equal(p.cfg.Keys[0].Models, []string{"demo-chat", "demo-embed"}) {
		t.Errorf("keys %+v: want the quick start's gh-demo-key, reaching the demo models only", p.cfg.Keys)
	}
	if _, ok := p.env["GATEHOUSE_ADMIN_KEY"]; ok {
		t.Error("the Secret sets an admin key nobody chose")
	}
	if want := "gatehouse:dev"; p.c.Image != want {
		t.Errorf("image %s, want %s (the repository and the chart's appVersion)", p.c.Image, want)
	}
	if gomaxprocs(p.c) != "requests.cpu" {
		t.Error("no CPU limit, yet GOMAXPROCS is not set from the CPU request")
	}
}

// TestClusterValues renders ../values-cluster.yaml: several pods sharing
// Redis and PostgreSQL, autoscaled on CPU, protected by a
// PodDisruptionBudget, scraped through a ServiceMonitor.
func TestClusterValues(t *testing.T) {
	m := mustRender(t, clusterValues, nil)
	want := []string{"ConfigMap", "Deployment", "HorizontalPodAutoscaler", "PodDisruptionBudget", "Secret", "Service", "ServiceMonitor"}
	if diff := cmp.Diff(want, m.kinds()); diff != "" {
		t.Errorf("kinds (-want +got):\n%s", diff)
	}
	p := checkPod(t, m)
	if p.cfg.Storage.Redis != "${GATEHOUSE_REDIS_URL}" || p.cfg.Storage.Postgres != "${GATEHOUSE_POSTGRES_URL}" || p.cfg.Storage.SQLite != "" {
		t.Errorf("storage %+v: want cluster mode, its URLs from the Secret", p.cfg.Storage)
	}
	for _, k := range []string{"GATEHOUSE_ADMIN_KEY", "GATEHOUSE_REDIS_URL", "GATEHOUSE_POSTGRES_URL", "OPENAI_API_KEY"} {
		if p.env[k] == "" {
			t.Errorf("the Secret has no %s", k)
		}
	}
	for _, pr := range p.cfg.Providers {
		if pr.Type == "mock" {
			t.Errorf("the demo's provider %s is in a config with demo.enabled false", pr.Name)
		}
	}
	if len(p.cfg.Keys) != 0 {
		t.Errorf("static keys %+v in a config that names none", p.cfg.Keys)
	}
	if p.deploy.Spec.Replicas != nil {
		t.Errorf("the Deployment sets replicas (%d) while the HPA owns them: every upgrade would reset the count", *p.deploy.Spec.Replicas)
	}
	ru := p.deploy.Spec.Strategy.RollingUpdate
	if p.deploy.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.String() != "0" {
		t.Errorf("strategy %+v: want a rolling update that never goes below the ready count", p.deploy.Spec.Strategy)
	}
	podLabels := p.deploy.Spec.Template.Labels

	var hpa autoscalingv2.HorizontalPodAutoscaler
	m.one(t, "HorizontalPodAutoscaler", &hpa)
	if hpa.Spec.ScaleTargetRef.Kind != "Deployment" || hpa.Spec.ScaleTargetRef.Name != p.deploy.Name {
		t.Errorf("the HPA scales %+v, not the Deployment %s", hpa.Spec.ScaleTargetRef, p.deploy.Name)
	}
	if len(hpa.Spec.Metrics) != 1 || hpa.Spec.Metrics[0].Resource == nil || hpa.Spec.Metrics[0].Resource.Name != corev1.ResourceCPU {
		t.Errorf("HPA metrics %+v: want CPU", hpa.Spec.Metrics)
	}
	if hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas < 2 {
		t.Errorf("HPA minReplicas %v: want at least 2", hpa.Spec.MinReplicas)
	}

	var pdb policyv1.PodDisruptionBudget
	m.one(t, "PodDisruptionBudget", &pdb)
	if pdb.Spec.Selector == nil || !selects(pdb.Spec.Selector.MatchLabels, podLabels) {
		t.Errorf("the PodDisruptionBudget selects %v, not the pods (%v)", pdb.Spec.Selector, podLabels)
	}
	if pdb.Spec.MaxUnavailable == nil && pdb.Spec.MinAvailable == nil {
		t.Error("the PodDisruptionBudget limits nothing")
	}

	var sm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name   string            `json:"name"`
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec struct {
			Selector  struct{ MatchLabels map[string]string } `json:"selector"`
			Endpoints []struct {
				Port, Path, Interval, ScrapeTimeout string
			} `json:"endpoints"`
		} `json:"spec"`
	}
	m.one(t, "ServiceMonitor", &sm)
	var svc corev1.Service
	m.one(t, "Service", &svc)
	if sm.APIVersion != "monitoring.coreos.com/v1" || !selects(sm.Spec.Selector.MatchLabels, svc.Labels) {
		t.Errorf("the ServiceMonitor (%s) selects %v, not the Service (%v)", sm.APIVersion, sm.Spec.Selector.MatchLabels, svc.Labels)
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "http" || sm.Spec.Endpoints[0].Path != "/metrics" {
		t.Errorf("ServiceMonitor endpoints %+v: want /metrics on the http port", sm.Spec.Endpoints)
	}
	if sm.Metadata.Labels["release"] != "prometheus" {
		t.Errorf("the ServiceMonitor lacks the labels the values give it: %v", sm.Metadata.Labels)
	}

	spread := p.deploy.Spec.Template.Spec.TopologySpreadConstraints
	if len(spread) != 1 || spread[0].LabelSelector == nil || !selects(spread[0].LabelSelector.MatchLabels, podLabels) {
		t.Errorf("topology spread %+v: want the pods' own labels filled in", spread)
	}
	if gomaxprocs(p.c) != "requests.cpu" {
		t.Error("GOMAXPROCS is not set from the CPU request")
	}
}

// TestOptionalParts: a ServiceMonitor only when enabled, a
// PodDisruptionBudget only when more than one pod can run, an existing
// Secret instead of the chart's, GOMAXPROCS left to Go under a CPU limit,
// a PersistentVolumeClaim for embedded mode's SQLite file.
func TestOptionalParts(t *testing.T) {
	noMonitor := mustRender(t, clusterValues, map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": false}}})
	if _, ok := noMonitor["ServiceMonitor"]; ok {
		t.Error("a ServiceMonitor while metrics.serviceMonitor.enabled is false")
	}

	onePod := mustRender(t, clusterValues, map[string]any{"autoscaling": map[string]any{"enabled": false}, "replicaCount": 1})
	if _, ok := onePod["PodDisruptionBudget"]; ok {
		t.Error("a PodDisruptionBudget for a single pod: it would block every node drain")
	}
	if _, ok := onePod["HorizontalPodAutoscaler"]; ok {
		t.Error("an HPA while autoscaling is off")
	}

	existing := mustRender(t, clusterValues, map[string]any{"secret": map[string]any{"existingSecret": "gatehouse-secrets"}})
	if _, ok := existing["Secret"]; ok {
		t.Error("the chart makes a Secret although secret.existingSecret names one")
	}
	p := checkPod(t, existing)
	if name := p.c.EnvFrom[0].SecretRef.Name; name != "gatehouse-secrets" {
		t.Errorf("the pod reads Secret %s, want the existing gatehouse-secrets", name)
	}

	limited := mustRender(t, "", map[string]any{"resources": map[string]any{"limits": map[string]any{"cpu": "2"}}})
	if c := checkPod(t, limited).c; gomaxprocs(c) != "" {
		t.Error("GOMAXPROCS set although a CPU limit is there for Go to read")
	}

	persistent := mustRender(t, "", map[string]any{"persistence": map[string]any{"enabled": true}})
	var pvc corev1.PersistentVolumeClaim
	persistent.one(t, "PersistentVolumeClaim", &pvc)
	for _, v := range checkPod(t, persistent).deploy.Spec.Template.Spec.Volumes {
		if v.Name == "data" && (v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != pvc.Name) {
			t.Errorf("the data volume is %+v, not the claim %s", v.VolumeSource, pvc.Name)
		}
	}
}

// TestRefusedValues: values that cannot work fail at render time with
// what to do, rather than installing something broken.
func TestRefusedValues(t *testing.T) {
	tests := []struct {
		name, valuesFile string
		overrides        map[string]any
		want             string
	}{
		{"several pods in embedded mode", "", map[string]any{"replicaCount": 3}, "needs cluster.enabled"},
		{"autoscaling in embedded mode", "", map[string]any{"autoscaling": map[string]any{"enabled": true}}, "needs cluster.enabled"},
		{"cluster mode without store URLs", "", map[string]any{"cluster": map[string]any{"enabled": true}}, "secret.redisURL"},
		{"autoscaling without a CPU request", clusterValues, map[string]any{"resources": map[string]any{"requests": map[string]any{"cpu": ""}}}, "resources.requests.cpu"},
		{"storage in the config", "", map[string]any{"config": map[string]any{"storage": map[string]any{"sqlite": "/x.db"}}}, "config.storage is set by the chart"},
		{"shutdown grace in the config", "", map[string]any{"config": map[string]any{"server": map[string]any{"shutdown_grace": "5s"}}}, "shutdownGraceSeconds"},
		{"persistence in cluster mode", clusterValues, map[string]any{"persistence": map[string]any{"enabled": true}}, "persistence is for embedded mode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := render(t, tt.valuesFile, tt.overrides)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("render: %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

// TestLint runs helm lint's rules (Chart.yaml, values, templates, Kubernetes
// schema and deprecations) on both sets of values: no warnings or errors.
func TestLint(t *testing.T) {
	cluster, err := chartutil.ReadValuesFile(clusterValues)
	if err != nil {
		t.Fatal(err)
	}
	for name, vals := range map[string]map[string]any{"default": {}, "cluster": cluster} {
		l := lint.AllWithKubeVersion(chartDir, vals, namespace, &kube)
		for _, msg := range l.Messages {
			if msg.Severity > support.InfoSev {
				t.Errorf("helm lint (%s values): %s", name, msg)
			}
		}
	}
	chrt, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	// The preStop sleep action needs Kubernetes 1.30: the chart must say so.
	if chartutil.IsCompatibleRange(chrt.Metadata.KubeVersion, "v1.29.0") {
		t.Errorf("kubeVersion %q admits 1.29, which has no preStop sleep action", chrt.Metadata.KubeVersion)
	}
}

// TestValuesDocumented: every field of values.yaml has a comment on the
// line above it or at its end, or sits in a block whose key has one.
func TestValuesDocumented(t *testing.T) {
	type block struct {
		indent     int
		documented bool
	}
	lines := strings.Split(readChartFile(t, "values.yaml"), "\n")
	var open []block
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		key, _, isKey := strings.Cut(trimmed, ":")
		if trimmed == "" || strings.HasPrefix(trimmed, "#") || strings.HasPrefix(trimmed, "-") || !isKey {
			continue
		}
		indent := len(line) - len(strings.TrimLeft(line, " "))
		for len(open) > 0 && open[len(open)-1].indent >= indent {
			open = open[:len(open)-1]
		}
		doc := strings.Contains(line, " # ") || (i > 0 && strings.HasPrefix(strings.TrimSpace(lines[i-1]), "#"))
		for _, b := range open {
			doc = doc || b.documented
		}
		if !doc {
			t.Errorf("values.yaml:%d: %s has no comment, nor has its block", i+1, key)
		}
		open = append(open, block{indent, doc})
	}
}

// readChartFile reads a file of the chart as the chart loader sees it.
func readChartFile(t *testing.T, name string) string {
	t.Helper()
	chrt, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range chrt.Raw {
		if f.Name == name {
			return string(f.Data)
		}
	}
	t.Fatalf("the chart has no %s", name)
	return ""
}

// selects reports whether every label of sel is on labels.
func selects(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// gomaxprocs is the resource GOMAXPROCS is taken from, or "" if unset.
func gomaxprocs(c corev1.Container) string {
	i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "GOMAXPROCS" })
	if i < 0 || c.Env[i].ValueFrom == nil || c.Env[i].ValueFrom.ResourceFieldRef == nil {
		return ""
	}
	return c.Env[i].ValueFrom.ResourceFieldRef.Resource
}
