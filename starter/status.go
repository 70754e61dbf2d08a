package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"refuel/workflows/training"
	"refuel/workflows/workload"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"refuel/jobs"
	"refuel/pkg/spec"
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
	asJSON := cmd.Flags().Bool("json", false, "print the status query's answer as JSON, with step and last_checkpoint from the agent's latest report")
	watch := cmd.Flags().Bool("watch", false, "follow live progress until the run ends; exit 1 if it failed, was cancelled or terminated")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, id, stdout := context.Background(), args[0], cmd.OutOrStdout()
		dc := conn.dataConverter()
		return conn.withClient(ctx, func(c client.Client) error {
			if _, err := jobs.RequireType(ctx, c, id, workflows.TrainingRunName, "use starter service-status for a service, starter pool for the pool"); err != nil {
				return err
			}
			if *watch {
				return watchStatus(ctx, c, dc, id, stdout, *asJSON)
			}
			st, err := jobs.StatusNow(ctx, c, dc, id)
			if err != nil {
				return err
			}
			if *asJSON {
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			printStatus(stdout, st)
			return nil
		})
	}
	return cmd
}

func watchStatus(ctx context.Context, c client.Client, dc converter.DataConverter, id string, stdout io.Writer, asJSON bool) error {
	for {
		st, err := jobs.StatusNow(ctx, c, dc, id)
		if err != nil {
			return err
		}
		if asJSON {
			b, _ := json.Marshal(st)
			fmt.Fprintln(stdout, string(b))
		} else {
			fmt.Fprintln(stdout, statusLine(st, time.Now()))
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

// statusLine is one line of live progress, as of at.
func statusLine(st training.Status, at time.Time) string {
	where := "-"
	if st.Instance != nil {
		where = st.Instance.ID + " (" + st.Instance.Market + ")"
	}
	if n := len(st.Nodes); n > 1 {
		where += fmt.Sprintf(" and %d more node%s", n-1, map[bool]string{true: "s"}[n > 2])
	}
	progress := fmt.Sprintf("%s step %d/%d", progressBar(st.Step, st.TotalSteps, 20), st.Step, st.TotalSteps)
	bill := fmt.Sprintf("$%.4f", st.CostUSD)
	if m := marketClock(st); m != nil {
		progress = fmt.Sprintf("%s %.1f/%.1f h of work in market time", marketBar(m, 20), m.DoneHours, m.Job.Work.Hours())
		bill = fmt.Sprintf("$%.2f on the market", m.CostUSD)
	}
	return fmt.Sprintf("%s %-22s %s  on %s  preempted %d recovered %d  %s",
		at.Format(time.TimeOnly), st.State, progress, where, st.Preemptions, st.Recoveries, bill)
}

// marketClock is the account of a run that keeps a market's time (worker
// --sim-market-time), nil for a run on the wall clock: its work, deadline
// and bill are the market's, and its trainer's steps, taken in wall time,
// say nothing of them.
func marketClock(st training.Status) *workload.MarketStatus {
	if m := st.Market; m != nil && m.Clock == workload.ClockMarket {
		return m
	}
	return nil
}

// marketBar is the progress bar of a run on a market's clock: the work
// done of the work, in market hours.
func marketBar(m *workload.MarketStatus, width int) string {
	const tenthsOfAnHour = 360 // seconds
	done := int64(m.DoneHours * 3600 / tenthsOfAnHour)
	if m.Finished {
		done = int64(m.Job.Work.Seconds() / tenthsOfAnHour)
	}
	return progressBar(done, int64(m.Job.Work.Seconds()/tenthsOfAnHour), width)
}

// shortOf says how many nodes a gang asked for when it trains on fewer
// (an elastic gang short of stock), and how often it changed width.
func shortOf(st training.Status) string {
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

func printStatus(w io.Writer, st training.Status) {
	fmt.Fprintf(w, "job        %s (team %s, tier %s, priority %d)\n", st.ID, st.Team, st.Tier, st.Priority)
	fmt.Fprintf(w, "state      %s%s\n", st.State, map[bool]string{true: " (pausing)"}[st.Paused && st.State != workflows.StatePaused])
	market := marketClock(st)
	if market != nil {
		printMarketProgress(w, market)
	} else {
		fmt.Fprintf(w, "progress   %s step %d of %d\n", progressBar(st.Step, st.TotalSteps, 30), st.Step, st.TotalSteps)
	}
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
	if market != nil {
		fmt.Fprintf(w, "cost       $%.2f on the market's clock: spot %.2f h, on-demand %.2f h, %d changeovers (policy %s)\n",
			market.CostUSD, market.SpotHours, market.OnDemandHours, market.Changeovers, market.Policy)
		if market.ProbeUSD > 0 {
			fmt.Fprintf(w, "           $%.4f of it for probes: tries of spot taken only to learn a zone's stock\n", market.ProbeUSD)
		}
		fmt.Fprintf(w, "           $%.4f for the instances on the wall clock\n", st.CostUSD)
	} else {
		fmt.Fprintf(w, "cost       $%.4f\n", st.CostUSD)
	}
	printBudget(w, st)
	if e := st.Estimate; e != nil {
		fmt.Fprintf(w, "estimated  at submit: %s\n", e.Line())
		if o := e.Outcome; o != nil {
			within := "outside"
			if o.CostWithin {
				within = "within"
			}
			fmt.Fprintf(w, "           it cost $%.2f (%s p10..p90) and ended %.1fh after submit\n", o.CostUSD, within, o.FinishHours)
		}
	}
	if st.StoreURL != "" {
		fmt.Fprintf(w, "store      %s (starter logs %s)\n", st.StoreURL, st.ID)
	}
	printFailures(w, st.Failures, st.StockOuts)
}

// printMarketProgress is the progress of a run on a market's clock, in
// market hours: the work done, the market time gone, and the deadline,
// met or missed once the work is done.
func printMarketProgress(w io.Writer, m *workload.MarketStatus) {
	work, deadline := m.Job.Work.Hours(), m.Job.Deadline.Hours()
	if m.Finished {
		fmt.Fprintf(w, "progress   %s %.1f of %.1f h of work in market time\n", marketBar(m, 30), work, work)
	} else {
		gone := float64(len(m.Decisions)) * m.TickSeconds / 3600
		fmt.Fprintf(w, "progress   %s %.1f of %.1f h of work in market time, %.2f h of market time gone\n", marketBar(m, 30), m.DoneHours, work, gone)
		if m.Job.Tier == spec.TierDeadline {
			fmt.Fprintf(w, "deadline   %.2f h of market time after the start, %.2f h left\n", deadline, max(0, deadline-gone))
		}
		return
	}
	switch {
	case m.Job.Tier != spec.TierDeadline:
		fmt.Fprintf(w, "finished   at %.2f h of market time\n", m.FinishHours)
	case m.DeadlineMet:
		fmt.Fprintf(w, "deadline   met: finished at %.2f h of market time, the deadline %.2f h after the start\n", m.FinishHours, deadline)
	default:
		fmt.Fprintf(w, "deadline   missed: finished at %.2f h of market time, the deadline %.2f h after the start\n", m.FinishHours, deadline)
	}
}

// printBudget says what a run with a budget may spend and has spent, and
// for a run waiting over its budget, how to let it go on.
func printBudget(w io.Writer, st training.Status) {
	switch {
	case st.State == workflows.StateOverBudget:
		fmt.Fprintf(w, "budget     %s reached ($%.4f spent): the run checkpointed, gave its instance back and waits\n", budgetDollars(st.BudgetUSD), st.CostUSD)
		fmt.Fprintf(w, "           to go on, raise it above what was spent: starter budget %s USD\n", st.ID)
	case st.BudgetUSD > 0:
		fmt.Fprintf(w, "budget     %s, $%.4f spent\n", budgetDollars(st.BudgetUSD), st.CostUSD)
	}
}

// budgetDollars is a budget as it was given: in dollars and cents, or
// finer where it was (a test's $0.002).
func budgetDollars(usd float64) string {
	if cents := usd * 100; math.Abs(cents-math.Round(cents)) < 1e-9 {
		return fmt.Sprintf("$%.2f", usd)
	}
	return fmt.Sprintf("$%.4f", usd)
}

// printFailures prints the stock-outs in one line and each failure that
// is a failure in its own.
func printFailures(w io.Writer, failures []workload.Failure, stockOuts *workload.StockOuts) {
	fs, so := workload.FoldStockOuts(failures, stockOuts)
	if so != nil {
		local := *so
		local.Last = local.Last.Local()
		fmt.Fprintln(w, local)
	}
	for _, f := range fs {
		fmt.Fprintf(w, "failure    %s %s %s: %s\n", f.Time.Format(time.TimeOnly), f.Class, f.Offering, f.Message)
	}
}
