package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"

	"go.temporal.io/sdk/client"

	"refuel/jobs"
	"refuel/workflows"
)

func runPause(args []string, stdout, stderr io.Writer) error {
	return signalRun("pause", workflows.SignalPause, args, stdout, stderr)
}

func runResume(args []string, stdout, stderr io.Writer) error {
	return signalRun("resume", workflows.SignalResume, args, stdout, stderr)
}

func signalRun(cmd, signal string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	conn := addConnFlags(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("give one job id: starter %s ID", cmd)
	}
	ctx := context.Background()
	c, err := conn.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return sendRunSignal(ctx, c, cmd, signal, pos[0], stdout)
}

// sendRunSignal signals a training run, refusing any other workflow:
// Temporal would accept the signal and buffer it unhandled.
func sendRunSignal(ctx context.Context, c client.Client, cmd, signal, id string, stdout io.Writer) error {
	if _, err := requireType(ctx, c, id, workflows.TrainingRunName,
		"only training runs pause and resume; a service scales itself, and starter stop-service stops one"); err != nil {
		return err
	}
	if err := c.SignalWorkflow(ctx, id, "", signal, nil); err != nil {
		return fmt.Errorf("%s %s: %w", cmd, id, err)
	}
	fmt.Fprintf(stdout, "%s sent to %s\n", signal, id)
	return nil
}

func runPriority(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("priority", flag.ContinueOnError)
	fs.SetOutput(stderr)
	conn := addConnFlags(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("give a run's or service's id and a priority: starter priority ID N (0..100)")
	}
	p, err := strconv.Atoi(pos[1])
	if err != nil {
		return usagef("priority %q is not an integer: use 0..100", pos[1])
	}
	ctx := context.Background()
	c, err := conn.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	got, err := jobs.SetPriority(ctx, c, pos[0], p)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s priority is now %d\n", pos[0], got)
	return nil
}

func runBudget(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("budget", flag.ContinueOnError)
	fs.SetOutput(stderr)
	conn := addConnFlags(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("give a run's id and its budget in USD: starter budget ID USD (0 for none)")
	}
	usd, err := strconv.ParseFloat(pos[1], 64)
	if err != nil || math.IsNaN(usd) || math.IsInf(usd, 0) || usd < 0 {
		return usagef("budget %q is not a sum of money: give USD 0 or more, such as 250 or 12.5 (0 for none)", pos[1])
	}
	ctx := context.Background()
	c, err := conn.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	got, err := jobs.SetBudget(ctx, c, pos[0], usd)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s budget is now $%.2f\n", pos[0], got)
	return nil
}
