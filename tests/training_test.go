package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"refuel/workflows/training"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"refuel/jobs"
	"refuel/pkg/cloud/local"
	"refuel/pkg/policy"
	"refuel/pkg/spec"
	"refuel/workflows"
)

// TestDrill runs the field's acceptance test for real: a job checkpoints,
// its instance is taken away, refuel acquires a replacement by itself and
// resumes from the latest checkpoint, and the final model is bit-identical
// to an uninterrupted run's.
func TestDrill(t *testing.T) {
	parallel(t)
	s := startStack(t, nil)
	ctx := context.Background()
	rep, err := jobs.Drill(ctx, s.Client, jobs.DrillOptions{
		Work: 6 * time.Second, Interval: time.Second, NoticeGrace: 30 * time.Second, Timeout: 3 * time.Minute,
		Progress: testWriter{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(rep)
	t.Logf("drill report: %s", b)
	if !rep.Passed || !rep.FinalIdentical {
		t.Fatalf("drill failed: %s", rep.Reason)
	}
	if rep.ReplacementInstance == rep.InterruptedInstance || rep.ReplacementInstance == "" {
		t.Errorf("replacement %q; want a new instance, not %q", rep.ReplacementInstance, rep.InterruptedInstance)
	}
	if rep.ResumedFromStep < rep.CheckpointStep {
		t.Errorf("resumed from %d, before the checkpoint at %d", rep.ResumedFromStep, rep.CheckpointStep)
	}
	if rep.RecoverySeconds <= 0 || rep.RecoverySeconds < rep.ReplacementSeconds {
		t.Errorf("recovery %.2fs, replacement %.2fs: recovery must follow the replacement", rep.RecoverySeconds, rep.ReplacementSeconds)
	}
	if left, _ := s.Cloud.List(ctx, nil); len(left) != 0 {
		t.Errorf("instances still running after the run ended: %v", left)
	}
	st, err := jobs.Status(ctx, s.Client, rep.WorkflowID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Preemptions != 1 || st.Recoveries != 1 || st.CostUSD <= 0 || st.LastCheckpoint == nil {
		t.Errorf("status after drill: preemptions %d recoveries %d cost %.6f checkpoint %v", st.Preemptions, st.Recoveries, st.CostUSD, st.LastCheckpoint)
	}
	// The replacement was paid for from its launch and trained only once
	// the checkpoint was restored: that overhead is the recovery's cost.
	if st.Cost.RecoveryUSD <= 0 || st.Ledger.RecoverySeconds <= 0 || st.Cost.RecoveryUSD >= st.CostUSD {
		t.Errorf("recovery cost $%.6f (%.2fs) of $%.6f; want above 0 and within the run's cost", st.Cost.RecoveryUSD, st.Ledger.RecoverySeconds, st.CostUSD)
	}
	// The cost report shows it per job, and per team and pool.
	costs, err := jobs.Costs(ctx, s.Client, fmt.Sprintf("WorkflowId = %q", rep.WorkflowID), testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	var rolled float64
	for _, r := range costs.Rollup {
		rolled += r.RecoveryUSD
	}
	if len(costs.Jobs) != 1 || costs.Jobs[0].RecoveryUSD <= 0 || rolled <= 0 {
		t.Errorf("cost report %+v; want the drill run with its recovery cost, and the rollup's", costs)
	}
	// What the run measured is in its pools' checkpoint logs, for the
	// `interval: auto` of the runs after it.
	var learned policy.CheckpointLog
	for _, o := range local.DefaultOfferings() {
		l, err := s.Memory.CheckpointLog(ctx, o.Key())
		if err != nil {
			t.Fatal(err)
		}
		learned = learned.Add(l)
	}
	if learned.Preemptions != 1 || learned.Held <= 0 || learned.Writes == 0 || learned.MeanWrite() <= 0 {
		t.Errorf("checkpoint logs after the drill: %+v; want the preemption, the time held and the measured writes", learned)
	}
	metrics := scrape(t, s.MetricsURL())
	for _, m := range []string{"refuel_acquisitions_total", "refuel_preemptions_total", "refuel_recoveries_total", "refuel_checkpoints_total", "refuel_releases_total"} {
		if !strings.Contains(metrics, m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
	recordHistory(t, s.Client, rep.WorkflowID, "training-run-drill")
}

func TestDuplicateIDIsRefused(t *testing.T) {
	parallel(t)
	s := startStack(t, nil)
	ctx := context.Background()
	js := quickJob("dup-1", spec.TierFlexible)
	run, err := jobs.Submit(ctx, s.Client, js)
	if err != nil {
		t.Fatal(err)
	}
	var dup *jobs.DuplicateError
	if _, err := jobs.Submit(ctx, s.Client, js); !errors.As(err, &dup) {
		t.Fatalf("second submit: %v; want DuplicateError", err)
	}
	if err := run.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.Submit(ctx, s.Client, js); !errors.As(err, &dup) {
		t.Fatalf("submit after the first run closed: %v; want DuplicateError", err)
	}
}

// TestBadPriorityLeavesNoTrace checks that the set-priority validator
// rejects a bad value before anything reaches the run's history.
func TestBadPriorityLeavesNoTrace(t *testing.T) {
	parallel(t)
	s := startStack(t, nil)
	ctx := context.Background()
	js := quickJob("prio-1", spec.TierFlexible)
	js.Work = spec.Duration(4 * time.Second)
	run, err := jobs.Submit(ctx, s.Client, js)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.SetPriority(ctx, s.Client, js.ID, 150); err == nil || !strings.Contains(err.Error(), "0 (lowest) to 100") {
		t.Errorf("priority 150: %v; want a rejection that says the range", err)
	}
	if got, err := jobs.SetPriority(ctx, s.Client, js.ID, 90); err != nil || got != 90 {
		t.Fatalf("priority 90: got %d, %v", got, err)
	}
	if err := run.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	updates := 0
	iter := s.Client.GetWorkflowHistory(ctx, js.ID, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetEventType() == enums.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED {
			updates++
		}
	}
	if updates != 1 {
		t.Errorf("%d accepted updates in history; want only the valid one", updates)
	}
	st, _ := jobs.Status(ctx, s.Client, js.ID)
	if st.Priority != 90 {
		t.Errorf("priority %d; want 90", st.Priority)
	}
}

// TestPauseAndResume pauses a training run: it checkpoints, gives its
// instance back and holds nothing until resumed, then finishes from where
// it stopped.
func TestPauseAndResume(t *testing.T) {
	parallel(t)
	s := startStack(t, nil)
	ctx := context.Background()
	js := quickJob("pause-1", spec.TierFlexible)
	js.Work = spec.Duration(16 * time.Second) // room to pause it before it ends, on a busy machine
	run, err := jobs.Submit(ctx, s.Client, js)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if _, err := jobs.WaitFor(wctx, s.Client, js.ID, func(st training.Status) bool { return st.LastCheckpoint != nil }); err != nil {
		t.Fatal(err)
	}
	if err := jobs.Pause(ctx, s.Client, js.ID); err != nil {
		t.Fatal(err)
	}
	paused, err := jobs.WaitFor(wctx, s.Client, js.ID, func(st training.Status) bool { return st.State == workflows.StatePaused })
	if err != nil {
		t.Fatal(err)
	}
	if paused.Instance != nil {
		t.Errorf("paused run holds %v", paused.Instance)
	}
	if left, _ := s.Cloud.List(ctx, nil); len(left) != 0 {
		t.Errorf("instances running while the only run is paused: %v", left)
	}
	if err := jobs.Resume(ctx, s.Client, js.ID); err != nil {
		t.Fatal(err)
	}
	var final training.Status
	if err := run.Get(wctx, &final); err != nil {
		t.Fatal(err)
	}
	if final.State != workflows.StateCompleted || final.Preemptions != 0 || final.Step != final.TotalSteps {
		t.Errorf("final %s step %d/%d preemptions %d", final.State, final.Step, final.TotalSteps, final.Preemptions)
	}
	recordHistory(t, s.Client, js.ID, "training-run-pause-resume")
}

// TestCancelReleasesInstances cancels a running job and checks that its
// instance is released and its agent gone.
func TestCancelReleasesInstances(t *testing.T) {
	parallel(t)
	s := startStack(t, nil)
	ctx := context.Background()
	js := quickJob("cancel-1", spec.TierCritical)
	js.Work = spec.Duration(time.Minute)
	run, err := jobs.Submit(ctx, s.Client, js)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	before, err := jobs.WaitFor(wctx, s.Client, js.ID, func(st training.Status) bool { return st.State == workflows.StateRunning && st.Step > 0 })
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Client.CancelWorkflow(ctx, js.ID, ""); err != nil {
		t.Fatal(err)
	}
	err = run.Get(wctx, nil)
	var canceled *temporal.CanceledError
	if !errors.As(err, &canceled) {
		t.Fatalf("cancelled run ended with %v; want a cancellation", err)
	}
	if left, _ := s.Cloud.List(ctx, nil); len(left) != 0 {
		t.Errorf("instances running after cancel: %v", left)
	}
	// The trainer was stopped at a final checkpoint, uploaded before its
	// instance was released, past where it was when the cancel came.
	var final training.Status
	if err := canceled.Details(&final); err != nil {
		t.Fatal(err)
	}
	if final.State != workflows.StateCancelled || final.LastCheckpoint == nil || final.LastCheckpoint.Step < before.Step {
		t.Errorf("final status %s with checkpoint %+v; want cancelled with a checkpoint at step %d or later", final.State, final.LastCheckpoint, before.Step)
	}
	recordHistory(t, s.Client, js.ID, "training-run-cancel")
}

// TestInvalidSpecFromAnyClient starts a TrainingRun with an invalid spec
// the way another SDK would (no client-side validation): the run fails
// at once, naming the fields.
func TestInvalidSpecFromAnyClient(t *testing.T) {
	parallel(t)
	s := startStack(t, nil)
	ctx := context.Background()
	raw := map[string]any{"id": "bad-1", "tier": "deadline", "work": "1h", "priority": 300}
	run, err := s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "bad-1", TaskQueue: workflows.TaskQueue}, workflows.TrainingRunName, raw)
	if err != nil {
		t.Fatal(err)
	}
	err = run.Get(ctx, nil)
	if err == nil || !strings.Contains(err.Error(), "deadline") || !strings.Contains(err.Error(), "priority") {
		t.Fatalf("error %v; want a failure naming deadline and priority", err)
	}
}

func quickJob(id string, tier spec.Tier) spec.JobSpec {
	js := spec.JobSpec{ID: id, Team: "test", Tier: tier, Priority: 50, Work: spec.Duration(2 * time.Second),
		Checkpoint: spec.Checkpoint{Interval: "500ms"}}
	js.Normalize()
	return js
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// recordHistory saves a run's history for the replay test when
// REFUEL_RECORD_HISTORIES names a directory (testdata/histories).
func recordHistory(t *testing.T, c client.Client, id, name string) {
	t.Helper()
	dir := os.Getenv("REFUEL_RECORD_HISTORIES")
	if dir == "" {
		return
	}
	path := filepath.Join(dir, name+".json")
	iter := c.GetWorkflowHistory(context.Background(), id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var events []json.RawMessage
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		b, err := protoJSON(ev)
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, b)
	}
	b, _ := json.MarshalIndent(map[string]any{"events": events}, "", "  ")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %d events to %s", len(events), path)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestReusedJobIDGetsInstancesOfItsOwn: a job id used again (after
// retention, or by a client that allows duplicates) is a new run, whose
// idempotency tokens come from its own first run ID: it is not handed
// the earlier run's instance, and completes on one of its own.
func TestReusedJobIDGetsInstancesOfItsOwn(t *testing.T) {
	parallel(t)
	s := startStack(t, nil)
	ctx := context.Background()
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	js := quickJob("reused-1", spec.TierCritical)
	var ran []string
	for range 2 {
		// A run refuses checkpoints another run of its id wrote: each
		// run of the reused id keeps them in a store of its own.
		js.Checkpoint.URL = "file://" + t.TempDir()
		run, err := s.Client.ExecuteWorkflow(wctx, client.StartWorkflowOptions{
			ID: js.ID, TaskQueue: workflows.TaskQueue, WorkflowIDReusePolicy: enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		}, workflows.TrainingRunName, js)
		if err != nil {
			t.Fatal(err)
		}
		var st training.Status
		if err := run.Get(wctx, &st); err != nil {
			t.Fatalf("run %d: %v", len(ran)+1, err)
		}
		if st.State != workflows.StateCompleted || len(st.Ledger.Segments) != 1 {
			t.Fatalf("run %d ended %s on %d instances; want completed on one", len(ran)+1, st.State, len(st.Ledger.Segments))
		}
		ran = append(ran, st.Ledger.Segments[0].InstanceID)
	}
	if ran[0] == ran[1] {
		t.Errorf("both runs trained on %s: the second was handed the first's instance", ran[0])
	}
}
