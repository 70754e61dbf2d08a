package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"refuel/pkg/policy"
	"refuel/pkg/replay"
	"refuel/pkg/spec"
	"refuel/pkg/trace"
)

// simLong is `starter sim -h`'s description.
const simLong = `Replay spot availability traces (shared/traces format) under market
policies, with the simulation model of docs/contracts.md. Several --trace
files are several zones the job may move between.

With --nodes N the job is a gang of N instances held at once in one zone
and market. A trace's points count the instances in stock: the gang has
spot during a tick whose point is N or more, and a drop below N while it
holds spot preempts the whole gang. A one-node trace (only 0s and 1s)
stands for every node alike: its 1 is stock for the whole gang. Each of
the N instances is billed; spot_hours and ondemand_hours are the gang's
hours, and a checkpoint moved between regions is moved once.

With --min-nodes M (below N) the gang is elastic: on spot it may train on
any M to N nodes a tick has in stock in its zone, its work progressing at
that share of the whole gang's rate; each change of width is a start and
pays the restart overhead, a drop below the nodes held preempts them, and
on-demand always holds all N. The model is in docs/simulation.md.

Policies (--policy, repeated or comma-separated; default refuel):
  ondemand, greedy, uniform-progress, skynomad (SkyNomad, Li et al. 2026,
  a peer written from its paper), refuel, optimal (the omniscient offline
  optimum); "all" runs every one.

Output: one JSON object per line per window and policy with --json (policy,
start, cost_usd, finish_hours, deadline_met, spot_hours, ondemand_hours,
preemptions, changeovers, and more), else a table. With --starts N, the
windows' rows come first, window by window, then one summary row per
policy ("summary": true).`

// simFlags is what `starter sim` was asked.
type simFlags struct {
	traces   []string
	policies []policy.Name
	tier     spec.Tier
	job      replay.Job
	start    int
	starts   int
	json     bool
	plot     string
	// prices, when set, price each zone apart (--prices); transfer is the
	// link a checkpoint moves between regions over, in Gbit/s.
	prices   string
	transfer float64
	// instanceType, when set, is every zone's instance type for --prices.
	instanceType string
	// knowing is how policies know the zones' stock (--sees-every-zone).
	knowing stockFlags
}

// FlagError is a flag given a value `starter sim` cannot use.
type FlagError struct {
	Flag, Problem, Fix string
}

func (e *FlagError) Error() string { return fmt.Sprintf("--%s %s; %s", e.Flag, e.Problem, e.Fix) }

