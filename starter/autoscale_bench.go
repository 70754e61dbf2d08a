package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"refuel/pkg/autoscale"
	"refuel/pkg/servingsim"
	"refuel/pkg/traffic"
)

// The autoscaling benchmark (`starter autoscale-bench`, make
// bench-autoscale) replays request traffic against one inference service
// under four policies and prints the share of requests within the SLO,
// p99 time to first token and cost side by side, for every scenario at
// every seed asked for (--seeds), with each policy's worst row. The rows
// refuel was tuned on (seeds up to --tuned-seeds, the real hour left out)
// print apart from those held out.
//
// Traffic. "hour" is the real trace as recorded. "day" lays the trace's
// steady part (its thin first and last seconds dropped) end to end over
// 24 h, each copy rotated by a seeded random offset, and keeps each
// request with probability 0.2 + 0.8*(1-cos(2π(t-04:00)/24h))/2: a daily
// cycle from 20% of the trace's rate at 04:00 to all of it at 16:00, with
// the trace's own minute-to-minute bursts on top. "day-late-half" is
// composed the same way from only the second half of the hour, with a 30%
// trough at 02:00; "bursts" is Poisson arrivals on a daily cycle with a
// burst every two hours on average that ramps up over 3 min to 1.3-2x,
// holds 5-20 min and ramps down. The rest is a family of shapes drawn
// from the seed (see traffic.Scenarios): a daily cycle with drift, the
// same at a tenth of the rate, a flash crowd, heavy-tailed bursts, a slow
// ramp, traffic that switches on and off, and the real hour at a quarter
// and at four times its rate. Request sizes are always the real hour's.
//
// Service (servingsim.BenchConfig). A replica prefills 2,000 context
// tokens/s and decodes 200 tokens/s summed over up to 8 requests at once
// (max_concurrency); a request holds its slot for its work (context over
// the first, generated tokens over the second) times 8. Requests are
// simulated one by one, event by event: each takes a free slot of a ready
// replica, or waits in arrival order; it is met when its first token (its
// wait, then its prefill) comes within 5 s (slo.latency), and fails when
// it waits 30 s (queue_timeout). Demand, for the oracle and for static
// provisioning, is the work arriving over the trailing minute.
//
// Start-up paths, the same for every policy: a warm-pool entry while the
// pool has one (the spec's warm_pool of 2: stopped instances that start in
// 30-60 s and load in 30-60 s, paid at their volume's price while they
// wait; --warm-running prices them as a provider that cannot stop them
// has them, running at full price); a machine from lower-priority work
// where --borrowable grants any (its checkpoint, 10-40 s, then a cold
// load); else a cold start (60-180 s to provision, 30-90 s to initialise,
// 45-105 s to load). The n-th start on a path takes the same time under
// every policy. A replica released while the pool is short is stopped
// into it; otherwise the pool is refilled by a cold preparation paid in
// full. Replicas are paid from request to release.
//
// Policies. refuel is autoscale.ForecastScaler, the policy of every
// InferenceService started now, with servingsim.BenchSpec; the reactive
// baseline is shaped like SkyServe's (QPS per replica, 300 s up and 1200
// s down delays) with the replica's throughput at the traffic's mean
// request size as its target; static provisions for the peak demand; the
// oracle (servingsim.Oracle) knows the demand and every start-up ahead
// and plans greedily, at the cheapest of a set of headrooms over demand
// that meets the SLO target: the best forecaster in hindsight. Every
// dynamic policy starts with the replicas the first start-up window
// needs, serving, and a full warm pool, as a service already running.

// benchEpoch is the virtual clock's origin: a Monday at midnight UTC, so
// composed days start at 00:00 and cron windows read naturally.
var benchEpoch = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

// Targets for refuel on every scenario at every seed, checked and printed
// under the table.
const (
	targetAttainment   = 0.99
	targetCostVsOracle = 1.15
)

// The policies, in the order of the table.
const (
	policyRefuel   = "refuel"
	policyReactive = "reactive (SkyServe-like)"
	policyStatic   = "static peak"
	policyOracle   = "oracle"
)

var autoscalePolicies = []string{policyRefuel, policyReactive, policyStatic, policyOracle}

