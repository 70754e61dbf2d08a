package environment

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"refuel/pkg/devenv"
	"refuel/pkg/spec"
	"refuel/workflows"
	"refuel/workflows/workload"
)

// EnvState is a development environment's whole state: what its steps
// read and write, and what it hands on, as it is, when it continues as
// new. Its status is built from it when asked for (snapshot).
type EnvState struct {
	// Options are what the environment started under, recorded in its
	// history.
	Options *workload.RunOptions `json:"options,omitempty"`
	// Holding is what it holds and where it stands with the capacity it
	// runs on, as a training run's; Record what its attempts, losses and
	// recoveries count (its saves are its checkpoints).
	workload.Holding
	workload.Record
	State devenv.State `json:"state"`
	// Reason says why it is in its state; Since is when it entered it.
	Reason string    `json:"reason,omitempty"`
	Since  time.Time `json:"since"`
	// Suspended: stopped by its developer, idle past its timeout, over
	// its budget, or its command ended; it holds nothing until resumed.
	Suspended bool `json:"suspended,omitempty"`
	// Deleting is the delete asked for, once it is.
	Deleting  *devenv.DeleteRequest `json:"deleting,omitempty"`
	Priority  int                   `json:"priority"`
	BudgetUSD float64               `json:"budget_usd,omitempty"`
	// Activity is what is known of its use; Endpoint, Serving and
	// Workspace what its agent last reported.
	Activity  devenv.Activity `json:"activity"`
	Endpoint  string          `json:"endpoint,omitempty"`
	Serving   bool            `json:"serving,omitempty"`
	Workspace string          `json:"workspace,omitempty"`
	// RunningSince is when its command last started, from which
	// max_duration counts.
	RunningSince time.Time `json:"running_since,omitzero"`
	Moves        int       `json:"moves"`
	StartedAt    time.Time `json:"started_at"`
	// HeldUntil is how far the instance time it held is split into
	// active and idle: the ledger books the idle part (account).
	HeldUntil time.Time `json:"held_until,omitzero"`
}

// idleSince is the instance time held since HeldUntil that was idle,
// by the use known now.
func (e *env) idleSince(now time.Time) time.Duration {
	if e.Lease == nil || e.HeldUntil.IsZero() {
		return 0
	}
	_, idle := devenv.SplitHeld(e.HeldUntil, now, e.Activity)
	return idle
}

// account books in the ledger the idle part of the instance time held
// until now, by the use known until now: called before what is known of
// the use changes, and when what is held does.
func (e *env) account(now time.Time) {
	if l := e.Lease; l != nil {
		e.Held.Ledger.AddIdle(l.Instance.ID, e.idleSince(now).Seconds())
	}
	e.HeldUntil = now
}

// setState moves the environment to state s for why, and publishes it as
// RefuelState and in its details.
func (e *env) setState(ctx workflow.Context, s devenv.State, why string) {
	now := workflow.Now(ctx)
	if s != e.State {
		e.State, e.Since = s, now
		e.Attrs.Upsert(ctx, workflows.AttrState.ValueSet(string(s)))
	}
	e.Reason = why
	e.ShowDetails(ctx)
}

// suspend makes the environment hold nothing until it is resumed, for
// why: the attempt under way stops at its final save, and once the
// instance is given back the environment is suspended (awaitResume).
func (e *env) suspend(ctx workflow.Context, why string) {
	e.Suspended, e.Reason = true, why
	e.ShowDetails(ctx)
	if a := e.Attempt; a != nil {
		a.Stop()
	}
}

// budgetWhy says that the environment spent its budget, and how to go on.
func (e *env) budgetWhy(now time.Time) string {
	return fmt.Sprintf("it spent its budget (%s of %s): raise it with `starter budget %s USD`, then `starter dev resume %s`",
		workload.Dollars(e.Held.Ledger.CostUSD(now)), workload.Dollars(e.job.BudgetUSD), e.WorkflowID, e.WorkflowID)
}

// snapshot is the environment's status, built from its state with what
// is derived brought up to now.
func (e *env) snapshot(ctx workflow.Context) devenv.Status {
	now := workflow.Now(ctx)
	open := e.idleSince(now)
	hours := e.Held.Ledger.Hours(now)
	idleHours := (e.Held.Ledger.IdleSeconds + open.Seconds()) / 3600
	idleUSD := e.Held.Ledger.Breakdown(now).IdleUSD + open.Hours()*e.HoldingPricePerHour()
	st := devenv.Status{
		ID: e.WorkflowID, Who: e.who, Team: e.ds.Team, Priority: e.Priority, Tier: string(e.ds.Tier),
		State: e.State, Reason: e.Reason, Since: e.Since, Serving: e.Serving,
		IdleTimeout: spec.Duration(e.ds.Idle()), CostUSD: e.Held.Ledger.CostUSD(now), IdleCostUSD: idleUSD,
		Cost: e.Held.Ledger.Breakdown(now), Ledger: e.Held.Ledger,
		ActiveHours: max(0, hours-idleHours), IdleHours: idleHours, BudgetUSD: e.job.BudgetUSD,
		Moves: e.Moves, Preemptions: e.Preemptions, Failures: []devenv.Failure{}, LostWorkSeconds: e.LostWorkSecs,
		Attempt: e.Held.Attempts, StartedAt: e.StartedAt,
		Workspace: devenv.Workspace{Path: e.Workspace, StoreURL: e.storeURL()},
	}
	if e.State == devenv.StateRunning {
		st.Endpoint = e.Endpoint
		st.IdleSeconds = e.Activity.IdleFor(now).Seconds()
	}
	if last := e.Activity.Last(); !last.IsZero() {
		st.LastActive = &last
	}
	if l := e.Lease; l != nil {
		o := l.Offering()
		st.Instance = &devenv.Instance{ID: l.Instance.ID, Offering: o.Key(), Market: string(o.Market), Zone: o.Zone,
			PricePerHour: o.PricePerHour, Since: l.Since}
		if p := e.Pool; p != nil && p.Grant != nil {
			st.Instance.Layer = string(p.Grant.Layer)
		}
	}
	for _, f := range e.Failures {
		st.Failures = append(st.Failures, devenv.Failure{Class: f.Class, Offering: f.Offering, Message: f.Message, Time: f.Time})
	}
	if c := e.LastCheckpoint; c != nil {
		st.Workspace.LastSave = &devenv.Save{Step: c.Step, Time: c.Time, URL: c.URL, Bytes: c.Bytes}
	}
	return st
}

// ShowDetails keeps what the Web UI shows as the environment's current
// details up to date: who, where, endpoint, idle for how long of how
// long, cost.
func (e *env) ShowDetails(ctx workflow.Context) {
	workflow.SetCurrentDetails(ctx, e.snapshot(ctx).Details())
}
