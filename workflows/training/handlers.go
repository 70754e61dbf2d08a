package training

import (
	"maps"

	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/admission"
	"refuel/workflows"
	"refuel/workflows/workload"
)

// registerHandlers wires the run's external contract: pause and resume
// signals, the set-priority update, the status query, and the signals
// its node agent and the capacity pool send.
func (r *run) registerHandlers(ctx workflow.Context) error {
	if err := workflow.SetQueryHandlerWithOptions(ctx, workflows.QueryStatus, func() (Status, error) {
		return r.snapshot(ctx), nil
	}, workflow.QueryHandlerOptions{Description: workflows.HandlerDescriptions[workflows.QueryStatus]}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, workflows.UpdatePriority, r.setPriority,
		workflow.UpdateHandlerOptions{Validator: workload.ValidatePriority, Description: workflows.HandlerDescriptions[workflows.UpdatePriority]},
	); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, workflows.UpdateBudget, r.setBudget,
		workflow.UpdateHandlerOptions{Validator: workload.ValidateBudget, Description: workflows.HandlerDescriptions[workflows.UpdateBudget]},
	); err != nil {
		return err
	}
	r.signals = []workload.SignalHandler{
		workload.OnSignal(ctx, workflows.SignalPause, func(ctx workflow.Context, c workflow.ReceiveChannel) {
			c.Receive(ctx, nil)
			r.pause()
		}),
		workload.OnSignal(ctx, workflows.SignalResume, func(ctx workflow.Context, c workflow.ReceiveChannel) {
			c.Receive(ctx, nil)
			r.Paused = false
		}),
		workload.OnSignalOf(ctx, workflows.SignalProgress, func(ctx workflow.Context, p activities.Progress) {
			r.OnProgress(ctx, p)
		}),
		workload.OnSignalOf(ctx, workflows.SignalCapacityGranted, func(ctx workflow.Context, a admission.Allocation) {
			r.Seat().Granted(a)
		}),
		workload.OnSignalOf(ctx, workflows.SignalYield, func(ctx workflow.Context, y workflows.YieldRequest) {
			r.Seat().Yield(y, r.finished)
		}),
		workload.OnSignalOf(ctx, workflows.SignalInstanceTaken, func(_ workflow.Context, t workflows.InstanceTaken) {
			r.Taken.Note(t)
		}),
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			sel := workflow.NewSelector(ctx)
			workload.AddSignals(ctx, sel, r.signals)
			sel.Select(ctx)
			// What grows a training run's history is what it is told: the
			// signal just taken is in the state the run would hand on.
			if a := r.Attempt; a != nil && a.MayContinue && r.HistoryFull(ctx) {
				r.HandOn = true
			}
			r.ShowDetails(ctx)
		}
	})
	return nil
}

// setPriority moves a queued run in the pool's queue at once, and
// changes what may preempt a running one.
func (r *run) setPriority(ctx workflow.Context, p int) (int, error) {
	r.Priority = p
	r.ShowDetails(ctx)
	r.Seat().CurrentPriority(ctx, p)
	return p, workflow.UpsertTypedSearchAttributes(ctx, workflows.AttrPriority.ValueSet(int64(p)))
}

// pause asks the trainer to checkpoint and stop; the run then gives its
// instance back and waits, spending nothing, until resumed.
func (r *run) pause() {
	if r.Paused || r.finished {
		return
	}
	r.Paused = true
	if r.Attempt != nil {
		r.Attempt.Stop()
	}
}

// snapshot is the run's status, built from its record with what is
// derived brought up to now: the status query's answer, and the result.
func (r *run) snapshot(ctx workflow.Context) Status {
	s := Status{RunRecord: r.RunRecord}
	s.Paused = r.Paused
	s.Attempt = r.Attempts
	s.Instance = nil
	if r.Lease != nil {
		s.Instance = r.Lease.Ref()
	}
	s.Nodes = r.nodeStatus()
	if r.Nodes() > 1 {
		s.NodesAsked, s.NodesTraining = r.Nodes(), len(r.Gang())
	}
	now := workflow.Now(ctx)
	s.CostUSD = r.Ledger.CostUSD(now)
	s.Cost = r.Ledger.Breakdown(now)
	s.Ledger = r.Ledger
	s.Failures = append([]workload.Failure{}, r.Failures...) // [] rather than null for clients
	s.Restarts = maps.Clone(r.Restarts)
	s.Market, _ = r.Market.Status()
	s.Admission = r.Seat().Admission()
	s.Estimate = r.submittedEstimate(ctx, s.CostUSD)
	return s
}

// OnHold reports whether the operator holds the run.
func (r *run) OnHold() bool { return r.Paused }

// Ending: a run ends by its own loop, or by cancellation.
func (r *run) Ending() bool { return false }

// CurrentPriority is the run's priority now.
func (r *run) CurrentPriority() int { return r.Priority }
