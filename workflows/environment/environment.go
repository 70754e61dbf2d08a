package environment

import (
	"encoding/json"
	"errors"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/admission"
	"refuel/pkg/capacity"
	"refuel/pkg/devenv"
	"refuel/pkg/spec"
	"refuel/workflows"
	"refuel/workflows/workload"
)

// DevEnvironment is the durable life of one development environment: a
// machine a developer works on interactively (JupyterLab, sshd,
// code-server…). It finds capacity as a training run does, through the
// capacity pool's one queue (base first, burst overflow) or on its own,
// runs its command through the node agent as an attempt, and recovers
// through the same recovery when it loses its instance. Its workspace is
// saved to its store and restored before the command starts on any
// instance, so it survives every move. It suspends when it goes unused
// past its idle timeout, when its developer stops it, when it spends its
// budget and when its command ends; resume acquires again. Its input is
// one DevSpec; its result is the final status.
//
// carried is nil on a first start; continue-as-new hands the whole state
// on in it.
func (w *Environments) DevEnvironment(ctx workflow.Context, input json.RawMessage, carried *EnvState) (devenv.Status, error) {
	e, err := w.startEnv(ctx, input, carried)
	if err != nil {
		return devenv.Status{State: devenv.StateFailed}, err
	}
	defer e.ReleaseAll(ctx)

	if carried == nil {
		if err := e.open(ctx); err != nil {
			return e.end(ctx, err)
		}
	}
	if e.Training != nil {
		// The previous run handed on the command under way: attach to it.
		v, err := e.reattach(ctx)
		if err == nil {
			err = e.settle(ctx, v)
		}
		if err != nil {
			return e.end(ctx, err)
		}
	}
	for e.Deleting == nil {
		if e.Suspended {
			if err := e.awaitResume(ctx); err != nil {
				return e.end(ctx, err)
			}
			continue
		}
		if e.Lease == nil {
			if err := e.Admit(ctx); err != nil {
				return e.end(ctx, err)
			}
			lease, err := e.Acquire(ctx)
			if err != nil {
				return e.end(ctx, err)
			}
			if lease == nil {
				continue // stopped, deleted, over its budget, or asked to yield
			}
		}
		// Restore the workspace, run the command until the attempt
		// ends: stopped, idle, moved, preempted, or ended by itself.
		v, err := e.work(ctx)
		if err == nil {
			err = e.settle(ctx, v)
		}
		if err != nil {
			return e.end(ctx, err)
		}
	}
	return e.end(ctx, nil)
}

// Environments are development environments with the options they run
// under, a training run's (see Workflows).
type Environments struct{ Options workload.RunOptions }

// env is one DevEnvironment: its state, its spec, and the workload it
// shares with training runs.
type env struct {
	EnvState
	*workload.Workload
	ds   spec.DevSpec
	job  spec.JobSpec // what its attempts run, and how the workload acquires
	opts workload.RunOptions
	who  string // who started it (the memo)
	// used counts the reports that changed its use, so the idle watch
	// wakes on each.
	used    int
	signals []workload.SignalHandler
}

// noticeGrace is how long an environment's command runs on after an
// interruption notice before it gets SIGTERM: the developer sees the
// notice; the agent keeps the rest of the window for the final save.
const noticeGrace = 30 * time.Second

// startEnv takes up a carried state, or validates the spec and records
// the options of a new environment.
func (w *Environments) startEnv(ctx workflow.Context, input json.RawMessage, carried *EnvState) (*env, error) {
	info := workflow.GetInfo(ctx)
	// Decoding formats its messages with fmt and walks the input by
	// reflection, which workflowcheck cannot prove deterministic; it reads
	// only the input.
	//workflowcheck:ignore
	ds, err := spec.DecodeDevSpecJSON(input)
	if err != nil {
		return nil, invalidDevSpecError(err)
	}
	ds.Normalize()
	e := &env{ds: ds, job: ds.Job(), opts: w.Options}
	if ds.Tier == spec.TierFlexible {
		// Spot allowed, and on-demand after it (capacity.Order's order
		// for the deadline tier): a developer is not left waiting for
		// spot.
		e.job.Tier = spec.TierDeadline
	}
	e.Workload = &workload.Workload{WorkflowID: info.WorkflowExecution.ID, Identity: info.FirstRunID, Kind: admission.Development, Host: e, Market: workload.WallClock{}}
	e.Held, e.Counts, e.Workload.Spec, e.Workload.Opts = &e.Holding, &e.Record, &e.job, &e.opts
	if p := info.Memo.GetFields()[devenv.MemoWho]; p != nil {
		_ = converter.GetDefaultDataConverter().FromPayload(p, &e.who)
	}
	if carried != nil {
		e.EnvState = *carried
		if e.Options != nil {
			e.opts = e.Options.Filled()
		}
		e.job.BudgetUSD = e.BudgetUSD
		if e.Pool != nil {
			e.Market = workload.PoolGrant{}
		}
		return e, e.registerHandlers(ctx)
	}
	// Validation formats its messages with fmt, which workflowcheck cannot
	// prove deterministic; it only formats the spec's own values.
	//workflowcheck:ignore
	if err := ds.Validate(); err != nil {
		return nil, invalidDevSpecError(err)
	}
	if ds.ID != e.WorkflowID {
		return nil, invalidDevSpecError(spec.CheckWorkflowID("DevSpec", ds.ID, e.WorkflowID))
	}
	if o := workload.RecordOptions(ctx, w.Options); o != nil {
		e.Options, e.opts = o, o.Filled()
	}
	now := workflow.Now(ctx)
	e.EnvState = EnvState{Options: e.Options, State: devenv.StatePending, Since: now, StartedAt: now,
		Priority: ds.Priority, BudgetUSD: ds.BudgetUSD, Record: workload.Record{Failures: []workload.Failure{}}}
	if err := e.registerHandlers(ctx); err != nil {
		return nil, err
	}
	e.ShowDetails(ctx)
	err = workflow.UpsertTypedSearchAttributes(ctx,
		workflows.AttrTeam.ValueSet(ds.Team), workflows.AttrTier.ValueSet(string(ds.Tier)),
		workflows.AttrPriority.ValueSet(int64(ds.Priority)), workflows.AttrState.ValueSet(string(devenv.StatePending)))
	return e, err
}

