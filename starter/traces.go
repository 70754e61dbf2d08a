package main

import "github.com/spf13/cobra"

// The commands that replay traces parse their own flags with the standard
// flag package (their flags are theirs, shared with their tests); cobra
// hands them their arguments.

func simCommand() *cobra.Command {
	return flagSetCommand(&cobra.Command{
		Use:   "sim --trace FILE ... --policy NAME",
		Short: "replay spot traces against market policies",
		Example: "  starter sim --trace us-west-2a_v100_1.json --work 48h --deadline 52h --policy refuel,greedy,optimal --starts 10 --json\n" +
			"  starter sim --trace us-east-2b_v100_1.json --nodes 4 --policy refuel,optimal --starts 10   # a gang of 4 on counts of instances in stock",
	}, runSim)
}

func simBenchCommand() *cobra.Command {
	return flagSetCommand(&cobra.Command{
		Use:     "sim-bench [--traces DIR]",
		Short:   "compare the market policies over every trace (make bench-policy)",
		Long:    "Compare the market policies over every trace under --traces, at each deadline from --starts start ticks, and check refuel against its targets.",
		Example: "  starter sim-bench --traces ../shared/traces/availability --known-statistics",
	}, runSimBench)
}
