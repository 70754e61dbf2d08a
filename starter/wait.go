package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"refuel/workflows/workload"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"refuel/jobs"
	"refuel/pkg/spec"
	"refuel/workflows"
)

func waitCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "wait ID [--json] [--timeout D]",
		Short:   "wait for a run or service to end: exit 0 when a run completed or a service was stopped, 1 otherwise",
		Example: "  starter wait llama-ft-0427 && echo trained\n  starter wait llama-ft-0427 --json --timeout 2h",
		Args:    exactArgs(1, "give one run's or service's id: starter wait ID"),
	}
	conn := addClientFlags(cmd)
	asJSON := cmd.Flags().Bool("json", false, "print how it ended as one JSON object: id, type, result, state, error, status")
	timeout := cmd.Flags().Duration("timeout", 0, "give up waiting after this long (exit 1; the run goes on); 0 waits for as long as it takes")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if *timeout < 0 {
			return usagef("--timeout %s: give a duration of 0 (no limit) or more, such as 2h", *timeout)
		}
		ctx, id := context.Background(), args[0]
		return conn.withClient(ctx, func(c client.Client) error {
			if _, err := jobs.Workload(ctx, c, id); err != nil {
				return err
			}
			e, err := jobs.WaitEnding(ctx, c, id, *timeout)
			if err != nil {
				return err
			}
			return reportEnding(cmd.OutOrStdout(), e, *asJSON)
		})
	}
	return cmd
}

// reportEnding prints how a run ended and returns *jobs.EndedError
// unless it completed.
func reportEnding(stdout io.Writer, e jobs.Ending, asJSON bool) error {
	if asJSON {
		if err := json.NewEncoder(stdout).Encode(e); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(stdout, endingLine(e))
	}
	if !e.Succeeded() {
		return &jobs.EndedError{Ending: e}
	}
	return nil
}

// endingLine is how a run or service ended, in one line. A service that
// was stopped reads as stopped: Temporal records the stop as a
// cancellation, which it is not to whoever stopped it.
func endingLine(e jobs.Ending) string {
	result := e.Result
	if e.Type == jobs.KindName(workflows.InferenceServiceName) && e.Succeeded() {
		result = string(workflows.StateStopped)
	}
	line := fmt.Sprintf("%s %s", e.ID, result)
	if e.State != "" && e.State != result {
		line += " (state " + e.State + ")"
	}
	var st struct {
		Step       int64   `json:"step"`
		TotalSteps int64   `json:"total_steps"`
		CostUSD    float64 `json:"cost_usd"`
		Checkpoint *struct {
			Step int64 `json:"step"`
		} `json:"last_checkpoint"`
		Market *workload.MarketStatus `json:"market"`
	}
	if len(e.Status) > 0 && json.Unmarshal(e.Status, &st) == nil {
		if m := st.Market; m != nil && m.Clock == workload.ClockMarket {
			// A run on a market's clock: its work and bill are the
			// market's, its trainer's steps wall-clock time's.
			line += fmt.Sprintf(", %.1f of %.1f h of work in market time", m.DoneHours, m.Job.Work.Hours())
			if m.Finished && m.Job.Tier == spec.TierDeadline {
				line += fmt.Sprintf(" (deadline %s, finished at %.2f h of %.2f h)", map[bool]string{true: "met", false: "missed"}[m.DeadlineMet], m.FinishHours, m.Job.Deadline.Hours())
			}
			line += fmt.Sprintf(", cost $%.2f on the market's clock", m.CostUSD)
		} else {
			if st.TotalSteps > 0 {
				line += fmt.Sprintf(", step %d of %d", st.Step, st.TotalSteps)
			}
			if st.Checkpoint != nil {
				line += fmt.Sprintf(", last checkpoint at step %d", st.Checkpoint.Step)
			}
			line += fmt.Sprintf(", cost $%.4f", st.CostUSD)
		}
	}
	if e.Error != "" {
		line += ": " + e.Error
	}
	return line
}

func cancelCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "cancel ID [--timeout D]",
		Short:   "cancel a run or service: it checkpoints, releases everything and ends cancelled",
		Example: "  starter cancel llama-ft-0427",
		Args:    exactArgs(1, "give one run's or service's id: starter cancel ID"),
	}
	conn := addClientFlags(cmd)
	timeout := cmd.Flags().Duration("timeout", 5*time.Minute, "how long to wait for the final checkpoint and the releases (exit 1 after it; the cancellation stands)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if *timeout <= 0 {
			return usagef("--timeout %s: give a positive duration, such as 5m", *timeout)
		}
		ctx, id := context.Background(), args[0]
		return conn.withClient(ctx, func(c client.Client) error {
			e, err := jobs.Cancel(ctx, c, id, *timeout, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), endingLine(e))
			if e.Result != jobs.ResultCancelled {
				return fmt.Errorf("%s ended %s before the cancellation took effect", e.ID, e.Result)
			}
			return nil
		})
	}
	return cmd
}
