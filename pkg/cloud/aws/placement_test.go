package aws

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"refuel/pkg/capacity"
	"refuel/pkg/cloud/sim"
	"refuel/pkg/cloud/sim/ec2api"
	"refuel/pkg/trace"
)

// Placement scores through the real SDK against the sim's EC2 endpoint,
// which scores from its traces: us-east-1a held spot in 2 of the last 3
// ticks, us-east-1b in none.
func TestPlacementScoresAgainstTheSimEndpoint(t *testing.T) {
	stock := func(p ...int) *trace.Trace { return &trace.Trace{Gap: 10 * time.Minute, Points: p} }
	cloud, err := sim.New(sim.Config{Pools: []sim.PoolConfig{
		{Pool: sim.Pool{Zone: "us-east-1a", InstanceType: "p3.2xlarge"}, Spot: stock(1, 0, 1)},
		{Pool: sim.Pool{Zone: "us-east-1b", InstanceType: "p3.2xlarge"}, Spot: stock(0)},
		{Pool: sim.Pool{Zone: "us-east-1a", InstanceType: "g5.xlarge"}, Spot: stock(1)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	cloud.Advance(2)
	srv := httptest.NewServer(ec2api.New(cloud, nil))
	t.Cleanup(func() {
		srv.Close()
		_ = cloud.Close()
	})
	c, err := New(context.Background(), Config{Region: "us-east-1", Endpoint: srv.URL, AccessKeyID: "test", SecretAccessKey: "test",
		LaunchTemplate: LaunchTemplate{Name: "refuel-node"}, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	p3a, p3b := offer("p3.2xlarge", "us-east-1a", capacity.Spot, 0.97), offer("p3.2xlarge", "us-east-1b", capacity.Spot, 0.97)
	g5a := offer("g5.xlarge", "us-east-1a", capacity.Spot, 0.4)
	other := p3a
	other.Provider = "gcp"
	got, err := c.PlacementScores(context.Background(), []capacity.Offering{p3a, p3b, g5a, offer("p3.2xlarge", "us-east-1a", capacity.OnDemand, 3.06), other})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{p3a.Key(): 7, p3b.Key(): 1, g5a.Key(): 10}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("scores got(-), want(+):\n%s", diff)
	}
}
