package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"refuel/workflows/capacitypool"
	"refuel/workflows/inference"
	"refuel/workflows/training"

	"go.temporal.io/sdk/client"

	"refuel/controlplane"
	"refuel/jobs"
	"refuel/pkg/capacity"
	"refuel/pkg/cloud/local"
	"refuel/pkg/pool"
	"refuel/pkg/spec"
	"refuel/workflows"
)

// testPools is one base machine and a burst pool of the local cloud
// capped at one instance, so a third demand must take capacity from
// someone.
func testPools() *pool.Config {
	var burst []capacity.Offering
	for _, o := range local.DefaultOfferings() {
		if o.Zone == "local-a" {
			burst = append(burst, o)
		}
	}
	c := pool.Config{
		Base:  pool.BaseGroup{Name: "dc", Counts: []pool.BaseCount{{InstanceType: "gpu.1x", GPUs: 1, Count: 1, Zone: "dc", PricePerHour: 0.4}}},
		Burst: []pool.BurstPool{{Name: "cloud", MaxInstances: 1, Offerings: burst}},
	}
	c.Normalize()
	return &c
}

// TestPriorityPreemptionEndToEnd runs the story of issue 5 on the
// embedded server with real agents: a low-priority run takes the base
// machine, a second overflows to burst, an inference service of higher
// priority takes the base machine from the first (which checkpoints,
// yields and is requeued), queued runs reorder on set-priority and hold
// on pause, the yielded run resumes from its checkpoint when burst frees,
// moves to base when the service goes (burst is given back first), and
// completes. The pool continues as new all along and loses nothing.
func TestPriorityPreemptionEndToEnd(t *testing.T) {
	parallelFirst(t) // a stack and data dir of its own; most of its time is spent waiting
	s := startStack(t, func(c *controlplane.Config) {
		c.Provider, c.Pools, c.PoolMaxHistory = controlplane.ProviderLocal, testPools(), 60
	})
	ctx := context.Background()
	wctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	waitRun := func(id, what string, cond func(training.Status) bool) training.Status {
		t.Helper()
		st, err := jobs.WaitFor(wctx, s.Client, id, cond)
		if err != nil {
			t.Fatalf("%s: waiting for %s: %v (last status %s, admission %+v)", id, what, err, st.State, st.Admission)
		}
		return st
	}
	submit := func(id string, priority int, work time.Duration) client.WorkflowRun {
		t.Helper()
		js := quickJob(id, spec.TierFlexible)
		js.Priority, js.Work = priority, spec.Duration(work)
		run, err := jobs.Submit(ctx, s.Client, js)
		if err != nil {
			t.Fatal(err)
		}
		return run
	}

	// Work long enough that low is still training when the service comes
	// and mid still holds burst while q1 and q2 queue and are reordered,
	// on a busy machine: once mid ends, q2 is admitted to its burst
	// instance and the queue the test reads is gone.
	low := submit("low", 10, 30*time.Second)
	waitRun("low", "a checkpoint on base", func(st training.Status) bool {
		return st.Admission != nil && st.Admission.Layer == "base" && st.LastCheckpoint != nil
	})
	mid := submit("mid", 30, 60*time.Second)
	waitRun("mid", "training on burst", func(st training.Status) bool {
		return st.Admission != nil && st.Admission.Layer == "burst" && st.State == workflows.StateRunning
	})

	chat, err := jobs.StartService(ctx, s.Client, spec.ServiceSpec{
		ID: "chat", Team: "serving", Priority: 90, MinReplicas: 1, MaxReplicas: 2,
		Target: spec.ScalingTarget{QPS: 10}, Placement: spec.PlacementOnDemand, ModelLoad: spec.Duration(time.Second),
	})
	if err != nil {
		t.Fatal(err)
	}
	yielded := waitRun("low", "its yield to the service", func(st training.Status) bool {
		return st.Admission != nil && st.Admission.Yields == 1 && st.State == workflows.StateQueued
	})
	y := yielded.Admission.LastYield
	if !strings.HasPrefix(y.For, "chat/") || y.CheckpointStep <= 0 || yielded.Instance != nil {
		t.Errorf("yield %+v holding %v; want it for a chat replica, at a checkpoint, holding nothing", y, yielded.Instance)
	}
	if st := waitService(t, wctx, s, "chat", func(st inference.Status) bool { return st.Ready == 1 }); st.Replicas[0].Layer != "base" {
		t.Errorf("chat's replica is on %s; want the base machine it preempted", st.Replicas[0].Layer)
	}

	// Two more runs queue behind everyone. Raising one reorders the queue
	// at once; pausing the other holds it.
	q1, q2 := submit("q1", 5, 4*time.Second), submit("q2", 5, 4*time.Second)
	waitPool(t, wctx, s, "q1 and q2 queued", func(p capacitypool.Status) bool { return len(p.Waiting) == 3 })
	if _, err := jobs.SetPriority(ctx, s.Client, "q2", 20); err != nil {
		t.Fatal(err)
	}
	if err := jobs.Pause(ctx, s.Client, "q1"); err != nil {
		t.Fatal(err)
	}
	// q2 goes ahead of low and q1, and q1 waits held. On a loaded machine
	// mid may already have finished and its instance gone to the first
	// in the queue: q2, then, is admitted rather than first.
	p := waitPool(t, wctx, s, "q2 ahead and q1 held", func(p capacitypool.Status) bool {
		i1, i2 := -1, -1
		for i, w := range p.Waiting {
			switch w.ID {
			case "q1":
				i1 = i
			case "q2":
				i2 = i
			}
		}
		return i1 >= 0 && p.Waiting[i1].Paused && i1 == len(p.Waiting)-1 && (i2 == 0 || i2 < 0 && len(p.Waiting) < 3)
	})
	var order []string
	for _, w := range p.Waiting {
		order = append(order, fmt.Sprintf("%s (%.1f, paused %v)", w.ID, w.EffectivePriority, w.Paused))
	}
	t.Logf("queue after set-priority and pause: %s", strings.Join(order, ", "))
	for _, run := range []client.WorkflowRun{q1, q2} {
		if err := s.Client.CancelWorkflow(ctx, run.GetID(), ""); err != nil {
			t.Fatal(err)
		}
	}

	// mid completes; burst frees; q2 is gone, so low takes it and resumes
	// from the checkpoint it yielded at.
	if err := mid.Get(wctx, nil); err != nil {
		t.Fatalf("mid: %v", err)
	}
	resumed := waitRun("low", "resuming on burst", func(st training.Status) bool {
		return st.Admission.Layer == "burst" && st.LastRecovery != nil && !st.LastRecovery.ResumedAt.IsZero()
	})
	if got := resumed.LastRecovery.ResumedFromStep; got < y.CheckpointStep {
		t.Errorf("low resumed from step %d, before the checkpoint %d it yielded at", got, y.CheckpointStep)
	}

	// The service goes: its base machine frees and low moves onto it, so
	// the burst instance is given back first.
	if err := s.Client.CancelWorkflow(ctx, chat.GetID(), ""); err != nil {
		t.Fatal(err)
	}
	moved := waitRun("low", "its move to base", func(st training.Status) bool {
		return st.Admission.Yields == 2 && st.Admission.Layer == "base"
	})
	if !strings.Contains(moved.Admission.LastYield.Reason, "base") {
		t.Errorf("second yield %q; want the move to base", moved.Admission.LastYield.Reason)
	}
	var final training.Status
	if err := low.Get(wctx, &final); err != nil {
		t.Fatal(err)
	}
	if final.State != workflows.StateCompleted || final.Step != final.TotalSteps || final.ModelDigest == "" {
		t.Errorf("low ended %s at %d/%d (digest %q)", final.State, final.Step, final.TotalSteps, final.ModelDigest)
	}
	end := waitPool(t, wctx, s, "everything given back", func(p capacitypool.Status) bool { return len(p.Running) == 0 && len(p.Waiting) == 0 })
	if end.Preemptions != 1 || end.Moves != 1 || end.Generation == 0 {
		t.Errorf("pool counted %d preemptions, %d moves, generation %d; want 1, 1 and at least one continue-as-new", end.Preemptions, end.Moves, end.Generation)
	}
	recordHistory(t, s.Client, "low", "training-run-pool-yield")
	recordHistory(t, s.Client, "chat", "inference-service")
	recordHistory(t, s.Client, workflows.PoolWorkflowID, "capacity-pool")
	for _, c := range []interface {
		List(context.Context, map[string]string) ([]capacity.Instance, error)
	}{s.Cloud, s.Base} {
		if left, _ := c.List(ctx, nil); len(left) != 0 {
			t.Errorf("instances still running: %v", left)
		}
	}
}

