package tests

import (
	"bytes"
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"refuel/workflows/training"
	"refuel/workflows/workload"

	"go.temporal.io/sdk/client"

	"refuel/jobs"
	"refuel/pkg/devserver"
	"refuel/pkg/spec"
	"refuel/pkg/trainer"
	"refuel/workflows"
)

// previousRelease is the last commit before runs rode out the control
// plane: a worker built from it is the build a rolling upgrade replaces.
const previousRelease = "a5eee473ef95bf4dd0d23c9cb47ea42ffe9cc800"

// TestRollingUpgradeMidRun upgrades the control plane while runs train:
// a worker of the previous release starts them, a worker of this build
// joins, the old one is stopped (SIGTERM), and the new one carries every
// run to its end. The new build replays the old build's histories
// (workflow.GetVersion keeps their commands), attaches to attempts the
// old one started, and neither the instances nor their agents notice:
// every run completes on its first attempt and one instance, with the
// uninterrupted model.
func TestRollingUpgradeMidRun(t *testing.T) {
	parallelFirst(t)
	worker, _ := refuelBinaries(t)
	old := previousWorker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	srv := startDevserver(ctx, t, devserver.Options{FrontendAddr: "127.0.0.1:0", SearchAttributes: workflows.SearchAttributeTypes})
	c, err := client.Dial(client.Options{HostPort: srv.FrontendAddr(), Logger: quietSDKLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cloudAddr := freeAddr(t)
	cloudURL := "http://" + cloudAddr
	cloud := startProcess(t, "ec2-sim", cleanEnv(), worker, "ec2-sim", "--listen", cloudAddr,
		"--traces", market(t, map[string][]int{"us-west-2a": {4, 4}, "us-west-2b": {4, 4}}),
		"--speed", "0", "--temporal-address", srv.FrontendAddr(),
		"--data-dir", t.TempDir(), "--demo-step-time", demoStepTime.String(), "--report", "0", "--log-level", "warn")
	cloud.waitReady(t, cloudURL+"/sim/market", time.Minute)
	previous := startAWSWorker(t, "worker-previous", old, srv.FrontendAddr(), cloudURL)
	store := "file://" + t.TempDir()
	ids := []string{"upgrade-1", "upgrade-2"}
	for _, id := range ids {
		js := quickJob(id, spec.TierFlexible)
		js.Work, js.Checkpoint.URL, js.Checkpoint.Interval = spec.Duration(30*time.Second), store, "2s"
		if _, err := jobs.Submit(ctx, c, js); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		if _, err := jobs.WaitFor(ctx, c, id, func(st training.Status) bool {
			return st.State == workflows.StateRunning && st.LastCheckpoint != nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	next := startAWSWorker(t, "worker-next", worker, srv.FrontendAddr(), cloudURL)
	previous.stop(t)
	t.Log("runs train; the worker of the previous release stopped, this build's serves")

	for _, id := range ids {
		final, err := jobs.WaitFor(ctx, c, id, jobs.Ended)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		want := trainer.Train(trainer.Config{Steps: final.TotalSteps, Seed: trainer.DefaultSeed}).Digest()
		if final.State != workflows.StateCompleted || final.Attempt != 1 || !maps.Equal(final.Restarts, (workload.Restarts{})) || final.Preemptions != 0 || final.ModelDigest != want {
			t.Errorf("%s: %s on attempt %d, restarts %+v, %d preemptions, model %s; want completed on attempt 1 with none and the uninterrupted model %s",
				id, final.State, final.Attempt, final.Restarts, final.Preemptions, final.ModelDigest, want)
		}
		if by := lastWorkflowTaskBy(ctx, t, c, id); by != next.identity() {
			t.Errorf("%s: its last workflow task was %s's; want the new worker's %s", id, by, next.identity())
		}
	}
}

// previousWorker builds the worker of the previous release from this
// checkout's history, or skips where there is none (an export without
// git).
func previousWorker(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	archive := exec.Command("git", "archive", "--format=tar", previousRelease)
	archive.Dir = ".."
	tarball, err := archive.Output()
	if err != nil {
		t.Skipf("no previous release to upgrade from in this checkout (git archive %s: %v)", previousRelease[:7], err)
	}
	untar := exec.Command("tar", "-x", "-C", dir)
	untar.Stdin = bytes.NewReader(tarball)
	if out, err := untar.CombinedOutput(); err != nil {
		t.Fatalf("unpacking the previous release: %v\n%s", err, out)
	}
	bin := filepath.Join(dir, "worker-previous")
	build := exec.Command("go", "build", "-o", bin, "./worker")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the previous release's worker: %v\n%s", err, out)
	}
	return bin
}
