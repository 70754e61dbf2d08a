package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"refuel/jobs"
)

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
	rep, err := jobs.Costs(ctx, c, *filter, stderr)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(rep)
	}
	// Lost work and recovery are parts of the cost, not added to it.
	fmt.Fprintf(stdout, "%-40s %-9s %-12s %-12s %10s %10s %10s %6s\n", "JOB OR SERVICE", "KIND", "TEAM", "STATE", "COST $", "LOST $", "RECOVERY $", "PREEMPT")
	for _, l := range rep.Jobs {
		fmt.Fprintf(stdout, "%-40s %-9s %-12s %-12s %10.4f %10.4f %10.4f %6d\n", l.ID, l.Kind, l.Team, l.State, l.CostUSD, l.LostWorkUSD, l.RecoveryUSD, l.Preemptions)
	}
	fmt.Fprintf(stdout, "\n%-12s %-12s %5s %10s %10s %10s %10s\n", "TEAM", "POOL", "JOBS", "HOURS", "COST $", "LOST $", "RECOVERY $")
	for _, r := range rep.Rollup {
		fmt.Fprintf(stdout, "%-12s %-12s %5d %10.3f %10.4f %10.4f %10.4f\n", r.Team, r.Pool, r.Jobs, r.Hours, r.USD, r.LostWorkUSD, r.RecoveryUSD)
	}
	return nil
}
