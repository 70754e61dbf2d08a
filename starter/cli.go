package main

import (
	"encoding/json"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// The groups of `starter -h`.
const (
	groupRuns     = "runs"
	groupServices = "services"
	groupDev      = "dev"
	groupCluster  = "cluster"
	groupBench    = "bench"
)

// newRoot is the command tree. stdout and stderr are where every command
// writes (tests pass buffers).
func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "starter",
		Short: "refuel's CLI for pipelines and operators",
		Long: `refuel's CLI for pipelines and operators: training runs, inference services,
development environments, the capacity pool, the interruption drill, and the
benchmarks.

Connection: every command that talks to Temporal takes --temporal-address,
--namespace, --tls*, --api-key-file and --codec-keys; without them, the
standard Temporal client environment (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE,
TEMPORAL_TLS_*, TEMPORAL_API_KEY, profiles) and REFUEL_CODEC_KEYS; default
127.0.0.1:7233, namespace default.

Exit status: 0 success; 1 the command failed, or the run it watches failed,
was cancelled or terminated, or the check it runs failed; 2 a usage mistake.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		// Without a command the usage is the answer; an unknown one is a
		// usage mistake, typed here rather than recognised by its message.
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown command %q; `starter -h` lists them", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(cmd.ErrOrStderr())
			_ = cmd.Usage()
			return usagef("give a command")
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetUsageTemplate(usageTemplate)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err.Error()} })
	root.AddGroup(
		&cobra.Group{ID: groupRuns, Title: "Training runs:"},
		&cobra.Group{ID: groupServices, Title: "Inference services and the pool:"},
		&cobra.Group{ID: groupDev, Title: "Development environments:"},
		&cobra.Group{ID: groupCluster, Title: "The cluster, the drill and the market:"},
		&cobra.Group{ID: groupBench, Title: "Benchmarks (also under `starter bench`):"},
	)
	root.SetHelpCommandGroupID(groupCluster)
	root.SetCompletionCommandGroupID(groupCluster)
	add := func(group string, cmds ...*cobra.Command) {
		for _, c := range cmds {
			c.GroupID = group
			root.AddCommand(c)
		}
	}
	add(groupRuns, submitCommand(), estimateCommand(), listCommand(), statusCommand(), waitCommand(), cancelCommand(), logsCommand(),
		pauseCommand(), resumeCommand(), priorityCommand(), budgetCommand(), interruptCommand())
	add(groupServices, serveCommand(), loadCommand(), metricsCommand(), serviceStatusCommand(), stopServiceCommand(), poolCommand(),
		nodesCommand(), drainCommand(), undrainCommand())
	add(groupDev, devCommand())
	add(groupCluster, setupCommand(), drillCommand(), demoCommand(), costCommand(), uiCommand(), simCommand(), completionCommand())
	add(groupBench, benchCommands()...)
	root.AddCommand(benchGroup())
	return root
}

// benchCommands are the benchmarks, each built afresh: they are both
// top-level commands (as the Makefile and README call them) and the
// members of `starter bench`.
func benchCommands() []*cobra.Command {
	return []*cobra.Command{scaleBenchCommand(), simBenchCommand(), autoscaleBenchCommand(), estimateBenchCommand(), serveBenchCommand()}
}

// benchGroup is `starter bench`: the benchmarks apart from the commands
// of everyday operation.
func benchGroup() *cobra.Command {
	b := &cobra.Command{
		Use:   "bench",
		Short: "the benchmarks: scale, sim (market policies), autoscale, estimate and serve",
		Long: `The benchmarks, apart from everyday commands. Each is also a top-level
command of the same name with -bench: starter bench scale is starter
scale-bench.`,
		Example: "  starter bench scale --runs 1000 --storm 0.3 --json\n  starter bench sim --known-statistics",
		GroupID: groupBench,
		Args:    noArgs("starter bench takes a benchmark: scale, sim, autoscale or estimate"),
		RunE: func(*cobra.Command, []string) error {
			return usagef("give a benchmark: starter bench scale, sim, autoscale or estimate")
		},
	}
	for _, c := range benchCommands() {
		c.Use = strings.Replace(c.Use, "-bench", "", 1)
		c.Example = strings.ReplaceAll(c.Example, c.Name()+"-bench", "bench "+c.Name())
		b.AddCommand(c)
	}
	return b
}

// completionCommand is `starter completion bash|zsh`.
func completionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh",
		Short: "print a shell completion script",
		Long: `Print a completion script for bash or zsh: commands, flags and their
values. Load it in the current shell with

  source <(starter completion bash)

or install it where your shell looks (bash: /etc/bash_completion.d/starter;
zsh: a file _starter in a directory of $fpath).`,
		Example:   "  source <(bin/starter completion bash)\n  bin/starter completion zsh > \"${fpath[1]}/_starter\"",
		ValidArgs: []string{"bash", "zsh"},
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 || (args[0] != "bash" && args[0] != "zsh") {
				return usagef("give the shell: starter completion bash, or starter completion zsh")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] == "bash" {
				return cmd.Root().GenBashCompletionV2(cmd.OutOrStdout(), true)
			}
			return cmd.Root().GenZshCompletion(cmd.OutOrStdout())
		},
	}
}

// exactArgs wants n arguments; otherwise it is the usage error msg.
func exactArgs(n int, msg string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError{msg}
		}
		return nil
	}
}

// noArgs wants none; otherwise it is the usage error msg.
func noArgs(msg string) cobra.PositionalArgs { return exactArgs(0, msg) }

// wantsHelp reports whether the arguments ask for help (before any "--").
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help", "-h=true", "--help=true":
			return true
		}
	}
	return false
}

// normalizeArgs keeps the command lines the starter took before it was
// on cobra: the flag package let long flags have one dash (-json), so
// such a flag of the command becomes --json; and setup's --wait may stand
// alone or take its duration as the next word.
func normalizeArgs(root *cobra.Command, args []string) []string {
	cmd, _, err := root.Find(args)
	if err != nil || cmd.DisableFlagParsing {
		return args
	}
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' {
			name, _, _ := strings.Cut(a[1:], "=")
			if name == "help" || cmd.Flags().Lookup(name) != nil {
				a = "-" + a
			}
		}
		if name, ok := strings.CutPrefix(a, "--"); ok && i+1 < len(args) {
			if f := cmd.Flags().Lookup(name); f != nil && f.NoOptDefVal != "" && f.Value.Type() == "duration" {
				if _, err := time.ParseDuration(args[i+1]); err == nil {
					a += "=" + args[i+1]
					i++
				}
			}
		}
		out = append(out, a)
	}
	return out
}

// jsonLines writes each item as a JSON object on a line of its own, the
// shape of every --json listing.
func jsonLines[T any](enc *json.Encoder, items []T) error {
	for _, it := range items {
		if err := enc.Encode(it); err != nil {
			return err
		}
	}
	return nil
}
