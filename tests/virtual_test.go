package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"refuel/workflows/registry"
	"refuel/workflows/training"

	"refuel/pkg/capacity"

	"go.temporal.io/sdk/client"

	"refuel/controlplane"
	"refuel/jobs"
	"refuel/pkg/spec"
	"refuel/pkg/trainer"
	"refuel/workflows"
)

// virtualStack is a stack whose clouds host their instances in-process.
func virtualStack(t *testing.T, edit func(*controlplane.Config)) *controlplane.Stack {
	t.Helper()
	return startStack(t, func(c *controlplane.Config) {
		c.Instances = controlplane.InstancesVirtual
		if edit != nil {
			edit(c)
		}
	})
}

// flatMarket writes a sim market of V100s in two zones whose spot stock
// never runs out.
func flatMarket(t *testing.T, stock int) string {
	t.Helper()
	dir := t.TempDir()
	points := make([]int, 100)
	for i := range points {
		points[i] = stock
	}
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"gap_seconds": 600}, "data": points})
	for _, zone := range []string{"us-west-2a", "us-west-2b"} {
		if err := os.WriteFile(filepath.Join(dir, zone+"_v100_1.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestDrillOnVirtualInstances runs the interruption drill on the sim's
// virtual instances: the job is preempted, replaced and resumed, and its
// final model is the one an uninterrupted run on process instances makes.
// No agent or trainer process is started for it.
func TestDrillOnVirtualInstances(t *testing.T) {
	parallel(t)
	dataDir := t.TempDir()
	virtual := virtualStack(t, func(c *controlplane.Config) {
		c.DataDir = dataDir
		c.Provider = controlplane.ProviderSim
		c.Sim = controlplane.SimConfig{Traces: flatMarket(t, 8), Notice: 30 * time.Second}
	})
	process := startStack(t, nil)
	ctx := context.Background()
	const work, interval = 6 * time.Second, time.Second

	// The reference: the drill's job, uninterrupted, on agent processes.
	ref := spec.JobSpec{ID: "virtual-drill-reference", Team: "drill", Tier: spec.TierFlexible, Priority: 50,
		Work: spec.Duration(work), Checkpoint: spec.Checkpoint{Interval: interval.String()}}
	ref.Normalize()
	refRun, err := jobs.Submit(ctx, process.Client, ref)
	if err != nil {
		t.Fatal(err)
	}

	self, _ := os.Executable()
	watching, stopWatching := context.WithCancel(ctx)
	var mu sync.Mutex
	var spawned []string
	sawAgents := false
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for watching.Err() == nil {
			n := virtual.Virtual.Running()
			left := agentProcesses(self, dataDir)
			mu.Lock()
			sawAgents = sawAgents || n > 0
			spawned = append(spawned, left...)
			mu.Unlock()
			time.Sleep(50 * time.Millisecond)
		}
	}()
	rep, err := jobs.Drill(ctx, virtual.Client, jobs.DrillOptions{
		Work: work, Interval: interval, NoticeGrace: 30 * time.Second, Timeout: 3 * time.Minute, Progress: testWriter{t},
	})
	stopWatching()
	<-watched
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(rep)
	t.Logf("drill on virtual instances: %s", b)
	if !rep.Passed || !rep.FinalIdentical || rep.ReplacementInstance == rep.InterruptedInstance {
		t.Fatalf("drill failed: %s", rep.Reason)
	}
	var refFinal training.Status
	if err := refRun.Get(ctx, &refFinal); err != nil {
		t.Fatal(err)
	}
	if refFinal.ModelDigest == "" || rep.FinalDigest != refFinal.ModelDigest {
		t.Errorf("final model on virtual instances %s; the uninterrupted run on processes made %s", rep.FinalDigest, refFinal.ModelDigest)
	}
	st, err := jobs.Status(ctx, virtual.Client, rep.WorkflowID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Preemptions != 1 || st.Recoveries != 1 || st.LastCheckpoint == nil {
		t.Errorf("status after the drill: preemptions %d, recoveries %d, checkpoint %v", st.Preemptions, st.Recoveries, st.LastCheckpoint)
	}
	mu.Lock()
	defer mu.Unlock()
	if !sawAgents || len(spawned) > 0 {
		t.Errorf("virtual agents seen running: %v; processes started: %v; want virtual agents and no process", sawAgents, spawned)
	}
	if left, _ := virtual.Provider.List(ctx, nil); len(left) != 0 || virtual.Virtual.Running() != 0 {
		t.Errorf("after the drill: %d instances, %d virtual agents still running", len(left), virtual.Virtual.Running())
	}
}

// TestManyRunsOnVirtualInstances runs 50 jobs at once on the local
// cloud's virtual instances, half of them checkpointing to mem://, and
// takes five instances away under them: every run completes with the
// model an uninterrupted run makes, the five after recovering, and
// nothing is left running.
func TestManyRunsOnVirtualInstances(t *testing.T) {
	parallel(t)
	s := virtualStack(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const n, preempted = 50, 5
	began := time.Now()
	runs := make([]client.WorkflowRun, n)
	for i := range n {
		js := quickJob(fmt.Sprintf("many-%02d", i), spec.TierFlexible)
		js.Work = spec.Duration(3 * time.Second)
		if i < preempted {
			// Long enough to be still training when its instance is
			// taken, beside 49 other runs on two busy cores.
			js.Work = spec.Duration(30 * time.Second)
		}
		if i%2 == 0 {
			js.Checkpoint.URL = "mem://many"
		}
		run, err := jobs.Submit(ctx, s.Client, js)
		if err != nil {
			t.Fatal(err)
		}
		runs[i] = run
	}
	// Each of the five is taken as soon as it has checkpointed, all at
	// once: one waited for after another could finish its work first.
	errs := make(chan error, preempted)
	for i := range preempted {
		go func() {
			id := fmt.Sprintf("many-%02d", i)
			st, err := jobs.WaitFor(ctx, s.Client, id, func(st training.Status) bool {
				return st.LastCheckpoint != nil && st.Instance != nil && st.State == workflows.StateRunning
			})
			if err == nil {
				_, err = jobs.Interrupt(ctx, s.Client, st.Instance.ID, 5*time.Second)
			}
			errs <- err
		}()
	}
	for range preempted {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i, run := range runs {
		var final training.Status
		if err := run.Get(ctx, &final); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		want := trainer.Train(trainer.Config{Steps: final.TotalSteps, Seed: trainer.DefaultSeed}).Digest()
		if final.State != workflows.StateCompleted || final.Step != final.TotalSteps || final.ModelDigest != want {
			t.Errorf("run %d: %s at step %d of %d, model %s; want completed with %s", i, final.State, final.Step, final.TotalSteps, final.ModelDigest, want)
		}
		if i < preempted && (final.Preemptions != 1 || final.Recoveries != 1) {
			t.Errorf("run %d: %d preemptions, %d recoveries; want the one taken and its recovery", i, final.Preemptions, final.Recoveries)
		}
		if !strings.HasPrefix(final.LastCheckpoint.URL, map[bool]string{true: "mem://many/", false: "file://"}[i%2 == 0]) {
			t.Errorf("run %d checkpointed to %s", i, final.LastCheckpoint.URL)
		}
	}
	t.Logf("%d runs on virtual instances, %d preempted, completed in %s", n, preempted, time.Since(began).Round(time.Millisecond))
	if left, _ := s.Cloud.List(ctx, nil); len(left) != 0 || s.Virtual.Running() != 0 {
		t.Errorf("after every run ended: %d instances, %d virtual agents still running", len(left), s.Virtual.Running())
	}
}

// TestVirtualInstanceTakenWithoutNotice takes a virtual instance away
// under its run with no notice, as a machine that loses its power: its
// agent reports nothing more, the run finds it silent within the
// heartbeat timeout, restarts on another instance from the checkpoint the
// lost one had uploaded, and ends with the uninterrupted model.
func TestVirtualInstanceTakenWithoutNotice(t *testing.T) {
	parallel(t)
	wf := registry.New()
	wf.Run.HeartbeatTimeout, wf.Run.RestartBackoff = 3*time.Second, time.Second
	s := virtualStack(t, func(c *controlplane.Config) { c.Workflows = wf })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	js := quickJob("virtual-lost", spec.TierFlexible)
	js.Work = spec.Duration(16 * time.Second) // still training when its instance goes, on a busy machine
	run, err := jobs.Submit(ctx, s.Client, js)
	if err != nil {
		t.Fatal(err)
	}
	st, err := jobs.WaitFor(ctx, s.Client, js.ID, func(st training.Status) bool {
		return st.LastCheckpoint != nil && st.Instance != nil && st.State == workflows.StateRunning
	})
	if err != nil {
		t.Fatal(err)
	}
	lost := st.Instance.ID
	if err := s.Cloud.Release(ctx, lost); err != nil {
		t.Fatal(err)
	}
	// What the run knew when the instance went is all it may ever hear
	// from it: no progress comes from a machine that is gone.
	atLoss, err := jobs.Status(ctx, s.Client, js.ID)
	if err != nil {
		t.Fatal(err)
	}
	var final training.Status
	if err := run.Get(ctx, &final); err != nil {
		t.Fatal(err)
	}
	want := trainer.Train(trainer.Config{Steps: final.TotalSteps, Seed: trainer.DefaultSeed}).Digest()
	if final.State != workflows.StateCompleted || final.ModelDigest != want {
		t.Fatalf("final %s, model %s; want completed with %s", final.State, final.ModelDigest, want)
	}
	if final.Restarts[capacity.InstanceLost] != 1 || final.Instance != nil {
		t.Errorf("restarts %+v; want the one lost instance", final.Restarts)
	}
	if atLoss.LastCheckpoint == nil || atLoss.LastCheckpoint.Step < st.LastCheckpoint.Step {
		t.Errorf("checkpoint known at the loss %v, before it %v", atLoss.LastCheckpoint, st.LastCheckpoint)
	}
	if left, _ := s.Cloud.List(ctx, nil); len(left) != 0 || s.Virtual.Running() != 0 {
		t.Errorf("after the run: %d instances, %d virtual agents still running", len(left), s.Virtual.Running())
	}
}

// TestOwnCommandOnVirtualInstanceIsAProcess runs a job with a command of
// its own on a virtual instance: the instance is virtual, the user's
// program is a real process under it.
func TestOwnCommandOnVirtualInstanceIsAProcess(t *testing.T) {
	parallel(t)
	dataDir := t.TempDir()
	s := virtualStack(t, func(c *controlplane.Config) { c.DataDir = dataDir })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	self, _ := os.Executable()
	js := quickJob("virtual-own-command", spec.TierFlexible)
	js.Command = []string{self, "trainer", "--steps", "150", "--checkpoint-every", "50", "--step-time", "20ms"}
	run, err := jobs.Submit(ctx, s.Client, js)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	done := make(chan error, 1)
	go func() { done <- run.Get(ctx, nil) }()
	for waiting := true; waiting; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			waiting = false
		case <-time.After(20 * time.Millisecond):
			if len(seen) == 0 {
				seen = agentProcesses(self, dataDir)
			}
		}
	}
	if len(seen) != 1 || !strings.Contains(seen[0], " trainer --steps 150") {
		t.Errorf("processes seen under the virtual instance: %v; want the job's own trainer, and no agent", seen)
	}
	st, err := jobs.Status(ctx, s.Client, js.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != workflows.StateCompleted || st.Step != 150 {
		t.Errorf("final %s at step %d; want completed at 150", st.State, st.Step)
	}
}
