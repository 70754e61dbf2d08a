package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"refuel/internal/cluster"
	"refuel/workflows"
)

func runSetup(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("setup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	conn := addConnFlags(fs)
	retention := fs.Duration("retention", 72*time.Hour, "how long a namespace this creates keeps closed runs (at least 24h)")
	wait := fs.Duration("wait", 0, "keep trying this long while the cluster is not up yet (a deploy's one-shot step); 0 tries once")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if *retention < 24*time.Hour {
		return usagef("--retention %s: Temporal keeps closed workflows at least 24h; give 24h or more", *retention)
	}
	if *wait < 0 {
		return usagef("--wait %s: give 0 (try once) or a positive duration such as 2m", *wait)
	}
	ns := conn.resolvedNamespace()
	deadline := time.Now().Add(*wait)
	for {
		err := setup(context.Background(), conn, ns, *retention, stdout)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		fmt.Fprintf(stderr, "setup: %v; trying again in 3s\n", err)
		time.Sleep(3 * time.Second)
	}
}

// setup creates the namespace if it is missing, then registers the search
// attributes refuel's workflows set; both are idempotent. A namespace
// just created takes a few seconds to be known to every service, which the
// caller's retries cover.
func setup(ctx context.Context, conn connFlags, ns string, retention time.Duration, stdout io.Writer) error {
	c, err := conn.dialToCreate(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	created, err := cluster.EnsureNamespace(ctx, c.WorkflowService(), ns, retention)
	if err != nil {
		return err
	}
	if created {
		fmt.Fprintf(stdout, "namespace %s created (retention %s)\n", ns, retention)
	}
	if err := cluster.EnsureSearchAttributes(ctx, c.OperatorService(), ns, workflows.SearchAttributeTypes); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "search attributes registered in namespace %s\n", ns)
	return nil
}
