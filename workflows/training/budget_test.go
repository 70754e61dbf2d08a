package training

import (
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"refuel/activities"
	"refuel/pkg/capacity"
	"refuel/pkg/spec"
	"refuel/workflows"
	"refuel/workflows/internal/fakecloud"
	"refuel/workflows/workload"
)

// A run that spends its budget checkpoints, gives its instance back and
// waits over budget, spending nothing; raising the budget resumes it.
func TestBudgetStopsTheRunUntilRaised(t *testing.T) {
	t.Parallel()
	// At $1 an hour a budget of $0.0001 lasts 0.36 s.
	f := &fakecloud.Cloud{Offerings: []capacity.Offering{fakecloud.SpotA}, Trainings: []activities.TrainingOutcome{"block"}}
	// Heartbeats, throttled to most of their timeout, carry the stop.
	env := newEnv(t, f, func(o *workload.RunOptions) { o.HeartbeatTimeout = 2 * time.Second })
	js := job(spec.TierFlexible)
	js.BudgetUSD = 0.0001
	var over Status
	var rejected, raised error
	env.RegisterDelayedCallback(func() {
		over = queryStatus(t, env)
		env.UpdateWorkflow(workflows.UpdateBudget, "bad", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { rejected = err }, OnAccept: func() {}, OnComplete: func(any, error) {},
		}, -1.0)
		env.UpdateWorkflow(workflows.UpdateBudget, "raise", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { raised = err }, OnAccept: func() {}, OnComplete: func(any, error) {},
		}, 1.0)
	}, time.Hour)
	env.ExecuteWorkflow(workflows.TrainingRunName, js)
	st, err := result(t, env)
	if err != nil {
		t.Fatal(err)
	}
	if over.State != workflows.StateOverBudget || over.Instance != nil {
		t.Fatalf("an hour in: state %s, instance %v; want over budget, holding nothing", over.State, over.Instance)
	}
	if spent := over.CostUSD - js.BudgetUSD; spent > fakecloud.SpotA.PricePerHour/60 {
		t.Errorf("spent $%.6f over the budget; want at most a minute's price ($%.6f)", spent, fakecloud.SpotA.PricePerHour/60)
	}
	if got := f.ReleasedReasons(); len(got) != 2 || got[0] != activities.ReleaseOverBudget {
		t.Errorf("released %v; want over-budget, then completed", got)
	}
	if rejected == nil || !strings.Contains(rejected.Error(), "0 or more") {
		t.Errorf("a budget of -1 was not refused with a fix: %v", rejected)
	}
	if raised != nil || st.State != workflows.StateCompleted || st.BudgetUSD != 1 {
		t.Errorf("after raising the budget: %v, state %s, budget %v; want completed under $1", raised, st.State, st.BudgetUSD)
	}
}
