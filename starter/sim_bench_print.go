package main

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"text/tabwriter"
	"time"

	"refuel/pkg/policy"
	"refuel/pkg/replay"
)

// pickCells are the cells keep keeps, in order.
func pickCells(cells []*benchCell, keep func(*benchCell) bool) []*benchCell {
	var out []*benchCell
	for _, c := range cells {
		if keep(c) {
			out = append(out, c)
		}
	}
	return out
}

// cellsAt are the cells of market bm at deadline dl: one row's windows.
func cellsAt(cells []*benchCell, bm *benchMarket, dl time.Duration) []*benchCell {
	return pickCells(cells, func(c *benchCell) bool { return c.market == bm && c.deadline == dl })
}

func printBench(w io.Writer, job replay.Job, dls []time.Duration, singles, multis []*benchMarket, cells []*benchCell) {
	gang := ""
	if job.Nodes > 1 {
		gang = fmt.Sprintf(", a gang of %d nodes (spot only where all are in stock at once)", job.Nodes)
	}
	fmt.Fprintf(w, "Mean cost as a share of all-on-demand, and deadlines met; %s of work, %s restart overhead, spot $%.4f/h, on-demand $%.2f/h%s.\n\n", job.Work, job.RestartOverhead, job.SpotPrice, job.OnDemandPrice, gang)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := "trace\tdeadline"
	for _, p := range benchPolicies {
		header += "\t" + string(p)
	}
	fmt.Fprintln(tw, header+"\trefuel/optimal\tmet (g/u/s/r/o)")
	row := func(name string, dl time.Duration, cs []*benchCell) {
		s := statsOf(cs)
		line := fmt.Sprintf("%s\t%s", name, shortDuration(dl))
		for _, p := range benchPolicies {
			line += fmt.Sprintf("\t%.1f%%", 100*s.cost[p])
		}
		line += fmt.Sprintf("\t%.3f\t%d/%d/%d/%d/%d of %d", s.cost[policy.Refuel]/s.cost[policy.Optimal],
			s.met[policy.Greedy], s.met[policy.UniformProgress], s.met[policy.SkyNomad], s.met[policy.Refuel], s.met[policy.Optimal], s.n)
		fmt.Fprintln(tw, line)
	}
	for _, bm := range singles {
		for _, dl := range dls {
			if cs := cellsAt(cells, bm, dl); len(cs) > 0 {
				row(bm.name, dl, cs)
			}
		}
	}
	isSingle := func(c *benchCell) bool { return c.market.zones == 1 }
	for _, dl := range dls {
		cs := pickCells(cells, func(c *benchCell) bool { return isSingle(c) && c.deadline == dl })
		row(fmt.Sprintf("ALL single-zone (%d windows)", len(cs)), dl, cs)
	}
	tw.Flush()

	if len(multis) > 0 {
		fmt.Fprintln(w, "\nMulti-zone: the job may move between the zones; compared with the optimum in each zone alone over the same windows.")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "zones\tdeadline\tgreedy\tuniform-progress\tskynomad\trefuel\toptimal (all zones)\tsingle-zone optimal: mean\tbest zone\tmet (s/r)")
		for _, bm := range multis {
			for _, dl := range dls {
				cs := cellsAt(cells, bm, dl)
				if len(cs) == 0 {
					continue
				}
				s := statsOf(cs)
				mean, best := singleZoneOptimum(bm, dl, cells)
				fmt.Fprintf(tw, "%s\t%s\t%.1f%%\t%.1f%%\t%.1f%%\t%.1f%%\t%.1f%%\t%.1f%%\t%.1f%%\t%d/%d of %d\n", bm.name, shortDuration(dl),
					100*s.cost[policy.Greedy], 100*s.cost[policy.UniformProgress], 100*s.cost[policy.SkyNomad], 100*s.cost[policy.Refuel], 100*s.cost[policy.Optimal],
					100*mean, 100*best, s.met[policy.SkyNomad], s.met[policy.Refuel], s.n)
			}
		}
		tw.Flush()
	}
	printTargets(w, dls, multis, cells)
}

// singleZoneOptimum is the optimum's mean cost over the zones of a
// multi-zone market taken one at a time, and that of the best zone, at
// the same deadline (the windows coincide: the zones' traces align).
func singleZoneOptimum(bm *benchMarket, dl time.Duration, cells []*benchCell) (mean, best float64) {
	best = -1
	for _, single := range bm.singles {
		var sum float64
		var n int
		for _, c := range cells {
			if c.market == single && c.deadline == dl {
				sum += c.cost[policy.Optimal]
				n++
			}
		}
		if n == 0 {
			continue
		}
		m := sum / float64(n)
		mean += m / float64(len(bm.singles))
		if best < 0 || m < best {
			best = m
		}
	}
	return mean, best
}

