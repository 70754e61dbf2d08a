package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"refuel/jobs"
	"refuel/pkg/estimate"
	"refuel/pkg/spec"
)

func submitCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "submit FILE [--wait [--json]] [--dry-run [--json]]",
		Short: "start a TrainingRun from a YAML or JSON JobSpec",
		Long: `Start a TrainingRun from a YAML or JSON JobSpec. The run is estimated
first, as starter estimate does for the spec as written, and keeps the
estimate: its status shows it beside what the run cost and when it
finished. --dry-run prints what starter estimate prints and starts
nothing.`,
		Example: "  starter submit examples/job.yaml\n" +
			"  starter submit examples/job.yaml --wait   # exit 0 only when the run completes\n" +
			"  starter submit examples/deadline-job.yaml --dry-run   # the estimate; nothing starts",
		Args: exactArgs(1, "give one JobSpec file: starter submit job.yaml"),
	}
	conn := addClientFlags(cmd)
	dep := addDeploymentFlags(cmd)
	wait := cmd.Flags().Bool("wait", false, "wait for the run to end: exit 0 when it completed, 1 when it failed, was cancelled or terminated")
	asJSON := cmd.Flags().Bool("json", false, "with --wait, print how it ended as starter wait --json does; with --dry-run, the estimate as starter estimate --json does")
	dryRun := cmd.Flags().Bool("dry-run", false, "print the estimate starter estimate prints, and start and reserve nothing")
	noEstimate := cmd.Flags().Bool("no-estimate", false, "submit without estimating first: the run's status then carries no estimate")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		switch {
		case *dryRun && (*wait || *noEstimate):
			return usagef("--dry-run starts nothing: use it without --wait and --no-estimate")
		case *asJSON && !*wait && !*dryRun:
			return usagef("--json describes how the run ended: use it with --wait (or with --dry-run, for the estimate)")
		}
		js, err := readJobSpec(args[0])
		if err != nil {
			return err
		}
		stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
		ctx := context.Background()
		if *dryRun {
			return printEstimate(ctx, js, dep, *asJSON, stdout, stderr)
		}
		var opts []jobs.SubmitOption
		var estimated *estimate.Submitted
		if !*noEstimate {
			r, at, err := estimateJob(ctx, js, dep, false, stderr)
			if err != nil {
				fmt.Fprintf(stderr, "submit: %s is submitted without an estimate: %v\n", js.ID, err)
			} else {
				estimated = jobs.Submitted(r, at)
				opts = append(opts, jobs.WithEstimate(estimated))
				for _, p := range r.Problems {
					fmt.Fprintf(stderr, "submit: %s\n", p.Line())
				}
			}
		}
		return conn.withClient(ctx, func(c client.Client) error {
			run, err := jobs.Submit(ctx, c, js, opts...)
			if err != nil {
				return err
			}
			if !*wait {
				fmt.Fprintf(stdout, "submitted %s (run %s)\n", js.ID, run.GetRunID())
				if estimated != nil {
					fmt.Fprintf(stdout, "  estimate: %s\n", estimated.Line())
				}
				fmt.Fprintf(stdout, "  watch: starter status %s --watch\n", js.ID)
				return nil
			}
			fmt.Fprintf(stderr, "submitted %s (run %s); waiting for it to end\n", js.ID, run.GetRunID())
			if estimated != nil {
				fmt.Fprintf(stderr, "  estimate: %s\n", estimated.Line())
			}
			e, err := jobs.WaitEnding(ctx, c, js.ID, 0)
			if err != nil {
				return err
			}
			return reportEnding(stdout, e, *asJSON)
		})
	}
	return cmd
}

// readJobSpec reads a JobSpec with its field-level errors, before
// anything starts. A ServiceSpec given by mistake is named as one, rather
// than as a JobSpec with a dozen unknown fields.
func readJobSpec(path string) (spec.JobSpec, error) {
	js, err := spec.ReadJobSpec(path, time.Now())
	if err == nil {
		return js, nil
	}
	if _, serr := spec.ReadServiceSpec(path); serr == nil {
		return js, usagef("%s is a ServiceSpec (an inference service), not a JobSpec: start it with starter serve %s", path, path)
	}
	return js, err
}

// readServiceSpec reads a ServiceSpec with its field-level errors, before
// anything starts. A JobSpec given by mistake is named as one, as submit
// names a ServiceSpec.
func readServiceSpec(path string) (spec.ServiceSpec, error) {
	ss, err := spec.ReadServiceSpec(path)
	if err == nil {
		return ss, nil
	}
	if _, jerr := spec.ReadJobSpec(path, time.Now()); jerr == nil {
		return ss, usagef("%s is a JobSpec (a training run), not a ServiceSpec: start it with starter submit %s", path, path)
	}
	return ss, err
}
