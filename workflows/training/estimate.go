package training

import (
	"fmt"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"refuel/pkg/estimate"
	"refuel/workflows"
)

// MemoEstimate is the memo field a run's estimate at submit is kept in
// (jobs.WithEstimate). The memo is in the run's start event and carried
// by every continue-as-new, so reading it issues no command and a replay
// reads what the run read.
const MemoEstimate = "refuel-estimate"

// submittedEstimate is what was estimated for the run when it was
// submitted, and, once it has ended, how it turned out against that; nil
// when none was kept or it cannot be read (a memo sealed by a codec the
// workflow does not hold).
func (r *run) submittedEstimate(ctx workflow.Context, costUSD float64) *estimate.Submitted {
	memo := workflow.GetInfo(ctx).Memo
	if memo == nil || memo.Fields[MemoEstimate] == nil {
		return nil
	}
	var e estimate.Submitted
	if err := converter.GetDefaultDataConverter().FromPayload(memo.Fields[MemoEstimate], &e); err != nil {
		return nil
	}
	switch r.RunRecord.State {
	case workflows.StateCompleted, workflows.StateFailed, workflows.StateCancelled:
		o := e.Against(costUSD, workflow.Now(ctx))
		e.Outcome = &o
	}
	return &e
}

// estimateDetails is the run's estimate at submit as a line of its
// details, beside what it cost and when it finished once it has ended.
func (r *run) estimateDetails(ctx workflow.Context) string {
	e := r.submittedEstimate(ctx, r.Ledger.CostUSD(workflow.Now(ctx)))
	if e == nil {
		return ""
	}
	line := "  \nestimated at submit: " + e.Line()
	if o := e.Outcome; o != nil {
		within := "outside"
		if o.CostWithin {
			within = "within"
		}
		line += fmt.Sprintf(" · it cost $%.2f (%s p10..p90) and ended %.1fh after submit", o.CostUSD, within, o.FinishHours)
	}
	return line
}
