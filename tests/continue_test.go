package tests

import (
	"context"
	"fmt"
	"testing"
	"time"

	"refuel/workflows/registry"
	"refuel/workflows/training"

	"go.temporal.io/api/workflowservice/v1"

	"refuel/controlplane"
	"refuel/jobs"
	"refuel/pkg/spec"
	"refuel/pkg/trainer"
	"refuel/workflows"
)

// TestRunContinuesAsNewWhileItTrainsEndToEnd: a run whose history grows
// long while it trains continues as new, again and again, and the
// trainer on its instance never stops: every run of the chain attaches
// to it, and the model is the one an uninterrupted run makes.
func TestRunContinuesAsNewWhileItTrainsEndToEnd(t *testing.T) {
	parallel(t) // a stack of its own; it mostly waits
	s := startStack(t, func(c *controlplane.Config) {
		c.Workflows = registry.New()
		c.Workflows.Run.MaxHistory = 50 // a handful of checkpoints a run
		c.Workflows.Run.SignalEvery = 0 // each checkpoint told at once
	})
	ctx := context.Background()
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	js := quickJob("long-history", spec.TierCritical)
	js.Work = spec.Duration(8 * time.Second)
	js.Checkpoint.Interval = "300ms"
	if _, err := jobs.Submit(ctx, s.Client, js); err != nil {
		t.Fatal(err)
	}
	var st training.Status
	if err := s.Client.GetWorkflow(wctx, js.ID, "").Get(wctx, &st); err != nil {
		t.Fatal(err)
	}
	resp, err := s.Client.ListWorkflow(wctx, &workflowservice.ListWorkflowExecutionsRequest{Query: fmt.Sprintf("WorkflowId = %q", js.ID)})
	if err != nil {
		t.Fatal(err)
	}
	runs := len(resp.GetExecutions())
	want := trainer.Train(trainer.Config{Steps: st.TotalSteps, Seed: trainer.DefaultSeed}).Digest()
	if st.State != workflows.StateCompleted || st.ModelDigest != want {
		t.Fatalf("ended %s with model %s; want completed with %s", st.State, st.ModelDigest, want)
	}
	if runs < 3 {
		t.Errorf("%d runs in the chain; want the run to have continued as new at least twice", runs)
	}
	if st.Attempt != 1 || len(st.Ledger.Segments) != 1 || st.Preemptions != 0 || st.Restarts.Total() != 0 {
		t.Errorf("attempt %d on %d instances, %d preemptions, restarts %+v; want one attempt the trainer never left",
			st.Attempt, len(st.Ledger.Segments), st.Preemptions, st.Restarts)
	}
	if left, _ := s.Cloud.List(ctx, nil); len(left) != 0 {
		t.Errorf("instances running after the chain ended: %v", left)
	}
}
