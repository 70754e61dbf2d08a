package aws

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"refuel/pkg/capacity"
	"refuel/pkg/cloud/sim"
	"refuel/pkg/cloud/sim/ec2api"
	"refuel/pkg/trace"
)

// Against the sim's EC2 endpoint, through the real SDK: a spot instance
// the market took (its notice ran out) is reclaimed; one released, one
// taken before, and one of another run are not listed.
func TestReclaimedSpotInstancesAgainstTheSimEndpoint(t *testing.T) {
	cloud, err := sim.New(sim.Config{Pools: []sim.PoolConfig{
		{Pool: sim.Pool{Zone: "us-east-1a", InstanceType: "p3.2xlarge"}, Spot: &trace.Trace{Gap: 10 * time.Minute, Points: []int{4}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ec2api.New(cloud, nil))
	t.Cleanup(func() {
		srv.Close()
		_ = cloud.Close()
	})
	ctx := context.Background()
	c, err := New(ctx, Config{Region: "us-east-1", Endpoint: srv.URL, AccessKeyID: "test", SecretAccessKey: "test",
		LaunchTemplate: LaunchTemplate{Name: "refuel-node"}, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	spot := offer("p3.2xlarge", "us-east-1a", capacity.Spot, 0.97)
	onDemand := offer("p3.2xlarge", "us-east-1a", capacity.OnDemand, 3.06)
	launch := func(run string, o capacity.Offering) capacity.Instance {
		t.Helper()
		inst, err := c.Acquire(ctx, capacity.Request{RunID: run, Offerings: []capacity.Offering{o},
			Tags: map[string]string{capacity.TagManagedBy: capacity.ManagedBy, capacity.TagRun: run, capacity.TagDeployment: "d"}})
		if err != nil {
			t.Fatal(err)
		}
		return inst
	}
	taken, released, running, ondemand := launch("taken", spot), launch("released", spot), launch("running", spot), launch("od", onDemand)
	other := launch("other", spot)
	if err := c.Release(ctx, released.ID); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{taken.ID, other.ID} {
		if _, err := cloud.Interrupt(id, 0); err != nil {
			t.Fatal(err)
		}
	}
	// An on-demand instance taken is no spot reclaim, whether or not the
	// sim takes it.
	_, _ = cloud.Interrupt(ondemand.ID, 0)
	got, err := c.Reclaimed(ctx, map[string]string{capacity.TagDeployment: "d", capacity.TagRun: "taken"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != taken.ID || got[0].Tags[capacity.TagRun] != "taken" || got[0].Offering.Market != capacity.Spot {
		t.Errorf("reclaimed %+v; want only %s, with its tags", got, taken.ID)
	}
	all, err := c.Reclaimed(ctx, map[string]string{capacity.TagDeployment: "d"})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, i := range all {
		ids[i.ID] = true
	}
	if !ids[taken.ID] || !ids[other.ID] || ids[released.ID] || ids[running.ID] || ids[ondemand.ID] {
		t.Errorf("reclaimed %v; want %s and %s: not the released %s, the running %s or the on-demand %s",
			ids, taken.ID, other.ID, released.ID, running.ID, ondemand.ID)
	}
}
