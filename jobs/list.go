package jobs

import (
	"context"
	"fmt"
	"sync"
	"time"

	"refuel/workflows/inference"
	"refuel/workflows/training"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"refuel/workflows"
)

// ListRow is one run or service as List reads it; `starter list --json`
// prints one a line.
type ListRow struct {
	ID         string  `json:"id"`
	Type       string  `json:"type"` // training or service
	State      string  `json:"state"`
	Team       string  `json:"team"`
	Tier       string  `json:"tier"`
	Priority   int     `json:"priority"`
	Step       int64   `json:"step"`
	TotalSteps int64   `json:"total_steps"`
	CostUSD    float64 `json:"cost_usd"`
	// Market is where a run's instance is now, while it holds one.
	Market string `json:"market,omitempty"`
	// ReadyReplicas and DesiredReplicas are a service's progress.
	ReadyReplicas   *int `json:"ready_replicas,omitempty"`
	DesiredReplicas *int `json:"desired_replicas,omitempty"`
	// Result is the workflow's: running, or how it closed.
	Result    string     `json:"result"`
	StartedAt time.Time  `json:"started_at"`
	ClosedAt  *time.Time `json:"closed_at,omitempty"`
}

// listQueries is how many status queries list has in flight at once.
const listQueries = 8

// listQuery is the visibility query of runs and services matching filter.
// Runs that continued as new are listed once, by their latest run.
func listQuery(filter string) string {
	q := fmt.Sprintf("WorkflowType IN (%q, %q) AND ExecutionStatus != \"ContinuedAsNew\"", workflows.TrainingRunName, workflows.InferenceServiceName)
	if filter != "" {
		q += " AND (" + filter + ")"
	}
	return q
}

// listExecutions pages through the executions query matches, the most
// recently started first, and keeps at most limit.
func listExecutions(ctx context.Context, c client.Client, query string, limit int) ([]*workflow.WorkflowExecutionInfo, error) {
	var found []*workflow.WorkflowExecutionInfo
	var token []byte
	for len(found) < limit {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token, PageSize: int32(min(limit, 1000))})
		if err != nil {
			return nil, err
		}
		found = append(found, resp.GetExecutions()[:min(len(resp.GetExecutions()), limit-len(found))]...)
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	return found, nil
}

// List lists the runs and services the visibility filter matches (all
// when it is empty), at most limit of them, the most recently started
// first: each from its search attributes, then from its answer to the
// status query, which fills in progress and cost; one that does not
// answer keeps what its attributes say.
func List(ctx context.Context, c client.Client, filter string, limit int) ([]ListRow, error) {
	query := listQuery(filter)
	found, err := listExecutions(ctx, c, query, limit)
	if err != nil {
		return nil, fmt.Errorf("list runs and services (%s): %w; check the --query syntax", query, err)
	}
	rows := make([]ListRow, len(found))
	for i, e := range found {
		rows[i] = listRowOf(e)
	}
	sem := make(chan struct{}, listQueries)
	var wg sync.WaitGroup
	for i := range rows {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			v, err := c.QueryWorkflow(qctx, rows[i].ID, "", workflows.QueryStatus)
			if err == nil {
				addStatus(&rows[i], v)
			}
		}()
	}
	wg.Wait()
	return rows, nil
}

// listRowOf is a row from what visibility knows: the search attributes.
func listRowOf(e *workflow.WorkflowExecutionInfo) ListRow {
	attrs := e.GetSearchAttributes().GetIndexedFields()
	r := ListRow{
		ID: e.GetExecution().GetWorkflowId(), Type: KindName(e.GetType().GetName()), Result: ResultOf(e.GetStatus()),
		State: keyword(attrs, workflows.AttrState.GetName()), Team: keyword(attrs, workflows.AttrTeam.GetName()),
		Tier: keyword(attrs, workflows.AttrTier.GetName()), Market: keyword(attrs, workflows.AttrMarket.GetName()),
		StartedAt: e.GetStartTime().AsTime(),
	}
	var prio int64
	decode(attrs, workflows.AttrPriority.GetName(), &prio)
	r.Priority = int(prio)
	decode(attrs, workflows.AttrCostUSD.GetName(), &r.CostUSD)
	if e.GetCloseTime() != nil {
		t := e.GetCloseTime().AsTime()
		r.ClosedAt = &t
	}
	switch r.Result {
	case ResultTerminated, ResultTimedOut:
		r.State = r.Result // the run ran no code to record it
	}
	if r.State == "" {
		r.State = r.Result
	}
	return r
}

// addStatus fills a row in from the workflow's answer to the status query.
func addStatus(r *ListRow, v converter.EncodedValue) {
	if r.Type == "service" {
		var st inference.Status
		if v.Get(&st) != nil {
			return
		}
		r.CostUSD, r.Priority = st.CostUSD, st.Priority
		r.ReadyReplicas, r.DesiredReplicas = &st.Ready, &st.Desired.Replicas
		if r.Result == ResultRunning && st.State != "" {
			r.State = string(st.State)
		}
		return
	}
	var st training.Status
	if v.Get(&st) != nil {
		return
	}
	r.Step, r.TotalSteps, r.CostUSD, r.Priority = st.Step, st.TotalSteps, st.CostUSD, st.Priority
	if r.Result == ResultRunning && st.State != "" {
		r.State = string(st.State)
	}
}

func keyword(attrs map[string]*commonpb.Payload, name string) string {
	var s string
	decode(attrs, name, &s)
	return s
}

func decode(attrs map[string]*commonpb.Payload, name string, v any) {
	if p := attrs[name]; p != nil {
		_ = converter.GetDefaultDataConverter().FromPayload(p, v)
	}
}

// Count is how many training runs the visibility filter matches.
func Count(ctx context.Context, c client.Client, filter string) (int, error) {
	resp, err := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
		Query: fmt.Sprintf("WorkflowType = %q AND (%s)", workflows.TrainingRunName, filter),
	})
	if err != nil {
		return 0, fmt.Errorf("count runs (%s): %w", filter, err)
	}
	return int(resp.GetCount()), nil
}
