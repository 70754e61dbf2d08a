package jobs

import (
	"context"
	"errors"
	"fmt"

	"refuel/workflows/capacitypool"
	"refuel/workflows/inference"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"refuel/pkg/autoscale"
	"refuel/pkg/spec"
	"refuel/workflows"
)

// StartService starts an InferenceService whose workflow ID is the
// service's id; a second start of a running id is refused with
// *DuplicateError.
func StartService(ctx context.Context, c client.Client, ss spec.ServiceSpec) (client.WorkflowRun, error) {
	ss.Normalize()
	if err := ss.Validate(); err != nil {
		return nil, err
	}
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                                       ss.ID,
		TaskQueue:                                workflows.TaskQueue,
		WorkflowIDConflictPolicy:                 enums.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		StaticSummary:                            serviceSummary(ss),
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.AttrTeam.ValueSet(ss.Team), workflows.AttrTier.ValueSet(string(ss.Placement.Tier())),
			workflows.AttrPriority.ValueSet(int64(ss.Priority)), workflows.AttrState.ValueSet("running")),
	}, workflows.InferenceServiceName, ss)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return nil, &DuplicateError{ID: ss.ID, Service: true}
	}
	return run, err
}

// ServiceStatus asks a service for its status.
func ServiceStatus(ctx context.Context, c client.Client, id string) (inference.Status, error) {
	var st inference.Status
	v, err := c.QueryWorkflow(ctx, id, "", workflows.QueryStatus)
	if err != nil {
		return st, fmt.Errorf("status of %s: %w", id, err)
	}
	return st, v.Get(&st)
}

// ReportLoad sends a service the load it observes. A service that has
// ended is *EndedError, saying how: stopped, or otherwise.
func ReportLoad(ctx context.Context, c client.Client, id string, m autoscale.Metrics) error {
	err := c.SignalWorkflow(ctx, id, "", workflows.SignalMetrics, m)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		if e, derr := describeEnding(ctx, c, id, nil); derr == nil && e.Result != ResultRunning {
			return &EndedError{Ending: e}
		}
	}
	return err
}

// PoolStatus asks the capacity pool for its queue and allocations.
func PoolStatus(ctx context.Context, c client.Client) (capacitypool.Status, error) {
	var st capacitypool.Status
	v, err := c.QueryWorkflow(ctx, workflows.PoolWorkflowID, "", workflows.QueryStatus)
	if err != nil {
		return st, fmt.Errorf("capacity pool status: %w", err)
	}
	return st, v.Get(&st)
}

// ErrNoWorkflow says no workflow has the id in the namespace.
var ErrNoWorkflow = errors.New("no workflow with this id in the namespace")

// Workflow is what an id names: the workflow's type and whether its
// latest run is still running.
type Workflow struct {
	Type    string
	Running bool
}

// Describe says what workflow an id names. Check it before signalling: a
// signal the workflow does not handle is accepted and silently buffered.
func Describe(ctx context.Context, c client.Client, id string) (Workflow, error) {
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return Workflow{}, fmt.Errorf("%s: %w (check the id and the namespace)", id, ErrNoWorkflow)
	}
	if err != nil {
		return Workflow{}, fmt.Errorf("describe %s: %w", id, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	return Workflow{Type: info.GetType().GetName(), Running: info.GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING}, nil
}

// StopService cancels a running InferenceService, which then gives every
// replica back and ends. It refuses any other workflow, so a mistyped id
// cannot cancel a training run.
func StopService(ctx context.Context, c client.Client, id string) error {
	w, err := Describe(ctx, c, id)
	if err != nil {
		return err
	}
	if w.Type != workflows.InferenceServiceName {
		return fmt.Errorf("%s is a %s, not an %s: only services are stopped this way", id, w.Type, workflows.InferenceServiceName)
	}
	if !w.Running {
		return fmt.Errorf("service %s has already ended", id)
	}
	if err := c.CancelWorkflow(ctx, id, ""); err != nil {
		return fmt.Errorf("stop %s: %w", id, err)
	}
	return nil
}