// open lists what the environment may acquire and chooses how it finds
// capacity: through the capacity pool, or on its own in wall time.
func (e *env) open(ctx workflow.Context) error {
	if err := e.ListOfferings(ctx); err != nil {
		return err
	}
	if e.Seat().Join(ctx) {
		e.Market = workload.PoolGrant{}
	}
	return nil
}

// work runs the command on the instance the environment holds until the
// attempt ends, and returns the verdict its end comes to.
func (e *env) work(ctx workflow.Context) (workload.Verdict, error) {
	if e.MustStop(ctx) != workload.GoOn {
		return workload.Verdict{Ending: workload.EndStopped}, nil // the instance goes back unused
	}
	e.Enter(ctx, workflows.StateRunning)
	return e.Follow(ctx, e.Launch(ctx, e.attemptInput(), workflow.Now(ctx)))
}

// reattach takes up the attempt the previous run handed on.
func (e *env) reattach(ctx workflow.Context) (workload.Verdict, error) {
	t := e.Training
	e.Training = nil
	// The command ran on through the hand-on: its use and the split of
	// its time go on as they were.
	act, since, until := e.Activity, e.RunningSince, e.HeldUntil
	a := e.Launch(ctx, e.attemptInput(), t.Started)
	a.Attached()
	e.Activity, e.RunningSince, e.HeldUntil = act, since, until
	if e.MustStop(ctx) != workload.GoOn {
		a.Stop()
	}
	return e.Follow(ctx, a)
}

// attemptInput is what the agent runs: the environment's command as a
// job whose checkpoints are the workspace's saves, in the worker's store.
func (e *env) attemptInput() activities.TrainingInput {
	l := e.Lease
	return activities.TrainingInput{
		Spec: e.job, Attempt: l.Attempt, InstanceID: l.Instance.ID, RunIdentity: e.Identity,
		CheckpointInterval: e.ds.SaveEvery(), StopGrace: e.opts.StopGrace,
		Dev: &activities.DevInput{
			Workspace: e.ds.Workspace, SaveEvery: e.ds.SaveEvery(), IdleTimeout: e.ds.Idle(),
			Host: l.Instance.Address, NoticeGrace: noticeGrace,
		},
	}
}

// settle acts once on an attempt's verdict. A command that served and
// ended by itself suspends the environment; one that failed to start
// fails it, with its last lines; a stop gives the instance back (for a
// yield the environment moves); a loss is the recovery's, as a run's.
func (e *env) settle(ctx workflow.Context, v workload.Verdict) error {
	e.account(workflow.Now(ctx))
	if d := v.End.Res.Dev; d != nil && !d.Saved {
		// The final save did not reach the store: its work is lost.
		e.LostWorkSecs += d.UnsavedSeconds
		e.AddFailure(ctx, string(capacity.CheckpointFault), e.offeringKey(), "the workspace's final save did not reach the store: "+d.SaveError)
	}
	e.Endpoint, e.Serving = "", false
	switch v.Ending {
	case workload.EndCompleted:
		e.Release(ctx, activities.ReleaseCompleted)
		e.suspend(ctx, v.End.Res.Message)
	case workload.EndTrainerFailed:
		e.AddFailure(ctx, string(capacity.TrainerFault), e.offeringKey(), v.Message)
		e.Release(ctx, activities.ReleaseFailed)
		return temporal.NewNonRetryableApplicationError(v.Message, "CommandFailed", nil)
	case workload.EndLost, workload.EndTaken, workload.EndCheckpointsFailed:
		e.Moves++
		l := e.Recover().LossOf(ctx, v)
		e.setState(ctx, devenv.StateMoving, "lost its instance ("+lossWhy(l)+"): resuming on other capacity with its workspace")
		return e.Recover().Run(ctx, l)
	default:
		e.Stopped(ctx)
	}
	return nil
}

