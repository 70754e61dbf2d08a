package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"refuel/jobs"
	"refuel/pkg/spec"
)

func drillCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "drill [--json] [--nodes N [--min-nodes M]]",
		Short: "run the interruption drill against the running stack (exit 1 if it fails)",
		Long: `Run the field's acceptance test against the running stack: a training job
saves a checkpoint, its instance is taken away with a real interruption
notice, and refuel must get a replacement by itself, resume from the latest
checkpoint and end with exactly the model an uninterrupted run makes. Exit 1
if it does not. starter interrupt does the same to a run of yours.`,
		Example: "  starter drill --json\n  starter drill --nodes 2\n  starter drill --nodes 3 --min-nodes 2 --json",
		Args:    noArgs("starter drill takes no arguments; shape it with --nodes, --tier, --work"),
	}
	conn := addClientFlags(cmd)
	fs := cmd.Flags()
	asJSON := fs.Bool("json", false, "print the drill report as one JSON object")
	var o jobs.DrillOptions
	fs.DurationVar(&o.Work, "work", 20*time.Second, "compute of the drill's training job")
	fs.DurationVar(&o.Interval, "checkpoint-interval", 3*time.Second, "its checkpoint interval")
	fs.DurationVar(&o.NoticeGrace, "notice", 30*time.Second, "interruption notice window before the instance is taken")
	fs.DurationVar(&o.Timeout, "timeout", 5*time.Minute, "give up after this long")
	fs.IntVar(&o.Nodes, "nodes", 1, "run the drill's job as a gang of this many nodes (1..256) and interrupt its last rank")
	fs.IntVar(&o.MinNodes, "min-nodes", 0, "make the gang elastic (resources.min_nodes): its last rank is taken with no stock left to replace it, the gang trains on without it and grows back when stock returns")
	fs.DurationVar(&o.ShrinkAfter, "shrink-after", 2*time.Second, "with --min-nodes, the job's resources.shrink_after: how long the lost node's replacement is waited for")
	fs.DurationVar(&o.Hold, "hold", 10*time.Second, "with --min-nodes, how long the lost node's market in its zone stays out of stock")
	tier := fs.String("tier", "", "the drill job's tier (default flexible: spot first, for a gang too)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return drill(cmd, conn, o, *tier, *asJSON)
	}
	return cmd
}

func drill(cmd *cobra.Command, conn *clientFlags, o jobs.DrillOptions, tier string, asJSON bool) error {
	stdout := cmd.OutOrStdout()
	o.Progress, o.DataConverter = cmd.ErrOrStderr(), conn.dataConverter()
	if o.Nodes < 1 || o.Nodes > spec.MaxNodes {
		return usagef("--nodes %d: want 1..%d (how many instances the drill's job holds at once)", o.Nodes, spec.MaxNodes)
	}
	if o.MinNodes != 0 && (o.MinNodes < 1 || o.MinNodes >= o.Nodes) {
		return usagef("--min-nodes %d: want 1..%d, fewer than --nodes (the fewest nodes the gang trains on)", o.MinNodes, o.Nodes-1)
	}
	if tier != "" {
		if o.Tier = spec.Tier(tier); !slices.Contains(spec.Tiers, o.Tier) {
			return usagef("--tier %q: want one of %v", tier, spec.Tiers)
		}
	}
	ctx := context.Background()
	c, err := conn.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	rep, err := jobs.Drill(ctx, c, o)
	if err != nil {
		return err
	}
	if asJSON {
		if err := json.NewEncoder(stdout).Encode(rep); err != nil {
			return err
		}
		if !rep.Passed {
			return fmt.Errorf("drill failed: %s", rep.Reason)
		}
		return nil
	}
	nodes := ""
	if rep.Nodes > 1 {
		nodes = fmt.Sprintf(" nodes=%d replaced=%d", rep.Nodes, rep.NodesReplaced)
	}
	if rep.ShrunkTo > 0 {
		nodes += fmt.Sprintf(" shrunk_to=%d grew_to=%d", rep.ShrunkTo, rep.GrewTo)
	}
	fmt.Fprintf(stdout, "drill %s: passed=%v checkpoint@%d preempted@%d resumed@%d lost=%d replacement=%.1fs recovery=%.1fs identical=%v%s\n",
		rep.WorkflowID, rep.Passed, rep.CheckpointStep, rep.PreemptedAtStep, rep.ResumedFromStep, rep.LostSteps,
		rep.ReplacementSeconds, rep.RecoverySeconds, rep.FinalIdentical, nodes)
	if !rep.Passed {
		return fmt.Errorf("drill failed: %s", rep.Reason)
	}
	return nil
}
