package training

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"refuel/pkg/capacity"
	"refuel/pkg/estimate"
	"refuel/pkg/spec"
	"refuel/workflows"
	"refuel/workflows/internal/fakecloud"
	"refuel/workflows/workload"
)

// A run that waits long for capacity continues as new, handing on its
// whole state, and the next run picks up where it stopped: nothing it
// recorded is lost, and its history starts afresh.
func TestLongWaitContinuesAsNew(t *testing.T) {
	t.Parallel()
	f := &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA}, NoStock: map[capacity.Market]bool{capacity.Spot: true}}
	env := newEnv(t, f, func(o *workload.RunOptions) { o.MaxWaits = 3 })
	js := job(spec.TierFlexible)
	env.ExecuteWorkflow(workflows.TrainingRunName, js)
	_, err := result(t, env)
	var next *workflow.ContinueAsNewError
	if !errors.As(err, &next) {
		t.Fatalf("run ended with %v; want it to continue as new", err)
	}
	var nextSpec spec.JobSpec
	var carry *RunState
	if err := converter.GetDefaultDataConverter().FromPayloads(next.Input, &nextSpec, &carry); err != nil {
		t.Fatal(err)
	}
	if carry == nil || carry.Attempts != 3 || len(carry.Failures) != 3 || nextSpec.ID != js.ID || len(carry.Offerings) != 1 {
		t.Fatalf("carried spec %s and %+v; want the spec, three attempts and their failures", nextSpec.ID, carry)
	}
	if len(f.Released) != 0 {
		t.Errorf("released %v before continuing: nothing was held", f.Released)
	}

	// The next run: stock has returned.
	f2 := &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA}}
	env2 := newEnv(t, f2)
	env2.ExecuteWorkflow(workflows.TrainingRunName, nextSpec, carry)
	st, err := result(t, env2)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != workflows.StateCompleted || st.Attempt != 4 || len(st.Failures) != 3 || !st.StartedAt.Equal(carry.StartedAt) {
		t.Errorf("next run ended %s at attempt %d with %d failures, started %s; want completed at attempt 4 keeping the 3 failures and the first start %s",
			st.State, st.Attempt, len(st.Failures), st.StartedAt, carry.StartedAt)
	}
	if len(f2.Requests) != 1 || f2.Requests[0].Attempt != 4 {
		t.Errorf("next run acquired %v; want one request, attempt 4 (the idempotency token must not repeat)", f2.Requests)
	}
}

// A continued run keeps what it started under and what it learnt: the
// options recorded in its first history (not the next worker's), and
// that spot cannot be had, so it does not try spot alone again.
func TestContinuedRunKeepsItsOptionsAndWhatItLearnt(t *testing.T) {
	t.Parallel()
	// Spot is over quota for good; on-demand is out of stock for now.
	f := &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA, fakecloud.OdA}, Fail: map[capacity.Market]capacity.Class{capacity.Spot: capacity.Quota, capacity.OnDemand: capacity.NoCapacity}}
	env := newEnv(t, f, func(o *workload.RunOptions) { o.MaxWaits = 3 })
	js := job(spec.TierDeadline)
	env.ExecuteWorkflow(workflows.TrainingRunName, js)
	carry := continuedState(t, env)
	if carry.Options == nil || carry.Options.MaxWaits != 3 || !carry.Spot.Impossible {
		t.Fatalf("carried options %+v, spot %+v; want MaxWaits 3 and spot known impossible", carry.Options, carry.Spot)
	}
	if len(f.Requests[0].Offerings) != 1 {
		t.Fatalf("first try %v; want spot alone, waiting for it", f.Requests[0].Offerings)
	}

	// The next run, on a worker whose options differ.
	f2 := &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA, fakecloud.OdA}, Fail: f.Fail}
	env2 := newEnv(t, f2)
	env2.ExecuteWorkflow(workflows.TrainingRunName, js, carry)
	again := continuedState(t, env2)
	if len(f2.Requests) != 3 {
		t.Errorf("next run tried %d times before continuing; want the recorded 3, not the worker's %d", len(f2.Requests), workload.DefaultRunOptions().MaxWaits)
	}
	for _, r := range f2.Requests {
		if len(r.Offerings) != 2 {
			t.Errorf("next run tried %v; want spot and on-demand together: spot is known impossible", r.Offerings)
		}
	}
	if again.Attempts != carry.Attempts+3 {
		t.Errorf("attempts %d after %d and three more tries; the numbering must go on", again.Attempts, carry.Attempts)
	}
}

