package balancers

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"refuel/pkg/serving"
	"refuel/workflows"
)

// Temporal is the Source of a Temporal client: visibility lists the
// running InferenceService workflows, the status query reads each, and
// the traffic signal reports.
type Temporal struct {
	Client    client.Client
	Namespace string
}

// runningServices is the visibility query a host lists services with.
var runningServices = fmt.Sprintf("WorkflowType = %q AND ExecutionStatus = 'Running'", workflows.InferenceServiceName)

// Services lists the running services, every page.
func (t Temporal) Services(ctx context.Context) ([]string, error) {
	var ids []string
	var token []byte
	for {
		resp, err := t.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: t.Namespace, Query: runningServices, PageSize: 1000, NextPageToken: token,
		})
		if err != nil {
			return nil, err
		}
		for _, e := range resp.GetExecutions() {
			ids = append(ids, e.GetExecution().GetWorkflowId())
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return ids, nil
		}
	}
}

// Status queries a service's status.
func (t Temporal) Status(ctx context.Context, id string) (Status, error) {
	var st Status
	v, err := t.Client.QueryWorkflow(ctx, id, "", workflows.QueryStatus)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return st, &GoneError{ID: id, Err: err}
	}
	if err != nil {
		return st, err
	}
	return st, v.Get(&st)
}

// Report signals a service with its balancer's traffic.
func (t Temporal) Report(ctx context.Context, id string, r serving.Report) error {
	err := t.Client.SignalWorkflow(ctx, id, "", serving.SignalTraffic, r)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return &GoneError{ID: id, Err: err}
	}
	return err
}
