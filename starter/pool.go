package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"refuel/jobs"
	"refuel/pkg/admission"
	"refuel/workflows"
	"refuel/workflows/capacitypool"
)

func poolCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "pool [--json]",
		Short:   "show the capacity pool: base, burst, queue and allocations",
		Example: "  starter pool --json",
		Args:    noArgs("starter pool takes no arguments: there is one pool per namespace"),
	}
	conn := addClientFlags(cmd)
	asJSON := cmd.Flags().Bool("json", false, "print the pool's status query answer as JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx, stdout := context.Background(), cmd.OutOrStdout()
		return conn.withClient(ctx, func(c client.Client) error {
			st, err := poolStatus(ctx, c, conn.resolvedNamespace())
			if err != nil {
				return err
			}
			if *asJSON {
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			printPool(stdout, st, time.Now())
			if nodes, err := jobs.Nodes(ctx, c); err == nil && len(nodes) > 0 {
				fmt.Fprintln(stdout, "joined machines")
				printNodes(stdout, nodes, time.Now())
			}
			return nil
		})
	}
	return cmd
}

// poolStatus asks the pool for its status, or explains that none runs.
func poolStatus(ctx context.Context, c client.Client, namespace string) (capacitypool.Status, error) {
	w, err := jobs.Describe(ctx, c, workflows.PoolWorkflowID)
	if errors.Is(err, jobs.ErrNoWorkflow) || (err == nil && !w.Running) {
		return capacitypool.Status{}, fmt.Errorf("no capacity pool is running in namespace %s: start the worker with --pools FILE "+
			"(see examples/pools.yaml; make run does this). Without a pool, runs and services acquire public capacity on their own", namespace)
	}
	if err != nil {
		return capacitypool.Status{}, err
	}
	return jobs.PoolStatus(ctx, c)
}

func printPool(w io.Writer, st capacitypool.Status, now time.Time) {
	fmt.Fprintf(w, "base       %d of %d GPUs used, %d free (%d allocations)\n", st.BaseGPUs-st.FreeBaseGPUs, st.BaseGPUs, st.FreeBaseGPUs, st.Base)
	fmt.Fprintf(w, "burst      %d instances\n", st.Burst)
	fmt.Fprintf(w, "preempted  %d, moved from burst to base %d\n", st.Preemptions, st.Moves)
	fmt.Fprintf(w, "generation %d (%d history events)\n", st.Generation, st.History)
	if len(st.Waiting) == 0 {
		fmt.Fprintln(w, "waiting    none")
	} else {
		// The pool answers in admission order: first is admitted first.
		fmt.Fprintln(w, "waiting, in admission order")
		rows := [][]string{{"#", "ID", "KIND", "TEAM", "PRIORITY", "EFFECTIVE", "WAITED", "STATE"}}
		var whys []string
		for i, q := range st.Waiting {
			state := "queued"
			if q.Paused {
				state = "paused" // keeps its place, is passed over
			}
			rows = append(rows, []string{fmt.Sprint(i + 1), q.ID, string(q.Kind), orDash(q.Team), fmt.Sprint(q.Priority),
				fmt.Sprintf("%.1f", q.EffectivePriority), q.Waited(now).Round(time.Second).String(), state})
			if q.Why != "" {
				whys = append(whys, fmt.Sprintf("  %d. %s: %s", i+1, q.ID, q.Why))
			}
		}
		writeTable(w, "  ", rows)
		if len(whys) > 0 {
			fmt.Fprintln(w, "why each waits")
			fmt.Fprintln(w, strings.Join(whys, "\n"))
		}
	}
	if len(st.Running) == 0 {
		fmt.Fprintln(w, "running    none")
		return
	}
	fmt.Fprintln(w, "running")
	rows := [][]string{{"ID", "KIND", "LAYER", "ON", "STATE", "OFFERING"}}
	for _, a := range st.Running {
		on := a.Node
		if a.Layer == admission.BurstLayer {
			on = a.Pool
		}
		// Holders bind burst allocations once acquired; a base machine
		// is the holder's as soon as it is granted.
		state := "granted"
		switch {
		case a.Yielding:
			state = "yielding"
		case a.Bound:
			state = "running"
		case a.Layer == admission.BurstLayer:
			state = "acquiring"
		}
		rows = append(rows, []string{a.Request.ID, string(a.Request.Kind), string(a.Layer), orDash(on), state, offeringOf(a)})
	}
	writeTable(w, "  ", rows)
}

// offeringOf is the offering an allocation's instance runs on, or the
// first it will try while it is still acquiring.
func offeringOf(a admission.Allocation) string {
	switch {
	case len(a.Offerings) == 0:
		return "-"
	case a.Bound:
		return a.Offerings[0].String()
	case len(a.Offerings) == 1:
		return a.Offerings[0].Key()
	}
	return fmt.Sprintf("%s (+%d more to try)", a.Offerings[0].Key(), len(a.Offerings)-1)
}
