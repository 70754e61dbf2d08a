package tests

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"refuel/controlplane"
	"refuel/jobs"
	"refuel/pkg/capacity"
	"refuel/pkg/policy"
	"refuel/pkg/replay"
	"refuel/pkg/spec"
	"refuel/pkg/trace"
	"refuel/workflows"
)

// TestClockedRunOnTheSimulatedCloud runs a deadline job on the whole
// stack with the simulated cloud keeping market time, its clock driven by
// the run: real agents and trainers on its instances, real preemptions
// from the traces. The run's decisions and bill match `starter sim`
// replaying the same traces from the same tick.
func TestClockedRunOnTheSimulatedCloud(t *testing.T) {
	clockedRun(t, "clocked", 1, "training-run-market-time")
}

// TestClockedGangOnTheSimulatedCloud is the same for a gang of two: it
// follows the market's clock, decides as `starter sim --nodes 2` replays
// the same window, and pays what it replays (every node billed), a node
// taken by the market preempting the whole gang.
func TestClockedGangOnTheSimulatedCloud(t *testing.T) {
	clockedRun(t, "clocked-gang", 2, "training-run-market-time-gang")
}

// clockedRun runs a deadline job of nodes instances on the simulated
// cloud's clock, checks it against the simulator, and records its
// history under name.
func clockedRun(t *testing.T, id string, nodes int, name string) {
	traces := filepath.Join("..", "workflows", "testdata", "traces")
	s := startStack(t, func(c *controlplane.Config) {
		c.Provider = controlplane.ProviderSim
		c.Sim = controlplane.SimConfig{Traces: traces, Notice: 5 * time.Second, MarketTime: true}
	})
	ctx := context.Background()
	deadline := time.Now().Add(9 * time.Hour)
	js := quickJob(id, spec.TierDeadline)
	js.Deadline, js.Work, js.Policy = &deadline, spec.Duration(6*time.Hour), string(policy.Refuel)
	js.Resources.InstanceTypes = []string{"p3.2xlarge"}
	js.Resources.Nodes = nodes
	run, err := jobs.Submit(ctx, s.Client, js)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var final workflows.Status
	if err := run.Get(wctx, &final); err != nil {
		t.Fatal(err)
	}
	m := final.Market
	if m == nil {
		t.Fatal("the run kept wall time; want the market's")
	}
	if max(1, m.Job.Nodes) != nodes {
		t.Fatalf("the account is of %d nodes; want %d", m.Job.Nodes, nodes)
	}

	files, _ := filepath.Glob(filepath.Join(traces, "*.json"))
	var loaded []*trace.Trace
	for _, f := range files {
		tr, err := trace.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		loaded = append(loaded, tr)
	}
	market, err := replay.NewMarket(loaded)
	if err != nil {
		t.Fatal(err)
	}
	want, err := replay.Run(market, m.Job, m.StartTick, replay.NewOnline(spec.TierDeadline, policy.Refuel))
	if err != nil {
		t.Fatal(err)
	}
	var wantDecisions []workflows.MarketDecision
	for i, step := range want.Steps {
		wantDecisions = append(wantDecisions, workflows.MarketDecision{Tick: m.StartTick + i, Choice: step.Choice.String(), Preempted: step.Preempted})
	}
	t.Logf("%d ticks, $%.2f, %d preemptions, %d changeovers; deadline budget %s", len(want.Steps), want.Cost, want.Preemptions, want.Changeovers, m.Job.Deadline)
	if diff := cmp.Diff(m.Decisions, wantDecisions); diff != "" {
		t.Errorf("decisions differ from the simulator's, got(-), want(+):\n%s", diff)
	}
	if m.CostUSD != want.Cost || m.Preemptions != want.Preemptions || m.Changeovers != want.Changeovers || !m.DeadlineMet {
		t.Errorf("account $%.4f, %d preemptions, %d changeovers, deadline met %v; the simulator: $%.4f, %d, %d, %v",
			m.CostUSD, m.Preemptions, m.Changeovers, m.DeadlineMet, want.Cost, want.Preemptions, want.Changeovers, want.DeadlineMet)
	}
	if final.State != workflows.StateCompleted || final.Preemptions != want.Preemptions || final.LastCheckpoint == nil {
		t.Errorf("run ended %s with %d preemptions, checkpoint %v; want completed with %d and a checkpoint", final.State, final.Preemptions, final.LastCheckpoint, want.Preemptions)
	}
	launched := 0
	for _, inst := range s.Sim.Instances() {
		launched++
		if inst.State != capacity.StateTerminated {
			t.Errorf("instance %s still %s", inst.ID, inst.State)
		}
	}
	if launched != want.Starts*nodes {
		t.Errorf("%d instances launched; the simulator started %d gangs of %d", launched, want.Starts, nodes)
	}
	recordHistory(t, s.Client, js.ID, name)
}
