package inference

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/autoscale"
	"refuel/pkg/capacity"
	"refuel/pkg/servingsim"
	"refuel/pkg/traffic"
	"refuel/workflows"
	"refuel/workflows/internal/fakecloud"
)

// TestServiceDecidesAsTheBench replays two hours of the autoscale bench's
// "bursts" scenario through the InferenceService workflow, on skipped
// time, and gets the bench's decisions, replica by replica: the workflow
// and `starter autoscale-bench` run the same policy object on the same
// reports.
//
// Two things are held equal that the bench and a live service would
// otherwise measure apart: the lead time is fixed (at the bench's longest
// start-up), as the workflow's replicas start in the test server's time
// and not in the simulator's draws; and the service decides only on
// reports, as the bench does, rather than also every DecisionInterval.
// The bench's service starts with the one replica its min_replicas asks
// for, serving, as the workflow's first decision asks for one. A third:
// the service is capacity-only here, fed by the metrics signal, as a
// serving one's replicas are ServiceReplica children this test does not
// run; its staffing for slo.latency is held by pkg/autoscale's tests and
// the recorded serving history.
func TestServiceDecidesAsTheBench(t *testing.T) {
	t.Parallel()
	epoch := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	sc := traffic.Scenarios()[slices.IndexFunc(traffic.Scenarios(), func(s traffic.Scenario) bool { return s.Name == "bursts" })]
	tr := sc.Build(syntheticHour(), 1).Slice(0, 2*time.Hour)
	cfg := servingsim.BenchConfig()
	cfg.Timeline = true
	ss := servingsim.BenchSpec()
	ss.ID, ss.LeadTime = "svc", cfg.Startup.Max().String()
	ss.Command, ss.MaxConcurrency, ss.SLO, ss.Readiness, ss.QueueTimeout, ss.DrainTimeout = nil, 0, nil, nil, 0, 0
	bench, err := autoscale.NewForecastScaler(ss)
	if err != nil {
		t.Fatal(err)
	}
	demand := servingsim.NewDemand(tr, cfg.Model, time.Minute, epoch)
	res := servingsim.Run(tr, demand, bench, ss.MinReplicas, cfg)
	var want []string
	for _, s := range res.Timeline {
		want = append(want, fmt.Sprintf("%s %d: %s", s.At, s.Decision.Replicas, s.Decision.Explanation))
	}
	if peak := slices.MaxFunc(res.Timeline, func(a, b servingsim.Sample) int { return a.Decision.Replicas - b.Decision.Replicas }); peak.Decision.Replicas < 5 {
		t.Fatalf("the bench never went above %d replicas: the scenario tests little", peak.Decision.Replicas)
	}

	opts := DefaultOptions()
	opts.DecisionInterval, opts.MaxHistory = 24*time.Hour, 1<<30
	c := &serviceCloud{Cloud: &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA}}}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetStartTime(epoch)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "svc"})
	env.RegisterWorkflowWithOptions((&Services{Options: opts}).InferenceService, workflow.RegisterOptions{Name: workflows.InferenceServiceName})
	for name, fn := range map[string]any{
		activities.ListOfferingsName: c.ListOfferings, activities.AcquireName: c.Acquire, activities.ReleaseName: c.Release,
		activities.LostInstancesName: c.LostInstances,
	} {
		env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
	env.OnSignalExternalWorkflow(mock.Anything, workflows.PoolWorkflowID, "", mock.Anything, mock.Anything).Return((&fakePool{absent: true}).signal)
	// Each report, then a second later the decision it led to; each
	// callback schedules the next, as the test server holds only so many.
	var got []string
	var next func(i int)
	now := time.Duration(0) // of the test's clock, when next is called
	next = func(i int) {
		if i == len(res.Timeline) {
			return
		}
		sample := res.Timeline[i]
		env.RegisterDelayedCallback(func() {
			env.SignalWorkflow(workflows.SignalMetrics, sample.Metrics)
			env.RegisterDelayedCallback(func() {
				d := queryService(t, env).Desired
				got = append(got, fmt.Sprintf("%s %d: %s", sample.At, d.Replicas, d.Explanation))
				next(i + 1)
			}, time.Second)
		}, sample.At-now)
		now = sample.At + time.Second
	}
	next(0)
	runUntilCancelled(t, env, tr.Span+time.Minute, ss, (*ServiceState)(nil))
	t.Logf("%d decisions, e.g. %q", len(got), got[len(got)/2])
	if len(got) != len(want) {
		t.Fatalf("%d decisions; want the bench's %d", len(got), len(want))
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("the workflow's decisions got(-), the bench's want(+):\n%s", diff)
	}
}

// syntheticHour stands in for the real hour a bench scenario is built
// from: an hour of arrivals at 5 a second whose sizes vary as an LLM
// conversation's do.
func syntheticHour() *traffic.Trace {
	rng := rand.New(rand.NewPCG(3, 4))
	h := &traffic.Trace{Name: "synthetic hour", Span: time.Hour}
	for at := time.Duration(0); at < time.Hour; at += time.Duration(rng.ExpFloat64() * float64(200*time.Millisecond)) {
		h.Requests = append(h.Requests, traffic.Request{At: at, ContextTokens: 100 + rng.IntN(2000), GeneratedTokens: 20 + rng.IntN(400)})
	}
	return h
}
