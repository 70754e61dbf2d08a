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
	return runUpdate(args, stdout, stderr, updateCommand[int]{
		name:  "priority",
		usage: "give a run's or service's id and a priority: starter priority ID N (0..100)",
		value: func(arg string) (int, error) {
			p, err := strconv.Atoi(arg)
			if err != nil {
				return 0, usagef("priority %q is not an integer: use 0..100", arg)
			}
			return p, nil
		},
		send: jobs.SetPriority,
		said: func(id string, p int) string { return fmt.Sprintf("%s priority is now %d", id, p) },
	})
}

func runBudget(args []string, stdout, stderr io.Writer) error {
	return runUpdate(args, stdout, stderr, updateCommand[float64]{
		name:  "budget",
		usage: "give a run's id and its budget in USD: starter budget ID USD (0 for none)",
		value: func(arg string) (float64, error) {
			usd, err := strconv.ParseFloat(arg, 64)
			if err != nil || math.IsNaN(usd) || math.IsInf(usd, 0) || usd < 0 {
				return 0, usagef("budget %q is not a sum of money: give USD 0 or more, such as 250 or 12.5 (0 for none)", arg)
			}
			return usd, nil
		},
		send: jobs.SetBudget,
		said: func(id string, usd float64) string { return fmt.Sprintf("%s budget is now $%.2f", id, usd) },
	})
}

// updateCommand is a command that sends a run one update: `starter NAME
// ID VALUE`.
type updateCommand[T any] struct {
	name, usage string
	value       func(arg string) (T, error)
	send        func(ctx context.Context, c client.Client, id string, v T) (T, error)
	said        func(id string, v T) string
}

func runUpdate[T any](args []string, stdout, stderr io.Writer, u updateCommand[T]) error {
	fs := flag.NewFlagSet(u.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	conn := addConnFlags(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("%s", u.usage)
	}
	v, err := u.value(pos[1])
	if err != nil {
		return err
	}
	ctx := context.Background()
	c, err := conn.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	got, err := u.send(ctx, c, pos[0], v)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, u.said(pos[0], got))
	return nil
}
