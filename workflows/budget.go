package workflows

import (
	"fmt"
	"math"
	"time"

	"go.temporal.io/sdk/workflow"
)

// A workload with a budget (a JobSpec's or DevSpec's budget_usd) that
// reaches it stops its attempt at a checkpoint, gives its instance back
// and waits, spending nothing, until its budget is raised.

// stopWhy is why a workload must stop its attempt and hold nothing now
// (host.mustStop).
type stopWhy string

const (
	goOn       stopWhy = ""
	stopPause  stopWhy = "pause"  // the operator's hold: a run's pause, an environment's stop
	stopYield  stopWhy = "yield"  // the pool asked for the grant back
	stopBudget stopWhy = "budget" // the budget is spent
)

// overBudget reports whether the workload has spent its budget.
func (w *workload) overBudget(now time.Time) bool {
	return w.spec.BudgetUSD > 0 && w.h.Ledger.CostUSD(now) >= w.spec.BudgetUSD
}

// watchBudget stops the attempt at a checkpoint when the workload's
// spending reaches its budget. It wakes when the budget would be spent
// at the prices of what the workload holds, and when the budget changes.
func (w *workload) watchBudget(ctx workflow.Context, a *attempt) {
	if w.spec.BudgetUSD <= 0 || workflow.GetVersion(ctx, budgetVersion, workflow.DefaultVersion, 1) < 1 {
		return
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		for w.attempt == a {
			now := workflow.Now(ctx)
			if w.overBudget(now) {
				workflow.GetLogger(ctx).Info("budget spent: stopping at a checkpoint", "budget_usd", w.spec.BudgetUSD)
				a.stop()
				return
			}
			budget := w.spec.BudgetUSD
			var wait time.Duration
			if perHour := w.holdingPricePerHour(); perHour > 0 {
				wait = time.Duration((budget - w.h.Ledger.CostUSD(now)) / perHour * float64(time.Hour))
			}
			changed := func() bool { return w.attempt != a || w.spec.BudgetUSD != budget }
			if wait <= 0 {
				if workflow.Await(ctx, changed) != nil {
					return
				}
				continue
			}
			if _, err := waitFor(ctx, max(wait, time.Second), "budget of "+dollars(budget)+" spent by then", changed); err != nil {
				return
			}
		}
	})
}

// validateBudget rejects a budget that is not a sum of money before
// anything is written to the run's history.
func validateBudget(_ workflow.Context, usd float64) error {
	if usd < 0 || math.IsNaN(usd) || math.IsInf(usd, 0) {
		return fmt.Errorf("budget %v is not a sum of money: give USD 0 or more (0 for no budget)", usd)
	}
	return nil
}
