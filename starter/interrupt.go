package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"refuel/jobs"
)

func interruptCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "interrupt ID [--node RANK] [--grace D] [--json]",
		Short: "serve a real interruption notice to the instance a run holds and report its recovery as the drill does",
		Long: `Serve a real interruption notice to the instance a running training run
holds (a gang's rank --node), as a spot market does: the node agent sees
the notice, stops the trainer with SIGTERM, uploads its final checkpoint
within --grace, and the instance is taken when the grace ends. Then wait
for refuel to get a replacement by itself and resume from the latest
checkpoint, and report it with the drill's fields (exit 1 if the run did
not recover from a checkpoint at least as new as the one at the notice).

Any trainer, on the local and sim clouds and on the aws provider pointed at
the sim's EC2 endpoint (worker --provider aws --ec2-sim ADDR): the notice
is the one the instance metadata service serves. On real EC2 refuel cannot
ask AWS for a notice, so the command fails naming the instance; use AWS
Fault Injection Service (aws:ec2:send-spot-instance-interruptions) on that
instance instead: refuel recovers from it the same way, and starter status
shows the recovery.`,
		Example: "  starter interrupt pytorch-example --json\n" +
			"  starter interrupt llama-ft-0427 --node 1 --grace 2m   # a gang's rank 1, with EC2's two minutes",
		Args: exactArgs(1, "give one run's id: starter interrupt ID [--node RANK]"),
	}
	conn := addClientFlags(cmd)
	o := jobs.InterruptOptions{Progress: cmd.ErrOrStderr()}
	cmd.Flags().IntVar(&o.Node, "node", 0, "the gang rank whose instance is interrupted (0 for a one-node run)")
	cmd.Flags().DurationVar(&o.Grace, "grace", 30*time.Second, "how long the instance lives after the notice (EC2 gives 2m)")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 10*time.Minute, "give up waiting for the recovery after this long")
	asJSON := cmd.Flags().Bool("json", false, "print the report as one JSON object: passed, workflow_id, node, checkpoint_step, preempted_at_step, resumed_from_step, lost_steps, replacement_seconds, recovery_seconds, ...")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		switch {
		case o.Node < 0:
			return usagef("--node %d: ranks count from 0", o.Node)
		case o.Grace < 0:
			return usagef("--grace %s: give 0 (taken at once) or more, such as 30s", o.Grace)
		case o.Timeout <= 0:
			return usagef("--timeout %s: give a positive duration, such as 10m", o.Timeout)
		}
		o.Progress, o.DataConverter = cmd.ErrOrStderr(), conn.dataConverter()
		ctx, stdout := context.Background(), cmd.OutOrStdout()
		return conn.withClient(ctx, func(c client.Client) error {
			rep, err := jobs.InterruptRun(ctx, c, args[0], o)
			if err != nil {
				return err
			}
			if *asJSON {
				if err := json.NewEncoder(stdout).Encode(rep); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(stdout, "interrupt %s rank %d: passed=%v checkpoint@%d preempted@%d resumed@%d lost=%d replacement=%.1fs recovery=%.1fs (%s -> %s)\n",
					rep.WorkflowID, rep.Node, rep.Passed, rep.CheckpointStep, rep.PreemptedAtStep, rep.ResumedFromStep, rep.LostSteps,
					rep.ReplacementSeconds, rep.RecoverySeconds, rep.InterruptedInstance, rep.ReplacementInstance)
			}
			if !rep.Passed {
				return fmt.Errorf("the run did not recover as it should: %s", rep.Reason)
			}
			return nil
		})
	}
	return cmd
}