// simCommand is `starter sim`: its flags keep the names and meanings of
// docs/contracts.md.
func simCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sim --trace FILE ... --policy NAME",
		Short: "replay spot traces against market policies",
		Long:  simLong,
		Example: "  starter sim --trace us-west-2a_v100_1.json --work 48h --deadline 52h --policy refuel,skynomad,optimal --starts 10 --json\n" +
			"  starter sim --trace us-east-2b_v100_1.json --nodes 4 --policy refuel,optimal --starts 10   # a gang of 4 on counts of instances in stock",
		Args: noArgs("starter sim takes no arguments; give traces with --trace FILE"),
	}
	f := simFlags{tier: spec.TierDeadline, job: replay.Job{SpotPrice: 0.9701, OnDemandPrice: 3.06}}
	fs := cmd.Flags()
	listVar(fs, &f.traces, "trace", "file", one(func(s string) (string, error) { return s, nil }), "a trace file (JSON); repeat for several zones")
	listVar(fs, &f.policies, "policy", "names", parsePolicies, "policy NAME; repeat or comma-separate to compare, all for every one (default refuel)")
	durationVar(fs, &f.job.Work, "work", 48*time.Hour, "compute time the job needs on one instance (on all of them at once, with --nodes)")
	durationVar(fs, &f.job.Deadline, "deadline", 52*time.Hour, "time from start by which the job must finish")
	durationVar(fs, &f.job.RestartOverhead, "restart-overhead", 12*time.Minute, "paid time without progress on every start of an instance")
	priceVar(fs, &f.job.SpotPrice, "spot-price", 0.9701, "spot price, USD per instance-hour")
	priceVar(fs, &f.job.OnDemandPrice, "ondemand-price", 3.06, "on-demand price, USD per instance-hour")
	tier := fs.String("tier", string(spec.TierDeadline), "tier of the job: deadline, flexible or critical")
	fs.StringVar(&f.prices, "prices", "", "price each zone from FILE (DescribeSpotPriceHistory's JSON with OnDemandPrices beside it, or a .csv table with columns zone, region, spot_usd_per_hour and on_demand_usd_per_hour, as the GCP trace's prices.csv), or from refuel's embedded prices with \""+embeddedPrices+"\"; without it every zone charges --spot-price and --ondemand-price")
	fs.StringVar(&f.instanceType, "instance-type", "", "with --prices: the instance type every zone is priced as, any cloud's (p3.2xlarge, a3-highgpu-8g); default the one each trace's name maps to")
	fs.Float64Var(&f.job.EgressUSDPerGB, "egress-usd-per-gb", 0.02, "with --prices: USD per GB a checkpoint moved to another region costs")
	fs.Float64Var(&f.job.CheckpointGB, "checkpoint-gb", 0, "with --prices: size of the run's checkpoint in GB, moved on a start in another region")
	fs.Float64Var(&f.transfer, "transfer-gbps", 1, "with --prices: Gbit/s a checkpoint moves between regions at; its time is spent in whole ticks of the traces; 0: moves take no time, as in make bench-skynomad")
	fs.IntVar(&f.job.Nodes, "nodes", 1, fmt.Sprintf("instances the job needs at once in one zone, a gang (1 to %d)", spec.MaxNodes))
	fs.IntVar(&f.job.MinNodes, "min-nodes", 0, "fewest nodes the gang trains on when spot for all is out of stock, an elastic gang (default --nodes: rigid)")
	fs.IntVar(&f.start, "start", 0, "tick of the traces the job starts at")
	fs.IntVar(&f.starts, "starts", 0, "run N windows whose starts are spread evenly over the traces, then a summary")
	fs.BoolVar(&f.json, "json", false, "print one JSON object per line")
	fs.StringVar(&f.plot, "plot", "", "draw progress and market over time to FILE (.png or .svg)")
	fs.IntVar(&f.job.Rules, "rules", policy.RulesLatest, rulesUsage)
	f.knowing.register(fs)
	policies := []string{"all"}
	for _, n := range policy.Names {
		policies = append(policies, string(n))
	}
	for name, complete := range map[string]cobra.CompletionFunc{
		"trace": completeFiles("json"), "policy": completeWords(policies...), "tier": completeWords("deadline", "flexible", "critical"),
		"prices": completeFiles("json", "csv"), "plot": completeFiles("png", "svg"),
		"work": completeNothing, "deadline": completeNothing, "restart-overhead": completeNothing, "spot-price": completeNothing,
		"ondemand-price": completeNothing, "egress-usd-per-gb": completeNothing, "checkpoint-gb": completeNothing,
		"transfer-gbps": completeNothing, "instance-type": completeNothing, "rules": completeNothing, "nodes": completeNothing, "min-nodes": completeNothing, "start": completeNothing, "starts": completeNothing,
	} {
		_ = cmd.RegisterFlagCompletionFunc(name, complete)
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		t := spec.Tier(strings.ToLower(*tier))
		if t != spec.TierDeadline && t != spec.TierFlexible && t != spec.TierCritical {
			return &FlagError{"tier", fmt.Sprintf("%q is not a tier", *tier), "use deadline, flexible or critical"}
		}
		f.tier, f.job.Tier = t, t
		f.job.TransferTime = transferTime(f.job.CheckpointGB, f.transfer)
		if err := checkRules(f.job.Rules); err != nil {
			return err
		}
		var err error
		if f.job.LearnsByTrying, err = f.knowing.learns(cmd); err != nil {
			return err
		}
		if len(f.policies) == 0 {
			f.policies = []policy.Name{policy.Refuel}
		}
		if err := f.check(); err != nil {
			return err
		}
		return replayTraces(f, cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
	return cmd
}

// stockFlags are how policies know the stock of the zones they do not
// hold, in starter sim and sim-bench: by trying spot there, as the
// product does (the default), or seeing every zone at every tick for
// free (--sees-every-zone), the model runs recorded before it decide in.
type stockFlags struct {
	tries, seesAll bool
}

func (k *stockFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&k.tries, "learns-by-trying", true, "policies know a zone they do not hold only as the product does: by trying spot there (refused for nothing, or taken and held), from the market's past and from the probes they pay for")
	fs.BoolVar(&k.seesAll, "sees-every-zone", false, "every policy sees every zone's spot stock at every tick, for free: the model before policies learnt stock by trying, which runs recorded before it replay in")
}

