package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
)

func runCancel(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("cancel", flag.ContinueOnError)
	fs.SetOutput(stderr)
	conn := addConnFlags(fs)
	timeout := fs.Duration("timeout", 5*time.Minute, "how long to wait for the final checkpoint and the releases (exit 1 after it; the cancellation stands)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("give one run's or service's id: starter cancel ID")
	}
	if *timeout <= 0 {
		return usagef("--timeout %s: give a positive duration, such as 5m", *timeout)
	}
	ctx := context.Background()
	c, err := conn.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	e, err := cancelWorkload(ctx, c, pos[0], *timeout, stderr)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, endingLine(e))
	if e.Result != resultCancelled {
		return fmt.Errorf("%s ended %s before the cancellation took effect", e.ID, e.Result)
	}
	return nil
}

// cancelWorkload asks a run or service to cancel and waits until it has
// ended: a run checkpoints, releases its instance and leaves the pool; a
// service gives back every replica.
func cancelWorkload(ctx context.Context, c client.Client, id string, timeout time.Duration, progress io.Writer) (Ending, error) {
	w, err := requireWorkload(ctx, c, id)
	if err != nil {
		return Ending{}, err
	}
	if !w.Running {
		e, err := describeEnding(ctx, c, id, nil)
		if err != nil {
			return e, err
		}
		return e, fmt.Errorf("%s has already ended (%s): there is nothing to cancel", id, e.Result)
	}
	err = c.CancelWorkflow(ctx, id, "")
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return Ending{}, fmt.Errorf("%s ended while being cancelled: starter wait %s says how", id, id)
	}
	if err != nil {
		return Ending{}, fmt.Errorf("cancel %s: %w", id, err)
	}
	fmt.Fprintf(progress, "cancellation of %s requested; waiting for its final checkpoint and releases\n", id)
	return waitEnding(ctx, c, id, timeout)
}
