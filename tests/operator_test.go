package tests

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"refuel/workflows/training"

	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"refuel/controlplane"
	"refuel/jobs"
	"refuel/pkg/checkpoint"
	"refuel/pkg/spec"
	"refuel/workflows"
)

// TestOperatorSeesTheRunAndThePool follows what an operator reads: a run
// records its store, where its output is found from anywhere once its
// instance is gone; its details, once it ended, no longer list what it
// may acquire; the pool's page has a summary and details; and a second
// run under the same job id refuses the first one's checkpoints.
func TestOperatorSeesTheRunAndThePool(t *testing.T) {
	parallel(t) // a stack of its own; it mostly waits
	var dataDir string
	s := startStack(t, func(c *controlplane.Config) {
		c.Provider, c.Pools = controlplane.ProviderLocal, testPools()
		dataDir = c.DataDir
	})
	ctx := context.Background()
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	js := quickJob("operator-view", spec.TierFlexible)
	run, err := jobs.Submit(ctx, s.Client, js)
	if err != nil {
		t.Fatal(err)
	}
	var final training.Status
	if err := run.Get(wctx, &final); err != nil {
		t.Fatal(err)
	}

	if want := "file://" + filepath.Join(dataDir, "checkpoints"); final.StoreURL != want {
		t.Errorf("store_url %q; want the worker's store %q", final.StoreURL, want)
	}
	url, err := jobs.StoreURL(wctx, s.Client, converter.GetDefaultDataConverter(), js.ID, "file:///nowhere")
	if err != nil || url != final.StoreURL {
		t.Fatalf("StoreURL = %q, %v; want the status's %q, whatever the fallback", url, err, final.StoreURL)
	}
	store, err := checkpoint.Open(wctx, url, js.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if segs, err := store.LogSegments(wctx); err != nil || len(segs) == 0 {
		t.Errorf("log segments %v, %v; want the trainer's output in the run's store", segs, err)
	}

	if cur := currentDetails(t, wctx, s.Client, js.ID); !strings.Contains(cur, "**completed**") || strings.Contains(cur, "may acquire") {
		t.Errorf("current details of the completed run: %q; want completed, without what it may acquire", cur)
	}
	desc, err := s.Client.DescribeWorkflowExecution(wctx, workflows.PoolWorkflowID, "")
	if err != nil {
		t.Fatal(err)
	}
	var summary string
	_ = converter.GetDefaultDataConverter().FromPayload(desc.GetExecutionConfig().GetUserMetadata().GetSummary(), &summary)
	if !strings.Contains(summary, "capacity pool: 1 base machines (1 GPUs), 1 burst pools") && desc.GetWorkflowExecutionInfo().GetExecution().GetRunId() == desc.GetWorkflowExecutionInfo().GetFirstRunId() {
		t.Errorf("pool summary %q; want its base machines and burst pools", summary)
	}
	if cur := currentDetails(t, wctx, s.Client, workflows.PoolWorkflowID); !strings.Contains(cur, "**base** 0 of 1 GPUs in use") || !strings.Contains(cur, "burst pools: cloud 0 of 1") {
		t.Errorf("pool details %q; want base and burst in use", cur)
	}

	// Every list view of starter ui is a query the server takes.
	for _, v := range jobs.Views {
		if _, err := s.Client.CountWorkflow(wctx, &workflowservice.CountWorkflowExecutionsRequest{Query: v.Query}); err != nil {
			t.Errorf("view %q (%s): %v", v.Name, v.Query, err)
		}
	}

	// Another run of the same job id (a client other than the starter,
	// which refuses duplicates; or a second stack on the same store).
	again, err := s.Client.ExecuteWorkflow(wctx, client.StartWorkflowOptions{ID: js.ID, TaskQueue: workflows.TaskQueue}, workflows.TrainingRunName, js)
	if err != nil {
		t.Fatal(err)
	}
	err = again.Get(wctx, nil)
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != "checkpoint" || !strings.Contains(err.Error(), "written by another run of job "+js.ID) {
		t.Fatalf("second run ended with %v; want it to refuse the first run's checkpoint (class checkpoint)", err)
	}
}

// currentDetails reads a workflow's current details as the Web UI does.
func currentDetails(t *testing.T, ctx context.Context, c client.Client, id string) string {
	t.Helper()
	v, err := c.QueryWorkflow(ctx, id, "", "__temporal_workflow_metadata")
	if err != nil {
		t.Fatal(err)
	}
	var meta sdkpb.WorkflowMetadata
	if err := v.Get(&meta); err != nil {
		t.Fatal(err)
	}
	return meta.GetCurrentDetails()
}
