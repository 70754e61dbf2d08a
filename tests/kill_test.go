package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"refuel/workflows/registry"
	"refuel/workflows/training"
	"refuel/workflows/workload"

	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"

	"refuel/activities"
	"refuel/controlplane"
	"refuel/internal/telemetry"
	"refuel/jobs"
	"refuel/pkg/capacity"
	"refuel/pkg/cloud/sim"
	"refuel/pkg/devserver"
	"refuel/pkg/marketmem"
	"refuel/pkg/policy"
	"refuel/pkg/spec"
	"refuel/pkg/trainer"
	"refuel/workflows"
)

// The kill tests: SIGKILL, which no handler sees, of a run's node agent,
// of a control-plane worker in the middle of a spot storm, and of the
// whole embedded stack, each with runs in flight. Every run must end as
// an uninterrupted one would (the same model), with every fault on its
// record and nothing left running. Then the faults of a checkpoint store:
// one that cannot be opened, one whose every checkpoint is corrupt.

// killHeartbeat is how long a training attempt may be silent before its
// run counts the instance lost, in these tests (a minute by default): the
// agent heartbeats every third of it.
const killHeartbeat = 3 * time.Second

// killWorkflows are the workflows as the kill tests run them: a dead
// agent is found within killHeartbeat, and the restart after it waits
// half a second.
func killWorkflows() *registry.Workflows {
	wf := registry.New()
	wf.Run.HeartbeatTimeout = killHeartbeat
	wf.Run.RestartBackoff = 500 * time.Millisecond
	return wf
}