// Stopped gives back what an attempt stopped at its final save held: for
// a yield to the pool the environment moves; for a stop, its idle
// timeout, a delete or its budget it suspends.
func (e *env) Stopped(ctx workflow.Context) {
	switch e.MustStop(ctx) {
	case workload.StopYield:
		e.Moves++
		why := "the capacity pool took its capacity back"
		if y := e.Pool.Yield; y != nil && y.Reason != "" {
			why += " (" + y.Reason + ")"
		}
		e.setState(ctx, devenv.StateMoving, why+": resuming on other capacity with its workspace")
		e.Release(ctx, activities.ReleaseYielded)
	case workload.StopBudget:
		e.Release(ctx, activities.ReleaseOverBudget)
		e.suspend(ctx, e.budgetWhy(workflow.Now(ctx)))
	default:
		e.Release(ctx, activities.ReleasePaused)
	}
}

// awaitResume waits, holding nothing and out of the pool's queue, until
// the environment is resumed or deleted. A resume while it is over its
// budget leaves it suspended. A long wait continues as new.
func (e *env) awaitResume(ctx workflow.Context) error {
	e.Seat().Leave(ctx)
	e.ReleaseNow(ctx)
	if e.State != devenv.StateSuspended {
		e.setState(ctx, devenv.StateSuspended, e.Reason)
	}
	for e.Suspended && e.Deleting == nil {
		if err := workflow.Await(ctx, func() bool { return !e.Suspended || e.Deleting != nil || e.HandOn }); err != nil {
			return err
		}
		if e.HandOn {
			return e.ContinueAsNew(ctx)
		}
	}
	if e.Deleting == nil && e.OverBudget(workflow.Now(ctx)) {
		e.suspend(ctx, e.budgetWhy(workflow.Now(ctx)))
		return nil
	}
	if !e.Suspended {
		e.setState(ctx, devenv.StatePending, "resumed: acquiring, base first, to restore its workspace")
	}
	return nil
}

// end records the final state and returns the environment's result: a
// deleted environment's workspace goes from its store unless it was to
// be kept; a failed one fails its workflow.
func (e *env) end(ctx workflow.Context, err error) (devenv.Status, error) {
	e.Attrs.Stop(ctx)
	var next *workflow.ContinueAsNewError
	if errors.As(err, &next) {
		e.ReleaseNow(ctx)
		return e.snapshot(ctx), err
	}
	ctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	defer e.Seat().Leave(ctx)
	if a := e.Attempt; a != nil {
		// The command stops and the agent saves the workspace before the
		// instance goes.
		a.Stop()
		e.ObserveResult(ctx, a.Wait(ctx))
	}
	var canceled *temporal.CanceledError
	switch {
	case err == nil || errors.As(err, &canceled):
		e.Release(ctx, activities.ReleaseCleanup)
		if d := e.Deleting; d == nil || !d.KeepWorkspace {
			e.deleteWorkspace(ctx)
		}
		e.setState(ctx, devenv.StateDeleted, "deleted")
		return e.snapshot(ctx), nil
	default:
		e.Release(ctx, activities.ReleaseFailed)
		e.setState(ctx, devenv.StateFailed, err.Error())
		return e.snapshot(ctx), err
	}
}

// deleteWorkspace deletes the environment's saves and its command's
// output from its store.
func (e *env) deleteWorkspace(ctx workflow.Context) {
	in := activities.DeleteWorkspaceInput{ID: e.WorkflowID, StoreURL: e.storeURL()}
	actx := workload.Titled(workload.ControlOptions(ctx), "delete the workspace of "+e.WorkflowID+" from its store")
	if err := workflow.ExecuteActivity(actx, activities.DeleteWorkspaceName, in).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("the workspace could not be deleted; it stays in the store", "error", err)
	}
}

// storeURL is the store the environment's workspace is saved to.
func (e *env) storeURL() string { return activities.StoreURL(e.job.Checkpoint.URL, e.opts.StoreURL) }

// offeringKey is the offering of the instance the environment holds,
// for a failure booked on it.
func (e *env) offeringKey() string {
	if e.Lease == nil {
		return ""
	}
	return e.Lease.Offering().Key()
}

// lossWhy is a loss in a few words.
func lossWhy(l workload.Loss) string {
	if l.Noticed() {
		return "preempted with notice"
	}
	return string(l.Fault)
}

// invalidDevSpecError fails the workflow as the spec's fault; see
// invalidSpecError.
//
//workflowcheck:ignore
func invalidDevSpecError(err error) error {
	var ve *spec.ValidationError
	if errors.As(err, &ve) {
		return temporal.NewNonRetryableApplicationError(ve.Error(), "InvalidDevSpec", nil, ve.Fields)
	}
	return temporal.NewNonRetryableApplicationError(err.Error(), "InvalidDevSpec", nil)
}
