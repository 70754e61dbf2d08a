package environment

import (
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/admission"
	"refuel/pkg/devenv"
	"refuel/workflows"
	"refuel/workflows/workload"
)

// An environment is its workload's host: it names the phases every
// workload goes through in its own states, says when the workload must
// stop, and watches each attempt for use and budget.

// Enter maps a workload's phase onto the environment's states: waiting
// for capacity is pending, or moving while it recovers or was moved; a
// started attempt is pending until its endpoint answers (serving); a
// lost instance is a move; a hold is a suspension.
func (e *env) Enter(ctx workflow.Context, s workflows.State) {
	switch s {
	case workflows.StateAcquiring, workflows.StateWaiting, workflows.StateQueued, workflows.StateRunning:
		if e.State == devenv.StateMoving {
			return
		}
		e.setState(ctx, devenv.StatePending, e.Reason)
	case workflows.StatePreempted:
		e.setState(ctx, devenv.StateMoving, e.Reason)
	case workflows.StatePaused, workflows.StateOverBudget:
		e.setState(ctx, devenv.StateSuspended, e.Reason)
	}
}

// MustStop is the environment's stop question: suspended or deleted
// (its hold), asked to yield by the pool, or over its budget, in that
// order; except names what the asking place leaves out.
func (e *env) MustStop(ctx workflow.Context, except ...workload.StopWhy) workload.StopWhy {
	heeds := func(w workload.StopWhy) bool { return !slices.Contains(except, w) }
	switch {
	case e.OnHold() && heeds(workload.StopPause):
		return workload.StopPause
	case e.Seat().YieldAsked() && heeds(workload.StopYield):
		return workload.StopYield
	case heeds(workload.StopBudget) && e.OverBudget(workflow.Now(ctx)):
		return workload.StopBudget
	}
	return workload.GoOn
}

// HoldWhilePaused: the environment's loop holds while it is suspended
// (awaitResume), before it is admitted.
func (e *env) HoldWhilePaused(workflow.Context) error { return nil }

func (e *env) OnHold() bool         { return e.Suspended || e.Deleting != nil }
func (e *env) Ending() bool         { return e.Deleting != nil }
func (e *env) CurrentPriority() int { return e.Priority }

// AttemptStarted watches the attempt's use and its spending; the idle
// clock and the split of the instance's time start with it.
func (e *env) AttemptStarted(ctx workflow.Context, a *workload.Attempt) {
	now := workflow.Now(ctx)
	e.RunningSince, e.HeldUntil = now, now
	e.Activity = devenv.Activity{Since: now, LastTouch: e.Activity.LastTouch}
	e.watchUse(ctx, a)
	e.WatchBudget(ctx, a)
}

// watchUse suspends the environment when it goes unused past its idle
// timeout, or has run max_duration since its command started: the
// command stops, the workspace is saved, the instance goes back. It
// wakes when the use changes.
func (e *env) watchUse(ctx workflow.Context, a *workload.Attempt) {
	workflow.Go(ctx, func(ctx workflow.Context) {
		for e.Attempt == a && !e.OnHold() {
			now := workflow.Now(ctx)
			at, idles := e.Activity.StopAt(e.ds.Idle())
			if idles && !now.Before(at) {
				e.suspend(ctx, "idle for "+e.ds.Idle().String()+" (no connection to its endpoint, no GPU use, no touch): `starter dev resume "+e.WorkflowID+"` starts it again")
				return
			}
			limit := e.RunningSince.Add(e.ds.MaxDuration.D())
			capped := e.ds.MaxDuration > 0
			if capped && !now.Before(limit) {
				e.suspend(ctx, "ran its max_duration of "+e.ds.MaxDuration.String()+": `starter dev resume "+e.WorkflowID+"` starts it again")
				return
			}
			used := e.used
			changed := func() bool { return e.Attempt != a || e.used != used || e.OnHold() }
			var wait time.Duration
			summary := ""
			switch {
			case idles && (!capped || at.Before(limit)):
				wait, summary = at.Sub(now), "stop when idle for "+e.ds.Idle().String()
			case capped:
				wait, summary = limit.Sub(now), "stop at max_duration "+e.ds.MaxDuration.String()
			}
			var err error
			if wait > 0 {
				_, err = workload.WaitFor(ctx, wait, summary, changed)
			} else {
				err = workflow.Await(ctx, changed)
			}
			if err != nil {
				return
			}
		}
	})
}

