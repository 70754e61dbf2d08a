package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"refuel/jobs"
	"refuel/pkg/spec"
)

func runSubmit(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("submit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	conn := addConnFlags(fs)
	wait := fs.Bool("wait", false, "wait for the run to end: exit 0 when it completed, 1 when it failed, was cancelled or terminated")
	asJSON := fs.Bool("json", false, "with --wait, print how it ended as starter wait --json does")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("give one JobSpec file: starter submit job.yaml")
	}
	if *asJSON && !*wait {
		return usagef("--json describes how the run ended: use it with --wait")
	}
	js, err := spec.ReadJobSpec(pos[0], time.Now())
	if err != nil {
		return err // field-level errors, before anything starts
	}
	ctx := context.Background()
	c, err := conn.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	run, err := jobs.Submit(ctx, c, js)
	if err != nil {
		return err
	}
	if !*wait {
		fmt.Fprintf(stdout, "submitted %s (run %s)\n  watch: starter status %s --watch\n", js.ID, run.GetRunID(), js.ID)
		return nil
	}
	fmt.Fprintf(stderr, "submitted %s (run %s); waiting for it to end\n", js.ID, run.GetRunID())
	e, err := waitEnding(ctx, c, js.ID, 0)
	if err != nil {
		return err
	}
	return reportEnding(stdout, e, *asJSON)
}
