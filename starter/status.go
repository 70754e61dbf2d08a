package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"refuel/activities"
	"refuel/jobs"
	"refuel/workflows"
)

func statusCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status ID [--json] [--watch]",
		Short: "show a run's status",
		Example: "  starter status llama-ft-0427\n" +
			"  starter status llama-ft-0427 --watch   # exit 1 if the run fails or is cancelled",
		Args: exactArgs(1, "give one job id: starter status ID"),
	}
	conn := addClientFlags(cmd)
	asJSON := cmd.Flags().Bool("json", false, "print the status query's answer as JSON")
	watch := cmd.Flags().Bool("watch", false, "follow live progress until the run ends; exit 1 if it failed, was cancelled or terminated")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, id, stdout := context.Background(), args[0], cmd.OutOrStdout()
		return conn.withClient(ctx, func(c client.Client) error {
			if _, err := jobs.RequireType(ctx, c, id, workflows.TrainingRunName, "use starter service-status for a service, starter pool for the pool"); err != nil {
				return err
			}
			if *watch {
				return watchStatus(ctx, c, id, stdout, *asJSON)
			}
			st, err := jobs.Status(ctx, c, id)
			if err != nil {
				return err
			}
			if *asJSON {
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			printStatus(stdout, st, jobs.LiveProgress(ctx, c, id))
			return nil
		})
	}
	return cmd
}

func watchStatus(ctx context.Context, c client.Client, id string, stdout io.Writer, asJSON bool) error {
	for {
		st, err := jobs.Status(ctx, c, id)
		if err != nil {
			return err
		}
		if asJSON {
			b, _ := json.Marshal(st)
			fmt.Fprintln(stdout, string(b))
		} else {
			fmt.Fprintln(stdout, statusLine(st, jobs.LiveProgress(ctx, c, id)))
		}
		if w, err := jobs.Describe(ctx, c, id); err == nil && !w.Running {
			// A run that failed, was cancelled or terminated is a failure
			// to whoever watched it (exit 1).
			e, err := jobs.WaitEnding(ctx, c, id, 0)
			if err != nil {
				return err
			}
			if !e.Succeeded() {
				return &jobs.EndedError{Ending: e}
			}
			return nil
		}
		time.Sleep(time.Second)
	}
}

// liveProgress is the run's step and steps in all: the status's, moved on by
// the heartbeat's, which knows them before the first checkpoint.
func liveProgress(st workflows.Status, live activities.Progress) (step, total int64) {
	return max(st.Step, live.Step), max(st.TotalSteps, live.TotalSteps)
}

// statusLine is one line of live progress.
func statusLine(st workflows.Status, live activities.Progress) string {
	step, total := liveProgress(st, live)
	bar := progressBar(step, total, 20)
	where := "-"
	if st.Instance != nil {
		where = st.Instance.ID + " (" + st.Instance.Market + ")"
	}
	if n := len(st.Nodes); n > 1 {
		where += fmt.Sprintf(" and %d more node%s", n-1, map[bool]string{true: "s"}[n > 2])
	}
	return fmt.Sprintf("%s %-22s %s step %d/%d  on %s  preempted %d recovered %d  $%.4f",
		time.Now().Format("15:04:05"), st.State, bar, step, total, where, st.Preemptions, st.Recoveries, st.CostUSD)
}

// shortOf says how many nodes a gang asked for when it trains on fewer
// (an elastic gang short of stock), and how often it changed width.
func shortOf(st workflows.Status) string {
	out := ""
	if st.NodesAsked > len(st.Nodes) {
		out = fmt.Sprintf(" training of %d asked", st.NodesAsked)
	}
	if n := len(st.Ledger.Resizes); n > 0 {
		out += fmt.Sprintf(" (resized %d time%s)", n, map[bool]string{true: "s"}[n > 1])
	}
	return out
}