// OnProgress folds the agent's report in: the record's (restored, a
// workspace save, a notice), and the environment's own (its endpoint,
// whether it serves, its use).
func (e *env) OnProgress(ctx workflow.Context, p activities.Progress) {
	e.Workload.OnProgress(ctx, p)
	a := e.Attempt
	if a == nil || p.Attempt != a.Number() {
		return
	}
	switch p.Kind {
	case activities.ProgressNotice:
		e.setState(ctx, devenv.StateMoving, "an interruption notice: saving the workspace, then moving to other capacity")
	}
	d := p.Dev
	if d == nil {
		return
	}
	e.account(workflow.Now(ctx))
	e.Endpoint, e.Workspace = d.Endpoint, d.Workspace
	since := e.Activity.Since
	e.Activity = d.Activity(e.Activity.LastTouch)
	if e.Activity.Since.IsZero() {
		e.Activity.Since = since
	}
	e.used++
	if d.Serving && !e.Serving && e.State != devenv.StateSuspended {
		e.Serving = true
		e.setState(ctx, devenv.StateRunning, "")
		return
	}
	e.ShowDetails(ctx)
}

// registerHandlers wires the environment's contract: stop, resume,
// touch and delete signals, the set-priority and set-budget updates, the
// status query, and the signals its agent and the pool send.
func (e *env) registerHandlers(ctx workflow.Context) error {
	if err := workflow.SetQueryHandlerWithOptions(ctx, workflows.QueryStatus, func() (devenv.Status, error) {
		return e.snapshot(ctx), nil
	}, workflow.QueryHandlerOptions{Description: workflows.HandlerDescriptions[workflows.QueryStatus]}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, workflows.UpdatePriority, e.setPriority,
		workflow.UpdateHandlerOptions{Validator: workload.ValidatePriority, Description: workflows.HandlerDescriptions[workflows.UpdatePriority]},
	); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, workflows.UpdateBudget, e.setBudget,
		workflow.UpdateHandlerOptions{Validator: workload.ValidateBudget, Description: workflows.HandlerDescriptions[workflows.UpdateBudget]},
	); err != nil {
		return err
	}
	e.signals = []workload.SignalHandler{
		workload.OnSignal(ctx, workflows.SignalStop, func(ctx workflow.Context, c workflow.ReceiveChannel) {
			c.Receive(ctx, nil)
			if !e.Suspended {
				e.suspend(ctx, "stopped by its developer: `starter dev resume "+e.WorkflowID+"` starts it again")
			}
		}),
		workload.OnSignal(ctx, workflows.SignalResume, func(ctx workflow.Context, c workflow.ReceiveChannel) {
			c.Receive(ctx, nil)
			e.Suspended = false
		}),
		workload.OnSignal(ctx, workflows.SignalTouch, func(ctx workflow.Context, c workflow.ReceiveChannel) {
			c.Receive(ctx, nil)
			e.account(workflow.Now(ctx))
			e.Activity.LastTouch = workflow.Now(ctx)
			e.used++
			e.ShowDetails(ctx)
		}),
		workload.OnSignalOf(ctx, workflows.SignalDelete, func(ctx workflow.Context, d devenv.DeleteRequest) {
			if e.Deleting == nil {
				e.Deleting = &d
			}
			if a := e.Attempt; a != nil {
				a.Stop()
			}
		}),
		workload.OnSignalOf(ctx, workflows.SignalProgress, e.OnProgress),
		workload.OnSignalOf(ctx, workflows.SignalCapacityGranted, func(_ workflow.Context, a admission.Allocation) { e.Seat().Granted(a) }),
		workload.OnSignalOf(ctx, workflows.SignalYield, func(_ workflow.Context, y workflows.YieldRequest) { e.Seat().Yield(y, e.Deleting != nil) }),
		workload.OnSignalOf(ctx, workflows.SignalInstanceTaken, func(_ workflow.Context, t workflows.InstanceTaken) { e.Taken.Note(t) }),
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			sel := workflow.NewSelector(ctx)
			workload.AddSignals(ctx, sel, e.signals)
			sel.Select(ctx)
			if e.HistoryFull(ctx) && (e.Attempt == nil || e.Attempt.MayContinue) {
				e.HandOn = true
			}
		}
	})
	return nil
}

// setPriority moves a queued environment in the pool's queue at once,
// and changes what may take its capacity.
func (e *env) setPriority(ctx workflow.Context, p int) (int, error) {
	e.Priority = p
	e.Seat().CurrentPriority(ctx, p)
	e.ShowDetails(ctx)
	return p, workflow.UpsertTypedSearchAttributes(ctx, workflows.AttrPriority.ValueSet(int64(p)))
}

// setBudget changes the environment's budget: lowered below what it
// spent, its command stops at a save; raised, a suspended environment
// may be resumed.
func (e *env) setBudget(ctx workflow.Context, usd float64) (float64, error) {
	e.BudgetUSD, e.job.BudgetUSD = usd, usd
	e.ShowDetails(ctx)
	return usd, nil
}

// ContinueAsNew ends this run of the workflow and starts the next with
// the same spec and the whole state, once every handler is done and
// every signal delivered has been taken.
func (e *env) ContinueAsNew(ctx workflow.Context) error {
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	workload.DrainSignals(ctx, e.signals)
	e.account(workflow.Now(ctx))
	return workflow.NewContinueAsNewError(ctx, workflows.DevEnvironmentName, e.ds, &e.EnvState)
}
