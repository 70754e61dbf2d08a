package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"refuel/jobs"
	"refuel/pkg/spec"
	"refuel/workflows"
)

func runDemo(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	conn := addConnFlags(fs)
	ui := fs.String("ui", "http://127.0.0.1:8233", "Web UI address to point people at")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	ctx := context.Background()
	c, err := waitForCluster(ctx, conn, stderr)
	if err != nil {
		return err
	}
	defer c.Close()
	return demo(ctx, c, *ui, stdout)
}

// waitForCluster dials until the stack answers: `make run` starts the
// worker and the demo together.
func waitForCluster(ctx context.Context, conn connFlags, stderr io.Writer) (client.Client, error) {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		c, err := conn.dial(ctx)
		if err == nil {
			if _, err = c.CheckHealth(ctx, nil); err == nil {
				return c, nil
			}
			c.Close()
		}
		if time.Now().After(deadline) {
			return nil, err
		}
		fmt.Fprintln(stderr, "demo: waiting for the refuel stack to come up...")
		time.Sleep(2 * time.Second)
	}
}

// demo submits a small fleet of jobs and puts them through what refuel is
// for: a preemption survived, a pause and resume, a priority raised.
func demo(ctx context.Context, c client.Client, ui string, out io.Writer) error {
	stamp := time.Now().Format("0102-150405")
	deadline := time.Now().Add(time.Hour)
	fleet := []spec.JobSpec{
		{ID: "demo-" + stamp + "-llm-finetune", Team: "nlp", Tier: spec.TierCritical, Priority: 80, Work: spec.Duration(time.Minute)},
		{ID: "demo-" + stamp + "-vision", Team: "vision", Tier: spec.TierDeadline, Deadline: &deadline, Priority: 60, Work: spec.Duration(90 * time.Second)},
		{ID: "demo-" + stamp + "-sweep-a", Team: "research", Tier: spec.TierFlexible, Priority: 40, Work: spec.Duration(2 * time.Minute),
			Checkpoint: spec.Checkpoint{Interval: "10s"}},
		{ID: "demo-" + stamp + "-sweep-b", Team: "research", Tier: spec.TierFlexible, Priority: 20, Work: spec.Duration(90 * time.Second),
			Checkpoint: spec.Checkpoint{Interval: "10s"}},
	}
	for i := range fleet {
		fleet[i].Normalize()
		if err := fleet[i].Validate(time.Now()); err != nil {
			return err
		}
		if _, err := jobs.Submit(ctx, c, fleet[i]); err != nil {
			return err
		}
		fmt.Fprintf(out, "submitted %-36s tier %-8s team %s\n", fleet[i].ID, fleet[i].Tier, fleet[i].Team)
	}
	fmt.Fprintf(out, "\n  Watch it in the Temporal Web UI: %s/namespaces/default/workflows?query=%s\n", ui,
		strings.ReplaceAll(fmt.Sprintf("WorkflowId STARTS_WITH \"demo-%s\"", stamp), " ", "+"))
	fmt.Fprintf(out, "  or from a shell: go run ./starter status %s --watch\n\n", fleet[2].ID)

	victim, other := fleet[2].ID, fleet[3].ID
	st, err := jobs.WaitFor(ctx, c, victim, func(s workflows.Status) bool { return s.LastCheckpoint != nil && s.Instance != nil })
	if err != nil {
		return err
	}
	fmt.Fprintf(out, ">> %s checkpointed at step %d; the spot market takes its instance %s (notice: 30s)\n", victim, st.LastCheckpoint.Step, st.Instance.ID)
	if _, err := jobs.Interrupt(ctx, c, st.Instance.ID, 30*time.Second); err != nil {
		return err
	}
	if _, err := jobs.WaitFor(ctx, c, other, func(s workflows.Status) bool { return s.LastCheckpoint != nil }); err != nil {
		return err
	}
	fmt.Fprintf(out, ">> pausing %s: it checkpoints, gives its instance back and waits without spending\n", other)
	if err := jobs.Pause(ctx, c, other); err != nil {
		return err
	}
	time.Sleep(10 * time.Second)
	if _, err := jobs.SetPriority(ctx, c, other, 90); err != nil {
		return err
	}
	fmt.Fprintf(out, ">> raised %s to priority 90 and resumed it\n", other)
	if err := jobs.Resume(ctx, c, other); err != nil {
		return err
	}
	return watchFleet(ctx, c, fleet, out)
}

// watchFleet prints one line per job every few seconds until all end.
func watchFleet(ctx context.Context, c client.Client, fleet []spec.JobSpec, out io.Writer) error {
	for {
		done := 0
		fmt.Fprintln(out, time.Now().Format("15:04:05"))
		for _, j := range fleet {
			st, err := jobs.Status(ctx, c, j.ID)
			if err != nil {
				fmt.Fprintf(out, "  %-36s %v\n", j.ID, err)
				continue
			}
			where := "-"
			if st.Instance != nil {
				where = st.Instance.Market + " " + st.Instance.ID
			}
			step := max(st.Step, jobs.LiveStep(ctx, c, j.ID))
			fmt.Fprintf(out, "  %-36s %-20s %s %4d/%-4d %-28s preempted %d recovered %d $%.4f\n",
				j.ID, st.State, progressBar(step, st.TotalSteps, 16), step, st.TotalSteps, where, st.Preemptions, st.Recoveries, st.CostUSD)
			if st.State == workflows.StateCompleted || st.State == workflows.StateFailed || st.State == workflows.StateCancelled {
				done++
			}
		}
		if done == len(fleet) {
			fmt.Fprintln(out, "\nAll demo runs ended. The stack keeps serving: browse the runs in the Web UI; Ctrl-C stops it and releases every instance.")
			return nil
		}
		time.Sleep(3 * time.Second)
	}
}
