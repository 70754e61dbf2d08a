// The worker binary: with no arguments it serves refuel's control plane
// (on the embedded Temporal server and Web UI unless TEMPORAL_ADDRESS or
// a profile names a cluster). Subcommands run the other roles of the same
// binary: `agent` (a node agent on an instance), `join` (a machine of the
// team's joining the base group), `trainer` (the demo
// trainer the node agent runs for specs without a command), `ec2-sim`, `gce-sim` and
// `temporal-server` (a Temporal cluster of its own on PostgreSQL).
package main

import (
	"fmt"
	"os"

	"refuel/nodeagent"
	"refuel/pkg/trainer"
)

func main() {
	args := os.Args[1:]
	cmd := "serve"
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		os.Exit(serve(args))
	case "agent":
		os.Exit(nodeagent.Main(args, os.Stderr))
	case "join":
		os.Exit(nodeagent.JoinMain(args, os.Stderr))
	case "trainer":
		os.Exit(trainer.Main(args, os.Stdout, os.Stderr))
	case "ec2-sim":
		os.Exit(ec2sim(args))
	case "gce-sim":
		os.Exit(gcesim(args))
	case "temporal-server":
		os.Exit(temporalServer(args))
	case "help":
		usage()
	default:
		fmt.Fprintf(os.Stderr, "worker: unknown command %q\n", cmd)
		usage()
		os.Exit(2)
	}
}

func usage() {
	fmt.Fprint(os.Stderr, `usage: worker [serve] [flags]   serve the control plane (default)
       worker agent [flags]     run a node agent (started by clouds, one per instance)
       worker join --name NAME --gpus N [--instance-type T] [--zone Z] [--price-per-hour P] [--token-file F]
                                make this machine a base machine of the deployment's pool while it runs
       worker trainer [flags]   run the demo trainer (started by node agents)
       worker ec2-sim --traces DIR [flags]   serve a trace-driven simulated cloud over EC2's API
       worker gce-sim --listen ADDR [flags]   serve a trace-driven simulated cloud over Compute Engine's API
       worker temporal-server --postgres URL [flags]   serve a Temporal cluster on PostgreSQL
Run a command with -h for its flags.
`)
}
