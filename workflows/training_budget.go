package workflows

import (
	"fmt"
	"math"
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"
)

// A run with a budget (JobSpec budget_usd) that reaches it checkpoints,
// gives its instance back and waits, spending nothing, in state
// over-budget until the set-budget update raises it.

// overBudget reports whether the run has spent its budget.
func (r *run) overBudget(now time.Time) bool {
	return r.spec.BudgetUSD > 0 && r.Ledger.CostUSD(now) >= r.spec.BudgetUSD
}

// stopWhy is why a run must stop training and hold nothing now.
type stopWhy string

const (
	goOn       stopWhy = ""
	stopPause  stopWhy = "pause"  // the pause update
	stopYield  stopWhy = "yield"  // the pool asked for the run's grant back
	stopBudget stopWhy = "budget" // the run spent its budget
)

// mustStop is the one question "must the run stop now, and why?": a
// pause, a yield the pool asked for, or a spent budget, named in that
// order. A place that deliberately heeds only some of them says which it
// leaves out (except): a wait that holds nothing spends no budget, and
// the pool's yield concerns only a run that has a grant.
func (r *run) mustStop(ctx workflow.Context, except ...stopWhy) stopWhy {
	heeds := func(w stopWhy) bool { return !slices.Contains(except, w) }
	switch {
	case r.Paused && heeds(stopPause):
		return stopPause
	case r.seat().yieldAsked() && heeds(stopYield):
		return stopYield
	case heeds(stopBudget) && r.overBudget(workflow.Now(ctx)):
		return stopBudget
	}
	return goOn
}

// holdWhilePaused blocks, holding nothing, while the run is paused or
// has spent its budget (which, holding nothing, it spends no more of).
func (r *run) holdWhilePaused(ctx workflow.Context) error {
	for {
		switch r.mustStop(ctx, stopYield) {
		case stopPause:
			r.seat().leave(ctx) // a paused run holds no capacity; it asks again on resume
			r.enter(ctx, StatePaused)
			if err := workflow.Await(ctx, func() bool { return !r.Paused }); err != nil {
				return err
			}
		case stopBudget:
			r.seat().leave(ctx)
			r.enter(ctx, StateOverBudget)
			_ = workflow.UpsertTypedSearchAttributes(ctx, AttrCostUSD.ValueSet(r.Ledger.CostUSD(workflow.Now(ctx))))
			if err := workflow.Await(ctx, func() bool { return r.Paused || !r.overBudget(workflow.Now(ctx)) }); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

// validateBudget rejects a budget that is not a sum of money before
// anything is written to the run's history.
func validateBudget(_ workflow.Context, usd float64) error {
	if usd < 0 || math.IsNaN(usd) || math.IsInf(usd, 0) {
		return fmt.Errorf("budget %v is not a sum of money: give USD 0 or more (0 for no budget)", usd)
	}
	return nil
}

// setBudget changes the run's budget: raised above what it has spent, a
// run waiting over budget goes on; lowered below it, a training run
// stops at a checkpoint.
func (r *run) setBudget(ctx workflow.Context, usd float64) (float64, error) {
	r.spec.BudgetUSD = usd
	r.BudgetUSD = usd
	r.showDetails(ctx)
	return usd, nil
}

// watchBudget stops the training attempt at a checkpoint when the run's
// spending reaches its budget. It wakes when the budget would be spent
// at the prices of what the run holds, and when the budget changes.
func (r *run) watchBudget(ctx workflow.Context, a *attempt) {
	if r.spec.BudgetUSD <= 0 || workflow.GetVersion(ctx, budgetVersion, workflow.DefaultVersion, 1) < 1 {
		return
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		for r.attempt == a {
			now := workflow.Now(ctx)
			if r.overBudget(now) {
				workflow.GetLogger(ctx).Info("budget spent: stopping at a checkpoint", "budget_usd", r.spec.BudgetUSD)
				a.stop()
				return
			}
			budget := r.spec.BudgetUSD
			var wait time.Duration
			if perHour := r.holdingPricePerHour(); perHour > 0 {
				wait = time.Duration((budget - r.Ledger.CostUSD(now)) / perHour * float64(time.Hour))
			}
			changed := func() bool { return r.attempt != a || r.spec.BudgetUSD != budget }
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