// learns reports whether policies learn stock by trying, refusing the
// two flags given against each other.
func (k *stockFlags) learns(cmd *cobra.Command) (bool, error) {
	if k.seesAll && k.tries && cmd.Flags().Changed("learns-by-trying") {
		return false, &FlagError{"sees-every-zone", "contradicts --learns-by-trying", "give one of them: policies either learn stock by trying (the default) or see every zone"}
	}
	return k.tries && !k.seesAll, nil
}

// rulesUsage is the help of --rules in starter sim and sim-bench: the
// version of refuel's rules the refuel policy decides by
// (policy.Market.Rules).
const rulesUsage = "version of refuel's rules to decide by: 0 for runs recorded before live runs adopted later ones, up to the latest, which live runs decide by now (see docs/simulation.md)"

// checkRules rejects a --rules version refuel does not have.
func checkRules(v int) error {
	if v < 0 || v > policy.RulesLatest {
		return &FlagError{"rules", fmt.Sprintf("%d is outside 0..%d", v, policy.RulesLatest), fmt.Sprintf("give a version of refuel's rules, e.g. --rules %d (the latest) or --rules 0", policy.RulesLatest)}
	}
	return nil
}

// parsePolicies reads one item of --policy: a policy's name, or all.
func parsePolicies(s string) ([]policy.Name, error) {
	if s == "all" {
		return policy.Names, nil
	}
	n, err := policy.ParseName(s)
	if err != nil {
		return nil, err
	}
	return []policy.Name{n}, nil
}

// check rejects combinations of flags that cannot be run, naming the flag.
func (f simFlags) check() error {
	bad := func(flag, problem, fix string) error { return &FlagError{flag, problem, fix} }
	j := f.job
	switch {
	case len(f.traces) == 0:
		return bad("trace", "is missing", "give at least one trace file, e.g. --trace shared/traces/availability/1-node/aws-10-26-2022/us-west-2a_v100_1.json")
	case j.Work <= 0:
		return bad("work", "must be positive", "give the compute time, e.g. --work 48h")
	case j.Deadline < j.Work:
		return bad("deadline", fmt.Sprintf("%s is shorter than --work %s", j.Deadline, j.Work), "give a deadline at least as long as the work")
	case j.RestartOverhead < 0:
		return bad("restart-overhead", "is negative", "give 0 or more, e.g. --restart-overhead 12m")
	case j.Nodes < 1 || j.Nodes > spec.MaxNodes:
		return bad("nodes", fmt.Sprintf("%d is outside 1..%d", j.Nodes, spec.MaxNodes), fmt.Sprintf("give the instances the job needs at once, e.g. --nodes 2 (at most %d)", spec.MaxNodes))
	case j.MinNodes < 0 || j.MinNodes > j.Nodes:
		return bad("min-nodes", fmt.Sprintf("%d is outside 1..%d (--nodes)", j.MinNodes, j.Nodes), "give the fewest nodes the gang may train on, at most --nodes, e.g. --nodes 4 --min-nodes 2")
	case f.start < 0:
		return bad("start", fmt.Sprintf("%d is negative", f.start), "give a tick from 0")
	case f.starts < 0:
		return bad("starts", fmt.Sprintf("%d is negative", f.starts), "give a number of windows, e.g. --starts 10")
	case f.starts > 0 && f.start != 0:
		return bad("starts", "and --start were both given", "use --start for one window or --starts for several")
	case j.EgressUSDPerGB < 0:
		return bad("egress-usd-per-gb", "is negative", "give USD per GB, e.g. --egress-usd-per-gb 0.02")
	case j.CheckpointGB < 0:
		return bad("checkpoint-gb", "is negative", "give the checkpoint's size in GB, e.g. --checkpoint-gb 50")
	case f.transfer < 0:
		return bad("transfer-gbps", fmt.Sprintf("%v is not a rate", f.transfer), "give the link's Gbit/s, e.g. --transfer-gbps 1, or 0 for moves that take no time")
	case f.plot != "" && !strings.HasSuffix(f.plot, ".png") && !strings.HasSuffix(f.plot, ".svg"):
		return bad("plot", fmt.Sprintf("%q names neither a .png nor an .svg file", f.plot), "end the file name with .png or .svg")
	}
	for _, p := range f.policies {
		if p == policy.Optimal && f.tier != spec.TierDeadline {
			return bad("policy", "optimal is computed for tier deadline only", "drop optimal or use --tier deadline")
		}
	}
	return nil
}

