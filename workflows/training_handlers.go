package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/internal/telemetry"
	"refuel/pkg/admission"
	"refuel/pkg/policy"
	"refuel/pkg/spec"
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
			r.onGranted(a)
		}),
		onSignalOf(ctx, SignalYield, func(ctx workflow.Context, y YieldRequest) {
			r.onYield(y)
		}),
		onSignalOf(ctx, SignalInstanceTaken, func(_ workflow.Context, t InstanceTaken) {
			r.onTaken(t)
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

// validatePriority rejects a bad priority before anything is written to
// the run's history.
func validatePriority(_ workflow.Context, p int) error {
	if p < 0 || p > spec.MaxPriority {
		return fmt.Errorf("priority %d is out of range: use an integer from 0 (lowest) to %d (highest)", p, spec.MaxPriority)
	}
	return nil
}

// setPriority moves a queued run in the pool's queue at once, and
// changes what may preempt a running one.
func (r *run) setPriority(ctx workflow.Context, p int) (int, error) {
	r.Priority = p
	r.showDetails(ctx)
	if r.Pool != nil && r.Pool.Place != PlaceLeft {
		r.tellPool(ctx, SignalPoolPriority, PoolPriority{ID: r.id, Priority: p})
	}
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

// onProgress folds a node agent's report into status. Reports from
// another attempt (a late signal from a lost instance) are ignored.
func (r *run) onProgress(ctx workflow.Context, p activities.Progress) {
	// A gang's other ranks report too: the run follows rank 0.
	a := r.attempt
	if a == nil || p.Attempt != a.in.Attempt || p.InstanceID != "" && p.InstanceID != a.lease.Instance.ID {
		return
	}
	a.heard = true
	var c *activities.CheckpointRef
	if p.Kind == activities.ProgressCheckpoint {
		c = p.Checkpoint
	}
	r.foldProgress(p.Step, p.TotalSteps, c)
	switch p.Kind {
	case activities.ProgressCheckpoint:
		// A report may tell several checkpoints together: the latest, and
		// what their uploads took in all.
		h, n := workflow.GetMetricsHandler(ctx), max(1, p.Checkpoints)
		if c := p.Checkpoint; c != nil && c.WriteSeconds > 0 {
			took := time.Duration(c.WriteSeconds * float64(time.Second))
			a.lease.Log = a.lease.Log.Add(policy.CheckpointLog{Writes: n, WriteTime: took})
			for range n {
				telemetry.ObserveCheckpointUpload(h, a.lease.Offering(), took/time.Duration(n))
			}
		}
		h.Counter(telemetry.CheckpointsTotal).Inc(int64(n))
	case activities.ProgressRestored:
		if r.Recovery != nil && r.LastRecovery != nil {
			r.recovered(ctx, p.Step, workflow.Now(ctx))
		}
	case activities.ProgressNotice:
		workflow.GetLogger(ctx).Info("interruption notice", "instance", p.InstanceID, "step", p.Step)
	}
}

// snapshot is the run's status, built from its record with what is
// derived brought up to now: the status query's answer, and the result.
func (r *run) snapshot(ctx workflow.Context) Status {
	s := r.RunRecord.status()
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
	if m, ok := r.market.(*clockedMarket); ok {
		s.Market = m.marketStatus()
	} else if r.Spot.Why != "" {
		s.Market = &MarketStatus{Clock: ClockWall, Policy: string(policy.Refuel), Why: r.Spot.Why, DecidedAt: r.Spot.DecidedAt}
	}
	s.Admission = r.admissionStatus()
	return s
}
