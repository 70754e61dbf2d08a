package jobs

import (
	"context"
	"errors"
	"fmt"

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
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.AttrTeam.ValueSet(ss.Team), workflows.AttrTier.ValueSet(string(ss.Placement.Tier())),
			workflows.AttrPriority.ValueSet(int64(ss.Priority)), workflows.AttrState.ValueSet("running")),
	}, workflows.InferenceServiceName, ss)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return nil, &DuplicateError{ID: ss.ID}
	}
	return run, err
}

// ServiceStatus asks a service for its status.
func ServiceStatus(ctx context.Context, c client.Client, id string) (workflows.ServiceStatus, error) {
	var st workflows.ServiceStatus
	v, err := c.QueryWorkflow(ctx, id, "", workflows.QueryStatus)
	if err != nil {
		return st, fmt.Errorf("status of %s: %w", id, err)
	}
	return st, v.Get(&st)
}

// ReportLoad sends a service the load it observes.
func ReportLoad(ctx context.Context, c client.Client, id string, m autoscale.Metrics) error {
	return c.SignalWorkflow(ctx, id, "", workflows.SignalMetrics, m)
}

// PoolStatus asks the capacity pool for its queue and allocations.
func PoolStatus(ctx context.Context, c client.Client) (workflows.PoolStatus, error) {
	var st workflows.PoolStatus
	v, err := c.QueryWorkflow(ctx, workflows.PoolWorkflowID, "", workflows.QueryStatus)
	if err != nil {
		return st, fmt.Errorf("capacity pool status: %w", err)
	}
	return st, v.Get(&st)
}
