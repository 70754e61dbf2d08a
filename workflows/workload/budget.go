package workload

import (
	"fmt"
	"math"
	"time"

	"go.temporal.io/sdk/workflow"
)

// A workload with a budget (a JobSpec's or DevSpec's budget_usd) that
// reaches it stops its attempt at a checkpoint, gives its instance back
// and waits, spending nothing, until its budget is raised.

// StopWhy is why a workload must stop its attempt and hold nothing now
// (host.MustStop).
type StopWhy string

const (
	GoOn       StopWhy = ""
	StopPause  StopWhy = "pause"  // the operator's hold: a run's pause, an environment's stop
	StopYield  StopWhy = "yield"  // the pool asked for the grant back
	StopBudget StopWhy = "budget" // the budget is spent
)

// OverBudget reports whether the workload has spent its budget.
func (w *Workload) OverBudget(now time.Time) bool {
	return w.Spec.BudgetUSD > 0 && w.Held.Ledger.CostUSD(now) >= w.Spec.BudgetUSD
}

// WatchBudget stops the attempt at a checkpoint when the workload's
// spending reaches its budget. It wakes when the budget would be spent
// at the prices of what the workload holds, and when the budget changes.
func (w *Workload) WatchBudget(ctx workflow.Context, a *Attempt) {
	if w.Spec.BudgetUSD <= 0 || workflow.GetVersion(ctx, budgetVersion, workflow.DefaultVersion, 1) < 1 {
		return
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		for w.Attempt == a {
			now := workflow.Now(ctx)
			if w.OverBudget(now) {
				workflow.GetLogger(ctx).Info("budget spent: stopping at a checkpoint", "budget_usd", w.Spec.BudgetUSD)
				a.Stop()
				return
			}
			budget := w.Spec.BudgetUSD
			var wait time.Duration
			if perHour := w.HoldingPricePerHour(); perHour > 0 {
				wait = time.Duration((budget - w.Held.Ledger.CostUSD(now)) / perHour * float64(time.Hour))
			}
			changed := func() bool { return w.Attempt != a || w.Spec.BudgetUSD != budget }
			if wait <= 0 {
				if workflow.Await(ctx, changed) != nil {
					return
				}
				continue
			}
			if _, err := WaitFor(ctx, max(wait, time.Second), "budget of "+Dollars(budget)+" spent by then", changed); err != nil {
				return
			}
		}
	})
}

// ValidateBudget rejects a budget that is not a sum of money before
// anything is written to the run's history.
func ValidateBudget(_ workflow.Context, usd float64) error {
	if usd < 0 || math.IsNaN(usd) || math.IsInf(usd, 0) {
		return fmt.Errorf("budget %v is not a sum of money: give USD 0 or more (0 for no budget)", usd)
	}
	return nil
}
