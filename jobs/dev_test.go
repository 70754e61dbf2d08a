package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"refuel/pkg/devenv"
	"refuel/pkg/spec"
	"refuel/workflows"
)

// devLister answers DevList's visibility query and status queries.
type devLister struct {
	client.Client
	executions []*workflow.WorkflowExecutionInfo
	statuses   map[string]devenv.Status
	queried    []string
	query      string
}

func (l *devLister) ListWorkflow(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	l.query = req.GetQuery()
	return &workflowservice.ListWorkflowExecutionsResponse{Executions: l.executions}, nil
}

func (l *devLister) QueryWorkflow(_ context.Context, id, _, _ string, _ ...any) (converter.EncodedValue, error) {
	l.queried = append(l.queried, id)
	st, ok := l.statuses[id]
	if !ok {
		return nil, serviceerror.NewDeadlineExceeded("no worker answered")
	}
	return encoded{st}, nil
}

func withWho(t *testing.T, e *workflow.WorkflowExecutionInfo, who string) *workflow.WorkflowExecutionInfo {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayload(who)
	if err != nil {
		t.Fatal(err)
	}
	e.Memo = &commonpb.Memo{Fields: map[string]*commonpb.Payload{devenv.MemoWho: p}}
	return e
}

func TestDevListRowsComeFromVisibilityAndTheStatusQuery(t *testing.T) {
	attrs := map[string]any{"RefuelTeam": "research", "RefuelTier": "critical", "RefuelPriority": 70, "RefuelState": "pending"}
	l := &devLister{
		executions: []*workflow.WorkflowExecutionInfo{
			withWho(t, execution(t, "scratch", workflows.DevEnvironmentName, enums.WORKFLOW_EXECUTION_STATUS_RUNNING, attrs), "ana@laptop"),
			execution(t, "silent", workflows.DevEnvironmentName, enums.WORKFLOW_EXECUTION_STATUS_RUNNING, attrs),
			execution(t, "old", workflows.DevEnvironmentName, enums.WORKFLOW_EXECUTION_STATUS_COMPLETED, map[string]any{"RefuelState": "deleted"}),
		},
		statuses: map[string]devenv.Status{"scratch": {State: devenv.StateRunning, Priority: 80, Endpoint: "127.0.0.1:4000",
			IdleSeconds: 12, IdleTimeout: spec.Duration(30 * time.Minute), CostUSD: 1.5, IdleCostUSD: 0.25}},
	}
	rows, err := DevList(context.Background(), l, `RefuelTeam="research"`, 10)
	if err != nil {
		t.Fatal(err)
	}
	if want := `WorkflowType = "DevEnvironment" AND ExecutionStatus != "ContinuedAsNew" AND (RefuelTeam="research")`; l.query != want {
		t.Errorf("query %q; want %q", l.query, want)
	}
	started := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	want := []DevRow{
		{ID: "scratch", State: "running", Who: "ana@laptop", Team: "research", Tier: "critical", Priority: 80, Endpoint: "127.0.0.1:4000",
			IdleSeconds: 12, IdleTimeout: "30m0s", CostUSD: 1.5, IdleCostUSD: 0.25, Result: ResultRunning, StartedAt: started},
		{ID: "silent", State: "pending", Team: "research", Tier: "critical", Priority: 70, Result: ResultRunning, StartedAt: started},
		{ID: "old", State: "deleted", Result: ResultCompleted, StartedAt: started},
	}
	if diff := cmp.Diff(rows, want); diff != "" {
		t.Errorf("rows got(-), want(+):\n%s", diff)
	}
	if len(l.queried) != 2 {
		t.Errorf("queried %v; want the two running environments only", l.queried)
	}
}
