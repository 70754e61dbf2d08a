package workflows

import (
	"go.temporal.io/sdk/workflow"

	"refuel/pkg/admission"
	"refuel/pkg/capacity"
	"refuel/pkg/cost"
)

// RunCarry is what a TrainingRun hands on to its next run when it
// continues as new. It does so only while it holds no instance (waiting
// for capacity), so there is no attempt in flight to hand on.
type RunCarry struct {
	Status          Status                `json:"status"`
	Ledger          cost.Ledger           `json:"ledger"`
	Offerings       []capacity.Offering   `json:"offerings"`
	AvoidZone       string                `json:"avoid_zone,omitempty"`
	Attempt         int                   `json:"attempt"`
	TrainerFailures int                   `json:"trainer_failures,omitempty"`
	Paused          bool                  `json:"paused,omitempty"`
	Recovering      bool                  `json:"recovering,omitempty"`
	InPool          bool                  `json:"in_pool,omitempty"`
	Requested       bool                  `json:"requested,omitempty"`
	HeldInQueue     bool                  `json:"held_in_queue,omitempty"`
	Grant           *admission.Allocation `json:"grant,omitempty"`
	Yield           *YieldRequest         `json:"yield,omitempty"`
}

// continueAsNew ends this run of the workflow and starts the next with
// the same spec and the run's state, once no update is in flight and
// every signal delivered has been taken. Its history starts afresh.
func (r *run) continueAsNew(ctx workflow.Context) error {
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	drainSignals(ctx, r.signals)
	carry := RunCarry{
		Status: r.status, Ledger: r.ledger, Offerings: r.offerings, AvoidZone: r.avoidZone,
		Attempt: r.attempt, TrainerFailures: r.trainerFailures, Paused: r.paused, Recovering: r.recovering,
		InPool: r.inPool, Requested: r.requested, HeldInQueue: r.heldInQueue, Grant: r.grant, Yield: r.yield,
	}
	workflow.GetLogger(ctx).Info("continuing as new while waiting for capacity", "waits", r.waits, "attempt", r.attempt)
	return workflow.NewContinueAsNewError(ctx, TrainingRunName, r.spec, &carry)
}

// restore takes up a carried state.
func (r *run) restore(c RunCarry) {
	r.status, r.ledger, r.offerings, r.avoidZone = c.Status, c.Ledger, c.Offerings, c.AvoidZone
	r.attempt, r.trainerFailures, r.paused, r.recovering = c.Attempt, c.TrainerFailures, c.Paused, c.Recovering
	r.inPool, r.requested, r.heldInQueue, r.grant, r.yield = c.InPool, c.Requested, c.HeldInQueue, c.Grant, c.Yield
}
