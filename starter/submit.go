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
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("give one JobSpec file: starter submit job.yaml")
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
	fmt.Fprintf(stdout, "submitted %s (run %s)\n  watch: starter status %s --watch\n", js.ID, run.GetRunID(), js.ID)
	return nil
}
