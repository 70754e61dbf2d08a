package training

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
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
	"refuel/workflows"
	"refuel/workflows/workload"
)

// trainer trains until it is stopped: on a clocked market the market's
// account says when the work is done.
type trainer struct {
	mu    sync.Mutex
	stops map[int]chan struct{}
}

func (tr *trainer) Stop(attempt int) chan struct{} {
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
	case <-tr.Stop(in.Attempt):
	}
	return activities.TrainingResult{Outcome: activities.OutcomeStopped}, nil
}

func (tr *trainer) StopTraining(_ context.Context, in activities.StopInput) error {
	ch := tr.Stop(in.Attempt)
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
// cost as `starter sim` replaying the same traces from the same tick. A
// gang does as `starter sim --nodes N` does: on one-node traces stock for
// one node is stock for all; on traces of counts (counts: each point
// times the gang, every fifth one short of it) only a point of N is, and
// an elastic gang may hold the width the policy chooses from what is.
func TestClockedRunDecidesAsTheSimulator(t *testing.T) {
	t.Parallel()
	traces := []string{"us-west-2a_v100_1.json", "us-west-2b_v100_1.json"}
	for name, tc := range map[string]struct {
		tier     spec.Tier
		policy   policy.Name
		traces   int
		start    int
		deadline time.Duration
		nodes    int
		minNodes int
		counts   bool
	}{
		"deadline refuel one zone":                 {spec.TierDeadline, policy.Refuel, 1, 196, 9 * time.Hour, 1, 0, false},
		"deadline greedy one zone":                 {spec.TierDeadline, policy.Greedy, 1, 689, 9 * time.Hour, 1, 0, false},
		"deadline uniform two zones":               {spec.TierDeadline, policy.UniformProgress, 2, 196, 9 * time.Hour, 1, 0, false},
		"deadline refuel two zones":                {spec.TierDeadline, policy.Refuel, 2, 984, 9 * time.Hour, 1, 0, false},
		"flexible refuel one zone":                 {spec.TierFlexible, policy.Refuel, 1, 40, 0, 1, 0, false},
		"deadline refuel two zones, gang of 2":     {spec.TierDeadline, policy.Refuel, 2, 984, 9 * time.Hour, 2, 0, false},
		"deadline greedy one zone, gang of 3":      {spec.TierDeadline, policy.Greedy, 1, 689, 9 * time.Hour, 3, 0, true},
		"deadline refuel two zones, gang of 3":     {spec.TierDeadline, policy.Refuel, 2, 196, 9 * time.Hour, 3, 0, true},
		"deadline refuel two zones, elastic gang":  {spec.TierDeadline, policy.Refuel, 2, 196, 9 * time.Hour, 3, 2, true},
		"deadline greedy one zone, elastic gang":   {spec.TierDeadline, policy.Greedy, 1, 689, 9 * time.Hour, 3, 2, true},
		"deadline uniform two zones, elastic gang": {spec.TierDeadline, policy.UniformProgress, 2, 196, 9 * time.Hour, 3, 2, true},
		"flexible refuel one zone, elastic gang":   {spec.TierFlexible, policy.Refuel, 1, 40, 0, 3, 2, true},
	} {
		t.Run(name, func(t *testing.T) {
			var loaded []*trace.Trace
			cfg := sim.Config{StartTick: tc.start}
			for _, file := range traces[:tc.traces] {
				tr, err := trace.Load(filepath.Join("testdata", "traces", file))
				if err != nil {
					t.Fatal(err)
				}
				if tc.counts {
					tr.Points = append([]int(nil), tr.Points...)
					for i, p := range tr.Points {
						tr.Points[i] = p * tc.nodes
						if i%5 == 0 && p > 0 {
							tr.Points[i] = tc.nodes - 1
						}
					}
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
				Resources: spec.Resources{GPUs: 1, InstanceTypes: []string{"p3.2xlarge"}, Nodes: tc.nodes, MinNodes: tc.minNodes}}
			startedAt := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
			if tc.deadline > 0 {
				d := startedAt.Add(tc.deadline)
				js.Deadline = &d
			}

			st := runClocked(t, cloud, workload.DefaultRunOptions(), js, startedAt)
			deadline := tc.deadline
			if deadline == 0 {
				deadline = 100 * work
			}
			job := replay.Job{Tier: tc.tier, Work: work, Deadline: deadline, RestartOverhead: sim.DefaultRestartOverhead, SpotPrice: 0.9701, OnDemandPrice: 3.06,
				LearnsByTrying: true}
			if tc.nodes > 1 {
				job.Nodes, job.MinNodes = tc.nodes, tc.minNodes
			}
			checkAsSimulated(t, st, cloud, loaded, job, tc.start, tc.policy)
			if tc.minNodes > 0 && tc.policy != policy.Refuel {
				shrunk := slices.ContainsFunc(st.Market.Decisions, func(d workload.MarketDecision) bool { return strings.Contains(d.Choice, "×") })
				if !shrunk || len(st.Ledger.Resizes) == 0 {
					t.Errorf("held a shrunk width %v, %d resizes booked; this window was chosen for the gang to shrink", shrunk, len(st.Ledger.Resizes))
				}
			}
		})
	}
}

// Across zones priced apart in two regions, a run on the market's clock
// decides and pays as `starter sim --prices` does: each zone at its own
// prices, a start in another region than the checkpoint's paying the
// egress and transfer of the checkpoint (RunOptions' CheckpointGB,
// EgressUSDPerGB and TransferGbps). One zone's trace is replayed as if
// it were in another region, with spot at less than half the price: in
// this window the run moves there while the move is cheap, and not once
// it costs more than the cheaper spot saves.
func TestClockedRunDecidesAsTheSimulatorAcrossPricedRegions(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		egress    float64
		transfers int
	}{
		"cheap moves": {0.02, 1},
		"dear moves":  {2, 0},
	} {
		t.Run(name, func(t *testing.T) {
			var loaded []*trace.Trace
			var cfg sim.Config
			// In the order the sim lists its pools, which the run's
			// market keeps.
			prices := []replay.ZonePrice{{Region: "us-east-2", Spot: 0.4, OnDemand: 3.3}, {Region: "us-west-2", Spot: 0.9701, OnDemand: 3.06}}
			for i, file := range []string{"us-west-2b_v100_1.json", "us-west-2a_v100_1.json"} {
				tr, err := trace.Load(filepath.Join("testdata", "traces", file))
				if err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					tr.Zone = "us-east-2b"
				}
				loaded = append(loaded, tr)
				cfg.Pools = append(cfg.Pools, sim.PoolConfig{Pool: sim.Pool{Zone: tr.Zone, InstanceType: "p3.2xlarge"}, Spot: tr,
					SpotPrice: prices[i].Spot, OnDemandPrice: prices[i].OnDemand})
			}
			cfg.StartTick = 1295
			cloud, err := sim.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer cloud.Close()

			work := 6 * time.Hour
			startedAt := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
			deadline := startedAt.Add(9 * time.Hour)
			js := spec.JobSpec{ID: "clocked", Team: "t", Priority: 50, Tier: spec.TierDeadline, Work: spec.Duration(work), Policy: string(policy.Refuel),
				Deadline: &deadline, Resources: spec.Resources{GPUs: 1, InstanceTypes: []string{"p3.2xlarge"}}}
			o := workload.DefaultRunOptions()
			o.EgressUSDPerGB, o.CheckpointGB, o.TransferGbps = tc.egress, 50, 1
			st := runClocked(t, cloud, o, js, startedAt)
			job := replay.Job{Tier: spec.TierDeadline, Work: work, Deadline: 9 * time.Hour, RestartOverhead: sim.DefaultRestartOverhead,
				SpotPrice: 0.4, OnDemandPrice: 3.3, Zones: prices,
				CheckpointGB: 50, EgressUSDPerGB: tc.egress, TransferTime: 400 * time.Second, Rules: policy.RulesLatest,
				LearnsByTrying: true}
			if diff := cmp.Diff(st.Market.Job, job); diff != "" {
				t.Errorf("the run's account prices the job otherwise than the simulator, got(-), want(+):\n%s", diff)
			}
			if want := checkAsSimulated(t, st, cloud, loaded, job, cfg.StartTick, policy.Refuel); want.Transfers != tc.transfers {
				t.Errorf("the simulator moved the checkpoint %d times; this window was chosen for %d", want.Transfers, tc.transfers)
			}
		})
	}
}

