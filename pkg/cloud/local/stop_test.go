package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"refuel/pkg/capacity"
)

// TestStopKeepsTheVolumeAndStartRunsTheAgentAgain stops an on-demand
// instance (its agent ends, a file on its scratch space stays, it is
// listed as stopped and not as running), starts it (the agent runs again
// in the same space), refuses to stop a spot one, and releasing a stopped
// one removes its space.
func TestStopKeepsTheVolumeAndStartRunsTheAgentAgain(t *testing.T) {
	ctx := context.Background()
	offs := DefaultOfferings() // spot a, on-demand a, …
	dir := t.TempDir()
	c, err := New(Config{LauncherConfig: LauncherConfig{AgentCommand: fakeAgent(false), Dir: dir, ReadyTimeout: 5 * time.Second}, StartTime: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	inst, err := c.Acquire(ctx, request("svc", 1, offs[1]))
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(dir, inst.ID, "model.bin")
	if err := os.WriteFile(model, []byte("weights"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(ctx, inst.ID); err != nil {
		t.Fatal(err)
	}
	if _, st, _ := c.Describe(ctx, inst.ID); st != capacity.StateStopped || c.launcher.Alive(inst.ID) {
		t.Errorf("after Stop: %s, agent alive %v; want stopped, no agent", st, c.launcher.Alive(inst.ID))
	}
	running, _ := c.List(ctx, nil)
	stopped, _ := c.ListStopped(ctx, map[string]string{capacity.TagRun: "svc"})
	if len(running) != 0 || len(stopped) != 1 || stopped[0].ID != inst.ID {
		t.Errorf("running %v, stopped %v; want %s stopped only", running, stopped, inst.ID)
	}
	if _, err := os.Stat(model); err != nil {
		t.Errorf("the stopped instance lost its volume: %v", err)
	}
	if _, err := c.Start(ctx, inst.ID); err != nil {
		t.Fatal(err)
	}
	if _, st, _ := c.Describe(ctx, inst.ID); st != capacity.StateRunning || !c.launcher.Alive(inst.ID) {
		t.Errorf("after Start: %s, agent alive %v; want running with its agent", st, c.launcher.Alive(inst.ID))
	}
	if _, err := os.Stat(model); err != nil {
		t.Errorf("the started instance lost its volume: %v", err)
	}

	spot, err := c.Acquire(ctx, request("svc", 2, offs[0]))
	if err != nil {
		t.Fatal(err)
	}
	var ns *capacity.NotStoppableError
	if err := c.Stop(ctx, spot.ID); !errors.As(err, &ns) {
		t.Errorf("stopping a spot instance: %v; want *capacity.NotStoppableError", err)
	}

	if err := c.Stop(ctx, inst.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(ctx, inst.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, inst.ID)); !os.IsNotExist(err) {
		t.Errorf("a released stopped instance left its space: %v", err)
	}
	if p := c.StoppedPricePerHour(inst.Offering); p != DefaultVolumePricePerHour {
		t.Errorf("stopped price %g; want %g", p, DefaultVolumePricePerHour)
	}
}