// simRow is one window replayed under one policy. The first nine fields
// are the contract of docs/contracts.md; the rest were added.
type simRow struct {
	Policy        policy.Name `json:"policy"`
	Start         int         `json:"start"`
	CostUSD       float64     `json:"cost_usd"`
	FinishHours   float64     `json:"finish_hours"`
	DeadlineMet   bool        `json:"deadline_met"`
	SpotHours     float64     `json:"spot_hours"`
	OnDemandHours float64     `json:"ondemand_hours"`
	Preemptions   int         `json:"preemptions"`
	Changeovers   int         `json:"changeovers"`
	Finished      bool        `json:"finished"`
	Restarts      int         `json:"restarts"`
	// CostFraction is the cost as a share of on-demand from start to end.
	CostFraction float64 `json:"cost_fraction"`
	Tier         string  `json:"tier"`
	// Transfers are moves of the checkpoint between regions, EgressUSD
	// their cost (in cost_usd).
	Transfers int     `json:"transfers"`
	EgressUSD float64 `json:"egress_usd"`
	// Nodes is the gang's size (--nodes): cost_usd bills each node.
	Nodes int `json:"nodes"`
	// MinNodes is the fewest it trains on (--min-nodes), and ShrunkHours
	// the part of spot_hours it trained on fewer than all its nodes.
	MinNodes    int     `json:"min_nodes"`
	ShrunkHours float64 `json:"shrunk_hours"`
	// ProbeUSD is what trying spot to learn zones' stock cost (in
	// cost_usd): the probes of refuel and skynomad.
	ProbeUSD float64 `json:"probe_usd"`
	// CloudMoves counts the transfers that moved the checkpoint to another
	// cloud; Placements is the run's timeline, each stretch on one
	// offering named by its key, cloud first.
	CloudMoves int            `json:"cloud_moves"`
	Placements []simPlacement `json:"placements,omitempty"`
}

