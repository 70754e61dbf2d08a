package jobs

import (
	"context"
	"fmt"
	"io"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"refuel/pkg/cost"
	"refuel/workflows"
)

// JobCost is one run's or service's line of a cost report. Lost work
// and recovery are parts of its cost, not added to it.
type JobCost struct {
	ID          string         `json:"id"`
	Kind        string         `json:"kind"` // training, service or development
	Team        string         `json:"team"`
	State       string         `json:"state"`
	CostUSD     float64        `json:"cost_usd"`
	LostWorkUSD float64        `json:"lost_work_usd"`
	RecoveryUSD float64        `json:"recovery_usd"`
	IdleUSD     float64        `json:"idle_usd,omitempty"` // a development environment's hours without use
	Preemptions int            `json:"preemptions"`
	Cost        cost.Breakdown `json:"cost"`
}

// CostReport is what runs, services and development environments cost,
// each and rolled up by team and pool.
type CostReport struct {
	Jobs   []JobCost  `json:"jobs"`
	Rollup []cost.Row `json:"rollup"`
}

// Costs reads the cost of every run and service the visibility filter
// matches (all when it is empty), as of now. One that cannot be read is
// reported on skipped and left out.
func Costs(ctx context.Context, c client.Client, filter string, skipped io.Writer) (CostReport, error) {
	query := fmt.Sprintf("WorkflowType IN (%q, %q, %q)", workflows.TrainingRunName, workflows.InferenceServiceName, workflows.DevEnvironmentName)
	if filter != "" {
		query += " AND (" + filter + ")"
	}
	now := time.Now()
	rep := CostReport{Jobs: []JobCost{}}
	var ledgers []cost.JobCost
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token})
		if err != nil {
			return rep, fmt.Errorf("list runs and services (%s): %w", query, err)
		}
		for _, e := range resp.GetExecutions() {
			id := e.GetExecution().GetWorkflowId()
			if e.GetType().GetName() == workflows.DevEnvironmentName {
				st, err := DevStatus(ctx, c, id)
				if err != nil {
					fmt.Fprintf(skipped, "cost: skipping %s: %v\n", id, err)
					continue
				}
				rep.Jobs = append(rep.Jobs, JobCost{ID: id, Kind: "development", Team: st.Team, State: string(st.State), CostUSD: st.CostUSD,
					LostWorkUSD: st.Cost.LostWorkUSD, RecoveryUSD: st.Cost.RecoveryUSD, IdleUSD: st.Cost.IdleUSD, Preemptions: st.Preemptions, Cost: st.Cost})
				ledgers = append(ledgers, cost.JobCost{Job: id, Team: st.Team, Ledger: st.Ledger, At: now})
				continue
			}
			if e.GetType().GetName() == workflows.InferenceServiceName {
				st, err := ServiceStatus(ctx, c, id)
				if err != nil {
					fmt.Fprintf(skipped, "cost: skipping %s: %v\n", id, err)
					continue
				}
				rep.Jobs = append(rep.Jobs, JobCost{ID: id, Kind: "service", Team: st.Team, State: string(st.State), CostUSD: st.CostUSD, Cost: st.Ledger.Breakdown(now)})
				ledgers = append(ledgers, cost.JobCost{Job: id, Team: st.Team, Ledger: st.Ledger, At: now})
				continue
			}
			st, err := Status(ctx, c, id)
			if err != nil {
				fmt.Fprintf(skipped, "cost: skipping %s: %v\n", id, err)
				continue
			}
			rep.Jobs = append(rep.Jobs, JobCost{ID: id, Kind: "training", Team: st.Team, State: string(st.State), CostUSD: st.CostUSD,
				LostWorkUSD: st.Cost.LostWorkUSD, RecoveryUSD: st.Cost.RecoveryUSD, Preemptions: st.Preemptions, Cost: st.Cost})
			ledgers = append(ledgers, cost.JobCost{Job: id, Team: st.Team, Ledger: st.Ledger, At: now})
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	rep.Rollup = cost.Rollup(ledgers)
	return rep, nil
}
