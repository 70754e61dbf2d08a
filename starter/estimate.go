package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"refuel/activities"
	"refuel/jobs"
	awscloud "refuel/pkg/cloud/aws"
	"refuel/pkg/cloud/gce"
	"refuel/pkg/cloud/sim"
	"refuel/pkg/estimate"
	"refuel/pkg/marketmem"
	"refuel/pkg/pool"
	"refuel/pkg/spec"
)

func estimateCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "estimate FILE [--json]",
		Short: "what a JobSpec will cost and when it will finish, per tier and deadline; starts nothing",
		Long: `Estimate what a run of the JobSpec will cost and when it will finish,
before it is submitted: for the spec as written, for the other tiers, and
for deadlines of 1.1, 1.5 and 2 times its work. Each case replays the
run's own policy over windows of the market the deployment knows: its
market memory where that has watched a pool long enough, else the
built-in market, as the basis line says. It starts and reserves nothing.

The deployment is read from the same flags and environment the worker
reads (--pools / REFUEL_POOLS, --market-memory / REFUEL_MARKET_MEMORY,
--deployment / REFUEL_DEPLOYMENT, --provider / REFUEL_PROVIDER, ...).`,
		Example: "  starter estimate examples/deadline-job.yaml\n" +
			"  starter estimate examples/deadline-job.yaml --json --pools examples/pools.yaml",
		Args: exactArgs(1, "give one JobSpec file: starter estimate job.yaml"),
	}
	dep := addDeploymentFlags(cmd)
	asJSON := cmd.Flags().Bool("json", false, "print the estimate as one JSON object (its fields: docs/contracts.md)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		js, err := readJobSpec(args[0])
		if err != nil {
			return err
		}
		return printEstimate(cmd.Context(), js, dep, *asJSON, cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
	return cmd
}

// deploymentFlags name what a deployment knows that an estimate reads,
// with the worker's flag names and environment.
type deploymentFlags struct {
	pools, memory, dataDir, deployment, provider string
	simTraces, simPrices                         string
	awsRegion, awsEndpoint, awsTemplate          string
	gceProject, gceZones, gceEndpoint            string
	restartOverhead                              time.Duration
	windows                                      int
}

func addDeploymentFlags(cmd *cobra.Command) *deploymentFlags {
	f := &deploymentFlags{}
	fs := cmd.Flags()
	fs.StringVar(&f.pools, "pools", os.Getenv("REFUEL_POOLS"), "the worker's pools file: the offerings and prices runs get (env REFUEL_POOLS); without one, the provider's")
	fs.StringVar(&f.memory, "market-memory", os.Getenv("REFUEL_MARKET_MEMORY"), "the deployment's market memory, read and never written (env REFUEL_MARKET_MEMORY; default file://DATA_DIR/market-memory)")
	fs.StringVar(&f.dataDir, "data-dir", envOrDefault("REFUEL_DATA_DIR", ".refuel"), "the worker's data dir, where its market memory is by default (env REFUEL_DATA_DIR)")
	fs.StringVar(&f.deployment, "deployment", envOrDefault("REFUEL_DEPLOYMENT", activities.DefaultDeployment), "the deployment whose memory to read (env REFUEL_DEPLOYMENT)")
	fs.StringVar(&f.provider, "provider", envOrDefault("REFUEL_PROVIDER", "sim"), "the worker's cloud: sim, aws, gce or local, or public clouds separated by commas, e.g. aws,gce (env REFUEL_PROVIDER)")
	fs.StringVar(&f.simTraces, "sim-traces", os.Getenv("REFUEL_SIM_TRACES"), "sim: the worker's market, a directory of traces or builtin:NAME (env REFUEL_SIM_TRACES; default the built-in market)")
	fs.StringVar(&f.simPrices, "sim-prices", os.Getenv("REFUEL_SIM_PRICES"), "sim: the worker's price file, or "+sim.EmbeddedPrices+" (env REFUEL_SIM_PRICES)")
	fs.StringVar(&f.awsRegion, "aws-region", os.Getenv("AWS_REGION"), "aws: the region whose offerings, prices and spot placement scores to read")
	fs.StringVar(&f.awsEndpoint, "aws-endpoint", os.Getenv("AWS_ENDPOINT_URL_EC2"), "aws: EC2's endpoint (default AWS's)")
	fs.StringVar(&f.awsTemplate, "aws-launch-template", envOrDefault("REFUEL_AWS_LAUNCH_TEMPLATE", "refuel-node"), "aws: the worker's launch template (env REFUEL_AWS_LAUNCH_TEMPLATE)")
	fs.StringVar(&f.gceProject, "gce-project", os.Getenv(gce.EnvProject), "gce: the worker's Google Cloud project (env "+gce.EnvProject+")")
	fs.StringVar(&f.gceZones, "gce-zones", "", "gce: the worker's comma-separated --gce-zones (default every zone of the project that is up)")
	fs.StringVar(&f.gceEndpoint, "gce-endpoint", "", "gce: Compute Engine's endpoint, e.g. http://127.0.0.1:8085/compute/v1/ for the sim (default Google's)")
	fs.DurationVar(&f.restartOverhead, "restart-overhead", 0, "what each start of an instance costs a run (default the worker's --changeover-overhead default, 12m)")
	fs.IntVar(&f.windows, "windows", estimate.DefaultWindows, "windows of the market each case is replayed over")
	_ = fs.SetAnnotation("pools", cobra.BashCompFilenameExt, []string{"yaml", "yml", "json"})
	return f
}

// open reads the deployment the flags name. It writes nothing: the
// memory is peeked at, the providers only asked for offerings, prices
// and placement scores.
func (f *deploymentFlags) open(ctx context.Context) (jobs.Deployment, error) {
	d := jobs.Deployment{RestartOverhead: f.restartOverhead}
	if f.windows < 1 {
		return d, &FlagError{"windows", fmt.Sprintf("%d is below 1", f.windows), "give the windows to replay, e.g. --windows 40"}
	}
	if f.restartOverhead < 0 {
		return d, &FlagError{"restart-overhead", "is negative", "give 0 or more, e.g. --restart-overhead 12m"}
	}
	if f.pools != "" {
		c, err := pool.ReadConfig(f.pools)
		if err != nil {
			return d, &FlagError{"pools", err.Error(), "give the worker's pools file"}
		}
		d.Pools, d.PoolsFile = &c, f.pools
	}
	url := f.memory
	if url == "" {
		dir, err := filepath.Abs(filepath.Join(f.dataDir, "market-memory"))
		if err != nil {
			return d, &FlagError{"data-dir", err.Error(), "give the worker's data dir"}
		}
		url = "file://" + dir
	}
	mem, err := marketmem.Peek(ctx, url, f.deployment)
	if err != nil {
		return d, fmt.Errorf("--market-memory: %w", err)
	}
	d.Memory = mem
	// Several public clouds make one market, as the worker's --provider
	// aws,gce does.
	names := strings.Split(f.provider, ",")
	for i, name := range names {
		name = strings.TrimSpace(name)
		if len(names) > 1 && (name == "sim" || name == "local" || slices.Contains(names[:i], name)) {
			return d, &FlagError{"provider", fmt.Sprintf("%q combines %s with other clouds", f.provider, name), "combine only public clouds, each once (aws,gce), as the worker's --provider"}
		}
		names[i] = name
		if err := f.openProvider(ctx, name, &d); err != nil {
			return d, err
		}
	}
	return d, nil
}

// openProvider adds the provider called name to d.
func (f *deploymentFlags) openProvider(ctx context.Context, name string, d *jobs.Deployment) error {
	switch name {
	case "sim":
		cfg, _, err := sim.MarketAt(f.simTraces, nil)
		if err != nil {
			return &FlagError{"sim-traces", err.Error(), "give the worker's traces directory, or builtin:" + strings.Join(sim.BuiltInMarkets, ", builtin:")}
		}
		if f.simPrices != "" {
			p, err := sim.LoadPrices(f.simPrices)
			if err != nil {
				return &FlagError{"sim-prices", err.Error(), "give the worker's price file, or " + sim.EmbeddedPrices}
			}
			cfg = cfg.WithPrices(p)
		}
		cloud, err := sim.New(cfg)
		if err != nil {
			return err
		}
		d.Providers = append(d.Providers, cloud)
		d.SimMarket, d.SimMarketName = &cfg, simMarketName(f.simTraces)
	case "aws":
		cloud, err := awscloud.New(ctx, awscloud.Config{Region: f.awsRegion, Endpoint: f.awsEndpoint, LaunchTemplate: awscloud.LaunchTemplate{Name: f.awsTemplate}})
		if err != nil {
			return fmt.Errorf("--provider aws: %w", err)
		}
		d.Providers = append(d.Providers, cloud)
	case "gce":
		var zones []string
		if f.gceZones != "" {
			zones = strings.Split(f.gceZones, ",")
		}
		cloud, err := gce.New(ctx, gce.Config{Project: f.gceProject, Zones: zones, Endpoint: f.gceEndpoint})
		if err != nil {
			return fmt.Errorf("--provider gce: %w", err)
		}
		d.Providers = append(d.Providers, cloud)
	case "local":
		return &FlagError{"provider", "local runs on this machine, which has no market to estimate", "give the worker's cloud: --provider sim, aws, gce or aws,gce"}
	default:
		return &FlagError{"provider", fmt.Sprintf("%q is not a provider", f.provider), "use sim, aws, gce or local, as the worker's --provider"}
	}
	return nil
}

// simMarketName is how the basis names the sim's market.
func simMarketName(traces string) string {
	switch {
	case traces == "":
		return sim.BuiltInMarkets[0]
	case strings.HasPrefix(traces, sim.BuiltIn):
		return strings.TrimPrefix(traces, sim.BuiltIn)
	}
	return traces
}

// estimateOutput is `starter estimate --json`: the report, for the job
// and when it was estimated.
type estimateOutput struct {
	ID          string    `json:"id"`
	EstimatedAt time.Time `json:"estimated_at"`
	estimate.Report
}

// estimateJob estimates js on the deployment the flags name, with the
// other tiers and deadlines when all is set; progress goes to stderr once
// it takes more than a moment.
func estimateJob(ctx context.Context, js spec.JobSpec, dep *deploymentFlags, all bool, stderr io.Writer) (estimate.Report, time.Time, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	d, err := dep.open(ctx)
	if err != nil {
		return estimate.Report{}, time.Time{}, err
	}
	d.Now = time.Now()
	began, shown := time.Now(), time.Time{}
	progress := func(done, total int) {
		if now := time.Now(); now.Sub(began) > 2*time.Second && (now.Sub(shown) > time.Second || done == total) {
			fmt.Fprintf(stderr, "estimate: %d of %d replays\n", done, total)
			shown = now
		}
	}
	r, err := jobs.Estimate(ctx, js, d, jobs.EstimateOptions{Alternatives: all, Windows: dep.windows, Progress: progress})
	var ae *estimate.AskError
	if errors.As(err, &ae) {
		return r, d.Now, usagef("%s: %v", js.ID, err)
	}
	return r, d.Now, err
}

// printEstimate estimates js and prints the report, as a table or JSON.
func printEstimate(ctx context.Context, js spec.JobSpec, dep *deploymentFlags, asJSON bool, stdout, stderr io.Writer) error {
	r, at, err := estimateJob(ctx, js, dep, true, stderr)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(estimateOutput{ID: js.ID, EstimatedAt: at.UTC(), Report: r})
	}
	writeEstimate(stdout, js, r)
	return nil
}

