package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"refuel/pkg/policy"
	"refuel/pkg/replay"
	"refuel/pkg/spec"
	"refuel/pkg/trace"
)

// benchPolicies are compared by `starter sim-bench`, in this order.
var benchPolicies = []policy.Name{policy.OnDemandOnly, policy.Greedy, policy.UniformProgress, policy.Refuel, policy.Optimal}

// benchMarket is one market the bench replays: a single trace, or the
// zones of one instance type sampled together.
type benchMarket struct {
	name   string
	zones  int
	market *replay.Market
	// singles are the one-zone markets of a multi-zone market.
	singles []*benchMarket
	traces  []*trace.Trace
}

// benchCell is one window of one market at one deadline.
type benchCell struct {
	market   *benchMarket
	deadline time.Duration
	start    int
	cost     map[policy.Name]float64 // share of all-on-demand
	met      map[policy.Name]bool
	// known is refuel's cost planning with the window's own statistics
	// (--known-statistics), single-zone only; 0 when not replayed.
	known float64
}

// runSimBench is `starter sim-bench` (make bench-policy): every trace
// under --traces, replayed at each deadline from --starts start ticks
// under every policy, and every set of traces of one instance type in
// several zones of one folder replayed as a multi-zone market. It prints
// each policy's mean cost as a share of all-on-demand and its deadlines
// met, then checks refuel against its targets.
func runSimBench(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sim-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dflt := os.Getenv("REFUEL_TRACES")
	if dflt == "" {
		dflt = filepath.Join("..", "shared", "traces", "availability")
	}
	dir := fs.String("traces", dflt, "folder of traces, searched at any depth (env REFUEL_TRACES)")
	starts := fs.Int("starts", 0, fmt.Sprintf("start offsets per trace and deadline, spread evenly over the traces (default %d, %d for a gang; with --full %d, %d for a gang)", quickStarts, quickGangStarts, fullStarts, fullGangStarts))
	full := fs.Bool("full", false, "the full set: more windows (see --starts) and --known-statistics; about 25 minutes on two shared cores, where the default takes a few")
	deadlines := fs.String("deadlines", "52h,70h", "comma-separated deadlines")
	job := replay.Job{Tier: spec.TierDeadline, Work: 48 * time.Hour, RestartOverhead: 12 * time.Minute, SpotPrice: 0.9701, OnDemandPrice: 3.06}
	fs.DurationVar(&job.Work, "work", job.Work, "compute time of the job")
	fs.DurationVar(&job.RestartOverhead, "restart-overhead", job.RestartOverhead, "restart overhead")
	fs.Float64Var(&job.SpotPrice, "spot-price", job.SpotPrice, "spot USD per hour")
	fs.Float64Var(&job.OnDemandPrice, "ondemand-price", job.OnDemandPrice, "on-demand USD per hour")
	known := fs.Bool("known-statistics", false, "also replay refuel planning with each single-zone window's own stretch statistics, known in advance: how much of its distance from the optimum better estimation could win")
	prices := fs.String("prices", embeddedPrices, "prices for the table across priced regions: a price file, or "+embeddedPrices)
	fs.Float64Var(&job.CheckpointGB, "checkpoint-gb", 50, "size of the checkpoint a move between regions transfers, in GB")
	fs.Float64Var(&job.EgressUSDPerGB, "egress-usd-per-gb", 0.02, "USD per GB a checkpoint moved to another region costs")
	gbps := fs.Float64("transfer-gbps", 1, "Gbit/s a checkpoint moves between regions at")
	fs.IntVar(&job.Nodes, "nodes", 1, fmt.Sprintf("instances the job needs at once in one zone, a gang (1 to %d); see starter sim -h", spec.MaxNodes))
	withRegions := fs.Bool("priced-regions", true, "also replay markets whose zones span regions with each zone at its own prices")
	if err := parseFlagSet(fs, args); err != nil {
		return err
	}
	job.TransferTime = transferTime(job.CheckpointGB, *gbps)
	if job.Nodes < 1 || job.Nodes > spec.MaxNodes {
		return &FlagError{"nodes", fmt.Sprintf("%d is outside 1..%d", job.Nodes, spec.MaxNodes), fmt.Sprintf("give the instances the job needs at once, e.g. --nodes 2 (at most %d)", spec.MaxNodes)}
	}
	priced, err := loadPrices(*prices)
	if err != nil {
		return &FlagError{"prices", err.Error(), "give a price file or " + embeddedPrices}
	}
	var dls []time.Duration
	for _, s := range strings.Split(*deadlines, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil || d < job.Work {
			return &FlagError{"deadlines", fmt.Sprintf("%q is not a deadline of at least --work %s", s, job.Work), "write durations such as 52h,70h"}
		}
		dls = append(dls, d)
	}
	explicit := false
	fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "starts" })
	switch {
	case explicit && *starts < 1:
		return &FlagError{"starts", fmt.Sprintf("%d is below 1", *starts), "give the number of start offsets, e.g. 10"}
	case explicit:
	case *full && job.Nodes > 1:
		*starts = fullGangStarts
	case *full:
		*starts = fullStarts
	case job.Nodes > 1:
		*starts = quickGangStarts
	default:
		*starts = quickStarts
	}
	*known = *known || *full
	singles, multis, err := benchMarkets(*dir)
	if err != nil {
		return err
	}
	for _, bm := range singles {
		warnGang(stderr, "sim-bench", bm.traces, job.Nodes)
	}
	var cells []*benchCell
	for _, group := range [][]*benchMarket{singles, multis} {
		for _, bm := range group {
			for _, dl := range dls {
				ss, err := bm.market.Starts(*starts, dl)
				if err != nil {
					fmt.Fprintf(stderr, "sim-bench: skipping %s at %s: %v\n", bm.name, dl, err)
					continue
				}
				for _, st := range ss {
					cells = append(cells, &benchCell{market: bm, deadline: dl, start: st, cost: map[policy.Name]float64{}, met: map[policy.Name]bool{}})
				}
			}
		}
	}
	var regions []*regionCell
	for _, bm := range multis {
		if !*withRegions || !spansRegions(bm) {
			continue
		}
		for _, dl := range dls {
			ss, err := bm.market.Starts(*starts, dl)
			if err != nil {
				continue
			}
			for _, st := range ss {
				j := job
				j.Deadline = dl
				j = pricedJob(j, bm.traces, bm.market.Gap, st, priced)
				regions = append(regions, &regionCell{market: bm, deadline: dl, start: st, job: j,
					cost: map[policy.Name]float64{}, met: map[policy.Name]bool{}, moves: map[policy.Name]int{}})
			}
		}
	}
	var mu sync.Mutex
	tasks := append(cellTasks(cells, job, *known, &mu), regionTasks(regions, &mu)...)
	if err := runBenchTasks(tasks, stderr); err != nil {
		return err
	}
	printBench(stdout, job, dls, singles, multis, cells)
	printRegions(stdout, *prices, dls, regions)
	return nil
}