// replayTraces replays what f asks.
func replayTraces(f simFlags, stdout, stderr io.Writer) error {
	traces, err := trace.LoadAll(f.traces)
	if err != nil {
		return err
	}
	market, err := replay.NewMarket(traces)
	if err != nil {
		return err
	}
	fewest := f.job.Nodes
	if f.job.MinNodes > 0 {
		fewest = f.job.MinNodes
	}
	warnGang(stderr, "sim", traces, fewest)
	var prices *trace.Prices
	var table map[string]replay.ZonePrice
	switch {
	case f.prices != "" && isPriceTable(f.prices):
		if table, err = readZonePrices(f.prices); err != nil {
			return &FlagError{"prices", err.Error(), "give a table with a header zone,region,spot_usd_per_hour,on_demand_usd_per_hour, a price file or " + embeddedPrices}
		}
	case f.prices != "":
		if prices, err = loadPrices(f.prices); err != nil {
			return &FlagError{"prices", err.Error(), "give a price file, a table of zone prices (.csv) or " + embeddedPrices}
		}
	}
	starts := []int{f.start}
	if f.starts > 0 {
		if starts, err = market.Starts(f.starts, f.job.Deadline); err != nil {
			return &FlagError{"starts", err.Error(), "or give a single --start"}
		}
	} else if f.start >= market.Ticks() {
		return &FlagError{"start", fmt.Sprintf("%d is past the traces' last tick %d", f.start, market.Ticks()-1), "start within the traces"}
	} else if last, err := market.LastStart(f.job.Deadline); err != nil || f.start > last {
		fmt.Fprintf(stderr, "sim: the deadline runs past the end of the traces; spot counts as out of stock there\n")
	}
	offerings := zoneOfferings(traces, f.instanceType)
	var rows []simRow
	var plotted []replay.Result
	plotJob := f.job
	for w, start := range starts {
		if len(starts) > 1 {
			fmt.Fprintf(stderr, "sim: window %d/%d (start tick %d)\n", w+1, len(starts), start)
		}
		job := placedJob(f.job, traces, offerings)
		switch {
		case table != nil:
			if job, err = tabledJob(job, traces, offerings, table, f.prices); err != nil {
				return &FlagError{"prices", err.Error(), "price every zone of the traces"}
			}
		case prices != nil:
			if job, err = pricedJob(job, traces, market.Gap, start, prices, f.prices, f.instanceType, true); err != nil {
				return &FlagError{"prices", err.Error(), "price every zone of the traces"}
			}
		}
		if w == 0 {
			plotJob = job
		}
		for _, p := range f.policies {
			res, err := replaySim(market, job, start, p)
			if err != nil {
				return fmt.Errorf("policy %s, start %d: %w", p, start, err)
			}
			row := rowOf(p, job, res)
			row.Placements = placements(market, offerings, res)
			rows = append(rows, row)
			if w == 0 {
				plotted = append(plotted, res)
			}
		}
	}
	if err := printSim(stdout, f, rows, clouds(offerings)); err != nil {
		return err
	}
	if f.plot != "" {
		if len(starts) > 1 {
			fmt.Fprintf(stderr, "sim: plotting the first window (start tick %d)\n", starts[0])
		}
		if err := writePlot(f.plot, market, plotJob, f.policies, plotted); err != nil {
			return err
		}
		where, err := filepath.Abs(f.plot)
		if err != nil {
			where = f.plot
		}
		fmt.Fprintf(stderr, "sim: wrote the plot to %s\n", where)
	}
	return nil
}

// replaySim replays one window under one policy.
func replaySim(m *replay.Market, job replay.Job, start int, p policy.Name) (replay.Result, error) {
	if p == policy.Optimal {
		plan, err := replay.Optimal(m, job, start)
		if err != nil {
			return replay.Result{}, err
		}
		return replay.Run(m, job, start, plan)
	}
	return replay.Run(m, job, start, replay.NewOnline(job.Tier, p))
}

// replayKnown replays refuel from start planning with the window's own
// statistics (replay.KnownStatistics).
func replayKnown(m *replay.Market, job replay.Job, start int) (replay.Result, error) {
	k, err := replay.NewKnownStatistics(m, job, start, replay.NewOnline(job.Tier, policy.Refuel))
	if err != nil {
		return replay.Result{}, err
	}
	return replay.Run(m, job, start, k)
}

func rowOf(p policy.Name, job replay.Job, r replay.Result) simRow {
	row := simRow{
		Policy: p, Start: r.Start, CostUSD: r.Cost, FinishHours: r.Finish.Hours(), DeadlineMet: r.DeadlineMet,
		SpotHours: r.Spot.Hours(), OnDemandHours: r.OnDemand.Hours(),
		Preemptions: r.Preemptions, Changeovers: r.Changeovers,
		Finished: r.Finished, Restarts: r.Starts, CostFraction: r.Cost / job.OnDemandCost(), Tier: string(job.Tier),
		Transfers: r.Transfers, EgressUSD: r.EgressUSD, Nodes: max(1, job.Nodes),
		MinNodes: max(1, job.Nodes), ShrunkHours: r.Shrunk.Hours(), ProbeUSD: r.ProbeUSD,
		CloudMoves: r.CloudMoves,
	}
	if job.MinNodes > 0 {
		row.MinNodes = job.MinNodes
	}
	return row
}

// warnGang says which traces can never hold a gang of nodes: traces of
// counts that never saw that many in stock at once.
func warnGang(stderr io.Writer, cmd string, traces []*trace.Trace, nodes int) {
	for _, t := range traces {
		if !t.OneNode() && t.Peak() < nodes {
			fmt.Fprintf(stderr, "%s: %s counts at most %d instances in stock; a gang of %d never finds spot there\n", cmd, t.File, t.Peak(), nodes)
		}
	}
}
