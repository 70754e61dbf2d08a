package tests

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"refuel/controlplane"
	"refuel/jobs"
	"refuel/pkg/cloud/local"
	"refuel/pkg/policy"
)

// TestWorkersOfADeploymentShareTheMarketMemory: two workers of one
// deployment, each with a data dir of its own, given one market memory.
// What a drill on the first teaches its pools (the preemption, the time
// held, the checkpoint writes) is what the second reads, and what a
// worker started afterwards on an empty disk reads; a worker of another
// deployment on the same bucket learned nothing.
func TestWorkersOfADeploymentShareTheMarketMemory(t *testing.T) {
	parallel(t)
	memory := "file://" + filepath.Join(t.TempDir(), "bucket")
	worker := func(deployment string) *controlplane.Stack {
		return startStack(t, func(c *controlplane.Config) {
			c.MarketMemory, c.Deployment, c.MetricsAddr = memory, deployment, "-"
		})
	}
	first, second, other := worker("shared"), worker("shared"), worker("elsewhere")
	ctx := context.Background()
	rep, err := jobs.Drill(ctx, first.Client, jobs.DrillOptions{
		Work: 6 * time.Second, Interval: time.Second, NoticeGrace: 30 * time.Second, Timeout: 3 * time.Minute,
	})
	if err != nil || !rep.Passed {
		t.Fatalf("drill on the first worker: %+v, %v", rep, err)
	}
	learned := func(s *controlplane.Stack) policy.CheckpointLog {
		t.Helper()
		v, err := s.Memory.View(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var l policy.CheckpointLog
		for _, o := range local.DefaultOfferings() {
			l = l.Add(v.Pools[o.Key()])
		}
		return l
	}
	taught := learned(first)
	if taught.Preemptions != 1 || taught.Writes == 0 {
		t.Fatalf("the first worker learned %+v from the drill; want its preemption and writes", taught)
	}
	if got := learned(second); got != taught {
		t.Errorf("the second worker of the deployment reads %+v; want what the first learned, %+v", got, taught)
	}
	if got := learned(other); got != (policy.CheckpointLog{}) {
		t.Errorf("a worker of another deployment reads %+v; want nothing", got)
	}

	if got := learned(worker("shared")); got != taught {
		t.Errorf("a worker started after the drill on an empty disk reads %+v; want %+v", got, taught)
	}
}