// Windows per trace and deadline. The default is few, spread evenly over
// each trace from its start to its end, so the whole comparison takes
// minutes; --full takes the windows refuel's targets were first set on.
const (
	quickStarts, quickGangStarts = 3, 2
	fullStarts, fullGangStarts   = 10, 4
)

// benchMarkets loads every trace under dir as a single-zone market, and
// groups traces of one folder, instance type and count in two or more
// zones into multi-zone markets.
func benchMarkets(dir string) (singles, multis []*benchMarket, err error) {
	files, err := trace.Find(dir)
	if err != nil {
		return nil, nil, err
	}
	groups := map[string][]*trace.Trace{}
	var keys []string
	bySingle := map[*trace.Trace]*benchMarket{}
	for _, f := range files {
		t, err := trace.Load(f)
		if err != nil {
			return nil, nil, err
		}
		m, err := replay.NewMarket([]*trace.Trace{t})
		if err != nil {
			return nil, nil, err
		}
		rel, _ := filepath.Rel(dir, f)
		bm := &benchMarket{name: strings.TrimSuffix(rel, filepath.Ext(rel)), zones: 1, market: m, traces: []*trace.Trace{t}}
		singles = append(singles, bm)
		bySingle[t] = bm
		key := fmt.Sprintf("%s|%s|%d|%s", filepath.Dir(f), t.Instance, t.Count, t.Gap)
		if _, ok := groups[key]; !ok {
			keys = append(keys, key)
		}
		groups[key] = append(groups[key], t)
	}
	for _, key := range keys {
		ts := groups[key]
		if len(ts) < 2 {
			continue
		}
		m, err := replay.NewMarket(ts)
		if err != nil {
			return nil, nil, err
		}
		rel, _ := filepath.Rel(dir, filepath.Dir(ts[0].File))
		bm := &benchMarket{name: fmt.Sprintf("%s/%s_%d (%d zones)", rel, ts[0].Instance, ts[0].Count, len(ts)), zones: len(ts), market: m, traces: ts}
		for _, t := range ts {
			bm.singles = append(bm.singles, bySingle[t])
		}
		multis = append(multis, bm)
	}
	return singles, multis, nil
}