// writeEstimate prints a report as a person reads it: the job, the basis,
// a row per case, and what to change.
func writeEstimate(w io.Writer, js spec.JobSpec, r estimate.Report) {
	head := fmt.Sprintf("%s: %s of work, tier %s", js.ID, js.Work, js.Tier)
	if c := r.Cases[0]; c.DeadlineHours > 0 {
		head += ", deadline in " + shortHours(c.DeadlineHours)
	}
	if n := js.Resources.NodeCount(); n > 1 {
		head += fmt.Sprintf(", a gang of %d nodes", n)
		if js.Resources.Elastic() {
			head += fmt.Sprintf(" (down to %d)", js.Resources.MinNodeCount())
		}
	}
	fmt.Fprintln(w, head)
	fmt.Fprintf(w, "basis: %s\n\n", r.Cases[0].Basis)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "case\tcost p50\tp10..p90\ton-demand\tfinish p50\tp90\tdeadline met\tofferings used")
	for _, c := range r.Cases {
		met := "-"
		if c.DeadlineMetShare != nil {
			met = fmt.Sprintf("%.0f%% by %s", 100**c.DeadlineMetShare, shortHours(c.DeadlineHours))
		}
		fmt.Fprintf(tw, "%s\t$%.2f\t$%.2f..$%.2f\t$%.2f\t%s\t%s\t%s\t%s\n", c.Name, c.CostUSD.P50, c.CostUSD.P10, c.CostUSD.P90, c.OnDemandCostUSD,
			hours(c.FinishHours.P50, c.HorizonHours), hours(c.FinishHours.P90, c.HorizonHours), met, uses(c.Offerings))
	}
	_ = tw.Flush()
	if p := r.Cases[0].ProbeUSD; p >= 0.005 {
		fmt.Fprintf(w, "probes: $%.2f of the cost %s, for spot tried where the run holds none to learn its stock, as the run will\n", p, r.Cases[0].Name)
	}
	if len(r.Problems) > 0 {
		fmt.Fprintln(w, "\nwhat to change:")
		for _, p := range r.Problems {
			fmt.Fprintln(w, "  "+p.Line())
		}
	}
}

func hours(h *float64, horizon float64) string {
	if h == nil {
		return "over " + shortHours(horizon)
	}
	return shortHours(*h)
}

// shortHours writes hours as hours, or minutes under one.
func shortHours(h float64) string {
	if h < 1 {
		return fmt.Sprintf("%.0fm", 60*h)
	}
	return fmt.Sprintf("%.1fh", h)
}

// uses names the offerings held, most used first, each with its cloud
// (gce spot a3-highgpu-1g in us-central1-a) and its share of the hours.
func uses(us []estimate.Use) string {
	var parts []string
	for _, u := range us {
		if u.Share < 0.01 {
			continue
		}
		name := u.Offering
		if p := strings.Split(u.Offering, "/"); len(p) == 4 {
			name = p[0] + " " + p[3] + " " + p[1] + " in " + p[2]
		}
		parts = append(parts, fmt.Sprintf("%s %.0f%%", name, 100*u.Share))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
