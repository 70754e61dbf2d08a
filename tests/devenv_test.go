package tests

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"refuel/workflows/inference"
	"refuel/workflows/training"

	"go.temporal.io/sdk/client"

	"refuel/controlplane"
	"refuel/jobs"
	"refuel/pkg/checkpoint"
	"refuel/pkg/devenv"
	"refuel/pkg/spec"
	"refuel/workflows"
)

// devSpec is an environment whose command serves its workspace over
// HTTP, as a developer's JupyterLab serves notebooks.
func devSpec(id string, idle time.Duration) spec.DevSpec {
	d := spec.Duration(idle)
	ds := spec.DevSpec{
		ID: id, Team: "research", Priority: 70, Tier: spec.TierCritical,
		Command:           []string{"sh", "-c", `exec python3 -m http.server "$REFUEL_PORT" --bind 127.0.0.1 --directory "$REFUEL_WORKSPACE"`},
		WorkspaceInterval: spec.Duration(time.Second), IdleTimeout: &d,
	}
	ds.Normalize()
	return ds
}

// startDev starts an environment and waits until its command serves.
func startDev(t *testing.T, ctx context.Context, s *controlplane.Stack, ds spec.DevSpec) devenv.Status {
	t.Helper()
	if _, err := jobs.StartDev(ctx, s.Client, ds, "test@refuel"); err != nil {
		t.Fatal(err)
	}
	return waitDev(t, ctx, s, ds.ID, "its command serving", serving)
}

func serving(st devenv.Status) bool {
	return st.State == devenv.StateRunning && st.Serving && st.Endpoint != ""
}