func progressBar(done, total int64, width int) string {
	if total <= 0 {
		return "[" + strings.Repeat("?", width) + "]"
	}
	n := int(min(done, total) * int64(width) / total)
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "]"
}

func printStatus(w io.Writer, st workflows.Status, live activities.Progress) {
	fmt.Fprintf(w, "job        %s (team %s, tier %s, priority %d)\n", st.ID, st.Team, st.Tier, st.Priority)
	fmt.Fprintf(w, "state      %s%s\n", st.State, map[bool]string{true: " (pausing)"}[st.Paused && st.State != workflows.StatePaused])
	step, total := liveProgress(st, live)
	fmt.Fprintf(w, "progress   %s step %d of %d\n", progressBar(step, total, 30), step, total)
	if ck := st.LastCheckpoint; ck != nil {
		fmt.Fprintf(w, "checkpoint step %d at %s\n           %s\n", ck.Step, ck.Time.Format(time.RFC3339), ck.URL)
	}
	if len(st.Nodes) > 0 {
		// A gang: every node by rank, rank 0 the one whose checkpoints
		// are the job's.
		fmt.Fprintf(w, "nodes      %d%s, %d replaced while the others waited\n", len(st.Nodes), shortOf(st), st.NodeReplacements)
		for _, n := range st.Nodes {
			if in := n.Instance; in != nil {
				fmt.Fprintf(w, "  rank %-3d %s %s (zone %s, %s) $%.4f/h since %s\n", n.Rank, in.ID, in.Offering, in.Zone, in.Market, in.PricePerHour, in.Since.Format(time.TimeOnly))
			}
		}
	} else if in := st.Instance; in != nil {
		fmt.Fprintf(w, "instance   %s %s $%.4f/h since %s\n", in.ID, in.Offering, in.PricePerHour, in.Since.Format(time.TimeOnly))
	}
	if a := st.Admission; a != nil && a.Waiting != "" {
		fmt.Fprintf(w, "waiting    %s\n", a.Waiting)
	}
	if m := st.Market; m != nil && m.Why != "" {
		fmt.Fprintf(w, "market     %s\n", m.Why)
	}
	if until := st.WaitingUntil; until != nil && st.State == workflows.StateWaiting {
		fmt.Fprintf(w, "waiting    out %s until %s, then tries its offerings again\n", st.WaitingOn, until.Local().Format(time.TimeOnly))
	}
	if a := st.Admission; a != nil && a.Queued {
		fmt.Fprintf(w, "queued     with the capacity pool (starter pool says why each request waits)\n")
	}
	fmt.Fprintf(w, "preempted  %d, recovered %d, lost work %.1fs\n", st.Preemptions, st.Recoveries, st.LostWorkSecs)
	if r := st.Restarts; r.Any() {
		fmt.Fprintf(w, "restarts   %s (max_restarts caps these); %s\n", r.Capped(), r.Uncapped())
	}
	if st.Changeovers > 0 {
		fmt.Fprintf(w, "moved      %d times from on-demand back to spot\n", st.Changeovers)
	}
	fmt.Fprintf(w, "cost       $%.4f\n", st.CostUSD)
	if st.StoreURL != "" {
		fmt.Fprintf(w, "store      %s (starter logs %s)\n", st.StoreURL, st.ID)
	}
	printFailures(w, st.Failures, st.StockOuts)
}

// printFailures prints the stock-outs in one line and each failure that
// is a failure in its own.
func printFailures(w io.Writer, failures []workflows.Failure, stockOuts *workflows.StockOuts) {
	fs, so := workflows.FoldStockOuts(failures, stockOuts)
	if so != nil {
		local := *so
		local.Last = local.Last.Local()
		fmt.Fprintln(w, local)
	}
	for _, f := range fs {
		fmt.Fprintf(w, "failure    %s %s %s: %s\n", f.Time.Format(time.TimeOnly), f.Class, f.Offering, f.Message)
	}
}
