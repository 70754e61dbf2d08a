package workflows

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/capacity"
	"refuel/pkg/cloud/sim"
	"refuel/pkg/policy"
	"refuel/pkg/replay"
	"refuel/pkg/spec"
	"refuel/pkg/trace"
)

// trainer trains until it is stopped: on a clocked market the market's
// account says when the work is done.
type trainer struct {
	mu    sync.Mutex
	stops map[int]chan struct{}
}

func (tr *trainer) stop(attempt int) chan struct{} {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.stops == nil {
		tr.stops = map[int]chan struct{}{}
	}
	if tr.stops[attempt] == nil {
		tr.stops[attempt] = make(chan struct{})
	}
	return tr.stops[attempt]
}

func (tr *trainer) RunTraining(ctx context.Context, in activities.TrainingInput) (activities.TrainingResult, error) {
	select {
	case <-ctx.Done():
	case <-tr.stop(in.Attempt):
	}
	return activities.TrainingResult{Outcome: activities.OutcomeStopped}, nil
}

func (tr *trainer) StopTraining(_ context.Context, in activities.StopInput) error {
	ch := tr.stop(in.Attempt)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	select {
	case <-ch:
	default:
		close(ch)
	}
	return nil
}

// A deadline or flexible run on the simulated cloud decides at every tick
// of its clock with pkg/policy, and makes the same decisions at the same
// cost as `starter sim` replaying the same traces from the same tick.
func TestClockedRunDecidesAsTheSimulator(t *testing.T) {
	t.Parallel()
	traces := []string{"us-west-2a_v100_1.json", "us-west-2b_v100_1.json"}
	for name, tc := range map[string]struct {
		tier     spec.Tier
		policy   policy.Name
		traces   int
		start    int
		deadline time.Duration
	}{
		"deadline refuel one zone":   {spec.TierDeadline, policy.Refuel, 1, 196, 9 * time.Hour},
		"deadline greedy one zone":   {spec.TierDeadline, policy.Greedy, 1, 689, 9 * time.Hour},
		"deadline uniform two zones": {spec.TierDeadline, policy.UniformProgress, 2, 196, 9 * time.Hour},
		"deadline refuel two zones":  {spec.TierDeadline, policy.Refuel, 2, 984, 9 * time.Hour},
		"flexible refuel one zone":   {spec.TierFlexible, policy.Refuel, 1, 40, 0},
	} {
		t.Run(name, func(t *testing.T) {
			var loaded []*trace.Trace
			cfg := sim.Config{StartTick: tc.start}
			for _, file := range traces[:tc.traces] {
				tr, err := trace.Load(filepath.Join("testdata", "traces", file))
				if err != nil {
					t.Fatal(err)
				}
				loaded = append(loaded, tr)
				cfg.Pools = append(cfg.Pools, sim.PoolConfig{Pool: sim.Pool{Zone: tr.Zone, InstanceType: "p3.2xlarge"}, Spot: tr})
			}
			cloud, err := sim.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer cloud.Close()

			work := 6 * time.Hour
			js := spec.JobSpec{ID: "clocked", Team: "t", Priority: 50, Tier: tc.tier, Work: spec.Duration(work), Policy: string(tc.policy),
				Resources: spec.Resources{GPUs: 1, InstanceTypes: []string{"p3.2xlarge"}}}
			startedAt := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
			if tc.deadline > 0 {
				d := startedAt.Add(tc.deadline)
				js.Deadline = &d
			}

			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.SetStartTime(startedAt)
			env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: js.ID})
			env.RegisterWorkflowWithOptions(New().TrainingRun, workflow.RegisterOptions{Name: TrainingRunName})
			tr := &trainer{}
			caps := &activities.Capacity{Providers: []capacity.Provider{cloud}, Clocks: map[string]capacity.MarketClock{cloud.Name(): cloud}}
			for name, fn := range map[string]any{
				activities.ListOfferingsName: caps.ListOfferings, activities.AcquireName: caps.Acquire,
				activities.OpenMarketName: caps.OpenMarket, activities.MarketAtName: caps.MarketAt,
				activities.ReleaseName: caps.Release, activities.RunTrainingName: tr.RunTraining, activities.StopTrainingName: tr.StopTraining,
				activities.PoolCheckpointLogName: caps.PoolCheckpointLog, activities.DecideMarketName: caps.DecideMarket,
			} {
				env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
			}
			env.OnSignalExternalWorkflow(mock.Anything, PoolWorkflowID, "", mock.Anything, mock.Anything).
				Return(serviceerror.NewNotFound("workflow not found"))
			env.ExecuteWorkflow(TrainingRunName, js)
			if err := env.GetWorkflowError(); err != nil {
				t.Fatalf("run failed: %v", err)
			}
			var st Status
			if err := env.GetWorkflowResult(&st); err != nil {
				t.Fatal(err)
			}
			if st.Market == nil {
				t.Fatal("the run did not follow the market's clock")
			}
			if st.Market.Clock != ClockMarket || st.Market.Why == "" {
				t.Errorf("market clock %q, why %q; want the market's clock and its last decision explained", st.Market.Clock, st.Market.Why)
			}

			market, err := replay.NewMarket(loaded)
			if err != nil {
				t.Fatal(err)
			}
			deadline := tc.deadline
			if deadline == 0 {
				deadline = 100 * work
			}
			job := replay.Job{Tier: tc.tier, Work: work, Deadline: deadline, RestartOverhead: sim.DefaultRestartOverhead, SpotPrice: 0.9701, OnDemandPrice: 3.06}
			want, err := replay.Run(market, job, tc.start, replay.NewOnline(tc.tier, tc.policy))
			if err != nil {
				t.Fatal(err)
			}
			var wantDecisions []MarketDecision
			for i, step := range want.Steps {
				wantDecisions = append(wantDecisions, MarketDecision{Tick: tc.start + i, Choice: step.Choice.String(), Preempted: step.Preempted})
			}
			t.Logf("%d ticks, cost $%.2f, %d preemptions, %d changeovers, %d starts, finished %v in %.1fh", len(want.Steps), want.Cost, want.Preemptions, want.Changeovers, want.Starts, want.Finished, want.Finish.Hours())
			if diff := cmp.Diff(st.Market.Decisions, wantDecisions); diff != "" {
				t.Errorf("decisions differ from the simulator's, got(-), want(+):\n%s", diff)
			}
			got := [...]any{st.Market.CostUSD, st.Market.Preemptions, st.Market.Changeovers, st.Market.Finished, st.Market.DeadlineMet}
			wantSummary := [...]any{want.Cost, want.Preemptions, want.Changeovers, want.Finished, want.DeadlineMet}
			if got != wantSummary {
				t.Errorf("cost, preemptions, changeovers, finished, deadline met = %v; the simulator says %v", got, wantSummary)
			}
			if st.State != StateCompleted || st.Preemptions != want.Preemptions {
				t.Errorf("state %s with %d preemptions counted; want completed with %d", st.State, st.Preemptions, want.Preemptions)
			}
			if launched := len(cloud.Instances()); launched != want.Starts {
				t.Errorf("%d instances launched; the simulator started %d", launched, want.Starts)
			}
			if left := liveInstances(cloud); left != 0 {
				t.Errorf("%d instances still live after the run", left)
			}
		})
	}
}

func liveInstances(c *sim.Cloud) int {
	n := 0
	for _, s := range c.Instances() {
		if s.State != capacity.StateTerminated {
			n++
		}
	}
	return n
}