func waitDev(t *testing.T, ctx context.Context, s *controlplane.Stack, id, what string, cond func(devenv.Status) bool) devenv.Status {
	t.Helper()
	for {
		st, err := jobs.DevStatus(ctx, s.Client, id)
		if err == nil && cond(st) {
			return st
		}
		select {
		case <-ctx.Done():
			t.Fatalf("environment %s: waiting for %s: %v (last: %s %q, instance %+v, failures %+v)", id, what, ctx.Err(), st.State, st.Reason, st.Instance, st.Failures)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// fetch gets path from the environment's endpoint.
func fetch(t *testing.T, st devenv.Status, path string) string {
	t.Helper()
	resp, err := http.Get("http://" + st.Endpoint + path)
	if err != nil {
		t.Fatalf("the endpoint %s does not answer: %v", st.Endpoint, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s%s: %s %s", st.Endpoint, path, resp.Status, b)
	}
	return string(b)
}

// writeNote writes a file into the environment's workspace, on the
// instance (the local cloud's instances are directories of this machine).
func writeNote(t *testing.T, st devenv.Status, text string) {
	t.Helper()
	if st.Workspace.Path == "" {
		t.Fatal("the status names no workspace")
	}
	if err := os.WriteFile(filepath.Join(st.Workspace.Path, "note.txt"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDevEnvironmentEndToEnd: an environment comes up and its endpoint
// serves its workspace; a second start of its id is refused; idle past
// its timeout it saves its workspace, gives its instance back and waits
// suspended; resumed, it acquires again and the file written before is
// there; deleted, its workflow completes and its workspace leaves the
// store.
func TestDevEnvironmentEndToEnd(t *testing.T) {
	parallel(t)
	s := startStack(t, func(c *controlplane.Config) { c.Provider = controlplane.ProviderLocal })
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ds := devSpec("notes", 20*time.Second)
	st := startDev(t, ctx, s, ds)
	if st.Who != "test@refuel" || st.Instance == nil || st.Workspace.StoreURL == "" {
		t.Errorf("status %+v; want who, the instance and the store named", st)
	}
	writeNote(t, st, "kept across moves")
	if got := fetch(t, st, "/note.txt"); got != "kept across moves" {
		t.Errorf("the endpoint serves %q; want the file just written", got)
	}
	var dup *jobs.DuplicateError
	if _, err := jobs.StartDev(ctx, s.Client, ds, "someone@else"); !errors.As(err, &dup) {
		t.Errorf("a second start of %s: %v; want it refused as a duplicate", ds.ID, err)
	}

	st = waitDev(t, ctx, s, ds.ID, "suspended when idle", func(st devenv.Status) bool { return st.State == devenv.StateSuspended })
	if st.Instance != nil || st.Workspace.LastSave == nil || !strings.Contains(st.Reason, "idle") {
		t.Errorf("suspended with instance %+v, last save %+v, reason %q; want nothing held, the workspace saved, idleness named", st.Instance, st.Workspace.LastSave, st.Reason)
	}

	if err := jobs.ResumeDev(ctx, s.Client, ds.ID); err != nil {
		t.Fatal(err)
	}
	st = waitDev(t, ctx, s, ds.ID, "serving again after resume", serving)
	if got := fetch(t, st, "/note.txt"); got != "kept across moves" {
		t.Errorf("after resume the endpoint serves %q; want the file written before", got)
	}

	rep, err := jobs.Costs(ctx, s.Client, "", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var line *jobs.JobCost
	for i := range rep.Jobs {
		if rep.Jobs[i].ID == ds.ID {
			line = &rep.Jobs[i]
		}
	}
	if line == nil || line.Kind != "development" || line.Team != "research" || line.CostUSD <= 0 || len(rep.Rollup) == 0 || rep.Rollup[0].Team != "research" {
		t.Errorf("starter cost: %+v (rollup %+v); want the environment's cost, kind development, in team research's", line, rep.Rollup)
	}

	if _, err := jobs.DeleteDev(ctx, s.Client, ds.ID, false, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	final := waitDev(t, ctx, s, ds.ID, "deleted", func(st devenv.Status) bool { return st.State == devenv.StateDeleted })
	store, err := checkpoint.Open(ctx, final.Workspace.StoreURL, ds.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := store.Latest(ctx); err == nil {
		t.Errorf("deleted without --keep-workspace, %s still holds a save of %s", final.Workspace.StoreURL, ds.ID)
	}
	recordHistory(t, s.Client, ds.ID, "dev-environment")
}

// TestDevEnvironmentMovedByAService: an environment on the base machine
// is moved, not killed, when a service of higher priority needs it and
// burst has no room: it saves its workspace, says why it moves, and
// resumes on burst capacity, once there is some, with its files.
func TestDevEnvironmentMovedByAService(t *testing.T) {
	parallel(t)
	s := startStack(t, func(c *controlplane.Config) {
		c.Provider, c.Pools = controlplane.ProviderLocal, testPools()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ds := devSpec("moved", 0)
	st := startDev(t, ctx, s, ds)
	if st.Instance == nil || st.Instance.Layer != "base" {
		t.Fatalf("the environment runs on %+v; want the base machine", st.Instance)
	}
	writeNote(t, st, "moved with me")
	// A run of higher priority holds the burst pool's one instance for a
	// while: the service, finding no room, takes the base machine from
	// the lowest priority, the environment, which waits for burst.
	js := quickJob("train", spec.TierCritical)
	js.Priority, js.Work = 80, spec.Duration(20*time.Second)
	if _, err := jobs.Submit(ctx, s.Client, js); err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.WaitFor(ctx, s.Client, js.ID, func(st training.Status) bool { return st.State == workflows.StateRunning }); err != nil {
		t.Fatal(err)
	}

	if _, err := jobs.StartService(ctx, s.Client, spec.ServiceSpec{
		ID: "chat", Team: "serving", Priority: 90, MinReplicas: 1, MaxReplicas: 1,
		Target: spec.ScalingTarget{QPS: 10}, Placement: spec.PlacementOnDemand, ModelLoad: spec.Duration(time.Second),
	}); err != nil {
		t.Fatal(err)
	}
	moving := waitDev(t, ctx, s, ds.ID, "moving", func(st devenv.Status) bool { return st.State == devenv.StateMoving })
	if !strings.Contains(moving.Reason, "chat") {
		t.Errorf("moving because %q; want the service it gives way to named", moving.Reason)
	}
	st = waitDev(t, ctx, s, ds.ID, "serving on burst", func(st devenv.Status) bool {
		return serving(st) && st.Instance != nil && st.Instance.Layer == "burst"
	})
	if got := fetch(t, st, "/note.txt"); got != "moved with me" {
		t.Errorf("after the move the endpoint serves %q; want the file written on base", got)
	}
	if st.Moves != 1 || st.Preemptions != 0 {
		t.Errorf("%d moves, %d preemptions; want one move that is no preemption", st.Moves, st.Preemptions)
	}
	if sst := waitService(t, ctx, s, "chat", func(st inference.Status) bool { return st.Ready == 1 }); sst.Replicas[0].Layer != "base" {
		t.Errorf("chat's replica is on %s; want the base machine the environment gave up", sst.Replicas[0].Layer)
	}
	if _, err := jobs.DeleteDev(ctx, s.Client, ds.ID, false, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
}

// TestFlexibleDevEnvironmentPreemptedOnSpot: a flexible environment on
// the simulated cloud's spot market is preempted with notice; it saves
// its workspace within the notice, is replaced as a run is, and serves
// its files again.
func TestFlexibleDevEnvironmentPreemptedOnSpot(t *testing.T) {
	parallel(t)
	s := startStack(t, func(c *controlplane.Config) {
		c.Provider = controlplane.ProviderSim
		c.Sim = controlplane.SimConfig{Notice: 20 * time.Second}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ds := devSpec("flex", 0)
	ds.Tier = spec.TierFlexible
	st := startDev(t, ctx, s, ds)
	if st.Instance == nil || st.Instance.Market != "spot" {
		t.Fatalf("a flexible environment runs on %+v; want spot first", st.Instance)
	}
	writeNote(t, st, "survives preemption")
	taken := st.Instance.ID
	if _, err := jobs.Interrupt(ctx, s.Client, taken, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	st = waitDev(t, ctx, s, ds.ID, "serving on a replacement", func(st devenv.Status) bool {
		return serving(st) && st.Instance != nil && st.Instance.ID != taken
	})
	if got := fetch(t, st, "/note.txt"); got != "survives preemption" {
		t.Errorf("on the replacement the endpoint serves %q; want the file written before the notice", got)
	}
	if st.Preemptions != 1 || st.Moves != 1 {
		t.Errorf("%d preemptions, %d moves; want one of each", st.Preemptions, st.Moves)
	}
	if _, err := jobs.DeleteDev(ctx, s.Client, ds.ID, true, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
}

// TestDevEnvironmentCommandThatExitsAtOnce: an environment whose command
// fails to start fails, with the command's last lines, and nothing is
// left held.
func TestDevEnvironmentCommandThatExitsAtOnce(t *testing.T) {
	parallel(t)
	s := startStack(t, func(c *controlplane.Config) { c.Provider = controlplane.ProviderLocal })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ds := devSpec("broken", 0)
	ds.Command = []string{"sh", "-c", "echo 'jupyter: command not found' >&2; exit 127"}
	run, err := jobs.StartDev(ctx, s.Client, ds, "test@refuel")
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Get(ctx, nil); err == nil {
		t.Fatal("the environment of a command that cannot start ended well; want it failed")
	}
	st := waitDev(t, ctx, s, ds.ID, "failed", func(st devenv.Status) bool { return st.State == devenv.StateFailed })
	if !strings.Contains(st.Reason, "command not found") || st.Instance != nil {
		t.Errorf("failed because %q holding %+v; want the command's last lines, nothing held", st.Reason, st.Instance)
	}
	var c client.Client = s.Client
	w, err := jobs.Describe(ctx, c, ds.ID)
	if err != nil || w.Running {
		t.Errorf("the failed environment's workflow: %+v, %v; want it ended", w, err)
	}
}
