package aws

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
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
	h := ec2api.New(cloud, nil)
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.Close()
		_ = cloud.Close()
	})
	now := time.Date(2023, 2, 15, 0, 0, 0, 0, time.UTC)
	c, err := New(context.Background(), Config{Region: "us-east-1", Endpoint: srv.URL, AccessKeyID: "test", SecretAccessKey: "test",
		LaunchTemplate: LaunchTemplate{Name: "refuel-node"}, MaxAttempts: 1, Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	p3a, p3b := offer("p3.2xlarge", "us-east-1a", capacity.Spot, 0.97), offer("p3.2xlarge", "us-east-1b", capacity.Spot, 0.97)
	g5a := offer("g5.xlarge", "us-east-1a", capacity.Spot, 0.4)
	other := p3a
	other.Provider = "gcp"
	offerings := []capacity.Offering{p3a, p3b, g5a, offer("p3.2xlarge", "us-east-1a", capacity.OnDemand, 3.06), other}
	want := map[string]int{p3a.Key(): 7, p3b.Key(): 1, g5a.Key(): 10}
	// Read, then reused while fresh, then read again: two calls per type.
	for _, later := range []time.Duration{0, placementScoresFresh - time.Second, placementScoresFresh} {
		now = now.Add(later)
		got, err := c.PlacementScores(context.Background(), offerings)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(got, want); diff != "" {
			t.Errorf("scores got(-), want(+):\n%s", diff)
		}
	}
	if n := calls.Load(); n != 8 {
		t.Errorf("%d calls to EC2; want 8 (zones and scores for two types, twice)", n)
	}
}
