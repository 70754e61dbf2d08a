package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"refuel/jobs"
)

func costCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "cost [--query Q] [--json]",
		Short:   "cost per job, and per team and pool",
		Example: "  starter cost --query 'RefuelTeam=\"nlp\"' --json",
		Args:    noArgs("starter cost takes no arguments; filter with --query 'RefuelTeam=\"nlp\"'"),
	}
	conn := addClientFlags(cmd)
	fs := cmd.Flags()
	filter := fs.String("query", "", `visibility filter, e.g. 'RefuelTeam="nlp"' or 'StartTime > "2026-11-01T00:00:00Z"'`)
	asJSON := fs.Bool("json", false, "print jobs and rollup rows as JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := context.Background()
		return conn.withClient(ctx, func(c client.Client) error {
			rep, err := jobs.Costs(ctx, c, *filter, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			return printCost(cmd.OutOrStdout(), rep, *asJSON)
		})
	}
	return cmd
}

func printCost(stdout io.Writer, rep jobs.CostReport, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(stdout).Encode(rep)
	}
	// Lost work and recovery are parts of the cost, not added to it.
	// Volume hours are the time warm-pool instances spent stopped, paid
	// for their volume alone (within the cost, apart from the hours).
	fmt.Fprintf(stdout, "%-40s %-11s %-12s %-12s %10s %10s %10s %10s %6s %10s\n", "RUN, SERVICE OR ENVIRONMENT", "KIND", "TEAM", "STATE", "COST $", "LOST $", "RECOVERY $", "IDLE $", "PREEMPT", "VOLUME H")
	for _, l := range rep.Jobs {
		fmt.Fprintf(stdout, "%-40s %-11s %-12s %-12s %10.4f %10.4f %10.4f %10.4f %6d %10.3f\n", l.ID, l.Kind, l.Team, l.State, l.CostUSD, l.LostWorkUSD, l.RecoveryUSD, l.IdleUSD, l.Preemptions, l.Cost.VolumeHours)
	}
	fmt.Fprintf(stdout, "\n%-12s %-12s %5s %10s %10s %10s %10s %10s %10s\n", "TEAM", "POOL", "JOBS", "HOURS", "COST $", "LOST $", "RECOVERY $", "IDLE $", "VOLUME H")
	for _, r := range rep.Rollup {
		fmt.Fprintf(stdout, "%-12s %-12s %5d %10.3f %10.4f %10.4f %10.4f %10.4f %10.3f\n", r.Team, r.Pool, r.Jobs, r.Hours, r.USD, r.LostWorkUSD, r.RecoveryUSD, r.IdleUSD, r.VolumeHours)
	}
	return nil
}
