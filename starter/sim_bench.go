package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"refuel/pkg/policy"
	"refuel/pkg/replay"
	"refuel/pkg/spec"
	"refuel/pkg/trace"
)

// benchPolicies are compared by `starter sim-bench`, in this order.
var benchPolicies = []policy.Name{policy.OnDemandOnly, policy.Greedy, policy.UniformProgress, policy.SkyNomad, policy.Refuel, policy.Optimal}

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
	// sameAs is the one-node window whose shares this gang's window has,
	// replayed instead of it (see sameShares).
	sameAs *benchCell
}

// sameShares points the windows of a gang on markets of one-node traces,
// with no regions to move between, at the same windows replayed for one
// node, where there are: such a market gives every node the same stock,
// policies decide a gang in one node's prices and the optimum bills every
// node alike, so each policy's cost as a share of all-on-demand is the
// same for any gang (docs/simulation.md). It returns the windows still to
// replay.
func sameShares(gang, one []*benchCell) []*benchCell {
	type key struct {
		m     *benchMarket
		dl    time.Duration
		start int
	}
	byKey := map[key]*benchCell{}
	for _, c := range one {
		byKey[key{c.market, c.deadline, c.start}] = c
	}
	var todo []*benchCell
	for _, c := range gang {
		oneNode := true
		for _, t := range c.market.traces {
			oneNode = oneNode && t.OneNode()
		}
		if same := byKey[key{c.market, c.deadline, c.start}]; oneNode && same != nil {
			c.sameAs = same
			continue
		}
		todo = append(todo, c)
	}
	return todo
}

// benchOptions are what `starter sim-bench` was asked.
type benchOptions struct {
	dirs      []string
	nodes     []int
	starts    int
	full      bool
	deadlines []time.Duration
	job       replay.Job
	known     bool
	prices    string
	gbps      float64
	regions   bool
	// regionTick is the tick of the markets across priced regions: those
	// sampled finer are read at a multiple of their gap at least this long
	// (trace.Coarsen); 0 keeps each market's own.
	regionTick time.Duration
	// skynomad is the folder of SkyNomad's authors' trace: with it the
	// bench replays their figures instead (skyNomadBench).
	skynomad string
	// knowing is how policies know the zones' stock (--sees-every-zone),
	// read into job.LearnsByTrying.
	knowing stockFlags
}

