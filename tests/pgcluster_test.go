package tests

import (
	"context"
	"encoding/json"
	"maps"
	"math"
	"syscall"
	"testing"
	"time"

	"refuel/workflows/training"
	"refuel/workflows/workload"

	"go.temporal.io/sdk/client"

	"refuel/activities"
	"refuel/jobs"
	"refuel/pkg/cost"
	"refuel/pkg/spec"
	"refuel/pkg/trainer"
	"refuel/workflows"
)

// pgOutage is how long PostgreSQL stays stopped, and the Temporal server
// killed, in TestClusterFaultsSpareHealthyAttempts: long next to the
// agent's heartbeats (every 20 s), shorter than the heartbeat timeout.
const pgOutage = 30 * time.Second

// TestClusterFaultsSpareHealthyAttempts runs refuel as it is deployed:
// the Temporal server as its own process on PostgreSQL, two control-plane
// workers (bin/worker, AWS provider) and a cloud (`worker ec2-sim`) whose
// stock never moves, so every instance stays healthy. While four runs
// train, the control plane fails around them, one fault at a time: a
// worker SIGTERMed while its Acquire is on the wire, PostgreSQL stopped
// for 30 s, the Temporal server SIGKILLed and started 30 s later, a
// worker SIGKILLed. None of that is the instances' doing, so every run
// must complete on its first attempt with no restart of any cause, no
// preemption, one instance each and nothing left running, with a ledger
// whose breakdowns add up to its cost.
func TestClusterFaultsSpareHealthyAttempts(t *testing.T) {
	parallelFirst(t)
	worker, _ := refuelBinaries(t)
	pg := startPostgres(t)
	began := time.Now()
	at := func() float64 { return time.Since(began).Seconds() }
	server := startTemporalServer(t, worker, pg.URL())
	t.Logf("%.1fs: temporal server on PostgreSQL serves %s", at(), server.frontend)

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	c, err := client.Dial(client.Options{HostPort: server.frontend, Logger: quietSDKLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	cloudAddr, cloudDir := freeAddr(t), t.TempDir()
	cloudURL := "http://" + cloudAddr
	cloud := startProcess(t, "ec2-sim", cleanEnv(), worker, "ec2-sim", "--listen", cloudAddr,
		"--traces", market(t, map[string][]int{"us-west-2a": {8}, "us-west-2b": {8}}),
		"--speed", "0", "--notice", "4s", "--temporal-address", server.frontend,
		"--data-dir", cloudDir, "--demo-step-time", demoStepTime.String(), "--report", "0", "--log-level", "warn")
	cloud.waitReady(t, cloudURL+"/sim/market", time.Minute)
	startWorker := func(name, endpoint string) *process {
		return startAWSWorker(t, name, worker, server.frontend, endpoint)
	}
	gate, err := newEC2Gate(cloudURL)
	if err != nil {
		t.Fatal(err)
	}
	gated := httptestServer(t, gate)

	// A worker SIGTERMed while its Acquire is on the wire: worker A alone
	// takes the runs' first Acquires, which its gate holds until worker B
	// has started and A has been told to stop.
	a := startWorker("worker-a", gated)
	gate.close()
	store := "file://" + t.TempDir()
	ids := []string{"cluster-1", "cluster-2", "cluster-3", "cluster-4"}
	for _, id := range ids {
		js := quickJob(id, spec.TierFlexible)
		js.Work, js.Checkpoint.URL, js.Checkpoint.Interval = spec.Duration(120*time.Second), store, "2s"
		if _, err := jobs.Submit(ctx, c, js); err != nil {
			t.Fatal(err)
		}
	}
	if err := waitUntil(time.Minute, func() bool { return gate.heldNow("CreateFleet") >= 1 }); err != nil {
		t.Fatal("worker A never sent an Acquire's CreateFleet")
	}
	b := startWorker("worker-b", cloudURL)
	held := gate.heldNow("CreateFleet")
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	gate.open()
	<-a.exited
	t.Logf("%.1fs: worker A SIGTERMed with %d CreateFleet on the wire; it exited (%v)", at(), held, a.err)
	a = startWorker("worker-a-restarted", cloudURL)

	for _, id := range ids {
		if _, err := jobs.WaitFor(ctx, c, id, func(st training.Status) bool {
			return st.State == workflows.StateRunning && st.LastCheckpoint != nil && st.Instance != nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%.1fs: four runs train", at())
	for _, id := range ids {
		if tries := firstAcquireTries(ctx, t, c, id); tries != 1 {
			t.Errorf("%s: its first Acquire took %d tries; want the SIGTERMed worker to finish it within its stop timeout", id, tries)
		}
	}

	logHeartbeats(ctx, t, c, ids)
	pg.stop()
	t.Logf("%.1fs: PostgreSQL stopped", at())
	time.Sleep(pgOutage)
	pg.start()
	t.Logf("%.1fs: PostgreSQL started again", at())
	awaitStatus(ctx, t, c, ids)
	t.Logf("%.1fs: every run answers its status query again", at())

	logHeartbeats(ctx, t, c, ids)
	server.kill()
	t.Logf("%.1fs: temporal server SIGKILLed", at())
	time.Sleep(pgOutage)
	server.start()
	t.Logf("%.1fs: temporal server started again", at())
	awaitStatus(ctx, t, c, ids)
	t.Logf("%.1fs: every run answers its status query again", at())

	b.kill()
	t.Logf("%.1fs: worker B SIGKILLed", at())

	for _, id := range ids {
		final, err := jobs.WaitFor(ctx, c, id, jobs.Ended)
		if err != nil {
			t.Errorf("%s: %v", id, err)
			continue
		}
		checkUndisturbed(t, final)
	}
	t.Logf("%.1fs: every run ended", at())

	_, running := launchedOnce(t, cloudURL)
	if len(running) != 0 {
		t.Errorf("instances left running after every run ended: %v", running)
	}
	if err := waitUntil(10*time.Second, func() bool { return len(agentProcesses(worker, cloudDir)) == 0 }); err != nil {
		t.Errorf("node agents left running after every run ended: %v", agentProcesses(worker, cloudDir))
	}
}

// firstAcquireTries is how many tries the run's first Acquire took to
// complete, from its history: 1 when the worker that began it finished it.
func firstAcquireTries(ctx context.Context, t *testing.T, c client.Client, id string) int32 {
	t.Helper()
	var scheduled int64
	for _, ev := range history(ctx, t, c, id) {
		switch {
		case scheduled == 0 && ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == activities.AcquireName:
			scheduled = ev.GetEventId()
		case scheduled != 0 && ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId() == scheduled:
			return ev.GetActivityTaskStartedEventAttributes().GetAttempt()
		}
	}
	t.Fatalf("%s: no Acquire started in its history", id)
	return 0
}

// awaitStatus waits until every run answers its status query: the
// cluster and a worker serve again.
func awaitStatus(ctx context.Context, t *testing.T, c client.Client, ids []string) {
	t.Helper()
	for _, id := range ids {
		if _, err := jobs.WaitFor(ctx, c, id, func(training.Status) bool { return true }); err != nil {
			t.Fatal(err)
		}
	}
}

// logHeartbeats logs how long ago the server last heard each run's
// training activity heartbeat, which says how much of the next outage's
// silence the heartbeat timeout has left to absorb.
func logHeartbeats(ctx context.Context, t *testing.T, c client.Client, ids []string) {
	t.Helper()
	for _, id := range ids {
		desc, err := c.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			t.Logf("%s: describe: %v", id, err)
			continue
		}
		for _, pa := range desc.GetPendingActivities() {
			if pa.GetActivityType().GetName() == activities.RunTrainingName {
				t.Logf("%s: training attempt %d last heartbeat %.1fs ago", id, pa.GetAttempt(), time.Since(pa.GetLastHeartbeatTime().AsTime()).Seconds())
			}
		}
	}
}

// checkUndisturbed checks that a run ended as if the control plane had
// never failed: completed with the uninterrupted model, on its first
// attempt and one instance, no restart or preemption counted, and a
// ledger whose breakdowns add up.
func checkUndisturbed(t *testing.T, st training.Status) {
	t.Helper()
	b, _ := json.Marshal(struct {
		Attempt     int
		Restarts    workload.Restarts
		Preemptions int
		Recoveries  int
		Failures    []workload.Failure
		Instances   int
	}{st.Attempt, st.Restarts, st.Preemptions, st.Recoveries, st.Failures, len(st.Ledger.Segments)})
	t.Logf("%s ended %s: %s", st.ID, st.State, b)
	want := trainer.Train(trainer.Config{Steps: st.TotalSteps, Seed: trainer.DefaultSeed}).Digest()
	if st.State != workflows.StateCompleted || st.Step != st.TotalSteps || st.ModelDigest != want {
		t.Errorf("%s ended %s at step %d/%d with model %s; want completed with the uninterrupted %s",
			st.ID, st.State, st.Step, st.TotalSteps, st.ModelDigest, want)
	}
	if st.Attempt != 1 || !maps.Equal(st.Restarts, (workload.Restarts{})) || st.Preemptions != 0 || st.Recoveries != 0 {
		t.Errorf("%s: attempt %d, restarts %+v, %d preemptions, %d recoveries; want its first attempt on a healthy instance, nothing counted",
			st.ID, st.Attempt, st.Restarts, st.Preemptions, st.Recoveries)
	}
	if n := len(st.Ledger.Segments); n != 1 {
		t.Errorf("%s: %d instances in its ledger; want 1", st.ID, n)
	}
	checkLedgerAddsUp(t, st)
}

// checkLedgerAddsUp checks that a run's cost is its ledger's: the
// segments' total, split by market and by pool into lines that sum to
// it, every segment closed, no lost work or recovery paid for.
func checkLedgerAddsUp(t *testing.T, st training.Status) {
	t.Helper()
	const cent = 0.01
	sum := func(lines map[string]cost.Line) (usd float64) {
		for _, l := range lines {
			usd += l.USD
		}
		return usd
	}
	var segments float64
	for _, s := range st.Ledger.Segments {
		if s.End.IsZero() {
			t.Errorf("%s: the ledger still pays for %s", st.ID, s.InstanceID)
			continue
		}
		segments += s.USD(s.End)
	}
	c := st.Cost
	for name, usd := range map[string]float64{"cost_usd": st.CostUSD, "segments": segments, "by market": sum(c.ByMarket), "by pool": sum(c.ByPool)} {
		if math.Abs(usd-c.TotalUSD) > cent {
			t.Errorf("%s: %s $%.4f; want the breakdown's total $%.4f", st.ID, name, usd, c.TotalUSD)
		}
	}
	if c.TotalUSD <= 0 || c.LostWorkUSD != 0 || c.RecoveryUSD != 0 {
		t.Errorf("%s: cost $%.4f with $%.4f of lost work and $%.4f of recovery; want a cost, nothing lost or recovered", st.ID, c.TotalUSD, c.LostWorkUSD, c.RecoveryUSD)
	}
}
