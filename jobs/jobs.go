// Package jobs is the Go client of refuel's training runs, for pipelines
// and for the starter CLI: submit a JobSpec, read a run's status, pause,
// resume, re-prioritise, interrupt an instance, and run the drill. Other
// languages use the same contract through their Temporal SDK.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"refuel/workflows/training"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"refuel/activities"
	"refuel/pkg/estimate"
	"refuel/pkg/spec"
	"refuel/workflows"
)

// DuplicateError says an id is taken: a job's for good, a service's or
// a development environment's while it runs.
type DuplicateError struct {
	ID          string
	Service     bool
	Environment bool
}

func (e *DuplicateError) Error() string {
	if e.Environment {
		return fmt.Sprintf("an environment with id %q already exists (running or suspended): resume it (starter dev resume %s), delete it first, or choose another id", e.ID, e.ID)
	}
	if e.Service {
		return fmt.Sprintf("a service with id %q is already running: stop it first, or choose another id", e.ID)
	}
	return fmt.Sprintf("a job with id %q already exists: ids are unique, so choose another id", e.ID)
}

// SubmitOption adds to how Submit starts a run.
type SubmitOption func(*client.StartWorkflowOptions)

// WithEstimate keeps what was estimated for the run (see Estimate and
// Submitted) with it, in its memo: the run's status and its details in
// the Web UI show it beside what the run cost and when it finished. A nil
// estimate keeps none.
func WithEstimate(e *estimate.Submitted) SubmitOption {
	return func(o *client.StartWorkflowOptions) {
		if e == nil {
			return
		}
		if o.Memo == nil {
			o.Memo = map[string]any{}
		}
		o.Memo[training.MemoEstimate] = e
		o.StaticDetails += "\n" + estimateDetails(*e)
	}
}

// Submit starts a TrainingRun whose workflow ID is the job's id. A second
// start with the same id is refused with *DuplicateError, never
// duplicated, even after the first run closed.
func Submit(ctx context.Context, c client.Client, js spec.JobSpec, opts ...SubmitOption) (client.WorkflowRun, error) {
	start := client.StartWorkflowOptions{
		ID:                       js.ID,
		TaskQueue:                workflows.TaskQueue,
		WorkflowIDReusePolicy:    enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		// Without this the SDK hands back the running run as if it were new.
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		StaticSummary:                            jobSummary(js),
		StaticDetails:                            jobDetails(js),
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.AttrTeam.ValueSet(js.Team), workflows.AttrTier.ValueSet(string(js.Tier)),
			workflows.AttrPriority.ValueSet(int64(js.Priority)), workflows.AttrState.ValueSet(string(workflows.StatePending))),
	}
	for _, o := range opts {
		o(&start)
	}
	run, err := c.ExecuteWorkflow(ctx, start, workflows.TrainingRunName, js)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return nil, &DuplicateError{ID: js.ID}
	}
	return run, err
}

// Status asks a run for its status.
func Status(ctx context.Context, c client.Client, id string) (training.Status, error) {
	var st training.Status
	v, err := c.QueryWorkflow(ctx, id, "", workflows.QueryStatus)
	if err != nil {
		return st, fmt.Errorf("status of %s: %w", id, err)
	}
	return st, v.Get(&st)
}

// FinalStatus waits for a run to end and returns the status it ended
// with, read from its result (a completed run's) rather than a query, so
// no worker replays the run to answer; a run that failed or was
// cancelled answers the status query instead.
func FinalStatus(ctx context.Context, c client.Client, id string) (training.Status, error) {
	var st training.Status
	if err := c.GetWorkflow(ctx, id, "").Get(ctx, &st); err == nil {
		return st, nil
	}
	return Status(ctx, c, id)
}

// Ended reports whether a status is final.
func Ended(st training.Status) bool {
	switch st.State {
	case workflows.StateCompleted, workflows.StateFailed, workflows.StateCancelled:
		return true
	}
	return false
}

// WaitFor queries a run until cond holds, the run ends, or ctx expires.
func WaitFor(ctx context.Context, c client.Client, id string, cond func(training.Status) bool) (training.Status, error) {
	for {
		st, err := Status(ctx, c, id)
		if err == nil && cond(st) {
			return st, nil
		}
		if err == nil && Ended(st) {
			return st, fmt.Errorf("%s ended (%s) before the awaited condition held", id, st.State)
		}
		select {
		case <-ctx.Done():
			return st, fmt.Errorf("waiting on %s: %w (state %s)", id, ctx.Err(), st.State)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// LiveStep is the step of the training activity's latest heartbeat; 0
// when none is running.
func LiveStep(ctx context.Context, c client.Client, id string) int64 {
	return LiveProgress(ctx, c, id).Step
}

// LiveProgress reads the training activity's latest heartbeat: status
// moves at checkpoints, the heartbeat every second, and it knows the
// steps in all before the first checkpoint. Zero when none is running.
func LiveProgress(ctx context.Context, c client.Client, id string) activities.Progress {
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return activities.Progress{}
	}
	for _, pa := range desc.GetPendingActivities() {
		if pa.GetActivityType().GetName() != activities.RunTrainingName || pa.GetHeartbeatDetails() == nil {
			continue
		}
		var p activities.Progress
		if err := converter.GetDefaultDataConverter().FromPayloads(pa.GetHeartbeatDetails(), &p); err == nil {
			return p
		}
	}
	return activities.Progress{}
}

// Pause asks a run to checkpoint, give its instance back and wait.
func Pause(ctx context.Context, c client.Client, id string) error {
	return c.SignalWorkflow(ctx, id, "", workflows.SignalPause, nil)
}

// Resume asks a paused run to reacquire and continue.
func Resume(ctx context.Context, c client.Client, id string) error {
	return c.SignalWorkflow(ctx, id, "", workflows.SignalResume, nil)
}

// SetPriority sends the set-priority update and waits for its answer; an
// out-of-range value is rejected by the run's validator and never reaches
// its history.
func SetPriority(ctx context.Context, c client.Client, id string, p int) (int, error) {
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: id, UpdateName: workflows.UpdatePriority, Args: []any{p},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return 0, fmt.Errorf("set-priority on %s: %w", id, err)
	}
	var got int
	if err := h.Get(ctx, &got); err != nil {
		return 0, fmt.Errorf("set-priority on %s: %w", id, err)
	}
	return got, nil
}

// SetBudget sends the set-budget update (USD, 0 for no budget) and waits
// for its answer; a run waiting over its budget goes on once it is
// raised above what the run spent.
func SetBudget(ctx context.Context, c client.Client, id string, usd float64) (float64, error) {
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: id, UpdateName: workflows.UpdateBudget, Args: []any{usd},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return 0, fmt.Errorf("set-budget on %s: %w", id, err)
	}
	var got float64
	if err := h.Get(ctx, &got); err != nil {
		return 0, fmt.Errorf("set-budget on %s: %w", id, err)
	}
	return got, nil
}
