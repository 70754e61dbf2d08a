package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"refuel/pkg/estimate"
	"refuel/pkg/policy"
	"refuel/pkg/replay"
	"refuel/pkg/spec"
	"refuel/pkg/trace"
)

func estimateBenchCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "estimate-bench [--traces DIR]",
		Short: "check the estimates against the runs they estimate (make bench-estimate)",
		Long: `Estimate a deadline run at many start times on the traces under --traces,
from the market memory a deployment would have had then (each zone's trace
up to the start), then replay the run's policy from that start, and report
how often the real cost fell within the estimate's p10 to p90 (target 80%
± 10) and the p50's mean error (target within 15%).`,
		Example: "  starter estimate-bench --traces ../shared/traces/availability   # tuned on\n" +
			"  starter estimate-bench --traces ../shared/traces/preemption     # the hold-out",
		Args: noArgs("starter estimate-bench takes no arguments: give the traces with --traces"),
	}
	var f estimateBenchFlags
	fl := cmd.Flags()
	dflt := os.Getenv("REFUEL_TRACES")
	if dflt == "" {
		dflt = filepath.Join("..", "shared", "traces", "availability")
	}
	fl.StringVar(&f.dir, "traces", dflt, "folder of traces, searched at any depth; each trace is a zone, and the traces of one instance type in one folder also a market of several zones (env REFUEL_TRACES)")
	fl.IntVar(&f.starts, "starts", 6, "start times per market and deadline, spread evenly from --history after the traces' start to the last that leaves room for the deadline")
	fl.IntVar(&f.windows, "windows", estimate.DefaultWindows, "windows each estimate replays")
	fl.DurationVar(&f.history, "history", 3*24*time.Hour, "the least of each trace a start has behind it: the market memory it is estimated from")
	fl.StringVar(&f.deadlines, "deadlines", "52h,70h", "comma-separated deadlines from the start")
	fl.BoolVar(&f.asJSON, "json", false, "print one JSON object per estimate, then one per set")
	f.knowing.register(fl)
	f.job = replay.Job{Tier: spec.TierDeadline, Work: 48 * time.Hour, RestartOverhead: 12 * time.Minute, SpotPrice: 0.9701, OnDemandPrice: 3.06}
	fl.DurationVar(&f.job.Work, "work", f.job.Work, "compute time of the job")
	fl.DurationVar(&f.job.RestartOverhead, "restart-overhead", f.job.RestartOverhead, "restart overhead")
	fl.Float64Var(&f.job.SpotPrice, "spot-price", f.job.SpotPrice, "spot USD per hour")
	fl.Float64Var(&f.job.OnDemandPrice, "ondemand-price", f.job.OnDemandPrice, "on-demand USD per hour")
	_ = cmd.MarkFlagDirname("traces")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		var err error
		if f.job.LearnsByTrying, err = f.knowing.learns(cmd); err != nil {
			return err
		}
		return runEstimateBench(f, cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
	return cmd
}

// estimateBenchFlags are estimate-bench's flags.
type estimateBenchFlags struct {
	dir, deadlines  string
	starts, windows int
	history         time.Duration
	asJSON          bool
	// knowing is how the estimates and the runs know the zones' stock
	// (--sees-every-zone), read into job.LearnsByTrying.
	knowing stockFlags
	job     replay.Job
}

// estimateBenchRow is one estimate checked against the run it estimated.
type estimateBenchRow struct {
	Market        string  `json:"market"`
	Start         int     `json:"start"`
	DeadlineHours float64 `json:"deadline_hours"`
	MemoryHours   float64 `json:"memory_hours"`
	P10           float64 `json:"p10"`
	P50           float64 `json:"p50"`
	P90           float64 `json:"p90"`
	CostUSD       float64 `json:"cost_usd"`
	FinishP50     float64 `json:"finish_p50_hours"`
	FinishHours   float64 `json:"finish_hours"`
	MetShare      float64 `json:"deadline_met_share"`
	DeadlineMet   bool    `json:"deadline_met"`
}

