package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"sync"
	"text/tabwriter"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"refuel/workflows"
)

// ListRow is one run or service in `starter list`; --json prints one a line.
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

func runList(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	conn := addConnFlags(fs)
	filter := fs.String("query", "", `visibility filter, e.g. 'RefuelTeam="nlp" AND RefuelState="running"' or 'ExecutionStatus="Running"'`)
	asJSON := fs.Bool("json", false, "print one JSON object per line: id, type, state, team, tier, priority, step, total_steps, cost_usd, ...")
	limit := fs.Int("limit", 200, "list at most this many, the most recently started first")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("starter list takes no arguments; filter with --query 'RefuelTeam=\"nlp\"'")
	}
	if *limit <= 0 {
		return usagef("--limit %d: give a positive number", *limit)
	}
	ctx := context.Background()
	c, err := conn.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	rows, err := listRows(ctx, c, listQuery(*filter), *limit)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	printRows(stdout, rows)
	return nil
}

// listQuery is the visibility query of runs and services matching filter.
// Runs that continued as new are listed once, by their latest run.
func listQuery(filter string) string {
	q := fmt.Sprintf("WorkflowType IN (%q, %q) AND ExecutionStatus != \"ContinuedAsNew\"", workflows.TrainingRunName, workflows.InferenceServiceName)
	if filter != "" {
		q += " AND (" + filter + ")"
	}
	return q
}

// listRows lists the workflows the query matches, from their search
// attributes, then asks each for its status to fill in progress and
// cost; one that does not answer keeps what its attributes say.
func listRows(ctx context.Context, c client.Client, query string, limit int) ([]ListRow, error) {
	var rows []ListRow
	var token []byte
	for len(rows) < limit {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token, PageSize: int32(min(limit, 1000))})
		if err != nil {
			return nil, fmt.Errorf("list runs and services (%s): %w; check the --query syntax", query, err)
		}
		for _, e := range resp.GetExecutions() {
			if len(rows) < limit {
				rows = append(rows, listRowOf(e))
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
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
		ID: e.GetExecution().GetWorkflowId(), Type: kindName(e.GetType().GetName()), Result: resultOf(e.GetStatus()),
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
	case resultTerminated, resultTimedOut:
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
		var st workflows.ServiceStatus
		if v.Get(&st) != nil {
			return
		}
		r.CostUSD, r.Priority = st.CostUSD, st.Priority
		r.ReadyReplicas, r.DesiredReplicas = &st.Ready, &st.Desired.Replicas
		if r.Result == resultRunning && st.State != "" {
			r.State = string(st.State)
		}
		return
	}
	var st workflows.Status
	if v.Get(&st) != nil {
		return
	}
	r.Step, r.TotalSteps, r.CostUSD, r.Priority = st.Step, st.TotalSteps, st.CostUSD, st.Priority
	if r.Result == resultRunning && st.State != "" {
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

func printRows(w io.Writer, rows []ListRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTYPE\tSTATE\tTEAM\tTIER\tPRIORITY\tPROGRESS\tCOST $")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%.4f\n", r.ID, r.Type, r.State, r.Team, r.Tier, r.Priority, progress(r), r.CostUSD)
	}
	_ = tw.Flush()
	if len(rows) == 0 {
		fmt.Fprintln(w, "(no runs or services match)")
	}
}

// progress is a run's steps or a service's replicas.
func progress(r ListRow) string {
	switch {
	case r.ReadyReplicas != nil && r.DesiredReplicas != nil:
		return fmt.Sprintf("%d/%d replicas", *r.ReadyReplicas, *r.DesiredReplicas)
	case r.TotalSteps > 0:
		return fmt.Sprintf("%d/%d (%.0f%%)", r.Step, r.TotalSteps, 100*float64(min(r.Step, r.TotalSteps))/float64(r.TotalSteps))
	}
	return "-"
}
