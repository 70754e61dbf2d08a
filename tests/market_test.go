package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"refuel/workflows/training"
	"refuel/workflows/workload"

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
	parallel(t)
	clockedRun(t, clockedJob{id: "clocked", nodes: 1, policy: policy.Refuel}, "training-run-market-time")
}

// TestClockedGangOnTheSimulatedCloud is the same for a gang of two: it
// follows the market's clock, decides as `starter sim --nodes 2` replays
// the same window, and pays what it replays (every node billed), a node
// taken by the market preempting the whole gang.
func TestClockedGangOnTheSimulatedCloud(t *testing.T) {
	parallel(t)
	clockedRun(t, clockedJob{id: "clocked-gang", nodes: 2, policy: policy.Refuel}, "training-run-market-time-gang")
}

// TestClockedElasticGangOnTheSimulatedCloud is the same for an elastic
// gang of three down to two, with greedy, on a trace of counts where
// every third tick in stock has only two nodes' worth: it holds the
// widths `starter sim --nodes 3 --min-nodes 2` replays, each change of
// width a start of real trainers on that many nodes, and pays the same.
func TestClockedElasticGangOnTheSimulatedCloud(t *testing.T) {
	parallel(t)
	src, err := trace.Load(filepath.Join("..", "workflows", "training", "testdata", "traces", "us-west-2a_v100_1.json"))
	if err != nil {
		t.Fatal(err)
	}
	counts := make([]int, len(src.Points))
	for i, p := range src.Points {
		counts[i] = 3 * p
		if p > 0 && i%3 == 0 {
			counts[i] = 2
		}
	}
	dir := t.TempDir()
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"gap_seconds": src.Gap.Seconds()}, "data": counts})
	if err := os.WriteFile(filepath.Join(dir, "us-west-2a_v100_1.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	m := clockedRun(t, clockedJob{id: "clocked-elastic", nodes: 3, minNodes: 2, policy: policy.Greedy, traces: dir}, "training-run-market-time-elastic-gang")
	shrunk := 0
	for _, d := range m.Decisions {
		if strings.HasSuffix(d.Choice, "×2") {
			shrunk++
		}
	}
	if shrunk == 0 {
		t.Errorf("the gang never trained on 2 nodes; this market was made for it to")
	}
}

// clockedJob is a deadline job on the simulated cloud's clock: its
// gang, policy, and the directory of traces its market replays (default
// workflows/training/testdata/traces).
type clockedJob struct {
	id              string
	nodes, minNodes int
	policy          policy.Name
	traces          string
}

// clockedRun runs cj on the simulated cloud's clock, checks it against
// the simulator, records its history under name, and returns its
// account.
func clockedRun(t *testing.T, cj clockedJob, name string) *workload.MarketStatus {
	traces := cj.traces
	if traces == "" {
		traces = filepath.Join("..", "workflows", "training", "testdata", "traces")
	}
	nodes := cj.nodes
	s := startStack(t, func(c *controlplane.Config) {
		c.Provider = controlplane.ProviderSim
		c.Sim = controlplane.SimConfig{Traces: traces, Notice: 5 * time.Second, MarketTime: true}
	})
	ctx := context.Background()
	deadline := time.Now().Add(9 * time.Hour)
	js := quickJob(cj.id, spec.TierDeadline)
	js.Deadline, js.Work, js.Policy = &deadline, spec.Duration(6*time.Hour), string(cj.policy)
	js.Resources.InstanceTypes = []string{"p3.2xlarge"}
	js.Resources.Nodes, js.Resources.MinNodes = nodes, cj.minNodes
	run, err := jobs.Submit(ctx, s.Client, js)
	if err != nil {
		t.Fatal(err)
	}
	// A bound, not a target: 35 s alone here, and several times that
	// beside five other tests on two busy cores, as each of its market's
	// ticks waits on the run's decision.
	wctx, cancel := context.WithTimeout(ctx, 8*time.Minute)
	defer cancel()
	var final training.Status
	if err := run.Get(wctx, &final); err != nil {
		explainStall(t, s.Client, js.ID)
		t.Fatalf("tick %d: %v", s.Sim.Tick(), err)
	}
	m := final.Market
	if m == nil {
		t.Fatal("the run kept wall time; want the market's")
	}
	if m.Job.Rules != policy.RulesLatest {
		t.Errorf("the run decided by version %d of refuel's rules; want the latest, %d, as `starter sim` replays", m.Job.Rules, policy.RulesLatest)
	}
	if !m.Job.LearnsByTrying {
		t.Errorf("the run saw every zone's stock; want it to learn stock by trying, as `starter sim` replays by default")
	}
	if max(1, m.Job.Nodes) != nodes || m.Job.MinNodes != cj.minNodes {
		t.Fatalf("the account is of %d nodes down to %d; want %d down to %d", m.Job.Nodes, m.Job.MinNodes, nodes, cj.minNodes)
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
	want, err := replay.Run(market, m.Job, m.StartTick, replay.NewOnline(spec.TierDeadline, cj.policy))
	if err != nil {
		t.Fatal(err)
	}
	var wantDecisions []workload.MarketDecision
	for i, step := range want.Steps {
		wantDecisions = append(wantDecisions, workload.MarketDecision{Tick: m.StartTick + i, Choice: step.Choice.String(), Preempted: step.Preempted})
	}
	t.Logf("%d ticks, $%.2f (probes $%.4f), %d preemptions, %d changeovers; deadline budget %s", len(want.Steps), want.Cost, want.ProbeUSD, want.Preemptions, want.Changeovers, m.Job.Deadline)
	if diff := cmp.Diff(m.Decisions, wantDecisions); diff != "" {
		t.Errorf("decisions differ from the simulator's, got(-), want(+):\n%s", diff)
	}
	if cj.policy == policy.Refuel && want.ProbeUSD == 0 {
		t.Errorf("refuel made no probe; its zones go out of stock on this market, for refuel to probe them")
	}
	if m.ProbeUSD != want.ProbeUSD {
		t.Errorf("the run's probes cost $%.4f; the simulator's $%.4f", m.ProbeUSD, want.ProbeUSD)
	}
	if m.CostUSD != want.Cost || m.Preemptions != want.Preemptions || m.Changeovers != want.Changeovers || !m.DeadlineMet {
		t.Errorf("account $%.4f, %d preemptions, %d changeovers, deadline met %v; the simulator: $%.4f, %d, %d, %v",
			m.CostUSD, m.Preemptions, m.Changeovers, m.DeadlineMet, want.Cost, want.Preemptions, want.Changeovers, want.DeadlineMet)
	}
	if final.State != workflows.StateCompleted || final.Preemptions != want.Preemptions || final.LastCheckpoint == nil {
		t.Errorf("run ended %s with %d preemptions, checkpoint %v; want completed with %d and a checkpoint", final.State, final.Preemptions, final.LastCheckpoint, want.Preemptions)
	}
	// A person reads it by the market's clock too: its work, deadline and
	// bill, not its trainer's steps.
	_, starter := refuelBinaries(t)
	r := runCLI(t, t.TempDir(), starter, "status", js.ID, "--temporal-address", s.Address)
	for _, line := range []string{
		fmt.Sprintf("progress   [##############################] %.1f of %.1f h of work in market time\n", m.Job.Work.Hours(), m.Job.Work.Hours()),
		fmt.Sprintf("deadline   met: finished at %.2f h of market time, the deadline %.2f h after the start\n", m.FinishHours, m.Job.Deadline.Hours()),
		fmt.Sprintf("cost       $%.2f on the market's clock: spot %.2f h, on-demand %.2f h", m.CostUSD, m.SpotHours, m.OnDemandHours),
	} {
		if r.code != 0 || !strings.Contains(r.stdout, line) {
			t.Errorf("starter status: exit %d\n%s\nwant the line %q", r.code, r.stdout, line)
		}
	}
	if probes := fmt.Sprintf("$%.4f of it for probes", m.ProbeUSD); (m.ProbeUSD > 0) != strings.Contains(r.stdout, probes) {
		t.Errorf("starter status with probes of $%.4f:\n%s\nwant %q exactly where the run paid for probes", m.ProbeUSD, r.stdout, probes)
	}
	if strings.Contains(r.stdout, fmt.Sprintf(" of %d\n", final.TotalSteps)) {
		t.Errorf("starter status shows progress in the trainer's steps for a run on the market's clock:\n%s", r.stdout)
	}
	launched, probed := 0, 0
	for _, inst := range s.Sim.Instances() {
		if inst.Tags[capacity.TagProbe] != "" {
			probed++
		} else {
			launched++
		}
		if inst.State != capacity.StateTerminated {
			t.Errorf("instance %s still %s", inst.ID, inst.State)
		}
	}
	// refuel's probes are acquisitions through the cloud: each the
	// simulator billed had all the gang's nodes, and every one was let go.
	if all := want.Probes * nodes; probed < all || probed > all && cj.minNodes == 0 {
		t.Errorf("%d instances launched as probes; the simulator billed %d probes of %d nodes", probed, want.Probes, nodes)
	}
	// Every start launches the nodes it holds.
	starts, held := 0, policy.None
	for _, step := range want.Steps {
		if step.Preempted {
			held = policy.None
		}
		if c := step.Choice; c.Holds() && c != held {
			starts += nodes
			if c.Nodes > 0 {
				starts += c.Nodes - nodes
			}
		}
		held = step.Choice
	}
	if launched != starts {
		t.Errorf("%d instances launched; the simulator started %d nodes in %d starts", launched, starts, want.Starts)
	}
	recordHistory(t, s.Client, js.ID, name)
	return m
}
