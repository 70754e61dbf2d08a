package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"go.temporal.io/api/workflowservice/v1"

	"refuel/jobs"
	"refuel/pkg/cost"
	"refuel/workflows"
)

// jobCost is one run's or service's line in `starter cost`.
type jobCost struct {
	ID          string         `json:"id"`
	Kind        string         `json:"kind"` // training or service
	Team        string         `json:"team"`
	State       string         `json:"state"`
	CostUSD     float64        `json:"cost_usd"`
	LostWorkUSD float64        `json:"lost_work_usd"`
	Preemptions int            `json:"preemptions"`
	Cost        cost.Breakdown `json:"cost"`
}

func runCost(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("cost", flag.ContinueOnError)
	fs.SetOutput(stderr)
	conn := addConnFlags(fs)
	filter := fs.String("query", "", `visibility filter, e.g. 'RefuelTeam="nlp"' or 'StartTime > "2026-11-01T00:00:00Z"'`)
	asJSON := fs.Bool("json", false, "print jobs and rollup rows as JSON")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	ctx := context.Background()
	c, err := conn.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	query := fmt.Sprintf("WorkflowType IN (%q, %q)", workflows.TrainingRunName, workflows.InferenceServiceName)
	if *filter != "" {
		query += " AND (" + *filter + ")"
	}
	now := time.Now()
	var lines []jobCost
	var ledgers []cost.JobCost
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token})
		if err != nil {
			return fmt.Errorf("list runs and services (%s): %w", query, err)
		}
		for _, e := range resp.GetExecutions() {
			id := e.GetExecution().GetWorkflowId()
			if e.GetType().GetName() == workflows.InferenceServiceName {
				st, err := jobs.ServiceStatus(ctx, c, id)
				if err != nil {
					fmt.Fprintf(stderr, "cost: skipping %s: %v\n", id, err)
					continue
				}
				lines = append(lines, jobCost{ID: id, Kind: "service", Team: st.Team, State: string(st.State), CostUSD: st.CostUSD, Cost: st.Ledger.Breakdown(now)})
				ledgers = append(ledgers, cost.JobCost{Job: id, Team: st.Team, Ledger: st.Ledger, At: now})
				continue
			}
			st, err := jobs.Status(ctx, c, id)
			if err != nil {
				fmt.Fprintf(stderr, "cost: skipping %s: %v\n", id, err)
				continue
			}
			lines = append(lines, jobCost{ID: id, Kind: "training", Team: st.Team, State: string(st.State), CostUSD: st.CostUSD,
				LostWorkUSD: st.Cost.LostWorkUSD, Preemptions: st.Preemptions, Cost: st.Cost})
			ledgers = append(ledgers, cost.JobCost{Job: id, Team: st.Team, Ledger: st.Ledger, At: now})
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	rows := cost.Rollup(ledgers)
	if *asJSON {
		return json.NewEncoder(stdout).Encode(map[string]any{"jobs": lines, "rollup": rows})
	}
	fmt.Fprintf(stdout, "%-40s %-9s %-12s %-12s %10s %10s %6s\n", "JOB OR SERVICE", "KIND", "TEAM", "STATE", "COST $", "LOST $", "PREEMPT")
	for _, l := range lines {
		fmt.Fprintf(stdout, "%-40s %-9s %-12s %-12s %10.4f %10.4f %6d\n", l.ID, l.Kind, l.Team, l.State, l.CostUSD, l.LostWorkUSD, l.Preemptions)
	}
	fmt.Fprintf(stdout, "\n%-12s %-12s %5s %10s %10s\n", "TEAM", "POOL", "JOBS", "HOURS", "COST $")
	for _, r := range rows {
		fmt.Fprintf(stdout, "%-12s %-12s %5d %10.3f %10.4f\n", r.Team, r.Pool, r.Jobs, r.Hours, r.USD)
	}
	return nil
}