// runClocked runs js on cloud's clock under w's options to its end, the
// workflow's clock starting at startedAt.
func runClocked(t *testing.T, cloud *sim.Cloud, o workload.RunOptions, js spec.JobSpec, startedAt time.Time) Status {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetStartTime(startedAt)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: js.ID})
	env.RegisterWorkflowWithOptions((&Runs{Options: o}).TrainingRun, workflow.RegisterOptions{Name: workflows.TrainingRunName})
	tr := &trainer{}
	caps := &activities.Capacity{Providers: []capacity.Provider{cloud}, Clocks: map[string]capacity.MarketClock{cloud.Name(): cloud}}
	for name, fn := range map[string]any{
		activities.ListOfferingsName: caps.ListOfferings, activities.AcquireName: caps.Acquire,
		activities.OpenMarketName: caps.OpenMarket, activities.MarketAtName: caps.MarketAt,
		activities.ReleaseName: caps.Release, activities.RunTrainingName: tr.RunTraining, activities.StopTrainingName: tr.StopTraining,
		activities.PoolCheckpointLogName: caps.PoolCheckpointLog, activities.DecideMarketName: caps.DecideMarket,
		activities.ProbeSpotName: caps.ProbeSpot,
	} {
		env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
	env.OnSignalExternalWorkflow(mock.Anything, workflows.PoolWorkflowID, "", mock.Anything, mock.Anything).
		Return(serviceerror.NewNotFound("workflow not found"))
	env.ExecuteWorkflow(workflows.TrainingRunName, js)
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
	if st.Market.Clock != workload.ClockMarket || st.Market.Why == "" {
		t.Errorf("market clock %q, why %q; want the market's clock and its last decision explained", st.Market.Clock, st.Market.Why)
	}
	return st
}