// continuedState is the state a run handed on when it continued as new.
func continuedState(t *testing.T, env *testsuite.TestWorkflowEnvironment) *RunState {
	t.Helper()
	_, err := result(t, env)
	var next *workflow.ContinueAsNewError
	if !errors.As(err, &next) {
		t.Fatalf("run ended with %v; want it to continue as new", err)
	}
	var js spec.JobSpec
	var carry *RunState
	if err := converter.GetDefaultDataConverter().FromPayloads(next.Input, &js, &carry); err != nil {
		t.Fatal(err)
	}
	return carry
}

func TestPhaseTransitions(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		from, to workflows.State
		ok       bool
	}{
		"a new run is queued":                    {workflows.StatePending, workflows.StateQueued, true},
		"acquired, it trains":                    {workflows.StateAcquiring, workflows.StateRunning, true},
		"preempted, it acquires a replacement":   {workflows.StatePreempted, workflows.StateAcquiring, true},
		"yielding, it is queued again":           {workflows.StateRunning, workflows.StateQueued, true},
		"staying put is no move":                 {workflows.StateRunning, workflows.StateRunning, true},
		"any phase may end":                      {workflows.StateWaiting, workflows.StateCancelled, true},
		"no training without an instance":        {workflows.StateQueued, workflows.StateRunning, false},
		"no preemption of what is not running":   {workflows.StateWaiting, workflows.StatePreempted, false},
		"a paused run resumes by acquiring":      {workflows.StatePaused, workflows.StateRunning, false},
		"an ended run stays ended":               {workflows.StateCompleted, workflows.StateAcquiring, false},
		"an ended run does not end a second way": {workflows.StateFailed, workflows.StateCompleted, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if err := checkTransition(tc.from, tc.to); (err == nil) != tc.ok {
				t.Errorf("checkTransition(%s, %s) = %v; want allowed %v", tc.from, tc.to, err, tc.ok)
			}
		})
	}
}

// A state handed on by a run of the workflow before its pool place and
// recovery were explicit reads as the same place.
func TestStateCarriedByEarlierRuns(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		carried  string
		place    workload.Place
		recovers bool
	}{
		"queued":           {`{"attempt":4,"in_pool":true,"requested":true}`, workload.PlaceQueued, false},
		"held in queue":    {`{"attempt":4,"in_pool":true,"requested":true,"held_in_queue":true}`, workload.PlaceHeld, false},
		"granted":          {`{"attempt":4,"in_pool":true,"requested":true,"grant":{"layer":"base","node":"n1"}}`, workload.PlaceGranted, false},
		"left, recovering": {`{"attempt":4,"in_pool":true,"recovering":true}`, workload.PlaceLeft, true},
		"no pool":          {`{"attempt":4}`, "", false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var s RunState
			if err := json.Unmarshal([]byte(tc.carried), &s); err != nil {
				t.Fatal(err)
			}
			place := workload.Place("")
			if s.Pool != nil {
				place = s.Pool.Place
			}
			if s.Attempts != 4 || place != tc.place || (s.Recovery != nil) != tc.recovers {
				t.Errorf("read attempts %d, place %q, recovery %v; want 4, %q, recovering %v", s.Attempts, place, s.Recovery, tc.place, tc.recovers)
			}
		})
	}
}