// estimateBenchSummary is how the estimates of a set of rows fared.
type estimateBenchSummary struct {
	Summary bool   `json:"summary"`
	Set     string `json:"set"`
	Runs    int    `json:"runs"`
	// Within is the share of runs whose cost fell within p10..p90;
	// Below and Above the shares under p10 and over p90.
	Within float64 `json:"within_p10_p90"`
	Below  float64 `json:"below_p10"`
	Above  float64 `json:"above_p90"`
	// P50Error is the mean of (p50 - cost) / cost, P50AbsError the mean
	// of its size.
	P50Error    float64 `json:"p50_mean_error"`
	P50AbsError float64 `json:"p50_mean_abs_error"`
	// FinishError is the mean of (finish p50 - finish) / finish.
	FinishError float64 `json:"finish_p50_mean_error"`
	// MetPredicted is the mean deadline_met_share estimated, Met the
	// share of runs that met their deadline.
	MetPredicted float64 `json:"deadline_met_share_estimated"`
	Met          float64 `json:"deadline_met"`
}

func runEstimateBench(f estimateBenchFlags, stdout, stderr io.Writer) error {
	dir, starts, windows, history, deadlines, asJSON, job := &f.dir, &f.starts, &f.windows, &f.history, &f.deadlines, &f.asJSON, f.job
	if *starts < 1 || *windows < 1 || *history < 0 {
		return &FlagError{"starts", fmt.Sprintf("%d starts, %d windows and --history %s", *starts, *windows, *history), "give at least one start and one window, and a history of 0 or more"}
	}
	var dls []time.Duration
	for _, s := range strings.Split(*deadlines, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil || d < job.Work {
			return &FlagError{"deadlines", fmt.Sprintf("%q is not a deadline of at least --work %s", s, job.Work), "write durations such as 52h,70h"}
		}
		dls = append(dls, d)
	}
	singles, multis, err := benchMarkets(*dir)
	if err != nil {
		return err
	}
	var rows []estimateBenchRow
	for _, bm := range append(singles, multis...) {
		for _, dl := range dls {
			ss, err := benchStarts(bm.market, *history, dl, *starts)
			if err != nil {
				fmt.Fprintf(stderr, "estimate-bench: skipping %s at %s: %v\n", bm.name, dl, err)
				continue
			}
			for _, st := range ss {
				j := job
				j.Deadline = dl
				row, err := estimateAndRun(bm, j, st, *windows)
				if err != nil {
					return fmt.Errorf("%s, start %d: %w", bm.name, st, err)
				}
				rows = append(rows, row)
				fmt.Fprintf(stderr, "estimate-bench: %s at %s from tick %d: p10..p90 $%.2f..$%.2f, cost $%.2f\n", bm.name, dl, st, row.P10, row.P90, row.CostUSD)
			}
		}
	}
	sums := []estimateBenchSummary{summariseEstimates("all", rows)}
	for _, dl := range dls {
		var some []estimateBenchRow
		for _, r := range rows {
			if r.DeadlineHours == dl.Hours() {
				some = append(some, r)
			}
		}
		sums = append(sums, summariseEstimates(fmt.Sprintf("deadline %s", dl), some))
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		if err := jsonLines(enc, rows); err != nil {
			return err
		}
		return jsonLines(enc, sums)
	}
	knows := "learning stock by trying"
	if !job.LearnsByTrying {
		knows = "seeing every zone"
	}
	fmt.Fprintf(stdout, "estimates on %s (work %s, restart overhead %s, policy refuel %s; %d windows each)\n", *dir, job.Work, job.RestartOverhead, knows, *windows)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "set\truns\twithin p10..p90\tbelow p10\tabove p90\tp50 mean error\tp50 mean |error|\tfinish p50 error\tmet: estimated / real\t")
	for _, s := range sums {
		fmt.Fprintf(tw, "%s\t%d\t%.0f%%\t%.0f%%\t%.0f%%\t%+.1f%%\t%.1f%%\t%+.1f%%\t%.0f%% / %.0f%%\t\n", s.Set, s.Runs, 100*s.Within, 100*s.Below, 100*s.Above,
			100*s.P50Error, 100*s.P50AbsError, 100*s.FinishError, 100*s.MetPredicted, 100*s.Met)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	all := sums[0]
	fmt.Fprintf(stdout, "targets: %s, %s\n",
		met(all.Within >= 0.7 && all.Within <= 0.9, fmt.Sprintf("within p10..p90 %.0f%%, 80%% ± 10", 100*all.Within)),
		met(math.Abs(all.P50Error) <= 0.15, fmt.Sprintf("p50 mean error %+.1f%%, within 15%%", 100*all.P50Error)))
	return nil
}

// met says whether a target s was met.
func met(ok bool, s string) string {
	if ok {
		return s + ": met"
	}
	return s + ": NOT met"
}