type autoscaleRow struct {
	Scenario string  `json:"scenario"`
	Seed     uint64  `json:"seed"`
	Policy   string  `json:"policy"`
	Requests int     `json:"requests"`
	Hours    float64 `json:"hours"`
	servingsim.Result
	CostVsOracle float64 `json:"cost_vs_oracle"`
	CostVsStatic float64 `json:"cost_vs_static"`
	// Headroom is the oracle's over demand, chosen in hindsight.
	Headroom float64 `json:"headroom,omitempty"`
	// Hindsight is, on refuel's row where it misses its targets, the best
	// forecaster in hindsight on the same trace.
	Hindsight *hindsightRow `json:"best_in_hindsight,omitempty"`
}

// hindsightRow is the best forecaster in hindsight on one trace.
type hindsightRow struct {
	Attainment   float64 `json:"slo_attainment"`
	P99Latency   float64 `json:"p99_latency_seconds"`
	CostVsOracle float64 `json:"cost_vs_oracle"`
	Headroom     float64 `json:"headroom"`
}

// autoscaleBenchFlags are autoscale-bench's flags.
type autoscaleBenchFlags struct {
	trace, scenarios, plot string
	seeds                  int
	tunedSeeds             uint64
	window                 time.Duration
	asJSON                 bool
	cfg                    servingsim.Config
}

func autoscaleBenchCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "autoscale-bench [--trace FILE] [--seeds N] [--json] [--plot FILE]",
		Short: "compare autoscaling policies on inference traffic (make bench-autoscale)",
		Long: `Compare autoscaling policies on inference traffic composed from a request
trace in the Azure LLM format: refuel's forecasting autoscaler, a reactive
SkyServe-like baseline, static provisioning for the peak and an oracle
that knows demand ahead. Every scenario runs at each of --seeds seeds from
--seed on; the table gives SLO attainment and cost against the oracle, and
each policy's worst row.`,
		Example: "  starter autoscale-bench --trace ../shared/traces/inference/azure-llm-conv-2023-11-16.csv --seeds 5\n" +
			"  starter autoscale-bench --scenarios bursts --seed 3 --plot bursts.png",
		Args: noArgs("starter autoscale-bench takes no arguments: give the trace with --trace"),
	}
	var f autoscaleBenchFlags
	f.cfg = servingsim.BenchConfig()
	fl := cmd.Flags()
	trace := os.Getenv("REFUEL_INFERENCE_TRACE")
	if trace == "" {
		trace = filepath.Join("..", "shared", "traces", "inference", "azure-llm-conv-2023-11-16.csv")
	}
	fl.StringVar(&f.trace, "trace", trace, "request trace `FILE` in the Azure LLM format (env REFUEL_INFERENCE_TRACE)")
	fl.StringVar(&f.scenarios, "scenarios", strings.Join(traffic.ScenarioNames(), ","), "traffic patterns, `NAMES` separated by commas: "+strings.Join(traffic.ScenarioNames(), ", "))
	fl.Uint64Var(&f.cfg.Seed, "seed", f.cfg.Seed, "the first seed for composed traffic and start-up times")
	fl.IntVar(&f.seeds, "seeds", 1, "run every scenario at `N` seeds, from --seed on")
	fl.Float64Var(&f.cfg.Model.PrefillTokensPerSecond, "prefill-tps", f.cfg.Model.PrefillTokensPerSecond, "context tokens a replica prefills per second")
	fl.Float64Var(&f.cfg.Model.DecodeTokensPerSecond, "decode-tps", f.cfg.Model.DecodeTokensPerSecond, "tokens a replica generates per second, summed over its batch")
	fl.Float64Var(&f.cfg.PricePerHour, "price", f.cfg.PricePerHour, "USD per replica-hour")
	fl.Float64Var(&f.cfg.WarmPricePerHour, "warm-price", f.cfg.WarmPricePerHour, "USD per hour for a stopped warm-pool instance")
	fl.BoolVar(&f.cfg.WarmRunning, "warm-running", false, "price the warm pool as a provider that cannot stop an instance: running entries at --price that only load the model")
	fl.IntVar(&f.cfg.WarmPool, "warm-pool", f.cfg.WarmPool, "warm-pool entries every policy is given")
	fl.IntVar(&f.cfg.Borrowable, "borrowable", 0, "machines lower-priority work holds that every policy may take")
	fl.IntVar(&f.cfg.MaxConcurrency, "max-concurrency", f.cfg.MaxConcurrency, "requests one replica serves at once (max_concurrency)")
	fl.DurationVar(&f.cfg.SLOLatency, "slo-latency", f.cfg.SLOLatency, "time to the first token within which a request is met (slo.latency)")
	fl.DurationVar(&f.cfg.QueueTimeout, "queue-timeout", f.cfg.QueueTimeout, "a request waiting for a slot longer than this fails (queue_timeout)")
	fl.Uint64Var(&f.tunedSeeds, "tuned-seeds", 5, "the seeds refuel was tuned on, from 1: later seeds and the real hour are printed apart as held out")
	fl.DurationVar(&f.window, "demand-window", time.Minute, "demand is the work arriving over this trailing window")
	fl.BoolVar(&f.asJSON, "json", false, "print one JSON object per scenario, seed and policy")
	fl.StringVar(&f.plot, "plot", "", "draw load, forecast, replicas and misses over time to `FILE` (.png or .svg), for the first scenario at the first seed")
	_ = cmd.MarkFlagFilename("trace", "csv")
	_ = cmd.MarkFlagFilename("plot", "png", "svg")
	_ = cmd.RegisterFlagCompletionFunc("scenarios", completeScenarios)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return runAutoscaleBench(f, cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
	return cmd
}

