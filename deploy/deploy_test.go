package deploy

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

func TestComposeFileIsValidAndStartsInOrder(t *testing.T) {
	p, err := LoadCompose("docker-compose.yaml")
	if err != nil {
		t.Fatalf("docker-compose.yaml does not load as compose does: %v", err)
	}
	oneShot := map[string]bool{"temporal-schema": true, "refuel-setup": true}
	for name, s := range p.Services {
		if s.Build == nil && (!strings.Contains(s.Image, ":") || strings.HasSuffix(s.Image, ":latest")) {
			t.Errorf("service %s: image %q; pin a version", name, s.Image)
		}
		if s.Restart == "" {
			t.Errorf("service %s has no restart policy", name)
		}
		if oneShot[name] != strings.HasPrefix(s.Restart, "on-failure") {
			t.Errorf("service %s: restart %q; one-shot steps restart on failure, the rest unless stopped", name, s.Restart)
		}
		for _, v := range s.Volumes {
			if v.Type == types.VolumeTypeBind {
				if _, err := os.Stat(v.Source); err != nil {
					t.Errorf("service %s mounts %s, which is not in the repository: %v", name, v.Source, err)
				}
			}
		}
	}
	for _, name := range []string{"postgresql", "temporal", "worker", "prometheus", "grafana"} {
		if s := p.Services[name]; s.HealthCheck == nil || len(s.HealthCheck.Test) == 0 {
			t.Errorf("service %s has no healthcheck", name)
		}
	}
	for _, dep := range []struct{ service, on, condition string }{
		{"temporal-schema", "postgresql", types.ServiceConditionHealthy},
		{"temporal", "temporal-schema", types.ServiceConditionCompletedSuccessfully},
		{"refuel-setup", "temporal", types.ServiceConditionHealthy},
		{"worker", "refuel-setup", types.ServiceConditionCompletedSuccessfully},
	} {
		if got := p.Services[dep.service].DependsOn[dep.on].Condition; got != dep.condition {
			t.Errorf("%s depends on %s with condition %q; want %q", dep.service, dep.on, got, dep.condition)
		}
	}
	for _, v := range []string{"postgresql-data", "refuel-data", "prometheus-data", "grafana-data"} {
		if _, ok := p.Volumes[v]; !ok {
			t.Errorf("no named volume %s", v)
		}
	}
	w := p.Services["worker"]
	if !slices.ContainsFunc(w.Volumes, func(v types.ServiceVolumeConfig) bool {
		return v.Target == "/var/lib/refuel" && v.Source == "refuel-data"
	}) {
		t.Errorf("the worker's data dir (its learned logs) is not on the refuel-data volume: %+v", w.Volumes)
	}
	if *w.Environment["TEMPORAL_ADDRESS"] != "temporal:7233" || slices.Contains(w.Command, "--sim-traces") {
		t.Errorf("the worker should connect to temporal:7233 and replay the built-in market: env %v command %v", w.Environment, w.Command)
	}
	if setup := p.Services["refuel-setup"]; !slices.Equal(setup.Entrypoint, []string{"/usr/local/bin/starter"}) || setup.Command[0] != "setup" {
		t.Errorf("refuel-setup runs %v %v; want starter setup", setup.Entrypoint, setup.Command)
	}
}

