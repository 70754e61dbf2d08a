package tests

import (
	"context"
	"strings"
	"testing"
	"time"

	"refuel/workflows/training"

	"refuel/jobs"
	"refuel/pkg/capacity"
	"refuel/pkg/cloud/local"
	"refuel/pkg/spec"
	"refuel/workflows"
)

// TestBudgetHoldsEndToEnd: a run whose spending reaches its budget
// checkpoints, gives its instance back and waits over budget, spending
// nothing; `starter budget` raises it and the run completes.
func TestBudgetHoldsEndToEnd(t *testing.T) {
	parallel(t) // a stack of its own; it mostly waits
	_, starter := refuelBinaries(t)
	s := startStack(t, nil)
	ctx := context.Background()
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	js := quickJob("budgeted", spec.TierCritical)
	js.Work = spec.Duration(12 * time.Second)
	// On-demand at $3.06 an hour: $0.002 lasts about 2.4 s.
	js.BudgetUSD = 0.002
	if _, err := jobs.Submit(ctx, s.Client, js); err != nil {
		t.Fatal(err)
	}
	over, err := jobs.WaitFor(wctx, s.Client, js.ID, func(st training.Status) bool { return st.State == workflows.StateOverBudget })
	if err != nil {
		t.Fatal(err)
	}
	if over.Instance != nil || over.LastCheckpoint == nil {
		t.Errorf("over budget holding %v with checkpoint %v; want nothing held and a checkpoint", over.Instance, over.LastCheckpoint)
	}
	if left, _ := s.Cloud.List(ctx, nil); len(left) != 0 {
		t.Errorf("instances running over budget: %v", left)
	}
	price := 0.0
	for _, o := range local.DefaultOfferings() {
		if o.Market == capacity.OnDemand {
			price = max(price, o.PricePerHour)
		}
	}
	if over.CostUSD-js.BudgetUSD > price/60 {
		t.Errorf("spent $%.5f against a budget of $%.5f: more than a minute's price ($%.5f) over", over.CostUSD, js.BudgetUSD, price/60)
	}
	time.Sleep(2 * time.Second)
	if still, _ := jobs.Status(ctx, s.Client, js.ID); still.CostUSD != over.CostUSD {
		t.Errorf("cost went from $%.5f to $%.5f while over budget", over.CostUSD, still.CostUSD)
	}
	// Its status says what it may spend, what it spent, and how to go on.
	if r := runCLI(t, t.TempDir(), starter, "status", js.ID, "--temporal-address", s.Address); r.code != 0 ||
		!strings.Contains(r.stdout, "budget     $0.0020 reached ($") || !strings.Contains(r.stdout, "starter budget "+js.ID+" USD") {
		t.Errorf("starter status over budget: exit %d\n%s\nwant the budget, what was spent and the command that raises it", r.code, r.stdout)
	}
	if r := runCLI(t, t.TempDir(), starter, "budget", js.ID, "NaN", "--temporal-address", s.Address); r.code == 0 || !strings.Contains(r.stderr, "0 or more") {
		t.Errorf("starter budget NaN: exit %d, %q; want refused with a fix", r.code, r.stderr)
	}
	if r := runCLI(t, t.TempDir(), starter, "budget", js.ID, "5", "--temporal-address", s.Address); r.code != 0 {
		t.Fatalf("starter budget 5: exit %d\n%s", r.code, r.stderr)
	}
	done, err := jobs.WaitFor(wctx, s.Client, js.ID, func(st training.Status) bool { return jobs.Ended(st) })
	if err != nil {
		t.Fatal(err)
	}
	if done.State != workflows.StateCompleted || done.BudgetUSD != 5 {
		t.Errorf("after raising the budget: state %s, budget %v; want completed under $5", done.State, done.BudgetUSD)
	}
	recordHistory(t, s.Client, js.ID, "training-run-budget")
}