// completeScenarios completes the last of a comma-separated list of
// scenarios.
func completeScenarios(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	done, last := "", toComplete
	if i := strings.LastIndex(toComplete, ","); i >= 0 {
		done, last = toComplete[:i+1], toComplete[i+1:]
	}
	var out []cobra.Completion
	for _, n := range traffic.ScenarioNames() {
		if strings.HasPrefix(n, last) {
			out = append(out, done+n)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
}

// check is what is wrong with the flags, as a *FlagError, and the
// scenarios they name.
func (f autoscaleBenchFlags) check() ([]traffic.Scenario, error) {
	switch {
	case f.cfg.Model.PrefillTokensPerSecond <= 0:
		return nil, &FlagError{"prefill-tps", "must be positive", "give a replica's prefill rate, e.g. 2000"}
	case f.cfg.Model.DecodeTokensPerSecond <= 0:
		return nil, &FlagError{"decode-tps", "must be positive", "give a replica's decode rate, e.g. 200"}
	case f.cfg.PricePerHour <= 0:
		return nil, &FlagError{"price", "must be positive", "give a replica's price per hour, e.g. 1.006"}
	case f.cfg.WarmPricePerHour < 0:
		return nil, &FlagError{"warm-price", "is negative", "give 0 or more USD per hour"}
	case f.cfg.WarmPool < 0:
		return nil, &FlagError{"warm-pool", "is negative", "give 0 or more entries"}
	case f.cfg.Borrowable < 0:
		return nil, &FlagError{"borrowable", "is negative", "give 0 or more machines"}
	case f.cfg.MaxConcurrency < 1:
		return nil, &FlagError{"max-concurrency", "is under one", "give the requests one replica serves at once, e.g. 8"}
	case f.cfg.SLOLatency <= 0:
		return nil, &FlagError{"slo-latency", "must be positive", "give a time to the first token such as 5s"}
	case f.cfg.QueueTimeout <= 0:
		return nil, &FlagError{"queue-timeout", "must be positive", "give how long a request may wait such as 30s"}
	case f.window < time.Second:
		return nil, &FlagError{"demand-window", "is under a second", "give a window such as 1m"}
	case f.seeds < 1:
		return nil, &FlagError{"seeds", fmt.Sprintf("%d is fewer than one", f.seeds), "give how many seeds to run, e.g. --seeds 5"}
	case f.plot != "" && !strings.HasSuffix(f.plot, ".png") && !strings.HasSuffix(f.plot, ".svg"):
		return nil, &FlagError{"plot", fmt.Sprintf("%q names neither a .png nor an .svg file", f.plot), "end the file name with .png or .svg"}
	}
	var chosen []traffic.Scenario
	all := traffic.Scenarios()
	for _, n := range strings.Split(f.scenarios, ",") {
		n = strings.TrimSpace(n)
		i := slices.IndexFunc(all, func(s traffic.Scenario) bool { return s.Name == n })
		if i < 0 {
			return nil, &FlagError{"scenarios", fmt.Sprintf("%q is not a scenario", n), "use " + strings.Join(traffic.ScenarioNames(), ", ")}
		}
		chosen = append(chosen, all[i])
	}
	return chosen, nil
}

// benchRun is one scenario at one seed.
type benchRun struct {
	scenario traffic.Scenario
	seed     uint64
	timeline bool
	rows     []autoscaleRow
	steps    [][]servingsim.Sample // per policy, with timeline
	about    string
}

// runAutoscaleBench is `starter autoscale-bench` (make bench-autoscale).
func runAutoscaleBench(f autoscaleBenchFlags, stdout, stderr io.Writer) error {
	chosen, err := f.check()
	if err != nil {
		return err
	}
	hour, err := traffic.ReadAzureCSV(f.trace)
	if err != nil {
		return fmt.Errorf("--trace %w; give a request trace in the Azure LLM format, e.g. ../shared/traces/inference/azure-llm-conv-2023-11-16.csv", err)
	}
	var runs []*benchRun
	for _, sc := range chosen {
		for i := range f.seeds {
			runs = append(runs, &benchRun{scenario: sc, seed: f.cfg.Seed + uint64(i)})
		}
	}
	runs[0].timeline = f.plot != ""
	// Runs are independent and each is single-threaded: one per core.
	work := make(chan *benchRun)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(runs)) {
		wg.Go(func() {
			for r := range work {
				cfg := f.cfg
				cfg.Seed, cfg.Timeline = r.seed, r.timeline
				tr := r.scenario.Build(hour, r.seed)
				r.about = fmt.Sprintf("%s seed %d (%s): %d requests over %s", r.scenario.Name, r.seed, r.scenario.About, len(tr.Requests), tr.Span.Round(time.Second))
				r.rows, r.steps = benchScenario(r.scenario.Name, tr, cfg, f.window)
			}
		})
	}
	for _, r := range runs {
		work <- r
	}
	close(work)
	wg.Wait()
	var rows []autoscaleRow
	for _, r := range runs {
		fmt.Fprintf(stderr, "autoscale-bench: %s\n", r.about)
		rows = append(rows, r.rows...)
	}
	if f.plot != "" {
		r := runs[0]
		var plotted []plotRun
		for i, row := range r.rows {
			plotted = append(plotted, plotRun{policy: row.Policy, row: row, steps: r.steps[i]})
		}
		if err := writeAutoscalePlot(f.plot, r.scenario.Name, r.seed, plotted); err != nil {
			return err
		}
		where, err := filepath.Abs(f.plot)
		if err != nil {
			where = f.plot
		}
		fmt.Fprintf(stderr, "autoscale-bench: plotted %s at seed %d to %s\n", r.scenario.Name, r.seed, where)
	}
	if f.asJSON {
		return jsonLines(json.NewEncoder(stdout), rows)
	}
	printAutoscaleBench(stdout, f.cfg, f.window, f.tunedSeeds, rows)
	return nil
}

// oracleHeadrooms are the headrooms over demand the oracle is run at,
// and hindsightHeadrooms the best forecaster in hindsight's over the
// recent peak; the bench keeps the cheapest that meets the SLO target.
var (
	oracleHeadrooms    = []float64{0.8, 0.85, 0.9, 0.95, 1, 1.05, 1.1, 1.15, 1.2, 1.3, 1.4, 1.5, 1.75, 2}
	hindsightHeadrooms = []float64{0.9, 1, 1.1, 1.2, 1.3, 1.4, 1.5, 1.75, 2, 2.5, 3}
)

// cheapest runs a policy at every headroom and returns the cheapest run
// that meets the SLO target, else the one that serves most.
func cheapest(headrooms []float64, run func(h float64) servingsim.Result) (servingsim.Result, float64) {
	var best servingsim.Result
	bestHeadroom := 0.0
	for _, h := range headrooms {
		res := run(h)
		better := bestHeadroom == 0 ||
			(res.Attainment >= targetAttainment && (best.Attainment < targetAttainment || res.CostUSD < best.CostUSD)) ||
			(res.Attainment < targetAttainment && best.Attainment < targetAttainment && res.Attainment > best.Attainment)
		if better {
			best, bestHeadroom = res, h
		}
	}
	return best, bestHeadroom
}

// benchScenario runs every policy on one traffic pattern, in the order
// of autoscalePolicies, with each one's timeline when cfg asks for it.
// Every policy runs in the same cfg: the same start-up paths, warm pool
// and prices.
func benchScenario(name string, tr *traffic.Trace, cfg servingsim.Config, window time.Duration) ([]autoscaleRow, [][]servingsim.Sample) {
	demand := servingsim.NewDemand(tr, cfg.Model, window, benchEpoch)
	lead := cfg.Startup.Max()
	peak := ceilReplicas(demand.Max())
	initial := ceilReplicas(demand.Peak(benchEpoch, benchEpoch.Add(lead)))
	var work float64
	for _, r := range tr.Requests {
		work += cfg.Model.Work(r).Seconds()
	}
	svc := servingsim.BenchSpec()
	refuel, err := autoscale.NewForecastScaler(svc)
	if err != nil {
		panic(err) // BenchSpec is a constant spec
	}
	refuel.PricesFleetWarm = true // as the product's services do
	refuel.StaffsForLatency = true
	policies := []struct {
		policy  autoscale.Policy
		initial int
	}{
		{refuel, initial},
		{autoscale.NewReactive(float64(len(tr.Requests))/work, svc.MinReplicas, svc.MaxReplicas), initial},
		{autoscale.Static{Replicas: peak}, peak},
	}
	rows := make([]autoscaleRow, len(policies)+1)
	steps := make([][]servingsim.Sample, len(policies)+1)
	row := func(i int, res servingsim.Result) {
		steps[i], res.Timeline = res.Timeline, nil
		rows[i] = autoscaleRow{Scenario: name, Seed: cfg.Seed, Policy: autoscalePolicies[i], Requests: len(tr.Requests), Hours: tr.Span.Hours(), Result: res}
	}
	for i, p := range policies {
		row(i, servingsim.Run(tr, demand, p.policy, p.initial, cfg))
	}
	// The oracle: the cheapest headroom that meets the target, else the
	// one that serves most.
	best, headroom := cheapest(oracleHeadrooms, func(h float64) servingsim.Result {
		o := &servingsim.Oracle{Demand: demand, Headroom: h, Every: cfg.Every, Max: svc.MaxReplicas}
		return servingsim.Run(tr, demand, o, ceilReplicas(h*demand.Peak(benchEpoch, benchEpoch.Add(lead))), cfg)
	})
	oracle := len(policies)
	row(oracle, best)
	rows[oracle].Headroom = headroom
	static, oracleCost := rows[2].CostUSD, rows[oracle].CostUSD
	for i := range rows {
		rows[i].CostVsOracle = rows[i].CostUSD / oracleCost
		rows[i].CostVsStatic = rows[i].CostUSD / static
	}
	if refuelVerdict(rows[0], rows[1]) != "ok" {
		// Out of reach: what a forecaster without foresight reaches here.
		hold := (cfg.Startup.Provision.Min + cfg.Startup.Provision.Max + cfg.Startup.Init.Min + cfg.Startup.Init.Max + cfg.Startup.Load.Min + cfg.Startup.Load.Max) / 2
		res, h := cheapest(hindsightHeadrooms, func(h float64) servingsim.Result {
			return servingsim.Run(tr, demand, servingsim.Hindsight{Demand: demand, Headroom: h, Hold: hold, Max: svc.MaxReplicas}, initial, cfg)
		})
		rows[0].Hindsight = &hindsightRow{Attainment: res.Attainment, P99Latency: res.P99Latency, CostVsOracle: res.CostUSD / oracleCost, Headroom: h}
	}
	return rows, steps
}

// ceilReplicas rounds a demand up to whole replicas, forgiving float noise.
func ceilReplicas(load float64) int { return int(math.Ceil(load - 1e-9)) }
