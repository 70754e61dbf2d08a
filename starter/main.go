// The starter is refuel's CLI for pipelines and operators: submit jobs,
// list, watch, wait for and cancel them, pause, resume and re-prioritise
// them; start, load, watch and stop inference services; show the capacity
// pool; run the interruption drill and the demo, and replay spot-market
// traces against policies. Exit status: 0 success, 1 the command or the
// run it watches failed, 2 a usage mistake.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

type command struct {
	name, args, help string
	run              func(args []string, stdout, stderr io.Writer) error
	// examples are shown by `starter COMMAND -h`, one command line each.
	examples []string
}

func commands() []command {
	return []command{
		{"submit", "FILE [--wait [--json]]", "start a TrainingRun from a YAML or JSON JobSpec", runSubmit,
			[]string{"starter submit examples/job.yaml", "starter submit examples/job.yaml --wait   # exit 0 only when the run completes"}},
		{"list", "[--query Q] [--json]", "list runs and services: state, tier, team, priority, progress, cost", runList,
			[]string{"starter list", `starter list --query 'RefuelTeam="nlp" AND RefuelState="running"' --json`}},
		{"status", "ID [--json] [--watch]", "show a run's status", runStatus,
			[]string{"starter status llama-ft-0427", "starter status llama-ft-0427 --watch   # exit 1 if the run fails or is cancelled"}},
		{"wait", "ID [--json] [--timeout D]", "wait for a run or service to end: exit 0 when it completed, 1 otherwise", runWait,
			[]string{"starter wait llama-ft-0427 && echo trained", "starter wait llama-ft-0427 --json --timeout 2h"}},
		{"cancel", "ID [--timeout D]", "cancel a run or service: it checkpoints, releases everything and ends cancelled", runCancel,
			[]string{"starter cancel llama-ft-0427"}},
		{"logs", "ID [--follow] [--attempt N]", "print a run's trainer output, every attempt's in order", runLogs,
			[]string{"starter logs llama-ft-0427 --follow", "starter logs llama-ft-0427 --attempt 2"}},
		{"pause", "ID", "checkpoint, release the instance and wait", runPause,
			[]string{"starter pause llama-ft-0427"}},
		{"resume", "ID", "reacquire and continue a paused run", runResume,
			[]string{"starter resume llama-ft-0427"}},
		{"priority", "ID N", "set a run's or a service's priority (0..100)", runPriority,
			[]string{"starter priority llama-ft-0427 80"}},
		{"budget", "ID USD", "set a run's budget; a run waiting over budget goes on once it is raised (0 for none)", runBudget,
			[]string{"starter budget llama-ft-0427 250"}},
		{"serve", "FILE", "start an InferenceService from a YAML or JSON ServiceSpec", runServe,
			[]string{"starter serve examples/service.yaml"}},
		{"load", "ID --qps N [--every D --for D]", "report a service's load (also --queue, --gpu-util, --replicas)", runLoad,
			[]string{"starter load chat-13b --qps 40 --every 5s --for 2m"}},
		{"service-status", "ID [--json] [--watch]", "show a service's replicas, decisions and cost", runServiceStatus,
			[]string{"starter service-status chat-13b --watch"}},
		{"stop-service", "ID", "stop a service, giving back every replica", runStopService,
			[]string{"starter stop-service chat-13b"}},
		{"pool", "[--json]", "show the capacity pool: base, burst, queue and allocations", runPool,
			[]string{"starter pool --json"}},
		{"drill", "[--json] [--nodes N]", "run the interruption drill against the running stack (exit 1 if it fails)", runDrill,
			[]string{"starter drill --json", "starter drill --nodes 2"}},
		{"demo", "", "drive the demo a person can watch in the Web UI", runDemo,
			[]string{"starter demo"}},
		{"cost", "[--query Q] [--json]", "cost per job, and per team and pool", runCost,
			[]string{`starter cost --query 'RefuelTeam="nlp"' --json`}},
		{"setup", "[--retention D]", "create the namespace if missing and register refuel's search attributes on a cluster", runSetup,
			[]string{"TEMPORAL_ADDRESS=temporal.example.com:7233 starter setup"}},
		{"scale-bench", "[--runs N] [--storm FRACTION] [--json]", "a thousand runs on one worker: raw rate, steady-state cost, a storm of preemptions (make bench-scale)", runScaleBench,
			[]string{"starter scale-bench --runs 1000 --storm 0.3 --json"}},
		{"sim", "--trace FILE ... --policy NAME", "replay spot traces against market policies", runSim,
			[]string{"starter sim --trace us-west-2a_v100_1.json --work 48h --deadline 52h --policy refuel,greedy,optimal --starts 10 --json",
				"starter sim --trace us-east-2b_v100_1.json --nodes 4 --policy refuel,optimal --starts 10   # a gang of 4 on counts of instances in stock"}},
		{"sim-bench", "[--traces DIR]", "compare the market policies over every trace (make bench-policy)", runSimBench,
			[]string{"starter sim-bench --traces ../shared/traces/availability --known-statistics"}},
		{"autoscale-bench", "[--trace FILE] [--json]", "compare autoscaling policies on inference traffic (make bench-autoscale)",
			func(args []string, stdout, _ io.Writer) error { return runAutoscaleBench(args, stdout) },
			[]string{"starter autoscale-bench --trace ../shared/traces/inference/azure-llm-conv-2023-11-16.csv"}},
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the CLI with its exit status: 0 success, 1 the command or the
// thing it checks failed (a run that failed, was cancelled or terminated;
// a failed drill), 2 a mistake in how it was called.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		if len(args) > 1 {
			if c, ok := lookup(args[1]); ok {
				printHelp(stdout, c)
				return 0
			}
		}
		usage(stdout)
		return 0
	}
	c, ok := lookup(args[0])
	if !ok {
		fmt.Fprintf(stderr, "starter: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	if wantsHelp(args[1:]) {
		printHelp(stdout, c)
		return 0
	}
	err := c.run(args[1:], stdout, stderr)
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "starter %s: %v\n", c.name, err)
	var ue usageError
	if errors.As(err, &ue) || isFlagError(err) {
		fmt.Fprintf(stderr, "run `starter %s -h` for its flags and an example\n", c.name)
		return 2
	}
	return 1
}

