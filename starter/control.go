package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"

	"refuel/jobs"
	"refuel/pkg/spec"
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
			switch {
			case err != nil:
				return 0, usagef("priority %q is not an integer: use 0..%d", arg, spec.MaxPriority)
			case p < 0 || p > spec.MaxPriority:
				return 0, usagef("priority %d is out of range: use an integer from 0 (lowest) to %d (highest)", p, spec.MaxPriority)
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
			switch {
			case err != nil || math.IsNaN(usd) || math.IsInf(usd, 0):
				return 0, usagef("budget %q is not a sum of money: give USD 0 or more, such as 250 or 12.5 (0 for none)", arg)
			case usd < 0:
				return 0, usagef("budget %s is negative: a budget must be positive, such as 250 or 12.5 (0 for none)", arg)
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
	// The flag parser reads a negative value (-5) as short flags: it is
	// the value, and what is wrong with it is said as such.
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		var unknown *pflag.NotExistError
		if errors.As(err, &unknown) {
			if arg := "-" + unknown.GetSpecifiedShortnames(); isNumber(arg) {
				if _, verr := u.value(arg); verr != nil {
					return verr
				}
			}
		}
		return usageError{err.Error()}
	})
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

// isNumber reports whether arg is a number, as a negative value is.
func isNumber(arg string) bool {
	_, err := strconv.ParseFloat(arg, 64)
	return err == nil
}
