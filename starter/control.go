package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"refuel/jobs"
	"refuel/workflows"
)

func pauseCommand() *cobra.Command {
	return runSignalCommand("pause", "checkpoint, release the instance and wait", workflows.SignalPause, jobs.Pause)
}

func resumeCommand() *cobra.Command {
	return runSignalCommand("resume", "reacquire and continue a paused run", workflows.SignalResume, jobs.Resume)
}

// runSignal is a jobs call that signals one run.
type runSignal func(ctx context.Context, c client.Client, id string) error

func runSignalCommand(name, short, signal string, send runSignal) *cobra.Command {
	cmd := &cobra.Command{
		Use:     name + " ID",
		Short:   short,
		Example: "  starter " + name + " llama-ft-0427",
		Args:    exactArgs(1, fmt.Sprintf("give one job id: starter %s ID", name)),
	}
	conn := addClientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := context.Background()
		return conn.withClient(ctx, func(c client.Client) error {
			return sendRunSignal(ctx, c, name, signal, send, args[0], cmd.OutOrStdout())
		})
	}
	return cmd
}

// sendRunSignal signals a training run, refusing any other workflow:
// Temporal would accept the signal and buffer it unhandled.
func sendRunSignal(ctx context.Context, c client.Client, cmd, signal string, send runSignal, id string, stdout io.Writer) error {
	if _, err := jobs.RequireType(ctx, c, id, workflows.TrainingRunName,
		"only training runs pause and resume; a service scales itself, and starter stop-service stops one"); err != nil {
		return err
	}
	if err := send(ctx, c, id); err != nil {
		return fmt.Errorf("%s %s: %w", cmd, id, err)
	}
	fmt.Fprintf(stdout, "%s sent to %s\n", signal, id)
	return nil
}

func priorityCommand() *cobra.Command {
	return updateCommand(update[int]{
		use:     "priority ID N",
		short:   "set a run's, a service's or an environment's priority (0..100)",
		example: "  starter priority llama-ft-0427 80",
		usage:   "give a run's or service's id and a priority: starter priority ID N (0..100)",
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

func budgetCommand() *cobra.Command {
	return updateCommand(update[float64]{
		use:     "budget ID USD",
		short:   "set a run's budget; a run waiting over budget goes on once it is raised (0 for none)",
		example: "  starter budget llama-ft-0427 250",
		usage:   "give a run's id and its budget in USD: starter budget ID USD (0 for none)",
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

// update is a command that sends a run one update: `starter NAME ID
// VALUE`.
type update[T any] struct {
	use, short, example, usage string
	value                      func(arg string) (T, error)
	send                       func(ctx context.Context, c client.Client, id string, v T) (T, error)
	said                       func(id string, v T) string
}

func updateCommand[T any](u update[T]) *cobra.Command {
	cmd := &cobra.Command{
		Use: u.use, Short: u.short, Example: u.example,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usageError{u.usage}
			}
			_, err := u.value(args[1])
			return err
		},
	}
	conn := addClientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		v, _ := u.value(args[1]) // checked with the arguments
		ctx := context.Background()
		return conn.withClient(ctx, func(c client.Client) error {
			got, err := u.send(ctx, c, args[0], v)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), u.said(args[0], got))
			return nil
		})
	}
	return cmd
}