// benchStarts spreads n starts from history after the market's start to
// the last that leaves room for the deadline.
func benchStarts(m *replay.Market, history, deadline time.Duration, n int) ([]int, error) {
	last, err := m.LastStart(deadline)
	if err != nil {
		return nil, err
	}
	first := int((history + m.Gap - 1) / m.Gap)
	if first > last {
		return nil, fmt.Errorf("the traces hold less than --history %s before the last start that leaves room for the deadline", history)
	}
	out := make([]int, n)
	for k := range out {
		if n > 1 {
			out[k] = first + k*(last-first)/(n-1)
		}
	}
	if n == 1 {
		out[0] = first
	}
	return out, nil
}

// estimateAndRun estimates job at tick start of bm from what a market
// memory would have seen of each zone by then, then replays the run.
func estimateAndRun(bm *benchMarket, job replay.Job, start, windows int) (estimateBenchRow, error) {
	ask := estimate.Ask{
		Tier: job.Tier, Policy: policy.Refuel, Work: job.Work, Deadline: job.Deadline, RestartOverhead: job.RestartOverhead,
		Windows: windows, Seed: uint64(start), Tick: bm.market.Gap, SeesEveryZone: !job.LearnsByTrying,
	}
	row := estimateBenchRow{Market: bm.name, Start: start, DeadlineHours: job.Deadline.Hours()}
	for _, t := range bm.traces {
		mem, now := memoryOf(t, start, bm.market.Gap)
		ask.Pools = append(ask.Pools, estimate.Pool{
			Provider: "bench", InstanceType: t.Instance, Zone: t.Name, Spot: true,
			SpotPrice: job.SpotPrice, OnDemandPrice: job.OnDemandPrice, Memory: mem, Current: now,
		})
		row.MemoryHours = (time.Duration(start) * bm.market.Gap).Hours()
	}
	r, err := estimate.Estimate(ask)
	if err != nil {
		return row, err
	}
	c := r.Cases[0]
	row.P10, row.P50, row.P90 = c.CostUSD.P10, c.CostUSD.P50, c.CostUSD.P90
	if c.FinishHours.P50 != nil {
		row.FinishP50 = *c.FinishHours.P50
	}
	if c.DeadlineMetShare != nil {
		row.MetShare = *c.DeadlineMetShare
	}
	res, err := replay.Run(bm.market, job, start, replay.NewOnline(job.Tier, policy.Refuel))
	if err != nil {
		return row, err
	}
	row.CostUSD, row.FinishHours, row.DeadlineMet = res.Cost, res.Finish.Hours(), res.DeadlineMet
	return row, nil
}

// memoryOf is what a market memory that watched t until tick start of a
// market of gap saw: its stretches in and out of stock, and, when it is
// out of stock, for how long (a memory knows an outage its tries are in,
// not how long stock it has not tried has lasted).
func memoryOf(t *trace.Trace, start int, gap time.Duration) (*policy.Availability, *estimate.Stretch) {
	var a policy.Availability
	for i := range start {
		a.Observe(t.Available(i), gap)
	}
	var now *estimate.Stretch
	if !a.Last {
		now = &estimate.Stretch{For: a.Since}
	}
	// The stretch still open counts its time watched, not its end.
	a.Seen(a.Last, a.Since, false)
	return &policy.Availability{In: a.In, Out: a.Out}, now
}

func summariseEstimates(set string, rows []estimateBenchRow) estimateBenchSummary {
	s := estimateBenchSummary{Summary: true, Set: set, Runs: len(rows)}
	if len(rows) == 0 {
		return s
	}
	finishes := 0
	for _, r := range rows {
		switch {
		case r.CostUSD < r.P10-0.005:
			s.Below++
		case r.CostUSD > r.P90+0.005:
			s.Above++
		default:
			s.Within++
		}
		e := (r.P50 - r.CostUSD) / r.CostUSD
		s.P50Error += e
		s.P50AbsError += math.Abs(e)
		if r.FinishP50 > 0 && r.FinishHours > 0 {
			s.FinishError += (r.FinishP50 - r.FinishHours) / r.FinishHours
			finishes++
		}
		s.MetPredicted += r.MetShare
		if r.DeadlineMet {
			s.Met++
		}
	}
	n := float64(len(rows))
	s.Within, s.Below, s.Above = s.Within/n, s.Below/n, s.Above/n
	s.P50Error, s.P50AbsError = s.P50Error/n, s.P50AbsError/n
	if finishes > 0 {
		s.FinishError /= float64(finishes)
	}
	s.MetPredicted, s.Met = s.MetPredicted/n, s.Met/n
	return s
}
