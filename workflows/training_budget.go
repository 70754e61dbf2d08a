package workflows

import (
	"slices"

	"go.temporal.io/sdk/workflow"
)

// A run with a budget (JobSpec budget_usd) that reaches it checkpoints,
// gives its instance back and waits, spending nothing, in state
// over-budget until the set-budget update raises it.

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

// setBudget changes the run's budget: raised above what it has spent, a
// run waiting over budget goes on; lowered below it, a training run
// stops at a checkpoint.
func (r *run) setBudget(ctx workflow.Context, usd float64) (float64, error) {
	r.spec.BudgetUSD = usd
	r.BudgetUSD = usd
	r.showDetails(ctx)
	return usd, nil
}