func lookup(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

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

// printHelp prints a command's synopsis, examples and flags. The flags
// come from the command's own flag set, asked for its defaults.
func printHelp(w io.Writer, c command) {
	fmt.Fprintf(w, "usage: starter %s %s\n\n%s.\n", c.name, c.args, strings.ToUpper(c.help[:1])+c.help[1:])
	if len(c.examples) > 0 {
		fmt.Fprintln(w, "\nexamples:")
		for _, e := range c.examples {
			fmt.Fprintln(w, "  "+e)
		}
	}
	var flags bytes.Buffer
	_ = c.run([]string{"-h"}, io.Discard, &flags)
	lines := strings.SplitN(flags.String(), "\n", 2)
	if len(lines) == 2 && strings.HasPrefix(lines[0], "Usage of ") {
		flags.Reset()
		flags.WriteString(lines[1])
	}
	if strings.TrimSpace(flags.String()) != "" {
		fmt.Fprintf(w, "\nflags:\n%s", flags.String())
	}
}

// isFlagError reports whether err is the flag package's complaint about
// the command line (an unknown flag, a bad value): that package has no
// error types, so its messages are the only sign.
func isFlagError(err error) bool {
	msg := err.Error()
	for _, p := range []string{"flag provided but not defined", "invalid value ", "invalid boolean ", "bad flag syntax", "flag needs an argument"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: starter COMMAND [flags]     (starter COMMAND -h: its flags and an example)")
	fmt.Fprintln(w)
	width := 0
	for _, c := range commands() {
		width = max(width, len(c.name))
	}
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-*s %-32s %s\n", width, c.name, c.args, c.help)
	}
	fmt.Fprintln(w, "\nConnection: --temporal-address, or TEMPORAL_ADDRESS / TEMPORAL_NAMESPACE / TLS settings and profiles\n(the standard Temporal client environment); default 127.0.0.1:7233, namespace default.")
	fmt.Fprintln(w, "Exit status: 0 success, 1 the command or the run it watches failed, 2 a usage mistake.")
}

// usageError is a mistake in how a command was called (exit code 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }
