package activities

import (
	"context"
	"errors"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
)

// EndedWorkflows returns those of the workflow ids whose latest run is not
// running (or never existed): holders of pool capacity that ended
// without giving it back.
func (a *Janitor) EndedWorkflows(ctx context.Context, ids []string) ([]string, error) {
	var ended []string
	for _, id := range ids {
		desc, err := a.Client.DescribeWorkflowExecution(ctx, id, "")
		var nf *serviceerror.NotFound
		switch {
		case errors.As(err, &nf):
			ended = append(ended, id)
		case err != nil:
			return nil, err
		case desc.GetWorkflowExecutionInfo().GetStatus() != enums.WORKFLOW_EXECUTION_STATUS_RUNNING:
			ended = append(ended, id)
		}
	}
	return ended, nil
}
