package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"refuel/pkg/autoscale"
	"refuel/pkg/servingsim"
	"refuel/pkg/spec"
	"refuel/pkg/traffic"
)

// benchEpoch is the virtual clock's origin: a Monday at midnight UTC, so
// composed days start at 00:00.
var benchEpoch = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

// autoscaleScenarios are the traffic patterns the bench can replay, in
// the order it prints them.
var autoscaleScenarios = []string{"hour", "day", "day-late-half", "bursts"}

type autoscaleRow struct {
	Scenario string  `json:"scenario"`
	Policy   string  `json:"policy"`
	Requests int     `json:"requests"`
	Hours    float64 `json:"hours"`
	servingsim.Result
	VsOracle float64 `json:"cost_vs_oracle"`
}

// runAutoscaleBench is `starter autoscale-bench` (make bench-autoscale).
func runAutoscaleBench(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("autoscale-bench", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	dflt := os.Getenv("REFUEL_INFERENCE_TRACE")
	if dflt == "" {
		dflt = filepath.Join("..", "shared", "traces", "inference", "azure-llm-conv-2023-11-16.csv")
	}
	path := fs.String("trace", dflt, "request trace in the Azure LLM format (env REFUEL_INFERENCE_TRACE)")
	scen := fs.String("scenarios", strings.Join(autoscaleScenarios, ","), "comma-separated traffic patterns: "+strings.Join(autoscaleScenarios, ", "))
	model := servingsim.Model{PrefillTokensPerSecond: 2000, DecodeTokensPerSecond: 200}
	fs.Float64Var(&model.PrefillTokensPerSecond, "prefill-tps", model.PrefillTokensPerSecond, "context tokens a replica prefills per second")
	fs.Float64Var(&model.DecodeTokensPerSecond, "decode-tps", model.DecodeTokensPerSecond, "tokens a replica generates per second, summed over its batch")
	cfg := servingsim.Config{
		Model: model,
		Startup: servingsim.Startup{
			Provision: servingsim.Range{Min: 60 * time.Second, Max: 180 * time.Second},
			Init:      servingsim.Range{Min: 30 * time.Second, Max: 90 * time.Second},
			Load:      servingsim.Range{Min: 45 * time.Second, Max: 105 * time.Second},
		},
		Every:        10 * time.Second,
		PricePerHour: 1.006,
	}
	fs.Float64Var(&cfg.PricePerHour, "price", cfg.PricePerHour, "USD per replica-hour")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed for composed traffic and start-up times")
	window := fs.Duration("demand-window", time.Minute, "demand is the work arriving over this trailing window")
	asJSON := fs.Bool("json", false, "print one JSON object per scenario and policy")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg.Model = model
	hour, err := traffic.ReadAzureCSV(*path)
	if err != nil {
		return err
	}
	var rows []autoscaleRow
	for _, name := range strings.Split(*scen, ",") {
		tr, err := benchTraffic(strings.TrimSpace(name), hour, cfg.Seed)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "autoscale-bench: %s: %d requests over %s\n", name, len(tr.Requests), tr.Span)
		rows = append(rows, benchScenario(name, tr, cfg, *window)...)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	printAutoscaleBench(stdout, rows)
	return nil
}

func benchTraffic(name string, hour *traffic.Trace, seed uint64) (*traffic.Trace, error) {
	switch name {
	case "hour":
		return hour, nil
	case "day":
		return traffic.ComposeDay(hour, traffic.DayShape{Trough: 0.2, TroughAt: 4 * time.Hour}, seed), nil
	case "day-late-half":
		half := hour.Slice(hour.Span/2, hour.Span)
		return traffic.ComposeDay(half, traffic.DayShape{Trough: 0.3, TroughAt: 2 * time.Hour}, seed+1), nil
	case "bursts":
		return traffic.Bursts{
			Length: traffic.Day, PeakRate: float64(len(hour.Requests)) / hour.Span.Seconds(),
			Shape:   traffic.DayShape{Trough: 0.25, TroughAt: 5 * time.Hour},
			PerHour: 0.5, MinFactor: 1.3, MaxFactor: 2, MinHold: 5 * time.Minute, MaxHold: 20 * time.Minute, Ramp: 3 * time.Minute,
		}.Generate(hour, seed+2), nil
	}
	return nil, &FlagError{"scenarios", fmt.Sprintf("%q is not a scenario", name), "use " + strings.Join(autoscaleScenarios, ", ")}
}

func benchScenario(name string, tr *traffic.Trace, cfg servingsim.Config, window time.Duration) []autoscaleRow {
	demand := servingsim.NewDemand(tr, cfg.Model, window, benchEpoch)
	lead := cfg.Startup.Max()
	peak := int(math.Ceil(demand.Max() - 1e-9))
	initial := int(math.Ceil(demand.Peak(benchEpoch, benchEpoch.Add(lead)) - 1e-9))
	var work float64
	for _, r := range tr.Requests {
		work += cfg.Model.Work(r).Seconds()
	}
	capacityQPS := float64(len(tr.Requests)) / work // one replica's requests per second at the mean size
	svc := spec.ServiceSpec{
		ID: "bench", MinReplicas: 1, MaxReplicas: 1000,
		Target:         spec.ScalingTarget{GPUUtilization: 0.9, QueueLength: 2},
		DownscaleDelay: spec.Duration(5 * time.Minute),
	}
	svc.Normalize()
	refuel, err := autoscale.NewAutoscaler(svc)
	if err != nil {
		panic(err)
	}
	policies := []struct {
		name    string
		p       autoscale.Policy
		initial int
	}{
		{"refuel", refuel, initial},
		{"reactive (SkyServe-like)", autoscale.NewReactive(capacityQPS, 1, 1000), initial},
		{"static peak", autoscale.Static{Replicas: peak}, peak},
		{"oracle", autoscale.Oracle{Lead: lead, Peak: demand.Peak}, initial},
	}
	var rows []autoscaleRow
	for _, p := range policies {
		res := servingsim.Run(tr, demand, p.p, p.initial, cfg)
		rows = append(rows, autoscaleRow{Scenario: name, Policy: p.name, Requests: len(tr.Requests), Hours: tr.Span.Hours(), Result: res})
	}
	oracle := rows[len(rows)-1].CostUSD
	for i := range rows {
		rows[i].VsOracle = rows[i].CostUSD / oracle
	}
	return rows
}

func printAutoscaleBench(w io.Writer, rows []autoscaleRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tpolicy\tSLO attainment\treplica-h\tcost USD\tvs oracle\tp99 wait s\tmean ready\tpeak\trequested\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%.2f%%\t%.1f\t%.2f\t%.3f\t%.1f\t%.1f\t%d\t%d\t\n", r.Scenario, r.Policy, 100*r.Attainment, r.ReplicaHours, r.CostUSD, r.VsOracle, r.P99Wait, r.MeanReady, r.PeakReplicas, r.Requested)
	}
	tw.Flush()
}
