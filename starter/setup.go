package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"refuel/internal/cluster"
	"refuel/workflows"
)

// namespaceVisible bounds how long setup waits for a namespace it just
// created to be known to the whole cluster (its caches refresh every 10s
// by default), when --wait does not give longer.
const namespaceVisible = time.Minute

func setupCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "setup [--retention D] [--wait [D]]",
		Short: "create the namespace if missing and register refuel's search attributes on a cluster",
		Long: `Create the namespace if it is missing and register refuel's search
attributes (RefuelTeam, RefuelTier, RefuelPriority, RefuelState,
RefuelMarket, RefuelCostUSD) in it; both are idempotent. A namespace just
created takes a few seconds to be known to every service of the cluster:
setup waits for it, so its first call on a fresh cluster succeeds. With
--wait it also keeps trying while the cluster is not up yet (a deploy's
one-shot step).`,
		Example: "  TEMPORAL_ADDRESS=temporal.example.com:7233 starter setup\n  starter setup --temporal-address temporal:7233 --wait 3m",
		Args:    noArgs("starter setup takes no arguments; name the cluster with --temporal-address and --namespace"),
	}
	conn := addClientFlags(cmd)
	retention := cmd.Flags().Duration("retention", 72*time.Hour, "how long a namespace this creates keeps closed runs (at least 24h)")
	wait := cmd.Flags().Duration("wait", 0, "keep trying this long while the cluster is not up yet (a deploy's one-shot step); --wait alone is 5m; 0 tries once")
	cmd.Flags().Lookup("wait").NoOptDefVal = "5m"
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *retention < 24*time.Hour {
			return usagef("--retention %s: Temporal keeps closed workflows at least 24h; give 24h or more", *retention)
		}
		if *wait < 0 {
			return usagef("--wait %s: give 0 (try once) or a positive duration such as 2m", *wait)
		}
		ns := conn.resolvedNamespace()
		deadline := time.Now().Add(*wait)
		for {
			err := setup(context.Background(), conn, ns, *retention, max(*wait, namespaceVisible), cmd.OutOrStdout())
			if err == nil || time.Now().After(deadline) {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "setup: %v; trying again in 3s\n", err)
			time.Sleep(3 * time.Second)
		}
	}
	return cmd
}

// setup creates the namespace if it is missing, then registers the search
// attributes refuel's workflows set, waiting up to visible for a new
// namespace to be known.
func setup(ctx context.Context, conn *clientFlags, ns string, retention, visible time.Duration, stdout io.Writer) error {
	c, err := conn.dialToCreate(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, visible)
	defer cancel()
	created, err := cluster.Setup(ctx, c.WorkflowService(), c.OperatorService(), ns, retention, workflows.SearchAttributeTypes, time.Second)
	if created {
		fmt.Fprintf(stdout, "namespace %s created (retention %s)\n", ns, retention)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "search attributes registered in namespace %s\n", ns)
	return nil
}
