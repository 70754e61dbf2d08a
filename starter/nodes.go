package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"refuel/jobs"
)

func nodesCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "nodes [--json]",
		Short:   "list the machines that joined the base group (worker join): GPUs, state, runs, last seen",
		Example: "  starter nodes\n  starter nodes --json",
		Args:    noArgs("starter nodes takes no arguments"),
	}
	conn := addClientFlags(cmd)
	asJSON := cmd.Flags().Bool("json", false, "print one JSON object per machine, one a line")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := context.Background()
		return conn.withClient(ctx, func(c client.Client) error {
			nodes, err := jobs.Nodes(ctx, c)
			if err != nil {
				return err
			}
			if *asJSON {
				return jsonLines(json.NewEncoder(cmd.OutOrStdout()), nodes)
			}
			printNodes(cmd.OutOrStdout(), nodes, time.Now())
			return nil
		})
	}
	return cmd
}

func printNodes(w io.Writer, nodes []jobs.Node, now time.Time) {
	if len(nodes) == 0 {
		fmt.Fprintln(w, "no machine has joined the base group (run `worker join --name NAME --gpus N` on one; the pools file needs base.join: true)")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tGPUS\tSTATE\tRUNS\tLAST SEEN")
	for _, n := range nodes {
		runs := strings.Join(n.Runs, ",")
		if runs == "" {
			runs = "-"
		}
		seen := "-"
		if !n.LastSeen.IsZero() {
			seen = now.Sub(n.LastSeen).Round(time.Second).String() + " ago"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", n.Name, n.GPUs, n.State, runs, seen)
	}
	_ = tw.Flush()
}

func drainCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "drain NAME",
		Short: "move the runs off a joined machine (they checkpoint and move) and place nothing new there; returns when it is empty",
		Example: "  starter drain gpu-node-01\n" +
			"  starter drain gpu-node-01 --timeout 10m",
		Args: exactArgs(1, "give the machine's name: starter drain NAME (starter nodes lists them)"),
	}
	conn := addClientFlags(cmd)
	timeout := cmd.Flags().Duration("timeout", 0, "give up waiting after this long (the drain goes on); 0 waits as long as it takes")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := context.Background()
		if *timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, *timeout)
			defer cancel()
		}
		out := cmd.OutOrStdout()
		return conn.withClient(ctx, func(c client.Client) error {
			name := args[0]
			if err := jobs.Drain(ctx, c, name); err != nil {
				return err
			}
			last := ""
			err := jobs.WaitEmpty(ctx, c, name, time.Second, func(runs []string) {
				if now := strings.Join(runs, ", "); len(runs) > 0 && now != last {
					fmt.Fprintf(out, "%s: waiting for %s to checkpoint and move\n", name, now)
					last = now
				}
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "%s is drained: nothing runs on it and nothing new is placed there (starter undrain %s takes it back)\n", name, name)
			return nil
		})
	}
	return cmd
}

func undrainCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "undrain NAME",
		Short:   "let a drained machine take runs again",
		Example: "  starter undrain gpu-node-01",
		Args:    exactArgs(1, "give the machine's name: starter undrain NAME"),
	}
	conn := addClientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := context.Background()
		return conn.withClient(ctx, func(c client.Client) error {
			if err := jobs.Undrain(ctx, c, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s takes runs again\n", args[0])
			return nil
		})
	}
	return cmd
}
