package training

import (
	"slices"

	"refuel/workflows"
	"refuel/workflows/workload"

	"go.temporal.io/sdk/workflow"
)

// A run with a budget (JobSpec budget_usd) that reaches it checkpoints,
// gives its instance back and waits, spending nothing, in state
// over-budget until the set-budget update raises it.

// MustStop is the one question "must the run stop now, and why?": a
// pause, a yield the pool asked for, or a spent budget, named in that
// order. A place that deliberately heeds only some of them says which it
// leaves out (except): a wait that holds nothing spends no budget, and
// the pool's yield concerns only a run that has a grant.
func (r *run) MustStop(ctx workflow.Context, except ...workload.StopWhy) workload.StopWhy {
	heeds := func(w workload.StopWhy) bool { return !slices.Contains(except, w) }
	switch {
	case r.Paused && heeds(workload.StopPause):
		return workload.StopPause
	case r.Seat().YieldAsked() && heeds(workload.StopYield):
		return workload.StopYield
	case heeds(workload.StopBudget) && r.OverBudget(workflow.Now(ctx)):
		return workload.StopBudget
	}
	return workload.GoOn
}

// HoldWhilePaused blocks, holding nothing, while the run is paused or
// has spent its budget (which, holding nothing, it spends no more of).
func (r *run) HoldWhilePaused(ctx workflow.Context) error {
	for {
		switch r.MustStop(ctx, workload.StopYield) {
		case workload.StopPause:
			r.Seat().Leave(ctx) // a paused run holds no capacity; it asks again on resume
			r.Enter(ctx, workflows.StatePaused)
			if err := workflow.Await(ctx, func() bool { return !r.Paused }); err != nil {
				return err
			}
		case workload.StopBudget:
			r.Seat().Leave(ctx)
			r.Enter(ctx, workflows.StateOverBudget)
			_ = workflow.UpsertTypedSearchAttributes(ctx, workflows.AttrCostUSD.ValueSet(r.Ledger.CostUSD(workflow.Now(ctx))))
			if err := workflow.Await(ctx, func() bool { return r.Paused || !r.OverBudget(workflow.Now(ctx)) }); err != nil {
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
	r.ShowDetails(ctx)
	return usd, nil
}
