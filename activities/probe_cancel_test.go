package activities

import (
	"context"
	"testing"
	"time"

	"refuel/pkg/capacity"
	"refuel/pkg/cloud/sim"
	"refuel/pkg/trace"
)

// A probe cancelled midway (its run ended) still lets go of what it had:
// nothing it launched is left to the janitor.
func TestACancelledProbeLetsGo(t *testing.T) {
	cloud, err := sim.New(sim.Config{Pools: []sim.PoolConfig{
		{Pool: sim.Pool{Zone: "us-west-2a", InstanceType: "p3.2xlarge"}, Spot: &trace.Trace{Gap: 10 * time.Minute, Points: []int{1}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cloud.Close() })
	a := &Capacity{Providers: []capacity.Provider{ctxRelease{cloud}}}
	inst, err := cloud.Acquire(context.Background(), capacity.Request{RunID: "probing", Probe: "p1",
		Offerings: []capacity.Offering{{Provider: sim.ProviderName, InstanceType: "p3.2xlarge", Zone: "us-west-2a", Market: capacity.Spot}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.letGo(ctx, []capacity.Instance{inst}); err != nil {
		t.Fatalf("letting go under a cancelled context: %v", err)
	}
	if st, err := cloud.Status(inst.ID); err != nil || st.State != capacity.StateTerminated {
		t.Errorf("probe instance %s: %v %v; want terminated", inst.ID, st.State, err)
	}
}

// ctxRelease is a provider whose Release, as a real cloud's API call,
// fails under a context already cancelled.
type ctxRelease struct{ *sim.Cloud }

func (p ctxRelease) Release(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return p.Cloud.Release(ctx, id)
}
