package main

// What starter sim prints: a row per window, and with --starts a summary
// per policy, as JSON or as a table.

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"refuel/pkg/policy"
)

// simSummary closes a run of several windows, per policy.
type simSummary struct {
	Summary          bool        `json:"summary"`
	Policy           policy.Name `json:"policy"`
	Windows          int         `json:"windows"`
	DeadlinesMet     int         `json:"deadlines_met"`
	MeanCostUSD      float64     `json:"mean_cost_usd"`
	MeanCostFraction float64     `json:"mean_cost_fraction"`
	MaxCostUSD       float64     `json:"max_cost_usd"`
	MeanFinishHours  float64     `json:"mean_finish_hours"`
	Preemptions      int         `json:"preemptions"`
	Changeovers      int         `json:"changeovers"`
	CloudMoves       int         `json:"cloud_moves"`
	// MeanProbeUSD is the windows' mean probe spend (in mean_cost_usd).
	MeanProbeUSD float64 `json:"mean_probe_usd"`
}

// summarise is each policy's summary over the windows of rows.
func summarise(f simFlags, rows []simRow) []simSummary {
	var out []simSummary
	for _, p := range f.policies {
		s := simSummary{Summary: true, Policy: p}
		for _, r := range rows {
			if r.Policy != p {
				continue
			}
			s.Windows++
			if r.DeadlineMet {
				s.DeadlinesMet++
			}
			s.MeanCostUSD += r.CostUSD
			s.MeanCostFraction += r.CostFraction
			s.MaxCostUSD = max(s.MaxCostUSD, r.CostUSD)
			s.MeanFinishHours += r.FinishHours
			s.MeanProbeUSD += r.ProbeUSD
			s.Preemptions += r.Preemptions
			s.Changeovers += r.Changeovers
			s.CloudMoves += r.CloudMoves
		}
		if s.Windows > 0 {
			n := float64(s.Windows)
			s.MeanCostUSD /= n
			s.MeanCostFraction /= n
			s.MeanFinishHours /= n
			s.MeanProbeUSD /= n
		}
		out = append(out, s)
	}
	return out
}

// printSim prints rows; a market of several clouds (onClouds) adds each
// run's moves between clouds and the clouds it held, in order.
func printSim(w io.Writer, f simFlags, rows []simRow, onClouds []string) error {
	var sums []simSummary
	if f.starts > 0 {
		sums = summarise(f, rows)
	}
	if f.json {
		enc := json.NewEncoder(w)
		if err := jsonLines(enc, rows); err != nil {
			return err
		}
		return jsonLines(enc, sums)
	}
	switch j := f.job; {
	case j.MinNodes > 0 && j.MinNodes < j.Nodes:
		fmt.Fprintf(w, "An elastic gang of %d nodes: on spot it trains on %d to %d in stock at once, at that share of the rate; costs count every node held, hours the gang's.\n", j.Nodes, j.MinNodes, j.Nodes)
	case j.Nodes > 1:
		fmt.Fprintf(w, "A gang of %d nodes: spot only where %d are in stock at once; costs count every node, hours the gang's.\n", j.Nodes, j.Nodes)
	}
	several := len(onClouds) > 1
	if several {
		fmt.Fprintf(w, "One market of %s: a move between clouds is a move between regions.\n", strings.Join(onClouds, " and "))
	}
	// extra is the columns a run that learns stock by trying adds (what
	// its probes cost, in its cost), then a market of several clouds.
	learns := f.job.LearnsByTrying
	extra := func(probes float64, moves int, where string) string {
		out := ""
		if learns {
			out = fmt.Sprintf("%.2f\t", probes)
		}
		if several {
			out += fmt.Sprintf("%d\t%s\t", moves, where)
		}
		return out
	}
	header := cloudHeader(several)
	if learns {
		header = "probes $\t" + header
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tstart\tcost $\tof on-demand\tfinish h\tdeadline\tspot h\ton-demand h\tpreemptions\tchangeovers\t"+header)
	for _, r := range rows {
		met := "met"
		if !r.DeadlineMet {
			met = "MISSED"
		}
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.1f%%\t%.2f\t%s\t%.2f\t%.2f\t%d\t%d\t%s\n", r.Policy, r.Start, r.CostUSD, 100*r.CostFraction, r.FinishHours, met, r.SpotHours, r.OnDemandHours, r.Preemptions, r.Changeovers, extra(r.ProbeUSD, r.CloudMoves, cloudPath(r.Placements)))
	}
	if len(sums) > 0 {
		fmt.Fprintln(tw, "\t\t\t\t\t\t\t\t\t\t")
		fmt.Fprintln(tw, "policy\twindows\tmean cost $\tof on-demand\tmean finish h\tdeadlines met\tmax cost $\t\tpreemptions\tchangeovers\t"+header)
		for _, s := range sums {
			fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.1f%%\t%.2f\t%d/%d\t%.2f\t\t%d\t%d\t%s\n", s.Policy, s.Windows, s.MeanCostUSD, 100*s.MeanCostFraction, s.MeanFinishHours, s.DeadlinesMet, s.Windows, s.MaxCostUSD, s.Preemptions, s.Changeovers, extra(s.MeanProbeUSD, s.CloudMoves, ""))
		}
	}
	return tw.Flush()
}
