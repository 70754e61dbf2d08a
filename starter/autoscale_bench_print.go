package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"refuel/pkg/servingsim"
)

// printAutoscaleBench prints the world every policy runs in, then the
// rows refuel was tuned on and the rows held out from its tuning apart,
// each scenario and seed on one line (each policy's SLO attained, p99
// time to first token and cost against the oracle's), each part with
// each policy's worst rows and refuel's targets.
func printAutoscaleBench(w io.Writer, cfg servingsim.Config, window time.Duration, tunedSeeds uint64, rows []autoscaleRow) {
	warm := fmt.Sprintf("%d stopped entries (start %s, load %s; $%.3f per entry-hour, its volume)", cfg.WarmPool, rangeString(cfg.Warm.Provision), rangeString(cfg.Warm.Load), cfg.WarmPricePerHour)
	if cfg.WarmRunning {
		warm = fmt.Sprintf("%d running entries (load %s; $%.3f per entry-hour, full price)", cfg.WarmPool, rangeString(cfg.Warm.Load), cfg.PricePerHour)
	}
	borrow := "none"
	if cfg.Borrowable > 0 {
		borrow = fmt.Sprintf("up to %d (checkpoint %s, load %s; full price while held)", cfg.Borrowable, rangeString(cfg.Borrow.Provision), rangeString(cfg.Borrow.Load))
	}
	fmt.Fprintf(w, "replica: prefill %.0f tok/s, decode %.0f tok/s over up to %d requests at once; $%.3f per replica-hour from request to release\n",
		cfg.Model.PrefillTokensPerSecond, cfg.Model.DecodeTokensPerSecond, cfg.MaxConcurrency, cfg.PricePerHour)
	fmt.Fprintf(w, "start-up paths, the same for every policy, fastest first: warm pool %s; machines from lower-priority work %s; cold (provision %s, init %s, load %s)\n",
		warm, borrow, rangeString(cfg.Startup.Provision), rangeString(cfg.Startup.Init), rangeString(cfg.Startup.Load))
	fmt.Fprintf(w, "SLO: a request is met when its first token comes within %s (its wait for a slot, then its prefill); one that waits %s for a slot fails (counted at %s in p99)\n",
		cfg.SLOLatency, cfg.QueueTimeout, cfg.QueueTimeout)
	fmt.Fprintf(w, "oracle: knows demand (work over the trailing %s) and every start-up ahead; greedy plan at the cheapest headroom over demand (of %v) that meets %.0f%%, else the one that serves most\n",
		window, oracleHeadrooms, 100*targetAttainment)
	fmt.Fprintf(w, "each policy (%s): requests within the SLO, p99 time to first token, cost against the oracle's; refuel's targets: ok where it serves >= %.0f%% at <= %.2fx the oracle's cost and is not worse than reactive on both, else what it missed\n",
		strings.Join(autoscalePolicies, ", "), 100*targetAttainment, targetCostVsOracle)
	fmt.Fprintf(w, "* costs less than the oracle: it serves fewer requests within the SLO than the target (the oracle buys the target at the least cost it finds)\n")
	fmt.Fprintf(w, "+ costs less than the oracle at the target: the oracle's greedy plan or headroom step found no cheaper plan (see docs/autoscaling.md)\n")
	n := len(autoscalePolicies)
	var tuned, held []autoscaleRow
	for i := 0; i+n <= len(rows); i += n {
		if rows[i].Scenario == "hour" || rows[i].Seed > tunedSeeds {
			held = append(held, rows[i:i+n]...)
		} else {
			tuned = append(tuned, rows[i:i+n]...)
		}
	}
	if len(tuned) > 0 {
		fmt.Fprintf(w, "\nTUNED ON: seeds 1-%d of every scenario but the real hour\n", tunedSeeds)
		printAutoscaleRows(w, tuned)
	}
	if len(held) > 0 {
		fmt.Fprintf(w, "\nHELD OUT: seeds after %d, and the real hour (\"hour\") at every seed\n", tunedSeeds)
		printAutoscaleRows(w, held)
	}
}

