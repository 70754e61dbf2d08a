package training

import (
	"encoding/json"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"refuel/activities"
	"refuel/pkg/admission"
	"refuel/pkg/spec"
	"refuel/workflows"
	"refuel/workflows/workload"
)

// TrainingRun is the durable life of one training job: admit it, acquire
// an instance, train on it, and when the instance is preempted acquire a
// replacement and resume from the latest checkpoint, until the work is
// done; everything acquired is given back however the run ends. Its
// input is one JobSpec; its result is the final Status.
//
// carried is nil on a first start: a client that passes only the spec,
// from any SDK, leaves it out. A run that has waited long for capacity
// continues as new, handing its whole state on in it.
func (w *Runs) TrainingRun(ctx workflow.Context, input json.RawMessage, carried *RunState) (Status, error) {
	r, err := w.startRun(ctx, input, carried)
	if err != nil {
		return Status{}, err
	}
	defer r.ReleaseAll(ctx)

	if carried == nil {
		if err := r.open(ctx); err != nil {
			return r.end(ctx, err)
		}
	}
	if r.Training != nil {
		// The previous run handed on an attempt under way: attach to it.
		v, err := r.resumeTraining(ctx)
		if err != nil {
			return r.end(ctx, err)
		}
		if err := r.settle(ctx, v); err != nil {
			return r.end(ctx, err)
		}
	}
	for !r.finished {
		// A gang whose lost nodes were replaced holds its instances: it
		// trains on without being admitted or acquiring again.
		if r.Lease == nil {
			if err := r.Admit(ctx); err != nil {
				return r.end(ctx, err)
			}
			// The first instance, or the replacement of one the market took.
			lease, err := r.Acquire(ctx)
			if err != nil {
				return r.end(ctx, err)
			}
			if lease == nil {
				continue // paused, asked to yield, or the market's next decision is due
			}
		}
		// Resume from the latest checkpoint and train until the attempt
		// ends: completed, preempted, stopped, or the instance lost.
		v, err := r.train(ctx)
		if err != nil {
			return r.end(ctx, err)
		}
		if err := r.settle(ctx, v); err != nil {
			return r.end(ctx, err)
		}
	}
	return r.end(ctx, nil)
}

// Runs are training runs with the options they run under (see
// Workflows).
type Runs struct{ Options workload.RunOptions }

// run is one TrainingRun: its state, and what it keeps while it runs.
// Its workload is what it shares with every workload that holds
// instances: acquiring through its market, the attempts it makes and the
// losses it recovers from (workload/workload.go); the run is its host.
type run struct {
	RunState
	*workload.Workload
	spec spec.JobSpec
	opts workload.RunOptions // the recorded options, or the worker's for older runs

	// finished is set when the work is done: the trainer completed, or
	// the market's account says so. The run then ends.
	finished bool
	signals  []workload.SignalHandler // drained before the run continues as new
}

// newRun is the run of this workflow; its spec, state and options are
// set by startRun.
func newRun(ctx workflow.Context) *run {
	info := workflow.GetInfo(ctx)
	return runOf(info.WorkflowExecution.ID, info.FirstRunID)
}

// runOf is a run of workflow id, first run as identity. It finds
// capacity on its own until open chooses how it does.
func runOf(id, identity string) *run {
	r := &run{}
	r.Workload = &workload.Workload{WorkflowID: id, Identity: identity, Kind: admission.Training, Host: r}
	r.Market = runClock{r: r}
	r.bind()
	return r
}

// bind points the workload at the run's state, spec and options: again
// whenever startRun replaces them.
func (r *run) bind() {
	r.Held, r.Counts, r.Workload.Spec, r.Workload.Opts = &r.Holding, &r.Record, &r.spec, &r.opts
}

// startRun takes up a carried state, or validates the spec, records the
// options and publishes the search attributes of a new run.
func (w *Runs) startRun(ctx workflow.Context, input json.RawMessage, carried *RunState) (*run, error) {
	r := newRun(ctx)
	r.opts = w.Options
	// Decoding formats its messages with fmt and walks the input by
	// reflection, which workflowcheck cannot prove deterministic; it reads
	// only the input.
	//workflowcheck:ignore
	js, err := spec.DecodeJobSpecJSON(input)
	if err != nil {
		return nil, invalidSpecError(err)
	}
	if carried != nil {
		// The spec was validated when the run first started; its deadline
		// may have passed since, which is the run's to handle, not an
		// invalid spec.
		r.spec, r.RunState = js, *carried
		if r.Options != nil {
			r.opts = r.Options.Filled()
		}
		r.Market = r.marketOfState()
		return r, r.registerHandlers(ctx)
	}
	js.Normalize()
	// Validation formats its messages with fmt, which workflowcheck cannot
	// prove deterministic; it only formats the spec's own values.
	//workflowcheck:ignore
	if err := js.Validate(workflow.Now(ctx)); err != nil {
		return nil, invalidSpecError(err)
	}
	if js.ID != r.WorkflowID && workflow.GetVersion(ctx, workload.SpecIDVersion, workflow.DefaultVersion, 1) >= 1 {
		return nil, invalidSpecError(spec.CheckWorkflowID("JobSpec", js.ID, r.WorkflowID))
	}
	r.spec = js
	if o := workload.RecordOptions(ctx, w.Options); o != nil {
		r.Options, r.opts = o, o.Filled()
	}
	r.RunRecord = RunRecord{ID: js.ID, Team: js.Team, Tier: string(js.Tier), State: workflows.StatePending, Priority: js.Priority, StartedAt: workflow.Now(ctx), BudgetUSD: js.BudgetUSD, StoreURL: activities.StoreURL(js.Checkpoint.URL, r.opts.StoreURL), Record: workload.Record{Failures: []workload.Failure{}}}
	if err := r.registerHandlers(ctx); err != nil {
		return nil, err
	}
	r.ShowDetails(ctx)
	err = workflow.UpsertTypedSearchAttributes(ctx,
		workflows.AttrTeam.ValueSet(js.Team), workflows.AttrTier.ValueSet(string(js.Tier)),
		workflows.AttrPriority.ValueSet(int64(js.Priority)), workflows.AttrState.ValueSet(string(workflows.StatePending)))
	return r, err
}

