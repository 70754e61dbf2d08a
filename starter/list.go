package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"refuel/jobs"
	"refuel/workflows"
)

func listCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list [--query Q] [--json]",
		Short: "list runs and services: state, tier, team, priority, progress, cost",
		Example: "  starter list\n" +
			"  starter list --query 'RefuelTeam=\"nlp\" AND RefuelState=\"running\"' --json",
		Args: noArgs("starter list takes no arguments; filter with --query 'RefuelTeam=\"nlp\"'"),
	}
	conn := addClientFlags(cmd)
	filter := cmd.Flags().String("query", "", `visibility filter, e.g. 'RefuelTeam="nlp" AND RefuelState="running"' or 'ExecutionStatus="Running"'`)
	asJSON := cmd.Flags().Bool("json", false, "print one JSON object per line: id, type, state, team, tier, priority, step, total_steps, cost_usd, ...")
	limit := cmd.Flags().Int("limit", 200, "list at most this many, the most recently started first")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *limit <= 0 {
			return usagef("--limit %d: give a positive number", *limit)
		}
		ctx, stdout := context.Background(), cmd.OutOrStdout()
		return conn.withClient(ctx, func(c client.Client) error {
			rows, err := jobs.List(ctx, c, *filter, *limit)
			if err != nil {
				return err
			}
			if !*asJSON {
				printRows(stdout, rows)
				return nil
			}
			return jsonLines(json.NewEncoder(stdout), rows)
		})
	}
	return cmd
}

func printRows(w io.Writer, rows []jobs.ListRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTYPE\tSTATE\tTEAM\tTIER\tPRIORITY\tPROGRESS\tCOST $")
	for _, r := range rows {
		tier := r.Tier
		if r.Type == jobs.KindName(workflows.InferenceServiceName) {
			tier = "-" // a service has no tier: RefuelTier is the tier its placement matches, for filters
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%.4f\n", r.ID, r.Type, r.State, r.Team, tier, r.Priority, progress(r), r.CostUSD)
	}
	_ = tw.Flush()
	if len(rows) == 0 {
		fmt.Fprintln(w, "(no runs or services match)")
	}
}

// progress is a run's steps or a service's replicas.
func progress(r jobs.ListRow) string {
	switch {
	case r.ReadyReplicas != nil && r.DesiredReplicas != nil:
		return fmt.Sprintf("%d/%d replicas", *r.ReadyReplicas, *r.DesiredReplicas)
	case r.TotalSteps > 0:
		return fmt.Sprintf("%d/%d (%.0f%%)", r.Step, r.TotalSteps, 100*float64(min(r.Step, r.TotalSteps))/float64(r.TotalSteps))
	}
	return "-"
}