func TestAComposeTypoFailsTheLoad(t *testing.T) {
	b, err := os.ReadFile("docker-compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bad := bytes.Replace(b, []byte("    healthcheck:"), []byte("    healtcheck:"), 1)
	if err := os.WriteFile(filepath.Join(dir, "docker-compose.yaml"), bad, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCompose(filepath.Join(dir, "docker-compose.yaml")); err == nil || !strings.Contains(err.Error(), "healtcheck") {
		t.Errorf("a misspelt key loaded: %v", err)
	}
}

// manifests decodes every document of every file under kubernetes/ into
// its Kubernetes type, strictly: an unknown or misspelt field fails.
func manifests(t *testing.T) (deploys []appsv1.Deployment, services []corev1.Service, claims []corev1.PersistentVolumeClaim, jobs []batchv1.Job, monitors []monitoringv1.ServiceMonitor) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("kubernetes", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests under kubernetes/: %v", err)
	}
	for _, f := range files {
		ms, err := ReadManifests(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, meta := range ms {
			doc := meta.Doc
			strict := func(v any) {
				if err := yaml.UnmarshalStrict(doc, v); err != nil {
					t.Errorf("%s: %s %s: %v", f, meta.APIVersion, meta.Kind, err)
				}
			}
			switch meta.APIVersion + " " + meta.Kind {
			case "apps/v1 Deployment":
				var v appsv1.Deployment
				strict(&v)
				deploys = append(deploys, v)
			case "v1 Service":
				var v corev1.Service
				strict(&v)
				services = append(services, v)
			case "v1 PersistentVolumeClaim":
				var v corev1.PersistentVolumeClaim
				strict(&v)
				claims = append(claims, v)
			case "batch/v1 Job":
				var v batchv1.Job
				strict(&v)
				jobs = append(jobs, v)
			case "apps/v1 DaemonSet":
				strict(&appsv1.DaemonSet{})
			case "v1 ServiceAccount":
				strict(&corev1.ServiceAccount{})
			case "rbac.authorization.k8s.io/v1 ClusterRole":
				strict(&rbacv1.ClusterRole{})
			case "rbac.authorization.k8s.io/v1 ClusterRoleBinding":
				strict(&rbacv1.ClusterRoleBinding{})
			case "monitoring.coreos.com/v1 ServiceMonitor":
				var v monitoringv1.ServiceMonitor
				strict(&v)
				monitors = append(monitors, v)
			default:
				t.Errorf("%s: %s %s is not a kind this test knows; add it", f, meta.APIVersion, meta.Kind)
			}
		}
	}
	return
}

func TestKubernetesManifestsFitTogether(t *testing.T) {
	deploys, services, claims, jobs, monitors := manifests(t)
	if len(deploys) != 1 || len(services) != 1 || len(claims) != 1 || len(jobs) != 1 || len(monitors) != 1 {
		t.Fatalf("%d deployments, %d services, %d claims, %d jobs, %d service monitors; want one of each", len(deploys), len(services), len(claims), len(jobs), len(monitors))
	}
	d, svc, pvc, job, sm := deploys[0], services[0], claims[0], jobs[0], monitors[0]
	pod := d.Spec.Template
	for k, v := range d.Spec.Selector.MatchLabels {
		if pod.Labels[k] != v {
			t.Errorf("the Deployment's selector %s=%s does not match its pods", k, v)
		}
	}
	for k, v := range svc.Spec.Selector {
		if pod.Labels[k] != v {
			t.Errorf("the Service's selector %s=%s does not match the worker's pods", k, v)
		}
	}
	for k, v := range sm.Spec.Selector.MatchLabels {
		if svc.Labels[k] != v {
			t.Errorf("the ServiceMonitor's selector %s=%s does not match the Service", k, v)
		}
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != svc.Spec.Ports[0].Name || sm.Spec.Endpoints[0].Path != "/metrics" {
		t.Errorf("ServiceMonitor endpoints %+v; want port %s, path /metrics", sm.Spec.Endpoints, svc.Spec.Ports[0].Name)
	}
	c := pod.Spec.Containers[0]
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("worker probes: readiness %+v liveness %+v; want /readyz and /healthz", c.ReadinessProbe, c.LivenessProbe)
	}
	claimed := false
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == pvc.Name {
			for _, m := range c.VolumeMounts {
				claimed = claimed || (m.Name == v.Name && m.MountPath == envValue(c.Env, "REFUEL_DATA_DIR"))
			}
		}
	}
	if !claimed {
		t.Errorf("the claim %s is not mounted at the worker's REFUEL_DATA_DIR %q", pvc.Name, envValue(c.Env, "REFUEL_DATA_DIR"))
	}
	if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType || *d.Spec.Replicas != 1 {
		t.Errorf("strategy %s, replicas %d; the learned logs want one writer: Recreate, 1", d.Spec.Strategy.Type, *d.Spec.Replicas)
	}
	jc := job.Spec.Template.Spec.Containers[0]
	if !slices.Equal(jc.Command, []string{"/usr/local/bin/starter"}) || jc.Args[0] != "setup" {
		t.Errorf("the Job runs %v %v; want starter setup", jc.Command, jc.Args)
	}
	if envValue(jc.Env, "TEMPORAL_ADDRESS") != envValue(c.Env, "TEMPORAL_ADDRESS") || envValue(jc.Env, "TEMPORAL_NAMESPACE") != envValue(c.Env, "TEMPORAL_NAMESPACE") {
		t.Error("the setup Job and the worker name different clusters or namespaces")
	}
}

func TestAManifestTypoFailsStrictDecoding(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("kubernetes", "worker-deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Replace(b, []byte("readinessProbe:"), []byte("readinesProbe:"), 1)
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict(bad, &d); err == nil || !strings.Contains(err.Error(), "readinesProbe") {
		t.Errorf("a misspelt field decoded: %v", err)
	}
}

func TestDashboardIsProvisionedAndEveryPanelQueriesRefuel(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("grafana", "refuel.json"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := ParseDashboard(b)
	if err != nil {
		t.Fatal(err)
	}
	if d.UID != "refuel" || len(d.Templating.List) != 1 || d.Templating.List[0].Type != "datasource" || d.Templating.List[0].Query != "prometheus" {
		t.Errorf("dashboard %q (uid %q), templating %+v; want uid refuel and a Prometheus datasource variable", d.Title, d.UID, d.Templating.List)
	}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.X+p.GridPos.W > 24 || p.GridPos.W <= 0 {
			t.Errorf("panel %q: gridPos %+v is off the 24-column grid", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("panel %q: datasource %+v, %d queries", p.Title, p.Datasource, len(p.Targets))
		}
		for _, q := range p.Targets {
			if len(QueriedMetrics(q.Expr)) == 0 {
				t.Errorf("panel %q: query %q reads no metric of refuel's worker", p.Title, q.Expr)
			}
		}
	}
	var provisioned struct {
		APIVersion  int `json:"apiVersion"`
		Datasources []struct {
			Name, UID, Type, Access, URL string
			IsDefault, Editable          bool
		} `json:"datasources"`
	}
	b, err = os.ReadFile(filepath.Join("grafana", "provisioning", "datasources", "prometheus.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, &provisioned); err != nil || len(provisioned.Datasources) != 1 || provisioned.Datasources[0].UID != "prometheus" || provisioned.Datasources[0].Type != "prometheus" {
		t.Errorf("provisioned datasources %+v (%v); want one Prometheus, uid prometheus", provisioned, err)
	}
}

func TestPrometheusConfigAndAlertsDecodeAndQueryRefuel(t *testing.T) {
	var cfg struct {
		Global        map[string]string `json:"global"`
		RuleFiles     []string          `json:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `json:"job_name"`
			MetricsPath   string `json:"metrics_path"`
			StaticConfigs []struct {
				Targets []string `json:"targets"`
			} `json:"static_configs"`
		} `json:"scrape_configs"`
	}
	b, err := os.ReadFile(filepath.Join("prometheus", "prometheus.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, &cfg); err != nil {
		t.Fatalf("prometheus.yaml: %v", err)
	}
	if len(cfg.ScrapeConfigs) != 1 || cfg.ScrapeConfigs[0].JobName != "refuel-worker" || cfg.ScrapeConfigs[0].StaticConfigs[0].Targets[0] != "worker:9464" {
		t.Errorf("scrape configs %+v; want job refuel-worker on worker:9464", cfg.ScrapeConfigs)
	}
	if !slices.Equal(cfg.RuleFiles, []string{"/etc/prometheus/alerts.yaml"}) {
		t.Errorf("rule_files %v; want the alerts compose mounts", cfg.RuleFiles)
	}
	var rules struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert       string            `json:"alert"`
				Expr        string            `json:"expr"`
				For         string            `json:"for"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	b, err = os.ReadFile(filepath.Join("prometheus", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, &rules); err != nil || len(rules.Groups) == 0 {
		t.Fatalf("alerts.yaml: %v", err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" || r.Annotations["summary"] == "" || r.Labels["severity"] == "" {
				t.Errorf("rule %+v: an alert needs a name, an expression, a severity and a summary", r)
			}
			if r.Alert != "RefuelWorkerDown" && len(QueriedMetrics(r.Expr)) == 0 {
				t.Errorf("alert %s reads no metric of refuel's worker: %s", r.Alert, r.Expr)
			}
		}
	}
}

func envValue(env []corev1.EnvVar, name string) string {
	for _, e := range env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func TestInvocationsListEveryRefuelBinaryTheFilesStart(t *testing.T) {
	invs, err := Invocations(".")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, inv := range invs {
		got[inv.Binary]++
		if inv.Binary == "starter" && (len(inv.Args) == 0 || inv.Args[0] != "setup") {
			t.Errorf("%s: starter %v; want starter setup", inv.Where, inv.Args)
		}
	}
	if got["worker"] != 3 || got["starter"] != 2 || len(got) != 2 {
		t.Errorf("binaries started: %v; want the worker and starter setup, in compose and on Kubernetes, and worker join on Kubernetes", got)
	}
	if flags := Flags([]string{"setup", "--retention", "72h", "--wait=3m", "-log-json"}); !slices.Equal(flags, []string{"retention", "wait", "log-json"}) {
		t.Errorf("Flags: %v", flags)
	}
}

// The DaemonSet runs `worker join` on every GPU node, named after the
// node, its GPUs read from the node (so its service account may get
// nodes), with the deployment's token, and time to drain before the
// kubelet kills it.
func TestJoinDaemonSetRunsWorkerJoinOnEveryGPUNode(t *testing.T) {
	ms, err := ReadManifests(filepath.Join("kubernetes", "join-daemonset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ds appsv1.DaemonSet
	var sa corev1.ServiceAccount
	var role rbacv1.ClusterRole
	var binding rbacv1.ClusterRoleBinding
	for _, m := range ms {
		var v any
		switch m.Kind {
		case "DaemonSet":
			v = &ds
		case "ServiceAccount":
			v = &sa
		case "ClusterRole":
			v = &role
		case "ClusterRoleBinding":
			v = &binding
		default:
			t.Fatalf("unexpected %s", m.Kind)
		}
		if err := yaml.UnmarshalStrict(m.Doc, v); err != nil {
			t.Fatalf("%s: %v", m.Kind, err)
		}
	}
	pod := ds.Spec.Template.Spec
	for k, v := range ds.Spec.Selector.MatchLabels {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("the DaemonSet's selector %s=%s does not match its pods", k, v)
		}
	}
	if pod.NodeSelector["nvidia.com/gpu.present"] != "true" {
		t.Errorf("node selector %v; want GPU nodes only", pod.NodeSelector)
	}
	c := pod.Containers[0]
	args := strings.Join(c.Args, " ")
	if c.Args[0] != "join" || !strings.Contains(args, "--kube-node $(NODE_NAME)") || !strings.Contains(args, "--token-file ") {
		t.Errorf("args %v; want join --kube-node $(NODE_NAME) --token-file FILE", c.Args)
	}
	nodeName := false
	for _, e := range c.Env {
		nodeName = nodeName || e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
	}
	if !nodeName {
		t.Error("NODE_NAME is not the pod's spec.nodeName")
	}
	tokenMounted := false
	for _, m := range c.VolumeMounts {
		for _, v := range pod.Volumes {
			tokenMounted = tokenMounted || m.Name == v.Name && v.Secret != nil && strings.Contains(args, "--token-file "+m.MountPath+"/")
		}
	}
	if !tokenMounted {
		t.Error("--token-file is not in a mounted Secret")
	}
	if pod.ServiceAccountName != sa.Name || binding.Subjects[0].Name != sa.Name || binding.RoleRef.Name != role.Name ||
		!slices.Contains(role.Rules[0].Resources, "nodes") || !slices.Equal(role.Rules[0].Verbs, []string{"get"}) {
		t.Errorf("service account %q bound to %q: rules %+v; want get on nodes, nothing more", sa.Name, binding.RoleRef.Name, role.Rules)
	}
	if g := pod.TerminationGracePeriodSeconds; g == nil || *g <= 120 || !strings.Contains(args, "--stop-timeout 2m") {
		t.Errorf("grace %v for a --stop-timeout of 2m; want more than the drain takes", g)
	}
}
