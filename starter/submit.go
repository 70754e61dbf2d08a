package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"refuel/jobs"
	"refuel/pkg/spec"
)

func submitCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "submit FILE [--wait [--json]]",
		Short: "start a TrainingRun from a YAML or JSON JobSpec",
		Example: "  starter submit examples/job.yaml\n" +
			"  starter submit examples/job.yaml --wait   # exit 0 only when the run completes",
		Args: exactArgs(1, "give one JobSpec file: starter submit job.yaml"),
	}
	conn := addClientFlags(cmd)
	wait := cmd.Flags().Bool("wait", false, "wait for the run to end: exit 0 when it completed, 1 when it failed, was cancelled or terminated")
	asJSON := cmd.Flags().Bool("json", false, "with --wait, print how it ended as starter wait --json does")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if *asJSON && !*wait {
			return usagef("--json describes how the run ended: use it with --wait")
		}
		js, err := readJobSpec(args[0])
		if err != nil {
			return err
		}
		stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
		ctx := context.Background()
		return conn.withClient(ctx, func(c client.Client) error {
			run, err := jobs.Submit(ctx, c, js)
			if err != nil {
				return err
			}
			if !*wait {
				fmt.Fprintf(stdout, "submitted %s (run %s)\n  watch: starter status %s --watch\n", js.ID, run.GetRunID(), js.ID)
				return nil
			}
			fmt.Fprintf(stderr, "submitted %s (run %s); waiting for it to end\n", js.ID, run.GetRunID())
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