// checkAsSimulated checks that a run on cloud's clock made the decisions,
// and kept the account, that the simulator does replaying job on the
// loaded traces from tick start with the named policy.
func checkAsSimulated(t *testing.T, st Status, cloud *sim.Cloud, loaded []*trace.Trace, job replay.Job, start int, name policy.Name) replay.Result {
	t.Helper()
	market, err := replay.NewMarket(loaded)
	if err != nil {
		t.Fatal(err)
	}
	want, err := replay.Run(market, job, start, replay.NewOnline(job.Tier, name))
	if err != nil {
		t.Fatal(err)
	}
	var wantDecisions []workload.MarketDecision
	for i, step := range want.Steps {
		wantDecisions = append(wantDecisions, workload.MarketDecision{Tick: start + i, Choice: step.Choice.String(), Preempted: step.Preempted})
	}
	t.Logf("%d ticks, cost $%.2f, %d preemptions, %d changeovers, %d starts, %d transfers, finished %v in %.1fh", len(want.Steps), want.Cost, want.Preemptions, want.Changeovers, want.Starts, want.Transfers, want.Finished, want.Finish.Hours())
	if diff := cmp.Diff(st.Market.Decisions, wantDecisions); diff != "" {
		t.Errorf("decisions differ from the simulator's, got(-), want(+):\n%s", diff)
	}
	got := [...]any{st.Market.CostUSD, st.Market.Preemptions, st.Market.Changeovers, st.Market.Finished, st.Market.DeadlineMet}
	wantSummary := [...]any{want.Cost, want.Preemptions, want.Changeovers, want.Finished, want.DeadlineMet}
	if got != wantSummary {
		t.Errorf("cost, preemptions, changeovers, finished, deadline met = %v; the simulator says %v", got, wantSummary)
	}
	if st.State != workflows.StateCompleted || st.Preemptions != want.Preemptions {
		t.Errorf("state %s with %d preemptions counted; want completed with %d", st.State, st.Preemptions, want.Preemptions)
	}
	// Every start launches the nodes it holds.
	starts, held := 0, policy.None
	for _, step := range want.Steps {
		if step.Preempted {
			held = policy.None
		}
		if c := step.Choice; c.Holds() && c != held {
			starts += max(1, job.Nodes)
			if c.Nodes > 0 {
				starts += c.Nodes - job.Nodes
			}
		}
		held = step.Choice
	}
	launched, probed := 0, 0
	for _, inst := range cloud.Instances() {
		if inst.Tags[capacity.TagProbe] != "" {
			probed++
		} else {
			launched++
		}
	}
	if launched != starts {
		t.Errorf("%d instances launched; the simulator started %d (%d starts)", launched, starts, want.Starts)
	}
	// Each probe the simulator billed had all the gang's nodes, through
	// the cloud; an elastic gang's probe may have had some of them where
	// it was not billed.
	if all := want.Probes * max(1, job.Nodes); probed < all || probed > all && job.MinNodes == 0 {
		t.Errorf("%d instances launched as probes; the simulator billed %d probes of %d nodes", probed, want.Probes, max(1, job.Nodes))
	}
	if got := st.Market.Job; got.Nodes != job.Nodes || got.MinNodes != job.MinNodes {
		t.Errorf("the run's account is of a gang of %d down to %d; want %d down to %d", got.Nodes, got.MinNodes, job.Nodes, job.MinNodes)
	}
	if left := liveInstances(cloud); left != 0 {
		t.Errorf("%d instances still live after the run", left)
	}
	return want
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