// cellTasks are the replays of every cell under every policy, and of
// refuel with each single-zone window's own statistics when known is set;
// mu guards the cells' results.
func cellTasks(cells []*benchCell, job replay.Job, known bool, mu *sync.Mutex) []benchTask {
	var tasks []benchTask
	for _, c := range cells {
		j := job
		j.Deadline = c.deadline
		ticks := int(c.deadline / c.market.market.Gap)
		for _, p := range benchPolicies {
			tasks = append(tasks, benchTask{weight: replayWeight(p, ticks, c.market.zones), run: func() error {
				res, err := replaySim(c.market.market, j, c.start, p)
				mu.Lock()
				defer mu.Unlock()
				c.cost[p], c.met[p] = res.Cost/j.OnDemandCost(), res.DeadlineMet
				if err != nil {
					return fmt.Errorf("%s, deadline %s, start %d, %s: %w", c.market.name, c.deadline, c.start, p, err)
				}
				return nil
			}})
		}
		if known && c.market.zones == 1 {
			tasks = append(tasks, benchTask{weight: replayWeight(policy.Refuel, ticks, 1), run: func() error {
				m := c.market.market
				res, err := replay.Run(m, j, c.start, replay.NewKnownStatistics(m, c.start, c.deadline, j.Nodes, replay.NewOnline(j.Tier, policy.Refuel)))
				mu.Lock()
				defer mu.Unlock()
				c.known = res.Cost / j.OnDemandCost()
				if err != nil {
					return fmt.Errorf("%s, deadline %s, start %d, refuel with known statistics: %w", c.market.name, c.deadline, c.start, err)
				}
				return nil
			}})
		}
	}
	return tasks
}

// benchStats aggregates cells.
type benchStats struct {
	n    int
	cost map[policy.Name]float64
	met  map[policy.Name]int
}

func statsOf(cells []*benchCell) benchStats {
	s := benchStats{cost: map[policy.Name]float64{}, met: map[policy.Name]int{}}
	for _, c := range cells {
		s.n++
		for _, p := range benchPolicies {
			s.cost[p] += c.cost[p]
			if c.met[p] {
				s.met[p]++
			}
		}
	}
	for p := range s.cost {
		s.cost[p] /= float64(max(1, s.n))
	}
	return s
}

func printBench(w io.Writer, job replay.Job, dls []time.Duration, singles, multis []*benchMarket, cells []*benchCell) {
	pick := func(keep func(*benchCell) bool) []*benchCell {
		var out []*benchCell
		for _, c := range cells {
			if keep(c) {
				out = append(out, c)
			}
		}
		return out
	}
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
	fmt.Fprintln(tw, header+"\trefuel/optimal\tmet (g/u/r/o)")
	row := func(name string, dl time.Duration, cs []*benchCell) {
		s := statsOf(cs)
		line := fmt.Sprintf("%s\t%s", name, shortDuration(dl))
		for _, p := range benchPolicies {
			line += fmt.Sprintf("\t%.1f%%", 100*s.cost[p])
		}
		line += fmt.Sprintf("\t%.3f\t%d/%d/%d/%d of %d", s.cost[policy.Refuel]/s.cost[policy.Optimal],
			s.met[policy.Greedy], s.met[policy.UniformProgress], s.met[policy.Refuel], s.met[policy.Optimal], s.n)
		fmt.Fprintln(tw, line)
	}
	for _, bm := range singles {
		for _, dl := range dls {
			if cs := pick(func(c *benchCell) bool { return c.market == bm && c.deadline == dl }); len(cs) > 0 {
				row(bm.name, dl, cs)
			}
		}
	}
	isSingle := func(c *benchCell) bool { return c.market.zones == 1 }
	for _, dl := range dls {
		cs := pick(func(c *benchCell) bool { return isSingle(c) && c.deadline == dl })
		row(fmt.Sprintf("ALL single-zone (%d windows)", len(cs)), dl, cs)
	}
	tw.Flush()

	if len(multis) > 0 {
		fmt.Fprintln(w, "\nMulti-zone: the job may move between the zones; compared with the optimum in each zone alone over the same windows.")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "zones\tdeadline\tgreedy\tuniform-progress\trefuel\toptimal (all zones)\tsingle-zone optimal: mean\tbest zone\trefuel met")
		for _, bm := range multis {
			for _, dl := range dls {
				cs := pick(func(c *benchCell) bool { return c.market == bm && c.deadline == dl })
				if len(cs) == 0 {
					continue
				}
				s := statsOf(cs)
				mean, best := singleZoneOptimum(bm, dl, cells)
				fmt.Fprintf(tw, "%s\t%s\t%.1f%%\t%.1f%%\t%.1f%%\t%.1f%%\t%.1f%%\t%.1f%%\t%d/%d\n", bm.name, shortDuration(dl),
					100*s.cost[policy.Greedy], 100*s.cost[policy.UniformProgress], 100*s.cost[policy.Refuel], 100*s.cost[policy.Optimal],
					100*mean, 100*best, s.met[policy.Refuel], s.n)
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
	for _, dl := range dls {
		var cs []*benchCell
		for _, c := range cells {
			if c.market.zones == 1 && c.deadline == dl {
				cs = append(cs, c)
			}
		}
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
			var cs []*benchCell
			for _, c := range cells {
				if c.market == bm && c.deadline == dl {
					cs = append(cs, c)
				}
			}
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

// maxOverOptimal is how far above the omniscient optimum refuel's mean
// may be: no published online policy comes within 5%.
const maxOverOptimal = 1.10

// shortDuration writes 52h rather than 52h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	s = strings.TrimSuffix(s, "0s")
	return strings.TrimSuffix(s, "0m")
}
