package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/admission"
	"refuel/pkg/spec"
)

// registerHandlers wires the run's external contract: pause and resume
// signals, the set-priority update, the status query, and the progress
// signal its node agent sends.
func (r *run) registerHandlers(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (Status, error) {
		return r.snapshot(ctx), nil
	}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdatePriority,
		func(ctx workflow.Context, p int) (int, error) {
			r.status.Priority = p
			if r.inPool && r.requested {
				// A queued run moves in the queue at once; a running one
				// changes what may preempt it.
				r.tellPool(ctx, SignalPoolPriority, PoolPriority{ID: r.id, Priority: p})
			}
			return p, workflow.UpsertTypedSearchAttributes(ctx, AttrPriority.ValueSet(int64(p)))
		},
		workflow.UpdateHandlerOptions{Validator: validatePriority},
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
			r.paused = false
		}),
		onSignalOf(ctx, SignalProgress, func(ctx workflow.Context, p activities.Progress) {
			r.onProgress(ctx, p)
		}),
		onSignalOf(ctx, SignalCapacityGranted, func(ctx workflow.Context, a admission.Allocation) {
			r.onGranted(a)
		}),
		onSignalOf(ctx, SignalYield, func(ctx workflow.Context, y YieldRequest) {
			r.onYield(y)
		}),
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			sel := workflow.NewSelector(ctx)
			addSignals(ctx, sel, r.signals)
			sel.Select(ctx)
		}
	})
	return nil
}

// validatePriority rejects a bad priority before anything is written to
// the run's history.
func validatePriority(_ workflow.Context, p int) error {
	if p < 0 || p > spec.MaxPriority {
		return fmt.Errorf("priority %d is out of range: use an integer from 0 (lowest) to %d (highest)", p, spec.MaxPriority)
	}
	return nil
}

// pause asks the trainer to checkpoint and stop; the run then gives its
// instance back and waits, spending nothing, until resumed.
func (r *run) pause() {
	if r.paused || r.done {
		return
	}
	r.paused = true
	if r.stopTraining != nil {
		r.stopTraining()
	}
}

// onProgress folds a node agent's report into status. Reports from an
// earlier attempt (a late signal from a lost instance) are ignored.
func (r *run) onProgress(ctx workflow.Context, p activities.Progress) {
	if p.Attempt != r.trainingAttempt {
		return
	}
	r.status.Step = max(r.status.Step, p.Step)
	if p.TotalSteps > 0 {
		r.status.TotalSteps = p.TotalSteps
	}
	switch p.Kind {
	case activities.ProgressCheckpoint:
		if c := p.Checkpoint; c != nil && (r.status.LastCheckpoint == nil || c.Step >= r.status.LastCheckpoint.Step) {
			r.status.LastCheckpoint = c
		}
		if c := p.Checkpoint; c != nil && c.WriteSeconds > 0 {
			r.attemptLog.Wrote(time.Duration(c.WriteSeconds * float64(time.Second)))
		}
		workflow.GetMetricsHandler(ctx).Counter("refuel_checkpoints_total").Inc(1)
	case activities.ProgressRestored:
		if r.recovering && r.status.LastRecovery != nil {
			r.markRecovered(ctx, p.Step, workflow.Now(ctx))
		}
	case activities.ProgressNotice:
		workflow.GetLogger(ctx).Info("interruption notice", "instance", p.InstanceID, "step", p.Step)
	}
}

// markRecovered records that training resumed on a replacement instance.
func (r *run) markRecovered(ctx workflow.Context, fromStep int64, at time.Time) {
	r.recovering = false
	r.status.Recoveries++
	r.status.LastRecovery.ResumedAt = at
	r.status.LastRecovery.ResumedFromStep = fromStep
	workflow.GetMetricsHandler(ctx).Counter("refuel_recoveries_total").Inc(1)
}