// TestAgentKilledMidTraining SIGKILLs a run's node agent while it trains
// (its trainer dies with it): the run finds the instance silent within
// the heartbeat timeout, records the loss with its class and the work
// lost, acquires a replacement, resumes from the latest checkpoint and
// ends with the model an uninterrupted run makes.
func TestAgentKilledMidTraining(t *testing.T) {
	parallel(t)
	s := startStack(t, func(c *controlplane.Config) { c.Workflows = killWorkflows() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	js := quickJob("kill-agent", spec.TierCritical)
	js.Work = spec.Duration(16 * time.Second) // room to kill its agent mid-training, on a busy machine
	run, err := jobs.Submit(ctx, s.Client, js)
	if err != nil {
		t.Fatal(err)
	}
	before, err := jobs.WaitFor(ctx, s.Client, js.ID, func(st training.Status) bool {
		return st.State == workflows.StateRunning && st.LastCheckpoint != nil && st.LastCheckpoint.Step > 0 && st.Instance != nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Mid-training: a second of steps past the checkpoint the run was
	// told of, and past one it was not (checkpoints are signalled at most
	// every 30s; the agent's heartbeats carry the latest).
	if err := waitUntil(time.Minute, func() bool { return jobs.LiveStep(ctx, s.Client, js.ID) >= before.LastCheckpoint.Step+50 }); err != nil {
		t.Fatal("the trainer made no progress past its first checkpoint")
	}
	self, _ := os.Executable()
	agent, trainerPID := agentOf(self, before.Instance.ID)
	if agent == 0 || trainerPID == 0 {
		t.Fatalf("instance %s: agent pid %d, trainer pid %d; want both running", before.Instance.ID, agent, trainerPID)
	}
	killed := time.Now()
	if err := syscall.Kill(agent, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := waitUntil(10*time.Second, func() bool { return !alive(trainerPID) }); err != nil {
		t.Errorf("the trainer (pid %d) outlived its agent by 10s", trainerPID)
	}

	var final training.Status
	if err := run.Get(ctx, &final); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(struct {
		Restarts       workload.Restarts
		Failures       []workload.Failure
		LastPreemption *workload.PreemptionInfo
		LastRecovery   *workload.RecoveryInfo
		LostWork       float64
	}{final.Restarts, final.Failures, final.LastPreemption, final.LastRecovery, final.LostWorkSecs})
	t.Logf("after the agent's kill: %s", b)
	if final.State != workflows.StateCompleted || final.Step != final.TotalSteps {
		t.Fatalf("run ended %s at step %d/%d; want completed", final.State, final.Step, final.TotalSteps)
	}
	if want := (workload.Restarts{capacity.InstanceLost: 1}); !maps.Equal(final.Restarts, want) {
		t.Errorf("restarts %+v; want %+v", final.Restarts, want)
	}
	if !slices.ContainsFunc(final.Failures, func(f workload.Failure) bool { return f.Class == "instance-lost" }) {
		t.Errorf("failures %+v; want one of class instance-lost", final.Failures)
	}
	if final.LostWorkSecs <= 0 {
		t.Errorf("lost work %.2fs; want the steps since the last checkpoint counted", final.LostWorkSecs)
	}
	p, r := final.LastPreemption, final.LastRecovery
	if p == nil || p.WithNotice || p.InstanceID != before.Instance.ID || r == nil || r.InstanceID == before.Instance.ID {
		t.Fatalf("last preemption %+v, recovery %+v; want %s lost without notice and a replacement", p, r, before.Instance.ID)
	}
	if p.CheckpointStep <= before.LastCheckpoint.Step || p.AtStep <= p.CheckpointStep {
		t.Errorf("lost at step %d with checkpoint %d; want the agent's last report: past the checkpoint after %d", p.AtStep, p.CheckpointStep, before.LastCheckpoint.Step)
	}
	if r.ResumedFromStep < p.CheckpointStep {
		t.Errorf("resumed from step %d, before the checkpoint at %d the run had before the kill", r.ResumedFromStep, p.CheckpointStep)
	}
	found := p.Time.Sub(killed)
	t.Logf("the loss was found %.1fs after the kill (heartbeat timeout %s); training resumed %.1fs after it",
		found.Seconds(), killHeartbeat, r.ResumedAt.Sub(killed).Seconds())
	if found > killHeartbeat+10*time.Second {
		t.Errorf("the loss was found %s after the kill; want within the heartbeat timeout %s", found, killHeartbeat)
	}
	if want := trainer.Train(trainer.Config{Steps: final.TotalSteps, Seed: trainer.DefaultSeed}).Digest(); final.ModelDigest != want {
		t.Errorf("final model %s; want the uninterrupted %s", final.ModelDigest, want)
	}
	if left, _ := s.Cloud.List(ctx, nil); len(left) != 0 {
		t.Errorf("instances left running: %v", left)
	}
	recordHistory(t, s.Client, js.ID, "training-run-agent-killed")
}

// The test binary plays the whole embedded stack too, as a process of its
// own a test can SIGKILL: `stack DATA_DIR FRONTEND METRICS` runs the
// control plane bin/worker runs (embedded server on DATA_DIR's SQLite
// database, the local cloud, the janitor), with killWorkflows, until
// SIGTERM.
func init() {
	if len(os.Args) == 5 && os.Args[1] == "stack" {
		os.Exit(stackMain(os.Args[2], os.Args[3], os.Args[4]))
	}
}

func stackMain(dataDir, frontend, metrics string) int {
	log, err := telemetry.NewLogger("warn", false)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	s, err := controlplane.Start(startCtx, controlplane.Config{
		DataDir: dataDir, FrontendAddr: frontend, UIAddr: "-", MetricsAddr: metrics,
		DemoStepTime: demoStepTime, Provider: controlplane.ProviderLocal, Workflows: killWorkflows(), Logger: log,
	})
	if err != nil {
		log.Error("cannot start")
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	<-ctx.Done()
	s.Stop()
	return 0
}

// TestEmbeddedStackKilledWithRunsInFlight SIGKILLs a whole embedded stack
// (server, worker, local cloud) while two runs train; the node agents die
// with it. Restarted on the same data dir, the stack finds the runs where
// the database had them; each counts its instance lost once the heartbeat
// timeout passes, acquires a new one and resumes from its checkpoint, and
// completes with the uninterrupted model. The logs learned before the
// kill are still there, nothing is left running.
func TestEmbeddedStackKilledWithRunsInFlight(t *testing.T) {
	parallelFirst(t)
	self, _ := os.Executable()
	data := filepath.Join(t.TempDir(), "data")
	frontend, metrics := freeAddr(t), freeAddr(t)
	start := func(name string) *process {
		p := startProcess(t, name, cleanEnv(), self, "stack", data, frontend, metrics)
		p.waitReady(t, "http://"+metrics+"/readyz", time.Minute)
		return p
	}
	first := start("stack")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.Dial(client.Options{HostPort: frontend, Logger: quietSDKLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// A run that ends before the kill teaches the pool: its lessons are on
	// disk when the stack dies.
	teacher := quickJob("crash-teacher", spec.TierFlexible)
	if _, err := jobs.Submit(ctx, c, teacher); err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.WaitFor(ctx, c, teacher.ID, func(st training.Status) bool { return st.State == workflows.StateCompleted }); err != nil {
		t.Fatal(err)
	}
	ids := []string{"crash-a", "crash-b"}
	before := map[string]training.Status{}
	for _, id := range ids {
		js := quickJob(id, spec.TierFlexible)
		js.Work = spec.Duration(20 * time.Second) // both still training when the stack is killed, on a busy machine
		if _, err := jobs.Submit(ctx, c, js); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		st, err := jobs.WaitFor(ctx, c, id, func(st training.Status) bool {
			return st.State == workflows.StateRunning && st.LastCheckpoint != nil && st.LastCheckpoint.Step > 0
		})
		if err != nil {
			t.Fatal(err)
		}
		before[id] = st
	}
	learned, seen := readCheckpointLogs(t, data), readStockLogs(t, data)
	if len(learned) == 0 || len(seen) == 0 {
		t.Fatalf("checkpoint logs %v and stock logs %v on disk after a run completed; want both", learned, seen)
	}

	first.kill()
	killed := time.Now()
	if err := waitUntil(10*time.Second, func() bool { return len(agentProcesses(self, data)) == 0 }); err != nil {
		t.Errorf("node agents outlived the stack's SIGKILL: %v", agentProcesses(self, data))
	}
	second := start("stack-restarted")
	t.Logf("restarted %.1fs after the kill", time.Since(killed).Seconds())

	for _, id := range ids {
		var final training.Status
		if err := c.GetWorkflow(ctx, id, "").Get(ctx, &final); err != nil {
			t.Fatalf("%s after the restart: %v", id, err)
		}
		was := before[id]
		if final.State != workflows.StateCompleted || final.Restarts[capacity.InstanceLost] != 1 || final.Recoveries != 1 || final.LostWorkSecs <= 0 {
			t.Errorf("%s ended %s with restarts %+v, %d recoveries, %.1fs of work lost; want completed after one instance lost, its work counted",
				id, final.State, final.Restarts, final.Recoveries, final.LostWorkSecs)
		}
		if !slices.ContainsFunc(final.Failures, func(f workload.Failure) bool { return f.Class == "instance-lost" }) {
			t.Errorf("%s: failures %+v; want one of class instance-lost", id, final.Failures)
		}
		if r := final.LastRecovery; r == nil || r.InstanceID == was.Instance.ID || r.ResumedFromStep < was.LastCheckpoint.Step {
			t.Errorf("%s: last recovery %+v; want a new instance resuming from step %d or later", id, r, was.LastCheckpoint.Step)
		} else {
			t.Logf("%s resumed from step %d on %s, %.1fs after the kill", id, r.ResumedFromStep, r.InstanceID, r.ResumedAt.Sub(killed).Seconds())
		}
		if want := trainer.Train(trainer.Config{Steps: final.TotalSteps, Seed: trainer.DefaultSeed}).Digest(); final.ModelDigest != want {
			t.Errorf("%s: final model %s; want the uninterrupted %s", id, final.ModelDigest, want)
		}
	}
	if st, err := jobs.Status(ctx, c, teacher.ID); err != nil || st.State != workflows.StateCompleted {
		t.Errorf("%s after the restart: %s, %v; want the completed run the database had", teacher.ID, st.State, err)
	}
	after := readCheckpointLogs(t, data)
	for pool, l := range learned {
		if a := after[pool]; a.Writes < l.Writes || a.Held < l.Held || a.Preemptions < l.Preemptions {
			t.Errorf("pool %s learned %+v before the kill but %+v after the restart", pool, l, a)
		}
	}
	stock := readStockLogs(t, data)
	for offering := range seen {
		if _, ok := stock[offering]; !ok {
			t.Errorf("the stock log of %s was lost in the restart", offering)
		}
	}
	second.stop(t)
	if left := agentProcesses(self, data); len(left) != 0 {
		t.Errorf("node agents left running: %v", left)
	}
}

func readCheckpointLogs(t *testing.T, dataDir string) map[string]policy.CheckpointLog {
	t.Helper()
	return readMarketMemory(t, dataDir).Pools
}

// readMarketMemory is the market memory a stack on dataDir keeps there
// by default, as a new worker of its deployment would read it.
func readMarketMemory(t *testing.T, dataDir string) marketmem.View {
	t.Helper()
	m, err := marketmem.Open(context.Background(), "file://"+filepath.Join(dataDir, "market-memory"), activities.DefaultDeployment, marketmem.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	v, err := m.View(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestWorkerKilledMidAcquireAndMidRelease runs two control-plane workers
// (bin/worker on the AWS provider) on one Temporal cluster and one shared
// cloud (`worker ec2-sim` over traces of two zones), and SIGKILLs one in
// the middle of a spot storm while it is both releasing a preempted
// instance and acquiring a replacement. Worker B restarts as the storm
// begins (a rolling deploy), so worker A is the one serving the storm's
// calls, which a gate holds on their way to the cloud until B is back and
// A is dead; then they go on, as calls on the wire do. B retries A's
// activities once their heartbeats stop, and every run completes on B:
// the retried Acquire gets the instance A's call launched (one instance
// per run identity and attempt, ever), the retried Release finds its
// instance gone, and nothing is left running.
func TestWorkerKilledMidAcquireAndMidRelease(t *testing.T) {
	parallelFirst(t)
	worker, _ := refuelBinaries(t)
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv := startDevserver(ctx, t, devserver.Options{FrontendAddr: "127.0.0.1:0", SearchAttributes: workflows.SearchAttributeTypes})
	c, err := client.Dial(client.Options{HostPort: srv.FrontendAddr(), Logger: quietSDKLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// Two runs fit in each zone; at tick 1 zone a's stock is gone and
	// zone b has room for them.
	cloudAddr, cloudDir := freeAddr(t), t.TempDir()
	cloudURL := "http://" + cloudAddr
	cloud := startProcess(t, "ec2-sim", cleanEnv(), worker, "ec2-sim", "--listen", cloudAddr,
		"--traces", market(t, map[string][]int{"us-west-2a": {2, 0}, "us-west-2b": {2, 4}}),
		"--speed", "0", "--notice", "4s", "--temporal-address", srv.FrontendAddr(),
		"--data-dir", cloudDir, "--demo-step-time", demoStepTime.String(), "--report", "0", "--log-level", "warn")
	cloud.waitReady(t, cloudURL+"/sim/market", time.Minute)
	gate, err := newEC2Gate(cloudURL)
	if err != nil {
		t.Fatal(err)
	}
	gated := httptestServer(t, gate)
	startWorker := func(name, endpoint string) *process {
		return startAWSWorker(t, name, worker, srv.FrontendAddr(), endpoint)
	}
	a := startWorker("worker-a", gated)
	b := startWorker("worker-b", cloudURL)

	store := "file://" + t.TempDir()
	ids := []string{"storm-1", "storm-2", "storm-3", "storm-4"}
	for _, id := range ids {
		js := quickJob(id, spec.TierFlexible)
		js.Work, js.Checkpoint.URL, js.Checkpoint.Interval = spec.Duration(16*time.Second), store, "1s"
		if _, err := jobs.Submit(ctx, c, js); err != nil {
			t.Fatal(err)
		}
	}
	inZoneA := 0
	for _, id := range ids {
		st, err := jobs.WaitFor(ctx, c, id, func(st training.Status) bool {
			return st.State == workflows.StateRunning && st.LastCheckpoint != nil && st.Instance != nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if st.Instance.Zone == "us-west-2a" {
			inZoneA++
		}
	}
	if inZoneA != 2 {
		t.Fatalf("%d runs in us-west-2a; want 2 of the 4, as its stock allows", inZoneA)
	}

	t.Logf("%.1fs: four runs train, two in each zone", time.Since(began).Seconds())

	// The storm, served by A alone: B stops for a restart, A's calls are
	// held, and zone a's stock drops.
	b.stop(t)
	gate.close()
	postSim(t, cloudURL+"/sim/advance")
	if err := waitUntil(time.Minute, func() bool {
		return gate.heldNow("TerminateInstances") == 1 && gate.heldNow("CreateFleet") >= 1
	}); err != nil {
		t.Fatalf("worker A never held both a release and an acquisition of the storm: %d and %d",
			gate.heldNow("TerminateInstances"), gate.heldNow("CreateFleet"))
	}
	onA := startedOn(ctx, t, c, ids, a.identity())
	t.Logf("%.1fs: worker A is mid-call in %v", time.Since(began).Seconds(), onA)
	// A run that lost its instance with notice gives it back in the
	// activity that acquires the replacement (Replace); one lost silently
	// releases, then acquires.
	capacityCall := func(name string) bool {
		return name == activities.ReplaceName || name == activities.AcquireName || name == activities.ReleaseName
	}
	if len(onA) < 2 || !slices.ContainsFunc(onA, capacityCall) || slices.ContainsFunc(onA, func(n string) bool { return !capacityCall(n) }) {
		t.Fatalf("activities started on worker A: %v; want the storm's releases and acquisitions (Replace, or Release and Acquire)", onA)
	}
	b = startWorker("worker-b-restarted", cloudURL)
	a.kill()
	killed := time.Now()
	gate.open()
	t.Logf("%.1fs: worker B is back, worker A killed", time.Since(began).Seconds())

	for _, id := range ids {
		var final training.Status
		if err := c.GetWorkflow(ctx, id, "").Get(ctx, &final); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if want := trainer.Train(trainer.Config{Steps: final.TotalSteps, Seed: trainer.DefaultSeed}).Digest(); final.State != workflows.StateCompleted || final.ModelDigest != want {
			t.Errorf("%s ended %s with model %s; want completed with the uninterrupted %s", id, final.State, final.ModelDigest, want)
		}
		if last := lastWorkflowTaskBy(ctx, t, c, id); last != b.identity() {
			t.Errorf("%s completed on %q; want worker B (%s)", id, last, b.identity())
		}
	}
	t.Logf("%.1fs: every run completed", time.Since(began).Seconds())
	for _, name := range slices.Compact(slices.Sorted(slices.Values(onA))) {
		retried := retriedAfterHeartbeat(ctx, t, c, ids, name, b.identity())
		if retried.IsZero() {
			t.Errorf("no %s was retried on worker B after worker A's heartbeats stopped", name)
			continue
		}
		t.Logf("%s retried on worker B %.1fs after worker A's death (heartbeat timeout %s)", name, retried.Sub(killed).Seconds(), activities.CapacityHeartbeatTimeout)
	}

	acquisitions, running := launchedOnce(t, cloudURL)
	if acquisitions < len(ids)+2 {
		t.Errorf("%d acquisitions launched instances; want the %d runs' first and the two replacements", acquisitions, len(ids))
	}
	t.Logf("%d acquisitions launched %d instances", acquisitions, len(simInstances(t, cloudURL)))
	if len(running) != 0 {
		t.Errorf("instances left running after every run completed: %v", running)
	}
	if err := waitUntil(10*time.Second, func() bool { return len(agentProcesses(worker, cloudDir)) == 0 }); err != nil {
		t.Errorf("node agents left running after every run completed: %v", agentProcesses(worker, cloudDir))
	}
}

// startedOn lists the activities the runs have started on the worker of
// identity and not finished.
func startedOn(ctx context.Context, t *testing.T, c client.Client, ids []string, identity string) []string {
	t.Helper()
	var out []string
	for _, id := range ids {
		desc, err := c.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, pa := range desc.GetPendingActivities() {
			if pa.GetState() == enums.PENDING_ACTIVITY_STATE_STARTED && pa.GetLastWorkerIdentity() == identity {
				out = append(out, pa.GetActivityType().GetName())
			}
		}
	}
	return out
}

// lastWorkflowTaskBy is the identity of the worker that completed the
// run's last workflow task.
func lastWorkflowTaskBy(ctx context.Context, t *testing.T, c client.Client, id string) string {
	t.Helper()
	last := ""
	for _, ev := range history(ctx, t, c, id) {
		if a := ev.GetWorkflowTaskCompletedEventAttributes(); a != nil {
			last = a.GetIdentity()
		}
	}
	return last
}

// retriedAfterHeartbeat is when an activity of the type was started again
// on the worker of identity after an attempt that stopped heartbeating;
// zero if none was.
func retriedAfterHeartbeat(ctx context.Context, t *testing.T, c client.Client, ids []string, activityType, identity string) time.Time {
	t.Helper()
	for _, id := range ids {
		types := map[int64]string{}
		for _, ev := range history(ctx, t, c, id) {
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
				types[ev.GetEventId()] = a.GetActivityType().GetName()
			}
			a := ev.GetActivityTaskStartedEventAttributes()
			if a == nil || types[a.GetScheduledEventId()] != activityType || a.GetAttempt() < 2 || a.GetIdentity() != identity {
				continue
			}
			if a.GetLastFailure().GetTimeoutFailureInfo().GetTimeoutType() == enums.TIMEOUT_TYPE_HEARTBEAT {
				return ev.GetEventTime().AsTime()
			}
		}
	}
	return time.Time{}
}

func history(ctx context.Context, t *testing.T, c client.Client, id string) []*historypb.HistoryEvent {
	t.Helper()
	var out []*historypb.HistoryEvent
	iter := c.GetWorkflowHistory(ctx, id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

// simInstances are every instance the sim launched, terminated ones
// included, as its /sim/market control lists them.
func simInstances(t *testing.T, cloudURL string) []sim.Status {
	t.Helper()
	code, body := get(cloudURL + "/sim/market")
	var m struct{ Instances []sim.Status }
	if err := json.Unmarshal([]byte(body), &m); code != http.StatusOK || err != nil {
		t.Fatalf("GET /sim/market: %d %v %s", code, err, body)
	}
	return m.Instances
}

func postSim(t *testing.T, url string) {
	t.Helper()
	resp, err := http.Post(url, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %s", url, resp.Status)
	}
}

func httptestServer(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func quietSDKLogger() sdklog.Logger {
	return sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
}

func readStockLogs(t *testing.T, dataDir string) map[string]marketmem.StockLog {
	t.Helper()
	return readMarketMemory(t, dataDir).Stock
}

// TestCheckpointStoreFaults: the store a run's checkpoints are in fails it.
//
// Every checkpoint corrupt: a run is paused once it has checkpoints,
// every one of them is spoilt in the store (a bucket's bit rot, or a
// trainer that wrote garbage) and the run resumed. Its new attempt finds
// none that verifies: the run fails as a checkpoint failure rather than
// train again from step 0 in silence, unless its spec says
// checkpoint.restart_from_scratch, when it trains again from step 0 to
// the uninterrupted model.
//
// A store the agent cannot open: every attempt's agent fails, each a
// restart of cause agent, until max_restarts; the run then fails saying
// so, naming the store, with every instance given back.
func TestCheckpointStoreFaults(t *testing.T) {
	t.Parallel()
	s := startStack(t, func(c *controlplane.Config) { c.Workflows = killWorkflows() })
	t.Run("a store the agent cannot open", func(t *testing.T) {
		parallel(t)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		js := quickJob("unreachable-store", spec.TierFlexible)
		one := 1
		js.MaxRestarts, js.Checkpoint.URL = &one, "file:///proc/refuel-no-such-store"
		run, err := jobs.Submit(ctx, s.Client, js)
		if err != nil {
			t.Fatal(err)
		}
		err = run.Get(ctx, nil)
		t.Logf("the run failed: %v", err)
		var app *temporal.ApplicationError
		if !errors.As(err, &app) || app.Type() != "AgentFailed" || !strings.Contains(err.Error(), "max_restarts 1") || !strings.Contains(err.Error(), "refuel-no-such-store") {
			t.Fatalf("run ended with %v; want AgentFailed naming max_restarts and the store", err)
		}
		st, _ := jobs.Status(ctx, s.Client, js.ID)
		if !maps.Equal(st.Restarts, (workload.Restarts{capacity.AgentFault: 2})) || len(st.Ledger.Segments) != 2 {
			t.Errorf("restarts %+v on %d instances; want 2 agent failures, one per instance", st.Restarts, len(st.Ledger.Segments))
		}
		if left, _ := s.Cloud.List(ctx, map[string]string{capacity.TagRun: js.ID}); len(left) != 0 {
			t.Errorf("instances left running: %v", left)
		}
	})
	for name, fromScratch := range map[string]bool{"every checkpoint corrupt fails the run": false, "every checkpoint corrupt, restart_from_scratch trains again": true} {
		t.Run(name, func(t *testing.T) {
			parallel(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			store := t.TempDir()
			js := quickJob("corrupt-"+strconv.FormatBool(fromScratch), spec.TierFlexible)
			js.Work, js.Checkpoint.URL, js.Checkpoint.RestartFromScratch = spec.Duration(16*time.Second), "file://"+store, fromScratch // room to pause it before it ends
			run, err := jobs.Submit(ctx, s.Client, js)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := jobs.WaitFor(ctx, s.Client, js.ID, func(st training.Status) bool { return st.LastCheckpoint != nil }); err != nil {
				t.Fatal(err)
			}
			if err := jobs.Pause(ctx, s.Client, js.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := jobs.WaitFor(ctx, s.Client, js.ID, func(st training.Status) bool { return st.State == workflows.StatePaused && st.Instance == nil }); err != nil {
				t.Fatal(err)
			}
			if n := spoilCheckpoints(t, filepath.Join(store, js.ID)); n == 0 {
				t.Fatal("no checkpoint data in the store to spoil")
			}
			if err := jobs.Resume(ctx, s.Client, js.ID); err != nil {
				t.Fatal(err)
			}
			var final training.Status
			err = run.Get(ctx, &final)
			st, _ := jobs.Status(ctx, s.Client, js.ID)
			if fromScratch {
				want := trainer.Train(trainer.Config{Steps: final.TotalSteps, Seed: trainer.DefaultSeed}).Digest()
				if err != nil || final.State != workflows.StateCompleted || final.ModelDigest != want {
					t.Fatalf("run ended %s (%v) with model %s; want completed from step 0 with %s", final.State, err, final.ModelDigest, want)
				}
				return
			}
			var app *temporal.ApplicationError
			if !errors.As(err, &app) || app.Type() != "checkpoint" || !strings.Contains(err.Error(), "restart_from_scratch") {
				t.Fatalf("run ended with %v (state %s); want a checkpoint failure saying restart_from_scratch", err, st.State)
			}
			t.Logf("the run failed: %v", err)
			if !slices.ContainsFunc(st.Failures, func(f workload.Failure) bool { return f.Class == "checkpoint" }) || st.Instance != nil {
				t.Errorf("status %s, failures %+v, instance %v; want a checkpoint failure and no instance held", st.State, st.Failures, st.Instance)
			}
			if left, _ := s.Cloud.List(ctx, map[string]string{capacity.TagRun: js.ID}); len(left) != 0 {
				t.Errorf("instances left running: %v", left)
			}
		})
	}
}

// spoilCheckpoints overwrites every data file of every checkpoint under
// dir (a job's prefix in a file:// store) and says how many it spoilt.
func spoilCheckpoints(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.Contains(path, string(filepath.Separator)+"data"+string(filepath.Separator)) {
			return err
		}
		n++
		return os.WriteFile(path, []byte("not the checkpoint it was"), 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
