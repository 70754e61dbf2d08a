package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"refuel/workflows/inference"
	"refuel/workflows/registry"
	"refuel/workflows/training"

	"refuel/controlplane"
	"refuel/jobs"
	"refuel/pkg/spec"
	"refuel/workflows"
)

// Status takes step and checkpoint from the agent's latest report, which
// the run itself is told seldom (here: its first checkpoint, then none
// until the attempt ends), and the interruption's report agrees with it
// and with itself: the checkpoint at the notice is the newest the agent
// had uploaded, and the run resumed from it or a newer one.
func TestStatusAndInterruptReadTheAgentsLatestReport(t *testing.T) {
	parallel(t)
	_, starter := refuelBinaries(t)
	s := startStack(t, func(c *controlplane.Config) {
		c.Workflows = registry.New()
		c.Workflows.Run.SignalEvery = time.Hour // checkpoints after the first are held back
	})
	ctx := context.Background()
	cli := func(args ...string) cliResult {
		t.Helper()
		return runCLI(t, t.TempDir(), starter, append(args, "--temporal-address", s.Address)...)
	}
	js := quickJob("told-late", spec.TierFlexible)
	js.Work = spec.Duration(40 * time.Second) // 2,000 steps
	if _, err := jobs.Submit(ctx, s.Client, js); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	first, err := jobs.WaitFor(wctx, s.Client, js.ID, func(st training.Status) bool {
		return st.State == workflows.StateRunning && st.LastCheckpoint != nil
	})
	if err != nil {
		t.Fatal(err)
	}

	var shown training.Status
	for {
		r := cli("status", js.ID, "--json")
		shown = training.Status{}
		if err := json.Unmarshal([]byte(r.stdout), &shown); err != nil || r.code != 0 {
			t.Fatalf("status --json: exit %d, %q (%v)\n%s", r.code, r.stdout, err, r.stderr)
		}
		if c := shown.LastCheckpoint; c != nil && c.Step > first.LastCheckpoint.Step {
			break
		}
		select {
		case <-wctx.Done():
			t.Fatalf("status never showed a checkpoint after step %d, the one the run was told", first.LastCheckpoint.Step)
		case <-time.After(200 * time.Millisecond):
		}
	}
	if shown.Step < shown.LastCheckpoint.Step {
		t.Errorf("status: step %d behind its checkpoint at %d", shown.Step, shown.LastCheckpoint.Step)
	}

	r := cli("interrupt", js.ID, "--grace", "5s", "--json")
	var rep jobs.InterruptReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 0 {
		t.Fatalf("interrupt --json: exit %d, %q (%v)\n%s", r.code, r.stdout, err, r.stderr)
	}
	t.Logf("interrupt report: %s", strings.TrimSpace(r.stdout))
	if !rep.Passed || rep.CheckpointStep < shown.LastCheckpoint.Step ||
		rep.ResumedFromStep < rep.CheckpointStep || rep.PreemptedAtStep < rep.ResumedFromStep ||
		rep.LostSteps != rep.PreemptedAtStep-rep.ResumedFromStep {
		t.Errorf("interrupt report %+v; want checkpoint (at least %d, as status showed) <= resumed <= preempted, lost the difference",
			rep, shown.LastCheckpoint.Step)
	}
	st, err := jobs.Status(ctx, s.Client, js.ID)
	if err != nil || st.LastPreemption == nil || st.LastPreemption.CheckpointStep < shown.LastCheckpoint.Step {
		t.Errorf("the run's last preemption %+v (%v); want it to count from the checkpoint status showed, %d, or a newer one",
			st.LastPreemption, err, shown.LastCheckpoint.Step)
	}
	if r := cli("cancel", js.ID); r.code != 0 {
		t.Errorf("cancel: exit %d, %q", r.code, r.stderr)
	}
}

// A stopped service reads as stopped: its load generator ends saying so
// (exit 0), wait says stopped, and service-status says since when, with
// no replicas wanted.
func TestStoppedServiceReadsAsStopped(t *testing.T) {
	parallel(t)
	_, starter := refuelBinaries(t)
	s := startStack(t, nil)
	ctx := context.Background()
	cli := func(args ...string) cliResult {
		t.Helper()
		return runCLI(t, t.TempDir(), starter, append(args, "--temporal-address", s.Address)...)
	}
	ss := spec.ServiceSpec{
		ID: "chat-stopped", Team: "serving", Priority: 90, MinReplicas: 1, MaxReplicas: 2,
		Target: spec.ScalingTarget{QPS: 10}, Placement: spec.PlacementOnDemand, ModelLoad: spec.Duration(time.Second),
	}
	if _, err := jobs.StartService(ctx, s.Client, ss); err != nil {
		t.Fatal(err)
	}
	load := exec.Command(starter, "metrics", ss.ID, "--qps", "5", "--every", "200ms", "--for", "10m", "--temporal-address", s.Address)
	load.Env = cleanEnv()
	var loadOut, loadErr bytes.Buffer
	load.Stdout, load.Stderr = &loadOut, &loadErr
	if err := load.Start(); err != nil {
		t.Fatal(err)
	}
	loaded := make(chan error, 1)
	go func() { loaded <- load.Wait() }()
	t.Cleanup(func() {
		_ = load.Process.Kill()
		<-loaded
	})
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	waitService(t, wctx, s, ss.ID, func(st inference.Status) bool { return st.Ready >= 1 && st.LastMetrics != nil })

	if r := cli("stop-service", ss.ID); r.code != 0 {
		t.Fatalf("stop-service: exit %d, %q", r.code, r.stderr)
	}
	var err error
	select {
	case err = <-loaded:
		loaded <- err // for the cleanup
	case <-wctx.Done():
		t.Fatalf("the load generator went on after its service stopped:\n%s%s", loadOut.String(), loadErr.String())
	}
	lines := strings.Split(strings.TrimSpace(loadOut.String()), "\n")
	if err != nil || !strings.HasPrefix(lines[len(lines)-1], "service "+ss.ID+" stopped after ") {
		t.Errorf("load: %v, last line %q, stderr %q; want exit 0 saying the service stopped", err, lines[len(lines)-1], loadErr.String())
	}
	if r := cli("wait", ss.ID); r.code != 0 || !strings.HasPrefix(r.stdout, ss.ID+" stopped") || strings.Contains(r.stdout, "cancelled") {
		t.Errorf("wait: exit %d, %q; want 0 and %s stopped", r.code, r.stdout, ss.ID)
	}
	st, err := jobs.ServiceStatus(ctx, s.Client, ss.ID)
	if err != nil || st.StoppedAt == nil || !st.StoppedAt.After(st.StartedAt) || st.Desired.Replicas != 0 {
		t.Fatalf("status of the stopped service: %+v (%v); want stopped_at after started_at, no replicas wanted", st, err)
	}
	r := cli("service-status", ss.ID)
	for _, want := range []string{"state      stopped since " + st.StoppedAt.Format(time.RFC3339), "desired    0 replicas, 0 warm (stopped)"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("service-status: exit %d\n%s\nwant %q", r.code, r.stdout, want)
		}
	}
}