func printTargets(w io.Writer, dls []time.Duration, multis []*benchMarket, cells []*benchCell) {
	var missed, worse, windows int
	var worst []string
	for _, c := range cells {
		if c.market.zones > 1 {
			continue
		}
		windows++
		if !c.met[policy.Refuel] {
			missed++
		}
		if c.cost[policy.Refuel] > max(c.cost[policy.Greedy], c.cost[policy.UniformProgress])+1e-9 {
			worse++
			worst = append(worst, fmt.Sprintf("%s %s start %d: refuel %.1f%%, greedy %.1f%%, uniform-progress %.1f%%",
				c.market.name, shortDuration(c.deadline), c.start, 100*c.cost[policy.Refuel], 100*c.cost[policy.Greedy], 100*c.cost[policy.UniformProgress]))
		}
	}
	yes := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	fmt.Fprintln(w, "\nTargets (single-zone windows unless said):")
	fmt.Fprintf(w, "  refuel meets every deadline: %s (%d of %d missed)\n", yes(missed == 0), missed, windows)
	fmt.Fprintf(w, "  refuel never costs more than both greedy and uniform-progress: %s (%d of %d windows)\n", yes(worse == 0), worse, windows)
	sort.Strings(worst)
	for _, s := range worst {
		fmt.Fprintf(w, "      %s\n", s)
	}
	printRowTargets(w, dls, cells)
	for _, dl := range dls {
		cs := pickCells(cells, func(c *benchCell) bool { return c.market.zones == 1 && c.deadline == dl })
		s := statsOf(cs)
		ratio := s.cost[policy.Refuel] / s.cost[policy.Optimal]
		fmt.Fprintf(w, "  refuel's mean within 10%% of the optimum at %s: %s (%+.1f%%)\n", shortDuration(dl), yes(ratio <= maxOverOptimal), 100*(ratio-1))
		fmt.Fprintf(w, "  refuel's mean no higher than uniform-progress's at %s: %s (%.1f%% against %.1f%%)\n", shortDuration(dl),
			yes(s.cost[policy.Refuel] <= s.cost[policy.UniformProgress]+1e-9), 100*s.cost[policy.Refuel], 100*s.cost[policy.UniformProgress])
		if len(cs) > 0 && cs[0].known > 0 {
			var sum float64
			worse := 0
			for _, c := range cs {
				sum += c.known
				if c.known > max(c.cost[policy.Greedy], c.cost[policy.UniformProgress])+1e-9 {
					worse++
				}
			}
			k := sum / float64(len(cs))
			fmt.Fprintf(w, "      with each window's own statistics known in advance: %.1f%% (%+.1f%% over the optimum; %d windows above both greedy and uniform-progress)\n",
				100*k, 100*(k/s.cost[policy.Optimal]-1), worse)
		}
	}
	for _, bm := range multis {
		for _, dl := range dls {
			cs := cellsAt(cells, bm, dl)
			if len(cs) == 0 {
				continue
			}
			r := statsOf(cs).cost[policy.Refuel]
			mean, best := singleZoneOptimum(bm, dl, cells)
			fmt.Fprintf(w, "  multi-zone %s at %s: refuel %.1f%% vs single-zone optimum %.1f%% (mean over zones): %s; vs best zone's %.1f%%: %s\n",
				bm.name, shortDuration(dl), 100*r, 100*mean, yes(r < mean), 100*best, yes(r < best))
		}
	}
}

// peers are the policies refuel's mean must not exceed on any row.
var peers = []policy.Name{policy.Greedy, policy.UniformProgress, policy.SkyNomad}

// printRowTargets checks every row of the tables, single-zone and
// multi-zone: refuel's mean no higher than any peer's, every deadline met.
func printRowTargets(w io.Writer, dls []time.Duration, cells []*benchCell) {
	var markets []*benchMarket
	for _, c := range cells {
		if !slices.Contains(markets, c.market) {
			markets = append(markets, c.market)
		}
	}
	rows, missed := 0, 0
	var over []string
	for _, bm := range markets {
		for _, dl := range dls {
			cs := cellsAt(cells, bm, dl)
			if len(cs) == 0 {
				continue
			}
			rows++
			st := statsOf(cs)
			missed += st.n - st.met[policy.Refuel]
			for _, p := range peers {
				if st.cost[policy.Refuel] > st.cost[p]+1e-9 {
					over = append(over, fmt.Sprintf("%s %s: refuel %.1f%%, %s %.1f%%", bm.name, shortDuration(dl), 100*st.cost[policy.Refuel], p, 100*st.cost[p]))
				}
			}
		}
	}
	yes := map[bool]string{true: "met", false: "NOT met"}
	fmt.Fprintf(w, "  on every row (single and multi-zone), refuel's mean no higher than greedy's, uniform-progress's and skynomad's: %s (%d excesses over %d rows)\n", yes[len(over) == 0], len(over), rows)
	for _, s := range over {
		fmt.Fprintf(w, "      %s\n", s)
	}
	fmt.Fprintf(w, "  on every row, refuel meets every deadline: %s (%d missed)\n", yes[missed == 0], missed)
}

// maxOverOptimal is how far above the omniscient optimum refuel's mean
// may be: no published online policy comes within 5%.
const maxOverOptimal = 1.10
