package tests

import (
	"context"
	"testing"
	"time"

	"refuel/workflows/instances"
	"refuel/workflows/training"

	"go.temporal.io/sdk/client"

	"refuel/activities"
	"refuel/controlplane"
	"refuel/internal/cluster"
	"refuel/jobs"
	"refuel/pkg/capacity"
	"refuel/pkg/cloud/local"
	"refuel/pkg/spec"
	"refuel/workflows"
)

// TestJanitorReleasesWhatNoRunOwns terminates a running job (no cleanup
// code runs then) and leaks an instance for a run that never existed; one
// janitor pass must release both and nothing else.
func TestJanitorReleasesWhatNoRunOwns(t *testing.T) {
	s := startStack(t, nil)
	ctx := context.Background()
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()

	keep := quickJob("janitor-keep", spec.TierFlexible)
	keep.Work = spec.Duration(time.Minute)
	doomed := quickJob("janitor-doomed", spec.TierFlexible)
	doomed.Work = spec.Duration(time.Minute)
	for _, js := range []spec.JobSpec{keep, doomed} {
		if _, err := jobs.Submit(ctx, s.Client, js); err != nil {
			t.Fatal(err)
		}
		if _, err := jobs.WaitFor(wctx, s.Client, js.ID, func(st training.Status) bool { return st.State == workflows.StateRunning }); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Client.TerminateWorkflow(ctx, doomed.ID, "", "operator terminated it"); err != nil {
		t.Fatal(err)
	}
	ghost, err := s.Cloud.Acquire(ctx, capacity.Request{RunID: "no-such-run", Attempt: 1, Offerings: local.DefaultOfferings()[:1],
		Tags: map[string]string{capacity.TagDeployment: activities.DefaultDeployment}})
	if err != nil {
		t.Fatal(err)
	}
	// Another deployment's orphan on the same cloud is not this janitor's.
	theirs, err := s.Cloud.Acquire(ctx, capacity.Request{RunID: "no-such-run", Attempt: 2, Offerings: local.DefaultOfferings()[:1],
		Tags: map[string]string{capacity.TagDeployment: "other"}})
	if err != nil {
		t.Fatal(err)
	}

	run, err := s.Client.ExecuteWorkflow(wctx, client.StartWorkflowOptions{ID: "janitor-test", TaskQueue: workflows.TaskQueue}, workflows.JanitorName)
	if err != nil {
		t.Fatal(err)
	}
	var report instances.JanitorReport
	if err := run.Get(wctx, &report); err != nil {
		t.Fatal(err)
	}
	if report.Checked != 3 || len(report.Released) != 2 {
		t.Fatalf("janitor checked %d, released %v; want 3 checked, 2 released", report.Checked, report.Released)
	}
	left, _ := s.Cloud.List(ctx, map[string]string{capacity.TagDeployment: activities.DefaultDeployment})
	if len(left) != 1 || left[0].Tags[capacity.TagRun] != keep.ID {
		t.Errorf("left running: %v; want only %s's instance", left, keep.ID)
	}
	if _, state, err := s.Cloud.Describe(ctx, theirs.ID); err != nil || state != capacity.StateRunning {
		t.Errorf("the other deployment's instance is %s (%v); want it left running", state, err)
	}
	for _, id := range report.Released {
		if id == ghost.ID {
			return
		}
	}
	t.Errorf("the leaked instance %s was not released", ghost.ID)
}

// TestExternalClusterStartsNoServer points a second control plane at the
// first one's frontend: it must connect instead of embedding a server.
func TestExternalClusterStartsNoServer(t *testing.T) {
	first := startStack(t, nil)
	second := startStack(t, func(c *controlplane.Config) {
		c.Target = cluster.Target{Address: first.Address}
		c.MetricsAddr = "-"
	})
	if second.Server != nil {
		t.Fatal("a control plane with a Temporal address started its own server")
	}
	if second.Address != first.Address {
		t.Errorf("connected to %s; want %s", second.Address, first.Address)
	}
	if _, err := second.Client.CheckHealth(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
}