// A run carried before RunRecord carried its whole status: what the run
// decides with is read back, and the fields derived when status is asked
// for (cost, attempt, instance, nodes, market) are dropped.
func TestStatusCarriedWholeByEarlierRuns(t *testing.T) {
	t.Parallel()
	carried := `{"attempts":3,"status":{"id":"job-1","state":"running","priority":70,"step":42,"preemptions":2,
		"failures":[{"class":"instance-lost","offering":"a/b/c/spot","message":"gone"}],"restarts":{"trainer":1,"node-lost":1},
		"budget_usd":5,"cost_usd":1.5,"attempt":3,"paused":true,"instance":{"id":"i-1"},"nodes_asked":2,"cost":{},"ledger":{},
		"last_checkpoint":{"step":40,"url":"file:///c/40"},
		"admission":{"queued":true,"layer":"base","node":"n1","yields":2,"last_yield":{"reason":"priority","at_step":30}}}}`
	var s RunState
	if err := json.Unmarshal([]byte(carried), &s); err != nil {
		t.Fatal(err)
	}
	if s.ID != "job-1" || s.State != workflows.StateRunning || s.Priority != 70 || s.Step != 42 || s.Preemptions != 2 || len(s.Failures) != 1 ||
		!maps.Equal(s.Restarts, (workload.Restarts{capacity.TrainerFault: 1, capacity.NodeLost: 1})) || s.BudgetUSD != 5 || s.LastCheckpoint == nil || s.LastCheckpoint.Step != 40 || s.Attempts != 3 {
		t.Errorf("read %+v; want the carried record", s.RunRecord)
	}
	if y := s.PoolYields; y == nil || y.Yields != 2 || y.LastYield == nil || y.LastYield.AtStep != 30 {
		t.Errorf("read yields %+v; want the 2 the carried admission counted", y)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, derived := range []string{"cost_usd", `"attempt"`, `"paused"`, `"instance"`, `"nodes_asked"`, `"cost"`, `"queued"`, `"layer"`} {
		if strings.Contains(string(b), derived) {
			t.Errorf("carried state %s holds %s, which status derives", b, derived)
		}
	}
}

// Status is the record and what is derived from the rest of the state:
// its JSON keeps every name clients read (docs/contracts.md), once each,
// and the pool's place it shows is the derived one, not the yields the
// record carries under the same name.
func TestStatusKeepsItsNames(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	st := Status{
		RunRecord: RunRecord{BudgetUSD: 1, ModelDigest: "d", StoreURL: "mem://", Record: workload.Record{LastPreemption: &workload.PreemptionInfo{}, LastRecovery: &workload.RecoveryInfo{}, PoolYields: &workload.PoolYields{Yields: 2}, StockOuts: &workload.StockOuts{}, WaitingUntil: &now, WaitingOn: "no-capacity"}},
		Nodes:     []NodeStatus{{}}, NodesAsked: 2, NodesTraining: 2, Market: &workload.MarketStatus{},
		Admission: &workload.AdmissionStatus{Queued: true, Yields: 2}, Estimate: &estimate.Submitted{},
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := []string{"id", "team", "tier", "state", "priority", "paused", "step", "total_steps", "last_checkpoint", "instance",
		"preemptions", "recoveries", "cost_usd", "lost_work_seconds", "failures", "attempt", "restarts", "nodes",
		"node_replacements", "nodes_asked", "nodes_training", "budget_usd", "changeovers", "checkpoint_interval_seconds",
		"started_at", "last_preemption", "last_recovery", "model_digest", "cost", "ledger", "market", "admission",
		"store_url", "stock_outs", "waiting_until", "waiting_on", "estimate"}
	if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, slices.Sorted(slices.Values(want))) {
		t.Errorf("status keys %v; want %v", keys, slices.Sorted(slices.Values(want)))
	}
	var a workload.AdmissionStatus
	if err := json.Unmarshal(got["admission"], &a); err != nil || !a.Queued || a.Yields != 2 {
		t.Errorf("admission %s; want the derived place (queued, 2 yields)", got["admission"])
	}
	var rec RunRecord
	if err := json.Unmarshal(b, &rec); err != nil || rec.PoolYields == nil || rec.PoolYields.Yields != 2 {
		t.Errorf("a status read as a record: yields %+v; want 2", rec.PoolYields)
	}
}
