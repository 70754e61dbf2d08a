package tests

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"refuel/workflows/inference"
	"refuel/workflows/training"

	"refuel/controlplane"
	"refuel/deploy"
	"refuel/jobs"
	"refuel/pkg/autoscale"
	"refuel/pkg/spec"
	"refuel/workflows"
)

// TestDashboardQueriesOnlyMetricsTheWorkerExports runs a real workload on
// the embedded stack with a capacity pool (a run on the base machine, the
// drill on burst, a service under load that preempts the first) and scrapes /metrics while it runs:
// every metric deploy/grafana/refuel.json and the example alerts query
// must be there, so no panel stays empty for a misspelt name.
func TestDashboardQueriesOnlyMetricsTheWorkerExports(t *testing.T) {
	parallel(t) // a stack of its own; the workload mostly waits
	s := startStack(t, func(c *controlplane.Config) {
		c.Provider, c.Pools = controlplane.ProviderLocal, testPools()
	})
	ctx := context.Background()
	wctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()

	// A run on the base machine first, so the drill's run overflows to
	// burst, where an instance can be taken away.
	holder := quickJob("holder", spec.TierFlexible)
	holder.Priority, holder.Work = 10, spec.Duration(2*time.Minute)
	if _, err := jobs.Submit(ctx, s.Client, holder); err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.WaitFor(wctx, s.Client, "holder", func(st training.Status) bool {
		return st.Admission != nil && st.Admission.Layer == "base" && st.State == workflows.StateRunning
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Client.CancelWorkflow(ctx, "holder", "") })
	rep, err := jobs.Drill(wctx, s.Client, jobs.DrillOptions{Work: 4 * time.Second, Interval: time.Second, NoticeGrace: 10 * time.Second, Timeout: 3 * time.Minute})
	if err != nil || !rep.Passed {
		t.Fatalf("drill: %+v, %v", rep, err)
	}
	if _, err := jobs.StartService(ctx, s.Client, spec.ServiceSpec{
		ID: "chat", Team: "serving", Priority: 90, MinReplicas: 1, MaxReplicas: 2,
		Target: spec.ScalingTarget{QPS: 10}, Placement: spec.PlacementOnDemand, ModelLoad: spec.Duration(time.Second),
	}); err != nil {
		t.Fatal(err)
	}
	if err := jobs.ReportLoad(ctx, s.Client, "chat", autoscale.Metrics{At: time.Now(), QPS: 15}); err != nil {
		t.Fatal(err)
	}
	waitService(t, wctx, s, "chat", func(st inference.Status) bool { return st.Ready >= 1 })
	t.Cleanup(func() { _ = jobs.StopService(ctx, s.Client, "chat") })

	b, err := os.ReadFile(filepath.Join("..", "deploy", "grafana", "refuel.json"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := deploy.ParseDashboard(b)
	if err != nil {
		t.Fatal(err)
	}
	queried := d.Metrics()
	alerts, err := os.ReadFile(filepath.Join("..", "deploy", "prometheus", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	queried = append(queried, deploy.QueriedMetrics(string(alerts))...)

	exported := exportedMetrics(scrape(t, s.MetricsURL()))
	var missing []string
	for _, m := range queried {
		if !exported[m] {
			missing = append(missing, m)
		}
	}
	slices.Sort(missing)
	if missing = slices.Compact(missing); len(missing) > 0 {
		var have []string
		for m := range exported {
			have = append(have, m)
		}
		slices.Sort(have)
		t.Errorf("the dashboard or the alerts query metrics /metrics does not have: %v\n/metrics has: %v", missing, have)
	}
}

// exportedMetrics are the metric families of a /metrics page.
func exportedMetrics(page string) map[string]bool {
	out := map[string]bool{}
	for _, line := range strings.Split(page, "\n") {
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
			out[strings.Fields(name)[0]] = true
		}
	}
	return out
}