func waitPool(t *testing.T, ctx context.Context, s *controlplane.Stack, what string, cond func(capacitypool.Status) bool) capacitypool.Status {
	t.Helper()
	for {
		p, err := jobs.PoolStatus(ctx, s.Client)
		if err == nil && cond(p) {
			return p
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pool: waiting for %s: %v (last %+v)", what, ctx.Err(), p)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func waitService(t *testing.T, ctx context.Context, s *controlplane.Stack, id string, cond func(inference.Status) bool) inference.Status {
	t.Helper()
	for {
		st, err := jobs.ServiceStatus(ctx, s.Client, id)
		if err == nil && cond(st) {
			return st
		}
		select {
		case <-ctx.Done():
			t.Fatalf("service %s: %v (last %+v)", id, ctx.Err(), st)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// The drill passes on a stack with a pools file too, where its run is
// granted a base machine: a base machine drained with notice is a
// preemption like the market's.
func TestDrillOnABaseMachine(t *testing.T) {
	parallel(t)
	s := startStack(t, func(c *controlplane.Config) {
		c.Provider, c.Pools = controlplane.ProviderLocal, testPools()
	})
	rep, err := jobs.Drill(context.Background(), s.Client, jobs.DrillOptions{
		Work: 4 * time.Second, Interval: time.Second, NoticeGrace: 30 * time.Second, Timeout: 3 * time.Minute, Progress: testWriter{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Passed || !strings.HasPrefix(rep.InterruptedInstance, "dc-") {
		t.Fatalf("drill on %s: passed %v (%s); want it passed on the base machine", rep.InterruptedInstance, rep.Passed, rep.Reason)
	}
}