// printAutoscaleRows prints one part of the table and its summary.
func printAutoscaleRows(w io.Writer, rows []autoscaleRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "scenario\tseed\t"
	for _, p := range autoscalePolicies {
		short, _, _ := strings.Cut(p, " ")
		head += short + " SLO\tp99\tcost\t"
	}
	fmt.Fprintln(tw, head+"headroom\toracle USD\trefuel's targets\t")
	n := len(autoscalePolicies)
	met, worseOnBoth := 0, 0
	for i := 0; i+n <= len(rows); i += n {
		set := rows[i : i+n]
		oracle := set[n-1]
		line := fmt.Sprintf("%s\t%d\t", set[0].Scenario, set[0].Seed)
		for _, r := range set {
			mark := ""
			if r.CostUSD < oracle.CostUSD-1e-9 {
				mark = "+"
				if r.Attainment < targetAttainment {
					mark = "*"
				}
			}
			line += fmt.Sprintf("%.2f%%\t%.1fs\t%.3fx%s\t", 100*r.Attainment, r.P99Latency, r.CostVsOracle, mark)
		}
		v := refuelVerdict(set[0], set[1])
		if v == "ok" {
			met++
		}
		if strings.Contains(v, "reactive") {
			worseOnBoth++
		}
		fmt.Fprintln(tw, line+fmt.Sprintf("%.2f\t%.2f\t%s\t", oracle.Headroom, oracle.CostUSD, v))
	}
	tw.Flush()
	fmt.Fprintln(w, "worst rows: lowest SLO attained, highest cost against the oracle's")
	for _, p := range autoscalePolicies {
		var low, high autoscaleRow
		first := true
		for _, r := range rows {
			if r.Policy != p {
				continue
			}
			if first || r.Attainment < low.Attainment {
				low = r
			}
			if first || r.CostVsOracle > high.CostVsOracle {
				high = r
			}
			first = false
		}
		fmt.Fprintf(w, "  %-26s %7.2f%% (%s, seed %d)  %.3fx (%s, seed %d)\n", p+":", 100*low.Attainment, low.Scenario, low.Seed, high.CostVsOracle, high.Scenario, high.Seed)
	}
	fmt.Fprintf(w, "refuel met its targets on %d of %d rows; worse than the reactive baseline on both figures at once on %d\n", met, len(rows)/n, worseOnBoth)
	var missed []autoscaleRow
	for _, r := range rows {
		if r.Hindsight != nil {
			missed = append(missed, r)
		}
	}
	if len(missed) == 0 {
		return
	}
	fmt.Fprintln(w, "where refuel misses its targets, the best forecaster in hindsight (the recent peak times the cheapest headroom that meets the SLO target, else the one that serves most; no foresight, the same start-up paths):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tseed\trefuel SLO\tcost\tbest in hindsight SLO\tp99\tcost\theadroom\t")
	for _, r := range missed {
		b := r.Hindsight
		fmt.Fprintf(tw, "%s\t%d\t%.2f%%\t%.3fx\t%.2f%%\t%.1fs\t%.3fx\t%.2f\t\n", r.Scenario, r.Seed, 100*r.Attainment, r.CostVsOracle, 100*b.Attainment, b.P99Latency, b.CostVsOracle, b.Headroom)
	}
	tw.Flush()
}

// refuelVerdict says whether refuel's row meets its targets: "ok", or
// what it missed.
func refuelVerdict(refuel, reactive autoscaleRow) string {
	var missed []string
	if refuel.Attainment < targetAttainment {
		missed = append(missed, "SLO")
	}
	if refuel.CostVsOracle > targetCostVsOracle {
		missed = append(missed, "cost")
	}
	if refuel.Attainment < reactive.Attainment && refuel.CostVsOracle > reactive.CostVsOracle {
		missed = append(missed, "worse than reactive on both")
	}
	if len(missed) == 0 {
		return "ok"
	}
	return strings.Join(missed, ", ")
}

func rangeString(r servingsim.Range) string {
	if r.Max <= r.Min {
		return r.Min.String()
	}
	return fmt.Sprintf("%s-%s", r.Min, r.Max)
}