// simBenchCommand is `starter sim-bench` (make bench-policy): every trace
// under each --traces folder, replayed at each deadline from --starts
// start ticks under every policy, and every set of traces of one
// instance type in several zones of one folder replayed as a multi-zone
// market; for each --nodes. It prints each policy's mean cost as a share
// of all-on-demand and its deadlines met, then checks refuel against its
// targets. Every replay of every table runs in one pool on every core.
func simBenchCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sim-bench [--traces DIR]",
		Short: "compare the market policies over every trace (make bench-policy)",
		Long: `Compare the market policies over every trace under --traces, at each deadline
from --starts start ticks, and check refuel against its targets. --traces
and --nodes may each be repeated or comma-separated: every folder is
replayed for every gang size, each a table of its own, all the replays of
all of them sharing the cores.`,
		Example: "  starter sim-bench --traces ../shared/traces/availability --known-statistics\n" +
			"  starter sim-bench --traces ../shared/traces/availability,../shared/traces/preemption --nodes 1,4",
		Args: noArgs("starter sim-bench takes no arguments; give folders of traces with --traces DIR"),
	}
	dflt := os.Getenv("REFUEL_TRACES")
	if dflt == "" {
		dflt = filepath.Join("..", "shared", "traces", "availability")
	}
	o := benchOptions{dirs: []string{dflt}, nodes: []int{1}, deadlines: []time.Duration{52 * time.Hour, 70 * time.Hour},
		job: replay.Job{Tier: spec.TierDeadline, SpotPrice: 0.9701, OnDemandPrice: 3.06}}
	fs := cmd.Flags()
	listVar(fs, &o.dirs, "traces", "dirs", one(func(s string) (string, error) { return s, nil }), "folder of traces, searched at any depth (env REFUEL_TRACES); repeat or comma-separate for several tables")
	fs.IntVar(&o.starts, "starts", 0, fmt.Sprintf("start offsets per trace and deadline, spread evenly over the traces (default %d, %d for a gang; with --full %d, %d for a gang)", quickStarts, quickGangStarts, fullStarts, fullGangStarts))
	fs.BoolVar(&o.full, "full", false, "the full set: more windows (see --starts) and --known-statistics; about 25 minutes on two shared cores, where the default takes a few")
	listVar(fs, &o.deadlines, "deadlines", "durations", one(func(s string) (time.Duration, error) {
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration; write durations such as 52h,70h", s)
		}
		return d, nil
	}), "comma-separated deadlines")
	durationVar(fs, &o.job.Work, "work", 48*time.Hour, "compute time of the job")
	durationVar(fs, &o.job.RestartOverhead, "restart-overhead", 12*time.Minute, "restart overhead")
	priceVar(fs, &o.job.SpotPrice, "spot-price", 0.9701, "spot USD per hour")
	priceVar(fs, &o.job.OnDemandPrice, "ondemand-price", 3.06, "on-demand USD per hour")
	fs.BoolVar(&o.known, "known-statistics", false, "also replay refuel planning with each window's own stretch statistics, known in advance (every zone's and, across zones, the stock's; not their order): how much of its distance from the optimum better estimation could win; single-zone windows, or every point with --skynomad")
	fs.StringVar(&o.prices, "prices", embeddedPrices, "prices for the table across priced regions: a price file, or "+embeddedPrices)
	fs.Float64Var(&o.job.CheckpointGB, "checkpoint-gb", 50, "size of the checkpoint a move between regions transfers, in GB")
	fs.Float64Var(&o.job.EgressUSDPerGB, "egress-usd-per-gb", 0.02, "USD per GB a checkpoint moved to another region costs")
	fs.Float64Var(&o.gbps, "transfer-gbps", 1, "Gbit/s a checkpoint moves between regions at")
	listVar(fs, &o.nodes, "nodes", "counts", one(positiveInt), fmt.Sprintf("instances the job needs at once in one zone, a gang (1 to %d); comma-separate for a table per size; see starter sim -h", spec.MaxNodes))
	fs.IntVar(&o.job.Rules, "rules", policy.RulesLatest, rulesUsage)
	o.knowing.register(fs)
	fs.BoolVar(&o.regions, "priced-regions", true, "also replay markets whose zones span regions with each zone at its own prices")
	fs.StringVar(&o.skynomad, "skynomad", "", "replay instead every point of SkyNomad's Figures 10a and 10b on its authors' trace in this folder (with prices.csv), beside their published results (make bench-skynomad)")
	durationVar(fs, &o.regionTick, "region-tick", 3*time.Minute, "with --priced-regions, replay markets sampled finer at the smallest multiple of their gap at least this long, a tick in stock only where stock lasted through it (the optimum across priced regions at 30 s ticks takes tens of minutes); 0 keeps their own")
	for name, complete := range map[string]cobra.CompletionFunc{
		"traces": completeDirs, "skynomad": completeDirs, "prices": completeFiles("json"),
		"starts": completeNothing, "deadlines": completeNothing, "work": completeNothing, "restart-overhead": completeNothing,
		"spot-price": completeNothing, "ondemand-price": completeNothing, "checkpoint-gb": completeNothing,
		"egress-usd-per-gb": completeNothing, "transfer-gbps": completeNothing, "nodes": completeNothing, "region-tick": completeNothing, "rules": completeNothing,
	} {
		_ = cmd.RegisterFlagCompletionFunc(name, complete)
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := checkRules(o.job.Rules); err != nil {
			return err
		}
		var err error
		if o.job.LearnsByTrying, err = o.knowing.learns(cmd); err != nil {
			return err
		}
		if o.skynomad != "" {
			return skyNomadBench(o.skynomad, o.job.LearnsByTrying, o.job.Rules, o.known || o.full, cmd.OutOrStdout(), cmd.ErrOrStderr())
		}
		return simBench(o, fs.Changed("starts"), cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
	return cmd
}

// benchSection is one table: the traces of a folder for a gang size.
type benchSection struct {
	dir     string
	job     replay.Job
	singles []*benchMarket
	multis  []*benchMarket
	cells   []*benchCell
	regions []*regionCell
}

func simBench(o benchOptions, explicitStarts bool, stdout, stderr io.Writer) error {
	o.job.TransferTime = transferTime(o.job.CheckpointGB, o.gbps)
	for _, n := range o.nodes {
		if n > spec.MaxNodes {
			return &FlagError{"nodes", fmt.Sprintf("%d is outside 1..%d", n, spec.MaxNodes), fmt.Sprintf("give the instances the job needs at once, e.g. --nodes 2 (at most %d)", spec.MaxNodes)}
		}
	}
	for _, d := range o.deadlines {
		if d < o.job.Work {
			return &FlagError{"deadlines", fmt.Sprintf("%s is shorter than --work %s", shortDuration(d), shortDuration(o.job.Work)), "write deadlines of at least the work, such as 52h,70h"}
		}
	}
	if explicitStarts && o.starts < 1 {
		return &FlagError{"starts", fmt.Sprintf("%d is below 1", o.starts), "give the number of start offsets, e.g. 10"}
	}
	if o.regionTick < 0 {
		return &FlagError{"region-tick", fmt.Sprintf("%s is negative", o.regionTick), "give 0 or a tick such as 3m"}
	}
	priced, err := loadPrices(o.prices)
	if err != nil {
		return &FlagError{"prices", err.Error(), "give a price file or " + embeddedPrices}
	}
	o.known = o.known || o.full
	type loaded struct{ singles, multis []*benchMarket }
	byDir := map[string]loaded{}
	var sections []*benchSection
	var tasks []benchTask
	var mu sync.Mutex
	oneNode := map[string][]*benchCell{} // per folder, the windows replayed for one node
	for _, nodes := range o.nodes {
		for _, dir := range o.dirs {
			l, ok := byDir[dir]
			if !ok {
				if l.singles, l.multis, err = benchMarkets(dir); err != nil {
					return err
				}
				byDir[dir] = l
			}
			job := o.job
			job.Nodes = nodes
			starts := o.starts
			switch {
			case explicitStarts:
			case o.full && nodes > 1:
				starts = fullGangStarts
			case o.full:
				starts = fullStarts
			case nodes > 1:
				starts = quickGangStarts
			default:
				starts = quickStarts
			}
			sec := &benchSection{dir: dir, job: job, singles: l.singles, multis: l.multis}
			for _, bm := range l.singles {
				warnGang(stderr, "sim-bench", bm.traces, nodes)
			}
			sec.cells = benchCells(sec, o.deadlines, starts, stderr)
			if o.regions {
				sec.regions = regionCells(sec, o.deadlines, starts, o.regionTick, priced, o.prices, stderr)
			}
			todo := sec.cells
			if nodes == 1 {
				oneNode[dir] = sec.cells
			} else {
				todo = sameShares(sec.cells, oneNode[dir])
			}
			tasks = append(tasks, cellTasks(todo, job, o.known, &mu)...)
			tasks = append(tasks, regionTasks(sec.regions, &mu)...)
			sections = append(sections, sec)
		}
	}
	if err := runBenchTasks(tasks, stderr); err != nil {
		return err
	}
	for _, sec := range sections {
		for _, c := range sec.cells {
			if c.sameAs != nil {
				c.cost, c.met, c.known = c.sameAs.cost, c.sameAs.met, c.sameAs.known
			}
		}
	}
	for i, sec := range sections {
		if len(sections) > 1 {
			if i > 0 {
				fmt.Fprintln(stdout)
			}
			fmt.Fprintf(stdout, "== %s, %s ==\n\n", sec.dir, plural(sec.job.Nodes, "node"))
		}
		printBench(stdout, sec.job, o.deadlines, sec.singles, sec.multis, sec.cells)
		printRegions(stdout, o.prices, o.deadlines, sec.regions)
	}
	return nil
}

// benchCells are the windows of every market of a section at every
// deadline.
func benchCells(sec *benchSection, dls []time.Duration, starts int, stderr io.Writer) []*benchCell {
	var cells []*benchCell
	for _, group := range [][]*benchMarket{sec.singles, sec.multis} {
		for _, bm := range group {
			for _, dl := range dls {
				ss, err := bm.market.Starts(starts, dl)
				if err != nil {
					if sec.job.Nodes == 1 || len(sec.singles) == 0 {
						fmt.Fprintf(stderr, "sim-bench: skipping %s at %s: %v\n", bm.name, shortDuration(dl), err)
					}
					continue
				}
				for _, st := range ss {
					cells = append(cells, &benchCell{market: bm, deadline: dl, start: st, cost: map[policy.Name]float64{}, met: map[policy.Name]bool{}})
				}
			}
		}
	}
	return cells
}

// regionCells are the windows of every market of a section whose zones
// span regions, each zone at its own prices, read at ticks of at least
// tick. Compute Engine zones are priced only from the price file itself:
// the bench's table keeps to markets the file prices.
func regionCells(sec *benchSection, dls []time.Duration, starts int, tick time.Duration, priced *trace.Prices, pricesName string, stderr io.Writer) []*regionCell {
	var cells []*regionCell
	for _, bm := range sec.multis {
		if !spansRegions(bm) {
			continue
		}
		if tick > 0 && bm.market.Gap < tick {
			var err error
			if bm, err = coarseMarket(bm, tick); err != nil {
				continue
			}
		}
		if _, err := pricedJob(sec.job, bm.traces, bm.market.Gap, 0, priced, pricesName, "", false); err != nil {
			fmt.Fprintf(stderr, "sim-bench: not replaying %s across priced regions: %v\n", bm.name, err)
			continue
		}
		for _, dl := range dls {
			ss, err := bm.market.Starts(starts, dl)
			if err != nil {
				continue
			}
			for _, st := range ss {
				j := sec.job
				j.Deadline = dl
				if j, err = pricedJob(j, bm.traces, bm.market.Gap, st, priced, pricesName, "", false); err != nil {
					continue
				}
				cells = append(cells, &regionCell{market: bm, deadline: dl, start: st, job: j,
					cost: map[policy.Name]float64{}, met: map[policy.Name]bool{}, moves: map[policy.Name]int{}, probes: map[policy.Name]float64{}})
			}
		}
	}
	return cells
}

// coarseMarket is bm read at ticks of at least tick (trace.Coarsen).
func coarseMarket(bm *benchMarket, tick time.Duration) (*benchMarket, error) {
	var ts []*trace.Trace
	for _, t := range bm.traces {
		ts = append(ts, t.Coarsen(tick))
	}
	m, err := replay.NewMarket(ts)
	if err != nil {
		return nil, err
	}
	return &benchMarket{name: fmt.Sprintf("%s at %s ticks", bm.name, shortDuration(m.Gap)), zones: bm.zones, market: m, traces: ts}, nil
}

// plural writes n things.
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
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
				res, err := replayKnown(m, j, c.start)
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

// shortDuration writes 52h rather than 52h0m0s, and 12m rather than 12m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
