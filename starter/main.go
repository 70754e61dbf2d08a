// The starter is refuel's CLI for pipelines and operators: submit jobs,
// watch them, pause, resume and re-prioritise them; start, load, watch
// and stop inference services; show the capacity pool; run the
// interruption drill and the demo, and replay spot-market traces against
// policies.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

type command struct {
	name, args, help string
	run              func(args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"submit", "FILE", "start a TrainingRun from a YAML or JSON JobSpec", runSubmit},
		{"status", "ID [--json] [--watch]", "show a run's status", runStatus},
		{"logs", "ID [--follow] [--attempt N]", "print a run's trainer output, every attempt's in order", runLogs},
		{"pause", "ID", "checkpoint, release the instance and wait", runPause},
		{"resume", "ID", "reacquire and continue a paused run", runResume},
		{"priority", "ID N", "set a run's or a service's priority (0..100)", runPriority},
		{"serve", "FILE", "start an InferenceService from a YAML or JSON ServiceSpec", runServe},
		{"load", "ID --qps N [--every D --for D]", "report a service's load (also --queue, --gpu-util, --replicas)", runLoad},
		{"service-status", "ID [--json] [--watch]", "show a service's replicas, decisions and cost", runServiceStatus},
		{"stop-service", "ID", "stop a service, giving back every replica", runStopService},
		{"pool", "[--json]", "show the capacity pool: base, burst, queue and allocations", runPool},
		{"drill", "[--json]", "run the interruption drill against the running stack", runDrill},
		{"demo", "", "drive the demo a person can watch in the Web UI", runDemo},
		{"cost", "[--query Q] [--json]", "cost per job, and per team and pool", runCost},
		{"setup", "", "register refuel's search attributes on an external cluster", runSetup},
		{"sim", "--trace FILE ... --policy NAME", "replay spot traces against market policies", runSim},
		{"sim-bench", "[--traces DIR]", "compare the market policies over every trace (make bench-policy)", runSimBench},
		{"autoscale-bench", "[--trace FILE] [--json]", "compare autoscaling policies on inference traffic (make bench-autoscale)",
			func(args []string, stdout, _ io.Writer) error { return runAutoscaleBench(args, stdout) }},
	}
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage(os.Stderr)
		os.Exit(2)
	}
	for _, c := range commands() {
		if c.name == os.Args[1] {
			err := c.run(os.Args[2:], os.Stdout, os.Stderr)
			if err == nil {
				return
			}
			if errors.Is(err, flag.ErrHelp) {
				os.Exit(2)
			}
			fmt.Fprintf(os.Stderr, "starter %s: %v\n", c.name, err)
			var ue usageError
			if errors.As(err, &ue) {
				os.Exit(2)
			}
			os.Exit(1)
		}
	}
	fmt.Fprintf(os.Stderr, "starter: unknown command %q\n\n", os.Args[1])
	usage(os.Stderr)
	os.Exit(2)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: starter COMMAND [flags]")
	fmt.Fprintln(w)
	width := 0
	for _, c := range commands() {
		width = max(width, len(c.name))
	}
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-*s %-32s %s\n", width, c.name, c.args, c.help)
	}
	fmt.Fprintln(w, "\nConnection: --temporal-address, or TEMPORAL_ADDRESS / TEMPORAL_NAMESPACE / TLS settings and profiles\n(the standard Temporal client environment); default 127.0.0.1:7233, namespace default.")
}

// usageError is a mistake in how a command was called (exit code 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }
