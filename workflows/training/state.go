package training

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"

	"refuel/pkg/admission"
	"refuel/pkg/capacity"
	"refuel/workflows"
	"refuel/workflows/workload"
)

// RunState is a training run's whole state: what its steps read and
// write, and what it hands on, as it is, when it continues as new.
// Besides it a run keeps only what is under way in this run of the
// workflow (the training attempt's activity, an instance acquired to
// change over to, its signal channels), which the next run takes up
// again from Lease and Training.
type RunState struct {
	// RunRecord is what the run decides with and counts; its State is
	// the run's phase (see transitions). Status is built from it, and
	// from what can be derived (cost, the instance held, the attempt
	// number, a gang's nodes, the market), only when it is asked for
	// (snapshot). It is carried under "status", as runs carried before
	// RunRecord carried the whole Status: a carried Status decodes into
	// it, its derived fields dropped.
	RunRecord `json:"status"`
	// Options are what the run started under, recorded in its history;
	// nil for a run recorded before they were, which uses the worker's.
	Options *workload.RunOptions `json:"options,omitempty"`
	// Holding is what the run holds and where it stands with the
	// capacity it trains on: its leases, its gang, its recovery, its
	// place with the pool.
	workload.Holding
	// Paused is the operator's hold: set by pause, cleared by resume.
	// The run gives its capacity back and waits while it is set.
	Paused bool `json:"paused,omitempty"`
	// Spot is what a deadline run that chooses between spot and
	// on-demand itself has learnt about spot.
	Spot SpotChoice `json:"spot,omitzero"`
}

// RunRecord is the part of a run's status that is state: what the run
// decides with and counts. Status embeds it; its other fields are
// derived when it is built (snapshot).
type RunRecord struct {
	ID       string          `json:"id"`
	Team     string          `json:"team"`
	Tier     string          `json:"tier"`
	State    workflows.State `json:"state"`
	Priority int             `json:"priority"`
	// Record is what the run's attempts, losses and recoveries count.
	workload.Record
	// BudgetUSD is what the run may spend (the spec's budget_usd, as
	// set-budget last changed it); 0 for no budget.
	BudgetUSD float64 `json:"budget_usd,omitempty"`
	// Changeovers counts moves from on-demand back to spot made while
	// training (the market clock's own are in Status.Market).
	Changeovers int `json:"changeovers"`
	// CheckpointIntervalSecs is the interval the current or last attempt
	// checkpoints at: the spec's, or the one "auto" chose.
	CheckpointIntervalSecs float64   `json:"checkpoint_interval_seconds"`
	StartedAt              time.Time `json:"started_at"`
	ModelDigest            string    `json:"model_digest,omitempty"`
	// StoreURL is the store the run's checkpoints and trainer output go
	// to: its spec's checkpoint.url, or the worker's; "" for a run
	// recorded before runs said.
	StoreURL string `json:"store_url,omitempty"`
}

// SpotChoice is what a deadline run on a cloud without a market clock
// learnt about spot.
type SpotChoice struct {
	// Impossible is set when spot failed in a way no wait for stock
	// cures (quota, price, spec mismatch): the run stops waiting for it.
	Impossible bool `json:"impossible,omitempty"`
	// Watch is how the run weighs spot against on-demand, for runs
	// recorded before their options were (see spotWatch).
	Watch *spotWatch `json:"watch,omitempty"`
	// Why is the latest decision between spot and on-demand, in a line a
	// person reads, and DecidedAt when it was made (status.market).
	Why       string    `json:"why,omitempty"`
	DecidedAt time.Time `json:"decided_at,omitzero"`
}

// transitions are the phases a run may move to from each phase. A run
// starts pending and ends completed, failed or cancelled.
var transitions = map[workflows.State][]workflows.State{
	workflows.StatePending:    {workflows.StateQueued, workflows.StateAcquiring, workflows.StatePaused, workflows.StateWaiting, workflows.StateOverBudget},
	workflows.StateQueued:     {workflows.StateAcquiring, workflows.StatePaused, workflows.StateOverBudget},
	workflows.StatePaused:     {workflows.StateQueued, workflows.StateAcquiring, workflows.StateWaiting, workflows.StateOverBudget},
	workflows.StateOverBudget: {workflows.StateQueued, workflows.StateAcquiring, workflows.StatePaused, workflows.StateWaiting},
	workflows.StateAcquiring:  {workflows.StateRunning, workflows.StateWaiting, workflows.StateQueued, workflows.StatePaused, workflows.StateOverBudget},
	workflows.StateWaiting:    {workflows.StateAcquiring, workflows.StateQueued, workflows.StatePaused, workflows.StateOverBudget},
	// A running run is preempted, stops for a pause or a yield, or moves
	// to another market: it holds nothing until it acquires again.
	workflows.StateRunning:   {workflows.StatePreempted, workflows.StatePaused, workflows.StateQueued, workflows.StateAcquiring, workflows.StateWaiting, workflows.StateOverBudget},
	workflows.StatePreempted: {workflows.StateAcquiring, workflows.StateQueued, workflows.StatePaused, workflows.StateWaiting, workflows.StateOverBudget},
}

// terminal are the phases a run ends in; any phase may end the run.
var terminal = []workflows.State{workflows.StateCompleted, workflows.StateFailed, workflows.StateCancelled}

// checkTransition says what is wrong with moving from one phase to
// another, or nil if the run may.
func checkTransition(from, to workflows.State) error {
	if from == to || slices.Contains(terminal, to) && !slices.Contains(terminal, from) {
		return nil
	}
	if slices.Contains(transitions[from], to) {
		return nil
	}
	return fmt.Errorf("a run cannot go from %s to %s", from, to)
}

// UnmarshalJSON reads a state, including one handed on by a run of the
// workflow that kept its pool place and recovery as flags.
func (s *RunState) UnmarshalJSON(data []byte) error {
	type plain RunState
	if err := json.Unmarshal(data, (*plain)(s)); err != nil {
		return err
	}
	var old struct {
		Attempt         int                     `json:"attempt"`
		TrainerFailures int                     `json:"trainer_failures"`
		Recovering      bool                    `json:"recovering"`
		InPool          bool                    `json:"in_pool"`
		Requested       bool                    `json:"requested"`
		HeldInQueue     bool                    `json:"held_in_queue"`
		Grant           *admission.Allocation   `json:"grant"`
		Yield           *workflows.YieldRequest `json:"yield"`
	}
	if err := json.Unmarshal(data, &old); err != nil {
		return err
	}
	if s.Attempts == 0 {
		s.Attempts = old.Attempt
	}
	if s.Restarts[capacity.TrainerFault] == 0 && old.TrainerFailures > 0 {
		s.Restarts.Add(capacity.TrainerFault, old.TrainerFailures)
	}
	if old.Recovering && s.Recovery == nil {
		s.Recovery = &workload.Recovery{}
	}
	if old.InPool && s.Pool == nil {
		p := &workload.PoolPlace{Place: workload.PlaceLeft, Grant: old.Grant, Yield: old.Yield}
		switch {
		case old.Grant != nil && old.Yield != nil:
			p.Place = workload.PlaceYielding
		case old.Grant != nil:
			p.Place = workload.PlaceGranted
		case old.Requested && old.HeldInQueue:
			p.Place = workload.PlaceHeld
		case old.Requested:
			p.Place = workload.PlaceQueued
		}
		s.Pool = p
	}
	return nil
}

// ContinueAsNew ends this run of the workflow and starts the next with
// the same spec and the whole state, once no update is in flight and
// every signal delivered has been taken. Its history starts afresh.
func (r *run) ContinueAsNew(ctx workflow.Context) error {
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	workload.DrainSignals(ctx, r.signals)
	workflow.GetLogger(ctx).Info("continuing as new while waiting for capacity", "waits", r.Waits, "attempts", r.Attempts)
	return workflow.NewContinueAsNewError(ctx, workflows.TrainingRunName, r.spec, &r.RunState)
}
