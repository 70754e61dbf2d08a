package main

import "github.com/spf13/cobra"

// autoscale-bench parses its own flags with the standard flag package
// (its flags are its own, shared with its tests); cobra hands it its
// arguments. sim and sim-bench are in sim.go and sim_bench.go.

func autoscaleBenchCommand() *cobra.Command {
	return flagSetCommand(&cobra.Command{
		Use:     "autoscale-bench [--trace FILE] [--json]",
		Short:   "compare autoscaling policies on inference traffic (make bench-autoscale)",
		Long:    "Compare autoscaling policies on inference traffic composed from a request trace in the Azure LLM format.",
		Example: "  starter autoscale-bench --trace ../shared/traces/inference/azure-llm-conv-2023-11-16.csv",
	}, runAutoscaleBench)
}
