package workflows

import (
	"maps"

	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/admission"
)

// registerHandlers wires the run's external contract: pause and resume
// signals, the set-priority update, the status query, and the signals
// its node agent and the capacity pool send.
func (r *run) registerHandlers(ctx workflow.Context) error {
	if err := workflow.SetQueryHandlerWithOptions(ctx, QueryStatus, func() (Status, error) {
		return r.snapshot(ctx), nil
	}, workflow.QueryHandlerOptions{Description: handlerDescriptions[QueryStatus]}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdatePriority, r.setPriority,
		workflow.UpdateHandlerOptions{Validator: validatePriority, Description: handlerDescriptions[UpdatePriority]},
	); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateBudget, r.setBudget,
		workflow.UpdateHandlerOptions{Validator: validateBudget, Description: handlerDescriptions[UpdateBudget]},
	); err != nil {
		return err
	}
	r.signals = []signalHandler{
		onSignal(ctx, SignalPause, func(ctx workflow.Context, c workflow.ReceiveChannel) {
			c.Receive(ctx, nil)
			r.pause()
		}),
		onSignal(ctx, SignalResume, func(ctx workflow.Context, c workflow.ReceiveChannel) {
			c.Receive(ctx, nil)
			r.Paused = false
		}),
		onSignalOf(ctx, SignalProgress, func(ctx workflow.Context, p activities.Progress) {
			r.onProgress(ctx, p)
		}),
		onSignalOf(ctx, SignalCapacityGranted, func(ctx workflow.Context, a admission.Allocation) {
			r.seat().granted(a)
		}),
		onSignalOf(ctx, SignalYield, func(ctx workflow.Context, y YieldRequest) {
			r.seat().yield(y, r.finished)
		}),
		onSignalOf(ctx, SignalInstanceTaken, func(_ workflow.Context, t InstanceTaken) {
			r.taken.note(t)
		}),
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			sel := workflow.NewSelector(ctx)
			addSignals(ctx, sel, r.signals)
			sel.Select(ctx)
			// What grows a training run's history is what it is told: the
			// signal just taken is in the state the run would hand on.
			if a := r.attempt; a != nil && a.mayContinue && r.historyFull(ctx) {
				r.handOn = true
			}
			r.showDetails(ctx)
		}
	})
	return nil
}

// setPriority moves a queued run in the pool's queue at once, and
// changes what may preempt a running one.
func (r *run) setPriority(ctx workflow.Context, p int) (int, error) {
	r.Priority = p
	r.showDetails(ctx)
	r.seat().priority(ctx, p)
	return p, workflow.UpsertTypedSearchAttributes(ctx, AttrPriority.ValueSet(int64(p)))
}

// pause asks the trainer to checkpoint and stop; the run then gives its
// instance back and waits, spending nothing, until resumed.
func (r *run) pause() {
	if r.Paused || r.finished {
		return
	}
	r.Paused = true
	if r.attempt != nil {
		r.attempt.stop()
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
	if r.nodes() > 1 {
		s.NodesAsked, s.NodesTraining = r.nodes(), len(r.gang())
	}
	now := workflow.Now(ctx)
	s.CostUSD = r.Ledger.CostUSD(now)
	s.Cost = r.Ledger.Breakdown(now)
	s.Ledger = r.Ledger
	s.Failures = append([]Failure{}, r.Failures...) // [] rather than null for clients
	s.Restarts = maps.Clone(r.Restarts)
	s.Market, _ = r.market.status()
	s.Admission = r.seat().admission()
	s.Estimate = r.submittedEstimate(ctx, s.CostUSD)
	return s
}

// paused reports whether the operator holds the run.
func (r *run) paused() bool { return r.Paused }

// ending: a run ends by its own loop, or by cancellation.
func (r *run) ending() bool { return false }

// priority is the run's priority now.
func (r *run) priority() int { return r.Priority }