// open lists what the run may acquire and chooses how it finds capacity:
// following a market's own clock, through the capacity pool, or on its
// own in wall time.
func (r *run) open(ctx workflow.Context) error {
	if err := r.ListOfferings(ctx); err != nil {
		return err
	}
	m, err := openClockedMarket(ctx, r)
	if err != nil {
		return err
	}
	switch {
	case m != nil:
		r.Market = m
	case r.Seat().Join(ctx):
		r.Market = workload.PoolGrant{}
	default:
		r.Market = runClock{r: r}
	}
	return nil
}

// marketOfState is the market of a run taken up from a carried state: a
// run on a clocked market never continues as new.
func (r *run) marketOfState() workload.Market {
	if r.Pool != nil {
		return workload.PoolGrant{}
	}
	return runClock{r: r}
}

// end records the final state and returns the run's result.
func (r *run) end(ctx workflow.Context, err error) (Status, error) {
	r.Attrs.Stop(ctx)
	var next *workflow.ContinueAsNewError
	if errors.As(err, &next) {
		r.ReleaseNow(ctx)
		return r.snapshot(ctx), err // nothing is held: the next run goes on
	}
	ctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	defer r.Seat().Leave(ctx)
	var canceled *temporal.CanceledError
	cancelled := errors.As(err, &canceled)
	if a := r.Attempt; a != nil {
		a.Stop()
		if cancelled && workflow.GetVersion(ctx, cancelCheckpointVersion, workflow.DefaultVersion, 1) >= 1 {
			// The trainer saves a final checkpoint and the agent uploads
			// it before the instance goes: a cancelled run can be
			// started again from where it stopped.
			r.ObserveResult(ctx, a.Wait(ctx))
		}
	}
	switch {
	case err == nil:
		r.Enter(ctx, workflows.StateCompleted)
	case cancelled:
		r.Release(ctx, activities.ReleaseCleanup)
		r.Enter(ctx, workflows.StateCancelled)
		// A cancelled workflow has no result: the final status travels
		// as the cancellation's details.
		st := r.snapshot(ctx)
		return st, temporal.NewCanceledError(st)
	default:
		r.Release(ctx, activities.ReleaseFailed)
		r.State = workflows.StateFailed
		state := string(workflows.StateFailed)
		var app *temporal.ApplicationError
		if errors.As(err, &app) && app.Type() != "" {
			state = workflows.StateFailedClass + app.Type()
		}
		_ = workflow.UpsertTypedSearchAttributes(ctx, workflows.AttrState.ValueSet(state))
		r.ShowDetails(ctx)
		return r.snapshot(ctx), err
	}
	return r.snapshot(ctx), nil
}

// Enter moves the run to phase s (see transitions) and publishes it as
// RefuelState. A move the transitions do not allow is a bug in this
// package: it fails the workflow task, so the run waits, losing nothing,
// for a worker with the fix.
func (r *run) Enter(ctx workflow.Context, s workflows.State) {
	if r.State == s {
		return
	}
	if err := checkTransition(r.State, s); err != nil {
		panic(fmt.Sprintf("run %s: %v", r.WorkflowID, err))
	}
	r.State = s
	r.Attrs.Upsert(ctx, workflows.AttrState.ValueSet(string(s)))
	r.ShowDetails(ctx)
}

// invalidSpecError fails the workflow as the spec's fault. Its message is the
// spec's own field errors, formatted with fmt, which workflowcheck cannot
// prove deterministic.
//
//workflowcheck:ignore
func invalidSpecError(err error) error {
	var ve *spec.ValidationError
	if errors.As(err, &ve) {
		return temporal.NewNonRetryableApplicationError(ve.Error(), "InvalidJobSpec", nil, ve.Fields)
	}
	return temporal.NewNonRetryableApplicationError(err.Error(), "InvalidJobSpec", nil)
}
