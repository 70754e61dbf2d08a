package tests

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"refuel/workflows/capacitypool"
	"refuel/workflows/training"

	"refuel/controlplane"
	"refuel/jobs"
	"refuel/pkg/capacity"
	"refuel/pkg/cloud/local"
	"refuel/pkg/pool"
	"refuel/pkg/spec"
	"refuel/workflows"
)

// joinHeartbeat is how long a joined machine may be silent before it is
// lost, in this test: shorter than the runs' heartbeat timeout
// (joinRunHeartbeat), so a run whose machine died finds it lost when it
// asks. Both leave room for a CI machine busy with the other tests.
const (
	joinHeartbeat    = 5 * time.Second
	joinRunHeartbeat = 8 * time.Second
)

// TestJoinedBaseMachines is issue 22 end to end: two machines join the
// base group (two `worker join` processes, each with a directory of its
// own, as on two servers); runs fill them before burst; one machine is
// drained (its run checkpoints, moves and resumes), the other SIGKILLed
// (its run recovers on burst, cause node-lost, against no max_restarts
// and no spot preemption); a machine with a wrong token is refused; and
// the killed machine restarted rejoins as one machine.
func TestJoinedBaseMachines(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "join-token")
	if err := os.WriteFile(tokenFile, []byte("3f9c2a7d1e8b4c6f0a5d9e2b7c1f4a8e\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var burst []capacity.Offering
	for _, o := range local.DefaultOfferings() {
		if o.Zone == "local-a" {
			burst = append(burst, o)
		}
	}
	pools := pool.Config{
		Base:  pool.BaseGroup{Name: "dc", Join: true, TokenFile: tokenFile, HeartbeatTimeout: spec.Duration(joinHeartbeat)},
		Burst: []pool.BurstPool{{Name: "cloud", MaxInstances: 4, Offerings: burst}},
	}
	pools.Normalize()
	store := "file://" + filepath.Join(dir, "checkpoints")
	s := startStack(t, func(c *controlplane.Config) {
		c.Provider, c.Pools, c.CheckpointURL = controlplane.ProviderLocal, &pools, store
		c.Workflows = killWorkflows()
		c.Workflows.Run.HeartbeatTimeout = joinRunHeartbeat
	})
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	self, _ := os.Executable()
	join := func(name, token string) (*exec.Cmd, *bytes.Buffer) {
		t.Helper()
		mdir := filepath.Join(dir, name)
		if err := os.MkdirAll(mdir, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(self, "join", "--name", name, "--gpus", "1", "--zone", "dc", "--token-file", token,
			"--dir", mdir, "--temporal-address", s.Address, "--checkpoint-url", store,
			"--demo-step-time", demoStepTime.String(), "--stop-timeout", "20s", "--log-level", "warn")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_, _ = cmd.Process.Wait()
		})
		return cmd, &stderr
	}
	waitNodes := func(what string, cond func(map[string]jobs.Node) bool) map[string]jobs.Node {
		t.Helper()
		var byName map[string]jobs.Node
		err := waitUntil(time.Minute, func() bool {
			nodes, err := jobs.Nodes(ctx, s.Client)
			if err != nil {
				return false
			}
			byName = map[string]jobs.Node{}
			for _, n := range nodes {
				if _, twice := byName[n.Name]; twice {
					t.Errorf("machine %s listed twice", n.Name)
				}
				byName[n.Name] = n
			}
			return cond(byName)
		})
		if err != nil {
			t.Fatalf("machines: waiting for %s: last %+v", what, byName)
		}
		return byName
	}
	waitRun := func(id, what string, cond func(training.Status) bool) training.Status {
		t.Helper()
		st, err := jobs.WaitFor(ctx, s.Client, id, cond)
		if err != nil {
			t.Fatalf("%s: waiting for %s: %v (last status %s, admission %+v)", id, what, err, st.State, st.Admission)
		}
		return st
	}

	procs := map[string]*exec.Cmd{}
	for _, m := range []string{"m1", "m2"} {
		procs[m], _ = join(m, tokenFile)
	}
	waitNodes("both machines ready", func(ns map[string]jobs.Node) bool {
		return ns["m1"].State == "ready" && ns["m2"].State == "ready"
	})
	waitPool(t, ctx, s, "two base GPUs", func(p capacitypool.Status) bool { return p.BaseGPUs == 2 })

	// Runs fill the joined machines before burst.
	for _, id := range []string{"j1", "j2", "j3"} {
		js := quickJob(id, spec.TierFlexible)
		js.Work = spec.Duration(40 * time.Second)
		if _, err := jobs.Submit(ctx, s.Client, js); err != nil {
			t.Fatal(err)
		}
		waitRun(id, "training with a checkpoint", func(st training.Status) bool {
			return st.State == workflows.StateRunning && st.LastCheckpoint != nil && st.Admission != nil && st.Admission.Layer != ""
		})
	}
	on := map[string]string{}
	for _, id := range []string{"j1", "j2", "j3"} {
		st, _ := jobs.Status(ctx, s.Client, id)
		on[id] = st.Admission.Layer + ":" + st.Admission.Node
	}
	if on["j1"] != "base:m1" && on["j1"] != "base:m2" || on["j2"] == on["j1"] || !strings.HasPrefix(on["j2"], "base:") || on["j3"] != "burst:" {
		t.Fatalf("placed %v; want j1 and j2 on the two machines, j3 on burst", on)
	}
	drained := strings.TrimPrefix(on["j1"], "base:")
	killed := strings.TrimPrefix(on["j2"], "base:")

	// Drain: j1 checkpoints and moves to burst (the other machine is
	// busy); the drain returns once the machine is empty.
	if err := jobs.Drain(ctx, s.Client, drained); err != nil {
		t.Fatal(err)
	}
	if err := jobs.WaitEmpty(ctx, s.Client, drained, 200*time.Millisecond, nil); err != nil {
		t.Fatal(err)
	}
	moved := waitRun("j1", "resuming on burst", func(st training.Status) bool {
		return st.Admission.Yields == 1 && st.Admission.Layer == "burst" && st.LastRecovery != nil && !st.LastRecovery.ResumedAt.IsZero()
	})
	if y := moved.Admission.LastYield; !strings.Contains(y.Reason, "draining") || moved.LastRecovery.ResumedFromStep < y.CheckpointStep || y.CheckpointStep == 0 {
		t.Errorf("j1 moved for %q at checkpoint %d, resumed from %d; want a drain, resumed from its checkpoint", y.Reason, y.CheckpointStep, moved.LastRecovery.ResumedFromStep)
	}
	waitNodes("the drained machine draining", func(ns map[string]jobs.Node) bool {
		return ns[drained].State == "draining" && len(ns[drained].Runs) == 0
	})

	// SIGKILL: j2's machine goes silent; j2 recovers on burst.
	if err := procs[killed].Process.Kill(); err != nil {
		t.Fatal(err)
	}
	lostAt := time.Now()
	recovered := waitRun("j2", "recovering on burst", func(st training.Status) bool {
		return st.Admission.Layer == "burst" && st.LastRecovery != nil && !st.LastRecovery.ResumedAt.IsZero() && st.Restarts[capacity.NodeLost] == 1
	})
	t.Logf("j2 resumed on burst %.1fs after its machine's SIGKILL, from step %d", recovered.LastRecovery.ResumedAt.Sub(lostAt).Seconds(), recovered.LastRecovery.ResumedFromStep)
	if recovered.Preemptions != 0 || recovered.Restarts.Total() != 0 || !hasFailure("node-lost")(recovered) {
		t.Errorf("j2 booked %d preemptions, restarts %+v, failures %+v; want cause node-lost only", recovered.Preemptions, recovered.Restarts, recovered.Failures)
	}
	waitNodes("the killed machine lost", func(ns map[string]jobs.Node) bool { return ns[killed].State == "lost" })

	// A wrong token is refused, clearly, and nothing is placed there.
	wrong := filepath.Join(dir, "wrong-token")
	if err := os.WriteFile(wrong, []byte("not-this-deployments-token-0123"), 0o600); err != nil {
		t.Fatal(err)
	}
	intruder, intruderErr := join("m3", wrong)
	if err := intruder.Wait(); err == nil || !strings.Contains(intruderErr.String(), "join refused") {
		t.Errorf("a machine with a wrong token: %v, %q; want it refused", err, intruderErr.String())
	}

	// The killed machine restarts and rejoins: one machine, joined twice.
	_, _ = join(killed, tokenFile)
	ns := waitNodes("the killed machine back", func(ns map[string]jobs.Node) bool { return ns[killed].State == "ready" })
	if len(ns) != 2 || ns[killed].Joins != 2 {
		t.Errorf("machines after the rejoin: %+v; want m1 and m2, %s joined twice", ns, killed)
	}
	waitPool(t, ctx, s, "one base GPU ready (the other draining)", func(p capacitypool.Status) bool { return p.BaseGPUs == 1 })
	recordHistory(t, s.Client, capacitypool.BaseNodeID(killed), "base-node")
	recordHistory(t, s.Client, "j2", "training-run-node-lost")
	for _, id := range []string{"j1", "j2", "j3"} {
		_ = s.Client.CancelWorkflow(ctx, id, "")
	}
}
